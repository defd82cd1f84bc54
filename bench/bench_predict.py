"""Benchmark of ``Transducer.predict_proba`` on 10^6 one-dimensional outputs.

Target (issue 3): under 2 s with all 4,000 draws, maximum absolute error under
1e-4 against the exact formula. The posterior is a synthetic one, larger than a
default fit (4 chains x 1,000 draws and 12 components, against 4 x 500 and 8 by
default; 2 classes, a logit-scale output), so no Stan run is needed; the exact formula is evaluated
on a random subsample of the outputs for the error.

Usage::

    .venv/bin/python bench/bench_predict.py            # measure and print
    .venv/bin/python bench/bench_predict.py --write    # ... and update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from yieldwise import Transducer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import mib, peak_rss_bytes, write_section

SECTION = "## Transducer predictions (theory 3.2)"
TARGET_SECONDS = 2.0
TARGET_ERROR = 1e-4


def synthetic_transducer(rng: np.random.Generator, chains: int = 4, draws: int = 1000,
                         k: int = 12) -> Transducer:  # fmt: skip
    """A transducer whose draws scatter around a two-class logit-scale mixture."""
    s = chains * draws
    centres = np.linspace(-4, 4, k)
    w = rng.dirichlet(np.full(k, 5.0), size=s)
    p1 = 1 / (1 + np.exp(-centres))  # class-1 share rises along the output
    alpha1 = np.clip(p1 + rng.normal(0, 0.05, (s, k)), 0.01, 0.99)
    alpha = np.stack([1 - alpha1, alpha1], axis=-1)
    mu = (centres + rng.normal(0, 0.2, (s, k)))[..., None]
    sigma = np.exp(rng.normal(np.log(0.8), 0.2, (s, k)))[..., None]
    draws_ = {name: a.reshape(chains, draws, *a.shape[1:]) for name, a in
              {"w": w, "alpha": alpha, "mu": mu, "sigma": sigma}.items()}  # fmt: skip
    calibration = rng.random(500)
    return Transducer.from_draws(
        draws_, calibration, (calibration > 0.5).astype(int), (0, 1), resolution=None
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--check", type=int, default=2_000, help="outputs checked exactly")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    transducer = synthetic_transducer(rng)
    outputs = rng.beta(0.7, 0.7, args.n)
    start = time.perf_counter()
    proba = transducer.predict_proba(outputs)
    seconds = time.perf_counter() - start
    check = rng.choice(args.n, args.check, replace=False)
    lower, upper, censored = transducer.transform_.intervals(outputs[check, None])
    exact = transducer._model_proba(lower, upper, censored, True, None)
    error = float(np.abs(proba[check] - exact).max())
    figures = {
        "command": "`python bench/bench_predict.py --write`",
        "date": dt.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        "outputs x draws x components": f"{args.n:,} x {transducer.posterior.n_draws:,} x "
        f"{transducer.posterior.n_components}",
        "wall time of predict_proba": f"{seconds:.2f} s (target {TARGET_SECONDS:g} s)",
        "max abs error vs exact formula": f"{error:.2e} on {args.check:,} random outputs "
        f"(target {TARGET_ERROR:g}); grid check {transducer.interpolation_error_:.2e}",
        "peak RSS (process)": mib(peak_rss_bytes()),
        "within target": "yes" if seconds < TARGET_SECONDS and error < TARGET_ERROR else "NO",
    }
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:>{width}}: {value}")
    if args.write:
        rows = "\n".join(f"| {k} | {v} |" for k, v in figures.items())
        write_section(
            SECTION,
            f"{SECTION}\n\n`Transducer.predict_proba` (exchangeable formula) on distinct "
            "continuous 1-D outputs with a synthetic posterior (4,000 draws x 12 components, "
            "twice the draws and 1.5 times the components of a default fit). "
            "Above 4,096 distinct outputs the exact formula is evaluated on a grid refined "
            "until its interpolation error at every grid midpoint is below 1e-6, then "
            "interpolated.\n\n| quantity | value |\n|---|---|\n" + rows + "\n",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
