"""Memory and time of a ten-class transducer on many calibration items (issue 16; run by
hand, figures in docs/benchmarks.md, "a class-reduced transducer's cells, bounded" and "a
ten-class fit's own peak").

The panel's ``softmax-10`` (bench/_problems.py), ``ITEMS`` calibration items drawn with
seed 7, fitted by ``Transducer(backend=..., seed=1)``; then ``long_run_utility`` with
``M`` random 10 x 10 matrices (seed 3) on the saved fit, its cells held whole, made a
block of draws at a time, or as the default chooses (``long_run._DENSE_CELLS``).

    .venv/bin/python bench/bench_ten_class_memory.py fit 20000 --save /tmp/t20000.nc
    .venv/bin/python bench/bench_ten_class_memory.py long-run /tmp/t20000.nc --cells blocks
    .venv/bin/python bench/bench_ten_class_memory.py bands /tmp/t20000.nc --outputs 2000

Each mode is meant to run in a process of its own: ``fit`` reports the process's peak
resident set size after the fit (the process's first large work, so its peak is the
fit's), ``long-run`` the call's own peak allocation by tracemalloc (numpy's arrays
included) and the process's peak RSS; ``bands`` the same for ``predict_interval`` at the
fit's first calibration outputs, with the sums of the bands' limits to compare runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
import warnings

import numpy as np
import pandas as pd

import yieldwise.long_run as long_run
from yieldwise import Transducer, long_run_utility

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import mib, peak_rss_bytes
from _problems import softmax_ten_problem

#: long_run._DENSE_CELLS per --cells choice (None: the shipped threshold).
CELLS = {"auto": None, "held": 10**15, "blocks": 0}


def fit(items: int, backend: str, draws: int | None, save: str | None) -> dict:
    """Fit ``items`` softmax-10 items; seconds and the process's peak RSS after it."""
    problem = softmax_ten_problem(points=20_000)
    y, classes = problem.sample(items, np.random.default_rng(7))
    kw = {"backend": backend, "seed": 1, "progress": False}
    if draws is not None:
        kw["draws"] = draws
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Laplace backend's own warning
        t = Transducer(**kw).fit(pd.DataFrame(y, columns=problem.columns), classes)
    out = {"items": items, "backend": t.backend_, "draws": t.posterior.n_draws,
           "seconds": time.perf_counter() - started, "peak_rss": peak_rss_bytes()}  # fmt: skip
    if save:
        t.save(save)
    print(f"fit items={items} backend={out['backend']} draws={out['draws']} "
          f"seconds={out['seconds']:.1f} peak_rss={mib(out['peak_rss'])}")  # fmt: skip
    return out


def run_long_run(path: str, cells: str, matrices: int) -> dict:
    """long_run_utility on the saved fit: seconds, the call's tracemalloc peak, results."""
    t = Transducer.load(path)
    shipped = long_run._DENSE_CELLS
    if CELLS[cells] is not None:
        long_run._DENSE_CELLS = CELLS[cells]
    batch = np.random.default_rng(3).uniform(-1, 1, (matrices, 10, 10))
    try:
        tracemalloc.start()
        started = time.perf_counter()
        u = long_run_utility(t, batch)
        seconds = time.perf_counter() - started
        call_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        long_run._DENSE_CELLS = shipped
    out = {"cells": cells, "seconds": seconds, "call_peak": call_peak,
           "peak_rss": peak_rss_bytes(), "mean_utility": float(u.values.mean()),
           "max_error": float(np.max(u.integration_error.values))}  # fmt: skip
    print(f"long-run cells={cells} matrices={matrices} seconds={seconds:.1f} "
          f"call_peak={mib(call_peak)} peak_rss={mib(out['peak_rss'])} "
          f"mean={out['mean_utility']:.10f} max_error={out['max_error']:.3g}")  # fmt: skip
    return out


def run_bands(path: str, outputs: int, prob: float) -> dict:
    """predict_interval at the saved fit's first ``outputs`` calibration outputs: seconds,
    the call's tracemalloc peak, and the sums of the bands' limits (to compare runs)."""
    t = Transducer.load(path)
    y = t.calibration_outputs()[:outputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # outputs beyond the margins' range: intended
        try:
            tracemalloc.start()
            started = time.perf_counter()
            band = t.predict_interval(y, prob=prob)
            seconds = time.perf_counter() - started
            call_peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    out = {"outputs": y.shape[0], "seconds": seconds, "call_peak": call_peak,
           "peak_rss": peak_rss_bytes(), "lower_sum": float(band["lower"].values.sum()),
           "upper_sum": float(band["upper"].values.sum()),
           "mean_sum": float(band["mean"].values.sum())}  # fmt: skip
    print(f"bands outputs={out['outputs']} prob={prob} seconds={seconds:.1f} "
          f"call_peak={mib(call_peak)} peak_rss={mib(out['peak_rss'])} "
          f"lower_sum={out['lower_sum']:.12f} upper_sum={out['upper_sum']:.12f}")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    f = sub.add_parser("fit", help="fit ITEMS items and report the peak")
    f.add_argument("items", type=int)
    f.add_argument("--backend", default="laplace")
    f.add_argument("--draws", type=int, default=None, help="per chain (default: the fit's)")
    f.add_argument("--save", default=None, help="write the fit here (NetCDF)")
    lr = sub.add_parser("long-run", help="long_run_utility on a saved fit")
    lr.add_argument("path")
    lr.add_argument("--cells", choices=sorted(CELLS), default="auto")
    lr.add_argument("--matrices", type=int, default=20)
    b = sub.add_parser("bands", help="predict_interval at a saved fit's calibration outputs")
    b.add_argument("path")
    b.add_argument("--outputs", type=int, default=2000, help="the first this many")
    b.add_argument("--prob", type=float, default=0.75)
    args = parser.parse_args(argv)
    if args.mode == "bands":
        if args.outputs < 1:
            parser.error(f"--outputs must be at least 1, found {args.outputs}")
        return run_bands(args.path, args.outputs, args.prob)
    if args.mode == "fit":
        if args.items < 50:
            parser.error(f"items must be at least 50 (ten classes), found {args.items}")
        return fit(args.items, args.backend, args.draws, args.save)
    if args.matrices < 1:
        parser.error(f"--matrices must be at least 1, found {args.matrices}")
    return run_long_run(args.path, args.cells, args.matrices)


if __name__ == "__main__":
    main()
