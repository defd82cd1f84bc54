"""The command line: the worked example, fit, and usage errors (report/demo: test_report)."""

import errno
import os
import re
import threading
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from yieldwise.cli import main


def test_example_prints_and_writes_the_worked_example(tmp_path, capsys):
    assert main(["example", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "7 of 10 metrics favour 'cautious'" in printed
    assert "favours 'sensitive' by 0.310" in printed
    table = pd.read_csv(tmp_path / "worked_example.csv", index_col="score")
    # Yields by hand, utilities [[0, -10], [-1, 5]] per 1,000 patients:
    # cautious:  (0*890 - 10*40 - 1*10 + 5*60) / 1000 = -0.11
    # sensitive: (0*750 - 10*10 - 1*150 + 5*90) / 1000 = +0.20
    assert table.loc["utility_yield", "cautious"] == pytest.approx(-0.11, abs=1e-15)
    assert table.loc["utility_yield", "sensitive"] == pytest.approx(0.20, abs=1e-15)
    assert table.loc["accuracy", "cautious"] == pytest.approx(0.95)
    assert table.loc["accuracy", "sensitive"] == pytest.approx(0.84)
    assert table.loc["utility_yield", "favours"] == "sensitive"
    assert table.loc["f1", "favours"] == "cautious"
    assert set(table.index) >= {"precision", "recall", "matthews", "balanced_accuracy"}
    assert table["admissible"].dtype == bool


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage: yieldwise" in capsys.readouterr().err


def test_unwritable_output_is_reported(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["example", "--out", str(blocker / "sub")]) == 2
    assert "yieldwise example: error" in capsys.readouterr().err


# --------------------------------------------------------------------- fit
FAST = ["--chains", "2", "--warmup", "200", "--draws", "200", "--seed", "4", "--quiet"]


@pytest.fixture(scope="module")
def calibration_csv(tmp_path_factory):
    from yieldwise.datasets import load_digits_binary

    frame = load_digits_binary().iloc[::3]  # 360 rows of the shipped set
    path = tmp_path_factory.mktemp("fit") / "calibration.csv"
    frame.to_csv(path, index=False)
    return path


def test_fit_writes_a_reloadable_transducer(calibration_csv, tmp_path, capsys):
    import warnings

    from yieldwise import Transducer
    from yieldwise.datasets import load_digits_binary

    out = tmp_path / "models" / "forest.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs warn about ESS by design
        argv = ["fit", str(calibration_csv), "--class-col", "label"]
        argv += ["--output-cols", "forest_votes", "--classifier", "forest", "--out", str(out)]
        status = main([*argv, *FAST])
    assert status == 0
    printed = capsys.readouterr().out
    assert "transducer for forest: classes ['eight', 'other'], 360 calibration items" in printed
    assert "divergent transitions" in printed and f"Written: {out}" in printed
    assert not list(out.parent.glob(".*partial"))
    t = Transducer.load(out)
    assert t.posterior_.posterior.attrs["yieldwise_classifier"] == "forest"
    assert t.transform_.resolution == (0.005,)  # the vote lattice k/200 was detected
    frame = load_digits_binary()
    p = t.predict_proba(frame[["forest_votes"]].iloc[:5])
    assert p.shape == (5, 2) and np.allclose(p.sum(axis=1), 1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ["--class-col", "truth"],
            r"calibration.csv: --class-col/--output-cols names column\(s\) \['truth'\]",
        ),
        (["--output-cols", "forest_votes,nope"], r"names column\(s\) \['nope'\]"),
        (
            ["--class-col", "forest_votes", "--output-cols", "label"],
            r"output column 'label' is not numeric",
        ),
        (["--output-cols", "label"], r"--output-cols lists 'label', which is also --class-col"),
    ],
)
def test_fit_reports_bad_columns(calibration_csv, tmp_path, capsys, change, message):
    args = {"--class-col": "label", "--output-cols": "forest_votes"}
    args.update(dict(zip(change[::2], change[1::2], strict=True)))
    argv = ["fit", str(calibration_csv), "--out", str(tmp_path / "t.nc")]
    for key, value in args.items():
        argv += [key, value]
    assert main(argv) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "t.nc").exists()


def test_fit_prints_a_laplace_fits_pareto_k_beside_its_r_hat(calibration_csv, tmp_path, capsys):
    """Independent draws pass R-hat and ESS whatever the approximation's error: the
    summary gives the Pareto k the saved fit recorded, and its verdict."""
    from yieldwise import Transducer

    out = tmp_path / "forest.nc"
    argv = ["fit", str(calibration_csv), "--class-col", "label", "--output-cols",
            "forest_votes", "--out", str(out), "--backend", "laplace", "--seed", "1"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    k = Transducer.load(out).sampler_summary()["pareto_k"]
    verdict = "within" if k <= 0.7 else "ABOVE: not for decisions"
    assert f"Laplace approximation: Pareto k {k:.2f}, {verdict}" in printed


def test_fit_reports_missing_values_and_unreadable_files(tmp_path, capsys):
    table = tmp_path / "holes.csv"
    table.write_text("label,score\na,0.1\nb,\na,0.3\n")
    out = ["--out", str(tmp_path / "t.nc")]
    assert main(["fit", str(table), "--class-col", "label", "--output-cols", "score", *out]) == 2
    assert "column 'score' has 1 missing value(s), first in data row 2 (line 3 of the file)" in (
        capsys.readouterr().err
    )
    assert main(["fit", str(tmp_path / "none.csv"), "--class-col", "a", "--output-cols", "b",
                 *out]) == 2  # fmt: skip
    assert "none.csv: no such file" in capsys.readouterr().err


def test_fit_names_output_columns_with_commas_or_edge_spaces(tmp_path, capsys):
    """--output-cols matches the exact text first, then its comma-separated parts as given
    or stripped: columns named "score " or "logit, eight" could not be named at all
    (audit, 2026-12-06); --help and the error say how names are split."""
    from yieldwise import Transducer
    from yieldwise.datasets import load_digits_binary

    frame = load_digits_binary().iloc[::5][["label", "forest_votes", "net_logit_eight"]]
    frame = frame.rename(columns={"forest_votes": "score ", "net_logit_eight": "logit, eight"})
    frame = frame.assign(grade=np.where(frame["logit, eight"] > 0, "high", "low"))
    frame.to_csv(tmp_path / "c.csv", index=False)
    out = tmp_path / "t.nc"
    base = ["fit", str(tmp_path / "c.csv"), "--class-col", "label", "--out", str(out),
            "--backend", "laplace", "--seed", "1", "--quiet", "--overwrite"]  # fmt: skip
    for given, columns in (("score ", ("score ",)), ("logit, eight", ("logit, eight",))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main([*base, "--output-cols", given]) == 0, capsys.readouterr().err
        assert Transducer.load(out).transform_.columns == columns
        assert f"transducer for {', '.join(columns)}:" in capsys.readouterr().out
    assert main([*base, "--output-cols", "logit,eight"]) == 2
    err = capsys.readouterr().err
    assert (
        "--output-cols 'logit,eight' names column(s) ['logit', 'eight'] that the file "
        "does not have; its columns are ['label', 'score ', 'logit, eight', 'grade']. "
        "--output-cols takes one column's exact name, or names separated by commas "
        "(spaces around each name are dropped unless the column's name has them)"
    ) in err
    # a text column: the words of `yieldwise report` (report.not_numeric)
    assert main([*base, "--output-cols", "score ,grade"]) == 2
    dtype, first = pd.read_csv(tmp_path / "c.csv")["grade"].dtype, frame["grade"].iloc[0]
    assert (f"output column 'grade' is not numeric (dtype {dtype}, e.g. {first!r} in data row "
            "1 (line 2 of the file)); classifier outputs must be numbers: name a column of "
            "scores or probabilities, or convert this one to numbers"
            ) in capsys.readouterr().err  # fmt: skip
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    assert "names separated by commas" in " ".join(capsys.readouterr().out.split())


def test_fit_refuses_a_repeated_column_name(tmp_path, capsys):
    """pandas renames a repeated header (score, score.1) and the fit read the first
    column: a silent wrong answer (audit, 2026-12-06). Now refused by name."""
    table = tmp_path / "dup.csv"
    table.write_text("label,score,score\na,0.9,0.1\nb,0.2,0.8\n")
    argv = ["fit", str(table), "--class-col", "label", "--output-cols", "score",
            "--out", str(tmp_path / "t.nc")]  # fmt: skip
    assert main(argv) == 2
    assert ("dup.csv: column name(s) ['score'] appear more than once in the header"
            in capsys.readouterr().err)  # fmt: skip
    assert not (tmp_path / "t.nc").exists()


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        # numbers that write back as the file wrote them stay numbers, as before
        (["0", "1", "1", "0"], [0, 1, 1, 0]),
        ([" 0", " 1", "1", "0"], [0, 1, 1, 0]),  # spaces after the commas are layout
        # else the file's text: 1 and 01 are two classes, 007 keeps its zeros
        (["1", "01", "2", "1"], ["1", "01", "2", "1"]),
        (["007", "010", "007", "010"], ["007", "010", "007", "010"]),
        (["1.50", "2", "1.50", "2"], ["1.50", "2", "1.50", "2"]),
        # None and NA are classes (pandas read them as missing); an empty cell is missing
        (["None", "Mild", "NA", "Mild"], ["None", "Mild", "NA", "Mild"]),
        (["None", "", "Mild", "Mild"], ["None", np.nan, "Mild", "Mild"]),
    ],
)
def test_class_labels_are_read_as_the_file_writes_them(tmp_path, cells, expected):
    from yieldwise._files import read_table

    path = tmp_path / "t.csv"
    path.write_text("label,score\n" + "".join(f"{c},{i / 10}\n" for i, c in enumerate(cells)))
    frame = read_table(path, label_columns=["label"])
    got = frame["label"].tolist()
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if isinstance(e, float):
            assert pd.isna(g)
        else:
            assert g == e and isinstance(g, str) == isinstance(e, str)
    assert frame["score"].tolist() == [i / 10 for i in range(len(cells))]


def _open_pipe_for_writing(path, seconds=10.0):
    """A write end of the named pipe ``path`` once a reader has it open (None if none
    comes within ``seconds``): without a reader, a non-blocking open fails with ENXIO."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            time.sleep(0.01)
    return None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_read_table_reads_the_file_once(tmp_path):
    """A named pipe gives its contents once: read_table reads the file from disk once and
    parses the header, the table and the class column from that copy. Before, it opened
    the file three times (header, table, labels as text) and waited forever on a pipe."""
    from yieldwise._files import read_table

    pipe = tmp_path / "table.csv"
    os.mkfifo(pipe)
    result = {}

    def read():
        try:
            result["frame"] = read_table(pipe, label_columns=["label"])
        except Exception as exc:  # reported below
            result["error"] = exc

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    fd = _open_pipe_for_writing(pipe)
    assert fd is not None, "read_table never opened the file"
    os.write(fd, "\ufefflabel,score\n1,0.5\n01,0.25\n".encode())
    os.close(fd)
    reader.join(timeout=10)
    if reader.is_alive():  # blocked opening the pipe again: give it an end of file
        for _ in range(3):
            fd = _open_pipe_for_writing(pipe, seconds=1)
            if fd is not None:
                os.close(fd)
            reader.join(timeout=5)
        pytest.fail("read_table opened the file a second time")
    assert "error" not in result, result.get("error")
    frame = result["frame"]
    assert list(frame.columns) == ["label", "score"]  # the byte-order mark is skipped
    assert frame["label"].tolist() == ["1", "01"] and frame["score"].tolist() == [0.5, 0.25]


@pytest.mark.parametrize("address", ["https://example.org/cal.csv", "s3://bucket/cal.csv"])
def test_read_table_refuses_an_address(address):
    """pandas would fetch an address over the network; read_table reads local files and
    says so by name rather than reporting a missing file."""
    from yieldwise._files import read_table

    with pytest.raises(ValueError, match="an address, not a file; download it"):
        read_table(address)


def test_fit_keeps_three_classes_that_numbers_would_merge(tmp_path, capsys):
    """Labels 1, 01 and 2 are three classes; read as numbers they were two (audit)."""
    rng = np.random.default_rng(3)
    labels = rng.choice(["1", "01", "2"], 150)
    scores = rng.normal(size=150) + (labels == "2")
    table = tmp_path / "codes.csv"
    pd.DataFrame({"label": labels, "score": scores}).to_csv(table, index=False)
    argv = ["fit", str(table), "--class-col", "label", "--output-cols", "score",
            "--out", str(tmp_path / "t.nc"), "--backend", "laplace", "--seed", "1"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    assert "classes ['01', '1', '2']" in capsys.readouterr().out


def test_read_table_infers_compression_as_pandas_does(tmp_path):
    """read_table reads the file's bytes itself, so it cannot pass ``compression="infer"``
    (which needs a path) and keeps its own copy of pandas' suffix table. The copy must
    stay pandas': every suffix pandas knows maps alike (pandas.io.common, not a public
    API, so a pandas that moves it skips this with the reason), and a gzip file named in
    upper case is read as pandas reads it."""
    import gzip

    from yieldwise._files import _COMPRESSION, read_table

    common = pytest.importorskip("pandas.io.common")
    table = getattr(common, "extension_to_compression", None)
    if table is None:
        pytest.skip("this pandas keeps no extension_to_compression table")
    assert dict(table) == _COMPRESSION
    for suffix in [*table, ".csv", ".GZ", ".Tar.Bz2"]:
        name = f"cal{suffix}"
        ours = next((c for end, c in _COMPRESSION.items() if name.lower().endswith(end)), None)
        assert ours == common.infer_compression(name, "infer"), name
    path = tmp_path / "cal.CSV.GZ"
    path.write_bytes(gzip.compress(b"label,score\n1,0.5\n0,0.25\n"))
    assert read_table(path)["score"].tolist() == pd.read_csv(path)["score"].tolist()
