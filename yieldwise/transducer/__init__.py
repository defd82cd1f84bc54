"""The probability transducer ``p(class | output)`` (theory section 3), as a small package.

* :mod:`.estimator`: :class:`Transducer`, the scikit-learn-style estimator (fit, predict);
* :mod:`.encoding`: outputs as the model sees them (transforms, lattice detection and
  snapping, the checks of outputs a user gives);
* :mod:`.reduction`: many classes as the rank of the true class against the margin of
  the output's top two (``class_reduction``), and its posterior predictive check;
* :mod:`.posterior`: :class:`TransducerPosterior`, the fitted draws in one form and the
  mixture's math on them (the joint, class frequencies, bin masses, the predictive);
* :mod:`.stan_data`: the data of ``stan/transducer.stan`` (merged rows, prior, initial
  values, preconditioning);
* :mod:`.sampler`: :data:`SAMPLER_DEFAULTS`, the one set of sampler defaults;
* :mod:`.diagnostics`: R-hat and ESS of the invariant quantities, the sampler's record,
  as pure functions of the draws;
* :mod:`.plots`: :meth:`Transducer.plot`'s pictures;
* :mod:`.io`: the transducer file (every stored key, the format version, writing and
  reading).
"""

from __future__ import annotations

from .diagnostics import DiagnosticsWarning
from .encoding import (
    ConstantOutputWarning,
    ExtrapolationWarning,
    LatticeWarning,
    OutputTransform,
    choose_transform,
)
from .estimator import LooWarning, Transducer
from .posterior import TransducerPosterior
from .reduction import ReductionWarning
from .sampler import SAMPLER_DEFAULTS, SamplerDefaults

__all__ = [
    "SAMPLER_DEFAULTS",
    "ConstantOutputWarning",
    "DiagnosticsWarning",
    "ExtrapolationWarning",
    "LatticeWarning",
    "LooWarning",
    "OutputTransform",
    "ReductionWarning",
    "SamplerDefaults",
    "Transducer",
    "TransducerPosterior",
    "choose_transform",
]
