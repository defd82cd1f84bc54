"""ROC curves the right way: operating points chosen by the utility yield (theory 1.4).

For a scoring classifier with ROC curve ``t(f)`` (true-positive rate against
false-positive rate), positive-class proportion ``B`` and a binary utility
matrix with ``p`` = positive and ``n`` = negative::

    yield(f) = (U[p,p] - U[n,p]) B t(f) - (U[n,n] - U[p,n]) (1 - B) f + const

The best operating point maximises this; on an empirical ROC curve it is
evaluated at every threshold. Several classifiers are ranked by their best
yields, never by the areas under their curves.

Conventions
-----------
* The decision at threshold ``s`` is "positive" when ``score >= s``. The first
  threshold is ``+inf`` (nothing positive); the last is the smallest score
  (everything positive).
* ``utility`` is a 2x2 :class:`~yieldwise.UtilityMatrix` whose classes are the
  two labels of ``true_classes``. Its decisions are mapped to "choose
  positive" / "choose negative" thus: if the decision labels equal the class
  labels as a set, by label (decision ``"spam"`` means "choose spam");
  otherwise by utility: "choose positive" is the decision whose advantage grows
  with the positive class's probability (``U[i, positive] - U[i, negative]``
  the larger), in whichever order the rows are listed; two rows that differ by
  a constant (one decision best at every threshold) keep their positions, row
  ``i`` meaning "choose class ``i``" in ``utility.classes`` order.
* ``positive`` defaults to the first class, as in
  :func:`yieldwise.metrics.roc_curve` (one rule,
  :func:`yieldwise.metrics.default_positive`): the first entry of ``classes`` if
  given, else the first of the utility's classes in the order of the categories of a
  categorical ``true_classes``, else the smallest label. When that default is the 0
  of classes that read as 0 and 1 (``0``/``1``, ``0.0``/``1.0``, ``False``/``True``,
  ``"0"``/``"1"``), a ``UserWarning`` says so: scores are most often those of 1.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._validation import (
    Label,
    as_float_array,
    categories_of,
    check_labels,
    indices_of,
    object_array,
    python_scalar,
    sorted_unique,
)
from ._validation import label_values as _label_values
from .confusion import ConfusionMatrix
from .metrics import UndefinedMetricError, binary_truth, default_positive, roc_curve_core
from .utility import UtilityMatrix, near_best, shift_and_spread

__all__ = [
    "OperatingPoint",
    "RandomisedOperatingPoint",
    "ROCHull",
    "best_operating_point",
    "compare",
    "convex_hull",
    "dominance",
    "dominates",
    "iso_utility_slope",
    "non_dominated",
    "yield_curve",
]


@dataclass(frozen=True)
class OperatingPoint:
    """The best threshold of a scoring classifier under a utility matrix.

    Attributes
    ----------
    threshold : float
        Decide "positive" when ``score >= threshold``; ``inf`` means nothing
        is decided positive.
    tpr, fpr : float
        True- and false-positive rates at that threshold.
    utility_yield : float
        Average utility per item at that threshold (the maximum over thresholds).
    rescaled_yield : float
        The yield rescaled to [0, 1] between the worst and best achievable on
        this test set (theory 1).
    confusion : ConfusionMatrix
        Counts at that threshold, with the utility matrix's decision and class
        labels (rows and columns in the utility's order).
    positive, negative : label
        The positive and negative class labels.
    prevalence : float
        Fraction ``B`` of positive items.
    slope : float
        Slope ``(U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B)`` of the
        iso-utility lines in ROC space (theory 1.4); the best point is where the
        highest such line touches the curve. When ``U[p,p] == U[n,p]`` it is
        infinite with the sign of the numerator: ``inf``, or ``-inf`` for a utility
        that rewards a false alarm (``U[p,n] > U[n,n]``).
    """

    threshold: float
    tpr: float
    fpr: float
    utility_yield: float
    rescaled_yield: float
    confusion: ConfusionMatrix
    positive: Label
    negative: Label
    prevalence: float
    slope: float

    @property
    def yield_(self) -> float:
        """Alias of :attr:`utility_yield`."""
        return self.utility_yield


@dataclass(frozen=True)
class _Binary:
    """A validated binary problem: truth as booleans and the utilities rearranged."""

    is_positive: np.ndarray
    positive: Label
    negative: Label
    # u[decision, class] with index 0 = positive, 1 = negative.
    u: np.ndarray
    # Positions in the utility matrix: rows of "choose positive"/"choose negative",
    # columns of the positive/negative class.
    rows: tuple[int, int]
    cols: tuple[int, int]
    utility: UtilityMatrix


@dataclass(frozen=True)
class _Curve:
    thresholds: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    n_pos: int
    n_neg: int
    yields: np.ndarray
    rescaled: np.ndarray
    # yields of U - min U: the yields less a constant, free of the rounding that a large
    # shift of U brings, to choose the best threshold on
    shifted: np.ndarray


def _check_utility(utility: Any) -> UtilityMatrix:
    if not isinstance(utility, UtilityMatrix):
        raise TypeError(
            f"utility must be a UtilityMatrix, found {type(utility).__name__}; "
            "wrap the array as UtilityMatrix(values, decisions=..., classes=...)"
        )
    if utility.shape != (2, 2):
        raise ValueError(
            "utility must be a binary (2x2) utility matrix, 2 decisions by 2 classes, to choose "
            f"a threshold on scores; found shape {utility.shape} with decisions "
            f"{list(utility.decisions)} and classes {list(utility.classes)}"
        )
    return utility


def prepare_binary(
    true_classes: Any,
    utility: Any,
    positive: Label | None,
    classes: Any,
    n_items: int | None,
    *,
    warn_default: bool = True,
) -> _Binary:
    """Validate the truth against the utility and resolve the positive class.

    The default positive class follows :func:`yieldwise.metrics.default_positive`,
    which warns when it is the 0 of 0/1 labels; ``warn_default=False`` for callers
    that read no scores (a slope or an operating condition of the utility alone), where
    there is nothing to misread."""
    utility = _check_utility(utility)
    truth = _label_values(true_classes, "true_classes")
    if n_items is not None and truth.size != n_items:
        raise ValueError(
            f"true_classes must have one label per score ({n_items}), found {truth.size}"
        )
    indices_of(truth, utility.classes, "true_classes", "utility matrix's classes")
    if classes is None:
        categories = categories_of(true_classes)
        if categories is not None:
            # the categories give the class order, nothing more: every label is one of the
            # utility's classes (checked above), so categories that are not are unused (a
            # categorical keeps them after filtering) and drop out; a utility class the
            # categories lack comes last. The first is then the same on every batch.
            wanted = set(utility.classes)
            classes = [c for c in categories if c in wanted]
            listed = set(classes)
            classes += [c for c in utility.classes if c not in listed]
        else:
            # the labels of true_classes are the utility's classes (checked above); the
            # smallest is the default positive, and without an order there is none
            classes = sorted_unique(
                truth, object_array(utility.classes),
                name="true_classes (the utility matrix's classes)",
                remedy="pass positive= (or classes= to give the class order)",
                fallback=positive is not None,
            )  # fmt: skip
    classes = check_labels(classes, None, "classes")
    if set(classes) != set(utility.classes):
        raise ValueError(
            f"classes {list(classes)} must be the utility matrix's classes {list(utility.classes)}"
        )
    if positive is None:
        positive = default_positive(classes) if warn_default else classes[0]
    positive = python_scalar(positive)
    if positive not in utility.classes:
        raise ValueError(
            f"positive {positive!r} is not among the utility matrix's classes "
            f"{list(utility.classes)}"
        )
    col_p = utility.classes.index(positive)
    col_n = 1 - col_p
    negative = utility.classes[col_n]
    values = utility.values
    if set(utility.decisions) == set(utility.classes):
        row_p = utility.decisions.index(positive)
    else:
        # the decision taken above a threshold on the score is the one whose advantage
        # grows with the positive class's probability (UtilityMatrix.binary_rule), in
        # whichever order the rows are listed; rows with a constant difference keep
        # their positions (one decision is then best at every threshold)
        lean = values[:, col_p] - values[:, col_n]
        row_p = col_p if lean[0] == lean[1] else int(np.argmax(lean))
    row_n = 1 - row_p
    u = values[np.ix_([row_p, row_n], [col_p, col_n])]
    if u[0, 0] == u[1, 0] and u[0, 1] == u[1, 1]:
        raise ValueError(
            "utility gives both decisions the same value for each class "
            f"({utility.values.tolist()}), so no threshold is better than another"
        )
    is_positive = truth == object_array([positive])
    return _Binary(is_positive, positive, negative, u, (row_p, row_n), (col_p, col_n), utility)


def evaluate_thresholds(scores: Any, binary: _Binary, name: str = "scores") -> _Curve:
    """Yields at every threshold from cumulative counts (no loop over thresholds)."""
    s = as_float_array(scores, name, ndim=1, exact_integers=True)
    if s.size != binary.is_positive.size:
        raise ValueError(
            f"{name} and true_classes must have the same length, found {s.size} scores and "
            f"{binary.is_positive.size} labels"
        )
    n_pos = int(binary.is_positive.sum())
    n_neg = s.size - n_pos
    if n_pos == 0 or n_neg == 0:
        missing, label = (
            ("positive", binary.positive) if n_pos == 0 else ("negative", binary.negative)
        )
        raise UndefinedMetricError(
            f"the ROC curve is undefined: true_classes has no {missing} items "
            f"(class {label!r}), so the true- or false-positive rate is 0/0"
        )
    tp, fp, thresholds = roc_curve_core(s, binary.is_positive)
    return _counts_curve(binary.u, thresholds, tp, fp, n_pos, n_neg)


def _counts_curve(
    u: np.ndarray, thresholds: np.ndarray, tp: np.ndarray, fp: np.ndarray, n_pos: int, n_neg: int
) -> _Curve:
    """Yields and rescaled yields at the given cumulative counts (``u`` as in ``_Binary``)."""
    n = n_pos + n_neg
    fn = n_pos - tp
    tn = n_neg - fp
    # every item gains min U plus its share of v = U - min U: the shift stays out of the
    # sums, so a large one (U + 1e9) cannot round the differences between thresholds away
    low, v, _ = shift_and_spread(u)
    base = low.item()
    shifted = (v[0, 0] * tp + v[1, 0] * fn + v[0, 1] * fp + v[1, 1] * tn) / n
    yields = base + shifted
    f_pos, f_neg = n_pos / n, n_neg / n
    low = f_pos * v[:, 0].min() + f_neg * v[:, 1].min()
    high = f_pos * v[:, 0].max() + f_neg * v[:, 1].max()
    rescaled = (shifted - low) / (high - low)
    return _Curve(thresholds, tp, fp, n_pos, n_neg, yields, rescaled, shifted)


def _slope(u: np.ndarray, prevalence: float) -> float:
    """``(U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B)`` without division warnings."""
    numerator = float((u[1, 1] - u[0, 1]) * (1 - prevalence))
    denominator = float((u[0, 0] - u[1, 0]) * prevalence)
    if denominator != 0:
        return numerator / denominator
    return float(np.sign(numerator) * np.inf) if numerator != 0 else float("nan")


def iso_utility_slope(
    utility: UtilityMatrix, prevalence: float, positive: Label | None = None
) -> float:
    """Slope of the iso-utility lines in ROC space (theory 1.4).

    ``(U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B)`` with ``B`` the
    positive-class proportion. ``positive`` defaults to the utility's first
    class; decisions are matched to classes as in :func:`best_operating_point`.

    Examples
    --------
    >>> from yieldwise import UtilityMatrix
    >>> u = UtilityMatrix([[10, -1], [0, 0]], decisions=["treat", "wait"],
    ...                   classes=["ill", "healthy"])
    >>> iso_utility_slope(u, prevalence=0.2)  # (0 - -1) * 0.8 / ((10 - 0) * 0.2)
    0.4
    """
    utility = _check_utility(utility)
    b = check_prevalence(prevalence)
    classes = utility.classes
    binary = prepare_binary(
        object_array(classes), utility, positive, classes, None, warn_default=False
    )
    return _slope(binary.u, b)


def check_prevalence(prevalence: Any) -> float:
    """``prevalence``, the share ``B`` of positives, as a float strictly between 0 and 1;
    ``TypeError`` for anything but a real number (a string, a list, None, a bool),
    ``ValueError`` outside (0, 1)."""
    if isinstance(prevalence, np.ndarray) and prevalence.ndim == 0:
        prevalence = prevalence.item()
    if isinstance(prevalence, bool | np.bool_) or not isinstance(prevalence, numbers.Real):
        raise TypeError(
            "prevalence must be a number strictly between 0 and 1 (the share of positive "
            f"items), found {type(prevalence).__name__} {prevalence!r}"
        )
    b = float(prevalence)
    if not 0 < b < 1:
        raise ValueError(f"prevalence must lie strictly between 0 and 1, found {prevalence!r}")
    return b


def _confusion(binary: _Binary, tp: float, fp: float, n_pos: int, n_neg: int) -> ConfusionMatrix:
    counts = np.zeros((2, 2))
    (row_p, row_n), (col_p, col_n) = binary.rows, binary.cols
    counts[row_p, col_p] = tp
    counts[row_n, col_p] = n_pos - tp
    counts[row_p, col_n] = fp
    counts[row_n, col_n] = n_neg - fp
    return ConfusionMatrix(
        counts, decisions=binary.utility.decisions, classes=binary.utility.classes
    )


def _best_index(shifted: np.ndarray, u: np.ndarray) -> int:
    """First (highest-threshold) index whose yield ties with the maximum.

    ``shifted`` are the yields of ``U - min U`` (:attr:`_Curve.shifted`); ties are yields
    within ``TIE_RTOL * (max U - min U)`` of the best, the rule of
    :func:`yieldwise.utility.near_best` that :func:`yieldwise.decide` applies to expected
    utilities, so ``U + b`` picks the same index (theory 1, "Equivalence").
    """
    _, _, spread = shift_and_spread(u)
    return int(np.flatnonzero(near_best(shifted, spread.item()))[0])


def operating_point(curve: _Curve, binary: _Binary) -> OperatingPoint:
    k = _best_index(curve.shifted, binary.u)
    prevalence = curve.n_pos / (curve.n_pos + curve.n_neg)
    return OperatingPoint(
        threshold=float(curve.thresholds[k]),
        tpr=float(curve.tp[k] / curve.n_pos),
        fpr=float(curve.fp[k] / curve.n_neg),
        utility_yield=float(curve.yields[k]),
        rescaled_yield=float(curve.rescaled[k]),
        confusion=_confusion(binary, curve.tp[k], curve.fp[k], curve.n_pos, curve.n_neg),
        positive=binary.positive,
        negative=binary.negative,
        prevalence=prevalence,
        slope=_slope(binary.u, prevalence),
    )


def yield_curve(
    scores: Any,
    true_classes: Any,
    utility: UtilityMatrix,
    positive: Label | None = None,
    classes: Any = None,
) -> pd.DataFrame:
    """Utility yield at every threshold of the empirical ROC curve.

    Parameters
    ----------
    scores : 1-D array-like of floats
        Higher means "more positive"; finite.
    true_classes : 1-D label sequence, one per score
        Labels must be the utility matrix's classes (strings, numbers, pandas
        Categorical all work).
    utility : UtilityMatrix
        Binary (2x2); see the module notes for how decisions are matched.
    positive : label, optional
        The positive class; default the first class (module notes).
    classes : sequence of two labels, optional
        Class order, used only to choose the default ``positive``.

    Returns
    -------
    pandas.DataFrame
        One row per threshold, highest first (``inf``: nothing positive; the
        last row: everything positive), with columns ``threshold``, ``tpr``,
        ``fpr``, ``true_positives``, ``false_positives``, ``utility_yield``
        and ``rescaled_yield``.

    Examples
    --------
    >>> from yieldwise import UtilityMatrix
    >>> u = UtilityMatrix([[1, 0], [0, 1]], decisions=["a", "b"], classes=["a", "b"])
    >>> yield_curve([0.9, 0.4, 0.6, 0.1], ["a", "a", "b", "b"], u)["utility_yield"].tolist()
    [0.5, 0.75, 0.5, 0.75, 0.5]
    """
    s = as_float_array(scores, "scores", ndim=1, exact_integers=True)
    binary = prepare_binary(true_classes, utility, positive, classes, s.size)
    curve = evaluate_thresholds(s, binary)
    return pd.DataFrame(
        {
            "threshold": curve.thresholds,
            "tpr": curve.tp / curve.n_pos,
            "fpr": curve.fp / curve.n_neg,
            "true_positives": curve.tp,
            "false_positives": curve.fp,
            "utility_yield": curve.yields,
            "rescaled_yield": curve.rescaled,
        }
    )


def best_operating_point(
    scores: Any,
    true_classes: Any,
    utility: UtilityMatrix,
    positive: Label | None = None,
    classes: Any = None,
) -> OperatingPoint:
    """The threshold with the highest utility yield (theory 1.4).

    The yield is evaluated at every threshold of the empirical ROC curve,
    including "nothing positive" (``threshold = inf``) and "everything
    positive" (the smallest score), in one vectorised pass over cumulative
    counts. Ties (yields within ``1e-12 * (max U - min U)`` of the maximum, the tie rule
    of :func:`yieldwise.decide` too) go to the highest threshold, i.e. the fewest
    positive decisions.

    Parameters
    ----------
    scores : 1-D array-like of floats
        Higher means "more positive"; finite.
    true_classes : 1-D label sequence, one per score
        Labels must be the utility matrix's classes.
    utility : UtilityMatrix
        Binary (2x2). If its decision labels equal its class labels as a set,
        decisions are matched to classes by label; otherwise "choose positive" is
        the decision whose advantage grows with the positive class's probability
        (module docstring).
    positive : label, optional
        The positive class; default the first class (the first of
        ``classes``, else the first category of a categorical
        ``true_classes``, else the smallest label), as in
        :func:`yieldwise.metrics.roc_curve`.
    classes : sequence of two labels, optional
        Class order, used only to choose the default ``positive``.

    Returns
    -------
    OperatingPoint

    Examples
    --------
    Treating an ill patient gains 10, treating a healthy one costs 1:

    >>> from yieldwise import UtilityMatrix
    >>> u = UtilityMatrix([[10, -1], [0, 0]], decisions=["treat", "wait"],
    ...                   classes=["ill", "healthy"])
    >>> scores = [0.9, 0.8, 0.7, 0.6, 0.3, 0.2]
    >>> truth = ["ill", "healthy", "healthy", "ill", "healthy", "healthy"]
    >>> point = best_operating_point(scores, truth, u, positive="ill")
    >>> point.threshold, point.tpr, point.fpr  # treat the top four
    (0.6, 1.0, 0.5)
    >>> point.utility_yield  # (2 * 10 - 2 * 1) / 6
    3.0
    """
    s = as_float_array(scores, "scores", ndim=1, exact_integers=True)
    binary = prepare_binary(true_classes, utility, positive, classes, s.size)
    return operating_point(evaluate_thresholds(s, binary), binary)


def score_items(scores: Any) -> list[tuple[Any, Any]]:
    if isinstance(scores, pd.DataFrame | Mapping):
        items = list(scores.items())
    else:
        raise TypeError(
            "scores must be a mapping from classifier name to a 1-D array of scores (or a "
            f"DataFrame with one column per classifier), found {type(scores).__name__}"
        )
    if not items:
        raise ValueError("scores is empty; pass at least one classifier's scores")
    return items


def compare(
    scores: Mapping[Any, Any],
    true_classes: Any,
    utility: UtilityMatrix,
    positive: Label | None = None,
    classes: Any = None,
) -> pd.DataFrame:
    """Rank scoring classifiers by their best utility yield, not by AUC.

    Each classifier is operated at its own best threshold
    (:func:`best_operating_point`); the area under its ROC curve is reported
    alongside to show where the two rankings disagree (crossing curves).

    Parameters
    ----------
    scores : mapping of name to 1-D array-like, or DataFrame
        Scores of each classifier on the same items (higher: more positive).
    true_classes, utility, positive, classes
        As in :func:`best_operating_point`.

    Returns
    -------
    pandas.DataFrame
        Indexed by classifier name, sorted by decreasing yield (ties keep the
        input order), with columns ``threshold``, ``tpr``, ``fpr``,
        ``utility_yield``, ``rescaled_yield``, ``auc``, ``rank_by_yield`` and
        ``rank_by_auc`` (1 = best; tied values share the best rank).

    Examples
    --------
    >>> from yieldwise import UtilityMatrix
    >>> u = UtilityMatrix([[1, 0], [0, 1]])
    >>> truth = [0, 0, 1, 1]
    >>> scores = {"good": [0.9, 0.8, 0.2, 0.1], "bad": [0.9, 0.1, 0.8, 0.2]}  # of class 0
    >>> table = compare(scores, truth, u, positive=0)
    >>> table[["utility_yield", "auc", "rank_by_yield"]]
                utility_yield  auc  rank_by_yield
    classifier
    good                 1.00  1.0              1
    bad                  0.75  0.5              2
    """
    items = score_items(scores)
    binary = prepare_binary(true_classes, utility, positive, classes, None)
    rows = []
    names = []
    for name, values in items:
        curve = evaluate_thresholds(values, binary, f"scores[{name!r}]")
        point = operating_point(curve, binary)
        auc = float(np.trapezoid(curve.tp / curve.n_pos, curve.fp / curve.n_neg))
        names.append(name)
        rows.append(
            {
                "threshold": point.threshold,
                "tpr": point.tpr,
                "fpr": point.fpr,
                "utility_yield": point.utility_yield,
                "rescaled_yield": point.rescaled_yield,
                "auc": auc,
            }
        )
    table = pd.DataFrame(rows, index=pd.Index(names, name="classifier", dtype=object))
    table["rank_by_yield"] = table["utility_yield"].rank(method="min", ascending=False).astype(int)
    table["rank_by_auc"] = table["auc"].rank(method="min", ascending=False).astype(int)
    return table.sort_values("utility_yield", ascending=False, kind="mergesort")


# ====================================================================== convex hull
# The ROC convex hull (Provost and Fawcett, 2001) is the smallest concave curve above
# every point of the empirical ROC curve. Its segments' slopes are likelihood ratios;
# read as probabilities they are the isotonic regression of the labels on the scores
# (pool-adjacent-violators, PAV), so the hull *is* isotonic calibration (Fawcett and
# Niculescu-Mizil, 2007). See docs/toolkit.md, section 1.


@dataclass(frozen=True)
class RandomisedOperatingPoint:
    """A point of the ROC hull, reached by randomising between two hull vertices.

    Every point of a hull segment is achievable: decide "positive" for every item
    scoring at least ``threshold_high``, and for each item scoring in
    ``[threshold_low, threshold_high)`` (the segment's bin) toss a coin that says
    "positive" with probability ``probability``. On the items the hull was built from,
    the expected rates are exactly ``fpr`` and ``tpr``.

    Attributes
    ----------
    fpr, tpr : float
        Expected false- and true-positive rates.
    threshold_high, threshold_low : float
        The two vertices' thresholds (``inf``: nothing positive). Equal when the point
        is a vertex itself (then ``probability`` is 0).
    probability : float
        Chance of deciding "positive" for an item of the bin between the vertices.
    positive, negative : label
    confusion : ConfusionMatrix
        Expected counts on the hull's items; decisions labelled by the class they
        choose (``positive``, ``negative``).
    """

    fpr: float
    tpr: float
    threshold_high: float
    threshold_low: float
    probability: float
    positive: Label
    negative: Label
    confusion: ConfusionMatrix

    def decide(self, scores: Any, seed: int | np.random.Generator | None = None) -> np.ndarray:
        """Randomised decisions for ``scores``: ``True`` means "positive".

        Items at or above ``threshold_high`` are positive, items below
        ``threshold_low`` negative, and those in between positive with probability
        ``probability`` (independently, from a generator seeded with ``seed``).

        Examples
        --------
        >>> hull = convex_hull([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], positive=1)
        >>> point = hull.at_fpr(0.25)  # half-way along the segment holding 0.8 and 0.7
        >>> point.threshold_high, point.threshold_low, point.probability, point.tpr
        (0.9, 0.7, 0.5, 0.75)
        >>> point.decide([0.95, 0.75, 0.5], seed=0).tolist()  # 0.75 is a coin toss
        [True, True, False]
        """
        s = as_float_array(scores, "scores", ndim=1, exact_integers=True)
        rng = np.random.default_rng(seed)
        between = (s >= self.threshold_low) & (s < self.threshold_high)
        return (s >= self.threshold_high) | (between & (rng.random(s.size) < self.probability))


@dataclass(frozen=True, eq=False)
class ROCHull:
    """The ROC convex hull of a scoring classifier on a labelled set (see :func:`convex_hull`).

    Attributes
    ----------
    vertices : pandas.DataFrame
        One row per hull vertex from ``(0, 0)`` to ``(1, 1)``, with columns
        ``threshold`` (decide positive when ``score >= threshold``; ``inf`` at the
        first vertex), ``fpr``, ``tpr``, ``true_positives``, ``false_positives``.
        Consecutive segments have strictly decreasing slopes (collinear points are
        not vertices).
    auc : float
        Area under the hull (AUCH), at least the area under the empirical curve.
    bins : pandas.DataFrame
        One row per hull segment (the run of items between two consecutive
        vertices), highest scores first: ``score_max``, ``score_min``, ``n_items``,
        ``n_positive``, ``n_negative``, ``slope`` (of the segment in ROC space,
        ``inf`` for a vertical one) and ``probability`` = ``n_positive / n_items``,
        the calibrated probability of every item of the bin.
    calibrated : numpy.ndarray
        Per item, in the items' original order, the probability of the positive
        class that the hull's slopes imply: the isotonic regression of the labels on
        the scores (PAV), as ``sklearn.isotonic.IsotonicRegression`` gives it.
    bin_index : numpy.ndarray
        Per item, the row of ``bins`` holding it.
    roc : yieldwise.metrics.ROCCurve
        The empirical ROC curve the hull covers.
    positive, negative : label
    n_positive, n_negative : int
    """

    vertices: pd.DataFrame
    auc: float
    bins: pd.DataFrame
    calibrated: np.ndarray
    bin_index: np.ndarray
    roc: Any
    positive: Label
    negative: Label
    n_positive: int
    n_negative: int

    @property
    def prevalence(self) -> float:
        """Fraction ``B`` of positive items."""
        return self.n_positive / (self.n_positive + self.n_negative)

    def tpr_at(self, fpr: Any) -> np.ndarray:
        """The hull's true-positive rate at the given false-positive rates (its upper edge)."""
        x = as_float_array(fpr, "fpr", ndim=(0, 1))
        if (x < 0).any() or (x > 1).any():
            raise ValueError(f"fpr must lie in [0, 1], found [{x.min()}, {x.max()}]")
        return _upper_interp(x, self.vertices["fpr"].to_numpy(), self.vertices["tpr"].to_numpy())

    # ----------------------------------------------------------- decisions
    def _binary(self, utility: UtilityMatrix) -> _Binary:
        labels = object_array([self.positive, self.negative])
        return prepare_binary(labels, utility, self.positive, None, None)

    def _curve(self, binary: _Binary) -> _Curve:
        v = self.vertices
        return _counts_curve(
            binary.u,
            v["threshold"].to_numpy(),
            v["true_positives"].to_numpy(float),
            v["false_positives"].to_numpy(float),
            self.n_positive,
            self.n_negative,
        )

    def yields(self, utility: UtilityMatrix) -> np.ndarray:
        """Utility yield at each vertex (theory 1.4); linear along each segment in between.

        The best of them is the best yield of any threshold, unless the utility values
        *both* wrong decisions above the correct ones (error costs
        ``C_FN = U[p,p] - U[n,p]`` and ``C_FP = U[n,n] - U[p,n]`` both negative): the
        best threshold then lies below the hull, towards ``(1, 0)``, so such a utility
        is refused (``ValueError``). For the yield at every threshold use
        :func:`yield_curve`; :meth:`best_point` takes any utility.
        """
        binary = self._binary(utility)
        cost_fn, cost_fp = binary.u[0, 0] - binary.u[1, 0], binary.u[1, 1] - binary.u[0, 1]
        # yield = const + C_FN tp - C_FP fp: with one cost at least 0 the best is on the
        # upper hull or at (0, 0) / (1, 1), both vertices; with both negative it lies on
        # the lower hull, which the vertices do not hold
        if cost_fn < 0 and cost_fp < 0:
            raise ValueError(
                "utility must value at least one correct decision at least as much as the "
                f"wrong one: found U[p,p] - U[n,p] = {float(cost_fn)} and U[n,n] - U[p,n] = "
                f"{float(cost_fp)}, both negative, so the best threshold lies below the hull "
                "and its vertices' yields miss it; use roc.yield_curve for the yield at every "
                "threshold, or ROCHull.best_point for the best one"
            )
        return self._curve(binary).yields

    def best_point(self, utility: UtilityMatrix) -> OperatingPoint:
        """The utility-optimal operating point: :func:`best_operating_point`'s, exactly.

        The yield is evaluated at every threshold of the empirical curve (:attr:`roc`)
        as :func:`best_operating_point` does, ties included (the highest threshold
        wins), for any binary utility. When the utility values each correct decision
        at least as much as the wrong one (error costs ``U[p,p] - U[n,p]`` and
        ``U[n,n] - U[p,n]`` at least 0) the point is a vertex of the hull (theory 1.4):
        a yield is linear in ``(fpr, tpr)`` and grows towards the upper left, so its
        maximum over the hull is at the vertex the highest iso-utility line (slope
        :attr:`OperatingPoint.slope`) touches. A utility outside that domain can prefer
        a point off the hull (below it, as far as ``(1, 0)``, when both wrong decisions
        are worth more than the correct ones); it is found all the same, not refused.

        Examples
        --------
        >>> from yieldwise import UtilityMatrix
        >>> hull = convex_hull([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], positive=1)
        >>> u = UtilityMatrix([[1, -1], [0, 0]], decisions=["act", "wait"], classes=[1, 0])
        >>> point = hull.best_point(u)
        >>> point.threshold, point.utility_yield  # act on the top item only
        (0.9, 0.25)
        """
        binary = self._binary(utility)
        roc = self.roc
        # the empirical curve's exact counts (rates times class sizes, whole numbers), so
        # that the yields are best_operating_point's to the last bit
        curve = _counts_curve(
            binary.u,
            roc.thresholds,
            np.rint(roc.tpr * self.n_positive),
            np.rint(roc.fpr * self.n_negative),
            self.n_positive,
            self.n_negative,
        )
        return operating_point(curve, binary)

    def _randomised(self, j: int, q: float) -> RandomisedOperatingPoint:
        v = self.vertices
        thresholds = v["threshold"].to_numpy()
        tp = v["true_positives"].to_numpy(float)
        fp = v["false_positives"].to_numpy(float)
        if q == 0 or j == len(v) - 1:
            high = low = float(thresholds[j])
            tp_q, fp_q, q = tp[j], fp[j], 0.0
        else:
            high, low = float(thresholds[j]), float(thresholds[j + 1])
            tp_q = tp[j] + q * (tp[j + 1] - tp[j])
            fp_q = fp[j] + q * (fp[j + 1] - fp[j])
        counts = np.array(
            [[tp_q, fp_q], [self.n_positive - tp_q, self.n_negative - fp_q]], dtype=float
        )
        labels = (self.positive, self.negative)
        return RandomisedOperatingPoint(
            fpr=float(fp_q / self.n_negative),
            tpr=float(tp_q / self.n_positive),
            threshold_high=high,
            threshold_low=low,
            probability=float(q),
            positive=self.positive,
            negative=self.negative,
            confusion=ConfusionMatrix(counts, decisions=labels, classes=labels),
        )

    def _locate(self, target: float, column: str, name: str) -> RandomisedOperatingPoint:
        if (
            isinstance(target, bool | np.bool_)
            or not isinstance(target, numbers.Real)
            or not 0 <= float(target) <= 1  # False for NaN and inf
        ):
            raise ValueError(f"{name} must be a number in [0, 1], found {target!r}")
        rates = self.vertices[column].to_numpy()
        # the first vertex at or beyond the target rate; the point lies on the segment
        # that ends there (rates rise along the hull, ties only on vertical/flat segments)
        k = int(np.searchsorted(rates, target, side="left"))
        if rates[k] == target:
            return self._randomised(k, 0.0)
        q = (target - rates[k - 1]) / (rates[k] - rates[k - 1])
        return self._randomised(k - 1, float(q))

    def at_fpr(self, fpr: float) -> RandomisedOperatingPoint:
        """The hull's point at false-positive rate ``fpr`` (the highest ``tpr`` there).

        Between vertices it is reached by randomising (see
        :class:`RandomisedOperatingPoint`); at ``fpr = 0`` it is the highest vertex
        on the vertical axis.
        """
        point = self._locate(fpr, "fpr", "fpr")
        if point.probability == 0:  # at a vertex: take the highest one with this fpr
            rates = self.vertices["fpr"].to_numpy()
            k = int(np.flatnonzero(rates == point.fpr)[-1])
            return self._randomised(k, 0.0)
        return point

    def at_tpr(self, tpr: float) -> RandomisedOperatingPoint:
        """The hull's point at true-positive rate ``tpr`` (the lowest ``fpr`` there)."""
        return self._locate(tpr, "tpr", "tpr")


def _upper_interp(x: np.ndarray, fpr: np.ndarray, tpr: np.ndarray) -> np.ndarray:
    """A concave polyline's upper edge at ``x``: where a vertical segment sits, its top."""
    # keep, for each distinct fpr, the last (highest) vertex; np.interp needs increasing x
    last = np.r_[np.flatnonzero(np.diff(fpr) != 0), fpr.size - 1]
    return np.interp(x, fpr[last], tpr[last])


def _strict_upper_hull(candidates: np.ndarray, tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Drop, in vectorised rounds, candidates on or below the chord of their neighbours.

    ``tp``, ``fp`` are exact integer counts (int64), so the turn test is exact. A
    point on or below the chord between two points of the set is not a vertex of the
    set's upper hull, whatever else is removed in the same round, so removing all of
    them at once is safe; what is left turns strictly clockwise everywhere.
    """
    idx = candidates
    while idx.size > 2:
        dtp = np.diff(tp[idx])
        dfp = np.diff(fp[idx])
        # slope(a, b) > slope(b, c)  <=>  dtp_ab dfp_bc > dtp_bc dfp_ab
        keep = dtp[:-1] * dfp[1:] > dtp[1:] * dfp[:-1]
        if keep.all():
            break
        idx = np.r_[idx[0], idx[1:-1][keep], idx[-1]]
    return idx


def _below_hull(vertices: np.ndarray, tp: np.ndarray, fp: np.ndarray) -> bool:
    """Whether every point ``(fp, tp)`` lies on or below the polyline through ``vertices``."""
    vfp, vtp = fp[vertices], tp[vertices]
    j = np.clip(np.searchsorted(vfp, fp, side="right") - 1, 0, vertices.size - 2)
    dfp = vfp[j + 1] - vfp[j]
    dtp = vtp[j + 1] - vtp[j]
    cross = dfp * (tp - vtp[j]) - dtp * (fp - vfp[j])
    return bool((cross <= 0).all())


def _hull_vertices(tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Indices of the ROC points (exact integer counts) that are the hull's vertices."""
    from scipy.optimize import isotonic_regression

    dtp = np.diff(tp)
    weights = dtp + np.diff(fp)  # items per run of equal scores, at least one
    # PAV on the runs' positive fractions (non-increasing as the score falls) proposes
    # the blocks; the exact integer rounds below make the answer independent of its
    # floating-point ties, and the check falls back to all points if it ever missed one.
    blocks = isotonic_regression(
        dtp / weights, weights=weights.astype(float), increasing=False
    ).blocks
    vertices = _strict_upper_hull(np.asarray(blocks, dtype=np.int64), tp, fp)
    if not _below_hull(vertices, tp, fp):  # pragma: no cover - a safety net
        vertices = _strict_upper_hull(np.arange(tp.size), tp, fp)
    return vertices


def convex_hull(
    scores: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> ROCHull:
    """The ROC convex hull of a scoring classifier, and the calibration it implies.

    The hull is the smallest concave curve above every point of the empirical ROC
    curve (vertices at ``(0, 0)`` and ``(1, 1)``). Every point on it is an
    achievable operating point: a vertex by a threshold, a point between two
    vertices by randomising between their thresholds (:meth:`ROCHull.at_fpr`). The
    slope of a segment, read as the positive fraction of the items between its
    vertices, is the isotonic (PAV) calibration of the scores: ``calibrated``.
    Under any binary utility matrix that values each correct decision at least as
    much as the wrong one, the best point of the hull is a vertex and is the best
    threshold of the empirical curve (:meth:`ROCHull.best_point`, theory 1.4).
    Formulas: ``docs/toolkit.md``, section 1.

    Parameters
    ----------
    scores : 1-D array-like of floats
        Higher means "more positive"; finite. Tied scores form one run (one
        diagonal step of the ROC curve) and always share a bin.
    true_classes : 1-D label sequence, one per score
        The true class of each item, one per score: the "labels" of the
        evaluation literature. The keyword is ``true_classes``, as everywhere
        in yieldwise; ``labels=`` is not accepted (no alias). Any hashable
        labels; ``positive`` names the positive one.
    positive : label, optional
        The positive class; default the first class (the first of ``classes``,
        else the first category of a categorical, else the smallest label), as in
        :func:`yieldwise.metrics.roc_curve`.
    classes : sequence of two labels, optional

    Returns
    -------
    ROCHull

    Notes
    -----
    PAV (scipy's ``isotonic_regression``, compiled) proposes the vertices;
    vectorised rounds with exact integer turn tests remove any that are not strict
    vertices, and a final check confirms that no point of the curve lies above the
    hull. The AUCH, like the AUC, averages over operating points nobody would use
    together; it is not admissible (theory 1.2, 1.4).

    Examples
    --------
    Four positives (``1``) and four negatives. The five items from 0.7 down to 0.3
    hold two positives and three negatives in mixed order, so PAV pools them into one
    bin of probability 2/5, one hull segment:

    >>> scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    >>> truth = [1, 1, 0, 0, 1, 0, 1, 0]
    >>> hull = convex_hull(scores, truth, positive=1)
    >>> hull.vertices[["threshold", "fpr", "tpr"]]
       threshold   fpr   tpr
    0        inf  0.00  0.00
    1        0.8  0.00  0.50
    2        0.3  0.75  1.00
    3        0.2  1.00  1.00
    >>> hull.auc  # 0.75 * (0.5 + 1) / 2 + 0.25 * 1
    0.8125
    >>> hull.calibrated.tolist()
    [1.0, 1.0, 0.4, 0.4, 0.4, 0.4, 0.4, 0.0]
    """
    return hull_of(scores, true_classes, positive, classes, caller="convex_hull")


def hull_of(
    scores: Any, true_classes: Any, positive: Label | None, classes: Any, *, caller: str
) -> ROCHull:
    """:func:`convex_hull`, refusing other than two classes in the name of ``caller``
    (the public function the user called, e.g. ``"cost_curve"``)."""
    s = as_float_array(scores, "scores", ndim=1, exact_integers=True)
    is_positive, positive, classes = binary_truth(
        true_classes, positive, classes, s.size, two_classes=caller
    )
    negative = classes[1] if classes[0] == positive else classes[0]
    n_pos = int(is_positive.sum())
    n_neg = s.size - n_pos
    if n_pos == 0 or n_neg == 0:
        missing = "positive" if n_pos == 0 else "negative"
        raise UndefinedMetricError(
            f"the ROC hull is undefined: true_classes has no {missing} items "
            f"(positive = {positive!r}), so a rate is 0/0"
        )
    tp_f, fp_f, thresholds = roc_curve_core(s, is_positive)
    tp, fp = tp_f.astype(np.int64), fp_f.astype(np.int64)
    vertices = _hull_vertices(tp, fp)

    vtp, vfp = tp[vertices], fp[vertices]
    dtp, dfp = np.diff(vtp), np.diff(vfp)
    n_items = dtp + dfp
    probability = dtp / n_items
    slope = np.full(dtp.size, np.inf)
    np.divide(dtp * n_neg, dfp * float(n_pos), out=slope, where=dfp > 0)
    vthresholds = thresholds[vertices]
    # bin j holds the items with vthresholds[j + 1] <= score < vthresholds[j]
    bin_index = np.searchsorted(-vthresholds, -s, side="left") - 1
    from .metrics import ROCCurve

    fpr, tpr = fp_f / n_neg, tp_f / n_pos
    return ROCHull(
        vertices=pd.DataFrame(
            {
                "threshold": vthresholds,
                "fpr": vfp / n_neg,
                "tpr": vtp / n_pos,
                "true_positives": vtp,
                "false_positives": vfp,
            }
        ),
        auc=float(np.trapezoid(vtp / n_pos, vfp / n_neg)),
        bins=pd.DataFrame(
            {
                "score_max": thresholds[vertices[:-1] + 1],
                "score_min": vthresholds[1:],
                "n_items": n_items,
                "n_positive": dtp,
                "n_negative": dfp,
                "slope": slope,
                "probability": probability,
            }
        ),
        calibrated=probability[bin_index],
        bin_index=bin_index,
        roc=ROCCurve(fpr, tpr, thresholds, positive, n_pos / s.size, s.size),
        positive=positive,
        negative=negative,
        n_positive=n_pos,
        n_negative=n_neg,
    )


# ======================================================================= dominance
# Rates closer than this count as equal (rates are ratios of counts, exact to ~1e-16).
_RATE_ATOL = 1e-12


def _point_rates(item: Any, name: str) -> tuple[float, float]:
    """``(fpr, tpr)`` of an operating point or a pair, validated."""
    if isinstance(item, OperatingPoint | RandomisedOperatingPoint):
        f, t = item.fpr, item.tpr
    else:
        try:
            f, t = (float(v) for v in item)
        except (TypeError, ValueError):
            raise TypeError(
                f"{name} must be an ROCHull, an OperatingPoint, a RandomisedOperatingPoint or "
                f"an (fpr, tpr) pair, found {type(item).__name__} {item!r}"
            ) from None
    if not (0 <= f <= 1 and 0 <= t <= 1):
        raise ValueError(f"{name} must have fpr and tpr in [0, 1], found ({f}, {t})")
    return float(f), float(t)


def _as_curve(item: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A hull's vertices, or a point's own hull ``(0,0)-p-(1,1)``, as ``(fpr, tpr)``."""
    if isinstance(item, ROCHull):
        v = item.vertices
        return v["fpr"].to_numpy(float), v["tpr"].to_numpy(float)
    f, t = _point_rates(item, name)
    if t > f:  # a point above the diagonal; below it, its hull is the diagonal itself
        return np.array([0.0, f, 1.0]), np.array([0.0, t, 1.0])
    return np.array([0.0, 1.0]), np.array([0.0, 1.0])


def dominates(a: Any, b: Any) -> bool:
    """Whether ``a`` Pareto-dominates ``b`` in ROC space.

    Two points (``(fpr, tpr)`` pairs, :class:`OperatingPoint` or
    :class:`RandomisedOperatingPoint`): ``a`` has no higher false-positive rate
    and no lower true-positive rate, and differs in one. Otherwise each side is
    read as a curve: an :class:`ROCHull` as itself, a point as its own hull
    ``(0, 0)``, the point, ``(1, 1)`` (the operating points randomising it with
    "nothing positive" and "everything positive" reach); ``a`` dominates when its
    curve is nowhere below ``b``'s and somewhere above it (rates within ``1e-12``
    count as equal).

    What dominance means (theory 1.4): on the same test set, the dominating
    classifier yields at least as much under *every* binary utility matrix whose
    correct decisions are worth at least the wrong ones; without dominance, some
    utility matrices prefer each.

    Examples
    --------
    >>> dominates((0.1, 0.8), (0.2, 0.7)), dominates((0.1, 0.8), (0.05, 0.7))
    (True, False)
    >>> steep = convex_hull([4, 3, 2, 1], [1, 1, 0, 0], positive=1)  # perfect ranking
    >>> dominates(steep, (0.1, 0.8))
    True
    """
    if not isinstance(a, ROCHull) and not isinstance(b, ROCHull):
        (f1, t1), (f2, t2) = _point_rates(a, "a"), _point_rates(b, "b")
        no_worse = f1 <= f2 + _RATE_ATOL and t1 >= t2 - _RATE_ATOL
        return no_worse and (f1 < f2 - _RATE_ATOL or t1 > t2 + _RATE_ATOL)
    fa, ta = _as_curve(a, "a")
    fb, tb = _as_curve(b, "b")
    # Both curves are piecewise linear: their difference changes slope only at the
    # union of their breakpoints, so comparing there compares them everywhere.
    x = np.union1d(fa, fb)
    difference = _upper_interp(x, fa, ta) - _upper_interp(x, fb, tb)
    return bool((difference >= -_RATE_ATOL).all() and (difference > _RATE_ATOL).any())


def _named(items: Any) -> list[tuple[Any, Any]]:
    if not isinstance(items, Mapping):
        raise TypeError(
            "items must be a mapping from classifier name to an ROCHull, an operating point or "
            f"an (fpr, tpr) pair, found {type(items).__name__}"
        )
    if not items:
        raise ValueError("items is empty; pass at least one classifier")
    return list(items.items())


def dominance(items: Mapping[Any, Any]) -> pd.DataFrame:
    """Which classifier dominates which: ``table.loc[a, b]`` is ``dominates(a, b)``.

    Parameters
    ----------
    items : mapping of name to ROCHull, operating point or ``(fpr, tpr)`` pair

    Examples
    --------
    >>> dominance({"a": (0.1, 0.9), "b": (0.2, 0.8), "c": (0.05, 0.5)})
    dominated      a      b      c
    dominating
    a          False   True  False
    b          False  False  False
    c          False  False  False
    """
    named = _named(items)
    names = [name for name, _ in named]
    table = np.array([[dominates(a, b) for _, b in named] for _, a in named], dtype=bool)
    return pd.DataFrame(
        table,
        index=pd.Index(names, name="dominating", dtype=object),
        columns=pd.Index(names, name="dominated", dtype=object),
    )


def non_dominated(items: Mapping[Any, Any]) -> list[Any]:
    """Names of the classifiers no other one dominates (the Pareto front), in input order.

    Only these can be the best under some utility matrix; which one is, the utility
    matrix and the class balance decide (:meth:`ROCHull.best_point`).

    Examples
    --------
    >>> non_dominated({"a": (0.1, 0.9), "b": (0.2, 0.8), "c": (0.05, 0.5)})
    ['a', 'c']
    """
    table = dominance(items)
    return [name for name in table.columns if not table[name].any()]
