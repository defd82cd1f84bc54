"""CmdStanPy backend, used when a CmdStan installation is found.

CmdStan is located the way CmdStanPy does it (``$CMDSTAN``, else the newest
``~/.cmdstan/cmdstan-*``). Executables are cached in
``<yieldwise cache>/cmdstan/<hash of program text and CmdStan version>/`` and reused by
later processes; CmdStanPy rebuilds one only when it is missing or older than its
``.stan`` file. Draws are written with 18 significant digits so that generated
quantities (``log_lik``) keep full precision.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import shutil
import time
import warnings
from collections.abc import Mapping
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
    source_hash,
    user_cache_dir,
)


@contextlib.contextmanager
def _quiet_cmdstanpy(quiet: bool):
    """Silence CmdStanPy's INFO chatter (its logger is its own); keep warnings."""
    log = logging.getLogger("cmdstanpy")
    old = log.level
    if quiet:
        log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(old)


class CmdStanPyProgram(CompiledProgram):
    backend_name = "cmdstanpy"

    def __init__(self, backend: CmdStanPyBackend, stan_file: Path, model: Any):
        self._backend = backend
        self.stan_file = stan_file
        self.model = model

    def _run(
        self,
        data: Mapping[str, Any],
        settings: Mapping[str, Any],
        inits: list[dict[str, Any]] | None,
        progress: bool,
    ) -> SampleResult:
        chains, draws = settings["chains"], settings["draws"]
        plain = {
            k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in data.items()
        }
        started = time.perf_counter()
        console = io.StringIO()
        try:
            with _quiet_cmdstanpy(not progress), contextlib.redirect_stdout(console):
                fit = self.model.sample(
                    data=plain,
                    chains=chains,
                    parallel_chains=max(1, min(chains, os.cpu_count() or 1)),
                    iter_warmup=settings["warmup"],
                    iter_sampling=draws,
                    seed=settings["seed"],
                    max_treedepth=settings["max_treedepth"],
                    adapt_delta=settings["adapt_delta"],
                    adapt_step_size=settings.get("step_size_window"),
                    inits=inits,
                    show_progress=bool(progress),
                    sig_figs=18,
                )
        except Exception as exc:  # CmdStanPy raises RuntimeError / ValueError
            raise SamplingError(
                f"CmdStan sampling failed for {self.stan_file.name}: {exc}\n"
                f"{console.getvalue()[-3000:]}\n"
                "Check the data dictionary against the program's data block (names, "
                "shapes, types, constraints); for initialisation failures pass init=."
            ) from exc
        elapsed = time.perf_counter() - started
        out_draws: dict[str, np.ndarray] = {}
        for name in fit.metadata.stan_vars:
            flat = np.asarray(fit.stan_variable(name))  # (chain * draw, *shape), chain order
            out_draws[name] = flat.reshape(chains, draws, *flat.shape[1:])
        method = fit.method_variables()  # name -> (draw, chain)
        stats = arviz_sample_stats(
            {name: np.asarray(method[name]).T for name in STAN_TO_ARVIZ if name in method}
        )
        config = fit.metadata.cmdstan_config
        stan_version = ".".join(
            str(config.get(f"stan_version_{p}", "?")) for p in ("major", "minor", "patch")
        )
        return SampleResult(
            draws=out_draws,
            sample_stats=stats,
            backend="cmdstanpy",
            backend_version=self._backend.version(),
            stan_version=stan_version,
            settings=dict(settings),
            sampling_seconds=elapsed,
        )

    def _generate(self, data: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
        plain = {
            k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in data.items()
        }
        console = io.StringIO()
        try:
            with _quiet_cmdstanpy(True), contextlib.redirect_stdout(console):
                fit = self.model.sample(
                    data=plain, fixed_param=True, chains=1, iter_sampling=1, seed=seed,
                    show_progress=False, sig_figs=18,
                )  # fmt: skip
        except Exception as exc:
            raise SamplingError(
                f"CmdStan could not run {self.stan_file.name}: {exc}\n"
                f"{console.getvalue()[-3000:]}\n"
                "Check the data dictionary against the program's data block."
            ) from exc
        return {name: np.asarray(fit.stan_variable(name))[0] for name in fit.metadata.stan_vars}


class CmdStanPyBackend(StanBackend):
    """CmdStanPy + CmdStan backend."""

    name = "cmdstanpy"

    def __init__(self) -> None:
        self._programs: dict[str, CmdStanPyProgram] = {}

    def unavailable_reason(self) -> str | None:
        try:
            with warnings.catch_warnings():
                # cmdstanpy imports tqdm.auto, which warns in notebooks without ipywidgets
                # ("IProgress not found") although yieldwise never shows its bars there.
                warnings.filterwarnings("ignore", message="IProgress not found")
                cmdstanpy = importlib.import_module("cmdstanpy")
        except Exception as exc:
            return f"CmdStanPy is not installed ({type(exc).__name__}: {exc})"
        try:
            with _quiet_cmdstanpy(True):
                path = cmdstanpy.cmdstan_path()
        except Exception as exc:  # ValueError when no installation is found
            return f"no CmdStan installation found ({exc})"
        if not (Path(path) / "makefile").exists():  # pragma: no cover - broken install
            return f"CmdStan installation at {path} is incomplete"
        return None

    def is_available(self) -> bool:
        try:
            return self.unavailable_reason() is None
        except Exception:  # pragma: no cover - is_available must never raise
            return False

    def version(self) -> str:
        import cmdstanpy

        with _quiet_cmdstanpy(True):
            cmdstan = cmdstanpy.cmdstan_version()
        cmdstan_text = ".".join(map(str, cmdstan)) if cmdstan else "?"
        return f"cmdstanpy {cmdstanpy.__version__} (CmdStan {cmdstan_text})"

    def compile(self, stan_file: str | os.PathLike[str]) -> CmdStanPyProgram:
        reason = self.unavailable_reason()
        if reason is not None:
            raise CompilationError(f"the cmdstanpy backend is unavailable: {reason}")
        import cmdstanpy

        path = Path(stan_file)
        code = path.read_text()
        with _quiet_cmdstanpy(True):
            cmdstan_dir = cmdstanpy.cmdstan_path()
        key = source_hash(code, str(cmdstan_dir), self.version())
        cached = self._programs.get(key)
        if cached is not None:
            return cached
        build_dir = user_cache_dir() / "cmdstan" / key
        build_dir.mkdir(parents=True, exist_ok=True)
        cached_stan = build_dir / path.name
        if not cached_stan.exists() or cached_stan.read_text() != code:
            shutil.copyfile(path, cached_stan)
        exe = cached_stan.with_suffix(".exe" if os.name == "nt" else "")
        if not exe.exists():
            logger.warning(COMPILE_NOTE.format(name=path.name, backend="CmdStan", cache=build_dir))
        try:
            with _quiet_cmdstanpy(True):
                model = cmdstanpy.CmdStanModel(stan_file=str(cached_stan))
        except Exception as exc:
            raise CompilationError(f"CmdStan could not compile {path}: {exc}") from exc
        program = CmdStanPyProgram(self, path, model)
        self._programs[key] = program
        return program
