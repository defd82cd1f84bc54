"""The transducer's fixed kernels and smoothing prior (yieldwise/_design.py), without Stan.

Every property is checked against an independent computation: quantiles of the outputs
expanded item by item, the second-difference penalty written out and pseudo-inverted by
numpy, kernel values from scipy's Normal pdf and cdf, k-means' fixed-point condition.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import cdist
from scipy.special import logit

from yieldwise import Transducer, _design
from yieldwise.transducer import encoding
from yieldwise.transducer import stan_data as _stan_data
from yieldwise.transducer.estimator import check_components

RANGE = (0.01, 0.99)  # the count-weighted quantiles the grid must span (docs/model.md)


def test_range_is_the_documented_one():
    assert _design.RANGE_QUANTILES == RANGE


def _item_quantiles(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The 1 % and 99 % quantiles of the values repeated item by item.

    ``inverted_cdf``: the smallest value whose share of items at or below reaches q.
    """
    return np.quantile(np.repeat(values, counts), RANGE, method="inverted_cdf")


def _vote_rows(rng, n=2000, trees=200):
    """Vote fractions with many exact 0s and 1s: bins with an infinite edge on the logit."""
    cls = (rng.random(n) < 0.3).astype(int)
    p = np.where(cls == 1, rng.beta(3, 0.3, n), rng.beta(0.3, 3, n))
    votes = rng.binomial(trees, p) / trees
    lo, hi = encoding.resolution_bins(votes, 1 / trees, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        lo, hi = logit(lo), logit(hi)
    return _stan_data.merge_rows(cls, np.column_stack([lo, hi]))


def _rw2_penalty(nodes: int) -> np.ndarray:
    """D2' D2 / delta^3 on nodes spaced delta = 1 / (nodes - 1), D2 written row by row."""
    delta = 1.0 / (nodes - 1)
    d2 = np.zeros((nodes - 2, nodes))
    for i in range(nodes - 2):
        d2[i, i : i + 3] = [1.0, -2.0, 1.0]
    return d2.T @ d2 / delta**3


# --- the grid ------------------------------------------------------------------------


def test_grid_spans_the_count_weighted_quantiles_of_points():
    rng = np.random.default_rng(0)
    values = np.round(rng.standard_t(3, 600), 2)  # heavy tails: quantiles, not the extremes
    _, rows, counts = _stan_data.merge_rows(np.zeros(600, int), values)
    assert counts.max() > 1  # the weighting matters
    design = _design.design_kernels(rows, rows, counts)
    low, high = _item_quantiles(rows[:, 0], counts)
    loc = design.loc[:, 0]
    assert design.kind == "grid" and loc.shape == (_design.GRID_1D,)
    assert loc[0] == pytest.approx(low, abs=1e-12) and loc[-1] == pytest.approx(high, abs=1e-12)
    assert values.min() < low and high < values.max()  # outliers stay outside the grid
    np.testing.assert_allclose(np.diff(loc), (high - low) / (_design.GRID_1D - 1), rtol=1e-10)


def test_grid_spans_the_quantiles_of_bins_midpoints_and_finite_edges():
    """A bin's representative is its midpoint, or its finite edge when the other is infinite.

    Here over 2 % of the items sit in each end bin (votes 0/200 and 200/200), so the
    1 % and 99 % quantiles are the finite edges logit(1/400) and logit(399/400): censored
    bins are not atoms, whatever their share.
    """
    rng = np.random.default_rng(1)
    _, bounds, counts = _vote_rows(rng)
    lo, hi = bounds[:, :1], bounds[:, 1:]
    assert np.isneginf(lo).any() and np.isposinf(hi).any()
    rep = np.where(np.isneginf(lo), hi, np.where(np.isposinf(hi), lo, (lo + hi) / 2))[:, 0]
    low, high = _item_quantiles(rep, counts)
    assert low == pytest.approx(logit(1 / 400)) and high == pytest.approx(logit(399 / 400))
    design = _design.design_kernels(lo, hi, counts, 12)
    np.testing.assert_allclose(design.loc[[0, -1], 0], [low, high], atol=1e-12)
    # with fewer items at the ends, an interior midpoint sets the range
    inner = ~(np.isneginf(lo) | np.isposinf(hi))[:, 0]
    cut = np.where(inner, counts, 1)
    low2, high2 = _item_quantiles(rep, cut)
    assert low2 > logit(1 / 400) and high2 < logit(399 / 400)
    design2 = _design.design_kernels(lo, hi, cut, 12)
    np.testing.assert_allclose(design2.loc[[0, -1], 0], [low2, high2], atol=1e-12)


def test_two_dimensional_grid_is_a_tensor_grid_with_width_half_the_spacing():
    rng = np.random.default_rng(2)
    y = np.column_stack([rng.normal(0, 1, 800), rng.gamma(2.0, 3.0, 800)])
    counts = np.ones(800, int)
    design = _design.design_kernels(y, y, counts, 50)  # 50 -> 7 x 7 (nearest square)
    assert design.shape == (7, 7) and design.loc.shape == (49, 2)
    for axis in range(2):
        low, high = _item_quantiles(y[:, axis], counts)
        nodes = np.linspace(low, high, 7)
        # index i * 7 + j: axis 0 varies slowest
        grid = design.loc[:, axis].reshape(7, 7)
        np.testing.assert_allclose(grid if axis == 0 else grid.T, np.repeat(nodes[:, None], 7, 1))
        assert design.width[axis] == pytest.approx(0.5 * (high - low) / 6, rel=1e-12)
    assert _design.WIDTH_FACTOR_2D == 0.5


def test_one_dimensional_width_is_half_the_spacing_and_a_single_value_gets_a_unit_range():
    y = np.linspace(-3.0, 5.0, 400)[:, None]
    design = _design.design_kernels(y, y, np.ones(400, int), 9)
    np.testing.assert_allclose(0.5 * np.diff(design.loc[:, 0]), design.width[0], rtol=1e-12)
    assert _design.WIDTH_FACTOR == 0.5
    same = np.full((20, 1), 2.5)
    single = _design.design_kernels(same, same, np.ones(20, int), 5)
    np.testing.assert_allclose(single.loc[:, 0], np.linspace(2.0, 3.0, 5))


def test_hard_labels_leave_one_dimension_without_a_smooth_part():
    """At most two distinct 1-D outputs (points or bins): the linear smooth limit takes any
    values there, so the design has no smooth functions (R = 0) and the fixed effects
    stay; three distinct outputs keep the whole walk; two dimensions always keep it."""
    ones = np.ones(40, int)
    one = np.full((40, 1), 1.5)
    assert _design.design_kernels(one, one, ones, 9).smooth_basis.shape == (9, 0)
    two = np.repeat([[-8.0], [8.0]], 20, axis=0)
    design = _design.design_kernels(two, two, ones, 9)
    assert design.smooth_basis.shape == (9, 0) and design.fixed_basis.shape == (9, 2)
    # a binary lattice {0, 1} on the logit scale: two censored bins with infinite edges
    lo = np.repeat([[-np.inf], [0.0]], 20, axis=0)
    hi = np.repeat([[0.0], [np.inf]], 20, axis=0)
    assert _design.distinct_outputs(lo, hi) == 2
    assert _design.design_kernels(lo, hi, ones, 9).smooth_basis.shape == (9, 0)
    three = np.repeat([[-8.0], [0.0], [8.0]], [14, 13, 13], axis=0)
    assert _design.distinct_outputs(three, three) == 3
    assert _design.design_kernels(three, three, ones, 9).smooth_basis.shape == (9, 7)
    corners = np.repeat([[5.9, 6.0], [5.9, -5.9], [-11.9, 0.0]], [14, 13, 13], axis=0)
    assert _design.design_kernels(corners, corners, ones, 16).smooth_basis.shape == (16, 12)


def test_edge_atoms_of_exact_values_are_left_out_of_the_range():
    """Scores clipped to [0, 1]: exact 0s (here 17 %) and 1s (3 %) squeezed to single
    values far out on the logit scale. The grid spans the 1 % / 99 % quantiles of the
    other items; an atom under 1 % of the items, or in the middle, stays in."""
    rng = np.random.default_rng(4)
    inner = rng.normal(0.0, 1.0, 800)
    values = np.r_[inner, np.full(170, -6.9), np.full(30, 6.9)]
    _, rows, counts = _stan_data.merge_rows(np.zeros(values.size, int), values)
    design = _design.design_kernels(rows, rows, counts)
    low, high = np.quantile(inner, RANGE, method="inverted_cdf")
    np.testing.assert_allclose(design.loc[[0, -1], 0], [low, high], atol=1e-12)
    # the same atoms count by count: the range is the quantiles of every item
    small = np.r_[inner, np.full(5, -6.9), np.full(5, 6.9)]  # 0.6 % each
    _, rows, counts = _stan_data.merge_rows(np.zeros(small.size, int), small)
    design = _design.design_kernels(rows, rows, counts)
    np.testing.assert_allclose(
        design.loc[[0, -1], 0], np.quantile(small, RANGE, method="inverted_cdf"), atol=1e-12
    )
    # an atom inside the range is no edge atom
    middle = np.r_[inner, np.full(170, 0.0)]
    _, rows, counts = _stan_data.merge_rows(np.zeros(middle.size, int), middle)
    design = _design.design_kernels(rows, rows, counts)
    np.testing.assert_allclose(
        design.loc[[0, -1], 0], np.quantile(middle, RANGE, method="inverted_cdf"), atol=1e-12
    )
    # two values only, both atoms: nothing would remain, so both stay
    two = np.r_[np.zeros(50), np.ones(50)]
    _, rows, counts = _stan_data.merge_rows(np.zeros(two.size, int), two)
    np.testing.assert_allclose(_design.design_kernels(rows, rows, counts).loc[[0, -1], 0], [0, 1])


def test_edge_atoms_stay_in_the_range_when_only_atoms_would_remain():
    """Three-class one-hot vectors on the principal axes: every value an atom. Leaving an
    end's atom out would leave two values 0.04 apart to span; with no continuous part
    (at most two distinct values left) every value stays, and the grid spans them all."""
    points = np.repeat([[5.88, 6.0], [5.92, -5.89], [-11.94, -0.02]], [500, 500, 500], axis=0)
    design = _design.design_kernels(points, points, np.ones(1500, int), 196)
    low, high = design.loc.min(axis=0), design.loc.max(axis=0)
    assert (low <= points.min(axis=0)).all() and (high >= points.max(axis=0) - 1e-9).all()
    # an atom beside a continuous part is still left out (the clipped scores' case)
    rng = np.random.default_rng(3)
    y = np.concatenate([rng.normal(0.0, 1.0, 300), np.full(100, 9.0)])[:, None]
    assert _design.design_kernels(y, y, np.ones(400, int), 9).loc.max() < 4.0


def test_edge_atoms_in_two_dimensions_are_per_axis():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(900, 2))
    z[:150, 0] = -8.0  # an atom on axis 0 only
    design = _design.design_kernels(z, z, np.ones(900, int))
    low0, high0 = np.quantile(z[150:, 0], RANGE, method="inverted_cdf")
    low1, high1 = np.quantile(z[:, 1], RANGE, method="inverted_cdf")
    np.testing.assert_allclose(design.loc[:, 0].min(), low0, atol=1e-12)
    np.testing.assert_allclose(design.loc[:, 0].max(), high0, atol=1e-12)
    np.testing.assert_allclose([design.loc[:, 1].min(), design.loc[:, 1].max()], [low1, high1])


# --- the second-order random-walk prior ------------------------------------------------


# 30 nodes: the most whose G - 2 penalised functions SMOOTH_MODES_1D (28) keeps whole
@pytest.mark.parametrize("nodes", [5, 30])
def test_rw2_prior_one_dimension(nodes):
    assert nodes - 2 <= _design.SMOOTH_MODES_1D
    y = np.linspace(0.0, 1.0, 100)[:, None]
    design = _design.design_kernels(y, y, np.ones(100, int), nodes)
    q = _rw2_penalty(nodes)
    fixed, smooth = design.fixed_basis, design.smooth_basis
    u = np.linspace(-0.5, 0.5, nodes)
    np.testing.assert_allclose(fixed, np.column_stack([np.ones(nodes), u]), atol=1e-12)
    scale = np.abs(q).max()
    # the penalty leaves constant and linear functions free ...
    np.testing.assert_allclose(q @ fixed, 0.0, atol=1e-9 * scale)
    # ... the smooth functions are orthogonal to them, and carry the rest
    assert smooth.shape == (nodes, nodes - 2)
    np.testing.assert_allclose(fixed.T @ smooth, 0.0, atol=1e-9)
    # coefficients N(0, 1) give the random walk's covariance Q^+
    np.testing.assert_allclose(smooth @ smooth.T, np.linalg.pinv(q, rcond=1e-10), atol=1e-10)
    np.testing.assert_array_equal(
        design.fixed_scale, [_design.INTERCEPT_SCALE, _design.SLOPE_SCALE]
    )


def _six_by_six_grid():
    """A 6 x 6 grid's design on 300 normal points, the Kronecker sum of the two axes'
    second-difference penalties, and the grid's coordinates u1, u2 in [-0.5, 0.5]."""
    rng = np.random.default_rng(3)
    y = rng.normal(size=(300, 2))
    design = _design.design_kernels(y, y, np.ones(300, int), 36)
    q1 = _rw2_penalty(6)
    eye = np.eye(6)
    q = np.kron(q1, eye) + np.kron(eye, q1)
    u1, u2 = (g.ravel() for g in np.meshgrid(*[np.linspace(-0.5, 0.5, 6)] * 2, indexing="ij"))
    return design, q, u1, u2


def test_rw2_prior_two_dimensions_is_the_kronecker_sum():
    design, q, u1, u2 = _six_by_six_grid()
    fixed, smooth = design.fixed_basis, design.smooth_basis
    # the constant, both linear terms and the bilinear term are free
    for column in (np.ones(36), u1, u2, u1 * u2):
        np.testing.assert_allclose(q @ column, 0.0, atol=1e-9 * np.abs(q).max())
        resid = column - fixed @ np.linalg.lstsq(fixed, column, rcond=None)[0]
        np.testing.assert_allclose(resid, 0.0, atol=1e-12)  # and in the fixed basis
    assert fixed.shape == (36, 4) and smooth.shape == (36, 32)
    np.testing.assert_allclose(fixed.T @ smooth, 0.0, atol=1e-9)
    np.testing.assert_allclose(smooth @ smooth.T, np.linalg.pinv(q, rcond=1e-10), atol=1e-10)
    # u1 follows the first output dimension, u2 the second
    for axis, u in ((0, u1), (1, u2)):
        span = design.loc[:, axis].max() - design.loc[:, axis].min()
        np.testing.assert_allclose((design.loc[:, axis] - design.loc[:, axis].min()) / span - 0.5,
                                   u, atol=1e-12)  # fmt: skip


@pytest.mark.parametrize("quadratic", [0, 1])
def test_two_dimensional_null_space_with_and_without_the_squares(monkeypatch, quadratic):
    """QUADRATIC_NULL_2D: the squares u1^2 and u2^2 become fixed effects, and the smooth
    part's covariance is the Kronecker sum's pseudo-inverse projected off all six free
    functions (checked against that construction); without it the four bilinear ones."""
    monkeypatch.setattr(_design, "QUADRATIC_NULL_2D", quadratic)
    design, q, u1, u2 = _six_by_six_grid()
    free = [np.ones(36), u1, u2, u1 * u2] + ([u1**2, u2**2] if quadratic else [])
    fixed, smooth = design.fixed_basis, design.smooth_basis
    assert fixed.shape == (36, len(free)) and smooth.shape == (36, 36 - len(free))
    for column in free:
        resid = column - fixed @ np.linalg.lstsq(fixed, column, rcond=None)[0]
        np.testing.assert_allclose(resid, 0.0, atol=1e-12)
    np.testing.assert_allclose(fixed.T @ smooth, 0.0, atol=1e-9)
    basis, _ = np.linalg.qr(np.column_stack(free))
    perp = np.eye(36) - basis @ basis.T
    expected = perp @ np.linalg.pinv(q, rcond=1e-10) @ perp
    np.testing.assert_allclose(smooth @ smooth.T, expected, atol=1e-10)
    # the squares get the slopes' weak prior, the constant its own
    assert design.fixed_scale.tolist() == [_design.INTERCEPT_SCALE] + [_design.SLOPE_SCALE] * (
        len(free) - 1
    )
    if quadratic:  # the squares' own prior sd, when a candidate sets one
        monkeypatch.setattr(_design, "SQUARE_SCALE", 7.0)
        scale = _six_by_six_grid()[0].fixed_scale
        assert scale.tolist() == [_design.INTERCEPT_SCALE] + [_design.SLOPE_SCALE] * 3 + [7.0] * 2
    # one dimension is untouched by the switch
    x = np.linspace(0.0, 1.0, 50)[:, None]
    assert _design.design_kernels(x, x, np.ones(50, int), 12).fixed_basis.shape == (12, 2)


@pytest.mark.parametrize(("modes", "share"), [(20, 0.999768), (28, 0.999892), (None, 1.0)])
def test_one_dimensional_grid_keeps_the_smoothest_random_walk_functions(monkeypatch, modes, share):
    """SMOOTH_MODES_1D: a 60-node grid keeps the ``modes`` functions of least penalty,
    each of unit penalty and penalty-orthogonal to the others; their share of the random
    walk's prior variance is that of the penalty's smallest non-zero eigenvalues, worked
    out here from the penalty itself (28, the default: 99.989 %; 20: 99.977 %); None
    keeps every one (covariance exactly Q^+)."""
    monkeypatch.setattr(_design, "SMOOTH_MODES_1D", modes)
    y = np.linspace(0.0, 1.0, 300)[:, None]
    design = _design.design_kernels(y, y, np.ones(300, int), 60)
    smooth, q = design.smooth_basis, _rw2_penalty(60)
    full = np.linalg.pinv(q, rcond=1e-10)
    if modes is None:
        assert smooth.shape == (60, 58)
        np.testing.assert_allclose(smooth @ smooth.T, full, atol=1e-9)
        return
    assert smooth.shape == (60, modes)
    np.testing.assert_allclose(smooth.T @ q @ smooth, np.eye(modes), atol=1e-8)
    np.testing.assert_allclose(design.fixed_basis.T @ smooth, 0.0, atol=1e-9)
    # the kept functions' penalties (per unit length) are the smallest non-zero
    # eigenvalues of the penalty built here from its differences
    direction = smooth / np.linalg.norm(smooth, axis=0)
    rayleigh = np.sort(np.einsum("ki,kl,li->i", direction, q, direction))
    penalties = np.sort(np.linalg.eigvalsh(q))[2:]
    np.testing.assert_allclose(rayleigh, penalties[:modes], rtol=1e-8)
    kept = np.trace(smooth @ smooth.T) / np.trace(full)
    np.testing.assert_allclose(kept, np.sum(1 / penalties[:modes]) / np.sum(1 / penalties))
    assert abs(kept - share) < 1e-6, kept
    assert design.record()["n_smooth"] == modes


def test_truncation_keeps_the_largest_variance_functions_with_a_first_order_walk(monkeypatch):
    """With RW1_SHARE the basis comes from an eigen-decomposition of the covariance, not
    from the random walk's own ordered basis; the truncation must still keep the
    SMOOTH_MODES_1D functions of largest prior variance: those of the covariance's
    largest eigenvalues, computed here."""
    monkeypatch.setattr(_design, "RW1_SHARE", 0.3)
    modes = _design.SMOOTH_MODES_1D
    y = np.linspace(0.0, 1.0, 300)[:, None]
    design = _design.design_kernels(y, y, np.ones(300, int), 60)
    monkeypatch.setattr(_design, "SMOOTH_MODES_1D", None)
    full = _design.design_kernels(y, y, np.ones(300, int), 60).smooth_basis
    values = np.sort(np.linalg.eigvalsh(full @ full.T))[::-1][:modes]
    kept = np.sort(np.linalg.eigvalsh(design.smooth_basis @ design.smooth_basis.T))[::-1][:modes]
    np.testing.assert_allclose(kept, values, rtol=1e-8)


def test_basis_of_a_covariance_is_ordered_largest_variance_first():
    """``_basis_of(cov)``: B B' = cov, orthogonal columns, their variances (squared norms)
    the covariance's non-zero eigenvalues in descending order, the null directions
    dropped. Checked on a covariance built here with known eigenvalues."""
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    eigen = np.array([0.5, 4.0, 0.0, 2.0, 1e-3, 0.0, 3.0, 1.0])
    cov = (q * eigen) @ q.T
    basis = _design._basis_of(cov)
    np.testing.assert_allclose(basis @ basis.T, cov, atol=1e-12)
    np.testing.assert_allclose(np.sum(basis**2, axis=0), [4.0, 3.0, 2.0, 1.0, 0.5, 1e-3])


def test_leading_keeps_by_cutoff_share_and_count():
    """``_leading``: largest first; above cutoff x largest; the fewest reaching the share
    of the total; at most ``count``. Against the choices worked out by hand."""
    values = np.array([1.0, 8.0, 0.01, 4.0, 2.0, -1e-12])  # total of positives 15.01
    assert _design._leading(values, 0.0, None).tolist() == [1, 3, 4, 0, 2]
    assert _design._leading(values, 0.1, None).tolist() == [1, 3, 4, 0]  # 0.01 < 0.8
    assert _design._leading(values, 0.0, 0.75).tolist() == [1, 3]  # 12 >= 11.26
    assert _design._leading(values, 0.0, 0.81).tolist() == [1, 3, 4]  # 12 < 12.16
    assert _design._leading(values, 0.0, None, count=2).tolist() == [1, 3]
    assert _design._leading(values, 0.0, 0.81, count=5).tolist() == [1, 3, 4]


def test_rw2_scale_is_the_size_of_the_non_linear_part_whatever_the_nodes():
    """delta^-3 makes the prior a discretised integrated Wiener process: the prior sd of the
    function's value at the centre of the range (linear part removed) barely moves when
    the grid is refined; without delta^-3 it would grow like nodes^1.5."""
    sds = []
    for nodes in (10, 40, 160):
        y = np.linspace(0.0, 1.0, 200)[:, None]
        design = _design.design_kernels(y, y, np.ones(200, int), nodes)
        cov = design.smooth_basis @ design.smooth_basis.T
        sds.append(np.sqrt(cov[nodes // 2, nodes // 2]))
    assert max(sds) / min(sds) < 1.25, sds  # measured 1.15 (0.065, 0.058, 0.056)
    assert 0.005 < sds[-1] < 0.1, sds  # ~ a cubic spline's scale over a unit range


@pytest.mark.parametrize("share", [0.1, 1.0])
def test_first_order_walk_share_adds_a_wiener_process_off_the_linear_functions(monkeypatch, share):
    """RW1_SHARE s: covariance Q2^+ + s Q1^+, both on the complement of the linear functions.

    Checked against an independent construction of the first-order part: a Wiener process
    on the nodes (covariance min(t_i, t_j) on the unit range, a walk with increments of
    variance delta) with the constant and linear functions projected out, which is what
    ``Q1^+`` restricted to that complement is.
    """
    nodes = 12
    y = np.linspace(0.0, 1.0, 100)[:, None]
    shipped = _design.design_kernels(y, y, np.ones(100, int), nodes)
    monkeypatch.setattr(_design, "RW1_SHARE", share)
    design = _design.design_kernels(y, y, np.ones(100, int), nodes)
    t = np.linspace(0.0, 1.0, nodes)
    wiener = np.minimum.outer(t, t)
    basis, _ = np.linalg.qr(shipped.fixed_basis)
    perp = np.eye(nodes) - basis @ basis.T
    expected = shipped.smooth_basis @ shipped.smooth_basis.T + share * perp @ wiener @ perp
    np.testing.assert_allclose(design.smooth_basis @ design.smooth_basis.T, expected,
                               atol=1e-9 * np.abs(expected).max())  # fmt: skip
    # the null space (Platt's smooth limit) and its prior are unchanged
    np.testing.assert_array_equal(design.fixed_basis, shipped.fixed_basis)
    np.testing.assert_allclose(design.fixed_basis.T @ design.smooth_basis, 0.0, atol=1e-9)
    assert design.smooth_basis.shape == (nodes, nodes - 2)
    # the rougher part lets one kernel bend: the prior sd of the second difference grows
    second = np.diff(np.eye(nodes), n=2, axis=0)
    bend = np.sqrt(np.diag(second @ expected @ second.T))
    bend_shipped = np.sqrt(np.diag(second @ shipped.smooth_basis @ shipped.smooth_basis.T
                                   @ second.T))  # fmt: skip
    assert np.all(bend > 2 * bend_shipped)


def test_first_order_walk_share_leaves_two_dimensions_alone(monkeypatch):
    rng = np.random.default_rng(3)
    y = rng.normal(size=(300, 2))
    shipped = _design.design_kernels(y, y, np.ones(300, int), 36)
    monkeypatch.setattr(_design, "RW1_SHARE", 1.0)
    design = _design.design_kernels(y, y, np.ones(300, int), 36)
    np.testing.assert_array_equal(design.smooth_basis, shipped.smooth_basis)


# --- kernel values ---------------------------------------------------------------------


def _brute_kernels(loc, width, lower, upper, censored):
    n, k = lower.shape[0], loc.shape[0]
    out = np.ones((n, k))
    for i in range(n):
        for j in range(k):
            for d in range(loc.shape[1]):
                m, s = loc[j, d], width[d]
                if censored[d]:
                    a, b = lower[i, d], upper[i, d]
                    if a + b > 2 * m:  # above the centre: survival functions keep precision
                        out[i, j] *= stats.norm.sf(a, m, s) - stats.norm.sf(b, m, s)
                    else:
                        out[i, j] *= stats.norm.cdf(b, m, s) - stats.norm.cdf(a, m, s)
                else:
                    out[i, j] *= stats.norm.pdf(lower[i, d], m, s)
    return out


def test_kernel_matrix_point_rows_equal_scipy_density():
    loc = np.linspace(-2, 3, 7)[:, None]
    width = np.array([0.8])
    y = np.array([[-4.0], [-2.0], [0.1], [2.9], [6.0]])
    kern, log_scale = _design.kernel_matrix(loc, width, y, y, [0])
    brute = _brute_kernels(loc, width, y, y, [0])
    np.testing.assert_allclose(kern * np.exp(log_scale)[:, None], brute, rtol=1e-12)
    np.testing.assert_array_equal(kern.max(axis=1), 1.0)
    np.testing.assert_allclose(log_scale, np.log(brute.max(axis=1)), rtol=1e-12)


def test_kernel_matrix_censored_and_mixed_rows_with_infinite_edges():
    rng = np.random.default_rng(4)
    loc = np.column_stack([rng.normal(0, 1.5, 9), rng.normal(0, 1.5, 9)])
    width = np.array([0.7, 1.3])
    n = 8
    point = rng.normal(0, 2, n)
    lo_c = rng.normal(0, 2, n)
    hi_c = lo_c + rng.uniform(0.05, 1.0, n)
    lo_c[[0, 3]] = -np.inf
    hi_c[[1, 4]] = np.inf
    lower, upper = np.column_stack([point, lo_c]), np.column_stack([point, hi_c])
    kern, log_scale = _design.kernel_matrix(loc, width, lower, upper, [0, 1])
    brute = _brute_kernels(loc, width, lower, upper, [0, 1])
    assert kern.shape == (n, 9) and log_scale.shape == (n,)
    np.testing.assert_allclose(kern * np.exp(log_scale)[:, None], brute, rtol=1e-10)
    np.testing.assert_array_equal(kern.max(axis=1), 1.0)
    assert ((kern > 0) & (kern <= 1)).all()
    # values below 1e-300 of a row's largest are flushed to 0 (Stan's JSON readers reject
    # subnormal numbers); a point 400 away from kernels 0.7 wide makes some
    far, _ = _design.kernel_matrix(loc, width, np.array([[400.0, 0.0]]),
                                   np.array([[400.0, 0.5]]), [0, 1])  # fmt: skip
    assert far.min() == 0.0 and far.max() == 1.0
    assert (far[far > 0] >= 1e-300).all()
    # censored only: the whole line is one bin of probability 1 under every kernel
    whole = np.array([[-np.inf], [-np.inf]]), np.array([[np.inf], [0.0]])
    kern1, log1 = _design.kernel_matrix(loc[:, :1], width[:1], *whole, [1])
    np.testing.assert_allclose(kern1[0], 1.0)
    assert log1[0] == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(kern1[1] * np.exp(log1[1]),
                               stats.norm.cdf(0.0, loc[:, 0], width[0]), rtol=1e-12)  # fmt: skip


def test_kernel_matrix_far_rows_keep_their_scale_in_log():
    """A bin 40 widths out has probability ~1e-350 (below the smallest double): the row's
    log scale carries it, and the kernel ratios stay exact."""
    loc = np.array([[0.0], [1.0]])
    kern, log_scale = _design.kernel_matrix(loc, [1.0], np.array([[40.0]]), np.array([[40.5]]), [1])
    expected = stats.norm.logsf(39.0) + np.log1p(-np.exp(stats.norm.logsf(39.5) -
                                                         stats.norm.logsf(39.0)))  # fmt: skip
    assert log_scale[0] == pytest.approx(expected, rel=1e-10)
    ratio = np.exp(stats.norm.logsf(40.0) + np.log1p(-np.exp(stats.norm.logsf(40.5)
                                                             - stats.norm.logsf(40.0)))
                   - expected)  # fmt: skip
    np.testing.assert_allclose(kern[0], [ratio, 1.0], rtol=1e-9)


# --- centres for three or more dimensions ------------------------------------------


def _blobs(rng, n=900):
    centres = rng.normal(0, 4, (6, 3))
    which = rng.integers(0, 6, n)
    y = centres[which] + rng.normal(0, 1, (n, 3))
    counts = rng.integers(1, 4, n)
    return y, counts


def test_centres_design_is_deterministic_for_a_seed():
    rng = np.random.default_rng(5)
    y, counts = _blobs(rng)
    a = _design.design_kernels(y, y, counts, seed=3)
    b = _design.design_kernels(y, y, counts, seed=3)
    c = _design.design_kernels(y, y, counts, seed=4)
    assert a.kind == "centres" and a.shape == ()
    assert a.loc.shape == (_design.auto_components(3, counts.sum()), 3)
    np.testing.assert_array_equal(a.loc, b.loc)
    np.testing.assert_array_equal(a.smooth_basis, b.smooth_basis)
    assert not np.array_equal(a.loc, c.loc)  # the seed matters: it is recorded
    assert a.width.shape == (3,) and (a.width > 0).all() and np.isfinite(a.width).all()


def test_centres_are_a_fixed_point_of_weighted_k_means():
    """Each centre is the count-weighted mean of the (standardised) outputs nearest to it."""
    rng = np.random.default_rng(6)
    y, counts = _blobs(rng)
    design = _design.design_kernels(y, y, counts, 24, seed=1)
    low = np.array([_item_quantiles(y[:, j], counts)[0] for j in range(3)])
    high = np.array([_item_quantiles(y[:, j], counts)[1] for j in range(3)])
    u = np.clip((y - low) / (high - low) - 0.5, -0.5, 0.5)
    centres_u = (design.loc - low) / (high - low) - 0.5
    np.testing.assert_allclose(design.fixed_basis[:, 1:], centres_u, atol=1e-12)
    nearest = cdist(u, centres_u).argmin(axis=1)
    for j in range(design.n_components):
        mine = nearest == j
        assert mine.any()
        mean = (u[mine] * counts[mine, None]).sum(axis=0) / counts[mine].sum()
        np.testing.assert_allclose(centres_u[j], mean, atol=1e-7)


def test_centres_class_balanced_candidate_weighs_k_means_by_the_blend(monkeypatch):
    """CENTRES_CLASS_BALANCED = s: the centres are those of counts-share ``1 - s`` plus
    class-balanced share ``s`` (each normalised), so s = 1 is the design of the balanced
    weights alone, s = 0 that of the counts, and the knob is off by default."""
    rng = np.random.default_rng(8)
    y, counts = _blobs(rng, 600)
    cls = (y[:, 0] > np.quantile(y[:, 0], 0.85)).astype(int)  # a rare class, one region
    balanced = counts / np.bincount(cls, weights=counts)[cls]
    assert _design.CENTRES_CLASS_BALANCED == 0
    off = _design.design_kernels(y, y, counts, 30, seed=2, range_weights=balanced)
    np.testing.assert_array_equal(off.loc, _design.design_kernels(y, y, counts, 30, seed=2).loc)
    monkeypatch.setattr(_design, "CENTRES_CLASS_BALANCED", 1.0)
    full = _design.design_kernels(y, y, counts, 30, seed=2, range_weights=balanced)
    alone = _design.design_kernels(y, y, balanced, 30, seed=2)  # no range_weights: no blend
    np.testing.assert_allclose(full.loc, alone.loc, rtol=0, atol=1e-9)
    # the rare class's region gets more centres than the counts gave it
    edge = np.quantile(y[:, 0], 0.85)
    assert (full.loc[:, 0] > edge).sum() > (off.loc[:, 0] > edge).sum()
    monkeypatch.setattr(_design, "CENTRES_CLASS_BALANCED", 0.5)
    half = _design.design_kernels(y, y, counts, 30, seed=2, range_weights=balanced)
    blend = 0.5 * counts / counts.sum() + 0.5 * balanced / balanced.sum()
    monkeypatch.setattr(_design, "CENTRES_CLASS_BALANCED", 0.0)
    np.testing.assert_allclose(
        half.loc, _design.design_kernels(y, y, blend, 30, seed=2).loc, rtol=0, atol=1e-9
    )


@pytest.mark.parametrize("power", [1.0, 2.5])
def test_centres_local_width_candidate_scales_each_kernel_by_its_own_spacing(monkeypatch, power):
    """CENTRES_LOCAL_WIDTH = m: kernel k's widths are the global widths times
    (r_k / median r) ** CENTRES_LOCAL_POWER clipped to [1/2, 2], r_k the distance (in the
    standardised coordinates) from centre k to its m-th nearest other centre; recomputed
    here with scipy's distances from the design's own centres."""
    rng = np.random.default_rng(9)
    y, counts = _blobs(rng, 700)
    base = _design.design_kernels(y, y, counts, 40, seed=5)
    monkeypatch.setattr(_design, "CENTRES_LOCAL_WIDTH", 3)
    monkeypatch.setattr(_design, "CENTRES_LOCAL_POWER", power)
    local = _design.design_kernels(y, y, counts, 40, seed=5)
    np.testing.assert_array_equal(local.loc, base.loc)  # same centres, same basis
    np.testing.assert_array_equal(local.smooth_basis, base.smooth_basis)
    assert base.width.shape == (3,) and local.width.shape == (40, 3)
    centres_u = local.fixed_basis[:, 1:]  # the standardised centres
    dist = cdist(centres_u, centres_u)
    np.fill_diagonal(dist, np.inf)
    third = np.sort(dist, axis=1)[:, 2]
    factor = np.clip((third / np.median(third)) ** power, 0.5, 2.0)
    np.testing.assert_allclose(local.width, base.width[None, :] * factor[:, None], rtol=1e-12)
    assert factor.min() < 1 < factor.max()  # the blobs crowd some centres, not others
    # the Stan data carry the per-kernel widths as they are
    kern, _ = _design.kernel_matrix(local.loc, local.width, y[:5], y[:5], np.zeros(3, bool))
    by_hand = np.exp(-0.5 * (((y[:5, None, :] - local.loc[None]) / local.width[None]) ** 2)
                     ).prod(axis=2) / local.width.prod(axis=1)[None]  # fmt: skip
    np.testing.assert_allclose(kern, by_hand / by_hand.max(axis=1, keepdims=True), rtol=1e-9)


def test_centres_gp_basis_is_orthogonal_to_the_linear_functions(monkeypatch):
    monkeypatch.setattr(_design, "GP_VARIANCE_SHARE", None)  # the untruncated process
    rng = np.random.default_rng(7)
    y, counts = _blobs(rng)
    design = _design.design_kernels(y, y, counts, seed=0)
    fixed, smooth = design.fixed_basis, design.smooth_basis
    u = fixed[:, 1:]
    np.testing.assert_array_equal(fixed[:, 0], 1.0)
    np.testing.assert_allclose(fixed.T @ smooth, 0.0, atol=1e-9)
    # smooth @ smooth.T is the squared-exponential covariance (lengthscale twice the
    # median nearest-centre distance) with [1, u] projected out, up to the truncated
    # eigenvalues (below 1e-6 of the largest)
    dist = cdist(u, u)
    np.fill_diagonal(dist, np.inf)
    ell = 2.0 * np.median(dist.min(axis=1))
    np.fill_diagonal(dist, 0.0)
    cov = np.exp(-0.5 * (dist / ell) ** 2)
    proj = np.eye(len(u)) - fixed @ np.linalg.pinv(fixed)
    target = proj @ cov @ proj
    top = np.linalg.eigvalsh(target).max()
    np.testing.assert_allclose(smooth @ smooth.T, target, atol=1e-5 * top)
    assert smooth.shape[1] <= len(u) - 4  # the four fixed functions are not among them


def _gp_target(design):
    """The centres' GP covariance with [1, u] projected out, written out independently."""
    u = design.fixed_basis[:, 1:]
    dist = cdist(u, u)
    np.fill_diagonal(dist, np.inf)
    ell = _design.GP_LENGTHSCALE_FACTOR * np.median(dist.min(axis=1))
    np.fill_diagonal(dist, 0.0)
    cov = np.exp(-0.5 * (dist / ell) ** 2)
    proj = np.eye(len(u)) - design.fixed_basis @ np.linalg.pinv(design.fixed_basis)
    return proj @ cov @ proj


@pytest.mark.parametrize("share", [0.5, 0.9, 0.95, 0.99])
def test_centres_basis_keeps_the_stated_share_of_the_prior_variance(monkeypatch, share):
    """The kept functions carry at least ``share`` of the GP prior's total variance (the
    trace of its covariance, brute force), and one function fewer would not."""
    monkeypatch.setattr(_design, "GP_VARIANCE_SHARE", share)
    y, counts = _blobs(np.random.default_rng(11))
    design = _design.design_kernels(y, y, counts, seed=2)
    smooth, total = design.smooth_basis, np.trace(_gp_target(design))
    kept = np.trace(smooth @ smooth.T)
    assert kept >= share * total * (1 - 1e-9)
    variances = (smooth**2).sum(axis=0)  # of each kept function, largest first
    assert np.all(np.diff(variances) <= 1e-12 * variances[0])
    assert kept - variances[-1] < share * total


@pytest.mark.parametrize("share", [0.9, 0.99])
def test_centres_truncated_basis_spans_the_leading_eigenspace(monkeypatch, share):
    """smooth @ smooth.T is the covariance's best rank-R approximation: its R leading
    eigenvalues and eigenvectors (numpy's eigh on the covariance written out)."""
    monkeypatch.setattr(_design, "GP_VARIANCE_SHARE", share)
    y, counts = _blobs(np.random.default_rng(12))
    design = _design.design_kernels(y, y, counts, seed=4)
    smooth = design.smooth_basis
    r = smooth.shape[1]
    values, vectors = np.linalg.eigh(_gp_target(design))
    lead = vectors[:, ::-1][:, :r]
    assert r < len(values) - 4  # truncated: fewer than the non-fixed functions
    np.testing.assert_allclose(smooth @ smooth.T, (lead * values[::-1][:r]) @ lead.T,
                               atol=1e-9 * values.max())  # fmt: skip
    # the span: every kept function lies in the leading eigenspace and vice versa
    np.testing.assert_allclose(lead @ (lead.T @ smooth), smooth, atol=1e-9)
    assert np.linalg.matrix_rank(smooth, tol=1e-9 * values.max()) == r
    np.testing.assert_allclose(design.fixed_basis.T @ smooth, 0.0, atol=1e-9)


def test_variance_share_leaves_the_grids_alone(monkeypatch):
    """One and two output dimensions keep every penalised random-walk function."""
    rng = np.random.default_rng(13)
    y1, y2 = rng.normal(size=(300, 1)), rng.normal(size=(300, 2))
    before = [_design.design_kernels(y, y, np.ones(300, int)).smooth_basis for y in (y1, y2)]
    monkeypatch.setattr(_design, "GP_VARIANCE_SHARE", 0.5)
    after = [_design.design_kernels(y, y, np.ones(300, int)).smooth_basis for y in (y1, y2)]
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    assert before[0].shape[1] == min(_design.GRID_1D - 2, _design.SMOOTH_MODES_1D)
    # four free functions on a 2-D grid, six with the squares (QUADRATIC_NULL_2D)
    assert before[1].shape[1] == _design.GRID_2D**2 - (6 if _design.QUADRATIC_NULL_2D else 4)


def test_centres_record_names_the_smoothing_basis():
    """A saved transducer records how the centres' basis was cut (the predictions need
    only the stored kernels: mu, sigma, w and alpha are draws in the file)."""
    y, counts = _blobs(np.random.default_rng(14))
    design = _design.design_kernels(y, y, counts, seed=0)
    record = design.record()
    assert record["kind"] == "centres"
    assert record["n_smooth"] == design.smooth_basis.shape[1]
    total = np.trace(_gp_target(design))
    kept = np.trace(design.smooth_basis @ design.smooth_basis.T)
    np.testing.assert_allclose(record["gp_variance_share"], kept / total, rtol=1e-9)
    assert record["gp_variance_share"] >= _design.GP_VARIANCE_SHARE
    u = design.fixed_basis[:, 1:]
    dist = cdist(u, u)
    np.fill_diagonal(dist, np.inf)
    np.testing.assert_allclose(record["gp_lengthscale"], 2.0 * np.median(dist.min(axis=1)))
    grid = _design.design_kernels(y[:, :1], y[:, :1], counts).record()
    assert "gp_variance_share" not in grid and grid["n_smooth"] == _design.SMOOTH_MODES_1D


# --- n_components -------------------------------------------------------------------


def test_check_components_accepts_auto_and_positive_ints():
    assert check_components("auto") is None
    assert check_components(7) == 7
    assert check_components(np.int64(12)) == 12


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([5, 4], r"n_components must be \"auto\" or a positive int, found \[5, 4\]: the ladder"),
        ((6, 4, 3), r"found \(6, 4, 3\): the ladder of component counts is gone"),
        ("five", r"n_components must be \"auto\" or a positive int, found 'five'"),
        (0, r"n_components must be a positive integer, found 0"),
        (2.5, r"n_components must be a positive integer, found 2.5"),
        (True, r"n_components must be a positive integer, found True"),
    ],
)
def test_bad_n_components_are_refused_before_any_sampling(value, message):
    with pytest.raises(ValueError, match=message):
        check_components(value)
    rng = np.random.default_rng(8)
    y, c = rng.normal(size=50), np.repeat([0, 1], 25)
    with pytest.raises(ValueError, match=message):
        Transducer(n_components=value).fit(y, c)


def test_too_few_kernels_for_the_dimensions_are_refused():
    rng = np.random.default_rng(9)
    y, c = rng.normal(size=50), np.repeat([0, 1], 25)
    with pytest.raises(ValueError, match="at least 3 kernels per output dimension, found 2"):
        Transducer(n_components=2).fit(y, c)
    y3 = rng.normal(size=(50, 3))
    with pytest.raises(ValueError, match="at least 5 for 3 output dimensions"):
        _design.design_kernels(y3, y3, np.ones(50, int), 4)


def test_auto_components():
    assert _design.auto_components(1) == 60
    assert _design.auto_components(2) == 196
    assert _design.auto_components(3) == 120  # no n: CENTRES_PER_DIM 40, capped at 120
    assert _design.auto_components(20) == _design.MAX_CENTRES == 120


def test_centres_growing_with_the_calibration_items(monkeypatch):
    """CENTRES_PER_ROOT_N: round(c sqrt(n)) centres, clipped to [120, 240] by default;
    the grids keep their sizes; a design takes n as the rows' counts summed."""
    # by hand: 3.65 * sqrt(1079) = 119.90, sqrt(2000) -> 163.23, sqrt(3600) -> 219
    assert _design.CENTRES_PER_ROOT_N == 3.65
    assert _design.auto_components(3, 1079) == 120
    assert _design.auto_components(3, 300) == _design.CENTRES_GROWN_MIN == 120
    assert _design.auto_components(4, 2000) == 163
    assert _design.auto_components(3, 3600) == 219
    assert _design.auto_components(3, 1e7) == _design.CENTRES_GROWN_MAX == 240
    assert _design.auto_components(1, 3600) == 60 and _design.auto_components(2, 3600) == 196
    monkeypatch.setattr(_design, "CENTRES_GROWN_MIN", 2)
    assert _design.auto_components(4, 300) == 63  # 3.65 * sqrt(300) = 63.22
    assert _design.auto_components(3, 1) == 5  # never fewer than D + 2
    monkeypatch.setattr(_design, "CENTRES_PER_ROOT_N", 0.0)  # off: the fixed rule
    assert _design.auto_components(3, 3600) == 120
    monkeypatch.setattr(_design, "CENTRES_PER_ROOT_N", 3.65)
    rng = np.random.default_rng(5)
    y, counts = _blobs(rng, n=400)
    counts[:] = 1
    counts[:20] = 16  # 700 items on 400 rows: round(3.65 sqrt(700)) = 97 (the floor lowered)
    design = _design.design_kernels(y, y, counts, seed=1)
    assert design.loc.shape == (97, 3)
    assert _design.design_kernels(y, y, counts, 50, seed=1).loc.shape == (50, 3)


def test_an_extended_grid_reaches_every_output_at_the_same_spacing(monkeypatch):
    """EXTEND_1D: nodes added below and above the 1 % / 99 % range at its spacing, until
    every output lies within one spacing of a node (at most EXTEND_MAX_1D per side); the
    atoms at the ends are not reached for; u runs on at the same step, the random walk's
    penalty keeps its step (checked against the second differences written here), and
    the smooth functions kept grow in proportion to the nodes."""
    monkeypatch.setattr(_design, "EXTEND_1D", 1)
    rng = np.random.default_rng(4)
    inner = rng.normal(0.0, 1.0, 800)
    values = np.r_[inner, np.full(170, -9.0)]  # an atom far below: left to the tails
    _, rows, counts = _stan_data.merge_rows(np.zeros(values.size, int), values)
    design = _design.design_kernels(rows, rows, counts)
    low, high = np.quantile(inner, RANGE, method="inverted_cdf")
    step = (high - low) / (_design.GRID_1D - 1)
    loc = design.loc[:, 0]
    np.testing.assert_allclose(np.diff(loc), step, rtol=1e-9)
    first = int(np.argmin(np.abs(loc - low)))
    np.testing.assert_allclose(loc[first : first + _design.GRID_1D][[0, -1]], [low, high])
    assert np.abs(inner[:, None] - loc[None]).min(axis=1).max() <= step * (1 + 1e-9)
    assert loc[0] > inner.min() - 2 * step  # no node more than needed, nor for the atom
    assert loc[-1] < inner.max() + 2 * step
    u = design.fixed_basis[:, 1]
    np.testing.assert_allclose(np.diff(u), 1 / (_design.GRID_1D - 1), rtol=1e-9)
    assert u[first] == pytest.approx(-0.5)
    nodes = loc.size
    d2 = np.diff(np.eye(nodes), n=2, axis=0)
    q = d2.T @ d2 * (_design.GRID_1D - 1) ** 3
    kept = round(_design.SMOOTH_MODES_1D * nodes / _design.GRID_1D)
    assert design.smooth_basis.shape == (nodes, kept)
    # the kept functions are the penalty's smoothest: the prior precision's eigenvectors
    # of smallest non-zero eigenvalue, each scaled by the inverse square root of it
    values_q, vectors_q = np.linalg.eigh(q)
    want = vectors_q[:, 2 : 2 + kept] / np.sqrt(values_q[2 : 2 + kept])
    np.testing.assert_allclose(design.smooth_basis @ design.smooth_basis.T, want @ want.T,
                               atol=1e-8)  # fmt: skip
    # far outliers: at most EXTEND_MAX_1D nodes per side
    far = np.r_[inner, [40.0]]
    _, rows, counts = _stan_data.merge_rows(np.zeros(far.size, int), far)
    extended = _design.design_kernels(rows, rows, counts)
    far_high = np.quantile(far, RANGE, method="inverted_cdf")[1]
    assert int((extended.loc[:, 0] > far_high + step / 2).sum()) == _design.EXTEND_MAX_1D
    monkeypatch.setattr(_design, "EXTEND_1D", 0)
    assert _design.design_kernels(rows, rows, counts).loc.shape[0] == _design.GRID_1D


def test_the_default_grid_reaches_every_bin_of_a_lattice_only(monkeypatch):
    """EXTEND_1D = 3 (the default): an axis of censored bins (a 0-6 rating scale) is
    extended until every bin's midpoint lies within one spacing of a node, while an axis
    of exact values keeps its 1 % / 99 % grid. A top bin holding under 1 % of the items
    (6: 15 of 2,015) lies beyond the 99 % quantile (5), 12 kernel widths from the last
    node of a grid that stops there, its items left to that kernel's Normal tail (2,000
    such ratings sampled with 196 divergent transitions, R-hat 1.08: benchmarks.md)."""
    assert _design.EXTEND_1D == 3
    midpoints = np.arange(7.0)
    counts = np.array([80, 240, 500, 610, 400, 170, 15])
    rows = np.column_stack([midpoints - 0.5, midpoints + 0.5])

    def nodes(mode, lower, upper, weights):
        monkeypatch.setattr(_design, "EXTEND_1D", mode)
        return _design.design_kernels(lower, upper, weights).loc[:, 0]

    plain = nodes(0, rows[:, :1], rows[:, 1:], counts)
    assert plain[0] == pytest.approx(0.0) and plain[-1] == pytest.approx(5.0)
    step = 5.0 / (_design.GRID_1D - 1)
    assert (6.0 - plain[-1]) / (0.5 * step) > 11  # the last kernel is half a spacing wide
    lattice = nodes(3, rows[:, :1], rows[:, 1:], counts)
    np.testing.assert_allclose(np.diff(lattice), step, rtol=1e-9)
    np.testing.assert_allclose(lattice[: _design.GRID_1D], plain)  # below: unchanged
    assert 6.0 - step <= lattice[-1] < 6.0 + step  # the top bin's midpoint within a spacing
    # exact values (not bins): the default leaves the grid at its quantiles; 1 extends it
    inner = np.random.default_rng(4).normal(0.0, 1.0, 800)[:, None]
    ones = np.ones(800)
    assert np.array_equal(nodes(3, inner, inner, ones), nodes(0, inner, inner, ones))
    assert nodes(1, inner, inner, ones).size > _design.GRID_1D


def test_an_extended_grid_can_keep_its_edge_on_an_atoms_side(monkeypatch):
    """EXTEND_1D = 2: the grid is extended only on a side without an edge atom. With an
    atom far below the continuous part (left out of the range, EDGE_ATOM_SHARE), the lower
    end stays at the 1 % quantile, the upper end reaches the largest output; with 1 both
    ends reach the continuous part's extremes; no atom: 2 is 1."""
    rng = np.random.default_rng(4)
    inner = rng.normal(0.0, 1.0, 800)
    low, high = np.quantile(inner, RANGE, method="inverted_cdf")
    step = (high - low) / (_design.GRID_1D - 1)

    def ends(values, mode):
        monkeypatch.setattr(_design, "EXTEND_1D", mode)
        _, rows, counts = _stan_data.merge_rows(np.zeros(values.size, int), values)
        loc = _design.design_kernels(rows, rows, counts).loc[:, 0]
        return loc[0], loc[-1]

    atom_below = np.r_[inner, np.full(170, -9.0)]
    lowest, highest = ends(atom_below, 2)
    assert lowest == pytest.approx(low) and inner.max() - step <= highest < inner.max() + step
    lowest, highest = ends(atom_below, 1)
    assert inner.min() - step <= lowest < inner.min() + step
    assert ends(inner, 2) == ends(inner, 1)
    assert ends(inner, 1)[0] < low - step  # the normal's tail reaches beyond the 1 % quantile


def test_kmeans_keeps_the_run_of_least_weighted_inertia(monkeypatch):
    """KMEANS_RESTARTS runs: run 0 from the seed's generator (one run is the plain
    k-means++ and Lloyd), run r from [seed, r]'s; the centres kept are the run of least
    weighted inertia, checked against each run computed on its own."""
    from yieldwise import _design

    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(size=(300, 3)), rng.normal(4, 0.5, size=(60, 3))])
    weights = rng.integers(1, 4, len(points)).astype(float)

    def inertia(centres):
        return float(weights @ ((points[:, None] - centres[None]) ** 2).sum(axis=2).min(axis=1))

    def run(r):
        generator = np.random.default_rng(7 if r == 0 else [7, r])
        start = _design._kmeans_plus_plus(points, weights, 12, generator)
        return _design._lloyd(points, weights, start)

    monkeypatch.setattr(_design, "KMEANS_RESTARTS", 1)
    single = _design._kmeans(points, weights, 12, 7)
    np.testing.assert_array_equal(single, run(0))
    monkeypatch.setattr(_design, "KMEANS_RESTARTS", 6)
    kept = _design._kmeans(points, weights, 12, 7)
    inertias = [inertia(run(r)) for r in range(6)]
    assert inertia(kept) == min(inertias) and len(set(np.round(inertias, 6))) > 1
    np.testing.assert_array_equal(kept, _design._kmeans(points, weights, 12, 7))  # seeded
    # Lloyd's fixed point: every centre the weighted mean of the points nearest to it
    nearest = ((points[:, None] - kept[None]) ** 2).sum(axis=2).argmin(axis=1)
    for j in range(len(kept)):
        mine = nearest == j
        np.testing.assert_allclose(kept[j], weights[mine] @ points[mine] / weights[mine].sum(),
                                   atol=1e-8)  # fmt: skip
