"""Pictures of a fitted transducer (:meth:`Transducer.plot <yieldwise.Transducer.plot>`).

Drawn from the transducer's public predictions (``predict_interval``, ``predict_proba``)
and its calibration outputs; matplotlib is imported only when a picture is drawn.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import Label, indices_of
from .encoding import ExtrapolationWarning, LatticeWarning

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .estimator import Transducer

__all__ = ["plot_transducer"]


#: Fewest points along the outputs for a curve (:func:`plot_transducer`'s ``n_grid``).
N_GRID_MIN = 10


def plot_transducer(
    transducer: Transducer,
    ax: Axes | None = None,
    prob: float = 0.75,
    n_grid: int = 200,
    classes: Iterable[Label] | None = None,
    prevalences: Any = None,
) -> Axes:
    """:meth:`Transducer.plot <yieldwise.Transducer.plot>` (whose docstring says what is
    drawn): curves with bands for one output column, a probability map for two, the
    transducer at the calibration outputs for probability vectors and more columns."""
    import matplotlib.pyplot as plt

    transducer.check_fitted()
    if isinstance(n_grid, bool) or not isinstance(n_grid, int | np.integer) or n_grid < N_GRID_MIN:
        # fewer points draw a straight line between two outputs: a curve that is not there
        raise ValueError(f"n_grid must be an integer >= {N_GRID_MIN}, found {n_grid!r}")
    y = transducer.posterior_.observed_data["outputs"].values
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    elif not hasattr(ax, "plot"):
        raise TypeError(f"ax must be a matplotlib Axes (or None), found {type(ax).__name__}")
    if classes is None:
        shown = transducer.classes_[1:] if len(transducer.classes_) == 2 else transducer.classes_
    else:
        shown = tuple(classes)
        indices_of(np.array(shown, dtype=object), transducer.classes_, "classes", "classes_")
    if y.shape[1] == 1:
        _plot_curve(transducer, ax, y[:, 0], shown, prob, n_grid, prevalences)
    elif transducer.transform_.is_simplex or y.shape[1] > 2:
        _plot_at_calibration_outputs(transducer, ax, y, shown, prob, prevalences)
    elif y.shape[1] == 2:
        label = shown[-1]
        j = transducer.classes_.index(label)
        gx = np.linspace(y[:, 0].min(), y[:, 0].max(), int(np.sqrt(n_grid * 50)))
        gy = np.linspace(y[:, 1].min(), y[:, 1].max(), len(gx))
        xx, yy = np.meshgrid(gx, gy)
        points = np.column_stack([xx.ravel(), yy.ravel()])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LatticeWarning)  # the grid is no lattice
            if transducer.transform_.is_projected:  # outputs on a line: the map is p at
                # each point's projection onto it, off the line by construction
                warnings.simplefilter("ignore", ExtrapolationWarning)
            p = transducer.predict_proba(points, prevalences=prevalences)[:, j].reshape(xx.shape)
        mesh = ax.pcolormesh(xx, yy, p, vmin=0, vmax=1, cmap="viridis", shading="auto")
        bar = ax.figure.colorbar(mesh, ax=ax)
        bar.set_label(f"p({label} | output)", parse_math=False)
        ax.scatter(y[:, 0], y[:, 1], s=2, c="white", alpha=0.3)
        ax.set_xlabel(str(transducer.transform_.columns[0]), parse_math=False)
        ax.set_ylabel(str(transducer.transform_.columns[1]), parse_math=False)
        ax.set_title("Transducer probability map")
    return ax


def _plot_curve(
    transducer: Transducer, ax: Axes, y: np.ndarray, shown: tuple[Label, ...], prob: float,
    n_grid: int, prevalences: Any,
) -> None:  # fmt: skip
    """One output column: curves and bands, solid over the calibration outputs and
    dashed over the tails beyond them (where the transducer extrapolates)."""
    from matplotlib.patches import Patch

    from ..plots import verbatim_legend

    low, high = float(y.min()), float(y.max())
    start, stop = _plot_span(transducer.transform_.kind[0], low, high)
    grid = np.unique(np.r_[np.linspace(start, stop, n_grid), low, high])
    with warnings.catch_warnings():  # the tails extrapolate on purpose; grid off-lattice
        warnings.simplefilter("ignore", ExtrapolationWarning)
        warnings.simplefilter("ignore", LatticeWarning)
        band = transducer.predict_interval(grid, prob=prob, prevalences=prevalences)
    inside = (grid >= low) & (grid <= high)
    handles, labels = [], []
    for label in shown:
        j = transducer.classes_.index(label)
        mean = band["mean"].values[:, j]
        (line,) = ax.plot(grid, np.where(inside, mean, np.nan))
        for tail in (grid <= low, grid >= high):
            if tail.sum() > 1:
                ax.plot(grid, np.where(tail, mean, np.nan), linestyle="--",
                        color=line.get_color())  # fmt: skip
        for where, alpha in ((inside, 0.25), (~inside | (grid == low) | (grid == high), 0.1)):
            ax.fill_between(
                grid, band["lower"].values[:, j], band["upper"].values[:, j], where=where,
                color=line.get_color(), alpha=alpha, linewidth=0,
            )  # fmt: skip
        handles.append(line)
        labels.append(f"p({label} | output)")
    if start < low or stop > high:
        for a, b in ((start, low), (high, stop)):
            if a < b:
                ax.axvspan(a, b, color="0.93", zorder=0, linewidth=0)
        handles.append(Patch(color="0.93"))
        labels.append("beyond the calibration outputs")
    ax.plot(y, np.full(len(y), -0.02), "|", color="0.4", alpha=0.3, markersize=6)
    ax.set_xlim(start, stop)
    ax.set_xlabel(str(transducer.transform_.columns[0]), parse_math=False)
    ax.set_ylabel("probability")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"Transducer with {prob:.0%} variability bands")
    verbatim_legend(ax, handles, labels, loc="best")  # class labels shown verbatim


def _class_columns(transducer: Transducer, shown: tuple[Label, ...]) -> dict[Label, int]:
    """The output column that belongs to each class, by name, else by position."""
    columns = [str(c).lower() for c in transducer.transform_.columns]
    found: dict[Label, int] = {}
    for label in shown:
        named = [j for j, c in enumerate(columns) if str(label).lower() in c]
        if len(named) == 1:
            found[label] = named[0]
        elif len(columns) == len(transducer.classes_):
            found[label] = transducer.classes_.index(label)
        else:
            raise ValueError(
                f"plot(): cannot tell which of the output columns "
                f"{list(transducer.transform_.columns)} belongs to class {label!r}; name "
                "each column after its class (e.g. 'p_<class>')"
            )
    return found


def _plot_at_calibration_outputs(
    transducer: Transducer, ax: Axes, y: np.ndarray, shown: tuple[Label, ...], prob: float,
    prevalences: Any,
) -> None:  # fmt: skip
    rows = np.unique(y, axis=0)
    band = transducer.predict_interval(rows, prob=prob, prevalences=prevalences)
    for label, column in _class_columns(transducer, shown).items():
        j = transducer.classes_.index(label)
        x, mean = rows[:, column], band["mean"].values[:, j]
        (dots,) = ax.plot(x, mean, ".", markersize=3, label=f"p({label} | output)")
        ax.vlines(x, band["lower"].values[:, j], band["upper"].values[:, j],
                  color=dots.get_color(), alpha=0.15, linewidth=1)  # fmt: skip
    if transducer.transform_.is_simplex:
        ax.plot([0, 1], [0, 1], color="0.5", linestyle=":", label="output read as probability")
    ax.set_xlabel("output column of the class")
    ax.set_ylabel("probability")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"Transducer at the calibration outputs, {prob:.0%} bands")
    for text in ax.legend(loc="best").get_texts():
        text.set_parse_math(False)  # class labels verbatim


def _plot_span(kind: str, low: float, high: float) -> tuple[float, float]:
    """Where the 1-D plot's tails end: the whole [0, 1] for a logit column; else 15 %
    of the calibration range beyond each end (on the log scale for a log column)."""
    if kind == "logit":
        return 0.0, 1.0
    if kind == "log":
        if low <= 0:  # lattice outputs may include 0: nothing below it
            return 0.0, high * 1.15
        ratio = (high / low) ** 0.15 if high > low else 1.15
        return low / ratio, high * ratio
    span = (high - low) or 1.0
    return low - 0.15 * span, high + 0.15 * span
