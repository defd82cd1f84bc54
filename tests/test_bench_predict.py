"""bench/bench_predict.py --ten-classes on a small set: the Laplace fit of the panel's
softmax-10, the timing and the check against the brute-force formula (the (margin, pair)
joint draw by draw, the others' share over every temperature draw)."""

from __future__ import annotations

import re


def test_ten_classes_prints_its_figures_within_the_error_target(bench_import, capsys):
    bench = bench_import("bench_predict")
    assert bench.main(["--ten-classes", "--n", "6000", "--check", "200", "--repeat", "1",
                       "--calibration", "300"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "6,000 x 4,000 x 10 (90 pairs of top classes, 300 calibration items)" in text
    error = float(re.search(r"max abs error vs exact formula: (\S+) on 200", text).group(1))
    # the pooled formula is exact; the quadrature's error is about 1e-8
    assert error < 1e-6
    assert re.search(r"grid check (\S+)", text).group(1) == "0.00e+00"  # nothing interpolated
    assert "within target: yes" in text


def test_interval_mode_times_bands_checked_by_brute_force(bench_import, capsys):
    """--interval: predict_interval on synthetic 1-D outputs, its bands equal to the
    quantiles of the per-draw probabilities computed with scipy's densities."""
    bench = bench_import("bench_predict")
    assert bench.main(["--interval", "3000", "--check", "50"]) == 0
    text = capsys.readouterr().out
    assert "predict_interval outputs=3,000 draws=4,000" in text
    error = float(re.search(r"max_abs_error=(\S+) on 50 outputs", text).group(1))
    assert error < 1e-10
