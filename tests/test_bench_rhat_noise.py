"""bench/rhat_noise.py: the simulated chains have the ESS they are built for, and R-hat's
chance misses behave as the simulation says."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def noise(bench_import):
    return bench_import("rhat_noise")


@pytest.mark.parametrize("ratio", [0.25, 0.5, 1.0])
def test_ar1_chains_have_the_bulk_ess_per_draw_they_are_built_for(noise, ratio):
    """ArviZ's bulk ESS of long simulated chains is ``ratio`` times their draws (the
    AR(1) closed form (1 - rho) / (1 + rho)), and each series has unit variance."""
    import arviz as az

    x = noise.ar1_chains(np.random.default_rng(3), (4, 20_000), ratio)
    assert float(az.ess(x, method="bulk")) / x.size == pytest.approx(ratio, rel=0.08)
    assert x.var() == pytest.approx(1.0, rel=0.05)


def test_largest_rhat_grows_with_quantities_and_shrinks_with_draws(noise):
    """Independent draws of one quantity: R-hat near 1; the largest of 19 is larger than
    one's, and more draws bring it closer to 1 (the median over simulated fits)."""
    rng = np.random.default_rng(5)
    one = np.median(noise.largest_rhat(rng, 40, 1, 0.5, 500))
    many = np.median(noise.largest_rhat(rng, 40, 19, 0.5, 500))
    longer = np.median(noise.largest_rhat(rng, 40, 19, 0.5, 2000))
    assert 1.0 < one < many
    assert 1.0 < longer < many


def test_a_bad_ratio_is_refused(noise):
    with pytest.raises(ValueError, match=r"ratio must lie in \(0, 1\], found 0"):
        noise.ar1_chains(np.random.default_rng(0), (2, 10), 0.0)
