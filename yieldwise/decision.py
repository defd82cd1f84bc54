"""Expected-utility decisions ("augmentation", theory section 2).

Given class probabilities ``p`` for an item, the expected utility of decision
``i`` is ``EU_i = sum_c U[i, c] p_c``; the decision is ``argmax_i EU_i``.
Everything here is vectorised over items; utilities may differ per item.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from ._validation import Label, align, as_float_array, check_labels, is_seed, object_array
from .utility import UtilityMatrix, check_utility_range, near_best, shift_and_spread

__all__ = ["decide", "expected_utilities", "label_array"]

# Probabilities from transducers and softmax layers sum to one up to rounding;
# anything further off is a score, not a probability, and must not be decided on.
_SUM_TOLERANCE = 1e-6


def prepare_decision_inputs(
    probabilities: Any, utility: UtilityMatrix | Any, decisions: Iterable[Label] | None
) -> tuple[np.ndarray, np.ndarray, tuple[Label, ...], tuple[Label, ...]]:
    """Validate inputs; return ``p (n, C)``, ``u (1 or n, D, C)`` and the labels."""
    if isinstance(utility, pd.DataFrame):  # labelled: read as a UtilityMatrix, by label
        if decisions is not None:
            raise ValueError(
                "decisions must not be given with a DataFrame utility: its index is used"
            )
        utility = UtilityMatrix(utility)
    if isinstance(utility, UtilityMatrix):
        if decisions is not None:
            raise ValueError(
                "decisions must not be given with a UtilityMatrix: its own decision labels are used"
            )
        u = utility.values[None, :, :]
        decision_labels, class_labels = utility.decisions, utility.classes
    else:
        u = as_float_array(utility, "utility", ndim=(2, 3))
        # UtilityMatrix's bound: beyond it max U - min U overflows to inf, every expected
        # utility is then inf or NaN and argmax picks the first decision without a word
        check_utility_range(u, "utility")
        if u.ndim == 2:
            u = u[None]
        if u.shape[1] < 2 or u.shape[2] < 2:
            raise ValueError(
                "utility must have at least 2 decisions and 2 classes, found matrices of "
                f"shape {u.shape[1:]}"
            )
        decision_labels = check_labels(decisions, u.shape[1], "decisions")
        class_labels = tuple(range(u.shape[2]))

    if isinstance(probabilities, pd.DataFrame):
        columns = [c.item() if isinstance(c, np.generic) else c for c in probabilities.columns]
        if len(set(columns)) != len(columns):
            repeated = [c for c in dict.fromkeys(columns) if columns.count(c) > 1]
            raise ValueError(
                f"probabilities has duplicated columns {repeated} (columns {columns}): each "
                f"class {list(class_labels)} must have one column; drop or merge the repeats"
            )
        if set(columns) != set(class_labels):
            raise ValueError(
                f"probabilities has columns {columns}, expected one per class {list(class_labels)}"
            )
        order = align(class_labels, columns, "utility's classes", "probabilities' columns")
        p = as_float_array(probabilities.to_numpy()[:, order], "probabilities", ndim=2)
    else:
        p = as_float_array(probabilities, "probabilities", ndim=(1, 2))
        if p.ndim == 1:
            raise ValueError(
                f"probabilities must be 2-dimensional (items, classes), found shape {p.shape}; "
                "for a binary P(class 1) vector pass np.column_stack([1 - p, p])"
            )
    n_items, n_classes = p.shape
    if n_classes != u.shape[2]:
        raise ValueError(
            f"probabilities has {n_classes} columns but the utility matrix has "
            f"{u.shape[2]} classes {list(class_labels)}"
        )
    if u.shape[0] not in (1, n_items):
        raise ValueError(
            f"per-item utility has {u.shape[0]} matrices but probabilities has {n_items} items"
        )
    if (p < 0).any() or (p > 1).any():
        raise ValueError(
            f"probabilities must lie in [0, 1], found range [{p.min()}, {p.max()}]; "
            "raw scores are not probabilities: fit a Transducer first"
        )
    sums = p.sum(axis=1)
    off = np.abs(sums - 1) > _SUM_TOLERANCE
    if off.any():
        first = int(np.flatnonzero(off)[0])
        raise ValueError(
            f"each row of probabilities must sum to 1, found {int(off.sum())} row(s) that do "
            f"not; row {first} sums to {float(sums[first])!r}"
        )
    return p, u, decision_labels, class_labels


def _expected(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    if u.shape[0] == 1:
        return p @ u[0].T
    return np.einsum("nc,ndc->nd", p, u)


def tied_decisions(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Boolean ``(n, D)`` mask of the decisions tied for the highest expected utility.

    Ties are expected utilities within ``TIE_RTOL * (max U - min U)`` of the best (per
    item for per-item utilities): the rule of :func:`yieldwise.utility.near_best`, which
    :mod:`yieldwise.roc` applies to yields. They are computed from ``U - min U``: a shift
    ``U + b`` changes every decision's expected utility by the same ``b`` (the
    probabilities sum to 1), so it must not change the decisions (theory 1,
    "Equivalence"); kept out of the arithmetic, it cannot swamp the differences between
    decisions in rounding either.
    """
    _, shifted, spread = shift_and_spread(u, axis=(1, 2))
    return near_best(_expected(p, shifted), spread[:, 0], axis=1)


def label_array(labels: Sequence[Label], positions: np.ndarray) -> np.ndarray:
    """Labels at ``positions``, as an int/str array when the labels are homogeneous."""
    if len({type(label) for label in labels}) == 1 and isinstance(labels[0], int | str | float):
        table = np.array(labels)
    else:
        table = object_array(labels)
    return table[positions]


def expected_utilities(
    probabilities: Any, utility: UtilityMatrix | Any, *, decisions: Iterable[Label] | None = None
) -> pd.DataFrame:
    """Expected utility of every decision for every item, ``EU[n, i] = sum_c U[i,c] p[n,c]``.

    Returns a ``DataFrame`` with one column per decision label.
    """
    p, u, decision_labels, _ = prepare_decision_inputs(probabilities, utility, decisions)
    index = probabilities.index if isinstance(probabilities, pd.DataFrame) else None
    columns = pd.Index(decision_labels, name="decision", dtype=object, tupleize_cols=False)
    # a DataFrame's rows keep their labels, to join back to the data
    return pd.DataFrame(_expected(p, u), columns=columns, index=index)


def decide(
    probabilities: Any,
    utility: UtilityMatrix | Any,
    tie: Literal["random", "first"] = "random",
    seed: int | np.random.Generator | None = None,
    *,
    decisions: Iterable[Label] | None = None,
) -> np.ndarray:
    """Maximum-expected-utility decisions for every item.

    Parameters
    ----------
    probabilities : array-like (items, classes) or DataFrame
        Class probabilities per item; rows sum to 1. A ``DataFrame``'s columns
        are matched to the utility's class labels by name.
    utility : UtilityMatrix, DataFrame or array-like
        One matrix (decisions x classes) or per-item matrices
        ``(items, decisions, classes)``. Rectangular matrices work. A DataFrame is read
        as a UtilityMatrix: its index the decisions, its columns the classes.
    tie : {"random", "first"}
        Break ties uniformly at random (seeded) or by the first decision. Ties are
        expected utilities within ``1e-12 * (max U - min U)`` of the best, the rule of
        :func:`yieldwise.roc.best_operating_point` for yields too.
    seed : int or numpy Generator, optional
        Seed for random tie-breaking.
    decisions : sequence of labels, optional
        Decision labels for a plain-array ``utility`` (default ``0..D-1``).

    Returns
    -------
    numpy.ndarray
        The chosen decision label per item.

    Examples
    --------
    >>> import numpy as np
    >>> from yieldwise import UtilityMatrix, decide
    >>> u = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"],
    ...                   classes=["healthy", "ill"])
    >>> decide(np.array([[0.95, 0.05], [0.9, 0.1]]), u)
    array(['wait', 'treat'], dtype='<U5')
    """
    if tie not in ("random", "first"):
        raise ValueError(f"tie must be 'random' or 'first', found {tie!r}")
    if seed is not None and not isinstance(seed, np.random.Generator) and not is_seed(seed):
        raise ValueError(
            f"seed must be a non-negative integer, a numpy Generator or None, found {seed!r}"
        )
    p, u, decision_labels, _ = prepare_decision_inputs(probabilities, utility, decisions)
    tied = tied_decisions(p, u)
    if tie == "first":
        chosen = tied.argmax(axis=1)
    else:
        rng = np.random.default_rng(seed)
        keys = np.where(tied, rng.random(tied.shape), -1.0)
        chosen = keys.argmax(axis=1)
    return label_array(decision_labels, chosen)
