"""bench/ten_classes.py's nearest-centre diagnostic: kernel responsibilities against a
brute-force sum of scipy's Normal densities and bin probabilities."""

from __future__ import annotations

import numpy as np
from scipy import stats


def test_responsibilities_are_the_kernels_shares_of_the_mixture_density(bench_import):
    ten = bench_import("ten_classes")
    rng = np.random.default_rng(5)
    k, d, n = 6, 3, 40
    w = rng.dirichlet(np.ones(k))
    mu = rng.normal(0.0, 2.0, (k, d))
    sigma = rng.uniform(0.3, 1.5, (k, d))
    z = rng.normal(0.0, 2.0, (n, d))
    point = np.zeros(d, bool)  # per dimension: every dimension a point value
    dens = np.array([[w[j] * np.prod(stats.norm.pdf(z[i], mu[j], sigma[j])) for j in range(k)]
                     for i in range(n)])  # fmt: skip
    expected = dens / dens.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ten.responsibilities(w, mu, sigma, z, z, point), expected,
                               rtol=1e-10)  # fmt: skip
    # a censored first dimension: the kernel's probability of the bin, not its density
    lower, upper = z.copy(), z.copy()
    lower[:, 0], upper[:, 0] = z[:, 0] - 0.4, z[:, 0] + 0.4
    censored = np.array([True, False, False])
    mass = np.array([[w[j] * (stats.norm.cdf(upper[i, 0], mu[j, 0], sigma[j, 0])
                              - stats.norm.cdf(lower[i, 0], mu[j, 0], sigma[j, 0]))
                      * np.prod(stats.norm.pdf(z[i, 1:], mu[j, 1:], sigma[j, 1:]))
                      for j in range(k)] for i in range(n)])  # fmt: skip
    # atol: scipy's cdf(b) - cdf(a) loses digits far in a tail (shares below 1e-9), where
    # the package's log-space difference does not
    np.testing.assert_allclose(ten.responsibilities(w, mu, sigma, lower, upper, censored),
                               mass / mass.sum(axis=1, keepdims=True), rtol=1e-8,
                               atol=1e-12)  # fmt: skip
    # an output far out in one kernel's tail: scaled per row, no 0 / 0
    far = mu[:1] + 60.0 * sigma[:1]
    shares = ten.responsibilities(w, mu, sigma, far, far, point)
    assert np.isfinite(shares).all() and np.isclose(shares.sum(), 1.0)
