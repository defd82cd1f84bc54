"""A worked example: two classifiers that common metrics and the utility yield rank oppositely."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import metrics
from .confusion import ConfusionMatrix
from .utility import UtilityMatrix
from .yields import rescaled_yield, utility_yield

__all__ = ["screening_example", "worked_example_table"]

_CLASSES = ("healthy", "ill")


def screening_example() -> tuple[UtilityMatrix, dict[str, ConfusionMatrix]]:
    """A screening problem: 1,000 patients, 10 % ill; missing a case is costly.

    Utilities per patient (rows decisions, columns true classes): declaring a
    healthy person healthy gains 0, declaring an ill person healthy loses 10
    (an untreated case), declaring a healthy person ill loses 1 (an unneeded
    follow-up), declaring an ill person ill gains 5 (a treated case).

    Returns the utility matrix and the confusion matrices of a "cautious"
    classifier (few alarms, misses 40 % of cases) and a "sensitive" one (many
    alarms, misses 10 %).
    """
    utility = UtilityMatrix([[0, -10], [-1, 5]], decisions=_CLASSES, classes=_CLASSES)
    confusions = {
        "cautious": ConfusionMatrix([[890, 40], [10, 60]], _CLASSES, _CLASSES),
        "sensitive": ConfusionMatrix([[750, 10], [150, 90]], _CLASSES, _CLASSES),
    }
    return utility, confusions


def worked_example_table(
    utility: UtilityMatrix | None = None,
    confusions: dict[str, ConfusionMatrix] | None = None,
    positive: str = "ill",
) -> pd.DataFrame:
    """Every confusion-matrix metric and the utility yields of two classifiers.

    Returns one row per score with the two classifiers' values, which one the
    score favours (higher is better for all of them) and whether the score is
    admissible (theory 1.2).

    Examples
    --------
    >>> table = worked_example_table()
    >>> table.loc["utility_yield", "favours"], table.loc["accuracy", "favours"]
    ('sensitive', 'cautious')
    """
    if utility is None or confusions is None:
        utility, confusions = screening_example()
    if len(confusions) != 2:
        raise ValueError(f"confusions must hold exactly two classifiers, found {len(confusions)}")
    (name_a, cm_a), (name_b, cm_b) = confusions.items()
    positive_metrics = {"precision", "recall", "specificity", "f1", "fowlkes_mallows"}
    rows = []
    for name, function in metrics.CONFUSION_METRICS.items():
        kwargs = {"positive": positive} if name in positive_metrics else {}
        rows.append((name, function(cm_a, **kwargs), function(cm_b, **kwargs), function.admissible))
    rows.append(("utility_yield", utility_yield(cm_a, utility), utility_yield(cm_b, utility), True))
    rows.append(
        ("rescaled_yield", rescaled_yield(cm_a, utility), rescaled_yield(cm_b, utility), True)
    )
    table = pd.DataFrame(rows, columns=["score", name_a, name_b, "admissible"]).set_index("score")
    difference = table[name_a] - table[name_b]
    table["favours"] = np.where(
        difference > 0, name_a, np.where(difference < 0, name_b, "tie")
    ).astype(object)
    return table[[name_a, name_b, "favours", "admissible"]]
