"""yieldwise: evaluate and improve classifiers the decision-theoretic way.

The only admissible evaluation score is the utility yield ``sum U[i,c] C[i,c]``
of a problem-specific utility matrix ``U`` and the confusion matrix ``C``.
See ``docs/theory.md`` in the source tree for every formula.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from . import audit, calibrators, curves, metrics, report_toolkit, roc, rules, utility
from .compare import Comparison, compare
from .confusion import ConfusionMatrix
from .decision import decide, expected_utilities
from .long_run import IntegrationWarning, long_run_utility, oracle_utility, value_of_more_data
from .metrics import UndefinedMetricError
from .parallel import fit_many
from .transducer import (
    ConstantOutputWarning,
    ExtrapolationWarning,
    LatticeWarning,
    LooWarning,
    ReductionWarning,
    Transducer,
    TransducerPosterior,
)
from .utility import UtilityMatrix
from .yields import rescaled_yield, total_utility, utility_yield, utility_yield_per_item

try:
    __version__ = version("yieldwise")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"

__all__ = [
    "Comparison",
    "ConfusionMatrix",
    "ConstantOutputWarning",
    "ExtrapolationWarning",
    "IntegrationWarning",
    "LatticeWarning",
    "LooWarning",
    "ReductionWarning",
    "Transducer",
    "TransducerPosterior",
    "UndefinedMetricError",
    "UtilityMatrix",
    "audit",
    "calibrators",
    "compare",
    "curves",
    "decide",
    "expected_utilities",
    "fit_many",
    "long_run_utility",
    "metrics",
    "oracle_utility",
    "parallel",
    "plots",
    "report_toolkit",
    "rescaled_yield",
    "roc",
    "rules",
    "total_utility",
    "utility",
    "utility_yield",
    "utility_yield_per_item",
    "value_of_more_data",
]


def __getattr__(name: str) -> Any:
    # matplotlib is slow to import; load the plotting module only when asked for.
    if name == "plots":
        return import_module(".plots", __name__)
    raise AttributeError(f"module 'yieldwise' has no attribute {name!r}")
