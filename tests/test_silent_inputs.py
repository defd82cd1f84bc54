"""Inputs that used to give a silent wrong answer now give a clear error (issue 17, 8-10).

Transducers with given posterior draws (no Stan), so each check is exact and fast.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from yieldwise import ConfusionMatrix, Transducer, UtilityMatrix, compare, long_run_utility
from yieldwise.decision import decide

# several checks predict at random outputs, some beyond the calibration range on purpose
pytestmark = pytest.mark.filterwarnings("ignore::yieldwise.transducer.ExtrapolationWarning")

W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
MU1 = np.array([[[-1.0], [1.5]], [[-0.5], [1.0]]])
SIGMA1 = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])
LABELS = ("neg", "pos")
U = UtilityMatrix([[1, -2], [0, 3]], decisions=list(LABELS), classes=LABELS)


def one_column(column="score", labels=LABELS):
    scores = np.linspace(-3, 3, 30)
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU1[None], "sigma": SIGMA1[None]},
        pd.DataFrame({column: scores}), np.array(labels, dtype=object)[(scores > 0).astype(int)],
        labels, output_transform="identity", resolution=None,
    )  # fmt: skip


def two_columns(frame_columns=("a", "b")):
    rng = np.random.default_rng(1)
    y = rng.normal(size=(40, 2))
    mu = np.stack([MU1, -MU1], axis=-1)[..., 0, :]  # (draw, component, 2)
    sigma = np.stack([SIGMA1, SIGMA1], axis=-1)[..., 0, :]
    outputs = pd.DataFrame(y, columns=list(frame_columns)) if frame_columns else y
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": mu[None], "sigma": sigma[None]},
        outputs, np.array(LABELS)[(y[:, 0] > 0).astype(int)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip


# ------------------------------------------------------------ item 9: by name
def test_dataframe_columns_are_matched_by_name_and_mismatches_are_errors():
    t = two_columns()
    rng = np.random.default_rng(2)
    y = rng.normal(size=(5, 2))
    right = t.predict_proba(pd.DataFrame(y, columns=["a", "b"]))
    swapped = t.predict_proba(pd.DataFrame(y[:, ::-1], columns=["b", "a"]))
    np.testing.assert_array_equal(right, swapped)  # reordered by name, not by position
    np.testing.assert_array_equal(right, t.predict_proba(y))  # plain arrays: by position
    with pytest.raises(ValueError, match=r"\['a', 'b'\] as at fit time.*found \['x', 'y'\]"):
        t.predict_proba(pd.DataFrame(y, columns=["x", "y"]))
    with pytest.raises(ValueError, match=r"missing \['b'\].*unexpected \['zzz'\]"):
        t.predict_proba(pd.DataFrame(y, columns=["a", "zzz"]))
    with pytest.raises(ValueError, match=r"missing \[\], unexpected \['c'\]"):
        t.predict_proba(pd.DataFrame(np.c_[y, y[:, :1]], columns=["a", "b", "c"]))
    with pytest.raises(ValueError, match="more than once"):
        t.predict_proba(pd.DataFrame(y, columns=["a", "a"]))
    for method in (t.predict_interval, t.draws_proba, lambda o: t.decide(o, U)):
        with pytest.raises(ValueError, match="as at fit time"):
            method(pd.DataFrame(y, columns=["x", "y"]))


def test_a_named_series_must_carry_the_fitted_name():
    t = one_column("score")
    y = np.array([-1.0, 0.5])
    expected = t.predict_proba(y)
    np.testing.assert_array_equal(t.predict_proba(pd.Series(y, name="score")), expected)
    np.testing.assert_array_equal(t.predict_proba(pd.Series(y)), expected)  # unnamed
    np.testing.assert_array_equal(t.predict_proba(pd.DataFrame({"score": y})), expected)
    with pytest.raises(ValueError, match=r"\['score'\] as at fit time.*found \['logit'\]"):
        t.predict_proba(pd.Series(y, name="logit"))


def test_without_fitted_names_frames_are_taken_by_position():
    t = two_columns(frame_columns=None)  # fitted on an array: columns output_0, output_1
    y = np.random.default_rng(3).normal(size=(4, 2))
    with pytest.warns(UserWarning, match="fitted on a plain array"):  # names go unused
        by_position = t.predict_proba(pd.DataFrame(y, columns=["p", "q"]))
    np.testing.assert_array_equal(by_position, t.predict_proba(y))


# ----------------------------------------------- item 10: names, NaN, labels
def test_compare_rejects_names_that_collide_as_text():
    t = one_column()
    with pytest.raises(ValueError, match=r"keys 1 and '1', which are the same name as text"):
        compare({1: t, "1": t}, U)


@pytest.mark.parametrize("threshold", [np.nan, np.inf, "0.5", None, True])
def test_standard_rule_threshold_must_be_a_finite_number(threshold):
    t = one_column()
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        long_run_utility(t, U, rule="standard", threshold=threshold)
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        compare({"t": t}, U, rule="standard", threshold=threshold)


def test_threshold_decides_as_documented():
    """Scores above 0 get 'pos' under threshold 0: long-run utility by the same cells."""
    t = one_column()
    a = long_run_utility(t, U, rule="standard", threshold=0.0).values
    b = long_run_utility(t, U, rule="standard", threshold=-50.0).values  # always 'pos'
    assert not np.allclose(a, b)


@pytest.mark.parametrize(
    "labels",
    [[True, 1, False, 0], [True, False, 1.0, 0.0], np.array([True, 1], dtype=object)],
)
def test_booleans_mixed_with_ones_and_zeros_are_rejected(labels):
    with pytest.raises(ValueError, match=r"mixes the booleans .* Python treats as the same"):
        ConfusionMatrix.from_labels(labels, labels)
    scores = np.linspace(0.01, 0.99, 40)
    classes = np.resize(np.asarray(labels, dtype=object), 40)
    with pytest.raises(ValueError, match="mixes the booleans"):
        Transducer().fit(scores, classes)
    with pytest.raises(ValueError, match="mixes the booleans"):
        UtilityMatrix([[1, 0], [0, 1]], classes=[True, 1])


def test_booleans_alone_and_numbers_alone_are_fine():
    cm = ConfusionMatrix.from_labels([True, False, True], [True, True, True])
    assert set(cm.classes) == {False, True}
    cm = ConfusionMatrix.from_labels([1, 0, 2], [1, 1, 2])
    assert set(cm.classes) == {0, 1, 2}


def test_decide_is_unchanged_by_the_label_checks():
    p = np.array([[0.9, 0.1], [0.2, 0.8]])
    assert list(decide(pd.DataFrame(p, columns=list(LABELS)), U)) == ["neg", "pos"]


# ------------------------------------------- item 8: names with "$" are text
NAMES = ["cost $\\foo$", "_hidden", "50$ and 60$"]


def _render(fig: Figure) -> None:
    fig.savefig(io.BytesIO(), format="png")  # lays out every text: mathtext would fail


def test_compare_plot_shows_any_names_verbatim():
    t = one_column()
    result = compare(dict.fromkeys(NAMES, t), U)
    fig = Figure()
    axes = fig.subplots(1, 2)
    result.plot(axes=axes)
    _render(fig)
    assert [x.get_text() for x in axes[0].get_legend().get_texts()] == NAMES
    assert [x.get_text() for x in axes[1].get_xticklabels()] == NAMES


def test_transducer_plot_shows_class_and_column_names_verbatim():
    t = one_column(column="score $\\foo$", labels=("a $\\bar$", "cost $\\baz$"))
    fig = Figure()
    ax = fig.subplots()
    t.plot(ax=ax)
    _render(fig)
    assert ax.get_xlabel() == "score $\\foo$"
    assert "p(cost $\\baz$ | output)" in [x.get_text() for x in ax.get_legend().get_texts()]
