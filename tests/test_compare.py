"""Comparison of classifiers' long-run utilities (theory 4), against brute-force counting."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from yieldwise import Comparison, Transducer, UtilityMatrix, compare, long_run_utility

RNG = np.random.default_rng(11)


def draws(values, chains=2):
    values = np.asarray(values, float).reshape(chains, -1)
    da = xr.DataArray(values, dims=("chain", "draw"), name="long_run_utility")
    return da.assign_coords(integration_error=0.0)


# Small independent posteriors with ties impossible (continuous values).
A, B, C = RNG.normal(0.80, 0.02, 24), RNG.normal(0.79, 0.03, 30), RNG.normal(0.70, 0.05, 18)


@pytest.fixture
def independent():
    return Comparison({"a": draws(A), "b": draws(B), "c": draws(C)})


def test_superiority_over_all_pairs_of_draws(independent):
    table = independent.prob_superiority()
    samples = {"a": A, "b": B, "c": C}
    for x, y in itertools.permutations(samples, 2):
        brute = np.mean([[s > t for t in samples[y]] for s in samples[x]])
        assert table.loc[x, y] == pytest.approx(brute, abs=1e-12)
        assert table.loc[x, y] + table.loc[y, x] == pytest.approx(1.0)
    assert np.isnan(np.diag(table.values)).all()


def test_prob_best_over_all_triples_of_draws(independent):
    best = independent.prob_best()
    counts = {"a": 0, "b": 0, "c": 0}
    for a, b, c in itertools.product(A, B, C):
        counts[["a", "b", "c"][int(np.argmax([a, b, c]))]] += 1
    total = A.size * B.size * C.size
    for name in counts:
        assert best[name] == pytest.approx(counts[name] / total, abs=1e-12)
    assert best.sum() == pytest.approx(1.0)


def test_paired_draws_are_compared_draw_by_draw():
    x = RNG.normal(0, 1, 40)
    y = x + RNG.normal(0.1, 0.05, 40)  # y exceeds x on most draws: strongly correlated
    paired = Comparison({"x": draws(x), "y": draws(y)}, paired=True)
    assert paired.prob_superiority().loc["y", "x"] == pytest.approx(np.mean(y > x))
    assert paired.prob_best()["y"] == pytest.approx(np.mean(y > x))
    diff = paired.difference("y", "x", prob=0.8)
    np.testing.assert_allclose(diff.values, y - x)
    assert diff.attrs["interval"] == pytest.approx(tuple(np.quantile(y - x, [0.1, 0.9])))
    # Ignoring the pairing would be far less certain.
    unpaired = Comparison({"x": draws(x), "y": draws(y)})
    assert unpaired.prob_superiority().loc["y", "x"] < 0.7 < np.mean(y > x)


def test_difference_of_independent_posteriors_and_summary(independent):
    diff = independent.difference("a", "c", prob=0.9, seed=1)
    assert diff.size == max(A.size, C.size)
    assert diff.attrs["mean"] == pytest.approx(A.mean() - C.mean(), abs=0.02)
    assert diff.attrs["prob_positive"] == pytest.approx(np.mean(A[:, None] > C[None, :]))
    table = independent.summary().set_index("classifier")
    assert table.loc["b", "mean"] == pytest.approx(B.mean())
    assert table.loc["b", "sd"] == pytest.approx(B.std(ddof=1))
    assert table.loc["c", "q95"] == pytest.approx(np.quantile(C, 0.95))
    assert table["prob_best"].sum() == pytest.approx(1.0)
    with pytest.raises(KeyError, match="unknown classifier 'z'"):
        independent.difference("a", "z")


def test_names_are_escaped_in_html():
    evil = "<script>alert(1)</script>"
    shown = Comparison({evil: draws(A), "b": draws(B)})._repr_html_()
    assert "<script>" not in shown and "&lt;script&gt;" in shown


def test_plot_draws_densities_and_heat_map(independent):
    import matplotlib.pyplot as plt

    density, heat = independent.plot()
    assert len(density.get_lines()) == 3
    assert heat.get_title() == "P(row yields more than column)"
    assert [t.get_text() for t in heat.texts].count("nan") == 0 and len(heat.texts) == 6
    plt.close("all")


# ------------------------------------------------------ from fitted transducers
W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])
LABELS = ("neg", "pos")


def given(mu):
    scores = np.linspace(-3, 3, 30)
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": np.asarray(mu)[None], "sigma": SIGMA[None]},
        pd.DataFrame({"score": scores}), np.array(LABELS)[(scores > 0).astype(int)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip


def test_compare_fitted_transducers_uses_their_long_run_utilities():
    sharp = given([[[-2.0], [2.0]], [[-1.5], [1.5]]])  # classes further apart: better
    blunt = given([[[-0.5], [0.5]], [[-0.3], [0.3]]])
    u = UtilityMatrix([[1, -2], [0, 3]], decisions=["a", "b"], classes=LABELS)
    result = compare({"sharp": sharp, "blunt": blunt}, u)
    us, ub = long_run_utility(sharp, u).values.ravel(), long_run_utility(blunt, u).values.ravel()
    np.testing.assert_allclose(result.utilities["sharp"].values.ravel(), us)
    expected = np.mean(us[:, None] > ub[None, :])  # 2 draws each: 4 pairs
    assert result.prob_superiority().loc["sharp", "blunt"] == pytest.approx(expected)
    rescaled = long_run_utility(blunt, u, rescale=True).values
    np.testing.assert_allclose(result.rescaled["blunt"], rescaled)
    batch = compare({"sharp": sharp, "blunt": blunt}, {"u": u, "v": u.standard()})
    with pytest.raises(ValueError, match="choose one with matrix="):
        batch.prob_superiority()
    # the standard form is an affine image of u: the same decisions, the same ranking
    assert batch.prob_superiority(matrix="v").loc["sharp", "blunt"] == pytest.approx(expected)
    assert set(batch.summary()["matrix"]) == {"u", "v"}
    alone = compare({"sharp": sharp}, u)  # one classifier: its summary, P(best) = 1
    assert alone.prob_best()["sharp"] == 1.0 and alone.prob_superiority().isna().all().all()
    np.testing.assert_allclose(alone.utilities["sharp"], result.utilities["sharp"])
    with pytest.raises(ValueError, match="at least one classifier"):
        compare({}, u)
    with pytest.raises(ValueError, match=r"rule has entries \['c'\] that name no classifier"):
        compare({"sharp": sharp, "blunt": blunt}, u,
                rule={"sharp": "augmented", "blunt": "augmented", "c": "standard"})  # fmt: skip
    with pytest.raises(TypeError, match="mapping name -> fitted Transducer"):
        compare([sharp, blunt], u)
    with pytest.raises(ValueError, match="fitted on several"):
        compare(sharp, u)


def test_tuple_names_of_fit_many_are_shown_as_text_and_accepted_as_keys():
    """fit_many names tasks by tuples; compare shows them as fit_many does ("A / forest";
    it showed "('A', 'forest')") and answers for the tuple as for the text, while an
    unknown name or matrix is refused by name (they were xarray's KeyErrors)."""
    sharp = given([[[-2.0], [2.0]], [[-1.5], [1.5]]])
    blunt = given([[[-0.5], [0.5]], [[-0.3], [0.3]]])
    u = UtilityMatrix([[1, -2], [0, 3]], decisions=["a", "b"], classes=LABELS)
    result = compare({("A", "forest"): sharp, ("B", "forest"): blunt}, u)
    assert result.names == ["A / forest", "B / forest"]
    by_tuple = result.difference(("A", "forest"), ("B", "forest"))
    by_text = result.difference("A / forest", "B / forest")
    np.testing.assert_array_equal(by_tuple.values, by_text.values)
    np.testing.assert_array_equal(result.samples(("B", "forest")), result.samples("B / forest"))
    with pytest.raises(KeyError, match=r"unknown classifier 'zzz'; the comparison has"):
        result.samples("zzz")
    batch = compare({"sharp": sharp, "blunt": blunt}, {"u": u, "v": u.standard()})
    with pytest.raises(ValueError, match=r"matrix=7 is not one of \['u', 'v'\]"):
        batch.prob_best(matrix=7)
    with pytest.raises(ValueError, match="the same name as text"):
        compare({("A", "forest"): sharp, "A / forest": blunt}, u)
    with pytest.raises(ValueError, match=r"axes must be two matplotlib Axes .* found 1"):
        result.plot(axes=1)
