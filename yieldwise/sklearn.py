"""A scikit-learn meta-estimator: an already-trained classifier, augmented (theory 2-3).

:class:`AugmentedClassifier` wraps a classifier that is **already trained**. ``fit`` does
not train it again: it runs the classifier on a held-out calibration set, learns the
probability transducer ``p(class | output)`` from those outputs with a
:class:`yieldwise.Transducer` (a Bayesian mixture fitted by Stan), and from then on
decides by maximum expected utility with the given utility matrix. Requires
scikit-learn (``pip install yieldwise[sklearn]``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .decision import decide, expected_utilities
from .transducer import Transducer
from .utility import UtilityMatrix

__all__ = ["AugmentedClassifier"]

_OUTPUTS = ("predict_proba", "decision_function")


class AugmentedClassifier(ClassifierMixin, BaseEstimator):
    """Maximum-expected-utility decisions from an already-trained classifier's outputs.

    Parameters
    ----------
    estimator : fitted scikit-learn classifier
        Trained beforehand and never refitted here.
    utility : UtilityMatrix
        Utilities of each decision (rows) for each true class (columns); the decisions
        may differ from the classes (e.g. a "re-test" decision).
    transducer : Transducer, optional
        An unfitted template (its settings are used; a clone is fitted). Default:
        ``Transducer()``.
    output : {"predict_proba", "decision_function"}
        Which output of the estimator the transducer learns from. For a binary
        ``predict_proba`` only the second column is used (the first is redundant).
    prevalences : array-like, optional
        Deployment class frequencies when they differ from the calibration set's
        (generative mode, theory 3.2).

    Attributes
    ----------
    transducer_ : Transducer
        The fitted transducer.
    classes_ : ndarray
        Class labels, in the transducer's order.
    n_features_in_ : int
        Number of features of the calibration inputs (when they have a shape).

    Examples
    --------
    >>> import warnings
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from yieldwise import Transducer, UtilityMatrix
    >>> from yieldwise.sklearn import AugmentedClassifier
    >>> X, y = make_classification(n_samples=900, weights=[0.8], random_state=0)
    >>> model = LogisticRegression().fit(X[:400], y[:400])  # trained elsewhere
    >>> utility = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"])
    >>> fast = Transducer(chains=2, warmup=300, draws=300, seed=1, progress=False)
    >>> augmented = AugmentedClassifier(model, utility, transducer=fast)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")  # short runs warn about ESS by design
    ...     augmented = augmented.fit(X[400:700], y[400:700])
    >>> decisions = augmented.predict(X[700:])
    >>> sorted(set(decisions)) == ["treat", "wait"]
    True
    """

    def __init__(
        self,
        estimator: Any,
        utility: UtilityMatrix,
        *,
        transducer: Transducer | None = None,
        output: str = "predict_proba",
        prevalences: Any = None,
    ) -> None:
        self.estimator = estimator
        self.utility = utility
        self.transducer = transducer
        self.output = output
        self.prevalences = prevalences

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any) -> AugmentedClassifier:
        """Fit the transducer on the estimator's outputs for calibration items ``X, y``.

        Returns
        -------
        AugmentedClassifier
            ``self``.
        """
        self._check_setup()
        template = Transducer() if self.transducer is None else self.transducer
        if not isinstance(template, Transducer):
            raise TypeError(
                f"transducer must be a yieldwise Transducer or None, found "
                f"{type(template).__name__}"
            )
        labels = np.asarray(y)
        classes = tuple(np.unique(labels).tolist())
        if set(self.utility.classes) != set(classes):
            raise ValueError(
                f"utility has classes {list(self.utility.classes)}, the calibration labels "
                f"{list(classes)}; the utility matrix needs one column per class"
            )
        outputs = self._outputs(X)
        self.transducer_ = clone(template).fit(outputs, labels, class_labels=classes)
        self.classes_ = np.asarray(self.transducer_.classes_)
        if hasattr(X, "shape") and len(X.shape) == 2:
            self.n_features_in_ = int(X.shape[1])
        return self

    # ------------------------------------------------------------ predict
    def predict_proba(self, X: Any) -> np.ndarray:
        """Transducer probabilities ``p(class | output)``, shape (items, classes)."""
        check_is_fitted(self, "transducer_")
        return self.transducer_.predict_proba(self._outputs(X), prevalences=self.prevalences)

    def expected_utility(self, X: Any, utility: Any = None) -> pd.DataFrame:
        """Expected utility of every decision for every item (items x decisions).

        ``utility``: the fitted matrix by default, another ``UtilityMatrix``, or
        per-item utilities of shape (items, decisions, classes) in ``classes_`` order.
        """
        proba, chosen = self._probabilities_for(X, utility)
        if isinstance(chosen, UtilityMatrix):
            return expected_utilities(proba, chosen)
        return expected_utilities(proba.to_numpy(), chosen, decisions=self.utility.decisions)

    def predict(self, X: Any, utility: Any = None) -> np.ndarray:
        """Maximum-expected-utility decisions (labels of the utility's decisions).

        Ties between decisions are broken by the first decision, so that predictions
        are deterministic.
        """
        proba, chosen = self._probabilities_for(X, utility)
        if isinstance(chosen, UtilityMatrix):
            return decide(proba, chosen, tie="first")
        return decide(proba.to_numpy(), chosen, tie="first", decisions=self.utility.decisions)

    # ----------------------------------------------------------- internals
    def _probabilities_for(self, X: Any, utility: Any) -> tuple[pd.DataFrame, Any]:
        check_is_fitted(self, "transducer_")
        chosen = self.utility if utility is None else utility
        if isinstance(chosen, UtilityMatrix) and set(chosen.classes) != set(self.classes_):
            raise ValueError(
                f"utility has classes {list(chosen.classes)}, the fitted classifier "
                f"{self.classes_.tolist()}"
            )
        proba = pd.DataFrame(self.predict_proba(X), columns=pd.Index(list(self.classes_)))
        return proba, chosen

    def _check_setup(self) -> None:
        if self.output not in _OUTPUTS:
            raise ValueError(f"output must be one of {list(_OUTPUTS)}, found {self.output!r}")
        if not isinstance(self.utility, UtilityMatrix):
            raise TypeError(
                f"utility must be a yieldwise UtilityMatrix, found {type(self.utility).__name__}"
            )
        name = type(self.estimator).__name__
        if not hasattr(self.estimator, self.output):
            raise ValueError(
                f"estimator {name} has no method {self.output}(); choose output="
                f"{[o for o in _OUTPUTS if hasattr(self.estimator, o)]}"
            )
        try:
            check_is_fitted(self.estimator)
        except NotFittedError as exc:
            raise NotFittedError(
                f"estimator {name} is not fitted: AugmentedClassifier wraps an already-"
                "trained classifier (train it first; fit() here only calibrates)"
            ) from exc

    def _outputs(self, X: Any) -> np.ndarray:
        """The estimator's outputs: a 1-D score for binary problems, else one column each."""
        self._check_setup()
        values = np.asarray(getattr(self.estimator, self.output)(X), dtype=float)
        if values.ndim == 2 and values.shape[1] == 2 and self.output == "predict_proba":
            return values[:, 1]  # the first column is 1 minus the second
        return values
