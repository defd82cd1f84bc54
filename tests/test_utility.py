"""UtilityMatrix: labels, standard form, equivalence, the binary chart, expectation."""

import numpy as np
import pytest

from yieldwise import UtilityMatrix
from yieldwise.utility import chart_matrices, in_chart_domain


def test_labels_default_and_given():
    u = UtilityMatrix([[1, 0, 0.5], [0, 1, 0.5]])
    assert u.decisions == (0, 1)
    assert u.classes == (0, 1, 2)
    v = UtilityMatrix(
        [[1, 0], [0, 1], [0.7, 0.7]], decisions=["a", "b", "retest"], classes=["x", "y"]
    )
    assert v.shape == (3, 2)
    assert v.to_frame().loc["retest", "y"] == 0.7


def test_values_are_read_only_copies():
    raw = np.array([[1.0, 0.0], [0.0, 1.0]])
    u = UtilityMatrix(raw)
    raw[0, 0] = 99
    assert u.values[0, 0] == 1.0
    with pytest.raises(ValueError):
        u.values[0, 0] = 5


def test_standard_form_by_hand():
    # min = -10, max = 5, range 15: (0 + 10)/15 = 2/3, (-1 + 10)/15 = 3/5.
    u = UtilityMatrix([[0, -10], [-1, 5]])
    np.testing.assert_allclose(u.standard().values, [[2 / 3, 0], [3 / 5, 1]])
    assert u.standard().values.min() == 0 and u.standard().values.max() == 1


def test_equivalence_affine_positive_only():
    u = UtilityMatrix([[3, -1], [0, 2]], decisions=["a", "b"], classes=["x", "y"])
    assert u.is_equivalent(UtilityMatrix(2.5 * u.values + 7, ["a", "b"], ["x", "y"]))
    assert not u.is_equivalent(UtilityMatrix(-u.values, ["a", "b"], ["x", "y"]))
    # Rows/columns are matched by label, not position.
    swapped = UtilityMatrix(u.values[::-1, ::-1] * 2, ["b", "a"], ["y", "x"])
    assert u.is_equivalent(swapped)
    assert not u.is_equivalent(UtilityMatrix(u.values, ["a", "c"], ["x", "y"]))
    # Adding a constant to one column only is not an equivalence in the theory's sense.
    assert not u.is_equivalent(
        UtilityMatrix(u.values + np.array([[0, 1], [0, 1]]), ["a", "b"], ["x", "y"])
    )
    with pytest.raises(TypeError, match="other must be a UtilityMatrix"):
        u.is_equivalent(u.values)


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        (0.0, 0.0, [[1, 0], [0, 1]]),
        (0.5, 0.25, [[0.5, 0.25], [0, 1]]),
        (0.5, -0.25, [[0.5, 0], [0.25, 1]]),
        (-0.5, 0.25, [[1, 0.25], [0, 0.5]]),
        (-1.0, 0.0, [[1, 0], [0, 0]]),
        (1.0, 0.0, [[0, 0], [0, 1]]),
        (0.0, 1.0, [[1, 1], [0, 1]]),
        (0.0, -1.0, [[1, 0], [1, 1]]),
    ],
)
def test_from_xy_matches_theory_formula_and_inverts(x, y, expected):
    u = UtilityMatrix.from_xy(x, y)
    np.testing.assert_array_equal(u.values, expected)
    assert u.xy == pytest.approx((x, y), abs=1e-12)


def test_xy_keeps_tiny_coordinates():
    assert UtilityMatrix.from_xy(-1e-9, 2e-10).xy == pytest.approx((-1e-9, 2e-10), rel=1e-6)


def test_xy_of_any_equivalent_matrix():
    # 3*U(0.3, -0.4) + 2 lies at the same chart point.
    u = UtilityMatrix(3 * chart_matrices(0.3, -0.4) + 2)
    assert u.xy == pytest.approx((0.3, -0.4))


def test_chart_domain_corners_rejected():
    assert in_chart_domain(-0.5, 0.4) and not in_chart_domain(-0.5, 0.6)
    assert in_chart_domain(0.5, -0.4) and not in_chart_domain(0.5, -0.6)
    with pytest.raises(ValueError, match="outside the admitted domain"):
        UtilityMatrix.from_xy(-0.5, 0.6)
    with pytest.raises(ValueError, match="outside the admitted domain"):
        UtilityMatrix.from_xy(1.2, 0)
    with pytest.raises(ValueError, match="x must be a finite number"):
        UtilityMatrix.from_xy(float("nan"), 0)


def test_xy_errors():
    with pytest.raises(ValueError, match="2x2"):
        _ = UtilityMatrix([[1, 0, 0], [0, 1, 0]]).xy
    with pytest.raises(ValueError, match=r"wrong decision 1 .* worth more"):
        _ = UtilityMatrix([[1, 0], [2, 1]]).xy


def test_expected_averages_matrices_as_given():
    a = UtilityMatrix([[1, 0], [0, 1]], ["n", "p"], ["n", "p"])
    b = UtilityMatrix([[10, -10], [0, 20]], ["n", "p"], ["n", "p"])
    # 0.25 * a + 0.75 * b = [[0.25 + 7.5, -7.5], [0, 0.25 + 15]]
    e = UtilityMatrix.expected([a, b], [0.25, 0.75])
    np.testing.assert_allclose(e.values, [[7.75, -7.5], [0, 15.25]])
    # Not the average of the standard forms (which would be [[1, 0.25], [0.5, 1]] /... ).
    std = UtilityMatrix.expected([a.standard(), b.standard()], [0.25, 0.75])
    assert not e.is_equivalent(std)
    # Label order of later matrices does not matter.
    b_swapped = b.reindex(["p", "n"], ["p", "n"])
    assert UtilityMatrix.expected([a, b_swapped], [0.25, 0.75]) == e
    # Default weights are equal.
    np.testing.assert_allclose(UtilityMatrix.expected([a, b]).values, (a.values + b.values) / 2)


def test_expected_errors():
    a = UtilityMatrix([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="sum to 1"):
        UtilityMatrix.expected([a, a], [1, 1])
    with pytest.raises(ValueError, match="non-negative"):
        UtilityMatrix.expected([a, a], [1.5, -0.5])
    with pytest.raises(ValueError, match="one entry per matrix"):
        UtilityMatrix.expected([a, a], [1.0])
    with pytest.raises(ValueError, match="share labels"):
        UtilityMatrix.expected([a, UtilityMatrix([[1, 0], [0, 1]], classes=["a", "b"])])
    with pytest.raises(TypeError, match=r"matrices\[1\] must be a UtilityMatrix"):
        UtilityMatrix.expected([a, [[1, 0], [0, 1]]])
    with pytest.raises(ValueError, match="empty"):
        UtilityMatrix.expected([])


def test_threshold_by_hand_and_against_decisions():
    # (U00 - U10) / ((U00 - U10) + (U11 - U01)) = (0 + 1) / (1 + 15) = 1/16
    u = UtilityMatrix([[0, -10], [-1, 5]])
    assert u.threshold() == pytest.approx(1 / 16)
    # At p1 just above/below the threshold, the expected utility of decision 1 is higher/lower.
    for p1, better in ((1 / 16 + 1e-6, 1), (1 / 16 - 1e-6, 0)):
        eu = u.values @ np.array([1 - p1, p1])
        assert int(np.argmax(eu)) == better
    assert UtilityMatrix([[1, 0], [0, 1]]).threshold() == 0.5
    with pytest.raises(ValueError, match="not positive"):
        UtilityMatrix([[0, 1], [1, 0]]).threshold()
    with pytest.raises(ValueError, match="2x2"):
        UtilityMatrix([[1, 0], [0, 1], [0.5, 0.5]]).threshold()


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([[1, 2], [3, np.nan]], "NaN"),
        ([[1, 2], [3, np.inf]], "finite"),
        ([1, 2, 3], "2-dimensional"),
        ([[1, 2, 3]], "at least 2 decisions"),
        ([[4, 4], [4, 4]], "every entry equal"),
        ([["a", "b"], ["c", "d"]], "numeric"),
        ("abc", "string"),
    ],
)
def test_bad_values(values, match):
    with pytest.raises((ValueError, TypeError), match=match):
        UtilityMatrix(values)


def test_bad_labels():
    with pytest.raises(ValueError, match="decisions must have 2 labels, found 3"):
        UtilityMatrix([[1, 0], [0, 1]], decisions=["a", "b", "c"])
    with pytest.raises(ValueError, match="classes must be unique"):
        UtilityMatrix([[1, 0], [0, 1]], classes=["a", "a"])
    with pytest.raises(ValueError, match="non-missing"):
        UtilityMatrix([[1, 0], [0, 1]], classes=["a", None])


def test_repr_and_html_escape_labels():
    u = UtilityMatrix([[1, 0], [0, 1]], decisions=["<b>x</b>", "y"], classes=["&", "z"])
    assert "UtilityMatrix(2 decisions x 2 classes)" in repr(u)
    page = u._repr_html_()
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page and "&amp;" in page


@pytest.mark.parametrize(
    "values",
    [[[0, -10], [-1, 5]], [[-1, 5], [0, -10]], [[1, 1], [0, 0]], [[1, 0], [2, 1]],
     [[1, 0], [1, 0]], [[2, 0], [0, 3]], [[0, 3], [2, 0]], [[5, 1], [1, 2]]],
)  # fmt: skip
def test_binary_rule_is_the_expected_utility_argmax(values):
    """binary_rule() against brute force: at P(class 1) = p on a fine grid, the decision it
    names (above or below t) has the largest expected utility (ties allowed at t); and
    the two hand-worked orders of one matrix give the same threshold."""
    u = UtilityMatrix(values, decisions=["a", "b"], classes=["c0", "c1"])
    t, above, below = u.binary_rule()
    v = np.asarray(values, float)
    for p in np.linspace(0, 1, 401):
        eu = v @ np.array([1 - p, p])
        named = above if t is None or p > t else below
        assert eu[["a", "b"].index(named)] >= eu.max() - 1e-12, (p, eu, named)
    if t is not None and 0 < t < 1:
        assert above != below


def test_binary_rule_by_hand():
    u = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"], classes=["h", "i"])
    assert u.binary_rule() == (u.threshold(), "treat", "wait") == (1 / 16, "treat", "wait")
    flipped = UtilityMatrix([[-1, 5], [0, -10]], decisions=["treat", "wait"], classes=["h", "i"])
    assert flipped.binary_rule() == (1 / 16, "treat", "wait")  # threshold() refuses it
    with pytest.raises(ValueError, match="threshold\\(\\) is undefined"):
        flipped.threshold()
    assert UtilityMatrix([[1, 0], [1, 0]]).binary_rule() == (None, 0, 0)  # a tie
    with pytest.raises(ValueError, match="binary_rule\\(\\) needs a 2x2"):
        UtilityMatrix([[1, 0], [0, 1], [0.5, 0.5]]).binary_rule()


def test_a_dataframe_is_read_by_its_labels_and_equal_matrices_hash_alike():
    """to_frame() round-trips, in any column order (it was read by position, so the
    classes came back as 0, 1 over reordered values); labels given beside a DataFrame
    must be its own; -0.0 and 0.0 make equal matrices with equal hashes."""
    from yieldwise import ConfusionMatrix

    u = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"], classes=["h", "i"])
    shuffled = u.to_frame().loc[["treat", "wait"], ["i", "h"]]
    back = UtilityMatrix(shuffled)
    assert back.decisions == ("treat", "wait") and back.classes == ("i", "h")
    assert back.reindex(u.decisions, u.classes) == u
    assert UtilityMatrix(shuffled, decisions=u.decisions, classes=u.classes) == u
    with pytest.raises(ValueError, match=r"columns \['i', 'h'\] are not the classes given"):
        UtilityMatrix(shuffled, classes=["x", "y"])
    c = ConfusionMatrix([[5, 1], [2, 7]], decisions=["a", "b"], classes=["a", "b"])
    assert ConfusionMatrix(c.to_frame().iloc[::-1]).reindex(c.decisions, c.classes) == c
    zero = UtilityMatrix([[0.0, 1], [1, 0]])
    negative_zero = UtilityMatrix([[-0.0, 1], [1, 0]])
    assert zero == negative_zero and hash(zero) == hash(negative_zero)


def _exact_ties(u_rows, p_rows):
    """Brute force: per probability row, the decisions whose expected utility is the
    largest in exact rational arithmetic (``p`` read as the decimals written)."""
    from fractions import Fraction

    ties = []
    for p in p_rows:
        eu = [sum(Fraction(x) * Fraction(q) for x, q in zip(row, p, strict=True))
              for row in u_rows]  # fmt: skip
        ties.append([value == max(eu) for value in eu])
    return np.array(ties)


# (gap, shift, scale): U + shift and its multiples by powers of 2 are exact in floats for
# these gaps (1e9 - 2**-23 is a double; 1e9 - 2**-36 is not)
_TIE_CASES = [(2**-36, 0.0, 1.0), (2**-23, 1e9, 1.0), (2**-36, 0.0, 2.0**-30),
              (2**-23, 1e9, 2.0**30)]  # fmt: skip


def test_near_best_against_exact_arithmetic_with_a_shift_and_a_rounding_tie():
    """The one tie rule (decision and roc): ties within rounding are ties, real
    differences are not, and a shift U + 1e9 or a scale changes neither (theory 1,
    "Equivalence"). Decisions a and b tie in exact arithmetic at p = (0.1, 0.2, 0.3, 0.4)
    (0.1 + 0.2 = 0.3) but not in floats; c trails them by 0.4 * gap, a real difference
    of 5.8e-12 of the spread unshifted (a tolerance of 1e-10 called it a tie), of 4.8e-8
    at the shift 1e9, where 2**-23 is the smallest step of the floats."""
    from yieldwise.utility import near_best, shift_and_spread

    p_text = [["0.1", "0.2", "0.3", "0.4"], ["0.25", "0.25", "0.5", "0"],
              ["0.7", "0.1", "0.1", "0.1"], ["0", "0", "0.3", "0.7"]]  # fmt: skip
    p = np.array(p_text, dtype=float)
    per_item_u, per_item_expected = [], []
    for gap, shift, scale in _TIE_CASES:
        rows = [[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, -gap], [0, 0, 0, 0]]
        expected = _exact_ties(rows, p_text)
        assert expected[0].tolist() == [True, True, False, False]  # the rounding tie
        plain = p @ np.array(rows, dtype=float).T
        assert plain[0, 0] != plain[0, 1]  # ... which floats miss: == would fail it
        u = scale * (np.array(rows, dtype=float) + shift)
        low, shifted, spread = shift_and_spread(u)
        assert (low.item(), spread.item()) == (scale * (shift - gap), scale * (1 + gap))
        np.testing.assert_array_equal(near_best(p @ shifted.T, spread, axis=1), expected)
        per_item_u.append(u)
        per_item_expected.append(expected)
    # per-item utilities: item k of row j under the matrix of case k, spreads per item
    u = np.array(per_item_u)[:, None].repeat(len(p), axis=1).reshape(-1, 4, 4)
    probabilities = np.tile(p, (len(_TIE_CASES), 1))
    _, shifted, spread = shift_and_spread(u, axis=(1, 2))
    values = np.einsum("nc,ndc->nd", probabilities, shifted)
    np.testing.assert_array_equal(
        near_best(values, spread[:, 0], axis=1), np.concatenate(per_item_expected)
    )


# ------------------------------------------------------------- many at once
def test_batch_equals_one_matrix_at_a_time_and_shares_nothing():
    rng = np.random.default_rng(5)
    values = rng.normal(size=(50, 3, 2))
    labels = {"decisions": ["x", "y", "z"], "classes": ["a", "b"]}
    many = UtilityMatrix.batch(values, **labels)
    one_by_one = [UtilityMatrix(v, **labels) for v in values]
    assert many == one_by_one and [hash(m) for m in many] == [hash(m) for m in one_by_one]
    values[0, 0, 0] = 99.0  # the caller's array is copied, and the copies are read-only
    assert many[0].values[0, 0] != 99.0 and not many[0].values.flags.writeable
    with pytest.raises(ValueError, match="values is empty"):
        UtilityMatrix.batch(np.empty((0, 2, 2)))
    default = UtilityMatrix.batch(values[:2])
    assert default[1].decisions == (0, 1, 2) and default[1].classes == (0, 1)


@pytest.mark.parametrize(
    ("values", "labels", "error", "message"),
    [
        (np.ones((2, 2)), {}, ValueError, "values"),  # one matrix, not a stack of them
        (np.zeros((3, 1, 2)), {}, ValueError,
         r"at least 2 decisions \(rows\) and 2 classes \(columns\) per matrix"),
        (np.stack([np.eye(2), np.full((2, 2), 3.0)]), {}, ValueError,
         r"values\[1\] has every entry equal to 3.0"),
        (np.stack([np.eye(2), np.eye(2) * 1e300]), {}, ValueError, "must lie within"),
        (np.stack([np.eye(2), np.eye(2) * np.nan]), {}, ValueError, "finite"),
        (np.stack([np.eye(2)]), {"classes": ["a"]}, ValueError, "classes must have 2 labels"),
        (np.stack([np.eye(2)]), {"decisions": ["a", "a"]}, ValueError, "decisions"),
    ],
)  # fmt: skip
def test_batch_refuses_what_the_constructor_refuses(values, labels, error, message):
    with pytest.raises(error, match=message):
        UtilityMatrix.batch(values, **labels)
    if values.ndim == 3 and len(values):  # the same rule as one matrix at a time
        with pytest.raises(error):
            [UtilityMatrix(v, **labels) for v in values]
