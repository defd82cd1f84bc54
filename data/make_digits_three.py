"""Regenerate data/digits_three.csv: 3, 5 or 8? on scikit-learn's digits (seeded).

Three often-confused digits of scikit-learn's bundled digits (UCI "Optical Recognition
of Handwritten Digits"; nothing is downloaded): 3, 5 and 8, 539 images. 40 % (stratified,
seed 0) train a multinomial logistic regression (C = 0.05, so that it is not
overconfident); the other 60 % (324 images) are the calibration set, with the model's
probability vector ``p_three, p_five, p_eight`` (rows sum to 1).

Run from the repository root: ``python data/make_digits_three.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

OUT = Path(__file__).resolve().parent / "digits_three.csv"
NAMES = {3: "three", 5: "five", 8: "eight"}


def main(out: Path = OUT) -> None:
    digits = load_digits()
    keep = np.isin(digits.target, list(NAMES))
    x, digit = digits.data[keep] / 16.0, digits.target[keep]
    index = np.flatnonzero(keep)
    rows = np.arange(len(digit))
    train, calibration = train_test_split(rows, test_size=0.6, random_state=0, stratify=digit)
    model = LogisticRegression(C=0.05, max_iter=5000).fit(x[train], digit[train])
    proba = model.predict_proba(x[calibration])  # columns in model.classes_ = 3, 5, 8
    frame = pd.DataFrame(
        {
            "item": index[calibration],
            "digit": digit[calibration],
            "label": [NAMES[d] for d in digit[calibration]],
            **{f"p_{NAMES[c]}": proba[:, j] for j, c in enumerate(model.classes_)},
        }
    ).sort_values("item")
    frame.to_csv(out, index=False, float_format="%.17g")
    print(f"wrote {out} ({len(frame)} rows)")


if __name__ == "__main__":
    main()
