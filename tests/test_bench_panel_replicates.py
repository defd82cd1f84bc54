"""The replicated decision-quality panel (bench/panel_replicates.py), without Stan.

Every statistic is checked against numbers worked out by hand below; the results files are
built in the layout bench/decision_quality.py writes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def reps(bench_import):
    pytest.importorskip("sklearn")  # decision_quality.py imports the calibration peers
    pytest.importorskip("betacal")
    return bench_import("panel_replicates")


def _regrets(reps, yieldwise, best, best_name="isotonic"):
    """Per-replicate mean regrets: ``best`` for ``best_name``, 1.0 for every other peer."""
    out = {p: np.ones(len(yieldwise)) for p in reps.PEERS}
    out[best_name] = np.asarray(best, float)
    out["yieldwise"] = np.asarray(yieldwise, float)
    return out


def test_a_cell_behind_beyond_noise_is_worked_out_by_hand(reps):
    # yieldwise 0.003 / 0.004 / 0.005 against isotonic's 0.001 three times: mean 0.004,
    # ratio 4, difference 0.003 (>= 0.0005: the allowance does not apply); the excess
    # yieldwise - 2 peer is 0.001 / 0.002 / 0.003, mean 0.002, sd 0.001, SE 0.001 / sqrt(3)
    c = reps.cell_statistics(_regrets(reps, [0.003, 0.004, 0.005], [0.001] * 3))
    assert c["peer"] == "isotonic" and c["replicates"] == 3
    assert c["yieldwise"] == pytest.approx(0.004)
    assert c["yieldwise_se"] == pytest.approx(0.001 / np.sqrt(3))
    assert c["peer_se"] == pytest.approx(0.0, abs=1e-15)
    assert c["difference"] == pytest.approx(0.003)
    assert c["ratio"] == pytest.approx(4.0)
    assert c["excess"] == pytest.approx(0.002)
    assert c["excess_se"] == pytest.approx(0.001 / np.sqrt(3))
    assert c["over_twice"] and c["fails"] and c["fails_beyond_noise"]
    assert c["behind_in"] == 3


def test_a_miss_within_the_noise_is_not_called_beyond_it(reps):
    # excess 0.0005 / -0.0005 / 0.0030: mean 0.001, sd 0.0018028, SE 0.0010408 > 0.001 / 2
    c = reps.cell_statistics(_regrets(reps, [0.0025, 0.0015, 0.0040], [0.001, 0.001, 0.0005]))
    assert c["yieldwise"] == pytest.approx(0.008 / 3)
    assert c["peer_mean"] == pytest.approx(0.0025 / 3)
    assert c["over_twice"] and c["fails"]  # 0.00267 > 2 x 0.00083, and they differ by 0.0018
    assert c["excess"] == pytest.approx(0.001)
    assert c["excess_se"] == pytest.approx(np.std([0.0005, -0.0005, 0.003], ddof=1) / np.sqrt(3))
    assert not c["fails_beyond_noise"]


def test_the_allowance_and_the_best_peer_by_its_mean(reps):
    # yieldwise 3x the peer but only 0.0002 above it: over twice, yet the goal is met
    c = reps.cell_statistics(_regrets(reps, [0.0003, 0.0003], [0.0001, 0.0001]))
    assert c["over_twice"] and not c["fails"] and not c["fails_beyond_noise"]
    # the best peer is the lowest on average, not the lowest in the first replicate
    regrets = _regrets(reps, [0.002, 0.002], [0.0005, 0.0035], best_name="beta")
    regrets["isotonic"] = np.array([0.001, 0.001])
    c = reps.cell_statistics(regrets)
    assert c["peer"] == "isotonic" and c["peer_mean"] == pytest.approx(0.001)
    assert c["behind_in"] == 2 and not c["over_twice"]


def _results(reps, seed, regrets_by_cell, *, fit=None):
    """A decision_quality.py results file with a panel stage of the given mean regrets."""
    fit = fit or {"seconds": 6.0, "components": 30, "divergent": 0, "treedepth": 0, "warnings": 0}
    panel = {
        key: {
            "fit": fit,
            "summary": {m: {"mean_regret": v, "max_regret": 0.0} for m, v in regrets.items()},
        }
        for key, regrets in regrets_by_cell.items()
    }
    return {
        "panel": panel,
        "stage_commands": {
            "panel": f"python bench/decision_quality.py --stages panel --seed {seed}"
        },
        "date": "2026-11-26",
    }


def _cell(reps, yieldwise, peer):
    return {"yieldwise": yieldwise, **dict.fromkeys(reps.PEERS, 1.0), "beta": peer}


def test_the_panel_wide_comparison_and_the_fits(reps):
    # two cells, two replicates; yieldwise's panel mean 0.0015 / 0.0025 against beta's
    # 0.0010 / 0.0020 in replicate one and two: lowest in neither, and beta wins on the means
    first = _results(
        reps, 1, {"a|300": _cell(reps, 0.001, 0.0005), "a|1000": _cell(reps, 0.002, 0.0015)}
    )
    bad_fit = {"seconds": 60.0, "components": 30, "divergent": 3, "treedepth": 0, "warnings": 1}
    second = _results(
        reps,
        2,
        {"a|300": _cell(reps, 0.002, 0.0015), "a|1000": _cell(reps, 0.003, 0.0025)},
        fit=bad_fit,
    )
    s = reps.statistics([reps.extract(first), reps.extract(second)])
    assert s["seeds"] == [1, 2]
    assert s["panel_by_replicate"]["yieldwise"] == pytest.approx([0.0015, 0.0025])
    assert s["panel_mean"]["beta"] == pytest.approx(0.0015)
    assert s["yieldwise_lowest_in"] == 0
    assert s["fits"] == 4 and s["divergent"] == 6 and s["not_clean"] == 2 and s["warned"] == 2
    assert s["fit_seconds"] == pytest.approx(132.0)
    text = reps.render([reps.extract(first), reps.extract(second)])
    assert "| lowest mean regret across the panel | not met on the means" in text
    assert "the lowest in 0 of 2 replicates" in text


def test_extract_refuses_files_it_cannot_read(reps):
    with pytest.raises(ValueError, match="no 'panel' stage"):
        reps.extract({"panel_partial": {}})
    with pytest.raises(ValueError, match="no --seed"):
        reps.extract({"panel": {}, "command": "python bench/decision_quality.py"})


def test_store_round_trip_and_its_checks(reps, tmp_path, capsys):
    files = []
    for seed, (yw, peer) in {7: (0.001, 0.002), 8: (0.003, 0.001)}.items():
        path = tmp_path / f"panel_{seed}.json"
        path.write_text(json.dumps(_results(reps, seed, {"v|300": _cell(reps, yw, peer)})))
        files.append(path)
    store = tmp_path / "store.json"
    note = "These replicates ran at commit abc1234."
    assert reps.main([str(f) for f in files] + ["--store", str(store), "--note", note]) == 0
    made = capsys.readouterr().out
    assert reps.main(["--render", "--store", str(store)]) == 0
    assert capsys.readouterr().out == made  # the stored replicates render the same text
    assert f"lowest.\n\n{note}\n\n| problem |" in made
    # yieldwise 0.002 against beta's 0.0015: not over twice
    assert "| v | 300 | 0.00200 (0.00100) | beta | 0.00150 (0.00050) |" in made
    with pytest.raises(SystemExit):  # two files of one seed are not independent replicates
        reps.main([str(files[0]), str(files[0]), "--store", str(store)])
    with pytest.raises(SystemExit):  # one replicate has no standard error
        reps.main([str(files[0]), "--store", str(store)])
    stored = json.loads(store.read_text())
    store.write_text(json.dumps({**stored, "format_version": 0}))
    with pytest.raises(ValueError, match="format version 0"):
        reps.main(["--render", "--store", str(store)])
