"""Stan backends: one narrow interface, two implementations over the same ``.stan`` files.

* ``cmdstanpy`` — CmdStanPy driving a CmdStan installation; chosen when one is found.
* ``pystan`` — PyStan 3 (httpstan); compiles with the system C++ compiler.

and one approximation that is not Stan and never chosen by ``"auto"``:

* ``laplace`` — the transducer's model as a Normal at its posterior mode, in numpy
  (:mod:`yieldwise.backends._laplace`): seconds instead of minutes, for dry runs of a
  report, plumbing tests and a first look; not for decisions that rest on the uncertainty.

Usage::

    from yieldwise.backends import get_backend, stan_file

    backend = get_backend("auto")
    program = backend.compile(stan_file("transducer"))  # cached after the first time
    result = program.sample(data, chains=4, warmup=1000, draws=1000, seed=1)
    result.draws["w"].shape  # (4, 1000, K): (chain, draw, *shape)

``result.backend`` records which backend ran. Failures raise :class:`SamplingError`
(a ``RuntimeError``); divergences, tree-depth saturation and low E-BFMI are reported
as :class:`SamplerWarning` warnings.
"""

from __future__ import annotations

from pathlib import Path

from ._base import (
    CompilationError,
    CompiledProgram,
    SampleResult,
    SamplerWarning,
    SamplingError,
    StanBackend,
)
from ._cmdstanpy import CmdStanPyBackend
from ._laplace import LaplaceBackend
from ._pystan import PyStanBackend

__all__ = [
    "APPROXIMATIONS",
    "BACKENDS",
    "CompilationError",
    "CompiledProgram",
    "SampleResult",
    "SamplerWarning",
    "SamplingError",
    "StanBackend",
    "available_backends",
    "backend_names",
    "get_backend",
    "stan_file",
]

#: Backends in order of preference for ``get_backend("auto")``.
BACKENDS: dict[str, type[StanBackend]] = {
    "cmdstanpy": CmdStanPyBackend,
    "pystan": PyStanBackend,
}

#: Approximations run through the same interface; chosen only by name, never by "auto".
APPROXIMATIONS: dict[str, type[StanBackend]] = {"laplace": LaplaceBackend}

_instances: dict[str, StanBackend] = {}


def _instance(name: str) -> StanBackend:
    if name not in _instances:
        _instances[name] = {**BACKENDS, **APPROXIMATIONS}[name]()
    return _instances[name]


def backend_names() -> list[str]:
    """Every name ``get_backend`` accepts: ``"auto"``, the Stan backends, the approximations."""
    return ["auto", *BACKENDS, *APPROXIMATIONS]


def available_backends() -> list[str]:
    """Names of the backends that can run here, in order of preference."""
    return [name for name in BACKENDS if _instance(name).is_available()]


def get_backend(name: str = "auto") -> StanBackend:
    """The backend called ``name``, or for ``"auto"`` the first available one.

    Raises ``ValueError`` for an unknown name and ``RuntimeError`` when the requested
    backend (or, for ``"auto"``, every backend) is unavailable, with the reasons.
    """
    if name == "auto":
        for candidate in BACKENDS:
            backend = _instance(candidate)
            if backend.is_available():
                return backend
        reasons = "; ".join(f"{n}: {_instance(n).unavailable_reason()}" for n in BACKENDS)
        raise RuntimeError(
            f"No Stan backend is available ({reasons}). Install PyStan (`pip install "
            "pystan`, Linux/macOS) or CmdStanPy with a CmdStan installation."
        )
    if name not in BACKENDS and name not in APPROXIMATIONS:
        raise ValueError(f"unknown Stan backend {name!r}; choose from {backend_names()}")
    backend = _instance(name)
    if not backend.is_available():
        raise RuntimeError(f"The {name} backend is unavailable: {backend.unavailable_reason()}")
    return backend


def stan_file(name: str) -> Path:
    """Path of a Stan program shipped with yieldwise (``"transducer"`` or ``"transducer.stan"``).

    The programs live in the repository's top-level ``stan/`` folder; an installed
    wheel carries the same files as the package ``yieldwise.stan``
    (``site-packages/yieldwise/stan/``). Both places are searched.
    """
    from .._shipped import shipped_file

    filename = name if name.endswith(".stan") else f"{name}.stan"
    return shipped_file("stan", filename, "Stan program")
