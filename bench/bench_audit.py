"""Benchmark of the metric audit (theory 1.5): wall time and peak memory.

Runs :func:`yieldwise.audit.rank_disagreement` with 10^6 pairs of classifiers,
the 8 default metrics and the 7 default error levels, prints the results and
the figures, and with ``--write`` records them in ``docs/benchmarks.md``
(section "## Metric audit (theory 1.5)", replaced in place).

Usage::

    .venv/bin/python bench/bench_audit.py            # measure and print
    .venv/bin/python bench/bench_audit.py --write    # ... and update docs/benchmarks.md

Two runs are made: the first is timed and gives the process's peak resident
memory (``ru_maxrss``); the second, under ``tracemalloc``, gives the peak of the
memory allocated by the computation itself (numpy arrays included). The
second run is slower because of the tracing and its time is not reported.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from yieldwise.audit import DEFAULT_ERROR_SD, DEFAULT_METRICS, rank_disagreement

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DOCS, mib, peak_rss_bytes, write_section

TARGET_SECONDS = 15.0
TARGET_BYTES = 2 * 1024**3
SECTION = "## Metric audit (theory 1.5)"


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (no dependency on ``tabulate``)."""
    header = "| metric | error_sd | fraction_wrong | mc_se |"
    lines = [header, "|---|---:|---:|---:|"]
    for row in frame.itertuples(index=False):
        sd = "" if np.isnan(row.error_sd) else f"{row.error_sd:g}"
        lines.append(f"| {row.metric} | {sd} | {row.fraction_wrong:.4f} | {row.mc_se:.4f} |")
    return "\n".join(lines)


def section_text(figures: dict[str, str], frame: pd.DataFrame) -> str:
    rows = "\n".join(f"| {key} | {value} |" for key, value in figures.items())
    return (
        f"{SECTION}\n\n"
        "`yieldwise.audit.rank_disagreement` with its defaults: 10^6 pairs of classifiers, "
        f"the {len(DEFAULT_METRICS)} default metrics and {len(DEFAULT_ERROR_SD)} error levels "
        "on the utilities, uniform prior on the utility matrices. Target: under "
        f"{TARGET_SECONDS:g} s and 2 GB.\n\n"
        "| quantity | value |\n|---|---|\n"
        f"{rows}\n\n"
        "Peak RSS is the whole process (interpreter, numpy, pandas, scipy included); the "
        "tracemalloc peak is the memory allocated during the computation alone.\n\n"
        "Results (fraction of pairs ranked in the opposite order from the true utility yield; "
        "`error_sd` is empty for the metrics, which use no utility matrix):\n\n"
        f"{markdown_table(frame)}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-pairs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20_240_601)
    parser.add_argument("--chunk-size", type=int, default=None, help="default: the library's")
    parser.add_argument("--no-tracemalloc", action="store_true", help="skip the traced run")
    parser.add_argument("--write", action="store_true", help=f"update {DOCS}")
    args = parser.parse_args(argv)

    kwargs: dict = {"n_pairs": args.n_pairs, "seed": args.seed}
    if args.chunk_size is not None:
        kwargs["chunk_size"] = args.chunk_size

    baseline = peak_rss_bytes()
    start = time.perf_counter()
    result = rank_disagreement(**kwargs)
    seconds = time.perf_counter() - start
    peak = peak_rss_bytes()

    traced = None
    if not args.no_tracemalloc:
        tracemalloc.start()
        traced_result = rank_disagreement(**kwargs)
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        pd.testing.assert_frame_equal(result, traced_result)  # same seed, same numbers

    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python bench/bench_audit.py", *given])
    figures = {
        "command": f"`{command}` (from the repository root, in `.venv`)",
        "date": dt.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}",
        "pairs x metrics x error levels": (
            f"{args.n_pairs:,} x {len(DEFAULT_METRICS)} x {len(DEFAULT_ERROR_SD)}"
        ),
        "wall time": f"{seconds:.2f} s",
        "peak RSS (process)": f"{mib(peak)} (after imports: {mib(baseline)})",
    }
    if traced is not None:
        figures["peak allocated (tracemalloc)"] = mib(traced)
    within = seconds < TARGET_SECONDS and peak < TARGET_BYTES
    figures["within target"] = "yes" if within else "NO"

    with pd.option_context("display.width", 120):
        print(result.to_string())
    print()
    for key, value in figures.items():
        print(f"{key:>32}: {value}")
    if args.write:
        write_section(SECTION, section_text(figures, result))
        print(f"\nwrote {DOCS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
