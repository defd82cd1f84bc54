"""The shipped joint sets: joint transducers of the digits' classifiers, fit by fit.

A joint transducer's kernels sit at scattered centres (three or more model dimensions;
docs/model.md). A candidate design for them (``--set NAME=VALUE``, constants of
``yieldwise._design``) is measured on bench/joint_truth.py's known truths and on the three
shipped joint sets (bench/fit_one.py's ``SHIPPED``: ``joint-forest-network``, three output
dimensions; ``joint-forest-knn-network``, four; ``joint-forest-knn-logit``, three
one-dimensional members; 1,079 items each), at fit seeds 1-3 by default. Per fit:

* the sampler's record (bench/_common.sampler_record: divergent transitions, tree-depth
  hits, worst R-hat, lowest bulk ESS, seconds) and whether it is clean
  (``_common.is_clean``);
* the conditional PSIS-LOO elpd, ``loo(conditional=True)`` (the class given the outputs:
  the comparison of designs, on the data the transducer will be used for);
* each member's long-run utility (posterior mean) and the joint fit's ``P(A beats B)``
  for the members' pairs, under vignette 3's matrix ``[[0, -10], [-1, 5]]``
  (:data:`SCREENING`): how far the design moves the answers a user reads.

Usage (from the repository root)::

    python bench/joint_shipped.py [--sets NAME ...] [--seeds 1 2 3] [--set NAME=VALUE ...]
        --out FILE
    python bench/joint_shipped.py --render FILE [FILE ...]   # a markdown table
    python bench/joint_shipped.py --compare BASE OTHER       # paired by set and seed
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
from _common import (
    checkout_commit,
    design_text,
    is_clean,
    sampler_record,
    set_design_constants,
    write_whole,
)
from fit_one import SHIPPED, shipped_set

#: The joint sets of bench/fit_one.py.
JOINT_SETS = tuple(name for name, (_, cols) in SHIPPED.items() if isinstance(cols, dict))
#: Vignette 3's utility matrix (decisions pass, check; classes other, eight).
SCREENING = [[0, -10], [-1, 5]]


def fit_record(name: str, seed: int) -> dict:
    """One joint fit of a shipped set at the defaults (as ``_design`` now stands) and its
    figures."""
    import yieldwise as yw

    if name not in JOINT_SETS:
        raise ValueError(f"name must be one of {list(JOINT_SETS)}, found {name!r}")
    outputs, labels = shipped_set(name)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = yw.Transducer(seed=seed, progress=False).fit(outputs, labels)
    seconds = time.perf_counter() - started
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = t.loo(conditional=True)
    matrix = yw.UtilityMatrix(SCREENING, decisions=["pass", "check"], classes=list(t.classes_))
    comparison = yw.compare(t, matrix)
    means = comparison.summary().set_index("classifier")["mean"]
    beats = comparison.prob_superiority()
    names = list(comparison.names)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    return {
        "set": name, "seed": seed, "items": len(labels),
        "sampler": sampler_record(t, seconds, caught),
        "elpd_conditional": float(loo["elpd_loo"]), "elpd_se": float(loo["se"]),
        "long_run_mean": {k: float(means[k]) for k in names},
        "prob_beats": {f"{a} > {b}": float(beats.loc[a, b]) for a, b in pairs},
    }  # fmt: skip


def _sampler_text(s: dict) -> str:
    """divergent / tree-depth hits / worst R-hat / lowest bulk ESS / sampling s."""
    return (f"{s['divergent']} / {s['treedepth']} / {s['max_rhat']:.3f} / "
            f"{s['min_ess_bulk']:,.0f} / {s['sampling_seconds']:.1f}")  # fmt: skip


def render(studies: list[dict]) -> str:
    """A markdown table, one row per fit: design, set, seed, kernels, sampler, clean,
    conditional elpd, long-run means, P(A beats B)."""
    lines = [
        "| design | set | seed | kernels | sampler | clean | cond. elpd | long-run means "
        "| P(A beats B) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for study in studies:
        for r in study["fits"]:
            means = " / ".join(f"{v:.3f}" for v in r["long_run_mean"].values())
            beats = ", ".join(f"{v:.3f}" for v in r["prob_beats"].values())
            lines.append(
                f"| {design_text(study)} | {r['set']} | {r['seed']} | "
                f"{r['sampler']['components']} | {_sampler_text(r['sampler'])} | "
                f"{'yes' if is_clean(r['sampler']) else '**no**'} | "
                f"{r['elpd_conditional']:.2f} | {means} | {beats} |"
            )
    return "\n".join(lines) + "\n"


def compare(base: dict, other: dict) -> dict:
    """Two studies paired by (set, seed): the other's conditional elpd minus the base's
    per shared fit, their sum, how many are better (> 0), and the fits clean in each."""
    a = {(r["set"], r["seed"]): r for r in base["fits"]}
    b = {(r["set"], r["seed"]): r for r in other["fits"]}
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(f"compare needs fits both studies ran, found {sorted(a)} and {sorted(b)}")
    diff = [b[k]["elpd_conditional"] - a[k]["elpd_conditional"] for k in shared]
    return {
        "fits": [list(k) for k in shared], "elpd_diff": diff, "sum": float(np.sum(diff)),
        "better": int(np.sum(np.array(diff) > 0)),
        "clean": (sum(is_clean(a[k]["sampler"]) for k in shared),
                  sum(is_clean(b[k]["sampler"]) for k in shared)),
    }  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=JOINT_SETS, default=list(JOINT_SETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--out", type=Path, help="JSON file for the study")
    parser.add_argument("--render", type=Path, nargs="+", help="studies' JSON files")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BASE", "OTHER"))
    parser.add_argument(
        "--set", dest="design", nargs="+", default=[], metavar="NAME=VALUE",
        help="set constants of yieldwise._design for this run (a candidate to measure)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.render:
        print(render([json.loads(path.read_text()) for path in args.render]))
        return 0
    if args.compare:
        base, other = (json.loads(path.read_text()) for path in args.compare)
        try:
            c = compare(base, other)
        except ValueError as error:
            parser.error(f"--compare: {error}")
        print(
            f"fits {c['fits']}: conditional elpd, other - base, "
            + ", ".join(f"{d:+.2f}" for d in c["elpd_diff"])
            + f" (sum {c['sum']:+.2f}; better in {c['better']} of {len(c['fits'])}); "
            f"clean {c['clean'][0]} (base) and {c['clean'][1]} (other)"
        )
        return 0
    if not args.out:
        parser.error("--out is required to run fits (or give --render or --compare)")
    settings = set_design_constants(args.design, parser.error)
    study = {
        "meta": {
            "command": "python bench/joint_shipped.py " + " ".join(argv),
            "settings": settings, "date": date.today().isoformat(),
            "commit": checkout_commit(),
            "machine": f"{platform.system()} {platform.machine()}, 2 cores",
        },
        "fits": [],
    }  # fmt: skip
    for name in args.sets:
        for seed in args.seeds:
            study["fits"].append(fit_record(name, seed))
            write_whole(args.out, json.dumps(study, indent=1))  # a stopped run keeps its fits
            print(render([{"meta": study["meta"], "fits": study["fits"][-1:]}]).splitlines()[-1],
                  flush=True)  # fmt: skip
    print(render([study]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
