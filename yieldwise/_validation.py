"""Input validation and label handling shared by every module.

Every check raises ``ValueError`` or ``TypeError`` whose message names the
argument, what was expected and what was found, so that a user can fix the
call without reading the source.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

Label = Hashable


def python_scalar(label: Any) -> Label:
    """Turn numpy scalars into Python scalars so ``0`` and ``np.int64(0)`` agree."""
    if isinstance(label, np.generic):
        return label.item()
    return label


def _describe(values: Sequence[Any], limit: int = 6) -> str:
    shown = ", ".join(repr(v) for v in list(values)[:limit])
    more = f", ... ({len(values)} in all)" if len(values) > limit else ""
    return f"[{shown}{more}]"


#: Integers up to this magnitude are exact in float64 (53-bit significand); beyond it
#: neighbouring integers round to the same float (2**53 + 1 becomes 2**53).
EXACT_INTEGER_LIMIT = 2**53


def as_float_array(
    values: Any,
    name: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
    exact_integers: bool = False,
) -> np.ndarray:
    """Convert ``values`` to a finite float array, checking its dimensionality.

    Complex values are refused (``TypeError``): the conversion would drop their
    imaginary parts. With ``exact_integers=True`` (scores, whose order is what counts),
    integers beyond ``+-2**53`` are refused too (``ValueError``): float64 cannot tell
    neighbouring ones apart, so distinct scores would become one tied score.
    """
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be numeric array-like, found a string {values!r}")
    if _is_complex(values):
        raise TypeError(
            f"{name} must hold real numbers, found complex values (dtype "
            f"{np.asarray(values).dtype}); converting them would silently drop the imaginary "
            f"parts: pass the real part ({name}.real) if that is what is meant"
        )
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be numeric array-like; could not convert it to numbers ({exc})"
        ) from None
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if array.ndim not in allowed:
            expected = " or ".join(f"{d}-dimensional" for d in allowed)
            raise ValueError(
                f"{name} must be {expected}, found shape {array.shape} ({array.ndim}-dimensional)"
            )
    if array.size == 0:
        raise ValueError(f"{name} is empty (shape {array.shape})")
    bad = ~np.isfinite(array)
    if bad.any():
        where = np.argwhere(bad)[0]
        kind = "NaN" if np.isnan(array[tuple(where)]) else "infinite"
        raise ValueError(
            f"{name} must be finite, found {int(bad.sum())} NaN/infinite value(s); "
            f"the first ({kind}) is at index {tuple(int(i) for i in where)}"
        )
    if exact_integers:
        _check_exact_integers(values, array, name)
    return array


def _is_complex(values: Any) -> bool:
    """Whether ``values`` holds complex numbers (False when numpy cannot read it at all:
    the conversion then says why)."""
    try:
        return bool(np.iscomplexobj(values))
    except (TypeError, ValueError):
        return False


def _check_exact_integers(values: Any, array: np.ndarray, name: str) -> None:
    """ValueError when ``values`` holds integers beyond ``+-2**53``, which ``array`` (their
    float64 conversion) no longer tells apart from their neighbours."""
    # 2**53 + 1 converts to 2**53.0, so the float prefilter is >=; the exact test on the
    # integers themselves is >. Floats this large are left alone: they were never exact.
    suspect = np.abs(array) >= EXACT_INTEGER_LIMIT
    if not suspect.any():
        return
    if isinstance(values, np.ndarray) and values.dtype.kind in "iu":
        big = (values > EXACT_INTEGER_LIMIT) | (values < -EXACT_INTEGER_LIMIT)
    else:  # lists, pandas, object arrays: look at the Python or numpy integers themselves
        try:
            items = np.asarray(values, dtype=object).reshape(array.shape)
        except (TypeError, ValueError):  # pragma: no cover - converted above already
            return
        big = np.zeros(array.shape, dtype=bool)
        for position in zip(*np.nonzero(suspect), strict=True):
            item = items[position]
            big[position] = (
                isinstance(item, int | np.integer)
                and not isinstance(item, bool | np.bool_)
                and abs(int(item)) > EXACT_INTEGER_LIMIT
            )
    if big.any():
        where = tuple(int(i) for i in np.argwhere(big)[0])
        first = python_scalar(values[where] if isinstance(values, np.ndarray) else items[where])
        raise ValueError(
            f"{name} holds {int(big.sum())} integer(s) beyond +-2**53 (the first, {first!r}, "
            f"at index {where}), which float64 cannot tell apart from their neighbours: "
            "distinct scores would merge into ties and the ranking would be silently wrong; "
            "subtract an offset or rank them first (e.g. scipy.stats.rankdata) and pass "
            "the smaller numbers"
        )


def caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside the yieldwise package, for a warning
    at the user's call whatever public function (and internal calls) led to it: call it in
    the function that calls ``warnings.warn``."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def labelled_table(
    values: Any, rows: Iterable[Any] | None, columns: Iterable[Any] | None, name: str,
    row_name: str, column_name: str,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """``(values, rows, columns)`` for a matrix constructor: a DataFrame's index and columns
    are its labels (read by label, not position). Labels given as well must be the same
    set: the table is then reordered to them; otherwise anything passes through."""
    if not isinstance(values, pd.DataFrame):
        return values, rows, columns
    frame = values
    # a string is one label, not a sequence of them ("ab" would be read as "a", "b")
    given_labels = []
    for given, what in ((rows, row_name), (columns, column_name)):
        if isinstance(given, (str, bytes)):
            raise TypeError(
                f"{what} must be a sequence of labels, found the string {given!r}; pass a "
                f"list (e.g. [{given!r}] for one label)"
            )
        given_labels.append(None if given is None else [python_scalar(x) for x in given])
    rows, columns = given_labels  # lists, so that a generator is read only once
    # duplicated labels first: reading by label cannot tell two rows "a" apart, and every
    # later check (set equality, lengths) would report a symptom instead of the cause
    for axis, where, what in ((frame.index, "index", row_name),
                              (frame.columns, "columns", column_name)):  # fmt: skip
        if not axis.is_unique:
            duplicated = list(dict.fromkeys(axis[axis.duplicated()].tolist()))
            raise ValueError(
                f"{name} is a DataFrame whose {where} (its {what}) must be unique labels, "
                f"found duplicates {_describe(duplicated)} in {_describe(list(axis))}; give "
                f"each of the {what} one {'row' if where == 'index' else 'column'}"
            )
    for given, axis, where, what in ((rows, frame.index, "index", row_name),
                                     (columns, frame.columns, "columns", column_name)):  # fmt: skip
        if given is not None and (set(given) != set(axis) or len(given) != len(axis)):
            raise ValueError(
                f"{name} is a DataFrame whose {where} {list(axis)} are not the {what} given, "
                f"{list(given)}; give the same labels (in any order), or leave {what} out "
                "to take the table's"
            )
    rows = list(frame.index) if rows is None else rows
    columns = list(frame.columns) if columns is None else columns
    return frame.loc[rows, columns].to_numpy(), rows, columns


def check_labels(labels: Iterable[Any] | None, size: int | None, name: str) -> tuple[Label, ...]:
    """Validate axis labels: default ``0..size-1``; unique, hashable, right length
    (any length when ``size`` is None; the labels are then read once, so a generator
    works)."""
    if labels is None:
        if size is None:
            raise ValueError(f"{name} must be given (a sequence of labels), found None")
        return tuple(range(size))
    if isinstance(labels, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of labels, found the string {labels!r}")
    if isinstance(labels, pd.Index | pd.Series | np.ndarray):
        labels = labels.tolist()
    try:
        result = tuple(python_scalar(label) for label in labels)
    except TypeError:
        if isinstance(labels, Iterable):
            raise
        raise TypeError(
            f"{name} must be a sequence of labels, found {type(labels).__name__} {labels!r}"
        ) from None
    if size is not None and len(result) != size:
        raise ValueError(
            f"{name} must have {size} labels, found {len(result)}: {_describe(result)}"
        )
    for label in result:
        if not isinstance(label, Hashable) or _is_missing(label):
            raise ValueError(f"{name} must hold hashable, non-missing labels, found {label!r}")
    _check_bools_apart(result, name)
    if len(set(result)) != len(result):
        seen: set[Label] = set()
        duplicated = [x for x in result if x in seen or seen.add(x)]  # type: ignore[func-returns-value]
        raise ValueError(f"{name} must be unique, found duplicates {_describe(duplicated)}")
    return result


def _is_missing(label: Any) -> bool:
    try:
        return bool(pd.isna(label))
    except (TypeError, ValueError):
        return False


def label_values(values: Any, name: str) -> np.ndarray:
    """Turn a 1-D sequence of labels (numpy, list, pandas Series/Categorical) into
    a 1-D object array of Python scalars, rejecting missing and unhashable values.

    Any hashable label works, tuples included: a list of pairs is a list of pair
    labels, not a 2-D table (a 2-D array and a list of lists are refused)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of labels, found the string {values!r}")
    if isinstance(values, pd.DataFrame):
        raise TypeError(
            f"{name} must be 1-dimensional, found a DataFrame with columns "
            f"{list(values.columns)}; pass one column"
        )
    # arrays by their ndim, before pandas says so; not np.ndim(values) for a list, which
    # would take a list of tuple labels for a 2-D table (nested lists are refused below)
    if not isinstance(values, pd.Series) and getattr(values, "ndim", 1) > 1:
        raise ValueError(f"{name} must be 1-dimensional, found shape {np.shape(values)}")
    series = pd.Series(values) if not isinstance(values, pd.Series) else values
    if series.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, found shape {np.shape(values)}")
    if len(series) == 0:
        raise ValueError(f"{name} is empty")
    missing = series.isna().to_numpy()
    if missing.any():
        positions = np.flatnonzero(missing)
        raise ValueError(
            f"{name} has {missing.sum()} missing label(s) (NaN/None); "
            f"first at position {int(positions[0])}"
        )
    values = [python_scalar(v) for v in series.tolist()]
    for position, value in enumerate(values):
        if isinstance(value, list | np.ndarray):  # rows of a table, not labels
            raise ValueError(
                f"{name} must be 1-dimensional (one label per item), found a "
                f"{type(value).__name__} {_describe(list(value))} at position "
                f"{position}; pass one column, or tuples for labels made of several values"
            )
        if not isinstance(value, Hashable):
            raise TypeError(
                f"{name} must hold hashable labels (numbers, strings, tuples, ...), found "
                f"{type(value).__name__} {value!r} at position {position}; turn each label "
                "into a hashable value (e.g. a tuple or a string)"
            )
    _check_bools_apart(values, name)
    return object_array(values)


def object_array(labels: Iterable[Any]) -> np.ndarray:
    """A 1-D object array of ``labels``, one element per label whatever its type.

    ``np.array(labels, dtype=object)`` would read tuple labels as the rows of a 2-D
    array (any hashable label is allowed, tuples included).
    """
    items = list(labels)
    array = np.empty(len(items), dtype=object)
    for position, label in enumerate(items):
        array[position] = label
    return array


def _check_bools_apart(labels: Sequence[Any], name: str) -> None:
    """Reject labels mixing booleans with the numbers 0/1, which Python takes as equal.

    ``True == 1`` and ``hash(True) == hash(1)``: every set, dict and ``unique`` would
    merge the two into one class without a word.
    """
    bools = {label for label in labels if isinstance(label, bool)}
    if not bools:
        return
    numbers = {
        label for label in labels
        if isinstance(label, int | float) and not isinstance(label, bool) and label in (0, 1)
    }  # fmt: skip
    if numbers:
        raise ValueError(
            f"{name} mixes the booleans {sorted(bools)} with the numbers {sorted(numbers)}, "
            "which Python treats as the same labels (True == 1), so two classes would merge "
            "into one; use one kind of label (e.g. .astype(int) or .astype(str))"
        )


def categories_of(values: Any) -> tuple[Label, ...] | None:
    """The declared categories of a pandas Categorical or categorical Series, else None."""
    if isinstance(values, pd.Categorical):
        return tuple(python_scalar(c) for c in values.categories)
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        return tuple(python_scalar(c) for c in values.cat.categories)
    return None


def sorted_unique(
    *arrays: np.ndarray,
    name: str = "the true classes",
    remedy: str = (
        "give the class order explicitly (the classes= argument; class_labels= for a Transducer)"
    ),
    fallback: bool = False,
) -> tuple[Label, ...]:
    """Sorted union of labels: the smallest label is the default first (positive) class.

    Labels that cannot be ordered (``0`` and ``"x"``; frozensets, which are only partially
    ordered) have no smallest label, and first-seen order would make the result depend on
    the order of the items: ``ValueError`` naming ``name`` (the argument holding the
    labels) and the label types found, and saying what to do (``remedy``). With
    ``fallback=True`` (for callers whose result does not depend on the order, e.g. when
    ``positive=`` is given) they come in first-seen order. Numbers of any kind (bool,
    numpy and Python ints and floats) order among themselves.
    """
    joined = pd.unique(np.concatenate(arrays))
    values = joined.tolist()
    try:
        ordered = sorted(values)
        # distinct labels of a total order sort strictly increasing; a partial order
        # (sets) sorts without complaint into an order that depends on the input's
        total = all(a < b for a, b in itertools.pairwise(ordered))
    except TypeError:
        total = False
    if total:
        return tuple(ordered)
    if fallback:
        return tuple(values)
    examples: dict[str, Any] = {}
    for value in values:
        examples.setdefault(type(value).__name__, value)
    found = ", ".join(f"{kind} (e.g. {examples[kind]!r})" for kind in sorted(examples))
    raise ValueError(
        f"the labels in {name} cannot be sorted (types found: {found}), so there is no "
        "smallest label to be the first (positive) class and the class order would depend "
        f"on the order of the items; {remedy}, or use one kind of label (e.g. .astype(str))"
    )


def indices_of(
    values: np.ndarray, labels: Sequence[Label], name: str, axis_name: str
) -> np.ndarray:
    """Positions of each value of ``values`` within ``labels``; unknown labels raise."""
    # tupleize_cols=False: tuple labels stay labels, not the levels of a MultiIndex
    index = pd.Index(list(labels), dtype=object, tupleize_cols=False)
    positions = index.get_indexer(pd.Index(values, dtype=object, tupleize_cols=False))
    unknown = positions < 0
    if unknown.any():
        found = pd.unique(values[unknown]).tolist()
        raise ValueError(
            f"{name} holds label(s) {_describe(found)} that are not among the {axis_name} "
            f"{_describe(list(labels))}"
        )
    return positions


def align(
    source: Sequence[Label], target: Sequence[Label], name: str, axis_name: str
) -> np.ndarray:
    """Positions in ``target`` of every label in ``source``; all must be present."""
    return indices_of(object_array(source), target, name, axis_name)


def check_positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, found {value!r}")
    return int(value)


def is_seed(value: Any, upper: int | None = None) -> bool:
    """Whether ``value`` is a non-negative integer (not a bool), below ``upper`` if given:
    the one rule for every ``seed=`` (each caller words its own message, which says what
    else it accepts)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        return False
    return upper is None or value < upper


def json_object(text: Any, required: Sequence[str], what: str) -> dict[str, Any]:
    """A JSON object read from ``text`` holding every key of ``required``; ValueError says
    what was found, or which keys ``what`` (e.g. "the transform record") lacks."""
    record = json.loads(text)
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, found {type(record).__name__}")
    missing = [key for key in required if key not in record]
    if missing:
        raise ValueError(f"{what} lacks {missing}")
    return record
