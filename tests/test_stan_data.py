"""Data preparation for the transducer's Stan program, and its numpy mixture (no Stan)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest
from scipy import stats
from scipy.special import logit

from yieldwise import _design, _mixture
from yieldwise.transducer import encoding
from yieldwise.transducer import stan_data as _stan_data


def _random_parameters(rng, s, k, c, d):
    w = rng.dirichlet(np.ones(k), size=s)
    alpha = rng.dirichlet(np.ones(c), size=(s, k))
    mu = rng.normal(0.0, 2.0, size=(s, k, d))
    sigma = np.exp(rng.normal(0.0, 0.5, size=(s, k, d)))
    return w, alpha, mu, sigma


def _vote_bins(rng, n=300, trees=50):
    cls = rng.integers(0, 2, n)
    votes = rng.binomial(trees, np.where(cls == 1, 0.9, 0.05)) / trees
    lo, hi = encoding.resolution_bins(votes, 1 / trees, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        return cls, votes, logit(lo), logit(hi)


def _bin_probability(a, b, m, sd):
    if a + b > 2 * m:  # upper side: difference of survival functions keeps precision
        return stats.norm.sf(a, m, sd) - stats.norm.sf(b, m, sd)
    return stats.norm.cdf(b, m, sd) - stats.norm.cdf(a, m, sd)


# --- merge_rows ------------------------------------------------------------------------


def test_merge_rows_counts_and_content():
    cls = np.array([0, 1, 0, 0, 1, 1])
    out = np.array([[0.5, 1.0], [0.5, 1.0], [0.5, 1.0], [-0.0, np.inf], [0.0, np.inf], [2.0, 3]])
    cls_u, out_u, counts = _stan_data.merge_rows(cls, out)
    assert counts.sum() == 6
    rows = {(c, *o): n for c, o, n in zip(cls_u, map(tuple, out_u), counts, strict=True)}
    assert rows == {
        (0, 0.0, np.inf): 1,
        (0, 0.5, 1.0): 2,
        (1, 0.0, np.inf): 1,
        (1, 0.5, 1.0): 1,
        (1, 2.0, 3.0): 1,
    }


def test_merge_rows_rejects_nan_and_bad_shapes():
    with pytest.raises(ValueError, match="NaN"):
        _stan_data.merge_rows(np.array([0, 1]), np.array([0.1, np.nan]))
    with pytest.raises(ValueError, match="shape"):
        _stan_data.merge_rows(np.array([0, 1, 1]), np.zeros((2, 1)))


def test_merging_is_exact_for_the_likelihood():
    """Merged rows with counts give the same log-likelihood as one row per item."""
    rng = np.random.default_rng(1)
    cls, _, lo, hi = _vote_bins(rng)
    params = _random_parameters(rng, 5, 4, 2, 1)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2, 4)
    assert data["N"] < 80 < cls.size  # the merge really merged
    merged = _mixture.log_likelihood(
        *params, data["cls"] - 1, data["y_lower"], data["y_upper"], data["censored"],
        data["count"],
    )  # fmt: skip
    # brute force: one item at a time, scipy's Normal CDF (survival function above mu)
    w, alpha, mu, sigma = params
    brute = np.zeros(len(w))
    for t in range(len(w)):
        for n in range(cls.size):
            p_bin = [
                _bin_probability(lo[n], hi[n], m, sd)
                for m, sd in zip(mu[t, :, 0], sigma[t, :, 0], strict=True)
            ]
            brute[t] += np.log(np.sum(w[t] * alpha[t, :, cls[n]] * np.array(p_bin)))
    np.testing.assert_allclose(merged, brute, rtol=1e-10)
    unmerged = _mixture.log_likelihood(*params, cls, lo, hi, [1])
    np.testing.assert_allclose(merged, unmerged, rtol=1e-12)


# --- detect_resolution -----------------------------------------------------------------


@pytest.mark.parametrize("trees", [10, 200, 1000])
def test_detect_resolution_vote_fractions(trees):
    rng = np.random.default_rng(trees)
    votes = rng.binomial(trees, rng.beta(0.5, 3, 5000)) / trees
    assert encoding.detect_resolution(votes) == 1 / trees


def test_detect_resolution_offset_lattice_and_percent_scores():
    assert encoding.detect_resolution(np.repeat([0.1, 0.35, 0.6, 1.1], 5)) == pytest.approx(0.25)
    assert encoding.detect_resolution(np.repeat(np.arange(0, 101), 3) / 100) == 0.01


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(0).normal(size=500),  # continuous: no repeats
        np.random.default_rng(0).random(500).astype(np.float32),  # float32, continuous
        np.full(50, 0.3),  # a single value: no lattice
        np.repeat([0.0, 0.1, 0.1000001], 20),  # an "accidental" lattice of 1e5 points
        np.repeat([0.0, 1.0, np.sqrt(2)], 10),  # values off any lattice
    ],
)
def test_detect_resolution_continuous_returns_none(values):
    assert encoding.detect_resolution(values) is None


def test_resolution_bins_reach_infinity_on_the_logit_scale():
    lo, hi = encoding.resolution_bins(np.array([0.0, 0.5, 1.0]), 0.005, (0.0, 1.0))
    np.testing.assert_allclose(lo, [0.0, 0.4975, 0.9975])
    np.testing.assert_allclose(hi, [0.0025, 0.5025, 1.0])
    with np.errstate(divide="ignore"):
        assert logit(lo[0]) == -np.inf and logit(hi[2]) == np.inf


def test_adjacent_bins_share_their_edge_exactly():
    """k/200 + 1/400 and (k+1)/200 - 1/400 can differ by an ulp; the bins must tile."""
    votes = np.arange(201) / 200
    naive_hi, naive_lo = votes[:-1] + 0.0025, votes[1:] - 0.0025
    assert (naive_hi != naive_lo).any()  # the rounding this guards against does occur
    lo, hi = encoding.resolution_bins(votes, 0.005, (0.0, 1.0))
    assert np.array_equal(hi[:-1], lo[1:])
    np.testing.assert_allclose(hi - lo, np.r_[0.0025, np.full(199, 0.005), 0.0025], rtol=1e-9)
    # values a lattice step apart keep distinct edges
    lo2, hi2 = encoding.resolution_bins(np.array([0.1, 0.3]), 0.005, (0.0, 1.0))
    assert lo2[1] > hi2[0]


# --- default_prior / build_stan_data -------------------------------------------------


def _stan_data_block() -> dict[str, str]:
    """Name -> declaration of every variable in the Stan program's data block."""
    from yieldwise.backends import stan_file

    text = stan_file("transducer").read_text()
    block = text[text.index("data {") + len("data {") : text.index("transformed data {")]
    out = {}
    for line in block.splitlines():
        code = line.split("//")[0].strip()
        if code.endswith(";"):
            out[code[:-1].split()[-1]] = code
    return out


def _votes(rng, n=500, trees=200, positives=0.15):
    """Vote fractions k/trees on the logit scale (exact 0s and 1s: infinite bin edges)."""
    cls = (rng.random(n) < positives).astype(int)
    p = np.where(cls == 1, rng.beta(4, 0.4, n), rng.beta(0.3, 8, n))
    votes = rng.binomial(trees, p) / trees
    lo, hi = encoding.resolution_bins(votes, 1 / trees, (0.0, 1.0))
    with np.errstate(divide="ignore"):
        return cls, logit(lo), logit(hi)


DATA_KEYS = {
    "N", "C", "D", "K", "cls", "count", "kern", "kern_log_scale", "loc", "width", "P",
    "fixed_basis", "fixed_scale", "R", "smooth_basis", "tau_a_scale", "tau_f_scale",
    "tau_f_df", "tau_f_floor", "density_marginal", "U", "u_centre", "u_rank", "u_axes",
    "u_left", "u_right", "white_a", "white_a_lambda", "white_a_kappa", "white_f",
    "white_f_lambda", "white_f_kappa",
    "kern_sparse", "kern_nz", "kern_w", "kern_v", "kern_u", "G", "H", "grp", "parent",
    "tau_g_scale", "white_g_lambda", "white_g_kappa", "level_scale", "odds_scale", "odds_df",
    "odds_offset", "J", "M", "local_basis", "tau_l_scale", "tau_l_df", "white_l", "white_l_lambda",
    "white_l_kappa",
}  # fmt: skip
# the merged rows, kept with a transducer, and whether the sampler's coordinates are
# preconditioned (read by sampler_inits, not by Stan)
KEPT_KEYS = {"y_lower", "y_upper", "censored", "preconditioned", "bin_width", "u_basis", "u_sd",
             "u_kept"}  # fmt: skip


def test_data_keys_are_the_stan_data_block():
    declared = _stan_data_block()
    assert set(declared) == DATA_KEYS
    rng = np.random.default_rng(3)
    cls, lo, hi = _votes(rng)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    assert set(data) == DATA_KEYS | KEPT_KEYS


def test_the_data_contract_is_the_stan_data_block():
    """StanData's Stan fields are the program's data block: names, order and types."""
    declared = _stan_data_block()
    assert list(_stan_data.STAN_FIELDS) == list(declared)
    for f in fields(_stan_data.StanData):
        if f.name in declared:
            assert f"{f.metadata['stan']} {f.name};" == declared[f.name]
    assert set(_stan_data.KEPT_FIELDS) == KEPT_KEYS


def test_the_data_contract_checks_shapes_naming_the_field():
    rng = np.random.default_rng(3)
    cls, lo, hi = _votes(rng)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2, preconditioned=False)
    assert isinstance(data, _stan_data.StanData)
    assert isinstance(_stan_data.precondition(data), _stan_data.StanData)
    assert set(data.as_dict()) == DATA_KEYS | KEPT_KEYS
    n, k = data["N"], data["K"]
    with pytest.raises(
        ValueError,
        match=rf"StanData\.kern must have shape \(N, K\) = "
        rf"\({n}, {k}\), found \({n}, {k - 1}\)",
    ):
        _stan_data.StanData.from_mapping(dict(data, kern=data["kern"][:, 1:]))
    with pytest.raises(ValueError, match=r"StanData\.white_f must have shape \(C - 1, R, R\)"):
        _stan_data.StanData.from_mapping(dict(data, C=3))
    with pytest.raises(ValueError, match=r"lack \['u_axes'\]"):
        _stan_data.StanData.from_mapping({key: data[key] for key in data if key != "u_axes"})


def test_the_preconditioning_checks_its_fields_naming_them():
    """An invertible change of variables that carries the recorded Normal approximation,
    only: a basis that is not orthonormal, a zero sd, a repeated direction, a Q that is not
    orthogonal or axes that are not the kept sds are refused with the field's name."""
    rng = np.random.default_rng(3)
    cls, lo, hi = _votes(rng)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    u, r = int(data["U"]), int(data["u_rank"])
    assert r >= 2 and int(data["preconditioned"]) == 1
    with pytest.raises(ValueError, match=r"StanData\.u_basis must have orthonormal columns"):
        _stan_data.StanData.from_mapping(dict(data, u_basis=2 * np.eye(u)))
    with pytest.raises(ValueError, match=r"StanData\.u_sd must be positive"):
        _stan_data.StanData.from_mapping(dict(data, u_sd=np.zeros(u)))
    repeated = np.asarray(data["u_kept"]).copy()
    repeated[1] = repeated[0]
    with pytest.raises(ValueError, match=r"StanData\.u_kept must be distinct directions"):
        _stan_data.StanData.from_mapping(dict(data, u_kept=repeated))
    with pytest.raises(ValueError, match=r"make Q = I \+ u_left u_right' orthogonal"):
        _stan_data.StanData.from_mapping(dict(data, u_left=2 * np.asarray(data["u_left"])))
    axes = np.asarray(data["u_axes"]).copy()
    axes[0] *= 1.5
    with pytest.raises(ValueError, match=r"must carry the kept directions u_kept"):
        _stan_data.StanData.from_mapping(dict(data, u_axes=axes))
    with pytest.raises(ValueError, match=r"StanData\.u_left must have shape \(U, u_rank\)"):
        _stan_data.StanData.from_mapping(dict(data, u_rank=r - 1, u_kept=data["u_kept"][1:]))


def test_the_low_rank_preconditioning_is_exact_and_inverts():
    """The program's map z -> u (stan/transducer.stan, "Geometry"): its covariance under
    z ~ N(0, I) is V_kept diag(sd_kept^2) V_kept' + (I - V_kept V_kept'), built here by
    hand; each kept direction is an axis of z of its own (u - centre along e_i is that
    direction times its sd, up to sign); sampler_coordinates inverts it; a direction within
    the tolerance is not kept; tolerance 0 keeps every direction, and then the covariance is
    the full V diag(sd^2) V'."""
    rng = np.random.default_rng(11)
    u = 7
    vectors, _ = np.linalg.qr(rng.standard_normal((u, u)))
    sd = np.array([3.0, 1.01, 0.2, 1.0, 0.97, 1.2, 0.5])
    centre = rng.standard_normal(u)
    fields_ = _stan_data.preconditioning(centre, vectors, sd, tolerance=0.05)
    # |log sd| > 0.05: 3, 0.2, 1.2, 0.5 (log 1.01 = 0.00995, log 0.97 = -0.0305)
    assert fields_["u_rank"] == 4 and list(fields_["u_kept"]) == [0, 2, 5, 6]
    columns = _stan_data.unconstrained_values(fields_, np.eye(u)).T - centre[:, None]  # S
    kept = vectors[:, [0, 2, 5, 6]]
    by_hand = (kept * sd[[0, 2, 5, 6]] ** 2) @ kept.T + np.eye(u) - kept @ kept.T
    np.testing.assert_allclose(columns @ columns.T, by_hand, atol=1e-12)
    for axis, j in enumerate([0, 2, 5, 6]):
        np.testing.assert_allclose(np.abs(columns[:, axis] @ vectors[:, j]), sd[j], rtol=1e-12)
        np.testing.assert_allclose(np.linalg.norm(columns[:, axis]), sd[j], rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(columns[:, 4:], axis=0), 1.0, rtol=1e-12)
    z = rng.standard_normal((5, u))
    values = _stan_data.unconstrained_values(fields_, z)
    np.testing.assert_allclose(values, centre + z @ columns.T, atol=1e-12)
    np.testing.assert_allclose(_stan_data.sampler_coordinates(fields_, values), z, atol=1e-12)
    every = _stan_data.preconditioning(centre, vectors, sd, tolerance=0.0)
    assert every["u_rank"] == u - 1  # sd exactly 1 is the identity in that direction
    full = _stan_data.unconstrained_values(every, np.eye(u)).T - centre[:, None]
    np.testing.assert_allclose(full @ full.T, (vectors * sd**2) @ vectors.T, atol=1e-12)
    np.testing.assert_allclose(_stan_data.full_scale(every), vectors * sd, atol=0)
    # the identity: u = z
    plain = _stan_data.identity_preconditioning(u)
    np.testing.assert_array_equal(_stan_data.unconstrained_values(plain, z), z)


def test_build_stan_data_censored_votes():
    rng = np.random.default_rng(3)
    cls, lo, hi = _votes(rng)
    data, design = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    n, k = data["N"], data["K"]
    # merged exactly: one row per distinct (class, bin), counts summing to the items
    distinct = {(c, a, b) for c, a, b in zip(cls, lo, hi, strict=True)}
    assert n == len(distinct) < 120 < cls.size
    rows = set(zip(data["cls"] - 1, data["y_lower"][:, 0], data["y_upper"][:, 0], strict=True))
    assert rows == distinct
    for c, a, b, m in zip(data["cls"] - 1, data["y_lower"][:, 0], data["y_upper"][:, 0],
                          data["count"], strict=True):  # fmt: skip
        assert m == np.sum((cls == c) & (lo == a) & (hi == b))
    assert (np.diff(data["cls"]) >= 0).all() and set(data["cls"]) == {1, 2}  # 1-based, sorted
    # infinite bin edges are passed as they are (no sentinel): the kernels are data
    assert np.isneginf(data["y_lower"]).any() and np.isposinf(data["y_upper"]).any()
    assert (data["C"], data["D"], k) == (2, 1, _design.GRID_1D)
    shapes = {
        "cls": (n,), "count": (n,), "kern": (n, k), "kern_log_scale": (n,), "loc": (k, 1),
        "width": (k, 1), "fixed_basis": (k, data["P"]), "fixed_scale": (data["P"],),
        "smooth_basis": (k, data["R"]), "y_lower": (n, 1), "y_upper": (n, 1), "censored": (1,),
    }  # fmt: skip
    assert {key: np.shape(data[key]) for key in shapes} == shapes
    assert (data["P"], data["R"]) == (2, min(k - 2, _design.SMOOTH_MODES_1D))
    # the kernel values are those of the design's kernels at the merged rows
    kern, log_scale = _design.kernel_matrix(
        design.loc, design.width, data["y_lower"], data["y_upper"], [1]
    )
    np.testing.assert_array_equal(data["kern"], kern)
    np.testing.assert_array_equal(data["kern_log_scale"], log_scale)
    np.testing.assert_array_equal(data["loc"], design.loc)
    np.testing.assert_array_equal(data["width"], np.full((k, 1), design.width[0]))
    # integer arrays for Stan's int declarations
    assert data["cls"].dtype.kind == data["count"].dtype.kind == "i"


def test_build_stan_data_two_dimensional_points():
    rng = np.random.default_rng(4)
    cls = rng.integers(0, 3, 400)
    y = np.round(rng.normal(cls[:, None], 1.0, (400, 2)), 1)  # rounded: repeated rows
    data, design = _stan_data.build_stan_data(cls, y, y, None, 3, 49)
    assert (data["C"], data["D"], data["K"], data["P"], data["R"]) == (3, 2, 49, 4, 45)
    assert design.record()["n_fixed"] == 4  # 1, u1, u2, u1 u2 (QUADRATIC_NULL_2D off)
    assert design.shape == (7, 7)
    assert data["count"].sum() == 400 and data["N"] < 400
    assert len({(c, *r) for c, r in zip(cls, map(tuple, y), strict=True)}) == data["N"]
    np.testing.assert_array_equal(data["y_lower"], data["y_upper"])
    np.testing.assert_array_equal(data["censored"], [0, 0])
    assert data["width"].shape == (49, 2)


def test_rows_given_with_counts_are_sorted_by_class_not_merged():
    cls = np.array([1, 0, 2, 0, 1])
    y = np.array([0.3, 0.1, 0.2, 0.1, 0.5])  # rows 1 and 3 are equal, and stay apart
    counts = np.array([2, 1, 4, 3, 1])
    data, _ = _stan_data.build_stan_data(cls, y, y, None, 3, 5, counts=counts)
    np.testing.assert_array_equal(data["cls"], [1, 1, 2, 2, 3])
    np.testing.assert_array_equal(data["y_lower"][:, 0], [0.1, 0.1, 0.3, 0.5, 0.2])
    np.testing.assert_array_equal(data["count"], [1, 3, 2, 1, 4])
    with pytest.raises(ValueError, match="counts must be positive integers, one per row"):
        _stan_data.build_stan_data(cls, y, y, None, 3, 5, counts=np.array([1, 1, 0, 1, 1]))


def test_default_prior_and_overrides():
    rng = np.random.default_rng(5)
    cls = rng.integers(0, 2, 300)
    y = rng.normal(size=(300, 2))
    data, design = _stan_data.build_stan_data(cls, y, y, None, 2, 16)
    defaults = _stan_data.default_prior(design)
    assert set(defaults) == set(_stan_data.PRIOR_KEYS)
    assert defaults == {
        "tau_a_scale": _design.TAU_DENSITY_SCALE, "tau_f_scale": _design.TAU_CLASS_SCALE,
        "tau_f_df": None, "tau_f_floor": 0.0, "intercept_scale": _design.INTERCEPT_SCALE,
        "slope_scale": _design.SLOPE_SCALE, "tau_l_scale": 0.0,  # local scales: 1-D only
    }  # fmt: skip
    # two output dimensions keep a half-Normal tau_f, which the program reads as df 0; one
    # dimension takes the half-Student-t with TAU_CLASS_DF degrees of freedom
    assert (data["tau_f_scale"], data["tau_f_df"]) == (5.0, 0.0)
    y1 = rng.normal(size=300)
    data_1, design_1 = _stan_data.build_stan_data(cls, y1, y1, None, 2)
    assert (design_1.tau_f_df, data_1["tau_f_df"]) == (_design.TAU_CLASS_DF, 3.0)
    assert design_1.record()["tau_f_df"] == 3.0 and design.record()["tau_f_df"] is None
    # the user chooses either family in any dimension
    data_n, design_n = _stan_data.build_stan_data(cls, y1, y1, None, 2, None, {"tau_f_df": None})
    assert (design_n.tau_f_df, data_n["tau_f_df"]) == (None, 0.0)
    np.testing.assert_array_equal(data["fixed_scale"], [5.0, 40.0, 40.0, 40.0])
    # scattered centres (three dimensions or more): the same slope prior since 2026-12-08
    y3 = rng.normal(size=(300, 3))
    data_c, design_c = _stan_data.build_stan_data(cls, y3, y3, None, 2, 12)
    assert design_c.kind == "centres"
    np.testing.assert_array_equal(data_c["fixed_scale"], [5.0, 40.0, 40.0, 40.0])
    assert _stan_data.default_prior(design_c)["slope_scale"] == _design.CENTRES_SLOPE_SCALE
    # ... and a soft floor under tau_f of their own, recorded, which the user can remove
    assert data_c["tau_f_floor"] == design_c.record()["tau_f_floor"] == 0.3
    assert _design.TAU_CLASS_FLOOR_CENTRES == 0.3
    _, design_c0 = _stan_data.build_stan_data(cls, y3, y3, None, 2, 12, {"tau_f_floor": 0})
    assert design_c0.tau_f_floor == 0.0
    prior = {"tau_a_scale": 3.0, "tau_f_scale": 0.5, "tau_f_df": 7, "tau_f_floor": 0.8,
             "intercept_scale": 2.0, "slope_scale": 7}  # fmt: skip
    data2, design2 = _stan_data.build_stan_data(cls, y, y, None, 2, 16, prior)
    assert (data2["tau_a_scale"], data2["tau_f_scale"], data2["tau_f_df"]) == (3.0, 0.5, 7.0)
    assert design2.record()["tau_f_df"] == 7.0  # kept with a saved transducer
    assert data2["tau_f_floor"] == design2.record()["tau_f_floor"] == 0.8
    assert data["tau_f_floor"] == 0.0  # two output dimensions: no floor unless asked for
    # one output dimension takes the floor TAU_CLASS_FLOOR, which the user can remove
    assert data_1["tau_f_floor"] == design_1.record()["tau_f_floor"] == _design.TAU_CLASS_FLOOR
    assert _design.TAU_CLASS_FLOOR == 1.0
    assert data_n["tau_f_floor"] == 1.0  # choosing the family leaves the floor
    data_0, design_0 = _stan_data.build_stan_data(cls, y1, y1, None, 2, None, {"tau_f_floor": 0})
    assert data_0["tau_f_floor"] == design_0.tau_f_floor == 0.0
    # the density block's form is recorded with the design (kept by a saved transducer)
    assert data_1["density_marginal"] == design_1.record()["density_marginal"] == 0
    np.testing.assert_array_equal(data2["fixed_scale"], [2.0, 7.0, 7.0, 7.0])
    assert _stan_data.default_prior(design2) == {
        **{key: float(v) for key, v in prior.items()},
        "tau_l_scale": 0.0,
    }
    assert _stan_data.default_prior(design_c)["tau_f_df"] is None  # centres: half-Normal
    # one override leaves the others at their defaults
    data3, _ = _stan_data.build_stan_data(cls, y, y, None, 2, 16, {"slope_scale": 1.5})
    np.testing.assert_array_equal(data3["fixed_scale"], [5.0, 1.5, 1.5, 1.5])
    assert (data3["tau_f_scale"], data3["tau_f_df"]) == (_design.TAU_CLASS_SCALE, 0.0)
    # the kernels do not depend on the prior
    np.testing.assert_array_equal(data2["kern"], data["kern"])


def test_transducer_docstring_names_exactly_the_prior_keys_and_their_defaults():
    """The ``prior`` parameter of Transducer documents every key build_stan_data accepts,
    no other ``*_scale`` or ``*_df`` key (model 1's ``a_scale`` was listed), and the
    defaults it states are those of a 1-D design."""
    import re

    from yieldwise import Transducer

    doc = Transducer.__doc__
    assert set(re.findall(r"\b\w+_(?:scale|df|floor)\b", doc)) == set(_stan_data.PRIOR_KEYS)
    stated = dict(re.findall(r"``(\w+_(?:scale|df|floor))`` \(default ([0-9.]+)[;)]", doc))
    y = np.linspace(-2.0, 2.0, 40)
    _, design = _stan_data.build_stan_data(np.arange(40) % 2, y, y, None, 2)
    defaults = _stan_data.default_prior(design)
    assert {key: float(value) for key, value in stated.items()} == defaults
    assert list(stated) == list(_stan_data.PRIOR_KEYS)


@pytest.mark.parametrize(
    ("prior", "message"),
    [
        ({"mu_loc": 0.0}, r"prior has unknown hyper-parameters \['mu_loc'\]; valid: "
                          r"\['tau_a_scale', 'tau_f_scale', 'tau_f_df', 'tau_f_floor', "
                          r"'intercept_scale', 'slope_scale', 'tau_l_scale'\]"),
        ({"eta_scale": 1.0, "alpha_conc": 1.0}, r"unknown hyper-parameters "
                                                r"\['alpha_conc', 'eta_scale'\]"),
        ({"tau_f_scale": -1.0}, r"prior\['tau_f_scale'\] must be a positive number, found -1"),
        ({"slope_scale": 0}, r"prior\['slope_scale'\] must be a positive number, found 0"),
        ({"tau_f_df": 0.0}, r"prior\['tau_f_df'\] must be a positive number \(or None for a "
                            r"half-Normal scale\), found 0.0"),
        ({"tau_f_floor": -1.0}, r"prior\['tau_f_floor'\] must be a positive number \(or 0 "
                                r"for none\), found -1.0"),
        ({"tau_a_scale": np.nan}, r"prior\['tau_a_scale'\] must be a positive number, found nan"),
        ({"intercept_scale": np.inf}, r"prior\['intercept_scale'\] must be a positive number"),
        ({"tau_f_scale": "wide"}, r"prior\['tau_f_scale'\] must be a positive number, "
                                  r"found 'wide'$"),
        ({"tau_f_scale": "2.5"}, r"prior\['tau_f_scale'\] must be a positive number, "
                                 r"found '2.5'$"),  # a numeric string is still a string
        ({"tau_f_scale": None}, r"prior\['tau_f_scale'\] must be a positive number, "
                                r"found None$"),
        ({"tau_f_scale": [1, 2]}, r"prior\['tau_f_scale'\] must be a positive number, "
                                  r"found \[1, 2\]$"),
        ({"slope_scale": np.array([3.0])}, r"prior\['slope_scale'\] must be a positive "
                                           r"number, found array\(\[3\.\]\)$"),
        ({"slope_scale": True}, r"prior\['slope_scale'\] must be a positive number, "
                                r"found True$"),
    ],
)  # fmt: skip
def test_prior_overrides_are_validated(prior, message):
    cls = np.array([0, 1] * 10)
    y = np.linspace(0, 1, 20)
    with pytest.raises(ValueError, match=message):
        _stan_data.build_stan_data(cls, y, y, None, 2, 5, prior)


INIT_SHAPES = {"a_fixed": "P-1", "tau_a": "", "a_smooth": "R", "f_fixed": "P,C-1",
               "tau_f": "C-1", "f_raw": "R,C-1"}  # fmt: skip


def _init_shapes(data):
    sizes = {"P-1": data["P"] - 1, "R": data["R"], "P": data["P"], "C-1": data["C"] - 1}
    return {k: tuple(sizes[p] for p in v.split(",") if p) for k, v in INIT_SHAPES.items()}


@pytest.mark.parametrize("case", ["votes", "three classes 2-D"])
def test_initial_values_keys_shapes_and_support(case):
    rng = np.random.default_rng(6)
    if case == "votes":
        cls, lo, hi = _votes(rng)
        data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    else:
        cls = rng.integers(0, 3, 300)
        y = rng.normal(cls[:, None], 1.0, (300, 2))
        data, _ = _stan_data.build_stan_data(cls, y, y, None, 3, 25)
    inits = _stan_data.initial_values(data, 3, seed=1)
    assert len(inits) == 3
    expected = _init_shapes(data)
    for init in inits:
        assert set(init) == set(expected)  # the program's parameters block, no more
        assert {k: np.shape(v) for k, v in init.items()} == expected
        assert init["tau_a"] > 0 and (np.asarray(init["tau_f"]) > 0).all()
    assert not np.array_equal(inits[0]["a_smooth"], inits[1]["a_smooth"])  # jittered per chain
    again = _stan_data.initial_values(data, 3, seed=1)
    for a, b in zip(inits, again, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def _initial_mixture(data, init):
    """theta, beta and the log-density a, as the Stan program computes them from ``init``."""
    fixed, smooth = np.asarray(data["fixed_basis"]), np.asarray(data["smooth_basis"])
    a = smooth @ init["a_smooth"] + fixed[:, 1:] @ init["a_fixed"]
    theta = np.repeat(a[:, None], data["C"], axis=1)
    theta[:, 1:] += fixed @ init["f_fixed"] + smooth @ (init["f_raw"] * init["tau_f"])
    beta = np.exp(theta - theta.max())
    return a, theta, beta / beta.sum()


def _kernel_shares(data):
    """Each row's items shared among the kernels in proportion to its kernel values, plus
    half an item per kernel (initial_values' guard: an empty kernel gets a finite log)."""
    share = np.full(data["K"], 0.5)
    for row, count in zip(np.asarray(data["kern"]), data["count"], strict=True):
        share += count * row / row.sum()
    return share / share.sum()


def test_initial_class_frequencies_are_the_calibration_frequencies():
    rng = np.random.default_rng(7)
    cls, lo, hi = _votes(rng)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    observed = np.bincount(cls) / cls.size
    for init in _stan_data.initial_values(data, 4, seed=2):
        _, _, beta = _initial_mixture(data, init)
        freq = beta.sum(axis=0)
        # intercept jitter sd 0.1 and smooth jitter: within 0.35 on the log-odds
        assert abs(np.log(freq[1] / freq[0]) - np.log(observed[1] / observed[0])) < 0.35
        # and the initial point has a finite log-likelihood under the numpy mixture
        w = beta.sum(axis=1)
        alpha = beta / w[:, None]
        ll = _mixture.log_likelihood(
            w, alpha, data["loc"], data["width"], data["cls"] - 1,
            data["y_lower"], data["y_upper"], data["censored"], data["count"],
        )  # fmt: skip
        assert np.isfinite(ll).all()


def test_initial_log_density_has_the_trend_of_the_kernel_shares():
    """The fixed (linear) part of the initial log-density a is that of log(kernel shares):
    the smooth basis is orthogonal to it, so neither jitter nor smoothing moves it."""
    rng = np.random.default_rng(8)
    cls, lo, hi = _votes(rng)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    fixed = np.asarray(data["fixed_basis"])
    target = np.linalg.lstsq(fixed, np.log(_kernel_shares(data)), rcond=None)[0][1]
    assert target < -2  # many more items at few votes: a strongly falling density
    for init in _stan_data.initial_values(data, 2, seed=3):
        a, _, _ = _initial_mixture(data, init)
        slope = np.linalg.lstsq(fixed, a, rcond=None)[0][1]
        assert slope == pytest.approx(target, rel=0.05)


@pytest.mark.parametrize("modes", [None, "default"])
def test_initial_log_density_is_the_kernel_shares(monkeypatch, modes):
    """ "The log-density starts at the kernels' shares of the items" (initial_values): its
    log is the least-squares fit of log(shares) by the design's functions (computed here
    with numpy, up to the per-chain jitter, sd ~0.02 in log). With every random-walk
    function (SMOOTH_MODES_1D None) that is the shares themselves: within 0.05 in total
    variation, and within 25 % at every kernel holding at least 1 % of the items; the 28
    smoothest of 58 follow them within 0.1."""
    if modes is None:
        monkeypatch.setattr(_design, "SMOOTH_MODES_1D", None)
    rng = np.random.default_rng(8)
    cls, lo, hi = _votes(rng)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    share = _kernel_shares(data)
    columns = np.hstack([data["fixed_basis"], data["smooth_basis"]])
    fit = columns @ np.linalg.lstsq(columns, np.log(share), rcond=None)[0]
    for init in _stan_data.initial_values(data, 2, seed=3):
        a, _, _ = _initial_mixture(data, init)
        centred = (a - a.mean()) - (fit - fit.mean())
        assert np.abs(centred).max() < 0.1
        w = np.exp(a - a.max())
        w /= w.sum()
        assert 0.5 * np.abs(w - share).sum() < (0.05 if modes is None else 0.1)
        if modes is None:
            big = share >= 0.01
            assert np.abs(np.log(w[big] / share[big])).max() < np.log(1.25)


def test_initial_log_density_with_empty_kernels_stays_finite_and_is_the_shares():
    """Two nearly identical outputs: the items lie on the diagonal of the 14 x 14 grid and
    the corner kernels get no item (kernel values down to ~1e-17). Half an item per kernel
    keeps their log finite, the initial density is still the shares everywhere (empty
    kernels included), and the log-likelihood at the initial point is finite."""
    rng = np.random.default_rng(11)
    cls = rng.integers(0, 2, 400)
    x = rng.normal(cls, 1.0)
    y = np.column_stack([x, x + rng.normal(0.0, 0.05, 400)])
    data, _ = _stan_data.build_stan_data(cls, y, y, None, 2)
    items = (data["count"] / data["kern"].sum(axis=1)) @ data["kern"]
    empty = items < 1e-6
    assert empty.sum() >= 20  # the premise: many kernels hold no item
    share = _kernel_shares(data)
    for init in _stan_data.initial_values(data, 3, seed=4):
        assert all(np.isfinite(v).all() for v in init.values())
        a, _, beta = _initial_mixture(data, init)
        w = np.exp(a - a.max())
        w /= w.sum()
        assert 0.5 * np.abs(w - share).sum() < 0.01
        # every kernel, empty ones included, within 10 % of its share (jitter only)
        assert np.abs(np.log(w / share)).max() < np.log(1.1)
        w_, alpha = beta.sum(axis=1), beta / beta.sum(axis=1, keepdims=True)
        ll = _mixture.log_likelihood(
            w_, alpha, data["loc"], data["width"], data["cls"] - 1,
            data["y_lower"], data["y_upper"], data["censored"], data["count"],
        )  # fmt: skip
        assert np.isfinite(ll).all()


@pytest.mark.parametrize("r", [5, 0])
def test_initial_values_use_the_given_smooth_basis(r):
    """A caller may pass fewer smooth columns than K - P (data["R"] = r): the initial
    values follow data["R"] and the given basis. The grid's columns are orthogonal to each
    other and to the fixed basis, so the least-squares coefficient of column j is, in
    closed form, B_j . log(shares) / |B_j|^2; the chains scatter around it with the jitter
    sd (a tenth of a fifth of tau_a_scale), and the trend is np.polyfit's slope."""
    rng = np.random.default_rng(8)
    cls, lo, hi = _votes(rng)
    full, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    data = dict(full, R=r, smooth_basis=np.asarray(full["smooth_basis"])[:, :r])
    log_share = np.log(_kernel_shares(data))
    basis = data["smooth_basis"]
    exact = basis.T @ log_share / (basis**2).sum(axis=0)
    slope = np.polyfit(np.asarray(data["fixed_basis"])[:, 1], log_share, 1)[0]
    inits = _stan_data.initial_values(data, 400, seed=5)
    assert {k: np.shape(v) for k, v in inits[0].items()} == _init_shapes(data)
    tau_a0 = 0.2 * data["tau_a_scale"]
    for init in inits[:3]:
        assert init["a_fixed"][0] == pytest.approx(slope, rel=1e-9)
        assert all(np.isfinite(v).all() for v in init.values())
    if r == 0:
        # no smooth coefficient to size tau_a by: a fifth of its scale, jittered 10 % in log
        tau = np.array([init["tau_a"] for init in inits])
        assert np.abs(np.log(tau / tau_a0)).max() < 0.45
        return
    jitter = np.array([init["a_smooth"] for init in inits]) - exact
    assert np.abs(jitter.mean()) < 4 * 0.1 * tau_a0 / np.sqrt(jitter.size)
    assert jitter.std() == pytest.approx(0.1 * tau_a0, rel=0.1)


def test_initial_values_refuse_a_basis_that_does_not_match_r():
    rng = np.random.default_rng(8)
    cls, lo, hi = _votes(rng)
    data, _ = _stan_data.build_stan_data(cls, lo, hi, [1], 2)
    k, r = data["K"], data["R"]
    message = (
        rf"data\['smooth_basis'\] must have shape \(K, R\) = \({k}, 5\), found "
        rf"\({k}, {r}\); set data\['R'\] to its number of columns"
    )
    with pytest.raises(ValueError, match=message):
        _stan_data.initial_values(dict(data, R=5), 2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"lower": np.array([[0.0], [1.0]]), "upper": np.array([[0.5], [1.0]])},
            "lower must equal",
        ),
        ({"censored": [1], "upper": np.array([[0.0], [0.0]])}, "below its upper"),
        ({"class_index": np.array([0, 2])}, r"integers in \[0, 2\)"),
        ({"censored": [0, 1]}, "length-1"),
        ({"lower": np.array([[np.inf], [0.0]]), "upper": np.array([[np.inf], [0.0]])}, "finite"),
    ],
)
def test_build_stan_data_validates(kwargs, message):
    args = {
        "class_index": np.array([0, 1]),
        "lower": np.array([[0.0], [0.0]]),
        "upper": np.array([[0.0], [0.0]]),
        "censored": [0],
        "n_classes": 2,
        "n_components": 3,
        "prior": None,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        _stan_data.build_stan_data(**args)


# --- the numpy mixture -----------------------------------------------------------------


def test_log_joint_matches_scipy_brute_force():
    """Mixed point-valued and censored dimensions, infinite bin edges included."""
    rng = np.random.default_rng(4)
    s, k, c, n = 3, 4, 3, 7
    w, alpha, mu, sigma = _random_parameters(rng, s, k, c, 2)
    point = rng.normal(size=n)
    lo_c = rng.normal(size=n)
    hi_c = lo_c + rng.uniform(0.01, 1.0, n)
    lo_c[0], hi_c[1] = -np.inf, np.inf
    lower = np.column_stack([point, lo_c])
    upper = np.column_stack([point, hi_c])
    got = _mixture.log_joint(w, alpha, mu, sigma, lower, upper, [0, 1], max_elements=20)
    assert got.shape == (s, n, c)
    expected = np.zeros((s, n, c))
    for t in range(s):
        for i in range(n):
            for cc in range(c):
                total = 0.0
                for kk in range(k):
                    dens = stats.norm.pdf(point[i], mu[t, kk, 0], sigma[t, kk, 0])
                    prob = _bin_probability(lo_c[i], hi_c[i], mu[t, kk, 1], sigma[t, kk, 1])
                    total += w[t, kk] * alpha[t, kk, cc] * dens * prob
                expected[t, i, cc] = np.log(total)
    np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_log_joint_bins_far_in_the_tails_stay_finite_and_accurate():
    w, alpha = np.ones((1, 1)), np.full((1, 1, 2), 0.5)
    mu, sigma = np.zeros((1, 1, 1)), np.ones((1, 1, 1))
    lower = np.array([[30.0], [-40.0], [-np.inf]])
    upper = np.array([[30.01], [-39.99], [-45.0]])
    got = _mixture.log_joint(w, alpha, mu, sigma, lower, upper, [1])[0, :, 0]
    logsf, logcdf = stats.norm.logsf, stats.norm.logcdf
    expected = np.log(0.5) + np.array(
        [
            logsf(30.0) + np.log1p(-np.exp(logsf(30.01) - logsf(30.0))),
            logcdf(-39.99) + np.log1p(-np.exp(logcdf(-40.0) - logcdf(-39.99))),
            logcdf(-45.0),
        ]
    )
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def test_class_probabilities_two_ways():
    rng = np.random.default_rng(5)
    params = _random_parameters(rng, 50, 3, 2, 1)
    y = np.linspace(-2, 2, 5)
    log_g = _mixture.log_joint(*params, y, y, [0])
    pooled = _mixture.class_probabilities(log_g)
    averaged = _mixture.class_probabilities(log_g, exchangeable=False)
    np.testing.assert_allclose(pooled.sum(axis=1), 1.0)
    np.testing.assert_allclose(averaged.sum(axis=1), 1.0)
    g = np.exp(log_g)
    np.testing.assert_allclose(pooled, g.sum(0) / g.sum(axis=(0, 2))[:, None])


# ------------------------------------------------------- the likelihood's sparse form
def _two_d_items(n=400, seed=5):
    rng = np.random.default_rng(seed)
    cls = (rng.random(n) < 0.3).astype(int)
    y = rng.normal(np.where(cls[:, None] == 1, 1.0, -1.0), 1.0, (n, 2))
    return cls, y


def test_the_sparse_form_is_kern_above_the_cut_in_each_rows_class_block():
    """Two output dimensions (a 14 x 14 grid): the compressed rows, unpacked by scipy,
    are kern with every value below the cut set to 0, placed in the row's class's block
    of K columns; the dense form is used when too many values remain (a coarse 1-D grid)
    or cut = 0."""
    from scipy.sparse import csr_matrix

    cls, y = _two_d_items()
    data, _ = _stan_data.build_stan_data(cls, y, y, [0, 0], 2, preconditioned=False)
    n, k, kern = data["N"], data["K"], data["kern"]
    assert data["kern_sparse"] == 1
    matrix = csr_matrix(
        (data["kern_w"], data["kern_v"] - 1, data["kern_u"] - 1), shape=(n, 2 * k)
    ).toarray()
    expected = np.zeros((n, 2 * k))
    for row in range(n):  # by hand, row by row
        block = (data["cls"][row] - 1) * k
        for j in range(k):
            if kern[row, j] >= _stan_data.KERNEL_TAIL_CUT:
                expected[row, block + j] = kern[row, j]
    np.testing.assert_array_equal(matrix, expected)
    kept = data["kern_nz"] / (n * k)
    assert 0.05 < kept <= _stan_data.SPARSE_SHARE_MAX
    # every row keeps its largest value (1) and the values left out are below the cut
    assert (matrix.max(axis=1) == 1.0).all()
    assert kern[(kern > 0) & (kern < _stan_data.KERNEL_TAIL_CUT)].size == n * k - data[
        "kern_nz"
    ] - int((kern == 0).sum())
    dense, _ = _stan_data.build_stan_data(
        cls, y, y, [0, 0], 2, preconditioned=False, kernel_tail_cut=0.0
    )
    assert dense["kern_sparse"] == 0 and dense["kern_nz"] == 0
    assert (dense["kern_u"] == 1).all()
    # on a 1-D grid the values kept are about 9 kernels' (within 8.3 sd of a row, the sd
    # half a spacing): 15 % of 60 kernels, the sparse form; 75 % of 12, the dense one
    for kernels, sparse in ((None, 1), (12, 0)):
        one_d, _ = _stan_data.build_stan_data(
            *_votes(np.random.default_rng(3)), [1], 2, kernels, preconditioned=False
        )
        kept = (np.asarray(one_d["kern"]) >= _stan_data.KERNEL_TAIL_CUT).mean()
        assert (kept <= _stan_data.SPARSE_SHARE_MAX) == bool(sparse) == bool(one_d["kern_sparse"])


@pytest.mark.parametrize("bad", [-1e-16, 1e-3, float("nan"), "small", True])
def test_a_bad_kernel_tail_cut_is_refused_naming_it(bad):
    cls, y = _two_d_items(60)
    with pytest.raises(ValueError, match=r"kernel_tail_cut must be a number in \[0, 1e-6\]"):
        _stan_data.build_stan_data(cls, y, y, [0, 0], 2, preconditioned=False, kernel_tail_cut=bad)


def test_the_sparse_fields_are_checked_naming_the_field():
    cls, y = _two_d_items()
    data, _ = _stan_data.build_stan_data(cls, y, y, [0, 0], 2, preconditioned=False)
    d = data.as_dict()
    moved = d["kern_v"].copy()
    last = int(np.flatnonzero(d["cls"] == 1)[-1])  # a class-1 row: move a value to class 2
    moved[d["kern_u"][last] - 1] += d["K"]
    with pytest.raises(ValueError, match=r"StanData\.kern_v must put row n's values in its class"):
        _stan_data.StanData.from_mapping(dict(d, kern_v=moved))
    with pytest.raises(ValueError, match=r"StanData\.kern_u must rise from 1 to kern_nz \+ 1"):
        _stan_data.StanData.from_mapping(dict(d, kern_u=d["kern_u"] + 1))
    with pytest.raises(ValueError, match=r"StanData\.kern_w must have shape \(kern_nz\) = "):
        _stan_data.StanData.from_mapping(dict(d, kern_w=d["kern_w"][1:]))
    with pytest.raises(ValueError, match=r"StanData\.kern_w must lie in \(0, 1\]"):
        _stan_data.StanData.from_mapping(dict(d, kern_w=-d["kern_w"]))
    with pytest.raises(
        ValueError, match=r"kern_nz must be 0 and kern_u all 1 when kern_sparse is 0"
    ):
        _stan_data.StanData.from_mapping(dict(d, kern_sparse=0))


def test_a_class_balanced_range_covers_a_rare_class(monkeypatch):
    """RANGE_CLASS_BALANCED (the default): at 0.5 % positives every positive's score lies
    beyond the overall 99 % quantile, so a count-weighted grid (RANGE_CLASS_BALANCED = 0)
    ends below them; with each class weighted alike the grid spans the positives' 1-99 %
    quantiles too."""
    rng = np.random.default_rng(11)
    n = 4000
    cls = (rng.random(n) < 0.005).astype(int)
    y = np.where(cls == 1, rng.normal(4.0, 0.5, n), rng.normal(0.0, 1.0, n))[:, None]
    assert 10 <= cls.sum() <= 40
    balanced, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, preconditioned=False)
    monkeypatch.setattr(_design, "RANGE_CLASS_BALANCED", 0)
    plain, _ = _stan_data.build_stan_data(cls, y, y, [0], 2, preconditioned=False)
    positives = y[cls == 1, 0]
    assert plain.loc.max() < np.quantile(positives, 0.25)  # the grid ends below them
    # the class-balanced law's quantiles, by hand: each class weighs one half
    w = np.where(cls == 1, 0.5 / cls.sum(), 0.5 / (n - cls.sum()))
    order = np.argsort(y[:, 0])
    cum = np.cumsum(w[order])
    high = y[order, 0][np.searchsorted(cum, 0.99 * cum[-1])]
    low = y[order, 0][np.searchsorted(cum, 0.01 * cum[-1])]
    np.testing.assert_allclose([balanced.loc.min(), balanced.loc.max()], [low, high], rtol=1e-12)
    assert balanced.loc.max() > np.quantile(positives, 0.9)


def test_centred_odds_is_the_kernel_weighted_mean_of_the_rows():
    """build_stan_data's ``odds_mean``: at each kernel, the rows' reference log-odds averaged
    with their Normal densities under that kernel as weights (scipy, item by item), and
    the fixed part's prior from ``_design``; without it the default prior (offset 0, the
    design's sds, Normal)."""
    from scipy.stats import norm

    from yieldwise import _design

    rng = np.random.default_rng(8)
    cls = rng.integers(0, 3, 200)
    y = rng.normal(cls, 1.0)
    odds_mean = np.column_stack([-np.abs(y), np.cos(y)])
    plain, _ = _stan_data.build_stan_data(cls, y, y, [0], 3, 12, preconditioned=False)
    data, design = _stan_data.build_stan_data(
        cls, y, y, [0], 3, 12, preconditioned=False, odds_mean=odds_mean
    )
    for k in range(design.n_components):
        weight = norm.pdf(y, design.loc[k, 0], np.ravel(design.width)[0])
        np.testing.assert_allclose(
            data["odds_offset"][k], weight @ odds_mean / weight.sum(), rtol=1e-9
        )
    assert data["odds_df"] == _design.CENTRED_ODDS_DF
    assert list(data["odds_scale"]) == [_design.CENTRED_INTERCEPT_SCALE] + [
        _design.CENTRED_SLOPE_SCALE
    ] * (int(data["P"]) - 1)
    assert not np.any(plain["odds_offset"]) and plain["odds_df"] == 0.0
    np.testing.assert_array_equal(plain["odds_scale"], plain["fixed_scale"])
    with pytest.raises(ValueError, match=r"odds_mean must be a finite array of shape"):
        _stan_data.build_stan_data(cls, y, y, [0], 3, 12, odds_mean=odds_mean[:, :1])
