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
    t = Transducer._from_draws(
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


def test_two_outputs_use_the_transducer_probability_as_score():
    rng = np.random.default_rng(1)
    outputs = pd.DataFrame(rng.normal(size=(80, 2)), columns=["a", "b"])
    truth = np.array(LABELS)[(outputs["b"] > outputs["a"]).astype(int)]
    mu = np.array([[[[-1.0, 1.0], [1.0, -1.0]], [[-0.8, 0.9], [1.1, -1.2]]]])
    t = Transducer._from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": mu, "sigma": np.ones((1, 2, 2, 2))},
        outputs, truth, LABELS, output_transform="identity", resolution=None,
    )  # fmt: skip
    section = classifier_toolkit("net", outputs, truth, t, MATRICES)
    assert "probability of 'yes'" in section.score_note
    expected = convex_hull(t.predict_proba(outputs)[:, 1], truth, positive="yes")
    assert section.hull.auc == pytest.approx(expected.auc)
    assert "output read as a probability" not in section.brier.index


def test_three_classes_get_the_summed_decomposition_and_a_note():
    rng = np.random.default_rng(2)
    labels = ("a", "b", "c")
    outputs = pd.DataFrame(rng.normal(size=(60, 3)), columns=["l0", "l1", "l2"])
    truth = np.array(labels)[outputs.to_numpy().argmax(axis=1)]
    t = Transducer._from_draws(
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
