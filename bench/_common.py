"""Helpers shared by the benchmarks: memory readings, docs/benchmarks.md sections and the
coverage study as a module."""

from __future__ import annotations

import importlib.util
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
#: What a measurement depends on: a change under these paths (git pathspecs) is a change of
#: what is measured; the benchmarks' stored results are not.
MEASURED_PATHS = ("yieldwise", "stan", "bench", ":(exclude)bench/results")


def checkout_commit(root: Path = ROOT) -> str | None:
    """The checkout's commit (short hash) for a run's record, with ``+changes`` when the
    files a measurement depends on (:data:`MEASURED_PATHS`, untracked files included)
    differ from it; None outside a git checkout or without git."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", *MEASURED_PATHS],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+changes" if changed else head


def load_coverage_study():
    """bench/coverage.py as the module ``bench_coverage``, loaded once from its file
    ("import coverage" may find the coverage.py package instead)."""
    if "bench_coverage" in sys.modules:
        return sys.modules["bench_coverage"]
    spec = importlib.util.spec_from_file_location(
        "bench_coverage", Path(__file__).resolve().parent / "coverage.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_coverage"] = module
    spec.loader.exec_module(module)
    return module


def worst_diagnostics(table) -> dict:
    """The largest R-hat and smallest bulk ESS of a diagnostics table
    (``Transducer.diagnostics()`` or ``diagnose``); None when any value is not finite,
    which the renders report as n/a and count as not clean, never hidden."""
    return {
        "max_rhat": finite_or_none(table["r_hat"].to_numpy(float), max),
        "min_ess_bulk": finite_or_none(table["ess_bulk"].to_numpy(float), min),
    }


def finite_or_none(values, reduce) -> float | None:
    """``reduce`` of the values, or None when any is not finite (JSON has no NaN)."""
    import numpy as np

    values = np.asarray(values, dtype=float).ravel()
    return float(reduce(values)) if values.size and np.isfinite(values).all() else None


def is_clean(fit: dict) -> bool:
    """Issue 16's goal 3 for one fit record (the coverage study's and the real-data
    stage's): no divergent transition, no tree-depth hit, R-hat <= 1.01 and bulk ESS
    >= 400 (the package's own thresholds); a missing (None) R-hat or ESS is not clean."""
    from yieldwise.transducer.diagnostics import ESS_MIN, RHAT_MAX

    rhat, ess = fit.get("max_rhat"), fit.get("min_ess_bulk")
    return (
        fit["divergent"] == 0 and fit["treedepth"] == 0
        and rhat is not None and rhat <= RHAT_MAX and ess is not None and ess >= ESS_MIN
    )  # fmt: skip


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (``ru_maxrss`` is KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 1024**2:,.0f} MiB"


def write_section(section: str, text: str, path: Path = DOCS) -> None:
    """Replace (or append) the section headed ``section`` in ``docs/benchmarks.md``."""
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(section)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(current):
        updated = pattern.sub(lambda _: text + "\n", current, count=1)
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    write_whole(path, updated.rstrip("\n") + "\n")


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file in the same
    folder, then an atomic rename, so that a stopped run never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        # mkstemp makes the file private (0600): keep the replaced file's mode, else 0644
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def key_values(items, known, what: str, error, option: str, key: str = "KEY") -> dict:
    """``KEY=VALUE`` items as a dict of parsed values (:func:`parse_value`); an item without
    a value or with a key not in ``known`` goes to ``error`` (``parser.error``) naming the
    option, what was expected and what was found."""
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        if not value or name not in known:
            error(f"{option}: expected {key}=VALUE with {key} {what}, found {item!r}")
        out[name] = parse_value(value)
    return out


def set_design_constants(items, error) -> dict:
    """``--set NAME=VALUE`` items: set those constants of ``yieldwise._design`` in this
    process (a candidate design to measure); returns what was set."""
    import yieldwise._design as design

    constants = [name for name in vars(design) if name.isupper()]
    values = key_values(items, constants, "a constant of yieldwise._design", error, "--set",
                        key="NAME")  # fmt: skip
    for name, value in values.items():
        setattr(design, name, value)
    return values


def design_text(study: dict) -> str:
    """The design a study ran (its meta's ``--set`` settings): ``defaults``, or the
    constants it set, sorted by name, as code spans."""
    settings = study["meta"].get("settings") or {}
    return ", ".join(f"`{k}={v}`" for k, v in sorted(settings.items())) or "defaults"


def parse_value(text: str):
    """A ``key=value`` option's value: None for ``none``, a tuple of numbers for
    comma-separated ones (``RANGE_QUANTILES=0.001,0.999``), else an int, a float or the
    text."""
    if text.lower() == "none":
        return None
    if "," in text:
        parts = [parse_value(part) for part in text.split(",")]
        if all(isinstance(part, int | float) for part in parts):
            return tuple(parts)
        return text
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def sampler_record(
    transducer: Any, seconds: float, caught: list, prefix_draws: tuple[int, ...] = ()
) -> dict:
    """Seconds, divergences, tree-depth hits, worst R-hat, lowest bulk ESS, warnings.

    ``prefix_draws``: also the worst R-hat and lowest bulk ESS of each chain's first ``d``
    draws, for each ``d`` (``--prefix-draws``). With the same seed and warm-up, a fit of
    ``d`` draws per chain takes exactly these draws (the sampler's path does not depend on
    how long it runs on), so one fit measures a smaller ``draws`` setting as well.
    """
    import json

    import numpy as np

    info = transducer.sampler_summary()
    params = transducer.get_params()
    table = transducer.diagnostics()
    attrs = transducer.posterior_.posterior.attrs
    stats = transducer.posterior_.sample_stats
    return (
        {
            "seconds": float(seconds),
            "sampling_seconds": float(info["sampling_seconds"]),
            # the sampler's work, which the machine's load does not change (seconds do)
            "steps_per_iteration": float(np.asarray(stats["n_steps"]).mean()),
            "step_size": float(np.asarray(stats["step_size"]).mean()),
            "divergent": int(info["divergent"]),
            "treedepth": int(info["max_treedepth_hits"]),
            "transitions": int(info["chains"] * info["draws"]),
            **worst_diagnostics(table),
            "components": int(transducer.n_components_),
            "backend": str(attrs.get("yieldwise_backend", "")),
            "backend_version": str(attrs.get("yieldwise_backend_version", "")),
            "stan_version": str(attrs.get("yieldwise_stan_version", "")),
            # the hyper-parameters the fit used, so that a study mixing designs shows it
            "prior": json.loads(attrs.get("yieldwise_prior", "{}")),
            # warm-up, adapt_delta and max_treedepth as the fit ran (the constructor's
            # default None of each depends on the output dimensions)
            "settings": {k: params[k] for k in ("chains", "draws")}
            | {k: info[k] for k in ("warmup", "adapt_delta", "max_treedepth")},
            "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
        }
        | ({"prefixes": prefix_diagnostics(transducer, prefix_draws)} if prefix_draws else {})
        | (
            # an approximation's distance from the posterior (backend="laplace")
            {"pareto_k": float(info["pareto_k"])} if info.get("pareto_k") is not None else {}
        )
    )


def prefix_diagnostics(transducer: Any, prefix_draws: tuple[int, ...]) -> list[dict]:
    """Worst R-hat and lowest bulk ESS of the invariant quantities (``diagnose``, as
    ``Transducer.diagnostics``) over each chain's first ``d`` draws, for each ``d``."""
    from yieldwise.transducer.diagnostics import diagnose

    # a class-reduced transducer is diagnosed on its reduced fit, as its diagnostics() are
    transducer = getattr(transducer, "reduced_", None) or transducer
    reference = transducer.reference_outputs()
    proba = transducer.draws_proba(reference).values  # (chain, draw, item, class)
    log_lik = transducer.posterior_.posterior["log_lik"].values
    out = []
    for d in prefix_draws:
        if not 4 <= d <= log_lik.shape[1]:
            raise ValueError(
                f"prefix_draws must lie in 4 .. {log_lik.shape[1]} (the fit's draws per "
                f"chain), found {d}"
            )
        table = diagnose(log_lik[:, :d], proba[:, :d], reference, transducer.classes_)
        out.append({"draws": int(d), **worst_diagnostics(table)})
    return out
