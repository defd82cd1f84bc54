"""Auditing classification metrics against utility yields (theory 1.2 and 1.5).

Two tools:

* :func:`rank_disagreement` -- the Monte Carlo of theory 1.5: how often does a
  metric (or a utility yield computed with a slightly wrong utility matrix)
  rank a pair of binary classifiers in the opposite order from the true
  utility yield?
* :func:`is_admissible` -- a numerical version of the criterion of theory 1.2:
  does a binary metric rank every pair of confusion matrices of a fixed test
  set as some utility matrix does?

Conventions are the package's: confusion matrices have rows = decisions and
columns = true classes, decision ``k`` means "choose class ``k``", and class 0
is the positive class.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from . import metrics as _m
from ._validation import check_positive_int
from .confusion import ConfusionMatrix
from .metrics import CONFUSION_METRICS, MetricInfo, UndefinedMetricError
from .utility import UtilityMatrix, admitted_entries, chart_matrices, sample_chart_points

__all__ = [
    "DEFAULT_ERROR_SD",
    "DEFAULT_METRICS",
    "DEFAULT_MULTICLASS_METRICS",
    "MULTICLASS_METRICS",
    "RATE_DISTRIBUTIONS",
    "UTILITY_PRIORS",
    "Admissibility",
    "auc_disagreement",
    "is_admissible",
    "rank_disagreement",
]

DEFAULT_METRICS: tuple[str, ...] = (
    "accuracy",
    "balanced_accuracy",
    "f1",
    "matthews",
    "precision",
    "fowlkes_mallows",
    "cohen_kappa",
    "preference_driven",
)
"""Metrics audited by default by :func:`rank_disagreement` (names in ``CONFUSION_METRICS``)."""


def _averaged(function: Callable[..., Any], label: str, why: str | None = None, **options: Any):
    """A named variant of a library metric with fixed options (``average=`` ...)."""

    def metric(confusion: ConfusionMatrix) -> float:
        return function(confusion, **options)

    def batch(counts: np.ndarray) -> np.ndarray:
        return function.batch(counts, **options)

    admissible = why is not None
    metric.__name__ = label
    metric.batch = batch  # type: ignore[attr-defined]
    metric.info = MetricInfo(  # type: ignore[attr-defined]
        label, admissible, why or function.admissibility, "confusion"
    )
    metric.admissible = admissible  # type: ignore[attr-defined]
    metric.admissibility = metric.info.admissibility  # type: ignore[attr-defined]
    return metric


MULTICLASS_METRICS: dict[str, Callable[..., Any]] = {
    "accuracy": _m.accuracy,
    "balanced_accuracy": _m.balanced_accuracy,
    "f1_macro": _averaged(_m.f1, "f1_macro", average="macro"),
    "f1_macro_harmonic": _averaged(_m.f1, "f1_macro_harmonic", average="macro", macro_f="harmonic"),
    "f1_micro": _averaged(
        _m.f1,
        "f1_micro",
        "With one decision per item among the classes, micro-F1 equals accuracy.",
        average="micro",
    ),
    "f1_weighted": _averaged(_m.f1, "f1_weighted", average="weighted"),
    "precision_macro": _averaged(_m.precision, "precision_macro", average="macro"),
    "recall_macro": _averaged(_m.recall, "recall_macro", average="macro"),
    "matthews": _m.matthews,
    "cohen_kappa": _m.cohen_kappa,
    "preference_driven": _m.preference_driven,
}
"""Metrics of any number of classes by name: the averaged variants of the one-vs-rest
metrics (``"f1_macro"``, ``"f1_macro_harmonic"``, ``"f1_micro"`` ...) and the metrics
that are multi-class already. Each is a function of a ConfusionMatrix with a ``.batch``
form; any of these names works in :func:`rank_disagreement` and :func:`is_admissible`."""

DEFAULT_MULTICLASS_METRICS: tuple[str, ...] = (
    "accuracy",
    "balanced_accuracy",
    "f1_macro",
    "f1_macro_harmonic",
    "f1_micro",
    "matthews",
    "cohen_kappa",
    "preference_driven",
)
"""Metrics audited by default on three or more classes (names in ``MULTICLASS_METRICS``)."""

RATE_DISTRIBUTIONS: tuple[str, ...] = ("linear", "uniform")
"""Named distributions of a simulated classifier's correct-decision rates (theory 1.5
step 3, generalised): on ``[1/C, 1]``, density rising linearly from 0 at chance
(``1/C + (1 - 1/C) sqrt(u)``, the theory's) or flat (``1/C + (1 - 1/C) u``)."""

DEFAULT_ERROR_SD: tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
"""Default standard deviations of the errors on the utility entries (theory 1.5 step 2)."""

UTILITY_PRIORS: tuple[str, ...] = ("uniform", "gaussian")
"""Named distributions of the true utility matrix (theory 1.5 step 1)."""

UtilityPrior = Literal["uniform", "gaussian"] | UtilityMatrix
MetricSpec = str | Callable[..., Any]
"""A metric name in ``CONFUSION_METRICS`` or a callable."""

# Pairs of classifiers simulated at once: 2**17 pairs keep every temporary array at
# 1-8 MB and the memory allocated by the audit near 70 MB, at no cost in speed
# (larger chunks are slower, smaller ones pay the Python overhead per chunk).
_DEFAULT_CHUNK = 2**17
_YIELD_LABEL = "utility_yield"


# ============================================================== 1.5: the audit
def _truncated_unit_normal(
    low_cdf: np.ndarray,
    high_cdf: np.ndarray,
    mean: np.ndarray,
    sd: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draws from ``N(mean, sd)`` truncated to [0, 1], given the CDF at both bounds."""
    v = low_cdf + rng.random(mean.shape) * (high_cdf - low_cdf)
    # ndtri(1.0) = inf can only happen with probability ~1e-16; clip keeps [0, 1] exact.
    return np.clip(mean + sd * ndtri(v), 0.0, 1.0)


def _perturb_column(
    correct: np.ndarray, wrong: np.ndarray, sd: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Truncated Gaussian errors on one column (theory 1.5 step 2).

    Returns ``(a, b)`` distributed as ``(correct + e1, wrong + e2)`` with ``e1, e2``
    independent ``N(0, sd)``, conditioned on ``a, b`` in [0, 1] and ``a >= b``.
    Each entry is drawn exactly from its Gaussian truncated to [0, 1] (inverse
    CDF); only the ordering is left to rejection. Since ``correct >= wrong``, ``a``
    is stochastically larger than ``b`` and each round accepts at least half.
    """
    n = correct.size
    bounds = []
    for mean in (correct, wrong):
        bounds.append((ndtr(-mean / sd), ndtr((1.0 - mean) / sd)))
    a = np.empty(n)
    b = np.empty(n)
    pending = np.arange(n)
    while pending.size:
        (la, ha), (lb, hb) = bounds
        na = _truncated_unit_normal(la, ha, correct, sd, rng)
        nb = _truncated_unit_normal(lb, hb, wrong, sd, rng)
        ok = na >= nb
        a[pending[ok]] = na[ok]
        b[pending[ok]] = nb[ok]
        rejected = ~ok
        pending = pending[rejected]
        bounds = [(lo[rejected], hi[rejected]) for lo, hi in bounds]
        correct = correct[rejected]
        wrong = wrong[rejected]
    return a, b


def _perturb(utilities: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Erroneous copies of admitted binary utility matrices (theory 1.5 step 2).

    Parameters
    ----------
    utilities : ndarray of shape (n, 2, 2)
        Matrices with entries in [0, 1] and, in each column, the correct
        decision (the diagonal) worth at least as much as the wrong one.
    sd : float
        Standard deviation of the independent Gaussian error on each entry.
    rng : numpy.random.Generator

    Returns
    -------
    ndarray of shape (n, 2, 2)
        A fresh array. The errors are truncated so that the constraints above
        still hold; ``sd == 0`` returns an exact copy.
    """
    out = np.array(utilities, dtype=float, copy=True)
    if sd == 0:
        return out
    for c in (0, 1):
        a, b = _perturb_column(out[:, c, c].copy(), out[:, 1 - c, c].copy(), sd, rng)
        out[:, c, c] = a
        out[:, 1 - c, c] = b
    return out


def _validate_prior(utility_prior: Any, n_classes: int = 2) -> str | np.ndarray:
    """A prior name, or the standard-form values of a fixed admitted square matrix."""
    k = n_classes
    if isinstance(utility_prior, UtilityMatrix):
        if utility_prior.shape != (k, k):
            kind = "a binary (2x2)" if k == 2 else f"a {k}x{k}"
            raise ValueError(
                f"utility_prior must be {kind} UtilityMatrix, found shape {utility_prior.shape}"
            )
        u = utility_prior
        if set(u.decisions) == set(u.classes):
            u = u.reindex(decisions=list(u.classes))  # row k = "choose class k"
        values = u.standard().values
        for c in range(k):
            for i in range(k):
                if values[c, c] < values[i, c]:
                    raise ValueError(
                        "utility_prior must be an admitted utility matrix (theory 1.1): in "
                        "each column the correct decision must be worth at least as much as "
                        f"the wrong one, found for class {u.classes[c]!r} U[{c},{c}] = "
                        f"{u.values[c, c]} < U[{i},{c}] = {u.values[i, c]}"
                    )
        return np.array(values)
    if isinstance(utility_prior, str) and utility_prior in UTILITY_PRIORS:
        if k > 2 and utility_prior != "uniform":
            raise ValueError(
                f"utility_prior {utility_prior!r} is a distribution over the binary chart; on "
                f"{k} classes use 'uniform' (i.i.d. uniform entries, each column's correct "
                "decision the largest) or a UtilityMatrix"
            )
        return utility_prior
    raise ValueError(
        f"utility_prior must be one of {list(UTILITY_PRIORS)} or a binary UtilityMatrix, "
        f"found {utility_prior!r}"
    )


def _validate_balance(class_balance: Any, n_classes: int) -> np.ndarray | None:
    """``None`` (Dirichlet(1, ..., 1), i.e. ``f0 ~ U(0, 1)`` for two classes) or fixed."""
    if class_balance is None:
        return None
    try:
        f = np.asarray(class_balance, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"class_balance must be None or {n_classes} class frequencies, found {class_balance!r}"
        ) from None
    if f.shape != (n_classes,) or not np.isfinite(f).all() or (f <= 0).any():
        raise ValueError(
            f"class_balance must hold {n_classes} positive class frequencies (class 0 first), "
            f"found {f.tolist()}"
        )
    if abs(f.sum() - 1) > 1e-9:
        raise ValueError(
            f"class_balance must sum to 1, found {f.tolist()} (sum {f.sum()}); divide by the "
            "sum if they are counts"
        )
    return f


def _validate_rates(rates: Any) -> Callable[[np.random.Generator, tuple, int], np.ndarray]:
    """A sampler ``(rng, shape, n_classes) -> correct-decision rates in [0, 1]``."""
    if isinstance(rates, str):
        if rates == "linear":
            return lambda rng, shape, k: 1 / k + (1 - 1 / k) * np.sqrt(rng.random(shape))
        if rates == "uniform":
            return lambda rng, shape, k: 1 / k + (1 - 1 / k) * rng.random(shape)
        raise ValueError(
            f"rates must be one of {list(RATE_DISTRIBUTIONS)} or a callable, found {rates!r}"
        )
    if not callable(rates):
        raise TypeError(
            f"rates must be one of {list(RATE_DISTRIBUTIONS)} or a callable (rng, shape) -> "
            f"rates, found {type(rates).__name__}"
        )

    def call(rng: np.random.Generator, shape: tuple, k: int) -> np.ndarray:
        out = np.asarray(rates(rng, shape), dtype=float)
        if out.shape != shape or not np.isfinite(out).all() or (out < 0).any() or (out > 1).any():
            raise ValueError(
                f"rates(rng, {shape}) must return an array of shape {shape} in [0, 1], found "
                f"shape {out.shape}"
            )
        return out

    return call


def _perturb_square(utilities: np.ndarray, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Erroneous copies of admitted ``C x C`` matrices (theory 1.5 step 2, any ``C``).

    Each entry gets an independent ``N(0, sd)`` error truncated to keep it in [0, 1]
    (drawn exactly, by the inverse CDF); each column is redrawn, as a whole, until its
    correct decision is again worth at least as much as every wrong one.
    """
    out = np.array(utilities, dtype=float, copy=True)
    if sd == 0:
        return out
    k = out.shape[1]
    for c in range(k):
        mean = out[:, :, c].copy()  # (n, k): column c of every matrix
        low, high = ndtr(-mean / sd), ndtr((1.0 - mean) / sd)
        pending = np.arange(len(out))
        while pending.size:
            draw = _truncated_unit_normal(low[pending], high[pending], mean[pending], sd, rng)
            ok = draw[:, c] >= draw.max(axis=1)
            out[pending[ok], :, c] = draw[ok]
            pending = pending[~ok]
    return out


def _validate_error_sd(error_sd: Any) -> np.ndarray:
    if isinstance(error_sd, (str, bytes)):
        raise TypeError(f"error_sd must be a number or a sequence of numbers, found {error_sd!r}")
    try:
        sds = np.atleast_1d(np.asarray(error_sd, dtype=float))
    except (TypeError, ValueError):
        raise TypeError(
            f"error_sd must be a number or a sequence of numbers, found {error_sd!r}"
        ) from None
    if sds.ndim != 1:
        raise ValueError(f"error_sd must be 1-dimensional, found shape {sds.shape}")
    bad = ~np.isfinite(sds) | (sds < 0)
    if bad.any():
        raise ValueError(
            f"error_sd must hold non-negative finite numbers, found {sds[bad].tolist()} "
            f"among {sds.tolist()}"
        )
    if np.unique(sds).size != sds.size:
        raise ValueError(f"error_sd must not repeat a value, found {sds.tolist()}")
    return sds


def _metric_name(function: Callable[..., Any]) -> str:
    info = getattr(function, "info", None)
    name = getattr(info, "name", None) or getattr(function, "__name__", None)
    return str(name) if name else repr(function)


def _resolve_metric(spec: Any, where: str) -> Callable[..., Any]:
    """A metric function from a name in ``CONFUSION_METRICS`` or a callable."""
    names = sorted({*CONFUSION_METRICS, *MULTICLASS_METRICS})
    if isinstance(spec, str):
        function = CONFUSION_METRICS.get(spec) or MULTICLASS_METRICS.get(spec)
        if function is None:
            raise ValueError(
                f"{where}: unknown metric name {spec!r}; available names are {', '.join(names)}"
            )
        return function
    if not callable(spec):
        raise TypeError(
            f"{where} must be a metric name (one of {', '.join(names)}) "
            f"or a callable, found {type(spec).__name__} {spec!r}"
        )
    return spec


def _validate_metrics(metrics: Any) -> list[tuple[str, Callable[[np.ndarray], Any]]]:
    """``(label, scorer)`` pairs; each scorer maps normalised ``(n, 2, 2)`` matrices to scores."""
    if isinstance(metrics, str) or callable(metrics):
        items: Iterable[tuple[str | None, Any]] = [(None, metrics)]
    elif isinstance(metrics, Mapping):
        items = [(str(k), v) for k, v in metrics.items()]
    else:
        try:
            items = [(None, m) for m in metrics]
        except TypeError:
            raise TypeError(
                "metrics must be a metric name, a callable, or a sequence or mapping of them, "
                f"found {type(metrics).__name__}"
            ) from None
    resolved = []
    for position, (label, spec) in enumerate(items):
        where = f"metrics[{label!r}]" if label is not None else f"metrics[{position}]"
        function = _resolve_metric(spec, where)
        if label is None:
            label = spec if isinstance(spec, str) else _metric_name(function)
        batch = getattr(function, "batch", None)
        scorer = batch if callable(batch) else function
        resolved.append((label, scorer))
    labels = [label for label, _ in resolved]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise ValueError(
            f"metrics has duplicated names {duplicated}; pass a mapping name -> metric to "
            "tell them apart"
        )
    if _YIELD_LABEL in labels:
        raise ValueError(
            f"metrics must not be named {_YIELD_LABEL!r}, which is the name of the rows for the "
            "erroneous utility matrices; rename it in a mapping name -> metric"
        )
    return resolved


def _scores(label: str, scorer: Callable[[np.ndarray], Any], confusion: np.ndarray) -> np.ndarray:
    n = confusion.shape[0]
    result = scorer(confusion)
    try:
        scores = np.asarray(result, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"metric {label!r} must return numbers, found {type(result).__name__}"
        ) from None
    if scores.shape != (n,):
        raise ValueError(
            f"metric {label!r} must return one score per confusion matrix: given an array of "
            f"shape {confusion.shape} it must return shape ({n},), found shape {scores.shape}"
        )
    return scores


def _count_wrong(truth_sign: np.ndarray, difference: np.ndarray) -> tuple[int, int]:
    """Pairs whose score difference has another sign than the truth, and how many are NaN."""
    wrong = np.sign(difference) != truth_sign  # NaN compares unequal: counted as wrong
    return int(np.count_nonzero(wrong)), int(np.count_nonzero(np.isnan(difference)))


def rank_disagreement(
    metrics: MetricSpec | Iterable[MetricSpec] | Mapping[str, MetricSpec] | None = None,
    utility_prior: UtilityPrior = "uniform",
    error_sd: float | Iterable[float] = DEFAULT_ERROR_SD,
    n_pairs: int = 1_000_000,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    chunk_size: int = _DEFAULT_CHUNK,
    *,
    n_classes: int = 2,
    class_balance: Any = None,
    rates: str | Callable[..., Any] = "linear",
) -> pd.DataFrame:
    """How often metrics rank pairs of classifiers wrongly (theory 1.5).

    For each of ``n_pairs`` simulated pairs of classifiers:

    1. draw a true binary utility matrix (from ``utility_prior``);
    2. for each ``sigma`` in ``error_sd``, draw an erroneous copy: every entry
       plus an independent ``N(0, sigma)`` error, truncated so that every entry
       stays in [0, 1] and, in each column, the correct decision keeps the
       higher utility (``sigma = 0`` gives the true matrix back);
    3. draw the class-0 proportion ``f0 ~ U(0, 1)`` and two classifiers whose
       true-positive and true-negative rates are ``0.5 + 0.5 sqrt(u)``,
       ``u ~ U(0, 1)``; class 0 is positive, so ``C00 = f0 TPR``,
       ``C10 = f0 (1 - TPR)``, ``C11 = f1 TNR``, ``C01 = f1 (1 - TNR)``;
    4. the truth is the sign of the true yield difference (second minus first);
    5. a metric, or the erroneous matrix's yield, ranks the pair wrongly when
       the sign of its score difference disagrees with the truth.

    With ``n_classes = C >= 3`` the same steps run on ``C x C`` matrices: the true
    matrix has i.i.d. uniform entries with each column's correct decision the
    largest (:func:`yieldwise.utility.sample_matrices`, prior ``"entries"``); the
    errors are truncated as in step 2, column by column; the class frequencies are
    Dirichlet(1, ..., 1) (for two classes that is ``f0 ~ U(0, 1)``); each classifier
    has, per class ``c``, a correct-decision rate ``r_c`` on ``[1/C, 1]`` (step 3's
    density, rising linearly from chance) and its errors ``1 - r_c`` split over the
    other decisions by a flat Dirichlet; ``C[i, c] = f_c P(decision i | class c)``.

    Parameters
    ----------
    metrics : name, callable, or sequence or mapping of them, optional
        What to audit; default :data:`DEFAULT_METRICS` for two classes and
        :data:`DEFAULT_MULTICLASS_METRICS` for more. A name is a key of
        :data:`yieldwise.metrics.CONFUSION_METRICS` (``"accuracy"``, ``"f1"``,
        ``"recall"``, ...) or of :data:`MULTICLASS_METRICS` (``"f1_macro"``,
        ``"f1_macro_harmonic"``, ``"f1_micro"``, ...). A metric function of this
        library that has a ``.batch`` form is called as ``.batch(confusion)``. Any
        other callable receives a read-only float array of shape ``(n, C, C)`` of
        normalised confusion matrices (rows decisions, columns classes, class 0
        positive when binary) and must return ``n`` scores, higher meaning better. A
        mapping ``{name: metric}`` sets the names used in the result.
    utility_prior : {"uniform", "gaussian"} or UtilityMatrix, default "uniform"
        Distribution of the true utility matrix: uniform over the admitted
        domain of the chart of theory 1.1, or a Gaussian in the chart
        coordinates centred at ``(0, 0)`` with standard deviation 1/3 in each,
        truncated to the domain. A binary :class:`~yieldwise.UtilityMatrix`
        (whose correct decisions are worth at least the wrong ones) fixes the
        true matrix to its standard form; decisions and classes are matched by
        label when they share labels, else row ``k`` means "choose class ``k``".
    error_sd : float or sequence of float, default (0, 0.05, ..., 0.3)
        Standard deviations ``sigma`` of the errors on the utility entries
        (the standard form's entries lie in [0, 1]). Non-negative, no repeats;
        may be empty to audit the metrics only.
    n_pairs : int, default 1_000_000
        Number of simulated pairs of classifiers.
    seed : int, Generator or SeedSequence, optional
        Passed to :func:`numpy.random.default_rng`. The same seed, ``n_pairs``,
        ``chunk_size`` and prior give identical results.
    chunk_size : int, default 131072
        Pairs simulated at once; bounds the memory (about 70 MB allocated at the
        default, whatever ``n_pairs``) without changing the distribution of the
        result, though a different ``chunk_size`` draws different numbers.
    n_classes : int, default 2
        Number of classes ``C`` (and decisions, decision ``k`` choosing class ``k``).
    class_balance : sequence of C frequencies, optional
        Fix the class frequencies of every simulated test set (say ``[0.5, 0.5]`` or
        ``[0.9, 0.1]``, class 0 first) instead of drawing them (step 3).
    rates : {"linear", "uniform"} or callable, default "linear"
        Distribution of each classifier's correct-decision rates (TPR and TNR when
        binary) on ``[1/C, 1]``: density rising linearly from chance (theory 1.5) or
        flat; or a callable ``rates(rng, shape)`` returning rates in [0, 1].

    Returns
    -------
    pandas.DataFrame
        One row per metric, then one row named ``"utility_yield"`` per
        ``sigma``, with columns

        * ``metric`` -- the metric's name;
        * ``error_sd`` -- ``sigma`` for the ``"utility_yield"`` rows, NaN for the
          metrics (they do not use a utility matrix, so they do not depend on
          ``sigma``);
        * ``fraction_wrong`` -- fraction of pairs ranked wrongly;
        * ``mc_se`` -- its Monte Carlo standard error ``sqrt(p (1 - p) / n_pairs)``.

        ``DataFrame.attrs`` records ``n_pairs``, ``utility_prior``, ``seed``,
        ``chunk_size``, ``n_classes``, ``class_balance`` and ``rates``.

    Raises
    ------
    ValueError
        Unknown metric name, bad ``n_pairs``, ``chunk_size``, ``error_sd`` or
        ``utility_prior``, or a metric returning the wrong number of scores.
    TypeError
        A metric that is neither a name nor a callable.

    Warns
    -----
    RuntimeWarning
        When a metric returns NaN for some classifiers; those pairs count as
        ranked wrongly (a metric that cannot score a classifier cannot rank it).

    Notes
    -----
    An exact tie of scores counts as a wrong ranking when the truth is not a
    tie; with continuous rates ties have probability zero. Only the column
    differences ``U00 - U10`` and ``U11 - U01`` of a utility matrix matter for
    ranking, so yield differences are computed from them exactly.

    Examples
    --------
    With the identity as true matrix the utility yield is accuracy, which then
    never ranks wrongly, and neither does the yield of the exact matrix:

    >>> from yieldwise import UtilityMatrix
    >>> from yieldwise.audit import rank_disagreement
    >>> identity = UtilityMatrix([[1, 0], [0, 1]])
    >>> rank_disagreement(["accuracy"], identity, error_sd=[0], n_pairs=1000, seed=1)
              metric  error_sd  fraction_wrong  mc_se
    0       accuracy       NaN             0.0    0.0
    1  utility_yield       0.0             0.0    0.0

    Inadmissible metrics rank some pairs wrongly under every utility matrix:

    >>> result = rank_disagreement(["f1"], error_sd=[], n_pairs=20_000, seed=1)
    >>> bool(result.fraction_wrong.iloc[0] > 0.05)
    True

    On three classes micro-F1 is accuracy (one decision per item), macro-F1 is not:

    >>> result = rank_disagreement(["accuracy", "f1_micro", "f1_macro"], error_sd=[],
    ...                            n_pairs=20_000, seed=1, n_classes=3)
    >>> result.set_index("metric").fraction_wrong.round(3).tolist()
    [0.136, 0.136, 0.155]
    """
    k = _check_n_classes(n_classes)
    if metrics is None:
        metrics = DEFAULT_METRICS if k == 2 else DEFAULT_MULTICLASS_METRICS
    scorers = _validate_metrics(metrics)
    prior = _validate_prior(utility_prior, k)
    balance = _validate_balance(class_balance, k)
    sample_rates = _validate_rates(rates)
    sds = _validate_error_sd(error_sd)
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if not scorers and sds.size == 0:
        raise ValueError("nothing to audit: metrics and error_sd are both empty")
    rng = np.random.default_rng(seed)
    chunk = _binary_chunk if k == 2 else _square_chunk
    perturb = _perturb if k == 2 else _perturb_square

    wrong_metric = np.zeros(len(scorers), dtype=np.int64)
    nan_metric = np.zeros(len(scorers), dtype=np.int64)
    wrong_yield = np.zeros(sds.size, dtype=np.int64)
    for start in range(0, n_pairs, chunk_size):
        m = min(chunk_size, n_pairs - start)
        # Steps 1, 3 and 4: true matrices, test sets, pairs of classifiers, the truth.
        true_u, truth, confusion, yield_difference = chunk(
            m, k, prior, balance, sample_rates, rng, bool(scorers)
        )
        # Steps 5-6 for the metrics: both classifiers' matrices in one (2m, k, k) array.
        if scorers:
            confusion.setflags(write=False)
            for j, (label, scorer) in enumerate(scorers):
                scores = _scores(label, scorer, confusion)
                difference = np.subtract(scores[m:], scores[:m])
                wrong, nans = _count_wrong(truth, difference)
                wrong_metric[j] += wrong
                nan_metric[j] += nans
            del confusion
        # Steps 2, 5-6 for the erroneous utility matrices.
        for j, sd in enumerate(sds):
            u = true_u if sd == 0 else perturb(true_u, float(sd), rng)
            wrong_yield[j] += _count_wrong(truth, yield_difference(u))[0]

    for (label, _), nans in zip(scorers, nan_metric, strict=True):
        if nans:
            warnings.warn(
                f"metric {label!r} was undefined (NaN) for {nans} of {n_pairs} pairs of "
                "classifiers; they are counted as ranked wrongly",
                RuntimeWarning,
                stacklevel=2,
            )
    counts = np.concatenate([wrong_metric, wrong_yield])
    fraction = counts / n_pairs
    result = pd.DataFrame(
        {
            "metric": [label for label, _ in scorers] + [_YIELD_LABEL] * sds.size,
            "error_sd": np.concatenate([np.full(len(scorers), np.nan), sds]),
            "fraction_wrong": fraction,
            "mc_se": np.sqrt(fraction * (1.0 - fraction) / n_pairs),
        }
    )
    result.attrs = {
        "n_pairs": n_pairs,
        "utility_prior": prior if isinstance(prior, str) else prior.tolist(),
        "seed": seed if seed is None or isinstance(seed, int) else repr(seed),
        "chunk_size": chunk_size,
        "n_classes": k,
        "class_balance": None if balance is None else balance.tolist(),
        "rates": rates if isinstance(rates, str) else repr(rates),
    }
    return result


# A chunk of the audit: true matrices, the truth, the confusion matrices (or None) and
# the yield difference of the pair under any matrix.
_Chunk = tuple[np.ndarray, np.ndarray, np.ndarray | None, Callable[[np.ndarray], np.ndarray]]


def _check_n_classes(n_classes: Any) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer of at least 2, found {n_classes!r}")
    return int(n_classes)


def _binary_chunk(
    m: int,
    k: int,
    prior: Any,
    balance: np.ndarray | None,
    sample_rates: Callable,
    rng: np.random.Generator,
    with_confusion: bool,
) -> _Chunk:
    """Steps 1, 3, 4 of theory 1.5 for two classes (class 0 positive)."""
    if isinstance(prior, str):
        true_u = chart_matrices(*sample_chart_points(m, prior, rng))
    else:
        true_u = np.broadcast_to(prior, (m, 2, 2))
    f0 = rng.random(m) if balance is None else np.full(m, balance[0])
    f1 = 1.0 - f0
    # rates[j] is (TPR1, TNR1, TPR2, TNR2)[j]
    rates = sample_rates(rng, (4, m), 2)
    # The exact yield difference (U00 - U10) dC00 + (U11 - U01) dC11, with dC10 = -dC00
    # and dC01 = -dC11: only the column differences of a matrix matter.
    d00 = f0 * (rates[2] - rates[0])
    d11 = f1 * (rates[3] - rates[1])

    def yield_difference(u: np.ndarray) -> np.ndarray:
        return (u[:, 0, 0] - u[:, 1, 0]) * d00 + (u[:, 1, 1] - u[:, 0, 1]) * d11

    truth = np.sign(yield_difference(true_u))
    confusion = None
    if with_confusion:
        confusion = np.empty((2, m, 2, 2))
        for j in (0, 1):
            tpr, tnr = rates[2 * j], rates[2 * j + 1]
            np.multiply(f0, tpr, out=confusion[j, :, 0, 0])
            np.subtract(f0, confusion[j, :, 0, 0], out=confusion[j, :, 1, 0])
            np.multiply(f1, tnr, out=confusion[j, :, 1, 1])
            np.subtract(f1, confusion[j, :, 1, 1], out=confusion[j, :, 0, 1])
        confusion = confusion.reshape(2 * m, 2, 2)
    return true_u, truth, confusion, yield_difference


def _square_chunk(
    m: int,
    k: int,
    prior: Any,
    balance: np.ndarray | None,
    sample_rates: Callable,
    rng: np.random.Generator,
    with_confusion: bool,
) -> _Chunk:
    """Steps 1, 3, 4 of theory 1.5 generalised to ``k`` classes.

    True matrices: i.i.d. uniform entries, each column's correct decision the largest
    (or the fixed matrix). Class frequencies: Dirichlet(1, ..., 1) (or fixed). Each
    classifier: per class ``c`` a correct-decision rate ``r_c`` from ``sample_rates``
    and the errors ``1 - r_c`` split over the other decisions by a flat Dirichlet; the
    joint confusion matrix is ``C[i, c] = f_c P(decision i | class c)``.
    """
    if isinstance(prior, str):
        true_u = admitted_entries(m, k, rng)
    else:
        true_u = np.broadcast_to(prior, (m, k, k))
    f = rng.dirichlet(np.ones(k), size=m) if balance is None else np.broadcast_to(balance, (m, k))
    rows = np.arange(k)
    joint = np.empty((2, m, k, k))
    for j in (0, 1):
        correct = sample_rates(rng, (m, k), k)  # (m, class)
        split = rng.dirichlet(np.ones(k - 1), size=(m, k))  # (m, class, other decisions)
        for c in range(k):  # k is small; the work is vectorised over pairs
            others = rows[rows != c]
            joint[j, :, c, c] = correct[:, c]
            joint[j, :, others, c] = ((1 - correct[:, c])[:, None] * split[:, c, :]).T
        joint[j] *= f[:, None, :]
    d = joint[1] - joint[0]

    def yield_difference(u: np.ndarray) -> np.ndarray:
        return np.einsum("mij,mij->m", u, d)

    truth = np.sign(yield_difference(true_u))
    confusion = joint.reshape(2 * m, k, k) if with_confusion else None
    return true_u, truth, confusion, yield_difference


# ========================================================= 1.2: admissibility
@dataclass(frozen=True)
class Admissibility:
    """Outcome of :func:`is_admissible`; true in a boolean context when admissible.

    Attributes
    ----------
    admissible : bool
        Whether the metric ranks confusion matrices as a utility yield does.
    x, y : float
        When admissible, the unit direction ``(X, Y)`` of theory 1.2: the metric
        increases with ``X*C00 + Y*C11``, and ranks as any utility matrix with
        ``(U00 - U10) : (U11 - U01) = X : Y``. NaN when not admissible.
    max_angle_deviation : float
        Largest angle (radians) between the metric's gradient in ``(C00, C11)``
        at a grid point and the mean gradient direction; ``pi`` means opposite.
        NaN when no gradient could be measured.
    reason : str
        A human-readable explanation.
    n_points : int
        Grid points at which the metric was defined and its gradient measured.
    regrets : numpy.ndarray or None
        When admissible, a ``C x C`` array proportional to the regrets
        ``U[c, c] - U[i, c]`` of every utility matrix that ranks as the metric does
        (rows decisions, columns classes, zero diagonal, unit norm): for two classes
        ``[[0, y], [x, 0]]``. ``None`` when not admissible.
    """

    admissible: bool
    x: float
    y: float
    max_angle_deviation: float
    reason: str
    n_points: int = 0
    # derived from x, y (or the C x C gradient); left out of == so results compare
    regrets: np.ndarray | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return self.admissible


_F0_VALUES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
_TOTALS = (100.0, 10_000.0)
# Finite differences smaller than this fraction of the metric's values are rounding noise.
_FLAT_RTOL = 1e-12


def _evaluate(metric: Callable[..., Any], label: str, counts: np.ndarray) -> float:
    """``metric(ConfusionMatrix(counts))`` as a float, NaN where it is undefined."""
    cm = ConfusionMatrix(counts)
    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            value = metric(cm)
    except (UndefinedMetricError, ZeroDivisionError, FloatingPointError):
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"metric {label} must return a number for a ConfusionMatrix, found "
            f"{type(value).__name__} {value!r}"
        ) from None
    return number if math.isfinite(number) else math.nan


def is_admissible(
    metric: str | Callable[[ConfusionMatrix], float],
    *,
    n_grid: int = 5,
    tol: float = 1e-6,
    step: float = 1e-4,
    n_classes: int = 2,
    n_points: int = 10,
    seed: int = 0,
) -> Admissibility:
    """Test numerically whether a metric is admissible (theory 1.2), for any number of classes.

    On a fixed test set (total ``N`` and class frequencies ``f0, f1`` fixed) a
    confusion matrix is determined by ``C00`` and ``C11`` (``C10 = f0 - C00``,
    ``C01 = f1 - C11``). A metric ranks all confusion matrices as some utility
    matrix does if and only if it is an increasing function of
    ``X*C00 + Y*C11`` with ``X, Y`` constant -- independent of ``N``, ``f0`` and
    ``f1``. Equivalently its gradient in ``(C00, C11)`` points in one and the
    same direction ``(X, Y)`` everywhere. This function measures that
    gradient by central finite differences on an interior grid of
    ``(C00, C11)``, for ``f0 = 0.1, 0.2, ..., 0.9`` and ``N = 100`` and
    ``10000``, and compares the directions, sign included.

    Parameters
    ----------
    metric : callable or str
        A binary metric ``metric(confusion: ConfusionMatrix) -> float``, higher
        meaning better, or a name in :data:`yieldwise.metrics.CONFUSION_METRICS`.
        It receives matrices with decisions and classes ``(0, 1)``, class 0
        being the positive one, and fractional counts. Points where it raises
        :class:`~yieldwise.UndefinedMetricError` (or ``ZeroDivisionError``) or
        returns NaN/infinity are skipped.
    n_grid : int, default 5
        Grid points per axis: ``C00 = f0 (k + 0.5) / n_grid`` and likewise
        ``C11``, so the metric is called ``4 * n_grid**2 * 18`` times.
    tol : float, default 1e-6
        Largest angle (radians) between gradient directions still taken as the
        same. Raise it for metrics computed in low precision.
    step : float, default 1e-4
        Finite-difference step in ``C00`` and ``C11`` (the same for both, so that
        increasing transforms of a linear score keep their exact direction),
        relative to the smaller class frequency.
    n_classes : int, default 2
        ``C``. For ``C >= 3`` the same criterion is tested in the ``C (C - 1)``
        coordinates of a fixed test set, the off-diagonal entries ``C[i, c]`` (each
        column sums to its class frequency, so ``C[c, c] = f_c - sum_{i != c} C[i, c]``):
        a utility yield's gradient there is ``U[i, c] - U[c, c]`` everywhere. The
        metric is probed at ``n_points`` random interior confusion matrices
        (columns ``P(decision | class)`` from a Dirichlet(2, ..., 2)) for each of nine
        class balances (the uniform one and eight Dirichlet(2, ..., 2) draws) and
        ``N = 100`` and ``10000``; ``n_grid`` is not used. Names may be keys of
        :data:`MULTICLASS_METRICS` (``"f1_macro"`` ...); a library metric with a
        ``.batch`` form is evaluated in one vectorised call.
    n_points, seed : int
        Points per class balance and ``N`` (``C >= 3``), and the seed that draws them.

    Returns
    -------
    Admissibility
        ``admissible``, the direction ``(x, y)`` when admissible, the largest
        angular deviation and a ``reason``; true in a boolean context when
        admissible.

    Notes
    -----
    A metric whose gradient vanishes somewhere (a constant metric, or one with
    a plateau) ties confusion matrices that every utility matrix with
    ``X, Y > 0`` separates, and is reported as not admissible. A direction with
    a negative component is admissible in the sense of theory 1.2 but matches
    a utility matrix that rewards a wrong decision more than the correct one
    (say, an error rate used as a score); ``reason`` says so.

    Examples
    --------
    >>> from yieldwise.audit import is_admissible
    >>> result = is_admissible("accuracy")
    >>> bool(result), round(result.x, 6), round(result.y, 6)
    (True, 0.707107, 0.707107)
    >>> is_admissible("balanced_accuracy").admissible  # X/Y = f1/f0 varies
    False

    On three classes accuracy (and micro-F1, the same thing) is admissible, with equal
    regrets for every error; macro-F1 is not:

    >>> result = is_admissible("f1_micro", n_classes=3)
    >>> bool(result), result.regrets.round(4)[0].tolist()
    (True, [0.0, 0.4082, 0.4082])
    >>> is_admissible("f1_macro", n_classes=3).admissible
    False
    """
    if isinstance(metric, str):
        function = _resolve_metric(metric, "metric")
        label = repr(metric)
    elif callable(metric):
        function = metric
        label = repr(_metric_name(metric))
    else:
        raise TypeError(
            "metric must be a callable metric(confusion) -> float or a metric name (one of "
            f"{', '.join(sorted(CONFUSION_METRICS))}), found {type(metric).__name__} {metric!r}"
        )
    k = _check_n_classes(n_classes)
    if k > 2:
        for name, value, upper in (("tol", tol, math.pi), ("step", step, 0.1)):
            if not isinstance(value, int | float | np.floating) or not 0 < value < upper:
                raise ValueError(f"{name} must be a number in (0, {upper:.6g}), found {value!r}")
        n_points = check_positive_int(n_points, "n_points")
        return _is_admissible_square(function, label, k, float(tol), float(step), n_points, seed)
    if isinstance(n_grid, bool) or not isinstance(n_grid, int | np.integer) or n_grid < 2:
        raise ValueError(f"n_grid must be an integer of at least 2, found {n_grid!r}")
    for name, value, upper in (("tol", tol, math.pi), ("step", step, 0.5 / int(n_grid))):
        if not isinstance(value, int | float | np.floating) or not 0 < value < upper:
            raise ValueError(f"{name} must be a number in (0, {upper:.6g}), found {value!r}")

    fractions = (np.arange(int(n_grid)) + 0.5) / int(n_grid)
    gradients: list[tuple[float, float]] = []
    flat: list[bool] = []
    where: list[tuple[float, float, float, float]] = []
    n_undefined = 0
    for total in _TOTALS:
        for f0 in _F0_VALUES:
            f1 = 1.0 - f0
            h0 = h1 = step * min(f0, f1)
            for c00 in f0 * fractions:
                for c11 in f1 * fractions:
                    values = [
                        _evaluate(function, label, total * np.array([[a, f1 - b], [f0 - a, b]]))
                        for a, b in (
                            (c00 + h0, c11),
                            (c00 - h0, c11),
                            (c00, c11 + h1),
                            (c00, c11 - h1),
                        )
                    ]
                    if any(math.isnan(v) for v in values):
                        n_undefined += 1
                        continue
                    gradients.append(
                        ((values[0] - values[1]) / (2 * h0), (values[2] - values[3]) / (2 * h1))
                    )
                    # Differences within a few ulps of the values are no gradient at all.
                    resolution = _FLAT_RTOL * max(abs(v) for v in values)
                    flat.append(
                        abs(values[0] - values[1]) <= resolution
                        and abs(values[2] - values[3]) <= resolution
                    )
                    where.append((total, f0, c00, c11))

    n_total = len(_TOTALS) * len(_F0_VALUES) * int(n_grid) ** 2
    skipped = (
        f"; the metric was undefined at {n_undefined} of {n_total} grid points"
        if n_undefined
        else ""
    )
    if not gradients:
        return Admissibility(
            False,
            math.nan,
            math.nan,
            math.nan,
            f"the metric is undefined (error or NaN) at every one of the {n_total} grid points",
            0,
        )
    g = np.array(gradients)
    norms = np.hypot(g[:, 0], g[:, 1])
    flat_points = np.array(flat)
    if flat_points.all():
        return Admissibility(
            False,
            math.nan,
            math.nan,
            math.nan,
            "the metric is constant: it ranks every confusion matrix as equally good" + skipped,
            len(gradients),
        )
    units = g[~flat_points] / norms[~flat_points, None]
    mean = units.sum(axis=0)
    mean_norm = math.hypot(mean[0], mean[1])
    if mean_norm == 0:
        angles = np.full(units.shape[0], math.pi)
    else:
        mean /= mean_norm
        cross = units[:, 0] * mean[1] - units[:, 1] * mean[0]
        angles = np.arctan2(np.abs(cross), units @ mean)
    deviation = float(angles.max())
    if flat_points.any():
        total, f0, c00, c11 = where[int(np.flatnonzero(flat_points)[0])]
        return Admissibility(
            False,
            math.nan,
            math.nan,
            deviation,
            f"the metric's gradient vanishes at {int(flat_points.sum())} grid point(s) (first at "
            f"N = {total:g}, f0 = {f0:g}, C00 = {c00:.4g}, C11 = {c11:.4g}): it ties "
            "confusion matrices that utility yields separate" + skipped,
            len(gradients),
        )
    if deviation > tol:
        worst = int(np.argmax(angles))
        total, f0, c00, c11 = where[worst]
        return Admissibility(
            False,
            math.nan,
            math.nan,
            deviation,
            f"the direction of the metric's gradient in (C00, C11) changes by up to "
            f"{deviation:.3g} rad (tolerance {tol:g}): mean direction ({mean[0]:.4g}, "
            f"{mean[1]:.4g}), but ({units[worst, 0]:.4g}, {units[worst, 1]:.4g}) at N = "
            f"{total:g}, f0 = {f0:g}, C00 = {c00:.4g}, C11 = {c11:.4g}; no utility matrix "
            "ranks confusion matrices as it does" + skipped,
            len(gradients),
        )
    x, y = float(mean[0]), float(mean[1])
    note = (
        "; a negative component means the matching utility matrix rewards a wrong "
        "decision more than the correct one (is the metric lower-is-better?)"
        if min(x, y) < -tol
        else ""
    )
    return Admissibility(
        True,
        x,
        y,
        deviation,
        f"the metric's gradient in (C00, C11) points along (X, Y) = ({x:.6g}, {y:.6g}) at all "
        f"{len(gradients)} grid points within {deviation:.2g} rad, for every f0 and N: it ranks "
        f"as any utility matrix with (U00 - U10) : (U11 - U01) = X : Y" + note + skipped,
        len(gradients),
        np.array([[0.0, y], [x, 0.0]]),
    )


def _square_points(
    k: int, n_points: int, seed: int
) -> tuple[np.ndarray, list[tuple[float, np.ndarray]]]:
    """Interior normalised confusion matrices ``(P, k, k)`` and, per point, ``(N, f)``."""
    rng = np.random.default_rng(seed)
    balances = np.vstack([np.full(k, 1 / k), rng.dirichlet(np.full(k, 2.0), size=8)])
    points, where = [], []
    for total in _TOTALS:
        for f in balances:
            conditional = rng.dirichlet(np.full(k, 2.0), size=(n_points, k))  # (P, class, dec)
            points.append(np.swapaxes(conditional, 1, 2) * f[None, None, :])
            where.extend((total, f) for _ in range(n_points))
    return np.concatenate(points), where


def _is_admissible_square(
    function: Callable[..., Any], label: str, k: int, tol: float, step: float, n_points: int,
    seed: int,
) -> Admissibility:  # fmt: skip
    """The criterion of theory 1.2 in the off-diagonal coordinates of ``k`` classes."""
    base, where = _square_points(k, n_points, seed)
    totals = np.array([w[0] for w in where])
    off = [(i, c) for c in range(k) for i in range(k) if i != c]
    # moves: +h on C[i, c] and -h on C[c, c] (an item of class c decided i instead)
    h = step * base.min(axis=(1, 2))  # (P,): the entries stay positive
    moves = np.zeros((len(off), k, k))
    for m, (i, c) in enumerate(off):
        moves[m, i, c], moves[m, c, c] = 1.0, -1.0
    plus = base[:, None] + h[:, None, None, None] * moves[None]
    minus = base[:, None] - h[:, None, None, None] * moves[None]
    both = np.concatenate([plus, minus], axis=1) * totals[:, None, None, None]  # counts
    flat_counts = both.reshape(-1, k, k)
    batch = getattr(function, "batch", None)
    if callable(batch):
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.asarray(batch(flat_counts), dtype=float)
        values = np.where(np.isfinite(values), values, np.nan)
    else:
        values = np.array([_evaluate(function, label, c) for c in flat_counts])
    values = values.reshape(len(base), 2, len(off))
    defined = ~np.isnan(values).any(axis=(1, 2))
    n_total = len(base)
    skipped = (
        f"; the metric was undefined at {int((~defined).sum())} of {n_total} points"
        if not defined.all()
        else ""
    )
    if not defined.any():
        return Admissibility(
            False, math.nan, math.nan, math.nan,
            f"the metric is undefined (error or NaN) at every one of the {n_total} points", 0,
        )  # fmt: skip
    values, h_ok = values[defined], h[defined]
    gradients = (values[:, 0] - values[:, 1]) / (2 * h_ok[:, None])  # (P, moves)
    resolution = _FLAT_RTOL * np.abs(values).max(axis=(1, 2))
    flat = (np.abs(values[:, 0] - values[:, 1]) <= resolution[:, None]).all(axis=1)
    if flat.all():
        return Admissibility(
            False, math.nan, math.nan, math.nan,
            "the metric is constant: it ranks every confusion matrix as equally good" + skipped,
            int(defined.sum()),
        )  # fmt: skip
    # regret directions: minus the gradient (an error lowers a good metric)
    units = -gradients[~flat] / np.linalg.norm(gradients[~flat], axis=1, keepdims=True)
    mean = units.sum(axis=0)
    norm = np.linalg.norm(mean)
    if norm == 0:
        angles = np.full(len(units), math.pi)
    else:
        mean = mean / norm
        angles = np.arccos(np.clip(units @ mean, -1.0, 1.0))
        # arccos loses precision near 0: use the norm of the rejection there
        small = angles < 1e-4
        angles[small] = np.linalg.norm(units[small] - np.outer(units[small] @ mean, mean), axis=1)
    deviation = float(angles.max())
    points = where if defined.all() else [w for w, d in zip(where, defined, strict=True) if d]
    if flat.any():
        total, f = points[int(np.flatnonzero(flat)[0])]
        return Admissibility(
            False, math.nan, math.nan, deviation,
            f"the metric's gradient vanishes at {int(flat.sum())} point(s) (first at N = "
            f"{total:g}, class frequencies {np.round(f, 4).tolist()}): it ties confusion "
            "matrices that utility yields separate" + skipped,
            int(defined.sum()),
        )  # fmt: skip
    if deviation > tol:
        worst = int(np.argmax(angles))
        total, f = [p for p, fl in zip(points, flat, strict=True) if not fl][worst]
        return Admissibility(
            False, math.nan, math.nan, deviation,
            f"the direction of the metric's gradient in the {len(off)} off-diagonal "
            f"coordinates changes by up to {deviation:.3g} rad (tolerance {tol:g}; worst at N "
            f"= {total:g}, class frequencies {np.round(f, 4).tolist()}): no {k}x{k} utility "
            "matrix ranks confusion matrices as it does" + skipped,
            int(defined.sum()),
        )  # fmt: skip
    regrets = np.zeros((k, k))
    for m, (i, c) in enumerate(off):
        regrets[i, c] = mean[m]
    note = (
        "; a negative regret means the matching utility matrix rewards a wrong decision "
        "more than the correct one (is the metric lower-is-better?)"
        if mean.min() < -tol
        else ""
    )
    return Admissibility(
        True, math.nan, math.nan, deviation,
        f"the metric's gradient points in one direction at all {int(defined.sum())} points "
        f"within {deviation:.2g} rad, for every class balance and N: it ranks as any "
        f"{k}x{k} utility matrix whose regrets U[c,c] - U[i,c] are proportional to "
        f"{np.round(regrets, 4).tolist()}" + note + skipped,
        int(defined.sum()),
        regrets,
    )  # fmt: skip


# ========================================================= AUC, audited
def _binormal_best(u: np.ndarray, b: np.ndarray, mu: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Best ``g = A TPR - A' FPR`` over thresholds of binormal classifiers, vectorised.

    Negatives score ``N(0, 1)`` and positives ``N(mu, spread^2)``; deciding positive
    above ``t`` gives ``FPR = Phi(-t)`` and ``TPR = Phi((mu - t) / spread)``. With
    ``A = (U00 - U10) B`` and ``A' = (U11 - U01) (1 - B)`` (class 0 positive) the yield
    is ``g`` plus a constant shared by every classifier (theory 1.4). The stationary
    points solve ``(mu - t)^2 / (2 s^2) - t^2 / 2 = log(A / (s A'))``, a quadratic;
    the maximum is at one of them or at ``t = +-inf`` (``g = 0`` or ``A - A'``).
    """
    a_pos = (u[:, 0, 0] - u[:, 1, 0]) * b
    a_neg = (u[:, 1, 1] - u[:, 0, 1]) * (1 - b)
    s2 = spread * spread
    with np.errstate(divide="ignore", invalid="ignore"):
        rhs = np.log(a_pos / (spread * a_neg))
        qa = 1 / (2 * s2) - 0.5
        qb = -mu / s2
        qc = mu * mu / (2 * s2) - rhs
        disc = np.sqrt(qb * qb - 4 * qa * qc)
        linear = np.abs(qa) < 1e-12
        roots = np.stack([
            np.where(linear, -qc / qb, (-qb + disc) / (2 * qa)),
            np.where(linear, np.nan, (-qb - disc) / (2 * qa)),
        ])  # fmt: skip
    best = np.maximum(0.0, a_pos - a_neg)  # the endpoints: nothing or everything positive
    for t in roots:
        g = a_pos * ndtr((mu - t) / spread) - a_neg * ndtr(-t)
        best = np.where(np.isfinite(g), np.maximum(best, g), best)
    return best


def auc_disagreement(
    error_sd: float | Iterable[float] = DEFAULT_ERROR_SD,
    n_pairs: int = 200_000,
    utility_prior: UtilityPrior = "uniform",
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    *,
    class_balance: Any = None,
    rates: str | Callable[..., Any] = "linear",
    spread: tuple[float, float] = (0.5, 2.0),
    chunk_size: int = _DEFAULT_CHUNK,
) -> pd.DataFrame:
    """How often the area under the ROC curve ranks scoring classifiers wrongly (theory 1.5).

    AUC scores a *scoring* classifier, so the audit of :func:`rank_disagreement`
    is run on pairs of binormal scoring classifiers, each deployed at its own best
    threshold for the true utility matrix (theory 1.4):

    1. a true binary utility matrix from ``utility_prior`` and, per ``sigma``, an
       erroneous copy (as in :func:`rank_disagreement`);
    2. the class-0 (positive) share ``B ~ U(0, 1)`` or ``class_balance[0]``;
    3. each classifier: negatives score ``N(0, 1)``, positives ``N(mu, s^2)``, with
       ``s`` log-uniform on ``spread`` and ``mu`` set so that the ROC curve passes
       through a point ``(1 - TNR, TPR)`` drawn as in step 3 of theory 1.5
       (``mu = Phi^-1(TNR) + s Phi^-1(TPR)``); its ROC curve is
       ``TPR(f) = Phi((mu + Phi^-1(f)) / s)`` and ``AUC = Phi(mu / sqrt(1 + s^2))``;
    4. the truth is the sign of the difference of the two best yields
       (:func:`_binormal_best`, the exact optimum over thresholds);
    5. AUC ranks a pair wrongly when the sign of its difference disagrees; the
       erroneous matrix ranks wrongly when the difference of the best yields *it*
       sees does.

    With equal spreads (``spread=(1, 1)``) the curves never cross and AUC ranks wrongly
    only pairs whose best yields tie in floating point (a utility matrix under which
    both classifiers should decide "positive" for nearly everything, say); crossing
    curves are where it fails. A tie of the true best yields counts as ranked wrongly
    by any score that separates the pair, as in :func:`rank_disagreement`.

    Parameters
    ----------
    error_sd, n_pairs, utility_prior, seed, class_balance, rates, chunk_size
        As in :func:`rank_disagreement` (two classes).
    spread : (low, high), default (0.5, 2)
        Range of the positives' standard deviation ``s`` (log-uniform).

    Returns
    -------
    pandas.DataFrame
        The layout of :func:`rank_disagreement`: a ``"roc_auc"`` row, then one
        ``"utility_yield"`` row per ``sigma``.

    Examples
    --------
    >>> result = auc_disagreement(error_sd=[0.0], n_pairs=20_000, seed=3)
    >>> result[["metric", "error_sd", "fraction_wrong"]].round(3)
              metric  error_sd  fraction_wrong
    0        roc_auc       NaN            0.13
    1  utility_yield       0.0            0.00
    >>> nested = auc_disagreement(error_sd=[], n_pairs=20_000, seed=3, spread=(1, 1))
    >>> int(nested.fraction_wrong.iloc[0] * 20_000)  # one pair, whose best yields tie
    1
    """
    prior = _validate_prior(utility_prior, 2)
    balance = _validate_balance(class_balance, 2)
    sample_rates = _validate_rates(rates)
    sds = _validate_error_sd(error_sd)
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    try:
        low, high = (float(v) for v in spread)
    except (TypeError, ValueError):
        raise TypeError(f"spread must be a pair (low, high), found {spread!r}") from None
    if not 0 < low <= high or not np.isfinite(high):
        raise ValueError(f"spread must satisfy 0 < low <= high < inf, found {spread!r}")
    rng = np.random.default_rng(seed)
    wrong_auc = 0
    wrong_yield = np.zeros(sds.size, dtype=np.int64)
    for start in range(0, n_pairs, chunk_size):
        m = min(chunk_size, n_pairs - start)
        if isinstance(prior, str):
            true_u = chart_matrices(*sample_chart_points(m, prior, rng))
        else:
            true_u = np.broadcast_to(prior, (m, 2, 2))
        b = rng.random(m) if balance is None else np.full(m, balance[0])
        rates_ = sample_rates(rng, (4, m), 2)  # (TPR1, TNR1, TPR2, TNR2)
        s = np.exp(rng.uniform(np.log(low), np.log(high), size=(2, m)))
        mu = ndtri(rates_[1::2]) + s * ndtri(rates_[0::2])  # (2, m)
        auc = ndtr(mu / np.sqrt(1 + s * s))

        def gap(u: np.ndarray, mu: np.ndarray = mu, s: np.ndarray = s, b: np.ndarray = b):
            return _binormal_best(u, b, mu[1], s[1]) - _binormal_best(u, b, mu[0], s[0])

        truth = np.sign(gap(true_u))
        wrong_auc += _count_wrong(truth, auc[1] - auc[0])[0]
        for j, sd in enumerate(sds):
            u = true_u if sd == 0 else _perturb(true_u, float(sd), rng)
            wrong_yield[j] += _count_wrong(truth, gap(u))[0]
    fraction = np.r_[wrong_auc, wrong_yield] / n_pairs
    result = pd.DataFrame(
        {
            "metric": ["roc_auc"] + [_YIELD_LABEL] * sds.size,
            "error_sd": np.r_[np.nan, sds],
            "fraction_wrong": fraction,
            "mc_se": np.sqrt(fraction * (1.0 - fraction) / n_pairs),
        }
    )
    result.attrs = {
        "n_pairs": n_pairs,
        "utility_prior": prior if isinstance(prior, str) else prior.tolist(),
        "seed": seed if seed is None or isinstance(seed, int) else repr(seed),
        "class_balance": None if balance is None else balance.tolist(),
        "rates": rates if isinstance(rates, str) else repr(rates),
        "spread": (low, high),
    }
    return result
