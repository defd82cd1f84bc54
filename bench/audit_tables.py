"""The multi-class audits, the class-balance comparison and the AUC audit, as tables.

Seeded runs of :mod:`yieldwise.audit` (theory 1.2 and 1.5, issue 19 item 5):

* ``rank_disagreement(n_classes=C)`` for C = 3, 4, 5 with the default multi-class
  metrics (class frequencies Dirichlet(1, ..., 1), rates rising linearly from chance);
* ``is_admissible(metric, n_classes=C)`` for the same metrics and class counts;
* two classes at fixed class balances, 50/50 and 90/10 (class 0 positive, first),
  beside the drawn balance ``f0 ~ U(0, 1)``, with the default binary metrics;
* ``auc_disagreement`` (binormal scoring classifiers at their best thresholds) at the
  same three balances, and with equal spreads (nested curves).

Every call uses the same seed. Usage, from the repository root (a few seconds)::

    python bench/audit_tables.py            # print the section
    python bench/audit_tables.py --write    # ... and replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from yieldwise.audit import (
    DEFAULT_METRICS,
    DEFAULT_MULTICLASS_METRICS,
    auc_disagreement,
    is_admissible,
    rank_disagreement,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DOCS, write_section

SECTION = "## Multi-class audits, class balance and AUC (theory 1.5)"
CLASSES = (3, 4, 5)
ERROR_SD = (0.0, 0.1, 0.3)
#: Two-class balances compared: ``None`` draws ``f0 ~ U(0, 1)`` per test set.
BALANCES = {"drawn": None, "50/50": (0.5, 0.5), "90/10": (0.9, 0.1)}


def compute(
    n_pairs: int = 100_000,
    seed: int = 2026,
    classes: tuple[int, ...] = CLASSES,
    error_sd: tuple[float, ...] = ERROR_SD,
) -> dict:
    """Every audit of the section: ``{"multiclass", "admissible", "balance", "auc"}``.

    ``multiclass[C]`` and ``balance[name]`` are :func:`rank_disagreement` frames,
    ``auc[name]`` :func:`auc_disagreement` frames (``"nested"``: equal spreads, drawn
    balance), ``admissible[C][metric]`` :class:`Admissibility` results.
    """
    multiclass = {
        c: rank_disagreement(n_classes=c, error_sd=error_sd, n_pairs=n_pairs, seed=seed)
        for c in classes
    }
    admissible = {
        c: {m: is_admissible(m, n_classes=c) for m in DEFAULT_MULTICLASS_METRICS} for c in classes
    }
    balance = {
        name: rank_disagreement(
            DEFAULT_METRICS, error_sd=error_sd, n_pairs=n_pairs, seed=seed, class_balance=b
        )
        for name, b in BALANCES.items()
    }
    auc = {
        name: auc_disagreement(error_sd=error_sd, n_pairs=n_pairs, seed=seed, class_balance=b)
        for name, b in BALANCES.items()
    }
    auc["nested"] = auc_disagreement(
        error_sd=error_sd, n_pairs=n_pairs, seed=seed, spread=(1.0, 1.0)
    )
    return {"multiclass": multiclass, "admissible": admissible, "balance": balance, "auc": auc}


def _label(row) -> str:
    return row.metric if np.isnan(row.error_sd) else f"utility yield, error sd {row.error_sd:g}"


def _side_by_side(frames: dict, header: str) -> list[str]:
    """One row per metric (and error level), one column per frame: fraction wrong (se)."""
    keys = list(frames)
    first = next(iter(frames.values()))
    lines = [
        f"| {header} | " + " | ".join(str(k) for k in keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for i, row in enumerate(first.itertuples(index=False)):
        cells = []
        for k in keys:
            r = frames[k].iloc[i]
            assert r.metric == row.metric  # every frame has the same rows, in order
            cells.append(f"{r.fraction_wrong:.4f} ({r.mc_se:.4f})")
        lines.append(f"| {_label(row)} | " + " | ".join(cells) + " |")
    return lines


def render(results: dict, n_pairs: int, seed: int, figures: dict) -> str:
    multiclass, admissible = results["multiclass"], results["admissible"]
    classes = list(multiclass)
    lines = [
        SECTION,
        "",
        "| quantity | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in figures.items()),
        "",
        f"Every audit draws {n_pairs:,} pairs with seed {seed}. Cells: fraction of pairs "
        "ranked in the opposite order from the true utility yield (Monte Carlo standard "
        "error in brackets). The utility-yield rows rank with an erroneous copy of the "
        "true matrix (truncated Gaussian errors of the stated sd on every entry).",
        "",
        "### Rank disagreement on 3 to 5 classes",
        "",
        "`rank_disagreement(n_classes=C)`: true matrices with i.i.d. uniform entries, "
        "each column's correct decision the largest; class frequencies Dirichlet(1, ..., "
        "1); per class a correct-decision rate on [1/C, 1] rising linearly from chance, "
        "the errors split over the other decisions by a flat Dirichlet.",
        "",
        *_side_by_side({f"C = {c}": multiclass[c] for c in classes}, "metric"),
        "",
        "### Admissibility on 3 to 5 classes",
        "",
        "`is_admissible(metric, n_classes=C)`: whether the metric's gradient in the "
        "C (C - 1) off-diagonal coordinates of a fixed test set keeps one direction "
        "(then it ranks as a utility matrix does); otherwise the largest angle between "
        "its gradients, in radians.",
        "",
        "| metric | " + " | ".join(f"C = {c}" for c in classes) + " |",
        "|---|" + "---:|" * len(classes),
    ]
    for m in DEFAULT_MULTICLASS_METRICS:
        cells = [
            "admissible" if a else f"no ({a.max_angle_deviation:.2f} rad)"
            for a in (admissible[c][m] for c in classes)
        ]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Two classes: drawn against fixed class balance",
        "",
        "`rank_disagreement` with the default binary metrics; `drawn` is theory 1.5's "
        "`f0 ~ U(0, 1)` per test set, `50/50` and `90/10` fix the share of class 0 "
        "(the positive class) to 0.5 and 0.9.",
        "",
        *_side_by_side(results["balance"], "metric"),
        "",
        "### AUC audited",
        "",
        "`auc_disagreement`: pairs of binormal scoring classifiers (negatives N(0, 1), "
        "positives N(mu, s^2), s log-uniform on [1/2, 2]), each deployed at its best "
        "threshold for the true matrix. `nested`: s = 1 for both, so the ROC curves "
        "never cross (drawn balance).",
        "",
        *_side_by_side(results["auc"], "metric"),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-pairs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--write", action="store_true", help=f"update {DOCS}")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = compute(args.n_pairs, args.seed)
    seconds = time.perf_counter() - started
    given = sys.argv[1:] if argv is None else argv
    figures = {
        "command": f"`{' '.join(['python bench/audit_tables.py', *given])}` "
        "(from the repository root)",
        "date": dt.date.today().isoformat(),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}",
        "wall time": f"{seconds:.1f} s",
    }
    text = render(results, args.n_pairs, args.seed, figures)
    print(text)
    if args.write:
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
