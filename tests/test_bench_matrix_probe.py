"""bench/matrix_probe.py: its features give the log-odds written out class by class, and
its Laplace posterior's mode and curvature are those of the density it states."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax


@pytest.fixture(scope="module")
def probe(bench_import):
    pytest.importorskip("sklearn")  # bench/coverage.py -> decision_quality.py's peers
    pytest.importorskip("betacal")
    return bench_import("matrix_probe")


def _outputs(seed, n=40):
    return np.random.default_rng(seed).dirichlet(np.full(10, 0.7), size=n)


def test_features_give_the_log_odds_written_out(probe):
    """eta_c = gamma s_c + k_c + Q_c . z + [c = top] sum_g b_g exp(-(m - centre_g)^2 / 2 w^2)."""
    p = _outputs(1)
    centres, width = np.linspace(0.0, 3.0, probe.BUMPS), 0.6
    features = probe.design(p, 40, centres, width, terms=True)
    rng = np.random.default_rng(2)
    gamma, k, q, b = rng.normal(size=1)[0], rng.normal(size=10), rng.normal(size=(10, 10)), \
        rng.normal(size=probe.BUMPS)  # fmt: skip
    theta = np.concatenate([[gamma], k, q.ravel(), b])
    s = np.log((p * 39 + 0.1) / 40)
    for i in range(3):
        z = s[i] - s[i].mean()
        top, second = np.sort(s[i])[::-1][:2]
        bumps = np.exp(-0.5 * ((top - second - centres) / width) ** 2)
        want = gamma * s[i] + k + q @ z + (np.arange(10) == np.argmax(s[i])) * (bumps @ b)
        np.testing.assert_allclose(features[i] @ theta, want, rtol=1e-12, atol=1e-12)
    plain = probe.design(p, 40, centres, width, terms=False)
    assert plain.shape == (40, 10, 1 + probe.BUMPS)


def test_the_mode_and_curvature_are_the_stated_density_s(probe):
    """At the returned mode the gradient of the log posterior (by central differences) is
    0, and the inverse covariance is its negative Hessian (by central differences)."""
    p = _outputs(3)
    y = np.random.default_rng(4).integers(0, 10, 40)
    features = probe.design(p, 40, np.linspace(0.0, 3.0, probe.BUMPS), 0.6, terms=False)
    mean, sd = probe.prior(False, 0.5)

    def log_post(theta):
        lp = log_softmax(features @ theta, axis=1)[np.arange(40), y].sum()
        return lp - 0.5 * np.sum(((theta - mean) / sd) ** 2)

    mode, cov = probe.posterior(features, y, mean, sd)
    h, dim = 1e-4, mode.size
    step = np.eye(dim) * h
    grad = [(log_post(mode + step[i]) - log_post(mode - step[i])) / (2 * h) for i in range(dim)]
    np.testing.assert_allclose(grad, 0.0, atol=1e-3)
    hess = np.array([[(log_post(mode + step[i] + step[j]) - log_post(mode + step[i] - step[j])
                       - log_post(mode - step[i] + step[j]) + log_post(mode - step[i] - step[j]))
                      / (4 * h * h) for j in range(dim)] for i in range(dim)])  # fmt: skip
    np.testing.assert_allclose(np.linalg.inv(cov), -hess, rtol=1e-4, atol=1e-4)


def test_the_evidence_of_a_flat_likelihood_is_that_likelihood(probe):
    """With every feature 0 the likelihood is (1/10)^n whatever theta: the posterior is the
    prior, Laplace's evidence is exact, and equals n log(1/10)."""
    y = np.arange(40) % 10
    features = np.zeros((40, 10, 1 + 10 + 100 + probe.BUMPS))
    mean, sd = probe.prior(True, 0.3)
    mode, cov = probe.posterior(features, y, mean, sd)
    np.testing.assert_allclose(mode, mean, atol=1e-6)
    np.testing.assert_allclose(cov, np.diag(sd**2), rtol=1e-9)
    assert probe.log_evidence(features, y, mean, sd, mode, cov) == pytest.approx(
        -40 * np.log(10), rel=1e-9
    )


def test_nuts_draws_map_the_sampler_s_coordinates_back_to_theta(probe, monkeypatch):
    """With the sampler's ``zeta`` drawn from N(0, I) and ``log sd_q`` held at the starting
    sd, the draws nuts_draws returns are the Laplace Gaussian of the class-terms model at
    that sd (its mode and covariance from probe.posterior, Q on its own scale): the
    preconditioning and the non-centred Q are undone exactly."""
    from yieldwise.backends._base import SampleResult

    rng = np.random.default_rng(7)
    p = _outputs(5, n=60)
    y = rng.integers(0, 10, 60)
    centres, width = probe.bump_grid(p, 60)
    seen = {}

    class Program:
        def sample(self, data, chains, warmup, draws, seed, adapt_delta, progress, init):
            seen["data"] = data
            size = data["P"]
            zeta = np.random.default_rng(8).normal(size=(chains, 5000, size))
            log_sd = init[0]["log_sd_q"] + 1e-9 * np.random.default_rng(9).normal(
                size=(chains, 5000)
            )  # held (the noise only so that R-hat is defined)
            stats = {name: np.zeros((chains, 5000)) for name in ("diverging", "n_steps")}
            return SampleResult({"zeta": zeta, "log_sd_q": log_sd}, stats, "fake", "0", "0")

    class Backend:
        def compile(self, path):
            assert path == probe.NUTS_PROGRAM
            return Program()

    import yieldwise.backends

    monkeypatch.setattr(yieldwise.backends, "get_backend", lambda name: Backend())
    monkeypatch.setitem(probe.NUTS_SETTINGS, "chains", 2)
    theta, record = probe.nuts_draws(p, y, 60, centres, width, seed=1)
    mean, sd = probe.prior(True, record["sd_start"])
    mode, cov = probe.posterior(probe.design(p, 60, centres, width, True), y, mean, sd)
    assert record["sd_q"] == pytest.approx(record["sd_start"])
    spread = np.sqrt(np.diag(cov))
    np.testing.assert_allclose(theta.mean(axis=0), mode, atol=float(5 * spread.max() / 100))
    np.testing.assert_allclose(np.cov(theta.T), cov, atol=float(0.06 * spread.max() ** 2))
    data = seen["data"]
    np.testing.assert_allclose(data["onehot"].argmax(axis=1), y)
    np.testing.assert_allclose(data["Z"].sum(axis=1), 0.0, atol=1e-12)
