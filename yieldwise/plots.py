"""Plots for decision-theoretic evaluation (matplotlib).

Every function takes ``ax=None`` (a new figure is made when it is ``None``)
and returns the matplotlib ``Axes`` it drew on. Names of classifiers, metrics
and classes may be any strings: they are shown verbatim (``$`` does not start
mathtext, a leading ``_`` does not hide a legend entry).

Functions
---------
utility_space
    Which of two classifiers yields more, over the whole chart of binary
    utility matrices (theory 1.1).
metric_vs_yield
    A metric against the true utility yield, with the pairs it ranks wrongly.
audit
    How often each metric ranks pairs wrongly (the output of
    :func:`yieldwise.audit.rank_disagreement`, theory 1.5).
roc
    ROC curves with the best operating points and iso-utility lines (theory 1.4).
roc_hull
    ROC curves with their convex hulls and each utility matrix's best hull point.
cost_curves
    Cost curves and Brier curves, with each utility matrix's operating condition.
reliability
    Reliability diagrams with Wilson intervals and a transducer's bands.
precision_recall
    Precision-recall and precision-recall-gain curves.
standard_vs_augmented
    The standard rule's long-run utility against the augmented rule's, per matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._validation import Label, align, check_positive_int
from .confusion import ConfusionMatrix
from .metrics import CONFUSION_METRICS, UndefinedMetricError, square_counts
from .roc import evaluate_thresholds, operating_point, prepare_binary, score_items
from .utility import UtilityMatrix, chart_matrices, in_chart_domain
from .yields import utility_yield

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "audit",
    "cost_curves",
    "metric_vs_yield",
    "precision_recall",
    "reliability",
    "roc",
    "roc_hull",
    "standard_vs_augmented",
    "utility_space",
]

# Yields in the chart are those of standard-form matrices, in [0, 1]; differences
# this small are rounding, not a preference.
_TIE_ATOL = 1e-12
# Relative tolerance for calling a difference of metric scores or yields zero.
_SIGN_RTOL = 1e-12

_COLOR_A = "#1f77b4"
_COLOR_B = "#ff7f0e"
_COLOR_TIE = "#2ca02c"
_COLOR_EXCLUDED = "#d9d9d9"
_COLOR_WRONG = "red"


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots()
    return new


def _cycle_colors() -> list[str]:
    import matplotlib as mpl

    return list(mpl.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"]))


def _cycle_color(k: int) -> str:
    colors = _cycle_colors()
    return colors[k % len(colors)]


def verbatim_legend(ax: Axes, handles: list[Any], labels: list[str], **kwargs: Any) -> Any:
    """A legend from explicit handles and labels, shown verbatim."""
    legend = ax.legend(handles, labels, **kwargs)
    for text in legend.get_texts():
        text.set_parse_math(False)
    return legend


# ------------------------------------------------------------------ utility space
def _binary_square(confusion: Any, name: str) -> ConfusionMatrix:
    square_counts(confusion, name)  # a ConfusionMatrix with one decision per class
    if confusion.shape != (2, 2):
        raise ValueError(
            f"{name} must be a binary (2x2) confusion matrix, found shape {confusion.shape}"
        )
    return confusion


def _chart_frequencies(confusion: ConfusionMatrix, classes: tuple[Label, ...]) -> np.ndarray:
    """Normalised counts with column k = class k and row k = "choose class k"."""
    rows = align(classes, confusion.decisions, "classes", "decisions")
    cols = align(classes, confusion.classes, "classes", "classes")
    return confusion.normalized[np.ix_(rows, cols)]


def utility_space(
    confusion_a: ConfusionMatrix,
    confusion_b: ConfusionMatrix,
    names: Sequence[str] = ("A", "B"),
    ax: Axes | None = None,
    resolution: int = 301,
) -> Axes:
    """Which of two classifiers yields more, over the chart of binary utility matrices.

    Each point ``(x, y)`` of the chart of theory 1.1 is the standard-form
    matrix ``U(x, y)``; it is coloured by the classifier with the higher
    utility yield under that matrix. Ties (yields within ``1e-12``) have
    their own colour; the two excluded corners, where a wrong decision would
    be worth more than the correct one, are grey. ``(0, 0)``, the identity
    (accuracy), is marked. The legend gives each colour's share of the
    admitted domain (uniform in ``(x, y)``).

    Parameters
    ----------
    confusion_a, confusion_b : ConfusionMatrix
        Binary, one decision per class (decisions and classes share labels),
        with the same class labels. Class 0 of the chart is
        ``confusion_a.classes[0]``, class 1 the other.
    names : pair of str
        Names of the two classifiers.
    ax : matplotlib Axes, optional
    resolution : int
        Grid points per axis (at least 2).

    Returns
    -------
    matplotlib.axes.Axes
        The image's array (``ax.images[0].get_array()``, row ``j`` at
        ``y = linspace(-1, 1, resolution)[j]``, column ``i`` at ``x``)
        holds 0 where the first classifier yields more, 1 where the second
        does, 2 for ties, and is masked outside the domain.

    Examples
    --------
    >>> from yieldwise import ConfusionMatrix
    >>> a = ConfusionMatrix([[40, 5], [10, 45]])
    >>> b = ConfusionMatrix([[48, 15], [2, 35]])
    >>> ax = utility_space(a, b, names=("cautious", "eager"), resolution=51)
    >>> sorted(set(ax.images[0].get_array().compressed().tolist()))
    [0.0, 1.0, 2.0]
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    a = _binary_square(confusion_a, "confusion_a")
    b = _binary_square(confusion_b, "confusion_b")
    if set(a.classes) != set(b.classes):
        raise ValueError(
            f"confusion_a and confusion_b must have the same classes, found {list(a.classes)} "
            f"and {list(b.classes)}"
        )
    names = tuple(names) if not isinstance(names, str) else (names,)
    if len(names) != 2:
        raise ValueError(f"names must hold two names, one per classifier, found {list(names)}")
    name_a, name_b = (str(n) for n in names)
    resolution = check_positive_int(resolution, "resolution")
    if resolution < 2:
        raise ValueError(f"resolution must be at least 2, found {resolution}")

    classes = a.classes
    freq_a = _chart_frequencies(a, classes)
    freq_b = _chart_frequencies(b, classes)
    grid = np.linspace(-1.0, 1.0, resolution)
    x, y = np.meshgrid(grid, grid)  # x varies along columns, y along rows
    matrices = chart_matrices(x, y)
    yield_a = np.einsum("...ij,ij->...", matrices, freq_a)
    yield_b = np.einsum("...ij,ij->...", matrices, freq_b)
    difference = yield_b - yield_a
    codes = np.where(np.abs(difference) <= _TIE_ATOL, 2.0, np.where(difference > 0, 1.0, 0.0))
    inside = np.asarray(in_chart_domain(x, y))
    image = np.ma.masked_array(codes, mask=~inside)

    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    cmap = ListedColormap([_COLOR_A, _COLOR_B, _COLOR_TIE]).with_extremes(bad=_COLOR_EXCLUDED)
    ax = _axes(ax)
    half = 1.0 / (resolution - 1)
    ax.imshow(
        image,
        origin="lower",
        extent=(-1 - half, 1 + half, -1 - half, 1 + half),
        cmap=cmap,
        vmin=-0.5,
        vmax=2.5,
        interpolation="nearest",
    )
    (identity,) = ax.plot(
        [0.0], [0.0], marker="o", color="black", markerfacecolor="white", linestyle="none"
    )

    n_inside = int(inside.sum())
    handles: list[Any] = []
    labels: list[str] = []
    for code, color, label in (
        (0.0, _COLOR_A, f"{name_a} yields more"),
        (1.0, _COLOR_B, f"{name_b} yields more"),
        (2.0, _COLOR_TIE, "tie"),
    ):
        share = float((codes[inside] == code).sum()) / n_inside
        if code == 2.0 and share == 0:
            continue
        handles.append(Patch(facecolor=color))
        shown = "<1%" if 0 < share < 0.005 else f"{share:.0%}"
        labels.append(f"{label} ({shown} of the domain)")
    handles.append(Patch(facecolor=_COLOR_EXCLUDED))
    labels.append("not admitted (a wrong decision worth more)")
    handles.append(identity)
    labels.append("(0, 0): identity matrix (accuracy)")
    verbatim_legend(
        ax, handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0
    )

    c0, c1 = classes
    ax.set_xlabel(
        f"x\n(x > 0: correct {c0!r} worth less; x < 0: correct {c1!r} worth less)",
        parse_math=False,
    )
    ax.set_ylabel(
        f"y\n(y > 0: {c0!r} when {c1!r} worth more;\ny < 0: {c1!r} when {c0!r} worth more)",
        parse_math=False,
    )
    ax.set_title(f"Higher utility yield: {name_a} or {name_b}", parse_math=False)
    ax.set_xlim(-1 - half, 1 + half)
    ax.set_ylim(-1 - half, 1 + half)
    ax.set_aspect("equal")
    return ax


# ---------------------------------------------------------------- metric vs yield
def _named_confusions(confusions: Any) -> list[tuple[str, ConfusionMatrix]]:
    if isinstance(confusions, ConfusionMatrix):
        raise TypeError(
            "confusions must be a mapping or sequence of ConfusionMatrix objects, found a "
            "single ConfusionMatrix"
        )
    if isinstance(confusions, Mapping):
        items = [(str(k), v) for k, v in confusions.items()]
    elif isinstance(confusions, Sequence) and not isinstance(confusions, str):
        items = [(str(k), v) for k, v in enumerate(confusions)]
    else:
        raise TypeError(
            "confusions must be a mapping of name to ConfusionMatrix or a sequence of them, "
            f"found {type(confusions).__name__}"
        )
    for name, value in items:
        if not isinstance(value, ConfusionMatrix):
            raise TypeError(
                f"confusions[{name!r}] must be a ConfusionMatrix, found {type(value).__name__}"
            )
    if len(items) < 2:
        raise ValueError(
            f"confusions must hold at least 2 classifiers to compare, found {len(items)}"
        )
    return items


def _resolve_metric(metric: Any) -> tuple[Callable[..., Any], str]:
    if isinstance(metric, str):
        if metric not in CONFUSION_METRICS:
            raise ValueError(
                f"metric {metric!r} is not a confusion-matrix metric; choose one of "
                f"{sorted(CONFUSION_METRICS)} or pass a function of a ConfusionMatrix"
            )
        return CONFUSION_METRICS[metric], metric
    if not callable(metric):
        raise TypeError(
            "metric must be a function of a ConfusionMatrix or the name of one, found "
            f"{type(metric).__name__}"
        )
    info = getattr(metric, "info", None)
    if info is not None and getattr(info, "input", "confusion") != "confusion":
        raise ValueError(
            f"metric {info.name!r} is computed from scores, not from a confusion matrix; "
            "metric_vs_yield needs a confusion-matrix metric"
        )
    name = info.name if info is not None else getattr(metric, "__name__", repr(metric))
    return metric, str(name)


def _signs(values: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Signs of ``values[j] - values[i]``, zero within rounding of the values' size."""
    difference = values[j] - values[i]
    tolerance = _SIGN_RTOL * float(np.abs(values).max())
    return np.where(np.abs(difference) <= tolerance, 0, np.sign(difference))


def metric_vs_yield(
    confusions: Mapping[Any, ConfusionMatrix] | Sequence[ConfusionMatrix],
    utility: UtilityMatrix,
    metric: Callable[..., Any] | str,
    ax: Axes | None = None,
    **metric_kwargs: Any,
) -> Axes:
    """Scatter of a metric against the true utility yield, wrongly ranked pairs in red.

    A pair of classifiers is ranked wrongly when the signs of their metric
    difference and of their yield difference disagree (theory 1.5; a tie on
    one side only counts as a disagreement, and differences within ``1e-12``
    times the largest magnitude count as ties). Each such pair is joined by a
    red line; the title says how many of all pairs they are.

    Parameters
    ----------
    confusions : mapping of name to ConfusionMatrix, or sequence of them
        The classifiers (at least two); a sequence is named ``"0"``, ``"1"``, ...
    utility : UtilityMatrix
        The true utilities.
    metric : callable or str
        A function ``metric(confusion, **metric_kwargs)`` with higher = better
        (e.g. :func:`yieldwise.metrics.f1`), or a name in
        :data:`yieldwise.metrics.CONFUSION_METRICS`.
    ax : matplotlib Axes, optional
    **metric_kwargs
        Passed to ``metric`` (e.g. ``positive=``).

    Returns
    -------
    matplotlib.axes.Axes
        The red lines are one ``LineCollection`` with gid ``"wrong_pairs"``.

    Examples
    --------
    >>> from yieldwise import ConfusionMatrix, UtilityMatrix
    >>> u = UtilityMatrix([[1, 0], [-5, 0]])  # missing a class-0 item costs 5
    >>> cms = {"A": ConfusionMatrix([[45, 20], [5, 30]]),
    ...        "B": ConfusionMatrix([[35, 2], [15, 48]])}
    >>> ax = metric_vs_yield(cms, u, "accuracy")
    >>> ax.get_title()
    'accuracy: 1 of 1 pairs ranked wrongly'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    items = _named_confusions(confusions)
    function, metric_name = _resolve_metric(metric)
    yields = np.array([utility_yield(cm, utility) for _, cm in items])
    scores = np.empty(len(items))
    for k, (name, cm) in enumerate(items):
        try:
            scores[k] = float(function(cm, **metric_kwargs))
        except UndefinedMetricError as exc:
            raise UndefinedMetricError(
                f"{metric_name} is undefined for classifier {name!r}: {exc}"
            ) from exc
    if not np.isfinite(scores).all():
        bad = [items[k][0] for k in np.flatnonzero(~np.isfinite(scores))]
        raise ValueError(f"{metric_name} is not finite for classifier(s) {bad}")

    i, j = np.triu_indices(len(items), k=1)
    wrong = _signs(scores, i, j) != _signs(yields, i, j)
    n_wrong, n_pairs = int(wrong.sum()), int(i.size)

    from matplotlib.collections import LineCollection

    ax = _axes(ax)
    segments = [
        [(yields[a], scores[a]), (yields[b], scores[b])]
        for a, b in zip(i[wrong], j[wrong], strict=True)
    ]
    lines = LineCollection(
        segments, colors=_COLOR_WRONG, linewidths=1.5, alpha=0.7, zorder=2, gid="wrong_pairs"
    )
    ax.add_collection(lines)
    points = ax.scatter(yields, scores, color="black", zorder=3)
    for (name, _), x, y in zip(items, yields, scores, strict=True):
        ax.annotate(name, (x, y), xytext=(4, 4), textcoords="offset points", parse_math=False)
    ax.autoscale_view()
    handles: list[Any] = [points]
    labels = ["classifier"]
    if n_wrong:
        handles.append(lines)
        labels.append("pair ranked wrongly")
    verbatim_legend(ax, handles, labels, loc="best")
    ax.set_xlabel("utility yield (true)")
    ax.set_ylabel(metric_name, parse_math=False)
    ax.set_title(f"{metric_name}: {n_wrong} of {n_pairs} pairs ranked wrongly", parse_math=False)
    return ax


# -------------------------------------------------------------------------- audit
def audit(frame: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Fraction of wrongly ranked pairs against the error in the utilities (theory 1.5).

    Parameters
    ----------
    frame : pandas.DataFrame
        Columns ``metric``, ``error_sd``, ``fraction_wrong``, ``mc_se``, as
        returned by :func:`yieldwise.audit.rank_disagreement`. A metric whose
        ``error_sd`` is NaN (one row) is drawn as a horizontal line with a
        ±2 ``mc_se`` band; a metric with one row per ``error_sd`` (the
        ``"utility_yield"`` of an erroneous matrix) as a line with ±2
        ``mc_se`` error bars.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> frame = pd.DataFrame({
    ...     "metric": ["f1", "utility_yield", "utility_yield"],
    ...     "error_sd": [np.nan, 0.0, 0.1],
    ...     "fraction_wrong": [0.2, 0.0, 0.05],
    ...     "mc_se": [0.01, 0.0, 0.005]})
    >>> ax = audit(frame)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['utility_yield', 'f1']
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, found {type(frame).__name__}")
    if "metric" not in frame.columns and frame.index.name == "metric":
        frame = frame.reset_index()
    required = ["metric", "error_sd", "fraction_wrong", "mc_se"]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(
            f"frame must have columns {required} (as from audit.rank_disagreement), "
            f"missing {missing}; found {list(frame.columns)}"
        )
    if frame.empty:
        raise ValueError("frame is empty")
    for column in ("fraction_wrong", "mc_se"):
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
        if not np.isfinite(values).all() or (values < 0).any():
            raise ValueError(f"frame[{column!r}] must be finite and non-negative")

    swept: list[tuple[str, pd.DataFrame]] = []
    constant: list[tuple[str, pd.Series]] = []
    for name, group in frame.groupby("metric", sort=False):
        sd = pd.to_numeric(group["error_sd"], errors="coerce").to_numpy(float)
        if np.isnan(sd).all():
            if len(group) != 1:
                raise ValueError(
                    f"metric {name!r} has {len(group)} rows with error_sd NaN; expected one"
                )
            constant.append((str(name), group.iloc[0]))
        elif np.isfinite(sd).all():
            swept.append((str(name), group.sort_values("error_sd")))
        else:
            raise ValueError(
                f"metric {name!r} mixes NaN and numeric error_sd; expected either one row "
                "with NaN or one row per error sd"
            )

    ax = _axes(ax)
    handles: list[Any] = []
    labels: list[str] = []
    k = 0
    for name, group in swept:
        color = _cycle_color(k)
        k += 1
        container = ax.errorbar(
            group["error_sd"].to_numpy(float),
            group["fraction_wrong"].to_numpy(float),
            yerr=2 * group["mc_se"].to_numpy(float),
            color=color,
            marker="o",
            capsize=3,
            zorder=3,
        )
        handles.append(container)
        labels.append(name)
    for name, row in constant:
        color = _cycle_color(k)
        k += 1
        value, se = float(row["fraction_wrong"]), float(row["mc_se"])
        # once the colours run out, change the dash pattern so lines stay distinct
        style = ("--", "-.", ":")[(k - 1) // len(_cycle_colors()) % 3]
        line = ax.axhline(value, color=color, linestyle=style, linewidth=1.5)
        ax.axhspan(value - 2 * se, value + 2 * se, color=color, alpha=0.15, linewidth=0)
        handles.append(line)
        labels.append(name)
    verbatim_legend(
        ax, handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0
    )
    ax.set_xlabel("standard deviation σ of the error in each utility entry")
    ax.set_ylabel("fraction of pairs ranked wrongly")
    ax.set_title("Pairs of classifiers ranked wrongly (±2 Monte Carlo s.e.)")
    ax.set_ylim(bottom=0)
    return ax


# ---------------------------------------------------------------------------- roc
def roc(
    scores: Mapping[Any, Any],
    true_classes: Any,
    utility: UtilityMatrix,
    positive: Label | None = None,
    ax: Axes | None = None,
    classes: Any = None,
) -> Axes:
    """ROC curves with each classifier's best operating point and iso-utility line.

    The best point of each curve (:func:`yieldwise.roc.best_operating_point`)
    is marked, and the iso-utility line of slope
    ``(U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B)`` (theory 1.4) is
    drawn through it, dashed: the curve touching the highest line yields most.
    The legend gives each classifier's best yield and its AUC.

    Parameters
    ----------
    scores : mapping of name to 1-D array-like, or DataFrame
        Scores of each classifier on the same items (higher: more positive).
    true_classes, utility, positive, classes
        As in :func:`yieldwise.roc.best_operating_point`.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        Best points have gid ``"best_point"``, iso-utility lines
        ``"iso_utility"``.

    Examples
    --------
    >>> from yieldwise import UtilityMatrix
    >>> u = UtilityMatrix([[1, 0], [0, 1]])
    >>> ax = roc({"m": [0.9, 0.8, 0.3, 0.1]}, [0, 1, 0, 1], u, positive=0)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['m: best yield 0.75, AUC 0.750']
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    items = score_items(scores)
    binary = prepare_binary(true_classes, utility, positive, classes, None)
    ax = _axes(ax)
    handles: list[Any] = []
    labels: list[str] = []
    slope = float("nan")
    for k, (name, values) in enumerate(items):
        curve = evaluate_thresholds(values, binary, f"scores[{name!r}]")
        point = operating_point(curve, binary)
        tpr, fpr = curve.tp / curve.n_pos, curve.fp / curve.n_neg
        auc = float(np.trapezoid(tpr, fpr))
        color = _cycle_color(k)
        (line,) = ax.plot(fpr, tpr, color=color, linewidth=1.8, zorder=2)
        ax.plot(
            [point.fpr],
            [point.tpr],
            marker="o",
            markersize=8,
            color=color,
            markeredgecolor="black",
            linestyle="none",
            zorder=4,
            gid="best_point",
        )
        slope = point.slope
        if np.isfinite(slope):
            ax.axline(
                (point.fpr, point.tpr),
                slope=slope,
                color=color,
                linestyle="--",
                linewidth=1,
                zorder=1,
                gid="iso_utility",
            )
        elif not np.isnan(slope):  # infinite: a vertical line
            ax.axline(
                (point.fpr, point.tpr),
                (point.fpr, point.tpr + 1.0),
                color=color,
                linestyle="--",
                linewidth=1,
                zorder=1,
                gid="iso_utility",
            )
        handles.append(line)
        labels.append(f"{name}: best yield {point.utility_yield:.4g}, AUC {auc:.3f}")
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, zorder=0)
    verbatim_legend(ax, handles, labels, loc="lower right")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal")
    ax.set_xlabel(f"false-positive rate (negative = {binary.negative!r})", parse_math=False)
    ax.set_ylabel(f"true-positive rate (positive = {binary.positive!r})", parse_math=False)
    ax.set_title(
        f"ROC curves, best points; dashed: iso-utility slope {slope:.3g}",
        parse_math=False,
    )
    return ax


# ----------------------------------------------------------------------- roc hull
_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*")


def _utilities(utilities: Any) -> list[tuple[str, UtilityMatrix]]:
    if utilities is None:
        return []
    if isinstance(utilities, UtilityMatrix):
        return [("utility", utilities)]
    if isinstance(utilities, Mapping):
        items = [(str(k), v) for k, v in utilities.items()]
        for name, u in items:
            if not isinstance(u, UtilityMatrix):
                raise TypeError(
                    f"utilities[{name!r}] must be a UtilityMatrix, found {type(u).__name__}"
                )
        return items
    raise TypeError(
        "utilities must be a UtilityMatrix or a mapping of name to UtilityMatrix, found "
        f"{type(utilities).__name__}"
    )


def _hulls(scores: Any, true_classes: Any, positive: Label | None, classes: Any) -> list:
    from .roc import ROCHull, convex_hull

    if isinstance(scores, ROCHull):
        return [("classifier", scores)]
    items = score_items(scores)
    out = []
    for name, values in items:
        if isinstance(values, ROCHull):
            out.append((str(name), values))
        else:
            if true_classes is None:
                raise ValueError(
                    f"scores[{name!r}] are scores, so true_classes is needed to build the hull"
                )
            out.append((str(name), convex_hull(values, true_classes, positive, classes)))
    return out


def roc_hull(
    scores: Any,
    true_classes: Any = None,
    utilities: Any = None,
    positive: Label | None = None,
    ax: Axes | None = None,
    classes: Any = None,
) -> Axes:
    """Empirical ROC curves, their convex hulls and each utility matrix's best point.

    For every classifier: its empirical curve (thin), its hull (thick, the vertices
    marked) and the area under the hull (AUCH) in the legend. For every utility
    matrix: the best point of each hull (:meth:`yieldwise.roc.ROCHull.best_point`,
    one marker shape per matrix) and, dashed, the iso-utility line through it
    (theory 1.4): every point of that line yields the same, and nothing on the hull
    lies above it.

    Parameters
    ----------
    scores : mapping of name to 1-D array-like or ROCHull, or one ROCHull
        Each classifier's scores on the same items (hulls are built with
        :func:`yieldwise.roc.convex_hull`), or hulls built already.
    true_classes : label sequence, optional
        Needed when scores are given.
    utilities : UtilityMatrix or mapping of name to UtilityMatrix, optional
    positive, classes
        As in :func:`yieldwise.roc.convex_hull`.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        Hulls have gid ``"hull"``, best points ``"best_point"``, iso-utility lines
        ``"iso_utility"``.

    Examples
    --------
    >>> from yieldwise import UtilityMatrix
    >>> u = {"accuracy": UtilityMatrix([[1, 0], [0, 1]])}
    >>> ax = roc_hull({"m": [0.9, 0.8, 0.3, 0.1]}, [0, 1, 0, 1], u, positive=0)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['m: AUCH 0.875', 'accuracy: best points']
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    hulls = _hulls(scores, true_classes, positive, classes)
    matrices = _utilities(utilities)
    ax = _axes(ax)
    handles: list[Any] = []
    labels: list[str] = []
    for k, (name, hull) in enumerate(hulls):
        color = _cycle_color(k)
        ax.plot(hull.roc.fpr, hull.roc.tpr, color=color, linewidth=0.8, alpha=0.6, zorder=2)
        (line,) = ax.plot(
            hull.vertices["fpr"],
            hull.vertices["tpr"],
            color=color,
            linewidth=2,
            marker=".",
            zorder=3,
            gid="hull",
        )
        handles.append(line)
        labels.append(f"{name}: AUCH {hull.auc:.3f}")
        for m, (_, u) in enumerate(matrices):
            point = hull.best_point(u)
            ax.plot(
                [point.fpr],
                [point.tpr],
                marker=_MARKERS[m % len(_MARKERS)],
                markersize=9,
                color=color,
                markeredgecolor="black",
                linestyle="none",
                zorder=4,
                gid="best_point",
            )
            second = (
                (point.fpr + 1.0, point.tpr + point.slope)
                if np.isfinite(point.slope)
                else (point.fpr, point.tpr + 1.0)
            )
            if not np.isnan(point.slope):
                ax.axline(
                    (point.fpr, point.tpr),
                    second,
                    color=color,
                    linestyle="--",
                    linewidth=0.9,
                    zorder=1,
                    gid="iso_utility",
                )
    for m, (name, _) in enumerate(matrices):
        (marker,) = ax.plot(
            [], [], marker=_MARKERS[m % len(_MARKERS)], color="grey",
            markeredgecolor="black", linestyle="none",
        )  # fmt: skip
        handles.append(marker)
        labels.append(f"{name}: best points")
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, zorder=0)
    verbatim_legend(ax, handles, labels, loc="lower right")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal")
    first = hulls[0][1]
    ax.set_xlabel(f"false-positive rate (negative = {first.negative!r})", parse_math=False)
    ax.set_ylabel(f"true-positive rate (positive = {first.positive!r})", parse_math=False)
    ax.set_title("ROC curves and convex hulls; dashed: iso-utility lines")
    return ax


# -------------------------------------------------------------- cost and Brier curves
#: Draw every ROC point's line of a cost curve up to this many points (beyond: clutter).
_MAX_COST_LINES = 300


def cost_curves(curves: Any, utilities: Any = None, ax: Axes | None = None) -> Axes:
    """Cost curves and Brier curves on one axis, with each utility matrix's condition.

    Each :class:`~yieldwise.curves.CostCurve` is drawn as its lower envelope (thick)
    over the lines of its ROC points (thin, when there are at most 300); each
    :class:`~yieldwise.curves.BrierCurve` as itself. For each utility matrix, a
    dotted vertical line marks its operating condition
    (:func:`yieldwise.curves.operating_condition` at the first curve's class
    balance): the height of a curve there, times the problem's scale, is that
    classifier's regret under the matrix -- the one number the problem needs.

    Parameters
    ----------
    curves : CostCurve, BrierCurve, or mapping of name to them
        All on the same axis: Brier curves and ``axis="cost_proportion"`` cost
        curves together, or ``axis="probability_cost"`` cost curves.
    utilities : UtilityMatrix or mapping of name to UtilityMatrix, optional
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        Envelopes and Brier curves have gid ``"curve"``, the conditions
        ``"condition"``.

    Examples
    --------
    >>> from yieldwise.curves import brier_curve, cost_curve
    >>> truth = [1, 1, 0, 1, 0, 0]
    >>> curves = {"hull": cost_curve([6, 5, 4, 3, 2, 1], truth, positive=1,
    ...                              axis="cost_proportion"),
    ...           "probabilities": brier_curve([.9, .8, .7, .5, .3, .2], truth, positive=1)}
    >>> ax = cost_curves(curves)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['hull: area 0.0833', 'probabilities: area 0.1533']
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    from .curves import BrierCurve, check_curves, operating_condition

    items = check_curves(curves)
    axes_of = {"brier" if isinstance(c, BrierCurve) else c.axis for _, c in items}
    if "probability_cost" in axes_of and len(axes_of) > 1:
        raise ValueError(
            "curves mixes probability-cost cost curves with Brier or cost-proportion curves; "
            "draw cost curves with axis='cost_proportion' beside Brier curves"
        )
    x_name = "probability_cost" if "probability_cost" in axes_of else "cost_proportion"
    matrices = _utilities(utilities)
    ax = _axes(ax)
    handles: list[Any] = []
    labels: list[str] = []
    for k, (name, curve) in enumerate(items):
        color = _cycle_color(k)
        if isinstance(curve, BrierCurve):
            x, y = curve.frame["cost_proportion"], curve.frame["loss"]
        else:
            lines = curve.lines
            if len(lines) <= _MAX_COST_LINES:
                for a, b in zip(lines["at_0"], lines["at_1"], strict=True):
                    ax.plot([0, 1], [a, b], color=color, linewidth=0.4, alpha=0.35, zorder=1)
            x, y = curve.frame["x"], curve.frame["cost"]
        (line,) = ax.plot(x, y, color=color, linewidth=2, zorder=3, gid="curve")
        handles.append(line)
        labels.append(f"{name}: area {curve.area:.4f}")
    first = items[0][1]
    if isinstance(first, BrierCurve):
        prevalence, positive = first.prevalence, first.positive
    else:
        prevalence, positive = first.hull.prevalence, first.hull.positive
    for m, (name, u) in enumerate(matrices):
        condition = operating_condition(u, prevalence, positive)
        x0 = getattr(condition, x_name)
        line = ax.axvline(
            x0, color="black", linestyle=(0, (1, 1 + m)), linewidth=1, zorder=2, gid="condition"
        )
        handles.append(line)
        labels.append(f"{name}: x = {x0:.3g}")
    verbatim_legend(ax, handles, labels, loc="upper right")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    if x_name == "probability_cost":
        ax.set_xlabel("probability cost PC(+) = B C_FN / (B C_FN + (1 - B) C_FP)")
        ax.set_ylabel("normalised expected cost")
        ax.set_title("Cost curves (lower envelopes of the ROC points' lines)")
    else:
        ax.set_xlabel("cost proportion c = C_FP / (C_FP + C_FN)")
        ax.set_ylabel("loss 2 [c (1 - B) FPR + (1 - c) B FNR]")
        ax.set_title("Cost and Brier curves (area of a Brier curve = Brier score)")
    return ax


# ----------------------------------------------------------------- reliability
def reliability(
    probabilities: Any,
    true_classes: Any,
    positive: Label | None = None,
    classes: Any = None,
    bins: Any = 10,
    level: float = 0.95,
    draws: Any = None,
    band: float = 0.9,
    ax: Axes | None = None,
) -> Axes:
    """Reliability diagram: binned probabilities against observed frequencies.

    Each method's bins (:func:`yieldwise.metrics.reliability_table`) are drawn at
    (mean probability, frequency) with Wilson ``level`` intervals; a method with
    ``draws`` (a transducer's per-draw probabilities on the same items) also gets
    its posterior band, shaded: where the bins' frequencies should lie if the
    transducer is right. The diagonal is perfect calibration. The legend gives
    each method's Brier score and its calibration loss
    (:func:`yieldwise.metrics.brier_decomposition`).

    Parameters
    ----------
    probabilities : 1-D array-like, or mapping of name to 1-D array-like
        Probabilities of ``positive`` per item.
    true_classes, positive, classes, bins, level, band
        As in :func:`yieldwise.metrics.reliability_table`.
    draws : array, DataArray, or mapping of name to them, optional
        Per-draw probabilities for the methods that have them (a single one applies
        to a single method).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        Bands have gid ``"band"``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = rng.random(500)
    >>> y = (rng.random(500) < p).astype(int)   # calibrated by construction
    >>> ax = reliability({"calibrated": p, "squashed": p ** 3}, y, positive=1, bins=5)
    >>> [t.get_text()[:10] for t in ax.get_legend().get_texts()]
    ['calibrated', 'squashed: ']
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    from .metrics import brier_decomposition, reliability_table

    if isinstance(probabilities, Mapping):
        items = [(str(k), v) for k, v in probabilities.items()]
        if not items:
            raise ValueError("probabilities is empty; pass at least one method")
    else:
        items = [("probabilities", probabilities)]
    if draws is None:
        draw_map: dict[str, Any] = {}
    elif isinstance(draws, Mapping):
        draw_map = {str(k): v for k, v in draws.items()}
        unknown = sorted(set(draw_map) - {name for name, _ in items})
        if unknown:
            raise ValueError(f"draws names {unknown} that are not among the probabilities")
    elif len(items) == 1:
        draw_map = {items[0][0]: draws}
    else:
        raise ValueError(
            "draws must be a mapping of method name to draws when there are several methods"
        )
    ax = _axes(ax)
    handles: list[Any] = []
    labels: list[str] = []
    for k, (name, p) in enumerate(items):
        color = _cycle_color(k)
        table = reliability_table(
            p, true_classes, positive, classes, bins, level, draw_map.get(name), band
        )
        x = table["mean_probability"].to_numpy()
        y = table["frequency"].to_numpy()
        yerr = np.vstack([y - table["wilson_lower"], table["wilson_upper"] - y]).clip(0, None)
        container = ax.errorbar(
            x, y, yerr=yerr, color=color, marker="o", capsize=3, linestyle="-", zorder=3
        )
        if name in draw_map:
            ax.fill_between(
                x, table["band_lower"], table["band_upper"], color=color, alpha=0.25,
                linewidth=0, zorder=2, gid="band",
            )  # fmt: skip
        d = brier_decomposition(p, true_classes, positive, classes)
        handles.append(container)
        labels.append(f"{name}: Brier {d.brier:.4f}, calibration loss {d.calibration_loss:.4f}")
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, zorder=1)
    verbatim_legend(ax, handles, labels, loc="upper left")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_aspect("equal")
    ax.set_xlabel("mean predicted probability in the bin")
    ax.set_ylabel("observed frequency")
    shaded = f"; shaded: transducer's {band:.0%} band" if draw_map else ""
    ax.set_title(f"Reliability (Wilson {level:.0%} intervals{shaded})")
    return ax


# ------------------------------------------------------------ precision-recall
def precision_recall(
    scores: Any,
    true_classes: Any,
    positive: Label | None = None,
    classes: Any = None,
    gain: bool = False,
    ax: Axes | None = None,
) -> Axes:
    """Precision-recall curves, or precision-recall-gain curves (``gain=True``).

    PR curves are drawn as steps with the always-positive baseline (precision =
    the share of positives) and each classifier's average precision in the legend;
    PR-gain curves (Flach and Kull, 2015) as straight segments over recall gains in
    [0, 1] with the AUPRG. Neither area is admissible (theory 1.2): both average
    over operating points, and precision ignores the true negatives.

    Parameters
    ----------
    scores : mapping of name to 1-D array-like, or DataFrame
    true_classes, positive, classes
        As in :func:`yieldwise.metrics.pr_curve`.
    gain : bool, default False
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
        Curves have gid ``"curve"``.

    Examples
    --------
    >>> ax = precision_recall({"m": [0.9, 0.8, 0.7, 0.6]}, [1, 0, 1, 0], positive=1, gain=True)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['m: AUPRG 0.250']
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    from .metrics import average_precision, pr_curve, pr_gain_curve

    items = score_items(scores)
    ax = _axes(ax)
    handles: list[Any] = []
    labels: list[str] = []
    prevalence = float("nan")
    for k, (name, values) in enumerate(items):
        color = _cycle_color(k)
        if gain:
            curve = pr_gain_curve(values, true_classes, positive, classes)
            frame = curve.frame
            (line,) = ax.plot(
                frame["recall_gain"], frame["precision_gain"], color=color, marker=".",
                linewidth=1.8, gid="curve",
            )  # fmt: skip
            labels.append(f"{name}: AUPRG {curve.area:.3f}")
        else:
            pr = pr_curve(values, true_classes, positive, classes)
            prevalence = pr.prevalence
            (line,) = ax.step(
                np.r_[0.0, pr.recall], np.r_[pr.precision[0], pr.precision], where="post",
                color=color, linewidth=1.8, gid="curve",
            )  # fmt: skip
            ap = average_precision(values, true_classes, positive, classes)
            labels.append(f"{name}: average precision {ap:.3f}")
        handles.append(line)
    if gain:
        ax.set_xlim(0, 1.02)
        ax.set_ylim(-0.05, 1.02)
        ax.set_xlabel("recall gain")
        ax.set_ylabel("precision gain")
        ax.set_title("Precision-recall-gain curves")
    else:
        ax.axhline(prevalence, color="grey", linestyle=":", linewidth=1)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("recall")
        ax.set_ylabel("precision")
        ax.set_title("Precision-recall curves (dotted: always positive)")
    verbatim_legend(ax, handles, labels, loc="lower left")
    return ax


# ------------------------------------------------------- standard vs augmented
def standard_vs_augmented(frame: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Scatter of the standard rule's long-run utility against the augmented rule's.

    One point per utility matrix (the output of
    :func:`yieldwise.rules.standard_vs_augmented`); points above the diagonal are
    matrices where deciding by expected utility with the transducer's probabilities
    yields more than the classifier's own choice. The title gives the share of
    matrices where it yields at least as much (within the integration error).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"standard": [0.5, 0.7], "augmented": [0.8, 0.7],
    ...                       "gain": [0.3, 0.0], "integration_error": [0.0, 0.0]})
    >>> frame.attrs = {"rescaled": True}
    >>> ax = standard_vs_augmented(frame)
    >>> ax.get_title()
    'Augmented at least as good for 100% of 2 matrices (mean gain 0.15)'
    >>> import matplotlib.pyplot as plt; plt.close(ax.figure)
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, found {type(frame).__name__}")
    missing = [c for c in ("standard", "augmented", "gain") if c not in frame.columns]
    if missing:
        raise ValueError(
            f"frame must have the columns of rules.standard_vs_augmented, missing {missing}"
        )
    ax = _axes(ax)
    x = frame["standard"].to_numpy(float)
    y = frame["augmented"].to_numpy(float)
    if "not_worse" in frame:
        not_worse = frame["not_worse"].to_numpy(bool)
    else:
        error = frame["integration_error"].to_numpy(float) if "integration_error" in frame else 0
        not_worse = frame["gain"].to_numpy(float) >= -error
    ax.scatter(x[not_worse], y[not_worse], s=6, alpha=0.4, color=_COLOR_A, linewidths=0,
               label="augmented at least as good")  # fmt: skip
    if (~not_worse).any():
        ax.scatter(x[~not_worse], y[~not_worse], s=8, color=_COLOR_WRONG, linewidths=0,
                   label="standard better")  # fmt: skip
    low = float(min(x.min(), y.min()))
    high = float(max(x.max(), y.max()))
    ax.plot([low, high], [low, high], color="grey", linestyle=":", linewidth=1)
    rescaled = frame.attrs.get("rescaled", False)
    unit = "rescaled long-run utility" if rescaled else "long-run utility per item"
    ax.set_xlabel(f"standard rule: {unit}")
    ax.set_ylabel(f"augmented rule: {unit}")
    ax.set_title(
        f"Augmented at least as good for {not_worse.mean():.0%} of {len(frame)} matrices "
        f"(mean gain {frame['gain'].mean():.3g})"
    )
    ax.set_aspect("equal")
    ax.legend(loc="lower right")
    return ax
