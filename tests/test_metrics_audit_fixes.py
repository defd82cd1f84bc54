"""Fixes from the audit of metrics.py, roc.py, curves.py and confusion.py.

Each test fails on the code as audited: a silent wrong answer (A1-A4) now raises,
warns or gives the independent answer (scikit-learn, brute force, hand formulas), and
the unclear errors (B1-B5) now name the argument and say what to do.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sklearn.metrics as skm

from yieldwise import ConfusionMatrix, UndefinedMetricError, UtilityMatrix, curves, metrics, roc
from yieldwise.roc import OperatingPoint, best_operating_point, convex_hull

HERE = Path(__file__).name


def _no_warnings(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return function(*args, **kwargs)


# ------------------------------------------------ A1: one class, classes inferred
@pytest.mark.parametrize(
    "function",
    [
        metrics.brier,
        metrics.log_loss,
        metrics.brier_decomposition,
        metrics.reliability_table,
        metrics.roc_auc,
    ],
)
@pytest.mark.parametrize("label", [0, 1])
def test_one_inferred_class_without_positive_is_refused(function, label):
    """A batch of 0s read p as P(0) and a batch of 1s as P(1): brier 0.725 against the
    intended 0.025, without a word. Now no default positive is guessed."""
    with pytest.raises(ValueError) as error:
        function([0.1, 0.2], [label, label])
    message = str(error.value)
    assert message.startswith(f"true_classes holds only one class, {label}")
    assert "positive=" in message and "classes=[0, 1]" in message


def test_one_class_with_positive_and_classes_gives_the_hand_computed_scores():
    p, y = np.array([0.1, 0.2]), np.array([0, 0])
    # p is P(1); both items are 0: Brier = mean(p^2), log loss = -mean(log(1 - p))
    assert metrics.brier(p, y, positive=1, classes=[0, 1]) == pytest.approx(np.mean(p**2))
    assert metrics.log_loss(p, y, positive=1, classes=[0, 1]) == pytest.approx(
        -np.mean(np.log(1 - p))
    )
    assert metrics.brier(p, y, positive=1, classes=[0, 1]) == pytest.approx(
        skm.brier_score_loss(y, p, pos_label=1)
    )


def test_positive_missing_from_inferred_classes_says_to_pass_classes():
    with pytest.raises(ValueError) as error:
        metrics.brier([0.1, 0.2], [0, 0], positive=1)
    message = str(error.value)
    assert message.startswith("positive 1 is not among the classes [0]")
    assert "pass classes= to list them all (e.g. classes=[0, 1])" in message


def test_declared_categories_keep_their_default_on_a_one_class_batch():
    """A categorical declares its classes: its first category stays the positive one on
    every batch, so it is not refused (only warned about as 0 of 0/1 labels)."""
    truth = pd.Categorical([0, 0], categories=[1, 0])
    assert _no_warnings(metrics.brier, [0.1, 0.2], truth) == pytest.approx(0.025)


# --------------------------------------- A2: hull best point with negative error costs
def test_hull_best_point_is_best_operating_point_for_a_perverse_utility():
    """Both errors pay more than the correct decisions: the best threshold lies below the
    hull, at (1, 0). The vertices gave threshold inf and yield 0.5."""
    u = UtilityMatrix([[0, 1], [1, 0]], decisions=[1, 0], classes=[1, 0])
    scores, truth = [0.1, 0.9], [1, 0]
    point = convex_hull(scores, truth, positive=1).best_point(u)
    # by hand: threshold 0.9 decides only the negative item positive, both wrong: 1 each
    assert (point.threshold, point.fpr, point.tpr, point.utility_yield) == (0.9, 1.0, 0.0, 1.0)


def _brute_force_best(scores, truth, u):
    """(threshold, yield) maximising the mean utility over "positive when s >= t",
    ties to the highest threshold; u is [[U(pos|pos), U(pos|neg)], [U(neg|pos), U(neg|neg)]]."""
    best = None
    for t in np.r_[np.inf, np.unique(scores)[::-1]]:
        decide = scores >= t
        value = np.mean(
            np.where(decide, np.where(truth, u[0][0], u[0][1]), np.where(truth, u[1][0], u[1][1]))
        )
        if best is None or value > best[1] + 1e-12:
            best = (t, value)
    return best


@pytest.mark.parametrize("seed", range(10))
def test_hull_best_point_equals_brute_force_for_any_sign_of_the_costs(seed):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, 25).astype(bool)
    truth[:2] = [True, False]
    scores = np.round(rng.normal(size=25) + rng.normal() * truth, 1)
    hull = convex_hull(scores, truth.astype(int), positive=1)
    signs_seen = set()
    for _ in range(40):
        # decisions labelled as the classes: row 0 chooses 1, the positive one, whatever
        # the signs (the lean rule of other labels never makes both costs negative)
        ordered = rng.normal(size=(2, 2))
        u = UtilityMatrix(ordered, decisions=[1, 0], classes=[1, 0])
        if np.all(ordered[0] == ordered[1]):
            continue
        signs_seen.add((ordered[0, 0] >= ordered[1, 0], ordered[1, 1] >= ordered[0, 1]))
        threshold, value = _brute_force_best(scores, truth, ordered.tolist())
        point = hull.best_point(u)
        exact = best_operating_point(scores, truth.astype(int), u, positive=1)
        assert point.threshold == threshold == exact.threshold
        assert point.utility_yield == pytest.approx(value, abs=1e-12)
        assert point.utility_yield == exact.utility_yield
        assert point.confusion == exact.confusion
    assert (False, False) in signs_seen  # the case the vertices missed was exercised


def test_hull_yields_refuse_a_utility_rewarding_both_errors():
    hull = convex_hull([0.1, 0.9], [1, 0], positive=1)
    perverse = UtilityMatrix([[0, 1], [1, 0]], decisions=[1, 0], classes=[1, 0])
    with pytest.raises(
        ValueError, match=r"U\[p,p\] - U\[n,p\] = -1\.0 and U\[n,n\] - U\[p,n\] = -1\.0"
    ):
        hull.yields(perverse)
    # one negative cost: the best is still a vertex ((1, 1) here), so the yields stand
    one_negative = UtilityMatrix([[1, -1], [2, 0]], decisions=[1, 0], classes=[1, 0])
    assert hull.yields(one_negative).max() == pytest.approx(
        best_operating_point([0.1, 0.9], [1, 0], one_negative, positive=1).utility_yield
    )


def test_hull_best_point_docstring_states_the_choice():
    doc = roc.ROCHull.best_point.__doc__
    assert "best_operating_point`'s, exactly" in doc and "not refused" in doc


# ------------------------------------------------------ A3: the default-positive rule
@pytest.mark.parametrize(
    "truth",
    [
        [0, 0, 1, 1],
        [0.0, 0.0, 1.0, 1.0],
        ["0", "0", "1", "1"],
        [False, False, True, True],
        np.array([0, 0, 1, 1], dtype=np.uint8),
    ],
)
def test_zero_like_default_positive_warns_for_every_zero_one_label_kind(truth):
    """Float 0.0/1.0 (a label column after dropna) and strings "0"/"1" (from a CSV) gave
    the reversed AUC silently; only int and bool labels warned."""
    scores = [0.2, 0.3, 0.7, 0.9]
    with pytest.warns(UserWarning, match=r"positive defaults to the first class") as caught:
        auc = metrics.roc_auc(scores, truth)
    assert {Path(w.filename).name for w in caught} == {HERE}  # at the caller's line
    # the convention's number: scores read as pointing to the 0 class
    assert auc == pytest.approx(1 - skm.roc_auc_score([0, 0, 1, 1], scores))


@pytest.mark.parametrize(
    "call",
    [
        lambda s, y, u: best_operating_point(s, y, u),
        lambda s, y, u: roc.yield_curve(s, y, u),
        lambda s, y, u: roc.compare({"a": s}, y, u),
        lambda s, y, u: convex_hull(s, y),
        lambda s, y, u: curves.cost_curve(s, y),
    ],
)
def test_roc_functions_warn_about_the_zero_default_as_the_metrics_do(call):
    """roc.prepare_binary took 0 silently: threshold inf and yield 0.5 for a perfect
    ranking (1.0 with positive=1)."""
    scores, truth = [0.2, 0.3, 0.7, 0.9], [0, 0, 1, 1]
    with pytest.warns(UserWarning, match=r"first class, 0 .*pass positive=1") as caught:
        call(scores, truth, UtilityMatrix(np.eye(2)))
    assert {Path(w.filename).name for w in caught} == {HERE}


def test_default_point_with_zero_one_labels_is_the_brute_force_one_for_class_zero():
    scores, truth = np.array([0.2, 0.3, 0.7, 0.9]), np.array([0, 0, 1, 1])
    with pytest.warns(UserWarning):
        point = best_operating_point(scores, truth, UtilityMatrix(np.eye(2)))
    # accuracy with class 0 positive (decide 0 when score >= t): best is t = inf, 0.5
    assert point.positive == 0
    assert (point.threshold, point.utility_yield) == _brute_force_best(
        scores, truth == 0, [[1, 0], [0, 1]]
    )


def test_no_warning_when_the_default_is_already_the_one_label():
    """classes=[1, 0] makes 1 the default: the old message fired anyway, saying
    scikit-learn would take 0."""
    assert _no_warnings(metrics.roc_auc, [0.1, 0.9], [0, 1], classes=[1, 0]) == 1.0
    truth = pd.Categorical([0, 1], categories=[1, 0])
    assert _no_warnings(metrics.roc_auc, [0.1, 0.9], truth) == 1.0
    point = _no_warnings(
        best_operating_point, [0.1, 0.9], [0, 1], UtilityMatrix(np.eye(2)), classes=[1, 0]
    )
    assert (point.positive, point.threshold) == (1, 0.9)
    # other labels and a given positive= never warn
    _no_warnings(metrics.roc_auc, [0.1, 0.9], [1, 2])
    _no_warnings(metrics.roc_auc, [0.1, 0.9], [0.0, 1.0], positive=0.0)


def test_warning_names_scikit_learn_only_for_numbers_and_booleans():
    with pytest.warns(UserWarning) as numeric:
        metrics.roc_auc([0.1, 0.9], [0, 1])
    assert "the other one, 1 (scikit-learn's default)" in str(numeric[0].message)
    with pytest.warns(UserWarning) as strings:
        metrics.roc_auc([0.1, 0.9], ["0", "1"])
    assert "scikit-learn" not in str(strings[0].message)
    assert "pass positive='1'" in str(strings[0].message)


def test_slope_and_operating_condition_read_no_scores_and_do_not_warn():
    u = UtilityMatrix([[10, -1], [0, 0]])
    # (U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B) with class 0 positive, by hand
    assert _no_warnings(roc.iso_utility_slope, u, 0.2) == pytest.approx(1 * 0.8 / (10 * 0.2))
    assert _no_warnings(curves.operating_condition, u, 0.2).cost_fn == 10.0


# ------------------------------------------- A4: integer scores beyond 2**53
@pytest.mark.parametrize(
    "scores",
    [
        np.array([2**60, 2**60 + 1], dtype=np.int64),
        [2**60, 2**60 + 1],
        pd.Series([2**60, 2**60 + 1]),
        np.array([2**64 - 2, 2**64 - 1], dtype=np.uint64),
        [2**70, 2**70 + 1],
        np.array([2**53 + 1, 2**53]),
    ],
)
def test_integer_scores_beyond_2_53_are_refused(scores):
    """They merged into one tie: AUC 0.5 where scikit-learn (exact integers) gives 1.0."""
    for call in (
        lambda: metrics.roc_auc(scores, [0, 1], positive=1),
        lambda: metrics.average_precision(scores, [0, 1], positive=1),
        lambda: best_operating_point(scores, [0, 1], UtilityMatrix(np.eye(2)), positive=1),
        lambda: convex_hull(scores, [0, 1], positive=1),
        lambda: roc.compare({"a": scores}, [0, 1], UtilityMatrix(np.eye(2)), positive=1),
    ):
        with pytest.raises(
            ValueError, match=r"scores(\['a'\])? holds \d integer\(s\) beyond \+-2\*\*53"
        ):
            call()


def test_integer_scores_within_2_53_and_their_ranks_match_scikit_learn():
    big = np.array([2**60, 2**60 + 1, 2**60 + 3, 2**60 + 2], dtype=np.int64)
    truth = np.array([0, 1, 1, 0])
    expected = skm.roc_auc_score(truth, big)  # exact integer comparison: 0.75
    assert expected == 0.75
    assert metrics.roc_auc(big - 2**60, truth, positive=1) == expected  # the advised offset
    exact = np.array([2**53, 2**53 - 1, -(2**53), 0])
    assert metrics.roc_auc(exact, truth, positive=1) == skm.roc_auc_score(truth, exact)
    # large floats were never exact and stay accepted; integer counts are not scores
    assert metrics.roc_auc([1e20, 2e20, 4e20, 3e20], truth, positive=1) == expected
    assert ConfusionMatrix(np.array([[2**60, 1], [1, 1]])).total == float(2**60 + 3)


STEPS = np.random.default_rng(5).integers(-3, 4, 40)  # the second logit's lead, per item
# noisy labels that follow the lead: a finite temperature, a finite Platt slope
TRUTH = (STEPS + np.random.default_rng(6).normal(0, 2, 40) > 0).astype(int)


@pytest.mark.parametrize(
    "make",
    [
        lambda big: big,
        lambda big: pd.Series(big, name="score"),
        lambda big: pd.DataFrame({"score": big}),
        lambda big: np.column_stack([big, big + STEPS]),
    ],
    ids=["array", "series", "frame", "two-columns"],
)
def test_transducer_and_calibrator_outputs_beyond_2_53_are_refused(make):
    """Distinct integer outputs beyond 2**53 merged into one value before fit, with its
    lattice and ties built on the merged values; now refused as for the metrics, naming the
    argument. Calibrators' scores likewise, at fit and at predict. (No sampling: the
    outputs are refused before anything is fitted.)"""
    from yieldwise import Transducer
    from yieldwise.calibrators import PlattCalibrator, TemperatureCalibrator

    big = np.array([2**60 + 2 * i for i in range(40)], dtype=np.int64) + STEPS
    truth = TRUTH
    outputs = make(big)
    with pytest.raises(ValueError, match=r"outputs holds \d+ integer\(s\) beyond \+-2\*\*53"):
        Transducer(backend="laplace", progress=False).fit(outputs, truth)
    two = np.ndim(outputs) == 2 and np.shape(outputs)[1] == 2
    calibrator = TemperatureCalibrator() if two else PlattCalibrator()

    def scores(values):  # a calibrator's binary scores are 1-D: the frame's one column
        return values.iloc[:, 0] if isinstance(values, pd.DataFrame) else values

    with pytest.raises(ValueError, match=r"scores holds \d+ integer\(s\) beyond \+-2\*\*53"):
        calibrator.fit(scores(outputs), truth)
    calibrator.fit(scores(make(big - 2**60)), truth)  # the advised offset: accepted
    with pytest.raises(ValueError, match=r"scores holds \d+ integer\(s\) beyond"):
        calibrator.predict_proba(scores(outputs))


# --------------------------------------------- B1: unused categories of a categorical
def test_unused_category_is_accepted_by_the_roc_functions():
    u = UtilityMatrix([[10, -1], [0, 0]], decisions=["treat", "wait"], classes=["ill", "healthy"])
    truth = pd.Categorical(
        ["ill", "healthy", "ill", "healthy"], categories=["ill", "healthy", "unknown"]
    )
    scores = [0.9, 0.1, 0.8, 0.85]
    plain = np.asarray(truth).astype(object)
    for positive in ("ill", None):  # the default: the first category, "ill"
        point = best_operating_point(scores, truth, u, positive=positive)
        reference = best_operating_point(scores, plain, u, positive="ill")
        assert point == reference
        # by hand: treat the top three (0.9, 0.85, 0.8): 2 ill gain 10 each, 1 healthy costs 1
        assert (point.threshold, point.utility_yield) == (0.8, (2 * 10 - 1) / 4)
    pd.testing.assert_frame_equal(
        roc.yield_curve(scores, truth, u), roc.yield_curve(scores, plain, u, positive="ill")
    )
    pd.testing.assert_frame_equal(
        roc.compare({"a": scores}, truth, u), roc.compare({"a": scores}, plain, u, positive="ill")
    )
    hull = convex_hull(scores, truth, positive="ill")
    assert (hull.positive, hull.negative) == ("ill", "healthy")
    assert hull.auc == convex_hull(scores, plain, positive="ill").auc
    assert curves.cost_curve(scores, truth, positive="ill").area == pytest.approx(
        curves.cost_curve(scores, plain, positive="ill").area
    )


def test_category_order_still_chooses_the_default_positive_for_the_utility():
    u = UtilityMatrix([[10, -1], [0, 0]], decisions=["treat", "wait"], classes=["ill", "healthy"])
    truth = pd.Categorical(["ill", "healthy"], categories=["unknown", "healthy", "ill"])
    assert best_operating_point([0.9, 0.1], truth, u).positive == "healthy"


def test_unused_categories_without_positive_are_named_with_the_remedy():
    truth = pd.Categorical(["a", "b", "a"], categories=["a", "b", "unknown"])
    with pytest.raises(ValueError) as error:
        convex_hull([0.9, 0.1, 0.8], truth)
    message = str(error.value)
    assert message.startswith("convex_hull needs two classes, found 3")
    assert "['unknown'] are unused" in message and ".remove_unused_categories()" in message


# -------------------------------------------------------------- B2-B5: clear errors
def test_confusion_reindex_checks_its_labels():
    cm = ConfusionMatrix([[1, 2], [3, 4]], classes=["a", "b"])
    with pytest.raises(ValueError, match=r"^classes must be unique, found duplicates \['b'\]"):
        cm.reindex(classes=["a", "b", "b"])
    with pytest.raises(
        TypeError, match=r"classes must be a sequence of labels, found the string 'abc'"
    ):
        cm.reindex(classes="abc")
    with pytest.raises(TypeError, match=r"decisions must be a sequence of labels"):
        cm.reindex(decisions="01")
    extended = cm.reindex(classes=(c for c in ["b", "a", "c"]))  # a generator is read once
    np.testing.assert_array_equal(extended.counts, [[2, 1, 0], [4, 3, 0]])


def test_confusion_from_dataframe_with_a_string_of_labels():
    frame = pd.DataFrame([[1, 2], [3, 4]], columns=["x", "y"])
    with pytest.raises(
        TypeError, match=r"^classes must be a sequence of labels, found the string 'ab'"
    ):
        ConfusionMatrix(frame, classes="ab")
    assert ConfusionMatrix(frame, classes=["y", "x"]).counts.tolist() == [[2, 1], [4, 3]]


@pytest.mark.parametrize("bad", ["0.2x", "0.2", [0.2], None, True, np.array([0.2])])
def test_prevalence_must_be_a_number(bad):
    u = UtilityMatrix([[1, 0], [0, 1]])
    for call in (
        lambda: roc.iso_utility_slope(u, bad, positive=1),
        lambda: curves.operating_condition(u, bad, positive=1),
    ):
        with pytest.raises(
            TypeError, match=r"^prevalence must be a number strictly between 0 and 1"
        ):
            call()


def test_prevalence_numbers_of_any_kind_still_work():
    u = UtilityMatrix([[1, 0], [0, 1]])
    for b in (0.25, np.float32(0.25), np.array(0.25)):
        # (1 - 0) (1 - B) / ((1 - 0) B) = 3
        assert roc.iso_utility_slope(u, b, positive=0) == pytest.approx(3.0)
    with pytest.raises(ValueError, match=r"strictly between 0 and 1, found 1.5"):
        roc.iso_utility_slope(u, 1.5, positive=0)


@pytest.mark.parametrize("bad", ["0.3", None, True, [0.3], float("nan"), 1.5])
def test_hull_points_need_a_rate_that_is_a_number(bad):
    hull = convex_hull([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0], positive=1)
    with pytest.raises(ValueError, match=r"^fpr must be a number in \[0, 1\]"):
        hull.at_fpr(bad)
    with pytest.raises(ValueError, match=r"^tpr must be a number in \[0, 1\]"):
        hull.at_tpr(bad)
    assert hull.at_fpr(np.float64(0.25)).tpr == pytest.approx(0.75)  # doctest's point


# ------------------------------------------------------------ C1: the slope's sign
def test_slope_docstring_allows_minus_infinity():
    u = UtilityMatrix([[1, 1], [1, 0]], decisions=[1, 0], classes=[1, 0])
    point = best_operating_point([0.9, 0.1], [1, 0], u, positive=1)
    assert point.slope == -np.inf  # U[p,p] == U[n,p] and a false alarm pays
    assert "-inf" in OperatingPoint.__doc__


def test_single_class_roc_with_positive_is_still_undefined():
    with pytest.raises(UndefinedMetricError, match=r"no negative items"):
        metrics.roc_auc([0.2, 0.3], [1, 1], positive=1)
