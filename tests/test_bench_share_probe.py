"""bench/share_probe.py: its others' classes, its posterior's density written out item by
item, and the shipped share's temperature it finds on a large set."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp


@pytest.fixture(scope="module")
def probe(bench_import):
    return bench_import("share_probe")


def test_the_others_are_every_class_but_the_output_s_top_two(probe):
    p = np.array([[0.5, 0.3, 0.1, 0.05, 0.05] + [0.0] * 5,
                  [0.0] * 7 + [0.1, 0.2, 0.7]])  # fmt: skip
    s, z, mask = probe.features(p, 100)
    assert mask.sum(axis=1).tolist() == [8, 8]
    assert not mask[0, 0] and not mask[0, 1] and not mask[1, 9] and not mask[1, 8]
    # squeezed as the reduction's scores: log((p (n - 1) + 1 / C) / n)
    np.testing.assert_allclose(s[0, 0], np.log((0.5 * 99 + 0.1) / 100))
    np.testing.assert_allclose(z.sum(axis=1), 0.0, atol=1e-12)


def test_the_negative_log_posterior_is_the_conditional_logit_written_out(probe):
    """Model c at a random theta against a loop over items: each item's class among its
    others by a softmax of gamma s_j + k_j + Q_j . z, and the three Normal priors."""
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(10), size=30)
    s, z, mask = probe.features(p, 30)
    y = np.array([rng.choice(np.flatnonzero(row)) for row in mask])
    theta = rng.normal(0, 0.3, 1 + 10 + 100)
    gamma, k, q = np.exp(theta[0]), theta[1:11], theta[11:].reshape(10, 10)
    total = 0.0
    for i in range(30):
        others = np.flatnonzero(mask[i])
        eta = {j: gamma * s[i, j] + k[j] + q[j] @ z[i] for j in others}
        total += eta[y[i]] - logsumexp(list(eta.values()))
    prior = -0.5 * theta[0] ** 2 - 0.5 * (k**2).sum() / 2.0**2 - 0.5 * (q**2).sum() / 0.3**2
    got = probe.neg_log_posterior(theta, "c", s, z, mask, y, 2.0, 0.3)
    assert got == pytest.approx(-(total + prior), rel=1e-12)


def test_the_shipped_share_finds_the_documented_temperature(probe):
    """Model a on 20,000 items (about 400 of rank 'others'): the temperature at the mode
    is near the maximum-likelihood 3.6 that docs/model.md measured on 50,000 simulated
    items ('The others' temperature'), far from the 1 of the raw softmax."""
    p, c = probe.PROBLEM.sample(20_000, np.random.default_rng(3))
    s, z, mask = probe.features(p, 20_000)
    mine = mask[np.arange(len(c)), c]
    mode, draws = probe.fit("a", s[mine], z[mine], mask[mine], c[mine], 1.0, 0.5, 0)
    assert 3.2 < np.exp(mode[0]) < 4.0
    assert draws.shape == (400, 1) and 0.01 < np.exp(draws[:, 0]).std() < 0.3
