"""The ``yieldwise`` command line.

Subcommands
-----------
``yieldwise demo [--out DIR]``
    The main job on shipped data: runs ``report`` on the shipped configuration
    (two real classifiers of handwritten digits, ``data/digits_report.toml``) and
    prints where the report is.
``yieldwise example [--out DIR]``
    Prints a worked example (two classifiers, a utility matrix, every metric,
    the yields and which classifier each favours) and writes it as CSV.
``yieldwise report CONFIG.toml --out DIR [--scheduler WHERE]``
    The batch job: fits every classifier's transducer on every data set (serially, on
    local processes or on a Dask cluster), compares their long-run utilities under
    every utility matrix, and writes a report folder (:mod:`yieldwise.report`).
``yieldwise r SCRIPT.R [args]``
    Runs an R script in an embedded R with the ``yw_`` functions of the R bridge
    defined (:mod:`yieldwise.rbridge`); the script reads ``args`` with
    ``commandArgs(trailingOnly = TRUE)``. Exit status 1 when the script stops.
``yieldwise fit CALIB.csv --class-col COL --output-cols C1[,C2..] --out FILE.nc``
    Fits a transducer to a calibration table and saves it (NetCDF, reloadable with
    ``Transducer.load``); prints the sampler's diagnostics. An existing ``--out`` is
    replaced only with ``--overwrite``, and the input never.

Every error (unreadable files, missing columns, bad values, an unavailable backend) is
one message naming the file, key or column, and exit status 2, before any fit; a failed
sampler or compiler exits with status 1. Output files appear only when complete, one run
at a time per output; Ctrl-C or SIGTERM stops a run, removes its work files and exits
with status 130 (the README's "Guarantees").
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from . import __version__
from .backends import backend_names
from .examples import screening_example, worked_example_table
from .transducer.io import record_classifier
from .transducer.sampler import SAMPLER_DEFAULTS

EXIT_USAGE = 2
#: The sampler or the compiler failed (the message says why).
EXIT_FAILURE = 1
#: Stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _example(args: argparse.Namespace) -> int:
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
    from ._files import partial_file

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "worked_example.csv"
    partial = partial_file(path)
    try:
        table.to_csv(partial)  # full precision: the CSV re-reads to the same floats
        partial.replace(path)  # whole or not at all
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    print(f"\nWritten: {path}")
    return 0


def _read_table(path: str, class_col: str) -> pd.DataFrame:
    from ._files import read_table

    try:
        return read_table(path, label_columns=[class_col])
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None


#: How ``--output-cols`` names its columns, for --help and for its errors.
OUTPUT_COLS_RULE = (
    "one column's exact name, or names separated by commas (spaces around each name are "
    "dropped unless the column's name has them)"
)


def _output_columns(text: str, columns: Sequence[Any], path: str) -> list[str]:
    """The output columns ``--output-cols`` names in a file whose columns are ``columns``.

    The exact text first (a column named ``logit, eight`` or ``score `` is matched as
    given), then the text split on commas, each part as given or else with its spaces
    around stripped; before, only the stripped parts were tried, so such columns could
    not be named at all (audit, 2026-12-06).
    """
    names = [str(c) for c in columns]
    if text in names:
        return [text]
    chosen, missing = [], []
    for part in text.split(","):
        if part in names:
            chosen.append(part)
        elif part.strip() in names:
            chosen.append(part.strip())
        elif part.strip():
            missing.append(part.strip())
    if missing:
        raise ValueError(
            f"{path}: --output-cols {text!r} names column(s) {missing} that the file does "
            f"not have; its columns are {names}. --output-cols takes {OUTPUT_COLS_RULE}"
        )
    return chosen


def _columns(
    frame: pd.DataFrame, class_col: str, outputs: Sequence[str], path: str, option: str
) -> None:
    names = [class_col, *outputs]
    missing = [n for n in names if n not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: {option} names column(s) {missing} that the file does not have; "
            f"its columns are {list(frame.columns)}"
        )
    from ._files import unusable_values

    for name in names:
        # a classifier's outputs must be finite too; a class label need only be present
        problem = unusable_values(frame[name], outputs=name != class_col)
        if problem is not None:
            raise ValueError(f"{path}: column {name!r} {problem}")


def _fit(args: argparse.Namespace) -> int:
    from ._files import (
        make_parents,
        output_path,
        partial_file,
        place_file,
        remove_made,
        target_lock,
    )
    from .report import check_sampler
    from .transducer import Transducer

    out = output_path(args.out)
    if not args.output_cols.strip(", "):
        raise ValueError(f"--output-cols must name at least one column: {OUTPUT_COLS_RULE}")
    check_sampler(
        {k: getattr(args, k) for k in ("chains", "warmup", "draws", "seed", "backend")
         if getattr(args, k) is not None},
        "fit", overrides={"chains", "warmup", "draws", "seed", "backend"},
    )  # fmt: skip
    _check_fit_target(out, Path(args.calibration), args.overwrite)
    made = make_parents(out)
    try:
        with target_lock(out):
            _check_fit_target(out, Path(args.calibration), args.overwrite)  # now that we own it
            transducer, outputs = _fit_table(args, Transducer)
            partial = partial_file(out)
            try:
                transducer.save(partial)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
            place_file(partial, out, overwrite=args.overwrite)  # appears only when complete
    except BaseException:
        remove_made(made)  # a failed fit leaves no folders behind either
        raise
    _print_fit_summary(transducer, args.classifier or ", ".join(outputs), out)
    return 0


def _check_fit_target(out: Path, calibration: Path, overwrite: bool) -> None:
    """``fit --out`` never replaces its own input, and anything else only with --overwrite."""
    import os

    if not os.path.lexists(out):
        return
    if calibration.exists() and os.path.samefile(out, calibration):
        raise ValueError(
            f"--out {out} is the calibration file {calibration} itself; yieldwise never "
            "replaces its input: choose another --out (e.g. a .nc file)"
        )
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; give the transducer file to write (.nc)")
    if not overwrite:
        raise ValueError(
            f"--out {out} exists already; choose another --out, or pass --overwrite to replace it"
        )


def _fit_table(args: argparse.Namespace, transducer_class: Any) -> tuple[Any, list[str]]:
    """The fitted transducer and the output columns it was fitted on."""
    from .report import not_numeric

    frame = _read_table(args.calibration, args.class_col)
    outputs = _output_columns(args.output_cols, list(frame.columns), args.calibration)
    if args.class_col in outputs:
        raise ValueError(
            f"--output-cols lists {args.class_col!r}, which is also --class-col; a "
            "classifier's outputs cannot be the true classes"
        )
    _columns(frame, args.class_col, outputs, args.calibration, "--class-col/--output-cols")
    if frame.empty:
        raise ValueError(f"{args.calibration}: has a header but no data rows")
    for name in outputs:
        problem = not_numeric(frame[name])  # the rule and words of `yieldwise report`
        if problem is not None:
            raise ValueError(f"{args.calibration}: output column {name!r} {problem}")
    components: Any = args.components
    if components != "auto":
        try:
            components = int(components)
        except ValueError:
            components = 0  # refused below, by name
        if components < 1:
            raise ValueError(
                f'--components: expected "auto" or an integer >= 1, found {args.components!r}'
            )
    transducer = transducer_class(
        n_components=components, chains=args.chains, warmup=args.warmup, draws=args.draws,
        seed=args.seed, backend=args.backend, progress=not args.quiet and sys.stderr.isatty(),
    )  # fmt: skip
    transducer.fit(frame[outputs], frame[args.class_col])
    if args.classifier:
        record_classifier(transducer.posterior_, args.classifier)
    return transducer, outputs


def _print_fit_summary(transducer: Any, name: str, out: Path) -> None:
    info = transducer.sampler_summary()
    table = transducer.diagnostics()
    print(f"transducer for {name}: classes {list(transducer.classes_)}, "
          f"{transducer.n_calibration_} calibration items")  # fmt: skip
    print(f"  backend {info['backend']}, {info['chains']} chains x {info['draws']} draws, "
          f"{info['sampling_seconds']:.1f} s of sampling, "
          f"n_components {transducer.n_components_}")  # fmt: skip
    print(f"  divergent transitions {info['divergent']}, max tree depth hits "
          f"{info['max_treedepth_hits']}")  # fmt: skip
    from .transducer.diagnostics import converged

    within = int(converged(table).sum())
    print(f"  invariant quantities within R-hat <= 1.01 and bulk ESS >= 400: "
          f"{within} of {len(table)} (worst R-hat {table['r_hat'].max():.3f}, "
          f"lowest bulk ESS {table['ess_bulk'].min():.0f})")  # fmt: skip
    k, limit = table.attrs.get("pareto_k"), table.attrs.get("pareto_k_limit")
    if k is not None:  # independent draws pass the line above whatever their error
        verdict = "within" if k <= limit else "ABOVE: not for decisions; refit with Stan"
        print(f"  Laplace approximation: Pareto k {k:.2f}, {verdict} its limit {limit:.2f}")
    print(f"Written: {out}")


def _report(args: argparse.Namespace) -> int:
    from .report import load_config

    return _run_report(load_config(args.config), args)


def _demo(args: argparse.Namespace) -> int:
    from .datasets import data_file
    from .report import load_config

    config_path = data_file("digits_report.toml")
    print(f"yieldwise demo: the batch report on shipped data, configured by {config_path}")
    return _run_report(load_config(config_path), args)


def _run_report(config: Any, args: argparse.Namespace) -> int:
    from .report import run_report

    overrides = _overrides(args)

    def log(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    out = run_report(
        config, args.out, overrides, overwrite=args.overwrite, log=log,
        sampler_progress=not args.quiet and sys.stderr.isatty(), scheduler=args.scheduler,
    )  # fmt: skip
    from .report import read_report_csv

    # the names as written (a classifier named NA is no missing value); and, with several
    # data sets, which data set each row is of (each has the same classifiers and matrices)
    summary = read_report_csv(out / "summary.csv")
    names = ["dataset", "matrix", "classifier"] if config.several else ["matrix", "classifier"]
    columns = [c for c in (*names, "mean", "sd", "prob_best") if c in summary]
    print(f"\n{config.title}: long-run utility per item (posterior mean, sd, P(best))")
    with pd.option_context("display.float_format", "{:.4f}".format, "display.width", 120):
        print(summary[columns].to_string(index=False))
    page = (out / "report.html").resolve()
    print(f"\nReport written: {page}\nOpen it in a browser: {page.as_uri()}")
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Sampler settings given on the command line; a 0 is a value given (then checked)."""
    given = {k: getattr(args, k) for k in ("chains", "warmup", "draws", "backend")}
    return {k: v for k, v in given.items() if v is not None}


def _add_report_options(command: argparse.ArgumentParser, default_out: str) -> None:
    command.add_argument(
        "--out", default=default_out, help="folder to create (default: %(default)s)"
    )
    command.add_argument(
        "--overwrite", action="store_true", help="replace an earlier report in --out"
    )
    for name in ("chains", "warmup", "draws"):
        command.add_argument(f"--{name}", type=int, default=None, help=f"override [sampler].{name}")
    command.add_argument(
        "--backend", default=None, choices=backend_names(),
        help='override [sampler].backend; "laplace" (a Normal approximation in numpy, '
        "seconds per fit) checks a report's configuration and layout, not for decisions",
    )  # fmt: skip
    command.add_argument(
        "--scheduler", default=None, metavar="WHERE",
        help='where the fits run: "serial", "processes" (a local pool) or a Dask scheduler '
        'address "tcp://host:8786" (pip install \'yieldwise[dask]\'); overrides '
        "[compute].scheduler",
    )  # fmt: skip
    command.add_argument("--quiet", action="store_true", help="no progress on the terminal")


def _r(args: argparse.Namespace) -> int:
    from .rbridge import run_script

    return run_script(args.script, args.args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="yieldwise",
        description="Evaluate and improve classifiers the decision-theoretic way.",
    )
    parser.add_argument("--version", action="version", version=f"yieldwise {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="the main job on shipped data: a report comparing two real classifiers"
    )
    _add_report_options(demo, "yieldwise-demo")
    demo.set_defaults(run=_demo)
    example = commands.add_parser("example", help="print and save a worked example")
    example.add_argument(
        "--out", default="yieldwise-example", help="output folder (default: %(default)s)"
    )
    example.set_defaults(run=_example)
    fit = commands.add_parser("fit", help="fit and save a transducer from a calibration CSV")
    fit.add_argument("calibration", metavar="CALIB.csv", help="calibration table (CSV)")
    fit.add_argument("--class-col", required=True, help="column of true classes")
    fit.add_argument(
        "--output-cols", required=True, metavar="C1[,C2..]",
        help=f"the classifier's output column(s): {OUTPUT_COLS_RULE}",
    )  # fmt: skip
    fit.add_argument("--classifier", default="", help="classifier name recorded in the file")
    fit.add_argument("--out", required=True, help="transducer file to write (.nc)")
    fit.add_argument(
        "--overwrite", action="store_true", help="replace --out if it exists (never the input)"
    )
    fit.add_argument("--components", default="auto", help='"auto" or a number of components')
    fit.add_argument("--chains", type=int, default=SAMPLER_DEFAULTS.chains)
    fit.add_argument("--warmup", type=int, default=SAMPLER_DEFAULTS.warmup)
    fit.add_argument("--draws", type=int, default=SAMPLER_DEFAULTS.draws)
    fit.add_argument("--seed", type=int, default=None)
    fit.add_argument("--backend", default="auto", choices=backend_names())
    fit.add_argument("--quiet", action="store_true", help="no sampler progress")
    fit.set_defaults(run=_fit)
    report = commands.add_parser("report", help="the batch job: a posterior report folder")
    report.add_argument("config", metavar="CONFIG.toml", help="report configuration")
    _add_report_options(report, "yieldwise-report")
    report.set_defaults(run=_report)
    r_script = commands.add_parser(
        "r", help="run an R script with the yw_ functions defined (the R bridge)"
    )
    r_script.add_argument("script", metavar="SCRIPT.R", help="the R script to run")
    r_script.add_argument(
        "args", nargs=argparse.REMAINDER, help="passed on: commandArgs(trailingOnly = TRUE)"
    )
    r_script.set_defaults(run=_r)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``yieldwise`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from .backends import CompilationError, SamplingError

    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (kill, a batch system's time limit) stops a run as Ctrl-C does: the
        # work folder is removed and the sampler's processes are stopped.
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.run(args))
    except (ValueError, TypeError, OSError, ImportError) as exc:
        print(f"yieldwise {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (SamplingError, CompilationError) as exc:
        print(f"yieldwise {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        writes = args.command in ("report", "demo", "fit")
        print(
            f"yieldwise {args.command}: interrupted"
            + ("; nothing was written (an earlier output is as it was)" if writes else ""),
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
