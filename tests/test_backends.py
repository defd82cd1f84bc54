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


def _short_fit(program, data, seed):
    init = _stan_data.initial_values(data, 2, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplerWarning)  # a short run; only values matter
        return program.sample(
            data, chains=2, warmup=100, draws=100, seed=seed, init=init, progress=False
        )


def test_numpy_log_likelihood_equals_stan_censored_outputs(transducer_program, vote_data):
    fit = _short_fit(transducer_program, vote_data, 4)
    np.testing.assert_allclose(_numpy_log_lik(fit, vote_data), fit.draws["log_lik"], rtol=1e-8)


def _route_data(route: str):
    """Data sets that send the program down each of its likelihood routes."""
    rng = np.random.default_rng(21)
    cls = (rng.random(300) < 0.4).astype(int)
    y = rng.normal(np.where(cls == 1, 1.0, -1.0), 1.0)
    if route == "point, repeated rows":  # counts > 1 in several groups
        y1 = np.round(y, 1)
        return _stan_data.build_stan_data(cls, y1, y1, [0], 2, 3)
    votes = np.clip(np.round((y + 3) / 6 * 40), 0, 40) / 40
    lo, hi = _stan_data.resolution_bins(votes, 1 / 40, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        lo, hi = logit(lo), logit(hi)
    if route == "censored, overlapping bins":  # bins twice as wide: not a lattice tiling
        wide_lo, wide_hi = _stan_data.resolution_bins(votes, 1 / 20, (0.0, 1.0))
        with np.errstate(divide="ignore"):
            return _stan_data.build_stan_data(cls, logit(wide_lo), logit(wide_hi), [1], 2, 3)
    second = rng.normal(np.where(cls == 1, 0.5, -0.5), 1.0)
    if route == "censored + point":
        return _stan_data.build_stan_data(
            cls, np.column_stack([lo, second]), np.column_stack([hi, second]), [1, 0], 2, 3
        )
    assert route == "two censored"
    v2 = np.clip(np.round((second + 3) / 6 * 20), 0, 20) / 20
    lo2, hi2 = _stan_data.resolution_bins(v2, 1 / 20, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        lo2, hi2 = logit(lo2), logit(hi2)
    return _stan_data.build_stan_data(
        cls, np.column_stack([lo, lo2]), np.column_stack([hi, hi2]), [1, 1], 2, 3
    )


ROUTES = ["point, repeated rows", "censored, overlapping bins", "censored + point", "two censored"]


@pytest.mark.parametrize("route", ROUTES)
def test_numpy_log_likelihood_equals_stan_on_every_route(transducer_program, route):
    data = _route_data(route)
    if route == "point, repeated rows":
        assert (data["count"] > 1).any() and len(set(data["count"])) > 2
    fit = _short_fit(transducer_program, data, 5)
    np.testing.assert_allclose(_numpy_log_lik(fit, data), fit.draws["log_lik"], rtol=1e-8)


@pytest.mark.parametrize("dims", [1, 2])
def test_far_outlier_bin_takes_the_floored_route(transducer_program, dims):
    """A bin hundreds of kernel widths from every component underflows: the program then
    sums on the log scale with each bin probability floored at 1e-300 (docs/model.md).
    Checked against that floored sum written out here with scipy."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(3)
    cls = np.r_[(rng.random(200) < 0.5).astype(int), 1]
    values = np.r_[rng.integers(0, 21, 200) / 20, 50.0]  # one item at 50, far from [0, 1]
    lo, hi = _stan_data.resolution_bins(values, 1 / 20)
    if dims == 1:
        data = _stan_data.build_stan_data(cls, lo, hi, [1], 2, 3)
    else:
        z = rng.normal(size=201)
        data = _stan_data.build_stan_data(
            cls, np.column_stack([lo, z]), np.column_stack([hi, z]), [1, 0], 2, 3
        )
    fit = _short_fit(transducer_program, data, 6)
    w, alpha, mu, sigma = (_flat(fit, n) for n in ("w", "alpha", "mu", "sigma"))
    a = (data["y_lower"][None, :, None, 0] - mu[:, None, :, 0]) / sigma[:, None, :, 0]
    b = (data["y_upper"][None, :, None, 0] - mu[:, None, :, 0]) / sigma[:, None, :, 0]
    log_p = _mixture._log_phi_diff(a, b)  # (draws, rows, components), accurate in the tails
    # the outlier's row (sorted last) underflows under every component in some draws at
    # least, so the floored route runs (in 2-D a component may move out to the outlier)
    assert (log_p[:, -1, :].max(axis=1) < np.log(1e-300)).any()
    lk = np.maximum(log_p, np.log(1e-300))
    if dims == 2:
        zz = (data["y_lower"][None, :, None, 1] - mu[:, None, :, 1]) / sigma[:, None, :, 1]
        lk = lk - 0.5 * zz**2 - np.log(sigma[:, None, :, 1]) - 0.5 * np.log(2 * np.pi)
    la = np.log(np.moveaxis(alpha[:, :, data["cls"] - 1], 1, 2))
    expected = logsumexp(lk + la + np.log(w)[:, None, :], axis=2) @ data["count"]
    np.testing.assert_allclose(expected.reshape(2, 100), fit.draws["log_lik"], rtol=1e-8)


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


# --- httpstan's shared cache (no compiling) --------------------------------------------


@pytest.fixture
def fake_httpstan_cache(tmp_path, monkeypatch):
    cache = pytest.importorskip("httpstan.cache")
    monkeypatch.setattr(cache, "cache_directory", lambda: tmp_path)
    monkeypatch.setattr(cache, "model_directory", lambda name: tmp_path / name)
    return tmp_path


def test_cache_lock_excludes_other_holders(fake_httpstan_cache):
    import fcntl

    from yieldwise.backends._pystan import _cache_lock

    lock_file = fake_httpstan_cache / "yieldwise-build.lock"
    # another process (or another open of the file) cannot take the lock meanwhile
    with _cache_lock(), open(lock_file) as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(lock_file) as other:  # released on exit
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(other, fcntl.LOCK_UN)


def test_interrupted_build_in_cache_gets_an_actionable_error(fake_httpstan_cache):
    pytest.importorskip("stan")
    import httpstan.models

    from yieldwise.backends import _pystan

    path = stan_file("transducer")
    name = httpstan.models.calculate_model_name(path.read_text())
    folder = fake_httpstan_cache / name
    folder.mkdir(parents=True)
    (folder / "stan_services_model_x.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    with pytest.raises(CompilationError, match="incomplete") as caught:
        _pystan.PyStanBackend().compile(path)
    assert str(folder) in str(caught.value) and "Delete that folder" in str(caught.value)
    # with the compiler log present, the folder is complete: the model is used as it is
    (folder / "stderr.log").write_text("")
    assert _pystan.PyStanBackend().compile(path).model_name == name


def test_program_that_fails_to_build_gets_the_compilers_message(tmp_path):
    """The build runs in a child process; its failure comes back with httpstan's message."""
    pytest.importorskip("stan")
    from yieldwise.backends import _pystan

    bad = tmp_path / "bad.stan"
    bad.write_text("parameters { real x; }\nmodel { x ~ no_such_distribution(0, 1); }\n")
    with pytest.raises(CompilationError, match="no_such_distribution") as caught:
        _pystan.PyStanBackend().compile(bad)
    assert str(bad) in str(caught.value) and "C++ compiler" in str(caught.value)
