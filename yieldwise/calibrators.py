"""The standard post-hoc calibrators, to put beside the transducer on held-out data.

Each turns a classifier's scores into class probabilities after being fitted on a
calibration set, as the transducer does, but with a fixed parametric or monotone
shape and without uncertainty:

* :class:`IsotonicCalibrator` -- isotonic regression by pool-adjacent-violators
  (Zadrozny and Elkan, 2002); on the calibration items it is the ROC convex hull's
  calibration (:func:`yieldwise.roc.convex_hull`), and between them it interpolates
  linearly as ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip")`` does;
* :class:`PlattCalibrator` -- Platt scaling, a logistic regression on the score
  (Platt, 1999), with the almost-vanishing ridge of scikit-learn's
  ``LogisticRegression(C=1e6)`` on the standardised score, so that separable data keep
  finite coefficients and the scores' units do not matter;
* :class:`BetaCalibrator` -- beta calibration (Kull, Silva Filho and Flach, 2017),
  ``logit p = a log s - b log(1 - s) + c`` on a score ``s`` in (0, 1), with ``a, b >= 0``
  enforced as the reference implementation ``betacal`` does (refit without the
  offending term);
* :class:`TemperatureCalibrator` -- ``softmax(logits / T)`` with ``T`` by maximum
  likelihood (Guo et al., 2017).

Scores
------
With two classes the scores are 1-D: evidence for the *second* class
``classes_[1]`` (scikit-learn's ``decision_function`` convention), on the logit
scale for Platt and temperature scaling. With ``C`` classes they are ``(items, C)``:
column ``c`` is evidence for ``classes_[c]`` (logits). Isotonic, Platt and beta
calibration are binary methods; on ``C`` classes each column is calibrated one
class against the rest and the probabilities are renormalised, as scikit-learn's
``CalibratedClassifierCV`` does. ``predict_proba`` returns ``(items, classes)``
with columns in ``classes_`` order.

Examples
--------
>>> import numpy as np
>>> from yieldwise.calibrators import PlattCalibrator
>>> rng = np.random.default_rng(0)
>>> labels = rng.integers(0, 2, 20_000)
>>> scores = 2.0 * labels - 1 + rng.normal(size=20_000)  # logit P(1 | s) = 2 s exactly
>>> platt = PlattCalibrator().fit(scores, labels)
>>> np.round(platt.coef_, 1)  # slope and intercept
array([2., 0.])
>>> platt.predict_proba([0.0, 1.0]).round(2)
array([[0.5 , 0.5 ],
       [0.12, 0.88]])
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy.special import expit, softmax

from ._validation import (
    Label,
    as_float_array,
    categories_of,
    check_labels,
    indices_of,
    label_values,
    sorted_unique,
)

__all__ = [
    "BetaCalibrator",
    "IsotonicCalibrator",
    "PlattCalibrator",
    "TemperatureCalibrator",
]

#: Probabilities are floored here before one-vs-rest renormalisation (as in
#: scikit-learn), so that a class every calibrator rules out cannot divide by zero.
_FLOOR = 1e-12


def _logistic_newton(x: np.ndarray, y: np.ndarray, ridge: float, max_iter: int = 200) -> np.ndarray:
    """Maximum-likelihood logistic regression with an intercept (last coefficient).

    Minimises ``sum log(1 + exp(z)) - y z + ridge / 2 * |w_slopes|^2`` with
    ``z = x @ w[:-1] + w[-1]`` by Newton's method with step halving; the ridge (not
    on the intercept) is scikit-learn's ``1 / C``.
    """
    design = np.column_stack([x, np.ones(x.shape[0])])
    penalty = np.full(design.shape[1], ridge)
    penalty[-1] = 0.0
    w = np.zeros(design.shape[1])

    def loss(w: np.ndarray) -> float:
        z = design @ w
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * np.sum(penalty * w * w))

    current = loss(w)
    for _ in range(max_iter):
        p = expit(design @ w)
        gradient = design.T @ (p - y) + penalty * w
        hessian = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty)
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        # Near the optimum a Newton step lowers the loss by about |gradient|^2 / (2 H),
        # far below the rounding of a sum of n terms (a 300-item fit stalled at gradient
        # 1e-7, its steps halved against noise of 1e-14): an increase within rounding
        # counts as no increase, so the quadratic convergence is kept to the end.
        rounding = 1e-12 * (1.0 + abs(current))
        scale = 1.0
        while scale > 1e-10:
            candidate = w - scale * step
            new = loss(candidate)
            if new <= current + rounding:
                break
            scale /= 2
        else:
            break
        w, current = candidate, new
        # Newton converges quadratically: stop once a step no longer moves w
        if np.abs(scale * step).max() <= 1e-12 * (1.0 + np.abs(w).max()):
            break
    return w


class _Calibrator:
    """Shared fitting of labels and score shapes; subclasses fit one binary curve."""

    def _fit_labels(self, scores: Any, true_classes: Any, classes: Any) -> tuple:
        s = as_float_array(scores, "scores", ndim=(1, 2), exact_integers=True)
        truth = label_values(true_classes, "true_classes")
        if truth.size != s.shape[0]:
            raise ValueError(
                f"true_classes must have one label per score ({s.shape[0]}), found {truth.size}"
            )
        if classes is None:
            classes = categories_of(true_classes) or sorted_unique(truth)
        classes = check_labels(classes, len(list(classes)), "classes")
        if len(classes) < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least two classes, found {list(classes)}"
            )
        index = indices_of(truth, classes, "true_classes", "classes")
        if s.ndim == 1 and len(classes) != 2:
            raise ValueError(
                f"scores are 1-D, which means two classes, but there are {len(classes)}: "
                f"{list(classes)}; pass one column of scores per class"
            )
        if s.ndim == 2 and s.shape[1] != len(classes):
            raise ValueError(
                f"scores has {s.shape[1]} columns but there are {len(classes)} classes "
                f"{list(classes)}; pass one column per class (or classes= to name them)"
            )
        self.classes_: tuple[Label, ...] = classes
        self.n_features_in_ = 1 if s.ndim == 1 else s.shape[1]
        return s, index

    def _check_scores(self, scores: Any) -> np.ndarray:
        if not hasattr(self, "classes_"):
            raise RuntimeError(
                f"this {type(self).__name__} is not fitted yet: call .fit(scores, true_classes)"
            )
        s = as_float_array(scores, "scores", ndim=(1, 2), exact_integers=True)
        expected = 1 if self.n_features_in_ == 1 else 2
        if s.ndim != expected or (s.ndim == 2 and s.shape[1] != self.n_features_in_):
            shape = "1-D" if expected == 1 else f"(items, {self.n_features_in_})"
            raise ValueError(f"scores must be {shape} as at fit time, found shape {s.shape}")
        return s


class _OneVsRest(_Calibrator):
    """A binary calibrator, lifted to several classes one class against the rest."""

    def _fit_one(self, score: np.ndarray, positive: np.ndarray) -> Any:
        raise NotImplementedError

    def _predict_one(self, params: Any, score: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit(self, scores: Any, true_classes: Any, *, classes: Any = None) -> _OneVsRest:
        """Fit on calibration scores and their true classes; returns ``self``.

        ``classes`` names the classes (and orders the columns of 2-D scores);
        default the categories of a categorical ``true_classes``, else the sorted
        labels.
        """
        s, index = self._fit_labels(scores, true_classes, classes)
        if s.ndim == 1:
            self.params_ = [self._fit_one(s, (index == 1).astype(float))]
        else:
            self.params_ = [
                self._fit_one(s[:, c], (index == c).astype(float)) for c in range(s.shape[1])
            ]
        return self

    def predict_proba(self, scores: Any) -> np.ndarray:
        """Class probabilities ``(items, classes)``, columns in ``classes_`` order."""
        s = self._check_scores(scores)
        if s.ndim == 1:
            p1 = self._predict_one(self.params_[0], s)
            return np.column_stack([1 - p1, p1])
        p = np.column_stack(
            [self._predict_one(params, s[:, c]) for c, params in enumerate(self.params_)]
        ).clip(_FLOOR, None)
        return p / p.sum(axis=1, keepdims=True)


class IsotonicCalibrator(_OneVsRest):
    """Isotonic regression of the labels on the score (pool-adjacent-violators).

    The fitted curve is the non-decreasing step function closest (least squares)
    to the labels; new scores are interpolated linearly between the distinct
    calibration scores and clipped outside them, as
    ``sklearn.isotonic.IsotonicRegression(out_of_bounds="clip")`` does. On the
    calibration items it equals :attr:`yieldwise.roc.ROCHull.calibrated`.

    Examples
    --------
    >>> iso = IsotonicCalibrator().fit([1, 2, 3, 4], ["a", "b", "a", "b"])
    >>> iso.predict_proba([1, 2.5, 4])[:, 1]  # P("b"): 0 at 1, 1/2 for 2 and 3, 1 at 4
    array([0. , 0.5, 1. ])
    """

    def __init__(self) -> None:
        pass

    def _fit_one(self, score: np.ndarray, positive: np.ndarray) -> Any:
        from scipy.optimize import isotonic_regression  # scipy.optimize is slow to import

        x, inverse = np.unique(score, return_inverse=True)
        weights = np.bincount(inverse.ravel(), minlength=x.size).astype(float)
        means = np.bincount(inverse.ravel(), weights=positive, minlength=x.size) / weights
        return x, isotonic_regression(means, weights=weights, increasing=True).x

    def _predict_one(self, params: Any, score: np.ndarray) -> np.ndarray:
        x, fitted = params
        return np.interp(score, x, fitted)


class PlattCalibrator(_OneVsRest):
    """Platt scaling: ``P(class | s) = expit(a s + b)``, fitted by maximum likelihood.

    Parameters
    ----------
    ridge : float, default 1e-6
        Ridge penalty ``ridge / 2 * (a * sd)^2`` on the slope per standard deviation
        ``sd`` of the calibration scores: scikit-learn's ``1 / C`` for a logistic
        regression on the standardised scores. It keeps the slope finite when the
        calibration set is separable and is otherwise negligible, whatever the scores'
        units: an affine change of the scores changes ``coef_``, not the probabilities.
        (A ridge on the raw slope shrank it threefold for scores of magnitude 1e-4,
        p = 0.67 where 0.91 is right, and to nothing at 1e-6.)

    Attributes
    ----------
    coef_ : ndarray
        ``(a, b)`` for two classes, ``(classes, 2)`` for one-vs-rest, on the scores'
        own scale.

    Examples
    --------
    The fit does not depend on the scores' units:

    >>> scores, labels = [-2.0, -1.0, 0.5, 1.0, 2.0, 3.0], [0, 0, 1, 0, 1, 1]
    >>> p = PlattCalibrator().fit(scores, labels).predict_proba([1.5])
    >>> tiny = PlattCalibrator().fit(np.multiply(scores, 1e-6), labels)
    >>> bool(np.allclose(tiny.predict_proba([1.5e-6]), p, rtol=1e-9))
    True
    """

    def __init__(self, *, ridge: float = 1e-6) -> None:
        self.ridge = ridge

    def _fit_one(self, score: np.ndarray, positive: np.ndarray) -> Any:
        number = isinstance(self.ridge, int | float | np.number) and not isinstance(
            self.ridge, bool
        )
        if not (number and np.isfinite(self.ridge) and self.ridge > 0):
            raise ValueError(f"ridge must be a positive number, found {self.ridge!r}")
        # fitted on z = (s - centre) / sd, the ridge on z's slope; divided by the largest
        # magnitude first, so that the standard deviation of scores near 1e200 or 1e-200
        # neither overflows nor underflows. Constant scores (sd 0) leave z = 0: the fit is
        # then the base rate, as it must be.
        peak = float(np.abs(score).max())
        unit = score / peak if peak > 0 else score
        centre, sd = float(np.mean(unit)), float(np.std(unit))
        z = (unit - centre) / sd if sd > 0 else np.zeros_like(unit)
        slope_z, intercept = _logistic_newton(z[:, None], positive, float(self.ridge))
        if sd == 0:
            return np.array([0.0, intercept])
        with np.errstate(over="ignore"):
            slope = slope_z / sd / peak
        if not np.isfinite(slope):
            raise ValueError(
                f"scores span only {sd * peak:.3g} (standard deviation), too little for a "
                f"finite slope in float64 (the fitted slope per standard deviation is "
                f"{slope_z:.3g}); multiply the scores by a constant, which leaves Platt "
                "scaling's probabilities unchanged"
            )
        return np.array([slope, intercept - slope_z * centre / sd])

    def _predict_one(self, params: Any, score: np.ndarray) -> np.ndarray:
        return expit(params[0] * score + params[1])

    @property
    def coef_(self) -> np.ndarray:
        """Slope and intercept per binary fit."""
        return self.params_[0] if len(self.params_) == 1 else np.array(self.params_)


class BetaCalibrator(_OneVsRest):
    """Beta calibration: ``logit P = a log s - b log(1 - s) + c`` with ``a, b >= 0``.

    The three-parameter ("abm") model of Kull, Silva Filho and Flach (2017), fitted
    as their reference implementation does: an (almost) unpenalised logistic
    regression on the features ``log s`` and ``-log(1 - s)``; if ``a`` comes out
    negative the fit is redone without ``log s`` (``a = 0``), else if ``b`` does,
    without ``-log(1 - s)``.

    Parameters
    ----------
    scale : {"probability", "logit"}, default "probability"
        ``"probability"``: scores are probabilities ``s`` in [0, 1], clipped to
        ``[eps, 1 - eps]``; ``"logit"``: scores are logits ``z = logit s`` on the real
        line, and the features are computed from ``z`` exactly, ``log s =
        -log(1 + exp(-z))`` and ``-log(1 - s) = log(1 + exp(z))``, without a clip, so
        that scores beyond +-20 (where ``expit`` rounds to 0 or 1) keep their order.
    eps : float, default 1e-9
        With ``scale="probability"``, the clip, so that ``log s`` and ``log(1 - s)``
        stay finite for probabilities exactly 0 or 1; unused with ``scale="logit"``.

    Attributes
    ----------
    coef_ : ndarray
        ``(a, b, c)`` for two classes, ``(classes, 3)`` for one-vs-rest.

    Examples
    --------
    Scores that are already calibrated probabilities give ``a = b = 1, c = 0``:

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> s = rng.uniform(0.01, 0.99, 20_000)
    >>> labels = (rng.random(20_000) < s).astype(int)
    >>> BetaCalibrator().fit(s, labels).coef_.round(1)
    array([ 1.,  1., -0.])
    """

    def __init__(self, *, scale: str = "probability", eps: float = 1e-9) -> None:
        self.scale = scale
        self.eps = eps

    def _features(self, score: np.ndarray) -> np.ndarray:
        if self.scale == "logit":
            # log s and -log(1 - s) straight from the logit: through expit(z), every z
            # beyond about +-20.7 rounded to s = 0 or 1 and the clip then gave them all one
            # value, erasing their order (scores 22, 30 and 38 all calibrated to 0.6)
            return np.column_stack([-np.logaddexp(0.0, -score), np.logaddexp(0.0, score)])
        if self.scale != "probability":
            raise ValueError(f"scale must be 'probability' or 'logit', found {self.scale!r}")
        if (score < 0).any() or (score > 1).any():
            raise ValueError(
                "scores must lie in [0, 1] with scale='probability', found "
                f"[{score.min()}, {score.max()}]; use scale='logit' for real-valued scores"
            )
        # the clip keeps log s and log(1 - s) finite for probabilities exactly 0 or 1
        s = np.clip(score, self.eps, 1 - self.eps)
        return np.column_stack([np.log(s), -np.log1p(-s)])

    def _fit_one(self, score: np.ndarray, positive: np.ndarray) -> Any:
        if not (np.isscalar(self.eps) and 0 < self.eps < 0.5):
            raise ValueError(f"eps must be a number in (0, 0.5), found {self.eps!r}")
        x = self._features(score)
        ridge = 1e-11  # betacal's LogisticRegression(C=99999999999)
        a, b, c = _logistic_newton(x, positive, ridge)
        if a < 0:
            b, c = _logistic_newton(x[:, 1:], positive, ridge)
            a = 0.0
        elif b < 0:
            a, c = _logistic_newton(x[:, :1], positive, ridge)
            b = 0.0
        return np.array([a, b, c])

    def _predict_one(self, params: Any, score: np.ndarray) -> np.ndarray:
        x = self._features(score)
        return expit(x @ params[:2] + params[2])

    @property
    def coef_(self) -> np.ndarray:
        """``(a, b, c)`` per binary fit."""
        return self.params_[0] if len(self.params_) == 1 else np.array(self.params_)


class TemperatureCalibrator(_Calibrator):
    """Temperature scaling: ``softmax(logits / T)``, ``T`` by maximum likelihood.

    With two classes and 1-D scores the logits are ``(0, s)``, so
    ``P(classes_[1] | s) = expit(s / T)``.

    ``T`` is the exact maximiser of the likelihood, found without a fixed search range:
    the fitted ``T`` scales with the logits' units (logits multiplied by ``k`` give
    ``k T`` and the same probabilities), from about 1e-300 to 1e300. A declared class
    (``classes=``) with no calibration items is allowed. The likelihood has no maximum
    at a finite, positive ``T`` when

    * every item's largest logit is its own class's (ties included): the scores
      separate the calibration set and the likelihood keeps improving as ``T -> 0``;
    * on average an item's own class's logit is not above its mean logit (e.g. items
      of a single class, each with its logit below the other class's): the scores carry
      no evidence and the likelihood keeps improving as ``T -> infinity``, towards
      uniform probabilities.

    In these cases (and when the maximum is finite but ``T`` lies beyond float64's range)
    the likelihood is largest in a limit, and ``fit`` returns that limit with a
    ``UserWarning``: ``temperature_`` 0 (predictions the argmax, probabilities 0 and 1,
    ties shared) or ``inf`` (uniform predictions).

    Attributes
    ----------
    temperature_ : float
        On the logits' own scale.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(2)
    >>> labels = rng.integers(0, 2, 5000)
    >>> logits = 4.0 * (2 * labels - 1 + rng.normal(size=5000))  # twice too confident
    >>> round(TemperatureCalibrator().fit(logits, labels).temperature_, 1)
    2.0
    """

    def __init__(self) -> None:
        pass

    @staticmethod
    def _logits(s: np.ndarray) -> np.ndarray:
        return np.column_stack([np.zeros_like(s), s]) if s.ndim == 1 else s

    def fit(self, scores: Any, true_classes: Any, *, classes: Any = None) -> TemperatureCalibrator:
        """Fit on calibration logits and their true classes; returns ``self``.

        Warns (``UserWarning``) and returns the limit ``T = 0`` or ``inf`` when the
        likelihood has no maximum at a finite, positive ``T`` (see the class's docstring).
        """
        from scipy.optimize import brentq  # scipy.optimize is slow to import

        s, index = self._fit_labels(scores, true_classes, classes)
        logits = self._logits(s)
        rows = np.arange(index.size)
        # The negative log-likelihood in the inverse temperature beta = 1 / T,
        # f(beta) = sum_i logsumexp(beta d_i) with d_i = logits_i - logits_i[class_i], is
        # convex; its slope f'(beta) = sum_i E_softmax(beta d_i)[d_i] rises from
        # sum_i mean(d_i) at beta = 0 to sum_i max(d_i) as beta -> infinity, so a finite
        # maximum-likelihood T exists exactly when the first is negative and the last
        # positive, and it is then the one root of f'. The logits are divided by their
        # largest magnitude first (and the differences by theirs), so that the search
        # starts near T = the logits' own scale and the fitted T scales with the logits'
        # units, from 1e-300 to 1e300, instead of meeting a fixed bracket.
        peak = float(np.abs(logits).max())
        unit = logits / peak if peak > 0 else logits
        d = unit - unit[rows, index][:, None]  # exactly 0 in each item's own column
        spread = float(np.abs(d).max())
        observed = np.unique(index).size
        alone = (
            f" (true_classes holds only {observed} of the {len(self.classes_)} classes)"
            if observed < len(self.classes_)
            else ""
        )
        if spread == 0 or float(d.mean(axis=1).sum()) >= 0:
            found = (
                "every item's logits are equal"
                if spread == 0
                else "on average an item's own class's logit is not above its mean logit"
            )
            return self._at_limit(
                np.inf,
                f"scores carry no evidence for true_classes{alone}: {found}, so the "
                "likelihood keeps improving as T -> infinity and is largest in that limit: "
                "temperature_ is inf and every prediction is uniform. Check that the score "
                "columns follow classes= (1-D scores are evidence for classes_[1]); "
                "temperature scaling has no intercept, so for scores that are not centred "
                "logits (probabilities, rare classes) use PlattCalibrator or BetaCalibrator",
            )
        if float(d.max()) <= 0:
            return self._at_limit(
                0.0,
                f"scores separate true_classes{alone}: every item's largest logit is its own "
                "class's, so the likelihood keeps improving as T -> 0 and is largest in that "
                "limit: temperature_ is 0 and every prediction is the argmax (probabilities "
                "0 and 1, ties shared). Calibrate on more held-out items, including some the "
                "scores get wrong, or use PlattCalibrator, whose ridge keeps the fit finite",
            )
        d /= spread

        def slope(log_beta: float) -> float:
            # f'(beta) as sum p_k d_k: each item's term keeps its relative precision even
            # where its probabilities are within rounding of 0 and 1
            p = softmax(np.exp(log_beta) * d, axis=1)
            return float(np.sum(p * d))

        # Widen a bracket on log beta from beta = 1 (T = the logits' scale) until f'
        # changes sign: up if f' < 0 there, down if not. The checks above guarantee a sign
        # change, but it may lie beyond what float64 represents.
        limit = 700.0  # exp(700) ~ 1e304
        toward = 1.0 if slope(0.0) < 0 else -1.0
        near, far, step = 0.0, toward, 1.0
        while toward * slope(far) < 0:
            if abs(far) >= limit:
                log_beta, relation = far, "below" if toward > 0 else "above"
                break
            step *= 2
            near, far = far, toward * min(abs(far) + step, limit)
        else:
            log_beta = brentq(
                slope, min(near, far), max(near, far), xtol=1e-14, rtol=4 * np.finfo(float).eps
            )
            with np.errstate(over="ignore"):
                t = peak * (spread * np.exp(-log_beta))
            if np.isfinite(t) and t > 0:
                self.temperature_ = float(t)
                return self
            relation = "about"
        exponent = (np.log(peak) + np.log(spread) - log_beta) / np.log(10)
        hint = "all but separate" if log_beta > 0 else "barely carry evidence for"
        limit_t = 0.0 if log_beta > 0 else np.inf
        return self._at_limit(
            limit_t,
            f"the maximum-likelihood T is {relation} 1e{exponent:.0f}, too far from the "
            f"logits' scale ({peak:.3g}) for float64: the scores {hint} true_classes, and "
            f"temperature_ is {limit_t}, the limit (argmax predictions at 0, uniform at "
            "inf); calibrate on more held-out items, or rescale the scores (T scales with "
            "them)",
        )

    def _at_limit(self, temperature: float, message: str) -> TemperatureCalibrator:
        """The fit when the likelihood is largest in a limit of T (0 or inf): that limit,
        whose predictions are well defined (:meth:`predict_proba`), said by a warning."""
        warnings.warn(message, UserWarning, stacklevel=3)
        self.temperature_ = float(temperature)
        return self

    def predict_proba(self, scores: Any) -> np.ndarray:
        """Class probabilities ``(items, classes)``, columns in ``classes_`` order."""
        s = self._check_scores(scores)
        logits = self._logits(s)
        if self.temperature_ == np.inf:  # the likelihood's limit when scores carry nothing
            return np.full(logits.shape, 1.0 / logits.shape[1])
        if self.temperature_ == 0:  # ... and when they separate: the argmax, ties shared
            top = logits == logits.max(axis=1, keepdims=True)
            return top / top.sum(axis=1, keepdims=True)
        return softmax(logits / self.temperature_, axis=1)
