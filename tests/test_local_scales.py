"""Local smoothing scales (stan/transducer.stan, "Local smoothing scales"; prior key
``tau_l_scale``): the blocks' basis, their place in u, their prior and Jacobian written out
by hand, the gradient against finite differences, and their whitening against the
likelihood's curvature recomputed from the density itself. (The Stan program against this
numpy density: tests/test_backends.py, form "local".)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from yieldwise import _design
from yieldwise.backends._laplace import TransducerDensity
from yieldwise.transducer import stan_data as _stan_data
from yieldwise.transducer.stan_data import build_stan_data


def _items(n=300, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, classes, n)
    return c, rng.normal(c * 1.5, 1.0)


def _local_data(n=300, classes=2, scale=5.0, **kwargs):
    c, y = _items(n, classes)
    data, design = build_stan_data(c, y, y, None, classes, 12, {"tau_l_scale": scale}, **kwargs)
    return data, design


def _random_local_whitening(data, rng):
    """Local whitening data anywhere in their domain: a random rotation per block, lambda
    >= 0, any kappa."""
    j, m, c1 = int(data["J"]), int(data["M"]), int(data["C"]) - 1
    white = np.zeros((c1, j * m, j * m))
    for c in range(c1):
        for i in range(j):
            white[c, i * m : (i + 1) * m, i * m : (i + 1) * m] = np.linalg.qr(
                rng.normal(size=(m, m))
            )[0]
    return {**data, "white_l": white, "white_l_lambda": rng.uniform(0, 5, (m, j * c1)),
            "white_l_kappa": rng.normal(size=(m, j * c1))}  # fmt: skip


def _random_u(model, rng):
    u = rng.normal(0, 0.5, model.size)
    u[model.slices["log_tau_a"]] = np.log(2.0)
    u[model.slices["log_tau_f"]] = np.log(0.7)
    u[model.slices["log_tau_l"]] = rng.normal(0.0, 0.7, model.slices["log_tau_l"].stop
                                              - model.slices["log_tau_l"].start)  # fmt: skip
    return u


def test_local_basis_is_bumps_times_the_smoothest_functions_scaled_to_sd_one_at_the_peak():
    data, design = _local_data()
    basis = _stan_data.local_basis(design)
    k = design.loc.shape[0]
    assert basis.shape == (k, _design.LOCAL_BLOCKS, _design.LOCAL_FUNCTIONS) == (k, 7, 8)
    np.testing.assert_array_equal(np.asarray(data["local_basis"]), basis.reshape(k, 56))
    # the prior sd of block j's f (coefficients N(0, 1)) is 1 at its largest
    sd = np.sqrt(np.sum(basis**2, axis=2))  # (K, J)
    np.testing.assert_allclose(sd.max(axis=0), 1.0)
    # each column is one of the 8 largest-norm smooth functions times a bump centred at the
    # j-th of 7 even points over the kernels, of sd their spacing: the ratio of a column to
    # its function, wherever the function is not ~0, is exp(-(x - at)^2 / (2 spacing^2)) up
    # to the block's constant
    smooth = design.smooth_basis
    top = np.argsort(-np.linalg.norm(smooth, axis=0))[:8]
    x = design.loc[:, 0]
    at = np.linspace(x.min(), x.max(), 7)
    for j in range(7):
        bump = np.exp(-0.5 * ((x - at[j]) / (at[1] - at[0])) ** 2)
        for m in range(8):
            keep = np.abs(smooth[:, top[m]]) > 1e-3 * np.abs(smooth[:, top[m]]).max()
            ratio = basis[keep, j, m] / (smooth[keep, top[m]] * bump[keep])
            np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
    # the unconstrained vector gains J (C - 1) log scales and J M (C - 1) coordinates
    assert data["U"] == _stan_data.unconstrained_size(data["P"], data["R"], 2) + 7 * (1 + 8)
    assert design.record()["tau_l_scale"] == 5.0


def test_local_scales_are_off_by_default_and_refused_for_two_dimensions():
    c, y = _items()
    data, design = build_stan_data(c, y, y, None, 2, 12)
    assert _design.LOCAL_SCALE == 0.0
    assert (data["J"], data["M"], data["tau_l_scale"], design.tau_l_scale) == (0, 0, 0.0, 0.0)
    assert data["U"] == _stan_data.unconstrained_size(data["P"], data["R"], 2)
    y2 = np.column_stack([y, y**2])
    with pytest.raises(ValueError, match=r"tau_l_scale.*one output dimension, found 2"):
        build_stan_data(c, y2, y2, None, 2, 16, {"tau_l_scale": 5.0})
    with pytest.raises(ValueError, match=r"prior\['tau_l_scale'\] must be a positive number "
                                         r"\(or 0 for none\)"):  # fmt: skip
        build_stan_data(c, y, y, None, 2, 12, {"tau_l_scale": -1.0})
    # 0 is none, as the default
    off, _ = build_stan_data(c, y, y, None, 2, 12, {"tau_l_scale": 0})
    assert off["J"] == 0


@pytest.mark.parametrize(("classes", "marginal", "level", "df"), [
    (2, 0, 0.0, 0.0), (3, 0, 0.0, 0.0), (3, 1, 0.0, 0.0), (2, 0, 2.0, 0.0), (3, 0, 0.0, 1.0),
])  # fmt: skip
def test_gradient_with_local_blocks_equals_finite_differences(
    classes, marginal, level, df, gradient_check
):
    """df: the local sds' half-Student-t (``_design.LOCAL_DF``; 0 the half-Normal)."""
    data, _ = _local_data(classes=classes, preconditioned=False)
    rng = np.random.default_rng(4)
    data = _random_local_whitening(
        {**data, "density_marginal": marginal, "level_scale": level, "tau_l_df": df}, rng
    )
    model = TransducerDensity(data)
    gradient_check(model, _random_u(model, rng))


@pytest.mark.parametrize("df", [0.0, 3.0])
def test_local_prior_and_log_odds_written_out_by_hand(df):
    """With no data, the local blocks add to the log density, per block (c, j): the prior
    N(0, tau^2 I) of its coefficients b = Q (v kappa + sqrt(v) e), v = 1 / (lambda +
    tau^-2), the log |det(db / de)| (from the Jacobian matrix), and the half-Normal
    N+(0, tau_l_scale) (df 0) or half-Student-t(df, 0, tau_l_scale) of tau on the log
    scale with its Jacobian; and they add ``local_basis_j b`` to class c's log-odds."""
    data, _ = _local_data(classes=3, preconditioned=False)
    rng = np.random.default_rng(5)
    data = _random_local_whitening(
        {**data, "count": np.zeros_like(data["count"]), "tau_l_df": df}, rng
    )
    scale_prior = norm(0, 5.0) if df == 0 else student_t(df, 0, 5.0)
    local = TransducerDensity(data)
    local_keys = ("J", "M", "local_basis", "tau_l_scale", "tau_l_df", "white_l",
                  "white_l_lambda", "white_l_kappa")  # fmt: skip
    plain = TransducerDensity({k: v for k, v in data.items() if k not in local_keys})
    u = _random_u(local, rng)
    j, m, c1 = 7, 8, 2
    # u's local part, written out: log tau as a J x (C - 1) matrix, e as M x J (C - 1),
    # both column-major (the program's to_matrix), after everything else
    start = local.slices["log_tau_l"].start
    assert start == plain.size and local.size == plain.size + j * c1 * (1 + m)
    log_tau = u[start : start + j * c1].reshape(c1, j).T  # [j, c]
    e = u[start + j * c1 :].reshape(j * c1, m).T  # [m, (c) J + j]
    white = np.asarray(data["white_l"])
    lam, kappa = np.asarray(data["white_l_lambda"]), np.asarray(data["white_l_kappa"])
    basis = np.asarray(data["local_basis"])
    by_hand, odds = 0.0, np.zeros((data["K"], c1))
    for c in range(c1):
        for i in range(j):
            col, cols = c * j + i, slice(i * m, (i + 1) * m)
            tau = np.exp(log_tau[i, c])
            q = white[c, cols, cols]
            v = 1 / (lam[:, col] + tau**-2)
            b = q @ (v * kappa[:, col] + np.sqrt(v) * e[:, col])
            by_hand += norm.logpdf(b, 0, tau).sum() - m * norm.logpdf(0)
            by_hand += np.linalg.slogdet(q * np.sqrt(v))[1]
            by_hand += scale_prior.logpdf(tau) - scale_prior.logpdf(0) + np.log(tau)
            odds[:, c] += basis[:, cols] @ b
    difference = local.log_density(u)[0] - plain.log_density(u[: plain.size])[0]
    assert difference == pytest.approx(by_hand, rel=1e-10)
    f_local = local.theta(u)[:, 1:] - local.theta(u)[:, :1]
    f_plain = plain.theta(u[: plain.size])[:, 1:] - plain.theta(u[: plain.size])[:, :1]
    np.testing.assert_allclose(f_local - f_plain, odds, atol=1e-10)


def test_local_whitening_is_the_likelihood_precision_at_the_non_centred_mode(
    density_hessian, whitening_modes
):
    """precondition() whitens each local block as the smooth blocks: lambda the eigenvalues
    of (minus the Hessian - I) / tau^2 in the block's non-centred coordinates at the
    non-centred mode (recomputed here by second differences of the density itself); the
    whitened coordinates describe the same model (same theta at the same point)."""
    data, _ = _local_data(n=400, preconditioned=False)
    flat, base, mode, white = whitening_modes(data)
    p = flat.unpack(base)
    hessian = density_hessian

    first, m = flat.slices["e_l"].start, flat.M
    lam = np.asarray(mode["white_l_lambda"])
    informed = 0
    for i in (1, 3, 5):  # three of the seven blocks (class 2's)
        index = np.arange(first + i * m, first + (i + 1) * m)
        tau = np.exp(p["log_tau_l"][0, i])
        expected = np.linalg.eigvalsh(hessian(flat, base, index) - np.eye(m)) / tau**2
        np.testing.assert_allclose(np.sort(lam[:, i]), np.clip(expected, 0, None),
                                   atol=1e-3 * expected.max() + 1e-6)  # fmt: skip
        informed += lam[:, i].max() * tau**2 > 1  # the data's precision beats the prior's
    assert informed >= 1
    blocks = flat.smooth_blocks(base)
    np.testing.assert_allclose(
        white.theta(white.whitened(base, blocks["b"], blocks["b_l"])), flat.theta(base),
        atol=1e-10,
    )  # fmt: skip
