"""PyStan 3 backend (``pip install pystan``; compiles with the system C++ compiler).

Compiled models live in httpstan's cache (one per program text and httpstan
version) and are reused by every later process. A program is built in a child process
working in a temporary folder: this process's working directory is never changed and
nothing is written into it. PyStan is asynchronous under the hood;
inside a running event loop (Jupyter) ``nest_asyncio`` is applied so that it can run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import importlib
import io
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._base import (
    COMPILE_NOTE,
    STAN_TO_ARVIZ,
    CompilationError,
    CompiledProgram,
    SampleResult,
    SamplingError,
    StanBackend,
    arviz_sample_stats,
    logger,
)

_HINT_DATA = (
    "Check the data dictionary against the program's data block (names, shapes, "
    "integer vs real, constraints); yieldwise.transducer.stan_data.build_stan_data builds a "
    "valid one."
)
_HINT_INIT = (
    "Initialisation failed: the log density was not finite at any of the random "
    "starting points. Check the data (bounds, prior scales) or pass init=."
)

# PyStan reads the chains' output with pysimdjson, whose parser refuses to parse a line
# while a proxy object of the line before is still alive. A sampling profiler in another
# thread (Dask workers run one every 10 ms: ``distributed.worker.profile``) can hold
# the frame of one of PyStan's reading functions at the moment it returns; Python then
# keeps that frame's locals, the previous line's proxy among them, alive until the
# profiler lets go, and PyStan raises "Tried to re-use a parser ...". The chains had
# finished by then, and a seeded fit stays in httpstan's cache until yieldwise deletes
# it, so asking again only reads the same chains again. Seen once in 1,500 CI tests
# (the cluster report test, 2026-11-24); each retry is a fresh chance at the race.
_PARSER_RACE = "re-use a parser"
_READ_ATTEMPTS = 5
_HINT_PARSER = (
    f"PyStan's reader of the chains' output was disturbed {_READ_ATTEMPTS} times by "
    "another thread holding its frames, typically a sampling profiler (Dask's worker "
    "profiler: set the Dask config distributed.worker.profile.enabled to False on the "
    "workers). The chains themselves ran; run the fit again."
)


def _read_retried(call: Any) -> Any:
    """``call()``, asked again when only the reading of its output met the parser race."""
    for attempt in range(1, _READ_ATTEMPTS + 1):
        try:
            return call()
        except RuntimeError as exc:
            if _PARSER_RACE not in str(exc) or attempt == _READ_ATTEMPTS:
                raise
            logger.debug("PyStan's output reader met the parser race; reading again")
    raise AssertionError("unreachable")  # pragma: no cover


def _dump_fit_whole(fit_bytes: bytes, name: str) -> None:
    """``httpstan.cache.dump_fit``, writing the file whole or not at all.

    httpstan writes a finished fit straight into the file it later reads, and returns that
    file again for any identical request (same program, data, arguments and seed). A run
    interrupted during the write (Ctrl-C, a killed worker) left a truncated file, and every
    later fit with the same seed then failed at once with "Compressed file ended before the
    end-of-stream marker" (seen in CI, 2026-12-06: a test interrupting a pool mid-run, then
    the next test asking for the same fit). Written beside it and renamed, the file is
    either complete or absent.
    """
    import httpstan.cache

    path = Path(httpstan.cache.fit_path(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    # the suffix keeps the partial file out of the "*.jsonlines.gz" glob of _listing
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(fit_bytes)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def _write_fits_whole() -> None:
    """Make httpstan's fit cache write through :func:`_dump_fit_whole` (idempotent)."""
    import httpstan.cache

    httpstan.cache.dump_fit = _dump_fit_whole  # services_stub looks it up at each call


def _unreadable_fits(directory: Path | None, among: set[Path]) -> list[Path]:
    """The files of ``among`` still in ``directory`` that are not whole gzip streams."""
    broken = []
    for path in sorted(_listing(directory) & among):
        try:
            gzip.decompress(path.read_bytes())
        except (EOFError, gzip.BadGzipFile, zlib.error):
            broken.append(path)
        except OSError:  # gone meanwhile, or unreadable for another reason: not ours to judge
            continue
    return broken


def _sample_past_broken_cache(call: Any, directory: Path | None, before: set[Path]) -> Any:
    """``call()``; if it fails and the cache held truncated fits before it started (an
    earlier version of yieldwise, or another program, interrupted while writing one), they
    are removed and ``call()`` runs once more, now sampling afresh. The removed files
    leave ``before``, so that the fresh fit written under their names is forgotten after
    reading like any other.

    A truncated file shows itself in several ways ("Compressed file ended before the
    end-of-stream marker" from httpstan, "TAPE_ERROR" from PyStan's JSON reader, by where
    the cut falls), so any failure counts except the reader race, which has its own
    diagnosis and retries (:func:`_read_retried`). A truncated fit of another request in
    the same directory must not turn that race into a second round of sampling: seen in
    CI, 2026-12-06, with a stale truncated file left in the machine's cache by a run of
    an earlier version."""
    try:
        return _read_retried(call)
    except Exception as exc:
        if _PARSER_RACE in str(exc):
            raise
        broken = _unreadable_fits(directory, before)
        if not broken:
            raise
        for path in broken:
            path.unlink(missing_ok=True)
        before.difference_update(broken)
        logger.warning(
            "httpstan's cache held %d truncated fit file(s) left by an interrupted run "
            "(%s); removed them and sampled again",
            len(broken),
            directory,
        )
        return _read_retried(call)


@contextlib.contextmanager
def _cache_lock():
    """Processes sharing httpstan's cache take turns at every request that may build.

    httpstan deletes and rebuilds a model's folder whenever it does not find the
    compiled module in it. A second process asking for the model during that build
    starts a build of its own in the same folder, and the two can leave a folder that
    neither can use. An exclusive file lock around every such request makes the others
    wait for the build, then find the model compiled.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX; PyStan does not run there anyway
        yield
        return
    import httpstan.cache

    directory = Path(httpstan.cache.cache_directory())
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "yieldwise-build.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _incomplete_cache_entry(model_name: str) -> str | None:
    """What to do when httpstan's folder for the model holds a module but not its log.

    httpstan writes the compiler's log last; a build stopped after the module was
    written leaves a folder that httpstan finds but then fails to read (HTTP 500).
    """
    try:
        import httpstan.cache

        directory = Path(httpstan.cache.model_directory(model_name))
        has_module = any(p.suffix == ".so" for p in directory.iterdir())
    except (OSError, ImportError, AttributeError):
        return None
    if not has_module or (directory / "stderr.log").exists():
        return None
    return (
        f"httpstan's cache folder {directory} is incomplete: an earlier build was "
        "interrupted (the compiled module is there, its stderr.log is not). Delete that "
        "folder and run again; the model is then compiled afresh (about 80 s)."
    )


def _ensure_event_loop_reentrant() -> None:
    """Let PyStan's ``asyncio.run`` work when an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no running loop: asyncio.run works as is
    try:
        import nest_asyncio
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SamplingError(
            "PyStan needs `nest_asyncio` to run inside a running event loop (Jupyter); "
            "install it with `pip install nest_asyncio`."
        ) from exc
    nest_asyncio.apply()


class _PollingSelect:
    """Stands in for the ``select`` module inside ``httpstan.services_stub``: the same
    ``select``, with a timeout of 0.

    httpstan reads each chain's sockets in a coroutine on the event loop's own thread,
    calling ``select(..., 0.01)`` and awaiting only when nothing is readable. So a chain
    with nothing to send yet blocks the loop for 10 ms at a time while another chain's
    worker, its socket full, waits to write its draws: with fast gradients one of the two
    cores stood idle 30 % of a two-logit fit's sampling (``top`` showed the two workers
    taking turns; 2026-12-04). Polling, the coroutine awaits ``asyncio.sleep(0.001)``
    instead, and every chain's reader gets its turn: the same draws, the sampling of the
    binned two-logit set 35.3-37.7 s -> 26.0 s (docs/model.md, "Coarser bins for two
    dimensions").
    """

    @staticmethod
    def select(rlist: Any, wlist: Any, xlist: Any, timeout: float | None = None) -> Any:
        return select.select(rlist, wlist, xlist, 0)


def _read_chains_in_turn() -> None:
    """Install :class:`_PollingSelect` in httpstan (once; only where httpstan's module
    holds the ``select`` module itself, the layout this was measured on)."""
    try:
        import httpstan.services_stub as stub
    except ImportError:  # pragma: no cover - PyStan is what called us
        return
    if getattr(stub, "select", None) is select:
        stub.select = _PollingSelect()


@contextlib.contextmanager
def _captured_output(show: bool):
    """Capture PyStan's console output (kept for error messages); echo it when ``show``.

    Also hides the notices httpstan's own dependencies emit on every call (they are not
    the user's concern): deprecations, and aiohttp's ResourceWarning about posting a large
    body as raw bytes, which every fit of a few thousand rows raised six times (the data
    and the draws travel over httpstan's local socket). Other warnings pass through.
    """
    buffer = io.StringIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message="It is recommended to use web.AppKey")
        warnings.filterwarnings(
            "ignore", category=ResourceWarning, message="Sending a large body directly"
        )
        if show:
            yield buffer
            return
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            yield buffer


def _tail(text: str, lines: int = 25) -> str:
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    kept = [ln for ln in text.splitlines() if ln.strip() and "Sampling:" not in ln]
    return "\n".join(kept[-lines:])


class PyStanProgram(CompiledProgram):
    backend_name = "pystan"

    def __init__(self, backend: PyStanBackend, stan_file: Path, code: str, model_name: str):
        self._backend = backend
        self.stan_file = stan_file
        self.code = code
        self.model_name = model_name

    def _run(
        self,
        data: Mapping[str, Any],
        settings: Mapping[str, Any],
        inits: list[dict[str, Any]] | None,
        progress: bool,
    ) -> SampleResult:
        import stan

        chains, warmup, draws = settings["chains"], settings["warmup"], settings["draws"]
        seed = settings["seed"]
        _ensure_event_loop_reentrant()
        _read_chains_in_turn()
        kwargs: dict[str, Any] = {
            "num_chains": chains,
            "num_warmup": warmup,
            "num_samples": draws,
            "max_depth": settings["max_treedepth"],
            "delta": settings["adapt_delta"],
            "refresh": max(1, (warmup + draws) // 20),
        }
        if inits is not None:
            kwargs["init"] = inits
        if settings.get("step_size_window") is not None:
            kwargs["term_buffer"] = settings["step_size_window"]
        fits_dir = self._backend._fits_directory(self.model_name)
        before = _listing(fits_dir)
        _write_fits_whole()
        with _captured_output(show=False) as out, _cache_lock():
            _build_if_missing(self.code, self.model_name, self.stan_file)
            try:
                posterior = stan.build(self.code, data=dict(data), random_seed=seed)
            except Exception as exc:
                broken = _incomplete_cache_entry(self.model_name)
                if broken is not None:
                    raise SamplingError(broken) from exc
                raise SamplingError(
                    f"PyStan rejected the data for {self.stan_file.name}: {exc}\n"
                    f"{_tail(out.getvalue())}\n{_HINT_DATA}"
                ) from exc
        if posterior is None:  # PyStan returns None when interrupted (Ctrl-C)
            raise KeyboardInterrupt
        started = time.perf_counter()
        with _captured_output(show=progress) as out, _workers_stopped_on_interrupt():
            try:
                fit = _sample_past_broken_cache(
                    lambda: posterior.sample(**kwargs), fits_dir, before
                )
            except Exception as exc:
                message = str(exc)
                hint = _HINT_INIT if "Initialization failed" in message else _HINT_DATA
                if _PARSER_RACE in message:
                    hint = _HINT_PARSER
                raise SamplingError(
                    f"PyStan sampling failed for {self.stan_file.name}: {message}\n"
                    f"{_tail(out.getvalue())}\n{hint}"
                ) from exc
            if fit is None:  # PyStan returns None on KeyboardInterrupt
                raise KeyboardInterrupt
        elapsed = time.perf_counter() - started
        _forget_fits(fits_dir, before, fit.stan_outputs)
        out_draws = {
            name: _reshape(fit[name], tuple(dims), draws, chains)
            for name, dims in zip(fit.param_names, fit.dims, strict=True)
        }
        stats = arviz_sample_stats(
            {
                name: _reshape(fit[name], (), draws, chains)
                for name in STAN_TO_ARVIZ
                if name in fit.sample_and_sampler_param_names
            }
        )
        return SampleResult(
            draws=out_draws,
            sample_stats=stats,
            backend="pystan",
            backend_version=self._backend.version(),
            stan_version=self._backend.stan_version(),
            settings=dict(settings),
            sampling_seconds=elapsed,
        )

    def _generate(self, data: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
        import stan

        _ensure_event_loop_reentrant()
        _write_fits_whole()
        fits_dir = self._backend._fits_directory(self.model_name)
        before = _listing(fits_dir)
        with _captured_output(show=False) as out, _workers_stopped_on_interrupt():
            try:
                with _cache_lock():
                    _build_if_missing(self.code, self.model_name, self.stan_file)
                    posterior = stan.build(self.code, data=dict(data), random_seed=seed)
                if posterior is None:  # interrupted
                    raise KeyboardInterrupt
                fit = _sample_past_broken_cache(
                    lambda: posterior.fixed_param(num_chains=1, num_samples=1), fits_dir, before
                )
                if fit is None:
                    raise KeyboardInterrupt
            except Exception as exc:
                hint = _HINT_PARSER if _PARSER_RACE in str(exc) else _HINT_DATA
                raise SamplingError(
                    f"PyStan could not run {self.stan_file.name}: {exc}\n"
                    f"{_tail(out.getvalue())}\n{hint}"
                ) from exc
        _forget_fits(fits_dir, set(), fit.stan_outputs)
        return {
            name: np.asarray(fit[name]).reshape(tuple(dims))
            for name, dims in zip(fit.param_names, fit.dims, strict=True)
        }


@contextlib.contextmanager
def _workers_stopped_on_interrupt():
    """On KeyboardInterrupt (or SystemExit), stop httpstan's sampling processes at once.

    httpstan runs each chain in a process of its own pool, and those processes ignore
    SIGINT. PyStan, interrupted, stops waiting for them but leaves them sampling, and at
    exit Python waits for the pool (``concurrent.futures.process._python_exit``): the
    interrupted process then hangs until the chains finish, or for ever when a chain
    blocks writing to the socket no one reads any more. So the workers are killed here,
    and httpstan gets a fresh (empty, lazily started) pool for any later fit in this
    process.
    """
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        _stop_sampling_workers()
        raise


def _stop_sampling_workers() -> None:
    import concurrent.futures
    import multiprocessing

    try:
        import httpstan.services_stub as stub
    except ImportError:  # pragma: no cover - PyStan is what called us
        return
    pool = stub.executor
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(timeout=5)
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)
    stub.executor = concurrent.futures.ProcessPoolExecutor(
        mp_context=multiprocessing.get_context("fork"), initializer=stub.init_worker
    )


def _reshape(values: np.ndarray, shape: tuple[int, ...], n_draws: int, n_chains: int) -> np.ndarray:
    """PyStan's (*shape, draw * chain) arrays, chain varying fastest -> (chain, draw, *shape)."""
    arr = np.asarray(values).reshape(*shape, n_draws, n_chains)
    return np.ascontiguousarray(np.moveaxis(arr, (-1, -2), (0, 1)))


def _forget_fits(directory: Path | None, before: set[Path], outputs: Sequence[bytes]) -> None:
    """Delete the chains of this fit from httpstan's cache.

    httpstan stores every seeded fit on disk (and would return it again for an identical
    request). Only files whose contents are one of this fit's chains are removed, so
    concurrent processes sampling the same model are not disturbed.
    """
    ours = {hashlib.sha256(o).digest() for o in outputs}
    for path in _listing(directory) - before:
        with contextlib.suppress(OSError, EOFError, gzip.BadGzipFile):
            if hashlib.sha256(gzip.decompress(path.read_bytes())).digest() in ours:
                path.unlink()


def _listing(directory: Path | None) -> set[Path]:
    if directory is None or not directory.is_dir():
        return set()
    return set(directory.glob("*.jsonlines.gz"))


class PyStanBackend(StanBackend):
    """PyStan 3 (httpstan) backend."""

    name = "pystan"

    def __init__(self) -> None:
        self._programs: dict[str, PyStanProgram] = {}
        self._compile_lock = threading.Lock()

    def unavailable_reason(self) -> str | None:
        try:
            with warnings.catch_warnings():  # httpstan's schemas warn on import
                warnings.simplefilter("ignore")
                importlib.import_module("stan")
                importlib.import_module("httpstan")
        except Exception as exc:  # ImportError, or a broken installation
            return f"PyStan is not installed ({type(exc).__name__}: {exc}); pip install pystan"
        if sys.platform.startswith("win"):
            return "PyStan 3 does not support Windows; use the cmdstanpy backend"
        return None

    def is_available(self) -> bool:
        try:
            return self.unavailable_reason() is None
        except Exception:  # pragma: no cover - is_available must never raise
            return False

    def version(self) -> str:
        import httpstan

        import stan

        return f"pystan {getattr(stan, '__version__', '?')} (httpstan {httpstan.__version__})"

    def stan_version(self) -> str:
        import httpstan

        header = Path(httpstan.__file__).parent / "include" / "stan" / "version.hpp"
        try:
            text = header.read_text()
        except OSError:
            return "unknown"
        parts = [re.search(rf"#define STAN_{p} (\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
        return ".".join(m.group(1) for m in parts) if all(parts) else "unknown"  # type: ignore[union-attr]

    def _fits_directory(self, model_name: str) -> Path | None:
        try:
            import httpstan.cache

            return httpstan.cache.model_directory(model_name) / "fits"
        except Exception:  # pragma: no cover - httpstan internals changed
            return None

    def compile(self, stan_file: str | os.PathLike[str]) -> PyStanProgram:
        if not self.is_available():
            reason = self.unavailable_reason()
            raise CompilationError(f"the pystan backend is unavailable: {reason}")
        import httpstan.cache
        import httpstan.models

        path = Path(stan_file)
        code = path.read_text()
        model_name = httpstan.models.calculate_model_name(code)
        # Threads of one process (a Dask worker's) take turns, so that the first one
        # builds and says so, and the others find the program here: the message appears
        # once per process. Processes take turns at the file lock (once per machine).
        with self._compile_lock:
            cached = self._programs.get(model_name)
            if cached is not None:
                return cached
            if model_name not in httpstan.cache.list_model_names():
                logger.warning(
                    COMPILE_NOTE.format(
                        name=path.name, backend="PyStan", cache=httpstan.cache.cache_directory()
                    )
                )
            with _cache_lock():
                _build_if_missing(code, model_name, path)
            program = PyStanProgram(self, path, code, model_name)
            self._programs[model_name] = program
            return program


# Run in a child process by _build_if_missing: PyStan's build (setuptools' build_ext)
# writes its object files under ``build/`` in the current directory, and a library must
# neither write into the user's folder nor change the working directory of the process
# (other threads use relative paths). The child runs in a temporary folder of its own.
_BUILD_SCRIPT = """
import asyncio, json, sys
import stan.common

async def build(code):
    async with stan.common.HttpstanClient() as client:
        resp = await client.post("/models", json={"program_code": code})
        if resp.status == 201:
            return resp.status, ""
        try:
            return resp.status, resp.json().get("message", "")
        except Exception:
            return resp.status, resp.content.decode(errors="replace")

status, message = asyncio.run(build(sys.stdin.read()))
with open(sys.argv[1], "w") as handle:
    json.dump({"status": status, "message": message}, handle)
"""


def _build_if_missing(code: str, model_name: str, path: Path) -> None:
    """Compile the program into httpstan's cache unless it is there; call under _cache_lock.

    The build runs in a child Python process whose working directory is a fresh temporary
    folder (removed afterwards), so the ``build/`` folder of setuptools never appears in
    the user's directory and this process's working directory is never changed. An
    interrupt (KeyboardInterrupt) kills the child before it propagates.
    """
    import httpstan.cache

    if model_name in httpstan.cache.list_model_names():
        broken = _incomplete_cache_entry(model_name)
        if broken is not None:
            raise CompilationError(broken)
        return
    with tempfile.TemporaryDirectory(prefix="yieldwise-build-") as folder:
        result_file = Path(folder) / "result.json"
        # run() kills and reaps the child on any exception, KeyboardInterrupt included
        completed = subprocess.run(
            [sys.executable, "-c", _BUILD_SCRIPT, str(result_file)],
            input=code, cwd=folder, capture_output=True, text=True, check=False,
        )  # fmt: skip
        try:
            result = json.loads(result_file.read_text())
        except (OSError, ValueError):
            result = {"status": None, "message": f"the build process exited with status "
                      f"{completed.returncode}"}  # fmt: skip
    if result["status"] == 201:
        return
    broken = _incomplete_cache_entry(model_name)
    if broken is not None:
        raise CompilationError(broken)
    console = _tail(completed.stdout + completed.stderr)
    raise CompilationError(
        f"PyStan could not compile {path}: {result['message']}\n{console}\n"
        "A C++ compiler (g++ or clang++) and ~3 GB of free memory are needed."
    )
