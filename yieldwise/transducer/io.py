"""The transducer file (:meth:`Transducer.save`): every stored key, writing, and the check.

A transducer file is an ArviZ InferenceData written to NetCDF. :func:`read` loads every
group into memory (the file is closed afterwards, so it can be written over) and checks
it against one declaration, :data:`VARIABLES` and :data:`ATTRIBUTES`, before anything is
used: a missing or malformed field gives a :class:`TransducerFileError` that names the
file and the field, never a KeyError or NaN probabilities later. When the model's stored
variables change, these two tables are what to edit (and :data:`FORMAT_VERSION` to raise).
The format version is read first: a file of a version this yieldwise does not read is
refused as such, whatever else its layout holds. :func:`to_inference_data` builds the
file's content from a fit (with the format version, so that an InferenceData a user
writes with ArviZ's own ``to_netcdf`` loads too), :func:`write` writes it, and
:func:`fit_record` reads back what it records about the fit.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._design import KernelDesign
from .._validation import Label, check_labels, json_object, python_scalar
from .encoding import OutputTransform
from .reduction import ClassRanks

__all__ = [
    "ATTRIBUTES",
    "FORMAT_VERSION",
    "OLDEST_READABLE",
    "PAIR_VARIABLES",
    "PROVENANCE_ATTRIBUTES",
    "REDUCTION_VARIABLES",
    "VARIABLES",
    "TransducerFileError",
    "fit_record",
    "load",
    "read",
    "record_classifier",
    "record_members",
    "record_reduction",
    "settings_from_json",
    "settings_to_json",
    "stored_settings",
    "to_inference_data",
    "write",
]

#: The layout version written by Transducer.save; files without one are version 1.
#: 1: the free-location mixture with Dirichlet class probabilities (yieldwise <= 0.1);
#: 2: fixed kernels with smooth class log-odds (docs/model.md); 3: the same model, whose
#: output transform may end in a rotation (``centre``, ``axes``: two continuous
#: coordinates on their principal axes), which a reader of version 2 would ignore. A file
#: of version 1 describes another model, so it is refused with a message saying to refit;
#: version 2 is read as it is (its transforms have no rotation). 4: a file may hold a
#: class-reduced transducer (``yieldwise_class_reduction``, ``class_outputs``,
#: ``class_label_index``), which a reader of version 3 would take for a transducer of ranks.
#: 5: a class reduction also holds the draws of its others' share's temperature
#: (``others_temperature``); a version 4 file with a reduction (shares at temperature 1,
#: another model) is refused with a message saying to refit, one without is read as it is.
#: 6: the transform may end in a projection onto one principal axis (``axes`` 1 x d:
#: continuous outputs on a line, modelled as one dimension), which a reader of version 5
#: refuses as malformed; files of versions 2-5 are read as they are. 7: a projection's
#: positions may be a lattice (``line_resolution``: two distinct outputs of two or more
#: coordinates, each its own bin on the line through them), which a reader of version 6
#: would take for continuous positions; files of versions 2-6 are read as they are.
#: Within version 7, the transform's record may hold ``named`` (whether the user named the
#: output columns, :attr:`OutputTransform.named`), which readers without it ignore: a file
#: without it is read with ``named`` None, the column names' defaults then telling.
FORMAT_VERSION = 7
#: The first version whose class reductions hold the others' temperature.
_TEMPERATURE_SINCE = 5
#: The oldest version this yieldwise reads.
OLDEST_READABLE = 2
#: The first version whose transforms may end in a rotation.
_ROTATION_SINCE = 3
#: The first version whose transforms may end in a projection onto a line.
_PROJECTION_SINCE = 6
#: The first version whose projections may read their positions as a lattice.
_LINE_LATTICE_SINCE = 7
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


#: Every variable a transducer file must hold (the model of docs/model.md). The sampler
#: statistics are every one a backend records (``Transducer.marginal`` carries them all
#: over, ``compare`` reads ``lp``); every writer of every version has written them.
VARIABLES: tuple[Field, ...] = (
    Field("posterior", "w", ("chain", "draw", "component"), "simplex"),
    Field("posterior", "alpha", ("chain", "draw", "component", "class"), "simplex"),
    Field("posterior", "mu", ("chain", "draw", "component", "output_dim"), "finite"),
    Field("posterior", "sigma", ("chain", "draw", "component", "output_dim"), "positive"),
    Field("posterior", "log_lik", ("chain", "draw"), "finite"),
    Field("sample_stats", "diverging", ("chain", "draw"), "any"),
    Field("sample_stats", "tree_depth", ("chain", "draw"), "finite"),
    Field("sample_stats", "step_size", ("chain", "draw"), "finite"),
    Field("sample_stats", "lp", ("chain", "draw"), "any"),
    Field("sample_stats", "energy", ("chain", "draw"), "any"),
    Field("sample_stats", "acceptance_rate", ("chain", "draw"), "any"),
    Field("sample_stats", "n_steps", ("chain", "draw"), "any"),
    Field("observed_data", "outputs", ("item", "output_column"), "finite"),
    Field("observed_data", "class_index", ("item",), "class index"),
)
#: What a file holding a class reduction (``yieldwise_class_reduction``) holds besides: the
#: classes' outputs and true classes, whose reduced forms the variables above hold.
REDUCTION_VARIABLES: tuple[Field, ...] = (
    Field("observed_data", "class_outputs", ("item", "class_column"), "finite"),
    Field("observed_data", "class_label_index", ("item",), "class index"),
    Field("posterior", "others_temperature", ("chain", "draw"), "positive"),
)
#: What a class reduction with pair offsets (``paired``) holds besides.
PAIR_VARIABLES: tuple[Field, ...] = (
    Field("posterior", "group_offset", ("chain", "draw", "group", "class"), "finite"),
)


def _json(kind: type) -> Callable[[Any], Any]:
    def parse(text: Any) -> Any:
        value = json.loads(text)
        if not isinstance(value, kind):
            raise ValueError(f"expected JSON {kind.__name__}, found {type(value).__name__}")
        return value

    return parse


def _integer(low: int, optional: bool = False) -> Callable[[Any], int | None]:
    def parse(value: Any) -> int | None:
        if value is None and optional:
            return None
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


#: The class labels a transducer file can hold (as JSON, and as netCDF coordinates):
#: numpy scalars count as the Python scalars they stand for (``np.int64`` as ``int``,
#: ``np.str_`` as ``str``, ``np.bool_`` as ``bool``). The one list, for writing
#: (:func:`check_savable_labels`, called by ``Transducer.fit`` before any work and by
#: ``save``) and reading.
SAVABLE_LABEL_TYPES: tuple[type, ...] = (str, int, float, bool)
_SAVABLE = ", ".join(kind.__name__ for kind in SAVABLE_LABEL_TYPES[:-1]) + (
    f" or {SAVABLE_LABEL_TYPES[-1].__name__}"
)


def check_savable_labels(labels: Any, name: str, when: str = "") -> None:
    """``TypeError`` naming ``name`` (the argument or attribute holding ``labels``), the
    first label a transducer file cannot hold and its type, and what to do; ``when``
    (e.g. ``" (save() would fail after the fit)"``) says when saving would have failed."""
    for label in labels:
        if not isinstance(python_scalar(label), SAVABLE_LABEL_TYPES):
            raise TypeError(
                f"{name} holds the class label {label!r} of type {type(label).__name__}, "
                f"which cannot be saved{when}; use {_SAVABLE} labels (e.g. map each label "
                "to a string)"
            )


def _classes(text: Any) -> tuple[Any, ...]:
    labels = _json(list)(text)
    for label in labels:
        if not isinstance(label, SAVABLE_LABEL_TYPES):
            raise ValueError(f"labels must be {_SAVABLE}, found {label!r}")
    if len(labels) < 2:
        raise ValueError(f"expected at least 2 classes, found {labels}")
    return check_labels(labels, len(labels), "the class labels")


#: The entries of the constructor's settings (``yieldwise_settings``) that yieldwise reads
#: back from a file (``sampler_summary``: tree-depth hits, at this depth in a file whose
#: sampler record lacks the depth it ran with, written before the per-dimension default
#: of 2026-12-07; None: chosen per fit), and how each is read; the others are the
#: constructor's, which a file of an older yieldwise may lack (the constructor's defaults
#: then).
SETTINGS_READ: dict[str, Callable[[Any], Any]] = {"max_treedepth": _integer(1, optional=True)}


def _settings(text: Any) -> dict[str, Any]:
    record = settings_from_json(_json(dict)(text))  # (a malformed tag: a ValueError)
    for key, parse in SETTINGS_READ.items():
        if key not in record:
            raise ValueError(f"the settings record lacks {key!r}; it holds {sorted(record)}")
        try:
            parse(record[key])
        except ValueError as exc:
            raise ValueError(f"the setting {key!r}: {exc}") from None
    return record


def _sampler(text: Any) -> dict[str, Any]:
    """The backend's settings as run: a JSON object whose ``likelihood`` (if any) is an
    object and whose ``pareto_k`` (if any) is a number or null, as ``sampler_summary``
    reads them."""
    record = _json(dict)(text)
    if not isinstance(record.get("likelihood", {}), dict):
        raise ValueError(f"'likelihood' must be a JSON object, found {record['likelihood']!r}")
    if record.get("pareto_k") is not None:
        _number(record["pareto_k"])
    if "seed" in record:
        _integer(0)(record["seed"])
    if "max_treedepth" in record:  # the depth run with, for the tree-depth hits
        try:
            _integer(1)(record["max_treedepth"])
        except ValueError as exc:
            raise ValueError(f"'max_treedepth': {exc}") from None
    return record


def _design(text: Any) -> dict[str, Any]:
    """The kernels' design: ``{}`` for given draws, else a record with ``kind`` ("grid"
    or "centres") and ``shape`` (a grid's nodes per dimension), as ``repr`` reads it."""
    record = _json(dict)(text)
    if not record:
        return record
    kind, shape = record.get("kind"), record.get("shape")
    if kind not in ("grid", "centres"):
        raise ValueError(
            f"expected {{}} (given draws) or a record whose 'kind' is 'grid' or 'centres', "
            f"found kind {kind!r}"
        )
    counts = isinstance(shape, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape
    )
    if not counts or (kind == "grid" and not shape):
        raise ValueError(
            f"'shape' must be a list of positive integers (one per dimension of a grid), "
            f"found {shape!r}"
        )
    return record


#: Attributes of the posterior group every transducer file holds, and how each is read.
ATTRIBUTES: dict[str, Callable[[Any], Any]] = {
    "yieldwise_classes": _classes,
    "yieldwise_transform": OutputTransform.from_json,
    "yieldwise_settings": _settings,
    "yieldwise_n_calibration": _integer(1),
    "yieldwise_seed_used": _integer(0),
    "yieldwise_backend": _text,
    "yieldwise_sampling_seconds": _number,
    # read back by fit_record (sampler_summary, diagnostics, repr, marginal)
    "yieldwise_sampler": _sampler,
    "yieldwise_backend_version": _text,
    "yieldwise_stan_version": _text,
}
#: Attributes that may be absent, and their values then.
OPTIONAL_ATTRIBUTES: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "yieldwise_class_reduction": (lambda text: StoredReduction.from_json(text), None),
    "yieldwise_design": (_design, {}),
    "yieldwise_members": (_json(dict), {}),
    FORMAT_ATTRIBUTE: (_integer(1), 1),
}

#: Attributes written for the record (provenance), read by no check.
PROVENANCE_ATTRIBUTES = (
    "yieldwise_version",
    "yieldwise_prior",
    "yieldwise_classifier",
)


@dataclass(frozen=True)
class StoredReduction:
    """A class-reduced transducer's own record (the file's other attributes describe its
    reduced problem): the reduction, the transform of the classes' outputs, and the
    constructor settings the user gave."""

    record: ClassRanks
    transform: OutputTransform
    settings: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps({"reduction": json.loads(self.record.to_json()),
                           "transform": json.loads(self.transform.to_json()),
                           "settings": settings_to_json(self.settings)})  # fmt: skip

    @classmethod
    def from_json(cls, text: Any) -> StoredReduction:
        record = json_object(text, ("reduction", "transform", "settings"), "the record")
        if not isinstance(record["settings"], dict):
            raise ValueError(f"settings must be a JSON object, found {record['settings']!r}")
        reduction = ClassRanks.from_json(json.dumps(record["reduction"]))
        transform = OutputTransform.from_json(json.dumps(record["transform"]))
        if transform.columns != reduction.columns:
            raise ValueError(
                f"the transform's columns {list(transform.columns)} differ from the "
                f"reduction's {list(reduction.columns)}"
            )
        try:
            settings = settings_from_json(record["settings"])
        except ValueError as exc:
            raise ValueError(f"settings: {exc}") from None
        return cls(reduction, transform, settings)


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


def check_draws(draws: Mapping[str, Any], n_classes: int, n_dims: int) -> None:
    """Given draws (:meth:`Transducer.from_draws`) held to the rules a file's are held to
    (:data:`VARIABLES`: ``w`` and ``alpha`` simplexes, ``mu`` finite, ``sigma`` positive,
    ``log_lik`` finite if given), with one (chain, draw, component) shape among them and
    ``n_classes`` classes, ``n_dims`` output dimensions; ValueError names the draw."""
    if not isinstance(draws, Mapping):
        raise TypeError(f"draws must be a mapping name -> array, found {type(draws).__name__}")
    missing = [name for name in ("w", "alpha", "mu", "sigma") if name not in draws]
    if missing:
        raise ValueError(f"draws lacks {missing}; it needs w, alpha, mu and sigma (theory 3.1)")
    fields = {f.name: f for f in VARIABLES if f.group == "posterior"}
    lead = None
    for name in ("w", "alpha", "mu", "sigma", "log_lik"):
        if name not in draws:
            continue
        field = fields[name]
        values = np.asarray(draws[name])
        if values.ndim != len(field.dims):
            raise ValueError(
                f"draws[{name!r}] must have {len(field.dims)} dimensions {field.dims}, found "
                f"shape {values.shape}"
            )
        want = {"class": n_classes, "output_dim": n_dims}
        size = dict(zip(field.dims, values.shape, strict=True))
        for dim, n in want.items():
            if dim in size and size[dim] != n:
                raise ValueError(
                    f"draws[{name!r}] has {size[dim]} entries along {dim!r}; expected {n}"
                )
        shared = values.shape[: min(3, values.ndim)]
        if lead is None:
            lead = shared
        elif shared != lead[: len(shared)]:
            raise ValueError(
                f"draws[{name!r}] has (chain, draw, component) shape {shared}; draws['w'] "
                f"has {lead}"
            )
        problem = _check_values(field, values, n_classes)
        if problem is not None:
            raise ValueError(f"draws[{name!r}]: {problem}")


def file_path(path: Any, action: str) -> Path:
    """``path`` (the argument of ``Transducer.save`` or ``load``) as a Path, checked:
    TypeError for what is not a file name (bytes, None...), ValueError for an empty
    one or one ending with a separator (a folder's, which ``Path`` would drop); each names
    the argument, what it must be and what was found. ``action``: "write" or "load"."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(
            f"path must be the transducer file's name (str or pathlib.Path), found "
            f"{type(path).__name__} {path!r}"
        )
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(
            f"path must be the transducer file's name as text (str or pathlib.Path), found "
            f"{type(text).__name__} {text!r}; decode it first (os.fsdecode)"
        )
    if not text.strip():
        raise ValueError(
            f"path is empty ({text!r}); give the name of the transducer file to {action}"
        )
    if text.endswith(os.sep) or (os.altsep is not None and text.endswith(os.altsep)):
        raise ValueError(
            f"path {text!r} ends with {text[-1]!r}, so it names a folder; give the name of "
            f"the transducer file to {action}, such as "
            f"{os.path.join(text.rstrip(text[-1]) or text[-1], 'transducer.nc')!r}"
        )
    return Path(text)


def read(path: str | os.PathLike[str]) -> tuple[Any, dict[str, Any]]:
    """The file's InferenceData, in memory and checked, and its parsed attributes.

    The returned attributes are keyed as in :data:`ATTRIBUTES` and
    :data:`OPTIONAL_ATTRIBUTES`. Raises :class:`TransducerFileError` naming the file
    and the field at fault: its format version first (a file of a version this
    yieldwise does not read is refused as such), then its data (a damaged block of
    it, read into memory here), its groups, attributes and variables.
    """
    import arviz as az

    path = file_path(path, "load")
    try:
        data = az.from_netcdf(str(path))
    except Exception as exc:  # h5netcdf/netCDF4 raise OSError, ValueError, KeyError...
        raise TransducerFileError(
            f"{path}: cannot be read as a NetCDF transducer file ({type(exc).__name__}: {exc})"
        ) from None
    try:
        if "posterior" in data.groups() and FORMAT_ATTRIBUTE in data.posterior.attrs:
            version = _parse(path, FORMAT_ATTRIBUTE, _integer(1),
                             data.posterior.attrs[FORMAT_ATTRIBUTE])  # fmt: skip
            _check_version(path, data, version)
        for group in data.groups():  # into memory, then closed: the file is free afterwards
            getattr(data, group).load()
    except TransducerFileError:
        raise
    except Exception as exc:  # a damaged data block: h5py's OSError, a codec's ValueError...
        raise TransducerFileError(
            f"{path}: cannot be read: part of its data is damaged ({type(exc).__name__}: "
            f"{exc}); the file was altered or corrupted after it was written. Restore it "
            "from a copy, or save the transducer again"
        ) from None
    finally:
        for group in data.groups():
            getattr(data, group).close()
    missing = sorted({f.group for f in VARIABLES} - set(data.groups()))
    if missing:
        raise TransducerFileError(
            f"{path}: group(s) {missing} are missing; this is not a transducer file written "
            "by Transducer.save"
        )
    meta = _read_attributes(path, data)
    _check_variables(path, data, meta)
    return data, meta


def load(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A transducer file's constructor settings and fitted attributes (``classes_``,
    ``transform_``, ``n_calibration_``, ``backend_``, ``seed_``, ``posterior_``,
    ``n_components_``, ``members_``), read and checked by :func:`read`."""
    path = file_path(path, "load")
    if not path.exists():
        raise FileNotFoundError(f"no transducer file at {path}")
    data, meta = read(path)
    return meta["yieldwise_settings"], {
        "classes_": meta["yieldwise_classes"],
        "transform_": meta["yieldwise_transform"],
        "n_calibration_": meta["yieldwise_n_calibration"],
        "backend_": meta["yieldwise_backend"],
        "seed_": meta["yieldwise_seed_used"],
        "posterior_": data,
        "n_components_": int(data.posterior.sizes["component"]),
        "members_": meta["yieldwise_members"],
        "reduction_": meta["yieldwise_class_reduction"],
    }


def _check_version(path: Path, data: Any, version: int) -> None:
    """Refuse a format version this yieldwise does not read: a newer one (upgrade), or
    one before :data:`OLDEST_READABLE` (:func:`_refused_version`)."""
    if version > FORMAT_VERSION:
        raise TransducerFileError(
            f"{path}: attribute {FORMAT_ATTRIBUTE!r} is {version}: written by a newer "
            f"yieldwise (format version {version}; this one reads format versions "
            f"{OLDEST_READABLE} to {FORMAT_VERSION}); upgrade yieldwise to load it"
        )
    if version < OLDEST_READABLE:
        raise TransducerFileError(_refused_version(path, data, version))


def _read_attributes(path: Path, data: Any) -> dict[str, Any]:
    attrs = dict(data.posterior.attrs)
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
    _check_version(path, data, meta[FORMAT_ATTRIBUTE])  # absent: version 1
    try:  # sampler_summary counts the tree-depth hits at the depth run with
        recorded_max_treedepth(meta["yieldwise_sampler"], meta["yieldwise_settings"])
    except ValueError:
        raise TransducerFileError(
            f"{path}: attribute 'yieldwise_sampler': the sampler record lacks "
            "'max_treedepth' and the settings' is None (chosen per fit), so the depth the "
            "fit ran with is unknown; the file was altered"
        ) from None
    if (
        meta[FORMAT_ATTRIBUTE] < _TEMPERATURE_SINCE
        and meta["yieldwise_class_reduction"] is not None
    ):
        raise TransducerFileError(
            f"{path}: a class-reduced transducer of format version {meta[FORMAT_ATTRIBUTE]}, "
            "whose others' share has no temperature (the model before version "
            f"{_TEMPERATURE_SINCE}, docs/model.md); refit the transducer on its calibration "
            "data and save it again"
        )
    if meta[FORMAT_ATTRIBUTE] < _ROTATION_SINCE and meta["yieldwise_transform"].is_rotated:
        raise TransducerFileError(
            f"{path}: format version {meta[FORMAT_ATTRIBUTE]} has no rotated outputs, "
            "yet its transform records one; the file was altered"
        )
    if meta[FORMAT_ATTRIBUTE] < _PROJECTION_SINCE and meta["yieldwise_transform"].is_projected:
        raise TransducerFileError(
            f"{path}: format version {meta[FORMAT_ATTRIBUTE]} has no outputs projected onto "
            "a line, yet its transform records one; the file was altered"
        )
    if (
        meta[FORMAT_ATTRIBUTE] < _LINE_LATTICE_SINCE
        and meta["yieldwise_transform"].line_resolution is not None
    ):
        raise TransducerFileError(
            f"{path}: format version {meta[FORMAT_ATTRIBUTE]} has no lattice of positions on "
            "a line, yet its transform records one (line_resolution); the file was altered"
        )
    return meta


def _refused_version(path: Path, data: Any, version: int) -> str:
    """The message refusing a file of a format version before :data:`OLDEST_READABLE` (1:
    the free-location mixture), saying what the file holds: the format attribute absent
    (so taken for version 1, as files of yieldwise <= 0.1 have none) or its number, and
    the yieldwise version the file records, if any. A file without the attribute that
    holds the current model (the kernels' design, or ``tau_f``: version 2 on) is not
    described as the old model: it was written otherwise than by ``Transducer.save``
    (ArviZ's ``to_netcdf`` of a ``posterior_`` made before it carried the version)."""
    attrs = data.posterior.attrs
    markers = [f"attribute {name!r}" for name in ("yieldwise_design",) if name in attrs] + [
        f"variable posterior/{name}" for name in ("tau_f",) if name in data.posterior
    ]
    if FORMAT_ATTRIBUTE not in attrs and markers:
        return (
            f"{path}: attribute {FORMAT_ATTRIBUTE!r} is absent, yet the file holds the model "
            f"of format versions {OLDEST_READABLE} to {FORMAT_VERSION} (its "
            f"{' and '.join(markers)}), so it was not written by Transducer.save (e.g. an "
            "InferenceData written with ArviZ's to_netcdf) or was altered; this yieldwise "
            f"reads format versions {OLDEST_READABLE} to {FORMAT_VERSION}. Save the fitted "
            "transducer with Transducer.save, which records the version; with this file "
            "only, open it with arviz.from_netcdf, set posterior.attrs"
            f"[{FORMAT_ATTRIBUTE!r}] = {FORMAT_VERSION} and write it again"
        )
    if FORMAT_ATTRIBUTE in attrs:
        found = f"attribute {FORMAT_ATTRIBUTE!r} is {version}"
    else:
        found = (
            f"attribute {FORMAT_ATTRIBUTE!r} is absent, so the file is taken for format "
            f"version {version} (files of yieldwise <= 0.1 have none)"
        )
    recorded = attrs.get("yieldwise_version")
    written = (
        "no attribute 'yieldwise_version' says which yieldwise wrote it"
        if recorded is None else f"the file's attribute 'yieldwise_version' is {str(recorded)!r}"
    )  # fmt: skip
    return (
        f"{path}: {found}: a transducer of format version {version} (the free-location "
        f"mixture that docs/model.md replaces; {written}); this yieldwise reads format "
        f"versions {OLDEST_READABLE} to {FORMAT_VERSION}. Refit the transducer on its "
        "calibration data and save it again"
    )


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
    _check_fields(path, data, VARIABLES, sizes, len(classes), "")
    stored = meta["yieldwise_class_reduction"]
    if stored is not None:  # the classes' own outputs and labels, beside the reduced fit
        sizes = {"item": sizes["item"], "class_column": len(stored.record.columns)}
        _check_fields(path, data, REDUCTION_VARIABLES, sizes, len(stored.record.classes),
                      " (the file holds a class reduction)")  # fmt: skip
        if stored.record.paired:  # the pair offsets' draws, one set per ordered pair
            record = stored.record
            pair_sizes = {"group": record.n_pairs, "class": len(record.rank_classes)}
            _check_fields(path, data, PAIR_VARIABLES, pair_sizes, len(record.classes),
                          " (the class reduction has pair offsets)")  # fmt: skip


def _check_fields(
    path: Path, data: Any, fields: tuple[Field, ...], sizes: dict[str, int], n_classes: int,
    why: str,
) -> None:  # fmt: skip
    """Each field present, with its dims, sizes (``sizes``, else those of the fields before
    it) and values; ``why`` follows the message of a missing one."""
    seen: dict[str, int] = {}
    for field in fields:
        where = f"{path}: variable {field.group}/{field.name}"
        dataset = getattr(data, field.group)
        if field.name not in dataset:
            raise TransducerFileError(f"{where} is missing{why}")
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
        problem = _check_values(field, np.asarray(variable.values), n_classes)
        if problem is not None:
            raise TransducerFileError(f"{where}: {problem}")


# ---------------------------------------------------------------- writing
def coord_labels(labels: tuple[Label, ...]) -> np.ndarray:
    """Coordinate values for labels: as they are when all str or all int, else strings.

    Strings only when none holds a NUL (numpy and NetCDF text end there: ``"a\\x00"``
    would read ``"a"``), and ints only when one integer dtype holds them all (beyond
    int64 and uint64, or mixing negatives with ints beyond int64, the file could not
    store them); else the labels' text, a NUL written as the four characters ``\\x00``.
    The labels themselves are stored exactly in ``yieldwise_classes`` (JSON).
    """
    if all(isinstance(x, str) and "\x00" not in x for x in labels):
        return np.array(labels)
    if all(isinstance(x, int) and not isinstance(x, bool) for x in labels):
        for dtype in (np.int64, np.uint64):
            try:
                return np.array(labels, dtype=dtype)
            except OverflowError:
                continue
    return np.array([str(x).replace("\x00", "\\x00") for x in labels])


def _json_labels(labels: tuple[Label, ...]) -> str:
    check_savable_labels(labels, "the transducer's classes_")
    return json.dumps([python_scalar(label) for label in labels])


def to_inference_data(
    transducer: Any,
    result: Any,
    data: Mapping[str, Any],
    y: np.ndarray,
    class_index: np.ndarray,
    columns: tuple[str, ...],
    design: KernelDesign | None = None,
) -> Any:
    """The fit as an ArviZ InferenceData, with every attribute a transducer file holds.

    Groups ``posterior`` (``w``, ``alpha``, ``mu``, ``sigma``, ``log_lik``, ``tau_f``),
    ``sample_stats``, ``observed_data`` (the outputs and class indices) and
    ``constant_data`` (the merged rows the likelihood summed: binned on large sets); the
    metadata (:data:`ATTRIBUTES`, :data:`OPTIONAL_ATTRIBUTES` and the provenance) travel
    with the posterior group.
    """
    import arviz as az

    from .. import __version__
    from .stan_data import default_prior

    transform = transducer.transform_
    labels = transducer.classes_
    coords = {
        "component": np.arange(transducer.n_components_),
        "class": coord_labels(labels),
        "output_dim": list(transform.model_dim_names),
        "item": np.arange(y.shape[0]),
        "output_column": list(columns),
        "row": np.arange(int(data["N"])),
        "class_log_odds": coord_labels(labels)[1:],
    }
    dims = {
        "w": ["component"],
        "alpha": ["component", "class"],
        "mu": ["component", "output_dim"],
        "sigma": ["component", "output_dim"],
        "outputs": ["item", "output_column"],
        "class_index": ["item"],
        "y_lower": ["row", "output_dim"],
        "y_upper": ["row", "output_dim"],
        "cls": ["row"],
        "count": ["row"],
        "tau_f": ["class_log_odds"],
    }
    posterior = {name: result.draws[name] for name in ("w", "alpha", "mu", "sigma", "log_lik")}
    if int(data.get("G", 0)) > 0:  # a class reduction's pair offsets (stan/transducer.stan)
        posterior["group_offset"] = result.draws["group_offset"]
        coords["group"] = np.arange(int(data["G"]))
        dims["group_offset"] = ["group", "class"]
    # the smoothing sd's: identified parameters, diagnosed with the invariant quantities
    posterior.update({name: result.draws[name] for name in ("tau_f",)
                      if name in result.draws})  # fmt: skip
    constant = {name: np.asarray(data[name]) for name in ("y_lower", "y_upper", "cls", "count")}
    settings = stored_settings(transducer)
    prior = default_prior(design) if design is not None else {}
    attrs = {
        "yieldwise_version": __version__,
        "yieldwise_backend": result.backend,
        "yieldwise_backend_version": result.backend_version,
        "yieldwise_stan_version": result.stan_version,
        "yieldwise_sampling_seconds": float(result.sampling_seconds),
        "yieldwise_settings": json.dumps(settings_to_json(settings)),
        "yieldwise_sampler": json.dumps(result.settings, default=_jsonable),
        "yieldwise_prior": json.dumps(prior),
        "yieldwise_classes": _json_labels(labels),
        "yieldwise_transform": transform.to_json(),
        "yieldwise_n_calibration": int(y.shape[0]),
        "yieldwise_seed_used": int(result.settings["seed"]),
        "yieldwise_design": json.dumps(design.record() if design is not None else {}),
        # here, not only in write(): posterior_ is public, and may be written by ArviZ
        FORMAT_ATTRIBUTE: FORMAT_VERSION,
    }
    idata = az.from_dict(
        posterior=posterior,
        sample_stats=result.sample_stats,
        observed_data={"outputs": y, "class_index": class_index},
        constant_data=constant,
        coords=coords,
        dims=dims,
    )
    # The metadata travels with the posterior group, which every reader of the file loads.
    idata.posterior.attrs.update(attrs)
    return idata


def stored_settings(transducer: Any) -> dict[str, Any]:
    """The constructor's settings as a file stores them: ``get_params()``, with an
    output-transform iterable other than a string, list or tuple (a generator, say) as a
    list. :func:`settings_to_json` writes them."""
    settings = transducer.get_params()
    spec = settings["output_transform"]
    if not isinstance(spec, (str, list, tuple)):
        settings["output_transform"] = list(spec)
    return settings


#: The tags of :func:`settings_to_json`: a value JSON has no form for is stored as an
#: object of one tag (and ``value``), so that a loaded transducer's ``get_params()`` equals
#: the saved one's (until 2026-12-07 a tuple came back as a list and ``np.float32(0.1)``
#: as the float 0.10000000149011612). Added within format version 7: a file without tags
#: reads as before; a reader of an earlier yieldwise keeps a tagged setting as the tag's
#: object, which only a refit reads (and refuses).
_TUPLE, _NUMPY, _ARRAY, _PAIRS = ("yieldwise_tuple", "yieldwise_numpy", "yieldwise_array",
                                  "yieldwise_pairs")  # fmt: skip
_SETTING_TAGS = frozenset({_TUPLE, _NUMPY, _ARRAY, _PAIRS})
#: numpy kinds stored by dtype (booleans, integers, floats, strings); a numpy value of
#: another kind is stored as its ``str``, as any other value JSON has no form for.
_NUMPY_KINDS = "biufU"


def settings_to_json(value: Any) -> Any:
    """``value`` (constructor settings, or one of them) as JSON-able data that
    :func:`settings_from_json` turns back into an equal value of the same types: lists,
    strings, numbers, booleans and None as themselves (floats by ``repr``, exact); a
    tuple as ``{"yieldwise_tuple": [...]}``; a numpy scalar or array of a kind in
    :data:`_NUMPY_KINDS` with its dtype (``{"yieldwise_numpy": "<f4", "value": 0.1...}``);
    a mapping as an object when its keys are strings and none is a tag, else as its
    ``[key, value]`` pairs (``yieldwise_pairs``); anything else as its ``str``."""
    if isinstance(value, (np.generic, np.ndarray)):  # (np.float64 and np.str_ first:
        if value.dtype.kind not in _NUMPY_KINDS:  # they are a float and a str too)
            return str(value)
        tag = _NUMPY if isinstance(value, np.generic) else _ARRAY
        return {tag: value.dtype.str, "value": value.tolist()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {_TUPLE: [settings_to_json(item) for item in value]}
    if isinstance(value, list):
        return [settings_to_json(item) for item in value]
    if isinstance(value, Mapping):
        keys = list(value)
        if all(isinstance(k, str) for k in keys) and not _SETTING_TAGS.intersection(keys):
            return {k: settings_to_json(v) for k, v in value.items()}
        return {_PAIRS: [[settings_to_json(k), settings_to_json(v)] for k, v in value.items()]}
    return str(value)


def settings_from_json(value: Any) -> Any:
    """The value :func:`settings_to_json` stored as ``value`` (JSON data, as read)."""
    if isinstance(value, list):
        return [settings_from_json(item) for item in value]
    if not isinstance(value, dict):
        return value
    tags = _SETTING_TAGS.intersection(value)
    if not tags:
        return {k: settings_from_json(v) for k, v in value.items()}
    (tag,) = tags if len(tags) == 1 else (None,)
    expected = {tag, "value"} if tag in (_NUMPY, _ARRAY) else {tag}
    if tag is None or set(value) != expected:
        raise ValueError(f"a stored setting has a malformed tag: {value!r}")
    if tag == _TUPLE:
        return tuple(settings_from_json(item) for item in _of_type(value[tag], list, tag))
    if tag == _PAIRS:
        pairs = _of_type(value[tag], list, tag)
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            raise ValueError(f"{tag} must hold [key, value] pairs, found {pairs!r}")
        return {_hashable(settings_from_json(k)): settings_from_json(v) for k, v in pairs}
    try:
        dtype = np.dtype(_of_type(value[tag], str, tag))
        if dtype.kind not in _NUMPY_KINDS:
            raise TypeError(f"kind {dtype.kind!r}")
        array = np.array(value["value"], dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a stored numpy setting {value!r} cannot be read: {exc}") from None
    if tag == _NUMPY:
        if array.ndim:
            raise ValueError(f"a stored numpy scalar holds an array: {value!r}")
        return array[()]
    return array


def _of_type(value: Any, kind: type, tag: str) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"{tag} must hold a {kind.__name__}, found {value!r}")
    return value


def _hashable(key: Any) -> Any:
    """A mapping key read back. A key :func:`settings_to_json` wrote decodes to a hashable
    value (a tuple key comes back a tuple); a list key, which only an altered file can
    hold, is refused."""
    try:
        hash(key)
    except TypeError:
        raise ValueError(f"a stored mapping key is not hashable: {key!r}") from None
    return key


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return dict(value)
    return str(value)


def record_members(idata: Any, members: Mapping[str, list[str]]) -> None:
    """Record a joint transducer's members (each classifier's output columns)."""
    idata.posterior.attrs["yieldwise_members"] = json.dumps(dict(members))


def record_reduction(idata: Any, transducer: Any, y: np.ndarray, class_index: np.ndarray) -> None:
    """Record a class-reduced ``transducer``'s reduction beside its reduced problem's fit: the
    reduction and transform, the classes' outputs and true classes (``class_outputs``,
    ``class_label_index``), and the user's constructor settings."""
    import xarray as xr

    transform = transducer.transform_
    observed = idata.observed_data
    observed["class_outputs"] = xr.DataArray(
        np.asarray(y, float), dims=("item", "class_column"),
        coords={"class_column": list(transform.columns)},
    )  # fmt: skip
    observed["class_label_index"] = xr.DataArray(np.asarray(class_index), dims=("item",))
    stored = StoredReduction(transducer.reduction_, transform, stored_settings(transducer))
    idata.posterior.attrs["yieldwise_class_reduction"] = stored.to_json()


def record_classifier(idata: Any, name: str) -> None:
    """Record the name of the classifier whose outputs were calibrated."""
    idata.posterior.attrs["yieldwise_classifier"] = name


def recorded_max_treedepth(sampler: dict[str, Any], settings: dict[str, Any]) -> int:
    """The largest tree depth a fit ran with: its sampler record's, else (a file from
    before the per-dimension default, 2026-12-07) the constructor's settings'. A
    ValueError if neither records it (not a file yieldwise wrote): its tree-depth hits
    could not be counted."""
    depth = sampler.get("max_treedepth", settings.get("max_treedepth"))
    if depth is None:
        raise ValueError(
            "the fit records no max_treedepth (neither its sampler record nor its settings): "
            "its tree-depth hits cannot be counted"
        )
    return int(depth)


def fit_record(idata: Any) -> dict[str, Any]:
    """What the file records about its fit: ``settings`` (the constructor's), ``sampler``
    (the backend's settings as run), ``sampling_seconds``, ``backend``,
    ``backend_version``, ``stan_version`` and ``design`` (the kernels; empty for given
    draws)."""
    attrs = idata.posterior.attrs
    return {
        "settings": settings_from_json(json.loads(attrs["yieldwise_settings"])),
        "sampler": json.loads(attrs["yieldwise_sampler"]),
        "sampling_seconds": float(attrs["yieldwise_sampling_seconds"]),
        "backend": attrs["yieldwise_backend"],
        "backend_version": attrs["yieldwise_backend_version"],
        "stan_version": attrs["yieldwise_stan_version"],
        "design": json.loads(attrs.get("yieldwise_design", "{}")),
    }


def write(idata: Any, path: str | os.PathLike[str]) -> Path:
    """Write a transducer's InferenceData to ``path`` with the format version (NetCDF, no
    pickle), whole or not at all: into a temporary file beside ``path``, then renamed
    over it.

    ``path`` is checked first (:func:`file_path`). An OSError of the writing (a folder
    it may not write in, a full disk) is raised again as the same class, naming ``path``
    and the cause, not the hidden temporary file.
    """
    from .._files import hidden_name

    path = file_path(path, "write")
    # the writer's own errors would name the hidden partial file, not the user's path
    try:
        is_dir = path.is_dir()  # a name too long for the system: OSError here
    except OSError as exc:
        raise _write_error(path, exc, path) from None
    if is_dir:
        raise IsADirectoryError(f"{path}: is a folder; give the name of the file to write")
    if not path.parent.is_dir():
        what = "is not a folder" if path.parent.exists() else "no such folder"
        raise FileNotFoundError(
            f"{path.parent}: {what}; the transducer file {path.name!r} goes into an existing "
            "folder (create it first)"
        )
    idata.posterior.attrs[FORMAT_ATTRIBUTE] = FORMAT_VERSION
    # a new name the writer creates (with the user's umask, unlike mkstemp's 0600),
    # shortened where the user's long but legal name would make it too long
    partial = path.with_name(hidden_name(path.name, f"partial-{secrets.token_hex(6)}"))
    try:
        idata.to_netcdf(partial)
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            Path(partial).unlink(missing_ok=True)
        raise _write_error(path, exc, partial) from exc
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return path


def _write_error(path: Path, exc: OSError, partial: Path) -> OSError:
    """``exc`` (raised while writing ``partial``, the hidden file beside ``path``) as an
    OSError of the same class naming ``path``, the cause and what to do."""
    code = exc.errno if isinstance(exc.errno, int) and exc.errno > 0 else None
    # the system's words for the code; else the writer's, about the user's path
    cause = os.strerror(code) if code is not None else str(exc).replace(str(partial), str(path))
    message = (
        f"{path}: cannot write the transducer file ({cause}); check that the folder "
        f"{path.parent} exists, is writable and has room, or choose another path"
    )
    if code == errno.ENAMETOOLONG:
        message = f"{path}: cannot write the transducer file ({cause}); choose a shorter name"
    if code is None:
        try:
            return type(exc)(message)
        except Exception:  # an OSError subclass with its own constructor
            return OSError(message)
    return OSError(code, message)  # the subclass of the code: PermissionError, ...
