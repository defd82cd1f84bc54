"""Calibration data prepared for the transducer's Stan program (``stan/transducer.stan``).

The program models the pair (class, output) with a finite mixture of fixed product kernels
and a smooth prior over their class log-odds (docs/theory.md section 3, docs/model.md).
This module turns calibration items into the plain arrays the program reads:

* :func:`merge_rows` merges identical (class, output) rows into one row with a count.
  The likelihood of a row is the same for every item sharing it, so this is exact, and
  it is what makes sampling fast on discrete outputs (vote fractions k/200 take ~90
  distinct values on thousands of items).
* :func:`detect_resolution` finds the lattice spacing of outputs recorded at a finite
  resolution, and :func:`resolution_bins` gives the bin of each value on the original
  scale; mapped through the output transform, the bins become the interval-censored
  observations the program uses for such dimensions.
* :func:`build_stan_data` validates everything, places the kernels
  (:mod:`yieldwise._design`), computes every row's kernel values and assembles the data
  dictionary; :func:`default_prior` names the hyper-parameters a user may override.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ._design import (
    TAU_CLASS_SCALE,
    TAU_DENSITY_SCALE,
    KernelDesign,
    design_kernels,
    kernel_matrix,
)

__all__ = [
    "build_stan_data",
    "default_prior",
    "detect_resolution",
    "initial_values",
    "merge_rows",
    "precondition",
    "sampler_inits",
    "resolution_bins",
]


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


PRIOR_KEYS = ("tau_a_scale", "tau_f_scale", "intercept_scale", "slope_scale")


def default_prior(design: KernelDesign) -> dict[str, float]:
    """The hyper-parameters of a design, as a mapping (docs/model.md, :mod:`._design`).

    * ``tau_a_scale``: half-Normal scale of the outputs' log-density's smoothing sd;
    * ``tau_f_scale``: half-Normal scale of the class log-odds' smoothing sd (the size,
      in log units, of their non-linear part over the outputs' range);
    * ``intercept_scale``, ``slope_scale``: Normal sd's of the class log-odds' intercept
      and of every other fixed-effect coefficient (slopes per unit of the outputs'
      standardised range).
    """
    return {
        "tau_a_scale": float(design.tau_a_scale),
        "tau_f_scale": float(design.tau_f_scale),
        "intercept_scale": float(design.fixed_scale[0]),
        "slope_scale": float(design.fixed_scale[1]) if design.fixed_scale.size > 1 else 15.0,
    }


def _check_prior(prior: Mapping[str, object] | None) -> dict[str, float]:
    if prior is None:
        return {}
    unknown = set(prior) - set(PRIOR_KEYS)
    if unknown:
        raise ValueError(
            f"prior has unknown hyper-parameters {sorted(unknown)}; valid: {list(PRIOR_KEYS)}"
        )
    checked = {}
    for key, value in prior.items():
        # a real number (Python or numpy scalar, or a 0-d array); bool is not a scale
        ok = np.ndim(value) == 0 and not isinstance(value, (bool, np.bool_, str, bytes))
        try:
            number = float(value) if ok else np.nan  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = np.nan
        if not np.isfinite(number) or number <= 0:
            raise ValueError(f"prior[{key!r}] must be a positive number, found {value!r}")
        checked[key] = number
    return checked


def initial_values(
    data: Mapping[str, object], chains: int, seed: int | None = None
) -> list[dict[str, object]]:
    """Starting points for the sampler, one per chain.

    The log-density ``a`` starts at the log of the kernels' shares of the items (each
    row's items shared in proportion to its kernel values, plus half an item per kernel
    so that an empty kernel gets a finite log), fitted by least squares in the program's
    basis: ``a_fixed`` (the linear part, columns 2..P of ``fixed_basis``) and ``a_smooth``
    (the ``R`` columns of ``smooth_basis``) together; with the default design the fit is
    exact. ``tau_a`` starts where those coefficients are typical draws of its prior
    ``a_smooth ~ N(0, tau_a)`` (their root mean square, pooled with a fifth of
    ``tau_a_scale``). The class log-odds start at their calibration frequencies
    (intercepts) and flat otherwise: every ``f_raw`` within 0.1 of 0 and ``tau_f`` at a
    fifth of its prior scale. Each chain gets a small jitter. Pass the result as ``init=``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> cls = rng.integers(0, 2, 200)
    >>> y = rng.normal(cls, 1.0)
    >>> data, _ = build_stan_data(cls, y, y, None, 2)
    >>> init = initial_values(data, chains=2, seed=1)
    >>> len(init), init[0]["a_smooth"].shape == (data["R"],)
    (2, True)
    """
    rng = np.random.default_rng(seed)
    c, k, p, r = (int(data[key]) for key in ("C", "K", "P", "R"))  # type: ignore[call-overload]
    cls = np.asarray(data["cls"], dtype=np.int64) - 1
    cnt = np.asarray(data["count"], dtype=float)
    kern = np.asarray(data["kern"], dtype=float)
    freq = np.bincount(cls, weights=cnt, minlength=c) + 0.5
    # each row's items shared among kernels in proportion to the kernel values, plus
    # half an item per kernel (a finite log where no item falls)
    mass = (cnt / kern.sum(axis=1)) @ kern + 0.5
    log_mass = np.log(mass / mass.sum())
    a_fixed, a_smooth = _density_coefficients(data, log_mass, k, p, r)
    tau_a0 = float(data["tau_a_scale"]) * 0.2  # type: ignore[arg-type]
    # the root mean square of the coefficients pooled with tau_a0 as one pseudo-coefficient:
    # tau_a0 itself when R = 0, never 0
    tau_a_fit = float(np.sqrt((a_smooth @ a_smooth + tau_a0**2) / (r + 1)))
    inits = []
    for _ in range(int(chains)):
        f_fixed = np.zeros((p, c - 1))
        f_fixed[0] = np.log(freq[1:] / freq[0]) + rng.normal(0.0, 0.1, c - 1)
        tau_f = float(data["tau_f_scale"]) * 0.2 * np.exp(rng.normal(0.0, 0.1, c - 1))
        inits.append(
            {
                "a_fixed": a_fixed.copy(),
                "tau_a": tau_a_fit * float(np.exp(rng.normal(0.0, 0.1))),
                # jitter sd 0.1 tau_a0 per coefficient, whatever the fitted coefficients'
                # size: a few hundredths in log units per kernel on the default grids
                "a_smooth": a_smooth + rng.normal(0.0, 0.1 * tau_a0, r),
                "f_fixed": f_fixed,
                "tau_f": tau_f,
                "f_raw": rng.normal(0.0, 0.1, (r, c - 1)),
            }
        )
    return inits


def _density_coefficients(
    data: Mapping[str, object], log_mass: np.ndarray, k: int, p: int, r: int
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients ``(a_fixed, a_smooth)`` of the program's log-density
    ``a = fixed_basis[:, 2:P] a_fixed + smooth_basis a_smooth`` closest to ``log_mass``
    (up to a constant, which the softmax ignores), by plain least squares on all the
    columns at once (the minimum-norm solution if they are collinear)."""
    fixed = np.asarray(data["fixed_basis"], dtype=float)
    basis = np.asarray(data["smooth_basis"], dtype=float)
    if basis.size == 0 and r == 0:  # an empty basis may come as any empty array
        basis = np.zeros((k, 0))
    if fixed.shape != (k, p):
        raise ValueError(
            f"data['fixed_basis'] must have shape (K, P) = {(k, p)}, found {fixed.shape}"
        )
    if basis.shape != (k, r):
        raise ValueError(
            f"data['smooth_basis'] must have shape (K, R) = {(k, r)}, found {basis.shape}; "
            "set data['R'] to its number of columns"
        )
    coef = np.linalg.lstsq(np.hstack([fixed, basis]), log_mass, rcond=None)[0]
    return coef[1:p], coef[p:]


def build_stan_data(
    class_index: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray | None,
    n_classes: int,
    n_components: int | None = None,
    prior: Mapping[str, object] | None = None,
    counts: np.ndarray | None = None,
    *,
    seed: int = 0,
    preconditioned: bool = True,
) -> tuple[dict[str, object], KernelDesign]:
    """Data dictionary for ``stan/transducer.stan`` (both backends), and the kernel design.

    Parameters
    ----------
    class_index : (n,) int
        0-based class of each row (converted to Stan's 1-based indices here).
    lower, upper : (n, D) or (n,) float
        Bin edges on the model (transformed) scale; for a dimension that is not
        censored, ``lower == upper ==`` the point value. Infinite edges are allowed
        on censored dimensions.
    censored : length-D 0/1 array, or None (no censoring)
    n_classes : int
    n_components : int, optional
        Kernels (None: :func:`yieldwise._design.auto_components`).
    prior : mapping, optional
        Overrides of the hyper-parameters (keys :data:`PRIOR_KEYS`).
    counts : (n,) int, optional
        Multiplicities of rows already merged. When None, identical rows are merged
        here (:func:`merge_rows`), so callers may pass one row per item.
    seed : int
        Seeds the placement of kernel centres for three or more dimensions and the
        initial values of the mode search.
    preconditioned : bool
        Find the posterior mode and the Hessian there (:func:`precondition`) so that the
        sampler moves in near-standard coordinates; False gives the plain non-centred
        model (``u_centre = 0``, ``u_scale = I``), e.g. for tests of the data layout.
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
    if not np.all(np.equal(np.mod(cls, 1), 0)) or cls.min() < 0 or cls.max() >= n_classes:
        raise ValueError(f"class_index must hold integers in [0, {n_classes})")
    overrides = _check_prior(prior)
    if counts is None:
        cls_u, bounds_u, cnt = merge_rows(cls, np.hstack([lo, hi]))
        lo_u, hi_u = bounds_u[:, :d], bounds_u[:, d:]
    else:
        cnt = np.asarray(counts)
        if cnt.shape != (n,) or (cnt < 1).any() or not np.all(np.equal(np.mod(cnt, 1), 0)):
            raise ValueError("counts must be positive integers, one per row")
        order = np.argsort(cls, kind="stable")  # the program reads rows grouped by class
        cls_u, lo_u, hi_u, cnt = cls[order].astype(np.int64), lo[order], hi[order], cnt[order]
    design = design_kernels(
        lo_u, hi_u, cnt, n_components, seed=seed,
        tau_a_scale=overrides.get("tau_a_scale", TAU_DENSITY_SCALE),
        tau_f_scale=overrides.get("tau_f_scale", TAU_CLASS_SCALE),
    )  # fmt: skip
    if "intercept_scale" in overrides or "slope_scale" in overrides:
        scale = design.fixed_scale.copy()
        scale[0] = overrides.get("intercept_scale", scale[0])
        scale[1:] = overrides.get("slope_scale", scale[1] if scale.size > 1 else 0.0)
        design = replace(design, fixed_scale=scale)
    kern, log_scale = kernel_matrix(design.loc, design.width, lo_u, hi_u, cens)
    k = design.n_components
    data: dict[str, object] = {
        "N": int(cls_u.size),
        "C": int(n_classes),
        "D": int(d),
        "K": k,
        "cls": (cls_u + 1).astype(np.int64),
        "count": np.asarray(cnt, dtype=np.int64),
        "kern": kern,
        "kern_log_scale": log_scale,
        "loc": design.loc,
        "width": np.broadcast_to(design.width, (k, d)).copy(),
        "P": int(design.fixed_basis.shape[1]),
        "fixed_basis": design.fixed_basis,
        "fixed_scale": design.fixed_scale,
        "R": int(design.smooth_basis.shape[1]),
        "smooth_basis": design.smooth_basis,
        "tau_a_scale": float(design.tau_a_scale),
        "tau_f_scale": float(design.tau_f_scale),
        # the merged rows themselves, kept with a fitted transducer (not read by Stan)
        "y_lower": lo_u,
        "y_upper": hi_u,
        "censored": cens.astype(np.int64),
    }
    # the program's unconstrained vector u (stan/transducer.stan, "Geometry")
    p_, r_, c1 = int(design.fixed_basis.shape[1]), int(design.smooth_basis.shape[1]), n_classes - 1
    u = (p_ - 1) + 1 + r_ + c1 * (p_ + 1 + r_)
    data.update(U=u, u_centre=np.zeros(u), u_scale=np.eye(u), preconditioned=0,
                **_no_whitening(r_, c1))  # fmt: skip
    if preconditioned:
        data = precondition(data, seed=seed)
    return data, design


def _no_whitening(r: int, c1: int) -> dict[str, np.ndarray]:
    """Whitening data that leave the plain non-centred model (stan/transducer.stan)."""
    return {
        "white_a": np.eye(r), "white_a_lambda": np.zeros(r), "white_a_kappa": np.zeros(r),
        "white_f": np.broadcast_to(np.eye(r), (c1, r, r)).copy(),
        "white_f_lambda": np.zeros((r, c1)), "white_f_kappa": np.zeros((r, c1)),
    }  # fmt: skip


def whitening(model: Any, fit: Any) -> dict[str, np.ndarray]:
    """The conditional whitening (stan/transducer.stan) from a non-centred Laplace fit.

    At the non-centred mode u* each smooth block's coordinates e = b / tau have minus
    Hessian ``tau*^2 H + I`` (the prior adds I), so the likelihood's precision for the
    coefficients b is ``H = (block - I) / tau*^2 = Q diag(lambda) Q'``; the mode b*
    satisfies ``H (b_hat - b*) = b* / tau*^2``, which gives the likelihood's linear term
    ``kappa = Q' H b_hat = (lambda + tau*^-2) Q' b*`` without inverting H. Both are kept
    fixed; the whitening then adapts to every tau the sampler visits.
    """
    p = model.unpack(fit.mode)
    r, c1 = model.R, model.C - 1
    t = np.concatenate([[p["log_tau_a"]], p["log_tau_f"]])
    first_f = model.slices["f_raw"].start  # the log-odds' blocks are stored class by class
    coords = [np.arange(model.slices["a_raw"].start, model.slices["a_raw"].stop)] + [
        np.arange(first_f + c * r, first_f + (c + 1) * r) for c in range(c1)
    ]
    e = np.concatenate([p["a_raw"][:, None], p["f_raw"]], axis=1)
    rotation = np.empty((c1 + 1, r, r))
    lam = np.empty((r, c1 + 1))
    kappa = np.empty((r, c1 + 1))
    for c, at in enumerate(coords):  # one block per scale (C of them), not per item or draw
        block = fit.precision[np.ix_(at, at)]
        values, vectors = np.linalg.eigh((block - np.eye(r)) * np.exp(-2 * t[c]))
        values = np.clip(values, 0.0, None)
        rotation[c], lam[:, c] = vectors, values
        kappa[:, c] = (values + np.exp(-2 * t[c])) * (vectors.T @ (np.exp(t[c]) * e[:, c]))
    return {
        "white_a": rotation[0], "white_a_lambda": lam[:, 0], "white_a_kappa": kappa[:, 0],
        "white_f": rotation[1:], "white_f_lambda": lam[:, 1:], "white_f_kappa": kappa[:, 1:],
    }  # fmt: skip


def precondition(
    data: Mapping[str, object], *, seed: int = 0, whiten: bool = True
) -> dict[str, object]:
    """The data with ``u_centre`` the posterior mode and ``u_scale`` a square root of the
    inverse Hessian there (``stan/transducer.stan``, "Geometry"; the Laplace approximation
    of :mod:`yieldwise.backends._laplace`), started from :func:`initial_values`.

    A linear change of variables: the posterior is unchanged, only the sampler's
    coordinates are. Measured (docs/model.md): two logits, n = 1,000, 255 -> 31 leapfrog
    steps per iteration. When no finite mode is found the data keep the identity (the
    plain non-centred model) and a :class:`PreconditioningWarning` says so.

    ``whiten`` (default) also whitens the smooth blocks conditionally on their scales
    (:func:`whitening`; stan/transducer.stan, "Conditional whitening"), then finds the
    mode and Hessian again in the new coordinates, from the same point mapped into them.
    """
    import warnings

    from .backends._base import SamplingError
    from .backends._laplace import TransducerDensity, laplace

    # the mode and Hessian of the non-centred model, whatever whitening ``data`` carry
    out = {**data, **_no_whitening(int(data["R"]), int(data["C"]) - 1)}  # type: ignore[call-overload]
    try:
        fit = laplace(out, initial_values(out, 1, seed)[0])
    except (SamplingError, np.linalg.LinAlgError, FloatingPointError) as exc:
        warnings.warn(
            f"the posterior mode was not found ({exc}); the sampler runs without "
            "preconditioning and may need many more leapfrog steps",
            PreconditioningWarning,
            stacklevel=2,
        )
        return out
    out.update(u_centre=fit.mode, u_scale=fit.scale, preconditioned=1)
    if not whiten or int(out["R"]) == 0:  # type: ignore[call-overload]
        return out
    model = TransducerDensity(out)
    whitened = {**out, **whitening(model, fit)}
    # the same point in the whitened coordinates (its smooth coordinates are 0)
    b = model.smooth_blocks(fit.mode)["b"]
    start = TransducerDensity(whitened).whitened(fit.mode, b)
    try:
        again = laplace(whitened, start=start)
    except (SamplingError, np.linalg.LinAlgError, FloatingPointError):
        return out  # the non-centred preconditioning stands
    gradient = np.abs(again.result.jac).max()  # the search's last gradient, at the mode
    if not gradient < _WHITENING_GRADIENT:
        return out
    whitened.update(u_centre=again.mode, u_scale=again.scale)
    return whitened


#: The whitened preconditioning is kept when the search for its mode converged (largest
#: |gradient| of the log density there).
_WHITENING_GRADIENT = 1e-2


class PreconditioningWarning(UserWarning):
    """The Laplace preconditioning of the sampler could not be computed."""


def sampler_inits(data: Mapping[str, object], chains: int, seed: int | None = None) -> list[dict]:
    """One starting point per chain for the program's parameter ``z``.

    Preconditioned data (``u = u_centre + u_scale z`` with the Laplace approximation):
    independent draws ``z ~ N(0, I)``, i.e. draws from the Normal approximation, which
    spreads the chains over the bulk of the posterior (R-hat compares them). Otherwise
    the :func:`initial_values` mapped to ``z``.
    """
    from .backends._laplace import TransducerDensity

    rng = np.random.default_rng(seed)
    u = int(data["U"])  # type: ignore[call-overload]
    if int(data.get("preconditioned", 0)):  # type: ignore[call-overload]
        return [{"z": rng.standard_normal(u)} for _ in range(int(chains))]
    model = TransducerDensity(data)
    centre = np.asarray(data["u_centre"], dtype=float)
    scale = np.asarray(data["u_scale"], dtype=float)
    return [
        {"z": np.linalg.solve(scale, model.start(init) - centre)}
        for init in initial_values(data, chains, seed)
    ]
