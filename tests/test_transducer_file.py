"""Transducer files: checked on load against the declared layout, written whole, not kept
open (issue 17, item 11). Real NetCDF files, altered field by field."""

from __future__ import annotations

import json
import os
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest

from yieldwise import Transducer
from yieldwise.transducer.io import (
    ATTRIBUTES,
    FORMAT_VERSION,
    VARIABLES,
    TransducerFileError,
)

W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
MU = np.array([[[-1.0], [1.5]], [[-0.5], [1.0]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])
Y = np.array([-1.0, 0.0, 0.4, 2.0])


@pytest.fixture
def saved(tmp_path):
    scores = np.linspace(-3, 3, 30)
    t = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        pd.DataFrame({"score": scores}), np.array(["neg", "pos"])[(scores > 0).astype(int)],
        ("neg", "pos"), output_transform="identity", resolution=None,
    )  # fmt: skip
    path = tmp_path / "t.nc"
    t.save(path)
    return t, path


def _altered(path: Path, change) -> Path:
    """A copy of the file with one change made through ArviZ/xarray."""
    data = az.from_netcdf(str(path))
    for group in data.groups():
        getattr(data, group).load()
    change(data)
    out = path.with_name("altered.nc")
    data.to_netcdf(str(out))
    return out


def test_round_trip_is_exact_and_the_file_is_closed(saved, open_files):
    t, path = saved
    loaded = Transducer.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(Y), t.predict_proba(Y))
    assert loaded.classes_ == t.classes_ and loaded.transform_ == t.transform_
    if os.path.isdir("/proc/self/fd"):
        assert open_files(path) == []
    loaded.save(path)  # over the very file it was loaded from
    again = Transducer.load(path)
    np.testing.assert_array_equal(again.predict_proba(Y), t.predict_proba(Y))
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.nc"]  # no partial left


def test_a_failed_save_leaves_the_earlier_file_and_no_partial(saved):
    t, path = saved
    before = path.read_bytes()
    t.posterior_.posterior.attrs["unwritable"] = {"a": object()}  # NetCDF cannot store it
    with pytest.raises((TypeError, ValueError)):
        t.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.nc"]


def test_saving_where_no_file_can_go_names_the_users_path(saved):
    """A missing folder, a file where the folder should be, or a folder as the file: the
    error names the user's path and what to do, not the hidden partial file the writer
    would have created, and nothing is left behind."""
    t, path = saved
    with pytest.raises(FileNotFoundError, match=r"nodir/q: no such folder; the transducer file"):
        t.save(path.parent / "nodir" / "q" / "t.nc")
    with pytest.raises(FileNotFoundError, match=r"t.nc: is not a folder"):
        t.save(path / "inner.nc")
    with pytest.raises(IsADirectoryError, match="is a folder; give the name of the file"):
        t.save(path.parent)
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.nc"]


def test_a_version_2_file_still_loads_and_predicts_the_same(saved):
    t, path = saved
    older = _altered(path, _set_attr("yieldwise_format_version", 2))
    loaded = Transducer.load(older)
    np.testing.assert_array_equal(loaded.predict_proba(Y), t.predict_proba(Y))


def test_a_rotated_transducer_round_trips_exactly(tmp_path):
    # two correlated logits: the transform rotates them onto their principal axes, and the
    # kernels (mu) live in the rotated coordinates; save and load reproduce every prediction
    rng = np.random.default_rng(8)
    a = rng.normal(0, 3, 60)
    outputs = pd.DataFrame({"l0": a, "l1": -a + rng.normal(0, 0.2, 60)})
    mu = np.array([[[[-3.0, 0.0], [3.0, 0.1]], [[-2.0, -0.1], [2.5, 0.0]]]])
    t = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": mu, "sigma": np.full((1, 2, 2, 2), 0.8)},
        outputs, np.array(["neg", "pos"])[(a > 0).astype(int)], ("neg", "pos"), rotate=True,
    )  # fmt: skip
    assert t.transform_.is_rotated
    path = tmp_path / "rotated.nc"
    t.save(path)
    loaded = Transducer.load(path)
    assert loaded.transform_ == t.transform_
    grid = pd.DataFrame({"l0": np.linspace(-6, 6, 25), "l1": np.linspace(5, -7, 25)})
    np.testing.assert_array_equal(loaded.predict_proba(grid), t.predict_proba(grid))


def _drop_attr(name):
    return lambda d: d.posterior.attrs.pop(name)


def _set_attr(name, value):
    return lambda d: d.posterior.attrs.__setitem__(name, value)


def _set_value(group, name, index, value):
    def change(d):
        getattr(d, group)[name].values[index] = value

    return change


def _transform(**edits):
    def change(d):
        record = json.loads(d.posterior.attrs["yieldwise_transform"])
        record.update(edits)
        d.posterior.attrs["yieldwise_transform"] = json.dumps(record)

    return change


MISSING = "of the posterior group is missing"
CASES = [
    (_drop_attr("yieldwise_classes"), rf"attribute 'yieldwise_classes' {MISSING}"),
    (_drop_attr("yieldwise_transform"), rf"attribute 'yieldwise_transform' {MISSING}"),
    (_set_attr("yieldwise_classes", "not json"), r"'yieldwise_classes': Expecting value"),
    (_set_attr("yieldwise_classes", '["a", "b", "c"]'),
     r"posterior/alpha: dimension 'class' has size 2, but the file's attributes give 3"),
    (_set_attr("yieldwise_classes", "[true, 1]"), r"'yieldwise_classes': .*mixes the booleans"),
    (_set_attr("yieldwise_n_calibration", 31),
     r"observed_data/outputs: dimension 'item' has size 30, but the file's attributes give 31"),
    (_set_attr("yieldwise_seed_used", 1.5), r"'yieldwise_seed_used': expected an integer"),
    (_set_attr("yieldwise_format_version", FORMAT_VERSION + 1), r"written by a newer yieldwise"),
    (_set_attr("yieldwise_format_version", 1),
     rf"format version 1 .*the free-location mixture.* reads format versions 2 to "
     rf"{FORMAT_VERSION}\. Refit"),
    # version 2 predates rotated outputs: a file that says 2 yet records one was altered
    (lambda d: (_set_attr("yieldwise_format_version", 2)(d),
                _transform(centre=[0.5], axes=[[1.0]])(d)),
     r"format version 2 has no rotated outputs"),
    (_transform(centre=[0.5], axes=[[0.5]]), r"'yieldwise_transform': axes must be orthonormal"),
    (_transform(kind=["probit"]), r"'yieldwise_transform': kind must be \['simplex'\] or one"),
    (_transform(resolution=[-1.0]), r"'yieldwise_transform': resolution must give"),
    (_transform(columns=["a", "b"]), r"'yieldwise_transform': kind must be"),
    (_set_value("posterior", "w", (0, 0, 0), np.nan), r"posterior/w: 1 of 4 values are NaN"),
    (_set_value("posterior", "w", (0, 0, 0), 0.9),
     r"posterior/w: expected entries >= 0 summing to 1"),
    (_set_value("posterior", "sigma", (0, 1, 0, 0), -1.0),
     r"posterior/sigma: 1 values are not positive"),
    (_set_value("posterior", "mu", (0, 1, 0, 0), np.inf), r"posterior/mu: 1 of 4 values are NaN"),
    (_set_value("observed_data", "class_index", 3, 2),
     r"observed_data/class_index: expected integers in 0 \.\. 1"),
    (_set_value("observed_data", "outputs", (0, 0), np.nan), r"observed_data/outputs: 1 of 30"),
    (lambda d: d.posterior.__delitem__("mu"), r"variable posterior/mu is missing"),
    (lambda d: setattr(d, "posterior", d.posterior.rename({"component": "k"})),
     r"posterior/w: expected dims \('chain', 'draw', 'component'\), found \('chain', 'draw', 'k'"),
    (lambda d: d.__delattr__("observed_data"), r"group\(s\) \['observed_data'\] are missing"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), CASES)
def test_a_damaged_file_names_the_file_and_the_field(saved, change, message):
    _, path = saved
    bad = _altered(path, change)
    with pytest.raises(TransducerFileError, match=message) as caught:
        Transducer.load(bad)
    assert str(bad) in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_a_file_that_is_no_netcdf_is_named(tmp_path):
    path = tmp_path / "calibration.csv"
    path.write_text("label,score\na,0.1\n")
    with pytest.raises(TransducerFileError, match=r"calibration.csv: cannot be read as a NetCDF"):
        Transducer.load(path)
    with pytest.raises(FileNotFoundError, match="no transducer file"):
        Transducer.load(tmp_path / "none.nc")


def test_the_declaration_covers_what_predictions_and_summaries_read(saved):
    """Every posterior variable and attribute a Transducer reads is declared (the table is
    the one place to extend when the stored model changes)."""
    t, _ = saved
    declared = {(f.group, f.name) for f in VARIABLES}
    for name in ("w", "alpha", "mu", "sigma", "log_lik"):
        assert ("posterior", name) in declared
    assert {"yieldwise_classes", "yieldwise_transform", "yieldwise_settings"} <= set(ATTRIBUTES)
    assert set(ATTRIBUTES) <= set(t.posterior_.posterior.attrs)


def test_io_owns_every_stored_key(saved):
    """Every attribute a saved transducer holds is one yieldwise.transducer.io declares."""
    from yieldwise.transducer.io import (
        OPTIONAL_ATTRIBUTES,
        PROVENANCE_ATTRIBUTES,
        record_classifier,
    )

    t, path = saved
    record_classifier(t.posterior_, "forest")
    t.save(path)
    stored = set(Transducer.load(path).posterior_.posterior.attrs)
    known = set(ATTRIBUTES) | set(OPTIONAL_ATTRIBUTES) | set(PROVENANCE_ATTRIBUTES)
    assert stored - {"created_at", "arviz_version", "inference_library"} <= known
    assert {"yieldwise_classifier", "yieldwise_format_version"} <= stored
