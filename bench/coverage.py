"""Coverage of the transducer's bands and long-run-utility intervals, with its sampler's health.

For every panel problem (bench/_problems.py's ``PANEL``), calibration size and repetition:
a fresh calibration set drawn with a seed derived from (seed, problem, size, repetition), a
``yieldwise.Transducer`` fitted with its default settings, and three records:

* **bands**: ``Transducer.predict_interval`` at 50, 75 and 95 % for ``p(c | y)`` at nine
  fixed outputs (the cells at the 5 %, ..., 95 % quantiles of the output law, as
  bench/decision_quality.py's coverage stage picks them), class 1 of a binary problem and
  every class of a multi-class one, against the exact truth ``problem.truth()``. Hits are
  counted at the outputs whose true probability lies in [0.001, 0.999] (the goal's count:
  a band cannot be asked to straddle 1e-5 to the fifth decimal) and at all outputs; and
  again at nine outputs where decisions are uncertain (:func:`decision_outputs`: cells
  whose truth lies in that range, since on nearly separable problems few of the nine
  above do);
* **long-run intervals**: central 50, 75 and 95 % intervals of ``yieldwise.long_run_utility``
  draws against the true long-run utility of the rule the transducer sets (its
  maximum-expected-utility decisions at every cell of the problem's partition, scored under
  the exact joint masses: ``decision_quality.long_run``), for the four named binary
  matrices, or four seeded random C x C matrices of a C-class problem;
* **the sampler**: seconds, divergent transitions and tree-depth hits
  (``Transducer.sampler_summary()``), the worst R-hat and the lowest bulk ESS
  (``Transducer.diagnostics()``), and every warning raised.

Goals (issue 16): bands within 5 points of nominal at 50 / 75 / 95 % on every problem and
size, counted at truths in [0.001, 0.999]; long-run-utility intervals within 7 points; every
fit clean (0 divergences, 0 tree-depth hits, R-hat <= 1.01, bulk ESS >= 400).

The fits are saved one by one to ``--results``; ``--resume`` skips those already there.
The loop runs repetition by repetition over all problems and sizes, so a run stopped early
has every cell measured with fewer repetitions rather than some cells not at all.

Usage (from the repository root)::

    python bench/coverage.py --write                                # the full study
    python bench/coverage.py --problems votes logistic --sizes 300 --reps 2  # a part
    python bench/coverage.py --merge A.json B.json --write          # parts run side by side
    python bench/coverage.py --render --write                       # re-report saved fits
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import sys
import time
import warnings
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import (
    checkout_commit,
    is_clean,
    key_values,
    sampler_record,
    set_design_constants,
    write_section,
    write_whole,
)
from _problems import PANEL, Problem, with_positives
from decision_quality import NAMED, coverage_outputs, long_run, multiclass_matrices

from yieldwise.backends import backend_names
from yieldwise.transducer.sampler import SAMPLER_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "coverage.json"
SECTION = "## Coverage of bands and long-run intervals"

#: Identifies a results file and the layout of its records; checked on load.
FORMAT = "yieldwise coverage study"
FORMAT_VERSION = 1
PROBS = (0.5, 0.75, 0.95)
#: The goal's bands are counted at outputs whose true probability lies in this range.
INSIDE = (0.001, 0.999)
#: Largest allowed gap between coverage and nominal (issue 16, goal 7).
TOLERANCE = {"bands": 0.05, "long_run": 0.07}
N_OUTPUTS = 9
#: Quantiles of a one-dimensional output law beyond the grid's 1 % / 99 % range, and at
#: its ends, where the bands are checked too ("bands_tail", every truth counted; recorded
#: since 2026-12-06): what a grid that stops at the quantiles does to the tails.
TAIL_QUANTILES = (0.002, 0.005, 0.01, 0.99, 0.995, 0.998)
N_MULTICLASS_MATRICES = 4
#: Seed streams of this study, apart from decision_quality.py's (which use 0-7, 100-101,
#: 200-201 and 300-301 after the seed).
SAMPLE_STREAM, MATRIX_STREAM = 700, 701
#: The study's seed (``--seed``'s default): every calibration set and fit seed derives from it.
SEED = 2026
#: A class-balance variant (``--positives``) of the problem at ``index`` in ``PANEL`` takes
#: ``index + VARIANT_STRIDE * round(1e4 * positives)`` in its seeds: sets apart from the
#: panel's own and from every other balance's, the same in every run.
VARIANT_STRIDE = 100
#: Float comparisons of a coverage with its goal: 0.75 - 0.70 is 0.05000000000000004.
_EPS = 1e-9


class ResultsError(ValueError):
    """A results file that is not this study's, of another format version or seed."""


# ------------------------------------------------------------------ one fit
def sample_seed(seed: int, index: int, n: int, rep: int) -> list[int]:
    """Entropy of the calibration set of problem ``index`` (its place in ``PANEL``)."""
    return [seed, SAMPLE_STREAM, index, n, rep]


def fit_seed(seed: int, index: int, n: int, rep: int) -> int:
    """The transducer's seed, derived from the same four numbers (below 2**31 - 1)."""
    state = np.random.SeedSequence([*sample_seed(seed, index, n, rep), 1]).generate_state(1)
    return int(state[0]) % (2**31 - 1)


def study_set(
    problem: Problem, index: int, n: int, rep: int, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray, int]:
    """(outputs, labels, fit seed) of repetition ``rep`` of ``problem`` at ``n`` items.

    The one place a study set is drawn: the study's fits, ``fit_one.py --coverage-rep`` and
    ``bench_sampling.py``'s study cases all call it, so their sets and seeds pair.
    ``index`` is the problem's seed index from :func:`select_problems`.
    """
    outputs, labels = problem.sample(n, np.random.default_rng(sample_seed(seed, index, n, rep)))
    return outputs, labels, fit_seed(seed, index, n, rep)


def utility_matrices(problem: Problem, index: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """The four named binary matrices, or four seeded random C x C ones (entries on [0, 1])."""
    if problem.n_classes == 2:
        return np.array(list(NAMED.values()), float), list(NAMED)
    rng = np.random.default_rng([seed, MATRIX_STREAM, index])
    return multiclass_matrices(rng, N_MULTICLASS_MATRICES, problem.n_classes)


def shown_classes(n_classes: int) -> list[int]:
    """Classes whose bands are checked: class 1 of a binary problem, else every class."""
    return [1] if n_classes == 2 else list(range(n_classes))


def decision_outputs(problem: Problem, n: int = N_OUTPUTS) -> np.ndarray:
    """Indices of ``n`` cells where a decision is uncertain: the outputs of the goal's count.

    The fixed outputs of :func:`coverage_outputs` follow the whole output law, so on a
    nearly separable problem most of them have a truth outside ``INSIDE`` (two logits: none
    of nine; votes: two of nine) and the goal is barely tested. These are the cells whose
    truth for some checked class lies inside ``INSIDE``, ordered by the true probability of
    the last class, taken at the 5 %, ..., 95 % quantiles of the output law restricted to
    them (a cell may be picked twice where the law is concentrated).
    """
    truth = problem.truth()[:, shown_classes(problem.n_classes)]
    inside = ((truth >= INSIDE[0]) & (truth <= INSIDE[1])).any(axis=1)
    cells = np.flatnonzero(inside)
    if cells.size == 0:
        raise ValueError(f"problem {problem.name!r} has no output with a truth inside {INSIDE}")
    order = cells[np.argsort(problem.truth()[cells, -1], kind="stable")]
    cdf = np.cumsum(problem.joint().sum(axis=1)[order])
    at = np.searchsorted(cdf / cdf[-1], np.linspace(0.05, 0.95, n))
    return order[np.minimum(at, order.size - 1)]


def tail_outputs(problem: Problem) -> np.ndarray | None:
    """Indices of the cells at :data:`TAIL_QUANTILES` of a one-dimensional output law (its
    cells run along the output); None for more dimensions, whose cells do not."""
    if len(problem.columns) != 1:
        return None
    cdf = np.cumsum(problem.joint().sum(axis=1))
    return np.minimum(np.searchsorted(cdf / cdf[-1], TAIL_QUANTILES), cdf.size - 1)


def band_record(problem: Problem, transducer: Any, picks: np.ndarray) -> dict:
    """``predict_interval`` at the cells ``picks`` for the checked classes, with the truth."""
    shown = shown_classes(problem.n_classes)
    at = pd.DataFrame(problem.cells[picks], columns=problem.columns)
    bands: dict[str, Any] = {
        "outputs": problem.cells[picks].tolist(),
        "classes": shown,
        "truth": problem.truth()[picks][:, shown].tolist(),
        "lower": {},
        "upper": {},
    }
    for p in PROBS:
        band = transducer.predict_interval(at, prob=p)
        bands["lower"][str(p)] = band["lower"].values[:, shown].tolist()
        bands["upper"][str(p)] = band["upper"].values[:, shown].tolist()
    bands["mean"] = band["mean"].values[:, shown].tolist()
    return bands


def measure(
    problem: Problem,
    transducer: Any,
    picks: np.ndarray,
    matrices: np.ndarray,
    decision_picks: np.ndarray | None = None,
    tail_picks: np.ndarray | None = None,
) -> dict:
    """Bands at the outputs ``picks`` (cell indices) and long-run intervals, with the truth;
    with ``decision_picks`` (:func:`decision_outputs`), bands there too ("bands_decision");
    with ``tail_picks`` (:func:`tail_outputs`), also there ("bands_tail").

    ``transducer`` is fitted to labels ``0 .. C - 1`` of ``problem``. Returns the bounds
    themselves, so that hits can be recounted under any rule (:func:`band_counts`).
    """
    from yieldwise import long_run_utility

    n_classes = problem.n_classes
    if tuple(transducer.classes_) != tuple(range(n_classes)):
        raise ValueError(
            f"transducer must be fitted to the classes 0 .. {n_classes - 1} of problem "
            f"{problem.name!r}, found classes {list(transducer.classes_)}"
        )
    bands = band_record(problem, transducer, picks)
    # the rule the transducer sets, scored exactly under the truth
    p_hat = transducer.predict_proba(pd.DataFrame(problem.cells, columns=problem.columns))
    truth = long_run(p_hat, problem.joint(), matrices)
    draws = long_run_utility(transducer, matrices).transpose("chain", "draw", "matrix")
    values = draws.values.reshape(-1, len(matrices))
    intervals: dict[str, Any] = {
        "truth": truth.tolist(),
        "mean": values.mean(axis=0).tolist(),
        "lower": {},
        "upper": {},
        "integration_error_draws": np.asarray(draws["integration_error_draws"]).tolist(),
    }
    for p in PROBS:
        low, high = np.quantile(values, [(1 - p) / 2, (1 + p) / 2], axis=0)
        intervals["lower"][str(p)], intervals["upper"][str(p)] = low.tolist(), high.tolist()
    record = {"bands": bands, "long_run": intervals}
    if decision_picks is not None:
        record["bands_decision"] = band_record(problem, transducer, decision_picks)
    if tail_picks is not None:
        record["bands_tail"] = band_record(problem, transducer, tail_picks)
    return record


def run_fit(
    problem: Problem,
    index: int,
    n: int,
    rep: int,
    seed: int,
    sampler: dict | None = None,
    prefix_draws: tuple[int, ...] = (),
    backend: str | None = None,
) -> dict:
    """Sample a calibration set, fit a default transducer, and measure it.

    ``sampler``: NUTS settings that replace the defaults (``--sampler``; a candidate to
    measure), recorded with the fit like every fit's settings. ``prefix_draws``: see
    :func:`sampler_record`. ``backend``: the Transducer's backend (``--backend``; the
    default ``"auto"`` when None), recorded with every fit.
    """
    from yieldwise import Transducer

    outputs, labels, seed_used = study_set(problem, index, n, rep, seed)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = (sampler or {}) | ({"backend": backend} if backend else {})
        transducer = Transducer(seed=seed_used, progress=False, **options).fit(
            pd.DataFrame(outputs, columns=problem.columns), labels
        )
    seconds = time.perf_counter() - started
    matrices, names = utility_matrices(problem, index, seed)
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        record = measure(
            problem, transducer, coverage_outputs(problem, N_OUTPUTS), matrices,
            decision_outputs(problem, N_OUTPUTS), tail_outputs(problem),
        )  # fmt: skip
    record["long_run"]["matrices"] = names
    return {
        "problem": problem.name,
        "n": n,
        "rep": rep,
        "fit_seed": seed_used,
        **record,
        "sampler": sampler_record(transducer, seconds, caught, prefix_draws),
        "measure_warnings": [f"{w.category.__name__}: {w.message}" for w in later],
    }


# ------------------------------------------------------------------ counting
def band_counts(
    record: dict, prob: float, inside_only: bool, key: str = "bands"
) -> tuple[int, int]:
    """(hits, checks) of one fit's bands at level ``prob``: ``lower <= truth <= upper``.

    ``inside_only``: count only the (output, class) checks whose truth lies in ``INSIDE``.
    ``key``: "bands" (the nine outputs of the output law) or "bands_decision" (the nine of
    :func:`decision_outputs`; (0, 0) for a fit recorded before they were measured).
    """
    if key not in record:
        return 0, 0
    bands = record[key]
    truth = np.asarray(bands["truth"], float)
    lower = np.asarray(bands["lower"][str(prob)], float)
    upper = np.asarray(bands["upper"][str(prob)], float)
    hit = (lower <= truth) & (truth <= upper)
    keep = (truth >= INSIDE[0]) & (truth <= INSIDE[1]) if inside_only else np.ones_like(hit)
    return int(hit[keep].sum()), int(keep.sum())


def interval_counts(record: dict, prob: float) -> tuple[int, int]:
    """(hits, checks) of one fit's long-run intervals at level ``prob``."""
    r = record["long_run"]
    truth = np.asarray(r["truth"], float)
    lower, upper = np.asarray(r["lower"][str(prob)]), np.asarray(r["upper"][str(prob)])
    hit = (lower <= truth) & (truth <= upper)
    return int(hit.sum()), int(truth.size)


def goal_met(counts: dict[float, tuple[int, int]], tolerance: float) -> bool | None:
    """Coverage within ``tolerance`` of nominal at every level; None without checks."""
    if any(checks == 0 for _, checks in counts.values()):
        return None
    return all(abs(h / c - p) <= tolerance + _EPS for p, (h, c) in counts.items())


def standard_error(prob: float, checks: int) -> float:
    """Binomial standard error of a coverage measured on ``checks`` independent checks
    of intervals whose true coverage is the nominal ``prob``."""
    return float(np.sqrt(prob * (1 - prob) / checks)) if checks else float("nan")


def clustered_standard_error(per_fit: list[tuple[int, int]]) -> float:
    """Standard error of a pooled coverage ``sum h_i / sum c_i`` with the fits as clusters.

    ``per_fit`` holds each fit's (hits, checks). The checks of one fit share its posterior
    and its calibration set, so they are not independent and the binomial error
    understates the spread; the fits are. With ``p = sum h / sum c`` over the ``m`` fits
    that have checks, the ratio estimator's sandwich variance is
    ``m / (m - 1) * sum_i (h_i - p c_i)^2 / (sum_i c_i)^2`` (one check per fit: the binomial
    variance at ``p`` times ``m / (m - 1)``). NaN with fewer than two such fits; 0 when every
    fit holds the same share (all hits or none), where it says nothing about the spread.
    """
    counts = np.asarray(per_fit, dtype=float).reshape(-1, 2)
    counts = counts[counts[:, 1] > 0]
    return _ratio_error(counts[:, 0], counts[:, 1])


def _ratio_error(numerators: np.ndarray, checks: np.ndarray) -> float:
    """Sandwich standard error of ``sum numerators / sum checks`` over clusters (fits with
    checks): ``sqrt(m / (m - 1) sum (x_i - r c_i)^2) / sum c``; NaN with fewer than two."""
    m = checks.size
    if m < 2:
        return float("nan")
    ratio = numerators.sum() / checks.sum()
    return float(np.sqrt(m / (m - 1) * np.sum((numerators - ratio * checks) ** 2)) / checks.sum())


def paired_change(pairs: list[tuple[tuple[int, int], tuple[int, int]]]) -> tuple[float, float]:
    """Change of a pooled coverage between two runs over the same fits, and its standard
    error with the fits as clusters.

    ``pairs`` holds, per fit, its (hits, checks) in the first run and in the second (the
    same calibration set and checks, so the same ``checks``). The change is
    ``sum (h2 - h1) / sum c`` and its error the sandwich error of that ratio,
    ``sqrt(m / (m - 1) sum ((h2 - h1) - change c)^2) / sum c`` over the ``m`` fits with
    checks: the pairing removes the spread between calibration sets that both runs share.
    NaN (both) without checks, NaN error with fewer than two fits.
    """
    rows = np.asarray(pairs, dtype=float).reshape(-1, 2, 2)
    if rows.size and np.any(rows[:, 0, 1] != rows[:, 1, 1]):
        raise ValueError("paired_change: the two runs of a fit must have the same checks")
    rows = rows[rows[:, 0, 1] > 0]
    if rows.shape[0] == 0:
        return float("nan"), float("nan")
    diff, checks = rows[:, 1, 0] - rows[:, 0, 0], rows[:, 0, 1]
    return float(diff.sum() / checks.sum()), _ratio_error(diff, checks)


def missed_beyond_noise(
    counts: dict[float, tuple[int, int]], errors: dict[float, float], tolerance: float
) -> list[float]:
    """The levels whose coverage lies farther than ``tolerance`` from nominal by more than
    two of its (fit-clustered) standard errors: misses the study's noise does not explain.
    A level with a NaN error (fewer than two fits) is never listed."""
    out = []
    for p, (h, c) in counts.items():
        if c and np.isfinite(errors[p]) and abs(h / c - p) - tolerance > 2 * errors[p] + _EPS:
            out.append(p)
    return out


#: A check counts as missed systematically when its 95 % band misses the truth in at least
#: this share of a cell's fits (and in two fits or more). A calibrated band misses with
#: chance 0.05 a fit, so half of 20 fits or more has chance below 1e-7: not noise.
SYSTEMATIC_SHARE = 0.5


def systematic_misses(fits: dict, key: str = "bands_decision", prob: float = 0.95) -> list[dict]:
    """The checked (output, class) pairs whose band at ``prob`` misses the truth in at least
    ``SYSTEMATIC_SHARE`` of a problem-size cell's fits, truth inside ``INSIDE``: where a
    cell's misses come from (a bias of the model at one output, not spread noise).

    The checks of ``key`` sit at the same outputs in every fit of a cell (fixed by the
    problem), so they line up across fits. Each entry: problem, n, the output, the class,
    the truth, the share and number of fits missing it, the median posterior mean and
    the median band.
    """
    cells: dict[tuple[str, int], list[dict]] = {}
    for record in fits.values():
        if key in record:
            cells.setdefault((record["problem"], record["n"]), []).append(record[key])
    order = {make().name: i for i, make in enumerate(PANEL)}
    out = []
    for (name, n), bands in sorted(cells.items(), key=lambda kv: (order.get(kv[0][0], 99),
                                                                 kv[0][1])):  # fmt: skip
        truth = np.asarray(bands[0]["truth"], float)
        if any(np.asarray(b["truth"], float).shape != truth.shape for b in bands):
            continue  # records of another layout: not comparable check by check
        lower = np.array([b["lower"][str(prob)] for b in bands], float)
        upper = np.array([b["upper"][str(prob)] for b in bands], float)
        mean = np.array([b["mean"] for b in bands], float) if all(
            "mean" in b for b in bands) else np.full_like(lower, np.nan)  # fmt: skip
        missed = (truth < lower) | (truth > upper)  # (fits, outputs, classes)
        share = missed.mean(axis=0)
        inside = (truth >= INSIDE[0]) & (truth <= INSIDE[1])
        flagged = inside & (share >= SYSTEMATIC_SHARE) & (missed.sum(axis=0) >= 2)
        for i, j in zip(*np.nonzero(flagged), strict=True):
            out.append({
                "problem": name, "n": int(n), "output": list(bands[0]["outputs"][i]),
                "class": int(bands[0]["classes"][j]), "truth": float(truth[i, j]),
                "share": float(share[i, j]), "missed": int(missed[:, i, j].sum()),
                "fits": len(bands), "median_mean": float(np.median(mean[:, i, j])),
                "median_band": (float(np.median(lower[:, i, j])),
                                float(np.median(upper[:, i, j]))),
            })  # fmt: skip
    return out


def _systematic_lines(fits: dict) -> list[str]:
    misses = systematic_misses(fits)
    head = (
        f"Outputs where decisions are uncertain whose 95 % band misses the truth in at least "
        f"{SYSTEMATIC_SHARE * 100:.0f} % of a cell's fits (`systematic_misses`; a calibrated band "
        "misses in 5 % of fits): a bias of the model at that output, not noise."
    )
    if not misses:
        return [head + " None.", ""]
    rows = [head, "", "| problem | n | output | class | truth | fits missing | median mean "
            "| median 95 % band |", "|---|---:|---|---:|---:|---:|---:|---|"]  # fmt: skip
    for m in misses:
        output = ", ".join(f"{v:.3g}" for v in m["output"])
        lo, hi = m["median_band"]
        rows.append(
            f"| {m['problem']} | {m['n']} | ({output}) | {m['class']} | {m['truth']:.4f} | "
            f"{m['missed']} of {m['fits']} | {m['median_mean']:.4f} | [{lo:.4f}, {hi:.4f}] |"
        )
    return [*rows, ""]


def summarise(fits: dict) -> dict[tuple[str, int], dict]:
    """Per (problem, size), in panel order then size: pooled counts and the sampler's totals."""
    order = {make().name: i for i, make in enumerate(PANEL)}
    cells: dict[tuple[str, int], list[dict]] = {}
    for record in fits.values():
        cells.setdefault((record["problem"], int(record["n"])), []).append(record)
    out = {}
    for key in sorted(cells, key=lambda k: (order.get(k[0], len(order)), k[0], k[1])):
        records = cells[key]

        def per_fit(count, records=records) -> dict[float, list[tuple[int, int]]]:
            return {p: [tuple(int(x) for x in count(r, p)) for r in records] for p in PROBS}

        def pooled(counts: dict[float, list[tuple[int, int]]]) -> dict[float, tuple[int, int]]:
            return {p: tuple(int(x) for x in np.sum(each, axis=0)) for p, each in counts.items()}

        samplers = [r["sampler"] for r in records]
        rhats = [s["max_rhat"] for s in samplers]
        esses = [s["min_ess_bulk"] for s in samplers]
        seconds = [s["seconds"] for s in samplers]
        each = {
            "bands_inside": per_fit(lambda r, p: band_counts(r, p, inside_only=True)),
            "bands_all": per_fit(lambda r, p: band_counts(r, p, inside_only=False)),
            "bands_decision": per_fit(
                lambda r, p: band_counts(r, p, inside_only=True, key="bands_decision")
            ),
            "long_run": per_fit(interval_counts),
            "bands_tail": per_fit(
                lambda r, p: band_counts(r, p, inside_only=False, key="bands_tail")
            ),
            # the tails' checks whose truth the goal counts: a problem whose tails reach
            # truths beyond [0.001, 0.999] (beta: 2e-5 and 1 - 2e-6) has none here
            "bands_tail_inside": per_fit(
                lambda r, p: band_counts(r, p, inside_only=True, key="bands_tail")
            ),
        }
        out[key] = {
            "fits": len(records),
            **{kind: pooled(counts) for kind, counts in each.items()},
            # each kind's fit-clustered standard error per level (clustered_standard_error)
            "errors": {
                kind: {p: clustered_standard_error(c) for p, c in counts.items()}
                for kind, counts in each.items()
            },
            "per_fit": each,
            "decision_fits": sum("bands_decision" in r for r in records),
            "divergent": sum(s["divergent"] for s in samplers),
            "treedepth": sum(s["treedepth"] for s in samplers),
            "max_rhat": None if None in rhats else max(rhats),
            "min_ess_bulk": None if None in esses else min(esses),
            "clean": sum(is_clean(s) for s in samplers),
            "median_seconds": float(np.median(seconds)),
            "max_seconds": float(np.max(seconds)),
            "median_sampling_seconds": float(np.median([s["sampling_seconds"] for s in samplers])),
            "warned": sum(bool(s["warnings"]) for s in samplers),
            # None when a fit predates the record (the study's fits before 2026-11-26)
            "median_steps": (
                float(np.median([s["steps_per_iteration"] for s in samplers]))
                if all("steps_per_iteration" in s for s in samplers)
                else None
            ),
        }
    return out


# ------------------------------------------------------------------ results files
def new_results(seed: int) -> dict:
    return {"format": FORMAT, "version": FORMAT_VERSION, "seed": seed, "fits": {}, "runs": []}


def load_results(path: Path) -> dict:
    """A results file, its format and version checked."""
    try:
        results = json.loads(Path(path).read_text())
    except json.JSONDecodeError as error:
        raise ResultsError(f"results file {path} is not valid JSON ({error})") from None
    found = (results.get("format"), results.get("version")) if isinstance(results, dict) else None
    if found != (FORMAT, FORMAT_VERSION):
        raise ResultsError(
            f"results file {path} must be a {FORMAT!r} file of version {FORMAT_VERSION}, "
            f"found format/version {found}; rerun the study or use the script of that version"
        )
    return results


def save_results(results: dict, path: Path) -> None:
    write_whole(Path(path), json.dumps(results, allow_nan=False))


def _cell(key: str) -> str:
    """The problem-size cell ``"problem|n"`` of a fit's key ``"problem|n|rep"``."""
    return key.rsplit("|", 1)[0]


def merge(parts: list[tuple[str, dict]], replace: bool = False) -> dict:
    """Fits of several results files (``(name, results)``) as one; the runs are listed.

    Every part must share the seed; a fit present in two parts must be the same record,
    unless ``replace``: then a later part's cells replace the earlier parts' (the study
    refitted cell by cell after a design change). A cell is replaced whole: the later part
    must hold every repetition the earlier ones hold of each cell it brings, so that no
    cell mixes two designs; each replacement is recorded under ``"replaced"``.
    """
    seeds = {name: part["seed"] for name, part in parts}
    if len(set(seeds.values())) > 1:
        raise ResultsError(f"merged results files must share one seed, found {seeds}")
    merged = new_results(next(iter(seeds.values())))
    merged["replaced"] = []
    origin: dict[str, str] = {}
    for name, part in parts:
        # a part that was itself merged with --replace says which of its cells came from
        # where: kept, unless a later part replaces that cell again (below)
        for entry in part.get("replaced", []):
            if entry not in merged["replaced"]:
                merged["replaced"].append(entry)
        if replace:
            brought = {_cell(key) for key in part["fits"]}
            held = {key for key in merged["fits"] if _cell(key) in brought}
            cells = sorted({_cell(key) for key in held})
            missing = sorted(held - set(part["fits"]))
            if missing:
                raise ResultsError(
                    f"{name} replaces the cells {cells} "
                    f"but lacks the fits {missing[:5]}{' ...' if len(missing) > 5 else ''} "
                    "of them: a cell is replaced whole (complete it with --resume first)"
                )
            for cell in cells:
                replaced = sorted({origin[k] for k in held if _cell(k) == cell})
                merged["replaced"] = [e for e in merged["replaced"] if e["cell"] != cell]
                merged["replaced"].append({"cell": cell, "by": name, "was": replaced})
        for key, record in part["fits"].items():
            if not replace and key in merged["fits"] and merged["fits"][key] != record:
                raise ResultsError(
                    f"fit {key!r} differs between {origin[key]} and {name}; merge files whose "
                    "fits were run once each (they were split with --problems or --sizes), "
                    "or pass --replace to let the later file's cells replace the earlier's"
                )
            merged["fits"][key], origin[key] = record, name
        merged["runs"] += [run for run in part["runs"] if run not in merged["runs"]]
    if not merged["replaced"]:
        del merged["replaced"]
    return merged


def _run_record(command: str, seconds: float, fitted: int, commit: str | None) -> dict:
    """A run's record; ``commit``: :func:`_common.checkout_commit` when the run started (the
    code a running process measures is what it loaded then)."""
    import arviz

    import yieldwise

    return {
        "command": command,
        "date": str(date.today()),
        "cores": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "versions": {
            "yieldwise": yieldwise.__version__,
            "Python": platform.python_version(),
            "numpy": np.__version__,
            "ArviZ": arviz.__version__,
        },
        "seconds": seconds,
        "fits": fitted,
        "commit": commit,
    }


def compile_model() -> None:
    """Compile the Stan program (or load it from the cache) before any fit is timed, so
    that the first fit's seconds do not include the compilation."""
    from yieldwise.backends import get_backend, stan_file

    get_backend("auto").compile(stan_file("transducer"))


def run(
    results: dict,
    problems: list[tuple[int, Problem]],
    sizes: list[int],
    reps: int,
    save,
    fit=None,
) -> int:
    """Fit every (repetition, problem, size) not in ``results["fits"]``; ``save()`` after each.

    Returns the number of fits made. ``problems`` pairs each problem with its index in
    ``PANEL`` (the seeds use it, so a subset reproduces the full study's fits); ``fit``
    defaults to :func:`run_fit`.
    """
    fit = run_fit if fit is None else fit
    fitted = 0
    for rep in range(reps):
        for index, problem in problems:
            for n in sizes:
                key = f"{problem.name}|{n}|{rep}"
                if key in results["fits"]:
                    continue
                record = fit(problem, index, n, rep, results["seed"])
                results["fits"][key] = record
                fitted += 1
                save()
                s = record["sampler"]
                print(
                    f"{problem.name:>12} n={n:>5} rep {rep + 1}/{reps}: {s['seconds']:.0f} s, "
                    f"{s['divergent']} divergent, {s['treedepth']} tree-depth hits, "
                    f"R-hat {s['max_rhat']}, ESS {s['min_ess_bulk']}",
                    flush=True,
                )
    return fitted


# ------------------------------------------------------------------ report
def _percent(counts: tuple[int, int], error: float) -> str:
    """Coverage in %, and in brackets its fit-clustered standard error in points."""
    hits, checks = counts
    if not checks:
        return "n/a"
    shown = f"{100 * error:.1f}" if np.isfinite(error) else "n/a"
    return f"{100 * hits / checks:.0f} ({shown})"


def _beyond_text(cell: dict, kind: str, tolerance: float) -> str:
    """The levels (in %) missed by more than two standard errors, or "-"."""
    levels = missed_beyond_noise(cell[kind], cell["errors"][kind], tolerance)
    return ", ".join(f"{100 * p:.0f}" for p in levels) or "-"


def pooled_counts(summary: dict, kind: str) -> dict[float, tuple[int, int]]:
    """(hits, checks) per level pooled over every problem and size, each check once."""
    total = {p: [0, 0] for p in PROBS}
    for cell in summary.values():
        for p, (hits, checks) in cell[kind].items():
            total[p][0] += hits
            total[p][1] += checks
    return {p: (h, c) for p, (h, c) in total.items()}


def pooled_line(summary: dict, kind: str, label: str = "Pooled over the panel") -> str:
    """Coverage pooled over every problem and size (each check counted once): a panel-wide
    figure beside the per-cell ones, whose few repetitions make them noisy."""
    total = pooled_counts(summary, kind)
    if not total[PROBS[0]][1]:
        return f"{label}: no checks yet."
    errors = [
        clustered_standard_error([f for cell in summary.values() for f in cell["per_fit"][kind][p]])
        for p in PROBS
    ]
    return (
        f"{label} ({total[PROBS[0]][1]} checks per level): "
        + " / ".join(f"{100 * h / c:.0f} %" for h, c in total.values())
        + " at nominal "
        + " / ".join(f"{100 * p:.0f}" for p in PROBS)
        + " % (fit-clustered standard errors "
        + " / ".join("n/a" if not np.isfinite(e) else f"{100 * e:.1f}" for e in errors)
        + " points)."
    )


def _coverage_rows(summary: dict, kind: str, fits_key: str, tolerance: float) -> list[str]:
    """One table row per problem and size: fits, checks, coverage per level, the goal."""
    rows = []
    for (name, n), cell in summary.items():
        counts = cell[kind]
        rows.append(
            f"| {name} | {n} | {cell[fits_key]} | {counts[0.5][1]} | "
            + " | ".join(_percent(counts[p], cell["errors"][kind][p]) for p in PROBS)
            + f" | {_verdict(goal_met(counts, tolerance))} | "
            + f"{_beyond_text(cell, kind, tolerance)} |"
        )
    return rows


def _verdict(met: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "n/a (no checks)"}[met]


def _worst_gap(summary: dict, kind: str) -> tuple[float, str]:
    """Largest |coverage - nominal| in points over the cells, and where."""
    worst, where = -1.0, ""
    for (name, n), cell in summary.items():
        for p, (h, c) in cell[kind].items():
            if c and abs(h / c - p) > worst:
                worst, where = abs(h / c - p), f"{name}, n = {n}, {100 * p:.0f} %"
    return 100 * worst, where


def goal_result(summary: dict, kind: str, tolerance: float) -> str:
    """Whether every problem-size cell meets the goal, how many do, and the largest gap."""
    verdicts = [goal_met(cell[kind], tolerance) for cell in summary.values()]
    met = sum(v is True for v in verdicts)
    assessed = sum(v is not None for v in verdicts)
    gap, where = _worst_gap(summary, kind)
    largest = f"largest gap {gap:.1f} points ({where})" if where else "no checks yet"
    missed = [cell for cell, v in zip(summary.values(), verdicts, strict=True) if v is False]
    beyond = sum(bool(missed_beyond_noise(c[kind], c["errors"][kind], tolerance)) for c in missed)
    chances = [
        calibrated_pass_chance(c["errors"][kind], tolerance)
        for c, v in zip(summary.values(), verdicts, strict=True)
        if v is not None
    ]
    return (
        f"{'met' if met == len(verdicts) else 'not met'}: {met} of {len(verdicts)} "
        f"problem-size cells ({len(verdicts) - assessed} without checks); {largest}"
        + (
            f"; of the {len(missed)} cells that miss it, {beyond} miss by more than two "
            "standard errors beyond the tolerance at some level"
            if missed
            else ""
        )
        + (
            f"; at these standard errors a method calibrated in every cell would pass about "
            f"{sum(chances):.0f} of the {len(chances)}, and would pass all of them with "
            f"probability 0.9 only with about {repetitions_needed(summary, kind, tolerance)} "
            "repetitions per cell"
            if chances and all(np.isfinite(chances))
            else ""
        )
    )


def repetitions_needed(summary: dict, kind: str, tolerance: float, target: float = 0.9) -> int:
    """Repetitions per cell at which a method calibrated in every cell would meet the goal in
    all cells with probability ``target`` (:func:`calibrated_pass_chance`, cells taken as
    independent), the standard errors shrinking as one over the square root of the fits
    from the ones measured. The measured errors are themselves estimates, so this is a
    rough figure."""
    cells = [(c["errors"][kind], c["fits"]) for c in summary.values()
             if goal_met(c[kind], tolerance) is not None]  # fmt: skip

    def chance(reps: float) -> float:
        return float(np.prod([
            calibrated_pass_chance({p: e * math.sqrt(fits / reps) for p, e in errors.items()},
                                   tolerance)
            for errors, fits in cells
        ]))  # fmt: skip

    low, high = 1.0, 2.0
    while chance(high) < target:
        low, high = high, 2 * high
    while high - low > 0.01:
        middle = (low + high) / 2
        low, high = (middle, high) if chance(middle) < target else (low, middle)
    return math.ceil(high)


def calibrated_pass_chance(errors: dict[float, float], tolerance: float) -> float:
    """The chance that a cell whose intervals cover at exactly their nominal rates is
    measured within ``tolerance`` at every level, when each level's measured coverage
    errs by Normal noise of the given (fit-clustered) standard error, the levels taken as
    independent: ``prod_p (2 Phi(tolerance / se_p) - 1)``. It says how far the study's
    repetitions can tell a calibrated cell from a miscalibrated one; NaN without errors."""
    out = 1.0
    for se in errors.values():
        if not np.isfinite(se):
            return float("nan")
        out *= 1.0 if se == 0 else math.erf(tolerance / (se * math.sqrt(2)))
    return out


#: The kinds of interval a paired comparison reports, with their keys in :func:`summarise`.
_COMPARED = (("bands", "bands_inside"), ("decision outputs", "bands_decision"),
             ("long-run", "long_run"), ("tail bands", "bands_tail"),
             ("tail bands, truth in [0.001, 0.999]", "bands_tail_inside"))  # fmt: skip


def mean_gap(summary: dict, key: str) -> float | None:
    """Mean over cells with checks and over the three levels of |coverage - nominal|, in
    points: one figure that ranks candidates (the goal asks every gap to be small)."""
    gaps = [
        abs(hits / checks - p)
        for cell in summary.values()
        for p, (hits, checks) in cell[key].items()
        if checks
    ]
    return 100 * float(np.mean(gaps)) if gaps else None


def band_width(fits: dict, prob: float = 0.95) -> float | None:
    """Median width on the log-odds scale of the ``prob`` bands at truths inside ``INSIDE``
    (how much a candidate widens or narrows the bands, beside what they cover)."""
    widths = []
    for record in fits.values():
        bands = record["bands"]
        truth = np.asarray(bands["truth"], float)
        keep = (truth >= INSIDE[0]) & (truth <= INSIDE[1])
        lower = np.clip(np.asarray(bands["lower"][str(prob)], float)[keep], 1e-12, 1 - 1e-12)
        upper = np.clip(np.asarray(bands["upper"][str(prob)], float)[keep], 1e-12, 1 - 1e-12)
        widths.extend(np.log(upper / (1 - upper)) - np.log(lower / (1 - lower)))
    return float(np.median(widths)) if widths else None


def tail_log_odds_error(fits: dict) -> list[float] | None:
    """Per :data:`TAIL_QUANTILES` position, the mean over fits and checked classes of
    |logit(posterior mean) - logit(truth)| at the tail outputs; None without such records."""
    records = [r["bands_tail"] for r in fits.values() if "bands_tail" in r]
    if not records:
        return None
    from scipy.special import logit

    def error(bands: dict) -> np.ndarray:
        clip = (1e-9, 1 - 1e-9)
        mean = np.clip(np.asarray(bands["mean"], float), *clip)
        truth = np.clip(np.asarray(bands["truth"], float), *clip)
        return np.abs(logit(mean) - logit(truth)).mean(axis=1)  # (outputs,)

    return np.mean([error(b) for b in records], axis=0).tolist()


def compare(first: dict, second: dict, labels: tuple[str, str]) -> str:
    """A paired comparison of two results files over the fits both hold (the same sets and
    fit seeds when both ran with one ``--seed``): per problem and size, coverage at 50 / 75 /
    95 % of bands, decision-output bands and long-run intervals, fits not clean and
    divergent transitions; then pooled figures, the mean gap to nominal and the bands'
    median log-odds width. Fits in only one file are counted and left out."""
    shared = sorted(set(first["fits"]) & set(second["fits"]))
    if not shared:
        raise SystemExit("--compare: the two results files share no fit (problem|n|rep)")
    only = len(first["fits"]) + len(second["fits"]) - 2 * len(shared)
    fits = [{k: results["fits"][k] for k in shared} for results in (first, second)]
    summaries = [summarise(f) for f in fits]

    def levels(counts: dict[float, tuple[int, int]]) -> str:
        return "/".join(
            f"{100 * h / c:.0f}" if c else "n/a" for _, (h, c) in sorted(counts.items())
        )

    a, b = labels
    lines = [
        f"Paired over {len(shared)} fits ({only} in one file only, left out): {a} -> {b}.",
        "",
        "| problem | n | fits | " + " | ".join(name for name, _ in _COMPARED)
        + " | not clean | divergent |",
        "|---|---:|---:|" + "---|" * len(_COMPARED) + "---|---|",
    ]  # fmt: skip
    for key, cell in summaries[0].items():
        other = summaries[1][key]
        cols = [f"{levels(cell[k])} -> {levels(other[k])}" for _, k in _COMPARED]
        lines.append(
            f"| {key[0]} | {key[1]} | {cell['fits']} | " + " | ".join(cols)
            + f" | {cell['fits'] - cell['clean']} -> {other['fits'] - other['clean']}"
            f" | {cell['divergent']} -> {other['divergent']} |"
        )  # fmt: skip
    lines.append("")
    for name, key in _COMPARED:
        pooled = [levels(pooled_counts(summary, key)) for summary in summaries]
        gaps = [mean_gap(summary, key) for summary in summaries]
        shown = [f"{g:.1f}" if g is not None else "n/a" for g in gaps]
        changes = []
        for p in PROBS:
            pairs = [
                (band, other)
                for cell, twin in ((c, summaries[1][k]) for k, c in summaries[0].items())
                for band, other in zip(cell["per_fit"][key][p], twin["per_fit"][key][p],
                                       strict=True)
            ]  # fmt: skip
            change, error = paired_change(pairs)
            changes.append(
                "n/a" if not np.isfinite(change) else f"{100 * change:+.1f} ({100 * error:.1f})"
            )
        lines.append(
            f"- {name}: pooled {pooled[0]} -> {pooled[1]} %; mean gap to nominal "
            f"{shown[0]} -> {shown[1]} points; change per level, paired by fit (SE): "
            + " / ".join(changes)
        )
    errors = [tail_log_odds_error(f) for f in fits]
    if all(e is not None for e in errors):
        lines.append(
            "- tail outputs (TAIL_QUANTILES): mean |log-odds error| of the posterior mean "
            "per quantile, " + " -> ".join(" / ".join(f"{v:.2f}" for v in e) for e in errors)
        )
    widths = [band_width(f) for f in fits]
    lines.append(
        "- 95 % bands' median log-odds width (truths in [0.001, 0.999]): "
        + " -> ".join(f"{w:.2f}" if w is not None else "n/a" for w in widths)
    )
    lines.append(
        "- fits not clean: "
        + " -> ".join(str(sum(not is_clean(r["sampler"]) for r in f.values())) for f in fits)
        + "; median sampling s: "
        + " -> ".join(
            f"{np.median([r['sampler']['sampling_seconds'] for r in f.values()]):.1f}" for f in fits
        )
    )
    return "\n".join(lines)


def _commands(runs: list[dict]) -> str:
    commits: dict[str, list[str]] = {}
    for r in runs:  # a run's commit, where its record has one (recorded since 2026-11-29)
        shown = commits.setdefault(r["command"], [])
        if r.get("commit") and r["commit"] not in shown:
            shown.append(r["commit"])
    commands = list(commits)
    dates = sorted({r["date"] for r in runs})
    cores = sorted({r["cores"] for r in runs})
    machines = sorted({r["machine"] for r in runs})
    versions: dict[str, list[str]] = {}
    for r in runs:
        for k, v in r["versions"].items():
            versions.setdefault(k, [])
            if v not in versions[k]:
                versions[k].append(v)
    said = "Command" if len(commands) == 1 else "Commands, run as separate processes"
    text = f"{said}: " + "; ".join(
        f"`{c}`" + (f" (at {', '.join(commits[c])})" if commits[c] else "") for c in commands
    )
    if len(commands) > 1:
        text += ", combined with `python bench/coverage.py --merge FILE ... --write`"
    minutes = sum(r["seconds"] for r in runs) / 60
    return (
        f"{text} ({' to '.join(dict.fromkeys([dates[0], dates[-1]]))}, "
        f"{'/'.join(map(str, cores))} cores, {', '.join(machines)}; "
        + ", ".join(f"{k} {'/'.join(v)}" for k, v in versions.items())
        + f"; {minutes:.0f} min of computing in all)."
    )


def _settings_groups(fits: dict) -> str:
    """The NUTS settings the fits ran at; with several, how many fits and which problems
    (and sizes) ran at each."""
    groups: dict[str, list[dict]] = {}
    for record in fits.values():
        groups.setdefault(json.dumps(record["sampler"]["settings"], sort_keys=True), []).append(
            record
        )
    if len(groups) == 1:
        return _settings_text(next(iter(groups)))
    parts = []
    for key, records in sorted(groups.items()):
        cells = ", ".join(
            f"{name} {'/'.join(str(n) for n in sorted(sizes))}"
            for name, sizes in _sizes_by_problem(records).items()
        )
        count = len(records)
        parts.append(f"{_settings_text(key)}: {count} fit{'' if count == 1 else 's'} ({cells})")
    return "; ".join(parts)


def _sizes_by_problem(records: list[dict]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for r in records:
        out.setdefault(r["problem"], set()).add(int(r["n"]))
    return out


def _priors_text(fits: dict) -> str:
    """The hyper-parameters the fits recorded, with how many fits and which problems used
    each (fits recorded before 2026-11-25 did not keep theirs: the defaults of their day)."""
    groups: dict[str, list[dict]] = {}
    for record in fits.values():
        prior = record["sampler"].get("prior")
        key = json.dumps(prior, sort_keys=True) if prior else ""
        groups.setdefault(key, []).append(record)
    parts = []
    for key, records in sorted(groups.items(), key=lambda item: (item[0] == "", item[0])):
        problems = ", ".join(dict.fromkeys(r["problem"] for r in records))
        said = (
            ", ".join(f"{k} {v}" for k, v in json.loads(key).items())
            if key else "not recorded (fits made before 2026-11-25)"
        )  # fmt: skip
        count = len(records)
        parts.append(f"{said}: {count} fit{'' if count == 1 else 's'} ({problems})")
    return "Priors (`Transducer(prior=...)`, as each fit recorded them): " + "; ".join(parts) + "."


def _replaced_text(replaced: list[dict]) -> str:
    """Which cells a later file replaced whole (``--merge ... --replace``), by file."""
    if not replaced:
        return ""
    by: dict[str, list[str]] = {}
    for entry in replaced:
        by.setdefault(entry["by"], []).append(entry["cell"].replace("|", " at n = "))
    return (
        " Cells refitted whole after a design change (`--merge ... --replace`): "
        + "; ".join(f"{', '.join(cells)} from {Path(name).name}" for name, cells in by.items())
        + "."
    )


def render(results: dict) -> str:
    fits = results["fits"]
    summary = summarise(fits)
    samplers = [r["sampler"] for r in fits.values()]
    backends = sorted({_backend_text(s) for s in samplers})
    reps = sorted({cell["fits"] for cell in summary.values()})
    lines = [
        SECTION,
        "",
        _commands(results["runs"])
        + f" Backend: {', '.join(backends)}; seed {results['seed']}."
        + _replaced_text(results.get("replaced", [])),
        "",
        f"Each fit: a fresh calibration set, a `Transducer` with the default prior at these "
        f"NUTS settings "
        f"({_settings_groups(fits)}); repetitions per problem and size: "
        f"{'/'.join(map(str, reps))}. Bands: `predict_interval` for p(c | y) at the nine "
        "cells at the 5 %, ..., 95 % quantiles of the output law (class 1 of a binary "
        "problem, every class of a multi-class one) against the exact truth. Long-run "
        "intervals: central intervals of `long_run_utility` draws against the exact long-run "
        "utility of the rule the transducer sets, for the four named binary matrices (four "
        "seeded random C x C matrices for a C-class problem). Each entry: coverage in %, "
        "then in brackets its standard error in points with the fits as clusters (the checks "
        "of one fit share its posterior and calibration set, so they are not independent: "
        "`clustered_standard_error`, the ratio estimator's sandwich error; 0 where every fit "
        "holds the same share, n/a with one fit). The column after the goal's verdict lists "
        "the levels whose gap exceeds the tolerance by more than two such errors, the misses "
        "the study's noise does not explain (about one in 40 levels whose true gap is "
        "exactly the tolerance is listed by chance); the goal itself is judged on the "
        "coverage as measured.",
        "",
        _priors_text(fits),
        "",
        "### Bands for p(c | y)",
        "",
        f"Counted at outputs whose true probability lies in [{INSIDE[0]}, {INSIDE[1]}] (the "
        "goal), then at all nine outputs.",
        "",
        "| problem | n | fits | checks | 50 % | 75 % | 95 % | within 5 points "
        "| missed by > 2 SE | checks, all outputs | 50 % | 75 % | 95 % |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for (name, n), cell in summary.items():
        inside, every = cell["bands_inside"], cell["bands_all"]
        lines.append(
            f"| {name} | {n} | {cell['fits']} | {inside[0.5][1]} | "
            + " | ".join(_percent(inside[p], cell["errors"]["bands_inside"][p]) for p in PROBS)
            + f" | {_verdict(goal_met(inside, TOLERANCE['bands']))} | "
            + f"{_beyond_text(cell, 'bands_inside', TOLERANCE['bands'])} | {every[0.5][1]} | "
            + " | ".join(_percent(every[p], cell["errors"]["bands_all"][p]) for p in PROBS)
            + " |"
        )
    lines += [
        "",
        pooled_line(summary, "bands_inside")
        + " "
        + pooled_line(summary, "bands_all", "At all nine outputs, pooled"),
        "",
        "### Bands where decisions are uncertain",
        "",
        "The nine outputs above follow the whole output law, so on nearly separable problems "
        f"few of them (two logits: none) have a truth in [{INSIDE[0]}, {INSIDE[1]}]. Here the "
        "bands are checked at nine cells whose truth lies in that range, at the 5 %, ..., "
        "95 % quantiles of the output law restricted to them, ordered by the truth "
        "(`decision_outputs`; measured since 2026-11-24, so fits recorded before lack them: "
        "see the fits column).",
        "",
        "| problem | n | fits | checks | 50 % | 75 % | 95 % | within 5 points | missed by > 2 SE |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    lines += _coverage_rows(summary, "bands_decision", "decision_fits", TOLERANCE["bands"])
    lines += [
        "",
        pooled_line(summary, "bands_decision"),
        "",
        *_systematic_lines(fits),
        "### Long-run-utility intervals",
        "",
        "| problem | n | fits | checks | 50 % | 75 % | 95 % | within 7 points | missed by > 2 SE |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    lines += _coverage_rows(summary, "long_run", "fits", TOLERANCE["long_run"])
    clean = sum(cell["clean"] for cell in summary.values())
    lines += [
        "",
        pooled_line(summary, "long_run"),
        "",
        "### Sampler",
        "",
        "Per problem and size, over its fits: divergent transitions and transitions at the "
        "maximum tree depth (totals), the worst R-hat and the lowest bulk ESS of "
        "`Transducer.diagnostics()`'s quantities, fits clean on all four, seconds per fit "
        "(wall clock, fit and diagnostics; processes running side by side slow each other), "
        "the median leapfrog steps per iteration (the sampler's work, which the load does not "
        "change; n/a for fits made before it was recorded) and fits that raised warnings.",
        "",
        "| problem | n | fits | divergences | tree-depth hits | worst R-hat | lowest bulk ESS "
        "| clean fits | median s | max s | median sampling s | median steps | fits with warnings |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (name, n), cell in summary.items():
        rhat, ess, steps = cell["max_rhat"], cell["min_ess_bulk"], cell["median_steps"]
        lines.append(
            f"| {name} | {n} | {cell['fits']} | {cell['divergent']} | {cell['treedepth']} | "
            f"{'n/a' if rhat is None else f'{rhat:.3f}'} | "
            f"{'n/a' if ess is None else f'{ess:.0f}'} | {cell['clean']} | "
            f"{cell['median_seconds']:.0f} | {cell['max_seconds']:.0f} | "
            f"{cell['median_sampling_seconds']:.0f} | "
            f"{'n/a' if steps is None else f'{steps:.1f}'} | {cell['warned']} |"
        )
    kinds = Counter(w.split(":")[0] for s in samplers for w in s["warnings"])
    later = Counter(w.split(":")[0] for r in fits.values() for w in r.get("measure_warnings", []))
    lines += [
        "",
        "Warnings raised by the fits: "
        + (", ".join(f"{k} x {v}" for k, v in kinds.most_common()) or "none")
        + "; while measuring (bands, long-run draws): "
        + (", ".join(f"{k} x {v}" for k, v in later.most_common()) or "none")
        + ".",
        "",
        "### Goals (measured against, not tests)",
        "",
        "| goal | result |",
        "|---|---|",
        f"| bands within 5 points of nominal (truth in [{INSIDE[0]}, {INSIDE[1]}]) | "
        f"{goal_result(summary, 'bands_inside', TOLERANCE['bands'])} |",
        "| the same at nine outputs where decisions are uncertain | "
        f"{goal_result(summary, 'bands_decision', TOLERANCE['bands'])} |",
        "| long-run-utility intervals within 7 points of nominal | "
        f"{goal_result(summary, 'long_run', TOLERANCE['long_run'])} |",
        f"| every fit clean (0 divergences, 0 tree-depth hits, R-hat <= 1.01, bulk ESS "
        f">= 400) | {'met' if clean == len(samplers) else 'not met'}: {clean} of "
        f"{len(samplers)} fits |",
        "",
        "For information, the bands counted at all outputs, within 5 points of nominal: "
        f"{goal_result(summary, 'bands_all', TOLERANCE['bands'])}.",
        "",
    ]
    return "\n".join(lines)


def _backend_text(sampler: dict) -> str:
    version = sampler["backend_version"]  # e.g. "pystan 3.10.0 (httpstan 4.13.0)"
    named = version if version.startswith(sampler["backend"]) else f"{sampler['backend']} {version}"
    return f"{named}, Stan {sampler['stan_version']}"


def _settings_text(settings_json: str) -> str:
    s = json.loads(settings_json)
    return (
        f"{s['chains']} chains x {s['draws']} draws after {s['warmup']} warm-up, adapt_delta "
        f"{s['adapt_delta']}, max_treedepth {s['max_treedepth']}"
    )


# ------------------------------------------------------------------ command line
def _shown_path(path: Path) -> str:
    """The results path as the command shows it: relative to the repository when inside."""
    path = Path(path)
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def select_problems(
    names: list[str] | None, positives: list[float] | None = None
) -> list[tuple[int, Problem]]:
    """(index in PANEL, problem) of the named problems, in panel order (all when None).

    ``positives``: instead of the problems themselves, their variants with class 1 at each
    of these frequencies (``_problems.with_positives``; binary problems only), each with
    the seed index of :data:`VARIANT_STRIDE`.
    """
    panel = [(i, make()) for i, make in enumerate(PANEL)]
    known = [p.name for _, p in panel]
    unknown = [name for name in names or [] if name not in known]
    if unknown:
        raise SystemExit(f"--problems: unknown problem(s) {unknown}; the panel has {known}")
    chosen = panel if names is None else [(i, p) for i, p in panel if p.name in names]
    if not positives:
        return chosen
    bad = [p for p in positives if not 0.0 < p < 1.0]
    if bad:
        raise SystemExit(f"--positives: frequencies must lie strictly between 0 and 1, found {bad}")
    if names is None:
        chosen = [(i, p) for i, p in chosen if p.n_classes == 2]
    multi = [p.name for _, p in chosen if p.n_classes != 2]
    if multi:
        raise SystemExit(
            f"--positives sets a binary problem's class balance; {multi} have more than two "
            "classes: leave them out of --problems"
        )
    return [
        (i + VARIANT_STRIDE * round(1e4 * share), with_positives(p, share))
        for share in positives
        for i, p in chosen
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", nargs="+", default=None, help="panel problems to run")
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3600])
    parser.add_argument("--reps", type=int, default=20, help="repetitions per problem and size")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--resume", action="store_true", help="keep the fits in --results")
    parser.add_argument("--render", action="store_true", help="report --results only")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--merge", type=Path, nargs="+", default=None,
        help="combine these results files into --results, then report",
    )  # fmt: skip
    parser.add_argument(
        "--replace", action="store_true",
        help="with --merge: a later file's cells replace the earlier files' (whole cells "
        "only; after a design change, the study refitted cell by cell)",
    )  # fmt: skip
    parser.add_argument(
        "--set", dest="design", nargs="+", default=[], metavar="NAME=VALUE",
        help="set constants of yieldwise._design for this run (a candidate to measure, "
        "e.g. RW1_SHARE=0.3); recorded in the run's command",
    )  # fmt: skip
    parser.add_argument(
        "--compare", type=Path, nargs=2, default=None, metavar=("A", "B"),
        help="print a paired comparison of two results files (the fits both hold), then stop",
    )  # fmt: skip
    parser.add_argument(
        "--sampler", nargs="+", default=[], metavar="KEY=VALUE",
        help="NUTS settings that replace the defaults for this run (e.g. warmup=1000); "
        "recorded with every fit and in the run's command",
    )  # fmt: skip
    parser.add_argument(
        "--backend", default=None, choices=backend_names(),
        help="fit with this backend instead of the default 'auto' (e.g. laplace: the "
        "approximation's own coverage); recorded with every fit and in the run's command",
    )  # fmt: skip
    parser.add_argument(
        "--positives", type=float, nargs="+", default=None, metavar="P",
        help="run the binary problems with class 1 at each frequency P instead of the "
        "panel's balance (problems named e.g. logistic@2%%; seeds of their own)",
    )  # fmt: skip
    parser.add_argument(
        "--prefix-draws", type=int, nargs="+", default=[], metavar="D",
        help="also record R-hat and bulk ESS over each chain's first D draws (what a fit of "
        "D draws would report: same seed, same path)",
    )  # fmt: skip
    args = parser.parse_args(argv)

    defaults = sorted(SAMPLER_DEFAULTS.as_dict())
    sampler = key_values(args.sampler, defaults, f"one of {defaults}", parser.error, "--sampler")
    if args.compare:
        print(compare(*(load_results(path) for path in args.compare),
                      labels=tuple(path.stem for path in args.compare)))  # fmt: skip
        return
    set_design_constants(args.design, parser.error)
    if args.reps < 1 or min(args.sizes) < 1:
        parser.error(f"--reps and --sizes must be positive, found {args.reps} and {args.sizes}")
    if args.replace and not args.merge:
        parser.error("--replace applies to --merge: name the files to combine")
    if args.merge:
        results = merge([(str(path), load_results(path)) for path in args.merge], args.replace)
        save_results(results, args.results)
    elif args.render:
        results = load_results(args.results)
    else:
        problems = select_problems(args.problems, args.positives)
        results = new_results(args.seed)
        if not args.resume and args.results.exists():
            raise SystemExit(
                f"--results {args.results} exists; pass --resume to continue it, or choose "
                "another file (a new run would overwrite its fits)"
            )
        if args.resume and args.results.exists():
            results = load_results(args.results)
            if results["seed"] != args.seed:
                raise SystemExit(
                    f"--seed {args.seed} differs from the seed {results['seed']} of the fits "
                    f"in {args.results}; resume with --seed {results['seed']}"
                )
        command = (
            "python bench/coverage.py"
            + (f" --problems {' '.join(args.problems)}" if args.problems else "")
            + (f" --positives {' '.join(map(str, args.positives))}" if args.positives else "")
            + f" --sizes {' '.join(map(str, args.sizes))} --reps {args.reps} --seed {args.seed}"
            + (f" --results {_shown_path(args.results)}" if args.results != RESULTS else "")
            + (f" --set {' '.join(args.design)}" if args.design else "")
            + (f" --sampler {' '.join(args.sampler)}" if args.sampler else "")
            + (f" --backend {args.backend}" if args.backend else "")
            + (f" --prefix-draws {' '.join(map(str, args.prefix_draws))}"
               if args.prefix_draws else "")
        )  # fmt: skip
        started, commit = time.perf_counter(), checkout_commit()
        runs = list(results["runs"])

        def save() -> None:
            # every save records this run so far, so a stopped run still says what ran
            record = _run_record(command, time.perf_counter() - started, fitted_so_far(), commit)
            results["runs"] = [*runs, record]
            save_results(results, args.results)

        before = len(results["fits"])

        def fitted_so_far() -> int:
            return len(results["fits"]) - before

        wanted = [f"{p.name}|{n}|{rep}" for rep in range(args.reps) for _, p in problems
                  for n in args.sizes]  # fmt: skip
        if any(key not in results["fits"] for key in wanted):
            compile_model()
        options = (
            ({"sampler": sampler} if sampler else {})
            | ({"prefix_draws": tuple(args.prefix_draws)} if args.prefix_draws else {})
            | ({"backend": args.backend} if args.backend else {})
        )
        fit = functools.partial(run_fit, **options) if options else None
        run(results, problems, args.sizes, args.reps, save, fit=fit)
        if fitted_so_far() == 0:
            print(f"every fit asked for is already in {args.results}", file=sys.stderr)
    if not results["fits"]:
        raise SystemExit(f"no fits in {args.results}: nothing to report")
    text = render(results)
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
