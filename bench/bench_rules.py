"""Benchmark of the standard-versus-augmented comparison (theory 2, 4; docs/benchmarks.md,
"Three classes: the standard-versus-augmented comparison").

``yieldwise.rules.standard_vs_augmented(t, n_matrices=M, seed=0)`` on the shipped 3-class
digits (``data/digits_three.csv``, every item), the transducer fitted with the Laplace
backend (its default draws, 14 x 14 fixed kernels), so that no Stan run is timed; the
long-run utilities are integrated over 20,000 Monte Carlo points. This is what a
three-class report's rules section computes (10,000 matrices). Only the call is timed,
the first in the process, as a report's is.

``--oracle`` times ``yieldwise.long_run.oracle_utility`` instead (theory 4: decisions
made with each draw's own masses, the ceiling of the value of more data) on M random
4 x 3 matrices (uniform on [0, 1], seed 0), and reports the process's peak memory: the
oracle needs every draw's masses at every point, the largest work of a report.

Usage::

    .venv/bin/python bench/bench_rules.py [--matrices 10000] [--draws N] [--oracle]
"""

from __future__ import annotations

import argparse
import functools
import resource
import time
import warnings

import numpy as np

from yieldwise import Transducer
from yieldwise.datasets import load_digits_three
from yieldwise.long_run import oracle_utility
from yieldwise.rules import standard_vs_augmented


@functools.cache
def fitted(draws: int | None, seed: int = 1) -> Transducer:
    """The Laplace fit to every digit, once per process (a test calls both modes)."""
    frame = load_digits_three()
    kw = {"backend": "laplace", "seed": seed, "progress": False}
    if draws is not None:
        kw["draws"] = draws
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Transducer(**kw).fit(frame[["p_three", "p_five", "p_eight"]], frame["label"])


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=int, default=10_000)
    parser.add_argument("--draws", type=int, default=None, help="per chain (default: the fit's)")
    parser.add_argument("--oracle", action="store_true", help="time oracle_utility instead")
    args = parser.parse_args(argv)
    if args.matrices < 1:
        parser.error(f"--matrices must be at least 1, got {args.matrices}")
    t = fitted(args.draws)
    if args.oracle:
        matrices = np.random.default_rng(0).uniform(0, 1, (args.matrices, 4, 3))
        started = time.perf_counter()
        oracle = oracle_utility(t, matrices)
        seconds = time.perf_counter() - started
        result = {
            "mean_utility": float(oracle.mean()),
            "max_integration_error": float(np.max(oracle.integration_error)),
        }
    else:
        started = time.perf_counter()
        frame = standard_vs_augmented(t, n_matrices=args.matrices, seed=0)
        seconds = time.perf_counter() - started
        result = {
            "share_not_worse": frame.attrs["share_not_worse"],
            "mean_gain": float(frame["gain"].mean()),
        }
    out = {
        "matrices": args.matrices,
        "draws": t.posterior.n_draws,
        "seconds": seconds,
        **result,
        # ru_maxrss is in KiB on Linux
        "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(" ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items()))
    return out


if __name__ == "__main__":
    main()
