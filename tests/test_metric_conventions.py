"""zero_division=, the two macro-F conventions, and folds that add (issue 19, item 6)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn.metrics as skm

from yieldwise import ConfusionMatrix, UndefinedMetricError, UtilityMatrix, metrics, utility_yield

SK = {"precision": skm.precision_score, "recall": skm.recall_score, "f1": skm.f1_score}


def _labels(seed):
    """Random labels over 4 classes where some classes are never decided or never present."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    present = rng.choice(4, size=int(rng.integers(1, 4)), replace=False)
    decided = rng.choice(4, size=int(rng.integers(1, 4)), replace=False)
    return rng.choice(present, n), rng.choice(decided, n)


def _confusion(truth, decided):
    counts = np.zeros((4, 4))
    np.add.at(counts, (decided, truth), 1)
    return ConfusionMatrix(counts)


@pytest.mark.parametrize("zero_division", [0.0, 1.0, np.nan])
@pytest.mark.parametrize("average", [None, "macro", "weighted", "micro"])
@pytest.mark.parametrize("seed", range(25))
def test_zero_division_is_sklearns(seed, average, zero_division):
    truth, decided = _labels(seed)
    cm = _confusion(truth, decided)
    for name, reference in SK.items():
        ours = getattr(metrics, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scikit-learn warns about empty averages
            if average is None:  # one class against the rest; "binary" needs two labels
                expected = reference(truth == 2, decided == 2, zero_division=zero_division)
                got = ours(cm, positive=2, zero_division=zero_division)
            else:
                expected = reference(
                    truth, decided, labels=[0, 1, 2, 3], average=average,
                    zero_division=zero_division,
                )  # fmt: skip
                got = ours(cm, average=average, zero_division=zero_division)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("seed", range(40))
def test_harmonic_macro_f_is_the_f_of_macro_precision_and_recall(seed):
    truth, decided = _labels(seed)
    cm = _confusion(truth, decided)
    for z in (0.0, 1.0):
        p = skm.precision_score(truth, decided, labels=range(4), average="macro", zero_division=z)
        r = skm.recall_score(truth, decided, labels=range(4), average="macro", zero_division=z)
        expected = 2 * p * r / (p + r) if p + r > 0 else z
        got = metrics.f1(cm, average="macro", macro_f="harmonic", zero_division=z)
        assert got == pytest.approx(expected, abs=1e-12)
        # and F-beta's harmonic form weighs recall beta^2 times as much
        beta = 2.0
        expected = (1 + beta**2) * p * r / (beta**2 * p + r) if p + r > 0 else z
        got = metrics.fbeta(cm, beta, average="macro", macro_f="harmonic", zero_division=z)
        assert got == pytest.approx(expected, abs=1e-12)


def test_the_two_macro_conventions_differ_by_hand():
    # per class (P, R): a (1/2, 1), b (1, 1/3); F1 = 2/3 and 1/2
    # mean of F1 = 7/12; macro P = 3/4, macro R = 2/3, harmonic = 2 (1/2) / (17/12) = 12/17
    cm = ConfusionMatrix([[2, 2], [0, 1]], classes=["a", "b"], decisions=["a", "b"])
    assert metrics.f1(cm, average="macro") == pytest.approx(7 / 12)
    assert metrics.f1(cm, average="macro", macro_f="harmonic") == pytest.approx(12 / 17)


def test_batch_forms_take_the_same_options():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, size=(50, 3, 3)).astype(float)
    counts[:10, 2, :] = 0  # class 2 never decided
    batch = metrics.f1.batch(counts, average="macro", zero_division=0.0, macro_f="harmonic")
    one_by_one = [
        metrics.f1(ConfusionMatrix(c), average="macro", zero_division=0.0, macro_f="harmonic")
        for c in counts
    ]
    np.testing.assert_allclose(batch, one_by_one, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        metrics.precision.batch(counts, average="macro", zero_division=1.0),
        [metrics.precision(ConfusionMatrix(c), average="macro", zero_division=1.0)
         for c in counts],
    )  # fmt: skip
    # the default is unchanged: NaN where undefined
    assert np.isnan(metrics.precision.batch(counts[:10], positive=2)).all()


def test_raise_stays_the_default_and_bad_options_are_named():
    cm = ConfusionMatrix([[3, 1], [0, 0]])
    with pytest.raises(UndefinedMetricError, match="no item was decided as class 1"):
        metrics.precision(cm, positive=1)
    assert metrics.precision(cm, positive=1, zero_division=1) == 1.0
    assert np.isnan(metrics.precision(cm, positive=1, zero_division=np.nan))
    with pytest.raises(ValueError, match=r"zero_division must be 'raise', a number in \[0, 1\]"):
        metrics.recall(cm, positive=1, zero_division=2)
    with pytest.raises(ValueError, match="zero_division must be"):
        metrics.recall(cm, positive=1, zero_division="warn")
    with pytest.raises(ValueError, match=r"macro_f='harmonic' .* needs average='macro'"):
        metrics.f1(cm, average="micro", macro_f="harmonic")
    with pytest.raises(ValueError, match="macro_f must be 'mean' or 'harmonic'"):
        metrics.f1(cm, average="macro", macro_f="geometric")


@pytest.mark.parametrize("seed", range(20))
def test_folds_add_and_fold_scores_do_not_average(seed):
    rng = np.random.default_rng(seed)
    folds = [ConfusionMatrix(rng.integers(1, 30, size=(3, 3))) for _ in range(4)]
    total = sum(folds[1:], folds[0])
    u = UtilityMatrix(rng.normal(size=(3, 3)))
    weights = np.array([f.total for f in folds])
    fold_yields = np.array([utility_yield(f, u) for f in folds])
    # the yield of the pooled items is the count-weighted mean of the fold yields
    assert utility_yield(total, u) == pytest.approx(weights @ fold_yields / weights.sum())
    # F1 of the pooled items from the pooled counts, by hand (one class against the rest)
    counts = total.counts
    tp, fp, fn = counts[0, 0], counts[0].sum() - counts[0, 0], counts[:, 0].sum() - counts[0, 0]
    assert metrics.f1(total, positive=0) == pytest.approx(2 * tp / (2 * tp + fp + fn))


def test_averaging_fold_f1_is_not_the_pooled_f1():
    fold_1 = ConfusionMatrix([[9, 1], [1, 9]])
    fold_2 = ConfusionMatrix([[1, 4], [0, 75]])
    mean_of_folds = (metrics.f1(fold_1) + metrics.f1(fold_2)) / 2
    assert mean_of_folds == pytest.approx((18 / 20 + 2 / 6) / 2)
    assert metrics.f1(fold_1 + fold_2) == pytest.approx(20 / 26)


def test_labels_0_and_1_without_positive_warn_that_0_is_taken():
    """yieldwise's binary metrics take the first class as positive; with labels 0/1 (or
    False/True) scikit-learn takes the other, so a score of P(1) silently gave the
    complement (AUC 0.22 for 0.78). Now it warns, at the caller's line; positive= given,
    or other labels, do not warn, and the number is the convention's."""
    import warnings
    from pathlib import Path

    import sklearn.metrics as skm

    from yieldwise import metrics

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 200)
    s = rng.normal(y, 1.0)
    with pytest.warns(UserWarning, match="positive defaults to the first class, 0") as caught:
        first = metrics.roc_auc(s, y)
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}
    assert first == pytest.approx(1 - skm.roc_auc_score(y, s))
    with pytest.warns(UserWarning, match="the first class, False"):
        metrics.brier(1 / (1 + np.exp(-s)), y.astype(bool))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert metrics.roc_auc(s, y, positive=1) == pytest.approx(skm.roc_auc_score(y, s))
        metrics.roc_auc(s, np.where(y == 1, "ill", "ok"))
