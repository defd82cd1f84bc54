"""The transducer's sampler defaults: one set, read by every entry point.

:class:`~yieldwise.Transducer`'s constructor, the command line (``yieldwise fit``), the
report's ``[sampler]`` table (through the Transducer) and the R bridge (``yw_fit``; a test
holds its defaults to these) all take their NUTS settings from :data:`SAMPLER_DEFAULTS`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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
    adapt_delta : float
        Target acceptance rate. 0.95, not Stan's 0.8: in the preconditioned coordinates
        0.8 left divergent transitions (votes n = 1,000: 29 of 3,000; two logits: 1 of
        600), 0.9 fewer (two logits: 4 of 3,000), 0.95 none, for about 30 % more leapfrog
        steps (docs/model.md).
    max_treedepth : int
        Stan's default tree depth.
    """

    chains: int = 4
    warmup: int = 500
    draws: int = 750
    adapt_delta: float = 0.95
    max_treedepth: int = 10

    def as_dict(self) -> dict[str, int | float]:
        return asdict(self)


#: The one set of sampler defaults.
SAMPLER_DEFAULTS = SamplerDefaults()
