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
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from ._validation import check_positive_int
from .confusion import ConfusionMatrix
from .metrics import CONFUSION_METRICS, UndefinedMetricError
from .utility import UtilityMatrix, chart_matrices, in_chart_domain

__all__ = [
    "DEFAULT_ERROR_SD",
    "DEFAULT_METRICS",
    "UTILITY_PRIORS",
    "Admissibility",
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

DEFAULT_ERROR_SD: tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
"""Default standard deviations of the errors on the utility entries (theory 1.5 step 2)."""

UTILITY_PRIORS: tuple[str, ...] = ("uniform", "gaussian")
"""Named distributions of the true utility matrix (theory 1.5 step 1)."""

UtilityPrior = Literal["uniform", "gaussian"] | UtilityMatrix
MetricSpec = str | Callable[..., Any]
"""A metric name in ``CONFUSION_METRICS`` or a callable."""

# Standard deviation of each chart coordinate under the "gaussian" prior (theory 1.5).
_GAUSSIAN_SD = 1.0 / 3.0
# Fraction of the square [-1, 1]^2 covered by the admitted domain: area 3 out of 4.
_UNIFORM_ACCEPTANCE = 0.75
# Lower bound on the acceptance of the truncated Gaussian prior (it is about 0.99).
_GAUSSIAN_ACCEPTANCE = 0.9
# Pairs of classifiers simulated at once: 2**17 pairs keep every temporary array at
# 1-8 MB and the memory allocated by the audit near 70 MB, at no cost in speed
# (larger chunks are slower, smaller ones pay the Python overhead per chunk).
_DEFAULT_CHUNK = 2**17
_YIELD_LABEL = "utility_yield"


# ============================================================== 1.5: the audit
def _sample_chart_points(
    n: int, prior: str, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` chart points ``(x, y)`` from the named prior, by rejection in rounds.

    ``"uniform"`` is uniform over the admitted domain of theory 1.1;
    ``"gaussian"`` is ``N(0, 1/3)`` in each coordinate truncated to that domain.
    """
    x = np.empty(n)
    y = np.empty(n)
    filled = 0
    acceptance = _UNIFORM_ACCEPTANCE if prior == "uniform" else _GAUSSIAN_ACCEPTANCE
    while filled < n:
        need = n - filled
        # Oversample so that one round is almost always enough; surplus accepted
        # draws are dropped by position, which leaves the accepted ones i.i.d.
        size = int(need / acceptance * 1.05) + 32
        if prior == "uniform":
            candidates = rng.uniform(-1.0, 1.0, size=(2, size))
        else:
            candidates = rng.normal(0.0, _GAUSSIAN_SD, size=(2, size))
        keep = in_chart_domain(candidates[0], candidates[1])
        cx = candidates[0][keep][:need]
        cy = candidates[1][keep][:need]
        x[filled : filled + cx.size] = cx
        y[filled : filled + cy.size] = cy
        filled += cx.size
    return x, y


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


def _validate_prior(utility_prior: Any) -> str | np.ndarray:
    """A prior name, or the standard-form values of a fixed admitted binary matrix."""
    if isinstance(utility_prior, UtilityMatrix):
        if utility_prior.shape != (2, 2):
            raise ValueError(
                "utility_prior must be a binary (2x2) UtilityMatrix, found shape "
                f"{utility_prior.shape}"
            )
        u = utility_prior
        if set(u.decisions) == set(u.classes):
            u = u.reindex(decisions=list(u.classes))  # row k = "choose class k"
        values = u.standard().values
        for c in (0, 1):
            if values[c, c] < values[1 - c, c]:
                raise ValueError(
                    "utility_prior must be an admitted utility matrix (theory 1.1): in each "
                    "column the correct decision must be worth at least as much as the wrong "
                    f"one, found for class {u.classes[c]!r} U[{c},{c}] = {u.values[c, c]} < "
                    f"U[{1 - c},{c}] = {u.values[1 - c, c]}"
                )
        return np.array(values)
    if isinstance(utility_prior, str) and utility_prior in UTILITY_PRIORS:
        return utility_prior
    raise ValueError(
        f"utility_prior must be one of {list(UTILITY_PRIORS)} or a binary UtilityMatrix, "
        f"found {utility_prior!r}"
    )


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
    if isinstance(spec, str):
        try:
            return CONFUSION_METRICS[spec]
        except KeyError:
            raise ValueError(
                f"{where}: unknown metric name {spec!r}; available names are "
                f"{', '.join(sorted(CONFUSION_METRICS))}"
            ) from None
    if not callable(spec):
        raise TypeError(
            f"{where} must be a metric name (one of {', '.join(sorted(CONFUSION_METRICS))}) "
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
    metrics: MetricSpec | Iterable[MetricSpec] | Mapping[str, MetricSpec] = DEFAULT_METRICS,
    utility_prior: UtilityPrior = "uniform",
    error_sd: float | Iterable[float] = DEFAULT_ERROR_SD,
    n_pairs: int = 1_000_000,
    seed: int | np.random.Generator | np.random.SeedSequence | None = None,
    chunk_size: int = _DEFAULT_CHUNK,
) -> pd.DataFrame:
    """How often metrics rank pairs of binary classifiers wrongly (theory 1.5).

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

    Parameters
    ----------
    metrics : name, callable, or sequence or mapping of them, default DEFAULT_METRICS
        What to audit. A name is a key of
        :data:`yieldwise.metrics.CONFUSION_METRICS` (``"accuracy"``, ``"f1"``,
        ``"recall"``, ...). A metric function of this library that has a
        ``.batch`` form is called as ``.batch(confusion)``. Any other callable
        receives a read-only float array of shape ``(n, 2, 2)`` of normalised
        confusion matrices (rows decisions, columns classes, class 0 positive)
        and must return ``n`` scores, higher meaning better. A mapping
        ``{name: metric}`` sets the names used in the result.
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

        ``DataFrame.attrs`` records ``n_pairs``, ``utility_prior``, ``seed`` and
        ``chunk_size``.

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
    """
    scorers = _validate_metrics(metrics)
    prior = _validate_prior(utility_prior)
    sds = _validate_error_sd(error_sd)
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if not scorers and sds.size == 0:
        raise ValueError("nothing to audit: metrics and error_sd are both empty")
    rng = np.random.default_rng(seed)

    wrong_metric = np.zeros(len(scorers), dtype=np.int64)
    nan_metric = np.zeros(len(scorers), dtype=np.int64)
    wrong_yield = np.zeros(sds.size, dtype=np.int64)
    for start in range(0, n_pairs, chunk_size):
        m = min(chunk_size, n_pairs - start)
        # Step 1: the true utility matrices.
        if isinstance(prior, str):
            true_u = chart_matrices(*_sample_chart_points(m, prior, rng))
        else:
            true_u = np.broadcast_to(prior, (m, 2, 2))
        # Step 3: test sets and pairs of classifiers; rates[k] is (TPR1, TNR1, TPR2, TNR2)[k].
        f0 = rng.random(m)
        f1 = 1.0 - f0
        rates = rng.random((4, m))
        np.sqrt(rates, out=rates)
        rates *= 0.5
        rates += 0.5
        # Step 4: the truth, from the exact yield difference
        # (U00 - U10) dC00 + (U11 - U01) dC11, with dC10 = -dC00 and dC01 = -dC11.
        d00 = f0 * (rates[2] - rates[0])
        d11 = f1 * (rates[3] - rates[1])
        truth = np.sign(
            (true_u[:, 0, 0] - true_u[:, 1, 0]) * d00 + (true_u[:, 1, 1] - true_u[:, 0, 1]) * d11
        )
        # Steps 5-6 for the metrics: both classifiers' matrices in one (2m, 2, 2) array.
        if scorers:
            confusion = np.empty((2, m, 2, 2))
            for k in (0, 1):
                tpr, tnr = rates[2 * k], rates[2 * k + 1]
                np.multiply(f0, tpr, out=confusion[k, :, 0, 0])
                np.subtract(f0, confusion[k, :, 0, 0], out=confusion[k, :, 1, 0])
                np.multiply(f1, tnr, out=confusion[k, :, 1, 1])
                np.subtract(f1, confusion[k, :, 1, 1], out=confusion[k, :, 0, 1])
            confusion = confusion.reshape(2 * m, 2, 2)
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
            u = true_u if sd == 0 else _perturb(true_u, float(sd), rng)
            difference = (u[:, 0, 0] - u[:, 1, 0]) * d00 + (u[:, 1, 1] - u[:, 0, 1]) * d11
            wrong_yield[j] += _count_wrong(truth, difference)[0]

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
    }
    return result


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
    """

    admissible: bool
    x: float
    y: float
    max_angle_deviation: float
    reason: str
    n_points: int = 0

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
) -> Admissibility:
    """Test numerically whether a binary metric is admissible (theory 1.2).

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
    )
