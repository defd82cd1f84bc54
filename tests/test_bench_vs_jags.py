"""The JAGS speed benchmark's own numerics (bench/bench_vs_jags.py), checked by brute force.

The benchmark compares samplers through quantities computed by one numpy function from
each sampler's draws, and moves data to R as source text and draws back as binary
files; each of those is checked here without JAGS.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def jags_bench():
    sys.path.insert(0, str(BENCH))
    try:
        import bench_vs_jags
    finally:
        sys.path.remove(str(BENCH))
    return bench_vs_jags


def random_draws(rng, s=6, k=3, c=2):
    w = rng.dirichlet(np.ones(k), size=s)
    alpha = rng.dirichlet(np.ones(c), size=(s, k))
    return {
        "w": w,
        "alpha": alpha,
        "mu": rng.normal(0, 1.5, size=(s, k)),
        "sigma": rng.uniform(0.3, 2.0, size=(s, k)),
    }


def a_case(jags_bench, lower, upper, cls, grid_lower, grid_upper):
    return jags_bench.Case(
        "test", len(cls), lower, cls, lower, upper, grid_lower, grid_upper,
        [str(g) for g in grid_lower], {}, {},
    )  # fmt: skip


def test_invariants_equal_bayes_rule_and_loglik_item_by_item(jags_bench):
    rng = np.random.default_rng(4)
    draws = random_draws(rng)
    y = rng.normal(0.5, 1.2, size=23)
    cls = rng.integers(0, 2, size=23)
    grid = np.array([-1.0, 0.0, 0.7, 2.5])
    got = jags_bench.invariants(draws, a_case(jags_bench, y, y, cls, grid, grid))
    assert got.shape == (6, len(grid) + 1)
    for s in range(6):
        w, a, mu, sd = (draws[k][s] for k in ("w", "alpha", "mu", "sigma"))
        for j, g in enumerate(grid):
            # p(1 | y) = sum_k w_k a_k1 N(y; mu_k, sd_k) / sum_k w_k N(y; mu_k, sd_k)
            dens = w * norm.pdf(g, mu, sd)
            assert got[s, j] == pytest.approx((dens * a[:, 1]).sum() / dens.sum(), rel=1e-10)
        loglik = sum(
            np.log(sum(w[k] * a[k, c] * norm.pdf(v, mu[k], sd[k]) for k in range(3)))
            for v, c in zip(y, cls, strict=True)
        )
        assert got[s, -1] == pytest.approx(loglik, rel=1e-10)


def bin_mass(lo, hi, mu, sd):
    """P(lo < Y <= hi) per component with scipy: upper tails above the mean, CDFs below."""
    upper_tails = norm.sf(lo, mu, sd) - norm.sf(hi, mu, sd)
    cdfs = norm.cdf(hi, mu, sd) - norm.cdf(lo, mu, sd)
    return np.where(lo > mu, upper_tails, cdfs)


def test_binned_invariants_use_bin_probabilities(jags_bench):
    # Bins on the logit scale, open at both ends, as vote fractions get them; far-tail
    # bins too, where a difference of CDFs taken on the wrong side would round to 0.
    rng = np.random.default_rng(6)
    draws = random_draws(rng)
    edges = np.array([-np.inf, -4.0, -1.0, -0.5, 0.3, 2.0, 9.0, 9.5, np.inf])
    which = rng.integers(0, len(edges) - 1, size=30)
    lower, upper = edges[which], edges[which + 1]
    cls = rng.integers(0, 2, size=30)
    g_lo, g_hi = edges[[0, 3, 6]], edges[[1, 4, 7]]
    got = jags_bench.invariants(draws, a_case(jags_bench, lower, upper, cls, g_lo, g_hi))
    for s in range(6):
        w, a, mu, sd = (draws[k][s] for k in ("w", "alpha", "mu", "sigma"))

        for j in range(3):
            m = w * bin_mass(g_lo[j], g_hi[j], mu, sd)
            assert got[s, j] == pytest.approx((m * a[:, 1]).sum() / m.sum(), rel=1e-8)
        loglik = sum(
            np.log((w * a[:, c] * bin_mass(lo, hi, mu, sd)).sum())
            for lo, hi, c in zip(lower, upper, cls, strict=True)
        )
        assert got[s, -1] == pytest.approx(loglik, rel=1e-8)


def test_draws_file_is_read_back_by_node_name(jags_bench, tmp_path):
    # The worker writes coda's (iteration, node) matrix row by row as float64, the node
    # names alongside, in coda's column order (alpha[k,c] with k fastest).
    rng = np.random.default_rng(5)
    draws = random_draws(rng, s=4, k=2, c=3)
    names, columns = [], []
    for c in range(3):
        for k in range(2):
            names.append(f"alpha[{k + 1},{c + 1}]")
            columns.append(draws["alpha"][:, k, c])
    for base in ("mu", "sigma", "w"):
        for k in range(2):
            names.append(f"{base}[{k + 1}]")
            columns.append(draws[base][:, k])
    path = tmp_path / "draws0.bin"
    np.column_stack(columns).astype(np.float64).tofile(path)
    (tmp_path / "draws0.bin.names").write_text("\n".join(names) + "\n")
    back = jags_bench.JagsChains._read(path)
    assert set(back) == {"alpha", "mu", "sigma", "w"}
    for key, value in draws.items():
        np.testing.assert_array_equal(back[key], value)


@pytest.mark.skipif(shutil.which("Rscript") is None, reason="R (Rscript) is not installed")
def test_r_literal_is_read_by_r_as_the_same_values(jags_bench):
    matrix = np.array([[0.1, 0.2, 0.3], [1.5, -2.25, 1e-300]])
    value = {
        "N": 3,
        "y": np.array([0.5, -1.0, 2.0]),
        "cls": np.array([1, 2, 2]),
        "alpha": matrix,
        ".RNG.name": "base::Mersenne-Twister",
    }
    script = (
        f"x <- {jags_bench.r_literal(value)}\n"
        "stopifnot(is.integer(x$cls), is.integer(x$N), identical(dim(x$alpha), c(2L, 3L)))\n"
        "cat(x$N, x$y, x$cls, sprintf('%.17g', t(x$alpha)), x$.RNG.name)\n"
    )
    out = subprocess.run(
        ["Rscript", "-e", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "3"
    np.testing.assert_array_equal(np.array(out[1:4], float), value["y"])
    assert out[4:7] == ["1", "2", "2"]
    # row by row from R's column-major storage: the same matrix, exactly
    np.testing.assert_array_equal(np.array(out[7:13], float).reshape(2, 3), matrix)
    assert out[13] == "base::Mersenne-Twister"
