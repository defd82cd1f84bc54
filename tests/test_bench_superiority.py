"""bench/superiority.py: the shared calibration sets, the counting of comparisons against
known truths (checked on simulated probabilities whose calibration is known, and on a
worked example), and one repetition end to end on the Laplace backend."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def study(bench_import):
    pytest.importorskip("sklearn")  # decision_quality.py's peers
    pytest.importorskip("betacal")
    return bench_import("superiority")


def test_one_set_of_labels_and_each_classifiers_outputs_given_them(study):
    problems = study.classifiers(("votes", "logistic", "clipped"), positives=0.3)
    by_classifier, outputs, seeds = study.shared_sets(problems, 4000, rep=2)
    labels = by_classifier["votes"]
    for name in problems:
        assert by_classifier[name] is labels  # one labelled set, scored by all
    again, _, seeds_again = study.shared_sets(problems, 4000, rep=2)
    np.testing.assert_array_equal(labels, again["votes"])
    assert seeds == seeds_again and len(set(seeds.values())) == 3
    assert abs(labels.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 4000)
    for name, problem in problems.items():
        assert problem.prevalences.tolist() == [0.7, 0.3]
        assert len(outputs[name]) == 4000
        # given the labels, each classifier's outputs follow its own class-conditional law
        base = next(p for p in study.classifiers((name,), positives=0.3).values())
        rng = np.random.default_rng(0)
        reference = np.asarray(base.sample_outputs(np.ones(20000, int), rng)).ravel()
        mine = np.asarray(outputs[name]).ravel()[labels == 1]
        assert abs(np.median(mine) - np.median(reference)) < 0.1 * np.std(reference)
    # other repetitions draw other sets; the classifiers' outputs are not copies
    other, _, _ = study.shared_sets(problems, 4000, rep=3)
    assert not np.array_equal(labels, other["votes"])
    assert not np.array_equal(outputs["logistic"], outputs["clipped"])
    # independent labels: a labelled set per classifier, the same outputs' laws and seeds
    apart, outputs_apart, seeds_apart = study.shared_sets(problems, 4000, 2, labels="independent")
    assert seeds_apart == seeds
    assert not np.array_equal(apart["votes"], apart["logistic"])
    for name in problems:
        assert abs(apart[name].mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / 4000)
        assert len(outputs_apart[name]) == 4000
    with pytest.raises(ValueError, match="labels must be 'shared' or 'independent'"):
        study.shared_sets(problems, 100, 0, labels="paired")


def test_one_task_has_one_balance_and_binary_panel_problems_only(study):
    problems = study.classifiers(("votes",), positives=0.3)
    problems |= study.classifiers(("beta",), positives=0.2)
    with pytest.raises(ValueError, match="one task has one balance"):
        study.shared_sets(problems, 100, rep=0)
    with pytest.raises(ValueError, match="not panel problems"):
        study.classifiers(("votes", "forest"))
    with pytest.raises(ValueError, match="must be binary"):
        study.classifiers(("softmax-3",))


def _record(truth, superiority, best, n=300, rep=0):
    names = [f"c{i}" for i in range(len(truth))]
    return {
        "n": n, "rep": rep, "classifiers": names,
        "fits": {k: {"truth": list(t)} for k, t in zip(names, truth, strict=True)},
        "prob_superiority": superiority, "prob_best": best,
    }  # fmt: skip


def test_comparisons_by_hand(study):
    """Three classifiers, two matrices. Matrix 0: truths 0.9 / 0.8 / 0.8 + 1e-15 (the last
    two tie); matrix 1: 0.5 / 0.6 / 0.7."""
    truth = [[0.9, 0.5], [0.8, 0.6], [0.8 + 1e-15, 0.7]]
    sup = [
        [[np.nan, 0.7, 0.9], [0.3, np.nan, 0.55], [0.1, 0.45, np.nan]],
        [[np.nan, 0.2, 0.4], [0.8, np.nan, 0.5], [0.6, 0.5, np.nan]],
    ]
    table = study.comparisons([_record(truth, sup, [[0.6, 0.2, 0.2], [0.1, 0.3, 0.6]])])
    assert len(table) == 6 and table["tie"].sum() == 1
    o = study.oriented(table).set_index(["matrix", "a", "b"])
    # matrix 0: c0 over c1 at 0.7, right; c0 over c2 at 0.9, right
    assert o.loc[(0, "c0", "c1"), "p"] == 0.7 and o.loc[(0, "c0", "c1"), "right"]
    assert o.loc[(0, "c0", "c2"), "p"] == 0.9 and o.loc[(0, "c0", "c2"), "right"]
    # matrix 1: P(c0 > c1) 0.2 favours c1 at 0.8, and c1 is better: right
    assert o.loc[(1, "c0", "c1"), "p"] == pytest.approx(0.8) and o.loc[(1, "c0", "c1"), "right"]
    # P(c0 > c2) 0.4 favours c2 at 0.6, right; P(c1 > c2) = 0.5 favours c1, wrong
    assert o.loc[(1, "c0", "c2"), "p"] == pytest.approx(0.6) and o.loc[(1, "c0", "c2"), "right"]
    assert o.loc[(1, "c1", "c2"), "p"] == 0.5 and not o.loc[(1, "c1", "c2"), "right"]
    best = study.best_table([_record(truth, sup, [[0.6, 0.2, 0.2], [0.1, 0.3, 0.6]])])
    assert best["best"].tolist() == [True, False, False, False, False, True]
    assert study.brier(best["p"], best["best"]) == pytest.approx(
        np.mean([0.16, 0.04, 0.04, 0.01, 0.09, 0.16])
    )


def test_calibration_table_finds_calibration_and_overconfidence(study):
    """Probabilities whose outcomes are drawn with exactly that chance land on the
    diagonal within their standard errors; the same outcomes against probabilities pushed
    towards 0 and 1 do not."""
    rng = np.random.default_rng(5)
    p = rng.uniform(0.5, 1.0, 40_000)
    clusters = np.repeat(np.arange(400), 100)
    outcome = rng.uniform(size=p.size) < p
    rows = study.calibration_table(p, outcome, clusters, study.SUPERIORITY_BINS)
    assert sum(r["count"] for r in rows) == p.size
    for r in rows:
        assert abs(r["share"] - r["mean_p"]) < 4 * r["se"] + 1e-9, r
    pushed = 0.5 + 1.6 * (p - 0.5)
    pushed = np.minimum(pushed, 0.999)
    rows = study.calibration_table(pushed, outcome, clusters, study.SUPERIORITY_BINS)
    gaps = [(r["mean_p"] - r["share"]) / r["se"] for r in rows if r["count"] > 500]
    assert max(gaps) > 5  # over-confident: the shares fall short of the probabilities


def test_clustered_share_is_the_binomial_error_for_single_item_clusters(study):
    hits = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], float)
    share, se = study.clustered_share(hits, np.arange(10))
    p = 0.7
    assert share == pytest.approx(p)
    assert se == pytest.approx(np.sqrt(10 / 9 * np.sum((hits - p) ** 2)) / 10)
    # whole clusters of identical outcomes: the error is that of 2 clusters, not 10 items
    share, se = study.clustered_share(np.repeat([1.0, 0.0], 5), np.repeat([0, 1], 5))
    assert share == 0.5 and se == pytest.approx(0.5)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_one_repetition_end_to_end_on_the_laplace_backend(study):
    """Two classifiers, two matrices, Laplace fits: the truths are the exact long-run
    utilities of the rules the fits set, recomputed here from the fits' own predictions at
    the cells, and P(A beats B) + P(B beats A) = 1."""

    problems = study.classifiers(("logistic", "beta"))
    matrices, _ = study.study_matrices(seed=3, n_chart=1)
    matrices = matrices[[0, 2]]
    record = study.run_rep(problems, 400, 0, matrices, fit_options={"backend": "laplace"})
    assert record["classifiers"] == ["logistic", "beta"] and len(record["prob_superiority"]) == 2
    _check_truths_by_hand(study, problems, record, 400, matrices)
    for table, best in zip(record["prob_superiority"], record["prob_best"], strict=True):
        assert table[0][1] + table[1][0] == pytest.approx(1.0, abs=1e-3)
        assert sum(best) == pytest.approx(1.0, abs=1e-3)
    # the class parts add up to compare's draws; the candidate is a probability per pair
    assert max(f["parts_gap"] for f in record["fits"].values()) < 1e-9
    for table in record["prob_superiority_class_paired"]:
        assert table[0][1] + table[1][0] == pytest.approx(1.0, abs=0.03)


def test_the_report_has_a_row_per_labels_setting_and_size(study):
    truth = [[0.9, 0.5], [0.8, 0.6]]
    sup = [[[np.nan, 0.7], [0.3, np.nan]], [[np.nan, 0.2], [0.8, np.nan]]]
    fits = {"divergent": 0, "treedepth": 0, "max_rhat": 1.0, "min_ess_bulk": 1000}

    def results(labels):
        reps = [_record(truth, sup, [[0.7, 0.3], [0.2, 0.8]], rep=r) for r in range(2)]
        for r in reps:
            for f in r["fits"].values():
                f.update(fits)
        out = study.new_results(2026, 0.15, 1, labels)
        out["runs"].append({"command": "python bench/superiority.py", "date": "2026-12-05",
                            "commit": "abc"})  # fmt: skip
        out["reps"] = reps
        return out

    text = study.render([results("shared"), results("independent")])
    # per row: 4 comparisons, none tied; both favoured classifiers right (P 0.7 and 0.8)
    brier = np.mean([(0.7 - 1) ** 2, (0.2 - 0) ** 2])
    for labels in ("shared", "independent"):
        assert f"| {labels}, 300 | 4 (0) |" in text
        assert f"{brier:.4f} |" in text
    assert "8 fits, 8 clean" in text
    with pytest.raises(ValueError, match="each hold a repetition"):
        study.render([study.new_results(2026, 0.15, 1)])


def test_class_paired_superiority_shares_the_class_frequencies(study):
    """Classifier A earns 1 per item of class 0 and nothing on class 1; B earns 0.98 and
    0.11. With the class-0 frequency F0, u_A - u_B = 0.13 F0 - 0.11, positive iff F0 >
    0.11 / 0.13. One posterior of F0 shared by both (F0 ~ N(0.9, 0.03^2)): P = P(F0 >
    0.846) = Phi((0.9 - 0.11 / 0.13) / 0.03). Independent posteriors of F0 (compare's
    all pairs): u_A - u_B ~ N(0.9 - 0.87 * 0.9 - 0.11, 0.03^2 (1 + 0.87^2)), near a coin."""
    from scipy.stats import norm

    rng = np.random.default_rng(1)
    f0 = rng.normal(0.9, 0.03, 4000)
    freq = np.column_stack([f0, 1 - f0])
    parts_a = freq * [1.0, 0.0]  # (S, C): w_t(c) = F_t(c) v(c)
    parts_b = freq * [0.98, 0.11]
    p = study.class_paired_superiority(parts_a, parts_b, freq, freq, np.random.default_rng(2))
    assert p == pytest.approx(norm.cdf((0.9 - 0.11 / 0.13) / 0.03), abs=0.01)
    u_a, u_b = parts_a.sum(1), parts_b.sum(1)
    independent = np.mean(u_a[:, None] > u_b[None, :])
    mean, sd = 0.9 - 0.87 * 0.9 - 0.11, 0.03 * np.sqrt(1 + 0.87**2)
    assert independent == pytest.approx(norm.cdf(mean / sd), abs=0.02)
    assert independent < 0.65 < p  # the shared frequencies are what makes A sure


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_joint_route_pairs_the_shared_study_and_scores_each_members_own_rule(study):
    """One joint transducer per pair on the shared study's own set: its members' truths
    are the exact long-run utilities of their marginal transducers' rules, recomputed
    here, and its comparisons count as the shared study's do."""
    from decision_quality import long_run

    import yieldwise as yw

    problems = study.classifiers(("logistic", "beta", "clipped"))
    matrices = study.study_matrices(seed=3, n_chart=2)[0][:3]
    record = study.run_joint_rep(
        problems, 300, 1, matrices, fit_options={"backend": "laplace"},
        pairs=(("logistic", "clipped"),),
    )  # fmt: skip
    labels, outputs, seeds = study.shared_sets(problems, 300, 1)
    joint = yw.Transducer(seed=seeds["logistic"], progress=False, backend="laplace").fit(
        {k: outputs[k].ravel() for k in ("logistic", "clipped")}, labels["logistic"]
    )
    for name in ("logistic", "clipped"):
        p_hat = np.asarray(joint.marginal(name).predict_proba(problems[name].cells.ravel()))
        expected = long_run(p_hat, problems[name].joint(), matrices)
        np.testing.assert_allclose(record["truth"][name], expected, rtol=1e-12)
    table = study.comparisons([record])
    assert len(table) == 3 and set(table["a"]) == {"logistic"} and set(table["b"]) == {"clipped"}
    gaps = np.array(record["truth"]["logistic"]) - np.array(record["truth"]["clipped"])
    np.testing.assert_array_equal(table["a_better"], gaps > 0)
    assert table["p"].between(0, 1).all()


def test_the_three_class_task(study, tmp_path):
    """Four 3-class classifiers at the panel's softmax-3 balance, the first the panel's own
    (the same cells and masses); labels drawn over three classes at that balance; 20 random
    3 x 3 matrices; each classifier's exact utility recomputed here from its own truth, by
    maximum expected utility cell by cell; the report names the task and its own section;
    joint fits refused."""
    from _problems import softmax_problem

    problems = study.task_classifiers("three-class")
    assert list(problems) == list(study.THREE_CLASS) and len(problems) == 4
    panel = softmax_problem()
    own = problems["softmax-3"]
    np.testing.assert_array_equal(own.cells, panel.cells)
    np.testing.assert_array_equal(own.joint(), panel.joint())
    for problem in problems.values():
        assert problem.prevalences.tolist() == [0.5, 0.3, 0.2]
        assert problem.joint().sum() == pytest.approx(1.0, abs=1e-6)
    labels, outputs, _ = study.shared_sets(problems, 6000, rep=0)
    shares = np.bincount(labels["softmax-3"], minlength=3) / 6000
    np.testing.assert_allclose(shares, [0.5, 0.3, 0.2], atol=4 * np.sqrt(0.25 / 6000))
    for out in outputs.values():
        assert out.shape == (6000, 3) and np.allclose(out.sum(axis=1), 1.0)
    matrices, names = study.study_matrices(2026, 16, n_classes=3)
    assert matrices.shape == (20, 3, 3) and names[0] == "random 0"
    assert matrices.min() >= 0 and matrices.max() <= 1
    # the truths the study scores against, for the exact p(c | y): a hand loop per cell
    from decision_quality import long_run

    w = own.joint()
    p = w / w.sum(axis=1, keepdims=True)
    u = matrices[0]
    by_hand = sum(w[g] @ u[np.argmax(u @ p[g])] for g in range(0, len(w), 97))
    sub = np.arange(0, len(w), 97)
    assert long_run(p[sub], w[sub], matrices[:1])[0] == pytest.approx(by_hand, rel=1e-12)
    # the report of a three-class results file
    sup = [[[np.nan, 0.7], [0.3, np.nan]]]
    record = _record([[0.5], [0.4]], sup, [[0.7, 0.3]])
    for f in record["fits"].values():
        f.update({"divergent": 0, "treedepth": 0, "max_rhat": 1.0, "min_ess_bulk": 1000})
    results = study.new_results(2026, 0.15, 16, "shared", task="three-class")
    results["runs"].append({"command": "c", "date": "2026-12-06", "commit": "abc"})
    results["reps"] = [record]
    text = study.render([results])
    assert text.startswith(study.SECTION_THREE + "\n")
    assert "Four classifiers of one three-class task" in text and "20 random 3 x 3" in text
    assert "truly the best of the 4" in text
    binary = study.new_results(2026, 0.15, 16)
    binary["reps"] = [record]
    with pytest.raises(ValueError, match="results files of one task"):
        study.render([results, binary])
    # a resumed file keeps its task
    path = tmp_path / "three.json"
    path.write_text(json.dumps(results))
    with pytest.raises(study.ResultsError, match="task"):
        study.load_results(path, 2026, 0.15, 16, "shared", task="binary")
    with pytest.raises(SystemExit):
        study.main(["--task", "three-class", "--labels", "joint", "--results",
                    str(tmp_path / "joint.json")])  # fmt: skip


def test_one_three_class_repetition_end_to_end_on_the_laplace_backend(study):
    """Two of the three-class classifiers, two matrices, Laplace fits, without the
    class-paired candidate: the truths are the exact utilities of the fits' own rules,
    recomputed here, and each pair's two probabilities add up to 1."""

    problems = {k: v for k, v in study.task_classifiers("three-class").items()
                if k in ("softmax-3", "softmax-3-noisier")}  # fmt: skip
    matrices = study.study_matrices(2026, 16, n_classes=3)[0][[0, 2]]
    record = study.run_rep(problems, 300, 0, matrices, fit_options={"backend": "laplace"},
                           class_paired=False)  # fmt: skip
    assert "prob_superiority_class_paired" not in record
    _check_truths_by_hand(study, problems, record, 300, matrices)
    for table in record["prob_superiority"]:
        assert table[0][1] + table[1][0] == pytest.approx(1.0, abs=1e-3)


def _check_truths_by_hand(study, problems, record, n, matrices):
    """Each classifier's recorded truths: the exact utilities of its own Laplace fit's
    rule, refitted here on repetition 0's set and scored cell by cell."""
    from decision_quality import long_run

    import yieldwise as yw

    labels, outputs, seeds = study.shared_sets(problems, n, 0)
    for name, problem in problems.items():
        t = yw.Transducer(seed=seeds[name], progress=False, backend="laplace").fit(
            pd.DataFrame(outputs[name], columns=problem.columns), labels[name]
        )
        p_hat = t.predict_proba(pd.DataFrame(problem.cells, columns=problem.columns))
        expected = long_run(np.asarray(p_hat), problem.joint(), matrices)
        np.testing.assert_allclose(record["fits"][name]["truth"], expected, rtol=1e-12)
