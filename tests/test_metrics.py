"""Metrics: hand-worked values, scikit-learn agreement, undefined cases, admissibility labels."""

import numpy as np
import pandas as pd
import pytest
import sklearn.metrics as skm

from yieldwise import ConfusionMatrix, UndefinedMetricError, metrics

# Hand-worked binary example, positive class "ill" (rows decisions, columns classes):
#                 true healthy  true ill
# decide healthy       890         40
# decide ill            10         60
# TP = 60, FP = 10, FN = 40, TN = 890, N = 1000
CM = ConfusionMatrix([[890, 40], [10, 60]], ["healthy", "ill"], ["healthy", "ill"])


def test_hand_worked_binary_values():
    assert metrics.accuracy(CM) == pytest.approx(950 / 1000)
    assert metrics.precision(CM, positive="ill") == pytest.approx(60 / 70)
    assert metrics.recall(CM, positive="ill") == pytest.approx(60 / 100)
    assert metrics.true_positive_rate(CM, positive="ill") == pytest.approx(0.6)
    assert metrics.specificity(CM, positive="ill") == pytest.approx(890 / 900)
    assert metrics.true_negative_rate(CM, positive="ill") == pytest.approx(890 / 900)
    assert metrics.f1(CM, positive="ill") == pytest.approx(2 * 60 / (2 * 60 + 40 + 10))
    f2 = 5 * 60 / (5 * 60 + 4 * 40 + 10)
    assert metrics.fbeta(CM, beta=2, positive="ill") == pytest.approx(f2)
    assert metrics.fowlkes_mallows(CM, positive="ill") == pytest.approx(np.sqrt(60 / 70 * 0.6))
    assert metrics.balanced_accuracy(CM) == pytest.approx((0.6 + 890 / 900) / 2)
    mcc = (60 * 890 - 10 * 40) / np.sqrt(70 * 100 * 900 * 930)
    assert metrics.matthews(CM) == pytest.approx(mcc)
    p_o, p_e = 0.95, (930 * 900 + 70 * 100) / 1000**2
    assert metrics.cohen_kappa(CM) == pytest.approx((p_o - p_e) / (1 - p_e))
    # preference-driven, kappa = class frequencies (0.9, 0.1):
    # healthy: P = 890/930, R = 890/900; ill: P = 60/70, R = 0.6
    pd_value = 0.5 * (0.9 * 890 / 930 + 0.1 * 890 / 900 + 0.1 * 60 / 70 + 0.9 * 0.6)
    assert metrics.preference_driven(CM) == pytest.approx(pd_value)
    assert metrics.preference_driven(CM, kappa=[1, 0]) == pytest.approx(0.5 * (890 / 930 + 0.6))


def test_preference_driven_three_classes_by_hand():
    """The preference-driven measure (theory 1.3) on a 3x3 matrix worked by hand.

    Rows decisions, columns true classes a, b, c (100 items):

                    true a  true b  true c   row (decided)
        decide a      40      10       2        52
        decide b       6      15       3        24
        decide c       4       5      15        24
        column        50      30      20       100

    Per class, precision P = diagonal / row, recall R = diagonal / column:
        a: P = 40/52 = 10/13,  R = 40/50 = 4/5
        b: P = 15/24 = 5/8,    R = 15/30 = 1/2
        c: P = 15/24 = 5/8,    R = 15/20 = 3/4
    Default kappa = class frequencies (0.5, 0.3, 0.2):
        pd = (1/3) [0.5 (10/13) + 0.5 (4/5) + 0.3 (5/8) + 0.7 (1/2) + 0.2 (5/8) + 0.8 (3/4)]
           = (1/3) [5/13 + 2/5 + 3/16 + 7/20 + 1/8 + 3/5] = (1/3) [5/13 + 133/80]
           = (1/3) (400 + 1729) / 1040 = 2129/3120 = 0.68237...
    kappa = (1, 1, 1): macro precision (10/13 + 5/8 + 5/8) / 3 = (105/52) / 3 = 35/52.
    kappa = (0, 0, 0): macro recall (4/5 + 1/2 + 3/4) / 3 = 41/60 (balanced accuracy).
    kappa = (1, 0, 1/2): (1/3) [10/13 + 1/2 + (1/2)(5/8) + (1/2)(3/4)]
           = (1/3) [10/13 + 19/16] = (1/3) (407/208) = 407/624.
    """
    cm = ConfusionMatrix([[40, 10, 2], [6, 15, 3], [4, 5, 15]], ["a", "b", "c"], ["a", "b", "c"])
    assert metrics.preference_driven(cm) == pytest.approx(2129 / 3120, abs=1e-15)
    assert metrics.preference_driven(cm, kappa=[1, 1, 1]) == pytest.approx(35 / 52, abs=1e-15)
    assert metrics.preference_driven(cm, kappa=[0, 0, 0]) == pytest.approx(41 / 60, abs=1e-15)
    assert metrics.preference_driven(cm, kappa=[1, 0, 0.5]) == pytest.approx(407 / 624)
    # the same per-class P and R from scikit-learn, on the items the matrix counts
    truth = np.repeat(np.tile(["a", "b", "c"], 3), [40, 10, 2, 6, 15, 3, 4, 5, 15])
    decided = np.repeat(["a", "b", "c"], [52, 24, 24])
    precision, recall, _, support = skm.precision_recall_fscore_support(truth, decided)
    np.testing.assert_allclose(precision, [10 / 13, 5 / 8, 5 / 8])
    np.testing.assert_allclose(recall, [4 / 5, 1 / 2, 3 / 4])
    kappa = support / support.sum()
    assert np.mean(kappa * precision + (1 - kappa) * recall) == pytest.approx(2129 / 3120)
    assert skm.balanced_accuracy_score(truth, decided) == pytest.approx(41 / 60)


def test_positive_defaults_to_first_class():
    assert metrics.precision(CM) == pytest.approx(890 / 930)
    assert metrics.recall(CM) == pytest.approx(890 / 900)


def test_rows_matched_to_classes_by_label():
    flipped = CM.reindex(decisions=["ill", "healthy"])
    assert metrics.precision(flipped, positive="ill") == pytest.approx(60 / 70)
    assert metrics.accuracy(flipped) == pytest.approx(0.95)


def _random_labels(k, n=400, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    noisy = np.where(rng.random(n) < 0.6, truth, rng.integers(0, k, n))
    return truth, noisy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binary_against_sklearn(seed):
    truth, chosen = _random_labels(2, seed=seed)
    cm = ConfusionMatrix.from_labels(truth, chosen)
    for pos in (0, 1):
        assert metrics.precision(cm, positive=pos) == pytest.approx(
            skm.precision_score(truth, chosen, pos_label=pos)
        )
        assert metrics.recall(cm, positive=pos) == pytest.approx(
            skm.recall_score(truth, chosen, pos_label=pos)
        )
        assert metrics.f1(cm, positive=pos) == pytest.approx(
            skm.f1_score(truth, chosen, pos_label=pos)
        )
        assert metrics.fbeta(cm, beta=0.5, positive=pos) == pytest.approx(
            skm.fbeta_score(truth, chosen, beta=0.5, pos_label=pos)
        )
        assert metrics.specificity(cm, positive=pos) == pytest.approx(
            skm.recall_score(truth, chosen, pos_label=1 - pos)
        )
    assert metrics.accuracy(cm) == pytest.approx(skm.accuracy_score(truth, chosen))
    assert metrics.matthews(cm) == pytest.approx(skm.matthews_corrcoef(truth, chosen))
    assert metrics.balanced_accuracy(cm) == pytest.approx(
        skm.balanced_accuracy_score(truth, chosen)
    )
    assert metrics.cohen_kappa(cm) == pytest.approx(skm.cohen_kappa_score(truth, chosen))


@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
def test_multiclass_against_sklearn(average):
    truth, chosen = _random_labels(4, n=1000, seed=7)
    cm = ConfusionMatrix.from_labels(truth, chosen)
    assert metrics.precision(cm, average=average) == pytest.approx(
        skm.precision_score(truth, chosen, average=average)
    )
    assert metrics.recall(cm, average=average) == pytest.approx(
        skm.recall_score(truth, chosen, average=average)
    )
    assert metrics.f1(cm, average=average) == pytest.approx(
        skm.f1_score(truth, chosen, average=average)
    )
    assert metrics.fbeta(cm, beta=2, average=average) == pytest.approx(
        skm.fbeta_score(truth, chosen, beta=2, average=average)
    )
    assert metrics.matthews(cm) == pytest.approx(skm.matthews_corrcoef(truth, chosen))
    assert metrics.cohen_kappa(cm) == pytest.approx(skm.cohen_kappa_score(truth, chosen))
    assert metrics.balanced_accuracy(cm) == pytest.approx(
        skm.balanced_accuracy_score(truth, chosen)
    )
    assert metrics.accuracy(cm) == pytest.approx(skm.accuracy_score(truth, chosen))
    # One class against the rest.
    assert metrics.precision(cm, positive=2) == pytest.approx(
        skm.precision_score(truth == 2, chosen == 2)
    )


def test_weighted_recall_is_accuracy_and_macro_recall_is_balanced_accuracy():
    truth, chosen = _random_labels(3, n=600, seed=11)
    cm = ConfusionMatrix.from_labels(truth, chosen)
    assert metrics.recall(cm, average="weighted") == pytest.approx(metrics.accuracy(cm))
    assert metrics.recall(cm, average="macro") == pytest.approx(metrics.balanced_accuracy(cm))


def test_string_and_categorical_labels():
    truth = pd.Categorical(["b", "a", "b", "b"], categories=["b", "a"])
    cm = ConfusionMatrix.from_labels(truth, ["b", "a", "a", "b"])
    assert cm.classes == ("b", "a")
    # positive defaults to the first category "b": TP = 2, FN = 1, FP = 0
    assert metrics.recall(cm) == pytest.approx(2 / 3)
    assert metrics.precision(cm) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: metrics.precision(ConfusionMatrix([[5, 3], [0, 0]]), positive=1),
            "no item was decided as class 1",
        ),
        (
            lambda: metrics.recall(ConfusionMatrix([[5, 0], [3, 0]]), positive=1),
            "no item of class 1 is in the test set",
        ),
        (
            lambda: metrics.specificity(ConfusionMatrix([[0, 3], [0, 5]]), positive=1),
            "every item is of class 1",
        ),
        (lambda: metrics.matthews(ConfusionMatrix([[5, 3], [0, 0]])), "same decision"),
        (
            lambda: metrics.balanced_accuracy(ConfusionMatrix([[5, 0], [3, 0]])),
            "no item of class 1",
        ),
        (lambda: metrics.cohen_kappa(ConfusionMatrix([[5, 0], [0, 0]])), "chance agreement is 1"),
    ],
)
def test_undefined_metrics_say_why(call, match):
    with pytest.raises(UndefinedMetricError, match=match):
        call()


def test_bad_arguments():
    three = ConfusionMatrix(np.eye(3) + 1)
    with pytest.raises(ValueError, match=r"needs positive= .* or average="):
        metrics.precision(three)
    with pytest.raises(ValueError, match="average must be"):
        metrics.f1(three, average="samples")
    with pytest.raises(ValueError, match="either positive= or average="):
        metrics.f1(three, positive=0, average="macro")
    with pytest.raises(ValueError, match=r"positive holds label\(s\) \['z'\]"):
        metrics.recall(CM, positive="z")
    with pytest.raises(ValueError, match="one decision per class"):
        metrics.accuracy(ConfusionMatrix([[1, 0], [0, 1], [1, 1]], decisions=[0, 1, "retest"]))
    with pytest.raises(TypeError, match="confusion must be a ConfusionMatrix"):
        metrics.accuracy([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="beta must be a positive"):
        metrics.fbeta(CM, beta=0)
    with pytest.raises(ValueError, match="kappa must lie"):
        metrics.preference_driven(CM, kappa=[2, 0])


def test_batch_forms_agree_with_scalar_forms():
    rng = np.random.default_rng(2)
    batch = rng.integers(1, 50, size=(25, 2, 2)).astype(float)
    for name, function in metrics.CONFUSION_METRICS.items():
        values = function.batch(batch)
        for k in range(0, 25, 6):
            cm = ConfusionMatrix(batch[k])
            kwargs = (
                {"positive": 0}
                if name in {"precision", "recall", "specificity", "f1", "fowlkes_mallows"}
                else {}
            )
            assert values[k] == pytest.approx(function(cm, **kwargs)), name


def test_admissibility_labels_follow_theory():
    admissible = {name for name, f in metrics.CONFUSION_METRICS.items() if f.admissible}
    assert admissible == {"accuracy", "recall", "specificity"}
    for f in [*metrics.SCORE_METRICS.values(), metrics.fbeta, metrics.roc_curve]:
        assert f.admissible is False
        assert f.admissibility
    assert metrics.true_positive_rate.admissible and metrics.true_negative_rate.admissible


def test_score_metrics_against_sklearn():
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 2, 300)
    scores = np.clip(truth * 0.3 + rng.random(300) * 0.7, 0, 1)
    scores[:10] = 0.5  # ties
    assert metrics.roc_auc(scores, truth, positive=1) == pytest.approx(
        skm.roc_auc_score(truth, scores)
    )
    with pytest.warns(UserWarning, match="positive defaults to the first class, 0"):
        default = metrics.roc_auc(1 - scores, truth)  # class 0's scores: the default
    assert default == pytest.approx(skm.roc_auc_score(truth, scores))
    curve = metrics.roc_curve(scores, truth, positive=1)
    fpr, tpr, _ = skm.roc_curve(truth, scores, drop_intermediate=False)
    np.testing.assert_allclose(curve.fpr, fpr)
    np.testing.assert_allclose(curve.tpr, tpr)
    assert curve.prevalence == pytest.approx(truth.mean())
    assert metrics.brier(scores, truth, positive=1) == pytest.approx(
        skm.brier_score_loss(truth, scores)
    )
    both = np.column_stack([1 - scores, scores])
    assert metrics.brier(both, truth) == pytest.approx(2 * skm.brier_score_loss(truth, scores))
    assert metrics.log_loss(both, truth) == pytest.approx(skm.log_loss(truth, both))
    assert metrics.log_loss(scores, truth, positive=1) == pytest.approx(skm.log_loss(truth, both))


def test_multiclass_log_loss_and_brier_by_hand():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    truth = ["a", "c"]
    assert metrics.log_loss(p, truth, classes=["a", "b", "c"]) == pytest.approx(
        -(np.log(0.7) + np.log(0.8)) / 2
    )
    # item "a": 0.3^2 + 0.2^2 + 0.1^2 = 0.14; item "c": 0.1^2 + 0.1^2 + 0.2^2 = 0.06
    assert metrics.brier(p, truth, classes=["a", "b", "c"]) == pytest.approx((0.14 + 0.06) / 2)
    assert metrics.log_loss([[1.0, 0.0]], ["b"], classes=["a", "b"]) == np.inf


def test_score_metric_errors():
    with pytest.raises(UndefinedMetricError, match="no negative items"):
        metrics.roc_auc([0.2, 0.3], [1, 1], positive=1)
    with pytest.raises(ValueError, match="one label per score"):
        metrics.roc_auc([0.2, 0.3], [1, 0, 1])
    with pytest.raises(ValueError, match="NaN"):
        metrics.roc_auc([0.2, np.nan], [1, 0])
    with pytest.raises(ValueError, match="sum to 1"):
        metrics.brier([[0.2, 0.3]], [0])
    with pytest.raises(ValueError, match="2 columns but true_classes shows 1 class"):
        metrics.log_loss([[0.2, 0.8]], [0])
    with pytest.raises(ValueError, match="positive 'x' is not among"):
        metrics.roc_auc([0.2, 0.3], ["a", "b"], positive="x")


def test_score_metrics_on_three_classes_need_positive():
    """With three classes the first against the rest was scored silently (AUC 0.0 here)."""
    scores = [0.1, 0.5, 0.9, 0.2, 0.6, 0.8]
    truth = ["a", "b", "c", "a", "b", "c"]
    for metric in (
        metrics.roc_curve,
        metrics.roc_auc,
        metrics.pr_curve,
        metrics.average_precision,
        metrics.pr_gain_curve,
        metrics.pr_gain_auc,
    ):
        with pytest.raises(ValueError, match=r"positive= is needed with more than two classes, "
                                             r"found 3: \['a', 'b', 'c'\]"):  # fmt: skip
            metric(scores, truth)
    with pytest.raises(ValueError, match=r"positive= is needed .* found 3"):
        metrics.reliability_table([0.1, 0.5, 0.9], ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"positive= is needed .* found 3"):  # declared classes
        metrics.roc_auc([0.1, 0.9], ["a", "b"], classes=["a", "b", "c"])
    # with positive= that class is scored against the rest, as scikit-learn scores the
    # binarised labels
    for positive in ("a", "b", "c"):
        binary = [t == positive for t in truth]
        assert metrics.roc_auc(scores, truth, positive=positive) == pytest.approx(
            skm.roc_auc_score(binary, scores)
        )
        assert metrics.average_precision(scores, truth, positive=positive) == pytest.approx(
            skm.average_precision_score(binary, scores)
        )
    # "c" holds the two highest scores: every (c, other) pair is ordered right
    assert metrics.roc_auc(scores, truth, positive="c") == 1.0


def test_fbeta_beta_must_be_a_real_number():
    with pytest.raises(TypeError, match=r"fbeta: beta must be a positive finite number .*found "
                                        r"str '2'; pass e.g. beta=2"):  # fmt: skip
        metrics.fbeta(CM, beta="2")
    for flag in (True, np.True_):  # True == 1 would pass for beta = 1
        with pytest.raises(TypeError, match=r"beta must be a positive finite number.*found bool"):
            metrics.fbeta(CM, beta=flag)
    with pytest.raises(TypeError, match=r"beta must be .*found list"):
        metrics.fbeta(CM, beta=[2])
    for bad in (-1, np.inf, np.nan):
        with pytest.raises(ValueError, match=r"beta must be a positive finite number"):
            metrics.fbeta(CM, beta=bad)
    # numpy numbers are numbers: F2 by hand on CM (TP 60, FN 40, FP 10), as above
    f2 = 5 * 60 / (5 * 60 + 4 * 40 + 10)
    assert metrics.fbeta(CM, beta=np.int64(2), positive="ill") == pytest.approx(f2)
    assert metrics.fbeta(CM, beta=np.float32(2), positive="ill") == pytest.approx(f2)


def test_reliability_table_refuses_nan_in_xarray_draws():
    """A NaN draw spread to every bin's band through the matrix product (NaN * 0)."""
    xr = pytest.importorskip("xarray")
    p = np.array([0.1, 0.2, 0.7, 0.9])
    draws = np.tile(p, (50, 1))
    draws[3, 0] = np.nan
    for values in (draws, xr.DataArray(draws, dims=("draw", "item"))):
        with pytest.raises(ValueError, match=r"draws must be finite, found 1 NaN.*\(3, 0\)"):
            metrics.reliability_table(p, [0, 0, 1, 1], positive=1, bins=2, draws=values)
    chains = xr.DataArray(draws.reshape(2, 25, 4), dims=("chain", "draw", "item"))
    with pytest.raises(ValueError, match=r"draws \(dims \['chain', 'draw'\] flattened to rows\) "
                                         r"must be finite"):  # fmt: skip
        metrics.reliability_table(p, [0, 0, 1, 1], positive=1, bins=2, draws=chains)
    # finite draws equal to the probabilities: the band is each bin's mean probability
    draws[3, 0] = p[0]
    table = metrics.reliability_table(
        p, [0, 0, 1, 1], positive=1, bins=2, draws=xr.DataArray(draws, dims=("draw", "item"))
    )
    np.testing.assert_allclose(table["band_lower"], [0.15, 0.8])
    np.testing.assert_allclose(table["band_upper"], [0.15, 0.8])
