"""Calibration data prepared for the transducer's Stan program (``stan/transducer.stan``).

The program models the pair (class, output) with a finite mixture of product kernels
(docs/theory.md section 3, docs/model.md). This module turns calibration items into the
plain arrays the program reads:

* :func:`merge_rows` merges identical (class, output) rows into one row with a count.
  The likelihood of a row is the same for every item sharing it, so this is exact, and
  it is what makes sampling fast on discrete outputs (vote fractions k/200 take ~90
  distinct values on thousands of items).
* :func:`detect_resolution` finds the lattice spacing of outputs recorded at a finite
  resolution, and :func:`resolution_bins` gives the bin of each value on the original
  scale; mapped through the output transform, the bins become the interval-censored
  observations the program uses for such dimensions.
* :func:`default_prior` scales the hyper-parameters to the data.
* :func:`build_stan_data` validates everything and assembles the data dictionary.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = [
    "INFINITY_SENTINEL",
    "build_stan_data",
    "default_prior",
    "detect_resolution",
    "initial_values",
    "merge_rows",
    "resolution_bins",
]

#: Smallest magnitude used in place of an infinite bin edge (both backends accept only
#: finite reals in data). It is raised to 1e6 times the largest finite bound if the data
#: are on a larger scale, so the Normal tail beyond it is below double precision.
INFINITY_SENTINEL = 1e12

#: Default prior constants (see :func:`default_prior` and docs/model.md).
MU_SCALE_FRACTION = 0.5
LOG_SIGMA_SCALE = 1.0
SIGMA_FRACTION = 0.25
ETA_SCALE = 2.0
ALPHA_CONCENTRATION = 1.0


def merge_rows(
    class_index: np.ndarray, outputs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge identical (class, output) rows, exactly.

    Parameters
    ----------
    class_index : (n,) int array
        Class of each item.
    outputs : (n,) or (n, D) float array
        Output of each item (any representation: raw values, or interval bounds
        stacked side by side). Rows are merged only when every entry is bit-for-bit
        equal (``-0.0`` counts as ``0.0``); infinities are allowed, NaN is not.

    Returns
    -------
    class_index_u : (m,) int array
    outputs_u : (m, D) float array
    counts : (m,) int array
        ``counts.sum() == n``. Rows come out sorted by class, then output.
    """
    cls = np.asarray(class_index)
    if cls.ndim != 1:
        raise ValueError(f"class_index must be one-dimensional, got shape {cls.shape}")
    integral = np.issubdtype(cls.dtype, np.integer) or np.all(np.equal(np.mod(cls, 1), 0))
    if cls.size and not integral:
        raise ValueError("class_index must hold integers")
    cls = cls.astype(np.int64)
    out = np.asarray(outputs, dtype=float)
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2 or out.shape[0] != cls.shape[0]:
        raise ValueError(
            f"outputs must have shape (n,) or (n, D) with n = {cls.shape[0]}, got {out.shape}"
        )
    if np.isnan(out).any():
        raise ValueError("outputs contain NaN")
    if cls.size == 0:
        return cls, out.copy(), np.zeros(0, dtype=np.int64)
    table = np.column_stack([cls.astype(float), out + 0.0])  # + 0.0 turns -0.0 into 0.0
    unique, counts = np.unique(table, axis=0, return_counts=True)
    return unique[:, 0].astype(np.int64), unique[:, 1:], counts.astype(np.int64)


def detect_resolution(
    values_1d: np.ndarray,
    *,
    min_repeats: float = 2.0,
    max_gap_factor: float = 50.0,
    rtol: float = 1e-6,
) -> float | None:
    """Lattice spacing ``h`` of outputs recorded at a finite resolution, or None.

    The rule (all conditions must hold, otherwise the output is treated as continuous
    and None is returned):

    1. at least two distinct finite values, and on average at least ``min_repeats``
       items per distinct value (``n / n_distinct >= min_repeats``): a discrete output
       repeats; a continuous one practically never does;
    2. ``h`` is the smallest gap between consecutive distinct values, and every distinct
       value lies on the lattice ``v_min + j h`` (integer ``j``, within ``rtol``);
    3. the lattice spanned by the values has at most ``max_gap_factor`` times as many
       points as there are distinct values (rules out "grids" that are only an
       accident of two close values).

    When ``1 / h`` is within ``rtol`` of an integer ``m`` (vote fractions k/200, scores
    in percent), ``h`` is snapped to exactly ``1 / m``.

    >>> detect_resolution(np.array([0, 1, 1, 3, 3, 3, 5, 0]) / 200)
    0.005
    >>> detect_resolution(np.random.default_rng(0).normal(size=100)) is None
    True
    """
    v = np.asarray(values_1d, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return None
    distinct = np.unique(v)
    if distinct.size < 2 or v.size / distinct.size < min_repeats:
        return None
    gaps = np.diff(distinct)
    h = float(gaps.min())
    if h <= 0:  # pragma: no cover - np.unique guarantees strictly increasing values
        return None
    steps = (distinct - distinct[0]) / h
    if not np.allclose(steps, np.round(steps), rtol=0.0, atol=rtol * max(1.0, steps[-1])):
        return None
    if steps[-1] + 1 > max_gap_factor * distinct.size:
        return None
    m = round(1.0 / h)
    if m >= 1 and abs(1.0 / h - m) <= rtol * m:
        h = 1.0 / m
    return h


def resolution_bins(
    values: np.ndarray,
    resolution: float,
    support: tuple[float, float] = (-np.inf, np.inf),
) -> tuple[np.ndarray, np.ndarray]:
    """Bins ``[v - h/2, v + h/2]`` of values recorded at resolution ``h``, clipped to support.

    On the original scale. For vote fractions (support (0, 1), ``h = 1/200``) the bin of
    an exact 0 is ``[0, 1/400]``, which the logit maps to ``(-inf, logit(1/400)]``: no
    squeezing of exact 0s and 1s is needed. Map both edges through the (increasing)
    output transform before :func:`build_stan_data`.
    """
    if not np.isfinite(resolution) or resolution <= 0:
        raise ValueError(f"resolution must be a positive number, got {resolution}")
    v = np.asarray(values, dtype=float)
    lo, hi = support
    lower = np.clip(v - resolution / 2, lo, hi)
    upper = np.clip(v + resolution / 2, lo, hi)
    return _shared_edges(lower, upper, resolution)


def _shared_edges(
    lower: np.ndarray, upper: np.ndarray, resolution: float
) -> tuple[np.ndarray, np.ndarray]:
    """Make adjacent bins share their common edge bit for bit.

    ``v + h/2`` of one lattice value and ``v' - h/2`` of the next are the same number
    in exact arithmetic but can differ by an ulp in floating point. Edges closer than
    ``1e-6 h`` (genuinely different edges are at least ``h`` apart) are replaced by the
    smallest of their cluster, so that the bins tile the line: the Stan program then
    evaluates one normal tail per shared edge (docs/model.md).
    """
    every = np.concatenate([lower.ravel(), upper.ravel()])
    every = np.unique(every[np.isfinite(every)])
    if every.size < 2:
        return lower, upper
    new_cluster = np.diff(every) > 1e-6 * resolution
    cluster = np.concatenate([[0], np.cumsum(new_cluster)])
    first = every[np.concatenate([[True], new_cluster])]

    def snap(x: np.ndarray) -> np.ndarray:
        finite = np.isfinite(x)
        out = x.copy()
        out[finite] = first[cluster[np.searchsorted(every, x[finite])]]
        return out

    return snap(lower), snap(upper)


def _as_bounds(
    lower: np.ndarray, upper: np.ndarray, censored: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    if lo.ndim == 1:
        lo = lo[:, None]
    if hi.ndim == 1:
        hi = hi[:, None]
    if lo.ndim != 2 or lo.shape != hi.shape:
        raise ValueError(f"lower and upper must both have shape (n, D); got {lo.shape}, {hi.shape}")
    d = lo.shape[1]
    cens = np.zeros(d, dtype=np.int64) if censored is None else np.asarray(censored).ravel()
    if cens.shape != (d,) or not np.isin(cens, (0, 1)).all():
        raise ValueError(f"censored must be a length-{d} array of 0/1 flags, got {cens!r}")
    cens = cens.astype(np.int64)
    if np.isnan(lo).any() or np.isnan(hi).any():
        raise ValueError("lower/upper contain NaN")
    point = cens == 0
    if point.any():
        if not np.array_equal(lo[:, point], hi[:, point]):
            raise ValueError("for a dimension that is not censored, lower must equal upper")
        if not np.isfinite(lo[:, point]).all():
            raise ValueError("point-valued (not censored) outputs must be finite")
    if (~point).any():
        lc, hc = lo[:, ~point], hi[:, ~point]
        if not (lc < hc).all():
            raise ValueError("for a censored dimension, every lower edge must be below its upper")
        if (lc == np.inf).any() or (hc == -np.inf).any():
            raise ValueError("a bin cannot start at +inf or end at -inf")
    return lo, hi, cens


def default_prior(
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray | None,
    n_components: int,
    counts: np.ndarray | None = None,
) -> dict[str, np.ndarray | float]:
    """Hyper-parameters scaled to the data (on the model, i.e. transformed, scale).

    For each output dimension ``d`` a representative value of each row is taken (the
    point value; for a bin, its midpoint, or its finite edge when the other edge is
    infinite; rows whose bin is the whole line carry no information). With ``q1``,
    ``q99`` the 1 % and 99 % quantiles of these values over items (rows weighted by
    ``counts``), ``centre = (q1 + q99) / 2`` and ``half = (q99 - q1) / 2`` (1 if zero):

    * ``mu_loc[d] = centre``, ``mu_scale[d] = half / 2``: component locations
      ``mu_kd ~ Normal(centre, half / 2)`` lie a priori inside the data's range (a wider
      scale let a component roam the flat inside of an open-ended bin; docs/model.md);
    * ``log_sigma_loc[d] = log(0.25 * half)``, ``log_sigma_scale[d] = 1``: kernel widths
      ``sigma_kd ~ LogNormal(log(half / 4), 1)`` (median an eighth of the data's range,
      95 % between 1/56 and 1.8 of the half-range). The density vanishes at 0 faster
      than any power of sigma, so no kernel can collapse onto a single repeated
      value, and it has no heavy tail towards 0 or infinity in log sigma (HMC friendly);
    * ``eta_scale = 2``: weights ``w = softmax(eta)``, ``eta_k ~ Normal(0, 2)``, a
      logistic-normal prior. It lets unneeded components fade (a spread of
      several units in eta is a weight ratio of e^4 or more) without the infinite density
      at the simplex boundary of a sparse Dirichlet(a0/K);
    * ``alpha_conc = 1``: each component's class probabilities ``alpha_k`` are uniform
      on the simplex a priori.

    ``n_components`` is accepted so the rule can depend on K; the current rule does not.
    """
    lo, hi, _ = _as_bounds(lower, upper, censored)
    if n_components < 1:
        raise ValueError("n_components must be at least 1")
    n, d = lo.shape
    weights = np.ones(n) if counts is None else np.asarray(counts, dtype=float).ravel()
    if weights.shape != (n,):
        raise ValueError("counts must have one entry per row")
    mu_loc = np.zeros(d)
    half = np.ones(d)
    reps = _representative(lo, hi)
    for j in range(d):
        rep = reps[:, j]
        keep = np.isfinite(rep)
        if not keep.any():
            continue
        q1, q99 = _weighted_quantiles(rep[keep], weights[keep], (0.01, 0.99))
        mu_loc[j] = 0.5 * (q1 + q99)
        half[j] = 0.5 * (q99 - q1) if q99 > q1 else 1.0
    return {
        "mu_loc": mu_loc,
        "mu_scale": MU_SCALE_FRACTION * half,
        "log_sigma_loc": np.log(SIGMA_FRACTION * half),
        "log_sigma_scale": np.full(d, LOG_SIGMA_SCALE),
        "eta_scale": ETA_SCALE,
        "alpha_conc": ALPHA_CONCENTRATION,
    }


def _representative(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A point per row and dimension: the value, a bin's midpoint, or its finite edge."""
    with np.errstate(invalid="ignore"):
        return np.where(
            np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), np.where(np.isfinite(lo), lo, hi)
        )


def initial_values(
    data: Mapping[str, object], chains: int, seed: int | None = None
) -> list[dict[str, object]]:
    """Starting points for the sampler, one per chain, spread over the data.

    The distinct rows are sorted along output dimension 1 and cut into K slices with
    equal numbers of rows; component ``k`` starts at the count-weighted mean of slice
    ``k``, with the class frequencies of its items, equal
    weights and prior-median widths, plus a small random jitter per chain. Every chain
    thus starts with all components on the data, rather than at random points that
    may leave components stranded far from it. Pass the result as ``init=``.
    """
    rng = np.random.default_rng(seed)
    k, c, d = int(data["K"]), int(data["C"]), int(data["D"])  # type: ignore[call-overload]
    lo = np.asarray(data["y_lower"], dtype=float).reshape(-1, d)
    hi = np.asarray(data["y_upper"], dtype=float).reshape(-1, d)
    finite_edge = INFINITY_SENTINEL * 0.999
    lo = np.where(lo <= -finite_edge, -np.inf, lo)
    hi = np.where(hi >= finite_edge, np.inf, hi)
    rep = _representative(lo, hi)
    cls = np.asarray(data["cls"], dtype=np.int64) - 1
    cnt = np.asarray(data["count"], dtype=float)
    loc = np.asarray(data["mu_loc"], dtype=float)
    scale = np.asarray(data["mu_scale"], dtype=float)
    raw = np.where(np.isfinite(rep), (rep - loc) / scale, 0.0)
    order = np.argsort(raw[:, 0], kind="stable")
    # slices of equal numbers of distinct rows (not items), so that components start
    # spread over the whole range of outputs rather than piled on the most common value
    cum = np.arange(1, order.size + 1) / order.size
    slot = np.minimum((cum * k - 1e-9).astype(int), k - 1)  # quantile slice of each row
    home = np.zeros((k, d))
    alpha = np.full((k, c), 1.0 / c)
    for j in range(k):
        rows = order[slot == j]
        if rows.size == 0:  # fewer distinct rows than components: borrow the nearest
            rows = order[[min(np.searchsorted(cum, (j + 0.5) / k), order.size - 1)]]
        weight = cnt[rows]
        home[j] = weight @ raw[rows] / weight.sum()
        alpha[j] = (np.bincount(cls[rows], weights=weight, minlength=c) + 1) / (weight.sum() + c)
    inits = []
    for _ in range(int(chains)):
        inits.append(
            {
                "eta": rng.normal(0.0, 0.1, k),
                "alpha": alpha,
                "mu_raw": home + rng.normal(0.0, 0.05, (k, d)),
                "sigma_raw": rng.normal(-0.5, 0.1, (k, d)),
            }
        )
    return inits


def _weighted_quantiles(
    values: np.ndarray, weights: np.ndarray, probs: tuple[float, ...]
) -> list[float]:
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    total = cum[-1]
    return [float(v[min(np.searchsorted(cum, p * total, side="left"), v.size - 1)]) for p in probs]


PRIOR_KEYS = ("mu_loc", "mu_scale", "log_sigma_loc", "log_sigma_scale", "eta_scale", "alpha_conc")


def build_stan_data(
    class_index: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray | None,
    n_classes: int,
    n_components: int,
    prior: Mapping[str, object] | None = None,
    counts: np.ndarray | None = None,
) -> dict[str, object]:
    """Data dictionary for ``stan/transducer.stan``, accepted by both backends.

    Parameters
    ----------
    class_index : (n,) int
        0-based class of each row (converted to Stan's 1-based indices here).
    lower, upper : (n, D) or (n,) float
        Bin edges on the model (transformed) scale; for a dimension that is not
        censored, ``lower == upper ==`` the point value. Infinite edges are allowed
        on censored dimensions and are sent as finite sentinels (:data:`INFINITY_SENTINEL`).
    censored : length-D 0/1 array, or None (no censoring)
    n_classes, n_components : int
    prior : mapping, optional
        Hyper-parameters (keys of :func:`default_prior`); missing keys take the
        defaults computed from these data.
    counts : (n,) int, optional
        Multiplicities of rows already merged. When None, identical rows are merged
        here (:func:`merge_rows`), so callers may pass one row per item.
    """
    cls = np.asarray(class_index)
    lo, hi, cens = _as_bounds(lower, upper, censored)
    n, d = lo.shape
    if cls.shape != (n,):
        raise ValueError(f"class_index must have shape ({n},), got {cls.shape}")
    if n == 0:
        raise ValueError("no calibration rows")
    if int(n_classes) < 2:
        raise ValueError("n_classes must be at least 2")
    if int(n_components) < 1:
        raise ValueError("n_components must be at least 1")
    if not np.all(np.equal(np.mod(cls, 1), 0)) or cls.min() < 0 or cls.max() >= n_classes:
        raise ValueError(f"class_index must hold integers in [0, {n_classes})")
    if counts is None:
        cls_u, bounds_u, cnt = merge_rows(cls, np.hstack([lo, hi]))
        lo_u, hi_u = bounds_u[:, :d], bounds_u[:, d:]
    else:
        cnt = np.asarray(counts)
        if cnt.shape != (n,) or (cnt < 1).any() or not np.all(np.equal(np.mod(cnt, 1), 0)):
            raise ValueError("counts must be positive integers, one per row")
        cls_u, lo_u, hi_u = cls.astype(np.int64), lo, hi
    full_prior = default_prior(lo_u, hi_u, cens, n_components, counts=cnt)
    if prior is not None:
        unknown = set(prior) - set(PRIOR_KEYS)
        if unknown:
            raise ValueError(f"unknown prior hyper-parameters: {sorted(unknown)}")
        full_prior.update(prior)
    finite = np.concatenate([lo_u[np.isfinite(lo_u)], hi_u[np.isfinite(hi_u)]])
    big = max(INFINITY_SENTINEL, 1e6 * float(np.abs(finite).max(initial=0.0)))
    data: dict[str, object] = {
        "N": int(cls_u.size),
        "C": int(n_classes),
        "D": int(d),
        "K": int(n_components),
        "cls": (cls_u + 1).astype(np.int64),
        "count": np.asarray(cnt, dtype=np.int64),
        "y_lower": np.where(np.isneginf(lo_u), -big, lo_u),
        "y_upper": np.where(np.isposinf(hi_u), big, hi_u),
        "censored": cens.astype(np.int64),
    }
    for key in ("mu_loc", "mu_scale", "log_sigma_loc", "log_sigma_scale"):
        value = np.asarray(full_prior[key], dtype=float).ravel()
        if value.shape != (d,) or not np.isfinite(value).all():
            raise ValueError(f"prior[{key!r}] must be {d} finite numbers")
        data[key] = value
    for key in ("eta_scale", "alpha_conc"):
        value = float(np.asarray(full_prior[key]))
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"prior[{key!r}] must be a positive number")
        data[key] = value
    if (data["mu_scale"] <= 0).any() or (data["log_sigma_scale"] <= 0).any():  # type: ignore[operator]
        raise ValueError("prior scales must be positive")
    return data
