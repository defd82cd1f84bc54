"""The decision-quality benchmark's exact evaluator (bench/decision_quality.py), brute-forced."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench(bench_import):
    return bench_import("decision_quality"), bench_import("_problems")


def brute_force(p, w, utilities):
    """Item by item and matrix by matrix: the decision maximising expected utility
    (ties to the first decision), then the utility it earns under the joint masses."""
    out = []
    for u in utilities:
        total = 0.0
        for g in range(len(p)):
            d = int(np.argmax(u @ p[g]))
            total += float(w[g] @ u[d])
        out.append(total)
    return np.array(out)


def test_binary_shortcut_equals_brute_force(bench):
    dq, _ = bench
    rng = np.random.default_rng(0)
    p1 = rng.random(300)
    p = np.column_stack([1 - p1, p1])
    w = rng.random((300, 2))
    w /= w.sum()
    named = np.array(
        [
            [[1, 0], [0, 1]],
            [[1, -10], [0, 10]],
            [[1, 0], [-10, 10]],
            [[10, 0], [-10, 1]],
            [[0, 1], [1, 0]],
            [[2, 2], [1, 3]],
            [[1, 1], [1, 1]],
        ],
        float,
    )
    utilities = np.concatenate([dq.chart_matrices(200, rng), named])
    np.testing.assert_allclose(
        dq.long_run(p, w, utilities), brute_force(p, w, utilities), rtol=1e-12, atol=1e-12
    )


def test_multiclass_path_equals_brute_force(bench):
    dq, _ = bench
    rng = np.random.default_rng(1)
    p = rng.dirichlet([1, 1, 1], size=200)
    w = rng.random((200, 3))
    w /= w.sum()
    utilities = rng.uniform(-1, 1, size=(70, 4, 3))  # rectangular too
    np.testing.assert_allclose(
        dq.long_run(p, w, utilities), brute_force(p, w, utilities), rtol=1e-12, atol=1e-12
    )


def test_fixed_decisions_and_oracle_bound(bench):
    dq, problems = bench
    problem = problems.votes_problem()
    w = problem.joint()
    assert w.sum() == pytest.approx(1.0, abs=1e-12)  # every lattice value, exact pmf
    u = np.array([[[1, 0], [0, 1]]], float)
    decided = (problem.raw_probability(problem.cells)[:, 1] > 0.5).astype(int)
    # accuracy of the 0.5 rule by hand: mass of (decided 0, class 0) plus (decided 1, class 1)
    by_hand = w[decided == 0, 0].sum() + w[decided == 1, 1].sum()
    assert dq.fixed_decisions(decided, w, u)[0] == pytest.approx(by_hand, abs=1e-15)
    # no rule beats the oracle (true probabilities) on any matrix
    rng = np.random.default_rng(2)
    utilities = dq.chart_matrices(500, rng)
    oracle = dq.long_run(problem.truth(), w, utilities)
    for p in (problem.raw_probability(problem.cells), np.full_like(w, 0.5)):
        assert (dq.long_run(p, w, utilities) <= oracle + 1e-12).all()


def _panel_size() -> int:
    """How many problems the panel has (bench/_problems.py needs only numpy and scipy)."""
    sys.path.insert(0, str(BENCH))
    try:
        import _problems
    finally:
        sys.path.remove(str(BENCH))
    return len(_problems.PANEL)


def test_clipped_scores_evaluated_exactly_at_the_point_masses(bench):
    """Outputs with point masses (clipped scores): the evaluator against the brute-force
    loop over all 4,002 cells, and the 0.5 rule's accuracy by hand from the point masses."""
    dq, problems = bench
    problem = problems.clipped_problem()
    w = problem.joint()
    rng = np.random.default_rng(3)
    utilities = np.concatenate([dq.chart_matrices(6, rng), [[[1, 0], [-10, 10]]]])
    for p in (problem.truth(), problem.raw_probability(problem.cells)):
        np.testing.assert_allclose(
            dq.long_run(p, w, utilities), brute_force(p, w, utilities), rtol=1e-12, atol=1e-12
        )
    # the raw score read as P(1), decided at 0.5: the exact 0s decide 0, the exact 1s
    # decide 1, inner cells by their midpoint; accuracy = mass of the right decisions
    decided = (problem.cells[:, 0] > 0.5).astype(int)
    by_hand = w[0, 0] + w[-1, 1] + w[1:-1][decided[1:-1] == 0, 0].sum()
    by_hand += w[1:-1][decided[1:-1] == 1, 1].sum()
    accuracy = dq.fixed_decisions(decided, w, np.array([np.eye(2)]))[0]
    assert accuracy == pytest.approx(by_hand, abs=1e-15)


@pytest.mark.parametrize("index", range(_panel_size()))
def test_panel_masses_are_distributions(bench, index):
    _, problems = bench
    problem = problems.PANEL[index]()
    assert np.allclose(problem.class_mass.sum(axis=0), 1.0, atol=1e-6)
    outputs, classes = problem.sample(2000, np.random.default_rng(index))
    assert outputs.shape == (2000, len(problem.columns))
    frequencies = np.bincount(classes, minlength=problem.n_classes) / 2000
    assert np.allclose(frequencies, problem.prevalences, atol=0.04)


def test_merge_keeps_each_stage_and_the_command_that_made_it(bench):
    decision_quality, _ = bench
    common = {"date": "2026-11-23", "cores": 2, "machine": "x86_64"}
    a = {"panel": {"votes|300": 1}, "command": "run A", "seconds": 60.0, **common}
    b = {
        "coverage": {"votes": 2},
        "real": {"digits": 3},
        "command": "run B",
        "stage_commands": {"coverage": "run B", "real": "run B"},
        "seconds": 30.0,
        **common,
    }
    merged = decision_quality.merge([a, b])
    assert merged["panel"] == {"votes|300": 1} and merged["real"] == {"digits": 3}
    assert merged["stage_commands"] == {"panel": "run A", "coverage": "run B", "real": "run B"}
    assert merged["seconds"] == 90.0 and merged["command"] == "run A; run B"
    assert "`run A` (panel); `run B` (coverage, real)" in decision_quality._commands(merged)
    with pytest.raises(SystemExit, match="'panel' is in more than one"):
        decision_quality.merge([a, a])


def test_brier_terms_by_hand_and_identities(bench):
    """brier_terms on eight scripted items, each term computed by hand.

    Outputs y = 0 (four items, classes 0, 0, 0, 1) and y = 1 (four items, classes
    1, 1, 1, 0); overall frequency of class 1: obar = 1/2, so UNC = 1/4.

    "apart" reads 0.15 at y = 0 and 0.85 at y = 1: two of the 10 bins, frequencies
    1/4 and 3/4, no within-bin terms.
      Brier = (6 * 0.15^2 + 2 * 0.85^2) / 8 = (0.135 + 1.445) / 8 = 0.1975
      REL = (4 * 0.1^2 + 4 * 0.1^2) / 8 = 0.01;  RES = 8 * 0.25^2 / 8 = 0.0625
      0.01 - 0.0625 + 0.25 = 0.1975.  PAV keeps both groups (1/4 < 3/4):
      RL = (6 * 0.25^2 + 2 * 0.75^2) / 8 = 0.1875, CL = 0.01.
    "same bin" reads 0.12 and 0.18, both in the bin [0.1, 0.2): one bin with fbar = 0.15,
    obar = 1/2.
      REL = 0.35^2 = 0.1225, RES = 0, WBV = 0.03^2 = 0.0009,
      WBC = 2 sum_n (f_n - fbar)(o_n - obar) / 8, item by item:
      y = 0: 3 (-0.03)(-0.5) + (-0.03)(0.5) = 0.03; y = 1: 3 (0.03)(0.5) + (0.03)(-0.5)
      = 0.03; WBC = 2 * 0.06 / 8 = 0.015.
      Brier = (3 * 0.12^2 + 0.88^2 + 3 * 0.82^2 + 0.18^2) / 8 = 2.8672 / 8 = 0.3584
            = 0.1225 - 0 + 0.25 + 0.0009 - 0.015.
    """
    dq, _ = bench
    outputs = np.array([[0.0]] * 4 + [[1.0]] * 4)
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 0])

    def reading(low, high):
        return lambda y: np.column_stack([1 - np.where(y[:, 0] < 0.5, low, high),
                                          np.where(y[:, 0] < 0.5, low, high)])  # fmt: skip

    terms = dq.brier_terms(
        {"apart": reading(0.15, 0.85), "same bin": reading(0.12, 0.18)}, outputs, labels, 2
    )
    assert set(terms["apart"]) == set(dq.BRIER_TERMS)
    apart = (0.1975, 0.01, 0.0625, 0.25, 0.0, 0.0, 0.01, 0.1875)
    same_bin = (0.3584, 0.1225, 0.0, 0.25, 0.0009, 0.015, None, 0.1875)
    expected = {
        "apart": dict(zip(dq.BRIER_TERMS, apart, strict=True)),
        "same bin": dict(zip(dq.BRIER_TERMS, same_bin, strict=True)),
    }
    # "same bin": the frequencies rise with the probabilities (1/4 at 0.12, 3/4 at 0.18),
    # so PAV returns them, RL = 0.1875 as for "apart", and CL = 0.3584 - 0.1875 = 0.1709
    expected["same bin"]["calibration_loss"] = 0.1709
    for method, by_hand in expected.items():
        for term, value in by_hand.items():
            assert terms[method][term] == pytest.approx(value, abs=1e-12), (method, term)


def test_brier_terms_three_classes_sum_the_one_against_rest_parts(bench):
    """Three classes: Brier is mean_n sum_c (p_nc - y_nc)^2, computed here directly, and
    both identities hold with the class terms summed (UNC = sum_c obar_c (1 - obar_c))."""
    dq, _ = bench
    rng = np.random.default_rng(5)
    outputs = rng.dirichlet([2, 2, 2], size=300)
    labels = rng.integers(0, 3, size=300)
    t = dq.brier_terms({"m": lambda y: y}, outputs, labels, 3)["m"]
    onehot = np.eye(3)[labels]
    assert t["brier"] == pytest.approx(((outputs - onehot) ** 2).sum(axis=1).mean(), abs=1e-12)
    obar = onehot.mean(axis=0)
    assert t["uncertainty"] == pytest.approx((obar * (1 - obar)).sum(), abs=1e-12)
    murphy = t["reliability"] - t["resolution"] + t["uncertainty"]
    murphy += t["within_bin_variance"] - t["within_bin_covariance"]
    assert murphy == pytest.approx(t["brier"], abs=1e-12)
    assert t["calibration_loss"] + t["refinement_loss"] == pytest.approx(t["brier"], abs=1e-12)
    assert t["calibration_loss"] >= 0


def test_panel_stores_and_reports_the_brier_decomposition(bench, monkeypatch):
    """run_panel with scripted methods on the votes problem (no Stan fit): every method's
    decomposition is in the cell, its Brier is mean (p1 - y)^2 on the same held-out draw
    recomputed here, the identities hold, and the report's table prints it."""
    dq, problems = bench
    problem = problems.votes_problem()
    truth = problem.truth()[:, 1]

    def shrunk(a):
        return lambda v: np.column_stack([1 - (0.5 + a * (v[:, 0] - 0.5)),
                                          0.5 + a * (v[:, 0] - 0.5)])  # fmt: skip

    def fake_fit(problem, outputs, labels, seed):
        predictors = {
            "yieldwise": lambda v: np.column_stack(
                [1 - truth[np.rint(v[:, 0] * 200).astype(int)],
                 truth[np.rint(v[:, 0] * 200).astype(int)]]),
            "isotonic": shrunk(0.9),
            "sigmoid (Platt)": shrunk(0.8),
            "temperature": shrunk(0.7),
            "beta": shrunk(0.6),
            "raw score": problem.raw_probability,
        }  # fmt: skip
        fit = {"seconds": 0.0, "components": 1, "divergent": 0, "treedepth": 0, "warnings": 0}
        return predictors, None, fit

    monkeypatch.setattr(dq, "PANEL", [problems.votes_problem])
    monkeypatch.setattr(dq, "fit_methods", fake_fit)
    panel = dq.run_panel([50], 20, seed=3, holdout=400)
    cell = panel["votes|50"]["brier"]
    assert list(cell) == ["yieldwise", *dq.PEERS[:4], "raw score"]
    held, labels = problem.sample(400, np.random.default_rng([3, 0, 50, 1]))
    v = held[:, 0]
    assert cell["raw score"]["brier"] == pytest.approx(np.mean((v - labels) ** 2), abs=1e-12)
    p = 0.5 + 0.6 * (v - 0.5)
    assert cell["beta"]["brier"] == pytest.approx(np.mean((p - labels) ** 2), abs=1e-12)
    for t in cell.values():
        murphy = t["reliability"] - t["resolution"] + t["uncertainty"]
        murphy += t["within_bin_variance"] - t["within_bin_covariance"]
        assert murphy == pytest.approx(t["brier"], abs=1e-12)
        assert t["calibration_loss"] + t["refinement_loss"] == pytest.approx(t["brier"])
        assert t["uncertainty"] == pytest.approx(labels.mean() * (1 - labels.mean()))
    results = {"panel": panel, "command": "scripted", "date": "2026-11-24", "cores": 2,
               "seconds": 0.0}  # fmt: skip
    text = dq.render(results)
    assert "### Brier decomposition of the held-out probabilities (n = 50)" in text
    raw = cell["raw score"]
    row = (
        f"| votes | raw score | {raw['brier']:.4f} | {raw['reliability']:.4f} | "
        f"{raw['resolution']:.4f} | {raw['uncertainty']:.4f} |"
    )
    assert row in text
    # a fit without R-hat and ESS (cells run before they were kept) is not called clean
    assert (
        "R-hat and bulk ESS recorded for 0 of them (not for votes n = 50: cells run before "
        "they were kept); not clean: none."
    ) in text
    # a fit without its chains and draws recorded: the defaults, by output dimension
    assert (
        "yieldwise fits (default settings: 4 chains, 1,000 draws per chain for one output "
        "dimension and 750 for more): 0.0 min in total, 0 divergent transitions and 0 "
        "tree-depth hits over 1 fits;"
    ) in text
    panel["votes|50"]["fit"].update(max_rhat=1.02, min_ess_bulk=900.0, chains=2, draws=300)
    text = dq.render(results)
    assert (
        "R-hat and bulk ESS recorded for 1 of them; not clean: votes n = 50: 0 divergent, "
        "0 at max tree depth, R-hat 1.020, bulk ESS 900, K = 1."
    ) in text
    # recorded: counted from the records
    assert "yieldwise fits (default settings: 1 of 2 chains x 300 draws): " in text
    # results cached before the decomposition still render, saying it was not measured
    for c in panel.values():
        del c["brier"]
    assert "Not measured in this run: its panel cells predate" in dq.render(results)


def test_recheck_peers_refits_the_cached_peers_and_lists_what_moved(bench, monkeypatch):
    """A cached panel cell (run_panel with the real peers and a scripted yieldwise, no
    Stan fit) rechecks with no change; a cached figure altered by hand is listed with the
    recomputed value, which equals a brute-force regret of the same peer refitted here."""
    dq, problems = bench

    def fake_fit(problem, outputs, labels, seed):
        predictors = {"yieldwise": problem.raw_probability}
        predictors |= dq.peer_predictors(problem, outputs, labels)
        fit = {"seconds": 0.0, "components": 1, "divergent": 0, "treedepth": 0, "warnings": 0}
        return predictors, None, fit

    monkeypatch.setattr(dq, "PANEL", [problems.votes_problem])
    monkeypatch.setattr(dq, "fit_methods", fake_fit)
    panel = dq.run_panel([60], 20, seed=3, holdout=50)
    assert dq.recheck_peers(panel, 20, seed=3) == []

    cached = panel["votes|60"]["summary"]["temperature"]
    kept = cached["mean_regret"]
    cached["mean_regret"] = kept + 0.01
    ((key, peer, old_mean, mean, old_max, top),) = dq.recheck_peers(panel, 20, seed=3)
    assert (key, peer, old_mean) == ("votes|60", "temperature", kept + 0.01)
    assert (mean, top) == (pytest.approx(kept, abs=1e-12), cached["max_regret"])
    assert old_max == cached["max_regret"]

    # the same regret by brute force: the temperature peer refitted on the cell's set
    problem = problems.votes_problem()
    utilities, names = dq.binary_matrices(np.random.default_rng([3, 0]), 20)
    outputs, labels = problem.sample(60, np.random.default_rng([3, 0, 60]))
    p = dq.peer_predictors(problem, outputs, labels)["temperature"](problem.cells)
    w = problem.joint()
    oracle = brute_force(problem.truth(), w, utilities)
    f = w.sum(axis=0)
    span = np.array([f @ u.max(axis=0) - f @ u.min(axis=0) for u in utilities])
    regret = (oracle - brute_force(p, w, utilities)) / span
    chart = [not n.startswith("[[") for n in names]
    assert mean == pytest.approx(regret[chart].mean(), abs=1e-12)


def test_twice_goal_allows_small_differences(bench):
    """Issue 16's regret goal, worked by hand: above twice the best peer's mean regret
    fails only when the two differ by 0.0005 or more."""
    dq, _ = bench

    losses = [
        ("votes", 1000, 0.00009, "sigmoid (Platt)", 0.00003),  # 3x, differ by 0.00006
        ("two-logits", 1000, 0.0026, "beta", 0.00035),  # 7.4x, differ by 0.00225
        ("logistic", 1000, 0.00035, "beta", 0.00023),  # 1.5x
        ("beta", 300, 0.0012, "beta", 0.0006),  # exactly twice: not above
    ]
    over, failing = dq.twice_goal(losses)
    assert [x[0] for x in over] == ["votes", "two-logits"]
    assert [x[0] for x in failing] == ["two-logits"]
    assert dq.twice_goal(losses[:1] + losses[2:]) == ([losses[0]], [])


def test_split_difference_corrects_for_overlapping_splits(bench):
    dq, _ = bench
    # differences 1, 2, 3: mean 2, sample variance 1, corrected variance (1/3 + 1) * 1
    mean, se = dq.split_difference([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert mean == pytest.approx(2.0) and se == pytest.approx(np.sqrt(4 / 3))
    mean, se = dq.split_difference([0.5], [0.25])
    assert mean == pytest.approx(0.25) and np.isnan(se)


def test_real_data_render_pairs_yieldwise_with_the_best_peer(bench):
    dq, _ = bench
    peers = {m: {"mean_regret": 0.01, "yieldwise_at_least": 0.5} for m in dq.METHODS}
    # beta is the best peer (mean 0.002); yieldwise's split regrets minus beta's: 0.001,
    # 0.002, 0.003 -> mean +0.002, SE sqrt((1/3 + 1) * 1e-6) = 0.0012
    case = {**peers,
            "yieldwise": {"mean_regret": 0.004, "yieldwise_at_least": 1.0,
                          "split_regret": [0.003, 0.004, 0.005]},
            "beta": {"mean_regret": 0.002, "yieldwise_at_least": 0.4,
                     "split_regret": [0.002, 0.002, 0.002]}}  # fmt: skip
    text = "\n".join(dq._render_real({"a set": case, "older set": peers}))
    assert "| 40% (beta) | +0.0020 (0.0012; behind in 3 of 3 splits) |" in text
    # results kept before the per-split regrets: said so, not invented
    assert text.count("| n/a |") == 1


def _flat_predictors(dq, problem, labels) -> dict:
    """A fake fit's methods for the real-data stage: yieldwise and four peers predicting the
    calibration labels' class shares everywhere, the raw score as the problem defines it."""
    shares = np.bincount(labels, minlength=problem.n_classes) / labels.size
    flat = lambda v: np.tile(shares, (len(v), 1))  # noqa: E731
    predictors = dict.fromkeys(["yieldwise", *dq.PEERS[:4]], flat)
    predictors["raw score"] = problem.raw_probability
    return predictors


def test_real_data_keeps_and_reports_each_splits_fit(bench, monkeypatch):
    """The real-data stage keeps every split's sampler record (issue 16's goal 3 on the
    shipped data) beside its regrets, and the report says which splits are clean; a cached
    case without the records is said to be unrecorded, not reported clean."""
    dq, _ = bench
    health = iter([
        {"divergent": 0, "treedepth": 0, "max_rhat": 1.004, "min_ess_bulk": 1500.0},
        {"divergent": 2, "treedepth": 0, "max_rhat": 1.002, "min_ess_bulk": 2100.0},
        {"divergent": 0, "treedepth": 0, "max_rhat": 1.013, "min_ess_bulk": 380.0},
    ])  # fmt: skip

    def fake_fit(problem, outputs, labels, seed):
        fit = {"seconds": 2.0, "components": 30, "warnings": 0} | next(health)
        return _flat_predictors(dq, problem, labels), None, fit

    monkeypatch.setattr(dq, "fit_methods", fake_fit)
    real = dq.run_real(3, 20, seed=5, cases=["digits: forest votes"])
    case = real["digits: forest votes"]
    assert [f["divergent"] for f in case["fits"]] == [0, 2, 0]
    assert set(case) == {*dq.METHODS, "fits"}  # the record is not taken for a method
    text = "\n".join(dq._render_real(real | {"older": {**case, "fits": [None, None, None]}}))
    assert (
        "* digits: forest votes: divergent transitions 0 / 2 / 0, tree-depth hits 0 / 0 / 0, "
        "largest R-hat 1.013, smallest bulk ESS 380; clean in 1 of 3 splits; 2 s a fit."
    ) in text
    assert "* older: not recorded (results cached before the fits were kept)." in text


def test_a_fit_whose_rhat_is_not_finite_is_n_a_and_not_clean(bench, bench_import):
    """The sampler's record of a fit keeps a non-finite R-hat or ESS as None (JSON has no
    NaN), and the render says n/a and does not count the split clean."""
    dq, _ = bench
    common = bench_import("_common")
    table = pd.DataFrame({"r_hat": [1.002, np.nan, 1.004], "ess_bulk": [900.0, 410.0, 1200.0]})
    assert common.worst_diagnostics(table) == {"max_rhat": None, "min_ess_bulk": 410.0}
    table.loc[1, "r_hat"] = 1.008
    assert common.worst_diagnostics(table) == {"max_rhat": 1.008, "min_ess_bulk": 410.0}
    table.loc[2, "ess_bulk"] = np.inf
    assert common.worst_diagnostics(table)["min_ess_bulk"] is None
    fits = [
        {"divergent": 0, "treedepth": 0, "max_rhat": 1.003, "min_ess_bulk": 800.0, "seconds": 3},
        {"divergent": 0, "treedepth": 0, "max_rhat": None, "min_ess_bulk": 700.0, "seconds": 5},
    ]  # fmt: skip
    assert [common.is_clean(f) for f in fits] == [True, False]
    text = "\n".join(dq._render_real_fits({"a set": {"fits": fits}}))
    assert (
        "* a set: divergent transitions 0 / 0, tree-depth hits 0 / 0, largest R-hat n/a, "
        "smallest bulk ESS 700; clean in 1 of 2 splits; 4 s a fit."
    ) in text


def test_set_reaches_the_fits_and_the_command(bench, tmp_path, monkeypatch, capsys):
    """--set changes a yieldwise._design constant for the run (a candidate to measure), the
    fits see it, the stage's command records it, and a wrong name is refused by name."""
    import yieldwise._design as design

    dq, _ = bench
    seen = []

    def fake_fit(problem, outputs, labels, seed):
        seen.append(design.RW1_SHARE)
        fit = {"seconds": 1.0, "components": 30, "warnings": 0, "divergent": 0,
               "treedepth": 0, "max_rhat": 1.001, "min_ess_bulk": 2000.0}  # fmt: skip
        return _flat_predictors(dq, problem, labels), None, fit

    monkeypatch.setattr(dq, "fit_methods", fake_fit)
    monkeypatch.setattr(design, "RW1_SHARE", design.RW1_SHARE)  # restored after the test
    out = tmp_path / "dq.json"
    argv = ["decision_quality.py", "--stages", "real", "--real-cases", "digits: forest votes",
            "--splits", "1", "--matrices", "20", "--results", str(out)]  # fmt: skip
    monkeypatch.setattr(sys, "argv", [*argv, "--set", "RW1_SHARE=0.3"])
    dq.main()
    assert seen == [0.3]
    saved = json.loads(out.read_text())
    assert saved["stage_commands"]["real"].endswith("--set RW1_SHARE=0.3")
    for bad in (["--set", "NO_SUCH=1"], ["--set", "RW1_SHARE"]):
        monkeypatch.setattr(sys, "argv", [*argv, *bad])
        with pytest.raises(SystemExit):
            dq.main()
        assert "--set: expected NAME=VALUE with NAME a constant of yieldwise._design" in (
            capsys.readouterr().err
        )
