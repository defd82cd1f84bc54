"""bench/mixture_matrix_probe.py: its reduced terms are the shipped reduction's, its kernel
values at new outputs are the design's own at the calibration items, and the data it
hands the program keep every item's rank, classes and scores together."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def probe(bench_import):
    pytest.importorskip("sklearn")  # bench/coverage.py -> decision_quality.py's peers
    pytest.importorskip("betacal")
    return bench_import("mixture_matrix_probe")


def _set(seed, n=200):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(10, 0.5), size=n)
    # labels mostly the top class, sometimes the second, sometimes another
    order = np.argsort(-p, axis=1, kind="stable")
    pick = rng.choice(3, size=n, p=[0.7, 0.2, 0.1])
    other = order[np.arange(n), 2 + rng.integers(0, 8, n)]
    y = np.where(pick == 0, order[:, 0], np.where(pick == 1, order[:, 1], other))
    return p, y


def test_the_reduced_terms_are_the_shipped_reduction_s(probe):
    """Scores, margins and the class order as yieldwise.transducer.reduction.ClassRanks
    computes them for the same outputs and squeezing."""
    from yieldwise.transducer.reduction import ClassRanks

    p, _ = _set(1)
    names = tuple(f"p_{j}" for j in range(10))
    ranks = ClassRanks(kind="simplex", columns=names, classes=tuple(range(10)), squeeze_n=200)
    terms = probe.reduced_terms(p, 200)
    np.testing.assert_allclose(terms["S"], ranks.scores(p), rtol=1e-14)
    np.testing.assert_allclose(terms["margin"], ranks.margins(p)[:, 0], rtol=1e-12)
    order = ranks.order(p)
    np.testing.assert_array_equal(terms["top"], order[:, 0])
    np.testing.assert_array_equal(terms["second"], order[:, 1])
    np.testing.assert_array_equal(terms["oth"], np.sort(order[:, 2:], axis=1))
    np.testing.assert_allclose(terms["Z"].sum(axis=1), 0.0, atol=1e-12)


def test_kernel_values_are_the_design_s_and_items_keep_their_terms(probe):
    """The probe's kernel function reproduces build_stan_data's kern at the calibration
    margins (so the same function at new outputs is the design's); after sorting by rank
    each row's rank, class and scores still belong to one item, and top, second and the
    others partition the classes."""
    p, y = _set(2)
    data = probe.stan_data(p, y, 200, p[:7])
    np.testing.assert_allclose(data["kern"], data["design_kern"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(data["kern_star"].max(axis=1), 1.0)
    assert np.all(np.diff(data["rank"]) >= 0)
    s = data["S"]
    # each row's scores identify its item: recover the items and compare labels and ranks
    items = np.array([np.argmin(np.abs(probe.reduced_terms(p, 200)["S"] - row).sum(axis=1))
                      for row in s])  # fmt: skip
    assert sorted(items) == list(range(200))
    np.testing.assert_array_equal(data["cls"] - 1, y[items])
    top, second = data["top"] - 1, data["second"] - 1
    want_rank = np.where(y[items] == top, 1, np.where(y[items] == second, 2, 3))
    np.testing.assert_array_equal(data["rank"], want_rank)
    classes = np.sort(np.column_stack([top, second, data["oth"] - 1]), axis=1)
    np.testing.assert_array_equal(classes, np.tile(np.arange(10), (200, 1)))
    assert data["M"] == probe.unconstrained_size(data["P"], data["R"], 10)
    assert data["centre"].shape == (data["M"],) and np.array_equal(data["L"], np.eye(data["M"]))


def test_a_set_without_rank_three_is_refused(probe):
    """Every label the top or second class: the probe's model needs items of rank three."""
    p, _ = _set(3)
    order = np.argsort(-p, axis=1, kind="stable")
    with pytest.raises(ValueError, match="three ranks"):
        probe.stan_data(p, order[:, 0], 200, p[:3])


def _brute_log_density(u, data, probe):
    """The program's log density item by item, from its header's formulas."""
    from scipy.special import logsumexp

    b = probe.unpack(u, data)
    fb, sb = data["fixed_basis"], data["smooth_basis"]
    a = fb[:, 1:] @ b["a_fixed"] + np.exp(b["log_tau_a"]) * sb @ b["a_raw"]
    theta = np.empty((data["K"], 3))
    theta[:, 0] = a
    for r in range(2):
        theta[:, r + 1] = (
            a + fb @ b["f_fixed"][:, r] + np.exp(b["log_tau_f"][r]) * sb @ b["f_raw"][:, r]
        )
    beta = np.exp(theta - logsumexp(theta))
    mass = beta.sum(axis=0)
    gamma, sd_q = b["gamma"], np.exp(b["log_sd_q"])
    total = 0.0
    for n in range(data["N"]):
        s, z = data["S"][n], data["Z"][n]
        e = gamma * s + b["k"] + sd_q * (b["Q_raw"] * np.exp(b["log_lam"])) @ z
        a_, b_ = data["top"][n] - 1, data["second"][n] - 1
        others = list(data["oth"][n] - 1)
        e_t = e - gamma * s
        tilt = np.array(
            [0.0, e_t[b_] - e_t[a_], np.log(np.exp(e[others]).sum()) - gamma * s[b_] - e_t[a_]]
        )
        r = data["rank"][n] - 1
        joint = (beta[:, r] * data["kern"][n]).sum() * np.exp(tilt[r])
        total += np.log(joint / (mass * np.exp(tilt)).sum())
        if r == 2:
            c = data["cls"][n] - 1
            total += e[c] - np.log(np.exp(e[others]).sum())
    fs = data["fixed_scale"]
    tau_a, tau_f = np.exp(b["log_tau_a"]), np.exp(b["log_tau_f"])
    df, sc, fl = data["tau_f_df"], data["tau_f_scale"], data["tau_f_floor"]
    prior = (
        -0.5 * np.sum((b["a_fixed"] / fs[1:]) ** 2)
        - 0.5 * sum(np.sum((b["f_fixed"][:, r] / fs) ** 2) for r in range(2))
        - 0.5 * np.sum(b["a_raw"] ** 2) - 0.5 * np.sum(b["f_raw"] ** 2)
        - 0.5 * (tau_a / data["tau_a_scale"]) ** 2 + np.log(tau_a)
        + sum(-(df + 1) / 2 * np.log(1 + (t / sc) ** 2 / df) + np.log(t)
              + np.log(1 - np.exp(-(t / fl) ** 2)) for t in tau_f)
        - 0.5 * ((gamma - 1) / 3) ** 2 - 0.5 * np.sum(b["k"] ** 2)
        - 0.5 * np.sum(b["Q_raw"] ** 2) - 0.5 * (sd_q / data["sd_q_scale"]) ** 2 + np.log(sd_q)
    )  # fmt: skip
    nu = data["local_df"]
    if nu > 0:  # half-Student-t(nu) local scales, as logs with their Jacobian
        lam = np.exp(b["log_lam"])
        prior += np.sum(-(nu + 1) / 2 * np.log(1 + lam**2 / nu) + np.log(lam))
    else:
        assert not b["log_lam"].any()
    return total + prior


@pytest.mark.parametrize("local_df", [0.0, 1.0, 3.0])
def test_the_log_density_is_the_header_s_item_by_item_and_its_gradient_exact(probe, local_df):
    """log_density against the formulas written out per item (up to one constant: the
    kernel values' normalisation, the same at every u), and its gradient against central
    differences; with one scale for the class terms and with local scales (1: the
    horseshoe)."""
    p, y = _set(4, n=60)
    data = probe.stan_data(p, y, 60, p[:2], sd_q_scale=0.25, local_df=local_df)
    assert data["M"] == probe.unconstrained_size(data["P"], data["R"], 10, local_df > 0)
    assert data["tau_f_df"] > 0 and data["tau_f_floor"] > 0  # the 1-D prior's form
    rng = np.random.default_rng(5)
    points = [0.3 * rng.normal(size=data["M"]) for _ in range(3)]
    gaps = [probe.log_density(u, data)[0] - _brute_log_density(u, data, probe) for u in points]
    np.testing.assert_allclose(gaps, gaps[0], atol=1e-8)
    u = points[0]
    _, grad = probe.log_density(u, data)
    h = 1e-6
    numeric = np.array([(probe.log_density(u + h * e, data)[0]
                         - probe.log_density(u - h * e, data)[0]) / (2 * h)
                        for e in np.eye(data["M"])])  # fmt: skip
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)


def test_a_negative_local_df_is_refused(probe):
    p, y = _set(6, n=60)
    with pytest.raises(ValueError, match="local_df must be >= 0"):
        probe.stan_data(p, y, 60, p[:2], local_df=-1.0)
