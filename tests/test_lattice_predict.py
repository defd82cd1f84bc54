"""Predictions on lattice outputs and beyond the calibration range (issue 17, item 7 and
the extrapolation note). Given posterior draws (no Stan); bin probabilities by hand."""

from __future__ import annotations

import time
import warnings

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy.special import logit
from scipy.stats import norm

from yieldwise import Transducer, _mixture
from yieldwise.transducer import ExtrapolationWarning, LatticeWarning

H = 1 / 200  # vote fractions k/200
W = np.array([[0.5, 0.3, 0.2], [0.4, 0.4, 0.2]])
ALPHA = np.array([[[0.95, 0.05], [0.5, 0.5], [0.1, 0.9]], [[0.9, 0.1], [0.6, 0.4], [0.05, 0.95]]])
MU = np.array([[[-3.0], [0.0], [2.5]], [[-2.5], [0.3], [3.0]]])  # logit scale
SIGMA = np.array([[[1.0], [0.8], [1.2]], [[0.9], [1.0], [1.0]]])


def vote_transducer(calibration=None):
    rng = np.random.default_rng(4)
    every = np.r_[np.arange(201), rng.integers(0, 201, 400)] / 200  # all of [0, 1]
    votes = every if calibration is None else calibration
    classes = np.where(votes > 0.5, "yes", "no")
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        pd.DataFrame({"votes": votes}), classes, ("no", "yes"),
        output_transform="logit", resolution="auto",
    )  # fmt: skip


def bin_probability_by_hand(v):
    """p(yes | the bin of lattice value v), exchangeable formula, from scipy's normal cdf."""
    lo, hi = max(v - H / 2, 0.0), min(v + H / 2, 1.0)
    with np.errstate(divide="ignore"):
        a, b = logit(lo), logit(hi)
    g = np.zeros(2)
    for t in range(2):
        mass = norm.cdf(b, MU[t, :, 0], SIGMA[t, :, 0]) - norm.cdf(a, MU[t, :, 0], SIGMA[t, :, 0])
        g += (W[t] * mass) @ ALPHA[t]
    return g[1] / g.sum()


def test_off_lattice_outputs_are_read_as_the_bin_that_holds_them():
    t = vote_transducer()
    assert t.transform_.resolution == (H,)
    off = np.array([0.3012, 0.2976, 0.0004, 0.9999, 0.5])  # the last is on the lattice
    held = np.array([0.3, 0.3, 0.0, 1.0, 0.5])  # bins [v - h/2, v + h/2]
    with pytest.warns(LatticeWarning, match=r"4 of 5 outputs in column 'votes' are not on the "
                      r"lattice of spacing 0.005.*item 0: 0.3012"):  # fmt: skip
        p = t.predict_proba(off)[:, 1]
    expected = [bin_probability_by_hand(v) for v in held]
    np.testing.assert_allclose(p, expected, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # on the lattice: no warning
        np.testing.assert_allclose(t.predict_proba(held)[:, 1], expected, rtol=1e-10)
        # float noise of a lattice value (0.1 + 0.2 for 0.3) is no departure from it
        assert t.predict_proba([0.1 + 0.2])[0, 1] == pytest.approx(expected[0], rel=1e-10)
    for method in (t.predict_interval, t.draws_proba):
        with pytest.warns(LatticeWarning):
            snapped = method(off)
        xr_equal = snapped.equals(method(held))
        assert xr_equal, method.__name__


def _count_rows(monkeypatch):
    """Rows of the mixture evaluated: wraps the two kernels the prediction paths call (the
    per-draw log joint and the joint pooled over draws), counting a call of one inside the
    other once."""
    evaluated = []
    inside = []

    def counting(original):
        def wrapped(w, alpha, mu, sigma, lower, upper, *args, **kwargs):
            if not inside:
                evaluated.append(len(lower))
            inside.append(True)
            try:
                return original(w, alpha, mu, sigma, lower, upper, *args, **kwargs)
            finally:
                inside.pop()

        return wrapped

    monkeypatch.setattr(_mixture, "log_joint", counting(_mixture.log_joint))
    monkeypatch.setattr(_mixture, "pooled_joint", counting(_mixture.pooled_joint))
    return evaluated


@pytest.mark.parametrize("kind", ["off the lattice", "on the lattice"])
def test_many_outputs_cost_one_evaluation_per_lattice_value(monkeypatch, kind):
    """200,000 off-lattice values and 1,000,000 lattice values: at most 201 bins evaluated."""
    rng = np.random.default_rng(9)
    t = vote_transducer()
    if kind == "off the lattice":
        y = rng.random(200_000)
    else:
        y = rng.integers(0, 201, 1_000_000) * 0.005  # k * h: float noise included
    evaluated = _count_rows(monkeypatch)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LatticeWarning)
        p = t.predict_proba(y)
    seconds = time.perf_counter() - started
    assert sum(evaluated) <= 201, f"{sum(evaluated)} rows evaluated for {len(y)} outputs"
    assert seconds < 20, f"{seconds:.1f} s"  # about 0.5 s here; the old path took minutes
    cells = np.clip(np.round(y / H), 0, 200).astype(int)
    table = t.predict_proba(np.arange(201) / 200)
    np.testing.assert_array_equal(p, table[cells])


def test_outputs_beyond_the_calibration_range_are_flagged():
    votes = np.random.default_rng(2).integers(6, 197, 400) / 200  # 0.03 .. 0.98
    t = vote_transducer(votes)
    low, high = votes.min(), votes.max()
    with pytest.warns(ExtrapolationWarning) as caught:
        t.predict_proba([0.0, 0.5, 1.0, low, high, 0.01])
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("3 of 6 outputs lie outside the range of the calibration outputs")
    assert f"'votes': [{low:.4g}, {high:.4g}], 3 outside" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.predict_proba([low, high, 0.5])
        t.plot(ax=Figure().subplots())  # the plot's tails do not warn
    with pytest.warns(ExtrapolationWarning, match="1 of 1 outputs"):
        t.predict_interval([0.995])


def test_the_plot_shows_the_tails_beyond_the_calibration_outputs():
    votes = np.random.default_rng(2).integers(6, 197, 400) / 200
    t = vote_transducer(votes)
    low, high = votes.min(), votes.max()
    ax = Figure().subplots()
    t.plot(ax=ax)
    assert ax.get_xlim() == (0.0, 1.0)  # the whole domain of a score in [0, 1]
    solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-" and ln.get_marker() == "None"]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(solid) == 1 and len(dashed) == 2
    x_solid = solid[0].get_xdata()[np.isfinite(solid[0].get_ydata())]
    assert x_solid.min() == low and x_solid.max() == high
    spans = sorted(
        (ln.get_xdata()[np.isfinite(ln.get_ydata())].min(),
         ln.get_xdata()[np.isfinite(ln.get_ydata())].max()) for ln in dashed
    )  # fmt: skip
    assert spans == [(0.0, low), (high, 1.0)]
    # the tails are the transducer's own values there
    x, y = dashed[0].get_xdata(), dashed[0].get_ydata()
    keep = np.isfinite(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(y[keep], t.predict_proba(x[keep])[:, 1], rtol=1e-12)
    legend = [x.get_text() for x in ax.get_legend().get_texts()]
    assert legend == ["p(yes | output)", "beyond the calibration outputs"]
