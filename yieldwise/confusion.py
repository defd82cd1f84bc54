"""Confusion matrices: rows are decisions, columns are true classes (theory section 1)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._validation import (
    Label,
    align,
    as_float_array,
    categories_of,
    check_labels,
    indices_of,
    label_values,
    labelled_table,
    sorted_unique,
)

if TYPE_CHECKING:
    from .utility import UtilityMatrix

__all__ = ["ConfusionMatrix"]


class ConfusionMatrix:
    """Counts ``F[i, c]`` of items given decision ``i`` while class ``c`` was true.

    Counts may be fractional: :meth:`from_probabilities` splits ties between
    decisions equally.

    Parameters
    ----------
    counts : array-like of shape (n_decisions, n_classes)
        Non-negative finite counts with a positive total.
    decisions, classes : sequence of labels, optional
        Row and column labels; default ``0 .. n-1``.

    Examples
    --------
    >>> from yieldwise import ConfusionMatrix
    >>> cm = ConfusionMatrix.from_labels(["a", "a", "b", "b"], ["a", "b", "b", "b"])
    >>> cm.counts
    array([[1., 0.],
           [1., 2.]])
    >>> cm.class_frequencies
    array([0.5, 0.5])
    """

    def __init__(
        self,
        counts: Any,
        decisions: Iterable[Label] | None = None,
        classes: Iterable[Label] | None = None,
    ) -> None:
        # a DataFrame (to_frame()'s, say) is read by its labels, not by position
        counts, decisions, classes = labelled_table(
            counts, decisions, classes, "counts", "decisions", "classes"
        )
        array = as_float_array(counts, "counts", ndim=2)
        if (array < 0).any():
            where = tuple(int(i) for i in np.argwhere(array < 0)[0])
            raise ValueError(f"counts must be non-negative, found {array[where]} at index {where}")
        if array.sum() <= 0:
            raise ValueError(f"counts is an empty confusion matrix (all zero, shape {array.shape})")
        self._counts = array.copy()  # never share (and freeze) the caller's array
        self._counts.setflags(write=False)
        self._decisions = check_labels(decisions, array.shape[0], "decisions")
        self._classes = check_labels(classes, array.shape[1], "classes")

    # ----------------------------------------------------------- construction
    @classmethod
    def from_labels(
        cls,
        true_classes: Any,
        decisions: Any,
        classes: Iterable[Label] | None = None,
        decisions_set: Iterable[Label] | None = None,
    ) -> ConfusionMatrix:
        """Tally paired true classes and decisions.

        Parameters
        ----------
        true_classes, decisions : 1-D label sequences of equal length
            numpy arrays, lists, pandas Series or Categoricals; string labels work.
        classes : sequence of labels, optional
            All class labels (columns). Default: the categories of a categorical
            ``true_classes``, else the sorted labels seen in either argument.
        decisions_set : sequence of labels, optional
            All decision labels (rows). Default: the categories of a categorical
            ``decisions``, else ``classes`` (one decision per class).
        """
        truth = label_values(true_classes, "true_classes")
        chosen = label_values(decisions, "decisions")
        if truth.shape != chosen.shape:
            raise ValueError(
                f"true_classes and decisions must have the same length, found "
                f"{truth.size} and {chosen.size}"
            )
        if classes is None:
            classes = categories_of(true_classes) or sorted_unique(
                truth, chosen, name="true_classes and decisions",
                remedy="pass classes= to give the class order",
            )  # fmt: skip
        classes = check_labels(classes, len(list(classes)), "classes")
        if decisions_set is None:
            decisions_set = categories_of(decisions) or classes
        decisions_set = check_labels(decisions_set, len(list(decisions_set)), "decisions_set")
        cols = indices_of(truth, classes, "true_classes", "classes")
        rows = indices_of(chosen, decisions_set, "decisions", "decisions_set")
        n_rows, n_cols = len(decisions_set), len(classes)
        counts = np.bincount(rows * n_cols + cols, minlength=n_rows * n_cols)
        return cls(counts.reshape(n_rows, n_cols), decisions=decisions_set, classes=classes)

    @classmethod
    def from_probabilities(
        cls,
        probabilities: Any,
        true_classes: Any,
        utility: UtilityMatrix | Any,
        *,
        decisions: Iterable[Label] | None = None,
    ) -> ConfusionMatrix:
        """Confusion matrix of expected-utility decisions, splitting ties equally.

        Each item contributes 1 to its true class's column, shared equally among
        the decisions that tie for the highest expected utility, so evaluations
        carry no tie-breaking noise. ``utility`` is a :class:`UtilityMatrix` or an
        array of per-item matrices ``(items, decisions, classes)``; see
        :func:`yieldwise.decide` for the conventions.
        """
        from .decision import prepare_decision_inputs, tied_decisions

        p, u, decision_labels, class_labels = prepare_decision_inputs(
            probabilities, utility, decisions
        )
        truth = label_values(true_classes, "true_classes")
        if truth.size != p.shape[0]:
            raise ValueError(
                f"true_classes must have one label per item ({p.shape[0]}), found {truth.size}"
            )
        cols = indices_of(truth, class_labels, "true_classes", "utility matrix's classes")
        tied = tied_decisions(p, u)
        share = tied / tied.sum(axis=1, keepdims=True)
        onehot = np.zeros((p.shape[0], len(class_labels)))
        onehot[np.arange(p.shape[0]), cols] = 1.0
        return cls(share.T @ onehot, decisions=decision_labels, classes=class_labels)

    # ------------------------------------------------------------------ access
    @property
    def counts(self) -> np.ndarray:
        """Counts ``F``, read-only ``(n_decisions, n_classes)`` array."""
        return self._counts

    @property
    def decisions(self) -> tuple[Label, ...]:
        return self._decisions

    @property
    def classes(self) -> tuple[Label, ...]:
        return self._classes

    @property
    def shape(self) -> tuple[int, int]:
        return self._counts.shape  # type: ignore[return-value]

    @property
    def total(self) -> float:
        """Number of items ``N``."""
        return float(self._counts.sum())

    @property
    def normalized(self) -> np.ndarray:
        """``C = F / N``, the joint frequencies of decision and class."""
        return self._counts / self._counts.sum()

    @property
    def class_frequencies(self) -> np.ndarray:
        """Frequency ``f_c`` of each true class (column sums of :attr:`normalized`)."""
        return self.normalized.sum(axis=0)

    @property
    def decision_frequencies(self) -> np.ndarray:
        """Frequency of each decision (row sums of :attr:`normalized`)."""
        return self.normalized.sum(axis=1)

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(
            self._counts,
            index=pd.Index(self._decisions, name="decision", dtype=object, tupleize_cols=False),
            columns=pd.Index(self._classes, name="class", dtype=object, tupleize_cols=False),
        )

    def reindex(
        self, decisions: Iterable[Label] | None = None, classes: Iterable[Label] | None = None
    ) -> ConfusionMatrix:
        """Rows/columns reordered or extended to the given labels; new ones get zero counts.

        Labels present here but missing from the new ones raise ``ValueError``
        (their counts would be lost).
        """
        # the package's label checks first: a string is one label, not its characters, and
        # duplicated labels would give one count two rows
        decisions = (
            self._decisions if decisions is None else check_labels(decisions, None, "decisions")
        )
        classes = self._classes if classes is None else check_labels(classes, None, "classes")
        rows = align(self._decisions, decisions, "this confusion matrix's decisions", "decisions")
        cols = align(self._classes, classes, "this confusion matrix's classes", "classes")
        counts = np.zeros((len(decisions), len(classes)))
        counts[np.ix_(rows, cols)] = self._counts
        return ConfusionMatrix(counts, decisions=decisions, classes=classes)

    # ------------------------------------------------------------------ folds
    def __add__(self, other: ConfusionMatrix) -> ConfusionMatrix:
        """Concatenate folds: counts add, matched by label (labels must agree as sets)."""
        if not isinstance(other, ConfusionMatrix):
            return NotImplemented
        if set(other.decisions) != set(self._decisions) or set(other.classes) != set(self._classes):
            raise ValueError(
                "cannot add confusion matrices with different labels: decisions "
                f"{list(self._decisions)} vs {list(other.decisions)}, classes "
                f"{list(self._classes)} vs {list(other.classes)}; reindex them first"
            )
        aligned = other.reindex(self._decisions, self._classes)
        return ConfusionMatrix(
            self._counts + aligned.counts, decisions=self._decisions, classes=self._classes
        )

    def __radd__(self, other: Any) -> ConfusionMatrix:
        # Lets sum(list_of_folds) work: sum starts from 0.
        if isinstance(other, int) and other == 0:
            return self
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfusionMatrix):
            return NotImplemented
        return (
            self._decisions == other._decisions
            and self._classes == other._classes
            and np.array_equal(self._counts, other._counts)
        )

    def __hash__(self) -> int:
        return hash((self._decisions, self._classes, (self._counts + 0.0).tobytes()))

    # ---------------------------------------------------------------- display
    def __repr__(self) -> str:
        table = self.to_frame().to_string()
        return (
            f"ConfusionMatrix({self.shape[0]} decisions x {self.shape[1]} classes, "
            f"N = {self.total:g})\n{table}"
        )

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self._classes)
        rows = "".join(
            f"<tr><th>{html.escape(str(d))}</th>"
            + "".join(f"<td>{v:g}</td>" for v in row)
            + "</tr>"
            for d, row in zip(self._decisions, self._counts, strict=True)
        )
        return (
            "<table class='yieldwise-confusion'>"
            f"<caption>ConfusionMatrix (N = {self.total:g}; rows decisions, columns true "
            "classes)</caption>"
            f"<thead><tr><th>decision \\ class</th>{head}</tr></thead><tbody>{rows}</tbody></table>"
        )
