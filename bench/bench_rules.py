"""Benchmark of the standard-versus-augmented comparison (theory 2, 4; docs/benchmarks.md,
"Three classes: the standard-versus-augmented comparison").

``yieldwise.rules.standard_vs_augmented(t, n_matrices=M, seed=0)`` on the shipped 3-class
digits (``data/digits_three.csv``, every item), the transducer fitted with the Laplace
backend (its default draws, 14 x 14 fixed kernels), so that no Stan run is timed; the
long-run utilities are integrated over 20,000 Monte Carlo points. This is what a
three-class report's rules section computes (10,000 matrices). Only the call is timed,
the first in the process, as a report's is.

Usage::

    .venv/bin/python bench/bench_rules.py [--matrices 10000] [--draws N]
"""

from __future__ import annotations

import argparse
import time
import warnings

from yieldwise import Transducer
from yieldwise.datasets import load_digits_three
from yieldwise.rules import standard_vs_augmented


def fitted(draws: int | None, seed: int = 1) -> Transducer:
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
    args = parser.parse_args(argv)
    t = fitted(args.draws)
    started = time.perf_counter()
    frame = standard_vs_augmented(t, n_matrices=args.matrices, seed=0)
    seconds = time.perf_counter() - started
    out = {
        "matrices": args.matrices,
        "draws": t.posterior.n_draws,
        "seconds": seconds,
        "share_not_worse": frame.attrs["share_not_worse"],
        "mean_gain": float(frame["gain"].mean()),
    }
    print(" ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items()))
    return out


if __name__ == "__main__":
    main()
