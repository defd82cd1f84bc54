"""Audit fixes of the long-run utility (theory 4), each against an independent answer.

* Several output dimensions (Monte Carlo): each draw's class masses are scaled to their
  exact sums ``F_t(c)`` (a ratio estimator), so ``u_t(U + b) = u_t(U) + b`` exactly
  (theory 1), rescaled utilities lie in [0, 1], a rule taking one decision everywhere is
  integrated exactly, and the answers agree with a dense 2-D grid.
* ``integration_error_draws`` under Monte Carlo is single draws' own error, measured here
  against ten times the points.
* The standard rule refuses output columns whose names name the classes in another
  order than ``classes_``.
* Empty utility batches and array entries beyond the utility limit are refused by name.

The transducers are a Laplace joint fit of two scores (fixed kernels, 3,000 draws) and
given draws (no Stan), whose integrals are recomputed on a grid or in closed form.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from yieldwise import Transducer, UtilityMatrix, compare, long_run_utility, oracle_utility
from yieldwise.utility import MAX_ABS_UTILITY, chart_matrices

LABELS = ("neg", "pos")
ACCURACY = np.eye(2)
COSTLY = np.array([[0.0, -3.0], [-1.0, 2.0]])  # decision pos unless p(pos | y) < 1/6


@pytest.fixture(scope="module")
def joint():
    """A joint transducer of two scores on the same 300 items (2-D output; Laplace draws,
    kernels fixed across draws: the factored Monte Carlo cells)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    a, b = rng.normal(1.2 * y, 1.0), rng.normal(0.8 * y, 1.0)
    outputs = {"a": pd.DataFrame({"a": a}), "b": pd.DataFrame({"b": b})}
    t = Transducer(backend="laplace", progress=False, seed=1).fit(outputs, np.array(LABELS)[y])
    assert t.transform_.model_dims == 2 and t.posterior.fixed_kernels
    return t


CENTRES = np.stack(np.meshgrid([-1.5, 0.0, 1.5], [-1.2, 0.0, 1.2]), -1).reshape(9, 2)


def given_draws(moving: bool, s: int = 40, seed: int = 5):
    """A 2-D, two-class mixture of nine kernels with ``s`` given draws; ``moving``: the
    kernels' centres differ between draws (the dense Monte Carlo cells)."""
    rng = np.random.default_rng(seed)
    k = len(CENTRES)
    lean = np.where(CENTRES[:, :1] + 0.5 * CENTRES[:, 1:] > 0, [0.25, 0.75], [0.8, 0.2])
    mu = np.broadcast_to(CENTRES, (s, k, 2)).copy()
    if moving:
        mu += rng.normal(0, 0.2, mu.shape)
    draws = {
        "w": rng.dirichlet(np.full(k, 20.0), s)[None],
        "alpha": np.stack([rng.dirichlet(60 * p, s) for p in lean], axis=1)[None],
        "mu": mu[None],
        "sigma": np.full((1, s, k, 2), 0.9),
    }
    frame = pd.DataFrame(rng.normal(size=(40, 2)), columns=["a", "b"])
    t = Transducer.from_draws(draws, frame, np.array(LABELS)[rng.integers(0, 2, 40)], LABELS,
                              output_transform="identity", resolution=None)  # fmt: skip
    assert t.posterior.fixed_kernels == (not moving)
    return t, draws


def grid_utility(draws, matrices) -> np.ndarray:
    """Each draw's long-run utility of the expected-utility rule (S, matrices) on a 700 x
    700 midpoint grid over [-6.5, 6.5]^2 (the kernels' mass outside is below 1e-9):
    ``u_t = sum_c sum_k w_tk alpha_tkc integral U[d(y), c] kernel_tk(y) dy``, ``d`` the
    argmax of the pooled ``sum_t G_t(c, y)``."""
    x = np.linspace(-6.5, 6.5, 701)
    mid = 0.5 * (x[1:] + x[:-1])
    area = (x[1] - x[0]) ** 2
    w, alpha = draws["w"][0], draws["alpha"][0]
    mu, sigma = draws["mu"][0], draws["sigma"][0]
    s, k = w.shape

    def kernel(t, j):
        return (norm.pdf(mid[:, None], mu[t, j, 0], sigma[t, j, 0])
                * norm.pdf(mid[None, :], mu[t, j, 1], sigma[t, j, 1]))  # fmt: skip

    pooled = np.zeros((2, len(mid), len(mid)))
    for t in range(s):
        for j in range(k):
            pooled += (w[t, j] * alpha[t, j])[:, None, None] * kernel(t, j)
    gains = [np.asarray(u)[np.einsum("dc,cab->dab", u, pooled).argmax(axis=0)]
             for u in matrices]  # fmt: skip
    values = np.zeros((s, len(matrices)))
    for t in range(s):
        for j in range(k):
            density = kernel(t, j) * area
            for m, g in enumerate(gains):
                values[t, m] += w[t, j] * alpha[t, j] @ np.einsum("ab,abc->c", density, g)
    return values


def class_masses(t: Transducer) -> np.ndarray:
    """``F_t(c) = sum_k w_tk alpha_tkc`` per draw, (S, C)."""
    return np.einsum("sk,skc->sc", t.posterior.w, t.posterior.alpha)


# ------------------------------------------------------------ shift invariance
@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")
@pytest.mark.parametrize("case", ["joint", "moving", "prevalences"])
def test_adding_a_constant_adds_it_to_every_draw(case, joint):
    """Theory 1: ``a U + b`` ranks everything as ``U`` does, and ``u_t(U + b) = u_t(U) +
    b`` for every draw. Monte Carlo masses whose class sums are ``F_t(c) (1 + eps_tc)``
    added ``b sum_c F_t(c) eps_tc`` instead: at b = 100 the joint fit's posterior sd of
    the accuracy grew 6.6 times."""
    t, options = joint, {}
    if case == "moving":
        t, _ = given_draws(moving=True)
    if case == "prevalences":
        options = {"prevalences": [0.3, 0.7]}
    batch = np.stack([ACCURACY, COSTLY, [[1.0, -1.0], [-2.0, 0.5]]])

    def rule(frame):  # a fixed rule: pos above the diagonal
        return np.where(frame.iloc[:, 0] > frame.iloc[:, 1], "pos", "neg")

    options["n_points"] = 2000  # any number of points: the identity is exact

    def as_matrices(values):
        return [UtilityMatrix(m, decisions=LABELS, classes=LABELS) for m in values]

    runs = [
        lambda u: long_run_utility(t, u, **options),
        lambda u: long_run_utility(t, as_matrices(u), rule=rule, **options),
        lambda u: oracle_utility(t, u, **options),
    ]
    for run in runs:
        base = run(batch).values
        for b in (1.0, 100.0, 1e6):
            shifted = run(batch + b).values
            np.testing.assert_allclose(shifted - base, b, rtol=0, atol=1e-12 * (1 + b))
    # the spread of the draws, and so every comparison of them, is that of U
    scaled = long_run_utility(t, 1000 * batch - 50, **options).values
    np.testing.assert_allclose(scaled, 1000 * long_run_utility(t, batch, **options).values - 50,
                               rtol=1e-12, atol=1e-9)  # fmt: skip


def test_a_shift_leaves_the_comparison_unchanged(joint):
    """compare's P(A beats B) reads the draws' differences, which a shift must not move
    (it went 0.998 -> 0.659 at b = 100)."""
    base = compare(joint, UtilityMatrix(ACCURACY, decisions=LABELS, classes=LABELS))
    shifted = compare(joint, UtilityMatrix(ACCURACY + 100, decisions=LABELS, classes=LABELS))
    pd.testing.assert_frame_equal(base.prob_superiority(), shifted.prob_superiority())


def test_rescaled_utilities_lie_in_the_unit_interval(joint):
    """Rescaled by each draw's worst and best achievable utility (theory 1), every draw lies
    in [0, 1]: the masses of class c sum to F_t(c) exactly, which is what the rescaling
    takes as the class frequencies."""
    batch = np.stack([ACCURACY + 100, COSTLY, COSTLY - 1e3, [[1.0, 1.0], [0.0, 2.0]]])
    for rule in ("augmented", lambda f: np.where(f["a"] > f["b"], 1, 0)):
        u = long_run_utility(joint, batch, rule=rule, rescale=True, n_points=2000).values
        assert u.min() >= -1e-12 and u.max() <= 1 + 1e-12
    u = oracle_utility(joint, batch, rescale=True, n_points=2000).values
    assert u.min() >= -1e-12 and u.max() <= 1 + 1e-12


def test_one_decision_everywhere_is_integrated_exactly(joint):
    """A rule that takes one decision at every point yields ``sum_c F_t(c) U[d, c]`` in
    closed form, whatever the points: the ratio estimator gets it to rounding (the
    unscaled masses were off by up to 2.6 % per draw)."""
    frequencies = class_masses(joint)  # (S, C)
    for matrix, decision in (([[0.0, 0.0], [1.0, 1.0]], 1), ([[0.0, 0.0], [1.0, 2.0]], 1),
                             ([[5.0, -1.0], [0.0, -2.0]], 0)):  # fmt: skip
        matrix = np.asarray(matrix)
        u = long_run_utility(joint, matrix, n_points=500, seed=3)
        np.testing.assert_allclose(u.values.ravel(), frequencies @ matrix[decision],
                                   rtol=1e-12, atol=1e-13)  # fmt: skip
        assert float(u.integration_error) < 1e-12 and float(u.integration_error_draws) < 1e-12


# ------------------------------------------------------ accuracy and its errors
@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")
@pytest.mark.parametrize("moving", [False, True])
def test_monte_carlo_agrees_with_a_dense_grid_within_its_errors(moving):
    """Given draws, each draw's long-run utility on a dense 2-D grid (an exact reference),
    over 20 seeds of 2,000 points: the posterior mean's root-mean-square error, and single
    draws', within a factor 2 of the standard errors reported (the same points serve
    every draw, so a seed's errors move together: one seed says little)."""
    t, draws = given_draws(moving, s=16 if moving else 40)
    matrices = (ACCURACY, np.array([[1.0, -2.0], [-0.5, 1.5]]))
    exact = grid_utility(draws, matrices)  # (S, matrices)
    errors, reported = [], []
    for seed in range(20):
        u = long_run_utility(t, np.stack(matrices), n_points=2000, seed=seed)
        errors.append(u.values[0] - exact)  # (S, matrices)
        reported.append([u.integration_error.values, u.integration_error_draws.values])
    errors, reported = np.array(errors), np.array(reported).mean(axis=0)
    mean_error = np.sqrt((errors.mean(axis=1) ** 2).mean(axis=0))  # (matrices,)
    draw_error = np.sqrt((errors**2).mean(axis=(0, 1)))
    for measured, figure in ((mean_error, reported[0]), (draw_error, reported[1])):
        ratio = figure / measured
        assert ((ratio > 0.5) & (ratio < 2)).all(), ratio


def test_single_draws_errors_against_ten_times_the_points(joint):
    """``integration_error_draws`` is single draws' own Monte Carlo error: within a factor
    2 of the mean absolute difference from 50,000 points, per matrix (it reported the
    posterior mean's standard error, 0.40 of that for the accuracy)."""
    batch = {
        "accuracy": UtilityMatrix(ACCURACY, decisions=LABELS, classes=LABELS),
        "costly": UtilityMatrix(COSTLY, decisions=LABELS, classes=LABELS),
    }
    reference = long_run_utility(joint, batch, n_points=50_000, seed=123).values
    measured, reported = [], []
    for seed in range(3):
        u = long_run_utility(joint, batch, n_points=5000, seed=seed)
        measured.append(np.abs(u.values - reference).mean(axis=(0, 1)))
        reported.append(u.integration_error_draws.values)
        assert (u.integration_error_draws.values > u.integration_error.values).all()
    ratio = np.mean(reported, axis=0) / np.mean(measured, axis=0)
    assert ((ratio > 0.5) & (ratio < 2)).all(), ratio


def test_single_draws_errors_from_a_sample_of_draws_and_points(joint, monkeypatch):
    """Large batches estimate single draws' errors from fewer draws (at least 4) and a
    sample of the points (at least 1,000, within each kernel's stratum): the figure stays
    within a third of the one from 25 draws and every point (on the joint fit of
    docs/long_run.md, 0.76 to 1.22 times, median 0.85, at 20,000 points), and the
    posterior mean's error is untouched."""
    from yieldwise import long_run

    rng = np.random.default_rng(2)
    batch = chart_matrices(rng.uniform(-1, 1, 16), rng.uniform(-1, 1, 16))
    full = long_run_utility(joint, batch, n_points=5000, seed=1)
    assert (full.integration_error_draws > 0).all()
    monkeypatch.setattr(long_run, "_ERROR_ELEMENTS", 1)
    cells = long_run._cells(joint, None, 1, 5000, 1)
    draws, points, counts = long_run._error_sample(cells, len(batch))
    assert len(draws) == 4 and len(points) < cells.shape[1] / 2 and counts.min() >= 1
    assert len(points) >= 1000 and counts.sum() == len(points)
    sampled = long_run_utility(joint, batch, n_points=5000, seed=1)
    np.testing.assert_array_equal(sampled.values, full.values)
    np.testing.assert_allclose(sampled.integration_error, full.integration_error, rtol=1e-10,
                               atol=1e-15)  # fmt: skip
    np.testing.assert_allclose(sampled.integration_error_draws, full.integration_error_draws,
                               rtol=1 / 3)  # fmt: skip
    # the oracle's too
    monkeypatch.setattr(long_run, "_ERROR_ELEMENTS", 10**12)
    full = oracle_utility(joint, batch[:2], n_points=2000, seed=1)
    monkeypatch.setattr(long_run, "_ERROR_ELEMENTS", 1)
    sampled = oracle_utility(joint, batch[:2], n_points=2000, seed=1)
    # (atol: the first matrix's errors are round-off, 3e-18 to 4e-18 on an AMD EPYC, so
    # their ratio is the machine's arithmetic, not the sample's)
    np.testing.assert_allclose(sampled.integration_error_draws, full.integration_error_draws,
                               rtol=1 / 3, atol=1e-15)  # fmt: skip
    assert full.integration_error_draws.values[1] > 1e-6  # the second matrix's are not


# ------------------------------------------------------------ the standard rule
def probability_transducer(columns, labels=LABELS, class_labels=LABELS, unnamed=False):
    """A two-class probability-vector output (one model dimension, the log ratio of the
    two columns) with given draws; the columns ``columns`` hold ``1 - p`` and ``p``."""
    rng = np.random.default_rng(4)
    p = rng.uniform(0.05, 0.95, 60)
    outputs = np.column_stack([1 - p, p])
    outputs = outputs if unnamed else pd.DataFrame(outputs, columns=columns)
    draws = {
        "w": np.array([[[0.3, 0.3, 0.4], [0.4, 0.4, 0.2]]]),
        "alpha": np.array(
            [[[[0.9, 0.1], [0.5, 0.5], [0.15, 0.85]], [[0.8, 0.2], [0.4, 0.6], [0.1, 0.9]]]]
        ),
        "mu": np.array([[[[-1.5], [0.2], [1.4]], [[-1.2], [-0.1], [1.8]]]]),
        "sigma": np.array([[[[0.8], [0.6], [0.9]], [[0.7], [0.8], [1.0]]]]),
    }
    truth = np.array(labels, dtype=object)[(p > 0.5).astype(int)]
    return Transducer.from_draws(draws, outputs, truth, class_labels), draws


def test_standard_rule_refuses_columns_named_after_the_classes_in_another_order():
    """Column j of a vector output is the output for classes_[j]: columns named p_pos, p_neg
    with classes_ (neg, pos) decided every item for the other class (accuracy 0.09 where
    the classifier's own argmax was right 92 % of the time)."""
    swapped, _ = probability_transducer(["p_pos", "p_neg"])
    assert swapped.classes_ == LABELS
    accuracy = UtilityMatrix(ACCURACY, decisions=LABELS, classes=LABELS)
    message = (r"columns \['p_pos', 'p_neg'\] are named after the classes in the order "
               r"\['pos', 'neg'\], and classes_ is \['neg', 'pos'\].*class_labels="
               r"\['pos', 'neg'\].*reordered .*\['p_neg', 'p_pos'\]")  # fmt: skip
    with pytest.raises(ValueError, match=message):
        long_run_utility(swapped, accuracy, rule="standard")
    # the augmented rule reads no column as a class: it still runs
    long_run_utility(swapped, accuracy)


def test_standard_rule_with_columns_in_the_classes_order_against_a_closed_form():
    """Columns named in classes_'s order (or naming no class) keep the positional reading,
    and the standard rule's long-run accuracy is its closed form: decide pos where p_pos >
    p_neg, that is where the model coordinate passes the point z0 where the columns are
    equal, so ``u_t = sum_k w_tk (alpha_tk,neg Phi((z0 - mu) / sigma) + alpha_tk,pos (1 -
    Phi((z0 - mu) / sigma)))``."""
    named, draws = probability_transducer(["p_neg", "p_pos"])
    accuracy = UtilityMatrix(ACCURACY, decisions=LABELS, classes=LABELS)
    u = long_run_utility(named, accuracy, rule="standard")
    # z0: where the inverse transform's two columns are equal, by bisection
    low, high = -5.0, 5.0
    columns = named.transform_.inverse(np.array([[low], [high]]))
    sign_low = np.sign(columns[0, 1] - columns[0, 0])
    assert sign_low != np.sign(columns[1, 1] - columns[1, 0])
    for _ in range(100):
        middle = 0.5 * (low + high)
        at = named.transform_.inverse(np.array([[middle]]))[0]
        low, high = (middle, high) if np.sign(at[1] - at[0]) == sign_low else (low, middle)
    z0 = 0.5 * (low + high)
    below = norm.cdf((z0 - draws["mu"][0, :, :, 0]) / draws["sigma"][0, :, :, 0])  # (S, K)
    if sign_low > 0:  # pos below z0
        below = 1 - below
    w, alpha = draws["w"][0], draws["alpha"][0]
    exact = (w * (alpha[:, :, 0] * below + alpha[:, :, 1] * (1 - below))).sum(axis=1)
    np.testing.assert_allclose(u.values.ravel(), exact,
                               atol=float(u.integration_error_draws) + 1e-9)  # fmt: skip
    # names that name no class, and an unnamed array whose default names (output_0,
    # output_1) would name the classes 0 and 1, keep the positional reading
    # (names naming no class, and names naming both classes each)
    others = [probability_transducer(["score", "logit_a"])[0],
              probability_transducer(["neg_pos", "pos_neg"])[0]]  # fmt: skip
    for other in others:
        again = long_run_utility(other, accuracy, rule="standard")
        np.testing.assert_array_equal(again.values, u.values)
    numbers = probability_transducer(None, labels=(1, 0), class_labels=(1, 0), unnamed=True)[0]
    assert numbers.transform_.columns == ("output_0", "output_1")
    as_numbers = UtilityMatrix(ACCURACY, decisions=[1, 0], classes=[1, 0])
    np.testing.assert_array_equal(
        long_run_utility(numbers, as_numbers, rule="standard").values, u.values
    )


# ------------------------------------------------------------------ bad input
def test_empty_batches_are_refused_by_name():
    t, _ = probability_transducer(["p_neg", "p_pos"])
    for empty in ([], (), (u for u in []), np.zeros((0, 2, 2)), np.zeros((0, 2))):
        with pytest.raises(ValueError, match=r"utility is an empty batch.*at least one"):
            long_run_utility(t, empty)
        with pytest.raises(ValueError, match="utility is an empty batch"):
            oracle_utility(t, empty)


def test_array_batches_keep_the_utility_limit():
    """An array batch is held to UtilityMatrix's +-1e150 (utilities are squared in the
    summaries: 1e200 gave an infinite posterior sd in compare)."""
    t, _ = probability_transducer(["p_neg", "p_pos"])
    big = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1e200, 0.0], [0.0, 1e200]]])
    with pytest.raises(ValueError, match=r"within \+-1e\+150 .*found 1e\+200 in matrix 1"):
        long_run_utility(t, big)
    with pytest.raises(ValueError, match=r"within \+-1e\+150"):
        long_run_utility(t, big.tolist())  # nested lists: the same array
    with pytest.raises(ValueError, match=r"within \+-1e\+150"):
        long_run_utility(t, -big)
    edge = np.array([[[MAX_ABS_UTILITY, 0.0], [0.0, MAX_ABS_UTILITY]]])
    assert np.isfinite(long_run_utility(t, edge).values).all()  # the limit itself is fine
