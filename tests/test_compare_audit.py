"""Audit fixes of compare and standard_vs_augmented, each against an independent count.

* a plain array utility with classifiers listing their classes differently (it was read
  in each one's order: identical models, P(B beats A) = 1);
* ties (the package's one tie rule, ``TIE_RTOL * (max U - min U)``): identical utilities
  were ranked by floating-point rounding (P(best) summing to 0.89 over two classifiers);
  here brute-force counts over all pairs / combinations of draws with ties planted;
* errors naming the classifier; a joint fit's rule mapping; the integration method per
  classifier; one matrix for standard_vs_augmented; marginals of one joint fit passed as
  independent fits.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from yieldwise import Comparison, Transducer, UtilityMatrix, compare, long_run_utility
from yieldwise.rules import standard_vs_augmented
from yieldwise.utility import TIE_RTOL

LABELS = ("neg", "pos")


def draws(values, chains=2):
    values = np.asarray(values, float).reshape(chains, -1)
    da = xr.DataArray(values, dims=("chain", "draw"), name="long_run_utility")
    return da.assign_coords(integration_error=0.0)


def fitted(labels=LABELS, n_draws=24, seed=0, flip=False):
    """A two-component mixture on a score with ``n_draws`` posterior draws; ``flip`` lists
    the classes the other way round (and the draws' class axis with them): the same model."""
    rng = np.random.default_rng(seed)
    w = rng.dirichlet([6.0, 6.0], size=n_draws)
    alpha = np.stack([rng.dirichlet([8.0, 2.0], n_draws), rng.dirichlet([2.0, 8.0], n_draws)], 1)
    mu = np.stack([rng.normal(-1.0, 0.2, n_draws), rng.normal(1.2, 0.2, n_draws)], 1)[..., None]
    sigma = rng.uniform(0.8, 1.2, (n_draws, 2, 1))
    if flip:
        labels, alpha = tuple(labels)[::-1], alpha[..., ::-1]
    scores = np.linspace(-3, 3, 30)
    truth = np.array(sorted(labels, key=str), dtype=object)[(scores > 0).astype(int)]
    return Transducer.from_draws(
        {"w": w[None], "alpha": alpha[None], "mu": mu[None], "sigma": sigma[None]},
        pd.DataFrame({"score": scores}), truth, tuple(labels),
        output_transform="identity", resolution=None,
    )  # fmt: skip


# the joint transducer of given draws: the ``joint`` fixture of tests/conftest.py


# ----------------------------------------------------------------- brute force
def brute_pairs(a, b, tol):
    """(P(a > b), P(b > a), P(tie)) over every pair of independent draws, one by one."""
    over = under = tie = 0
    for x in a:
        for y in b:
            if x > y + tol:
                over += 1
            elif y > x + tol:
                under += 1
            else:
                tie += 1
    total = len(a) * len(b)
    return over / total, under / total, tie / total


def brute_best(values, tol):
    """Shares of one combination of draws: the classifiers no other beats by more than
    ``tol`` (the largest does not: max <= v + tol) share it equally."""
    largest = max(values)
    best = [not (largest > v + tol) for v in values]
    return np.array(best, float) / sum(best)


def brute_best_independent(samples, tol):
    shares = np.zeros(len(samples))
    combinations = 0
    for combination in itertools.product(*samples):
        shares += brute_best(combination, tol)
        combinations += 1
    return shares / combinations


def planted(rng, size, tol):
    """Draws on a coarse grid, some moved by less than ``tol`` (ties) and some by a bit
    more (not ties), so that ties are frequent and not transitive (x ~ y ~ z, x < z)."""
    base = rng.choice([0.2, 0.5, 0.5, 0.7], size)
    jitter = rng.choice([0.0, 0.0, 0.4, -0.4, 0.6, -0.6, 1.3], size) * tol
    return base + jitter


# ------------------------------------------------------ 1. class order of plain arrays
def test_plain_array_needs_one_class_order_and_matrix_is_reindexed():
    a, b = fitted(), fitted(flip=True)  # the same model, classes listed the other way
    assert a.classes_ == ("neg", "pos") and b.classes_ == ("pos", "neg")
    values = np.array([[1.0, -2.0], [0.0, 3.0]])  # columns neg, pos
    labelled = UtilityMatrix(values, classes=LABELS)
    result = compare({"A": a, "B": b}, labelled)
    # the labelled matrix is reindexed for each classifier: the same utilities draw by draw
    np.testing.assert_allclose(result.samples("A"), result.samples("B"), rtol=1e-12)
    np.testing.assert_allclose(result.samples("A"), long_run_utility(a, labelled).values.ravel())
    # and so, independent draws of one posterior: the brute-force count over all pairs
    ua, ub = result.samples("A"), result.samples("B")
    tol = TIE_RTOL * np.ptp(values)
    over, under, tie = brute_pairs(ua, ub, tol)
    assert result.prob_superiority().loc["A", "B"] == pytest.approx(over, abs=1e-12)
    assert result.prob_superiority().loc["B", "A"] == pytest.approx(under, abs=1e-12)
    assert result.prob_tie().loc["A", "B"] == pytest.approx(tie, abs=1e-12)
    assert over == pytest.approx(under) and tie == pytest.approx(1 / ua.size)  # the diagonal
    # a plain array has no labels: refused, naming the classifiers and their classes
    for plain in (values, values.tolist(), values[None], [values.tolist()]):
        shown = r"plain array.*'A' has \['neg', 'pos'\].*'B' has \['pos', 'neg'\].*UtilityMatrix"
        with pytest.raises(ValueError, match=shown):
            compare({"A": a, "B": b}, plain)
    # int labels against text labels of the same digits: refused too, types named
    ints, texts = fitted(labels=(0, 1)), fitted(labels=("0", "1"))
    with pytest.raises(ValueError, match=r"'int' has \[0, 1\] \(int, int\).*\(str, str\)"):
        compare({"int": ints, "str": texts}, values)
    # one class order: the array is read in it, as the labelled matrix
    same = compare({"A": a, "A2": fitted()}, values)
    np.testing.assert_allclose(same.samples("A"), result.samples("A"), rtol=1e-12)


# ------------------------------------------------------------------------ 2. ties
@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_independent_ties_against_all_pairs_and_combinations(k):
    rng = np.random.default_rng(k)
    spread = 3.0
    tol = TIE_RTOL * spread
    sizes = [6, 4, 8, 4, 2][:k]
    samples = [planted(rng, n, tol) for n in sizes]
    names = [f"c{i}" for i in range(k)]
    result = Comparison({n: draws(s) for n, s in zip(names, samples, strict=True)}, spread=spread)
    assert result.tie_tolerance() == tol
    greater, tie = result.prob_superiority(), result.prob_tie()
    for (i, a), (j, b) in itertools.combinations(enumerate(names), 2):
        over, under, tied = brute_pairs(samples[i], samples[j], tol)
        assert greater.loc[a, b] == pytest.approx(over, abs=1e-12)
        assert greater.loc[b, a] == pytest.approx(under, abs=1e-12)
        assert tie.loc[a, b] == tie.loc[b, a] == pytest.approx(tied, abs=1e-12)
        assert greater.loc[a, b] + greater.loc[b, a] + tie.loc[a, b] == pytest.approx(1.0)
    assert tie.values[np.triu_indices(k, 1)].min() > 0  # ties were planted
    best = result.prob_best()
    np.testing.assert_allclose(best.values, brute_best_independent(samples, tol), atol=1e-12)
    assert best.sum() == pytest.approx(1.0, abs=1e-12)
    diff = result.difference(names[0], names[1])
    over, _, tied = brute_pairs(samples[0], samples[1], tol)
    assert diff.attrs["prob_positive"] == pytest.approx(over)
    assert diff.attrs["prob_tie"] == pytest.approx(tied)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_paired_ties_against_a_count_draw_by_draw(k):
    rng = np.random.default_rng(10 + k)
    tol = TIE_RTOL * 1.0
    stacked = np.stack([planted(rng, 40, tol) for _ in range(k)])
    names = [f"c{i}" for i in range(k)]
    result = Comparison({n: draws(v) for n, v in zip(names, stacked, strict=True)}, paired=True,
                        spread=1.0)  # fmt: skip
    greater, tie = result.prob_superiority(), result.prob_tie()
    for (i, a), (j, b) in itertools.permutations(enumerate(names), 2):
        pairs = list(zip(stacked[i], stacked[j], strict=True))
        over = np.mean([x > y + tol for x, y in pairs])
        tied = np.mean([not (x > y + tol) and not (y > x + tol) for x, y in pairs])
        assert greater.loc[a, b] == pytest.approx(over, abs=1e-12)
        assert tie.loc[a, b] == pytest.approx(tied, abs=1e-12)
    expected = np.mean([brute_best(list(column), tol) for column in stacked.T], axis=0)
    np.testing.assert_allclose(result.prob_best().values, expected, atol=1e-12)
    assert result.prob_best().sum() == pytest.approx(1.0, abs=1e-12)


def test_identical_classifiers_tie():
    """The same draws under three names: paired, they tie on every draw; independent,
    they are exchangeable (P(best) = 1/3 each); with a posterior that is one value up to
    rounding (u_t = 1 whatever the draw), they tie on every pair of draws."""
    rng = np.random.default_rng(3)
    values = rng.normal(0.8, 0.05, 20)
    same = {n: draws(values) for n in ("x", "y", "z")}
    paired = Comparison(same, paired=True, spread=1.0)
    assert (paired.prob_superiority().fillna(0) == 0).all().all()
    assert (paired.prob_tie().fillna(1) == 1).all().all()
    np.testing.assert_allclose(paired.prob_best(), 1 / 3, atol=1e-12)
    independent = Comparison(same, spread=1.0)
    p = independent.prob_superiority()
    assert p.loc["x", "y"] == pytest.approx(p.loc["y", "x"]) == pytest.approx((1 - 1 / 20) / 2)
    np.testing.assert_allclose(independent.prob_best(), 1 / 3, atol=1e-12)
    ones = 1.0 + rng.choice([-2, -1, 0, 1, 2], (3, 20)) * np.finfo(float).eps  # rounding
    flat = Comparison({n: draws(v) for n, v in zip("xyz", ones, strict=True)}, spread=1.0)
    assert (flat.prob_superiority().fillna(0) == 0).all().all()
    np.testing.assert_allclose(flat.prob_best(), 1 / 3, atol=1e-12)
    # without a spread only exactly equal draws tie
    exact = Comparison({n: draws(v) for n, v in zip("xyz", ones, strict=True)})
    assert exact.tie_tolerance() == 0.0 and exact.prob_best().sum() == pytest.approx(1.0)


def test_compare_ties_a_fit_with_itself_and_the_members_of_a_joint_fit(joint):
    """Deciding "pos" is worth 1 whatever the class: u_t = 1 on every draw, computed with
    rounding; the same fit under two names, and a joint fit's members, tie (its ensemble's
    Monte Carlo integral over two outputs is 1 only up to its integration error, 1e-3)."""
    worth_one = UtilityMatrix([[0.0, 0.0], [1.0, 1.0]], decisions=LABELS, classes=LABELS)
    t = fitted(n_draws=40)
    twice = compare({"x": t, "y": t}, worth_one)
    assert twice.prob_superiority().loc["x", "y"] == 0.0 == twice.prob_superiority().loc["y", "x"]
    assert twice.prob_tie().loc["x", "y"] == 1.0
    np.testing.assert_allclose(twice.prob_best(), [0.5, 0.5], atol=1e-12)
    assert twice.summary()["prob_best"].sum() == pytest.approx(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a six-draw posterior: Monte Carlo warnings
        members = compare(joint, worth_one)
    assert members.prob_tie().loc["rf", "nn"] == 1.0
    assert members.prob_superiority().loc["rf", "nn"] == 0.0
    stacked = np.stack([members.samples(n) for n in members.names])
    expected = np.mean([brute_best(list(column), TIE_RTOL) for column in stacked.T], axis=0)
    np.testing.assert_allclose(members.prob_best().values, expected, atol=1e-12)
    assert members.prob_best()["rf"] == members.prob_best()["nn"] > 0
    # a batch: the tolerance is each matrix's own range
    batch = compare({"x": t, "y": t}, {"one": worth_one, "big": UtilityMatrix(
        [[0.0, 0.0], [50.0, 50.0]], decisions=LABELS, classes=LABELS)})  # fmt: skip
    assert batch.tie_tolerance("big") == pytest.approx(50 * TIE_RTOL)
    np.testing.assert_allclose(batch.prob_best(matrix="big"), [0.5, 0.5], atol=1e-12)


def test_compare_prob_best_against_all_combinations_of_fitted_draws():
    fits = {f"f{i}": fitted(n_draws=n, seed=i) for i, n in enumerate((6, 8, 4))}
    u = UtilityMatrix([[1.0, -2.0], [0.0, 3.0]], classes=LABELS)
    result = compare(fits, u)
    samples = [result.samples(n) for n in fits]
    expected = brute_best_independent(samples, TIE_RTOL * 5.0)
    np.testing.assert_allclose(result.prob_best().values, expected, atol=1e-12)


def test_standard_and_augmented_rules_that_decide_alike_tie():
    """Deciding "neg" is worth 1 whatever the class, and the standard rule's threshold is
    above every output: both rules always decide "neg", u_t = 1 on every draw (computed
    two ways, with rounding). A matrix where every decision is worth the same per class
    ties the rules even where they decide differently."""
    t = fitted(n_draws=60)
    alike = UtilityMatrix([[1.0, 1.0], [0.0, 0.0]], decisions=LABELS, classes=LABELS)
    frame = standard_vs_augmented(t, [alike], threshold=1e6)
    assert frame["prob_augmented_better"].item() == 0.0 and frame["prob_tie"].item() == 1.0
    indifferent = UtilityMatrix([[0.0, 1.0], [0.0, 1.0]], decisions=LABELS, classes=LABELS)
    frame = standard_vs_augmented(t, [indifferent], rescale=False)
    assert frame["prob_augmented_better"].item() == 0.0 and frame["prob_tie"].item() == 1.0
    # rescaled, its best and worst achievable utilities coincide: refused as long_run does
    with pytest.raises(ValueError, match="cannot rescale utility matrix 0: every decision"):
        standard_vs_augmented(t, [indifferent])
    # a matrix where the rules differ: P(augmented better) + P(tie) + P(standard better) = 1,
    # counted draw by draw from the two rules' utilities
    costly = UtilityMatrix([[1.0, -5.0], [0.0, 1.0]], decisions=LABELS, classes=LABELS)
    frame = standard_vs_augmented(t, costly, rescale=False)  # one matrix: a batch of one
    aug = long_run_utility(t, costly).values.ravel()
    std = long_run_utility(t, costly, rule="standard").values.ravel()
    tol = TIE_RTOL * 6.0
    assert frame["prob_augmented_better"].item() == pytest.approx(np.mean(aug > std + tol))
    tied = [not (a > s + tol) and not (s > a + tol) for a, s in zip(aug, std, strict=True)]
    assert frame["prob_tie"].item() == pytest.approx(np.mean(tied))
    assert frame["prob_augmented_better"].item() > 0.5  # the rules differ here


@pytest.mark.parametrize("offset", [0.0, 1e9])
def test_standard_and_augmented_rules_tie_and_differ_alike_under_a_huge_offset(offset):
    """The two rules are compared on U - min U: adding 1e9 to every entry leaves
    P(augmented better) and P(tie) as they are for U, and moves the means by exactly the
    offset (before, the "alike" matrix + 1e9 tied in 18 % of draws instead of all, and
    the augmented rule was "better" in 35 %)."""
    t = fitted(n_draws=60)
    alike = UtilityMatrix(np.array([[1.0, 1.0], [0.0, 0.0]]) + offset, decisions=LABELS,
                          classes=LABELS)  # fmt: skip
    costly = UtilityMatrix(np.array([[1.0, -5.0], [0.0, 1.0]]) + offset, decisions=LABELS,
                           classes=LABELS)  # fmt: skip
    frame = standard_vs_augmented(t, [alike, costly], threshold=1e6, rescale=False)
    base = standard_vs_augmented(
        t, [UtilityMatrix([[1.0, 1.0], [0.0, 0.0]], decisions=LABELS, classes=LABELS),
            UtilityMatrix([[1.0, -5.0], [0.0, 1.0]], decisions=LABELS, classes=LABELS)],
        threshold=1e6, rescale=False,
    )  # fmt: skip
    assert frame["prob_tie"].iloc[0] == 1.0 and frame["prob_augmented_better"].iloc[0] == 0.0
    for column in ("prob_augmented_better", "prob_tie", "gain"):
        np.testing.assert_allclose(frame[column], base[column], rtol=0, atol=1e-12)
    np.testing.assert_allclose(frame["standard"] - offset, base["standard"], atol=1e-6)
    rescaled = standard_vs_augmented(t, [costly], threshold=1e6)
    plain = standard_vs_augmented(t, [UtilityMatrix([[1.0, -5.0], [0.0, 1.0]],
                                                    decisions=LABELS, classes=LABELS)],
                                  threshold=1e6)  # fmt: skip
    np.testing.assert_allclose(rescaled[["standard", "augmented", "gain"]],
                               plain[["standard", "augmented", "gain"]], atol=1e-12)  # fmt: skip


# --------------------------------------------------------------- 3. errors named
def test_errors_name_the_classifier():
    t = fitted()
    u = UtilityMatrix([[1.0, 0.0], [0.0, 1.0]], decisions=LABELS, classes=LABELS)
    with pytest.raises(RuntimeError, match=r"^classifier 'b': this Transducer is not fitted"):
        compare({"a": t, "b": Transducer()}, u)
    other = fitted(labels=("no", "yes"))
    with pytest.raises(ValueError, match=r"^classifier 'other': utility has classes") as info:
        compare({"a": t, "other": other}, u)
    assert isinstance(info.value.__cause__, ValueError)
    assert "classifier" not in str(info.value.__cause__)  # the original, chained


# ---------------------------------------------------------- 4. a joint fit's rules
@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # a six-draw posterior
def test_rule_mapping_for_a_joint_fit(joint):
    u = UtilityMatrix([[1, -2], [0, 3]], decisions=LABELS, classes=LABELS)
    result = compare(joint, u, rule={"rf": "standard", "nn": "augmented"})  # no "joint"
    augmented = long_run_utility(joint, u, rule="augmented").values.ravel()
    np.testing.assert_allclose(result.samples("joint"), augmented)
    standard = long_run_utility(joint.marginal("rf"), u, rule="standard").values.ravel()
    np.testing.assert_allclose(result.samples("rf"), standard)
    explicit = compare(joint, u, rule={"rf": "standard", "nn": "augmented", "joint": "augmented"})
    np.testing.assert_allclose(explicit.samples("joint"), augmented)
    with pytest.raises(ValueError, match="leave 'joint' out"):
        compare(joint, u, rule={"rf": "standard", "nn": "standard", "joint": "standard"})

    def always_pos(outputs):  # a rule on the concatenated outputs, the ensemble's own
        return np.full(len(outputs), "pos", dtype=object)

    own = compare(joint, u, rule={"rf": "standard", "nn": "standard", "joint": always_pos})
    expected = long_run_utility(joint, u, rule=always_pos).values.ravel()
    np.testing.assert_allclose(own.samples("joint"), expected)
    assert not np.allclose(expected, augmented)
    with pytest.raises(ValueError, match="rule has no entry for classifier 'nn'"):
        compare(joint, u, rule={"rf": "standard"})


# ------------------------------------------------- 5. integration; one matrix
def test_integration_method_per_classifier(joint):
    u = UtilityMatrix([[1, 0], [0, 1]], decisions=LABELS, classes=LABELS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = compare(joint, u)
        methods = {n: long_run_utility(t, u).attrs["integration"]
                   for n, t in [("rf", joint.marginal("rf")), ("joint", joint)]}  # fmt: skip
    assert methods == {"rf": "quadrature", "joint": "monte-carlo"}
    assert result.integration.to_dict() == {"rf": "quadrature", "nn": "quadrature",
                                            "joint": "monte-carlo"}  # fmt: skip
    assert {n: result.utilities[n].attrs["integration"] for n in result.names} == dict(
        result.integration
    )
    assert "integration" not in result.utilities.attrs  # no longer the first one's alone


def test_standard_vs_augmented_takes_one_matrix():
    t = fitted()
    u = UtilityMatrix([[1.0, -2.0], [0.0, 3.0]], decisions=LABELS, classes=LABELS)
    pd.testing.assert_frame_equal(standard_vs_augmented(t, u), standard_vs_augmented(t, [u]))
    with pytest.raises(TypeError, match="a UtilityMatrix or a non-empty sequence of them, "
                                        "found int"):  # fmt: skip
        standard_vs_augmented(t, 3)
    with pytest.raises(TypeError, match="found a list holding a ndarray"):
        standard_vs_augmented(t, [u.values])


# ------------------------------------------------- 6. marginals of one joint fit
def test_marginals_of_one_joint_fit_as_a_mapping_warn(joint):
    u = UtilityMatrix([[1, 0], [0, 1]], decisions=LABELS, classes=LABELS)
    split = {"rf": joint.marginal("rf"), "nn": joint.marginal("nn")}
    with pytest.warns(UserWarning, match=r"\['rf', 'nn'\] are marginals of one joint fit"):
        result = compare(split, u)
    assert not result.paired
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compare({"rf": joint.marginal("rf"), "other": fitted()}, u)  # one marginal: no pairing
        compare({"a": fitted(seed=1), "b": fitted(seed=2)}, u)
        compare(joint, u)  # paired
    assert not [w for w in caught if "joint fit" in str(w.message)]
