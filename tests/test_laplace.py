"""The Laplace approximation (backend="laplace"): its density, gradient and draws.

Checked against independent computations: the log-likelihood against the mixture's
definition with scipy's Normal densities (not the kernel matrix), the gradient against
finite differences, the mode against the truth of a large simulated data set, and the
draws' spread against the inverse Hessian; plus the backend's place in the registry.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit, logsumexp
from scipy.stats import norm
from scipy.stats import t as halft  # doubled below zero: the constant cancels

from yieldwise import Transducer
from yieldwise.backends import (
    APPROXIMATIONS,
    BACKENDS,
    CompilationError,
    SamplerWarning,
    backend_names,
    get_backend,
    stan_file,
)
from yieldwise.backends._laplace import TransducerDensity
from yieldwise.transducer.stan_data import build_stan_data, initial_values


def _data(n=300, dims=1, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, classes, n)
    y = rng.normal(c[:, None] * 1.5, 1.0, (n, dims))
    data, design = build_stan_data(c, y, y, None, classes, n_components=9 if dims == 2 else 12)
    return data, design, y, c


def _random_u(model, rng):
    u = rng.normal(0, 0.5, model.size)
    u[model.slices["log_tau_a"]] = np.log(2.0)
    u[model.slices["log_tau_f"]] = np.log(0.7)
    return u


@pytest.mark.parametrize("dims", [1, 2])
def test_quantities_in_blocks_of_draws_are_each_draws_own(dims, monkeypatch):
    """quantities() forms the rows' likelihoods a few draws at a time (a small block
    budget here): every draw's log_lik and cut gap are those of the draw alone (the sparse
    form, cut coarsely, leaves a gap in every draw)."""
    from yieldwise.backends import _laplace

    rng = np.random.default_rng(4)
    c = rng.integers(0, 2, 300)
    y = rng.normal(c[:, None] * 1.5, 1.0, (300, dims))
    # a coarse cut, so that the sparse form leaves values out and each draw has a gap
    data, _ = build_stan_data(c, y, y, None, 2, n_components=100 if dims == 2 else 40,
                              kernel_tail_cut=1e-6)  # fmt: skip
    model = TransducerDensity(data)
    assert model.kern is not model.kern_full
    us = np.stack([_random_u(model, rng) for _ in range(5)])
    alone = [model.quantities(u[None]) for u in us]
    monkeypatch.setattr(_laplace, "_QUANTITY_BLOCK", 2 * 300 * 2)  # two draws a block
    together = model.quantities(us)
    for key in ("log_lik", "log_lik_cut_gap", "w"):
        np.testing.assert_allclose(together[key], np.concatenate([q[key] for q in alone]),
                                   rtol=1e-10, atol=1e-12)  # fmt: skip
    assert (together["log_lik_cut_gap"] > 1e-6).all()


def test_a_row_far_below_its_class_top_keeps_a_finite_log_likelihood():
    """A row whose kernels' weights lie 900 nats below its class column's largest (a
    lattice bin far beyond the grid, in a draw from the approximation's tail): exp
    underflows to 0 even after the column's shift, so the row's log-likelihood is taken
    again as a log-sum-exp over its kernels, equal to that computed here by brute force.
    Before, log 0 made the fit's log-likelihood -inf and its cut gap NaN."""
    data, *_ = _data()
    model = TransducerDensity(data)
    K, C = model.kern_full.shape[1], model.C
    rng = np.random.default_rng(3)
    theta = rng.normal(0, 1, (2, K, C))
    n = 0  # the first row: push every kernel it reaches far below its class's top
    reached = model.kern_full[n] > 0
    theta[0, reached, model.cls[n]] = -900.0 + rng.normal(0, 1, reached.sum())
    theta[0, ~reached, model.cls[n]] = 5.0  # the column's top, where the row has no mass
    log_norm = logsumexp(theta, axis=(1, 2))
    top = theta.max(axis=1, keepdims=True)
    shift = (top[:, 0, :] - log_norm[:, None])[:, model.cls]
    with np.errstate(divide="ignore"):
        out = model._log_rows(model.kern_full, np.exp(theta - top), theta, shift)
        log_kern = np.log(model.kern_full)
    assert np.isfinite(out).all()
    brute = np.array([[logsumexp(log_kern[i] + theta[d, :, model.cls[i]]) - log_norm[d]
                       for i in range(model.cls.size)] for d in range(2)])  # fmt: skip
    np.testing.assert_allclose(out, brute, rtol=1e-12, atol=1e-9)
    assert out[0, n] < -800  # the pushed row, not an underflowed 0 read as -inf


@pytest.mark.parametrize(("dims", "classes"), [(1, 2), (2, 2), (1, 3)])
def test_log_likelihood_is_the_mixture_of_normal_kernels(dims, classes):
    data, design, y, c = _data(dims=dims, classes=classes)
    model = TransducerDensity(data)
    u = _random_u(model, np.random.default_rng(1))
    q = model.quantities(u[None])
    beta = np.exp(q["theta"][0] - logsumexp(q["theta"][0]))
    # p(c_i, y_i) = sum_k beta[k, c_i] prod_d Normal(y_id; loc_kd, width_d), item by item
    dens = norm.pdf(y[:, None, :], design.loc[None], design.width[None, None, :]).prod(axis=2)
    brute = np.log((dens * beta[:, c].T).sum(axis=1)).sum()
    assert q["log_lik"][0] == pytest.approx(brute, rel=1e-10)
    # Stan's w and alpha: the row sums of beta and its rows normalised
    assert np.allclose(q["w"][0], beta.sum(axis=1))
    assert np.allclose(q["alpha"][0], beta / beta.sum(axis=1, keepdims=True))


@pytest.mark.parametrize(("dims", "classes", "marginal"), [(1, 2, 0), (1, 3, 0), (2, 2, 0),
                                                          (1, 3, 1), (2, 2, 1)])  # fmt: skip
def test_theta_is_class_one_log_weight_plus_log_odds(dims, classes, marginal):
    """w and alpha from theta[k, c] = a[k] + f_c[k] (f_1 = 0), with a and f the bases times
    the coefficients, written out by hand (non-centred, no whitening): alpha_k =
    softmax(0, f_2[k], ..., f_C[k]) and w_k proportional to exp(a_k) sum_c exp(f_c[k]), so
    a is the first class's log weight (docs/model.md, "The density block"); with
    density_marginal = 1, w_k is proportional to exp(a_k) (a: all outputs' log-density)."""
    rng = np.random.default_rng(2)
    c = rng.integers(0, classes, 300)
    y = rng.normal(c[:, None] * 1.5, 1.0, (300, dims))
    k = 9 if dims == 2 else 12
    data, _ = build_stan_data(c, y, y, None, classes, n_components=k, preconditioned=False)
    model = TransducerDensity({**data, "density_marginal": marginal})
    u = _random_u(model, rng)
    s, c1 = model.slices, classes - 1
    fixed, smooth = np.asarray(data["fixed_basis"]), np.asarray(data["smooth_basis"])
    a = fixed[:, 1:] @ u[s["a_fixed"]] + np.exp(u[s["log_tau_a"]][0]) * smooth @ u[s["a_raw"]]
    f_fixed = u[s["f_fixed"]].reshape(c1, -1).T  # column-major, as Stan's to_matrix
    f_raw = u[s["f_raw"]].reshape(c1, -1).T
    f = fixed @ f_fixed + smooth @ (f_raw * np.exp(u[s["log_tau_f"]]))
    q = model.quantities(u[None])
    odds = np.column_stack([np.zeros(a.size), f])
    weight = np.exp(a) if marginal else np.exp(a) * np.exp(odds).sum(axis=1)
    np.testing.assert_allclose(q["w"][0], weight / weight.sum(), rtol=1e-10)
    expected = np.exp(odds) / np.exp(odds).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(q["alpha"][0], expected, rtol=1e-10)


def _random_whitening(data, rng):
    """Whitening data anywhere in their domain: random rotations, lambda >= 0, any kappa."""
    r, c1 = int(data["R"]), int(data["C"]) - 1
    rotations = np.stack([np.linalg.qr(rng.normal(size=(r, r)))[0] for _ in range(c1 + 1)])
    return {
        **data, "white_a": rotations[0], "white_f": rotations[1:],
        "white_a_lambda": rng.uniform(0, 5, r), "white_f_lambda": rng.uniform(0, 5, (r, c1)),
        "white_a_kappa": rng.normal(size=r), "white_f_kappa": rng.normal(size=(r, c1)),
    }  # fmt: skip


@pytest.mark.parametrize(("dims", "classes", "floor", "marginal", "level"), [
    (1, 2, 0.0, 0, 0.0), (2, 2, 0.0, 0, 0.0), (1, 3, 0.0, 0, 0.0), (1, 3, 0.9, 0, 0.0),
    (1, 2, 0.0, 1, 0.0), (1, 3, 0.9, 1, 0.0), (1, 3, 0.0, 0, 2.0), (1, 3, 0.0, 1, 2.0),
])  # fmt: skip
@pytest.mark.parametrize("whitening", ["none", "random"])
def test_gradient_equals_finite_differences(
    dims, classes, floor, marginal, level, whitening, gradient_check
):
    data, *_ = _data(dims=dims, classes=classes)
    # 0.9: above the tau_f = 0.7 of _random_u; marginal 1: a is all outputs' log-density;
    # level: the candidate ridge on the log-odds' levels (_design.LEVEL_SCALE)
    data = {**data, "tau_f_floor": floor, "density_marginal": marginal, "level_scale": level}
    rng = np.random.default_rng(2)
    if whitening == "random":
        data = _random_whitening(data, rng)
    else:  # without whitening data the density is the plain non-centred model
        data = {k: v for k, v in data.items() if not k.startswith("white_")}
    model = TransducerDensity(data)
    u = _random_u(model, rng)
    gradient_check(model, u)


@pytest.mark.parametrize("marginal", [0, 1])
def test_the_level_ridge_adds_minus_half_the_squared_log_odds_over_its_variance(marginal):
    """The candidate ridge (_design.LEVEL_SCALE): the log density with it minus without it
    is -sum_k,c f_c[k]^2 / (2 s^2), f_c[k] = theta[k, c] - theta[k, 0], by hand."""
    data, *_ = _data(classes=3)
    data = {**data, "density_marginal": marginal}
    rng = np.random.default_rng(5)
    plain = TransducerDensity(data)
    ridge = TransducerDensity({**data, "level_scale": 2.5})
    for _ in range(3):
        u = _random_u(plain, rng)
        theta = plain.theta(u)
        f = theta[:, 1:] - theta[:, :1]
        expected = -0.5 * np.sum(f**2) / 2.5**2
        assert ridge.log_density(u)[0] - plain.log_density(u)[0] == pytest.approx(
            expected, rel=1e-10
        )
        assert ridge.log_prior(u[None])[0] - plain.log_prior(u[None])[0] == pytest.approx(
            expected, rel=1e-10
        )


def _centred(data, rng, df):
    """``data`` with a centred prior anywhere in its domain: a random mean function, sds and
    degrees of freedom (stan/transducer.stan, ``odds_*``)."""
    k, p, c1 = int(data["K"]), int(data["P"]), int(data["C"]) - 1
    return {**data, "odds_offset": rng.normal(0, 2, (k, c1)),
            "odds_scale": rng.uniform(0.5, 3, p), "odds_df": df}  # fmt: skip


@pytest.mark.parametrize("df", [0.0, 3.0])
@pytest.mark.parametrize("classes", [2, 3])
def test_centred_prior_gradient_equals_finite_differences(df, classes, gradient_check):
    data, *_ = _data(classes=classes)
    rng = np.random.default_rng(4)
    model = TransducerDensity(_centred(_random_whitening(data, rng), rng, df))
    u = _random_u(model, rng)
    gradient_check(model, u)


@pytest.mark.parametrize("df", [0.0, 3.0])
def test_centred_prior_by_hand(df):
    """The centred prior's two parts written out: theta gains the mean function in the
    class columns (the first class's column, the density, unchanged), and the fixed
    coefficients' log prior is scipy's Normal or Student-t log density up to its constant."""
    data, *_ = _data(classes=3)
    rng = np.random.default_rng(6)
    centred = _centred(data, rng, df)
    plain, model = TransducerDensity(data), TransducerDensity(centred)
    u = _random_u(model, rng)
    shift = model.theta(u) - plain.theta(u)
    np.testing.assert_allclose(shift[:, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(shift[:, 1:], centred["odds_offset"], atol=1e-12)
    f_fixed = model.unpack(u)["f_fixed"]  # (P, C - 1)
    sd = centred["odds_scale"][:, None]
    if df == 0:
        by_hand = norm.logpdf(f_fixed, 0, sd) - norm.logpdf(0, 0, sd)
    else:
        by_hand = halft.logpdf(f_fixed, df, 0, sd) - halft.logpdf(0, df, 0, sd)
    plain_fixed = norm.logpdf(f_fixed, 0, np.asarray(data["fixed_scale"])[:, None])
    plain_fixed -= norm.logpdf(0, 0, np.asarray(data["fixed_scale"])[:, None])
    difference = model.log_prior(u[None])[0] - plain.log_prior(u[None])[0]
    assert difference == pytest.approx(by_hand.sum() - plain_fixed.sum(), rel=1e-10)


@pytest.mark.parametrize(("tau_f_df", "floor"), [(3.0, 0.0), (0.0, 0.0), (3.0, 0.9)])
def test_prior_terms_match_the_stan_program(tau_f_df, floor):
    """With no data the log density is the sum of the priors written out by hand: the
    smooth coefficients b = Q (v kappa + sqrt(v) e), v = 1 / (lambda + tau^-2), have prior
    N(0, tau^2 I), tau_f a half-Student-t (or half-Normal) scale, and the change of
    variables e -> b adds log |det(db/de)| (computed here from the Jacobian matrix)."""
    data, *_ = _data(n=50)
    assert data["tau_f_df"] == 3.0  # one output dimension: the half-t by default
    rng = np.random.default_rng(3)
    data = {**_random_whitening(data, rng), "count": np.zeros_like(np.asarray(data["count"])),
            "tau_f_df": tau_f_df, "tau_f_floor": floor}  # fmt: skip
    if tau_f_df > 0:
        tau_f_prior = lambda t: halft.logpdf(t, tau_f_df, 0, data["tau_f_scale"])  # noqa: E731
    else:
        tau_f_prior = lambda t: norm.logpdf(t, 0, data["tau_f_scale"])  # noqa: E731
    # the soft floor multiplies that density by 1 - exp(-(t / floor)^2); 0: no floor
    floor_term = (lambda t: np.log(1 - np.exp(-((t / floor) ** 2)))) if floor else np.zeros_like
    model = TransducerDensity(data)
    u = _random_u(model, rng)
    p = model.unpack(u)
    fs = np.asarray(data["fixed_scale"])
    ta, tf = np.exp(p["log_tau_a"]), np.exp(p["log_tau_f"])
    by_hand = (
        norm.logpdf(p["a_fixed"], 0, fs[1:]).sum()
        + norm.logpdf(p["f_fixed"], 0, fs[:, None]).sum()
        + norm.logpdf(ta, 0, data["tau_a_scale"]) + np.log(ta)
        + tau_f_prior(tf).sum() + floor_term(tf).sum() + np.log(tf).sum()
    )  # fmt: skip
    blocks = [
        (data["white_a"], data["white_a_lambda"], data["white_a_kappa"], ta, p["a_raw"]),
        (data["white_f"][0], data["white_f_lambda"][:, 0], data["white_f_kappa"][:, 0], tf[0],
         p["f_raw"][:, 0]),
    ]  # fmt: skip
    for rotation, lam, kappa, tau, e in blocks:
        v = 1 / (lam + tau**-2)
        b = rotation @ (v * kappa + np.sqrt(v) * e)
        jacobian = rotation * np.sqrt(v)  # d b / d e
        by_hand += norm.logpdf(b, 0, tau).sum() + np.linalg.slogdet(jacobian)[1]
    # up to each Normal's constant -log(2 pi) / 2, which Stan's `~` drops
    constants = (
        norm.logpdf(0, 0, fs[1:]).sum()
        + p["a_raw"].size * norm.logpdf(0)
        + (norm.logpdf(0, 0, fs)[:, None] * np.ones_like(p["f_fixed"])).sum()
        + p["f_raw"].size * norm.logpdf(0)
        + norm.logpdf(0, 0, data["tau_a_scale"])
        + len(tf) * tau_f_prior(0.0)
    )
    assert model.log_density(u)[0] == pytest.approx(by_hand - constants, rel=1e-12)


def test_fit_recovers_a_logistic_truth_and_is_deterministic():
    rng = np.random.default_rng(7)
    n = 3000
    c = (rng.random(n) < 0.3).astype(int)
    y = rng.normal(np.where(c == 1, 1.0, -1.0), 1.0)
    grid = np.linspace(-2, 2, 9)
    # equal-variance Normals: p(1 | y) = expit(log(0.3/0.7) + 2 y)
    truth = expit(np.log(0.3 / 0.7) + 2.0 * grid)
    kw = {"backend": "laplace", "chains": 2, "draws": 400, "seed": 5, "progress": False}
    t = Transducer(**kw).fit(y, c)
    assert np.abs(t.predict_proba(grid)[:, 1] - truth).max() < 0.04
    band = t.predict_interval(grid, prob=0.99)
    inside = (band["lower"].values[:, 1] <= truth) & (truth <= band["upper"].values[:, 1])
    assert inside.mean() >= 7 / 9
    assert t.backend_ == "laplace" and t.sampler_summary()["divergent"] == 0
    # the target acceptance rate the fit ran at: one output dimension's default, or the
    # user's (the Laplace backend records the setting like the others)
    assert t.get_params()["adapt_delta"] is None and t.sampler_summary()["adapt_delta"] == 0.99
    given = Transducer(**{**kw, "adapt_delta": 0.9}).fit(y, c)
    assert given.sampler_summary()["adapt_delta"] == 0.9
    again = Transducer(**kw).fit(y, c)
    assert np.array_equal(again.posterior.w, t.posterior.w)
    other = Transducer(**{**kw, "seed": 6}).fit(y, c)
    assert not np.array_equal(other.posterior.w, t.posterior.w)


@pytest.mark.parametrize("marginals", [True, False])
def test_draws_spread_as_the_approximation(marginals, monkeypatch):
    """The draws' centre and spread are the Normal's the backend says it draws from: the
    mode and the inverse Hessian, or (the default at this size) the smoothing scales at
    their Laplace marginals, :func:`scale_marginals`."""
    import yieldwise.backends._laplace as lap

    if not marginals:
        monkeypatch.setattr(lap, "MARGINAL_MAX_SIZE", 0)
    data, *_ = _data(n=400)
    program = get_backend("laplace").compile(stan_file("transducer"))
    result = program.sample(data, chains=4, draws=2000, seed=1, init=initial_values(data, 4, 1))
    assert result.settings["approximation"] == "laplace"
    assert result.settings["scale_marginals"] is marginals
    assert result.draws["w"].shape == (4, 2000, int(data["K"]))
    assert np.allclose(result.draws["w"].sum(axis=2), 1.0)
    # every draw back in the unconstrained coordinates u
    # (matrices column by column, as the model stores them)
    d = {name: v.swapaxes(-1, -2).reshape(8000, -1) if v.ndim == 4 else v.reshape(8000, -1)
         for name, v in result.draws.items()}  # fmt: skip
    model = TransducerDensity(data)
    us = np.column_stack([
        d["a_fixed"], np.log(d["tau_a"]), d["a_smooth"], d["f_fixed"], np.log(d["tau_f"]),
        d["f_raw"],
    ])  # fmt: skip
    # the smooth coordinates from the coefficients b (whitening: the density's inverse map)
    f_raw = result.draws["f_raw"].reshape(8000, int(data["R"]), -1)
    b = np.concatenate([d["a_smooth"][:, :, None], f_raw * d["tau_f"][:, None, :]], axis=2)
    us = model.whitened(us, b)
    assert us.shape[1] == model.size
    fit = lap.laplace(data, initial_values(data, 1, 1)[0], model)
    if marginals:
        scales = [model.slices["log_tau_a"].start, model.slices["log_tau_f"].start]
        fit = lap.scale_marginals(model, fit, np.array(scales))
        assert fit is not None
    else:
        assert np.abs(model.log_density(us.mean(axis=0))[1]).max() < 0.5  # (nearly) the mode
    expected = fit.scale @ fit.scale.T
    assert np.abs(us.mean(axis=0) - fit.mode).max() < 4 * np.sqrt(np.diag(expected).max() / 8000)
    ratio = us.var(axis=0) / np.diag(expected)
    assert np.all(np.abs(ratio - 1) < 0.12), ratio.round(3)


class _LogGammaScale:
    """A scale ``v`` whose marginal is log-Gamma(``a``), ``p(v) ~ exp(a v - e^v)`` (mean
    digamma(a), variance trigamma(a)), and ``x | v ~ N((2 v, -v), diag(e^-v, 1/2))``: Normal
    given the scale, so the Laplace marginal is exact, while the joint mode, at
    ``v = log(a + 1/2)``, is not the marginal's mean."""

    a = 3.0
    size = 3

    def log_density(self, u):
        v, x = u[0], u[1:]
        mean, var = np.array([2 * v, -v]), np.array([np.exp(-v), 0.5])
        r = x - mean
        lp = self.a * v - np.exp(v) - 0.5 * np.sum(r**2 / var) - 0.5 * np.sum(np.log(var))
        dvar = np.array([-np.exp(-v), 0.0])
        grad_v = (self.a - np.exp(v) + np.sum(r / var * np.array([2.0, -1.0]))
                  + 0.5 * np.sum(r**2 / var**2 * dvar) - 0.5 * np.sum(dvar / var))  # fmt: skip
        return lp, np.r_[grad_v, -r / var]

    def log_densities(self, us):  # the protocol scale_marginals reads: rows of points
        values, grads = zip(*(self.log_density(u) for u in us), strict=True)
        return np.array(values), np.array(grads)

    def hessian(self, u):
        h = 1e-5
        columns = [(self.log_density(u + h * e)[1] - self.log_density(u - h * e)[1]) / (2 * h)
                   for e in np.eye(self.size)]  # fmt: skip
        out = np.column_stack(columns)
        return 0.5 * (out + out.T)


def test_scale_marginals_recover_a_log_gamma_scale():
    from scipy.special import digamma, polygamma

    from yieldwise.backends._laplace import LaplaceFit, scale_marginals

    model = _LogGammaScale()
    a = model.a
    v_mode = np.log(a + 0.5)
    mode = np.array([v_mode, 2 * v_mode, -v_mode])
    assert np.abs(model.log_density(mode)[1]).max() < 1e-12  # the joint mode, by hand
    precision = -model.hessian(mode)
    values, vectors = np.linalg.eigh(np.linalg.inv(precision))
    fit = LaplaceFit(mode, vectors, np.sqrt(values), precision, 0.0, 0, None)
    out = scale_marginals(model, fit, np.array([0]))
    mean, var = digamma(a), float(polygamma(1, a))
    assert abs(v_mode - mean) > 0.3  # the mode is not the marginal's mean
    assert out.mode[0] == pytest.approx(mean, abs=0.005)
    # the others at their conditional mode given the scale's mean
    assert out.mode[1:] == pytest.approx([2 * out.mode[0], -out.mode[0]], abs=1e-6)
    cov = out.scale @ out.scale.T
    assert cov[0, 0] == pytest.approx(var, rel=0.02)
    # x2 | v is N(-v, 1/2): its variance and covariance with v are exact
    assert cov[2, 2] == pytest.approx(0.5 + var, rel=0.02)
    assert cov[0, 2] == pytest.approx(-var, rel=0.02)
    # x1 | v: slope 2, conditional variance e^-v at the mean
    assert cov[1, 1] == pytest.approx(np.exp(-mean) + 4 * var, rel=0.02)
    assert cov[0, 1] == pytest.approx(2 * var, rel=0.02)


def test_scale_marginals_bring_the_approximation_closer_to_the_posterior(monkeypatch):
    """The Pareto k of the draws' importance ratios (how far the Normal is from the
    posterior) falls with the scales at their marginals."""
    import yieldwise.backends._laplace as lap

    data, *_ = _data(n=400)
    program = get_backend("laplace").compile(stan_file("transducer"))
    run = {"chains": 4, "draws": 1000, "seed": 1, "init": initial_values(data, 4, 1)}
    marginal = program.sample(data, **run).settings["pareto_k"]
    monkeypatch.setattr(lap, "MARGINAL_MAX_SIZE", 0)
    at_mode = program.sample(data, **run).settings["pareto_k"]
    assert marginal < at_mode - 0.1, (marginal, at_mode)


def test_the_registry_keeps_approximations_out_of_auto():
    assert "laplace" in APPROXIMATIONS and "laplace" not in BACKENDS
    assert "laplace" in backend_names()
    assert get_backend("auto").name != "laplace"
    with pytest.raises(CompilationError, match="only the transducer's model, not long_run"):
        get_backend("laplace").compile(stan_file("long_run_utility"))
    with pytest.raises(ValueError, match=r"unknown Stan backend 'laplase'.*'laplace'"):
        get_backend("laplase")


def test_preconditioning_is_the_mode_and_the_inverse_hessian():
    """build_stan_data's u_centre is where the log density's gradient vanishes, and
    S S' (S = V diag(sd), every direction) the inverse of minus its Hessian, here by second
    differences of the log density itself (not of the gradient the approximation uses)."""
    from yieldwise.transducer.stan_data import full_scale, precondition, sampler_inits

    data, *_ = _data(n=200)
    model = TransducerDensity(data)
    assert int(data["preconditioned"]) == 1 and data["U"] == model.size
    centre, scale = np.asarray(data["u_centre"]), full_scale(data)
    assert np.abs(model.log_density(centre)[1]).max() < 1e-3
    # in the sampler's coordinates z (u = centre + scale z) the log density's Hessian at 0
    # is minus the identity: second differences in z are scale-free, so they hold for
    # coordinates of any size (centred ones have prior sd tau^k, tau of order 10-40 here)
    h, n = 1e-3, model.size

    def f(z):
        return model.log_density(centre + scale @ z)[0]

    f0 = f(np.zeros(n))
    hess = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            hess[i, j] = hess[j, i] = (f(ei + ej) - f(ei) - f(ej) + f0) / h**2
    np.testing.assert_allclose(-hess, np.eye(n), atol=0.02)
    # the same data without it: the identity, and the chains start at initial_values
    plain, _ = build_stan_data(
        *(np.asarray(v) for v in (np.asarray(data["cls"]) - 1, data["y_lower"], data["y_upper"])),
        None, 2, 12, counts=np.asarray(data["count"]), preconditioned=False,
    )  # fmt: skip
    assert int(plain["preconditioned"]) == 0 and int(plain["u_rank"]) == 0
    assert np.array_equal(plain["u_basis"], np.eye(n)) and np.array_equal(plain["u_sd"], np.ones(n))
    starts = sampler_inits(plain, 3, seed=4)
    for init, start in zip(starts, initial_values(plain, 3, seed=4), strict=True):
        np.testing.assert_allclose(init["z"], TransducerDensity(plain).start(start), atol=1e-12)
    again = precondition(plain)
    np.testing.assert_allclose(again["u_centre"], centre, atol=1e-4)
    # preconditioned: independent standard Normal starts, one per chain, seeded
    z = [init["z"] for init in sampler_inits(data, 3, seed=4)]
    assert len(z) == 3 and not np.array_equal(z[0], z[1])
    assert np.array_equal(z[2], sampler_inits(data, 3, seed=4)[2]["z"])


def test_whitening_is_the_likelihood_precision_at_the_non_centred_mode(
    density_hessian, whitening_modes
):
    """precondition() whitens each smooth block with the likelihood's precision for its
    coefficients at the non-centred mode, here recomputed from second differences of the
    non-centred log density itself ((minus Hessian - I) / tau^2, the prior's I taken out);
    the whitened coordinates describe the same model (same theta for the same point), and
    at their mode the smooth blocks' curvature is close to the identity for every block."""
    data, *_ = _data(n=400, classes=3)
    flat, base, mode, white = whitening_modes(data)
    p = flat.unpack(base)
    hessian = density_hessian

    r = flat.R
    a_index = np.arange(flat.slices["a_raw"].start, flat.slices["a_raw"].stop)
    first_f = flat.slices["f_raw"].start
    f_index = [np.arange(first_f + c * r, first_f + (c + 1) * r) for c in range(2)]
    blocks = [(a_index, np.exp(p["log_tau_a"]), np.asarray(mode["white_a_lambda"]))] + [
        (f_index[c], np.exp(p["log_tau_f"][c]), np.asarray(mode["white_f_lambda"])[:, c])
        for c in range(2)
    ]
    for index, tau, lam in blocks:
        expected = np.linalg.eigvalsh(hessian(flat, base, index) - np.eye(r)) / tau**2
        np.testing.assert_allclose(np.sort(lam), np.clip(expected, 0, None),
                                   atol=1e-3 * expected.max())  # fmt: skip
    # 400 outputs inform the density: its precision from the data exceeds the prior's 1 / tau^2
    assert np.asarray(mode["white_a_lambda"]).max() * np.exp(2 * p["log_tau_a"]) > 1
    # one model: the non-centred mode mapped into the whitened coordinates has its theta
    b = flat.smooth_blocks(base)["b"]
    np.testing.assert_allclose(white.theta(white.whitened(base, b)), flat.theta(base), atol=1e-10)
    # at the whitened mode the smooth coordinates are close to standard Normal, where the
    # non-centred ones at their mode are far from it (the density's curvature ~ tau^2 lambda)
    centre = np.asarray(mode["u_centre"])
    for index in [a_index, *f_index]:
        curvature = np.diag(hessian(white, centre, index))
        assert np.all(np.abs(curvature - 1) < 0.5), curvature.round(2)
    assert np.diag(hessian(flat, base, a_index)).max() > 5


def test_default_whitens_up_to_four_dimensions():
    """precondition's default: the whitening for one or two output dimensions (kernels on a
    grid) and for three or four (centres: joint fits, where it was measured to help), the
    plain non-centred blocks for five or more (on D = 9 it was measured to bring divergent
    transitions; docs/model.md, "Whitening for joint fits of three and four dimensions");
    whiten=True forces it anywhere."""
    from yieldwise.transducer.stan_data import WHITEN_MAX_DIMS, precondition

    assert WHITEN_MAX_DIMS == 4
    for dims, whitened in [(1, True), (2, True), (3, True), (4, True), (5, False)]:
        data, *_ = _data(n=200, dims=dims, classes=2)
        assert int(data["D"]) == dims
        r = int(data["R"])
        assert bool(np.asarray(data["white_a_lambda"]).max() > 0) == whitened, dims
        if not whitened:
            np.testing.assert_array_equal(data["white_a"], np.eye(r))
            np.testing.assert_array_equal(data["white_f_kappa"], np.zeros((r, 1)))
            forced = precondition(data, whiten=True)
            assert np.asarray(forced["white_a_lambda"]).max() > 0


@pytest.mark.parametrize("variance", [2.0, 4.0])
def test_pareto_k_is_one_minus_the_variance_ratio(variance):
    """Closed form: draws from q = N(0, 1) weighted towards p = N(0, s^2) have ratios
    w = exp(x^2 (1 - 1/s^2) / 2), whose tail P(w > t) ~ t^(-1 / (1 - 1/s^2)) is Pareto
    with shape k = 1 - 1/s^2 (0.5 at s^2 = 2, 0.75 at s^2 = 4). Only asymptotically so
    (a slowly varying factor): at 200,000 draws PSIS's estimate runs 0.03-0.05 low, with
    sd 0.03 over seeds (measured over 6 seeds; one of them 0.63 at s^2 = 4), so the test
    takes the mean of five."""
    from yieldwise.backends._laplace import _pareto_k

    ks = []
    for seed in range(5):  # the mean of five estimates: one has sd 0.03
        x = np.random.default_rng(seed).standard_normal(200_000)
        log_ratio = 0.5 * x**2 * (1 - 1 / variance) + 17.0  # any constant: it cancels
        ks.append(_pareto_k(log_ratio))
    assert np.mean(ks) == pytest.approx(1 - 1 / variance, abs=0.1)
    assert np.isnan(_pareto_k(np.append(log_ratio, -np.inf)))


def test_a_poor_approximation_says_so_and_a_good_one_does_not():
    """The fit records the Pareto k of its own draws (posterior / approximation, from
    the stored log density and the approximation's, ``energy``), reports it, and warns
    only above the threshold (0.7 at 3,000 draws; 2/3 at 1,000)."""
    from yieldwise.backends import SamplerWarning
    from yieldwise.backends._base import pareto_k_threshold, warn_on_diagnostics
    from yieldwise.backends._laplace import _pareto_k

    assert pareto_k_threshold(3000) == 0.7
    assert pareto_k_threshold(400) == pytest.approx(1 - 1 / np.log10(400))
    data, *_ = _data(n=300)
    program = get_backend("laplace").compile(stan_file("transducer"))
    result = program.sample(data, chains=2, draws=500, seed=1, init=initial_values(data, 2, 1))
    stats = result.sample_stats
    # energy = -(lp_mode + log q): lp + energy is log p - log q up to a constant, which
    # the Pareto shape ignores
    expected = _pareto_k((stats["lp"] + stats["energy"]).ravel())
    assert result.settings["pareto_k"] == pytest.approx(expected, abs=1e-12)
    assert pareto_k_threshold(1000) == pytest.approx(2 / 3)  # this run's 2 x 500 draws
    for k, warned in ((0.2, False), (0.66, False), (0.68, True), (float("nan"), True)):
        result.settings["pareto_k"] = k
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_on_diagnostics(result)
        messages = [str(w.message) for w in caught if w.category is SamplerWarning]
        assert bool(messages) is warned, (k, messages)
        if warned:
            assert "the Laplace approximation misstates this posterior" in messages[0]
            assert "refit with the default backend" in messages[0]


def test_two_dimensions_fit_the_sparse_likelihood_and_record_it():
    """A 2-D grid fits with the likelihood's sparse form (stan_data.sparse_kernels); the
    record says so, and the predictions agree with the dense form's to far below the
    draws' own spread, since the values left out are below 1e-15 of each row's largest."""
    from yieldwise.transducer.diagnostics import DiagnosticsWarning
    from yieldwise.transducer.io import fit_record

    rng = np.random.default_rng(11)
    c = (rng.random(800) < 0.3).astype(int)
    y = rng.normal(np.where(c[:, None] == 1, 1.0, -1.0), 1.0, (800, 2))
    kw = {"backend": "laplace", "chains": 2, "draws": 200, "seed": 3, "progress": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticsWarning)  # 200 draws: ESS below 400
        sparse = Transducer(**kw).fit(y, c)
        dense = Transducer(**kw, kernel_tail_cut=0.0).fit(y, c)
    record = fit_record(sparse.posterior_)["sampler"]["likelihood"]
    assert record["sparse"] is True and record["kernel_tail_cut"] == 1e-15
    assert 0.05 < record["kept_share"] <= 0.35
    assert 0 <= sparse.sampler_summary()["cut_gap"] < 1e-6
    assert fit_record(dense.posterior_)["sampler"]["likelihood"]["sparse"] is False
    assert dense.sampler_summary()["cut_gap"] == 0.0
    grid = rng.normal(0, 1, (50, 2))
    np.testing.assert_allclose(sparse.predict_proba(grid), dense.predict_proba(grid), atol=1e-6)


def _sparse_two_class_density():
    """A 2-D, two-class density on the likelihood's sparse form (600 items, 64 kernels,
    tail cut 1e-6), a random point ``u`` and the index in ``u`` of class 1's first slope."""
    rng = np.random.default_rng(5)
    c = (rng.random(600) < 0.4).astype(int)
    y = rng.normal(np.where(c[:, None] == 1, 1.5, -1.5), 1.0, (600, 2))
    data, _ = build_stan_data(c, y, y, None, 2, n_components=64, kernel_tail_cut=1e-6)
    assert int(data.kern_sparse) == 1  # the cut applies: rows keep part of the grid
    model = TransducerDensity(data.as_dict())
    f_fixed = np.arange(model.size)[model.slices["f_fixed"]]
    # (P, C - 1) column-major: the first slope of class 1's log-odds
    return model, _random_u(model, rng), f_fixed[1]


def test_a_point_of_zero_density_is_minus_infinity_without_numpy_warnings():
    """Where a row's kept kernels all carry class weight 0 in double precision, the
    density is 0 (Stan's log(lik) is -inf). The mode search's trial steps reach such
    points on 2-D grids (the likelihood's sparse form keeps few kernels per row); the
    value alone rejects them, and no RuntimeWarning may reach the user (4 of 20 two-logit
    coverage fits at 3,600 items raised them before the fix)."""
    model, u, slope = _sparse_two_class_density()
    lp, grad = model.log_density(u)
    assert np.isfinite(lp) and np.all(np.isfinite(grad))
    # class 1's log-odds falling steeply along the first output: exp(theta - top) is 0 in
    # double precision at every kernel except the top ones
    u[slope] = -1e4
    theta = model.theta(u)
    weight = np.exp(theta[:, 1] - theta[:, 1].max())
    ones = model.cls == 1  # the data's rows (merged and sorted by class), not the items
    kept = model.kern[ones] > 0  # (class 1 rows, K) kernels each row keeps
    dead = ~(kept & (weight > 0)).any(axis=1)  # rows whose kept kernels all weigh 0
    assert dead.any(), "the test needs a class-1 row far from the top kernels"
    # brute force: the likelihood of such a row, from its kept kernels alone, is 0
    assert (model.kern[ones][dead] @ weight == 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's divide / overflow / invalid warnings
        lp, grad = model.log_density(u)
    assert lp == -np.inf
    assert np.isnan(grad).all()


def test_a_point_of_vanishing_but_positive_density_is_read_as_zero_without_warnings():
    """A row whose likelihood is positive but tiny (subnormal here: 4e-309 relative to its
    class's heaviest kernel) made ``count / lik`` overflow: 2 of 18 vote fits at 3,600
    items raised numpy's overflow and invalid-value warnings from the mode search's trial
    steps (coverage study, 2026-11-28). Below ``_LIK_FLOOR`` the point is read as one of
    zero density, like an exact 0; above it the value is the finite one, checked here
    against the log-likelihood summed by hand."""
    from yieldwise.backends import _laplace

    model, u, slope = _sparse_two_class_density()

    def row_likelihoods(value):
        u[slope] = value
        theta = model.theta(u)
        e = np.exp(theta - theta.max(axis=0))
        return theta, (model.kern @ e)[np.arange(model.cls.size), model.cls]

    _, lik = row_likelihoods(-821.0)
    assert 0 < lik.min() < 5e-309  # 1 / lik overflows: the case the floor guards
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lp, grad = model.log_density(u)
    assert lp == -np.inf and np.isnan(grad).all()
    # far above the floor the density is the finite one: its likelihood part by hand
    theta, lik = row_likelihoods(-100.0)
    assert lik.min() > 1e3 * _laplace._LIK_FLOOR
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lp, grad = model.log_density(u)
    assert np.isfinite(lp) and np.all(np.isfinite(grad))
    top = theta.max(axis=0)
    ll = np.sum(model.count * (np.log(lik) + top[model.cls])) - model.total * logsumexp(theta)
    assert model.G == 0
    prior = float(model.log_prior(u, model.smooth_blocks(u), None))
    np.testing.assert_allclose(lp, ll + prior, rtol=1e-12)


def test_a_large_gap_warns_and_says_what_to_do():
    from yieldwise.transducer.diagnostics import DiagnosticsWarning, warn_on_cut_gap

    record = {"kernel_tail_cut": 1e-15, "sparse": True, "kept_share": 0.2, "max_cut_gap": 0.4}
    with pytest.warns(DiagnosticsWarning, match=r"raised the log-likelihood by 0\.4 .*"
                      r"Transducer\(kernel_tail_cut=0\)"):  # fmt: skip
        warn_on_cut_gap(record, 0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_on_cut_gap({**record, "max_cut_gap": 0.009}, 0.01)


@pytest.mark.parametrize("bad", [-1.0, 0.1, "tiny"])
def test_a_bad_kernel_tail_cut_is_refused_before_fitting(bad):
    y = np.linspace(-1, 1, 40)
    with pytest.raises(ValueError, match=r"kernel_tail_cut must be a number in \[0, 1e-6\]"):
        Transducer(backend="laplace", kernel_tail_cut=bad).fit(y, y > 0)


def _round_trip_refusing_an_older_version(fitted, outputs, tmp_path, older, match):
    """Save ``fitted``: it loads with the same transform and predictions, records format
    version 7, and the same file claiming version ``older`` is refused (``match``)."""
    import arviz as az

    from yieldwise.transducer.io import TransducerFileError

    path = tmp_path / "fitted.nc"
    fitted.save(path)
    loaded = Transducer.load(path)
    assert loaded.transform_ == fitted.transform_
    np.testing.assert_array_equal(loaded.predict_proba(outputs), fitted.predict_proba(outputs))
    data = az.from_netcdf(path)
    data.load()
    assert data.posterior.attrs["yieldwise_format_version"] == 7
    data.posterior.attrs["yieldwise_format_version"] = older
    claimed = tmp_path / "older.nc"
    data.to_netcdf(claimed)
    with pytest.raises(TransducerFileError, match=match):
        Transducer.load(claimed)


def test_two_dimensional_hard_labels_fit_as_two_bins_on_their_line(tmp_path):
    """Two logits that are hard labels, (5, -5) or (-5, 5): two distinct points, one
    dimension of information, which a 2-D grid samples badly (docs/model.md, "Hard labels").
    They are modelled on the line through them as two bins of their distance, so the fit
    is the fit of one column of positions -h/2 / h/2 read as a lattice of spacing h (the
    same data, the same seed: the same draws), whose p(c | y) at each point is the
    binomial model's; the long-run utility and PSIS-LOO are the one column's, nothing
    warns before sampling, the file round-trips as format version 7 (an older version may
    not claim it), an output between the points is read as its bin (LatticeWarning) and
    one off the line at its projection (ExtrapolationWarning)."""
    import pandas as pd

    from yieldwise import long_run_utility
    from yieldwise.transducer.encoding import ExtrapolationWarning, LatticeWarning

    rng = np.random.default_rng(4)
    labels = rng.integers(0, 2, 300)
    sign = np.where(np.where(rng.random(300) < 0.8, labels, 1 - labels) == 1, 1.0, -1.0)
    hard = pd.DataFrame({"l0": -5.0 * sign, "l1": 5.0 * sign})
    h = 10.0 * np.sqrt(2.0)  # the distance between (5, -5) and (-5, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        two = Transducer(backend="laplace", seed=1, progress=False).fit(hard, labels)
    assert not [w for w in caught if "distinct value" in str(w.message)]
    t = two.transform_
    assert t.is_projected and t.line_resolution == pytest.approx(h, rel=1e-12)
    # np.unique orders (-5, 5) first: the line runs from it to (5, -5), centre (0, 0)
    np.testing.assert_allclose(t.centre, [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(t.axes, [[2**-0.5, -(2**-0.5)]], atol=1e-12)
    position = t.forward(hard.to_numpy())[:, 0]
    # (-5, 5) (sign 1) at -h/2, (5, -5) (sign -1) at h/2
    np.testing.assert_allclose(position, -sign * h / 2, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplerWarning)  # the Laplace backend's own
        one = Transducer(backend="laplace", seed=1, progress=False, resolution=h).fit(
            pd.DataFrame({"axis": position}), labels
        )
    np.testing.assert_array_equal(two.posterior_.posterior["mu"].values,
                                  one.posterior_.posterior["mu"].values)  # fmt: skip
    points = pd.DataFrame({"l0": [-5.0, 5.0], "l1": [5.0, -5.0]})
    p = two.predict_proba(points)
    # the calibration positions of the two points (-h/2, h/2); the one column's bins
    # [v - h/2, v + h/2] meet the line's [k h, (k + 1) h] to a few ulps
    at = pd.DataFrame({"axis": [position[sign == 1][0], position[sign == -1][0]]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExtrapolationWarning)  # the calibration's own values
        np.testing.assert_allclose(p, one.predict_proba(at), rtol=1e-9)
    # the binomial model at each point: near the share of class 1 counted there
    for k, s in enumerate((1.0, -1.0)):
        counted = labels[sign == s].mean()
        assert abs(p[k, 1] - counted) < 0.03, (k, p[k, 1], counted)
    matrix = np.array([[[1.0, -10.0], [0.0, 10.0]]])
    np.testing.assert_allclose(long_run_utility(two, matrix), long_run_utility(one, matrix),
                               rtol=1e-9)  # fmt: skip
    assert two.loo().elpd_loo == pytest.approx(one.loo().elpd_loo, rel=1e-9)
    # (1, -1) lies on the line between the points, in (5, -5)'s bin
    with pytest.warns(LatticeWarning, match="not among the two distinct outputs"):
        between = two.predict_proba(pd.DataFrame({"l0": [1.0], "l1": [-1.0]}))
    np.testing.assert_allclose(between, p[[1]], rtol=1e-12)
    # (6, -3) is off the line: projected onto it, (4.5, -4.5), in the same bin
    with pytest.warns(ExtrapolationWarning, match="off the line"):
        off = two.predict_proba(pd.DataFrame({"l0": [6.0], "l1": [-3.0]}))
    np.testing.assert_allclose(off, p[[1]], rtol=1e-12)
    assert "two points on a line, modelled along it as two bins of spacing 14.1421" in repr(two)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():  # the map over the outputs' box: each point in its bin
        warnings.simplefilter("error")
        ax = two.plot()
    assert ax.get_title() == "Transducer probability map"
    mesh = ax.collections[0].get_array().reshape(-1)
    assert np.isclose(mesh.min(), p[1, 1], rtol=1e-9) and np.isclose(mesh.max(), p[0, 1], rtol=1e-9)
    plt.close(ax.figure)
    _round_trip_refusing_an_older_version(
        two, points, tmp_path, 6, "no lattice of positions on a line"
    )
    # joint outputs of two classifiers keep each one's coordinates: there the fit still
    # warns before sampling and names the remedy
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Transducer(backend="laplace", seed=1, progress=False).fit(
            {"a": hard[["l0"]], "b": hard[["l1"]]}, labels
        )
    (message,) = [str(w.message) for w in caught if issubclass(w.category, SamplerWarning)
                  and "distinct value" in str(w.message)]  # fmt: skip
    assert "take only 2 distinct value(s)" in message and "difference of the two logits" in message


def test_outputs_on_a_line_fit_as_the_one_column_of_their_positions(tmp_path):
    """Two logits that are exact negatives lie on a line: the transducer models their
    position along it, so its fit is the fit of that one column (the same data, the same
    seed: the same draws) and its predictions equal the one-column transducer's at the
    positions. An output off the line warns and is taken at its projection. The file
    round-trips exactly and records format version 6 or later, which version 5 may not
    claim."""
    import pandas as pd

    from yieldwise.transducer.encoding import ExtrapolationWarning

    rng = np.random.default_rng(12)
    labels = rng.integers(0, 2, 300)
    z = rng.normal(1.5 * (2 * labels - 1), 1.0)
    two = pd.DataFrame({"l0": -z / 2, "l1": z / 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SamplerWarning)  # the Laplace backend's own
        line = Transducer(backend="laplace", seed=1, progress=False).fit(two, labels)
        position = line.transform_.forward(two.to_numpy())[:, 0]
        one = Transducer(backend="laplace", seed=1, progress=False).fit(
            pd.DataFrame({"axis": position}), labels
        )
    assert line.transform_.is_projected and line.posterior_.posterior.sizes["output_dim"] == 1
    grid = pd.DataFrame({"l0": [-1.5, -0.2, 0.0, 1.0], "l1": [1.5, 0.2, 0.0, -1.0]})
    at = pd.DataFrame({"axis": line.transform_.forward(grid.to_numpy())[:, 0]})
    np.testing.assert_allclose(line.predict_proba(grid), one.predict_proba(at), rtol=1e-12)
    # so are the long-run utility (its cells mapped back onto the line) and PSIS-LOO
    from yieldwise import long_run_utility

    matrix = np.array([[[1.0, -10.0], [0.0, 10.0]]])
    np.testing.assert_allclose(long_run_utility(line, matrix), long_run_utility(one, matrix),
                               rtol=1e-12)  # fmt: skip
    assert line.loo().elpd_loo == pytest.approx(one.loo().elpd_loo, rel=1e-12)
    # (0.5, 0.5) is off the line l1 = -l0; its projection onto it is (0, 0) (centre
    # (m, -m), direction (1, -1) / sqrt(2): (0.5 - m, 0.5 + m) . d = -sqrt(2) m)
    with pytest.warns(ExtrapolationWarning, match="off the line"):
        off = line.predict_proba(pd.DataFrame({"l0": [0.5], "l1": [0.5]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExtrapolationWarning)  # on the line: silent
        np.testing.assert_allclose(off, line.predict_proba(grid.iloc[[2]]), rtol=1e-12)
    _round_trip_refusing_an_older_version(
        line, grid, tmp_path, 5, "no outputs projected onto a line"
    )
    # the summary says so, and the plot (a probability map over the outputs' box, every
    # point of it taken at its projection) does not warn
    assert "on a line, modelled along it" in repr(line)
    # draws given for two dimensions do not fit outputs modelled along their line
    two_d = {"w": np.full((1, 1, 2), 0.5), "alpha": np.full((1, 1, 2, 2), 0.5),
             "mu": np.zeros((1, 1, 2, 2)), "sigma": np.ones((1, 1, 2, 2))}  # fmt: skip
    with pytest.raises(
        ValueError,
        match=r"draws\['mu'\] must have shape .* D = 1, .*"
        r"\['axis1'\]; they lie on a line",
    ):
        Transducer.from_draws(two_d, two, labels, (0, 1), rotate=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        warnings.simplefilter("error", ExtrapolationWarning)
        ax = line.plot()
    assert ax.get_title() == "Transducer probability map"
    plt.close(ax.figure)


def test_constant_outputs_warn_and_learn_the_class_frequencies():
    """Outputs that never move (a baseline that always says the same, or a wrong column)
    carry only the class frequencies: the fit says so with a ConstantOutputWarning that
    points at the caller, and its p(c | y) is the binomial posterior of the labels,
    against the Beta(k + 1, n - k + 1) quantiles computed here (the model's intercept has
    a Normal(0, 5) prior, not a flat one: at 400 items the two agree to about 0.005).
    Outputs that move do not warn."""
    from pathlib import Path

    import pandas as pd
    from scipy import stats

    from yieldwise import ConstantOutputWarning

    labels = np.zeros(400, dtype=int)
    labels[:105] = 1  # k = 105 of n = 400
    with pytest.warns(ConstantOutputWarning, match="take one value over all 400 items") as caught:
        fitted = Transducer(backend="laplace", seed=3, progress=False).fit(
            pd.DataFrame({"s": np.full(400, 0.7)}), labels
        )
    assert {Path(w.filename).name for w in caught if w.category is ConstantOutputWarning} == {
        Path(__file__).name
    }
    band = fitted.predict_interval(pd.DataFrame({"s": [0.7]}), 0.95)
    beta = stats.beta(105 + 1, 400 - 105 + 1)
    assert abs(float(fitted.predict_proba(pd.DataFrame({"s": [0.7]}))[0, 1]) - beta.mean()) < 0.005
    assert abs(float(band["lower"][0, 1]) - beta.ppf(0.025)) < 0.01
    assert abs(float(band["upper"][0, 1]) - beta.ppf(0.975)) < 0.01
    moving = np.random.default_rng(3).random(400)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConstantOutputWarning)
        Transducer(backend="laplace", seed=3, progress=False).fit(
            pd.DataFrame({"s": moving}), labels
        )


def test_loo_warns_when_items_beyond_every_kernel_carry_its_variance():
    """Calibration outputs far beyond the grid (which spans the 1 % to 99 % quantiles) get
    a narrow kernel's Normal tail as their joint density. nearest_kernel_widths is checked
    against a loop over the kernels written here; loo() warns, pointing at the caller,
    when those items carry most of the pointwise estimates' variance (two outliers at
    +9 and +12, at least 50 kernel widths out), and names their count and their share of elpd_loo;
    the conditional estimate does not warn, nor does the joint one of uniform outputs
    (whose items beyond the 1 % and 99 % quantiles lie within a width or two of them)."""
    from pathlib import Path

    import pandas as pd

    from yieldwise.transducer.estimator import LooWarning

    rng = np.random.default_rng(8)
    n = 400
    c = rng.integers(0, 2, n)
    y = rng.normal(c * 2.0, 1.0)
    y_out = y.copy()
    y_out[:2] = [9.0, 12.0]
    fit = Transducer(backend="laplace", seed=2, progress=False).fit(pd.DataFrame({"s": y_out}), c)
    post = fit.posterior
    lower, upper, _ = fit.transform_.intervals(pd.DataFrame({"s": y_out}).to_numpy())
    got = post.nearest_kernel_widths(lower, upper)
    mu, sigma = post.mu[0], post.sigma[0]  # (K, D)
    by_hand = np.array([
        min(np.sqrt(sum(((lower[i, d] - mu[k, d]) / sigma[k, d]) ** 2
                        for d in range(mu.shape[1]))) for k in range(mu.shape[0]))
        for i in range(n)
    ])  # fmt: skip
    np.testing.assert_allclose(got, by_hand, rtol=1e-12)
    assert (got[:2] > 50).all()
    # a censored bin containing a kernel centre is at distance 0 from it
    centre = mu[3, 0]
    assert post.nearest_kernel_widths([[centre - 1.0]], [[centre + 1.0]])[0] == 0.0

    far = got > 4
    with pytest.warns(LooWarning, match=rf"{far.sum()} of {n} calibration items") as caught:
        joint = fit.loo()
    assert {Path(w.filename).name for w in caught if w.category is LooWarning} == {
        Path(__file__).name
    }
    part = float(joint["loo_i"].values[far].sum())
    assert f"contribute {part:.4g} of elpd_loo's {float(joint['elpd_loo']):.4g}" in str(
        caught[0].message
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", LooWarning)
        fit.loo(conditional=True)
        flat = rng.uniform(-1.0, 1.0, n)
        uniform = Transducer(backend="laplace", seed=2, progress=False).fit(
            pd.DataFrame({"s": flat}), c
        )
        assert uniform.transform_.kind == ("identity",)
        uniform.loo()


@pytest.mark.parametrize(
    ("shape", "axis", "keepdims"),
    [((5, 4), None, False), ((5, 4), 0, False), ((5, 4), 1, True), ((3, 5, 4), (1, 2), True),
     ((3, 5, 4), -2, False), ((3, 5, 4), -1, False), ((7,), None, True)],
)  # fmt: skip
def test_the_backends_logsumexp_is_scipys(shape, axis, keepdims):
    """The lean log-sum-exp of the Laplace backend against scipy's, values and shapes,
    with rows of -inf, +inf, NaN and values near the largest double."""
    from scipy.special import logsumexp as reference

    from yieldwise.backends._laplace import logsumexp

    a = np.random.default_rng(3).normal(size=shape) * 300
    got, expected = logsumexp(a, axis, keepdims), reference(a, axis=axis, keepdims=keepdims)
    assert np.shape(got) == np.shape(expected)
    assert np.allclose(got, expected, rtol=1e-14, atol=0)
    edges = np.array([[-np.inf, -np.inf], [np.inf, 800.0], [np.nan, 1.0], [1e308, 1e308]])
    assert np.array_equal(logsumexp(edges, 1), reference(edges, axis=1), equal_nan=True)
    assert logsumexp(np.full(3, -np.inf)) == -np.inf


def _batch_models():
    """A plain three-class model (marginal density, level ridge, floor, random whitening),
    one with group offsets and one with local blocks."""
    rng = np.random.default_rng(11)
    data, *_ = _data(classes=3)
    plain = {**_random_whitening(data, rng), "tau_f_floor": 0.9, "density_marginal": 1,
             "level_scale": 2.0}  # fmt: skip
    n = 240
    cls = rng.integers(0, 3, n)
    y = np.round(rng.normal(cls, 1.0), 1)
    groups = (rng.integers(0, 5, n), np.array([0, 0, 1, 1, 2]))  # group, its parent
    grouped, _ = build_stan_data(cls, y, y, None, 3, preconditioned=False, groups=groups)
    local, _ = build_stan_data(cls, y, y, None, 3, 12, {"tau_l_scale": 5.0}, preconditioned=False)
    return {"plain": plain, "grouped": grouped, "local": local}


@pytest.mark.parametrize("kind", ["plain", "grouped", "local"])
def test_log_densities_of_a_batch_are_each_rows_own_and_the_hessian_its_differences(kind):
    """log_densities over six points equals log_density at each alone (no row leaks into
    another; a row whose likelihood underflows is -inf with a NaN gradient and leaves the
    others as they are), and the Hessian from one batch of 2 U gradients equals the central
    differences of the gradient taken one coordinate at a time."""
    model = TransducerDensity(_batch_models()[kind])
    rng = np.random.default_rng(3)
    us = np.stack([_random_u(model, rng) for _ in range(6)])
    us[:, model.slices["log_tau_f"]] += rng.normal(0.0, 0.3, (6, 2))  # rows differ everywhere
    lp, grad = model.log_densities(us)
    for i, u in enumerate(us):
        alone = model.log_density(u)
        assert lp[i] == pytest.approx(alone[0], rel=1e-12)
        np.testing.assert_allclose(grad[i], alone[1], rtol=1e-10, atol=1e-10)
    if kind == "grouped":  # 60 kernels: row 2's density slopes by 10^4 along the outputs,
        # so the items at the far end get weight 0 at every kernel they reach (the plain and
        # local models' 12 wide kernels keep some weight everywhere)
        broken = us.copy()
        broken[2, model.slices["a_fixed"]] = 1e4
        lp_b, grad_b = model.log_densities(broken)
        assert lp_b[2] == -np.inf and np.isnan(grad_b[2]).all()
        keep = np.arange(6) != 2
        np.testing.assert_allclose(lp_b[keep], lp[keep], rtol=1e-12)
        np.testing.assert_allclose(grad_b[keep], grad[keep], rtol=1e-10, atol=1e-10)
    u = us[0]
    h = 1e-5 * np.maximum(1.0, np.abs(u))
    columns = []
    for j in range(u.size):
        step = np.zeros_like(u)
        step[j] = h[j]
        columns.append(
            (model.log_density(u + step)[1] - model.log_density(u - step)[1]) / (2 * h[j])
        )
    by_coordinate = np.column_stack(columns)
    np.testing.assert_allclose(model.hessian(u), 0.5 * (by_coordinate + by_coordinate.T),
                               rtol=1e-7, atol=1e-7 * np.abs(by_coordinate).max())  # fmt: skip


@pytest.mark.parametrize(
    ("size", "batches"),
    [
        (6, {12}),  # a whole Hessian: its 2 U = 12 gradients in one call
        (20, {16, 8}),  # 40 gradients in calls of at most _HESSIAN_POINTS = 16
        (60, {2}),  # beyond _EXACT_NEWTON_MAX_SIZE: products, two points a call
    ],
)
def test_the_mode_search_takes_its_curvature_from_batched_gradients(size, batches):
    """_minimum on a quadratic 0.5 x'Ax - b'x, its curvature from the gradients of several
    points at a time (a whole Hessian up to _EXACT_NEWTON_MAX_SIZE coordinates, else
    Hessian-vector products): the minimum A^-1 b by a linear solve, and every call asked
    for one point (value and gradient) or a batch of the expected sizes."""
    from yieldwise.backends import _laplace
    from yieldwise.backends._laplace import _minimum

    assert _laplace._EXACT_NEWTON_MAX_SIZE == 48 and _laplace._HESSIAN_POINTS == 16
    rng = np.random.default_rng(8)
    q = rng.normal(size=(size, size))
    a, b = q @ q.T + size * np.eye(size), rng.normal(size=size)
    calls = []

    def negatives(xs):
        calls.append(xs.shape)
        # a is symmetric: each row's value and gradient a x - b
        return 0.5 * np.einsum("ni,ij,nj->n", xs, a, xs) - xs @ b, xs @ a - b

    found = _minimum(negatives, np.zeros(size), 100)
    np.testing.assert_allclose(found.x, np.linalg.solve(a, b), atol=1e-6)  # gtol 1e-6
    assert found.success
    assert {n for n, _ in calls} == {1} | batches and {u for _, u in calls} == {size}
