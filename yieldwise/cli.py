"""The ``yieldwise`` command line.

Subcommands
-----------
``yieldwise demo [--out DIR]``
    Prints a worked example (two classifiers, a utility matrix, every metric,
    the yields and which classifier each favours) and writes it as CSV.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from . import __version__
from .examples import screening_example, worked_example_table

EXIT_USAGE = 2


def _demo(args: argparse.Namespace) -> int:
    utility, confusions = screening_example()
    table = worked_example_table(utility, confusions)
    names = list(confusions)
    print("yieldwise worked example: screening 1,000 patients, 10 % of them ill\n")
    print("Utility per patient (rows: decision, columns: true class):")
    print(utility.to_frame().to_string(), "\n")
    for name, cm in confusions.items():
        print(f"Confusion matrix of the {name!r} classifier (rows: decision, columns: class):")
        print(cm.to_frame().astype(int).to_string(), "\n")
    print(
        f"Declare 'ill' when P(ill) exceeds {utility.threshold():.4f} (the matrix's threshold).\n"
    )
    with pd.option_context("display.float_format", "{:.4f}".format, "display.width", 120):
        print(table.to_string(), "\n")
    metric_rows = table[~table.index.isin(["utility_yield", "rescaled_yield"])]
    votes = metric_rows["favours"].value_counts()
    winner = table.loc["utility_yield", "favours"]
    gain = abs(table.loc["utility_yield", names[0]] - table.loc["utility_yield", names[1]])
    print(
        f"{votes.get(names[0], 0)} of {len(metric_rows)} metrics favour {names[0]!r}, "
        f"{votes.get(names[1], 0)} favour {names[1]!r}. The utility yield, the only score "
        f"that ranks by what this problem gains, favours {winner!r} by {gain:.3f} "
        "utility per patient.\n'admissible' means: ranks as *some* utility matrix does; only the "
        "yield of this problem's own matrix ranks as this problem does."
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "worked_example.csv"
    table.to_csv(path)  # full precision: the CSV re-reads to the same floats
    print(f"\nWritten: {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yieldwise",
        description="Evaluate and improve classifiers the decision-theoretic way.",
    )
    parser.add_argument("--version", action="version", version=f"yieldwise {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="print and save a worked example")
    demo.add_argument(
        "--out", default="yieldwise-demo", help="output folder (default: %(default)s)"
    )
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``yieldwise`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except (ValueError, TypeError, OSError) as exc:
        print(f"yieldwise {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
