"""What a transducer file (:meth:`Transducer.save`) holds, and the check of a file against it.

A transducer file is an ArviZ InferenceData written to NetCDF. :func:`read` loads every
group into memory (the file is closed afterwards, so it can be written over) and checks
it against one declaration, :data:`VARIABLES` and :data:`ATTRIBUTES`, before anything is
used: a missing or malformed field gives a :class:`TransducerFileError` that names the
file and the field, never a KeyError or NaN probabilities later. When the model's stored
variables change, these two tables are what to edit (and :data:`FORMAT_VERSION` to raise).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_labels
from .encoding import OutputTransform

__all__ = ["ATTRIBUTES", "FORMAT_VERSION", "VARIABLES", "TransducerFileError", "read"]

#: The layout version written by Transducer.save; files without one are version 1.
#: 1: the free-location mixture with Dirichlet class probabilities (yieldwise <= 0.1);
#: 2: fixed kernels with smooth class log-odds (docs/model.md). A file of version 1
#: describes another model, so it is refused with a message saying to refit.
FORMAT_VERSION = 2
FORMAT_ATTRIBUTE = "yieldwise_format_version"


class TransducerFileError(ValueError):
    """A file that is not a readable, consistent yieldwise transducer file."""


@dataclass(frozen=True)
class Field:
    """One stored variable: its group, name, dimensions and what its values must be.

    ``values`` is one of ``"finite"``, ``"positive"`` (finite and > 0), ``"simplex"``
    (entries >= 0 summing to 1 over the last dimension), ``"class index"`` (integers in
    ``0 .. classes - 1``) or ``"any"``.
    """

    group: str
    name: str
    dims: tuple[str, ...]
    values: str


#: Every variable a transducer file must hold (the model of docs/model.md).
VARIABLES: tuple[Field, ...] = (
    Field("posterior", "w", ("chain", "draw", "component"), "simplex"),
    Field("posterior", "alpha", ("chain", "draw", "component", "class"), "simplex"),
    Field("posterior", "mu", ("chain", "draw", "component", "output_dim"), "finite"),
    Field("posterior", "sigma", ("chain", "draw", "component", "output_dim"), "positive"),
    Field("posterior", "log_lik", ("chain", "draw"), "finite"),
    Field("sample_stats", "diverging", ("chain", "draw"), "any"),
    Field("sample_stats", "tree_depth", ("chain", "draw"), "finite"),
    Field("sample_stats", "step_size", ("chain", "draw"), "finite"),
    Field("observed_data", "outputs", ("item", "output_column"), "finite"),
    Field("observed_data", "class_index", ("item",), "class index"),
)


def _json(kind: type) -> Callable[[Any], Any]:
    def parse(text: Any) -> Any:
        value = json.loads(text)
        if not isinstance(value, kind):
            raise ValueError(f"expected JSON {kind.__name__}, found {type(value).__name__}")
        return value

    return parse


def _integer(low: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            raise ValueError(f"expected an integer, found {value!r}")
        if value < low:
            raise ValueError(f"expected an integer >= {low}, found {value!r}")
        return int(value)

    return parse


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, found {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise ValueError(f"expected a number, found {value!r}")
    return float(value)


def _classes(text: Any) -> tuple[Any, ...]:
    labels = _json(list)(text)
    for label in labels:
        if not isinstance(label, str | int | float | bool):
            raise ValueError(f"labels must be str, int, float or bool, found {label!r}")
    if len(labels) < 2:
        raise ValueError(f"expected at least 2 classes, found {labels}")
    return check_labels(labels, len(labels), "the class labels")


#: Attributes of the posterior group every transducer file holds, and how each is read.
ATTRIBUTES: dict[str, Callable[[Any], Any]] = {
    "yieldwise_classes": _classes,
    "yieldwise_transform": OutputTransform.from_json,
    "yieldwise_settings": _json(dict),
    "yieldwise_n_calibration": _integer(1),
    "yieldwise_seed_used": _integer(0),
    "yieldwise_backend": _text,
    "yieldwise_sampling_seconds": _number,
}
#: Attributes that may be absent, and their values then.
OPTIONAL_ATTRIBUTES: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "yieldwise_design": (_json(dict), {}),
    "yieldwise_members": (_json(dict), {}),
    FORMAT_ATTRIBUTE: (_integer(1), 1),
}


def _check_values(field: Field, values: np.ndarray, n_classes: int) -> str | None:
    """What is wrong with a variable's values, or None."""
    if field.values == "any":
        return None
    if not np.issubdtype(values.dtype, np.number):
        return f"expected numbers, found dtype {values.dtype}"
    finite = np.isfinite(values)
    if not finite.all():
        return f"{int((~finite).sum())} of {values.size} values are NaN or infinite"
    if field.values == "positive" and (values <= 0).any():
        return f"{int((values <= 0).sum())} values are not positive"
    if field.values == "simplex":
        sums = values.sum(axis=-1)
        if (values < 0).any() or np.abs(sums - 1).max() > 1e-6:
            return (
                f"expected entries >= 0 summing to 1 over {field.dims[-1]!r}, found sums in "
                f"[{sums.min():.6g}, {sums.max():.6g}] and minimum {values.min():.6g}"
            )
    if field.values == "class index":
        whole = values == np.round(values)
        if not whole.all() or values.min() < 0 or values.max() >= n_classes:
            return (
                f"expected integers in 0 .. {n_classes - 1} (one per class), found values in "
                f"[{values.min()}, {values.max()}]"
            )
    return None


def read(path: Path) -> tuple[Any, dict[str, Any]]:
    """The file's InferenceData, in memory and checked, and its parsed attributes.

    The returned attributes are keyed as in :data:`ATTRIBUTES` and
    :data:`OPTIONAL_ATTRIBUTES`. Raises :class:`TransducerFileError` naming the file
    and the field at fault.
    """
    import arviz as az

    try:
        data = az.from_netcdf(str(path))
    except Exception as exc:  # h5netcdf/netCDF4 raise OSError, ValueError, KeyError...
        raise TransducerFileError(
            f"{path}: cannot be read as a NetCDF transducer file ({type(exc).__name__}: {exc})"
        ) from None
    for group in data.groups():  # into memory, then close: the file is free afterwards
        dataset = getattr(data, group)
        dataset.load()
        dataset.close()
    missing = sorted({f.group for f in VARIABLES} - set(data.groups()))
    if missing:
        raise TransducerFileError(
            f"{path}: group(s) {missing} are missing; this is not a transducer file written "
            "by Transducer.save"
        )
    meta = _read_attributes(path, dict(data.posterior.attrs))
    _check_variables(path, data, meta)
    return data, meta


def _read_attributes(path: Path, attrs: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for name, parse in ATTRIBUTES.items():
        if name not in attrs:
            raise TransducerFileError(
                f"{path}: attribute {name!r} of the posterior group is missing; the file was "
                "not written by Transducer.save, or was altered"
            )
        meta[name] = _parse(path, name, parse, attrs[name])
    for name, (parse, default) in OPTIONAL_ATTRIBUTES.items():
        meta[name] = _parse(path, name, parse, attrs[name]) if name in attrs else default
    if meta[FORMAT_ATTRIBUTE] > FORMAT_VERSION:
        raise TransducerFileError(
            f"{path}: attribute {FORMAT_ATTRIBUTE!r} is {meta[FORMAT_ATTRIBUTE]}: written by a "
            f"newer yieldwise (this one reads up to version {FORMAT_VERSION}); upgrade yieldwise"
        )
    if meta[FORMAT_ATTRIBUTE] < FORMAT_VERSION:
        raise TransducerFileError(
            f"{path}: a transducer of format version {meta[FORMAT_ATTRIBUTE]} (written by "
            f"yieldwise {attrs.get('yieldwise_version', '<= 0.1')}, the free-location mixture "
            f"that docs/model.md replaces); this yieldwise reads format version {FORMAT_VERSION}"
            ". Refit the transducer on its calibration data and save it again"
        )
    return meta


def _parse(path: Path, name: str, parse: Callable[[Any], Any], value: Any) -> Any:
    try:
        return parse(value)
    except (ValueError, TypeError, KeyError) as exc:
        raise TransducerFileError(f"{path}: attribute {name!r}: {exc}") from None


def _check_variables(path: Path, data: Any, meta: dict[str, Any]) -> None:
    classes, transform = meta["yieldwise_classes"], meta["yieldwise_transform"]
    sizes = {
        "class": len(classes),
        "output_dim": transform.model_dims,
        "output_column": transform.n_inputs,
        "item": meta["yieldwise_n_calibration"],
    }
    seen: dict[str, int] = {}
    for field in VARIABLES:
        where = f"{path}: variable {field.group}/{field.name}"
        dataset = getattr(data, field.group)
        if field.name not in dataset:
            raise TransducerFileError(f"{where} is missing")
        variable = dataset[field.name]
        if tuple(variable.dims) != field.dims:
            raise TransducerFileError(
                f"{where}: expected dims {field.dims}, found {tuple(variable.dims)}"
            )
        for dim, size in zip(variable.dims, variable.shape, strict=True):
            expected = sizes.get(dim, seen.get(dim))
            if expected is not None and size != expected:
                source = "the file's attributes" if dim in sizes else "the other variables"
                raise TransducerFileError(
                    f"{where}: dimension {dim!r} has size {size}, but {source} give {expected}"
                )
            seen.setdefault(dim, size)
        problem = _check_values(field, np.asarray(variable.values), len(classes))
        if problem is not None:
            raise TransducerFileError(f"{where}: {problem}")
