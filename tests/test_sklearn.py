"""yieldwise.sklearn.AugmentedClassifier with real scikit-learn estimators and Stan fits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

from yieldwise import Transducer, UtilityMatrix
from yieldwise.sklearn import AugmentedClassifier

FAST = Transducer(chains=2, warmup=300, draws=300, seed=1, progress=False)
THREE = UtilityMatrix(
    [[0, -10], [-0.5, -2], [-1, 5]], decisions=["dismiss", "retest", "treat"], classes=[0, 1]
)


def quiet_fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs warn about ESS by design
        return model.fit(X, y)


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=1000, weights=[0.8], random_state=0)
    model = LogisticRegression().fit(X[:400], y[:400])
    coef = model.coef_.copy()
    wrapped = AugmentedClassifier(model, THREE, transducer=FAST)
    augmented = quiet_fit(wrapped, X[400:700], y[400:700])
    return augmented, model, coef, X[700:]


def test_clone_keeps_parameters_and_drops_the_fit(binary):
    augmented = binary[0]
    copy = clone(augmented)
    assert copy.get_params(deep=False) == {
        "estimator": copy.estimator, "utility": THREE, "transducer": copy.transducer,
        "output": "predict_proba", "prevalences": None,
    }  # fmt: skip
    assert not hasattr(copy, "transducer_")
    assert copy.transducer is not FAST and copy.transducer.get_params() == FAST.get_params()
    with pytest.raises(NotFittedError):
        copy.predict(np.zeros((1, 20)))


def test_fit_calibrates_without_retraining(binary):
    augmented, model, coef, _ = binary
    np.testing.assert_array_equal(model.coef_, coef)
    assert augmented.transducer_ is not FAST and not hasattr(FAST, "posterior_")
    assert augmented.classes_.tolist() == [0, 1] and augmented.n_features_in_ == 20


def test_probabilities_and_decisions_by_hand(binary):
    augmented, model, _, X = binary
    scores = model.predict_proba(X)[:, 1]
    proba = augmented.predict_proba(X)
    np.testing.assert_allclose(proba, augmented.transducer_.predict_proba(scores))
    eu = proba @ THREE.values.T  # (items, 3 decisions)
    np.testing.assert_allclose(augmented.expected_utility(X).to_numpy(), eu)
    expected = np.array(THREE.decisions)[eu.argmax(axis=1)]
    np.testing.assert_array_equal(augmented.predict(X), expected)
    assert {"dismiss", "treat"} <= set(augmented.predict(X))


def test_per_item_utilities_at_predict_time(binary):
    augmented, _, _, X = binary
    X = X[:50]
    proba = augmented.predict_proba(X)
    per_item = np.broadcast_to(THREE.values, (50, 3, 2)).copy()
    per_item[::2, 1] = [5.0, 5.0]  # re-testing is free and rewarding for even items
    eu = np.einsum("nc,ndc->nd", proba, per_item)
    got = augmented.predict(X, utility=per_item)
    np.testing.assert_array_equal(got, np.array(THREE.decisions)[eu.argmax(axis=1)])
    assert (got[::2] == "retest").all()


def test_decision_function_route():
    X, y = make_classification(n_samples=800, random_state=1)
    model = LogisticRegression().fit(X[:300], y[:300])
    u = UtilityMatrix([[1, 0], [0, 1]])
    augmented = quiet_fit(
        AugmentedClassifier(model, u, transducer=FAST, output="decision_function"),
        X[300:600], y[300:600],
    )  # fmt: skip
    scores = model.decision_function(X[600:])
    np.testing.assert_allclose(
        augmented.predict_proba(X[600:]), augmented.transducer_.predict_proba(scores)
    )
    assert augmented.transducer_.transform_.kind == ("identity",)
    assert (augmented.predict(X[600:]) == y[600:]).mean() > 0.8


def test_three_classes_from_probability_vectors():
    X, y = make_classification(
        n_samples=900, n_classes=3, n_informative=5, random_state=2
    )  # fmt: skip
    forest = RandomForestClassifier(n_estimators=50, random_state=0).fit(X[:400], y[:400])
    u = UtilityMatrix(np.eye(3), decisions=["a", "b", "c"], classes=[0, 1, 2])
    augmented = quiet_fit(AugmentedClassifier(forest, u, transducer=FAST), X[400:700], y[400:700])
    assert augmented.transducer_.transform_.is_simplex
    proba = augmented.predict_proba(X[700:])
    assert proba.shape == (200, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(augmented.predict(X[700:])) <= {"a", "b", "c"}


def test_bad_setups_are_refused():
    X, y = make_classification(n_samples=100, random_state=3)
    model = LogisticRegression().fit(X, y)
    with pytest.raises(ValueError, match=r"output must be one of"):
        AugmentedClassifier(model, THREE, output="scores").fit(X, y)
    wrong = UtilityMatrix([[1, 0], [0, 1]], classes=["no", "yes"])
    with pytest.raises(ValueError, match=r"utility has classes \['no', 'yes'\]"):
        AugmentedClassifier(model, wrong).fit(X, y)
    with pytest.raises(NotFittedError, match="LogisticRegression is not fitted"):
        AugmentedClassifier(LogisticRegression(), THREE).fit(X, y)
    forest = RandomForestClassifier(n_estimators=3).fit(X, y)
    with pytest.raises(ValueError, match="RandomForestClassifier has no method decision_function"):
        AugmentedClassifier(forest, THREE, output="decision_function").fit(X, y)
    with pytest.raises(TypeError, match="utility must be a yieldwise UtilityMatrix"):
        AugmentedClassifier(model, np.eye(2)).fit(X, y)
    with pytest.raises(NotFittedError):
        AugmentedClassifier(model, THREE).predict_proba(X)


def test_scikit_learn_construction_checks():
    """scikit-learn's own checks of what __init__ may do (parameters stored, nothing else)."""
    from sklearn.utils.estimator_checks import (
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_set_params,
    )

    model = LogisticRegression()
    wrapped = AugmentedClassifier(model, THREE, transducer=FAST)
    check_no_attributes_set_in_init("AugmentedClassifier", wrapped)
    check_get_params_invariance("AugmentedClassifier", wrapped)
    check_set_params("AugmentedClassifier", wrapped)
