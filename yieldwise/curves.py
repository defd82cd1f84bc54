"""Cost curves and Brier curves, read against the utility yield (docs/toolkit.md, section 2).

Both curves show a binary classifier's expected cost over a whole range of
*operating conditions* (how costly each kind of error is, and for cost curves also
the class balance), and both areas average over that range. A single problem has
one operating condition, fixed by its utility matrix and its class balance: the
curve's height there, times the problem's own scale, is its regret, and
:class:`OperatingCondition` converts one into the other. The areas are the
expected regret under one particular, arbitrary spread of utility matrices, which
is why they cannot replace the problem's own matrix.

Conventions
-----------
Costs of the two errors under a binary utility matrix ``U[decision, class]``
(``p`` = positive, ``n`` = negative), the regret of each wrong decision:
``C_FN = U[p,p] - U[n,p]`` (missing a positive) and ``C_FP = U[n,n] - U[p,n]``
(a false alarm). With ``B`` the share of positives,
``yield = max_yield - B C_FN FNR - (1 - B) C_FP FPR``,
``max_yield = B U[p,p] + (1 - B) U[n,n]`` (theory 1.4, written as costs).

* **Cost curve** (Drummond and Holte, 2006), ``axis="probability_cost"``:
  ``x = PC = B C_FN / (B C_FN + (1 - B) C_FP)``, the "probability cost" of a
  positive; each ROC point is the line ``NEC(x) = FNR x + FPR (1 - x)`` (normalised
  expected cost, 0 for a perfect classifier, at most 1 at its own best); the
  curve is their lower envelope, whose lines are those of the ROC convex hull's
  vertices. ``yield = max_yield - (B C_FN + (1 - B) C_FP) NEC(PC)``.
* **Cost-proportion space** (Hernandez-Orallo, Flach and Ferri, 2011),
  ``axis="cost_proportion"``: ``x = c = C_FP / (C_FP + C_FN)``, the cost of a
  false alarm as a share of both costs (the probability threshold theory 2
  implies); each ROC point is ``Q(c) = 2 [c (1 - B) FPR + (1 - c) B FNR]`` and
  ``yield = max_yield - (C_FP + C_FN) Q(c) / 2``. The Brier curve lives here.
* **Brier curve**: the same loss ``Q(c)`` when the threshold on the
  probabilities is ``c`` itself (decide positive when ``p > c``), not the best one
  for ``c``. Its area is the Brier score ``mean (p - y)^2``; with the hull's
  (isotonic) probabilities it coincides with the cost-proportion cost curve.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from ._validation import Label, as_float_array
from .metrics import UndefinedMetricError, binary_truth
from .roc import ROCHull, check_prevalence, hull_of, prepare_binary
from .utility import UtilityMatrix

__all__ = [
    "BrierCurve",
    "CostCurve",
    "OperatingCondition",
    "brier_curve",
    "cost_curve",
    "operating_condition",
]

Axis = Literal["probability_cost", "cost_proportion"]
_AXES = ("probability_cost", "cost_proportion")


# ----------------------------------------------------------- operating conditions
@dataclass(frozen=True)
class OperatingCondition:
    """Where one utility matrix and class balance sit on the curves' x axes.

    Attributes
    ----------
    probability_cost : float
        ``PC = B C_FN / (B C_FN + (1 - B) C_FP)``, the cost curve's x.
    cost_proportion : float
        ``c = C_FP / (C_FP + C_FN)``, the Brier curve's x (and the probability
        threshold for deciding "positive", theory 2).
    cost_fn, cost_fp : float
        ``C_FN = U[p,p] - U[n,p]`` and ``C_FP = U[n,n] - U[p,n]``.
    prevalence : float
        ``B``, the share of positives.
    max_yield : float
        ``B U[p,p] + (1 - B) U[n,n]``, the yield of a perfect classifier.
    """

    probability_cost: float
    cost_proportion: float
    cost_fn: float
    cost_fp: float
    prevalence: float
    max_yield: float

    def utility_yield(self, value: Any, axis: Axis = "probability_cost") -> np.ndarray | float:
        """The utility yield that a cost-curve height at this condition stands for.

        ``max_yield - (B C_FN + (1 - B) C_FP) NEC`` on the probability-cost axis,
        ``max_yield - (C_FP + C_FN) Q / 2`` on the cost-proportion axis.
        """
        v = np.asarray(value, dtype=float)
        if axis == "probability_cost":
            scale = self.prevalence * self.cost_fn + (1 - self.prevalence) * self.cost_fp
        elif axis == "cost_proportion":
            scale = (self.cost_fp + self.cost_fn) / 2
        else:
            raise ValueError(f"axis must be one of {list(_AXES)}, found {axis!r}")
        out = self.max_yield - scale * v
        return float(out) if out.ndim == 0 else out


def operating_condition(
    utility: UtilityMatrix, prevalence: float, positive: Label | None = None
) -> OperatingCondition:
    """The cost curves' coordinates of a binary utility matrix at a class balance.

    Parameters
    ----------
    utility : UtilityMatrix
        Binary (2x2); decisions are matched to classes as in
        :func:`yieldwise.roc.best_operating_point`.
    prevalence : float
        Share of positives ``B``, strictly between 0 and 1.
    positive : label, optional
        The positive class; default the utility's first class.

    Examples
    --------
    Treating an ill patient gains 10, treating a healthy one costs 1; 20 % are ill:

    >>> from yieldwise import UtilityMatrix
    >>> u = UtilityMatrix([[10, -1], [0, 0]], decisions=["treat", "wait"],
    ...                   classes=["ill", "healthy"])
    >>> oc = operating_condition(u, prevalence=0.2)
    >>> oc.cost_fn, oc.cost_fp  # missing an ill patient forgoes 10; a false alarm costs 1
    (10.0, 1.0)
    >>> round(oc.probability_cost, 4), round(oc.cost_proportion, 4)  # 2 / 2.8, 1 / 11
    (0.7143, 0.0909)
    """
    if not isinstance(utility, UtilityMatrix):
        raise TypeError(f"utility must be a UtilityMatrix, found {type(utility).__name__}")
    b = check_prevalence(prevalence)
    labels = np.array(utility.classes, dtype=object)
    # no scores here to misread: the default positive class needs no warning
    binary = prepare_binary(labels, utility, positive, utility.classes, None, warn_default=False)
    u = binary.u
    cost_fn = float(u[0, 0] - u[1, 0])
    cost_fp = float(u[1, 1] - u[0, 1])
    if cost_fn < 0 or cost_fp < 0:
        raise ValueError(
            "utility must value each correct decision at least as much as the wrong one: "
            f"found U[p,p] - U[n,p] = {cost_fn} and U[n,n] - U[p,n] = {cost_fp}; a cost curve "
            "has no place for a negative cost"
        )
    return OperatingCondition(
        probability_cost=b * cost_fn / (b * cost_fn + (1 - b) * cost_fp),
        cost_proportion=cost_fp / (cost_fp + cost_fn),
        cost_fn=cost_fn,
        cost_fp=cost_fp,
        prevalence=b,
        max_yield=float(b * u[0, 0] + (1 - b) * u[1, 1]),
    )


# ------------------------------------------------------------------- cost curves
def _line_ends(fpr: Any, tpr: Any, prevalence: float, axis: str) -> tuple[Any, Any]:
    """Heights at x = 0 and x = 1 of the lines of ROC points ``(fpr, tpr)``."""
    if axis == "probability_cost":
        return fpr, 1 - tpr
    return 2 * prevalence * (1 - tpr), 2 * (1 - prevalence) * fpr


@dataclass(frozen=True, eq=False)
class CostCurve:
    """A cost curve: the lower envelope of one line per ROC point (see :func:`cost_curve`).

    Attributes
    ----------
    frame : pandas.DataFrame
        The envelope at its breakpoints, x increasing: ``x``, ``cost`` (the
        envelope's height), and, for the stretch from this breakpoint to the next,
        the optimal hull vertex's ``threshold``, ``fpr`` and ``tpr``. The envelope
        is linear between breakpoints.
    area : float
        Area under the envelope: the mean of the minimal cost over ``x`` uniform on
        [0, 1].
    lines : pandas.DataFrame
        Every empirical ROC point (``threshold``, ``fpr``, ``tpr``) with its line's
        heights ``at_0`` and ``at_1``.
    axis : {"probability_cost", "cost_proportion"}
    hull : yieldwise.roc.ROCHull
    """

    frame: pd.DataFrame
    area: float
    lines: pd.DataFrame
    axis: str
    hull: ROCHull

    def at(self, x: Any) -> np.ndarray:
        """The envelope's height at ``x`` (in [0, 1])."""
        values = as_float_array(x, "x", ndim=(0, 1))
        if (values < 0).any() or (values > 1).any():
            raise ValueError(f"x must lie in [0, 1], found [{values.min()}, {values.max()}]")
        return np.interp(values, self.frame["x"], self.frame["cost"])


def cost_curve(
    scores: Any,
    true_classes: Any,
    positive: Label | None = None,
    classes: Any = None,
    axis: Axis = "probability_cost",
) -> CostCurve:
    """The cost curve of a scoring classifier (Drummond and Holte, 2006).

    Each point of the empirical ROC curve is a line over the operating conditions
    ``x``; the cost curve is their lower envelope, the expected cost of the best
    threshold at each ``x``. Its lines are those of the ROC convex hull's
    vertices, with breakpoints where consecutive vertices' lines cross: on the
    probability-cost axis at ``x = 1 / (1 + s)`` for hull slope ``s``, on the
    cost-proportion axis at the hull's calibrated probability of the segment.

    Parameters
    ----------
    scores : 1-D array-like of floats
        Higher means "more positive".
    true_classes : 1-D label sequence
        The true class of each item, one per score: the "labels" of the
        evaluation literature. The keyword is ``true_classes``, as everywhere
        in yieldwise; ``labels=`` is not accepted (no alias). Any hashable
        labels; ``positive`` names the positive one.
    positive, classes
        As in :func:`yieldwise.roc.convex_hull`.
    axis : {"probability_cost", "cost_proportion"}, default "probability_cost"
        ``"probability_cost"``: Drummond and Holte's ``x = PC`` against the
        normalised expected cost ``NEC = FNR x + FPR (1 - x)`` (the module notes);
        ``"cost_proportion"``: ``x = c`` against ``Q = 2 [c (1 - B) FPR + (1 - c) B
        FNR]``, the scale of :func:`brier_curve`.

    Returns
    -------
    CostCurve

    Examples
    --------
    Three positives and a negative, ranked third. The hull has vertices (0, 0),
    (0, 2/3) and (1, 1); on the probability-cost axis their lines are ``x``,
    ``x / 3`` and ``1 - x``, and the last two cross at ``x = 3/4``:

    >>> curve = cost_curve([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 1], positive=1)
    >>> curve.frame.round(4)
          x  cost  threshold  fpr     tpr
    0  0.00  0.00        0.8  0.0  0.6667
    1  0.75  0.25        0.6  1.0  1.0000
    2  1.00  0.00        0.6  1.0  1.0000
    >>> curve.area  # two triangles: 0.75 * 0.25 / 2 + 0.25 * 0.25 / 2
    0.125

    Under a utility matrix and class balance, the envelope's height is the best
    threshold's regret (module notes):

    >>> from yieldwise import UtilityMatrix, roc
    >>> u = UtilityMatrix([[1, 0], [0, 1]], decisions=[1, 0], classes=[1, 0])
    >>> oc = operating_condition(u, prevalence=0.75)
    >>> oc.utility_yield(curve.at(oc.probability_cost))  # 1 - 1 * NEC(0.75)
    0.75
    >>> roc.best_operating_point([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 1], u, positive=1).utility_yield
    0.75
    """
    if axis not in _AXES:
        raise ValueError(f"axis must be one of {list(_AXES)}, found {axis!r}")
    hull = hull_of(scores, true_classes, positive, classes, caller="cost_curve")
    b = hull.prevalence
    v = hull.vertices
    tp = v["true_positives"].to_numpy(np.int64)
    fp = v["false_positives"].to_numpy(np.int64)
    at_0, at_1 = _line_ends(v["fpr"].to_numpy(), v["tpr"].to_numpy(), b, axis)
    # Consecutive vertices' lines cross where the segment's two costs balance. Along the
    # probability-cost axis the optimal vertex moves from (0, 0) (only false alarms
    # cost, at x = 0) to (1, 1); along the cost-proportion axis the other way round.
    dtp, dfp = np.diff(tp), np.diff(fp)
    if axis == "probability_cost":
        order = np.arange(len(v))
        w_fp, w_tp = dfp / hull.n_negative, dtp / hull.n_positive
        crossings = w_fp / (w_fp + w_tp)  # 1 / (1 + slope), increasing
    else:
        order = np.arange(len(v))[::-1]
        crossings = (dtp / (dtp + dfp))[::-1]  # the hull's bin probabilities, increasing
    x = np.r_[0.0, crossings, 1.0]
    a0, a1 = at_0[order], at_1[order]
    # vertex order[j] is optimal on [x[j], x[j + 1]]; the envelope is continuous, so its
    # height at each crossing is that of the line on its left
    cost = np.r_[a0[0], a0[:-1] * (1 - x[1:-1]) + a1[:-1] * x[1:-1], a1[-1]]
    vertex = order[np.r_[np.arange(len(v)), len(v) - 1]]
    area = float(np.sum((cost[1:] + cost[:-1]) * np.diff(x)) / 2)
    keep = np.r_[np.diff(x) > 0, True]  # drop vertices optimal at a single x only
    frame = pd.DataFrame(
        {
            "x": x[keep],
            "cost": cost[keep],
            "threshold": v["threshold"].to_numpy()[vertex[keep]],
            "fpr": v["fpr"].to_numpy()[vertex[keep]],
            "tpr": v["tpr"].to_numpy()[vertex[keep]],
        }
    )
    roc_fpr, roc_tpr = hull.roc.fpr, hull.roc.tpr
    line_0, line_1 = _line_ends(roc_fpr, roc_tpr, b, axis)
    lines = pd.DataFrame(
        {"threshold": hull.roc.thresholds, "fpr": roc_fpr, "tpr": roc_tpr,
         "at_0": line_0, "at_1": line_1}
    )  # fmt: skip
    return CostCurve(frame=frame, area=area, lines=lines, axis=axis, hull=hull)


# ------------------------------------------------------------------ Brier curves
@dataclass(frozen=True, eq=False)
class BrierCurve:
    """The Brier curve of probabilities (see :func:`brier_curve`).

    Attributes
    ----------
    frame : pandas.DataFrame
        ``cost_proportion`` and ``loss``: the curve is linear between consecutive
        rows; where the same ``cost_proportion`` appears twice the curve jumps (left
        then right limit) at a probability some items share.
    area : float
        Area under the curve, equal to the Brier score ``mean (p - y)^2``.
    positive, negative : label
    prevalence : float
    """

    frame: pd.DataFrame
    area: float
    positive: Label
    negative: Label
    prevalence: float
    _p_negative: np.ndarray
    _p_positive: np.ndarray

    def at(self, c: Any) -> np.ndarray:
        """The loss ``Q(c) = 2 mean_n (c [negative, p_n > c] + (1 - c) [positive, p_n <= c])``."""
        c = as_float_array(c, "c", ndim=(0, 1))
        if (c < 0).any() or (c > 1).any():
            raise ValueError(f"c must lie in [0, 1], found [{c.min()}, {c.max()}]")
        n = self._p_negative.size + self._p_positive.size
        false_pos = self._p_negative.size - np.searchsorted(self._p_negative, c, side="right")
        false_neg = np.searchsorted(self._p_positive, c, side="right")
        return 2 * (c * false_pos + (1 - c) * false_neg) / n


def brier_curve(
    probabilities: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> BrierCurve:
    """The Brier curve (Hernandez-Orallo, Flach and Ferri, 2011) of probabilities.

    For each cost proportion ``c`` in [0, 1] (the cost of a false alarm as a share
    of both error costs; module notes), decide "positive" when ``p > c`` -- the
    threshold the probabilities themselves imply for that cost, right only if
    they are calibrated -- and plot the loss

    ``Q(c) = (2 / N) sum_n ( c [y_n negative, p_n > c] + (1 - c) [y_n positive, p_n <= c] )``.

    The factor 2 is the normalisation that makes the area the Brier score: for one
    negative item ``integral_0^1 2 c [p > c] dc = p^2`` and for one positive
    ``integral_0^1 2 (1 - c) [p <= c] dc = (1 - p)^2``, so the area is
    ``mean (p - y)^2`` (:func:`yieldwise.metrics.brier` on 1-D probabilities). The
    curve lies on or above the cost-proportion cost curve of the same items
    (:func:`cost_curve` with ``axis="cost_proportion"``), and meets it everywhere
    when ``p`` is the hull's isotonic calibration: the gap is calibration loss.

    Parameters
    ----------
    probabilities : 1-D array-like
        Probability of ``positive`` for each item, in [0, 1].
    true_classes : 1-D label sequence
        The true class of each item, one per probability: the "labels" of the
        evaluation literature. The keyword is ``true_classes``, as everywhere
        in yieldwise; ``labels=`` is not accepted (no alias). Any hashable
        labels; ``positive`` names the positive one.
    positive : label, optional
        The class the probabilities are about; default the first class (as in
        :func:`yieldwise.metrics.brier`).
    classes : sequence of two labels, optional

    Returns
    -------
    BrierCurve

    Examples
    --------
    Two items: a negative at 0.2 and a positive at 0.6. For ``c < 0.2`` the negative
    is a false alarm (loss ``2c / 2``); for ``c >= 0.6`` the positive is missed (loss
    ``2 (1 - c) / 2``):

    >>> curve = brier_curve([0.2, 0.6], [0, 1], positive=1)
    >>> curve.frame
       cost_proportion  loss
    0              0.0   0.0
    1              0.2   0.2
    2              0.2   0.0
    3              0.6   0.0
    4              0.6   0.4
    5              1.0   0.0
    >>> round(curve.area, 12)  # (0.2^2 + 0.4^2) / 2, the Brier score
    0.1
    """
    p = as_float_array(probabilities, "probabilities", ndim=1)
    if (p < 0).any() or (p > 1).any():
        raise ValueError(
            f"probabilities must lie in [0, 1], found [{p.min()}, {p.max()}]; pass the "
            "probability of the positive class, not a score"
        )
    is_positive, positive, classes = binary_truth(
        true_classes, positive, classes, p.size, two_classes="brier_curve"
    )
    negative = classes[1] if classes[0] == positive else classes[0]
    n = p.size
    p_neg = np.sort(p[~is_positive])
    p_pos = np.sort(p[is_positive])
    if p_pos.size == 0 or p_neg.size == 0:
        missing = "positive" if p_pos.size == 0 else "negative"
        raise UndefinedMetricError(
            f"brier_curve is undefined: true_classes has no {missing} items "
            f"(positive = {positive!r})"
        )
    # Breakpoints: 0, every distinct probability inside (0, 1), 1. On the open stretch
    # (b_k, b_k+1) the false alarms are the negatives with p >= b_k+1 and the misses the
    # positives with p <= b_k: constant counts, so the loss is linear there.
    inner = np.unique(p[(p > 0) & (p < 1)])
    b = np.r_[0.0, inner, 1.0]
    lo, hi = b[:-1], b[1:]
    false_pos = p_neg.size - np.searchsorted(p_neg, hi, side="left")
    false_neg = np.searchsorted(p_pos, lo, side="right")
    loss_lo = 2 * (lo * false_pos + (1 - lo) * false_neg) / n
    loss_hi = 2 * (hi * false_pos + (1 - hi) * false_neg) / n
    # exact integrals of c and (1 - c) over each stretch
    area = float(
        np.sum(false_pos * (hi**2 - lo**2) + false_neg * ((1 - lo) ** 2 - (1 - hi) ** 2)) / n
    )
    frame = pd.DataFrame(
        {
            "cost_proportion": np.column_stack([lo, hi]).ravel(),
            "loss": np.column_stack([loss_lo, loss_hi]).ravel(),
        }
    )
    return BrierCurve(
        frame=frame,
        area=area,
        positive=positive,
        negative=negative,
        prevalence=float(p_pos.size / n),
        _p_negative=p_neg,
        _p_positive=p_pos,
    )


def check_curves(curves: Any) -> list[tuple[str, Any]]:
    if isinstance(curves, CostCurve | BrierCurve):
        return [("classifier", curves)]
    if not isinstance(curves, Mapping) or not curves:
        raise TypeError(
            "curves must be a CostCurve, a BrierCurve or a non-empty mapping of name to them, "
            f"found {type(curves).__name__}"
        )
    items = [(str(k), v) for k, v in curves.items()]
    for name, curve in items:
        if not isinstance(curve, CostCurve | BrierCurve):
            raise TypeError(
                f"curves[{name!r}] must be a CostCurve or a BrierCurve, found "
                f"{type(curve).__name__}"
            )
    return items
