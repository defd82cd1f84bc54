"""The transducer's sampler defaults: one set, read by every entry point.

:class:`~yieldwise.Transducer`'s constructor, the command line (``yieldwise fit``), the
report's ``[sampler]`` table (through the Transducer) and the R bridge (``yw_fit``; a test
holds its defaults to these) all take their NUTS settings from :data:`SAMPLER_DEFAULTS`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

__all__ = ["SAMPLER_DEFAULTS", "SamplerDefaults"]


@dataclass(frozen=True)
class SamplerDefaults:
    """NUTS settings of a transducer fit (docs/model.md).

    Attributes
    ----------
    chains : int
        Chains; four let R-hat compare them.
    warmup : int
        Warm-up (adaptation) iterations per chain.
    draws : int
        Kept draws per chain: 4 x 750 = 3,000 draws, enough for bulk ESS >= 400 on the
        invariant quantities of the panel's fits.
    adapt_delta : float or None
        Target acceptance rate; None (the default) takes :meth:`adapt_delta_for` the
        fit's output dimensions: 0.99 for one, 0.95 for more. Not Stan's 0.8: in the
        preconditioned coordinates 0.8 left divergent transitions (votes n = 1,000: 29 of
        3,000; two logits: 1 of 600), 0.9 fewer (two logits: 4 of 3,000), 0.95 none on
        the panel, for about 30 % more leapfrog steps. One dimension takes 0.99: over the
        coverage study's 1-D fits at n = 3,600 (120 fits, the size where 0.95 left
        sporadic divergent transitions: 34 in 4 fits) it leaves none, for 4.5 % more
        sampling time in all (docs/model.md, "A smaller step size for one output
        dimension"). Two dimensions keep 0.95: 0.99 takes the two-logit fit at n = 3,600
        from 31 to 77 leapfrog steps per iteration.
    max_treedepth : int
        Stan's default tree depth.
    """

    chains: int = 4
    warmup: int = 500
    draws: int = 750
    adapt_delta: float | None = None
    max_treedepth: int = 10

    #: ``adapt_delta_for`` one output dimension, and for two or more.
    ADAPT_DELTA_ONE_DIM: ClassVar[float] = 0.99
    ADAPT_DELTA_MULTI: ClassVar[float] = 0.95

    def adapt_delta_for(self, model_dims: int, adapt_delta: float | None = None) -> float:
        """The target acceptance rate of a fit with ``model_dims`` output dimensions:
        ``adapt_delta`` when given, else this set's, else 0.99 for one dimension and 0.95
        for more."""
        # returned as given: the backends validate it (check_sampler_arguments)
        for value in (adapt_delta, self.adapt_delta):
            if value is not None:
                return value
        return self.ADAPT_DELTA_ONE_DIM if int(model_dims) == 1 else self.ADAPT_DELTA_MULTI

    def as_dict(self) -> dict[str, int | float | None]:
        return asdict(self)


#: The one set of sampler defaults.
SAMPLER_DEFAULTS = SamplerDefaults()
