"""Transducer fits with Stan on simulated data whose true p(c | y) is known.

Small, seeded fits (2 chains, a few hundred iterations); tolerances, not exact
draws. The model compiles once per machine (cached by the backend). The leave-one-out
checks at the end run on given draws, without Stan.
"""

import os
import time
import warnings

import arviz as az
import numpy as np
import pytest
from scipy.special import expit, logit
from scipy.stats import beta as beta_dist
from scipy.stats import norm

from yieldwise import Transducer, UtilityMatrix, _design, _mixture
from yieldwise.backends import SamplerWarning, available_backends, get_backend, stan_file
from yieldwise.transducer import stan_data as _stan_data

needs_stan = pytest.mark.skipif(
    not available_backends(), reason="no Stan backend (cmdstanpy or PyStan) is installed"
)

FAST = {"chains": 2, "warmup": 300, "draws": 300, "progress": False}
# Class-conditional output distributions: y | 0 ~ Beta(2, 5), y | 1 ~ Beta(5, 2).
SHAPES = {0: (2.0, 5.0), 1: (5.0, 2.0)}


def simulate(n, prevalence, rng):
    classes = (rng.random(n) < prevalence).astype(int)
    a = np.where(classes == 1, SHAPES[1][0], SHAPES[0][0])
    b = np.where(classes == 1, SHAPES[1][1], SHAPES[0][1])
    return rng.beta(a, b), classes


def true_posterior(y, prevalence):
    """Bayes' rule with the known class-conditional densities: p(1 | y)."""
    f1 = prevalence * beta_dist.pdf(y, *SHAPES[1])
    f0 = (1 - prevalence) * beta_dist.pdf(y, *SHAPES[0])
    return f1 / (f0 + f1)


GRID = np.linspace(0.1, 0.9, 9)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(20261122)
    y, c = simulate(600, 0.3, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # diagnostics are asserted on explicitly below
        t = Transducer(seed=1, **FAST).fit(y, c)
    return t, y, c


@pytest.fixture(scope="module")
def vote_fit():
    """Vote fractions k/100 (exact 0s and 1s): interval-censored bins on the logit scale."""
    rng = np.random.default_rng(20261123)
    classes = (rng.random(500) < 0.35).astype(int)
    p = np.where(classes == 1, rng.beta(4, 1, 500), rng.beta(1, 4, 500))
    votes = rng.binomial(100, p) / 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = Transducer(seed=2, **FAST).fit(votes, classes)
    return t, votes, classes


@needs_stan
def test_backend_is_recorded(fitted, record_property):
    t, _, _ = fitted
    record_property("stan_backend", t.backend_)
    print(f"\n[yieldwise] transducer fitted with the {t.backend_!r} backend")
    assert t.backend_ in available_backends()
    assert t.posterior_.posterior.attrs["yieldwise_backend"] == t.backend_


def _stored_log_likelihood(t):
    """yieldwise._mixture.log_likelihood from the stored draws at the stored merged rows."""
    post, rows = t.posterior_.posterior, t.posterior_.constant_data
    s = post.sizes["chain"] * post.sizes["draw"]
    flat = {name: post[name].values.reshape(s, *post[name].shape[2:])
            for name in ("w", "alpha", "mu", "sigma")}  # fmt: skip
    outputs = t.posterior_.observed_data["outputs"].values
    censored = t.transform_.intervals(outputs)[2]
    ll = _mixture.log_likelihood(
        flat["w"], flat["alpha"], flat["mu"], flat["sigma"], rows["cls"].values - 1,
        rows["y_lower"].values, rows["y_upper"].values, censored, rows["count"].values,
    )  # fmt: skip
    return ll.reshape(post.sizes["chain"], post.sizes["draw"])


@needs_stan
@pytest.mark.parametrize("which", ["point", "censored"])
def test_stan_log_lik_equals_the_numpy_mixture_at_the_merged_rows(which, fitted, vote_fit):
    """Stan computes the likelihood from precomputed kernel values (a matrix product);
    numpy from w, alpha, mu, sigma with log-space Normal pdf / cdf differences. Equal for
    every draw: the kernel data, the merged rows and the reported mixture agree."""
    t = (fitted if which == "point" else vote_fit)[0]
    rows = t.posterior_.constant_data
    if which == "censored":
        assert t.transform_.resolution[0] == 0.01
        assert np.isneginf(rows["y_lower"].values).any() and rows["count"].values.max() > 1
    assert rows["count"].values.sum() == t.n_calibration_
    stan = t.posterior_.posterior["log_lik"].values
    np.testing.assert_allclose(_stored_log_likelihood(t), stan, rtol=1e-8)
    assert np.ptp(stan) > 1.0  # the draws differ: this is not one number checked many times


@needs_stan
def test_recovers_known_transducer(fitted, record_property):
    """The posterior mean curve follows the known p(1 | y) closely.

    The truth here is outside the model class (the logits of Beta variables are skewed;
    the kernels are Gaussian), so this is a tolerance on a near miss, not a coverage claim.
    """
    t, _, _ = fitted
    truth = true_posterior(GRID, 0.3)
    band = t.predict_interval(GRID, prob=0.95)
    p1 = band["mean"].values[:, 1]
    record_property("max_abs_error", float(np.abs(p1 - truth).max()))
    assert np.abs(p1 - truth).max() < 0.13
    assert (np.diff(p1) > 0).all()  # the truth is increasing in y
    inside = (band["lower"].values[:, 1] <= truth) & (truth <= band["upper"].values[:, 1])
    record_property("band95_points_covering_truth", int(inside.sum()))


@needs_stan
def test_posterior_layout_and_diagnostics(fitted):
    t, y, _ = fitted
    post = t.posterior_.posterior
    k = _design.GRID_1D
    assert t.n_components_ == post.sizes["component"] == k
    assert post["alpha"].dims == ("chain", "draw", "component", "class")
    assert post["mu"].dims == ("chain", "draw", "component", "output_dim")
    assert list(post["output_dim"].values) == ["logit(output)"]
    # the kernels are fixed: an even grid, width half the spacing, in every draw
    mu = post["mu"].values
    np.testing.assert_array_equal(mu, np.broadcast_to(mu[:1, :1], mu.shape))
    np.testing.assert_allclose(np.diff(mu[0, 0, :, 0]), 2 * post["sigma"].values[0, 0, 0, 0])
    stats = t.posterior_.sample_stats
    assert {"diverging", "tree_depth", "lp", "step_size"} <= set(stats.data_vars)
    np.testing.assert_array_equal(t.posterior_.observed_data["outputs"].values[:, 0], y)
    table = t.diagnostics()
    assert table["quantity"].iloc[0] == "log_lik"
    assert {"r_hat", "ess_bulk", "ess_tail", "ok"} <= set(table.columns)
    assert (table["r_hat"] < 1.05).all()
    summary = t.sampler_summary()
    assert summary["divergent"] == 0 and summary["max_treedepth_hits"] == 0
    assert summary["adapt_delta"] == 0.99  # one output dimension's default


@needs_stan
def test_generative_mode(fitted):
    t, _, c = fitted
    frequencies = np.bincount(c) / len(c)
    discriminative = t.predict_proba(GRID)
    own = t.predict_proba(GRID, prevalences=frequencies)
    assert np.abs(own - discriminative).max() < 0.03
    # Shifted prevalence: Bayes' rule applied by hand to the discriminative transducer.
    r = np.array([0.2, 0.8])
    odds = (
        discriminative[:, 1]
        / discriminative[:, 0]
        * (r[1] / r[0])
        / (frequencies[1] / frequencies[0])
    )
    shifted = t.predict_proba(GRID, prevalences=r)[:, 1]
    assert np.abs(shifted - odds / (1 + odds)).max() < 0.03
    assert np.abs(shifted - true_posterior(GRID, 0.8)).max() < 0.15


@needs_stan
def test_save_load_after_fit(fitted, tmp_path):
    t, _, _ = fitted
    loaded = Transducer.load(t.save(tmp_path / "fit.nc"))
    assert np.array_equal(loaded.predict_proba(GRID), t.predict_proba(GRID))
    assert np.array_equal(loaded.draws_proba(GRID).values, t.draws_proba(GRID).values)
    assert loaded.diagnostics().equals(t.diagnostics())


@needs_stan
def test_decisions_follow_threshold(fitted):
    t, _, _ = fitted
    u = UtilityMatrix([[1, -4], [0, 1]])  # choose 1 when p(1 | y) > 0.8
    p = t.predict_proba(GRID)[:, 1]
    assert (t.decide(GRID, u) == (p > u.threshold()).astype(int)).all()


@needs_stan
def test_loo_on_a_fit_reports_every_item(vote_fit):
    t, votes, _ = vote_fit
    joint, cond = t.loo(), t.loo(conditional=True)
    assert joint["n_data_points"] == cond["n_data_points"] == votes.size
    assert joint["pareto_k"].shape == (votes.size,)
    assert (joint["pareto_k"].values < 0.7).all()  # 500 items, 30 smooth kernels: stable
    # log p(c | y) <= 0 item by item, and the conditional score beats the base rate's
    base = np.log(np.bincount(vote_fit[2]) / votes.size)[vote_fit[2]].sum()
    assert (cond["loo_i"].values < 0).all() and cond["elpd_loo"] > base + 100


# --- known truth: a logistic p(1 | y) inside the model's smooth limit -------------------


@needs_stan
def test_bands_cover_a_logistic_truth(record_property):
    """Two Normal classes with equal variance: p(1 | y) = expit(b0 + b1 y), a truth the
    model holds in its smooth limit (class log-odds linear in the output). With 600 items
    the 95 % bands cover it at most of 9 outputs spread over the data: at least 7 (if the
    9 misses were independent at 5 %, 7 or fewer hits would have probability 0.008)."""
    rng = np.random.default_rng(44)
    n, prevalence = 600, 0.4
    classes = (rng.random(n) < prevalence).astype(int)
    y = rng.normal(np.where(classes == 1, 1.0, -1.0), 1.2)
    b1 = 2.0 / 1.2**2
    at = np.quantile(y, np.linspace(0.05, 0.95, 9))
    truth = expit(np.log(prevalence / (1 - prevalence)) + b1 * at)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = Transducer(seed=3, output_transform="identity", resolution=None, **FAST).fit(y, classes)
    band = t.predict_interval(at, prob=0.95)
    inside = (band["lower"].values[:, 1] <= truth) & (truth <= band["upper"].values[:, 1])
    record_property("band95_hits_of_9", int(inside.sum()))
    assert inside.sum() >= 7, (band["lower"].values[:, 1], truth, band["upper"].values[:, 1])
    assert np.abs(band["mean"].values[:, 1] - truth).max() < 0.1


@needs_stan
def test_hard_labels_sample_clean_and_match_the_binomial_posterior(record_property):
    """A classifier that gives hard labels (outputs exactly 0 or 1): two distinct outputs,
    so no smooth part (``_design.distinct_outputs``). At the default sampler settings the
    fit has no divergent transition (with the smooth part kept, another hard-label set of
    1,500 items had 16 of 4,000: docs/model.md, "Hard labels"), and at each
    output the posterior of p(1 | y) is the binomial one: with about 500 items per output
    and flat-ish priors, Beta(k + 1, n - k + 1): its mean and 95 % band within 0.006
    (measured 0.0013-0.0036; the band is about 0.06 wide, the draws' own Monte Carlo
    error in a 2.5 % quantile about 0.001), so a band a quarter too narrow fails."""
    rng = np.random.default_rng(31)
    classes = (rng.random(1000) < 0.4).astype(int)
    right = rng.random(1000) < np.where(classes == 1, 0.75, 0.9)
    labels = np.where(right, classes, 1 - classes).astype(float)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = Transducer(seed=4, progress=False).fit(labels, classes)
    summary = t.sampler_summary()
    record_property("divergent", summary["divergent"])
    assert summary["divergent"] == 0 and summary["max_treedepth_hits"] == 0
    assert not [w for w in caught if issubclass(w.category, SamplerWarning)]
    band = t.predict_interval([0.0, 1.0], prob=0.95)
    for j, value in enumerate([0.0, 1.0]):
        k, n = int(classes[labels == value].sum()), int((labels == value).sum())
        exact = beta_dist(k + 1, n - k + 1)
        assert abs(band["mean"].values[j, 1] - exact.mean()) < 0.006
        assert abs(band["lower"].values[j, 1] - exact.ppf(0.025)) < 0.006
        assert abs(band["upper"].values[j, 1] - exact.ppf(0.975)) < 0.006


# --- simulation-based calibration of the model itself --------------------------------
#
# Parameters drawn from the very prior the program uses, on a fixed design (8 kernels on an
# even grid over [-2, 2], point outputs); data drawn from those parameters; the program
# fitted to them. For an exact posterior, the rank of the true F(1 | y) among the posterior
# draws is uniform, at any output y (Talts et al. 2018, "Validating Bayesian inference
# algorithms with simulation-based calibration"). The design is computed once from a
# reference set and kept for every simulated set: Transducer.fit would place kernels on
# each data set, a prior that depends on the data, which SBC cannot check.

SBC_K = 8
SBC_N = 300
SBC_PRIOR = {"tau_a_scale": 3.0, "tau_f_scale": 3.0, "intercept_scale": 1.5, "slope_scale": 4.0}
SBC_AT = np.array([-1.5, -0.5, 0.5, 1.5])
SBC_THIN = 4  # 2 x 200 draws -> 100 for the ranks (less autocorrelation)
# 10 fits took 24 s with PyStan on 2 shared cores (load ~7), 2026-11-24: affordable in CI
SBC_FITS = int(os.environ.get("YIELDWISE_SBC_FITS", "10"))


def _sbc_design_data():
    ref = np.linspace(-2.0, 2.0, 200)
    data, design = _stan_data.build_stan_data(
        np.arange(200) % 2, ref, ref, [0], 2, SBC_K, SBC_PRIOR, preconditioned=False
    )
    return data, design


def _draw_prior(data, rng):
    """theta = a + f from the program's prior: fixed parts Normal(0, fixed_scale), smooth
    parts tau * smooth_basis @ N(0, 1), tau_a half-Normal, tau_f half-Student-t
    (docs/model.md)."""
    fixed, smooth = np.asarray(data["fixed_basis"]), np.asarray(data["smooth_basis"])
    scale = np.asarray(data["fixed_scale"])
    tau_a = abs(rng.normal(0.0, data["tau_a_scale"]))
    a = fixed[:, 1:] @ rng.normal(0.0, scale[1:]) + tau_a * smooth @ rng.normal(size=data["R"])
    tau_f = abs(data["tau_f_scale"] * rng.standard_t(data["tau_f_df"]))
    f = fixed @ rng.normal(0.0, scale) + tau_f * smooth @ rng.normal(size=data["R"])
    theta = np.column_stack([a, a + f])
    beta = np.exp(theta - theta.max())
    return beta / beta.sum()


def _sbc_data(data, design, beta, rng):
    """n items from the mixture beta over (kernel, class); the program's data for them."""
    pick = rng.choice(beta.size, size=SBC_N, p=beta.ravel())
    kernel, cls = np.divmod(pick, 2)
    y = rng.normal(design.loc[kernel, 0], design.width[0])
    cls_u, rows, count = _stan_data.merge_rows(cls, y)
    kern, log_scale = _design.kernel_matrix(design.loc, design.width, rows, rows, [0])
    new = dict(data)
    new.update(N=int(cls_u.size), cls=cls_u + 1, count=count, kern=kern,
               kern_log_scale=log_scale, y_lower=rows, y_upper=rows,
               **_stan_data.sparse_kernels(kern, cls_u + 1, cut=1e-15))  # fmt: skip
    return _stan_data.precondition(new), cls  # the sampler's coordinates for these data


def _true_f1(design, beta, y):
    dens = norm.pdf(y[:, None], design.loc[None, :, 0], design.width[0])  # (points, K)
    return (dens @ beta[:, 1]) / (dens @ beta.sum(axis=1))


@needs_stan
def test_simulation_based_calibration(record_property):
    """Ranks of the true F(1 | y) at 4 outputs among 100 posterior draws, over SBC_FITS
    (default 10) prior draws.

    The bound: a uniform rank falls in the middle half with probability 1/2 and in the
    outer tenth (both 5 % tails) with probability 0.1. With 40 ranks (positively correlated
    within a fit, so effectively between 10 and 40 independent ones) we require the
    middle-half share in [0.25, 0.75] and the outer-tenth share at most 0.3; under
    uniformity these fail with probability 0.0007 and 0.0001 for 40 independent ranks, 0.11
    and 0.013 for 10. Loose, but able to fail: posterior bands half as wide as they should
    be put 41 % of ranks in the outer tenth (and 26 % in the middle half); a bias of 1.5
    posterior sd puts 44 % in the tails and 19 % in the middle.
    """
    program = get_backend("auto").compile(stan_file("transducer"))
    data, design = _sbc_design_data()
    rng = np.random.default_rng(2026)
    ranks, started = [], time.perf_counter()
    fits = 0
    while fits < SBC_FITS:
        beta = _draw_prior(data, rng)
        sim, cls = _sbc_data(data, design, beta, rng)
        if np.bincount(cls, minlength=2).min() < 5:  # rejection on the data only: still exact
            continue
        inits = _stan_data.sampler_inits(sim, 2, seed=fits)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SamplerWarning)
            result = program.sample(sim, chains=2, warmup=200, draws=200, seed=100 + fits,
                                    init=inits, progress=False)  # fmt: skip
        draws = _stan_data.with_kernels(result.draws, sim)  # mu, sigma: the data's kernels
        flat = {name: draws[name][:, ::SBC_THIN].reshape(-1, *draws[name].shape[2:])
                for name in ("w", "alpha", "mu", "sigma")}  # fmt: skip
        log_g = _mixture.log_joint(flat["w"], flat["alpha"], flat["mu"], flat["sigma"],
                                   SBC_AT, SBC_AT, [0])  # fmt: skip
        draws_f1 = _mixture.per_draw_probabilities(log_g)[:, :, 1]  # (draws, points)
        truth = _true_f1(design, beta, SBC_AT)
        ranks.append((draws_f1 < truth[None, :]).mean(axis=0))
        fits += 1
    seconds = time.perf_counter() - started
    u = np.concatenate(ranks)
    middle = float(np.mean((u >= 0.25) & (u < 0.75)))
    tails = float(np.mean((u < 0.05) | (u >= 0.95)))
    record_property("sbc_seconds", seconds)
    record_property("sbc_middle_half_share", middle)
    record_property("sbc_outer_tenth_share", tails)
    print(f"\n[yieldwise] SBC: {fits} fits in {seconds:.0f} s; middle half {middle:.2f}, "
          f"outer tenth {tails:.2f}; ranks by quarter {np.histogram(u, 4, (0, 1))[0]}")  # fmt: skip
    assert 0.25 <= middle <= 0.75, u
    assert tails <= 0.3, u


# --- Transducer.loo from given draws (no Stan) ------------------------------------------

LOO_LABELS = ("neg", "pos")


def _random_draws(rng, chains, draws, k, c=2):
    w = rng.dirichlet(np.ones(k), size=(chains, draws))
    alpha = rng.dirichlet(np.ones(c), size=(chains, draws, k))
    mu = np.sort(rng.normal(0.0, 1.5, (chains, draws, k, 1)), axis=2)
    sigma = np.exp(rng.normal(-0.2, 0.3, (chains, draws, k, 1)))
    return {"w": w, "alpha": alpha, "mu": mu, "sigma": sigma}


def _identity_transducer(rng, draws):
    classes = rng.integers(0, 2, 120)
    y = rng.normal(np.where(classes == 1, 1.0, -1.0), 1.0)
    y[:20] = y[20:40]  # repeated outputs: 20 items share rows with 20 others
    classes[:20] = classes[20:40]
    labels = np.array(LOO_LABELS)[classes]
    t = Transducer.from_draws(draws, y, labels, LOO_LABELS, output_transform="identity",
                               resolution=None)  # fmt: skip
    return t, y, classes


def _brute_pointwise(draws, y, classes):
    """log G_t(c_i, y_i) per (chain, draw, item): sum_k w alpha Normal pdf, by scipy."""
    w, alpha, mu, sigma = (draws[name] for name in ("w", "alpha", "mu", "sigma"))
    dens = norm.pdf(y[None, None, :, None], mu[:, :, None, :, 0], sigma[:, :, None, :, 0])
    weight = w[:, :, None, :] * np.moveaxis(alpha[..., classes], -1, 2)  # (ch, dr, item, K)
    return np.log((weight * dens).sum(axis=3))


def test_loo_joint_equals_arviz_loo_on_the_items_log_likelihood():
    rng = np.random.default_rng(30)
    draws = _random_draws(rng, 2, 150, 4)
    t, y, classes = _identity_transducer(rng, draws)
    ours = t.loo()
    pointwise = _brute_pointwise(draws, y, classes)  # (chain, draw, item): one per item
    # Transducer.loo takes ArviZ's relative efficiency of the draws (every one of which
    # varies here): az.loo's default on the same posterior
    idata = az.from_dict(posterior=draws, log_likelihood={"y": pointwise})
    reference = az.loo(idata, pointwise=True)
    assert ours["n_data_points"] == y.size == 120 and ours["n_samples"] == 300
    for key in ("elpd_loo", "p_loo", "se"):
        assert ours[key] == pytest.approx(reference[key], rel=1e-10), key
    np.testing.assert_allclose(ours["loo_i"].values, reference["loo_i"].values, rtol=1e-10)
    np.testing.assert_allclose(ours["pareto_k"].values, reference["pareto_k"].values, rtol=1e-8)
    # Pareto k per item: items sharing a row share their importance ratios
    assert ours["pareto_k"].shape == (120,)
    # in blocks of 7 items (LOO_CHUNK_VALUES over draws x classes): the same, item by item
    from yieldwise.transducer import estimator

    saved = estimator.LOO_CHUNK_VALUES
    whole = {c: t.loo(conditional=c) for c in (False, True)}
    try:
        estimator.LOO_CHUNK_VALUES = 7 * 300 * 2
        blocks = {c: t.loo(conditional=c) for c in (False, True)}
    finally:
        estimator.LOO_CHUNK_VALUES = saved
    for c in (False, True):
        for key in ("elpd_loo", "p_loo", "se"):
            assert blocks[c][key] == pytest.approx(whole[c][key], rel=1e-12), key
        np.testing.assert_allclose(
            blocks[c]["pareto_k"].values, whole[c]["pareto_k"].values, rtol=1e-9
        )
    np.testing.assert_array_equal(ours["pareto_k"].values[:20], ours["pareto_k"].values[20:40])
    assert ours["warning"] == bool((ours["pareto_k"].values > ours["good_k"]).any())


def test_loo_joint_on_a_lattice_is_the_bin_probability_over_h():
    """Vote fractions k/40 on the logit scale: each item's log-likelihood is
    log(sum_k w alpha (Phi(b) - Phi(a))) - log(1/40), a the bin's edges on the logit scale."""
    rng = np.random.default_rng(31)
    draws = _random_draws(rng, 2, 100, 3)
    draws["mu"] = draws["mu"] * 1.5  # logit scale
    classes = rng.integers(0, 2, 200)
    votes = rng.binomial(40, np.where(classes == 1, 0.8, 0.2)) / 40
    labels = np.array(LOO_LABELS)[classes]
    t = Transducer.from_draws(draws, votes, labels, LOO_LABELS, output_transform="logit",
                               resolution="auto")  # fmt: skip
    lo, hi = np.clip(votes - 1 / 80, 0, 1), np.clip(votes + 1 / 80, 0, 1)
    with np.errstate(divide="ignore"):
        a, b = logit(lo), logit(hi)
    mu, sigma = draws["mu"][..., 0], draws["sigma"][..., 0]  # (ch, dr, K)
    aa, bb = a[None, None, :, None], b[None, None, :, None]
    m, sd = mu[:, :, None], sigma[:, :, None]
    with np.errstate(invalid="ignore"):  # -inf + inf at the open-ended bins: not taken
        upper = aa + bb > 2 * m  # above the centre, survival functions keep precision
    mass = np.where(upper, norm.sf(aa, m, sd) - norm.sf(bb, m, sd),
                    norm.cdf(bb, m, sd) - norm.cdf(aa, m, sd))  # fmt: skip
    weight = draws["w"][:, :, None, :] * np.moveaxis(draws["alpha"][..., classes], -1, 2)
    pointwise = np.log((weight * mass).sum(axis=3)) + np.log(40.0)
    idata = az.from_dict(posterior=draws, log_likelihood={"y": pointwise})
    reference = az.loo(idata, pointwise=True)  # ArviZ's relative efficiency, as loo()'s
    ours = t.loo()
    assert ours["elpd_loo"] == pytest.approx(reference["elpd_loo"], rel=1e-9)
    np.testing.assert_allclose(ours["loo_i"].values, reference["loo_i"].values, rtol=1e-9)
    assert ours["pareto_k"].shape == (200,)


def test_conditional_loo_with_identical_draws_is_the_log_score():
    """With every draw the same mixture, leaving an item out changes nothing: the
    conditional elpd is the sum of log p(c_i | y_i), the transducer's own log score."""
    rng = np.random.default_rng(32)
    one = _random_draws(rng, 1, 1, 4)
    draws = {name: np.repeat(value, 50, axis=1) for name, value in one.items()}  # 1 x 50
    t, y, classes = _identity_transducer(rng, draws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant ratios: the Pareto fit may complain
        ours = t.loo(conditional=True)
    proba = t.predict_proba(y)
    expected = np.log(proba[np.arange(y.size), classes])
    np.testing.assert_allclose(ours["loo_i"].values, expected, rtol=1e-10)
    assert ours["elpd_loo"] == pytest.approx(expected.sum(), rel=1e-10)
    assert ours["p_loo"] == pytest.approx(0.0, abs=1e-8)
    # the same by hand from the mixture: w alpha Normal pdf, normalised over classes
    g = np.stack([_brute_pointwise(one, y, np.full(y.size, c))[0, 0] for c in (0, 1)], axis=1)
    by_hand = g[np.arange(y.size), classes] - np.log(np.exp(g).sum(axis=1))
    np.testing.assert_allclose(ours["loo_i"].values, by_hand, rtol=1e-10)
    assert ours["pareto_k"].shape == (120,)


def test_conditional_loo_is_below_the_joint_by_the_log_marginal_of_y():
    """log p(c | y) = log p(c, y) - log p(y): with identical draws the difference of the
    two elpds is the sum of log sum_c G(c, y_i)."""
    rng = np.random.default_rng(33)
    one = _random_draws(rng, 1, 1, 3)
    draws = {name: np.repeat(value, 40, axis=1) for name, value in one.items()}
    t, y, _ = _identity_transducer(rng, draws)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        joint, cond = t.loo(), t.loo(conditional=True)
    g = np.stack([_brute_pointwise(one, y, np.full(y.size, c))[0, 0] for c in (0, 1)], axis=1)
    marginal = np.log(np.exp(g).sum(axis=1))
    np.testing.assert_allclose(joint["loo_i"].values - cond["loo_i"].values, marginal,
                               rtol=1e-10)  # fmt: skip


# ------------------------------------------------- labels a transducer file cannot hold
class _ReachedTheBackend(Exception):
    """Raised in place of choosing a backend: the fit got as far as sampling."""


@pytest.fixture
def no_sampling(monkeypatch):
    """``get_backend`` replaced by a stub that records the call and raises: no fit runs."""
    import yieldwise.backends

    calls = []

    def reached(name):
        calls.append(name)
        raise _ReachedTheBackend(name)

    monkeypatch.setattr(yieldwise.backends, "get_backend", reached)
    return calls


def test_fit_refuses_labels_that_save_would_refuse_before_any_sampling(no_sampling):
    """Tuple labels were fitted (with a Laplace fit's or Stan's whole sampling) and only
    refused by save(). fit now refuses them first, naming the argument they came in
    (classes, or class_labels when given), the label and its type, by the same rule as
    save (transducer.io.check_savable_labels)."""
    from yieldwise._validation import object_array

    rng = np.random.default_rng(5)
    y = rng.random(60)
    labels = object_array([("a", 1) if v > 0.5 else ("b", 2) for v in y])
    transducer = Transducer(backend="laplace", progress=False)
    with pytest.raises(TypeError) as error:
        transducer.fit(y, labels)
    assert str(error.value) == (
        "classes holds the class label ('a', 1) of type tuple, which cannot be saved "
        "(save() would fail after the fit); use str, int, float or bool labels (e.g. map "
        "each label to a string)"
    )
    with pytest.raises(TypeError, match=r"^class_labels holds the class label \('b', 2\) "
                                        r"of type tuple, which cannot be saved"):  # fmt: skip
        transducer.fit(y, labels, class_labels=[("b", 2), ("a", 1)])
    assert no_sampling == []  # refused before a backend was even chosen
    assert not hasattr(transducer, "classes_")
    # a transducer given its draws holds the file's record from the start: the same rule
    with pytest.raises(TypeError, match=r"^class_labels holds the class label \('a', 1\) "
                                        r"of type tuple, which cannot be saved; use str, "
                                        "int, float or bool labels"):  # fmt: skip
        Transducer.from_draws(_random_draws(rng, 1, 5, 2), y, labels, (("a", 1), ("b", 2)),
                              output_transform="identity", resolution=None)  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "pair"),
    [
        (np.int64, (3, 7)),
        (np.str_, ("no", "yes")),
        (np.bool_, (False, True)),
        (np.float64, (0.5, 1.5)),
    ],
)
def test_numpy_scalar_labels_still_reach_the_sampler_and_save(no_sampling, tmp_path, kind, pair):
    """numpy scalars stand for the Python scalars a file holds: fit lets them through to
    the backend (stubbed here), and a transducer holding them as they are saves and
    loads with the Python labels."""
    from yieldwise.transducer.io import check_savable_labels

    rng = np.random.default_rng(6)
    y = rng.random(60)
    labels = np.array([kind(pair[int(v > 0.5)]) for v in y])
    with pytest.raises(_ReachedTheBackend):
        Transducer(backend="laplace", progress=False).fit(y, labels)
    with pytest.raises(_ReachedTheBackend):
        Transducer(backend="laplace", progress=False).fit(
            y, labels, class_labels=[kind(pair[0]), kind(pair[1])]
        )
    assert no_sampling == ["laplace", "laplace"]
    check_savable_labels([kind(x) for x in pair], "labels")  # nothing to refuse
    class_labels = (kind(pair[0]), kind(pair[1]))
    given = Transducer.from_draws(_random_draws(rng, 1, 5, 2), y, labels, class_labels,
                                  output_transform="identity", resolution=None)  # fmt: skip
    given.save(tmp_path / "t.nc")
    loaded = Transducer.load(tmp_path / "t.nc")
    assert loaded.classes_ == pair
    assert [type(x) for x in loaded.classes_] == [type(x) for x in pair]
