"""The toolkit's per-classifier report sections (yieldwise.report_toolkit)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from yieldwise import Transducer, UtilityMatrix
from yieldwise.metrics import brier_decomposition
from yieldwise.report_toolkit import classifier_toolkit, rules_section
from yieldwise.roc import convex_hull

LABELS = ("no", "yes")
W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
MU = np.array([[[-1.5], [1.0]], [[-1.0], [1.5]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])
MATRICES = {
    "accuracy": UtilityMatrix([[1, 0], [0, 1]], decisions=LABELS, classes=LABELS),
    "<i>screening</i>": UtilityMatrix([[0, -10], [-1, 0]], decisions=LABELS, classes=LABELS),
}


@pytest.fixture(scope="module")
def votes():
    rng = np.random.default_rng(5)
    values = np.round(rng.beta(2, 5, 120) * 20) / 20
    truth = np.array(LABELS)[(rng.random(120) < values).astype(int)]
    outputs = pd.DataFrame({"votes": values})
    t = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        outputs, truth, LABELS, output_transform="logit", resolution=0.05,
    )  # fmt: skip
    return outputs, truth, t


def test_binary_section_matches_the_library(votes):
    outputs, truth, t = votes
    section = classifier_toolkit("<script>forest</script>", outputs, truth, t, MATRICES)
    hull = convex_hull(outputs["votes"], truth, positive="yes", classes=list(LABELS))
    np.testing.assert_array_equal(section.hull.vertices["tpr"], hull.vertices["tpr"])
    for matrix, u in MATRICES.items():
        point = hull.best_point(u)
        assert section.best_points.loc[matrix, "utility_yield"] == pytest.approx(
            point.utility_yield
        )
        assert section.best_points.loc[matrix, "threshold"] == point.threshold
    p = t.predict_proba(outputs)[:, 1]
    d = brier_decomposition(p, truth, positive="yes", bins=10)
    assert section.brier.loc["transducer", "Brier"] == pytest.approx(d.brier)
    assert section.brier.loc["transducer", "refinement loss"] == pytest.approx(d.refinement_loss)
    # the votes lie in [0, 1]: they are also read as probabilities
    raw = brier_decomposition(outputs["votes"], truth, positive="yes", bins=10)
    assert section.brier.loc["output read as a probability", "Brier"] == pytest.approx(raw.brier)
    axes = section.reliability_figure.axes[0]
    assert len([c for c in axes.collections if c.get_gid() == "band"]) == 1
    best = [line for line in section.roc_figure.axes[0].lines if line.get_gid() == "best_point"]
    assert len(best) == len(MATRICES)
    page = section.to_html()
    assert "<script>" not in page and "&lt;script&gt;forest&lt;/script&gt;" in page
    assert "&lt;i&gt;screening&lt;/i&gt;" in page and "<i>screening</i>" not in page
    assert page.count("data:image/png;base64,") == 2


def test_positive_the_first_class_turns_a_scalar_score_round(votes):
    """positive= the class a scalar output points away from: the score is minus the
    output and the raw probability its complement, so the hull is the same curve seen
    from the other class and every matrix keeps its best yield (the output was used as
    it is: a hull on the diagonal and a best point yielding less than doing nothing)."""
    outputs, truth, t = votes
    usual = classifier_toolkit("f", outputs, truth, t, MATRICES)
    other = classifier_toolkit("f", outputs, truth, t, MATRICES, positive="no")
    assert other.hull.auc == pytest.approx(usual.hull.auc)
    hull = convex_hull(-outputs["votes"], truth, positive="no", classes=list(LABELS))
    np.testing.assert_allclose(other.hull.vertices["tpr"], hull.vertices["tpr"])
    for matrix in MATRICES:
        assert other.best_points.loc[matrix, "utility_yield"] == pytest.approx(
            usual.best_points.loc[matrix, "utility_yield"]
        )
    assert "minus the classifier's output (the output points to 'yes'" in other.score_note
    raw = brier_decomposition(1 - outputs["votes"], truth, positive="no", bins=10)
    assert other.brier.loc["output read as a probability", "Brier"] == pytest.approx(raw.brier)


def test_two_outputs_use_the_transducer_probability_as_score():
    rng = np.random.default_rng(1)
    outputs = pd.DataFrame(rng.normal(size=(80, 2)), columns=["a", "b"])
    truth = np.array(LABELS)[(outputs["b"] > outputs["a"]).astype(int)]
    mu = np.array([[[[-1.0, 1.0], [1.0, -1.0]], [[-0.8, 0.9], [1.1, -1.2]]]])
    t = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": mu, "sigma": np.ones((1, 2, 2, 2))},
        outputs, truth, LABELS, output_transform="identity", resolution=None,
    )  # fmt: skip
    section = classifier_toolkit("net", outputs, truth, t, MATRICES)
    assert "probability of 'yes'" in section.score_note
    expected = convex_hull(t.predict_proba(outputs)[:, 1], truth, positive="yes")
    assert section.hull.auc == pytest.approx(expected.auc)
    assert "output read as a probability" not in section.brier.index
    assert section.brier_notes == [
        "The Brier decomposition needs one probability of 'yes' per item; the classifier "
        "has 2 outputs, so only the transducer's probabilities are decomposed here."
    ]


def test_raw_scores_outside_the_unit_interval_get_a_stated_reason():
    """A logit output: decomposing it raises, so the section says why it is missing
    (escaped, under the Brier table) instead of leaving it out silently."""
    import html

    from yieldwise.calibrators import PlattCalibrator

    rng = np.random.default_rng(4)
    logits = np.round(rng.normal(0.0, 2.0, 90), 3)
    truth = np.array(LABELS)[(rng.random(90) < 1 / (1 + np.exp(-logits))).astype(int)]
    outputs = pd.DataFrame({"logit": logits})
    t = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        outputs, truth, LABELS, output_transform="identity", resolution=None,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"argument probabilities .*yieldwise\.calibrators"):
        brier_decomposition(logits, truth, positive="yes")
    section = classifier_toolkit("<b>net</b>", outputs, truth, t, MATRICES)
    assert list(section.brier.index) == ["transducer"]
    (note,) = section.brier_notes
    low, high = logits.min(), logits.max()  # the range the note must state
    assert low < 0 and high > 1
    assert f"they lie in [{low:.4g}, {high:.4g}]" in note
    assert "needs probabilities in [0, 1]" in note and "yieldwise.calibrators" in note
    page = section.to_html()
    assert f"<p>{html.escape(note)}</p>" in page and "classifier&#x27;s raw scores" in page
    assert "<b>net</b>" not in page
    # the note's place: right under the Brier table, before the reliability diagram
    assert page.index(html.escape(note)) < page.index("Reliability: binned probabilities")
    # what the note advises works: Platt-calibrated scores decompose
    calibrated = PlattCalibrator().fit(logits, truth).predict_proba(logits)[:, 1]
    d = brier_decomposition(calibrated, truth, positive="yes")
    assert d.calibration_loss + d.refinement_loss == pytest.approx(d.brier)


def test_three_classes_get_the_summed_decomposition_and_a_note():
    rng = np.random.default_rng(2)
    labels = ("a", "b", "c")
    outputs = pd.DataFrame(rng.normal(size=(60, 3)), columns=["l0", "l1", "l2"])
    truth = np.array(labels)[outputs.to_numpy().argmax(axis=1)]
    t = Transducer.from_draws(
        {"w": np.full((1, 2, 3), 1 / 3), "alpha": np.tile(0.1 + 0.7 * np.eye(3), (1, 2, 1, 1)),
         "mu": np.tile(2.0 * np.eye(3)[None, None], (1, 2, 1, 1)),
         "sigma": np.ones((1, 2, 3, 3))},
        outputs, truth, labels, output_transform="identity", resolution=None,
    )  # fmt: skip
    section = classifier_toolkit("three", outputs, truth, t, {})
    d = brier_decomposition(t.predict_proba(outputs), truth, classes=list(labels), bins=10)
    assert section.brier.loc["transducer", "Brier"] == pytest.approx(d.brier)
    assert section.hull is None and section.roc_figure is None
    assert "binary tools" in section.to_html()


def test_rules_section(votes):
    _, _, t = votes
    section = rules_section("<b>forest</b>", t, n_matrices=300, seed=1)
    assert section.frame.attrs["share_not_worse"] == 1.0
    page = section.to_html()
    assert "&lt;b&gt;forest&lt;/b&gt;" in page and "<b>forest" not in page
    assert "for 100% of them" in page


def test_toolkit_doc_states_the_number_of_matrices_the_report_draws():
    """docs/toolkit.md section 7 gives RULES_MATRICES for every class count (it once said
    1,000 for three or more classes after the report had moved to 10,000 for all)."""
    from pathlib import Path

    from yieldwise.report.html import RULES_MATRICES, RULES_SEED

    text = (Path(__file__).resolve().parents[1] / "docs" / "toolkit.md").read_text()
    section = " ".join(text.split("## 7.")[1].split())  # line breaks as spaces
    assert (
        f"over {RULES_MATRICES:,} matrices drawn uniformly with seed {RULES_SEED}, "
        "for any number of classes" in section
    )
    assert "over 1,000 for more" not in section


def test_matrices_with_more_decisions_get_a_note_not_a_point(votes):
    outputs, truth, t = votes
    ask = UtilityMatrix([[1, 0], [0, 1], [0.7, 0.7]], decisions=["no", "yes", "ask"],
                        classes=LABELS)  # fmt: skip
    section = classifier_toolkit("f", outputs, truth, t, {**MATRICES, "<ask>": ask})
    assert list(section.best_points.index) == list(MATRICES)
    best = [line for line in section.roc_figure.axes[0].lines if line.get_gid() == "best_point"]
    assert len(best) == len(MATRICES)
    page = section.to_html(level=4)
    assert page.startswith("<h4>f</h4>")
    assert "&lt;ask&gt; have more than two decisions" in page and "<ask>" not in page


# ----------------------------------------------------------------- in the report
# The batch report (yieldwise.report) on stored draws: its fit step replaced by
# transducers whose posterior draws are given, so that no Stan fit runs here.
EVIL = "<script>alert(1)</script> & $\\foo$"
POSITIVE = "eight"

REPORT = f"""
title = "Digits on stored draws"
[data]
calibration = "calibration.csv"
class_col = "label"
[[classifier]]
name = "forest"
outputs = ["forest_votes"]
transform = "logit"
resolution = 0.005
[[classifier]]
name = '{EVIL}'
outputs = ["net_logit_eight"]
transform = "identity"
[[utility]]
name = "screening"
decisions = ["dismiss", "treat"]
classes = ["other", "eight"]
values = [[0, -10], [-1, 5]]
[[utility]]
name = "accuracy"
decisions = ["dismiss", "treat"]
classes = ["other", "eight"]
values = [[1, 0], [0, 1]]
[sampler]
chains = 2
draws = 10
seed = 3
"""

THREE = """
title = "Three digits on stored draws"
[data]
dataset = "digits_three"
class_col = "label"
[[classifier]]
name = "network"
outputs = ["p_three", "p_five", "p_eight"]
[[utility]]
name = "costly eights"
decisions = ["three", "five", "eight", "ask"]
classes = ["three", "five", "eight"]
values = [[1, 0, -4], [0, 1, -4], [0, 0, 1], [0.5, 0.5, 0.5]]
[sampler]
chains = 2
draws = 10
seed = 5
"""


def _stored_transducer(outputs, truth, labels, transform, resolution, rng):
    """One component per class at the class's moments on the model scale, 2 x 10 draws."""
    y = outputs.to_numpy(float)
    if transform == "logit":
        y = np.log(np.clip(y, 0.0025, 0.9975) / (1 - np.clip(y, 0.0025, 0.9975)))
    elif transform == "simplex":  # log-ratios to the last column
        y = np.log(y[:, :-1]) - np.log(y[:, -1:])
    k, s = len(labels), 20
    index = np.array([labels.index(c) for c in truth])
    mu = np.array([y[index == c].mean(axis=0) for c in range(k)])
    sd = np.array([y[index == c].std(axis=0) for c in range(k)])
    freq = np.bincount(index, minlength=k) / len(index)
    draws = {
        "w": rng.dirichlet(freq * 300 + 1, size=s),
        "alpha": np.tile(0.9 * np.eye(k) + 0.1 / k, (s, 1, 1)),
        "mu": mu + rng.normal(0, 0.1, (s, *mu.shape)),
        "sigma": sd * np.exp(rng.normal(0, 0.05, (s, *sd.shape))),
    }
    draws = {name: v.reshape(2, s // 2, *v.shape[1:]) for name, v in draws.items()}
    return Transducer.from_draws(draws, outputs, truth, tuple(labels),
                                  output_transform=transform, resolution=resolution)  # fmt: skip


def _stored_fit_all(config, tables, sampler, scheduler, say, progress):
    """Stands in for yieldwise.report.job.fit_all: same result shape, given draws."""
    rng = np.random.default_rng(sampler["seed"])
    labels = [str(c) for c in next(iter(config.utilities.values())).classes]
    fits = {}
    for source in config.data:
        frame = tables[source.name]
        truth = frame[source.class_col].astype(str).to_numpy()
        fits[source.name] = {}
        for name, columns in config.classifiers.items():
            options = config.options[name]
            transform = options["output_transform"]
            if transform == "auto":
                transform = "simplex" if len(columns) > 1 else "identity"
            fits[source.name][name] = _stored_transducer(
                frame[columns], truth, labels, transform, options["resolution"], rng
            )
    return fits


def _run_stored_report(folder, config_text, csv=True):
    import warnings

    from yieldwise.datasets import load_digits_binary
    from yieldwise.report import job, load_config, run_report

    if csv:
        load_digits_binary().iloc[::3].to_csv(folder / "calibration.csv", index=False)
    (folder / "config.toml").write_text(config_text)
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patch.setattr(job, "fit_all", _stored_fit_all)
        return run_report(load_config(folder / "config.toml"), folder / "out")


def _tables_after(page, heading):
    """The cells of every table between ``heading`` and the next heading of its level."""
    from html.parser import HTMLParser

    start = page.index(heading)
    level = heading[:4]  # "<h3>"
    end = page.find(level, start + len(heading))
    fragment = page[start : end if end >= 0 else len(page)]

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.tables[-1].append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.tables[-1][-1].append(self.cell)
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    parser = Tables()
    parser.feed(fragment)
    frames = []
    for rows in parser.tables:
        header = rows[0][1:]
        body = {r[0]: dict(zip(header, r[1:], strict=True)) for r in rows[2:]}
        frames.append(body)
    return fragment, frames


@pytest.fixture(scope="module")
def stored_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stored_report")
    return _run_stored_report(folder, REPORT)


def test_report_files_and_manifest_with_the_toolkit(stored_report):
    import hashlib
    import json
    import tomllib

    from yieldwise.report import transducer_file_name

    out = stored_report
    names = {p.name for p in out.iterdir()}
    assert names == {"report.html", "summary.csv", "superiority.csv", "draws.nc",
                     "config.lock.toml", "transducer_forest.nc", transducer_file_name(EVIL),
                     "yieldwise-manifest.json"}  # fmt: skip
    manifest = json.loads((out / "yieldwise-manifest.json").read_text())
    assert set(manifest["files"]) == names - {"yieldwise-manifest.json"}
    for name, entry in manifest["files"].items():  # written after the toolkit's page
        data = (out / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    lock = tomllib.loads((out / "config.lock.toml").read_text())
    assert lock["toolkit"] == {"bins": 10, "rules_matrices": 10_000, "rules_prior": "uniform",
                               "rules_seed": 0}  # fmt: skip
    assert not list(out.parent.glob(".*"))  # no partial folder, no lock left


def test_report_escapes_names_and_states_the_data(stored_report):
    page = (stored_report / "report.html").read_text()
    assert "<script" not in page and "alert(1)</" not in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; &amp; $\\foo$"
    # its toolkit section, its ROC and reliability images, its rules section
    assert f"<h3>{escaped}</h3><p>The ROC curve" in page
    assert f"alt='ROC hull of {escaped}'" in page and f"alt='reliability of {escaped}'" in page
    assert f"alt='standard vs augmented, {escaped}'" in page
    for section in ("toolkit", "rules"):
        assert f"id='{section}'" in page and f"href='#{section}'" in page
    toolkit = page[page.index("id='toolkit'") : page.index("id='rules'")]
    assert "Which data: in-sample." in toolkit and "no held-out items" in toolkit
    assert "not counts on the calibration items" in page[page.index("id='rules'") :]
    # 2 transducers + 2 comparisons + 1 win map + 2 x (ROC, reliability) + 2 rules
    assert page.count("data:image/png;base64,") == 11


def _brute_force_best(score, positive, utility):
    """The best threshold by trying every one: decide positive when score >= t."""
    u = utility.values  # rows: decisions (negative, positive); columns: classes
    thresholds = np.r_[np.inf, np.unique(score)[::-1]]  # from the fewest positives
    best = None
    for t in thresholds:
        decision = (score >= t).astype(int)
        value = u[decision, positive.astype(int)].mean()
        if best is None or value > best[0] + 1e-12:  # ties: the higher threshold
            fpr = (decision[~positive] == 1).mean()
            tpr = (decision[positive] == 1).mean()
            best = (value, t, fpr, tpr)
    return best


def _by_hand_brier(p, o, bins=10):
    """Murphy's terms with equal-width bins (the last closed), and refinement by PAV."""
    from sklearn.isotonic import IsotonicRegression

    index = np.minimum((p * bins).astype(int), bins - 1)
    n = len(p)
    rel = res = 0.0
    for k in np.unique(index):
        inside = index == k
        rel += inside.sum() * (p[inside].mean() - o[inside].mean()) ** 2 / n
        res += inside.sum() * (o[inside].mean() - o.mean()) ** 2 / n
    brier = np.mean((p - o) ** 2)
    iso = IsotonicRegression(out_of_bounds="clip").fit_transform(p, o)
    refinement = np.mean((iso - o) ** 2)
    return {"Brier": brier, "reliability": rel, "resolution": res,
            "uncertainty": o.mean() * (1 - o.mean()), "calibration loss": brier - refinement,
            "refinement loss": refinement}  # fmt: skip


def test_report_toolkit_numbers_are_those_computed_by_hand(stored_report):
    from yieldwise.datasets import load_digits_binary
    from yieldwise.report import load_config

    page = (stored_report / "report.html").read_text()
    config = load_config(stored_report.parent / "config.toml")
    frame = load_digits_binary().iloc[::3]
    truth = frame["label"].astype(str).to_numpy()
    positive = truth == POSITIVE
    escaped = {"forest": "forest", EVIL: "&lt;script&gt;alert(1)&lt;/script&gt; &amp; $\\foo$"}
    toolkit = page[page.index("id='toolkit'") : page.index("id='rules'")]
    for name, columns in config.classifiers.items():
        _, (best, brier) = _tables_after(toolkit, f"<h3>{escaped[name]}</h3>")
        score = frame[columns[0]].to_numpy(float)  # one output: the ROC score itself
        for matrix, u in config.utilities.items():
            value, threshold, fpr, tpr = _brute_force_best(score, positive, u)
            row = best[matrix]
            assert row["utility_yield"] == f"{value:.4g}"
            assert row["threshold"] == f"{threshold:.4g}"
            assert (row["fpr"], row["tpr"]) == (f"{fpr:.4g}", f"{tpr:.4g}")
            # iso-utility slope (theory 1.4), B the share of eights
            b = positive.mean()
            v = u.values
            slope = (v[0, 0] - v[1, 0]) * (1 - b) / ((v[1, 1] - v[0, 1]) * b)
            assert row["slope"] == f"{slope:.4g}"
        # the transducer as saved by the report (an exact round trip), its probabilities
        from yieldwise.report import transducer_file_name

        t = Transducer.load(stored_report / transducer_file_name(name))
        p = t.predict_proba(frame[columns])[:, list(t.classes_).index(POSITIVE)]
        expected = _by_hand_brier(p, positive.astype(float))
        for term, number in expected.items():
            assert float(brier["transducer"][term]) == pytest.approx(number, rel=6e-4, abs=1e-9)
        d = brier_decomposition(p, truth, positive=POSITIVE, bins=10)
        for term, number in (("within-bin variance", d.within_bin_variance),
                             ("within-bin covariance", d.within_bin_covariance)):  # fmt: skip
            assert brier["transducer"][term] == f"{number:.4g}"
        # votes lie in [0, 1] and are also scored as probabilities; logits are not
        assert ("output read as a probability" in brier) == (name == "forest")


def test_report_rules_section_is_the_stated_comparison(stored_report):
    """The page's summary line is that of 10,000 uniform matrices with seed 0."""
    from yieldwise.report import transducer_file_name
    from yieldwise.rules import standard_vs_augmented

    page = (stored_report / "report.html").read_text()
    rules = page[page.index("id='rules'") : page.index("id='diagnostics'")]
    assert "For 10,000 utility matrices drawn at random" in rules
    t = Transducer.load(stored_report / transducer_file_name("forest"))
    frame = standard_vs_augmented(t, n_matrices=10_000, seed=0, threshold=0.5)
    assert frame.attrs["prior"] == "uniform" and len(frame) == 10_000
    section = rules[rules.index("<h3>forest</h3>") :]
    assert f"for {frame.attrs['share_not_worse']:.0%} of them" in section
    assert f"the mean gain in rescaled long-run utility is {frame['gain'].mean():.3g}" in section
    # the augmented rule maximises expected utility matrix by matrix (theory 2, 4)
    assert (frame["gain"] >= -frame["integration_error"] - 1e-12).all()
    with pytest.raises(ValueError, match="n_matrices must be a positive integer, found 0"):
        standard_vs_augmented(t, n_matrices=0)  # it said "n must be"


def test_three_class_report_says_why_there_is_no_roc(tmp_path):
    import tomllib

    from yieldwise.datasets import load_digits_three

    out = _run_stored_report(tmp_path, THREE, csv=False)
    page = (out / "report.html").read_text()
    toolkit = page[page.index("id='toolkit'") : page.index("id='rules'")]
    assert "3 classes: the ROC hull and the reliability diagram are binary tools" in toolkit
    assert "ROC hull of" not in toolkit and "reliability of" not in toolkit
    # the multi-class Brier terms: summed over the classes, one against the rest, by hand
    frame = load_digits_three()
    truth = frame["label"].astype(str).to_numpy()
    t = Transducer.load(out / "transducer_network.nc")
    proba = t.predict_proba(frame[["p_three", "p_five", "p_eight"]])
    per_class = [_by_hand_brier(proba[:, k], (truth == c).astype(float))
                 for k, c in enumerate(t.classes_)]  # fmt: skip
    _, (brier,) = _tables_after(toolkit, "<h3>network</h3>")
    for term in ("Brier", "reliability", "resolution", "uncertainty", "refinement loss"):
        total = sum(part[term] for part in per_class)
        assert float(brier["transducer"][term]) == pytest.approx(total, rel=6e-4)
    rules = page[page.index("id='rules'") : page.index("id='diagnostics'")]
    assert "For 10,000 utility matrices drawn at random" in rules
    lock = tomllib.loads((out / "config.lock.toml").read_text())
    assert lock["toolkit"]["rules_matrices"] == 10_000


def test_several_data_sets_each_get_their_own_toolkit(tmp_path):
    """[[data]] tables: one toolkit and one rules section per data set, each on its own
    calibration items (h4 under the data set's heading)."""
    from yieldwise.datasets import load_digits_binary

    frame = load_digits_binary()
    frame.iloc[0::6].to_csv(tmp_path / "north.csv", index=False)
    frame.iloc[3::6].to_csv(tmp_path / "south.csv", index=False)
    one = REPORT[: REPORT.index("[[classifier]]\nname = '")] + REPORT[REPORT.index("[[utility]]") :]
    several = one.replace(
        '[data]\ncalibration = "calibration.csv"\nclass_col = "label"',
        '[[data]]\nname = "north"\ncalibration = "north.csv"\nclass_col = "label"\n'
        '[[data]]\nname = "south"\ncalibration = "south.csv"\nclass_col = "label"',
    )
    out = _run_stored_report(tmp_path, several, csv=False)
    page = (out / "report.html").read_text()
    toolkit = page[page.index("id='toolkit'") : page.index("id='rules'")]
    rules = page[page.index("id='rules'") : page.index("id='diagnostics'")]
    for dataset, items in (("north", frame.iloc[0::6]), ("south", frame.iloc[3::6])):
        heading = f"<h3 class='dataset'>Data set {dataset}</h3><h4>forest</h4>"
        assert heading in toolkit and heading in rules
        part = toolkit[toolkit.index(heading) :]
        _, (_, brier) = _tables_after(part, "<h4>forest</h4>")
        t = Transducer.load(out / f"transducer_{dataset}__forest.nc")
        p = t.predict_proba(items[["forest_votes"]])[:, 1]
        expected = _by_hand_brier(p, (items["label"].astype(str) == POSITIVE).to_numpy(float))
        assert float(brier["transducer"]["Brier"]) == pytest.approx(expected["Brier"], rel=6e-4)


def test_stored_report_opens_in_a_browser(stored_report, browser):
    """Every image of the page (the toolkit's included) decodes, no console error, no
    script, and the hostile name is shown as text."""
    from selenium.webdriver.common.by import By

    browser.get((stored_report / "report.html").resolve().as_uri())
    browser.get_log("browser")  # clear entries of earlier pages
    browser.refresh()
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.complete, i.naturalWidth])"
    )
    assert len(images) == 11 and all(done and width > 100 for done, width in images), images
    for section in ("toolkit", "rules"):
        assert browser.find_element(By.ID, section).is_displayed()
    assert browser.execute_script("return document.scripts.length") == 0
    assert EVIL in browser.find_element(By.TAG_NAME, "body").text


# ------------------------------------------------- names, data sets, the lock, the terminal
# (audit, 2026-12-06) on stored draws: whatever the names, the report's tables keep them
# apart, the lock states what each data set resolved, the terminal says which data set.
def _several(config_text, names=("north", "south")):
    """``config_text`` with its [data] table replaced by one [[data]] per name (the
    files ``<name>.csv``)."""
    tables = "".join(f'[[data]]\nname = "{n}"\ncalibration = "{n}.csv"\nclass_col = "label"\n'
                     for n in names)  # fmt: skip
    return config_text.replace(
        '[data]\ncalibration = "calibration.csv"\nclass_col = "label"\n', tables
    )


def _two_sites(folder, names=("north", "south")):
    from yieldwise.datasets import load_digits_binary

    frame = load_digits_binary()
    for name, part in zip(names, (frame.iloc[0::6], frame.iloc[3::6]), strict=True):
        part.to_csv(folder / f"{name}.csv", index=False)


def test_a_classifier_named_admissible_keeps_its_metrics(tmp_path):
    """The metrics table's columns are the classifiers alone; the admissibility is part of
    each row's index, so a classifier named "admissible" keeps its column (its metrics
    were replaced by the admissibility flags)."""
    import dataclasses
    import re

    from yieldwise.report import load_config
    from yieldwise.report.html import metric_table, people

    config_text = REPORT.replace(f"name = '{EVIL}'", 'name = "admissible"')
    out = _run_stored_report(tmp_path, config_text)
    config = load_config(tmp_path / "config.toml")
    fits = {n: Transducer.load(out / f"transducer_{n}.nc") for n in config.classifiers}
    table, _ = metric_table(config, config.table(), config.data[0], fits, config.utilities)
    # the same classifier under another name has the very same metrics
    renamed = dataclasses.replace(
        config, classifiers={"forest": ["forest_votes"], "net": ["net_logit_eight"]},
        options={"forest": config.options["forest"], "net": config.options["admissible"]},
    )  # fmt: skip
    other, _ = metric_table(renamed, config.table(), config.data[0],
                            {"forest": fits["forest"], "net": fits["admissible"]},
                            config.utilities)  # fmt: skip
    np.testing.assert_array_equal(table["admissible"].to_numpy(), other["net"].to_numpy())
    assert list(table.index) == list(other.index)
    assert list(table.columns) == ["forest", "admissible"]
    assert list(table.index.names) == ["metric", "admissible"]
    page = (out / "report.html").read_text()
    metrics = page[page.index("<h2 id='metrics'>") : page.index("id='win-map'")]
    accuracy = table.loc[("accuracy", True)]
    row = (rf"<th>accuracy</th>\s*<th>True</th>\s*<td>{re.escape(people(accuracy['forest'], 4))}"
           rf"</td>\s*<td>{re.escape(people(accuracy['admissible'], 4))}</td>")  # fmt: skip
    assert re.search(row, metrics), metrics


def test_a_data_set_named_classifier_gets_its_column_across_data_sets(tmp_path):
    """Each classifier across data sets: the classifiers are the table's index, so a data
    set may be called "classifier" (the report stopped: "cannot insert classifier")."""
    import re

    from yieldwise.report.html import people

    sites = ("classifier", "site")
    _two_sites(tmp_path, sites)
    out = _run_stored_report(tmp_path, _several(REPORT, sites), csv=False)
    page = (out / "report.html").read_text()
    across = page[page.index("id='across-datasets'") : page.index("id='transducers'")]
    summary = pd.read_csv(out / "summary.csv")
    for matrix in ("screening", "accuracy"):
        table = across[across.index(f"Utility matrix {matrix}</h3>") :]
        table = table[: table.index("</table>")]
        assert re.search(r"<th>data set</th>\s*<th>classifier</th>\s*<th>site</th>", table)
        means = summary[(summary["matrix"] == matrix) & (summary["classifier"] == "forest")]
        shown = {d: people(m) for d, m in zip(means["dataset"], means["mean"], strict=True)}
        assert re.search(rf"<th>forest</th>\s*<td>{re.escape(shown['classifier'])} \(.*?\)</td>"
                         rf"\s*<td>{re.escape(shown['site'])} \(", table), table  # fmt: skip


def test_the_lock_records_each_data_sets_resolved_transform(tmp_path):
    """With several data sets, "auto" resolves on each one's outputs (votes k/200 on one
    site, a continuous score on the other): the lock records each data set's, as each
    saved transducer has it (it recorded the first data set's for every one)."""
    import tomllib

    config_text = _several(REPORT.replace("resolution = 0.005\n", ""))
    _two_sites(tmp_path)
    south = pd.read_csv(tmp_path / "south.csv")
    jitter = np.random.default_rng(0).uniform(-0.002, 0.002, len(south))
    south["forest_votes"] = np.clip(south["forest_votes"] + jitter, 1e-4, 1 - 1e-4)
    south.to_csv(tmp_path / "south.csv", index=False)
    out = _run_stored_report(tmp_path, config_text, csv=False)
    lock = tomllib.loads((out / "config.lock.toml").read_text())
    forest = next(c for c in lock["classifier"] if c["name"] == "forest")
    assert forest["resolution"] == {"north": [0.005], "south": ["continuous"]}
    assert forest["transform"] == {"north": ["logit"], "south": ["logit"]}
    for entry in lock["classifier"]:
        for site in ("north", "south"):
            from yieldwise.report import transducer_file_name

            saved = Transducer.load(out / transducer_file_name(entry["name"], site)).transform_
            assert entry["transform"][site] == list(saved.kind)
            assert entry["resolution"][site] == [
                "continuous" if r is None else r for r in saved.resolution
            ]


def test_the_terminal_summary_names_the_data_sets_and_keeps_names_as_text(
    tmp_path, monkeypatch, capsys
):
    """`yieldwise report` prints the summary with a data set column when there are several
    (its rows did not say which data set they were of), and the names as given: a
    classifier named NA or None is no missing value, 001 no number."""
    import warnings

    from yieldwise.cli import main
    from yieldwise.report import job

    names = ("NA", "None", "001")
    config_text = _several(REPORT.replace("name = \"forest\"", 'name = "NA"')
                           .replace(f"name = '{EVIL}'", 'name = "None"')
                           .replace("[[utility]]", '[[classifier]]\nname = "001"\n'
                                    'outputs = ["knn_votes"]\n[[utility]]', 1),
                           ("hospital A", "hospital B"))  # fmt: skip
    _two_sites(tmp_path, ("hospital A", "hospital B"))
    (tmp_path / "config.toml").write_text(config_text)
    monkeypatch.setattr(job, "fit_all", _stored_fit_all)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out"),
                     "--quiet"]) == 0  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(printed) if "long-run utility per item" in line)
    header, *rows = printed[start + 1 : start + 1 + 1 + 2 * 2 * 3]
    assert header.split() == ["dataset", "matrix", "classifier", "mean", "sd", "prob_best"]
    found = [(r[:10].strip(), r.split()[-5], r.split()[-4]) for r in rows]
    expected = [(d, m, n) for d in ("hospital A", "hospital B")
                for m in ("screening", "accuracy") for n in names]  # fmt: skip
    assert sorted(found) == sorted(expected)
