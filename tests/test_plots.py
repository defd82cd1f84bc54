"""Plots: returned Axes and their content checked against direct computations."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes

import yieldwise
from yieldwise import ConfusionMatrix, UtilityMatrix, metrics, plots
from yieldwise.roc import best_operating_point, compare


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


# ------------------------------------------------------------------ utility space
CLASSES = ["ill", "healthy"]
CM_A = ConfusionMatrix([[40, 5], [10, 45]], decisions=CLASSES, classes=CLASSES)
CM_B = ConfusionMatrix([[48, 15], [2, 35]], decisions=CLASSES, classes=CLASSES)


def test_utility_space_image_agrees_with_direct_yields():
    resolution = 41
    ax = plots.utility_space(CM_A, CM_B, names=("cautious", "eager"), resolution=resolution)
    assert isinstance(ax, Axes)
    image = ax.images[0].get_array()
    assert image.shape == (resolution, resolution)
    grid = np.linspace(-1, 1, resolution)
    checked = 0
    rng = np.random.default_rng(3)
    for i, j in rng.integers(0, resolution, size=(200, 2)):
        x, y = grid[i], grid[j]
        inside = yieldwise.utility.in_chart_domain(x, y)
        assert bool(np.ma.getmaskarray(image)[j, i]) == (not inside)
        if not inside:
            continue
        # class 0 of the chart is CM_A.classes[0] = "ill"; decisions named by class
        u = UtilityMatrix.from_xy(x, y, decisions=CLASSES, classes=CLASSES)
        ya, yb = yieldwise.utility_yield(CM_A, u), yieldwise.utility_yield(CM_B, u)
        expected = 2 if abs(yb - ya) <= 1e-12 else (1 if yb > ya else 0)
        assert image[j, i] == expected, (x, y, ya, yb)
        checked += 1
    assert checked > 100
    # corners excluded, identity admitted and marked
    assert np.ma.getmaskarray(image)[-1, 0] and np.ma.getmaskarray(image)[0, -1]
    middle = resolution // 2
    assert not np.ma.getmaskarray(image)[middle, middle]
    # at (0, 0) the matrix is the identity: accuracy 85/100 vs 83/100, cautious (A) wins
    assert image[middle, middle] == 0
    (marker,) = [line for line in ax.lines if line.get_marker() == "o"]
    assert (marker.get_xdata()[0], marker.get_ydata()[0]) == (0.0, 0.0)
    texts = _legend_texts(ax)
    assert texts[0].startswith("cautious yields more")
    assert texts[1].startswith("eager yields more")
    assert "not admitted (a wrong decision worth more)" in texts
    assert "(0, 0): identity matrix (accuracy)" in texts
    assert ax.get_xlabel().startswith("x") and ax.get_ylabel().startswith("y")


def test_utility_space_labels_are_matched_not_positional():
    # B given with rows and columns in the other order: the same chart
    reordered = CM_B.reindex(decisions=CLASSES[::-1], classes=CLASSES[::-1])
    first = plots.utility_space(CM_A, CM_B, resolution=31).images[0].get_array()
    second = plots.utility_space(CM_A, reordered, resolution=31).images[0].get_array()
    np.testing.assert_array_equal(np.ma.getmaskarray(first), np.ma.getmaskarray(second))
    np.testing.assert_array_equal(first.compressed(), second.compressed())


def test_utility_space_ties_and_odd_names():
    ax = plots.utility_space(CM_A, CM_A, names=("$a", "_b"), resolution=11)
    image = ax.images[0].get_array()
    assert set(image.compressed().tolist()) == {2.0}
    texts = _legend_texts(ax)
    assert texts[:3] == [
        "$a yields more (0% of the domain)",
        "_b yields more (0% of the domain)",
        "tie (100% of the domain)",
    ]
    ax.figure.canvas.draw()  # names with "$" and "_" render verbatim, no mathtext error


def test_utility_space_errors():
    three = ConfusionMatrix(np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"confusion_a must be a binary \(2x2\)"):
        plots.utility_space(three, CM_B)
    with pytest.raises(
        TypeError, match="confusion_b: confusion must be a ConfusionMatrix, found list"
    ):
        plots.utility_space(CM_A, [[1, 2], [3, 4]])
    other = ConfusionMatrix([[1, 2], [3, 4]], decisions=["a", "b"], classes=["a", "b"])
    with pytest.raises(ValueError, match="must have the same classes"):
        plots.utility_space(CM_A, other)
    odd = ConfusionMatrix([[1, 2], [3, 4]], decisions=["yes", "no"], classes=CLASSES)
    with pytest.raises(ValueError, match="one decision per class"):
        plots.utility_space(CM_A, odd)
    with pytest.raises(ValueError, match="names must hold two names"):
        plots.utility_space(CM_A, CM_B, names=("only",))
    with pytest.raises(ValueError, match="resolution must be at least 2"):
        plots.utility_space(CM_A, CM_B, resolution=1)


# ---------------------------------------------------------------- metric vs yield
def _random_confusions(n, seed):
    rng = np.random.default_rng(seed)
    return {f"clf{k}": ConfusionMatrix(rng.integers(1, 60, size=(2, 2))) for k in range(n)}


def _wrong_pairs(confusions, utility, metric, **kw):
    names = list(confusions)
    wrong = set()
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            ca, cb = confusions[names[a]], confusions[names[b]]
            dm = metric(cb, **kw) - metric(ca, **kw)
            dy = yieldwise.utility_yield(cb, utility) - yieldwise.utility_yield(ca, utility)
            if np.sign(dm) != np.sign(dy):
                wrong.add((a, b))
    return wrong


def _red_segments(ax):
    (collection,) = [c for c in ax.collections if c.get_gid() == "wrong_pairs"]
    return collection.get_segments()


@pytest.mark.parametrize("seed", range(4))
def test_metric_vs_yield_counts_wrong_pairs(seed):
    confusions = _random_confusions(8, seed)
    utility = UtilityMatrix([[1.0, -0.5], [-2.0, 0.8]])
    ax = plots.metric_vs_yield(confusions, utility, metrics.f1)
    assert isinstance(ax, Axes)
    wrong = _wrong_pairs(confusions, utility, metrics.f1)
    segments = _red_segments(ax)
    assert len(segments) == len(wrong)
    assert ax.get_title() == f"f1: {len(wrong)} of 28 pairs ranked wrongly"
    # each red line joins the (yield, f1) points of a wrongly ranked pair
    cms = list(confusions.values())
    points = [(yieldwise.utility_yield(c, utility), metrics.f1(c)) for c in cms]
    expected = sorted(tuple(sorted([points[a], points[b]])) for a, b in wrong)
    found = sorted(tuple(sorted(map(tuple, s))) for s in segments)
    np.testing.assert_allclose(np.array(found), np.array(expected))
    # scatter offsets: x = yield, y = metric
    np.testing.assert_allclose(ax.collections[-1].get_offsets(), np.array(points))
    assert [t.get_text() for t in ax.texts] == list(confusions)
    assert ax.get_xlabel() == "utility yield (true)"
    assert ax.get_ylabel() == "f1"


def test_metric_vs_yield_by_name_sequence_and_kwargs():
    confusions = list(_random_confusions(6, 10).values())
    utility = UtilityMatrix([[1.0, 0.0], [-3.0, 0.5]])
    _, ax = plt.subplots()
    out = plots.metric_vs_yield(confusions, utility, metrics.fbeta, ax=ax, beta=2, positive=1)
    assert out is ax
    wrong = _wrong_pairs(dict(enumerate(confusions)), utility, metrics.fbeta, beta=2, positive=1)
    assert len(_red_segments(ax)) == len(wrong)
    assert [t.get_text() for t in ax.texts] == [str(k) for k in range(6)]
    ax = plots.metric_vs_yield(confusions, utility, "accuracy")
    wrong = _wrong_pairs(dict(enumerate(confusions)), utility, metrics.accuracy)
    assert ax.get_title() == f"accuracy: {len(wrong)} of 15 pairs ranked wrongly"


def test_metric_vs_yield_admissible_metric_has_no_wrong_pairs():
    # accuracy is the yield of the identity matrix: it never ranks wrongly under it
    confusions = _random_confusions(7, 5)
    ax = plots.metric_vs_yield(confusions, UtilityMatrix(np.eye(2)), "accuracy")
    assert len(_red_segments(ax)) == 0
    assert ax.get_title() == "accuracy: 0 of 21 pairs ranked wrongly"
    assert _legend_texts(ax) == ["classifier"]


def test_metric_vs_yield_errors():
    utility = UtilityMatrix(np.eye(2))
    with pytest.raises(ValueError, match="at least 2 classifiers"):
        plots.metric_vs_yield({"a": CM_A}, UtilityMatrix(np.eye(2), classes=CLASSES), "f1")
    with pytest.raises(ValueError, match="'auc' is not a confusion-matrix metric"):
        plots.metric_vs_yield(_random_confusions(2, 0), utility, "auc")
    with pytest.raises(ValueError, match="computed from scores"):
        plots.metric_vs_yield(_random_confusions(2, 0), utility, metrics.roc_auc)
    with pytest.raises(TypeError, match=r"confusions\['x'\] must be a ConfusionMatrix"):
        plots.metric_vs_yield({"x": 1, "y": CM_A}, utility, "f1")
    no_positive = ConfusionMatrix([[0, 0], [0, 10]])
    with pytest.raises(yieldwise.UndefinedMetricError, match="classifier '1'"):
        plots.metric_vs_yield([ConfusionMatrix([[1, 2], [3, 4]]), no_positive], utility, "f1")


# -------------------------------------------------------------------------- audit
def _audit_frame():
    return pd.DataFrame(
        {
            "metric": ["f1", "matthews", "utility_yield", "utility_yield", "utility_yield"],
            "error_sd": [np.nan, np.nan, 0.2, 0.0, 0.1],
            "fraction_wrong": [0.21, 0.17, 0.08, 0.0, 0.03],
            "mc_se": [0.01, 0.02, 0.006, 0.0, 0.004],
        }
    )


def test_audit_content():
    ax = plots.audit(_audit_frame())
    assert isinstance(ax, Axes)
    assert _legend_texts(ax) == ["utility_yield", "f1", "matthews"]
    # the utility_yield rows: a line over sorted error sd with +-2 mc_se bars
    container = ax.containers[0]
    data_line = container.lines[0]
    np.testing.assert_allclose(data_line.get_xdata(), [0.0, 0.1, 0.2])
    np.testing.assert_allclose(data_line.get_ydata(), [0.0, 0.03, 0.08])
    bars = container.lines[2][0].get_segments()
    np.testing.assert_allclose(
        [(s[0][1], s[1][1]) for s in bars],
        [(0.0, 0.0), (0.03 - 0.008, 0.03 + 0.008), (0.08 - 0.012, 0.08 + 0.012)],
    )
    # each metric: a horizontal line at its fraction with a +-2 mc_se band
    horizontal = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert [line.get_ydata()[0] for line in horizontal] == [0.21, 0.17]
    bands = sorted((p.get_y(), p.get_y() + p.get_height()) for p in ax.patches)
    np.testing.assert_allclose(bands, [(0.13, 0.21), (0.19, 0.23)])
    assert ax.get_ylim()[0] == 0


def test_audit_accepts_metric_index_and_rejects_bad_frames():
    ax = plots.audit(_audit_frame().set_index("metric"))
    assert _legend_texts(ax) == ["utility_yield", "f1", "matthews"]
    with pytest.raises(ValueError, match=r"missing \['mc_se'\]"):
        plots.audit(_audit_frame().drop(columns="mc_se"))
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        plots.audit({"metric": ["f1"]})
    doubled = pd.concat([_audit_frame(), _audit_frame().iloc[:1]])
    with pytest.raises(ValueError, match="'f1' has 2 rows with error_sd NaN"):
        plots.audit(doubled)
    mixed = _audit_frame()
    mixed.loc[2, "error_sd"] = np.nan
    with pytest.raises(ValueError, match="'utility_yield' mixes NaN and numeric"):
        plots.audit(mixed)
    with pytest.raises(ValueError, match=r"frame\['mc_se'\] must be finite"):
        plots.audit(_audit_frame().assign(mc_se=[0.1, np.nan, 0, 0, 0]))


# ---------------------------------------------------------------------------- roc
def _crossing():
    items = [f"p{k}" for k in range(6)] + [f"n{k}" for k in range(6)]
    truth = ["ill" if i[0] == "p" else "healthy" for i in items]
    rankings = {
        "steady": ["p0", "p1", "p2", "p3", "n0", "n1", "n2", "n3", "n4", "p4", "p5", "n5"],
        "_broad $": ["n0", "p0", "p1", "p2", "p3", "p4", "n1", "p5", "n2", "n3", "n4", "n5"],
    }
    scores = {n: np.array([12.0 - o.index(i) for i in items]) for n, o in rankings.items()}
    u = UtilityMatrix([[1, -2], [0, 0]], decisions=["treat", "wait"], classes=["ill", "healthy"])
    return scores, truth, u


def test_roc_plot_content():
    scores, truth, u = _crossing()
    ax = plots.roc(scores, truth, u, positive="ill")
    assert isinstance(ax, Axes)
    table = compare(scores, truth, u, positive="ill")
    expected_labels = [
        f"{name}: best yield {table.loc[name, 'utility_yield']:.4g}, "
        f"AUC {table.loc[name, 'auc']:.3f}"
        for name in scores
    ]
    assert _legend_texts(ax) == expected_labels
    assert expected_labels[1].startswith("_broad $: best yield")
    # theory 1.4 slope: (U[n,n] - U[p,n]) (1 - B) / ((U[p,p] - U[n,p]) B) = 2 * 0.5 / (1 * 0.5)
    best = [line for line in ax.lines if line.get_gid() == "best_point"]
    iso = [line for line in ax.lines if line.get_gid() == "iso_utility"]
    assert len(best) == len(iso) == 2
    for name, marker, line in zip(scores, best, iso, strict=True):
        point = best_operating_point(scores[name], truth, u, positive="ill")
        assert (marker.get_xdata()[0], marker.get_ydata()[0]) == (point.fpr, point.tpr)
        assert line.get_xy1() == (point.fpr, point.tpr)
        assert line.get_slope() == pytest.approx(2.0)
    # every ROC point lies on or below its iso-utility line (it is the highest one touched)
    curves = [line for line in ax.lines if line.get_gid() is None and len(line.get_xdata()) > 2]
    assert len(curves) == 2
    for curve, line in zip(curves, iso, strict=True):
        (x0, y0), slope = line.get_xy1(), line.get_slope()
        assert np.all(curve.get_ydata() <= y0 + slope * (curve.get_xdata() - x0) + 1e-12)
    ax.figure.canvas.draw()


def test_roc_plot_vertical_iso_line_and_ax_reuse():
    # U[p,p] == U[n,p]: the slope is infinite, the iso-utility line vertical
    u = UtilityMatrix([[1, 0], [1, 1]])
    _, ax = plt.subplots()
    out = plots.roc({"m": [0.9, 0.8, 0.3, 0.1]}, [0, 1, 0, 1], u, ax=ax, positive=0)
    assert out is ax
    (line,) = [line for line in ax.lines if line.get_gid() == "iso_utility"]
    assert line.get_xy1()[0] == line.get_xy2()[0]


def test_roc_plot_errors():
    scores, truth, u = _crossing()
    with pytest.raises(ValueError, match=r"scores\['steady'\] must be finite"):
        plots.roc({"steady": np.r_[np.nan, scores["steady"][1:]]}, truth, u)
    with pytest.raises(ValueError, match=r"binary \(2x2\)"):
        plots.roc(scores, truth, UtilityMatrix(np.eye(3)))


# ------------------------------------------------------------ transducer plots
def _simplex_transducer(columns):
    """A given-draws transducer on 3-class probability vectors (2 model dims)."""
    from yieldwise import Transducer

    rng = np.random.default_rng(2)
    probs = rng.dirichlet([2, 2, 2], size=40)
    labels = np.array(["three", "five", "eight"])[probs.argmax(axis=1)]
    w = np.full((1, 4, 3), 1 / 3)
    alpha = np.tile(np.eye(3) * 0.8 + 0.2 / 3, (1, 4, 1, 1))
    mu = np.tile(np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]]), (1, 4, 1, 1))
    sigma = np.ones((1, 4, 3, 2))
    frame = pd.DataFrame(probs, columns=columns)
    return Transducer.from_draws(
        {"w": w, "alpha": alpha, "mu": mu, "sigma": sigma}, frame, labels,
        ("three", "five", "eight"),
    ), frame  # fmt: skip


def test_probability_vector_transducer_plot_is_a_calibration_plot():
    # Columns named after their classes, in another order than the classes.
    t, frame = _simplex_transducer(["p_eight", "p_three", "p_five"])
    assert t.transform_.is_simplex
    ax = t.plot()
    band = t.predict_interval(np.unique(frame.to_numpy(), axis=0))
    dots = {line.get_label(): line for line in ax.lines}
    for label, column in (("three", 1), ("five", 2), ("eight", 0)):
        x, y = dots[f"p({label} | output)"].get_data()
        rows = np.unique(frame.to_numpy(), axis=0)
        np.testing.assert_allclose(x, rows[:, column])  # matched by name, not position
        np.testing.assert_allclose(y, band["mean"].sel({"class": label}).values)
    assert "output read as probability" in dots
    # Columns that do not name the classes: by position when there is one per class.
    t2, frame2 = _simplex_transducer(["a", "b", "c"])
    x, _ = {ln.get_label(): ln for ln in t2.plot().lines}["p(eight | output)"].get_data()
    np.testing.assert_allclose(x, np.unique(frame2.to_numpy(), axis=0)[:, 2])


def test_a_transducer_plot_refuses_too_few_grid_points_and_a_non_axes():
    """n_grid of 0 or 1 drew a straight line between two outputs (a curve that is not
    there) and -5 failed in numpy; ax="x" failed deep inside."""
    t, _ = _simplex_transducer(["p_eight", "p_three", "p_five"])
    for bad in (0, 1, -5, 2.5):
        with pytest.raises(ValueError, match=r"n_grid must be an integer >= 10"):
            t.plot(n_grid=bad)
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        t.plot(ax="x")
