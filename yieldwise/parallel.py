"""Many transducer fits at once: :func:`fit_many`, serially, on local processes or on Dask.

One transducer fit takes 20-80 s on two cores, so a sweep of 40 classifiers on three
data sets is hours on one machine. :func:`fit_many` runs such a batch on

* ``None`` / ``"serial"``: one fit after another in this process;
* ``"processes"``: a local pool of worker processes, as many as the cores hold fits
  (each fit runs its chains in parallel itself, so ``cores // chains`` workers; the
  machine is never oversubscribed). The workers are spawned: each imports the calling
  script afresh, so a script (not a notebook) must call :func:`fit_many` under
  ``if __name__ == "__main__":``, as for any spawned pool;
* any :class:`concurrent.futures.Executor` the caller made;
* a ``dask.distributed.Client`` (a laptop ``LocalCluster``, SLURM through
  dask-jobqueue, Kubernetes through dask-kubernetes) or a scheduler address
  ``"tcp://host:8786"`` (``pip install 'yieldwise[dask]'``).

What travels is data: each task's outputs and classes go out, and each fitted
transducer comes back as the bytes of its NetCDF file (:meth:`Transducer.save`),
never as pickled Stan objects. Every task gets a seed derived from one seed and the
task's name (:func:`task_seed`), so the same batch gives the same draws, draw for draw,
whichever executor runs it and in whatever order the tasks finish.

Examples
--------
>>> from yieldwise.parallel import task_seed
>>> task_seed(1, "forest"), task_seed(1, "forest") == task_seed(1, ("forest",))
(153882097, False)
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._validation import is_seed

if TYPE_CHECKING:
    from .transducer import Transducer

__all__ = [
    "DASK_EXTRA",
    "FitResults",
    "TaskDataError",
    "TaskError",
    "check_transducer_param",
    "check_transducer_params",
    "fit_many",
    "task_label",
    "task_seed",
    "transducer_from_bytes",
    "transducer_param_names",
    "transducer_to_bytes",
]

#: What to install for a Dask scheduler (named in the error when it is missing).
DASK_EXTRA = "pip install 'yieldwise[dask]'"
#: How often the waiting loop looks at the tasks (seconds); also bounds how long a
#: Ctrl-C waits before the batch is cancelled.
_POLL = 0.25
#: Seconds a finished pool worker gets to exit before it is killed with its processes.
_EXIT_GRACE = 10.0
#: Dask asks its scheduler which tasks are running at most this often (seconds).
_DASK_RUNNING_EVERY = 2.0

TaskName = Hashable


class TaskError(RuntimeError):
    """A task of :func:`fit_many` failed for a reason other than its data (the sampler,
    a worker lost too often); ``task`` is its name, the cause is chained."""

    def __init__(self, message: str, task: TaskName) -> None:
        super().__init__(message)
        self.task = task


class TaskDataError(ValueError):
    """A task of :func:`fit_many` failed because of its data or settings (a ValueError or
    TypeError in the fit, e.g. NaN outputs); ``task`` is its name, the cause is chained."""

    def __init__(self, message: str, task: TaskName) -> None:
        super().__init__(message)
        self.task = task


# --------------------------------------------------------------------------- seeds
def _name_key(name: TaskName) -> Any:
    """A task name as JSON-able data: str, int, or a list of them (from a tuple)."""
    if isinstance(name, tuple):
        return [_name_key(part) for part in name]
    if not _is_name_part(name):
        raise TypeError(
            f"task names must be str, int or tuples of them, found {name!r} of type "
            f"{type(name).__name__}"
        )
    return int(name) if isinstance(name, np.integer) else name


def _is_name_part(value: Any) -> bool:
    """Whether ``value`` may be (part of) a task name: text or an integer, not a bool."""
    return isinstance(value, str | int | np.integer) and not isinstance(value, bool | np.bool_)


def task_seed(seed: int, name: TaskName) -> int:
    """The seed of task ``name`` in a batch seeded with ``seed``: stable everywhere.

    The first 8 bytes of SHA-256 of the JSON text ``[seed, name]`` (a tuple name is a
    JSON list), reduced modulo ``2**31 - 1``: the same on every machine, process and
    Python version (unlike :func:`hash`, which is salted per process), and different
    for different names, so tasks never share a random stream by accident.

    Examples
    --------
    >>> task_seed(0, "a") != task_seed(0, "b") != task_seed(1, "a")
    True
    """
    if not is_seed(seed):
        raise ValueError(f"seed must be a non-negative integer, found {seed!r}")
    text = json.dumps([int(seed), _name_key(name)], ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % (2**31 - 1)


def task_label(name: TaskName) -> str:
    """A task name for messages: ``forest``, or ``site A / forest`` for a tuple."""
    if isinstance(name, tuple):
        return " / ".join(str(part) for part in name)
    return str(name)


# ----------------------------------------------------------------- serialisation
def transducer_to_bytes(transducer: Transducer) -> bytes:
    """The NetCDF file of :meth:`Transducer.save`, as bytes (what a worker sends back)."""
    with tempfile.TemporaryDirectory(prefix="yieldwise-") as folder:
        path = Path(folder) / "transducer.nc"
        transducer.save(path)
        return path.read_bytes()


def transducer_from_bytes(data: bytes) -> Transducer:
    """The transducer in :func:`transducer_to_bytes`'s bytes (:meth:`Transducer.load`)."""
    from .transducer import Transducer

    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes of a transducer file, found {type(data).__name__}")
    with tempfile.TemporaryDirectory(prefix="yieldwise-") as folder:
        path = Path(folder) / "transducer.nc"
        path.write_bytes(bytes(data))
        transducer = Transducer.load(path)
        # Load everything into memory: the file goes away with the folder.
        transducer.posterior_ = transducer.posterior_.load()
        return transducer


# -------------------------------------------------------------------- settings
#: The sampler's settings that ``check_sampler_arguments`` checks together (each one is
#: checked with the others at their defaults, so that an error names its own setting).
_SAMPLER_ARGUMENTS = ("chains", "warmup", "draws", "seed", "max_treedepth", "adapt_delta")


def _sampler_argument(name: str, value: Any) -> None:
    """One of :data:`_SAMPLER_ARGUMENTS`, by the rules of the fit (``Transducer._fit``):
    ``check_positive_int`` for ``chains``, ``is_seed`` for ``seed``, and every backend's
    ``check_sampler_arguments``."""
    from .backends._base import check_sampler_arguments
    from .transducer.sampler import SAMPLER_DEFAULTS

    if value is None and name in ("warmup", "draws", "adapt_delta", "max_treedepth", "seed"):
        return  # None: each fit takes the default of its output dimensions (seed: drawn)
    defaults = {
        "chains": SAMPLER_DEFAULTS.chains, "warmup": SAMPLER_DEFAULTS.warmup_for(1),
        "draws": SAMPLER_DEFAULTS.draws_for(1), "seed": None,
        "max_treedepth": SAMPLER_DEFAULTS.max_treedepth_for(1),
        "adapt_delta": SAMPLER_DEFAULTS.adapt_delta_for(1),
    }  # fmt: skip
    try:
        check_sampler_arguments(**{**defaults, name: value})
    except TypeError:  # int(None), None < 1, ...: not a number at all
        kind = "a number in (0, 1)" if name == "adapt_delta" else "an integer"
        example = 1 if name == "seed" else defaults[name]
        raise TypeError(
            f"{name} must be {kind} such as {example!r}, found {value!r} of type "
            f"{type(value).__name__}"
        ) from None
    if name == "chains":  # the fit counts chains with check_positive_int (2.0 is refused)
        from ._validation import check_positive_int

        check_positive_int(value, "chains")
    if name == "seed" and not is_seed(value, upper=2**31):  # the fit's rule for seeds
        raise ValueError(f"seed must be an integer in [0, 2**31) or None, found {value!r}")


def _prior(value: Any) -> None:
    """``prior``, by the fit's own rule (``stan_data.check_prior``, which
    ``build_stan_data`` applies)."""
    from .transducer.stan_data import check_prior

    check_prior(value)


def _class_reduction(value: Any) -> None:
    """``class_reduction``, by ``choose_reduction`` (the fit's only rule for it) on a
    probability vector of three classes, which every valid setting accepts."""
    from .transducer.reduction import choose_reduction

    labels = ("a", "b", "c")
    choose_reduction(value, np.full((3, 3), 1 / 3), labels, labels, ("simplex",), False)


def _backend(value: Any) -> None:
    from .backends import backend_names

    if value not in backend_names():
        raise ValueError(f"backend must be one of {backend_names()}, found {value!r}")


def _transducer_checks() -> dict[str, Callable[[Any], Any] | None]:
    """Each Transducer constructor parameter -> the fit's own check of its value, or None
    for the settings only the data can check (``output_transform`` and ``resolution``,
    checked with the outputs at fit) and ``progress`` (any value: read as true or false).
    """
    from .transducer.estimator import check_components, check_likelihood_bins
    from .transducer.stan_data import check_tail_cut

    checks: dict[str, Callable[[Any], Any] | None] = {
        "n_components": check_components,
        "output_transform": None,
        "resolution": None,
        "prior": _prior,
        "backend": _backend,
        "progress": None,
        "kernel_tail_cut": check_tail_cut,
        "class_reduction": _class_reduction,
        "likelihood_bins": check_likelihood_bins,
    }
    for name in _SAMPLER_ARGUMENTS:
        checks[name] = lambda value, name=name: _sampler_argument(name, value)
    return checks


def check_transducer_param(name: str, value: Any) -> None:
    """Check one Transducer constructor setting before any fit, by the fit's own rules.

    The one declaration of those rules outside the fit: :func:`check_transducer_params`
    (``fit_many``) and the report's ``[sampler]`` table (``check_sampler``) use it.
    ValueError or TypeError whose message names the setting; ValueError for a name that
    is not a Transducer setting.
    """
    checks = _transducer_checks()
    if name not in checks:
        raise ValueError(f"unknown parameter {name!r}; valid: {list(checks)}")
    check = checks[name]
    if check is not None:
        check(value)


def transducer_param_names() -> tuple[str, ...]:
    """Every Transducer constructor setting :func:`check_transducer_param` knows."""
    return tuple(_transducer_checks())


def check_transducer_params(params: Mapping[str, Any], where: str = "params") -> dict[str, Any]:
    """Check Transducer constructor settings before any fit, by the Transducer's own rules.

    Unknown names are rejected by :meth:`Transducer.set_params`; every value is checked by
    :func:`check_transducer_param` (the functions the fit uses: ``n_components``, the
    sampler's ``chains``, ``warmup``, ``draws``, ``seed``, ``max_treedepth`` and
    ``adapt_delta``, ``backend``, ``prior``, ``kernel_tail_cut``, ``class_reduction`` and
    ``likelihood_bins``), so that a batch fails at once rather than in its first task.
    Returns the settings as a plain dict.
    """
    from .transducer.estimator import Transducer

    if not isinstance(params, Mapping):
        raise TypeError(f"{where} must be a mapping of Transducer settings, found {params!r}")
    template = Transducer()
    try:
        template.set_params(**dict(params))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    for name, value in params.items():
        try:
            check_transducer_param(name, value)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"{where}: {exc}") from None
    return dict(params)


def _base_params(transducer: Any) -> dict[str, Any]:
    from .transducer import Transducer

    if transducer is None:
        return {}
    if isinstance(transducer, Transducer):
        if hasattr(transducer, "posterior_"):
            raise ValueError(
                "transducer must be an unfitted Transducer (its settings are used for every "
                "task), found a fitted one; pass Transducer(**fitted.get_params())"
            )
        return transducer.get_params()
    if isinstance(transducer, Mapping):
        return dict(transducer)
    raise TypeError(
        "transducer must be None, an unfitted Transducer or a mapping of its settings, "
        f"found {type(transducer).__name__}"
    )


# ------------------------------------------------------------------------ tasks
@dataclass
class _Task:
    """One fit: what travels to a worker (data and plain settings only)."""

    name: TaskName
    outputs: Any
    classes: Any
    class_labels: Any
    params: dict[str, Any]


@dataclass
class _Done:
    """What comes back from a worker: the transducer's NetCDF bytes and facts."""

    data: bytes
    warnings: list[tuple[type[Warning], str]]
    info: dict[str, Any] = field(default_factory=dict)


def _fit_task(task: _Task) -> _Done:
    """Fit one transducer (in a worker); return its file's bytes, warnings and timings."""
    from .transducer import Transducer

    _allow_chain_processes()
    started = time.time()
    tick = time.perf_counter()
    with _warnings_of_this_thread() as caught, _sampling_pool_of_this_fit():
        fitted = Transducer(**task.params).fit(
            task.outputs, task.classes, class_labels=task.class_labels
        )
    fit_seconds = time.perf_counter() - tick
    data = transducer_to_bytes(fitted)
    info = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": started,
        "fit_seconds": fit_seconds,
        "task_seconds": time.perf_counter() - tick,
        "peak_rss_mb": _peak_rss_mb(),
        "bytes": len(data),
    }
    return _Done(data, list(caught), info)


# ------------------------------------------------------- each task's own warnings
# A task's warnings are collected per thread, not with warnings.catch_warnings, whose
# state (the filters and the hook that shows a warning) is one per process: on a thread
# executor (a ThreadPoolExecutor, a Dask worker with several threads) each task's
# catch_warnings replaced the others', and a batch of three fits on three threads came
# back with the warnings of one task under another's name, or with none (audit,
# 2026-12-06). Here the first task of the process installs, under a lock, a hook in
# warnings._showwarnmsg (the one function every shown warning passes through, and the one
# that catch_warnings neither saves nor restores, so that a fit's own
# catch_warnings(record=True), the estimator's relayed warnings of a class-reduced fit,
# can neither take it away nor catch another thread's warnings) with an "always" filter
# in front of the others, so that the same warning from the same line in two tasks is
# recorded for both (the registry of a module that warned once would swallow the second);
# the last task to leave restores both. Warnings of a thread that runs no task (the
# caller's) pass on to the hook that was in place: they reach the user as before. What
# stays shared between threads is the filter list itself: a fit that ignores warnings
# for a moment (warnings.catch_warnings with "ignore", as around ArviZ's ESS) ignores
# those of the other threads meanwhile; Python before 3.14 has no per-thread filters.
_capture = threading.local()
_capture_lock = threading.Lock()
_capture_users = 0
_capture_saved: tuple[Any, Callable[..., Any]] | None = None


def _show_or_record(message: Any) -> None:
    """``warnings._showwarnmsg`` while tasks run: a task thread's warning goes to its list,
    any other thread's to the hook that was in place."""
    caught = getattr(_capture, "caught", None)
    if caught is not None:
        caught.append((message.category, str(message.message)))
        return
    saved = _capture_saved
    if saved is not None:
        saved[1](message)
    else:  # pragma: no cover - the hook outlived its installation (never: restored first)
        warnings._showwarnmsg_impl(message)  # type: ignore[attr-defined]


@contextlib.contextmanager
def _warnings_of_this_thread() -> Iterator[list[tuple[type[Warning], str]]]:
    """The warnings this thread raises inside the block, as ``(category, text)``, whatever
    other threads do meanwhile (the comment above says how)."""
    global _capture_users, _capture_saved
    caught: list[tuple[type[Warning], str]] = []
    outer = getattr(_capture, "caught", None)
    with _capture_lock:
        if _capture_users == 0:
            # saves the filters (and showwarning) as they are; restored by the last task
            context = warnings.catch_warnings(action="always")
            context.__enter__()
            _capture_saved = (context, warnings._showwarnmsg)  # type: ignore[attr-defined]
            warnings._showwarnmsg = _show_or_record  # type: ignore[attr-defined]
        _capture_users += 1
    _capture.caught = caught
    try:
        yield caught
    finally:
        _capture.caught = outer
        with _capture_lock:
            _capture_users -= 1
            if _capture_users == 0 and _capture_saved is not None:
                context, show = _capture_saved
                warnings._showwarnmsg = show  # type: ignore[attr-defined]
                _capture_saved = None
                context.__exit__(None, None, None)


_pool_lock = threading.Lock()
_pool_users = 0


@contextlib.contextmanager
def _sampling_pool_of_this_fit() -> Iterator[None]:
    """In a worker, PyStan's chain processes live only as long as the fits that use them.

    httpstan samples in a process pool of its own (forked, module-global), which outlives
    the fit: a worker that ends leaves its processes behind (at a normal exit, Python
    waits for them, and they can hang there; a killed worker orphans them). Here each
    batch of fits in this process gets a fresh pool whose processes are killed by the
    kernel when the thread that started them ends (``PR_SET_PDEATHSIG``, Linux), and
    when the last fit of this process returns it is ended and replaced by an idle one.
    """
    global _pool_users
    try:
        import httpstan.services_stub as stub
    except ImportError:  # PyStan absent: the fit runs on another backend
        yield
        return
    import multiprocessing

    with _pool_lock:
        if _pool_users == 0:
            _retire_pool(stub.executor)
            stub.executor = cf.ProcessPoolExecutor(
                mp_context=multiprocessing.get_context("fork"), initializer=_chain_process_init
            )
        _pool_users += 1
    try:
        yield
    finally:
        with _pool_lock:
            _pool_users -= 1
            if _pool_users == 0:
                _retire_pool(stub.executor)
                stub.executor = cf.ProcessPoolExecutor(  # as httpstan makes it; idle
                    mp_context=multiprocessing.get_context("fork"), initializer=stub.init_worker
                )


def _retire_pool(pool: Any) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(5)
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)


def _chain_process_init() -> None:
    """A chain process: Ctrl-C is its owner's (as httpstan's own initializer), and it dies
    with the thread that started it, so a killed worker leaves no chain process behind."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the worker died before the line above took effect
            os._exit(1)


def _allow_chain_processes() -> None:
    """Let a daemonic worker process (Dask's, by default) start PyStan's chain processes.

    multiprocessing refuses children to a process flagged daemonic, and PyStan runs each
    chain in a child process. The flag matters only to the process that started this
    one (which still ends it when it goes); here it only forbids children, so it is
    cleared. The configuration ``distributed.worker.daemon: false`` does the same for a
    whole Dask cluster.
    """
    import multiprocessing

    config = getattr(multiprocessing.current_process(), "_config", None)
    if isinstance(config, dict) and config.get("daemon"):
        config["daemon"] = False


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KiB)."""
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    except (ImportError, OSError):  # pragma: no cover - not POSIX
        return float("nan")


def _tasks_from_mapping(tasks: Mapping[Any, Any]) -> dict[TaskName, tuple[Any, Any]]:
    out: dict[TaskName, tuple[Any, Any]] = {}
    for name, entry in tasks.items():
        _name_key(name)
        if not (isinstance(entry, tuple | list) and len(entry) == 2):
            raise TypeError(
                f"tasks[{name!r}] must be a pair (outputs, classes), found "
                f"{type(entry).__name__}"
                + (f" of length {len(entry)}" if isinstance(entry, tuple | list) else "")
            )
        out[name] = (entry[0], entry[1])
    return out


def _tasks_from_frame(
    frame: pd.DataFrame, outputs: Any, classes: Any, by: Any
) -> dict[TaskName, tuple[Any, Any]]:
    """Tasks from a tidy table: by group (``by``) and/or by classifier (``outputs`` mapping)."""
    if classes is None or not isinstance(classes, str):
        raise TypeError(f"classes must name the table's column of true classes, found {classes!r}")
    if isinstance(outputs, str):
        outputs = [outputs]
    if isinstance(outputs, Mapping):
        per_classifier = {
            name: [cols] if isinstance(cols, str) else list(cols) for name, cols in outputs.items()
        }
    elif isinstance(outputs, Sequence) and outputs:
        if by is None:
            raise ValueError(
                "a table with the same output columns for every task needs by= (the "
                "column(s) whose values name the tasks, e.g. by='classifier'); or pass "
                "outputs as a mapping classifier -> column(s)"
            )
        per_classifier = {None: list(outputs)}
    else:
        raise TypeError(
            "outputs must name the output column(s) (a str or list of str) or map each "
            f"classifier to its column(s), found {outputs!r}"
        )
    by_columns = [] if by is None else ([by] if isinstance(by, str) else list(by))
    needed = [classes, *by_columns, *(c for cols in per_classifier.values() for c in cols)]
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"the table has no column(s) {missing}; its columns are {list(frame.columns)}"
        )
    for column in by_columns:  # groupby would drop these rows without a word
        unnamed = frame[column].isna().to_numpy()
        if unnamed.any():
            raise ValueError(
                f"by column {column!r} has {int(unnamed.sum())} missing value(s) (first in "
                f"row {int(np.flatnonzero(unnamed)[0])} of the table, counting from 0); "
                "every row must name its task: fill them in or drop those rows first"
            )
    groups: list[tuple[tuple[Any, ...], pd.DataFrame]]
    if by_columns:
        groups = [
            (key if isinstance(key, tuple) else (key,), part)
            for key, part in frame.groupby(by_columns, sort=False, observed=True)
        ]
    else:
        groups = [((), frame)]
    out: dict[TaskName, tuple[Any, Any]] = {}
    for classifier in per_classifier:
        if classifier is not None and not _is_name_part(classifier):
            raise TypeError(
                f"outputs names classifier {classifier!r} of type {type(classifier).__name__}; "
                "its names become task names, which must be text or integers"
            )
    for key, part in groups:
        key = tuple(k.item() if isinstance(k, np.generic) else k for k in key)
        for column, value in zip(by_columns, key, strict=True):
            if not _is_name_part(value):  # task_seed would refuse it, naming no column
                raise TypeError(
                    f"by column {column!r} holds {value!r} of type {type(value).__name__}; "
                    "its values name the tasks, which must be text or integers: convert the "
                    f"column first, e.g. frame[{column!r}].astype(int) or .astype(str)"
                )
        for classifier, columns in per_classifier.items():
            parts = (*key, classifier) if classifier is not None else key
            name = parts[0] if len(parts) == 1 else parts
            out[name] = (part[columns].reset_index(drop=True),
                         part[classes].reset_index(drop=True))  # fmt: skip
    return out


# -------------------------------------------------------------------- executors
class _Runner:
    """How tasks are submitted and watched: the same loop serves every executor."""

    kind = "serial"

    def submit(self, task: _Task) -> Any:
        raise NotImplementedError

    def running(self, futures: Sequence[Any]) -> int:
        return sum(1 for f in futures if f.running())

    def cancel(self, futures: Sequence[Any]) -> None:
        for future in futures:
            future.cancel()

    def forget(self, future: Any) -> None:
        """Let go of a finished task's result where it is held (a Dask cluster)."""

    def close(self, aborted: bool) -> None:
        """Release what the runner made (pools, connections); kill them when ``aborted``."""


class _ExecutorRunner(_Runner):
    kind = "executor"

    def __init__(self, executor: cf.Executor) -> None:
        self.executor = executor

    def submit(self, task: _Task) -> Any:
        return self.executor.submit(_fit_task, task)


def _worker_init() -> None:
    """A pool worker gets a process group of its own (so that the pool's owner can end it
    with every process it started, PyStan's chain processes included) and leaves Ctrl-C
    to the owner, which cancels the batch."""
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _ProcessRunner(_ExecutorRunner):
    """``"processes"``: a pool of our own, ``cores // chains`` workers, spawned fresh."""

    kind = "processes"

    def __init__(self, workers: int) -> None:
        import multiprocessing

        # spawn: a fork of a process that already ran PyStan (threads, an event loop)
        # is not safe; a fresh interpreter imports yieldwise once per worker.
        context = multiprocessing.get_context("spawn")
        super().__init__(
            cf.ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init)
        )
        self.workers = workers

    def running(self, futures: Sequence[Any]) -> int:
        # The pool marks the calls it has queued for a worker as running, one more than
        # its workers; at most one fit per worker runs.
        return min(self.workers, super().running(futures))

    def close(self, aborted: bool) -> None:
        pool = self.executor
        processes = dict(getattr(pool, "_processes", None) or {})
        pool.shutdown(wait=False, cancel_futures=True)
        if not aborted:  # every result is in: let the workers exit by themselves
            deadline = time.monotonic() + _EXIT_GRACE
            for process in processes.values():
                process.join(max(0.0, deadline - time.monotonic()))
        # A worker (aborted, or stuck at exit) ends with every process it started.
        _kill_groups(list(processes), signal.SIGKILL)
        for process in processes.values():
            process.join(_EXIT_GRACE)


def _kill_groups(pids: Sequence[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


class _DaskRunner(_Runner):
    kind = "dask"

    def __init__(self, client: Any, owned: bool) -> None:
        self.client = client
        self.owned = owned
        self._running = 0
        self._asked = 0.0

    def submit(self, task: _Task) -> Any:
        # pure=False: a retried batch fits again; the key carries the task's name so that
        # Dask's dashboard and logs say which fit is which.
        import uuid

        key = f"yieldwise-fit-{task_label(task.name)}-{uuid.uuid4().hex[:8]}"
        return self.client.submit(_fit_task, task, key=key, pure=False)

    def running(self, futures: Sequence[Any]) -> int:
        now = time.monotonic()
        if now - self._asked >= _DASK_RUNNING_EVERY:
            self._asked = now
            ours = {f.key for f in futures}
            with contextlib.suppress(Exception):  # a progress figure never fails a batch
                processing = self.client.processing()
                self._running = sum(len(ours.intersection(keys)) for keys in processing.values())
        return self._running

    def cancel(self, futures: Sequence[Any]) -> None:
        if futures:
            with contextlib.suppress(Exception):
                self.client.cancel(list(futures), force=True)

    def forget(self, future: Any) -> None:
        future.release()

    def close(self, aborted: bool) -> None:
        if self.owned:
            self.client.close()


def _is_dask_client(executor: Any) -> bool:
    return type(executor).__module__.split(".")[0] == "distributed" and hasattr(
        executor, "scheduler_info"
    )


def _dask_client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:
        raise ImportError(
            f"executor {address!r} is a Dask scheduler, and Dask is not installed: "
            f"{DASK_EXTRA} (importing it failed: {exc})"
        ) from None
    try:
        return Client(address, timeout="20s")
    except OSError as exc:
        raise OSError(f"cannot reach the Dask scheduler at {address}: {exc}") from None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def pool_size(chains: int, n_tasks: int, cores: int | None = None) -> int:
    """Workers of ``"processes"``: as many fits as the cores hold at ``chains`` each."""
    cores = _cores() if cores is None else cores
    return max(1, min(n_tasks, cores // max(1, chains)))


def _runner(executor: Any, tasks: Sequence[_Task]) -> _Runner | None:
    """The runner for ``executor``; None for serial."""
    if executor is None or executor == "serial":
        return None
    if isinstance(executor, str):
        if executor == "processes":
            chains = max(int(t.params.get("chains", 4)) for t in tasks)
            return _ProcessRunner(pool_size(chains, len(tasks)))
        if "://" in executor:
            return _DaskRunner(_dask_client(executor), owned=True)
        raise ValueError(
            f'executor must be None, "serial", "processes", a scheduler address such as '
            f'"tcp://host:8786", a concurrent.futures.Executor or a dask.distributed.Client; '
            f"found {executor!r}"
        )
    if _is_dask_client(executor):
        return _DaskRunner(executor, owned=False)
    if isinstance(executor, cf.Executor):
        return _ExecutorRunner(executor)
    raise TypeError(
        'executor must be None, "serial", "processes", a scheduler address, a '
        "concurrent.futures.Executor or a dask.distributed.Client; found "
        f"{type(executor).__name__}"
    )


# ---------------------------------------------------------------------- results
class FitResults(dict):
    """Task name -> fitted :class:`~yieldwise.Transducer`, in the order of the tasks.

    A plain mapping for :func:`yieldwise.compare`; ``tasks`` holds one row per task:
    its seed, where it ran (host, pid), the fit's and the whole task's seconds, the
    worker's peak memory so far and the size of what came back.
    """

    tasks: pd.DataFrame


def _failure(name: TaskName, exc: BaseException) -> Exception:
    label = task_label(name)
    if isinstance(exc, ValueError | TypeError):
        error: Exception = TaskDataError(f"task {label!r}: {exc}", name)
    else:
        error = TaskError(f"task {label!r} failed: {type(exc).__name__}: {exc}", name)
    error.__cause__ = exc
    return error


def _progress_bar(total: int, show: bool, kind: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"fits ({kind})", unit="fit", disable=not show, leave=True)


def fit_many(
    tasks: Mapping[Any, Any] | pd.DataFrame,
    *,
    outputs: Any = None,
    classes: str | None = None,
    by: str | Sequence[str] | None = None,
    class_labels: Any = None,
    transducer: Any = None,
    params: Mapping[Any, Mapping[str, Any]] | None = None,
    seed: int | None = None,
    executor: Any = None,
    progress: bool = True,
    on_start: Callable[[TaskName], None] | None = None,
    on_done: Callable[[TaskName, Mapping[str, Any]], None] | None = None,
) -> FitResults:
    """Fit one transducer per task, serially, on local processes or on a Dask cluster.

    Parameters
    ----------
    tasks : mapping name -> (outputs, classes), or a pandas.DataFrame
        Each task's calibration outputs and true classes, as for
        :meth:`Transducer.fit`. Names are str, int or tuples of them (``("site A",
        "forest")``). A tidy table is split into tasks by ``outputs`` and ``by``.
    outputs : str, list of str, or mapping classifier -> column(s); tables only
        The output column(s) of every task (then ``by`` names the tasks), or each
        classifier's columns (one task per classifier, and per ``by`` group).
    classes : str; tables only
        The column of true classes.
    by : str or list of str; tables only
        Column(s) whose values split the rows into tasks (data sets, sites, or a
        ``classifier`` column of a long table). With an ``outputs`` mapping, task names
        are ``(group..., classifier)``.
    class_labels : sequence, optional
        Every class label in order, the same for all tasks (see :meth:`Transducer.fit`);
        by default each task's own classes.
    transducer : None, an unfitted Transducer, or a mapping of its settings
        The settings every task uses (its constructor parameters, passed through as
        they are: whatever :meth:`Transducer.get_params` holds).
    params : mapping name -> settings, optional
        Per-task settings that replace those of ``transducer`` for that task.
    seed : int, optional
        One seed for the batch: task ``name`` fits with :func:`task_seed(seed, name)
        <task_seed>` unless its ``params`` give a ``seed``. None takes the
        ``transducer``'s seed, or draws one (recorded in ``result.tasks``).
    executor : None, "serial", "processes", "tcp://host:port", Executor or Client
        Where the fits run (see the module's description). A Client or Executor you
        pass is left open; a pool or connection made here is closed at the end.
    progress : bool
        A progress bar of tasks done, running and failed (tqdm; it stays quiet when
        false). Stan's own progress is never shown for batch fits.
    on_start : callable, optional
        Called with ``name`` as each task starts (serial) or is handed to the executor.
    on_done : callable, optional
        Called with ``(name, info)`` as each task finishes, in the order they finish.

    Returns
    -------
    FitResults
        Name -> fitted Transducer in the order of ``tasks``; ``.tasks`` says where and
        how long each ran.

    Raises
    ------
    TaskDataError (a ValueError)
        A task's data or settings were rejected (the message names the task); the
        other tasks are cancelled.
    TaskError (a RuntimeError)
        A task failed otherwise (the sampler, or Dask lost it on too many workers).
    ImportError
        A Dask scheduler without Dask installed (the message says which extra).

    Warnings raised inside a task are raised again here, in task order, their text
    prefixed with the task's name.

    Examples
    --------
    >>> import numpy as np
    >>> import yieldwise as yw
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 2, 200)
    >>> tasks = {"sharp": (rng.normal(2.0 * labels), labels),
    ...          "blunt": (rng.normal(0.5 * labels), labels)}
    >>> fits = yw.fit_many(tasks, transducer={"chains": 2, "warmup": 150, "draws": 150},
    ...                    seed=7, executor="serial", progress=False)
    >>> list(fits), fits["sharp"].seed_ == yw.parallel.task_seed(7, "sharp")
    (['sharp', 'blunt'], True)
    >>> u = yw.UtilityMatrix([[1, 0], [0, 1]])
    >>> float(yw.compare(fits, u).prob_best().loc["sharp"]) > 0.9
    True
    """
    if isinstance(tasks, pd.DataFrame):
        table = _tasks_from_frame(tasks, outputs, classes, by)
    elif isinstance(tasks, Mapping):
        if outputs is not None or classes is not None or by is not None:
            raise TypeError(
                "outputs=, classes= and by= split a table into tasks; tasks is a mapping "
                "name -> (outputs, classes) already"
            )
        table = _tasks_from_mapping(tasks)
    else:
        raise TypeError(
            "tasks must be a mapping name -> (outputs, classes) or a pandas.DataFrame, "
            f"found {type(tasks).__name__}"
        )
    if not table:
        raise ValueError("tasks is empty: there is nothing to fit")
    base = check_transducer_params(_base_params(transducer), "transducer")
    params = dict(params or {})
    unknown = [n for n in params if n not in table]
    if unknown:
        raise ValueError(
            f"params names task(s) {unknown} that are not among the tasks {list(table)}"
        )
    if seed is None:
        seed = base.get("seed")
    if seed is None:
        import secrets

        seed = secrets.randbelow(2**31 - 1)
    task_list = []
    for name, (task_outputs, task_classes) in table.items():
        own = check_transducer_params(params.get(name, {}), f"params[{name!r}]")
        settings = {**base, **own}
        if "seed" not in own:
            settings["seed"] = task_seed(seed, name)
        settings["progress"] = False  # one bar for the batch; Stan's would interleave
        task_list.append(_Task(name, task_outputs, task_classes, class_labels, settings))
    runner = _runner(executor, task_list)
    if runner is None:
        done = _run_serially(task_list, progress, on_start, on_done)
    else:
        done = _run_on(runner, task_list, progress, on_start, on_done)
    results = FitResults()
    rows = []
    for task in task_list:
        outcome = done[task.name]
        results[task.name] = (
            outcome.transducer if outcome.transducer is not None
            else transducer_from_bytes(outcome.data)
        )  # fmt: skip
        rows.append({"task": task_label(task.name), "seed": task.params["seed"], **outcome.info})
    for task in task_list:  # warnings in task order, whichever finished first
        for category, message in done[task.name].warnings:
            warnings.warn(f"{task_label(task.name)}: {message}", category, stacklevel=2)
    results.tasks = pd.DataFrame(rows)
    results.tasks.attrs["seed"] = seed
    results.tasks.attrs["executor"] = "serial" if runner is None else runner.kind
    return results


@dataclass
class _Outcome:
    data: bytes | None
    warnings: list[tuple[type[Warning], str]]
    info: dict[str, Any]
    transducer: Any = None


def _run_serially(
    tasks: Sequence[_Task],
    progress: bool,
    on_start: Callable[..., None] | None,
    on_done: Callable[..., None] | None,
) -> dict[TaskName, _Outcome]:
    from .transducer import Transducer

    done: dict[TaskName, _Outcome] = {}
    with _progress_bar(len(tasks), progress, "serial") as bar:
        for task in tasks:
            bar.set_postfix_str(f"running {task_label(task.name)}")
            if on_start is not None:
                on_start(task.name)
            tick = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    fitted = Transducer(**task.params).fit(
                        task.outputs, task.classes, class_labels=task.class_labels
                    )
                except Exception as exc:
                    raise _failure(task.name, exc) from exc
            seconds = time.perf_counter() - tick
            info = {
                "host": socket.gethostname(), "pid": os.getpid(), "started": time.time() - seconds,
                "fit_seconds": seconds, "task_seconds": seconds, "peak_rss_mb": _peak_rss_mb(),
                "bytes": 0,
            }  # fmt: skip
            found = [(w.category, str(w.message)) for w in caught]
            done[task.name] = _Outcome(None, found, info, fitted)
            bar.update(1)
            if on_done is not None:
                on_done(task.name, info)
    return done


def _run_on(
    runner: _Runner,
    tasks: Sequence[_Task],
    progress: bool,
    on_start: Callable[..., None] | None,
    on_done: Callable[..., None] | None,
) -> dict[TaskName, _Outcome]:
    """Submit every task, wait, collect; on a failure or Ctrl-C cancel the rest."""
    done: dict[TaskName, _Outcome] = {}
    pending: dict[Any, _Task] = {}
    submitted: dict[Any, _Task] = {}
    aborted = True
    try:
        for task in tasks:
            submitted[runner.submit(task)] = task
            if on_start is not None:
                on_start(task.name)
        pending = dict(submitted)
        with _progress_bar(len(tasks), progress, runner.kind) as bar:
            while pending:
                finished = [f for f in pending if f.done()]
                for future in _in_task_order(finished, submitted):
                    task = pending.pop(future)
                    try:
                        result = future.result()
                    except Exception as exc:
                        bar.set_postfix_str("failed 1: " + task_label(task.name))
                        raise _failure(task.name, exc) from exc
                    done[task.name] = _Outcome(result.data, result.warnings, result.info)
                    runner.forget(future)
                    bar.update(1)
                    if on_done is not None:
                        on_done(task.name, result.info)
                if pending:
                    bar.set_postfix_str(f"running {runner.running(list(pending))}", refresh=True)
                    time.sleep(_POLL)
        aborted = False
    finally:
        if aborted:  # the failed task too, so that a cluster keeps nothing of the batch
            runner.cancel(list(submitted))
        runner.close(aborted)
    return done


def _in_task_order(finished: list[Any], submitted: dict[Any, _Task]) -> list[Any]:
    order = {future: i for i, future in enumerate(submitted)}
    return sorted(finished, key=order.__getitem__)
