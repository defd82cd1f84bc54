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


# ------------------------------------------- ties read before min U is added back
BIG = 1e9  # ulp(1e9) = 1.2e-7: a million times the tie tolerance of a range-1 matrix

# the joint transducer of given draws: the ``joint`` fixture of tests/conftest.py


@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # a six-draw posterior
@pytest.mark.parametrize("offset", [0.0, BIG])
def test_classifiers_that_yield_alike_tie_under_a_huge_offset(offset, joint):
    """Deciding "pos" is worth 1 + offset whatever the class: every draw of every
    classifier is 1 + offset, computed with rounding. Two different fits (independent
    draws) and a joint fit's members and ensemble (paired) tie on every (pair of) draws,
    and share P(best) equally, under U + 1e9 exactly as under U: the ties are read on
    the draws of U - min U. Read on the draws of U + 1e9, rounding of 1e-7 decided them:
    P(tie) 0.25 for the two fits (P(best) 0.625 and 0.375), 1/3 between the members and
    0 with the ensemble (P(best) 1/2, 1/3, 1/6)."""
    worth_one = UtilityMatrix(np.array([[0.0, 0.0], [1.0, 1.0]]) + offset, decisions=LABELS,
                              classes=LABELS)  # fmt: skip
    sharp = given([[[-2.0], [2.0]], [[-1.5], [1.5]]])
    blunt = given([[[-0.5], [0.5]], [[-0.3], [0.3]]])
    independent = compare({"sharp": sharp, "blunt": blunt}, worth_one)
    for result in (independent, compare(joint, worth_one)):
        ties = result.prob_tie().values
        assert (ties[~np.eye(len(result.names), dtype=bool)] == 1.0).all(), ties
        assert (result.prob_superiority().fillna(0.0) == 0.0).all().all()
        np.testing.assert_allclose(result.prob_best(), 1 / len(result.names), atol=1e-12)
        for name in result.names:  # the utilities shown are 1 + offset
            gap = np.abs(result.samples(name) - (1.0 + offset)).max()
            assert gap <= 1e-13 + 2 * np.spacing(1.0 + offset)  # rounding
            assert result.difference(name, result.names[0]).attrs["prob_tie"] == 1.0


def perturbed(seed, scale=1e-6, n_draws=30):
    """A two-component mixture whose draws differ only in their class weights, by about
    ``scale``: long-run accuracies 1e-6 apart, far above the tie tolerance 1e-12."""
    rng = np.random.default_rng(seed)
    alpha = np.broadcast_to([[0.9, 0.1], [0.2, 0.8]], (n_draws, 2, 2)).copy()
    alpha[:, :, 0] += rng.normal(0, scale, (n_draws, 2))
    alpha[:, :, 1] = 1 - alpha[:, :, 0]
    scores = np.linspace(-3, 3, 30)
    return Transducer.from_draws(
        {"w": np.broadcast_to([0.6, 0.4], (1, n_draws, 2)).copy(), "alpha": alpha[None],
         "mu": np.broadcast_to([[-1.0], [1.5]], (1, n_draws, 2, 1)).copy(),
         "sigma": np.broadcast_to([[1.0], [0.7]], (1, n_draws, 2, 1)).copy()},
        pd.DataFrame({"score": scores}), np.array(LABELS)[(scores > 0).astype(int)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip


def test_a_small_difference_survives_a_huge_offset():
    """Two fits whose long-run accuracies differ by about 1e-6 (a millionth of the range):
    under U + 1e9 P(A beats B), P(tie), P(best), the differences and the summary's sd are
    those of U, counted by brute force from U's draws; the utilities shown are U's plus
    1e9. Read on the draws of U + 1e9 (rounding of 1e-7 to 1e-6) P(A beats B) went from
    0.477 to 0.457."""
    from yieldwise.utility import TIE_RTOL

    a, b = perturbed(1), perturbed(2)
    accuracy = np.array([[1.0, 0.0], [0.0, 1.0]])
    ua = long_run_utility(a, UtilityMatrix(accuracy, classes=LABELS)).values.ravel()
    ub = long_run_utility(b, UtilityMatrix(accuracy, classes=LABELS)).values.ravel()
    gaps = np.abs(ua[:, None] - ub[None, :])
    assert 1e-8 < np.median(gaps) < 1e-5  # the draws differ by about a millionth
    tol = TIE_RTOL * 1.0
    over = np.mean([[x > y + tol for y in ub] for x in ua])
    under = np.mean([[y > x + tol for y in ub] for x in ua])
    assert 0.2 < over < 0.8
    base = compare({"a": a, "b": b}, UtilityMatrix(accuracy, classes=LABELS))
    shifted = compare({"a": a, "b": b}, UtilityMatrix(accuracy + BIG, classes=LABELS))
    both = {"u": UtilityMatrix(accuracy, classes=LABELS),
            "big": UtilityMatrix(accuracy + BIG, classes=LABELS)}  # fmt: skip
    batch = compare({"a": a, "b": b}, both)
    np.testing.assert_array_equal(batch.utility_min, [0.0, BIG])
    for result, matrix in ((base, None), (shifted, None), (batch, "u"), (batch, "big")):
        table = result.prob_superiority(matrix)
        assert table.loc["a", "b"] == pytest.approx(over, abs=1e-12), matrix
        assert table.loc["b", "a"] == pytest.approx(under, abs=1e-12), matrix
        assert result.prob_tie(matrix).loc["a", "b"] == pytest.approx(1 - over - under, abs=1e-12)
        np.testing.assert_allclose(result.prob_best(matrix), base.prob_best(), atol=1e-12)
        diff = result.difference("a", "b", matrix=matrix, seed=3)
        np.testing.assert_allclose(diff.values, base.difference("a", "b", seed=3).values,
                                   rtol=0, atol=1e-15)  # fmt: skip
        assert diff.attrs["prob_positive"] == pytest.approx(over, abs=1e-12)
    # the utilities shown are U's plus the offset, to one ulp of 1e9
    for name, draws_u in (("a", ua), ("b", ub)):
        assert np.abs(shifted.samples(name) - (draws_u + BIG)).max() <= np.spacing(BIG)
        shown = shifted.utilities[name].values.ravel()
        assert np.abs(shown - (draws_u + BIG)).max() <= np.spacing(BIG)
        assert shifted.utilities[name].attrs["integration"] == "quadrature"
    table, plain = shifted.summary().set_index("classifier"), base.summary().set_index("classifier")
    np.testing.assert_allclose(table["sd"], plain["sd"], rtol=1e-12)  # the draws' own spread
    np.testing.assert_allclose(table[["mean", "q5", "q50", "q95"]], plain[["mean", "q5", "q50",
                               "q95"]] + BIG, rtol=0, atol=np.spacing(BIG))  # fmt: skip
    np.testing.assert_array_equal(table["prob_best"], plain["prob_best"])


def test_compare_reads_each_matrix_range_from_the_long_run_results(monkeypatch):
    """compare takes ``max U - min U`` and ``min U`` from the ``utility_spread`` and
    ``utility_min`` coordinates of the long-run results (one parse of the utility); a
    classifier whose coordinates differ from the others' is an internal error; a one-shot
    iterator of matrices serves every classifier."""
    import importlib

    from yieldwise.utility import TIE_RTOL

    compare_module = importlib.import_module("yieldwise.compare")  # yieldwise.compare: the function
    sharp = given([[[-2.0], [2.0]], [[-1.5], [1.5]]])
    blunt = given([[[-0.5], [0.5]], [[-0.3], [0.3]]])
    u = UtilityMatrix([[1, -2], [0, 3]], decisions=["a", "b"], classes=LABELS)
    v = UtilityMatrix([[4, 0], [0, 2]], decisions=["a", "b"], classes=LABELS)
    listed = compare({"sharp": sharp, "blunt": blunt}, [u, v])
    np.testing.assert_array_equal(listed.spread, [5.0, 4.0])
    np.testing.assert_array_equal(listed.utility_min, [-2.0, 0.0])
    once = compare({"sharp": sharp, "blunt": blunt}, iter([u, v]))
    np.testing.assert_array_equal(once.spread, listed.spread)
    np.testing.assert_array_equal(once.samples("blunt", matrix=1), listed.samples("blunt", 1))
    assert compare({"sharp": sharp}, iter([u, v])).tie_tolerance(matrix=0) == 5 * TIE_RTOL
    real = compare_module.long_run_core
    calls = []

    def doctored(transducer, *args, **kwargs):
        shifted, rescaled = real(transducer, *args, **kwargs)
        calls.append(transducer)
        if len(calls) == 1 or scale_all:
            shifted = shifted.assign_coords(utility_spread=shifted["utility_spread"] * 1000)
        return shifted, rescaled

    monkeypatch.setattr(compare_module, "long_run_core", doctored)
    scale_all = True
    result = compare({"sharp": sharp, "blunt": blunt}, [u, v])
    np.testing.assert_array_equal(result.spread, [5000.0, 4000.0])
    assert result.tie_tolerance(matrix=1) == 4000 * TIE_RTOL
    scale_all = False
    calls.clear()
    message = r"different utility matrices for the classifiers 'sharp' .* and 'blunt'.*report"
    with pytest.raises(RuntimeError, match=message):
        compare({"sharp": sharp, "blunt": blunt}, [u, v])


def test_comparison_checks_utility_min_and_adds_it_to_what_it_shows():
    shifted = Comparison({"a": draws(A), "b": draws(B)}, spread=2.0, utility_min=-3.0)
    plain = Comparison({"a": draws(A), "b": draws(B)}, spread=2.0)
    np.testing.assert_array_equal(shifted.samples("a"), A - 3.0)
    np.testing.assert_array_equal(shifted.utilities["b"].values.ravel(), B - 3.0)
    pd.testing.assert_frame_equal(shifted.prob_superiority(), plain.prob_superiority())
    np.testing.assert_array_equal(shifted.difference("a", "b").values,
                                  plain.difference("a", "b").values)  # fmt: skip
    table = shifted.summary().set_index("classifier")
    assert table.loc["b", "mean"] == pytest.approx(B.mean() - 3.0)
    assert table.loc["b", "q95"] == pytest.approx(np.quantile(B, 0.95) - 3.0)
    assert plain.utilities is plain._shifted  # nothing to add: the draws themselves
    for bad in ([1.0, 2.0], np.nan):
        with pytest.raises(ValueError, match=r"utility_min must be one finite number per "
                                             r"utility matrix \(1\)"):  # fmt: skip
            Comparison({"a": draws(A)}, utility_min=bad)


@pytest.mark.parametrize("name", ["chain", "draw", "matrix"])
def test_a_classifier_named_like_a_dimension_is_refused_by_name(name, joint, monkeypatch):
    """The comparison holds each classifier's draws as a variable of one Dataset whose
    dimensions are chain, draw and matrix: a classifier so named made xarray raise its own
    unnamed error after every long-run utility was computed. Refused by name first, for a
    mapping and for a joint transducer's members."""
    from yieldwise.compare import RESERVED_NAMES

    assert name in RESERVED_NAMES
    utility = UtilityMatrix([[1, -2], [0, 3]], classes=LABELS)
    with pytest.raises(ValueError, match=f"classifier named '{name}'.*rename it"):
        compare({name: joint.marginal("rf"), "nn": joint.marginal("nn")}, utility)
    monkeypatch.setattr(joint, "members_", {name: ["rf"], "nn": ["nn"]})
    with pytest.raises(ValueError, match=f"member named '{name}'.*rename it"):
        compare(joint, {"a": utility, "b": utility})
