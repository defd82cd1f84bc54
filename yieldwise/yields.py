"""The utility yield: the only admissible evaluation score (theory section 1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ._validation import Label, as_float_array, check_labels, indices_of, label_values
from .confusion import ConfusionMatrix
from .utility import UtilityMatrix

__all__ = ["utility_yield", "total_utility", "rescaled_yield", "utility_yield_per_item"]


def _check_types(confusion: Any, utility: Any) -> None:
    if not isinstance(confusion, ConfusionMatrix):
        raise TypeError(
            f"confusion must be a ConfusionMatrix, found {type(confusion).__name__}; "
            "build one with ConfusionMatrix(counts, ...) or ConfusionMatrix.from_labels(...)"
        )
    if not isinstance(utility, UtilityMatrix):
        raise TypeError(
            f"utility must be a UtilityMatrix, found {type(utility).__name__}; "
            "wrap the array as UtilityMatrix(values, decisions=..., classes=...)"
        )


def _aligned_utility(confusion: ConfusionMatrix, utility: UtilityMatrix) -> np.ndarray:
    """Utility entries matching the confusion matrix's rows and columns, by label."""
    rows = indices_of(
        np.array(confusion.decisions, dtype=object),
        utility.decisions,
        "confusion's decisions",
        "utility matrix's decisions",
    )
    cols = indices_of(
        np.array(confusion.classes, dtype=object),
        utility.classes,
        "confusion's classes",
        "utility matrix's classes",
    )
    return utility.values[np.ix_(rows, cols)]


def total_utility(confusion: ConfusionMatrix, utility: UtilityMatrix) -> float:
    """Total utility ``sum_ic U[i, c] * F[i, c]`` over all items (counts, not frequencies)."""
    _check_types(confusion, utility)
    return float((_aligned_utility(confusion, utility) * confusion.counts).sum())


def utility_yield(confusion: ConfusionMatrix, utility: UtilityMatrix) -> float:
    """Average utility per item, ``sum_ic U[i, c] * C[i, c]``.

    Rows and columns are matched by label; the confusion matrix may use a subset
    of the utility's decisions and classes.

    Examples
    --------
    >>> from yieldwise import ConfusionMatrix, UtilityMatrix, utility_yield
    >>> u = UtilityMatrix([[1, 0], [0, 1]])
    >>> utility_yield(ConfusionMatrix([[3, 1], [1, 5]]), u)  # (3 + 5) / 10
    0.8
    """
    _check_types(confusion, utility)
    return float((_aligned_utility(confusion, utility) * confusion.normalized).sum())


def yield_bounds(confusion: ConfusionMatrix, utility: UtilityMatrix) -> tuple[float, float]:
    """Smallest and largest achievable yield on a test set with these class frequencies."""
    _check_types(confusion, utility)
    cols = indices_of(
        np.array(confusion.classes, dtype=object),
        utility.classes,
        "confusion's classes",
        "utility matrix's classes",
    )
    u = utility.values[:, cols]
    f = confusion.class_frequencies
    return float(f @ u.min(axis=0)), float(f @ u.max(axis=0))


def rescaled_yield(confusion: ConfusionMatrix, utility: UtilityMatrix) -> float:
    """Yield rescaled to [0, 1] between the worst and best achievable on this test set.

    ``(yield - min) / (max - min)`` with ``max = sum_c f_c max_i U[i, c]`` and
    ``min = sum_c f_c min_i U[i, c]``; comparable across utility matrices.
    """
    low, high = yield_bounds(confusion, utility)
    if high == low:
        raise ValueError(
            "rescaled_yield is undefined: for every class present in the confusion matrix "
            "all decisions have the same utility, so every set of decisions yields "
            f"{high!r}"
        )
    return (utility_yield(confusion, utility) - low) / (high - low)


def utility_yield_per_item(
    true_classes: Any,
    decisions: Any,
    utilities: Any,
    *,
    decision_labels: Iterable[Label] | None = None,
    class_labels: Iterable[Label] | None = None,
) -> float:
    """Yield with per-item utility matrices: ``mean_n U_n[decision_n, class_n]``.

    Parameters
    ----------
    true_classes, decisions : 1-D label sequences, one per item
    utilities : array-like of shape (items, decisions, classes)
    decision_labels, class_labels : sequences of labels, optional
        Labels of the second and third axes of ``utilities`` (default ``0..n-1``).
    """
    u = as_float_array(utilities, "utilities", ndim=3)
    truth = label_values(true_classes, "true_classes")
    chosen = label_values(decisions, "decisions")
    n_items = u.shape[0]
    for name, labels in (("true_classes", truth), ("decisions", chosen)):
        if labels.size != n_items:
            raise ValueError(
                f"{name} must have one label per item of utilities ({n_items}), found {labels.size}"
            )
    rows = indices_of(
        chosen,
        check_labels(decision_labels, u.shape[1], "decision_labels"),
        "decisions",
        "decision_labels",
    )
    cols = indices_of(
        truth,
        check_labels(class_labels, u.shape[2], "class_labels"),
        "true_classes",
        "class_labels",
    )
    return float(u[np.arange(n_items), rows, cols].mean())
