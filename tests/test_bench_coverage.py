"""The coverage study (bench/coverage.py) without Stan: hits, goals and its results files.

The transducers here are built from given draws whose class probabilities do not depend on
the output (every component of draw t has the class probabilities ``a_t``), so that each
draw's ``F_t(c | y)`` is ``a_tc`` everywhere, the bands are quantiles of four known numbers,
and each draw's long-run utility is ``sum_c a_tc U[d, c]`` for the one decision ``d`` the
predictive probabilities ``mean_t a_t`` choose: every count below is worked out by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from yieldwise import Transducer


@pytest.fixture(scope="module")
def cov(bench_import):
    pytest.importorskip("sklearn")  # decision_quality.py imports the calibration peers
    pytest.importorskip("betacal")
    # loaded from its file: "import coverage" could find the coverage.py package instead
    return bench_import("coverage", as_name="bench_coverage")


#: p(1 | y) of the four draws, the same at every output; their mean 0.25 is the predictive.
P1 = np.array([0.1, 0.2, 0.3, 0.4])
#: Equal-tailed bands of these four numbers (numpy's linear quantiles: position q * 3):
#: 50 %: q = 0.25, 0.75 -> 0.1 + 0.075, 0.3 + 0.025; 75 %: q = 0.125, 0.875 -> positions
#: 0.375, 2.625; 95 %: q = 0.025, 0.975 -> positions 0.075, 2.925.
BANDS = {0.5: (0.175, 0.325), 0.75: (0.1375, 0.3625), 0.95: (0.1075, 0.3925)}
#: True p(1 | y) at nine equally likely cells (so the nine fixed outputs are cells 0..8).
TRUTH = np.array([0.0005, 0.12, 0.15, 0.2, 0.25, 0.35, 0.39, 0.5, 0.9995])


def given_transducer(p1=P1, classes=2):
    """Four draws (one chain) of a two-kernel 1-D mixture with p(c | y) = a_t everywhere."""
    s = len(p1)
    if classes == 2:
        a = np.column_stack([1 - p1, p1])
    else:  # the remaining mass split evenly over the other classes
        a = np.column_stack([np.repeat((1 - p1)[:, None] / (classes - 1), classes - 1, 1), p1])
    draws = {
        "w": np.tile([0.4, 0.6], (1, s, 1)),
        "alpha": np.repeat(a[None, :, None, :], 2, axis=2),
        "mu": np.tile(np.array([[-1.0], [1.0]]), (1, s, 1, 1)),
        "sigma": np.ones((1, s, 2, 1)),
    }
    calibration = np.linspace(-3, 3, 30)
    return Transducer.from_draws(
        draws, pd.DataFrame({"score": calibration}), np.arange(30) % classes,
        tuple(range(classes)), output_transform="identity", resolution=None,
    )  # fmt: skip


def nine_cell_problem(cov, truth=TRUTH, name="logistic"):
    """Nine equally likely outputs -4..4 with the given p(1 | y)."""
    from _problems import Problem

    joint = np.column_stack([1 - truth, truth]) / truth.size
    prevalences = joint.sum(axis=0)
    return Problem(
        name, "nine cells", prevalences, None, np.linspace(-4, 4, 9)[:, None],
        joint / prevalences, score=lambda y: y[:, 0],
        raw_probability=lambda y: np.column_stack([1 - y[:, 0], y[:, 0]]), columns=["score"],
    )  # fmt: skip


def test_nine_outputs_are_the_cells_at_the_quantiles(cov):
    # cumulative masses 1/9, 2/9, ...: 5 % falls in cell 0, 16.25 % in cell 1, ..., 95 % in 8
    np.testing.assert_array_equal(cov.coverage_outputs(nine_cell_problem(cov), 9), np.arange(9))


def test_decision_outputs_are_the_informative_cells_at_the_quantiles(cov):
    # TRUTH's cells 1..7 lie inside [0.001, 0.999], equally likely: restricted cumulative
    # masses k / 7 = 0.143, 0.286, 0.429, 0.571, 0.714, 0.857, 1. The quantiles 0.05,
    # 0.1625, 0.275, 0.3875, 0.5, 0.6125, 0.725, 0.8375, 0.95 fall in the 1st, 2nd, 2nd,
    # 3rd, 4th, 5th, 6th, 6th and 7th of them.
    picks = cov.decision_outputs(nine_cell_problem(cov), 9)
    np.testing.assert_array_equal(picks, [1, 2, 2, 3, 4, 5, 6, 6, 7])
    # ordered by the truth, not by the output: reversed truths reverse the picks
    reversed_problem = nine_cell_problem(cov, truth=TRUTH[::-1])
    np.testing.assert_array_equal(
        cov.decision_outputs(reversed_problem, 9), [7, 6, 6, 5, 4, 3, 2, 2, 1]
    )
    with pytest.raises(ValueError, match="no output with a truth inside"):
        cov.decision_outputs(nine_cell_problem(cov, truth=np.full(9, 0.9999)), 9)


def test_measure_records_bands_where_decisions_are_uncertain(cov):
    problem = nine_cell_problem(cov)
    matrices, _ = cov.utility_matrices(problem, 1, 2026)
    picks = cov.decision_outputs(problem, 9)
    record = cov.measure(problem, given_transducer(), np.arange(9), matrices, picks)
    decision = record["bands_decision"]
    np.testing.assert_allclose(np.ravel(decision["truth"]), TRUTH[picks], rtol=1e-12)
    np.testing.assert_allclose(decision["lower"]["0.5"], np.full((9, 1), BANDS[0.5][0]))
    # truths .12 .15 .15 .2 .25 .35 .39 .39 .5 against the bands of BANDS:
    #   50 % [0.175, 0.325]: .2, .25 -> 2; 75 % [0.1375, 0.3625]: .15 x 2, .2, .25, .35 -> 5;
    #   95 % [0.1075, 0.3925]: all but .5 -> 8
    for p, hits in ((0.5, 2), (0.75, 5), (0.95, 8)):
        assert cov.band_counts(record, p, True, key="bands_decision") == (hits, 9)
    # the nine outputs of the output law are unchanged by it
    assert cov.band_counts(record, 0.5, inside_only=True) == (2, 7)
    # a fit recorded before the decision outputs were measured has no such checks
    del record["bands_decision"]
    assert cov.band_counts(record, 0.5, True, key="bands_decision") == (0, 0)


def test_measure_records_bands_and_intervals_worked_by_hand(cov):
    problem = nine_cell_problem(cov)
    matrices, _ = cov.utility_matrices(problem, 1, 2026)  # the four named binary matrices
    record = cov.measure(problem, given_transducer(), np.arange(9), matrices)
    bands = record["bands"]
    assert bands["classes"] == [1]
    np.testing.assert_allclose(np.ravel(bands["truth"]), TRUTH, rtol=1e-12)
    for p, (low, high) in BANDS.items():
        np.testing.assert_allclose(bands["lower"][str(p)], np.full((9, 1), low), rtol=1e-9)
        np.testing.assert_allclose(bands["upper"][str(p)], np.full((9, 1), high), rtol=1e-9)
    # Hits (lower <= truth <= upper); 0.0005 and 0.9995 lie outside [0.001, 0.999]:
    #   50 % [0.175, 0.325]: 0.2, 0.25                       -> 2 of 7 inside, 2 of 9
    #   75 % [0.1375, 0.3625]: 0.15, 0.2, 0.25, 0.35          -> 4 of 7, 4 of 9
    #   95 % [0.1075, 0.3925]: 0.12, ..., 0.39 (not 0.5)      -> 6 of 7, 6 of 9
    for p, hits in ((0.5, 2), (0.75, 4), (0.95, 6)):
        assert cov.band_counts(record, p, inside_only=True) == (hits, 7)
        assert cov.band_counts(record, p, inside_only=False) == (hits, 9)
    # Long run. r_1 = sum(TRUTH) / 9 = 2.96 / 9; the predictive p(1 | y) = 0.25 everywhere
    # picks one decision per matrix (rows: decisions; columns: classes):
    #   [[1,0],[0,1]]:     0.75 vs 0.25  -> 0: truth r_0,     draws a_t0 = 0.9 .. 0.6
    #   [[1,-10],[0,10]]: -1.75 vs 2.5   -> 1: truth 10 r_1,  draws 10 a_t1 = 1 .. 4
    #   [[1,0],[-10,10]]:  0.75 vs -5    -> 0: truth r_0,     draws a_t0
    #   [[10,0],[-10,1]]:  7.5 vs -7.25  -> 0: truth 10 r_0,  draws 10 a_t0 = 9 .. 6
    r1 = 2.96 / 9
    long_run = record["long_run"]
    np.testing.assert_allclose(long_run["truth"], [1 - r1, 10 * r1, 1 - r1, 10 * (1 - r1)])
    scale = np.array([1, 10, 1, 10])
    for p, (low, high) in BANDS.items():
        # a_t0 = 1 - a_t1: its band is (1 - high, 1 - low)
        expected_low = np.where([1, 0, 1, 1], 1 - high, low) * scale
        expected_high = np.where([1, 0, 1, 1], 1 - low, high) * scale
        np.testing.assert_allclose(long_run["lower"][str(p)], expected_low, rtol=1e-6)
        np.testing.assert_allclose(long_run["upper"][str(p)], expected_high, rtol=1e-6)
    # truths 0.671, 3.289, 0.671, 6.711 against 50 % [0.675, 0.825], [1.75, 3.25],
    # [0.675, 0.825], [6.75, 8.25]: all just outside; the 75 and 95 % intervals hold all four
    assert [cov.interval_counts(record, p) for p in cov.PROBS] == [(0, 4), (4, 4), (4, 4)]


def test_multiclass_checks_every_class(cov):
    from _problems import Problem

    # three classes, nine equally likely cells; p(2 | y) = TRUTH, the rest split evenly
    probs = np.column_stack([(1 - TRUTH) / 2, (1 - TRUTH) / 2, TRUTH])
    joint = probs / 9
    problem = Problem(
        "three", "", joint.sum(axis=0), None, np.linspace(-4, 4, 9)[:, None],
        joint / joint.sum(axis=0), score=lambda y: y, raw_probability=lambda y: y,
        columns=["score"],
    )  # fmt: skip
    matrices, names = cov.utility_matrices(problem, 6, 2026)
    assert matrices.shape == (4, 3, 3) and names == [f"random {i}" for i in range(4)]
    record = cov.measure(problem, given_transducer(classes=3), np.arange(9), matrices)
    assert record["bands"]["classes"] == [0, 1, 2]
    # class 2: the binary case's bands; classes 0 and 1: p = (1 - a_t1) / 2 = 0.45 .. 0.3,
    # bands (1 - high) / 2 .. (1 - low) / 2, e.g. 50 %: [0.3375, 0.4125]
    np.testing.assert_allclose(np.array(record["bands"]["lower"]["0.5"])[:, 0], 0.3375)
    # at the 50 % level the classes 0 and 1 truths (1 - TRUTH) / 2 =
    # 0.49975, 0.44, 0.425, 0.4, 0.375, 0.325, 0.305, 0.25, 0.00025: 0.4 and 0.375 are inside
    # [0.3375, 0.4125], for each of the two classes; class 2 adds 2 (as above). The checks
    # inside [0.001, 0.999]: 9 + 9 - 1 (0.00025) for classes 0 and 1, 7 for class 2.
    assert cov.band_counts(record, 0.5, inside_only=True) == (2 + 2 + 2, 8 + 8 + 7)
    assert cov.band_counts(record, 0.5, inside_only=False) == (6, 27)


def test_band_counts_leave_out_hits_outside_the_range(cov):
    record = {
        "bands": {
            "truth": [[0.0004], [0.5], [0.9999], [0.001]],
            "lower": {"0.5": [[0.0], [0.6], [0.99], [0.001]]},
            "upper": {"0.5": [[0.001], [0.7], [1.0], [0.002]]},
        }
    }
    # hits: 0.0004 (outside the range), 0.9999 (outside), 0.001 (on the lower bound, inside)
    assert cov.band_counts(record, 0.5, inside_only=False) == (3, 4)
    assert cov.band_counts(record, 0.5, inside_only=True) == (1, 2)


def test_goal_logic(cov):
    assert cov.goal_met({0.5: (45, 100), 0.75: (80, 100), 0.95: (90, 100)}, 0.05) is True
    assert cov.goal_met({0.5: (44, 100), 0.75: (75, 100), 0.95: (95, 100)}, 0.05) is False
    assert cov.goal_met({0.5: (50, 100), 0.75: (75, 100), 0.95: (89, 100)}, 0.05) is False
    assert cov.goal_met({0.5: (57, 100), 0.75: (68, 100), 0.95: (88, 100)}, 0.07) is True
    assert cov.goal_met({0.5: (58, 100), 0.75: (75, 100), 0.95: (95, 100)}, 0.07) is False
    assert cov.goal_met({0.5: (0, 0), 0.75: (0, 0), 0.95: (0, 0)}, 0.05) is None
    assert cov.standard_error(0.5, 100) == pytest.approx(0.05)
    assert cov.standard_error(0.95, 19) == pytest.approx(0.05)


def test_clustered_standard_error_by_hand(cov):
    # two fits of 10 checks, 5 and 4 hits: p = 0.45, residuals +-0.5, 2 / 1 * 0.5 = 1
    assert cov.clustered_standard_error([(5, 10), (4, 10)]) == pytest.approx(0.05)
    # one check per fit: the binomial error at p times sqrt(m / (m - 1)); p = 0.75,
    # sqrt(0.75 * 0.25 / 4) * sqrt(4 / 3) = 0.25
    assert cov.clustered_standard_error([(1, 1), (0, 1), (1, 1), (1, 1)]) == pytest.approx(0.25)
    # fits without checks do not count; one fit with checks has no error
    assert cov.clustered_standard_error([(5, 10), (0, 0), (4, 10)]) == pytest.approx(0.05)
    assert np.isnan(cov.clustered_standard_error([(5, 10), (0, 0)]))
    # every fit the same share: 0
    assert cov.clustered_standard_error([(9, 9), (9, 9), (9, 9)]) == 0.0


def test_clustered_standard_error_matches_the_spread_of_simulated_studies(cov):
    """Known truth: 20 fits of 9 checks each, whose checks share a fit-level coverage
    (Beta with mean 0.75, so the checks of one fit are correlated). Over 4,000 simulated
    studies the clustered error tracks the real spread of the pooled coverage, and the
    binomial error, which takes the 180 checks as independent, understates it."""
    rng = np.random.default_rng(7)
    studies, fits, checks = 4000, 20, 9
    share = rng.beta(3.0, 1.0, size=(studies, fits))  # mean 0.75, sd 0.19 between fits
    hits = rng.binomial(checks, share)
    pooled = hits.sum(axis=1) / (fits * checks)
    errors = np.array([cov.clustered_standard_error([(h, checks) for h in row]) for row in hits])
    spread = pooled.std()
    # closed form: the binomial variance times the design effect 1 + (k - 1) rho, with the
    # intra-fit correlation rho = var(share) / (p (1 - p)) = (3 / 80) / (3 / 16) = 0.2
    binomial = cov.standard_error(0.75, fits * checks)
    assert spread == pytest.approx(binomial * np.sqrt(1 + (checks - 1) * 0.2), rel=0.05)
    assert np.sqrt(np.mean(errors**2)) == pytest.approx(spread, rel=0.08)
    assert binomial < 0.7 * spread


def test_paired_change_by_hand(cov):
    # two fits of 10 checks: +2 and +0 hits -> change 2 / 20 = 0.1; residuals 2 - 1, 0 - 1:
    # sqrt(2 / 1 * 2) / 20 = 0.1
    change, error = cov.paired_change([((3, 10), (5, 10)), ((4, 10), (4, 10))])
    assert change == pytest.approx(0.1) and error == pytest.approx(0.1)
    # fits without checks are left out; one fit has no error
    change, error = cov.paired_change([((3, 10), (5, 10)), ((0, 0), (0, 0))])
    assert change == pytest.approx(0.2) and np.isnan(error)
    assert all(np.isnan(cov.paired_change([((0, 0), (0, 0))])))
    with pytest.raises(ValueError, match="same checks"):
        cov.paired_change([((3, 10), (5, 9))])


def test_missed_beyond_noise(cov):
    counts = {0.5: (30, 100), 0.75: (66, 100), 0.95: (80, 100)}
    errors = {0.5: 0.05, 0.75: 0.02, 0.95: np.nan}
    # 50 %: gap 20, 15 beyond the tolerance, 3 errors; 75 %: gap 9, 4 beyond, 2 errors:
    # not more than two; 95 %: no error, never listed
    assert cov.missed_beyond_noise(counts, errors, 0.05) == [0.5]
    assert cov.missed_beyond_noise(counts, {**errors, 0.75: 0.0199}, 0.05) == [0.5, 0.75]
    assert cov.missed_beyond_noise({0.5: (0, 0), 0.75: (0, 0), 0.95: (0, 0)}, errors, 0.05) == []


def test_calibrated_pass_chance_and_repetitions_by_hand(cov):
    from statistics import NormalDist

    # P(|N(0, se)| <= 0.05): se 0.05 -> 0.6827 (one sd), se 0.025 -> 0.9545 (two sd's)
    chance = cov.calibrated_pass_chance({0.5: 0.05, 0.75: 0.05, 0.95: 0.025}, 0.05)
    assert chance == pytest.approx(0.682689**2 * 0.954500, rel=1e-5)
    assert cov.calibrated_pass_chance({0.5: 0.0, 0.75: 0.0, 0.95: 0.0}, 0.05) == 1.0
    assert np.isnan(cov.calibrated_pass_chance({0.5: np.nan, 0.75: 0.1, 0.95: 0.1}, 0.05))
    # one cell of 20 fits with error 0.05 at every level: all three within 0.05 with
    # probability 0.9 needs each level at 0.9 ** (1 / 3), i.e. tolerance / se = z with
    # 2 Phi(z) - 1 = 0.9 ** (1 / 3); se = 0.05 sqrt(20 / R), so R = 20 (z 0.05 / 0.05) ** 2
    z = NormalDist().inv_cdf((1 + 0.9 ** (1 / 3)) / 2)
    cell = {"fits": 20, "errors": {"long_run": {0.5: 0.05, 0.75: 0.05, 0.95: 0.05}},
            "long_run": {0.5: (10, 20), 0.75: (15, 20), 0.95: (19, 20)}}  # fmt: skip
    needed = cov.repetitions_needed({("x", 1): cell}, "long_run", 0.05)
    assert needed == int(np.ceil(20 * z**2))


def test_settings_groups_say_which_fits_ran_at_which_settings(cov):
    fits = {f"{name}|{n}|0": fake_record(cov, name, n, 0, 5)
            for name, n in (("votes", 300), ("votes", 3600), ("beta", 3600))}  # fmt: skip
    one = cov._settings_groups(fits)
    assert one == "1 chains x 4 draws after 0 warm-up, adapt_delta 0.8, max_treedepth 10"
    for key in ("votes|3600|0", "beta|3600|0"):
        settings = {**SAMPLER_META["settings"], "adapt_delta": 0.99}
        fits[key]["sampler"] = {**fits[key]["sampler"], "settings": settings}
    assert cov._settings_groups(fits) == (
        "1 chains x 4 draws after 0 warm-up, adapt_delta 0.8, max_treedepth 10: 1 fit "
        "(votes 300); 1 chains x 4 draws after 0 warm-up, adapt_delta 0.99, max_treedepth "
        "10: 2 fits (votes 3600, beta 3600)"
    )


def test_is_clean(cov):
    good = {"divergent": 0, "treedepth": 0, "max_rhat": 1.01, "min_ess_bulk": 400.0}
    assert cov.is_clean(good)
    for change in ({"divergent": 1}, {"treedepth": 3}, {"max_rhat": 1.011},
                   {"min_ess_bulk": 399.0}, {"max_rhat": None}):  # fmt: skip
        assert not cov.is_clean({**good, **change})


SAMPLER_META = {
    "settings": {"chains": 1, "warmup": 0, "draws": 4, "adapt_delta": 0.8, "max_treedepth": 10},
    "backend": "given-draws", "backend_version": "-", "stan_version": "-",
}  # fmt: skip


def fake_record(cov, problem_name, n, rep, hits50):
    """A fit record whose 50 % band holds the truth at ``hits50`` of 10 outputs; 75 and
    95 % hold it everywhere, the long-run intervals always."""
    truth = np.full((10, 1), 0.3)
    lower = {
        "0.5": np.where(np.arange(10)[:, None] < hits50, 0.2, 0.4).tolist(),
        "0.75": np.full((10, 1), 0.1).tolist(),
        "0.95": np.full((10, 1), 0.0).tolist(),
    }
    upper = {p: np.full((10, 1), 0.5).tolist() for p in ("0.5", "0.75", "0.95")}
    sampler = {
        "seconds": 10.0 + rep,
        "sampling_seconds": 8.0,
        "divergent": rep,
        "treedepth": 0,
        "max_rhat": 1.001 + rep / 100,
        "min_ess_bulk": 900.0 - rep,
        "warnings": ["SamplerWarning: 1 divergent transition"] if rep else [],
        **SAMPLER_META,
    }
    return {
        "problem": problem_name, "n": n, "rep": rep,
        "bands": {"truth": truth.tolist(), "lower": lower, "upper": upper},
        "long_run": {"truth": [1.0, 2.0],
                     "lower": {p: [0.0, 1.0] for p in ("0.5", "0.75", "0.95")},
                     "upper": {p: [2.0, 3.0] for p in ("0.5", "0.75", "0.95")}},
        "sampler": sampler,
    }  # fmt: skip


def test_summary_and_report_goals_by_hand(cov):
    fits = {
        # logistic, n = 300: 50 % bands hold 5 + 4 of 20 -> 45 %: within 5 points
        "logistic|300|0": fake_record(cov, "logistic", 300, 0, 5),
        "logistic|300|1": fake_record(cov, "logistic", 300, 1, 4),
        # votes, n = 300: 3 of 10 -> 30 %; and 75 % holds all -> 100 %: not met
        "votes|300|0": fake_record(cov, "votes", 300, 0, 3),
    }
    summary = cov.summarise(fits)
    assert list(summary) == [("votes", 300), ("logistic", 300)]  # panel order
    cell = summary[("logistic", 300)]
    assert cell["bands_inside"] == {0.5: (9, 20), 0.75: (20, 20), 0.95: (20, 20)}
    assert cell["long_run"] == {0.5: (4, 4), 0.75: (4, 4), 0.95: (4, 4)}
    assert (cell["divergent"], cell["clean"], cell["warned"]) == (1, 1, 1)
    assert cell["max_rhat"] == pytest.approx(1.011) and cell["min_ess_bulk"] == 899.0
    assert (cell["median_seconds"], cell["max_seconds"]) == (10.5, 11.0)
    # 75 % bands cover 100 %: 25 points off in both cells, so neither meets the goal
    assert cov.goal_met(cell["bands_inside"], 0.05) is False
    results = {"seed": 2026, "fits": fits, "runs": [run_record("python bench/coverage.py")]}
    text = cov.render(results)
    assert text.startswith(cov.SECTION + "\n")
    # fit-clustered errors: 50 %, fits 5/10 and 4/10, p = 0.45, residuals +-0.5:
    # sqrt(2 / 1 * 0.5) / 20 = 0.05; 75 and 95 %, every fit all hits: 0. The 75 % gap, 25
    # points, exceeds the tolerance by more than 2 x 0; 50 and 95 % sit at it, not beyond.
    assert (
        "| logistic | 300 | 2 | 20 | 45 (5.0) | 100 (0.0) | 100 (0.0) | **no** | 75 | 20 |"
    ) in text
    # one fit: no error, and no miss can be called beyond the noise
    assert "| votes | 300 | 1 | 10 | 30 (n/a) | 100 (n/a) | 100 (n/a) | **no** | - | 10 |" in text
    assert "not met: 0 of 2 problem-size cells (0 without checks); largest gap 25.0" in text
    assert "of the 2 cells that miss it, 1 miss by more than two standard errors" in text
    assert "| long-run-utility intervals within 7 points of nominal | not met: 0 of 2" in text
    assert "| every fit clean" in text and "not met: 2 of 3 fits" in text
    assert "fits: SamplerWarning x 1; while measuring (bands, long-run draws): none." in text
    # pooled over the panel: 50 % holds 5 + 4 + 3 of 30 checks, 75 and 95 % all 30; the
    # long-run intervals all 2 x 3
    # its error, the three fits as clusters: p = 0.4, residuals 1, 0, -1 -> sqrt(3 / 2 * 2)
    # / 30 = 0.0577
    assert (
        "Pooled over the panel (30 checks per level): 40 % / 100 % / 100 % at nominal "
        "50 / 75 / 95 % (fit-clustered standard errors 5.8 / 0.0 / 0.0 points)."
    ) in text
    assert "Pooled over the panel (6 checks per level): 100 % / 100 % / 100 %" in text
    # these records predate the decision outputs: reported as missing, never as coverage
    assert "Pooled over the panel: no checks yet." in text
    # these records kept no prior: said so, with their count and problems
    assert (
        "Priors (`Transducer(prior=...)`, as each fit recorded them): not recorded (fits "
        "made before 2026-11-25): 3 fits (logistic, votes)."
    ) in text
    fits["votes|300|0"]["sampler"]["prior"] = {"tau_f_floor": 1.0, "tau_f_df": 3.0}
    assert (
        "them): tau_f_df 3.0, tau_f_floor 1.0: 1 fit (votes); not recorded (fits made "
        "before 2026-11-25): 2 fits (logistic)."
    ) in cov.render(results)
    assert cell["decision_fits"] == 0
    assert "| logistic | 300 | 0 | 0 | n/a | n/a | n/a | n/a (no checks) |" in text
    assert (
        "| the same at nine outputs where decisions are uncertain | not met: 0 of 2 "
        "problem-size cells (2 without checks); no checks yet |"
    ) in text


def test_steps_per_iteration_are_reported_only_when_every_fit_recorded_them(cov):
    fits = {f"logistic|300|{r}": fake_record(cov, "logistic", 300, r, 5) for r in range(3)}
    for rep, steps in enumerate([15.0, 31.0, 20.0]):
        fits[f"logistic|300|{rep}"]["sampler"]["steps_per_iteration"] = steps
    assert cov.summarise(fits)[("logistic", 300)]["median_steps"] == 20.0
    results = {"seed": 2026, "fits": fits, "runs": [run_record("python bench/coverage.py")]}
    # clean fits 1 (rep 0; reps 1 and 2 diverged), seconds 10 / 11 / 12, sampling 8
    assert "| 1 | 11 | 12 | 8 | 20.0 | 2 |" in cov.render(results)
    del fits["logistic|300|1"]["sampler"]["steps_per_iteration"]  # a fit made before
    assert cov.summarise(fits)[("logistic", 300)]["median_steps"] is None
    assert "| 1 | 11 | 12 | 8 | n/a | 2 |" in cov.render(results)


def test_systematic_misses_name_the_outputs_a_cell_misses_in_most_fits(cov):
    """Three fits of one cell, three outputs: the first missed in 2 of 3 fits (listed), the
    second in 1 of 3 (noise), the third in all three but with a truth outside [0.001,
    0.999] (not the goal's check); a second cell misses nothing."""
    truth = [[0.9], [0.5], [0.0005]]

    def bands(miss_first, miss_second):
        lower = [[0.95 if miss_first else 0.8], [0.6 if miss_second else 0.4], [0.001]]
        upper = [[0.99], [0.7], [0.01]]
        mean = [[0.97 if miss_first else 0.88], [0.55], [0.004]]
        return {"outputs": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], "classes": [1],
                "truth": truth, "lower": {"0.95": lower}, "upper": {"0.95": upper},
                "mean": mean}  # fmt: skip

    fits = {
        f"two-logits|300|{r}": {"problem": "two-logits", "n": 300, "rep": r,
                                "bands_decision": bands(*flags)}
        for r, flags in enumerate([(True, False), (True, True), (False, False)])
    }  # fmt: skip
    fits["two-logits|1000|0"] = {"problem": "two-logits", "n": 1000, "rep": 0,
                                 "bands_decision": bands(False, False)}  # fmt: skip
    misses = cov.systematic_misses(fits)
    assert misses == [{
        "problem": "two-logits", "n": 300, "output": [1.0, 2.0], "class": 1, "truth": 0.9,
        "share": pytest.approx(2 / 3), "missed": 2, "fits": 3,
        "median_mean": 0.97, "median_band": (0.95, 0.99),
    }]  # fmt: skip
    text = "\n".join(cov._systematic_lines(fits))
    assert "| two-logits | 300 | (1, 2) | 1 | 0.9000 | 2 of 3 | 0.9700 | [0.9500, 0.9900] |" in text
    assert "at least 50 % of a cell's fits" in text
    fits.pop("two-logits|300|0")  # now 1 of 2 fits: share 0.5 but a single miss
    assert cov.systematic_misses(fits) == []
    assert cov._systematic_lines(fits)[0].endswith("not noise. None.")


def run_record(command):
    return {"command": command, "date": "2026-01-02", "cores": 2, "machine": "Linux x86_64",
            "versions": {"yieldwise": "0.2"}, "seconds": 60.0, "fits": 1}  # fmt: skip


def test_run_resume_merge_round_trip(cov, tmp_path, monkeypatch):
    calls = []

    def fake_fit(problem, index, n, rep, seed):
        calls.append((problem.name, n, rep))
        # the record a real fit would make, from a transducer with given draws
        at = np.arange(9)
        matrices, _ = cov.utility_matrices(problem, index, seed)
        record = cov.measure(problem, given_transducer(P1 + rep / 100), at, matrices)
        sampler = {"seconds": 1.0, "sampling_seconds": 1.0, "divergent": 0, "treedepth": 0,
                   "max_rhat": None, "min_ess_bulk": None, "warnings": [],
                   **SAMPLER_META}  # fmt: skip
        return {"problem": problem.name, "n": n, "rep": rep, **record, "sampler": sampler}

    problems = {"logistic": nine_cell_problem(cov), "beta": nine_cell_problem(cov, name="beta")}
    monkeypatch.setattr(cov, "run_fit", fake_fit)
    monkeypatch.setattr(cov, "compile_model", lambda: None)  # no Stan here
    monkeypatch.setattr(
        cov,
        "select_problems",
        lambda names, positives=None: [(i, problems[n]) for i, n in enumerate(names)],
    )
    a, b, merged = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "merged.json"
    cov.main(["--problems", "logistic", "--sizes", "300", "--reps", "2", "--results", str(a)])
    assert calls == [("logistic", 300, 0), ("logistic", 300, 1)]
    with pytest.raises(SystemExit, match="pass --resume"):  # never overwrites saved fits
        cov.main(["--problems", "logistic", "--sizes", "300", "--results", str(a)])
    cov.main(["--problems", "logistic", "--sizes", "300", "--reps", "3", "--resume",
              "--results", str(a)])  # fmt: skip
    assert calls[2:] == [("logistic", 300, 2)]  # only the missing repetition
    with pytest.raises(SystemExit, match="resume with --seed 2026"):
        cov.main(["--problems", "logistic", "--seed", "1", "--resume", "--results", str(a)])
    cov.main(["--problems", "beta", "--sizes", "300", "1000", "--reps", "1",
              "--results", str(b)])  # fmt: skip
    assert calls[3:] == [("beta", 300, 0), ("beta", 1000, 0)]
    first, second = cov.load_results(a), cov.load_results(b)
    assert [r["fits"] for r in first["runs"]] == [2, 1]  # the resumed run is recorded
    from _common import checkout_commit

    assert {r["commit"] for r in first["runs"]} == {checkout_commit()}  # once per run
    cov.main(["--merge", str(a), str(b), "--results", str(merged)])
    both = cov.load_results(merged)
    assert both["fits"] == {**first["fits"], **second["fits"]}  # exact round trip
    assert len(both["fits"]) == 5 and both["runs"] == first["runs"] + second["runs"]
    assert len(calls) == 5  # merging fits nothing
    text = cov.render(both)
    assert "| logistic | 300 | 3 | 21 |" in text and "| beta | 1000 | 1 | 7 |" in text
    # a fit that differs between two files is refused, as are files of another version
    second["fits"]["logistic|300|0"] = second["fits"]["beta|300|0"]
    with pytest.raises(cov.ResultsError, match="differs between"):
        cov.merge([("a", first), ("b", second)])
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({**first, "version": 0}))
    with pytest.raises(cov.ResultsError, match="found format/version"):
        cov.load_results(stale)
    with pytest.raises(cov.ResultsError, match="share one seed"):
        cov.merge([("a", first), ("c", {**second, "seed": 1})])


def _fits_of(cells: dict[str, int], tag: str) -> dict:
    """Stand-in fit records ``{"problem|n|rep": {"tag": tag}}`` for cells of that many reps."""
    return {f"{cell}|{rep}": {"tag": tag} for cell, reps in cells.items() for rep in range(reps)}


def test_merge_replace_takes_whole_cells_from_the_later_file(cov, tmp_path):
    """After a design change the study is refitted cell by cell: --replace lets a later
    file's cells replace the earlier file's, whole cells only, and says which in the text."""
    study = {"seed": 2026, "fits": _fits_of({"votes|300": 3, "beta|300": 3}, "old"),
             "runs": [{"command": "old run"}]}  # fmt: skip
    refit = {"seed": 2026, "fits": _fits_of({"votes|300": 3}, "new"), "runs": [{"command": "new"}]}
    with pytest.raises(cov.ResultsError, match="--replace"):  # without it, refused as before
        cov.merge([("study", study), ("refit", refit)])
    merged = cov.merge([("study", study), ("refit", refit)], replace=True)
    tags = {key: record["tag"] for key, record in merged["fits"].items()}
    assert tags == {"votes|300|0": "new", "votes|300|1": "new", "votes|300|2": "new",
                    "beta|300|0": "old", "beta|300|1": "old", "beta|300|2": "old"}  # fmt: skip
    assert merged["replaced"] == [{"cell": "votes|300", "by": "refit", "was": ["study"]}]
    assert merged["runs"] == [{"command": "old run"}, {"command": "new"}]
    assert cov._replaced_text(merged["replaced"]) == (
        " Cells refitted whole after a design change (`--merge ... --replace`): votes at n = "
        "300 from refit."
    )
    assert cov._replaced_text([]) == ""
    # a cell refitted in part would mix two designs: refused, naming the missing fits
    partial = {"seed": 2026, "fits": _fits_of({"votes|300": 2}, "new"), "runs": []}
    with pytest.raises(cov.ResultsError, match=r"lacks the fits \['votes\|300\|2'\]"):
        cov.merge([("study", study), ("partial", partial)], replace=True)
    # a cell the earlier files lack is simply added
    extra = {"seed": 2026, "fits": _fits_of({"clipped|300": 1}, "new"), "runs": []}
    added = cov.merge([("study", study), ("extra", extra)], replace=True)
    assert "clipped|300|0" in added["fits"] and "replaced" not in added
    # merged again (the study file is itself a merge): its record of replaced cells is
    # kept, and a cell replaced once more is recorded by its new file only
    again = cov.merge([("study", merged), ("extra", extra)], replace=True)
    assert again["replaced"] == [{"cell": "votes|300", "by": "refit", "was": ["study"]}]
    newer = {"seed": 2026, "fits": _fits_of({"votes|300": 3}, "newer"), "runs": []}
    third = cov.merge([("merged", merged), ("newer", newer)], replace=True)
    assert third["replaced"] == [{"cell": "votes|300", "by": "newer", "was": ["merged"]}]
    assert {r["tag"] for k, r in third["fits"].items() if k.startswith("votes")} == {"newer"}


def test_replace_is_refused_without_merge(cov, capsys):
    with pytest.raises(SystemExit):
        cov.main(["--replace", "--render"])
    assert "--replace applies to --merge" in capsys.readouterr().err


def test_run_records_name_their_commit_and_the_text_shows_it(cov, tmp_path):
    import subprocess

    from _common import checkout_commit

    assert checkout_commit(tmp_path) is None  # not a git checkout
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "yieldwise").mkdir()
    (tmp_path / "yieldwise" / "m.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("a\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    assert checkout_commit(tmp_path) == head
    (tmp_path / "notes.txt").write_text("b\n")  # outside what a measurement depends on
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "study.json").write_text("{}")  # a stored result
    assert checkout_commit(tmp_path) == head
    (tmp_path / "bench" / "probe.py").write_text("")  # an untracked benchmark script
    assert checkout_commit(tmp_path) == f"{head}+changes"
    (tmp_path / "bench" / "probe.py").unlink()
    (tmp_path / "yieldwise" / "m.py").write_text("x = 2\n")
    assert checkout_commit(tmp_path) == f"{head}+changes"
    run = {"date": "2026-11-29", "cores": 2, "machine": "Linux x86_64",
           "versions": {"yieldwise": "0.1.0"}, "seconds": 60.0, "fits": 1}  # fmt: skip
    text = cov._commands([{**run, "command": "a", "commit": "abc1234"},
                          {**run, "command": "a", "commit": "def5678"},
                          {**run, "command": "b"}])  # fmt: skip
    assert text.startswith("Commands, run as separate processes: `a` (at abc1234, def5678); `b`,")


def test_write_replaces_only_its_own_section(cov, tmp_path):
    from _common import write_section

    docs = tmp_path / "benchmarks.md"
    docs.write_text(
        "# Benchmarks\n\n## Before\n\nkept\n\n"
        f"{cov.SECTION}\n\nold figures\n\n### Sampler\n\nold table\n\n## After\n\nkept too\n"
    )
    docs.chmod(0o640)
    text = f"{cov.SECTION}\n\nnew figures\n\n### Sampler\n\nnew table\n"
    write_section(cov.SECTION, text, path=docs)
    expected = (
        "# Benchmarks\n\n## Before\n\nkept\n\n"
        f"{cov.SECTION}\n\nnew figures\n\n### Sampler\n\nnew table\n\n## After\n\nkept too\n"
    )
    assert docs.read_text() == expected
    write_section(cov.SECTION, text, path=docs)  # a second write changes nothing
    assert docs.read_text() == expected
    assert docs.stat().st_mode & 0o777 == 0o640  # the file's mode is kept
    assert [p.name for p in tmp_path.iterdir()] == ["benchmarks.md"]  # no temporary left


def test_compare_pairs_the_shared_fits_by_hand(cov):
    """Two results files: the second's 50 % bands hold more; a fit only in one is left out."""
    first = {"seed": 2026, "fits": {
        "logistic|300|0": fake_record(cov, "logistic", 300, 0, 5),
        "logistic|300|1": fake_record(cov, "logistic", 300, 1, 4),
        "votes|300|0": fake_record(cov, "votes", 300, 0, 3),
    }}  # fmt: skip
    second = {"seed": 2026, "fits": {
        "logistic|300|0": fake_record(cov, "logistic", 300, 0, 6),
        "logistic|300|1": fake_record(cov, "logistic", 300, 1, 5),
    }}  # fmt: skip
    text = cov.compare(first, second, labels=("shipped", "candidate"))
    assert text.startswith("Paired over 2 fits (1 in one file only, left out): shipped -> ")
    # 50 %: 9 of 20 -> 11 of 20; 75 and 95 % hold everywhere; no decision outputs recorded;
    # repetition 1 has one divergent transition (and R-hat 1.011) in both: not clean
    assert (
        "| logistic | 300 | 2 | 45/100/100 -> 55/100/100 | n/a/n/a/n/a -> n/a/n/a/n/a | "
        "100/100/100 -> 100/100/100 | n/a/n/a/n/a -> n/a/n/a/n/a | n/a/n/a/n/a -> n/a/n/a/n/a "
        "| 1 -> 1 | 1 -> 1 |"
    ) in text
    assert "tail outputs" not in text  # no fit recorded its tails
    assert "votes" not in text.split("\n\n")[1]
    # mean gap: (|0.45 - 0.5| + 0.25 + 0.05) / 3 = 11.7 points -> (0.05 + 0.25 + 0.05) / 3
    assert "- bands: pooled 45/100/100 -> 55/100/100 %; mean gap to nominal 11.7 -> 11.7" in text
    # paired by fit: each fit holds one more at 50 % (+10 points, no spread), the same else
    assert "change per level, paired by fit (SE): +10.0 (0.0) / +0.0 (0.0) / +0.0 (0.0)" in text
    # the long-run intervals hold everywhere: (0.5 + 0.25 + 0.05) / 3 = 26.7 points
    assert "- long-run: pooled 100/100/100 -> 100/100/100 %; mean gap to nominal 26.7" in text
    assert "- fits not clean: 1 -> 1; median sampling s: 8.0 -> 8.0" in text
    # every band is [0.0, 0.5] at 95 % around a truth of 0.3: the width is logit(0.5) -
    # logit(1e-12) = 27.63 on the log-odds scale
    assert "median log-odds width (truths in [0.001, 0.999]): 27.63 -> 27.63" in text
    with pytest.raises(SystemExit, match="share no fit"):
        cov.compare(first, {"seed": 2026, "fits": {}}, labels=("a", "b"))


def test_tail_records_are_counted_and_their_log_odds_errors_by_hand(cov):
    """bands_tail: every truth counted (none left out as outside [0.001, 0.999]); the
    compare line gives per tail position the mean |logit(mean) - logit(truth)|."""

    def with_tail(record, means):
        truth = [[0.0005], [0.5]]
        record["bands_tail"] = {
            "truth": truth, "mean": means,
            "lower": {p: [[0.0001], [0.1]] for p in ("0.5", "0.75", "0.95")},
            "upper": {p: [[0.0002], [0.9]] for p in ("0.5", "0.75", "0.95")},
        }  # fmt: skip
        return record

    # the posterior means: logit 0.005 - logit 0.0005 = -5.2933 + 7.6004 = 2.3071 first,
    # 0 and logit 0.6 - logit 0.5 = 0.4055 at the second (mean 0.2027)
    first = {"seed": 2026, "fits": {
        "logistic|300|0": with_tail(fake_record(cov, "logistic", 300, 0, 5), [[0.005], [0.5]]),
        "logistic|300|1": with_tail(fake_record(cov, "logistic", 300, 1, 5), [[0.005], [0.6]]),
    }}  # fmt: skip
    second = {"seed": 2026, "fits": {
        key: with_tail(fake_record(cov, "logistic", 300, rep, 5), [[0.0005], [0.5]])
        for rep, key in enumerate(first["fits"])
    }}  # fmt: skip
    cell = cov.summarise(first["fits"])[("logistic", 300)]
    assert cell["bands_tail"][0.95] == (2, 4)  # the first band misses its truth of 0.0005
    text = cov.compare(first, second, labels=("a", "b"))
    # in the goal's range only the truth 0.5 counts, inside its band [0.1, 0.9] in every fit
    cell_inside = cell["bands_tail_inside"]
    assert cell_inside[0.5] == cell_inside[0.95] == (2, 2)
    assert "| 50/50/50 -> 50/50/50 | 100/100/100 -> 100/100/100 | 1 -> 1 |" in text
    assert "- tail bands, truth in [0.001, 0.999]: pooled 100/100/100 -> 100/100/100 %" in text
    assert "per quantile, 2.31 / 0.20 -> 0.00 / 0.00" in text


def _scripted_study(cov, monkeypatch, fake_fit):
    """The study's main() on one nine-cell problem, with ``fake_fit`` for every fit and
    neither compilation nor rendering: what a command line hands the fits."""
    monkeypatch.setattr(cov, "run_fit", fake_fit)
    monkeypatch.setattr(cov, "compile_model", lambda: None)
    monkeypatch.setattr(
        cov, "select_problems", lambda names, positives=None: [(0, nine_cell_problem(cov))]
    )
    monkeypatch.setattr(cov, "render", lambda results: "report")


def test_candidate_options_reach_the_fits_and_the_command(cov, tmp_path, monkeypatch, capsys):
    """--set changes a yieldwise._design constant, --sampler the NUTS settings of every fit;
    both are written into the run's command, and a wrong name is refused by name."""
    import yieldwise._design as design

    seen = []

    def fake_fit(problem, index, n, rep, seed, sampler=None):
        seen.append((sampler, design.RW1_SHARE))
        return fake_record(cov, problem.name, n, rep, 5)

    _scripted_study(cov, monkeypatch, fake_fit)
    monkeypatch.setattr(design, "RW1_SHARE", design.RW1_SHARE)  # restored after the test
    out = tmp_path / "a.json"
    cov.main(["--problems", "logistic", "--sizes", "300", "--reps", "1",
              "--results", str(out), "--set", "RW1_SHARE=0.3",
              "--sampler", "warmup=1000", "adapt_delta=0.99"])  # fmt: skip
    assert seen == [({"warmup": 1000, "adapt_delta": 0.99}, 0.3)]
    command = cov.load_results(out)["runs"][-1]["command"]
    assert command.endswith("--set RW1_SHARE=0.3 --sampler warmup=1000 adapt_delta=0.99")
    for bad, message in ((["--set", "NO_SUCH=1"], "--set: expected NAME=VALUE"),
                         (["--set", "RW1_SHARE"], "--set: expected NAME=VALUE"),
                         (["--sampler", "warm=1000"], "KEY one of")):  # fmt: skip
        with pytest.raises(SystemExit):
            cov.main(["--results", str(tmp_path / "b.json"), *bad])
        assert message in capsys.readouterr().err


def test_backend_reaches_the_fits_and_the_command(cov, tmp_path, monkeypatch, capsys):
    """--backend fits the study with another backend (the Laplace approximation's own
    coverage): every fit gets it, the command says so, and an unknown name is refused."""
    seen = []

    def fake_fit(problem, index, n, rep, seed, backend=None):
        seen.append(backend)
        return fake_record(cov, problem.name, n, rep, 5)

    _scripted_study(cov, monkeypatch, fake_fit)
    out = tmp_path / "a.json"
    cov.main(["--problems", "logistic", "--sizes", "300", "--reps", "2",
              "--results", str(out), "--backend", "laplace"])  # fmt: skip
    assert seen == ["laplace", "laplace"]
    assert cov.load_results(out)["runs"][-1]["command"].endswith("--backend laplace")
    with pytest.raises(SystemExit):
        cov.main(["--results", str(tmp_path / "b.json"), "--backend", "no-such"])
    assert "--backend" in capsys.readouterr().err


def test_prefix_diagnostics_are_the_first_draws_of_each_chain(bench_import):
    """What a fit of fewer draws would report (the same seed takes the same path):
    R-hat and bulk ESS over each chain's first d draws, worked out with ArviZ on the
    sliced quantities; the full length gives the fit's own table."""
    common = bench_import("_common")  # sampler_record and prefixes live there
    import warnings

    import arviz as az

    rng = np.random.default_rng(4)
    c = (rng.random(300) < 0.4).astype(int)
    s = 50
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 100 draws: ESS below 400
        t = Transducer(backend="laplace", chains=2, draws=s, seed=1, progress=False).fit(
            rng.normal(c, 1.0), c
        )
    short, full = common.prefix_diagnostics(t, (20, s))
    table = t.diagnostics()
    assert full == {"draws": s, "max_rhat": table["r_hat"].max(),
                    "min_ess_bulk": table["ess_bulk"].min()}  # fmt: skip
    proba = t.draws_proba(t.reference_outputs()).values[:, :20, :, 0]  # class 0 = 1 - p1
    log_lik = t.posterior_.posterior["log_lik"].values[:, :20]
    series = [log_lik] + [proba[:, :, i] for i in range(proba.shape[2])]
    assert short["draws"] == 20
    assert short["max_rhat"] == pytest.approx(max(float(az.rhat(v)) for v in series))
    assert short["min_ess_bulk"] == pytest.approx(
        min(float(az.ess(v, method="bulk")) for v in series)
    )
    with pytest.raises(ValueError, match=r"prefix_draws must lie in 4 \.\. 50 .* found 60"):
        common.prefix_diagnostics(t, (60,))


def test_prefix_diagnostics_of_a_class_reduced_fit_are_its_reduced_fits(bench_import):
    """Ten-class outputs are reduced to ranks; the full-length prefix equals the fit's own
    diagnostics() table, which is the reduced fit's."""
    common = bench_import("_common")  # sampler_record and prefixes live there
    import warnings

    rng = np.random.default_rng(5)
    labels = rng.integers(0, 5, 300)
    logits = 2.5 * np.eye(5)[labels] + rng.normal(size=(300, 5))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = Transducer(backend="laplace", chains=2, draws=50, seed=1, progress=False).fit(p, labels)
    assert t.reduction_ is not None
    (full,) = common.prefix_diagnostics(t, (50,))
    table = t.diagnostics()
    assert full == {"draws": 50, "max_rhat": table["r_hat"].max(),
                    "min_ess_bulk": table["ess_bulk"].min()}  # fmt: skip


def test_prefix_draws_reach_the_fits_and_the_command(cov, tmp_path, monkeypatch):
    seen = []

    def fake_fit(problem, index, n, rep, seed, sampler=None, prefix_draws=()):
        seen.append((sampler, prefix_draws))
        return fake_record(cov, problem.name, n, rep, 5)

    _scripted_study(cov, monkeypatch, fake_fit)
    out = tmp_path / "a.json"
    cov.main(["--problems", "logistic", "--sizes", "300", "--reps", "1", "--results", str(out),
              "--prefix-draws", "500", "600"])  # fmt: skip
    assert seen == [(None, (500, 600))]
    assert cov.load_results(out)["runs"][-1]["command"].endswith("--prefix-draws 500 600")


def test_a_fit_records_the_settings_it_ran_at(bench_import):
    """The warm-up and adapt_delta the output dimensions chose, not the constructor's None
    (the study's tables group the fits by them), and a Laplace fit's Pareto k."""
    common = bench_import("_common")  # sampler_record and prefixes live there
    import warnings

    rng = np.random.default_rng(8)
    c = (rng.random(200) < 0.4).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = Transducer(backend="laplace", chains=2, draws=50, seed=1, progress=False).fit(
            rng.normal(c, 1.0), c
        )
    assert t.get_params()["warmup"] is None
    record = common.sampler_record(t, 1.0, [])
    settings = record["settings"]
    assert settings["warmup"] == 500  # one output dimension
    assert settings["chains"] == 2 and settings["draws"] == 50
    # an approximation's distance from the posterior is kept with the fit
    assert record["backend"] == "laplace"
    assert record["pareto_k"] == t.sampler_summary()["pareto_k"]


def test_positives_select_balance_variants_with_seeds_of_their_own(cov):
    """--positives runs each binary problem at other class balances: named by the balance,
    its truth by Bayes' rule, its calibration sets apart from the panel's and each other's."""
    panel = cov.select_problems(["votes", "logistic"])
    variants = cov.select_problems(["votes", "logistic"], [0.02, 0.5])
    assert [p.name for _, p in variants] == ["votes@2%", "logistic@2%", "votes@50%", "logistic@50%"]
    indices = [i for i, _ in variants]
    # VARIANT_STRIDE * round(1e4 * share) after the panel index (votes 0, logistic 1)
    assert indices == [0 + 100 * 200, 1 + 100 * 200, 0 + 100 * 5000, 1 + 100 * 5000]
    assert len(set(indices) | {i for i, _ in panel}) == 6
    seeds = {tuple(cov.sample_seed(2026, i, 300, 0)) for i in [*indices, 0, 1]}
    assert len(seeds) == 6
    rare = {p.name: p for _, p in variants}["logistic@2%"]
    np.testing.assert_array_equal(rare.prevalences, [0.98, 0.02])
    # every binary problem when none is named; the multi-class ones are left out
    every = cov.select_problems(None, [0.1])
    assert [p.name for _, p in every] == [
        "votes@10%", "logistic@10%", "beta@10%", "non-monotone@10%", "overlapping@10%",
        "two-logits@10%", "clipped@10%",
    ]  # fmt: skip
    with pytest.raises(SystemExit, match="more than two"):
        cov.select_problems(["softmax-3"], [0.1])
    with pytest.raises(SystemExit, match="strictly between 0 and 1"):
        cov.select_problems(["votes"], [1.0])


def test_positives_reach_the_command(cov, tmp_path, monkeypatch):
    seen = []

    def fake_fit(problem, index, n, rep, seed):
        seen.append((problem.name, index))
        return fake_record(cov, problem.name, n, rep, 5)

    monkeypatch.setattr(cov, "run_fit", fake_fit)
    monkeypatch.setattr(cov, "compile_model", lambda: None)
    monkeypatch.setattr(cov, "render", lambda results: "report")
    out = tmp_path / "a.json"
    cov.main(["--problems", "logistic", "--positives", "0.02", "--sizes", "300", "--reps", "1",
              "--results", str(out)])  # fmt: skip
    assert seen == [("logistic@2%", 1 + 100 * 200)]
    results = cov.load_results(out)
    assert list(results["fits"]) == ["logistic@2%|300|0"]
    assert "--problems logistic --positives 0.02 --sizes 300" in results["runs"][-1]["command"]


def test_study_set_draws_the_set_from_the_four_numbers_and_a_fit_seed_apart(cov):
    """study_set is the one place a study set is drawn: its entropy is (seed, the sample
    stream 700, index, n, repetition), written out here, and the fit seed is another
    stream of the same numbers, so two repetitions never share a set or a seed."""
    ((index, problem),) = cov.select_problems(["logistic"])
    outputs, labels, seed = cov.study_set(problem, index, 300, 4)
    want_out, want_lab = problem.sample(300, np.random.default_rng([2026, 700, index, 300, 4]))
    np.testing.assert_array_equal(outputs, want_out)
    np.testing.assert_array_equal(labels, want_lab)
    state = np.random.SeedSequence([2026, 700, index, 300, 4, 1]).generate_state(1)
    assert seed == int(state[0]) % (2**31 - 1)
    other_out, _, other_seed = cov.study_set(problem, index, 300, 5)
    assert other_seed != seed and not np.array_equal(other_out, outputs)
    # a variant at another class balance has its own index, so its own set
    ((v_index, variant),) = cov.select_problems(["logistic"], [0.02])
    _, v_lab, _ = cov.study_set(variant, v_index, 300, 4)
    assert v_index != index and v_lab.mean() < labels.mean()


def test_option_values_parse_to_none_numbers_tuples_or_text(bench_import):
    common = bench_import("_common")
    assert common.parse_value("none") is None and common.parse_value("None") is None
    assert common.parse_value("3") == 3 and isinstance(common.parse_value("3"), int)
    assert common.parse_value("0.5") == 0.5
    assert common.parse_value("0.001,0.999") == (0.001, 0.999)  # RANGE_QUANTILES=...
    assert common.parse_value("1,2") == (1, 2)
    assert common.parse_value("a,b") == "a,b"  # not numbers: the text
    assert common.parse_value("pystan") == "pystan"
