"""Common classification metrics, each labelled with its admissibility (theory 1.2).

Only the utility yield (:func:`yieldwise.utility_yield`) is guaranteed to rank
classifiers as the problem's utilities do. The metrics here are provided to
compare against and to audit: every function carries ``.admissible`` (whether
it ranks all confusion matrices of a fixed binary test set as some utility
matrix does) and ``.admissibility`` (why).

Conventions
-----------
* Confusion matrices have rows = decisions, columns = true classes, and the
  decisions must correspond one to one with the classes (matched by label).
* Binary metrics take ``positive=`` (default: the *first* class). On more than
  two classes they take either ``positive=`` (that class against the rest) or
  ``average=`` (``"macro"``, ``"weighted"`` or ``"micro"``). Score metrics warn when
  that default is the 0 of labels that read as 0 and 1 (numbers, booleans, strings
  ``"0"``/``"1"``; :func:`default_positive`), and take no default from
  ``true_classes`` holding a single class (one fold or batch): pass ``positive=`` and
  ``classes=`` there.
* A metric that is undefined for the input (say precision with no positive
  decisions) raises :class:`UndefinedMetricError` saying which term vanished.
* Each confusion-matrix metric has a vectorised ``.batch(counts, ...)`` form on
  arrays ``(..., K, K)`` that returns NaN where the metric is undefined.
* ``zero_division=`` (precision, recall, specificity, F-scores, Fowlkes-Mallows)
  says what a ratio with a zero denominator is worth, as in scikit-learn: the
  default ``"raise"`` raises :class:`UndefinedMetricError`; a number in [0, 1]
  replaces each undefined per-class value; ``nan`` leaves undefined classes out of
  macro and weighted averages. ``macro_f=`` (F-scores) chooses between the mean of
  per-class F (``"mean"``, scikit-learn's macro-F) and the F of the macro-averaged
  precision and recall (``"harmonic"``). See :func:`f1`.

Folds
-----
Results from several test folds are combined by *adding* their confusion matrices
(theory 1, "Folds"): the sum is the confusion matrix of all the test items, and
its utility yield is the count-weighted mean of the fold yields. Averaging fold
F-scores (or precisions, or MCCs) gives the score of no set of decisions at all:

>>> from yieldwise import ConfusionMatrix, UtilityMatrix, utility_yield
>>> fold_1 = ConfusionMatrix([[9, 1], [1, 9]])   # 20 items, class 0 positive
>>> fold_2 = ConfusionMatrix([[1, 4], [0, 75]])  # 80 items, few positives
>>> f1(fold_1), round(f1(fold_2), 4)             # 18/20 and 2/6
(0.9, 0.3333)
>>> round((f1(fold_1) + f1(fold_2)) / 2, 4)      # the mean of the fold F1s ...
0.6167
>>> round(f1(fold_1 + fold_2), 4)                # ... is not the F1 of the 100 items: 20/26
0.7692
>>> u = UtilityMatrix([[1, 0], [0, 1]])          # accuracy
>>> utility_yield(fold_1 + fold_2, u)            # (20 * 0.9 + 80 * 0.95) / 100
0.94
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from ._validation import (
    Label,
    align,
    as_float_array,
    caller_stacklevel,
    categories_of,
    check_labels,
    indices_of,
    label_values,
    object_array,
    sorted_unique,
)
from .confusion import ConfusionMatrix

__all__ = [
    "BRIER_TERMS",
    "UndefinedMetricError",
    "MetricInfo",
    "accuracy",
    "precision",
    "recall",
    "true_positive_rate",
    "specificity",
    "true_negative_rate",
    "f1",
    "fbeta",
    "matthews",
    "fowlkes_mallows",
    "balanced_accuracy",
    "cohen_kappa",
    "preference_driven",
    "roc_curve",
    "roc_auc",
    "brier",
    "log_loss",
    "ROCCurve",
    "pr_curve",
    "average_precision",
    "pr_gain_curve",
    "pr_gain_auc",
    "PRCurve",
    "PRGainCurve",
    "BrierDecomposition",
    "brier_decomposition",
    "reliability_table",
    "CONFUSION_METRICS",
    "SCORE_METRICS",
]

Average = Literal["macro", "weighted", "micro"]


class UndefinedMetricError(ValueError):
    """A metric has no value for this input (a ratio with a zero denominator)."""


@dataclass(frozen=True)
class MetricInfo:
    """Admissibility record attached to each metric function as ``.info``."""

    name: str
    admissible: bool
    admissibility: str
    input: Literal["confusion", "scores"]


def _metric(
    name: str,
    admissible: bool,
    admissibility: str,
    input: Literal["confusion", "scores"],
    batch: Callable[..., np.ndarray] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def attach(function: Callable[..., Any]) -> Callable[..., Any]:
        function.info = MetricInfo(name, admissible, admissibility, input)  # type: ignore[attr-defined]
        function.admissible = admissible  # type: ignore[attr-defined]
        function.admissibility = admissibility  # type: ignore[attr-defined]
        if batch is not None:
            function.batch = batch  # type: ignore[attr-defined]
        return function

    return attach


# --------------------------------------------------------------------------- kernels
def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` with NaN (not a warning) where the denominator is 0."""
    numerator, denominator = np.broadcast_arrays(
        np.asarray(numerator, float), np.asarray(denominator, float)
    )
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _one_vs_rest(counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """True/false positives/negatives of every class against the rest, ``(..., K)`` each."""
    tp = np.diagonal(counts, axis1=-2, axis2=-1)
    decided = counts.sum(axis=-1)  # row sums: items given decision k
    present = counts.sum(axis=-2)  # column sums: items of class k
    total = counts.sum(axis=(-2, -1))[..., None]
    fp = decided - tp
    fn = present - tp
    tn = total - tp - fp - fn
    return tp, fp, fn, tn


def _precision_ovr(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    return _ratio(tp, tp + fp)


def _recall_ovr(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    return _ratio(tp, tp + fn)


def _specificity_ovr(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    return _ratio(tn, tn + fp)


def _fbeta_ovr(
    tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray, beta: float = 1.0
) -> np.ndarray:
    b2 = beta * beta
    return _ratio((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp)


def _fowlkes_ovr(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    return _ratio(tp, np.sqrt((tp + fp) * (tp + fn)))


def _fill(values: np.ndarray, zero_division: float | None) -> np.ndarray:
    """Undefined (NaN) values replaced by ``zero_division``; ``None`` or NaN keeps them."""
    if zero_division is None or np.isnan(zero_division):
        return values
    return np.where(np.isnan(values), zero_division, values)


def _average(
    per_class: np.ndarray, support: np.ndarray, average: str, zero_division: float | None
) -> np.ndarray:
    """Macro or weighted average over the last axis.

    With ``zero_division=nan`` (scikit-learn's convention) undefined classes are left
    out of the average; otherwise an undefined class makes the average undefined.
    """
    skip = zero_division is not None and np.isnan(zero_division)
    if average == "macro":
        if skip:
            defined = ~np.isnan(per_class)
            return _ratio(np.where(defined, per_class, 0.0).sum(-1), defined.sum(-1))
        return per_class.mean(axis=-1)
    # A class with no items carries zero weight, whatever its (possibly undefined) score.
    weights = np.where(support > 0, support, 0.0)
    if skip:
        defined = ~np.isnan(per_class)
        weights = np.where(defined, weights, 0.0)
        # as scikit-learn: if every defined class has zero weight, their plain mean
        plain = _ratio(np.where(defined, per_class, 0.0).sum(-1), defined.sum(-1))
        weighted = np.where(weights > 0, per_class, 0.0) * weights
        total = weights.sum(-1)
        return np.where(total > 0, _ratio(weighted.sum(-1), total), plain)
    weighted = np.where(weights > 0, per_class, 0.0) * weights
    return _ratio(weighted.sum(-1), weights.sum(-1))


def _apply_ovr(
    kernel: Callable[..., np.ndarray],
    counts: np.ndarray,
    positive: int | None,
    average: Average | None,
    zero_division: float | None = None,
    macro_f: str = "mean",
    **kw: float,
) -> np.ndarray:
    """A one-vs-rest metric on counts ``(..., K, K)``: one class, or an average.

    ``zero_division`` replaces every ratio whose denominator is zero (``None``: NaN).
    ``macro_f="harmonic"`` (F-scores with ``average="macro"``) takes the F-beta of the
    macro-averaged precision and recall instead of the mean of per-class F-betas.
    """
    tp, fp, fn, tn = _one_vs_rest(counts)
    if average is None:
        k = 0 if positive is None else positive
        return _fill(kernel(tp[..., k], fp[..., k], fn[..., k], tn[..., k], **kw), zero_division)
    if average == "micro":
        return _fill(kernel(tp.sum(-1), fp.sum(-1), fn.sum(-1), tn.sum(-1), **kw), zero_division)
    support = tp + fn
    if macro_f == "harmonic":
        # F-beta of the macro precision P and macro recall R (Opitz and Burst, 2019):
        # (1 + b^2) P R / (b^2 P + R)
        p = _average(_fill(_precision_ovr(tp, fp, fn, tn), zero_division), support, "macro",
                     zero_division)  # fmt: skip
        r = _average(_fill(_recall_ovr(tp, fp, fn, tn), zero_division), support, "macro",
                     zero_division)  # fmt: skip
        b2 = kw.get("beta", 1.0) ** 2
        return _fill(_ratio((1 + b2) * p * r, b2 * p + r), zero_division)
    per_class = _fill(kernel(tp, fp, fn, tn, **kw), zero_division)
    return _average(per_class, support, average, zero_division)


def _accuracy_batch(counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts, float)
    return _ratio(np.trace(counts, axis1=-2, axis2=-1), counts.sum(axis=(-2, -1)))


def _balanced_batch(counts: np.ndarray) -> np.ndarray:
    return _apply_ovr(_recall_ovr, np.asarray(counts, float), None, "macro")


def _matthews_batch(counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts, float)
    s = counts.sum(axis=(-2, -1))
    c = np.trace(counts, axis1=-2, axis2=-1)
    decided = counts.sum(axis=-1)
    present = counts.sum(axis=-2)
    cov = c * s - (decided * present).sum(-1)
    var_d = s * s - (decided * decided).sum(-1)
    var_c = s * s - (present * present).sum(-1)
    return _ratio(cov, np.sqrt(var_d * var_c))


def _kappa_batch(counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts, float)
    s = counts.sum(axis=(-2, -1))
    observed = np.trace(counts, axis1=-2, axis2=-1) / s
    chance = (counts.sum(axis=-1) * counts.sum(axis=-2)).sum(-1) / (s * s)
    return _ratio(observed - chance, 1 - chance)


def _preference_batch(counts: np.ndarray, kappa: np.ndarray | None = None) -> np.ndarray:
    counts = np.asarray(counts, float)
    tp, fp, fn, _ = _one_vs_rest(counts)
    if kappa is None:
        present = tp + fn
        kappa = present / present.sum(-1, keepdims=True)
    kappa = np.asarray(kappa, float)
    # A zero weight removes its term even where that precision/recall is undefined.
    prec = np.where(kappa > 0, kappa * _ratio(tp, tp + fp), 0.0)
    rec = np.where(kappa < 1, (1 - kappa) * _ratio(tp, tp + fn), 0.0)
    return (prec + rec).mean(axis=-1)


def _ovr_batch(kernel: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def batch(
        counts: np.ndarray,
        positive: int = 0,
        average: Average | None = None,
        zero_division: float | None = None,
        **kw: Any,
    ) -> np.ndarray:
        return _apply_ovr(kernel, np.asarray(counts, float), positive, average, zero_division, **kw)

    batch.__doc__ = (
        "Vectorised form on counts ``(..., K, K)`` (rows decisions, columns classes); "
        "``positive`` is a class index. NaN where undefined, unless ``zero_division`` "
        "gives a value."
    )
    return batch


# --------------------------------------------------------------------- validation
def square_counts(confusion: Any, metric: str) -> tuple[np.ndarray, tuple[Label, ...]]:
    """Counts with rows reordered so row ``k`` is the decision "choose class ``k``"."""
    if not isinstance(confusion, ConfusionMatrix):
        raise TypeError(
            f"{metric}: confusion must be a ConfusionMatrix, found {type(confusion).__name__}"
        )
    if set(confusion.decisions) != set(confusion.classes):
        raise ValueError(
            f"{metric} needs one decision per class (decision k = 'choose class k'), but the "
            f"decisions are {list(confusion.decisions)} and the classes "
            f"{list(confusion.classes)}; use utility_yield for other decision sets"
        )
    rows = align(confusion.classes, confusion.decisions, "classes", "decisions")
    return confusion.counts[rows], confusion.classes


def _resolve(
    classes: tuple[Label, ...], positive: Label | None, average: str | None, metric: str
) -> tuple[int | None, Average | None]:
    if average is not None:
        if average not in ("macro", "weighted", "micro"):
            raise ValueError(
                f"{metric}: average must be 'macro', 'weighted' or 'micro', found {average!r}"
            )
        if positive is not None:
            raise ValueError(f"{metric}: give either positive= or average=, not both")
        return None, average  # type: ignore[return-value]
    if positive is None:
        if len(classes) > 2:
            raise ValueError(
                f"{metric} on {len(classes)} classes {list(classes)} needs positive= (one class "
                "against the rest) or average= ('macro', 'weighted' or 'micro')"
            )
        return 0, None
    return int(indices_of(object_array([positive]), classes, "positive", "classes")[0]), None


def _undefined_ovr(
    metric: str, counts: np.ndarray, classes: tuple[Label, ...], which: list[int]
) -> str:
    tp, fp, fn, tn = _one_vs_rest(counts)
    reasons = []
    for k in which:
        label = classes[k]
        if tp[k] + fp[k] == 0:
            reasons.append(f"no item was decided as class {label!r}")
        if tp[k] + fn[k] == 0:
            reasons.append(f"no item of class {label!r} is in the test set")
        if tn[k] + fp[k] == 0:
            reasons.append(f"every item is of class {label!r}")
    detail = "; ".join(reasons) if reasons else "a denominator is zero"
    return f"{metric} is undefined for this confusion matrix: {detail}"


def _check_zero_division(zero_division: Any, metric: str) -> float | None:
    """``None`` for "raise", else the replacement value (a number in [0, 1], or NaN)."""
    if isinstance(zero_division, str) and zero_division == "raise":
        return None
    if (
        isinstance(zero_division, bool)
        or not isinstance(zero_division, int | float | np.floating | np.integer)
        or not (np.isnan(zero_division) or 0 <= zero_division <= 1)
    ):
        raise ValueError(
            f"{metric}: zero_division must be 'raise', a number in [0, 1] or nan, found "
            f"{zero_division!r}"
        )
    return float(zero_division)


def _check_macro_f(macro_f: Any, average: str | None, metric: str) -> str:
    if macro_f not in ("mean", "harmonic"):
        raise ValueError(f"{metric}: macro_f must be 'mean' or 'harmonic', found {macro_f!r}")
    if macro_f == "harmonic" and average != "macro":
        raise ValueError(
            f"{metric}: macro_f='harmonic' (the F of macro precision and macro recall) needs "
            f"average='macro', found average={average!r}"
        )
    return macro_f


def _ovr_metric(
    metric: str,
    kernel: Callable[..., np.ndarray],
    confusion: ConfusionMatrix,
    positive: Label | None,
    average: str | None,
    zero_division: Any = "raise",
    macro_f: str = "mean",
    **kw: float,
) -> float:
    counts, classes = square_counts(confusion, metric)
    k, avg = _resolve(classes, positive, average, metric)
    fill = _check_zero_division(zero_division, metric)
    value = float(_apply_ovr(kernel, counts, k, avg, fill, macro_f, **kw))
    if np.isnan(value) and fill is None:
        which = [k] if k is not None else list(range(len(classes)))
        raise UndefinedMetricError(_undefined_ovr(metric, counts, classes, which))
    return value


def _whole_metric(
    metric: str, batch: Callable[[np.ndarray], np.ndarray], confusion: ConfusionMatrix, why: str
) -> float:
    counts, _ = square_counts(confusion, metric)
    value = float(batch(counts))
    if np.isnan(value):
        raise UndefinedMetricError(f"{metric} is undefined for this confusion matrix: {why}")
    return value


# ------------------------------------------------------------- confusion metrics
@_metric(
    "accuracy",
    True,
    "Yield of the identity utility matrix (X = Y = 1 in theory 1.2).",
    "confusion",
    _accuracy_batch,
)
def accuracy(confusion: ConfusionMatrix) -> float:
    """Fraction of items whose decision is their true class.

    Examples
    --------
    >>> from yieldwise import ConfusionMatrix
    >>> from yieldwise.metrics import accuracy
    >>> accuracy(ConfusionMatrix([[3, 1], [1, 5]]))  # (3 + 5) / 10
    0.8
    """
    return _whole_metric("accuracy", _accuracy_batch, confusion, "empty confusion matrix")


@_metric(
    "precision",
    False,
    "Nonlinear in the confusion matrix (a ratio with the decisions in the denominator): "
    "it ranks some pairs wrongly under every utility matrix.",
    "confusion",
    _ovr_batch(_precision_ovr),
)
def precision(
    confusion: ConfusionMatrix,
    positive: Label | None = None,
    average: Average | None = None,
    *,
    zero_division: Any = "raise",
) -> float:
    """Fraction of items decided as the positive class that are positive (PPV).

    ``zero_division`` as in :func:`f1` (module notes).
    """
    return _ovr_metric("precision", _precision_ovr, confusion, positive, average, zero_division)


@_metric(
    "recall",
    True,
    "Binary: yield of the matrix rewarding only correct positives (X = 1, Y = 0). "
    "Macro-averaged over classes it becomes balanced accuracy, which is not admissible.",
    "confusion",
    _ovr_batch(_recall_ovr),
)
def recall(
    confusion: ConfusionMatrix,
    positive: Label | None = None,
    average: Average | None = None,
    *,
    zero_division: Any = "raise",
) -> float:
    """True-positive rate: fraction of positive items decided as positive.

    ``zero_division`` as in :func:`f1` (module notes).
    """
    return _ovr_metric("recall", _recall_ovr, confusion, positive, average, zero_division)


true_positive_rate = recall


@_metric(
    "specificity",
    True,
    "Binary: yield of the matrix rewarding only correct negatives (X = 0, Y = 1).",
    "confusion",
    _ovr_batch(_specificity_ovr),
)
def specificity(
    confusion: ConfusionMatrix,
    positive: Label | None = None,
    average: Average | None = None,
    *,
    zero_division: Any = "raise",
) -> float:
    """True-negative rate: fraction of non-positive items not decided as positive.

    ``zero_division`` as in :func:`f1` (module notes).
    """
    return _ovr_metric("specificity", _specificity_ovr, confusion, positive, average, zero_division)


true_negative_rate = specificity


@_metric(
    "fbeta",
    False,
    "Nonlinear in the confusion matrix (harmonic mean of precision and recall).",
    "confusion",
    _ovr_batch(_fbeta_ovr),
)
def fbeta(
    confusion: ConfusionMatrix,
    beta: float = 1.0,
    positive: Label | None = None,
    average: Average | None = None,
    *,
    zero_division: Any = "raise",
    macro_f: str = "mean",
) -> float:
    """F-beta score ``(1 + b^2) TP / ((1 + b^2) TP + b^2 FN + FP)``.

    ``zero_division`` and ``macro_f`` as in :func:`f1`.
    """
    # a real number first: a string would reach isfinite's raw TypeError, and a bool
    # (True == 1) would pass for beta = 1 without a word
    if isinstance(beta, bool | np.bool_) or not isinstance(
        beta, int | float | np.integer | np.floating
    ):
        raise TypeError(
            f"fbeta: beta must be a positive finite number (the weight of recall against "
            f"precision), found {type(beta).__name__} {beta!r}; pass e.g. beta=2"
        )
    if not np.isfinite(beta) or beta <= 0:
        raise ValueError(
            f"fbeta: beta must be a positive finite number (the weight of recall against "
            f"precision), found {beta!r}; pass e.g. beta=2"
        )
    macro_f = _check_macro_f(macro_f, average, "fbeta")
    return _ovr_metric(
        "fbeta", _fbeta_ovr, confusion, positive, average, zero_division, macro_f,
        beta=float(beta),
    )  # fmt: skip


def _f1_batch(
    counts: np.ndarray,
    positive: int = 0,
    average: Average | None = None,
    zero_division: float | None = None,
    macro_f: str = "mean",
) -> np.ndarray:
    return _apply_ovr(
        _fbeta_ovr, np.asarray(counts, float), positive, average, zero_division, macro_f,
        beta=1.0,
    )  # fmt: skip


@_metric(
    "f1",
    False,
    "Nonlinear in the confusion matrix (harmonic mean of precision and recall).",
    "confusion",
    _f1_batch,
)
def f1(
    confusion: ConfusionMatrix,
    positive: Label | None = None,
    average: Average | None = None,
    *,
    zero_division: Any = "raise",
    macro_f: str = "mean",
) -> float:
    """F1 score, the harmonic mean of precision and recall.

    Parameters
    ----------
    confusion : ConfusionMatrix
    positive : label, optional
        The class scored against the rest (default the first of two classes).
    average : {"macro", "weighted", "micro"}, optional
        Average over the classes instead (several classes).
    zero_division : "raise", number in [0, 1], or nan, default "raise"
        What a ratio with a zero denominator is worth, as scikit-learn's
        ``zero_division``: ``"raise"`` raises :class:`UndefinedMetricError`
        naming the empty term; a number replaces each undefined per-class value
        (precision with no item decided as the class, recall with no item of it,
        F with neither: ``TP + FP + FN = 0``); ``nan`` leaves undefined classes out
        of macro and weighted averages (and returns NaN when nothing is defined).
    macro_f : {"mean", "harmonic"}, default "mean"
        With ``average="macro"``: ``"mean"`` averages the per-class F1 scores
        (scikit-learn's macro-F1); ``"harmonic"`` is the harmonic mean of the
        macro-averaged precision and recall, the convention of the
        preference-driven measure's paper. The two differ (Opitz and Burst, 2019).

    Examples
    --------
    Three classes; class ``c`` is never decided, so its precision is 0/0 (its F1 is
    still defined: ``2 TP / (2 TP + FP + FN) = 0 / 3``):

    >>> from yieldwise import ConfusionMatrix
    >>> cm = ConfusionMatrix([[4, 1, 1], [0, 3, 2], [0, 0, 0]], classes=list("abc"),
    ...                      decisions=list("abc"))
    >>> round(f1(cm, average="macro"), 6)  # (8/10 + 6/9 + 0) / 3
    0.488889
    >>> [round(precision(cm, average="macro", zero_division=z), 6) for z in (0, 1)]
    [0.422222, 0.755556]
    >>> round(precision(cm, average="macro", zero_division=float("nan")), 6)  # c left out
    0.633333
    >>> # harmonic: macro P = (2/3 + 3/5 + 0) / 3, macro R = (1 + 3/4 + 0) / 3, 2PR / (P + R)
    >>> round(f1(cm, average="macro", macro_f="harmonic", zero_division=0), 6)
    0.489871
    """
    macro_f = _check_macro_f(macro_f, average, "f1")
    return _ovr_metric(
        "f1", _fbeta_ovr, confusion, positive, average, zero_division, macro_f, beta=1.0
    )


@_metric(
    "matthews",
    False,
    "Nonlinear in the confusion matrix (a correlation coefficient).",
    "confusion",
    _matthews_batch,
)
def matthews(confusion: ConfusionMatrix) -> float:
    """Matthews correlation coefficient (multi-class form of Gorodkin, 2004)."""
    return _whole_metric(
        "matthews",
        _matthews_batch,
        confusion,
        "every item was given the same decision, or every item is of the same class",
    )


@_metric(
    "fowlkes_mallows",
    False,
    "Nonlinear in the confusion matrix (geometric mean of precision and recall).",
    "confusion",
    _ovr_batch(_fowlkes_ovr),
)
def fowlkes_mallows(
    confusion: ConfusionMatrix,
    positive: Label | None = None,
    average: Average | None = None,
    *,
    zero_division: Any = "raise",
) -> float:
    """Fowlkes-Mallows index ``sqrt(precision * recall)``.

    ``zero_division`` as in :func:`f1` (module notes).
    """
    return _ovr_metric("fowlkes_mallows", _fowlkes_ovr, confusion, positive, average, zero_division)


@_metric(
    "balanced_accuracy",
    False,
    "Linear, but its weights X/Y = f_1/f_0 depend on the class balance of the test set.",
    "confusion",
    _balanced_batch,
)
def balanced_accuracy(confusion: ConfusionMatrix) -> float:
    """Mean over classes of the per-class recall."""
    counts, classes = square_counts(confusion, "balanced_accuracy")
    value = float(_balanced_batch(counts))
    if np.isnan(value):
        raise UndefinedMetricError(
            _undefined_ovr("balanced_accuracy", counts, classes, list(range(len(classes))))
        )
    return value


@_metric(
    "cohen_kappa",
    False,
    "Nonlinear in the confusion matrix (chance agreement depends on the decisions' margins).",
    "confusion",
    _kappa_batch,
)
def cohen_kappa(confusion: ConfusionMatrix) -> float:
    """Cohen's kappa ``(p_o - p_e) / (1 - p_e)``."""
    return _whole_metric(
        "cohen_kappa",
        _kappa_batch,
        confusion,
        "chance agreement is 1 (all decisions and all classes are one and the same class)",
    )


@_metric(
    "preference_driven",
    False,
    "Nonlinear in the confusion matrix (averages precisions, theory 1.3).",
    "confusion",
    _preference_batch,
)
def preference_driven(confusion: ConfusionMatrix, kappa: Any = None) -> float:
    """Preference-driven measure ``(1/K) sum_i [kappa_i P_i + (1 - kappa_i) R_i]`` (theory 1.3).

    ``kappa`` defaults to the class frequencies among the true labels.
    """
    counts, classes = square_counts(confusion, "preference_driven")
    if kappa is not None:
        kappa = as_float_array(kappa, "kappa", ndim=1)
        if kappa.shape != (len(classes),):
            raise ValueError(
                f"kappa must have one entry per class {list(classes)}, found {kappa.size}"
            )
        if (kappa < 0).any() or (kappa > 1).any():
            raise ValueError(f"kappa must lie in [0, 1], found {kappa.tolist()}")
    value = float(_preference_batch(counts, kappa))
    if np.isnan(value):
        raise UndefinedMetricError(
            _undefined_ovr("preference_driven", counts, classes, list(range(len(classes))))
        )
    return value


# ---------------------------------------------------------------- score metrics
@dataclass(frozen=True)
class ROCCurve:
    """Empirical ROC curve; decide "positive" when ``score >= thresholds[j]``.

    ``thresholds[0]`` is ``+inf`` (nothing positive, the point (0, 0)).
    """

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray
    positive: Label
    prevalence: float  # fraction of positive items, B in theory 1.4
    n_items: int


# labels read as the digits 0 and 1: numbers, booleans, and the strings a CSV or a
# str() conversion gives them
_DIGIT_STRINGS = {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "False": 0, "True": 1}


def _binary_digit(label: Any) -> int | None:
    """0 or 1 when ``label`` reads as that digit (``0``, ``0.0``, ``False``, ``"0"``, ...),
    else None."""
    if isinstance(label, bool | np.bool_):
        return int(label)
    if isinstance(label, int | float | np.integer | np.floating):
        return int(label) if label in (0, 1) else None
    if isinstance(label, str):
        return _DIGIT_STRINGS.get(label.strip())
    return None


def default_positive(classes: tuple[Label, ...]) -> Label:
    """The default positive class of every binary function: the first of ``classes``.

    The one rule of :func:`binary_truth` (the score metrics, the ROC hull, cost and Brier
    curves) and :func:`yieldwise.roc.prepare_binary` (operating points, yield curves).
    When the two classes read as 0 and 1 (numbers, booleans or the strings ``"0"``,
    ``"1"``) and the default is the 0 one, it warns: scores and probabilities are most
    often those of 1 (scikit-learn's ``pos_label=1``), and read as pointing to 0 they
    give the complement (an AUC of 0.22 for 0.78) without a word. A default that is
    already the 1 one (``classes=[1, 0]``) says nothing.
    """
    positive = classes[0]
    if len(classes) == 2 and _binary_digit(positive) == 0 and _binary_digit(classes[1]) == 1:
        one = classes[1]
        # scikit-learn's default pos_label=1 holds for numbers and booleans; string labels
        # it refuses without pos_label
        usual = "" if isinstance(one, str) else " (scikit-learn's default)"
        warnings.warn(
            f"positive defaults to the first class, {positive!r} (yieldwise's convention "
            f"for every binary function), so the scores or probabilities are read as "
            f"pointing to {positive!r}; with 0/1 labels the usual positive class is the "
            f"other one, {one!r}{usual}. For scores or probabilities of {one!r}, pass "
            f"positive={one!r}; to keep {positive!r} and silence this warning, pass "
            f"positive={positive!r}",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )
    return positive


def _pair_example(label: Label) -> str:
    """The ``classes=`` of a hint: the 0/1 pair of a class that reads as a digit
    (``[0, 1]``, ``[False, True]``, ``['0', '1']``, ...), else ``[label, ...]``."""
    if _binary_digit(label) is None:
        return f"[{label!r}, <the other class>]"
    if isinstance(label, bool | np.bool_):
        pair: list[Any] = [False, True]
    elif isinstance(label, str):
        pair = next(
            [a, b] for a, b in (("0", "1"), ("0.0", "1.0"), ("False", "True"))
            if label.strip() in (a, b)
        )  # fmt: skip
    elif isinstance(label, float | np.floating):
        pair = [0.0, 1.0]
    else:
        pair = [0, 1]
    return repr(pair)


def binary_truth(
    true_classes: Any,
    positive: Label | None,
    classes: Any,
    n_items: int,
    *,
    two_classes: str | None = None,
) -> tuple[np.ndarray, Label, tuple[Label, ...]]:
    """``(is_positive, positive, classes)`` for a binary score metric.

    ``positive`` defaults to the first class (the first of ``classes``, the first
    category of a categorical, else the smallest label; :func:`default_positive`);
    with more than two classes there is no default, nor with classes read from
    ``true_classes`` that holds only one (the default would then change from batch to
    batch). ``two_classes``, a function's name, refuses any number of classes but two
    (that function cannot score one class against the rest). A categorical's
    categories give the class order; with ``positive`` given they only check the
    labels, and unused ones (a categorical keeps them after filtering) are no classes.
    """
    truth = label_values(true_classes, "true_classes")
    if truth.size != n_items:
        raise ValueError(
            f"true_classes must have one label per score ({n_items}), found {truth.size}"
        )
    source = "classes"  # where the classes came from, for the messages
    unused: list[Label] = []
    if classes is None:
        categories = categories_of(true_classes)
        if categories is not None:
            source = "categories"
            present = set(pd.unique(truth).tolist())
            unused = [c for c in categories if c not in present]
            # the categories only choose the default positive: with positive= given,
            # categories left unused (a categorical keeps them after filtering) are no
            # classes of these items
            if positive is not None:
                categories = tuple(c for c in categories if c in present or c == positive)
            classes = categories
        else:
            # the smallest label is the default positive; labels without an order have none
            # (a given positive= needs no order: the result does not depend on it)
            source = "inferred"
            classes = sorted_unique(
                truth, name="true_classes", remedy="pass positive= (or classes= to give the "
                "class order)", fallback=positive is not None,
            )  # fmt: skip
    classes = check_labels(classes, None, "classes")
    indices_of(truth, classes, "true_classes", "classes")
    unused_hint = (
        f" (the categories of the categorical true_classes, of which {unused} "
        "are unused: drop them with .remove_unused_categories(), or pass positive=)"
        if source == "categories" and unused else ""
    )  # fmt: skip
    if two_classes is not None and len(classes) != 2:
        remedy = (
            "; it needs items of both the positive and the negative class"
            if len(classes) < 2
            else f"{unused_hint}; relabel the classes as the positive one and the rest"
        )
        raise ValueError(
            f"{two_classes} needs two classes, found {len(classes)}: {list(classes)}{remedy}"
        )
    if source == "inferred" and positive is None and len(classes) < 2:
        # one fold, stratum or batch: its only class would be the positive one, so the same
        # scores would mean P(0) on a batch of 0s and P(1) on a batch of 1s
        raise ValueError(
            f"true_classes holds only one class, {classes[0]!r}, and classes= is not given, "
            "so there is no default positive class: the first class of these items would "
            "be the positive one, and the same scores or probabilities would mean another "
            "class on another batch; pass positive= (the class the scores point to) and "
            f"classes= (all the classes, e.g. classes={_pair_example(classes[0])})"
        )
    if positive is None:
        if len(classes) > 2:
            raise ValueError(
                f"positive= is needed with more than two classes, found {len(classes)}: "
                f"{list(classes)}{unused_hint}; there is no default positive class (scoring "
                "the first against the rest would be a silent guess), so pass positive= "
                "to score that class against the rest"
            )
        positive = default_positive(classes)
    elif positive not in classes:
        if source == "inferred":
            remedy = (
                "the classes were read from true_classes, which may lack some (one fold or "
                "batch); pass classes= to list them all (e.g. "
                f"classes={[*classes, positive]!r})"
            )
        elif source == "categories":
            remedy = "add it to the categories of true_classes, or pass classes= to list them all"
        else:
            remedy = "pass one of them as positive=, or add it to classes="
        raise ValueError(
            f"positive {positive!r} is not among the classes {list(classes)}; {remedy}"
        )
    is_positive = truth == object_array([positive])
    return is_positive, positive, classes


def _scores_1d(scores: Any) -> np.ndarray:
    # exact integers: distinct integer scores beyond 2**53 would merge into one tie
    return as_float_array(scores, "scores", ndim=1, exact_integers=True)


def roc_curve_core(scores: np.ndarray, is_positive: np.ndarray) -> tuple[np.ndarray, ...]:
    """Cumulative counts at each distinct threshold, highest first (vectorised)."""
    order = np.argsort(-scores, kind="mergesort")
    s = scores[order]
    pos = is_positive[order].astype(float)
    last_of_run = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1]
    tp = np.r_[0.0, np.cumsum(pos)[last_of_run]]
    fp = np.r_[0.0, np.cumsum(1 - pos)[last_of_run]]
    thresholds = np.r_[np.inf, s[last_of_run]]
    return tp, fp, thresholds


@_metric(
    "roc_curve",
    False,
    "A curve, not a score: pick the operating point with roc.best_operating_point.",
    "scores",
)
def roc_curve(
    scores: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> ROCCurve:
    """Empirical ROC curve of a scoring classifier; higher scores mean "more positive".

    ``positive`` defaults to the first class (the first category of a
    categorical, else the smallest label).
    """
    s = _scores_1d(scores)
    is_positive, positive, _ = binary_truth(true_classes, positive, classes, s.size)
    n_pos = is_positive.sum()
    n_neg = s.size - n_pos
    if n_pos == 0 or n_neg == 0:
        missing = "positive" if n_pos == 0 else "negative"
        raise UndefinedMetricError(
            f"roc_curve is undefined: true_classes has no {missing} items (positive = {positive!r})"
        )
    tp, fp, thresholds = roc_curve_core(s, is_positive)
    return ROCCurve(fp / n_neg, tp / n_pos, thresholds, positive, float(n_pos / s.size), s.size)


@_metric(
    "roc_auc",
    False,
    "Averages over all thresholds instead of the one a utility matrix selects; crossing ROC "
    "curves are ranked by the utility, never by their areas (theory 1.4).",
    "scores",
)
def roc_auc(
    scores: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> float:
    """Area under the empirical ROC curve (ties count one half)."""
    curve = roc_curve(scores, true_classes, positive, classes)
    return float(np.trapezoid(curve.tpr, curve.fpr))


# ----------------------------------------------------- precision-recall curves
def _binary_counts(
    scores: Any, true_classes: Any, positive: Label | None, classes: Any, metric: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, Label]:
    """``(tp, fp, thresholds, P, N, positive)`` at every distinct threshold, highest first."""
    s = _scores_1d(scores)
    is_positive, positive, _ = binary_truth(true_classes, positive, classes, s.size)
    n_pos = int(is_positive.sum())
    n_neg = s.size - n_pos
    if n_pos == 0 or n_neg == 0:
        missing = "positive" if n_pos == 0 else "negative"
        raise UndefinedMetricError(
            f"{metric} is undefined: true_classes has no {missing} items (positive = {positive!r})"
        )
    tp, fp, thresholds = roc_curve_core(s, is_positive)
    return tp, fp, thresholds, n_pos, n_neg, positive


@dataclass(frozen=True)
class PRCurve:
    """Empirical precision-recall curve; decide "positive" when ``score >= thresholds[j]``.

    One point per distinct score, highest first (the "nothing positive" point, whose
    precision is 0/0, is left out).
    """

    precision: np.ndarray
    recall: np.ndarray
    thresholds: np.ndarray
    positive: Label
    prevalence: float
    n_items: int


_PR_REASON = (
    "Precision is nonlinear in the confusion matrix and ignores true negatives; a curve or "
    "an average over its operating points ranks classifiers by points nobody deploys "
    "together, not by the one a utility matrix selects (theory 1.2, 1.4)."
)


@_metric("pr_curve", False, "A curve, not a score. " + _PR_REASON, "scores")
def pr_curve(
    scores: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> PRCurve:
    """Empirical precision-recall curve of a scoring classifier (higher: more positive).

    Examples
    --------
    >>> curve = pr_curve([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], positive=1)
    >>> curve.precision.tolist(), curve.recall.tolist()
    ([1.0, 0.5, 0.6666666666666666, 0.5], [0.5, 0.5, 1.0, 1.0])
    """
    tp, fp, thresholds, n_pos, n_neg, positive = _binary_counts(
        scores, true_classes, positive, classes, "pr_curve"
    )
    tp, fp, thresholds = tp[1:], fp[1:], thresholds[1:]
    return PRCurve(tp / (tp + fp), tp / n_pos, thresholds, positive, n_pos / (n_pos + n_neg),
                   n_pos + n_neg)  # fmt: skip


@_metric(
    "average_precision",
    False,
    "Averages precision over the recall levels of all thresholds. " + _PR_REASON,
    "scores",
)
def average_precision(
    scores: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> float:
    """Average precision ``sum_j (R_j - R_j-1) P_j`` over the thresholds (no interpolation).

    The area under the precision-recall step curve, as scikit-learn's
    ``average_precision_score`` computes it (``R_0 = 0``).

    Examples
    --------
    >>> average_precision([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], positive=1)  # 0.5 * 1 + 0.5 * 2/3
    0.8333333333333333
    """
    curve = pr_curve(scores, true_classes, positive, classes)
    return float(np.sum(np.diff(np.r_[0.0, curve.recall]) * curve.precision))


@dataclass(frozen=True, eq=False)
class PRGainCurve:
    """Precision-recall-gain curve (Flach and Kull, 2015); see :func:`pr_gain_curve`.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per threshold with at least one true positive (highest first), plus,
        flagged ``is_crossing``, the interpolated point where recall gain is 0:
        ``threshold``, ``true_positives``, ``false_positives``, ``precision``,
        ``recall``, ``precision_gain``, ``recall_gain``, ``is_crossing``.
    area : float
        Area under the curve over recall gains in [0, 1] (AUPRG), linear between
        points; precision gains below 0 count negatively.
    positive : label
    prevalence : float
        ``pi``, the share of positives, the gains' baseline.
    """

    frame: pd.DataFrame
    area: float
    positive: Label
    prevalence: float


@_metric(
    "pr_gain_curve",
    False,
    "A curve, not a score; precision gain is a nonlinear function of the confusion matrix "
    "(an F-score rescaled to the always-positive baseline). " + _PR_REASON,
    "scores",
)
def pr_gain_curve(
    scores: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> PRGainCurve:
    """Precision-recall-gain curve of a scoring classifier (Flach and Kull, 2015).

    With ``pi`` the share of positives and ``P``, ``N`` the counts of positives and
    negatives, each threshold's gains are

    ``precision_gain = 1 - (P / N) FP / TP``,   ``recall_gain = 1 - (P / N) FN / TP``,

    i.e. precision and recall rescaled harmonically so that the always-positive
    classifier (precision ``pi``) sits at 0 and a perfect one at 1. Between
    thresholds, randomised classifiers trace straight lines in gain space (both
    gains are affine in ``1 / TP`` along a segment), so the curve is piecewise
    linear; the point where recall gain crosses 0 (recall ``pi``) is interpolated on
    its segment, as the reference implementation (``prg``) does.

    Examples
    --------
    >>> curve = pr_gain_curve([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], positive=1)
    >>> curve.frame[["true_positives", "false_positives", "precision_gain", "recall_gain"]]
       true_positives  false_positives  precision_gain  recall_gain
    0             1.0              0.0             1.0          0.0
    1             1.0              1.0             0.0          0.0
    2             2.0              1.0             0.5          1.0
    3             2.0              2.0             0.0          1.0
    >>> curve.area  # from (0, 0) to (1, 0.5), then along recall gain 1
    0.25
    """
    tp, fp, thresholds, n_pos, n_neg, positive = _binary_counts(
        scores, true_classes, positive, classes, "pr_gain_curve"
    )
    ratio = n_pos / n_neg
    defined = tp > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        precision_gain = np.where(defined, 1 - ratio * fp / np.where(defined, tp, 1), -np.inf)
        recall_gain = np.where(defined, 1 - ratio * (n_pos - tp) / np.where(defined, tp, 1),
                               -np.inf)  # fmt: skip
    is_crossing = np.zeros(tp.size, dtype=bool)
    first = int(np.flatnonzero(recall_gain >= 0)[0])  # exists: everything positive has 1
    keep = np.arange(first, tp.size)
    columns = {"threshold": thresholds, "true_positives": tp, "false_positives": fp}
    if recall_gain[first] > 0:
        # interpolate in counts on the segment (first - 1, first) to TP = P pi = P^2 / n
        alpha = (n_pos * n_pos / (n_pos + n_neg) - tp[first - 1]) / (tp[first] - tp[first - 1])
        tp_c = tp[first - 1] + alpha * (tp[first] - tp[first - 1])
        fp_c = fp[first - 1] + alpha * (fp[first] - fp[first - 1])
        columns = {
            "threshold": np.r_[thresholds[first], thresholds[keep]],
            "true_positives": np.r_[tp_c, tp[keep]],
            "false_positives": np.r_[fp_c, fp[keep]],
        }
        precision_gain = np.r_[1 - ratio * fp_c / tp_c, precision_gain[keep]]
        recall_gain = np.r_[0.0, recall_gain[keep]]
        is_crossing = np.r_[True, is_crossing[keep]]
    else:
        columns = {k: v[keep] for k, v in columns.items()}
        precision_gain, recall_gain, is_crossing = (
            precision_gain[keep], recall_gain[keep], is_crossing[keep]
        )  # fmt: skip
    t, f = columns["true_positives"], columns["false_positives"]
    frame = pd.DataFrame(
        {
            **columns,
            "precision": t / (t + f),
            "recall": t / n_pos,
            "precision_gain": precision_gain,
            "recall_gain": recall_gain,
            "is_crossing": is_crossing,
        }
    )
    area = float(np.sum(np.diff(recall_gain) * (precision_gain[1:] + precision_gain[:-1]) / 2))
    return PRGainCurve(frame, area, positive, n_pos / (n_pos + n_neg))


@_metric(
    "pr_gain_auc",
    False,
    "Averages precision gain over recall gains: the expected F-gain over operating points "
    "(Flach and Kull, 2015), not the yield of the one a utility matrix selects. " + _PR_REASON,
    "scores",
)
def pr_gain_auc(
    scores: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> float:
    """Area under the precision-recall-gain curve (AUPRG); see :func:`pr_gain_curve`."""
    return pr_gain_curve(scores, true_classes, positive, classes).area


def _check_probabilities(p: np.ndarray, metric: str) -> None:
    """Raise, saying what to do, when ``p`` (the argument ``probabilities``) leaves [0, 1]."""
    if (p < 0).any() or (p > 1).any():
        raise ValueError(
            f"{metric}: the argument probabilities must hold probabilities in [0, 1], found "
            f"values in [{p.min()}, {p.max()}]. Raw scores (logits, margins, votes on "
            "another scale) must be calibrated first: fit a calibrator from "
            "yieldwise.calibrators (PlattCalibrator, IsotonicCalibrator, BetaCalibrator, "
            "TemperatureCalibrator) or a yieldwise.Transducer on labelled items and pass "
            "its predict_proba"
        )


def _probability_matrix(
    probabilities: Any, true_classes: Any, classes: Any, positive: Label | None, metric: str
) -> tuple[np.ndarray, np.ndarray, tuple[Label, ...]]:
    """``(p, onehot, labels)``; a 1-D input is the probability of ``positive``.

    ``labels`` names the columns: ``(positive,)`` for a 1-D input, else the classes.
    """
    p = as_float_array(probabilities, "probabilities", ndim=(1, 2))
    truth = label_values(true_classes, "true_classes")
    if truth.size != p.shape[0]:
        raise ValueError(
            f"true_classes must have one label per row of probabilities ({p.shape[0]}), "
            f"found {truth.size}"
        )
    _check_probabilities(p, metric)
    if p.ndim == 1:
        is_positive, positive, _ = binary_truth(true_classes, positive, classes, p.size)
        return p[:, None], is_positive.astype(float)[:, None], (positive,)
    if positive is not None:
        raise ValueError(f"{metric}: positive= applies to 1-D probabilities only")
    sums = p.sum(axis=1)
    if np.abs(sums - 1).max() > 1e-6:
        raise ValueError(
            f"{metric}: each row of probabilities must sum to 1, found sums in "
            f"[{sums.min()}, {sums.max()}]"
        )
    if classes is None:
        classes = categories_of(true_classes) or sorted_unique(
            truth, name="true_classes", remedy="pass classes= to name the columns of "
            "probabilities in order",
        )  # fmt: skip
        if len(classes) != p.shape[1]:
            raise ValueError(
                f"{metric}: probabilities has {p.shape[1]} columns but true_classes shows "
                f"{len(classes)} class(es) {list(classes)}; pass classes= to name every column"
            )
    classes = check_labels(classes, p.shape[1], "classes")
    onehot = np.zeros_like(p)
    onehot[np.arange(p.shape[0]), indices_of(truth, classes, "true_classes", "classes")] = 1.0
    return p, onehot, classes


@_metric(
    "brier",
    False,
    "Scores probabilities, not decisions: it is not a function of any confusion matrix, so "
    "it cannot rank by the utility of the decisions actually taken.",
    "scores",
)
def brier(
    probabilities: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> float:
    """Brier score (lower is better).

    With 1-D ``probabilities`` (of ``positive``): ``mean (p - y)^2``. With
    ``(items, classes)`` probabilities: ``mean_n sum_c (p_nc - y_nc)^2``
    (Brier's original form, twice the 1-D value on binary problems).
    """
    p, onehot, _ = _probability_matrix(probabilities, true_classes, classes, positive, "brier")
    return float(((p - onehot) ** 2).sum(axis=1).mean())


@_metric(
    "log_loss",
    False,
    "Scores probabilities, not decisions: it is not a function of any confusion matrix.",
    "scores",
)
def log_loss(
    probabilities: Any, true_classes: Any, positive: Label | None = None, classes: Any = None
) -> float:
    """Mean negative log probability of the true class (lower is better).

    A zero probability on a true class gives ``inf``: nothing is clipped.
    """
    p, onehot, _ = _probability_matrix(probabilities, true_classes, classes, positive, "log_loss")
    if p.shape[1] == 1:
        p_true = np.where(onehot[:, 0] == 1, p[:, 0], 1 - p[:, 0])
    else:
        p_true = (p * onehot).sum(axis=1)
    with np.errstate(divide="ignore"):
        return float(-np.log(p_true).mean())


# ------------------------------------------------------- calibration diagnostics
def _isotonic_values(f: np.ndarray, o: np.ndarray) -> np.ndarray:
    """Isotonic (PAV) regression of ``o`` on ``f``, per item; tied ``f`` share a value."""
    from scipy.optimize import isotonic_regression

    x, inverse = np.unique(f, return_inverse=True)
    inverse = inverse.ravel()
    weights = np.bincount(inverse, minlength=x.size).astype(float)
    means = np.bincount(inverse, weights=o, minlength=x.size) / weights
    return isotonic_regression(means, weights=weights, increasing=True).x[inverse]


def _bin_index(f: np.ndarray, bins: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Per item, its bin; and the bin edges (``None`` for one bin per distinct value)."""
    if isinstance(bins, str):
        if bins != "unique":
            raise ValueError(
                f"bins must be 'unique', a number of equal-width bins or an array of edges, "
                f"found {bins!r}"
            )
        return np.unique(f, return_inverse=True)[1].ravel(), None
    if np.isscalar(bins):
        if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or bins < 1:
            raise ValueError(f"bins must be a positive integer, found {bins!r}")
        edges = np.arange(int(bins) + 1) / int(bins)  # k/K exactly, not linspace's 0.7000...1
    else:
        edges = as_float_array(bins, "bins", ndim=1)
        if edges.size < 2 or (np.diff(edges) <= 0).any():
            raise ValueError(f"bins as edges must increase strictly, found {edges.tolist()}")
        if edges[0] > f.min() or edges[-1] < f.max():
            raise ValueError(
                f"bins edges [{edges[0]}, {edges[-1]}] must cover the probabilities "
                f"[{f.min()}, {f.max()}]"
            )
    # bins [e_k, e_k+1), the last one closed
    index = np.clip(np.searchsorted(edges, f, side="right") - 1, 0, edges.size - 2)
    return index, edges


@dataclass(frozen=True, eq=False)
class BrierDecomposition:
    """The Brier score's two decompositions (see :func:`brier_decomposition`).

    Attributes
    ----------
    brier : float
        The Brier score, as :func:`brier` computes it.
    reliability, resolution, uncertainty : float
        Murphy's terms over the bins: ``sum_k n_k (fbar_k - obar_k)^2 / N``,
        ``sum_k n_k (obar_k - obar)^2 / N`` and ``obar (1 - obar)``.
    within_bin_variance, within_bin_covariance : float
        Stephenson et al.'s (2008) terms for bins holding different probabilities,
        ``sum_n (f_n - fbar_k)^2 / N`` and ``2 sum_n (f_n - fbar_k)(o_n - obar_k) / N``;
        both 0 with ``bins="unique"``. Always
        ``brier = reliability - resolution + uncertainty + within_bin_variance -
        within_bin_covariance``.
    calibration_loss, refinement_loss : float
        ``refinement_loss`` is the Brier score of the isotonic recalibration of the
        probabilities on these items (the ROC convex hull's calibration, which
        depends on the probabilities only through their ranking) and
        ``calibration_loss = brier - refinement_loss >= 0`` what that recalibration
        removes.
    bins : pandas.DataFrame
        Per bin (and class, for several classes): ``class``, ``lower``, ``upper``
        (edges; the bin's value for ``bins="unique"``), ``n_items``,
        ``mean_probability`` and ``frequency``. Empty bins are left out.
    per_class : pandas.DataFrame or None
        For ``(items, classes)`` probabilities, every term per class (they add up
        to the totals); ``None`` for 1-D probabilities.
    """

    brier: float
    reliability: float
    resolution: float
    uncertainty: float
    within_bin_variance: float
    within_bin_covariance: float
    calibration_loss: float
    refinement_loss: float
    bins: pd.DataFrame
    per_class: pd.DataFrame | None


#: The numeric terms of a :class:`BrierDecomposition`, in their order.
BRIER_TERMS = (
    "brier",
    "reliability",
    "resolution",
    "uncertainty",
    "within_bin_variance",
    "within_bin_covariance",
    "calibration_loss",
    "refinement_loss",
)


def _decompose(f: np.ndarray, o: np.ndarray, bins: Any) -> tuple[dict[str, float], pd.DataFrame]:
    n = f.size
    index, edges = _bin_index(f, bins)
    k = int(index.max()) + 1 if edges is None else edges.size - 1
    counts = np.bincount(index, minlength=k).astype(float)
    used = counts > 0
    f_sum = np.bincount(index, weights=f, minlength=k)
    o_sum = np.bincount(index, weights=o, minlength=k)
    if edges is None:  # one bin per distinct value: its mean is the value, exactly
        f_bar = np.unique(f)
    else:
        f_bar = np.divide(f_sum, counts, out=np.zeros(k), where=used)
    o_bar = np.divide(o_sum, counts, out=np.zeros(k), where=used)
    base = o.mean()
    df = f - f_bar[index]
    iso = _isotonic_values(f, o)
    brier = float(np.mean((f - o) ** 2))
    refinement = float(np.mean((iso - o) ** 2))
    terms = {
        "brier": brier,
        "reliability": float(np.sum(counts * (f_bar - o_bar) ** 2) / n),
        "resolution": float(np.sum(counts * (o_bar - base) ** 2) / n),
        "uncertainty": float(base * (1 - base)),
        "within_bin_variance": float(np.sum(df**2) / n),
        "within_bin_covariance": float(2 * np.sum(df * (o - o_bar[index])) / n),
        "calibration_loss": brier - refinement,
        "refinement_loss": refinement,
    }
    if edges is None:
        values = np.unique(f)
        lower, upper = values, values
    else:
        lower, upper = edges[:-1], edges[1:]
    table = pd.DataFrame(
        {
            "lower": np.asarray(lower)[used],
            "upper": np.asarray(upper)[used],
            "n_items": counts[used].astype(int),
            "mean_probability": f_bar[used],
            "frequency": o_bar[used],
        }
    )
    return terms, table


def brier_decomposition(
    probabilities: Any,
    true_classes: Any,
    positive: Label | None = None,
    classes: Any = None,
    bins: Any = "unique",
) -> BrierDecomposition:
    """The Brier score split into reliability, resolution and uncertainty, and into
    calibration and refinement loss.

    For probabilities ``f_n`` of a class and indicators ``o_n`` of it, grouped into
    bins ``k`` with ``n_k`` items, mean probability ``fbar_k`` and frequency
    ``obar_k`` (``obar`` over all items):

    * Murphy (1973), with Stephenson, Coelho, Doblas-Reyes and Balmaseda's (2008)
      within-bin terms, exact for any binning:
      ``brier = REL - RES + UNC + WBV - WBC`` (see :class:`BrierDecomposition`).
      ``bins="unique"`` (each distinct probability its own bin) makes ``WBV = WBC
      = 0``: reliability is then the loss that replacing each probability by its
      group's frequency would remove.
    * Calibration + refinement: ``brier = CL + RL`` with ``RL`` the Brier score
      after isotonic recalibration on the same items (PAV; the ROC convex hull's
      slopes, :func:`yieldwise.roc.convex_hull`). ``RL`` depends only on how the
      probabilities rank the items; ``CL`` is what monotone recalibration can
      remove (``CL <= REL`` with unique bins, since PAV must keep the order).

    With ``(items, classes)`` probabilities each term is summed over the classes
    (one class against the rest), as the multi-class Brier score of :func:`brier`
    sums its squared errors; ``per_class`` has the parts.

    Like the Brier score itself, the decomposition diagnoses probabilities; it does
    not rank classifiers by what their decisions are worth (not admissible, theory
    1.2). Use it to see *why* probabilities lose: miscalibration (fixable by
    recalibration, or by a transducer) or poor ranking (not fixable afterwards).

    Parameters
    ----------
    probabilities : 1-D array-like (of ``positive``) or (items, classes)
    true_classes : 1-D label sequence
    positive : label, optional
        For 1-D probabilities: the class they are about (default the first class).
    classes : sequence of labels, optional
        Class order (the columns of 2-D probabilities).
    bins : "unique", int, or array of edges, default "unique"
        One bin per distinct probability, ``k`` equal-width bins on [0, 1] (the
        last one closed), or explicit increasing edges covering the probabilities.

    Returns
    -------
    BrierDecomposition

    Raises
    ------
    ValueError
        When ``probabilities`` holds values outside [0, 1] (raw scores such as logits):
        calibrate them first, with :mod:`yieldwise.calibrators` or a Transducer, and
        pass the calibrated probabilities.

    Examples
    --------
    Six items; the probabilities 0.2 (twice), 0.6 (twice) and 0.9 (twice):

    >>> p = [0.2, 0.2, 0.6, 0.6, 0.9, 0.9]
    >>> y = [0, 1, 1, 1, 1, 0]
    >>> d = brier_decomposition(p, y, positive=1)
    >>> round(d.brier, 6)  # (0.04 + 0.64 + 0.16 + 0.16 + 0.01 + 0.81) / 6
    0.303333
    >>> # frequencies 1/2, 1, 1/2 in the three groups, 2/3 overall:
    >>> # REL = 2 (0.3^2 + 0.4^2 + 0.4^2) / 6, RES = 2 ((1/6)^2 + (1/3)^2 + (1/6)^2) / 6
    >>> round(d.reliability, 6), round(d.resolution, 6), round(d.uncertainty, 6)
    (0.136667, 0.055556, 0.222222)
    >>> round(d.reliability - d.resolution + d.uncertainty, 12) == round(d.brier, 12)
    True
    >>> # PAV pools 0.6 and 0.9 (frequencies 1 and 1/2 are out of order): 3/4 for four items
    >>> round(d.refinement_loss, 6), round(d.calibration_loss, 6)
    (0.208333, 0.095)
    """
    p, onehot, labels = _probability_matrix(
        probabilities, true_classes, classes, positive, "brier_decomposition"
    )
    totals = dict.fromkeys(BRIER_TERMS, 0.0)
    rows = []
    tables = []
    for c, label in enumerate(labels):
        terms, table = _decompose(p[:, c], onehot[:, c], bins)
        for name in BRIER_TERMS:
            totals[name] += terms[name]
        rows.append({"class": label, **terms})
        table.insert(0, "class", [label] * len(table))
        tables.append(table)
    per_class = None
    if p.shape[1] > 1:
        per_class = pd.DataFrame(rows).set_index("class")
    return BrierDecomposition(
        **totals, bins=pd.concat(tables, ignore_index=True), per_class=per_class
    )


def _wilson(k: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for ``k`` successes in ``n`` trials (Wilson, 1927)."""
    from scipy.special import ndtri

    z = float(ndtri(0.5 + level / 2))
    z2 = z * z
    centre = (k + z2 / 2) / (n + z2)
    half = z / (n + z2) * np.sqrt(k * (n - k) / n + z2 / 4)
    # exactly 0 (1) at k = 0 (n) in real arithmetic; keep rounding from crossing k / n
    p = k / n
    return np.minimum(np.clip(centre - half, 0.0, 1.0), p), np.maximum(
        np.clip(centre + half, 0.0, 1.0), p
    )


def _draws_matrix(draws: Any, positive: Label, n_items: int) -> np.ndarray:
    """Per-draw probabilities of ``positive`` as a ``(draws, items)`` array."""
    if hasattr(draws, "dims"):  # an xarray DataArray, e.g. Transducer.draws_proba
        array = draws
        if "class" in array.dims:
            coords = list(array["class"].values.tolist())
            for key in (positive, str(positive)):
                if key in coords:
                    array = array.isel({"class": coords.index(key)})
                    break
            else:
                raise ValueError(
                    f"draws has classes {coords}, without the positive class {positive!r}"
                )
        if "item" not in array.dims:
            raise ValueError(f"draws must have an 'item' dimension, found dims {array.dims}")
        others = [d for d in array.dims if d != "item"]
        values = array.transpose(*others, "item").values.reshape(-1, array.sizes["item"])
        # checked as the plain-array path checks: a NaN would reach every bin's band
        # through the matrix product (NaN * 0 is NaN)
        what = "draws" if len(others) <= 1 else f"draws (dims {others} flattened to rows)"
        values = as_float_array(values, what, ndim=2)
    else:
        values = as_float_array(draws, "draws", ndim=2)
    if values.shape[1] != n_items:
        raise ValueError(
            f"draws must have one column per item ({n_items}), found shape {values.shape}"
        )
    if (values < 0).any() or (values > 1).any():
        raise ValueError(
            f"draws must hold probabilities in [0, 1], found values in [{values.min()}, "
            f"{values.max()}]; pass per-draw probabilities of the positive class (e.g. "
            "Transducer.draws_proba), not scores"
        )
    return values


#: How far outside the range of its draws an item's probability may lie in
#: :func:`reliability_table`. A transducer's probability is a weighted mean of its per-draw
#: probabilities (exchangeable, theory 3.2: weights ``sum_c G_t(c, y)``; or their plain
#: mean), so it lies within their range; the other class's draws miss it by about
#: ``|1 - 2 p|`` less the band's width. The margin admits draws of another kind (a
#: calibrator's bootstrap) whose full-data estimate strays a little beyond them.
DRAWS_RANGE_TOLERANCE = 0.05


def _check_draws_match(
    values: np.ndarray, p: np.ndarray, positive: Label, given: bool, classes: tuple[Label, ...]
) -> None:
    """ValueError when an item's probability lies farther than
    :data:`DRAWS_RANGE_TOLERANCE` outside the range of its draws: draws of another class
    than the probabilities', most often ``positive`` left at the first class (``given``
    False) with probabilities of the second."""
    low, high = values.min(axis=0), values.max(axis=0)
    outside = np.maximum(np.maximum(low - p, p - high), 0.0)
    worst = int(np.argmax(outside))
    if outside[worst] <= DRAWS_RANGE_TOLERANCE:
        return
    default = "" if given else ", the first class by default"
    flipped = bool(
        np.all((1 - p >= low - DRAWS_RANGE_TOLERANCE) & (1 - p <= high + DRAWS_RANGE_TOLERANCE))
    )
    others = [c for c in classes if c != positive]
    hint = f" (e.g. positive={others[0]!r})" if flipped and len(others) == 1 else ""
    looks = (
        "they look like the other class's probabilities (one minus probabilities lies "
        "within every item's draws)"
        if flipped else "they are not draws of what probabilities estimates (draws of "
        "another class, or of other items or another transducer)"
    )  # fmt: skip
    raise ValueError(
        f"draws, taken as per-draw probabilities of positive={positive!r}{default}, do not "
        f"surround probabilities: item {worst}'s probability {p[worst]:.4g} lies "
        f"{outside[worst]:.3g} outside the range of its draws [{low[worst]:.4g}, "
        f"{high[worst]:.4g}]; {looks}. probabilities and draws must be of one class, "
        f"positive: pass positive= the class whose probabilities these are{hint}, or draws "
        f"of class {positive!r}"
    )


def reliability_table(
    probabilities: Any,
    true_classes: Any,
    positive: Label | None = None,
    classes: Any = None,
    bins: Any = 10,
    level: float = 0.95,
    draws: Any = None,
    band: float = 0.9,
) -> pd.DataFrame:
    """A reliability diagram as a table: binned probabilities against frequencies.

    Items are binned by their probability of ``positive``; each bin shows the mean
    probability, the observed frequency of ``positive`` and the Wilson score
    interval for that frequency (the binomial sampling error of a bin of ``n_k``
    items). With ``draws`` -- per-draw probabilities, e.g. a transducer's
    ``draws_proba`` on the same items -- each bin also gets the transducer's band:
    the equal-tailed ``band`` quantiles over draws of the bin's mean probability,
    where the posterior says the bin's frequency could lie. A frequency whose
    Wilson interval misses the band is evidence against the transducer's fit.

    Parameters
    ----------
    probabilities : 1-D array-like
        Probability of ``positive`` per item (for several classes, one column and
        ``positive`` naming its class; the others count as "not positive").
    true_classes : 1-D label sequence
    positive : label, optional
        Default the first class.
    classes : sequence of labels, optional
    bins : int or array of edges, default 10
        Equal-width bins on [0, 1] or explicit edges (``"unique"`` also works).
    level : float, default 0.95
        Coverage of the Wilson intervals.
    draws : array (draws, items) or xarray DataArray, optional
        Per-draw probabilities of ``positive`` (a DataArray with dims ``item`` and
        possibly ``class``, ``chain``, ``draw``, as from
        :meth:`yieldwise.Transducer.draws_proba`: ``positive`` selects its class). Each
        item's probability must lie within the range of its draws, give or take
        :data:`DRAWS_RANGE_TOLERANCE` (a transducer's always does, being a weighted mean of
        them); ValueError otherwise: draws of another class than the probabilities,
        typically ``positive`` left at the first class with probabilities of the second.
    band : float, default 0.9
        Mass of the transducer's band.

    Returns
    -------
    pandas.DataFrame
        One row per non-empty bin: ``lower``, ``upper``, ``n_items``,
        ``mean_probability``, ``frequency``, ``wilson_lower``, ``wilson_upper``, and
        with ``draws`` also ``band_lower``, ``band_upper``.

    Examples
    --------
    Ten items at 0.8, eight of them positive, and ten at 0.1, none positive:

    >>> table = reliability_table([0.8] * 10 + [0.1] * 10, [1] * 8 + [0] * 12, positive=1)
    >>> table[["lower", "n_items", "frequency", "wilson_lower", "wilson_upper"]].round(4)
       lower  n_items  frequency  wilson_lower  wilson_upper
    0    0.1       10        0.0        0.0000        0.2775
    1    0.8       10        0.8        0.4902        0.9433
    """
    for name, value in (("level", level), ("band", band)):
        if not (np.isscalar(value) and 0 < value < 1):
            raise ValueError(f"{name} must be a number in (0, 1), found {value!r}")
    p = as_float_array(probabilities, "probabilities", ndim=1)
    _check_probabilities(p, "reliability_table")
    given = positive is not None
    is_positive, positive, labels = binary_truth(true_classes, positive, classes, p.size)
    _, table = _decompose(p, is_positive.astype(float), bins)
    index, _ = _bin_index(p, bins)
    k = table["n_items"].to_numpy()
    successes = np.rint(table["frequency"].to_numpy() * k)
    table["wilson_lower"], table["wilson_upper"] = _wilson(successes, k, level)
    if draws is not None:
        values = _draws_matrix(draws, positive, p.size)
        _check_draws_match(values, p, positive, given, labels)
        # compact the bin numbers to the non-empty bins, then per-draw bin means as one
        # matrix product (draws, items) @ (items, bins)
        _, compact = np.unique(index, return_inverse=True)
        members = np.zeros((p.size, len(table)))
        members[np.arange(p.size), compact.ravel()] = 1.0
        means = values @ members / k
        table["band_lower"], table["band_upper"] = np.quantile(
            means, [(1 - band) / 2, (1 + band) / 2], axis=0
        )
    return table


CONFUSION_METRICS: dict[str, Callable[..., Any]] = {
    "accuracy": accuracy,
    "precision": precision,
    "recall": recall,
    "specificity": specificity,
    "f1": f1,
    "matthews": matthews,
    "fowlkes_mallows": fowlkes_mallows,
    "balanced_accuracy": balanced_accuracy,
    "cohen_kappa": cohen_kappa,
    "preference_driven": preference_driven,
}
"""The confusion-matrix metrics by name (``fbeta`` needs a ``beta`` and is left out)."""

SCORE_METRICS: dict[str, Callable[..., Any]] = {
    "roc_auc": roc_auc,
    "average_precision": average_precision,
    "pr_gain_auc": pr_gain_auc,
    "brier": brier,
    "log_loss": log_loss,
}
"""The metrics computed from scores or probabilities, by name."""
