"""Is ``P(A beats B)`` calibrated? The comparison's probabilities against known truths.

Everything yieldwise sells about choosing a classifier (``compare(...).prob_superiority()``
and ``prob_best()``, theory 4) rests on the transducers' posteriors. The coverage study
(bench/coverage.py) checks one classifier's long-run-utility intervals; this study checks
the probabilities a user acts on, where the truth is known exactly:

* **one task, several classifiers.** The panel's one-dimensional binary problems
  (bench/_problems.py: votes, logistic, beta, non-monotone, overlapping, clipped) are six
  classifiers of one task: each keeps its class-conditional output laws, and all are set
  to one class balance (``with_positives``, 15 % positives unless ``--positives``);
* **the calibration sets** (``--labels``). ``shared``: each repetition draws the items'
  classes once and each classifier's outputs given those classes, independently across
  classifiers (their errors are independent given the class), as a team scoring one
  labelled set with several models would; each classifier gets its own default
  ``Transducer`` fit, and ``yieldwise.compare`` treats the fits as independent, as theory
  4 says for independently fitted transducers. ``independent``: each classifier a
  labelled set of its own. ``joint``: the shared sets, each pair of :data:`JOINT_PAIRS`
  fitted by one joint transducer on the pair's concatenated outputs (theory 4's paired
  draws), so its rows pair with the shared study's fits of the same pairs;
* **a candidate beside compare's probability** (:func:`class_paired_superiority`): the
  long-run utilities of classifiers deployed on one population share its class
  frequencies, ``u_t = sum_c F_t(c) v_t(c)``, so one side's ``F`` weights the other's
  per-class utilities ``v`` (not what ``compare`` does; measured here to inform theory 4);
* **the truth.** For each fit and utility matrix, the exact long-run utility of the rule
  its transducer sets (maximum expected utility at every cell of the problem's partition,
  scored under the exact joint masses: ``decision_quality.long_run``). "A beats B" is
  true when A's rule yields more than B's under the truth; pairs whose truths tie (a
  matrix under which both rules make the same constant decision) are counted apart;
* **the matrices.** ``--matrices`` matrices uniform over the chart (theory 1.1) plus the
  four named ones, drawn once per study seed;
* **three classes** (``--task three-class``): four classifiers of one three-class task,
  softmax probability vectors (:func:`three_class_classifiers`: the panel's ``softmax-3``
  and three others with its class balance, their logits' means and spread moved so that
  they rank differently under different matrices), each fitted by a 2-D transducer, and
  ``--matrices`` + 4 random 3 x 3 matrices (entries uniform on [0, 1]); ``--labels joint``
  is binary only (a pair of 2-D outputs would be a 4-D fit).

For each repetition, matrix and pair of classifiers the study records
``prob_superiority()``; for each matrix and classifier ``prob_best()``. A calibrated
``P(A beats B)`` is right as often as it says: among the comparisons where it is 0.8 the
favoured classifier is truly better in 80 % of them. The report bins the probabilities
(each comparison oriented so that its probability is at least 1/2: the favoured
classifier and how sure the posterior is of it), gives each bin's mean probability, the
share where the favoured classifier is truly better, and its standard error with the
repetitions as clusters (the comparisons of one repetition share its fits); the Brier
score of all comparisons; and the same for ``prob_best()``.

Usage (from the repository root)::

    python bench/superiority.py --sizes 300 1000 --reps 10
    python bench/superiority.py --sizes 300 1000 --reps 10 --labels independent
    python bench/superiority.py --sizes 300 --reps 10 --labels joint
    python bench/superiority.py --task three-class --sizes 300 1000 --reps 10
    python bench/superiority.py --render bench/results/superiority.json \\
        bench/results/superiority_independent.json bench/results/superiority_joint.json \\
        --write  # the report
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import sys
import time
import warnings
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import (
    checkout_commit,
    is_clean,
    load_coverage_study,
    worst_diagnostics,
    write_section,
    write_whole,
)
from _problems import (
    PANEL,
    SOFTMAX_3_MEANS,
    SOFTMAX_3_SD,
    Problem,
    softmax_three,
    with_positives,
)
from decision_quality import NAMED, chart_matrices, long_run, multiclass_matrices

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "superiority.json"
SECTION = "## Probability of superiority against known truths"
#: The three-class task's section of docs/benchmarks.md.
SECTION_THREE = "## Probability of superiority against known truths: three classes"
FORMAT = "yieldwise superiority study"
FORMAT_VERSION = 1
#: The tasks: the binary panel problems, or four three-class classifiers.
TASKS = ("binary", "three-class")
SEED = 2026
#: The six one-dimensional binary problems of the panel: six classifiers of one task.
CLASSIFIERS = ("votes", "logistic", "beta", "non-monotone", "overlapping", "clipped")
POSITIVES = 0.15
N_CHART = 16
#: Seed streams: the labels, each classifier's outputs, the fits, the matrices.
LABEL_STREAM, OUTPUT_STREAM, FIT_STREAM, MATRIX_STREAM, PAIRING_STREAM = 31, 32, 33, 34, 35
#: Random pairings of one side's draws with the other's class frequencies, per comparison.
PAIRINGS = 10
#: Bins of the oriented probability max(P, 1 - P) of superiority, and of P(best).
SUPERIORITY_BINS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
BEST_BINS = (0.0, 0.01, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95, 0.99, 1.0)
#: Truths closer than this are a tie (the same constant decision under both rules).
TIE = 1e-12
#: The probabilities reported: compare()'s, and the class-paired candidate's
#: (:func:`class_paired_superiority`), each with its rows' suffix.
FORMS = (("prob_superiority", ""), ("prob_superiority_class_paired", ", class-paired"))
#: How the classifiers' calibration sets relate: one labelled set scored by all, or one
#: each; "joint": the shared set, each pair of :data:`JOINT_PAIRS` fitted by one joint
#: transducer (theory 4's paired draws).
LABELS = ("shared", "independent", "joint")
#: The pairs of the joint study (each classifier in one pair).
JOINT_PAIRS = (("votes", "logistic"), ("beta", "clipped"), ("non-monotone", "overlapping"))


#: The three-class task's classifiers: name -> (means of the logits against the last class,
#: one per class; their sd). ``softmax-3`` is the panel's; the others change the spread or
#: move the means, so that their exact utilities under the study's matrices differ by
#: 0.001-0.05 and rank differently under different matrices (a calibration study needs
#: comparisons the posterior is unsure of; measured with the exact p(c | y) before any fit).
THREE_CLASS = {
    "softmax-3": (SOFTMAX_3_MEANS, SOFTMAX_3_SD),
    "softmax-3-sharper": (SOFTMAX_3_MEANS, 1.0),
    "softmax-3-noisier": (SOFTMAX_3_MEANS, 1.35),
    "softmax-3-last-apart": ([(1.2, 0.3), (0.3, 1.2), (-1.6, -1.6)], 1.2),
}


class ResultsError(ValueError):
    """A results file that is not this study's, or of another format, seed or balance."""


# ------------------------------------------------------------------ the task
def classifiers(names: tuple[str, ...] = CLASSIFIERS, positives: float = POSITIVES) -> dict:
    """name -> the panel problem at the common class balance."""
    panel = {p.name: p for p in (make() for make in PANEL)}
    unknown = [name for name in names if name not in panel]
    if unknown:
        raise ValueError(f"classifiers {unknown} are not panel problems; it has {list(panel)}")
    not_binary = [name for name in names if panel[name].n_classes != 2]
    if not_binary:
        raise ValueError(f"classifiers must be binary panel problems, found {not_binary}")
    return {name: with_positives(panel[name], positives) for name in names}


def three_class_classifiers() -> dict[str, Problem]:
    """name -> the three-class task's classifiers (:data:`THREE_CLASS`), all at the panel's
    ``softmax-3`` class balance (0.5, 0.3, 0.2)."""
    return {
        name: softmax_three(name, f"softmax vector, logit means {means}, sd {sd}", means, sd)
        for name, (means, sd) in THREE_CLASS.items()
    }


def task_classifiers(task: str, positives: float = POSITIVES) -> dict[str, Problem]:
    """The classifiers of ``task`` (:data:`TASKS`)."""
    if task == "binary":
        return classifiers(positives=positives)
    if task == "three-class":
        return three_class_classifiers()
    raise ValueError(f"task must be one of {list(TASKS)}, found {task!r}")


def shared_sets(
    problems: dict[str, Problem], n: int, rep: int, seed: int = SEED, labels: str = "shared"
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, int]]:
    """(labels, outputs and fit seed, each by classifier) of repetition ``rep``.

    ``labels="shared"``: the labels are drawn once at the common balance and every
    classifier's outputs are drawn given them from its own class-conditional laws, with a
    seed of its own (its place in ``problems``), so the classifiers err independently
    given the class. ``"independent"``: each classifier gets labels of its own as well (a
    calibration set of its own), the case where ``compare``'s independent posteriors are
    exact.
    """
    if labels not in ("shared", "independent"):
        raise ValueError(f"labels must be 'shared' or 'independent', found {labels!r}")
    first = next(iter(problems.values()))
    n_classes = len(first.prevalences)
    common = np.random.default_rng([seed, LABEL_STREAM, n, rep]).choice(
        n_classes, size=n, p=first.prevalences
    )
    by_classifier, outputs, seeds = {}, {}, {}
    for i, (name, problem) in enumerate(problems.items()):
        if not np.array_equal(problem.prevalences, first.prevalences):
            raise ValueError(
                f"classifier {name!r} has class balance {problem.prevalences.tolist()}, the "
                f"others {first.prevalences.tolist()}: one task has one balance"
            )
        by_classifier[name] = (
            common
            if labels == "shared"
            else np.random.default_rng([seed, LABEL_STREAM, n, rep, i]).choice(
                n_classes, size=n, p=first.prevalences
            )
        )
        rng = np.random.default_rng([seed, OUTPUT_STREAM, n, rep, i])
        outputs[name] = np.asarray(problem.sample_outputs(by_classifier[name], rng))
        state = np.random.SeedSequence([seed, FIT_STREAM, n, rep, i]).generate_state(1)
        seeds[name] = int(state[0]) % (2**31 - 1)
    return by_classifier, outputs, seeds


def study_matrices(
    seed: int = SEED, n_chart: int = N_CHART, n_classes: int = 2
) -> tuple[np.ndarray, list[str]]:
    """``n_chart`` matrices uniform over the chart, then the four named ones; for more
    classes ``n_chart + 4`` random ``C x C`` matrices (entries uniform on [0, 1])."""
    if n_classes > 2:
        return multiclass_matrices(
            np.random.default_rng([seed, MATRIX_STREAM]), n_chart + 4, n_classes
        )
    chart = chart_matrices(n_chart, np.random.default_rng([seed, MATRIX_STREAM]))
    named = np.array(list(NAMED.values()), float)
    return np.concatenate([chart, named]), [f"chart {i}" for i in range(n_chart)] + list(NAMED)


# ------------------------------------------------------------------ one repetition
def fit(outputs: Any, labels: np.ndarray, seed: int, fit_options: dict | None) -> tuple:
    """A default ``Transducer`` (plus ``fit_options``) fitted to ``outputs``, and its
    record: seconds, the sampler's health and the kinds of warning it raised."""
    from yieldwise import Transducer

    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = Transducer(seed=seed, progress=False, **(fit_options or {})).fit(outputs, labels)
    info = t.sampler_summary()
    return t, {
        "seconds": time.perf_counter() - started,
        "divergent": int(info["divergent"]),
        "treedepth": int(info["max_treedepth_hits"]),
        **worst_diagnostics(t.diagnostics()),
        "warnings": sorted({w.category.__name__ for w in caught}),
    }


def run_rep(
    problems: dict[str, Problem],
    n: int,
    rep: int,
    matrices: np.ndarray,
    seed: int = SEED,
    fit_options: dict | None = None,
    labels: str = "shared",
    class_paired: bool = True,
) -> dict:
    """Fit every classifier's transducer on the shared set and record the comparison
    (``fit_options``: further ``Transducer`` arguments, for the tests' Laplace fits);
    ``class_paired``: also the candidate :func:`class_paired_superiority` (about 12 s per
    2-D fit and 20 matrices; the three-class task leaves it out)."""
    from yieldwise import compare

    by_classifier, outputs, seeds = shared_sets(problems, n, rep, seed, labels)
    fits, fitted = {}, {}
    for name, problem in problems.items():
        frame = pd.DataFrame(outputs[name], columns=problem.columns)
        t, fits[name] = fit(frame, by_classifier[name], seeds[name], fit_options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the partition's cells reach beyond the data
            p_hat = t.predict_proba(pd.DataFrame(problem.cells, columns=problem.columns))
        fitted[name] = t
        fits[name]["truth"] = long_run(np.asarray(p_hat), problem.joint(), matrices).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # extrapolation beyond a fit's outputs is expected
        comparison = compare(fitted, matrices)
    names = list(problems)
    superiority, best, means = [], [], []
    for m in comparison.utilities["matrix"].values:
        table = comparison.prob_superiority(matrix=m)
        superiority.append(table.loc[names, names].to_numpy().tolist())
        best.append(comparison.prob_best(matrix=m).loc[names].tolist())
        means.append([float(np.mean(comparison.samples(k, matrix=m))) for k in names])
    record = {
        "n": n, "rep": rep, "labels": labels, "classifiers": names, "fits": fits,
        "prob_superiority": superiority, "prob_best": best, "posterior_mean": means,
    }  # fmt: skip
    if not class_paired:
        return record
    parts = {k: class_parts(fitted[k], problems[k], matrices) for k in names}
    for k in names:  # the parts add up to compare's own draws: the same rule, the same cells
        whole = np.stack([comparison.samples(k, matrix=m) for m in range(len(matrices))], 1)
        fits[k]["parts_gap"] = float(np.abs(parts[k].sum(axis=2) - whole).max())
    rng = np.random.default_rng([seed, PAIRING_STREAM, n, rep])
    freq = {k: fitted[k].posterior.class_frequencies() for k in names}  # (S, C) each
    record["prob_superiority_class_paired"] = [
        [[class_paired_superiority(parts[a][:, m], parts[b][:, m], freq[a], freq[b], rng)
          if a != b else float("nan") for b in names] for a in names]
        for m in range(len(matrices))
    ]  # fmt: skip
    return record


def class_parts(transducer: Any, problem: Problem, matrices: np.ndarray) -> np.ndarray:
    """Per draw, matrix and class, ``w_t(c) = integral U[delta(y), c] F_t(c, y) dy`` (S, M,
    C): the long-run utility split by the class, for the rule ``delta`` that
    ``long_run_utility`` deploys by default (maximum expected utility under the
    transducer's predictive, here written out as a callable so that the same rule scores
    each class's column alone). ``sum_c w_t(c) = u_t``, which :func:`run_rep` checks."""
    from yieldwise import long_run_utility

    classes = np.arange(matrices.shape[2])
    out = []
    for u in matrices:

        def rule(outputs, u=u):
            frame = pd.DataFrame(np.asarray(outputs).reshape(len(outputs), -1),
                                 columns=problem.columns)  # fmt: skip
            return np.argmax(np.asarray(transducer.predict_proba(frame)) @ u.T, axis=1)

        masked = np.stack([np.where(classes[None, :] == c, u, 0.0) for c in classes])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            draws = long_run_utility(transducer, masked, rule=rule)
        out.append(draws.values.reshape(-1, len(classes)))
    return np.stack(out, axis=1)


def class_paired_superiority(
    parts_a: np.ndarray, parts_b: np.ndarray, f_a: np.ndarray, f_b: np.ndarray,
    rng: np.random.Generator, pairings: int = PAIRINGS,
) -> float:  # fmt: skip
    """``P(u_A > u_B)`` with the class frequencies shared: a candidate for transducers
    fitted on the same labelled items, measured here, not in ``compare``.

    Each draw's long-run utility is ``u_t = sum_c F_t(c) v_t(c)``, with ``F_t(c)`` the
    class frequencies and ``v_t(c) = w_t(c) / F_t(c)`` the utility per item of class ``c``.
    Fitted on the same labels, the two fits learn the same class frequencies, and under a
    prior that factorises into the class frequencies and the outputs' laws given the class
    the joint posterior is one draw of ``F`` shared by both and independent ``v``'s. So one
    side's draws keep their own ``F_t``, the other's ``v`` (drawn at random, ``pairings``
    times) is weighted by it; the two sides' roles are swapped and the results averaged.
    ``parts_*``: one matrix's :func:`class_parts` (S, C); ``f_*``: the fits' class
    frequencies per draw (S, C), ``posterior.class_frequencies()``.
    """
    v_a, v_b = parts_a / f_a, parts_b / f_b
    u_a, u_b = parts_a.sum(axis=1), parts_b.sum(axis=1)
    wins = []
    for _ in range(pairings):
        into_a = (f_a * v_b[rng.integers(0, len(v_b), len(f_a))]).sum(axis=1)
        into_b = (f_b * v_a[rng.integers(0, len(v_a), len(f_b))]).sum(axis=1)
        wins += [np.mean(u_a > into_a) + 0.5 * np.mean(u_a == into_a),
                 np.mean(into_b > u_b) + 0.5 * np.mean(into_b == u_b)]  # fmt: skip
    return float(np.mean(wins))


def run_joint_rep(
    problems: dict[str, Problem],
    n: int,
    rep: int,
    matrices: np.ndarray,
    seed: int = SEED,
    fit_options: dict | None = None,
    pairs: tuple[tuple[str, str], ...] = JOINT_PAIRS,
) -> dict:
    """Theory 4's route for one labelled set: per pair of classifiers one joint transducer
    on their concatenated outputs, whose members' draws are paired. The set is the shared
    study's own (same labels, outputs and seeds), so its rows pair with those fits."""
    from yieldwise import compare

    by_classifier, outputs, seeds = shared_sets(problems, n, rep, seed, "shared")
    fits, truth, superiority = {}, {}, {}
    for a, b in pairs:
        members = {a: outputs[a].ravel(), b: outputs[b].ravel()}
        joint, fits[f"{a}|{b}"] = fit(members, by_classifier[a], seeds[a], fit_options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in (a, b):  # each member decides by its own (marginal) transducer
                cells = problems[name].cells.ravel()
                p_hat = np.asarray(joint.marginal(name).predict_proba(cells))
                truth[name] = long_run(p_hat, problems[name].joint(), matrices).tolist()
            comparison = compare(joint, matrices)
        superiority[f"{a}|{b}"] = [
            float(comparison.prob_superiority(matrix=m).loc[a, b]) for m in range(len(matrices))
        ]
    return {"n": n, "rep": rep, "labels": "joint", "fits": fits, "truth": truth,
            "prob_superiority": superiority}  # fmt: skip


# ------------------------------------------------------------------ counting
def comparisons(records: list[dict], key: str = "prob_superiority") -> pd.DataFrame:
    """One row per (repetition, matrix, unordered pair): the probability that the first
    is better (``key``: compare's, or the class-paired candidate's), whether it truly is,
    and the truths' gap. Ties are kept, flagged."""
    rows = []
    for r in records:
        if r.get("labels") == "joint":
            rows += _joint_rows(r)
            continue
        names = r["classifiers"]
        truth = np.array([r["fits"][k]["truth"] for k in names])  # (classifiers, matrices)
        for m, table in enumerate(r[key]):
            for i, j in itertools.combinations(range(len(names)), 2):
                gap = truth[i, m] - truth[j, m]
                rows.append(_row(r, m, names[i], names[j], table[i][j], gap))
    return pd.DataFrame(rows)


def _joint_rows(record: dict) -> list[dict]:
    rows = []
    for pair, probs in record["prob_superiority"].items():
        a, b = pair.split("|")
        for m, p in enumerate(probs):
            rows.append(_row(record, m, a, b, p, record["truth"][a][m] - record["truth"][b][m]))
    return rows


def _row(record: dict, m: int, a: str, b: str, p: float, gap: float) -> dict:
    """One comparison: P(a beats b) under matrix ``m`` and the truths' gap ``u_a - u_b``."""
    return {"n": record["n"], "rep": record["rep"], "matrix": m, "a": a, "b": b,
            "p": float(p), "a_better": bool(gap > 0), "tie": bool(abs(gap) <= TIE),
            "gap": float(gap)}  # fmt: skip


def oriented(table: pd.DataFrame) -> pd.DataFrame:
    """Each comparison from the favoured classifier's side: ``p`` becomes max(P, 1 - P)
    and ``right`` says whether the favoured one is truly better (P = 1/2 exactly favours
    the first, whose chance is then 1/2 either way)."""
    out = table[~table["tie"]].copy()
    flip = out["p"] < 0.5
    out["p"] = np.where(flip, 1 - out["p"], out["p"])
    out["right"] = np.where(flip, ~out["a_better"], out["a_better"])
    return out


def clustered_share(hits: np.ndarray, clusters: np.ndarray) -> tuple[float, float]:
    """(share, standard error) of ``hits`` with ``clusters`` (the repetitions) as the
    sampling units: bench/coverage.py's ratio estimator over clusters
    (``clustered_standard_error``); NaN error with fewer than two clusters."""
    hits = np.asarray(hits, float)
    if hits.size == 0:
        return float("nan"), float("nan")
    frame = pd.DataFrame({"h": hits, "c": np.asarray(clusters)}).groupby("c")["h"]
    per_cluster = frame.agg(["sum", "count"]).to_numpy()
    return float(hits.mean()), load_coverage_study().clustered_standard_error(per_cluster)


def calibration_table(
    p: np.ndarray, outcome: np.ndarray, clusters: np.ndarray, bins: tuple[float, ...]
) -> list[dict]:
    """Per bin ``[lo, hi)`` (the last closed): count, mean probability, the share of
    outcomes that are true, its clustered standard error."""
    p, outcome = np.asarray(p, float), np.asarray(outcome, bool)
    rows = []
    for k, (lo, hi) in enumerate(itertools.pairwise(bins)):
        last = k == len(bins) - 2
        inside = (p >= lo) & ((p <= hi) if last else (p < hi))
        share, se = clustered_share(outcome[inside], np.asarray(clusters)[inside])
        rows.append({
            "bin": (lo, hi), "count": int(inside.sum()),
            "mean_p": float(p[inside].mean()) if inside.any() else float("nan"),
            "share": share, "se": se,
        })  # fmt: skip
    return rows


def best_table(records: list[dict]) -> pd.DataFrame:
    """One row per (repetition, matrix, classifier): P(best) and whether it is the true
    best (matrices where the best truths tie are left out)."""
    rows = []
    for r in records:
        names = r["classifiers"]
        truth = np.array([r["fits"][k]["truth"] for k in names])
        for m, probs in enumerate(r["prob_best"]):
            top = truth[:, m].max()
            if (truth[:, m] >= top - TIE).sum() > 1:
                continue
            for i, name in enumerate(names):
                rows.append({
                    "n": r["n"], "rep": r["rep"], "matrix": m, "classifier": name,
                    "p": float(probs[i]), "best": bool(truth[i, m] == top),
                })  # fmt: skip
    return pd.DataFrame(rows)


def brier(p: np.ndarray, outcome: np.ndarray) -> float:
    return float(np.mean((np.asarray(p, float) - np.asarray(outcome, float)) ** 2))


# ------------------------------------------------------------------ results file
def new_results(
    seed: int, positives: float, n_chart: int, labels: str = "shared", task: str = "binary"
) -> dict:
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "seed": seed,
            "positives": positives, "n_chart": n_chart, "labels": labels, "task": task,
            "runs": [], "reps": []}  # fmt: skip


def read_results(path: Path) -> dict:
    """A results file of this study and format version (else :class:`ResultsError`)."""
    results = json.loads(Path(path).read_text())
    if results.get("format") != FORMAT or results.get("format_version") != FORMAT_VERSION:
        raise ResultsError(
            f"{path} is not a {FORMAT!r} file of format version {FORMAT_VERSION} (found "
            f"{results.get('format')!r}, version {results.get('format_version')!r}); give "
            "another file"
        )
    results.setdefault("labels", "shared")  # the first run's file, before --labels
    results.setdefault("task", "binary")  # the files before --task
    return results


def load_results(
    path: Path, seed: int, positives: float, n_chart: int, labels: str = "shared",
    task: str = "binary",
) -> dict:  # fmt: skip
    results = read_results(path)
    found = (results["seed"], results["positives"], results["n_chart"], results["labels"],
             results["task"])  # fmt: skip
    wanted = (seed, positives, n_chart, labels, task)
    if found != wanted:
        raise ResultsError(
            f"{path} holds seed, positives, matrices, labels, task {found}, not {wanted}: a "
            "resumed study must keep them; give another --results"
        )
    return results


# ------------------------------------------------------------------ report
def _pct(share: float, se: float) -> str:
    if not np.isfinite(share):
        return "n/a"
    return f"{100 * share:.0f} ({100 * se:.1f})" if np.isfinite(se) else f"{100 * share:.0f}"


def _cells(row_label: str, rows: list[dict], first: str | None = None) -> str:
    """A table row: its label, ``first`` (another column) when given, then the bins."""
    cols = [
        "-" if r["count"] == 0 else f"{_pct(r['share'], r['se'])}; p {r['mean_p']:.2f}, "
        f"{r['count']}" for r in rows
    ]  # fmt: skip
    return f"| {row_label} | " + ("" if first is None else f"{first} | ") + " | ".join(cols)


def render(studies: list[dict]) -> str:
    """The report of one or more results files (one per ``labels`` setting)."""
    if not studies or not all(s["reps"] for s in studies):
        raise ValueError("render needs results files that each hold a repetition")
    first = studies[0]
    tasks = {s.get("task", "binary") for s in studies}
    if len(tasks) > 1:
        raise ValueError(f"render needs results files of one task, found {sorted(tasks)}")
    three = tasks == {"three-class"}
    names = list(THREE_CLASS) if three else list(CLASSIFIERS)
    task_text = (
        f"Four classifiers of one three-class task ({', '.join(names)}: softmax probability "
        "vectors at the panel's softmax-3 class balance 0.5 / 0.3 / 0.2, their logits' "
        "means and sd in THREE_CLASS), each fitted by a 2-D transducer; "
        f"{first['n_chart'] + 4} random 3 x 3 matrices (entries uniform on [0, 1])"
        if three
        else f"Six classifiers of one task ({', '.join(names)}: the panel's 1-D binary "
        f"problems at {100 * first['positives']:g} % positives), {first['n_chart']} chart "
        "matrices and the four named ones"
    )
    runs = "; ".join(
        f"`{r['command']}` ({r['date']}, at {r['commit']})" for s in studies for r in s["runs"]
    )
    fits = [f for s in studies for r in s["reps"] for f in r["fits"].values()]
    lines = [
        SECTION_THREE if three else SECTION,
        "",
        f"Commands: {runs}. 2 cores, {platform.system()} {platform.machine()}; default "
        f"`Transducer` settings. {task_text}; "
        "`compare(...).prob_superiority()` and `prob_best()` against the exact long-run "
        "utilities of the rules the fits set (bench/superiority.py's docstring). Labels "
        "*shared*: one calibration set per repetition, its labels drawn once and each "
        "classifier's outputs given them (a team scoring one labelled set with several "
        "models); *independent*: each classifier a labelled set of its own"
        + (
            ""
            if three
            else "; *joint*: the shared sets, each pair of JOINT_PAIRS fitted by one joint "
            "transducer (paired draws; rows *the joint pairs* give the shared study's "
            "independent fits of the same pairs on the same sets); *class-paired*: the "
            "candidate of `class_paired_superiority`, the class frequencies shared between "
            "the two sides (not what `compare` does)"
        )
        + f". {len(fits)} fits, {sum(is_clean(f) for f in fits)} clean.",
        "",
        "`P(A beats B)`, each comparison seen from the favoured classifier (probability "
        "max(P, 1 - P)): how often the favoured classifier is truly better, in %, with its "
        "standard error (repetitions as clusters) in brackets; then the bin's mean "
        "probability and its number of comparisons. Calibrated, the share equals the mean "
        "probability.",
        "",
        "| labels, n | comparisons (ties) | "
        + " | ".join(f"{lo:g}-{hi:g}" for lo, hi in itertools.pairwise(SUPERIORITY_BINS))
        + " | Brier |",
        "|---|---:|" + "---|" * (len(SUPERIORITY_BINS) - 1) + "---:|",
    ]
    sure_lines = []
    jointly = any(s["labels"] == "joint" for s in studies)
    variants = [(s, key, how, False) for s, (key, how) in itertools.product(studies, FORMS)]
    if jointly:  # the shared fits of the joint study's pairs, for a paired reading
        variants += [(s, key, how + ", the joint pairs", True) for s in studies
                     if s["labels"] == "shared" for key, how in FORMS]  # fmt: skip
    for study, key, how, pairs_only in variants:
        if not all(key in r for r in study["reps"]):
            continue
        table = comparisons(study["reps"], key)
        if pairs_only:
            wanted = {frozenset(p) for p in JOINT_PAIRS}
            keep = [frozenset(ab) in wanted for ab in zip(table["a"], table["b"], strict=True)]
            table = table[keep]
        for n in sorted(set(table["n"])):
            cell = table[table["n"] == n]
            o = oriented(cell)
            rows = calibration_table(o["p"], o["right"], o["rep"], SUPERIORITY_BINS)
            untied = cell[~cell["tie"]]
            counted = f"{len(untied)} ({int(cell['tie'].sum())})"
            lines.append(
                _cells(f"{study['labels']}, {n}{how}", rows, counted)
                + f" | {brier(untied['p'], untied['a_better']):.4f} |"
            )
        o = oriented(table)
        sure = o[o["p"] >= 0.95]
        share, se = clustered_share(
            sure["right"], sure["n"].astype(str) + "/" + sure["rep"].astype(str)
        )
        sure_lines.append(
            f"Labels {study['labels']}{how}: where the posterior is at least 95 % sure "
            f"({len(sure)} comparisons), the favoured classifier is truly better in "
            f"{_pct(share, se)} %."
        )
    lines += ["", *sure_lines]
    lines += [
        "",
        f"`P(best)` of each classifier against whether it is truly the best of the {len(names)} "
        "(matrices whose best truths tie left out), as above:",
        "",
        "| labels, n | " + " | ".join(
            f"{lo:g}-{hi:g}" for lo, hi in itertools.pairwise(BEST_BINS)
        ) + " | Brier |",
        "|---|" + "---|" * (len(BEST_BINS) - 1) + "---:|",
    ]  # fmt: skip
    for study in studies:
        if study["labels"] == "joint":
            continue  # one pair per fit: no P(best) over the six
        best = best_table(study["reps"])
        for n in sorted(set(best["n"])):
            cell = best[best["n"] == n]
            rows = calibration_table(cell["p"], cell["best"], cell["rep"], BEST_BINS)
            lines.append(
                _cells(f"{study['labels']}, {n}", rows)
                + f" | {brier(cell['p'], cell['best']):.4f} |"
            )
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--positives", type=float, default=POSITIVES)
    parser.add_argument("--matrices", type=int, default=N_CHART, help="chart matrices")
    parser.add_argument("--labels", choices=LABELS, default="shared")
    parser.add_argument("--task", choices=TASKS, default="binary",
                        help="the binary panel problems, or four 3-class classifiers")  # fmt: skip
    parser.add_argument("--results", type=Path, default=None,
                        help="the results file (default: bench/results/superiority.json, "
                             "superiority_LABELS.json for other --labels; "
                             "superiority_three_class[_LABELS].json for 3 classes)")  # fmt: skip
    parser.add_argument(
        "--render", type=Path, nargs="+", default=None, metavar="FILE",
        help="report these results files only (one per labels setting)",
    )  # fmt: skip
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.render:
        try:
            text = render([read_results(f) for f in args.render])
        except (OSError, ValueError) as error:
            parser.error(f"--render: {error}")
        print(text)
        if args.write:
            write_section(text.split("\n", 1)[0], text)  # the task's section
        return
    if not 0.0 < args.positives < 1.0:
        parser.error(f"--positives must lie strictly between 0 and 1, found {args.positives}")
    if args.reps < 1 or args.matrices < 0 or any(n < 20 for n in args.sizes):
        parser.error("--reps must be >= 1, --matrices >= 0 and every size >= 20")
    if args.task != "binary" and args.labels == "joint":
        parser.error("--labels joint is for --task binary only (a joint fit of two 2-D "
                     "outputs would be 4-D)")  # fmt: skip
    stem = "superiority" + ("" if args.task == "binary" else "_three_class")
    path = args.results or (
        RESULTS.with_name(f"{stem}.json")
        if args.labels == "shared"
        else RESULTS.with_name(f"{stem}_{args.labels}.json")
    )
    identity = (args.seed, args.positives, args.matrices, args.labels, args.task)
    try:
        results = load_results(path, *identity) if path.exists() else new_results(*identity)
    except ResultsError as error:
        parser.error(str(error))
    problems = task_classifiers(args.task, args.positives)
    n_classes = len(next(iter(problems.values())).prevalences)
    matrices, _ = study_matrices(args.seed, args.matrices, n_classes)
    done = {(r["n"], r["rep"]) for r in results["reps"]}
    command = "python bench/superiority.py " + " ".join(sys.argv[1:] if argv is None else argv)
    results["runs"].append({"command": command, "date": date.today().isoformat(),
                            "commit": checkout_commit()})  # fmt: skip
    for rep in range(args.reps):
        for n in args.sizes:
            if (n, rep) in done:
                continue
            started = time.perf_counter()
            if args.labels == "joint":
                record = run_joint_rep(problems, n, rep, matrices, args.seed)
            else:
                paired = args.task == "binary"  # the candidate, binary only (run_rep)
                record = run_rep(problems, n, rep, matrices, args.seed, labels=args.labels,
                                 class_paired=paired)  # fmt: skip
            results["reps"].append(record)
            write_whole(path, json.dumps(results))
            clean = sum(is_clean(f) for f in record["fits"].values())
            print(f"n = {n}, repetition {rep}: {clean} of {len(record['fits'])} fits clean, "
                  f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
    print(render([results]))


if __name__ == "__main__":
    main()
