"""Report configuration: the TOML file, read and checked before any fit.

A configuration names one or more calibration data sets (``[data]``, or several
``[[data]]`` tables, each a calibration set or deployment site with its own class
column), the classifiers (their output columns), one or more utility matrices, optional
deployment prevalences, the sampler settings (passed to every :class:`~yieldwise.Transducer`
as its constructor parameters, checked by its own rules) and where the fits run
(``[compute] scheduler``). :func:`load_config` checks it all and every data set against
it, so that a mistake stops the run before the first fit, with one message naming the
file and the key.
"""

from __future__ import annotations

import importlib.util
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._files import read_table, unusable_values
from ..compare import RESERVED_NAMES
from ..datasets import load_digits_binary, load_digits_ten, load_digits_three
from ..utility import UtilityMatrix

__all__ = [
    "DATASETS",
    "ConfigError",
    "DataSource",
    "RESERVED_CLASSIFIER_NAMES",
    "ReportConfig",
    "check_scheduler",
    "class_order_sentence",
    "load_config",
    "not_numeric",
    "transducer_file_name",
]

#: Settings of a Transducer that a report sets per classifier or itself, not in [sampler].
_NOT_SAMPLER = {"output_transform", "resolution", "progress"}
#: The shipped calibration sets a configuration can name as ``dataset``.
DATASETS: dict[str, Callable[[], pd.DataFrame]] = {
    "digits_binary": load_digits_binary,
    "digits_three": load_digits_three,
    "digits_ten": load_digits_ten,
}


#: Names a classifier cannot take (compare.RESERVED_NAMES: the dimensions of the Dataset
#: that holds every classifier's long-run utility draws, one variable each).
RESERVED_CLASSIFIER_NAMES = RESERVED_NAMES


def _sampler_keys() -> set[str]:
    """[sampler] keys: the Transducer's own constructor parameters (whatever they are now)."""
    from ..transducer import Transducer

    return set(Transducer().get_params()) - _NOT_SAMPLER


class ConfigError(ValueError):
    """A report configuration that cannot be used; the message names the file and key."""


@dataclass
class DataSource:
    """One calibration data set (a ``[data]`` or ``[[data]]`` table)."""

    name: str
    calibration: Path | None
    dataset: str | None
    class_col: str
    #: how the configuration names this table in messages: ``[data]`` or ``[[data]] 'x'``
    key: str = "[data]"

    @property
    def where(self) -> str:
        """The file (or shipped set) the rows come from."""
        return str(self.calibration) if self.calibration is not None else str(self.dataset)

    def read(self, config_path: Path) -> pd.DataFrame:
        if self.dataset is not None:
            return DATASETS[self.dataset]()
        assert self.calibration is not None  # one of the two, checked by load_config
        try:
            return read_table(self.calibration, label_columns=[self.class_col])
        except FileNotFoundError:
            raise ConfigError(
                f"{config_path}: {self.key}.calibration: no such file {self.where}"
            ) from None
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


@dataclass
class ReportConfig:
    """A validated report configuration (paths resolved against the config file)."""

    path: Path
    data: list[DataSource]
    classifiers: dict[str, list[str]]
    utilities: dict[str, UtilityMatrix]
    prevalences: dict[str, float] | None = None
    #: per classifier, the Transducer's ``output_transform`` and ``resolution``
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    sampler: dict[str, Any] = field(default_factory=dict)
    title: str = "yieldwise report"
    #: where the fits run: "serial", "processes" or a Dask scheduler address
    scheduler: str = "serial"
    #: True for several ``[[data]]`` tables (the outputs then name each data set)
    several: bool = False
    #: the classes (as text) in the order the classifiers' outputs follow: a one-column
    #: output is evidence for the last of two classes, column j of a vector output stands
    #: for class j, and binary metrics take the last class as positive
    class_order: list[str] = field(default_factory=list)
    #: where ``class_order`` came from: "classes" (declared) or the first [[utility]]
    class_order_from: str = "classes"

    # The first (or only) data set, as the single-[data] configuration had them.
    @property
    def calibration(self) -> Path | None:
        return self.data[0].calibration

    @property
    def dataset(self) -> str | None:
        return self.data[0].dataset

    @property
    def class_col(self) -> str:
        return self.data[0].class_col

    def table(self, source: DataSource | None = None) -> pd.DataFrame:
        """A calibration table (the first by default), checked against the configuration."""
        source = self.data[0] if source is None else source
        frame = source.read(self.path)
        where = source.where
        needed = {source.class_col: f"{source.key}.class_col"}
        users: dict[str, list[str]] = {}
        for name, columns in self.classifiers.items():
            for column in columns:
                needed.setdefault(column, f"[[classifier]] {name!r} outputs")
                users.setdefault(column, []).append(name)
        for column, key in needed.items():
            if column not in frame.columns:
                raise ConfigError(
                    f"{self.path}: {key} names column {column!r}, which {where} does not "
                    f"have; its columns are {list(frame.columns)}"
                )
            whose = (
                f" (outputs of [[classifier]] {', '.join(map(repr, users[column]))}"
                f"{' on ' + source.key if self.several else ''})"
                if column in users else ""
            )  # fmt: skip
            # checked here, before any fit; infinite values only in classifiers' outputs,
            # which must be numbers too (the rule of `yieldwise fit`)
            problem = unusable_values(frame[column], outputs=column in users)
            if problem is None and column in users:
                problem = not_numeric(frame[column])
            if problem is not None:
                raise ConfigError(f"{where}: column {column!r}{whose} {problem}")
        self._check_outputs(frame, source)
        seen = {str(c) for c in frame[source.class_col].unique()}
        if self.prevalences is not None and set(map(str, self.prevalences)) != seen:
            raise ConfigError(
                f"{self.path}: [prevalences] names classes {sorted(map(str, self.prevalences))}, "
                f"but column {source.class_col!r} of {where} has {sorted(seen)}"
            )
        for name, u in self.utilities.items():
            classes = {str(c) for c in u.classes}
            if classes != seen:
                raise ConfigError(
                    f"{self.path}: [[utility]] {name!r} has classes {sorted(classes)}, but "
                    f"column {source.class_col!r} of {where} has {sorted(seen)}"
                )
        return frame

    def _check_outputs(self, frame: pd.DataFrame, source: DataSource) -> None:
        """Each classifier's outputs on ``source`` as its fit will read them, before any fit
        (after the columns' own checks in :meth:`table`): enough items, and a transform
        that suits them (the fit's own ``as_outputs`` and ``choose_transform``, called as
        ``Transducer.fit`` calls them). A problem with the last classifier's outputs
        stopped the run only after the others were fitted (audit, 2026-12-06)."""
        import warnings

        from ..transducer.encoding import as_outputs, choose_transform, names_given
        from ..transducer.estimator import MIN_ITEMS

        on = f" on {source.key} ({source.where})" if self.several else ""
        if len(frame) < MIN_ITEMS:
            raise ConfigError(
                f"{source.where}: has {len(frame)} data row(s); a transducer needs at least "
                f"{MIN_ITEMS} calibration items (realistically hundreds): give {source.key} "
                "a larger calibration set"
            )
        for name, columns in self.classifiers.items():
            options = self.options.get(name, {})
            outputs = frame[columns]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the fit raises them again, named
                    y, names = as_outputs(outputs, "outputs")
                    choose_transform(
                        y, names, options.get("output_transform", "auto"),
                        options.get("resolution", "auto"), rotate=True, few_points=False,
                        named=names_given(outputs),
                    )  # fmt: skip
            except (ValueError, TypeError) as exc:  # worded as a failed fit's (job.fit_all)
                raise ConfigError(f"{self.path}: [[classifier]] {name!r}{on}: {exc}") from None

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every data set's table by name, each checked (its columns and its classes)."""
        return {source.name: self.table(source) for source in self.data}


def not_numeric(column: pd.Series) -> str | None:
    """What is wrong with a classifier's output ``column`` if it does not hold numbers, or
    None: the one rule and wording of ``yieldwise fit`` and ``yieldwise report``, both
    checked before any fit. The text follows the column's name: "is not numeric (dtype
    object, e.g. 'low' in data row 1 (line 2 of the file)); ..."."""
    if pd.api.types.is_numeric_dtype(column):
        return None
    numbers = pd.to_numeric(column, errors="coerce")
    bad = np.flatnonzero(numbers.isna().to_numpy() & column.notna().to_numpy())
    example = ""
    if bad.size:
        row = int(bad[0]) + 1
        example = f", e.g. {column.iloc[row - 1]!r} in data row {row} (line {row + 1} of the file)"
    return (
        f"is not numeric (dtype {column.dtype}{example}); classifier outputs must be numbers: "
        "name a column of scores or probabilities, or convert this one to numbers"
    )


def check_scheduler(value: Any, key: str) -> str:
    """``"serial"``, ``"processes"`` or a Dask scheduler address (Dask must be installed)."""
    from ..parallel import DASK_EXTRA

    if not isinstance(value, str) or not (value in ("serial", "processes") or "://" in value):
        raise ConfigError(
            f'{key}: expected "serial", "processes" or a Dask scheduler address such as '
            f'"tcp://host:8786", found {value!r}'
        )
    if "://" in value and importlib.util.find_spec("distributed") is None:
        raise ConfigError(
            f"{key}: {value!r} is a Dask scheduler, and Dask is not installed: {DASK_EXTRA}"
        )
    return value


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


def transducer_file_name(name: str, dataset: str | None = None) -> str:
    """The file a report saves the classifier ``name``'s transducer in (on ``dataset``,
    when the report has several data sets)."""
    if dataset is None:
        return f"transducer_{_safe(name)}.nc"
    return f"transducer_{_safe(dataset)}__{_safe(name)}.nc"


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def check_sampler(
    sampler: dict[str, Any], where: str, overrides: dict[str, Any] | None = None
) -> None:
    """The sampler settings, checked as the Transducer and the backends will use them.

    ``where`` names the configuration table; keys in ``overrides`` came from the command
    line and are named as its options (``--chains``).
    """
    from ..backends import get_backend
    from ..parallel import check_transducer_param
    from ..transducer.estimator import check_components

    def key(name: str) -> str:
        return f"--{name}" if overrides and name in overrides else f"{where}.{name}"

    for name, low in (("chains", 1), ("warmup", 0), ("draws", 1), ("max_treedepth", 1)):
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
            check_components(sampler["n_components"])
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
    # every value, also those without a rule above (likelihood_bins, class_reduction,
    # kernel_tail_cut, prior, ...), by the fit's own checks: a bad one was blamed on the
    # first classifier, as its fit failed (audit, 2026-12-06)
    for name, value in sampler.items():
        try:
            check_transducer_param(name, value)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{key(name)}: {exc}") from None


def load_config(path: str | Path) -> ReportConfig:
    """Read and validate a report configuration (TOML).

    Everything that can be checked without fitting is: keys, types, the sampler settings
    by the Transducer's own rules, file names, the scheduler. The data sets themselves
    are checked by :meth:`ReportConfig.tables`, which the report calls before any fit.
    """
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    known = {"title", "classes", "data", "classifier", "utility", "sampler", "prevalences",
             "compute"}  # fmt: skip
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {sorted(unknown)}")
    data, several = _data_sources(raw, path)
    classifiers: dict[str, list[str]] = {}
    options: dict[str, dict[str, Any]] = {}
    file_names: dict[str, str] = {}
    for i, entry in enumerate(_tables(raw, "classifier", path), start=1):
        where = f"{path}: [[classifier]] number {i}"
        name = _need(entry, "name", str, where)
        outputs = _need(entry, "outputs", list, where)
        if not outputs or not all(isinstance(o, str) for o in outputs):
            raise ConfigError(f"{where}.outputs: expected a non-empty list of column names")
        for source in data:
            if source.class_col in outputs:
                raise ConfigError(
                    f"{where}.outputs: lists {source.class_col!r}, the class column "
                    f"({source.key}.class_col); a classifier's outputs cannot be the true classes"
                )
        if not name.strip():
            raise ConfigError(f"{where}.name: expected a non-empty name, found {name!r}")
        if name in classifiers:
            raise ConfigError(f"{where}.name: {name!r} is used twice")
        if name in RESERVED_CLASSIFIER_NAMES:
            raise ConfigError(
                f"{where}.name: {name!r} is reserved: the comparison of the classifiers "
                f"names its dimensions {list(RESERVED_CLASSIFIER_NAMES)} (chains and draws of "
                "the posterior, utility matrices), and a classifier cannot share a name with "
                f"one; rename it, e.g. {name + ' classifier'!r}"
            )
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
    if several:  # one file per data set and classifier: unique, and not too long
        seen: dict[str, tuple[str, str]] = {}
        for source in data:
            for name in classifiers:
                file_name = transducer_file_name(name, source.name)
                clash = seen.get(file_name.casefold())
                if clash is not None:
                    raise ConfigError(
                        f"{path}: [[data]] {source.name!r} with [[classifier]] {name!r}, and "
                        f"[[data]] {clash[0]!r} with [[classifier]] {clash[1]!r}, would both "
                        f"be saved as {file_name}; rename one"
                    )
                if len(file_name.encode()) > _MAX_FILE_NAME:
                    raise ConfigError(
                        f"{path}: [[data]] {source.name!r} with [[classifier]] {name!r} is too "
                        f"long for a file name ({file_name}); shorten one of the names"
                    )
                seen[file_name.casefold()] = (source.name, name)
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
        values = _need(entry, "values", list, where)
        flags = [v for row in values if isinstance(row, list) for v in row if isinstance(v, bool)]
        if flags:  # TOML's true and false are not utilities (as elsewhere in the file)
            raise ConfigError(
                f"{where} ({name!r}).values: expected numbers, found {flags[0]!r} (TOML "
                "true/false); write utilities as numbers such as 1 or 0"
            )
        try:
            utilities[name] = UtilityMatrix(
                values,
                decisions=_need(entry, "decisions", list, where),
                classes=_need(entry, "classes", list, where),
            )
        except ConfigError:
            raise
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where} ({name!r}): {exc}") from None
    class_order, class_order_from = _class_order(raw, utilities, path)
    decisions = {u.decisions for u in utilities.values()}
    if len(decisions) > 1:
        raise ConfigError(
            f"{path}: every [[utility]] must have the same decisions, found "
            f"{[list(d) for d in decisions]}"
        )
    sampler = dict(_need(raw, "sampler", dict, str(path)) if "sampler" in raw else {})
    known = _sampler_keys()
    if set(sampler) - known:
        raise ConfigError(
            f"{path}: [sampler] has unknown key(s) {sorted(set(sampler) - known)}; "
            f"known: {sorted(known)}"
        )
    check_sampler(sampler, f"{path}: [sampler]")
    compute = _need(raw, "compute", dict, str(path)) if "compute" in raw else {}
    if set(compute) - {"scheduler"}:
        raise ConfigError(
            f"{path}: [compute] has unknown key(s) {sorted(set(compute) - {'scheduler'})}; "
            "known: scheduler"
        )
    scheduler = check_scheduler(compute.get("scheduler", "serial"), f"{path}: [compute].scheduler")
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
        data=data,
        classifiers=classifiers,
        utilities=utilities,
        prevalences=prevalences,
        options=options,
        sampler=sampler,
        title=str(raw.get("title", "yieldwise report")),
        scheduler=scheduler,
        several=several,
        class_order=class_order,
        class_order_from=class_order_from,
    )


def _class_order(
    raw: dict[str, Any], utilities: dict[str, UtilityMatrix], path: Path
) -> tuple[list[str], str]:
    """The classes in the order the classifiers' outputs follow, as text, and its source.

    The order carries meaning that a utility matrix's columns do not: the standard rule
    reads a one-column output as evidence for the last of two classes and column j of a
    vector output as class j, and binary metrics take the last class as positive. Labels
    are compared as text throughout a report (the CSV's class column is text). Declared by
    the top-level ``classes``; without it the [[utility]] tables must all list their
    classes in one order, which is then used (and said by the report): a matrix whose
    columns merely came in another order must not flip a classifier's own decisions.
    """
    texts: dict[str, list[str]] = {}
    for name, u in utilities.items():
        text = [str(c) for c in u.classes]
        if len(set(text)) != len(text):
            raise ConfigError(
                f"{path}: [[utility]] {name!r}.classes: {list(u.classes)} name the same "
                "class twice once written as text (a report reads class labels as the "
                "text of the class column); give each class once"
            )
        texts[name] = text
    first_name, first = next(iter(texts.items()))
    for name, text in texts.items():
        if set(text) != set(first):
            raise ConfigError(
                f"{path}: [[utility]] {name!r} has classes {text}, but [[utility]] "
                f"{first_name!r} has {first}; every matrix must name the same classes"
            )
    if "classes" not in raw:
        for name, text in texts.items():
            if text != first:
                raise ConfigError(
                    f"{path}: [[utility]] {first_name!r} lists the classes in the order "
                    f"{first} and [[utility]] {name!r} in the order {text}. The order says "
                    "which class a one-column output is evidence for (the last of two) and "
                    "which class each column of a vector output stands for: declare it "
                    f"with a top-level key, e.g. classes = {json.dumps(first)}"
                )
        return first, f"[[utility]] {first_name!r}"
    declared = raw["classes"]
    if not (
        isinstance(declared, list)
        and declared
        and all(isinstance(c, str | int) and not isinstance(c, bool) for c in declared)
    ):
        raise ConfigError(
            f"{path}: classes: expected a list of class labels (text or integers), in the "
            f"order the classifiers' outputs follow, found {declared!r}"
        )
    order = [str(c) for c in declared]
    if len(set(order)) != len(order) or set(order) != set(first):
        raise ConfigError(
            f"{path}: classes: expected each of the utility matrices' classes {sorted(first)} "
            f"once, in the order the classifiers' outputs follow, found {declared!r}"
        )
    return order, "classes"


def class_order_sentence(config: ReportConfig) -> str:
    """The report's sentence on the class order, as plain text: the order the classifiers'
    outputs follow, where it came from (:func:`_class_order`) and which class a
    one-column output points to. The terminal prints it; the page escapes it."""
    order = config.class_order
    source = (
        "declared by classes = [...]" if config.class_order_from == "classes"
        else f"taken from {config.class_order_from}; classes = [...] declares it"
    )  # fmt: skip
    meaning = (
        f"a one-column output is read as evidence for {order[-1]!r}, which the binary "
        "metrics also take as positive"
        if len(order) == 2
        else "column j of a vector output stands for the j-th class"
    )
    return f"Class order {list(order)} ({source}): {meaning}."


_DATA_KEYS = {"name", "calibration", "dataset", "class_col"}


def _data_sources(raw: dict[str, Any], path: Path) -> tuple[list[DataSource], bool]:
    """``[data]`` (one data set) or ``[[data]]`` (several, each named), checked."""
    entry = _need(raw, "data", (dict, list), str(path))
    several = isinstance(entry, list)
    entries = _tables(raw, "data", path) if several else [entry]
    sources: list[DataSource] = []
    for i, table in enumerate(entries, start=1):
        where = f"{path}: [[data]] number {i}" if several else f"{path}: [data]"
        unknown = set(table) - _DATA_KEYS
        if unknown:
            raise ConfigError(
                f"{where} has unknown key(s) {sorted(unknown)}; known: "
                f"{', '.join(sorted(_DATA_KEYS))}"
            )
        if ("calibration" in table) == ("dataset" in table):
            raise ConfigError(
                f"{where} needs exactly one of 'calibration' (a CSV file) "
                f"or 'dataset' ({', '.join(DATASETS)})"
            )
        calibration = dataset = None
        if "calibration" in table:
            calibration = path.parent / _need(table, "calibration", str, where)
        else:
            dataset = _need(table, "dataset", str, where)
            if dataset not in DATASETS:
                raise ConfigError(
                    f"{where}.dataset: expected one of {', '.join(map(repr, DATASETS))}, "
                    f"found {dataset!r}"
                )
        class_col = _need(table, "class_col", str, where)
        if several:
            name = _need(table, "name", str, where)
            if not name.strip():
                raise ConfigError(f"{where}.name: expected a non-empty name, found {name!r}")
        elif "name" in table:
            name = _need(table, "name", str, where)
        else:
            name = calibration.stem if calibration is not None else str(dataset)
        if any(s.name == name for s in sources):
            raise ConfigError(f"{where}.name: {name!r} is used twice")
        key = f"[[data]] {name!r}" if several else "[data]"
        sources.append(DataSource(name, calibration, dataset, class_col, key))
    if several:
        files: dict[str, str] = {}
        for source in sources:
            stem = _safe(source.name).casefold()
            if stem in files:
                raise ConfigError(
                    f"{path}: [[data]] {source.name!r} and {files[stem]!r} would share file "
                    "names (names are reduced to letters, digits, - and _, ignoring case); "
                    "rename one"
                )
            files[stem] = source.name
    return sources, several


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
