"""Calibration data prepared for the transducer's Stan program (``stan/transducer.stan``).

The program models the pair (class, output) with a finite mixture of fixed product kernels
and a smooth prior over their class log-odds (docs/theory.md section 3, docs/model.md).
This module turns calibration items into the plain arrays the program reads:

* :func:`merge_rows` merges identical (class, output) rows into one row with a count.
  The likelihood of a row is the same for every item sharing it, so this is exact, and
  it is what makes sampling fast on discrete outputs (vote fractions k/200 take ~90
  distinct values on thousands of items).
* the interval-censored bins of outputs recorded on a lattice come from the output
  encoding (:func:`yieldwise.transducer.encoding.resolution_bins`), mapped through the
  output transform;
* :func:`bin_rows` merges the rows of many distinct continuous outputs in bins a small
  fraction of a kernel's width, each at its items' mean (``Transducer(likelihood_bins=)``,
  docs/model.md, "Large calibration sets");
* :func:`build_stan_data` validates everything, places the kernels
  (:mod:`yieldwise._design`), computes every row's kernel values and assembles the data
  dictionary; :func:`default_prior` names the hyper-parameters a user may override.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

import numpy as np

from .. import _design
from .._design import (
    SLOPE_SCALE,
    KernelDesign,
    design_kernels,
    kernel_matrix,
)
from .._mixture import as_bounds

__all__ = [
    "CUT_GAP_TOLERANCE",
    "KERNEL_TAIL_CUT",
    "KEPT_FIELDS",
    "SPARSE_SHARE_MAX",
    "STAN_FIELDS",
    "StanData",
    "build_stan_data",
    "check_prior",
    "default_prior",
    "initial_values",
    "local_basis",
    "PRECONDITION_SD_TOLERANCE",
    "WHITEN_MAX_DIMS",
    "PreconditioningWarning",
    "merge_rows",
    "bin_rows",
    "precondition",
    "preconditioning",
    "identity_preconditioning",
    "full_scale",
    "sampler_coordinates",
    "unconstrained_values",
    "sampler_inits",
    "sparse_kernels",
    "with_kernels",
]


# --------------------------------------------------------------- the data contract
@dataclass(frozen=True, eq=False)
class StanData(Mapping[str, Any]):
    """The data of ``stan/transducer.stan``: its data block, field for field, and what a
    fitted transducer keeps beside it.

    The fields named in :data:`STAN_FIELDS` are the program's data block, with the same
    names, in the same order, with the Stan type in each field's ``metadata["stan"]``
    (a test parses the program so that the two cannot drift apart); the others
    (:data:`KEPT_FIELDS`) are the merged rows on the model scale, kept with a fitted
    transducer, and whether the sampler's coordinates are preconditioned (read by
    :func:`sampler_inits` and the Laplace backend, not by Stan). Shapes are checked on
    construction: a wrong one raises ValueError naming the field, the shape expected and
    the shape found. A read-only mapping, so that ``data["K"]`` and ``dict(data)`` work;
    :meth:`as_dict` is what the backends get.
    """

    N: int = field(metadata={"stan": "int<lower=1>"})
    C: int = field(metadata={"stan": "int<lower=2>"})
    D: int = field(metadata={"stan": "int<lower=1>"})
    K: int = field(metadata={"stan": "int<lower=1>"})
    cls: np.ndarray = field(metadata={"stan": "array[N] int<lower=1, upper=C>"})
    count: np.ndarray = field(metadata={"stan": "array[N] int<lower=1>"})
    kern: np.ndarray = field(metadata={"stan": "matrix<lower=0, upper=1>[N, K]"})
    kern_log_scale: np.ndarray = field(metadata={"stan": "vector[N]"})
    loc: np.ndarray = field(metadata={"stan": "matrix[K, D]"})
    width: np.ndarray = field(metadata={"stan": "matrix<lower=0>[K, D]"})
    P: int = field(metadata={"stan": "int<lower=1>"})
    fixed_basis: np.ndarray = field(metadata={"stan": "matrix[K, P]"})
    fixed_scale: np.ndarray = field(metadata={"stan": "vector<lower=0>[P]"})
    R: int = field(metadata={"stan": "int<lower=0>"})
    smooth_basis: np.ndarray = field(metadata={"stan": "matrix[K, R]"})
    tau_a_scale: float = field(metadata={"stan": "real<lower=0>"})
    tau_f_scale: float = field(metadata={"stan": "real<lower=0>"})
    tau_f_df: float = field(metadata={"stan": "real<lower=0>"})  # 0: half-Normal
    tau_f_floor: float = field(metadata={"stan": "real<lower=0>"})  # 0: no floor
    # 1: the density block is all outputs' log-density, 0: the first class's log weight
    density_marginal: int = field(metadata={"stan": "int<lower=0, upper=1>"})
    U: int = field(metadata={"stan": "int<lower=1>"})
    u_centre: np.ndarray = field(metadata={"stan": "vector[U]"})
    # the preconditioning u = u_centre + Q (u_axes .* z), Q = I + u_left u_right'
    # (stan/transducer.stan, "Geometry"; :func:`preconditioning`)
    u_rank: int = field(metadata={"stan": "int<lower=0, upper=U>"})
    u_axes: np.ndarray = field(metadata={"stan": "vector<lower=0>[U]"})
    u_left: np.ndarray = field(metadata={"stan": "matrix[U, u_rank]"})
    u_right: np.ndarray = field(metadata={"stan": "matrix[U, u_rank]"})
    white_a: np.ndarray = field(metadata={"stan": "matrix[R, R]"})
    white_a_lambda: np.ndarray = field(metadata={"stan": "vector<lower=0>[R]"})
    white_a_kappa: np.ndarray = field(metadata={"stan": "vector[R]"})
    white_f: np.ndarray = field(metadata={"stan": "array[C - 1] matrix[R, R]"})
    white_f_lambda: np.ndarray = field(metadata={"stan": "matrix<lower=0>[R, C - 1]"})
    white_f_kappa: np.ndarray = field(metadata={"stan": "matrix[R, C - 1]"})
    # the likelihood's sparse form (sparse_kernels): kern's values above the cut as a
    # compressed-row N x (K C) matrix, row n's at columns (cls[n] - 1) K + k (1-based)
    kern_sparse: int = field(metadata={"stan": "int<lower=0, upper=1>"})
    kern_nz: int = field(metadata={"stan": "int<lower=0>"})
    kern_w: np.ndarray = field(metadata={"stan": "vector<lower=0, upper=1>[kern_nz]"})
    kern_v: np.ndarray = field(metadata={"stan": "array[kern_nz] int<lower=1, upper=K * C>"})
    kern_u: np.ndarray = field(metadata={"stan": "array[N + 1] int<lower=1>"})
    y_lower: np.ndarray = field(metadata={"stan": None})
    y_upper: np.ndarray = field(metadata={"stan": None})
    censored: np.ndarray = field(metadata={"stan": None})
    preconditioned: int = field(metadata={"stan": None})
    # the Normal approximation the preconditioning comes from: the inverse Hessian's
    # eigenvectors (columns) and the square roots of its eigenvalues, and the directions
    # (0-based) the program applies (:func:`preconditioning`)
    u_basis: np.ndarray = field(default=None, metadata={"stan": None})  # type: ignore[assignment]
    u_sd: np.ndarray = field(default=None, metadata={"stan": None})  # type: ignore[assignment]
    u_kept: np.ndarray = field(default=None, metadata={"stan": None})  # type: ignore[assignment]
    # the width of the bins the rows' uncensored dimensions were merged in, per dimension
    # (bin_rows; 0: the rows are the outputs themselves, the default)
    bin_width: np.ndarray = field(default=None, metadata={"stan": None})  # type: ignore[assignment]
    # group offsets (stan/transducer.stan, "Group offsets"; a class-reduced transducer's
    # pairs): G groups (0: none, the default), H parents, each row's group (1-based; 0
    # when G = 0), each group's parent (1-based), and the scales' half-Normal scale
    G: int = field(default=0, metadata={"stan": "int<lower=0>"})
    H: int = field(default=0, metadata={"stan": "int<lower=0>"})
    grp: np.ndarray = field(default=None, metadata={"stan": "array[N] int<lower=0, upper=G>"})  # type: ignore[assignment]
    parent: np.ndarray = field(default=None, metadata={"stan": "array[G] int<lower=1, upper=H>"})  # type: ignore[assignment]
    tau_g_scale: float = field(default=1.0, metadata={"stan": "real<lower=0>"})
    # the group offsets' conditional whitening (stan/transducer.stan, "Group offsets";
    # :func:`whitening`): each group's likelihood precision and linear term per class
    # column, G x (C - 1); None: zeros, the plain non-centred offsets
    white_g_lambda: np.ndarray = field(default=None, metadata={"stan": "matrix<lower=0>[G, C - 1]"})  # type: ignore[assignment]
    white_g_kappa: np.ndarray = field(default=None, metadata={"stan": "matrix[G, C - 1]"})  # type: ignore[assignment]
    # a candidate, off by default (stan/transducer.stan; ``_design.LEVEL_SCALE``): the
    # Normal sd of a ridge on the class log-odds at every kernel; 0: none
    level_scale: float = field(default=0.0, metadata={"stan": "real<lower=0>"})
    # the class log-odds' prior mean and the prior of their fixed part (stan/transducer.stan;
    # :func:`centred_odds`): each fixed coefficient's sd (None: ``fixed_scale``), the
    # Student-t's degrees of freedom (0: Normal) and the (K, C - 1) mean function (None: 0)
    odds_scale: np.ndarray = field(default=None, metadata={"stan": "vector<lower=0>[P]"})  # type: ignore[assignment]
    odds_df: float = field(default=0.0, metadata={"stan": "real<lower=0>"})
    odds_offset: np.ndarray = field(default=None, metadata={"stan": "matrix[K, C - 1]"})  # type: ignore[assignment]
    # local smoothing scales (stan/transducer.stan, "Local smoothing scales"; local_basis):
    # J blocks per class column (0: none, the default) of M functions, their (K, J M)
    # basis, the half-Normal scale of their sds, and their conditional whitening
    # (:func:`whitening`): per class a block-diagonal (J M, J M) rotation, and each block's
    # likelihood precision and linear term, (M, J (C - 1)); None: the plain non-centred blocks
    J: int = field(default=0, metadata={"stan": "int<lower=0>"})
    M: int = field(default=0, metadata={"stan": "int<lower=0>"})
    local_basis: np.ndarray = field(default=None, metadata={"stan": "matrix[K, J * M]"})  # type: ignore[assignment]
    tau_l_scale: float = field(default=0.0, metadata={"stan": "real<lower=0>"})
    tau_l_df: float = field(default=0.0, metadata={"stan": "real<lower=0>"})  # 0: half-Normal
    white_l: np.ndarray = field(  # type: ignore[assignment]
        default=None, metadata={"stan": "array[C - 1] matrix[J * M, J * M]"}
    )
    white_l_lambda: np.ndarray = field(  # type: ignore[assignment]
        default=None, metadata={"stan": "matrix<lower=0>[M, J * (C - 1)]"}
    )
    white_l_kappa: np.ndarray = field(  # type: ignore[assignment]
        default=None, metadata={"stan": "matrix[M, J * (C - 1)]"}
    )

    def __post_init__(self) -> None:
        if self.grp is None or (int(self.G) == 0 and not np.any(self.grp)):
            # no groups: every row's group is 0, whatever N a replace() gave the rows
            object.__setattr__(self, "grp", np.zeros(int(self.N), dtype=np.int64))
        if self.parent is None:
            object.__setattr__(self, "parent", np.zeros(0, dtype=np.int64))
        if self.bin_width is None:
            object.__setattr__(self, "bin_width", np.zeros(int(self.D)))
        if self.u_basis is None:  # no record of a Normal approximation: the identity
            u = int(self.U)
            object.__setattr__(self, "u_basis", np.eye(u))
            object.__setattr__(self, "u_sd", np.ones(u))
            object.__setattr__(self, "u_kept", np.zeros(0, dtype=np.int64))
        if self.odds_scale is None:
            object.__setattr__(self, "odds_scale", np.array(self.fixed_scale, dtype=float))
        if self.odds_offset is None:
            object.__setattr__(self, "odds_offset", np.zeros((int(self.K), int(self.C) - 1)))
        for name in ("white_g_lambda", "white_g_kappa"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros((int(self.G), int(self.C) - 1)))
        jm, c1 = int(self.J) * int(self.M), int(self.C) - 1
        if self.local_basis is None:
            object.__setattr__(self, "local_basis", np.zeros((int(self.K), jm)))
        if self.white_l is None:
            object.__setattr__(self, "white_l", np.broadcast_to(np.eye(jm), (c1, jm, jm)).copy())
        for name in ("white_l_lambda", "white_l_kappa"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros((int(self.M), int(self.J) * c1)))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int":
                value = int(value)
            elif f.type == "float":
                value = float(value)
            elif f.name in _INTEGER_ARRAYS:
                value = np.asarray(value, dtype=np.int64)
            else:
                value = np.asarray(value, dtype=float)
            object.__setattr__(self, f.name, value)
        n, c, d, k, p, r, u = self.N, self.C, self.D, self.K, self.P, self.R, self.U
        sizes = {"N": n, "C - 1": c - 1, "D": d, "K": k, "P": p, "R": r, "U": u,
                 "N + 1": n + 1, "kern_nz": self.kern_nz, "G": self.G,
                 "u_rank": self.u_rank, "J * M": self.J * self.M, "M": self.M,
                 "J * (C - 1)": self.J * (c - 1)}  # fmt: skip
        for name, dims in _SHAPES.items():
            expected = tuple(sizes[dim] for dim in dims)
            found = np.shape(getattr(self, name))
            if found != expected:
                raise ValueError(
                    f"StanData.{name} must have shape ({', '.join(dims)}) = {expected}, "
                    f"found {found}"
                )
        _check_sparse(self)
        _check_groups(self)
        _check_preconditioning(self)
        expected_u = unconstrained_size(p, r, c, self.G, self.H, self.J, self.M)
        if u != expected_u:
            raise ValueError(
                f"StanData.U must be (P - 1) + 1 + R + (C - 1) (P + 1 + R), plus "
                f"(C - 1) (2 + H + G) with groups and J (C - 1) (1 + M) with local blocks, "
                f"= {expected_u}, found {u}"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> StanData:
        """The data from a mapping with every field (a dict as :meth:`as_dict` gives)."""
        if isinstance(data, StanData):
            return data
        required = [f for f in fields(cls) if f.default is MISSING]
        missing = [f.name for f in required if f.name not in data]
        if missing:
            raise ValueError(f"the transducer's Stan data lack {missing}")
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    def as_dict(self) -> dict[str, Any]:
        """Every field as a plain dict: what the backends get (Stan reads the data block's
        names and ignores the rest)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __getitem__(self, key: str) -> Any:
        if key not in _FIELD_NAMES:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_FIELD_NAMES)

    def __len__(self) -> int:
        return len(_FIELD_NAMES)

    # identity, not Mapping's comparison of values (arrays have no truth value)
    __eq__ = object.__eq__
    __hash__ = object.__hash__


#: The array fields of integers.
_INTEGER_ARRAYS = frozenset(("cls", "count", "censored", "kern_v", "kern_u", "grp", "parent",
                             "u_kept"))  # fmt: skip
#: The shape of every array field, in the data block's size names.
_SHAPES = {
    "cls": ("N",), "count": ("N",), "kern": ("N", "K"), "kern_log_scale": ("N",),
    "loc": ("K", "D"), "width": ("K", "D"), "fixed_basis": ("K", "P"), "fixed_scale": ("P",),
    "smooth_basis": ("K", "R"), "u_centre": ("U",), "u_axes": ("U",),
    "u_left": ("U", "u_rank"), "u_right": ("U", "u_rank"), "u_basis": ("U", "U"),
    "u_sd": ("U",), "u_kept": ("u_rank",),
    "white_a": ("R", "R"), "white_a_lambda": ("R",), "white_a_kappa": ("R",),
    "white_f": ("C - 1", "R", "R"), "white_f_lambda": ("R", "C - 1"),
    "white_f_kappa": ("R", "C - 1"), "kern_w": ("kern_nz",), "kern_v": ("kern_nz",),
    "kern_u": ("N + 1",), "y_lower": ("N", "D"),
    "y_upper": ("N", "D"), "censored": ("D",), "bin_width": ("D",), "grp": ("N",),
    "parent": ("G",),
    "white_g_lambda": ("G", "C - 1"), "white_g_kappa": ("G", "C - 1"),
    "odds_scale": ("P",), "odds_offset": ("K", "C - 1"),
    "local_basis": ("K", "J * M"), "white_l": ("C - 1", "J * M", "J * M"),
    "white_l_lambda": ("M", "J * (C - 1)"), "white_l_kappa": ("M", "J * (C - 1)"),
}  # fmt: skip


def unconstrained_size(
    p: int, r: int, c: int, g: int = 0, h: int = 0, j: int = 0, m: int = 0
) -> int:
    """The length of the program's unconstrained vector ``u`` (stan/transducer.stan,
    "Geometry", "Group offsets" and "Local smoothing scales")."""
    groups = (c - 1) * (2 + h + g) if g > 0 else 0
    return (p - 1) + 1 + r + (c - 1) * (p + 1 + r) + groups + j * (c - 1) * (1 + m)


def _check_groups(data: StanData) -> None:
    """Group offsets' data consistent: each row's group in 1..G (0 when G = 0), each
    group's parent in 1..H, H >= 1 when G >= 1 (ValueError naming the field)."""
    g, h = data.G, data.H
    if g < 0 or h < 0 or (g > 0 and h < 1):
        raise ValueError(f"StanData.G and H must be >= 0, H >= 1 when G >= 1: found G {g}, H {h}")
    low = 1 if g > 0 else 0
    if data.grp.size and (data.grp.min() < low or data.grp.max() > g):
        raise ValueError(
            f"StanData.grp must lie in {low}..{g}, found {data.grp.min()}..{data.grp.max()}"
        )
    if data.parent.size and (data.parent.min() < 1 or data.parent.max() > h):
        raise ValueError(
            f"StanData.parent must lie in 1..{h}, found {data.parent.min()}..{data.parent.max()}"
        )


_FIELD_NAMES = tuple(f.name for f in fields(StanData))
#: The program's data block, in its order.
STAN_FIELDS = tuple(f.name for f in fields(StanData) if f.metadata["stan"] is not None)
#: Kept beside the data block, not read by Stan.
KEPT_FIELDS = tuple(f.name for f in fields(StanData) if f.metadata["stan"] is None)


# ------------------------------------------------------- the likelihood's sparse form
#: Kernel values below this fraction of their row's largest are left out of the
#: likelihood's sums when that leaves few enough (:data:`SPARSE_SHARE_MAX`). A row's
#: likelihood then changes by at most ``KERNEL_TAIL_CUT * K`` times the ratio of the
#: class's largest weight to its weight at the row's own kernel; the program reports the
#: actual change per draw (``log_lik_cut_gap``) and the fit warns above
#: ``CUT_GAP_TOLERANCE``. At 1e-15 a 2-D grid keeps 23 % of the values (Gaussian
#: kernels of half the spacing: about 4 spacings around each row), a 1-D grid 52 %.
KERNEL_TAIL_CUT = 1e-15
#: The sparse form is used when at most this share of kern's values is kept. Measured
#: 2026-11-26 (docs/model.md, "The likelihood's sparse form"): two logits, 3,600 items,
#: 23 % kept, sampling 82.8 -> 50.3 s; logistic, 3,600 items, 52 % kept, 9.9 -> 11.4 s
#: (a compressed-row product costs about twice a dense one per value).
SPARSE_SHARE_MAX = 0.35
#: Largest ``log_lik_cut_gap`` over the draws that passes silently: the full kernels'
#: posterior is the sampled one reweighted by ``exp(gap)``, so expectations move by
#: less than about 1 % below it.
CUT_GAP_TOLERANCE = 0.01


def sparse_kernels(kern: np.ndarray, cls: np.ndarray, cut: float) -> dict[str, Any]:
    """The sparse form's data fields (``kern_sparse``, ``kern_nz``, ``kern_w``, ``kern_v``,
    ``kern_u``) for ``kern`` (rows scaled to a largest of 1) and 1-based classes ``cls``.

    Values of at least ``cut`` are kept; the form is chosen when ``cut > 0`` and at most
    :data:`SPARSE_SHARE_MAX` of the values are kept, otherwise the fields describe the
    dense form (``kern_sparse = 0``, nothing stored).
    """
    kern = np.asarray(kern, dtype=float)
    n, k = kern.shape
    keep = kern >= cut
    if cut <= 0 or keep.mean() > SPARSE_SHARE_MAX:
        none = np.zeros(0, dtype=np.int64)
        ones = np.ones(n + 1, dtype=np.int64)
        return {"kern_sparse": 0, "kern_nz": 0, "kern_w": none, "kern_v": none, "kern_u": ones}
    rows, columns = np.nonzero(keep)  # row-major: each row's values in order
    offset = (np.asarray(cls, dtype=np.int64)[rows] - 1) * k  # its class's block of K columns
    return {
        "kern_sparse": 1,
        "kern_nz": int(rows.size),
        "kern_w": kern[rows, columns],
        "kern_v": offset + columns + 1,
        "kern_u": np.concatenate([[1], 1 + np.cumsum(keep.sum(axis=1))]).astype(np.int64),
    }


def check_tail_cut(value: Any) -> float:
    """``kernel_tail_cut`` as a float in [0, 1e-6] (ValueError naming it otherwise)."""
    try:
        cut = float(value)
    except (TypeError, ValueError):
        cut = float("nan")
    if not 0.0 <= cut <= 1e-6 or isinstance(value, bool):
        raise ValueError(
            "kernel_tail_cut must be a number in [0, 1e-6] (the fraction of a row's largest "
            f"kernel value below which values are left out of the likelihood; 0 keeps all), "
            f"found {value!r}"
        )
    return cut


def _check_sparse(data: StanData) -> None:
    """The sparse form's fields describe a compressed-row matrix whose row n has values
    only in its class's block of columns (ValueError naming the field otherwise)."""
    n, k, nz = data.N, data.K, data.kern_nz
    if data.kern_sparse not in (0, 1):
        raise ValueError(f"StanData.kern_sparse must be 0 or 1, found {data.kern_sparse}")
    if data.kern_sparse == 0 and (nz != 0 or (data.kern_u != 1).any()):
        raise ValueError("StanData.kern_nz must be 0 and kern_u all 1 when kern_sparse is 0")
    u = data.kern_u
    if u[0] != 1 or u[-1] != nz + 1 or (np.diff(u) < 0).any():
        raise ValueError(
            f"StanData.kern_u must rise from 1 to kern_nz + 1 = {nz + 1}, found {u[0]} to "
            f"{u[-1]}" + (" (falling somewhere)" if (np.diff(u) < 0).any() else "")
        )
    if nz == 0:
        return
    if ((data.kern_w <= 0) | (data.kern_w > 1)).any():
        raise ValueError(
            "StanData.kern_w must lie in (0, 1] (kernel values scaled by their row's largest)"
        )
    row = np.repeat(np.arange(n), np.diff(u))
    block = (data.kern_v - 1) // k
    if (data.kern_v < 1).any() or (block != data.cls[row] - 1).any():
        bad = int(np.flatnonzero((data.kern_v < 1) | (block != data.cls[row] - 1))[0])
        raise ValueError(
            f"StanData.kern_v must put row n's values in its class's columns "
            f"((cls[n] - 1) K + 1 to cls[n] K); value {bad + 1} (row {row[bad] + 1}, class "
            f"{data.cls[row[bad]]}) is at column {data.kern_v[bad]}"
        )


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


def bin_rows(
    class_index: np.ndarray,
    group: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray,
    counts: np.ndarray,
    width: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Merge rows whose uncensored coordinates fall in one bin, each bin at its items' mean.

    Bins are ``width[d]`` wide along each uncensored dimension ``d`` (edges at multiples of
    it); a censored dimension's bounds, the class and the group must match exactly. A
    merged row's point value is the count-weighted mean of its rows', so the first-order
    change of every item's log-likelihood cancels within the bin, and what is left is
    ``sum_i (y_i - ybar)^2 / 2`` times the log-density's curvature: of order
    ``n (width / sigma)^2 / 24`` with ``sigma`` the kernels' width, nearly the same in every
    draw (the fit measures how much it differs: ``diagnostics.binning_record``).

    Returns ``(class_index, group, lower, upper, counts)`` of the merged rows, sorted by
    class; ``counts`` sum to the input's.
    """
    cls = np.asarray(class_index, dtype=np.int64)
    grp = np.asarray(group, dtype=np.int64)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    cens = np.asarray(censored, dtype=bool)
    cnt = np.asarray(counts, dtype=float)
    width = np.asarray(width, dtype=float)
    free = ~cens & (width > 0)
    if not free.any():
        return cls, grp, lo, hi, np.asarray(counts, dtype=np.int64)
    cells = np.floor(lo[:, free] / width[free]) + 0.0
    key = np.column_stack([cls, grp, cells, lo[:, ~free], hi[:, ~free]])
    unique, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    total = np.bincount(inverse, weights=cnt)
    mean = np.column_stack(
        [np.bincount(inverse, weights=cnt * lo[:, d]) / total for d in np.flatnonzero(free)]
    )
    m = unique.shape[0]
    lo_b, hi_b = np.empty((m, lo.shape[1])), np.empty((m, lo.shape[1]))
    lo_b[:, free], hi_b[:, free] = mean, mean
    fixed = unique[:, 2 + int(free.sum()) :]
    k = int((~free).sum())
    lo_b[:, ~free], hi_b[:, ~free] = fixed[:, :k], fixed[:, k:]
    return (unique[:, 0].astype(np.int64), unique[:, 1].astype(np.int64), lo_b, hi_b,
            np.rint(total).astype(np.int64))  # fmt: skip


PRIOR_KEYS = (
    "tau_a_scale", "tau_f_scale", "tau_f_df", "tau_f_floor", "intercept_scale", "slope_scale",
    "tau_l_scale",
)  # fmt: skip


def default_prior(design: KernelDesign) -> dict[str, float | None]:
    """The hyper-parameters of a design, as a mapping (docs/model.md, :mod:`._design`).

    * ``tau_a_scale``: half-Normal scale of the outputs' log-density's smoothing sd;
    * ``tau_f_scale``: half-Student-t scale of the class log-odds' smoothing sd (the
      size, in log units, of their non-linear part over the outputs' range);
    * ``tau_f_df``: that half-Student-t's degrees of freedom, or None for a half-Normal
      scale (the default for two or more output dimensions; docs/model.md, "The
      log-odds' smoothness prior");
    * ``tau_f_floor``: a soft floor under that sd, 0 for none (default 1 for one output
      dimension, :data:`yieldwise._design.TAU_CLASS_FLOOR`, none for two,
      :data:`yieldwise._design.TAU_CLASS_FLOOR_MULTI`, and 0.3 for three or more,
      :data:`yieldwise._design.TAU_CLASS_FLOOR_CENTRES`): the density is multiplied by
      ``1 - exp(-(tau_f / floor)^2)``, keeping the sampler out of the funnel's neck;
    * ``intercept_scale``, ``slope_scale``: Normal sd's of the class log-odds' intercept
      and of every other fixed-effect coefficient (slopes per unit of the outputs'
      standardised range);
    * ``tau_l_scale``: half-Normal scale of the local smoothing sds (one output dimension
      only; :func:`local_basis`), 0 for none (the default,
      :data:`yieldwise._design.LOCAL_SCALE`).
    """
    return {
        "tau_a_scale": float(design.tau_a_scale),
        "tau_f_scale": float(design.tau_f_scale),
        "tau_f_df": design.tau_f_df,
        "tau_f_floor": float(design.tau_f_floor),
        "intercept_scale": float(design.fixed_scale[0]),
        "slope_scale": float(design.fixed_scale[1] if design.fixed_scale.size > 1 else SLOPE_SCALE),
        "tau_l_scale": float(design.tau_l_scale),
    }


def check_prior(prior: Mapping[str, object] | None) -> dict[str, float | None]:
    """The ``prior=`` overrides (``Transducer(prior=...)``), checked: a mapping of known
    hyper-parameter names to their allowed values, or None; TypeError or ValueError naming
    the key otherwise (the one rule, which the fit and the report's ``[sampler]`` apply)."""
    if prior is None:
        return {}
    if not isinstance(prior, Mapping):
        raise TypeError(
            "prior must be a mapping of hyper-parameter names to numbers, e.g. "
            f"{{'tau_f_scale': 5}} (valid names: {list(PRIOR_KEYS)}), or None; found "
            f"{type(prior).__name__} {prior!r}"
        )
    unknown = set(prior) - set(PRIOR_KEYS)
    if unknown:
        raise ValueError(
            f"prior has unknown hyper-parameters {sorted(unknown)}; valid: {list(PRIOR_KEYS)}"
        )
    checked: dict[str, float | None] = {}
    for key, value in prior.items():
        if key == "tau_f_df" and value is None:  # a half-Normal scale
            checked[key] = None
            continue
        # a real number (Python or numpy scalar, or a 0-d array); bool is not a scale
        ok = np.ndim(value) == 0 and not isinstance(value, (bool, np.bool_, str, bytes))
        try:
            number = float(value) if ok else np.nan  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = np.nan
        if key in ("tau_f_floor", "tau_l_scale") and number == 0:  # no floor, no local blocks
            checked[key] = 0.0
            continue
        if not np.isfinite(number) or number <= 0:
            also = {
                "tau_f_df": " (or None for a half-Normal scale)", "tau_f_floor": " (or 0 for none)",
                "tau_l_scale": " (or 0 for none)",
            }.get(key, "")  # fmt: skip
            raise ValueError(f"prior[{key!r}] must be a positive number{also}, found {value!r}")
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
    kernel_tail_cut: float = KERNEL_TAIL_CUT,
    groups: tuple[np.ndarray, np.ndarray] | None = None,
    bin_fraction: float | None = None,
    bin_min_rows: int = 0,
    bin_max_share: float = 1.0,
    odds_mean: np.ndarray | None = None,
) -> tuple[StanData, KernelDesign]:
    """The data for ``stan/transducer.stan`` (both backends), and the kernel design.

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
        model (``u = z``: :func:`identity_preconditioning`), e.g. for tests of the data layout.
    kernel_tail_cut : float
        Kernel values below this fraction of their row's largest are left out of the
        likelihood when that makes it sparse (:func:`sparse_kernels`); 0 keeps them all.
    groups : (group, parent), optional
        Group offsets (stan/transducer.stan, "Group offsets"): each row's 0-based group
        ``(n,)`` and each group's 0-based parent ``(G,)``; rows merge only within a group.
        Their scales' half-Normal scale is ``yieldwise._design.GROUP_OFFSET_SCALE``.
    bin_fraction : float, optional
        With more than ``bin_min_rows`` distinct rows, merge the rows in bins of this
        fraction of the kernels' width along each uncensored dimension (:func:`bin_rows`;
        the kernels are placed on the rows before binning). None: every row as it is.
    bin_min_rows : int
        See ``bin_fraction``.
    bin_max_share : float
        Keep the binned rows only when they are at most this share of the rows (else
        binning saves too little to be worth its approximation).
    odds_mean : (n, C - 1) float, optional
        A prior mean for the class log-odds: each row's log-odds of class ``c + 1`` against
        the first class under a reference (a class reduction's: the classifier's own
        probabilities), averaged onto the kernels by :func:`centred_odds`; the fixed part's
        prior then has the sds ``_design.CENTRED_INTERCEPT_SCALE`` and
        ``CENTRED_SLOPE_SCALE`` with Student-t ``_design.CENTRED_ODDS_DF`` tails
        (docs/model.md, "A prior centred on the classifier's own probabilities"). None: the
        model's default prior (mean 0).
    """
    cls = np.asarray(class_index)
    lo, hi, cens = as_bounds(lower, upper, censored)
    n, d = lo.shape
    if cls.shape != (n,):
        raise ValueError(f"class_index must have shape ({n},), got {cls.shape}")
    if n == 0:
        raise ValueError("no calibration rows")
    if int(n_classes) < 2:
        raise ValueError("n_classes must be at least 2")
    if not np.all(np.equal(np.mod(cls, 1), 0)) or cls.min() < 0 or cls.max() >= n_classes:
        raise ValueError(f"class_index must hold integers in [0, {n_classes})")
    overrides = check_prior(prior)
    kernel_tail_cut = check_tail_cut(kernel_tail_cut)
    grp, parent = _check_group_rows(groups, n)
    if odds_mean is not None:
        odds_mean = np.asarray(odds_mean, dtype=float)
        if odds_mean.shape != (n, int(n_classes) - 1) or not np.isfinite(odds_mean).all():
            raise ValueError(
                f"odds_mean must be a finite array of shape (rows, C - 1) = "
                f"{(n, int(n_classes) - 1)}, found shape {odds_mean.shape}"
            )
    if counts is None:
        cls_u, merged, cnt = merge_rows(cls, np.hstack([grp[:, None], lo, hi]))
        grp_u, lo_u, hi_u = merged[:, 0].astype(np.int64), merged[:, 1 : d + 1], merged[:, d + 1 :]
    else:
        cnt = np.asarray(counts)
        if cnt.shape != (n,) or (cnt < 1).any() or not np.all(np.equal(np.mod(cnt, 1), 0)):
            raise ValueError("counts must be positive integers, one per row")
        order = np.argsort(cls, kind="stable")  # the program reads rows grouped by class
        cls_u, lo_u, hi_u, cnt = cls[order].astype(np.int64), lo[order], hi[order], cnt[order]
        grp_u = grp[order]
    range_weights = None
    if _design.RANGE_CLASS_BALANCED:  # the grid covers every class: each weighs alike
        per_class = np.bincount(cls_u, weights=cnt, minlength=int(n_classes))
        range_weights = cnt / per_class[cls_u]
    design = design_kernels(
        lo_u, hi_u, cnt, n_components, seed=seed, range_weights=range_weights,
        tau_a_scale=overrides.get("tau_a_scale"), tau_f_scale=overrides.get("tau_f_scale"),
        tau_f_df=overrides.get("tau_f_df", "auto"),
        tau_f_floor=overrides.get("tau_f_floor"), tau_l_scale=overrides.get("tau_l_scale"),
    )  # fmt: skip
    if "intercept_scale" in overrides or "slope_scale" in overrides:
        scale = design.fixed_scale.copy()
        scale[0] = overrides.get("intercept_scale", scale[0])
        scale[1:] = overrides.get("slope_scale", scale[1] if scale.size > 1 else 0.0)
        design = replace(design, fixed_scale=scale)
    bin_width = np.zeros(d)
    if bin_fraction is not None and cls_u.size > int(bin_min_rows) and not cens.all():
        # the narrowest kernel along each dimension sets its bins (docs/model.md, "Large
        # calibration sets")
        bin_width = np.where(cens, 0.0, float(bin_fraction) * np.min(
            np.broadcast_to(design.width, (design.n_components, d)), axis=0))  # fmt: skip
        binned = bin_rows(cls_u, grp_u, lo_u, hi_u, cens, cnt, bin_width)
        if binned[0].size <= float(bin_max_share) * cls_u.size:
            cls_u, grp_u, lo_u, hi_u, cnt = binned
        else:
            bin_width = np.zeros(d)
    kern, log_scale = kernel_matrix(design.loc, design.width, lo_u, hi_u, cens)
    k = design.n_components
    values: dict[str, Any] = {
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
        # the program reads 0 as "half-Normal" (stan/transducer.stan)
        "tau_f_df": 0.0 if design.tau_f_df is None else float(design.tau_f_df),
        "tau_f_floor": float(design.tau_f_floor),
        "density_marginal": int(design.density_marginal),
        # the merged rows themselves, kept with a fitted transducer (not read by Stan)
        "y_lower": lo_u,
        "y_upper": hi_u,
        "censored": cens.astype(np.int64),
        "bin_width": bin_width,
        **sparse_kernels(kern, cls_u + 1, kernel_tail_cut),
    }
    if odds_mean is not None:
        values.update(centred_odds(design, lo, hi, cens, odds_mean, counts))
    g, h = int(parent.size), int(parent.max()) + 1 if parent.size else 0  # groups, parents
    values["level_scale"] = float(_design.LEVEL_SCALE)
    if g:
        values.update(G=g, H=h, grp=grp_u + 1, parent=parent + 1,
                      tau_g_scale=float(_design.GROUP_OFFSET_SCALE))  # fmt: skip
    # local smoothing scales (one output dimension; _design.LOCAL_SCALE, 0: none)
    tau_l = design.tau_l_scale
    loc_basis = local_basis(design) if tau_l else np.zeros((k, 0, 0))
    j_, m_ = int(loc_basis.shape[1]), int(loc_basis.shape[2])
    values.update(J=j_, M=m_, local_basis=loc_basis.reshape(k, j_ * m_),
                  tau_l_scale=float(tau_l or 0.0), tau_l_df=float(_design.LOCAL_DF))  # fmt: skip
    # the program's unconstrained vector u (stan/transducer.stan, "Geometry")
    p_, r_, c1 = int(design.fixed_basis.shape[1]), int(design.smooth_basis.shape[1]), n_classes - 1
    u = unconstrained_size(p_, r_, n_classes, g, h, j_, m_)
    data = StanData(**values, U=u, **identity_preconditioning(u),
                    **_no_whitening(r_, c1, g, j_, m_))  # fmt: skip
    if preconditioned:
        data = precondition(data, seed=seed)
    return data, design


def local_basis(
    design: KernelDesign, blocks: int | None = None, functions: int | None = None
) -> np.ndarray:
    """The local blocks' basis (stan/transducer.stan, "Local smoothing scales"), (K, J, M).

    Block j holds the ``functions`` smoothest functions of the random walk's basis (its
    columns of largest norm: the basis is scaled by the inverse square roots of the
    penalty's eigenvalues) times a Gaussian bump at the j-th of ``blocks`` even points
    over the kernels' range, of sd their spacing, scaled so that the block's prior sd at
    its largest is the block's tau (the random walk's own functions are 0.02-0.09 per
    unit of tau at a kernel: unscaled, the blocks moved no posterior mean, docs/model.md).
    None: :data:`yieldwise._design.LOCAL_BLOCKS` and ``LOCAL_FUNCTIONS``. One output
    dimension; fewer smooth functions than asked gives blocks of all of them, none an
    empty basis.
    """
    blocks = _design.LOCAL_BLOCKS if blocks is None else int(blocks)
    functions = _design.LOCAL_FUNCTIONS if functions is None else int(functions)
    loc = np.asarray(design.loc, dtype=float)
    smooth = np.asarray(design.smooth_basis, dtype=float)
    k = loc.shape[0]
    m = min(functions, smooth.shape[1])
    if loc.shape[1] != 1:
        raise ValueError(f"local blocks need one output dimension, found {loc.shape[1]}")
    if blocks < 2 or m == 0:
        return np.zeros((k, 0, 0))
    x = loc[:, 0]
    smooth = smooth[:, np.argsort(-np.linalg.norm(smooth, axis=0), kind="stable")[:m]]
    at = np.linspace(x.min(), x.max(), blocks)
    bumps = np.exp(-0.5 * ((x[:, None] - at[None]) / (at[1] - at[0])) ** 2)  # (K, J)
    out = bumps[:, :, None] * smooth[:, None, :]  # (K, J, M)
    return out / np.sqrt(np.max(np.sum(out**2, axis=2), axis=0))[None, :, None]


def centred_odds(
    design: KernelDesign,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray,
    odds_mean: np.ndarray,
    counts: np.ndarray | None = None,
) -> dict[str, Any]:
    """The Stan data of a prior centred on reference log-odds (stan/transducer.stan,
    ``odds_*``): ``odds_offset[k, c]``, the rows' ``odds_mean[:, c]`` averaged with each
    row's kernel value at kernel ``k`` (times its count) as weight, a Nadaraya-Watson
    smoother with the kernels' own widths, so that the offset at a kernel is the reference's
    log-odds where the outputs near it are; the fixed part's prior sds
    ``_design.CENTRED_INTERCEPT_SCALE`` and ``CENTRED_SLOPE_SCALE`` (intercept, then slopes)
    and its Student-t degrees of freedom ``_design.CENTRED_ODDS_DF``. A kernel under which
    every row's value underflows takes the plain mean of the rows."""
    from .._mixture import log_kernels

    loc = np.asarray(design.loc, float)
    sigma = np.broadcast_to(np.asarray(design.width, float), loc.shape)
    with np.errstate(divide="ignore", under="ignore", invalid="ignore"):
        log_k = log_kernels(loc[None], sigma[None], lower, upper, np.asarray(censored, bool))[0]
    if counts is not None:
        log_k = log_k + np.log(np.asarray(counts, float))[:, None]
    log_k = np.where(np.isfinite(log_k), log_k, -1e300)  # (n, K); all -1e300: equal weights
    weight = np.exp(log_k - log_k.max(axis=0, keepdims=True))
    offset = weight.T @ odds_mean / weight.sum(axis=0)[:, None]
    scale = np.full(design.fixed_basis.shape[1], float(_design.CENTRED_SLOPE_SCALE))
    scale[0] = float(_design.CENTRED_INTERCEPT_SCALE)
    return {"odds_offset": offset, "odds_scale": scale, "odds_df": float(_design.CENTRED_ODDS_DF)}


def _check_group_rows(
    groups: tuple[np.ndarray, np.ndarray] | None, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """``groups`` as (each row's 0-based group (n,), each group's 0-based parent (G,));
    no groups: zeros and an empty parent array. ValueError names what is wrong."""
    if groups is None:
        return np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    grp, parent = (np.asarray(a) for a in groups)
    for name, a in (("group", grp), ("parent", parent)):
        if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"groups: the {name} indices must be a 1-D integer array")
    if grp.shape != (n,):
        raise ValueError(f"groups: one group per row ({n}) expected, found {grp.shape}")
    if parent.size == 0 or (parent < 0).any() or (grp < 0).any() or grp.max() >= parent.size:
        raise ValueError(
            f"groups: rows' groups must lie in 0..G - 1 with G = {parent.size} parents given, "
            "and parents must be >= 0"
        )
    return grp.astype(np.int64), parent.astype(np.int64)


def _no_whitening(r: int, c1: int, g: int = 0, j: int = 0, m: int = 0) -> dict[str, np.ndarray]:
    """Whitening data that leave the plain non-centred model (stan/transducer.stan), for
    ``g`` groups and ``j`` local blocks of ``m`` functions per class column."""
    return {
        "white_l": np.broadcast_to(np.eye(j * m), (c1, j * m, j * m)).copy(),
        "white_l_lambda": np.zeros((m, j * c1)), "white_l_kappa": np.zeros((m, j * c1)),
        "white_a": np.eye(r), "white_a_lambda": np.zeros(r), "white_a_kappa": np.zeros(r),
        "white_f": np.broadcast_to(np.eye(r), (c1, r, r)).copy(),
        "white_f_lambda": np.zeros((r, c1)), "white_f_kappa": np.zeros((r, c1)),
        "white_g_lambda": np.zeros((g, c1)), "white_g_kappa": np.zeros((g, c1)),
    }  # fmt: skip


def whitening(model: Any, fit: Any) -> dict[str, np.ndarray]:
    """The conditional whitening (stan/transducer.stan) from a non-centred Laplace fit.

    At the non-centred mode u* each smooth block's coordinates e = b / tau have minus
    Hessian ``tau*^2 H + I`` (the prior adds I), so the likelihood's precision for the
    coefficients b is ``H = (block - I) / tau*^2 = Q diag(lambda) Q'``; the mode b*
    satisfies ``H (b_hat - b*) = b* / tau*^2``, which gives the likelihood's linear term
    ``kappa = Q' H b_hat = (lambda + tau*^-2) Q' b*`` without inverting H. Both are kept
    fixed; the whitening then adapts to every tau the sampler visits.

    The group offsets (G > 0; stan/transducer.stan, "Group offsets") are whitened offset
    by offset, with each group's multinomial likelihood at the mode as a Normal in that
    offset alone (``TransducerDensity.group_likelihood``); the dense preconditioning found
    again in the whitened coordinates (:func:`precondition`) takes up what the diagonal
    leaves.
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
    out = {
        "white_a": rotation[0], "white_a_lambda": lam[:, 0], "white_a_kappa": kappa[:, 0],
        "white_f": rotation[1:], "white_f_lambda": lam[:, 1:], "white_f_kappa": kappa[:, 1:],
    }  # fmt: skip
    if model.G > 0:  # the group offsets': each group's multinomial likelihood at the mode
        out["white_g_lambda"], out["white_g_kappa"] = model.group_likelihood(fit.mode)
    if model.J > 0:  # the local blocks', block by block as the smooth blocks'
        out.update(_local_whitening(model, fit))
    return out


def _local_whitening(model: Any, fit: Any) -> dict[str, np.ndarray]:
    """The local blocks' conditional whitening (stan/transducer.stan, "Local smoothing
    scales"), by :func:`whitening`'s formulas, each block of M coordinates with its scale."""
    p = model.unpack(fit.mode)
    j, m, c1 = model.J, model.M, model.C - 1
    first = model.slices["e_l"].start  # block (c, i) at (c J + i) M .. + M
    white = np.zeros((c1, j * m, j * m))
    lam = np.empty((c1, j, m))
    kappa = np.empty((c1, j, m))
    for c in range(c1):
        for i in range(j):  # J (C - 1) blocks of M x M: not per item or draw
            at = np.arange(first + (c * j + i) * m, first + (c * j + i + 1) * m)
            t = p["log_tau_l"][c, i]
            block = fit.precision[np.ix_(at, at)]
            values, vectors = np.linalg.eigh((block - np.eye(m)) * np.exp(-2 * t))
            values = np.clip(values, 0.0, None)
            white[c, i * m : (i + 1) * m, i * m : (i + 1) * m] = vectors
            lam[c, i] = values
            kappa[c, i] = (values + np.exp(-2 * t)) * (vectors.T @ (np.exp(t) * p["e_l"][c, i]))
    # the program's (M, J (C - 1)) layout: column c J + i
    return {"white_l": white, "white_l_lambda": lam.transpose(2, 0, 1).reshape(m, j * c1),
            "white_l_kappa": kappa.transpose(2, 0, 1).reshape(m, j * c1)}  # fmt: skip


def precondition(
    data: Mapping[str, object], *, seed: int = 0, whiten: bool | None = None
) -> StanData:
    """The data with ``u_centre`` the posterior mode and the inverse Hessian there as the
    sampler's scale, applied where it differs from the identity (``stan/transducer.stan``,
    "Geometry"; :func:`preconditioning`; the Laplace approximation of
    :mod:`yieldwise.backends._laplace`), started from :func:`initial_values`.

    A linear change of variables: the posterior is unchanged, only the sampler's
    coordinates are. Measured (docs/model.md): two logits, n = 1,000, 255 -> 31 leapfrog
    steps per iteration. When no finite mode is found the data keep the identity (the
    plain non-centred model) and a :class:`PreconditioningWarning` says so.

    ``whiten`` True also whitens the smooth blocks conditionally on their scales
    (:func:`whitening`; stan/transducer.stan, "Conditional whitening"), then finds the
    mode and Hessian again in the new coordinates, from the same point mapped into them.
    None (the default) whitens designs of at most :data:`WHITEN_MAX_DIMS` output
    dimensions: measured 2026-11-24 (docs/model.md), it took the 1-D panel cells from
    35-123 leapfrog steps per iteration to 15 and two logits from 1 divergence to 0; on
    the shipped digits' joint fits of three and four dimensions (centres; at
    ``adapt_delta`` 0.95 both ways) it took the mean leapfrog steps per iteration from 257
    to 92 and the fits not clean from 7 of 9 to 4 of 9 (2026-12-07, docs/model.md,
    "Whitening for joint fits of three and four dimensions"); but on the 10-class digits
    (D = 9, centres) it kept 248 steps (255 without) and brought 10 divergent transitions
    where the plain form had none.
    """
    import warnings

    from ..backends._base import SamplingError
    from ..backends._laplace import TransducerDensity, laplace

    # the mode and Hessian of the non-centred model, whatever whitening ``data`` carry
    plain = _no_whitening(
        int(data["R"]), int(data["C"]) - 1, int(data.get("G", 0)),  # type: ignore[call-overload]
        int(data.get("J", 0)), int(data.get("M", 0)),  # type: ignore[call-overload]
    )  # fmt: skip
    out = StanData.from_mapping({**data, **plain})
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
    out = replace(out, **preconditioning(fit.mode, fit.vectors, fit.sd))
    if whiten is None:
        whiten = out.D <= WHITEN_MAX_DIMS
    if not whiten or out.R == 0:
        return out
    model = TransducerDensity(out)
    whitened = replace(out, **whitening(model, fit))
    white_model = TransducerDensity(whitened)
    # the same point in the whitened coordinates (its smooth coordinates are 0)
    blocks = model.smooth_blocks(fit.mode)
    start = white_model.whitened(fit.mode, blocks["b"], blocks.get("b_l"))
    if model.G > 0:
        groups = model.group_blocks(fit.mode)
        start = white_model.group_whitened(start, groups["h"], groups["b"])
    try:
        again = laplace(whitened, model=white_model, start=start)
    except (SamplingError, np.linalg.LinAlgError, FloatingPointError):
        return out  # the non-centred preconditioning stands
    gradient = np.abs(again.result.jac).max()  # the search's last gradient, at the mode
    if not gradient < _WHITENING_GRADIENT:
        return out
    return replace(whitened, **preconditioning(again.mode, again.vectors, again.sd))


#: :func:`precondition` whitens the smooth blocks by default for designs of at most this
#: many output dimensions: the grids (one and two) and joint fits of three and four, where
#: it was measured to help (2026-12-07, docs/model.md, "Whitening for joint fits of three
#: and four dimensions": the shipped digits' forest votes with the network's two logits,
#: with the k-NN votes too, and forest, k-NN and one logit, fit seeds 1-3 or 7-9, 9 fits
#: paired; whitened at ``adapt_delta`` 0.99, the default there since, against the plain
#: blocks at 0.95: divergent transitions 70 -> 0, tree-depth hits 140 -> 20, fits not clean
#: 7 -> 5 of 9, mean leapfrog steps per iteration 257 -> 153). Not beyond: on the ten-class
#: digits without reduction (D = 9) it brought 10 divergent transitions where the plain
#: blocks had none (2026-11-24); five to eight dimensions are not measured.
WHITEN_MAX_DIMS = 4

#: The whitened preconditioning is kept when the search for its mode converged (largest
#: |gradient| of the log density there).
_WHITENING_GRADIENT = 1e-2

#: The preconditioning applies the directions whose sd differs from 1 by more than this
#: factor on the log scale (``|log sd| > PRECONDITION_SD_TOLERANCE``) and takes the others
#: as 1: in the whitened coordinates almost every direction's is within a few per cent of 1
#: (at the shipped and study sets, 2026-12-01: 50 of 590 directions beyond 5 % on the
#: 3/5/8 digits, 78 of 393 on two logits at n = 3,600, 9-15 of 61 in one dimension), so
#: the program's U x U product per gradient becomes two U x u_rank ones, and the
#: directions left at 1 have sd within 5 % of the Normal approximation's (docs/model.md,
#: "The preconditioning in low rank"). 0 applies every direction (the full scale).
PRECONDITION_SD_TOLERANCE = 0.05


def preconditioning(
    centre: np.ndarray, vectors: np.ndarray, sd: np.ndarray, tolerance: float | None = None
) -> dict[str, Any]:
    """The data fields of the preconditioning (stan/transducer.stan, "Geometry") from the
    Normal approximation ``N(centre, V diag(sd^2) V')``, ``V`` orthonormal (``vectors``'
    columns).

    The directions with ``|log sd| > tolerance`` (:data:`PRECONDITION_SD_TOLERANCE` when
    None, read at call time so that a study may set it) are kept, the others taken as sd 1:
    the program computes ``u = centre + Q (axes * z)`` with ``Q`` the orthogonal matrix of
    the Householder QR of the kept directions (its first ``r`` columns are those directions,
    up to sign, and ``Q - I = left right'`` has rank ``r``) and ``axes`` their sds, then 1.
    So each kept direction has an axis of ``z`` of its own, which the sampler's diagonal
    metric can rescale, as with the full scale ``V diag(sd)``; ``u``'s covariance under
    ``z ~ N(0, I)`` is ``V_kept diag(sd_kept^2) V_kept' + (I - V_kept V_kept')``.
    """
    tolerance = PRECONDITION_SD_TOLERANCE if tolerance is None else float(tolerance)
    vectors, sd = np.asarray(vectors, dtype=float), np.asarray(sd, dtype=float)
    u = sd.size
    kept = np.flatnonzero(np.abs(np.log(sd)) > tolerance)
    r = int(kept.size)
    left, right = np.zeros((u, 0)), np.zeros((u, 0))
    if r:
        q, _ = np.linalg.qr(vectors[:, kept], mode="complete")  # r reflections: q - I rank r
        lu, values, rt = np.linalg.svd(q - np.eye(u))
        left, right = lu[:, :r] * values[:r], rt[:r].T
    axes = np.ones(u)
    axes[:r] = sd[kept]
    return {"u_centre": np.asarray(centre, dtype=float), "u_rank": r, "u_axes": axes,
            "u_left": left, "u_right": right, "u_basis": vectors, "u_sd": sd,
            "u_kept": kept, "preconditioned": 1}  # fmt: skip


def identity_preconditioning(u: int) -> dict[str, Any]:
    """The preconditioning fields of the plain non-centred model, ``u = z``."""
    return {"u_centre": np.zeros(u), "u_rank": 0, "u_axes": np.ones(u),
            "u_left": np.zeros((u, 0)), "u_right": np.zeros((u, 0)), "u_basis": np.eye(u),
            "u_sd": np.ones(u), "u_kept": np.zeros(0, dtype=np.int64),
            "preconditioned": 0}  # fmt: skip


def unconstrained_values(data: Mapping[str, Any], z: np.ndarray) -> np.ndarray:
    """``u`` of the sampler's coordinates ``z`` (``(..., U)``), as the program computes it:
    ``u_centre + Q (u_axes z)``, ``Q = I + u_left u_right'``."""
    x = np.asarray(z, dtype=float) * np.asarray(data["u_axes"], float)
    left, right = np.asarray(data["u_left"], float), np.asarray(data["u_right"], float)
    return np.asarray(data["u_centre"], float) + x + (x @ right) @ left.T


def sampler_coordinates(data: Mapping[str, Any], u: np.ndarray) -> np.ndarray:
    """The inverse of :func:`unconstrained_values`: ``z`` of ``u`` (``(..., U)``), exact
    since ``Q`` is orthogonal: ``Q' (u - u_centre) / u_axes``."""
    w = np.asarray(u, dtype=float) - np.asarray(data["u_centre"], float)
    left, right = np.asarray(data["u_left"], float), np.asarray(data["u_right"], float)
    return (w + (w @ left) @ right.T) / np.asarray(data["u_axes"], float)


def full_scale(data: Mapping[str, Any]) -> np.ndarray:
    """The Normal approximation's scale ``V diag(sd)`` (every direction, as the Laplace
    approximation draws), whatever ``u_rank`` the program applies."""
    return np.asarray(data["u_basis"], float) * np.asarray(data["u_sd"], float)


def _check_preconditioning(data: StanData) -> None:
    """The preconditioning is the invertible map :func:`preconditioning` makes of the Normal
    approximation recorded beside it (ValueError naming the field otherwise): ``u_axes``
    and ``u_sd`` positive, ``u_basis`` orthonormal, ``Q = I + u_left u_right'`` orthogonal,
    and the covariance of ``u`` under ``z ~ N(0, I)`` that of the kept directions ``u_kept``
    with the others at sd 1 (checked on a few probe vectors: O(U^2), not O(U^3))."""
    for name in ("u_axes", "u_sd"):
        value = getattr(data, name)
        if not ((value > 0).all() and np.isfinite(value).all()):
            raise ValueError(f"StanData.{name} must be positive and finite (sds)")
    kept = data.u_kept
    if kept.size and (kept.min() < 0 or kept.max() >= data.U or np.unique(kept).size != kept.size):
        raise ValueError(
            f"StanData.u_kept must be distinct directions in 0..U - 1 = {data.U - 1}, found "
            f"{kept.min()}..{kept.max()} with {kept.size - np.unique(kept).size} repeated"
        )
    basis = data.u_basis
    probe = np.random.default_rng(0).standard_normal((3, data.U))
    gap = float(np.abs((probe @ basis) @ basis.T - probe).max())  # V V' v = v
    if not gap < 1e-8:
        raise ValueError(
            f"StanData.u_basis must have orthonormal columns (the inverse Hessian's "
            f"eigenvectors); V V' moves a probe vector by {gap:.3g}"
        )
    left, right = data.u_left, data.u_right
    moved = probe + (probe @ right) @ left.T  # rows: (Q v)'
    if not np.allclose(np.linalg.norm(moved, axis=1), np.linalg.norm(probe, axis=1), rtol=1e-8):
        raise ValueError("StanData.u_left and u_right must make Q = I + u_left u_right' orthogonal")
    vk, sdk = basis[:, kept], data.u_sd[kept]
    qt = probe + (probe @ left) @ right.T  # rows: (Q' v)'
    through = qt * data.u_axes**2
    covariance = through + (through @ right) @ left.T  # rows: (Q D^2 Q' v)'
    expected = probe + ((probe @ vk) * (sdk**2 - 1)) @ vk.T
    if not np.allclose(covariance, expected, rtol=1e-6, atol=1e-8 * float(np.abs(expected).max())):
        raise ValueError(
            "StanData.u_left, u_right and u_axes must carry the kept directions u_kept of "
            "u_basis with their sds u_sd (the others at 1)"
        )


class PreconditioningWarning(UserWarning):
    """The Laplace preconditioning of the sampler could not be computed."""


def with_kernels(draws: Mapping[str, np.ndarray], data: Mapping[str, Any]) -> dict[str, Any]:
    """The program's draws with the kernels' locations and widths, ``mu`` and ``sigma``
    (chain, draw, K, D), taken from the data.

    The kernels are fixed (theory 3.1 with locations ``loc`` and widths ``width`` as data),
    so ``stan/transducer.stan`` does not write them with every draw; theory 3.2's formulas
    read them per draw, as the other quantities. Every backend's draws pass through here
    (:meth:`yieldwise.Transducer.fit`); a backend that wrote them already (the Laplace
    approximation) gets the same values.
    """
    chains, n_draws = np.shape(draws["w"])[:2]
    out = dict(draws)
    for name, field_name in (("mu", "loc"), ("sigma", "width")):
        value = np.asarray(data[field_name], dtype=float)
        out[name] = np.broadcast_to(value, (chains, n_draws, *value.shape))
    return out


def sampler_inits(data: Mapping[str, object], chains: int, seed: int | None = None) -> list[dict]:
    """One starting point per chain for the program's parameter ``z``.

    Preconditioned data (``u = u_centre + S z`` with the Laplace approximation):
    independent draws ``z ~ N(0, I)``, i.e. draws from the Normal approximation, which
    spreads the chains over the bulk of the posterior (R-hat compares them). Otherwise
    the :func:`initial_values` mapped to ``z``.
    """
    from ..backends._laplace import TransducerDensity

    rng = np.random.default_rng(seed)
    u = int(data["U"])  # type: ignore[call-overload]
    if int(data.get("preconditioned", 0)):  # type: ignore[call-overload]
        return [{"z": rng.standard_normal(u)} for _ in range(int(chains))]
    model = TransducerDensity(data)
    return [
        {"z": sampler_coordinates(data, model.start(init))}
        for init in initial_values(data, chains, seed)
    ]
