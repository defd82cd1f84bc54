"""Can the kernels hold the truth? The best fixed-kernel mixture for a panel problem.

    python bench/kernel_projection.py PROBLEM N [--seed S] [--set NAME=VALUE ...]

Fits a transducer to one calibration set of N items (the Laplace backend, quick), takes
its kernels (locations and widths on the model scale), and fits the mixture's joint
weights ``beta[k, c]`` by EM to the problem's exact joint law over its cells: the
maximum-likelihood projection of the truth onto those kernels (theory 3.1's family with
the kernels held fixed, no prior). Prints, at the coverage study's decision outputs
(``decision_outputs``), the truth, the projection's ``p(c | y)`` and the fitted posterior
mean. Where the projection is close to the truth and the fit is not, the kernels are fine
and the prior or the data are what hold the fit back (docs/model.md, "Two logits: one
decision output on the steepest part of the boundary").
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load_coverage_study, set_design_constants
from _problems import PANEL

import yieldwise._design as design


def kernel_values(model, outputs: np.ndarray, loc: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Each output's value under each kernel, (n, K), up to a factor per output: the
    transducer's own kernel code (:func:`yieldwise._design.kernel_matrix`), so a lattice
    output's bin is integrated (interval censoring) as in the fit. A factor per output
    changes neither the EM's maximiser nor ``p(c | y)``."""
    lower, upper, censored = model.transform_.intervals(outputs)
    kern, _ = design.kernel_matrix(loc, width, lower, upper, censored)
    return kern


def project(
    kern: np.ndarray, mass: np.ndarray, iterations: int = 2000, tol: float = 1e-10
) -> np.ndarray:
    """EM for ``beta`` (K, C) maximising ``sum_j,c mass[j, c] log sum_k beta[k, c] kern[j, k]``.

    ``kern`` (cells, K) are the kernel densities at the cells, ``mass`` (cells, C) the
    exact joint probabilities of (cell, class). Each step is two matrix products; stops
    when the objective improves by less than ``tol``.
    """
    k, c = kern.shape[1], mass.shape[1]
    beta = np.full((k, c), 1.0 / (k * c))
    previous = -np.inf
    for _ in range(iterations):
        dens = np.maximum(kern @ beta, 1e-300)  # (cells, C)
        objective = float((mass * np.log(dens)).sum())
        # responsibilities r[j, k, c] = beta[k, c] kern[j, k] / dens[j, c], summed over
        # the cells with weight mass[j, c]: beta[k, c] * (kern' (mass / dens))[k, c]
        beta = beta * (kern.T @ (mass / dens))
        beta /= beta.sum()
        if objective - previous < tol:
            break
        previous = objective
    return beta


def class_probabilities(beta: np.ndarray, kern: np.ndarray) -> np.ndarray:
    joint = kern @ beta
    return joint / joint.sum(axis=1, keepdims=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", choices=[make().name for make in PANEL])
    parser.add_argument("n", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--set", dest="design", nargs="+", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    set_design_constants(args.design, parser.error)
    from yieldwise import Transducer

    coverage = load_coverage_study()
    problem = next(make() for make in PANEL if make().name == args.problem)
    rng = np.random.default_rng(args.seed)
    classes = rng.choice(problem.n_classes, args.n, p=problem.prevalences)
    outputs = problem.sample_outputs(classes, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = Transducer(backend="laplace", seed=args.seed, progress=False).fit(
            pd.DataFrame(outputs, columns=problem.columns), classes
        )
    draws = fitted.posterior_.posterior
    loc, width = draws["mu"].values[0, 0], draws["sigma"].values[0, 0]
    mass = problem.joint()
    keep = mass.sum(axis=1) > 1e-12
    # a continuous cell's mass is its density times its area on the model scale, a factor
    # of each cell that does not depend on beta, so the EM's maximiser is the same
    beta = project(kernel_values(fitted, problem.cells[keep], loc, width), mass[keep])
    picks = coverage.decision_outputs(problem)
    at = problem.cells[picks]
    best = class_probabilities(beta, kernel_values(fitted, at, loc, width))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean = fitted.predict_proba(pd.DataFrame(at, columns=problem.columns))
    shown = coverage.shown_classes(problem.n_classes)
    print(f"{problem.name}, n = {args.n}, seed {args.seed}: {loc.shape[0]} kernels")
    print("| output | class | truth | projection | fitted mean |")
    print("| --- | ---: | ---: | ---: | ---: |")
    truth = problem.truth()[picks]
    for i, output in enumerate(at):
        for c in shown:
            text = ", ".join(f"{v:.3g}" for v in output)
            print(f"| ({text}) | {c} | {truth[i, c]:.4f} | {best[i, c]:.4f} | {mean[i, c]:.4f} |")


if __name__ == "__main__":
    main()
