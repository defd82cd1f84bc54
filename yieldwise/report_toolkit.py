"""The evaluation toolkit's per-classifier sections, ready for the batch report.

The report (``yieldwise report``) shows, per classifier, the transducer and the
posterior of its long-run utility. This module adds what the evaluation literature
would look at (``docs/toolkit.md``), each beside the utility yield:

* :func:`classifier_toolkit` -- the ROC curve with its convex hull and each utility
  matrix's best point (binary problems), the Brier score's decompositions of the
  transducer's probabilities (and of the raw output, when it is a probability), and
  the reliability diagram with Wilson intervals and the transducer's bands;
* :func:`rules_section` -- the standard rule against the augmented rule over many
  utility matrices, with its scatter plot.

Each returns a small object holding the tables (pandas) and figures (matplotlib
``Figure`` objects made outside pyplot, so no GUI backend is touched), with a
``to_html()`` that renders a self-contained fragment (figures as PNG data URIs,
every user-supplied name escaped). The toolkit's numbers are in-sample: the
calibration items serve both to fit the transducer and to draw these diagnostics.
The rules comparison is not a count on items: it integrates the transducer's
posterior (long-run utilities, theory 4).
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._validation import label_values
from .utility import UtilityMatrix

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .transducer import Transducer

__all__ = ["ClassifierToolkit", "RulesSection", "classifier_toolkit", "rules_section"]

#: Resolution of the embedded figures (the report's own).
_DPI = 90


def _figure(**kwargs: Any) -> Figure:
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _table_html(frame: pd.DataFrame) -> str:
    table = frame.to_html(escape=True, float_format=lambda v: f"{v:.4g}", na_rep="—")
    return f"<div class='wide'>{table}</div>"  # the report scrolls it sideways if too wide


@dataclass(eq=False)
class ClassifierToolkit:
    """One classifier's toolkit section (see :func:`classifier_toolkit`).

    Attributes
    ----------
    name : str
    score_note : str
        What served as the score for the ROC curve.
    hull : yieldwise.roc.ROCHull or None
        ``None`` for more than two classes.
    best_points : pandas.DataFrame or None
        Per utility matrix, the best hull vertex: ``threshold``, ``fpr``, ``tpr``,
        ``utility_yield``, ``slope``.
    brier : pandas.DataFrame
        One row per set of probabilities (the transducer's; the raw output's when it
        is a probability): the Brier score and its terms.
    roc_figure, reliability_figure : matplotlib Figure or None
    notes : list of str
    brier_notes : list of str
        Shown under the Brier table: why the classifier's own output is not in it when
        it is not one probability per item (scores outside [0, 1], several outputs).
    """

    name: str
    score_note: str
    hull: Any
    best_points: pd.DataFrame | None
    brier: pd.DataFrame
    roc_figure: Any
    reliability_figure: Any
    notes: list[str] = field(default_factory=list)
    brier_notes: list[str] = field(default_factory=list)

    def to_html(self, level: int = 3) -> str:
        """An HTML fragment: headings (``<h{level}>``), tables and embedded figures;
        names escaped."""
        e = html.escape
        parts = [f"<h{level}>{e(self.name)}</h{level}>"]
        if self.roc_figure is not None:
            parts.append(
                "<p>The ROC curve (thin), its convex hull (thick) and, for each utility "
                "matrix, the hull's best point with its iso-utility line (theory 1.4); "
                f"{e(self.score_note)}</p>"
            )
            parts.append(f"<img alt='ROC hull of {e(self.name)}' src='{_png(self.roc_figure)}'>")
            if self.best_points is not None and len(self.best_points):
                parts.append(_table_html(self.best_points))
        parts.append(
            "<p>The Brier score of the probabilities on the calibration items, split into "
            "reliability &minus; resolution + uncertainty (Murphy, 10 bins, with the "
            "within-bin terms that make it exact), and into calibration + refinement loss "
            "(refinement: the Brier score after isotonic recalibration).</p>"
        )
        parts.append(_table_html(self.brier))
        parts.extend(f"<p>{e(note)}</p>" for note in self.brier_notes)
        if self.reliability_figure is not None:
            parts.append(
                "<p>Reliability: binned probabilities against the observed frequencies, "
                "with Wilson 95 % intervals; shaded, the transducer's band over its "
                "posterior draws.</p>"
            )
            parts.append(
                f"<img alt='reliability of {e(self.name)}' src='{_png(self.reliability_figure)}'>"
            )
        parts.extend(f"<p>{e(note)}</p>" for note in self.notes)
        return "".join(parts)


def _positive(transducer: Transducer, positive: Any) -> Any:
    classes = list(transducer.classes_)
    if positive is None:
        return classes[-1]  # the class a scalar output points to (the report's convention)
    if positive not in classes:
        raise ValueError(f"positive {positive!r} is not among the classes {classes}")
    return positive


def classifier_toolkit(
    name: str,
    outputs: Any,
    true_classes: Any,
    transducer: Transducer,
    utilities: dict[Any, UtilityMatrix],
    *,
    positive: Any = None,
    bins: int = 10,
    band: float = 0.75,
) -> ClassifierToolkit:
    """The toolkit's view of one classifier on its calibration items.

    Parameters
    ----------
    name : str
        The classifier's name (shown escaped).
    outputs : DataFrame or array (items, columns)
        Its outputs on the calibration items, as given to the transducer.
    true_classes : label sequence
    transducer : fitted Transducer
        The classifier's transducer (fitted on these items).
    utilities : mapping of name to UtilityMatrix
        The report's matrices; those with two decisions get their best point on the
        hull, the others a note (a ROC point chooses between two decisions).
    positive : label, optional
        Binary problems: the class treated as positive; default the transducer's
        last class (the one a scalar output points to).
    bins : int, default 10
        Equal-width bins of the Brier decomposition and the reliability diagram.
    band : float, default 0.75
        Mass of the transducer's band in the reliability diagram (the report's
        bands are 75 %).

    Returns
    -------
    ClassifierToolkit

    Notes
    -----
    The ROC score is the output itself when the classifier has one output column,
    else the transducer's probability of ``positive`` (any increasing function of a
    score gives the same curve). More than two classes: the Brier decomposition is
    summed over the classes one against the rest, and the ROC hull and reliability
    diagram, which are binary, are left out with a note. A binary classifier's own
    output is decomposed (and drawn in the reliability diagram) only when it is one
    column in [0, 1]; otherwise ``brier_notes`` says why it is not (a raw score such as
    a logit must be calibrated first; :func:`yieldwise.metrics.brier_decomposition`
    raises ``ValueError`` on it).
    """
    from .metrics import brier_decomposition
    from .plots import reliability, roc_hull
    from .roc import convex_hull

    truth = label_values(true_classes, "true_classes")
    frame = outputs if isinstance(outputs, pd.DataFrame) else pd.DataFrame(np.asarray(outputs))
    classes = list(transducer.classes_)
    proba = transducer.predict_proba(outputs)
    notes: list[str] = []
    rows: dict[str, dict[str, float]] = {}

    def add(label: str, p: Any, **kwargs: Any) -> None:
        d = brier_decomposition(p, truth, bins=bins, **kwargs)
        rows[label] = {"Brier": d.brier, "reliability": d.reliability,
                       "resolution": d.resolution, "uncertainty": d.uncertainty,
                       "within-bin variance": d.within_bin_variance,
                       "within-bin covariance": d.within_bin_covariance,
                       "calibration loss": d.calibration_loss,
                       "refinement loss": d.refinement_loss}  # fmt: skip

    if len(classes) != 2:
        add("transducer", proba, classes=classes)
        notes.append(
            f"{len(classes)} classes: the ROC hull and the reliability diagram are binary "
            "tools and are left out; the Brier terms are summed over the classes, one "
            "against the rest."
        )
        brier = pd.DataFrame(rows).T
        brier.index.name = "probabilities of every class (one against the rest, summed)"
        return ClassifierToolkit(name, "", None, None, brier, None, None, notes)

    positive = _positive(transducer, positive)
    k = classes.index(positive)
    values = frame.to_numpy(float)
    points_to = classes[-1]  # the class a scalar output points to (_positive's default)
    if values.shape[1] == 1 and positive == points_to:
        score = values[:, 0]
        score_note = "the score is the classifier's output."
    elif values.shape[1] == 1:  # the output points away from positive: higher, less so
        score = -values[:, 0]
        score_note = (
            f"the score is minus the classifier's output (the output points to "
            f"{points_to!r}, not to {positive!r})."
        )
    else:
        score = proba[:, k]
        score_note = (
            f"the score is the transducer's probability of {positive!r} (the classifier has "
            f"{values.shape[1]} outputs)."
        )
    hull = convex_hull(score, truth, positive=positive, classes=classes)
    square = {m: u for m, u in utilities.items()
              if u.shape == (2, 2) and not np.array_equal(u.values[0], u.values[1])}  # fmt: skip
    tied = [str(m) for m, u in utilities.items() if u.shape == (2, 2) and m not in square]
    others = [str(m) for m, u in utilities.items() if u.shape != (2, 2)]
    if tied:
        notes.append(
            f"Utility matrices {', '.join(tied)} give both decisions the same utility for "
            "every class: every threshold yields the same, so they have no best point."
        )
    if others:
        notes.append(
            f"Utility matrices {', '.join(others)} have more than two decisions: a point "
            "of the ROC curve is one threshold between two decisions, so they have no "
            "best point on it."
        )
    best = {}
    for matrix, u in square.items():
        point = hull.best_point(u)
        best[matrix] = {"threshold": point.threshold, "fpr": point.fpr, "tpr": point.tpr,
                        "utility_yield": point.utility_yield, "slope": point.slope}  # fmt: skip
    columns = ["threshold", "fpr", "tpr", "utility_yield", "slope"]
    best_points = pd.DataFrame(best, index=columns).T
    best_points.index.name = "utility matrix"
    roc_figure = _figure(figsize=(6, 5.5))
    roc_hull({str(name): hull}, utilities={str(m): u for m, u in square.items()},
             ax=roc_figure.subplots())  # fmt: skip

    add("transducer", proba[:, k], positive=positive, classes=classes)
    probability_like = values.shape[1] == 1 and (values >= 0).all() and (values <= 1).all()
    raw = {}
    brier_notes = []
    if probability_like:  # the probability of points_to, so of positive's complement
        raw_p = values[:, 0] if positive == points_to else 1 - values[:, 0]
        add("output read as a probability", raw_p, positive=positive, classes=classes)
        raw["output read as a probability"] = raw_p
    elif values.shape[1] == 1:
        brier_notes.append(
            "The Brier decomposition needs probabilities in [0, 1]; the classifier's raw "
            f"scores are not (they lie in [{values.min():.4g}, {values.max():.4g}]), so only "
            "the transducer's probabilities are decomposed here. To put the raw scores "
            "beside them, calibrate them first on held-out items, for instance with "
            "yieldwise.calibrators (Platt, isotonic, beta or temperature scaling)."
        )
    else:
        brier_notes.append(
            f"The Brier decomposition needs one probability of {positive!r} per item; the "
            f"classifier has {values.shape[1]} outputs, so only the transducer's "
            "probabilities are decomposed here."
        )
    brier = pd.DataFrame(rows).T
    brier.index.name = f"probabilities of {positive!r}"

    draws = transducer.draws_proba(outputs)
    reliability_figure = _figure(figsize=(6, 5.5))
    reliability(
        {**raw, "transducer": proba[:, k]}, truth, positive=positive, classes=classes,
        bins=bins, draws={"transducer": draws}, band=band, ax=reliability_figure.subplots(),
    )  # fmt: skip
    return ClassifierToolkit(
        name, score_note, hull, best_points, brier, roc_figure, reliability_figure, notes,
        brier_notes,
    )  # fmt: skip


@dataclass(eq=False)
class RulesSection:
    """The standard rule against the augmented rule for one classifier."""

    name: str
    frame: pd.DataFrame
    figure: Any

    def to_html(self, level: int = 3) -> str:
        """An HTML fragment with the summary line and the scatter plot; names escaped."""
        e = html.escape
        f = self.frame
        summary = (
            f"Over {len(f)} utility matrices ({e(str(f.attrs.get('prior')))} prior), deciding "
            "by expected utility with the transducer yields at least as much as the "
            f"classifier's own rule for {f.attrs['share_not_worse']:.0%} of them; the mean "
            f"gain in rescaled long-run utility is {f['gain'].mean():.3g}, the largest "
            f"{f['gain'].max():.3g}."
        )
        return (
            f"<h{level}>{e(self.name)}</h{level}><p>{summary}</p>"
            f"<img alt='standard vs augmented, {e(self.name)}' src='{_png(self.figure)}'>"
        )


def rules_section(
    name: str,
    transducer: Transducer,
    *,
    n_matrices: int = 10_000,
    seed: int = 0,
    threshold: float = 0.5,
) -> RulesSection:
    """:func:`yieldwise.rules.standard_vs_augmented` over ``n_matrices`` matrices, plotted.

    The standard rule is the classifier's own choice (argmax, or the output above
    ``threshold``, choosing the transducer's second class, for a scalar output), as in
    the report's metric table. Not available for a joint transducer (no standard rule).
    """
    from .plots import standard_vs_augmented as scatter
    from .rules import standard_vs_augmented

    frame = standard_vs_augmented(transducer, n_matrices=n_matrices, seed=seed, threshold=threshold)
    figure = _figure(figsize=(5.5, 5.5))
    scatter(frame, ax=figure.subplots())
    return RulesSection(name, frame, figure)
