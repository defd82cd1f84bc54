"""Long-run utility (theory section 4) from given posterior draws, against brute force.

The transducers here are built from known mixture parameters (no Stan), so every
integral can be recomputed independently with scipy's adaptive quadrature, a plain sum
over a lattice, or a fine 2-D grid.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import quad
from scipy.special import expit, logit
from scipy.stats import norm

from yieldwise import Transducer, UtilityMatrix
from yieldwise.long_run import (
    DEFAULT_CELLS,
    _augmented_errors,
    _binary_augmented,
    _cells,
    _general_augmented,
    long_run_core,
    long_run_utility,
    oracle_utility,
    value_of_more_data,
)
from yieldwise.utility import chart_matrices

LABELS = ("neg", "pos")
U = UtilityMatrix([[1, -2], [0, 3]], decisions=["a", "b"], classes=LABELS)
# Two posterior draws of a 2-component, 2-class, 1-D mixture on the identity scale.
W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
MU = np.array([[[-1.0], [1.5]], [[-0.5], [1.0]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])


@pytest.fixture(scope="module")
def continuous():
    scores = np.linspace(-3, 3, 30)
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        pd.DataFrame({"score": scores}), np.array(LABELS)[(scores > 0).astype(int)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip


def g(s, c, y):
    """G_s(c, y) of the two-draw mixture, by hand."""
    return sum(
        W[s, k] * ALPHA[s, k, c] * norm.pdf(y, MU[s, k, 0], SIGMA[s, k, 0]) for k in range(2)
    )


def pbar(y, r=None):
    """Predictive p(c | y): pooled over draws (exchangeable), or generative with r."""
    if r is None:
        joint = np.array([[g(s, c, y) for c in range(2)] for s in range(2)]).sum(axis=0)
    else:
        freq = np.einsum("sk,skc->sc", W, ALPHA)
        joint = np.array([[g(s, c, y) / freq[s, c] * r[c] for c in range(2)] for s in range(2)])
        joint = joint.sum(axis=0)
    return joint / joint.sum()


def brute(s, values, decide, weight=lambda s, c, y: g(s, c, y)):
    """sum_c integral U[decide(y), c] weight(s, c, y) dy by adaptive quadrature."""
    return sum(
        quad(lambda y, c=c: values[decide(y), c] * weight(s, c, y), -15, 15, limit=500)[0]
        for c in range(2)
    )


def test_augmented_matches_adaptive_quadrature(continuous):
    u = long_run_utility(continuous, U)
    assert u.dims == ("chain", "draw") and u.attrs["integration"] == "quadrature"
    error = float(u.integration_error_draws) + 1e-8  # + scipy quad's own tolerance
    assert float(u.integration_error) <= float(u.integration_error_draws) < 5e-3
    for s in range(2):
        exact = brute(s, U.values, lambda y: int(np.argmax(U.values @ pbar(y))))
        assert abs(float(u.values[0, s]) - exact) <= error


def test_posterior_mean_is_the_expected_utility_of_theory_4(continuous):
    """mean_t u_t = integral max_i sum_c U[i, c] p(c | y, D) p(y | D) dy."""
    u = long_run_utility(continuous, U)

    def integrand(y):
        joint = np.array([[g(s, c, y) for c in range(2)] for s in range(2)]).mean(axis=0)
        return (U.values @ joint).max()

    direct = quad(integrand, -15, 15, limit=500)[0]
    assert abs(float(u.mean()) - direct) <= float(u.integration_error) + 1e-8  # quad's tolerance


def test_oracle_matches_quadrature_and_exceeds_the_deployed_rule(continuous):
    oracle = oracle_utility(continuous, U)
    for s in range(2):
        exact = quad(
            lambda y, s=s: max(U.values[i] @ [g(s, 0, y), g(s, 1, y)] for i in range(2)),
            -15, 15, limit=500,
        )[0]  # fmt: skip
        assert abs(float(oracle.values[0, s]) - exact) < 1e-4
    gain = value_of_more_data(continuous, U)
    slack = float(gain["deployed_integration_error"] + gain["oracle_integration_error"])
    assert (gain["difference"].values >= -slack).all() and slack < 5e-3
    np.testing.assert_allclose(gain["oracle"] - gain["deployed"], gain["difference"])


def test_standard_rule_thresholds_a_scalar_output(continuous):
    v = UtilityMatrix([[1, -2], [0, 3]], decisions=LABELS, classes=LABELS)
    u = long_run_utility(continuous, v, rule="standard", threshold=0.25)
    for s in range(2):
        exact = brute(s, v.values, lambda y: int(y > 0.25))
        assert abs(float(u.values[0, s]) - exact) <= float(u.integration_error_draws) + 1e-8
    # The same rule as a callable on the outputs' DataFrame.
    same = long_run_utility(continuous, v, rule=lambda f: np.where(f["score"] > 0.25, "pos", "neg"))
    np.testing.assert_allclose(same.values, u.values)


def test_prevalences_use_the_generative_mode(continuous):
    r = np.array([0.2, 0.8])
    u = long_run_utility(continuous, U, prevalences=r)
    freq = np.einsum("sk,skc->sc", W, ALPHA)
    for s in range(2):
        exact = brute(
            s, U.values, lambda y: int(np.argmax(U.values @ pbar(y, r))),
            weight=lambda s, c, y: g(s, c, y) / freq[s, c] * r[c],
        )  # fmt: skip
        assert abs(float(u.values[0, s]) - exact) <= float(u.integration_error_draws) + 1e-8


def test_rescaled_by_each_draws_class_frequencies(continuous):
    u = long_run_utility(continuous, U).values[0]
    rescaled = long_run_utility(continuous, U, rescale=True).values[0]
    freq = np.einsum("sk,skc->sc", W, ALPHA)  # draw 0: (0.6*0.9 + 0.4*0.2, ...) = (0.62, 0.38)
    assert freq[0] == pytest.approx([0.62, 0.38])
    low = freq @ np.array([0.0, -2.0])  # worst decision per class: 0 (neg), -2 (pos)
    high = freq @ np.array([1.0, 3.0])
    np.testing.assert_allclose(rescaled, (u - low) / (high - low))


# ------------------------------------------------------------------ lattice
def lattice_transducer():
    """Vote-like outputs k/20 on [0, 1], modelled on the logit scale as bins."""
    rng = np.random.default_rng(5)
    votes = np.round(rng.beta(2, 5, 80) * 20) / 20
    classes = (votes > 0.3).astype(int)
    mu = np.array([[[-1.5], [1.0]], [[-1.0], [1.5]]])
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": mu[None], "sigma": SIGMA[None]},
        pd.DataFrame({"votes": votes}), np.array(LABELS)[classes], LABELS,
        output_transform="logit", resolution=0.05,
    ), mu  # fmt: skip


def test_lattice_outputs_are_summed_exactly():
    t, mu = lattice_transducer()
    u = long_run_utility(t, U)
    assert u.attrs["integration"] == "lattice" and float(u.integration_error) < 1e-12
    values = np.arange(21) / 20
    lower, upper, _ = t.transform_.intervals(values[:, None])  # the bins on the logit scale
    lower, upper = lower[:, 0], upper[:, 0]
    # bin masses by hand: sum_k w_k alpha_kc [Phi((hi - mu)/sigma) - Phi((lo - mu)/sigma)]
    mass = np.einsum(
        "sk,skc,skj->sjc", W, ALPHA,
        norm.cdf((upper[None, None] - mu) / SIGMA) - norm.cdf((lower[None, None] - mu) / SIGMA),
    )  # fmt: skip
    np.testing.assert_allclose(mass.sum(axis=(1, 2)), 1.0)  # the bins tile the line
    pooled = mass.sum(axis=0)
    chosen = (pooled @ U.values.T).argmax(axis=1)
    expected = np.einsum("sjc,jc->s", mass, U.values[chosen])
    np.testing.assert_allclose(u.values[0], expected, rtol=1e-12)
    assert np.isclose(expit(logit(0.5)), 0.5)  # the support is [0, 1]: 21 lattice values


# ------------------------------------------------------------------ batches
def test_binary_batch_shortcut_equals_matrix_by_matrix(continuous):
    rng = np.random.default_rng(0)
    batch = chart_matrices(rng.uniform(-1, 1, 300), rng.uniform(-1, 1, 300))
    batch[:3] = [[[1, 0], [0, 1]], [[1, -10], [0, 10]], [[10, 0], [-10, 1]]]
    batch[3] = [[1, 1], [0, 0]]  # decision 0 always best: slope 0
    cells = _cells(continuous, None, 4096, 1, 0)
    fast, tight, fast_mixed = _binary_augmented(cells, batch)
    slow, slow_mixed, none = _general_augmented(cells, batch)
    assert none is None  # no standard errors asked for
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast_mixed, slow_mixed, rtol=1e-9, atol=1e-15)
    spread = np.ptp(batch.reshape(300, -1), axis=1)
    assert (tight <= fast_mixed * spread + 1e-15).all()  # never looser than mass x range


def three_class_transducer(n_outputs):
    """Three classes, two components; one output (quadrature cells with neighbours) or two
    (Monte Carlo points)."""
    rng = np.random.default_rng(11)
    w = np.array([[[0.5, 0.5], [0.4, 0.6]]])
    alpha = np.array([[[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]], [[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]]])
    mu = np.array([[[[-1.0, 0.5], [1.0, -0.5]], [[-0.5, 0.0], [1.5, -1.0]]]])[..., :n_outputs]
    frame = pd.DataFrame(rng.normal(size=(30, n_outputs)), columns=list("ab")[:n_outputs])
    return Transducer.from_draws(
        {"w": w, "alpha": alpha, "mu": mu, "sigma": np.ones_like(mu)}, frame,
        np.array(["x", "y", "z"])[rng.integers(0, 3, 30)], ("x", "y", "z"),
        output_transform="identity", resolution=None,
    )  # fmt: skip


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_general_batch_equals_a_loop_over_matrices(n_outputs, monkeypatch):
    """The batched expected-utility decisions against one matrix at a time, by hand (and
    the Monte Carlo errors from every draw and point: no sample of them)."""
    from yieldwise import long_run

    monkeypatch.setattr(long_run, "_ERROR_ELEMENTS", 10**12)
    t = three_class_transducer(n_outputs)
    rng = np.random.default_rng(3)
    batch = rng.uniform(-1, 1, (250, 4, 3))  # 4 decisions, 3 classes
    batch[0] = [[1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]]  # ties: the first decision
    cells = _cells(t, None, 512, 3000, 0)
    assert cells.neighbours == (n_outputs == 1)
    monte_carlo = n_outputs == 2
    values, mixed, errors = _general_augmented(cells, batch, errors=monte_carlo)
    assert (errors is None) == (not monte_carlo)
    pooled = cells.mass.sum(axis=2).mean(axis=0)
    n = cells.mass.shape[1]
    for m, u in enumerate(batch):
        chosen = np.argmax(cells.proba @ u.T, axis=1)
        expected = np.einsum("sjc,jc->s", cells.mass, u[chosen])
        np.testing.assert_allclose(values[:, m], expected, rtol=1e-12, atol=1e-14)
        change = np.zeros(n, dtype=bool)
        if cells.neighbours:
            change[1:] |= chosen[1:] != chosen[:-1]
            change[:-1] |= chosen[1:] != chosen[:-1]
        assert mixed[m] == pytest.approx(pooled[change].sum(), rel=1e-12, abs=1e-15)
    # decision 0 yields 1 whatever the class: the mass the cells cover
    np.testing.assert_allclose(values[:, 0], cells.mass.sum(axis=(1, 2)), rtol=1e-12)
    if not monte_carlo:
        return
    # the Monte Carlo errors, point by point (moving kernels: one stratum; two draws,
    # both of them single draws whose own errors are averaged)
    exact = np.einsum("sk,skc->sc", t.posterior.w, t.posterior.alpha)
    for m, u in enumerate(batch[:20]):
        chosen = np.argmax(cells.proba @ u.T, axis=1)
        want = _ratio_errors_by_hand(cells.mass, u[chosen], exact)
        np.testing.assert_allclose(errors[:, m], want, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(_augmented_errors(cells, batch), errors, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("lattice", [False, True])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_factored_monte_carlo_cells_equal_the_dense_masses(n_classes, lattice):
    """Fixed kernels keep the Monte Carlo masses factored (kernels x draws' weights): the
    masses, every sum over them and each rule's utilities per draw equal those of the
    masses formed whole, draw by draw, from the scaled joint (with prevalences too; two
    classes take the binary shortcut's sorted cumulative sums). ``lattice``: the first
    output on a lattice of spacing 0.5, so the points are snapped to it and their kernels
    are interval-censored bins."""
    from yieldwise.long_run import _Cells, _integrate, _monte_carlo_cells, _oracle, _pooled

    rng = np.random.default_rng(12)
    s, k = 7, 9
    labels = ("x", "y", "z")[:n_classes]
    centres = np.stack(np.meshgrid([-1.5, 0.0, 1.5], [-1.0, 0.0, 1.0]), -1).reshape(k, 2)
    draws = {
        "w": rng.dirichlet(np.ones(k), s)[None],
        "alpha": rng.dirichlet(np.ones(n_classes), (s, k))[None],
        "mu": np.broadcast_to(centres, (1, s, k, 2)).copy(),
        "sigma": np.full((1, s, k, 2), 0.9),
    }
    frame = pd.DataFrame(rng.normal(size=(40, 2)), columns=["a", "b"])
    if lattice:
        frame["a"] = np.round(frame["a"] * 2) / 2
    truth = np.array(labels)[rng.integers(0, n_classes, 40)]
    t = Transducer.from_draws(draws, frame, truth, labels, output_transform="identity",
                              resolution=[0.5, None] if lattice else None)  # fmt: skip
    assert t.transform_.resolution == ((0.5, None) if lattice else (None, None))
    d = 4 if n_classes == 3 else 2
    batch = rng.uniform(-1, 1, (30, d, n_classes))
    decisions = tuple(range(d))
    for r in (None, rng.dirichlet(np.ones(n_classes))):
        cells = _monte_carlo_cells(t, r, 2000, 3)
        assert cells.dense is None and cells.kernels is not None  # factored
        lower, upper, censored = t.transform_.intervals(cells.outputs)
        if lattice:  # snapped to the lattice, each a censored bin of width 0.5
            np.testing.assert_allclose(cells.outputs[:, 0] * 2, np.round(cells.outputs[:, 0] * 2))
            assert censored.tolist() == [1, 0]
            np.testing.assert_allclose(upper[:, 0] - lower[:, 0], 0.5)
        # by hand: each kernel's value at the points (densities; the lattice axis a bin's
        # mass), the draws' joint, and the density q the points came from: kernel k with
        # ceil(2000 wbar_k) of them, wbar the mean of the draws' kernel weights
        y = cells.outputs
        first = (norm.cdf(y[:, :1] + 0.25, centres[:, 0], 0.9)
                 - norm.cdf(y[:, :1] - 0.25, centres[:, 0], 0.9)) if lattice else (
                 norm.pdf(y[:, :1], centres[:, 0], 0.9))  # fmt: skip
        values = first * norm.pdf(y[:, 1:], centres[:, 1], 0.9)  # (J, K)
        joint_weights = draws["w"][0][:, :, None] * draws["alpha"][0]  # (S, K, C)
        if r is not None:
            joint_weights = joint_weights * (r / joint_weights.sum(axis=1))[:, None, :]
        kernel_weights = joint_weights.sum(axis=2)
        wbar = (kernel_weights / kernel_weights.sum(axis=1, keepdims=True)).mean(axis=0)
        counts = np.ceil(2000 * wbar)
        assert len(y) == counts.sum() and cells.strata.tolist() == counts.tolist()
        q = values @ (counts / counts.sum())
        joint = np.einsum("jk,skc->sjc", values, joint_weights)
        unscaled = joint / (q[None, :, None] * len(y))
        # the ratio estimator: each draw's class masses scaled to sum to its exact ones,
        # sum_k w_tk alpha_tkc (r_c with prevalences); the decisions from the unscaled
        exact = joint_weights.sum(axis=1)  # (S, C)
        if r is not None:
            np.testing.assert_allclose(exact, np.broadcast_to(r, exact.shape))
        dense = unscaled * (exact / unscaled.sum(axis=1))[:, None, :]
        assert np.abs(unscaled.sum(axis=1) / exact - 1).max() > 1e-3  # the scaling matters
        whole = _Cells(_pooled(unscaled), cells.outputs, False, np.zeros(s), "monte-carlo",
                       dense=dense, strata=cells.strata, class_mass=exact)  # fmt: skip
        np.testing.assert_allclose(cells.mass, dense, rtol=1e-9)
        np.testing.assert_allclose(cells.mass.sum(axis=1), exact, rtol=1e-12)
        np.testing.assert_allclose(cells.proba, whole.proba, rtol=1e-9)
        np.testing.assert_allclose(cells.class_mass, exact, rtol=1e-12)
        np.testing.assert_allclose(cells.mean_mass(), dense.mean(axis=0), rtol=1e-9)
        assert cells.mean_mass() is cells.mean_mass() and not cells.mean_mass().flags.writeable
        np.testing.assert_allclose(whole.mean_mass(), dense.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(cells.class_totals(), dense.sum(axis=1), rtol=1e-9)
        indicator = np.eye(d)[rng.integers(0, d, len(y))]
        np.testing.assert_allclose(cells.regions(indicator), whole.regions(indicator),
                                   rtol=1e-9)  # fmt: skip
        chosen = rng.integers(0, d, (30, len(y)))
        np.testing.assert_allclose(cells.utilities(batch, chosen),
                                   whole.utilities(batch, chosen), rtol=1e-9)  # fmt: skip
        for rule in ("augmented", lambda f: np.where(f["a"] > 0, 1, 0)):
            got = _integrate(cells, batch, decisions, rule, t, 0.5)
            want = _integrate(whole, batch, decisions, rule, t, 0.5)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-13)
        # the errors point by point (seven draws: all of them single draws averaged)
        fixed = np.where(y[:, 0] > 0, 1, 0)
        _, error = _integrate(cells, batch, decisions, lambda f, d=fixed: d, t, 0.5)
        augmented = _integrate(cells, batch, decisions, "augmented", t, 0.5)[1]
        for m, u in enumerate(batch):
            by_hand = _ratio_errors_by_hand(dense, u[fixed], exact, cells.strata)
            np.testing.assert_allclose(error[:, m], by_hand, rtol=1e-9, atol=1e-15)
            chosen = np.argmax(whole.proba @ u.T, axis=1)
            by_hand = _ratio_errors_by_hand(dense, u[chosen], exact, cells.strata)
            np.testing.assert_allclose(augmented[:, m], by_hand, rtol=1e-9, atol=1e-15)
        # the oracle, draw by draw against the whole masses' brute force
        values, error = _oracle(cells, batch)
        expected = np.einsum("sjc,mdc->smjd", dense, batch)  # (S, m, J, D)
        best = expected.max(axis=3)
        np.testing.assert_allclose(values, best.sum(axis=2), rtol=1e-9)
        for m, u in enumerate(batch):
            gains = u[expected[:, m].argmax(axis=2)]  # (S, J, C): each draw's decisions
            by_hand = _ratio_errors_by_hand(dense, gains, exact, cells.strata)
            np.testing.assert_allclose(error[:, m], by_hand, rtol=1e-9, atol=1e-15)


def _ratio_errors_by_hand(mass, gains, exact, counts=None):
    """(posterior mean's, single draws' mean) Monte Carlo standard errors of the ratio
    estimator, point by point: ``mass`` (S, J, C) the scaled masses, ``gains`` (J, C) the
    decisions' utilities ``U[d_j, c]`` (or (S, J, C): the oracle's, each draw's own),
    ``exact`` (S, C) the class masses, ``counts`` the strata (None: one). A draw's points
    contribute ``J sum_c M_t(c, j) (U[d_j, c] - v_tc)``, ``v_tc`` the draw's mean utility
    of class c; the posterior mean's ``J sum_c Mbar(c, j) (U[d_j, c] - vbar_c)`` with the
    posterior-mean masses (a rule the same in every draw), or the mean over draws of
    theirs (the oracle)."""
    oracle = gains.ndim == 3
    s, j, _ = mass.shape
    gains = np.broadcast_to(gains, mass.shape)

    def error(per_point):
        if counts is None:
            return per_point.std(ddof=1) / np.sqrt(j)
        return _stratified_error(per_point[None], counts)[0]

    own, per_draw = [], []
    for t in range(s):
        v = (mass[t] * gains[t]).sum(axis=0) / exact[t]
        contribution = j * (mass[t] * (gains[t] - v)).sum(axis=1)
        per_draw.append(contribution)
        own.append(error(contribution))
    if not oracle:
        mean = mass.mean(axis=0)
        vbar = (mean * gains[0]).sum(axis=0) / mean.sum(axis=0)
        overall = error(j * (mean * (gains[0] - vbar)).sum(axis=1))
    else:  # the oracle: each draw's own decisions and class means, averaged over draws
        overall = error(np.mean(per_draw, axis=0))
    return np.array([overall, np.mean(own)])


def _stratified_error(per_point: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(m,) the standard error of the mean of ``per_point`` (m, J), whose points are
    strata of ``counts`` points each in order, written out stratum by stratum: sqrt(sum_k
    J_k s_k^2) / J, a stratum of one point taking the variance over all points."""
    total = np.zeros(per_point.shape[0])
    start = 0
    for count in counts:
        part = per_point[:, start : start + count]
        variance = part.var(axis=1, ddof=1) if count > 1 else per_point.var(axis=1, ddof=1)
        total += count * variance
        start += count
    return np.sqrt(total) / per_point.shape[1]


def test_stratified_points_come_from_their_kernels_and_their_error_is_the_spread():
    """Fixed kernels: ``sample_kernels`` gives kernel k ceil(n wbar_k) points, in kernel
    order, drawn from that kernel (each stratum's mean and sd against the kernel's); and
    the standard error that long_run_utility reports is the spread of its answer over
    seeds (300 integrals of 400 points)."""
    rng = np.random.default_rng(21)
    s, k = 40, 6
    centres = np.column_stack([np.linspace(-3, 3, k), np.linspace(2, -2, k)])
    draws = {
        "w": rng.dirichlet(np.full(k, 5.0), s)[None],
        "alpha": rng.dirichlet(np.ones(2), (s, k))[None],
        "mu": np.broadcast_to(centres, (1, s, k, 2)).copy(),
        "sigma": np.full((1, s, k, 2), 0.7),
    }
    frame = pd.DataFrame(rng.normal(size=(40, 2)), columns=["a", "b"])
    t = Transducer.from_draws(draws, frame, np.array(LABELS)[rng.integers(0, 2, 40)], LABELS,
                              output_transform="identity", resolution=None)  # fmt: skip
    points, counts = t.posterior.sample_kernels(3000, np.random.default_rng(0))
    wbar = draws["w"][0].mean(axis=0)
    assert counts.tolist() == np.ceil(3000 * wbar).tolist() and len(points) == counts.sum()
    start = 0
    for kernel, count in enumerate(counts):
        part = points[start : start + count]
        np.testing.assert_allclose(
            part.mean(axis=0), centres[kernel], atol=4 * 0.7 / np.sqrt(count)
        )
        np.testing.assert_allclose(part.std(axis=0), 0.7, rtol=0.25)
        start += count
    matrix = UtilityMatrix([[1, -4], [0, 3]], decisions=LABELS, classes=LABELS)
    means, errors = [], []
    for seed in range(300):
        u = long_run_utility(t, matrix, n_points=400, seed=seed)
        means.append(float(u.mean()))
        errors.append(float(u.integration_error))
    spread = np.std(means, ddof=1)
    assert np.median(errors) == pytest.approx(spread, rel=0.2)
    with pytest.raises(ValueError, match="kernels fixed across draws"):
        three_class_transducer(2).posterior.sample_kernels(10, rng)


@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # two draws
def test_monte_carlo_errors_are_those_of_the_rule_integrated():
    """Under Monte Carlo integration (2-D outputs) each rule's errors are those of its own
    per-point contributions to the ratio estimator (the posterior mean's, and the mean of
    single draws' own): a fixed rule's, the oracle's and the expected-utility rule's
    differ, each computed here point by point."""
    t = three_class_transducer(2)
    rng = np.random.default_rng(8)
    batch = rng.uniform(-1, 1, (6, 3, 3))  # decisions = the classes x, y, z
    batch = [UtilityMatrix(u, decisions=("x", "y", "z"), classes=("x", "y", "z")) for u in batch]

    def rule(frame):  # ignores the matrix: x above the diagonal, z below
        return np.where(frame["a"] > frame["b"], "x", "z")

    cells = _cells(t, None, 1, 5000, 4)
    exact = np.einsum("sk,skc->sc", t.posterior.w, t.posterior.alpha)  # F_t(c)
    fixed = long_run_utility(t, batch, rule=rule, n_points=5000, seed=4, rescale=False)
    best = long_run_utility(t, batch, n_points=5000, seed=4, rescale=False)
    oracle = oracle_utility(t, batch, n_points=5000, seed=4)
    chosen = np.where(cells.outputs[:, 0] > cells.outputs[:, 1], 0, 2)
    for m, u in enumerate(batch):
        u = u.values
        own = u[chosen]  # (J, C)
        expected = u[np.argmax(cells.proba @ u.T, axis=1)]
        per_draw_best = u[np.einsum("sjc,dc->sjd", cells.mass, u).argmax(axis=2)]  # (S, J, C)
        for result, gains in ((fixed, own), (best, expected), (oracle, per_draw_best)):
            errors = _ratio_errors_by_hand(cells.mass, gains, exact)
            assert float(result.integration_error[m]) == pytest.approx(errors[0], rel=1e-10)
            assert float(result.integration_error_draws[m]) == pytest.approx(errors[1], rel=1e-10)
            # each draw's value is its sum over the points
            np.testing.assert_allclose(
                result.values[0, :, m], np.einsum("sjc,sjc->s", cells.mass,
                                                  np.broadcast_to(gains, cells.mass.shape)),
                rtol=1e-10,
            )  # fmt: skip
        fixed_errors = _ratio_errors_by_hand(cells.mass, own, exact)
        best_errors = _ratio_errors_by_hand(cells.mass, expected, exact)
        assert np.abs(fixed_errors - best_errors).min() > 1e-4  # the two rules' errors differ


def test_error_bounds_cover_the_actual_errors_of_a_batch(continuous):
    """The fixed grid's answers against adaptive (nearly exact) ones, matrix by matrix."""
    rng = np.random.default_rng(6)
    batch = chart_matrices(rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40))
    grid = long_run_utility(continuous, batch)  # 40 > 32 matrices: fixed grid
    for m in range(40):
        exact = long_run_utility(continuous, batch[m : m + 1])  # adaptive
        own = float(exact.integration_error_draws.max())
        assert own < 1e-6
        actual = grid.values[..., m] - exact.values[..., 0]
        assert abs(actual.mean()) <= float(grid.integration_error[m]) + own
        assert np.abs(actual).mean() <= float(grid.integration_error_draws[m]) + own


def test_batch_inputs_and_augmented_beats_standard(continuous):
    rng = np.random.default_rng(1)
    values = chart_matrices(rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50))
    batch = [UtilityMatrix(v, decisions=LABELS, classes=LABELS) for v in values]
    aug = long_run_utility(continuous, batch)
    std = long_run_utility(continuous, batch, rule="standard", threshold=0.5)
    assert aug.dims == ("chain", "draw", "matrix") and aug.sizes["matrix"] == 50
    slack = aug.integration_error + std.integration_error
    assert (aug.mean(("chain", "draw")) >= std.mean(("chain", "draw")) - slack).all()
    named = long_run_utility(continuous, {"screen": batch[0], "treat": batch[1]})
    assert list(named["matrix"].values) == ["screen", "treat"]
    # two matrices are integrated adaptively, fifty on the fixed grid: equal within errors
    tolerance = float(named.integration_error_draws[0] + aug.integration_error_draws[0])
    np.testing.assert_allclose(named.values[..., 0], aug.values[..., 0], atol=tolerance)
    assert float(named.integration_error_draws[0]) < float(aug.integration_error_draws[0]) / 100
    as_array = long_run_utility(continuous, values)  # columns in the transducer's class order
    np.testing.assert_allclose(as_array.values, aug.values)
    # one matrix as nested lists or a 2-D array: the first matrix, without a matrix dim
    for one in (values[0].tolist(), values[0]):
        single = long_run_utility(continuous, one)
        assert single.dims == ("chain", "draw")
        np.testing.assert_allclose(single.values, aug.values[..., 0], atol=tolerance)


# ---------------------------------------------------------------- Monte Carlo
@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # two draws
def test_two_dimensional_outputs_by_monte_carlo_agree_with_a_grid():
    mu = np.array([[[-1.0, 0.5], [1.5, -0.5]], [[-0.5, 0.0], [1.0, -1.0]]])
    sigma = np.array([[[1.0, 0.8], [0.7, 1.1]], [[0.8, 1.0], [1.2, 0.9]]])
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40)})
    t = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": mu[None], "sigma": sigma[None]},
        frame, np.array(LABELS)[rng.integers(0, 2, 40)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    u = long_run_utility(t, U, n_points=40_000, seed=3)
    assert u.attrs["integration"] == "monte-carlo"
    # a 500 x 500 midpoint grid over [-8, 8]^2
    x = np.linspace(-8, 8, 501)
    mid = 0.5 * (x[1:] + x[:-1])
    area = (x[1] - x[0]) ** 2
    ya, yb = np.meshgrid(mid, mid, indexing="ij")
    dens = norm.pdf(ya[None, None], mu[:, :, 0, None, None], sigma[:, :, 0, None, None]) * norm.pdf(
        yb[None, None], mu[:, :, 1, None, None], sigma[:, :, 1, None, None]
    )
    joint = np.einsum("sk,skc,skab->scab", W, ALPHA, dens) * area  # (S, C, a, b)
    pooled = joint.sum(axis=0)
    chosen = np.einsum("dc,cab->dab", U.values, pooled).argmax(axis=0)
    exact = np.einsum("scab,cab->s", joint, U.values[chosen].transpose(2, 0, 1))
    error = float(u.integration_error)
    assert 0 < error < 0.02
    assert np.abs(u.values[0] - exact).max() < 4 * error + 2e-3


def test_an_integration_error_not_well_below_the_spread_warns_at_the_users_call():
    """Theory 4: the integration error must stay well below the posterior spread. Fifty
    unstratified Monte Carlo points (kernels that move between draws) miss that by far,
    and the warning names the matrix, both figures and what to pass, at this file's
    line; the default 20,000 points stay silent, and so does quadrature (bounds, not
    estimates), whatever the share."""
    import warnings

    from yieldwise import IntegrationWarning

    t = three_class_transducer(2)
    u = UtilityMatrix([[1, 0, -2], [0, 1, 0], [-1, 0, 3]], decisions=("x", "y", "z"),
                      classes=("x", "y", "z"))  # fmt: skip
    message = r"1 of 1 long-run utilities.*matrix 0, error .* against a posterior sd of .*n_points"
    with pytest.warns(IntegrationWarning, match=message) as caught:
        coarse = long_run_utility(t, u, n_points=50, seed=1)
    assert caught[0].filename == __file__
    assert float(coarse.integration_error) > 0.2 * float(coarse.std(ddof=1))
    with pytest.warns(IntegrationWarning, match=r"matrix 'screen'"):
        long_run_utility(t, {"screen": u}, n_points=50, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IntegrationWarning)
        fine = long_run_utility(t, u, seed=1)
        long_run_utility(three_class_transducer(1), u)
        long_run_utility(three_class_transducer(1), u, n_cells=2)
    assert float(fine.integration_error) < 0.2 * float(fine.std(ddof=1))


# ------------------------------------------------------------------ bad input
def test_bad_utilities_and_rules_are_refused(continuous):
    with pytest.raises(ValueError, match=r"utility has classes \['x', 'y'\], the transducer"):
        long_run_utility(continuous, UtilityMatrix([[1, 0], [0, 1]], classes=["x", "y"]))
    with pytest.raises(ValueError, match=r"utility matrix 1 has classes \['x', 'y'\]"):
        long_run_utility(continuous, [U, UtilityMatrix([[1, 0], [0, 1]], classes=["x", "y"])])
    with pytest.raises(ValueError, match=r"one column per class of the transducer \(2, in its"):
        long_run_utility(continuous, [[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match=r"utility: values must be finite"):
        long_run_utility(continuous, [[np.nan, 0], [0, 1]])
    # the integration's options are checked even where this (1-D) fit leaves them unused
    with pytest.raises(ValueError, match="n_points must be a positive integer, found 0"):
        long_run_utility(continuous, U, n_points=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer, found 'a'"):
        long_run_utility(continuous, U, seed="a")
    other = UtilityMatrix([[1, 0], [0, 1]], decisions=["p", "q"], classes=LABELS)
    with pytest.raises(ValueError, match="must share their decisions: matrix 1"):
        long_run_utility(continuous, [U, other])
    # the same decisions in another order are the same matrix (it was refused)
    swapped = U.reindex(decisions=list(reversed(U.decisions)))
    np.testing.assert_array_equal(long_run_utility(continuous, [U, swapped]).values,
                                  long_run_utility(continuous, [U, U]).values)  # fmt: skip
    with pytest.raises(ValueError, match=r"shape \(matrices, decisions >= 2, 2 classes\), found"):
        long_run_utility(continuous, np.zeros((3, 2, 3)))
    with pytest.raises(ValueError, match="NaN or infinite"):
        long_run_utility(continuous, np.full((1, 2, 2), np.nan))
    with pytest.raises(TypeError, match="found str"):
        long_run_utility(continuous, "screening")
    # a batch holds matrices: nested lists in it were an AttributeError from deep inside
    with pytest.raises(TypeError, match=r"utility\['a'\]: expected a UtilityMatrix .*found list"):
        long_run_utility(continuous, {"a": [[1, 0], [0, 1]]})
    with pytest.raises(TypeError, match=r"utility\[1\]: expected a UtilityMatrix"):
        long_run_utility(continuous, [U, [[1, 0], [0, 1]]])
    with pytest.raises(ValueError, match="rule must be"):
        long_run_utility(continuous, U, rule="best")
    with pytest.raises(ValueError, match="standard-rule decisions"):
        long_run_utility(continuous, U, rule="standard")  # decisions a/b are not classes
    with pytest.raises(ValueError, match=r"rule\(outputs\)"):
        long_run_utility(continuous, U, rule=lambda f: np.full(len(f), "z"))
    with pytest.raises(ValueError, match="one decision per output row"):
        long_run_utility(continuous, U, rule=lambda f: ["a"])


def test_one_dimensional_quadrature_and_monte_carlo_agree(continuous):
    """The Monte Carlo route (used for D > 1) on a 1-D output, against the quadrature."""
    from yieldwise.long_run import _integrate, _monte_carlo_cells

    matrices = U.values[None]
    cells = _monte_carlo_cells(continuous, None, 200_000, 5)
    mc, se = _integrate(cells, matrices, U.decisions, "augmented", continuous, 0.5)
    quadrature = long_run_utility(continuous, U)
    assert 0 < se[0, 0] < 0.01
    np.testing.assert_allclose(mc[:, 0], quadrature.values.ravel(), atol=4 * se[0, 0] + 1e-3)


@pytest.mark.parametrize("budget", [10**9, 50])
def test_oracle_on_quadrature_cells_against_brute_force(budget, monkeypatch):
    """Quadrature cells: the oracle's values and its error bound (the mass of every cell
    where a draw's best decision differs from a neighbour's, plus the uncovered mass,
    times the matrix's spread) against a per-matrix, per-draw brute force; a tiny work
    budget splits the draws and matrices into many blocks."""
    from yieldwise import long_run

    rng = np.random.default_rng(21)
    s, j, c, d = 9, 40, 3, 4
    dense = rng.dirichlet(np.ones(j * c), s).reshape(s, j, c) * 0.97
    uncovered = 1 - dense.sum(axis=(1, 2))
    cells = long_run._Cells(long_run._pooled(dense), np.linspace(-2, 2, j)[:, None], True,
                            uncovered, "quadrature", dense=dense)  # fmt: skip
    batch = rng.uniform(-1, 1, (7, d, c))
    monkeypatch.setattr(long_run, "_MAX_ELEMENTS", budget)
    values, error = long_run._oracle(cells, batch)
    for m, u in enumerate(batch):
        mixed = 0.0
        for t in range(s):
            expected = [[sum(u[i, k] * dense[t, cell, k] for k in range(c)) for i in range(d)]
                        for cell in range(j)]  # fmt: skip
            best = [int(np.argmax(e)) for e in expected]
            assert values[t, m] == pytest.approx(sum(max(e) for e in expected), rel=1e-12)
            for cell in range(j):
                left = cell > 0 and best[cell - 1] != best[cell]
                right = cell < j - 1 and best[cell + 1] != best[cell]
                if left or right:
                    mixed += dense[t, cell].sum() / s
        bound = (mixed + uncovered.mean()) * (u.max() - u.min())
        assert error[0, m] == pytest.approx(bound, rel=1e-10)
        assert error[1, m] == error[0, m]


def test_a_callable_rule_meets_only_outputs_its_transducer_accepts():
    """Monte Carlo points drawn from a kernel past the last possible output (here kernels
    at log-ratio -12 on 30 calibration vectors, whose squeeze floor is 1 / 90) come back
    from the squeeze with a negative probability: the rule is handed them moved onto the
    simplex (clipped at 0, renormalised), so a rule that asks the transducer itself, as a
    user's would, does not fail."""
    import warnings

    from yieldwise import ExtrapolationWarning, IntegrationWarning

    rng = np.random.default_rng(11)
    w = np.array([[[0.5, 0.5], [0.4, 0.6]]])
    alpha = np.array([[[[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]], [[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]]])
    mu = np.array([[[[-12.0, 0.5], [1.0, -0.5]], [[-11.0, 0.0], [1.5, -1.0]]]])
    classes = ("x", "y", "z")
    t = Transducer.from_draws(
        {"w": w, "alpha": alpha, "mu": mu, "sigma": np.ones_like(mu)},
        pd.DataFrame(rng.dirichlet([2, 2, 2], 30), columns=["p_x", "p_y", "p_z"]),
        np.array(classes)[rng.integers(0, 3, 30)], classes, output_transform="simplex",
        resolution=None,
    )  # fmt: skip
    # by hand: softmax(-12, 0.5, 0) squeezed back, (p n - 1/3) / (n - 1) with n = 30
    p = np.exp([-12.0, 0.5, 0.0]) / np.exp([-12.0, 0.5, 0.0]).sum()
    raw = t.transform_.inverse(np.array([[-12.0, 0.5]]))
    np.testing.assert_allclose(raw[0], (30 * p - 1 / 3) / 29, rtol=1e-12)
    assert raw[0, 0] < 0
    seen = []

    def rule(frame):
        seen.append(frame.to_numpy())
        return np.array(classes)[np.asarray(t.predict_proba(frame)).argmax(axis=1)]

    u = UtilityMatrix(np.eye(3), decisions=classes, classes=classes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IntegrationWarning)  # one draw
        warnings.simplefilter("ignore", ExtrapolationWarning)  # the points beyond the data
        long_run_utility(t, u, rule=rule, n_points=2000, seed=1)
    points = np.concatenate(seen)
    assert points.min() >= 0 and np.abs(points.sum(axis=1) - 1).max() < 1e-12
    # the map itself: clipped at 0 and renormalised; inside the simplex unchanged
    moved = t.transform_.onto_domain(np.vstack([raw, [0.2, 0.3, 0.5]]))
    np.testing.assert_allclose(moved[0], [0.0, *(raw[0, 1:] / raw[0, 1:].sum())], rtol=1e-12)
    np.testing.assert_array_equal(moved[1], [0.2, 0.3, 0.5])


# ------------------------------------------------------- shift by min U (theory 1)
def two_dimensional():
    """The two-draw mixture of this file on two outputs ``a`` and ``b`` (Monte Carlo)."""
    mu = np.array([[[-1.0, 0.5], [1.5, -0.5]], [[-0.5, 0.0], [1.0, -1.0]]])
    sigma = np.array([[[1.0, 0.8], [0.7, 1.1]], [[0.8, 1.0], [1.2, 0.9]]])
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40)})
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": mu[None], "sigma": sigma[None]},
        frame, np.array(LABELS)[rng.integers(0, 2, 40)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip


# entries exact at 1e9 (multiples of 1/4: ulp(1e9) = 2^-23), so U + b - b == U exactly
SHIFTABLE = np.array([[[1.0, -2.0], [0.0, 3.0]], [[0.5, -1.25], [-0.75, 2.0]]])


@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # two draws
@pytest.mark.parametrize("rule", ["augmented", "standard"])
@pytest.mark.parametrize("dims", [1, 2])
def test_a_huge_offset_adds_itself_to_every_draw(dims, rule, continuous):
    """Theory 1: ``u_t(U + b) = u_t(U) + b``. Each matrix is integrated as ``U - min U``,
    so at ``b = 1e9`` the draws long_run_core keeps (the ones compare reads) are those of
    ``U`` to 1e-12 of the range, the rescaled draws too, and the utilities shown are
    ``u_t(U) + b`` to one ulp of 1e9; integrated as ``U`` itself the draws carried
    rounding of 1e-7 to 5e-6 (the rescaled ones up to 2e-6), a million times the tie
    tolerance ``TIE_RTOL * (max U - min U)``; value_of_more_data's difference likewise."""
    t = continuous if dims == 1 else two_dimensional()
    b = 1e9
    assert ((SHIFTABLE + b) - b == SHIFTABLE).all()
    spread = np.ptp(SHIFTABLE.reshape(2, -1), axis=1)

    def batch(offset):
        return [UtilityMatrix(u + offset, decisions=LABELS, classes=LABELS) for u in SHIFTABLE]

    options = (None, 0.25, DEFAULT_CELLS, 20_000, 3)  # prevalences, threshold, cells, points, seed
    shifted, rescaled = long_run_core(t, batch(0.0), rule, *options)
    shifted_b, rescaled_b = long_run_core(t, batch(b), rule, *options)
    np.testing.assert_array_equal(shifted_b["utility_min"], SHIFTABLE.min(axis=(1, 2)) + b)
    np.testing.assert_allclose(shifted_b.values, shifted.values, rtol=0, atol=1e-12 * spread.min())
    np.testing.assert_allclose(rescaled_b.values, rescaled.values, rtol=0, atol=1e-12)
    public = long_run_utility(t, batch(0.0), rule, threshold=0.25, n_points=20_000, seed=3)
    public_b = long_run_utility(t, batch(b), rule, threshold=0.25, n_points=20_000, seed=3)
    assert np.abs(public_b.values - (public.values + b)).max() <= np.spacing(b)
    # the shown draws are the kept ones plus min U
    np.testing.assert_allclose(public.values, shifted.values + SHIFTABLE.min(axis=(1, 2)),
                               rtol=1e-15, atol=1e-15)  # fmt: skip
    if rule == "augmented":  # the value of more data: oracle - deployed, before min U
        gain = value_of_more_data(t, batch(0.0), n_points=20_000, seed=3)["difference"]
        gain_b = value_of_more_data(t, batch(b), n_points=20_000, seed=3)["difference"]
        np.testing.assert_allclose(gain_b, gain, rtol=0, atol=1e-12 * spread.min())
        assert np.abs(gain.values).max() > 1e-3  # the oracle does gain here


@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # two draws
def test_utility_min_and_spread_coordinates_for_every_form_of_utility(continuous):
    """``utility_min`` and ``utility_spread`` are np.min and np.ptp of each matrix (scalars
    for one matrix, per ``matrix`` for a batch), whatever form the utility takes, on
    long_run_utility's draws (raw and rescaled), the oracle's and value_of_more_data's."""
    rng = np.random.default_rng(4)
    values = rng.uniform(-5, 5, (3, 2, 2)) + np.array([0.0, 1e6, -3e3])[:, None, None]
    matrices = [UtilityMatrix(v, decisions=LABELS, classes=LABELS) for v in values]
    low, spread = values.min(axis=(1, 2)), np.ptp(values.reshape(3, -1), axis=1)
    forms = {
        "UtilityMatrix": (matrices[1], low[1:2], spread[1:2]),
        "nested list": (values[2].tolist(), low[2:], spread[2:]),
        "mapping": (dict(zip("xyz", matrices, strict=True)), low, spread),
        "list": (matrices, low, spread),
        "array": (values, low, spread),
    }
    for form, (utility, want_low, want_spread) in forms.items():
        for result in (
            long_run_utility(continuous, utility),
            long_run_utility(continuous, utility, rescale=True),
            oracle_utility(continuous, utility),
            oracle_utility(two_dimensional(), utility, n_points=500),
            value_of_more_data(continuous, utility),
        ):
            batched = form not in ("UtilityMatrix", "nested list")
            assert result["utility_min"].dims == (("matrix",) if batched else ()), form
            np.testing.assert_array_equal(np.atleast_1d(result["utility_min"]), want_low)
            np.testing.assert_array_equal(np.atleast_1d(result["utility_spread"]), want_spread)
    # matrices listing the classes the other way round: the same entries, the same range
    swapped = long_run_utility(continuous, [m.reindex(classes=["pos", "neg"]) for m in matrices])
    np.testing.assert_array_equal(swapped["utility_spread"], spread)
    with pytest.raises(TypeError, match=r"value_of_more_data got the options \['cells'\]"):
        value_of_more_data(continuous, matrices[0], cells=10)
