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
  otherwise by position, row ``i`` meaning "choose class ``i``" in the
  utility's class order (``utility.classes``).
* ``positive`` defaults to the first class, as in
  :func:`yieldwise.metrics.roc_curve`: the first entry of ``classes`` if given,
  else the first category of a categorical ``true_classes``, else the smallest
  label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._validation import Label, _scalar, as_float_array, categories_of, check_labels, indices_of
from ._validation import label_values as _label_values
from .confusion import ConfusionMatrix
from .metrics import UndefinedMetricError, roc_curve_core
from .utility import UtilityMatrix

__all__ = ["OperatingPoint", "best_operating_point", "compare", "iso_utility_slope", "yield_curve"]

# Yields closer than this to the maximum (relative to the largest utility magnitude)
# count as ties: equal yields in real arithmetic differ by a few ulps in floats.
_TIE_RTOL = 1e-12


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
        highest such line touches the curve. ``inf`` when ``U[p,p] == U[n,p]``.
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


def _prepare(
    true_classes: Any, utility: Any, positive: Label | None, classes: Any, n_items: int | None
) -> _Binary:
    """Validate the truth against the utility and resolve the positive class."""
    utility = _check_utility(utility)
    truth = _label_values(true_classes, "true_classes")
    if n_items is not None and truth.size != n_items:
        raise ValueError(
            f"true_classes must have one label per score ({n_items}), found {truth.size}"
        )
    indices_of(truth, utility.classes, "true_classes", "utility matrix's classes")
    if classes is None:
        classes = categories_of(true_classes)
        if classes is None:
            seen = list(pd.unique(truth)) + [c for c in utility.classes if c not in set(truth)]
            try:
                classes = tuple(sorted(seen))
            except TypeError:
                classes = tuple(seen)
    classes = check_labels(classes, len(list(classes)), "classes")
    if set(classes) != set(utility.classes):
        raise ValueError(
            f"classes {list(classes)} must be the utility matrix's classes {list(utility.classes)}"
        )
    if positive is None:
        positive = classes[0]
    positive = _scalar(positive)
    if positive not in utility.classes:
        raise ValueError(
            f"positive {positive!r} is not among the utility matrix's classes "
            f"{list(utility.classes)}"
        )
    col_p = utility.classes.index(positive)
    col_n = 1 - col_p
    negative = utility.classes[col_n]
    if set(utility.decisions) == set(utility.classes):
        row_p = utility.decisions.index(positive)
    else:
        row_p = col_p
    row_n = 1 - row_p
    values = utility.values
    u = values[np.ix_([row_p, row_n], [col_p, col_n])]
    if u[0, 0] == u[1, 0] and u[0, 1] == u[1, 1]:
        raise ValueError(
            "utility gives both decisions the same value for each class "
            f"({utility.values.tolist()}), so no threshold is better than another"
        )
    is_positive = truth == np.array([positive], dtype=object)
    return _Binary(is_positive, positive, negative, u, (row_p, row_n), (col_p, col_n), utility)


def _evaluate(scores: Any, binary: _Binary, name: str = "scores") -> _Curve:
    """Yields at every threshold from cumulative counts (no loop over thresholds)."""
    s = as_float_array(scores, name, ndim=1)
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
    fn = n_pos - tp
    tn = n_neg - fp
    u = binary.u
    total = u[0, 0] * tp + u[1, 0] * fn + u[0, 1] * fp + u[1, 1] * tn
    yields = total / s.size
    f_pos, f_neg = n_pos / s.size, n_neg / s.size
    low = f_pos * u[:, 0].min() + f_neg * u[:, 1].min()
    high = f_pos * u[:, 0].max() + f_neg * u[:, 1].max()
    rescaled = (yields - low) / (high - low)
    return _Curve(thresholds, tp, fp, n_pos, n_neg, yields, rescaled)


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
    b = float(prevalence)
    if not 0 < b < 1:
        raise ValueError(f"prevalence must lie strictly between 0 and 1, found {prevalence!r}")
    classes = utility.classes
    binary = _prepare(np.array(classes, dtype=object), utility, positive, classes, None)
    return _slope(binary.u, b)


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


def _best_index(yields: np.ndarray, u: np.ndarray) -> int:
    """First (highest-threshold) index whose yield ties with the maximum."""
    tolerance = _TIE_RTOL * float(np.abs(u).max())
    return int(np.flatnonzero(yields >= yields.max() - tolerance)[0])


def _point(curve: _Curve, binary: _Binary) -> OperatingPoint:
    k = _best_index(curve.yields, binary.u)
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
    s = as_float_array(scores, "scores", ndim=1)
    binary = _prepare(true_classes, utility, positive, classes, s.size)
    curve = _evaluate(s, binary)
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
    counts. Ties (yields within ``1e-12 * max|U|`` of the maximum) go to the
    highest threshold, i.e. the fewest positive decisions.

    Parameters
    ----------
    scores : 1-D array-like of floats
        Higher means "more positive"; finite.
    true_classes : 1-D label sequence, one per score
        Labels must be the utility matrix's classes.
    utility : UtilityMatrix
        Binary (2x2). If its decision labels equal its class labels as a set,
        decisions are matched to classes by label; otherwise row ``i`` means
        "choose class ``i``" in ``utility.classes`` order.
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
    s = as_float_array(scores, "scores", ndim=1)
    binary = _prepare(true_classes, utility, positive, classes, s.size)
    return _point(_evaluate(s, binary), binary)


def _score_items(scores: Any) -> list[tuple[Any, Any]]:
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
    >>> table = compare({"good": [0.9, 0.8, 0.2, 0.1], "bad": [0.9, 0.1, 0.8, 0.2]}, truth, u)
    >>> table[["utility_yield", "auc", "rank_by_yield"]]
                utility_yield  auc  rank_by_yield
    classifier
    good                 1.00  1.0              1
    bad                  0.75  0.5              2
    """
    items = _score_items(scores)
    binary = _prepare(true_classes, utility, positive, classes, None)
    rows = []
    names = []
    for name, values in items:
        curve = _evaluate(values, binary, f"scores[{name!r}]")
        point = _point(curve, binary)
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
