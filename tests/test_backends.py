"""Stan backends running the transducer program (every backend present; absent ones skip).

Small seeded fits (2 chains, a few hundred iterations); tolerances, not exact draws. The
program is compiled once per session and backend (tests/conftest.py).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
from scipy.special import logit

from yieldwise import _mixture, _stan_data
from yieldwise.backends import (
    BACKENDS,
    CompilationError,
    SampleResult,
    SamplerWarning,
    SamplingError,
    available_backends,
    get_backend,
    stan_file,
)
from yieldwise.backends._cmdstanpy import CmdStanPyBackend


def _flat(result: SampleResult, name: str) -> np.ndarray:
    arr = result.draws[name]
    return arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])


def _sentinel_free(data):
    lo = np.where(data["y_lower"] <= -_stan_data.INFINITY_SENTINEL, -np.inf, data["y_lower"])
    hi = np.where(data["y_upper"] >= _stan_data.INFINITY_SENTINEL, np.inf, data["y_upper"])
    return lo, hi


def _numpy_log_lik(result, data):
    lo, hi = _sentinel_free(data)
    ll = _mixture.log_likelihood(
        _flat(result, "w"), _flat(result, "alpha"), _flat(result, "mu"), _flat(result, "sigma"),
        data["cls"] - 1, lo, hi, data["censored"], data["count"],
    )  # fmt: skip
    return ll.reshape(result.draws["log_lik"].shape)


@pytest.fixture(scope="module")
def gaussian_data():
    """Two classes, N(-1, 1) and N(1, 1), 150 items each: p(1 | y) = 1 / (1 + exp(-2 y))."""
    rng = np.random.default_rng(7)
    cls = np.repeat([0, 1], 150)
    y = rng.normal(np.where(cls == 1, 1.0, -1.0), 1.0)
    return _stan_data.build_stan_data(cls, y, y, [0], 2, 4)


@pytest.fixture(scope="module")
def vote_data():
    """Vote fractions k/40 with exact 0s and 1s, interval-censored on the logit scale."""
    rng = np.random.default_rng(8)
    cls = (rng.random(400) < 0.3).astype(int)
    votes = rng.binomial(40, np.where(cls == 1, rng.beta(6, 1.5, 400), rng.beta(0.5, 6, 400))) / 40
    h = _stan_data.detect_resolution(votes)
    assert h == 1 / 40
    lo, hi = _stan_data.resolution_bins(votes, h, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        data = _stan_data.build_stan_data(cls, logit(lo), logit(hi), [1], 2, 3)
    assert data["N"] < 100  # merged
    return data


@pytest.fixture(scope="module")
def gaussian_fit(transducer_program, gaussian_data):
    init = _stan_data.initial_values(gaussian_data, 2, seed=3)
    return transducer_program.sample(
        gaussian_data, chains=2, warmup=200, draws=200, seed=3, init=init, progress=False
    )


def test_result_layout(gaussian_fit, gaussian_data, record_property):
    record_property("stan_backend", gaussian_fit.backend)
    assert gaussian_fit.backend in BACKENDS
    assert gaussian_fit.backend_version and gaussian_fit.stan_version.count(".") == 2
    k, c, d = gaussian_data["K"], gaussian_data["C"], gaussian_data["D"]
    shapes = {name: arr.shape for name, arr in gaussian_fit.draws.items()}
    assert shapes["w"] == (2, 200, k)
    assert shapes["alpha"] == (2, 200, k, c)
    assert shapes["mu"] == shapes["sigma"] == (2, 200, k, d)
    assert shapes["log_lik"] == (2, 200)
    for name in ("lp", "diverging", "tree_depth", "n_steps", "step_size", "energy"):
        assert gaussian_fit.sample_stats[name].shape == (2, 200), name
    assert gaussian_fit.sample_stats["diverging"].dtype == bool
    # the step size is fixed after warm-up: constant along draws, per chain
    steps = gaussian_fit.sample_stats["step_size"]
    assert np.all(steps == steps[:, :1])
    np.testing.assert_allclose(_flat(gaussian_fit, "w").sum(axis=1), 1.0, rtol=1e-8)
    assert gaussian_fit.settings["seed"] == 3 and gaussian_fit.settings["chains"] == 2
    assert gaussian_fit.sampling_seconds > 0


def test_transducer_recovers_known_truth(gaussian_fit):
    y = np.array([-1.0, 0.0, 1.0])
    log_g = _mixture.log_joint(
        _flat(gaussian_fit, "w"), _flat(gaussian_fit, "alpha"),
        _flat(gaussian_fit, "mu"), _flat(gaussian_fit, "sigma"), y, y, [0],
    )  # fmt: skip
    p1 = _mixture.class_probabilities(log_g)[:, 1]
    truth = 1 / (1 + np.exp(-2 * y))
    np.testing.assert_allclose(p1, truth, atol=0.12)
    diag = gaussian_fit.diagnostics()
    assert diag["divergences"] == 0


def test_numpy_log_likelihood_equals_stan_point_outputs(gaussian_fit, gaussian_data):
    np.testing.assert_allclose(
        _numpy_log_lik(gaussian_fit, gaussian_data), gaussian_fit.draws["log_lik"], rtol=1e-8
    )


def test_numpy_log_likelihood_equals_stan_censored_outputs(transducer_program, vote_data):
    init = _stan_data.initial_values(vote_data, 2, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplerWarning)  # a short run; only values matter
        fit = transducer_program.sample(
            vote_data, chains=2, warmup=100, draws=100, seed=4, init=init, progress=False
        )
    np.testing.assert_allclose(_numpy_log_lik(fit, vote_data), fit.draws["log_lik"], rtol=1e-8)


def test_same_seed_same_draws(transducer_program, gaussian_data, gaussian_fit):
    init = _stan_data.initial_values(gaussian_data, 2, seed=3)
    again = transducer_program.sample(
        gaussian_data, chains=2, warmup=200, draws=200, seed=3, init=init, progress=False
    )
    np.testing.assert_array_equal(again.draws["log_lik"], gaussian_fit.draws["log_lik"])


def test_bad_data_raises_sampling_error_with_backend_message(transducer_program, gaussian_data):
    bad = dict(gaussian_data)
    bad["y_lower"] = np.asarray(bad["y_lower"])[:-1]  # one row short
    with pytest.raises(SamplingError, match="y_lower") as info:
        transducer_program.sample(bad, chains=1, warmup=10, draws=10, seed=1, progress=False)
    assert isinstance(info.value, RuntimeError)
    assert "data block" in str(info.value)  # what to try


def test_tree_depth_saturation_warns(transducer_program, gaussian_data):
    with pytest.warns(SamplerWarning, match=r"maximum tree depth \(threshold: max_treedepth=1\)"):
        transducer_program.sample(
            gaussian_data, chains=1, warmup=20, draws=20, seed=2, max_treedepth=1, progress=False
        )


def test_compiled_program_is_cached(stan_backend, transducer_program, caplog):
    assert stan_backend.compile(stan_file("transducer")) is transducer_program
    fresh = type(stan_backend)()  # a new instance finds the compiled model on disk
    with caplog.at_level(logging.WARNING, logger="yieldwise.backends"):
        fresh.compile(stan_file("transducer"))
    assert not [r for r in caplog.records if "compiling" in r.getMessage()]


# --- backend selection (no sampling) ---------------------------------------------------


def test_backend_selection():
    present = available_backends()
    assert set(present) <= set(BACKENDS)
    if present:
        assert get_backend("auto").name == present[0]
    with pytest.raises(ValueError, match="unknown Stan backend"):
        get_backend("nope")
    for name in set(BACKENDS) - set(present):
        with pytest.raises(RuntimeError, match="unavailable"):
            get_backend(name)


def test_cmdstanpy_probe_never_raises():
    backend = CmdStanPyBackend()
    available = backend.is_available()
    assert isinstance(available, bool)
    assert (backend.unavailable_reason() is None) == available
    if not available:
        with pytest.raises(CompilationError, match="unavailable"):
            backend.compile(stan_file("transducer"))


def test_stan_file_lookup():
    path = stan_file("transducer")
    assert path.name == "transducer.stan" and path.is_file()
    assert stan_file("transducer.stan") == path
    with pytest.raises(FileNotFoundError):
        stan_file("no_such_program")
