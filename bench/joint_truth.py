"""Joint transducers against a known truth: do a joint fit's bands cover ``p(class | y)``?

The coverage study (bench/coverage.py) and the decision-quality panel have one- and
two-dimensional outputs only. A joint transducer of three classifiers' 1-D outputs has
three model dimensions, and its kernels sit at scattered centres (120 of them, with a
Gaussian-process smoothing prior and a soft floor under ``tau_f``: docs/model.md). This
study gives such fits a truth:

* **three members**, each a real-valued score with Normal class-conditional laws,
  independent given the class, 30 % positives (:data:`PREVALENCE`); the negatives' scores
  are N(0, 1) in every member, the positives' N(d_j, s^2) with ``d = (1, 1.5, 2)``
  (:data:`SHIFTS`);
* **the truths** (``--truth``): ``linear``, ``s = 1`` (log-odds linear in the outputs, so
  a logistic regression on the scores is the right model, and a smoothing prior can only
  cost); ``quadratic``, ``s = 0.6`` (:data:`TRUTHS`; the log-odds bend down at both ends
  of each score: not monotone). ``p(pos | y)`` is Bayes' rule of the known densities
  (:func:`true_probability`);
* **per repetition** a calibration set of ``n`` items (seed ``[2026, rep, n]``), one joint
  fit at the defaults (fit seed ``rep + 1``), and 4,000 fresh items (:data:`TEST_ITEMS`):
  the held-out mean log score of ``predict_proba`` beside the truth's own and a logistic
  regression's on the raw scores; and at the first 400 of them (:data:`BAND_ITEMS`) the
  central 50 / 75 / 95 % posterior bands of ``p(pos | y)`` (``predict_interval``),
  counted where the true probability lies in [0.001, 0.999] (as the
  coverage study counts bands) and over all 400; beside them the right model's bands on
  the same sets (:func:`reference_coverage`: the maximum-likelihood logistic regression
  of the truth's own family, Wald bands), recomputed from the seeds.

The points of one fit share its errors, so a repetition is the unit: the report gives
the mean coverage over repetitions with its standard error across them, the fits clean
by the package's own rule (``bench/_common.is_clean``), and the log scores.

Usage (from the repository root)::

    python bench/joint_truth.py --truth linear --n 1000 --reps 20 --out FILE
    python bench/joint_truth.py --render FILE [FILE ...] --write   # docs/benchmarks.md
    python bench/joint_truth.py --compare BASE OTHER   # paired by repetition
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
from _common import (
    checkout_commit,
    design_text,
    is_clean,
    sampler_record,
    set_design_constants,
    write_section,
    write_whole,
)
from scipy.special import expit
from scipy.stats import norm

#: The positives' share.
PREVALENCE = 0.3
#: The positives' mean score per member (the negatives' is 0).
SHIFTS = (1.0, 1.5, 2.0)
#: The positives' sd per truth (the negatives' is 1).
TRUTHS = {"linear": 1.0, "quadratic": 0.6}
#: Held-out items per repetition for the log scores, and the first of them that get bands.
TEST_ITEMS = 4000
BAND_ITEMS = 400
#: Central band levels, as in the coverage study.
LEVELS = (0.5, 0.75, 0.95)
#: Where the bands are counted: true probabilities in this closed interval.
INSIDE = (0.001, 0.999)
SECTION = "## Joint transducers against a known truth"


def draw(truth: str, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``m`` items: classes (1 = positive) and their three scores (m, 3)."""
    if truth not in TRUTHS:
        raise ValueError(f"truth must be one of {sorted(TRUTHS)}, found {truth!r}")
    if not isinstance(m, int | np.integer) or m < 1:
        raise ValueError(f"m (the number of items) must be a positive integer, found {m!r}")
    cls = (rng.random(m) < PREVALENCE).astype(int)
    shift, sd = np.asarray(SHIFTS), TRUTHS[truth]
    z = rng.normal(size=(m, len(SHIFTS)))
    y = np.where(cls[:, None] == 1, shift + sd * z, z)
    return cls, y


def true_probability(truth: str, y: np.ndarray) -> np.ndarray:
    """``p(pos | y)`` by Bayes' rule of the known class-conditional densities."""
    sd = TRUTHS[truth]
    y = np.asarray(y, float)
    log_odds = np.log(PREVALENCE / (1 - PREVALENCE)) + (
        norm.logpdf(y, np.asarray(SHIFTS), sd) - norm.logpdf(y, 0.0, 1.0)
    ).sum(axis=1)
    return expit(log_odds)


def coverage(bands: dict[float, tuple], truth: np.ndarray) -> dict[str, dict]:
    """Share of items whose true probability lies in each central band (``bands`` maps a
    level to its ``(lower, upper)`` arrays over the items, as ``predict_interval`` gives
    them): over the items whose truth is in :data:`INSIDE` (``inside``) and over all
    (``all``), per level, with the counts."""
    truth = np.asarray(truth, float)
    inside = (truth >= INSIDE[0]) & (truth <= INSIDE[1])
    out: dict[str, dict] = {"n_inside": int(inside.sum()), "n_all": int(truth.size)}
    for level, (lo, hi) in bands.items():
        hit = (np.asarray(lo) <= truth) & (truth <= np.asarray(hi))
        out[f"{level:g}"] = {
            "inside": float(hit[inside].mean()) if inside.any() else None,
            "all": float(hit.mean()),
        }
    return out


def mean_log_score(cls: np.ndarray, p_pos: np.ndarray) -> float:
    """Mean log probability of the true class, from ``p(pos | y)``."""
    p = np.clip(np.asarray(p_pos, float), 1e-300, 1 - 1e-16)
    return float(np.mean(np.where(np.asarray(cls) == 1, np.log(p), np.log1p(-p))))


def features(truth: str, y: np.ndarray) -> np.ndarray:
    """The correctly specified logistic regression's design: a constant and the scores
    (``linear``), and their squares too (``quadratic``: each member's log-likelihood ratio
    ``log N(y; d, s^2) - log N(y; 0, 1)`` is quadratic in its own score, and the members
    add, so no cross terms)."""
    y = np.asarray(y, float)
    columns = [np.ones(len(y)), y] + ([y**2] if TRUTHS[truth] != 1.0 else [])
    return np.column_stack(columns)


def reference_fit(x: np.ndarray, cls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-likelihood logistic regression of ``cls`` (0 / 1) on the design ``x``: the
    coefficients and their covariance, the inverse of the Fisher information."""
    from scipy.optimize import minimize

    def loss(b):  # the negative log-likelihood and its gradient
        eta = x @ b
        return np.sum(np.logaddexp(0, eta) - cls * eta), x.T @ (expit(eta) - cls)

    b = minimize(loss, np.zeros(x.shape[1]), jac=True, method="BFGS", options={"gtol": 1e-8}).x
    p = expit(x @ b)
    return b, np.linalg.inv((x * (p * (1 - p))[:, None]).T @ x)


def reference_coverage(truth: str, n: int, rep: int) -> dict[str, float]:
    """The right model's coverage on a repetition's own sets: the maximum-likelihood
    logistic regression on :func:`features` (the family the truth belongs to), its Wald
    bands for the log-odds at the repetition's :data:`BAND_ITEMS` held-out items, counted
    as :func:`coverage` counts (truth in :data:`INSIDE`). The items of one set share its
    errors, so 20 repetitions leave this several points from nominal (bench/joint_truth.py
    at n = 300, linear truth: 39 / 65 / 92 % over the first 20, 46.5 / 72.4 / 94.4 % over
    200): the transducer's coverage is read beside it, set by set."""
    rng = np.random.default_rng([2026, rep, n])
    cls, y = draw(truth, n, rng)
    _, test_y = draw(truth, TEST_ITEMS, rng)
    b, cov = reference_fit(features(truth, y), cls)
    xt = features(truth, test_y[:BAND_ITEMS])
    eta, se = xt @ b, np.sqrt(np.einsum("ij,jk,ik->i", xt, cov, xt))
    bands = {level: (expit(eta - norm.ppf(0.5 + level / 2) * se),
                     expit(eta + norm.ppf(0.5 + level / 2) * se)) for level in LEVELS}  # fmt: skip
    out = coverage(bands, true_probability(truth, test_y[:BAND_ITEMS]))
    return {f"{level:g}": out[f"{level:g}"]["inside"] for level in LEVELS}


def members(y: np.ndarray) -> dict[str, pd.DataFrame]:
    """The three scores as a joint transducer's members."""
    return {f"m{j + 1}": pd.DataFrame({f"score_{j + 1}": y[:, j]}) for j in range(y.shape[1])}


def repetition(truth: str, n: int, rep: int) -> dict:
    """One calibration set, one joint fit at the defaults, its held-out figures."""
    from sklearn.linear_model import LogisticRegression

    import yieldwise as yw

    rng = np.random.default_rng([2026, rep, n])
    cls, y = draw(truth, n, rng)
    labels = pd.Series(pd.Categorical(np.where(cls == 1, "pos", "neg"), ["neg", "pos"]))
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = yw.Transducer(seed=rep + 1, progress=False).fit(members(y), labels)
    seconds = time.perf_counter() - started
    test_cls, test_y = draw(truth, TEST_ITEMS, rng)
    at_bands = members(test_y[:BAND_ITEMS])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # held-out scores beyond the calibration range
        p = t.predict_proba(members(test_y))[:, list(t.classes_).index("pos")]
        bands = {}
        for level in LEVELS:  # the package's own bands, as a user reads them
            band = t.predict_interval(at_bands, level).sel({"class": "pos"})
            bands[level] = (band["lower"].values, band["upper"].values)
    regression = LogisticRegression(C=1e6, max_iter=1000).fit(y, cls)
    tau_f = t.posterior_.posterior["tau_f"].values.reshape(-1)
    return {
        "rep": rep, "n": n, "truth": truth,
        "coverage": coverage(bands, true_probability(truth, test_y[:BAND_ITEMS])),
        "log_score": mean_log_score(test_cls, p),
        "log_score_truth": mean_log_score(test_cls, true_probability(truth, test_y)),
        "log_score_logistic": mean_log_score(test_cls, regression.predict_proba(test_y)[:, 1]),
        "sampler": sampler_record(t, seconds, caught),  # coverage.py's record
        "tau_f": [float(q) for q in np.quantile(tau_f, [0.05, 0.5, 0.95])],
        "warnings": sorted({type(w.message).__name__ for w in caught}),
    }  # fmt: skip


def summarise(reps: list[dict]) -> dict:
    """Mean coverage per level over repetitions (inside and all) with its standard error
    across them, fits clean, and the mean log scores."""
    if not reps:
        raise ValueError("summarise needs at least one repetition, found none")
    out: dict = {"reps": len(reps), "clean": sum(is_clean(r["sampler"]) for r in reps)}
    for level in LEVELS:
        key = f"{level:g}"
        for where in ("inside", "all"):
            values = np.array([r["coverage"][key][where] for r in reps
                               if r["coverage"][key][where] is not None], float)  # fmt: skip
            se = float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else None
            out[f"{key}_{where}"] = (float(values.mean()), se)
    for key in ("log_score", "log_score_truth", "log_score_logistic"):
        out[key] = float(np.mean([r[key] for r in reps]))
    # the right model's coverage on the same sets (recomputed from the seeds: no Stan)
    reference = [reference_coverage(r["truth"], r["n"], r["rep"]) for r in reps]
    out["reference"] = {k: float(np.mean([ref[k] for ref in reference])) for k in reference[0]}
    # ... and the fit's coverage minus it, set by set: mean and standard error
    out["reference_gap"] = {}
    for key in out["reference"]:
        gap = np.array([r["coverage"][key]["inside"] - ref[key]
                        for r, ref in zip(reps, reference, strict=True)
                        if r["coverage"][key]["inside"] is not None], float)  # fmt: skip
        se = float(gap.std(ddof=1) / np.sqrt(gap.size)) if gap.size > 1 else None
        out["reference_gap"][key] = (float(gap.mean()), se)
    out["sampling_seconds"] = (
        float(min(r["sampler"]["sampling_seconds"] for r in reps)),
        float(max(r["sampler"]["sampling_seconds"] for r in reps)),
    )
    return out


def compare(base: dict, other: dict) -> dict:
    """Two studies of one truth and size, paired by repetition (the same calibration and
    test sets, :func:`repetition`'s seed): both summaries over the repetitions they share,
    and the other's held-out log score minus the base's per shared repetition, with its
    mean, standard error across repetitions and how many are better (> 0)."""
    for key in ("truth", "n"):
        values = {r[key] for r in base["reps"] + other["reps"]}
        if len(values) > 1:
            raise ValueError(f"compare needs two studies of one {key}, found {sorted(values)}")
    a = {r["rep"]: r for r in base["reps"]}
    b = {r["rep"]: r for r in other["reps"]}
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(
            f"compare needs repetitions both studies ran, found {sorted(a)} and {sorted(b)}"
        )
    diff = np.array([b[k]["log_score"] - a[k]["log_score"] for k in shared])
    se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else None
    return {
        "reps": shared, "base": summarise([a[k] for k in shared]),
        "other": summarise([b[k] for k in shared]),
        "log_score_diff": [float(d) for d in diff], "mean_diff": (float(diff.mean()), se),
        "better": int((diff > 0).sum()),
    }  # fmt: skip


def _compare_text(base: dict, other: dict) -> str:
    """:func:`compare` as text: one line per study, then the paired log-score lines."""
    c = compare(base, other)
    lines = [f"repetitions {c['reps']} ({base['reps'][0]['truth']}, n = {base['reps'][0]['n']})"]
    for name, study in (("base", base), ("other", other)):
        s = c[name]
        lines.append(
            f"{name} ({design_text(study)}): {_cell(s, '0.5')} / {_cell(s, '0.75')} / "
            f"{_cell(s, '0.95')} (right model {_reference_text(s)}); log score "
            f"{s['log_score']:.4f}; clean {s['clean']} of "
            f"{s['reps']}; sampling {s['sampling_seconds'][0]:.0f}-"
            f"{s['sampling_seconds'][1]:.0f} s"
        )
        gaps = ", ".join(f"{100 * m:+.1f}" + ("" if e is None else f" ({100 * e:.1f})")
                         for m, e in s["reference_gap"].values())  # fmt: skip
        lines.append(f"  coverage minus the right model's, set by set (points, SE): {gaps}")
    mean, se = c["mean_diff"]
    se_text = "" if se is None else f" (SE {se:.4f})"
    lines.append(
        f"log score, other - base: mean {mean:+.4f}{se_text}; better in {c['better']} of "
        f"{len(c['reps'])}; per repetition " + ", ".join(f"{d:+.4f}" for d in c["log_score_diff"])
    )
    return "\n".join(lines)


def _cell(summary: dict, level: str) -> str:
    """A coverage cell: inside-mean % (its standard error) [all items' mean %]."""
    (m, se), (m_all, _) = summary[f"{level}_inside"], summary[f"{level}_all"]
    se_text = "" if se is None else f" ({100 * se:.0f})"
    return f"{100 * m:.0f} %{se_text} [{100 * m_all:.0f} %]"


def _reference_text(summary: dict) -> str:
    """The right model's coverage at 50 / 75 / 95 % (:func:`reference_coverage`)."""
    return " / ".join(f"{100 * v:.0f}" for v in summary["reference"].values()) + " %"


def _centres_text(study: dict) -> str:
    """The fits' numbers of centres as recorded (the design of the study's date)."""
    found = sorted({r["sampler"].get("components") for r in study["reps"]} - {None})
    return ", ".join(str(k) for k in found) or "-"


def render(studies: list[dict]) -> str:
    """The benchmarks.md section for one or more studies (one row per truth and size)."""
    lines = [
        SECTION, "",
        "Command: " + "; ".join(f"`{s['meta']['command']}`" for s in studies) + ". "
        + "; ".join(sorted({f"{s['meta']['date']} at {s['meta']['commit'] or 'unknown'}"
                            for s in studies})) + f"; {studies[0]['meta']['machine']}. "
        "Three members with 1-D real scores, independent given the class (bench/"
        "joint_truth.py's docstring), one joint fit per repetition at the defaults of "
        "the study's date or at the design the row names (the centres column: as the fits "
        "recorded them; 120 at every size until 2026-12-08, since then `round(3.65 "
        "sqrt(n))` from 1,090 items on, at most 240). Coverage of the true `p(pos | y)` by "
        "the central bands at 400 held-out items, mean over repetitions (standard error "
        "across them), counted where the truth lies in [0.001, 0.999] (all items in "
        "brackets); beside them the same bands' coverage by the right model on the same "
        "sets (the maximum-likelihood logistic regression on the scores, and their squares "
        "for the quadratic truth, with Wald bands: `reference_coverage`), since the items of "
        "one set share its errors and 20 repetitions leave even the right model several "
        "points from nominal; held-out mean log score on "
        "4,000 items against the truth's and a logistic regression's on the scores.", "",
        "| truth | n | design | reps | clean | 50 % | 75 % | 95 % | right model, same sets | "
        "log score: fit / truth / logistic | sampling s | centres |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for study in studies:
        s = summarise(study["reps"])
        first = study["reps"][0]
        lines.append(
            f"| {first['truth']} | {first['n']:,} | {design_text(study)} | {s['reps']} | "
            f"{s['clean']} | "
            f"{_cell(s, '0.5')} | {_cell(s, '0.75')} | {_cell(s, '0.95')} | "
            f"{_reference_text(s)} | {s['log_score']:.4f} / "
            f"{s['log_score_truth']:.4f} / {s['log_score_logistic']:.4f} | "
            f"{s['sampling_seconds'][0]:.0f}-{s['sampling_seconds'][1]:.0f} | "
            f"{_centres_text(study)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truth", choices=sorted(TRUTHS), default="linear")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="first repetition's number")
    parser.add_argument("--out", type=Path, help="JSON file for the study")
    parser.add_argument("--render", type=Path, nargs="+", help="studies' JSON files")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    parser.add_argument(
        "--compare", type=Path, nargs=2, metavar=("BASE", "OTHER"),
        help="two studies' JSON files, paired by repetition: bands, log scores, differences",
    )  # fmt: skip
    parser.add_argument(
        "--set", dest="design", nargs="+", default=[], metavar="NAME=VALUE",
        help="set constants of yieldwise._design for this run (a candidate to measure, "
        "e.g. MAX_CENTRES=240); recorded in the study's meta and its rendered row",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.compare:
        base, other = (json.loads(path.read_text()) for path in args.compare)
        try:
            print(_compare_text(base, other))
        except ValueError as error:
            parser.error(f"--compare: {error}")
        return 0
    if args.render:
        studies = [json.loads(path.read_text()) for path in args.render]
        text = render(studies)
        if args.write:
            write_section(SECTION, text)
        print(text)
        return 0
    if args.n < 10 or args.reps < 1:
        parser.error(f"--n must be at least 10 and --reps at least 1, found {args.n}, "
                     f"{args.reps}")  # fmt: skip
    settings = set_design_constants(args.design, parser.error)
    study = {
        "meta": {
            "command": "python bench/joint_truth.py " + " ".join(argv),
            "settings": settings,
            "date": date.today().isoformat(), "commit": checkout_commit(),
            "machine": f"{platform.system()} {platform.machine()}, 2 cores",
        },
        "reps": [],
    }  # fmt: skip
    for rep in range(args.first, args.first + args.reps):
        study["reps"].append(repetition(args.truth, args.n, rep))
        if args.out:  # whole after every repetition: a stopped run keeps the ones done
            write_whole(args.out, json.dumps(study, indent=1))
        r = study["reps"][-1]
        print(json.dumps({k: r[k] for k in ("rep", "coverage", "log_score", "sampler")}),
              flush=True)  # fmt: skip
    print(render([study]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
