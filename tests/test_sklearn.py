"""yieldwise.sklearn.AugmentedClassifier with real scikit-learn estimators and Stan fits."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, cross_validate

from yieldwise import Transducer, UtilityMatrix
from yieldwise.backends import SamplerWarning
from yieldwise.sklearn import AugmentedClassifier
from yieldwise.transducer import DiagnosticsWarning

# the Laplace approximation: these tests check the scikit-learn protocol, not sampling
FAST = Transducer(chains=2, warmup=300, draws=300, seed=1, progress=False, backend="laplace")
# P(ill) < 1/13: dismiss; 1/13 .. 2/5: re-test; above 2/5: treat.
THREE = UtilityMatrix(
    [[0, -10], [-1, 2], [-3, 5]], decisions=["dismiss", "retest", "treat"], classes=[0, 1]
)


def calibrate(model, X, y):
    """``model.fit(X, y)`` without the warnings that short Stan runs give by design."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticsWarning)
        warnings.simplefilter("ignore", SamplerWarning)
        return model.fit(X, y)


def by_hand(proba, values, decisions):
    """Expected utilities ``p @ U.T`` (or per item) and their argmax decision labels."""
    values = np.asarray(values)
    eu = proba @ values.T if values.ndim == 2 else np.einsum("nc,ndc->nd", proba, values)
    return eu, np.array(decisions)[eu.argmax(axis=1)]


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=1200, weights=[0.8], random_state=0)
    model = LogisticRegression().fit(X[:500], y[:500])
    before = {
        "coef": model.coef_.copy(),
        "intercept": model.intercept_.copy(),
        "scores": model.predict_proba(X[900:]).copy(),
    }
    augmented = calibrate(
        AugmentedClassifier(model, THREE, transducer=FAST), X[500:900], y[500:900]
    )
    return {
        "augmented": augmented, "model": model, "before": before,
        "X_cal": X[500:900], "y_cal": y[500:900], "X": X[900:], "y": y[900:],
    }  # fmt: skip


def test_clone_keeps_the_parameters_and_the_trained_estimator_but_not_the_fit(binary):
    augmented, model = binary["augmented"], binary["model"]
    copy_ = clone(augmented)
    params = copy_.get_params(deep=False)
    assert set(params) == {"estimator", "utility", "transducer", "output", "prevalences"}
    # The trained estimator is kept as it is: an untrained clone could not be calibrated.
    assert params["estimator"] is model and hasattr(params["estimator"], "coef_")
    assert params["utility"] == THREE
    assert params["transducer"] is not FAST
    assert params["transducer"].get_params() == FAST.get_params()
    assert (params["output"], params["prevalences"]) == ("predict_proba", None)
    for attribute in ("transducer_", "classes_", "n_features_in_"):
        assert not hasattr(copy_, attribute)
    with pytest.raises(NotFittedError, match="AugmentedClassifier instance is not fitted yet"):
        copy_.predict(binary["X"])


def test_fit_calibrates_without_retraining(binary):
    augmented, model, before = binary["augmented"], binary["model"], binary["before"]
    np.testing.assert_array_equal(model.coef_, before["coef"])
    np.testing.assert_array_equal(model.intercept_, before["intercept"])
    np.testing.assert_array_equal(model.predict_proba(binary["X"]), before["scores"])
    # The template is cloned: the user's Transducer stays unfitted.
    assert augmented.transducer_ is not FAST and not hasattr(FAST, "posterior_")
    assert augmented.transducer_.n_calibration_ == 400
    # A binary predict_proba reaches the transducer as one column in [0, 1] (logit scale).
    assert augmented.transducer_.transform_.kind == ("logit",)
    assert augmented.classes_.tolist() == [0, 1] and augmented.n_features_in_ == 20


def test_probabilities_expected_utilities_and_decisions_by_hand(binary):
    augmented, model, X = binary["augmented"], binary["model"], binary["X"]
    proba = augmented.predict_proba(X)
    np.testing.assert_array_equal(
        proba, augmented.transducer_.predict_proba(model.predict_proba(X)[:, 1])
    )
    eu, expected = by_hand(proba, THREE.values, THREE.decisions)
    table = augmented.expected_utility(X)
    assert list(table.columns) == ["dismiss", "retest", "treat"] and table.shape == (300, 3)
    np.testing.assert_allclose(table.to_numpy(), eu, rtol=1e-12)
    decisions = augmented.predict(X)
    np.testing.assert_array_equal(decisions, expected)
    # The rectangular matrix's three decisions, not the two classes, come out.
    assert set(decisions) == {"dismiss", "retest", "treat"}


def test_score_is_the_utility_yield(binary):
    augmented, X, y = binary["augmented"], binary["X"], binary["y"]
    rows = [THREE.decisions.index(d) for d in augmented.predict(X)]
    realised = THREE.values[rows, y]
    assert augmented.score(X, y) == pytest.approx(realised.mean(), rel=1e-12)
    weights = np.where(y == 1, 3.0, 1.0)
    assert augmented.score(X, y, sample_weight=weights) == pytest.approx(
        (realised * weights).sum() / weights.sum(), rel=1e-12
    )


def test_per_item_and_other_utilities_at_predict_time(binary):
    augmented, X = binary["augmented"], binary["X"]
    proba = augmented.predict_proba(X)
    # Missing an ill item costs 1 for odd items, 50 for even ones (instead of 10).
    per_item = np.broadcast_to(THREE.values, (len(X), 3, 2)).copy()
    per_item[:, 0, 1] = np.where(np.arange(len(X)) % 2 == 0, -50.0, -1.0)
    eu, expected = by_hand(proba, per_item, THREE.decisions)
    got = augmented.predict(X, utility=per_item)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(augmented.expected_utility(X, utility=per_item).to_numpy(), eu)
    default = augmented.predict(X)
    changed = got != default
    assert changed[::2].any() and changed[1::2].any()  # both directions move some items
    assert (default[::2][changed[::2]] == "dismiss").all()  # costlier misses: dismiss less
    assert (got[1::2][changed[1::2]] == "dismiss").all()  # cheaper misses: dismiss more
    # A UtilityMatrix at predict time is matched to the classes by label, not position.
    swapped = THREE.reindex(classes=[1, 0])
    np.testing.assert_array_equal(augmented.predict(X, utility=swapped), default)
    two = UtilityMatrix([[1, 0], [0, 1]], decisions=["no", "yes"], classes=[0, 1])
    np.testing.assert_array_equal(
        augmented.predict(X, utility=two), np.where(proba[:, 1] > 0.5, "yes", "no")
    )


def test_prevalences_give_the_transducer_generative_probabilities(binary):
    augmented, model, X = binary["augmented"], binary["model"], binary["X"]
    balanced = copy.deepcopy(augmented).set_params(prevalences=[0.5, 0.5])
    proba = balanced.predict_proba(X)
    scores = model.predict_proba(X)[:, 1]
    np.testing.assert_array_equal(
        proba, augmented.transducer_.predict_proba(scores, prevalences=[0.5, 0.5])
    )
    # Calibration prevalence of class 1 is about 0.2: at 0.5 every item is likelier ill.
    assert (proba[:, 1] > augmented.predict_proba(X)[:, 1]).all()
    np.testing.assert_array_equal(
        balanced.predict(X), by_hand(proba, THREE.values, THREE.decisions)[1]
    )


def test_cross_validation_calibrates_clones_of_the_same_trained_estimator(binary):
    augmented, model = binary["augmented"], binary["model"]
    X, y = binary["X_cal"], binary["y_cal"]
    folds = KFold(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticsWarning)
        warnings.simplefilter("ignore", SamplerWarning)
        result = cross_validate(
            augmented, X, y, cv=folds, return_estimator=True, error_score="raise"
        )
    np.testing.assert_array_equal(model.coef_, binary["before"]["coef"])
    for fitted, score, (train, test) in zip(
        result["estimator"], result["test_score"], folds.split(X), strict=True
    ):
        assert fitted.estimator is model and fitted.transducer_ is not augmented.transducer_
        assert fitted.transducer_.n_calibration_ == len(train) == 200
        rows = [THREE.decisions.index(d) for d in fitted.predict(X[test])]
        assert score == pytest.approx(THREE.values[rows, y[test]].mean(), rel=1e-12)


def test_decision_function_route_with_dataframes():
    X, y = make_classification(n_samples=800, random_state=1)
    X = pd.DataFrame(X, columns=[f"f{j}" for j in range(20)], index=np.arange(1000, 1800))
    model = LogisticRegression().fit(X[:300], y[:300])  # knows its feature names
    u = UtilityMatrix([[1, 0], [0, 1]], decisions=["no", "yes"], classes=[0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # e.g. "X has feature names, but..."
        augmented = calibrate(
            AugmentedClassifier(model, u, transducer=FAST, output="decision_function"),
            X[300:600], y[300:600],
        )  # fmt: skip
        test = X[600:]
        scores = model.decision_function(test)
        proba = augmented.predict_proba(test)
        table = augmented.expected_utility(test)
        decisions = augmented.predict(test)
    np.testing.assert_array_equal(proba, augmented.transducer_.predict_proba(scores))
    # Unbounded scores: modelled on their own scale, one column.
    assert augmented.transducer_.transform_.kind == ("identity",)
    assert augmented.n_features_in_ == 20
    eu, expected = by_hand(proba, u.values, u.decisions)
    assert table.index.equals(test.index)
    np.testing.assert_allclose(table.to_numpy(), eu)
    np.testing.assert_array_equal(decisions, expected)
    assert (decisions == np.where(y[600:] == 1, "yes", "no")).mean() > 0.8


def test_three_classes_from_probability_vectors():
    X, y = make_classification(n_samples=900, n_classes=3, n_informative=5, random_state=2)
    forest = RandomForestClassifier(n_estimators=50, random_state=0).fit(X[:400], y[:400])
    before = forest.predict_proba(X[700:])
    # A fourth decision, "refer", is worth a little whatever the class.
    u = UtilityMatrix(
        [[3, -2, -2], [-2, 3, -2], [-2, -2, 3], [0.5, 0.5, 0.5]],
        decisions=["a", "b", "c", "refer"], classes=[0, 1, 2],
    )  # fmt: skip
    augmented = calibrate(AugmentedClassifier(forest, u, transducer=FAST), X[400:700], y[400:700])
    np.testing.assert_array_equal(forest.predict_proba(X[700:]), before)
    transform = augmented.transducer_.transform_
    assert transform.is_simplex and len(transform.columns) == 3  # all 3 columns seen
    proba = augmented.predict_proba(X[700:])
    np.testing.assert_array_equal(proba, augmented.transducer_.predict_proba(before))
    assert proba.shape == (200, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    eu, expected = by_hand(proba, u.values, u.decisions)
    np.testing.assert_allclose(augmented.expected_utility(X[700:]).to_numpy(), eu)
    decisions = augmented.predict(X[700:])
    np.testing.assert_array_equal(decisions, expected)
    assert set(decisions) == {"a", "b", "c", "refer"}
    decided = decisions != "refer"
    hits = decisions[decided] == np.array(["a", "b", "c"])[y[700:][decided]]
    assert hits.mean() > 0.7  # far above the 1/3 of chance


def test_bad_setups_are_refused(binary):
    X, y = make_classification(n_samples=100, random_state=3)
    model = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match=r"output must be one of \['predict_proba', 'decision"):
        AugmentedClassifier(model, THREE, output="scores").fit(X, y)
    wrong = UtilityMatrix([[1, 0], [0, 1]], classes=["no", "yes"])
    with pytest.raises(
        ValueError, match=r"utility has classes \['no', 'yes'\], but the calibration labels "
        r"are \[0, 1\]",
    ):  # fmt: skip
        AugmentedClassifier(model, wrong).fit(X, y)
    with pytest.raises(
        NotFittedError, match="LogisticRegression is not fitted: it must be trained before wrapping"
    ):
        AugmentedClassifier(LogisticRegression(), THREE).fit(X, y)
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(
        ValueError, match=r"RandomForestClassifier has no method decision_function\(\)"
    ):
        AugmentedClassifier(forest, THREE, output="decision_function").fit(X, y)
    with pytest.raises(TypeError, match="utility must be a yieldwise UtilityMatrix"):
        AugmentedClassifier(model, np.eye(2)).fit(X, y)
    with pytest.raises(TypeError, match="transducer must be a yieldwise Transducer or None"):
        AugmentedClassifier(model, THREE, transducer=LogisticRegression()).fit(X, y)
    unfitted = AugmentedClassifier(model, THREE)
    for method in (unfitted.predict, unfitted.predict_proba, unfitted.expected_utility):
        with pytest.raises(NotFittedError, match="AugmentedClassifier instance is not fitted"):
            method(X)
    augmented, X_test = binary["augmented"], binary["X"]
    with pytest.raises(ValueError, match=r"utility has classes \['no', 'yes'\], but the fitted"):
        augmented.predict(X_test, utility=wrong)
    with pytest.raises(ValueError, match=r"utility has 2 decisions \(rows\), but the utility"):
        augmented.predict(X_test, utility=np.eye(2))


def test_scikit_learn_construction_checks():
    """scikit-learn's own checks of what __init__ may do (parameters stored, nothing else)."""
    from sklearn.utils.estimator_checks import (
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_set_params,
    )

    wrapped = AugmentedClassifier(LogisticRegression(), THREE, transducer=FAST)
    check_no_attributes_set_in_init("AugmentedClassifier", wrapped)
    check_get_params_invariance("AugmentedClassifier", wrapped)
    check_set_params("AugmentedClassifier", wrapped)
