"""The R bridge: real R code through rpy2, every number checked against the Python API."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import yieldwise as yw
from yieldwise.datasets import load_digits_binary

SCREENING = (
    "yw_utility_matrix(matrix(c(0, -1, -10, 5), 2), c('pass', 'check'), c('other', 'eight'))"
)
# the bridge's plumbing (R <-> Python equality) runs on the Laplace approximation: seconds
FAST = "chains = 2, warmup = 200, draws = 200, backend = 'laplace'"


@pytest.fixture(scope="module")
def digits(r_session):
    """360 shipped calibration items in R, label a factor with levels other, eight."""
    from yieldwise.rbridge import write_rds

    frame = load_digits_binary().iloc[::3].reset_index(drop=True)
    frame["label"] = pd.Categorical(frame["label"], categories=["other", "eight"])
    path = Path(r_session("tempfile(fileext = '.rds')")[0])
    write_rds(frame, path)
    r_session(f"digits <- readRDS('{path}')")
    return frame


@pytest.fixture(scope="module")
def fits(r_session, digits):
    """Two transducers fitted from R (small, seeded)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r_session(f"""suppressWarnings({{
            forest <- yw_fit(digits, 'label', 'forest_votes', {FAST}, seed = 1)
            net <- yw_fit(digits, 'label', c('net_logit_other', 'net_logit_eight'), {FAST},
                          seed = 2)
        }})""")
    from yieldwise.rbridge import _handles

    return {name: _handles[r_session(f"{name}$key")[0]] for name in ("forest", "net")}


# ------------------------------------------------------------------ matrices, labels
def test_utility_matrix_keeps_dimnames(r_session):
    r = r_session
    r(f"U <- {SCREENING}")
    assert list(r("dimnames(U)$decision")) == ["pass", "check"]
    assert list(r("dimnames(U)$class")) == ["other", "eight"]
    assert list(r("names(dimnames(U))")) == ["decision", "class"]
    # column-major R input, row-major meaning: U["pass", "eight"] is -10
    assert r("U['pass', 'eight']")[0] == -10 and r("U['check', 'other']")[0] == -1
    # rownames/colnames are the defaults of decisions/classes
    r("V <- matrix(c(1, 0, 0, 1), 2, dimnames = list(c('a', 'b'), c('x', 'y')))")
    assert list(r("rownames(yw_utility_matrix(V))")) == ["a", "b"]


def test_confusion_yield_and_metrics_equal_python(r_session, r_py):
    r = r_session
    truth = ["ill", "ill", "healthy", "healthy", "healthy", "ill", "healthy"]
    said = ["ill", "healthy", "healthy", "ill", "healthy", "ill", "healthy"]
    r(f"truth <- factor(c{tuple(truth)}, levels = c('healthy', 'ill'))")
    r(f"said <- factor(c{tuple(said)}, levels = c('healthy', 'ill'))")
    r("C <- yw_confusion(truth, said)")
    cm = yw.ConfusionMatrix.from_labels(
        truth, said, classes=["healthy", "ill"], decisions_set=["healthy", "ill"]
    )
    np.testing.assert_array_equal(np.asarray(r("C")), cm.counts)
    # factor levels give the order, not the alphabet or the first occurrence
    assert list(r("colnames(C)")) == ["healthy", "ill"] == list(cm.classes)
    # decisions without levels follow the classes when they share labels (theory: decision
    # k = "choose class k"), so the matrix stays square and aligned
    aligned = "yw_confusion(factor(c('b', 'a'), levels = c('b', 'a')), c('a', 'b'))"
    assert list(r(f"rownames({aligned})")) == ["b", "a"]
    r(
        "U <- yw_utility_matrix(matrix(c(0, -1, -10, 5), 2), "
        "c('healthy', 'ill'), c('healthy', 'ill'))"
    )
    u = yw.UtilityMatrix(
        [[0, -10], [-1, 5]], decisions=["healthy", "ill"], classes=["healthy", "ill"]
    )
    # by hand: counts [[3, 1], [1, 2]] -> (0*3 - 10*1 - 1*1 + 5*2) / 7 = -1/7
    assert r("yw_yield(C, U)")[0] == pytest.approx(-1 / 7, abs=1e-15)
    assert yw.utility_yield(cm, u) == pytest.approx(-1 / 7, abs=1e-15)
    table = r_py(r, "yw_metrics(C, positive = 'ill')").set_index("metric")
    assert table.loc["accuracy", "value"] == pytest.approx(5 / 7)
    assert table.loc["f1", "value"] == pytest.approx(yw.metrics.f1(cm, positive="ill"))
    assert table.loc["matthews", "value"] == pytest.approx(yw.metrics.matthews(cm))
    assert table.loc["recall", "value"] == pytest.approx(2 / 3)  # 2 of 3 ill found
    assert not table.loc["f1", "admissible"] and table.loc["accuracy", "admissible"]


def test_audit_equals_python(r_session, r_py):
    table = r_py(
        r_session,
        "yw_audit(metrics = c('accuracy', 'f1'), error_sd = c(0, 0.1), n_pairs = 5000, seed = 3)",
    )
    expected = yw.audit.rank_disagreement(
        metrics=["accuracy", "f1"], error_sd=[0, 0.1], n_pairs=5000, seed=3
    )
    np.testing.assert_allclose(table["fraction_wrong"], expected["fraction_wrong"], rtol=0, atol=0)
    assert list(table["metric"]) == list(expected["metric"])


def test_decide_on_probabilities(r_session):
    r = r_session
    r(f"U <- {SCREENING}")
    chosen = r(
        "yw_decide(matrix(c(0.95, 0.9, 0.05, 0.1), 2, "
        "dimnames = list(NULL, c('other', 'eight'))), utility = U)"
    )
    # threshold 1/16: P(eight) 0.05 -> pass, 0.1 -> check
    assert list(r["as.character"](chosen)) == ["pass", "check"]
    assert list(r["levels"](chosen)) == ["pass", "check"]


# ------------------------------------------------------------------ errors
def test_python_errors_arrive_as_yieldwise_errors(r_session, r_error):
    classes, message = r_error(
        r_session, "yw_utility_matrix(matrix(1:6, 2), classes = c('a', 'b'))"
    )
    assert classes[:2] == ["yieldwise_error", "error"]
    with pytest.raises(ValueError) as python:
        yw.UtilityMatrix(np.arange(1, 7).reshape(3, 2).T, classes=["a", "b"])
    assert message == str(python.value)  # the same message as in Python
    classes, message = r_error(r_session, "yw_help('yw_nothing')")
    assert "yieldwise_error" in classes and "no help for 'yw_nothing'" in message


def test_missing_values_are_reported_by_column_and_row(r_session, digits, r_error):
    r = r_session
    r("holey <- digits; holey$forest_votes[c(3, 8)] <- NA")
    classes, message = r_error(r, "yw_fit(holey, 'label', 'forest_votes')")
    assert "yieldwise_error" in classes
    assert message == (
        "'data' column 'forest_votes' has 2 missing value(s) (NA), in row(s) "
        "3, 8; remove or impute them first"
    )
    r("holey <- digits; holey$label[5] <- NA")
    _, message = r_error(r, "yw_fit(holey, 'label', 'forest_votes')")
    assert "column 'label' has 1 missing value(s) (NA), in row(s) 5" in message
    _, message = r_error(r, "yw_fit(digits, 'label', 'votes')")
    assert "'data' has no column(s) 'votes'" in message
    _, message = r_error(r, "yw_confusion(c('a', NA), c('a', 'b'))")
    assert message.startswith("'truth' has 1 missing value(s) (NA), in row(s) 2")
    # a matrix without dimnames: said in R's terms (it reached Python as "utility matrix
    # 0 has classes [0, 1]", the default labels)
    classes, message = r_error(r, "yw_yield(matrix(c(1, 0, 0, 1), 2), matrix(c(1, 0, 0, 1), 2))")
    assert "yieldwise_error" in classes
    assert message.startswith("'confusion' must name its columns (the classes) and rows")
    assert "yw_utility_matrix(values, decisions, classes)" in message


# ------------------------------------------------------------------ transducers
def test_predict_and_decide_equal_python(r_session, fits, digits, r_py):
    r = r_session
    forest = fits["forest"]
    long = r_py(r, "yw_predict(forest, digits[1:5, ], prob = 0.9)")
    band = forest.predict_interval(digits[["forest_votes"]].iloc[:5], prob=0.9)
    assert list(long["class"].cat.categories) == ["other", "eight"]
    np.testing.assert_allclose(long["probability"].to_numpy().reshape(5, 2), band["mean"].values)
    np.testing.assert_allclose(long["lower"].to_numpy().reshape(5, 2), band["lower"].values)
    np.testing.assert_allclose(long["upper"].to_numpy().reshape(5, 2), band["upper"].values)
    assert list(long["item"][:4]) == [1, 1, 2, 2]
    r(f"U <- {SCREENING}")
    chosen = list(r("as.character(yw_decide(forest, digits, U))"))
    u = yw.UtilityMatrix(
        [[0, -10], [-1, 5]], decisions=["pass", "check"], classes=["other", "eight"]
    )
    assert chosen == list(forest.decide(digits[["forest_votes"]], u))


def test_long_run_utility_draws(r_session, fits, r_py):
    r = r_session
    r(f"U <- {SCREENING}")
    draws = r_py(r, "as.data.frame(yw_long_run_utility(net, U))")
    u = yw.UtilityMatrix(
        [[0, -10], [-1, 5]], decisions=["pass", "check"], classes=["other", "eight"]
    )
    expected = yw.long_run_utility(fits["net"], u)
    np.testing.assert_allclose(draws["long_run_utility"], expected.values.ravel())
    assert list(draws[".chain"][[0, 199, 200]]) == [1, 1, 2]
    assert list(draws[".iteration"][[0, 199, 200]]) == [1, 200, 1]
    assert list(draws[".draw"][[0, 399]]) == [1, 400]
    has_posterior = r("isTRUE(requireNamespace('posterior', quietly = TRUE))")[0]
    # tools/system-deps.sh installs r-cran-posterior; CI must exercise draws_df
    assert has_posterior or os.environ.get("CI") != "true"
    if has_posterior:
        r("lr <- yw_long_run_utility(net, U)")
        assert "draws_df" in list(r("class(lr)"))
        summary = r_py(r, "as.data.frame(posterior::summarise_draws(lr))")
        assert summary["mean"][0] == pytest.approx(expected.values.mean())
        assert summary["variable"][0] == "long_run_utility"
    has_bayesplot = r("isTRUE(requireNamespace('bayesplot', quietly = TRUE))")[0]
    assert has_bayesplot or os.environ.get("CI") != "true"
    if has_posterior and has_bayesplot:
        # bayesplot reads the draws_df directly: its interval data match the draws
        intervals = r_py(r, "as.data.frame(bayesplot::mcmc_intervals_data(lr, prob_outer = 0.9))")
        assert intervals["m"][0] == pytest.approx(np.median(expected.values))
        assert intervals["ll"][0] == pytest.approx(np.quantile(expected.values, 0.05))


def test_fit_then_compare_round_trip_on_shipped_data(r_session, fits, r_py):
    r = r_session
    r(f"U <- {SCREENING}")
    r("A <- yw_utility_matrix(diag(2), c('pass', 'check'), c('other', 'eight'))")
    r("cmp <- yw_compare(list(forest = forest, net = net), list(screening = U, accuracy = A))")
    assert list(r("names(cmp)")) == ["summary", "superiority", "prob_best", "draws"]
    u = yw.UtilityMatrix(
        [[0, -10], [-1, 5]], decisions=["pass", "check"], classes=["other", "eight"]
    )
    a = yw.UtilityMatrix(np.eye(2), decisions=["pass", "check"], classes=["other", "eight"])
    comparison = yw.compare(fits, {"screening": u, "accuracy": a})
    summary = r_py(r, "cmp$summary")
    expected = comparison.summary()
    np.testing.assert_allclose(summary["mean"], expected["mean"])
    np.testing.assert_allclose(summary["prob_best"], expected["prob_best"])
    superiority = np.asarray(r("cmp$superiority$screening"))
    np.testing.assert_allclose(superiority, comparison.prob_superiority(matrix="screening").values)
    assert list(r("dimnames(cmp$superiority$screening)$versus")) == ["forest", "net"]
    draws = r_py(r, "as.data.frame(cmp$draws)")
    np.testing.assert_allclose(
        draws["net[accuracy]"], comparison.utilities["net"].sel(matrix="accuracy").values.ravel()
    )


def test_save_and_load(r_session, fits, digits, tmp_path, r_py):
    r = r_session
    path = tmp_path / "forest.nc"
    r(f"yw_save(forest, '{path}'); again <- yw_load('{path}')")
    np.testing.assert_array_equal(
        r_py(r, "yw_predict(again, digits)")["probability"],
        r_py(r, "yw_predict(forest, digits)")["probability"],
    )
    reloaded = yw.Transducer.load(path)
    np.testing.assert_array_equal(
        reloaded.predict_proba(digits[["forest_votes"]]),
        fits["forest"].predict_proba(digits[["forest_votes"]]),
    )
    assert "Transducer(" in "".join(r("capture.output(print(again))"))


def test_every_function_has_help_with_its_signature(r_session):
    from yieldwise.rbridge import R_FUNCTIONS

    for name in R_FUNCTIONS:
        text = r_session(f"paste(capture.output(yw_help('{name}')), collapse = '\\n')")[0]
        formals = list(r_session(f"names(formals({name}))") or [])
        assert text.startswith(name) and "Usage:" in text, name
        for argument in formals:
            assert argument in text, (name, argument)
    assert "chains = 4" in r_session("paste(capture.output(yw_help('yw_fit')), collapse = ' ')")[0]


# ------------------------------------------------------------------ rds, scripts
def test_rds_round_trip_keeps_factors_and_dimnames(r_session, tmp_path):
    from yieldwise.rbridge import read_rds, write_rds

    frame = pd.DataFrame(
        {"score": [0.1, 0.7, 0.4], "truth": pd.Categorical(["b", "a", "b"], categories=["b", "a"])}
    )
    write_rds(
        {
            "frame": frame,
            "U": yw.UtilityMatrix([[1, 0], [-2, 3]], decisions=["x", "y"], classes=["b", "a"]),
        },
        tmp_path / "o.rds",
    )
    r_session(f"o <- readRDS('{tmp_path / 'o.rds'}')")
    assert list(r_session("levels(o$frame$truth)")) == ["b", "a"]
    assert r_session("o$U['y', 'a']")[0] == 3
    back = read_rds(tmp_path / "o.rds")
    assert list(back["frame"]["truth"].cat.categories) == ["b", "a"]
    assert list(back["frame"]["truth"]) == ["b", "a", "b"]
    np.testing.assert_array_equal(back["U"], [[1, 0], [-2, 3]])
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_rds(tmp_path / "none.rds")


def test_yieldwise_r_runs_a_script(r_session, tmp_path):
    script = tmp_path / "job.R"
    script.write_text(
        "args <- commandArgs(trailingOnly = TRUE)\n"
        "U <- yw_utility_matrix(matrix(c(0, -1, -10, 5), 2), c('pass', 'check'), args)\n"
        "C <- yw_confusion(factor(c(args[1], args[2]), levels = args), c('pass', 'check'))\n"
        "cat('yield', yw_yield(C, U), '\\n')\n"
    )
    cli = Path(sys.executable).with_name("yieldwise")
    run = subprocess.run(
        [str(cli), "r", str(script), "other", "eight"], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    # pass/other once (0) and check/eight once (5): (0 + 5) / 2
    assert "yield 2.5" in run.stdout
    script.write_text("yw_utility_matrix(matrix(1:6, 2), classes = c('a', 'b'))\n")
    failed = subprocess.run(
        [str(cli), "r", str(script)], capture_output=True, text=True, timeout=300
    )
    assert failed.returncode == 1 and "classes must have 3 labels" in failed.stderr
    missing = subprocess.run(
        [str(cli), "r", str(tmp_path / "none.R")], capture_output=True, text=True, timeout=300
    )
    assert missing.returncode == 2 and "no such R script" in missing.stderr


def test_report_from_r(r_session, tmp_path, r_error):
    """yw_report on the shipped configuration, with fewer draws."""
    from yieldwise.datasets import data_file

    out = tmp_path / "out"
    folder = r_session(
        f"folder <- suppressWarnings(yw_report('{data_file('digits_report.toml')}', '{out}', "
        "chains = 2, warmup = 150, draws = 150, quiet = TRUE, backend = 'laplace')); folder"
    )[0]
    assert Path(folder) == out and (out / "report.html").exists()
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 4 and np.allclose(summary.groupby("matrix")["prob_best"].sum(), 1)
    _, message = r_error(r_session, f"yw_report('{data_file('digits_report.toml')}', '{out}')")
    assert "exists already" in message  # no silent replacement, from R either


def test_python_warnings_become_r_warnings_and_handles_are_released(r_session, digits):
    from yieldwise.rbridge import _handles

    r = r_session
    warned = r(
        "warned <- character(); withCallingHandlers("
        "short <- yw_fit(digits, 'label', 'forest_votes', n_components = 3, chains = 2, "
        "warmup = 60, draws = 40, seed = 9), warning = function(w) {"
        "warned <<- c(warned, conditionMessage(w)); invokeRestart('muffleWarning')}); warned"
    )
    # 2 x 40 draws cannot reach bulk ESS 400: the sampler's diagnostics warning, in R
    assert any("bulk ESS" in w for w in warned), list(warned)
    key = r("short$key")[0]
    assert key in _handles
    r("rm(short); invisible(gc())")
    assert key not in _handles  # R's finalizer released the Python object


def test_the_documented_r_example_runs(r_session, tmp_path, r_py):
    """docs/r.md's complete example, on the shipped data, with fewer draws."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "r.md").read_text()
    example = docs.split("## A complete example")[1].split("```r")[1].split("```")[0]
    fewer = "chains = 2, warmup = 150, draws = 150, backend = 'laplace')"
    example = example.replace("seed = 1)", "seed = 1, " + fewer)
    example = example.replace("seed = 2)", "seed = 2, " + fewer)
    assert example.count("draws = 150") == 2
    load_digits_binary().to_csv(tmp_path / "calibration.csv", index=False)
    r_session(f"setwd('{tmp_path}')")
    try:
        r_session(f"suppressWarnings({{\n{example}\n}})")
        summary = r_py(r_session, "result$summary")
    finally:
        r_session(f"setwd('{Path.cwd()}')")
    assert list(summary["classifier"]) == ["forest", "net"]
    assert summary["prob_best"].sum() == pytest.approx(1.0)


def test_python_children_still_start_after_r(r_session):
    """R's start-up prepends the system's library folders to LD_LIBRARY_PATH; a Python
    child (a process pool, a Dask worker, PyStan's build) would then load the system's
    libpython and fail to import ssl. The bridge restores the variable."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", "import ssl, distributed"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "/usr/lib/R/lib" not in os.environ.get("LD_LIBRARY_PATH", "")


def test_kernel_tail_cut_reaches_the_transducer_from_r(r_session, digits, r_error):
    """yw_fit(kernel_tail_cut = 0) keeps every kernel value (the remedy the fit's warning
    names); the default is Python's; a bad value is a yieldwise_error naming it."""
    from yieldwise.rbridge import _handles
    from yieldwise.transducer.io import fit_record

    r = r_session
    cols = "c('net_logit_other', 'net_logit_eight')"
    for cut, sparse in (("0", False), ("1e-15", True)):
        key = r(
            f"yw_fit(digits, 'label', {cols}, backend = 'laplace', draws = 100, seed = 3, "
            f"kernel_tail_cut = {cut})$key"
        )[0]
        transducer = _handles[key]
        assert transducer.get_params()["kernel_tail_cut"] == float(cut)
        assert fit_record(transducer.posterior_)["sampler"]["likelihood"]["sparse"] is sparse
    for given, expected in (("NULL", None), ("0.5", 0.5), ('"auto"', "auto")):
        key = r(
            f"yw_fit(digits, 'label', {cols}, backend = 'laplace', draws = 100, seed = 3, "
            f"likelihood_bins = {given})$key"
        )[0]
        assert _handles[key].get_params()["likelihood_bins"] == expected
    binned = fit_record(_handles[key].posterior_)["sampler"]["likelihood"]
    assert "binned_ess_share" not in binned  # 1,079 items: below the rows that bin
    classes, message = r_error(r, f"yw_fit(digits, 'label', {cols}, likelihood_bins = 'all')")
    assert "yieldwise_error" in classes and "likelihood_bins must be" in message
    classes, message = r_error(r, f"yw_fit(digits, 'label', {cols}, kernel_tail_cut = -1)")
    assert "yieldwise_error" in classes
    assert "kernel_tail_cut must be a number in [0, 1e-6]" in message


def test_class_reduction_reaches_the_transducer_from_r(r_session, digits, r_error):
    """yw_fit(class_reduction = ...) sets the Python argument: "ranks" reduces the ten-class
    digits (the default "auto" too), NULL never reduces; predictions come back per class and
    sum to one; a bad value is a yieldwise_error naming it."""
    from yieldwise.datasets import load_digits_ten
    from yieldwise.rbridge import _handles, write_rds

    r = r_session
    frame = load_digits_ten().iloc[::2].reset_index(drop=True)
    path = Path(r("tempfile(fileext = '.rds')")[0])
    write_rds(frame, path)
    r(f"ten <- readRDS('{path}')")
    cols = "c(" + ", ".join(f"'{c}'" for c in frame.columns if c.startswith("p_")) + ")"
    fits = {}
    for setting in ("'auto'", "'ranks'"):
        key = r(f"yw_fit(ten, 'label', {cols}, backend = 'laplace', draws = 100, seed = 3, "
                f"class_reduction = {setting})$key")[0]  # fmt: skip
        fits[setting] = _handles[key]
        assert fits[setting].reduction_ is not None
        assert fits[setting].get_params()["class_reduction"] == setting.strip("'")
    r(f"t10 <- yw_fit(ten, 'label', {cols}, backend = 'laplace', draws = 100, seed = 3)")
    r("p10 <- yw_predict(t10, ten[1:4, ])")
    assert set(r("as.character(p10$class)")) == set(frame["label"].cat.categories)
    np.testing.assert_allclose(np.asarray(r("tapply(p10$probability, p10$item, sum)")), 1.0)
    # NULL: no reduction (on the binary digits, where "auto" would not reduce either)
    logits = "c('net_logit_other', 'net_logit_eight')"
    key = r(f"yw_fit(digits, 'label', {logits}, backend = 'laplace', draws = 100, seed = 3, "
            "class_reduction = NULL)$key")[0]  # fmt: skip
    assert _handles[key].get_params()["class_reduction"] is None
    classes, message = r_error(r, f"yw_fit(ten, 'label', {cols}, class_reduction = 'top2')")
    assert "yieldwise_error" in classes
    assert 'class_reduction must be "auto", "ranks" or None' in message
