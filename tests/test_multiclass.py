"""Item 5 of issue 19: random utility matrices, the audits on 3-5 classes, AUC audited,
and the standard rule against the augmented rule over many matrices."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import ndtr
from scipy.stats import norm

from yieldwise import Transducer, UtilityMatrix, metrics, utility_yield
from yieldwise.audit import (
    DEFAULT_MULTICLASS_METRICS,
    MULTICLASS_METRICS,
    _binormal_best,
    _perturb_square,
    auc_disagreement,
    is_admissible,
    rank_disagreement,
)
from yieldwise.rules import standard_vs_augmented
from yieldwise.utility import chart_matrices, in_chart_domain, sample_matrices


def _row(result, metric, error_sd=None):
    rows = result[result.metric == metric]
    if error_sd is not None:
        rows = rows[np.isclose(rows.error_sd, error_sd)]
    assert len(rows) == 1
    return rows.iloc[0]


# ------------------------------------------------------------------ sample_matrices
def test_binary_uniform_is_the_chart():
    ms = sample_matrices(2000, ["no", "yes"], ["no", "yes"], seed=0)
    xy = np.array([m.xy for m in ms])
    assert in_chart_domain(xy[:, 0], xy[:, 1]).all()
    for m, (x, y) in zip(ms[:50], xy[:50], strict=True):
        np.testing.assert_allclose(m.values, chart_matrices(x, y), atol=1e-12)
    # uniform over the domain (area 3 of the square's 4): P(x > 0) = 1.5 / 3
    assert np.mean(xy[:, 0] > 0) == pytest.approx(0.5, abs=0.04)
    # the excluded corners are empty, the quadrant x < 0, y > 0 is half full (area 1/2)
    assert np.mean((xy[:, 0] < 0) & (xy[:, 1] > 0)) == pytest.approx(0.5 / 3, abs=0.03)


@pytest.mark.parametrize("k", [3, 4, 5])
def test_entries_prior_is_conditioned_uniform(k):
    ms = sample_matrices(20_000, k, k, prior="entries", seed=k)
    values = np.stack([m.values for m in ms])
    assert (values.argmax(axis=1) == np.arange(k)).all()  # admitted, column by column
    # the diagonal is the largest of k uniforms: Beta(k, 1)
    diag = values[:, 0, 0]
    assert stats.kstest(diag, stats.beta(k, 1).cdf).pvalue > 1e-3
    # against naive rejection sampling: i.i.d. uniforms kept when column 0's diagonal is max
    rng = np.random.default_rng(100 + k)
    raw = rng.random((200_000, k))
    kept = raw[raw.argmax(axis=1) == 0][:, 1]  # an off-diagonal entry of column 0
    assert stats.ks_2samp(values[:, 1, 0], kept).pvalue > 1e-3
    # entries of different columns are independent
    assert abs(np.corrcoef(values[:, 0, 0], values[:, 1, 1])[0, 1]) < 0.03


def test_labels_order_rows_by_the_class_they_choose():
    ms = sample_matrices(500, ["c", "a", "b"], ["a", "b", "c"], seed=1)
    for m in ms:
        assert m.decisions == ("c", "a", "b") and m.classes == ("a", "b", "c")
        assert m.to_frame().idxmax(axis=0).tolist() == ["a", "b", "c"]


def test_rectangular_and_unconstrained_and_errors():
    ms = sample_matrices(5000, 3, 2, seed=2)  # re-test style: 3 decisions, 2 classes
    values = np.stack([m.values for m in ms])
    assert values.shape == (5000, 3, 2)
    assert np.mean(values, axis=0) == pytest.approx(np.full((3, 2), 0.5), abs=0.02)
    free = np.stack([m.values for m in sample_matrices(5000, 3, 3, "unconstrained", seed=3)])
    assert np.mean(free.argmax(axis=1) == np.arange(3)) == pytest.approx(1 / 3, abs=0.02)
    with pytest.raises(ValueError, match="prior 'gaussian' is the chart's"):
        sample_matrices(3, 3, 3, prior="gaussian")
    with pytest.raises(ValueError, match="prior must be one of"):
        sample_matrices(3, 2, 2, prior="dirichlet")
    with pytest.raises(ValueError, match="n must be a positive integer, found 0"):
        sample_matrices(0, 2, 2)
    assert sample_matrices(3, 2, 2, seed=5)[2] == sample_matrices(3, 2, 2, seed=5)[2]


# ------------------------------------------------------------- multi-class audit
def test_multiclass_defaults_and_micro_f1_is_accuracy():
    result = rank_disagreement(n_pairs=30_000, seed=0, n_classes=3, error_sd=(0, 0.2))
    assert list(result.metric) == [*DEFAULT_MULTICLASS_METRICS, "utility_yield", "utility_yield"]
    assert _row(result, "f1_micro").fraction_wrong == _row(result, "accuracy").fraction_wrong
    assert _row(result, "utility_yield", 0).fraction_wrong == 0
    assert _row(result, "utility_yield", 0.2).fraction_wrong > 0
    for name in ("balanced_accuracy", "f1_macro", "matthews", "cohen_kappa", "preference_driven"):
        assert _row(result, name).fraction_wrong > 0.05, name
    assert result.attrs["n_classes"] == 3


@pytest.mark.parametrize("k", [3, 5])
def test_a_fixed_matrix_and_its_yield(k):
    rng = np.random.default_rng(k)
    values = rng.random((k, k))
    np.fill_diagonal(values, 1.0)
    u = UtilityMatrix(values)

    def own_yield(confusion):  # the true matrix's yield, as a user callable
        return np.einsum("nij,ij->n", confusion, values)

    result = rank_disagreement(
        {"own": own_yield, "acc": "accuracy"}, u, error_sd=[0], n_pairs=20_000, seed=1,
        n_classes=k,
    )  # fmt: skip
    assert _row(result, "own").fraction_wrong == 0
    assert _row(result, "utility_yield", 0).fraction_wrong == 0
    assert _row(result, "acc").fraction_wrong > 0
    identity = UtilityMatrix(np.eye(k))
    result = rank_disagreement(["accuracy"], identity, error_sd=[], n_pairs=20_000, seed=1,
                               n_classes=k)  # fmt: skip
    assert result.fraction_wrong.iloc[0] == 0


def test_balanced_accuracy_is_accuracy_at_equal_class_balance():
    """X/Y = f1/f0 = 1 at 50/50: balanced accuracy ranks as accuracy; at 90/10 it does not."""
    even = rank_disagreement(["accuracy", "balanced_accuracy"], error_sd=[], n_pairs=50_000,
                             seed=4, class_balance=[0.5, 0.5])  # fmt: skip
    assert _row(even, "accuracy").fraction_wrong == _row(even, "balanced_accuracy").fraction_wrong
    skewed = rank_disagreement(["accuracy", "balanced_accuracy"], error_sd=[], n_pairs=50_000,
                               seed=4, class_balance=[0.9, 0.1])  # fmt: skip
    assert (_row(skewed, "accuracy").fraction_wrong
            != _row(skewed, "balanced_accuracy").fraction_wrong)  # fmt: skip
    three = rank_disagreement(["accuracy", "balanced_accuracy"], error_sd=[], n_pairs=20_000,
                              seed=4, n_classes=3, class_balance=[1 / 3] * 3)  # fmt: skip
    assert _row(three, "accuracy").fraction_wrong == _row(three, "balanced_accuracy").fraction_wrong
    assert even.attrs["class_balance"] == [0.5, 0.5]


def _naive_pair(rng, k):
    """One pair of theory 1.5's procedure on k classes, written out plainly."""
    while True:
        u = rng.random((k, k))
        if (u.argmax(axis=0) == np.arange(k)).all():
            break
    f = rng.dirichlet(np.ones(k))
    joint = []
    for _ in range(2):
        p = np.zeros((k, k))
        for c in range(k):
            r = 1 / k + (1 - 1 / k) * np.sqrt(rng.random())
            split = rng.dirichlet(np.ones(k - 1))
            p[c, c] = r
            p[[i for i in range(k) if i != c], c] = (1 - r) * split
        joint.append(p * f)
    return u, joint


def test_vectorised_audit_matches_a_plain_loop_in_distribution():
    rng = np.random.default_rng(9)
    n, k = 2500, 3
    wrong = {"accuracy": 0, "f1_macro": 0}
    for _ in range(n):
        u, (a, b) = _naive_pair(rng, k)
        truth = np.sign(np.sum(u * (b - a)))
        for name in wrong:
            fa = MULTICLASS_METRICS[name](metrics.ConfusionMatrix(a))
            fb = MULTICLASS_METRICS[name](metrics.ConfusionMatrix(b))
            wrong[name] += np.sign(fb - fa) != truth
    fast = rank_disagreement(list(wrong), error_sd=[], n_pairs=100_000, seed=2, n_classes=k)
    for name, count in wrong.items():
        p_loop, p_fast = count / n, _row(fast, name).fraction_wrong
        se = np.sqrt(p_loop * (1 - p_loop) / n + p_fast * (1 - p_fast) / 100_000)
        assert abs(p_loop - p_fast) < 4 * se, (name, p_loop, p_fast)


def test_square_perturbation_keeps_the_constraints():
    rng = np.random.default_rng(0)
    u = np.stack([m.values for m in sample_matrices(5000, 4, 4, "entries", seed=0)])
    for sd in (0.05, 0.3):
        out = _perturb_square(u, sd, rng)
        assert (out >= 0).all() and (out <= 1).all()
        # out[n, c, c] >= out[n, i, c]: the correct decision keeps the higher utility
        assert (np.diagonal(out, axis1=1, axis2=2)[:, None, :] >= out).all()
        assert not np.allclose(out, u)
    np.testing.assert_array_equal(_perturb_square(u, 0.0, rng), u)
    # 30 standard deviations from the bounds and the ordering: plain Gaussian errors
    middle = np.tile(np.full((3, 3), 0.3) + 0.4 * np.eye(3), (20_000, 1, 1))
    noise = _perturb_square(middle, 0.01, rng) - middle
    assert noise.mean() == pytest.approx(0, abs=2e-4)
    assert noise.std() == pytest.approx(0.01, rel=0.03)


def test_rates_and_validation():
    slow = rank_disagreement(["accuracy"], error_sd=[], n_pairs=20_000, seed=1, rates="uniform")
    assert slow.attrs["rates"] == "uniform"
    fixed = rank_disagreement(
        ["accuracy"], error_sd=[], n_pairs=2000, seed=1, n_classes=3,
        rates=lambda rng, shape: 0.5 + 0.5 * rng.random(shape),
    )  # fmt: skip
    assert 0 <= fixed.fraction_wrong.iloc[0] < 0.5
    with pytest.raises(ValueError, match=r"rates\(rng, \(4, 100\)\) must return an array"):
        rank_disagreement(["accuracy"], error_sd=[], n_pairs=100, rates=lambda rng, s: 2.0)
    with pytest.raises(ValueError, match="rates must be one of"):
        rank_disagreement(["accuracy"], n_pairs=100, rates="steep")
    with pytest.raises(ValueError, match="class_balance must sum to 1"):
        rank_disagreement(["accuracy"], n_pairs=100, class_balance=[0.5, 0.6])
    with pytest.raises(ValueError, match="class_balance must hold 3 positive"):
        rank_disagreement(["accuracy"], n_pairs=100, n_classes=3, class_balance=[0.5, 0.5])
    with pytest.raises(ValueError, match="utility_prior 'gaussian' is a distribution over"):
        rank_disagreement(["accuracy"], "gaussian", n_pairs=100, n_classes=3)
    with pytest.raises(ValueError, match=r"utility_prior must be a 3x3 UtilityMatrix"):
        rank_disagreement(["accuracy"], UtilityMatrix(np.eye(2)), n_pairs=100, n_classes=3)
    with pytest.raises(ValueError, match="n_classes must be an integer of at least 2"):
        rank_disagreement(["accuracy"], n_pairs=100, n_classes=1)


# -------------------------------------------------------- admissibility, C >= 3
@pytest.mark.parametrize("k", [3, 4, 5])
def test_multiclass_admissibility(k):
    for name in ("accuracy", "f1_micro"):
        result = is_admissible(name, n_classes=k)
        assert result.admissible, result.reason
        off = ~np.eye(k, dtype=bool)
        np.testing.assert_allclose(result.regrets[off], 1 / np.sqrt(k * (k - 1)), atol=1e-8)
        np.testing.assert_array_equal(np.diagonal(result.regrets), 0)
    for name in ("balanced_accuracy", "f1_macro", "f1_macro_harmonic", "matthews",
                 "cohen_kappa", "preference_driven", "precision_macro"):  # fmt: skip
        result = is_admissible(name, n_classes=k)
        assert not result.admissible, name
        assert "changes by up to" in result.reason


def test_a_yield_is_admissible_with_its_regrets():
    rng = np.random.default_rng(3)
    values = rng.random((4, 4))
    np.fill_diagonal(values, 1.5)
    u = UtilityMatrix(values)
    result = is_admissible(lambda cm: utility_yield(cm, u), n_classes=4)  # no .batch: a loop
    assert result.admissible
    regrets = np.diag(values)[None, :] - values
    np.testing.assert_allclose(result.regrets, regrets / np.linalg.norm(regrets), atol=1e-7)
    binary = is_admissible("accuracy")
    np.testing.assert_allclose(binary.regrets, [[0, 2**-0.5], [2**-0.5, 0]], atol=1e-9)
    constant = is_admissible(lambda cm: 1.0, n_classes=3)
    assert not constant.admissible and "constant" in constant.reason


# ----------------------------------------------------------------- AUC audited
def test_binormal_best_by_brute_force():
    rng = np.random.default_rng(0)
    xy = rng.uniform(-1, 1, (300, 2))
    xy = xy[in_chart_domain(xy[:, 0], xy[:, 1])]
    u = chart_matrices(xy[:, 0], xy[:, 1])
    m = len(u)
    b = rng.random(m)
    mu = rng.normal(1, 1, m)
    s = np.exp(rng.uniform(np.log(0.5), np.log(2), m))
    best = _binormal_best(u, b, mu, s)
    t = np.linspace(-12, 12, 100_001)
    for j in range(m):
        a_pos = (u[j, 0, 0] - u[j, 1, 0]) * b[j]
        a_neg = (u[j, 1, 1] - u[j, 0, 1]) * (1 - b[j])
        grid = a_pos * ndtr((mu[j] - t) / s[j]) - a_neg * ndtr(-t)
        assert best[j] == pytest.approx(max(grid.max(), 0.0, a_pos - a_neg), abs=1e-8)


def test_auc_never_wrong_for_nested_binormal_curves():
    """Equal spreads: the larger mu dominates everywhere (theory 1.4), as AUC says."""
    rng = np.random.default_rng(1)
    xy = rng.uniform(-1, 1, (5000, 2))
    xy = xy[in_chart_domain(xy[:, 0], xy[:, 1])]
    u = chart_matrices(xy[:, 0], xy[:, 1])
    b = rng.random(len(u))
    mu0, mu1 = rng.normal(1, 1, (2, len(u)))
    ones = np.ones(len(u))
    gap = _binormal_best(u, b, mu1, ones) - _binormal_best(u, b, mu0, ones)
    separated = gap != 0
    assert np.all(np.sign(gap[separated]) == np.sign(mu1 - mu0)[separated])
    result = auc_disagreement(error_sd=[], n_pairs=20_000, seed=3, spread=(1, 1))
    assert result.fraction_wrong.iloc[0] <= 2 / 20_000  # only floating-point ties


def test_auc_is_audited_with_crossing_curves():
    result = auc_disagreement(error_sd=(0, 0.2), n_pairs=50_000, seed=0)
    assert _row(result, "roc_auc").fraction_wrong > 0.05
    assert _row(result, "utility_yield", 0).fraction_wrong == 0
    assert _row(result, "utility_yield", 0.2).fraction_wrong > 0
    balanced = auc_disagreement(error_sd=[], n_pairs=20_000, seed=0, class_balance=[0.9, 0.1])
    assert balanced.attrs["class_balance"] == [0.9, 0.1]
    with pytest.raises(ValueError, match="spread must satisfy"):
        auc_disagreement(n_pairs=10, spread=(2, 1))


# ------------------------------------------------------- standard vs augmented
LABELS = ("no", "yes")
W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
MU = np.array([[[-1.5], [1.0]], [[-1.0], [1.5]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])


@pytest.fixture(scope="module")
def lattice():
    """Vote fractions k/20 (summed exactly), two posterior draws."""
    rng = np.random.default_rng(5)
    votes = np.round(rng.beta(2, 5, 80) * 20) / 20
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        pd.DataFrame({"votes": votes}), np.array(LABELS)[(votes > 0.3).astype(int)], LABELS,
        output_transform="logit", resolution=0.05,
    )  # fmt: skip


def test_standard_and_augmented_by_hand(lattice):
    matrices = sample_matrices(40, LABELS, LABELS, seed=7)
    # a threshold between lattice values (0.30 and 0.35): no rounding question at 0.3 itself
    frame = standard_vs_augmented(lattice, matrices, rescale=False, threshold=0.32)
    values = np.arange(21) / 20
    lower, upper, _ = lattice.transform_.intervals(values[:, None])
    lo, hi = lower[:, 0], upper[:, 0]
    # per-draw class masses of each lattice value: sum_k w_k alpha_kc (Phi(hi) - Phi(lo))
    mass = np.einsum("sk,skc,skj->sjc", W, ALPHA,
                     norm.cdf((hi[None, None] - MU) / SIGMA)
                     - norm.cdf((lo[None, None] - MU) / SIGMA))  # fmt: skip
    pooled = mass.sum(axis=0)
    standard_choice = (values > 0.32).astype(int)
    for j, u in enumerate(matrices):
        v = u.reindex(LABELS, LABELS).values
        standard = np.einsum("sjc,jc->s", mass, v[standard_choice]).mean()
        augmented = np.einsum("sjc,jc->s", mass, v[(pooled @ v.T).argmax(axis=1)]).mean()
        assert frame["standard"].iloc[j] == pytest.approx(standard, abs=1e-12)
        assert frame["augmented"].iloc[j] == pytest.approx(augmented, abs=1e-12)
    # the augmented rule maximises the posterior-mean utility output by output
    assert (frame["gain"] >= -1e-12).all()
    assert frame.attrs["share_not_worse"] == 1.0
    np.testing.assert_allclose(frame[["x", "y"]], [m.xy for m in matrices])


def test_ten_thousand_uniform_matrices(lattice):
    frame = standard_vs_augmented(lattice, threshold=0.3, seed=0)
    assert len(frame) == 10_000 and frame.attrs["prior"] == "uniform"
    assert frame.attrs["share_not_worse"] == 1.0
    assert frame["gain"].max() > 0.1  # somewhere the classifier's own threshold is far off
    assert ((frame["prob_augmented_better"] >= 0) & (frame["prob_augmented_better"] <= 1)).all()


def test_utilities_must_use_the_class_labels_and_plot(lattice):
    import matplotlib.pyplot as plt

    from yieldwise import plots

    with pytest.raises(ValueError, match="standard rule chooses one of the transducer's classes"):
        standard_vs_augmented(lattice, [UtilityMatrix(np.eye(2))])
    frame = standard_vs_augmented(lattice, n_matrices=200, seed=1, threshold=0.3)
    ax = plots.standard_vs_augmented(frame)
    assert ax.get_title().startswith("Augmented at least as good for 100% of 200 matrices")
    plt.close(ax.figure)


@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # a two-draw posterior
def test_three_classes_vector_outputs():
    """Argmax of three logits against expected utility; Monte Carlo with common points."""
    rng = np.random.default_rng(2)
    labels = ("a", "b", "c")
    k = 3
    w = np.full((1, 2, k), 1 / 3)
    alpha = np.tile(0.1 + 0.7 * np.eye(k), (1, 2, 1, 1))  # component j mostly class j
    mu = np.tile(2.0 * np.eye(k)[None, None], (1, 2, 1, 1)) + rng.normal(0, 0.1, (1, 2, k, k))
    sigma = np.ones((1, 2, k, k))
    outputs = pd.DataFrame(rng.normal(size=(60, k)), columns=["l0", "l1", "l2"])
    t = Transducer.from_draws(
        {"w": w, "alpha": alpha, "mu": mu, "sigma": sigma}, outputs,
        np.array(labels)[outputs.to_numpy().argmax(axis=1)], labels,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    frame = standard_vs_augmented(t, n_matrices=500, seed=4, n_points=4000)
    assert frame.attrs["share_not_worse"] == 1.0
    assert "x" not in frame.columns
    # the identity matrix: the standard rule is the argmax, nearly what accuracy wants
    identity = UtilityMatrix(np.eye(3), decisions=labels, classes=labels)
    one = standard_vs_augmented(t, [identity], rescale=False, n_points=4000)
    assert 0 <= one["gain"].iloc[0] < 0.05
