"""Maps between classifier outputs and the real line on which the mixture is fitted.

Theory 3.1: bounded outputs are mapped to the real line before modelling
(logit for (0, 1), log for positive outputs); densities reported on the
original scale carry the Jacobian. Two refinements, both recorded in the
transform so that a saved transducer reproduces every prediction:

* **Discrete outputs** (vote fractions ``k/200``, integer counts) are treated
  as what they are, bins of width ``h`` around each value: the model scores
  the probability of the bin ``[y - h/2, y + h/2]`` mapped through the
  transform (interval censoring). Exact 0s and 1s then need no squeezing:
  their bins reach ``-inf`` / ``+inf`` on the logit scale.
* **Continuous outputs** in ``[0, 1]`` with exact 0s or 1s are squeezed
  inwards, ``(y (n - 1) + 1/2) / n`` with ``n`` the calibration size
  (Smithson and Verkuilen, 2006), before the logit.
* **Probability vectors** (columns in ``[0, 1]`` summing to one per row) have
  one redundant coordinate; they are mapped to additive log-ratios
  ``log(p_j / p_last)``, ``j < last``, after the same squeezing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import expit, logit

from ._stan_data import detect_resolution, resolution_bins

__all__ = ["OutputTransform", "choose_transform"]

_KINDS = ("identity", "logit", "log", "simplex")
# Rows of a probability vector must sum to 1 within this to be read as a simplex.
_SIMPLEX_TOLERANCE = 1e-6


@dataclass(frozen=True)
class OutputTransform:
    """A recorded, reversible map from outputs ``(n, D)`` to model coordinates ``(n, D')``.

    Attributes
    ----------
    kind : {"identity", "logit", "log", "simplex"} per input column, or one "simplex"
        ``"simplex"`` applies to all columns together (additive log-ratios).
    columns : names of the input columns.
    resolution : lattice spacing ``h`` per input column, or None (continuous).
    squeeze_n : the ``n`` of the squeezing formula, the calibration size at fit time.
    """

    kind: tuple[str, ...]
    columns: tuple[str, ...]
    resolution: tuple[float | None, ...]
    squeeze_n: int

    # ------------------------------------------------------------- structure
    @property
    def is_simplex(self) -> bool:
        return self.kind == ("simplex",)

    @property
    def n_inputs(self) -> int:
        return len(self.columns)

    @property
    def model_dims(self) -> int:
        """Number of model coordinates ``D'`` (one fewer than inputs for a simplex)."""
        return self.n_inputs - 1 if self.is_simplex else self.n_inputs

    @property
    def model_dim_names(self) -> tuple[str, ...]:
        if self.is_simplex:
            last = self.columns[-1]
            return tuple(f"log({c}/{last})" for c in self.columns[:-1])
        return tuple(
            name if kind == "identity" else f"{kind}({name})"
            for name, kind in zip(self.columns, self.kind, strict=True)
        )

    # ----------------------------------------------------------- validation
    def check(self, outputs: np.ndarray, name: str = "outputs") -> None:
        """Raise if ``outputs`` (already a finite 2-D array) is outside this transform's domain."""
        if outputs.shape[1] != self.n_inputs:
            raise ValueError(
                f"{name} must have {self.n_inputs} column(s) {list(self.columns)}, "
                f"found {outputs.shape[1]}"
            )
        kinds = self.kind * self.n_inputs if self.is_simplex else self.kind
        for j, kind in enumerate(kinds):
            column = outputs[:, j]
            if kind in ("logit", "simplex") and ((column < 0) | (column > 1)).any():
                raise ValueError(
                    f"{name} column {self.columns[j]!r} must lie in [0, 1] (transform {kind}), "
                    f"found range [{column.min()}, {column.max()}]"
                )
            if kind == "log" and (column < 0).any():
                raise ValueError(
                    f"{name} column {self.columns[j]!r} must be non-negative (transform log), "
                    f"found minimum {column.min()}"
                )
            if kind == "log" and self.resolution[j] is None and (column == 0).any():
                raise ValueError(
                    f"{name} column {self.columns[j]!r} has zeros, which the continuous log "
                    "transform cannot map; use output_transform='identity'"
                )
        if self.is_simplex:
            sums = outputs.sum(axis=1)
            if np.abs(sums - 1).max() > _SIMPLEX_TOLERANCE:
                raise ValueError(
                    f"{name} rows must sum to 1 for the simplex transform, found sums in "
                    f"[{sums.min()}, {sums.max()}]"
                )

    # ----------------------------------------------------------------- maps
    def _squeeze(self, values: np.ndarray, parts: int) -> np.ndarray:
        n = self.squeeze_n
        return (values * (n - 1) + 1.0 / parts) / n

    def forward(self, outputs: np.ndarray) -> np.ndarray:
        """Point values on the model scale (continuous treatment, squeezed where needed)."""
        if self.is_simplex:
            p = self._squeeze(outputs, outputs.shape[1])
            return np.log(p[:, :-1]) - np.log(p[:, -1:])
        out = np.empty_like(outputs, dtype=float)
        for j, kind in enumerate(self.kind):
            out[:, j] = _forward_column(kind, outputs[:, j], self._squeeze)
        return out

    def inverse(self, model_values: np.ndarray) -> np.ndarray:
        """Outputs from model coordinates (the inverse of :meth:`forward`)."""
        z = np.atleast_2d(np.asarray(model_values, float))
        n = self.squeeze_n
        if self.is_simplex:
            expz = np.exp(np.column_stack([z, np.zeros(len(z))]))
            p = expz / expz.sum(axis=1, keepdims=True)
            return (p * n - 1.0 / p.shape[1]) / (n - 1)
        out = np.empty_like(z)
        for j, kind in enumerate(self.kind):
            if kind == "identity":
                out[:, j] = z[:, j]
            elif kind == "log":
                out[:, j] = np.exp(z[:, j])
            else:  # forward squeezes every logit column, so undo the squeeze too
                out[:, j] = (expit(z[:, j]) * n - 0.5) / (n - 1)
        return out

    def intervals(self, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Model-scale ``(lower, upper, censored)``: bins for discrete columns, points otherwise.

        ``censored`` is a length-``D'`` 0/1 array; for uncensored dimensions
        ``lower == upper`` is the point value.
        """
        point = self.forward(outputs)
        lower, upper = point.copy(), point.copy()
        censored = np.zeros(self.model_dims, dtype=int)
        if self.is_simplex:
            return lower, upper, censored
        for j, (kind, h) in enumerate(zip(self.kind, self.resolution, strict=True)):
            if h is None:
                continue
            censored[j] = 1
            low, high = resolution_bins(outputs[:, j], h, _SUPPORT[kind])
            lower[:, j], upper[:, j] = _bin_bounds(kind, low, high)
        return lower, upper, censored

    def log_jacobian(self, outputs: np.ndarray) -> np.ndarray:
        """``log |d model / d output|`` per item, turning model densities into output densities.

        For a censored (discrete) column the model gives the probability of the
        bin, and the factor is ``1/h``: the density averaged over the bin.
        """
        total = np.zeros(outputs.shape[0])
        n = self.squeeze_n
        if self.is_simplex:
            parts = outputs.shape[1]
            p = self._squeeze(outputs, parts)
            # alr on the simplex: |J| = prod_j 1/p_j, times the squeezing factor per free part.
            return -np.log(p).sum(axis=1) + (parts - 1) * np.log((n - 1) / n)
        for j, (kind, h) in enumerate(zip(self.kind, self.resolution, strict=True)):
            y = outputs[:, j]
            if h is not None:
                total -= np.log(h)
            elif kind == "log":
                total -= np.log(y)
            elif kind == "logit":
                s = self._squeeze(y, 2)
                total += np.log((n - 1) / n) - np.log(s) - np.log1p(-s)
        return total

    # ------------------------------------------------------------ recording
    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> OutputTransform:
        """The transform recorded by :meth:`to_json`, checked (ValueError names the field)."""
        record = json.loads(text)
        if not isinstance(record, dict):
            raise ValueError(f"expected a JSON object, found {type(record).__name__}")
        missing = [k for k in ("kind", "columns", "resolution", "squeeze_n") if k not in record]
        if missing:
            raise ValueError(f"the transform record lacks {missing}")
        kind, columns = record["kind"], record["columns"]
        resolution, squeeze_n = record["resolution"], record["squeeze_n"]
        if not isinstance(kind, list) or not isinstance(columns, list) or not columns:
            raise ValueError(
                f"kind and columns must be non-empty lists, found {kind!r}, {columns!r}"
            )
        if kind != ["simplex"] and (
            len(kind) != len(columns) or any(k not in _KINDS[:3] for k in kind)
        ):
            raise ValueError(
                f"kind must be ['simplex'] or one of {list(_KINDS[:3])} per column "
                f"({len(columns)}), found {kind!r}"
            )
        if kind == ["simplex"] and len(columns) < 2:
            raise ValueError(f"a simplex transform needs at least 2 columns, found {columns!r}")
        if not isinstance(resolution, list) or len(resolution) != len(columns) or any(
            h is not None and (isinstance(h, bool) or not isinstance(h, int | float)
                               or not np.isfinite(h) or h <= 0)
            for h in resolution
        ):  # fmt: skip
            raise ValueError(
                f"resolution must give null or a positive spacing per column ({len(columns)}), "
                f"found {resolution!r}"
            )
        if isinstance(squeeze_n, bool) or not isinstance(squeeze_n, int) or squeeze_n < 2:
            raise ValueError(f"squeeze_n must be an integer >= 2, found {squeeze_n!r}")
        return cls(
            kind=tuple(kind),
            columns=tuple(str(c) for c in columns),
            resolution=tuple(None if h is None else float(h) for h in resolution),
            squeeze_n=squeeze_n,
        )


def _forward_column(kind: str, y: np.ndarray, squeeze: Any) -> np.ndarray:
    if kind == "identity":
        return y.astype(float)
    if kind == "log":
        with np.errstate(divide="ignore"):
            return np.log(y)
    if kind != "logit":
        raise ValueError(f"unknown output transform kind {kind!r}; known: {list(_KINDS)}")
    return logit(squeeze(y, 2))


# Where each kind's outputs live: bins of discrete outputs are clipped to it.
_SUPPORT = {"identity": (-np.inf, np.inf), "log": (0.0, np.inf), "logit": (0.0, 1.0)}


def _bin_bounds(kind: str, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin edges (already inside the kind's support) mapped to the model scale."""
    if kind == "identity":
        return low, high
    with np.errstate(divide="ignore"):
        if kind == "log":
            return np.log(low), np.log(high)
        return logit(low), logit(high)


def choose_transform(
    outputs: np.ndarray,
    columns: Sequence[str],
    spec: str | Sequence[str] = "auto",
    resolution: str | float | Sequence[float | None] | None = "auto",
) -> OutputTransform:
    """Pick the transform for calibration ``outputs`` (finite, shape ``(n, D)``).

    ``spec="auto"``: a probability vector (D >= 2 columns in [0, 1] summing to
    one) gets ``"simplex"``; otherwise per column, ``"logit"`` for values in
    [0, 1], ``"log"`` for positive values, ``"identity"`` for anything else.
    A string applies to every column; a sequence gives one kind per column.
    ``resolution="auto"`` detects lattice-valued (discrete) columns; None
    treats all columns as continuous; numbers give the spacing per column.
    """
    n, d = outputs.shape
    in_unit = bool(((outputs >= 0) & (outputs <= 1)).all())
    if spec == "auto":
        sums_to_one = np.abs(outputs.sum(axis=1) - 1).max() <= _SIMPLEX_TOLERANCE
        if d >= 2 and in_unit and sums_to_one:
            kinds: tuple[str, ...] = ("simplex",)
        else:
            kinds = tuple(_auto_kind(outputs[:, j]) for j in range(d))
    elif isinstance(spec, str):
        if spec not in _KINDS:
            raise ValueError(
                f"output_transform must be 'auto' or one of {list(_KINDS)}, found {spec!r}"
            )
        if spec == "simplex" and d < 2:
            raise ValueError("output_transform='simplex' needs at least 2 output columns, found 1")
        kinds = ("simplex",) if spec == "simplex" else (spec,) * d
    else:
        kinds = tuple(spec)
        if len(kinds) != d or any(k not in _KINDS[:3] for k in kinds):
            raise ValueError(
                f"output_transform as a sequence must give one of {list(_KINDS[:3])} for each of "
                f"the {d} output columns, found {list(kinds)}"
            )

    if kinds == ("simplex",) or resolution is None:
        resolutions: tuple[float | None, ...] = (None,) * d
    elif isinstance(resolution, str):
        if resolution != "auto":
            raise ValueError(f"resolution must be 'auto', None or numbers, found {resolution!r}")
        resolutions = tuple(detect_resolution(outputs[:, j]) for j in range(d))
    else:
        values = [resolution] * d if np.isscalar(resolution) else list(resolution)  # type: ignore[list-item]
        if len(values) != d or any(
            v is not None and not (np.isfinite(v) and v > 0) for v in values
        ):
            raise ValueError(
                f"resolution must give a positive spacing or None for each of the {d} output "
                f"columns, found {resolution!r}"
            )
        resolutions = tuple(None if v is None else float(v) for v in values)

    transform = OutputTransform(
        kind=kinds, columns=tuple(str(c) for c in columns), resolution=resolutions, squeeze_n=n
    )
    transform.check(outputs)
    return transform


def _auto_kind(column: np.ndarray) -> str:
    if ((column >= 0) & (column <= 1)).all():
        return "logit"
    if (column > 0).all():
        return "log"
    return "identity"
