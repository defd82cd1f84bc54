"""The benchmark panel's clipped-scores and ten-class problems (bench/_problems.py) against
simulation and their closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

# The problem as its docstring states it: class c scores N(m_c, sd_c), clipped to [0, 1].
LAWS = [(0.25, 0.30), (0.70, 0.25)]
PREVALENCES = [0.85, 0.15]


@pytest.fixture(scope="module")
def problem(bench_import):
    module = bench_import("_problems")
    # appended in turn: the problems before each keep their seeds (their place in the panel)
    assert module.PANEL.index(module.clipped_problem) == 7
    assert module.PANEL[-1] is module.softmax_ten_problem
    return module.clipped_problem()


def closed_form(y: float) -> float:
    """p(1 | y) by hand: point masses Phi(-m/sd) at 0 and Phi((m - 1)/sd) at 1; densities
    in between."""
    if y == 0:
        like = [stats.norm.cdf(0, m, sd) for m, sd in LAWS]
    elif y == 1:
        like = [stats.norm.sf(1, m, sd) for m, sd in LAWS]
    else:
        like = [stats.norm.pdf(y, m, sd) for m, sd in LAWS]
    joint = np.multiply(PREVALENCES, like)
    return float(joint[1] / joint.sum())


def test_partition_is_the_point_masses_and_fine_cells(problem):
    np.testing.assert_array_equal(problem.prevalences, PREVALENCES)
    y = problem.cells[:, 0]
    assert y[0] == 0.0 and y[-1] == 1.0 and y.size == 4002
    assert (np.diff(y) > 0).all() and np.allclose(np.diff(y[1:-1]), 1 / 4000)
    np.testing.assert_allclose(problem.class_mass.sum(axis=0), 1.0, rtol=0, atol=1e-12)
    w = problem.joint()
    # the point masses by hand: P(y = 0) and P(y = 1), class by class
    np.testing.assert_allclose(
        w[0], np.multiply(PREVALENCES, [stats.norm.cdf(-m / sd) for m, sd in LAWS]), rtol=1e-12
    )
    np.testing.assert_allclose(
        w[-1], np.multiply(PREVALENCES, [stats.norm.cdf((m - 1) / sd) for m, sd in LAWS]),
        rtol=1e-12,
    )  # fmt: skip
    assert 0.17 < w[0].sum() < 0.18 and 0.02 < w[-1].sum() < 0.025  # as the docstring says


@pytest.mark.parametrize("y", [0.0, 1e-3, 0.1, 0.37, 0.5, 0.9, 0.999, 1.0])
def test_truth_is_the_closed_form(problem, y):
    cells = problem.cells[:, 0]
    # the cell holding y: the point mass itself, or the inner cell of width 1/4000
    g = 0 if y == 0 else cells.size - 1 if y == 1 else 1 + int(y * 4000)
    truth = problem.truth()[g, 1]
    if y in (0.0, 1.0):
        assert truth == pytest.approx(closed_form(y), rel=1e-12)
    else:
        # a cell's mass ratio against the densities' ratio at its midpoint: O(h^2)
        assert truth == pytest.approx(closed_form(cells[g]), rel=1e-6)
    # the truth jumps at the ends: the point masses are not the limits of the density
    assert problem.truth()[0, 1] < 0.5 * closed_form(1e-9)
    assert problem.truth()[-1, 1] > closed_form(1 - 1e-9) + 0.05


def test_table_agrees_with_simulation(problem):
    """200,000 draws: exact 0s and 1s, and 20 bins of the inner values, class by class,
    against W within Monte Carlo error (each count binomial)."""
    n = 200_000
    outputs, classes = problem.sample(n, np.random.default_rng(20261123))
    y = outputs[:, 0]
    assert outputs.shape == (n, 1) and ((y >= 0) & (y <= 1)).all()
    # group: 0 = exact zero, 1..20 = inner bins of width 0.05, 21 = exact one
    group = np.where(y == 0, 0, np.where(y == 1, 21, 1 + np.minimum(y // 0.05, 19).astype(int)))
    observed = np.zeros((22, 2))
    np.add.at(observed, (group, classes), 1)
    w = problem.joint()
    expected = np.vstack([w[:1], w[1:-1].reshape(20, 200, 2).sum(axis=1), w[-1:]]) * n
    assert expected.min() > 5  # every (group, class) expected in the hundreds or more
    z = (observed - expected) / np.sqrt(expected * (1 - expected / n))
    assert np.abs(z).max() < 4.5, np.abs(z).max()  # 44 counts: 4.5 sd is p < 3e-4 overall
    # and as one test: Pearson's chi-square over the 44 cells, 43 degrees of freedom
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert stats.chi2.sf(chi2, df=43) > 1e-3, chi2
    # the point masses themselves: counts of exact 0s and 1s per class within 4 sd
    for g in (0, 21):
        for c in (0, 1):
            assert abs(z[g, c]) < 4
    # an output strictly inside (0, 1) never lands on 0 or 1: only clipping makes them
    inner = (y > 0) & (y < 1)
    assert inner.mean() == pytest.approx(1 - w[0].sum() - w[-1].sum(), abs=4 * np.sqrt(0.2 / n))


def test_kernel_projection_recovers_the_weights_of_a_mixture_of_its_own_kernels(bench_import):
    """bench/kernel_projection.py's EM: a joint law that is exactly a mixture of the given
    kernels (on a fine grid of cells) is projected back onto its own weights."""
    from yieldwise._design import kernel_matrix

    projection = bench_import("kernel_projection")
    loc, width = np.array([[-1.5], [0.0], [2.0]]), np.array([0.8])
    truth = np.array([[0.30, 0.05], [0.10, 0.15], [0.02, 0.38]])
    cells = np.linspace(-8.0, 9.0, 3401)[:, None]
    density = stats.norm.pdf(cells, loc[:, 0], width[0])  # (cells, K), by scipy
    kern, log_scale = kernel_matrix(loc, width, cells, cells, np.zeros(1, int))
    np.testing.assert_allclose(kern * np.exp(log_scale)[:, None], density, rtol=1e-10)
    mass = density @ truth * (cells[1, 0] - cells[0, 0])
    beta = projection.project(kern, mass, iterations=20_000, tol=1e-14)
    np.testing.assert_allclose(beta, truth, atol=2e-3)
    probs = projection.class_probabilities(beta, kern)  # the per-cell scale cancels
    np.testing.assert_allclose(probs, (density @ truth) / (density @ truth).sum(1, keepdims=True),
                               atol=5e-3)  # fmt: skip


def test_ten_class_truth_is_the_closed_form_and_agrees_with_simulation(bench_import):
    """softmax-10: the partition's truth against the closed form written out here, and the
    closed form against class frequencies of simulated items binned by it."""
    from scipy.special import softmax

    module = bench_import("_problems")
    problem = module.softmax_ten_problem(points=20_000)
    means = 3.5 * np.eye(10)
    means[[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]] = 1.5
    centred = means - means.mean(axis=1, keepdims=True)

    def closed_form(p):
        z = np.log(p) - np.log(p).mean(axis=1, keepdims=True)
        return softmax(z @ centred.T - 0.5 * (centred**2).sum(axis=1), axis=1)

    np.testing.assert_allclose(problem.class_mass.sum(axis=0), 1.0, atol=1e-12)
    # the per-class renormalisation of the Monte Carlo partition moves the truth a little
    assert np.abs(problem.truth() - closed_form(problem.cells)).max() < 0.02
    margins = np.diff(np.sort(np.log(problem.cells), axis=1)[:, -2:], axis=1)[:, 0]
    assert (np.diff(margins) >= 0).all()  # ordered from ambiguous to confident
    rng = np.random.default_rng(11)
    outputs, classes = problem.sample(200_000, rng)
    truth = closed_form(outputs)
    for c in (0, 1):  # a class with a confuser and one confused with another
        q = truth[:, c]
        for low, high in ((0.02, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 0.98)):
            inside = (q >= low) & (q < high)
            observed = (classes[inside] == c).mean()
            se = np.sqrt(observed * (1 - observed) / inside.sum())
            assert abs(observed - q[inside].mean()) < 4 * se + 0.005, (c, low, observed)


def test_a_class_balance_variant_moves_the_truth_by_bayes_rule(bench_import):
    module = bench_import("_problems")
    base = module.logistic_problem()
    rare = module.with_positives(base, 0.02)
    assert rare.name == "logistic@2%" and "2 % positives" in rare.description
    np.testing.assert_array_equal(rare.prevalences, [0.98, 0.02])
    # the class-conditional laws are the panel's: the partition is shared
    np.testing.assert_array_equal(rare.class_mass, base.class_mass)
    # Bayes' rule by hand: the odds move by the ratio of the two balances' prior odds
    inner = (base.truth()[:, 1] > 1e-9) & (base.truth()[:, 0] > 1e-9)
    assert inner.sum() > 1000
    odds = base.truth()[inner, 1] / base.truth()[inner, 0]
    expected = odds * (0.02 / 0.98) / (0.2 / 0.8)
    np.testing.assert_allclose(rare.truth()[inner, 1] / rare.truth()[inner, 0], expected, rtol=1e-9)
    # and the sampler draws that balance
    _, classes = rare.sample(20_000, np.random.default_rng(3))
    assert abs(classes.mean() - 0.02) < 4 * np.sqrt(0.02 * 0.98 / 20_000)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_a_class_balance_variant_refuses_bad_frequencies(bench_import, bad):
    module = bench_import("_problems")
    with pytest.raises(ValueError, match="positives must lie strictly between 0 and 1"):
        module.with_positives(module.logistic_problem(), bad)


def test_a_class_balance_variant_is_for_binary_problems_only(bench_import):
    module = bench_import("_problems")
    with pytest.raises(ValueError, match="3 classes"):
        module.with_positives(module.softmax_problem(), 0.1)
