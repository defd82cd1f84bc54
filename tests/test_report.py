"""``yieldwise report``: the batch job end to end (small Stan fits), and its errors."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from yieldwise import Transducer
from yieldwise.cli import main
from yieldwise.datasets import load_digits_binary

# a user-given name that must be escaped in the HTML, and shown verbatim in the figures
# (matplotlib would read "$...$" as mathematics and fail on \foo)
EVIL = "<b>net & co $\\foo$</b>"

CONFIG = f"""
title = "Digits: is it an eight?"

[data]
calibration = "calibration.csv"
class_col = "label"

[[classifier]]
name = "forest"
outputs = ["forest_votes"]
transform = "logit"
resolution = 0.005

[[classifier]]
name = '{EVIL}'
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
# the report's layout and numbers-from-draws are plumbing: the Laplace approximation
backend = "laplace"
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
            "transducer__b_net___co___foo___b_.nc",
            "yieldwise-manifest.json",
        ]
    )
    lock = tomllib.loads((report / "config.lock.toml").read_text())
    assert lock["sampler"]["seed"] == 3 and lock["versions"]["backend"] == "laplace"
    assert [c["name"] for c in lock["classifier"]] == ["forest", EVIL]
    assert lock["classifier"][0]["transform"] == ["logit"]
    assert lock["classifier"][0]["resolution"] == [0.005]  # votes k/200: a lattice
    assert lock["classifier"][1]["resolution"] == ["continuous"]
    t = Transducer.load(report / "transducer_forest.nc")
    assert t.classes_ == ("other", "eight") and t.n_calibration_ == 360
    assert sorted(p.name for p in report.parent.iterdir()) == [
        "calibration.csv", "config.toml", "out"
    ]  # no work folder, no lock: only the report  # fmt: skip
    manifest = json.loads((report / "yieldwise-manifest.json").read_text())
    assert manifest["format"] == "yieldwise report folder" and manifest["format_version"] == 1
    listed = manifest["files"]
    assert set(listed) == {p.name for p in report.iterdir()} - {"yieldwise-manifest.json"}
    for name, entry in listed.items():  # the manifest describes the very files there
        data = (report / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


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
        # distinct fits: no two draws' utilities equal (ties within 1e-12 of U's range)
        assert row.prob_tie == pytest.approx(np.mean(a[:, None] == b[None, :]), abs=0)


def test_report_files_carry_their_format_and_tables_are_read_checked(report, tmp_path):
    """draws.nc names its format and version; read_report_csv reads the tables the
    manifest lists (and a copy outside the folder by its columns), and refuses a CSV
    that is no report table (audit of saving and loading, item 11)."""
    import shutil

    from yieldwise import __version__
    from yieldwise.report import read_report_csv

    with xr.open_dataset(report / "draws.nc") as draws:
        assert draws.attrs == {
            "yieldwise_format": "yieldwise report draws",
            "yieldwise_format_version": 1,
            "yieldwise_version": __version__,
        }
    summary, written = read_report_csv(report / "summary.csv"), pd.read_csv(report / "summary.csv")
    assert summary["classifier"].tolist() == written["classifier"].tolist()
    assert summary["mean"].tolist() == written["mean"].tolist()
    superiority = read_report_csv(report / "superiority.csv")
    assert sorted(superiority["versus"].unique()) == sorted(["forest", EVIL])
    shutil.copy(report / "summary.csv", tmp_path / "summary.csv")  # no manifest beside it
    assert read_report_csv(tmp_path / "summary.csv").equals(summary)
    shutil.copy(report / "config.lock.toml", tmp_path / "lock.csv")
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'lock.csv'}: is not a table of a "):
        read_report_csv(tmp_path / "lock.csv")


def test_html_is_self_contained_and_escapes_names(report):
    page = (report / "report.html").read_text()
    for section in ("summary", "transducers", "superiority", "thresholds", "metrics",
                    "win-map", "toolkit", "rules", "diagnostics"):  # fmt: skip
        assert f"id='{section}'" in page
    # screening [[0, -10], [-1, 5]]: check when P(eight) > (0 - (-1)) / (1 + 15) = 1/16
    assert "choose &ldquo;treat&rdquo; when P(eight) exceeds 0.0625" in page
    assert "matthews" in page and "utility yield: screening" in page
    assert EVIL not in page and "&lt;b&gt;net &amp; co $\\foo$&lt;/b&gt;" in page
    assert "http://" not in page and "https://" not in page  # nothing fetched
    # 2 transducers + 2 comparisons + 1 win map + 2 x (ROC hull, reliability) + 2 rules
    assert page.count("data:image/png;base64,") == 11
    # fitted with the Laplace approximation: the page says so, naming both (escaped)
    banner = page.split("id='approximation'>")[1].split("</p>")[0]
    assert "forest" in banner and "&lt;b&gt;net &amp; co" in banner and "not Stan" in banner
    # with each one's Pareto k, as its fit recorded it
    shown = [float(k) for k in re.findall(r"\(Pareto k (\d+\.\d\d)\)", banner)]
    saved = [
        Transducer.load(report / f).sampler_summary()["pareto_k"]
        for f in ("transducer_forest.nc", "transducer__b_net___co___foo___b_.nc")
    ]
    assert sorted(shown) == pytest.approx(sorted(round(k, 2) for k in saved), abs=1e-9)


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
            r"\[\[utility\]\] 'accuracy' has classes \['other', 'eight'\], but \[\[utility\]\] "
            r"'screening' has \['no', 'yes'\]; every matrix must name the same classes",
        ),
        (lambda c: c + "\n[colours]\n", r"unknown top-level key\(s\) \['colours'\]"),
        (
            lambda c: c.replace("seed = 3", "sead = 3"),
            r"\[sampler\] has unknown key\(s\) \['sead'\]",
        ),
        (lambda c: c.replace("[data]", "[data", 1), r"not valid TOML"),
        (
            lambda c: c.replace('transform = "logit"', 'transform = "probit"'),
            r"'forest'\)\.transform: expected one of",
        ),
        (
            lambda c: c.replace(
                '"forest_votes"]\ntransform = "logit"', '"net_logit_eight"]\ntransform = "log"'
            ),
            r"\[\[classifier\]\] 'forest': outputs column 'net_logit_eight' must be non-negative",
        ),
        (
            lambda c: c.replace("resolution = 0.005", "resolution = -1"),
            r"'forest'\)\.resolution: expected",
        ),
        (
            lambda c: c.replace('transform = "logit"', 'colour = "red"'),
            r"'forest'\): unknown key\(s\) \['colour'\]",
        ),
        (
            lambda c: c + "\n[prevalences]\nother = 0.5\nnine = 0.5\n",
            r"\[prevalences\] names classes \['nine', 'other'\]",
        ),
        (
            lambda c: c + "\n[prevalences]\nother = 0.5\neight = 0.6\n",
            r"\[prevalences\] must sum to 1, found a sum of 1.1",
        ),
        (
            lambda c: c + '\n[prevalences]\nother = 0.5\neight = "half"\n',
            r"\[prevalences\]\.eight: expected a positive number",
        ),
        # issue 17, item 5: two classifiers whose names give one file name
        (
            lambda c: c.replace('name = "forest"', 'name = "a b"').replace(EVIL, "a_b"),
            r"number 2\.name: 'a_b' and 'a b' would both be saved as transducer_a_b\.nc",
        ),
        (
            lambda c: c.replace(EVIL, "Forest"),
            r"'Forest' and 'forest' would both be saved as transducer_Forest\.nc .*ignoring case",
        ),
        (lambda c: c.replace(EVIL, "x" * 250), r"is too long for a file name"),
        # item 8: found when the configuration is read, not after the fits
        (
            lambda c: c.replace("[[0, -10], [-1, 5]]", "[[0, -1e308], [-1, 5]]"),
            r"\[\[utility\]\] number 1 \('screening'\): values must lie within \+-1e\+150",
        ),
        (
            lambda c: "utility = []\n" + c[: c.index("[[utility]]")] + c[c.index("[sampler]") :],
            r"config.toml: utility is empty; give at least one \[\[utility\]\] table",
        ),
        (
            lambda c: c.replace('backend = "laplace"', 'backend = "stan"'),
            r"\[sampler\]\.backend: unknown Stan backend 'stan'",
        ),
        # item 10: no silent truncation, no ignored keys, no class column as an output
        (
            lambda c: c.replace("seed = 3", "seed = 1.7"),
            r"\[sampler\]\.seed: expected an integer in \[0, 2\*\*31\), found 1\.7",
        ),
        (
            lambda c: c.replace("chains = 2", "chains = 0"),
            r"\[sampler\]\.chains: expected an integer >= 1, found 0",
        ),
        (
            lambda c: c.replace('class_col = "label"', 'class_col = "label"\nclass_column = "x"'),
            r"\[data\] has unknown key\(s\) \['class_column'\]",
        ),
        (
            lambda c: c.replace('name = "screening"', 'name = "screening"\nweights = 2'),
            r"\('screening'\): unknown key\(s\) \['weights'\]; known: name, decisions",
        ),
        (
            lambda c: c.replace('outputs = ["forest_votes"]', 'outputs = ["label"]'),
            r"number 1.outputs: lists 'label', the class column \(\[data\]\.class_col\)",
        ),
        # found by a new user (2026-12-06): before any fit, by name
        (
            lambda c: c.replace("[[0, -10], [-1, 5]]", "[[true, -10], [-1, 5]]"),
            r"\('screening'\)\.values: expected numbers, found True \(TOML true/false\)",
        ),
        (
            lambda c: c.replace("seed = 3", "seed = 3\nmax_treedepth = -3"),
            r"\[sampler\]\.max_treedepth: expected an integer >= 1, found -3",
        ),
        # the class order is declared, or the same in every matrix (audit, 2026-12-06)
        (
            lambda c: c.replace(
                'classes = ["other", "eight"]\nvalues = [[1, 0], [0, 1]]',
                'classes = ["eight", "other"]\nvalues = [[0, 1], [1, 0]]',
            ),
            r"\[\[utility\]\] 'screening' lists the classes in the order \['other', 'eight'\] "
            r"and \[\[utility\]\] 'accuracy' in the order \['eight', 'other'\].*e\.g\. "
            r'classes = \["other", "eight"\]',
        ),
        (
            lambda c: 'classes = ["other", "nine"]\n' + c,
            r"classes: expected each of the utility matrices' classes \['eight', 'other'\] "
            r"once, in the order the classifiers' outputs follow, found \['other', 'nine'\]",
        ),
        (
            lambda c: 'classes = "other, eight"\n' + c,
            r"classes: expected a list of class labels",
        ),
        (
            lambda c: c.replace('"net_logit_eight"]', '"with_inf"]'),
            r"column 'with_inf' \(outputs of \[\[classifier\]\] '<b>net.*has 1 infinite "
            r"value\(s\), first in data row 8 \(line 9 of the file\)",
        ),
        # audit 2026-12-06: names the comparison's dimensions hold; found when the
        # configuration is read (the run stopped after every fit, naming nothing)
        *[
            (
                lambda c, n=name: c.replace(EVIL, n),
                rf"\[\[classifier\]\] number 2\.name: '{name}' is reserved: the comparison "
                r"of the classifiers names its dimensions \['chain', 'draw', 'matrix'\].*"
                rf"rename it, e\.g\. '{name} classifier'",
            )
            for name in ("matrix", "chain", "draw")
        ],
    ],
)
def test_bad_configs_exit_2_and_leave_nothing(tmp_path, capsys, edit, message):
    import re

    table = load_digits_binary().iloc[:60]
    table = table.assign(with_inf=np.where(np.arange(60) == 7, np.inf, table["net_logit_eight"]))
    table.to_csv(tmp_path / "calibration.csv", index=False)
    (tmp_path / "config.toml").write_text(edit(CONFIG))
    assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "config.toml" in err or "calibration.csv" in err
    assert re.search(message, err), err
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".*"))  # no work folder, no lock


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # a text column of the last classifier: found after the others were fitted
        (lambda c: c.replace('"net_logit_eight"]', '"grade"]'),
         r"calibration\.csv: column 'grade' \(outputs of \[\[classifier\]\] '<b>net.*\) is not "
         r"numeric \(dtype \w+, e\.g\. '(low|high)' in data row 1 \(line 2 of the file\)\); "
         r"classifier outputs must be numbers: name a column of scores or probabilities"),
        # outputs the last classifier's transform cannot take, by the fit's own check
        (lambda c: c.replace('"net_logit_eight"]', '"net_logit_eight"]\ntransform = "log"'),
         r"config\.toml: \[\[classifier\]\] '<b>net.*': outputs column 'net_logit_eight' "
         r"must be non-negative"),
        # every [sampler] value by the Transducer's own checks, named by its key (each was
        # blamed on the first classifier, whose fit failed)
        (lambda c: c.replace("seed = 3", "seed = 3\nlikelihood_bins = -3"),
         r"\[sampler\]\.likelihood_bins: likelihood_bins must be \"auto\", None or a fraction"),
        (lambda c: c.replace("seed = 3", 'seed = 3\nclass_reduction = "bogus"'),
         r"\[sampler\]\.class_reduction: class_reduction must be \"auto\", \"ranks\" or None"),
        (lambda c: c.replace("seed = 3", "seed = 3\nkernel_tail_cut = -1.0"),
         r"\[sampler\]\.kernel_tail_cut: kernel_tail_cut must be a number in \[0, 1e-6\]"),
        (lambda c: c.replace("seed = 3", 'seed = 3\nprior = "flat"'),
         r"\[sampler\]\.prior: prior must be a mapping of hyper-parameter names to numbers"),
        (lambda c: c.replace("seed = 3", "seed = 3\nprior = {tau_f_scale = -1}"),
         r"\[sampler\]\.prior: prior\['tau_f_scale'\] must be a positive number, found -1"),
        (lambda c: c.replace("seed = 3", "seed = 3\nadapt_delta = 1.0"),
         r"\[sampler\]\.adapt_delta: expected a number in \(0, 1\), found 1\.0"),
    ],
)  # fmt: skip
def test_what_needs_no_fit_stops_the_report_before_any_fit(
    tmp_path, capsys, monkeypatch, edit, message
):
    """Problems that no fit is needed to see stop the report before the first fit, with a
    message naming the file, the key or column, what was expected and what was found."""
    from yieldwise import parallel

    started = []
    monkeypatch.setattr(parallel, "fit_many", lambda *a, **k: started.append(a) or {})
    table = load_digits_binary().iloc[::3]
    table = table.assign(grade=np.where(table["net_logit_eight"] > 0, "high", "low"))
    table.to_csv(tmp_path / "calibration.csv", index=False)
    (tmp_path / "config.toml").write_text(edit(CONFIG))
    assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert started == []  # no fit was asked for
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.csv", "config.toml"]


def test_reserved_classifier_names_are_the_comparisons_dimensions():
    """RESERVED_CLASSIFIER_NAMES are the dimensions and coordinates of the Dataset a
    comparison holds its classifiers' draws in, as the report calls compare (a batch of
    matrices): if compare adds one, this fails, and the list must follow."""
    import yieldwise as yw
    from yieldwise.report import RESERVED_CLASSIFIER_NAMES

    frame = load_digits_binary().iloc[::7]
    draws = {
        "w": np.array([[[0.6, 0.4]]]),
        "alpha": np.array([[[[0.9, 0.1], [0.2, 0.8]]]]),
        "mu": np.array([[[[-1.0], [1.0]]]]),
        "sigma": np.array([[[[1.0], [1.0]]]]),
    }
    fits = {
        name: Transducer.from_draws(
            draws, frame[[column]], frame["label"], ("other", "eight"), output_transform="identity"
        )
        for name, column in (("forest", "forest_votes"), ("net", "net_logit_eight"))
    }
    utility = yw.UtilityMatrix([[0, -10], [-1, 5]], decisions=["dismiss", "treat"],
                               classes=["other", "eight"])  # fmt: skip
    comparison = yw.compare(fits, {"screening": utility, "accuracy": utility})
    for held in (comparison.utilities, comparison.rescaled):
        assert set(held.dims) | set(held.coords) == set(RESERVED_CLASSIFIER_NAMES)


def test_shipped_config_is_valid():
    """data/digits_report.toml: the shipped report's configuration loads and matches its data."""
    from pathlib import Path

    from yieldwise.report import load_config

    config = load_config(Path(__file__).resolve().parent.parent / "data" / "digits_report.toml")
    assert config.dataset == "digits_binary" and len(config.classifiers) == 2
    frame = config.table()  # checks every column and the utilities' classes
    assert len(frame) == 1079
    assert config.utilities["screening"].threshold() == pytest.approx(1 / 16)


# ------------------------------------------------------------- in a real browser
SECTIONS = ("summary", "transducers", "superiority", "thresholds", "metrics", "win-map",
            "toolkit", "rules", "diagnostics")  # fmt: skip


def open_in_browser(browser, page, screenshot):
    """Load ``page`` in headless chromium; return its console errors after a screenshot."""
    browser.get(page.resolve().as_uri())
    browser.get_log("browser")  # clear entries of earlier pages
    browser.refresh()
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(int(height) + 100, 12000))
    browser.save_screenshot(str(screenshot))
    return errors


def check_page(browser):
    from selenium.webdriver.common.by import By

    for section in SECTIONS:
        element = browser.find_element(By.ID, section)
        assert element.is_displayed() and element.text.strip(), section
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.complete, i.naturalWidth])"
    )
    assert images and all(done and width > 100 for done, width in images), images
    # Nothing but the page itself and its inline data: nothing fetched from anywhere.
    fetched = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert all(name.startswith("data:") for name in fetched), fetched
    return len(images)


def test_report_opens_in_a_browser_without_errors(report, browser):
    from selenium.webdriver.common.by import By

    shot = report.parent / "report.png"
    assert open_in_browser(browser, report / "report.html", shot) == []
    assert check_page(browser) == 11
    # The user-given name is shown as text, never parsed as markup.
    body = browser.find_element(By.TAG_NAME, "body").text
    assert EVIL in body
    assert not [b for b in browser.find_elements(By.TAG_NAME, "b") if "net & co" in b.text]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


# --------------------------------------------------------------- the main job
def readme_main_job():
    """The README's main-job command (the line in its 'main job' block), as argv."""
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    lines = [ln.split("#")[0].strip() for ln in readme.splitlines()]
    commands = [ln for ln in lines if ln.startswith("yieldwise demo")]
    assert len(commands) == 1, commands
    # `make demo` runs exactly this command, from the virtualenv.
    assert f"$(BIN)/{commands[0]}" in (root / "Makefile").read_text()
    return shlex.split(commands[0])


def test_readme_main_job_runs_on_the_shipped_config(tmp_path, browser):
    """The README's command, through the installed console script, with fewer draws."""
    import subprocess
    import sys
    from pathlib import Path

    argv = readme_main_job()
    script = Path(sys.executable).with_name(argv[0])
    out = tmp_path / "demo"
    reduced = ["--out", str(out), "--chains", "2", "--warmup", "200", "--draws", "200"]
    run = subprocess.run(
        [str(script), *argv[1:], *reduced], capture_output=True, text=True, timeout=1200
    )
    assert run.returncode == 0, run.stderr
    assert f"Report written: {(out / 'report.html').resolve()}" in run.stdout
    assert "fitting transducer 2/2: neural network (two logits)" in run.stderr  # progress
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["matrix"]) == {"screening", "accuracy"}
    assert set(summary["classifier"]) == {"random forest (votes)", "neural network (two logits)"}
    # P(best) sums to 1 within each matrix; means lie between the matrix's extremes.
    assert np.allclose(summary.groupby("matrix")["prob_best"].sum(), 1.0)
    assert summary["mean"].between(-10, 5).all()
    lock = tomllib.loads((out / "config.lock.toml").read_text())
    assert lock["sampler"]["chains"] == 2 and lock["sampler"]["draws"] == 200
    # sampled by Stan, so no approximation banner
    assert lock["versions"]["backend"] in ("pystan", "cmdstanpy")
    assert "id='approximation'" not in (out / "report.html").read_text()
    assert open_in_browser(browser, out / "report.html", tmp_path / "demo.png") == []
    assert check_page(browser) == 11


def test_prevalences_reach_the_long_run_utilities(tmp_path):
    """[prevalences] (listed in another order than the classes) give generative mode."""
    from yieldwise import UtilityMatrix, long_run_utility

    second = CONFIG.index(f"[[classifier]]\nname = '{EVIL}'")
    one = CONFIG[:second] + CONFIG[CONFIG.index("[[utility]]") :]  # the forest alone
    config = one + "\n[prevalences]\neight = 0.3\nother = 0.7\n"
    load_digits_binary().iloc[::3].to_csv(tmp_path / "calibration.csv", index=False)
    (tmp_path / "config.toml").write_text(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out"),
                     "--quiet"]) == 0  # fmt: skip
    out = tmp_path / "out"
    t = Transducer.load(out / "transducer_forest.nc")
    screening = UtilityMatrix([[0, -10], [-1, 5]], decisions=["dismiss", "treat"],
                              classes=["other", "eight"])  # fmt: skip
    deployed = long_run_utility(t, screening, prevalences=[0.7, 0.3]).values.mean()
    calibration = long_run_utility(t, screening).values.mean()
    summary = pd.read_csv(out / "summary.csv").set_index("matrix")
    assert summary.loc["screening", "mean"] == pytest.approx(deployed, rel=1e-9)
    # 30 % eights instead of the data's ~10 %: a different (here higher) long-run utility.
    assert deployed > calibration + 0.1
    lock = tomllib.loads((out / "config.lock.toml").read_text())
    assert lock["prevalences"] == {"other": 0.7, "eight": 0.3}


THREE = """
title = "Three digits"
[data]
dataset = "digits_three"
class_col = "label"
[[classifier]]
name = "network"
outputs = ["p_three", "p_five", "p_eight"]
[[utility]]
name = "costly eights"
decisions = ["three", "five", "eight", "ask"]
classes = ["three", "five", "eight"]
values = [[1, 0, -4], [0, 1, -4], [0, 0, 1], [0.5, 0.5, 0.5]]
[sampler]
chains = 2
warmup = 200
draws = 200
seed = 5
"""


def test_three_class_report_with_one_classifier(tmp_path, browser):
    """Probability vectors (simplex transform), a rectangular matrix, a lone classifier."""
    from selenium.webdriver.common.by import By

    (tmp_path / "three.toml").write_text(THREE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(["report", str(tmp_path / "three.toml"), "--out", str(tmp_path / "out"),
                       "--quiet"])  # fmt: skip
    assert status == 0
    out = tmp_path / "out"
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["classifier"]) == ["network"] and summary["prob_best"].item() == 1.0
    assert pd.read_csv(out / "superiority.csv").empty
    lock = tomllib.loads((out / "config.lock.toml").read_text())
    assert lock["classifier"][0]["transform"] == ["simplex"]
    # Always answering "ask" yields 0.5 for sure, so the expected-utility rule's long-run
    # utility cannot fall below it by more than integration and sampling noise.
    draws = xr.open_dataset(out / "draws.nc")["long_run_utility"].values
    assert draws.min() > 0.5 - 1e-2
    page = (out / "report.html").read_text()
    # decision 'ask' on the thresholds list: 0.5·P(three) + 0.5·P(five) + 0.5·P(eight)
    assert "&ldquo;ask&rdquo;: 0.5&middot;P(three) + 0.5&middot;P(five)" in page
    assert open_in_browser(browser, out / "report.html", tmp_path / "three.png") == []
    for section in SECTIONS:
        assert browser.find_element(By.ID, section).text.strip()


def test_config_names_each_shipped_dataset(tmp_path):
    """[data].dataset: every shipped set loads by name (no fit); another name is refused."""
    from yieldwise.datasets import load_digits_ten
    from yieldwise.report import DATASETS, ConfigError, load_config

    assert set(DATASETS) == {"digits_binary", "digits_three", "digits_ten"}
    names = list(load_digits_ten()["label"].cat.categories)
    ten = THREE.replace('"digits_three"', '"digits_ten"').replace(
        '["p_three", "p_five", "p_eight"]', str([f"p_{n}" for n in names])
    )
    # the identity matrix: utility 1 for naming the right digit
    values = np.eye(10, dtype=int).tolist()
    ten = ten.replace('["three", "five", "eight", "ask"]', str(names))
    ten = ten.replace('["three", "five", "eight"]', str(names))
    ten = ten.replace("[[1, 0, -4], [0, 1, -4], [0, 0, 1], [0.5, 0.5, 0.5]]", str(values))
    (tmp_path / "ten.toml").write_text(ten)
    config = load_config(tmp_path / "ten.toml")
    frame = config.table()  # checks the outputs' columns and the utility's classes
    assert config.dataset == "digits_ten" and frame.shape == (1079, 13)
    (tmp_path / "other.toml").write_text(THREE.replace('"digits_three"', '"digits_four"'))
    with pytest.raises(
        ConfigError,
        match=r"\[data\]\.dataset: expected one of 'digits_binary', 'digits_three', "
        r"'digits_ten', found 'digits_four'",
    ):
        load_config(tmp_path / "other.toml")


def test_two_by_two_matrices_in_any_row_order_or_degenerate(tmp_path):
    """A 2x2 matrix with its rows in the other order, one where a decision is best for
    every class, and one whose decisions tie: the report states each one's rule (before,
    it stopped after every fit on the first two, and on the third in the toolkit), and
    the swapped matrix's long-run utilities are the conventional one's (the same problem,
    the decisions' names exchanged)."""
    second = CONFIG.index(f"[[classifier]]\nname = '{EVIL}'")
    one = CONFIG[:second] + CONFIG[CONFIG.index("[sampler]") :]  # the forest, no matrices
    values = {"screening": "[[0, -10], [-1, 5]]", "swapped": "[[-1, 5], [0, -10]]",
              "always": "[[1, 0], [2, 1]]", "tied": "[[1, 0], [1, 0]]"}  # fmt: skip
    blocks = "".join(
        f'\n[[utility]]\nname = "{m}"\ndecisions = ["dismiss", "treat"]\n'
        f'classes = ["other", "eight"]\nvalues = {v}\n'
        for m, v in values.items()
    )
    load_digits_binary().iloc[::3].to_csv(tmp_path / "calibration.csv", index=False)
    (tmp_path / "config.toml").write_text(one.replace("[sampler]", blocks + "\n[sampler]"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out"),
                     "--quiet"]) == 0  # fmt: skip
    page = (tmp_path / "out" / "report.html").read_text()
    rule = "choose &ldquo;{}&rdquo; when P(eight) exceeds 0.0625, else &ldquo;{}&rdquo;"
    assert f"<li>screening: {rule.format('treat', 'dismiss')}</li>" in page
    assert f"<li>swapped: {rule.format('dismiss', 'treat')}</li>" in page
    assert "<li>always: choose &ldquo;treat&rdquo; whatever the probabilities" in page
    assert "<li>tied: both decisions yield the same for every class" in page
    assert "Utility matrices tied give both decisions the same utility" in page
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("matrix")
    assert summary.loc["swapped", "mean"] == pytest.approx(summary.loc["screening", "mean"],
                                                           rel=1e-12)  # fmt: skip


def test_a_classifier_without_own_decisions_gets_blank_metrics_not_a_failure(tmp_path):
    """Three classes and a classifier with one output column: the transducer and the
    long-run utility need no standard rule, so the report runs (it stopped after every
    fit before), its usual metrics are blank with the reason, and its rules comparison
    says there is no own rule; the other classifier's are there."""
    config = THREE.replace("seed = 5", 'seed = 5\nbackend = "laplace"').replace(
        "[[utility]]",
        '[[classifier]]\nname = "threes <only>"\noutputs = ["p_three"]\n\n[[utility]]',
    )
    (tmp_path / "config.toml").write_text(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out"),
                     "--quiet"]) == 0  # fmt: skip
    page = (tmp_path / "out" / "report.html").read_text()
    assert ("Left blank for threes &lt;only&gt;: 1 output column for 3 classes: no own "
            "decisions") in page  # fmt: skip
    assert "<h3>threes &lt;only&gt;</h3><p>No own rule to compare" in page
    assert "<h3>network</h3><p>Over " in page  # the other classifier's comparison
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert set(summary["classifier"]) == {"network", "threes <only>"}


def _metrics_section(page: str) -> str:
    start = page.index("<h2 id='metrics'>")
    return page[start : page.index("<h2", start + 1)]


def test_the_class_order_is_declared_not_taken_from_a_matrix_s_columns(tmp_path):
    """A matrix whose columns list the classes in the other order is the same matrix: with
    the order declared (classes = [...]) the report's standard decisions, metrics and
    long-run utilities are those of the conventional listing. Before, the first matrix's
    column order silently decided which class a one-column score points to (audit,
    2026-12-06: accuracy 0.92 became 0.08)."""
    second = CONFIG.index(f"[[classifier]]\nname = '{EVIL}'")
    one = CONFIG[:second] + CONFIG[CONFIG.index("[[utility]]") :]  # the forest only
    swapped = 'classes = ["other", "eight"]\n' + one.replace(
        'classes = ["other", "eight"]\nvalues = [[0, -10], [-1, 5]]',
        'classes = ["eight", "other"]\nvalues = [[-10, 0], [5, -1]]',
    ).replace(
        'classes = ["other", "eight"]\nvalues = [[1, 0], [0, 1]]',
        'classes = ["eight", "other"]\nvalues = [[0, 1], [1, 0]]',
    )
    load_digits_binary().iloc[::3].to_csv(tmp_path / "calibration.csv", index=False)
    pages, summaries = [], []
    for label, text in (("plain", one), ("swapped", swapped)):
        (tmp_path / f"{label}.toml").write_text(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(["report", str(tmp_path / f"{label}.toml"), "--out",
                         str(tmp_path / label), "--quiet"]) == 0  # fmt: skip
        pages.append((tmp_path / label / "report.html").read_text())
        summaries.append(pd.read_csv(tmp_path / label / "summary.csv"))
    plain, flipped = (_metrics_section(p) for p in pages)
    assert "(taken from [[utility]] &#x27;screening&#x27;; classes = [...] declares it)" in plain
    assert "(declared by classes = [...])" in flipped
    assert all("read as evidence for &#x27;eight&#x27;" in p for p in (plain, flipped))
    # the metrics tables themselves are identical; the forest's accuracy is high
    table = re.compile(r"<table.*?</table>", re.S)
    assert table.findall(plain) == table.findall(flipped)
    np.testing.assert_allclose(summaries[1]["mean"], summaries[0]["mean"], rtol=1e-12)


def test_the_terminal_and_the_page_state_the_class_order_in_one_sentence(tmp_path, capsys):
    """The sentence on the class order (which class a one-column output points to) is
    written once (report.config.class_order_sentence): the terminal prints it, the page
    escapes it, so the two cannot drift apart and a class name cannot inject markup."""
    from html import unescape

    from yieldwise.report import load_config
    from yieldwise.report.config import class_order_sentence

    evil = 'eight <b>&"'
    second = CONFIG.index(f"[[classifier]]\nname = '{EVIL}'")
    config = CONFIG[:second] + CONFIG[CONFIG.index("[[utility]]") :]  # the forest only
    config = config.replace('"eight"]', f"'{evil}']")
    assert config.count(f"'{evil}'") == 2  # both matrices name the class
    table = load_digits_binary().iloc[::3]
    table.assign(label=table["label"].astype(str).replace("eight", evil)).to_csv(
        tmp_path / "calibration.csv", index=False
    )
    (tmp_path / "config.toml").write_text(config)
    sentence = class_order_sentence(load_config(tmp_path / "config.toml"))
    assert sentence == (
        f"Class order ['other', {evil!r}] (taken from [[utility]] 'screening'; classes = "
        f"[...] declares it): a one-column output is read as evidence for {evil!r}, which "
        "the binary metrics also take as positive."
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out")]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "Class order" in line]
    assert said == [sentence]
    notes = re.findall(r"<p>(Class order .*?)</p>", (tmp_path / "out" / "report.html").read_text())
    assert [unescape(note) for note in notes] == [sentence]
    assert "<b>" not in notes[0] and "&lt;b&gt;&amp;&quot;" in notes[0]  # escaped


def test_matrices_may_name_the_classes_as_numbers_or_text(tmp_path):
    """Class labels 0 and 1 in the CSV, one matrix with TOML integers and one with text in
    the other order: both are the same classes (a report reads labels as text), each is
    reindexed by its own labels, and the run no longer stops after the fits with
    "classes holds label(s) [0, 1] that are not among the utility matrix's classes"."""
    table = load_digits_binary().iloc[::3]
    table = table.assign(is_eight=(table["label"] == "eight").astype(int))
    table.drop(columns=["label"]).to_csv(tmp_path / "calibration.csv", index=False)
    second = CONFIG.index(f"[[classifier]]\nname = '{EVIL}'")
    config = "classes = [0, 1]\n" + CONFIG[:second] + CONFIG[CONFIG.index("[[utility]]") :]
    config = (
        config.replace('class_col = "label"', 'class_col = "is_eight"')
        .replace(
            'classes = ["other", "eight"]\nvalues = [[0, -10], [-1, 5]]',
            "classes = [0, 1]\nvalues = [[0, -10], [-1, 5]]",
        )
        .replace(
            'classes = ["other", "eight"]\nvalues = [[1, 0], [0, 1]]',
            'classes = ["1", "0"]\nvalues = [[-10, 0], [5, -1]]',  # screening, columns swapped
        )
        .replace('name = "accuracy"', 'name = "screening, text"')
    )
    (tmp_path / "config.toml").write_text(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(tmp_path / "config.toml"), "--out", str(tmp_path / "out"),
                     "--quiet"]) == 0  # fmt: skip
    summary = pd.read_csv(tmp_path / "out" / "summary.csv").set_index("matrix")
    assert summary.loc["screening, text", "mean"] == pytest.approx(
        summary.loc["screening", "mean"], rel=1e-12
    )
    lock = tomllib.loads((tmp_path / "out" / "config.lock.toml").read_text())
    assert lock["classes"] == ["0", "1"]
    assert [u["classes"] for u in lock["utility"]] == [["0", "1"], ["0", "1"]]
