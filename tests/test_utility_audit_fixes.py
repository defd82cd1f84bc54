"""Fixes from the audit of utility.py, decision.py and _validation.py (items A8, A9,
B7, C1-C4 of the public-API audit).

Each test fails on the code as audited: an overflowing plain-array utility and complex
numbers gave silent wrong answers; the other inputs raised errors that did not name the
argument (or, for a string of labels, were read one label per character).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from yieldwise import UtilityMatrix, decide, expected_utilities
from yieldwise._validation import as_float_array, check_labels
from yieldwise.utility import MAX_ABS_UTILITY, chart_matrices, sample_matrices


# ------------------------------------------- A8: plain-array utilities beyond 1e150
@pytest.mark.parametrize("per_item", [False, True])
def test_plain_utility_beyond_the_bound_is_refused_as_a_utility_matrix_is(per_item):
    """max U - min U overflowed to inf: every expected utility became inf/NaN and
    argmax took decision 0 for an item whose best decision is 1."""
    u = np.array([[1e308, -1e308], [-1e308, 1e308]])
    p = np.array([[0.1, 0.9]])
    utility = u[None] if per_item else u
    for call in (lambda: decide(p, utility, seed=0), lambda: expected_utilities(p, utility)):
        with pytest.raises(ValueError, match=r"^utility must lie within \+-1e\+150"):
            call()
    with pytest.raises(ValueError, match=r"^values must lie within \+-1e\+150"):
        UtilityMatrix(u)


def test_plain_utility_at_the_bound_decides_as_brute_force():
    rng = np.random.default_rng(3)
    u = rng.uniform(-1, 1, size=(4, 3)) * MAX_ABS_UTILITY
    p = rng.dirichlet(np.ones(3), size=50)
    brute = np.array(
        [max(range(4), key=lambda i: sum(u[i, c] * row[c] for c in range(3))) for row in p]
    )
    np.testing.assert_array_equal(decide(p, u, tie="first"), brute)


# ----------------------------------------------------------------- A9: complex input
def test_complex_numbers_are_refused_not_truncated():
    """UtilityMatrix(eye + 1j) kept the real part with only a numpy ComplexWarning."""
    with pytest.raises(TypeError, match=r"^values must hold real numbers, found complex"):
        UtilityMatrix(np.eye(2) + 1j)
    with pytest.raises(TypeError, match=r"^probabilities must hold real numbers"):
        decide([[0.5 + 0j, 0.5]], np.eye(2))
    with pytest.raises(TypeError, match=r"^weights must hold real numbers"):
        as_float_array(np.array([1 + 2j]), "weights")
    # a real part passed on purpose is fine, and equals the real matrix
    assert UtilityMatrix((np.eye(2) + 0j).real) == UtilityMatrix(np.eye(2))


# ------------------------------------------------- B7: repeated probability columns
def test_repeated_probability_columns_are_named():
    p = pd.DataFrame([[0.2, 0.5, 0.3]], columns=["n", "y", "n"])
    u = UtilityMatrix(np.eye(2), classes=["n", "y"])
    for call in (lambda: decide(p, u), lambda: expected_utilities(p, u)):
        with pytest.raises(ValueError, match=r"^probabilities has duplicated columns \['n'\]"):
            call()
    # unique columns in another order are still read by label: P(y) = 0.7 decides y
    ok = pd.DataFrame([[0.7, 0.3]], columns=["y", "n"])
    assert decide(ok, u).tolist() == [1]


# ------------------------------------------------------------- C1: from_xy types
@pytest.mark.parametrize("bad", ["0.5", None, [0.5], True])
def test_from_xy_names_the_coordinate_that_is_not_a_number(bad):
    with pytest.raises(TypeError, match=r"^x must be a finite number"):
        UtilityMatrix.from_xy(bad, 0)
    with pytest.raises(TypeError, match=r"^y must be a finite number"):
        UtilityMatrix.from_xy(0, bad)


def test_from_xy_takes_numbers_of_any_kind():
    expected = chart_matrices(0.5, -0.25)
    for x, y in ((0.5, -0.25), (np.float32(0.5), np.float64(-0.25)), (0.5, -0.25)):
        np.testing.assert_array_equal(UtilityMatrix.from_xy(x, y).values, expected)
    np.testing.assert_array_equal(UtilityMatrix.from_xy(np.int64(0), 0).values, np.eye(2))
    with pytest.raises(ValueError, match=r"x must be a finite number, found nan"):
        UtilityMatrix.from_xy(float("nan"), 0)


# ------------------------------------------------------- C2: sample_matrices arguments
@pytest.mark.parametrize("bad", [2.0, True, None])
def test_sample_matrices_names_a_count_that_is_no_count(bad):
    with pytest.raises(TypeError, match=r"^decisions must be a count \(an int of at least 2\)"):
        sample_matrices(2, bad, 2)
    with pytest.raises(TypeError, match=r"^classes must be a count"):
        sample_matrices(2, 2, bad)


def test_sample_matrices_reads_a_generator_of_labels_once():
    """A generator was consumed by len(list(...)): "decisions must have 2 labels, found 0"."""
    from_generator = sample_matrices(3, (d for d in ["a", "b"]), 2, seed=4)
    from_list = sample_matrices(3, ["a", "b"], 2, seed=4)
    assert from_generator == from_list
    assert from_generator[0].decisions == ("a", "b")


def test_sample_matrices_names_decisions_with_one_label():
    with pytest.raises(
        ValueError, match=r"^decisions must hold at least 2 labels, found 1: \['a'\]"
    ):
        sample_matrices(2, ["a"], 2)


@pytest.mark.parametrize("bad", [-1, True])
def test_sample_matrices_names_a_bad_seed(bad):
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer"):
        sample_matrices(2, 2, 2, seed=bad)


def test_sample_matrices_names_a_seed_of_the_wrong_type():
    with pytest.raises(TypeError, match=r"^seed must be a non-negative integer, .* found str 'x'"):
        sample_matrices(2, 2, 2, seed="x")
    # every documented kind of seed still gives numpy's own stream
    by_int = sample_matrices(2, 2, 2, seed=7)
    assert sample_matrices(2, 2, 2, seed=np.random.default_rng(7)) == by_int
    assert sample_matrices(2, 2, 2, seed=np.random.SeedSequence(7)) == by_int


# ------------------------------------------------------ C3: a string is one label
def test_a_string_of_labels_is_refused_with_a_dataframe_and_in_reindex():
    """UtilityMatrix(df, decisions="ny") read "n", "y"; with other letters it ended in a
    pandas KeyError. UtilityMatrix(array, decisions="ab") refused it already."""
    frame = pd.DataFrame([[1, 0], [0, 1]], index=["y", "n"], columns=["Y", "N"])
    with pytest.raises(
        TypeError, match=r"^decisions must be a sequence of labels, found the string 'ny'"
    ):
        UtilityMatrix(frame, decisions="ny")
    with pytest.raises(
        TypeError, match=r"^classes must be a sequence of labels, found the string 'YN'"
    ):
        UtilityMatrix(frame, classes="YN")
    u = UtilityMatrix(np.eye(2), decisions=["a", "b"])
    with pytest.raises(
        TypeError, match=r"^decisions must be a sequence of labels, found the string 'ab'"
    ):
        u.reindex(decisions="ab")
    # lists (and generators, read once) still reorder by label
    assert UtilityMatrix(frame, decisions=(d for d in ["n", "y"])).values.tolist() == [
        [0, 1],
        [1, 0],
    ]
    assert u.reindex(decisions=["b", "a"]).values.tolist() == [[0, 1], [1, 0]]


def test_check_labels_without_a_size_takes_any_length_once():
    assert check_labels((c for c in "xyz"), None, "classes") == ("x", "y", "z")
    with pytest.raises(TypeError, match=r"^classes must be a sequence of labels, found float 2.0"):
        check_labels(2.0, None, "classes")


# ------------------------------------------------ C4: the constant-matrix message
def test_constant_matrix_message_prints_a_plain_number():
    with pytest.raises(ValueError) as error:
        UtilityMatrix(np.ones((2, 2)))
    assert str(error.value).startswith("values has every entry equal to 1.0: ")
