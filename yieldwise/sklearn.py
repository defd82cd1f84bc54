"""A scikit-learn meta-estimator: an already-trained classifier, augmented (theory 2-3).

The idea: a classifier's outputs (``predict_proba`` "probabilities" or
``decision_function`` scores) are not the probabilities that a decision needs, and
its ``predict`` (argmax, or threshold 0.5) ignores what each decision is worth.
:class:`AugmentedClassifier` wraps a classifier that is **already trained** and
never trains it again. ``fit(X_calibration, y_calibration)`` runs the classifier on a
held-out calibration set (items it did not see in training), and learns the
probability transducer ``p(class | output)`` from those outputs and the true classes
with a :class:`yieldwise.Transducer`, a Bayesian mixture fitted by Stan. From then
on, for new items, ``predict_proba`` gives the transducer's probabilities and
``predict`` the decision of **maximum expected utility**
``argmax_i sum_c U[i, c] p(c | output)`` with the utility matrix ``U`` (rows:
decisions, which need not be the classes; columns: classes). ``score`` is the
utility yield, the average utility of those decisions.

Requires scikit-learn (``pip install yieldwise[sklearn]``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from ._validation import label_values, sorted_unique
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
        Trained beforehand and never refitted here: :meth:`fit` only calls its
        ``predict_proba`` or ``decision_function``. :func:`sklearn.base.clone`
        keeps this same trained estimator (shared, not copied), so that clones can
        be fitted, e.g. by ``cross_val_score``. Its own parameters are therefore not
        parameters of this wrapper: ``get_params(deep=True)`` does not list them and
        ``set_params(estimator__C=...)`` is refused (a ValueError), since changing them
        would retrain nothing and would change the user's shared estimator; to compare
        settings, train one estimator per setting and wrap each.
    utility : UtilityMatrix
        Utilities of each decision (rows) for each true class (columns). Its classes
        must be the calibration classes; its decisions may differ from them (e.g.
        a "re-test" decision).
    transducer : Transducer, optional
        An unfitted template: a :func:`sklearn.base.clone` of it is fitted, never the
        object itself. Default: ``Transducer()``.
    output : {"predict_proba", "decision_function"}
        Which output of the estimator the transducer learns from. For a binary
        ``predict_proba`` only the positive (second) column is used, the first
        being one minus it; otherwise all columns are used.
    prevalences : array-like or mapping, optional
        Deployment class frequencies when they differ from the calibration set's
        (generative mode, theory 3.2), in ``classes_`` order or keyed by class.

    Attributes
    ----------
    transducer_ : Transducer
        The fitted transducer.
    classes_ : numpy.ndarray
        Class labels, in the transducer's order (the columns of :meth:`predict_proba`): the
        estimator's own ``classes_`` (the order of its output columns), or the sorted
        calibration labels for an estimator without them.
    n_features_in_ : int
        Number of features of the calibration inputs (set when ``X`` has a 2-D shape).

    Examples
    --------
    >>> import warnings
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from yieldwise import Transducer, UtilityMatrix
    >>> from yieldwise.backends import SamplerWarning
    >>> from yieldwise.sklearn import AugmentedClassifier
    >>> from yieldwise.transducer import DiagnosticsWarning
    >>> X, y = make_classification(n_samples=900, weights=[0.8], random_state=0)
    >>> model = LogisticRegression().fit(X[:400], y[:400])  # trained elsewhere
    >>> utility = UtilityMatrix([[0, -10], [-1, 5]], decisions=["wait", "treat"],
    ...                         classes=[0, 1])
    >>> fast = Transducer(chains=2, warmup=300, draws=300, seed=1, progress=False)
    >>> augmented = AugmentedClassifier(model, utility, transducer=fast)
    >>> with warnings.catch_warnings():  # short runs warn about ESS by design
    ...     warnings.simplefilter("ignore", DiagnosticsWarning)
    ...     warnings.simplefilter("ignore", SamplerWarning)
    ...     augmented = augmented.fit(X[400:700], y[400:700])  # calibrates only
    >>> augmented.predict_proba(X[700:]).shape  # (items, classes)
    (200, 2)
    >>> list(augmented.expected_utility(X[700:]).columns)
    ['wait', 'treat']
    >>> augmented.predict(X[700:703])  # maximum expected utility
    array(['treat', 'wait', 'treat'], dtype='<U5')

    ``score`` is the utility yield; the model's own ``predict`` (argmax) yields less:

    >>> own = utility.values[model.predict(X[700:]), y[700:]].mean()
    >>> float(own), bool(augmented.score(X[700:], y[700:]) > own)
    (-0.09, True)
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

    def __sklearn_clone__(self) -> AugmentedClassifier:
        """Clone the parameters but keep the trained estimator itself.

        scikit-learn's default would clone ``estimator`` into an untrained copy, which
        this meta-estimator cannot use: :meth:`fit` never trains it.
        """
        new = super().__sklearn_clone__()
        new.estimator = self.estimator
        return new

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The parameters; with ``deep=True`` also the transducer template's
        (``transducer__draws``, ...), never the trained estimator's (see ``estimator``)."""
        params = super().get_params(deep=deep)
        return {k: v for k, v in params.items() if not k.startswith("estimator__")}

    def set_params(self, **params: Any) -> AugmentedClassifier:
        """Set parameters; ``estimator__*`` ones are refused (the estimator is trained and
        never refitted here, and shared with every clone)."""
        nested = sorted(k for k in params if k.startswith("estimator__"))
        if nested:
            raise ValueError(
                f"AugmentedClassifier cannot set {nested}: the wrapped estimator is already "
                "trained and is never refitted (fit only calibrates it), so changing its "
                "parameters would not change its outputs, and would change the user's own, "
                "shared estimator object so that it misreports how it was trained; train an "
                "estimator with these settings first and wrap it in its own "
                "AugmentedClassifier"
            )
        return super().set_params(**params)

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any) -> AugmentedClassifier:
        """Fit the transducer on the estimator's outputs for held-out calibration items.

        Parameters
        ----------
        X : array-like or DataFrame
            Calibration inputs, as the estimator accepts them; items it was not
            trained on.
        y : array-like of shape (n_items,)
            Their true classes; the set of labels must be the utility's classes.

        Returns
        -------
        AugmentedClassifier
            ``self``, fitted.

        Raises
        ------
        ValueError
            ``output`` is not one of the two methods, the estimator lacks it, or the
            labels of ``y`` are not the utility's classes.
        TypeError
            ``utility`` is not a ``UtilityMatrix`` or ``transducer`` not a ``Transducer``.
        sklearn.exceptions.NotFittedError
            The estimator is not trained.
        """
        self._check_setup()
        template = Transducer() if self.transducer is None else self.transducer
        if not isinstance(template, Transducer):
            raise TypeError(
                f"transducer must be a yieldwise Transducer or None, found "
                f"{type(template).__name__}"
            )
        labels = label_values(y, "y")  # 1-D, no missing labels (refused by position)
        classes = self._classes(labels)
        if set(self.utility.classes) != set(classes):
            raise ValueError(
                f"utility has classes {list(self.utility.classes)}, but the calibration "
                f"labels are {list(classes)}; the utility matrix needs one column per "
                "calibration class"
            )
        outputs = self._outputs(X)
        transducer = clone(template).fit(outputs, labels, class_labels=classes)
        if self.prevalences is not None:  # refuse bad ones now, not at the first prediction
            transducer.predict_proba(outputs[:1], prevalences=self.prevalences)
        self.transducer_ = transducer
        self.classes_ = np.asarray(transducer.classes_)
        shape = getattr(X, "shape", None)
        if shape is not None and len(shape) == 2:
            self.n_features_in_ = int(shape[1])
        return self

    # ------------------------------------------------------------ predict
    def predict_proba(self, X: Any) -> np.ndarray:
        """Transducer probabilities ``p(class | output)``.

        Parameters
        ----------
        X : array-like or DataFrame
            Inputs, as the estimator accepts them.

        Returns
        -------
        numpy.ndarray of shape (n_items, n_classes)
            Columns in ``classes_`` order; with ``prevalences`` set, at those
            deployment prevalences.
        """
        check_is_fitted(self, "transducer_")
        return self.transducer_.predict_proba(self._outputs(X), prevalences=self.prevalences)

    def expected_utility(self, X: Any, utility: Any = None) -> pd.DataFrame:
        """Expected utility of every decision for every item.

        Parameters
        ----------
        X : array-like or DataFrame
            Inputs, as the estimator accepts them.
        utility : UtilityMatrix, DataFrame or array-like, optional
            The ``utility`` parameter by default; another ``UtilityMatrix`` (or a
            DataFrame, rows decisions and columns classes) with the same classes
            (matched by label); or plain utilities, one matrix
            (decisions, classes) or per-item matrices (n_items, decisions, classes),
            with columns in ``classes_`` order and rows the ``utility`` parameter's
            decisions.

        Returns
        -------
        pandas.DataFrame
            Items x decisions (one column per decision label); indexed like ``X``
            when ``X`` is a DataFrame.
        """
        proba, chosen, decisions = self._prepare(X, utility)
        table = expected_utilities(proba, chosen, decisions=decisions)
        if isinstance(X, pd.DataFrame):
            table.index = X.index
        return table

    def predict(self, X: Any, utility: Any = None) -> np.ndarray:
        """Maximum-expected-utility decisions.

        Parameters
        ----------
        X : array-like or DataFrame
            Inputs, as the estimator accepts them.
        utility : UtilityMatrix or array-like, optional
            As in :meth:`expected_utility`; per-item utilities of shape
            (n_items, decisions, classes) let every item have its own matrix.

        Returns
        -------
        numpy.ndarray of shape (n_items,)
            The chosen decision label per item. Ties between decisions go to the
            first one, so that predictions are deterministic.
        """
        proba, chosen, decisions = self._prepare(X, utility)
        return decide(proba, chosen, tie="first", decisions=decisions)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Utility yield: the average utility of :meth:`predict`'s decisions.

        ``mean_n U[decision_n, y_n]`` with the ``utility`` parameter (weighted by
        ``sample_weight``). This replaces the accuracy of ``ClassifierMixin``,
        which is not admissible and means nothing when decisions are not classes;
        scikit-learn's model selection maximises it.

        Parameters
        ----------
        X : array-like or DataFrame
            Test inputs.
        y : array-like of shape (n_items,)
            Their true classes.
        sample_weight : array-like of shape (n_items,), optional
            Finite, non-negative weights, one per item, not all zero.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            ``y`` is not 1-D, has missing labels or labels that are not the utility's
            classes, or its length is not the number of items of ``X``; or
            ``sample_weight`` is not one finite, non-negative weight per item.
        TypeError
            ``sample_weight`` is not numbers.
        """
        truth = label_values(y, "y")
        decisions = self.predict(X)
        if len(truth) != len(decisions):
            raise ValueError(
                f"y has {len(truth)} labels, but X has {len(decisions)} items; give one true "
                "class per item of X"
            )
        weights = None if sample_weight is None else _weights(sample_weight, len(truth))
        frame = self.utility.to_frame()
        cols = frame.columns.get_indexer(pd.Index(truth.tolist(), dtype=object))
        if (cols < 0).any():
            unknown = sorted({str(label) for label in truth[cols < 0].tolist()})
            raise ValueError(
                f"y has labels {unknown} that are not classes of the utility matrix "
                f"{list(self.utility.classes)}"
            )
        rows = frame.index.get_indexer(pd.Index(decisions.tolist(), dtype=object))
        return float(np.average(self.utility.values[rows, cols], weights=weights))

    # ----------------------------------------------------------- internals
    def _prepare(self, X: Any, utility: Any) -> tuple[Any, Any, Any]:
        """Probabilities, utility and decision labels as :func:`yieldwise.decide` takes them."""
        check_is_fitted(self, "transducer_")
        chosen = self.utility if utility is None else utility
        if isinstance(chosen, pd.DataFrame):  # rows decisions, columns classes: by label
            chosen = UtilityMatrix(chosen)
        proba = self.predict_proba(X)
        if isinstance(chosen, UtilityMatrix):
            if set(chosen.classes) != set(self.classes_.tolist()):
                raise ValueError(
                    f"utility has classes {list(chosen.classes)}, but the fitted classifier "
                    f"has classes {self.classes_.tolist()}"
                )
            # A DataFrame's columns are matched to the utility's classes by label.
            return pd.DataFrame(proba, columns=list(self.classes_)), chosen, None
        n_decisions = len(self.utility.decisions)
        shape = np.shape(chosen)
        if len(shape) in (2, 3) and shape[-2] != n_decisions:
            raise ValueError(
                f"utility has {shape[-2]} decisions (rows), but the utility matrix "
                f"{list(self.utility.decisions)} has {n_decisions}; plain utilities share "
                "its decision labels: pass a UtilityMatrix to use other decisions"
            )
        return proba, chosen, self.utility.decisions

    def _check_setup(self) -> None:
        if self.output not in _OUTPUTS:
            raise ValueError(f"output must be one of {list(_OUTPUTS)}, found {self.output!r}")
        if not isinstance(self.utility, UtilityMatrix):
            raise TypeError(
                f"utility must be a yieldwise UtilityMatrix, found {type(self.utility).__name__}"
            )
        name = type(self.estimator).__name__
        try:
            check_is_fitted(self.estimator)
        except NotFittedError as exc:
            raise NotFittedError(
                f"estimator {name} is not fitted: it must be trained before wrapping in "
                "AugmentedClassifier, whose fit() only calibrates it on held-out items "
                "and never trains it"
            ) from exc
        if not hasattr(self.estimator, self.output):
            available = [o for o in _OUTPUTS if hasattr(self.estimator, o)]
            raise ValueError(
                f"estimator {name} has no method {self.output}(); output may be one of {available}"
            )

    def _classes(self, labels: np.ndarray) -> tuple[Any, ...]:
        """The classes in the order of the estimator's output columns: its ``classes_``
        (``predict_proba``'s and ``decision_function``'s columns follow them), else the
        sorted labels of ``y``. The transducer reads an output with one column per class by
        position (column ``j`` the output for class ``j``; a class reduction ranks them so),
        so the sorted labels would pair the columns with the wrong classes whenever the
        estimator orders them otherwise. ``labels`` come from ``label_values`` (no
        missing labels); labels that cannot be sorted (``0`` and ``"1"``) are refused
        only when the order must come from them."""
        own = getattr(self.estimator, "classes_", None)
        if own is None:
            return sorted_unique(
                labels,
                name="y",
                remedy="give the estimator a classes_ attribute (the order of its output columns)",
            )
        seen = sorted_unique(labels, name="y", fallback=True)  # first-seen if unsortable
        classes = tuple(np.asarray(own).tolist())
        if set(classes) != set(seen):
            name = type(self.estimator).__name__
            raise ValueError(
                f"the calibration labels {list(seen)} are not the classes of the estimator "
                f"{name}, {list(classes)} (its classes_, the order of its output columns); "
                "calibrate it on items of every class it outputs, and of no other"
            )
        return classes

    def _outputs(self, X: Any) -> np.ndarray:
        """The estimator's outputs: a 1-D score for binary problems, else one column each."""
        self._check_setup()
        values = np.asarray(getattr(self.estimator, self.output)(X), dtype=float)
        if self.output == "predict_proba" and values.ndim == 2 and values.shape[1] == 2:
            return values[:, 1]  # the first column is 1 minus the second
        return values


def _weights(sample_weight: Any, n_items: int) -> np.ndarray:
    """``sample_weight`` as floats: one finite, non-negative weight per item, not all 0."""
    if np.iscomplexobj(sample_weight):
        raise TypeError("sample_weight must be real numbers, found complex values")
    try:
        weights = np.asarray(sample_weight, dtype=float)
    except (TypeError, ValueError):
        found = np.asarray(sample_weight).dtype
        raise TypeError(
            f"sample_weight must be numbers, one per item, found dtype {found}"
        ) from None
    if weights.shape != (n_items,):
        raise ValueError(
            f"sample_weight must have one weight per item, shape ({n_items},), found shape "
            f"{weights.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(weights))
    if bad.size:
        raise ValueError(
            f"sample_weight must be finite, found {weights[bad[0]]} at position {bad[0]}; "
            "give every item a finite weight"
        )
    negative = np.flatnonzero(weights < 0)
    if negative.size:
        raise ValueError(
            f"sample_weight must be non-negative, found {weights[negative[0]]} at position "
            f"{negative[0]}"
        )
    if weights.sum() == 0:
        raise ValueError("sample_weight is zero for every item; at least one must be positive")
    return weights
