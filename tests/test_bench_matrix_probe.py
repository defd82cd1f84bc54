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
