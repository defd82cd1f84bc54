"""The report page: one self-contained HTML file (inline images, no network).

It opens with a verdict a decision-maker reads in ten seconds (per utility matrix and
data set: which classifier to deploy, P(best), the expected gain per 1,000 items over the
runner-up with its 90 % interval, and what more calibration data would be worth), then a
table of contents and the evidence. Numbers on the page are rounded for people; the CSV
and NetCDF files keep full precision. Every user-given name is escaped.
"""

from __future__ import annotations

import base64
import html
import inspect
import io
import math
from typing import Any

import numpy as np
import pandas as pd

from .config import class_order_sentence

__all__ = ["metric_table", "page", "people", "toolkit_sections"]

_STYLE = (
    "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:0 8px}"
    "table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #ccc;padding:3px 6px}"
    "td{text-align:right}th{text-align:left}td:first-child{text-align:left}img{max-width:100%}"
    ".wide{overflow-x:auto;max-width:100%}.verdict td,.verdict th{padding:6px 10px}"
    ".verdict .deploy{font-weight:bold}nav ol{columns:2}"
    ".warning{border:2px solid #c00;background:#fee;padding:6px 10px}"
)


def people(value: Any, digits: int = 3) -> str:
    """A number rounded for people: ``digits`` significant digits, no exponent, thousands
    separated (``1,234``, ``0.0123``, ``-5.6``); NaN as a dash.

    >>> people(1234.5678), people(0.012345), people(-5.6), people(0.0)
    ('1,235', '0.0123', '-5.6', '0')
    """
    if value is None or not math.isfinite(float(value)):
        return "—"
    value = float(value)
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _percent(p: float) -> str:
    """A probability for people: ``97 %``, ``> 99 %``, ``< 1 %``."""
    if p >= 0.995:
        return "&gt; 99 %"
    if p < 0.005:
        return "&lt; 1 %"
    return f"{100 * p:.0f} %"


def _interval(low: float, high: float) -> str:
    return f"{people(low)} to {people(high)}"


def _figure(**kwargs: Any) -> Any:
    """A figure outside pyplot: no GUI backend involved, nothing to close, and the user's
    matplotlib backend (e.g. in Jupyter) is left alone."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _table(frame: pd.DataFrame, **kwargs: Any) -> str:
    """A table that fits the page: scrolls sideways inside its own box when too wide."""
    return f"<div class='wide'>{frame.to_html(escape=True, **kwargs)}</div>"


def no_standard_rule(n_outputs: int, n_classes: int) -> str | None:
    """Why a classifier with ``n_outputs`` columns has no standard rule (its own decisions:
    the largest of one output per class, or one score above 0.5 for two classes), or
    None when it has one (:func:`yieldwise.long_run.decision_indices`)."""
    if n_outputs == n_classes or (n_outputs == 1 and n_classes == 2):
        return None
    return (f"{n_outputs} output column{'s' if n_outputs > 1 else ''} for {n_classes} "
            f"classes: no own decisions (one column per class, or one score for two "
            "classes)")  # fmt: skip


def metric_table(config, frame, source, fits, utilities) -> tuple[pd.DataFrame, dict]:
    """Usual metrics of each classifier's standard decisions, and in-sample yields.

    Metrics (with their admissibility, theory 1.2) are computed, as is customary, on the
    classifier's own decisions (argmax of a vector output, threshold 0.5 for a scalar);
    the utility yields of each matrix are those of the expected-utility decisions on the
    calibration items (in-sample, hence optimistic; the posteriors are not).

    The table's columns are the classifiers and nothing else, its rows are indexed by
    ``(metric, admissible)``: whatever a classifier is called (``admissible`` too), no
    column of the table can take its place (a column ``admissible`` beside the
    classifiers' was overwritten by one so named, audit 2026-12-06).
    """
    from .. import metrics
    from ..confusion import ConfusionMatrix
    from ..long_run import decision_indices
    from ..yields import utility_yield

    truth = frame[source.class_col].astype(str)
    rows: dict[str, dict[str, Any]] = {}
    admissible: dict[str, bool] = {}
    confusions: dict[str, Any] = {}
    for name, transducer in fits.items():
        classes = list(transducer.classes_)
        outputs = frame[config.classifiers[name]].to_numpy(float)
        confusion = None
        if no_standard_rule(outputs.shape[1], len(classes)) is None:
            standard = decision_indices("standard", outputs, tuple(classes), transducer, 0.5)
            predicted = np.array(classes, dtype=object)[standard]
            confusion = ConfusionMatrix.from_labels(
                truth.to_numpy(object), predicted, classes=classes
            )
            confusions[name] = confusion
        positive = {"positive": classes[-1]} if len(classes) == 2 else {}
        for metric, function in metrics.CONFUSION_METRICS.items():
            value = float("nan")  # blank without standard decisions
            if confusion is not None:
                try:
                    takes_positive = "positive" in inspect.signature(function).parameters
                    kwargs = positive if takes_positive else {}
                    value = float(function(confusion, **kwargs))
                except (ValueError, metrics.UndefinedMetricError):
                    pass
            rows.setdefault(metric, {})[name] = value
            admissible[metric] = bool(function.admissible)
        for matrix, u in utilities.items():
            chosen = transducer.decide(frame[config.classifiers[name]], u)
            cm = ConfusionMatrix.from_labels(
                truth.to_numpy(object),
                np.asarray(chosen, dtype=object),
                classes=classes,
                decisions_set=list(u.decisions),
            )
            rows.setdefault(f"utility yield: {matrix}", {})[name] = utility_yield(cm, u)
            admissible[f"utility yield: {matrix}"] = True
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(fits))
    table.columns.name = "classifier"
    table.index = pd.MultiIndex.from_arrays(
        [list(table.index), [admissible[m] for m in table.index]], names=["metric", "admissible"]
    )
    return table, confusions


#: Utility matrices of the standard-versus-augmented comparison (issue 19, item 5): drawn
#: uniformly (the chart of theory 1.1 for two classes; for more, independent uniform
#: entries), with this seed. With three or more classes every matrix needs its own
#: decisions at each of the 20,000 Monte Carlo points of the long-run integral: on the
#: shipped 3-class digits (3,000 draws, 2 cores, 2026-11-24) 10,000 matrices take 108 s
#: per classifier (1,000: 28 s), of the order of the classifier's fit.
RULES_MATRICES = 10_000
RULES_SEED = 0
#: Equal-width bins of the Brier decomposition and the reliability diagram.
TOOLKIT_BINS = 10


def toolkit_sections(config, frame, source, fits, utilities) -> dict[str, tuple[Any, Any]]:
    """Per classifier, its evaluation-toolkit section and its standard-versus-augmented
    comparison (:mod:`yieldwise.report_toolkit`), on the calibration items of ``source``.

    The toolkit's numbers are in-sample: the report has no held-out items, so the ROC
    curve, the Brier decomposition and the reliability diagram use the items that also
    fitted the transducer. The comparison of the rules integrates each transducer's
    posterior (long-run utilities, theory 4) over matrices drawn from the uniform prior.
    """
    from ..report_toolkit import classifier_toolkit, rules_section

    truth = frame[source.class_col].astype(str).to_numpy(object)
    sections = {}
    for name, transducer in fits.items():
        outputs = frame[config.classifiers[name]]
        section = classifier_toolkit(name, outputs, truth, transducer, utilities,
                                     bins=TOOLKIT_BINS)  # fmt: skip
        rules = None  # a classifier without its own decisions has nothing to compare
        if no_standard_rule(outputs.shape[1], len(transducer.classes_)) is None:
            rules = rules_section(
                name, transducer, n_matrices=RULES_MATRICES,
                seed=RULES_SEED, threshold=0.5,
            )  # fmt: skip
        sections[name] = (section, rules)
    return sections


def _class_order_note(config: Any) -> str:
    """What the classes' order means for the standard decisions, as escaped HTML: the
    terminal's sentence (:func:`~yieldwise.report.config.class_order_sentence`)."""
    return f"<p>{html.escape(class_order_sentence(config))}</p>"


def _binary_rule_html(u: Any) -> str:
    """A 2x2 matrix's expected-utility rule in words, as escaped HTML, whatever the order
    of its rows (:meth:`UtilityMatrix.binary_rule`)."""
    e = html.escape
    t, above, below = u.binary_rule()
    if t is None and u.values[0].tolist() == u.values[1].tolist():
        return "both decisions yield the same for every class: no threshold to choose"
    if t is None or not 0 < t < 1:
        always = above if t is None or t <= 0 else below
        return (f"choose &ldquo;{e(str(always))}&rdquo; whatever the probabilities (it yields "
                "at least as much for every class)")  # fmt: skip
    return (f"choose &ldquo;{e(str(above))}&rdquo; when P({e(str(u.classes[1]))}) exceeds "
            f"{t:.4g}, else &ldquo;{e(str(below))}&rdquo;")  # fmt: skip


def _expected_utility_terms(row: Any, classes: Any) -> str:
    """``1·P(a) + 0·P(b)``: a decision's expected utility, as escaped HTML."""
    return " + ".join(
        f"{v:g}&middot;P({html.escape(str(c))})" for v, c in zip(row, classes, strict=True)
    )


def _verdict(config, found) -> list[str]:
    e = html.escape
    parts = [
        "<h2 id='verdict'>Verdict</h2>",
        f"<p>Per utility matrix{' and data set' if config.several else ''}: the classifier "
        "to deploy (the highest expected long-run utility), the probability that it is the "
        f"best, what it gains per 1,000 items over the runner-up (90 % interval), and what "
        "perfect knowledge of its calibration would add per 1,000 items &mdash; the most "
        "that more calibration data could still be worth. Utilities are in the matrix's "
        "own units.</p>",
        "<div class='wide'><table class='verdict'><thead><tr>",
    ]
    heads = [*(["data set"] if config.several else []), "utility matrix", "deploy", "P(best)",
             "gain per 1,000 items over the runner-up", "more calibration data: worth at most "
             "(per 1,000 items)"]  # fmt: skip
    parts.append("".join(f"<th>{h}</th>" for h in heads) + "</tr></thead><tbody>")
    for v in found:
        if v.runner_up is None:
            gain = "the only classifier"
        else:
            low, high = v.gain_interval
            gain = (f"{people(v.gain)} over {e(v.runner_up)} "
                    f"<small>({_interval(low, high)})</small>")  # fmt: skip
        worth = (f"{people(v.more_data)} <small>({_interval(*v.more_data_interval)})"
                 "</small>")  # fmt: skip
        cells = [*([e(v.dataset)] if config.several else []), e(v.matrix),
                 f"<span class='deploy'>{e(v.deploy)}</span>", _percent(v.prob_best), gain,
                 worth]  # fmt: skip
        parts.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</tbody></table></div>")
    return parts


def _contents(config) -> str:
    sections = [("verdict", "Verdict"), ("summary", "Long-run utilities")]
    if config.several:
        sections.append(("across-datasets", "Each classifier across data sets"))
    sections += [
        ("transducers", "Transducers"),
        ("superiority", "Which classifier yields more"),
        ("thresholds", "What each utility matrix implies"),
        ("metrics", "The usual metrics"),
        ("win-map", "Utility-space win map"),
        ("toolkit", "The evaluation toolkit"),
        ("rules", "Standard rule against expected utility"),
        ("diagnostics", "Sampler diagnostics"),
    ]
    items = "".join(f"<li><a href='#{k}'>{t}</a></li>" for k, t in sections)
    return f"<nav id='contents'><h2>Contents</h2><ol>{items}</ol></nav>"


def _summary_for_people(summary: pd.DataFrame, several: bool) -> pd.DataFrame:
    """The summary's columns a person reads, rounded; the CSV has them all, in full."""
    shown = pd.DataFrame(
        {
            **({"data set": summary["dataset"]} if several else {}),
            "matrix": summary["matrix"],
            "classifier": summary["classifier"],
            "long-run utility": summary["mean"].map(people),
            "90 % interval": [_interval(a, b) for a, b in zip(summary["q5"], summary["q95"],
                                                                strict=True)],
            **({"rescaled": summary["rescaled_mean"].map(people)}
               if "rescaled_mean" in summary else {}),
            "P(best)": summary["prob_best"].map(lambda p: html.unescape(_percent(p))),
        }
    )  # fmt: skip
    return shown


def _across(comparisons, utilities) -> list[str]:
    """For each matrix, each classifier's long-run utility in each data set."""
    parts = [
        "<h2 id='across-datasets'>Each classifier across data sets</h2><p>Posterior mean "
        "long-run utility per item, with its 90 % interval, of each classifier in each data "
        "set: how much its value moves from one calibration set or site to another.</p>"
    ]
    for matrix in utilities:
        rows = {}
        for dataset, comparison in comparisons.items():
            for name in comparison.names:
                u = comparison.samples(name, matrix)
                low, high = np.quantile(u, [0.05, 0.95])
                rows.setdefault(name, {})[dataset] = f"{people(u.mean())} ({_interval(low, high)})"
        parts.append(f"<h3>Utility matrix {html.escape(str(matrix))}</h3>")
        # the classifiers stay the index, never a column beside the data sets' (a data set
        # named "classifier" stopped the report: "cannot insert classifier", audit 2026-12-06)
        table = pd.DataFrame.from_dict(rows, orient="index", columns=list(comparisons))
        parts.append(_table(table.rename_axis(index="classifier", columns="data set")))
    return parts


def _approximation_warning(fits) -> list[str]:
    """A banner when any transducer comes from the Laplace approximation, not from MCMC."""
    approximate = [
        (dataset, name) for dataset, per in fits.items() for name, t in per.items()
        if getattr(t, "backend_", None) == "laplace"
    ]  # fmt: skip
    if not approximate:
        return []

    def named(dataset, name) -> str:
        # the approximation's own check (yieldwise.backends._laplace): the Pareto shape of
        # its draws' importance ratios, above about 0.7 where they misstate the posterior
        k = fits[dataset][name].sampler_summary().get("pareto_k")
        shown = "" if k is None else f" (Pareto k {k:.2f})"
        return html.escape(str(name)) + shown

    names = ", ".join(named(dataset, name) for dataset, name in approximate)
    return [
        "<p class='warning' id='approximation'><strong>Approximate posteriors.</strong> "
        f"The transducers of {names} were fitted with backend 'laplace': a Normal "
        "approximation of the posterior, not Stan's sampler. Its probabilities of "
        "superiority are not checked for calibration, its bands are an approximation's "
        "(their coverage on the panel is in docs/model_record.md), and where the Pareto k "
        "of its draws is above 0.7 they misstate the posterior; use this report to check "
        "the configuration and layout, and refit with the default backend before deciding "
        "anything.</p>"
    ]


def page(config, comparisons, fits, utilities, summary, metrics, found, warned, toolkit) -> str:
    """The whole report page (``toolkit``: data set -> :func:`toolkit_sections`)."""
    e = html.escape
    several = config.several

    def within(dataset: str) -> str:  # a heading per data set when there are several
        return f"<h3 class='dataset'>Data set {e(dataset)}</h3>" if several else ""

    sub = "h4" if several else "h3"
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{e(config.title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{e(config.title)}</h1>",
        *_approximation_warning(fits),
        *_verdict(config, found),
        _contents(config),
        "<p>Each classifier's outputs were turned into probabilities by a transducer learned "
        "from the calibration data; decisions maximise expected utility. The long-run "
        "utility is the average utility per item that the classifier will yield in use, "
        "with its posterior uncertainty. Numbers here are rounded; summary.csv and draws.nc "
        "hold them in full.</p>",
        "<h2 id='summary'>Long-run utilities</h2>",
        _table(_summary_for_people(summary, several), index=False),
    ]
    if several:
        parts.extend(_across(comparisons, utilities))
    parts.append(
        "<h2 id='transducers'>Transducers</h2><p>p(class | output) with 75 % variability "
        "bands: how the curve could still move with more data. For two outputs, a map of "
        "the posterior mean, with the calibration items as dots; for probability vectors, "
        "each class's probability against its own output column (the dotted diagonal is "
        "the output taken at face value).</p>"
    )
    for dataset, per in fits.items():
        parts.append(within(dataset))
        for name, transducer in per.items():
            # every output shape has a plot: a 1-D curve, a 2-D map, or a calibration plot
            fig = _figure(figsize=(6, 3.6))
            ax = fig.subplots()
            transducer.plot(ax=ax)
            ax.set_title(name, parse_math=False)  # a name is text, whatever "$" it holds
            parts.append(
                f"<{sub}>{e(name)}</{sub}><img alt='transducer of {e(name)}' src='{_png(fig)}'>"
            )
    parts.append("<h2 id='superiority'>Which classifier yields more</h2>")
    for dataset, comparison in comparisons.items():
        parts.append(within(dataset))
        for matrix, u in utilities.items():
            parts.append(f"<{sub}>Utility matrix {e(str(matrix))}</{sub}>")
            parts.append(_table(u.to_frame()))
            if len(comparison.names) > 1:
                parts.append("<p>P(row classifier yields more than column classifier):</p>")
                parts.append(_table(comparison.prob_superiority(matrix=matrix),
                                    float_format=lambda v: f"{v:.3f}", na_rep="—"))  # fmt: skip
                ties = comparison.prob_tie(matrix=matrix)
                if (ties.fillna(0) > 0).to_numpy().any():  # else P(A > B) + P(B > A) = 1
                    parts.append("<p>P(row and column classifier tie): their long-run "
                                 "utilities equal, as when they take the same decisions "
                                 "(so that P(row > column) + P(column > row) + P(tie) "
                                 "= 1):</p>")  # fmt: skip
                    parts.append(_table(ties, float_format=lambda v: f"{v:.3f}", na_rep="—"))
                parts.append("<p>P(best): the probability that each has the highest long-run "
                             "utility.</p>")  # fmt: skip
                parts.append(_table(comparison.prob_best(matrix=matrix).to_frame(),
                                    float_format=lambda v: f"{v:.3f}"))  # fmt: skip
            parts.append(
                "<p>The posterior of each classifier's long-run utility per item: where its "
                "average utility in use will lie, given the calibration data.</p>"
            )
            fig = _figure(figsize=(11, 4))
            axes = fig.subplots(1, 2)
            comparison.plot(matrix=matrix, axes=axes)
            parts.append(
                f"<img alt='long-run utility posteriors, {e(str(matrix))}' src='{_png(fig)}'>"
            )
    parts.append(
        "<h2 id='thresholds'>What each utility matrix implies</h2><p>Each item gets the "
        "decision with the largest expected utility under its probabilities. With two "
        "decisions and two classes, that is a threshold on the probability of the second "
        "class: choose the second decision when it is exceeded.</p><ul>"
    )
    for matrix, u in utilities.items():
        if u.shape == (2, 2):
            parts.append(f"<li>{e(str(matrix))}: {_binary_rule_html(u)}</li>")
        else:
            terms = "; ".join(
                f"&ldquo;{e(str(d))}&rdquo;: " + _expected_utility_terms(row, u.classes)
                for d, row in zip(u.decisions, u.values, strict=True)
            )
            parts.append(
                f"<li>{e(str(matrix))}: choose the decision with the largest expected utility "
                f"({terms})</li>"
            )
    parts.append("</ul>")
    parts.append(
        "<h2 id='metrics'>The usual metrics, and why they may mislead</h2><p>The usual "
        "metrics are computed, as is customary, on each classifier's standard decisions "
        "(the largest output, or a score above 0.5) over the calibration items. Only "
        "admissible scores rank classifiers as some utility matrix does, and only the "
        "utility yield of this problem's own matrix ranks them as this problem does. The "
        "utility-yield rows are those of the expected-utility decisions on the same items: "
        "in-sample, hence a little optimistic; the long-run utilities above are not.</p>"
        + _class_order_note(config)
    )
    for dataset, (table, confusions) in metrics.items():
        parts.append(within(dataset))
        blank = [c for c in table.columns if c not in confusions]
        if blank:
            parts.append(
                f"<p>Left blank for {', '.join(e(str(c)) for c in blank)}: "
                + "; ".join(e(str(no_standard_rule(len(config.classifiers[c]),
                                                    len(fits[dataset][c].classes_))))
                            for c in blank) + ".</p>"
            )  # fmt: skip
        parts.append(_table(table, float_format=lambda v: people(v, 4)))
    parts.append("<h3 id='win-map'>Utility-space win map</h3>")
    for dataset, (_, confusions) in metrics.items():
        parts.append(within(dataset))
        parts.extend(_win_map(confusions))
    parts.extend(_toolkit(config, toolkit, within, sub))
    parts.append("<h2 id='diagnostics'>Sampler diagnostics</h2>")
    for dataset, per in fits.items():
        parts.append(within(dataset))
        parts.append("<ul>")
        for name, transducer in per.items():
            info = transducer.sampler_summary()
            table = transducer.diagnostics()
            parts.append(
                f"<li>{e(name)}: {info['divergent']} divergent transitions, "
                f"{info['max_treedepth_hits']} at the maximum tree depth, "
                f"n_components {transducer.n_components_}; over {len(table)} quantities that "
                f"do not depend on component labels, worst R-hat {table['r_hat'].max():.3f} "
                f"and lowest bulk ESS {table['ess_bulk'].min():.0f} (targets: 1.01 and 400)"
                "</li>"
            )
        parts.append("</ul>")
    if warned:
        parts.append("<h3>Warnings</h3><ul>")
        parts.extend(f"<li>{e(w)}</li>" for w in dict.fromkeys(warned))
        parts.append("</ul>")
    parts.append("</body></html>")
    return "".join(parts)


def _toolkit(config, toolkit, within, sub) -> list[str]:
    """The evaluation literature's tools per classifier, then the two rules compared."""
    level = int(sub[1])
    where = "each data set's calibration items" if config.several else "the calibration items"
    parts = [
        "<h2 id='toolkit'>The evaluation toolkit, beside the utility yield</h2>",
        "<p>What the evaluation literature would look at, per classifier. <b>Which data: "
        f"in-sample.</b> This report has no held-out items, so everything in this section "
        f"is computed on {where}, the very items that fitted each transducer: the ROC "
        "curve and its best points are chosen on them, and the transducer's Brier score "
        "and reliability are judged on the data it learned from. All of it is optimistic; "
        "to compare calibrations honestly, score the transducer on held-out items. The "
        "long-run utilities above are not in-sample counts: they integrate the "
        "transducer's posterior (theory 4).</p>",
        "<p>Two classes: the ROC curve with its convex hull and each two-decision utility "
        "matrix's best point on the hull (its table: the score threshold, the rates there "
        "and the utility yield on the calibration items); the Brier score of the "
        "transducer's probabilities and its decompositions; the reliability diagram with "
        f"Wilson intervals on the binned frequencies ({TOOLKIT_BINS} equal-width bins) and "
        "the transducer's 75 % posterior band. More classes: the ROC curve, its hull and "
        "the reliability diagram are tools for two classes and are not drawn (each would "
        "need one class singled out as positive); the Brier terms are summed over the "
        "classes, one against the rest.</p>",
    ]
    for dataset, sections in toolkit.items():
        parts.append(within(dataset))
        parts.extend(section.to_html(level) for section, _ in sections.values())
    counts = sorted({len(r.frame) for sections in toolkit.values()
                     for _, r in sections.values() if r is not None})  # fmt: skip
    parts.append(
        "<h2 id='rules'>The classifier's own rule against expected utility</h2><p>For "
        f"{' or '.join(f'{n:,}' for n in counts)} utility matrices drawn at random "
        f"(uniform prior, seed {RULES_SEED}: for two classes uniform over the chart of "
        "theory 1.1; for more, independent uniform entries with each class's correct "
        "decision the best), each point compares the posterior mean "
        "long-run utility (theory 4) of the classifier's own choice (the largest output, "
        "or a score above 0.5) with that of deciding by expected utility with the "
        "transducer's probabilities (theory 2), rescaled so that 0 is the worst and 1 the "
        "best yield at the predicted class frequencies. These integrate the posterior; "
        "they are not counts on the calibration items.</p>"
    )
    for dataset, sections in toolkit.items():
        parts.append(within(dataset))
        for name, (_, rules) in sections.items():
            parts.append(
                rules.to_html(level) if rules is not None else
                f"<h{level}>{html.escape(str(name))}</h{level}><p>No own rule to compare: "
                "its outputs are not one column per class, nor one score of two classes.</p>"
            )  # fmt: skip
    return parts


def _win_map(confusions: dict[str, Any]) -> list[str]:
    e = html.escape
    names = list(confusions)
    if len(names) < 2 or not all(len(c.classes) == 2 for c in confusions.values()):
        return [
            "<p>The win map covers two classifiers of a two-class problem (the chart of "
            f"theory 1.1); this report has {len(names)} classifier(s) and "
            f"{len(next(iter(confusions.values())).classes)} classes.</p>"
        ]
    from ..plots import utility_space

    parts = [
        "<p>For every binary utility matrix (the chart of theory 1.1; accuracy at the "
        "centre), which classifier's own decisions yield more on the calibration data.</p>"
    ]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            fig = _figure(figsize=(5.5, 5))
            ax = fig.subplots()
            utility_space(confusions[a], confusions[b], names=(a, b), ax=ax)
            parts.append(f"<img alt='win map, {e(a)} vs {e(b)}' src='{_png(fig)}'>")
    return parts
