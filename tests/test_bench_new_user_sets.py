"""bench/new_user_sets.py: its truths are exact, checked against simulation of the
generating processes; its sets are reproducible; its command line refuses what it cannot
run; and a fit through it (the Laplace backend, fast) reports the bands it checks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logit


@pytest.fixture(scope="module")
def sets(bench_import):
    return bench_import("new_user_sets")


def test_tie_truth_is_the_simulated_share_of_positives_among_a_scores_items(sets):
    rng = np.random.default_rng(0)
    s = rng.normal(size=4_000_000)
    score = sets.tie_score(s)
    positive = rng.random(s.size) < expit(sets.TIE_SLOPE * s + sets.TIE_SHIFT)
    for value in np.unique(score)[[0, 5, 19, 30, 39]]:  # the two ends and inside
        mine = score == value
        truth = sets.tie_truth(value)
        error = np.sqrt(truth * (1 - truth) / mine.sum())  # the share's, were truth right
        assert positive[mine].mean() == pytest.approx(truth, abs=4 * error), value


def test_four_class_truth_is_calibrated_and_beats_other_temperatures_in_log_loss(sets):
    """Items simulated as the set draws them: their true classes' frequencies match the
    closed form within a few standard errors in every decile of it, and its mean log loss
    is below that of softmax(a log x) for a 0.1 away from FOUR_MARGIN / FOUR_TEMPER."""
    rng = np.random.default_rng(1)
    n, c = 400_000, sets.FOUR_CLASSES
    labels = rng.integers(0, c, n)
    z = rng.normal(size=(n, c))
    z[np.arange(n), labels] += sets.FOUR_MARGIN
    x = np.exp(sets.FOUR_TEMPER * z)
    x /= x.sum(axis=1, keepdims=True)
    truth = sets.four_class_truth(x)
    hit = labels == 0
    edges = np.quantile(truth[:, 0], np.linspace(0, 1, 11))
    bins = np.clip(np.searchsorted(edges, truth[:, 0], side="right") - 1, 0, 9)
    for b in range(10):
        mine = bins == b
        p = truth[mine, 0].mean()
        error = np.sqrt(np.mean(truth[mine, 0] * (1 - truth[mine, 0])) / mine.sum())
        assert hit[mine].mean() == pytest.approx(p, abs=4 * error), b

    def log_loss(a):
        logits = a * np.log(x)
        logits -= logits.max(axis=1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return -log_p[np.arange(n), labels].mean()

    best = sets.FOUR_MARGIN / sets.FOUR_TEMPER
    assert log_loss(best) < min(log_loss(best - 0.1), log_loss(best + 0.1))


def test_bimodal_truth_is_the_simulated_share_near_each_check_output(sets):
    rng = np.random.default_rng(2)
    n = 2_000_000
    labels = (rng.random(n) < sets.BIMODAL_SHARE).astype(int)
    s = rng.normal(np.where(labels == 1, sets.BIMODAL_MEAN, -sets.BIMODAL_MEAN), sets.BIMODAL_SD)
    flip = rng.random(n) < sets.BIMODAL_FLIP
    s[flip] = -s[flip]
    data = sets.bimodal(np.random.default_rng(3))
    for value, p1 in zip(logit(data.check), data.truth[:, 1], strict=True):
        near = np.abs(s - value) < 0.02
        share = labels[near].mean()
        error = np.sqrt(share * (1 - share) / near.sum())
        assert p1 == pytest.approx(share, abs=4 * error + 0.002), value


def test_sets_are_reproducible_and_shaped_as_their_truths(sets):
    for name in sets.SETS:
        a, b = sets.draw(name, 11), sets.draw(name, 11)
        np.testing.assert_array_equal(a.outputs, b.outputs)
        np.testing.assert_array_equal(a.labels, b.labels)
        assert a.truth.shape == (len(a.check), 4 if name == "four-class" else 2)
        np.testing.assert_allclose(a.truth.sum(axis=1), 1.0)
        assert np.all((a.truth > 0) & (a.truth < 1))
    rare = sets.draw("rare", 11)
    assert 0.01 < rare.labels.mean() < 0.025  # about 1.6 % positives
    assert np.abs(sets.draw("heavy-tails", 11).outputs).max() > 50  # tails past the checks


def test_unknown_sets_and_bare_arguments_are_refused(sets, capsys):
    with pytest.raises(SystemExit):
        sets.main(["no-such-set"])
    assert "unknown sets ['no-such-set']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sets.main(["rare", "=laplace"])
    assert "expected key=value" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sets.main(["backend=laplace"])  # no set
    assert "unknown sets []" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore")
def test_a_run_counts_the_bands_that_hold_the_truth(sets, capsys):
    out = sets.run("rare", 11, 0.95, {"backend": "laplace"})
    printed = capsys.readouterr().out
    assert out["checked"] == 13 and 0 <= out["held"] <= 13
    assert f"95% bands holding the truth: {out['held']} of 13" in printed
