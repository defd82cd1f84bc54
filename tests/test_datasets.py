"""The shipped data sets: contents, and that their scripts regenerate them exactly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from yieldwise.datasets import data_file, load_digits_binary, load_digits_ten, load_digits_three

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


def test_digits_ten_contents():
    frame = load_digits_ten()
    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    assert list(frame.columns) == ["item", "digit", "label", *[f"p_{n}" for n in names]]
    assert len(frame) == 1079 and frame["item"].is_unique and frame["item"].is_monotonic_increasing
    assert list(frame["label"].cat.categories) == names
    np.testing.assert_array_equal(frame["label"].cat.codes.to_numpy(), frame["digit"].to_numpy())
    # stratified 60 % of scikit-learn's 1,797 digits: 104 to 110 images of each digit
    counts = np.bincount(frame["digit"], minlength=10)
    assert counts.min() >= 104 and counts.max() <= 110
    proba = frame[[f"p_{n}" for n in names]].to_numpy()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert ((proba > 0) & (proba < 1)).all()  # no exact 0 or 1 written
    accuracy = (proba.argmax(axis=1) == frame["digit"].to_numpy()).mean()
    assert 0.95 < accuracy < 0.97  # data/README.md: 96.2 %
    assert (proba.argmax(axis=1)[:, None] == np.arange(10)).any(axis=0).all()  # all predicted


@pytest.mark.parametrize("name", ["digits_binary", "digits_three", "digits_ten"])
def test_scripts_regenerate_the_files_exactly(name, tmp_path):
    spec = importlib.util.spec_from_file_location(f"make_{name}", DATA / f"make_{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path / f"{name}.csv")
    assert (tmp_path / f"{name}.csv").read_bytes() == data_file(f"{name}.csv").read_bytes()


def test_missing_file_names_the_places_searched():
    with pytest.raises(FileNotFoundError, match=r"'nope\.csv' not found"):
        data_file("nope.csv")
