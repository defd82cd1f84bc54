"""Decision quality: yieldwise's transducer against the methods users would pick instead.

One seeded command measures, side by side:

* **Panel** (bench/_problems.py's ``PANEL``): synthetic problems whose ``p(c | y)`` and output
  distribution are known exactly, calibration sets of 300, 1,000 and 3,600 items. Every
  method turns outputs into probabilities and decides by maximum expected utility; the
  exact long-run utility of its decisions is computed under the truth (no sampling noise
  in the evaluation) for 10,000 utility matrices drawn uniformly over the binary chart
  (theory 1.1) plus four named ones, or 1,000 random C x C matrices. Reported: mean and
  maximum rescaled regret against the oracle (the true probabilities), the fraction of
  matrices where yieldwise does at least as well as each peer, the median rescaled
  utility. Methods: the yieldwise transducer (posterior-mean probabilities); isotonic,
  sigmoid (Platt), temperature and beta calibration; the raw output read as a
  probability; the standard rule (argmax / 0.5, whatever the utilities); the oracle.
* **Prior shift**: calibrate at one class balance, deploy at another (9 % -> 67 %
  positives): the transducer's generative mode with the known prevalences, against the
  peers corrected by Bayes' rule with the same prevalences, and against no correction.
* **Honest uncertainty**: over repeated simulations, the coverage of the transducer's
  50/75/95 % bands for the true ``p(c | y)`` and of the long-run-utility intervals for
  the true long-run utility of the deployed rule.
* **Real data**: the shipped calibration sets split into calibration and demonstration
  halves several times; held-out utility yields of each method over the same matrices.
* **Brier decomposition** (with the panel): every method's probabilities on a held-out
  sample of ``HOLDOUT`` items drawn from the same problem, split by
  ``yieldwise.metrics.brier_decomposition`` into reliability, resolution and
  uncertainty (``BRIER_BINS`` equal-width bins, so that the within-bin terms close the
  identity) and into calibration and refinement loss.

Rescaled regret of a method under ``U``: ``(u_oracle - u) / (u_max - u_min)`` with
``u_max = sum_c f_c max_d U[d, c]`` and ``u_min = sum_c f_c min_d U[d, c]`` (the range
of yields any decisions could have), so that matrices of any scale are comparable.

Usage (from the repository root; results are cached in bench/results/ so that
``--render`` rewrites the report without refitting)::

    python bench/decision_quality.py --write           # full run (about an hour, 2 cores)
    python bench/decision_quality.py --quick           # a smoke run: small sizes, few reps
    python bench/decision_quality.py --render --write  # report from the cached results
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import is_clean, set_design_constants, worst_diagnostics, write_section
from _problems import PANEL, Problem, vote_score

# the terms of yieldwise.metrics.BrierDecomposition kept in the results
from yieldwise.metrics import BRIER_TERMS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "decision_quality.json"
FIGURES = ROOT / "docs" / "figures"
SECTION = "## Decision quality against the alternatives"
WHY_LINK = "model.md#what-it-still-gets-wrong"

#: The four named binary matrices (rows decisions, columns classes 0 and 1).
NAMED = {
    "[[1,0],[0,1]]": [[1, 0], [0, 1]],
    "[[1,-10],[0,10]]": [[1, -10], [0, 10]],
    "[[1,0],[-10,10]]": [[1, 0], [-10, 10]],
    "[[10,0],[-10,1]]": [[10, 0], [-10, 1]],
}
PEERS = ["isotonic", "sigmoid (Platt)", "temperature", "beta", "raw score", "standard rule"]


def calibrators() -> dict:
    """The post-hoc calibration peers (yieldwise.calibrators), unfitted, by report name.

    Binary problems give a 1-D score on the logit scale (beta calibration maps it to
    (0, 1) first); three-class problems give logits, calibrated one against the rest
    and renormalised, except temperature scaling, which is multi-class by nature.
    """
    from yieldwise.calibrators import (
        BetaCalibrator,
        IsotonicCalibrator,
        PlattCalibrator,
        TemperatureCalibrator,
    )

    return {
        "isotonic": IsotonicCalibrator(),
        "sigmoid (Platt)": PlattCalibrator(),
        "temperature": TemperatureCalibrator(),
        "beta": BetaCalibrator(scale="logit"),
    }


METHODS = ["yieldwise", *PEERS, "oracle"]

#: Held-out items per panel cell for the Brier decomposition, and its bins on [0, 1].
HOLDOUT = 5000
BRIER_BINS = 10


# ------------------------------------------------------------------ utility matrices
def chart_matrices(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` standard-form matrices uniform over the chart's admitted domain (theory 1.1)."""
    from yieldwise.utility import chart_matrices as at
    from yieldwise.utility import in_chart_domain

    points = np.empty((0, 2))
    while len(points) < n:
        xy = rng.uniform(-1, 1, size=(2 * n, 2))
        points = np.vstack([points, xy[in_chart_domain(xy[:, 0], xy[:, 1])]])
    return at(points[:n, 0], points[:n, 1])


def binary_matrices(rng: np.random.Generator, n: int) -> tuple[np.ndarray, list[str]]:
    names = [f"chart {i}" for i in range(n)] + list(NAMED)
    return np.concatenate([chart_matrices(n, rng), np.array(list(NAMED.values()), float)]), names


def multiclass_matrices(
    rng: np.random.Generator, n: int, n_classes: int
) -> tuple[np.ndarray, list[str]]:
    """``n`` random ``C x C`` matrices, entries uniform on [0, 1] (decisions = classes)."""
    u = rng.uniform(0, 1, size=(n, n_classes, n_classes))
    return u, [f"random {i}" for i in range(n)]


# ------------------------------------------------------------------ exact long-run utility
def long_run(p: np.ndarray, w: np.ndarray, utilities: np.ndarray) -> np.ndarray:
    """Utility per item of maximum-expected-utility decisions from ``p`` (cells x classes),
    under the joint masses ``w`` (cells x classes), for every matrix (M, D, C)."""
    if p.shape[1] == 2 and utilities.shape[1] == 2:
        return _long_run_binary(p[:, 1], w, utilities)
    out = np.empty(len(utilities))
    for start in range(0, len(utilities), 64):  # chunks bound the (M, cells, D) array
        u = utilities[start : start + 64]
        chosen = np.einsum("mdc,gc->mgd", u, p).argmax(axis=2)  # (M, cells)
        gained = np.take_along_axis(u[:, None, :, :], chosen[:, :, None, None], axis=2)[:, :, 0]
        out[start : start + 64] = np.einsum("mgc,gc->m", gained, w)
    return out


def _long_run_binary(p1: np.ndarray, w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Two decisions: "decide 1" is a half-line in p1, so cumulative masses answer all M.

    The gain of decision 1 over 0 is ``a + b p1`` with ``a = U10 - U00`` and
    ``b = (U11 - U01) - (U10 - U00)``; ties go to decision 0.
    """
    order = np.argsort(p1, kind="stable")
    ps = p1[order]
    cum = np.vstack([np.zeros(2), np.cumsum(w[order], axis=0)])  # (cells + 1, 2)
    total = cum[-1]
    a = u[:, 1, 0] - u[:, 0, 0]
    b = (u[:, 1, 1] - u[:, 0, 1]) - a
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(b != 0, -a / b, 0.0)
    # mass deciding 1: p1 > t when b > 0; p1 < t when b < 0; all or nothing when b = 0
    above = total - cum[np.searchsorted(ps, t, side="right")]
    below = cum[np.searchsorted(ps, t, side="left")]
    everything = np.where((a > 0)[:, None], total, 0.0)
    ones = np.where((b > 0)[:, None], above, np.where((b < 0)[:, None], below, everything))
    zeros = total - ones
    return (zeros * u[:, 0, :] + ones * u[:, 1, :]).sum(axis=1)


def fixed_decisions(decided: np.ndarray, w: np.ndarray, utilities: np.ndarray) -> np.ndarray:
    """Utility per item of decisions that ignore the utilities (the standard rule)."""
    table = np.stack([w[decided == d].sum(axis=0) for d in range(utilities.shape[1])])
    return np.einsum("mdc,dc->m", utilities, table)


def bounds(utilities: np.ndarray, frequencies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return utilities.min(axis=1) @ frequencies, utilities.max(axis=1) @ frequencies


# ------------------------------------------------------------------ methods
def fit_methods(
    problem: Problem, outputs: np.ndarray, labels: np.ndarray, seed: int, backend: str = "auto"
):
    """Every method, fitted on one calibration set: name -> (cells' outputs -> probabilities).

    ``backend``: the transducer's (bench/design_probe.py passes ``"laplace"``)."""
    from yieldwise import Transducer

    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        transducer = Transducer(seed=seed, progress=False, backend=backend).fit(
            pd.DataFrame(outputs, columns=problem.columns), labels
        )
    info, diagnostics = transducer.sampler_summary(), transducer.diagnostics()
    fit_record = {
        "seconds": time.perf_counter() - started,
        "components": int(transducer.n_components_),
        "divergent": int(info["divergent"]),
        "treedepth": int(info["max_treedepth_hits"]),
        "chains": int(info["chains"]),
        "draws": int(info["draws"]),
        **worst_diagnostics(diagnostics),
        "warnings": len(caught),
    }
    predictors = {
        "yieldwise": lambda y: transducer.predict_proba(pd.DataFrame(y, columns=problem.columns))
    }
    return predictors | peer_predictors(problem, outputs, labels), transducer, fit_record


def peer_predictors(problem: Problem, outputs: np.ndarray, labels: np.ndarray) -> dict:
    """The peers fitted on one calibration set (name -> outputs -> probabilities), and the
    raw output read as a probability: every method of :func:`fit_methods` but yieldwise."""
    score = problem.score(outputs)
    predictors = {}
    for name, peer in calibrators().items():
        peer.fit(score, labels, classes=range(problem.n_classes))
        predictors[name] = lambda y, peer=peer: peer.predict_proba(problem.score(y))
    predictors["raw score"] = problem.raw_probability
    return predictors


def evaluate(
    problem: Problem,
    predictors: dict,
    utilities: np.ndarray,
    prevalences: np.ndarray | None = None,
    correct: dict | None = None,
) -> dict:
    """Exact long-run utilities (M,) of every method under the truth at ``prevalences``."""
    w = problem.joint(prevalences)
    cells = problem.cells
    values = {}
    for name, predict in predictors.items():
        p = predict(cells)
        if correct and name in correct:
            p = correct[name](p)
        values[name] = long_run(p, w, utilities)
    raw = problem.raw_probability(cells)
    values["standard rule"] = fixed_decisions(raw.argmax(axis=1), w, utilities)
    values["oracle"] = long_run(problem.truth(prevalences), w, utilities)
    return values


def summarise(
    values: dict,
    utilities: np.ndarray,
    frequencies: np.ndarray,
    names: list[str],
    reference: str = "oracle",
) -> dict:
    low, high = bounds(utilities, frequencies)
    span = high - low
    best = values[reference]
    out = {}
    for method, u in values.items():
        regret = (best - u) / span
        chart = np.array([not n.startswith("[[") for n in names])
        out[method] = {
            "mean_regret": float(regret[chart].mean()),
            "max_regret": float(regret[chart].max()),
            "median_rescaled": float(np.median(((u - low) / span)[chart])),
            "yieldwise_at_least": float(np.mean(values["yieldwise"][chart] >= u[chart] - 1e-12)),
            "named": {n: float(r) for n, r, c in zip(names, regret, chart, strict=True) if not c},
        }
    return out


def brier_terms(
    predictors: dict, outputs: np.ndarray, labels: np.ndarray, n_classes: int, bins=BRIER_BINS
) -> dict:
    """Every method's Brier decomposition on held-out ``outputs`` with classes ``labels``.

    Two classes: the probabilities of class 1 (``brier = mean (p1 - y)^2``); more: the
    ``(items, classes)`` probabilities, every term summed over the classes (one class
    against the rest), as :func:`yieldwise.metrics.brier_decomposition` does. The
    standard rule and the oracle are not here: the first gives no probabilities and the
    second is known at the evaluation cells only. Rounding may put a probability 1e-12
    outside [0, 1]; it is clipped (anything further out fails).
    """
    from yieldwise.metrics import brier_decomposition

    out = {}
    for name, predict in predictors.items():
        p = np.asarray(predict(outputs), float)
        p = np.where((p > -1e-12) & (p < 0), 0.0, np.where((p < 1 + 1e-12) & (p > 1), 1.0, p))
        if n_classes == 2:
            d = brier_decomposition(p[:, 1], labels, positive=1, classes=[0, 1], bins=bins)
        else:
            d = brier_decomposition(p, labels, classes=list(range(n_classes)), bins=bins)
        out[name] = {term: float(getattr(d, term)) for term in BRIER_TERMS}
    return out


# ------------------------------------------------------------------ the experiments
def panel_problems(n_matrices: int, seed: int):
    """Each panel problem with its utility matrices, as every panel run draws them:
    ``(index, problem, utilities, names)``, the matrices seeded by ``[seed, index]``."""
    for i, make in enumerate(PANEL):
        problem = make()
        rng = np.random.default_rng([seed, i])
        if problem.n_classes == 2:
            utilities, names = binary_matrices(rng, n_matrices)
        else:
            utilities, names = multiclass_matrices(rng, n_matrices // 10, problem.n_classes)
        yield i, problem, utilities, names


def run_panel(
    sizes: list[int],
    n_matrices: int,
    seed: int,
    done: dict | None = None,
    save=None,
    holdout: int = HOLDOUT,
) -> dict:
    """The panel; cells already in ``done`` are kept, and ``save`` is called after each cell.

    Each cell also holds every method's Brier decomposition (:func:`brier_terms`) on
    ``holdout`` fresh items from the problem, drawn from their own seeded stream (the
    calibration sets and matrices are those of runs made without it).
    """
    results: dict[str, Any] = dict(done or {})
    for i, problem, utilities, names in panel_problems(n_matrices, seed):
        for n in sizes:
            if f"{problem.name}|{n}" in results:  # every cell is seeded on its own
                continue
            outputs, labels = problem.sample(n, np.random.default_rng([seed, i, n]))
            predictors, _, fit = fit_methods(problem, outputs, labels, seed=seed + n)
            values = evaluate(problem, predictors, utilities)
            summary = summarise(values, utilities, problem.prevalences, names)
            held, held_labels = problem.sample(holdout, np.random.default_rng([seed, i, n, 1]))
            results[f"{problem.name}|{n}"] = {
                "fit": fit,
                "summary": summary,
                "regret": _regret_sample(values, utilities, problem.prevalences),
                "brier": brier_terms(predictors, held, held_labels, problem.n_classes),
            }
            print(
                f"{problem.name:>12} n={n:>5}: yieldwise mean regret "
                f"{summary['yieldwise']['mean_regret']:.4f}, best peer "
                f"{min(summary[p]['mean_regret'] for p in PEERS):.4f} "
                f"({fit['seconds']:.0f} s fit)",
                flush=True,
            )
            if save is not None:
                save(results)
    return results


def recheck_peers(panel: dict, n_matrices: int, seed: int, tolerance: float = 5e-6) -> list:
    """The cached panel's peers refitted with today's calibrators (no transducer fits).

    Every cell of ``panel`` is rebuilt as :func:`run_panel` built it (the same seeds,
    calibration set and matrices) and each peer's mean and maximum regret over the chart
    compared with the cached ones. Returns ``(cell, peer, cached mean, mean, cached max,
    max)`` for every pair whose mean or maximum moved by more than ``tolerance``, so that
    a change to a calibrator can be told apart from a change to the transducer without
    refitting the panel. yieldwise's own figures, and each peer's share of matrices where
    yieldwise does at least as well, need the transducer and are not rechecked.
    """
    moved = []
    for i, problem, utilities, names in panel_problems(n_matrices, seed):
        chart = np.array([not n.startswith("[[") for n in names])
        low, high = bounds(utilities, problem.prevalences)
        for key, cell in panel.items():
            name, _, n = key.partition("|")
            if name != problem.name:
                continue
            outputs, labels = problem.sample(int(n), np.random.default_rng([seed, i, int(n)]))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the cached run saw the same warnings
                predictors = peer_predictors(problem, outputs, labels)
            values = evaluate(problem, predictors, utilities)
            for peer in PEERS:
                regret = ((values["oracle"] - values[peer]) / (high - low))[chart]
                cached = cell["summary"][peer]
                now = (float(regret.mean()), float(regret.max()))
                if (
                    max(abs(now[0] - cached["mean_regret"]), abs(now[1] - cached["max_regret"]))
                    > tolerance
                ):
                    moved.append(
                        (key, peer, cached["mean_regret"], now[0], cached["max_regret"], now[1])
                    )
    return moved


def _regret_sample(values: dict, utilities: np.ndarray, frequencies: np.ndarray) -> dict:
    """1,000 chart matrices' regrets per method, for the distribution plots."""
    low, high = bounds(utilities, frequencies)
    return {
        m: ((values["oracle"] - u) / (high - low))[:1000].round(6).tolist()
        for m, u in values.items()
    }


def run_prior_shift(n: int, n_matrices: int, seed: int, deployed: float = 0.67) -> dict:
    """Calibrate at the problem's balance, deploy at ``deployed`` positives."""
    results = {}
    for i, make in enumerate(PANEL[:2]):  # votes (9 % positives) and logistic (20 %)
        problem = make()
        rng = np.random.default_rng([seed, 100 + i])
        utilities, names = binary_matrices(rng, n_matrices)
        outputs, labels = problem.sample(n, np.random.default_rng([seed, 100 + i, n]))
        predictors, transducer, _ = fit_methods(problem, outputs, labels, seed=seed + 7)
        r = np.array([1 - deployed, deployed])
        f = np.bincount(labels, minlength=2) / labels.size

        def bayes(p, r=r, f=f):
            q = p * (r / f)[None, :]
            return q / q.sum(axis=1, keepdims=True)

        naive = evaluate(problem, predictors, utilities, prevalences=r)
        corrected = evaluate(
            problem,
            predictors,
            utilities,
            prevalences=r,
            correct={m: bayes for m in predictors if m != "yieldwise"},
        )
        corrected["yieldwise"] = long_run(
            transducer.predict_proba(
                pd.DataFrame(problem.cells, columns=problem.columns), prevalences=r
            ),
            problem.joint(r),
            utilities,
        )
        results[problem.name] = {
            "no correction": summarise(naive, utilities, r, names),
            "corrected": summarise(corrected, utilities, r, names),
            "calibration_positives": float(f[1]),
            "deployed_positives": deployed,
        }
        print(
            f"prior shift {problem.name}: generative yieldwise "
            f"{results[problem.name]['corrected']['yieldwise']['mean_regret']:.4f}",
            flush=True,
        )
    return results


def coverage_outputs(problem: Problem, n: int = 9) -> np.ndarray:
    """Indices of the cells at ``n`` evenly spaced quantiles of the output law, 5 % to 95 %.

    The fixed outputs at which the coverage of bands is checked (here and in
    bench/coverage.py): the first cell whose cumulative mass reaches each quantile.
    """
    cdf = np.cumsum(problem.joint().sum(axis=1))
    return np.searchsorted(cdf, np.linspace(0.05, 0.95, n))


def run_coverage(reps: int, n: int, seed: int, done: dict | None = None, save=None) -> dict:
    """Band and long-run-utility interval coverage over repeated simulations.

    Each repetition's hits are kept under ``"problem|rep"`` (``done`` holds those of a
    stopped run, ``save`` is called after each), then pooled per problem.
    """
    from yieldwise import UtilityMatrix, long_run_utility

    probs = (0.5, 0.75, 0.95)
    cells: dict[str, Any] = dict(done or {})
    results = {}
    for i, make in enumerate(PANEL[:2]):
        problem = make()
        truth = problem.truth()[:, 1]
        picks = coverage_outputs(problem)
        for rep in range(reps):
            key = f"{problem.name}|{rep}"
            if key in cells:  # every repetition is seeded on its own
                continue
            band_hits: dict[str, list[bool]] = {str(p): [] for p in probs}
            utility_hits: dict[str, list[bool]] = {str(p): [] for p in probs}
            outputs, labels = problem.sample(n, np.random.default_rng([seed, 200 + i, rep]))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from yieldwise import Transducer

                t = Transducer(seed=seed + rep, progress=False).fit(
                    pd.DataFrame(outputs, columns=problem.columns), labels
                )
            at = pd.DataFrame(problem.cells[picks], columns=problem.columns)
            for p in probs:
                band = t.predict_interval(at, prob=p)
                low, high = band["lower"].values[:, 1], band["upper"].values[:, 1]
                band_hits[str(p)] = ((low <= truth[picks]) & (truth[picks] <= high)).tolist()
            p_hat = t.predict_proba(pd.DataFrame(problem.cells, columns=problem.columns))
            for values in NAMED.values():
                u = UtilityMatrix(values, decisions=[0, 1], classes=[0, 1])
                draws = long_run_utility(t, u).values.ravel()
                true_u = long_run(p_hat, problem.joint(), np.array([values], float))[0]
                for p in probs:
                    low, high = np.quantile(draws, [(1 - p) / 2, (1 + p) / 2])
                    utility_hits[str(p)].append(bool(low <= true_u <= high))
            cells[key] = {"bands": band_hits, "long_run": utility_hits}
            if save is not None:
                save(cells)
            print(f"coverage {problem.name} rep {rep + 1}/{reps}", flush=True)
        mine = [cells[f"{problem.name}|{rep}"] for rep in range(reps)]
        pooled = {
            kind: {str(p): [hit for m in mine for hit in m[kind][str(p)]] for p in probs}
            for kind in ("bands", "long_run")
        }
        results[problem.name] = {
            "bands": {p: float(np.mean(h)) for p, h in pooled["bands"].items()},
            "long_run": {p: float(np.mean(h)) for p, h in pooled["long_run"].items()},
            "n_band_checks": len(pooled["bands"]["0.5"]),
            "n_utility_checks": len(pooled["long_run"]["0.5"]),
        }
    return results


#: The shipped data sets of the real-data stage, in the order they run.
CASES_REAL = [
    "digits: forest votes",
    "digits: network logits",
    "digits: 50-NN votes",
    "digits 3/5/8: network",
    "digits 0-9: network",
]


def run_real(
    splits: int,
    n_matrices: int,
    seed: int,
    done: dict | None = None,
    save=None,
    cases: list[str] | None = None,
) -> dict:
    """Shipped data: calibrate on one half, count held-out yields on the other.

    Each split's summary is kept under ``"case|split"`` (see run_coverage). ``cases``:
    the names of the cases to run (None: all of them).
    """
    from yieldwise.datasets import load_digits_binary, load_digits_ten, load_digits_three

    binary = load_digits_binary()
    truth2 = (binary["label"] == "eight").to_numpy().astype(int)
    three = load_digits_three()
    order3 = ["three", "five", "eight"]
    truth3 = pd.Categorical(three["label"], categories=order3).codes.astype(int)
    ten = load_digits_ten()
    truth10 = ten["label"].cat.codes.to_numpy().astype(int)  # categories zero, ..., nine
    columns10 = [f"p_{name}" for name in ten["label"].cat.categories]
    table = {
        "digits: forest votes": (binary, truth2, ["forest_votes"], _lattice_problem(200)),
        "digits: network logits": (
            binary,
            truth2,
            ["net_logit_other", "net_logit_eight"],
            _logits_problem(),
        ),
        "digits: 50-NN votes": (binary, truth2, ["knn_votes"], _lattice_problem(50)),
        "digits 3/5/8: network": (
            three,
            truth3,
            ["p_three", "p_five", "p_eight"],
            _simplex_problem(3),
        ),
        "digits 0-9: network": (ten, truth10, columns10, _simplex_problem(10)),
    }
    if cases is not None:
        unknown = sorted(set(cases) - set(CASES_REAL))
        if unknown:
            raise ValueError(f"cases must be among {CASES_REAL}, found {unknown}")
    if list(table) != CASES_REAL:
        raise RuntimeError(f"CASES_REAL {CASES_REAL} must name the cases {list(table)}")
    results = {}
    cells: dict[str, Any] = dict(done or {})
    rng = np.random.default_rng([seed, 300])
    bin_u, bin_names = binary_matrices(rng, n_matrices)
    # drawn in this order, so that adding a class count leaves the others' matrices as they were
    matrices = {2: (bin_u, bin_names), 3: multiclass_matrices(rng, n_matrices // 10, 3)}
    matrices[10] = multiclass_matrices(rng, n_matrices // 10, 10)
    for name, (frame, truth, columns, problem) in table.items():
        if cases is not None and name not in cases:
            continue
        utilities, names = matrices[problem.n_classes]
        for s in range(splits):
            if f"{name}|{s}" in cells:  # every split is seeded on its own
                continue
            half = np.random.default_rng([seed, 301, s]).permutation(len(frame)) < len(frame) // 2
            outputs = frame[columns].to_numpy(float)
            problem.columns = columns
            predictors, _, fit = fit_methods(problem, outputs[half], truth[half], seed=seed + s)
            held, labels = outputs[~half], truth[~half]
            w = np.eye(problem.n_classes)[labels] / labels.size  # each held-out item a cell
            values = {m: long_run(f(held), w, utilities) for m, f in predictors.items()}
            raw = problem.raw_probability(held)
            values["standard rule"] = fixed_decisions(raw.argmax(axis=1), w, utilities)
            # no oracle on real data: regret against the best method per matrix
            values["oracle"] = np.max(np.stack(list(values.values())), axis=0)
            # the split's fit beside its methods' summaries (rendered as the sampler's health)
            cells[f"{name}|{s}"] = summarise(values, utilities, w.sum(axis=0), names) | {"fit": fit}
            if save is not None:
                save(cells)
            print(f"real {name} split {s + 1}/{splits}", flush=True)
        per_split = [cells[f"{name}|{s}"] for s in range(splits)]
        results[name] = {
            m: {
                k: float(np.mean([p[m][k] for p in per_split]))
                for k in ("mean_regret", "max_regret", "median_rescaled", "yieldwise_at_least")
            }
            | {"split_regret": [float(p[m]["mean_regret"]) for p in per_split]}
            for m in per_split[0]
            if m != "fit"
        }
        # cells cached before the fits were recorded have none: said so when rendered
        results[name]["fits"] = [p.get("fit") for p in per_split]
    return results


def split_difference(first: list[float], second: list[float]) -> tuple[float, float]:
    """Mean over the splits of ``first - second`` (two methods' mean regrets, paired by
    split) and its standard error corrected for resampling (Nadeau and Bengio, 2003,
    "Inference for the generalization error"): the splits reuse the same items, so the
    differences are correlated and ``sd / sqrt(S)`` understates the error; with test and
    calibration halves of equal size the corrected variance is ``(1 / S + 1) sd^2``. NaN
    error with fewer than two splits."""
    d = np.asarray(first, float) - np.asarray(second, float)
    if d.size < 2:
        return float(d.mean()) if d.size else float("nan"), float("nan")
    return float(d.mean()), float(np.sqrt((1 / d.size + 1.0) * d.var(ddof=1)))


def _lattice_problem(trees: int) -> Problem:
    return Problem(
        "real",
        "",
        np.array([0.5, 0.5]),
        None,
        None,
        None,  # type: ignore[arg-type]
        score=vote_score(trees),
        raw_probability=lambda v: np.column_stack([1 - v[:, 0], v[:, 0]]),
    )


def _logits_problem() -> Problem:
    from scipy.special import softmax

    return Problem(
        "real",
        "",
        np.array([0.5, 0.5]),
        None,
        None,
        None,  # type: ignore[arg-type]
        score=lambda z: z[:, 1] - z[:, 0],
        raw_probability=lambda z: softmax(z, axis=1),
    )


def _simplex_problem(n_classes: int) -> Problem:
    return Problem(
        "real",
        "",
        np.full(n_classes, 1 / n_classes),
        None,
        None,
        None,  # type: ignore[arg-type]
        score=lambda p: np.log(np.clip(p, 1e-300, None)),
        raw_probability=lambda p: p,
    )


# ------------------------------------------------------------------ report
def _commands(results: dict) -> str:
    by_command: dict[str, list[str]] = {}
    for stage, command in results.get("stage_commands", {}).items():
        by_command.setdefault(command, []).append(stage)
    if len(by_command) <= 1:
        return f"Command: `{results['command']}`"
    runs = "; ".join(f"`{c}` ({', '.join(s)})" for c, s in by_command.items())
    return (
        f"Commands, run as separate processes and combined with "
        f"`python bench/decision_quality.py --merge FILE ... --write`: {runs}"
    )


def render(results: dict) -> str:
    lines = [
        SECTION,
        "",
        _commands(results) + f" ({results['date']}, {results['cores']} cores, "
        f"{results['seconds'] / 60:.0f} min of computing in all). "
        "Every number below is a rescaled regret against the oracle (the true "
        "probabilities), `(u_oracle - u) / (u_max - u_min)`, over 10,000 matrices "
        "uniform on the binary chart (1,000 random C x C matrices for a C-class "
        "problem), unless said otherwise. Lower is better; 0 is the oracle.",
        "",
    ]
    panel = results["panel"]
    sizes = sorted({int(k.split("|")[1]) for k in panel})
    problems = list(dict.fromkeys(k.split("|")[0] for k in panel))
    lines += [
        "### Mean regret per problem and calibration size",
        "",
        "| problem | n | " + " | ".join(METHODS[:-1]) + " |",
        "|---|---:|" + "---:|" * (len(METHODS) - 1),
    ]
    for name, n, s in _summaries(panel, problems, sizes):
        best_peer = min(s[p]["mean_regret"] for p in PEERS)
        cells = []
        for m in METHODS[:-1]:
            v = s[m]["mean_regret"]
            text = f"{v:.4f}"
            cells.append(
                f"**{text}**" if v <= min(best_peer, s["yieldwise"]["mean_regret"]) else text
            )
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Bold: the lowest mean regret of the row (oracle excluded).",
        "",
        "### Maximum regret over the chart",
        "",
        "| problem | n | " + " | ".join(METHODS[:-1]) + " |",
        "|---|---:|" + "---:|" * (len(METHODS) - 1),
    ]
    lines += _rows(panel, problems, sizes, METHODS[:-1], "max_regret", "{:.3f}")
    lines += [
        "",
        "### How often yieldwise does at least as well as each peer",
        "",
        "Fraction of the chart's matrices where yieldwise's long-run utility is at least the "
        "peer's.",
        "",
        "| problem | n | " + " | ".join(PEERS) + " |",
        "|---|---:|" + "---:|" * len(PEERS),
    ]
    lines += _rows(panel, problems, sizes, PEERS, "yieldwise_at_least", "{:.0%}")
    lines += [
        "",
        "### Median rescaled utility",
        "",
        "`(u - u_min) / (u_max - u_min)` over the chart: 1 is the best any decisions could "
        "do, 0 the worst; the oracle's median bounds every method's.",
        "",
        "| problem | n | " + " | ".join(METHODS) + " |",
        "|---|---:|" + "---:|" * len(METHODS),
    ]
    lines += _rows(panel, problems, sizes, METHODS, "median_rescaled", "{:.4f}")
    lines += [
        "",
        "### The four named matrices (regret, n = 1,000)",
        "",
        "| problem | matrix | " + " | ".join(METHODS[:-1]) + " |",
        "|---|---|" + "---:|" * (len(METHODS) - 1),
    ]
    middle = sizes[len(sizes) // 2]
    for name in problems:
        if f"{name}|{middle}" not in panel:
            continue
        s = panel[f"{name}|{middle}"]["summary"]
        for matrix in s["yieldwise"]["named"]:
            lines.append(
                f"| {name} | `{matrix}` | "
                + " | ".join(f"{s[m]['named'][matrix]:.4f}" for m in METHODS[:-1])
                + " |"
            )
    lines += ["", "### Across the panel", ""]
    means = {
        m: np.mean([panel[k]["summary"][m]["mean_regret"] for k in panel]) for m in METHODS[:-1]
    }
    ratio = max(
        panel[k]["summary"]["yieldwise"]["mean_regret"]
        / max(min(panel[k]["summary"][p]["mean_regret"] for p in PEERS), 1e-12)
        for k in panel
    )
    lines += ["| method | mean regret over all problems and sizes |", "|---|---:|"]
    lines += [f"| {m} | {v:.4f} |" for m, v in sorted(means.items(), key=lambda kv: kv[1])]
    losses = _losses(panel)
    lines += [
        "",
        f"Worst ratio of yieldwise's mean regret to the best peer's on one "
        f"problem and size: {ratio:.2f} (goal: at most 2).",
        "",
        "### Where yieldwise loses",
        "",
        "Every problem and size where a peer's mean regret is below yieldwise's. "
        "Why, and the design change that would fix it: "
        f"[docs/model.md]({WHY_LINK}).",
        "",
        "| problem | n | yieldwise | best peer | peer's regret | difference | ratio |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    lines += [
        f"| {name} | {n} | {mine:.5f} | {peer} | {theirs:.5f} | {mine - theirs:.5f} | "
        + ("n/a" if theirs < 1e-9 else f"{mine / theirs:.1f}")
        + " |"
        for name, n, mine, peer, theirs in losses
    ]
    best_method = min(means, key=means.get)
    over_twice, failing = twice_goal(losses)
    lines += [
        "",
        "### Goals (measured against, not tests)",
        "",
        "| goal | result |",
        "|---|---|",
        f"| lowest mean regret across the panel | "
        f"{'met' if best_method == 'yieldwise' else 'not met'}: "
        + ", ".join(f"{m} {v:.4f}" for m, v in sorted(means.items(), key=lambda kv: kv[1])[:3])
        + " |",
        f"| never above twice the best peer's on one problem, unless the two differ by less "
        f"than 0.0005 | {'met' if not failing else 'not met'}: {len(over_twice)} of "
        f"{len(panel)} problem-size cells above twice, of which "
        f"{len(over_twice) - len(failing)} differ by less than 0.0005 |",
    ]
    if "coverage" in results:
        gaps = [
            abs(float(r[kind][q]) - float(q))
            for r in results["coverage"].values()
            for kind in ("bands", "long_run")
            for q in ("0.5", "0.75", "0.95")
        ]
        lines.append(
            f"| coverage within 5 points of nominal | "
            f"{'met' if max(gaps) <= 0.05 else 'not met'}: largest gap "
            f"{100 * max(gaps):.0f} points |"
        )
    lines.append("")
    fits = [panel[k]["fit"] for k in panel]
    # R-hat and ESS were kept from 2026-11-26 on; a cell fitted before says so and is not
    # called clean on its divergences and tree depth alone
    unrecorded = [k for k in panel if "max_rhat" not in panel[k]["fit"]]

    def trouble(key: str, f: dict) -> str:
        recorded = "max_rhat" in f
        health = (
            f", R-hat {_or_na(f['max_rhat'], '.3f')}, bulk ESS {_or_na(f['min_ess_bulk'], '.0f')}"
            if recorded
            else ""
        )
        return (
            f"{key.replace('|', ' n = ')}: {f['divergent']} divergent, {f['treedepth']} at max "
            f"tree depth{health}, K = {f['components']}"
        )

    # recorded fits first, as before, then the unrecorded ones judged on what they kept
    troubled = [
        trouble(k, panel[k]["fit"]) for k in panel
        if k not in unrecorded and not is_clean(panel[k]["fit"])
    ] + [
        trouble(k, panel[k]["fit"]) for k in unrecorded
        if panel[k]["fit"]["divergent"] or panel[k]["fit"]["treedepth"]
    ]  # fmt: skip
    recorded = len(fits) - len(unrecorded)
    lines += [
        f"yieldwise fits ({_draws_text(fits)}): "
        f"{sum(f['seconds'] for f in fits) / 60:.1f} min in total, "
        f"{sum(f['divergent'] for f in fits)} divergent transitions and "
        f"{sum(f['treedepth'] for f in fits)} tree-depth hits over {len(fits)} fits; "
        f"R-hat and bulk ESS recorded for {recorded} of them"
        + (
            f" (not for {', '.join(k.replace('|', ' n = ') for k in unrecorded)}: cells run "
            "before they were kept)"
            if unrecorded
            else ""
        )
        + f"; not clean: {'; '.join(troubled) or 'none'}. Fit times include "
        "other benchmarks running beside them on the same cores.",
        "",
        "![Regret distributions](figures/decision_quality_regret.png)",
        "",
    ]
    lines += _render_brier(panel, problems, middle)
    parts = (("prior_shift", "Prior shift", _render_shift),
             ("coverage", "Honest uncertainty: coverage", _render_coverage),
             ("real", "Real data", _render_real))  # fmt: skip
    for stage, title, section in parts:
        if stage in results:
            lines += section(results[stage])
        else:
            lines += [f"### {title}", "", "Not measured in this run (see the command above).", ""]
    return "\n".join(lines)


def _summaries(panel: dict, problems: list[str], sizes: list[int]):
    """(problem, n, summary) in table order; a stopped run reports the cells it finished."""
    for name in problems:
        for n in sizes:
            if f"{name}|{n}" in panel:
                yield name, n, panel[f"{name}|{n}"]["summary"]


def _rows(
    panel: dict, problems: list[str], sizes: list[int], methods: list[str], key: str, fmt: str
) -> list[str]:
    """One table row per problem and size: each method's ``key``, formatted."""
    return [
        f"| {name} | {n} | " + " | ".join(fmt.format(s[m][key]) for m in methods) + " |"
        for name, n, s in _summaries(panel, problems, sizes)
    ]


#: The regret goal's allowance: a cell above twice the best peer's mean regret still
#: meets it when the two differ by less than this (issue 16, item 7).
TWICE_ALLOWANCE = 5e-4


def twice_goal(losses: list[tuple[str, int, float, str, float]]) -> tuple[list, list]:
    """The cells of ``losses`` (from :func:`_losses`) above twice the best peer's mean
    regret, and of those the ones that fail the goal: the difference is TWICE_ALLOWANCE
    or more."""
    over = [x for x in losses if x[2] > 2 * x[4]]
    return over, [x for x in over if x[2] - x[4] >= TWICE_ALLOWANCE]


def _losses(panel: dict) -> list[tuple[str, int, float, str, float]]:
    """(problem, n, yieldwise's mean regret, best peer, its mean regret) where yieldwise loses."""
    out = []
    for key, cell in panel.items():
        name, n = key.split("|")
        s = cell["summary"]
        peer = min(PEERS, key=lambda p: s[p]["mean_regret"])
        if s[peer]["mean_regret"] < s["yieldwise"]["mean_regret"]:
            out.append((name, int(n), s["yieldwise"]["mean_regret"], peer, s[peer]["mean_regret"]))
    return out


def _render_brier(panel: dict, problems: list[str], n: int) -> list[str]:
    """The Brier decomposition of every method's held-out probabilities at size ``n``."""
    title = f"### Brier decomposition of the held-out probabilities (n = {n:,})"
    cells = [
        (name, panel[f"{name}|{n}"]["brier"])
        for name in problems
        if "brier" in panel.get(f"{name}|{n}", {})
    ]
    if not cells:
        note = (
            "Not measured in this run: its panel cells predate the decomposition "
            "(rerun the panel, see the command above)."
        )
        return [title, "", note, ""]
    lines = [
        title,
        "",
        f"Each method's probabilities for {HOLDOUT:,} fresh items of the problem, split by "
        "`yieldwise.metrics.brier_decomposition` with "
        f"{BRIER_BINS} equal-width bins: Brier = reliability - resolution + uncertainty "
        "+ within-bin (the last column is WBV - WBC, Stephenson et al. 2008), and "
        "Brier = calibration loss + refinement loss (isotonic recalibration on the same "
        "items). Two classes: the probability of class 1; three: summed over the classes. "
        "Lower reliability and calibration loss mean better calibrated, higher "
        "resolution means better separated; none of these ranks decisions (theory 1.2). "
        "Every size is in `bench/results/decision_quality.json`.",
        "",
        "| problem | method | Brier | reliability | resolution | uncertainty | within-bin "
        "| calibration loss | refinement loss |",
        "|---|---|" + "---:|" * 7,
    ]
    for name, terms in cells:
        for method, t in terms.items():
            within = t["within_bin_variance"] - t["within_bin_covariance"]
            lines.append(
                f"| {name} | {method} | "
                + " | ".join(
                    f"{v:.4f}"
                    for v in (
                        t["brier"],
                        t["reliability"],
                        t["resolution"],
                        t["uncertainty"],
                        within,
                        t["calibration_loss"],
                        t["refinement_loss"],
                    )
                )
                + " |"
            )
    return [*lines, ""]


def _render_shift(shift: dict) -> list[str]:
    lines = [
        "### Prior shift",
        "",
        "Calibrated at the problem's class balance, deployed "
        "where 67 % of the items are positive; mean regret over the chart.",
        "",
        "| problem | method | no correction | corrected with the known prevalences |",
        "|---|---|---:|---:|",
    ]
    for name, r in shift.items():
        for m in METHODS[:-1]:
            if m == "standard rule":
                continue
            note = " (generative mode)" if m == "yieldwise" else " (Bayes' rule)"
            lines.append(
                f"| {name} ({r['calibration_positives']:.0%} -> "
                f"{r['deployed_positives']:.0%}) | {m} | "
                f"{r['no correction'][m]['mean_regret']:.4f} | "
                f"{r['corrected'][m]['mean_regret']:.4f}{note} |"
            )
    return [*lines, ""]


def _render_coverage(coverage: dict) -> list[str]:
    lines = [
        "### Honest uncertainty: coverage",
        "",
        "Calibration sets of 1,000 items. Bands for p(1 | y) at the outputs at 9 evenly "
        "spaced quantiles of the output law (5 % to 95 %); long-run-utility intervals for "
        "the true long-run utility of the rule the transducer sets. Why the votes bands "
        f"miss: [docs/model.md]({WHY_LINK}).",
        "",
        "| problem | quantity | 50 % | 75 % | 95 % | checks |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, r in coverage.items():
        lines.append(
            f"| {name} | bands for p(1 given y) at 9 outputs | "
            + " | ".join(f"{r['bands'][p]:.2f}" for p in ("0.5", "0.75", "0.95"))
            + f" | {r['n_band_checks']} |"
        )
        lines.append(
            f"| {name} | long-run utility, 4 named matrices | "
            + " | ".join(f"{r['long_run'][p]:.2f}" for p in ("0.5", "0.75", "0.95"))
            + f" | {r['n_utility_checks']} |"
        )
    return [*lines, ""]


def _render_real(real: dict) -> list[str]:
    lines = [
        "### Real data: held-out yields on the shipped sets",
        "",
        "Each set split in halves (calibration, demonstration) several times; regret "
        "against the best method on each matrix, averaged over the splits. The last column: "
        "yieldwise's mean regret minus the best peer's, paired by split, and in brackets its "
        "standard error corrected for the splits' overlap (Nadeau and Bengio's resampled "
        "variance, `(1 / S + 1) sd^2` for halves: the splits reuse the same items, so the "
        "naive `sd / sqrt(S)` would understate it), and the splits where yieldwise's regret "
        "is the larger; n/a where the per-split regrets were not kept.",
        "",
        "| data | "
        + " | ".join(METHODS[:-1])
        + " | yieldwise >= best peer on | yieldwise - best peer (SE) |",
        "|---|" + "---:|" * (len(METHODS) + 1),
    ]
    for name, r in real.items():
        best = min(PEERS, key=lambda p: r[p]["mean_regret"])
        if "split_regret" in r["yieldwise"]:
            ours, theirs = r["yieldwise"]["split_regret"], r[best]["split_regret"]
            diff, se = split_difference(ours, theirs)
            behind = sum(a > b for a, b in zip(ours, theirs, strict=True))
            paired = f"{diff:+.4f} ({se:.4f}; behind in {behind} of {len(ours)} splits)"
        else:
            paired = "n/a"
        lines.append(
            f"| {name} | "
            + " | ".join(f"{r[m]['mean_regret']:.4f}" for m in METHODS[:-1])
            + f" | {r[best]['yieldwise_at_least']:.0%} ({best}) | {paired} |"
        )
    beaten = [
        f"{name} (best peer {p}: {r[p]['mean_regret']:.4f} against yieldwise's "
        f"{r['yieldwise']['mean_regret']:.4f})"
        for name, r in real.items()
        for p in [min(PEERS, key=lambda p, r=r: r[p]["mean_regret"])]
        if r[p]["mean_regret"] < r["yieldwise"]["mean_regret"]
    ]
    lines += ["", "yieldwise loses on: " + ("; ".join(beaten) or "none") + "."]
    return [*lines, "", *_render_real_fits(real), ""]


def _draws_text(fits: list[dict]) -> str:
    """The fits' chains and draws per chain, counted from their records; fits made before
    those were kept ran at the defaults of their time, named as the defaults."""
    from yieldwise.transducer.sampler import SAMPLER_DEFAULTS as defaults

    if not fits or any("draws" not in f for f in fits):
        return (
            f"default settings: {defaults.chains} chains, "
            f"{defaults.draws_for(1):,} draws per chain for one output dimension and "
            f"{defaults.draws_for(2):,} for more"
        )
    sizes = Counter((f["chains"], f["draws"]) for f in fits)
    return "default settings: " + ", ".join(
        f"{n} of {chains} chains x {draws:,} draws"
        for (chains, draws), n in sorted(sizes.items(), key=lambda item: -item[0][1])
    )


def _or_na(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _render_real_fits(real: dict) -> list[str]:
    """The sampler's health of yieldwise's fits, one line per case: its splits' divergent
    transitions and tree-depth hits, the largest R-hat and smallest bulk ESS over them, and
    whether every split is clean (issue 16's goal 3); cases whose results predate the
    record say so."""
    lines = ["yieldwise's fits on the shipped data, per split (default settings):", ""]
    for name, r in real.items():
        fits = r.get("fits") or []
        if not fits or any(f is None or "max_rhat" not in f for f in fits):
            lines.append(f"* {name}: not recorded (results cached before the fits were kept).")
            continue
        clean = sum(is_clean(f) for f in fits)
        rhats = [f["max_rhat"] for f in fits]
        ess = [f["min_ess_bulk"] for f in fits]
        # a split whose R-hat or ESS was not finite (None) makes the worst one n/a
        worst_rhat = _or_na(None if None in rhats else max(rhats), ".3f")
        worst_ess = _or_na(None if None in ess else min(ess), ".0f")
        lines.append(
            f"* {name}: divergent transitions {' / '.join(str(f['divergent']) for f in fits)}, "
            f"tree-depth hits {' / '.join(str(f['treedepth']) for f in fits)}, largest R-hat "
            f"{worst_rhat}, smallest bulk ESS {worst_ess}; clean in {clean} of {len(fits)} "
            f"splits; {sum(f['seconds'] for f in fits) / len(fits):.0f} s a fit."
        )
    return lines


def plot(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panel = results["panel"]
    sizes = sorted({int(k.split("|")[1]) for k in panel})
    middle = sizes[len(sizes) // 2]
    problems = list(dict.fromkeys(k.split("|")[0] for k in panel))
    # matplotlib 3.10 replaced vert=False by orientation="horizontal"
    new_api = tuple(int(x) for x in matplotlib.__version__.split(".")[:2]) >= (3, 10)
    horizontal = {"orientation": "horizontal"} if new_api else {"vert": False}
    fig, axes = plt.subplots(len(problems), 1, figsize=(9, 2.3 * len(problems)), sharex=False)
    for ax, name in zip(np.atleast_1d(axes), problems, strict=True):
        regret = panel[f"{name}|{middle}"]["regret"]
        data = [np.clip(regret[m], 1e-6, None) for m in METHODS[:-1]]
        ax.boxplot(data, showfliers=False, whis=(5, 95), **horizontal)
        ax.set_yticks(range(1, len(data) + 1), METHODS[:-1])  # boxes sit at 1, 2, ...
        ax.set_xscale("log")
        ax.set_title(
            f"{name}, n = {middle}: rescaled regret (5-95 % whiskers; 1e-6 = none)", fontsize=9
        )
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    FIGURES.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURES / "decision_quality_regret.png", dpi=90)


STAGES = ("panel", "prior_shift", "coverage", "real")


def merge(parts: list[dict]) -> dict:
    """Stages run by separate processes, as one result: each stage from one part only."""
    merged: dict[str, Any] = {"stage_commands": {}, "seconds": 0.0}
    for part in parts:
        for stage in STAGES:
            if stage not in part:
                continue
            if stage in merged:
                raise SystemExit(f"stage {stage!r} is in more than one of the merged files")
            merged[stage] = part[stage]
            merged["stage_commands"][stage] = part.get("stage_commands", {}).get(
                stage, part["command"]
            )
        merged["seconds"] += part["seconds"]
        for key in ("date", "cores", "machine"):
            merged[key] = max(merged.get(key, part[key]), part[key])
    merged["command"] = "; ".join(dict.fromkeys(merged["stage_commands"].values()))
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3600])
    parser.add_argument("--matrices", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=20, help="coverage simulations")
    parser.add_argument("--splits", type=int, default=5, help="real-data splits")
    parser.add_argument(
        "--real-cases", nargs="+", default=None, choices=CASES_REAL,
        help="real-data cases to run (default: all)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="sizes 300, 4 reps, 2 splits")
    parser.add_argument("--render", action="store_true", help="report cached results only")
    parser.add_argument(
        "--recheck-peers", action="store_true",
        help="refit the cached panel's peers with today's calibrators and list the cells "
        "whose regrets moved (no transducer fits)",
    )  # fmt: skip
    parser.add_argument("--resume", action="store_true", help="keep the cached stages")
    parser.add_argument(
        "--stages",
        nargs="+",
        default=None,
        help="run only these stages (panel, prior_shift, coverage, real)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results cache")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="combine the stages of these result files into --results, then report",
    )
    parser.add_argument(
        "--set", dest="design", nargs="+", default=[], metavar="NAME=VALUE",
        help="set constants of yieldwise._design for this run (a candidate to measure, "
        "e.g. MARGINAL_DENSITY=1); recorded in the run's command",
    )  # fmt: skip
    args = parser.parse_args()
    set_design_constants(args.design, parser.error)
    if args.quick:
        args.sizes, args.reps, args.splits = [300], 4, 2
    if args.merge:
        results = merge([json.loads(path.read_text()) for path in args.merge])
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(results))
    elif args.recheck_peers:
        cached = json.loads(args.results.read_text())
        moved = recheck_peers(cached["panel"], args.matrices, args.seed)
        print(f"{len(moved)} peer figure(s) of {args.results} moved with today's calibrators")
        for key, peer, old_mean, mean, old_max, top in moved:
            print(f"  {key} {peer}: mean regret {old_mean:.5f} -> {mean:.5f}, "
                  f"maximum {old_max:.4f} -> {top:.4f}")  # fmt: skip
        return
    elif args.render:
        results = json.loads(args.results.read_text())
    else:
        started = time.perf_counter()
        # Each stage is saved as soon as it finishes; --resume skips the stages saved.
        cache = args.results
        results = json.loads(cache.read_text()) if args.resume and cache.exists() else {}

        def partial(stage: str) -> dict:
            """The finished cells of a stopped run of ``stage``, and how to save more.

            A killed run keeps its finished cells; --resume picks them up.
            """

            def save(cells: dict) -> None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps({**results, f"{stage}_partial": cells}))

            return {"done": results.pop(f"{stage}_partial", None), "save": save}

        stages = {
            "panel": lambda: run_panel(args.sizes, args.matrices, args.seed, **partial("panel")),
            "prior_shift": lambda: run_prior_shift(1000, args.matrices, args.seed),
            "coverage": lambda: run_coverage(args.reps, 1000, args.seed, **partial("coverage")),
            "real": lambda: run_real(
                args.splits, args.matrices, args.seed, **partial("real"), cases=args.real_cases
            ),
        }
        command = (
            f"python bench/decision_quality.py --sizes {' '.join(map(str, args.sizes))} "
            f"--reps {args.reps} --splits {args.splits} --seed {args.seed}"
            + (f" --stages {' '.join(args.stages)}" if args.stages else "")
            + (
                " --real-cases " + " ".join(repr(c) for c in args.real_cases)
                if args.real_cases
                else ""
            )
            + (f" --set {' '.join(args.design)}" if args.design else "")
        )
        for stage, run in stages.items():
            if stage not in results and (args.stages is None or stage in args.stages):
                results[stage] = run()
                # which command produced each stage, so that merged results still say so
                results.setdefault("stage_commands", {})[stage] = command
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps(results))
        results.update(
            command=command,
            date=str(date.today()),
            cores=os.cpu_count(),
            machine=platform.machine(),
            seconds=results.get("seconds", 0.0) + time.perf_counter() - started,
        )
        cache.write_text(json.dumps(results))
        if "panel" not in results:  # the report starts from the panel
            return
    text = render(results)
    print(text)
    if args.write:
        plot(results)
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
