"""Metric audit (theory 1.2 and 1.5): closed forms, brute-force quadrature, samplers, errors."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

import yieldwise
from yieldwise import ConfusionMatrix, UndefinedMetricError, UtilityMatrix, metrics
from yieldwise.audit import (
    DEFAULT_ERROR_SD,
    DEFAULT_METRICS,
    Admissibility,
    _perturb,
    is_admissible,
    rank_disagreement,
    sample_chart_points,
)
from yieldwise.metrics import CONFUSION_METRICS
from yieldwise.utility import in_chart_domain

IDENTITY = UtilityMatrix([[1, 0], [0, 1]])


def _row(result: pd.DataFrame, metric: str, error_sd: float | None = None) -> pd.Series:
    rows = result[result.metric == metric]
    if error_sd is not None:
        rows = rows[np.isclose(rows.error_sd, error_sd)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


# ------------------------------------------------------------------- shape of the result
def test_default_result_layout_and_standard_errors():
    result = rank_disagreement(n_pairs=20_000, seed=0)
    assert list(result.columns) == ["metric", "error_sd", "fraction_wrong", "mc_se"]
    assert list(result.metric) == list(DEFAULT_METRICS) + ["utility_yield"] * 7
    assert len(DEFAULT_METRICS) == 8
    # Metrics do not depend on sigma: their error_sd is NaN; the yield rows carry sigma.
    assert result.error_sd.iloc[:8].isna().all()
    np.testing.assert_array_equal(result.error_sd.iloc[8:], DEFAULT_ERROR_SD)
    p = result.fraction_wrong.to_numpy()
    np.testing.assert_allclose(result.mc_se, np.sqrt(p * (1 - p) / 20_000), rtol=1e-12)
    # Fractions are counts over n_pairs.
    np.testing.assert_allclose(p * 20_000, np.round(p * 20_000), atol=1e-6)
    assert result.attrs["n_pairs"] == 20_000
    # The erroneous yield never misranks at sigma = 0 and does so more as sigma grows.
    yields = result.fraction_wrong.iloc[8:].to_numpy()
    assert yields[0] == 0
    assert (np.diff(yields) > 0).all()


# --------------------------------------------------------------------- (a) closed forms
def test_accuracy_never_wrong_when_the_true_matrix_is_the_identity():
    result = rank_disagreement(
        ["accuracy", "recall", "f1"], IDENTITY, error_sd=(0, 0.1), n_pairs=200_000, seed=1
    )
    assert _row(result, "accuracy").fraction_wrong == 0.0
    assert _row(result, "accuracy").mc_se == 0.0
    assert _row(result, "utility_yield", 0.0).fraction_wrong == 0.0
    assert _row(result, "recall").fraction_wrong > 0.1
    assert _row(result, "f1").fraction_wrong > 0.01
    assert _row(result, "utility_yield", 0.1).fraction_wrong > 0


def test_recall_and_specificity_never_wrong_for_their_own_matrices():
    tpr_matrix = UtilityMatrix.from_xy(-1, 0)
    np.testing.assert_array_equal(tpr_matrix.values, [[1, 0], [0, 0]])
    result = rank_disagreement(
        ["recall", "specificity", "accuracy"], tpr_matrix, error_sd=[0], n_pairs=200_000, seed=2
    )
    assert _row(result, "recall").fraction_wrong == 0.0
    assert _row(result, "utility_yield", 0).fraction_wrong == 0.0
    assert _row(result, "specificity").fraction_wrong > 0.3
    tnr_matrix = UtilityMatrix.from_xy(1, 0)
    np.testing.assert_array_equal(tnr_matrix.values, [[0, 0], [0, 1]])
    result = rank_disagreement(["specificity"], tnr_matrix, error_sd=[], n_pairs=100_000, seed=2)
    assert _row(result, "specificity").fraction_wrong == 0.0


def test_fixed_prior_is_taken_in_standard_form_and_matched_by_label():
    # 3 I + 2 is equivalent to the identity; rows given in the opposite order are matched
    # by label, so this is still "accuracy" in disguise.
    shifted = UtilityMatrix([[2, 5], [5, 2]], decisions=["b", "a"], classes=["a", "b"])
    result = rank_disagreement(["accuracy"], shifted, error_sd=[0], n_pairs=50_000, seed=3)
    assert result.fraction_wrong.tolist() == [0.0, 0.0]


def test_user_callable_yield_of_the_true_matrix_is_never_wrong():
    u = UtilityMatrix.from_xy(0.4, -0.3)
    values = u.values

    def fixed_yield(confusion):
        return (confusion * values).sum(axis=(1, 2))

    result = rank_disagreement({"mine": fixed_yield}, u, error_sd=[], n_pairs=100_000, seed=4)
    assert result.metric.tolist() == ["mine"]
    assert result.fraction_wrong.iloc[0] == 0.0


def test_user_callable_matches_library_metric():
    def my_accuracy(confusion):
        assert confusion.shape[1:] == (2, 2)
        assert not confusion.flags.writeable
        np.testing.assert_allclose(confusion.sum(axis=(1, 2)), 1.0)
        return confusion[:, 0, 0] + confusion[:, 1, 1]

    result = rank_disagreement(
        ["accuracy", my_accuracy, metrics.recall, lambda c: metrics.recall.batch(c)],
        error_sd=[],
        n_pairs=100_000,
        seed=5,
    )
    assert result.metric.tolist() == ["accuracy", "my_accuracy", "recall", "<lambda>"]
    p = result.fraction_wrong.to_numpy()
    assert p[1] == pytest.approx(p[0], abs=2e-5)  # may differ only on ~1e-16 ties
    assert p[3] == p[2]


# ------------------------------------------------------------------- (b) brute force
def _rate_cdf(r):
    """CDF of a rate 0.5 + 0.5 sqrt(u): density 8 (r - 0.5) on [0.5, 1]."""
    return 4.0 * (np.clip(r, 0.5, 1.0) - 0.5) ** 2


def _exact_misranking(metric: str, x_weight: float, y_weight: float, m: int) -> float:
    """P(metric ranks a pair wrongly) for the fixed matrix with U00 - U10 = x_weight and
    U11 - U01 = y_weight, by deterministic quadrature independent of the Monte Carlo.

    Both the truth and the metric prefer the second classifier exactly when its TNR
    exceeds a threshold, so the inner integral over TNR2 is exact: the pair is ranked
    wrongly when TNR2 falls between the two thresholds. The outer integral over f0,
    TPR1, TNR1 and TPR2 is a midpoint rule, rates ``r = 0.5 + 0.5 v`` with weight 2v.
    """
    v = (np.arange(m) + 0.5) / m
    r = 0.5 + 0.5 * v
    w = 2.0 * v / m
    tpr1, tnr1, tpr2 = np.meshgrid(r, r, r, indexing="ij")
    weight = w[:, None, None] * w[None, :, None] * w[None, None, :]
    total = 0.0
    for f0 in v:  # f0 uniform: equal weights 1/m
        f1 = 1.0 - f0
        # truth: x f0 (TPR2 - TPR1) + y f1 (TNR2 - TNR1) > 0
        t_true = tnr1 - x_weight * f0 * (tpr2 - tpr1) / (y_weight * f1)
        if metric == "balanced_accuracy":  # (TPR + TNR) / 2
            t_metric = tpr1 + tnr1 - tpr2
        elif metric == "f1":  # class 0 positive: 2 f0 TPR / (f0 (1 + TPR) + f1 (1 - TNR))
            s1 = 2 * f0 * tpr1 / (f0 * (1 + tpr1) + f1 * (1 - tnr1))
            t_metric = 1 - (2 * f0 * tpr2 / s1 - f0 * (1 + tpr2)) / f1
        else:
            raise AssertionError(metric)
        total += (np.abs(_rate_cdf(t_true) - _rate_cdf(t_metric)) * weight).sum()
    return total / m


@pytest.mark.parametrize("metric", ["balanced_accuracy", "f1"])
def test_monte_carlo_matches_quadrature_for_a_fixed_matrix(metric):
    u = UtilityMatrix.from_xy(0.4, -0.3)
    np.testing.assert_allclose(u.values, [[0.6, 0.0], [0.3, 1.0]])
    x_weight, y_weight = 0.6 - 0.3, 1.0 - 0.0
    coarse = _exact_misranking(metric, x_weight, y_weight, 32)
    fine = _exact_misranking(metric, x_weight, y_weight, 64)
    # The rule converges at least linearly (about quadratically here), so the fine
    # grid's error is below the coarse-to-fine difference; extrapolate as O(h^2).
    exact = fine + (fine - coarse) / 3
    grid_error = abs(fine - coarse)
    assert grid_error < 2e-3
    result = rank_disagreement([metric], u, error_sd=[], n_pairs=400_000, seed=11)
    row = _row(result, metric)
    assert 0.1 < exact < 0.2
    assert abs(row.fraction_wrong - exact) < 4 * row.mc_se + grid_error


# ------------------------------------------------------------- (c) erroneous matrices
def test_erroneous_matrices_satisfy_the_constraints():
    rng = np.random.default_rng(6)
    true = yieldwise.utility.chart_matrices(*sample_chart_points(50_000, "uniform", rng))
    for sd in (0.05, 0.3, 1.0, 5.0):
        wrong = _perturb(true, sd, rng)
        assert wrong.shape == true.shape
        assert (wrong >= 0).all() and (wrong <= 1).all()
        assert (wrong[:, 0, 0] >= wrong[:, 1, 0]).all()
        assert (wrong[:, 1, 1] >= wrong[:, 0, 1]).all()
        assert not np.array_equal(wrong, true)
    same = _perturb(true, 0.0, rng)
    np.testing.assert_array_equal(same, true)
    assert same is not true


def test_erroneous_matrices_far_from_the_bounds_are_plain_gaussian():
    n, sd = 100_000, 0.02
    base = np.array([[0.7, 0.2], [0.3, 0.8]])
    wrong = _perturb(np.broadcast_to(base, (n, 2, 2)), sd, np.random.default_rng(7))
    np.testing.assert_allclose(wrong.mean(axis=0), base, atol=4 * sd / np.sqrt(n))
    np.testing.assert_allclose(wrong.std(axis=0), sd, rtol=0.02)
    errors = (wrong - base).reshape(n, 4)
    assert np.abs(np.corrcoef(errors.T) - np.eye(4)).max() < 0.02  # independent entries


def test_erroneous_matrices_at_the_bounds_follow_half_normals():
    # Identity: each correct entry sits at 1 and each wrong one at 0, so (for small sigma,
    # where the ordering never binds) they become half-normals pointing inwards.
    n, sd = 100_000, 0.05
    wrong = _perturb(np.broadcast_to(np.eye(2), (n, 2, 2)), sd, np.random.default_rng(8))
    shift = sd * np.sqrt(2 / np.pi)
    spread = sd * np.sqrt(1 - 2 / np.pi)
    tol = 4 * spread / np.sqrt(n)
    np.testing.assert_allclose(
        wrong.mean(axis=0), [[1 - shift, shift], [shift, 1 - shift]], atol=tol
    )
    np.testing.assert_allclose(wrong.std(axis=0), spread, rtol=0.02)


def test_erroneous_matrices_with_tied_columns_are_ordered():
    # Entries all 0.5: only the ordering constraint binds. With e1, e2 ~ N(0, sd)
    # conditioned on e1 >= e2, E[e1] = sd / sqrt(pi) and E[e2] = -sd / sqrt(pi).
    n, sd = 100_000, 0.05
    wrong = _perturb(np.full((n, 2, 2), 0.5), sd, np.random.default_rng(9))
    shift = sd / np.sqrt(np.pi)
    spread = sd * np.sqrt(1 - 1 / np.pi)
    np.testing.assert_allclose(
        wrong.mean(axis=0),
        [[0.5 + shift, 0.5 - shift], [0.5 - shift, 0.5 + shift]],
        atol=4 * spread / np.sqrt(n),
    )
    np.testing.assert_allclose(wrong.std(axis=0), spread, rtol=0.02)


def test_erroneous_matrices_match_naive_rejection_at_large_sigma():
    # Column (correct 0.6, wrong 0.3) with sigma 0.3: box and ordering both bind.
    sd, n = 0.3, 100_000
    base = np.array([[0.6, 0.0], [0.3, 1.0]])
    wrong = _perturb(np.broadcast_to(base, (n, 2, 2)), sd, np.random.default_rng(10))
    column = wrong[:, :, 0]  # (correct, wrong) entries of class 0
    rng = np.random.default_rng(11)
    naive = base[:, 0] + sd * rng.standard_normal((1_000_000, 2))
    keep = ((naive >= 0) & (naive <= 1)).all(axis=1) & (naive[:, 0] >= naive[:, 1])
    naive = naive[keep]
    assert naive.shape[0] > 200_000
    se = np.sqrt(naive.var(axis=0) / naive.shape[0] + column.var(axis=0) / n)
    np.testing.assert_allclose(column.mean(axis=0), naive.mean(axis=0), atol=4 * se.max())
    np.testing.assert_allclose(column.std(axis=0), naive.std(axis=0), rtol=0.02)
    # The truncation matters here: the ordering pushes the correct entry up, and the
    # box narrows both spreads well below sigma.
    assert column[:, 0].mean() > 0.6 + 0.03
    assert (column.std(axis=0) < 0.25).all()


# ------------------------------------------------------------------ (d) utility priors
def _domain_grid(m: int):
    centres = -1 + (np.arange(m) + 0.5) * (2 / m)
    gx, gy = np.meshgrid(centres, centres, indexing="ij")
    return gx, gy, in_chart_domain(gx, gy), (2 / m) ** 2


def test_uniform_prior_fills_the_domain_uniformly():
    n = 200_000
    x, y = sample_chart_points(n, "uniform", np.random.default_rng(12))
    assert in_chart_domain(x, y).all()
    # Quadrants: areas 1, 1/2, 1, 1/2 of the domain's area 4 - 1/2 - 1/2 = 3.
    for mask, area in (
        ((x > 0) & (y > 0), 1.0),
        ((x < 0) & (y > 0), 0.5),
        ((x < 0) & (y < 0), 1.0),
        ((x > 0) & (y < 0), 0.5),
    ):
        p = area / 3
        assert mask.mean() == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / n))
    # 4 x 4 cells of side 1/2; their area inside the domain from a fine grid.
    gx, gy, inside, cell = _domain_grid(800)
    for i in range(4):
        for j in range(4):
            lo_x, lo_y = -1 + 0.5 * i, -1 + 0.5 * j
            in_cell = (gx >= lo_x) & (gx < lo_x + 0.5) & (gy >= lo_y) & (gy < lo_y + 0.5)
            p = (inside & in_cell).sum() * cell / 3
            drawn = ((x >= lo_x) & (x < lo_x + 0.5) & (y >= lo_y) & (y < lo_y + 0.5)).mean()
            assert drawn == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / n) + 1e-3)


def test_gaussian_prior_is_a_truncated_normal_with_sd_one_third():
    n = 200_000
    x, y = sample_chart_points(n, "gaussian", np.random.default_rng(13))
    assert in_chart_domain(x, y).all()
    # Brute-force moments of N(0, 1/3)^2 truncated to the domain, on a fine grid.
    gx, gy, inside, _ = _domain_grid(2000)
    density = np.exp(-(gx**2 + gy**2) / (2 / 9)) * inside
    density /= density.sum()
    sd_x = np.sqrt((density * gx**2).sum() - (density * gx).sum() ** 2)
    sd_y = np.sqrt((density * gy**2).sum() - (density * gy).sum() ** 2)
    p_cut_quadrant = (density * ((gx < 0) & (gy > 0))).sum()
    assert 0.3 < sd_x < 1 / 3 - 0.005  # truncation narrows it measurably
    tol_sd = 4 * sd_x / np.sqrt(2 * n) + 1e-3
    assert x.std() == pytest.approx(sd_x, abs=tol_sd)
    assert y.std() == pytest.approx(sd_y, abs=tol_sd)
    assert x.mean() == pytest.approx(0, abs=4 * sd_x / np.sqrt(n))
    tol_p = 4 * np.sqrt(p_cut_quadrant * (1 - p_cut_quadrant) / n) + 1e-3
    assert ((x < 0) & (y > 0)).mean() == pytest.approx(p_cut_quadrant, abs=tol_p)


def test_gaussian_prior_changes_the_result():
    kw = {"metrics": ["accuracy"], "error_sd": [], "n_pairs": 100_000, "seed": 14}
    uniform = rank_disagreement(utility_prior="uniform", **kw).fraction_wrong.iloc[0]
    gaussian = rank_disagreement(utility_prior="gaussian", **kw).fraction_wrong.iloc[0]
    # The Gaussian concentrates near the identity, where accuracy is right.
    assert gaussian < uniform - 0.01


# ------------------------------------------------------------------ (e) reproducibility
def test_same_seed_same_result():
    kw = {"n_pairs": 30_000, "error_sd": (0, 0.2), "chunk_size": 7_000}
    first = rank_disagreement(seed=42, **kw)
    pd.testing.assert_frame_equal(first, rank_disagreement(seed=42, **kw))
    other = rank_disagreement(seed=43, **kw)
    assert not first.fraction_wrong.equals(other.fraction_wrong)
    generator = rank_disagreement(seed=np.random.default_rng(42), **kw)
    pd.testing.assert_frame_equal(first, generator, check_like=True)
    # Chunking changes the random stream but not the distribution.
    big = rank_disagreement(seed=42, n_pairs=30_000, error_sd=(0, 0.2))
    diff = (big.fraction_wrong - first.fraction_wrong).abs()
    assert (diff <= 5 * np.sqrt(2) * first.mc_se + 1e-12).all()


# ----------------------------------------------------------------- (f) bad input
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_pairs": 0}, ValueError, r"n_pairs must be a positive integer, found 0"),
        ({"n_pairs": 1e5}, ValueError, r"n_pairs must be a positive integer, found 100000.0"),
        ({"n_pairs": True}, ValueError, r"n_pairs must be a positive integer"),
        ({"chunk_size": -3}, ValueError, r"chunk_size must be a positive integer, found -3"),
        ({"error_sd": (0, -0.1)}, ValueError, r"error_sd must hold non-negative finite.*-0.1"),
        ({"error_sd": [0.1, np.nan]}, ValueError, r"error_sd must hold non-negative finite"),
        ({"error_sd": [0.1, np.inf]}, ValueError, r"non-negative finite numbers, found \[inf\]"),
        ({"error_sd": [0.1, 0.1]}, ValueError, r"error_sd must not repeat a value"),
        ({"error_sd": "0.1"}, TypeError, r"error_sd must be a number or a sequence"),
        ({"error_sd": [[0.1]]}, ValueError, r"error_sd must be 1-dimensional, found shape"),
        (
            {"utility_prior": "flat"},
            ValueError,
            r"utility_prior must be one of \['uniform', 'gaussian'\] or a binary UtilityMatrix, "
            r"found 'flat'",
        ),
        (
            {"utility_prior": UtilityMatrix([[0, 1], [1, 0]])},
            ValueError,
            r"utility_prior must be an admitted utility matrix.*U\[0,0\] = 0.0 < U\[1,0\] = 1.0",
        ),
        (
            {"utility_prior": UtilityMatrix([[1, 0], [0, 1], [0.5, 0.5]])},
            ValueError,
            r"utility_prior must be a binary \(2x2\) UtilityMatrix, found shape \(3, 2\)",
        ),
        (
            {"metrics": ["accuracy", "auc"]},
            ValueError,
            r"metrics\[1\]: unknown metric name 'auc'; available names are accuracy, "
            r"balanced_accuracy, cohen_kappa",
        ),
        ({"metrics": {"x": "nope"}}, ValueError, r"metrics\['x'\]: unknown metric name 'nope'"),
        (
            {"metrics": [3]},
            TypeError,
            r"metrics\[0\] must be a metric name .* or a callable, "
            r"found int 3",
        ),
        ({"metrics": 3}, TypeError, r"metrics must be a metric name, a callable, or a sequence"),
        ({"metrics": ["f1", "f1"]}, ValueError, r"metrics has duplicated names \['f1'\]"),
        ({"metrics": {"utility_yield": "f1"}}, ValueError, r"must not be named 'utility_yield'"),
        ({"metrics": [], "error_sd": []}, ValueError, r"nothing to audit"),
        (
            {"metrics": [lambda c: c[:, 0, 0][:-1]]},
            ValueError,
            r"metric '<lambda>' must return one score per confusion matrix: given an array of "
            r"shape \(2000, 2, 2\) it must return shape \(2000,\), found shape \(1999,\)",
        ),
        (
            {"metrics": {"sum": lambda c: c.sum(axis=1)}},
            ValueError,
            r"metric 'sum' must return one score.*found shape \(2000, 2\)",
        ),
        (
            {"metrics": {"text": lambda c: ["a"] * len(c)}},
            TypeError,
            r"metric 'text' must return numbers",
        ),
    ],
)
def test_bad_arguments_are_explained(kwargs, error, match):
    kwargs = {"n_pairs": 1000, **kwargs}
    with pytest.raises(error, match=match):
        rank_disagreement(**kwargs)


def test_undefined_scores_warn_and_count_as_wrong():
    def sometimes_undefined(confusion):
        scores = confusion[:, 0, 0] + confusion[:, 1, 1]
        scores[::2] = np.nan  # the input is read-only, the output is ours
        return scores

    with pytest.warns(RuntimeWarning, match=r"'sometimes_undefined' was undefined \(NaN\) for"):
        result = rank_disagreement(
            [sometimes_undefined], IDENTITY, error_sd=[], n_pairs=1000, seed=1
        )
    # Scores are laid out [first classifiers, second classifiers], so the pairs with an even
    # index have NaN scores (counted as wrong) and the others are ranked as accuracy ranks
    # them, which is right for the identity.
    assert result.fraction_wrong.iloc[0] == 0.5


# =========================================================== is_admissible (theory 1.2)
def test_accuracy_is_admissible_with_equal_weights():
    result = is_admissible(metrics.accuracy)
    assert isinstance(result, Admissibility)
    assert result.admissible and bool(result)
    assert result.x == pytest.approx(result.y, abs=1e-9)
    assert result.x == pytest.approx(1 / math.sqrt(2), abs=1e-9)
    assert result.max_angle_deviation < 1e-8
    assert "(U00 - U10) : (U11 - U01) = X : Y" in result.reason
    assert result.n_points == 2 * 9 * 5**2
    assert is_admissible("accuracy") == result


def test_recall_and_specificity_directions():
    tpr = is_admissible(metrics.recall)
    assert tpr.admissible
    assert (tpr.x, tpr.y) == pytest.approx((1.0, 0.0), abs=1e-9)
    tnr = is_admissible(metrics.specificity)
    assert tnr.admissible
    assert (tnr.x, tnr.y) == pytest.approx((0.0, 1.0), abs=1e-9)


def test_utility_yield_is_admissible_with_its_column_differences():
    u = UtilityMatrix([[0.6, 0.1], [0.3, 0.9]])
    result = is_admissible(lambda cm: yieldwise.utility_yield(cm, u))
    assert result.admissible
    # X : Y = (U00 - U10) : (U11 - U01) = 0.3 : 0.8
    expected = np.array([0.3, 0.8]) / np.hypot(0.3, 0.8)
    assert (result.x, result.y) == pytest.approx(tuple(expected), abs=1e-9)
    # An increasing transform of an admissible metric ranks identically.
    cubed = is_admissible(lambda cm: yieldwise.utility_yield(cm, u) ** 3)
    assert cubed.admissible
    assert (cubed.x, cubed.y) == pytest.approx(tuple(expected), abs=1e-6)


@pytest.mark.parametrize(
    "name",
    [
        "precision",
        "f1",
        "matthews",
        "fowlkes_mallows",
        "balanced_accuracy",
        "cohen_kappa",
        "preference_driven",
    ],
)
def test_inadmissible_metrics(name):
    result = is_admissible(CONFUSION_METRICS[name])
    assert not result.admissible and not result
    assert math.isnan(result.x) and math.isnan(result.y)
    assert result.max_angle_deviation > 0.05  # far above the tolerance: not a close call
    assert "no utility matrix ranks confusion matrices as it does" in result.reason


def test_balanced_accuracy_direction_depends_on_class_balance():
    # Its gradient is (1/f0, 1/f1) / 2: the angle between f0 = 0.1 and f0 = 0.9 is large.
    result = is_admissible("balanced_accuracy")
    spread = math.atan2(1 / 0.1, 1 / 0.9) - math.atan2(1 / 0.9, 1 / 0.1)
    assert result.max_angle_deviation == pytest.approx(spread / 2, rel=1e-6)


@pytest.mark.parametrize("name", sorted(CONFUSION_METRICS))
def test_numerical_test_agrees_with_hand_set_labels(name):
    function = CONFUSION_METRICS[name]
    assert is_admissible(function).admissible == function.admissible


def test_special_metrics():
    constant = is_admissible(lambda cm: 0.5)
    assert not constant and "constant" in constant.reason

    def undefined(cm):
        raise UndefinedMetricError("never defined")

    nowhere = is_admissible(undefined)
    assert not nowhere and "undefined" in nowhere.reason and nowhere.n_points == 0
    # Error rate, lower is better: linear, but it rewards wrong decisions.
    error_rate = is_admissible(lambda cm: 1 - metrics.accuracy(cm))
    assert error_rate.admissible
    assert (error_rate.x, error_rate.y) == pytest.approx((-(0.5**0.5), -(0.5**0.5)))
    assert "lower-is-better" in error_rate.reason
    # A plateau ties confusion matrices that utilities separate.
    plateau = is_admissible(lambda cm: min(metrics.accuracy(cm), 0.5))
    assert not plateau and "vanishes" in plateau.reason
    # A steep increasing transform is neither flat nor bent.
    steep = is_admissible(lambda cm: metrics.accuracy(cm) ** 50)
    assert steep.admissible and steep.x == pytest.approx(steep.y)
    # Undefined at some points only: they are skipped.
    partly = is_admissible(
        lambda cm: math.nan if cm.counts[0, 0] < 0.02 * cm.total else metrics.recall(cm)
    )
    assert partly.admissible and "undefined at" in partly.reason
    assert 0 < partly.n_points < 450
    with pytest.raises(dataclasses.FrozenInstanceError):
        partly.admissible = False  # type: ignore[misc]


def test_is_admissible_passes_binary_confusion_matrices():
    seen = []

    def spy(cm):
        seen.append(cm)
        return metrics.accuracy(cm)

    is_admissible(spy, n_grid=2)
    assert len(seen) == 4 * 2**2 * 9 * 2
    assert all(isinstance(cm, ConfusionMatrix) for cm in seen)
    assert {cm.decisions for cm in seen} == {(0, 1)} and {cm.classes for cm in seen} == {(0, 1)}
    assert {round(cm.total) for cm in seen} == {100, 10_000}


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("auc",), {}, ValueError, r"metric: unknown metric name 'auc'; available names are"),
        (
            (3,),
            {},
            TypeError,
            r"metric must be a callable metric\(confusion\) -> float or a "
            r"metric name .*found int 3",
        ),
        (
            ("accuracy",),
            {"n_grid": 1},
            ValueError,
            r"n_grid must be an integer of at least 2, "
            r"found 1",
        ),
        (("accuracy",), {"tol": 0}, ValueError, r"tol must be a number in \(0, 3.14159\), found 0"),
        (("accuracy",), {"step": 0.5}, ValueError, r"step must be a number in \(0, 0.1\)"),
    ],
)
def test_is_admissible_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        is_admissible(*args, **kwargs)


def test_is_admissible_rejects_non_numeric_results():
    with pytest.raises(TypeError, match=r"metric 'bad' must return a number .* found str"):

        def bad(cm):
            return "high"

        is_admissible(bad)
