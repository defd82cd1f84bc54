"""Joint transducers over several classifiers' outputs (issue 4), without and with Stan."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from yieldwise import Transducer, UtilityMatrix, compare, long_run_utility

LABELS = ("neg", "pos")
W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
# 2 draws x 2 components x 2 output dimensions ("rf" then "nn")
MU = np.array([[[-1.0, 0.5], [1.5, -0.5]], [[-0.5, 0.0], [1.0, -1.0]]])
SIGMA = np.array([[[1.0, 0.8], [0.7, 1.1]], [[0.8, 1.0], [1.2, 0.9]]])
U = UtilityMatrix([[1, -2], [0, 3]], decisions=LABELS, classes=LABELS)


@pytest.fixture(scope="module")
def joint():
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"rf": rng.normal(size=40), "nn": rng.normal(size=40)})
    t = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        frame, np.array(LABELS)[rng.integers(0, 2, 40)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    t.members_ = {"rf": ["rf"], "nn": ["nn"]}  # as fit({"rf": ..., "nn": ...}) records
    return t


@pytest.mark.filterwarnings("ignore::yieldwise.transducer.ExtrapolationWarning")  # on purpose
def test_marginal_equals_the_joint_with_the_other_output_integrated_out(joint):
    """Slicing the draws (marginal) versus censoring nn to (-inf, inf) in the joint."""
    y = np.linspace(-3, 3, 13)
    rf = joint.marginal("rf")
    assert rf.transform_.columns == ("rf",) and rf.n_components_ == 2
    lower = np.column_stack([y, np.full_like(y, -np.inf)])
    upper = np.column_stack([y, np.full_like(y, np.inf)])
    integrated = joint._model_proba(lower, upper, np.array([0, 1]), True, None)
    np.testing.assert_allclose(rf.predict_proba(y), integrated, rtol=1e-12)
    with pytest.raises(KeyError, match="unknown member 'svm'"):
        joint.marginal("svm")


def test_marginal_keeps_the_joint_sampler_record_and_has_its_own_log_likelihood():
    """The marginal's draws are the joint's, so its sampler record (divergences, tree
    depths, step sizes, settings, time) is the joint's; its log-likelihood is its own
    model's, here summed by hand with scipy's Normal densities item by item."""
    from scipy.stats import norm

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"rf": rng.normal(size=30), "nn": rng.normal(size=30)})
    truth = np.array(LABELS)[rng.integers(0, 2, 30)]
    stats = {
        "lp": np.array([[-3.0, -4.0]]), "energy": np.array([[5.0, 6.0]]),
        "step_size": np.array([[0.2, 0.2]]), "acceptance_rate": np.array([[0.9, 0.8]]),
        "diverging": np.array([[True, False]]), "tree_depth": np.array([[10, 3]]),
        "n_steps": np.array([[1023, 7]]),
    }  # fmt: skip
    joint = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        frame, truth, LABELS, output_transform="identity", resolution=None,
        sample_stats=stats, sampler={"max_treedepth": 10, "seed": 7}, sampling_seconds=12.5,
    )  # fmt: skip
    joint.members_ = {"rf": ["rf"], "nn": ["nn"]}
    rf = joint.marginal("rf")
    summary, expected = rf.sampler_summary(), joint.sampler_summary()
    assert summary["divergent"] == expected["divergent"] == 1
    assert summary["max_treedepth_hits"] == expected["max_treedepth_hits"] == 1
    assert summary["sampling_seconds"] == 12.5 and summary["step_size"] == [0.2]
    y, c = frame["rf"].to_numpy(), (truth == "pos").astype(int)
    by_hand = [
        np.log((W[t][None, :] * ALPHA[t][:, c].T
                * norm.pdf(y[:, None], MU[t][:, 0], SIGMA[t][:, 0])).sum(axis=1)).sum()
        for t in range(2)
    ]  # fmt: skip
    np.testing.assert_allclose(rf.posterior_.posterior["log_lik"].values[0], by_hand, rtol=1e-12)


@pytest.mark.filterwarnings("ignore::yieldwise.IntegrationWarning")  # a two-draw posterior
def test_compare_on_a_joint_transducer_pairs_the_draws(joint):
    result = compare(joint, U, rule="standard")
    assert result.paired and result.names == ["rf", "nn", "joint"]
    u_rf = long_run_utility(joint.marginal("rf"), U, rule="standard").values.ravel()
    u_nn = long_run_utility(joint.marginal("nn"), U, rule="standard").values.ravel()
    np.testing.assert_allclose(result.utilities["rf"].values.ravel(), u_rf)
    assert result.prob_superiority().loc["rf", "nn"] == pytest.approx(np.mean(u_rf > u_nn))
    # the ensemble decides by expected utility even when the members use their own rule
    u_joint = long_run_utility(joint, U, rule="augmented").values.ravel()
    np.testing.assert_allclose(result.utilities["joint"].values.ravel(), u_joint)
    with pytest.raises(ValueError, match="no standard rule"):
        long_run_utility(joint, U, rule="standard")


def test_single_transducer_has_no_marginals(joint):
    rf = joint.marginal("rf")
    with pytest.raises(ValueError, match="needs a joint fit"):
        rf.marginal("rf")


def test_joint_input_errors():
    t = Transducer(chains=1, warmup=10, draws=10, progress=False)
    with pytest.raises(ValueError, match="found 1 member"):
        t.fit({"rf": np.zeros(20)}, np.repeat([0, 1], 10))
    with pytest.raises(ValueError, match=r"outputs\['nn'\] has 19 items, the first member 20"):
        t.fit({"rf": np.linspace(0, 1, 20), "nn": np.zeros(19)}, np.repeat([0, 1], 10))
    probs = np.column_stack([np.linspace(0.1, 0.9, 20), 1 - np.linspace(0.1, 0.9, 20)])
    with pytest.raises(ValueError, match=r"outputs\['nn'\] are probability vectors"):
        t.fit({"rf": np.linspace(0, 1, 20), "nn": probs}, np.repeat([0, 1], 10))


def test_joint_fit_records_members_and_round_trips(tmp_path):
    rng = np.random.default_rng(8)
    n = 300
    classes = (rng.random(n) < 0.3).astype(int)
    rf = np.round(np.clip(rng.beta(2 + 4 * classes, 6 - 4 * classes), 0, 1) * 50) / 50
    nn = rng.normal(2.0 * classes - 1.0, 1.0)  # a logit-like continuous score
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the Laplace approximation: members, marginals and the round trip are plumbing
        t = Transducer(chains=2, warmup=200, draws=200, seed=3, progress=False, backend="laplace")
        t.fit({"rf": rf, "nn": nn}, classes)
    assert t.members_ == {"rf": ["rf"], "nn": ["nn"]}
    assert t.transform_.kind == ("logit", "identity") and t.transform_.resolution == (0.02, None)
    rf_only = t.marginal("rf")
    assert rf_only.transform_.resolution == (0.02,)
    loaded = Transducer.load(t.save(tmp_path / "joint.nc"))
    assert loaded.members_ == t.members_
    frame = pd.DataFrame({"rf": [0.1, 0.9], "nn": [-1.0, 1.5]})
    np.testing.assert_array_equal(loaded.predict_proba(frame), t.predict_proba(frame))
    result = compare(t, UtilityMatrix([[1, 0], [0, 1]]))
    assert result.paired and set(result.names) == {"rf", "nn", "joint"}
    p = result.prob_superiority()
    assert p.loc["rf", "nn"] + p.loc["nn", "rf"] == pytest.approx(1.0, abs=0.05)  # ties rare


def test_a_joint_fit_keeps_each_classifiers_coordinates_and_a_rotated_one_has_no_marginal():
    """Two continuous outputs are rotated onto their principal axes when one classifier
    gives both; a joint transducer keeps each member's own coordinate (its marginals drop
    the other members' dimensions), and marginal() refuses a rotated transducer."""
    from yieldwise.transducer.encoding import choose_transform

    rng = np.random.default_rng(6)
    a = rng.normal(size=40)
    frame = pd.DataFrame({"rf": a, "nn": a + rng.normal(0, 0.3, 40)})
    assert choose_transform(frame.to_numpy(), ["rf", "nn"]).is_rotated
    assert not choose_transform(frame.to_numpy(), ["rf", "nn"], rotate=False).is_rotated
    labels = np.array(LABELS)[rng.integers(0, 2, 40)]
    draws = {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]}
    rotated = Transducer.from_draws(draws, frame, labels, LABELS, rotate=True)
    rotated.members_ = {"rf": ["rf"], "nn": ["nn"]}
    with pytest.raises(ValueError, match="rotated onto their principal axes"):
        rotated.marginal("rf")
    assert not Transducer.from_draws(draws, frame, labels, LABELS).transform_.is_rotated


def test_a_joint_transducer_takes_the_mapping_it_was_fitted_with(joint):
    """predict_proba, draws_proba and decide take {member: outputs}, as fit does (it was
    refused as "not numeric"), equal to the frame of the members' columns; a member left
    out, a wrong column count, or a mapping to a single classifier's transducer are
    refused by name."""
    rng = np.random.default_rng(5)
    rf, nn = rng.normal(size=6), rng.normal(size=6)
    frame = pd.DataFrame({"rf": rf, "nn": nn})
    np.testing.assert_array_equal(joint.predict_proba({"nn": nn, "rf": rf}),
                                  joint.predict_proba(frame))  # fmt: skip
    np.testing.assert_array_equal(joint.draws_proba({"rf": rf, "nn": nn}).values,
                                  joint.draws_proba(frame).values)  # fmt: skip
    with pytest.raises(ValueError, match=r"must give each member of the joint transducer, "
                                         r"\['rf', 'nn'\]; found \['rf'\]"):  # fmt: skip
        joint.predict_proba({"rf": rf})
    with pytest.raises(ValueError, match=r"outputs\['nn'\] has 2 column\(s\); at fit time"):
        joint.predict_proba({"rf": rf, "nn": np.column_stack([nn, nn])})
    single = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None][..., :1],
         "sigma": SIGMA[None][..., :1]},
        pd.DataFrame({"rf": rf}), np.array(LABELS)[rng.integers(0, 2, 6)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"outputs as a mapping .* is for a joint transducer"):
        single.predict_proba({"rf": rf})


def test_per_kernel_widths_of_joint_centres_fit_predict_and_round_trip(tmp_path, monkeypatch):
    """The CENTRES_LOCAL_WIDTH candidate gives every kernel its own widths, (K, D): the
    fit's record keeps them, a saved transducer loads them back exactly and predicts the
    same, and its marginals work (the kernel values by hand: tests/test_design.py)."""
    import yieldwise._design as design
    from yieldwise.transducer.io import fit_record

    monkeypatch.setattr(design, "CENTRES_LOCAL_WIDTH", 4)
    rng = np.random.default_rng(12)
    n = 300
    classes = (rng.random(n) < 0.3).astype(int)
    scores = {f"m{j}": rng.normal(classes * (1.0 + 0.5 * j), 1.0) for j in range(3)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = Transducer(chains=2, draws=100, seed=2, progress=False, backend="laplace")
        t.fit(scores, np.array(LABELS)[classes], class_labels=LABELS)
    record = fit_record(t.posterior_)["design"]
    width = np.asarray(record["width"])
    assert record["kind"] == "centres" and width.shape == (t.n_components_, 3)
    assert width.min() < width.max(axis=0).min()  # not one width per dimension
    loaded = Transducer.load(t.save(tmp_path / "local.nc"))
    np.testing.assert_array_equal(np.asarray(fit_record(loaded.posterior_)["design"]["width"]),
                                  width)  # fmt: skip
    frame = pd.DataFrame({f"m{j}": rng.normal(0.5, 1.0, 7) for j in range(3)})
    np.testing.assert_array_equal(loaded.predict_proba(frame), t.predict_proba(frame))
    assert np.isfinite(t.marginal("m1").predict_proba(np.array([-1.0, 0.0, 2.0]))).all()
