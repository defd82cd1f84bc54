"""bench/bench_rules.py on a small fit (100 Laplace draws per chain): both modes print
their figures, and the figures obey what theory 4 says of them."""

from __future__ import annotations

import numpy as np
import pytest

from yieldwise.long_run import long_run_utility, oracle_utility


def test_both_modes_print_figures_bounded_as_theory_says(bench_import, capsys):
    bench = bench_import("bench_rules")
    out = bench.main(["--oracle", "--matrices", "4", "--draws", "100"])
    assert "matrices=4 draws=400 seconds=" in capsys.readouterr().out
    assert out["peak_MiB"] > 0 and out["seconds"] > 0
    t = bench.fitted(100)
    matrices = np.random.default_rng(0).uniform(0, 1, (4, 4, 3))  # the bench's matrices
    oracle = oracle_utility(t, matrices)
    assert out["mean_utility"] == pytest.approx(float(oracle.mean()), rel=1e-12)
    # on the same Monte Carlo points, deciding with each draw's own masses is never worse,
    # draw by draw, than the expected-utility rule's decisions
    deployed = long_run_utility(t, matrices)
    assert oracle.attrs["integration"] == deployed.attrs["integration"] == "monte-carlo"
    assert (oracle.values >= deployed.values - 1e-12).all()
    assert (oracle.values > deployed.values + 1e-6).any()  # and sometimes better

    out = bench.main(["--matrices", "30", "--draws", "100"])
    assert "matrices=30 draws=400 seconds=" in capsys.readouterr().out
    # the expected-utility rule maximises the posterior-mean utility point by point, so
    # no matrix's posterior mean falls below the classifier's own argmax
    assert out["share_not_worse"] == 1 and out["mean_gain"] >= 0


def test_rejects_an_empty_batch(bench_import):
    bench = bench_import("bench_rules")
    with pytest.raises(SystemExit):
        bench.main(["--matrices", "0"])
