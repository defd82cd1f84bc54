"""brier_decomposition and reliability_table: hand-worked values, identities, brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression

from yieldwise import Transducer, metrics
from yieldwise.calibrators import IsotonicCalibrator, PlattCalibrator
from yieldwise.metrics import BrierDecomposition, brier_decomposition, reliability_table


def _data(seed, n=400, squash=1.0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    p = np.round(expit(squash * (rng.normal(size=n) + 1.2 * truth - 0.6)), 2)
    return p, truth


def test_equal_width_bins_by_hand():
    # two bins [0, 0.5) and [0.5, 1]: {0.1 (y=0), 0.3 (y=1)} and {0.6 (y=1), 0.8 (y=1)}
    # fbar = 0.2, 0.7; obar = 0.5, 1; overall obar = 0.75
    # REL = (2 * 0.3^2 + 2 * 0.3^2) / 4 = 0.09
    # RES = (2 * 0.25^2 + 2 * 0.25^2) / 4 = 0.0625; UNC = 0.75 * 0.25 = 0.1875
    # WBV = (0.1^2 * 2 + 0.1^2 * 2) / 4 = 0.01
    # WBC = 2 [(-0.1)(-0.5) + (0.1)(0.5) + (-0.1)(0) + (0.1)(0)] / 4 = 0.05
    # Brier = (0.01 + 0.49 + 0.16 + 0.04) / 4 = 0.175 = 0.09 - 0.0625 + 0.1875 + 0.01 - 0.05
    d = brier_decomposition([0.1, 0.3, 0.6, 0.8], [0, 1, 1, 1], positive=1, bins=2)
    assert isinstance(d, BrierDecomposition)
    assert d.brier == pytest.approx(0.175)
    assert d.reliability == pytest.approx(0.09)
    assert d.resolution == pytest.approx(0.0625)
    assert d.uncertainty == pytest.approx(0.1875)
    assert d.within_bin_variance == pytest.approx(0.01)
    assert d.within_bin_covariance == pytest.approx(0.05)
    # PAV: frequencies by value 0, 1, 1, 1 are in order: refinement 0, all loss is calibration
    assert d.refinement_loss == pytest.approx(0.0)
    assert d.calibration_loss == pytest.approx(0.175)
    np.testing.assert_allclose(d.bins[["lower", "upper"]], [[0, 0.5], [0.5, 1]])
    np.testing.assert_array_equal(d.bins["n_items"], [2, 2])
    assert d.per_class is None


@pytest.mark.parametrize("bins", ["unique", 10, 3, np.array([0.0, 0.2, 0.5, 0.9, 1.0])])
@pytest.mark.parametrize("seed", range(6))
def test_identities(seed, bins):
    p, truth = _data(seed)
    d = brier_decomposition(p, truth, positive=1, bins=bins)
    assert d.brier == pytest.approx(metrics.brier(p, truth, positive=1), abs=1e-14)
    rebuilt = (
        d.reliability - d.resolution + d.uncertainty
        + d.within_bin_variance - d.within_bin_covariance
    )  # fmt: skip
    assert rebuilt == pytest.approx(d.brier, abs=1e-12)
    assert d.calibration_loss + d.refinement_loss == pytest.approx(d.brier, abs=1e-14)
    iso = IsotonicRegression().fit(p, truth).predict(p)
    assert d.refinement_loss == pytest.approx(np.mean((iso - truth) ** 2), abs=1e-12)
    assert d.calibration_loss >= -1e-15
    if isinstance(bins, str):
        assert d.within_bin_variance == d.within_bin_covariance == 0
        # PAV keeps the order, the per-value frequencies need not: CL <= REL
        assert d.calibration_loss <= d.reliability + 1e-12


def test_perfect_and_climatological_forecasts():
    p, truth = _data(1)
    # replacing each probability by its group's frequency: no reliability loss left
    frequency = pd.Series(truth).groupby(p).transform("mean").to_numpy()
    d = brier_decomposition(frequency, truth, positive=1)
    assert d.reliability == pytest.approx(0, abs=1e-15)
    # the base rate for everyone: no resolution, Brier score = uncertainty
    base = np.full(truth.size, truth.mean())
    d = brier_decomposition(base, truth, positive=1)
    assert d.resolution == pytest.approx(0, abs=1e-15)
    assert d.reliability == pytest.approx(0, abs=1e-15)
    assert d.brier == pytest.approx(d.uncertainty)


def test_several_classes_add_up_one_against_the_rest():
    rng = np.random.default_rng(3)
    truth = rng.choice(["a", "b", "c"], size=300)
    p = np.round(rng.dirichlet([2, 2, 2], size=300), 2)
    p[:, 2] = 1 - p[:, 0] - p[:, 1]
    d = brier_decomposition(p, truth, classes=["a", "b", "c"], bins=5)
    assert d.brier == pytest.approx(metrics.brier(p, truth, classes=["a", "b", "c"]))
    assert list(d.per_class.index) == ["a", "b", "c"]
    for name in ("reliability", "resolution", "uncertainty", "refinement_loss"):
        assert d.per_class[name].sum() == pytest.approx(getattr(d, name), abs=1e-14)
    for k, label in enumerate("abc"):
        one = brier_decomposition(p[:, k], truth, positive=label, bins=5)
        assert d.per_class.loc[label, "reliability"] == pytest.approx(one.reliability)
        assert d.per_class.loc[label, "calibration_loss"] == pytest.approx(one.calibration_loss)
    assert set(d.bins["class"]) == {"a", "b", "c"}


def test_peers_and_raw_scores_on_held_out_data():
    """Recalibration on one half lowers the calibration loss on the other (known truth)."""
    rng = np.random.default_rng(9)
    truth = rng.integers(0, 2, 4000)
    # score ~ N(+-1.5, 1.5^2): the true logit is 4/3 score; expit(6 score) is 4.5 times too
    # confident
    score = 3.0 * (truth - 0.5) + 1.5 * rng.normal(size=truth.size)
    raw = expit(6 * score)
    fit, test = slice(0, 2000), slice(2000, None)
    platt = PlattCalibrator().fit(score[fit], truth[fit]).predict_proba(score[test])[:, 1]
    iso = IsotonicCalibrator().fit(score[fit], truth[fit]).predict_proba(score[test])[:, 1]
    raw_d = brier_decomposition(raw[test], truth[test], positive=1, bins=10)
    for p in (platt, iso):
        d = brier_decomposition(p, truth[test], positive=1, bins=10)
        assert d.reliability < raw_d.reliability / 3
        # same ranking of the items as the raw score (monotone maps): same refinement,
        # exactly for Platt's strictly increasing map, up to isotonic regression's ties
        assert d.refinement_loss == pytest.approx(raw_d.refinement_loss, abs=0.01)
    platt_d = brier_decomposition(platt, truth[test], positive=1)
    raw_unique = brier_decomposition(raw[test], truth[test], positive=1)
    assert platt_d.refinement_loss == pytest.approx(raw_unique.refinement_loss, abs=1e-12)


# ------------------------------------------------------------ reliability tables
def test_wilson_intervals_by_hand():
    z = 1.959963984540054
    # k = 3 of n = 4: centre (3 + z^2/2) / (4 + z^2), half z / (4 + z^2) sqrt(3/4 + z^2/4)
    centre = (3 + z * z / 2) / (4 + z * z)
    half = z / (4 + z * z) * np.sqrt(3 * 1 / 4 + z * z / 4)
    table = reliability_table([0.7] * 4, [1, 1, 1, 0], positive=1)
    np.testing.assert_allclose(
        table[["wilson_lower", "wilson_upper"]].iloc[0], [centre - half, centre + half]
    )
    assert table["frequency"].iloc[0] == 0.75
    assert table["lower"].iloc[0] == pytest.approx(0.7)


def test_wilson_coverage_by_simulation():
    """Known truth: bins of 40 items at frequency 0.3; 95 % intervals cover about 95 %."""
    from yieldwise.metrics import _wilson

    rng = np.random.default_rng(0)
    k = rng.binomial(40, 0.3, size=20_000).astype(float)
    lower, upper = _wilson(k, np.full(k.size, 40.0), 0.95)
    assert np.mean((lower <= 0.3) & (upper >= 0.3)) == pytest.approx(0.95, abs=0.02)
    # and the table's interval is that of its bin's counts
    truth = (rng.random(40) < 0.3).astype(int)
    table = reliability_table(np.full(40, 0.3), truth, positive=1, classes=[0, 1])
    expected = _wilson(np.array([truth.sum()], float), np.array([40.0]), 0.95)
    np.testing.assert_allclose(table[["wilson_lower", "wilson_upper"]].iloc[0], np.ravel(expected))


def test_bands_from_draws_are_per_bin_quantiles():
    rng = np.random.default_rng(4)
    p, truth = _data(4, n=200)
    draws = np.clip(p + rng.normal(scale=0.05, size=(300, p.size)), 0, 1)
    table = reliability_table(p, truth, positive=1, bins=5, draws=draws, band=0.8)
    edges = np.arange(6) / 5
    index = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, 4)
    for row, k in zip(table.itertuples(), np.unique(index), strict=True):
        means = draws[:, index == k].mean(axis=1)
        assert row.band_lower == pytest.approx(np.quantile(means, 0.1))
        assert row.band_upper == pytest.approx(np.quantile(means, 0.9))
        assert row.n_items == np.sum(index == k)


def test_a_transducers_draws_give_the_band():
    labels = ("neg", "pos")
    draws = {
        "w": np.array([[[0.6, 0.4], [0.5, 0.5], [0.55, 0.45]]]),
        "alpha": np.array([[[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]],
                            [[0.85, 0.15], [0.25, 0.75]]]]),
        "mu": np.array([[[[-1.0], [1.5]], [[-0.5], [1.0]], [[-0.8], [1.2]]]]),
        "sigma": np.array([[[[1.0], [0.7]], [[0.8], [1.2]], [[0.9], [1.0]]]]),
    }  # fmt: skip
    scores = np.linspace(-3, 3, 60)
    truth = np.array(labels)[(scores > 0).astype(int)]
    t = Transducer.from_draws(
        draws, pd.DataFrame({"score": scores}), truth, labels,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    p = t.predict_proba(pd.DataFrame({"score": scores}))[:, 1]
    per_draw = t.draws_proba(pd.DataFrame({"score": scores}))
    table = reliability_table(p, truth, positive="pos", bins=4, draws=per_draw, band=0.5)
    manual = reliability_table(
        p, truth, positive="pos", bins=4, draws=per_draw.sel({"class": "pos"}).values[0],
        band=0.5,
    )  # fmt: skip
    pd.testing.assert_frame_equal(table, manual)
    assert (table["band_lower"] <= table["band_upper"]).all()


def test_raw_scores_are_refused_with_what_to_do():
    """Logits are not probabilities: the error names the argument, the range found,
    what was expected and the calibrators to use first."""
    logits = [-2.5, -0.3, 0.4, 3.1]
    for function in (brier_decomposition, reliability_table):
        with pytest.raises(ValueError) as caught:
            function(logits, [0, 0, 1, 1], positive=1)
        message = str(caught.value)
        assert f"{function.__name__}: the argument probabilities must hold probabilities in " \
            "[0, 1], found values in [-2.5, 3.1]" in message  # fmt: skip
        assert "calibrated first" in message and "yieldwise.calibrators" in message
        assert "PlattCalibrator" in message
    # two columns: the same message
    with pytest.raises(ValueError, match=r"found values in \[-0.5, 1.5\]"):
        brier_decomposition([[1.5, -0.5], [0.2, 0.8]], [0, 1], classes=[0, 1])


def test_bad_inputs():
    with pytest.raises(ValueError, match="bins must be a positive integer, found 0"):
        brier_decomposition([0.1, 0.9], [0, 1], bins=0)
    with pytest.raises(ValueError, match=r"bins edges \[0.2, 1.0\] must cover"):
        brier_decomposition([0.1, 0.9], [0, 1], bins=[0.2, 0.5, 1.0])
    with pytest.raises(ValueError, match="bins must be 'unique'"):
        brier_decomposition([0.1, 0.9], [0, 1], bins="quantile")
    with pytest.raises(ValueError, match=r"draws must have one column per item \(2\)"):
        reliability_table([0.1, 0.9], [0, 1], draws=np.zeros((5, 3)))
    with pytest.raises(ValueError, match="level must be a number in"):
        reliability_table([0.1, 0.9], [0, 1], level=95)


def test_plot_has_a_band_only_for_the_method_with_draws():
    import matplotlib.pyplot as plt

    from yieldwise import plots

    p, truth = _data(2, n=300)
    draws = np.clip(p + np.random.default_rng(0).normal(scale=0.05, size=(100, p.size)), 0, 1)
    ax = plots.reliability({"t": p, "raw": p**2}, truth, positive=1, draws={"t": draws})
    assert len([c for c in ax.collections if c.get_gid() == "band"]) == 1
    with pytest.raises(ValueError, match=r"draws names \['x'\]"):
        plots.reliability({"t": p}, truth, positive=1, draws={"x": draws})
    plt.close("all")


def test_wilson_limits_bracket_the_frequency_at_the_ends():
    from yieldwise.metrics import _wilson

    n = np.arange(1, 400, dtype=float)
    for k in (np.zeros_like(n), n):
        lower, upper = _wilson(k, n, 0.95)
        p = k / n
        assert (lower <= p).all() and (upper >= p).all()
        assert ((lower >= 0) & (upper <= 1)).all()
    # k = 0: the upper limit is z^2 / (n + z^2) in closed form
    z2 = 1.959963984540054**2
    np.testing.assert_allclose(_wilson(np.zeros_like(n), n, 0.95)[1], z2 / (n + z2), rtol=1e-12)
