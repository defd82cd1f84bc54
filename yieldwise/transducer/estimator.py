"""The probability transducer ``p(class | output)`` (theory section 3).

A classifier's raw output ``y`` is treated like a diagnostic test result: the
transducer learns the joint density of (class, output) from a calibration set
with a nonparametric Bayesian mixture fitted by Stan, and turns any output into
class probabilities, with bands showing how much they could still move.
"""

from __future__ import annotations

import html
import inspect
import logging
import numbers
import secrets
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import logsumexp

from .. import _design
from .._design import KernelDesign, distinct_outputs
from .._validation import (
    Label,
    categories_of,
    check_labels,
    check_positive_int,
    indices_of,
    is_seed,
    label_values,
    sorted_unique,
)
from .diagnostics import (
    BIN_ESS_SHARE_MIN,
    DiagnosticsWarning,
    approximation_pareto_k,
    binning_record,
    diagnose,
    likelihood_record,
    reference_rows,
    sampler_summary,
    warn_on_binning,
    warn_on_cut_gap,
    warn_on_invariants,
)
from .encoding import (
    ConstantOutputWarning,
    ExtrapolationWarning,
    LatticeWarning,
    OutputTransform,
    as_outputs,
    choose_transform,
    few_points_on_a_line,
    joint_outputs,
    member_outputs,
    misnamed_class_columns,
    names_given,
    snap_to_lattice,
    unique_rows,
    warn_off_line,
    warn_outside,
)
from .io import (
    check_savable_labels,
    coord_labels,
    fit_record,
    record_members,
    record_reduction,
    to_inference_data,
)
from .posterior import TransducerPosterior, draws_slice
from .reduction import (
    ClassRanks,
    choose_reduction,
    rank_check,
    temperature_draws,
    warn_on_rank_check,
)
from .sampler import SAMPLER_DEFAULTS
from .stan_data import CUT_GAP_TOLERANCE, KERNEL_TAIL_CUT

if TYPE_CHECKING:
    import arviz as az
    from matplotlib.axes import Axes

    from ..utility import UtilityMatrix

__all__ = ["DiagnosticsWarning", "ExtrapolationWarning", "LatticeWarning", "Transducer"]

logger = logging.getLogger(__name__)

#: Fewer calibration items than this cannot inform a mixture of several components.
MIN_ITEMS = 10
# Above this many distinct 1-D continuous outputs, predict_proba interpolates the exact
# formula from a grid (theory 3.2 costs draws x components per output).
_INTERPOLATE_ABOVE = 4096
#: A class-reduced transducer's bands hold at most this many draws x items x classes
#: numbers at a time (160 MB).
_BAND_BLOCK = 20_000_000
#: reduced_joint gathers the pair weights for at most this many draws x items x ranks
#: numbers at a time (32 MB).
_REDUCED_BLOCK = 4_000_000
_GRID_START = 257
_GRID_MAX = 65_537
_INTERPOLATION_TOLERANCE = 1e-6


@dataclass(frozen=True)
class _RankFit:
    """What a class-reduced transducer's inner fit of ``(rank, margin)`` is given beside
    its data (:meth:`Transducer._fit_reduced`). A rank no item takes (every item right: no
    "others") is then allowed, and learnt from the prior and the items that are not of it
    (docs/model.md, "Many classes"); a user's own classes must each have items.

    Attributes
    ----------
    groups : (items' 0-based pair, each pair's parent), or None
        The pair offsets (stan/transducer.stan, "Group offsets"); None without them.
    odds_mean : (items, ranks - 1) array or None
        With ``_design.RANKS_CENTRED``, each item's prior mean of the rank log-odds (the
        classifier's own, ``ClassRanks.own_log_odds``; build_stan_data's ``odds_mean``).
    """

    groups: tuple[np.ndarray, np.ndarray] | None = None
    odds_mean: np.ndarray | None = None


class Transducer:
    """Probability transducer fitted by Stan: ``p(class | classifier output)``.

    Parameters
    ----------
    n_components : "auto" or int
        Number of fixed kernels ``K`` of the mixture (docs/model.md). ``"auto"``: an
        even grid of 60 kernels, half a spacing wide, for one output dimension, a 14 x 14
        tensor grid for two, and for more centres placed on the data: 120, or
        ``round(3.65 sqrt(n))`` for ``n`` calibration items from 1,090 on (at most 240;
        docs/model.md). An int sets ``K`` (a 2-D grid takes the nearest square); on a 1-D
        grid the smoothing prior keeps at most the random walk's 28 smoothest functions
        whatever ``K``, so a larger ``K`` makes the kernels finer, not the curve rougher.
    output_transform : str or sequence of str
        ``"auto"`` (logit for outputs in [0, 1], log for positive ones, identity
        otherwise; additive log-ratios for probability vectors), or one of
        ``"identity"``, ``"logit"``, ``"log"``, ``"simplex"``, or one kind per column.
    resolution : "auto", None, float or sequence
        Lattice spacing of discrete outputs (vote fractions ``k/200``), modelled
        as interval-censored bins; ``"auto"`` detects it, None treats outputs
        as continuous.
    prior : mapping, optional
        Overrides of the prior's hyper-parameters, each a positive number (the prior is
        described in ``docs/model.md``):

        * ``tau_a_scale`` (default 20): half-Normal scale of the smoothing sd of the
          outputs' log-density over the kernels;
        * ``tau_f_scale`` (default 5): half-Student-t scale of the smoothing sd of
          the class log-odds (the size, in log units, of their non-linear part over
          the outputs' range);
        * ``tau_f_df`` (default 3): that half-Student-t's degrees of freedom (heavy
          tailed, so that data wanting a sharply bent curve get one), or None for a
          half-Normal scale, the default for two or more output dimensions;
        * ``tau_f_floor`` (default 1; 0, none, for two output dimensions; 0.3 for three
          or more, where the kernels are scattered centres): a
          soft floor under that smoothing sd (its density times
          ``1 - exp(-(tau_f / floor)^2)``; 0 for none), which keeps the sampler out of
          the funnel's neck at ``tau_f -> 0``;
        * ``intercept_scale`` (default 5): Normal sd of the class log-odds' intercepts;
        * ``slope_scale`` (default 40): Normal sd of every other fixed-effect
          coefficient
          (the linear terms of the log-density and of the log-odds, per unit of the
          outputs' standardised range);
        * ``tau_l_scale`` (default 0; a candidate, one output dimension only):
          half-Normal scale of local smoothing sds, each over a stretch of the grid, so
          that the class log-odds may be smoother in one place than another (0: none;
          docs/model.md, "Local smoothing scales").
    chains, warmup, draws : int
        NUTS settings: chains, warm-up iterations and kept draws per chain (defaults:
        :data:`yieldwise.transducer.SAMPLER_DEFAULTS`: 4 chains; for ``warmup=None`` 500
        warm-up iterations with one output dimension, 250 with more; for ``draws=None``
        1,000 draws with one output dimension, 750 with more; the values used are in
        ``sampler_summary()``).
    seed : int, optional
        Random seed; drawn and recorded when None, so every fit is reproducible.
    backend : {"auto", "cmdstanpy", "pystan", "laplace"}
        Stan interface; ``"auto"`` prefers cmdstanpy when CmdStan is installed.
        ``"laplace"`` is not Stan: a Normal approximation of the posterior (at its
        mode; in one output dimension at the smoothing scales' marginals), in numpy, in
        seconds (:mod:`yieldwise.backends._laplace`), for dry runs and
        plumbing, never chosen by ``"auto"`` and not for decisions resting on the
        uncertainty (its bands are those of a Normal approximation).
    max_treedepth, adapt_delta : NUTS tuning; None (the default) takes
        :data:`yieldwise.transducer.SAMPLER_DEFAULTS`' value for the fit's output
        dimensions: ``max_treedepth`` 11 with three or four (joint fits), else Stan's 10;
        ``adapt_delta`` 0.99 with one, 0.97 with two, 0.99 with three or four, 0.95 with
        more (0.95 for a class reduction's pair offsets). The values used are in
        ``sampler_summary()``.
    progress : bool
        Show the sampler's progress.
    kernel_tail_cut : float
        Kernel values below this fraction of a calibration row's largest are left out
        of the likelihood's sums when that leaves at most a third of them (default
        1e-15: on a 2-D grid a quarter remain and sampling takes about a third less time;
        docs/model.md, "The likelihood's sparse form"). The program reports per draw
        how much the values left out would add to the log-likelihood; the fit warns
        when that exceeds 0.01 (``sampler_summary()["cut_gap"]``). 0 keeps every value.
    class_reduction : "auto", "ranks" or None
        Many classes (:mod:`yieldwise.transducer.reduction`): ``"ranks"`` models the rank
        of the true class in the output's own ordering (first, second, others) against
        the margin between the output's top two class scores, a 1-D problem with offsets
        per pair of top classes, and maps it back to the classes through the output (the
        lower classes share by a tempered softmax). ``"auto"`` (default) does so for a
        probability vector of 4 or more classes with one column per class (column ``j``
        the output for ``class_labels[j]``, by position: when the columns' names are the
        class labels in another order, :meth:`fit` refuses them, see its ``outputs``);
        ``"ranks"`` also takes one real score per class (logits); None never reduces. A
        reduced transducer has no generative mode (``prevalences``) and no
        :meth:`output_density`.
    likelihood_bins : "auto", None or float
        Large calibration sets (docs/model.md, "Large calibration sets"): the likelihood
        costs time in proportion to the distinct (class, output) rows, so with more than
        2,000 of them ``"auto"`` merges the rows of continuous outputs in bins 1/16 of a
        kernel's width (1/4 for two output dimensions), each at its items' mean, when the
        bins keep at most three
        quarters of the rows (a fit of 3,600 scores then samples in half the time, one of
        100,000 in the time of a few thousand). The fit then compares the binned posterior with
        the exact likelihood at 400 draws and warns when, reweighted to it, the draws keep
        an effective share below 0.9 (``sampler_summary()["binning"]``). None keeps every
        row (exact, slower); a number in (0, 1] bins at that fraction of the width
        whatever the number of rows. Lattice outputs (vote fractions) are never binned.

    Attributes
    ----------
    classes_ : tuple of labels
    transform_ : OutputTransform
    posterior : TransducerPosterior
        The draws flattened over chains, with the mixture's math as public methods (the
        joint, class frequencies, bin masses, the predictive); read-only.
    posterior_ : arviz.InferenceData
        Groups ``posterior`` (the mixture ``w``, ``alpha``, ``mu``, ``sigma`` in the
        form of theory 3.1, ``log_lik``, and the class log-odds' smoothing sd ``tau_f``),
        ``sample_stats``, ``observed_data`` and ``constant_data`` (the merged rows the
        likelihood summed, binned on large sets: ``likelihood_bins``).
    backend_ : str
        The backend that ran.
    seed_ : int
        The seed that ran (drawn at random when ``seed`` is None).
    n_calibration_ : int
    n_components_ : int
        The number of kernels of the fit.
    members_ : dict
        For a joint transducer (``fit`` with a mapping), each classifier's columns;
        empty otherwise.
    reduction_ : ClassRanks or None
        The class reduction applied (``class_reduction``), or None.
    reduced_ : Transducer or None
        With a reduction, the fitted transducer of the reduced problem, ``p(rank | margin)``:
        its draws, diagnostics, :meth:`loo` and :meth:`plot` are this one's.

    Examples
    --------
    >>> import numpy as np
    >>> from yieldwise import Transducer
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 2, 300)
    >>> scores = rng.beta(2 + 3 * labels, 5 - 3 * labels)
    >>> t = Transducer(chains=2, warmup=300, draws=300, seed=1, progress=False)
    >>> t = t.fit(scores, labels)  # compiles the Stan model on first use
    >>> p = t.predict_proba([0.2, 0.8])  # (items, classes)
    >>> p.shape, bool(p[0, 1] < 0.5 < p[1, 1])
    ((2, 2), True)
    >>> band = t.predict_interval([0.8], prob=0.75)  # xarray: mean, lower, upper
    >>> bool(band["lower"][0, 1] <= band["mean"][0, 1] <= band["upper"][0, 1])
    True
    """

    # Set by fit for a class-reduced transducer (class_reduction); None otherwise, and
    # before fitting (check_fitted, not these, says whether it is fitted).
    reduction_: ClassRanks | None = None
    reduced_: Transducer | None = None

    def __init__(
        self,
        *,
        n_components: int | Iterable[int] | str = "auto",
        output_transform: str | Iterable[str] = "auto",
        resolution: Any = "auto",
        prior: Mapping[str, Any] | None = None,
        chains: int = SAMPLER_DEFAULTS.chains,
        warmup: int | None = SAMPLER_DEFAULTS.warmup,
        draws: int | None = SAMPLER_DEFAULTS.draws,
        seed: int | None = None,
        backend: str = "auto",
        max_treedepth: int | None = SAMPLER_DEFAULTS.max_treedepth,
        # None: 0.99 for one output dimension, 0.97 for two, 0.99 for three or four, 0.95 for
        # more (SamplerDefaults says why)
        adapt_delta: float | None = SAMPLER_DEFAULTS.adapt_delta,
        progress: bool = True,
        kernel_tail_cut: float = KERNEL_TAIL_CUT,
        class_reduction: str | None = "auto",
        likelihood_bins: str | float | None = "auto",
    ) -> None:
        self.n_components = n_components
        self.output_transform = output_transform
        self.resolution = resolution
        self.prior = prior
        self.chains = chains
        self.warmup = warmup
        self.draws = draws
        self.seed = seed
        self.backend = backend
        self.max_treedepth = max_treedepth
        self.adapt_delta = adapt_delta
        self.progress = progress
        self.kernel_tail_cut = kernel_tail_cut
        self.class_reduction = class_reduction
        self.likelihood_bins = likelihood_bins

    # ------------------------------------------------------------ sklearn API
    # The constructor's keyword arguments, as scikit-learn's _get_param_names reads them.
    _PARAMS = tuple(inspect.signature(__init__).parameters)[1:]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (scikit-learn convention)."""
        return {name: getattr(self, name) for name in self._PARAMS}

    def set_params(self, **params: Any) -> Transducer:
        """Set constructor parameters (scikit-learn convention); returns ``self``."""
        for name, value in params.items():
            if name not in self._PARAMS:
                raise ValueError(f"unknown parameter {name!r}; valid: {list(self._PARAMS)}")
            setattr(self, name, value)
        return self

    # -------------------------------------------------------------------- fit
    def fit(self, outputs: Any, classes: Any, *, class_labels: Any = None) -> Transducer:
        """Fit the transducer to a calibration set.

        Parameters
        ----------
        outputs : array-like (items,) or (items, D), DataFrame, or mapping name -> outputs
            The classifier's outputs on calibration items it never saw in
            training. DataFrame column names are kept, and predictions then match a
            DataFrame's columns to them by name (an array, or a DataFrame given to a
            transducer fitted on an array, by position: the latter warns). An output
            with one column per class (a probability vector, one logit per class) is
            read by position, column ``j`` the output for ``class_labels[j]``; when
            the column names name the classes (each name holds one class label as a
            token, as ``"p_3"`` or ``"logit_other"``:
            :func:`~yieldwise.transducer.encoding.columns_naming_classes`) in another
            order than the classes, fit raises ValueError rather than pair them
            wrongly: pass ``class_labels`` in the columns' order, or reorder the
            columns. A mapping of several
            classifiers' outputs on the same items fits one *joint* transducer of
            their concatenated outputs: ``members_`` records each classifier's
            columns, :meth:`marginal` gives each one's own transducer, and
            :func:`yieldwise.compare` ranks them (and the joint ensemble) with
            paired draws.
        classes : 1-D labels, one per item
            True classes (any hashable labels; a categorical's categories order them).
        class_labels : sequence, optional
            All class labels in order (default: categories, else sorted labels seen).
            Every class must have calibration items.

        Returns
        -------
        Transducer
            ``self``, fitted.
        """
        return self._fit(outputs, classes, class_labels, None)

    def _fit(
        self, outputs: Any, classes: Any, class_labels: Any, reduced: _RankFit | None
    ) -> Transducer:
        """:meth:`fit`; ``reduced`` given when this is a class-reduced transducer's inner fit
        of ``(rank, margin)`` (:meth:`_fit_reduced`)."""
        from ..backends import get_backend, stan_file
        from .stan_data import build_stan_data, check_tail_cut, sampler_inits, with_kernels

        groups = reduced.groups if reduced is not None else None
        odds_mean = reduced.odds_mean if reduced is not None else None

        n_components = check_components(self.n_components)
        tail_cut = check_tail_cut(self.kernel_tail_cut)
        check_likelihood_bins(self.likelihood_bins)  # refused before any work; set below
        spec, resolution, members = self.output_transform, self.resolution, {}
        if isinstance(outputs, Mapping):
            outputs, members, spec, resolution = joint_outputs(outputs, spec, resolution)
        named = names_given(outputs)
        y, columns = as_outputs(outputs, "outputs")
        truth = label_values(classes, "classes")
        if truth.size != y.shape[0]:
            raise ValueError(
                f"classes must have one label per row of outputs ({y.shape[0]}), found {truth.size}"
            )
        if y.shape[0] < MIN_ITEMS:
            raise ValueError(
                f"outputs has {y.shape[0]} calibration items; the transducer needs at least "
                f"{MIN_ITEMS} (and realistically hundreds)"
            )
        given = class_labels is not None
        if class_labels is None:
            class_labels = categories_of(classes) or sorted_unique(truth)
        labels = check_labels(class_labels, len(list(class_labels)), "class_labels")
        if len(labels) < 2:
            raise ValueError(f"classes must include at least 2 classes, found {list(labels)}")
        class_index = indices_of(truth, labels, "classes", "class_labels")
        # refused now, not by save() after the sampling: a fit whose labels a transducer
        # file cannot hold (tuples, ...) could never be saved
        check_savable_labels(
            labels, "class_labels" if given else "classes", " (save() would fail after the fit)"
        )
        per_class = np.bincount(class_index, minlength=len(labels))
        if (per_class == 0).any() and reduced is None:
            missing = [labels[j] for j in np.flatnonzero(per_class == 0)]
            if given:
                remedy = "Add items of that class or drop it from class_labels"
            else:  # only a categorical's categories can name a class without items
                call = (".cat.remove_unused_categories()" if isinstance(classes, pd.Series)
                        else ".remove_unused_categories()")  # fmt: skip
                remedy = (
                    f"They are categories of the categorical classes {list(labels)} that no "
                    f"item has: add items of them, or drop them (classes{call})"
                )
            raise ValueError(
                f"class(es) {missing} have no calibration items; the transducer cannot learn "
                f"p(class | output) for a class it never saw. {remedy}"
            )
        if reduced is None and not members and named:
            _check_class_columns(columns, labels)
        # a joint fit keeps each classifier's own coordinates (no rotation): its marginals
        # (marginal()) drop the other members' dimensions of every product kernel
        transform = choose_transform(
            y, columns, spec, resolution, rotate=not members, few_points=False, named=named
        )
        reduction = choose_reduction(
            self.class_reduction, y, transform.columns, labels, transform.kind, bool(members),
        )  # fmt: skip
        if reduction is not None:
            return self._fit_reduced(y, class_index, transform, reduction)
        if not members:  # at most two distinct outputs: on a line (encoding, "Hard labels")
            explicit = not isinstance(resolution, str)
            transform = few_points_on_a_line(y, transform, explicit=explicit) or transform
        lower, upper, censored = transform.intervals(y)
        chains = check_positive_int(self.chains, "chains")
        # Draw the seed here when none is given: it seeds the initial values as well as
        # the sampler, and is recorded (seed_) so that the fit can be repeated exactly.
        seed = self.seed if self.seed is not None else secrets.randbelow(2**31 - 1)
        # checked here: the initial values are drawn with it before the sampler runs
        if not is_seed(seed, upper=2**31):
            raise ValueError(f"seed must be an integer in [0, 2**31) or None, found {seed!r}")
        bin_fraction, bin_min_rows, bin_max_share = check_likelihood_bins(
            self.likelihood_bins, dims=lower.shape[1]
        )
        data, design = build_stan_data(
            class_index, lower, upper, censored, len(labels), n_components, self.prior,
            seed=seed, kernel_tail_cut=tail_cut, groups=groups, odds_mean=odds_mean,
            bin_fraction=bin_fraction, bin_min_rows=bin_min_rows, bin_max_share=bin_max_share,
        )  # fmt: skip
        _warn_on_few_outputs(data)
        program = get_backend(self.backend).compile(stan_file("transducer"))
        warmup = SAMPLER_DEFAULTS.warmup_for(transform.model_dims, self.warmup)
        result = program.sample(
            data.as_dict(),
            chains=chains,
            warmup=warmup,
            step_size_window=SAMPLER_DEFAULTS.step_size_window_for(
                transform.model_dims, warmup, grouped=groups is not None
            ),
            draws=SAMPLER_DEFAULTS.draws_for(transform.model_dims, self.draws),
            seed=seed,
            init=sampler_inits(data, chains, seed),
            max_treedepth=SAMPLER_DEFAULTS.max_treedepth_for(
                transform.model_dims, self.max_treedepth, grouped=groups is not None
            ),
            adapt_delta=SAMPLER_DEFAULTS.adapt_delta_for(
                transform.model_dims, self.adapt_delta, grouped=groups is not None
            ),
            progress=self.progress,
        )
        result.draws = with_kernels(result.draws, data)
        result.settings["likelihood"] = likelihood = likelihood_record(result, data, tail_cut)
        warn_on_cut_gap(likelihood, CUT_GAP_TOLERANCE, stacklevel=2)
        if np.any(data.bin_width > 0):
            likelihood.update(
                binning_record(result.draws, data, class_index, lower, upper, censored)
            )
            warn_on_binning(likelihood, BIN_ESS_SHARE_MIN, stacklevel=2, fraction=bin_fraction)
        self._set_fitted(result, data, y, class_index, labels, transform, design)
        self.members_ = members
        record_members(self.posterior_, members)
        self._warn_on_invariants()
        return self

    def _fit_reduced(
        self, y: np.ndarray, class_index: np.ndarray, transform: OutputTransform,
        reduction: ClassRanks,
    ) -> Transducer:  # fmt: skip
        """Fit the transducer of ``(rank, margin)`` and keep it as ``reduced_`` (reduction.py)."""
        if (reduction.ranks(y, class_index) >= 2).sum() == 0:
            reduction = reduction.with_kept(1)  # no item ranks below second: first / others
        ranks = reduction.reduced_classes(y, class_index)
        params = self.get_params() | {"class_reduction": None, "output_transform": "identity",
                                      "resolution": None}  # fmt: skip
        inner = Transducer(**params)._fit(
            pd.DataFrame(reduction.margins(y), columns=list(reduction.margin_columns)),
            np.asarray(reduction.rank_classes, dtype=object)[ranks],
            list(reduction.rank_classes),
            _RankFit(
                groups=(reduction.pairs(y), reduction.pair_parents()) if reduction.paired else None,
                odds_mean=reduction.own_log_odds(y) if _design.RANKS_CENTRED else None,
            ),
        )
        # the others' share's temperature: its exact posterior, one draw per mixture draw
        sizes = inner.posterior_.posterior.sizes
        inner.posterior_.posterior["others_temperature"] = (
            ("chain", "draw"),
            temperature_draws(reduction, y, class_index, (sizes["chain"], sizes["draw"]),
                              inner.seed_),
        )  # fmt: skip
        self._adopt_reduced(inner, reduction, transform, int(y.shape[0]))
        record_reduction(self.posterior_, self, y, class_index)
        warn_on_rank_check(self.rank_check(), stacklevel=3)
        return self

    def _adopt_reduced(
        self, inner: Transducer, reduction: ClassRanks, transform: OutputTransform, n: int
    ) -> None:
        """The fitted state of a class-reduced transducer: its classes, outputs' transform and
        calibration size; the reduced fit ``inner``'s draws, record and sampler facts."""
        self.reduced_, self.reduction_ = inner, reduction
        self.classes_, self.transform_, self.n_calibration_ = reduction.classes, transform, n
        self.backend_, self.seed_ = inner.backend_, inner.seed_
        self.n_components_, self.members_ = inner.n_components_, {}
        self.posterior_, self._posterior = inner.posterior_, inner.posterior
        self.others_temperature_ = np.asarray(
            self.posterior_.posterior["others_temperature"].values, float
        ).reshape(-1)
        # the pair offsets' draws (S, pairs, ranks), or None without them
        offsets = self.posterior_.posterior.get("group_offset")
        self.pair_offset_ = (
            None if offsets is None
            else np.asarray(offsets.values, float).reshape(-1, *offsets.shape[2:])
        )  # fmt: skip

    def _set_fitted(
        self,
        result: Any,
        data: Mapping[str, Any],
        y: np.ndarray,
        class_index: np.ndarray,
        labels: tuple[Label, ...],
        transform: OutputTransform,
        design: KernelDesign | None = None,
    ) -> None:
        """Store the fitted state from a backend's ``SampleResult`` and the Stan data."""
        self.classes_ = labels
        self.transform_ = transform
        self.n_calibration_ = int(y.shape[0])
        self.backend_ = result.backend
        self.seed_ = int(result.settings["seed"])  # the seed that ran (drawn when seed=None)
        self.n_components_ = int(np.shape(result.draws["w"])[2])
        self.posterior_ = to_inference_data(
            self, result, data, y, class_index, transform.columns, design
        )
        self.members_: dict[str, list[str]] = {}
        self.reduction_: ClassRanks | None = None
        self.reduced_: Transducer | None = None
        self._cache_draws()

    @classmethod
    def from_draws(
        cls,
        draws: Mapping[str, np.ndarray],
        outputs: Any,
        classes: Any,
        class_labels: tuple[Label, ...],
        *,
        output_transform: str | list[str] = "auto",
        resolution: Any = "auto",
        backend: str = "given-draws",
        sample_stats: Mapping[str, np.ndarray] | None = None,
        sampler: Mapping[str, Any] | None = None,
        sampling_seconds: float = 0.0,
        rotate: bool = False,
    ) -> Transducer:
        """A fitted transducer whose posterior is given (``w``, ``alpha``, ``mu``, ``sigma``).

        Parameters
        ----------
        draws : mapping
            ``w`` (chain, draw, K), ``alpha`` (chain, draw, K, C), ``mu`` and ``sigma``
            (chain, draw, K, D) in the form of theory 3.1, as a backend returns them, and
            optionally ``log_lik`` (chain, draw).
        outputs, classes : the calibration outputs and their labels, as for :meth:`fit`.
        class_labels : tuple of labels
            All class labels, in the order of ``alpha``'s last axis.
        output_transform, resolution : as for the constructor.
        backend : str
            What to record as the backend that ran.
        sample_stats, sampler, sampling_seconds : optional
            A sampler record (``sample_stats`` with ArviZ names, the ``sampler`` settings,
            the sampling time) to carry over; without one the draws count as exact (no
            divergences, one leapfrog step each).
        rotate : bool
            Whether two continuous model coordinates are rotated onto their principal axes
            as :meth:`fit` does (:data:`yieldwise.transducer.encoding.ROTATE_TWO_DIMENSIONS`);
            ``mu`` and ``sigma`` are then in the rotated coordinates. Off by default: given
            draws are in the coordinates their caller chose.

        Used to check the prediction formulas against closed forms and to benchmark them
        without running Stan, for plumbing tests on scripted draws, and by
        :meth:`marginal`, which passes the joint fit's record: the marginal's draws are
        the joint's.
        """
        from ..backends import SampleResult
        from .io import check_draws

        # the labels as fit() normalises them (numpy scalars to Python ones, duplicates and
        # missing labels refused), so a transducer of given draws equals its saved copy
        class_labels = check_labels(class_labels, None, "class_labels")
        check_savable_labels(class_labels, "class_labels")
        y, columns = as_outputs(outputs, "outputs")
        truth = label_values(classes, "classes")
        class_index = indices_of(truth, class_labels, "classes", "class_labels")
        transform = choose_transform(y, columns, output_transform, resolution, rotate=rotate,
                                     named=names_given(outputs))  # fmt: skip
        for name in ("mu", "sigma"):
            found = np.shape(draws[name]) if name in draws else None
            if found is not None and (len(found) != 4 or found[-1] != transform.model_dims):
                line = "; they lie on a line, modelled along it" if transform.is_projected else ""
                raise ValueError(
                    f"draws[{name!r}] must have shape (chain, draw, K, D) with D = "
                    f"{transform.model_dims}, the outputs' model dimensions "
                    f"{list(transform.model_dim_names)}{line}; found shape {found}"
                )
        check_draws(draws, len(class_labels), transform.model_dims)
        chains, n_draws, k = np.shape(draws["w"])
        lower, upper, censored = transform.intervals(y)
        data = _merged_rows(class_index, lower, upper, censored)
        zeros = np.zeros((chains, n_draws))
        stats = {
            "lp": zeros,
            "energy": zeros,
            "step_size": zeros,
            "acceptance_rate": zeros,
            "diverging": zeros.astype(bool),
            "tree_depth": zeros + 1,
            "n_steps": zeros + 1,
        }
        if sample_stats is not None:
            stats = {name: np.asarray(sample_stats[name]) for name in stats}
        settings = {"max_treedepth": SAMPLER_DEFAULTS.MAX_TREEDEPTH, "seed": 0,
                    **(sampler or {})}  # fmt: skip
        result = SampleResult(
            draws={**{name: np.asarray(draws[name], float) for name in ("w", "alpha", "mu",
                                                                      "sigma")},
                   "log_lik": np.asarray(draws.get("log_lik", zeros), float)},
            sample_stats=stats, backend=backend, backend_version="-", stan_version="-",
            settings=settings, sampling_seconds=float(sampling_seconds),
        )  # fmt: skip
        transducer = cls(n_components=k, output_transform=output_transform, resolution=resolution)
        transducer._set_fitted(result, data, y, class_index, class_labels, transform)
        return transducer

    # --------------------------------------------------------------- internals
    def check_fitted(self) -> None:
        """Raise RuntimeError unless the transducer is fitted (by :meth:`fit`, :meth:`load`
        or :meth:`from_draws`)."""
        if not hasattr(self, "posterior_"):
            raise RuntimeError(
                "this Transducer is not fitted yet: call .fit(outputs, classes) or "
                "Transducer.load(path) first"
            )

    @property
    def posterior(self) -> TransducerPosterior:
        """The fitted posterior draws and the mixture's math on them
        (:class:`~yieldwise.transducer.posterior.TransducerPosterior`); what
        :func:`~yieldwise.long_run_utility`, :func:`~yieldwise.compare` and
        :meth:`marginal` compute with. Raises RuntimeError before the transducer is fitted.
        For a class-reduced transducer (``reduction_``), the posterior of the reduced
        problem: its classes are the ranks (``reduction_.rank_classes``), its outputs the
        margins.
        """
        self.check_fitted()
        return self._posterior

    def _cache_draws(self) -> None:
        self._posterior = TransducerPosterior.from_inference_data(self.posterior_, self.classes_)

    def _prepare_outputs(self, outputs: Any) -> np.ndarray:
        """Checked outputs, snapped to the fitted lattice; warns on extrapolation."""
        self.check_fitted()
        if isinstance(outputs, Mapping):  # a joint transducer's, as it was fitted
            if not getattr(self, "members_", None):
                raise ValueError(
                    "outputs as a mapping (member -> outputs) is for a joint transducer; this "
                    "one was fitted on one classifier's outputs: pass them directly"
                )
            outputs = member_outputs(outputs, self.members_)
        y, _ = as_outputs(
            outputs, "outputs", expected=self.transform_.columns, named=self.transform_.named
        )
        self.transform_.check(y)
        calibration = self.posterior_.observed_data["outputs"].values
        y = snap_to_lattice(y, self.transform_, calibration)
        warn_outside(y, self.transform_.columns, calibration)
        warn_off_line(y, self.transform_, calibration)
        return y

    def _ratio_intervals(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``transform_.intervals(y)`` for class probabilities (ratios over classes and
        draws): rows far beyond the kernels moved in to where ``p(c | y)`` has reached its
        limit (:meth:`TransducerPosterior.within_reach`). Not for densities."""
        lower, upper, censored = self.transform_.intervals(y)
        lower, upper = self.posterior.within_reach(lower, upper)
        return lower, upper, censored

    def check_prevalences(self, prevalences: Any) -> np.ndarray | None:
        """Deployment prevalences checked against the classes (as
        :meth:`TransducerPosterior.check_prevalences`), or None; a class-reduced transducer
        refuses any (it has no generative mode)."""
        self.check_fitted()
        if self.reduction_ is not None:
            _refuse_prevalences(prevalences)
            return None
        return self.posterior.check_prevalences(prevalences)

    def calibration_outputs(self) -> np.ndarray:
        """The calibration outputs as fitted, (items, columns) in ``transform_.columns``."""
        self.check_fitted()
        observed = self.posterior_.observed_data
        key = "outputs" if self.reduction_ is None else "class_outputs"
        return observed[key].values

    def rank_check(self, seed: int = 0) -> pd.DataFrame:
        """Posterior predictive check of a class-reduced transducer, class by class.

        Among the calibration items whose output ranks class ``j`` first, how many are of
        class ``j``, against what the reduced model predicts for them (it treats all
        classes alike): :func:`yieldwise.transducer.reduction.rank_check`. A small
        ``p_value`` says the network is better or worse calibrated on that class than the
        reduction assumes (class-specific confusions), so its probabilities for that class
        are off; ``fit`` warns when one is below ``0.05 / C``. Raises ValueError for a
        transducer that is not reduced.
        """
        self.check_fitted()
        if self.reduction_ is None or self.reduced_ is None:
            raise ValueError(
                "rank_check() checks a class-reduced transducer (class_reduction); this one "
                "models the outputs themselves"
            )
        observed = self.posterior_.observed_data
        y = self.calibration_outputs()
        # F_t(first | m_i, pair_i) (S, n): each draw's joint of the ranks and the margin
        # given the item's pair, normalised over the ranks, made a block of draws at a time.
        # Whole, the per-draw rank probabilities and their tilt by the pair offsets were four
        # (S, n, ranks) arrays: a fit's peak, 4.1 GB at ten classes and 10,000 items.
        s, n = self.posterior.n_draws, y.shape[0]
        first = np.empty((s, n))
        step = max(1, _BAND_BLOCK // max(1, n * len(self.reduction_.rank_classes)))
        with _relayed_warnings():
            joint_of = self.reduced_joint_by_draws(y)
            for a in range(0, s, step):
                joint = joint_of(slice(a, a + step))  # (draws, n, ranks)
                first[a : a + step] = joint[..., 0] / joint.sum(axis=2)
        return rank_check(self.reduction_, y, observed["class_label_index"].values, first, seed)

    def _reduced_inputs(self, outputs: Any, prevalences: Any) -> tuple[np.ndarray, pd.DataFrame]:
        """A class-reduced transducer's checked outputs and their margins (the reduced
        transducer's outputs); prevalences are refused (no generative mode)."""
        _refuse_prevalences(prevalences)
        y, _ = as_outputs(
            outputs, "outputs", expected=self.transform_.columns, named=self.transform_.named
        )
        self.transform_.check(y)
        assert self.reduction_ is not None
        columns = list(self.reduction_.margin_columns)
        return y, pd.DataFrame(self.reduction_.margins(y), columns=columns)

    def _log_joint_chunks(self, y: np.ndarray) -> Iterable[tuple[slice, np.ndarray]]:
        """Yield ``(items, log G_t(c, y))`` chunks shaped (draws, chunk, classes)."""
        yield from self.posterior.log_joint_chunks(*self.transform_.intervals(y))

    def _model_proba(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        censored: np.ndarray,
        exchangeable: bool,
        prevalences: np.ndarray | None,
    ) -> np.ndarray:
        """Exact theory-3.2 probabilities at model-scale rows, shape (rows, classes).

        Exchangeable: ``sum_t G_t(c, y) f_t(c) / sum_t sum_c' G_t(c', y) f_t(c')`` with
        ``f_t(c) = r_c / F_t(c)`` given prevalences (else 1), the draws summed before the
        kernels (:meth:`TransducerPosterior.pooled_joint`: the cost of the kernels at each
        row, not of every draw at each row)."""
        if exchangeable:
            post = self.posterior
            factors = post.class_factors(prevalences)
            factors = (np.ones((post.n_draws, 1, post.n_classes)) if factors is None
                       else factors[:, None, :])  # fmt: skip
            groups = np.zeros(lower.shape[0], dtype=int)
            pooled = post.pooled_joint(lower, upper, censored, factors, groups)
            return pooled / pooled.sum(axis=1, keepdims=True)
        out = np.empty((lower.shape[0], len(self.classes_)))
        chunks = self.posterior.class_probability_chunks(lower, upper, censored, prevalences)
        for sl, _, per_draw in chunks:
            out[sl] = per_draw.mean(axis=0)
        return out

    def _pair_weights(self, draws: slice | None = None) -> np.ndarray:
        """(S, pairs, ranks) ``exp(offset_t[g, r]) / Z_t(g)``, with ``Z_t(g) = sum_r
        exp(offset_t[g, r]) F_t(r)``: a draw's joint of (rank, margin) given the output's
        pair is the reduced fit's joint times these (stan/transducer.stan, "Group
        offsets"); ``draws``: those draws only."""
        assert self.pair_offset_ is not None and self.reduced_ is not None
        sel = draws_slice(draws)
        off = self.pair_offset_[sel]
        log_f = self.reduced_.posterior.log_class_frequencies[sel, None, :]
        log_z = logsumexp(off + log_f, axis=2, keepdims=True)
        return np.exp(off - log_z)

    def reduced_joint(self, outputs: Any, draws: slice | None = None) -> np.ndarray:
        """A class-reduced transducer's per-draw joint of (rank, margin) at each output,
        given the output's pair of top classes when the fit has pair offsets: (S, n,
        ranks), scaled by one positive number per output (ratios over draws and ranks are
        exact; theory 3.2). What long-run integrals weigh the calibration outputs by.

        ``draws``, a slice of the posterior's draws: only those draws (draws, n, ranks),
        each output scaled as in the whole, so blocks of draws made one at a time combine
        into the whole (what long-run integrals over many calibration items do, to bound
        their memory; :meth:`reduced_joint_by_draws` does the outputs' own work once for
        such blocks).
        """
        return self.reduced_joint_by_draws(outputs)(draws)

    def reduced_joint_by_draws(self, outputs: Any) -> Callable[[slice | None], np.ndarray]:
        """:meth:`reduced_joint` at fixed outputs as a function of the draws: ``joint =
        t.reduced_joint_by_draws(outputs)``, then ``joint(slice(a, b))`` is
        ``t.reduced_joint(outputs, slice(a, b))`` (``joint(None)``: every draw).

        The outputs' own work (their checks, margins and pairs, and the kernels' values at
        their margins when the kernels are fixed, as model 2's are) is done once here, so a
        caller that forms the joint block after block of draws (long-run cells too large to
        hold, :meth:`rank_check`) pays a matrix product per block, not the kernels again:
        at 20,000 ten-class outputs that work was about 70 ms of each block (43 ms the
        kernels), and ``long_run_utility`` with 20 matrices over them in blocks went from
        29.9 s to 25.7 s (medians of four paired runs, 2026-12-04)."""
        if self.reduction_ is None or self.reduced_ is None:
            raise ValueError("reduced_joint() is for a class-reduced transducer (class_reduction)")
        y, margins = self._reduced_inputs(outputs, None)
        return self._joint_by_draws(y, margins.to_numpy())

    def _joint_by_draws(
        self, y: np.ndarray, z: np.ndarray, order: np.ndarray | None = None,
        pair_weights: np.ndarray | None = None,
    ) -> Callable[[slice | None], np.ndarray]:  # fmt: skip
        """:meth:`reduced_joint_by_draws` at checked outputs ``y`` whose margins, on the
        reduced fit's scale, are ``z`` (``order``: the outputs' :meth:`ClassRanks.order`,
        ``pair_weights``: :meth:`_pair_weights` of every draw, when the caller has them)."""
        assert self.reduction_ is not None and self.reduced_ is not None
        reduced = self.reduced_.posterior
        lower, upper, censored = self.reduced_._ratio_intervals(z.reshape(z.shape[0], -1))
        kernels = reduced.scaled_kernels(lower, upper, censored)
        pairs = None if self.pair_offset_ is None else self.reduction_.pairs(y, order)

        def joint(draws: slice | None = None) -> np.ndarray:
            sel = draws_slice(draws)
            if kernels is None:  # kernels that move between draws: evaluated per draw
                out = reduced.scaled_joint(lower, upper, censored, draws=draws)
            else:
                out = reduced.kernel_joint(kernels, draws=draws)
            if pairs is None:
                return out
            weights = self._pair_weights(draws) if pair_weights is None else pair_weights[sel]
            # in place, a few draws at a time: the pair weights gathered for every draw at
            # once were a second (S, n, ranks) array and the product a third (5.5 GB at ten
            # classes, 20,000 items and 4,000 draws, where the joint is 1.9 GB)
            step = max(1, _REDUCED_BLOCK // max(1, out.shape[1] * out.shape[2]))
            for a in range(0, out.shape[0], step):
                out[a : a + step] *= weights[a : a + step][:, pairs]
            return out

        return joint

    def _paired_proba(self, y: np.ndarray, z: np.ndarray, order: np.ndarray) -> np.ndarray:
        """Exchangeable ``p(rank | m, pair)`` (n, ranks) of a transducer with pair offsets,
        exactly: ``sum_t J_t(r) / sum_t sum_r J_t(r)``, ``J_t`` the draw's joint given the
        output's pair (:meth:`_pair_weights`), at model-scale margins ``z`` (n, D). The
        draws are pooled before the kernels (:meth:`TransducerPosterior.pooled_joint`), so
        an output costs its kernels, not its draws: on 1e6 ten-class outputs (60 kernels,
        4,000 draws) 0.9 s, where the cubic interpolation per pair it replaced took 1.7 s
        to within 1e-6 (2026-12-03)."""
        assert self.reduction_ is not None and self.reduced_ is not None
        self.interpolation_error_ = 0.0
        lower, upper, censored = self.reduced_._ratio_intervals(z)
        num = self.reduced_.posterior.pooled_joint(
            lower, upper, censored, self._pair_weights(), self.reduction_.pairs(y, order)
        )
        return num / num.sum(axis=1, keepdims=True)

    def _interpolated_proba(
        self, z: np.ndarray, exchangeable: bool, prevalences: np.ndarray | None
    ) -> np.ndarray:
        """Probabilities at many 1-D model-scale points by a verified cubic interpolation.

        The exact formula is evaluated on a grid spanning the points and at every
        grid midpoint; the grid is doubled until the interpolant's largest error at
        the midpoints is below ``_INTERPOLATION_TOLERANCE`` (a hundredth of the
        1e-4 accuracy promised), and only then used for all points.
        """
        from scipy.interpolate import CubicSpline

        none = np.zeros(1, dtype=int)
        low, high = float(z.min()), float(z.max())
        nodes = _GRID_START
        while True:
            fine = np.linspace(low, high, 2 * nodes - 1)[:, None]
            exact = self._model_proba(fine, fine, none, exchangeable, prevalences)
            spline = CubicSpline(fine[::2, 0], exact[::2], axis=0)
            error = float(np.abs(spline(fine[1::2, 0]) - exact[1::2]).max())
            if error <= _INTERPOLATION_TOLERANCE or nodes >= _GRID_MAX:
                break
            nodes = 2 * nodes - 1
        self.interpolation_error_ = error
        values = np.clip(spline(z), 0.0, 1.0)
        return values / values.sum(axis=1, keepdims=True)

    # ------------------------------------------------------------- predictions
    def predict_proba(
        self, outputs: Any, *, exchangeable: bool = True, prevalences: Any = None
    ) -> np.ndarray:
        """Class probabilities ``p(c | y)`` for each output (theory 3.2).

        Parameters
        ----------
        outputs : array-like or DataFrame, same columns as at fit time
        exchangeable : bool, keyword-only
            True: new outputs exchangeable with the calibration outputs,
            ``sum_t G_t(c, y) / sum_t sum_c' G_t(c', y)``. False (feature
            shift): ``mean_t F_t(c | y)``. Anything but a bool is a TypeError.
        prevalences : sequence or mapping, optional, keyword-only
            Deployment class prevalences ``r_c`` (generative mode):
            ``p(c | y, r)`` proportional to ``p(y | c, D) r_c``.

        Returns
        -------
        numpy.ndarray of shape (items, classes), columns in ``classes_`` order.

        Notes
        -----
        Each distinct output is evaluated once. With more than 4,096 distinct
        continuous 1-D outputs, the exact formula is evaluated on a grid and
        interpolated; the grid is refined until the interpolation error,
        checked at every grid midpoint against the exact formula, is below
        1e-6. The error reached is stored in ``interpolation_error_``. Otherwise
        (several dimensions, a class reduction's margins) the formula is exact for any
        number of outputs, the draws pooled before the kernels.

        A column fitted as a lattice (``resolution`` h) is modelled by bins
        ``[v - h/2, v + h/2]``; each output is read as the lattice value whose bin
        holds it, so there is one evaluation per lattice value; outputs that were
        off the lattice are counted in a :class:`LatticeWarning`. Outputs outside
        the calibration outputs' range give an :class:`ExtrapolationWarning`.
        DataFrame columns are matched to the fitted ones by name.
        """
        exchangeable = _check_exchangeable(exchangeable)
        if self.reduction_ is not None:
            y, margins = self._reduced_inputs(outputs, prevalences)
            assert self.reduced_ is not None
            if not exchangeable:  # the mean of the per-draw probabilities, as defined
                out = np.empty((y.shape[0], len(self.classes_)))
                with _relayed_warnings():
                    for rows, ordered, order in self._reduced_draws(y):
                        np.put_along_axis(out[rows], order, ordered.mean(axis=0), axis=1)
                return out
            order = self.reduction_.order(y)  # one sort of the outputs' scores
            with _relayed_warnings():
                if self.pair_offset_ is None:
                    ranks = self.reduced_.predict_proba(margins, exchangeable=exchangeable)
                else:  # the margins checked (and warned about) as the reduced fit would
                    ranks = self._paired_proba(y, self.reduced_._prepare_outputs(margins), order)
            # the others' share is independent of the ranks a posteriori: its mean
            share = self.reduction_.mean_share(y, self.others_temperature_, order)
            return self.reduction_.expand(y, ranks, share, order)
        y = self._prepare_outputs(outputs)
        r = self.posterior.check_prevalences(prevalences)
        # Outputs repeat (vote fractions, duplicated scores): evaluate each distinct one once.
        unique, inverse = unique_rows(y)
        lower, upper, censored = self._ratio_intervals(unique)
        self.interpolation_error_ = 0.0
        if unique.shape[0] > _INTERPOLATE_ABOVE and unique.shape[1] == 1 and not censored.any():
            out = self._interpolated_proba(lower[:, 0], exchangeable, r)
        else:
            out = self._model_proba(lower, upper, censored, exchangeable, r)
        return out[inverse.ravel()]

    def draws_proba(self, outputs: Any, *, prevalences: Any = None) -> xr.DataArray:
        """Per-draw transducer ``F_t(c | y)`` as a DataArray (chain, draw, item, class);
        ``prevalences`` (keyword-only) as for :meth:`predict_proba`."""
        if self.reduction_ is not None:
            y, margins = self._reduced_inputs(outputs, prevalences)
            with _relayed_warnings():
                ranks, share, order = self._rank_draws(y, margins)
            return xr.DataArray(
                self.reduction_.expand(y, ranks, share, order),
                dims=("chain", "draw", "item", "class"),
                coords=self._coords(y.shape[0]),
                name="probability",
            )
        y = self._prepare_outputs(outputs)
        r = self.posterior.check_prevalences(prevalences)
        s = self.posterior.n_draws
        unique, inverse = unique_rows(y)  # each distinct output (lattice value) once
        values = np.empty((s, unique.shape[0], len(self.classes_)))
        lower, upper, censored = self._ratio_intervals(unique)
        for sl, _, per_draw in self.posterior.class_probability_chunks(lower, upper, censored, r):
            values[:, sl] = per_draw
        values = values[:, inverse]
        return xr.DataArray(
            self.posterior.by_chain(values),
            dims=("chain", "draw", "item", "class"),
            coords=self._coords(y.shape[0]),
            name="probability",
        )

    def predict_interval(
        self, outputs: Any, prob: float = 0.75, *, prevalences: Any = None
    ) -> xr.Dataset:
        """Probabilities with variability bands (equal-tailed quantiles over draws).

        Returns a Dataset with ``mean`` (the exchangeable transducer), ``lower``
        and ``upper`` (the ``(1 - prob)/2`` and ``(1 + prob)/2`` quantiles of
        ``F_t(c | y)``), dims (item, class). ``prob`` is one number in (0, 1);
        ``prevalences`` (keyword-only) as for :meth:`predict_proba`.
        """
        prob = _check_prob(prob)
        if self.reduction_ is not None:
            return self._reduced_interval(outputs, prob, prevalences)
        y = self._prepare_outputs(outputs)
        r = self.posterior.check_prevalences(prevalences)

        def chunks(unique: np.ndarray) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
            return self.posterior.class_probability_chunks(*self._ratio_intervals(unique), r)

        return self._bands(y, prob, chunks)

    def _reduced_interval(self, outputs: Any, prob: float, prevalences: Any) -> xr.Dataset:
        """predict_interval of a class-reduced transducer: the quantiles of its per-draw
        probabilities (the others' share moves with each draw's temperature), computed
        for blocks of items so that draws x items x classes numbers stay bounded."""
        assert self.reduced_ is not None and self.reduction_ is not None
        y, _ = self._reduced_inputs(outputs, prevalences)
        tail = [(1 - prob) / 2, (1 + prob) / 2]
        with _relayed_warnings(stacklevel=4):  # predict_interval's caller
            mean = self.predict_proba(y)
            lower, upper = np.empty_like(mean), np.empty_like(mean)
            for rows, ordered, order in self._reduced_draws(y):
                low, high = np.quantile(ordered, tail, axis=0, overwrite_input=True)  # own order
                np.put_along_axis(lower[rows], order, low, axis=1)
                np.put_along_axis(upper[rows], order, high, axis=1)
        dims = ("item", "class")
        return xr.Dataset(
            {"mean": (dims, mean), "lower": (dims, lower), "upper": (dims, upper)},
            coords={k: v for k, v in self._coords(y.shape[0]).items() if k in dims},
            attrs={"prob": prob},
        )

    def _rank_draws(
        self, y: np.ndarray, margins: pd.DataFrame, pair_weights: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A class-reduced transducer's per-draw rank probabilities (chain, draw, n, ranks)
        at the checked outputs ``y`` (tilted by each output's pair offsets), the others'
        shares at each draw's temperature (chain, draw, n, C - kept) and the outputs'
        order (n, C): what :meth:`ClassRanks.expand` turns into ``F_t(c | y)``
        (``pair_weights``: :meth:`_pair_weights`, when a caller has them for many calls)."""
        assert self.reduced_ is not None and self.reduction_ is not None
        order = self.reduction_.order(y)  # one sort of the outputs' scores
        # F_t(rank | m, pair): each draw's joint of rank and margin given the pair (the
        # kernels at the margins once, times every draw's weights and pair weights),
        # normalised over the ranks. Per-draw log-sum-exps over the components and the
        # tilt by the offsets in logs took half of predict_interval's time (2026-12-04).
        # The margins are checked, warned about (callers relay) and snapped as the reduced
        # fit does for its own predictions.
        z = self.reduced_._prepare_outputs(margins)
        joint = self._joint_by_draws(y, z, order, pair_weights)(None)
        with np.errstate(divide="ignore", invalid="ignore"):  # as class_probability_chunks
            joint /= joint.sum(axis=2, keepdims=True)
        ranks = self.posterior.by_chain(joint)
        temperature = self.posterior.by_chain(self.others_temperature_)
        share = self.reduction_.shares(y, temperature, order)
        return ranks, share, order

    def _reduced_draws(self, y: np.ndarray) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """A class-reduced transducer's per-draw probabilities (S, rows, C) at the checked
        outputs ``y``, block by block (at most ``_BAND_BLOCK`` numbers each), with each
        output's classes in its own order (:meth:`ClassRanks.in_rank_order`), and that
        order (rows, C): a mean or quantile over draws is put in the classes' order once
        per output, not once per draw. Every block is written into one buffer, so a block
        must be used before the next is asked for (it may be overwritten in place, as
        predict_interval's quantiles do). predict_interval at 2,000 ten-class outputs
        (4,000 draws): 9.7-11.1 s -> 7.7 s; at 20,000: 86.5 s, 1,001 MiB -> 72.1 s,
        805 MiB (2026-12-04, the same bands); with the ranks from the scaled joint
        (:meth:`_rank_draws`), on a faster machine, 3.9-4.1 s -> 2.5-3.1 s at 2,000 and
        37.8 s -> 20.7 s at 20,000 (the same bands)."""
        assert self.reduction_ is not None
        s, c = self.posterior.n_draws, len(self.classes_)
        block = max(1, _BAND_BLOCK // (s * c))
        columns = list(self.reduction_.margin_columns)
        # one buffer for every block (fresh arrays of this size cost their page faults anew)
        buffer = np.empty(s * min(block, y.shape[0]) * c)
        weights = None if self.pair_offset_ is None else self._pair_weights()  # once
        for a in range(0, y.shape[0], block):
            rows = y[a : a + block]
            margins = pd.DataFrame(self.reduction_.margins(rows), columns=columns)
            ranks, share, order = self._rank_draws(rows, margins, weights)
            ordered = buffer[: s * rows.shape[0] * c].reshape(*ranks.shape[:3], c)
            self.reduction_.in_rank_order(ranks, share, out=ordered)
            yield slice(a, a + block), ordered.reshape(s, rows.shape[0], c), order

    def output_density(
        self, outputs: Any, given_class: Label | None = None, prob: float = 0.75
    ) -> xr.Dataset:
        """Generative ``p(y | c)`` on the outputs' original scale, with bands.

        ``mean`` is ``mean_t F_t(y | c)``; ``lower``/``upper`` are quantiles over
        draws. For discrete (censored) outputs the density is the bin probability
        divided by the bin width. Not for a class-reduced transducer (``reduction_``),
        which models the margin of the output's top two classes, not the output:
        ``reduced_.output_density`` gives the margin's density per rank.

        The kernels span the calibration outputs' 1 % to 99 % quantiles, so beyond them
        the density falls as the outermost kernel's Normal tail, far faster than the
        outputs' own law: about ``exp(-r^2 / 2)`` of its edge value ``r`` kernel widths
        out (:meth:`TransducerPosterior.nearest_kernel_widths`; docs/model.md, "What it
        still gets wrong"). Class probabilities there are not affected.
        """
        prob = _check_prob(prob)
        if self.reduction_ is not None:
            raise ValueError(
                "output_density needs the law of the whole output given each class, which a "
                "class-reduced transducer does not model; reduced_.output_density(margins) "
                "gives the density of the margin given each rank, or fit with "
                "Transducer(class_reduction=None)"
            )
        y = self._prepare_outputs(outputs)

        def chunks(unique: np.ndarray) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
            log_freq = self.posterior.log_class_frequencies
            for sl, log_g in self._log_joint_chunks(unique):
                jacobian = self.transform_.log_jacobian(unique[sl])
                log_density = log_g - log_freq[:, None, :] + jacobian[None, :, None]
                density = np.exp(log_density)
                yield sl, density.mean(axis=0), density

        data = self._bands(y, prob, chunks)
        if given_class is not None:
            if given_class not in self.classes_:
                raise ValueError(
                    f"given_class {given_class!r} is not among the classes {list(self.classes_)}"
                )
            data = data.isel({"class": self.classes_.index(given_class)})
        return data

    def _bands(
        self,
        y: np.ndarray,
        prob: float,
        chunks: Callable[[np.ndarray], Iterable[tuple[slice, np.ndarray, np.ndarray]]],
    ) -> xr.Dataset:
        """``mean``, ``lower`` and ``upper`` per item and class, chunk by chunk.

        ``chunks(rows)`` yields, at the distinct output rows (each seen once), each chunk's
        rows, its mean (rows, classes) and its per-draw values (draws, rows, classes), whose
        equal-tailed ``prob`` quantiles give the band (computed in place: the per-draw
        values are the chunk's own).
        """
        n = y.shape[0]
        unique, inverse = unique_rows(y)  # each distinct output (lattice value) once
        m, c = unique.shape[0], len(self.classes_)
        mean, lower, upper = np.empty((m, c)), np.empty((m, c)), np.empty((m, c))
        tails = [(1 - prob) / 2, (1 + prob) / 2]
        for sl, chunk_mean, per_draw in chunks(unique):
            mean[sl] = chunk_mean
            lower[sl], upper[sl] = _draw_quantiles(per_draw, tails)
        mean, lower, upper = mean[inverse], lower[inverse], upper[inverse]
        dims = ("item", "class")
        return xr.Dataset(
            {"mean": (dims, mean), "lower": (dims, lower), "upper": (dims, upper)},
            coords={k: v for k, v in self._coords(n).items() if k in dims},
            attrs={"prob": prob},
        )

    def decide(
        self,
        outputs: Any,
        utility: UtilityMatrix | Any,
        *,
        prevalences: Any = None,
        tie: str = "random",
        seed: int | None = None,
    ) -> np.ndarray:
        """Maximum-expected-utility decisions using the transducer's probabilities
        (``prevalences``, keyword-only, as for :meth:`predict_proba`).

        A ``UtilityMatrix`` or a DataFrame utility (rows decisions, columns classes) is
        matched to the transducer's classes by label, in any order; a plain array's
        columns are taken in ``classes_`` order."""
        from ..decision import decide
        from ..utility import UtilityMatrix

        if isinstance(utility, pd.DataFrame):  # aligned by label, like a UtilityMatrix
            utility = UtilityMatrix(utility)
        if isinstance(utility, UtilityMatrix) and set(utility.classes) != set(self.classes_):
            raise ValueError(
                f"utility's classes {list(utility.classes)} differ from the transducer's "
                f"{list(self.classes_)}"
            )
        proba = self.predict_proba(outputs, prevalences=prevalences)
        if isinstance(utility, UtilityMatrix):
            proba = pd.DataFrame(proba, columns=pd.Index(self.classes_, dtype=object))
        return decide(proba, utility, tie=tie, seed=seed)  # type: ignore[arg-type]

    def _coords(self, n_items: int) -> dict[str, Any]:
        return {
            "chain": np.arange(self.posterior.chains),
            "draw": np.arange(self.posterior.draws),
            "item": np.arange(n_items),
            "class": coord_labels(self.classes_),
        }

    # -------------------------------------------------------------- diagnostics
    def marginal(self, name: str) -> Transducer:
        """One classifier's own transducer, a marginal of this joint one.

        The mixture's kernels are products over output dimensions, so dropping the
        other classifiers' dimensions from every draw gives exactly the posterior of
        the member's ``(class, output)`` density; its draws stay paired with the
        joint's and the other members'.
        """
        self.check_fitted()
        if not self.members_:
            raise ValueError(
                "this transducer was fitted on one classifier's outputs; marginal() needs a "
                "joint fit: Transducer().fit({'a': outputs_a, 'b': outputs_b}, classes)"
            )
        if name not in self.members_:
            raise KeyError(
                f"unknown member {name!r}; this joint transducer has {list(self.members_)}"
            )
        if self.transform_.is_rotated:
            raise ValueError(
                "this transducer's outputs are rotated onto their principal axes, so its "
                "kernels have no per-classifier dimensions to keep; a joint fit "
                "(Transducer().fit({...}, classes)) is never rotated"
            )
        columns = self.members_[name]
        idx = [self.transform_.columns.index(c) for c in columns]
        marginal = self.posterior.select_dims(idx)
        draws = {key: marginal.by_chain(getattr(marginal, key))
                 for key in ("w", "alpha", "mu", "sigma")}  # fmt: skip
        observed = self.posterior_.observed_data
        y = observed["outputs"].values[:, idx]
        labels = np.empty(len(self.classes_), dtype=object)
        labels[:] = list(self.classes_)
        class_index = observed["class_index"].values
        # the marginal model's own log-likelihood of the calibration items, per draw
        lower, upper, censored = self.transform_.intervals(observed["outputs"].values)
        lower, upper, censored = lower[:, idx], upper[:, idx], np.asarray(censored)[idx]
        log_lik = marginal.log_likelihood(class_index, lower, upper, censored)
        draws["log_lik"] = marginal.by_chain(log_lik)
        stats = self.posterior_.sample_stats
        record = fit_record(self.posterior_)
        member = Transducer.from_draws(
            draws, pd.DataFrame(y, columns=columns), labels[class_index],
            self.classes_, output_transform=[self.transform_.kind[i] for i in idx],
            resolution=[self.transform_.resolution[i] for i in idx],
            backend=f"{self.backend_} (marginal {name!r} of a joint fit)",
            sample_stats={name: stats[name].values for name in stats.data_vars},
            sampler=record["sampler"], sampling_seconds=record["sampling_seconds"],
        )  # fmt: skip
        return member

    def reference_outputs(self, n: int = 9) -> np.ndarray:
        """Fixed calibration outputs at which transducer values are diagnosed.

        Calibration rows at ``n`` evenly spaced ranks of their first model
        coordinate, once over all items and once over the distinct rows, without
        repeats. The second set matters for discrete outputs: when half the items
        are exact 0s, ranks over all items fall mostly on 0 and miss the sparse
        middle of the range, where the transducer is least certain.
        """
        self.check_fitted()
        if self.reduced_ is not None:
            return self.reduced_.reference_outputs(n)  # margins: what the draws depend on
        y = self.posterior_.observed_data["outputs"].values
        return reference_rows(y, lambda rows: self.transform_.forward(rows)[:, 0], n)

    def diagnostics(self) -> pd.DataFrame:
        """R-hat and effective sample sizes of label-switching-invariant quantities.

        Rows: the calibration log-likelihood, and ``F_t(c | y)`` at the
        :meth:`reference_outputs` for every class but the last (the last is
        determined by the others). Columns: quantity, output, class, mean, r_hat,
        ess_bulk, ess_tail, ok (``r_hat <= 1.01`` and ``ess_bulk >= 400``). For a
        class-reduced transducer, those of :attr:`reduced_` (the ranks at its margins):
        every class probability is a fixed multiple of one rank's.

        Draws of the Laplace backend are independent, so their R-hat and ESS pass
        whatever the approximation's error: there ``ok`` also requires the Pareto shape
        of their importance ratios (``sampler_summary()["pareto_k"]``) within its limit
        (0.7 for 2,200 draws or more), and ``attrs`` holds both (``pareto_k``,
        ``pareto_k_limit``; None for MCMC draws).
        """
        self.check_fitted()
        if self.reduced_ is not None:
            return self.reduced_.diagnostics()
        reference = self.reference_outputs()
        proba = self.draws_proba(reference).values  # (chain, draw, item, class)
        log_lik = self.posterior_.posterior["log_lik"].values
        k = approximation_pareto_k(self.posterior_)
        return diagnose(log_lik, proba, reference, self.classes_, pareto_k=k)

    def loo(self, *, conditional: bool = False) -> az.ELPDData:
        """PSIS leave-one-out estimate of the expected log predictive density (ArviZ).

        Every calibration item is one observation (items sharing a merged row count once
        each); the pointwise log-likelihood is the model's own, ``log G_t(c_i, y_i)``,
        on the scale of the original outputs (the transform's Jacobian included; for
        outputs recorded at a resolution ``h``, the bin probability divided by ``h``),
        so transducers fitted with different transforms compare. The importance ratios
        always come from it: leaving item ``i`` out removes ``G_t(c_i, y_i)``.

        Parameters
        ----------
        conditional : bool
            False: the joint ``log p(c_i, y_i)``, for comparing transducers with
            ``arviz.compare``. True: the class given the output,
            ``log p(c_i | y_i, data without i)`` (the exchangeable predictive of theory
            3.2 under the leave-one-out weights), comparable with the held-out log
            score (minus the log loss) of a parametric calibrator such as Platt scaling.

        Returns
        -------
        arviz.ELPDData
            With ``elpd_loo``, ``se``, ``p_loo``, the pointwise ``loo_i`` and the Pareto
            shapes ``pareto_k`` per item (above about 0.7, that item's estimate is
            unreliable; ``warning`` is then True). ``p_loo`` is the in-sample log score
            less ``elpd_loo``, both of one predictive: the joint ``log mean_t G_t(c_i,
            y_i)``, or with ``conditional`` the exchangeable ``log sum_t G_t(c_i, y_i) /
            sum_t sum_c G_t(c, y_i)`` (what :meth:`predict_proba` gives at ``y_i``).

        The Pareto smoothing of the importance ratios takes the draws' relative efficiency
        from the chains, as ``arviz.loo`` does by default: the mean effective sample size
        (ArviZ's ``ess``, method ``"mean"``) over the posterior's quantities, divided by
        the number of draws. Quantities constant over the draws (the fixed kernels'
        ``mu`` and ``sigma``, which ``arviz.loo`` counts at full efficiency) are left
        out; with one chain, or draws too few for an effective sample size, it is 1. It
        sets how many of each item's largest ratios the Pareto tail is fitted to
        (``min(S / 5, 3 sqrt(S / reff))`` of ``S`` draws): correlated draws (``reff`` below
        1) hold less information per draw, and fit a longer tail.

        Warns (:class:`LooWarning`) when calibration items lie more than
        :data:`LOO_REACH_WIDTHS` kernel widths from every kernel: the grid spans the
        outputs' 1 % to 99 % quantiles, so a few items lie beyond it (and atoms such as a
        clipped score's exact 0s lie far beyond it on the model scale), and the mixture's
        joint density there is a narrow kernel's Normal tail. Such items add large negative
        terms to the joint estimate (on the clipped scores of the panel, most of it) and
        cancel only between transducers with the same kernels. The conditional estimate is
        not affected.

        For a class-reduced transducer (``reduction_``) the joint is that of the reduced
        problem, ``(rank, margin)``; the conditional is ``log p(c_i | y_i)`` of the classes
        (the rank's probability times the class's fixed share of ``others``).

        Examples
        --------
        ``t.loo()["elpd_loo"]``; ``arviz.compare({"a": t_a.loo(), "b": t_b.loo()})``.
        """
        self.check_fitted()
        if self.reduced_ is not None:
            result = self._reduced_loo(conditional)
            inner = self.reduced_
            model_rows = inner.transform_.intervals(
                self.reduction_.margins(self.calibration_outputs())  # type: ignore[union-attr]
            )
        else:
            result = self._loo(conditional)
            inner = self
            model_rows = self.transform_.intervals(self.posterior_.observed_data["outputs"].values)
        if not conditional and inner.posterior.fixed_kernels:
            far = inner.posterior.nearest_kernel_widths(*model_rows[:2]) > LOO_REACH_WIDTHS
            if far.any():
                _warn_beyond_kernels(far, np.asarray(result["loo_i"]), stacklevel=2)
        return result

    def _loo(self, conditional: bool) -> az.ELPDData:
        """loo() of a transducer of the outputs themselves."""
        y = self.posterior_.observed_data["outputs"].values
        cls = self.posterior_.observed_data["class_index"].values

        def items(sl: slice) -> tuple[np.ndarray, np.ndarray | None]:
            unique, inverse = unique_rows(y[sl])
            log_g = np.concatenate([g for _, g in self._log_joint_chunks(unique)], axis=1)
            log_g = log_g + self.transform_.log_jacobian(unique)[None, :, None]  # (S, rows, C)
            joint = log_g[:, inverse, cls[sl]]  # (S, items)
            total = logsumexp(log_g, axis=2)[:, inverse]  # log sum_c G_t(c, y_i)
            return joint, total if conditional else None

        reff = _relative_efficiency(self.posterior_.posterior)
        return _psis_loo(items, cls.size, self._posterior.n_draws, len(self.classes_), reff)

    def _reduced_loo(self, conditional: bool) -> az.ELPDData:
        """loo() of a class-reduced transducer: per item and draw, the reduced fit's log
        joint of its rank and margin (given its pair, with pair offsets) plus, for rank
        ``others``, the log of its class's share at the draw's temperature."""
        assert self.reduced_ is not None and self.reduction_ is not None
        reduction = self.reduction_
        y_all = self.calibration_outputs()
        cls_all = self.posterior_.observed_data["class_label_index"].values
        weights = None if self.pair_offset_ is None else self._pair_weights()

        def items(sl: slice) -> tuple[np.ndarray, np.ndarray | None]:
            y, cls = y_all[sl], cls_all[sl]
            rank = reduction.reduced_classes(y, cls)
            lower, upper, censored = self.reduced_.transform_.intervals(reduction.margins(y))
            log_g = self.reduced_.posterior.log_joint(lower, upper, censored)  # (S, n, ranks)
            if weights is not None:
                log_g = log_g + np.log(weights[:, reduction.pairs(y)])
            joint = log_g[:, np.arange(cls.size), rank]
            mine = np.flatnonzero(rank == reduction.kept)
            if mine.size:  # the class's share of "others" at each draw's temperature
                order, _ = reduction.others(y[mine])
                place = np.argmax(order == cls[mine, None], axis=1)
                share = reduction.shares(y[mine], self.others_temperature_)
                joint[:, mine] += np.log(share[:, np.arange(mine.size), place])
            total = logsumexp(log_g, axis=2)  # the shares sum to 1 over each rank's classes
            return joint, total if conditional else None

        n_ranks = len(reduction.rank_classes)
        reff = _relative_efficiency(self.posterior_.posterior)
        return _psis_loo(items, cls_all.size, self._posterior.n_draws, n_ranks, reff)

    def sampler_summary(self) -> dict[str, Any]:
        """Divergences, tree-depth saturation, step sizes and timing of the fit, and
        ``cut_gap``: the most the kernel values left out of a sparse likelihood would have
        added to the log-likelihood in any draw (``kernel_tail_cut``; 0 for the dense
        form, None for fits that did not record it)."""
        self.check_fitted()
        return sampler_summary(self.posterior_)

    def _warn_on_invariants(self) -> None:
        # an approximation's Pareto k beyond its limit was said by the backend at fit time
        warn_on_invariants(self.diagnostics(), stacklevel=3, approximation_warned=True)

    # ------------------------------------------------------------------- plots
    def plot(
        self,
        ax: Axes | None = None,
        prob: float = 0.75,
        n_grid: int = 200,
        classes: Iterable[Label] | None = None,
        *,
        prevalences: Any = None,
    ) -> Axes:
        """Transducer curves with variability bands (1-D outputs) or a probability map (2-D).

        For one output column, ``p(c | y)`` against ``y`` for each class in
        ``classes`` (default: all but the first of a binary problem, else all),
        with the ``prob`` band, and the calibration outputs as a rug; the curve goes
        on beyond the calibration outputs (dashed, on a grey ground: the whole [0, 1]
        for outputs in [0, 1], else 15 % of the range, on the log scale for positive
        outputs), where it extrapolates the mixture's tails. For two free
        columns, a map of the probability of the last class. For probability vectors
        and more columns, ``p(c | y)`` with its band at each distinct calibration
        output, against the output column of class ``c`` (the column whose name
        contains the class label, else the column in the class's position): a
        calibration plot, on which the raw output read as a probability is the
        diagonal. A class-reduced transducer (``reduction_``) plots its reduced problem:
        the probability of each rank against the margin of the output's top two scores
        (with pair offsets, for a pair whose offsets are 0: the curve the pairs' offsets
        tilt).
        """
        from .plots import plot_transducer

        if self.reduced_ is not None:  # a class-reduced transducer: p(rank | margin)
            return self.reduced_.plot(ax, prob, n_grid, classes, prevalences=prevalences)
        return plot_transducer(self, ax, prob, n_grid, classes, prevalences)

    # ------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write the fitted transducer to one NetCDF file (no pickle).

        The file holds the draws, sampler statistics, calibration data, labels,
        transform, prior, sampler settings, backend and versions;
        :meth:`load` reproduces every prediction exactly. It is written whole or not
        at all: into a temporary file beside ``path``, then renamed over it.
        """
        from .io import write

        self.check_fitted()
        return write(self.posterior_, path)  # io.file_path checks and names the argument

    @classmethod
    def load(cls, path: str | Path) -> Transducer:
        """Load a transducer written by :meth:`save`.

        The file is read whole and closed (it may be written over afterwards), and
        checked against the layout declared in ``yieldwise.transducer.io``: a missing
        or malformed field raises ``TransducerFileError`` (a ValueError) naming the
        file and the field.
        """
        from .io import load

        settings, fitted = load(path)  # io.file_path checks and names the argument
        reduction = fitted.pop("reduction_", None)
        transducer = cls(**{k: v for k, v in settings.items() if k in cls._PARAMS})
        for name, value in fitted.items():
            setattr(transducer, name, value)
        transducer.reduction_, transducer.reduced_ = None, None
        transducer._cache_draws()
        if reduction is None:
            return transducer
        # the file holds the reduced problem's fit, and the classes' outputs beside it
        outer = cls(**{k: v for k, v in reduction.settings.items() if k in cls._PARAMS})
        outer._adopt_reduced(transducer, reduction.record, reduction.transform,
                             transducer.n_calibration_)  # fmt: skip
        return outer

    # ----------------------------------------------------------------- display
    def _summary_lines(self) -> list[str]:
        if not hasattr(self, "posterior_"):
            return ["not fitted"]
        info = self.sampler_summary()
        reduced = [] if self.reduction_ is None else [
            "reduced: the rank of the true class in the output's order "
            f"{list(self.reduction_.rank_classes)} against the margin of its top two scores"
        ]  # fmt: skip
        return [
            f"classes: {list(self.classes_)}",
            *reduced,
            f"outputs: {list(self.transform_.columns)} -> "
            + str(["margin"] if self.reduction_ else list(self.transform_.model_dim_names))
            + f" (resolution {list(self.transform_.resolution)}"
            + (
                f"; two points on a line, modelled along it as two bins of spacing "
                f"{self.transform_.line_resolution:.6g}"
                if self.transform_.line_resolution is not None
                else "; on a line, modelled along it" if self.transform_.is_projected
                else "; rotated onto their principal axes" if self.transform_.is_rotated
                else ""
            )
            + ")",
            f"calibration items: {self.n_calibration_}",
            f"kernels: {self.n_components_} ({self._design_note()})",
            f"draws: {info['chains']} chains x {info['draws']} ({info['backend']}, "
            f"{info['sampling_seconds']:.1f} s)",
            f"divergent transitions: {info['divergent']}, max tree depth hits: "
            f"{info['max_treedepth_hits']}",
        ] + ([] if info["pareto_k"] is None else [
            f"Laplace approximation: Pareto k {info['pareto_k']:.2f} (above 0.7 its draws "
            "misstate the posterior)"
        ])  # fmt: skip

    def _design_note(self) -> str:
        design = fit_record(self.posterior_)["design"]
        if not design:
            return "given draws"
        if design["kind"] == "grid":
            return "grid " + " x ".join(str(g) for g in design["shape"])
        return "centres placed on the data"

    def __repr__(self) -> str:
        return "Transducer(\n  " + "\n  ".join(self._summary_lines()) + "\n)"

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self._summary_lines())
        return f"<div class='yieldwise-transducer'><b>Transducer</b><ul>{items}</ul></div>"


#: Largest number of (draw, item, class) values :func:`_psis_loo` holds at once: items are
#: taken in blocks of this size over draws x classes (2^24 doubles, 128 MiB), so loo() of
#: 100,000 items x 4,000 draws needs no more memory than one of a few thousand.
LOO_CHUNK_VALUES = 2**24
#: Calibration items farther than this many kernel widths from every kernel
#: (:meth:`TransducerPosterior.nearest_kernel_widths`) make loo() warn: the joint density
#: there is a narrow kernel's Normal tail, at most exp(-8) of a covered item's. Items
#: between the centres of a grid lie within 1 width (1-D) or 1.4 (2-D) of one.
LOO_REACH_WIDTHS = 4.0
#: ... and only when those items carry more than this share of the pointwise estimates'
#: squared deviations (measured 2026-12-06 on the panel's sets at n = 1,000, Laplace
#: fits: logistic, beta, overlapping 0.97-0.99 (11-14 items), the clipped scores' atoms
#: 0.81 (198), non-monotone 0.53 (3); the two logits 0.07 (1); votes none).
LOO_REACH_VARIANCE_SHARE = 0.5


class LooWarning(UserWarning):
    """:meth:`Transducer.loo`'s joint estimate is dominated by calibration items that no
    kernel covers (outputs beyond the grid, or atoms such as exact 0s squeezed onto the
    model scale); the conditional estimate is not affected."""


def _warn_beyond_kernels(far: np.ndarray, loo_i: np.ndarray, stacklevel: int) -> None:
    """The :class:`LooWarning` for the items ``far`` (a mask over loo_i's items), when
    they carry more than half of the pointwise estimates' squared deviations (of which
    the standard error is the root). Continuous outputs always have a few such items (the
    grid spans their 1 % to 99 % quantiles), and they usually do carry it (the panel's
    one-dimensional sets at n = 1,000); where they do not (the two logits), no warning."""
    deviation = (loo_i - loo_i.mean()) ** 2
    share = float(deviation[far].sum() / deviation.sum()) if deviation.sum() > 0 else 0.0
    if share <= LOO_REACH_VARIANCE_SHARE:
        return
    part, total = float(loo_i[far].sum()), float(loo_i.sum())
    warnings.warn(
        f"{int(far.sum())} of {far.size} calibration items ({100 * far.mean():.1f} %) lie more "
        f"than {LOO_REACH_WIDTHS:g} kernel widths from every kernel (outputs beyond the "
        "grid's range, or atoms such as exact 0s or 1s squeezed onto the model scale). "
        "The mixture's joint density there is a narrow kernel's Normal tail, so these items "
        f"contribute {part:.4g} of elpd_loo's {total:.4g} and {100 * share:.0f} % of its "
        "variance: the joint estimate compares only transducers with the same kernels (the same "
        "outputs and design). To compare transducers otherwise, or with a parametric "
        "calibrator, use loo(conditional=True) (log p(class | output), which these items "
        "do not distort)",
        LooWarning,
        stacklevel=stacklevel + 1,
    )


def _draw_quantiles(per_draw: np.ndarray, tails: list[float]) -> np.ndarray:
    """``np.quantile(per_draw, tails, axis=0)`` (linear interpolation) of per-draw class
    probabilities (draws, rows, classes), whose values it may overwrite.

    Two classes share one ordering of the draws: the odds ``k = p1 / p0`` order them
    ascending in ``p1 = 1 / (1 + 1 / k)`` and descending in ``p0 = 1 / (1 + k)``
    (``p0 + p1 = 1`` draw by draw), so one partition of the odds gives both classes' order
    statistics: half the work of partitioning each class, which was most of a binary
    ``predict_interval``'s time. The odds keep the relative precision of a small
    probability in either tail (sorting ``p0`` alone would tie draws at ``p0 = 1.0`` whose
    ``p1`` still differ); the order statistics, mapped back, are within a few units in the
    last place of the probabilities themselves. Other class counts, and rows where the
    odds are undefined (a draw with both probabilities 0, or NaN), go to ``np.quantile``.
    """
    draws, rows, classes = per_draw.shape
    if classes != 2 or draws < 2:
        return np.quantile(per_draw, tails, axis=0, overwrite_input=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        odds = np.divide(per_draw[..., 1], per_draw[..., 0])
    if np.isnan(odds).any():
        return np.quantile(per_draw, tails, axis=0, overwrite_input=True)
    h = (draws - 1) * np.asarray(tails, dtype=float)
    low = np.floor(h).astype(int)
    high = np.minimum(low + 1, draws - 1)
    gamma = h - low
    # numpy's order positions for class 1, and their mirror images for class 0
    positions = np.unique(np.concatenate([low, high, draws - 1 - low, draws - 1 - high]))
    odds.partition(positions, axis=0)
    out = np.empty((len(tails), rows, 2))
    with np.errstate(divide="ignore"):
        for j, g in enumerate(gamma):
            for c, (lo, hi) in (
                (1, (low[j], high[j])),
                (0, (draws - 1 - low[j], draws - 1 - high[j])),
            ):
                k_lo, k_hi = odds[lo], odds[hi]
                a, b = (
                    (1 / (1 + 1 / k_lo), 1 / (1 + 1 / k_hi))
                    if c
                    else (1 / (1 + k_lo), 1 / (1 + k_hi))
                )
                # numpy's linear interpolation (its _lerp)
                out[j, :, c] = b - (b - a) * (1 - g) if g >= 0.5 else a + (b - a) * g
    return out


def _relative_efficiency(posterior: xr.Dataset) -> float:
    """The draws' relative efficiency for PSIS (:meth:`Transducer.loo`), as ``arviz.loo``
    computes it by default: the mean over the posterior's quantities of their effective
    sample sizes (``arviz.ess``, method ``"mean"``) divided by the number of draws; here
    over the quantities that vary between draws only (fixed kernels' ``mu`` and
    ``sigma`` are constants, which ArviZ counts at full efficiency). 1 for one chain (as
    ArviZ), and when no effective sample size can be computed (too few draws)."""
    import arviz as az

    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    if chains < 2:
        return 1.0
    series = []
    for variable in posterior.data_vars.values():
        values = np.asarray(variable.transpose("chain", "draw", ...).values, dtype=float)
        values = values.reshape(chains, draws, -1)
        series.append(values[:, :, np.ptp(values, axis=(0, 1)) > 0])
    stacked = np.concatenate(series, axis=2) if series else np.empty((chains, draws, 0))
    if stacked.shape[2] == 0:
        return 1.0
    quantities = xr.Dataset({"q": (("chain", "draw", "quantity"), stacked)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too few draws: NaN, then 1 below
        ess = az.ess(quantities, method="mean")["q"].values
    reff = float(np.nanmean(ess)) / (chains * draws) if np.isfinite(ess).any() else np.nan
    return reff if np.isfinite(reff) and reff > 0 else 1.0


def _psis_loo(
    items: Callable[[slice], tuple[np.ndarray, np.ndarray | None]],
    n_items: int,
    n_samples: int,
    n_classes: int,
    reff: float = 1.0,
) -> Any:
    """PSIS-LOO from per-draw, per-item log joints, block by block of items.

    ``items(sl)`` gives the items ``sl``'s ``joint`` (S, items) and ``total`` (S, items) or
    None: with ``total``, the log of each item's joint summed over its classes, the
    conditional ``log p(c_i | y_i, data without i)``; the importance ratios always come
    from the joint (Transducer.loo), smoothed with the relative efficiency ``reff``
    (:func:`_relative_efficiency`). Each item's smoothing is its own, so the blocks
    (:data:`LOO_CHUNK_VALUES`) give the same result as one pass.

    ``p_loo`` is ``lppd - elpd_loo`` with ``lppd`` the in-sample log score of the same
    predictive as the leave-one-out one at equal weights: the joint ``log mean_t
    G_t(c_i, y_i)``; the conditional, exchangeable ``log sum_t G_t(c_i, y_i) - log sum_t
    sum_c G_t(c, y_i)`` (theory 3.2; ``elpd_i`` with uniform weights), not the mean of
    the per-draw conditionals, which is another predictive.
    """
    import arviz as az

    block = max(1, LOO_CHUNK_VALUES // max(1, n_samples * n_classes))
    elpd_parts, k_parts, lppd = [], [], 0.0
    for start in range(0, n_items, block):
        joint, total = items(slice(start, min(start + block, n_items)))
        log_weights, pareto_k = az.psislw(-joint.T, reff=reff)  # (items, S), normalised
        lw = log_weights.T  # (S, items)
        elpd_i = logsumexp(lw + joint, axis=0)
        if total is not None:
            elpd_i = elpd_i - logsumexp(lw + total, axis=0)
            lppd_i = logsumexp(joint, axis=0) - logsumexp(total, axis=0)
        else:
            lppd_i = logsumexp(joint, axis=0) - np.log(n_samples)
        lppd += float(lppd_i.sum())
        elpd_parts.append(elpd_i)
        k_parts.append(np.atleast_1d(np.asarray(pareto_k, float)))
    elpd_i = np.concatenate(elpd_parts)
    elpd = float(elpd_i.sum())
    good_k = min(1 - 1 / np.log10(n_samples), 0.7)
    k = np.concatenate(k_parts)
    return az.ELPDData(
        data=[
            elpd, float(np.sqrt(n_items * np.var(elpd_i))), lppd - elpd, n_samples,
            n_items, bool((k > good_k).any()),
            xr.DataArray(elpd_i, dims=["item"], name="loo_i"),
            xr.DataArray(k, dims=["item"], name="pareto_shape"), "log", good_k,
        ],
        index=[
            "elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning", "loo_i",
            "pareto_k", "scale", "good_k",
        ],
    )  # fmt: skip


class _relayed_warnings:
    """Warnings of the reduced transducer's calls, raised again at the user's call of the
    class-reduced one (its public method's caller), not inside this module."""

    def __init__(self, stacklevel: int = 3) -> None:
        # this frame, the public method's, then its caller's (more with helpers between)
        self.stacklevel = stacklevel

    def __enter__(self) -> None:
        self._context = warnings.catch_warnings(record=True)
        self._caught = self._context.__enter__()
        warnings.simplefilter("always")

    def __exit__(self, *exc: object) -> None:
        self._context.__exit__(*exc)
        for caught in self._caught:
            warnings.warn(caught.message, caught.category, stacklevel=self.stacklevel)


def _refuse_prevalences(prevalences: Any) -> None:
    """A class-reduced transducer has no generative mode: any prevalences are an error."""
    if prevalences is not None:
        raise ValueError(
            "prevalences (the generative mode of theory 3.2) need each class's output "
            "law F(y | c), which a class-reduced transducer does not model (it models the "
            "rank of the true class among the output's own ordering; docs/model.md, "
            "'Many classes'); fit with Transducer(class_reduction=None) to use prevalences"
        )


def _warn_on_few_outputs(data: Any) -> None:
    """A :class:`ConstantOutputWarning` when the calibration outputs take one value; a
    :class:`SamplerWarning` before sampling when outputs of two or more model
    dimensions take at most two distinct values: two points lie on a line, one dimension of
    information on a grid whose bilinear density runs to the corners (docs/model.md, "Hard
    labels"). One classifier's outputs are then modelled on that line
    (``encoding.few_points_on_a_line``), so this is left to joint outputs of several
    classifiers, whose coordinates stay each classifier's own (``marginal()`` drops the
    others')."""
    from ..backends import SamplerWarning  # here, as in fit: the backends load on use

    distinct = distinct_outputs(data.y_lower, data.y_upper)
    if distinct == 1:
        warnings.warn(
            f"the calibration outputs take one value over all {int(data.count.sum())} "
            "items: the transducer can learn only the class frequencies, and gives every "
            "output the same p(class | output) (with an ExtrapolationWarning away from that "
            "value). Right for a baseline that always outputs the same value (filter this "
            "warning then); for a classifier's scores check that the right column was "
            "passed and that the classifier did not fail",
            ConstantOutputWarning,
            stacklevel=4,  # _warn_on_few_outputs, _fit, fit, the caller
        )
        return
    if distinct > 2 or data.D < 2:
        return
    warnings.warn(
        f"the {data.D} output columns take only {distinct} distinct value(s) (hard "
        f"labels?): one dimension of information, which a grid over {data.D} dimensions "
        "samples badly (two logits (5, -5) / (-5, 5): 22-31 divergent transitions, 9 at "
        "adapt_delta 0.99). Fit on one column that tells the values apart instead, such as "
        "the difference of the two logits or the predicted class as 0 / 1: that fit is the "
        "binomial model at each value and samples cleanly (one classifier's outputs are "
        "modelled so without asking; joint outputs keep each classifier's coordinates; "
        "docs/model.md, 'Hard labels')",
        SamplerWarning,
        stacklevel=4,
    )


def _check_prob(prob: Any) -> float:
    """``prob`` as a float: one real number (not a bool) strictly between 0 and 1."""
    expected = f"prob must be one number in (0, 1), found {prob!r}"
    if isinstance(prob, bool | np.bool_) or not isinstance(prob, numbers.Real):
        raise TypeError(f"{expected} of type {type(prob).__name__}")
    if not 0 < prob < 1:  # NaN fails too
        raise ValueError(expected)
    return float(prob)


def _check_exchangeable(exchangeable: Any) -> bool:
    """``exchangeable`` as a bool; anything else (a prevalence vector passed where it
    stood second, a string) is a TypeError rather than read as true."""
    if not isinstance(exchangeable, bool | np.bool_):
        raise TypeError(
            f"exchangeable must be True or False, found {exchangeable!r} of type "
            f"{type(exchangeable).__name__}; deployment prevalences go by keyword, "
            "prevalences=..."
        )
    return bool(exchangeable)


def _check_class_columns(columns: tuple[str, ...], labels: tuple[Label, ...]) -> None:
    """ValueError when ``columns`` (names the user gave, one per class) name the classes
    ``labels`` in another order (:func:`~yieldwise.transducer.encoding.columns_naming_classes`):
    an output with one column per class is read by position, column ``j`` as the output for
    ``labels[j]``, so the classes would be paired with the wrong columns."""
    misnamed = misnamed_class_columns(columns, labels)
    if misnamed is None:
        return
    implied, reordered = misnamed
    raise ValueError(
        f"the outputs' columns {list(columns)} are named after the classes in the order "
        f"{implied}, but classes_ would be {list(labels)}, and an output with one column per "
        "class is read by position (column j the output for classes_[j]): each class would "
        "be paired with another class's column. Pass class_labels in the columns' order, "
        f"class_labels={implied!r}, or reorder the columns to the classes' order, "
        f"outputs[{reordered!r}]"
    )


def check_components(n_components: Any) -> int | None:
    """The number of kernels asked for: None for "auto", else a positive int."""
    if isinstance(n_components, str):
        if n_components != "auto":
            raise ValueError(
                f'n_components must be "auto" or a positive int, found {n_components!r}'
            )
        return None
    if isinstance(n_components, Iterable):
        raise ValueError(
            f'n_components must be "auto" or a positive int, found {n_components!r}: the '
            "ladder of component counts is gone with the fixed-kernel model (docs/model.md)"
        )
    return check_positive_int(n_components, "n_components")


def check_likelihood_bins(
    likelihood_bins: Any, dims: int | None = None
) -> tuple[float | None, int, float]:
    """``(bin_fraction, bin_min_rows, bin_max_share)`` for
    :func:`~yieldwise.transducer.stan_data.build_stan_data` from ``likelihood_bins``:
    "auto" bins at ``_design.LIKELIHOOD_BIN_FRACTION`` of the kernels' width (exactly two
    output dimensions, ``dims`` 2: ``LIKELIHOOD_BIN_FRACTION_2D``; docs/model.md, "Coarser
    bins for two dimensions") above ``_design.LIKELIHOOD_BIN_MIN_ROWS`` distinct rows when
    the bins keep at most ``_design.LIKELIHOOD_BIN_MAX_SHARE`` of them; None never bins; a
    number in (0, 1] bins at that fraction whatever the number of rows."""
    expected = (
        f'likelihood_bins must be "auto", None or a fraction of the kernels\' width in (0, 1], '
        f"found {likelihood_bins!r}"
    )
    if isinstance(likelihood_bins, str):
        if likelihood_bins != "auto":
            raise ValueError(expected)
        fraction = (
            _design.LIKELIHOOD_BIN_FRACTION_2D if dims == 2 else _design.LIKELIHOOD_BIN_FRACTION
        )
        return fraction, _design.LIKELIHOOD_BIN_MIN_ROWS, _design.LIKELIHOOD_BIN_MAX_SHARE
    if likelihood_bins is None:
        return None, 0, 1.0
    if (
        isinstance(likelihood_bins, bool)
        or not isinstance(likelihood_bins, int | float)
        or not (0 < float(likelihood_bins) <= 1)
    ):
        raise ValueError(expected)
    return float(likelihood_bins), 0, 1.0


def _merged_rows(
    class_index: np.ndarray, lower: np.ndarray, upper: np.ndarray, censored: np.ndarray
) -> dict[str, Any]:
    """The calibration rows merged as the Stan data has them (kept with a transducer)."""
    from .stan_data import merge_rows

    d = lower.shape[1]
    cls, bounds, count = merge_rows(class_index, np.hstack([lower, upper]))
    return {
        "N": int(cls.size), "cls": cls + 1, "count": count, "y_lower": bounds[:, :d],
        "y_upper": bounds[:, d:], "censored": np.asarray(censored),
    }  # fmt: skip
