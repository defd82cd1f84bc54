"""Pair offsets of a class reduction (stan/transducer.stan, "Group offsets"): the data
contract, the Laplace density against brute force, and the reduced transducer's maps
against computations by hand. Fits run on the Laplace backend (seconds, no Stan)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

import yieldwise as yw
from yieldwise import _design
from yieldwise.backends._laplace import TransducerDensity
from yieldwise.transducer.io import TransducerFileError
from yieldwise.transducer.reduction import ClassRanks
from yieldwise.transducer.stan_data import StanData, build_stan_data

CLASSES = ("a", "b", "c", "d", "e")


def _grouped_data(n: int = 240, seed: int = 0):
    rng = np.random.default_rng(seed)
    cls = rng.integers(0, 3, n)
    y = np.round(rng.normal(cls, 1.0), 1)  # repeated values, so rows merge
    parent = np.array([0, 0, 1, 1, 2])
    grp = rng.integers(0, parent.size, n)
    data, _ = build_stan_data(cls, y, y, None, 3, preconditioned=False, groups=(grp, parent))
    return data, cls, y, grp, parent


def test_rows_merge_within_their_group_only_and_bad_groups_are_named():
    data, cls, y, grp, parent = _grouped_data()
    assert (data.G, data.H) == (5, 3) and data.count.sum() == cls.size
    keys = {(c, g, v) for c, g, v in zip(cls, grp, y, strict=True)}
    assert len(keys) == data.N  # one row per distinct (class, group, output)
    np.testing.assert_array_equal(data.parent, parent + 1)
    with pytest.raises(ValueError, match=r"groups: one group per row \(240\)"):
        build_stan_data(cls, y, y, None, 3, preconditioned=False, groups=(grp[:5], parent))
    with pytest.raises(ValueError, match=r"groups: rows' groups must lie in 0..G - 1"):
        build_stan_data(cls, y, y, None, 3, preconditioned=False, groups=(grp + 5, parent))


def _random_group_whitening(data, rng):
    """The offsets' whitening data anywhere in their domain: lambda >= 0, any kappa."""
    shape = (int(data["G"]), int(data["C"]) - 1)
    return StanData.from_mapping({**data.as_dict(), "white_g_lambda": rng.uniform(0, 5, shape),
                                  "white_g_kappa": rng.normal(size=shape)})  # fmt: skip


@pytest.mark.parametrize("whitening", ["none", "random"])
def test_the_density_gradient_and_log_lik_match_brute_force(whitening):
    """Gradient by central differences; log_lik row by row from theta and the offsets:
    log sum_k kern[n, k] exp(theta[k, c_n]) + offset[g_n, c_n] - log sum_c exp(offset[g_n,
    c]) sum_k exp(theta[k, c]), plus the kernel values' scale."""
    data, *_ = _grouped_data()
    if whitening == "random":
        data = _random_group_whitening(data, np.random.default_rng(7))
    model = TransducerDensity(data)
    u = np.random.default_rng(1).normal(0.0, 0.3, model.size)
    _, grad = model.log_density(u)
    step = 1e-6
    numeric = np.array([
        (model.log_density(u + step * e)[0] - model.log_density(u - step * e)[0]) / (2 * step)
        for e in np.eye(u.size)
    ])  # fmt: skip
    np.testing.assert_allclose(grad, numeric, atol=1e-5 * np.abs(grad).max())
    q = model.quantities(u[None])
    theta, off = model.theta(u), model.offsets(u)
    by_hand = 0.0
    for n in range(int(data.N)):
        c, g = data.cls[n] - 1, data.grp[n] - 1
        row = np.log(data.kern[n] @ np.exp(theta[:, c])) + data.kern_log_scale[n]
        norm = logsumexp(off[g] + logsumexp(theta, axis=0))
        by_hand += data.count[n] * (row + off[g, c] - norm)
    assert q["log_lik"][0] == pytest.approx(by_hand, rel=1e-12)
    np.testing.assert_allclose(q["group_offset"][0], off)
    assert (off[:, 0] == 0).all()


def test_the_offsets_whitening_is_an_exact_change_of_variables():
    """With no data, the whitened offsets' log density is the prior written out by hand:
    h ~ N(0, tau_h^2) per parent, b ~ N(0, tau_g^2) per group (off = h[parent] + b),
    half-Normal scales with their log Jacobian, plus log |det d(h, b) / d(e_h, e_g)|
    computed from the map's Jacobian matrix by central differences. And the same offsets
    reached from the plain coordinates (group_whitened inverts the map) give the same
    offsets, whatever the whitening data."""
    from scipy.stats import norm

    data, *_ = _grouped_data()
    rng = np.random.default_rng(3)
    white = _random_group_whitening(data, rng)
    empty = TransducerDensity({**white, "count": np.zeros_like(data.count)})
    u = rng.normal(0.0, 0.5, empty.size)
    p, q = empty.unpack(u), empty.group_blocks(u)
    tau_h, tau_g = np.exp(p["log_tau_h"]), np.exp(p["log_tau_g"])
    s = empty.slices
    at = np.r_[s["e_h"], s["e_g"]]

    def hb(v):
        blocks = empty.group_blocks(v)
        return np.concatenate([blocks["h"].ravel("F"), blocks["b"].ravel("F")])

    step = 1e-6
    jacobian = np.column_stack([
        (hb(u + step * np.eye(u.size)[j]) - hb(u - step * np.eye(u.size)[j])) / (2 * step)
        for j in at
    ])  # fmt: skip
    scale = data.tau_g_scale
    by_hand = (
        norm.logpdf(q["h"], 0, tau_h).sum() + norm.logpdf(q["b"], 0, tau_g).sum()
        + (q["h"].size + q["b"].size) * 0.5 * np.log(2 * np.pi)  # Stan's ~ drops constants
        + np.linalg.slogdet(jacobian)[1]
        - 0.5 * ((tau_h / scale) ** 2).sum() - 0.5 * ((tau_g / scale) ** 2).sum()
        + p["log_tau_h"].sum() + p["log_tau_g"].sum()
    )  # fmt: skip
    # the terms of the rest of u are the plain model's, whose group terms are known
    plain_empty = TransducerDensity({**data.as_dict(), "count": np.zeros_like(data.count)})
    rest = plain_empty.log_prior(u) - _plain_group_prior(plain_empty, u)
    groups_only = empty.log_density(u)[0] - rest
    assert groups_only == pytest.approx(by_hand, rel=1e-8)
    # the plain coordinates of the same offsets give the same offsets
    plain = TransducerDensity(data)
    back = plain.group_whitened(u, q["h"], q["b"])
    np.testing.assert_allclose(plain.offsets(back), empty.offsets(u), atol=1e-12)
    np.testing.assert_allclose(empty.group_whitened(back, q["h"], q["b"]), u, atol=1e-12)


def test_the_offsets_scales_polar_form_keeps_their_prior():
    """The two scales are sampled as (log tau, z), tau_h = tau sqrt(rho), tau_g =
    tau sqrt(1 - rho), rho = expit(z). Their prior is still two independent half-Normals,
    which in polar form is tau = scale x chi(2) (a Rayleigh) and rho ~ Beta(1/2, 1/2),
    independent. Checked against those closed forms with their own Jacobians (tau for log
    tau, rho (1 - rho) for z): with no data and the offsets' coordinates fixed, the log
    density minus the two closed forms is the same constant at every (log tau, z). Then,
    by simulation: half-Normal pairs mapped to (tau, rho) have the Rayleigh's and the
    arcsine law's quantiles."""
    from scipy.stats import beta, rayleigh

    data, *_ = _grouped_data()
    empty = TransducerDensity({**data.as_dict(), "count": np.zeros_like(data.count)})
    s, scale = empty.slices, data.tau_g_scale
    rng = np.random.default_rng(11)
    base = np.zeros(empty.size)
    base[s["e_h"]], base[s["e_g"]] = 0.0, 0.0  # offsets 0: their own prior is constant
    gaps = []
    for _ in range(6):
        u = base.copy()
        t = rng.normal(np.log(scale), 1.0, s["log_tau_pair"].stop - s["log_tau_pair"].start)
        z = rng.normal(0.0, 2.0, t.size)
        u[s["log_tau_pair"]], u[s["pair_share"]] = t, z
        tau, rho = np.exp(t), 1.0 / (1.0 + np.exp(-z))
        closed = (
            rayleigh.logpdf(tau, scale=scale) + t  # + log |d tau / d log tau|
            + beta.logpdf(rho, 0.5, 0.5) + np.log(rho * (1.0 - rho))  # + log |d rho / dz|
        ).sum()  # fmt: skip
        # at e = 0 in plain coordinates (lambda = kappa = 0) the offsets are 0 and their
        # prior's terms in the scales cancel the map's log Jacobian (v = tau^2)
        p, q = empty.unpack(u), empty.group_blocks(u)
        np.testing.assert_allclose(np.exp(2 * p["log_tau_h"]), tau**2 * rho)
        np.testing.assert_allclose(np.exp(2 * p["log_tau_g"]), tau**2 * (1.0 - rho))
        offsets = (
            -empty.H * p["log_tau_h"].sum() - empty.G * p["log_tau_g"].sum()
            + 0.5 * np.log(q["v_h"]).sum() + 0.5 * np.log(q["v_g"]).sum()
        )  # fmt: skip
        assert offsets == pytest.approx(0.0, abs=1e-9)  # plain coordinates: v = tau^2
        gaps.append(float(empty.log_prior(u)) - closed)
    np.testing.assert_allclose(gaps, gaps[0], atol=1e-9)
    # the law of (tau, rho) for independent half-Normal scales, simulated
    pair = np.abs(rng.normal(0.0, scale, (200_000, 2)))
    tau, rho = np.hypot(pair[:, 0], pair[:, 1]), pair[:, 0] ** 2 / (pair**2).sum(axis=1)
    levels = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
    np.testing.assert_allclose(np.quantile(tau, levels), rayleigh.ppf(levels, scale=scale),
                               rtol=0.01)  # fmt: skip
    np.testing.assert_allclose(np.quantile(rho, levels), beta.ppf(levels, 0.5, 0.5), atol=0.005)


def _plain_group_prior(model, u):
    """The plain non-centred offsets' prior terms: e ~ N(0, 1) and the scales'."""
    p = model.unpack(u)
    log_tau = np.concatenate([p["log_tau_h"], p["log_tau_g"]])
    return (-0.5 * (p["e_h"] ** 2).sum() - 0.5 * (p["e_g"] ** 2).sum()
            - 0.5 * (np.exp(2 * log_tau)).sum() / model.tau_g_scale**2 + log_tau.sum())  # fmt: skip


def test_the_offsets_whitening_is_the_groups_likelihood_at_the_mode(five_class_data):
    """precondition() whitens each offset with its group's likelihood precision at the
    non-centred mode: lambda is the curvature of the plain log density in that group's
    e_g coordinate, (minus its second difference - 1) / tau_g^2 (the prior's 1 taken out;
    exact for a group's offsets when its items are the only ones the offset moves); at the
    whitened mode the e_g coordinates of groups with data have curvature near 1."""
    from yieldwise.transducer.reduction import ClassRanks
    from yieldwise.transducer.stan_data import precondition

    frame, labels = five_class_data(1500, 2)
    ranks = ClassRanks("simplex", tuple(frame.columns), CLASSES, 1500, paired=True)
    y = frame.to_numpy()
    cls = ranks.reduced_classes(y, np.searchsorted(CLASSES, labels))
    margin = ranks.margins(y)
    data, _ = build_stan_data(cls, margin, margin, None, 3, preconditioned=False,
                              groups=(ranks.pairs(y), ranks.pair_parents()))  # fmt: skip
    plain = precondition(data, seed=0, whiten=False)
    white = precondition(data, seed=0)
    flat, model = TransducerDensity(plain), TransducerDensity(white)
    base, centre = np.asarray(plain["u_centre"]), np.asarray(white["u_centre"])
    lam = np.asarray(white["white_g_lambda"])
    tau_g = np.exp(flat.unpack(base)["log_tau_g"])
    h = 1e-4
    e_g = np.arange(flat.slices["e_g"].start, flat.slices["e_g"].stop)
    busy = np.flatnonzero(lam.ravel("F") > 2.0)  # groups with items enough to matter
    assert busy.size >= 10

    def curvature(m, u, j):
        step = np.eye(m.size)[j] * h
        return -(m.log_density(u + step)[0] - 2 * m.log_density(u)[0]
                 + m.log_density(u - step)[0]) / h**2  # fmt: skip

    for k in busy[:10]:
        column = k // lam.shape[0]
        expected = (curvature(flat, base, e_g[k]) - 1) / tau_g[column] ** 2
        assert lam.ravel("F")[k] == pytest.approx(expected, rel=0.05)
        assert curvature(model, centre, e_g[k]) == pytest.approx(1.0, abs=0.3)
        # non-centred, the data dominate the prior there
    assert max(curvature(flat, base, e_g[k]) for k in busy[:10]) > 2.0


def _tilt(reduction, outputs, rank_proba, offsets):
    """Per-draw rank probabilities (..., n, ranks) given each output's pair, written out as
    the model states them (stan/transducer.stan, "Group offsets"): the reduced fit's
    ``F_t(rank | m)`` times ``exp(offset_t[pair, rank])``, renormalised. The package forms
    them only inside pooled and blocked computations; this is the reference."""
    off = np.asarray(offsets, float)[..., reduction.pairs(outputs), :]  # (..., n, ranks)
    q = np.asarray(rank_proba, float) * np.exp(off)
    return q / q.sum(axis=-1, keepdims=True)


def test_pairs_and_the_tilt_match_a_worked_example():
    r = ClassRanks("scores", ("s0", "s1", "s2", "s3"), (0, 1, 2, 3), 100, paired=True)
    x = np.array([[0.0, 3.0, 1.0, 0.5], [2.0, -1.0, 2.5, 0.5]])
    # item 0: top 1, second 2 -> 1 * 3 + 2 - 1 = 4; item 1: top 2, second 0 -> 2 * 3 + 0 = 6
    np.testing.assert_array_equal(r.pairs(x), [4, 6])
    np.testing.assert_array_equal(r.pair_parents(), np.repeat(np.arange(4), 3))
    q = np.array([[[0.6, 0.3, 0.1], [0.5, 0.25, 0.25]]])  # one draw
    off = np.zeros((1, 12, 3))
    off[0, 4] = [0.0, np.log(2.0), 0.0]  # the pair (1, 2) doubles "second"
    tilted = _tilt(r, x, q, off)
    np.testing.assert_allclose(tilted[0, 0], np.array([0.6, 0.6, 0.1]) / 1.3)
    np.testing.assert_allclose(tilted[0, 1], q[0, 1])
    assert ClassRanks.from_json(r.to_json()) == r


@pytest.fixture(scope="module")
def paired(five_class_data, max_pairs):
    frame, labels = five_class_data(400, 1)
    with warnings.catch_warnings(), max_pairs(600):
        warnings.simplefilter("ignore")  # the Laplace backend's own warning
        t = yw.Transducer(backend="laplace", seed=1, progress=False)
        t.fit(frame, labels, class_labels=list(CLASSES))
    return t, frame


def test_a_fit_of_five_classes_has_offsets_for_its_twenty_pairs(paired, five_class_data, max_pairs):
    t, frame = paired
    assert t.reduction_.paired and t.pair_offset_.shape == (t.posterior.n_draws, 20, 3)
    assert _design.RANKS_MAX_PAIRS >= 20  # the default: pairs for five classes
    with warnings.catch_warnings(), max_pairs(0):
        warnings.simplefilter("ignore")
        plain = yw.Transducer(backend="laplace", seed=1, progress=False)
        plain.fit(frame, five_class_data(400, 1)[1], class_labels=list(CLASSES))
    assert not plain.reduction_.paired and plain.pair_offset_ is None


def test_draws_are_the_reduced_draws_tilted_by_their_pairs_offsets(paired):
    """draws_proba at one draw, by hand: F_t(rank | m) exp(offset_t[pair, rank]),
    renormalised, the top two classes taking first and second."""
    t, frame = paired
    rows = frame.iloc[:6]
    y = rows.to_numpy()
    draws = t.draws_proba(rows).values.reshape(-1, 6, 5)
    margins = pd.DataFrame(t.reduction_.margins(y), columns=["margin"])
    ranks = t.reduced_.draws_proba(margins).values.reshape(-1, 6, 3)
    order = np.argsort(-y, axis=1, kind="stable")
    for s in (0, 777):
        for i in range(6):
            pair = order[i, 0] * 4 + order[i, 1] - (order[i, 1] > order[i, 0])
            w = ranks[s, i] * np.exp(t.pair_offset_[s, pair])
            w = w / w.sum()
            assert draws[s, i, order[i, 0]] == pytest.approx(w[0], rel=1e-10)
            assert draws[s, i, order[i, 1]] == pytest.approx(w[1], rel=1e-10)
            assert draws[s, i, order[i, 2:]].sum() == pytest.approx(w[2], rel=1e-10)


def test_per_draw_ranks_from_the_joint_equal_the_log_space_softmax(paired):
    """draws_proba's rank probabilities, made from the scaled joint without logs, are the
    softmax over ranks of the reduced fit's log joint (log_joint, in logs) plus the log
    pair weights exp(offset) / Z, for every draw."""
    from scipy.special import softmax

    t, frame = paired
    rows = frame.iloc[:12]
    y = rows.to_numpy()
    got = t.draws_proba(rows).values.reshape(t.posterior.n_draws, 12, 5)
    z = t.reduction_.margins(y)
    log_g = t.reduced_.posterior.log_joint(z, z, None)  # (S, 12, ranks)
    off = t.pair_offset_[:, t.reduction_.pairs(y)]  # (S, 12, ranks)
    ranks = softmax(log_g + off, axis=2)  # Z per pair cancels over the ranks
    order = np.argsort(-y, axis=1, kind="stable")
    rows_at = np.arange(12)
    np.testing.assert_allclose(got[:, rows_at, order[:, 0]], ranks[..., 0], rtol=1e-10)
    np.testing.assert_allclose(got[:, rows_at, order[:, 1]], ranks[..., 1], rtol=1e-10)
    others = np.take_along_axis(got, np.broadcast_to(order[None, :, 2:], (got.shape[0], 12, 3)),
                                axis=2).sum(axis=2)  # fmt: skip
    np.testing.assert_allclose(others, ranks[..., 2], rtol=1e-10)


def test_reduced_joint_in_blocks_is_each_draws_ranks_tilted_by_its_pair(paired, monkeypatch):
    """reduced_joint, normalised over ranks at one draw, is that draw's F_t(rank | m)
    exp(offset_t[pair, rank]) renormalised (by hand, as above), whether the pair weights
    are gathered for every draw at once or a few at a time; blocks of draws made one at a
    time are the whole, scale included (long-run integrals combine them)."""
    from yieldwise.transducer import estimator

    t, frame = paired
    rows = frame.iloc[:8]
    y = rows.to_numpy()
    whole = t.reduced_joint(rows)
    monkeypatch.setattr(estimator, "_REDUCED_BLOCK", 100)  # four draws at a time
    np.testing.assert_allclose(t.reduced_joint(rows), whole, rtol=1e-13)
    s = t.posterior.n_draws
    blocks = [t.reduced_joint(rows, slice(a, a + 1500)) for a in range(0, s, 1500)]
    np.testing.assert_allclose(np.concatenate(blocks), whole, rtol=1e-13)
    margins = pd.DataFrame(t.reduction_.margins(y), columns=["margin"])
    ranks = t.reduced_.draws_proba(margins).values.reshape(-1, 8, 3)
    order = np.argsort(-y, axis=1, kind="stable")
    pair = order[:, 0] * 4 + order[:, 1] - (order[:, 1] > order[:, 0])
    for d in (0, 1499, 1500, s - 1):
        w = ranks[d] * np.exp(t.pair_offset_[d, pair])
        np.testing.assert_allclose(whole[d] / whole[d].sum(axis=1, keepdims=True),
                                   w / w.sum(axis=1, keepdims=True), rtol=1e-10)  # fmt: skip
    with pytest.raises(TypeError, match="draws must be a slice"):
        t.reduced_joint(rows, [0, 1])


def test_reduced_joint_by_draws_evaluates_the_kernels_once_for_every_block(paired, monkeypatch):
    """reduced_joint_by_draws(outputs) called on blocks of draws gives reduced_joint's
    blocks, with the kernels at the outputs' margins evaluated once, not per block; with
    kernels that move between draws (no scaled_kernels) each block takes the reduced
    posterior's scaled_joint of its draws, and the result is the same."""
    from yieldwise.transducer.posterior import TransducerPosterior

    t, frame = paired
    rows = frame.iloc[:9]
    whole = t.reduced_joint(rows)
    calls = []
    original = TransducerPosterior.scaled_kernels

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TransducerPosterior, "scaled_kernels", counted)
    joint = t.reduced_joint_by_draws(rows)
    s = t.posterior.n_draws
    blocks = [joint(slice(a, a + 700)) for a in range(0, s, 700)]
    assert len(calls) == 1 and len(blocks) > 2
    np.testing.assert_allclose(np.concatenate(blocks), whole, rtol=1e-13)
    np.testing.assert_allclose(joint(None), whole, rtol=1e-13)
    monkeypatch.setattr(TransducerPosterior, "scaled_kernels", lambda self, *a, **k: None)
    moving = t.reduced_joint_by_draws(rows)
    np.testing.assert_allclose(moving(slice(700, 1400)), whole[700:1400], rtol=1e-12)
    with pytest.raises(TypeError, match="draws must be a slice"):
        joint(3)


def test_rank_check_reads_each_draws_first_rank_tilted_by_the_items_pair(paired, monkeypatch):
    """rank_check() (made a few draws at a time) is the reduction's check of the per-draw
    rank probabilities at the calibration margins tilted by each item's pair offsets, the
    whole (S, n, ranks) arrays formed here."""
    from yieldwise.transducer import estimator
    from yieldwise.transducer.reduction import rank_check

    t, _ = paired
    y = t.calibration_outputs()
    ranks = t.reduced_.draws_proba(t.reduced_.calibration_outputs()).values
    first = _tilt(t.reduction_, y, ranks, t.posterior.by_chain(t.pair_offset_))[..., 0]
    labels = t.posterior_.observed_data["class_label_index"].values
    expected = rank_check(t.reduction_, y, labels, first.reshape(-1, y.shape[0]), seed=3)
    monkeypatch.setattr(estimator, "_BAND_BLOCK", 1_000_000)  # several blocks of draws
    got = t.rank_check(seed=3)
    assert len(got) >= 4
    pd.testing.assert_frame_equal(got, expected, rtol=1e-10)


def _pooled_by_brute_force(t, frame):
    """The exchangeable prediction of a paired fit by brute force: each output's per-draw
    joint given its pair (reduced_joint, draw by draw) summed over the draws, normalised,
    spread over the classes by the others' mean share."""
    y = frame.to_numpy()
    joint = t.reduced_joint(frame).sum(axis=0)
    share = t.reduction_.mean_share(y, t.others_temperature_)
    return t.reduction_.expand(y, joint / joint.sum(axis=1, keepdims=True), share)


def test_predictions_given_pairs_are_the_pooled_draws_for_any_number_of_outputs(
    paired, five_class_data
):
    """6,000 outputs (more than the 4,096 a 1-D fit evaluates exactly before interpolating)
    are exact: by brute force, each output's per-draw joint given its pair (reduced_joint,
    draw by draw) summed over draws, normalised, spread by the others' mean share."""
    t, _ = paired
    new, _ = five_class_data(6000, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # margins beyond the calibration ones
        many = t.predict_proba(new)
        assert t.interpolation_error_ == 0.0
        brute = _pooled_by_brute_force(t, new)
    np.testing.assert_allclose(many, brute, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(many.sum(axis=1), 1.0)


def test_a_paired_transducer_round_trips_and_its_offsets_are_required(paired, tmp_path):
    import arviz as az

    t, frame = paired
    back = yw.Transducer.load(t.save(tmp_path / "paired.nc"))
    np.testing.assert_array_equal(back.pair_offset_, t.pair_offset_)
    np.testing.assert_array_equal(back.predict_proba(frame), t.predict_proba(frame))
    data = az.from_netcdf(str(tmp_path / "paired.nc"))
    data.posterior = data.posterior.drop_vars("group_offset")
    data.to_netcdf(str(tmp_path / "broken.nc"))
    with pytest.raises(TransducerFileError, match=r"group_offset is missing \(the class "
                       r"reduction has pair offsets\)"):  # fmt: skip
        yw.Transducer.load(tmp_path / "broken.nc")


def test_loo_adds_up_its_items(paired):
    t, _ = paired
    for conditional in (False, True):
        result = t.loo(conditional=conditional)
        assert result["elpd_loo"] == pytest.approx(result["loo_i"].values.sum())
        assert np.isfinite(result["loo_i"].values).all()
    # the class given the output is more probable than the output's margin density
    assert t.loo(conditional=True)["elpd_loo"] > t.loo()["elpd_loo"]


def test_pairs_absorb_unequal_class_frequencies(max_pairs):
    """Five classes with prevalences 0.5 .. 0.05 and logits 2.5 at the true class plus
    N(0, 1) noise: the truth is closed-form, p(c | y) proportional to r_c exp(2.5 z_c)
    (z the centred log-probabilities), so the log-odds of the top two classes carry
    log r_a - log r_b, which the pair offsets can hold and the rank model alone cannot.
    With the offsets the rank check is silent and the held-out probabilities are closer to
    the truth; without them the check flags the classes (Laplace fits)."""
    prevalence = np.array([0.5, 0.2, 0.15, 0.1, 0.05])

    def sample(n, seed):
        rng = np.random.default_rng(seed)
        labels = rng.choice(5, n, p=prevalence)
        x = 2.5 * np.eye(5)[labels] + rng.normal(size=(n, 5))
        return np.exp(x) / np.exp(x).sum(axis=1, keepdims=True), labels

    def truth(p):
        z = np.log(p) - np.log(p).mean(axis=1, keepdims=True)
        log_odds = 2.5 * z + np.log(prevalence)
        e = np.exp(log_odds - log_odds.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    columns = [f"p_{c}" for c in CLASSES]
    p, labels = sample(2000, 5)
    frame, names = pd.DataFrame(p, columns=columns), np.array(CLASSES)[labels]
    held_out, _ = sample(5000, 6)
    errors, smallest_p = {}, {}
    for pairs in (600, 0):
        with warnings.catch_warnings(record=True) as caught, max_pairs(pairs):
            warnings.simplefilter("always")
            t = yw.Transducer(backend="laplace", seed=1, progress=False).fit(frame, names)
            q = t.predict_proba(pd.DataFrame(held_out, columns=columns))
        flagged = [w for w in caught if issubclass(w.category, yw.ReductionWarning)]
        assert t.reduction_.paired == (pairs > 0) and bool(flagged) == (pairs == 0)
        errors[pairs] = np.abs(q - truth(held_out)).mean()
        smallest_p[pairs] = t.rank_check()["p_value"].min()
    assert smallest_p[600] > 0.05 and smallest_p[0] < 0.001
    assert errors[600] < 0.6 * errors[0]
    assert errors[600] < 0.25 * np.abs(held_out - truth(held_out)).mean()  # the raw output


@pytest.fixture(scope="module")
def paired_both(five_class_data, max_pairs):
    """A paired fit of the two margins (margin="both": a 2-D reduced transducer)."""
    frame, labels = five_class_data(400, 1)
    kept = _design.RANKS_MARGIN
    _design.RANKS_MARGIN = "both"
    try:
        with warnings.catch_warnings(), max_pairs(600):
            warnings.simplefilter("ignore")  # the Laplace backend's own warning
            t = yw.Transducer(backend="laplace", seed=1, progress=False)
            t.fit(frame, labels, class_labels=list(CLASSES))
    finally:
        _design.RANKS_MARGIN = kept
    return t, frame


def test_two_margins_predict_the_pooled_draws_given_each_pair(paired_both, five_class_data):
    """margin="both": the reduced fit is 2-D (the margin and the second's lead), and its
    exchangeable predictions are, by brute force, each output's per-draw joint given its
    pair (reduced_joint) summed over draws, normalised, spread over the classes by the
    others' mean share; the mean of draws_proba is the non-exchangeable prediction."""
    t, _ = paired_both
    assert t.reduction_.margin == "both"
    assert t.reduced_.transform_.columns == ("margin", "lead")
    new, _ = five_class_data(300, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # margins beyond the calibration ones
        got = t.predict_proba(new)
        np.testing.assert_allclose(got, _pooled_by_brute_force(t, new), rtol=1e-10, atol=1e-14)
        draws = t.draws_proba(new.iloc[:40]).values.mean(axis=(0, 1))
        np.testing.assert_allclose(
            draws, t.predict_proba(new.iloc[:40], exchangeable=False), rtol=1e-10
        )
    result = t.loo(conditional=True)
    assert result["elpd_loo"] == pytest.approx(result["loo_i"].values.sum())


def test_two_margins_round_trip(paired_both, tmp_path):
    t, frame = paired_both
    back = yw.Transducer.load(t.save(tmp_path / "both.nc"))
    assert back.reduction_ == t.reduction_
    np.testing.assert_array_equal(back.predict_proba(frame), t.predict_proba(frame))
