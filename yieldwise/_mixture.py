"""The transducer's mixture evaluated with numpy, vectorised over draws, items, components.

Mirrors ``stan/transducer.stan`` (docs/theory.md section 3): for posterior draw ``t``

    G_t(c, y) = sum_k w_tk alpha_tkc prod_d kernel_tkd(y_d)

where ``kernel_tkd`` is the Normal(mu_tkd, sigma_tkd) density of a point-valued output
and, for an interval-censored dimension, the Normal probability of the output's bin
``[lower_d, upper_d]`` (infinite edges allowed). The kernels are taken in log space and
each item's are shifted so that its largest is 1; the sums over components are then
linear (one matrix product), and the (draw, item) pairs whose sum underflows (below
``_TINY``: weights near the item below ~1e-300, or 0 in the stored draw) are recomputed
by a log-sum-exp over components with log weights, so no value is lost to underflow.

Shapes: ``w`` (S, K), ``alpha`` (S, K, C), ``mu`` and ``sigma`` (S, K, D); outputs
``lower``/``upper`` (n, D) (or (n,) when D = 1), ``censored`` length D. Items are
processed in chunks so that the (S, chunk, K) work arrays stay near ``max_elements``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy.special import log_ndtr, logsumexp

__all__ = [
    "as_bounds",
    "class_probabilities",
    "class_probability_chunks",
    "fixed_kernels",
    "joint_chunks",
    "kernel_joint",
    "log_joint",
    "log_likelihood",
    "per_draw_probabilities",
    "pooled_joint",
    "scaled_joint",
]


def as_bounds(
    lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked model-scale bounds ``(lower, upper, censored)``: (n, D), (n, D), (D,) ints.

    For a dimension that is not censored ``lower == upper`` (the point value, finite);
    for a censored one every bin has ``lower < upper``. The checks the Stan data get.
    """
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    if lo.ndim == 1:
        lo = lo[:, None]
    if hi.ndim == 1:
        hi = hi[:, None]
    if lo.ndim != 2 or lo.shape != hi.shape:
        raise ValueError(f"lower and upper must both have shape (n, D); got {lo.shape}, {hi.shape}")
    d = lo.shape[1]
    cens = np.zeros(d, dtype=np.int64) if censored is None else np.asarray(censored).ravel()
    if cens.shape != (d,) or not np.isin(cens, (0, 1)).all():
        raise ValueError(f"censored must be a length-{d} array of 0/1 flags, got {cens!r}")
    cens = cens.astype(np.int64)
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise ValueError("lower/upper contain NaN")
    point = cens == 0
    if point.any():
        if not np.array_equal(lo[:, point], hi[:, point]):
            raise ValueError("for a dimension that is not censored, lower must equal upper")
        if not np.isfinite(lo[:, point]).all():
            raise ValueError("point-valued (not censored) outputs must be finite")
    if (~point).any():
        lc, hc = lo[:, ~point], hi[:, ~point]
        if not (lc < hc).all():
            raise ValueError("for a censored dimension, every lower edge must be below its upper")
        if (lc == np.inf).any() or (hc == -np.inf).any():
            raise ValueError("a bin cannot start at +inf or end at -inf")
    return lo, hi, cens


_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)
_MAX_ELEMENTS = 4_000_000


def _prepare(w, alpha, mu, sigma, lower, upper, censored):
    w = np.asarray(w, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    if w.ndim == 1:  # a single draw
        w, alpha, mu, sigma = w[None], alpha[None], np.asarray(mu)[None], np.asarray(sigma)[None]
    s, k = w.shape
    if alpha.ndim != 3 or alpha.shape[:2] != (s, k):
        raise ValueError(f"alpha must have shape ({s}, {k}, C), got {alpha.shape}")
    mu, sigma, lo, hi, cens = _prepare_kernels(mu, sigma, lower, upper, censored, (s, k))
    return w, alpha, mu, sigma, lo, hi, cens


def _prepare_kernels(mu, sigma, lower, upper, censored, leading=None):
    """Checked ``(mu, sigma, lo, hi, cens)``: mu and sigma (S, K, D), with (S, K) equal to
    ``leading`` when given, and the bounds as :func:`as_bounds` checks them."""
    mu = np.asarray(mu, dtype=float)
    sigma = np.asarray(sigma, dtype=float)
    s, k = leading if leading is not None else ("S", "K")
    if (
        mu.ndim != 3
        or (leading is not None and mu.shape[:2] != leading)
        or (sigma.shape != mu.shape)
    ):
        raise ValueError(
            f"mu and sigma must have shape ({s}, {k}, D); got {mu.shape}, {sigma.shape}"
        )
    d = mu.shape[2]
    lo, hi, cens = as_bounds(lower, upper, censored)  # the checks the Stan data get
    if lo.shape[1] != d:
        raise ValueError(f"lower/upper must have shape (n, {d}); got {lo.shape}, {hi.shape}")
    return mu, sigma, lo, hi, cens.astype(bool)


def _log_phi_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Phi(b) - Phi(a)) for a < b, accurate in both tails (infinities allowed)."""
    lo = np.minimum(a, -b)  # reflect onto the side with less mass
    hi = np.minimum(b, -a)
    log_hi = log_ndtr(hi)
    delta = log_ndtr(lo) - log_hi  # <= 0
    # log(1 - exp(delta)), switching between the two accurate forms at log(1/2)
    return log_hi + np.where(
        delta > -np.log(2.0),
        np.log(-np.expm1(np.minimum(delta, -1e-300))),
        np.log1p(-np.exp(delta)),
    )


def log_kernels(mu, sigma, lo, hi, cens) -> np.ndarray:
    """(S, n, K): sum over dimensions of the log kernel of each item under each component."""
    out = np.zeros((mu.shape[0], lo.shape[0], mu.shape[1]))
    for d in range(mu.shape[2]):  # D is small; draws, items and components are vectorised
        m = mu[:, None, :, d]
        s = sigma[:, None, :, d]
        if cens[d]:
            za = (lo[None, :, None, d] - m) / s
            zb = (hi[None, :, None, d] - m) / s
            out += _log_phi_diff(za, zb)
        else:
            z = (lo[None, :, None, d] - m) / s
            out -= 0.5 * z * z + np.log(s) + _LOG_SQRT_2PI
    return out


def item_chunks(
    n_draws: int, n_components: int, n_items: int, max_elements: int = _MAX_ELEMENTS
) -> Iterator[slice]:
    """Slices of items such that draws x items x components stays near ``max_elements``."""
    step = max(1, max_elements // max(1, n_draws * n_components))
    for start in range(0, n_items, step):
        yield slice(start, min(n_items, start + step))


def fixed_kernels(mu: np.ndarray, sigma: np.ndarray) -> bool:
    """Whether every draw has the same kernels (the transducer's model 2 always has)."""
    mu, sigma = np.asarray(mu), np.asarray(sigma)
    return mu.ndim < 3 or bool(np.all(mu == mu[:1]) and np.all(sigma == sigma[:1]))


def joint_chunks(
    mu: np.ndarray, sigma: np.ndarray, n_classes: int, n_items: int,
    max_elements: int = _MAX_ELEMENTS,
) -> Iterator[slice]:  # fmt: skip
    """The item slices :func:`log_joint` works in, so a caller chunking alike makes one
    pass per call: with fixed kernels the work arrays are (chunk, K) and
    (chunk, draws x classes); otherwise (draws, chunk, K)."""
    mu = np.asarray(mu)
    s, k = (1, mu.shape[0]) if mu.ndim < 3 else mu.shape[:2]
    if fixed_kernels(mu, sigma):
        return item_chunks(1, max(k, s * n_classes), n_items, max_elements)
    return item_chunks(s, k, n_items, max_elements)


def _fixed_products(
    wa: np.ndarray, mu: np.ndarray, sigma: np.ndarray, lo: np.ndarray, hi: np.ndarray,
    cens: np.ndarray, max_elements: int,
) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:  # fmt: skip
    """With fixed kernels: ``(items, G', top)`` per chunk, ``G'`` (m, S, C) the mixture
    ``sum_k kernel_k(y) wa[t, k, c]`` divided by ``exp(top)``, ``top`` (m,) each item's
    largest log kernel (0 where none is finite), so the largest kernel term is exactly 1.

    Every draw has the same mu and sigma, so the kernels' log values are evaluated once
    per item, not once per draw and item, and the draws differ only in the weights wa:
    one BLAS product (chunk, K) x (K, S C) per chunk. (Broadcasting (1, m, K) against
    (S, K, C) made S small products: 76 s of a 3-class rules comparison, 2026-11-24.)
    Call under ``np.errstate`` that ignores underflow and log(0).
    """
    s, k, c = wa.shape
    wa_flat = np.moveaxis(wa, 0, 1).reshape(k, s * c)
    for sl in joint_chunks(mu, sigma, c, lo.shape[0], max_elements):
        kernels, top = _shifted_kernels(mu, sigma, lo[sl], hi[sl], cens)
        yield sl, (kernels @ wa_flat).reshape(-1, s, c), top


#: A (draw, item) whose joint summed over classes, at one scale per item (its largest
#: kernel value 1), falls below this is recomputed term by term in log space
#: (:func:`_exact_log_joint`): the linear sums lose it to underflow where the components
#: that reach the item carry weights below ~1e-300 in that draw (or exactly 0, as a
#: stored ``w`` below the smallest double is), which left p(c | y) NaN (a Laplace fit of
#: 2,000 ratings on a grid short of the top bin: 50 NaN draws of draws_proba, 2026-12-06).
#: Above it every class's term is exact to ~1e-308 absolute, so to 1e-28 of the sum.
_TINY = 1e-280


def _exact_log_joint(
    w: np.ndarray, alpha: np.ndarray, lk: np.ndarray, class_factors: np.ndarray | None = None
) -> np.ndarray:
    """``log G_t(c, y)`` of P (draw, item) pairs by a log-sum-exp over the components:
    ``w`` (P, K) and ``alpha`` (P, K, C) the pairs' draws' weights, ``lk`` (P, K) the items'
    log kernels (unshifted), ``class_factors`` (P, C) optional. Array (P, C); -inf only
    where every term is 0 in the stored draw. Cost P x K x C: for the few pairs the linear
    sums underflow on (:data:`_TINY`)."""
    with np.errstate(divide="ignore"):
        terms = np.log(alpha) + (np.log(w) + lk)[:, :, None]  # (P, K, C)
        out = logsumexp(terms, axis=1)
        if class_factors is not None:
            out = out + np.log(class_factors)
    return out


def _exact_pairs(
    rows: np.ndarray, draws: np.ndarray, w: np.ndarray, alpha: np.ndarray, mu: np.ndarray,
    sigma: np.ndarray, lo: np.ndarray, hi: np.ndarray, cens: np.ndarray,
    class_factors: np.ndarray | None = None, max_elements: int = _MAX_ELEMENTS,
) -> np.ndarray:  # fmt: skip
    """With fixed kernels, the exact ``log G_t(c, y)`` (P, C) of P (row, draw) pairs
    (:func:`_exact_log_joint`, the one fallback of every linear sum that underflows): the
    log kernels once per distinct row, the pairs in blocks of at most ``max_elements``
    numbers of (pairs, K, C) work."""
    used, where = np.unique(rows, return_inverse=True)
    lk = log_kernels(mu[:1], sigma[:1], lo[used], hi[used], cens)[0]  # (u, K)
    factors = None if class_factors is None else np.asarray(class_factors, float)
    _, k, c = alpha.shape
    out = np.empty((rows.size, c))
    step = max(1, max_elements // (k * c))
    for start in range(0, rows.size, step):
        block = slice(start, start + step)
        d = draws[block]
        out[block] = _exact_log_joint(w[d], alpha[d], lk[where[block]],
                                      None if factors is None else factors[d])  # fmt: skip
    return out


def _underflowed(
    sums: np.ndarray, w: np.ndarray, alpha: np.ndarray, mu: np.ndarray, sigma: np.ndarray,
    lo: np.ndarray, hi: np.ndarray, cens: np.ndarray, class_factors: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:  # fmt: skip
    """With fixed kernels, the (row, draw) pairs whose linear sum ``sums`` (m, S), at one
    scale per row (:func:`_fixed_products`), is below :data:`_TINY`, and their exact
    ``log G_t(c, y)`` (P, C) (:func:`_exact_pairs`): ``(rows, draws, exact)``; None when
    there are none."""
    bad = sums < _TINY  # NaN sums are not below
    if not bad.any():
        return None
    rows, draws = np.nonzero(bad)
    exact = _exact_pairs(rows, draws, w, alpha, mu, sigma, lo, hi, cens, class_factors)
    return rows, draws, exact


def _shifted_kernels(mu, sigma, lo, hi, cens) -> tuple[np.ndarray, np.ndarray]:
    """With fixed kernels, ``(exp(lk - top), top)``: the items' kernels (n, K) divided by
    ``exp(top)``, ``top`` (n,) each item's largest log kernel (0 where none is finite), so
    the largest entry of a row is exactly 1. Call under ``np.errstate`` that ignores
    underflow and log(0)."""
    lk = log_kernels(mu[:1], sigma[:1], lo, hi, cens)[0]  # (n, K): the first draw's
    top = lk.max(axis=1)
    top = np.where(np.isfinite(top), top, 0.0)
    return np.exp(lk - top[:, None]), top


def scaled_kernels(
    mu: np.ndarray, sigma: np.ndarray, lower: np.ndarray, upper: np.ndarray,
    censored: np.ndarray | None = None,
) -> np.ndarray | None:  # fmt: skip
    """``kernel_k(y_n) / s(y_n)`` (n, K) for kernels fixed across draws, else None.

    ``s(y_n)`` is the item's largest kernel value (1 where none is positive), so the
    largest entry of a row is exactly 1 and ``scaled_kernels @ (w_t alpha_t)`` is
    :func:`scaled_joint` for draw ``t``: a (n, K) matrix that a caller combines with any
    draws' weights (sums over draws taken before the kernels, theory 3.2 and 4).
    """
    mu, sigma, lo, hi, cens = _prepare_kernels(mu, sigma, lower, upper, censored)
    if not fixed_kernels(mu, sigma):
        return None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        return _shifted_kernels(mu, sigma, lo, hi, cens)[0]


def kernel_joint(
    kernels: np.ndarray, weights: np.ndarray, *, max_elements: int = _MAX_ELEMENTS
) -> np.ndarray:
    """``kernels @ weights[t]`` for every draw ``t``: array (S, n, C).

    ``kernels`` (n, K) are :func:`scaled_kernels` at some rows, ``weights`` (S, K, C) the
    draws' ``w_tk alpha_tkc``: the result is :func:`scaled_joint` of those draws at those
    rows, the kernels not evaluated again (a caller that needs the joint of the same rows
    for block after block of draws evaluates them once). One BLAS product (S C, K) x (K,
    chunk) per chunk of rows, at most ``max_elements`` numbers of work array each, written
    into an (S, C, n) array whose (S, n, C) view is returned: no transposing copy (which
    took two thirds of the time at 2 classes and 4,000 draws, 2026-12-04).
    """
    kernels = np.asarray(kernels, dtype=float)
    weights = np.asarray(weights, dtype=float)
    if kernels.ndim != 2 or weights.ndim != 3 or weights.shape[1] != kernels.shape[1]:
        raise ValueError(f"kernels must have shape (n, K) and weights (S, K, C) with the same "
                         f"K; got {kernels.shape} and {weights.shape}")  # fmt: skip
    s, k, c = weights.shape
    n = kernels.shape[0]
    flat = np.swapaxes(weights, 1, 2).reshape(s * c, k)  # (S C, K)
    out = np.empty((s, c, n))
    for sl in item_chunks(1, max(k, s * c), n, max_elements):
        np.matmul(flat, kernels[sl].T, out=out.reshape(s * c, n)[:, sl])
    return np.swapaxes(out, 1, 2)


def log_joint(
    w: np.ndarray,
    alpha: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray | None = None,
    *,
    max_elements: int = _MAX_ELEMENTS,
) -> np.ndarray:
    """log G_t(c, y) for every draw, item and class: array (S, n, C).

    For censored dimensions the kernel is the log-probability of the bin
    ``[lower, upper]``; for the others ``lower`` must equal ``upper`` (the point value)
    and the kernel is the log density. Label switching leaves the result unchanged.
    """
    w, alpha, mu, sigma, lo, hi, cens = _prepare(w, alpha, mu, sigma, lower, upper, censored)
    s, k, c = alpha.shape
    n = lo.shape[0]
    out = np.empty((s, n, c))
    wa = w[:, :, None] * alpha  # (S, K, C)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        if fixed_kernels(mu, sigma):
            for sl, product, top in _fixed_products(wa, mu, sigma, lo, hi, cens, max_elements):
                out[:, sl, :] = (np.log(product) + top[:, None, None]).transpose(1, 0, 2)
                fixed = _underflowed(product.sum(axis=2), w, alpha, mu, sigma, lo[sl], hi[sl], cens)
                if fixed is not None:  # pairs the linear sums lost to underflow
                    rows, draws, exact = fixed
                    out[draws, sl.start + rows] = exact
            return out
        for sl in item_chunks(s, k, n, max_elements):
            lk = log_kernels(mu, sigma, lo[sl], hi[sl], cens)  # (S, m, K)
            # log-sum-exp over components as one batched matrix product: shifting each
            # (draw, item) by its largest log kernel puts the largest term at exactly 1,
            # so the sum cannot overflow and loses nothing that matters (a class whose
            # every term underflows has probability below 1e-300 of the largest).
            top = lk.max(axis=2, keepdims=True)
            top = np.where(np.isfinite(top), top, 0.0)
            product = np.matmul(np.exp(lk - top), wa)  # (S, m, C)
            out[:, sl, :] = np.log(product) + top
            draws, rows = np.nonzero(product.sum(axis=2) < _TINY)
            if draws.size:  # pairs the linear sums lost to underflow (_TINY)
                out[draws, sl.start + rows] = _exact_log_joint(w[draws], alpha[draws],
                                                               lk[draws, rows])  # fmt: skip
    return out


def _joint_weights(
    w: np.ndarray, alpha: np.ndarray, class_factors: np.ndarray | None
) -> np.ndarray:
    """``w_tk alpha_tkc f_t(c)`` (S, K, C): the draws' joint weights, times the optional
    per-draw class factors ``f`` (S, C) (prevalence weights)."""
    wa = w[:, :, None] * alpha
    if class_factors is not None:
        wa = wa * np.asarray(class_factors, dtype=float)[:, None, :]
    return wa


def _as_mixture(wa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(w, alpha)`` whose product ``w[:, :, None] * alpha`` is the joint weights ``wa``:
    the form :func:`log_joint` takes them in."""
    w = wa.sum(axis=2)
    # a component without weight (0 in the stored draw) gets any alpha: its terms are 0
    alpha = np.divide(wa, w[:, :, None], out=np.full_like(wa, 1.0 / wa.shape[2]),
                      where=w[:, :, None] > 0)  # fmt: skip
    return w, alpha


def scaled_joint(
    w: np.ndarray,
    alpha: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray | None = None,
    *,
    class_factors: np.ndarray | None = None,
    max_elements: int = _MAX_ELEMENTS,
) -> np.ndarray:
    """``G_t(c, y) * f_t(c) / s(y)`` for every draw, item and class: array (S, n, C).

    ``f_t(c)`` are optional per-draw class factors (S, C) (prevalence weights), and
    ``s(y) > 0`` is one scale per item, shared by its draws and classes, which every
    ratio over draws and classes cancels (Monte Carlo masses, pooled probabilities):
    the largest kernel value of the item, so no term overflows. With fixed kernels this
    is one BLAS product per chunk and no log/exp round trip over (S, n, C) (twice as
    fast as ``exp(log_joint)`` for the 3,000 x 20,000 x 3 cells of a long-run
    integral). A value is 0 exactly where ``log_joint``'s is -inf.
    """
    w, alpha, mu, sigma, lo, hi, cens = _prepare(w, alpha, mu, sigma, lower, upper, censored)
    s, _, c = alpha.shape
    wa = _joint_weights(w, alpha, class_factors)
    if not fixed_kernels(mu, sigma):
        log_g = log_joint(*_as_mixture(wa), mu, sigma, lo, hi, cens, max_elements=max_elements)
        top = log_g.max(axis=(0, 2), keepdims=True)
        return np.exp(log_g - np.where(np.isfinite(top), top, 0.0))
    out = np.empty((s, lo.shape[0], c))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        for sl, product, _ in _fixed_products(wa, mu, sigma, lo, hi, cens, max_elements):
            out[:, sl, :] = product.transpose(1, 0, 2)
    return out


#: Largest tensor of per-axis kernel factors (product over dimensions of each axis's
#: distinct kernels) :func:`pooled_joint` contracts axis by axis; beyond it (scattered
#: centres in several dimensions), it evaluates the kernels themselves.
_MAX_TENSOR = 65_536
#: Rows per block of :func:`pooled_joint`'s per-axis factors, and the floor of their logs.
_POOL_BLOCK = 8192
_LOG_FLOOR = -700.0


def pooled_joint(
    w: np.ndarray,
    alpha: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray | None,
    factors: np.ndarray,
    groups: np.ndarray,
    *,
    max_elements: int = _MAX_ELEMENTS,
) -> np.ndarray:
    """``sum_t G_t(c, y_n) v_t[g_n, c] / s(y_n)``, array (n, C): the joint pooled over
    draws with per-draw class factors ``v`` (S, groups, C) of each item's group ``g_n``,
    one positive scale ``s(y_n)`` per item (ratios over classes are exact).

    With fixed kernels the sum over draws is taken first, ``B[k, g, c] = sum_t w_tk
    alpha_tkc v_t[g, c]``, so an item costs its kernels, not its draws: ``sum_k
    kernel_k(y_n) B[k, g_n, c]``. A product kernel is a product over dimensions of
    per-axis factors, and the kernels of a tensor grid share each axis's few distinct
    factors (14 per axis of a 2-D grid), so the sum over kernels is contracted axis by
    axis, one matrix product per group and axis, on (n, distinct factors) arrays
    (exact, not an approximation). Otherwise the draws are summed block by block.
    """
    w, alpha, mu, sigma, lo, hi, cens = _prepare(w, alpha, mu, sigma, lower, upper, censored)
    v = np.asarray(factors, dtype=float)
    g = np.asarray(groups).reshape(-1)
    s, _, c = alpha.shape
    if v.ndim != 3 or v.shape[0] != s or v.shape[2] != c:
        raise ValueError(f"factors must have shape ({s}, groups, {c}), found {v.shape}")
    if g.shape[0] != lo.shape[0] or (g.size and (g.min() < 0 or g.max() >= v.shape[1])):
        raise ValueError(
            f"groups must hold one index in 0 .. {v.shape[1] - 1} per item ({lo.shape[0]})"
        )
    wa = w[:, :, None] * alpha  # (S, K, C)
    out = np.empty((lo.shape[0], c))
    axes = []  # per dimension: the distinct (mu, sigma) and each kernel's index among them
    if fixed_kernels(mu, sigma):
        for d in range(mu.shape[2]):
            pairs, index = np.unique(np.column_stack([mu[0, :, d], sigma[0, :, d]]), axis=0,
                                     return_inverse=True)  # fmt: skip
            axes.append((pairs, index.reshape(-1)))
    if not axes or np.prod([len(a[0]) for a in axes]) > _MAX_TENSOR:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            for sl in joint_chunks(mu, sigma, c, lo.shape[0], max_elements):
                joint = scaled_joint(w, alpha, mu, sigma, lo[sl], hi[sl], cens)  # (S, m, C)
                out[sl] = np.einsum("tmc,tmc->mc", joint, v[:, g[sl], :])
        return out
    # B as a tensor over the axes' distinct factors, (U_1, ..., U_D, groups, C)
    b = np.stack([wa[:, :, j].T @ v[:, :, j] for j in range(c)], axis=2)  # (K, groups, C)
    sizes = tuple(len(pairs) for pairs, _ in axes)
    tensor = np.zeros((*sizes, *b.shape[1:]))
    np.add.at(tensor, tuple(index for _, index in axes), b)
    # the items sorted by group once, so that each group's rows are one slice, taken in
    # blocks of _POOL_BLOCK rows whose work arrays stay in cache (on 1e6 ten-class
    # outputs with 60 kernels, whole-array temporaries of 480 MB made it 2.1 s)
    # (one group, or no censored dimension: no sorted copy of the rows, or of the upper
    # bounds, is made; 8 MB each on 1e6 ten-class margins)
    single = g.size == 0 or (g == g[0]).all()
    order = None if single else np.argsort(g, kind="stable")
    present, starts = np.unique(g if single else g[order], return_index=True)
    ends = np.append(starts[1:], g.size)
    lo_sorted = lo if single else lo[order]
    hi_sorted = (hi if single else hi[order]) if any(cens) else None
    pooled = out if single else np.empty_like(out)
    # An uncensored axis whose kernels share one width (the shipped grids):
    # -((y - m_k) / sd)^2 / 2 - log sd is, up to a term of the row alone, which the row's
    # largest takes out, y m_k / sd^2 - m_k^2 / (2 sd^2): linear in y, two passes over
    # (rows, kernels) where the square took five. The factors of 1e6 rows x 60 kernels
    # in blocks of 8,192: 0.77 / 0.96 / 0.72 s -> 0.55 / 0.51 / 0.43 s (medians of 5,
    # three rounds in turn, 2026-12-03); predict_proba on 1e6 ten-class outputs moved
    # within that day's noise (docs/benchmarks.md), the exp being most of what is left.
    linear = [
        None if cens[d] or np.ptp(pairs[:, 1]) != 0
        else (pairs[None, :, 0] / pairs[0, 1] ** 2, -0.5 * (pairs[None, :, 0] / pairs[0, 1]) ** 2)
        for d, (pairs, _) in enumerate(axes)
    ]  # fmt: skip

    def factors(rows: slice) -> list[np.ndarray]:
        """Each axis's factors at the rows, scaled by each row's largest (the scale s(y))."""
        values = []
        for d, (pairs, _) in enumerate(axes):
            m, sd = pairs[None, :, 0], pairs[None, :, 1]
            if linear[d] is not None:
                slope, intercept = linear[d]
                lf = lo_sorted[rows, d : d + 1] * slope
                lf += intercept
            elif cens[d]:
                assert hi_sorted is not None
                za = (lo_sorted[rows, d : d + 1] - m) / sd
                lf = _log_phi_diff(za, (hi_sorted[rows, d : d + 1] - m) / sd)
            else:
                za = (lo_sorted[rows, d : d + 1] - m) / sd
                lf = za
                lf *= za
                lf *= -0.5
                lf -= np.log(sd)
            top = lf.max(axis=1, keepdims=True)
            lf -= np.where(np.isfinite(top), top, 0.0)
            # a factor below e^-700 of the row's largest counts as e^-700 (1e-304, above
            # the subnormals, whose exp is 4-9x slower): at most K e^-700 of the largest
            # term added to any sum
            np.maximum(lf, _LOG_FLOOR, out=lf)
            values.append(np.exp(lf, out=lf))
        return values

    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        for group, first, last in zip(present, starts, ends, strict=True):
            weights = tensor[..., group, :].reshape(sizes[0], -1)  # (U_1, rest)
            for a in range(first, last, _POOL_BLOCK):
                rows = slice(a, min(a + _POOL_BLOCK, last))
                f = factors(rows)
                acc = f[0] @ weights  # (m, U_2 ... U_D C)
                for d in range(1, len(sizes)):  # contract the next axis
                    acc = np.einsum("mu,mur->mr", f[d], acc.reshape(len(f[d]), sizes[d], -1))
                pooled[rows] = acc.reshape(-1, c)
    if order is not None:
        out[order] = pooled
    return out


def log_likelihood(
    w: np.ndarray,
    alpha: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    class_index: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray | None = None,
    counts: np.ndarray | None = None,
    *,
    max_elements: int = _MAX_ELEMENTS,
) -> np.ndarray:
    """Total log-likelihood of calibration data per draw, shape (S,).

    ``sum_n counts_n * log G_t(class_n, y_n)``: equals the Stan program's generated
    quantity ``log_lik`` when given the same (merged) rows. ``class_index`` is 0-based.
    """
    w, alpha, mu, sigma, lo, hi, cens = _prepare(w, alpha, mu, sigma, lower, upper, censored)
    cls = np.asarray(class_index, dtype=np.int64)
    n = lo.shape[0]
    if cls.shape != (n,):
        raise ValueError(f"class_index must have shape ({n},)")
    cnt = np.ones(n) if counts is None else np.asarray(counts, dtype=float)
    s, k, _ = alpha.shape
    total = np.zeros(s)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        if fixed_kernels(mu, sigma):
            wa = w[:, :, None] * alpha
            for sl, product, top in _fixed_products(wa, mu, sigma, lo, hi, cens, max_elements):
                picked = np.take_along_axis(product, cls[sl, None, None], axis=2)[:, :, 0]
                log_picked = np.log(picked) + top[:, None]  # (m, S)
                # pairs whose own class's linear sum underflowed (_TINY): exact values
                fixed = _underflowed(picked, w, alpha, mu, sigma, lo[sl], hi[sl], cens)
                if fixed is not None:
                    rows, draws, exact = fixed
                    log_picked[rows, draws] = exact[np.arange(rows.size), cls[sl][rows]]
                total += log_picked.T @ cnt[sl]  # (S,)
            return total
        log_w = np.log(w)
        for sl in item_chunks(s, k, n, max_elements):
            lk = log_kernels(mu, sigma, lo[sl], hi[sl], cens)  # (S, m, K)
            la = np.log(np.moveaxis(alpha[:, :, cls[sl]], 1, 2))  # (S, m, K)
            total += logsumexp(lk + la + log_w[:, None, :], axis=2) @ cnt[sl]
    return total


def class_probability_chunks(
    w: np.ndarray, alpha: np.ndarray, mu: np.ndarray, sigma: np.ndarray,
    lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None = None, *,
    class_factors: np.ndarray | None = None, max_elements: int = _MAX_ELEMENTS,
) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:  # fmt: skip
    """``(rows, mean, per_draw)`` chunk by chunk: the exchangeable ``p(c | y)`` (m, C), as
    :func:`class_probabilities`, and the per-draw ``F_t(c | y)`` (S, m, C), as
    :func:`per_draw_probabilities`, of the class weights ``G_t(c, y) f_t(c)`` (``f``: the
    optional per-draw ``class_factors`` (S, C), prevalence weights).

    With fixed kernels both are ratios of :func:`scaled_joint` (one matrix product per
    chunk, no log and exp over draws x rows x classes and no per-draw log-sum-exp: those
    took two thirds of predict_interval's time on a 1-D fit, 2026-12-04). The ratios are
    as exact as :func:`log_joint`'s, which also sums the components' weights linearly
    after shifting each row by its largest kernel. Moving kernels go through
    :func:`log_joint`.
    """
    w, alpha, mu, sigma, lo, hi, cens = _prepare(w, alpha, mu, sigma, lower, upper, censored)
    c = alpha.shape[2]
    wa = _joint_weights(w, alpha, class_factors)
    moving = None if fixed_kernels(mu, sigma) else _as_mixture(wa)  # log_joint's (w, alpha)
    for sl in joint_chunks(mu, sigma, c, lo.shape[0], max_elements):
        if moving is not None:
            log_g = log_joint(*moving, mu, sigma, lo[sl], hi[sl], cens, max_elements=max_elements)
            yield sl, class_probabilities(log_g), per_draw_probabilities(log_g)
            continue
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            kernels, _ = _shifted_kernels(mu, sigma, lo[sl], hi[sl], cens)
        g = kernel_joint(kernels, wa, max_elements=max_elements)  # (S, m, C), a scale a row
        pooled = g.sum(axis=0)  # (m, C): the exchangeable mean's numerator
        sums = g.sum(axis=2, keepdims=True)  # (S, m, 1)
        fixed = _underflowed(sums[:, :, 0].T, w, alpha, mu, sigma, lo[sl], hi[sl], cens,
                             class_factors)  # fmt: skip
        with np.errstate(divide="ignore", invalid="ignore"):  # the pairs of a sum below
            g /= sums  # _TINY (0: nan) are replaced below by their exact ratios
            mean = pooled / pooled.sum(axis=1, keepdims=True)
        if fixed is not None:  # pairs the linear sums lost to underflow: exact ratios
            rows, draws, exact = fixed
            g[draws, rows] = per_draw_probabilities(exact[:, None, :])[:, 0]
            lost = np.flatnonzero(pooled.sum(axis=1) < _TINY)  # every draw's, pooled
            if lost.size:  # a pooled sum below _TINY has every draw's below it, so all
                # the row's pairs are in `fixed`, in row-major order (np.nonzero)
                picked = exact[np.isin(rows, lost)]  # (lost x S, C)
                log_g = picked.reshape(lost.size, w.shape[0], c).transpose(1, 0, 2)
                mean[lost] = class_probabilities(log_g)  # (S, lost, C) -> (lost, C)
        yield sl, mean, g


def per_draw_probabilities(log_g: np.ndarray) -> np.ndarray:
    """Per-draw transducer ``F_t(c | y)`` from ``log_joint`` output: array (S, n, C)."""
    log_g = np.asarray(log_g, dtype=float)
    return np.exp(log_g - logsumexp(log_g, axis=2, keepdims=True))


def class_probabilities(log_g: np.ndarray, *, exchangeable: bool = True) -> np.ndarray:
    """Transducer p(c | y) from ``log_joint`` output (S, n, C): array (n, C).

    ``exchangeable=True``: ``sum_t G_t(c, y) / sum_t sum_c' G_t(c', y)`` (new outputs
    exchangeable with the calibration outputs); False: ``mean_t F_t(c | y)``
    (docs/theory.md section 3.2), the mean of :func:`per_draw_probabilities`.
    """
    log_g = np.asarray(log_g, dtype=float)
    if not exchangeable:
        return per_draw_probabilities(log_g).mean(axis=0)
    # One shift per item (its largest log G over draws and classes) makes the largest
    # term exactly 1, so the sums neither overflow nor lose the terms that matter; the
    # normalisation cancels the shift. Several times faster than scipy's logsumexp here.
    top = log_g.max(axis=(0, 2))  # (n,)
    top = np.where(np.isfinite(top), top, 0.0)
    pooled = np.exp(log_g - top[None, :, None]).sum(axis=0)  # (n, C)
    return pooled / pooled.sum(axis=1, keepdims=True)
