"""The R bridge's fixes from the API audit (FINDINGS.md A1, A2, A4, A5, A10, B1-B3, B8, B9).

Each test fails on the code before the fix; the expected values are hand-computed, or the
Python API's own answer on the same data.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import yieldwise as yw

SCREENING = (
    "yw_utility_matrix(matrix(c(0, -1, -10, 5), 2), c('pass', 'check'), c('other', 'eight'))"
)
SCREENING_PY = yw.UtilityMatrix(
    [[0, -10], [-1, 5]], decisions=["pass", "check"], classes=["other", "eight"]
)


def r_warnings(r, expression):
    """(value, warning messages) of ``expression`` in R."""
    result = r(
        "local({warned <- character(); value <- withCallingHandlers("
        f"{expression}, warning = function(w) {{warned <<- c(warned, conditionMessage(w)); "
        "invokeRestart('muffleWarning')}); list(value, warned)})"
    )
    return result[0], list(result[1])


def rds(r, tmp_path, expression):
    """``expression`` saved by R and read back with read_rds."""
    from yieldwise.rbridge import read_rds

    path = tmp_path / "x.rds"
    r(f"saveRDS({expression}, '{path}')")
    return read_rds(path)


# ------------------------------------------------------------------ A1
def test_a1_probability_matrix_columns_are_matched_by_name(r_session, r_error):
    r = r_session
    r(f"U <- {SCREENING}")
    # P(eight) = 0.05, 0.1, 0.5 for three items; threshold 1/16 (by hand: 0*(1-p) - 10p
    # against -1*(1-p) + 5p): pass, check, check, whatever the order of the columns
    expected = ["pass", "check", "check"]
    eight, other = "c(0.05, 0.1, 0.5)", "c(0.95, 0.9, 0.5)"
    for order, columns in (("other", f"{other}, {eight}"), ("eight", f"{eight}, {other}")):
        names = "c('other', 'eight')" if order == "other" else "c('eight', 'other')"
        chosen = r(
            f"as.character(yw_decide(matrix(c({columns}), 3, "
            f"dimnames = list(NULL, {names})), utility = U))"
        )
        assert list(chosen) == expected, order
    # the Python API on the same (reordered) DataFrame agrees
    frame = pd.DataFrame({"eight": [0.05, 0.1, 0.5], "other": [0.95, 0.9, 0.5]})
    assert list(yw.decide(frame, SCREENING_PY)) == expected
    # unknown, missing, duplicated and absent column names are refused
    classes, message = r_error(
        r, "yw_decide(matrix(c(0.05, 0.95), 1, dimnames = list(NULL, c('x', 'y'))), utility = U)"
    )
    assert "yieldwise_error" in classes
    assert "'probabilities' has columns ['x', 'y'], but the utility matrix has classes" in message
    _, message = r_error(r, "yw_decide(matrix(c(0.05, 0.95), 1), utility = U)")
    assert message.startswith("'probabilities' (the first argument) must name its columns")
    assert 'colnames(probabilities) <- c("other", "eight")' in message
    _, message = r_error(
        r,
        "yw_decide(matrix(c(0.5, 0.5), 1, dimnames = list(NULL, c('eight', 'eight'))), "
        "utility = U)",
    )
    assert "duplicated column names ['eight']" in message
    _, message = r_error(
        r,
        "yw_decide(matrix(c(0.1, 0.8, 0.1), 1, dimnames = list(NULL, "
        "c('eight', 'other', 'x'))), utility = U)",
    )
    assert "has columns ['eight', 'other', 'x']" in message


# ------------------------------------------------------------------ A2
def test_a2_numeric_labels_keep_r_order_in_confusion_matrices(r_session, r_error):
    r = r_session
    # R's numeric order, not the strings' "1" < "10" < "2"
    assert list(r("colnames(yw_confusion(c(1, 2, 10), c(1, 2, 10)))")) == ["1", "2", "10"]
    assert list(r("rownames(yw_confusion(c(1, 2, 10), c(1, 2, 10)))")) == ["1", "2", "10"]
    assert list(r("colnames(yw_confusion(c(10L, 2L, 1L), c(1L, 1L, 1L)))")) == ["1", "2", "10"]
    # decisions that are not classes, numbers: R's order too
    assert list(r("rownames(yw_confusion(c(1, 2, 10), c(5, 20, 100)))")) == ["5", "20", "100"]
    assert list(r("colnames(yw_confusion(c(TRUE, FALSE), c(TRUE, TRUE)))")) == ["FALSE", "TRUE"]
    # decisions that are classes stay aligned with them (a square matrix)
    counts = np.asarray(r("yw_confusion(c(1, 2, 10), c(1, 1, 1))"))
    np.testing.assert_array_equal(counts, [[1, 1, 1], [0, 0, 0], [0, 0, 0]])
    # numbers that print alike would merge two classes: refused
    _, message = r_error(r, "yw_confusion(c(0.1 + 0.2, 0.3), c(1, 2))")
    assert "'truth' holds distinct numbers that print as the same label (0.3)" in message


def test_a2_numeric_labels_pair_class_columns_with_their_classes(r_session, tmp_path):
    """A probability vector per class (columns for classes 1, 2, 10) and integer labels:
    the R fit reads its columns in the classes' numeric order, as Python's fit does."""
    from yieldwise.rbridge import _handles, write_rds

    rng = np.random.default_rng(3)
    n = 150
    labels = rng.choice([1, 2, 10], size=n)
    scores = rng.normal(size=(n, 3))
    scores[np.arange(n), np.searchsorted([1, 2, 10], labels)] += 3.0
    probabilities = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    frame = pd.DataFrame(probabilities, columns=["p_a", "p_b", "p_c"])
    frame["label"] = labels
    write_rds(frame, tmp_path / "three.rds")
    r = r_session
    r(f"three <- readRDS('{tmp_path / 'three.rds'}')")
    assert r("typeof(three$label)")[0] == "integer"
    settings = {"backend": "laplace", "chains": 1, "draws": 100, "seed": 1, "progress": False}
    key = r(
        "suppressWarnings(yw_fit(three, 'label', c('p_a', 'p_b', 'p_c'), backend = 'laplace', "
        "chains = 1, draws = 100, seed = 1))$key"
    )[0]
    from_r = _handles[key]
    assert from_r.classes_ == ("1", "2", "10")  # was ('1', '10', '2')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_python = yw.Transducer(**settings).fit(frame[["p_a", "p_b", "p_c"]], labels)
    assert from_python.classes_ == (1, 2, 10)
    outputs = frame[["p_a", "p_b", "p_c"]]
    np.testing.assert_allclose(
        from_r.predict_proba(outputs), from_python.predict_proba(outputs), rtol=1e-10
    )
    # and the probabilities name the right classes: argmax recovers the labels
    argmax = np.array([1, 2, 10])[from_r.predict_proba(outputs).argmax(axis=1)]
    assert (argmax == labels).mean() > 0.9


# ------------------------------------------------------------------ A4
def test_a4_read_rds_keeps_missing_values_missing(r_session, tmp_path):
    r = r_session
    integers = rds(r, tmp_path, "c(1L, NA, 3L)")
    assert list(pd.isna(integers)) == [False, True, False]
    assert integers[0] == 1 and integers[2] == 3 and -(2**31) not in list(integers.dropna())
    logicals = rds(r, tmp_path, "c(TRUE, FALSE)")
    assert logicals.dtype == bool and logicals.tolist() == [True, False]  # was int32 1, 0
    with_na = rds(r, tmp_path, "c(TRUE, NA, FALSE)")
    assert list(pd.isna(with_na)) == [False, True, False]
    assert bool(with_na[0]) is True and bool(with_na[2]) is False
    text = rds(r, tmp_path, "c('a', NA)")
    assert text[0] == "a" and text[1] is None
    factor = rds(r, tmp_path, "factor(c('b', NA, 'a'), levels = c('b', 'a', 'z'))")
    assert list(factor.categories) == ["b", "a", "z"]  # the levels, unused ones too
    assert list(pd.isna(factor)) == [False, True, False] and factor[0] == "b"
    frame = rds(
        r,
        tmp_path,
        "data.frame(n = c(1L, NA), s = c('a', NA), l = c(TRUE, NA), b = c(TRUE, FALSE), "
        "d = c(1.5, NA))",
    )
    assert frame.isna().to_numpy().tolist() == [[False] * 5, [True, True, True, False, True]]
    assert frame["n"][0] == 1 and frame["s"][0] == "a" and bool(frame["l"][0]) is True
    assert frame["b"].dtype == bool and frame["b"].tolist() == [True, False]
    assert "NA_character_" not in frame["s"].astype(str).tolist()
    matrix = rds(r, tmp_path, "matrix(c(1L, NA, 3L, 4L), 2)")
    assert np.isnan(matrix[1, 0]) and matrix[0, 1] == 3  # column-major, NA as NaN
    named = rds(r, tmp_path, "c(a = 1L, b = NA)")
    assert named["a"] == 1 and pd.isna(named["b"])


def test_a4_duplicated_names_are_refused_not_dropped(r_session, tmp_path):
    for expression in ("c(a = 1, a = 2)", "list(a = 1, a = 2)"):
        with pytest.raises(ValueError, match=r"duplicated names \['a'\].*make.unique"):
            rds(r_session, tmp_path, expression)
    assert rds(r_session, tmp_path, "c(a = 1, b = 2)") == {"a": 1.0, "b": 2.0}


def test_a4_b2_missing_scalar_arguments_are_named(r_session, r_error):
    r = r_session
    r("d <- data.frame(y = rep(c('a', 'b'), 10), s = seq(-1, 1, length.out = 20))")
    cases = {
        "yw_fit(d, 'y', 's', backend = NA)": "backend must be text, found NA",
        "yw_fit(d, 'y', 's', backend = 'laplace', chains = NA)": "chains must be a whole number, "
        "found NA",
        "yw_fit(d, 'y', 's', backend = 'laplace', chains = Inf)": "chains must be a finite whole "
        "number, found inf",
        "yw_fit(d, 'y', 's', backend = 'laplace', draws = NA)": "draws must be a whole number, "
        "found NA",
        "yw_fit(d, 'y', 's', backend = 'laplace', seed = NA)": "seed must be a whole number, "
        "found NA",
        "yw_fit(d, 'y', 's', backend = 'laplace', n_components = NA)": "n_components must be a "
        "whole number, found NA",
        "yw_audit(metrics = 'accuracy', error_sd = 0, n_pairs = NA)": "n_pairs must be a whole "
        "number, found NA",
        "yw_audit(metrics = 'accuracy', error_sd = 0, n_pairs = Inf)": "n_pairs must be a finite "
        "whole number, found inf",
    }
    for expression, expected in cases.items():
        classes, message = r_error(r, expression)
        assert "yieldwise_error" in classes, expression
        assert message.startswith(expected), (expression, message)
        assert "2147483648" not in message and "cannot convert" not in message


def test_a4_missing_prevalences_are_refused_by_position(r_session, r_error):
    r = r_session
    r(f"U <- {SCREENING}")
    _, message = r_error(
        r,
        "yw_decide(structure(list(key = 'none'), class = 'yw_transducer'), data.frame(), U, "
        "prevalences = c(other = 1L, eight = NA))",
    )
    assert message.startswith("'prevalences' has a missing value (NA) at position(s) 2")


# ------------------------------------------------------------------ A5
def test_a5_missing_labels_are_refused_not_named_none(r_session, r_error):
    from yieldwise.rbridge import _strings

    r = r_session
    _, message = r_error(r, "yw_utility_matrix(diag(2), decisions = c('a', NA))")
    assert message.startswith("'decisions' has a missing value (NA) at position(s) 2")
    _, message = r_error(r, "yw_utility_matrix(diag(2), classes = c(NA, 'b'))")
    assert message.startswith("'classes' has a missing value (NA) at position(s) 1")
    _, message = r_error(r, "yw_confusion(c('a', 'b'), c('a', 'b'), classes = c('a', NA))")
    assert message.startswith("'classes' has a missing value (NA) at position(s) 2")
    _, message = r_error(
        r, "yw_confusion(c('a', 'b'), c('a', 'b'), decision_set = c(NA, 'a', 'b'))"
    )
    assert message.startswith("'decision_set' has a missing value (NA) at position(s) 1")
    r("d <- data.frame(y = rep(c('a', 'b'), 10), s = seq(-1, 1, length.out = 20))")
    _, message = r_error(r, "yw_fit(d, 'y', 's', backend = 'laplace', classes = c('a', NA))")
    assert message.startswith("'classes' has a missing value (NA) at position(s) 2")
    # a matrix whose dimnames hold NA reaches Python: refused there, naming it
    r("C <- yw_confusion(c('a', 'b'), c('a', 'b'))")
    r("V <- matrix(c(1, 0, 0, 1), 2, dimnames = list(c('a', NA), c('a', 'b')))")
    _, message = r_error(r, "yw_yield(C, V)")
    assert message.startswith(
        "'utility' row names (the decisions) has a missing value (NA) at position 2"
    )
    # the Python side itself never turns a missing label into the text "None"
    with pytest.raises(ValueError, match="decisions has a missing value"):
        _strings(np.array(["a", None], dtype=object), "decisions")
    with pytest.raises(ValueError, match="at position 1"):
        _strings(np.array([np.nan, 1.0]), "classes")


# ------------------------------------------------------------------ A10
def test_a10_write_rds_writes_vectors_and_missing_values(r_session, tmp_path):
    from yieldwise.rbridge import read_rds, write_rds

    r = r_session
    path = tmp_path / "w.rds"

    def written(obj, expression):
        write_rds(obj, path)
        return r(f"local({{o <- readRDS('{path}'); {expression}}})")

    # a string Series with a missing value: a character vector with NA (was a list)
    assert list(written(pd.Series(["a", None]), "c(typeof(o), is.na(o))")) == [
        "character",
        "FALSE",
        "TRUE",
    ]
    assert list(written(["a", None], "is.na(o)")) == [False, True]  # was NotImplementedError
    # a 1-D array is a vector, without a dim attribute (was class "array")
    assert list(written(np.array([1, 2]), "c(is.null(dim(o)), is.integer(o))")) == [True, True]
    assert list(written(np.array([0.5, 2.0]), "c(is.null(dim(o)), is.double(o))")) == [
        True,
        True,
    ]
    # the same number as a scalar and as a one-item array: the same R value
    write_rds(3, tmp_path / "a.rds")
    write_rds(np.array([3]), tmp_path / "b.rds")
    assert r(f"identical(readRDS('{tmp_path / 'a.rds'}'), readRDS('{tmp_path / 'b.rds'}'))")[0]
    # nullable integers and booleans keep NA
    assert list(written(pd.Series([1, None], dtype="Int64"), "c(typeof(o), is.na(o))")) == [
        "integer",
        "FALSE",
        "TRUE",
    ]
    assert list(written([True, None], "is.na(o)")) == [False, True]
    # a 2-D array is still a matrix (column-major)
    assert list(written(np.arange(6).reshape(2, 3), "c(dim(o), o[2, 1])")) == [2, 3, 3]
    # round trip of missing values through read_rds
    write_rds({"n": pd.Series([1, None], dtype="Int64"), "s": ["x", None]}, path)
    back = read_rds(path)
    assert list(pd.isna(back["n"])) == [False, True] and list(back["s"]) == ["x", None]
    # values with no R equivalent are a TypeError naming where they are
    with pytest.raises(TypeError, match=r"write_rds: obj\['x'\]\[0\] is a object"):
        write_rds({"x": [object()]}, path)
    with pytest.raises(TypeError, match=r"write_rds: obj\['t'\] holds values of types"):
        write_rds({"t": [1, "a"]}, path)
    with pytest.raises(ValueError, match=r"keys that are the same text \['1'\]"):
        write_rds({1: 2, "1": 3}, path)


# ------------------------------------------------------------------ B1
def test_b1_numeric_and_logical_labels_print_as_everywhere_else(r_session):
    r = r_session
    assert list(r("colnames(yw_utility_matrix(diag(2), classes = c(0, 1)))")) == ["0", "1"]
    assert list(r("colnames(yw_utility_matrix(diag(2), classes = c(TRUE, FALSE)))")) == [
        "TRUE",
        "FALSE",
    ]
    assert list(r("colnames(yw_utility_matrix(diag(2), classes = c(1e5, 2e5)))")) == list(
        r("colnames(yw_confusion(c(1e5, 2e5), c(1e5, 2e5)))")
    )
    # double labels now meet: both items decided right under the identity, yield 1
    assert r("yw_yield(yw_confusion(c(0, 1), c(0, 1)), yw_utility_matrix(diag(2), c(0, 1), "
             "c(0, 1)))")[0] == 1.0  # fmt: skip
    # a deciding mistake costs: truth (0, 1), decisions (0, 0): (1 + 0) / 2
    assert r("yw_yield(yw_confusion(c(0, 1), c(0, 0)), yw_utility_matrix(diag(2), c(0, 1), "
             "c(0, 1)))")[0] == 0.5  # fmt: skip


# ------------------------------------------------------------------ B3
def test_b3_a_matrix_without_row_names_is_refused(r_session, r_error):
    r = r_session
    r("C <- yw_confusion(c('a', 'b'), c('a', 'b'))")
    r("V <- matrix(c(1, 0, 0, 1), 2, dimnames = list(NULL, c('a', 'b')))")
    _, message = r_error(r, "yw_yield(C, V)")
    assert message.startswith("'utility' must name its columns (the classes) and rows")
    _, message = r_error(
        r, "yw_decide(matrix(c(0.5, 0.5), 1, dimnames = list(NULL, c('a', 'b'))), utility = V)"
    )
    assert message.startswith("'utility' must name its columns (the classes) and rows")


# ------------------------------------------------------------------ B8
def test_b8_metrics_of_a_multiclass_matrix(r_session, r_py, r_error):
    r = r_session
    truth, said = ["a", "b", "c", "c"], ["a", "b", "b", "c"]
    r(f"C3 <- yw_confusion(c{tuple(truth)}, c{tuple(said)})")
    cm = yw.ConfusionMatrix.from_labels(truth, said, classes=["a", "b", "c"])
    _, warned = r_warnings(r, "yw_metrics(C3)")
    table = r_py(r, "suppressWarnings(yw_metrics(C3))").set_index("metric")
    one_vs_rest = ["precision", "recall", "specificity", "f1", "fowlkes_mallows"]
    assert table.loc[one_vs_rest, "value"].isna().all()
    assert (
        len(warned) == 1 and "need positive = (one class against the rest) or average" in warned[0]
    )
    # the whole-matrix metrics come as Python computes them (accuracy by hand: 3/4)
    assert table.loc["accuracy", "value"] == pytest.approx(3 / 4)
    assert table.loc["matthews", "value"] == pytest.approx(yw.metrics.matthews(cm))
    assert table.loc["cohen_kappa", "value"] == pytest.approx(yw.metrics.cohen_kappa(cm))
    for average in ("macro", "weighted", "micro"):
        table = r_py(r, f"yw_metrics(C3, average = '{average}')").set_index("metric")
        for name in one_vs_rest:
            function = yw.metrics.CONFUSION_METRICS[name]
            assert table.loc[name, "value"] == pytest.approx(function(cm, average=average)), name
    # by hand: recall of c is 1/2, precision of b is 1/2
    table = r_py(r, "yw_metrics(C3, positive = 'c')").set_index("metric")
    assert table.loc["recall", "value"] == pytest.approx(1 / 2)
    assert r_py(r, "yw_metrics(C3, positive = 'b')").set_index("metric").loc[
        "precision", "value"
    ] == pytest.approx(1 / 2)
    _, message = r_error(r, "yw_metrics(C3, average = 'mean')")
    assert message == "average must be 'macro', 'weighted' or 'micro', found 'mean'"
    _, message = r_error(r, "yw_metrics(C3, positive = 'a', average = 'macro')")
    assert "give either positive" in message
    # binary, without positive: the first class, as the help says and Python does
    r("C2 <- yw_confusion(c('a', 'b', 'b'), c('a', 'b', 'a'))")
    cm2 = yw.ConfusionMatrix.from_labels(["a", "b", "b"], ["a", "b", "a"])
    table = r_py(r, "yw_metrics(C2)").set_index("metric")
    assert table.loc["precision", "value"] == pytest.approx(yw.metrics.precision(cm2))
    assert table.loc["precision", "value"] == pytest.approx(1 / 2)  # 'a' decided twice, once right
    help_text = r("paste(capture.output(yw_help('yw_metrics')), collapse = ' ')")[0]
    assert "the first class" in help_text and "average" in help_text


# ------------------------------------------------------------------ B9
def test_b9_a_character_matrix_is_reported_as_such(r_session, r_error):
    classes, message = r_error(r_session, "yw_utility_matrix(matrix(c('1', '0', '0', '1'), 2))")
    assert "yieldwise_error" in classes
    assert message.startswith("'values' must be a numeric matrix, found a character matrix")
    assert "1-dimensional" not in message


def test_help_says_how_labels_are_ordered_and_matched(r_session):
    text = r_session("paste(capture.output(yw_help('yw_decide')), collapse = ' ')")[0]
    assert "matched by name" in text and "without colnames" in text
    text = r_session("paste(capture.output(yw_help('yw_fit')), collapse = ' ')")[0]
    assert "R's order of numbers and logicals (1, 2, 10)" in text
    assert Path(yw.__file__).with_name("R").joinpath("yieldwise.R").is_file()
