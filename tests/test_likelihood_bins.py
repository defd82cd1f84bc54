"""Large calibration sets: the likelihood of binned rows (docs/model.md, "Large calibration
sets"), by hand and against the exact likelihood."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from yieldwise import Transducer, _design
from yieldwise.transducer import diagnostics
from yieldwise.transducer import stan_data as _stan_data
from yieldwise.transducer.estimator import check_likelihood_bins


def test_bin_rows_merge_within_class_group_and_bin_at_the_items_mean():
    # one uncensored dimension (bins 0.5 wide) and one censored (bounds must match)
    cls = np.array([0, 0, 0, 1, 0, 0])
    grp = np.array([0, 0, 0, 0, 1, 0])
    lo = np.array([[0.1, 1.0], [0.3, 1.0], [0.7, 1.0], [0.2, 1.0], [0.2, 1.0], [0.4, 2.0]])
    hi = np.array([[0.1, 2.0], [0.3, 2.0], [0.7, 2.0], [0.2, 2.0], [0.2, 2.0], [0.4, 3.0]])
    counts = np.array([1, 3, 2, 1, 1, 1])
    out = _stan_data.bin_rows(cls, grp, lo, hi, np.array([False, True]), counts,
                              np.array([0.5, 0.0]))  # fmt: skip
    c, g, lo_b, hi_b, n_b = out
    rows = sorted(zip(c, g, lo_b[:, 0], lo_b[:, 1], hi_b[:, 1], n_b, strict=True))
    # by hand: rows 0 and 1 share class 0, group 0, bin [0, 0.5) and the censored bin
    # [1, 2]: weighted mean (0.1 * 1 + 0.3 * 3) / 4 = 0.25; row 2 is in bin [0.5, 1); row 5
    # has another censored bin; row 4 another group; row 3 another class
    expected = sorted([
        (0, 0, 0.25, 1.0, 2.0, 4), (0, 0, 0.7, 1.0, 2.0, 2), (0, 0, 0.4, 2.0, 3.0, 1),
        (0, 1, 0.2, 1.0, 2.0, 1), (1, 0, 0.2, 1.0, 2.0, 1),
    ])  # fmt: skip
    assert len(rows) == len(expected)
    for got, want in zip(rows, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(np.diff(c) >= 0, True)  # sorted by class, as Stan reads
    np.testing.assert_array_equal(lo_b[:, 0], hi_b[:, 0])  # a point value stays a point


def test_build_stan_data_bins_only_above_the_row_threshold():
    rng = np.random.default_rng(4)
    n = 3000
    cls = (rng.random(n) < 0.3).astype(int)
    y = rng.normal(cls * 1.5, 1.0)[:, None]
    exact, design = _stan_data.build_stan_data(cls, y, y, [0], 2, preconditioned=False)
    rows = exact.N
    assert rows == n and np.all(exact.bin_width == 0)
    same, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, preconditioned=False,
                                         bin_fraction=1 / 16, bin_min_rows=n)  # fmt: skip
    np.testing.assert_array_equal(same.y_lower, exact.y_lower)
    binned, design_b = _stan_data.build_stan_data(
        cls, y, y, [0], 2, preconditioned=False, bin_fraction=1 / 16, bin_min_rows=100
    )
    # the kernels are placed on the rows before binning: the same design
    np.testing.assert_array_equal(design_b.loc, design.loc)
    np.testing.assert_allclose(binned.bin_width, design.width / 16)
    # one row per occupied (class, bin), counted independently
    h = design.width[0] / 16
    occupied = len({(c, int(np.floor(v / h))) for c, v in zip(cls, y[:, 0], strict=True)})
    rows = binned.N
    assert rows == occupied < n and binned.count.sum() == n
    # each binned row is within its bin, and class counts are kept
    cell = np.floor(binned.y_lower[:, 0] / binned.bin_width[0])
    assert np.all(binned.y_lower[:, 0] - cell * binned.bin_width[0] <= binned.bin_width[0])
    for c in (0, 1):
        assert binned.count[binned.cls == c + 1].sum() == (cls == c).sum()
    # the count-weighted mean of the outputs is unchanged (each bin sits at its mean)
    np.testing.assert_allclose(
        binned.count @ binned.y_lower[:, 0] / n, y.mean(), rtol=0, atol=1e-12
    )


def test_bins_that_save_too_little_are_not_kept():
    """Two dimensions at 3,000 items: bins 1/16 of a kernel wide keep nearly every row, so
    with a largest share of 0.75 the rows stay exact; with 1.0 they are binned."""
    rng = np.random.default_rng(8)
    n = 3000
    cls = (rng.random(n) < 0.3).astype(int)
    y = rng.normal(cls[:, None] * 1.5, 1.0, size=(n, 2))
    kept, _ = _stan_data.build_stan_data(cls, y, y, [0, 0], 2, preconditioned=False,
                                         bin_fraction=1 / 16, bin_min_rows=0,
                                         bin_max_share=0.75)  # fmt: skip
    rows = kept.N
    assert rows == n and np.all(kept.bin_width == 0)
    binned, _ = _stan_data.build_stan_data(cls, y, y, [0, 0], 2, preconditioned=False,
                                           bin_fraction=1 / 16, bin_min_rows=0)  # fmt: skip
    rows = binned.N
    assert 0.75 * n < rows < n and np.all(binned.bin_width > 0)


def test_lattice_outputs_are_never_binned():
    rng = np.random.default_rng(5)
    cls = (rng.random(6000) < 0.2).astype(int)
    votes = rng.binomial(200, np.where(cls == 1, 0.7, 0.1)) / 200
    from yieldwise.transducer import encoding

    lo, hi = encoding.resolution_bins(votes, 1 / 200, (0.0, 1.0))
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2, preconditioned=False,
                                         bin_fraction=1 / 16, bin_min_rows=0)  # fmt: skip
    assert np.all(data.bin_width == 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("auto", (_design.LIKELIHOOD_BIN_FRACTION, _design.LIKELIHOOD_BIN_MIN_ROWS,
               _design.LIKELIHOOD_BIN_MAX_SHARE)),
     (None, (None, 0, 1.0)), (0.25, (0.25, 0, 1.0)), (1, (1.0, 0, 1.0))],
)  # fmt: skip
def test_likelihood_bins_values(value, expected):
    assert check_likelihood_bins(value) == expected
    for dims in (1, 3):
        assert check_likelihood_bins(value, dims=dims) == expected
    # "auto" gives exactly two output dimensions their own (coarser) fraction; a given
    # fraction or None stays as given
    two = check_likelihood_bins(value, dims=2)
    if value == "auto":
        assert two == (_design.LIKELIHOOD_BIN_FRACTION_2D, *expected[1:])
        assert _design.LIKELIHOOD_BIN_FRACTION_2D != _design.LIKELIHOOD_BIN_FRACTION
    else:
        assert two == expected


@pytest.mark.parametrize("bad", ["exact", 0, -0.1, 1.5, True, [0.1]])
def test_likelihood_bins_refuses_bad_values_by_name(bad):
    with pytest.raises(ValueError, match="likelihood_bins must be"):
        check_likelihood_bins(bad)


def test_binning_record_against_the_likelihood_by_hand():
    """The gap at each draw by brute force (a sum over items of the log of the mixture's
    joint), and the effective share of its importance weights by hand."""
    rng = np.random.default_rng(6)
    n, k, s = 400, 5, 7
    cls = (rng.random(n) < 0.4).astype(int)
    y = rng.normal(cls, 1.0)[:, None]
    w = rng.dirichlet(np.ones(k), size=(1, s))
    alpha = rng.dirichlet(np.ones(2), size=(1, s, k))
    loc = np.linspace(-2, 3, k)[:, None]
    width = np.full((k, 1), 0.6)
    draws = {"w": w, "alpha": alpha, "mu": np.broadcast_to(loc, (1, s, k, 1)),
             "sigma": np.broadcast_to(width, (1, s, k, 1))}  # fmt: skip
    data = {"cls": np.array([1, 2]), "count": np.array([n - cls.sum(), cls.sum()]),
            "y_lower": np.array([[0.0], [1.0]]), "y_upper": np.array([[0.0], [1.0]]),
            "N": 2, "bin_width": np.array([5.0])}  # fmt: skip
    record = diagnostics.binning_record(draws, data, cls, y, y, np.array([0]), n_check=s)

    def total(t, values, classes, counts):
        dens = stats.norm.pdf(values[:, None], loc[:, 0], width[:, 0])  # (m, K)
        joint = dens * w[0, t] * alpha[0, t][:, classes].T  # (m, K)
        return float(np.log(joint.sum(axis=1)) @ counts)

    gap = np.array([
        total(t, y[:, 0], cls, np.ones(n)) - total(t, np.array([0.0, 1.0]), np.array([0, 1]),
                                                   data["count"])
        for t in range(s)
    ])  # fmt: skip
    weights = np.exp(gap - gap.max())
    assert record["binned_ess_share"] == pytest.approx(
        weights.sum() ** 2 / (s * (weights**2).sum()), rel=1e-9
    )
    assert record["binned_gap_sd"] == pytest.approx(gap.std(), rel=1e-9)
    assert record["rows"] == 2 and record["rows_exact"] == n and record["bin_width"] == [5.0]
    assert record["binned_ess_share"] < 0.9  # two rows for 400 spread items: far off


def test_warn_on_binning_says_what_to_do():
    record = {"rows_exact": 9000, "rows": 2000, "bin_width": [0.003],
              "binned_ess_share": 0.5, "binned_gap_sd": 1.2}  # fmt: skip
    with pytest.warns(
        diagnostics.DiagnosticsWarning, match=r"Refit with Transducer\(likelihood_bins=None\)"
    ):
        diagnostics.warn_on_binning(record, 0.9)
    # told the bins' fraction, it names bins half as wide first, then the exact likelihood
    with pytest.warns(diagnostics.DiagnosticsWarning) as caught:
        diagnostics.warn_on_binning(record, 0.9, fraction=0.25)
    (message,) = [str(w.message) for w in caught]
    assert "Refit with bins half as wide, Transducer(likelihood_bins=0.125)" in message
    assert message.index("0.125") < message.index("likelihood_bins=None")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diagnostics.warn_on_binning(record | {"binned_ess_share": 0.95}, 0.9)
        diagnostics.warn_on_binning({"max_cut_gap": 0.0}, 0.9)  # not binned: silent


@pytest.fixture(scope="module")
def large_set():
    rng = np.random.default_rng(7)
    n = 6000
    cls = (rng.random(n) < 0.25).astype(int)
    score = 1 / (1 + np.exp(-rng.normal(np.where(cls == 1, 1.0, -1.0), 1.2)))
    return pd.DataFrame({"score": score}), cls


def test_a_large_fit_bins_and_agrees_with_the_exact_likelihood(large_set, tmp_path):
    """Laplace backend (the same likelihood as Stan's): a binned and an exact fit of 6,000
    continuous outputs agree to far below their bands' widths; the record says so, and
    survives a save and load."""
    outputs, cls = large_set
    at = pd.DataFrame({"score": np.linspace(0.05, 0.95, 11)})
    binned = Transducer(backend="laplace", seed=1, progress=False).fit(outputs, cls)
    exact = Transducer(backend="laplace", seed=1, progress=False, likelihood_bins=None).fit(
        outputs, cls
    )
    record = binned.sampler_summary()["binning"]
    assert exact.sampler_summary()["binning"] is None
    assert record["rows_exact"] == 6000 and record["rows"] < 3000
    assert record["binned_ess_share"] > 0.99
    a, b = binned.predict_interval(at, prob=0.9), exact.predict_interval(at, prob=0.9)
    widths = (b["upper"] - b["lower"]).values[:, 1]
    assert np.max(np.abs(a["mean"].values[:, 1] - b["mean"].values[:, 1]) / widths) < 0.01
    path = binned.save(tmp_path / "binned.nc")
    loaded = Transducer.load(path)
    assert loaded.sampler_summary()["binning"] == record
    assert loaded.get_params()["likelihood_bins"] == "auto"


def test_two_dimensions_bin_at_their_own_fraction(monkeypatch):
    """``"auto"`` bins outputs of two dimensions at LIKELIHOOD_BIN_FRACTION_2D of the
    narrowest kernel's width and one dimension at LIKELIHOOD_BIN_FRACTION (the row
    threshold lowered so that small Laplace fits cross it); likelihood_bins=None never
    bins and a number given is used as it is."""
    monkeypatch.setattr(_design, "LIKELIHOOD_BIN_MIN_ROWS", 100)
    monkeypatch.setattr(_design, "LIKELIHOOD_BIN_FRACTION", 0.5)
    monkeypatch.setattr(_design, "LIKELIHOOD_BIN_FRACTION_2D", 1.0)
    rng = np.random.default_rng(3)
    n = 600
    cls = (rng.random(n) < 0.4).astype(int)
    centre = np.where(cls[:, None] == 1, [1.0, -1.0], [-1.0, 1.0])
    two = pd.DataFrame(rng.normal(centre, 1.0), columns=["a", "b"])
    one = pd.DataFrame({"score": 1 / (1 + np.exp(-two["a"].to_numpy()))})

    def fit(outputs, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the Laplace backend's own warning
            return Transducer(backend="laplace", seed=1, progress=False, draws=50,
                              **kw).fit(outputs, cls)  # fmt: skip

    def narrowest(t):  # the narrowest kernel's width along each axis
        return np.asarray(t.posterior.sigma[0]).min(axis=0)

    t2 = fit(two)
    record = t2.sampler_summary()["binning"]
    np.testing.assert_allclose(record["bin_width"], 1.0 * narrowest(t2), rtol=1e-12)
    assert record["rows_exact"] == n and record["rows"] <= 0.75 * n
    assert fit(two, likelihood_bins=None).sampler_summary()["binning"] is None
    given = fit(two, likelihood_bins=0.4).sampler_summary()["binning"]
    np.testing.assert_allclose(given["bin_width"], 0.4 * narrowest(t2), rtol=1e-12)
    t1 = fit(one)
    np.testing.assert_allclose(t1.sampler_summary()["binning"]["bin_width"],
                               0.5 * narrowest(t1), rtol=1e-12)  # fmt: skip


def test_two_dimensional_bins_on_saturated_probability_vectors(monkeypatch):
    """Three-class probability vectors with exact one-hot rows (a saturated softmax), exact
    ties (1/3 each) and exact zeros, binned in two dimensions (threshold lowered and bins a
    whole kernel wide, so that a small Laplace fit bins hard): each class's count is kept,
    every binned row lies in its own bin, and the binned fit predicts at the atoms and
    between them what the exact fit does, to far below its bands' widths."""
    monkeypatch.setattr(_design, "LIKELIHOOD_BIN_MIN_ROWS", 100)
    monkeypatch.setattr(_design, "LIKELIHOOD_BIN_FRACTION_2D", 1.0)
    rng = np.random.default_rng(21)
    n = 1500
    cls = rng.integers(0, 3, n)
    z = rng.normal(size=(n, 3)) * 1.5
    z[np.arange(n), cls] += 2.0
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    hot = rng.random(n) < 0.3
    p[hot] = np.eye(3)[p[hot].argmax(axis=1)]
    p[rng.random(n) < 0.05] = 1 / 3
    zero = ~hot & (rng.random(n) < 0.05)
    p[zero, 2] = 0.0
    p[zero] /= p[zero].sum(axis=1, keepdims=True)
    outputs = pd.DataFrame(p, columns=["p0", "p1", "p2"])

    def fit(**kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the Laplace backend's own warning
            return Transducer(backend="laplace", seed=1, progress=False, draws=300,
                              **kw).fit(outputs, cls)  # fmt: skip

    binned, exact = fit(), fit(likelihood_bins=None)
    record = binned.sampler_summary()["binning"]
    assert exact.sampler_summary()["binning"] is None
    assert record["rows"] < 0.75 * record["rows_exact"]
    # the rows the fit was given, rebuilt from the outputs on the model scale
    lower, upper, censored = binned.transform_.intervals(outputs.to_numpy())
    assert not np.any(censored) and np.array_equal(lower, upper)
    assert np.all(np.isfinite(lower))  # the atoms are squeezed inside the real plane
    data, _ = _stan_data.build_stan_data(
        cls, lower, upper, censored, 3, preconditioned=False, bin_fraction=1.0, bin_min_rows=100
    )
    assert record["rows"] == data.N
    np.testing.assert_allclose(data.bin_width, record["bin_width"], rtol=1e-12)
    for c in range(3):
        assert data.count[data.cls == c + 1].sum() == (cls == c).sum()
    # each binned row sits in the bin of the items it merged: the same bins, counted anew
    cells = {(c, *np.floor(v / data.bin_width)) for c, v in zip(cls, lower, strict=True)}
    got = {(c - 1, *np.floor(v / data.bin_width)) for c, v in zip(data.cls, data.y_lower,
                                                                 strict=True)}  # fmt: skip
    assert got == cells
    at = pd.DataFrame(np.vstack([np.eye(3), [[1 / 3] * 3, [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]]),
                      columns=outputs.columns)  # fmt: skip
    a, b = binned.predict_interval(at, prob=0.9), exact.predict_interval(at, prob=0.9)
    widths = (b["upper"] - b["lower"]).values
    assert np.all(np.isfinite(a["mean"].values)) and np.all(widths > 0)
    assert np.max(np.abs(a["mean"].values - b["mean"].values) / widths) < 0.05
