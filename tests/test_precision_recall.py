"""Precision-recall and precision-recall-gain curves, their areas and their flags."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.metrics as skm

from yieldwise import UndefinedMetricError, UtilityMatrix, metrics
from yieldwise.metrics import (
    PRGainCurve,
    average_precision,
    pr_curve,
    pr_gain_auc,
    pr_gain_curve,
)
from yieldwise.roc import best_operating_point


def _problem(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 120))
    truth = rng.integers(0, 2, n)
    truth[:2] = [0, 1]
    scores = np.round(rng.normal(size=n) + truth * rng.uniform(-1, 2), int(rng.integers(0, 3)))
    return scores, truth


@pytest.mark.parametrize("seed", range(30))
def test_pr_curve_and_average_precision_are_sklearns(seed):
    scores, truth = _problem(seed)
    curve = pr_curve(scores, truth, positive=1)
    precision, recall, thresholds = skm.precision_recall_curve(truth, scores)
    # scikit-learn lists thresholds increasing and appends the point (recall 0, precision 1)
    np.testing.assert_allclose(curve.precision, precision[:-1][::-1])
    np.testing.assert_allclose(curve.recall, recall[:-1][::-1])
    np.testing.assert_array_equal(curve.thresholds, thresholds[::-1])
    assert average_precision(scores, truth, positive=1) == pytest.approx(
        skm.average_precision_score(truth, scores), abs=1e-12
    )


def test_pr_gain_by_hand_with_a_crossing():
    # P = 2 positives, N = 6 negatives: P / N = 1/3, pi = 1/4.
    # scores 8..1, labels n p n n p n n n
    # threshold  TP FP  precG = 1 - FP/(3 TP)   recG = 1 - (2 - TP)/(3 TP)
    #   8         0  1   undefined               -inf
    #   7         1  1   1 - 1/3  = 2/3          1 - 1/3 = 2/3
    # The crossing through recall gain 0 lies on the segment (8) -> (7), at
    # TP = P pi = 0.5: alpha = 0.5, FP = 1, precG = 1 - 1/1.5 = 1/3.
    #   6         1  2   1/3                     2/3
    #   5         1  3   0                       2/3
    #   4         2  3   1/2                     1
    #   3..1      2  4,5,6  1/3, 1/6, 0          1
    scores = [8, 7, 6, 5, 4, 3, 2, 1]
    truth = list("npnnpnnn")
    curve = pr_gain_curve(scores, truth, positive="p")
    assert isinstance(curve, PRGainCurve)
    frame = curve.frame
    np.testing.assert_array_equal(frame["is_crossing"], [True] + [False] * 7)
    np.testing.assert_allclose(frame["true_positives"], [0.5, 1, 1, 1, 2, 2, 2, 2])
    np.testing.assert_allclose(frame["false_positives"], [1, 1, 2, 3, 3, 4, 5, 6])
    np.testing.assert_allclose(
        frame["precision_gain"], [1 / 3, 2 / 3, 1 / 3, 0, 1 / 2, 1 / 3, 1 / 6, 0]
    )
    np.testing.assert_allclose(frame["recall_gain"], [0, 2 / 3, 2 / 3, 2 / 3, 1, 1, 1, 1])
    np.testing.assert_allclose(frame["recall"], frame["true_positives"] / 2)
    # area: (0, 1/3) -> (2/3, 2/3): 2/3 * 1/2 = 1/3; vertical drops add nothing;
    # (2/3, 0) -> (1, 1/2): 1/3 * 1/4 = 1/12. AUPRG = 5/12.
    assert curve.area == pytest.approx(5 / 12)
    assert pr_gain_auc(scores, truth, positive="p") == pytest.approx(5 / 12)
    assert curve.prevalence == 0.25


@pytest.mark.parametrize("seed", range(30))
def test_pr_gain_against_brute_force(seed):
    scores, truth = _problem(seed)
    curve = pr_gain_curve(scores, truth, positive=1)
    n_pos, n_neg = truth.sum(), (1 - truth).sum()
    # every threshold with a true positive, counted by hand, gains from the definitions
    rows = []
    for t in np.unique(scores)[::-1]:
        tp = np.sum((scores >= t) & (truth == 1))
        fp = np.sum((scores >= t) & (truth == 0))
        if tp > 0:  # gains as (x - pi) / ((1 - pi) x) of precision and recall
            precision, recall, pi = tp / (tp + fp), tp / n_pos, n_pos / (n_pos + n_neg)
            rows.append(
                ((precision - pi) / ((1 - pi) * precision), (recall - pi) / ((1 - pi) * recall))
            )
    gains = np.array(rows)
    listed = curve.frame[~curve.frame["is_crossing"]]
    kept = gains[gains[:, 1] >= 0]
    np.testing.assert_allclose(listed["precision_gain"], kept[:, 0], atol=1e-12)
    np.testing.assert_allclose(listed["recall_gain"], kept[:, 1], atol=1e-12)
    # the crossing lies on the straight gain-space segment between its neighbours
    if curve.frame["is_crossing"].any():
        below = gains[gains[:, 1] < 0]
        before = below[-1] if below.size else None
        after = kept[0]
        crossing = curve.frame.iloc[0]
        if before is not None and np.isfinite(before[1]):
            t = -before[1] / (after[1] - before[1])
            assert crossing["precision_gain"] == pytest.approx(
                before[0] + t * (after[0] - before[0]), abs=1e-9
            )
    # AUPRG: trapezoids (numpy's) over the brute-force points from recall gain 0 on
    assert curve.area == pytest.approx(_brute_force_auprg(scores, truth), abs=1e-12)


def _brute_force_auprg(scores, truth):
    """Area under the PR-gain curve from counts taken threshold by threshold.

    Points: (TP, FP) with nothing decided positive, then at every distinct score from
    the top; gains from the definitions ``(x - pi) / ((1 - pi) x)``. The curve starts
    at recall gain 0, i.e. recall ``pi``, TP = P pi: if no threshold gives it exactly,
    the randomised classifier between the last threshold below it and the first above
    (a fraction ``a`` of the way in TP and in FP) is added. Then ``np.trapezoid``.
    """
    n_pos, n = truth.sum(), truth.size
    pi = n_pos / n
    counts = [(0, 0)] + [
        (np.sum((scores >= t) & (truth == 1)), np.sum((scores >= t) & (truth == 0)))
        for t in np.unique(scores)[::-1]
    ]

    def gains(tp, fp):
        precision, recall = tp / (tp + fp), tp / n_pos
        return (precision - pi) / ((1 - pi) * precision), (recall - pi) / ((1 - pi) * recall)

    first = next(i for i, (tp, fp) in enumerate(counts) if tp > 0 and gains(tp, fp)[1] >= -1e-12)
    points = [gains(tp, fp) for tp, fp in counts[first:]]
    if points[0][1] > 1e-12:
        (tp0, fp0), (tp1, fp1) = counts[first - 1], counts[first]
        a = (n_pos * pi - tp0) / (tp1 - tp0)
        points.insert(0, gains(n_pos * pi, fp0 + a * (fp1 - fp0)))
    precision_gain, recall_gain = np.array(points).T
    return float(np.trapezoid(precision_gain, recall_gain))


def test_brute_force_auprg_reproduces_the_hand_example():
    """The brute force itself, on test_pr_gain_by_hand_with_a_crossing's items: 5/12."""
    scores = np.arange(8, 0, -1)
    truth = np.array([0, 1, 0, 0, 1, 0, 0, 0])
    assert _brute_force_auprg(scores, truth) == pytest.approx(5 / 12, abs=1e-12)


def test_randomised_points_lie_on_straight_gain_segments():
    """Both gains are affine in 1 / TP along a segment, so the segment is straight."""
    p_, n_ = 7, 13
    (tp0, fp0), (tp1, fp1) = (2, 1), (5, 6)
    alphas = np.linspace(0, 1, 11)
    tp = tp0 + alphas * (tp1 - tp0)
    fp = fp0 + alphas * (fp1 - fp0)
    precision_gain = 1 - (p_ / n_) * fp / tp
    recall_gain = 1 - (p_ / n_) * (p_ - tp) / tp
    slopes = np.diff(precision_gain) / np.diff(recall_gain)
    np.testing.assert_allclose(slopes, slopes[0], rtol=1e-12)


def test_flags_and_registry():
    for function in (pr_curve, average_precision, pr_gain_curve, pr_gain_auc):
        assert function.admissible is False
        assert "ignores true negatives" in function.admissibility
        assert function.info.input == "scores"
    assert metrics.SCORE_METRICS["average_precision"] is average_precision
    assert metrics.SCORE_METRICS["pr_gain_auc"] is pr_gain_auc


def test_areas_rank_against_the_best_yield_somewhere():
    """Not admissible: among random pairs, both areas disagree with the best yield."""
    u = UtilityMatrix([[1, 0], [0, 1]], decisions=[1, 0], classes=[1, 0])
    disagree = {"average_precision": 0, "pr_gain_auc": 0}
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 60)
    for _ in range(300):
        a, b = (truth * rng.uniform(0, 2) + rng.normal(size=60) for _ in range(2))
        gap = (best_operating_point(a, truth, u, positive=1).utility_yield
               - best_operating_point(b, truth, u, positive=1).utility_yield)  # fmt: skip
        for name, area in (("average_precision", average_precision), ("pr_gain_auc", pr_gain_auc)):
            d = area(a, truth, positive=1) - area(b, truth, positive=1)
            disagree[name] += bool(gap * d < 0)
    assert disagree["average_precision"] > 0 and disagree["pr_gain_auc"] > 0


def test_undefined_without_both_classes():
    with pytest.raises(UndefinedMetricError, match="pr_curve is undefined: true_classes has no"):
        pr_curve([0.1, 0.2], [1, 1], positive=1, classes=[0, 1])
    with pytest.raises(UndefinedMetricError, match="pr_gain_curve is undefined"):
        pr_gain_curve([0.1, 0.2], [0, 0], positive=1, classes=[0, 1])


def test_plot_both_kinds():
    import matplotlib.pyplot as plt

    from yieldwise import plots

    scores, truth = _problem(3)
    ax = plots.precision_recall({"a": scores, "b": -scores}, truth, positive=1)
    assert len([line for line in ax.lines if line.get_gid() == "curve"]) == 2
    ax = plots.precision_recall({"a": scores}, truth, positive=1, gain=True)
    assert ax.get_xlabel() == "recall gain"
    plt.close("all")
