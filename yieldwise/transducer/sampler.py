"""The transducer's sampler defaults: one set, read by every entry point.

:class:`~yieldwise.Transducer`'s constructor, the command line (``yieldwise fit``), the
report's ``[sampler]`` table (through the Transducer) and the R bridge (``yw_fit``; a test
holds its defaults to these) all take their NUTS settings from :data:`SAMPLER_DEFAULTS`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from ..backends._base import STAN_TERM_BUFFER, step_size_window_room
from .stan_data import WHITEN_MAX_DIMS

__all__ = ["SAMPLER_DEFAULTS", "SamplerDefaults"]


@dataclass(frozen=True)
class SamplerDefaults:
    """NUTS settings of a transducer fit (docs/model.md).

    Attributes
    ----------
    chains : int
        Chains; four let R-hat compare them.
    warmup : int or None
        Warm-up (adaptation) iterations per chain; None (the default) takes
        :meth:`warmup_for` the fit's output dimensions: 500 for one, 250 for more. The
        chains start from draws of the Laplace approximation, in coordinates where it is
        a standard Normal (the preconditioning), so warm-up has little to learn beyond
        the step size; at 500 it took 40 % of a two-logit fit's gradients. Paired on the
        coverage study's sets and seeds (all 20 repetitions of every 2-D problem and
        size, 120 fits; docs/model.md, "A shorter warm-up for two or more dimensions"),
        250 moved no coverage beyond noise, sampled 20-40 % faster and left divergent
        transitions in 4 fits instead of 2, all in the one cell that is not clean at
        either (two logits, n = 300; Fisher's exact p = 0.66); the ten-class digits at
        2,000 items sampled in 264 s instead of 352 s, no less clean. One dimension
        keeps 500: its fits take seconds, and at 250 one of the eight vote sets of
        bench/bench_sampling.py reached R-hat 1.014 (1.002 at 500).
    draws : int or None
        Kept draws per chain; None (the default) takes :meth:`draws_for` the fit's output
        dimensions: 1,000 for one, 750 for more. 4 x 750 = 3,000 draws are enough for
        bulk ESS >= 400 on the invariant quantities of the panel's fits. Fewer would be
        enough for the ESS of two-dimensional fits, but not for R-hat <= 1.01 on the
        largest of a fit's 10-19 quantities: chains that mix perfectly at an ESS of half a
        draw miss it by chance in 8 % of three-class fits at 500 draws, 3 % at 600 and
        0.5 % at 750 (bench/rhat_noise.py; docs/model.md, "Fewer draws, or a larger step
        size, for two dimensions"). One dimension takes 1,000: its worst quantity's ESS
        per draw goes lower (down to 0.17 on votes; 0.39 at the least in two dimensions),
        and at 0.25 750 draws miss by chance in 30 % of perfectly mixing fits, 1,000 in
        7 %; its fits take seconds (docs/model.md, "More draws for one output dimension":
        360 of the coverage study's 360 1-D fits clean at 1,000 draws, 357 at 750).
    adapt_delta : float or None
        Target acceptance rate; None (the default) takes :meth:`adapt_delta_for` the
        fit's output dimensions: 0.99 for one, 0.97 for two, 0.99 for three or four, 0.95
        for more. Not Stan's
        0.8: in the preconditioned coordinates 0.8 left divergent transitions (votes
        n = 1,000: 29 of 3,000; two logits: 1 of 600). One dimension takes 0.99: over the
        coverage study's 1-D fits at n = 3,600 (120 fits, the size where 0.95 left
        sporadic divergent transitions: 34 in 4 fits) it leaves none, for 4.5 % more
        sampling time in all (docs/model.md, "A smaller step size for one output
        dimension"). Two dimensions take 0.97: it keeps the 31 leapfrog steps per
        iteration of 0.95 (0.99 takes the two-logit fit at n = 3,600 to 77) and removes
        most of the sporadic single divergent transitions that 0.95 left: the coverage
        study's 120 2-D fits are all clean (4 were not), the shipped network logits at
        fit seeds 1-4 have none (1 before), the shipped 3/5/8 probability vectors 1
        instead of 5, at 1.8 % more steps (two logits) or 0.3 % (three classes);
        docs/model.md, "A slightly smaller step for two dimensions". Three or four
        (centres, whitened: joint fits) take 0.99: on the shipped digits' joint fits of
        three and four dimensions (9 fits, 2026-12-07; docs/model.md, "Whitening for joint
        fits of three and four dimensions") the whitened sampler at 0.95 left 57 divergent
        transitions in 3 fits, at 0.99 none, for 1.75 times the leapfrog steps (still
        fewer than the plain blocks' at 0.95, which left 70 in 7 fits). Five or more
        (plain blocks) keep 0.95 (0.97 not measured there): the ten classes' fits
        without reduction at 2,000 items are limited by the tree depth, which a smaller
        step can only make worse, and 0.9 left divergent transitions there (14;
        docs/model.md, "Fewer draws, or a larger step size, for two dimensions"). A class
        reduction's fit with pair offsets (one output
        dimension, the margin, and the offsets' groups) takes 0.95: with the offsets
        conditionally whitened it is clean at about 30 leapfrog steps per iteration
        against 46-63 at 0.99 (the coverage study's softmax-10 sets, all 60 fits, and the
        ten-class digits; docs/model.md, "A larger step for pair offsets").
    max_treedepth : int or None
        The largest tree depth (2**depth - 1 leapfrog steps per iteration); None (the
        default) takes :meth:`max_treedepth_for` the fit's output dimensions: 11 for three
        or four (centres, whitened: joint fits), else Stan's 10. Three or four take 11:
        on the shipped digits' joint fits (9 fits, 2026-12-07; docs/model.md, "Whitening
        for joint fits of three and four dimensions") depth 10 was hit by 20 of 27,000
        transitions in 3 fits, by a few long trajectories of fits that average 59-341
        leapfrog steps per iteration; at 11 the same nine fits had none, at 9 % more steps
        (174 -> 190 per iteration), and 6 of 9 were clean instead of 4 (the
        four-dimensional set's slow density block remains: two of its fits had one
        divergent transition each). Other dimensions keep 10: the coverage study's fits
        do not reach it, and the ten classes without reduction, which do, are held to
        issue 16's time goal.

    The warm-up's last window, where only the step size adapts (Stan's ``term_buffer``),
    is not a setting: :meth:`step_size_window_for` gives it from the fit's warm-up. One
    output dimension takes 30 % of the warm-up (150 of 500) instead of Stan's 50
    iterations: at ``adapt_delta`` 0.99 the step size's dual averaging over 50 iterations
    left the chains of one fit at step sizes 2-5 times apart (0.03-0.16) and the slow
    chains at 63-127 leapfrog steps per iteration. Paired on 26 of the coverage study's
    1-D sets (every problem and size; 2026-12-06, docs/model.md, "A longer step-size
    window in one dimension"): steps per iteration 35.5 -> 30.9 on average, fewer in 25
    of 26 fits, the chains' step sizes twice as close (range over mean 0.37 -> 0.17),
    bulk ESS and R-hat unchanged (smallest ESS 1,311 -> 1,363, largest R-hat 1.0067 ->
    1.0042). Two or more dimensions and class reductions with pair offsets keep Stan's
    window: paired there on 29 sets (24 two-dimensional, 5 reductions), 30 % of the
    warm-up changed nothing (steps 31.34 -> 31.45 and 29.95 -> 29.48 per iteration, the
    3/5/8 set's single divergent transitions moving between seeds; docs/model.md, "Two
    dimensions and class reductions").
    """

    chains: int = 4
    warmup: int | None = None
    draws: int | None = None
    adapt_delta: float | None = None
    max_treedepth: int | None = None

    #: ``adapt_delta_for`` one output dimension, two (a tensor grid), three or four
    #: (kernels at centres on the data, whitened: up to ``stan_data.WHITEN_MAX_DIMS``),
    #: and more (centres, plain blocks).
    ADAPT_DELTA_ONE_DIM: ClassVar[float] = 0.99
    ADAPT_DELTA_TWO_DIMS: ClassVar[float] = 0.97
    ADAPT_DELTA_WHITENED_CENTRES: ClassVar[float] = 0.99
    ADAPT_DELTA_MULTI: ClassVar[float] = 0.95
    #: ``max_treedepth_for`` three or four output dimensions (whitened centres), and
    #: every other fit (Stan's default).
    MAX_TREEDEPTH_WHITENED_CENTRES: ClassVar[int] = 11
    MAX_TREEDEPTH: ClassVar[int] = 10
    #: ``adapt_delta_for`` a class reduction's fit with pair offsets ("grouped").
    ADAPT_DELTA_GROUPED: ClassVar[float] = 0.95
    #: ``warmup_for`` one output dimension, and for two or more.
    WARMUP_ONE_DIM: ClassVar[int] = 500
    WARMUP_MULTI: ClassVar[int] = 250
    #: ``draws_for`` one output dimension, and for two or more.
    DRAWS_ONE_DIM: ClassVar[int] = 1000
    DRAWS_MULTI: ClassVar[int] = 750
    #: ``step_size_window_for`` one output dimension: this share of the warm-up.
    STEP_SIZE_WINDOW_SHARE: ClassVar[float] = 0.3

    def adapt_delta_for(
        self, model_dims: int, adapt_delta: float | None = None, grouped: bool = False
    ) -> float:
        """The target acceptance rate of a fit with ``model_dims`` output dimensions:
        ``adapt_delta`` when given, else this set's, else 0.99 for one dimension, 0.97 for
        two, 0.99 for three or four (whitened centres) and 0.95 for more; 0.95 for a class
        reduction's fit with pair offsets (``grouped``)."""
        by_dims = {1: self.ADAPT_DELTA_ONE_DIM, 2: self.ADAPT_DELTA_TWO_DIMS}
        by_dims.update(dict.fromkeys(range(3, WHITEN_MAX_DIMS + 1),
                                     self.ADAPT_DELTA_WHITENED_CENTRES))  # fmt: skip
        default = by_dims.get(int(model_dims), self.ADAPT_DELTA_MULTI)
        if grouped:
            default = self.ADAPT_DELTA_GROUPED
        return _first_given(adapt_delta, self.adapt_delta, default)

    def max_treedepth_for(
        self, model_dims: int, max_treedepth: int | None = None, grouped: bool = False
    ) -> int:
        """The largest tree depth of a fit with ``model_dims`` output dimensions:
        ``max_treedepth`` when given, else this set's, else 11 for three or four
        dimensions (whitened centres) and Stan's 10 otherwise, a class reduction's fit
        with pair offsets (``grouped``) included."""
        whitened = 3 <= int(model_dims) <= WHITEN_MAX_DIMS and not grouped
        default = self.MAX_TREEDEPTH_WHITENED_CENTRES if whitened else self.MAX_TREEDEPTH
        return _first_given(max_treedepth, self.max_treedepth, default)

    def warmup_for(self, model_dims: int, warmup: int | None = None) -> int:
        """The warm-up iterations of a fit with ``model_dims`` output dimensions:
        ``warmup`` when given, else this set's, else 500 for one dimension and 250 for
        more."""
        by_dims = {1: self.WARMUP_ONE_DIM}
        return _first_given(warmup, self.warmup, by_dims.get(int(model_dims), self.WARMUP_MULTI))

    def draws_for(self, model_dims: int, draws: int | None = None) -> int:
        """The kept draws per chain of a fit with ``model_dims`` output dimensions:
        ``draws`` when given, else this set's, else 1,000 for one dimension and 750 for
        more."""
        by_dims = {1: self.DRAWS_ONE_DIM}
        return _first_given(draws, self.draws, by_dims.get(int(model_dims), self.DRAWS_MULTI))

    def step_size_window_for(
        self, model_dims: int, warmup: int, grouped: bool = False
    ) -> int | None:
        """The warm-up's last window, where only the step size adapts, of a fit with
        ``model_dims`` output dimensions and ``warmup`` iterations (the class docstring):
        30 % of the warm-up for one dimension without pair offsets (``grouped``), when it
        is at least Stan's 50 and leaves Stan's initial buffer and first metric window
        (100 iterations) before it; None (Stan's 50) otherwise."""
        if int(model_dims) != 1 or grouped or not isinstance(warmup, (int, np.integer)):
            return None  # (a warm-up that is no integer: the backend's check says so)
        window = round(self.STEP_SIZE_WINDOW_SHARE * int(warmup))
        if window < STAN_TERM_BUFFER or window > step_size_window_room(warmup):
            return None
        return window

    def as_dict(self) -> dict[str, int | float | None]:
        return asdict(self)


def _first_given(given: Any, own: Any, by_dims: Any) -> Any:
    """The first of ``given`` and ``own`` that is not None, else ``by_dims`` (the default
    of the fit's output dimensions). Returned as given: the backends validate it
    (check_sampler_arguments)."""
    for value in (given, own):
        if value is not None:
            return value
    return by_dims


#: The one set of sampler defaults.
SAMPLER_DEFAULTS = SamplerDefaults()
