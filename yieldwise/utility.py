"""Utility matrices: rows are decisions, columns are classes (theory section 1).

``U[i, c]`` is what is gained when decision ``i`` is taken and class ``c``
turns out to be true. Decisions need not correspond to classes: "discard /
promote / re-test" against "inactive / active" is a 3x2 matrix.
"""

from __future__ import annotations

import html
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._validation import Label, align, as_float_array, check_labels, is_seed, labelled_table

__all__ = [
    "MATRIX_PRIORS",
    "UtilityMatrix",
    "chart_coordinates",
    "chart_matrices",
    "in_chart_domain",
    "sample_matrices",
]

# Tolerance for deciding that two utilities are equal after rescaling; utilities are
# user numbers of moderate size, so a relative 1e-9 is far above rounding error.
_EQUAL_RTOL = 1e-9
#: Largest utility magnitude accepted. Summaries square utilities (variances of long-run
#: utilities) and sum them over classes and items; 1e150 squared is 1e300, below the
#: largest double (1.8e308), so no intermediate overflows to inf.
MAX_ABS_UTILITY = 1e150
#: The one tie rule of the package (:func:`near_best`): values computed from a utility
#: matrix (expected utilities of decisions, yields of thresholds) within
#: ``TIE_RTOL * (max U - min U)`` of the best are tied. Values equal in real arithmetic
#: differ in floats by rounding: computed from ``U - min U`` (entries in ``[0, spread]``),
#: an expected utility over ``C`` classes is off by at most about ``C`` ulps of the
#: spread (``C * 2.2e-16``; about ``sqrt(C)`` ulps in practice), a yield from counts by a
#: few ulps. 1e-12 covers the worst case up to some 4500 classes. It is no larger because
#: real differences can be small too: two adjacent thresholds of an ROC curve over ``n``
#: items differ by one item's utility difference over ``n``; with ``U = [[1000, -1],
#: [0, 0]]`` that is ``1e-3 * spread / n``, which a tolerance of 1e-10 would already call
#: a tie at ``n = 1e7`` items, 1e-12 only at ``n = 1e9``.
TIE_RTOL = 1e-12


class UtilityMatrix:
    """A utility matrix with labelled decisions (rows) and classes (columns).

    Parameters
    ----------
    values : array-like of shape (n_decisions, n_classes)
        Finite utilities within +-1e150; at least two decisions and two classes, not all
        equal. A DataFrame's index and columns are its decisions and classes (read by
        label: :meth:`to_frame` round-trips).
    decisions : sequence of labels, optional
        Row labels; default ``0 .. n_decisions - 1``.
    classes : sequence of labels, optional
        Column labels; default ``0 .. n_classes - 1``.

    Examples
    --------
    >>> from yieldwise import UtilityMatrix
    >>> u = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"],
    ...                   classes=["healthy", "ill"])
    >>> u.threshold()  # choose "treat" when P(ill) exceeds 1/16
    0.0625
    >>> u.standard().values
    array([[0.66666667, 0.        ],
           [0.6       , 1.        ]])
    """

    __array_priority__ = 10

    def __init__(
        self,
        values: Any,
        decisions: Iterable[Label] | None = None,
        classes: Iterable[Label] | None = None,
    ) -> None:
        # a DataFrame (to_frame()'s, say) is read by its labels, not by position
        values, decisions, classes = labelled_table(
            values, decisions, classes, "values", "decisions", "classes"
        )
        array = as_float_array(values, "values", ndim=2)
        n_decisions, n_classes = array.shape
        _check_matrix_values(array)
        self._values = array.copy()  # never share (and freeze) the caller's array
        self._values.setflags(write=False)
        self._decisions = check_labels(decisions, n_decisions, "decisions")
        self._classes = check_labels(classes, n_classes, "classes")

    # ------------------------------------------------------------------ access
    @property
    def values(self) -> np.ndarray:
        """The utilities as a read-only ``(n_decisions, n_classes)`` float array."""
        return self._values

    @property
    def decisions(self) -> tuple[Label, ...]:
        """Row labels."""
        return self._decisions

    @property
    def classes(self) -> tuple[Label, ...]:
        """Column labels."""
        return self._classes

    @property
    def shape(self) -> tuple[int, int]:
        return self._values.shape  # type: ignore[return-value]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.array(self._values, dtype=dtype)

    def to_frame(self) -> pd.DataFrame:
        """The matrix as a ``DataFrame`` indexed by decision, with class columns."""
        return pd.DataFrame(
            self._values,
            index=pd.Index(self._decisions, name="decision", dtype=object, tupleize_cols=False),
            columns=pd.Index(self._classes, name="class", dtype=object, tupleize_cols=False),
        )

    def reindex(
        self, decisions: Sequence[Label] | None = None, classes: Sequence[Label] | None = None
    ) -> UtilityMatrix:
        """The same matrix with rows/columns reordered to the given labels."""
        # the package's label checks first: a string is one label, not its characters
        if decisions is not None:
            decisions = check_labels(decisions, None, "decisions")
        if classes is not None:
            classes = check_labels(classes, None, "classes")
        rows = (
            align(decisions, self._decisions, "decisions", "utility matrix's decisions")
            if decisions is not None
            else np.arange(self.shape[0])
        )
        cols = (
            align(classes, self._classes, "classes", "utility matrix's classes")
            if classes is not None
            else np.arange(self.shape[1])
        )
        return UtilityMatrix(
            self._values[np.ix_(rows, cols)],
            decisions=[self._decisions[i] for i in rows],
            classes=[self._classes[j] for j in cols],
        )

    # ------------------------------------------------------------ equivalence
    def standard(self) -> UtilityMatrix:
        """The standard form ``(U - min U) / (max U - min U)``: smallest entry 0, largest 1."""
        low, high = self._values.min(), self._values.max()
        return UtilityMatrix(
            (self._values - low) / (high - low), decisions=self._decisions, classes=self._classes
        )

    def is_equivalent(self, other: UtilityMatrix) -> bool:
        """Whether ``other`` equals ``a * self + b`` with ``a > 0``.

        Equivalent matrices rank every set of decisions identically. Labels must
        agree as sets; rows and columns are matched by label, not position.
        """
        if not isinstance(other, UtilityMatrix):
            raise TypeError(f"other must be a UtilityMatrix, found {type(other).__name__}")
        if set(other.decisions) != set(self._decisions) or set(other.classes) != set(self._classes):
            return False
        aligned = other.reindex(self._decisions, self._classes)
        return bool(
            np.allclose(self.standard().values, aligned.standard().values, rtol=0, atol=_EQUAL_RTOL)
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UtilityMatrix):
            return NotImplemented
        return (
            self._decisions == other._decisions
            and self._classes == other._classes
            and np.array_equal(self._values, other._values)
        )

    def __hash__(self) -> int:
        # + 0.0 makes -0.0 into 0.0: equal matrices (np.array_equal) hash alike
        return hash((self._decisions, self._classes, (self._values + 0.0).tobytes()))

    @classmethod
    def batch(
        cls,
        values: Any,
        decisions: Iterable[Label] | None = None,
        classes: Iterable[Label] | None = None,
    ) -> list[UtilityMatrix]:
        """One matrix per leading index of an ``(n, n_decisions, n_classes)`` array,
        all labelled alike.

        The same matrices as ``[UtilityMatrix(v, decisions, classes) for v in values]``,
        under the same rules (finite, within ``+-MAX_ABS_UTILITY``, at least 2 x 2, not
        constant), checked once over the whole array: ten thousand matrices in
        milliseconds instead of about a second.

        Examples
        --------
        >>> ms = UtilityMatrix.batch(np.eye(2)[None] * [[[1.0]], [[2.0]]], classes=["a", "b"])
        >>> len(ms), float(ms[1].values[0, 0]), ms[1].classes
        (2, 2.0, ('a', 'b'))
        """
        array = as_float_array(values, "values", ndim=3)  # refuses an empty stack
        _, n_decisions, n_classes = array.shape
        _check_matrix_values(array)
        decision_labels = check_labels(decisions, n_decisions, "decisions")
        class_labels = check_labels(classes, n_classes, "classes")
        frozen = array.copy()  # never share (and freeze) the caller's array
        frozen.setflags(write=False)
        matrices = []
        for one in frozen:  # only attribute assignments: the checks are done
            matrix = cls.__new__(cls)
            matrix._values, matrix._decisions, matrix._classes = one, decision_labels, class_labels
            matrices.append(matrix)
        return matrices

    # ------------------------------------------------------- binary chart (1.1)
    @classmethod
    def from_xy(
        cls,
        x: float,
        y: float,
        decisions: Iterable[Label] | None = None,
        classes: Iterable[Label] | None = None,
    ) -> UtilityMatrix:
        """The binary standard-form matrix at chart point ``(x, y)`` (theory 1.1).

        ``(0, 0)`` is the identity (accuracy). Only the admitted domain is
        accepted: ``x, y`` in ``[-1, 1]`` without the corners
        ``x < 0, y > 1 + x`` and ``x > 0, -y > 1 - x``.

        Examples
        --------
        >>> UtilityMatrix.from_xy(0.5, -0.25).values
        array([[0.5 , 0.  ],
               [0.25, 1.  ]])
        """
        for name, value in (("x", x), ("y", y)):
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
                raise TypeError(
                    f"{name} must be a finite number (a chart coordinate in [-1, 1]), found "
                    f"{type(value).__name__} {value!r}"
                )
            if not np.isfinite(float(value)):
                raise ValueError(f"{name} must be a finite number, found {value!r}")
        if not in_chart_domain(x, y):
            raise ValueError(
                f"(x, y) = ({x}, {y}) is outside the admitted domain of binary utility "
                "matrices: need -1 <= x, y <= 1, and not (x < 0 and y > 1 + x) nor "
                "(x > 0 and -y > 1 - x); there a wrong decision would be worth more than "
                "the correct one"
            )
        return cls(chart_matrices(x, y), decisions=decisions, classes=classes)

    @property
    def xy(self) -> tuple[float, float]:
        """Chart coordinates ``(x, y)`` of this binary matrix (inverse of :meth:`from_xy`).

        Row ``i`` is taken to mean "choose class ``i``". Raises ``ValueError`` for a
        matrix that is not 2x2 or outside the admitted domain (a wrong decision
        worth more than the correct one in some column).
        """
        self._require_binary("xy")
        u = self._values
        for c in range(2):
            if u[c, c] < u[1 - c, c]:
                raise ValueError(
                    f"this utility matrix is outside the chart's domain: for class "
                    f"{self._classes[c]!r} the wrong decision {self._decisions[1 - c]!r} "
                    f"({u[1 - c, c]}) is worth more than the correct one "
                    f"{self._decisions[c]!r} ({u[c, c]})"
                )
        s = self.standard().values
        # In standard form the largest entry (1) is on the diagonal and the smallest (0)
        # off it; x says which diagonal entry fell short of 1, y which off-diagonal rose.
        # (max - min) / (max - min) is exactly 1 and (min - min) exactly 0 in floating point,
        # so exact comparisons are safe and keep tiny coordinates such as x = -1e-9.
        x = 1.0 - s[0, 0] if s[1, 1] == 1.0 else s[1, 1] - 1.0
        y = s[0, 1] if s[1, 0] == 0.0 else -s[1, 0]
        return float(x), float(y)

    # ------------------------------------------------------------- combination
    @classmethod
    def expected(
        cls, matrices: Sequence[UtilityMatrix], weights: Sequence[float] | None = None
    ) -> UtilityMatrix:
        """Expected matrix ``sum_a q_a U^(a)`` under uncertainty about the right one.

        The matrices are averaged as given, not their standard forms. All must
        have the same decision and class labels (matched by label). ``weights``
        are the probabilities ``q_a`` (non-negative, summing to 1); default equal.

        Examples
        --------
        >>> a = UtilityMatrix([[1, 0], [0, 1]])
        >>> b = UtilityMatrix([[1, -10], [0, 10]])
        >>> UtilityMatrix.expected([a, b], [0.75, 0.25]).values
        array([[ 1.  , -2.5 ],
               [ 0.  ,  3.25]])
        """
        matrices = list(matrices)
        if not matrices:
            raise ValueError("matrices is empty; pass at least one UtilityMatrix")
        for k, m in enumerate(matrices):
            if not isinstance(m, UtilityMatrix):
                raise TypeError(f"matrices[{k}] must be a UtilityMatrix, found {type(m).__name__}")
        first = matrices[0]
        if weights is None:
            q = np.full(len(matrices), 1.0 / len(matrices))
        else:
            q = as_float_array(weights, "weights", ndim=1)
            if q.shape != (len(matrices),):
                raise ValueError(
                    f"weights must have one entry per matrix ({len(matrices)}), found {q.size}"
                )
            if (q < 0).any():
                raise ValueError(f"weights must be non-negative, found {q.tolist()}")
            if not np.isclose(q.sum(), 1.0, rtol=0, atol=1e-9):
                raise ValueError(
                    "weights must sum to 1 (they are probabilities), found sum "
                    f"{float(q.sum())!r}; divide them by their sum if they are relative weights"
                )
        stack = []
        for k, m in enumerate(matrices):
            if set(m.decisions) != set(first.decisions) or set(m.classes) != set(first.classes):
                raise ValueError(
                    f"matrices[{k}] has decisions {list(m.decisions)} and classes "
                    f"{list(m.classes)}, but matrices[0] has {list(first.decisions)} and "
                    f"{list(first.classes)}; all must share labels"
                )
            stack.append(m.reindex(first.decisions, first.classes).values)
        mean = np.tensordot(q, np.stack(stack), axes=1)
        return cls(mean, decisions=first.decisions, classes=first.classes)

    # -------------------------------------------------------------- threshold
    def threshold(self) -> float:
        """Probability of class 1 above which choosing decision 1 is best (binary only).

        ``(U[0,0] - U[1,0]) / ((U[0,0] - U[1,0]) + (U[1,1] - U[0,1]))`` (theory 2).
        A value of 1 or more means decision 1 is never worth choosing; 0 or less
        means it is always at least as good.
        """
        self._require_binary("threshold()")
        u = self._values
        gain0 = u[0, 0] - u[1, 0]
        gain1 = u[1, 1] - u[0, 1]
        if gain0 + gain1 <= 0:
            raise ValueError(
                "threshold() is undefined for this matrix: (U[0,0] - U[1,0]) + "
                f"(U[1,1] - U[0,1]) = {gain0 + gain1} is not positive, so decision 1 is "
                "not preferred as P(class 1) grows"
            )
        return float(gain0 / (gain0 + gain1))

    def binary_rule(self) -> tuple[float | None, Label, Label]:
        """The expected-utility rule of a 2x2 matrix in any row order (binary only):
        ``(t, above, below)``, choose ``above`` when P(class 1) exceeds ``t`` and ``below``
        otherwise.

        With ``g0 = U[0,0] - U[1,0]`` and ``g1 = U[1,1] - U[0,1]``, decision 1's expected
        advantage is ``p g1 - (1 - p) g0``, zero at ``t = g0 / (g0 + g1)``: decision 1
        is chosen above it when ``g0 + g1 > 0`` (:meth:`threshold`), decision 0 when
        ``g0 + g1 < 0`` (rows listed in the other order). ``t`` outside ``(0, 1)`` means
        one decision whatever the probabilities (``above`` for ``t <= 0``, ``below`` for
        ``t >= 1``). When ``g0 + g1 = 0`` the advantage does not depend on ``p``: ``t`` is
        None and ``above`` and ``below`` are both the better decision (decision 0 when the
        two tie for every class).

        Examples
        --------
        >>> u = UtilityMatrix([[-1, 5], [0, -10]], decisions=["check", "pass"],
        ...                   classes=["ok", "ill"])
        >>> u.binary_rule()  # check when P(ill) exceeds 1/16
        (0.0625, 'check', 'pass')
        """
        self._require_binary("binary_rule()")
        u = self._values
        gain0, gain1 = u[0, 0] - u[1, 0], u[1, 1] - u[0, 1]
        d0, d1 = self._decisions
        total = gain0 + gain1
        if total == 0:
            better = d1 if gain0 < 0 else d0
            return None, better, better
        t = float(gain0 / total)
        return (t, d1, d0) if total > 0 else (t, d0, d1)

    def _require_binary(self, what: str) -> None:
        if self.shape != (2, 2):
            raise ValueError(
                f"{what} needs a 2x2 (binary) utility matrix, found shape {self.shape}"
            )

    # ---------------------------------------------------------------- display
    def __repr__(self) -> str:
        table = self.to_frame().to_string()
        return f"UtilityMatrix({self.shape[0]} decisions x {self.shape[1]} classes)\n{table}"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self._classes)
        rows = "".join(
            f"<tr><th>{html.escape(str(d))}</th>"
            + "".join(f"<td>{v:.6g}</td>" for v in row)
            + "</tr>"
            for d, row in zip(self._decisions, self._values, strict=True)
        )
        return (
            "<table class='yieldwise-utility'>"
            f"<caption>UtilityMatrix ({self.shape[0]} decisions &times; {self.shape[1]} "
            "classes; rows decisions, columns classes)</caption>"
            f"<thead><tr><th>decision \\ class</th>{head}</tr></thead><tbody>{rows}</tbody></table>"
        )


def _check_matrix_values(array: np.ndarray) -> None:
    """The rules of a utility matrix's ``values``, over one ``(decisions, classes)`` matrix
    or a stack ``(n, decisions, classes)`` of them (:meth:`UtilityMatrix.batch`): at least
    2 x 2, within ``+-MAX_ABS_UTILITY``, not constant. A stack's matrix is named
    ``values[i]``."""
    n_decisions, n_classes = array.shape[-2:]
    if n_decisions < 2 or n_classes < 2:
        per = " per matrix" if array.ndim == 3 else ""
        raise ValueError(
            f"values must have at least 2 decisions (rows) and 2 classes (columns){per}, "
            f"found shape {array.shape}"
        )
    check_utility_range(array, "values")
    flat = array.reshape(-1, n_decisions * n_classes)
    constant = np.flatnonzero(flat.max(axis=1) == flat.min(axis=1))
    if constant.size:
        name = "values" if array.ndim == 2 else f"values[{int(constant[0])}]"
        raise ValueError(
            f"{name} has every entry equal to {float(flat[constant[0], 0])!r}: every decision "
            "is worth the same whatever the class, so the matrix cannot rank anything"
        )


def check_utility_range(array: np.ndarray, name: str) -> None:
    """ValueError when a utility of ``array`` lies beyond ``+-MAX_ABS_UTILITY``: the one
    bound of :class:`UtilityMatrix` and of plain-array utilities (:func:`yieldwise.decide`),
    under which ``max U - min U`` and the squared summaries stay finite."""
    largest = float(np.abs(array).max())
    if largest > MAX_ABS_UTILITY:
        raise ValueError(
            f"{name} must lie within +-{MAX_ABS_UTILITY:.0e} (utilities are squared and "
            f"summed in the summaries), found {largest!r}; rescale the matrix: a * U + b "
            "with a > 0 ranks every decision the same"
        )


def shift_and_spread(
    u: np.ndarray, axis: int | tuple[int, ...] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(low, u - low, spread)``: ``low = min u`` and ``spread = max u - min u`` over
    ``axis`` (all of ``u`` by default), kept as length-1 axes so that they broadcast.

    A shift ``U + b`` adds ``b`` to every decision's expected utility (the probabilities
    sum to 1) and to every threshold's yield, so it ranks them as ``U`` does (theory 1,
    "Equivalence"). Computed from ``u - low`` instead, values carry no shift at all: a
    large one (``U + 1e9``) cannot round the differences between them away, and ``spread``,
    unlike ``max |U|``, is unchanged by it: the scale for :func:`near_best`.
    """
    low = u.min(axis=axis, keepdims=True)
    return low, u - low, u.max(axis=axis, keepdims=True) - low


def near_best(values: np.ndarray, spread: Any, axis: int = -1) -> np.ndarray:
    """Boolean mask of the ``values`` tied for the largest along ``axis``.

    Ties are values within ``TIE_RTOL * spread`` of the largest, ``spread`` being
    ``max U - min U`` of the utility matrix the values were computed from (from
    :func:`shift_and_spread`; broadcastable against ``values`` with ``axis`` reduced to
    length 1). Expected utilities (:mod:`yieldwise.decision`) and yields of thresholds
    (:mod:`yieldwise.roc`) are both tied by this rule, so they agree on what a tie is;
    with ``values`` computed from ``U - min U`` the mask is the same for ``U + b`` (theory
    1, "Equivalence").
    """
    best = values.max(axis=axis, keepdims=True)
    return values >= best - TIE_RTOL * np.asarray(spread)


def in_chart_domain(x: Any, y: Any) -> np.ndarray | bool:
    """Whether chart points ``(x, y)`` lie in the admitted domain of theory 1.1."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    inside = (np.abs(x) <= 1) & (np.abs(y) <= 1)
    inside &= ~((x < 0) & (y > 1 + x))
    inside &= ~((x > 0) & (-y > 1 - x))
    return inside if inside.ndim else bool(inside)


def chart_matrices(x: Any, y: Any) -> np.ndarray:
    """Binary standard-form matrices ``U(x, y)`` (theory 1.1), vectorised.

    Returns an array of shape ``broadcast(x, y).shape + (2, 2)``; no domain check.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    x, y = np.broadcast_arrays(x, y)
    out = np.empty((*x.shape, 2, 2))
    # np.where, not multiplication by a mask, so that no entry comes out as -0.0.
    out[..., 0, 0] = np.where(x > 0, 1 - x, 1.0)
    out[..., 0, 1] = np.where(y > 0, y, 0.0)
    out[..., 1, 0] = np.where(y < 0, -y, 0.0)
    out[..., 1, 1] = np.where(x < 0, 1 + x, 1.0)
    return out


def chart_coordinates(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Chart coordinates ``(x, y)`` of binary matrices ``(..., 2, 2)`` (theory 1.1), vectorised.

    The inverse of :func:`chart_matrices` (and :attr:`UtilityMatrix.xy` for many
    matrices at once); row ``k`` chooses class ``k``. Matrices outside the admitted
    domain (a wrong decision worth more than the correct one) or constant ones get NaN.

    Examples
    --------
    >>> x, y = chart_coordinates(chart_matrices([0.5, -0.2], [-0.25, 0.7]))
    >>> x.tolist(), y.tolist()
    ([0.5, -0.2], [-0.25, 0.7])
    """
    v = np.asarray(values, dtype=float)
    if v.shape[-2:] != (2, 2):
        raise ValueError(f"values must have shape (..., 2, 2), found {v.shape}")
    low = v.min(axis=(-2, -1))[..., None, None]
    span = v.max(axis=(-2, -1))[..., None, None] - low
    with np.errstate(divide="ignore", invalid="ignore"):
        st = (v - low) / span
    # as in UtilityMatrix.xy: exact comparisons are safe in standard form
    x = np.where(st[..., 1, 1] == 1.0, 1.0 - st[..., 0, 0], st[..., 1, 1] - 1.0)
    y = np.where(st[..., 1, 0] == 0.0, st[..., 0, 1], -st[..., 1, 0])
    admitted = (v[..., 0, 0] >= v[..., 1, 0]) & (v[..., 1, 1] >= v[..., 0, 1])
    admitted &= span[..., 0, 0] > 0
    return np.where(admitted, x, np.nan), np.where(admitted, y, np.nan)


# ------------------------------------------------------------- random matrices
# Standard deviation of each chart coordinate under the "gaussian" prior (theory 1.5).
_GAUSSIAN_SD = 1.0 / 3.0
# Fraction of the square [-1, 1]^2 covered by the admitted domain: area 3 out of 4.
_UNIFORM_ACCEPTANCE = 0.75
# Lower bound on the acceptance of the truncated Gaussian prior (it is about 0.99).
_GAUSSIAN_ACCEPTANCE = 0.9


def sample_chart_points(
    n: int, prior: str, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` chart points ``(x, y)`` from the named prior, by rejection in rounds.

    ``"uniform"`` is uniform over the admitted domain of theory 1.1;
    ``"gaussian"`` is ``N(0, 1/3)`` in each coordinate truncated to that domain.
    """
    x = np.empty(n)
    y = np.empty(n)
    filled = 0
    acceptance = _UNIFORM_ACCEPTANCE if prior == "uniform" else _GAUSSIAN_ACCEPTANCE
    while filled < n:
        need = n - filled
        # Oversample so that one round is almost always enough; surplus accepted
        # draws are dropped by position, which leaves the accepted ones i.i.d.
        size = int(need / acceptance * 1.05) + 32
        if prior == "uniform":
            candidates = rng.uniform(-1.0, 1.0, size=(2, size))
        else:
            candidates = rng.normal(0.0, _GAUSSIAN_SD, size=(2, size))
        keep = in_chart_domain(candidates[0], candidates[1])
        cx = candidates[0][keep][:need]
        cy = candidates[1][keep][:need]
        x[filled : filled + cx.size] = cx
        y[filled : filled + cy.size] = cy
        filled += cx.size
    return x, y


def admitted_entries(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` square ``k x k`` matrices of i.i.d. U(0, 1) entries conditioned on every
    column's diagonal entry being its largest.

    Exact and rejection-free: by exchangeability, conditioning ``k`` i.i.d. uniforms on
    the diagonal one being the largest is drawing ``k`` of them, putting the largest on
    the diagonal and the others, in random order, in the other rows.
    """
    draws = rng.random((n, k, k))  # (matrix, column, entry)
    draws.sort(axis=2)
    out = np.empty((n, k, k))
    others = np.argsort(rng.random((n, k, k - 1)), axis=2)  # a random order per column
    rows = np.arange(k)
    for c in range(k):  # k is small (classes); the work is vectorised over matrices
        off = rows[rows != c]
        out[:, c, c] = draws[:, c, -1]
        # the k - 1 smaller values go to the off-diagonal rows in a random order
        out[:, off, c] = np.take_along_axis(draws[:, c, :-1], others[:, c], axis=1)
    return out


MATRIX_PRIORS: tuple[str, ...] = ("uniform", "entries", "gaussian", "unconstrained")
"""Named distributions of :func:`sample_matrices`."""


def sample_matrices(
    n: int,
    decisions: int | Sequence[Label],
    classes: int | Sequence[Label],
    prior: str = "uniform",
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
) -> list[UtilityMatrix]:
    """``n`` random utility matrices from a stated prior.

    Decisions "correspond" to classes when they are as many and, given as labels,
    the same labels as a set (decision ``k`` = "choose class ``k``"); then only
    *admitted* matrices are drawn, whose correct decision is worth at least as much
    as every wrong one in each column (theory 1.1).

    Priors
    ------
    ``"uniform"``
        Two corresponding decisions and classes: uniform over the admitted domain of
        the chart of theory 1.1 (its standard-form matrices, "uniform over utility
        matrices" as theory 1.5 uses it). Otherwise the ``"entries"`` prior.
    ``"entries"``
        Entries i.i.d. Uniform(0, 1), conditioned, when decisions correspond to
        classes, on each column's correct decision being the largest (drawn exactly:
        the column's largest of ``C`` uniforms goes on the diagonal, the rest in
        random order). Rectangular matrices are unconstrained.
    ``"gaussian"``
        Binary only: the truncated Gaussian in chart coordinates of theory 1.5
        (standard deviation 1/3 in each, centred at the identity).
    ``"unconstrained"``
        Entries i.i.d. Uniform(0, 1), no constraint (some matrices then reward a
        wrong decision more than the right one).

    Parameters
    ----------
    n : int
        How many matrices.
    decisions, classes : int or sequence of labels
        How many decisions and classes (labelled ``0 .. k-1``), or their labels.
    prior : str, default "uniform"
        One of :data:`MATRIX_PRIORS`.
    seed : int, Generator or SeedSequence, optional

    Returns
    -------
    list of UtilityMatrix

    Examples
    --------
    >>> ms = sample_matrices(1000, 3, ["a", "b", "c"], seed=0)  # decisions default to 0..2
    >>> ms[0].shape, ms[0].classes
    ((3, 3), ('a', 'b', 'c'))
    >>> ms = sample_matrices(1000, ["a", "b", "c"], ["a", "b", "c"], seed=0)
    >>> all((m.values.argmax(axis=0) == [0, 1, 2]).all() for m in ms)  # admitted
    True
    >>> [m.xy for m in sample_matrices(2, 2, 2, seed=1)]  # the chart (theory 1.1)
    [(0.0236, 0.2260), (0.9009, 0.8346)]
    """
    from ._validation import check_positive_int

    n = check_positive_int(n, "n")
    if prior not in MATRIX_PRIORS:
        raise ValueError(f"prior must be one of {list(MATRIX_PRIORS)}, found {prior!r}")
    decision_labels = _labels_or_count(decisions, "decisions")
    class_labels = _labels_or_count(classes, "classes")
    n_decisions, n_classes = len(decision_labels), len(class_labels)
    corresponding = n_decisions == n_classes and (
        isinstance(decisions, int | np.integer)
        or isinstance(classes, int | np.integer)
        or set(decision_labels) == set(class_labels)
    )
    rng = _generator(seed)
    binary_chart = corresponding and n_decisions == 2 and prior in ("uniform", "gaussian")
    if prior == "gaussian" and not binary_chart:
        raise ValueError(
            "prior 'gaussian' is the chart's (theory 1.5) and needs 2 decisions that choose "
            f"2 classes; found {n_decisions} decisions and {n_classes} classes"
        )
    if binary_chart:
        values = chart_matrices(*sample_chart_points(n, prior, rng))
    elif prior != "unconstrained" and corresponding:
        values = admitted_entries(n, n_classes, rng)
    else:
        values = rng.random((n, n_decisions, n_classes))
    if corresponding and not (
        isinstance(decisions, int | np.integer) or isinstance(classes, int | np.integer)
    ):
        # row k chooses class k: order the rows as the decision labels say
        order = [class_labels.index(d) for d in decision_labels]
        values = values[:, order, :]
    return UtilityMatrix.batch(values, decisions=decision_labels, classes=class_labels)


def _labels_or_count(value: Any, name: str) -> tuple[Label, ...]:
    """Labels from a count (``0 .. k-1``) or a sequence of at least two labels."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        if value < 2:
            raise ValueError(f"{name} must be at least 2, found {value}")
        return tuple(range(int(value)))
    if isinstance(value, bool | np.bool_ | numbers.Number) or not isinstance(value, Iterable):
        raise TypeError(
            f"{name} must be a count (an int of at least 2) or a sequence of labels, found "
            f"{type(value).__name__} {value!r}"
        )
    labels = check_labels(value, None, name)  # read once: a generator works too
    if len(labels) < 2:
        raise ValueError(
            f"{name} must hold at least 2 labels, found {len(labels)}: {list(labels)}; a "
            f"utility matrix needs 2 {name} or more"
        )
    return labels


def _generator(seed: Any) -> np.random.Generator:
    """``np.random.default_rng(seed)``, with errors that name ``seed``."""
    if isinstance(seed, bool | np.bool_) or (
        isinstance(seed, int | np.integer) and not is_seed(seed)
    ):
        raise ValueError(
            "seed must be a non-negative integer, a numpy Generator or SeedSequence, or "
            f"None, found {seed!r}"
        )
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "seed must be a non-negative integer, a numpy Generator or SeedSequence, or "
            f"None, found {type(seed).__name__} {seed!r} ({exc})"
        ) from None
