"""Data preparation for the transducer's Stan program, and its numpy mixture (no Stan)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logit

from yieldwise import _mixture, _stan_data


def _random_parameters(rng, s, k, c, d):
    w = rng.dirichlet(np.ones(k), size=s)
    alpha = rng.dirichlet(np.ones(c), size=(s, k))
    mu = rng.normal(0.0, 2.0, size=(s, k, d))
    sigma = np.exp(rng.normal(0.0, 0.5, size=(s, k, d)))
    return w, alpha, mu, sigma


def _vote_bins(rng, n=300, trees=50):
    cls = rng.integers(0, 2, n)
    votes = rng.binomial(trees, np.where(cls == 1, 0.9, 0.05)) / trees
    lo, hi = _stan_data.resolution_bins(votes, 1 / trees, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        return cls, votes, logit(lo), logit(hi)


def _bin_probability(a, b, m, sd):
    if a + b > 2 * m:  # upper side: difference of survival functions keeps precision
        return stats.norm.sf(a, m, sd) - stats.norm.sf(b, m, sd)
    return stats.norm.cdf(b, m, sd) - stats.norm.cdf(a, m, sd)


# --- merge_rows ------------------------------------------------------------------------


def test_merge_rows_counts_and_content():
    cls = np.array([0, 1, 0, 0, 1, 1])
    out = np.array([[0.5, 1.0], [0.5, 1.0], [0.5, 1.0], [-0.0, np.inf], [0.0, np.inf], [2.0, 3]])
    cls_u, out_u, counts = _stan_data.merge_rows(cls, out)
    assert counts.sum() == 6
    rows = {(c, *o): n for c, o, n in zip(cls_u, map(tuple, out_u), counts, strict=True)}
    assert rows == {
        (0, 0.0, np.inf): 1,
        (0, 0.5, 1.0): 2,
        (1, 0.0, np.inf): 1,
        (1, 0.5, 1.0): 1,
        (1, 2.0, 3.0): 1,
    }


def test_merge_rows_rejects_nan_and_bad_shapes():
    with pytest.raises(ValueError, match="NaN"):
        _stan_data.merge_rows(np.array([0, 1]), np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match="shape"):
        _stan_data.merge_rows(np.array([0, 1, 1]), np.zeros((2, 1)))


def test_merging_is_exact_for_the_likelihood():
    """Merged rows with counts give the same log-likelihood as one row per item."""
    rng = np.random.default_rng(1)
    cls, _, lo, hi = _vote_bins(rng)
    params = _random_parameters(rng, 5, 4, 2, 1)
    data = _stan_data.build_stan_data(cls, lo, hi, [1], 2, 4)
    assert data["N"] < 80 < cls.size  # the merge really merged
    sentinel_free = (
        np.where(data["y_lower"] < -1e11, -np.inf, data["y_lower"]),
        np.where(data["y_upper"] > 1e11, np.inf, data["y_upper"]),
    )
    merged = _mixture.log_likelihood(
        *params, data["cls"] - 1, *sentinel_free, data["censored"], data["count"]
    )
    # brute force: one item at a time, scipy's Normal CDF (survival function above mu)
    w, alpha, mu, sigma = params
    brute = np.zeros(len(w))
    for t in range(len(w)):
        for n in range(cls.size):
            p_bin = [
                _bin_probability(lo[n], hi[n], m, sd)
                for m, sd in zip(mu[t, :, 0], sigma[t, :, 0], strict=True)
            ]
            brute[t] += np.log(np.sum(w[t] * alpha[t, :, cls[n]] * np.array(p_bin)))
    np.testing.assert_allclose(merged, brute, rtol=1e-10)
    unmerged = _mixture.log_likelihood(*params, cls, lo, hi, [1])
    np.testing.assert_allclose(merged, unmerged, rtol=1e-12)


# --- detect_resolution -----------------------------------------------------------------


@pytest.mark.parametrize("trees", [10, 200, 1000])
def test_detect_resolution_vote_fractions(trees):
    rng = np.random.default_rng(trees)
    votes = rng.binomial(trees, rng.beta(0.5, 3, 5000)) / trees
    assert _stan_data.detect_resolution(votes) == 1 / trees


def test_detect_resolution_offset_lattice_and_percent_scores():
    assert _stan_data.detect_resolution(np.repeat([0.1, 0.35, 0.6, 1.1], 5)) == pytest.approx(0.25)
    assert _stan_data.detect_resolution(np.repeat(np.arange(0, 101), 3) / 100) == 0.01


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(0).normal(size=500),  # continuous: no repeats
        np.random.default_rng(0).random(500).astype(np.float32),  # float32, continuous
        np.full(50, 0.3),  # a single value: no lattice
        np.repeat([0.0, 0.1, 0.1000001], 20),  # an "accidental" lattice of 1e5 points
        np.repeat([0.0, 1.0, np.sqrt(2)], 10),  # values off any lattice
    ],
)
def test_detect_resolution_continuous_returns_none(values):
    assert _stan_data.detect_resolution(values) is None


def test_resolution_bins_reach_infinity_on_the_logit_scale():
    lo, hi = _stan_data.resolution_bins(np.array([0.0, 0.5, 1.0]), 0.005, (0.0, 1.0))
    np.testing.assert_allclose(lo, [0.0, 0.4975, 0.9975])
    np.testing.assert_allclose(hi, [0.0025, 0.5025, 1.0])
    with np.errstate(divide="ignore"):
        assert logit(lo[0]) == -np.inf and logit(hi[2]) == np.inf


def test_adjacent_bins_share_their_edge_exactly():
    """k/200 + 1/400 and (k+1)/200 - 1/400 can differ by an ulp; the bins must tile."""
    votes = np.arange(201) / 200
    naive_hi, naive_lo = votes[:-1] + 0.0025, votes[1:] - 0.0025
    assert (naive_hi != naive_lo).any()  # the rounding this guards against does occur
    lo, hi = _stan_data.resolution_bins(votes, 0.005, (0.0, 1.0))
    assert np.array_equal(hi[:-1], lo[1:])
    np.testing.assert_allclose(hi - lo, np.r_[0.0025, np.full(199, 0.005), 0.0025], rtol=1e-9)
    # values a lattice step apart keep distinct edges
    lo2, hi2 = _stan_data.resolution_bins(np.array([0.1, 0.3]), 0.005, (0.0, 1.0))
    assert lo2[1] > hi2[0]


# --- default_prior / build_stan_data -------------------------------------------------


def test_default_prior_is_scaled_to_the_data():
    rng = np.random.default_rng(2)
    y = rng.normal(10.0, 3.0, size=(2000, 2)) * [1.0, 100.0]
    prior = _stan_data.default_prior(y, y, [0, 0], 8)
    np.testing.assert_allclose(prior["mu_loc"], [10.0, 1000.0], rtol=0.05)
    half = np.array([7.0, 700.0])  # (q99 - q1) / 2 is ~2.33 sd
    np.testing.assert_allclose(prior["mu_scale"], 0.5 * half, rtol=0.1)
    np.testing.assert_allclose(np.exp(prior["log_sigma_loc"]), 0.25 * half, rtol=0.1)
    assert prior["eta_scale"] > 0 and prior["alpha_conc"] > 0


def test_build_stan_data_sentinels_and_indices():
    rng = np.random.default_rng(3)
    cls, _, lo, hi = _vote_bins(rng)
    data = _stan_data.build_stan_data(cls, lo, hi, np.array([1]), 2, 5)
    assert data["K"] == 5 and data["C"] == 2 and data["D"] == 1
    assert set(np.unique(data["cls"])) == {1, 2}  # 1-based for Stan
    assert sum(data["count"]) == cls.size
    assert np.isfinite(data["y_lower"]).all() and np.isfinite(data["y_upper"]).all()
    assert data["y_lower"].min() <= -1e12 and data["y_upper"].max() >= 1e12
    for key in ("mu_loc", "mu_scale", "log_sigma_loc", "log_sigma_scale"):
        assert data[key].shape == (1,)
    override = _stan_data.build_stan_data(cls, lo, hi, [1], 2, 5, prior={"eta_scale": 0.5})
    assert override["eta_scale"] == 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"lower": np.array([[0.0], [1.0]]), "upper": np.array([[0.5], [1.0]])},
            "lower must equal",
        ),
        ({"censored": [1], "upper": np.array([[0.0], [0.0]])}, "below its upper"),
        ({"class_index": np.array([0, 2])}, r"integers in \[0, 2\)"),
        ({"censored": [0, 1]}, "length-1"),
        ({"lower": np.array([[np.inf], [0.0]]), "upper": np.array([[np.inf], [0.0]])}, "finite"),
    ],
)
def test_build_stan_data_validates(kwargs, message):
    args = {
        "class_index": np.array([0, 1]),
        "lower": np.array([[0.0], [0.0]]),
        "upper": np.array([[0.0], [0.0]]),
        "censored": [0],
        "n_classes": 2,
        "n_components": 3,
        "prior": None,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        _stan_data.build_stan_data(**args)


# --- the numpy mixture -----------------------------------------------------------------


def test_log_joint_matches_scipy_brute_force():
    """Mixed point-valued and censored dimensions, infinite bin edges included."""
    rng = np.random.default_rng(4)
    s, k, c, n = 3, 4, 3, 7
    w, alpha, mu, sigma = _random_parameters(rng, s, k, c, 2)
    point = rng.normal(size=n)
    lo_c = rng.normal(size=n)
    hi_c = lo_c + rng.uniform(0.01, 1.0, n)
    lo_c[0], hi_c[1] = -np.inf, np.inf
    lower = np.column_stack([point, lo_c])
    upper = np.column_stack([point, hi_c])
    got = _mixture.log_joint(w, alpha, mu, sigma, lower, upper, [0, 1], max_elements=20)
    assert got.shape == (s, n, c)
    expected = np.zeros((s, n, c))
    for t in range(s):
        for i in range(n):
            for cc in range(c):
                total = 0.0
                for kk in range(k):
                    dens = stats.norm.pdf(point[i], mu[t, kk, 0], sigma[t, kk, 0])
                    prob = _bin_probability(lo_c[i], hi_c[i], mu[t, kk, 1], sigma[t, kk, 1])
                    total += w[t, kk] * alpha[t, kk, cc] * dens * prob
                expected[t, i, cc] = np.log(total)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_log_joint_bins_far_in_the_tails_stay_finite_and_accurate():
    w, alpha = np.ones((1, 1)), np.full((1, 1, 2), 0.5)
    mu, sigma = np.zeros((1, 1, 1)), np.ones((1, 1, 1))
    lower = np.array([[30.0], [-40.0], [-np.inf]])
    upper = np.array([[30.01], [-39.99], [-45.0]])
    got = _mixture.log_joint(w, alpha, mu, sigma, lower, upper, [1])[0, :, 0]
    logsf, logcdf = stats.norm.logsf, stats.norm.logcdf
    expected = np.log(0.5) + np.array(
        [
            logsf(30.0) + np.log1p(-np.exp(logsf(30.01) - logsf(30.0))),
            logcdf(-39.99) + np.log1p(-np.exp(logcdf(-40.0) - logcdf(-39.99))),
            logcdf(-45.0),
        ]
    )
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def test_class_probabilities_two_ways():
    rng = np.random.default_rng(5)
    params = _random_parameters(rng, 50, 3, 2, 1)
    y = np.linspace(-2, 2, 5)
    log_g = _mixture.log_joint(*params, y, y, [0])
    pooled = _mixture.class_probabilities(log_g)
    averaged = _mixture.class_probabilities(log_g, exchangeable=False)
    np.testing.assert_allclose(pooled.sum(axis=1), 1.0)
    np.testing.assert_allclose(averaged.sum(axis=1), 1.0)
    g = np.exp(log_g)
    np.testing.assert_allclose(pooled, g.sum(0) / g.sum(axis=(0, 2))[:, None])
