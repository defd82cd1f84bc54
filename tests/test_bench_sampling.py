"""bench/bench_sampling.py: the study's cases are the coverage study's own sets and seeds
(so their leapfrog steps pair with its stored fits), and the rendered table applies each
case's target. No Stan runs here."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def bench_sampling(bench_import):
    pytest.importorskip("sklearn")  # coverage.py imports decision_quality's peers
    pytest.importorskip("betacal")
    return bench_import("bench_sampling")


@pytest.mark.parametrize(("case", "name"), [("study-votes", "votes"), ("clipped", "clipped")])
def test_study_cases_are_the_coverage_studys_sets(bench_sampling, bench_import, case, name):
    study = bench_import("coverage", as_name="bench_coverage")
    problems = bench_import("_problems")
    index = [make().name for make in problems.PANEL].index(name)
    y, v, grid, desc, seed = bench_sampling.simulate(case, 3)
    outputs, labels = problems.PANEL[index]().sample(
        3600, np.random.default_rng(study.sample_seed(2026, index, 3600, 2))
    )
    np.testing.assert_array_equal(v, outputs[:, 0])
    np.testing.assert_array_equal(y, labels)
    assert seed == study.fit_seed(2026, index, 3600, 2)
    assert "repetition 2" in desc and grid.shape == (10,)
    assert f"{(outputs == 0).sum()} exact 0s" in desc


def test_the_bench_sets_keep_their_own_seeds(bench_sampling):
    _, v, _, _, seed = bench_sampling.simulate("votes", 4)
    _, v4 = bench_sampling.simulate_votes(seed=4)
    np.testing.assert_array_equal(v, v4)
    assert seed == 4
    z = bench_sampling.simulate("logits", 2)
    assert z[1].shape == (3600, 2) and z[4] == 2


def test_an_unknown_case_is_refused_by_name(bench_sampling, capsys):
    with pytest.raises(ValueError, match=r"case: expected one of votes, study-votes.*'vote'"):
        bench_sampling.simulate("vote", 1)
    with pytest.raises(SystemExit):
        bench_sampling.main(["votes", "vote"])
    assert "cases: expected some of votes, study-votes, clipped, logits; found vote" in (
        capsys.readouterr().err
    )


def test_the_table_applies_each_cases_target(bench_sampling, monkeypatch):
    written = {}
    monkeypatch.setattr(bench_sampling, "write_section", lambda head, text: written.update(t=text))

    def fake_run(case, seed, args):
        seconds = {"votes": 6.0, "study-votes": 12.0, "clipped": 15.0, "logits": 29.0}[case]
        return {"case": case, "seed": seed, "description": f"{case} set", "rows": 10, "K": 60,
                "backend": "pystan", "seconds": seconds, "adapt_delta": 0.99, "warmup": 500,
                "max_treedepth": 10, "draws": 1000, "divergences": 0, "treedepth_hits": 0,
                "iterations": 4000,
                "mean_steps": 31.0, "rhat_log_lik": 1.001, "rhat_transducer_max": 1.002,
                "ess_log_lik": 3000.0, "ess_transducer_min": 900.0}  # fmt: skip

    monkeypatch.setattr(bench_sampling, "run", fake_run)
    pytest.importorskip("httpstan")
    assert bench_sampling.main(["--seeds", "1", "--logit-seeds", "1", "--write"]) == 0
    assert "max_treedepth 10 (votes), 10 (study-votes)" in written["t"]  # as each case ran
    rows = {line.split(":")[0].lstrip("| "): line for line in written["t"].splitlines()[4:]}
    assert rows["votes"].endswith(
        "| 6 s (10 s) | 0 | 0 / 4,000 | 31 | 1.001, 1.002 | 3000, 900 | yes |"
    )
    assert rows["study-votes"].endswith("| NO |") and "| 12 s (10 s) |" in rows["study-votes"]
    assert rows["clipped"].endswith("| (no target) |") and "| 15 s (no target) |" in rows["clipped"]
    assert rows["logits"].endswith("| yes |") and "| 29 s (30 s) |" in rows["logits"]


def test_the_tree_depth_is_the_per_dimension_default_unless_given(bench_sampling, monkeypatch):
    """--max-treedepth reaches each fit; without it the constructor's None (chosen by the
    output dimensions, as a user's fit)."""
    seen = []

    def fake_run(case, seed, args):
        seen.append(args.max_treedepth)
        raise KeyboardInterrupt  # one call is enough

    monkeypatch.setattr(bench_sampling, "run", fake_run)
    for argv, expected in ((["votes"], None), (["votes", "--max-treedepth", "12"], 12)):
        with pytest.raises(KeyboardInterrupt):
            bench_sampling.main(argv)
        assert seen.pop() == expected
