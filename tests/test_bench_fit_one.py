"""bench/fit_one.py --coverage-rep: the refit is the coverage study's own fit (its set and
seed), and the divergences are located among the tau_f draws. The Transducer is replaced by
a recorder with scripted draws, so no Stan runs here."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
import xarray as xr


class Recorder:
    """Stands in for Transducer: keeps what fit() got and returns scripted sampler output."""

    calls: ClassVar[list[dict]] = []

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def fit(self, outputs, labels):
        Recorder.calls.append({"kwargs": self.kwargs, "outputs": outputs, "labels": labels})
        # 2 chains x 5 draws; tau_f rises along the draws; 2 divergences, at 0.5 and 5.0
        tau_f = np.array([[0.5, 1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0, 9.0]])
        diverging = np.zeros((2, 5), bool)
        diverging[0, 0] = diverging[1, 0] = True
        dims = ("chain", "draw")
        stats = xr.Dataset({
            "diverging": (dims, diverging), "n_steps": (dims, np.full((2, 5), 15.0)),
            "step_size": (dims, np.full((2, 5), 0.25)),
        })  # fmt: skip
        posterior = xr.Dataset({"tau_f": (("chain", "draw", "tau_f_dim"), tau_f[..., None])})
        self.posterior_ = type("P", (), {"sample_stats": stats, "posterior": posterior})()
        return self

    def sampler_summary(self):
        return {"sampling_seconds": 1.5, "divergent": 2, "max_treedepth_hits": 0}

    def diagnostics(self):
        return pd.DataFrame({"r_hat": [1.001, 1.004], "ess_bulk": [900.0, 1200.0]})


@pytest.fixture
def fit_one(bench_import, monkeypatch):
    pytest.importorskip("sklearn")  # coverage.py imports decision_quality's peers
    pytest.importorskip("betacal")
    module = bench_import("fit_one")
    monkeypatch.setattr(module, "Transducer", Recorder)
    Recorder.calls = []
    return module


def test_coverage_rep_refits_the_studys_set_and_seed(fit_one, bench_import, capsys):
    study = bench_import("coverage", as_name="bench_coverage")
    problems = bench_import("_problems")
    assert fit_one.main(["beta", "300", "--coverage-rep", "3", "warmup=1000"]) == 0
    (call,) = Recorder.calls
    index = [make().name for make in problems.PANEL].index("beta")
    assert call["kwargs"] == {"seed": study.fit_seed(2026, index, 300, 3), "progress": False,
                              "warmup": 1000}  # fmt: skip
    outputs, labels = problems.PANEL[index]().sample(
        300, np.random.default_rng(study.sample_seed(2026, index, 300, 3))
    )
    np.testing.assert_array_equal(call["outputs"].to_numpy(), outputs)
    np.testing.assert_array_equal(call["labels"], labels)
    text = capsys.readouterr().out
    assert "divergent 2," in text and "(coverage repetition 3)" in text
    # tau_f 0.5 is below 0 of the 10 draws, 5.0 below 5 of them: quantiles 0.0 and 0.5
    assert "divergent transitions at its quantiles [0.0, 0.5]" in text
    assert "posterior 5 / 50 / 95 % [0.72, 4.5, 8.55]" in text  # numpy's linear quantiles


def test_without_coverage_rep_the_fixed_set_is_used(fit_one):
    assert fit_one.main(["beta", "300"]) == 0
    (call,) = Recorder.calls
    assert call["kwargs"] == {"seed": 1, "progress": False}


def test_coverage_rep_needs_a_number(fit_one, capsys):
    assert fit_one.main(["beta", "300", "--coverage-rep"]) == 2
    assert "--coverage-rep needs a repetition number" in capsys.readouterr().err
    assert Recorder.calls == []


def test_a_shipped_set_is_fitted_whole_with_the_seed_given(fit_one, capsys):
    from yieldwise.datasets import load_digits_three

    assert fit_one.main(["digits-3-5-8", "all", "seed=2", "adapt_delta=0.9"]) == 0
    (call,) = Recorder.calls
    assert call["kwargs"] == {"seed": 2, "progress": False, "adapt_delta": 0.9}
    frame = load_digits_three()
    pd.testing.assert_frame_equal(call["outputs"], frame[["p_three", "p_five", "p_eight"]])
    pd.testing.assert_series_equal(call["labels"], frame["label"])
    assert capsys.readouterr().out.startswith("digits-3-5-8 n=all seed=2 {'adapt_delta': 0.9}")


def test_a_joint_shipped_set_is_fitted_as_a_mapping_of_its_classifiers(fit_one, capsys):
    """joint-forest-knn-logit: the Transducer gets each classifier's own columns by name
    (a joint fit), with the whitening at its default (not forced off)."""
    from yieldwise.datasets import load_digits_binary

    assert fit_one.main(["joint-forest-knn-logit", "all", "seed=3"]) == 0
    (call,) = Recorder.calls
    frame = load_digits_binary()
    assert list(call["outputs"]) == ["forest", "knn", "logit"]
    for member, cols in {"forest": ["forest_votes"], "knn": ["knn_votes"],
                         "logit": ["net_logit_eight"]}.items():  # fmt: skip
        pd.testing.assert_frame_equal(call["outputs"][member], frame[cols])
    pd.testing.assert_series_equal(call["labels"], frame["label"])
    assert "joint-forest-knn-logit n=all seed=3 {} whitening=default" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["digits-logits", "300"], ["beta", "all"],
                                  ["digits-logits", "all", "--coverage-rep", "1"]])  # fmt: skip
def test_n_is_all_exactly_for_a_shipped_set(fit_one, capsys, args):
    assert fit_one.main(args) == 2
    assert "N is 'all' for a shipped set" in capsys.readouterr().err
    assert Recorder.calls == []


def test_a_share_of_positives_and_the_binning_record(fit_one, bench_import, capsys, monkeypatch):
    """PROBLEM@P% fits the binary problem at that share of positives (with_positives), on
    the set of the seed [1, 7, N]; a fit with binned rows prints its binning record; a
    share on a problem that is not binary is refused by name."""
    problems = bench_import("_problems")
    binning = {"rows_exact": 3600, "rows": 1968, "bin_width": [0.0598, 0.0669],
               "binned_ess_share": 0.9978, "binned_gap_sd": 0.047}  # fmt: skip
    monkeypatch.setattr(Recorder, "sampler_summary", lambda self: {
        "sampling_seconds": 1.5, "divergent": 0, "max_treedepth_hits": 0, "binning": binning,
    })  # fmt: skip
    assert fit_one.main(["two-logits@5%", "400"]) == 0
    (call,) = Recorder.calls
    two = next(make() for make in problems.PANEL if make().name == "two-logits")
    outputs, labels = problems.with_positives(two, 0.05).sample(
        400, np.random.default_rng([1, 7, 400])
    )
    np.testing.assert_array_equal(call["outputs"].to_numpy(), outputs)
    np.testing.assert_array_equal(call["labels"], labels)
    assert labels.mean() < 0.15  # about 5 % positives, not the panel's balance
    text = capsys.readouterr().out
    assert "binned rows 3600 -> 1968, widths [0.0598, 0.0669], binned ESS share 0.998" in text
    assert fit_one.main(["softmax-3@5%", "400"]) == 2
    assert "PROBLEM@P% needs a binary panel problem" in capsys.readouterr().err
