"""Sampling benchmark of the transducer's Stan program (run by hand; figures in docs/benchmarks.md).

Two simulated calibration sets of ~3,600 items, ~9 % positives:

* ``votes``: random-forest-like vote fractions k/200 (per class beta-binomial, 200 trees),
  ~90 distinct values, many exact 0s and some exact 1s. Modelled on the logit scale as
  interval-censored bins (resolution detected from the data), identical rows merged.
* ``logits``: a 2-D output (two logits of a softmax classifier, heavy-tailed), continuous,
  no merging possible.

Two more 1-D cases come from the coverage study's panel (bench/_problems.py), 3,600 items
each, because the sets above are not the hardest outputs of their kind:

* ``study-votes``: the panel's vote fractions (Beta(0.6, 8) and Beta(6, 2.5) per class,
  200 trees, 9 % positives). The classes overlap far more than in ``votes``; at the
  60-kernel design these sets took about twice the leapfrog steps (docs/benchmarks.md).
* ``clipped``: the panel's normal score clipped to [0, 1] (15 % positives): a continuous
  part plus point masses at 0 and 1, the kind of output issue 16 found slowest.

The 10 s goal of issue 16 is for vote fractions, so it is applied to both vote cases;
``clipped`` has no target of its own (the goal there is "no data set several times
slower than the panel's"), and its row says so.

Each is fitted with the default settings (the fixed kernel design of docs/model.md, 4 chains,
warm-up + draws below, the package's default prior and initial values), and the script reports
sampling time,
divergences, iterations at the maximum tree depth, E-BFMI, and R-hat / bulk ESS of the
invariant quantities: the log-likelihood and the transducer F_t(c=1 | y) at 10 fixed outputs.

    .venv/bin/python bench/bench_sampling.py                 # all four cases, defaults
    .venv/bin/python bench/bench_sampling.py --write         # ... and update docs/benchmarks.md
    .venv/bin/python bench/bench_sampling.py votes --seeds 3 --warmup 300 --draws 300
    .venv/bin/python bench/bench_sampling.py study-votes clipped --seeds 4

Each seed simulates another data set and seeds the sampler with it. The defaults are
the ``Transducer``'s own, read from its signature, so the benchmark cannot drift from them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings

import numpy as np

from yieldwise import Transducer
from yieldwise.backends import SamplerWarning
from yieldwise.backends._base import ebfmi
from yieldwise.transducer import DiagnosticsWarning, encoding

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import load_coverage_study, write_section
from _problems import clipped_problem, votes_problem

_DEFAULT = Transducer()
DEFAULTS = {
    "chains": _DEFAULT.chains,
    "warmup": _DEFAULT.warmup,
    "draws": _DEFAULT.draws,
    "adapt_delta": _DEFAULT.adapt_delta,
    "max_treedepth": _DEFAULT.max_treedepth,
}
# seconds of sampling: the goals of issue 16 (3,600 vote fractions under 10 s, 3,600
# two-logit outputs under 30 s on 2 cores)
TARGETS = {"votes": 10.0, "study-votes": 10.0, "logits": 30.0}
CASES = ("votes", "study-votes", "clipped", "logits")
# the fixed outputs at which F_t(1 | y) is checked for R-hat and ESS, per 1-D case
VOTE_GRID = np.array([0.0, 0.005, 0.02, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0])
_GRID_1D = {
    "votes": VOTE_GRID,
    "study-votes": VOTE_GRID,
    "clipped": np.array([0.0, 0.01, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.99, 1.0]),
}
SECTION = "## Transducer sampling (theory 3.1)"


def simulate_votes(n: int = 3600, seed: int = 0, trees: int = 200, prevalence: float = 0.09):
    """Vote fractions of a random-forest-like classifier: (class, fraction) arrays."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prevalence).astype(int)
    hard_pos = rng.random(n) < 0.05  # positives the forest finds hard
    hard_neg = rng.random(n) < 0.003
    p1 = np.where(hard_pos, rng.beta(1.5, 4, n), rng.beta(20, 1.2, n))
    p0 = np.where(hard_neg, rng.beta(2, 3, n), rng.beta(0.3, 30, n))
    votes = rng.binomial(trees, np.where(y == 1, p1, p0))
    return y, votes / trees


def simulate_logits(n: int = 3600, seed: int = 1, prevalence: float = 0.09):
    """Two heavy-tailed, correlated logits of a softmax classifier (float32 precision)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prevalence).astype(int)
    z = rng.standard_t(5, size=(n, 2))
    mean = np.where(y[:, None] == 1, [-1.0, 1.5], [1.5, -1.8])
    mix = np.array([[1.0, 0.0], [-0.6, 0.8]])
    return y, (mean + z @ mix.T).astype(np.float32).astype(float)


def simulate(case: str, seed: int):
    """(classes, outputs, fixed outputs for the diagnostics, description, sampler seed) of
    one data set."""
    if case not in CASES:
        raise ValueError(f"case: expected one of {', '.join(CASES)}; found {case!r}")
    if case == "logits":
        y, z = simulate_logits(seed=seed + 1)
        a = np.linspace(-4, 4, 5)
        pairs = zip(np.repeat(a, 2), np.tile([-2.0, 2.0], 5), strict=True)
        grid = np.array([[p, q] for p, q in pairs])
        return y, z, grid, f"{y.size} items, {y.mean():.1%} positive, 2-D continuous logits", seed
    sampler_seed = seed
    if case == "votes":
        y, v = simulate_votes(seed=seed)
    else:
        # the coverage study's own set: case seed s is its repetition s - 1 at 3,600 items,
        # sampled and fitted with the study's seeds, so steps pair with its stored fits
        study = load_coverage_study()
        name = (votes_problem if case == "study-votes" else clipped_problem)().name
        ((index, problem),) = study.select_problems([name])
        outputs, y, sampler_seed = study.study_set(problem, index, 3600, seed - 1)
        v = outputs[:, 0]
    desc = f"{y.size} items, {y.mean():.1%} positive, "
    if case == "clipped":
        inner = np.unique(v[(v > 0) & (v < 1)]).size
        desc += f"{inner} distinct values inside (0, 1)"
    else:
        h = encoding.detect_resolution(v)
        desc += f"{np.unique(v).size} distinct vote fractions (h = {h})"
    desc += f", {(v == 0).sum()} exact 0s, {(v == 1).sum()} exact 1s"
    if case == "study-votes":
        desc = "panel law: " + desc
    desc += f" (coverage study, 3,600 items, repetition {seed - 1})" if case != "votes" else ""
    return y, v, _GRID_1D[case], desc, sampler_seed


def _per_case_text(results: list[dict], key: str) -> str:
    """The value of a sampler setting each case ran at (the defaults of adapt_delta and
    warmup depend on the output dimensions: docs/model.md)."""
    by_case: dict[str, set] = {}
    for r in results:
        by_case.setdefault(r["case"], set()).add(r[key])
    parts = []
    for case, values in by_case.items():
        parts.append(f"{' / '.join(f'{v:g}' for v in sorted(values))} ({case})")
    return ", ".join(parts)


def run(case: str, seed: int, args) -> dict:
    """Fit one data set exactly as a user would (``Transducer.fit``)."""
    import arviz as az

    y, outputs, grid, desc, sampler_seed = simulate(case, seed)
    transducer = Transducer(
        chains=args.chains,
        warmup=args.warmup,
        draws=args.draws,
        seed=sampler_seed,
        backend=args.backend,
        adapt_delta=args.adapt_delta,
        max_treedepth=args.max_treedepth,
        prior=json.loads(args.prior) if args.prior else None,
        progress=False,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        transducer.fit(outputs, y)
    stats = transducer.posterior_.sample_stats
    summary = transducer.sampler_summary()
    p1 = transducer.draws_proba(grid).values[:, :, :, 1]
    ll = transducer.posterior_.posterior["log_lik"].values
    rhat = [float(az.rhat(ll))] + [float(az.rhat(p1[:, :, j])) for j in range(p1.shape[2])]
    ess = [float(az.ess(ll))] + [float(az.ess(p1[:, :, j])) for j in range(p1.shape[2])]
    return {
        "case": case,
        "seed": seed,
        "description": desc,
        "rows": int(transducer.posterior_.constant_data.sizes["row"]),
        "K": transducer.n_components_,
        "backend": transducer.backend_,
        "seconds": summary["sampling_seconds"],
        "adapt_delta": summary["adapt_delta"],
        "warmup": summary["warmup"],
        "max_treedepth": summary["max_treedepth"],
        "draws": summary["draws"],
        "divergences": summary["divergent"],
        "treedepth_hits": summary["max_treedepth_hits"],
        "iterations": int(stats["diverging"].size),
        "ebfmi_min": float(np.min(ebfmi(stats["energy"].values))),
        "mean_steps": float(stats["n_steps"].values.mean()),
        "step_size": stats["step_size"].values[:, 0].round(4).tolist(),
        "log_lik_chain_means": ll.mean(axis=1).round(1).tolist(),
        "rhat_log_lik": rhat[0],
        "ess_log_lik": ess[0],
        "rhat_transducer_max": max(rhat[1:]),
        "ess_transducer_min": min(ess[1:]),
        "transducer_mean": p1.mean(axis=(0, 1)).round(4).tolist(),
        "warnings": [
            # the first sentence: split at ". ", not at ".", which cut "R-hat <= 1.01" to 1
            str(w.message).split(". ")[0]
            for w in caught
            if issubclass(w.category, (SamplerWarning, DiagnosticsWarning))
        ],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # not choices=: argparse checks a list default of nargs="*" against them as one value
    parser.add_argument("cases", nargs="*", default=list(CASES), help=", ".join(CASES))
    parser.add_argument("--chains", type=int, default=DEFAULTS["chains"])
    parser.add_argument("--warmup", type=int, default=DEFAULTS["warmup"])
    parser.add_argument("--draws", type=int, default=DEFAULTS["draws"])
    parser.add_argument("--seeds", type=int, default=8, help="1-D data sets per case (seeds 1..n)")
    parser.add_argument("--logit-seeds", type=int, default=2, help="logit data sets (1..n)")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--prior", default="", help="JSON overrides, e.g. '{\"tau_f_scale\": 2}'")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--adapt-delta", type=float, default=DEFAULTS["adapt_delta"])
    parser.add_argument(
        "--max-treedepth",
        type=int,
        default=DEFAULTS["max_treedepth"],
        help="default: by output dimensions (SamplerDefaults.max_treedepth_for)",
    )
    args = parser.parse_args(argv)
    unknown = [case for case in args.cases if case not in CASES]
    if unknown:
        parser.error(f"cases: expected some of {', '.join(CASES)}; found {', '.join(unknown)}")
    print(
        f"# bench_sampling {datetime.date.today()} | {platform.node()} | {os.cpu_count()} cores"
        f" | python {platform.python_version()} | chains={args.chains}"
        f" warmup={args.warmup} draws={args.draws} seeds=1..{args.seeds}/{args.logit_seeds}"
    )
    results = []
    for case in args.cases:
        for seed in range(1, (args.logit_seeds if case == "logits" else args.seeds) + 1):
            started = time.perf_counter()
            out = run(case, seed, args)
            out["wall_seconds"] = time.perf_counter() - started
            results.append(dict(out))
            print(f"\n## {case}, seed {seed}: {out.pop('description')}")
            for key, value in out.items():
                if isinstance(value, float):
                    value = round(value, 3)
                print(f"  {key}: {value}")
            sys.stdout.flush()
    if args.write:
        write_section(SECTION, _section(results, args))
    return 0


def _target_text(case: str) -> str:
    return f"{TARGETS[case]:.0f} s" if case in TARGETS else "no target"


def _met_text(result: dict) -> str:
    if result["case"] not in TARGETS:
        return "(no target)"
    return "yes" if result["seconds"] < TARGETS[result["case"]] else "NO"


def _section(results: list[dict], args) -> str:
    """The docs/benchmarks.md section: one row per case, with the targets."""
    import httpstan

    head = (
        "| case | seed | rows sent to Stan | kernels | sampling (target) | divergences "
        "| max tree depth hits | leapfrog steps / iteration | R-hat max (log-lik, transducer) "
        "| bulk ESS min (log-lik, transducer) | time target met |"
        "\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = "".join(
        f"| {r['case']}: {r['description']} | {r['seed']} | {r['rows']:,} | {r['K']} "
        f"| {r['seconds']:.0f} s ({_target_text(r['case'])}) | {r['divergences']} "
        f"| {r['treedepth_hits']} / {r['iterations']:,} | {r['mean_steps']:.0f} "
        f"| {r['rhat_log_lik']:.3f}, {r['rhat_transducer_max']:.3f} "
        f"| {r['ess_log_lik']:.0f}, {r['ess_transducer_min']:.0f} "
        f"| {_met_text(r)} |\n"
        for r in results
    )
    return (
        f"{SECTION}\n\nCommand: `python bench/bench_sampling.py --write` "
        f"({datetime.date.today()}, {os.cpu_count()} cores, backend {results[0]['backend']}, "
        f"httpstan {httpstan.__version__}; "
        f"{args.chains} chains, "
        f"{_per_case_text(results, 'warmup')} warm-up + "
        f"{_per_case_text(results, 'draws')} draws, "
        f"adapt_delta {_per_case_text(results, 'adapt_delta')}, "
        f"max_treedepth {_per_case_text(results, 'max_treedepth')}; data sets and sampler seeds "
        f"1..{args.seeds} (each 1-D case), 1..{args.logit_seeds} (logits); compile excluded). "
        "Invariant quantities: the log-likelihood and F_t(1 | y) at 10 fixed outputs. "
        "Design and history: docs/model.md.\n\n" + head + rows
    )


if __name__ == "__main__":
    sys.exit(main())
