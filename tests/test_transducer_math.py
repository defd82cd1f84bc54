"""Transducer predictions from given posterior draws (no Stan): theory 3.2 by hand.

The posterior here is built directly from known mixture parameters, so every
formula can be checked against an independent computation with scipy.stats.
"""

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from yieldwise import Transducer, UtilityMatrix
from yieldwise.transducer import ExtrapolationWarning

# Two draws of a 2-component, 2-class, 1-D mixture on the identity scale.
W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
MU = np.array([[[-1.0], [1.5]], [[-0.5], [1.0]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])


def make_transducer(w, alpha, mu, sigma, outputs, classes, *, labels=("neg", "pos"),
                    spec="identity", resolution=None):  # fmt: skip
    """A fitted Transducer whose posterior is the given draws (one chain)."""
    draws = {"w": w[None], "alpha": alpha[None], "mu": mu[None], "sigma": sigma[None]}
    frame = pd.DataFrame({"score": np.asarray(outputs, float)})
    return Transducer.from_draws(
        draws, frame, np.asarray(labels)[np.asarray(classes)], tuple(labels),
        output_transform=spec, resolution=resolution,
    )  # fmt: skip


CALIBRATION = np.linspace(-3, 3, 30)
CLASSES = (CALIBRATION > 0).astype(int)


@pytest.fixture(scope="module")
def two_draws():
    return make_transducer(W, ALPHA, MU, SIGMA, CALIBRATION, CLASSES)


def joint_by_hand(y):
    """G_t(c, y) for each draw t, class c: shape (2, len(y), 2)."""
    g = np.zeros((2, len(y), 2))
    for t in range(2):
        for k in range(2):
            dens = norm.pdf(y, MU[t, k, 0], SIGMA[t, k, 0])
            g[t] += W[t, k] * ALPHA[t, k][None, :] * dens[:, None]
    return g


def test_exchangeable_and_non_exchangeable_formulas(two_draws):
    y = np.array([-2.0, -0.3, 0.0, 0.7, 2.5])
    g = joint_by_hand(y)
    pooled = g.sum(axis=0)
    np.testing.assert_allclose(
        two_draws.predict_proba(y), pooled / pooled.sum(axis=1, keepdims=True), rtol=1e-12
    )
    per_draw = g / g.sum(axis=2, keepdims=True)
    np.testing.assert_allclose(
        two_draws.predict_proba(y, exchangeable=False), per_draw.mean(axis=0), rtol=1e-12
    )
    draws = two_draws.draws_proba(y)
    assert draws.dims == ("chain", "draw", "item", "class")
    assert list(draws["class"].values) == ["neg", "pos"]
    np.testing.assert_allclose(draws.values.reshape(2, 5, 2), per_draw, rtol=1e-12)


def test_generative_mode_is_bayes_rule_by_hand(two_draws):
    y = np.array([-1.0, 0.4, 2.0])
    g = joint_by_hand(y)
    class_freq = np.einsum("sk,skc->sc", W, ALPHA)  # F_t(c)
    f_y_given_c = g / class_freq[:, None, :]
    r = np.array([0.3, 0.7])
    exch = (f_y_given_c.mean(axis=0) * r) / (f_y_given_c.mean(axis=0) * r).sum(1, keepdims=True)
    np.testing.assert_allclose(two_draws.predict_proba(y, prevalences=r), exch, rtol=1e-12)
    per_draw = f_y_given_c * r / (f_y_given_c * r).sum(axis=2, keepdims=True)
    np.testing.assert_allclose(
        two_draws.predict_proba(y, exchangeable=False, prevalences={"neg": 0.3, "pos": 0.7}),
        per_draw.mean(axis=0),
        rtol=1e-12,
    )


def test_generative_with_own_class_frequencies_reproduces_discriminative():
    # With a single draw, prevalences equal to F(c) give back F(c | y) exactly.
    t = make_transducer(W[:1], ALPHA[:1], MU[:1], SIGMA[:1], CALIBRATION, CLASSES)
    freq = np.einsum("k,kc->c", W[0], ALPHA[0])
    y = np.linspace(-2, 2, 9)
    np.testing.assert_allclose(t.predict_proba(y, prevalences=freq), t.predict_proba(y))


def test_interval_bands_and_mean(two_draws):
    y = np.array([-1.0, 1.0])
    band = two_draws.predict_interval(y, prob=0.5)
    per_draw = joint_by_hand(y)
    per_draw = per_draw / per_draw.sum(axis=2, keepdims=True)
    np.testing.assert_allclose(band["lower"].values, np.quantile(per_draw, 0.25, axis=0))
    np.testing.assert_allclose(band["upper"].values, np.quantile(per_draw, 0.75, axis=0))
    np.testing.assert_allclose(band["mean"].values, two_draws.predict_proba(y))
    assert band["mean"].dims == ("item", "class")


@pytest.mark.filterwarnings("ignore::yieldwise.transducer.ExtrapolationWarning")  # on purpose
def test_output_density_carries_the_jacobian():
    # Logit-transformed continuous outputs squeezed with n = 40: [0, 1] maps onto
    # [logit(0.5/40), logit(1 - 0.5/40)], so p(y | c) on (0, 1) integrates to the model's
    # mass on that interval, mean_t sum_k w_tk alpha_tkc / F_t(c) * (Phi(b) - Phi(a)).
    rng = np.random.default_rng(0)
    scores = rng.random(40)
    t = make_transducer(W, ALPHA, MU, SIGMA, scores, (scores > 0.5).astype(int), spec="logit")
    a, b = np.log(0.5 / 39.5), np.log(39.5 / 0.5)
    mass = norm.cdf(b, MU[..., 0], SIGMA[..., 0]) - norm.cdf(a, MU[..., 0], SIGMA[..., 0])
    for c, label in enumerate(("neg", "pos")):
        weight = W * ALPHA[:, :, c]
        expected = ((weight * mass).sum(axis=1) / weight.sum(axis=1)).mean()
        total, _ = quad(
            lambda p, label=label: float(
                t.output_density(np.array([p]), given_class=label)["mean"].values[0]
            ),
            0, 1, limit=200, epsabs=1e-11,
        )  # fmt: skip
        assert total == pytest.approx(expected, abs=1e-8)
        assert expected > 0.99


def test_censored_outputs_bin_probabilities_sum_to_one():
    votes = np.tile(np.arange(201), 3) / 200  # lattice k/200, repeated
    t = make_transducer(
        W, ALPHA, MU, SIGMA, votes, (votes > 0.5).astype(int), spec="logit", resolution="auto"
    )
    assert t.transform_.resolution == (0.005,)
    lattice = np.arange(201) / 200
    density = t.output_density(lattice)["mean"].values  # bin probability / h
    np.testing.assert_allclose((density * 0.005).sum(axis=0), [1.0, 1.0], rtol=1e-9)


def test_save_load_reproduces_predictions_exactly(two_draws, tmp_path):
    path = two_draws.save(tmp_path / "t.nc")
    loaded = Transducer.load(path)
    y = np.linspace(-3, 3, 17)
    assert np.array_equal(loaded.predict_proba(y), two_draws.predict_proba(y))
    assert np.array_equal(
        loaded.predict_interval(y)["upper"].values, two_draws.predict_interval(y)["upper"].values
    )
    assert loaded.classes_ == ("neg", "pos")
    assert loaded.transform_ == two_draws.transform_
    assert loaded.backend_ == "given-draws"
    assert loaded.get_params() == two_draws.get_params()
    assert loaded.seed_ == two_draws.seed_ == 0


def test_integer_labels_survive_save_load(tmp_path):
    t = make_transducer(W, ALPHA, MU, SIGMA, CALIBRATION, CLASSES, labels=(0, 1))
    loaded = Transducer.load(t.save(tmp_path / "t.nc"))
    assert loaded.classes_ == (0, 1) and all(type(c) is int for c in loaded.classes_)


def test_decide_uses_transducer_probabilities(two_draws):
    u = UtilityMatrix([[0, -10], [-1, 5]], decisions=["neg", "pos"], classes=["neg", "pos"])
    y = np.linspace(-3, 3, 25)
    p = two_draws.predict_proba(y)
    expected = np.where(p[:, 1] > u.threshold(), "pos", "neg")
    assert two_draws.decide(y, u).tolist() == expected.tolist()
    with pytest.raises(ValueError, match="utility's classes"):
        two_draws.decide(y, UtilityMatrix([[1, 0], [0, 1]]))


def test_dataframe_outputs_keep_names(two_draws):
    frame = pd.DataFrame({"score": [0.1, 0.2]})
    np.testing.assert_allclose(two_draws.predict_proba(frame), two_draws.predict_proba([0.1, 0.2]))


@pytest.mark.parametrize(
    ("outputs", "match"),
    [
        ([0.1, np.nan], "NaN"),
        ([0.1, np.inf], "finite"),
        (np.zeros((2, 2)), r"1 column\(s\) \['score'\] as at fit time, found 2"),
    ],
)
def test_predict_errors(two_draws, outputs, match):
    with pytest.raises(ValueError, match=match):
        two_draws.predict_proba(outputs)


def test_prevalence_errors(two_draws):
    # the sum as a number, not numpy's repr of a scalar ("np.float64(1.1)")
    with pytest.raises(ValueError, match=r"sum to 1, found \[0.5, 0.6\] \(sum 1.1\)$"):
        two_draws.predict_proba([0.0], prevalences=[0.5, 0.6])
    with pytest.raises(ValueError, match="one entry per class"):
        two_draws.predict_proba([0.0], prevalences=[1.0])
    with pytest.raises(ValueError, match="one value per class"):
        two_draws.predict_proba([0.0], prevalences={"neg": 0.5, "other": 0.5})
    # a pandas Series is read by its labels, like a mapping (it was read by position)
    classes = list(two_draws.classes_)
    as_series = pd.Series({classes[1]: 0.3, classes[0]: 0.7})
    np.testing.assert_array_equal(
        two_draws.predict_proba([0.0], prevalences=as_series),
        two_draws.predict_proba([0.0], prevalences=[0.7, 0.3]),
    )
    with pytest.raises(ValueError, match="one value per class"):
        two_draws.predict_proba([0.0], prevalences=pd.Series({"x": 0.3, "y": 0.7}))


def test_not_fitted_and_bad_file(tmp_path):
    with pytest.raises(RuntimeError, match="not fitted"):
        Transducer().predict_proba([0.1])
    with pytest.raises(FileNotFoundError):
        Transducer.load(tmp_path / "missing.nc")
    bad = tmp_path / "bad.nc"
    bad.write_text("not netcdf")
    with pytest.raises(ValueError, match="cannot be read as a NetCDF transducer file"):
        Transducer.load(bad)


@pytest.mark.parametrize(
    ("outputs", "classes", "match"),
    [
        (np.linspace(0, 1, 20), [0] * 20, "at least 2 classes"),
        (np.linspace(0, 1, 5), [0, 1, 0, 1, 0], "at least 10"),
        (np.linspace(0, 1, 20), [0, 1] * 9, "one label per row"),
        (np.r_[np.linspace(0, 1, 19), np.nan], [0, 1] * 10, "NaN"),
    ],
)
def test_fit_input_errors(outputs, classes, match):
    with pytest.raises(ValueError, match=match):
        Transducer().fit(outputs, classes)


def test_fit_class_without_items():
    with pytest.raises(ValueError, match=r"class\(es\) \['c'\] have no calibration items"):
        Transducer().fit(np.linspace(0, 1, 20), ["a", "b"] * 10, class_labels=["a", "b", "c"])
    with pytest.raises(ValueError, match="must be 'auto' or one of"):
        Transducer(output_transform="probit").fit(np.linspace(0, 1, 20), [0, 1] * 10)


@pytest.mark.filterwarnings("ignore::yieldwise.transducer.ExtrapolationWarning")  # on purpose
def test_many_continuous_outputs_are_interpolated_within_tolerance(two_draws):
    y = np.random.default_rng(3).normal(0, 1.5, 20_000)
    p = two_draws.predict_proba(y)
    assert 0 < two_draws.interpolation_error_ <= 1e-6
    exact = joint_by_hand(y[:500]).sum(axis=0)
    exact /= exact.sum(axis=1, keepdims=True)
    assert np.abs(p[:500] - exact).max() < 1e-5
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_chains_that_disagree_warn_with_what_to_try():
    """Two chains whose log-likelihoods sit 10 sd apart: R-hat far above 1.01."""
    from yieldwise.transducer import DiagnosticsWarning

    rng = np.random.default_rng(4)
    reps = 50
    draws = {
        "w": np.broadcast_to(W[0], (2, reps, 2)),
        "alpha": np.broadcast_to(ALPHA[0], (2, reps, 2, 2)),
        "mu": MU[0] + rng.normal(0.0, 0.05, (2, reps, 2, 1)),  # transducer values vary
        "sigma": np.broadcast_to(SIGMA[0], (2, reps, 2, 1)),
        "log_lik": rng.normal(0.0, 1.0, (2, reps)) + np.array([[0.0], [10.0]]),
    }
    frame = pd.DataFrame({"score": CALIBRATION})
    t = Transducer.from_draws(
        draws, frame, np.array(["neg", "pos"])[CLASSES], ("neg", "pos"),
        output_transform="identity", resolution=None,
    )  # fmt: skip
    assert t.diagnostics().set_index("quantity").loc["log_lik", "r_hat"] > 1.5
    # model 2 has no component count to lower: the warning names the worst quantity and
    # what to try (more draws or chains; adapt_delta with divergences)
    with pytest.warns(DiagnosticsWarning, match=r"worst: log_lik .*\(R-hat \d\.\d{3}, bulk ESS "
                      r"\d+\)\. Run more draws \(draws=\) or chains"):  # fmt: skip
        t._warn_on_invariants()


def test_reference_outputs_cover_the_range_when_most_outputs_repeat():
    """Two-thirds exact 0s: ranks over all items alone would put 6 of 9 points on 0."""
    outputs = np.concatenate([np.zeros(60), np.linspace(0.1, 3.0, 30)])
    classes = (outputs > 1.0).astype(int)
    t = make_transducer(W, ALPHA, MU, SIGMA, outputs, classes)
    reference = t.reference_outputs()[:, 0]
    assert set(reference) <= set(outputs)
    assert reference.min() == 0.0 and reference.max() == 3.0
    # The distinct values 0, 0.1, ..., 3.0 at 9 even ranks are about 3/8 apart.
    assert np.diff(np.sort(reference)).max() <= 3.0 / 8 + 0.1 + 1e-9
    assert (reference > 0).sum() >= 8


def test_log_joint_with_fixed_kernels_is_the_brute_force_mixture():
    """Model 2's draws share mu and sigma; log_joint then evaluates each kernel once per
    item. Checked against scipy's densities and bin probabilities, item by item."""
    from scipy.stats import norm as normal

    from yieldwise import _mixture

    rng = np.random.default_rng(11)
    s, k, c = 7, 6, 3
    w = rng.dirichlet(np.ones(k), size=s)
    alpha = rng.dirichlet(np.ones(c), size=(s, k))
    mu = np.broadcast_to(rng.normal(0, 2, (k, 2)), (s, k, 2)).copy()
    sigma = np.broadcast_to(rng.uniform(0.5, 1.5, (k, 2)), (s, k, 2)).copy()
    lo = np.column_stack([rng.normal(0, 2, 9), rng.normal(0, 2, 9)])
    hi = lo + np.column_stack([np.zeros(9), np.full(9, 0.25)])  # dimension 2 censored
    got = _mixture.log_joint(w, alpha, mu, sigma, lo, hi, [0, 1], max_elements=20)
    dens = normal.pdf(lo[None, :, None, 0], mu[:, None, :, 0], sigma[:, None, :, 0]) * (
        normal.cdf(hi[None, :, None, 1], mu[:, None, :, 1], sigma[:, None, :, 1])
        - normal.cdf(lo[None, :, None, 1], mu[:, None, :, 1], sigma[:, None, :, 1])
    )  # (S, n, K)
    brute = np.log(np.einsum("snk,skc->snc", dens, w[:, :, None] * alpha))
    np.testing.assert_allclose(got, brute, rtol=1e-10)


@pytest.mark.parametrize("fixed", [True, False])
def test_scaled_joint_is_the_brute_force_mixture_up_to_one_factor_per_item(fixed):
    """scaled_joint(...) = G_t(c, y) f_t(c) / s(y): every ratio over draws and classes
    (the Monte Carlo masses of a long-run integral) equals the brute-force mixture's,
    with prevalence factors, with and without fixed kernels, and at an item far out in
    a tail where one class's weight at the nearest kernel is 1e-200."""
    from scipy.stats import norm as normal

    from yieldwise import _mixture

    rng = np.random.default_rng(12)
    s, k, c = 5, 6, 3
    w = rng.dirichlet(np.ones(k), size=s)
    alpha = rng.dirichlet(np.ones(c), size=(s, k))
    alpha[:, 0] = [1e-200, 1e-200, 1.0 - 2e-200]  # the far item's nearest kernel
    mu = np.broadcast_to(np.linspace(-2, 2, k)[:, None], (s, k, 1)).copy()
    sigma = np.full((s, k, 1), 0.8)
    if not fixed:
        mu += rng.normal(0, 0.1, mu.shape)
    y = np.concatenate([rng.normal(0, 1.5, 8), [-30.0]])[:, None]
    factors = rng.uniform(0.5, 2.0, (s, c))
    got = _mixture.scaled_joint(w, alpha, mu, sigma, y, y, [0], class_factors=factors,
                                max_elements=20)  # fmt: skip
    log_dens = normal.logpdf(y[None, :, None, 0], mu[:, None, :, 0], sigma[:, None, :, 0])
    terms = log_dens[..., None] + np.log(w[:, None, :, None] * alpha[:, None])  # (S, n, K, C)
    from scipy.special import logsumexp

    log_brute = logsumexp(terms, axis=2) + np.log(factors)[:, None, :]
    brute = np.exp(log_brute - log_brute.max(axis=(0, 2), keepdims=True))
    assert np.all(got > 0) and np.isfinite(got).all()

    def ratio(x):
        return x / x.sum(axis=2, keepdims=True).mean(axis=0, keepdims=True)

    np.testing.assert_allclose(ratio(got), ratio(brute), rtol=1e-10)


@pytest.mark.parametrize("fixed", [True, False])
def test_class_probability_chunks_are_the_brute_force_ratios(fixed):
    """class_probability_chunks(...) yields, chunk by chunk, the exchangeable p(c | y)
    and each draw's F_t(c | y) of the brute-force mixture (scipy log densities and bin
    probabilities, summed by logsumexp, with prevalence factors), on a 2-D grid with one
    censored axis, with fixed and with moving kernels; also at an item so far out that
    its kernel densities underflow (exp(-80,000)) and only kernels whose weights are
    1e-250 matter there, one class's 1e-20 of that."""
    from scipy.special import logsumexp
    from scipy.stats import norm as normal

    from yieldwise import _mixture

    rng = np.random.default_rng(31)
    s, c = 4, 3
    grid = np.array([(a, b) for a in np.linspace(-2, 2, 4) for b in np.linspace(-1, 1, 3)])
    k = grid.shape[0]
    w = rng.dirichlet(np.ones(k), size=s)
    far = grid[:, 0] == 2.0  # the column of kernels nearest the far item
    w[:, far] = 1e-250
    alpha = rng.dirichlet(np.ones(c), size=(s, k))
    alpha[:, far] = [1e-20, 0.5, 0.5 - 1e-20]
    mu = np.broadcast_to(grid, (s, k, 2)).copy()
    sigma = np.full((s, k, 2), 0.7)
    if not fixed:
        mu += rng.normal(0, 0.05, mu.shape)
    lower = np.column_stack([rng.normal(0, 1.2, 9), rng.integers(-2, 2, 9) + 0.0])
    lower = np.vstack([lower, [400.0, 2.0]])  # so far out that the next column's kernels
    # weigh exp(-1083) of the nearest's: only the tiny weights count there
    upper = lower + np.array([0.0, 1.0])  # axis 1 censored to unit bins
    factors = rng.uniform(0.5, 2.0, (s, c))

    chunks = list(_mixture.class_probability_chunks(
        w, alpha, mu, sigma, lower, upper, [0, 1], class_factors=factors, max_elements=40
    ))  # fmt: skip
    assert len(chunks) > 1 and chunks[-1][0].stop == 10
    mean = np.concatenate([m for _, m, _ in chunks])
    per_draw = np.concatenate([p for _, _, p in chunks], axis=1)
    lo, hi = lower[None, :, None], upper[None, :, None]
    m, sd = mu[:, None], sigma[:, None]
    bins = normal.cdf(hi[..., 1], m[..., 1], sd[..., 1]) - normal.cdf(lo[..., 1], m[..., 1],
                                                                       sd[..., 1])  # fmt: skip
    log_dens = normal.logpdf(lo[..., 0], m[..., 0], sd[..., 0]) + np.log(bins)  # (S, n, K)
    terms = log_dens[..., None] + np.log(w[:, None, :, None] * alpha[:, None])  # (S, n, K, C)
    log_g = logsumexp(terms, axis=2) + np.log(factors)[:, None, :]
    brute = np.exp(log_g - logsumexp(log_g, axis=2, keepdims=True))
    pooled = logsumexp(log_g, axis=0)
    brute_mean = np.exp(pooled - logsumexp(pooled, axis=1, keepdims=True))
    np.testing.assert_allclose(per_draw, brute, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(mean, brute_mean, rtol=1e-9, atol=1e-300)
    assert per_draw[:, 9, 0] == pytest.approx(brute[:, 9, 0], rel=1e-9)  # about 1e-20


@pytest.mark.parametrize("fixed", [True, False])
def test_draws_whose_nearby_weights_underflow_are_exact_not_nan(fixed):
    """A draw whose kernels near an item carry weights that are 0 in the stored draw (a
    ``w`` below the smallest double, as the Laplace backend's extreme draws write it)
    while the kernels with weight lie so far that their scaled values underflow: the
    linear sums are 0 there, which made p(c | y) NaN (a Laplace fit of 2,000 ratings,
    2026-12-06). log_joint, class_probability_chunks and log_likelihood now give the
    brute-force mixture's values (scipy log densities summed by logsumexp over kernels
    with log weights), for one draw lost at an item and for every draw lost at another."""
    from scipy.special import logsumexp
    from scipy.stats import norm as normal

    from yieldwise import _mixture

    s, k = 3, 4
    centres = np.array([0.0, 1.0, 2.0, 3.0])
    w = np.array([[0.0, 0.0, 0.6, 0.4], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.3, 0.7]])
    alpha = np.array([[[0.5, 0.5], [0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]] * s)
    alpha[1] = [[0.3, 0.7], [0.6, 0.4], [0.5, 0.5], [0.5, 0.5]]
    mu = np.broadcast_to(centres[:, None], (s, k, 1)).copy()
    sigma = np.full((s, k, 1), 0.04)  # neighbours 25 widths apart: exp(-312) of each other
    if not fixed:
        mu += np.array([0.0, 1e-3, -1e-3])[:, None, None]
    y = np.array([[0.0], [1.0], [2.0]])  # items 0, 1: draws 0 and 2 lost; item 2 kept
    factors = np.array([[1.0, 2.0], [0.5, 1.5], [1.0, 1.0]])

    log_dens = normal.logpdf(y[None, :, None, 0], mu[:, None, :, 0], sigma[:, None, :, 0])

    def brute_log_joint(w, alpha):  # (S, n, C): log sum_k w_k alpha_kc N(y; mu_k, sigma_k)
        with np.errstate(divide="ignore"):
            terms = log_dens[..., None] + np.log(w)[:, None, :, None] + np.log(alpha)[:, None]
        return logsumexp(terms, axis=2)

    log_g = brute_log_joint(w, alpha)
    assert np.isfinite(log_g).all()
    np.testing.assert_allclose(_mixture.log_joint(w, alpha, mu, sigma, y, y), log_g,
                               rtol=1e-12)  # fmt: skip

    log_f = log_g + np.log(factors)[:, None, :]
    brute = np.exp(log_f - logsumexp(log_f, axis=2, keepdims=True))
    pooled = logsumexp(log_f, axis=0)
    brute_mean = np.exp(pooled - logsumexp(pooled, axis=1, keepdims=True))
    ((_, mean, per_draw),) = _mixture.class_probability_chunks(
        w, alpha, mu, sigma, y, y, class_factors=factors
    )  # fmt: skip
    np.testing.assert_allclose(per_draw, brute, rtol=1e-12)
    np.testing.assert_allclose(mean, brute_mean, rtol=1e-12)
    # at item 0 the only draw with weight nearby is draw 1: every draw but it is lost
    assert per_draw[0, 0, 0] == pytest.approx(0.9 / (0.9 + 0.1 * 2.0))

    cls = np.array([0, 1, 1])
    counts = np.array([2.0, 1.0, 3.0])
    expected = (np.take_along_axis(log_g, cls[None, :, None], axis=2)[:, :, 0]) @ counts
    got = _mixture.log_likelihood(w, alpha, mu, sigma, cls, y, y, counts=counts)
    np.testing.assert_allclose(got, expected, rtol=1e-12)

    # every draw lost at items 0 and 1 (draw 1's weight moved off them too): the pooled
    # mean's sums underflow as well, and it is the brute-force pooled ratio there
    w[1] = [0.0, 0.0, 0.5, 0.5]
    alpha[1, 2:] = [[0.7, 0.3], [0.1, 0.9]]
    log_f = brute_log_joint(w, alpha) + np.log(factors)[:, None, :]
    pooled = logsumexp(log_f, axis=0)
    brute_mean = np.exp(pooled - logsumexp(pooled, axis=1, keepdims=True))
    ((_, mean, per_draw),) = _mixture.class_probability_chunks(
        w, alpha, mu, sigma, y, y, class_factors=factors
    )  # fmt: skip
    np.testing.assert_allclose(mean, brute_mean, rtol=1e-12)
    np.testing.assert_allclose(per_draw, np.exp(log_f - logsumexp(log_f, axis=2, keepdims=True)),
                               rtol=1e-12)  # fmt: skip


def test_pooled_fallback_keeps_each_lost_item_its_own_answer():
    """Two items at which every draw's linear sum underflows, each beside a different
    weighted kernel (item 0 left of the weights, item 1 right of them), and one kept
    item: the pooled fallback of class_probability_chunks gives each lost item its own
    brute-force pooled ratio (the kernel nearest it), not its neighbour's."""
    from scipy.special import logsumexp
    from scipy.stats import norm as normal

    from yieldwise import _mixture

    s, k = 2, 4
    mu = np.broadcast_to(np.array([0.0, 1.0, 2.0, 3.0])[:, None], (s, k, 1)).copy()
    sigma = np.full((s, k, 1), 0.02)  # a unit is 50 widths: exp(-1250) between kernels
    w = np.array([[0.0, 0.5, 0.5, 0.0], [0.0, 0.3, 0.7, 0.0]])
    alpha = np.array([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]] * s)
    alpha[1, 1:3] = [[0.8, 0.2], [0.4, 0.6]]
    y = np.array([[-1.0], [4.0], [1.5]])  # lost beside kernel 1, lost beside 2, kept
    log_dens = normal.logpdf(y[None, :, None, 0], mu[:, None, :, 0], sigma[:, None, :, 0])
    with np.errstate(divide="ignore"):
        terms = log_dens[..., None] + np.log(w)[:, None, :, None] + np.log(alpha)[:, None]
    pooled = logsumexp(logsumexp(terms, axis=2), axis=0)  # (n, C)
    brute_mean = np.exp(pooled - logsumexp(pooled, axis=1, keepdims=True))
    ((_, mean, _),) = _mixture.class_probability_chunks(w, alpha, mu, sigma, y, y)
    np.testing.assert_allclose(mean, brute_mean, rtol=1e-12)
    # by hand: item 0 sees only kernel 1, item 1 only kernel 2, weighted by the draws' w
    assert mean[0, 0] == pytest.approx((0.5 * 0.9 + 0.3 * 0.8) / (0.5 + 0.3))
    assert mean[1, 0] == pytest.approx((0.5 * 0.2 + 0.7 * 0.4) / (0.5 + 0.7))


@pytest.mark.parametrize(
    "case", ["grid-1d", "grid-1d-widths", "grid-2d", "grid-2d-censored", "scattered-2d",
             "varying"]
)  # fmt: skip
def test_pooled_joint_is_the_brute_force_sum_over_draws_of_the_grouped_joint(case):
    """pooled_joint(...)[n, c] = sum_t G_t(c, y_n) v_t[g_n, c] / s(y_n): its ratios over
    classes equal the brute-force mixture's (scipy densities and bin probabilities summed
    over kernels, then over draws with each item's group's factors), whether the kernels
    form a tensor grid (contracted axis by axis; one width per axis, whose log factors
    are linear in the output, or a width per kernel), are scattered (too many distinct
    per-axis factors: the kernels themselves) or differ between draws (draw by draw)."""
    from scipy.stats import norm as normal

    from yieldwise import _mixture

    rng = np.random.default_rng(31)
    s, c, groups = 7, 3, 4
    d = 1 if case.startswith("grid-1d") else 2
    if case.startswith("grid-1d"):
        mu0 = np.linspace(-2, 2, 9)[:, None]
    elif case == "scattered-2d":
        mu0 = rng.normal(0, 1, (12, 2))
    else:
        a, b = np.meshgrid(np.linspace(-2, 2, 4), np.linspace(-1, 3, 5), indexing="ij")
        mu0 = np.column_stack([a.ravel(), b.ravel()])
    k = mu0.shape[0]
    mu = np.broadcast_to(mu0, (s, k, d)).copy()
    sigma = np.broadcast_to(np.linspace(0.6, 0.9, d), (s, k, d)).copy()
    if case == "varying":
        mu += rng.normal(0, 0.1, mu.shape)
    if case == "grid-1d-widths":  # fixed kernels, each its own width
        sigma[..., 0] = np.linspace(0.4, 1.1, k)
    w = rng.dirichlet(np.ones(k), size=s)
    alpha = rng.dirichlet(np.ones(c), size=(s, k))
    y = rng.normal(0, 1.5, (40, d))
    lo, hi = y.copy(), y.copy()
    censored = np.zeros(d, bool)
    if case == "grid-2d-censored":  # the second axis a lattice of bins 0.5 wide
        lo[:, 1], hi[:, 1] = np.floor(y[:, 1] * 2) / 2, np.floor(y[:, 1] * 2) / 2 + 0.5
        censored[1] = True
    v = rng.uniform(0.2, 3.0, (s, groups, c))
    g = rng.integers(0, groups, y.shape[0])
    scattered = _mixture._MAX_TENSOR
    if case == "scattered-2d":
        _mixture._MAX_TENSOR = 100  # 12 x 12 distinct factors: the kernels themselves
    try:
        got = _mixture.pooled_joint(w, alpha, mu, sigma, lo, hi, censored, v, g,
                                    max_elements=50)  # fmt: skip
    finally:
        _mixture._MAX_TENSOR = scattered
    dens = np.ones((s, y.shape[0], k))
    for j in range(d):
        m, sd = mu[:, None, :, j], sigma[:, None, :, j]
        if censored[j]:
            dens *= normal.cdf(hi[None, :, None, j], m, sd) - normal.cdf(
                lo[None, :, None, j], m, sd
            )
        else:
            dens *= normal.pdf(y[None, :, None, j], m, sd)
    joint = np.einsum("snk,skc->snc", dens, w[:, :, None] * alpha)  # (S, n, C)
    brute = (joint * v[:, g, :]).sum(axis=0)
    assert np.all(got > 0) and np.isfinite(got).all()
    np.testing.assert_allclose(got / got.sum(1, keepdims=True),
                               brute / brute.sum(1, keepdims=True), rtol=1e-10)  # fmt: skip
    with pytest.raises(ValueError, match=r"factors must have shape \(7, groups, 3\)"):
        _mixture.pooled_joint(w, alpha, mu, sigma, lo, hi, censored, v[:, :, :2], g)
    with pytest.raises(ValueError, match=r"groups must hold one index in 0 \.\. 3"):
        _mixture.pooled_joint(w, alpha, mu, sigma, lo, hi, censored, v, g + 1)


def test_two_class_band_quantiles_are_numpys_from_one_partition_of_the_odds():
    """_draw_quantiles gives np.quantile's linear-interpolation quantiles over draws: for
    two classes from one partition of the odds p1 / p0 (both classes' order statistics),
    to a few units in the last place, over probabilities from 1e-250 to 1; where p0 rounds
    to 1.0 in every draw, p1's tiny values still sort by themselves (sorting p0 alone would
    tie them); rows with undefined odds, and three classes, are numpy's own."""
    from yieldwise.transducer.estimator import _draw_quantiles

    rng = np.random.default_rng(5)
    s, n = 401, 60
    log_j = rng.normal(0, 1, (s, 2, n)) * np.geomspace(0.01, 300, n)  # spreads up to e^±1000
    p1 = 1 / (1 + np.exp(np.clip(log_j[:, 0] - log_j[:, 1], -700, 700)))
    p0 = 1 / (1 + np.exp(np.clip(log_j[:, 1] - log_j[:, 0], -700, 700)))
    tiny = np.geomspace(1e-250, 1e-240, s)
    rng.shuffle(tiny)
    p1[:, 0], p0[:, 0] = tiny, 1.0 - tiny  # p0 == 1.0 exactly in every draw
    assert np.all(p0[:, 0] == 1.0)
    per_draw = np.stack([p0, p1], axis=2)
    for tails in ([0.025, 0.975], [0.125, 0.875], [0.0, 1.0], [0.5, 0.5], [0.0005, 0.9995]):
        expected = np.quantile(per_draw, tails, axis=0)
        got = _draw_quantiles(per_draw.copy(), tails)
        np.testing.assert_allclose(got, expected, rtol=4e-15, atol=0)
        # the tiny column's quantiles by hand: the sorted values, interpolated
        h = (s - 1) * np.asarray(tails)
        ordered = np.sort(tiny)
        lo = np.floor(h).astype(int)
        by_hand = ordered[lo] + (ordered[np.minimum(lo + 1, s - 1)] - ordered[lo]) * (h - lo)
        np.testing.assert_allclose(got[:, 0, 1], by_hand, rtol=4e-15)
    # a draw with both probabilities 0 (odds undefined): numpy's answer, NaN where it gives NaN
    broken = per_draw.copy()
    broken[3, 7] = [0.0, 0.0]
    broken[4, 8] = [np.nan, np.nan]
    expected = np.quantile(broken, [0.1, 0.9], axis=0)
    got = _draw_quantiles(broken.copy(), [0.1, 0.9])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=0, atol=0)
    three = rng.dirichlet(np.ones(3), size=(s, n))
    np.testing.assert_array_equal(
        _draw_quantiles(three.copy(), [0.05, 0.95]), np.quantile(three, [0.05, 0.95], axis=0)
    )


def test_binary_bands_far_out_are_the_brute_force_quantiles():
    """predict_interval of a two-class transducer (the one-partition path) at outputs where
    class 1's probability is 1e-12 to 1e-200: its bands are the quantiles over draws of
    each draw's p(c | y) computed by hand in logs (scipy), to 1e-12 relative."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(8)
    s, k = 300, 2
    w = rng.dirichlet([20, 20], size=s)
    tiny = 10.0 ** -rng.uniform(150, 200, s)  # the left kernel's class 1, a draw's own
    alpha = np.stack([np.column_stack([1 - tiny, tiny]), rng.dirichlet([1, 30], size=s)], axis=1)
    mu = np.broadcast_to(np.array([[-1.0], [1.0]]), (s, k, 1)).copy()
    sigma = np.broadcast_to(np.array([[0.9], [0.8]]), (s, k, 1)).copy()
    t = make_transducer(w, alpha, mu, sigma, CALIBRATION, CLASSES)
    y = np.array([-1.0, -8.0, -20.0, -40.0, 0.3])
    with pytest.warns(ExtrapolationWarning):
        band = t.predict_interval(y, prob=0.9)
    log_dens = norm.logpdf(y[None, :, None], mu[:, None, :, 0], sigma[:, None, :, 0])
    log_g = logsumexp(log_dens[..., None] + np.log(w[:, None, :, None] * alpha[:, None]), axis=2)
    per_draw = np.exp(log_g - logsumexp(log_g, axis=2, keepdims=True))  # (S, n, C)
    assert per_draw[:, 3, 1].max() < 1e-100  # far out, class 1 is tiny
    np.testing.assert_allclose(band["lower"].values, np.quantile(per_draw, 0.05, axis=0),
                               rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(band["upper"].values, np.quantile(per_draw, 0.95, axis=0),
                               rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("seed", [-5, 1.5, "a", True, 2**31])
def test_a_bad_seed_is_refused_by_name_before_any_draw(seed):
    """The seed draws the initial values before the sampler checks it: refused there by
    name (numpy's SeedSequence said "expected non-negative integer")."""
    y = np.linspace(-2, 2, 40)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*31\) or None"):
        Transducer(backend="laplace", seed=seed, progress=False).fit(y, np.arange(40) % 2)


def test_the_one_seed_rule():
    from yieldwise._validation import is_seed

    for good in (0, 7, np.int64(5), 2**31 - 1, 2**40):
        assert is_seed(good)
    assert is_seed(2**31 - 1, upper=2**31) and not is_seed(2**31, upper=2**31)
    for bad in (-1, np.int32(-3), 1.0, 1.5, "1", None, True, False, np.bool_(True)):
        assert not is_seed(bad), bad


GIVEN = {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("mu"), r"draws lacks \['mu'\]"),
        (lambda d: d.update(w=W), r"draws\['w'\] must have 3 dimensions"),
        (lambda d: d.update(w=2 * W[None]), r"draws\['w'\]: expected entries >= 0 summing to 1"),
        (lambda d: d.update(sigma=-SIGMA[None]), r"draws\['sigma'\]: 4 values are not positive"),
        (lambda d: d.update(alpha=np.full((1, 2, 2, 3), 1 / 3)),
         r"draws\['alpha'\] has 3 entries along 'class'; expected 2"),
        (lambda d: d.update(w=np.full((1, 2, 3), 1 / 3)),
         r"draws\['alpha'\] has \(chain, draw, component\) shape \(1, 2, 2\); draws\['w'\]"),
        (lambda d: d.update(log_lik=np.full((1, 2), np.nan)),
         r"draws\['log_lik'\]: 2 of 2 values are NaN"),
    ],
)  # fmt: skip
def test_given_draws_are_held_to_a_files_rules(change, match):
    """from_draws checks what load checks (it accepted weights summing to 2 and negative
    widths, and failed in xarray or with a bare KeyError on the rest)."""
    draws = {k: v.copy() for k, v in GIVEN.items()}
    change(draws)
    scores = np.linspace(-3, 3, 30)
    with pytest.raises(ValueError, match=match):
        Transducer.from_draws(draws, scores, (scores > 0).astype(int), (0, 1),
                              output_transform="identity", resolution=None)  # fmt: skip


def test_two_dimensional_classes_are_refused_by_name():
    """classes as a 2-D array named by the argument (pandas said "Data must be
    1-dimensional")."""
    y = np.linspace(-2, 2, 40)
    labels = np.c_[np.arange(40) % 2, np.arange(40) % 2]
    with pytest.raises(ValueError, match=r"classes must be 1-dimensional, found shape \(40, 2\)"):
        Transducer(backend="laplace", progress=False).fit(y, labels)
