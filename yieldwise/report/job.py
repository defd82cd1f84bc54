"""The report's job: fit every classifier on every data set, compare, write the folder.

The fits go through :func:`yieldwise.fit_many` (serially, on local processes or on a
Dask cluster: ``[compute] scheduler`` or ``--scheduler``), each with the seed derived
from the configuration's seed and the task's name, so that a report computed on a
cluster equals the serial one draw for draw. Comparisons are within each data set.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._files import (
    MANIFEST,
    OutputTargetError,
    check_listed,
    check_replaceable,
    make_parents,
    output_path,
    partial_folder,
    place_folder,
    read_manifest,
    remove_made,
    target_lock,
    write_manifest,
)
from ..transducer.io import fit_record
from ..utility import UtilityMatrix
from .config import (
    ConfigError,
    ReportConfig,
    check_sampler,
    check_scheduler,
    class_order_sentence,
    transducer_file_name,
)

__all__ = ["NAME_COLUMNS", "Verdict", "read_report_csv", "run_report", "verdicts"]

#: The interval of the verdict's expected gain over the runner-up.
VERDICT_INTERVAL = 0.9
#: Gains and values of information are stated per this many items.
PER_ITEMS = 1000


def run_report(
    config: ReportConfig,
    out: str | Path,
    overrides: dict[str, Any] | None = None,
    *,
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
    sampler_progress: bool = False,
    scheduler: str | None = None,
) -> Path:
    """Fit, compare and write the report folder ``out``; returns its path.

    Parameters
    ----------
    config : ReportConfig
        From :func:`load_config`.
    out : str or Path
        The folder to create.
    overrides : dict, optional
        Sampler settings that replace the configuration's (``chains``, ``warmup``...).
    overwrite : bool
        Replace ``out`` if it is an earlier yieldwise report: a folder with yieldwise's
        manifest and nothing else in it. Only the files the manifest lists are deleted.
    log : callable, optional
        Called with one line of text at each stage (the command line prints them).
    sampler_progress : bool
        Show a progress bar of the fits (tasks done, running, failed).
    scheduler : str, optional
        Where the fits run, replacing ``[compute] scheduler``: ``"serial"``,
        ``"processes"`` or a Dask scheduler address ``"tcp://host:8786"``.

    Notes
    -----
    The report is written into a hidden folder ``.NAME.partial-XXXXXXXX`` beside ``out``
    and renamed to ``out`` when complete; any failure or interrupt removes it (and
    cancels the fits still queued or running on a cluster). While the run lasts it holds
    a lock on ``out`` (the file ``.NAME.lock``): a second run on the same ``out`` stops at
    once with an error naming this one.
    """
    from .. import __version__

    say = log or (lambda message: None)
    out = output_path(out)
    sampler = {**config.sampler, **(overrides or {})}
    check_sampler(sampler, f"{config.path}: [sampler]", overrides or {})
    if scheduler is not None:
        scheduler = check_scheduler(scheduler, "--scheduler")
    else:
        scheduler = config.scheduler
    made = make_parents(out)
    try:
        with target_lock(out):
            _check_target(out, overwrite)  # before any fit
            partial = partial_folder(out)
            try:
                _fill_report(config, partial, sampler, say, sampler_progress, scheduler)
                write_manifest(partial, __version__)
                place_folder(partial, out, overwrite=overwrite)
            except BaseException:  # a failure or an interrupt: nothing is left behind
                shutil.rmtree(partial, ignore_errors=True)
                raise
    except BaseException:
        remove_made(made)  # nor the folders made for it
        raise
    return out


#: The columns of summary.csv and superiority.csv that hold names (any text).
NAME_COLUMNS = ("dataset", "matrix", "classifier", "versus")
#: The columns by which :func:`read_report_csv` knows each table of a report (each has
#: more); a table has no format version of its own: its folder's manifest carries one.
REPORT_TABLES = {
    "summary.csv": ("classifier", "mean"),
    "superiority.csv": ("classifier", "versus", "prob_superiority"),
}
#: The format of draws.nc (its attributes ``yieldwise_format`` and
#: ``yieldwise_format_version``, :func:`provenance`).
DRAWS_FORMAT = "yieldwise report draws"
DRAWS_FORMAT_VERSION = 1


def read_report_csv(path: str | Path) -> pd.DataFrame:
    """A report's ``summary.csv`` or ``superiority.csv``, its names (:data:`NAME_COLUMNS`)
    read as the very text the report wrote: pandas' defaults read a classifier named
    ``NA`` or ``None`` as missing and one named ``001`` as the number 1 (audit,
    2026-12-06). Empty cells of the other columns are missing values (NaN).

    The file is checked first: when its folder has a report's manifest, that manifest
    (its format and version) must list the file with the same SHA-256; and its header
    must hold a summary's or a superiority table's columns (:data:`REPORT_TABLES`).
    Otherwise ValueError naming the file, what was expected and what was found;
    FileNotFoundError naming a missing file.
    """
    path = Path(path)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "no such file"
        raise FileNotFoundError(
            f"{path}: {what}; give the summary.csv or superiority.csv of a report folder"
        )
    if read_manifest(path.parent) is not None:  # a manifest of another version is refused
        check_listed(path)
    try:
        header = pd.read_csv(path, nrows=0).columns
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it as a report's CSV table ({exc})") from None
    if not any(set(columns) <= set(header) for columns in REPORT_TABLES.values()):
        expected = "; ".join(f"{name} {list(columns)}" for name, columns in REPORT_TABLES.items())
        raise ValueError(
            f"{path}: is not a table of a yieldwise report: a report's tables have the "
            f"columns ({expected}, and more), but its columns are {list(header)}; give the "
            f"summary.csv or superiority.csv of a report folder (listed in its {MANIFEST})"
        )
    names = [c for c in header if c in NAME_COLUMNS]
    return pd.read_csv(
        path, dtype=dict.fromkeys(names, str), keep_default_na=False,
        na_values={c: [""] for c in header if c not in names},
    )  # fmt: skip


def _check_target(out: Path, overwrite: bool) -> None:
    """Refuse, before any fit, an ``out`` that this run would not be allowed to replace."""
    if not os.path.lexists(out):
        return
    if not overwrite:
        raise OutputTargetError(
            f"{out}: exists already; choose another --out, remove it, or pass --overwrite "
            "to replace an earlier report"
        )
    check_replaceable(out)


def _task_name(config: ReportConfig, dataset: str, classifier: str) -> Any:
    """A fit's name (and so its seed): the classifier, or (data set, classifier)."""
    return (dataset, classifier) if config.several else classifier


def fit_all(
    config: ReportConfig,
    tables: dict[str, pd.DataFrame],
    sampler: dict[str, Any],
    scheduler: str,
    say: Callable[[str], None],
    progress: bool,
) -> dict[str, dict[str, Any]]:
    """Every classifier's transducer on every data set: data set -> classifier -> fit."""
    from ..backends import SamplingError
    from ..parallel import TaskDataError, TaskError, fit_many

    classes = list(config.class_order)  # the order the outputs follow (load_config)
    settings = dict(sampler)
    seed = int(settings.pop("seed", 1))
    tasks, params, where = {}, {}, {}
    for dataset, frame in tables.items():
        source = next(s for s in config.data if s.name == dataset)
        truth = frame[source.class_col].astype(str)
        for classifier, columns in config.classifiers.items():
            name = _task_name(config, dataset, classifier)
            tasks[name] = (frame[columns], truth)
            params[name] = dict(config.options.get(classifier, {}))
            where[name] = (source, classifier, columns)
    order = {name: i for i, name in enumerate(tasks, start=1)}
    ticks: dict[Any, float] = {}

    def started(name: Any) -> None:
        source, classifier, columns = where[name]
        on = f" on {source.name}" if config.several else ""
        ticks[name] = time.perf_counter()
        say(f"fitting transducer {order[name]}/{len(tasks)}: {classifier}{on} "
            f"(outputs {', '.join(columns)})")  # fmt: skip

    def finished(name: Any, info: Any) -> None:
        source, classifier, _ = where[name]
        on = f" on {source.name}" if config.several else ""
        say(f"  {classifier}{on} done in {info['task_seconds']:.0f} s")

    say(f"{len(tasks)} fits, scheduler {scheduler}")
    try:
        fits = fit_many(
            tasks, transducer=settings, params=params, seed=seed, class_labels=classes,
            executor=scheduler, progress=progress, on_start=started, on_done=finished,
        )  # fmt: skip
    except (TaskDataError, TaskError) as exc:
        source, classifier, _ = where[exc.task]
        on = f" on {source.key} ({source.where})" if config.several else ""
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        if isinstance(exc, TaskDataError):  # e.g. a transform that does not suit the outputs
            raise ConfigError(f"{config.path}: [[classifier]] {classifier!r}{on}: {cause}") from exc
        raise SamplingError(f"[[classifier]] {classifier!r}{on}: {cause}") from exc
    out: dict[str, dict[str, Any]] = {d: {} for d in tables}
    for name, transducer in fits.items():
        source, classifier, _ = where[name]
        out[source.name][classifier] = transducer
    return out


def _fill_report(
    config: ReportConfig,
    partial: Path,
    sampler: dict[str, Any],
    say: Callable[[str], None],
    progress: bool,
    scheduler: str,
) -> None:
    """Fit, compare and write every file of the report into the folder ``partial``."""
    import tomli_w

    from .. import __version__
    from ..compare import compare
    from .html import metric_table, page, toolkit_sections

    started = time.perf_counter()
    tables = config.tables()  # every data set checked before any fit
    for source in config.data:
        frame = tables[source.name]
        labels = sorted(map(str, frame[source.class_col].unique()))
        named = f"{source.name}: " if config.several else ""
        say(f"calibration data: {named}{len(frame)} rows, classes {labels}")
    class_names = list(config.class_order)
    say(class_order_sentence(config))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fits = fit_all(config, tables, sampler, scheduler, say, progress)
    prevalences = None
    if config.prevalences is not None:
        prevalences = [float(config.prevalences[c]) for c in class_names]
    # every data set's classes are the matrices' (as text), put in the outputs' order;
    # each matrix by its own labels, so that [0, 1] and ["1", "0"] name the same classes
    utilities = {}
    for n, u in config.utilities.items():
        own = {str(c): c for c in u.classes}
        values = u.reindex(classes=[own[c] for c in class_names]).values
        utilities[n] = UtilityMatrix(values, decisions=u.decisions, classes=class_names)
    say(f"long-run utilities under {len(utilities)} utility matrices")
    comparisons = {d: compare(f, utilities, prevalences=prevalences) for d, f in fits.items()}
    say("writing the report")
    summary = _with_dataset({d: c.summary() for d, c in comparisons.items()})
    summary.to_csv(partial / "summary.csv", index=False, float_format="%.17g")
    superiority = _with_dataset({d: _superiority_table(c) for d, c in comparisons.items()})
    superiority.to_csv(partial / "superiority.csv", index=False, float_format="%.17g")
    _draws(comparisons, __version__).to_netcdf(partial / "draws.nc")
    for dataset, per in fits.items():
        for name, transducer in per.items():
            file_name = transducer_file_name(name, dataset if config.several else None)
            transducer.save(partial / file_name)
    lock = _lock(config, tables, fits, utilities, sampler, class_names, prevalences)
    (partial / "config.lock.toml").write_text(tomli_w.dumps(lock))
    found = verdicts(comparisons, fits, utilities, prevalences)
    metrics = {
        d: metric_table(
            config, tables[d], next(s for s in config.data if s.name == d), fits[d], utilities
        )
        for d in fits
    }
    say("the evaluation toolkit and the standard-versus-augmented comparison")
    toolkit = {
        d: toolkit_sections(config, tables[d], next(s for s in config.data if s.name == d),
                            fits[d], utilities)
        for d in fits
    }  # fmt: skip
    (partial / "report.html").write_text(
        page(
            config,
            comparisons,
            fits,
            utilities,
            summary,
            metrics,
            found,
            [str(w.message) for w in caught],
            toolkit,
        )
    )
    say(f"finished in {time.perf_counter() - started:.0f} s")


def _with_dataset(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One table from one per data set, the data set in a first column ``dataset``."""
    parts = [frame.assign(dataset=dataset) for dataset, frame in frames.items()]
    table = pd.concat(parts, ignore_index=True)
    return table[["dataset", *[c for c in table.columns if c != "dataset"]]]


def _draws(comparisons: dict[str, Any], version: str) -> xr.Dataset:
    """Long-run-utility draws, dims (dataset, classifier, chain, draw, matrix).

    One variable per quantity, names along dimensions: names (any text) are coordinate
    values, never variable names (NetCDF forbids some characters there).
    """
    variables: dict[str, list[xr.DataArray]] = {"long_run_utility": []}
    rescaled = all(c.rescaled is not None for c in comparisons.values())
    if rescaled:
        variables["rescaled_long_run_utility"] = []
    for comparison in comparisons.values():
        names = pd.Index(comparison.names, name="classifier")
        variables["long_run_utility"].append(
            xr.concat([comparison.utilities[n] for n in names], dim=names)
        )
        if rescaled:
            variables["rescaled_long_run_utility"].append(
                xr.concat([comparison.rescaled[n] for n in names], dim=names)
            )
    datasets = pd.Index(list(comparisons), name="dataset")
    draws = xr.Dataset({k: xr.concat(v, dim=datasets) for k, v in variables.items()})
    draws.attrs.update(provenance(version))
    return draws


def provenance(version: str) -> dict[str, Any]:
    """The attributes of draws.nc: its format (:data:`DRAWS_FORMAT`), the format's
    version (:data:`DRAWS_FORMAT_VERSION`), and the yieldwise ``version`` that wrote it.
    The one place they are written."""
    return {
        "yieldwise_format": DRAWS_FORMAT,
        "yieldwise_format_version": DRAWS_FORMAT_VERSION,
        "yieldwise_version": version,
    }


def _superiority_table(comparison: Any) -> pd.DataFrame:
    rows = []
    matrices = list(comparison.utilities["matrix"].values)
    for matrix in matrices:
        table = comparison.prob_superiority(matrix=matrix)
        ties = comparison.prob_tie(matrix=matrix)
        for a in table.index:
            for b in table.columns:
                if a != b:
                    rows.append(
                        {
                            "matrix": matrix,
                            "classifier": a,
                            "versus": b,
                            "prob_superiority": table.loc[a, b],
                            "prob_tie": ties.loc[a, b],
                        }
                    )
    columns = ["matrix", "classifier", "versus", "prob_superiority", "prob_tie"]
    return pd.DataFrame(rows, columns=columns)


def _lock(config, tables, fits, utilities, sampler, class_names, prevalences) -> dict[str, Any]:
    """config.lock.toml: the resolved settings, seeds and versions.

    Each classifier's resolved ``transform`` and ``resolution`` are lists, one entry per
    output column; with several data sets, tables of such lists by data set (as
    ``seeds_used``), since "auto" resolves on each data set's own outputs: votes k/200 on
    one site and a continuous score on another (the lock named the first data set's only,
    audit 2026-12-06). The file has no format version: nothing in yieldwise reads it back.
    """
    from .. import __version__

    def data_entry(source: Any) -> dict[str, Any]:
        entry = {"source": source.where, "class_col": source.class_col,
                 "rows": len(tables[source.name])}  # fmt: skip
        return {"name": source.name, **entry} if config.several else entry

    first = fits[config.data[0].name]
    some = next(iter(first.values()))

    def resolved(name: str) -> dict[str, Any]:
        def of(transducer: Any) -> dict[str, list[Any]]:
            transform = transducer.transform_
            return {"transform": [str(k) for k in transform.kind],
                    "resolution": ["continuous" if r is None else float(r)
                                   for r in transform.resolution]}  # fmt: skip

        if not config.several:
            return of(first[name])
        per = {d: of(per_set[name]) for d, per_set in fits.items()}
        return {key: {d: entry[key] for d, entry in per.items()}
                for key in ("transform", "resolution")}  # fmt: skip

    settings = dict(sampler)
    seed = int(settings.pop("seed", 1))
    if config.several:
        seeds = {d: {n: t.seed_ for n, t in per.items()} for d, per in fits.items()}
    else:
        seeds = {n: t.seed_ for n, t in first.items()}
    lock: dict[str, Any] = {
        "title": config.title,
        "classes": list(class_names),
        "data": [data_entry(s) for s in config.data] if config.several
        else data_entry(config.data[0]),
        "classifier": [
            {"name": n, "outputs": c, **resolved(n)} for n, c in config.classifiers.items()
        ],
        "utility": [
            {
                "name": n,
                "decisions": [str(d) for d in u.decisions],
                "classes": [str(c) for c in u.classes],
                "values": u.values.tolist(),
            }
            for n, u in utilities.items()
        ],
        "sampler": {**settings, "seed": seed, "seeds_used": seeds},
        "versions": {
            "yieldwise": __version__,
            "backend": some.backend_,
            "backend_version": fit_record(some.posterior_)["backend_version"],
            "stan": fit_record(some.posterior_)["stan_version"],
        },
    }  # fmt: skip
    if prevalences is not None:
        lock["prevalences"] = dict(zip(class_names, prevalences, strict=True))
    from .html import RULES_MATRICES, RULES_SEED, TOOLKIT_BINS

    lock["toolkit"] = {
        "bins": TOOLKIT_BINS,
        "rules_matrices": RULES_MATRICES,
        "rules_prior": "uniform",
        "rules_seed": RULES_SEED,
    }
    return lock


# -------------------------------------------------------------------- verdict
@dataclass
class Verdict:
    """What a decision-maker reads first, for one data set and utility matrix.

    ``gain`` is the expected long-run utility over the runner-up per :data:`PER_ITEMS`
    items, ``gain_interval`` its 90 % interval (None with one classifier);
    ``more_data`` what perfect knowledge of the deployed classifier's transducer would
    add per :data:`PER_ITEMS` items (theory section 4: the oracle's long-run utility minus
    the deployed rule's, the most that more calibration data could gain), with its 90 %
    interval.
    """

    dataset: str
    matrix: str
    deploy: str
    prob_best: float
    expected: float
    runner_up: str | None
    gain: float | None
    gain_interval: tuple[float, float] | None
    more_data: float
    more_data_interval: tuple[float, float]


def verdicts(
    comparisons: dict[str, Any],
    fits: dict[str, dict[str, Any]],
    utilities: dict[str, UtilityMatrix],
    prevalences: Any,
) -> list[Verdict]:
    """One :class:`Verdict` per data set and utility matrix.

    The classifier to deploy is the one with the highest posterior mean long-run utility
    (maximum expected utility, theory section 4), whatever its P(best).
    """
    from ..long_run import value_of_more_data

    found = []
    for dataset, comparison in comparisons.items():
        for matrix, utility in utilities.items():
            means = {n: float(comparison.samples(n, matrix).mean()) for n in comparison.names}
            ranked = sorted(means, key=means.__getitem__, reverse=True)
            best = ranked[0]
            gain = interval = runner = None
            if len(ranked) > 1:
                runner = ranked[1]
                diff = comparison.difference(best, runner, matrix=matrix, prob=VERDICT_INTERVAL)
                gain = PER_ITEMS * diff.attrs["mean"]
                low, high = diff.attrs["interval"]
                interval = (PER_ITEMS * low, PER_ITEMS * high)
            worth = value_of_more_data(fits[dataset][best], utility, prevalences=prevalences)
            more = worth["difference"].values.ravel()
            tail = (1 - VERDICT_INTERVAL) / 2
            found.append(
                Verdict(
                    dataset=dataset,
                    matrix=str(matrix),
                    deploy=best,
                    prob_best=float(comparison.prob_best(matrix=matrix)[best]),
                    expected=PER_ITEMS * means[best],
                    runner_up=runner,
                    gain=gain,
                    gain_interval=interval,
                    more_data=PER_ITEMS * float(more.mean()),
                    more_data_interval=(
                        PER_ITEMS * float(np.quantile(more, tail)),
                        PER_ITEMS * float(np.quantile(more, 1 - tail)),
                    ),
                )
            )
    return found
