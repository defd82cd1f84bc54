"""Probe the transducer's kernel design on a panel problem, quickly, with the Laplace backend.

    python bench/design_probe.py PROBLEM N [CONSTANT=value ...] [backend=laplace] [reps=3]

PROBLEM is a name of bench/_problems.py's PANEL, N the calibration items. ``CONSTANT=value``
overrides a constant of ``yieldwise._design`` for this run (``WIDTH_FACTOR_2D=0.7``,
``RANGE_QUANTILES=(0.002,0.998)``, ``GRID_2D=20``); values are Python literals. For each of
``reps`` calibration sets (seeds [2026, problem index, N, rep]) the transducer is fitted
with ``backend`` (default ``laplace``: the Normal approximation at the mode, 1-10 s a fit;
``pystan`` for the sampler) and compared with the calibration peers on 2,000 chart
matrices (200 random matrices for more than two classes), as bench/decision_quality.py
does. Prints, per set and on average: the mean regret of yieldwise, isotonic, Platt and
beta calibration, yieldwise's Brier reliability on 5,000 held-out items, and the fit time.
Used for docs/model.md, "Kernel range and width".
"""

from __future__ import annotations

import ast
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decision_quality as dq
from _problems import PANEL

import yieldwise._design as design

SHOWN = ["yieldwise", "isotonic", "sigmoid (Platt)", "beta"]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    name, n = argv[0], int(argv[1])
    options = dict(a.split("=", 1) for a in argv[2:])
    backend = options.pop("backend", "laplace")
    reps = int(options.pop("reps", 3))
    for key, value in options.items():
        if not hasattr(design, key):
            print(f"{key} is not a constant of yieldwise._design", file=sys.stderr)
            return 2
        setattr(design, key, ast.literal_eval(value))
    problems = {make().name: (i, make) for i, make in enumerate(PANEL)}
    if name not in problems:
        print(f"PROBLEM must be one of {sorted(problems)}, found {name!r}", file=sys.stderr)
        return 2
    index, make = problems[name]
    problem = make()
    rng = np.random.default_rng([2026, index])
    if problem.n_classes == 2:
        utilities, names = dq.binary_matrices(rng, 2000)
    else:
        utilities, names = dq.multiclass_matrices(rng, 200, problem.n_classes)
    rows = []
    for rep in range(reps):
        outputs, labels = problem.sample(n, np.random.default_rng([2026, index, n, rep]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predictors, _, fit = dq.fit_methods(problem, outputs, labels, rep, backend=backend)
            values = dq.evaluate(problem, predictors, utilities)
            held, held_labels = problem.sample(
                5000, np.random.default_rng([2026, index, n, rep, 1])
            )
            brier = dq.brier_terms(predictors, held, held_labels, problem.n_classes)
        summary = dq.summarise(values, utilities, problem.prevalences, names)
        row = {m: summary[m]["mean_regret"] for m in SHOWN}
        row["reliability"] = brier["yieldwise"]["reliability"]
        row["seconds"] = fit["seconds"]
        rows.append(row)
        print(rep, {k: round(v, 5) for k, v in row.items()}, flush=True)
    mean = pd.DataFrame(rows).mean()
    print(f"{name} n={n} {options} {backend} mean:", {k: round(v, 5) for k, v in mean.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
