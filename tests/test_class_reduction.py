"""Many classes: the rank reduction (yieldwise/transducer/reduction.py) and the transducer
built on it. The maps are checked against worked examples and brute force; the fitted
transducer's plumbing runs on the Laplace backend (seconds, no Stan), its numbers against
independent computations (closed-form class frequencies of the reduced mixture, quantiles
of the draws, the per-item shares)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import yieldwise as yw
from yieldwise.transducer.io import TransducerFileError
from yieldwise.transducer.reduction import (
    MEAN_NODES,
    TEMPERATURE_PRIOR_SD,
    ClassRanks,
    choose_reduction,
    gauss_nodes,
    temperature_draws,
)

CLASSES = ("a", "b", "c", "d", "e")
IDENTITY = yw.UtilityMatrix(np.eye(5), classes=list(CLASSES), decisions=list(CLASSES))


# ------------------------------------------------------------------ the maps
def test_shares_are_the_softmax_of_the_tempered_lower_scores_at_every_temperature():
    """shares() per temperature and output against exp(gamma s_j) / sum exp(gamma s_j) over
    the output's lower classes, written out: positive temperatures (the fast path: the
    first lower score is each row's largest), a scalar, and a batch holding zero and a
    negative one (scipy's softmax)."""
    r = ClassRanks("scores", tuple(f"s{j}" for j in range(6)), tuple(range(6)), 100)
    x = np.random.default_rng(4).normal(0, 3, (7, 6))
    x[0] = [40.0, -30.0, 0.0, 25.0, -45.0, 1.0]  # spread far enough to underflow at gamma 3
    order = np.argsort(-x, axis=1, kind="stable")
    lower = np.take_along_axis(x, order[:, 2:], axis=1)  # (7, 4), in the output's order

    def by_hand(gamma):
        w = np.exp(gamma * lower - np.max(gamma * lower, axis=1, keepdims=True))
        return w / w.sum(axis=1, keepdims=True)

    for temps in (np.array([0.3, 1.0, 3.0]), np.array([0.5, 0.0, -1.5])):
        got = r.shares(x, temps)
        assert got.shape == (3, 7, 4)
        for t, gamma in enumerate(temps):
            np.testing.assert_allclose(got[t], by_hand(gamma), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(r.shares(x, 2.0, order), by_hand(2.0), rtol=1e-12, atol=1e-300)


def test_margins_ranks_and_expand_match_a_worked_example():
    r = ClassRanks("scores", ("s0", "s1", "s2", "s3"), (0, 1, 2, 3), 100)
    x = np.array([[0.0, 3.0, 1.0, 0.0], [2.0, -1.0, 2.5, 0.5]])
    # item 0: order 1, 2, then 0 and 3 tied (column order kept); item 1: order 2, 0, 3, 1
    np.testing.assert_allclose(r.margins(x)[:, 0], [2.0, 0.5])
    np.testing.assert_array_equal(r.ranks(x, np.array([0, 1])), [2, 3])
    np.testing.assert_array_equal(r.reduced_classes(x, np.array([3, 0])), [2, 1])
    q = np.array([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2]])
    p = r.expand(x, q)
    # item 0: the rest {0, 3} share 0.1 equally; item 1: {3, 1} share 0.2 as e^0.5 : e^-1
    w = np.exp(0.5) / (np.exp(0.5) + np.exp(-1.0))
    np.testing.assert_allclose(p[0], [0.05, 0.7, 0.2, 0.05])
    np.testing.assert_allclose(p[1], [0.3, 0.2 * (1 - w), 0.5, 0.2 * w])
    # the same values in each output's own order (top class first), into a given buffer
    buffer = np.full((2, 4), np.nan)
    ordered = r.in_rank_order(q, r.shares(x), out=buffer)
    assert ordered is buffer
    np.testing.assert_allclose(ordered[0], [0.7, 0.2, 0.05, 0.05])
    np.testing.assert_allclose(ordered[1], [0.5, 0.3, 0.2 * w, 0.2 * (1 - w)])
    with pytest.raises(ValueError, match=r"out must have shape \(2, 4\)"):
        r.in_rank_order(q, r.shares(x), out=np.empty((2, 5)))


def test_the_margin_against_the_rest_is_the_top_class_log_odds():
    """margin="rest": s_(1) - log sum_{j >= 2} exp(s_(j)), worked by hand, stable far out;
    for a probability vector, the logit of the squeezed top probability."""
    r = ClassRanks("scores", ("s0", "s1", "s2", "s3"), (0, 1, 2, 3), 100, 1, "rest")
    x = np.array([[0.0, 3.0, 1.0, 0.0], [900.0, 0.0, 1.0, 2.0]])
    far = 900.0 - 2.0 - np.log1p(np.exp(-1) + np.exp(-2))  # rest {2, 1, 0} from 2
    np.testing.assert_allclose(r.margins(x)[:, 0], [3.0 - np.log(np.e + 2.0), far])
    n = 50
    s = ClassRanks("simplex", tuple("wxyz"), tuple("WXYZ"), n, 1, "rest")
    p = np.array([[0.5, 0.3, 0.2, 0.0]])
    top = (0.5 * (n - 1) + 1 / 4) / n  # the squeezed probabilities still sum to 1
    np.testing.assert_allclose(s.margins(p)[0, 0], np.log(top / (1 - top)))
    assert ClassRanks.from_json(s.to_json()) == s
    with pytest.raises(ValueError, match=r"margin must be one of \['second', 'rest', 'both'\]"):
        ClassRanks("scores", ("a", "b", "c"), (1, 2, 3), 10, margin="gap")


def test_both_margins_are_the_gap_and_the_seconds_lead_by_hand():
    """margin="both": two columns, s_(1) - s_(2) and s_(2) - log sum_{j >= 3} exp(s_(j)),
    worked by hand (item 0's order 1, 2, then 0 and 3 tied; item 1's 2, 0, 3, 1), stable
    far out; the output's own first : second : others masses are 1 : e^-m : e^-(m + l)."""
    r = ClassRanks("scores", ("s0", "s1", "s2", "s3"), (0, 1, 2, 3), 100, margin="both")
    x = np.array([[0.0, 3.0, 1.0, 0.0], [2.0, -1.0, 2.5, 0.5], [900.0, 0.0, 1.0, 2.0]])
    assert r.margin_columns == ("margin", "lead")
    expected = [[2.0, 1.0 - np.log(2.0)], [0.5, 2.0 - np.log(np.exp(0.5) + np.exp(-1.0))],
                [898.0, 1.0 - np.log1p(np.exp(-1.0))]]  # fmt: skip
    np.testing.assert_allclose(r.margins(x), expected, rtol=1e-12)
    p = np.exp(x[:2]) / np.exp(x[:2]).sum(axis=1, keepdims=True)
    m, lead = r.margins(x[:2]).T
    top = p.max(axis=1)
    np.testing.assert_allclose(1 - top - top * np.exp(-m), top * np.exp(-m - lead), rtol=1e-12)
    assert ClassRanks.from_json(r.to_json()) == r
    assert ClassRanks("scores", ("a", "b", "c"), (1, 2, 3), 10).margin_columns == ("margin",)


def test_own_log_odds_are_the_classifiers_by_hand():
    """The classifier's own log-odds of each lower rank against the first (the centred
    prior's mean, _design.RANKS_CENTRED), worked by hand: item 0's softmax order is 1, 2,
    then 0 and 3; the second's log-odds is minus the margin, the others' the log of their
    summed probabilities over the top's; with kept = 1 every class below the top is one."""
    r = ClassRanks("scores", ("s0", "s1", "s2", "s3"), (0, 1, 2, 3), 100)
    x = np.array([[0.0, 3.0, 1.0, 0.0], [2.0, -1.0, 2.5, 0.5]])
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    expected = np.log([[p[0, 2] / p[0, 1], (p[0, 0] + p[0, 3]) / p[0, 1]],
                       [p[1, 0] / p[1, 2], (p[1, 3] + p[1, 1]) / p[1, 2]]])  # fmt: skip
    np.testing.assert_allclose(r.own_log_odds(x), expected, rtol=1e-12)
    np.testing.assert_allclose(r.own_log_odds(x)[:, 0], -r.margins(x)[:, 0], rtol=1e-12)
    rest = np.log((1 - p.max(axis=1)) / p.max(axis=1))
    np.testing.assert_allclose(r.with_kept(1).own_log_odds(x)[:, 0], rest, rtol=1e-12)


def test_simplex_scores_are_the_squeezed_log_probabilities():
    n, c = 50, 4
    r = ClassRanks("simplex", tuple("wxyz"), tuple("WXYZ"), n)
    p = np.array([[0.5, 0.3, 0.2, 0.0]])
    squeezed = (p * (n - 1) + 1 / c) / n
    np.testing.assert_allclose(r.scores(p), np.log(squeezed))
    np.testing.assert_allclose(r.margins(p)[0, 0], np.log(squeezed[0, 0] / squeezed[0, 1]))
    # others {y, z}: shares in proportion to the squeezed probabilities (a zero gets a little)
    out = r.expand(p, np.array([[0.6, 0.3, 0.1]]))[0]
    share = squeezed[0, 2] / (squeezed[0, 2] + squeezed[0, 3])
    np.testing.assert_allclose(out, [0.6, 0.3, 0.1 * share, 0.1 * (1 - share)])


def test_expand_maps_every_draw_as_its_mean_and_sums_to_one():
    rng = np.random.default_rng(3)
    r = ClassRanks("scores", tuple(f"s{j}" for j in range(6)), tuple(range(6)), 100)
    x = rng.normal(size=(7, 6))
    q = rng.dirichlet(np.ones(3), size=(4, 5, 7))  # (chain, draw, item, rank)
    per_draw = r.expand(x, q)
    looped = np.stack([[r.expand(x, q[i, j]) for j in range(5)] for i in range(4)])
    np.testing.assert_allclose(per_draw, looped)
    np.testing.assert_allclose(per_draw.sum(axis=-1), 1.0)
    np.testing.assert_allclose(per_draw.mean(axis=(0, 1)), r.expand(x, q.mean(axis=(0, 1))))
    one = r.with_kept(1)  # first and others: the second class shares "others" too
    p1 = one.expand(x, np.array([[0.9, 0.1]] * 7))
    order = np.argsort(-x, axis=1, kind="stable")
    rest = np.take_along_axis(x, order[:, 1:], axis=1)
    expected = 0.1 * np.exp(rest) / np.exp(rest).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(np.take_along_axis(p1, order[:, 1:], axis=1), expected)
    with pytest.raises(ValueError, match=r"rank_proba must have 3 columns"):
        r.expand(x, np.ones((7, 2)) / 2)


def _items_of_known_temperature(gamma: float, n: int, seed: int):
    """Scores of six classes and true classes drawn so that, below the top two, the class
    is softmax(gamma s) among the rest: the others' temperature is ``gamma``."""
    rng = np.random.default_rng(seed)
    r = ClassRanks("scores", tuple(f"s{j}" for j in range(6)), tuple(range(6)), n)
    x = rng.normal(size=(n, 6))
    order = r.order(x)
    rest = np.take_along_axis(x, order[:, 2:], axis=1)
    w = np.exp(gamma * rest)
    pick = (rng.random((n, 1)) > np.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)).sum(1)
    return r, x, order[np.arange(n), 2 + pick]


def test_the_temperature_posterior_matches_quadrature_and_finds_a_known_truth():
    """The draws' quantiles against the posterior integrated by scipy's quad (prior times the
    conditional likelihood, written out item by item), and a large sample's posterior
    around the temperature it was drawn with."""
    from scipy.integrate import quad

    r, x, cls = _items_of_known_temperature(2.5, 40, 1)
    draws = temperature_draws(r, x, cls, (4, 1000), seed=3)
    assert draws.shape == (4, 1000) and (draws > 0).all()
    order = r.order(x)
    rest = [x[i, order[i, 2:]] for i in range(40)]
    truth = [x[i, cls[i]] for i in range(40)]

    def density(g: float) -> float:  # the posterior of g = log gamma, unnormalised
        gamma = np.exp(g)
        ll = sum(
            gamma * s - np.log(np.exp(gamma * o).sum()) for s, o in zip(truth, rest, strict=True)
        )
        return float(np.exp(ll - 0.5 * (g / TEMPERATURE_PRIOR_SD) ** 2 + 60.0))

    total = quad(density, -8, 5, limit=200)[0]
    for g in np.quantile(np.log(draws), [0.1, 0.5, 0.9]):
        cdf = quad(density, -8, g, limit=200)[0] / total
        # 4,000 draws: a quantile's CDF within about 3 sd of its level
        assert cdf == pytest.approx(np.mean(np.log(draws) <= g), abs=0.02)
    big, xb, cb = _items_of_known_temperature(2.5, 4000, 2)
    g = np.log(temperature_draws(big, xb, cb, (2, 500), seed=1))
    assert abs(g.mean() - np.log(2.5)) < 4 * g.std() and g.std() < 0.1
    # no "others" item: the prior's draws
    prior = temperature_draws(r, x[:1], np.array([order[0, 0]]), (1, 4000), seed=0)
    assert np.log(prior).mean() == pytest.approx(0.0, abs=0.05)
    assert np.log(prior).std() == pytest.approx(TEMPERATURE_PRIOR_SD, abs=0.05)


def test_gauss_nodes_integrate_polynomials_exactly_against_the_samples():
    """The m-point rule of a sample's empirical measure integrates x^j exactly for
    j <= 2m - 1 (the sample's own moments), and not x^(2m) in general."""
    x = np.random.default_rng(2).gamma(2.0, 1.0, 3000)
    nodes, weights = gauss_nodes(x, 6)
    assert nodes.size == 6 and weights.sum() == pytest.approx(1.0)
    for j in range(12):
        assert weights @ nodes**j == pytest.approx(np.mean(x**j), rel=1e-9)
    assert abs(weights @ nodes**12 / np.mean(x**12) - 1) > 1e-6  # beyond 2m - 1: not exact
    few, w = gauss_nodes(np.array([1.0, 1.0, 2.0, 2.0, 2.0]), 6)  # two distinct values
    np.testing.assert_allclose(sorted(few), [1.0, 2.0])
    np.testing.assert_allclose(w[np.argsort(few)], [0.4, 0.6])


def test_the_record_round_trips_and_bad_records_are_named():
    r = ClassRanks("simplex", ("p0", "p1", "p2", "p3"), ("zero", 1, "two", 3.5), 40, kept=1)
    assert ClassRanks.from_json(r.to_json()) == r
    with pytest.raises(ValueError, match=r"lacks \['squeeze_n'\]"):
        ClassRanks.from_json('{"kind": "simplex", "columns": ["a","b","c"], "classes": [1,2,3]}')
    with pytest.raises(ValueError, match=r"kind must be one of"):
        ClassRanks("logit", ("a", "b", "c"), (1, 2, 3), 10)
    with pytest.raises(ValueError, match=r"one output column per class"):
        ClassRanks("scores", ("a", "b"), (1, 2, 3), 10)
    with pytest.raises(ValueError, match=r"kept must be 1 or 2"):
        ClassRanks("scores", ("a", "b", "c"), (1, 2, 3), 10, kept=3)


def test_choose_reduction_follows_its_rules(max_pairs):
    p4 = np.random.default_rng(0).dirichlet(np.ones(4), size=20)
    cols4, classes4 = tuple("wxyz"), tuple("WXYZ")
    auto = choose_reduction("auto", p4, cols4, classes4, ("simplex",), joint=False)
    assert auto == ClassRanks("simplex", cols4, classes4, 20, paired=True)  # 12 pairs
    with max_pairs(0):
        assert choose_reduction("auto", p4, cols4, classes4, ("simplex",), joint=False) == (
            ClassRanks("simplex", cols4, classes4, 20)
        )
    assert choose_reduction(None, p4, cols4, classes4, ("simplex",), joint=False) is None
    assert choose_reduction("auto", p4, cols4, classes4, ("simplex",), joint=True) is None
    p3 = p4[:, :3] / p4[:, :3].sum(axis=1, keepdims=True)  # three classes keep their grid
    assert choose_reduction("auto", p3, tuple("wxy"), tuple("WXY"), ("simplex",), False) is None
    scores = choose_reduction("ranks", p4 - 0.5, cols4, classes4, ("identity",) * 4, False)
    assert scores is not None and scores.kind == "scores"
    with pytest.raises(ValueError, match=r"one column per class .* found 4 column\(s\) for 5"):
        choose_reduction("ranks", p4, cols4, (*classes4, "V"), ("simplex",), False)
    with pytest.raises(ValueError, match=r"transformed as \['log'"):
        choose_reduction("ranks", p4 + 1, cols4, classes4, ("log",) * 4, False)
    with pytest.raises(ValueError, match=r'class_reduction must be "auto", "ranks" or None'):
        choose_reduction("top2", p4, cols4, classes4, ("simplex",), False)


# ------------------------------------------------------- the fitted transducer


@pytest.fixture(scope="module")
def reduced(five_class_data, max_pairs):
    """A reduction without pair offsets (tests/test_pair_offsets.py has them): the maps
    here are the rank model's own."""
    frame, labels = five_class_data(400, 1)
    with warnings.catch_warnings(), max_pairs(0):
        warnings.simplefilter("ignore")  # the Laplace backend's own warning
        t = yw.Transducer(backend="laplace", chains=2, draws=300, seed=2, progress=False)
        t.fit(frame, labels, class_labels=list(CLASSES))
    return t, frame, labels


def test_a_fit_on_five_classes_is_reduced_and_predicts_through_its_ranks(reduced, five_class_data):
    t, _, _ = reduced
    assert t.reduction_ is not None and t.reduction_.classes == CLASSES
    assert t.reduced_.classes_ == ("first", "second", "others")
    new, _ = five_class_data(50, 9)
    p = t.predict_proba(new)
    assert p.shape == (50, 5)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    # the top class of each output gets p(first | margin), read off the reduced fit
    margins = pd.DataFrame(t.reduction_.margins(new.to_numpy()), columns=["margin"])
    first = t.reduced_.predict_proba(margins)[:, 0]
    np.testing.assert_allclose(p[np.arange(50), new.to_numpy().argmax(axis=1)], first)
    assert "reduced: the rank of the true class" in repr(t)


@pytest.mark.parametrize("rows_a_block", [None, 2])
def test_bands_are_the_quantiles_of_the_per_draw_probabilities(reduced, rows_a_block,
                                                               monkeypatch):  # fmt: skip
    """Bands and the non-exchangeable mean, taken over draws in each output's own class
    order and put in the classes' order once, are the quantiles and mean of draws_proba;
    in one block of outputs and in blocks of two."""
    from yieldwise.transducer import estimator

    t, frame, _ = reduced
    if rows_a_block is not None:
        monkeypatch.setattr(estimator, "_BAND_BLOCK", t.posterior.n_draws * 5 * rows_a_block)
    rows = frame.iloc[:7]
    draws = t.draws_proba(rows)
    assert draws.dims == ("chain", "draw", "item", "class")
    flat = draws.values.reshape(-1, 7, 5)
    bands = t.predict_interval(rows, prob=0.8)
    np.testing.assert_allclose(bands["lower"].values, np.quantile(flat, 0.1, axis=0), atol=1e-12)
    np.testing.assert_allclose(bands["upper"].values, np.quantile(flat, 0.9, axis=0), atol=1e-12)
    np.testing.assert_allclose(t.predict_proba(rows, exchangeable=False), flat.mean(axis=0))
    assert list(bands["class"].values) == list(CLASSES)


def test_each_draw_spreads_others_at_its_own_temperature(reduced):
    """draws_proba at one draw, by hand: the reduced fit's p(others | m) times the softmax
    of gamma_t s over the output's lower classes; and the mean share by MEAN_NODES nodes
    against the mean over every draw."""
    t, frame, _ = reduced
    rows = frame.iloc[:8]
    y = rows.to_numpy()
    draws = t.draws_proba(rows).values
    margins = pd.DataFrame(t.reduction_.margins(y), columns=["margin"])
    ranks = t.reduced_.draws_proba(margins).values
    scores = t.reduction_.scores(y)
    order = np.argsort(-scores, axis=1, kind="stable")
    for chain, draw in [(0, 0), (1, 17), (1, 99)]:
        gamma = t.posterior_.posterior["others_temperature"].values[chain, draw]
        for i in range(8):
            rest = order[i, 2:]
            w = np.exp(gamma * scores[i, rest])
            expected = ranks[chain, draw, i, 2] * w / w.sum()
            np.testing.assert_allclose(draws[chain, draw, i, rest], expected, rtol=1e-12)
    every = t.reduction_.shares(y, t.others_temperature_).mean(axis=0)
    nodes = t.reduction_.mean_share(y, t.others_temperature_)
    assert MEAN_NODES == 16
    np.testing.assert_allclose(nodes, every, atol=1e-7)
    assert np.quantile(t.others_temperature_, 0.95) > 2 * np.quantile(t.others_temperature_, 0.05)


def test_long_run_accuracy_of_the_standard_rule_is_the_bootstrapped_first_rank(reduced):
    """Per draw, the standard rule (the output's argmax) is right exactly when the true
    class ranks first, so its long-run accuracy is sum_n w_tn a_tn with a_tn = F_t(first |
    y_n) (the per-draw probability of the output's top class, draws_proba) and w_t the
    Bayesian bootstrap's Dirichlet(1, ..., 1) weights over the N calibration outputs.
    Closed forms of that: its posterior mean is mean_tn a_tn, and its variance over draws
    is Var_t(mean_n a_tn) + mean_t S_t^2 / (N + 1) (S_t^2 the draw's variance over the
    points: a Dirichlet(1, ..., 1) mean's); the bootstrap's share of it is checked to be
    large, so that dropping it would fail. And the reduced mixture's own frequency of
    "first" is a different estimate of the same population figure: within two posterior
    sds."""
    t, frame, _ = reduced
    identity = IDENTITY
    u = yw.long_run_utility(t, identity, rule="standard")
    estimate = u.values.reshape(-1)
    y = t.calibration_outputs()
    per_draw = t.draws_proba(pd.DataFrame(y, columns=frame.columns)).values
    per_draw = per_draw.reshape(-1, *per_draw.shape[2:])  # (S, N, C)
    a = per_draw[:, np.arange(len(y)), y.argmax(axis=1)]  # (S, N)
    n = len(y)
    bootstrap = (a.var(axis=1) / (n + 1)).mean()
    model = a.mean(axis=1).var()
    assert float(u.integration_error) == 0.0  # every calibration output is a point
    assert abs(estimate.mean() - a.mean()) < 5 * np.sqrt((model + bootstrap) / len(estimate))
    np.testing.assert_allclose(estimate.var(), model + bootstrap, rtol=0.25)
    assert bootstrap > 0.3 * model
    exact = t.reduced_.posterior.class_frequencies()[:, 0]
    assert abs(estimate.mean() - exact.mean()) < 2 * estimate.std()
    augmented = yw.long_run_utility(t, identity)  # deciding with the transducer: no worse
    assert float(augmented.mean()) >= float(u.mean()) - 1e-3
    rescaled = yw.long_run_utility(t, identity, rescale=True)
    assert float(rescaled.min()) >= 0 and float(rescaled.max()) <= 1
    # at most n_points calibration outputs: a seeded sample of 150 of the 400, bootstrapped;
    # its error is the sample's standard error with the finite-population correction
    with pytest.warns(yw.IntegrationWarning, match="n_points"):  # 150 points: too few
        fewer = yw.long_run_utility(t, identity, rule="standard", n_points=150, seed=3)
    pick = np.sort(np.random.default_rng(3).choice(n, 150, replace=False))
    sample = a[:, pick].mean(axis=0)  # each point's posterior-mean contribution
    want = sample.std(ddof=1) / np.sqrt(150) * np.sqrt(1 - 150 / n)
    np.testing.assert_allclose(float(fewer.integration_error), want, rtol=1e-9)
    assert abs(float(fewer.mean()) - a.mean()) < 4 * want + 5 * np.sqrt(fewer.var() / 600)
    with pytest.raises(ValueError, match=r"n_points"):
        yw.long_run_utility(t, identity, n_points=0)


@pytest.mark.parametrize("held", [True, False])
@pytest.mark.parametrize("budget", [10**9, 700])
def test_calibration_cells_are_each_draws_conditional_bootstrapped(reduced, budget, held,
                                                                   monkeypatch):  # fmt: skip
    """The long-run cells of a reduced transducer, point n and class c at draw t:
    w_tn F_t(c | y_n), from the per-draw probabilities (draws_proba) and Dirichlet(1, ...,
    1) weights w_t (their moments checked against the Dirichlet's), with the decisions'
    p(c | y_n) the exchangeable predictive of the reduced joint; whether the draws'
    classes are spread in one block or in blocks of a few draws (a small work budget), and
    whether the masses are held whole or (too many to hold) formed a block of draws at a
    time."""
    from yieldwise import long_run

    t, frame, _ = reduced
    monkeypatch.setattr(long_run, "_MAX_ELEMENTS", budget)
    monkeypatch.setattr(long_run, "_DENSE_CELLS", 10**12 if held else 0)
    cells = long_run._calibration_cells(t, 10**6, 0)  # every calibration output
    assert (cells.dense is not None) == held and (cells.blocks is None) == held
    y = t.calibration_outputs()
    total = t.reduced_joint(y).sum(axis=2)  # (S, N): each draw's joint of the margin
    per_draw = t.draws_proba(pd.DataFrame(y, columns=frame.columns)).values
    per_draw = per_draw.reshape(-1, *per_draw.shape[2:])  # (S, N, C)
    joint = per_draw * total[..., None]
    s, n = total.shape
    weights = long_run._bootstrap_weights(0, slice(0, s), n)
    # Dirichlet(1, ..., 1): rows on the simplex, mean 1 / n, variance (n - 1) / (n^2 (n + 1))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)
    assert abs(weights.mean() - 1 / n) < 1e-12
    np.testing.assert_allclose(weights.var(), (n - 1) / (n**2 * (n + 1)), rtol=0.02)
    np.testing.assert_array_equal(
        long_run._bootstrap_weights(0, slice(70, 75), n), weights[70:75]
    )  # any slice, the same draws' weights
    expected = per_draw * weights[..., None]
    np.testing.assert_allclose(cells.mass, expected, rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(cells.mass.sum(axis=(1, 2)), 1.0, rtol=1e-12)
    np.testing.assert_allclose(cells.proba, joint.sum(axis=0) / joint.sum(axis=(0, 2))[:, None],
                               rtol=1e-10)  # fmt: skip
    # every sum the rules take, against the same sums over the masses formed here
    whole = long_run._Cells(cells.proba, cells.outputs, False, np.zeros(len(expected)),
                            "monte-carlo", dense=expected, population=len(y))  # fmt: skip
    rng = np.random.default_rng(5)
    # the posterior-mean masses with the bootstrap integrated exactly: E w_tn = 1 / N
    np.testing.assert_allclose(cells.mean_mass(), per_draw.mean(axis=0) / n, rtol=1e-10)
    np.testing.assert_allclose(cells.class_totals(), expected.sum(axis=1), rtol=1e-10)
    indicator = np.eye(5)[rng.integers(0, 5, len(y))]
    np.testing.assert_allclose(cells.regions(indicator), whole.regions(indicator), rtol=1e-10)
    batch = rng.uniform(-1, 1, (4, 5, 5))
    chosen = rng.integers(0, 5, (4, len(y)))
    np.testing.assert_allclose(cells.utilities(batch, chosen), whole.utilities(batch, chosen),
                               rtol=1e-10)  # fmt: skip
    augmented = long_run._general_augmented(cells, batch, errors=True)
    for got, held_ in zip(augmented, long_run._general_augmented(whole, batch, errors=True),
                          strict=True):  # fmt: skip
        np.testing.assert_allclose(got, held_, rtol=1e-10)
    values, error = long_run._oracle(cells, batch)
    want = np.einsum("snc,mdc->smnd", expected, batch).max(axis=3)  # (S, m, N)
    np.testing.assert_allclose(values, want.sum(axis=2), rtol=1e-10)
    assert np.all(error == 0)  # every calibration output a point: each draw's sum is exact


def test_long_run_is_the_same_with_the_masses_held_or_formed_in_blocks(reduced, monkeypatch):
    """Every rule's long-run utilities, their errors and the oracle's, with the cells'
    masses held whole and formed a few draws at a time (the work budget small enough for
    several blocks and matrix batches), rescaled too."""
    from yieldwise import long_run

    t, _, _ = reduced
    batch = np.random.default_rng(9).uniform(-1, 1, (12, 5, 5))
    # the standard rule decides a class, so its matrices' decisions are the classes
    labelled = [yw.UtilityMatrix(m, decisions=t.classes_, classes=t.classes_) for m in batch]

    def results():
        out = [yw.long_run_utility(t, batch, rescale=True),
               yw.long_run_utility(t, labelled, rule="standard"),
               yw.oracle_utility(t, batch)]  # fmt: skip
        return [(r.values, r.integration_error.values) for r in out]

    held = results()
    monkeypatch.setattr(long_run, "_DENSE_CELLS", 0)
    monkeypatch.setattr(long_run, "_MAX_ELEMENTS", 40_000)  # 20 draws, 8 matrices a block
    for (a, ea), (b, eb) in zip(held, results(), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-10)
        np.testing.assert_allclose(eb, ea, rtol=1e-9)


def test_loo_is_psis_over_each_items_log_joint_of_rank_margin_and_share(reduced):
    """loo() by hand from public pieces: per draw, the reduced fit's log joint of the item's
    rank and margin plus, for "others", the log of its class's softmax share at the
    draw's temperature; PSIS weights from that joint; the conditional divides by the
    joint summed over the ranks."""
    import arviz as az
    from scipy.special import logsumexp

    t, frame, labels = reduced
    y = frame.to_numpy()
    cls = pd.Categorical(labels, categories=CLASSES).codes
    rank = t.reduction_.reduced_classes(y, cls)
    z = t.reduction_.margins(y)
    log_g = t.reduced_.posterior.log_joint(z, z, None)  # (S, n, ranks)
    joint = log_g[:, np.arange(cls.size), rank].copy()
    scores = t.reduction_.scores(y)
    order = np.argsort(-scores, axis=1, kind="stable")
    for i in np.flatnonzero(rank == 2):
        rest = order[i, 2:]
        z_i = t.others_temperature_[:, None] * scores[i, rest][None, :]
        own = t.others_temperature_ * scores[i, cls[i]]
        joint[:, i] += own - logsumexp(z_i, axis=1)
    total = logsumexp(log_g, axis=2)
    # ArviZ's relative efficiency (az.loo's default): the mean ESS of the posterior's
    # quantities over the draws, leaving out those constant over the draws (fixed kernels)
    post = t.posterior_.posterior
    ess = az.ess(post, method="mean")
    varying = [ess[v].values[np.ptp(post[v].values, axis=(0, 1)) > 0] for v in ess.data_vars]
    reff = np.hstack(varying).mean() / (post.sizes["chain"] * post.sizes["draw"])
    lw = az.psislw(-joint.T, reff=reff)[0].T
    expected = logsumexp(lw + joint, axis=0) - logsumexp(lw + total, axis=0)
    outer = t.loo(conditional=True)
    np.testing.assert_allclose(outer["loo_i"].values, expected, rtol=1e-10)
    assert outer["elpd_loo"] == pytest.approx(outer["loo_i"].values.sum())
    np.testing.assert_allclose(t.loo()["loo_i"].values, logsumexp(lw + joint, axis=0), rtol=1e-10)
    # in blocks of 5 items: the same, item by item
    from yieldwise.transducer import estimator

    saved = estimator.LOO_CHUNK_VALUES
    try:
        estimator.LOO_CHUNK_VALUES = 5 * joint.shape[0] * 3
        blocks = t.loo(conditional=True)
    finally:
        estimator.LOO_CHUNK_VALUES = saved
    # loo_i is a difference of two log-sums of order 1, so its error is absolute: 9e-16
    # at an item whose loo_i is -0.0008 on one machine's BLAS (a relative 1.06e-12)
    np.testing.assert_allclose(blocks["loo_i"].values, outer["loo_i"].values, rtol=1e-12,
                               atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(blocks["pareto_k"].values, outer["pareto_k"].values, rtol=1e-9)


def test_a_reduced_transducer_refuses_what_it_does_not_model(reduced):
    t, frame, _ = reduced
    prevalences = [0.2] * 5
    with pytest.raises(ValueError, match=r"class_reduction=None\) to use prevalences"):
        t.predict_proba(frame.iloc[:3], prevalences=prevalences)
    with pytest.raises(ValueError, match=r"generative mode"):
        yw.long_run_utility(t, IDENTITY, prevalences=prevalences)
    with pytest.raises(ValueError, match=r"reduced_.output_density"):
        t.output_density(frame.iloc[:3])
    with pytest.raises(ValueError, match=r"must have 5 column"):
        t.predict_proba(frame.iloc[:3, :4].to_numpy())


def test_a_reduced_transducer_round_trips_exactly(reduced, tmp_path):
    t, frame, _ = reduced
    path = t.save(tmp_path / "five.nc")
    back = yw.Transducer.load(path)
    assert back.reduction_ == t.reduction_ and back.classes_ == t.classes_
    assert back.get_params() == t.get_params()
    np.testing.assert_array_equal(back.predict_proba(frame), t.predict_proba(frame))
    np.testing.assert_array_equal(back.draws_proba(frame.iloc[:4]).values,
                                  t.draws_proba(frame.iloc[:4]).values)  # fmt: skip
    np.testing.assert_array_equal(back.calibration_outputs(), t.calibration_outputs())
    np.testing.assert_array_equal(back.others_temperature_, t.others_temperature_)


def test_a_version_4_reduced_file_is_refused_by_its_version(reduced, tmp_path):
    """Version 4 shared "others" at temperature 1 (another model): refit, not misread."""
    import arviz as az

    t, _, _ = reduced
    data = az.from_netcdf(str(t.save(tmp_path / "five.nc")))
    data.posterior = data.posterior.drop_vars("others_temperature")
    data.posterior.attrs["yieldwise_format_version"] = 4
    data.to_netcdf(str(tmp_path / "v4.nc"))
    with pytest.raises(TransducerFileError, match=r"format version 4, whose others' share has "
                       r"no temperature .* refit"):  # fmt: skip
        yw.Transducer.load(tmp_path / "v4.nc")
    data.posterior.attrs["yieldwise_format_version"] = 5
    data.to_netcdf(str(tmp_path / "v5.nc"))
    with pytest.raises(TransducerFileError, match=r"posterior/others_temperature is missing"):
        yw.Transducer.load(tmp_path / "v5.nc")


def test_a_reduced_file_without_its_class_outputs_is_refused_by_name(reduced, tmp_path):
    import arviz as az

    t, _, _ = reduced
    path = t.save(tmp_path / "five.nc")
    data = az.from_netcdf(str(path))
    data.observed_data = data.observed_data.drop_vars("class_outputs")
    data.to_netcdf(str(tmp_path / "broken.nc"))
    with pytest.raises(TransducerFileError, match=r"observed_data/class_outputs is missing"):
        yw.Transducer.load(tmp_path / "broken.nc")


def test_no_item_below_second_reduces_to_first_and_others(five_class_data):
    frame, labels = five_class_data(300, 4)
    p = frame.to_numpy()
    order = np.argsort(-p, axis=1)
    truth = pd.Categorical(labels, categories=CLASSES).codes
    keep = (order[:, 0] == truth) | (order[:, 1] == truth)  # no item ranks third or lower
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = yw.Transducer(backend="laplace", chains=1, draws=100, seed=1, progress=False)
        t.fit(frame[keep], labels[keep], class_labels=list(CLASSES))
    assert t.reduction_.kept == 1 and t.reduced_.classes_ == ("first", "others")
    np.testing.assert_allclose(t.predict_proba(frame.iloc[:5]).sum(axis=1), 1.0)


def test_a_rank_no_item_takes_is_learnt_from_the_items_that_are_not_of_it(five_class_data):
    """Every calibration item right (no "others"), or none second: the fit goes on, and
    the empty rank's probability is small, positive and uncertain, smaller where the
    network is surer; its temperature's draws are the prior's."""
    frame, labels = five_class_data(300, 4)
    p = frame.to_numpy()
    order = np.argsort(-p, axis=1)
    truth = pd.Categorical(labels, categories=CLASSES).codes
    top = order[:, 0] == truth
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Laplace backend's own warning
        t = yw.Transducer(backend="laplace", seed=1, progress=False)
        t.fit(frame[top], labels[top], class_labels=list(CLASSES))
    assert t.reduction_.kept == 1 and t.reduced_.classes_ == ("first", "others")
    assert t.reduced_.posterior_.observed_data["class_index"].values.max() == 0
    with pytest.warns(yw.ExtrapolationWarning):  # the wrong items' margins are outside
        wrong = 1 - t.predict_proba(frame)[np.arange(300), order[:, 0]]
    assert (wrong > 0).all() and wrong.mean() < 0.1  # the pairs' offsets add uncertainty
    margin = t.reduction_.margins(p)[:, 0]
    assert (
        wrong[margin > np.quantile(margin, 0.9)].mean()
        < wrong[margin < np.quantile(margin, 0.1)].mean()
    )
    band = t.predict_interval(frame.iloc[:20], prob=0.9)
    assert (band["upper"].values - band["lower"].values).max() > 0.01
    assert np.log(t.others_temperature_).std() == pytest.approx(1.0, abs=0.1)
    assert (t.rank_check()["observed"] == t.rank_check()["items"]).all()
    lower = top | (order[:, 0] != truth) & (order[:, 1] != truth)  # none ranks second
    assert (lower & ~top).any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t2 = yw.Transducer(backend="laplace", seed=1, progress=False)
        t2.fit(frame[lower], labels[lower], class_labels=list(CLASSES))
    assert t2.reduced_.classes_ == ("first", "second", "others")
    second = t2.predict_proba(frame[lower])[:, :][np.arange(lower.sum()), order[lower, 1]]
    assert (second > 0).all() and second.mean() < 0.1


def test_the_reduced_fits_warnings_point_at_the_users_call(reduced):
    """An output beyond the calibration margins warns as any extrapolation does, from the
    line that asked for it (not from inside the package, where the reduced fit is called)."""
    t, _, _ = reduced
    tie = np.array([[0.5, 0.5, 0.0, 0.0, 0.0]])  # margin 0, below every calibration margin
    for ask in (t.predict_proba, t.predict_interval, t.draws_proba):
        with pytest.warns(yw.ExtrapolationWarning, match="'margin'") as record:
            ask(tie)
        assert record[0].filename == __file__, ask.__name__


def test_rank_check_counts_against_a_binomial_by_hand():
    """With F_t(first | m) = 0.5 at every draw, the replicated count of four items is
    Binomial(4, 1/2): the two-sided mid-p of each observed count, by hand."""
    from scipy.stats import binom

    from yieldwise.transducer.reduction import rank_check

    r = ClassRanks("scores", ("s0", "s1", "s2"), ("x", "y", "z"), 100)
    outputs = np.array([[3.0, 1.0, 0.0]] * 4 + [[0.0, 2.0, 1.0]] * 4)  # tops: x four, y four
    first = np.full((200_000, 8), 0.5)
    for right_x in range(5):
        truth = np.array([0] * right_x + [2] * (4 - right_x) + [1, 1, 0, 0])  # y right twice
        table = rank_check(r, outputs, truth, first, seed=1).set_index("class")
        assert list(table.index) == ["x", "y"]  # z is never the top class
        below = binom.cdf(right_x - 1, 4, 0.5) + 0.5 * binom.pmf(right_x, 4, 0.5)
        assert table.loc["x", "p_value"] == pytest.approx(2 * min(below, 1 - below), abs=0.01)
        assert table.loc["x", "observed"] == right_x and table.loc["x", "items"] == 4
        assert table.loc["x", "expected"] == pytest.approx(2.0)
        assert table.loc["y", "p_value"] == pytest.approx(1.0, abs=0.01)


def test_rank_check_warns_by_name_only_below_the_corrected_level():
    from yieldwise.transducer.reduction import ReductionWarning, warn_on_rank_check

    table = pd.DataFrame({"class": ["x", "y"], "items": [50, 40], "observed": [50, 30],
                          "expected": [41.0, 33.0], "lower": [35.0, 27.0],
                          "upper": [46.0, 38.0], "p_value": [0.001, 0.3]})  # fmt: skip
    with pytest.warns(ReductionWarning, match=r"1 class\(es\): 'x': right 50 of 50 times"):
        warn_on_rank_check(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_on_rank_check(table.assign(p_value=[0.03, 0.3]))  # above 0.05 / 2: no warning


def test_a_fit_whose_classes_are_calibrated_differently_warns(reduced, five_class_data, max_pairs):
    """Five classes where outputs topped by 'a' are always right and the others far less
    often than their margins say: the fit's check flags 'a'; the symmetric data of the
    fixture pass it."""
    t, _, _ = reduced
    assert t.rank_check()["p_value"].min() > 0.05 / 5
    frame, labels = five_class_data(800, 5)
    top = frame.to_numpy().argmax(axis=1)
    rng = np.random.default_rng(6)
    flip = (top != 0) & (rng.random(800) < 0.3)  # relabel 30 % of the others' items
    labels = labels.copy()
    labels[flip] = np.array(CLASSES)[rng.integers(1, 5, flip.sum())]
    labels[top == 0] = "a"
    with pytest.warns(yw.ReductionWarning, match=r"'a': right"), max_pairs(0):
        yw.Transducer(backend="laplace", chains=2, draws=300, seed=2, progress=False).fit(
            frame, labels, class_labels=list(CLASSES)
        )
    # with pair offsets the top class's own calibration is modelled: no warning
    with warnings.catch_warnings(record=True) as caught, max_pairs(600):
        warnings.simplefilter("always")
        paired = yw.Transducer(backend="laplace", chains=2, draws=300, seed=2, progress=False)
        paired.fit(frame, labels, class_labels=list(CLASSES))
    assert paired.reduction_.paired
    assert not [w for w in caught if issubclass(w.category, yw.ReductionWarning)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        binary = yw.Transducer(backend="laplace", chains=1, draws=50, seed=1, progress=False)
        binary.fit(np.linspace(0.01, 0.99, 40), [0, 1] * 20)
    with pytest.raises(ValueError, match=r"checks a class-reduced transducer"):
        binary.rank_check()


def test_logits_far_beyond_the_calibration_margins_get_the_limit():
    """Ranks on logits: an output whose margin lies millions of kernel widths beyond the
    calibration margins gets the probabilities and bands of the outermost kernels, the
    same as at a margin already far out (30), not float64's rounding (NaN bands at 1e200
    before 2026-12-05)."""
    rng = np.random.default_rng(0)
    n, c = 400, 5
    cls = rng.integers(0, c, n)
    logits = 2.5 * np.eye(c)[cls] + rng.normal(0, 1, (n, c))
    frame = pd.DataFrame(logits, columns=[f"z{j}" for j in range(c)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Laplace backend's and the extrapolation's
        t = yw.Transducer(backend="laplace", chains=2, draws=200, seed=2, progress=False,
                          class_reduction="ranks", output_transform="identity")  # fmt: skip
        t.fit(frame, cls)
        far = np.zeros((4, c))
        far[:, 0] = [30.0, 1e3, 1e9, 1e200]
        p = t.predict_proba(far)
        band = t.predict_interval(far, prob=0.5)
    assert t.reduction_ is not None
    for got in (p, band["lower"].values, band["upper"].values):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, np.broadcast_to(got[0], got.shape), rtol=1e-9)
    assert p[0, 0] > 0.99  # the top class, far ahead
