"""The narrow interface every Stan backend implements, and what they share."""

from __future__ import annotations

import abc
import hashlib
import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("yieldwise.backends")

#: E-BFMI below this value in a chain is reported (Betancourt 2016; Stan uses 0.3).
EBFMI_THRESHOLD = 0.3


def pareto_k_threshold(n_draws: int) -> float:
    """Largest Pareto shape k at which importance ratios of ``n_draws`` draws still give
    reliable estimates: ``min(1 - 1 / log10(S), 0.7)`` (Vehtari, Simpson, Gelman, Yao and
    Gabry 2024, "Pareto smoothed importance sampling", section 3.2.4)."""
    return min(1.0 - 1.0 / np.log10(max(n_draws, 11)), 0.7)


#: ArviZ names of the sampler statistics in :attr:`SampleResult.sample_stats`, keyed by
#: Stan's own column names.
STAN_TO_ARVIZ = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}

COMPILE_NOTE = (
    "yieldwise: compiling the Stan program {name} with {backend} (first use on this "
    "machine; takes roughly 1-2 minutes and ~3 GB of memory). The compiled model is "
    "cached in {cache} and reused by later sessions."
)


class SamplingError(RuntimeError):
    """The Stan sampler (or the backend driving it) failed.

    The message carries the backend's own message and what to try next.
    """


class CompilationError(RuntimeError):
    """A Stan program could not be compiled."""


class SamplerWarning(UserWarning):
    """Sampler diagnostics flagged a problem (divergences, tree depth, E-BFMI; for the
    Laplace approximation, draws that misstate the posterior)."""


@dataclass
class SampleResult:
    """Draws and sampler diagnostics of one run, backend independent.

    ``draws[name]`` has shape ``(chain, draw, *param_shape)`` with the parameter's
    indices in Stan's natural order (``mu[k, d]`` is ``draws["mu"][c, t, k - 1, d - 1]``);
    ``sample_stats[name]`` has shape ``(chain, draw)`` with ArviZ names (``lp``,
    ``diverging``, ``tree_depth``, ``n_steps``, ``step_size``, ``energy``,
    ``acceptance_rate``).
    """

    draws: dict[str, np.ndarray]
    sample_stats: dict[str, np.ndarray]
    backend: str
    backend_version: str
    stan_version: str
    settings: dict[str, Any] = field(default_factory=dict)
    sampling_seconds: float = float("nan")

    @property
    def n_chains(self) -> int:
        return int(self.sample_stats["lp"].shape[0])

    @property
    def n_draws(self) -> int:
        return int(self.sample_stats["lp"].shape[1])

    def diagnostics(self) -> dict[str, Any]:
        """Counts of divergences and tree-depth saturation, and E-BFMI per chain."""
        max_depth = int(self.settings.get("max_treedepth", 10))
        diverging = np.asarray(self.sample_stats["diverging"], dtype=bool)
        depth = np.asarray(self.sample_stats["tree_depth"])
        return {
            "divergences": int(diverging.sum()),
            "max_treedepth_hits": int((depth >= max_depth).sum()),
            "ebfmi": ebfmi(self.sample_stats["energy"]),
            "iterations": int(diverging.size),
        }


def ebfmi(energy: np.ndarray) -> np.ndarray:
    """Energy Bayesian fraction of missing information of each chain (chain, draw)."""
    e = np.asarray(energy, dtype=float)
    num = np.sum(np.diff(e, axis=1) ** 2, axis=1)
    den = np.sum((e - e.mean(axis=1, keepdims=True)) ** 2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def warn_on_diagnostics(result: SampleResult, stacklevel: int = 3) -> None:
    """Issue a :class:`SamplerWarning` for each diagnostic that crossed its threshold."""
    diag = result.diagnostics()
    total = diag["iterations"]
    max_depth = int(result.settings.get("max_treedepth", 10))
    adapt_delta = float(result.settings.get("adapt_delta", 0.8))
    if diag["divergences"] > 0:
        larger = next((v for v in (0.95, 0.99, 0.999) if v > adapt_delta), None)
        advice = (
            f"try a larger adapt_delta (now {adapt_delta:g}, e.g. {larger:g})"
            if larger is not None
            else f"adapt_delta is already {adapt_delta:g}; try a longer warm-up (warmup=)"
        )
        warnings.warn(
            f"{diag['divergences']} of {total} post-warm-up transitions diverged "
            f"(threshold: 0). The draws may be biased; {advice} and see docs/model.md.",
            SamplerWarning,
            stacklevel=stacklevel,
        )
    if diag["max_treedepth_hits"] > 0:
        warnings.warn(
            f"{diag['max_treedepth_hits']} of {total} post-warm-up transitions hit the "
            f"maximum tree depth (threshold: max_treedepth={max_depth}). Sampling is "
            "inefficient; try a larger max_treedepth or fewer kernels (n_components).",
            SamplerWarning,
            stacklevel=stacklevel,
        )
    low = [
        f"chain {i + 1}: {v:.3f}"
        for i, v in enumerate(diag["ebfmi"])
        if np.isfinite(v) and v < EBFMI_THRESHOLD
    ]
    if low:
        warnings.warn(
            f"E-BFMI below the threshold {EBFMI_THRESHOLD} in {len(low)} chain(s) "
            f"({', '.join(low)}): the sampler may not explore the posterior's tails; "
            f"try more warm-up iterations.",
            SamplerWarning,
            stacklevel=stacklevel,
        )
    k = result.settings.get("pareto_k")
    if k is not None:
        limit = pareto_k_threshold(total)
        if not k <= limit:  # NaN too: the ratios could not be smoothed
            warnings.warn(
                f"the Laplace approximation misstates this posterior: the Pareto shape of "
                f"the importance ratios (posterior / approximation) of its {total} draws is "
                f"k = {k:.2f}, above {limit:.2f}, so its bands, intervals and probabilities "
                "are not reliable. Use it only for a first look or a dry run, and refit with "
                "the default backend (Stan's sampler) before deciding anything.",
                SamplerWarning,
                stacklevel=stacklevel,
            )


class CompiledProgram(abc.ABC):
    """A compiled Stan program, ready to sample with any data set.

    :meth:`sample` is the one public entry point: it validates the arguments and
    issues the diagnostics warnings for every backend; a backend implements only
    :meth:`_run`, which runs NUTS with settings already checked.
    """

    backend_name: str
    stan_file: Path

    def sample(
        self,
        data: Mapping[str, Any],
        *,
        chains: int = 4,
        warmup: int = 1000,
        draws: int = 1000,
        seed: int | None = None,
        max_treedepth: int = 10,
        adapt_delta: float = 0.8,
        init: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        progress: bool = True,
        step_size_window: int | None = None,
    ) -> SampleResult:
        """Run NUTS (diagonal metric, adapted) and return the post-warm-up draws.

        ``step_size_window``: the warm-up's last iterations, in which only the step size
        is adapted (Stan's ``term_buffer``, CmdStanPy's ``adapt_step_size``); None keeps
        Stan's 50. Raises :class:`SamplingError` when the backend fails (bad data, failed
        initialisation, crashed chains); issues :class:`SamplerWarning` when
        divergences, tree-depth saturation or low E-BFMI are seen.
        """
        settings, inits = prepare_sampling(
            chains, warmup, draws, seed, max_treedepth, adapt_delta, init, step_size_window
        )
        result = self._run(data, settings, inits, progress)
        warn_on_diagnostics(result)
        return result

    def generate(self, data: Mapping[str, Any], seed: int = 0) -> dict[str, np.ndarray]:
        """Run a program without parameters once: its generated quantities, by name.

        Uses each backend's fixed-parameter sampler for one iteration; raises
        :class:`SamplingError` with the backend's message when Stan rejects the data.
        """
        check_sampler_arguments(1, 0, 1, seed, 10, 0.8)
        return self._generate(data, int(seed))

    def _generate(self, data: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
        """Backend-specific :meth:`generate`."""
        raise NotImplementedError(f"{type(self).__name__} cannot run generated quantities")

    @abc.abstractmethod
    def _run(
        self,
        data: Mapping[str, Any],
        settings: Mapping[str, Any],
        inits: list[dict[str, Any]] | None,
        progress: bool,
    ) -> SampleResult:
        """Sample with validated ``settings`` (see :func:`prepare_sampling`)."""


class StanBackend(abc.ABC):
    """A way to compile and run Stan programs (CmdStanPy or PyStan)."""

    name: str

    @abc.abstractmethod
    def is_available(self) -> bool:
        """True when this backend can run here. Never raises."""

    @abc.abstractmethod
    def unavailable_reason(self) -> str | None:
        """Why :meth:`is_available` is False (None when available)."""

    @abc.abstractmethod
    def version(self) -> str:
        """Backend version string (e.g. ``pystan 3.10.0``)."""

    @abc.abstractmethod
    def compile(self, stan_file: str | os.PathLike[str]) -> CompiledProgram:
        """Compile (or load from the cache) a Stan program."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r}>"


def _whole(value: Any) -> bool:
    """``value`` equals an integer (2 and 2.0 do; "ten" does not, where ``int`` would
    raise its own message). None and other non-numbers raise TypeError, as ``int``
    does."""
    try:
        return int(value) == value
    except ValueError:  # a string that is no integer
        return False


def check_sampler_arguments(
    chains: int, warmup: int, draws: int, seed: int | None, max_treedepth: int, adapt_delta: float
) -> int:
    """Validate the common sampler arguments; return the seed to use (drawn if None)."""
    for label, value, low in (("chains", chains, 1), ("warmup", warmup, 0), ("draws", draws, 1)):
        if not _whole(value) or value < low:
            raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
    if not _whole(max_treedepth) or max_treedepth < 1:
        raise ValueError(f"max_treedepth must be a positive integer, got {max_treedepth!r}")
    if not 0 < adapt_delta < 1:
        raise ValueError(f"adapt_delta must lie in (0, 1), got {adapt_delta!r}")
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1)[0] % (2**31 - 1)) + 1
    if int(seed) != seed or not 0 <= seed < 2**31:
        raise ValueError(f"seed must be an integer in [0, 2**31), got {seed!r}")
    return int(seed)


def prepare_sampling(
    chains: int,
    warmup: int,
    draws: int,
    seed: int | None,
    max_treedepth: int,
    adapt_delta: float,
    init: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
    step_size_window: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """Validate the sampler arguments every backend takes.

    Returns the settings recorded with the result (the seed drawn when None) and
    one initial-value dict per chain (or None for Stan's random inits).
    """
    seed = check_sampler_arguments(chains, warmup, draws, seed, max_treedepth, adapt_delta)
    if step_size_window is not None:
        room = step_size_window_room(warmup)
        if int(step_size_window) != step_size_window or not 1 <= step_size_window <= room:
            raise ValueError(
                f"step_size_window must be an integer in [1, warmup - "
                f"{STAN_INIT_BUFFER + STAN_BASE_WINDOW}] = [1, {room}] at warmup {warmup}, "
                f"got {step_size_window!r}; pass None for Stan's default"
            )
    inits = per_chain_inits(init, chains)
    settings = {
        "chains": int(chains),
        "warmup": int(warmup),
        "draws": int(draws),
        "seed": seed,
        "max_treedepth": int(max_treedepth),
        "adapt_delta": float(adapt_delta),
        "init": "user" if inits is not None else "random",
    }
    if step_size_window is not None:
        settings["step_size_window"] = int(step_size_window)
    return settings, inits


#: Stan's warm-up defaults: the initial buffer, the first metric window and the last
#: (step size only) window, ``init_buffer``, ``window`` and ``term_buffer``.
STAN_INIT_BUFFER = 75
STAN_BASE_WINDOW = 25
STAN_TERM_BUFFER = 50


def step_size_window_room(warmup: int) -> int:
    """The longest last (step size only) window a warm-up of ``warmup`` iterations holds:
    Stan's warm-up is an initial buffer (75), metric windows (at least 25) and that last
    window; a longer one and Stan would replace all three by its own split."""
    return int(warmup) - STAN_INIT_BUFFER - STAN_BASE_WINDOW


def arviz_sample_stats(raw: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sampler diagnostics under ArviZ's names and types, from Stan's (chain, draw) arrays."""
    stats: dict[str, np.ndarray] = {}
    for stan_name, arviz_name in STAN_TO_ARVIZ.items():
        if stan_name not in raw:
            continue
        values = np.ascontiguousarray(raw[stan_name])
        if arviz_name == "diverging":
            values = values.astype(bool)
        elif arviz_name in ("tree_depth", "n_steps"):
            values = values.astype(np.int64)
        stats[arviz_name] = values
    return stats


def per_chain_inits(
    init: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None, chains: int
) -> list[dict[str, Any]] | None:
    """One initial-value dict per chain (a single dict is shared), or None."""
    if init is None:
        return None
    if isinstance(init, Mapping):
        return [_plain(dict(init)) for _ in range(chains)]
    inits = [_plain(dict(i)) for i in init]
    if len(inits) != chains:
        raise ValueError(f"init must be one dict or a list of {chains} dicts")
    return inits


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}


def source_hash(code: str, *extra: str) -> str:
    h = hashlib.sha256(code.encode())
    for e in extra:
        h.update(b"\0" + e.encode())
    return h.hexdigest()[:16]


def user_cache_dir() -> Path:
    """yieldwise's cache folder (``$YIELDWISE_CACHE``, else the XDG/home cache)."""
    env = os.environ.get("YIELDWISE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "yieldwise"
