"""The decision-quality benchmark's exact evaluator (bench/decision_quality.py), brute-forced."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        import _problems
        import decision_quality
    finally:
        sys.path.remove(str(BENCH))
    return decision_quality, _problems


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
