"""Real calibration sets shipped with yieldwise (no downloads), as tidy DataFrames.

Each set holds held-out outputs of real classifiers on real data, with the true
classes; ``data/README.md`` describes columns, sizes, provenance and licence, and the
seeded ``data/make_*.py`` scripts regenerate the files exactly.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ._shipped import shipped_file

__all__ = ["data_file", "load_digits_binary", "load_digits_ten", "load_digits_three"]


def data_file(name: str) -> Path:
    """Path of a shipped data file (``"digits_binary.csv"``, ...).

    The files live in the repository's top-level ``data/`` folder; an installed wheel
    carries them as the package ``yieldwise.data``. Both places are searched.
    """
    return shipped_file("data", name, "shipped data file")


def load_digits_binary() -> pd.DataFrame:
    """'Is it an eight?': 1,079 held-out digits, 9.6 % eights, three classifiers' outputs.

    Columns: ``item`` (index in scikit-learn's digits), ``digit``, ``label``
    (categorical: ``"other"``, ``"eight"``), ``forest_votes`` (a 200-tree random
    forest's vote fraction, k/200), ``net_logit_other`` and ``net_logit_eight`` (a
    small neural network's two output logits), ``knn_votes`` (the fraction of eights
    among the 50 nearest training images, k/50).

    Examples
    --------
    >>> from yieldwise.datasets import load_digits_binary
    >>> frame = load_digits_binary()
    >>> frame.shape, list(frame["label"].cat.categories)
    ((1079, 7), ['other', 'eight'])
    """
    frame = pd.read_csv(data_file("digits_binary.csv"))
    frame["label"] = pd.Categorical(frame["label"], categories=["other", "eight"])
    return frame


def load_digits_three() -> pd.DataFrame:
    """'3, 5 or 8?': 324 held-out digits with a logistic regression's probability vectors.

    Columns: ``item``, ``digit``, ``label`` (categorical: ``"three"``, ``"five"``,
    ``"eight"``), ``p_three``, ``p_five``, ``p_eight`` (each row sums to 1).

    Examples
    --------
    >>> from yieldwise.datasets import load_digits_three
    >>> frame = load_digits_three()
    >>> frame.shape, list(frame["label"].cat.categories)
    ((324, 6), ['three', 'five', 'eight'])
    """
    frame = pd.read_csv(data_file("digits_three.csv"))
    frame["label"] = pd.Categorical(frame["label"], categories=["three", "five", "eight"])
    return frame


# The ten digits' names, in the order of the classes and of the ``p_*`` columns.
_TEN = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def load_digits_ten() -> pd.DataFrame:
    """'Which digit?': 1,079 held-out digits, all ten classes, a network's softmax vectors.

    Columns: ``item``, ``digit`` (0-9), ``label`` (categorical: ``"zero"``, ``"one"``,
    ..., ``"nine"``, so that its codes are the digits), ``p_zero``, ..., ``p_nine`` (a
    small neural network's softmax probabilities; each row sums to 1, none is 0).

    Examples
    --------
    >>> from yieldwise.datasets import load_digits_ten
    >>> frame = load_digits_ten()
    >>> frame.shape
    (1079, 13)
    >>> list(frame["label"].cat.categories)
    ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine']
    >>> bool((frame["label"].cat.codes == frame["digit"]).all())
    True
    """
    frame = pd.read_csv(data_file("digits_ten.csv"))
    frame["label"] = pd.Categorical(frame["label"], categories=_TEN)
    return frame
