"""Many classes: the outputs reduced to the margin of their top two classes (docs/model.md).

A probability vector of ``C`` classes is ``C - 1`` log-ratios, and a mixture with kernels
in that many dimensions needs kernels placed on the data, between which ``p(c | y)`` is a
blend of a few kernels' class shares (docs/model.md, "Ten classes: close to a
nearest-centre rule"). :class:`ClassRanks` replaces the pair ``(c, y)`` by

* the output's **margin** ``m(y) = s_(1) - s_(2)``, the gap between its largest and
  second-largest class scores (``s_j = log p_j`` for a probability vector, squeezed as the
  simplex transform squeezes; the scores themselves for logits), and
* the **rank** of the true class in the output's own ordering: ``first`` (the output's
  top class), ``second``, or ``others`` (any lower rank).

The transducer is the theory-3.1 mixture of ``(rank, m)``, a 1-D problem with three
classes, and is mapped back to the classes by the output itself:

    p(c | y) = p(first | m(y))   for c the output's top class,
               p(second | m(y))  for its second class,
               p(others | m(y)) * softmax_{j in others}(s_j)_c   for the rest,

which sums to one and is a deterministic function of ``y`` and the draw, so every formula
of theory 3.2 applies draw by draw (a draw's ``F_t(c | y)`` is its ``F_t(rank | m)`` spread
that way). The share of ``others`` has a temperature of its own,
``softmax_{j in others}(gamma * s_j)``: a network's probabilities are rarely calibrated
among its unlikely classes (on the panel's ten-class problem the truth's is about 3.6, not
1). ``gamma`` is a parameter of the model with prior ``log gamma ~ N(0, 1)``; since the
likelihood of the calibration items factorises into that of ``(rank, m)`` and that of
which ``others`` class an item of rank ``others`` is (a conditional logit in ``gamma``
alone), its posterior is independent of the mixture's and is computed exactly on a grid
(:func:`temperature_draws`); each mixture draw is paired with one draw of ``gamma``.

Which classes are first and second matters (a network that reads a 3 as a 5 but not the
other way round): with ``paired`` (the default up to
:data:`yieldwise._design.RANKS_MAX_PAIRS` ordered pairs) each pair of top classes
``(a, b)`` shifts the rank log-odds by an offset, ``p(rank | m, (a, b))`` proportional to
``p(rank | m) exp(offset[(a, b), rank])``, with offsets of two levels (the top class
``a``, then the pair) shrunk towards 0 by half-Normal sds (stan/transducer.stan, "Group
offsets"); a pair no calibration output had takes its offsets from the prior given its
top class. The model stays a finite mixture of product kernels (a component per kernel
and pair).

Temperature scaling is in its smooth limit: with ``p(c | y)`` proportional to
``exp(s_c / T)`` the log-odds of the first against the second class are ``m / T``, linear
in the margin. What is given up: calibration that depends on more of the output than its
margin and its top pair (a class's own calibration enters only through the pairs it
tops), and the generative mode (the prevalence correction needs each class's output law,
which the reduced model does not hold); the latter is refused with a message saying to
fit with ``class_reduction=None``.

The record is stored with a saved transducer (:meth:`to_json`) and reverses the reduction
for any new output.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import logsumexp, softmax

from .. import _design
from .._validation import Label, check_labels, json_object

__all__ = [
    "LEAD_COLUMN",
    "MARGIN_COLUMN",
    "RANK_CLASSES",
    "ClassRanks",
    "ReductionWarning",
    "choose_reduction",
    "gauss_nodes",
    "rank_check",
    "temperature_draws",
    "warn_on_rank_check",
]

#: The reduced transducer's output column: the margin of the output's top two scores.
MARGIN_COLUMN = "margin"

#: The reduced problem's classes, in the order of its ``alpha``'s last axis.
RANK_CLASSES: tuple[str, ...] = ("first", "second", "others")
_KINDS = ("simplex", "scores")
_MARGINS = ("second", "rest", "both")
#: The reduced transducer's second output column with ``margin="both"``: the lead of the
#: output's second class over the classes below it, ``s_(2) - log sum_{j >= 3} exp(s_(j))``.
LEAD_COLUMN = "lead"
#: Prior sd of ``log gamma``, the ``others`` share's temperature (module docstring), centred
#: on ``gamma = 1`` (the output's own probabilities): within a factor e of 1 with
#: probability 0.68, of 7 with 0.95.
TEMPERATURE_PRIOR_SD = 1.0
#: Grid of ``log gamma`` on which its posterior is computed: a coarse pass over
#: ``TEMPERATURE_RANGE`` finds where the mass is, a fine pass of ``_FINE`` points resolves
#: it (the inverse CDF interpolates linearly between them).
TEMPERATURE_RANGE = (-8.0, 5.0)
_COARSE, _FINE = 261, 1001
#: Nodes of the Gaussian quadrature over which :meth:`ClassRanks.mean_share` averages the
#: ``others`` share, in place of every draw (so that a prediction costs nodes x items x
#: classes, whatever the number of draws): the rule whose nodes and weights integrate
#: polynomials of ``log gamma`` up to degree 31 exactly against the draws' empirical
#: measure (:func:`gauss_nodes`). The share is smooth in ``log gamma``: on a 400-item fit
#: whose temperature spans 0.9 to 6.4 the mean differs from the all-draws mean by 7e-9
#: at 16 nodes (6e-7 at 12, 4e-5 at 8), where 128 quantile midpoints missed it by 1.7e-4
#: (tests/test_class_reduction.py).
MEAN_NODES = 16
#: Items per block of :meth:`ClassRanks.mean_share`'s work arrays.
_SHARE_BLOCK = 4096


class ReductionWarning(UserWarning):
    """The calibration data contradict the class reduction's assumption that every class is
    calibrated alike (:func:`rank_check`)."""


@dataclass(frozen=True)
class ClassRanks:
    """A recorded reduction of one score per class to ``(rank, margin)`` (module docstring).

    Attributes
    ----------
    kind : {"simplex", "scores"}
        ``"simplex"``: the columns are a probability vector, scored by their squeezed logs;
        ``"scores"``: the columns are the scores themselves (logits).
    columns : the output columns, column ``j`` the output for class ``classes[j]``.
    classes : the ``C`` class labels.
    squeeze_n : the ``n`` of the squeezing ``(p (n - 1) + 1 / C) / n`` (the calibration size).
    kept : ranks modelled one by one before ``others``: 2 (``first``, ``second``), or 1
        (``first`` and ``others``) when no calibration item's class ranks below second.
    margin : {"second", "rest", "both"}
        The margin: ``s_(1) - s_(2)`` (``"second"``), or the top class's log-odds against
        all the others together, ``s_(1) - log sum_{j >= 2} exp(s_(j))`` (``"rest"``);
        ``"both"``: two coordinates, ``s_(1) - s_(2)`` and the second's lead over the rest,
        ``s_(2) - log sum_{j >= 3} exp(s_(j))`` (the reduced transducer is 2-D; the
        output's own first : second : others masses are a function of the pair).
    paired : bool
        Whether the reduced model has offsets per pair of top classes (:meth:`pairs`;
        stan/transducer.stan, "Group offsets").
    """

    kind: str
    columns: tuple[str, ...]
    classes: tuple[Label, ...]
    squeeze_n: int
    kept: int = 2
    margin: str = "second"
    paired: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {list(_KINDS)}, found {self.kind!r}")
        if len(self.columns) != len(self.classes) or len(self.classes) < 3:
            raise ValueError(
                "a rank reduction needs one output column per class and at least 3 classes, "
                f"found {len(self.columns)} column(s) for {len(self.classes)} class(es)"
            )
        if (
            isinstance(self.squeeze_n, bool)
            or not isinstance(self.squeeze_n, int)
            or (self.squeeze_n < 2)
        ):
            raise ValueError(f"squeeze_n must be an integer >= 2, found {self.squeeze_n!r}")
        if self.kept not in (1, 2):
            raise ValueError(f"kept must be 1 or 2, found {self.kept!r}")
        if self.margin not in _MARGINS:
            raise ValueError(f"margin must be one of {list(_MARGINS)}, found {self.margin!r}")

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def rank_classes(self) -> tuple[str, ...]:
        """The reduced problem's class labels: ``first``, ``second`` (when kept), ``others``."""
        return RANK_CLASSES if self.kept == 2 else (RANK_CLASSES[0], RANK_CLASSES[2])

    @property
    def n_pairs(self) -> int:
        """The ordered pairs (top class, second class): ``C (C - 1)``."""
        return self.n_classes * (self.n_classes - 1)

    def pairs(self, outputs: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
        """Each output's pair of top classes ``(a, b)`` as an index in ``0 .. C (C - 1) - 1``:
        ``a (C - 1) + b - [b > a]`` (``order``: :meth:`order` of ``outputs``, when the
        caller has it)."""
        order = self.order(outputs) if order is None else order
        a, b = order[:, 0], order[:, 1]
        return a * (self.n_classes - 1) + b - (b > a)

    def pair_parents(self) -> np.ndarray:
        """Each pair's top class (the offsets' upper level), ``(C (C - 1),)``."""
        return np.repeat(np.arange(self.n_classes), self.n_classes - 1)

    def with_kept(self, kept: int) -> ClassRanks:
        return replace(self, kept=kept)

    # ----------------------------------------------------------------- maps
    def scores(self, outputs: np.ndarray) -> np.ndarray:
        """Per-class scores ``s`` (n, C): squeezed log-probabilities or the outputs."""
        if self.kind == "scores":
            return np.asarray(outputs, float)
        n, c = self.squeeze_n, self.n_classes
        s = np.asarray(outputs, float) * (n - 1)  # in place from here: 1.6x faster on 1e7
        s += 1.0 / c
        np.log(s, out=s)
        s -= np.log(n)
        return s

    def order(self, outputs: np.ndarray) -> np.ndarray:
        """Class indices (n, C) by decreasing score; ties keep the column order."""
        return np.argsort(-self.scores(outputs), axis=1, kind="stable")

    @property
    def margin_columns(self) -> tuple[str, ...]:
        """The reduced transducer's output columns: ``margin`` (and ``lead``, ``"both"``)."""
        return (MARGIN_COLUMN, LEAD_COLUMN) if self.margin == "both" else (MARGIN_COLUMN,)

    def margins(self, outputs: np.ndarray) -> np.ndarray:
        """``m(y) = s_(1) - s_(2)`` per output, shape (n, 1), never negative (n, 2 with
        ``margin="both"``: the margin and the second's lead over the classes below it)."""
        s = self.scores(outputs)
        if self.margin == "both":
            ordered = -np.sort(-s, axis=1)
            # log sum_{j >= 3} exp(s_(j) - s_(3)) without scipy's checks: s_(3) is the largest
            rest = np.log(np.exp(ordered[:, 2:] - ordered[:, 2:3]).sum(axis=1))
            lead = ordered[:, 1] - ordered[:, 2] - rest
            return np.column_stack([ordered[:, 0] - ordered[:, 1], lead])
        if self.margin == "rest":
            ordered = -np.sort(-s, axis=1)
            return (ordered[:, 0] - logsumexp(ordered[:, 1:], axis=1))[:, None]
        top2 = -np.partition(-s, 1, axis=1)[:, :2]
        return (top2[:, 0] - top2[:, 1])[:, None]

    def own_log_odds(self, outputs: np.ndarray) -> np.ndarray:
        """The classifier's own log-odds of each lower rank against ``first`` (n, kept):
        ``log sum_{j of rank r} softmax(s)_j - log softmax(s)_(1)``, with ``s`` the
        :meth:`scores` (so for the default margin the second's is ``-m``; the last rank
        sums every class below ``kept``). The prior mean of a centred fit
        (``_design.RANKS_CENTRED``)."""
        s = -np.sort(-self.scores(outputs), axis=1)
        lower = [s[:, r] for r in range(1, self.kept)] + [logsumexp(s[:, self.kept :], axis=1)]
        return np.column_stack(lower) - s[:, :1]

    def ranks(self, outputs: np.ndarray, class_index: np.ndarray) -> np.ndarray:
        """Each item's rank of its class in its output's order: 0 (top), 1, ..., C - 1."""
        order = self.order(outputs)
        return np.argmax(order == np.asarray(class_index)[:, None], axis=1)

    def reduced_classes(self, outputs: np.ndarray, class_index: np.ndarray) -> np.ndarray:
        """Each item's reduced class, an index into :attr:`rank_classes`."""
        return np.minimum(self.ranks(outputs, class_index), self.kept)

    def others(
        self, outputs: np.ndarray, order: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``others`` classes of each output: their indices (n, C - kept), in the
        output's order, and their scores ``s_j`` (n, C - kept)."""
        order = (self.order(outputs) if order is None else order)[:, self.kept :]
        return order, np.take_along_axis(self.scores(outputs), order, axis=1)

    def shares(
        self, outputs: np.ndarray, temperature: Any = 1.0, order: np.ndarray | None = None
    ) -> np.ndarray:
        """``softmax_{j in others}(gamma s_j)`` (..., n, C - kept) for temperatures ``gamma``
        of any shape (the leading axes, one per draw), in the output's order (``order``:
        :meth:`order` of ``outputs``, when the caller has it)."""
        _, s = self.others(outputs, order)
        g = np.asarray(temperature, float)[..., None, None]
        if not (g > 0).all():
            return softmax(g * s, axis=-1)
        # positive temperatures keep the output's order, so each row's first score is its
        # largest and no row maximum need be taken (scipy's softmax does), in place: a
        # third of the time on 1,000 draws x 2,000 ten-class outputs (a long-run pass)
        x = s - s[:, :1]
        x = g * x
        np.exp(x, out=x)
        x /= x.sum(axis=-1, keepdims=True)
        return x

    def mean_share(
        self, outputs: np.ndarray, temperature: np.ndarray, order: np.ndarray | None = None
    ) -> np.ndarray:
        """The posterior mean of the ``others`` share (n, C - kept) over the temperature's
        draws, by the Gaussian quadrature of :data:`MEAN_NODES` nodes for their empirical
        measure (:func:`gauss_nodes`)."""
        nodes, weights = gauss_nodes(np.log(np.asarray(temperature, float).reshape(-1)),
                                     MEAN_NODES)  # fmt: skip
        _, s = self.others(outputs, order)
        # the others' largest score first (the output's order), so s <= 0 and no row
        # maximum need be taken out (scipy's softmax does: 1.8x slower here); classes along
        # the rows (C - kept, n, C-contiguous), so that a row's sum adds whole rows; every
        # step in place, one node at a time, on blocks of _SHARE_BLOCK items whose work
        # arrays stay in cache. Measured on 1e6 ten-class outputs at 16 nodes: 1.41 s ->
        # 0.48 s in place (2026-11-27); on 2026-12-03's (slower) machine, whole-array
        # 1.52 s -> 0.78 s in blocks of 4,096 items (medians of 5 runs taken in turn with
        # farm-bench, 4,000 temperature draws), equal to 5e-16.
        out = np.empty_like(s)
        gammas = np.exp(nodes)
        for a in range(0, s.shape[0], _SHARE_BLOCK):
            block = np.ascontiguousarray((s[a : a + _SHARE_BLOCK] - s[a : a + _SHARE_BLOCK, :1]).T)
            buf = np.empty_like(block)
            total = np.empty(block.shape[1])
            acc = np.zeros_like(block)
            for gamma, weight in zip(gammas, weights, strict=True):
                np.multiply(block, gamma, out=buf)
                np.exp(buf, out=buf)
                np.sum(buf, axis=0, out=total)
                np.divide(weight, total, out=total)
                buf *= total
                acc += buf
            out[a : a + _SHARE_BLOCK] = acc.T
        return out  # (n, C - kept)

    def expand(
        self,
        outputs: np.ndarray,
        rank_proba: np.ndarray,
        share: np.ndarray | None = None,
        order: np.ndarray | None = None,
    ) -> np.ndarray:
        """Class probabilities (..., n, C) from rank probabilities (..., n, kept + 1).

        The first ``kept`` ranks go to the output's top classes; ``others`` is spread over
        the rest by ``share`` (..., n, C - kept), broadcast against the leading axes of
        ``rank_proba``: :meth:`shares` at each draw's temperature, or :meth:`mean_share`;
        None is temperature 1. The map is linear in ``rank_proba``, so per-draw
        probabilities with their draws' shares map the same way as their mean.
        """
        order = self.order(outputs) if order is None else order  # (n, C)
        if share is None:
            share = self.shares(outputs)
        by_rank = self.in_rank_order(rank_proba, share)
        out = np.empty_like(by_rank)
        index = np.broadcast_to(order, by_rank.shape)
        np.put_along_axis(out, index, by_rank, axis=-1)
        return out

    def in_rank_order(
        self, rank_proba: np.ndarray, share: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """:meth:`expand`'s class probabilities (..., n, C) before they are put in the
        classes' order: column ``j`` is the class the output ranks ``j``-th (the first
        ``kept`` ranks' probabilities, then ``others`` spread by ``share``). A mean or a
        quantile over draws may be taken in this order and put in the classes' order once
        per output, since it commutes with the output's own permutation of the classes.
        ``out``: an array of the result's shape to write into (a caller's reused buffer)."""
        k = self.kept
        q = np.asarray(rank_proba, float)
        if q.shape[-1] != k + 1:
            raise ValueError(
                f"rank_proba must have {k + 1} columns {list(self.rank_classes)} on its last "
                f"axis, found {q.shape[-1]}"
            )
        share = np.asarray(share, float)
        shape = (*np.broadcast_shapes(q.shape[:-1], share.shape[:-1]), k + share.shape[-1])
        if out is None:
            out = np.empty(shape)
        elif out.shape != shape:
            raise ValueError(f"out must have shape {shape}, found {out.shape}")
        out[..., :k] = q[..., :k]
        np.multiply(q[..., k : k + 1], share, out=out[..., k:])
        return out

    # ------------------------------------------------------------ recording
    def to_json(self) -> str:
        record = asdict(self)
        record["classes"] = list(self.classes)
        return json.dumps(record)

    @classmethod
    def from_json(cls, text: str) -> ClassRanks:
        """The reduction recorded by :meth:`to_json`, checked (ValueError names the field)."""
        record = json_object(
            text, ("kind", "columns", "classes", "squeeze_n"), "the class reduction record"
        )
        if not isinstance(record["columns"], list) or not isinstance(record["classes"], list):
            raise ValueError(
                f"columns and classes must be lists, found {record['columns']!r}, "
                f"{record['classes']!r}"
            )
        classes = check_labels(record["classes"], len(record["classes"]), "the class labels")
        return cls(
            kind=record["kind"],
            columns=tuple(str(c) for c in record["columns"]),
            classes=classes,
            squeeze_n=record["squeeze_n"],
            kept=record.get("kept", 2),
            margin=record.get("margin", "second"),
            paired=bool(record.get("paired", False)),
        )


def choose_reduction(
    setting: Any,
    outputs: np.ndarray,
    columns: tuple[str, ...],
    classes: tuple[Label, ...],
    kinds: tuple[str, ...],
    joint: bool,
) -> ClassRanks | None:
    """The reduction ``class_reduction`` asks for on these calibration outputs, or None.

    ``"auto"``: ranks for a probability vector of at least
    :data:`yieldwise._design.RANKS_MIN_CLASSES` classes (read at call time) with one column
    per class (not a joint fit); None: never; ``"ranks"``: always, for a probability vector
    (``"simplex"``) or one real score per class (``"scores"``: columns the output transform
    leaves as they are, ``kinds`` all ``"identity"``), else ValueError saying why.
    """
    is_simplex = kinds == ("simplex",)
    if setting is None:
        return None
    if setting not in ("auto", "ranks"):
        raise ValueError(f'class_reduction must be "auto", "ranks" or None, found {setting!r}')
    fits = not joint and outputs.shape[1] == len(classes) >= 3
    if setting == "auto":
        if fits and is_simplex and len(classes) >= _design.RANKS_MIN_CLASSES:
            return ClassRanks("simplex", columns, classes, int(outputs.shape[0]),
                              _design.RANKS_KEPT, _design.RANKS_MARGIN,
                              _paired(len(classes)))  # fmt: skip
        return None
    if not fits:
        raise ValueError(
            'class_reduction="ranks" needs one classifier\'s outputs with one column per '
            f"class (at least 3 classes): found {outputs.shape[1]} column(s) for "
            f"{len(classes)} class(es)" + (" in a joint fit" if joint else "")
        )
    if not is_simplex and set(kinds) != {"identity"}:
        raise ValueError(
            'class_reduction="ranks" ranks probability vectors or real scores (logits); '
            f"these columns are transformed as {list(kinds)}: pass "
            'output_transform="identity" to rank the values as they are'
        )
    return ClassRanks("simplex" if is_simplex else "scores", columns, classes,
                      int(outputs.shape[0]), _design.RANKS_KEPT, _design.RANKS_MARGIN,
                      _paired(len(classes)))  # fmt: skip


def _paired(n_classes: int) -> bool:
    """Pair offsets for this many classes (:data:`yieldwise._design.RANKS_MAX_PAIRS`)."""
    return 0 < n_classes * (n_classes - 1) <= _design.RANKS_MAX_PAIRS


def gauss_nodes(samples: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``m``-point Gaussian quadrature for the empirical measure
    of ``samples`` (each of weight ``1 / S``): exact for polynomials of degree ``2 m - 1``.

    The Jacobi matrix of the measure's orthonormal polynomials comes from the Lanczos
    process on ``diag(samples)`` started at the uniform vector (with full
    reorthogonalisation, on standardised samples); its eigenvalues are the nodes and the
    squared first components of its eigenvectors the weights (Golub and Welsch 1969). With
    fewer than ``m`` distinct values, as many nodes as there are.
    """
    x = np.asarray(samples, float).reshape(-1)
    centre, scale = float(x.mean()), float(x.std())
    if not scale > 0:
        return np.array([centre]), np.array([1.0])
    x = (x - centre) / scale
    basis = np.zeros((m + 1, x.size))
    basis[0] = 1.0 / np.sqrt(x.size)
    diagonal, off = np.zeros(m), np.zeros(m + 1)
    size = m
    for k in range(m):  # m steps, each over the samples (not per item or draw)
        w = x * basis[k]
        diagonal[k] = basis[k] @ w
        w -= diagonal[k] * basis[k] + (off[k] * basis[k - 1] if k else 0.0)
        w -= basis[: k + 1].T @ (basis[: k + 1] @ w)
        off[k + 1] = np.linalg.norm(w)
        if off[k + 1] < 1e-10:
            size = k + 1
            break
        basis[k + 1] = w / off[k + 1]
    jacobi = np.diag(diagonal[:size]) + np.diag(off[1:size], 1) + np.diag(off[1:size], -1)
    nodes, vectors = np.linalg.eigh(jacobi)
    weights = vectors[0] ** 2
    return centre + scale * nodes, weights / weights.sum()


def temperature_draws(
    reduction: ClassRanks,
    outputs: np.ndarray,
    class_index: np.ndarray,
    shape: tuple[int, ...],
    seed: int,
) -> np.ndarray:
    """Draws of the ``others`` share's temperature ``gamma`` from its exact posterior.

    The items whose class ranks ``others`` in their output (rank >= ``kept``) give the
    conditional likelihood ``prod_i softmax_{j in others_i}(gamma s_ij)_{c_i}``; with the
    prior ``log gamma ~ N(0, TEMPERATURE_PRIOR_SD^2)`` the posterior of ``g = log gamma``
    is evaluated on a grid (a coarse pass over :data:`TEMPERATURE_RANGE`, then a fine one
    over where the coarse pass finds mass within e^-30 of the largest) and drawn by its
    inverse CDF at stratified uniforms, shuffled (seeded by ``seed``). Independent of the
    mixture's posterior (the likelihood factorises; module docstring), so pairing the
    draws with the mixture's by position is a draw from the joint posterior. With no
    ``others`` item, or none whose ``others`` scores differ, the draws are the prior's.

    Returns an array of ``shape`` (the mixture's chain and draw axes).
    """
    ranks = reduction.ranks(outputs, class_index)
    mine = ranks >= reduction.kept
    _, s = reduction.others(np.asarray(outputs, float)[mine])
    true = ranks[mine] - reduction.kept  # the item's class's place among its others
    s_true = s[np.arange(true.size), true]

    def log_posterior(g: np.ndarray) -> np.ndarray:
        out = -0.5 * (g / TEMPERATURE_PRIOR_SD) ** 2
        gamma = np.exp(g)
        for rows in np.array_split(np.arange(true.size), max(1, true.size // 500)):
            lse = logsumexp(gamma[:, None, None] * s[rows][None], axis=2)  # (grid, items)
            out += (gamma[:, None] * s_true[rows][None] - lse).sum(axis=1)
        return out

    coarse = np.linspace(*TEMPERATURE_RANGE, _COARSE)
    lp = log_posterior(coarse)
    step = coarse[1] - coarse[0]
    where = coarse[lp >= lp.max() - 30.0]
    fine = np.linspace(max(where[0] - step, TEMPERATURE_RANGE[0]),
                       min(where[-1] + step, TEMPERATURE_RANGE[1]), _FINE)  # fmt: skip
    lp = log_posterior(fine)
    density = np.exp(lp - lp.max())
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (density[1:] + density[:-1]))])
    cdf /= cdf[-1]
    rng = np.random.default_rng([int(seed), 0x7E3])
    size = int(np.prod(shape))
    u = (rng.permutation(size) + rng.random(size)) / size
    return np.exp(np.interp(u, cdf, fine)).reshape(shape)


def rank_check(
    reduction: ClassRanks,
    outputs: np.ndarray,
    class_index: np.ndarray,
    first: np.ndarray,
    seed: int = 0,
) -> pd.DataFrame:
    """Posterior predictive check of the reduction, one row per class as the outputs' top.

    The reduction treats every class alike, so among the calibration items whose output
    ranks class ``j`` first, the number whose true class is ``j`` should look like a draw
    from the model: per posterior draw ``t``, ``sum_i Bernoulli(F_t(first | m_i))`` over
    those items. A class the network is better or worse calibrated on than the others
    (class-specific confusions) shows as an observed count far in that distribution's tail.

    Parameters
    ----------
    reduction : the fitted reduction.
    outputs, class_index : the calibration outputs (n, C) and their true classes (0-based).
    first : (S, n) per-draw ``F_t(first | m_i)`` at the calibration items.
    seed : seeds the replicated counts.

    Returns
    -------
    pandas.DataFrame
        ``class``, ``items`` (outputs ranking it first), ``observed`` (of those, how many
        are of that class), ``expected`` (the posterior predictive mean), ``lower`` and
        ``upper`` (its central 95 % interval) and ``p_value`` (two-sided posterior
        predictive: twice the smaller tail, ties counted half), for classes ranked first at
        least once.
    """
    top = reduction.order(outputs)[:, 0]
    rng = np.random.default_rng(seed)
    rows = []
    for j, label in enumerate(reduction.classes):
        mine = np.flatnonzero(top == j)
        if mine.size == 0:
            continue
        f = np.asarray(first, float)[:, mine]  # (S, items)
        replicated = (rng.random(f.shape) < f).sum(axis=1)
        observed = int((np.asarray(class_index)[mine] == j).sum())
        below = np.mean(replicated < observed) + 0.5 * np.mean(replicated == observed)
        rows.append({
            "class": label, "items": int(mine.size), "observed": observed,
            "expected": float(f.sum(axis=1).mean()),
            "lower": float(np.quantile(replicated, 0.025)),
            "upper": float(np.quantile(replicated, 0.975)),
            "p_value": float(min(1.0, 2 * min(below, 1 - below))),
        })  # fmt: skip
    return pd.DataFrame(rows)


def warn_on_rank_check(table: pd.DataFrame, stacklevel: int = 2) -> None:
    """A :class:`ReductionWarning` naming the classes whose :func:`rank_check` p-value is
    below ``0.05 / C`` (Bonferroni over the classes), and what to do."""
    if table.empty:
        return
    bad = table[table["p_value"] < 0.05 / len(table)]
    if len(bad) == 0:
        return
    parts = "; ".join(
        f"{row['class']!r}: right {row['observed']} of {row['items']} times as the top "
        f"class, the model expects {row['expected']:.1f} [{row['lower']:.0f}, "
        f"{row['upper']:.0f}] (p = {row['p_value']:.2g})"
        for _, row in bad.iterrows()
    )
    warnings.warn(
        f"the reduction to ranks treats all classes alike, and the calibration data "
        f"disagree for {len(bad)} class(es): {parts}. The transducer's probabilities for "
        "those classes are off by about that much, and their bands are likely too narrow "
        "(on a simulated network with class-specific confusions the 95 % bands covered "
        "52-78 % of the truths; docs/model.md, 'Many classes'). class_reduction=None "
        "models the outputs themselves, more slowly, and did no better on that network: "
        "compare the two fits' loo(conditional=True), log p(class | output) on the "
        "same scale for both, on your data (see also rank_check())",
        ReductionWarning,
        stacklevel=stacklevel + 1,
    )
