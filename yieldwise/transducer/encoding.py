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
* **Two continuous model coordinates** (two logits, a probability vector of three
  classes) are then rotated onto their principal axes, ``(z - centre) @ axes.T``
  (:data:`ROTATE_TWO_DIMENSIONS`). A rotation and a shift have Jacobian 1, so
  densities are unchanged; the kernels' grid is then laid along the outputs' own
  directions instead of over a square that correlated outputs fill only along its
  diagonal (docs/model.md, "Two correlated dimensions"). When the calibration outputs
  take more than two distinct values and all lie on one line (two logits that are exact
  negatives; a column that never moves), only the first axis is kept: the outputs are
  modelled as one dimension, their position along the line (docs/model.md, "Outputs on a
  line"); an output off that line is projected onto it, with an
  :class:`ExtrapolationWarning`.
* **Two distinct values in one continuous column** are read as two bins of their spacing,
  with a :class:`LatticeWarning`: a density cannot be learnt from two points.
* **Two distinct outputs of two or more coordinates** (hard labels given as two logits,
  (5, -5) / (-5, 5)) are modelled on the line through them, as two bins of the distance
  between them along it (:attr:`OutputTransform.line_resolution`): the binomial model at
  each output, as for one column (docs/model.md, "Hard labels").
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from .._validation import as_float_array, json_object

__all__ = [
    "SUPPORT",
    "ExtrapolationWarning",
    "LatticeWarning",
    "OutputTransform",
    "as_outputs",
    "choose_transform",
    "columns_naming_classes",
    "misnamed_class_columns",
    "detect_resolution",
    "few_points_on_a_line",
    "joint_outputs",
    "names_given",
    "principal_axes",
    "resolution_bins",
    "snap_to_lattice",
    "unique_rows",
    "warn_off_line",
    "warn_outside",
]

_KINDS = ("identity", "logit", "log", "simplex")
# Rows of a probability vector must sum to 1 within this to be read as a simplex.
_SIMPLEX_TOLERANCE = 1e-6
#: Rotate two continuous model coordinates onto their principal axes (the module's
#: docstring). Measured on the shipped digits' network logits (correlation -0.999, seed 2,
#: the vignettes' fit): 28 divergent transitions at 38.8 leapfrog steps per iteration
#: unrotated, 0 at 30.7 rotated (docs/model.md, "Two correlated dimensions").
ROTATE_TWO_DIMENSIONS = True
# Principal axes are orthonormal within this (checked when a recorded transform is read).
_ORTHONORMAL_TOLERANCE = 1e-9
#: Two continuous coordinates lie on a line when their spread across the first principal
#: axis is at most this fraction of their spread along it (rounding: two logits (z, -z)
#: stored as float64 spread about 1e-16 across): then only the first axis is kept.
LINE_TOLERANCE = 1e-9
# An output is on a fitted lattice when it lies within this many steps of a lattice point,
# relative to the step count (detect_resolution's own tolerance, rtol=1e-6).
_LATTICE_RTOL = 1e-6


class ExtrapolationWarning(UserWarning):
    """Outputs outside the range of the calibration outputs: the transducer extrapolates.

    There the probabilities come from the tails of the fitted mixture, not from data;
    :meth:`Transducer.plot` shows them beyond the calibration range.
    """


class ConstantOutputWarning(UserWarning):
    """The calibration outputs take one value: the transducer can learn only the class
    frequencies, and gives every output the same ``p(c | y)``.

    Right for a baseline that always outputs the same value (filter this warning then);
    for a classifier's scores it usually means a wrong column or a classifier that failed.
    """


class LatticeWarning(UserWarning):
    """Outputs off the lattice a discrete transducer was fitted on, each taken as its bin;
    or a continuous column with two distinct values, read as a lattice of two bins.

    A transducer fitted on lattice outputs (vote fractions ``k/200``) models bins
    ``[v - h/2, v + h/2]``; an output between lattice points is read as the bin that holds
    it, i.e. snapped to the nearest lattice value.
    """


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
    centre, axes : None, or the rotation applied last: model coordinates are
        ``(z - centre) @ axes.T`` with ``z`` the per-column (or log-ratio) values and
        ``axes`` orthonormal rows, largest variance first (:func:`principal_axes`); one
        row only for outputs on a line (a projection onto it: :attr:`is_projected`).
        Only for continuous coordinates: a lattice column's bins are per axis.
    line_resolution : None, or for a projection onto a line the spacing ``h`` of a lattice
        of positions along it, ``(k + 1/2) h`` for integer ``k``: two distinct outputs,
        at ``-h/2`` and ``h/2`` (``centre`` their midpoint), each read as its bin
        ``[k h, (k + 1) h]`` of positions (:func:`choose_transform`).
    named : True when the user gave the column names (a DataFrame, a named Series, a
        joint fit's mapping), False when they are the defaults of a plain array
        (``output``, ``output_0``, ...), None when not recorded (a file written before
        the record, within format version 7): :func:`as_outputs` then takes the default
        names as unnamed. A DataFrame given for prediction is matched by name exactly
        when the fitted names were given.
    """

    kind: tuple[str, ...]
    columns: tuple[str, ...]
    resolution: tuple[float | None, ...]
    squeeze_n: int
    centre: tuple[float, ...] | None = None
    axes: tuple[tuple[float, ...], ...] | None = None
    line_resolution: float | None = None
    named: bool | None = None

    # ------------------------------------------------------------- structure
    @property
    def is_simplex(self) -> bool:
        return self.kind == ("simplex",)

    @property
    def n_inputs(self) -> int:
        return len(self.columns)

    @property
    def coordinate_dims(self) -> int:
        """Number of coordinates before the rotation (one fewer than inputs for a simplex)."""
        return self.n_inputs - 1 if self.is_simplex else self.n_inputs

    @property
    def model_dims(self) -> int:
        """Number of model coordinates ``D'``: :attr:`coordinate_dims`, or the axes kept."""
        return self.coordinate_dims if self.axes is None else len(self.axes)

    @property
    def is_rotated(self) -> bool:
        return self.axes is not None

    @property
    def is_projected(self) -> bool:
        """True when the outputs are modelled on a line: fewer axes than coordinates."""
        return self.model_dims < self.coordinate_dims

    def off_line(self, outputs: np.ndarray) -> np.ndarray:
        """Each output's distance (in the unrotated coordinates) from the line a projected
        transform models (zeros when nothing is projected)."""
        if not self.is_projected:
            return np.zeros(len(outputs))
        z = self.unrotated(outputs) - np.asarray(self.centre)
        a = np.asarray(self.axes)
        return np.linalg.norm(z - (z @ a.T) @ a, axis=1)

    @property
    def model_dim_names(self) -> tuple[str, ...]:
        if self.is_rotated:
            return tuple(f"axis{j + 1}" for j in range(self.model_dims))
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

    def onto_domain(self, outputs: np.ndarray) -> np.ndarray:
        """``outputs`` moved to the nearest point of this transform's domain: logit columns
        clipped to [0, 1]; a probability vector's entries clipped at 0 and the row
        renormalised.

        :meth:`inverse` undoes the squeeze affinely, so model values beyond the squeezed
        outputs' range (a kernel's tail past the last possible output, about
        ``1 / (C n)`` from the simplex's edge) come back slightly outside [0, 1]: points a
        user's rule may be handed (``long_run_utility(rule=callable)``), which
        :meth:`check` would refuse. Outputs inside the domain are returned unchanged."""
        out = np.array(outputs, dtype=float)
        if self.is_simplex:
            out = np.clip(out, 0.0, None)
            return out / out.sum(axis=1, keepdims=True)
        for j, kind in enumerate(self.kind):
            if kind == "logit":
                out[:, j] = np.clip(out[:, j], 0.0, 1.0)
        return out

    # ----------------------------------------------------------------- maps
    def _squeeze(self, values: np.ndarray, parts: int) -> np.ndarray:
        n = self.squeeze_n
        return (values * (n - 1) + 1.0 / parts) / n

    def forward(self, outputs: np.ndarray) -> np.ndarray:
        """Point values on the model scale (continuous treatment, squeezed where needed)."""
        return self._rotate(self.unrotated(outputs))

    def unrotated(self, outputs: np.ndarray) -> np.ndarray:
        """The per-column (or log-ratio) values, before the rotation (if any)."""
        if self.is_simplex:
            p = self._squeeze(outputs, outputs.shape[1])
            return np.log(p[:, :-1]) - np.log(p[:, -1:])
        out = np.empty_like(outputs, dtype=float)
        for j, kind in enumerate(self.kind):
            out[:, j] = _forward_column(kind, outputs[:, j], self._squeeze)
        return out

    def _rotate(self, z: np.ndarray) -> np.ndarray:
        if self.axes is None:
            return z
        return (z - np.asarray(self.centre)) @ np.asarray(self.axes).T

    def inverse(self, model_values: np.ndarray) -> np.ndarray:
        """Outputs from model coordinates (the inverse of :meth:`forward`)."""
        z = np.atleast_2d(np.asarray(model_values, float))
        if self.axes is not None:  # the axes are orthonormal: the inverse is the transpose
            z = z @ np.asarray(self.axes) + np.asarray(self.centre)
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
        if self.line_resolution is not None:
            censored[0] = 1
            lower[:, 0], upper[:, 0] = self.line_bins(point[:, 0])
            return lower, upper, censored
        if self.is_simplex:
            return lower, upper, censored
        for j, (kind, h) in enumerate(zip(self.kind, self.resolution, strict=True)):
            if h is None:
                continue
            censored[j] = 1
            low, high = resolution_bins(outputs[:, j], h, SUPPORT[kind])
            lower[:, j], upper[:, j] = _bin_bounds(kind, low, high)
        return lower, upper, censored

    def line_steps(self, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For a lattice on the line: each position in steps of :attr:`line_resolution`
        from the lattice's origin, and the lattice point ``k`` whose bin holds it
        (positions ``(k + 1/2) h``)."""
        assert self.line_resolution is not None
        steps = np.asarray(position, dtype=float) / self.line_resolution - 0.5
        return steps, np.round(steps)

    def line_bins(self, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bins ``[k h, (k + 1) h]`` of positions on the line's lattice that hold
        ``position`` (the bins tile the line, so their edges are shared exactly)."""
        h = self.line_resolution
        assert h is not None
        _, k = self.line_steps(position)
        return k * h + 0.0, (k + 1.0) * h  # + 0.0: the bin of k = -0.0 starts at 0.0

    def log_jacobian(self, outputs: np.ndarray) -> np.ndarray:
        """``log |d model / d output|`` per item, turning model densities into output densities.

        For a censored (discrete) column the model gives the probability of the
        bin, and the factor is ``1/h``: the density averaged over the bin. The rotation,
        if any, adds nothing: an orthonormal map and a shift have Jacobian 1.
        """
        total = np.zeros(outputs.shape[0])
        n = self.squeeze_n
        if self.line_resolution is not None:
            # the model gives the probability of a bin of positions: the density along
            # the line averaged over it (the two outputs' law is that of their bins)
            return total - np.log(self.line_resolution)
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
        record = json_object(
            text, ("kind", "columns", "resolution", "squeeze_n"), "the transform record"
        )
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
        centre, axes = record.get("centre"), record.get("axes")
        named = record.get("named")  # absent from files written before it was recorded
        if named is not None and not isinstance(named, bool):
            raise ValueError(f"named must be true, false or null, found {named!r}")
        transform = cls(
            kind=tuple(kind),
            columns=tuple(str(c) for c in columns),
            resolution=tuple(None if h is None else float(h) for h in resolution),
            squeeze_n=squeeze_n,
            named=named,
        )
        line_resolution = record.get("line_resolution")
        if centre is None and axes is None:
            if line_resolution is not None:
                raise ValueError(
                    "line_resolution needs a projection onto a line (centre and axes), found none"
                )
            return transform
        return transform.rotated(centre, axes).on_line_lattice(line_resolution)

    def on_line_lattice(self, spacing: Any) -> OutputTransform:
        """This projection onto a line with its positions read as a lattice of spacing
        ``spacing`` (None: continuous positions), checked: ValueError says what is wrong."""
        if spacing is None:
            return replace(self, line_resolution=None)
        if (
            isinstance(spacing, bool)
            or not isinstance(spacing, int | float)
            or not np.isfinite(spacing)
            or spacing <= 0
        ):
            raise ValueError(
                f"line_resolution must be null or a positive spacing, found {spacing!r}"
            )
        if not self.is_projected:
            raise ValueError(
                "line_resolution needs a projection onto a line (axes 1 x d), found "
                f"axes {self.axes!r}"
            )
        return replace(self, line_resolution=float(spacing))

    def rotated(self, centre: Any, axes: Any) -> OutputTransform:
        """This transform followed by the rotation ``(z - centre) @ axes.T`` (``axes``
        ``d x d``, or ``1 x d``: the projection onto a line), checked: ValueError names
        what is wrong (shape, orthonormality, a lattice column)."""
        d = self.coordinate_dims
        try:
            c = np.asarray(centre, dtype=float)
            a = np.asarray(axes, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"centre and axes must be numbers, found {centre!r}, {axes!r}"
            ) from exc
        if (
            c.shape != (d,)
            or a.shape not in ((d, d), (1, d))
            or not (np.isfinite(c).all() and np.isfinite(a).all())
        ):
            raise ValueError(
                f"centre must hold {d} finite numbers and axes {d} x {d} (or 1 x {d}, a "
                f"line), found shapes {c.shape} and {a.shape}"
            )
        if np.abs(a @ a.T - np.eye(len(a))).max() > _ORTHONORMAL_TOLERANCE:
            raise ValueError(f"axes must be orthonormal rows, found {a.tolist()}")
        if any(h is not None for h in self.resolution):
            raise ValueError(
                "a rotation applies to continuous coordinates only; resolution is "
                f"{list(self.resolution)}"
            )
        return OutputTransform(
            kind=self.kind, columns=self.columns, resolution=self.resolution,
            squeeze_n=self.squeeze_n, centre=tuple(float(v) for v in c),
            axes=tuple(tuple(float(v) for v in row) for row in a), named=self.named,
        )  # fmt: skip


def principal_axes(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean of ``z`` (n, D) and its principal axes as orthonormal rows, largest
    variance first; each axis's largest-magnitude entry is made positive, so the result
    does not depend on the eigen-solver's signs."""
    centre = z.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(z - centre, rowvar=False))
    axes = vectors[:, np.argsort(values)[::-1]].T
    signs = np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])
    return centre, axes * signs[:, None]


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
SUPPORT = {"identity": (-np.inf, np.inf), "log": (0.0, np.inf), "logit": (0.0, 1.0)}


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
    *,
    rotate: bool = True,
    few_points: bool = True,
    named: bool | None = None,
) -> OutputTransform:
    """Pick the transform for calibration ``outputs`` (finite, shape ``(n, D)``).

    ``spec="auto"``: a probability vector (D >= 2 columns in [0, 1] summing to
    one) gets ``"simplex"``; otherwise per column, ``"logit"`` for values in
    [0, 1], ``"log"`` for positive values, ``"identity"`` for anything else.
    A string applies to every column; a sequence gives one kind per column.
    ``resolution="auto"`` detects lattice-valued (discrete) columns; None
    treats all columns as continuous; numbers give the spacing per column.
    ``rotate`` (with :data:`ROTATE_TWO_DIMENSIONS`): two continuous model coordinates
    end in a rotation onto their principal axes (:func:`principal_axes`). With ``rotate``
    and ``few_points``, outputs of two or more model coordinates that take at most two
    distinct values are modelled on a line through them (:func:`few_points_on_a_line`;
    a class reduction, which models the outputs' ranks instead, asks for it only when it
    does not apply). ``named``: whether the user gave ``columns``
    (:attr:`OutputTransform.named`, :func:`names_given`).
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
        kind=kinds,
        columns=tuple(str(c) for c in columns),
        resolution=resolutions,
        squeeze_n=n,
        named=named,
    )
    transform.check(outputs)
    if d == 1 and not transform.is_simplex and resolutions[0] is None:
        spacing = _two_values_as_bins(outputs[:, 0], transform.columns[0])
        if spacing is not None:
            transform = replace(transform, resolution=(spacing,))
    if rotate and few_points:
        few = few_points_on_a_line(outputs, transform, explicit=not isinstance(resolution, str))
        if few is not None:
            return few
    if (
        rotate
        and ROTATE_TWO_DIMENSIONS
        and transform.model_dims == 2
        and all(h is None for h in resolutions)
        and n > 2
    ):
        z = transform.unrotated(outputs)
        if np.isfinite(z).all() and np.ptp(z, axis=0).max() > 0:
            centre, axes = principal_axes(z)
            spread = np.ptp((z - centre) @ axes.T, axis=0)
            # on a line: model the position along it (two points stay 2-D, which warns:
            # their position would take two values, which need bins, _two_values_as_bins)
            if spread[1] <= LINE_TOLERANCE * spread[0] and len(unique_rows(z)[0]) > 2:
                transform = transform.rotated(centre, axes[:1])
            elif np.ptp(z, axis=0).min() > 0:
                transform = transform.rotated(centre, axes)
    return transform


def few_points_on_a_line(
    outputs: np.ndarray, transform: OutputTransform, *, explicit: bool = False
) -> OutputTransform | None:
    """None, or for outputs of two or more model coordinates that take one or two distinct
    values, the transform (``transform``'s kinds and columns) that models them on a line,
    as one dimension.

    Two points: the line through them (in the coordinates before any rotation, every
    column read as continuous), its positions a lattice of the points' distance ``h``,
    the points at ``-h/2`` and ``h/2`` in their own bins: the binomial model at each
    point, which is what the data can tell. On a grid over the coordinates the
    bilinear log-density runs to the grid's corners and the sampler diverges (two logits
    (5, -5) / (-5, 5): 22-34 divergent transitions; docs/model.md, "Hard labels"). One
    point: the line along the first coordinate through it, one position. ``explicit``:
    the caller gave ``resolution`` (not "auto"), which a lattice on the line replaces,
    so a :class:`LatticeWarning` says so. An output off the line is taken at its
    projection, with an :class:`ExtrapolationWarning` (:func:`warn_off_line`).
    """
    if transform.model_dims < 2:
        return None
    points = unique_rows(outputs)[0]
    if len(points) > 2:
        return None
    continuous = replace(transform, resolution=(None,) * transform.n_inputs)
    z = continuous.unrotated(points)
    if len(z) == 1:
        axis = np.eye(z.shape[1])[0]
        return continuous.rotated(z[0], axis[None])
    step = z[1] - z[0]
    spacing = float(np.linalg.norm(step))
    if explicit:
        warnings.warn(
            f"the outputs {list(transform.columns)} take only two distinct values "
            f"({points[0].tolist()} and {points[1].tolist()}); they are modelled on the line "
            "through them as two bins, the binomial model at each value, in place of the "
            "resolution given",
            LatticeWarning,
            stacklevel=4,
        )
    return continuous.rotated(0.5 * (z[0] + z[1]), (step / spacing)[None]).on_line_lattice(spacing)


def _two_values_as_bins(column: np.ndarray, name: str) -> float | None:
    """None, or for a continuous column that takes exactly two distinct values the
    lattice spacing that reads them as two bins, with a :class:`LatticeWarning`.

    A density over the real line cannot be learnt from two points: the model's smooth
    limit (log-density and log-odds linear) then spreads mass over the line between them,
    where no output is, and misstates p(class | output) at both (measured: 0.983 where
    the counted frequency is 0.796, docs/model.md "Hard labels"), while a smooth part
    learnt from two points diverges. Two bins are the binomial model at each value, what
    ``resolution="auto"`` gives such a column.
    """
    values = np.unique(column)
    if values.size != 2:
        return None
    spacing = float(values[1] - values[0])
    warnings.warn(
        f"output column {name!r} takes only two distinct values ({values[0]:.6g} and "
        f"{values[1]:.6g}), which a continuous density cannot model (a continuous column: "
        "resolution=None, or a class reduction's margin of the top two scores); they are "
        f"read as two bins of a lattice of spacing {spacing:.6g}, the binomial model at each "
        "value (resolution='auto' does the same for a column without this warning)",
        LatticeWarning,
        stacklevel=4,
    )
    return spacing


def _auto_kind(column: np.ndarray) -> str:
    if ((column >= 0) & (column <= 1)).all():
        return "logit"
    if (column > 0).all():
        return "log"
    return "identity"


# ------------------------------------------------------- lattice detection
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
    output transform before :func:`~yieldwise.transducer.stan_data.build_stan_data`.
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


# ------------------------------------------------- outputs given by a user
def names_given(outputs: Any) -> bool:
    """Whether ``outputs`` carry column names of the user's: a DataFrame, a named Series,
    or a mapping of several classifiers' outputs (a joint fit, whose columns the mapping's
    keys name). A plain array (its columns then named ``output``, ``output_0``, ...,
    by :func:`as_outputs`) and an unnamed Series do not. Recorded at fit time as
    :attr:`OutputTransform.named`."""
    if isinstance(outputs, pd.DataFrame | Mapping):
        return True
    return isinstance(outputs, pd.Series) and outputs.name is not None


# How columns_naming_classes splits a column name into tokens.
_NAME_TOKENS = re.compile(r"[^0-9A-Za-z]+")


def columns_naming_classes(columns: Sequence[Any], labels: Sequence[Any]) -> tuple[int, ...] | None:
    """The classes that output columns name, as positions in ``labels``, or None.

    Each column name is split into tokens at every run of characters other than ASCII
    letters and digits (``re.split(r"[^0-9A-Za-z]+", name)``: ``"p_3"`` gives ``p`` and ``3``,
    ``"logit-other"`` ``logit`` and ``other``); the whole name counts as a token too
    (labels such as ``"New York"``). A column names class ``c`` when one of its tokens
    equals ``str(c)`` (exactly, case included). When there are as many columns as
    labels, every column names exactly one class and no two columns name the same one,
    the result is the permutation ``perm`` with ``perm[j]`` the position in ``labels``
    of column ``j``'s class; otherwise None (names that are not class labels:
    ``"score"``, ``"margin"``; a column naming two classes; two columns one class).

    A multi-column output is read by position, column ``j`` the output for
    ``labels[j]`` (a probability vector, one logit per class, the "standard" rule's
    argmax), so a permutation other than the identity means the columns name their
    classes in another order than ``labels``: ``Transducer.fit`` refuses that.

    Examples
    --------
    >>> columns_naming_classes(["p_3", "p_2", "p_1", "p_0"], [0, 1, 2, 3])
    (3, 2, 1, 0)
    >>> columns_naming_classes(["logit_other", "logit_eight"], ["eight", "other"])
    (1, 0)
    >>> columns_naming_classes(["a", "b"], ["a", "b"])
    (0, 1)
    >>> columns_naming_classes(["score", "margin"], ["a", "b"]) is None
    True
    """
    columns, texts = list(columns), [str(label) for label in labels]
    if len(columns) != len(texts) or not columns:
        return None
    found = []
    for column in columns:
        name = str(column)
        tokens = {name, *(token for token in _NAME_TOKENS.split(name) if token)}
        named = [c for c, text in enumerate(texts) if text in tokens]
        if len(named) != 1:
            return None
        found.append(named[0])
    if len(set(found)) != len(found):
        return None
    return tuple(found)


def misnamed_class_columns(
    columns: Sequence[Any], labels: Sequence[Any]
) -> tuple[list[Any], list[Any]] | None:
    """When ``columns`` name the classes (:func:`columns_naming_classes`) in another order
    than ``labels``: the classes in the columns' order (the ``class_labels`` that would
    match them) and the columns in the classes' order (the reordering that would); else
    None. The one reading of misordered class columns, for ``Transducer.fit`` and the
    standard rule of :func:`yieldwise.long_run_utility`, each refusing in its own words."""
    perm = columns_naming_classes(columns, labels)
    if perm is None or perm == tuple(range(len(labels))):
        return None
    columns, labels = list(columns), list(labels)
    return [labels[k] for k in perm], [columns[perm.index(k)] for k in range(len(labels))]


# ---------------------------------------------------------------------- helpers
def as_outputs(
    outputs: Any,
    name: str,
    expected: tuple[str, ...] | None = None,
    named: bool | None = None,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Outputs as a finite (items, D) float array plus column names.

    With ``expected`` (the fitted columns), a DataFrame's columns are matched by name in
    any order, and a named Series by its name, whenever the transducer was fitted on
    columns the user named (``named``, :attr:`OutputTransform.named`; None, for a
    transform that did not record it: when ``expected`` are not the defaults of a plain
    array); other names are an error. Plain arrays are taken by position. A DataFrame of
    two or more columns given to a transducer fitted on a plain array is taken by
    position too, with a UserWarning unless its names are the fitted defaults in their
    order (scikit-learn warns likewise): nothing says which column is which.
    """
    by_name = (_fitted_names(expected) if named is None else named) if expected else False
    if isinstance(outputs, pd.DataFrame):
        columns = tuple(str(c) for c in outputs.columns)
        repeated = sorted({c for c in columns if columns.count(c) > 1})
        if repeated:
            raise ValueError(f"{name} has the column(s) {repeated} more than once")
        if expected is not None and by_name:
            _check_names(columns, expected, name)
            # Same columns as at fit time, perhaps reordered: select them by name.
            outputs = outputs.iloc[:, [columns.index(column) for column in expected]]
            columns = expected
        elif expected is not None and len(columns) > 1 and columns != expected:
            warnings.warn(
                f"{name} is a DataFrame with the columns {list(columns)}, but the transducer "
                f"was fitted on a plain array (columns {list(expected)}): its columns are "
                "taken by position, whatever their names. Fit on a DataFrame to have them "
                "matched by name, or pass a plain array (e.g. .to_numpy()) in the fitted "
                "order",
                UserWarning,
                stacklevel=4,  # as_outputs, the transducer's helper and method, the caller
            )
        values = as_float_array(outputs.to_numpy(), name, ndim=2, exact_integers=True)
    elif isinstance(outputs, pd.Series):
        columns = (str(outputs.name) if outputs.name is not None else "output",)
        if expected is not None and outputs.name is not None and by_name:
            _check_names(columns, expected, name)
        values = as_float_array(outputs.to_numpy(), name, ndim=1, exact_integers=True)[:, None]
    else:
        values = as_float_array(outputs, name, ndim=(1, 2), exact_integers=True)
        if values.ndim == 1:
            values = values[:, None]
            columns = ("output",)
        else:
            columns = tuple(f"output_{j}" for j in range(values.shape[1]))
    if expected is not None:
        if values.shape[1] != len(expected):
            raise ValueError(
                f"{name} must have {len(expected)} column(s) {list(expected)} as at fit time, "
                f"found {values.shape[1]}"
            )
        columns = expected
    return values, columns


def _fitted_names(columns: tuple[str, ...]) -> bool:
    """Whether fitted columns carry names (not the defaults of a plain array): the guess
    for a transform that did not record it (:attr:`OutputTransform.named` None)."""
    if len(columns) == 1:
        return columns != ("output",)
    return columns != tuple(f"output_{j}" for j in range(len(columns)))


def _check_names(columns: tuple[str, ...], expected: tuple[str, ...], name: str) -> None:
    if set(columns) == set(expected) and len(columns) == len(expected):
        return
    missing = [c for c in expected if c not in columns]
    unexpected = [c for c in columns if c not in expected]
    raise ValueError(
        f"{name} must have the columns {list(expected)} as at fit time (matched by name, "
        f"in any order), found {list(columns)} (missing {missing}, unexpected {unexpected}); "
        "rename the columns, or pass a plain array to match them by position"
    )


def joint_outputs(
    outputs: Mapping[Any, Any], spec: Any, resolution: Any
) -> tuple[pd.DataFrame, dict[str, list[str]], list[str], list[float | None]]:
    """Several classifiers' outputs as one frame, with each member's columns and transform.

    Each member's transform is chosen on its own outputs (as if fitted alone), so that
    its marginal is the transducer it would have on its own.
    """
    if len(outputs) < 2:
        raise ValueError(
            f"outputs as a mapping fits a joint transducer of several classifiers; found "
            f"{len(outputs)} member(s): {list(outputs)}. Pass one classifier's outputs directly"
        )
    frames, members, kinds, resolutions = [], {}, [], []
    n_items = None
    for name, member in outputs.items():
        label = f"outputs[{name!r}]"
        y, columns = as_outputs(member, label)
        if n_items is not None and y.shape[0] != n_items:
            raise ValueError(
                f"{label} has {y.shape[0]} items, the first member {n_items}: a joint "
                "transducer needs every classifier's outputs on the same calibration items"
            )
        n_items = y.shape[0]
        names = [str(name)] if y.shape[1] == 1 else [f"{name}:{c}" for c in columns]
        transform = choose_transform(y, names, spec, resolution, rotate=False)
        if transform.is_simplex:
            raise ValueError(
                f"{label} are probability vectors; a joint transducer models each member's "
                "columns separately: pass all but one column (e.g. the positive class's "
                "probability) or their log-ratios"
            )
        frames.append(pd.DataFrame(y, columns=names))
        members[str(name)] = names
        kinds.extend(transform.kind)
        resolutions.extend(transform.resolution)
    return pd.concat(frames, axis=1), members, kinds, resolutions


def member_outputs(outputs: Mapping[Any, Any], members: Mapping[str, list[str]]) -> pd.DataFrame:
    """A joint transducer's outputs given as at fit time, a mapping member -> outputs, as
    the one frame of its columns (named as :func:`joint_outputs` names them)."""
    given = {str(name): value for name, value in outputs.items()}
    if set(given) != set(members):
        raise ValueError(
            f"outputs as a mapping must give each member of the joint transducer, "
            f"{list(members)}; found {list(given)}"
        )
    frames = []
    for name, names in members.items():
        y, _ = as_outputs(given[name], f"outputs[{name!r}]")
        if y.shape[1] != len(names):
            raise ValueError(
                f"outputs[{name!r}] has {y.shape[1]} column(s); at fit time it had "
                f"{len(names)} ({names})"
            )
        frames.append(pd.DataFrame(y, columns=names))
    if len({f.shape[0] for f in frames}) > 1:
        raise ValueError(
            "outputs as a mapping must give every member the same items, found "
            f"{ {name: f.shape[0] for name, f in zip(members, frames, strict=True)} } rows"
        )
    return pd.concat(frames, axis=1)


def snap_to_lattice(
    y: np.ndarray, transform: OutputTransform, calibration: np.ndarray
) -> np.ndarray:
    """Outputs of lattice columns moved onto the fitted lattice, with a LatticeWarning.

    The lattice of column ``j`` is ``a + k h`` (``h`` its resolution, ``a`` a calibration
    output of that column, integer ``k``). Every output is replaced by the lattice value
    whose bin ``[v - h/2, v + h/2]`` holds it: the model scores bins, so that is what the
    output means to it. Outputs within ``_LATTICE_RTOL`` steps of a lattice point are on
    the lattice (float noise, such as 0.1 + 0.2 for 0.3); the others are counted in the
    warning. Afterwards a column has at most one distinct value per lattice point in the
    outputs' range, and predictions dedupe on them.
    """
    if transform.line_resolution is not None:
        _warn_off_line_lattice(y, transform)
    snapped = y
    for j, h in enumerate(transform.resolution):
        if h is None:
            continue
        column = y[:, j]
        anchor = float(calibration[0, j])
        steps = (column - anchor) / h
        k = np.round(steps)
        m = round(1.0 / h)
        if abs(1.0 / h - m) <= 1e-9 * m and abs(anchor * m - round(anchor * m)) <= 1e-6:
            values = np.round(column * m) / m  # k/m exactly as such outputs are written
        else:
            # a lattice point the calibration outputs hold is taken as their value, so
            # that they predict at the bins they were fitted on (anchor + k h can be an
            # ulp off when h is not representable, which would put them outside)
            values = anchor + k * h
            seen = np.unique(calibration[:, j])
            seen_k = np.round((seen - anchor) / h)
            at = np.clip(np.searchsorted(seen_k, k), 0, seen.size - 1)
            values = np.where(seen_k[at] == k, seen[at], values)
        if snapped is y:
            snapped = y.copy()
        snapped[:, j] = values
        off = np.abs(steps - k) > _LATTICE_RTOL * np.maximum(1.0, np.abs(k))
        if not off.any():
            continue
        shift = np.abs(values[off] - column[off])
        first = int(np.flatnonzero(off)[0])
        warnings.warn(
            f"{int(off.sum())} of {len(column)} outputs in column {transform.columns[j]!r} are "
            f"not on the lattice of spacing {h:g} this transducer was fitted on (the first, "
            f"item {first}: {float(column[first])!r}); each was taken as the lattice value whose "
            f"bin holds it (largest shift {shift.max():.3g}). If these outputs have a finer "
            "resolution than the calibration outputs, refit on outputs like them (or with "
            "resolution=None to treat the outputs as continuous)",
            LatticeWarning,
            stacklevel=4,
        )
    return snapped


def _warn_off_line_lattice(y: np.ndarray, transform: OutputTransform) -> None:
    """A LatticeWarning for outputs whose position on a lattice line
    (:attr:`OutputTransform.line_resolution`) is not a lattice point: each is read as the
    bin that holds it, as :func:`snap_to_lattice` reads a lattice column's. The outputs
    are left as they are (their distance from the line is :func:`warn_off_line`'s)."""
    steps, k = transform.line_steps(transform.forward(y)[:, 0])
    off = np.abs(steps - k) > _LATTICE_RTOL * np.maximum(1.0, np.abs(k))
    if not off.any():
        return
    first = int(np.flatnonzero(off)[0])
    warnings.warn(
        f"{int(off.sum())} of {len(y)} outputs of {list(transform.columns)} are not among "
        "the two distinct outputs this transducer was fitted on, nor at a point of their "
        f"lattice along the line through them (the first, item {first}: "
        f"{y[first].tolist()}); each was read as the bin of that lattice that holds it. "
        "Refit on outputs like them to model them",
        LatticeWarning,
        stacklevel=4,
    )


def warn_off_line(y: np.ndarray, transform: OutputTransform, calibration: np.ndarray) -> None:
    """ExtrapolationWarning for outputs off the line on which a projected transform's
    ``calibration`` outputs lie (:attr:`OutputTransform.is_projected`); they are projected.
    Off means farther from it than every calibration output (which lie within
    :data:`LINE_TOLERANCE` of their spread along it) and than that tolerance of a unit."""
    if not transform.is_projected:
        return
    distance = transform.off_line(y)
    scale = max(1.0, float(np.abs(transform.centre).max()))
    off = distance > max(LINE_TOLERANCE * scale, 2.0 * transform.off_line(calibration).max())
    if not off.any():
        return
    warnings.warn(
        f"{int(off.sum())} of {len(y)} outputs lie off the line on which every calibration "
        f"output of {list(transform.columns)} lies (largest distance {distance.max():.4g} in "
        "the transformed outputs); the transducer models positions along that line only and "
        "takes each such output at its projection onto it, which no data support",
        ExtrapolationWarning,
        stacklevel=4,
    )


def warn_outside(y: np.ndarray, columns: tuple[str, ...], calibration: np.ndarray) -> None:
    """ExtrapolationWarning for outputs outside the calibration outputs' range."""
    low, high = calibration.min(axis=0), calibration.max(axis=0)
    outside = (y < low) | (y > high)
    items = outside.any(axis=1)
    if not items.any():
        return
    ranges = "; ".join(
        f"{columns[j]!r}: [{low[j]:.4g}, {high[j]:.4g}], {int(outside[:, j].sum())} outside"
        for j in range(len(columns))
        if outside[:, j].any()
    )
    warnings.warn(
        f"{int(items.sum())} of {len(y)} outputs lie outside the range of the calibration "
        f"outputs ({ranges}); there the transducer extrapolates: its probabilities come "
        "from the tails of the fitted mixture, not from data (plot() shows them)",
        ExtrapolationWarning,
        stacklevel=4,
    )


def unique_rows(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows and the inverse map; 1-D unique is far faster for one column."""
    if y.shape[1] == 1:
        values, inverse = np.unique(y[:, 0], return_inverse=True)
        return values[:, None], inverse
    unique, inverse = np.unique(y, axis=0, return_inverse=True)
    return unique, inverse.ravel()
