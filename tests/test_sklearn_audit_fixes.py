"""AugmentedClassifier and Transducer.decide fixes from the API audit (FINDINGS.md A3, A6,
A7, B4, B5, B6).

Each test fails on the code before the fix; the expected values are hand-computed from the
fitted probabilities, or the Python API's own answer with a UtilityMatrix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold

from yieldwise import Transducer, UtilityMatrix, decide
from yieldwise.backends import SamplerWarning
from yieldwise.sklearn import AugmentedClassifier
from yieldwise.transducer import DiagnosticsWarning

# the Laplace approximation: these tests check the wrapper's plumbing, not sampling
FAST = Transducer(chains=2, warmup=200, draws=200, seed=1, progress=False, backend="laplace")
# P(1) < 1/16: wait; above: treat
U = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"], classes=[0, 1])


def quietly(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiagnosticsWarning)
        warnings.simplefilter("ignore", SamplerWarning)
        warnings.simplefilter("ignore", UserWarning)
        return function(*args, **kwargs)


@pytest.fixture(scope="module")
def setup():
    X, y = make_classification(n_samples=700, weights=[0.7], random_state=4)
    model = LogisticRegression().fit(X[:300], y[:300])
    augmented = quietly(AugmentedClassifier(model, U, transducer=FAST).fit, X[300:550], y[300:550])
    return {"model": model, "augmented": augmented, "X": X[550:], "y": y[550:],
            "X_cal": X[300:550], "y_cal": y[300:550]}  # fmt: skip


# ------------------------------------------------------------------ A3
def test_a3_transducer_decide_aligns_a_dataframe_utility_by_label(setup):
    augmented, X = setup["augmented"], setup["X"]
    transducer = augmented.transducer_
    outputs = setup["model"].predict_proba(X)[:, 1]
    proba = transducer.predict_proba(outputs)
    # by hand: argmax of p @ U.T, the rows in U's decision order
    expected = np.array(U.decisions)[(proba @ U.values.T).argmax(axis=1)]
    assert {"wait", "treat"} <= set(expected)  # both decisions occur: order matters
    reversed_frame = U.reindex(classes=[1, 0]).to_frame()
    assert list(reversed_frame.columns) == [1, 0]
    for utility in (U, U.to_frame(), U.reindex(classes=[1, 0]), reversed_frame):
        np.testing.assert_array_equal(transducer.decide(outputs, utility, tie="first"), expected)
    # a DataFrame with other classes is refused, as a UtilityMatrix is
    other = UtilityMatrix(np.eye(2), classes=["no", "yes"]).to_frame()
    with pytest.raises(ValueError, match=r"utility's classes \['no', 'yes'\] differ"):
        transducer.decide(outputs, other)


# ------------------------------------------------------------------ A6
def test_a6_the_trained_estimator_parameters_cannot_be_set(setup):
    augmented, model = setup["augmented"], setup["model"]
    before = model.get_params()
    copy_ = clone(augmented)
    with pytest.raises(ValueError, match=r"cannot set \['estimator__C'\]: the wrapped estimator"):
        copy_.set_params(estimator__C=0.001)
    with pytest.raises(ValueError, match="is never refitted"):
        augmented.set_params(estimator__C=0.001, output="predict_proba")
    assert model.get_params() == before and model.C == 1.0  # the user's model is untouched
    deep = augmented.get_params(deep=True)
    assert not [k for k in deep if k.startswith("estimator__")]
    assert deep["estimator"] is model and deep["transducer__draws"] == 200
    assert set(augmented.get_params(deep=False)) <= set(deep)
    # the wrapper's own parameters and the transducer template's are still settable
    copy_.set_params(transducer__draws=100, prevalences=[0.5, 0.5])
    assert copy_.transducer.draws == 100 and FAST.draws == 200
    assert copy_.prevalences == [0.5, 0.5]


def test_a6_grid_search_over_the_estimator_is_refused_and_over_the_wrapper_works(setup):
    model, X, y = setup["model"], setup["X_cal"], setup["y_cal"]
    coef = model.coef_.copy()
    search = GridSearchCV(
        AugmentedClassifier(model, U, transducer=FAST), {"estimator__C": [0.01, 100.0]}, cv=2
    )
    with pytest.raises(ValueError, match=r"cannot set \['estimator__C'\]"):
        quietly(search.fit, X, y)
    assert model.C == 1.0
    folds = KFold(2)
    search = GridSearchCV(
        AugmentedClassifier(model, U, transducer=FAST),
        {"prevalences": [None, [0.5, 0.5]]},
        cv=folds,
        error_score="raise",
    )
    quietly(search.fit, X, y)
    np.testing.assert_array_equal(model.coef_, coef)
    assert search.best_estimator_.estimator is model
    # each candidate's score is the utility yield of a clone calibrated on the other fold
    for index, prevalences in enumerate(search.cv_results_["param_prevalences"]):
        scores = []
        for train, test in folds.split(X):
            fitted = quietly(
                AugmentedClassifier(model, U, transducer=FAST, prevalences=prevalences).fit,
                X[train],
                y[train],
            )
            rows = [U.decisions.index(d) for d in fitted.predict(X[test])]
            scores.append(U.values[rows, y[test]].mean())
        assert search.cv_results_["mean_test_score"][index] == pytest.approx(np.mean(scores))


# ------------------------------------------------------------------ A7, B6
def test_a7_b6_score_checks_weights_and_labels(setup):
    augmented, X, y = setup["augmented"], setup["X"], setup["y"]
    n = len(y)
    rows = [U.decisions.index(d) for d in augmented.predict(X)]
    realised = U.values[rows, y]
    weights = np.where(y == 1, 2.0, 0.5)
    assert augmented.score(X, y, sample_weight=weights) == pytest.approx(
        (realised * weights).sum() / weights.sum(), rel=1e-12
    )
    bad_weights = {
        "finite, found nan at position 0": np.r_[np.nan, np.ones(n - 1)],
        "finite, found inf at position 3": np.r_[np.ones(3), np.inf, np.ones(n - 4)],
        "non-negative, found -1.0 at position 0": -np.ones(n),
        r"one weight per item, shape \(150,\), found shape \(3,\)": np.ones(3),
        r"one weight per item, shape \(150,\), found shape \(150, 1\)": np.ones((n, 1)),
        "zero for every item": np.zeros(n),
    }
    for expected, sample_weight in bad_weights.items():
        with pytest.raises(ValueError, match="sample_weight (must be|must have|is) " + expected):
            augmented.score(X, y, sample_weight=sample_weight)
    with pytest.raises(TypeError, match="sample_weight must be numbers"):
        augmented.score(X, y, sample_weight=["a"] * n)
    with pytest.raises(ValueError, match="y has 147 labels, but X has 150 items"):
        augmented.score(X, y[:-3])
    with pytest.raises(ValueError, match=r"y must be 1-dimensional, found shape \(150, 1\)"):
        augmented.score(X, y[:, None])
    labels = y.astype(object)
    labels[4] = None
    with pytest.raises(ValueError, match="y has 1 missing label"):
        augmented.score(X, labels)


# ------------------------------------------------------------------ B4
class _NoClasses(BaseEstimator):
    """A trained classifier without ``classes_`` (its columns are in sorted label order)."""

    def __init__(self, model):
        self.model = model
        self.fitted_ = True

    def fit(self, X, y):  # scikit-learn's check_is_fitted wants an estimator
        raise NotImplementedError("trained beforehand")

    def predict_proba(self, X):
        return self.model.predict_proba(X)


def test_b4_missing_and_mixed_labels_are_refused_clearly(setup):
    model, X, y = setup["model"], setup["X_cal"], setup["y_cal"]
    labels = y.astype(object)
    labels[7] = None
    with pytest.raises(ValueError, match=r"y has 1 missing label.*first at position 7"):
        AugmentedClassifier(model, U, transducer=FAST).fit(X, labels)
    labels[7] = "1"  # the text "1" among the integers 0 and 1
    with pytest.raises(ValueError, match=r"calibration labels .*'1'.* are not the classes"):
        AugmentedClassifier(model, U, transducer=FAST).fit(X, labels)
    with pytest.raises(ValueError, match="the labels in y cannot be sorted"):
        AugmentedClassifier(_NoClasses(model), U, transducer=FAST).fit(X, labels)
    with pytest.raises(ValueError, match=r"y must be 1-dimensional"):
        AugmentedClassifier(model, U, transducer=FAST).fit(X, y[:, None])
    # without classes_, plain labels still give the sorted classes
    fitted = quietly(AugmentedClassifier(_NoClasses(model), U, transducer=FAST).fit, X, y)
    assert fitted.classes_.tolist() == [0, 1]


# ------------------------------------------------------------------ B5
def test_b5_a_dataframe_utility_at_predict_time_is_aligned_by_label(setup):
    augmented, X = setup["augmented"], setup["X"]
    proba = augmented.predict_proba(X)
    other = UtilityMatrix([[1, 0], [0, 1]], decisions=["no", "yes"], classes=[0, 1])
    expected = np.where(proba[:, 1] > 0.5, "yes", "no")  # by hand: the identity's argmax
    for utility in (other.to_frame(), other.reindex(classes=[1, 0]).to_frame()):
        np.testing.assert_array_equal(augmented.predict(X, utility), expected)
        np.testing.assert_allclose(
            augmented.expected_utility(X, utility).to_numpy(), proba[:, [0, 1]]
        )
    # the Python API with the UtilityMatrix itself agrees
    np.testing.assert_array_equal(decide(proba, other, tie="first"), expected)
    wrong = UtilityMatrix(np.eye(2), classes=["a", "b"]).to_frame()
    with pytest.raises(ValueError, match=r"utility has classes \['a', 'b'\], but the fitted"):
        augmented.predict(X, wrong)
