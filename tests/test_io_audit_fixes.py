"""Saving and loading: the fixes of the audit of transducer files, ``_files`` and report
outputs (/tmp/s56/audit_io/FINDINGS.md, items 1-5, 7-12, 14 and 15). Transducers come
from ``Transducer.from_draws`` (no Stan); files are real NetCDF and CSV files, altered
as the audit altered them."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import warnings
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from yieldwise import Transducer
from yieldwise._files import (
    MANIFEST,
    NAME_MAX,
    OutputTargetError,
    check_replaceable,
    hidden_name,
    partial_file,
    place_folder,
    read_manifest,
    read_table,
    target_lock,
    write_manifest,
)
from yieldwise.transducer import io
from yieldwise.transducer.io import FORMAT_VERSION, OLDEST_READABLE, TransducerFileError

W = np.array([[0.6, 0.4], [0.5, 0.5]])
MU = np.array([[[-1.0], [1.5]], [[-0.5], [1.0]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])
Y = np.array([-2.0, -0.3, 0.0, 0.4, 2.5])


def make(labels) -> Transducer:
    """A fitted 1-D transducer from given draws on 30 scores, one class per score in turn."""
    labels = tuple(labels)
    alpha = np.random.default_rng(0).dirichlet(np.ones(len(labels)), size=(1, 2, 2))
    scores = np.linspace(-3, 3, 30)
    truth = np.empty(30, dtype=object)
    truth[:] = [labels[i % len(labels)] for i in range(30)]
    return Transducer.from_draws(
        {"w": W[None], "alpha": alpha, "mu": MU[None], "sigma": SIGMA[None]},
        pd.DataFrame({"score": scores}), truth, labels, output_transform="identity",
        resolution=None,
    )  # fmt: skip


@pytest.fixture
def saved(tmp_path):
    t = make(("neg", "pos"))
    return t, t.save(tmp_path / "t.nc")


def _altered(path: Path, change, name: str = "altered.nc") -> Path:
    """A copy of the file with one change made through ArviZ/xarray."""
    data = az.from_netcdf(str(path))
    for group in data.groups():
        getattr(data, group).load()
    change(data)
    out = path.with_name(name)
    data.to_netcdf(str(out))
    return out


def _set_attr(name, value):
    return lambda d: d.posterior.attrs.__setitem__(name, value)


def _drop_attr(name):
    return lambda d: d.posterior.attrs.pop(name)


# ------------------------------------------- item 1: a damaged data block
def test_a_damaged_data_block_is_a_transducer_file_error_naming_the_file(saved, open_files):
    h5py = pytest.importorskip("h5py")
    _, path = saved
    with h5py.File(path, "r") as f:
        info = f["posterior/mu"].id.get_chunk_info(0)  # mu's compressed chunk
    raw = bytearray(path.read_bytes())
    raw[info.byte_offset + info.size // 2] ^= 0x10  # one bit: zlib's checksum fails
    path.write_bytes(bytes(raw))
    with pytest.raises(TransducerFileError) as caught:
        Transducer.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: cannot be read: part of its data is damaged (OSError: ")
    assert "Restore it from a copy, or save the transducer again" in message
    if os.path.isdir("/proc/self/fd"):
        assert open_files(path) == []  # closed although the reading failed


# -------------------------------------- item 2: the version is read first
def _v8_renamed(d):
    d.posterior.attrs["yieldwise_format_version"] = 8
    d.posterior.attrs["yieldwise_labels"] = d.posterior.attrs.pop("yieldwise_classes")


def _v8_other_groups(d):
    d.posterior.attrs["yieldwise_format_version"] = 8
    del d.observed_data


def _v8_transform(d):
    d.posterior.attrs["yieldwise_format_version"] = 8
    record = json.loads(d.posterior.attrs["yieldwise_transform"])
    del record["squeeze_n"]
    d.posterior.attrs["yieldwise_transform"] = json.dumps(record)


@pytest.mark.parametrize("change", [_v8_renamed, _v8_other_groups, _v8_transform])
def test_a_newer_file_is_refused_as_newer_whatever_its_layout(saved, change):
    _, path = saved
    bad = _altered(path, change)
    with pytest.raises(TransducerFileError) as caught:
        Transducer.load(bad)
    assert str(caught.value) == (
        f"{bad}: attribute 'yieldwise_format_version' is 8: written by a newer yieldwise "
        f"(format version 8; this one reads format versions {OLDEST_READABLE} to "
        f"{FORMAT_VERSION}); upgrade yieldwise to load it"
    )


# ------------------------------------- item 3: integer labels beyond 64 bits
@pytest.mark.parametrize(
    ("labels", "coordinate"),
    [
        ((2**70, 1), ["1180591620717411303424", "1"]),
        ((1, 2**70), ["1", "1180591620717411303424"]),
        ((-1, 2**63), ["-1", "9223372036854775808"]),  # no one integer dtype holds both
    ],
)
def test_integer_labels_beyond_64_bits_save_and_load_exactly(tmp_path, labels, coordinate):
    t = make(labels)
    loaded = Transducer.load(t.save(tmp_path / "big.nc"))
    assert loaded.classes_ == labels
    assert [type(c) for c in loaded.classes_] == [int, int]
    np.testing.assert_array_equal(loaded.predict_proba(Y), t.predict_proba(Y))
    # the file's coordinate holds the labels' text (the JSON attribute holds the ints)
    with xr.open_dataset(tmp_path / "big.nc", group="posterior") as posterior:
        assert posterior["class"].values.tolist() == coordinate
    assert t.posterior_.posterior["class"].values.tolist() == coordinate


def test_integer_labels_of_one_dtype_stay_integer_coordinates(tmp_path):
    t = make((0, 2**64 - 1))  # uint64 holds both
    with xr.open_dataset(t.save(tmp_path / "u.nc"), group="posterior") as posterior:
        assert posterior["class"].dtype == np.uint64
        assert posterior["class"].values.tolist() == [0, 2**64 - 1]


# ------------------------------------------ item 4: the fit record is checked
def _json_attr(name, edit):
    def change(d):
        record = json.loads(d.posterior.attrs[name])
        edit(record)
        d.posterior.attrs[name] = json.dumps(record)

    return change


def _drop_stat(name):
    return lambda d: d.sample_stats.__delitem__(name)


MISSING = "of the posterior group is missing; the file was not written by Transducer.save"
RECORD_CASES = [
    (_drop_attr("yieldwise_sampler"), f"attribute 'yieldwise_sampler' {MISSING}"),
    (_set_attr("yieldwise_sampler", "{oops"),
     "attribute 'yieldwise_sampler': Expecting property name enclosed in double quotes"),
    (_set_attr("yieldwise_sampler", "[1]"),
     "attribute 'yieldwise_sampler': expected JSON dict, found list"),
    (_json_attr("yieldwise_sampler", lambda r: r.update(likelihood="dense")),
     "attribute 'yieldwise_sampler': 'likelihood' must be a JSON object, found 'dense'"),
    (_json_attr("yieldwise_sampler", lambda r: r.update(max_treedepth="eleven")),
     "attribute 'yieldwise_sampler': 'max_treedepth': expected an integer, found 'eleven'"),
    (_json_attr("yieldwise_sampler", lambda r: r.update(max_treedepth=0)),
     "attribute 'yieldwise_sampler': 'max_treedepth': expected an integer >= 1, found 0"),
    (lambda d: (_json_attr("yieldwise_sampler", lambda r: r.pop("max_treedepth"))(d),
                _json_attr("yieldwise_settings", lambda r: r.update(max_treedepth=None))(d)),
     "attribute 'yieldwise_sampler': the sampler record lacks 'max_treedepth' and the "
     "settings' is None"),
    (_json_attr("yieldwise_sampler", lambda r: r.update(pareto_k="high")),
     "attribute 'yieldwise_sampler': expected a number, found 'high'"),
    (_drop_attr("yieldwise_backend_version"), f"attribute 'yieldwise_backend_version' {MISSING}"),
    (_drop_attr("yieldwise_stan_version"), f"attribute 'yieldwise_stan_version' {MISSING}"),
    (_set_attr("yieldwise_stan_version", 3), "attribute 'yieldwise_stan_version': expected text"),
    (_json_attr("yieldwise_settings", lambda r: r.pop("max_treedepth")),
     "attribute 'yieldwise_settings': the settings record lacks 'max_treedepth'"),
    (_json_attr("yieldwise_settings", lambda r: r.update(max_treedepth="ten")),
     "attribute 'yieldwise_settings': the setting 'max_treedepth': expected an integer, "
     "found 'ten'"),
    (_set_attr("yieldwise_design", json.dumps({"kind": "grid"})),
     "attribute 'yieldwise_design': 'shape' must be a list of positive integers"),
    (_set_attr("yieldwise_design", json.dumps({"kind": "hexagons", "shape": [3]})),
     "attribute 'yieldwise_design': expected {} (given draws) or a record whose 'kind' is "
     "'grid' or 'centres', found kind 'hexagons'"),
    (_drop_stat("n_steps"), "variable sample_stats/n_steps is missing"),
    (_drop_stat("lp"), "variable sample_stats/lp is missing"),
    (_drop_stat("energy"), "variable sample_stats/energy is missing"),
    (_drop_stat("acceptance_rate"), "variable sample_stats/acceptance_rate is missing"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), RECORD_CASES)
def test_a_damaged_fit_record_is_refused_on_load_not_later(saved, change, message):
    """Before, each of these loaded, then repr, sampler_summary, diagnostics or marginal
    raised a bare KeyError or JSONDecodeError."""
    _, path = saved
    bad = _altered(path, change)
    with pytest.raises(TransducerFileError) as caught:
        Transducer.load(bad)
    assert str(caught.value).startswith(f"{bad}: {message}")


def test_a_file_with_a_grid_design_and_its_record_loads_and_describes_itself(saved):
    _, path = saved
    design = {"kind": "grid", "shape": [7]}
    good = _altered(path, _set_attr("yieldwise_design", json.dumps(design)))
    loaded = Transducer.load(good)
    assert "kernels: 2 (grid 7)" in repr(loaded)
    assert loaded.sampler_summary()["max_treedepth_hits"] == 0


# ---------------------------------------- item 5: an ArviZ export of posterior_
def test_posterior_carries_the_format_version_so_an_arviz_export_loads(tmp_path):
    t = make(("neg", "pos"))
    assert t.posterior_.posterior.attrs["yieldwise_format_version"] == FORMAT_VERSION
    t.posterior_.to_netcdf(str(tmp_path / "export.nc"))
    loaded = Transducer.load(tmp_path / "export.nc")
    assert loaded.classes_ == ("neg", "pos")
    np.testing.assert_array_equal(loaded.predict_proba(Y), t.predict_proba(Y))


def test_a_current_file_without_the_format_attribute_is_not_called_the_old_model(saved):
    _, path = saved
    bad = _altered(path, _drop_attr("yieldwise_format_version"))
    with pytest.raises(TransducerFileError) as caught:
        Transducer.load(bad)
    message = str(caught.value)
    assert message.startswith(
        f"{bad}: attribute 'yieldwise_format_version' is absent, yet the file holds the "
        f"model of format versions {OLDEST_READABLE} to {FORMAT_VERSION} (its attribute "
        "'yieldwise_design'), so it was not written by Transducer.save"
    )
    assert "Save the fitted transducer with Transducer.save" in message
    assert "free-location" not in message and "Refit" not in message


def test_a_file_of_the_old_model_is_still_told_to_refit(saved):
    _, path = saved
    old = _altered(path, lambda d: (d.posterior.attrs.pop("yieldwise_format_version"),
                                    d.posterior.attrs.pop("yieldwise_design")))  # fmt: skip
    with pytest.raises(TransducerFileError, match=r"is absent, so the file is taken for format "
                       r"version 1 .*free-location mixture.*Refit the transducer"):  # fmt: skip
        Transducer.load(old)


# ------------------------------- item 7: errors name the user's path, long names
def test_a_failed_write_names_the_users_path_not_the_hidden_file(saved, monkeypatch):
    """As h5py fails in a folder it may not write in (``/sys`` as root, a 0555 folder
    otherwise): the error named the hidden partial file."""
    t, path = saved
    target = path.parent / "new.nc"

    def refuse(self, filename, *args, **kwargs):
        raise PermissionError(
            13, f"Unable to synchronously create file (unable to open file: name = "
                f"'{filename}', errno = 13, error message = 'Permission denied')"
        )  # fmt: skip

    monkeypatch.setattr(type(t.posterior_), "to_netcdf", refuse)
    with pytest.raises(PermissionError) as caught:
        t.save(target)
    message = str(caught.value)
    assert message == (
        f"[Errno 13] {target}: cannot write the transducer file (Permission denied); check "
        f"that the folder {path.parent} exists, is writable and has room, or choose "
        "another path"
    )
    assert ".partial" not in message
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.nc"]


def test_a_writers_error_without_a_code_names_the_users_path(saved, monkeypatch):
    t, path = saved
    target = path.parent / "new.nc"

    def fail(self, filename, *args, **kwargs):
        Path(filename).write_bytes(b"half")  # a partial file the failure leaves
        raise OSError(f"Can't synchronously write data (file write failed: name = '{filename}')")

    monkeypatch.setattr(type(t.posterior_), "to_netcdf", fail)
    with pytest.raises(OSError) as caught:
        t.save(target)
    assert type(caught.value) is OSError and caught.value.errno is None
    assert str(caught.value) == (
        f"{target}: cannot write the transducer file (Can't synchronously write data (file "
        f"write failed: name = '{target}')); check that the folder {path.parent} exists, is "
        "writable and has room, or choose another path"
    )
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.nc"]  # the partial removed


def test_a_long_but_legal_name_saves_and_loads(saved):
    t, path = saved
    target = path.parent / ("x" * 250 + ".nc")  # 253 bytes: the system allows 255
    assert t.save(target) == target
    np.testing.assert_array_equal(Transducer.load(target).predict_proba(Y), t.predict_proba(Y))
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(["t.nc", target.name])


def test_a_name_too_long_for_the_system_is_named_with_the_cause(saved):
    t, path = saved
    target = path.parent / ("y" * 300 + ".nc")
    with pytest.raises(OSError) as caught:
        t.save(target)
    assert str(caught.value) == (
        f"[Errno 36] {target}: cannot write the transducer file (File name too long); "
        "choose a shorter name"
    )
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.nc"]


def test_hidden_names_fit_the_systems_limit_and_stay_distinct():
    assert hidden_name("t.nc", "lock") == ".t.nc.lock"  # short names as before
    assert hidden_name("t.nc", "partial-", 8) == ".t.nc.partial-"
    a, b = "é" * 126 + "a.nc", "é" * 126 + "b.nc"  # 256 bytes each, differing at the end
    for tag, room in (("lock", 0), ("partial-", 8), ("partial-0123456789ab", 0)):
        names = [hidden_name(n, tag, room) for n in (a, b)]
        assert all(len(os.fsencode(n)) + room <= NAME_MAX for n in names)
        assert all(n.startswith(".éé") and n.endswith(f".{tag}") for n in names)
        assert names[0] != names[1]
        assert names == [hidden_name(n, tag, room) for n in (a, b)]  # the same each time


def test_the_lock_and_partial_files_of_a_long_target_can_be_made(tmp_path):
    """``yieldwise fit --out <253 characters>.nc`` stopped at its lock file (errno 36)."""
    target = tmp_path / ("z" * 250 + ".nc")
    with target_lock(target):
        partial = partial_file(target)
        assert partial.parent == tmp_path and partial.exists()
        assert len(os.listdir(tmp_path)) == 2  # the lock and the partial file
    partial.unlink()
    assert os.listdir(tmp_path) == []


# -------------------------------------- item 8: a comma at the end of every row
def test_a_trailing_comma_on_every_row_reads_the_columns_as_written(tmp_path):
    path = tmp_path / "trailing.csv"
    path.write_text("label,score\n01,0.1,\n1,0.2,\n01,0.3, \n")
    frame = read_table(path, label_columns=["label"])
    assert list(frame.columns) == ["label", "score"]
    assert frame["label"].tolist() == ["01", "1", "01"]  # as written, not shifted
    assert frame["score"].tolist() == [0.1, 0.2, 0.3]
    assert isinstance(frame.index, pd.RangeIndex)
    path.write_text("label,score\na,0.1,,\nb,0.2,,\n")  # two empty fields
    frame = read_table(path, label_columns=["label"])
    assert frame.to_dict("list") == {"label": ["a", "b"], "score": [0.1, 0.2]}


def test_values_beyond_the_header_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "extra.csv"
    path.write_text("label,score\na,0.1,\nb,0.2,7\n")
    with pytest.raises(ValueError) as caught:
        read_table(path, label_columns=["label"])
    assert str(caught.value) == (
        f"{path}: its data rows have 3 fields but its header names 2 column(s) ['label', "
        "'score']; the fields past the header's are not empty (first in data row 2, line 3 "
        "of the file). Name every column in the header, or remove the extra fields"
    )


# ------------------------- item 9: a folder where the manifest lists a file
def _report_folder(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    write_manifest(folder, "0")
    return folder


def test_a_folder_in_place_of_a_listed_file_is_refused_before_anything_moves(tmp_path):
    old = _report_folder(tmp_path / "old", {"report.html": "x"})
    (old / "report.html").unlink()
    (old / "report.html").mkdir()
    (old / "report.html" / "notes.txt").write_text("mine")
    new = _report_folder(tmp_path / ".new", {"report.html": "y"})
    with pytest.raises(OutputTargetError) as caught:
        place_folder(new, old, overwrite=True)
    assert str(caught.value) == (
        f"{old}: holds an earlier yieldwise report whose manifest lists report.html as "
        "file(s) yieldwise wrote, but they are now folders or links, which yieldwise did "
        "not write; --overwrite deletes only its own files, so move those elsewhere or "
        "choose another output"
    )
    assert (old / "report.html" / "notes.txt").read_text() == "mine"  # untouched
    assert (new / "report.html").read_text() == "y"  # kept for the caller to remove
    assert sorted(p.name for p in tmp_path.iterdir()) == [".new", "old"]  # nothing hidden


def test_a_link_in_place_of_a_listed_file_is_refused(tmp_path):
    old = _report_folder(tmp_path / "old", {"summary.csv": "x"})
    (old / "summary.csv").unlink()
    (old / "summary.csv").symlink_to(tmp_path / "elsewhere.csv")
    with pytest.raises(OutputTargetError, match=r"lists summary.csv as file\(s\) yieldwise"):
        check_replaceable(old)


def test_a_folder_appearing_after_the_check_leaves_the_earlier_report_aside_with_a_warning(
    tmp_path, monkeypatch
):
    """The new report is in place by then: the run succeeds, with a warning naming the
    hidden folder that still holds what yieldwise did not write."""
    from yieldwise import _files

    old = _report_folder(tmp_path / "old", {"report.html": "x", "summary.csv": "s"})
    new = _report_folder(tmp_path / ".new", {"report.html": "y"})
    checked = _files.check_replaceable

    def then_replaced(folder, option="--overwrite"):
        manifest = checked(folder, option)
        (folder / "report.html").unlink()
        (folder / "report.html").mkdir()  # after the check, before the removal
        return manifest

    monkeypatch.setattr(_files, "check_replaceable", then_replaced)
    with pytest.warns(UserWarning, match=r"still holds \['report.html'\], which yieldwise did"):
        place_folder(new, old, overwrite=True)
    assert (old / "report.html").read_text() == "y"  # the new report is there
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(".old.replaced-")]
    assert len(aside) == 1 and sorted(p.name for p in aside[0].iterdir()) == ["report.html"]


# ------------------------------------ item 10: manifest versions 0, -1, true
@pytest.mark.parametrize("version", [0, -1, True, 2, 1.0, None])
def test_a_manifest_of_an_unknown_version_is_refused(tmp_path, version):
    folder = _report_folder(tmp_path / "r", {"summary.csv": "x"})
    record = json.loads((folder / MANIFEST).read_text())
    record["format_version"] = version
    (folder / MANIFEST).write_text(json.dumps(record))
    with pytest.raises(OutputTargetError) as caught:
        read_manifest(folder)
    assert str(caught.value) == (
        f"{folder / MANIFEST}: format 'yieldwise report folder' version {version!r}, which "
        "this yieldwise (it reads format 'yieldwise report folder' versions 1 to 1) does "
        "not know; it leaves the folder alone"
    )


# -------------------------------- item 11: report files carry and check a version
def test_draws_nc_carries_its_format_and_version(tmp_path):
    from yieldwise import UtilityMatrix, compare
    from yieldwise.report.job import _draws

    utility = UtilityMatrix([[1, 0], [0, 1]], decisions=["n", "p"], classes=["neg", "pos"])
    comparison = compare({"a": make(("neg", "pos"))}, {"accuracy": utility})
    draws = _draws({"digits": comparison}, "9.9.9")
    expected = {"yieldwise_format": "yieldwise report draws", "yieldwise_format_version": 1,
                "yieldwise_version": "9.9.9"}  # fmt: skip
    assert draws.attrs == expected
    draws.to_netcdf(tmp_path / "draws.nc")
    with xr.open_dataset(tmp_path / "draws.nc") as again:
        assert again.attrs == expected


def test_read_report_csv_refuses_a_csv_that_is_no_report_table(tmp_path):
    from yieldwise.report import read_report_csv

    path = tmp_path / "foreign.csv"
    path.write_text("x,y\n1,2\n")
    with pytest.raises(ValueError) as caught:
        read_report_csv(path)
    assert str(caught.value) == (
        f"{path}: is not a table of a yieldwise report: a report's tables have the columns "
        "(summary.csv ['classifier', 'mean']; superiority.csv ['classifier', 'versus', "
        "'prob_superiority'], and more), but its columns are ['x', 'y']; give the "
        f"summary.csv or superiority.csv of a report folder (listed in its {MANIFEST})"
    )
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=rf"^{empty}: cannot read it as a report's CSV table"):
        read_report_csv(empty)
    with pytest.raises(FileNotFoundError, match=rf"^{tmp_path / 'none.csv'}: no such file"):
        read_report_csv(tmp_path / "none.csv")


def test_read_report_csv_checks_the_folders_manifest(tmp_path):
    from yieldwise.report import read_report_csv

    table = "dataset,matrix,classifier,mean\nd,m,NA,0.5\n"
    folder = _report_folder(tmp_path / "r", {"summary.csv": table})
    frame = read_report_csv(folder / "summary.csv")
    assert frame.to_dict("list") == {"dataset": ["d"], "matrix": ["m"], "classifier": ["NA"],
                                     "mean": [0.5]}  # fmt: skip
    (folder / "copy.csv").write_text(table)  # not the report's
    with pytest.raises(ValueError, match=r"copy.csv: its folder's yieldwise-manifest.json does "
                       r"not list it, so the report there did not write it"):  # fmt: skip
        read_report_csv(folder / "copy.csv")
    (folder / "summary.csv").write_text(table.replace("0.5", "0.6"))
    recorded = hashlib.sha256(table.encode()).hexdigest()
    with pytest.raises(ValueError) as caught:
        read_report_csv(folder / "summary.csv")
    assert str(caught.value).startswith(f"{folder / 'summary.csv'}: differs from the file the "
                                        "report wrote (SHA-256 ")  # fmt: skip
    assert f"records {recorded}): it was changed or replaced since" in str(caught.value)
    record = json.loads((folder / MANIFEST).read_text())
    record["format_version"] = 0
    (folder / MANIFEST).write_text(json.dumps(record))
    with pytest.raises(OutputTargetError, match="version 0, which this yieldwise"):
        read_report_csv(folder / "summary.csv")


# --------------------------------------- item 12: the example's CSV honours the umask
def test_partial_files_and_the_example_honour_the_umask(tmp_path, capsys):
    from yieldwise.cli import main

    previous = os.umask(0o022)
    try:
        partial = partial_file(tmp_path / "t.nc")
        assert stat.S_IMODE(partial.stat().st_mode) == 0o644  # mkstemp's were 0600
        assert main(["example", "--out", str(tmp_path / "ex")]) == 0
        mode = (tmp_path / "ex" / "worked_example.csv").stat().st_mode
        assert stat.S_IMODE(mode) == 0o644
        os.umask(0o077)
        assert stat.S_IMODE(partial_file(tmp_path / "u.nc").stat().st_mode) == 0o600
    finally:
        os.umask(previous)
    capsys.readouterr()


# ------------------------------------------- item 14: the path argument
def test_a_path_that_is_no_file_name_is_refused_naming_the_argument(saved):
    t, path = saved
    folder = path.parent
    with pytest.raises(TypeError) as caught:
        io.write(t.posterior_, b"/tmp/x.nc")
    assert str(caught.value) == (
        "path must be the transducer file's name (str or pathlib.Path), found bytes b'/tmp/x.nc'"
    )
    with pytest.raises(TypeError, match=r"^path must be .*, found NoneType None$"):
        io.load(None)
    with pytest.raises(ValueError, match=r"^path is empty \(''\); give the name of the "
                       r"transducer file to write$"):  # fmt: skip
        io.write(t.posterior_, "")
    newdir = f"{folder}/newdir/"
    with pytest.raises(ValueError) as caught:
        io.write(t.posterior_, newdir)
    assert str(caught.value) == (
        f"path {newdir!r} ends with '/', so it names a folder; give the name of the "
        f"transducer file to write, such as {str(folder / 'newdir' / 'transducer.nc')!r}"
    )
    with pytest.raises(ValueError, match=r"ends with '/', so it names a folder; give the name "
                       r"of the transducer file to load"):  # fmt: skip
        io.load(f"{path}/")
    assert sorted(p.name for p in folder.iterdir()) == ["t.nc"]  # no file 'newdir'
    _, fitted = io.load(str(path))  # a str is a file name
    assert fitted["classes_"] == ("neg", "pos")


# --------------------------------------------- item 15: a NUL in a label
def test_a_label_with_a_nul_keeps_its_text_in_the_files_coordinate(tmp_path):
    t = make(("a\x00", "b"))
    loaded = Transducer.load(t.save(tmp_path / "nul.nc"))
    assert loaded.classes_ == ("a\x00", "b")
    np.testing.assert_array_equal(loaded.predict_proba(Y), t.predict_proba(Y))
    with xr.open_dataset(tmp_path / "nul.nc", group="posterior") as posterior:
        assert posterior["class"].values.tolist() == ["a\\x00", "b"]  # not 'a'
    assert t.posterior_.posterior["class"].values.tolist() == ["a\\x00", "b"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loaded.draws_proba(Y)["class"].values.tolist() == ["a\\x00", "b"]


def test_save_and_load_refuse_a_path_that_is_no_file_name(saved):
    """Transducer.save and Transducer.load hand ``path`` to io unchanged: bytes and None
    were turned by ``Path()`` into numpy-style TypeErrors that named no argument, and
    ``save("newdir/")`` wrote a file named ``newdir`` (Path drops the separator)."""
    t, path = saved
    folder = path.parent
    with pytest.raises(TypeError, match=r"^path must be .*, found bytes b'/tmp/x.nc'$"):
        t.save(b"/tmp/x.nc")
    with pytest.raises(TypeError, match=r"^path must be .*, found NoneType None$"):
        Transducer.load(None)
    with pytest.raises(ValueError, match=r"names a folder; give the name of the transducer "
                       r"file to write"):  # fmt: skip
        t.save(f"{folder}/newdir/")
    assert sorted(p.name for p in folder.iterdir()) == ["t.nc"]
    assert Transducer.load(str(path)).classes_ == ("neg", "pos")


# --------------------------------------------- item 6: given draws' labels
@pytest.mark.parametrize(
    ("given", "plain"),
    [
        ((np.int64(0), np.int64(1)), (0, 1)),
        ((np.str_("neg"), np.str_("pos")), ("neg", "pos")),
        ((np.bool_(False), np.bool_(True)), (False, True)),
    ],
)
def test_given_draws_labels_are_normalised_as_fit_normalises_them(tmp_path, given, plain):
    """from_draws kept numpy-scalar labels, so a transducer and its reloaded copy had
    classes_ of other types and compare() refused the pair; now its labels go through
    check_labels as fit's do (Python scalars), and the round trip is exact in type."""
    from yieldwise import compare

    t = make(given)
    assert t.classes_ == plain
    assert [type(c) for c in t.classes_] == [type(c) for c in plain]
    u = Transducer.load(t.save(tmp_path / "t.nc"))
    assert u.classes_ == t.classes_
    assert [type(c) for c in u.classes_] == [type(c) for c in t.classes_]
    result = compare({"before": t, "after": u}, [[1, 0], [0, 1]])
    np.testing.assert_array_equal(result.utilities["before"], result.utilities["after"])


def test_given_draws_refuse_repeated_and_missing_labels():
    with pytest.raises(ValueError, match="class_labels"):
        make(("a", "a"))
    with pytest.raises(ValueError, match="class_labels must hold hashable, non-missing"):
        make(("a", None))


def _same(a, b) -> bool:
    """Equal values of the same types, recursively (numpy values by dtype and value)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b or (a != a and b != b)  # NaN settings equal NaN


def test_settings_come_back_with_their_types(tmp_path):
    """Item 13: constructor settings round-trip with their types. Before, a tuple came back
    as a list and np.float32(0.1) as the float 0.10000000149011612, so get_params of a
    loaded transducer differed from the saved one's. A file records the settings its fit
    ran with, so the transducer is fitted with them (the Laplace backend: no Stan)."""
    rng = np.random.default_rng(3)
    scores = rng.normal(size=120)
    labels = np.where(rng.random(120) < 1 / (1 + np.exp(-2 * scores)), "pos", "neg")
    with warnings.catch_warnings():  # (the Laplace draws' quality is not the question)
        warnings.simplefilter("ignore")
        t = Transducer(
            output_transform=("identity",), adapt_delta=np.float32(0.9), chains=np.int64(2),
            draws=50, seed=np.int64(4), progress=np.bool_(False), backend="laplace",
            prior={"tau_f_scale": np.float32(2.5), "tau_a_scale": 20},
        ).fit(scores, labels)  # fmt: skip
    loaded = Transducer.load(t.save(tmp_path / "t.nc"))
    before, after = t.get_params(), loaded.get_params()
    assert list(before) == list(after)
    for name in before:
        assert _same(before[name], after[name]), (name, before[name], after[name])
    assert after["adapt_delta"] == np.float32(0.9)  # not 0.8999999761581421 as a float
    np.testing.assert_array_equal(loaded.predict_proba(scores), t.predict_proba(scores))
    # what the file holds: tags only where JSON has no form (a list would stay a list)
    stored = json.loads(az.from_netcdf(str(tmp_path / "t.nc")).posterior.attrs[
        "yieldwise_settings"])  # fmt: skip
    assert stored["output_transform"] == {"yieldwise_tuple": ["identity"]}
    assert stored["adapt_delta"] == {"yieldwise_numpy": "<f4", "value": float(np.float32(0.9))}
    assert stored["prior"]["tau_a_scale"] == 20 and stored["warmup"] is None


@pytest.mark.parametrize(
    "value",
    [
        ("identity", ("a", (1, 2.5))),
        [
            np.float32(0.1),
            np.float64(0.2),
            np.int8(-3),
            np.uint64(2**64 - 1),
            np.bool_(True),
            np.str_("x"),
            0.2,
            "x",
        ],
        np.array([[0.5, 1.0]], dtype=np.float32),
        {1: "one", (2, "b"): [1.5, (2,)], "yieldwise_tuple": None, None: float("nan")},
        {"plain": {"nested": (1,)}, "inf": float("inf")},
        2**70,
    ],
)
def test_settings_json_round_trips_each_type(value):
    """The encoder and decoder of stored settings: through JSON text and back, each value
    returns equal and of the same types (a mapping with keys JSON cannot hold, or a key
    that is a tag, as pairs)."""
    text = json.dumps(io.settings_to_json(value))
    assert _same(io.settings_from_json(json.loads(text)), value)


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ({"yieldwise_tuple": "ab"}, "yieldwise_tuple must hold a list"),
        ({"yieldwise_tuple": [], "value": 1}, "malformed tag"),
        ({"yieldwise_tuple": [], "yieldwise_pairs": []}, "malformed tag"),
        ({"yieldwise_numpy": "<f4"}, "malformed tag"),
        ({"yieldwise_numpy": "<M8[s]", "value": 0}, "cannot be read"),
        ({"yieldwise_numpy": "<f4", "value": [1.0]}, "scalar holds an array"),
        ({"yieldwise_numpy": "not a dtype", "value": 1}, "cannot be read"),
        ({"yieldwise_pairs": [[1]]}, r"\[key, value\] pairs"),
        ({"yieldwise_pairs": [[[1], 2]]}, "not hashable"),
    ],
)
def test_a_malformed_settings_tag_is_refused_naming_it(saved, setting, match):
    _, path = saved

    def change(data):
        record = json.loads(data.posterior.attrs["yieldwise_settings"])
        record["n_components"] = setting
        data.posterior.attrs["yieldwise_settings"] = json.dumps(record)

    with pytest.raises(TransducerFileError, match=match):
        Transducer.load(_altered(path, change))


def test_a_file_without_tags_reads_its_settings_as_before(saved):
    """A file written before the tags (plain JSON settings) loads with the same values."""
    t, path = saved

    def change(data):
        record = json.loads(data.posterior.attrs["yieldwise_settings"])
        record["output_transform"] = ["identity"]
        data.posterior.attrs["yieldwise_settings"] = json.dumps(record)

    loaded = Transducer.load(_altered(path, change))
    assert loaded.get_params()["output_transform"] == ["identity"]
    assert loaded.get_params()["max_treedepth"] == t.max_treedepth
    np.testing.assert_array_equal(loaded.predict_proba(Y), t.predict_proba(Y))


def test_tree_depth_hits_are_counted_at_the_depth_the_fit_ran_with(saved):
    """The sampler record's max_treedepth (what ran: the constructor's is None by default,
    the depth chosen per output dimensions); a file from before that default, whose
    sampler record lacks it, counts at its settings' depth. Depths 10 and 11 alternate
    along the draws, so each threshold counts differently."""
    _, path = saved

    def hits(sampler_depth, settings_depth, name):
        def change(data):
            depth = data.sample_stats["tree_depth"]
            depth.values[:] = np.arange(depth.size).reshape(depth.shape) % 2 + 10
            _json_attr("yieldwise_settings", lambda r: r.update(max_treedepth=settings_depth))(data)
            if sampler_depth is None:
                _json_attr("yieldwise_sampler", lambda r: r.pop("max_treedepth"))(data)
            else:
                _json_attr("yieldwise_sampler", lambda r: r.update(max_treedepth=sampler_depth))(
                    data
                )

        loaded = Transducer.load(_altered(path, change, name))
        return loaded.sampler_summary()["max_treedepth_hits"]

    size = Transducer.load(path).posterior_.sample_stats["tree_depth"].size
    assert size >= 2
    elevens = size // 2  # depths 10, 11, 10, ...
    assert hits(11, None, "a.nc") == elevens  # a current file: the depth chosen per fit
    assert hits(12, 10, "b.nc") == 0  # the sampler record's depth, not the settings'
    assert hits(None, 10, "c.nc") == size  # a file from before: its settings' depth
    assert hits(None, 11, "d.nc") == elevens
