"""The ROC convex hull, its isotonic calibration, randomised points and dominance."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from yieldwise import UndefinedMetricError, UtilityMatrix
from yieldwise.roc import (
    RandomisedOperatingPoint,
    ROCHull,
    best_operating_point,
    convex_hull,
    dominance,
    dominates,
    non_dominated,
)
from yieldwise.utility import chart_matrices

# ------------------------------------------------------------ hand-worked example
# 10 items, positives "p". Scores high to low, with a tie at 0.5 (one p, one n):
#   score  0.9 0.8 0.7 0.6 0.5 0.5 0.4 0.3 0.2 0.1
#   label   p   n   p   p   p   n   n   p   n   n
# ROC points (FP, TP) after each distinct score: (0,0) (0,1) (1,1) (1,2) (1,3) (2,4)
# [the tie moves one p and one n at once] (3,4) (3,5) (4,5) (5,5); P = 5, N = 5.
# Upper hull by hand: from (0,0) the steepest reach is (1,3) [slope 3 beats (0,1):
# vertical but only 1, and (1,3) lies above the chord (0,0)-(2,4)? slope 3 > 2: yes].
# Vertical first: (0,1) has slope inf from (0,0); is it a vertex? chord (0,0)-(1,3)
# at fp = 0 is 0, and (0,1) is above it, so yes: vertices (0,0), (0,1).
# From (0,1): (1,3) slope 2, (2,4) slope 1.5, (3,5) slope 4/3 -> (1,3).
# From (1,3): (2,4) slope 1, (3,5) slope 1 (collinear: (2,4) is no strict vertex), (5,5)
# slope 0.5 -> (3,5). From (3,5): (5,5) slope 0.
# Vertices: (0,0) (0,1) (1,3) (3,5) (5,5), thresholds inf, 0.9, 0.6, 0.3, 0.1.
# Bins: {0.9}: 1p -> 1.0;  {0.8, 0.7, 0.6}: 2p 1n -> 2/3;
#       {0.5, 0.5, 0.4, 0.3}: 2p 2n -> 1/2;  {0.2, 0.1}: 2n -> 0.
# AUCH = 0 (vertical) + 0.2 * (0.2 + 0.6) / 2 + 0.4 * (0.6 + 1.0) / 2 + 0.4 * 1
#      = 0.08 + 0.32 + 0.4 = 0.8
SCORES = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.5, 0.4, 0.3, 0.2, 0.1])
LABELS = np.array(list("pnpppnnpnn"), dtype=object)


def test_hand_worked_hull():
    hull = convex_hull(SCORES, LABELS, positive="p")
    assert isinstance(hull, ROCHull)
    np.testing.assert_array_equal(hull.vertices["threshold"], [np.inf, 0.9, 0.6, 0.3, 0.1])
    np.testing.assert_array_equal(hull.vertices["false_positives"], [0, 0, 1, 3, 5])
    np.testing.assert_array_equal(hull.vertices["true_positives"], [0, 1, 3, 5, 5])
    np.testing.assert_allclose(hull.vertices["fpr"], [0, 0, 0.2, 0.6, 1])
    np.testing.assert_allclose(hull.vertices["tpr"], [0, 0.2, 0.6, 1, 1])
    assert hull.auc == pytest.approx(0.8, abs=1e-15)
    bins = hull.bins
    np.testing.assert_array_equal(bins["n_items"], [1, 3, 4, 2])
    np.testing.assert_array_equal(bins["n_positive"], [1, 2, 2, 0])
    np.testing.assert_array_equal(bins["score_max"], [0.9, 0.8, 0.5, 0.2])
    np.testing.assert_array_equal(bins["score_min"], [0.9, 0.6, 0.3, 0.1])
    np.testing.assert_allclose(bins["probability"], [1, 2 / 3, 0.5, 0])
    # segment slopes in ROC space: (dTP / P) / (dFP / N)
    np.testing.assert_allclose(bins["slope"], [np.inf, 2, 1, 0])
    np.testing.assert_allclose(
        hull.calibrated, [1, 2 / 3, 2 / 3, 2 / 3, 0.5, 0.5, 0.5, 0.5, 0, 0], rtol=0, atol=1e-15
    )
    np.testing.assert_array_equal(hull.bin_index, [0, 1, 1, 1, 2, 2, 2, 2, 3, 3])
    assert (hull.positive, hull.negative, hull.prevalence) == ("p", "n", 0.5)
    # the hull's area is at least the empirical curve's
    assert hull.auc >= np.trapezoid(hull.roc.tpr, hull.roc.fpr)


def test_items_keep_their_original_order():
    order = np.random.default_rng(3).permutation(SCORES.size)
    hull = convex_hull(SCORES[order], LABELS[order], positive="p")
    reference = convex_hull(SCORES, LABELS, positive="p")
    np.testing.assert_array_equal(hull.calibrated, reference.calibrated[order])


# ------------------------------------------------------------------- brute force
def _problem(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 80))
    truth = rng.integers(0, 2, n)
    truth[:2] = [0, 1]
    # rounding makes ties frequent; the shift makes some curves good and some bad
    scores = np.round(rng.normal(size=n) + truth * rng.uniform(-1, 2), int(rng.integers(0, 3)))
    return scores, truth


def _brute_force_vertices(tp, fp):
    """O(m^3): a ROC point is a strict vertex unless it lies on/below a chord around it."""
    m = len(tp)
    keep = []
    for k in range(m):
        inside = False
        for i in range(k):
            for j in range(k + 1, m):
                cross = (fp[j] - fp[i]) * (tp[k] - tp[i]) - (tp[j] - tp[i]) * (fp[k] - fp[i])
                if cross <= 0:
                    inside = True
                    break
            if inside:
                break
        if not inside:
            keep.append(k)
    return keep


@pytest.mark.parametrize("seed", range(60))
def test_vertices_are_the_brute_force_hull(seed):
    scores, truth = _problem(seed)
    hull = convex_hull(scores, truth, positive=1)
    # every distinct threshold's counts, by hand
    thresholds = np.r_[np.inf, np.unique(scores)[::-1]]
    tp = [int(np.sum((scores >= t) & (truth == 1))) for t in thresholds]
    fp = [int(np.sum((scores >= t) & (truth == 0))) for t in thresholds]
    keep = _brute_force_vertices(tp, fp)
    np.testing.assert_array_equal(hull.vertices["threshold"], thresholds[keep])
    np.testing.assert_array_equal(hull.vertices["true_positives"], np.array(tp)[keep])
    np.testing.assert_array_equal(hull.vertices["false_positives"], np.array(fp)[keep])
    assert hull.auc >= np.trapezoid(hull.roc.tpr, hull.roc.fpr) - 1e-15


@pytest.mark.parametrize("seed", range(60))
def test_calibrated_is_sklearn_isotonic_regression(seed):
    scores, truth = _problem(seed)
    hull = convex_hull(scores, truth, positive=1)
    expected = IsotonicRegression().fit(scores, truth).predict(scores)
    np.testing.assert_allclose(hull.calibrated, expected, rtol=0, atol=1e-12)
    # and the bins' probabilities are non-increasing down the scores, strictly
    assert np.all(np.diff(hull.bins["probability"]) < 0)


def test_calibrated_for_the_other_class_is_the_complement():
    for seed in range(20):
        scores, truth = _problem(seed)
        a = convex_hull(scores, truth, positive=1).calibrated
        b = convex_hull(-scores, truth, positive=0).calibrated
        np.testing.assert_allclose(a, 1 - b, rtol=0, atol=1e-12)


def test_a_worse_than_random_classifier_has_the_diagonal_as_hull():
    hull = convex_hull([4, 3, 2, 1], ["n", "n", "p", "p"], positive="p")
    np.testing.assert_allclose(hull.vertices[["fpr", "tpr"]], [[0, 0], [1, 1]])
    assert hull.auc == 0.5
    np.testing.assert_allclose(hull.calibrated, 0.5)


def test_large_input_is_exact_and_fast():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 200_000)
    scores = rng.normal(size=truth.size) + truth
    hull = convex_hull(scores, truth, positive=1)
    expected = IsotonicRegression().fit(scores, truth).predict(scores)
    np.testing.assert_allclose(hull.calibrated, expected, rtol=0, atol=1e-12)


# ------------------------------------------------------------- best hull points
def _chart_utilities(n, seed, classes):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-1, 1, size=(n, 2))
    xy = xy[np.abs(xy[:, 0]) != np.abs(xy[:, 1])]  # skip "nothing matters" matrices
    values = chart_matrices(xy[:, 0], xy[:, 1])  # row k chooses class k
    return [UtilityMatrix(v, decisions=classes, classes=classes) for v in values]


@pytest.mark.parametrize("seed", range(15))
def test_best_hull_point_is_the_best_threshold(seed):
    scores, truth = _problem(seed)
    hull = convex_hull(scores, truth, positive=1)
    for u in _chart_utilities(20, seed, classes=[0, 1]):
        on_hull = hull.best_point(u)
        empirical = best_operating_point(scores, truth, u, positive=1)
        assert on_hull.threshold == empirical.threshold
        assert on_hull.utility_yield == pytest.approx(empirical.utility_yield, abs=1e-12)
        assert on_hull.confusion == empirical.confusion
        # yields are linear along the hull: no randomised point beats the vertex
        yields = hull.yields(u)
        assert yields.max() == pytest.approx(on_hull.utility_yield, abs=1e-12)


# ------------------------------------------------------------ randomised points
def test_randomised_point_by_hand():
    hull = convex_hull(SCORES, LABELS, positive="p")
    # fpr 0.4 is half-way along the segment (0.2, 0.6) -> (0.6, 1.0): tpr 0.8, reached by
    # deciding positive on scores >= 0.6 and on half the bin {0.5, 0.5, 0.4, 0.3}
    point = hull.at_fpr(0.4)
    assert isinstance(point, RandomisedOperatingPoint)
    assert (point.threshold_high, point.threshold_low) == (0.6, 0.3)
    assert point.probability == pytest.approx(0.5)
    assert (point.fpr, point.tpr) == pytest.approx((0.4, 0.8))
    # expected counts: TP = 3 + 0.5 * 2, FP = 1 + 0.5 * 2
    np.testing.assert_allclose(point.confusion.counts, [[4, 2], [1, 3]])
    assert hull.at_tpr(0.8).probability == pytest.approx(0.5)
    # at fpr 0 the hull's top on the vertical axis; at a vertex, a plain threshold
    assert hull.at_fpr(0.0).tpr == pytest.approx(0.2)
    vertex = hull.at_fpr(0.6)
    assert (vertex.threshold_high, vertex.threshold_low, vertex.probability) == (0.3, 0.3, 0.0)


def test_randomised_decisions_reach_the_hull_on_average():
    """Simulation with known truth: the mean rates over many seeded runs."""
    hull = convex_hull(SCORES, LABELS, positive="p")
    point = hull.at_fpr(0.5)
    assert point.tpr == pytest.approx(float(hull.tpr_at(0.5)))
    rng = np.random.default_rng(7)
    positive = LABELS == "p"
    decided = np.array([point.decide(SCORES, seed=rng) for _ in range(20_000)])
    tpr = decided[:, positive].sum(axis=1) / positive.sum()
    fpr = decided[:, ~positive].sum(axis=1) / (~positive).sum()
    # standard error of the mean of 20,000 runs is about 0.002; allow 5 s.e.
    assert fpr.mean() == pytest.approx(point.fpr, abs=0.01)
    assert tpr.mean() == pytest.approx(point.tpr, abs=0.01)


def test_rates_out_of_range_are_refused():
    hull = convex_hull(SCORES, LABELS, positive="p")
    with pytest.raises(ValueError, match=r"fpr must be a number in \[0, 1\], found 1.5"):
        hull.at_fpr(1.5)
    with pytest.raises(ValueError, match=r"fpr must lie in \[0, 1\]"):
        hull.tpr_at([-0.1, 0.5])


# --------------------------------------------------------------------- dominance
def test_point_dominance_by_hand():
    assert dominates((0.1, 0.8), (0.2, 0.7))
    assert dominates((0.1, 0.8), (0.1, 0.7))  # same fpr, higher tpr
    assert not dominates((0.1, 0.8), (0.1, 0.8))  # equal points do not dominate
    assert not dominates((0.1, 0.8), (0.05, 0.7))  # a trade-off
    assert non_dominated({"a": (0.1, 0.8), "b": (0.2, 0.7), "c": (0.05, 0.7)}) == ["a", "c"]


def _best_yields(hull, utilities):
    return np.array([hull.best_point(u).utility_yield for u in utilities])


def test_hull_dominance_means_no_worse_under_every_utility_matrix():
    rng = np.random.default_rng(11)
    truth = np.repeat([1, 0], 60)
    strong = truth * 2.0 + rng.normal(size=truth.size)
    weak = truth * 0.7 + rng.normal(size=truth.size)
    # a crossing pair: good at the top of the ranking only, or at the bottom only
    top = np.r_[np.full(20, 5.0), rng.normal(size=100)]  # 20 sure positives on top
    bottom = np.r_[rng.normal(size=100), np.full(20, -5.0)]  # 20 sure negatives at bottom
    hulls = {name: convex_hull(s, truth, positive=1)
             for name, s in {"strong": strong, "weak": weak, "top": top,
                             "bottom": bottom}.items()}  # fmt: skip
    table = dominance(hulls)
    assert table.loc["strong", "weak"] and not table.loc["weak", "strong"]
    assert not table.loc["top", "bottom"] and not table.loc["bottom", "top"]
    utilities = _chart_utilities(400, 5, classes=[1, 0])
    best = {name: _best_yields(h, utilities) for name, h in hulls.items()}
    for a in hulls:
        for b in hulls:
            if table.loc[a, b]:
                assert np.all(best[a] >= best[b] - 1e-12), (a, b)
    # crossing hulls: each wins under some utility matrices
    assert (best["top"] > best["bottom"] + 1e-9).any()
    assert (best["bottom"] > best["top"] + 1e-9).any()


def test_hull_against_point_and_point_hull():
    hull = convex_hull(SCORES, LABELS, positive="p")
    assert dominates(hull, (0.2, 0.5))  # below the hull
    assert not dominates(hull, (0.2, 0.7))  # above it at fpr 0.2 (hull: 0.6)
    # a point on the hull: the hull reaches it and is above its triangle elsewhere
    assert dominates(hull, hull.at_fpr(0.3))
    assert not dominates(hull.at_fpr(0.3), hull)
    # a point's own hull (0,0)-p-(1,1) dominates the hull when it is everywhere higher
    assert dominates((0.0, 1.0), hull)


def test_bad_inputs():
    with pytest.raises(UndefinedMetricError, match="no negative items"):
        convex_hull([0.1, 0.2], ["p", "p"], positive="p", classes=["p", "n"])
    with pytest.raises(ValueError, match="needs two classes, found 3"):
        convex_hull([0.1, 0.2, 0.3], ["a", "b", "c"])
    with pytest.raises(TypeError, match=r"a must be an ROCHull, an OperatingPoint"):
        dominates("ab", (0.1, 0.2))
    with pytest.raises(ValueError, match=r"b must have fpr and tpr in \[0, 1\]"):
        dominates((0.1, 0.2), (0.1, 1.2))


def test_plot_marks_each_matrix_best_point_with_its_iso_utility_line():
    import matplotlib.pyplot as plt

    from yieldwise import plots

    utilities = {
        "accuracy": UtilityMatrix([[1, 0], [0, 1]], classes=["p", "n"]),
        "screening": UtilityMatrix([[5, -1], [0, 0]], classes=["p", "n"]),
    }
    hull = convex_hull(SCORES, LABELS, positive="p")
    ax = plots.roc_hull({"a": SCORES, "b": hull}, LABELS, utilities, positive="p")
    points = [line for line in ax.lines if line.get_gid() == "best_point"]
    assert len(points) == 4
    for name, u in utilities.items():
        best = hull.best_point(u)
        assert any(
            (line.get_xdata()[0], line.get_ydata()[0]) == (best.fpr, best.tpr) for line in points
        ), name
    assert len([line for line in ax.lines if line.get_gid() == "hull"]) == 2
    # the dashed iso-utility line through each best point has the point's slope, which
    # theory 1.4 gives by hand: N (U[n,n] - U[p,n]) / (P (U[p,p] - U[n,p])), P = N = 5:
    # accuracy (1 - 0) / (1 - 0) = 1; screening (0 - (-1)) / (5 - 0) = 0.2
    lines = [line for line in ax.lines if line.get_gid() == "iso_utility"]
    assert len(lines) == 4  # two classifiers (the same hull) x two matrices
    for name, by_hand in (("accuracy", 1.0), ("screening", 0.2)):
        best = hull.best_point(utilities[name])
        assert best.slope == pytest.approx(by_hand, abs=1e-12)
        through = [line for line in lines if tuple(line.get_xy1()) == (best.fpr, best.tpr)]
        assert len(through) >= 2, name
        for line in through:
            (x1, y1), (x2, y2) = line.get_xy1(), line.get_xy2()
            assert (y2 - y1) / (x2 - x1) == pytest.approx(best.slope, abs=1e-12)
            assert line.get_linestyle() == "--"
        # nothing on the hull lies above that line
        v = hull.vertices
        assert (v["tpr"] <= best.tpr + by_hand * (v["fpr"] - best.fpr) + 1e-12).all()
    plt.close(ax.figure)
