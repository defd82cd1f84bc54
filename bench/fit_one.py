"""Fit one panel problem with the Transducer's defaults and print the sampler's figures.

    python bench/fit_one.py PROBLEM N [--no-whitening] [key=value ...]

PROBLEM is a name of bench/_problems.py's PANEL (votes, logistic, beta, non-monotone,
overlapping, two-logits, softmax-3, clipped), N the calibration items, drawn with the
seed [1, 7, N]; key=value pairs override Transducer arguments (chains=2, adapt_delta=0.99).
``--no-whitening`` preconditions without the conditional whitening of the smooth blocks
(yieldwise.transducer.stan_data.precondition(whiten=False); docs/model.md). Prints the sampling
time, divergent transitions, tree-depth hits, mean leapfrog steps per iteration, step
size, largest R-hat and smallest bulk ESS.
"""

from __future__ import annotations

import functools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import parse_value
from _problems import PANEL

import yieldwise.transducer.stan_data as stan_data
from yieldwise import Transducer


def main(argv: list[str]) -> int:
    plain = "--no-whitening" in argv
    args = [a for a in argv if a != "--no-whitening"]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    name, n = args[0], int(args[1])
    problems = {make().name: make for make in PANEL}
    if name not in problems:
        print(f"PROBLEM must be one of {sorted(problems)}, found {name!r}", file=sys.stderr)
        return 2
    options = {k: parse_value(v) for k, v in (a.split("=", 1) for a in args[2:])}
    if plain:
        stan_data.precondition = functools.partial(stan_data.precondition, whiten=False)
    problem = problems[name]()
    outputs, labels = problem.sample(n, np.random.default_rng([1, 7, n]))
    started = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        t = Transducer(seed=1, progress=False, **options).fit(
            pd.DataFrame(outputs, columns=problem.columns), labels
        )
    total = time.perf_counter() - started
    info, diag = t.sampler_summary(), t.diagnostics()
    stats = t.posterior_.sample_stats
    print(
        f"{name} n={n} {options} whitening={'off' if plain else 'default'}: "
        f"total {total:.1f} s, sampling "
        f"{info['sampling_seconds']:.1f} s, divergent {info['divergent']}, tree-depth hits "
        f"{info['max_treedepth_hits']}, steps {float(stats.n_steps.mean()):.1f}, step size "
        f"{float(stats.step_size.mean()):.3f}, R-hat max {float(diag.r_hat.max()):.3f}, "
        f"bulk ESS min {float(diag.ess_bulk.min()):.0f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
