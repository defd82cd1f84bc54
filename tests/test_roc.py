"""Best operating points and classifier comparison by utility yield (theory 1.4)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import sklearn.metrics as skm

import yieldwise
from yieldwise import ConfusionMatrix, UndefinedMetricError, UtilityMatrix, metrics
from yieldwise.roc import (
    OperatingPoint,
    best_operating_point,
    compare,
    convex_hull,
    iso_utility_slope,
    yield_curve,
)

# ------------------------------------------------------------ hand-worked example
# 8 items, 4 "pos" and 4 "neg"; a tie at 0.70 between a positive and a negative.
SCORES = [0.95, 0.85, 0.70, 0.70, 0.55, 0.40, 0.30, 0.10]
TRUTH = ["pos", "pos", "neg", "pos", "neg", "pos", "neg", "neg"]
# Decisions "act"/"skip" are not class labels, so row 0 means "choose classes[0]" = "pos".
#            pos  neg
# act    [[   3,  -2],
# skip    [  -1,   1]]
U = UtilityMatrix([[3, -2], [-1, 1]], decisions=["act", "skip"], classes=["pos", "neg"])
# yield = (3 TP - 2 FP - 1 FN + 1 TN) / 8, with FN = 4 - TP, TN = 4 - FP:
# threshold  TP FP  yield
#   inf       0  0  (0 - 0 - 4 + 4) / 8 = 0
#   0.95      1  0  (3 - 0 - 3 + 4) / 8 = 0.5
#   0.85      2  0  (6 - 0 - 2 + 4) / 8 = 1.0
#   0.70      3  1  (9 - 2 - 1 + 3) / 8 = 1.125
#   0.55      3  2  (9 - 4 - 1 + 2) / 8 = 0.75
#   0.40      4  2  (12 - 4 - 0 + 2) / 8 = 1.25   <- best
#   0.30      4  3  (12 - 6 - 0 + 1) / 8 = 0.875
#   0.10      4  4  (12 - 8 - 0 + 0) / 8 = 0.5
HAND_THRESHOLDS = [np.inf, 0.95, 0.85, 0.70, 0.55, 0.40, 0.30, 0.10]
HAND_YIELDS = [0.0, 0.5, 1.0, 1.125, 0.75, 1.25, 0.875, 0.5]


def test_hand_worked_yield_curve():
    curve = yield_curve(SCORES, TRUTH, U, positive="pos")
    np.testing.assert_array_equal(curve["threshold"], HAND_THRESHOLDS)
    np.testing.assert_allclose(curve["utility_yield"], HAND_YIELDS, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(curve["true_positives"], [0, 1, 2, 3, 3, 4, 4, 4])
    np.testing.assert_array_equal(curve["false_positives"], [0, 0, 0, 1, 2, 2, 3, 4])
    # best achievable 0.5 * 3 + 0.5 * 1 = 2, worst 0.5 * -1 + 0.5 * -2 = -1.5
    np.testing.assert_allclose(
        curve["rescaled_yield"], (np.array(HAND_YIELDS) + 1.5) / 3.5, rtol=0, atol=1e-12
    )


def test_hand_worked_best_point():
    point = best_operating_point(SCORES, TRUTH, U, positive="pos")
    assert isinstance(point, OperatingPoint)
    assert point.threshold == 0.40
    assert point.tpr == 1.0
    assert point.fpr == 0.5
    assert point.utility_yield == pytest.approx(1.25)
    assert point.yield_ == point.utility_yield
    assert point.rescaled_yield == pytest.approx(2.75 / 3.5)
    assert point.positive == "pos"
    assert point.negative == "neg"
    assert point.prevalence == 0.5
    # (U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B) = (1 + 2) 0.5 / ((3 + 1) 0.5)
    assert point.slope == pytest.approx(0.75)
    # rows act/skip, columns pos/neg: act on all 4 positives and 2 negatives
    assert point.confusion == ConfusionMatrix(
        [[4, 2], [0, 2]], decisions=["act", "skip"], classes=["pos", "neg"]
    )
    assert yieldwise.utility_yield(point.confusion, U) == pytest.approx(1.25)
    assert yieldwise.rescaled_yield(point.confusion, U) == pytest.approx(point.rescaled_yield)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.threshold = 0.5  # type: ignore[misc]


def test_ties_go_to_the_highest_threshold():
    u = UtilityMatrix([[1, 0], [0, 1]], decisions=["a", "b"], classes=["a", "b"])
    # yields 0.5, 0.75, 0.5, 0.75, 0.5: thresholds 0.9 and 0.4 tie at 0.75
    point = best_operating_point([0.9, 0.4, 0.6, 0.1], ["a", "a", "b", "b"], u)
    assert point.threshold == 0.9
    # only true negatives count: "nothing positive" ties with deciding the top "a" positive
    only_tn = UtilityMatrix([[0, 0], [0, 1]], decisions=["a", "b"], classes=["a", "b"])
    truth = ["a", "b", "b", "a"]
    np.testing.assert_array_equal(
        yield_curve([0.9, 0.4, 0.6, 0.1], truth, only_tn)["utility_yield"],
        [0.5, 0.5, 0.25, 0.0, 0.0],
    )
    point = best_operating_point([0.9, 0.4, 0.6, 0.1], truth, only_tn)
    assert point.threshold == np.inf
    assert (point.tpr, point.fpr) == (0.0, 0.0)


def test_everything_positive_can_be_best():
    # A negative costs nothing when acted on: acting on everything is best.
    u = UtilityMatrix([[5, 0], [0, 0]], decisions=["act", "skip"], classes=["pos", "neg"])
    point = best_operating_point(SCORES, TRUTH, u, positive="pos")
    # yield = 5 TP / 8 is largest (2.5) from threshold 0.40 on; ties -> highest, 0.40
    assert point.threshold == 0.40
    assert point.utility_yield == pytest.approx(2.5)
    u = UtilityMatrix([[5, 0.1], [0, 0]], decisions=["act", "skip"], classes=["pos", "neg"])
    point = best_operating_point(SCORES, TRUTH, u, positive="pos")
    assert point.threshold == 0.10
    assert (point.tpr, point.fpr) == (1.0, 1.0)


# ------------------------------------------------------------------- brute force
def _random_problem(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    labels = ["yes", "no"]
    truth = rng.choice(labels, size=n)
    truth[:2] = labels  # both classes present
    scores = np.round(rng.normal(size=n) + (truth == "yes") * rng.uniform(-1, 2), 1)
    values = rng.normal(size=(2, 2))
    if seed % 2:
        # decisions named by class, in the opposite order: matched by label
        u = UtilityMatrix(values, decisions=["no", "yes"], classes=["yes", "no"])
    else:
        u = UtilityMatrix(values, decisions=["take", "leave"], classes=["yes", "no"])
    positive = labels[seed % 3 == 0]
    return scores, truth, u, positive


def _brute_force(scores, truth, u, positive):
    """Every threshold, one ConfusionMatrix.from_labels and utility_yield each."""
    negative = next(c for c in u.classes if c != positive)
    if set(u.decisions) == set(u.classes):
        choose = {c: c for c in u.classes}
    else:  # "choose positive": the decision that gains most from a positive item
        frame = u.to_frame()
        lean = {d: frame.loc[d, positive] - frame.loc[d, negative] for d in u.decisions}
        first, second = u.decisions
        if lean[first] == lean[second]:
            choose = dict(zip(u.classes, u.decisions, strict=True))
        else:
            up = max(u.decisions, key=lean.get)
            choose = {positive: up, negative: second if up == first else first}
    thresholds = [np.inf, *sorted(set(scores.tolist()), reverse=True)]
    rows = []
    for t in thresholds:
        decided = np.where(scores >= t, choose[positive], choose[negative])
        cm = ConfusionMatrix.from_labels(
            truth, decided, classes=u.classes, decisions_set=u.decisions
        )
        tp = np.sum((scores >= t) & (truth == positive))
        fp = np.sum((scores >= t) & (truth != positive))
        rows.append(
            (t, tp, fp, yieldwise.utility_yield(cm, u), yieldwise.rescaled_yield(cm, u), cm)
        )
    return rows


@pytest.mark.parametrize("seed", range(40))
def test_brute_force_agrees(seed):
    scores, truth, u, positive = _random_problem(seed)
    rows = _brute_force(scores, truth, u, positive)
    curve = yield_curve(scores, truth, u, positive=positive)
    np.testing.assert_array_equal(curve["threshold"], [r[0] for r in rows])
    np.testing.assert_array_equal(curve["true_positives"], [r[1] for r in rows])
    np.testing.assert_array_equal(curve["false_positives"], [r[2] for r in rows])
    np.testing.assert_allclose(curve["utility_yield"], [r[3] for r in rows], rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve["rescaled_yield"], [r[4] for r in rows], rtol=0, atol=1e-12)

    best = max(r[3] for r in rows)
    expected = next(r for r in rows if r[3] >= best - 1e-12)  # highest threshold among ties
    point = best_operating_point(scores, truth, u, positive=positive)
    assert point.threshold == expected[0]
    assert point.utility_yield == pytest.approx(best, abs=1e-12)
    assert point.confusion.reindex(u.decisions, u.classes) == expected[5]
    n_pos = np.sum(truth == positive)
    assert point.tpr == pytest.approx(expected[1] / n_pos)
    assert point.fpr == pytest.approx(expected[2] / (truth.size - n_pos))


@pytest.mark.parametrize("seed", range(10))
def test_theory_identity_at_every_threshold(seed):
    # yield(f) = (U[p,p] - U[n,p]) B t(f) - (U[n,n] - U[p,n]) (1 - B) f + const,
    # const = U[n,p] B + U[n,n] (1 - B).
    scores, truth, _, positive = _random_problem(seed)
    rng = np.random.default_rng(1000 + seed)
    values = rng.normal(size=(2, 2))
    u = UtilityMatrix(values, decisions=["p", "n"], classes=[positive, "other"])
    truth = np.where(truth == positive, positive, "other")
    curve = yield_curve(scores, truth, u, positive=positive)
    b = np.mean(truth == positive)
    # "choose positive" is the row that gains most from a positive item (column 0)
    (upp, upn), (unp, unn) = values[np.argsort(values[:, 1] - values[:, 0], kind="stable")]
    t, f = curve["tpr"].to_numpy(), curve["fpr"].to_numpy()
    expected = (upp - unp) * b * t - (unn - upn) * (1 - b) * f + unp * b + unn * (1 - b)
    np.testing.assert_allclose(curve["utility_yield"], expected, rtol=0, atol=1e-12)
    # the best point lies on the highest iso-utility line: no point of the curve above it
    point = best_operating_point(scores, truth, u, positive=positive)
    if upp - unp > 0:
        assert np.all(t <= point.tpr + point.slope * (f - point.fpr) + 1e-9)


def test_flipping_positive_and_negating_scores_gives_the_same_best_yield():
    for seed in range(10):
        scores, truth, u, _ = _random_problem(seed)
        a = best_operating_point(scores, truth, u, positive="yes")
        b = best_operating_point(-scores, truth, u, positive="no")
        assert a.utility_yield == pytest.approx(b.utility_yield, abs=1e-12)


# ---------------------------------------------------------- crossing ROC curves
def _crossing():
    # Items p0..p5 positive, n0..n5 negative. Rankings, highest score first:
    #   steady: p0 p1 p2 p3 n0 n1 n2 n3 n4 p4 p5 n5   AUC (4*6 + 2*1) / 36 = 26/36
    #   broad:  n0 p0 p1 p2 p3 p4 n1 p5 n2 n3 n4 n5   AUC (5*5 + 1*4) / 36 = 29/36
    items = [f"p{k}" for k in range(6)] + [f"n{k}" for k in range(6)]
    truth = ["ill" if i[0] == "p" else "healthy" for i in items]
    rankings = {
        "steady": ["p0", "p1", "p2", "p3", "n0", "n1", "n2", "n3", "n4", "p4", "p5", "n5"],
        "broad": ["n0", "p0", "p1", "p2", "p3", "p4", "n1", "p5", "n2", "n3", "n4", "n5"],
    }
    scores = {
        name: np.array([12.0 - order.index(i) for i in items]) for name, order in rankings.items()
    }
    # A false alarm costs 5, a detection gains 1: only the top of the ranking pays.
    u = UtilityMatrix([[1, -5], [0, 0]], decisions=["treat", "wait"], classes=["ill", "healthy"])
    return scores, truth, u


def test_compare_ranks_by_yield_not_auc():
    scores, truth, u = _crossing()
    table = compare(scores, truth, u, positive="ill")
    assert list(table.index) == ["steady", "broad"]
    assert table.index.name == "classifier"
    assert list(table.columns) == [
        "threshold",
        "tpr",
        "fpr",
        "utility_yield",
        "rescaled_yield",
        "auc",
        "rank_by_yield",
        "rank_by_auc",
    ]
    # steady treats its top 4 (all ill): yield 4 / 12. broad's top item is healthy, and
    # 5 - 5 = 0 after the first six: nothing beats treating nobody (yield 0).
    assert table.loc["steady", "utility_yield"] == pytest.approx(4 / 12)
    assert table.loc["steady", "threshold"] == 9.0
    assert (table.loc["steady", "tpr"], table.loc["steady", "fpr"]) == (4 / 6, 0.0)
    assert table.loc["broad", "utility_yield"] == pytest.approx(0.0)
    assert table.loc["broad", "threshold"] == np.inf
    assert table.loc["steady", "auc"] == pytest.approx(26 / 36)
    assert table.loc["broad", "auc"] == pytest.approx(29 / 36)
    assert table["rank_by_yield"].tolist() == [1, 2]
    assert table["rank_by_auc"].tolist() == [2, 1]
    # rescaled: best achievable 0.5 * 1 + 0.5 * 0 = 0.5, worst 0.5 * 0 + 0.5 * -5 = -2.5
    assert table.loc["steady", "rescaled_yield"] == pytest.approx((4 / 12 + 2.5) / 3)
    is_ill = np.array(truth) == "ill"
    for name, s in scores.items():
        assert table.loc[name, "auc"] == pytest.approx(skm.roc_auc_score(is_ill, s))
        assert table.loc[name, "auc"] == pytest.approx(metrics.roc_auc(s, truth, positive="ill"))
        point = best_operating_point(s, truth, u, positive="ill")
        assert table.loc[name, "utility_yield"] == point.utility_yield


def test_compare_accepts_a_dataframe_and_keeps_names():
    scores, truth, u = _crossing()
    frame = pd.DataFrame({"_b $x$": scores["broad"], "s": scores["steady"]})
    table = compare(frame, truth, u, positive="ill")
    assert list(table.index) == ["s", "_b $x$"]
    # when a detection is worth twice a correct all-clear, broad ranks first:
    # steady's best is its top 4 (2*4 + 6) / 12, broad's its top 8 (2*6 + 4) / 12
    u2 = UtilityMatrix([[2, 0], [0, 1]], decisions=["ill", "healthy"], classes=["ill", "healthy"])
    table = compare(scores, truth, u2, positive="ill")
    assert list(table.index) == ["broad", "steady"]
    assert table.loc["broad", "utility_yield"] == pytest.approx(16 / 12)
    assert table.loc["steady", "utility_yield"] == pytest.approx(14 / 12)


def test_compare_ties_share_rank_and_keep_order():
    truth = [0, 0, 1, 1]
    table = compare(
        {"x": [4, 3, 2, 1], "y": [8, 6, 4, 2]}, truth, UtilityMatrix(np.eye(2)), positive=0
    )
    assert list(table.index) == ["x", "y"]
    assert table["rank_by_yield"].tolist() == [1, 1]


# ------------------------------------------------------------ positive labels
def test_positive_defaults_to_the_first_class():
    u = UtilityMatrix([[3, -2], [-1, 1]], decisions=["act", "skip"], classes=["pos", "neg"])
    # string labels: the smallest, "neg" (as metrics.roc_curve)
    default = best_operating_point(SCORES, TRUTH, u)
    assert default.positive == "neg"
    assert metrics.roc_curve(SCORES, TRUTH).positive == "neg"
    assert default == best_operating_point(SCORES, TRUTH, u, positive="neg")
    assert default != best_operating_point(SCORES, TRUTH, u, positive="pos")
    # explicit class order
    assert best_operating_point(SCORES, TRUTH, u, classes=["pos", "neg"]).positive == "pos"
    # pandas Categorical: the first category
    cat = pd.Categorical(TRUTH, categories=["pos", "neg"])
    point = best_operating_point(SCORES, cat, u)
    assert point.positive == "pos"
    assert point.threshold == 0.40
    assert best_operating_point(SCORES, pd.Series(cat), u).positive == "pos"
    # numeric labels: class 0
    u01 = UtilityMatrix([[3, -2], [-1, 1]])
    truth01 = [0 if t == "pos" else 1 for t in TRUTH]
    with pytest.warns(UserWarning, match="positive defaults to the first class, 0"):
        point = best_operating_point(SCORES, np.array(truth01), u01)
    assert point.positive == 0
    assert point.utility_yield == pytest.approx(1.25)
    assert best_operating_point(SCORES, truth01, u01, positive=np.int64(0)).positive == 0


def test_decisions_matched_by_label():
    values = np.array([[3.0, -2.0], [-1.0, 1.0]])
    by_position = UtilityMatrix(values, decisions=["pos", "neg"], classes=["pos", "neg"])
    # same matrix with rows listed in the other order: same result
    swapped = UtilityMatrix(values[::-1], decisions=["neg", "pos"], classes=["pos", "neg"])
    a = best_operating_point(SCORES, TRUTH, by_position, positive="pos")
    b = best_operating_point(SCORES, TRUTH, swapped, positive="pos")
    assert a.utility_yield == pytest.approx(1.25)
    assert (a.threshold, a.utility_yield) == (b.threshold, b.utility_yield)
    assert b.confusion.decisions == ("neg", "pos")
    assert yieldwise.utility_yield(b.confusion, swapped) == pytest.approx(1.25)


def test_iso_utility_slope():
    # (U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B) = (1 + 2) 0.75 / ((3 + 1) 0.25)
    assert iso_utility_slope(U, 0.25) == pytest.approx(2.25)
    assert iso_utility_slope(U, 0.25, positive="neg") == pytest.approx(4 * 0.75 / (3 * 0.25))
    flat = UtilityMatrix([[1, 0], [1, 1]])
    assert iso_utility_slope(flat, 0.5) == np.inf
    with pytest.raises(ValueError, match="prevalence must lie strictly between 0 and 1"):
        iso_utility_slope(U, 1.0)


def test_large_input_is_fast():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 2, 200_000)
    scores = rng.normal(size=truth.size) + truth
    point = best_operating_point(scores, truth, UtilityMatrix([[2, -1], [0, 0]]), positive=1)
    assert 0 < point.tpr < 1


# ------------------------------------------------------------------- errors
def test_errors():
    with pytest.raises(ValueError, match=r"binary \(2x2\) utility matrix.*found shape \(3, 2\)"):
        best_operating_point(
            SCORES, TRUTH, UtilityMatrix([[1, 0], [0, 1], [0.5, 0.5]], classes=["pos", "neg"])
        )
    with pytest.raises(TypeError, match="utility must be a UtilityMatrix, found ndarray"):
        best_operating_point(SCORES, TRUTH, np.eye(2))
    bad = list(SCORES)
    bad[3] = np.nan
    with pytest.raises(ValueError, match=r"scores must be finite.*index \(3,\)"):
        best_operating_point(bad, TRUTH, U)
    with pytest.raises(ValueError, match=r"one label per score \(7\), found 8"):
        best_operating_point(SCORES[:7], TRUTH, U)
    with pytest.raises(ValueError, match=r"holds label\(s\) \['maybe'\].*\['pos', 'neg'\]"):
        best_operating_point(SCORES, [*TRUTH[:7], "maybe"], U)
    with pytest.raises(ValueError, match=r"positive 'ill' is not among"):
        best_operating_point(SCORES, TRUTH, U, positive="ill")
    with pytest.raises(ValueError, match=r"classes \['pos', 'other'\] must be the utility"):
        best_operating_point(SCORES, TRUTH, U, classes=["pos", "other"])
    with pytest.raises(UndefinedMetricError, match="no negative items"):
        best_operating_point(SCORES, ["pos"] * 8, U, positive="pos")
    with pytest.raises(ValueError, match="same value for each class"):
        best_operating_point(SCORES, TRUTH, UtilityMatrix([[1, 0], [1, 0]], classes=["pos", "neg"]))
    with pytest.raises(ValueError, match=r"scores must be 1-dimensional, found shape \(8, 2\)"):
        best_operating_point(np.ones((8, 2)), TRUTH, U)


def test_compare_errors():
    with pytest.raises(TypeError, match="scores must be a mapping"):
        compare([SCORES], TRUTH, U)
    with pytest.raises(ValueError, match="scores is empty"):
        compare({}, TRUTH, U)
    bad = list(SCORES)
    bad[0] = np.inf
    with pytest.raises(ValueError, match=r"scores\['B'\] must be finite"):
        compare({"A": SCORES, "B": bad}, TRUTH, U)
    with pytest.raises(ValueError, match=r"scores\['A'\] and true_classes must have the same"):
        compare({"A": SCORES[:5]}, TRUTH, U)


def test_rows_listed_in_the_other_order_give_the_same_curve():
    """A matrix whose rows are listed in the other order ("skip" first) means the same
    problem: "choose positive" is the row whose advantage grows with P(positive), so the
    hand-worked yields above come out unchanged (before, row 0 was taken to mean "choose
    pos" and the best point was the worst rule's). Rows that differ by a constant keep
    their positions: one decision is best at every threshold."""
    swapped = UtilityMatrix([[-1, 1], [3, -2]], decisions=["skip", "act"],
                            classes=["pos", "neg"])  # fmt: skip
    curve = yield_curve(SCORES, TRUTH, swapped, positive="pos")
    np.testing.assert_allclose(curve["utility_yield"], HAND_YIELDS, rtol=0, atol=1e-12)
    point = best_operating_point(SCORES, TRUTH, swapped, positive="pos")
    assert (point.threshold, point.utility_yield) == (0.40, 1.25)
    assert point.confusion.to_frame().loc["act"].tolist() == [4, 2]  # TP 4, FP 2
    # "act" yields 1 more than "skip" for either class: everything "act" is best
    shifted = UtilityMatrix([[1, 0], [2, 1]], decisions=["skip", "act"], classes=["pos", "neg"])
    point = best_operating_point(SCORES, TRUTH, shifted, positive="pos")
    assert point.utility_yield == pytest.approx((4 * 2 + 4 * 1) / 8)


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e7, 1e9, 1e12])
def test_a_shift_of_the_utilities_keeps_the_best_threshold(offset):
    """U + b ranks thresholds as U does (theory 1). The tie tolerance was 1e-12 max|U|:
    at b = 1e9 it spanned a whole 1/4000 of accuracy, and U = I + 1e9 picked accuracy
    0.70175 where the best is 0.70275. Brute force: accuracy at every threshold."""
    rng = np.random.default_rng(0)
    n = 4000
    truth = rng.integers(0, 2, n)
    scores = truth + rng.normal(size=n)
    thresholds = np.r_[np.inf, np.unique(scores)[::-1]]
    accuracy = np.array([np.mean((scores >= t) == (truth == 1)) for t in thresholds])
    best = int(np.flatnonzero(accuracy == accuracy.max())[0])  # highest threshold of ties
    point = best_operating_point(scores, truth, UtilityMatrix(np.eye(2) + offset), positive=1)
    assert point.threshold == thresholds[best]
    assert np.mean((scores >= point.threshold) == (truth == 1)) == accuracy.max() == 0.70275
    assert point.rescaled_yield == pytest.approx(accuracy.max(), abs=1e-12)
    # the yield itself carries the shift (to the precision a number near b has)
    assert point.utility_yield == pytest.approx(offset + accuracy.max(), rel=1e-15, abs=1e-12)
    hull = convex_hull(scores, truth, positive=1)
    assert hull.best_point(UtilityMatrix(np.eye(2) + offset)).utility_yield == pytest.approx(
        point.utility_yield, rel=1e-15, abs=1e-12
    )


def test_convex_hull_names_its_two_class_limit_before_the_default_positive():
    for positive in (None, "a"):
        with pytest.raises(ValueError, match=r"convex_hull needs two classes, found 3"):
            convex_hull([0.1, 0.2, 0.3], ["a", "b", "c"], positive=positive)


def test_decide_and_the_best_operating_point_share_one_tie_rule():
    """decide (expected utilities per item) and best_operating_point (yields per
    threshold) tie by one rule (yieldwise.utility.near_best). Two items scored 0.5, one
    of each class; acting on both gains gap / 2 per item over waiting, by hand: (1 + gap)
    for the positive, -1 for the negative, halved. With gap = 4e-11 that is 1e-11 of the
    spread 2 + gap: a real advantage, but decision.py (tolerance 1e-10) called it a tie
    and waited while roc.py (1e-12) acted. At gap = 0, an exact tie, shifted by 1e9, both
    wait ("wait" is listed first; ties go to the highest threshold)."""
    from yieldwise import decide

    scores = np.array([0.5, 0.5])
    truth = [1, 0]
    probabilities = np.column_stack([scores, 1 - scores])  # columns: classes 1, 0
    for gap, shift, expected in ((4e-11, 0.0, "act"), (0.0, 1e9, "wait")):
        u = UtilityMatrix(
            np.array([[0, 0], [1 + gap, -1]]) + shift, decisions=["wait", "act"], classes=[1, 0]
        )
        point = best_operating_point(scores, truth, u, positive=1)
        by_threshold = np.where(scores >= point.threshold, "act", "wait")
        assert by_threshold.tolist() == [expected] * 2
        assert decide(probabilities, u, tie="first").tolist() == [expected] * 2


def _hull_and_decide_agree(scores, truth, a, c):
    """Decisions on the hull's calibrated probabilities (decide, "wait" first on ties)
    are the best hull vertex's, for U = [[0, c], [a, 0]] (wait gains c on a negative,
    act gains a on a positive) and U + 1e9; whether a bin sat at the decision threshold
    c / (a + c)."""
    from yieldwise import decide

    hull = convex_hull(scores, truth, positive=1)
    p = hull.calibrated
    for shift in (0.0, 1e9):
        u = UtilityMatrix(np.array([[0, c], [a, 0]]) + shift, decisions=["wait", "act"],
                          classes=[1, 0])  # fmt: skip
        threshold = hull.best_point(u).threshold
        assert best_operating_point(scores, truth, u, positive=1).threshold == threshold
        chosen = decide(np.column_stack([p, 1 - p]), u, tie="first")
        assert chosen.tolist() == np.where(scores >= threshold, "act", "wait").tolist()
    return bool(np.isin(hull.bins["probability"], [c / (a + c)]).any())


def test_decide_on_hull_probabilities_picks_the_best_hull_vertex_ties_included():
    """The hull's calibrated probabilities, decided on item by item, act on exactly the
    items above the best vertex's threshold (theory 1.4): bins whose probability is the
    decision threshold c / (a + c) tie in both modules and go to "wait" in both (listed
    first; highest threshold), with U + 1e9 too.

    By hand first: a bin of 5 items with 4 positives under a = 1, c = 4 gains
    4 * 1 - 1 * 4 = 0 (exact in roc's counts), but in floats "act" expects 1 * 0.8 = 0.8
    and "wait" 4 * (1 - 0.8) = 0.7999999999999998 (each one product, the other term
    is 0 * p: no order of summation or fused multiply-add changes them): a tie within
    rounding, which decide must see as roc does. Then random small problems, where such
    bins are frequent."""
    scores = np.r_[2.0, np.ones(5), 0.0]
    truth = np.r_[1, 1, 1, 1, 1, 0, 0]
    assert convex_hull(scores, truth, positive=1).bins["probability"].tolist() == [1, 0.8, 0]
    assert 1 * 0.8 > 4 * (1 - 0.8)  # "act" ahead by rounding alone
    assert _hull_and_decide_agree(scores, truth, 1, 4)
    rng = np.random.default_rng(11)
    ties = 0
    for _ in range(300):
        n = int(rng.integers(4, 16))
        truth = rng.integers(0, 2, n)
        if truth.min() == truth.max():
            continue
        scores = np.round(truth * rng.uniform(0, 1) + rng.normal(size=n), 0)
        a, c = (int(x) for x in rng.integers(1, 6, size=2))
        ties += _hull_and_decide_agree(scores, truth, a, c)
    assert ties > 20  # the rule was exercised, not only clear-cut bins
