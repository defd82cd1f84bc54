"""Benchmark of the long-run utility posterior (theory 4; run by hand, docs/benchmarks.md).

Issue 4's target: 10,000 binary utility matrices (uniform over the binary chart of
theory 1.1) x 4,000 posterior draws, 1-D output, under 10 s and 2 GB. The posterior is
a synthetic one of the default size (4 chains x 1,000 draws, K = 5 components), built
without Stan so that only the integration is timed; both a continuous score (quadrature
on 4,096 cells) and vote fractions on a 1/200 lattice (201 exact cells) are measured.

    .venv/bin/python bench/bench_long_run.py            # print
    .venv/bin/python bench/bench_long_run.py --write    # ... and update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

import numpy as np
import pandas as pd

from yieldwise import Transducer, UtilityMatrix, compare, long_run_utility
from yieldwise.utility import chart_matrices, in_chart_domain

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import mib, peak_rss_bytes, write_section

SECTION = "## Long-run utility (theory 4)"


def synthetic_transducer(case: str, chains: int = 4, draws: int = 1000, k: int = 5, seed: int = 0):
    """A transducer with a random posterior of the default size (no Stan)."""
    rng = np.random.default_rng(seed)
    shape = (chains, draws, k)
    w = rng.dirichlet(np.ones(k), size=(chains, draws))
    share = rng.beta(1, 1, shape)
    alpha = np.stack([1 - share, share], axis=-1)
    mu = np.linspace(-4, 4, k) + rng.normal(0, 0.3, shape)
    sigma = np.exp(rng.normal(0, 0.2, shape))
    if case == "votes":
        outputs = np.round(rng.beta(0.5, 2, 3600) * 200) / 200
        spec, resolution = "logit", "auto"
    else:
        outputs = rng.normal(0, 2, 3600)
        spec, resolution = "identity", None
    classes = (rng.random(3600) < 0.1).astype(int)
    return Transducer.from_draws(
        {"w": w, "alpha": alpha, "mu": mu[..., None], "sigma": sigma[..., None]},
        pd.DataFrame({"score": outputs}), classes, (0, 1),
        output_transform=spec, resolution=resolution,
    )  # fmt: skip


def chart_batch(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    points = np.empty((0, 2))
    while len(points) < n:  # uniform over the admitted domain: reject outside it
        xy = rng.uniform(-1, 1, (2 * n, 2))
        points = np.vstack([points, xy[in_chart_domain(xy[:, 0], xy[:, 1])]])
    return chart_matrices(points[:n, 0], points[:n, 1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=int, default=10_000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    batch = chart_batch(args.matrices)
    rows = []
    for case in ("continuous", "votes"):
        t = synthetic_transducer(case)
        before = peak_rss_bytes()
        started = time.perf_counter()
        u = long_run_utility(t, batch)
        seconds = time.perf_counter() - started
        peak = peak_rss_bytes()
        sd = u.std(("chain", "draw")).values
        err = u.integration_error.values
        err_draws = u.integration_error_draws.values
        rows.append({
            "case": case, "draws": u.sizes["chain"] * u.sizes["draw"], "matrices": len(batch),
            "method": u.attrs["integration"], "seconds": seconds, "peak_rss": peak,
            "rss_before": before, "max_error": float(err.max()),
            "error_over_sd_max": float(np.max(err / sd)),
            "draws_error_over_sd_max": float(np.max(err_draws / sd)),
        })  # fmt: skip
        print(rows[-1])
    # Issue 4's second target: a 3-classifier comparison with one matrix, under 1 s.
    fits = {f"c{i}": synthetic_transducer(case, seed=i) for i, case in
            enumerate(("continuous", "continuous", "votes"))}  # fmt: skip
    started = time.perf_counter()
    result = compare(fits, UtilityMatrix([[1, -10], [0, 10]]))
    result.prob_superiority(), result.prob_best()
    compare_seconds = time.perf_counter() - started
    worst = float(result.integration_error.values.max())
    print({"compare_3_classifiers_seconds": compare_seconds, "max_error": worst})
    if args.write:
        lines = [
            f"{SECTION}\n",
            f"Command: `python bench/bench_long_run.py --write` ({datetime.date.today()}, "
            f"{os.cpu_count()} cores). {args.matrices:,} binary matrices uniform over the "
            "chart x 4,000 draws (K = 5), 1-D output; target under 10 s and 2 GB.\n",
            "| output | integration | seconds | peak RSS of the process | largest integration "
            "error (posterior mean) | largest error / posterior sd | the same for single draws "
            "(mean absolute error bound / posterior sd) |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['case']} | {r['method']} | {r['seconds']:.2f} | {mib(r['peak_rss'])} "
                f"| {r['max_error']:.2e} | {r['error_over_sd_max']:.3f} "
                f"| {r['draws_error_over_sd_max']:.3f} |"
            )
        lines.append(
            f"\nA comparison of 3 classifiers (two continuous, one lattice; 4,000 draws each) "
            f"with one matrix, `compare(...)` plus `prob_superiority()` and `prob_best()`: "
            f"{compare_seconds:.2f} s (target 1 s), largest integration error {worst:.1e} "
            "(a few matrices are integrated adaptively: cells next to decision boundaries "
            "are split, 4 rounds of 16).\n"
        )
        write_section(SECTION, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
