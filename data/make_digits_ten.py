"""Regenerate data/digits_ten.csv: which of the ten digits? on scikit-learn's digits (seeded).

All 1,797 images of scikit-learn's bundled digits (UCI "Optical Recognition of
Handwritten Digits"; nothing is downloaded), all ten classes. 40 % (stratified by digit,
seed 0) train a one-hidden-layer network (16 ReLU units, softmax output, L2 1e-3,
seed 0); the other 60 % (1,079 images) are the calibration set, with the network's
softmax probability vector ``p_zero, ..., p_nine``.

How the probabilities are written, so that the file is exact and regenerates byte for
byte on other machines: a network's last bits depend on the CPU's BLAS kernels (the
17-digit logits of ``make_digits_binary.py`` differ by about 3e-14 between machines), so
every probability but the row's largest is rounded to 6 significant digits (a relative
change below 5e-6; significant digits keep the smallest ones, about 1e-17, positive),
and the largest is written as 1 minus the exact sum of the others. Each row then sums
to 1 to within 1e-16 and every value is written in the shortest form that reads back
exactly. (Relative noise of 1e-10 on the network's probabilities, 5 draws, changed none
of the written values.)

Run from the repository root: ``python data/make_digits_ten.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

OUT = Path(__file__).resolve().parent / "digits_ten.csv"
NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def exact_rows(proba: np.ndarray, digits: int = 6) -> np.ndarray:
    """Probability rows that sum to 1 exactly as written (see the module's docstring)."""
    rounded = np.array([[float(f"{v:.{digits}g}") for v in row] for row in proba])
    for row, top in zip(rounded, proba.argmax(axis=1), strict=True):
        row[top] = 1.0 - math.fsum(np.delete(row, top))  # fsum: exact, the same everywhere
    return rounded


def main(out: Path = OUT) -> None:
    digits = load_digits()
    x, digit = digits.data / 16.0, digits.target
    index = np.arange(len(digit))
    train, calibration = train_test_split(index, test_size=0.6, random_state=0, stratify=digit)
    net = MLPClassifier(hidden_layer_sizes=(16,), alpha=1e-3, max_iter=2000, random_state=0)
    net.fit(x[train], digit[train])
    proba = exact_rows(net.predict_proba(x[calibration]))  # columns: net.classes_, 0-9
    frame = pd.DataFrame(
        {
            "item": calibration,
            "digit": digit[calibration],
            "label": [NAMES[d] for d in digit[calibration]],
            **{f"p_{NAMES[c]}": proba[:, j] for j, c in enumerate(net.classes_)},
        }
    ).sort_values("item")
    frame.to_csv(out, index=False)  # each double in its shortest exact form (repr)
    accuracy = (proba.argmax(axis=1) == digit[calibration]).mean()
    print(f"wrote {out} ({len(frame)} rows, argmax accuracy {accuracy:.1%})")


if __name__ == "__main__":
    main()
