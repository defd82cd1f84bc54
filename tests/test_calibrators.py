"""yieldwise.calibrators against scikit-learn, betacal, closed forms and known truths."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, log_expit, log_softmax, logit
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from yieldwise.calibrators import (
    BetaCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
)
from yieldwise.roc import convex_hull


def _binary(seed, n=300, ties=True):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    scores = rng.normal(size=n) + 1.5 * labels
    if ties:
        scores = np.round(scores, 1)
    return scores, labels


@pytest.mark.parametrize("seed", range(10))
def test_isotonic_is_sklearns_and_the_hulls(seed):
    scores, labels = _binary(seed)
    iso = IsotonicCalibrator().fit(scores, labels)
    reference = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(scores, labels)
    new = np.r_[scores, np.linspace(-5, 5, 101)]  # between, on and outside the scores
    np.testing.assert_allclose(iso.predict_proba(new)[:, 1], reference.predict(new), atol=1e-12)
    np.testing.assert_allclose(
        iso.predict_proba(scores)[:, 1],
        convex_hull(scores, labels, positive=1).calibrated,
        rtol=0,
        atol=1e-12,
    )


def _penalised_gradient(score, y, w, ridge):
    p = expit(w[0] * score + w[1])
    return np.array([np.sum((p - y) * score) + ridge * w[0], np.sum(p - y)])


@pytest.mark.parametrize("seed", range(10))
def test_platt_solves_its_likelihood_equations_and_matches_sklearn(seed):
    scores, labels = _binary(seed, ties=False)
    platt = PlattCalibrator().fit(scores, labels)
    # the penalised likelihood equations hold (to rounding): gradient zero, with the
    # ridge 1e-6 on the slope per standard deviation, i.e. 1e-6 * sd^2 on the raw slope
    ridge = 1e-6 * scores.std() ** 2
    gradient = _penalised_gradient(scores, labels, platt.coef_, ridge)
    assert np.abs(gradient).max() < 1e-8
    reference = LogisticRegression(C=1 / ridge, tol=1e-10, max_iter=10_000)
    reference.fit(scores[:, None], labels)
    np.testing.assert_allclose(
        platt.predict_proba(scores), reference.predict_proba(scores[:, None]), atol=1e-6
    )


def test_platt_recovers_a_known_logistic_truth():
    rng = np.random.default_rng(5)
    scores = rng.normal(size=100_000)
    labels = (rng.random(scores.size) < expit(1.5 * scores - 0.5)).astype(int)
    slope, intercept = PlattCalibrator().fit(scores, labels).coef_
    # standard errors at n = 1e5 are about 0.01
    assert slope == pytest.approx(1.5, abs=0.05)
    assert intercept == pytest.approx(-0.5, abs=0.05)


@pytest.mark.parametrize("factor", [1e-300, 1e-100, 1e-6, 1e-4, 1e3, 1e100, 1e300])
def test_platt_does_not_depend_on_the_scores_units(factor):
    """Scores in other units (a factor, a shift) give the same probabilities. With the
    ridge on the raw slope, scores of magnitude 1e-4 had their slope shrunk threefold
    (p = 0.67 where 0.91 is right) and at 1e-6 every prediction was the base rate."""
    rng = np.random.default_rng(12)
    scores = rng.normal(size=2000)
    labels = (rng.random(scores.size) < expit(1.5 * scores - 0.5)).astype(int)
    new = np.array([-2.0, 0.0, 1.5])
    unit = PlattCalibrator().fit(scores, labels)
    scaled = PlattCalibrator().fit(scores * factor, labels)
    np.testing.assert_allclose(
        scaled.predict_proba(new * factor), unit.predict_proba(new), rtol=1e-9, atol=0
    )
    np.testing.assert_allclose(scaled.coef_, unit.coef_ / [factor, 1], rtol=1e-9)
    shifted = PlattCalibrator().fit(scores + 1e6, labels)
    np.testing.assert_allclose(
        shifted.predict_proba(new + 1e6), unit.predict_proba(new), rtol=1e-6, atol=0
    )
    # and the truth logit p = 1.5 s - 0.5 is found at every scale (SE about 0.06)
    assert scaled.coef_[0] * factor == pytest.approx(1.5, abs=0.2)


def test_platt_refuses_scores_too_close_together_for_a_finite_slope():
    scores, labels = _binary(3, ties=False)
    with pytest.raises(ValueError, match=r"scores span only .* multiply the scores by a"):
        PlattCalibrator().fit(scores * 1e-310, labels)


def test_platt_of_constant_scores_is_the_base_rate():
    platt = PlattCalibrator().fit(np.full(5, 0.7), [0, 1, 1, 0, 1])
    np.testing.assert_allclose(platt.coef_, [0.0, np.log(3 / 2)], atol=1e-12)
    np.testing.assert_allclose(platt.predict_proba([-4.0, 0.7])[:, 1], 0.6, atol=1e-12)


def test_platt_stays_finite_on_separable_data():
    platt = PlattCalibrator().fit([-2, -1, 1, 2], [0, 0, 1, 1])
    assert np.isfinite(platt.coef_).all() and platt.coef_[0] > 10
    np.testing.assert_allclose(platt.predict_proba([-2, 2])[:, 1], [0, 1], atol=1e-6)


@pytest.mark.parametrize("case", ["both", "a_negative", "b_negative"])
def test_beta_matches_betacal(case):
    betacal = pytest.importorskip("betacal")
    rng = np.random.default_rng({"both": 1, "a_negative": 2, "b_negative": 3}[case])
    s = rng.uniform(0.001, 0.999, 4000)
    truth = {
        "both": 2.0 * np.log(s) - 0.5 * np.log1p(-s) + 0.3,
        # P falls as s grows near 0 (a < 0 fits) or near 1 (b < 0 fits)
        "a_negative": -0.7 * np.log(s) - 1.0 * np.log1p(-s) - 2.0,
        "b_negative": 1.0 * np.log(s) + 0.8 * np.log1p(-s) + 1.0,
    }[case]
    labels = (rng.random(s.size) < expit(truth)).astype(int)
    ours = BetaCalibrator(eps=np.finfo(float).eps).fit(s, labels)
    reference = betacal.BetaCalibration(parameters="abm").fit(s, labels)
    a, b, _ = ours.coef_
    assert (a == 0) == (reference.calibrator_.map_[0] == 0)
    assert (b == 0) == (reference.calibrator_.map_[1] == 0)
    grid = np.linspace(0.001, 0.999, 500)
    np.testing.assert_allclose(
        ours.predict_proba(grid)[:, 1], reference.predict(grid), rtol=0, atol=2e-4
    )
    if case != "both":
        assert 0 in (a, b)


def test_beta_of_calibrated_probabilities_is_the_identity():
    rng = np.random.default_rng(1)
    s = rng.uniform(0.01, 0.99, 50_000)
    labels = (rng.random(s.size) < s).astype(int)
    a, b, c = BetaCalibrator().fit(s, labels).coef_
    # logit s = log s - log(1 - s): a = b = 1, c = 0 (standard errors ~0.02)
    assert (a, b, c) == pytest.approx((1, 1, 0), abs=0.06)
    # scale="logit" on logit(s) is the same model
    same = BetaCalibrator(scale="logit").fit(logit(s), labels)
    np.testing.assert_allclose(same.coef_, [a, b, c], atol=1e-6)


def _beta_features(z):
    """log s and -log(1 - s) for s = expit(z), computed exactly from z."""
    return np.column_stack([-np.logaddexp(0, -z), np.logaddexp(0, z)])


def test_beta_on_the_logit_scale_keeps_the_order_of_large_logits():
    """Logits beyond about +-20.7 went through expit, rounded to s = 1 and were clipped
    to 1 - eps: scores 22, 30 and 38 all calibrated to 0.601."""
    rng = np.random.default_rng(2)
    z = rng.uniform(15, 45, 2000)
    labels = (rng.random(z.size) < expit((z - 30) / 2)).astype(int)
    beta = BetaCalibrator(scale="logit").fit(z, labels)
    a, b, _ = beta.coef_
    assert a > 0 and b > 0  # so no term was dropped and the reference is the full model
    # betacal's LogisticRegression(C=99999999999) on the exact features; newton-cg,
    # because lbfgs stops early along the almost-flat direction of log s ~ -exp(-z)
    reference = LogisticRegression(C=1e11, solver="newton-cg", tol=1e-12, max_iter=10_000)
    reference.fit(_beta_features(z), labels)
    new = np.array([-50.0, 0.0, 22.0, 30.0, 38.0, 800.0])
    p = beta.predict_proba(new)[:, 1]
    np.testing.assert_allclose(
        p, reference.predict_proba(_beta_features(new))[:, 1], rtol=0, atol=1e-6
    )
    # near the truth logit p = (z - 30) / 2 (standard errors about 0.02)
    np.testing.assert_allclose(p[2:5], expit(np.array([-4.0, 0.0, 4.0])), atol=0.05)
    assert (np.diff(p) >= 0).all()


def _binary_nll(logits, labels, t):
    """Temperature scaling's negative log-likelihood for 1-D logits, by brute force."""
    y = labels.astype(float)
    return -(y * log_expit(logits / t) + (1 - y) * log_expit(-logits / t)).sum()


@pytest.mark.parametrize("factor", [1.0, 1e-3, 1e3])
def test_temperature_is_the_likelihood_maximum(factor):
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 5000)
    logits = factor * 4.0 * (2 * labels - 1 + rng.normal(size=5000))  # truth: T = 2 factor
    t = TemperatureCalibrator().fit(logits, labels).temperature_
    grid = factor * np.exp(np.linspace(-2, 2, 4001))
    nll = [_binary_nll(logits, labels, g) for g in grid]
    assert t == pytest.approx(grid[int(np.argmin(nll))], rel=2e-3)
    # the grid's step is 1e-3 in log T; the likelihood is no better either side of T
    assert _binary_nll(logits, labels, t) < min(
        _binary_nll(logits, labels, t * (1 + 1e-4)), _binary_nll(logits, labels, t / (1 + 1e-4))
    )
    # independently of the grid: 1.97352 is the maximum found by a fine grid at unit scale
    assert t == pytest.approx(1.97352 * factor, rel=1e-5)


@pytest.mark.parametrize("factor", [1e-300, 1e-100, 1e-3, 1e3, 1e100, 1e300])
def test_temperature_does_not_depend_on_the_logits_units(factor):
    """T was searched on [e^-5, e^5]: logits in thousandths gave T = e^-5 = 0.0067 and
    P(1 | 2e-3) = 0.574 where 0.734 is right, logits in thousands T = e^5 and 0.99999."""
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 5000)
    logits = 4.0 * (2 * labels - 1 + rng.normal(size=5000))
    new = np.array([-3.0, 0.5, 2.0])
    unit = TemperatureCalibrator().fit(logits, labels)
    scaled = TemperatureCalibrator().fit(logits * factor, labels)
    assert scaled.temperature_ == pytest.approx(unit.temperature_ * factor, rel=1e-6)
    np.testing.assert_allclose(
        scaled.predict_proba(new * factor), unit.predict_proba(new), rtol=1e-6, atol=0
    )
    assert unit.predict_proba([2.0])[0, 1] == pytest.approx(expit(2.0 / 1.97352), rel=1e-5)
    # and with three classes
    labels3 = rng.integers(0, 3, 900)
    logits3 = 2.0 * np.eye(3)[labels3] + rng.normal(size=(900, 3))
    unit3 = TemperatureCalibrator().fit(logits3, labels3)
    scaled3 = TemperatureCalibrator().fit(logits3 * factor, labels3)
    assert scaled3.temperature_ == pytest.approx(unit3.temperature_ * factor, rel=1e-6)
    np.testing.assert_allclose(
        scaled3.predict_proba(logits3 * factor), unit3.predict_proba(logits3), rtol=1e-6
    )


def test_temperature_with_a_declared_class_without_items():
    """A class named in classes= but absent from the labels leaves a finite maximum."""
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 2, 600)  # class 2 is declared but never seen
    logits = 3.0 * np.eye(3)[labels] + rng.normal(size=(600, 3))
    t = TemperatureCalibrator().fit(logits, labels, classes=[0, 1, 2]).temperature_
    grid = np.exp(np.linspace(-3, 3, 6001))
    nll = [-log_softmax(logits / g, axis=1)[np.arange(600), labels].sum() for g in grid]
    assert t == pytest.approx(grid[int(np.argmin(nll))], rel=2e-3)


def test_temperature_at_a_likelihood_without_a_finite_maximum_is_its_limit_with_a_warning():
    """Each returned a bound of the old search, e^-5 or e^5, without complaint. Now the
    limit the likelihood approaches (T = 0: the argmax; T = inf: uniform), said by a
    warning: the bench's clipped scores (probabilities, 85 % class 0) are such a case,
    where temperature scaling, without an intercept, can do no better than uniform."""
    grid = np.exp(np.linspace(-6, 6, 13))
    # separable: every item's top logit is its class's; the likelihood improves as T -> 0
    scores, labels = np.array([0.5, -1.0, 2.0, -0.2]), np.array([1, 0, 1, 0])
    assert (np.diff([_binary_nll(scores, labels, g) for g in grid]) > 0).all()
    with pytest.warns(UserWarning, match=r"scores separate true_classes: .* T -> 0"):
        t = TemperatureCalibrator().fit(scores, labels)
    assert t.temperature_ == 0
    np.testing.assert_array_equal(t.predict_proba([-3.0, 0.0, 0.1])[:, 1], [0.0, 0.5, 1.0])
    # one class, scored above the other everywhere: the likelihood improves as T -> infinity
    scores, labels = np.array([1.0, 2.0, 3.0]), np.array([0, 0, 0])
    assert (np.diff([_binary_nll(scores, labels, g) for g in grid]) < 0).all()
    with pytest.warns(
        UserWarning,
        match=r"scores carry no evidence for true_classes \(true_classes holds only 1 of the 2 "
        r"classes\): on average .* T -> infinity",
    ):
        t = TemperatureCalibrator().fit(scores, labels, classes=[0, 1])
    assert t.temperature_ == np.inf
    np.testing.assert_array_equal(t.predict_proba([-5.0, 7.0]), np.full((2, 2), 0.5))
    # one class, scored below the other: separable, the likelihood improves as T -> 0
    with pytest.warns(
        UserWarning, match=r"scores separate true_classes \(true_classes holds only 1 of the 2"
    ):
        assert TemperatureCalibrator().fit(-scores, labels, classes=[0, 1]).temperature_ == 0
    # more evidence against the true classes than for them: no better than T -> infinity
    scores, labels = np.array([2.0, -1.0, 0.5, -0.5]), np.array([0, 1, 1, 0])
    assert (np.diff([_binary_nll(scores, labels, g) for g in grid]) < 0).all()
    with pytest.warns(UserWarning, match=r"scores carry no evidence for true_classes: on average"):
        assert TemperatureCalibrator().fit(scores, labels).temperature_ == np.inf
    with pytest.warns(UserWarning, match="every item's logits are equal"):
        t = TemperatureCalibrator().fit(np.ones((4, 3)), [0, 1, 2, 0])
    np.testing.assert_array_equal(t.predict_proba(np.eye(3)), np.full((3, 3), 1 / 3))
    # a finite maximum, but at T ~ 1e-305 for logits of scale 1: item 3 is misclassified
    # by 1e-306 and item 2 classified by only 1e-305
    with pytest.warns(UserWarning, match=r"the maximum-likelihood T is below 1e-304, too far"):
        t = TemperatureCalibrator().fit([1.0, 1e-305, 1e-306], [1, 1, 0])
    assert t.temperature_ == 0


def test_three_classes():
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 3, 900)
    logits = 2.0 * np.eye(3)[labels] + rng.normal(size=(900, 3))
    names = np.array(["x", "y", "z"])[labels]
    for calibrator in (IsotonicCalibrator(), PlattCalibrator(), BetaCalibrator(scale="logit"),
                       TemperatureCalibrator()):  # fmt: skip
        p = calibrator.fit(logits, names).predict_proba(logits)
        assert calibrator.classes_ == ("x", "y", "z")
        assert p.shape == (900, 3)
        np.testing.assert_allclose(p.sum(axis=1), 1, atol=1e-12)
        # better than chance: the true class gets the largest mean probability
        assert all(p[labels == c, c].mean() > 0.5 for c in range(3))
    # one-vs-rest is each column's binary fit, renormalised
    ovr = PlattCalibrator().fit(logits, labels).predict_proba(logits)
    columns = np.column_stack([
        PlattCalibrator().fit(logits[:, c], (labels == c).astype(int)).predict_proba(logits[:, c])
        [:, 1] for c in range(3)
    ])  # fmt: skip
    np.testing.assert_allclose(ovr, columns / columns.sum(axis=1, keepdims=True), atol=1e-12)


def test_errors_name_the_problem():
    with pytest.raises(
        ValueError, match="scores are 1-D, which means two classes, but there are 3"
    ):
        PlattCalibrator().fit([1, 2, 3], ["a", "b", "c"])
    with pytest.raises(ValueError, match="scores has 2 columns but there are 3 classes"):
        PlattCalibrator().fit(np.zeros((3, 2)), ["a", "b", "c"])
    with pytest.raises(RuntimeError, match="IsotonicCalibrator is not fitted yet"):
        IsotonicCalibrator().predict_proba([0.1])
    with pytest.raises(ValueError, match=r"scores must lie in \[0, 1\] with scale='probability'"):
        BetaCalibrator().fit([0.5, 2.0], [0, 1])
    fitted = TemperatureCalibrator().fit([0.5, -1, 2, -0.3], [1, 0, 1, 1])
    with pytest.raises(
        ValueError, match=r"scores must be 1-D as at fit time, found shape \(2, 2\)"
    ):
        fitted.predict_proba(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="ridge must be a positive number"):
        PlattCalibrator(ridge=0).fit([1, 2], [0, 1])
    for bad in ("a", True, None):  # "a" failed in numpy's isfinite
        with pytest.raises(ValueError, match=f"ridge must be a positive number, found {bad!r}"):
            PlattCalibrator(ridge=bad).fit([1, 2], [0, 1])
