"""The fitted transducer's posterior: its draws in one form, and the mixture's math on them.

Every posterior draw ``t`` is a whole distribution of (class, output) on the model scale
(docs/theory.md section 3.1), the finite mixture of product kernels

    G_t(c, y) = sum_k w_tk alpha_tkc prod_d kernel_tkd(y_d),

with ``kernel_tkd`` the Normal(mu_tkd, sigma_tkd) density of a point-valued output and,
for an interval-censored (lattice) dimension, the Normal probability of the output's bin
``[lower_d, upper_d]``. :class:`TransducerPosterior` holds the draws flattened over chains
(draw ``t`` of the flat axis is chain ``t // draws``, draw ``t % draws``) and answers what
they give (section 3.2): the joint, the class frequencies ``F_t(c)``, bin masses, the
predictive distribution of the outputs. Everything here works on model-scale bounds
(``lower``, ``upper``, ``censored``) as :meth:`OutputTransform.intervals
<yieldwise.transducer.encoding.OutputTransform.intervals>` gives them; the estimator
(:class:`~yieldwise.Transducer`) maps a user's outputs to them.

The vectorised kernels live in :mod:`yieldwise._mixture`; this object is the one public
door to them, and the one place where the kernels' masses over bins are computed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from .. import _mixture
from .._validation import Label, as_float_array

__all__ = ["TransducerPosterior"]

#: Draws used to place predictive quantiles (placement needs no precision).
PLACEMENT_DRAWS = 64

#: Beyond this many of the widest kernel's widths past every kernel centre (more where
#: centres lie closer than a width: below), :meth:`TransducerPosterior.within_reach` moves
#: an output in, for class probabilities only. There ``p(c | y)`` has reached its limit
#: to machine precision: between two kernels of one width ``sigma`` whose centres lie
#: ``d`` apart the log-ratio changes by ``d / sigma^2`` per unit of ``y``, so ``L`` widths
#: past the outermost centre its neighbour weighs ``exp(-L d / sigma)`` of it (the shipped
#: grids have ``d >= sigma``), and a wider kernel's lead grows with ``y^2``. Farther out,
#: float64 loses the kernels' relative values: ``z^2 / 2`` carries an absolute error of
#: about ``z^2 * 1e-16``, a whole log unit at ``z`` = 1e8, and overflows above about
#: 1e154 (measured 2026-12-05: probabilities 0.3 drifted to 0.27 at 1e8 and 0.5 at 1e9,
#: and were NaN at 1e155).
FAR_WIDTHS = 1000.0
#: Centres closer than a width (kernels that move between draws) need ``sigma / d`` times
#: the reach for the same dominance, up to this factor (1e6 widths, where the rounding of
#: ``z^2`` is still about 1e-4 of a log unit).
FAR_SPACING_FACTOR_MAX = 1000.0
#: Rows x kernels x dimensions that :meth:`TransducerPosterior.nearest_kernel_widths`
#: holds at once (2^22 doubles, 32 MiB).
NEAREST_CHUNK_VALUES = 2**22


def draws_slice(draws: slice | None) -> slice:
    """``draws`` as a slice of a posterior's draws (None: every draw); anything else is
    refused by name (the blocks of draws a caller combines must be slices)."""
    if draws is None:
        return slice(None)
    if not isinstance(draws, slice):
        raise TypeError(f"draws must be a slice of the posterior's draws or None, "
                        f"found {type(draws).__name__}")  # fmt: skip
    return draws


@dataclass(frozen=True, eq=False)
class TransducerPosterior:
    """Posterior draws of the transducer's mixture (theory 3.1), flattened over chains.

    Parameters
    ----------
    w : (S, K) array
        Mixture weights of the ``K`` kernels per draw (each row sums to 1).
    alpha : (S, K, C) array
        Class probabilities of each kernel per draw.
    mu, sigma : (S, K, D) arrays
        Kernel locations and widths on the model scale (the same in every draw for the
        fixed-kernel model).
    classes : tuple of labels
        The ``C`` class labels, in the order of ``alpha``'s last axis.
    chains, draws : int
        Chains and draws per chain: ``S = chains * draws``, chain-major.

    Examples
    --------
    >>> import numpy as np
    >>> post = TransducerPosterior(
    ...     w=np.array([[0.5, 0.5]]), alpha=np.array([[[0.9, 0.1], [0.2, 0.8]]]),
    ...     mu=np.array([[[-1.0], [1.0]]]), sigma=np.ones((1, 2, 1)), classes=("a", "b"),
    ...     chains=1, draws=1)
    >>> post.class_frequencies().round(3).tolist()
    [[0.55, 0.45]]
    >>> post.bin_masses(np.array([-np.inf, 0.0, np.inf])).sum().round(12)  # all the mass
    np.float64(1.0)
    """

    w: np.ndarray
    alpha: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    classes: tuple[Label, ...]
    chains: int
    draws: int

    def __post_init__(self) -> None:
        s = int(self.chains) * int(self.draws)
        k = np.shape(self.w)[1] if np.ndim(self.w) == 2 else None
        expected = {
            "w": (s, k),
            "alpha": (s, k, len(self.classes)),
            "mu": (s, k, None),
            "sigma": np.shape(self.mu),
        }
        for name, shape in expected.items():
            found = np.shape(getattr(self, name))
            if len(found) != len(shape) or any(
                e is not None and e != f for e, f in zip(shape, found, strict=True)
            ):
                raise ValueError(
                    f"TransducerPosterior.{name} must have shape {_shape_text(shape)} "
                    f"(chains x draws = {s} draws, K kernels, {len(self.classes)} classes, "
                    f"D dimensions), found {found}"
                )

    @classmethod
    def from_inference_data(cls, idata: Any, classes: tuple[Label, ...]) -> TransducerPosterior:
        """The posterior held in an ArviZ InferenceData's ``posterior`` group (``w``,
        ``alpha``, ``mu``, ``sigma`` shaped (chain, draw, ...)), as a fit or a transducer
        file stores it."""
        post = idata.posterior
        chains, draws = post.sizes["chain"], post.sizes["draw"]
        s = chains * draws
        return cls(
            w=post["w"].values.reshape(s, -1),
            alpha=post["alpha"].values.reshape(s, *post["alpha"].shape[2:]),
            mu=post["mu"].values.reshape(s, *post["mu"].shape[2:]),
            sigma=post["sigma"].values.reshape(s, *post["sigma"].shape[2:]),
            classes=tuple(classes),
            chains=int(chains),
            draws=int(draws),
        )

    # ------------------------------------------------------------- structure
    @property
    def n_draws(self) -> int:
        """``S``, all draws of all chains."""
        return int(self.w.shape[0])

    @property
    def n_components(self) -> int:
        """``K``, the number of kernels."""
        return int(self.w.shape[1])

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_dims(self) -> int:
        """``D``, the model-scale output dimensions."""
        return int(self.mu.shape[2])

    def by_chain(self, values: np.ndarray) -> np.ndarray:
        """Per-draw values (S, ...) reshaped to (chains, draws, ...)."""
        values = np.asarray(values)
        return values.reshape(self.chains, self.draws, *values.shape[1:])

    def select_dims(self, dims: list[int]) -> TransducerPosterior:
        """The marginal posterior of the output dimensions ``dims``.

        The kernels are products over dimensions, so dropping the others from every draw
        gives exactly the posterior of the (class, those dimensions) density; the draws
        stay paired with this posterior's.
        """
        return TransducerPosterior(
            self.w, self.alpha, self.mu[..., dims], self.sigma[..., dims], self.classes,
            self.chains, self.draws,
        )  # fmt: skip

    # ------------------------------------------------------ class frequencies
    @cached_property
    def log_class_frequencies(self) -> np.ndarray:
        """``log F_t(c) = log sum_k w_tk alpha_tkc``: the class frequencies under each draw
        (theory 3.2, generative mode), shape (S, C)."""
        return np.log(np.einsum("sk,skc->sc", self.w, self.alpha))

    def class_frequencies(self) -> np.ndarray:
        """``F_t(c)`` per draw, shape (S, C) (theory 3.2; rescaling, theory 1)."""
        return np.exp(self.log_class_frequencies)

    def check_prevalences(self, prevalences: Any) -> np.ndarray | None:
        """Deployment class prevalences ``r_c`` as a checked (C,) array, or None.

        A sequence in the order of :attr:`classes`, or a mapping label -> prevalence
        (a pandas Series is one, read by its index); every entry positive, summing to 1.
        Bad input raises ValueError saying what is wrong.
        """
        if prevalences is None:
            return None
        if isinstance(prevalences, pd.Series):
            # a pandas Series is labelled: read by its index (a mapping), not by position
            prevalences = prevalences.to_dict()
        if isinstance(prevalences, Mapping):
            unknown = set(prevalences) - set(self.classes)
            if unknown or len(prevalences) != len(self.classes):
                raise ValueError(
                    f"prevalences must give one value per class {list(self.classes)}, found "
                    f"keys {list(prevalences)}"
                )
            prevalences = [prevalences[c] for c in self.classes]
        r = as_float_array(prevalences, "prevalences", ndim=1)
        if r.shape != (len(self.classes),):
            raise ValueError(
                f"prevalences must have one entry per class {list(self.classes)}, found {r.size}"
            )
        if (r <= 0).any() or not np.isclose(r.sum(), 1.0, rtol=0, atol=1e-9):
            raise ValueError(
                f"prevalences must be positive and sum to 1, found {r.tolist()} "
                f"(sum {float(r.sum()):.6g})"
            )
        return r

    def class_factors(self, prevalences: Any) -> np.ndarray | None:
        """``r_c / F_t(c)`` per draw, shape (S, C), or None without prevalences.

        The generative mode's rescaling (theory 3.2): ``G_t(c, y) r_c / F_t(c) = r_c
        F_t(y | c)``. The one place the factor is formed; the joint weights, the scaled
        joint and the pooled predictions take it from here.
        """
        r = self.check_prevalences(prevalences)
        if r is None:
            return None
        return r[None, :] * np.exp(-self.log_class_frequencies)

    def component_class_weights(self, prevalences: Any = None) -> np.ndarray:
        """``w_tk alpha_tkc`` per draw, shape (S, K, C): the mixture's joint weights.

        With prevalences ``r`` (theory 3.2, generative mode) each class's mass is rescaled
        from ``F_t(c)`` to ``r_c``: ``w_tk alpha_tkc r_c / F_t(c)``, the weights of
        ``r_c F_t(y | c)``.
        """
        factors = self.class_factors(prevalences)
        weights = self.w[:, :, None] * self.alpha
        if factors is not None:  # r_c F_t(y | c): each class's mass rescaled to r_c
            weights = weights * factors[:, None, :]
        return weights

    # ------------------------------------------------------------ the joint
    def log_joint(
        self, lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None = None
    ) -> np.ndarray:
        """``log G_t(c, y)`` for every draw, row and class (theory 3.2): array (S, n, C).

        ``lower``/``upper`` (n, D) are model-scale bounds: the bin edges of a censored
        dimension, the point value twice otherwise (:func:`yieldwise._mixture.log_joint`).
        """
        return _mixture.log_joint(self.w, self.alpha, self.mu, self.sigma, lower, upper,
                                  censored)  # fmt: skip

    def log_joint_chunks(
        self, lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None = None
    ) -> Iterator[tuple[slice, np.ndarray]]:
        """``(rows, log G_t(c, y))`` chunk by chunk, each (S, chunk, C): :meth:`log_joint`
        in pieces whose work arrays stay small (one pass of it per chunk)."""
        chunks = _mixture.joint_chunks(self.mu, self.sigma, self.n_classes, lower.shape[0])
        for sl in chunks:
            yield sl, self.log_joint(lower[sl], upper[sl], censored)

    def within_reach(self, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Model-scale rows ``(lower, upper)`` moved in to at most :data:`FAR_WIDTHS` of the
        widest kernel's widths beyond the outermost kernel centres, per dimension (more
        where centres lie closer than that width: :data:`FAR_SPACING_FACTOR_MAX`): for
        class probabilities ``p(c | y)`` only (theory 3.2), which have reached their limit
        there (the outermost kernels' classes) while float64 still holds the kernels'
        ratios; a censored bin keeps its width, its nearer edge moved to the bound. Rows
        within reach are returned unchanged (the same values). Not for densities, whose
        value far out is what it is (about 0). Points and censored bins move alike (a
        point is a bin of width 0)."""
        mu = self.mu.reshape(-1, self.mu.shape[-1])
        widest = self.sigma.reshape(-1, self.sigma.shape[-1]).max(axis=0)
        factor = np.ones_like(widest)
        for d in range(mu.shape[1]):  # the closest distinct centres, per dimension
            gaps = np.diff(np.unique(mu[:, d]))
            if gaps.size:
                factor[d] = np.clip(widest[d] / gaps.min(), 1.0, FAR_SPACING_FACTOR_MAX)
        reach = FAR_WIDTHS * widest * factor
        low_bound, high_bound = mu.min(axis=0) - reach, mu.max(axis=0) + reach
        lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
        above, below = lower > high_bound, upper < low_bound
        if not (above.any() or below.any()):
            return lower, upper
        # the nearer edge set to the bound (not shifted by a difference, which would lose
        # the bound's digits against an output of 1e155), the far edge a width away
        width = upper - lower  # 0 for points
        moved_lower = np.where(above, high_bound, np.where(below, low_bound - width, lower))
        moved_upper = np.where(above, high_bound + width, np.where(below, low_bound, upper))
        return moved_lower, moved_upper

    def nearest_kernel_widths(self, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """How far each model-scale row ``(lower, upper)`` (a point: ``lower == upper``; a
        censored bin: its interval) lies from the nearest kernel, in that kernel's widths:
        ``min_k sqrt(sum_d (gap_kd / sigma_kd)^2)``, ``gap_kd`` the distance from centre
        ``mu_kd`` to the row's interval (0 inside it). Fixed kernels only (model 2's).

        A row several widths from every kernel is one the mixture's density does not
        cover: its joint density is a narrow kernel's Normal tail, ``exp(-r^2 / 2)`` of a
        covered row's at ``r`` widths (:meth:`Transducer.loo`, which warns of them), while
        ``p(c | y)`` there is the nearest kernels' (docs/model.md, "Extrapolation").
        """
        if not self.fixed_kernels:
            raise ValueError(
                "nearest_kernel_widths needs kernels fixed across draws (model 2's); these "
                "draws move their kernels"
            )
        mu, sigma = self.mu[0], self.sigma[0]  # (K, D)
        lower = np.atleast_2d(np.asarray(lower, dtype=float))
        upper = np.atleast_2d(np.asarray(upper, dtype=float))
        out = np.empty(lower.shape[0])
        step = max(1, NEAREST_CHUNK_VALUES // max(1, mu.size))
        for start in range(0, lower.shape[0], step):
            lo, hi = lower[start : start + step, None, :], upper[start : start + step, None, :]
            gap = np.maximum(np.maximum(lo - mu, mu - hi), 0.0) / sigma  # (rows, K, D)
            out[start : start + step] = np.sqrt(np.min(np.sum(gap**2, axis=2), axis=1))
        return out

    def class_probability_chunks(
        self, lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None = None,
        prevalences: Any = None,
    ) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:  # fmt: skip
        """``(rows, mean, per_draw)`` chunk by chunk at model-scale rows (theory 3.2): the
        exchangeable ``p(c | y)`` (chunk, C) and each draw's ``F_t(c | y)`` (S, chunk, C),
        discriminative or, with prevalences ``r``, generative (``F_t(y | c) r_c``); what
        bands, per-draw probabilities and their mean are made of
        (:func:`yieldwise._mixture.class_probability_chunks`: ratios of the scaled joint
        with fixed kernels, of ``log_joint`` with moving ones)."""
        factors = self.class_factors(prevalences)
        yield from _mixture.class_probability_chunks(
            self.w, self.alpha, self.mu, self.sigma, lower, upper, censored, class_factors=factors
        )

    def scaled_joint(
        self, lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None = None,
        *, prevalences: Any = None, draws: slice | None = None,
    ) -> np.ndarray:  # fmt: skip
        """``G_t(c, y) / s(y)`` for every draw, row and class, one scale ``s(y)`` per row.

        Any ratio over draws and classes cancels ``s(y)`` (Monte Carlo masses, pooled
        probabilities; theory 3.2 and 4): :func:`yieldwise._mixture.scaled_joint`. With
        prevalences ``r``, the generative weights ``F_t(y | c) r_c = G_t(c, y) r_c / F_t(c)``.
        ``draws``, a slice of the ``S`` draws: only those draws' rows (draws, n, C), with
        the same scale ``s(y)`` as the whole, so that blocks of draws can be combined
        (kernels fixed across draws: ``s(y)`` is the row's largest kernel value and only
        the slice is computed; moving kernels: the whole is computed and sliced).
        """
        factors = self.class_factors(prevalences)
        if draws is None or not _mixture.fixed_kernels(self.mu, self.sigma):
            whole = _mixture.scaled_joint(self.w, self.alpha, self.mu, self.sigma, lower, upper,
                                          censored, class_factors=factors)  # fmt: skip
            return whole if draws is None else whole[draws]
        return _mixture.scaled_joint(
            self.w[draws], self.alpha[draws], self.mu[draws], self.sigma[draws], lower, upper,
            censored, class_factors=None if factors is None else factors[draws],
        )  # fmt: skip

    def scaled_kernels(
        self, lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``kernel_k(y_n) / s(y_n)`` (n, K), one scale per row, when the kernels are the
        same in every draw (the shipped model's); None when they move between draws.

        ``scaled_kernels @ component_class_weights()[t]`` is draw ``t``'s
        :meth:`scaled_joint`: sums over draws can be taken on the (S, K, C) weights
        before the kernels (:func:`yieldwise._mixture.scaled_kernels`).
        """
        return _mixture.scaled_kernels(self.mu, self.sigma, lower, upper, censored)

    def kernel_joint(self, kernels: np.ndarray, *, draws: slice | None = None) -> np.ndarray:
        """:meth:`scaled_joint` at the rows whose :meth:`scaled_kernels` are ``kernels``
        (n, K), for the draws of the slice ``draws`` (all when None): (draws, n, C), the
        same scale per row. The kernels are evaluated once by the caller, so the joint of
        the same rows block after block of draws costs one matrix product a block
        (:func:`yieldwise._mixture.kernel_joint`)."""
        sel = draws_slice(draws)
        return _mixture.kernel_joint(kernels, self.w[sel, :, None] * self.alpha[sel])

    def pooled_joint(
        self, lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None,
        factors: np.ndarray, groups: np.ndarray,
    ) -> np.ndarray:  # fmt: skip
        """``sum_t G_t(c, y_n) v_t[g_n, c] / s(y_n)`` (n, C): the joint pooled over draws,
        each draw's class factors ``v`` (S, groups, C) those of the item's group ``g_n``
        (pair offsets' weights), one scale ``s(y_n)`` per item; normalised over classes it
        is the exchangeable ``p(c | y, g)`` (theory 3.2): :func:`yieldwise._mixture.pooled_joint`.
        """
        return _mixture.pooled_joint(self.w, self.alpha, self.mu, self.sigma, lower, upper,
                                     censored, factors, groups)  # fmt: skip

    def log_likelihood(
        self, class_index: np.ndarray, lower: np.ndarray, upper: np.ndarray,
        censored: np.ndarray | None = None, counts: np.ndarray | None = None,
    ) -> np.ndarray:  # fmt: skip
        """Total log-likelihood per draw of calibration rows (theory 3.1), shape (S,).

        ``sum_n counts_n log G_t(class_n, y_n)`` with 0-based ``class_index``: the Stan
        program's ``log_lik`` at the same merged rows.
        """
        return _mixture.log_likelihood(self.w, self.alpha, self.mu, self.sigma, class_index,
                                       lower, upper, censored, counts)  # fmt: skip

    # -------------------------------------------------------------- masses
    def bin_masses(
        self, lower: np.ndarray, upper: np.ndarray | None = None, weights: np.ndarray | None = None
    ) -> np.ndarray:
        """Per-draw class masses of bins of a 1-D output, shape (S, J, C).

        ``M_t(c, j) = sum_k weights_tkc (Phi((upper_j - mu_tk) / sigma_tk) - Phi((lower_j -
        mu_tk) / sigma_tk))``: the probability under draw ``t`` that an item is of class
        ``c`` and its model-scale output falls in bin ``j`` (theory 3.2 and 4). This is
        the one place where the kernels' masses over intervals are computed.

        Parameters
        ----------
        lower, upper : 1-D arrays
            The bins ``[lower_j, upper_j]`` (infinite edges allowed). With ``upper``
            None, ``lower`` holds ``J + 1`` edges of ``J`` consecutive bins, and each edge's
            normal CDF is evaluated once.
        weights : (S, K, C) array, optional
            The joint weights; default :meth:`component_class_weights` (pass those with
            prevalences for the generative masses).
        """
        if self.n_dims != 1:
            raise ValueError(
                f"bin_masses needs a 1-D output; this posterior has {self.n_dims} dimensions"
            )
        if weights is None:
            weights = self.component_class_weights()
        mu, sigma = self.mu[:, :, 0], self.sigma[:, :, 0]
        s = mu.shape[0]
        lower = np.asarray(lower, dtype=float)
        if upper is not None:
            upper = np.asarray(upper, dtype=float)
            if upper.shape != lower.shape:
                raise ValueError(
                    f"lower and upper must have the same shape, found {lower.shape}, {upper.shape}"
                )
        if _mixture.fixed_kernels(self.mu, self.sigma):
            # Model 2's kernels are the same in every draw: each kernel's mass of each bin
            # is computed once, (J, K), and the draws enter only through the weights (one
            # (J x K) by (K x C) product per draw). The per-draw CDF below cost 0.44 s a
            # call at 3,000 draws x 30 kernels (a report's long-run utility, 2026-11-26).
            mu0, sigma0 = mu[0], sigma[0]
            if upper is None:
                kernel = np.diff(ndtr((lower[:, None] - mu0) / sigma0), axis=0)
            else:
                kernel = ndtr((upper[:, None] - mu0) / sigma0) - ndtr(
                    (lower[:, None] - mu0) / sigma0
                )
            return np.matmul(kernel, weights)
        if upper is None:  # consecutive bins: one CDF per edge, shared by its two bins
            mass = np.empty((s, lower.size - 1, weights.shape[2]))
            for sl in _mixture.item_chunks(s, mu.shape[1], lower.size - 1):
                e = lower[sl.start : sl.stop + 1]  # one edge more than bins
                cdf = ndtr((e[None, :, None] - mu[:, None, :]) / sigma[:, None, :])  # (S, n+1, K)
                mass[:, sl] = np.matmul(np.diff(cdf, axis=1), weights)
            return mass
        mass = np.empty((s, lower.size, weights.shape[2]))
        for sl in _mixture.item_chunks(s, 2 * mu.shape[1], lower.size):
            hi = ndtr((upper[None, sl, None] - mu[:, None, :]) / sigma[:, None, :])
            lo = ndtr((lower[None, sl, None] - mu[:, None, :]) / sigma[:, None, :])
            mass[:, sl] = np.matmul(hi - lo, weights)
        return mass

    # ------------------------------------------------------- the predictive
    def predictive_quantiles(
        self, probs: np.ndarray, max_draws: int = PLACEMENT_DRAWS
    ) -> np.ndarray:
        """Quantiles of the predictive output distribution ``p(y | D)`` (model scale, 1-D).

        The predictive CDF (theory 3.2, ``mean_t`` of the mixture's CDF; over at most
        ``max_draws`` evenly spaced draws) is evaluated at points spread over every
        component's own quantiles, so that each component's range is resolved whatever
        its width, and inverted by linear interpolation.
        """
        if self.n_dims != 1:
            raise ValueError(
                f"predictive_quantiles needs a 1-D output; this posterior has {self.n_dims} "
                "dimensions"
            )
        s = self.n_draws
        take = np.linspace(0, s - 1, min(s, max_draws)).round().astype(int)
        w = self.w[take].ravel() / len(take)
        mu, sigma = self.mu[take, :, 0].ravel(), self.sigma[take, :, 0].ravel()
        levels = ndtri(np.linspace(1e-12, 1 - 1e-12, 24))
        grid = np.unique((mu[:, None] + sigma[:, None] * levels[None, :]).ravel())
        cdf = np.empty(grid.size)
        for sl in _mixture.item_chunks(1, w.size, grid.size):
            cdf[sl] = ndtr((grid[None, sl] - mu[:, None]) / sigma[:, None]).T @ w
        cdf = np.maximum.accumulate(cdf)
        keep = np.concatenate([[True], np.diff(cdf) > 0])
        return np.interp(probs, cdf[keep], grid[keep])

    def sample_predictive(
        self, n: int, rng: np.random.Generator, prevalences: Any = None
    ) -> np.ndarray:
        """``n`` model-scale points (n, D) from the predictive output distribution.

        A draw ``t`` at random, a kernel of it by its weight, a point from the kernel;
        with prevalences ``r`` the kernel weights are those of ``sum_c r_c F_t(y | c)``
        (theory 3.2, generative mode).
        """
        factors = self.class_factors(prevalences)
        s, k = self.w.shape
        draw = rng.integers(0, s, n)
        if factors is None:
            weights = self.w[draw]
        else:  # r_c F_t(y | c) = sum_k w_k alpha_kc r_c / F_t(c) kernel_k
            weights = self.w[draw] * np.einsum("nkc,nc->nk", self.alpha[draw], factors[draw])
        weights = weights / weights.sum(axis=1, keepdims=True)
        component = (weights.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, k - 1)
        mu = self.mu[draw, component]
        sigma = self.sigma[draw, component]
        return mu + sigma * rng.standard_normal(mu.shape)

    @property
    def fixed_kernels(self) -> bool:
        """Whether every draw has the same kernels (model 2's always have)."""
        return _mixture.fixed_kernels(self.mu, self.sigma)

    def sample_kernels(
        self, n: int, rng: np.random.Generator, prevalences: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Model-scale points from the predictive output distribution's kernels, stratified
        by kernel: (points (N, D) in kernel order, each kernel's count (K,)).

        The predictive is ``p(y | D) = sum_k wbar_k kernel_k(y)`` with ``wbar`` the draws'
        mean kernel weights (theory 3.2; with prevalences ``r``, those of ``sum_c r_c
        F_t(y | c)``). Kernel ``k`` gets ``ceil(n wbar_k)`` points instead of a multinomial
        count, at least one if its weight is positive, so ``N`` lies between ``n`` and
        ``n + K``; the points' density is ``q(y) = sum_k (n_k / N) kernel_k(y)``, and
        ``p(y | D) / q(y) <= N / n``. Weighting points by ``1 / q`` integrates as drawing
        from the predictive does, without the variance of the kernels' random counts: on
        the two-logit study set at 3,600 items (Laplace draws, 20,000 points) the standard
        error of a named matrix's long-run utility fell from 0.026 to 0.002 (posterior sd
        0.067). Kernels fixed across draws only (:attr:`fixed_kernels`).
        """
        if not self.fixed_kernels:
            raise ValueError(
                "sample_kernels needs kernels fixed across draws (model 2's); these draws "
                "move their kernels: use sample_predictive"
            )
        # each draw's kernel weights: its joint weights summed over the classes
        weights = self.component_class_weights(prevalences).sum(axis=2)
        mean = (weights / weights.sum(axis=1, keepdims=True)).mean(axis=0)
        counts = np.where(mean > 0, np.ceil(n * mean), 0).astype(np.int64)
        component = np.repeat(np.arange(mean.size), counts)
        mu = self.mu[0, component]
        sigma = self.sigma[0, component]
        return mu + sigma * rng.standard_normal(mu.shape), counts


def _shape_text(shape: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("?" if e is None else str(e) for e in shape) + ")"
