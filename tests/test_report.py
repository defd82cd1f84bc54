"""``yieldwise report``: the batch job end to end (small Stan fits), and its errors."""

from __future__ import annotations

import tomllib
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from yieldwise import Transducer
from yieldwise.cli import main
from yieldwise.datasets import load_digits_binary

EVIL = "<b>net & co</b>"  # a user-given name that must be escaped in the HTML

CONFIG = f"""
title = "Digits: is it an eight?"

[data]
calibration = "calibration.csv"
class_col = "label"

[[classifier]]
name = "forest"
outputs = ["forest_votes"]

[[classifier]]
name = "{EVIL}"
outputs = ["net_logit_eight"]

[[utility]]
name = "screening"
decisions = ["dismiss", "treat"]
classes = ["other", "eight"]
values = [[0, -10], [-1, 5]]

[[utility]]
name = "accuracy"
decisions = ["dismiss", "treat"]
classes = ["other", "eight"]
values = [[1, 0], [0, 1]]

[sampler]
chains = 2
warmup = 200
draws = 200
seed = 3
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    load_digits_binary().iloc[::3].to_csv(folder / "calibration.csv", index=False)
    (folder / "config.toml").write_text(CONFIG)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(["report", str(folder / "config.toml"), "--out", str(folder / "out")])
    assert status == 0
    return folder / "out"


def test_every_output_exists_and_parses(report):
    assert sorted(p.name for p in report.iterdir()) == sorted(
        [
            "report.html",
            "summary.csv",
            "superiority.csv",
            "draws.nc",
            "config.lock.toml",
            "transducer_forest.nc",
            "transducer__b_net___co__b_.nc",
        ]
    )
    lock = tomllib.loads((report / "config.lock.toml").read_text())
    assert lock["sampler"]["seed"] == 3 and lock["versions"]["backend"] in ("pystan", "cmdstanpy")
    assert [c["name"] for c in lock["classifier"]] == ["forest", EVIL]
    t = Transducer.load(report / "transducer_forest.nc")
    assert t.classes_ == ("other", "eight") and t.n_calibration_ == 360
    assert not list(report.parent.glob(".*partial"))


def test_summary_numbers_are_those_of_the_draws(report):
    summary = pd.read_csv(report / "summary.csv")
    draws = xr.open_dataset(report / "draws.nc")
    assert len(summary) == 4  # 2 classifiers x 2 matrices
    for row in summary.itertuples():
        u = draws["long_run_utility"].sel(classifier=row.classifier, matrix=row.matrix)
        u = u.values.ravel()
        assert row.mean == pytest.approx(u.mean(), rel=1e-12)
        assert row.sd == pytest.approx(u.std(ddof=1), rel=1e-12)
        assert row.q5 == pytest.approx(np.quantile(u, 0.05), rel=1e-12)
        assert row.q95 == pytest.approx(np.quantile(u, 0.95), rel=1e-12)
        scaled = (
            draws["rescaled_long_run_utility"]
            .sel(classifier=row.classifier, matrix=row.matrix)
            .values.ravel()
        )
        assert row.rescaled_mean == pytest.approx(scaled.mean(), rel=1e-12)
    superiority = pd.read_csv(report / "superiority.csv")
    for row in superiority.itertuples():
        u = draws["long_run_utility"].sel(matrix=row.matrix)
        a = u.sel(classifier=row.classifier).values.ravel()
        b = u.sel(classifier=row.versus).values.ravel()
        assert row.prob_superiority == pytest.approx(np.mean(a[:, None] > b[None, :]))


def test_html_is_self_contained_and_escapes_names(report):
    page = (report / "report.html").read_text()
    for section in ("summary", "transducers", "superiority", "thresholds", "metrics",
                    "win-map", "diagnostics"):  # fmt: skip
        assert f"id='{section}'" in page
    # screening [[0, -10], [-1, 5]]: check when P(eight) > (0 - (-1)) / (1 + 15) = 1/16
    assert "choose &ldquo;treat&rdquo; when P(eight) exceeds 0.0625" in page
    assert "matthews" in page and "utility yield: screening" in page
    assert EVIL not in page and "&lt;b&gt;net &amp; co&lt;/b&gt;" in page
    assert "http://" not in page and "https://" not in page  # nothing fetched
    # 2 transducers + 2 comparisons + 1 win map
    assert page.count("data:image/png;base64,") == 5


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda c: c.replace('class_col = "label"', 'class_col = "truth"'),
            r"\[data\].class_col names column 'truth'",
        ),
        (
            lambda c: c.replace('"forest_votes"', '"votes"'),
            r"'forest' outputs names column 'votes'",
        ),
        (lambda c: c.replace("[[0, -10], [-1, 5]]", "[[0, -10, 3], [-1, 5]]"), r"screening"),
        (
            lambda c: c.replace('classes = ["other", "eight"]', 'classes = ["no", "yes"]', 1),
            r"has classes \['no', 'yes'\]",
        ),
        (lambda c: c + "\n[colours]\n", r"unknown top-level key\(s\) \['colours'\]"),
        (
            lambda c: c.replace("seed = 3", "sead = 3"),
            r"\[sampler\] has unknown key\(s\) \['sead'\]",
        ),
        (lambda c: c.replace("[data]", "[data", 1), r"not valid TOML"),
    ],
)
def test_bad_configs_exit_2_and_leave_nothing(tmp_path, capsys, edit, message):
    import re

    load_digits_binary().iloc[:60].to_csv(tmp_path / "calibration.csv", index=False)
    (tmp_path / "config.toml").write_text(edit(CONFIG))
    assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "config.toml" in err or "calibration.csv" in err
    assert re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_shipped_config_is_valid():
    """data/digits_report.toml: the shipped report's configuration loads and matches its data."""
    from pathlib import Path

    from yieldwise.report import load_config

    config = load_config(Path(__file__).resolve().parent.parent / "data" / "digits_report.toml")
    assert config.dataset == "digits_binary" and len(config.classifiers) == 2
    frame = config.table()  # checks every column and the utilities' classes
    assert len(frame) == 1079
    assert config.utilities["screening"].threshold() == pytest.approx(1 / 16)
