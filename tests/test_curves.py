"""Cost curves and Brier curves: hand-worked values, their area identities, and yields."""

from __future__ import annotations

import numpy as np
import pytest

from yieldwise import UndefinedMetricError, UtilityMatrix, metrics
from yieldwise.curves import (
    BrierCurve,
    CostCurve,
    brier_curve,
    cost_curve,
    operating_condition,
)
from yieldwise.roc import best_operating_point, convex_hull, yield_curve
from yieldwise.utility import chart_matrices


def _problem(seed, n_max=80):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, n_max))
    truth = rng.integers(0, 2, n)
    truth[:2] = [0, 1]
    scores = np.round(rng.normal(size=n) + truth * rng.uniform(-1, 2), int(rng.integers(0, 3)))
    return scores, truth


def _probabilities(seed, n_max=80):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, n_max))
    truth = rng.integers(0, 2, n)
    truth[:2] = [0, 1]
    p = np.clip(np.round(rng.beta(2 + truth, 3 - truth), int(rng.integers(1, 4))), 0, 1)
    p[rng.random(n) < 0.05] = 0.0  # exact 0s and 1s are allowed
    p[rng.random(n) < 0.05] = 1.0
    return p, truth


# ------------------------------------------------------------------ Brier curves
def test_brier_curve_by_hand():
    # negatives at 0.1 and 0.5, positives at 0.5 and 0.8 (a tie at 0.5); N = 4.
    # Q(c) = (2/4) [c #(neg with p > c) + (1 - c) #(pos with p <= c)]
    #   c in (0, 0.1):   both negatives are false alarms: Q = c
    #   c in [0.1, 0.5): one negative: Q = c / 2
    #   c in [0.5, 0.8): the negative at 0.5 stops, the positive at 0.5 is missed:
    #                    Q = (1 - c) / 2
    #   c in [0.8, 1]:   both positives missed: Q = 1 - c
    curve = brier_curve([0.1, 0.5, 0.5, 0.8], ["n", "n", "p", "p"], positive="p")
    assert isinstance(curve, BrierCurve)
    np.testing.assert_allclose(curve.frame["cost_proportion"], [0, 0.1, 0.1, 0.5, 0.5, 0.8, 0.8, 1])
    np.testing.assert_allclose(curve.frame["loss"], [0, 0.1, 0.05, 0.25, 0.25, 0.1, 0.2, 0])
    np.testing.assert_allclose(
        curve.at([0.05, 0.1, 0.3, 0.5, 0.6, 0.9]), [0.05, 0.05, 0.15, 0.25, 0.2, 0.1]
    )
    # area = (0.1^2 + 0.5^2 + 0.5^2 + 0.2^2) / 4 = 0.55 / 4
    assert curve.area == pytest.approx(0.1375, abs=1e-15)
    assert (curve.positive, curve.negative, curve.prevalence) == ("p", "n", 0.5)


@pytest.mark.parametrize("positive", [None, "a", "c"])
def test_three_classes_are_refused_by_name_as_not_two_before_asking_for_positive(positive):
    """brier_curve with three classes said "positive= is needed with more than two
    classes" when positive was left out, as if passing it would help; the rule it breaks
    is the number of classes (binary_truth's two_classes=, as convex_hull does). The
    cost curve (built on the hull) named convex_hull, which the user did not call."""
    truth = ["a", "b", "c", "a"]
    for curve, values in ((brier_curve, [0.1, 0.4, 0.6, 0.9]), (cost_curve, [1, 2, 3, 4])):
        name = curve.__name__
        with pytest.raises(ValueError) as error:
            curve(values, truth, positive=positive)
        assert str(error.value) == (
            f"{name} needs two classes, found 3: ['a', 'b', 'c']; relabel the classes as "
            "the positive one and the rest"
        )
        with pytest.raises(ValueError, match=rf"^{name} needs two classes, found 1: \['a'\]"):
            curve(values, ["a"] * 4, positive=positive if positive == "a" else None)


@pytest.mark.parametrize("seed", range(40))
def test_brier_curve_area_is_the_brier_score(seed):
    p, truth = _probabilities(seed)
    curve = brier_curve(p, truth, positive=1)
    assert curve.area == pytest.approx(metrics.brier(p, truth, positive=1), abs=1e-12)
    # the curve by brute force, item by item, at points between and on the breakpoints
    c = np.r_[np.linspace(0, 1, 101), np.unique(p)]
    losses = [2 * np.mean(np.where(truth == 0, ci * (p > ci), (1 - ci) * (p <= ci))) for ci in c]
    np.testing.assert_allclose(curve.at(c), losses, rtol=0, atol=1e-12)
    # the frame is the curve: every row's loss is a limit of Q at its cost proportion
    frame = curve.frame.to_numpy()
    for (x0, y0), (x1, y1) in zip(frame[::2], frame[1::2], strict=True):
        if x1 > x0:
            mid = (x0 + x1) / 2
            assert curve.at(mid) == pytest.approx((y0 + y1) / 2, abs=1e-12)


# ------------------------------------------------------------------- cost curves
def _brute_envelope(scores, truth, x, axis):
    """The minimum over every threshold's line, each ROC point counted by hand."""
    b = truth.mean()
    heights = []
    for t in np.r_[np.inf, np.unique(scores)]:
        tpr = np.mean(scores[truth == 1] >= t)
        fpr = np.mean(scores[truth == 0] >= t)
        if axis == "probability_cost":
            heights.append((1 - tpr) * x + fpr * (1 - x))
        else:
            heights.append(2 * (x * (1 - b) * fpr + (1 - x) * b * (1 - tpr)))
    return np.min(heights, axis=0)


@pytest.mark.parametrize("axis", ["probability_cost", "cost_proportion"])
@pytest.mark.parametrize("seed", range(25))
def test_lower_envelope_is_the_hulls(seed, axis):
    scores, truth = _problem(seed)
    curve = cost_curve(scores, truth, positive=1, axis=axis)
    assert isinstance(curve, CostCurve)
    x = np.linspace(0, 1, 2001)
    np.testing.assert_allclose(
        curve.at(x), _brute_envelope(scores, truth, x, axis), rtol=0, atol=1e-12
    )
    # the envelope's lines are the hull vertices' lines: nothing else is ever optimal
    hull = convex_hull(scores, truth, positive=1)
    on_hull = set(zip(hull.vertices["fpr"], hull.vertices["tpr"], strict=True))
    assert set(zip(curve.frame["fpr"], curve.frame["tpr"], strict=True)) <= on_hull
    # the area, by the trapezoid rule on a fine grid (the envelope is piecewise linear)
    fine = np.linspace(0, 1, 200_001)
    assert curve.area == pytest.approx(
        np.trapezoid(_brute_envelope(scores, truth, fine, axis), fine), abs=1e-8
    )


@pytest.mark.parametrize("seed", range(25))
def test_calibrated_brier_curve_is_the_cost_curve(seed):
    """With the hull's isotonic probabilities, "threshold at c" is the best threshold."""
    scores, truth = _problem(seed)
    hull = convex_hull(scores, truth, positive=1)
    cost = cost_curve(scores, truth, positive=1, axis="cost_proportion")
    calibrated = brier_curve(hull.calibrated, truth, positive=1)
    c = np.r_[np.linspace(0, 1, 501), hull.bins["probability"]]
    np.testing.assert_allclose(calibrated.at(c), cost.at(c), rtol=0, atol=1e-12)
    assert calibrated.area == pytest.approx(cost.area, abs=1e-12)
    # so the cost-proportion cost curve's area is the Brier score after calibration, and
    # any other probabilities with the same ranking lie on or above it
    assert cost.area == pytest.approx(metrics.brier(hull.calibrated, truth, positive=1))
    raw = brier_curve(1 / (1 + np.exp(-scores)), truth, positive=1)
    assert np.all(raw.at(c) >= cost.at(c) - 1e-12)


def test_cost_curve_by_hand_on_the_cost_proportion_axis():
    # positives at 0.9, 0.8, 0.6 and a negative at 0.7: hull vertices (0,0), (0,2/3),
    # (1,1); B = 3/4. Lines Q = 2 [c (1/4) FPR + (1 - c) (3/4) FNR]:
    #   (0,0): 1.5 (1 - c); (0,2/3): 0.5 (1 - c); (1,1): 0.5 c.
    # From c = 0 the last vertex is best until 0.5 c = 0.5 (1 - c), c = 1/2 (the hull's
    # bin probability 1/2: one positive and one negative), then (0, 2/3) to c = 1.
    curve = cost_curve([0.9, 0.8, 0.7, 0.6], [1, 1, 0, 1], positive=1, axis="cost_proportion")
    np.testing.assert_allclose(curve.frame["x"], [0, 0.5, 1])
    np.testing.assert_allclose(curve.frame["cost"], [0, 0.25, 0])
    # the last row is the end point c = 1, where "nothing positive" (0, 0) is optimal too
    np.testing.assert_allclose(curve.frame["tpr"], [1, 2 / 3, 0])
    assert curve.area == pytest.approx(0.125)
    np.testing.assert_allclose(curve.lines["at_0"], 1.5 * (1 - curve.lines["tpr"]))


# ------------------------------------------------------ conditions and yields
def _chart(n, seed, classes):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-1, 1, size=(n, 2))
    keep = (np.abs(xy[:, 0]) != np.abs(xy[:, 1])) & (np.abs(xy).max(axis=1) < 1)
    keep &= ~((xy[:, 0] < 0) & (xy[:, 1] > 1 + xy[:, 0]))
    keep &= ~((xy[:, 0] > 0) & (-xy[:, 1] > 1 - xy[:, 0]))
    values = chart_matrices(xy[keep, 0], xy[keep, 1])
    return [UtilityMatrix(v, decisions=classes, classes=classes) for v in values]


@pytest.mark.parametrize("seed", range(8))
def test_curve_heights_are_regrets_under_each_utility_matrix(seed):
    scores, truth = _problem(seed)
    b = truth.mean()
    curves = {axis: cost_curve(scores, truth, positive=1, axis=axis)
              for axis in ("probability_cost", "cost_proportion")}  # fmt: skip
    for u in _chart(30, seed, classes=[1, 0]):
        oc = operating_condition(u, b, positive=1)
        yields = yield_curve(scores, truth, u, positive=1)
        best = best_operating_point(scores, truth, u, positive=1).utility_yield
        for axis, curve in curves.items():
            x = getattr(oc, axis)
            line = curve.lines["at_0"] * (1 - x) + curve.lines["at_1"] * x
            np.testing.assert_allclose(
                oc.utility_yield(line.to_numpy(), axis), yields["utility_yield"], atol=1e-12
            )
            assert oc.utility_yield(curve.at(x), axis) == pytest.approx(best, abs=1e-12)


def test_operating_condition_by_hand_and_errors():
    u = UtilityMatrix([[0, -10], [-1, 5]], decisions=["h", "i"], classes=["h", "i"])
    # positive "i": C_FN = U[i,i] - U[h,i] = 15, C_FP = U[h,h] - U[i,h] = 1
    oc = operating_condition(u, 0.1, positive="i")
    assert (oc.cost_fn, oc.cost_fp) == (15.0, 1.0)
    assert oc.cost_proportion == pytest.approx(1 / 16)  # the theory-2 threshold
    assert oc.cost_proportion == pytest.approx(u.threshold())
    assert oc.probability_cost == pytest.approx(1.5 / 2.4)
    assert oc.max_yield == pytest.approx(0.1 * 5 + 0.9 * 0)
    with pytest.raises(ValueError, match="strictly between 0 and 1, found 1"):
        operating_condition(u, 1)
    wrong = UtilityMatrix([[0, 1], [1, 0]], decisions=["h", "i"], classes=["h", "i"])
    with pytest.raises(ValueError, match="no place for a negative cost"):
        operating_condition(wrong, 0.5)
    with pytest.raises(ValueError, match="axis must be one of"):
        oc.utility_yield(0.1, axis="skew")


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"probabilities must lie in \[0, 1\], found \[-1.0"):
        brier_curve([-1.0, 0.5], [0, 1])
    with pytest.raises(UndefinedMetricError, match="no positive items"):
        brier_curve([0.2, 0.5], [0, 0], positive=1, classes=[0, 1])
    with pytest.raises(ValueError, match="axis must be one of"):
        cost_curve([1, 2], [0, 1], positive=1, axis="skew")
    with pytest.raises(ValueError, match=r"x must lie in \[0, 1\]"):
        cost_curve([1, 2], [0, 1], positive=1).at(1.5)


def test_plot_refuses_mixed_axes_and_marks_conditions():
    import matplotlib.pyplot as plt

    from yieldwise import plots

    truth = [1, 1, 0, 1, 0, 0]
    pc = cost_curve([6, 5, 4, 3, 2, 1], truth, positive=1)
    brier = brier_curve([0.9, 0.8, 0.7, 0.5, 0.3, 0.2], truth, positive=1)
    with pytest.raises(ValueError, match="mixes probability-cost cost curves"):
        plots.cost_curves({"a": pc, "b": brier})
    u = UtilityMatrix([[1, 0], [0, 1]], decisions=[1, 0], classes=[1, 0])
    ax = plots.cost_curves({"a": pc}, {"accuracy": u})
    (line,) = [line for line in ax.lines if line.get_gid() == "condition"]
    assert line.get_xdata()[0] == pytest.approx(0.5)  # B = 1/2, equal costs
    plt.close(ax.figure)


def test_true_labels_keyword_is_true_classes_not_labels():
    """convex_hull, cost_curve and brier_curve take the labels as ``true_classes``
    (docs/toolkit.md, "Argument names"); ``labels=`` is refused, not aliased.

    The documented example, by hand. Scores p 0.9, n 0.7, p 0.4, n 0.2 (P = N = 2):
    ROC points (0, 0) (0, 1/2) (1/2, 1/2) (1/2, 1) (1, 1); the hull drops (1/2, 1/2),
    so AUCH = 1/2 (1/2 + 1) / 2 + 1/2 = 7/8. Brier curve area = Brier score
    ((1 - 0.8)^2 + 0.3^2) / 2 = 0.065.
    """
    import re
    from pathlib import Path

    from yieldwise.curves import brier_curve, cost_curve

    text = (Path(__file__).resolve().parents[1] / "docs" / "toolkit.md").read_text()
    block = re.search(r"\*\*Argument names\.\*\*.*?```python\n(.*?)```", text, re.DOTALL)
    namespace: dict = {}
    exec(block.group(1), namespace)
    assert namespace["hull"].auc == pytest.approx(7 / 8)
    assert namespace["curve"].area == pytest.approx(0.065)
    scores, truth = [0.9, 0.7, 0.4, 0.2], ["p", "n", "p", "n"]
    assert convex_hull(scores, truth, positive="p").auc == namespace["hull"].auc
    by_keyword = cost_curve(scores, true_classes=truth, positive="p")
    assert by_keyword.area == cost_curve(scores, truth, positive="p").area
    for function, values, labels in (
        (convex_hull, scores, truth),
        (cost_curve, scores, truth),
        (brier_curve, [0.8, 0.3], [1, 0]),
    ):
        with pytest.raises(TypeError, match="labels"):
            function(values, labels=labels, positive=labels[0])
