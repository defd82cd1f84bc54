"""bench/ten_classes.py's nearest-centre diagnostic: kernel responsibilities against a
brute-force sum of scipy's Normal densities."""

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
    dens = np.array([[w[j] * np.prod(stats.norm.pdf(z[i], mu[j], sigma[j])) for j in range(k)]
                     for i in range(n)])  # fmt: skip
    expected = dens / dens.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ten.responsibilities(w, mu, sigma, z), expected, rtol=1e-10)
    # an output far out in one kernel's tail: computed in logs, no 0 / 0
    far = ten.responsibilities(w, mu, sigma, mu[:1] + 60.0 * sigma[:1])
    assert np.isfinite(far).all() and np.isclose(far.sum(), 1.0)
