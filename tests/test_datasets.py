"""The shipped data sets: contents, and that their scripts regenerate them exactly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from yieldwise.datasets import data_file, load_digits_binary, load_digits_three

DATA = Path(__file__).resolve().parent.parent / "data"


def test_digits_binary_contents():
    frame = load_digits_binary()
    assert list(frame.columns) == [
        "item", "digit", "label", "forest_votes", "net_logit_other", "net_logit_eight",
        "knn_votes",
    ]  # fmt: skip
    assert len(frame) == 1079 and frame["item"].is_unique
    assert ((frame["digit"] == 8) == (frame["label"] == "eight")).all()
    assert 0.09 < (frame["label"] == "eight").mean() < 0.10
    votes = frame["forest_votes"].to_numpy()
    # each value is the double nearest to k/200 for an integer k
    np.testing.assert_array_equal(votes, np.round(votes * 200) / 200)
    assert votes.min() >= 0 and votes.max() <= 1
    assert np.isfinite(frame[["net_logit_other", "net_logit_eight"]].to_numpy()).all()
    knn = frame["knn_votes"].to_numpy()
    np.testing.assert_array_equal(knn, np.round(knn * 50) / 50)  # k of 50 neighbours


def test_digits_three_contents():
    frame = load_digits_three()
    assert len(frame) == 324 and set(frame["digit"]) == {3, 5, 8}
    proba = frame[["p_three", "p_five", "p_eight"]].to_numpy()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert ((proba > 0) & (proba < 1)).all()
    assert (proba.argmax(axis=1) == frame["label"].cat.codes.to_numpy()).mean() > 0.9


@pytest.mark.parametrize("name", ["digits_binary", "digits_three"])
def test_scripts_regenerate_the_files_exactly(name, tmp_path):
    spec = importlib.util.spec_from_file_location(f"make_{name}", DATA / f"make_{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path / f"{name}.csv")
    assert (tmp_path / f"{name}.csv").read_bytes() == data_file(f"{name}.csv").read_bytes()


def test_missing_file_names_the_places_searched():
    with pytest.raises(FileNotFoundError, match=r"'nope\.csv' not found"):
        data_file("nope.csv")
