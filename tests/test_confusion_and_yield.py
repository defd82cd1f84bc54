"""ConfusionMatrix construction, folds, and the utility yield family."""

import numpy as np
import pandas as pd
import pytest

from yieldwise import (
    ConfusionMatrix,
    UtilityMatrix,
    rescaled_yield,
    total_utility,
    utility_yield,
    utility_yield_per_item,
)

TRUTH = ["ill", "ill", "healthy", "healthy", "healthy", "ill"]
CHOSEN = ["ill", "healthy", "healthy", "ill", "healthy", "ill"]


def test_from_labels_by_hand():
    cm = ConfusionMatrix.from_labels(TRUTH, CHOSEN)
    # Sorted labels: healthy, ill. Rows decisions, columns true classes.
    # decided healthy: true healthy = 2 (items 2, 4), true ill = 1 (item 1)
    # decided ill:     true healthy = 1 (item 3),    true ill = 2 (items 0, 5)
    assert cm.classes == ("healthy", "ill") and cm.decisions == ("healthy", "ill")
    np.testing.assert_array_equal(cm.counts, [[2, 1], [1, 2]])
    assert cm.total == 6
    np.testing.assert_allclose(cm.normalized, np.array([[2, 1], [1, 2]]) / 6)
    np.testing.assert_allclose(cm.class_frequencies, [0.5, 0.5])


@pytest.mark.parametrize(
    "wrap",
    [list, np.array, pd.Series, lambda v: pd.Series(v, dtype="string"), pd.Categorical],
)
def test_from_labels_accepts_containers(wrap):
    cm = ConfusionMatrix.from_labels(wrap(TRUTH), wrap(CHOSEN))
    np.testing.assert_array_equal(cm.counts, [[2, 1], [1, 2]])


def test_categorical_order_and_unused_categories():
    truth = pd.Categorical(TRUTH, categories=["ill", "healthy", "unknown"])
    cm = ConfusionMatrix.from_labels(truth, CHOSEN)
    assert cm.classes == ("ill", "healthy", "unknown")
    np.testing.assert_array_equal(cm.counts, [[2, 1, 0], [1, 2, 0], [0, 0, 0]])


def test_rectangular_decision_set():
    cm = ConfusionMatrix.from_labels(
        [0, 1, 1, 0],
        ["discard", "promote", "retest", "retest"],
        classes=[0, 1],
        decisions_set=["discard", "promote", "retest"],
    )
    np.testing.assert_array_equal(cm.counts, [[1, 0], [0, 1], [1, 1]])


def test_integer_labels_numpy_and_python_agree():
    cm = ConfusionMatrix.from_labels(np.array([0, 1, 1]), [np.int64(0), 1, 0])
    assert cm.classes == (0, 1)
    assert all(type(c) is int for c in cm.classes)


def test_from_labels_errors():
    with pytest.raises(ValueError, match="same length, found 3 and 2"):
        ConfusionMatrix.from_labels([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match=r"true_classes holds label\(s\) \['z'\]"):
        ConfusionMatrix.from_labels(["a", "z"], ["a", "b"], classes=["a", "b"])
    with pytest.raises(ValueError, match=r"decisions holds label\(s\) \['maybe'\]"):
        ConfusionMatrix.from_labels(["a", "b"], ["a", "maybe"], classes=["a", "b"])
    with pytest.raises(ValueError, match="missing label"):
        ConfusionMatrix.from_labels(["a", None], ["a", "b"])
    with pytest.raises(ValueError, match="missing label"):
        ConfusionMatrix.from_labels([1.0, np.nan], [1.0, 1.0])
    with pytest.raises(ValueError, match="empty"):
        ConfusionMatrix.from_labels([], [])


@pytest.mark.parametrize(
    ("counts", "match"),
    [
        ([[1, -1], [0, 2]], "non-negative"),
        ([[0, 0], [0, 0]], "empty confusion matrix"),
        ([[1, np.nan], [0, 2]], "NaN"),
        ([1, 2], "2-dimensional"),
    ],
)
def test_bad_counts(counts, match):
    with pytest.raises(ValueError, match=match):
        ConfusionMatrix(counts)


def test_folds_concatenate_and_yield_is_count_weighted_mean():
    u = UtilityMatrix([[0, -10], [-1, 5]], ["healthy", "ill"], ["healthy", "ill"])
    a = ConfusionMatrix([[50, 3], [5, 2]], ["healthy", "ill"], ["healthy", "ill"])
    b = ConfusionMatrix([[300, 5], [20, 15]], ["healthy", "ill"], ["healthy", "ill"])
    both = a + b
    np.testing.assert_array_equal(both.counts, [[350, 8], [25, 17]])
    ya, yb = utility_yield(a, u), utility_yield(b, u)
    assert utility_yield(both, u) == pytest.approx((60 * ya + 340 * yb) / 400)
    assert sum([a, b]) == both
    # Matched by label, not position.
    b_rev = b.reindex(["ill", "healthy"], ["ill", "healthy"])
    assert a + b_rev == both
    with pytest.raises(ValueError, match="different labels"):
        _ = a + ConfusionMatrix([[1, 0], [0, 1]])


def test_yield_by_hand():
    u = UtilityMatrix([[0, -10], [-1, 5]], ["healthy", "ill"], ["healthy", "ill"])
    cm = ConfusionMatrix([[890, 40], [10, 60]], ["healthy", "ill"], ["healthy", "ill"])
    # (0*890 - 10*40 - 1*10 + 5*60) / 1000 = -110 / 1000
    assert utility_yield(cm, u) == pytest.approx(-0.11)
    assert total_utility(cm, u) == pytest.approx(-110)
    # f = (0.9, 0.1); max = 0.9*0 + 0.1*5 = 0.5; min = 0.9*(-1) + 0.1*(-10) = -1.9
    assert rescaled_yield(cm, u) == pytest.approx((-0.11 + 1.9) / (0.5 + 1.9))


def test_yield_label_alignment_and_subsets():
    u = UtilityMatrix([[1, 0], [0, 1], [0.8, 0.8]], ["a", "b", "retest"], ["a", "b"])
    cm = ConfusionMatrix([[3, 1], [1, 5]], ["b", "a"], ["b", "a"])
    # rows b, a; cols b, a: U[b,b]*3 + U[b,a]*1 + U[a,b]*1 + U[a,a]*5 = 3 + 0 + 0 + 5
    assert utility_yield(cm, u) == pytest.approx(0.8)
    with pytest.raises(ValueError, match=r"confusion's decisions holds label\(s\) \['c'\]"):
        utility_yield(ConfusionMatrix([[1, 0], [0, 1]], ["a", "c"], ["a", "b"]), u)
    with pytest.raises(TypeError, match="utility must be a UtilityMatrix"):
        utility_yield(cm, [[1, 0], [0, 1]])
    with pytest.raises(TypeError, match="confusion must be a ConfusionMatrix"):
        utility_yield([[1, 0], [0, 1]], u)


def test_rescaled_yield_undefined():
    u = UtilityMatrix([[1, 0], [1, 2]])
    with pytest.raises(ValueError, match="undefined"):
        rescaled_yield(ConfusionMatrix([[3, 0], [2, 0]]), u)


def test_per_item_yield_brute_force():
    rng = np.random.default_rng(3)
    n = 200
    utilities = rng.normal(size=(n, 3, 2))
    truth = rng.integers(0, 2, n)
    chosen = rng.integers(0, 3, n)
    expected = np.mean([utilities[k, chosen[k], truth[k]] for k in range(n)])
    assert utility_yield_per_item(truth, chosen, utilities) == pytest.approx(expected)
    labelled = utility_yield_per_item(
        np.array(["n", "p"])[truth],
        np.array(["x", "y", "z"])[chosen],
        utilities,
        decision_labels=["x", "y", "z"],
        class_labels=["n", "p"],
    )
    assert labelled == pytest.approx(expected)
    # The same matrix for every item reduces to the ordinary yield.
    u = UtilityMatrix([[1, -2], [0, 3], [0.5, 0.5]])
    same = np.broadcast_to(u.values, (n, 3, 2))
    cm = ConfusionMatrix.from_labels(truth, chosen, classes=[0, 1], decisions_set=[0, 1, 2])
    assert utility_yield_per_item(truth, chosen, same) == pytest.approx(utility_yield(cm, u))


def test_per_item_yield_errors():
    with pytest.raises(ValueError, match="3-dimensional"):
        utility_yield_per_item([0], [0], [[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="one label per item of utilities"):
        utility_yield_per_item([0, 1], [0], np.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match=r"decisions holds label\(s\) \[5\]"):
        utility_yield_per_item([0], [5], np.zeros((1, 2, 2)))


def test_repr_html_escapes():
    cm = ConfusionMatrix([[1, 0], [0, 1]], classes=["<script>", "b"])
    assert "<script>" not in cm._repr_html_()
    assert "N = 2" in repr(cm)
