"""Benchmark of predictions from a transducer fitted on lattice outputs (vote fractions).

Goal (issue 17, item 7): answer in seconds, at most one evaluation of the censored
mixture per lattice value, for 10^6 lattice outputs and for 200,000 outputs off the
lattice (each read as the lattice value whose bin holds it). Target: 5 s each. The
posterior is synthetic (4 chains x 1,000 draws x 12 components on the logit scale, as in
bench_predict.py) with resolution 1/200, so no Stan run is needed. For comparison, the
earlier path (one evaluation per distinct off-lattice value) is timed on 2,000 distinct
values and scaled to 200,000.

Usage::

    .venv/bin/python bench/bench_lattice_predict.py            # measure and print
    .venv/bin/python bench/bench_lattice_predict.py --write    # ... and update docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from yieldwise import LatticeWarning, Transducer, _mixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import mib, peak_rss_bytes, write_section
from bench_predict import synthetic_transducer

SECTION = "## Transducer predictions on lattice outputs (issue 17)"
TARGET_SECONDS = 5.0


def lattice_transducer(rng: np.random.Generator) -> Transducer:
    """bench_predict's synthetic posterior, with calibration outputs k/200 in [0, 1]."""
    base = synthetic_transducer(rng)
    post = base.posterior_.posterior
    draws = {name: post[name].values for name in ("w", "alpha", "mu", "sigma")}
    votes = np.r_[np.arange(201), rng.integers(0, 201, 2000)] / 200
    return Transducer.from_draws(
        draws, votes, (votes > 0.5).astype(int), (0, 1), output_transform="logit",
        resolution="auto",
    )  # fmt: skip


def timed(transducer: Transducer, outputs: np.ndarray) -> tuple[float, int]:
    """Seconds of predict_proba and the number of mixture rows it evaluated."""
    rows: list[int] = []
    original = _mixture.log_joint

    def counting(*args):
        rows.append(len(args[4]))
        return original(*args)

    _mixture.log_joint = counting
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LatticeWarning)
            start = time.perf_counter()
            transducer.predict_proba(outputs)
            seconds = time.perf_counter() - start
    finally:
        _mixture.log_joint = original
    return seconds, sum(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    transducer = lattice_transducer(rng)
    assert transducer.transform_.resolution == (1 / 200,)
    on = rng.integers(0, 201, 1_000_000) / 200
    off = rng.random(200_000)
    on_seconds, on_rows = timed(transducer, on)
    off_seconds, off_rows = timed(transducer, off)
    # the earlier path: one censored evaluation per distinct value, here on 2,000 values
    sample = off[:2000, None]
    lower, upper, censored = transducer.transform_.intervals(sample)
    start = time.perf_counter()
    transducer._model_proba(lower, upper, censored, True, None)
    before = (time.perf_counter() - start) * len(off) / len(sample)
    met = on_seconds < TARGET_SECONDS and off_seconds < TARGET_SECONDS
    figures = {
        "command": "`python bench/bench_lattice_predict.py --write`",
        "date": dt.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}",
        "draws x components": f"{transducer.posterior.n_draws:,} x "
        f"{transducer.posterior.n_components}",
        "10^6 lattice outputs k/200": f"{on_seconds:.2f} s, {on_rows} bins evaluated "
        f"(target {TARGET_SECONDS:g} s)",
        "200,000 outputs off the lattice": f"{off_seconds:.2f} s, {off_rows} bins evaluated "
        f"(target {TARGET_SECONDS:g} s)",
        "the same, one evaluation per distinct value (before)": f"about {before:.0f} s "
        "(timed on 2,000 values, scaled)",
        "peak RSS (process)": mib(peak_rss_bytes()),
        "within target": "yes" if met else "NO",
    }
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:>{width}}: {value}")
    if args.write:
        rows = "\n".join(f"| {k} | {v} |" for k, v in figures.items())
        write_section(
            SECTION,
            f"{SECTION}\n\n`Transducer.predict_proba` on a transducer fitted on vote "
            "fractions k/200 (synthetic posterior, as above, with resolution 1/200). Each "
            "output is read as the lattice value whose bin holds it, and each lattice value "
            "is evaluated once.\n\n| quantity | value |\n|---|---|\n" + rows + "\n",
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
