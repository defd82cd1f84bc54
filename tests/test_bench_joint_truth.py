"""bench/joint_truth.py: its truth against Bayes' rule by hand and against its own sampler,
the band coverage and the report's summary against worked examples (no fits: the study's
numbers depend on sampling, its plumbing does not)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats


@pytest.mark.parametrize("truth", ["linear", "quadratic"])
def test_the_true_probability_is_bayes_rule_of_the_known_densities(bench_import, truth):
    jt = bench_import("joint_truth")
    rng = np.random.default_rng(3)
    y = rng.normal(0.5, 2.0, (50, 3))
    sd = {"linear": 1.0, "quadratic": 0.6}[truth]
    pos = 0.3 * np.prod([stats.norm.pdf(y[:, j], [1.0, 1.5, 2.0][j], sd) for j in range(3)], 0)
    neg = 0.7 * np.prod([stats.norm.pdf(y[:, j], 0.0, 1.0) for j in range(3)], 0)
    np.testing.assert_allclose(jt.true_probability(truth, y), pos / (pos + neg), rtol=1e-10)


@pytest.mark.parametrize("truth", ["linear", "quadratic"])
def test_the_sampler_draws_what_the_truth_says(bench_import, truth):
    """Class share, per-class means and sds, and calibration of the truth on its own
    draws: among items whose true p(pos | y) is in a bin, the positives' share is the
    bin's mean probability (within 4 standard errors)."""
    jt = bench_import("joint_truth")
    cls, y = jt.draw(truth, 60_000, np.random.default_rng(11))
    assert abs(cls.mean() - 0.3) < 4 * np.sqrt(0.3 * 0.7 / cls.size)
    sd = {"linear": 1.0, "quadratic": 0.6}[truth]
    np.testing.assert_allclose(y[cls == 1].mean(0), [1.0, 1.5, 2.0], atol=0.03)
    np.testing.assert_allclose(y[cls == 1].std(0), sd, atol=0.02)
    np.testing.assert_allclose(y[cls == 0].mean(0), 0.0, atol=0.02)
    np.testing.assert_allclose(y[cls == 0].std(0), 1.0, atol=0.02)
    p = jt.true_probability(truth, y)
    for lo, hi in [(0.05, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 0.95)]:
        at = (p >= lo) & (p < hi)
        assert at.sum() > 500
        se = np.sqrt(p[at].mean() * (1 - p[at].mean()) / at.sum())
        assert abs(cls[at].mean() - p[at].mean()) < 4 * se


def test_draw_refuses_an_unknown_truth_and_a_bad_size(bench_import):
    jt = bench_import("joint_truth")
    with pytest.raises(ValueError, match=r"truth must be one of \['linear', 'quadratic'\]"):
        jt.draw("cubic", 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"m \(the number of items\) must be a positive integer"):
        jt.draw("linear", 0, np.random.default_rng(0))


def test_set_refuses_a_name_that_is_not_a_design_constant(bench_import, capsys):
    jt = bench_import("joint_truth")
    with pytest.raises(SystemExit) as stop:
        jt.main(["--reps", "1", "--set", "NO_SUCH_CONSTANT=3"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--set: expected NAME=VALUE with NAME a constant of yieldwise._design" in err
    assert "'NO_SUCH_CONSTANT=3'" in err


def test_coverage_counts_a_worked_example(bench_import):
    """Bands [0.25, 0.75] (50 %) and [0.025, 0.975] (95 %) at every item. Truths 0.5 (in
    both), 0.9 (in the 95 % only), 0.0005 (in neither, and outside [0.001, 0.999], so
    counted only among all) and 0.2 (in the 95 % only); a band's ends count as inside."""
    jt = bench_import("joint_truth")
    four = np.ones(4)
    bands = {0.5: (0.25 * four, 0.75 * four), 0.95: (0.025 * four, 0.975 * four)}
    out = jt.coverage(bands, np.array([0.5, 0.9, 0.0005, 0.2]))
    assert (out["n_inside"], out["n_all"]) == (3, 4)
    assert out["0.5"] == {"inside": pytest.approx(1 / 3), "all": pytest.approx(1 / 4)}
    assert out["0.95"] == {"inside": pytest.approx(1.0), "all": pytest.approx(3 / 4)}
    edge = jt.coverage({0.5: (0.25 * four, 0.75 * four)}, np.array([0.25, 0.75, 0.7501, 0.2499]))
    assert edge["0.5"]["all"] == pytest.approx(0.5)


def _rep(cover50, clean=True, score=-0.2):
    cover = {"inside": cover50, "all": cover50 - 0.1}
    return {
        "rep": 0, "n": 1000, "truth": "linear",
        "coverage": {"0.5": cover, "0.75": cover, "0.95": cover},
        "log_score": score, "log_score_truth": -0.19, "log_score_logistic": -0.195,
        "sampler": {"divergent": 0 if clean else 2, "treedepth": 0, "max_rhat": 1.002,
                    "min_ess_bulk": 900.0, "sampling_seconds": 30.0 if clean else 45.0},
    }  # fmt: skip


def test_the_summary_and_its_row_match_a_hand_computation(bench_import, capsys, tmp_path):
    jt = bench_import("joint_truth")
    reps = [_rep(0.4), _rep(0.6, clean=False, score=-0.22), _rep(0.8)]
    s = jt.summarise(reps)
    # mean 0.6; sd (ddof 1) of 0.4, 0.6, 0.8 is 0.2, so the standard error is 0.2 / sqrt(3)
    assert s["0.5_inside"] == (pytest.approx(0.6), pytest.approx(0.2 / np.sqrt(3)))
    assert s["0.5_all"][0] == pytest.approx(0.5)
    assert (s["reps"], s["clean"]) == (3, 2)
    assert s["log_score"] == pytest.approx(-0.62 / 3)
    assert s["sampling_seconds"] == (30.0, 45.0)
    study = {"meta": {"command": "python bench/joint_truth.py --reps 3", "date": "2026-12-07",
                      "commit": "abc1234", "machine": "Linux x86_64, 2 cores"},
             "reps": reps}  # fmt: skip
    cells = "3 | 2 | 60 % (12) [50 %] | 60 % (12) [50 %] | 60 % (12) [50 %] |"
    row = f"| linear | 1,000 | defaults | {cells}"
    assert row in jt.render([study])
    assert "| 30-45 | - |" in jt.render([study])  # no components recorded in these reps
    # a study run with --set names its design in the row (sorted by name), and only there
    varied = {
        **study,
        "meta": {**study["meta"], "settings": {"MAX_CENTRES": 240, "CENTRES_PER_DIM": 80}},
    }
    both = jt.render([study, varied])
    assert f"| linear | 1,000 | `CENTRES_PER_DIM=80`, `MAX_CENTRES=240` | {cells}" in both
    assert row in both
    path = tmp_path / "study.json"
    path.write_text(json.dumps(study))
    assert jt.main(["--render", str(path)]) == 0  # prints, writes nothing without --write
    assert row in capsys.readouterr().out
    with pytest.raises(ValueError, match="at least one repetition"):
        jt.summarise([])


def test_compare_pairs_repetitions_by_hand(bench_import, capsys, tmp_path):
    """Base reps 0-2, other reps 1-3: the shared reps 1 and 2; log-score differences
    -0.19 - (-0.2) = +0.01 and -0.23 - (-0.2) = -0.03 (mean -0.01, sd 0.02 sqrt(2),
    standard error 0.02), one better."""
    jt = bench_import("joint_truth")
    base = [{**_rep(c), "rep": k} for k, c in enumerate((0.4, 0.6, 0.8))]
    other = [{**_rep(c, score=s), "rep": k + 1}
             for k, (c, s) in enumerate(((0.5, -0.19), (0.7, -0.23), (0.9, -0.2)))]  # fmt: skip
    meta = {"command": "x", "date": "2026-12-08", "commit": "abc", "machine": "m"}
    c = jt.compare({"meta": meta, "reps": base}, {"meta": meta, "reps": other})
    assert c["reps"] == [1, 2] and c["better"] == 1
    assert c["log_score_diff"] == [pytest.approx(0.01), pytest.approx(-0.03)]
    assert c["mean_diff"] == (pytest.approx(-0.01), pytest.approx(0.02))
    assert c["base"]["0.5_inside"][0] == pytest.approx(0.7)  # reps 1 and 2 only
    assert c["other"]["0.5_inside"][0] == pytest.approx(0.6)
    ref = [jt.reference_coverage("linear", 1000, k)["0.5"] for k in (1, 2)]
    assert c["base"]["reference"]["0.5"] == pytest.approx(np.mean(ref))
    gap = np.array([0.6, 0.8]) - ref  # reps 1 and 2 of the base: 0.6 and 0.8
    assert c["base"]["reference_gap"]["0.5"] == (
        pytest.approx(gap.mean()),
        pytest.approx(gap.std(ddof=1) / np.sqrt(2)),
    )
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, reps in zip(paths, (base, other), strict=True):
        path.write_text(json.dumps({"meta": meta, "reps": reps}))
    assert jt.main(["--compare", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert "mean -0.0100 (SE 0.0200); better in 1 of 2" in out
    assert "base (defaults): 70 %" in out
    with pytest.raises(ValueError, match="repetitions both studies ran"):
        jt.compare({"meta": meta, "reps": base[:1]}, {"meta": meta, "reps": other[1:]})
    quad = [{**r, "truth": "quadratic"} for r in other]
    with pytest.raises(ValueError, match="one truth"):
        jt.compare({"meta": meta, "reps": base}, {"meta": meta, "reps": quad})
    paths[1].write_text(json.dumps({"meta": meta, "reps": quad}))
    with pytest.raises(SystemExit):
        jt.main(["--compare", *map(str, paths)])
    assert "--compare: compare needs two studies of one truth" in capsys.readouterr().err


def test_the_right_model_reference_by_hand_and_by_simulation(bench_import):
    """features by hand; reference_fit's maximum likelihood against scikit-learn's
    (unpenalised) and its covariance against the Fisher information by hand; and over 60
    repetitions at n = 2,000 on the linear truth (the right model) its Wald bands cover
    within three standard errors (across repetitions) of nominal."""
    from sklearn.linear_model import LogisticRegression

    jt = bench_import("joint_truth")
    y = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]])
    np.testing.assert_array_equal(jt.features("linear", y), [[1, 1, 2, -1], [1, 0.5, 0, 3]])
    np.testing.assert_array_equal(
        jt.features("quadratic", y), [[1, 1, 2, -1, 1, 4, 1], [1, 0.5, 0, 3, 0.25, 0, 9]]
    )
    rng = np.random.default_rng(3)
    cls, scores = jt.draw("quadratic", 1500, rng)
    x = jt.features("quadratic", scores)
    b, cov = jt.reference_fit(x, cls)
    sk = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-10, max_iter=10_000)
    np.testing.assert_allclose(b, sk.fit(x, cls).coef_[0], rtol=1e-4, atol=1e-4)
    p = 1 / (1 + np.exp(-x @ b))
    info = sum(pi * (1 - pi) * np.outer(xi, xi) for pi, xi in zip(p, x, strict=True))
    np.testing.assert_allclose(cov, np.linalg.inv(info), rtol=1e-8)
    runs = np.array([list(jt.reference_coverage("linear", 2000, rep).values())
                     for rep in range(60)])  # fmt: skip
    se = runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    assert (np.abs(runs.mean(axis=0) - np.array(jt.LEVELS)) < 3 * se).all()
