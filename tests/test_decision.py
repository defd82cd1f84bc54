"""Expected-utility decisions: rule, ties, per-item and rectangular utilities."""

import numpy as np
import pandas as pd
import pytest

from yieldwise import ConfusionMatrix, UtilityMatrix, decide, expected_utilities, utility_yield

U = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"], classes=["healthy", "ill"])


def test_binary_threshold_rule():
    # Threshold 1/16: treat exactly when P(ill) > 1/16.
    p_ill = np.array([0.0, 0.05, 0.0624, 0.0626, 0.5, 1.0])
    chosen = decide(np.column_stack([1 - p_ill, p_ill]), U)
    assert chosen.tolist() == ["wait", "wait", "wait", "treat", "treat", "treat"]


def test_matches_brute_force_argmax_with_rectangular_matrix():
    rng = np.random.default_rng(0)
    u = UtilityMatrix(rng.normal(size=(4, 3)), decisions=list("abcd"))
    p = rng.dirichlet([1, 1, 1], size=500)
    expected = [u.decisions[int(np.argmax([u.values[i] @ row for i in range(4)]))] for row in p]
    assert decide(p, u).tolist() == expected
    eu = expected_utilities(p, u)
    assert list(eu.columns) == list("abcd")
    np.testing.assert_allclose(eu.to_numpy(), p @ u.values.T)


def test_per_item_utilities():
    rng = np.random.default_rng(1)
    n = 300
    per_item = rng.normal(size=(n, 3, 2))
    p = rng.dirichlet([1, 1], size=n)
    expected = [int(np.argmax(per_item[k] @ p[k])) for k in range(n)]
    assert decide(p, per_item).tolist() == expected
    labelled = decide(p, per_item, decisions=["x", "y", "z"])
    assert labelled.tolist() == [["x", "y", "z"][k] for k in expected]


def test_ties_random_is_seeded_and_uniform_first_is_first():
    # With the identity and p = (0.5, 0.5), both decisions tie for every item.
    p = np.full((20_000, 2), 0.5)
    u = UtilityMatrix([[1, 0], [0, 1]])
    a = decide(p, u, seed=42)
    assert np.array_equal(a, decide(p, u, seed=42))
    assert abs(np.mean(a == 1) - 0.5) < 4 * np.sqrt(0.25 / p.shape[0])
    assert (decide(p, u, tie="first") == 0).all()
    # Ties in exact arithmetic that floats miss by an ulp still count: at p1 = 1/16.
    p16 = np.array([[15 / 16, 1 / 16]])
    assert set(decide(np.repeat(p16, 400, axis=0), U, seed=0)) == {"wait", "treat"}


def test_confusion_from_probabilities_splits_ties_equally():
    p = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    truth = [0, 0, 1, 1]
    cm = ConfusionMatrix.from_probabilities(p, truth, UtilityMatrix([[1, 0], [0, 1]]))
    # Item 0 (true 0) tied: 0.5 to each row of column 0; item 1 -> decision 0; item 2 ->
    # decision 1; item 3 (true 1) tied: 0.5 to each row of column 1.
    np.testing.assert_allclose(cm.counts, [[1.5, 0.5], [0.5, 1.5]])
    # Its yield is the average over all tie-breaks.
    assert utility_yield(cm, UtilityMatrix([[1, 0], [0, 1]])) == pytest.approx(0.75)


def test_confusion_from_probabilities_matches_decide_without_ties():
    rng = np.random.default_rng(5)
    p = rng.dirichlet([2, 1, 1], size=1000)
    truth = rng.integers(0, 3, 1000)
    u = UtilityMatrix(rng.normal(size=(3, 3)))
    direct = ConfusionMatrix.from_labels(truth, decide(p, u), classes=[0, 1, 2])
    assert ConfusionMatrix.from_probabilities(p, truth, u) == direct


def test_dataframe_probabilities_matched_by_column_name():
    frame = pd.DataFrame({"ill": [0.9, 0.01], "healthy": [0.1, 0.99]})
    assert decide(frame, U).tolist() == ["treat", "wait"]
    with pytest.raises(ValueError, match="columns"):
        decide(pd.DataFrame({"ill": [0.9], "other": [0.1]}), U)


def test_class_never_chosen_when_threshold_not_reached():
    # Threshold for choosing 1 is 0.9; probabilities of class 1 never exceed 0.8.
    u = UtilityMatrix([[9, 0], [0, 1]])
    assert u.threshold() == pytest.approx(0.9)
    p1 = np.linspace(0, 0.8, 81)
    assert (decide(np.column_stack([1 - p1, p1]), u) == 0).all()


@pytest.mark.parametrize(
    ("probabilities", "match"),
    [
        ([[0.5, 0.6]], "sum to 1"),
        ([[1.2, -0.2]], r"lie in \[0, 1\]"),
        ([0.2, 0.8], "2-dimensional"),
        ([[0.2, 0.3, 0.5]], "3 columns but the utility matrix has 2 classes"),
        ([[np.nan, 1.0]], "NaN"),
    ],
)
def test_bad_probabilities(probabilities, match):
    with pytest.raises(ValueError, match=match):
        decide(probabilities, U)


def test_bad_utility_and_options():
    p = np.array([[0.5, 0.5]])
    with pytest.raises(ValueError, match="tie must be"):
        decide(p, U, tie="last")
    with pytest.raises(ValueError, match="per-item utility has 2 matrices"):
        decide(p, np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="2-dimensional or 3-dimensional"):
        decide(p, [1, 2])
    with pytest.raises(ValueError, match="decisions must not be given"):
        decide(p, U, decisions=["a", "b"])
    with pytest.raises(ValueError, match=r"true_classes holds label\(s\) \['flu'\]"):
        ConfusionMatrix.from_probabilities(p, ["flu"], U)


def test_a_row_off_the_simplex_is_named_with_a_plain_number():
    """The sum is printed as a number a user reads (it printed np.float64(1.1))."""
    with pytest.raises(ValueError, match=r"row 0 sums to 1\.1$"):
        decide([[0.5, 0.6]], UtilityMatrix([[1, 0], [0, 1]]))


def test_a_dataframe_utility_is_read_by_label_and_a_dataframes_rows_keep_their_index():
    """A labelled utility (columns in another order than the probabilities') was read by
    position, its decision names dropped; expected_utilities dropped a DataFrame's index.
    Worked by hand: P(healthy) 0.9, P(ill) 0.1."""
    u = pd.DataFrame([[0, -10], [-1, 5], [-0.5, -0.5]], index=["wait", "treat", "retest"],
                     columns=["ill", "healthy"])  # fmt: skip
    p = pd.DataFrame([[0.9, 0.1], [0.5, 0.5]], columns=["healthy", "ill"], index=["x", "y"])
    eu = expected_utilities(p, u)
    assert list(eu.index) == ["x", "y"] and list(eu.columns) == ["wait", "treat", "retest"]
    np.testing.assert_allclose(eu.loc["x"], [0.9 * -10 + 0.1 * 0, 0.9 * 5 + 0.1 * -1, -0.5])
    assert list(decide(p, u)) == ["treat", "treat"]
    with pytest.raises(ValueError, match="decisions must not be given with a DataFrame"):
        decide(p, u, decisions=["a", "b", "c"])
    with pytest.raises(ValueError, match="seed must be a non-negative integer, a numpy"):
        decide(p, u, seed="x")


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e7, 1e12])
def test_a_shift_of_the_utilities_changes_no_decision(offset):
    """U + b ranks decisions as U does (theory 1). The tie tolerance scaled with max|U|,
    so at b = 1e7 the 0.0008 advantage of decision 1 became a tie. By hand, with U = I:
    EU_1 - EU_0 = 0.5004 - 0.4996 = 0.0008 > 0, whatever the shift."""
    p = np.array([[0.4996, 0.5004]])
    u = UtilityMatrix(np.eye(2) + offset)
    assert decide(p, u, tie="first").tolist() == [1]
    assert decide(p, u, seed=0).tolist() == [1]
    np.testing.assert_array_equal(ConfusionMatrix.from_probabilities(p, [1], u).counts,
                                  [[0, 0], [0, 1]])  # fmt: skip
    # the same for a positive rescaling a * (U + b), a tiny a included
    small = UtilityMatrix(1e-9 * (np.eye(2) + offset))
    assert decide(p, small, tie="first").tolist() == [1]
    # an exact tie stays a tie: split equally, whatever the shift
    np.testing.assert_array_equal(
        ConfusionMatrix.from_probabilities([[0.5, 0.5]], [1], u).counts, [[0, 0.5], [0, 0.5]]
    )
    assert (decide(np.full((4, 2), 0.5), u, tie="first") == 0).all()


def test_per_item_shifts_against_brute_force():
    """Per-item utilities shifted by up to 1e12 (exactly: the entries are multiples of
    1/8), decided as the argmax of the unshifted expected utilities, item by item."""
    rng = np.random.default_rng(7)
    n = 500
    base = np.round(rng.normal(size=(n, 3, 2)) * 8) / 8
    shifts = rng.choice([0.0, 1e3, 1e7, 1e12], size=n)
    p = rng.dirichlet([1, 1], size=n)
    expected = [int(np.argmax(base[k] @ p[k])) for k in range(n)]
    assert decide(p, base + shifts[:, None, None], tie="first").tolist() == expected
    # coarse entries make exact ties (two equal rows): shared equally among the tied
    shares = np.zeros(3)
    for k in range(n):
        eu = base[k] @ p[k]
        tied = eu >= eu.max() - 1e-12
        shares += tied / tied.sum()
    counts = ConfusionMatrix.from_probabilities(p, [0] * n, base + shifts[:, None, None]).counts
    np.testing.assert_allclose(counts[:, 0], shares, rtol=0, atol=1e-9)
