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

from yieldwise import _design, _mixture
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
from yieldwise.transducer import encoding
from yieldwise.transducer import stan_data as _stan_data
from yieldwise.transducer.sampler import SAMPLER_DEFAULTS


def _flat(result: SampleResult, name: str) -> np.ndarray:
    arr = result.draws[name]
    return arr.reshape(arr.shape[0] * arr.shape[1], *arr.shape[2:])


def _u(result, data):
    """(draws, U) values of u = u_centre + Q (u_axes z), Q = I + u_left u_right' (the
    preconditioning), from the draws of z: the program writes z, not u. Written out here
    with Q as a dense matrix."""
    z = _flat(result, "z")
    q = np.eye(int(data["U"])) + np.asarray(data["u_left"]) @ np.asarray(data["u_right"]).T
    return np.asarray(data["u_centre"]) + (z * np.asarray(data["u_axes"])) @ q.T


def _kernels(result, data):
    """The draws with ``mu`` and ``sigma`` (the data's kernels, not written by the program)."""
    return SampleResult(**{**vars(result), "draws": _stan_data.with_kernels(result.draws, data)})


def _numpy_log_lik(result, data):
    """The mixture's log-likelihood of the merged rows, by numpy from the draws' w, alpha,
    mu, sigma (yieldwise._mixture: log-space Normal pdf / cdf differences, no kernel data)."""
    result = _kernels(result, data)
    ll = _mixture.log_likelihood(
        _flat(result, "w"), _flat(result, "alpha"), _flat(result, "mu"), _flat(result, "sigma"),
        data["cls"] - 1, data["y_lower"], data["y_upper"], data["censored"], data["count"],
    )  # fmt: skip
    return ll.reshape(result.draws["log_lik"].shape)


def _gaussian_items():
    """Two classes, N(-1, 1) and N(1, 1), 150 items each: p(1 | y) = 1 / (1 + exp(-2 y))."""
    rng = np.random.default_rng(7)
    cls = np.repeat([0, 1], 150)
    return cls, rng.normal(np.where(cls == 1, 1.0, -1.0), 1.0)


@pytest.fixture(scope="module")
def gaussian_data():
    """The Gaussian items' Stan data (12 kernels, whitened: the default)."""
    cls, y = _gaussian_items()
    data, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, 12)
    return data


@pytest.fixture(scope="module")
def vote_data():
    """Vote fractions k/40 with exact 0s and 1s, interval-censored on the logit scale."""
    rng = np.random.default_rng(8)
    cls = (rng.random(400) < 0.3).astype(int)
    votes = rng.binomial(40, np.where(cls == 1, rng.beta(6, 1.5, 400), rng.beta(0.5, 6, 400))) / 40
    h = encoding.detect_resolution(votes)
    assert h == 1 / 40
    lo, hi = encoding.resolution_bins(votes, h, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        data, _ = _stan_data.build_stan_data(cls, logit(lo), logit(hi), [1], 2, 10)
    assert data["N"] < 100  # merged
    assert np.isneginf(data["y_lower"]).any() and np.isposinf(data["y_upper"]).any()
    return data


# The short fit (2 x (200 + 200)) runs at the package's adapt_delta for its one output
# dimension (SAMPLER_DEFAULTS.adapt_delta_for(1), 0.99), as every Transducer does. At the
# program's bare default of 0.8 it is clean only for some seeds, and which ones depends on
# the machine: over seeds 1-12 on the 2026-11-25 machine 3 of 12 diverged (1-3 each; seed 4
# among them, clean on the machine of 2026-11-24), in the neck of tau_f's funnel where a
# linear truth puts it (docs/model.md, "Conditional whitening": issue 16 item 3); at 0.95,
# 0 of 12.
GAUSSIAN_SEED = 4


@pytest.fixture(scope="module")
def gaussian_fit(transducer_program, gaussian_data):
    init = _stan_data.sampler_inits(gaussian_data, 2, seed=GAUSSIAN_SEED)
    return transducer_program.sample(
        gaussian_data, chains=2, warmup=200, draws=200, seed=GAUSSIAN_SEED, init=init,
        progress=False, adapt_delta=SAMPLER_DEFAULTS.adapt_delta_for(gaussian_data["D"]),
    )  # fmt: skip


def test_result_layout(gaussian_fit, gaussian_data, record_property):
    record_property("stan_backend", gaussian_fit.backend)
    assert gaussian_fit.backend in BACKENDS
    assert gaussian_fit.backend_version and gaussian_fit.stan_version.count(".") == 2
    k, c, r, p, u = (gaussian_data[key] for key in ("K", "C", "R", "P", "U"))
    shapes = {name: arr.shape for name, arr in gaussian_fit.draws.items()}
    # what a draw writes: z and what the transducer reads; not u, theta (the model block's
    # locals) nor the kernels mu = loc and sigma = width (the same at every draw)
    expected = {
        "w": (k,), "alpha": (k, c), "log_lik": (), "log_lik_cut_gap": (), "z": (u,),
        "tau_a": (), "tau_f": (c - 1,), "group_offset": (0, c),  # no groups: G = 0
    }  # fmt: skip
    assert u == (p - 1) + 1 + r + (c - 1) * (p + 1 + r)
    assert shapes == {name: (2, 200, *shape) for name, shape in expected.items()}
    for name in ("lp", "diverging", "tree_depth", "n_steps", "step_size", "energy"):
        assert gaussian_fit.sample_stats[name].shape == (2, 200), name
    assert gaussian_fit.sample_stats["diverging"].dtype == bool
    # the step size is fixed after warm-up: constant along draws, per chain
    steps = gaussian_fit.sample_stats["step_size"]
    assert np.all(steps == steps[:, :1])
    assert gaussian_fit.settings["seed"] == GAUSSIAN_SEED and gaussian_fit.settings["chains"] == 2
    assert gaussian_fit.sampling_seconds > 0


@pytest.fixture(scope="module")
def plain_data(gaussian_data):
    """The Gaussian data preconditioned without the whitening (the plain non-centred
    blocks); gaussian_data itself is whitened, the default."""
    assert np.asarray(gaussian_data["white_a_lambda"]).max() > 0
    data = _stan_data.precondition(gaussian_data, whiten=False)
    assert np.array_equal(data["white_a"], np.eye(int(data["R"])))
    return data


@pytest.fixture(scope="module")
def plain_fit(transducer_program, plain_data):
    init = _stan_data.sampler_inits(plain_data, 2, seed=5)
    return transducer_program.sample(
        plain_data, chains=2, warmup=100, draws=100, seed=5, init=init, progress=False
    )


@pytest.fixture(scope="module")
def floored(transducer_program):
    """The Gaussian data with a soft floor under tau_f (prior key tau_f_floor), and a
    short fit of them."""
    cls, y = _gaussian_items()
    data, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, 12, {"tau_f_floor": 1.0})
    assert data["tau_f_floor"] == 1.0
    return _short_fit(transducer_program, data, 5), data


@pytest.fixture(scope="module")
def marginal(transducer_program):
    """The Gaussian data with the density block as all outputs' log-density
    (``_design.MARGINAL_DENSITY = 1``, Stan data ``density_marginal``), and a short fit."""
    from yieldwise import _design

    cls, y = _gaussian_items()
    shipped = _design.MARGINAL_DENSITY
    try:
        _design.MARGINAL_DENSITY = 1
        data, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, 12)
    finally:
        _design.MARGINAL_DENSITY = shipped
    assert data["density_marginal"] == 1
    return _short_fit(transducer_program, data, 5), data


@pytest.fixture(scope="module")
def sparse(transducer_program):
    """The Gaussian data with the likelihood's sparse form forced (any share of values
    kept) at the largest cut allowed, 1e-6, so that values really are left out, and a
    short fit."""
    cls, y = _gaussian_items()
    shipped = _stan_data.SPARSE_SHARE_MAX
    try:
        _stan_data.SPARSE_SHARE_MAX = 1.0
        data, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, 12, kernel_tail_cut=1e-6)
    finally:
        _stan_data.SPARSE_SHARE_MAX = shipped
    kern = np.asarray(data["kern"])
    assert data["kern_sparse"] == 1 and data["kern_nz"] == int((kern >= 1e-6).sum())
    assert ((kern > 0) & (kern < 1e-6)).sum() > 100  # values left out
    return _short_fit(transducer_program, data, 5), data


@pytest.fixture(scope="module")
def centred(transducer_program):
    """Three classes with a prior centred on reference log-odds (build_stan_data's
    ``odds_mean``: a non-linear mean function, Student-t priors on the fixed part) and
    pair offsets, as a centred class reduction has them, and a short fit."""
    rng = np.random.default_rng(13)
    cls = rng.integers(0, 3, 300)
    y = rng.normal(cls, 1.0)
    odds_mean = np.column_stack([-np.abs(y), np.sin(y) - 2.0])
    grp = np.minimum(rng.integers(0, 3, 300), cls + 1)
    data, _ = _stan_data.build_stan_data(
        cls, y, y, [0], 3, 10, groups=(grp, np.array([0, 0, 1])), odds_mean=odds_mean
    )
    assert data["odds_df"] > 0 and np.ptp(np.asarray(data["odds_offset"])) > 1.0
    return _short_fit(transducer_program, data, 5), data


@pytest.fixture(scope="module")
def grouped(transducer_program):
    """Three classes in five groups under three parents (a class reduction's pair offsets;
    stan/transducer.stan, "Group offsets"), preconditioned with the default whitening, which
    whitens the offsets too, and a short fit."""
    rng = np.random.default_rng(11)
    cls = rng.integers(0, 3, 400)
    y = rng.normal(cls, 1.0)
    parent = np.array([0, 0, 1, 1, 2])
    grp = np.minimum(rng.integers(0, 5, 400), cls + 2)  # groups 3 and 4 lean to classes 1-2
    data, _ = _stan_data.build_stan_data(cls, y, y, [0], 3, 10, groups=(grp, parent))
    assert (data["G"], data["H"]) == (5, 3) and np.asarray(data["white_g_lambda"]).min() > 0
    return _short_fit(transducer_program, data, 5), data


@pytest.fixture(scope="module")
def local(transducer_program):
    """Three classes with local smoothing scales (prior key tau_l_scale; stan/transducer.stan,
    "Local smoothing scales") and pair offsets, so that the local blocks sit after the
    groups' in u, preconditioned with the default whitening (the local blocks' too), and a
    short fit."""
    rng = np.random.default_rng(14)
    cls = rng.integers(0, 3, 300)
    y = rng.normal(cls, 1.0)
    grp = np.minimum(rng.integers(0, 3, 300), cls + 1)
    data, _ = _stan_data.build_stan_data(
        cls, y, y, [0], 3, 12, {"tau_l_scale": 5.0}, groups=(grp, np.array([0, 0, 1]))
    )
    assert (data["J"], data["M"], data["G"]) == (7, 8, 3)
    assert np.asarray(data["white_l_lambda"]).max() > 0  # whitened
    return _short_fit(transducer_program, data, 5), data


@pytest.fixture(scope="module")
def local_t(transducer_program):
    """Two classes with local smoothing scales under a half-Student-t (a half-Cauchy:
    ``_design.LOCAL_DF = 1``, Stan data ``tau_l_df``), and a short fit."""
    from yieldwise import _design

    cls, y = _gaussian_items()
    shipped = _design.LOCAL_DF
    try:
        _design.LOCAL_DF = 1.0
        data, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, 12, {"tau_l_scale": 1.0})
    finally:
        _design.LOCAL_DF = shipped
    assert (data["tau_l_df"], data["J"]) == (1.0, 7)
    return _short_fit(transducer_program, data, 5), data


@pytest.fixture(scope="module")
def linear(transducer_program):
    """Hard labels: two distinct outputs (a binary classifier's 0 / 1 on the logit scale,
    squeezed), so the design has no smooth part (``R = 0``, :func:`_design.distinct_outputs`)
    and only the linear smooth limit is sampled; with pair offsets too (grouped rows), as
    a one-hot classifier's reduced fit has them. A short fit of each."""
    rng = np.random.default_rng(12)
    cls = rng.integers(0, 3, 300)
    y = np.where(rng.random(300) < 0.8, np.minimum(cls, 1), 1 - np.minimum(cls, 1)) * 8.0 - 4.0
    plain, _ = _stan_data.build_stan_data(np.minimum(cls, 1), y, y, [0], 2)
    grp = np.minimum(rng.integers(0, 3, 300), cls + 1)
    groups, _ = _stan_data.build_stan_data(cls, y, y, [0], 3, groups=(grp, np.array([0, 0, 1])))
    assert plain["R"] == 0 and groups["R"] == 0 and groups["G"] == 3
    return {
        "linear": (_short_fit(transducer_program, plain, 5), plain),
        "linear, grouped": (_short_fit(transducer_program, groups, 5), groups),
    }


@pytest.mark.parametrize(
    "form",
    ["non-centred", "whitened", "floored", "marginal", "sparse", "grouped", "linear",
     "linear, grouped", "centred", "local", "local, half-t"],
)  # fmt: skip
def test_stan_target_is_the_numpy_log_density(
    form, gaussian_fit, gaussian_data, plain_fit, plain_data, floored, marginal, sparse, grouped,
    linear, centred, local, local_t,
):  # fmt: skip
    """Stan's lp__ at every draw equals yieldwise's numpy log density (likelihood, priors,
    whitening and its Jacobian, Jacobians of the log scales) at the same u, up to one constant: the
    preconditioning map's log Jacobian. Checks the program's model block term by term
    against an implementation written separately (yieldwise/backends/_laplace.py)."""
    from yieldwise.backends._laplace import TransducerDensity

    fit, data = {
        "non-centred": (plain_fit, plain_data), "whitened": (gaussian_fit, gaussian_data),
        "floored": floored, "marginal": marginal, "sparse": sparse, "grouped": grouped,
        "centred": centred, "local": local, "local, half-t": local_t, **linear,
    }[form]  # fmt: skip
    model = TransducerDensity(data)
    u = _u(fit, data)
    numpy_lp = np.array([model.log_density(row)[0] for row in u[::5]])
    stan_lp = fit.sample_stats["lp"].reshape(-1)[::5]
    difference = stan_lp - numpy_lp
    assert np.ptp(difference) < 1e-6 * max(1.0, np.abs(stan_lp).max())


@pytest.mark.parametrize("form", ["grouped", "centred", "local"])
def test_stan_group_offsets_and_log_lik_are_the_numpy_ones(form, grouped, centred, local):
    """The program's generated group_offset, log_lik and mixture (w, alpha) at every draw
    equal the numpy density's (the conditionally whitened offsets mapped back the same way;
    with a centred prior, its mean function added to the log-odds; with local blocks, their
    share of the log-odds)."""
    from yieldwise.backends._laplace import TransducerDensity

    fit, data = {"grouped": grouped, "centred": centred, "local": local}[form]
    model = TransducerDensity(data)
    u = _u(fit, data)
    q = model.quantities(u)
    g = int(data["G"])
    np.testing.assert_allclose(
        fit.draws["group_offset"].reshape(u.shape[0], g, 3), q["group_offset"], atol=1e-8
    )
    np.testing.assert_allclose(fit.draws["log_lik"].reshape(-1), q["log_lik"], rtol=1e-8)
    np.testing.assert_allclose(fit.draws["w"].reshape(q["w"].shape), q["w"], rtol=1e-8)
    np.testing.assert_allclose(fit.draws["alpha"].reshape(q["alpha"].shape), q["alpha"], rtol=1e-8)


def test_log_lik_stays_finite_where_a_class_column_underflows(
    stan_backend, transducer_program, gaussian_fit, gaussian_data
):
    """Generated quantities at a draw whose class-1 log-odds lie 1,000 below everywhere:
    ``beta = exp(theta - log_norm)`` underflows in that column, which made ``log_lik``
    -inf, or (here, where only the weights of kernels far from some rows survive) finite
    and wrong: -106,419 against -150,418 (the program of 4b667ca). The program now
    shifts each class column by its own largest theta (as its model block does), so
    ``log_lik`` is finite and equals the numpy density's, which sums in log space where a
    row's terms underflow (yieldwise/backends/_laplace.py)."""
    if stan_backend.name != "pystan":
        pytest.skip("runs generated quantities at a chosen z through PyStan's fixed_param")
    import stan
    from yieldwise.backends._laplace import TransducerDensity
    from yieldwise.backends._pystan import _ensure_event_loop_reentrant

    data = gaussian_data
    u = _u(gaussian_fit, data)[0].copy()
    p, r = int(data["P"]), int(data["R"])
    fixed = np.asarray(data["fixed_basis"])
    assert np.ptp(fixed[:, 0]) == 0 and fixed[0, 0] != 0  # the class log-odds' intercept
    u[p + r] -= 1000.0 / fixed[0, 0]  # (a_fixed, log tau_a, a_raw | f_fixed, ...): f's first
    q = np.eye(int(data["U"])) + np.asarray(data["u_left"]) @ np.asarray(data["u_right"]).T
    z = np.linalg.solve(q, u - np.asarray(data["u_centre"])) / np.asarray(data["u_axes"])
    _ensure_event_loop_reentrant()
    posterior = stan.build(transducer_program.code, data=dict(data), random_seed=1)
    fit = posterior.fixed_param(num_chains=1, num_samples=1, init=[{"z": z.tolist()}])
    np.testing.assert_allclose(np.asarray(fit["z"])[:, 0], z, rtol=1e-10)  # at that z
    stan_ll = np.asarray(fit["log_lik"]).reshape(-1)
    expected = TransducerDensity(data).quantities(u[None])["log_lik"]
    assert np.isfinite(expected).all() and expected[0] < -1000.0  # class 1's rows pay it
    np.testing.assert_allclose(stan_ll, expected, rtol=1e-8)


@pytest.mark.parametrize("form", ["non-centred", "whitened"])
def test_generated_mixture_is_the_softmax_of_theta(
    form, gaussian_fit, gaussian_data, plain_fit, plain_data
):
    """w, alpha, tau_a and tau_f as the program writes them, against theta worked out here
    from the draws of z alone: u = u_centre + S z (the preconditioning), u's blocks, the
    smooth blocks' coefficients and theta = (a, a + f) (theory 3.1's mixture as
    docs/model.md writes it)."""
    if form == "non-centred":
        gaussian_fit, gaussian_data = plain_fit, plain_data
    # u = u_centre + S z (the preconditioning, _u), then u's blocks, written out here:
    # (a_fixed, log tau_a, a_raw, f_fixed, log tau_f, f_raw), matrices column by column
    u = _u(gaussian_fit, gaussian_data)
    s = u.shape[0]
    p, r, c1 = gaussian_data["P"], gaussian_data["R"], gaussian_data["C"] - 1
    a_fixed, log_tau_a, a_raw = u[:, : p - 1], u[:, p - 1], u[:, p : p + r]
    rest = u[:, p + r :]
    f_fixed = rest[:, : p * c1].reshape(s, c1, p).transpose(0, 2, 1)
    log_tau_f = rest[:, p * c1 : p * c1 + c1]
    f_raw = rest[:, p * c1 + c1 :].reshape(s, c1, r).transpose(0, 2, 1)
    np.testing.assert_allclose(_flat(gaussian_fit, "tau_a"), np.exp(log_tau_a), rtol=1e-9)
    np.testing.assert_allclose(_flat(gaussian_fit, "tau_f"), np.exp(log_tau_f), rtol=1e-9)
    # theta[k, c] = a[k] + f_c[k] with f_1 = 0: the first class column is the density a.
    # Each smooth block's coefficients are b = Q (v kappa + sqrt(v) e), v = 1 / (lambda +
    # tau^-2) (the whitening; non-centred b = tau e when lambda = kappa = 0, Q = I)
    fixed, smooth = gaussian_data["fixed_basis"], gaussian_data["smooth_basis"]
    d = gaussian_data

    def coefficients(rotation, lam, kappa, log_tau, e):
        v = 1 / (lam + np.exp(-2 * log_tau)[:, None])
        return (v * kappa + np.sqrt(v) * e) @ np.asarray(rotation).T

    a_smooth = coefficients(d["white_a"], d["white_a_lambda"], d["white_a_kappa"], log_tau_a, a_raw)
    a = a_smooth @ smooth.T + a_fixed @ fixed[:, 1:].T
    f_smooth = np.stack([
        coefficients(d["white_f"][c], d["white_f_lambda"][:, c], d["white_f_kappa"][:, c],
                     log_tau_f[:, c], f_raw[:, :, c])
        for c in range(c1)
    ], axis=2)  # fmt: skip
    f = np.einsum("kp,spc->skc", fixed, f_fixed) + np.einsum("kr,src->skc", smooth, f_smooth)
    theta = np.concatenate([a[:, :, None], a[:, :, None] + f], axis=2)
    beta = np.exp(theta - theta.max(axis=(1, 2), keepdims=True))
    beta /= beta.sum(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(_flat(gaussian_fit, "w"), beta.sum(axis=2), rtol=1e-8)
    np.testing.assert_allclose(
        _flat(gaussian_fit, "alpha"), beta / beta.sum(axis=2, keepdims=True), rtol=1e-8
    )
    # the kernels are fixed: every draw gets the data's locations and widths
    kernels = _stan_data.with_kernels(gaussian_fit.draws, gaussian_data)
    for name, field in (("mu", "loc"), ("sigma", "width")):
        np.testing.assert_array_equal(kernels[name], np.broadcast_to(
            gaussian_data[field], (*gaussian_fit.draws["w"].shape[:2], *gaussian_data[field].shape)
        ))  # fmt: skip


def test_transducer_recovers_known_truth(gaussian_fit, gaussian_data):
    y = np.array([-1.0, 0.0, 1.0])
    fit = _kernels(gaussian_fit, gaussian_data)
    log_g = _mixture.log_joint(
        _flat(fit, "w"), _flat(fit, "alpha"), _flat(fit, "mu"), _flat(fit, "sigma"), y, y, [0],
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
    init = _stan_data.sampler_inits(data, 2, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplerWarning)  # a short run; only values matter
        return program.sample(
            data, chains=2, warmup=100, draws=100, seed=seed, init=init, progress=False
        )


def test_numpy_log_likelihood_equals_stan_censored_outputs(transducer_program, vote_data):
    fit = _short_fit(transducer_program, vote_data, 4)
    np.testing.assert_allclose(_numpy_log_lik(fit, vote_data), fit.draws["log_lik"], rtol=1e-8)


def _route_data(route: str):
    """Data sets whose kernel values come from each kind of row (points, bins, both)."""
    rng = np.random.default_rng(21)
    cls = (rng.random(300) < 0.4).astype(int)
    y = rng.normal(np.where(cls == 1, 1.0, -1.0), 1.0)
    if route == "point, repeated rows":  # counts > 1 in several groups
        y1 = np.round(y, 1)
        return _stan_data.build_stan_data(cls, y1, y1, [0], 2, 5)[0]
    votes = np.clip(np.round((y + 3) / 6 * 40), 0, 40) / 40
    lo, hi = encoding.resolution_bins(votes, 1 / 40, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        lo, hi = logit(lo), logit(hi)
    if route == "censored, overlapping bins":  # bins twice as wide: not a lattice tiling
        wide_lo, wide_hi = encoding.resolution_bins(votes, 1 / 20, (0.0, 1.0))
        with np.errstate(divide="ignore"):
            return _stan_data.build_stan_data(cls, logit(wide_lo), logit(wide_hi), [1], 2, 5)[0]
    second = rng.normal(np.where(cls == 1, 0.5, -0.5), 1.0)
    if route == "censored + point":
        return _stan_data.build_stan_data(
            cls, np.column_stack([lo, second]), np.column_stack([hi, second]), [1, 0], 2, 16
        )[0]
    assert route == "two censored"
    v2 = np.clip(np.round((second + 3) / 6 * 20), 0, 20) / 20
    lo2, hi2 = encoding.resolution_bins(v2, 1 / 20, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        lo2, hi2 = logit(lo2), logit(hi2)
    return _stan_data.build_stan_data(
        cls, np.column_stack([lo, lo2]), np.column_stack([hi, hi2]), [1, 1], 2, 16
    )[0]


ROUTES = ["point, repeated rows", "censored, overlapping bins", "censored + point", "two censored"]


@pytest.mark.parametrize("route", ROUTES)
def test_numpy_log_likelihood_equals_stan_on_every_route(transducer_program, route):
    data = _route_data(route)
    if route == "point, repeated rows":
        assert (data["count"] > 1).any() and len(set(data["count"])) > 2
    fit = _short_fit(transducer_program, data, 5)
    np.testing.assert_allclose(_numpy_log_lik(fit, data), fit.draws["log_lik"], rtol=1e-8)


@pytest.mark.parametrize("dims", [1, 2])
def test_far_outlier_row_is_carried_by_its_log_scale(transducer_program, dims):
    """A bin ~200 kernel widths beyond the grid has probability ~exp(-20000) under every
    kernel: zero in floating point. The data carry each row's kernel values divided by
    their largest, and that largest's log in kern_log_scale, so Stan's log-likelihood
    stays finite and equals numpy's log-space computation from w, alpha, mu, sigma."""
    rng = np.random.default_rng(3)
    n = 600  # one item in 601 is below the 1 % the grid's range leaves out
    cls = np.r_[(rng.random(n) < 0.5).astype(int), 1]
    values = np.r_[rng.integers(0, 21, n) / 20, 50.0]  # one item at 50, far from [0, 1]
    lo, hi = encoding.resolution_bins(values, 1 / 20)
    if dims == 1:
        data, design = _stan_data.build_stan_data(cls, lo, hi, [1], 2, 5)
    else:
        z = rng.normal(size=n + 1)
        data, design = _stan_data.build_stan_data(
            cls, np.column_stack([lo, z]), np.column_stack([hi, z]), [1, 0], 2, 9
        )
    # the grid ignores the outlier: a 1-D lattice's grid (5 nodes over [0, 1], spacing
    # 0.25) goes on at most EXTEND_MAX_1D nodes beyond its range, far short of 50
    reach = 1.0 + (_design.EXTEND_MAX_1D * 0.25 if dims == 1 else 0.0)
    assert design.loc[:, 0].max() <= reach + 1e-9
    outlier = int(np.flatnonzero(data["y_lower"][:, 0] > 40)[0])
    assert data["kern_log_scale"][outlier] < np.log(1e-300)  # underflows as a plain number
    fit = _short_fit(transducer_program, data, 6)
    assert np.isfinite(fit.draws["log_lik"]).all()
    np.testing.assert_allclose(_numpy_log_lik(fit, data), fit.draws["log_lik"], rtol=1e-8)


def test_same_seed_same_draws(transducer_program, gaussian_data, gaussian_fit):
    init = _stan_data.sampler_inits(gaussian_data, 2, seed=GAUSSIAN_SEED)
    again = transducer_program.sample(
        gaussian_data, chains=2, warmup=200, draws=200, seed=GAUSSIAN_SEED, init=init,
        progress=False, adapt_delta=SAMPLER_DEFAULTS.adapt_delta_for(gaussian_data["D"]),
    )  # fmt: skip
    np.testing.assert_array_equal(again.draws["log_lik"], gaussian_fit.draws["log_lik"])


def test_bad_data_raises_sampling_error_with_backend_message(transducer_program, gaussian_data):
    bad = dict(gaussian_data)
    bad["kern"] = np.asarray(bad["kern"])[:-1]  # one row short
    with pytest.raises(SamplingError, match="kern") as info:
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


# --- a profiler holding PyStan's frames (the Dask worker race) -------------------------


class _FrameHolder:
    """A profile hook that keeps the frame of PyStan's log-line reader after it returns.

    This is what a sampling profiler in another thread (Dask's worker profiler) does
    when it happens to look at the reader's frame just as the frame returns: the
    frame's locals, the parsed line's simdjson proxy among them, outlive the call, and
    PyStan's next ``parser.parse`` raises "Tried to re-use a parser". Here the hook runs
    in the sampling thread itself, so the race happens every time, deterministically.
    It lets go when ``sample`` is called again, and holds at most ``times`` frames.
    """

    def __init__(self, times: int):
        self.times, self.held, self.calls = times, [], 0

    def __call__(self, frame, event, arg):
        code = frame.f_code
        if (
            event == "call"
            and code.co_name == "sample"
            and code.co_filename.endswith("stan/model.py")
        ):
            self.calls += 1
            self.held.clear()
        elif (
            event == "return"
            and code.co_name == "is_nonempty_logger_message"
            and not self.held
            and self.times > 0
        ):
            self.times -= 1
            self.held.append(frame)


def _pystan_only(transducer_program):
    if transducer_program.backend_name != "pystan":
        pytest.skip("the output-reading race is PyStan's (pysimdjson)")


def _sample_with_hook(program, data, hook):
    import sys

    sys.setprofile(hook)
    try:
        return program.sample(data, chains=2, warmup=60, draws=60, seed=11, progress=False)
    finally:
        sys.setprofile(None)
        hook.held.clear()


def test_a_profiler_holding_pystans_reader_is_survived(transducer_program, gaussian_data):
    _pystan_only(transducer_program)
    plain = transducer_program.sample(
        gaussian_data, chains=2, warmup=60, draws=60, seed=11, progress=False
    )
    hook = _FrameHolder(times=2)
    disturbed = _sample_with_hook(transducer_program, gaussian_data, hook)
    assert hook.calls == 3  # two reads met the race, the third read the chains
    np.testing.assert_array_equal(disturbed.draws["log_lik"], plain.draws["log_lik"])
    np.testing.assert_array_equal(disturbed.draws["alpha"], plain.draws["alpha"])


def test_a_profiler_that_never_lets_go_gets_an_actionable_error(transducer_program, gaussian_data):
    _pystan_only(transducer_program)
    hook = _FrameHolder(times=1_000)
    with pytest.raises(SamplingError, match="re-use a parser") as info:
        _sample_with_hook(transducer_program, gaussian_data, hook)
    assert "distributed.worker.profile.enabled" in str(info.value)
    assert hook.calls == 5


def test_a_stale_truncated_fit_does_not_repeat_the_reader_race(
    transducer_program, gaussian_data, caplog
):
    """A truncated fit of another request, left in the cache by an earlier version, is not
    the cause of the reader race: the race is diagnosed after its own five reads, with no
    second round of sampling and the stale file left for the request it belongs to (CI,
    2026-12-06: ten reads instead of five)."""
    _pystan_only(transducer_program)
    import gzip

    directory = transducer_program._backend._fits_directory(transducer_program.model_name)
    directory.mkdir(parents=True, exist_ok=True)
    stale = directory / "zzstaletest.jsonlines.gz"
    whole = gzip.compress(b'{"topic": "sample"}\n' * 200)
    stale.write_bytes(whole[: len(whole) // 2])
    try:
        hook = _FrameHolder(times=1_000)
        with (
            caplog.at_level("WARNING", logger="yieldwise"),
            pytest.raises(SamplingError, match="re-use a parser"),
        ):
            _sample_with_hook(transducer_program, gaussian_data, hook)
        assert hook.calls == 5
        assert "truncated" not in caplog.text
        assert stale.exists()
    finally:
        stale.unlink(missing_ok=True)


def test_a_truncated_fit_left_in_httpstans_cache_is_sampled_afresh(
    transducer_program, gaussian_data, monkeypatch, caplog
):
    """A run interrupted while httpstan wrote a fit used to leave a truncated file that
    httpstan returned for every later identical (same seed) request: here the files of a
    kept fit are cut in half, and the same request samples again and gives the same draws."""
    _pystan_only(transducer_program)
    import gzip

    from yieldwise.backends import _pystan

    directory = transducer_program._backend._fits_directory(transducer_program.model_name)
    before = _pystan._listing(directory)
    kept = []
    monkeypatch.setattr(
        _pystan, "_forget_fits", lambda d, b, o: kept.extend(_pystan._listing(d) - b)
    )
    plain = transducer_program.sample(
        gaussian_data, chains=2, warmup=60, draws=60, seed=23, progress=False
    )
    monkeypatch.undo()
    assert len(kept) == 2  # one file per chain, left in the cache for the identical request
    for path in kept:
        whole = path.read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
        with pytest.raises(EOFError):
            gzip.decompress(path.read_bytes())
    with caplog.at_level("WARNING", logger="yieldwise"):
        again = transducer_program.sample(
            gaussian_data, chains=2, warmup=60, draws=60, seed=23, progress=False
        )
    assert "2 truncated fit file(s)" in caplog.text
    np.testing.assert_array_equal(again.draws["log_lik"], plain.draws["log_lik"])
    assert _pystan._listing(directory) - before == set()  # the fresh fit was forgotten too


def test_httpstans_fit_cache_is_written_whole_or_not_at_all(fake_httpstan_cache, monkeypatch):
    pytest.importorskip("httpstan")
    import httpstan.cache

    from yieldwise.backends import _pystan

    _pystan._write_fits_whole()
    assert httpstan.cache.dump_fit is _pystan._dump_fit_whole
    httpstan.cache.dump_fit(b"whole", "models/abc/fits/one")
    target = fake_httpstan_cache / "models" / "abc" / "fits" / "one.jsonlines.gz"
    assert target.read_bytes() == b"whole"

    def interrupted(source, destination):
        raise KeyboardInterrupt

    monkeypatch.setattr(_pystan.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        httpstan.cache.dump_fit(b"cut short", "models/abc/fits/two")
    assert sorted(p.name for p in target.parent.iterdir()) == ["one.jsonlines.gz"]


def test_a_class_without_rows_leaves_the_target_the_numpy_log_density(transducer_program):
    """The likelihood multiplies each class's block of rows by its own column of beta; a
    class with no calibration rows (here the middle one of three) has an empty block, and
    lp__ still equals the numpy density (which multiplies every row by every column)."""
    from yieldwise.backends._laplace import TransducerDensity

    rng = np.random.default_rng(8)
    cls = np.where(rng.random(240) < 0.5, 0, 2)
    y = rng.normal(np.where(cls == 2, 1.0, -1.0), 1.0)
    data = _stan_data.build_stan_data(cls, y, y, [0], 3, 6)[0]
    assert 2 not in set(np.asarray(data["cls"]))  # class index 1 (Stan's 2) has no rows
    fit = _short_fit(transducer_program, data, 9)
    model = TransducerDensity(data)
    u = _u(fit, data)
    difference = fit.sample_stats["lp"].reshape(-1)[::7] - np.array(
        [model.log_density(row)[0] for row in u[::7]]
    )
    assert np.ptp(difference) < 1e-6 * max(1.0, np.abs(fit.sample_stats["lp"]).max())


def test_the_sparse_form_with_three_classes_one_without_rows(transducer_program):
    """The compressed rows place each row's values in its own class's block of K columns,
    beta's columns stacked in class order: with three classes, the middle one without
    rows, and the sparse form forced at the largest cut allowed, lp__ still equals the
    numpy density (whose kernel matrix is kern with the values below the cut set to 0)."""
    from yieldwise.backends._laplace import TransducerDensity

    rng = np.random.default_rng(8)
    cls = np.where(rng.random(240) < 0.5, 0, 2)
    y = rng.normal(np.where(cls == 2, 1.0, -1.0), 1.0)
    shipped = _stan_data.SPARSE_SHARE_MAX
    try:
        _stan_data.SPARSE_SHARE_MAX = 1.0
        data = _stan_data.build_stan_data(cls, y, y, [0], 3, 6, kernel_tail_cut=1e-6)[0]
    finally:
        _stan_data.SPARSE_SHARE_MAX = shipped
    assert data["kern_sparse"] == 1 and set(np.asarray(data["cls"])) == {1, 3}
    model = TransducerDensity(data)
    kern = np.asarray(data["kern"])
    np.testing.assert_array_equal(model.kern, np.where(kern >= 1e-6, kern, 0.0))
    fit = _short_fit(transducer_program, data, 9)
    u = _u(fit, data)
    difference = fit.sample_stats["lp"].reshape(-1)[::7] - np.array(
        [model.log_density(row)[0] for row in u[::7]]
    )
    assert np.ptp(difference) < 1e-6 * max(1.0, np.abs(fit.sample_stats["lp"]).max())


def test_rows_out_of_class_order_are_refused(transducer_program):
    rng = np.random.default_rng(10)
    cls = (rng.random(80) < 0.5).astype(int)
    y = rng.normal(cls, 1.0)
    data = dict(_stan_data.build_stan_data(cls, y, y, [0], 2, 5)[0])
    data["cls"] = np.asarray(data["cls"])[::-1].copy()
    from yieldwise.backends import SamplingError

    with pytest.raises(SamplingError, match="cls must be sorted"):
        transducer_program.sample(data, chains=1, warmup=10, draws=10, seed=1, progress=False)


def test_large_data_raise_no_transport_warning(transducer_program):
    """A few thousand rows (data over aiohttp's 1 MiB raw-body limit) sample without
    httpstan's transport notices reaching the user; the user's own warnings still pass."""
    import json

    rng = np.random.default_rng(12)
    cls = np.repeat([0, 1], 1500)
    y = rng.normal(np.where(cls == 1, 1.0, -1.0), 1.0)
    data, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, 30, preconditioned=False)
    payload = {k: np.asarray(v).tolist() for k, v in data.as_dict().items()}
    assert len(json.dumps(payload)) > 2**20  # aiohttp warns above 1 MiB
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        transducer_program.sample(data, chains=1, warmup=10, draws=10, seed=4, progress=False)
        warnings.warn("the user's own", ResourceWarning, stacklevel=1)
    messages = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert messages == ["the user's own"]


def test_the_sparse_forms_gap_is_what_the_values_left_out_add(sparse, gaussian_fit):
    """With the sparse form, log_lik is still the full kernels' (numpy from w, alpha, mu,
    sigma alone), and log_lik_cut_gap is what the values below the cut add to it: by numpy,
    the rows' likelihoods with kern and with kern's values below 1e-6 set to 0. The dense
    form reports a gap of exactly 0."""
    fit, data = sparse
    np.testing.assert_allclose(fit.draws["log_lik"], _numpy_log_lik(fit, data), rtol=1e-9)
    kern = np.asarray(data["kern"])
    beta = _flat(fit, "w")[:, :, None] * _flat(fit, "alpha")  # (S, K, C)
    rows, cls, count = np.arange(data["N"]), np.asarray(data["cls"]) - 1, data["count"]
    full = (kern @ beta)[:, rows, cls]
    cut = (np.where(kern >= 1e-6, kern, 0.0) @ beta)[:, rows, cls]
    gap = (np.log(full) - np.log(cut)) @ count
    assert gap.min() > 0
    np.testing.assert_allclose(_flat(fit, "log_lik_cut_gap"), gap, rtol=1e-6, atol=1e-12)
    assert (gaussian_fit.draws["log_lik_cut_gap"] == 0).all()


def test_httpstan_reads_each_chain_by_polling_never_blocking_the_event_loop(monkeypatch):
    """The PyStan backend makes httpstan's chain readers poll (select with timeout 0): a
    socket with nothing to read returns at once whatever the timeout asked, one with data
    is reported readable; installing twice keeps one stand-in, and only where httpstan's
    module holds the select module itself."""
    import select
    import socket
    import time

    from yieldwise.backends import _pystan

    a, b = socket.socketpair()
    with a, b:
        started = time.perf_counter()
        assert _pystan._PollingSelect.select([a], [], [], 5.0) == ([], [], [])
        assert time.perf_counter() - started < 0.5
        b.sendall(b"draw")
        assert _pystan._PollingSelect.select([a], [], [], 5.0)[0] == [a]
    stub = pytest.importorskip("httpstan.services_stub")
    monkeypatch.setattr(stub, "select", select)
    _pystan._read_chains_in_turn()
    installed = stub.select
    assert isinstance(installed, _pystan._PollingSelect)
    _pystan._read_chains_in_turn()
    assert stub.select is installed
    other = object()
    monkeypatch.setattr(stub, "select", other)  # a layout it was not measured on
    _pystan._read_chains_in_turn()
    assert stub.select is other
