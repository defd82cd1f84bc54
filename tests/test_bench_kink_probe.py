"""bench/kink_probe.py: its variant programs follow stan/transducer.stan and are valid Stan;
its hinge data are the distances worked out here by hand."""

from __future__ import annotations

import numpy as np
import pytest

VARIANTS = ["t", "t-noncentred", "moving", "amplitude", "amplitude-pc", "local-scales"]


@pytest.fixture(scope="module")
def probe(bench_import):
    pytest.importorskip("sklearn")  # bench/coverage.py -> decision_quality.py's peers
    pytest.importorskip("betacal")
    return bench_import("kink_probe")


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_is_the_shipped_program_plus_its_edits(probe, variant, tmp_path):
    code = probe.variant_program(variant, tmp_path).read_text()
    base = probe.BASE.read_text()
    for old, new in probe.EDITS[variant]:
        assert new in code
        assert code.count(new) == probe.EXPECTED.get(old, 1)
        code = code.replace(new, old)
    assert code == base  # nothing else changed


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # httpstan's importlib use
@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_compiles_with_stanc(probe, variant, tmp_path):
    compile_stan = pytest.importorskip("httpstan.compile").compile
    cpp, _warnings = compile_stan(probe.variant_program(variant, tmp_path).read_text(), "m")
    expected = {"amplitude": "amp_raw", "amplitude-pc": "amp_raw", "local-scales": "loc_e"}
    assert expected.get(variant, "kink") in cpp


def test_amplitude_basis_leaves_the_constant_out_and_has_the_scale_asked(probe):
    u = np.linspace(0, 1, 60)
    basis = probe.amplitude_basis(u, 7, 0.8)
    assert basis.shape == (60, 7)
    # every combination has mean 0 over the kernels: the constant is not in the span
    np.testing.assert_allclose(basis.mean(axis=0), 0.0, atol=1e-12)
    # the log amplitude's prior variance per kernel, sum_j basis[k, j]^2, averages 0.8^2
    assert np.mean(np.sum(basis**2, axis=1)) == pytest.approx(0.64, rel=1e-12)
    # bumps at 0, 1/6, ..., 1 of sd 1/6: column 3 peaks at the middle kernels
    assert np.argmax(basis[:, 3]) in (29, 30)


def test_a_changed_shipped_program_fails_loudly(probe, tmp_path, monkeypatch):
    changed = tmp_path / "transducer.stan"
    changed.write_text(probe.BASE.read_text().replace("vector[U] z;", "vector[U] zz;"))
    monkeypatch.setattr(probe, "BASE", changed)
    with pytest.raises(RuntimeError, match="'t' edit expects"):
        probe.variant_program("t", tmp_path)


def test_hinges_are_distances_on_the_grid_inside_the_data(probe):
    build = probe.hinge_builder("t", scale=1.0, nu=2.0, inner=0.25)
    # 8 items at 0, 1, ..., 7 (two classes); 4 kernels: the grid is 4 nodes
    y = np.arange(8.0)
    data, _ = build(np.arange(8) % 2, y, y, [0], 2, 4, preconditioned=False)
    loc = np.asarray(data["loc"])[:, 0]
    u = (loc - loc[0]) / (loc[-1] - loc[0])
    assert np.allclose(u, [0, 1 / 3, 2 / 3, 1])
    # the items' 25 % / 75 % quantiles by count are 1 and 5 (the first item whose
    # cumulative share reaches 0.25 is y = 1, and 0.75 is reached at y = 5); interior
    # nodes j = 1, 2 lie inside [1, 5] only if loc[j] does
    inside = [j for j in (1, 2) if 1 <= loc[j] <= 5]
    assert inside == [1, 2]  # the grid spans about [0.07, 6.93]: nodes 2.36 and 4.64
    assert data["n_hinge"] == len(inside)
    assert np.allclose(data["hinge"], np.abs(u[:, None] - u[None, inside]))
    assert data["kink_scale"] == 1.0 and data["kink_nu"] == 2.0
    assert data["kink_eps"] == pytest.approx(0.5 / 3)


def test_local_scales_whitening_is_the_likelihoods_curvature_and_slope(probe):
    """local_scales_data's kappa and lambda are the gradient and the negative Hessian of
    the log-likelihood in each block's rotated coefficients at the shipped mode, checked
    against central differences of the log-likelihood written out here (every row's
    log of its class's kernel mixture, minus the items times the log normaliser)."""
    from scipy.special import logsumexp

    from yieldwise.backends._laplace import TransducerDensity
    from yieldwise.transducer import stan_data as sd

    rng = np.random.default_rng(2)
    n = 300
    cls = (rng.random(n) < 0.3).astype(int)
    y = rng.normal(np.where(cls == 1, 1.0, -0.5), 1.0)[:, None]
    data, _ = sd.build_stan_data(cls, y, y, [0], 2, 12)
    loc = np.asarray(data.loc)[:, 0]
    u = (loc - loc.min()) / (loc.max() - loc.min())
    out = probe.local_scales_data(data, u, bumps=3, functions=4, scale=5.0)
    assert out["loc_basis"].shape == (12, 12) and out["loc_lambda"].shape == (4, 3)
    theta0 = TransducerDensity(data).theta(np.asarray(data.u_centre, float))
    kern, rows, cnt = np.asarray(data.kern), np.asarray(data.cls) - 1, np.asarray(data.count)

    def loglik(theta):
        mix = np.log(np.sum(kern * np.exp(theta[:, rows].T), axis=1))
        return cnt @ mix - cnt.sum() * logsumexp(theta)

    h = 1e-4
    for j in range(3):
        block = out["loc_basis"][:, 4 * j : 4 * (j + 1)]

        def at(t, block=block):
            theta = theta0.copy()
            theta[:, 1] += block @ t
            return loglik(theta)

        eye = np.eye(4) * h
        slope = [(at(e) - at(-e)) / (2 * h) for e in eye]
        np.testing.assert_allclose(slope, out["loc_kappa"][:, j], rtol=1e-5, atol=1e-6)
        curv = np.array([[(at(a + b) - at(a - b) - at(b - a) + at(-a - b)) / (4 * h * h)
                          for b in eye] for a in eye])  # fmt: skip
        np.testing.assert_allclose(-curv, np.diag(out["loc_lambda"][:, j]), rtol=1e-4, atol=1e-4)
    # each block's basis is the smoothest random-walk functions under its bump, scaled so
    # that its prior sd per unit of tau_j is 1 at its largest (Q orthogonal keeps it)
    for j in range(3):
        block = out["loc_basis"][:, 4 * j : 4 * (j + 1)]
        assert np.max(np.sum(block**2, axis=1)) == pytest.approx(1.0, rel=1e-10)


def test_mode_preconditioning_recovers_a_known_gaussian(probe):
    """On a Normal log density with a known mean and a correlated, badly scaled covariance
    the mode is the mean and ``L L'`` the covariance; a direction of zero curvature gets the
    floor's variance instead of an infinite one."""
    rng = np.random.default_rng(4)
    a = rng.normal(size=(4, 4))
    cov = a @ a.T + np.diag([1e-2, 1.0, 10.0, 100.0])
    precision, mean = np.linalg.inv(cov), np.array([1.0, -2.0, 0.5, 3.0])

    def negative(x):
        r = x - mean
        return 0.5 * r @ precision @ r, precision @ r

    mode, scale, found, values = probe.mode_preconditioning(negative, np.zeros(4))
    assert found.success
    np.testing.assert_allclose(mode, mean, atol=1e-4 * np.sqrt(np.diag(cov)).max())
    np.testing.assert_allclose(scale @ scale.T, cov, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.sort(values), np.linalg.eigvalsh(precision), rtol=1e-6)

    def flat_in_last(x):  # the last coordinate leaves the density unchanged
        return 0.5 * x[:2] @ x[:2], np.array([x[0], x[1], 0.0])

    _, scale, _, values = probe.mode_preconditioning(flat_in_last, np.ones(3), floor=1e-4)
    assert values.min() == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(scale @ scale.T, np.diag([1.0, 1.0, 1e4]), atol=1e-6)
