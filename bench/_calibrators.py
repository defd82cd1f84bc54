"""The post-hoc calibrators users pick instead of a transducer (bench/decision_quality.py).

Each is fitted on a calibration set's scores and labels and returns class probabilities
for new scores. Binary problems give a 1-D real score (logit scale); three-class
problems give logits, and the one-vs-rest calibrators are renormalised across classes,
as scikit-learn's ``CalibratedClassifierCV`` does.

* isotonic: ``sklearn.isotonic.IsotonicRegression`` (Zadrozny and Elkan, 2002);
* sigmoid: Platt scaling, a logistic regression on the score (Platt, 1999);
* temperature: ``softmax(logits / T)``, ``T`` by maximum likelihood (Guo et al., 2017);
* beta: ``betacal.BetaCalibration`` (Kull, Silva Filho and Flach, 2017), 3 parameters,
  on the score mapped to (0, 1).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import expit, log_softmax, softmax

Predict = Callable[[np.ndarray], np.ndarray]


def _binary(fit_one: Callable[[np.ndarray, np.ndarray], Predict]):
    """Lift a binary calibrator (1-D score -> P(1)) to (n, C) outputs, one-vs-rest for C > 2."""

    def fit(score: np.ndarray, labels: np.ndarray, n_classes: int) -> Predict:
        if n_classes == 2:
            one = fit_one(score, labels == 1)
            return lambda s: np.column_stack([1 - one(s), one(s)])
        ovr = [fit_one(score[:, c], labels == c) for c in range(n_classes)]

        def predict(s: np.ndarray) -> np.ndarray:
            p = np.column_stack([f(s[:, c]) for c, f in enumerate(ovr)]).clip(1e-12, None)
            return p / p.sum(axis=1, keepdims=True)

        return predict

    return fit


def _isotonic(score: np.ndarray, positive: np.ndarray) -> Predict:
    from sklearn.isotonic import IsotonicRegression

    model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
    model.fit(score, positive.astype(float))
    return model.predict


def _sigmoid(score: np.ndarray, positive: np.ndarray) -> Predict:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e6, max_iter=1000).fit(score[:, None], positive)
    return lambda s: model.predict_proba(s[:, None])[:, 1]


def _beta(score: np.ndarray, positive: np.ndarray) -> Predict:
    from betacal import BetaCalibration

    squash = lambda s: np.clip(expit(s), 1e-9, 1 - 1e-9)  # noqa: E731 (a one-liner)
    model = BetaCalibration(parameters="abm").fit(squash(score), positive.astype(int))
    return lambda s: np.asarray(model.predict(squash(s)), dtype=float)


def _temperature(score: np.ndarray, labels: np.ndarray, n_classes: int) -> Predict:
    logits = np.column_stack([np.zeros_like(score), score]) if n_classes == 2 else score

    def nll(log_t: float) -> float:
        return -log_softmax(logits / np.exp(log_t), axis=1)[np.arange(labels.size), labels].sum()

    t = float(np.exp(minimize_scalar(nll, bounds=(-5, 5), method="bounded").x))

    def predict(s: np.ndarray) -> np.ndarray:
        z = np.column_stack([np.zeros_like(s), s]) if n_classes == 2 else s
        return softmax(z / t, axis=1)

    return predict


CALIBRATORS: dict[str, Callable[[np.ndarray, np.ndarray, int], Predict]] = {
    "isotonic": _binary(_isotonic),
    "sigmoid (Platt)": _binary(_sigmoid),
    "temperature": _temperature,
    "beta": _binary(_beta),
}
