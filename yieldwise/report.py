"""Batch posterior reports: ``yieldwise report CONFIG.toml`` (the main job).

A TOML file names the calibration data, the classifiers (their output columns), one or
more utility matrices, optional deployment prevalences and the sampler settings. The
report fits one transducer per classifier, computes the posterior of each classifier's
long-run utility under each matrix (theory section 4), and writes one folder:

* ``report.html``: self-contained (inline images, no network), user-given names escaped;
* ``summary.csv``: one row per classifier and matrix (posterior mean, sd, quantiles,
  rescaled values, P(best), integration errors);
* ``superiority.csv``: P(row classifier yields more than column classifier), per matrix;
* ``draws.nc``: the long-run-utility draws, raw and rescaled, with dims (classifier,
  chain, draw, matrix), reloadable with ``xarray.open_dataset``; the transducers are
  saved beside it as ``transducer_<name>.nc``;
* ``config.lock.toml``: the resolved settings, the package, backend and Stan versions,
  and the seed, so that the report can be reproduced.

The folder is written under a temporary name and renamed at the end, so a failed run
never leaves a folder that looks complete.

Example configuration::

    [data]
    calibration = "calibration.csv"   # relative to this file; or dataset = "digits_binary"
    class_col = "label"

    [[classifier]]
    name = "forest"
    outputs = ["forest_votes"]
    transform = "logit"     # optional: auto | identity | logit | log | simplex
    resolution = 0.005      # optional: auto | continuous | lattice spacing

    [[utility]]
    name = "screening"
    decisions = ["dismiss", "treat"]
    classes = ["other", "eight"]
    values = [[0, -10], [-1, 5]]

    [sampler]
    chains = 4
    warmup = 500
    draws = 750
    seed = 1

    [prevalences]           # optional: deployment class frequencies
    other = 0.8
    eight = 0.2

``data/digits_report.toml`` shows every key with comments.
"""

from __future__ import annotations

import base64
import html
import inspect
import io
import os
import shutil
import time
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ._files import (
    OutputTargetError,
    check_replaceable,
    output_path,
    partial_folder,
    place_folder,
    target_lock,
    write_manifest,
)
from .utility import UtilityMatrix

__all__ = ["ConfigError", "ReportConfig", "load_config", "run_report"]

_SAMPLER_KEYS = {"chains", "warmup", "draws", "seed", "n_components", "backend", "adapt_delta"}


class ConfigError(ValueError):
    """A report configuration that cannot be used; the message names the file and key."""


@dataclass
class ReportConfig:
    """A validated report configuration (paths resolved against the config file)."""

    path: Path
    calibration: Path | None
    dataset: str | None
    class_col: str
    classifiers: dict[str, list[str]]
    utilities: dict[str, UtilityMatrix]
    prevalences: dict[str, float] | None = None
    #: per classifier, the Transducer's ``output_transform`` and ``resolution``
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    sampler: dict[str, Any] = field(default_factory=dict)
    title: str = "yieldwise report"

    def table(self) -> pd.DataFrame:
        """The calibration table, checked against the configuration."""
        from .datasets import load_digits_binary, load_digits_three

        where = str(self.calibration) if self.calibration is not None else self.dataset
        if self.dataset is not None:
            loaders = {"digits_binary": load_digits_binary, "digits_three": load_digits_three}
            frame = loaders[self.dataset]()
        else:
            assert self.calibration is not None  # one of the two, checked by load_config
            try:
                frame = pd.read_csv(self.calibration)
            except FileNotFoundError:
                raise ConfigError(
                    f"{self.path}: [data].calibration: no such file {where}"
                ) from None
            except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
                raise ConfigError(f"{where}: cannot read it as CSV ({exc})") from None
        needed = {self.class_col: "[data].class_col"}
        for name, columns in self.classifiers.items():
            for column in columns:
                needed[column] = f"[[classifier]] {name!r} outputs"
        for column, key in needed.items():
            if column not in frame.columns:
                raise ConfigError(
                    f"{self.path}: {key} names column {column!r}, which {where} does not "
                    f"have; its columns are {list(frame.columns)}"
                )
            missing = frame[column].isna().to_numpy()
            if missing.any():
                raise ConfigError(
                    f"{where}: column {column!r} has {int(missing.sum())} missing value(s), "
                    f"first in data row {int(np.flatnonzero(missing)[0]) + 1}"
                )
        seen = {str(c) for c in frame[self.class_col].unique()}
        if self.prevalences is not None and set(map(str, self.prevalences)) != seen:
            raise ConfigError(
                f"{self.path}: [prevalences] names classes {sorted(map(str, self.prevalences))}, "
                f"but column {self.class_col!r} of {where} has {sorted(seen)}"
            )
        for name, u in self.utilities.items():
            classes = {str(c) for c in u.classes}
            if classes != seen:
                raise ConfigError(
                    f"{self.path}: [[utility]] {name!r} has classes {sorted(classes)}, but "
                    f"column {self.class_col!r} of {where} has {sorted(seen)}"
                )
        return frame


def _need(table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in table:
        raise ConfigError(f"{where}: missing key {key!r}")
    value = table[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(f"{where}.{key}: expected {names}, found {value!r}")
    return value


_TRANSFORMS = ("auto", "identity", "logit", "log", "simplex")


def _classifier_options(entry: dict[str, Any], n_outputs: int, where: str) -> dict[str, Any]:
    """``transform`` and ``resolution`` of one [[classifier]], checked (Transducer names)."""
    transform = entry.get("transform", "auto")
    kinds = [transform] if isinstance(transform, str) else transform
    if (
        not isinstance(kinds, list)
        or not all(isinstance(k, str) and k in _TRANSFORMS for k in kinds)
        or (not isinstance(transform, str) and len(kinds) != n_outputs)
    ):
        raise ConfigError(
            f"{where}.transform: expected one of {list(_TRANSFORMS)} or a list of them, one "
            f"per output column ({n_outputs}), found {transform!r}"
        )
    resolution = entry.get("resolution", "auto")
    if resolution == "continuous":
        resolution = None
    elif not (
        resolution == "auto"
        or (isinstance(resolution, int | float) and not isinstance(resolution, bool)
            and 0 < resolution < float("inf"))
    ):  # fmt: skip
        raise ConfigError(
            f'{where}.resolution: expected "auto", "continuous" or a positive lattice '
            f"spacing such as 0.005, found {resolution!r}"
        )
    return {"output_transform": transform, "resolution": resolution}


def _tables(raw: dict[str, Any], key: str, path: Path) -> list[dict[str, Any]]:
    """The non-empty array of tables ``[[key]]``."""
    entries = _need(raw, key, list, str(path))
    if not entries:
        raise ConfigError(f"{path}: {key} is empty; give at least one [[{key}]] table")
    for i, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise ConfigError(
                f"{path}: [[{key}]] number {i}: expected a table ([[{key}]] with keys), "
                f"found {entry!r}"
            )
    return entries


#: Longest file name (bytes) most file systems accept.
_MAX_FILE_NAME = 255


def transducer_file_name(name: str) -> str:
    """The file a report saves the classifier ``name``'s transducer in."""
    return f"transducer_{_safe(name)}.nc"


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _check_sampler(
    sampler: dict[str, Any], where: str, overrides: dict[str, Any] | None = None
) -> None:
    """The sampler settings, checked as the Transducer and the backends will use them.

    ``where`` names the configuration table; keys in ``overrides`` came from the command
    line and are named as its options (``--chains``).
    """
    from .backends import get_backend
    from .transducer import component_ladder

    def key(name: str) -> str:
        return f"--{name}" if overrides and name in overrides else f"{where}.{name}"

    for name, low in (("chains", 1), ("warmup", 0), ("draws", 1)):
        if name in sampler and not (_is_int(sampler[name]) and sampler[name] >= low):
            raise ConfigError(f"{key(name)}: expected an integer >= {low}, found {sampler[name]!r}")
    if "seed" in sampler and not (_is_int(sampler["seed"]) and 0 <= sampler["seed"] < 2**31):
        raise ConfigError(
            f"{key('seed')}: expected an integer in [0, 2**31), found {sampler['seed']!r}"
        )
    if "adapt_delta" in sampler:
        value = sampler["adapt_delta"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise ConfigError(f"{key('adapt_delta')}: expected a number in (0, 1), found {value!r}")
    if "n_components" in sampler:
        try:
            component_ladder(sampler["n_components"])
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{key('n_components')}: {exc}") from None
    if "backend" in sampler:
        backend = sampler["backend"]
        if not isinstance(backend, str):
            raise ConfigError(f"{key('backend')}: expected a backend name, found {backend!r}")
        try:
            get_backend(backend)
        except (ValueError, RuntimeError) as exc:
            raise ConfigError(f"{key('backend')}: {exc}") from None


def load_config(path: str | Path) -> ReportConfig:
    """Read and validate a report configuration (TOML)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    unknown = set(raw) - {"title", "data", "classifier", "utility", "sampler", "prevalences"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {sorted(unknown)}")
    data = _need(raw, "data", dict, str(path))
    unknown = set(data) - {"calibration", "dataset", "class_col"}
    if unknown:
        raise ConfigError(
            f"{path}: [data] has unknown key(s) {sorted(unknown)}; known: calibration, "
            "dataset, class_col"
        )
    calibration = dataset = None
    if ("calibration" in data) == ("dataset" in data):
        raise ConfigError(
            f"{path}: [data] needs exactly one of 'calibration' (a CSV file) "
            "or 'dataset' (digits_binary or digits_three)"
        )
    if "calibration" in data:
        calibration = path.parent / _need(data, "calibration", str, f"{path}: [data]")
    else:
        dataset = _need(data, "dataset", str, f"{path}: [data]")
        if dataset not in ("digits_binary", "digits_three"):
            raise ConfigError(
                f"{path}: [data].dataset: expected 'digits_binary' or 'digits_three', "
                f"found {dataset!r}"
            )
    class_col = _need(data, "class_col", str, f"{path}: [data]")
    classifiers: dict[str, list[str]] = {}
    options: dict[str, dict[str, Any]] = {}
    file_names: dict[str, str] = {}
    for i, entry in enumerate(_tables(raw, "classifier", path), start=1):
        where = f"{path}: [[classifier]] number {i}"
        name = _need(entry, "name", str, where)
        outputs = _need(entry, "outputs", list, where)
        if not outputs or not all(isinstance(o, str) for o in outputs):
            raise ConfigError(f"{where}.outputs: expected a non-empty list of column names")
        if class_col in outputs:
            raise ConfigError(
                f"{where}.outputs: lists {class_col!r}, the class column ([data].class_col); "
                "a classifier's outputs cannot be the true classes"
            )
        if not name.strip():
            raise ConfigError(f"{where}.name: expected a non-empty name, found {name!r}")
        if name in classifiers:
            raise ConfigError(f"{where}.name: {name!r} is used twice")
        file_name = transducer_file_name(name)
        # compared case-insensitively: macOS and Windows file systems are
        clash = file_names.get(file_name.casefold())
        if clash is not None:
            raise ConfigError(
                f"{where}.name: {name!r} and {clash!r} would both be saved as {file_name} "
                "(names are reduced to letters, digits, - and _ for file names, ignoring "
                "case); rename one"
            )
        if len(file_name.encode()) > _MAX_FILE_NAME:
            raise ConfigError(
                f"{where}.name: {name!r} is too long for a file name ({file_name} has "
                f"{len(file_name.encode())} bytes, at most {_MAX_FILE_NAME}); shorten it"
            )
        file_names[file_name.casefold()] = name
        unknown = set(entry) - {"name", "outputs", "transform", "resolution"}
        if unknown:
            raise ConfigError(
                f"{where} ({name!r}): unknown key(s) {sorted(unknown)}; known: name, "
                "outputs, transform, resolution"
            )
        classifiers[name] = outputs
        options[name] = _classifier_options(entry, len(outputs), f"{where} ({name!r})")
    utilities: dict[str, UtilityMatrix] = {}
    for i, entry in enumerate(_tables(raw, "utility", path), start=1):
        where = f"{path}: [[utility]] number {i}"
        name = _need(entry, "name", str, where)
        unknown = set(entry) - {"name", "decisions", "classes", "values"}
        if unknown:
            raise ConfigError(
                f"{where} ({name!r}): unknown key(s) {sorted(unknown)}; known: name, "
                "decisions, classes, values"
            )
        if name in utilities:
            raise ConfigError(f"{where}.name: {name!r} is used twice")
        try:
            utilities[name] = UtilityMatrix(
                _need(entry, "values", list, where),
                decisions=_need(entry, "decisions", list, where),
                classes=_need(entry, "classes", list, where),
            )
        except ConfigError:
            raise
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where} ({name!r}): {exc}") from None
    decisions = {u.decisions for u in utilities.values()}
    if len(decisions) > 1:
        raise ConfigError(
            f"{path}: every [[utility]] must have the same decisions, found "
            f"{[list(d) for d in decisions]}"
        )
    sampler = dict(_need(raw, "sampler", dict, str(path)) if "sampler" in raw else {})
    if set(sampler) - _SAMPLER_KEYS:
        raise ConfigError(
            f"{path}: [sampler] has unknown key(s) {sorted(set(sampler) - _SAMPLER_KEYS)}; "
            f"known: {sorted(_SAMPLER_KEYS)}"
        )
    _check_sampler(sampler, f"{path}: [sampler]")
    prevalences = raw.get("prevalences")
    if prevalences is not None:
        if not isinstance(prevalences, dict) or not prevalences:
            raise ConfigError(f"{path}: [prevalences] must be a table of class = frequency")
        for label, value in prevalences.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not 0 < value < float("inf"):
                raise ConfigError(
                    f"{path}: [prevalences].{label}: expected a positive number (a frequency), "
                    f"found {value!r}"
                )
        total = sum(prevalences.values())
        if abs(total - 1) > 1e-9:
            raise ConfigError(f"{path}: [prevalences] must sum to 1, found a sum of {total!r}")
    return ReportConfig(
        path=path,
        calibration=calibration,
        dataset=dataset,
        class_col=class_col,
        classifiers=classifiers,
        utilities=utilities,
        prevalences=prevalences,
        options=options,
        sampler=sampler,
        title=str(raw.get("title", "yieldwise report")),
    )


# ------------------------------------------------------------------ the job
def run_report(
    config: ReportConfig,
    out: str | Path,
    overrides: dict[str, Any] | None = None,
    *,
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
    sampler_progress: bool = False,
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
        Show Stan's own progress while each transducer samples.

    Notes
    -----
    The report is written into a hidden folder ``.NAME.partial-XXXXXXXX`` beside ``out``
    and renamed to ``out`` when complete; any failure or interrupt removes it. While the
    run lasts it holds a lock on ``out`` (the file ``.NAME.lock``): a second run on the
    same ``out`` stops at once with an error naming this one.
    """
    from . import __version__

    say = log or (lambda message: None)
    out = output_path(out)
    sampler = {**config.sampler, **(overrides or {})}
    _check_sampler(sampler, f"{config.path}: [sampler]", overrides or {})
    out.parent.mkdir(parents=True, exist_ok=True)
    with target_lock(out):
        _check_target(out, overwrite)  # before any fit
        partial = partial_folder(out)
        try:
            _fill_report(config, partial, sampler, say, sampler_progress)
            write_manifest(partial, __version__)
            place_folder(partial, out, overwrite=overwrite)
        except BaseException:  # a failure or an interrupt: nothing is left behind
            shutil.rmtree(partial, ignore_errors=True)
            raise
    return out


def _fill_report(
    config: ReportConfig,
    partial: Path,
    sampler: dict[str, Any],
    say: Callable[[str], None],
    sampler_progress: bool,
) -> None:
    """Fit, compare and write every file of the report into the folder ``partial``."""
    import tomli_w

    from . import __version__
    from .compare import compare
    from .transducer import Transducer

    started = time.perf_counter()
    frame = config.table()
    labels = sorted(map(str, frame[config.class_col].unique()))
    say(f"calibration data: {len(frame)} rows, classes {labels}")
    sampler = dict(sampler)
    seed = int(sampler.pop("seed", 1))
    # config.table() checked that every matrix's classes are the data's (as text), so the
    # first matrix's column order serves all; labels are compared as text throughout.
    classes = list(next(iter(config.utilities.values())).classes)
    class_names = [str(c) for c in classes]
    truth = frame[config.class_col].astype(str)
    fits: dict[str, Transducer] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, (name, columns) in enumerate(config.classifiers.items()):
            say(
                f"fitting transducer {i + 1}/{len(config.classifiers)}: {name} "
                f"(outputs {', '.join(columns)})"
            )
            tick = time.perf_counter()
            transducer = Transducer(
                seed=seed + i, progress=sampler_progress, **config.options.get(name, {}), **sampler
            )
            try:
                fits[name] = transducer.fit(frame[columns], truth, class_labels=class_names)
            except ValueError as exc:  # e.g. a transform that does not suit the outputs
                raise ConfigError(f"{config.path}: [[classifier]] {name!r}: {exc}") from exc
            info = fits[name].sampler_summary()
            say(
                f"  done in {time.perf_counter() - tick:.0f} s: {fits[name].n_components_} "
                f"components, {info['divergent']} divergent transitions, "
                f"{info['max_treedepth_hits']} tree-depth hits"
            )
    prevalences = None
    if config.prevalences is not None:
        prevalences = [float(config.prevalences[c]) for c in class_names]
    utilities = {
        n: UtilityMatrix(
            u.reindex(classes=classes).values, decisions=u.decisions, classes=class_names
        )
        for n, u in config.utilities.items()
    }
    say(f"long-run utilities under {len(utilities)} utility matrices")
    comparison = compare(fits, utilities, prevalences=prevalences)
    say("writing the report")
    summary = comparison.summary()
    summary.to_csv(partial / "summary.csv", index=False, float_format="%.17g")
    _superiority_table(comparison).to_csv(
        partial / "superiority.csv", index=False, float_format="%.17g"
    )
    # One variable per quantity, classifiers along a dimension: names (any text) are
    # coordinate values, never variable names (NetCDF forbids some characters there).
    names = pd.Index(comparison.names, name="classifier")
    variables = {"long_run_utility": xr.concat([comparison.utilities[n] for n in names], dim=names)}
    if comparison.rescaled is not None:
        variables["rescaled_long_run_utility"] = xr.concat(
            [comparison.rescaled[n] for n in names], dim=names
        )
    draws = xr.Dataset(variables)
    draws.attrs["yieldwise_version"] = __version__
    draws.to_netcdf(partial / "draws.nc")
    for name, transducer in fits.items():
        transducer.save(partial / transducer_file_name(name))
    some = next(iter(fits.values()))
    lock = {
        "title": config.title,
        "data": {
            "source": str(config.calibration or config.dataset),
            "class_col": config.class_col,
            "rows": len(frame),
        },
        "classifier": [
            {
                "name": n,
                "outputs": c,
                "transform": [str(k) for k in fits[n].transform_.kind],
                "resolution": [
                    "continuous" if r is None else float(r) for r in fits[n].transform_.resolution
                ],
            }
            for n, c in config.classifiers.items()
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
        "sampler": {**sampler, "seed": seed, "seeds_used": {n: t.seed_ for n, t in fits.items()}},
        "versions": {
            "yieldwise": __version__,
            "backend": some.backend_,
            "backend_version": some.posterior_.posterior.attrs["yieldwise_backend_version"],
            "stan": some.posterior_.posterior.attrs["yieldwise_stan_version"],
        },
    }
    if prevalences is not None:
        lock["prevalences"] = dict(zip(class_names, prevalences, strict=True))
    (partial / "config.lock.toml").write_text(tomli_w.dumps(lock))
    metric_table, confusions = _metric_table(config, frame, truth, fits, utilities)
    (partial / "report.html").write_text(
        _html(
            config,
            comparison,
            fits,
            utilities,
            summary,
            metric_table,
            confusions,
            [str(w.message) for w in caught],
        )
    )
    say(f"finished in {time.perf_counter() - started:.0f} s")


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


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


def _superiority_table(comparison: Any) -> pd.DataFrame:
    rows = []
    matrices = list(comparison.utilities["matrix"].values)
    for matrix in matrices:
        table = comparison.prob_superiority(matrix=matrix)
        for a in table.index:
            for b in table.columns:
                if a != b:
                    rows.append(
                        {
                            "matrix": matrix,
                            "classifier": a,
                            "versus": b,
                            "prob_superiority": table.loc[a, b],
                        }
                    )
    return pd.DataFrame(rows, columns=["matrix", "classifier", "versus", "prob_superiority"])


def _figure(**kwargs: Any) -> Any:
    """A figure outside pyplot: no GUI backend involved, nothing to close, and the user's
    matplotlib backend (e.g. in Jupyter) is left alone."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _metric_table(config, frame, truth, fits, utilities) -> tuple[pd.DataFrame, dict]:
    """Usual metrics of each classifier's standard decisions, and in-sample yields.

    Metrics (with their admissibility, theory 1.2) are computed, as is customary, on the
    classifier's own decisions (argmax of a vector output, threshold 0.5 for a scalar);
    the utility yields of each matrix are those of the expected-utility decisions on the
    calibration items (in-sample, hence optimistic; the posteriors above are not).
    """
    from . import metrics
    from .confusion import ConfusionMatrix
    from .long_run import _decision_indices
    from .yields import utility_yield

    rows: dict[str, dict[str, Any]] = {}
    admissible: dict[str, bool] = {}
    confusions: dict[str, Any] = {}
    for name, transducer in fits.items():
        classes = list(transducer.classes_)
        outputs = frame[config.classifiers[name]].to_numpy(float)
        standard = _decision_indices("standard", outputs, tuple(classes), transducer, 0.5)
        predicted = np.array(classes, dtype=object)[standard]
        confusion = ConfusionMatrix.from_labels(truth.to_numpy(object), predicted, classes=classes)
        confusions[name] = confusion
        positive = {"positive": classes[-1]} if len(classes) == 2 else {}
        for metric, function in metrics.CONFUSION_METRICS.items():
            try:
                takes_positive = "positive" in inspect.signature(function).parameters
                kwargs = positive if takes_positive else {}
                value = float(function(confusion, **kwargs))
            except (ValueError, metrics.UndefinedMetricError):
                value = float("nan")
            rows.setdefault(metric, {})[name] = value
            admissible[metric] = bool(function.admissible)
        for matrix, u in utilities.items():
            chosen = transducer.decide(frame[config.classifiers[name]], u)
            cm = ConfusionMatrix.from_labels(
                truth.to_numpy(object),
                np.asarray(chosen, dtype=object),
                classes=classes,
                decisions_set=list(u.decisions),
            )
            rows.setdefault(f"utility yield: {matrix}", {})[name] = utility_yield(cm, u)
            admissible[f"utility yield: {matrix}"] = True
    table = pd.DataFrame(rows).T
    table["admissible"] = pd.Series(admissible)
    return table, confusions


def _expected_utility_terms(row: Any, classes: Any) -> str:
    """``1·P(a) + 0·P(b)``: a decision's expected utility, as escaped HTML."""
    return " + ".join(
        f"{v:g}&middot;P({html.escape(str(c))})" for v, c in zip(row, classes, strict=True)
    )


def _html(config, comparison, fits, utilities, summary, metric_table, confusions, warned) -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{e(config.title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px}"
        "img{max-width:100%}.wide{overflow-x:auto}</style></head><body>",
        f"<h1>{e(config.title)}</h1>",
        "<p>Each classifier's outputs were turned into probabilities by a transducer learned "
        "from the calibration data; decisions maximise expected utility. The long-run "
        "utility is the average utility per item that the classifier will yield in use, "
        "with its posterior uncertainty.</p>",
        "<h2 id='summary'>Summary</h2>",
        "<div class='wide'>",
        summary.to_html(index=False, escape=True, float_format=lambda v: f"{v:.4g}"),
        "</div>",
    ]
    parts.append(
        "<h2 id='transducers'>Transducers</h2><p>p(class | output) with 75 % variability "
        "bands: how the curve could still move with more data. For two outputs, a map of "
        "the posterior mean, with the calibration items as dots; for probability vectors, "
        "each class's probability against its own output column (the dotted diagonal is "
        "the output taken at face value).</p>"
    )
    for name, transducer in fits.items():
        # every output shape has a plot: a 1-D curve, a 2-D map, or a calibration plot
        fig = _figure(figsize=(6, 3.6))
        ax = fig.subplots()
        transducer.plot(ax=ax)
        ax.set_title(name, parse_math=False)  # a name is text, whatever "$" it holds
        parts.append(f"<h3>{e(name)}</h3><img alt='transducer of {e(name)}' src='{_png(fig)}'>")
    parts.append("<h2 id='superiority'>Which classifier yields more</h2>")
    for matrix, u in utilities.items():
        parts.append(f"<h3>Utility matrix {e(str(matrix))}</h3>")
        parts.append(u.to_frame().to_html(escape=True))
        if len(comparison.names) > 1:
            parts.append("<p>P(row classifier yields more than column classifier):</p>")
            parts.append(
                comparison.prob_superiority(matrix=matrix).to_html(
                    escape=True, float_format=lambda v: f"{v:.3f}", na_rep="—"
                )
            )
            parts.append("<p>P(best): the probability that each has the highest long-run "
                         "utility.</p>")  # fmt: skip
            parts.append(
                comparison.prob_best(matrix=matrix)
                .to_frame()
                .to_html(escape=True, float_format=lambda v: f"{v:.3f}")
            )
        parts.append(
            "<p>The posterior of each classifier's long-run utility per item: where its "
            "average utility in use will lie, given the calibration data.</p>"
        )
        fig = _figure(figsize=(11, 4))
        axes = fig.subplots(1, 2)
        comparison.plot(matrix=matrix, axes=axes)
        parts.append(f"<img alt='long-run utility posteriors, {e(str(matrix))}' src='{_png(fig)}'>")
    parts.append(
        "<h2 id='thresholds'>What each utility matrix implies</h2><p>Each item gets the "
        "decision with the largest expected utility under its probabilities. With two "
        "decisions and two classes, that is a threshold on the probability of the second "
        "class: choose the second decision when it is exceeded.</p><ul>"
    )
    for matrix, u in utilities.items():
        if u.shape == (2, 2):
            parts.append(
                f"<li>{e(str(matrix))}: choose &ldquo;{e(str(u.decisions[1]))}&rdquo; when "
                f"P({e(str(u.classes[1]))}) exceeds {u.threshold():.4g}</li>"
            )
        else:
            terms = "; ".join(
                f"&ldquo;{e(str(d))}&rdquo;: " + _expected_utility_terms(row, u.classes)
                for d, row in zip(u.decisions, u.values, strict=True)
            )
            parts.append(
                f"<li>{e(str(matrix))}: choose the decision with the largest expected utility "
                f"({terms})</li>"
            )
    parts.append("</ul>")
    parts.append(
        "<h2 id='metrics'>The usual metrics, and why they may mislead</h2><p>The usual "
        "metrics are computed, as is customary, on each classifier's standard decisions "
        "(the largest output, or a score above 0.5) over the calibration items. Only "
        "admissible scores rank classifiers as some utility matrix does, and only the "
        "utility yield of this problem's own matrix ranks them as this problem does. The "
        "utility-yield rows are those of the expected-utility decisions on the same items: "
        "in-sample, hence a little optimistic; the long-run utilities above are not.</p>"
    )
    parts.append(metric_table.to_html(escape=True, float_format=lambda v: f"{v:.4g}"))
    names = list(confusions)
    parts.append("<h3 id='win-map'>Utility-space win map</h3>")
    if len(names) < 2 or not all(len(c.classes) == 2 for c in confusions.values()):
        parts.append(
            "<p>The win map covers two classifiers of a two-class problem (the chart of "
            f"theory 1.1); this report has {len(names)} classifier(s) and "
            f"{len(next(iter(confusions.values())).classes)} classes.</p>"
        )
    else:
        from .plots import utility_space

        parts.append(
            "<p>For every binary utility matrix (the chart of theory 1.1; accuracy at the "
            "centre), which classifier's own decisions yield more on the calibration data.</p>"
        )
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                fig = _figure(figsize=(5.5, 5))
                ax = fig.subplots()
                utility_space(confusions[a], confusions[b], names=(a, b), ax=ax)
                parts.append(f"<img alt='win map, {e(a)} vs {e(b)}' src='{_png(fig)}'>")
    parts.append("<h2 id='diagnostics'>Sampler diagnostics</h2><ul>")
    for name, transducer in fits.items():
        info = transducer.sampler_summary()
        table = transducer.diagnostics()
        parts.append(
            f"<li>{e(name)}: {info['divergent']} divergent transitions, "
            f"{info['max_treedepth_hits']} at the maximum tree depth, "
            f"n_components {transducer.n_components_}; over {len(table)} quantities that do "
            f"not depend on component labels, worst R-hat {table['r_hat'].max():.3f} and "
            f"lowest bulk ESS {table['ess_bulk'].min():.0f} (targets: 1.01 and 400)</li>"
        )
    parts.append("</ul>")
    if warned:
        parts.append("<h3>Warnings</h3><ul>")
        parts.extend(f"<li>{e(w)}</li>" for w in dict.fromkeys(warned))
        parts.append("</ul>")
    parts.append("</body></html>")
    return "".join(parts)
