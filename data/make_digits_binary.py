"""Regenerate data/digits_binary.csv: 'is it an eight?' on scikit-learn's digits (seeded).

The problem: 1,797 handwritten digits (8x8 images, UCI "Optical Recognition of
Handwritten Digits", bundled with scikit-learn, so nothing is downloaded); the positive
class is the digit 8 (9.7 % of the images). 40 % of the images (stratified, seed 0)
train three classifiers; the other 60 % (1,079 images) are the calibration set whose
outputs are written:

* ``forest_votes``: a random forest of 200 trees (depth <= 8, 8 features per split,
  seed 0), the fraction of trees voting "eight": exactly k/200;
* ``net_logit_other``, ``net_logit_eight``: a one-hidden-layer network (16 ReLU units,
  two output units, seed 0), its two output logits before the output activation;
* ``knn_votes``: the fraction of the 50 nearest training images (Euclidean) that are
  eights: exactly k/50. Its ROC area is larger than the network's, yet the network
  yields more under most utility matrices (vignette 5).

Run from the repository root: ``python data/make_digits_binary.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier

OUT = Path(__file__).resolve().parent / "digits_binary.csv"


def main(out: Path = OUT) -> None:
    digits = load_digits()
    x, digit = digits.data / 16.0, digits.target
    positive = (digit == 8).astype(int)
    index = np.arange(len(digit))
    train, calibration = train_test_split(index, test_size=0.6, random_state=0, stratify=positive)
    forest = RandomForestClassifier(n_estimators=200, max_depth=8, max_features=8, random_state=0)
    forest.fit(x[train], positive[train])
    # Hard votes of the trees (not the averaged leaf frequencies): a fraction k/200.
    votes = np.mean([tree.predict(x[calibration]) for tree in forest.estimators_], axis=0)
    net = MLPClassifier(hidden_layer_sizes=(16,), alpha=1e-3, max_iter=2000, random_state=0)
    net.fit(x[train], np.column_stack([1 - positive[train], positive[train]]))  # two outputs
    hidden = np.maximum(x[calibration] @ net.coefs_[0] + net.intercepts_[0], 0.0)
    logits = hidden @ net.coefs_[1] + net.intercepts_[1]
    knn = KNeighborsClassifier(n_neighbors=50).fit(x[train], positive[train])
    neighbours = knn.predict_proba(x[calibration])[:, 1]
    frame = pd.DataFrame(
        {
            "item": calibration,
            "digit": digit[calibration],
            "label": np.where(positive[calibration] == 1, "eight", "other"),
            "forest_votes": np.round(votes * 200).astype(int) / 200,
            "net_logit_other": logits[:, 0],
            "net_logit_eight": logits[:, 1],
            "knn_votes": np.round(neighbours * 50).astype(int) / 50,
        }
    ).sort_values("item")
    frame.to_csv(out, index=False, float_format="%.17g")
    print(f"wrote {out} ({len(frame)} rows, {(frame['label'] == 'eight').mean():.1%} eights)")


if __name__ == "__main__":
    main()
