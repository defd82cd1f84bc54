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
def _classes_of(x: Any) -> list[str]:
    from rpy2 import rinterface as ri

    value = x.do_slot("class") if "class" in x.list_attrs() else ri.NULL
    return [] if value is ri.NULL else list(value)


def _py(x: Any) -> Any:
    """An rinterface object as Python: None, DataFrame, dict/list, numpy array, or dict."""
    from rpy2 import rinterface as ri
    from rpy2.robjects import conversion, default_converter, numpy2ri, pandas2ri

    if x is ri.NULL:
        return None
    if isinstance(x, ri.ListSexpVector):
        if "data.frame" in _classes_of(x):
            with conversion.localconverter(default_converter + pandas2ri.converter):
                frame = conversion.get_conversion().rpy2py(x)
            automatic = [str(i) for i in range(1, len(frame) + 1)]
            if [str(i) for i in frame.index] == automatic:  # R's default row names
                frame = frame.reset_index(drop=True)
            return frame
        items = [_py(v) for v in x]
        names = x.names
        if names is ri.NULL:
            return items
        return dict(zip(list(names), items, strict=True))
    with conversion.localconverter(default_converter + numpy2ri.converter):
        array = np.asarray(conversion.get_conversion().rpy2py(x))
    names = x.names if hasattr(x, "names") else ri.NULL
    if names is not ri.NULL and "dim" not in x.list_attrs():
        return dict(zip(list(names), array.tolist(), strict=True))  # a named vector
    return array


def _scalar(value: Any, name: str, kind: type = float) -> Any:
    if value is None:
        return None
    array = np.atleast_1d(value)
    if array.size != 1:
        raise ValueError(f"{name} must be a single value, found {array.size} values")
    item = array[0].item() if hasattr(array[0], "item") else array[0]
    if kind is int:
        if float(item) != int(float(item)):
            raise ValueError(f"{name} must be a whole number, found {item!r}")
        return int(float(item))
    return kind(item)


def _strings(value: Any) -> list[str] | None:
    return None if value is None else [str(v) for v in np.atleast_1d(value)]


def _matrix(parts: Mapping[str, Any], kind: str) -> Any:
    """``list(values, decisions, classes)`` from .yw_matrix() as a yieldwise matrix."""
    from .confusion import ConfusionMatrix
    from .utility import UtilityMatrix

    values = np.asarray(parts["values"], dtype=float)
    labels = {
        "decisions": _strings(parts.get("decisions")),
        "classes": _strings(parts.get("classes")),
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
    from rpy2 import robjects as ro

    return ro.r["factor"](
        ro.StrVector([str(v) for v in values]), levels=ro.StrVector([str(x) for x in levels])
    )


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
        np.asarray(values, dtype=float), decisions=_strings(decisions), classes=_strings(classes)
    )
    return _r_matrix(u.values, u.decisions, u.classes, ("decision", "class"))


def _confusion(truth: Any, decisions: Any, classes: Any, decision_set: Any) -> Any:
    from .confusion import ConfusionMatrix

    cm = ConfusionMatrix.from_labels(
        np.asarray(_strings(truth["values"]), dtype=object),
        np.asarray(_strings(decisions["values"]), dtype=object),
        classes=_strings(classes),
        decisions_set=_strings(decision_set),
    )
    return _r_matrix(cm.counts, cm.decisions, cm.classes, ("decision", "class"))


def _yield(confusion: Any, utility: Any) -> float:
    from .yields import utility_yield

    return utility_yield(_matrix(confusion, "confusion"), _matrix(utility, "utility"))


def _metrics(confusion: Any, positive: Any) -> pd.DataFrame:
    import inspect

    from . import metrics

    cm = _matrix(confusion, "confusion")
    if positive is not None:
        positive = _scalar(positive, "positive", str)
        if positive not in [str(c) for c in cm.classes]:
            raise ValueError(
                f"positive must be one of the classes {list(cm.classes)}, found {positive!r}"
            )
    rows = []
    for name, function in metrics.CONFUSION_METRICS.items():
        kwargs = {}
        if positive is not None and "positive" in inspect.signature(function).parameters:
            kwargs["positive"] = positive
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
        metrics=_strings(metrics),
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
    if isinstance(components, np.ndarray) and components.dtype.kind in "US":
        components = _scalar(components, "n_components", str)
    elif components is not None:
        components = [int(k) for k in np.atleast_1d(components)]
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
    labels = np.asarray(_strings(truth["values"]), dtype=object)
    transducer.fit(outputs, labels, class_labels=_strings(classes))
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


def _decide_probabilities(probabilities: Any, utility: Any) -> Any:
    from .decision import decide

    u = _matrix(utility, "utility")
    return _r_factor(decide(np.asarray(probabilities, dtype=float), u), u.decisions)


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
    vectors as numpy arrays, named vectors and lists as dicts."""
    ro = start_r()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"read_rds: no such file {path}")
    return _py(ro.r["readRDS"](str(path)))


def write_rds(obj: Any, path: str | Path) -> Path:
    """Write ``obj`` as an R ``.rds`` file: DataFrames as data.frames (categoricals as
    factors), UtilityMatrix/ConfusionMatrix as matrices with dimnames, dicts as named
    lists, arrays and scalars as vectors."""
    from .confusion import ConfusionMatrix
    from .utility import UtilityMatrix

    ro = start_r()

    def convert(value: Any) -> Any:
        if isinstance(value, UtilityMatrix | ConfusionMatrix):
            data = value.values if isinstance(value, UtilityMatrix) else value.counts
            return _r_matrix(data, value.decisions, value.classes, ("decision", "class"))
        if isinstance(value, pd.Series):
            if isinstance(value.dtype, pd.CategoricalDtype):
                return _r_factor(value.astype(str), value.cat.categories)
            return _r(value.to_numpy())
        if isinstance(value, Mapping):
            return ro.ListVector({str(k): convert(v) for k, v in value.items()})
        return _r(value)

    path = Path(path)
    ro.r["saveRDS"](convert(obj), str(path))
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
