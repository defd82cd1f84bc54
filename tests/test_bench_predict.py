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
