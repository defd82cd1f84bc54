"""TransducerPosterior: the draws in one form, and its math against brute force (no Stan)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from yieldwise import Transducer, TransducerPosterior

CLASSES = ("neg", "pos")


def _posterior(seed: int = 0, chains: int = 2, draws: int = 3, k: int = 4, d: int = 1):
    rng = np.random.default_rng(seed)
    s = chains * draws
    w = rng.dirichlet(np.ones(k), s)
    alpha = rng.dirichlet(np.ones(2), (s, k))
    mu = np.broadcast_to(rng.normal(0, 2, (1, k, d)), (s, k, d)).copy()
    sigma = np.broadcast_to(rng.uniform(0.5, 1.5, (1, k, d)), (s, k, d)).copy()
    return TransducerPosterior(w, alpha, mu, sigma, CLASSES, chains, draws)


def _brute_masses(post: TransducerPosterior, lower, upper, weights):
    mu, sigma = post.mu[:, :, 0], post.sigma[:, :, 0]
    out = np.zeros((post.n_draws, len(lower), post.n_classes))
    for t in range(post.n_draws):
        for j, (a, b) in enumerate(zip(lower, upper, strict=True)):
            kernel = norm.cdf(b, mu[t], sigma[t]) - norm.cdf(a, mu[t], sigma[t])  # (K,)
            out[t, j] = kernel @ weights[t]
    return out


def test_bin_masses_are_the_kernels_interval_probabilities():
    post = _posterior()
    edges = np.array([-np.inf, -1.0, 0.0, 0.5, 2.0, np.inf])
    weights = post.component_class_weights()
    expected = _brute_masses(post, edges[:-1], edges[1:], weights)
    between = post.bin_masses(edges[:-1], edges[1:], weights)
    on_edges = post.bin_masses(edges, weights=weights)
    np.testing.assert_allclose(between, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(on_edges, expected, rtol=1e-12, atol=1e-15)
    # over the whole line, each class's mass is its frequency F_t(c)
    np.testing.assert_allclose(on_edges.sum(axis=1), post.class_frequencies(), rtol=1e-12)


def test_bin_masses_with_kernels_that_move_between_draws():
    """The general path (kernels varying by draw, as a model-1 file has) against brute
    force, and the fixed-kernel shortcut equal to it on the same posterior."""
    fixed = _posterior(5)
    rng = np.random.default_rng(5)
    mu = fixed.mu + rng.normal(0, 0.3, fixed.mu.shape)
    sigma = fixed.sigma * rng.uniform(0.8, 1.2, fixed.sigma.shape)
    moving = TransducerPosterior(fixed.w, fixed.alpha, mu, sigma, CLASSES, 2, 3)
    edges = np.array([-np.inf, -2.0, -0.5, 0.0, 1.5, np.inf])
    for post in (fixed, moving):
        weights = post.component_class_weights()
        expected = _brute_masses(post, edges[:-1], edges[1:], weights)
        np.testing.assert_allclose(post.bin_masses(edges, weights=weights), expected,
                                   rtol=1e-12, atol=1e-15)  # fmt: skip
        np.testing.assert_allclose(post.bin_masses(edges[:-1], edges[1:], weights), expected,
                                   rtol=1e-12, atol=1e-15)  # fmt: skip
    with pytest.raises(ValueError, match="lower and upper must have the same shape"):
        fixed.bin_masses(edges[:-1], edges[1:3])


def test_prevalences_rescale_each_class_to_its_prevalence():
    post = _posterior(1)
    r = np.array([0.2, 0.8])
    weights = post.component_class_weights({"pos": 0.8, "neg": 0.2})
    masses = post.bin_masses(np.array([-np.inf, np.inf]), weights=weights)
    np.testing.assert_allclose(masses[:, 0], np.broadcast_to(r, (post.n_draws, 2)), rtol=1e-12)
    # the factors r_c / F_t(c), with F_t(c) = sum_k w_tk alpha_tkc summed by hand
    freq = np.array([[sum(post.w[t, k] * post.alpha[t, k, c] for k in range(post.w.shape[1]))
                      for c in range(2)] for t in range(post.n_draws)])  # fmt: skip
    np.testing.assert_allclose(post.class_factors(r), r / freq, rtol=1e-12)
    assert post.class_factors(None) is None
    with pytest.raises(ValueError, match="sum to 1"):
        post.class_factors([0.5, 0.6])
    with pytest.raises(ValueError, match="sum to 1"):
        post.check_prevalences([0.5, 0.6])
    with pytest.raises(ValueError, match="one value per class"):
        post.check_prevalences({"neg": 1.0})
    with pytest.raises(ValueError, match="one entry per class"):
        post.check_prevalences([0.2, 0.3, 0.5])


def test_log_joint_and_likelihood_are_the_brute_force_mixture():
    post = _posterior(2)
    y = np.array([[-1.5], [0.1], [2.0]])
    got = post.log_joint(y, y, [0])
    dens = norm.pdf(y[None, :, 0, None], post.mu[:, None, :, 0], post.sigma[:, None, :, 0])
    expected = np.log(np.einsum("snk,skc->snc", dens, post.component_class_weights()))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    cls = np.array([0, 1, 1])
    ll = post.log_likelihood(cls, y, y, [0], counts=np.array([2, 1, 3]))
    np.testing.assert_allclose(ll, expected[:, [0, 1, 2], cls] @ np.array([2, 1, 3]), rtol=1e-12)
    chunks = list(post.log_joint_chunks(y, y, np.array([0])))
    np.testing.assert_allclose(np.concatenate([g for _, g in chunks], axis=1), got)
    scaled = post.scaled_joint(y, y, [0])
    np.testing.assert_allclose(scaled / scaled.sum(axis=(0, 2), keepdims=True),
                               np.exp(expected) / np.exp(expected).sum(axis=(0, 2), keepdims=True),
                               rtol=1e-10)  # fmt: skip


def test_scaled_joint_of_a_slice_of_draws_is_the_whole_sliced():
    """A block of draws has the rows' scale of the whole (so blocks combine): with fixed
    kernels only the slice is computed, with moving kernels the whole is sliced; with
    prevalences too. Checked against the brute-force joint, normalised over everything."""
    fixed = _posterior(7, chains=2, draws=4)
    rng = np.random.default_rng(7)
    mu = fixed.mu + rng.normal(0, 0.3, fixed.mu.shape)
    moving = TransducerPosterior(fixed.w, fixed.alpha, mu, fixed.sigma, CLASSES, 2, 4)
    y = np.array([[-2.5], [-0.2], [0.4], [3.1]])
    for post in (fixed, moving):
        dens = norm.pdf(y[None, :, 0, None], post.mu[:, None, :, 0], post.sigma[:, None, :, 0])
        joint = np.einsum("snk,skc->snc", dens, post.component_class_weights((0.3, 0.7)))
        whole = post.scaled_joint(y, y, [0], prevalences=(0.3, 0.7))
        ratio = whole / joint  # one scale per row, the same for every draw and class
        first = np.broadcast_to(ratio[:1, :, :1], ratio.shape)
        np.testing.assert_allclose(ratio, first, rtol=1e-10)
        blocks = [post.scaled_joint(y, y, [0], prevalences=(0.3, 0.7), draws=slice(a, a + 3))
                  for a in range(0, post.n_draws, 3)]  # fmt: skip
        assert [len(b) for b in blocks] == [3, 3, 2]
        np.testing.assert_allclose(np.concatenate(blocks), whole, rtol=1e-12)


def test_kernel_joint_is_the_brute_force_joint_per_draw_from_kernels_made_once():
    """kernel_joint(scaled_kernels(rows), draws) is each draw's sum_k kernel_k(y) w_tk
    alpha_tkc by brute force, over one scale per row shared with the whole (so blocks
    combine), whether its work array holds every row or one at a time; moving kernels
    have no scaled_kernels; bad arguments name what was expected."""
    from yieldwise import _mixture

    post = _posterior(11, chains=2, draws=5, k=6)
    y = np.array([[-3.0], [-0.7], [0.1], [2.2], [40.0]])  # the last: every kernel ~0
    kernels = post.scaled_kernels(y, y, [0])
    assert kernels.shape == (5, 6) and np.allclose(kernels.max(axis=1), 1.0)
    dens = norm.pdf(y[None, :, 0, None], post.mu[:, None, :, 0], post.sigma[:, None, :, 0])
    brute = np.einsum("snk,skc->snc", dens, post.component_class_weights())
    whole = post.kernel_joint(kernels)
    ratio = whole[:, :4] / brute[:, :4]  # one positive scale per row
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:1, :, :1], ratio.shape), rtol=1e-10)
    np.testing.assert_allclose(whole, post.scaled_joint(y, y, [0]), rtol=1e-12)
    blocks = [post.kernel_joint(kernels, draws=slice(a, a + 4)) for a in range(0, 10, 4)]
    assert [len(b) for b in blocks] == [4, 4, 2]
    np.testing.assert_allclose(np.concatenate(blocks), whole, rtol=1e-12)
    weights = post.component_class_weights()
    np.testing.assert_allclose(_mixture.kernel_joint(kernels, weights, max_elements=1), whole,
                               rtol=1e-12)  # fmt: skip
    moving = TransducerPosterior(post.w, post.alpha, post.mu + np.arange(10)[:, None, None],
                                 post.sigma, CLASSES, 2, 5)  # fmt: skip
    assert moving.scaled_kernels(y, y, [0]) is None
    with pytest.raises(TypeError, match="draws must be a slice"):
        post.kernel_joint(kernels, draws=[0, 1])
    with pytest.raises(ValueError, match=r"kernels must have shape \(n, K\).*same K"):
        _mixture.kernel_joint(kernels[:, :5], weights)


def test_predictive_quantiles_and_samples_follow_the_predictive():
    post = _posterior(3)
    probs = np.array([0.05, 0.5, 0.95])
    q = post.predictive_quantiles(probs)
    cdf = np.mean([norm.cdf(q[:, None], post.mu[t, :, 0], post.sigma[t, :, 0]) @ post.w[t]
                   for t in range(post.n_draws)], axis=0)  # fmt: skip
    np.testing.assert_allclose(cdf, probs, atol=2e-3)
    points = post.sample_predictive(200_000, np.random.default_rng(0))
    mean = np.mean(post.w * post.mu[:, :, 0]) * post.n_components
    assert points.shape == (200_000, 1)
    assert abs(points.mean() - mean) < 0.02


def test_shapes_are_checked_naming_the_field():
    post = _posterior()
    with pytest.raises(ValueError, match=r"TransducerPosterior\.alpha must have shape \(6, 4, 2\)"):
        TransducerPosterior(post.w, post.alpha[:, :, :1], post.mu, post.sigma, CLASSES, 2, 3)
    with pytest.raises(ValueError, match=r"TransducerPosterior\.w must have shape"):
        TransducerPosterior(post.w, post.alpha, post.mu, post.sigma, CLASSES, 3, 3)
    with pytest.raises(ValueError, match=r"TransducerPosterior\.sigma"):
        TransducerPosterior(post.w, post.alpha, post.mu, post.sigma[:, :2], CLASSES, 2, 3)
    with pytest.raises(ValueError, match="1-D output"):
        _posterior(d=2).bin_masses(np.array([0.0, 1.0]))


def test_a_transducer_exposes_its_draws_as_one_posterior():
    post = _posterior(4)
    draws = {name: post.by_chain(getattr(post, name)) for name in ("w", "alpha", "mu", "sigma")}
    y = np.linspace(-3, 3, 40)
    t = Transducer.from_draws(draws, pd.DataFrame({"score": y}), np.where(y > 0, "pos", "neg"),
                              CLASSES, output_transform="identity", resolution=None)  # fmt: skip
    got = t.posterior
    assert (got.chains, got.draws, got.n_draws, got.n_components) == (2, 3, 6, 4)
    for name in ("w", "alpha", "mu", "sigma"):
        np.testing.assert_array_equal(getattr(got, name), getattr(post, name))
    with pytest.raises(RuntimeError, match="not fitted"):
        Transducer().posterior  # noqa: B018


def test_diagnose_is_a_pure_function_of_the_draws():
    """Two chains whose log-likelihoods sit 10 sd apart: R-hat far above 1.01."""
    from yieldwise.transducer.diagnostics import diagnose

    rng = np.random.default_rng(4)
    log_lik = rng.normal(0.0, 1.0, (2, 200)) + np.array([[0.0], [10.0]])
    proba = rng.dirichlet([5.0, 5.0], (2, 200, 3))  # (chain, draw, item, class)
    table = diagnose(log_lik, proba, np.array([[0.1], [0.5], [0.9]]), CLASSES)
    assert list(table["quantity"]) == ["log_lik"] + ["p(class | output)"] * 3
    assert list(table["output"])[1:] == ["0.1", "0.5", "0.9"]
    assert table.loc[0, "r_hat"] > 1.5 and not table.loc[0, "ok"]
    assert table.loc[1:, "r_hat"].max() < 1.05


def test_an_approximations_draws_are_ok_only_within_their_pareto_limit():
    """Independent draws (well-mixed chains) pass R-hat and ESS whatever the approximation's
    error: with an approximation's Pareto k the table is ok only at k <= min(1 - 1 /
    log10(S), 0.7), here 1 - 1 / log10(2000) = 0.697 for S = 2 x 1,000 draws; NaN fails."""
    import warnings

    from yieldwise.transducer.diagnostics import DiagnosticsWarning, diagnose, warn_on_invariants

    rng = np.random.default_rng(5)
    log_lik = rng.normal(0.0, 1.0, (2, 1000))
    proba = rng.dirichlet([5.0, 5.0], (2, 1000, 3))
    reference = np.array([[0.1], [0.5], [0.9]])
    mcmc = diagnose(log_lik, proba, reference, CLASSES)
    assert mcmc["ok"].all() and mcmc.attrs["pareto_k"] is None
    limit = 1.0 - 1.0 / np.log10(2000)
    for k, ok in [(0.3, True), (limit - 1e-9, True), (limit + 1e-9, False), (1.2, False),
                  (float("nan"), False)]:  # fmt: skip
        table = diagnose(log_lik, proba, reference, CLASSES, pareto_k=k)
        assert table["ok"].tolist() == [ok] * 4, k
        assert table.attrs["pareto_k_limit"] == pytest.approx(limit)
        np.testing.assert_array_equal(table["r_hat"], mcmc["r_hat"])  # the rest unchanged
    bad = diagnose(log_lik, proba, reference, CLASSES, pareto_k=1.2)
    with pytest.warns(DiagnosticsWarning, match=r"k = 1.20, above 0.70.*default backend"):
        warn_on_invariants(bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the backend said it at fit time: not twice
        warn_on_invariants(bad, approximation_warned=True)


def test_a_laplace_fits_diagnostics_carry_its_pareto_k():
    y = np.random.default_rng(3).normal(size=300)
    cls = np.where(np.random.default_rng(4).random(300) < 1 / (1 + np.exp(-2 * y)), "pos", "neg")
    t = Transducer(backend="laplace", seed=1, progress=False).fit(y, cls)
    table = t.diagnostics()
    k = t.sampler_summary()["pareto_k"]
    assert table.attrs["pareto_k"] == k and table.attrs["pareto_k_limit"] == 0.7
    assert table["ok"].all() == (k <= 0.7)


def _grid_posterior(centres: list[np.ndarray], widths: list[float], draws: int = 3):
    """A fixed-kernel posterior on the tensor grid of ``centres`` with one width per axis."""
    rng = np.random.default_rng(2)
    grid = np.stack(np.meshgrid(*centres, indexing="ij"), axis=-1).reshape(-1, len(centres))
    k = grid.shape[0]
    mu = np.broadcast_to(grid, (draws, k, len(centres))).copy()
    sigma = np.broadcast_to(np.array(widths), (draws, k, len(centres))).copy()
    w, alpha = rng.dirichlet(np.ones(k), draws), rng.dirichlet(np.ones(2), (draws, k))
    return TransducerPosterior(w, alpha, mu, sigma, CLASSES, 1, draws)


def test_within_reach_moves_only_rows_beyond_a_thousand_widths():
    """within_reach: a point beyond FAR_WIDTHS widths past the outermost centre is set to
    the bound on that side; a censored bin keeps its width with its nearer edge at the
    bound; rows within reach come back unchanged. Centres closer than a width widen the
    reach by width / spacing (capped), so that the outermost kernel still dominates."""
    from yieldwise.transducer.posterior import FAR_SPACING_FACTOR_MAX, FAR_WIDTHS

    # centres 2 and 1 apart, widths 0.5 and 0.8: the reach is 1,000 widths on both axes
    post = _grid_posterior([np.arange(-4.0, 5.0, 2.0), np.arange(0.0, 3.0)], [0.5, 0.8])
    high = np.array([4.0 + 500.0, 2.0 + 800.0])
    low = np.array([-4.0 - 500.0, 0.0 - 800.0])
    assert FAR_WIDTHS == 1000.0
    lower = np.array([[0.5, 0.0], [1e300, 2.0], [-1e9, 1e155], [high[0] - 1, low[1] + 1]])
    upper = lower + np.array([0.0, 1.0])  # axis 1 censored to unit bins
    got_lower, got_upper = post.within_reach(lower, upper)
    expected_lower = lower.copy()
    expected_lower[1, 0] = high[0]
    expected_lower[2] = [low[0], high[1]]
    np.testing.assert_array_equal(got_lower, expected_lower)
    np.testing.assert_array_equal(got_upper - got_lower, upper - lower)  # widths kept
    same_lower, same_upper = post.within_reach(lower[[0, 3]], upper[[0, 3]])
    np.testing.assert_array_equal(same_lower, lower[[0, 3]])
    np.testing.assert_array_equal(same_upper, upper[[0, 3]])
    # centres 0.1 apart at width 0.5: five times the reach; 1e-9 apart: capped
    close = _grid_posterior([np.array([0.0, 0.1, 0.2])], [0.5])
    reach = 5 * FAR_WIDTHS * 0.5
    point = np.array([[0.2 + 0.6 * reach], [0.2 + 1.2 * reach]])
    moved, _ = close.within_reach(point, point)
    np.testing.assert_allclose(moved, [[0.2 + 0.6 * reach], [0.2 + reach]], rtol=1e-15)
    tight = _grid_posterior([np.array([0.0, 1e-9])], [0.5])
    moved, _ = tight.within_reach(np.array([[1e300]]), np.array([[1e300]]))
    assert moved[0, 0] == pytest.approx(1e-9 + FAR_SPACING_FACTOR_MAX * FAR_WIDTHS * 0.5)


def test_class_probabilities_far_out_are_their_limit():
    """Far beyond the kernels p(c | y) is the outermost kernel's (one width for all, the
    shipped grids' form): F_t(c | y) -> alpha_tK[c], the exchangeable predictive ->
    sum_t w_tK alpha_tK[c] / sum_t w_tK. At outputs from 30 to 1e300 on either side (where
    float64 lost the kernels' ratios from about 1e7 and overflowed above 1e154),
    predict_proba, draws_proba and predict_interval give that limit."""
    rng = np.random.default_rng(11)
    chains, draws, k = 2, 40, 7
    s = chains * draws
    w = rng.dirichlet(np.ones(k), s)
    alpha = rng.dirichlet(np.ones(2), (s, k))
    mu = np.broadcast_to(np.linspace(-3, 3, k)[None, :, None], (s, k, 1)).copy()
    sigma = np.full((s, k, 1), 0.8)
    post = TransducerPosterior(w, alpha, mu, sigma, CLASSES, chains, draws)
    items = np.linspace(-3, 3, 40)
    t = Transducer.from_draws(
        {name: post.by_chain(getattr(post, name)) for name in ("w", "alpha", "mu", "sigma")},
        pd.DataFrame({"score": items}), np.where(items > 0, "pos", "neg"), CLASSES,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    for sign, outer in ((1, k - 1), (-1, 0)):
        y = sign * np.array([30.0, 1e3, 1e8, 1e10, 1e155, 1e300])
        limit = (w[:, outer, None] * alpha[:, outer]).sum(axis=0) / w[:, outer].sum()
        with pytest.warns(Warning):  # the extrapolation warning, on purpose
            proba = t.predict_proba(y)
            per_draw = t.draws_proba(y).values.reshape(s, y.size, 2)
            band = t.predict_interval(y, prob=0.5)
        np.testing.assert_allclose(proba, np.broadcast_to(limit, proba.shape), rtol=1e-12)
        np.testing.assert_allclose(per_draw, np.broadcast_to(alpha[:, None, outer], per_draw.shape),
                                   rtol=1e-12)  # fmt: skip
        expected = np.quantile(alpha[:, outer], 0.25, axis=0)
        np.testing.assert_allclose(band["lower"].values, np.broadcast_to(expected, (y.size, 2)),
                                   rtol=1e-12)  # fmt: skip
