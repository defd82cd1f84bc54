"""bench/bench_ten_class_memory.py on a small fit (300 items, 100 Laplace draws per chain):
both modes print their figures, the long-run figures are those of long_run_utility called
directly, and the cells held whole and made in blocks give the same utilities."""

from __future__ import annotations

import numpy as np
import pytest

from yieldwise import Transducer, long_run_utility


def test_fit_then_long_run_held_and_in_blocks(bench_import, capsys, tmp_path):
    bench = bench_import("bench_ten_class_memory")
    path = str(tmp_path / "ten.nc")
    out = bench.main(["fit", "300", "--draws", "100", "--save", path])
    assert "fit items=300 backend=laplace draws=400 seconds=" in capsys.readouterr().out
    assert out["peak_rss"] > 0 and out["seconds"] > 0
    shipped = bench.long_run._DENSE_CELLS
    held = bench.main(["long-run", path, "--cells", "held", "--matrices", "3"])
    blocks = bench.main(["long-run", path, "--cells", "blocks", "--matrices", "3"])
    assert shipped == bench.long_run._DENSE_CELLS  # put back after each run
    assert "long-run cells=blocks matrices=3 seconds=" in capsys.readouterr().out
    assert blocks["mean_utility"] == pytest.approx(held["mean_utility"], rel=1e-12)
    assert blocks["max_error"] == pytest.approx(held["max_error"], rel=1e-9)
    batch = np.random.default_rng(3).uniform(-1, 1, (3, 10, 10))  # the bench's matrices
    direct = long_run_utility(Transducer.load(path), batch)
    assert held["mean_utility"] == pytest.approx(float(direct.values.mean()), rel=1e-12)
    assert held["call_peak"] > 0


def test_bands_are_predict_interval_at_the_first_calibration_outputs(bench_import, capsys,
                                                                     tmp_path):  # fmt: skip
    bench = bench_import("bench_ten_class_memory")
    path = str(tmp_path / "ten.nc")
    bench.main(["fit", "200", "--draws", "50", "--save", path])
    out = bench.main(["bands", path, "--outputs", "30", "--prob", "0.9"])
    assert "bands outputs=30 prob=0.9 seconds=" in capsys.readouterr().out
    t = Transducer.load(path)
    band = t.predict_interval(t.calibration_outputs()[:30], prob=0.9)
    assert out["lower_sum"] == pytest.approx(float(band["lower"].values.sum()), rel=1e-12)
    assert out["upper_sum"] == pytest.approx(float(band["upper"].values.sum()), rel=1e-12)
    assert out["mean_sum"] == pytest.approx(30.0, rel=1e-12)  # each row sums to 1
    assert out["call_peak"] > 0 and out["lower_sum"] < out["upper_sum"]
    with pytest.raises(SystemExit):
        bench.main(["bands", path, "--outputs", "0"])


def test_rejects_too_few_items_and_no_matrices(bench_import, tmp_path):
    bench = bench_import("bench_ten_class_memory")
    with pytest.raises(SystemExit):
        bench.main(["fit", "10"])
    with pytest.raises(SystemExit):
        bench.main(["long-run", str(tmp_path / "none.nc"), "--matrices", "0"])
