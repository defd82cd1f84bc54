"""bench/hard_labels.py: each case draws what its docstring says, and a run on the Laplace
backend (no Stan) prints the sampler's figures and p(c | y) beside the frequency counted
in the calibration set."""

from __future__ import annotations

import ast

import numpy as np
import pytest


@pytest.fixture
def hard_labels(bench_import):
    return bench_import("hard_labels")


def test_cases_draw_their_outputs(hard_labels):
    rng = np.random.default_rng(0)
    y, labels = hard_labels.CASES["hard-binary"](rng, 2000)
    assert set(np.unique(y)) == {0.0, 1.0} and abs(np.mean(y[:, 0] == labels) - 0.8) < 0.03
    y, _ = hard_labels.CASES["constant"](rng, 50)
    assert (y == 0.5).all() and y.shape == (50, 1)
    y, labels = hard_labels.CASES["two-logits-hard"](rng, 2000)
    assert len(np.unique(y, axis=0)) == 2 and (y.sum(axis=1) == 0).all()
    assert abs(np.mean((y[:, 1] > 0) == labels) - 0.8) < 0.03
    y, labels = hard_labels.CASES["hard-score"](rng, 2000)
    assert set(np.unique(y)) == {-5.0, 5.0} and abs(np.mean((y[:, 0] > 0) == labels) - 0.8) < 0.03
    y, labels = hard_labels.CASES["logits-on-a-line"](rng, 4000)
    assert (y[:, 0] == -y[:, 1]).all() and len(np.unique(y, axis=0)) == 4000
    # the sign of z = 2 y[:, 1] is the class with probability Phi(1.5) = 0.933
    assert abs(np.mean((y[:, 1] > 0) == labels) - 0.933) < 0.02
    y, _ = hard_labels.CASES["three-levels"](rng, 500)
    assert set(np.unique(y)) == {0.0, 0.5, 1.0}
    y, labels = hard_labels.CASES["ratings-7"](rng, 20000)
    assert set(np.unique(y)) == {float(v) for v in range(7)}
    # P(rating 0 | class 0) = Phi(-1.5) (mean 2, sd 1, rounded: below 0.5), 0.0668
    assert abs(np.mean(y[labels == 0, 0] == 0) - 0.0668) < 0.01
    # P(rating 6 | class 1) = 1 - Phi(2.0) (mean 3.5: at or above 5.5), 0.0228
    assert abs(np.mean(y[labels == 1, 0] == 6) - 0.0228) < 0.006
    for name, c in (("one-hot-3", 3), ("one-hot-5", 5), ("one-hot-10", 10)):
        y, labels = hard_labels.CASES[name](rng, 3000)
        assert y.shape == (3000, c) and set(np.unique(y)) == {0.0, 1.0}
        assert (y.sum(axis=1) == 1).all()
        # right for 80 % plus a uniform guess's 1 / c of the rest
        assert abs(np.mean(y.argmax(axis=1) == labels) - (0.8 + 0.2 / c)) < 0.03
    y, _ = hard_labels.CASES["ties"](rng, 500)
    top = -np.sort(-y, axis=1)
    assert (top[:, 0] == top[:, 1]).mean() > 0.05 and (y == 0).any()
    y, _ = hard_labels.CASES["classes-30"](rng, 100)
    np.testing.assert_allclose(y.sum(axis=1), 1.0)
    assert y.shape == (100, 30)
    y, _ = hard_labels.CASES["some-one-hot"](rng, 1000)
    assert 0.25 < (y.max(axis=1) == 1.0).mean() < 0.35


def test_a_laplace_run_prints_the_fit_and_the_counted_frequency(hard_labels, capsys):
    assert hard_labels.main(["hard-binary", "400", "backend=laplace"]) == 0
    text = capsys.readouterr().out
    assert "hard-binary n=400 seed=1 {'backend': 'laplace'}: total" in text
    assert "divergent 0, tree-depth hits 0" in text
    model = np.array(ast.literal_eval(text.split("p(c | first output) ")[1].split("\n")[0]))
    counted = np.array(ast.literal_eval(text.split("empirical           ")[1].split(" (")[0]))
    # two distinct outputs: the model's p(c | y) is the binomial posterior's, near the count
    assert np.abs(model - counted).max() < 0.03


def test_bad_arguments_are_refused(hard_labels, capsys):
    assert hard_labels.main(["no-such-case"]) == 2
    assert "CASE must be one of" in capsys.readouterr().err
    assert hard_labels.main(["hard-binary", "300", "adapt_delta"]) == 2
    assert "key=value" in capsys.readouterr().err


def test_set_holds_design_constants_for_the_fit_only(hard_labels, capsys, monkeypatch):
    import yieldwise._design as design

    seen = []

    class Recording(hard_labels.Transducer):
        def fit(self, *args, **kwargs):
            seen.append((design.RANGE_CLASS_BALANCED, design.GRID_1D))
            return super().fit(*args, **kwargs)

    monkeypatch.setattr(hard_labels, "Transducer", Recording)
    before = (design.RANGE_CLASS_BALANCED, design.GRID_1D)
    argv = ["hard-binary", "300", "backend=laplace", "--set", "RANGE_CLASS_BALANCED=1",
            "GRID_1D=40"]  # fmt: skip
    assert hard_labels.main(argv) == 0
    assert seen == [(1, 40)]
    assert before == (design.RANGE_CLASS_BALANCED, design.GRID_1D)
    assert "--set RANGE_CLASS_BALANCED=1 GRID_1D=40: total" in capsys.readouterr().out
    assert hard_labels.main(["hard-binary", "300", "--set", "NO_SUCH=1"]) == 2
    err = capsys.readouterr().err
    assert "--set: expected NAME=VALUE with NAME a constant of yieldwise._design" in err
    assert "'NO_SUCH=1'" in err
