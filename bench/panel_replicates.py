"""The decision-quality panel over replicated calibration sets: its regret goals with errors.

    python bench/panel_replicates.py FILE ... [--write]
    python bench/panel_replicates.py --render [--write]

Each FILE is a results file of ``bench/decision_quality.py --stages panel --seed S`` (any
file with a ``panel`` stage: ``bench/results/decision_quality.json`` holds seed 2026's).
A seed draws every cell's calibration set, its held-out items and its chart matrices
afresh, so the files are independent replicates of the whole panel. The replicates'
mean regrets per method and cell, and their fits' sampler counts, are stored in
``bench/results/panel_replicates.json``; ``--render`` reports that file again.

The panel's goals (issue 16, item 7) are judged in ``bench/decision_quality.py`` on one
calibration set per cell. Here each is judged on the mean over the replicates, with the
standard error of the replicates' spread:

* per cell, yieldwise against the peer whose mean regret over the replicates is lowest:
  the paired difference, the ratio of the two means, and whether the cell meets "never
  above twice the best peer's unless the two differ by less than 0.0005" on the means;
  the excess ``yieldwise - 2 peer`` with its standard error says whether a miss is beyond
  the replicates' noise;
* across the panel, each method's mean regret over all cells per replicate, and in how
  many replicates yieldwise's is the lowest.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _common import write_section, write_whole
from decision_quality import PEERS, twice_goal

STORE = Path(__file__).resolve().parent / "results" / "panel_replicates.json"
SECTION = "## Decision quality over replicated calibration sets"
#: bumped when the stored layout changes; a file of another version is refused
FORMAT_VERSION = 1


def extract(results: dict[str, Any]) -> dict[str, Any]:
    """One replicate from a ``decision_quality.py`` results file: its seed, and per cell
    every method's mean regret and the yieldwise fit's sampler counts."""
    if "panel" not in results:
        raise ValueError("the results file has no 'panel' stage: run decision_quality.py "
                         "with --stages panel")  # fmt: skip
    command = results.get("stage_commands", {}).get("panel", results.get("command", ""))
    found = re.search(r"--seed (\d+)", command)
    if found is None:
        raise ValueError(f"no --seed in the panel's command {command!r}")
    cells = {}
    for key, cell in results["panel"].items():
        if "|" not in key:
            continue
        summary = cell["summary"]
        cells[key] = {
            "mean_regret": {m: float(summary[m]["mean_regret"]) for m in ["yieldwise", *PEERS]},
            "fit": cell["fit"],
        }
    return {"seed": int(found.group(1)), "date": results.get("date"), "cells": cells}


def cell_statistics(regrets: dict[str, np.ndarray]) -> dict[str, Any]:
    """The goal for one cell from each method's mean regret per replicate (``regrets``:
    method -> (R,) array, the replicates in the same order for every method)."""
    yw = regrets["yieldwise"]
    peer = min(PEERS, key=lambda p: float(regrets[p].mean()))
    n = yw.size
    diff = yw - regrets[peer]
    excess = yw - 2 * regrets[peer]

    def se(x: np.ndarray) -> float:
        return float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")

    yw_mean, peer_mean = float(yw.mean()), float(regrets[peer].mean())
    # the panel's own rule (decision_quality.twice_goal), applied to the means
    over, failing = twice_goal([("", 0, yw_mean, peer, peer_mean)])
    over, fails = bool(over), bool(failing)
    return {
        "replicates": n,
        "yieldwise": yw_mean,
        "yieldwise_se": se(yw),
        "peer": peer,
        "peer_mean": peer_mean,
        "peer_se": se(regrets[peer]),
        "difference": float(diff.mean()),
        "difference_se": se(diff),
        "ratio": yw_mean / peer_mean if peer_mean > 0 else float("inf"),
        "excess": float(excess.mean()),
        "excess_se": se(excess),
        "over_twice": bool(over),
        "fails": bool(fails),
        # a miss the replicates' noise does not explain: the excess over twice the peer's
        # is more than two standard errors above 0 and the difference reaches the allowance
        "fails_beyond_noise": bool(fails and excess.mean() > 2 * se(excess)),
        "behind_in": int(np.sum(diff > 0)),
    }


def statistics(replicates: list[dict[str, Any]]) -> dict[str, Any]:
    """Every cell's :func:`cell_statistics` and the panel-wide comparison, over the cells
    that every replicate holds."""
    keys = [k for k in replicates[0]["cells"] if all(k in r["cells"] for r in replicates)]
    methods = ["yieldwise", *PEERS]
    per_cell = {}
    for key in keys:
        regrets = {m: np.array([r["cells"][key]["mean_regret"][m] for r in replicates])
                   for m in methods}  # fmt: skip
        per_cell[key] = cell_statistics(regrets)
    # each replicate's mean regret over all cells, per method
    panel = {m: np.array([np.mean([r["cells"][k]["mean_regret"][m] for k in keys])
                          for r in replicates]) for m in methods}  # fmt: skip
    lowest = sum(
        int(all(panel["yieldwise"][i] < panel[p][i] for p in PEERS)) for i in range(len(replicates))
    )
    fits = [r["cells"][k]["fit"] for r in replicates for k in keys]
    return {
        "seeds": [r["seed"] for r in replicates],
        "cells": per_cell,
        "panel_mean": {m: float(v.mean()) for m, v in panel.items()},
        "panel_by_replicate": {m: v.tolist() for m, v in panel.items()},
        "yieldwise_lowest_in": lowest,
        "fits": len(fits),
        "divergent": int(sum(f["divergent"] for f in fits)),
        "treedepth": int(sum(f["treedepth"] for f in fits)),
        "not_clean": int(sum(bool(f["divergent"] or f["treedepth"]) for f in fits)),
        "warned": int(sum(bool(f["warnings"]) for f in fits)),
        "fit_seconds": float(sum(f["seconds"] for f in fits)),
    }


def render(replicates: list[dict[str, Any]], note: str = "") -> str:
    """The benchmarks.md section (``note``: said after the introduction, e.g. which
    version of the model the replicates ran)."""
    s = statistics(replicates)
    r = len(s["seeds"])
    dates = sorted({rep["date"] for rep in replicates if rep.get("date")})
    lines = [
        SECTION,
        "",
        f'The panel of "Decision quality against the alternatives" run {r} times, with seeds '
        f"{', '.join(map(str, s['seeds']))}: `python bench/decision_quality.py --sizes 300 1000 "
        "3600 --stages panel --seed S --results FILE` for each, then `python "
        "bench/panel_replicates.py FILE ... --write` (dates "
        f"{', '.join(dates)}; 2 cores). Each seed draws every cell's calibration set, "
        "held-out items and chart matrices afresh. Below, each cell's figures are means over "
        "the replicates with their standard errors (the replicates' sd / sqrt(R)); the best "
        "peer is the one whose mean over the replicates is lowest.",
        *(["", note] if note else []),
        "",
        "| problem | n | yieldwise | best peer | peer's | difference | ratio "
        "| yieldwise - 2 peer | behind in | goal |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for key, c in s["cells"].items():
        name, n = key.split("|")
        goal = (
            "met" if not c["over_twice"]
            else "met (differ by < 0.0005)" if not c["fails"]
            else "**not met**" + (" (beyond 2 SE)" if c["fails_beyond_noise"] else " (within 2 SE)")
        )  # fmt: skip
        lines.append(
            f"| {name} | {n} | {c['yieldwise']:.5f} ({c['yieldwise_se']:.5f}) | {c['peer']} | "
            f"{c['peer_mean']:.5f} ({c['peer_se']:.5f}) | {c['difference']:+.5f} "
            f"({c['difference_se']:.5f}) | {c['ratio']:.1f} | {c['excess']:+.5f} "
            f"({c['excess_se']:.5f}) | {c['behind_in']} of {c['replicates']} | {goal} |"
        )
    over = [k for k, c in s["cells"].items() if c["over_twice"]]
    failing = [k for k, c in s["cells"].items() if c["fails"]]
    beyond = [k for k, c in s["cells"].items() if c["fails_beyond_noise"]]
    means = s["panel_mean"]
    best_peer = min(PEERS, key=lambda p: means[p])
    lines += [
        "",
        f"Across the panel (mean regret over all {len(s['cells'])} cells, averaged over the "
        f"replicates): yieldwise {means['yieldwise']:.4f}, best peer {best_peer} "
        f"{means[best_peer]:.4f}; yieldwise's is the lowest in {s['yieldwise_lowest_in']} of "
        f"{r} replicates (per replicate: "
        + ", ".join(f"{v:.4f}" for v in s["panel_by_replicate"]["yieldwise"])
        + ").",
        "",
        "| goal | result over the replicates |",
        "|---|---|",
        f"| lowest mean regret across the panel | "
        f"{'met' if means['yieldwise'] < means[best_peer] else 'not met'} on the means "
        f"(yieldwise {means['yieldwise']:.4f}, {best_peer} {means[best_peer]:.4f}); the lowest "
        f"in {s['yieldwise_lowest_in']} of {r} replicates |",
        f"| never above twice the best peer's on one problem, unless the two differ by less "
        f"than 0.0005 | {'met' if not failing else 'not met'}: {len(over)} of "
        f"{len(s['cells'])} cells above twice on the means, of which {len(failing)} differ by "
        f"0.0005 or more ({len(beyond)} beyond two standard errors)"
        + (f": {', '.join(k.replace('|', ' n = ') for k in failing)}" if failing else "")
        + " |",
        "",
        f"yieldwise fits (default settings): {s['fits']} over the replicates, "
        f"{s['fit_seconds'] / 60:.1f} min in total; {s['divergent']} divergent transitions, "
        f"{s['treedepth']} tree-depth hits, {s['not_clean']} fits with either; "
        f"{s['warned']} fits raised a warning while fitting (any kind, e.g. R-hat).",
    ]
    return "\n".join(lines) + "\n"


def load_store(path: Path = STORE) -> tuple[list[dict[str, Any]], str]:
    """The stored replicates and note; a file of another format version is refused."""
    stored = json.loads(path.read_text())
    if stored.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path} has format version {stored.get('format_version')!r}, this script reads "
            f"{FORMAT_VERSION}: rebuild it from the panel results files"
        )
    return stored["replicates"], stored.get("note", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="decision_quality.py results files")
    parser.add_argument("--render", action="store_true", help="report the stored replicates")
    parser.add_argument("--store", type=Path, default=STORE)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--note", default="", help="a sentence to report with the replicates")
    args = parser.parse_args(argv)
    if args.render == bool(args.files):
        parser.error("give either results files or --render")
    if args.files:
        replicates = [extract(json.loads(f.read_text())) for f in args.files]
        seeds = [r["seed"] for r in replicates]
        if len(set(seeds)) != len(seeds):
            parser.error(f"files share a seed (seeds {seeds}): they are not independent")
        if len(replicates) < 2:
            parser.error("give at least two replicates: one has no standard error")
        replicates.sort(key=lambda r: r["seed"])
        note = args.note
        stored = {"format_version": FORMAT_VERSION, "note": note, "replicates": replicates}
        write_whole(args.store, json.dumps(stored, indent=1) + "\n")
    else:
        replicates, note = load_store(args.store)
    text = render(replicates, note)
    print(text)
    if args.write:
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
