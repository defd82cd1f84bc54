"""Posterior of a classifier's long-run utility per item (theory section 4).

For posterior draw ``t`` of a fitted :class:`~yieldwise.Transducer` and a deployed
decision rule ``delta``, the long-run utility per item is

    u_t = sum_c integral U[delta(y), c] F_t(c, y) dy.

The integral over outputs is turned into a sum over *cells* of the output space, each
with its per-draw class masses ``M_t(c, j)`` (the probability, under draw ``t``, that an
item is of class ``c`` and its output falls in cell ``j``) and one decision:

* a 1-D output recorded on a lattice (vote fractions ``k/200``): one cell per possible
  output value, so the sum is exact;
* a 1-D continuous output: cells of equal predictive mass between predictive quantiles
  ``1e-9`` and ``1 - 1e-9``, plus the two tails; the masses are exact (normal CDF
  differences) and each cell takes the decision of its pooled class masses; the only
  error is a decision that changes inside a cell, bounded by the mass of the cells
  whose decision differs from a neighbour's (and of the tails) times the matrix's
  range of utilities;
* several output dimensions: Monte Carlo over points drawn from the predictive's
  kernels, kernel by kernel in proportion to their posterior-mean weights (stratified),
  weighted by ``F_t / q`` with ``q`` the density they were drawn from, the same points for
  every draw, matrix and rule (common random numbers), and each draw's masses of class
  ``c`` scaled to sum to its exact class mass ``F_t(c)`` (a ratio estimator: the class
  masses are known exactly per draw, so they serve as control variates, and ``U + b``
  then shifts every draw by exactly ``b``, theory 1); the errors reported are stratified
  standard errors (of the posterior mean, and the mean of single draws' own), and an
  :class:`IntegrationWarning` says when the first is not well below the posterior spread;
* a class-reduced transducer (ranks and margins), whose model holds ``F_t(c | y)`` but
  not the law of the whole output: the calibration outputs themselves, each draw
  weighting them by a Bayesian bootstrap (Dirichlet(1, ..., 1) weights, the posterior
  of the output law under a Dirichlet process with a vanishing concentration), so
  ``u_t = sum_n w_tn sum_c U[delta(y_n), c] F_t(c | y_n)`` is exact for each draw's law.

Decisions are cell-wise, so a batch of many utility matrices costs one pass over the
cells per matrix; for two decisions and two classes the augmented rule is a threshold
on ``p(1 | y)`` and every matrix is answered from one cumulative sum.

Each matrix is integrated as ``U - min U`` and ``min U`` added back at the end (theory 1:
``u_t(U + b) = u_t(U) + b``, every draw's masses summing to 1), so that an offset such as
``U + 1e9`` does not put rounding of ``ulp(1e9) ~ 1e-7`` into every draw; the results
carry ``min U`` and ``max U - min U`` as coordinates (``utility_min``,
``utility_spread``), and :func:`long_run_core` keeps the shifted draws for comparisons.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from ._validation import (
    Label,
    caller_stacklevel,
    check_positive_int,
    indices_of,
    is_seed,
    label_values,
)
from .transducer.encoding import misnamed_class_columns
from .utility import MAX_ABS_UTILITY, UtilityMatrix

if TYPE_CHECKING:
    from .transducer import Transducer

__all__ = [
    "IntegrationWarning",
    "long_run_utility",
    "long_run_utility_stan",
    "oracle_utility",
    "value_of_more_data",
]

#: Predictive mass left outside the finite cells of a continuous 1-D output, per tail.
_TAIL = 1e-9
#: Cells of a continuous 1-D output (equal predictive mass each).
DEFAULT_CELLS = 4096
#: Points of the Monte Carlo integral over several output dimensions.
DEFAULT_POINTS = 20_000
#: Adaptive quadrature (a few matrices): starting cells, split factor, rounds, and the
#: posterior-mean mass next to decision boundaries below which refining stops.
_ADAPTIVE_MAX_MATRICES = 32
_ADAPTIVE_START = 256
_ADAPTIVE_SPLIT = 16
_ADAPTIVE_ROUNDS = 4
_ADAPTIVE_ENOUGH = 1e-7
#: Infinite cell edges as Stan data (Phi is exactly 0 or 1 there).
_STAN_INFINITY = 1e12
#: Work-array budget (float64 elements) for matrix batches.
_MAX_ELEMENTS = 20_000_000
#: Monte Carlo ``integration_error_draws``: the mean of single draws' own standard errors
#: over _ERROR_DRAWS evenly spaced draws, fewer (at least _ERROR_DRAWS_MIN) for batches
#: whose draws x matrices x points x classes would pass _ERROR_ELEMENTS (an estimate:
#: a few draws give it to some percent, as each draw's error varies little between draws),
#: and a sample of the points (at least _ERROR_POINTS_MIN) when even those would.
_ERROR_DRAWS = 64
_ERROR_DRAWS_MIN = 4
_ERROR_POINTS_MIN = 1000
_ERROR_ELEMENTS = 4_000_000
#: The Bayesian bootstrap's weights (a class-reduced transducer's output law) are drawn
#: for blocks of this many draws, each block from a generator of its own (seeded by the
#: call's seed, this stream and the block), so that any slice of draws gets the same
#: weights whether the masses are held whole or formed a block of draws at a time.
_BOOTSTRAP_STREAM = 1
_BOOTSTRAP_BLOCK = 64
#: A Monte Carlo standard error of the posterior mean above this share of the posterior sd
#: raises an IntegrationWarning (theory 4: the error "kept well below the posterior
#: spread"). The error shifts the whole posterior (the same points serve every draw), so
#: intervals then cover as if their sd were sqrt(1 + share^2) times too small: at 0.2 the
#: central 50 / 75 / 95 % intervals cover 49.2 / 74.1 / 94.5 %, less than a point lost; at
#: the 0.41 that unstratified points reached on the two-logit study set it was 4 points.
#: Measured at the defaults (docs/model_record.md, "Long-run utility of a class-reduced
#: transducer"): a class-reduced transducer 0 (every calibration output a point); two
#: logits, stratified, 0.03-0.04 for the named matrices and 0.15 for accuracy, whose
#: posterior sd is 0.001 on nearly separable outputs (measured before the ratio estimator
#: of _monte_carlo_cells, 2026-12-06, whose errors are smaller: on a two-score joint fit
#: the same for the accuracy, 0.07 to 0.4 times the old ones for costlier matrices,
#: [[1, -10], [0, 10]] 0.00026 where it was 0.0038, and 0 for a matrix with one best
#: decision everywhere; checked against 400,000 points).
_INTEGRATION_SHARE = 0.2
#: Per-draw masses (float64 elements) held whole, above which a class-reduced
#: transducer's cells form them a block of draws at a time (2 GB: ten classes, 4,000
#: draws and 6,250 calibration items; each sum then spreads the ranks again).
_DENSE_CELLS = 250_000_000


@dataclass(frozen=True)
class _Taken:
    """Where each decision of a batch of matrices is taken: ``masks[k - 1]`` (m, J) bool,
    ``chosen == k`` for decisions ``k = 1 .. D - 1``, and for factored cells ``regions``
    (D, m, K), the kernels summed over the points where each decision is taken (decision
    0's the rest). A rule's utilities and its Monte Carlo errors' class sums both come
    from ``regions`` (through the weights, (K, C) per draw), so the points are contracted
    once per batch: (m, J) x (J, K) per decision beyond the first, where gathering each
    point's gains took a (J, m C) gather and a (K, J) x (J, m C) product (bench_rules at
    10,000 matrices: docs/benchmarks.md)."""

    masks: list[np.ndarray]
    regions: np.ndarray | None


@dataclass
class _Cells:
    """A partition of the output space (or Monte Carlo points), ready for decisions.

    The per-draw class masses ``M_t(c, j)`` are held either whole (``dense``, (S, J, C)),
    or, for kernels fixed across draws, as the product of a (J, K) matrix of the kernels
    at the cells and the draws' (S, K, C) weights: ``M_t(c, j) = sum_k kernels[j, k]
    weights[t, k, c]``. The sums that decisions need over draws and cells (posterior-mean
    masses, a rule's class masses, each matrix's utility per draw) are then taken on the
    weights, never over (S, J, C): for a three-class report's 3,000 draws x 20,000 points
    that array alone is 1.4 GB. Masses that neither fit in memory whole nor factor (a
    class-reduced transducer's with many calibration items) are made a block of draws at a
    time by ``blocks`` (a slice of draws -> their (draws, J, C) masses), and every sum
    is taken block by block.
    """

    proba: np.ndarray  # (J, C): predictive p(c | cell), for augmented decisions
    outputs: np.ndarray  # (J, n_inputs): a representative output of each cell
    # Cells in order along a continuous output: a decision that differs between two
    # neighbours changes inside one of them, and both count towards the error bound.
    neighbours: bool
    uncovered: np.ndarray  # (S,): per-draw mass outside every cell (counted as error)
    method: str  # "lattice", "quadrature" or "monte-carlo"
    bounds: tuple[np.ndarray, np.ndarray] | None = None  # 1-D cells' model-scale edges
    dense: np.ndarray | None = None  # (S, J, C)
    kernels: np.ndarray | None = None  # (J, K)
    weights: np.ndarray | None = None  # (S, K, C)
    blocks: Callable[[slice], np.ndarray] | None = None  # draws -> (draws, J, C) masses
    # Points that are a sample of a finite population (a class-reduced transducer's
    # calibration outputs, of which the points are all or a seeded sample): its size.
    # The Monte Carlo error is then the sample's, with the finite-population correction,
    # 0 when every output is a point (each draw's sum is then exact); None: points from
    # the predictive (an infinite population).
    population: int | None = None
    # Points stratified by kernel (fixed kernels' Monte Carlo points, in kernel order):
    # the number of points of each stratum, for the stratified standard error; None: one
    # stratum (points drawn from the predictive, or a population's sample).
    strata: np.ndarray | None = None
    # Monte Carlo points from the predictive: each draw's exact class masses (S, C), F_t(c)
    # or r_c, to which its estimated masses were scaled (the ratio estimator of
    # _monte_carlo_cells); the standard errors are then those of the ratio. None: cells
    # whose per-draw sums need no scaling (quadrature, lattices, a class-reduced
    # transducer's bootstrapped calibration outputs).
    class_mass: np.ndarray | None = None
    _mean: np.ndarray | None = field(default=None, init=False, repr=False)  # mean_mass()

    @classmethod
    def factored(cls, kernels: np.ndarray, weights: np.ndarray, outputs: np.ndarray,
                 method: str, strata: np.ndarray | None = None,
                 proba: np.ndarray | None = None,
                 class_mass: np.ndarray | None = None) -> _Cells:  # fmt: skip
        """Cells whose masses are ``kernels @ weights[t]`` (no neighbours, nothing
        uncovered: Monte Carlo points); ``proba`` (J, C), the predictive at the cells,
        defaults to the one these masses pool to."""
        if proba is None:  # (J, C): sum over draws, then the kernels
            proba = _normalised(kernels @ weights.sum(axis=0))
        return cls(proba, outputs, False, np.zeros(weights.shape[0]), method, kernels=kernels,
                   weights=weights, strata=strata, class_mass=class_mass)  # fmt: skip

    @classmethod
    def in_blocks(cls, blocks: Callable[[slice], np.ndarray], proba: np.ndarray,
                  mean: np.ndarray, outputs: np.ndarray, draws: int,
                  population: int | None = None) -> _Cells:  # fmt: skip
        """Monte Carlo cells whose masses ``blocks(draws)`` makes a block of draws at a time,
        with the predictive ``proba`` (J, C) and the posterior-mean masses ``mean`` (J, C)
        from the pass that made them (no other pass needed)."""
        cells = cls(proba, outputs, False, np.zeros(draws), "monte-carlo", blocks=blocks,
                    population=population)  # fmt: skip
        cells._mean = mean
        cells._mean.flags.writeable = False
        return cells

    @property
    def blocked(self) -> bool:
        """The masses are made a block of draws at a time (neither held nor factored)."""
        return self.dense is None and self.blocks is not None

    @property
    def shape(self) -> tuple[int, int, int]:
        """(S, J, C)."""
        if self.dense is not None:
            return self.dense.shape
        if self.blocked:
            return (len(self.uncovered), *self.proba.shape)
        assert self.kernels is not None and self.weights is not None
        return self.weights.shape[0], self.kernels.shape[0], self.weights.shape[2]

    @property
    def mass(self) -> np.ndarray:
        """``M_t(c, j)`` (S, J, C), formed whole (the oracle and the binary shortcut
        need every draw's masses at every cell; blocked cells form them anew, uncached)."""
        if self.blocked:
            return np.concatenate([block for _, block in self.draw_blocks()])
        if self.dense is None:
            assert self.kernels is not None and self.weights is not None
            s, k, c = self.weights.shape
            # one (J, K) x (K, S C) product, then laid out (S, J, C)
            flat = self.kernels @ self.weights.transpose(1, 0, 2).reshape(k, s * c)
            self.dense = np.ascontiguousarray(flat.reshape(-1, s, c).transpose(1, 0, 2))
        return self.dense

    def draw_masses(self, draws: slice) -> np.ndarray:
        """``M_t(c, j)`` (draws, J, C) of the draws ``draws`` only."""
        if self.blocked:
            return self.blocks(draws)
        if self.dense is not None or self.kernels is None or self.weights is None:
            return self.mass[draws]
        w = self.weights[draws]
        n, k, c = w.shape
        flat = self.kernels @ w.transpose(1, 0, 2).reshape(k, n * c)  # (J, draws C)
        return flat.reshape(-1, n, c).transpose(1, 0, 2)

    def picked_masses(self, draws: np.ndarray) -> np.ndarray:
        """``M_t(c, j)`` (len(draws), J, C) of the draws whose indices are ``draws``."""
        if self.kernels is not None and self.weights is not None:
            w = self.weights[draws]
            n, k, c = w.shape
            flat = self.kernels @ w.transpose(1, 0, 2).reshape(k, n * c)  # (J, draws C)
            return np.ascontiguousarray(flat.reshape(-1, n, c).transpose(1, 0, 2))
        if self.dense is not None:
            return self.dense[draws]
        return np.concatenate([self.draw_masses(slice(t, t + 1)) for t in draws])

    def draw_blocks(self) -> Iterable[tuple[slice, np.ndarray]]:
        """``(draws, their masses)`` over every draw, in blocks of about _MAX_ELEMENTS."""
        s, j, c = self.shape
        step = max(1, _MAX_ELEMENTS // (j * c))
        for a in range(0, s, step):
            draws = slice(a, min(s, a + step))
            yield draws, self.draw_masses(draws)

    def mean_mass(self) -> np.ndarray:
        """(J, C): the posterior-mean mass of each class in each cell (read-only, formed
        once: dense cells take a pass over (S, J, C), and a rule's utilities and its
        errors both need it; blocked cells have it from :meth:`in_blocks`)."""
        if self._mean is None:
            if self.kernels is not None and self.weights is not None:
                self._mean = self.kernels @ self.weights.mean(axis=0)
            else:
                self._mean = self.mass.mean(axis=0)
            self._mean.flags.writeable = False
        return self._mean

    def class_totals(self) -> np.ndarray:
        """(S, C): each draw's class masses summed over the cells."""
        if self.kernels is not None and self.weights is not None:
            return np.einsum("k,skc->sc", self.kernels.sum(axis=0), self.weights)
        if self.blocked:
            return np.concatenate([block.sum(axis=1) for _, block in self.draw_blocks()])
        return self.mass.sum(axis=1)

    def regions(self, indicator: np.ndarray) -> np.ndarray:
        """(S, D, C): per draw, each class's mass over the cells where ``indicator``
        (J, D) is 1, e.g. where decision ``d`` is taken."""
        if self.kernels is not None and self.weights is not None:
            return np.einsum("dk,skc->sdc", indicator.T @ self.kernels, self.weights)
        if self.blocked:
            return np.concatenate([np.einsum("sjc,jd->sdc", block, indicator)
                                   for _, block in self.draw_blocks()])  # fmt: skip
        return np.einsum("sjc,jd->sdc", self.mass, indicator)

    def taken(self, chosen: np.ndarray, decisions: int) -> _Taken:
        """:class:`_Taken` of the decisions ``chosen`` (m, J) among ``decisions``."""
        masks = [chosen == k for k in range(1, decisions)]
        if self.kernels is None or self.weights is None:
            return _Taken(masks, None)
        k = self.kernels.shape[1]
        regions = np.empty((decisions, len(chosen), k))
        indicator = np.empty(chosen.shape)
        for d, mask in enumerate(masks, start=1):
            np.copyto(indicator, mask)  # as float: one BLAS product per decision
            np.matmul(indicator, self.kernels, out=regions[d])
        regions[0] = self.kernels.sum(axis=0) - regions[1:].sum(axis=0)
        return _Taken(masks, regions)

    def utilities(self, matrices: np.ndarray, chosen: np.ndarray,
                  taken: _Taken | None = None) -> np.ndarray:  # fmt: skip
        """(S, m): ``sum_jc M_t(c, j) U_m[d_m(j), c]``, each matrix's utility per draw of
        its decisions ``chosen`` (m, J). Factored: ``sum_kc weights[t, k, c] G_m[k, c]``
        with ``G_m[k, c] = sum_d U_m[d, c] regions[d, m, k]`` (:meth:`taken`, or
        ``taken`` when the caller has it), one (S, K C) x (K C, m) product. Dense: the
        gains ``U_m[d_m(j), c]`` are gathered as whole rows with one ``np.take``
        (``take_along_axis`` was 4x slower), then (S, J C) x (J C, m)."""
        m, d, c = matrices.shape
        if self.kernels is not None and self.weights is not None:
            regions = (taken if taken is not None else self.taken(chosen, d)).regions
            assert regions is not None
            k = self.kernels.shape[1]
            gains = np.matmul(regions.transpose(1, 2, 0), matrices)  # (m, K, C)
            return self.weights.reshape(self.weights.shape[0], k * c) @ gains.reshape(m, k * c).T
        rows = matrices.reshape(m * d, c)
        offsets = np.arange(m) * d
        j = chosen.shape[1]
        gains = np.take(rows, chosen + offsets[:, None], axis=0).reshape(m, j * c).T
        if self.blocked:
            return np.concatenate([block.reshape(len(block), j * c) @ gains
                                   for _, block in self.draw_blocks()])  # fmt: skip
        return self.mass.reshape(self.mass.shape[0], j * c) @ gains


# ------------------------------------------------------------------ public API
def long_run_utility(
    transducer: Transducer,
    utility: Any,
    rule: str | Callable[[Any], Any] = "augmented",
    *,
    rescale: bool = False,
    prevalences: Any = None,
    threshold: float = 0.5,
    n_cells: int = DEFAULT_CELLS,
    n_points: int = DEFAULT_POINTS,
    seed: int = 0,
) -> xr.DataArray:
    """Posterior draws of the long-run utility per item of a deployed decision rule.

    Parameters
    ----------
    transducer : fitted Transducer
    utility : UtilityMatrix, sequence or mapping of them, or array (matrices, decisions, classes)
        One matrix, or a batch (sharing decisions and classes). An array's columns
        follow ``transducer.classes_`` and its decisions are ``0 .. n - 1``; a 2-D array
        or nested list of numbers is one such matrix.
    rule : "augmented", "standard" or callable
        ``"augmented"``: maximum expected utility with the predictive transducer.
        ``"standard"``: the classifier's own choice, argmax of a vector output or
        ``output > threshold`` for a scalar one, taken as the decision labelled like
        that class. A vector output is read by position: column ``j`` is the output for
        ``transducer.classes_[j]`` (fit with ``class_labels`` in the columns' order).
        When the columns' names name the classes (each name holds exactly one class
        label as a token between non-alphanumeric characters, as ``"p_neg"``,
        ``"logit-pos"``) in another order, ValueError names the columns, ``classes_``
        and the order the names imply; names that name no class (``"score"``, an
        array's ``output_0``, ...) keep the positional reading. A callable maps the
        outputs, a DataFrame (items x the transducer's ``transform_.columns``, on their
        original scale), to one decision label per row.
    rescale : bool
        Rescale each draw to [0, 1] between the worst and best utility achievable with
        that draw's class frequencies (theory section 1), to compare across matrices.
    prevalences : array-like, optional
        Deployment class frequencies differing from the calibration set's (generative
        mode, theory 3.2): both the decisions and the long-run utility use them.
    threshold : float
        The standard rule's threshold for a scalar output.
    n_cells, n_points : int
        Cells of a continuous 1-D output; Monte Carlo points for several dimensions (for a
        class-reduced transducer, the calibration outputs are the points: at most
        ``n_points`` of them, a seeded sample when there are more).
    seed : int
        Seed of the Monte Carlo points (several dimensions only).

    Returns
    -------
    xarray.DataArray
        Dims ``(chain, draw)`` plus ``matrix`` for a batch. Coordinates, per matrix:
        ``integration_error`` bounds the error of the posterior mean, and
        ``integration_error_draws`` the mean absolute error of single draws (lattice:
        both 0; 1-D quadrature: bounds, from the cells where the decision changes, and
        the tails). Several dimensions (Monte Carlo, each draw's class masses scaled to
        their exact sums ``F_t(c)``: a ratio estimator, whose known class masses act as
        control variates, so that ``U + b`` adds exactly ``b`` to every draw): estimates,
        not bounds, the standard error of the posterior mean and the mean over draws of
        single draws' own standard errors (a draw's mean absolute error is about 0.8 of
        its standard error). ``utility_min`` and ``utility_spread``: each matrix's least
        entry ``min U`` and range ``max U - min U`` (theory 1; the scale of
        :func:`yieldwise.compare`'s ties, ``TIE_RTOL * utility_spread``; on rescaled draws
        too, where they describe the matrix, not the draws). Each matrix is integrated as
        ``U - min U`` and ``min U`` added back (theory 1: ``u_t(U + b) = u_t(U) + b``,
        every draw's masses summing to 1), so that an offset as large as ``U + 1e9``
        costs the draws no more than rounding at their own magnitude. Attribute
        ``integration`` names the method.

    Examples
    --------
    >>> import numpy as np, yieldwise as yw
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 2, 300)
    >>> scores = rng.beta(2 + 3 * labels, 5 - 3 * labels)
    >>> t = yw.Transducer(chains=2, warmup=300, draws=300, seed=1, progress=False)
    >>> t = t.fit(scores, labels)
    >>> u = yw.long_run_utility(t, yw.UtilityMatrix([[1, 0], [0, 1]]))  # accuracy
    >>> spread = float(u.std())  # posterior sd of the long-run accuracy
    >>> u.dims, bool(0.6 < float(u.mean()) < 1), bool(float(u.integration_error) < spread / 10)
    (('chain', 'draw'), True, True)
    """
    shifted, rescaled = long_run_core(
        transducer, utility, rule, prevalences, threshold, n_cells, n_points, seed, rescale
    )
    return rescaled if rescaled is not None else _unshifted(shifted)


def long_run_core(
    transducer: Transducer, utility: Any, rule: Any, prevalences: Any, threshold: float,
    n_cells: int, n_points: int, seed: int, rescale: bool = True,
) -> tuple[xr.DataArray, xr.DataArray | None]:  # fmt: skip
    """(shifted, rescaled or None) long-run utilities, from one set of cells.

    ``shifted`` holds the draws of the long-run utility of ``U - min U``, each matrix
    shifted by its own least entry, with coordinates ``utility_min`` (``min U``) and
    ``utility_spread`` (``max U - min U``) besides the integration errors;
    :func:`_unshifted` adds ``utility_min`` back, the long-run utility of ``U`` (theory
    1: ``u_t(U + b) = u_t(U) + b``, every draw's masses summing to 1). Differences of
    draws, and so ties within ``TIE_RTOL * (max U - min U)``, must be read on ``shifted``:
    a draw of ``U + 1e9`` is ``small + 1e9``, which has lost the digits below
    ``ulp(1e9) ~ 1e-7`` (:func:`yieldwise.compare` keeps the shifted draws). The decisions
    and the rescaled draws are computed from the shifted matrices too (both invariant
    under a shift, theory 1, so this is only more exact). Mass outside every cell (an
    unbounded lattice's tails, counted in the integration error) is thereby valued at
    ``min U``, where it was valued at 0.
    """
    _check_threshold(threshold)
    matrices, decisions, names = _as_matrices(utility, transducer.classes_)
    matrices, bounds = shifted_matrices(matrices)
    r = transducer.check_prevalences(prevalences)
    decide = None
    if len(matrices) <= _ADAPTIVE_MAX_MATRICES:
        decide = _decider(rule, matrices, decisions, transducer, threshold)
    cells = _cells(transducer, r, n_cells, n_points, seed, decide)
    values, error = _integrate(cells, matrices, decisions, rule, transducer, threshold)
    if cells.method == "monte-carlo":
        _check_integration(values, error[0], names, matrices)
    name = "long_run_utility"
    shifted = _as_dataarray(values, error, names, transducer, cells.method, name, bounds)
    if not rescale:
        return shifted, None
    values, error = _rescale(values, error, matrices, cells, transducer, r)
    return shifted, _as_dataarray(values, error, names, transducer, cells.method, name, bounds)


def shifted_matrices(matrices: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """(``U - min U`` per matrix (m, D, C), (``min U`` (m,), ``max U - min U`` (m,))): the
    matrices long-run utilities are integrated with, and what :func:`_unshifted` adds
    back and compare's ties scale with (theory 1). The one place the shift is computed:
    :func:`yieldwise.rules.standard_vs_augmented` integrates its fixed rule on the same
    shifted matrices."""
    flat = matrices.reshape(len(matrices), -1)
    low = flat.min(axis=1)
    return matrices - low[:, None, None], (low, flat.max(axis=1) - low)


def _unshifted(shifted: xr.DataArray) -> xr.DataArray:
    """Draws of the long-run utility of ``U - min U`` (:func:`long_run_core`) plus their
    coordinate ``utility_min``: the long-run utility of ``U`` (theory 1), with the same
    coordinates, name and attributes. In place (no second array of draws x matrices):
    ``shifted`` is not to be read after."""
    low = np.asarray(shifted["utility_min"].values, dtype=float)  # (m,) along the last dim, or ()
    np.add(shifted.data, low, out=shifted.data)
    return shifted


class IntegrationWarning(UserWarning):
    """A long-run utility whose integration error is not well below its posterior spread
    (theory 4)."""


def _check_integration(
    values: np.ndarray, error: np.ndarray, names: list[Any] | None, matrices: np.ndarray
) -> None:
    """IntegrationWarning where a Monte Carlo standard error ``error`` (m,) of the
    posterior mean exceeds _INTEGRATION_SHARE (a fifth) of the posterior sd of ``values``
    (S, m).

    Monte Carlo only: its standard error estimates the actual error, while quadrature
    reports bounds, which measured 20 to 100 times the actual errors (tests/test_long_run.py,
    the bounds against adaptive answers), so a bound near the spread is no evidence of an
    error near it. Errors below 1e-9 of a matrix's range of utilities are never reported.
    """
    if values.shape[0] < 2:
        return
    sd = values.std(axis=0, ddof=1)
    share = np.divide(error, sd, out=np.full(sd.shape, np.inf), where=sd > 0)
    share[error <= 1e-9 * np.ptp(matrices.reshape(len(matrices), -1), axis=1)] = 0.0
    over = share > _INTEGRATION_SHARE
    if not over.any():
        return
    worst = int(np.argmax(share))
    label = repr(names[worst]) if names is not None else str(worst)
    warnings.warn(
        f"the integration error of {int(over.sum())} of {len(sd)} long-run utilities is "
        f"above {_INTEGRATION_SHARE:.0%} of its posterior sd (the largest share: matrix "
        f"{label}, error {error[worst]:.3g} against a posterior sd of {sd[worst]:.3g}); "
        "theory 4 asks the error to stay well below the spread: pass a larger n_points "
        "(the Monte Carlo error falls as 1 / sqrt(n_points))",
        IntegrationWarning,
        stacklevel=caller_stacklevel(),
    )


def long_run_utility_stan(
    transducer: Transducer,
    utility: Any,
    rule: str | Callable[[Any], Any] = "augmented",
    *,
    threshold: float = 0.5,
    n_cells: int = DEFAULT_CELLS,
    backend: str = "auto",
) -> xr.DataArray:
    """:func:`long_run_utility` with the sums over cells done by Stan (1-D outputs).

    The cells and each cell's decision are those of the numpy path; the per-draw class
    masses and the utility sums are computed by ``stan/long_run_utility.stan`` in
    generated quantities. This is an independent check of the numpy implementation,
    which stays the default (utilities change often and need no Stan run). As there,
    each matrix is summed as ``U - min U`` and ``min U`` added back (theory 1), and the
    result carries the coordinates ``utility_min`` and ``utility_spread``.
    """
    from .backends import get_backend, stan_file

    if transducer.transform_.model_dims != 1:
        raise ValueError(
            "long_run_utility_stan handles 1-D outputs; this transducer has "
            f"{transducer.transform_.model_dims} output dimensions"
        )
    _check_threshold(threshold)
    matrices, decisions, names = _as_matrices(utility, transducer.classes_)
    matrices, bounds = shifted_matrices(matrices)
    decide = _decider(rule, matrices, decisions, transducer, threshold)
    small = len(matrices) <= _ADAPTIVE_MAX_MATRICES
    # one output dimension (checked above): quadrature cells, no Monte Carlo points
    cells = _cells(transducer, None, n_cells, 1, 0, decide if small else None)
    assert cells.bounds is not None  # 1-D cells always carry their edges
    lower, upper = (np.clip(b, -_STAN_INFINITY, _STAN_INFINITY) for b in cells.bounds)
    chosen = np.broadcast_to(decide(cells), (len(matrices), len(lower)))
    posterior = transducer.posterior
    data = {
        "S": posterior.n_draws, "K": posterior.n_components,
        "C": len(transducer.classes_), "J": len(lower), "M": len(matrices),
        "Dd": matrices.shape[1], "w": posterior.w, "alpha": posterior.alpha,
        "mu": posterior.mu[:, :, 0], "sigma": posterior.sigma[:, :, 0],
        "cell_lower": lower, "cell_upper": upper, "decision": chosen + 1, "utility": matrices,
    }  # fmt: skip
    program = get_backend(backend).compile(stan_file("long_run_utility"))
    # a copy of the backend's draws: min U is added to it in place (_unshifted)
    values = np.array(program.generate(data)["u"], float).reshape(data["S"], data["M"])
    error = np.zeros((2, len(matrices)))  # the Stan check reports no error of its own
    out = _as_dataarray(values, error, names, transducer, cells.method, "long_run_utility", bounds)
    out.attrs["engine"] = f"stan ({program.backend_name})"
    return _unshifted(out)


def oracle_utility(
    transducer: Transducer,
    utility: Any,
    *,
    rescale: bool = False,
    prevalences: Any = None,
    n_cells: int = DEFAULT_CELLS,
    n_points: int = DEFAULT_POINTS,
    seed: int = 0,
) -> xr.DataArray:
    """Per draw, ``sum_c integral max_i U[i, c] F_t(c, y) dy``: deciding with ``F_t`` itself.

    What a user who knew draw ``t``'s transducer exactly would get; its excess over
    :func:`long_run_utility` is the value of more calibration data (theory section 4).
    Coordinates as :func:`long_run_utility`'s (``utility_min`` and ``utility_spread``
    too: each matrix is integrated as ``U - min U``, theory 1).
    """
    out = _oracle_core(transducer, utility, rescale, prevalences, n_cells, n_points, seed)
    return out if rescale else _unshifted(out)


def _oracle_core(
    transducer: Transducer, utility: Any, rescale: bool, prevalences: Any, n_cells: int,
    n_points: int, seed: int,
) -> xr.DataArray:  # fmt: skip
    """The oracle's rescaled draws, or (``rescale`` False) its draws of ``U - min U``, to
    which :func:`_unshifted` adds ``min U`` back (as :func:`long_run_core`'s)."""
    matrices, _, names = _as_matrices(utility, transducer.classes_)
    matrices, bounds = shifted_matrices(matrices)
    r = transducer.check_prevalences(prevalences)
    cells = _cells(transducer, r, n_cells, n_points, seed)
    values, error = _oracle(cells, matrices)
    if rescale:
        values, error = _rescale(values, error, matrices, cells, transducer, r)
    return _as_dataarray(values, error, names, transducer, cells.method, "oracle_utility",
                         bounds)  # fmt: skip


def value_of_more_data(
    transducer: Transducer,
    utility: Any,
    rule: str | Callable[[Any], Any] = "augmented",
    **options: Any,
) -> xr.Dataset:
    """``deployed`` and ``oracle`` long-run utilities per draw, and their ``difference``.

    Also ``deployed_integration_error`` and ``oracle_integration_error`` (and their
    ``_draws`` counterparts, see :func:`long_run_utility`), and the coordinates
    ``utility_min`` and ``utility_spread`` of each matrix.

    The difference (never negative for the augmented rule, up to integration error) is
    how much per item more calibration data could still gain; it is taken between the
    draws of ``U - min U`` (theory 1), before ``min U`` is added back, so that a large
    offset of ``U`` does not round it away. Options as for :func:`long_run_utility`.
    """
    known = ("rescale", "prevalences", "threshold", "n_cells", "n_points", "seed")
    unknown = [k for k in options if k not in known]
    if unknown:
        raise TypeError(
            f"value_of_more_data got the options {unknown}, which long_run_utility does not "
            f"take; its options are {list(known)}"
        )
    return _value_of_more_data(transducer, utility, rule, **options)


def _value_of_more_data(
    transducer: Transducer, utility: Any, rule: Any, *, rescale: bool = False,
    prevalences: Any = None, threshold: float = 0.5, n_cells: int = DEFAULT_CELLS,
    n_points: int = DEFAULT_POINTS, seed: int = 0,
) -> xr.Dataset:  # fmt: skip
    """:func:`value_of_more_data` with :func:`long_run_utility`'s options by name."""
    integration = (n_cells, n_points, seed)
    shifted, rescaled = long_run_core(
        transducer, utility, rule, prevalences, threshold, *integration, rescale
    )
    deployed = shifted if rescaled is None else rescaled
    oracle = _oracle_core(transducer, utility, rescale, prevalences, *integration)
    errors = {
        f"{name}_{kind}": part[kind].reset_coords(drop=True)
        for name, part in (("deployed", deployed), ("oracle", oracle))
        for kind in ("integration_error", "integration_error_draws")
    }
    difference = (oracle - deployed).reset_coords(drop=True)  # shifted (or rescaled) draws
    if not rescale:
        deployed, oracle = _unshifted(deployed), _unshifted(oracle)
    scales = {k: deployed[k].variable for k in ("utility_min", "utility_spread")}
    return xr.Dataset(
        {"deployed": deployed.reset_coords(drop=True), "oracle": oracle.reset_coords(drop=True),
         "difference": difference, **errors},
        coords=scales, attrs={"integration": deployed.attrs["integration"]},
    )  # fmt: skip


# ------------------------------------------------------------- utility batches
def _as_matrices(
    utility: Any, classes: tuple[Label, ...]
) -> tuple[np.ndarray, tuple[Label, ...], list[Any] | None]:
    """(matrices (m, D, C) in the transducer's class order, decision labels, names or None)."""
    if isinstance(utility, UtilityMatrix):
        return _aligned([utility], classes)[None, 0], utility.decisions, None
    if isinstance(utility, Mapping):
        if not utility:
            raise ValueError("utility is an empty mapping; give at least one UtilityMatrix")
        stacked = _aligned(list(utility.values()), classes, [f"utility[{k!r}]" for k in utility])
        return stacked, next(iter(utility.values())).decisions, list(utility.keys())
    if isinstance(utility, np.ndarray) and utility.dtype != object and utility.ndim == 2:
        return _as_matrices(utility.tolist(), classes)  # one matrix (the nested lists below)
    if isinstance(utility, np.ndarray) and utility.dtype != object:
        array = np.asarray(utility, dtype=float)
        if array.ndim != 3 or array.shape[2] != len(classes) or array.shape[1] < 2:
            raise ValueError(
                f"utility as an array must have shape (matrices, decisions >= 2, "
                f"{len(classes)} classes), found {array.shape}"
            )
        if array.shape[0] == 0:
            raise ValueError(
                f"utility is an empty batch (an array of shape {array.shape}); give at least "
                "one matrix"
            )
        if not np.isfinite(array).all():
            raise ValueError("utility array has NaN or infinite entries")
        largest = np.abs(array).reshape(len(array), -1).max(axis=1)
        if (largest > MAX_ABS_UTILITY).any():
            bad = int(np.argmax(largest > MAX_ABS_UTILITY))
            raise ValueError(
                f"utility array: values must lie within +-{MAX_ABS_UTILITY:.0e} (utilities are "
                f"squared and summed in the summaries), found {float(largest[bad])!r} in "
                f"matrix {bad}; rescale the matrix: a * U + b with a > 0 ranks every decision "
                "the same"
            )
        return array, tuple(range(array.shape[1])), list(range(array.shape[0]))
    if isinstance(utility, Iterable) and not isinstance(utility, str):
        items = list(utility)
        if not items:
            raise ValueError(
                f"utility is an empty batch (an empty {type(utility).__name__}); give at "
                "least one UtilityMatrix"
            )
        if items and not any(isinstance(u, UtilityMatrix) for u in items):
            try:  # plain numbers, as nested lists: one matrix, or a batch as the array above
                array = np.asarray(items, dtype=float)
            except (TypeError, ValueError):
                array = None
            if array is not None and array.ndim == 2:
                if array.shape[1] != len(classes) or array.shape[0] < 2:
                    raise ValueError(
                        f"utility as a nested list must have one row per decision (at least "
                        f"2) and one column per class of the transducer ({len(classes)}, in "
                        f"its order {list(classes)}), found shape {array.shape}"
                    )
                try:
                    one = UtilityMatrix(array, classes=list(classes))
                except ValueError as error:
                    raise ValueError(f"utility: {error}") from None
                return _aligned([one], classes)[None, 0], one.decisions, None
            if array is not None and array.ndim == 3:
                return _as_matrices(array, classes)
            raise TypeError(
                "utility must be a UtilityMatrix, a non-empty sequence or mapping of them, "
                f"or an array (matrices, decisions, classes); found {type(utility).__name__}"
            )
        return _aligned(items, classes), items[0].decisions, list(range(len(items)))
    raise TypeError(
        "utility must be a UtilityMatrix, a sequence or mapping of them, or an array "
        f"(matrices, decisions, classes); found {type(utility).__name__}"
    )


def _aligned(
    items: list[UtilityMatrix], classes: tuple[Label, ...], names: list[str] | None = None
) -> np.ndarray:
    """The matrices ``items`` in the transducer's class order, stacked; ``names`` say how
    the user's argument names each (default ``utility[i]``)."""
    names = names or [f"utility[{i}]" for i in range(len(items))]
    for name, u in zip(names, items, strict=True):
        if not isinstance(u, UtilityMatrix):  # a batch holds matrices, not nested lists
            raise TypeError(
                f"{name}: expected a UtilityMatrix (UtilityMatrix(values, decisions=..., "
                f"classes=...)), found {type(u).__name__}; a batch of matrices, as a "
                "sequence or mapping, holds UtilityMatrix objects (plain numbers only as "
                "one array of shape (matrices, decisions, classes))"
            )
    first = items[0]
    for i, u in enumerate(items):
        if set(u.classes) != set(classes):
            raise ValueError(
                f"utility{f' matrix {i}' if len(items) > 1 else ''} has classes "
                f"{list(u.classes)}, the transducer {list(classes)}; give the matrix the "
                "transducer's class labels (UtilityMatrix(values, classes=...))"
            )
        if u.decisions != first.decisions and set(u.decisions) == set(first.decisions):
            items[i] = u = u.reindex(decisions=list(first.decisions))  # the same, reordered
        if u.decisions != first.decisions:
            raise ValueError(
                f"utility matrices of one batch must share their decisions: matrix {i} has "
                f"{list(u.decisions)}, matrix 0 {list(first.decisions)}"
            )
    return np.stack([u.reindex(classes=list(classes)).values for u in items])


# ----------------------------------------------------------------------- cells
def _cells(
    transducer: Transducer, r: np.ndarray | None, n_cells: int, n_points: int, seed: int,
    decide: Callable[[_Cells], np.ndarray] | None = None,
) -> _Cells:  # fmt: skip
    transducer.check_fitted()
    # every option checked whichever integration this transducer takes (one set of
    # rules: a bad value is refused even where it would go unused)
    n_cells = check_positive_int(n_cells, "n_cells")
    n_points = check_positive_int(n_points, "n_points")
    if not is_seed(seed):
        raise ValueError(f"seed must be a non-negative integer, found {seed!r}")
    transform = transducer.transform_
    if transducer.reduction_ is not None:
        return _calibration_cells(transducer, n_points, seed)
    if transform.model_dims > 1:
        return _monte_carlo_cells(transducer, r, n_points, seed)
    if transform.line_resolution is not None:
        return _line_lattice_cells(transducer, r, transform.line_resolution)
    h = transform.resolution[0]
    if h is not None:
        return _lattice_cells(transducer, r, float(h))
    return _quadrature_cells(transducer, r, n_cells, decide)


def _lattice_cells(transducer: Transducer, r, h: float) -> _Cells:
    from .transducer.encoding import SUPPORT

    transform = transducer.transform_
    observed = transducer.posterior_.observed_data["outputs"].values[:, 0]
    low, high = SUPPORT[transform.kind[0]]
    if not (np.isfinite(low) and np.isfinite(high)):
        # An unbounded lattice: cover the predictive range, count the rest as error.
        z = transducer.posterior.predictive_quantiles(np.array([_TAIL, 1 - _TAIL]))
        span = transform.inverse(z[:, None])[:, 0]
        low = max(low, float(span.min())) if np.isfinite(low) else float(span.min())
        high = min(high, float(span.max())) if np.isfinite(high) else float(span.max())
    offset = observed[0]
    first = np.ceil((low - offset) / h - 1e-9)
    last = np.floor((high - offset) / h + 1e-9)
    if last - first > 1_000_000:
        raise ValueError(
            f"the output lattice (resolution {h}) has {last - first:.0f} values over the "
            "predictive range; refit with resolution=None to treat the output as continuous"
        )
    values = (offset + h * np.arange(first, last + 1))[:, None]
    values = np.clip(values, *SUPPORT[transform.kind[0]])
    return _lattice_masses(transducer, r, values)


def _line_lattice_cells(transducer: Transducer, r, h: float) -> _Cells:
    """Cells of outputs modelled on a line as a lattice of positions, ``(k + 1/2) h``
    (two distinct outputs of two or more coordinates, ``encoding.few_points_on_a_line``):
    the lattice points over the predictive range of positions, mapped back to outputs."""
    z = transducer.posterior.predictive_quantiles(np.array([_TAIL, 1 - _TAIL]))
    first, last = np.floor(float(z.min()) / h), np.floor(float(z.max()) / h)
    if last - first > 1_000_000:
        raise ValueError(
            f"the lattice on the outputs' line (spacing {h}) has {last - first:.0f} values "
            "over the predictive range; refit with resolution=None"
        )
    positions = (np.arange(first, last + 1) + 0.5) * h
    return _lattice_masses(transducer, r, transducer.transform_.inverse(positions[:, None]))


def _lattice_masses(transducer: Transducer, r, values: np.ndarray) -> _Cells:
    """The cells of one censored dimension's lattice ``values`` (outputs), with their
    masses per draw and class."""
    lower, upper, _ = transducer.transform_.intervals(values)
    # One dimension, all censored: normal CDF differences (linear scale is exact enough
    # for sums of masses, and several times faster than the log-scale kernels).
    posterior = transducer.posterior
    mass = posterior.bin_masses(lower[:, 0], upper[:, 0], posterior.component_class_weights(r))
    proba = _pooled(mass)
    # Every draw's weighted joint has total mass 1, or sum_c r_c with prevalences.
    total = 1.0 if r is None else float(np.sum(r))
    uncovered = np.clip(1.0 - mass.sum(axis=(1, 2)) / total, 0.0, None)
    bounds = (lower[:, 0], upper[:, 0])
    return _Cells(proba, values, False, uncovered, "lattice", bounds, dense=mass)


def _quadrature_cells(
    transducer: Transducer, r, n_cells: int, decide: Callable[[_Cells], np.ndarray] | None
) -> _Cells:
    """Cells of a continuous 1-D output.

    With ``decide`` (a few matrices): start from ``_ADAPTIVE_START`` equal-mass cells and
    split every cell whose decision differs from a neighbour's, for any matrix, into
    ``_ADAPTIVE_SPLIT`` cells, a few rounds over; the mass at stake shrinks by that
    factor per round, and only the new cells' masses are computed.
    Without (large batches, where every cell is next to some matrix's boundary):
    ``n_cells`` equal-mass cells.
    """
    probs = np.linspace(_TAIL, 1 - _TAIL, (n_cells if decide is None else _ADAPTIVE_START) + 1)
    posterior = transducer.posterior
    inner = np.maximum.accumulate(posterior.predictive_quantiles(probs))
    weights = posterior.component_class_weights(r)
    mass = posterior.bin_masses(np.concatenate([[-np.inf], inner, [np.inf]]), weights=weights)
    cells = _quadrature(transducer, inner, mass)
    if decide is None:
        return cells
    fractions = np.linspace(0, 1, _ADAPTIVE_SPLIT + 1)
    for _ in range(_ADAPTIVE_ROUNDS):
        chosen = decide(cells)  # (matrices, cells)
        change = (chosen[:, 1:] != chosen[:, :-1]).any(axis=0)
        mixed = np.zeros(chosen.shape[1], dtype=bool)
        mixed[:-1] |= change
        mixed[1:] |= change
        mixed[[0, -1]] = False  # the tails are not split: their mass counts as error
        if not mixed.any() or mass[:, mixed].sum(axis=(1, 2)).mean() < _ADAPTIVE_ENOUGH:
            break
        j = np.flatnonzero(mixed)  # cell j lies between inner[j - 1] and inner[j]
        sub = inner[j - 1, None] + fractions[None, :] * (inner[j] - inner[j - 1])[:, None]
        sub_mass = posterior.bin_masses(sub[:, :-1].ravel(), sub[:, 1:].ravel(), weights)
        pieces, previous = [], 0
        for n, cell in enumerate(j):  # a few cells per decision boundary
            pieces += [
                mass[:, previous:cell],
                sub_mass[:, n * _ADAPTIVE_SPLIT : (n + 1) * _ADAPTIVE_SPLIT],
            ]
            previous = cell + 1
        mass = np.concatenate([*pieces, mass[:, previous:]], axis=1)
        inner = np.sort(np.concatenate([inner, sub[:, 1:-1].ravel()]))
        cells = _quadrature(transducer, inner, mass)
    return cells


def _quadrature(transducer: Transducer, inner: np.ndarray, mass: np.ndarray) -> _Cells:
    """The cells between consecutive ``inner`` edges and the two tails, with their masses."""
    mid = np.concatenate([[inner[0]], 0.5 * (inner[:-1] + inner[1:]), [inner[-1]]])
    return _Cells(
        dense=mass,
        proba=_pooled(mass),
        outputs=transducer.transform_.inverse(mid[:, None]),
        neighbours=True,
        # The tails' decisions are known only at their finite end: count their mass as error.
        uncovered=mass[:, [0, -1]].sum(axis=(1, 2)),
        method="quadrature",
        bounds=(np.concatenate([[-np.inf], inner]), np.concatenate([inner, [np.inf]])),
    )


def _monte_carlo_cells(transducer: Transducer, r, n_points: int, seed: int) -> _Cells:
    """Points from the predictive's kernels, each a cell of mass ``F_t(c, y) / (M q(y))``
    with ``q`` the density they were drawn from, then scaled per draw and class (below).

    Fixed kernels (model 2): stratified by kernel, ``ceil(M wbar_k)`` points from kernel
    ``k`` (:meth:`TransducerPosterior.sample_kernels`), ``q(y) = sum_k (M_k / M)
    kernel_k(y)``, and the standard error is the stratified one (the points' variance
    within each kernel). Kernels that move between draws: points drawn from the
    predictive itself, ``q = p(y | D)``.

    The ratio (self-normalised) estimator: draw ``t``'s masses of class ``c`` are scaled
    so that their sum over the points is the draw's exact class mass ``F_t(c) = sum_k
    w_tk alpha_tkc`` (``r_c`` with prevalences ``r``), known without integrating. The
    importance-weighted sum alone is ``F_t(c) (1 + eps_tc)`` with ``eps_tc`` the points'
    noise, different in every draw: ``U + b`` then added ``b sum_c F_t(c) eps_tc`` to
    draw ``t`` (at ``b = 100`` the posterior sd of a joint fit's accuracy grew 6.6
    times), where theory 1 has ``u_t(U + b) = u_t(U) + b`` exactly. Scaled, each draw's
    utility is ``sum_c F_t(c) v_tc`` with ``v_tc`` the points' estimate of the mean
    utility of class ``c``: shifting ``U`` shifts every draw by ``b`` exactly, rescaled
    utilities lie in [0, 1], and the known class masses act as control variates (the
    per-draw error of a two-score joint fit's accuracy fell from 0.00103 to 0.00072).
    The decisions use the predictive ``p(c | y)`` at the points, exact (unscaled).
    """
    transform = transducer.transform_
    rng = np.random.default_rng(seed)
    posterior = transducer.posterior
    if posterior.fixed_kernels:
        z, counts = posterior.sample_kernels(n_points, rng, r)
    else:
        z, counts = posterior.sample_predictive(n_points, rng, r), None
    outputs = _snap_to_lattice(transform.inverse(z), transducer)
    lower, upper, censored = transform.intervals(outputs)
    weights = posterior.component_class_weights(r)  # (S, K, C)
    exact = weights.sum(axis=1)  # (S, C): F_t(c), or r_c with prevalences
    if counts is not None:
        kernels = posterior.scaled_kernels(lower, upper, censored)
        assert kernels is not None
        # The masses stay factored, kernels (M, K) times the draws' (weighted) joint
        # weights (S, K, C), each point's kernels divided by M q(y).
        total = int(counts.sum())
        q = kernels @ (counts / total)  # (M,), on the kernels' per-row scale
        kernels /= (q * total)[:, None]
        proba = _normalised(kernels @ weights.sum(axis=0))
        estimated = np.einsum("k,skc->sc", kernels.sum(axis=0), weights)
        weights = weights * _scaling(exact, estimated)[:, None, :]
        return _Cells.factored(kernels, weights, outputs, "monte-carlo",
                               strata=counts[counts > 0], proba=proba,
                               class_mass=exact)  # fmt: skip
    # (weighted) G_t(c, y) up to one factor per point, which the ratio below cancels;
    # with prevalences r the weights are F_t(y | c) r_c = G_t(c, y) r_c / F_t(c).
    scaled = posterior.scaled_joint(lower, upper, censored, prevalences=r)
    # p(y | D) = mean_t sum_c (weighted) G_t(c, y): the density the points were drawn from.
    q = scaled.sum(axis=2, keepdims=True).mean(axis=0, keepdims=True)
    scaled /= q * n_points
    mass = scaled
    proba = _pooled(mass)
    mass *= _scaling(exact, mass.sum(axis=1))[:, None, :]
    return _Cells(proba, outputs, False, np.zeros(mass.shape[0]), "monte-carlo", dense=mass,
                  class_mass=exact)  # fmt: skip


def _scaling(exact: np.ndarray, estimated: np.ndarray) -> np.ndarray:
    """(S, C) ``exact / estimated`` class masses (1 where nothing was estimated)."""
    return np.divide(exact, estimated, out=np.ones_like(exact), where=estimated > 0)


def _calibration_cells(transducer: Transducer, n_points: int, seed: int) -> _Cells:
    """A class-reduced transducer's cells: its calibration outputs, Bayesian-bootstrapped.

    The reduced model gives ``F_t(c | y)`` (the rank's probability given the margin,
    spread over the classes as :meth:`ClassRanks.expand
    <yieldwise.transducer.reduction.ClassRanks.expand>` spreads it, at each draw's
    temperature of the others' share: theory 3.2) and the law of the margin, not the law
    of the whole output. So the output law is the calibration outputs', drawn for each
    draw from its posterior under a Dirichlet process with a vanishing concentration, the
    Bayesian bootstrap: point ``n`` carries ``M_t(c, n) = w_tn F_t(c | y_n)`` with
    ``w_t ~ Dirichlet(1, ..., 1)``, and each draw's sum over the points is its long-run
    utility exactly. The decisions are the predictive transducer's at each point (theory
    3.2's exchangeable ``p(c | y)``, as ``predict_proba``).

    Until 2026-12-05 point ``n`` carried ``F_t(c, y_n) / (N p(m_n | D))``, the model's
    margin law by importance weights. Their sum over the points is not 1 for a single
    draw (its standard deviation was 1.4-1.7 % on the ten-class study's 300-item sets),
    noise that scaled every draw's utility and made the long-run intervals twice as wide
    as the errors (the 50 % interval covered 86 % of 80 checks, the bootstrap 54 %;
    docs/model_record.md, "Long-run utility of a class-reduced transducer").
    With more than ``n_points`` calibration outputs, a seeded sample of ``n_points`` of
    them is bootstrapped (the work arrays hold draws x points x classes numbers), and the
    error reported is the sample's Monte Carlo standard error.
    """
    reduced, reduction = transducer.reduced_, transducer.reduction_
    assert reduced is not None and reduction is not None
    outputs = transducer.calibration_outputs()
    population = outputs.shape[0]
    if population > n_points:
        pick = np.random.default_rng(seed).choice(population, n_points, replace=False)
        outputs = outputs[np.sort(pick)]
    order = reduction.order(outputs)
    temperature = transducer.others_temperature_
    s, n, c = reduced.posterior.n_draws, outputs.shape[0], len(transducer.classes_)
    joint = transducer.reduced_joint_by_draws(outputs)  # the outputs' kernels made once

    def spread(draws: slice) -> np.ndarray:
        """The draws' joint of class and margin (draws, N, C), up to one scale per item
        (the same in every block: reduced_joint's)."""
        share = reduction.shares(outputs, temperature[draws], order)
        return reduction.expand(outputs, joint(draws), share, order)

    def inverse_totals(block: np.ndarray) -> np.ndarray:
        """(draws, N) ``1 / sum_c`` of the draws' joint ``block``, so that ``block *
        inverse`` is ``F_t(c | y_n)``; a draw whose joint underflows at a point takes
        uniform class probabilities there (its row of ``block`` set to 1, in place)."""
        total = block.sum(axis=2)
        inverse = np.divide(1.0, total, out=np.zeros_like(total), where=total > 0)
        if not total.all():
            block[total == 0] = 1.0
            inverse[total == 0] = 1.0 / c
        return inverse

    def masses(draws: slice) -> np.ndarray:
        """``w_tn F_t(c | y_n)`` (draws, N, C)."""
        block = spread(draws)
        inverse = inverse_totals(block) * _bootstrap_weights(seed, draws, n)
        block *= inverse[:, :, None]
        return block

    # the ranks' joint made and spread over the classes a block of draws at a time: whole,
    # the others' shares and the spreading's work arrays made the peak 3.9 times the
    # masses (2,381 MiB for 610; ten classes, 2,000 items, 4,000 draws), and the joint of
    # the ranks with its pair weights 3 times its own 1.9 GB at 20,000 items
    step = max(1, _MAX_ELEMENTS // (n * c))
    pooled = np.zeros((n, c))  # sum over draws of the joint: the predictive p(c | y_n)
    mean = np.zeros((n, c))  # sum over draws of F_t(c | y_n)
    dense = np.empty((s, n, c)) if s * n * c <= _DENSE_CELLS else None
    for a in range(0, s, step):
        draws = slice(a, min(s, a + step))
        block = spread(draws)
        pooled += block.sum(axis=0)
        inverse = inverse_totals(block)
        mean += np.einsum("snc,sn->nc", block, inverse)  # sum over draws of F_t(c | y_n)
        if dense is not None:  # w_tn F_t(c | y_n) into the held masses, in one pass
            inverse *= _bootstrap_weights(seed, draws, n)
            np.multiply(block, inverse[:, :, None], out=dense[draws])
        del block  # before the next block is made: one block-sized array alive, not two
    # the posterior-mean masses, the bootstrap integrated exactly (E w_tn = 1 / N): the
    # points' contributions to the sample's standard error, free of the weights' noise
    mean /= s * n
    if dense is not None:
        cells = _Cells(_normalised(pooled), outputs, False, np.zeros(s), "monte-carlo",
                       dense=dense, population=population)  # fmt: skip
        cells._mean = mean
        cells._mean.flags.writeable = False
        return cells
    # Too many to hold: each later sum spreads its draws again. (A pass costs about a
    # second per 1,000 draws x 2,000 items x ten classes, mostly the others' shares and
    # the spreading.)
    return _Cells.in_blocks(masses, _normalised(pooled), mean, outputs, s, population)


def _bootstrap_weights(seed: int, draws: slice, n: int) -> np.ndarray:
    """(draws, n) Dirichlet(1, ..., 1) weights of the Bayesian bootstrap, the same for a
    draw whatever slice asks for it (blocks of _BOOTSTRAP_BLOCK draws, each seeded)."""
    first, stop = draws.start // _BOOTSTRAP_BLOCK, -(-draws.stop // _BOOTSTRAP_BLOCK)
    gamma = np.concatenate([
        np.random.default_rng([seed, _BOOTSTRAP_STREAM, b]).standard_exponential(
            (_BOOTSTRAP_BLOCK, n))
        for b in range(first, stop)
    ])[draws.start - first * _BOOTSTRAP_BLOCK : draws.stop - first * _BOOTSTRAP_BLOCK]  # fmt: skip
    return gamma / gamma.sum(axis=1, keepdims=True)


def _pooled(mass: np.ndarray) -> np.ndarray:
    """Predictive p(c | cell): sum_t M_t(c, j) / sum_t sum_c M_t(c, j) (theory 3.2)."""
    return _normalised(mass.sum(axis=0))


def _normalised(pooled: np.ndarray) -> np.ndarray:
    """Rows (J, C) of summed masses as probabilities over classes (uniform where 0)."""
    total = pooled.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, pooled / np.where(total > 0, total, 1.0), 1.0 / pooled.shape[1])


def _snap_to_lattice(outputs: np.ndarray, transducer: Transducer) -> np.ndarray:
    """Round lattice columns to their lattice (and into their support)."""
    from .transducer.encoding import SUPPORT

    transform = transducer.transform_
    if transform.is_simplex:
        return outputs
    observed = transducer.posterior_.observed_data["outputs"].values
    out = outputs.copy()
    for j, (kind, h) in enumerate(zip(transform.kind, transform.resolution, strict=True)):
        low, high = SUPPORT[kind]
        if h is not None:
            offset = observed[0, j]
            out[:, j] = offset + h * np.round((out[:, j] - offset) / h)
        out[:, j] = np.clip(out[:, j], low, high)
    return out


# ------------------------------------------------------------------- integrals
def _check_threshold(threshold: Any) -> None:
    """The standard rule's threshold: a finite number (NaN would choose one decision always)."""
    number = isinstance(threshold, int | float | np.integer | np.floating) and not isinstance(
        threshold, bool | np.bool_
    )
    if not number or not np.isfinite(threshold):
        raise ValueError(
            f"threshold must be a finite number (the standard rule decides output > "
            f"threshold), found {threshold!r}"
        )


def decision_indices(
    rule: Any, outputs: np.ndarray, decisions: tuple[Label, ...], transducer: Transducer,
    threshold: float,
) -> np.ndarray:  # fmt: skip
    """Decisions (indices into ``decisions``) of a rule that ignores the utility matrix."""
    classes = transducer.classes_
    if rule == "standard" and transducer.members_:
        raise ValueError(
            "a joint transducer's outputs are several classifiers' outputs side by side: "
            "there is no standard rule for them; use rule='augmented' (the ensemble) or a "
            "callable, and the standard rule on each member (transducer.marginal(name))"
        )
    if rule == "standard":
        if outputs.shape[1] == 1:
            _check_threshold(threshold)
            if len(classes) != 2:
                raise ValueError(
                    f"the standard rule for a scalar output needs 2 classes, found {len(classes)}"
                )
            chosen = np.where(outputs[:, 0] > threshold, 1, 0)
        else:
            if outputs.shape[1] != len(classes):
                raise ValueError(
                    f"the standard rule takes the argmax of a vector output with one entry "
                    f"per class ({len(classes)}); this output has {outputs.shape[1]}"
                )
            _check_column_order(transducer, classes)
            chosen = outputs.argmax(axis=1)
        labels = np.array(list(classes), dtype=object)[chosen]  # object: labels of any type
        return indices_of(labels, decisions, "standard-rule decisions (class labels)",
                          "utility matrix's decisions")  # fmt: skip
    if callable(rule):
        # the outputs a user's rule can meet: Monte Carlo points from a kernel's tail past
        # the last possible output come back from the squeeze slightly outside [0, 1]
        # (OutputTransform.onto_domain); their masses stay those of the points drawn
        frame = pd.DataFrame(transducer.transform_.onto_domain(outputs),
                             columns=list(transducer.transform_.columns))  # fmt: skip
        labels = label_values(rule(frame), "rule(outputs)")
        if labels.size != outputs.shape[0]:
            raise ValueError(
                f"rule must return one decision per output row ({outputs.shape[0]}), "
                f"returned {labels.size}"
            )
        return indices_of(labels, decisions, "rule(outputs)", "utility matrix's decisions")
    raise ValueError(f'rule must be "augmented", "standard" or a callable, found {rule!r}')


def _check_column_order(transducer: Transducer, classes: Sequence[Label]) -> None:
    """ValueError when the transducer's output columns name the classes in another order
    than ``classes`` (:func:`~yieldwise.transducer.encoding.misnamed_class_columns`): the
    standard rule reads column ``j`` as ``classes[j]``, so its argmax would decide for
    another class's column. Names the user did not give (an array's ``output_0``, ...)
    name nothing; a file from before they were recorded (``named`` None) tells them by
    those default names."""
    transform = transducer.transform_
    columns = list(transform.columns)
    generated = [f"output_{j}" for j in range(len(columns))]
    if transform.named is False or (transform.named is None and columns == generated):
        return
    misnamed = misnamed_class_columns(columns, classes)
    if misnamed is None:
        return
    implied, reordered = misnamed
    raise ValueError(
        f"the standard rule takes the argmax of the output columns as the classes in "
        f"classes_'s order (column j decides for classes_[j]), but the columns "
        f"{columns} are named after the classes in the order {implied}, and classes_ "
        f"is {list(classes)}: each class would be decided by another class's column. Refit "
        f"with class_labels in the columns' order (fit(..., class_labels={implied!r})), or "
        f"with the columns reordered to classes_'s order ({reordered!r})"
    )


def _decider(
    rule: Any, matrices: np.ndarray, decisions: tuple[Label, ...], transducer: Transducer,
    threshold: float,
) -> Callable[[_Cells], np.ndarray]:  # fmt: skip
    """Decisions (matrices, cells) of ``rule`` on any cells, for adaptive refinement."""
    if rule == "augmented":
        return lambda cells: np.einsum("jc,mdc->mjd", cells.proba, matrices).argmax(axis=2)

    def fixed(cells: _Cells) -> np.ndarray:
        return decision_indices(rule, cells.outputs, decisions, transducer, threshold)[None]

    return fixed


def _integrate(
    cells: _Cells, matrices: np.ndarray, decisions: tuple[Label, ...], rule: Any,
    transducer: Transducer, threshold: float,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(u (S, m), integration error (2, m)).

    Quadrature: two bounds, on the posterior mean's error and on the mean absolute error
    of single draws (larger: per draw the errors need not cancel as they do on average).
    Monte Carlo: the standard error of the posterior mean, and the mean of single draws'
    own standard errors, of the rule that was integrated (:func:`_monte_carlo_errors`).
    """
    spread = np.ptp(matrices.reshape(len(matrices), -1), axis=1)
    monte_carlo = cells.method == "monte-carlo"
    if rule == "augmented":
        if matrices.shape[1:] == (2, 2):
            values, boundary, mixed = _binary_augmented(cells, matrices)
        else:
            values, mixed, errors = _general_augmented(cells, matrices, errors=monte_carlo)
            if errors is not None:
                return values, errors
            boundary = mixed * spread
        if monte_carlo:
            return values, _augmented_errors(cells, matrices)
    else:
        chosen = decision_indices(rule, cells.outputs, decisions, transducer, threshold)
        values = _fixed_rule(cells, chosen, matrices)
        mixed = np.full(len(matrices), _mixed_mass(cells, chosen))
        boundary = mixed * spread
        if monte_carlo:
            return values, _fixed_errors(cells, chosen, matrices)
    tails = cells.uncovered.mean() * spread  # the tails: their mass times the range
    return values, np.stack([boundary + tails, mixed * spread + tails])


def _mixed_mass(cells: _Cells, chosen: np.ndarray) -> float:
    """Posterior-mean mass of the cells whose decision differs from a neighbour's."""
    if not cells.neighbours:
        return 0.0
    change = np.zeros(chosen.shape, dtype=bool)
    change[1:] |= chosen[1:] != chosen[:-1]
    change[:-1] |= chosen[1:] != chosen[:-1]
    return float(cells.mean_mass()[change].sum())


def _fixed_rule(cells: _Cells, chosen: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """u[s, m] when decisions do not depend on the matrix: one pass over the cells."""
    onehot = np.eye(matrices.shape[1])[chosen]  # (J, D)
    region = cells.regions(onehot)  # (S, D, C): mass of class c where d is chosen
    return np.einsum("sdc,mdc->sm", region, matrices)


def _binary_augmented(
    cells: _Cells, matrices: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two decisions, two classes: decision 1 where ``p1 > tau`` (or ``< tau``) per matrix.

    Sorting the cells by the predictive ``p(1 | cell)`` turns every matrix's decision
    region into a prefix or a suffix, so one cumulative sum answers all matrices: of the
    masses (S, J + 1, C), or, factored, of the kernels (J + 1, K), whose differences the
    draws' weights then turn into masses (the (S, J, C) masses are never formed).
    """
    p1 = cells.proba[:, 1]
    order = np.argsort(p1, kind="stable")
    sorted_p1 = p1[order]
    s = cells.shape[0]
    factored = cells.kernels is not None and cells.weights is not None
    if factored:
        assert cells.kernels is not None and cells.weights is not None
        k = cells.kernels.shape[1]
        cum = np.concatenate([np.zeros((1, k)), np.cumsum(cells.kernels[order], axis=0)])
        by_kernel = cells.weights.transpose(1, 0, 2).reshape(k, s * 2)  # (K, S C)
        total = cells.class_totals()  # (S, C)
    else:
        cum = np.concatenate([np.zeros((s, 1, 2)), np.cumsum(cells.mass[:, order], axis=1)],
                             axis=1)  # fmt: skip
        total = cum[:, -1]  # (S, C)
    # decision 1 iff d0 + p1 (d1 - d0) > 0, with d_c = U[1, c] - U[0, c] (argmax: ties -> 0)
    d0 = matrices[:, 1, 0] - matrices[:, 0, 0]
    d1 = matrices[:, 1, 1] - matrices[:, 0, 1]
    slope = d1 - d0
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(slope != 0, -d0 / np.where(slope != 0, slope, 1.0), 0.0)
    above = np.searchsorted(sorted_p1, tau, side="right")  # first rank with p1 > tau
    below = np.searchsorted(sorted_p1, tau, side="left")  # ranks < this have p1 < tau
    n = len(p1)
    start = np.where(slope > 0, above, np.where(slope < 0, 0, np.where(d0 > 0, 0, n)))
    stop = np.where(slope > 0, n, np.where(slope < 0, below, np.where(d0 > 0, n, n)))
    values = np.empty((s, len(matrices)))
    step = max(1, _MAX_ELEMENTS // (s * 2))
    for a in range(0, len(matrices), step):
        m = slice(a, a + step)
        if factored:  # the kernels' sums over each region, then the draws' weights
            region1 = ((cum[stop[m]] - cum[start[m]]) @ by_kernel).reshape(-1, s, 2)
            region1 = region1.transpose(1, 0, 2)  # (S, m, C)
        else:
            region1 = cum[:, stop[m]] - cum[:, start[m]]  # (S, m, C)
        region0 = total[:, None, :] - region1
        values[:, m] = (np.einsum("smc,mc->sm", region0, matrices[m, 0])
                        + np.einsum("smc,mc->sm", region1, matrices[m, 1]))  # fmt: skip
    boundary = mixed = np.zeros(len(matrices))
    if cells.neighbours:
        # A cell is mixed for a matrix when tau lies within the range [lo, hi] of p1 over
        # the cell and its neighbours (its decision differs from a neighbour's). Where the
        # rule and the cell's decision differ, the utilities differ by the expected-utility
        # gap d0 + p1 (d1 - d0), at most |slope| (hi - lo) there: so the posterior mean's
        # error is at most |slope| * sum over mixed cells of mass * (hi - lo).
        span = np.stack([p1, np.r_[p1[:1], p1[:-1]], np.r_[p1[1:], p1[-1:]]], axis=1)
        lo, hi = span.min(axis=1), span.max(axis=1)
        mean_mass = cells.mean_mass().sum(axis=1)
        boundary = np.abs(slope) * _weight_between(lo, hi, mean_mass * (hi - lo), tau)
        mixed = _weight_between(lo, hi, mean_mass, tau) * (slope != 0)
        # |slope| can exceed the matrix's range: keep the smaller of the two bounds
        spread = np.ptp(matrices.reshape(len(matrices), -1), axis=1)
        boundary = np.minimum(boundary, mixed * spread)
    return values, boundary, mixed


def _weight_between(lo: np.ndarray, hi: np.ndarray, weight: np.ndarray, tau: np.ndarray):
    """For each tau, the total weight of cells with ``lo <= tau <= hi``."""
    o_lo, o_hi = np.argsort(lo), np.argsort(hi)
    c_lo = np.concatenate([[0.0], np.cumsum(weight[o_lo])])
    c_hi = np.concatenate([[0.0], np.cumsum(weight[o_hi])])
    started = c_lo[np.searchsorted(lo[o_lo], tau, side="right")]  # lo <= tau
    ended = c_hi[np.searchsorted(hi[o_hi], tau, side="left")]  # hi < tau
    return started - ended


def _choices(proba: np.ndarray, matrices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each matrix's expected-utility decision in each cell (ties: the first, as argmax),
    (m, J), and its expected utility ``max_d sum_c U[d, c] p(c | j)``, (m, J).

    One BLAS product (m D, C) x (C, J), laid out (m, D, J) so that the maximum over the
    few decisions runs on contiguous (m, J) slices (:func:`_best`).
    """
    m, d, c = matrices.shape
    expected = (matrices.reshape(m * d, c) @ proba.T).reshape(m, d, len(proba))
    chosen, best = _best(expected, choice=True)
    assert chosen is not None
    return chosen, best


def _best(expected: np.ndarray, *, choice: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
    """(argmax or None, max) over axis 1 (the decisions) of ``expected`` (m, D, ...).

    A running maximum over the D contiguous slices: a reduction over a short last axis
    took 8 s of a three-class report's 58 s (``argmax``, 10,000 matrices), and 0.32 s
    against 0.026 s per (100, 4, 2, 20,000) block of the oracle (medians of 7,
    2026-12-03). Ties keep the earlier decision, as ``argmax`` does.
    """
    best = expected[:, 0].copy()
    chosen = np.zeros(best.shape, dtype=np.intp) if choice else None
    for k in range(1, expected.shape[1]):
        if chosen is not None:
            chosen[expected[:, k] > best] = k  # strictly: a tie keeps the earlier one
        np.maximum(best, expected[:, k], out=best)
    return chosen, best


def _standard_errors(
    contribution: np.ndarray, cells: _Cells, *, overwrite: bool = False
) -> np.ndarray:
    """The Monte Carlo standard error of the posterior-mean utility per matrix, from each
    point's contribution (m, J), whose mean the posterior-mean utility is.

    Points stratified by kernel (``cells.strata``, in kernel order): ``sqrt(sum_k J_k
    s_k^2) / J`` with ``s_k^2`` the contributions' variance within stratum ``k`` (a
    stratum of one point takes the variance over all points). Points sampled without
    replacement from a finite population (``cells.population``): with the
    finite-population correction, 0 when every item is a point. ``overwrite``: the
    contributions are the caller's to spend (their deviations are formed in place).
    """
    j = contribution.shape[1]
    if j < 2:
        return np.zeros(contribution.shape[0])
    if cells.strata is None:
        correction = 1.0 if cells.population is None else max(0.0, 1.0 - j / cells.population)
        return contribution.std(axis=1, ddof=1) / np.sqrt(j) * np.sqrt(correction)
    counts = cells.strata
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sums = np.add.reduceat(contribution, starts, axis=1)  # (m, strata)
    means = sums / counts
    single = counts == 1  # their variance: the one over all points (taken before overwriting)
    overall = contribution.var(axis=1, ddof=1)[:, None] if single.any() else None
    spread = contribution if overwrite else contribution.copy()
    spread -= means[:, np.repeat(np.arange(len(counts)), counts)]  # (2x np.repeat's speed)
    squares = np.add.reduceat(np.square(spread, out=spread), starts, axis=1)
    within = np.where(counts > 1, squares / np.maximum(counts - 1, 1), 0.0)
    if overall is not None:
        within[:, single] = overall
    return np.sqrt(within @ counts) / j


def _error_sample(cells: _Cells, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The draws and points whose contributions give single draws' Monte Carlo errors for
    ``m`` matrices: (draws (indices, evenly spaced), points (indices), the points of each
    stratum among them or None). _ERROR_DRAWS draws, fewer (at least _ERROR_DRAWS_MIN) and
    then a sample of the points (at least _ERROR_POINTS_MIN; within each stratum its first
    points, at least two, the points of a stratum being independent draws from its
    kernel; else a seeded sample) while draws x matrices x points x classes would pass
    _ERROR_ELEMENTS."""
    s, j, c = cells.shape
    n = min(s, _ERROR_DRAWS, max(_ERROR_DRAWS_MIN, _ERROR_ELEMENTS // max(1, m * j * c)))
    draws = np.unique(np.linspace(0, s - 1, n).round().astype(np.intp))
    keep = min(j, max(_ERROR_POINTS_MIN, _ERROR_ELEMENTS // (len(draws) * m * c)))
    if keep >= j:
        return draws, np.arange(j), cells.strata
    if cells.strata is None:
        return draws, np.sort(np.random.default_rng(0).choice(j, keep, replace=False)), None
    counts = cells.strata
    take = np.minimum(counts, np.maximum(2, np.ceil(counts * keep / j).astype(np.int64)))
    starts = np.cumsum(counts) - counts
    offsets = np.arange(take.sum()) - np.repeat(np.cumsum(take) - take, take)
    return draws, np.repeat(starts, take) + offsets, take


def _draw_errors(contribution: np.ndarray, cells: _Cells, counts: np.ndarray | None) -> np.ndarray:
    """(m,): the mean over draws of each draw's Monte Carlo standard error, from the
    contributions (draws, m, J') of all the points or of a sample of them (``counts``: the
    sample's points in each stratum, in order; as :func:`_standard_errors`, with each
    stratum's variance from its sampled points and its weight from all of them)."""
    draws, m, n = contribution.shape
    rows = contribution.reshape(draws * m, n)
    j = cells.shape[1]
    if n < 2:
        return np.zeros(m)
    if cells.strata is None:
        correction = 1.0 if cells.population is None else max(0.0, 1.0 - j / cells.population)
        error = rows.std(axis=1, ddof=1) * np.sqrt(correction / j)
    else:
        assert counts is not None
        starts = np.cumsum(counts) - counts
        sums = np.add.reduceat(rows, starts, axis=1)
        squares = np.add.reduceat(rows * rows, starts, axis=1)
        within = np.clip(squares - sums**2 / counts, 0.0, None) / np.maximum(counts - 1, 1)
        single = counts == 1
        if single.any():
            within[:, single] = rows.var(axis=1, ddof=1)[:, None]
        error = np.sqrt(within @ cells.strata) / j
    return error.reshape(draws, m).mean(axis=0)


def _monte_carlo_errors(
    cells: _Cells, matrices: np.ndarray, decide: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """(2, m) Monte Carlo errors (:func:`_error_function`) of a rule whose decisions
    ``decide(batch)`` (batch, J) are the same in every draw."""
    errors_of = _error_function(cells, matrices)
    errors = np.empty((2, len(matrices)))
    step = max(1, _MAX_ELEMENTS // (cells.shape[1] * (matrices.shape[1] + 1)))
    for a in range(0, len(matrices), step):
        batch = matrices[a : a + step]
        errors[:, a : a + step] = errors_of(batch, decide(batch))
    return errors


def _error_function(cells: _Cells, matrices: np.ndarray) -> Callable[..., np.ndarray]:
    """``errors(batch, chosen, taken=None)``, (2, len(batch)): the Monte Carlo errors of
    the matrices ``batch`` (a part of ``matrices``) with decisions ``chosen`` (batch, J),
    the same in every draw (``taken``: their :meth:`_Cells.taken`, when the caller has
    it): the standard error of the posterior mean, and the mean over draws (a few
    evenly spaced: :func:`_error_sample`) of single draws' own standard errors.

    Scaled cells (``cells.class_mass``, the ratio estimator of :func:`_monte_carlo_cells`):
    draw ``t``'s utility is ``sum_c F_t(c) A_tc / B_tc`` with ``A_tc = sum_j M_t(c, j)
    U[d_j, c]`` and ``B_tc = sum_j M_t(c, j)`` the unscaled sums, so to first order (the
    delta method) its error is the mean over the points of ``J sum_c M_t(c, j) (U[d_j, c]
    - v_tc)``, ``v_tc = A_tc / B_tc`` the draw's mean utility of class ``c``. The posterior
    mean's contributions are ``J sum_c Mbar(c, j) (U[d_j, c] - vbar_c)``, ``Mbar`` the
    posterior-mean masses and ``vbar_c`` their mean utility of class ``c`` (each draw's own
    ``v_tc`` there changed the standard errors of a joint fit by under 1 %, at the cost of
    a (points x kernels) product per matrix). Adding ``b`` to ``U`` leaves every
    contribution unchanged. Other Monte Carlo cells (a class-reduced transducer's
    calibration outputs, whose masses sum to 1 in every draw): the posterior mean's
    contributions are ``J sum_c Mbar(c, j) U[d_j, c]``, and a draw's the point's expected
    utility under the draw, ``sum_c F_t(c | y_j) U[d_j, c]``, whose mean over a sample
    estimates the population's.
    """
    j, c = cells.shape[1:]
    d = matrices.shape[1]
    picked, points, counts = _error_sample(cells, len(matrices))
    masses = cells.picked_masses(picked)  # (draws, J, C)
    sample = np.ascontiguousarray(masses[:, points].transpose(0, 2, 1))  # (draws, C, J')
    mean = cells.mean_mass()  # (J, C)
    both = class_sums = whole = None
    factored = cells.kernels is not None and cells.weights is not None
    if cells.class_mass is not None:  # the posterior-mean masses and the picked draws'
        if factored:  # as weights (K, (1 + draws) C), which the kernel regions contract
            assert cells.kernels is not None and cells.weights is not None
            w = np.concatenate([cells.weights.mean(axis=0)[None], cells.weights[picked]])
            both = np.ascontiguousarray(w.transpose(1, 0, 2)).reshape(w.shape[1], -1)
            class_sums = (cells.kernels.sum(axis=0) @ both).reshape(-1, c)
        else:  # as masses (J, (1 + draws) C), which the decisions' masks contract
            both = np.concatenate([mean[:, None], masses.transpose(1, 0, 2)], axis=1)
            both = both.reshape(j, -1)
            class_sums = both.sum(axis=0).reshape(-1, c)
        # class_sums (1 + draws, C): their class totals
        whole = np.where(class_sums > 0, class_sums, 1.0)
        whole[1:] = cells.class_mass[picked]  # a draw's own: exact (F_t(c), or r_c)

    def errors(batch: np.ndarray, chosen: np.ndarray, taken: _Taken | None = None) -> np.ndarray:
        m = len(batch)
        if taken is None:
            taken = cells.taken(chosen, d)
        shift = None
        if both is not None:
            # each class's utility over the points, sum_j M(c, j) U[d_j, c], of the
            # posterior-mean masses and the picked draws': U[0, c] times the class's
            # mass, plus (U[k, c] - U[0, c]) times its mass where decision k is taken
            if taken.regions is not None:
                region = taken.regions[1:].reshape(-1, taken.regions.shape[2]) @ both
            else:
                region = np.stack([mask.astype(float) @ both for mask in taken.masks])
            region = region.reshape(d - 1, m, len(whole), c)  # (D - 1, m, 1 + draws, C)
            sums = batch[:, None, 0, :] * class_sums[None]  # (m, 1 + draws, C)
            sums += np.einsum("mkc,kmtc->mtc", batch[:, 1:] - batch[:, :1], region)
            sums /= whole[None]  # each class's mean utility
            shift = sums[:, 0]  # (m, C): the posterior-mean masses' vbar_c
        # each point's contribution J sum_c Mbar(c, j) (U[d_j, c] - vbar_c) (no shift:
        # unscaled cells), J folded into the (m, D, C) utilities before the product
        centred = batch * j if shift is None else (batch - shift[:, None, :]) * j
        expected = (centred.reshape(-1, c) @ mean.T).reshape(m, d, j)
        per_point = expected[:, 0].copy()  # (m, J)
        for k, mask in enumerate(taken.masks, start=1):
            np.copyto(per_point, expected[:, k], where=mask)
        # single draws: own[t, m, j] = sum_c M_t(c, j) U[d_j, c] over the sampled points,
        # the gains gathered as rows (m, J', C), then one small product per point
        gains = np.take(batch.reshape(m * d, c), chosen[:, points] + (np.arange(m) * d)[:, None],
                        axis=0)  # fmt: skip
        own = np.matmul(gains.transpose(1, 0, 2), sample.transpose(2, 1, 0)).transpose(2, 1, 0)
        if shift is not None:  # centred on each draw's own class means, v_tc
            own -= np.matmul(sums[:, 1:].transpose(1, 0, 2), sample)  # (draws, m, J')
            own *= j
        else:  # each point's expected utility under the draw
            total = sample.sum(axis=1)[:, None, :]
            own = np.divide(own, total, out=np.zeros_like(own), where=total > 0)
        single_draws = _draw_errors(own, cells, counts)
        return np.stack([_standard_errors(per_point, cells, overwrite=True), single_draws])

    return errors


def _augmented_errors(cells: _Cells, matrices: np.ndarray) -> np.ndarray:
    """(2, m) Monte Carlo errors (:func:`_monte_carlo_errors`) of the expected-utility rule,
    whose decisions are ``_choices``' at every point."""
    return _monte_carlo_errors(cells, matrices, lambda batch: _choices(cells.proba, batch)[0])


def _fixed_errors(cells: _Cells, chosen: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """(2, m) Monte Carlo errors (:func:`_monte_carlo_errors`) of a rule whose decisions
    ``chosen`` (J,) do not depend on the matrix."""
    chosen = np.asarray(chosen)

    def decide(batch: np.ndarray) -> np.ndarray:
        return np.broadcast_to(chosen, (len(batch), len(chosen)))

    return _monte_carlo_errors(cells, matrices, decide)


def _general_augmented(
    cells: _Cells, matrices: np.ndarray, *, errors: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Any shape: per matrix, decisions by argmax of expected utility in every cell.

    u[s, m] = sum_jc M_s(j, c) U_m[d_m(j), c], with d_m(j) the argmax over d of
    sum_c U_m[d, c] p(c | j): one matrix product over the flattened (cell, class) axis per
    batch of matrices (a loop over 10,000 matrices of 3 classes took minutes). Returns
    (u, mixed mass (m,), the Monte Carlo errors (2, m) when ``errors``, else None), the
    errors :func:`_augmented_errors`', from the same decisions.
    """
    s, j, c = cells.shape
    pooled = cells.mean_mass().sum(axis=1)  # (J,): posterior-mean mass of each cell
    values = np.empty((s, len(matrices)))
    mixed = np.zeros(len(matrices))
    errors_of = _error_function(cells, matrices) if errors else None
    standard = np.empty((2, len(matrices))) if errors else None
    step = max(1, _MAX_ELEMENTS // (j * max(c, matrices.shape[1])))
    # Blocked masses (formed a block of draws at a time): every matrix's decisions first,
    # in the smallest integer type, then each block formed once for all the matrices.
    kept = None
    if cells.blocked:
        kept = np.empty((len(matrices), j), np.min_scalar_type(matrices.shape[1]))
    for a in range(0, len(matrices), step):
        m = slice(a, a + step)
        batch = matrices[m]
        chosen, _ = _choices(cells.proba, batch)  # (m, J)
        taken = None if kept is not None else cells.taken(chosen, batch.shape[1])
        if kept is not None:
            kept[m] = chosen
        else:
            values[:, m] = cells.utilities(batch, chosen, taken)
        if errors_of is not None and standard is not None:
            standard[:, m] = errors_of(batch, chosen, taken)
        if cells.neighbours:  # as _mixed_mass, for every matrix of the batch at once
            change = np.zeros(chosen.shape, dtype=bool)
            change[:, 1:] |= chosen[:, 1:] != chosen[:, :-1]
            change[:, :-1] |= chosen[:, 1:] != chosen[:, :-1]
            mixed[m] = change @ pooled
    if kept is not None:
        for draws, block in cells.draw_blocks():
            held = _Cells(cells.proba, cells.outputs, False, cells.uncovered[draws],
                          cells.method, dense=block)  # fmt: skip
            for a in range(0, len(matrices), step):
                values[draws, a : a + step] = held.utilities(matrices[a : a + step],
                                                             kept[a : a + step])  # fmt: skip
    return values, mixed, standard


def _oracle(cells: _Cells, matrices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """u*[s, m] = sum_j max_i sum_c U[i, c] M_t(c, j): decisions made with each draw.

    Draw by draw, so the work arrays hold a few draws' masses (:meth:`_Cells.draw_masses`)
    and their (draws, cells, matrices, decisions) expected utilities, never every draw's:
    3,000 draws x 20,000 points x 4 decisions of one matrix were 1.9 GB in one array.
    Monte Carlo errors as :func:`_monte_carlo_errors`', each draw with its own decisions.
    """
    s, j, c = cells.shape
    m, d = matrices.shape[:2]
    values = np.empty((s, m))
    monte_carlo = cells.method == "monte-carlo"
    # Quadrature: per draw, the best decision may change inside a cell; a change between
    # two neighbouring cells happens in one of them, so both cells' mass counts as error.
    quadrature = cells.method == "quadrature"
    scaled = monte_carlo and cells.class_mass is not None  # the ratio estimator's cells
    point_sums = np.zeros((m, j))  # sum over draws of each point's contribution
    picked, points, counts = np.zeros(0, np.intp), None, None
    if monte_carlo:
        picked, points, counts = _error_sample(cells, m)
    own_errors = np.zeros(m)  # sum over the picked draws of their own standard errors
    mixed = np.zeros(m)  # sum over draws of the mass of cells where the decision changes
    batch = max(1, min(m, _MAX_ELEMENTS // (j * max(c, d))))
    draw_step = max(1, _MAX_ELEMENTS // (j * max(c, batch * max(c, d))))
    for first in range(0, s, draw_step):
        draws = slice(first, min(s, first + draw_step))
        masses = cells.draw_masses(draws)  # (draws, J, C)
        mass = masses.reshape(-1, c).T  # (C, draws J)
        cell_mass = masses.sum(axis=2) if quadrature else None  # (draws, J)
        here = picked[(picked >= draws.start) & (picked < draws.stop)] - draws.start
        for a in range(0, m, batch):
            u = matrices[a : a + batch]
            # (matrices D, C) x (C, draws J), the maximum over contiguous decision slices
            expected = (u.reshape(-1, c) @ mass).reshape(len(u), d, -1, j)
            chosen, best = _best(expected, choice=quadrature or scaled)
            values[draws, a : a + batch] = best.sum(axis=2).T  # best: (matrices, draws, J)
            if monte_carlo:
                point_sums[a : a + batch] += best.sum(axis=1)
                picked_best = best[:, here][:, :, points]  # (matrices, picked, J')
                sample = masses[here][:, points]  # (picked, J', C)
                if cells.class_mass is None:  # each point's expected utility per draw
                    total = sample.sum(axis=2)
                    own = np.divide(picked_best, total, out=np.zeros_like(picked_best),
                                    where=total > 0)  # fmt: skip
                else:  # the ratio estimator's, centred on each draw's own class means
                    assert chosen is not None
                    v = _oracle_class_means(cells, u, chosen, masses, draws)  # (m, draws, C)
                    # sum over the block's draws of sum_c M_t(c, j) v_tc, (m, J)
                    point_sums[a : a + batch] -= np.tensordot(v, masses, axes=([1, 2], [0, 2]))
                    own = (picked_best - np.einsum("tjc,mtc->mtj", sample, v[:, here])) * j
                if here.size:  # single draws' own errors (as _monte_carlo_errors')
                    own_errors[a : a + batch] += (
                        _draw_errors(own.transpose(1, 0, 2), cells, counts) * here.size
                    )
            if chosen is not None and cell_mass is not None:
                step = chosen[..., 1:] != chosen[..., :-1]  # (matrices, draws, J - 1)
                change = np.zeros(chosen.shape, dtype=bool)
                change[..., 1:] |= step
                change[..., :-1] |= step
                mixed[a : a + batch] += np.einsum("adj,dj->a", change, cell_mass)
    if monte_carlo:  # a point's contribution: its mean over draws, times J
        standard = _standard_errors(point_sums / s * j, cells)
        return values, np.stack([standard, own_errors / len(picked)])
    spread = np.ptp(matrices.reshape(len(matrices), -1), axis=1)
    mixed /= s
    error = (mixed + cells.uncovered.mean()) * spread
    return values, np.stack([error, error])


def _oracle_class_means(
    cells: _Cells, matrices: np.ndarray, chosen: np.ndarray, masses: np.ndarray, draws: slice
) -> np.ndarray:
    """(m, draws, C): ``v_tc = sum_j M_t(c, j) U[d_tj, c] / F_t(c)``, each of the draws
    ``draws``' mean utility of class ``c`` under its own decisions ``chosen`` (m, draws,
    J), its masses ``masses`` (draws, J, C) scaled to ``F_t(c)`` (``cells.class_mass``):
    ``U[0, c]`` times the class's mass, plus ``U[k, c] - U[0, c]`` times its mass where
    decision ``k`` is taken."""
    assert cells.class_mass is not None
    v = matrices[:, None, 0, :] * masses.sum(axis=1)[None]
    for k in range(1, matrices.shape[1]):
        region = (chosen == k).astype(float).transpose(1, 0, 2) @ masses  # (draws, m, C)
        v += (matrices[:, k] - matrices[:, 0])[:, None, :] * region.transpose(1, 0, 2)
    return v / cells.class_mass[draws][None]


# ------------------------------------------------------------- rescaling, output
def _rescale(values, error, matrices, cells, transducer, r):
    """(u - low_t) / (high_t - low_t) with each draw's class frequencies (theory 1)."""
    if r is not None:
        freq = np.broadcast_to(r, (values.shape[0], len(r)))
    elif transducer.reduction_ is not None:  # the classes' frequencies over the cells
        freq = cells.class_totals()
    else:
        freq = transducer.posterior.class_frequencies()
    low = freq @ matrices.min(axis=1).T  # (S, m)
    high = freq @ matrices.max(axis=1).T
    width = high - low
    if (width <= 0).any():
        bad = int(np.flatnonzero((width <= 0).any(axis=0))[0])
        raise ValueError(
            f"cannot rescale utility matrix {bad}: every decision has the same utility for "
            "each class, so the best and worst achievable utilities coincide"
        )
    return (values - low) / width, error / width.min(axis=0)


def _as_dataarray(values, error, names, transducer, method, name, bounds) -> xr.DataArray:
    """``error`` rows: bound on the posterior mean's error, on single draws' mean error;
    ``bounds``: each matrix's ``(min U, max U - min U)`` (:func:`_shifted_matrices`)."""
    error = np.asarray(error, float).reshape(2, -1)
    low, spread = (np.asarray(b, float).reshape(-1) for b in bounds)
    chains, draws = transducer.posterior.chains, transducer.posterior.draws
    data = values.reshape(chains, draws, -1)
    coords: dict[str, Any] = {"chain": np.arange(chains), "draw": np.arange(draws)}
    if names is None:
        out = xr.DataArray(data[:, :, 0], dims=("chain", "draw"), coords=coords, name=name)
        out = out.assign_coords(
            integration_error=float(error[0, 0]), integration_error_draws=float(error[1, 0]),
            utility_min=float(low[0]), utility_spread=float(spread[0]),
        )  # fmt: skip
    else:
        coords["matrix"] = names
        out = xr.DataArray(data, dims=("chain", "draw", "matrix"), coords=coords, name=name)
        out = out.assign_coords(
            integration_error=("matrix", error[0]), integration_error_draws=("matrix", error[1]),
            utility_min=("matrix", low), utility_spread=("matrix", spread),
        )  # fmt: skip
    out.attrs["integration"] = method
    return out
