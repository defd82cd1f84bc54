"""bench/joint_shipped.py: its table and its paired comparison against hand computations
(the fits themselves are bench runs, not tests)."""

from __future__ import annotations

import json

import pytest


def _fit(name, seed, elpd, clean=True):
    return {
        "set": name, "seed": seed, "items": 1079,
        "sampler": {"divergent": 0 if clean else 3, "treedepth": 0, "max_rhat": 1.004,
                    "min_ess_bulk": 1234.0, "sampling_seconds": 40.25, "components": 120},
        "elpd_conditional": elpd, "elpd_se": 6.0,
        "long_run_mean": {"forest": 0.3641, "network": 0.329, "joint": 0.39},
        "prob_beats": {"forest > network": 0.946, "forest > joint": 0.0,
                       "network > joint": 0.0},
    }  # fmt: skip


def _study(fits, settings=None):
    meta = {"command": "x", "date": "2026-12-08", "commit": "abc", "machine": "m"}
    return {"meta": {**meta, "settings": settings or {}}, "fits": fits}


def test_the_table_rows_match_a_hand_written_row(bench_import):
    js = bench_import("joint_shipped")
    assert js.JOINT_SETS == (
        "joint-forest-network", "joint-forest-knn-network", "joint-forest-knn-logit"
    )  # fmt: skip
    base = _study([_fit("joint-forest-network", 1, -50.754)])
    other = _study([_fit("joint-forest-network", 1, -51.2, clean=False)], {"MAX_CENTRES": 240})
    text = js.render([base, other])
    assert ("| defaults | joint-forest-network | 1 | 120 | 0 / 0 / 1.004 / 1,234 / 40.2 | yes | "
            "-50.75 | 0.364 / 0.329 / 0.390 | 0.946, 0.000, 0.000 |") in text  # fmt: skip
    assert "| `MAX_CENTRES=240` | joint-forest-network | 1 | 120 | 3 / 0 /" in text
    assert "| **no** | -51.20 |" in text


def test_compare_pairs_fits_by_set_and_seed(bench_import, capsys, tmp_path):
    """Shared fits (network, 1) and (logit, 2): differences -51.5 - (-50) = -1.5 and
    -45 - (-46) = +1; sum -0.5; one better; the other's network fit not clean."""
    js = bench_import("joint_shipped")
    base = _study([_fit("net", 1, -50.0), _fit("logit", 2, -46.0), _fit("logit", 3, -40.0)])
    other = _study([_fit("net", 1, -51.5, clean=False), _fit("logit", 2, -45.0)])
    c = js.compare(base, other)
    assert c["fits"] == [["logit", 2], ["net", 1]]
    assert c["elpd_diff"] == [pytest.approx(1.0), pytest.approx(-1.5)]
    assert c["sum"] == pytest.approx(-0.5) and c["better"] == 1 and c["clean"] == (2, 1)
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, study in zip(paths, (base, other), strict=True):
        path.write_text(json.dumps(study))
    assert js.main(["--compare", *map(str, paths)]) == 0
    assert "+1.00, -1.50 (sum -0.50; better in 1 of 2); clean 2 (base) and 1 (other)" in (
        capsys.readouterr().out
    )
    with pytest.raises(ValueError, match="fits both studies ran"):
        js.compare(base, _study([_fit("net", 9, -50.0)]))
    with pytest.raises(SystemExit):
        js.main([])  # no --out, --render or --compare
    assert "--out is required" in capsys.readouterr().err
    with pytest.raises(ValueError, match="name must be one of"):
        js.fit_record("digits-forest", 1)
