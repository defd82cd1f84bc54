"""Outputs are written whole, by one writer, and never over someone else's files (issue 17).

Real files and real processes throughout (no mocked file system). The command-line checks
here all stop before any fit, so no Stan sampling runs in this module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import yieldwise
from yieldwise._files import (
    MANIFEST,
    OutputTargetError,
    output_path,
    partial_folder,
    place_file,
    place_folder,
    read_manifest,
    target_lock,
    write_manifest,
)
from yieldwise.cli import main


def _env() -> dict[str, str]:
    root = str(Path(yieldwise.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.is_file()}


# ------------------------------------------------ item 1: one writer per target
def test_second_process_cannot_lock_a_target_and_is_told_who_holds_it(tmp_path):
    target = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from pathlib import Path
            from yieldwise._files import target_lock
            with target_lock(Path({str(target)!r})):
                print("locked", flush=True)
                sys.stdin.read()  # hold the lock until told to go
            """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(),
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputTargetError) as caught, target_lock(target):
            pass
        message = str(caught.value)
        assert f"another yieldwise run is writing it (pid {holder.pid} on " in message
        assert str(target) in message
    finally:
        holder.kill()  # killed, not ended cleanly: the kernel still releases its lock
        holder.wait(timeout=10)
    with target_lock(target):  # free again, although the holder left its lock file
        assert (tmp_path / ".out.lock").exists()
    assert not (tmp_path / ".out.lock").exists()  # removed by a clean exit


def test_final_rename_refuses_a_target_that_appeared_meanwhile(tmp_path):
    """The report's last step: a folder that appeared while it was written stays as it is."""
    target = tmp_path / "out"
    partial = partial_folder(target)
    (partial / "summary.csv").write_text("ours")
    write_manifest(partial, "test")
    target.mkdir()  # someone made it meanwhile (empty: a plain rename would replace it)
    with pytest.raises(OutputTargetError, match="appeared while this run was writing"):
        place_folder(partial, target, overwrite=False)
    assert list(target.iterdir()) == []  # theirs, untouched
    assert (partial / "summary.csv").read_text() == "ours"  # the caller removes it
    # a file target likewise: the new file never replaces one that appeared
    (tmp_path / "t.nc").write_text("theirs")
    ours = tmp_path / ".t.nc.partial-x"
    ours.write_text("ours")
    with pytest.raises(OutputTargetError, match="appeared while this run was writing"):
        place_file(ours, tmp_path / "t.nc", overwrite=False)
    assert (tmp_path / "t.nc").read_text() == "theirs" and not ours.exists()


# ----------------------------------- item 4: --overwrite knows its own reports
def _report(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    write_manifest(folder, "test")


def test_overwrite_replaces_a_report_and_deletes_only_the_files_it_lists(tmp_path):
    earlier = tmp_path / "earlier"
    _report(earlier, {"summary.csv": "old", "report.html": "old", "draws.nc": "old"})
    theirs = tmp_path / ".earlier.partial"  # a user's folder with the old work-folder name
    theirs.mkdir()
    (theirs / "notes.txt").write_text("precious")
    new = partial_folder(earlier)
    for name in ("summary.csv", "report.html"):
        (new / name).write_text("new")
    write_manifest(new, "test")
    with pytest.raises(OutputTargetError, match="was left as it is"):
        place_folder(new, earlier, overwrite=False)
    place_folder(new, earlier, overwrite=True)
    assert _files(earlier) == {
        "report.html": "new", "summary.csv": "new", MANIFEST: (earlier / MANIFEST).read_text()
    }  # fmt: skip
    assert set(read_manifest(earlier)["files"]) == {"report.html", "summary.csv"}
    assert (theirs / "notes.txt").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".earlier.partial", "earlier"]


def test_overwrite_replaces_a_report_written_before_manifests_existed(tmp_path):
    """A folder holding exactly the files an earlier yieldwise report wrote (no manifest)."""
    earlier = tmp_path / "demo-output"
    earlier.mkdir()
    old = ["config.lock.toml", "draws.nc", "report.html", "summary.csv", "superiority.csv",
           "transducer_forest.nc"]  # fmt: skip
    for name in old:
        (earlier / name).write_text("old")
    new = partial_folder(earlier)
    (new / "summary.csv").write_text("new")
    write_manifest(new, "test")
    place_folder(new, earlier, overwrite=True)
    assert sorted(_files(earlier)) == sorted([MANIFEST, "summary.csv"])
    # with anything else beside those files it is not recognised, and nothing is deleted
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    for name in [*old, "thesis.tex"]:
        (legacy / name).write_text("old")
    with pytest.raises(OutputTargetError, match=f"it has no {MANIFEST}"):
        place_folder(partial_folder(legacy), legacy, overwrite=True)
    assert len(_files(legacy)) == 7


CONFIG = """
[data]
calibration = "calibration.csv"
class_col = "label"
[[classifier]]
name = "forest"
outputs = ["forest_votes"]
[[utility]]
name = "u"
decisions = ["other", "eight"]
classes = ["other", "eight"]
values = [[1, 0], [0, 1]]
[sampler]
chains = 2
"""


@pytest.fixture
def config(tmp_path):
    from yieldwise.datasets import load_digits_binary

    load_digits_binary().iloc[:60].to_csv(tmp_path / "calibration.csv", index=False)
    (tmp_path / "config.toml").write_text(CONFIG)
    return tmp_path / "config.toml"


def test_overwrite_refuses_folders_yieldwise_did_not_write_before_any_fit(config, tmp_path, capsys):
    # a folder that merely holds a config.lock.toml (the old marker) is not a report
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "config.lock.toml").write_text("mine")
    (theirs / "thesis.tex").write_text("precious")
    command = ["report", str(config), "--out", str(theirs)]
    assert main(command) == 2
    assert "exists already" in capsys.readouterr().err
    assert main([*command, "--overwrite"]) == 2
    assert f"it has no {MANIFEST}" in capsys.readouterr().err
    assert _files(theirs) == {"config.lock.toml": "mine", "thesis.tex": "precious"}
    # an earlier report that the user added a file to: nothing is deleted
    mixed = tmp_path / "mixed"
    _report(mixed, {"summary.csv": "old"})
    (mixed / "notes.txt").write_text("precious")
    assert main(["report", str(config), "--out", str(mixed), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "also 1 entry yieldwise did not write (notes.txt)" in err
    assert _files(mixed)["notes.txt"] == "precious" and _files(mixed)["summary.csv"] == "old"
    # a manifest of a newer format is not trusted
    manifest = json.loads((mixed / MANIFEST).read_text())
    (mixed / "notes.txt").unlink()
    (mixed / MANIFEST).write_text(json.dumps({**manifest, "format_version": 99}))
    assert main(["report", str(config), "--out", str(mixed), "--overwrite"]) == 2
    assert "version 99, which this yieldwise" in capsys.readouterr().err
    assert not list(tmp_path.glob(".*"))  # no work folder, no lock left by the refusals


# -------------------------------------------------- item 8: --out of no name
@pytest.mark.parametrize("out", [".", "..", "/", ""])
def test_out_naming_the_current_folder_or_nothing_is_refused_before_any_fit(
    config, tmp_path, monkeypatch, capsys, out
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["report", str(config), "--out", out, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and ("current folder" in err or "no file or folder" in err
                               or "is empty" in err)  # fmt: skip
    assert list(work.iterdir()) == []


def test_output_path_is_absolute_and_keeps_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert output_path("reports/new") == tmp_path / "reports" / "new"
    assert output_path("./x/../y") == tmp_path / "y"


# ------------------------------------------------ item 3: fit --out is guarded
def _fit_argv(table: Path, out: Path, *more: str) -> list[str]:
    return ["fit", str(table), "--class-col", "label", "--output-cols", "forest_votes",
            "--out", str(out), "--quiet", *more]  # fmt: skip


def test_fit_never_replaces_its_input_and_others_only_with_overwrite(config, tmp_path, capsys):
    table = tmp_path / "calibration.csv"
    before = table.read_bytes()
    for more in ([], ["--overwrite"]):
        assert main(_fit_argv(table, table, *more)) == 2
        assert "is the calibration file" in capsys.readouterr().err
    link = tmp_path / "link.csv"
    link.symlink_to(table)  # the same file under another name
    assert main(_fit_argv(table, link, "--overwrite")) == 2
    assert "is the calibration file" in capsys.readouterr().err
    assert table.read_bytes() == before
    existing = tmp_path / "model.nc"
    existing.write_text("an earlier file")
    assert main(_fit_argv(table, existing)) == 2
    assert "exists already; choose another --out, or pass --overwrite" in capsys.readouterr().err
    assert existing.read_text() == "an earlier file"
    assert main(_fit_argv(table, tmp_path)) == 2  # a folder
    assert "is a folder" in capsys.readouterr().err


# -------------------------------------- item 10: the command line's own values
def test_fit_rejects_the_class_column_as_an_output_and_a_zero_chain_count(config, tmp_path, capsys):
    table = tmp_path / "calibration.csv"
    argv = ["fit", str(table), "--class-col", "label", "--output-cols", "label",
            "--out", str(tmp_path / "t.nc")]  # fmt: skip
    assert main(argv) == 2
    assert "--output-cols lists 'label', which is also --class-col" in capsys.readouterr().err
    assert main(_fit_argv(table, tmp_path / "t.nc", "--chains", "0")) == 2
    assert "--chains: expected an integer >= 1, found 0" in capsys.readouterr().err
    assert not (tmp_path / "t.nc").exists()


def test_report_options_of_zero_are_the_values_given(config, tmp_path, capsys):
    """``--chains 0`` is not "not given": it overrides the configuration's 2, and fails."""
    argv = ["report", str(config), "--out", str(tmp_path / "out")]
    assert main([*argv, "--chains", "0"]) == 2
    assert "--chains: expected an integer >= 1, found 0" in capsys.readouterr().err
    from yieldwise.cli import _overrides, build_parser

    args = build_parser().parse_args([*argv, "--warmup", "0"])
    assert _overrides(args) == {"warmup": 0}


def test_unavailable_backend_is_a_usage_error_before_any_fit(config, tmp_path, capsys):
    from yieldwise.backends import available_backends

    if "cmdstanpy" in available_backends():
        pytest.skip("CmdStan is installed here, so the cmdstanpy backend is available")
    assert main(_fit_argv(tmp_path / "calibration.csv", tmp_path / "t.nc",
                          "--backend", "cmdstanpy")) == 2  # fmt: skip
    assert "--backend: The cmdstanpy backend is unavailable" in capsys.readouterr().err
    text = config.read_text().replace("chains = 2", 'chains = 2\nbackend = "cmdstanpy"')
    config.write_text(text)
    assert main(["report", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "config.toml: [sampler].backend: The cmdstanpy backend is unavailable" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_write_manifest_lists_every_file_with_its_digest(tmp_path):
    import hashlib

    (tmp_path / "a.csv").write_text("1,2\n")
    (tmp_path / "b.nc").write_bytes(b"\x00\x01")
    write_manifest(tmp_path, "0.0")
    files = read_manifest(tmp_path)["files"]
    assert files == {
        "a.csv": {"bytes": 4, "sha256": hashlib.sha256(b"1,2\n").hexdigest()},
        "b.nc": {"bytes": 2, "sha256": hashlib.sha256(b"\x00\x01").hexdigest()},
    }
    record = json.loads((tmp_path / MANIFEST).read_text())
    record["files"]["../escape"] = {"bytes": 0, "sha256": ""}
    (tmp_path / MANIFEST).write_text(json.dumps(record))
    with pytest.raises(OutputTargetError, match="not plain file names"):
        read_manifest(tmp_path)


def test_a_failed_run_removes_the_folders_it_made_and_a_file_in_the_way_is_named(
    config, tmp_path, capsys
):
    """--out in folders that do not exist yet: they are made for the run, and a run that
    fails (here a column the table lacks, found after the folders are made) removes
    them again, leaving what was there before. A file where a folder should be is
    refused by name (it was a bare '[Errno 17] File exists')."""
    before = sorted(p.name for p in tmp_path.iterdir())
    broken = config.read_text().replace('outputs = ["forest_votes"]', 'outputs = ["nope"]')
    bad = tmp_path / "bad.toml"
    bad.write_text(broken)
    assert main(["report", str(bad), "--out", str(tmp_path / "a" / "b" / "report")]) == 2
    assert "names column 'nope'" in capsys.readouterr().err
    table = tmp_path / "calibration.csv"
    argv = ["fit", str(table), "--class-col", "label", "--output-cols", "nope", "--out",
            str(tmp_path / "c" / "d" / "t.nc"), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    assert "names column(s) ['nope']" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "bad.toml"])
    (tmp_path / "afile").write_text("mine")
    target = tmp_path / "afile" / "sub" / "out.nc"
    for argv in (["report", str(config), "--out", str(target)], _fit_argv(table, target)):
        assert main(argv) == 2
        assert f"--out {target}: {tmp_path / 'afile'} is a file, not a folder" in (
            capsys.readouterr().err
        )
    assert (tmp_path / "afile").read_text() == "mine"


def test_fit_names_its_option_or_file_for_bad_components_empty_tables_and_infinities(
    config, tmp_path, capsys
):
    """Found by a new user (2026-12-06): each of these stops before any fit with the
    option or the file named (before: int()'s own message, "not numeric (dtype object)"
    for a table with no rows, and a 0-based (row, column) index for an infinity)."""
    table = tmp_path / "calibration.csv"
    for value in ("abc", "0"):
        assert main(_fit_argv(table, tmp_path / "t.nc", "--components", value)) == 2
        assert f"--components: expected \"auto\" or an integer >= 1, found '{value}'" in (
            capsys.readouterr().err
        )
    empty = tmp_path / "empty.csv"
    empty.write_text("label,forest_votes\n")
    assert main(_fit_argv(empty, tmp_path / "t.nc")) == 2
    assert "empty.csv: has a header but no data rows" in capsys.readouterr().err
    infinite = tmp_path / "inf.csv"
    infinite.write_text("label,forest_votes\nother,0.1\neight,inf\nother,0.3\n")
    assert main(_fit_argv(infinite, tmp_path / "t.nc")) == 2
    message = capsys.readouterr().err
    assert "column 'forest_votes' has 1 infinite value(s), first in data row 2 (line 3" in message
    assert not (tmp_path / "t.nc").exists()
