"""Label handling shared by every module: class order, tuple labels, labelled tables."""

import numpy as np
import pandas as pd
import pytest

from yieldwise import ConfusionMatrix, UtilityMatrix, decide, metrics, roc
from yieldwise._validation import label_values, object_array, sorted_unique


def _hand_counts(truth, chosen, classes, decisions):
    """Confusion counts by a double loop over the labels (independent of the package)."""
    counts = np.zeros((len(decisions), len(classes)))
    for t, d in zip(truth, chosen, strict=True):
        counts[decisions.index(d), classes.index(t)] += 1
    return counts


# ------------------------------------------------------------------ class order
def test_orderable_labels_sort_as_numbers_whatever_their_kind():
    # numpy and Python ints, floats and bools order among themselves (True < 2)
    values = label_values(np.array([3, 1, 2]), "x")
    assert sorted_unique(values, object_array([np.int64(0), 2.5])) == (0, 1, 2, 2.5, 3)
    assert sorted_unique(label_values([np.bool_(True), False, True], "x")) == (False, True)
    assert sorted_unique(label_values([True, 2, False], "x")) == (False, True, 2)
    assert sorted_unique(label_values(["b", "a", "b"], "x")) == ("a", "b")
    assert sorted_unique(label_values([(2, 1), (1, 5)], "x")) == ((1, 5), (2, 1))


@pytest.mark.parametrize(
    ("labels", "types"),
    [
        ([0, 0, "x", "x"], r"int \(e.g. 0\), str \(e.g. 'x'\)"),
        (["x", 0], r"int \(e.g. 0\), str \(e.g. 'x'\)"),
        ([1.5, (1, 2)], r"float \(e.g. 1.5\), tuple \(e.g. \(1, 2\)\)"),
        # frozensets sort without complaint, but only by inclusion: no total order
        ([frozenset({1}), frozenset({2})], r"frozenset"),
    ],
)
def test_unorderable_labels_have_no_first_class(labels, types):
    truth = label_values(labels, "true_classes")
    with pytest.raises(ValueError, match=rf"the labels in true_classes cannot be sorted "
                                         rf"\(types found: {types}.*; pass classes="):  # fmt: skip
        sorted_unique(truth, name="true_classes", remedy="pass classes=")
    # where the order cannot matter the caller may take first-seen order
    assert sorted_unique(truth, fallback=True) == tuple(dict.fromkeys(labels))


def test_mixed_labels_raise_instead_of_taking_the_order_of_the_data():
    """The audit's case: precision was 2/3 or 1/2 depending on the order of the items."""
    t = [0, 0, 0, "x", "x"]
    d = [0, 0, "x", "x", 0]
    for truth, chosen in ((t, d), (t[3:] + t[:3], d[3:] + d[:3])):
        with pytest.raises(ValueError, match=r"true_classes and decisions cannot be sorted.*"
                                             r"int .*str .*pass classes="):  # fmt: skip
            ConfusionMatrix.from_labels(truth, chosen)
        # with the order given, the table is the hand count, whatever the item order
        cm = ConfusionMatrix.from_labels(truth, chosen, classes=["x", 0])
        np.testing.assert_array_equal(cm.counts, _hand_counts(truth, chosen, ["x", 0], ["x", 0]))
        # class "x" positive: TP = 1 ("x" decided on an "x"), FP = 1 ("x" decided on a 0)
        assert metrics.precision(cm) == 0.5
        assert metrics.precision(cm, positive=0) == 2 / 3  # TP 2, FP 1


def test_mixed_labels_in_score_metrics_need_positive():
    s = np.array([0.9, 0.8, 0.3, 0.1])
    for scores, truth in ((s, [0, 0, "yes", "yes"]), (s[::-1], ["yes", "yes", 0, 0])):
        for metric in (metrics.roc_auc, metrics.average_precision, metrics.pr_gain_auc):
            with pytest.raises(ValueError, match=r"true_classes cannot be sorted.*pass positive="):
                metric(scores, truth)
        # the two positives score above both negatives (0): every pair ordered right
        assert metrics.roc_auc(scores, truth, positive=0) == 1.0
        assert metrics.roc_auc(scores, truth, positive="yes") == 0.0
        assert metrics.roc_auc(scores, truth, classes=[0, "yes"]) == 1.0
    with pytest.raises(ValueError, match=r"true_classes cannot be sorted.*pass classes="):
        metrics.log_loss([[0.8, 0.2], [0.3, 0.7]], [0, "yes"])
    assert metrics.log_loss([[0.8, 0.2], [0.3, 0.7]], [0, "yes"], classes=[0, "yes"]) == (
        pytest.approx(-(np.log(0.8) + np.log(0.7)) / 2)
    )


def test_mixed_labels_in_roc_need_positive():
    u = UtilityMatrix(np.eye(2), decisions=[0, "yes"], classes=[0, "yes"])
    s = [0.9, 0.8, 0.3, 0.1]
    with pytest.raises(ValueError, match=r"true_classes \(the utility matrix's classes\) "
                                         r"cannot be sorted.*pass positive="):  # fmt: skip
        roc.best_operating_point(s, [0, 0, "yes", "yes"], u)
    # positive 0: deciding 0 for the top two items classifies all four right
    point = roc.best_operating_point(s, [0, 0, "yes", "yes"], u, positive=0)
    assert (point.threshold, point.utility_yield) == (0.8, 1.0)
    point = roc.best_operating_point(s, [0, 0, "yes", "yes"], u, classes=["yes", 0])
    # "yes" positive: its items score lowest, so nothing beats deciding all one way
    # (0.5, first at threshold inf: ties go to the highest threshold)
    assert (point.positive, point.threshold, point.utility_yield) == ("yes", np.inf, 0.5)


# ------------------------------------------------------------------ tuple labels
def test_tuple_labels_work_in_confusion_matrices_and_metrics():
    """A Series of pairs is one label per item (it was read as a 2-D table: "found 400")."""
    truth = pd.Series([(1, 2), (3, 4), (1, 2), (1, 2), (3, 4)])
    chosen = [(1, 2), (1, 2), (1, 2), (3, 4), (3, 4)]
    cm = ConfusionMatrix.from_labels(truth, chosen)
    assert cm.classes == cm.decisions == ((1, 2), (3, 4))
    np.testing.assert_array_equal(
        cm.counts, _hand_counts(truth.tolist(), chosen, [(1, 2), (3, 4)], [(1, 2), (3, 4)])
    )
    assert ConfusionMatrix(cm.to_frame()) == cm  # to_frame keeps pairs as labels
    assert metrics.precision(cm) == 2 / 3  # (1, 2) decided 3 times, right twice
    assert metrics.recall(cm, positive=(3, 4)) == 1 / 2
    # labels as long as the data (two pairs) and triples
    assert ConfusionMatrix.from_labels([(1, 2), (3, 4)], [(3, 4), (3, 4)]).counts.tolist() == [
        [0.0, 0.0],
        [1.0, 1.0],
    ]
    triples = ConfusionMatrix.from_labels([(1, 2, 3), (4, 5, 6), (1, 2, 3)], [(1, 2, 3)] * 3)
    assert triples.classes == ((1, 2, 3), (4, 5, 6))
    assert triples.counts.tolist() == [[2.0, 1.0], [0.0, 0.0]]


def test_tuple_labels_in_scores_utilities_and_decisions():
    truth = [(1, 2), (3, 4), (1, 2), (1, 2), (3, 4)]
    scores = [0.9, 0.8, 0.3, 0.1, 0.5]
    # positives (1, 2) at 0.9, 0.3, 0.1; negatives at 0.8, 0.5: 2 of 6 pairs ordered right
    assert metrics.roc_auc(scores, truth) == pytest.approx(2 / 6)
    assert metrics.roc_auc(scores, truth, positive=(3, 4)) == pytest.approx(4 / 6)
    labels = [(1, 2), (3, 4)]
    u = UtilityMatrix(np.eye(2), decisions=labels, classes=labels)
    assert UtilityMatrix(u.to_frame()) == u
    chosen = decide(np.array([[0.2, 0.8], [0.9, 0.1]]), u)
    assert chosen.shape == (2,) and chosen.tolist() == [(3, 4), (1, 2)]
    cm = ConfusionMatrix.from_probabilities(np.array([[0.2, 0.8], [0.9, 0.1]]), chosen, u)
    np.testing.assert_array_equal(cm.counts, np.eye(2))
    assert roc.best_operating_point(scores, truth, u, positive=(1, 2)).threshold == 0.9


def test_tables_and_unhashable_labels_are_refused_by_name():
    with pytest.raises(ValueError, match=r"true_classes must be 1-dimensional .*found a list"):
        ConfusionMatrix.from_labels([[0, 1], [1, 0], [0, 0]], [0, 1, 0])
    with pytest.raises(ValueError, match=r"decisions must be 1-dimensional, found shape \(3, 2\)"):
        ConfusionMatrix.from_labels([0, 1, 0], np.zeros((3, 2)))
    with pytest.raises(TypeError, match=r"true_classes must hold hashable labels.*set"):
        ConfusionMatrix.from_labels([{1}, {2}], [0, 1])


# -------------------------------------------------------------- labelled tables
@pytest.mark.parametrize("make", [UtilityMatrix, ConfusionMatrix])
def test_duplicated_dataframe_labels_are_named(make):
    frame = pd.DataFrame([[1, 0], [0, 1]], index=["a", "a"], columns=["x", "y"])
    with pytest.raises(ValueError, match=r"index \(its decisions\) must be unique labels, found "
                                         r"duplicates \['a'\]"):  # fmt: skip
        make(frame)
    frame = pd.DataFrame([[1, 0, 2], [0, 1, 3]], index=["a", "b"], columns=["x", "y", "x"])
    with pytest.raises(ValueError, match=r"columns \(its classes\) must be unique labels, found "
                                         r"duplicates \['x'\]"):  # fmt: skip
        make(frame)
