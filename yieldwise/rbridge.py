"""yieldwise from R, through rpy2: ``yw_`` functions in the embedded R.

:func:`install` defines, in the running embedded R, the functions ``yw_utility_matrix``,
``yw_confusion``, ``yw_yield``, ``yw_metrics``, ``yw_audit``, ``yw_fit``, ``yw_predict``,
``yw_decide``, ``yw_long_run_utility``, ``yw_compare``, ``yw_save``, ``yw_load``,
``yw_report`` and ``yw_help``. Their R side (``yieldwise/R/yieldwise.R``) checks R
inputs (NAs are reported by column and row) and calls one Python function each; R
objects go in and R objects come out:

* ``data.frame`` and factors <-> pandas, factor levels kept as categories;
* numeric matrices with ``dimnames`` (rows decisions, columns classes) <->
  :class:`~yieldwise.UtilityMatrix` / :class:`~yieldwise.ConfusionMatrix`;
* posterior draws -> a ``data.frame`` with ``.chain``, ``.iteration`` and ``.draw``,
  made a ``posterior::draws_df`` when the R package posterior is installed;
* a fitted transducer -> a handle (class ``yw_transducer``) whose Python object lives
  in this module until R garbage-collects the handle.

Every conversion uses rpy2 *local* converters; nothing is activated globally. A Python
exception reaches R as an R error of class ``yieldwise_error`` with the same message;
Python warnings (such as sampler diagnostics) reach R as R warnings.

From a Jupyter notebook::

    from yieldwise import rbridge
    rbridge.install()
    %load_ext rpy2.ipython

and then ``%%R`` cells call ``yw_fit(...)`` and the other functions. From a shell,
``yieldwise r script.R [args]`` runs an R script with the functions defined.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import sys
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["install", "read_rds", "write_rds", "run_script", "start_r", "R_FUNCTIONS"]

#: The functions :func:`install` defines in R.
R_FUNCTIONS = (
    "yw_utility_matrix",
    "yw_confusion",
    "yw_yield",
    "yw_metrics",
    "yw_audit",
    "yw_fit",
    "yw_predict",
    "yw_decide",
    "yw_long_run_utility",
    "yw_compare",
    "yw_save",
    "yw_load",
    "yw_report",
    "yw_help",
)

# Fitted transducers handed to R, by key; an R finalizer releases them.
_handles: dict[str, Any] = {}
# rternalized callables must outlive every R reference to them.
_keepalive: list[Any] = []
# Each installation's R-side state (its "alive" flag), for _shutdown.
_states: list[Any] = []


def start_r() -> Any:
    """Import rpy2 (and start the embedded R), or say what to install.

    R's start-up prepends its library folders (and the system's) to ``LD_LIBRARY_PATH``
    in this process's environment, for R's own child processes. This process's loader
    read the variable when it started, so nothing changes here; but every Python process
    started afterwards (a "processes" pool, a Dask worker, PyStan's build) would load the
    system's libpython before its own interpreter's and fail to import ``ssl`` (measured:
    "undefined symbol: _PyModule_Add"). The variable is restored once R is up.
    """
    import os

    before = os.environ.get("LD_LIBRARY_PATH")
    try:
        import rpy2.robjects as ro
    except ImportError as exc:  # rpy2 missing, or R missing/unusable under it
        raise ImportError(
            "the R bridge needs R and rpy2: install R (Debian: apt-get install r-base-core "
            f"r-base-dev) and then pip install 'rpy2<3.6' ({exc})"
        ) from exc
    finally:
        if before is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = before
    return ro


# ----------------------------------------------------------- R -> Python
# R's NA_integer_ and logical NA are both INT_MIN, which is no valid R integer.
_NA_INTEGER = -(2**31)


def _classes_of(x: Any) -> list[str]:
    from rpy2 import rinterface as ri

    value = x.do_slot("class") if "class" in x.list_attrs() else ri.NULL
    return [] if value is ri.NULL else list(value)


def _dims(x: Any) -> tuple[int, ...] | None:
    return tuple(int(d) for d in x.do_slot("dim")) if "dim" in x.list_attrs() else None


def _text(values: Any) -> list[str | None]:
    """An R character vector as Python strings, ``NA`` as None."""
    from rpy2 import rinterface as ri

    return [None if v is ri.NA_Character else str(v) for v in values]


def _buffer(x: Any, dtype: Any) -> np.ndarray:
    """A copy of an R vector's data (R may free its memory; an empty one has no view)."""
    return np.array(x.memoryview(), dtype=dtype) if len(x) else np.empty(0, dtype=dtype)


def _atomic(x: Any) -> Any:
    """An R atomic vector (or matrix) as numpy, with R's NAs as missing values.

    rpy2's numpy converter keeps R's NA sentinels (INT_MIN for integers and logicals,
    an ``NA_character_`` object for text), which look like valid data. Here: doubles
    keep NA as NaN; integers and logicals without NA are int32 and bool arrays, with NA
    a pandas ``Int32``/``boolean`` array holding ``pd.NA`` (a matrix: float with NaN,
    and object with ``pd.NA`` for logicals); text NA is None; a factor is a
    ``pandas.Categorical`` with its levels (NA as NaN).
    """
    from rpy2 import rinterface as ri
    from rpy2.robjects import conversion, default_converter, numpy2ri

    dims = _dims(x)

    def shaped(values: np.ndarray) -> np.ndarray:
        return values if dims is None else values.reshape(dims, order="F")

    if isinstance(x, ri.IntSexpVector) and "factor" in _classes_of(x):
        codes = _buffer(x, np.int64)
        codes = np.where(codes == _NA_INTEGER, -1, codes - 1)
        levels = [str(v) for v in x.do_slot("levels")]
        ordered = "ordered" in _classes_of(x)
        return pd.Categorical.from_codes(codes, categories=levels, ordered=ordered)
    if isinstance(x, ri.IntSexpVector | ri.BoolSexpVector):
        raw = _buffer(x, np.int32)
        missing = raw == _NA_INTEGER
        logical = isinstance(x, ri.BoolSexpVector)
        values = raw.astype(bool) if logical else raw
        if not missing.any():
            return shaped(values)
        if dims is None:
            if logical:
                return pd.arrays.BooleanArray(values & ~missing, missing)
            return pd.arrays.IntegerArray(np.where(missing, 0, raw), missing)
        out = values.astype(object) if logical else values.astype(float)
        out[missing] = pd.NA if logical else np.nan
        return shaped(out)
    if isinstance(x, ri.FloatSexpVector):
        return shaped(_buffer(x, float))
    if isinstance(x, ri.StrSexpVector):
        text = _text(x)
        if None in text:
            return shaped(np.array(text, dtype=object))
        return shaped(np.array(text, dtype=str))
    with conversion.localconverter(default_converter + numpy2ri.converter):
        return np.asarray(conversion.get_conversion().rpy2py(x))


def _named(names: Any, items: list[Any]) -> dict[str, Any]:
    """R names and values as a dict; refuses names a dict would lose (NA, duplicated)."""
    keys = _text(names)
    if None in keys:
        raise ValueError(
            f"the R object's names hold NA (at position {keys.index(None) + 1}): a Python "
            "dict needs a name for every element; name every element in R first"
        )
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(
            f"the R object has duplicated names {repeated}: a Python dict keeps one value "
            "per name and would drop the others; give every element its own name in R "
            "first (e.g. names(x) <- make.unique(names(x)))"
        )
    return dict(zip(keys, items, strict=True))


def _frame(x: Any) -> pd.DataFrame:
    """An R data.frame as pandas: factors as categoricals, NAs as missing values."""
    from rpy2 import rinterface as ri
    from rpy2.robjects import conversion, default_converter, pandas2ri

    with conversion.localconverter(default_converter + pandas2ri.converter):
        frame = conversion.get_conversion().rpy2py(x)
    if frame.shape[1] == len(x):  # pandas2ri keeps INT_MIN and NA_character_ as data
        for position, column in enumerate(x):
            plain = isinstance(column, ri.IntSexpVector | ri.BoolSexpVector | ri.StrSexpVector)
            if plain and "factor" not in _classes_of(column) and _dims(column) is None:
                frame.isetitem(position, _atomic(column))
    automatic = [str(i) for i in range(1, len(frame) + 1)]
    if [str(i) for i in frame.index] == automatic:  # R's default row names
        frame = frame.reset_index(drop=True)
    return frame


def _py(x: Any) -> Any:
    """An rinterface object as Python: None, DataFrame, dict/list, numpy array, or dict.

    R's NAs become missing values (NaN, None, ``pd.NA``; see :func:`_atomic`), never a
    sentinel number or text; logicals become bool; names that a dict would lose (NA,
    duplicated) are refused.
    """
    from rpy2 import rinterface as ri

    if x is ri.NULL:
        return None
    if isinstance(x, ri.ListSexpVector):
        if "data.frame" in _classes_of(x):
            return _frame(x)
        items = [_py(v) for v in x]
        names = x.names
        if names is ri.NULL:
            return items
        return _named(names, items)
    array = _atomic(x)
    names = x.names if hasattr(x, "names") else ri.NULL
    if names is not ri.NULL and "dim" not in x.list_attrs():
        return _named(names, list(array.tolist()))  # a named vector
    return array


def _is_missing(item: Any) -> bool:
    if item is None or item is pd.NA:
        return True
    return isinstance(item, float | np.floating) and bool(np.isnan(item))


def _scalar(value: Any, name: str, kind: type = float) -> Any:
    """One value of an R argument (NULL: None); NA, and Inf for whole numbers, refused."""
    if value is None:
        return None
    if isinstance(value, pd.api.extensions.ExtensionArray):
        value = value.to_numpy(dtype=object, na_value=None)
    array = np.atleast_1d(value)
    if array.size != 1:
        raise ValueError(f"{name} must be a single value, found {array.size} values")
    item = array.flat[0]
    item = item.item() if hasattr(item, "item") else item
    if _is_missing(item):
        expected = {int: "a whole number", str: "text", bool: "TRUE or FALSE"}.get(kind, "a number")
        raise ValueError(
            f"{name} must be {expected}, found NA (a missing value); give a value, or leave "
            "the argument out for its default"
        )
    if kind is int:
        if isinstance(item, str):
            raise ValueError(f"{name} must be a whole number, found the text {item!r}")
        number = float(item)
        if not np.isfinite(number) or number != int(number):
            raise ValueError(f"{name} must be a finite whole number, found {item!r}")
        return int(number)
    return kind(item)


def _strings(value: Any, name: str) -> list[str] | None:
    """Labels from R as text (R NULL: None); a missing label (NA) is refused."""
    if value is None:
        return None
    if isinstance(value, pd.api.extensions.ExtensionArray):  # a factor, NAs as pd.NA
        value = np.asarray(value, dtype=object)
    items = list(np.atleast_1d(value).ravel().tolist())
    for position, item in enumerate(items, start=1):
        if _is_missing(item):
            raise ValueError(
                f"{name} has a missing value (NA) at position {position}; every label must be given"
            )
    return [str(v) for v in items]


def _matrix(parts: Mapping[str, Any], kind: str) -> Any:
    """``list(values, decisions, classes)`` from .yw_matrix() as a yieldwise matrix."""
    from .confusion import ConfusionMatrix
    from .utility import UtilityMatrix

    values = np.asarray(parts["values"], dtype=float)
    what = _scalar(parts.get("what"), "what", str) or kind
    labels = {
        "decisions": _strings(parts.get("decisions"), f"'{what}' row names (the decisions)"),
        "classes": _strings(parts.get("classes"), f"'{what}' column names (the classes)"),
    }
    cls = UtilityMatrix if kind == "utility" else ConfusionMatrix
    return cls(values, **labels)


def _utilities(parts: Any) -> Any:
    if "values" in parts and not isinstance(parts["values"], Mapping):
        return _matrix(parts, "utility")
    return {name: _matrix(p, "utility") for name, p in parts.items()}


# ----------------------------------------------------------- Python -> R
def _r(value: Any) -> Any:
    """A Python result as an R object (data.frames, vectors, named lists)."""
    from rpy2 import rinterface as ri
    from rpy2 import robjects as ro
    from rpy2.robjects import conversion, default_converter, numpy2ri, pandas2ri

    if value is None:
        return ri.NULL
    if isinstance(value, ri.Sexp):
        return value
    if isinstance(value, pd.DataFrame):
        if isinstance(value.index, pd.RangeIndex):  # R's row names count from 1
            value = value.set_axis(pd.RangeIndex(1, len(value) + 1), axis=0)
        with conversion.localconverter(default_converter + pandas2ri.converter):
            return conversion.get_conversion().py2rpy(value)
    if isinstance(value, Mapping):
        return ro.ListVector({str(k): _r(v) for k, v in value.items()})
    if isinstance(value, str):
        return ro.StrVector([value])
    if isinstance(value, bool | np.bool_):
        return ro.BoolVector([bool(value)])
    if isinstance(value, int | float | np.integer | np.floating):
        return ro.FloatVector([float(value)])
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return ro.StrVector(list(value))
    with conversion.localconverter(default_converter + numpy2ri.converter):
        return conversion.get_conversion().py2rpy(np.asarray(value))


def _r_matrix(
    values: np.ndarray, rows: Sequence[Any], columns: Sequence[Any], names: tuple[str, str]
) -> Any:
    from rpy2 import robjects as ro

    values = np.asarray(values, dtype=float)
    dimnames = ro.ListVector.from_length(2)
    dimnames[0] = ro.StrVector([str(r) for r in rows])
    dimnames[1] = ro.StrVector([str(c) for c in columns])
    dimnames.names = ro.StrVector(list(names))
    return ro.r["matrix"](
        ro.FloatVector(values.ravel(order="F")),
        nrow=values.shape[0],
        ncol=values.shape[1],
        dimnames=dimnames,
    )


def _r_factor(values: Sequence[Any], levels: Sequence[Any]) -> Any:
    """An R factor; missing values (None, NaN, ``pd.NA``) are NA, never a level's text."""
    from rpy2 import robjects as ro

    text = [ro.NA_Character if _is_missing(v) else str(v) for v in values]
    return ro.r["factor"](ro.StrVector(text), levels=ro.StrVector([str(x) for x in levels]))


def _r_error(exc: BaseException) -> Any:
    from rpy2 import robjects as ro

    error = ro.ListVector(
        {"message": ro.StrVector([str(exc)]), "type": ro.StrVector([type(exc).__name__])}
    )
    error.rclass = ro.StrVector(["yw_python_error"])
    return error


def _entry(function: Callable[..., Any]) -> Any:
    """``function(**R list)`` as an R closure; failures come back as error values."""
    from rpy2 import rinterface as ri
    from rpy2 import robjects as ro

    def call(arguments: Any) -> Any:
        # The boundary to R: every Python failure must become an R condition (with its
        # message) rather than escape into rpy2's generic handler.
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = _r(function(**_py(arguments)))
        except Exception as exc:
            return _r_error(exc)
        if caught:
            messages = list(dict.fromkeys(str(w.message) for w in caught))
            result = ro.r["structure"](result, yw_warnings=ro.StrVector(messages))
        return result

    closure = ri.rternalize(call)
    _keepalive.append(closure)
    return closure


# ----------------------------------------------------------- the functions
def _handle(key: str) -> Any:
    try:
        return _handles[key]
    except KeyError:
        raise ValueError(
            "this transducer handle is no longer valid (its Python object was released); "
            "fit or load it again"
        ) from None


def _new_handle(transducer: Any) -> str:
    key = uuid.uuid4().hex
    _handles[key] = transducer
    return key


def _utility_matrix(values: Any, decisions: Any, classes: Any) -> Any:
    from .utility import UtilityMatrix

    u = UtilityMatrix(
        np.asarray(values, dtype=float),
        decisions=_strings(decisions, "decisions"),
        classes=_strings(classes, "classes"),
    )
    return _r_matrix(u.values, u.decisions, u.classes, ("decision", "class"))


def _confusion(truth: Any, decisions: Any, classes: Any, decision_set: Any) -> Any:
    from .confusion import ConfusionMatrix

    cm = ConfusionMatrix.from_labels(
        np.asarray(_strings(truth["values"], "truth"), dtype=object),
        np.asarray(_strings(decisions["values"], "decisions"), dtype=object),
        classes=_strings(classes, "classes"),
        decisions_set=_strings(decision_set, "decision_set"),
    )
    return _r_matrix(cm.counts, cm.decisions, cm.classes, ("decision", "class"))


def _yield(confusion: Any, utility: Any) -> float:
    from .yields import utility_yield

    return utility_yield(_matrix(confusion, "confusion"), _matrix(utility, "utility"))


def _metrics(confusion: Any, positive: Any, average: Any = None) -> pd.DataFrame:
    """The confusion-matrix metrics as a table; ``positive`` or ``average`` reach the
    one-vs-rest metrics (precision, recall, ...). On more than two classes with neither,
    those metrics are NaN and a warning (an R warning) says which argument to give."""
    import inspect

    from . import metrics

    cm = _matrix(confusion, "confusion")
    if positive is not None:
        positive = _scalar(positive, "positive", str)
        if positive not in [str(c) for c in cm.classes]:
            raise ValueError(
                f"positive must be one of the classes {list(cm.classes)}, found {positive!r}"
            )
    if average is not None:
        average = _scalar(average, "average", str)
        if average not in ("macro", "weighted", "micro"):
            raise ValueError(f"average must be 'macro', 'weighted' or 'micro', found {average!r}")
        if positive is not None:
            raise ValueError(
                "give either positive (one class against the rest) or average, not both"
            )
    one_vs_rest_needs_choice = positive is None and average is None and len(cm.classes) > 2
    undecided = []
    rows = []
    for name, function in metrics.CONFUSION_METRICS.items():
        parameters = inspect.signature(function).parameters
        kwargs = {}
        if positive is not None and "positive" in parameters:
            kwargs["positive"] = positive
        if average is not None and "average" in parameters:
            kwargs["average"] = average
        if one_vs_rest_needs_choice and "average" in parameters:
            undecided.append(name)
            value = float("nan")
        else:
            try:
                value = float(function(cm, **kwargs))
            except metrics.UndefinedMetricError:
                value = float("nan")
        rows.append(
            {
                "metric": name,
                "value": value,
                "admissible": bool(function.admissible),
                "why": str(function.admissibility),
            }
        )
    if undecided:
        warnings.warn(
            f"{', '.join(undecided)} are NA: on {len(cm.classes)} classes "
            f"{[str(c) for c in cm.classes]} they need positive = (one class against the "
            "rest) or average = ('macro', 'weighted' or 'micro')",
            UserWarning,
            stacklevel=2,
        )
    return pd.DataFrame(rows)


def _audit(
    metrics: Any, utility_prior: Any, error_sd: Any, n_pairs: Any, seed: Any
) -> pd.DataFrame:
    from .audit import rank_disagreement

    prior = utility_prior
    if isinstance(prior, Mapping):
        prior = _matrix(prior, "utility")
    else:
        prior = _scalar(prior, "utility_prior", str)
    table = rank_disagreement(
        metrics=_strings(metrics, "metrics"),
        utility_prior=prior,
        error_sd=[float(s) for s in np.atleast_1d(error_sd)],
        n_pairs=_scalar(n_pairs, "n_pairs", int),
        seed=_scalar(seed, "seed", int),
    )
    table.attrs = {}
    return table.reset_index(drop=True)


def _fit(
    outputs: pd.DataFrame,
    truth: Any,
    classes: Any,
    n_components: Any,
    chains: Any,
    warmup: Any,
    draws: Any,
    seed: Any,
    backend: Any,
    progress: Any,
    kernel_tail_cut: Any = None,
    class_reduction: Any = "auto",
    likelihood_bins: Any = "auto",
) -> str:
    from .transducer import Transducer
    from .transducer.stan_data import KERNEL_TAIL_CUT

    cut = _scalar(kernel_tail_cut, "kernel_tail_cut")
    reduction = _scalar(class_reduction, "class_reduction", str)  # R NULL: None, never reduce
    # R NULL: None, the exact likelihood; "auto"; or a number, a fraction of the kernels' width
    bins = _scalar(likelihood_bins, "likelihood_bins", str)
    if bins is not None and bins != "auto":
        with contextlib.suppress(ValueError):  # else the Transducer names what it expects
            bins = float(bins)

    components = n_components
    if isinstance(components, np.ndarray) and components.dtype.kind in "USO":  # text
        components = _scalar(components, "n_components", str)
    elif components is not None:  # numbers, one per class or one for all (NA refused)
        counts = np.atleast_1d(np.asarray(components, dtype=object))
        names = (
            ["n_components"]
            if len(counts) == 1
            else [f"n_components[{i}]" for i in range(1, len(counts) + 1)]
        )
        components = [_scalar(k, name, int) for k, name in zip(counts, names, strict=True)]
        components = components[0] if len(components) == 1 else components
    transducer = Transducer(
        n_components=components,
        chains=_scalar(chains, "chains", int),
        warmup=_scalar(warmup, "warmup", int),
        draws=_scalar(draws, "draws", int),
        seed=_scalar(seed, "seed", int),
        backend=_scalar(backend, "backend", str),
        progress=bool(_scalar(progress, "progress", bool)),
        kernel_tail_cut=KERNEL_TAIL_CUT if cut is None else cut,
        class_reduction=reduction,
        likelihood_bins=bins,
    )
    labels = np.asarray(_strings(truth["values"], "the class column"), dtype=object)
    transducer.fit(outputs, labels, class_labels=_strings(classes, "classes"))
    return _new_handle(transducer)


def _predict(key: str, outputs: pd.DataFrame, prob: Any, prevalences: Any) -> pd.DataFrame:
    transducer = _handle(_scalar(key, "key", str))
    band = transducer.predict_interval(outputs, prob=_scalar(prob, "prob"), prevalences=prevalences)
    classes = [str(c) for c in transducer.classes_]
    n, k = band["mean"].shape
    return pd.DataFrame(
        {
            "item": np.repeat(np.arange(1, n + 1), k),
            "class": pd.Categorical(np.tile(classes, n), categories=classes),
            "probability": band["mean"].values.ravel(),
            "lower": band["lower"].values.ravel(),
            "upper": band["upper"].values.ravel(),
        }
    )


def _decide(key: str, outputs: pd.DataFrame, utility: Any, prevalences: Any) -> Any:
    transducer = _handle(_scalar(key, "key", str))
    u = _matrix(utility, "utility")
    chosen = transducer.decide(outputs, u, prevalences=prevalences)
    return _r_factor(chosen, u.decisions)


def _decide_probabilities(probabilities: Any, classes: Any, utility: Any) -> Any:
    """Decisions for a probability matrix whose column names are classes: matched to the
    utility's classes by name (never by position); unknown or missing classes refused."""
    from .decision import decide

    u = _matrix(utility, "utility")
    if classes is None:
        raise ValueError(
            "'probabilities' must name its columns by class (colnames), so that they are "
            "matched to the utility's classes by name; set colnames(probabilities) <- "
            f"{[str(c) for c in u.classes]} (in the order of its columns)"
        )
    names = _strings(classes, "'probabilities' column names (the classes)")
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise ValueError(
            f"'probabilities' has duplicated column names {repeated}; name each column by "
            "its own class"
        )
    values = np.asarray(probabilities, dtype=float)
    if values.ndim != 2 or values.shape[1] != len(names):
        raise ValueError(
            f"'probabilities' must be a matrix with one named column per class, found shape "
            f"{values.shape} and column names {names}"
        )
    frame = pd.DataFrame(values, columns=pd.Index(names, dtype=object))
    if set(names) != {str(c) for c in u.classes}:
        raise ValueError(
            f"'probabilities' has columns {names}, but the utility matrix has classes "
            f"{[str(c) for c in u.classes]}; give one column per class, named by class"
        )
    return _r_factor(decide(frame, u), u.decisions)


def _draws_frame(arrays: Mapping[str, Any]) -> pd.DataFrame:
    """(chain, draw) arrays -> one row per draw with .chain, .iteration and .draw (1-based)."""
    first = np.asarray(next(iter(arrays.values())))
    chains, draws = first.shape
    frame = pd.DataFrame({name: np.asarray(v).ravel() for name, v in arrays.items()})
    frame[".chain"] = np.repeat(np.arange(1, chains + 1), draws)
    frame[".iteration"] = np.tile(np.arange(1, draws + 1), chains)
    frame[".draw"] = np.arange(1, chains * draws + 1)
    return frame


def _per_matrix(name: str, values: Any) -> dict[str, np.ndarray]:
    """One (chain, draw) array per matrix: ``name`` alone, or ``name[matrix]`` for a batch."""
    if "matrix" in values.dims:
        return {f"{name}[{m}]": values.sel(matrix=m).values for m in values["matrix"].values}
    return {name: values.values}


def _long_run_utility(key: str, utility: Any, rule: Any, rescale: Any, prevalences: Any) -> Any:
    from .long_run import long_run_utility

    transducer = _handle(_scalar(key, "key", str))
    values = long_run_utility(
        transducer,
        _utilities(utility),
        rule=_scalar(rule, "rule", str),
        rescale=bool(_scalar(rescale, "rescale", bool)),
        prevalences=prevalences,
    )
    return _draws_frame(_per_matrix("long_run_utility", values))


def _compare(keys: Mapping[str, Any], utility: Any, rule: Any, prevalences: Any) -> dict[str, Any]:
    from .compare import compare

    fits = {name: _handle(_scalar(key, "key", str)) for name, key in keys.items()}
    comparison = compare(
        fits, _utilities(utility), rule=_scalar(rule, "rule", str), prevalences=prevalences
    )
    summary = comparison.summary()
    names = list(comparison.names)
    batched = "matrix" in comparison.utilities.dims
    matrices = list(comparison.utilities["matrix"].values) if batched else [None]
    superiority = {}
    for m in matrices:
        table = comparison.prob_superiority(matrix=m)
        superiority[str(m)] = _r_matrix(table.values, names, names, ("classifier", "versus"))
    best = pd.DataFrame(
        [
            {"classifier": n, **({"matrix": str(m)} if batched else {}), "prob_best": p}
            for m in matrices
            for n, p in comparison.prob_best(matrix=m).items()
        ]
    )
    draws: dict[str, np.ndarray] = {}
    for n in names:
        draws.update(_per_matrix(n, comparison.utilities[n]))
    return {
        "summary": summary,
        "superiority": superiority if batched else superiority[str(None)],
        "prob_best": best,
        "draws": _draws_frame(draws),
    }


def _save(key: str, path: Any) -> str:
    return str(_handle(_scalar(key, "key", str)).save(_scalar(path, "path", str)))


def _load(path: Any) -> str:
    from .transducer import Transducer

    return _new_handle(Transducer.load(_scalar(path, "path", str)))


def _report(
    config: Any, out: Any, overwrite: Any, chains: Any, warmup: Any, draws: Any, quiet: Any,
    backend: Any = None,
) -> str:  # fmt: skip
    from .report import load_config, run_report

    overrides: dict[str, Any] = {
        name: _scalar(value, name, int)
        for name, value in (("chains", chains), ("warmup", warmup), ("draws", draws))
        if value is not None
    }
    if backend is not None:
        overrides["backend"] = _scalar(backend, "backend", str)
    loud = not bool(_scalar(quiet, "quiet", bool))
    folder = run_report(
        load_config(_scalar(config, "config", str)),
        _scalar(out, "out", str),
        overrides,
        overwrite=bool(_scalar(overwrite, "overwrite", bool)),
        log=(lambda message: print(message, file=sys.stderr)) if loud else None,
    )
    return str(folder)


_PYTHON = {
    "utility_matrix": _utility_matrix,
    "confusion": _confusion,
    "yield": _yield,
    "metrics": _metrics,
    "audit": _audit,
    "fit": _fit,
    "output_columns": lambda key: [
        str(c) for c in _handle(_scalar(key, "key", str)).transform_.columns
    ],
    "describe": lambda key: repr(_handle(_scalar(key, "key", str))),
    "release": lambda key: _handles.pop(_scalar(key, "key", str), None) and None,
    "predict": _predict,
    "decide": _decide,
    "decide_probabilities": _decide_probabilities,
    "long_run_utility": _long_run_utility,
    "compare": _compare,
    "save": _save,
    "load": _load,
    "report": _report,
}


# ----------------------------------------------------------- public API
def install(envir: Any = None) -> list[str]:
    """Define the ``yw_`` functions in the embedded R.

    Parameters
    ----------
    envir : rpy2 environment, optional
        Where to define them; R's global environment by default (where ``%%R`` cells
        and ``source()``-d scripts look).

    Returns
    -------
    list of str
        The names defined (:data:`R_FUNCTIONS`).
    """
    ro = start_r()
    from rpy2 import rinterface as ri

    namespace = ro.r["new.env"](parent=ri.globalenv)
    namespace[".yw_py"] = ro.ListVector({name: _entry(fn) for name, fn in _PYTHON.items()})
    code = files("yieldwise").joinpath("R/yieldwise.R").read_text()
    ro.r["eval"](ro.r["parse"](text=code), envir=namespace)
    ro.r["registerS3method"](
        "print", "yw_transducer", namespace["print.yw_transducer"], envir=namespace
    )
    target = ri.globalenv if envir is None else envir
    for name in R_FUNCTIONS:
        target[name] = namespace[name]
    _states.append(namespace[".yw_state"])
    if len(_states) == 1:
        atexit.register(_shutdown)
    return list(R_FUNCTIONS)


def _shutdown() -> None:
    """At interpreter exit, while rpy2 still works: stop R finalizers from calling into
    Python, and release the Python side of every handle and closure."""
    from rpy2 import robjects as ro

    for state in _states:
        state["alive"] = ro.BoolVector([False])
    _handles.clear()
    _keepalive.clear()
    _states.clear()
    gc.collect()


def read_rds(path: str | Path) -> Any:
    """Read an R ``.rds`` file: data.frames as pandas (factors as categoricals),
    vectors as numpy arrays (a factor as a ``pandas.Categorical`` with its levels), named
    vectors and lists as dicts, unnamed lists as lists.

    R's NAs stay missing: NaN for doubles; None for text; integer and logical vectors with
    NA become pandas ``Int32``/``boolean`` arrays holding ``pd.NA`` (data.frame columns
    too; a matrix: float with NaN). Logicals are bool. Names that a dict would lose
    (duplicated, or NA) are a ValueError.
    """
    ro = start_r()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"read_rds: no such file {path}")
    return _py(ro.r["readRDS"](str(path)))


_INT_RANGE = (-(2**31) + 1, 2**31 - 1)  # R integers; -2**31 is NA_integer_
_EXACT_DOUBLE = 2**53


def _r_atomic(values: Sequence[Any], where: str) -> Any:
    """A 1-D sequence of scalars as an R vector of one type, missing values as NA.

    All bool: logical; all whole numbers: integer (double beyond R's integer range,
    refused beyond 2**53, which a double cannot hold exactly); numbers: double (NaN stays
    NaN); all text: character. None and ``pd.NA`` are NA (and NaN is NA among text).
    Anything else is a TypeError naming ``where``.
    """
    from rpy2 import robjects as ro

    items = [v.item() if isinstance(v, np.generic) else v for v in values]
    present = [v for v in items if not _is_missing(v)]
    if all(isinstance(v, bool) for v in present):
        na = ro.NA_Logical
        return ro.BoolVector([na if _is_missing(v) else v for v in items])
    if all(isinstance(v, str) for v in present):
        return ro.StrVector([ro.NA_Character if _is_missing(v) else v for v in items])
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)
    if not numbers:
        kinds = sorted({type(v).__name__ for v in present})
        raise TypeError(
            f"write_rds: {where} holds values of types {kinds}, which make no R vector; "
            "an R vector holds one of: bool, numbers, or text (None for NA). Convert them, "
            "or pass a dict/list to write an R list"
        )
    if all(isinstance(v, int) for v in present):
        if all(_INT_RANGE[0] <= v <= _INT_RANGE[1] for v in present):
            return ro.IntVector([ro.NA_Integer if _is_missing(v) else v for v in items])
        too_big = [v for v in present if abs(v) > _EXACT_DOUBLE]
        if too_big:
            raise ValueError(
                f"write_rds: {where} holds integers beyond 2**53 ({too_big[0]}), which R "
                "holds neither as integers nor exactly as doubles; write them as text"
            )
    return ro.FloatVector([ro.NA_Real if (v is None or v is pd.NA) else float(v) for v in items])


def _r_value(value: Any, where: str) -> Any:
    """A Python value as an R object for :func:`write_rds`; ``where`` names it in errors."""
    from rpy2 import rinterface as ri
    from rpy2 import robjects as ro

    from .confusion import ConfusionMatrix
    from .utility import UtilityMatrix

    if value is None:
        return ri.NULL
    if isinstance(value, UtilityMatrix | ConfusionMatrix):
        data = value.values if isinstance(value, UtilityMatrix) else value.counts
        return _r_matrix(data, value.decisions, value.classes, ("decision", "class"))
    if isinstance(value, pd.DataFrame):
        try:
            return _r(value)
        except (NotImplementedError, TypeError, ValueError) as exc:
            raise TypeError(
                f"write_rds: the DataFrame {where} has a column R cannot hold ({exc}); give "
                "each column one type: numbers, bool, text (None for NA) or a categorical"
            ) from exc
    if isinstance(value, pd.Series):
        if isinstance(value.dtype, pd.CategoricalDtype):
            return _r_factor(value.tolist(), value.cat.categories)
        return _r_atomic(value.tolist(), where)
    if isinstance(value, Mapping):
        keys = [str(k) for k in value]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise ValueError(
                f"write_rds: {where} has keys that are the same text {repeated} (R names "
                "are text); make the keys distinct"
            )
        return ro.ListVector({str(k): _r_value(v, f"{where}[{k!r}]") for k, v in value.items()})
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufcUSO":  # dates, times, raw bytes
            raise TypeError(
                f"write_rds: {where} is an array of dtype {value.dtype}, which has no R "
                "equivalent here; convert it to numbers or text first"
            )
        if value.ndim == 0:
            return _r_value(value.item(), where)
        if value.dtype.kind == "c":
            vector = ro.ComplexVector(value.ravel(order="F").tolist())
        else:
            vector = _r_atomic(value.ravel(order="F").tolist(), where)
        if value.ndim == 1:  # a vector, without a dim attribute
            return vector
        return ro.r["array"](vector, dim=ro.IntVector(list(value.shape)))
    if isinstance(value, str | bool | int | float | np.generic) or value is pd.NA:
        return _r_atomic([value], where)
    if isinstance(value, Sequence):
        scalars = (str, bool, int, float, np.generic, type(None), type(pd.NA))
        if all(isinstance(v, scalars) for v in value):
            return _r_atomic(list(value), where)
        return ro.r["list"](*[_r_value(v, f"{where}[{i}]") for i, v in enumerate(value)])
    raise TypeError(
        f"write_rds: {where} is a {type(value).__name__}, which has no R equivalent here; "
        "write DataFrames, Series, arrays, dicts, lists, numbers, text, None, or "
        "UtilityMatrix/ConfusionMatrix"
    )


def write_rds(obj: Any, path: str | Path) -> Path:
    """Write ``obj`` as an R ``.rds`` file.

    DataFrames become data.frames (categoricals as factors), UtilityMatrix and
    ConfusionMatrix matrices with dimnames, dicts named lists, Series, 1-D arrays and
    lists of scalars R vectors (no ``dim``), 2-D arrays matrices, scalars length-one
    vectors. bool becomes logical, whole numbers integer (double beyond R's integer
    range), other numbers double, text character; None, ``pd.NA`` (and NaN among text)
    become NA. Values with no R equivalent, or mixing types, are a TypeError naming
    where they are in ``obj``.
    """
    ro = start_r()
    converted = _r_value(obj, "obj")
    path = Path(path)
    ro.r["saveRDS"](converted, str(path))
    return path


def run_script(script: str | Path, args: Sequence[str] = ()) -> int:
    """Run an R script with the bridge installed; ``commandArgs(trailingOnly = TRUE)``
    returns ``args``. Returns 0, or 1 when the script stops with an error."""
    script = Path(script)
    if not script.is_file():
        raise FileNotFoundError(f"{script}: no such R script")
    ro = start_r()
    from rpy2.rinterface_lib.embedded import RRuntimeError

    install()
    trailing = ro.StrVector(list(args))
    everything = ro.StrVector(["R", f"--file={script}", "--args", *args])
    ro.globalenv["commandArgs"] = ro.r(
        "function(trailing, everything) function(trailingOnly = FALSE) "
        "if (trailingOnly) trailing else everything"
    )(trailing, everything)
    try:
        ro.r["source"](str(script), local=ro.globalenv)
    except RRuntimeError as exc:
        print(f"yieldwise r: {script}: {str(exc).strip()}", file=sys.stderr)
        return 1
    return 0
