"""Where the transducer's kernels sit, how wide they are, and the smoothing prior over them.

The transducer's mixture (docs/theory.md 3.1, ``stan/transducer.stan``) has fixed kernels
and a smooth prior on ``theta[k, c] = a[k] + f_c[k]`` over the kernel locations
(docs/model.md). This module builds that design from the calibration outputs on the model
(transformed) scale:

* one or two output dimensions: an even grid over the outputs' range (a tensor grid in
  2-D), kernel width half the grid spacing; the smoothing prior is an intrinsic
  second-order random walk along each axis (its penalty is the Kronecker sum of the
  axes' second-difference penalties), whose null space (constant, linear and, in 2-D,
  the bilinear term) gets weak Normal priors; on a 1-D grid only its smoothest
  functions are kept (``SMOOTH_MODES_1D``), so the kernels can be finer than the
  functions the sampler moves;
* three or more dimensions (probability vectors of four or more classes, several joint
  classifiers): a grid would need ``G^D`` kernels, so the kernels sit at centres placed on
  the data (a seeded, count-weighted k-means on standardised outputs), one width per
  dimension; the smoothing prior is a squared-exponential Gaussian process over the
  centres with the linear functions taken out (they are the fixed effects), truncated to
  the leading eigenvectors that carry 95 % of its variance (``GP_VARIANCE_SHARE``).

Everything here is deterministic given the data (and, for centres, the seed recorded in
the design), and the design is stored with a fitted transducer: predictions use the same
kernels, and the saved file reproduces them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = ["KernelDesign", "auto_components", "design_kernels", "kernel_matrix"]

#: Kernels along the single axis of a 1-D grid ("auto"), half a spacing wide
#: (``WIDTH_FACTOR``), with the smoothest ``SMOOTH_MODES_1D`` random-walk functions. Until
#: 2026-11-28 the grid had 30 kernels one spacing wide (sd 1/29 of the range): kernels
#: that wide blur a steep class boundary (an item's p(c | y) averages the class shares of
#: the kernels around it), and the smoothing prior then holds the blurred curve against
#: the data. On the votes at n = 300, whose truth climbs from 0.003 to 0.997 over 29 % of
#: the range, the posterior mean was flatter than Platt's maximum-likelihood curve at both
#: ends in each of 4 fits. Measured on the coverage study's sets and seeds (docs/model.md, "Narrower
#: kernels in one dimension"): 60 kernels half a spacing wide (sd 1/118 of the range
#: instead of 1/29), 28 functions kept; votes n = 300, 95 % bands at the decision outputs
#: 88 -> 92 % and 50 % bands 22 -> 31 % (8 fits); over 72 paired 1-D fits, decision
#: outputs +2.8 / +2.6 / +1.1 points at 50 / 75 / 95 % (SE 1.3 / 1.4 / 0.6), every
#: other cell within its noise, median sampling 14.2 -> 16.2 s.
GRID_1D = 60
#: Kernels per axis of a 2-D tensor grid ("auto"): 14 x 14 = 196 kernels.
GRID_2D = 14
#: Centres per output dimension for three or more dimensions ("auto"), at most MAX_CENTRES:
#: 120 centres from three dimensions on. Measured on the shipped digits' three joint fits
#: at fit seeds 1-3 (docs/model_record.md, "Centres for joint fits: 120"): at 10 per
#: dimension (30 or 40 centres) each member's marginal was blurred and moved with the
#: k-means placement (the forest's long-run utility under vignette 3's matrix 0.20-0.36
#: against 0.40 from its own fit; P(forest beats network) 0.008-0.886 on the same data);
#: at 120 the conditional PSIS-LOO elpd was better in 8 of the 9 fits (by 1.3-14.4; worse
#: by 1.1 in one), the forest's marginal 0.33-0.38 and that P 0.88-0.95. 60 centres in
#: three dimensions tied on elpd and moved the P more (0.57-0.76); 240 (one seed each)
#: were worse by 3.9-6.5 in elpd.
CENTRES_PER_DIM = 40
MAX_CENTRES = 120
#: For scattered centres (three or more model dimensions) the number of centres grows
#: with the calibration items ``n`` (the rows' counts summed): ``round(CENTRES_PER_ROOT_N
#: * sqrt(n))``, clipped to [:data:`CENTRES_GROWN_MIN`, :data:`CENTRES_GROWN_MAX`] (0: off,
#: ``min(MAX_CENTRES, CENTRES_PER_DIM * D)`` whatever ``n``). 3.65 gives 120 at the shipped
#: joint sets' 1,079 items (where 120 was measured best of 30-240, above) and 219 at 3,600;
#: below 1,090 items it is the 120 of above. Measured with bench/joint_truth.py
#: (docs/model_record.md, "Joint fits: centres growing with n"): at n = 3,600 on the
#: non-monotone (quadratic) truth a fixed 120 covered 12 / 21 / 38 % at nominal 50 / 75 /
#: 95 % where the right parametric model covers 34 / 58 / 83 % on the same five sets, with
#: the log score 0.006 per item behind the truth's at 1,000 and 3,600 alike (a bias that
#: does not shrink with n); 219 centres cover 39 / 59 / 78 %, the log score better in 5 of
#: 5 (by 0.0044 on average). On the linear truth they cost 0.0006 per item of log score
#: and three to five times the sampling (173-256 s against 48-60 s). Below 1,079 items the
#: rule would give fewer centres: at n = 300, 63 left the bands as they were and 5 of 19
#: fits not clean (divergent transitions), hence the floor at 120. The ceiling is the
#: largest number measured. The square root: a smooth function of D = 3 inputs with two
#: derivatives is estimated best with about n^(3/7) basis functions.
CENTRES_PER_ROOT_N = 3.65
CENTRES_GROWN_MIN = 120
CENTRES_GROWN_MAX = 240
#: Runs of the centres' k-means (:func:`_kmeans`), the one of least weighted inertia kept.
KMEANS_RESTARTS = 1
#: Kernel width as a multiple of the grid spacing on a 1-D grid (the issue's measured
#: sketch: 1, with 30 kernels). Half a spacing is the narrowest at which a sum of equal
#: kernels stays flat between nodes (its ripple is ``2 exp(-2 pi^2 w^2)``: 1.4 % at 0.5,
#: 58 % at 0.25), so a finer grid, not a smaller factor, makes the kernels narrower.
WIDTH_FACTOR = 0.5
#: ... and on a 2-D grid, whose 14 nodes per axis are about twice as far apart (relative
#: to the range) as the 30 a 1-D grid had until 2026-11-28: half the spacing, so that the
#: kernels resolved the outputs about as finely as in one dimension then. Measured with
#: the Laplace backend (bench panel, 2,000 chart matrices, mean over 2-3 calibration sets;
#: docs/model.md, "Kernel width"):
#: on two logits the mean regret at n = 300 / 1,000 / 3,600 falls from 0.0023 / 0.0021 /
#: 0.0013 at width = spacing to 0.0008 / 0.0005 / 0.0001 (Platt: 0.0009 / 0.0006 /
#: 0.0006); on softmax-3 it is unchanged (0.0005). In one dimension (30 nodes then) the
#: same measurement moved only the clipped scores' regret (0.0017 -> 0.0012 at 0.5); the
#: coverage study, not regret, later decided for finer 1-D kernels (GRID_1D).
WIDTH_FACTOR_2D = 0.5
#: ... and for scattered centres (three or more dimensions): each kernel's sd per dimension
#: is this multiple of the typical distance from a centre to its nearest other centre
#: (the median per-dimension gap times sqrt(D)).
CENTRES_WIDTH_FACTOR = 1.0
#: A candidate, off (0; measured 2026-12-07, docs/model_record.md, "Where joint fits'
#: bands miss"): for scattered centres, the share of the class-balanced law (each class's
#: rows weighted by the inverse of its count, as RANGE_CLASS_BALANCED) in the weights of
#: the centres' k-means and of their standardising range; the rest is the rows' counts.
#: At 1 a rare class's outputs get as many centres as a common one's. Measured at 1 on
#: bench/joint_truth.py's quadratic truth (8 repetitions, n = 1,000): bands 23 / 38 / 60 %
#: against 20 / 38 / 63 % at nominal 50 / 75 / 95, the same log score.
CENTRES_CLASS_BALANCED = 0.0
#: A candidate, off (0; measured 2026-12-07, docs/model_record.md, "Where joint fits'
#: bands miss"): for scattered centres, each kernel's width scaled by its centre's own
#: spacing, the distance to its m-th nearest other centre (m = this value) over the
#: median of those distances, clipped to [1/2, 2] (an adaptive kernel estimate's local
#: bandwidth: narrower where the centres crowd, as k-means crowds them where the outputs
#: do). The widths are recorded per kernel, (K, D), as the Stan data already carry them.
#: Measured at 4 (10 repetitions of bench/joint_truth.py, n = 1,000): the quadratic truth's
#: bands 20 / 37 / 64 -> 30 / 50 / 81 %, the linear truth's 48 / 72 / 94 -> 50 / 72 / 90 %
#: with the log score 0.0009 worse; on the shipped joint sets the conditional elpd worse
#: in 7 of 9 fits and 4 of 9 not clean (none at the default).
CENTRES_LOCAL_WIDTH = 0
#: ... and the power of that ratio (1: widths in proportion to the local spacing; an
#: adaptive kernel estimate's square-root law, width ~ density^(-1/2), is (D + 2) / 2
#: here, since k-means spaces centres ~ density^(-1/(D + 2))).
CENTRES_LOCAL_POWER = 1.0
#: Range of the grid: weighted quantiles of the outputs, so that a few far outliers
#: do not spread the kernels thin over the bulk; outputs beyond are still modelled by the
#: outer kernels' Normal tails. Measured with the Laplace backend (mean regret over 2,000
#: chart matrices, 3-4 calibration sets; docs/model.md, "Kernel range and width"), 1 % /
#: 99 % against the earlier 0.2 % / 99.8 %: at n = 300, non-monotone 0.0069 -> 0.0050,
#: clipped 0.0035 -> 0.0024, votes 0.0014 -> 0.0012, logistic 0.0005 -> 0.0005; at n =
#: 1,000, overlapping 0.0033 -> 0.0029, two logits 0.0005 -> 0.0004, the rest within
#: 0.00006 (softmax-3 0.00047 -> 0.00053).
RANGE_QUANTILES = (0.01, 0.99)
#: 1 (adopted 2026-11-29; docs/model.md, "Rare positives"): those quantiles are taken from
#: the class-balanced output law (each class's rows weighted by the inverse of its count),
#: so that the grid covers every class's outputs. At 0.5 % positives every positive lies
#: beyond the overall 99 % quantile, where p(c | y) levels off at the last kernel's value:
#: decision-output bands 32 / 58 / 81 -> 45 / 69 / 91 % at nominal 50 / 75 / 95 (36 paired
#: fits), the vote sets 15 / 44 / 63 -> 85 / 100 / 100 % at 3,600; at the panel's balances
#: the paired changes are within noise (coverage, regret, sampler). 0: count-weighted.
RANGE_CLASS_BALANCED = 1
#: An atom at either end of a continuous output (one value held by at least this share of
#: the items, like the squeezed exact 0s and 1s of scores clipped to [0, 1]) is left out
#: of those quantiles: where it sits on the model scale is a convention of the squeezing
#: (logit(1/(2n)) moves with n), and a grid spanning the empty gap out to it spends its
#: kernels where there are no outputs. The atom is still modelled, by the outer kernels'
#: Normal tails. Measured on the clipped scores (n = 1,000, 17 % exact 0s and 2 % 1s;
#: Laplace backend): mean regret 0.0017 -> 0.0009 (beta calibration 0.0004).
EDGE_ATOM_SHARE = 0.01
#: A candidate, off by default (0; docs/model.md, "The joint density beyond the kernels"):
#: a 1-D grid extended beyond RANGE_QUANTILES at the same spacing, by as many nodes as it
#: takes for every calibration output (atoms at the ends excepted) to lie within one
#: spacing of a node, at most EXTEND_MAX_1D per side; the smooth functions kept grow in
#: proportion (SMOOTH_MODES_1D per GRID_1D nodes), the random walk keeps its step. Beyond
#: the 1 % / 99 % quantiles the mixture's density then follows the outputs instead of the
#: outermost kernel's Normal tail, and p(c | y) follows the data there instead of levelling
#: off at the last kernel's value. 1: on both sides; 2: only on a side without an edge atom
#: (EDGE_ATOM_SHARE), which keeps today's grid (the clipped scores' bands lost with 1);
#: 3 (the default since 2026-12-06): only on an axis of outputs recorded at a finite
#: resolution (every row a censored bin, as vote fractions or ratings), on both sides.
#: 2, 120 paired NUTS fits (2026-12-06): bands beyond the quantiles 43 / 68 / 90 ->
#: 51 / 73 / 95 %, the standard goals unmoved, sampling x 1.10, beta's tails worse: not
#: adopted for continuous outputs. On a lattice a bin beyond the 99 % quantile lies whole
#: spacings of the lattice away, many kernel widths: a 0-6 rating scale (bench/
#: hard_labels.py ratings-7, 2,000 items, its top bin 1 % of them) sampled with 196 and
#: 162 divergent transitions, R-hat 1.08 and 1.48 (fit seeds 1, 2; adapt_delta 0.999 did
#: not cure it); extended, 3 of 3 seeds clean, 10-20 s. The vote sets at 300 / 1,000 /
#: 3,600 (30 fits paired with the coverage study's) gain 0-12 nodes at the top, their
#: bands, decision-output bands and long-run intervals within a fit's noise; the shipped
#: digits' vote sets keep their regret (0.00134, 0.00365).
EXTEND_1D = 3
EXTEND_MAX_1D = 20
#: Prior sd of the fixed-effect coefficients: the intercept of the class log-odds, then
#: the slopes (per unit of the standardised coordinate u in [-1/2, 1/2], so a slope of 40
#: moves the log-odds by 40 over the outputs' range). A nearly separating classifier's
#: log-odds change by 30-60 over its outputs' range (the votes panel problem: about 58),
#: and the earlier sd of 15 shrank such slopes: at n = 300 the votes bands for p(c | y)
#: missed the truth at 11 of 18 checks (2 fits x 9 outputs, 95 %), all on the side of a
#: flatter curve, and at 1 of 18 with sd 40 (0 with 100). Mean regret with 40 against 15
#: (Laplace backend, 3 calibration sets, n = 300): votes 0.0011 -> 0.0008, two logits
#: 0.0010 -> 0.0007, beta 0.0012 -> 0.0012, logistic, non-monotone, overlapping and
#: clipped unchanged (docs/model.md, "The slopes' prior").
INTERCEPT_SCALE = 5.0
SLOPE_SCALE = 40.0
#: ... and for scattered centres (three or more dimensions), 40 too since 2026-12-08
#: (docs/model_record.md, "Joint fits: centres growing with n"; 15 before). The centres'
#: kernels are about as wide as a class's own spread, so the class log-odds' slope over the
#: centres must be steeper than the outputs' own by about 1 / (1 - w^2) for kernels of sd
#: w (for Normal classes, exactly: a Normal law of sd 1 is a mixture of kernels of sd w
#: whose weights are Normal of sd sqrt(1 - w^2)): 8-21 per unit of u on bench/
#: joint_truth.py's linear truth, where 15 shrank them. Measured at 40 against 15, paired:
#: the held-out log score better in 19 of 20, 20 of 20, 8 of 10 and 10 of 10 fits (linear
#: and quadratic truths, n = 300 and 1,000; by 0.0001-0.0005 per item), the bands 0-3
#: points nearer nominal, sampling faster; the shipped joint sets' conditional elpd
#: better in 9 of 9 fits (by 0.2-0.8), sampling faster in 8; one fit of 76 with a
#: divergent transition (none at 15), one shipped fit at 15 missed R-hat (1.014) that did
#: not at 40. Not measured on ten classes without the reduction, where the data leave the
#: flattest fixed-effect directions to this prior (docs/model.md, "Centres for three or
#: more dimensions") and NUTS already took 255 leapfrog steps per iteration at 15.
CENTRES_SLOPE_SCALE = 40.0
#: Half-Normal scale of the outputs' log-density's smoothing sd.
TAU_DENSITY_SCALE = 20.0
#: Half-Student-t scale of the class log-odds' smoothing sd (the random walk's tau: the
#: size of the non-linear part of the log-odds over the outputs' range, in log units).
TAU_CLASS_SCALE = 5.0
#: ... and its degrees of freedom. A half-Normal(5) acted as a truncation: on the panel's
#: non-monotone problem (n = 1,000) the posterior median of tau_f sat at 16-18, 3.3 prior
#: sd's out, and the 95 % bands missed the valley's truth at 2-4 of 8 outputs; with 3
#: degrees of freedom the median is 30-38 and they miss at 0-2, while problems whose data
#: want a smooth curve keep tau_f's posterior (votes: median 4). Paired over 132 1-D fits
#: of the coverage study (same sets and seeds): 95 % bands 87 -> 94 %, divergent
#: transitions 34 -> 9, fits not clean 5 -> 6 (docs/model.md, "The log-odds' smoothness
#: prior"). For one output dimension only:
TAU_CLASS_DF = 3.0
#: ... for two or more (a 2-D grid, scattered centres) the half-Normal stays (None). On two
#: logits (n = 1,000, coverage repetition 0) the half-t's tail cost 10 divergent transitions,
#: every one at tau_f above its posterior's 94th percentile (14.8-38.8), and 36.9 leapfrog
#: steps per iteration; the half-Normal fit of the same set has 0 and 31.0, and its 31
#: two-logit and softmax-3 fits in the coverage study had none. There the data leave tau_f
#: to the prior (posterior 5-95 %: 0.3-9.2, the half-Normal's own 0.3-9.8), so its tail buys
#: nothing; a tensor grid has kernels far from every item, whose log-odds a large tau_f lets
#: run off.
TAU_CLASS_DF_MULTI: float | None = None
#: A soft floor under tau_f (prior key ``tau_f_floor``; 0 is no floor): the half-t or
#: half-Normal density is multiplied by ``1 - exp(-(tau_f / floor)^2)``, which is about
#: ``(tau_f / floor)^2`` below the floor, so the posterior leaves the funnel's neck at
#: ``tau_f -> 0`` (docs/model.md, "Where the whitened sampler still diverges") while a
#: straight line stays reachable: at ``tau_f = 1`` the prior sd of the non-linear part at
#: a 1-D kernel is 0.02-0.09 log units. Measured at 1, paired with no floor on the
#: coverage study's sets and seeds (104 1-D fits, docs/model.md, "A soft floor under
#: tau_f"): fits not clean 13 -> 4 (beta n = 3,600: 8 of 20 -> 1), bands and long-run
#: intervals unchanged, decision-quality panel unchanged; the study's 1-D cells rerun with
#: it (360 fits): not clean 19 -> 5, coverage unchanged. For one output dimension:
TAU_CLASS_FLOOR = 1.0
#: ... for two or more, none (0): every 2-D fit of the coverage study (62) and of the
#: decision-quality panel was clean without it, and the 2-D posterior of tau_f reaches
#: down to 0.3 (5 %), where the floor would be a change of prior, not of geometry.
TAU_CLASS_FLOOR_MULTI = 0.0
#: ... and for scattered centres (three or more dimensions: joint fits), 0.3. The
#: centres' Gaussian process has unit variance, so tau_f is the prior sd of the log-odds'
#: non-linear part at a centre, in log units; below 0.3 the log-odds are linear in the
#: outputs to within a few tenths. Without a floor the data of the shipped joint sets
#: left tau_f spread over 0.07-5.7 (5-95 %), and the whitened sampler crossed that range
#: slowly: tau_f's R-hat 1.01-1.11 and bulk ESS 32-326 in all nine fits (three sets x
#: seeds 1-3, 120 centres), four of them not clean on the transducer's values. With the
#: floor at 0.3 all nine are clean (R-hat <= 1.006, bulk ESS >= 567, 0 divergent
#: transitions), faster in seven, with the conditional elpd 0.02-0.15 better and every
#: member's long-run utility within 0.003; tau_f's own R-hat 1.006-1.021, ESS 152-603.
#: A floor of 0.15 left two fits not clean; the 1-D floor of 1 had brought divergent
#: transitions at 30-40 centres. On a synthetic joint set with linear true log-odds the
#: posterior of tau_f stays above the floor (0.3-3.5 without it) and the fits are the same;
#: ten classes without the reduction (D = 9) are not clean with or without it (14 and 8
#: divergent transitions, one fit each; docs/model_record.md, "A soft floor under tau_f
#: for joint fits").
TAU_CLASS_FLOOR_CENTRES = 0.3
#: The density block's meaning (Stan data ``density_marginal``). 0: ``theta[k, c] = a[k] +
#: f_c[k]`` with ``f_1 = 0``, so ``a`` is the first class's log weight, pinned only through
#: ``a + f_c`` where the first class is rare: a ridge whose length grows with tau_f
#: (docs/model.md, "The density block"). 1: ``theta[k, c] = a[k] + log softmax(0, f[k])_c``,
#: so ``a`` is the log-density of all outputs. The class probabilities' prior is the same
#: in both; the smoothness prior of ``a`` acts on a different function. Measured, not the
#: default (docs/model.md: in one dimension, on ten classes and, on 2026-11-26, on 2-D grids).
MARGINAL_DENSITY = 0
#: ``class_reduction="auto"`` reduces probability vectors of at least this many classes to
#: ranks and margins (yieldwise/transducer/reduction.py): three classes keep their 2-D grid;
#: ten classes on 90 centres in nine dimensions trailed the raw softmax and took 263 s a fit
#: (docs/model.md, "Many classes: ranks and margins").
RANKS_MIN_CLASSES = 4
#: Ranks a class reduction models one by one before ``others`` (2: first and second, 1:
#: first only, the rest shared by the tempered softmax; reduction.py).
RANKS_KEPT = 2
#: The reduction's margin: "second" (the top two scores' gap) or "rest" (the top class's
#: log-odds against the others together).
RANKS_MARGIN = "second"
#: Half-Normal scale of the sds of a class reduction's pair offsets (both levels: the top
#: class and the pair of top classes), in log-odds units (stan/transducer.stan, "Group
#: offsets"): offsets of a few tenths to about 2 are expected.
GROUP_OFFSET_SCALE = 1.0
#: A class reduction models pair offsets (which classes are first and second; stan/
#: transducer.stan, "Group offsets") when the classes make at most this many ordered pairs
#: (C (C - 1): 90 for ten classes); 0 turns them off. Measured 2026-11-27 (docs/model.md,
#: "Pair offsets"): on softmax-10 the bands at 75 % cover 60 % (n = 1,000) and 53 % (3,600)
#: instead of 10 % and 5 %, the long-run intervals 75 % instead of 62 %; the ten-class
#: digits' regret is unchanged (0.00156 against 0.00155); a 2,000-item ten-class fit
#: samples in 52 s instead of 13 s (87 leapfrog steps per iteration against 34; 61.5 since
#: the offsets' conditional whitening, 30.8 at adapt_delta 0.95). Beyond 600 pairs (25
#: classes) the offsets' dimension would grow past the preconditioning's dense matrix; not
#: measured.
RANKS_MAX_PAIRS = 600
#: The Gaussian-process prior of scattered centres keeps eigenvectors down to this share
#: of the largest eigenvalue.
GP_EIGEN_CUTOFF = 1e-6
#: ... and of those only the leading eigenvectors that together carry this share of its
#: variance (the trace of the covariance; None: no such limit). Measured on the 10-class
#: digits (D = 9, 90 centres, 539 calibration items; docs/model.md, "Centres for three or
#: more dimensions"): the 1e-6 cutoff keeps 80 functions, 0.95 keeps 39 and 0.9 keeps 29;
#: held-out accuracy and log score are the same for 0.9 and 0.95 (0.943 / -0.224), NUTS
#: takes the same 255 leapfrog steps per iteration at all three, and the parameters drop
#: from 909 to 499, so each step costs less. The dropped functions are the wiggliest:
#: variation the centres are too sparse to resolve.
GP_VARIANCE_SHARE: float | None = 0.95
#: Lengthscale of that Gaussian process, as a multiple of the median distance from a
#: centre to its nearest other centre (standardised scale).
GP_LENGTHSCALE_FACTOR = 2.0
#: A first-order random walk's share in the 1-D smoothing prior (0: none, the shipped
#: second-order walk alone). With share ``s`` the smooth functions' covariance is
#: ``Q2^+ + s Q1^+`` (both with the linear functions projected out, so the null space and
#: Platt's smooth limit are unchanged): one ``tau`` still scales both, but a single kernel
#: may then bend locally by about ``0.3 sqrt(s) tau`` log units instead of the second-order
#: walk's 0.02-0.09 ``tau`` ("Votes at n = 300" in docs/model.md). Measured at 0.3 and 1 on 72
#: paired 1-D fits: bands' mean gap to nominal 10.5 -> 9.0 / 9.1 points, fits not clean 4 ->
#: 12 / 21, votes n = 300 unmoved (docs/model.md, "A first-order walk beside the
#: second-order one"). Not adopted.
RW1_SHARE = 0.0
#: At most this many of a 1-D grid's penalised functions are kept, the smoothest first
#: (None: all ``G - 2``): the 28 a 30-node walk has. The random walk's prior variance of
#: its j-th function falls like ``j**-4``; on the 60-node grid the 28 smoothest carry
#: 99.99 % of it, and the 29th has 0.3 % of the first's sd. So the grid (the kernels'
#: resolution) doubled without doubling the parameters the sampler moves: on 8 vote fits
#: at n = 300 the coverage with all 58 functions and with 28 is the same (95 % bands at
#: the decision outputs 90 and 92 %), at a median 10.8 against 7.0 s of sampling, and on
#: votes at n = 3,600 all 58 took 79-159 leapfrog steps per iteration against 31-68.
#: Measured 2026-11-28 (session 27) and not kept: 20 functions. On the coverage study's
#: 1-D sets (121 paired fits) the coverage and regret were the same and the votes at 3,600
#: took 47 instead of 61 steps, but the six-class `ties` case of bench/hard_labels.py (its
#: margin's grid) failed at every fit seed tried: 199 / 0 / 0 divergent transitions, R-hat
#: 1.24 / 1.023 / 1.017, against 0 and <= 1.007 with 28 (docs/model.md, "Twenty functions").
SMOOTH_MODES_1D: int | None = 28
#: On a 2-D grid, whether the squares u1^2 and u2^2 join the functions the smoothing prior
#: leaves free (1, u1, u2, u1 u2: the null space of the Kronecker sum of second-difference
#: penalties), so that the smooth limit of the class log-odds is a quadratic (the exact
#: log-odds of normal classes with unequal covariances, the two logits of the panel) and
#: that of the log-density a Gaussian. A candidate, measured in docs/model.md ("Quadratic
#: log-odds in two dimensions"); 0 keeps the bilinear null space.
QUADRATIC_NULL_2D = 0
#: ... and the prior sd of the squares' coefficients there (per unit of ``4 u^2``, which
#: spans [0, 1] over the grid); the slopes' scale unless a candidate sets it.
SQUARE_SCALE = SLOPE_SCALE

#: A candidate, measured 2026-11-28 and off (docs/model.md, "A ridge on the log-odds'
#: levels"): a Normal(0, LEVEL_SCALE) factor on the class log-odds at every kernel, which
#: bounds how far the smooth log-odds can dive where one class is absent (the 0-vote bin)
#: whatever tau_f; 0: none.
LEVEL_SCALE = 0.0

#: A candidate, off (0; docs/model.md, "Local smoothing scales"): for one output dimension,
#: LOCAL_BLOCKS blocks per class column along the grid, each the random walk's
#: LOCAL_FUNCTIONS smoothest functions under a Gaussian bump, with a smoothing sd of its
#: own, tau_l ~ N+(0, LOCAL_SCALE) (its prior sd at the bump's peak), so that the class
#: log-odds' smoothness may vary along the grid (stan/transducer.stan, "Local smoothing
#: scales"). Measured outside the model with bench/kink_probe.py (7 x 8, scale 5): the
#: smoothing bias at the extremes falls, bands and decision outputs cover better at n =
#: 300 and 1,000, long-run intervals widen at 1,000; 0: none.
LOCAL_SCALE = 0.0
LOCAL_BLOCKS = 7
LOCAL_FUNCTIONS = 8
#: ... and the degrees of freedom of a half-Student-t for those sds instead (0: the
#: half-Normal); a candidate: small scale, heavy tail, so that a block opens only where the
#: data ask for it (docs/model.md, "Local smoothing scales").
LOCAL_DF = 0.0

#: A candidate, off (0; docs/model.md, "A prior centred on the classifier's own
#: probabilities"): a class reduction's rank log-odds given the classifier's own
#: log-odds (of the second and the lower ranks against the first, under its squeezed
#: probabilities, averaged onto the kernels) as their prior mean, so that with little
#: data the transducer stays near the raw probabilities instead of near a straight line
#: fitted with weak priors. Its fixed part (the deviation's intercept, then its slope per
#: unit of the standardised margin) gets Student-t priors with these sds and degrees of
#: freedom: tight near 0, heavy-tailed so that a network 3.5 times under-confident (the
#: panel's softmax-10: a slope deviation of about 2.5 per unit of margin) is reachable.
RANKS_CENTRED = 0
CENTRED_INTERCEPT_SCALE = 1.0
CENTRED_SLOPE_SCALE = 5.0
CENTRED_ODDS_DF = 3.0

#: Large calibration sets (docs/model.md, "Large calibration sets"): with more distinct
#: rows than LIKELIHOOD_BIN_MIN_ROWS, ``Transducer(likelihood_bins="auto")`` merges the
#: rows' uncensored coordinates in bins LIKELIHOOD_BIN_FRACTION of the kernels' width wide,
#: each at its items' mean (``stan_data.bin_rows``), and the fit checks the binned
#: posterior against the exact likelihood (``diagnostics.binning_record``). 2,000: the
#: coverage study's continuous 1-D cells at 3,600 items (2,900-3,600 rows, binned to
#: 1,400-2,300) keep their coverage fit by fit and sample in half the time; below it
#: (n = 1,000) binning would save a quarter at most (measured 2026-11-28, docs/model.md).
LIKELIHOOD_BIN_FRACTION = 1 / 16
#: The same for two output dimensions (docs/model.md, "Coarser bins for two dimensions"):
#: 1/4 kept the 2-D study's 3,600-item cells' coverage (40 paired fits, every one clean)
#: and the panel's regret, and with httpstan's chains read in turn it samples the
#: 3,600 two logits in 27-28 s instead of 36-37 s (2026-12-04). Three or more dimensions
#: keep LIKELIHOOD_BIN_FRACTION (not measured).
LIKELIHOOD_BIN_FRACTION_2D = 1 / 4
LIKELIHOOD_BIN_MIN_ROWS = 2000
#: ... and only when the bins keep at most this share of the rows: otherwise (two
#: dimensions at a few thousand items keep 97-99 % at 1/16, hence their own fraction)
#: the exact rows cost as little.
LIKELIHOOD_BIN_MAX_SHARE = 0.75


@dataclass(frozen=True)
class KernelDesign:
    """The fixed kernels of a transducer and the smoothing prior over them.

    Attributes
    ----------
    kind : "grid" or "centres"
    loc : (K, D) kernel centres on the model scale
    width : (D,) kernel sd per dimension
    shape : nodes per axis for a grid, () for centres
    fixed_basis : (K, P) functions the smoothing leaves free; column 0 is the constant
    fixed_scale : (P,) prior sd of their coefficients
    smooth_basis : (K, R) penalised functions, scaled so that coefficients are N(0, 1)
    tau_a_scale : half-Normal scale of the log-density's smoothing sd
    tau_f_scale : half-Student-t scale of the class log-odds' smoothing sd
    tau_f_df : its degrees of freedom; None for a half-Normal scale
    tau_f_floor : the soft floor under tau_f (0: none; ``TAU_CLASS_FLOOR`` in 1-D)
    tau_l_scale : half-Normal scale of the local smoothing sds (0: no local blocks, the
        default; ``LOCAL_SCALE``; one output dimension only)
    density_marginal : 1 when the density block is all outputs' log-density, 0 when it is
        the first class's log weight (``MARGINAL_DENSITY``)
    gp_lengthscale : the centres' Gaussian-process lengthscale (standardised scale), None
        for a grid
    gp_variance_share : the share of that process's variance its kept functions carry (at
        least ``GP_VARIANCE_SHARE``), None for a grid
    """

    kind: str
    loc: np.ndarray
    width: np.ndarray
    shape: tuple[int, ...]
    fixed_basis: np.ndarray
    fixed_scale: np.ndarray
    smooth_basis: np.ndarray
    tau_a_scale: float = TAU_DENSITY_SCALE
    tau_f_scale: float = TAU_CLASS_SCALE
    tau_f_df: float | None = TAU_CLASS_DF
    tau_f_floor: float = TAU_CLASS_FLOOR
    tau_l_scale: float = 0.0
    density_marginal: int = 0
    gp_lengthscale: float | None = None
    gp_variance_share: float | None = None

    @property
    def n_components(self) -> int:
        return int(self.loc.shape[0])

    def record(self) -> dict[str, object]:
        """What a saved transducer keeps to describe the design (JSON-able)."""
        record: dict[str, object] = {
            "kind": self.kind,
            "shape": list(self.shape),
            "width": self.width.tolist(),
            "n_components": self.n_components,
            "tau_a_scale": self.tau_a_scale,
            "tau_f_scale": self.tau_f_scale,
            "tau_f_df": self.tau_f_df,
            "tau_f_floor": self.tau_f_floor,
            "tau_l_scale": self.tau_l_scale,
            "density_marginal": self.density_marginal,
            # the penalised functions kept (a 1-D grid keeps SMOOTH_MODES_1D of G - 2)
            "n_smooth": int(self.smooth_basis.shape[1]),
            # the functions the smoothing leaves free: 2 on a 1-D grid (1, u), 6 on a 2-D
            # grid with QUADRATIC_NULL_2D (1, u1, u2, u1 u2, u1^2, u2^2), else 4
            "n_fixed": int(self.fixed_basis.shape[1]),
        }
        if self.kind == "centres":
            record.update(
                gp_lengthscale=self.gp_lengthscale,
                gp_variance_share=self.gp_variance_share,
            )
        return record


def auto_components(n_dims: int, n_items: float | None = None) -> int:
    """Number of kernels ``"auto"`` gives for ``n_dims`` model dimensions and ``n_items``
    calibration items (used only by scattered centres under :data:`CENTRES_PER_ROOT_N`;
    None: that rule is not applied)."""
    if n_dims == 1:
        return GRID_1D
    if n_dims == 2:
        return GRID_2D**2
    if CENTRES_PER_ROOT_N > 0 and n_items is not None:
        grown = round(float(CENTRES_PER_ROOT_N) * np.sqrt(float(n_items)))
        return int(np.clip(grown, max(CENTRES_GROWN_MIN, n_dims + 2), CENTRES_GROWN_MAX))
    return min(MAX_CENTRES, CENTRES_PER_DIM * n_dims)


def representative(lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """A point per row and dimension: the value, a bin's midpoint, or its finite edge."""
    with np.errstate(invalid="ignore"):
        return np.where(
            np.isfinite(lower) & np.isfinite(upper),
            0.5 * (lower + upper),
            np.where(np.isfinite(lower), lower, upper),
        )


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    i = min(int(np.searchsorted(cum, q * cum[-1], side="left")), values.size - 1)
    return float(values[order][i])


def _axis_range(
    rep: np.ndarray,
    weights: np.ndarray,
    point: np.ndarray | None = None,
    quantile_weights: np.ndarray | None = None,
) -> tuple[float, float]:
    """Weighted RANGE_QUANTILES of one axis's representative values.

    ``point`` marks the rows that are exact values (not censored bins); among those, an
    atom at either end holding at least EDGE_ATOM_SHARE of the weight is left out, as
    long as more than two distinct values remain. ``quantile_weights`` (default
    ``weights``) weigh the quantiles only (RANGE_CLASS_BALANCED: the class-balanced law);
    atoms are counted by ``weights``.
    """
    qw = weights if quantile_weights is None else quantile_weights
    keep = _spanned(rep, weights, point)
    if not keep.any():
        return -1.0, 1.0
    low = _weighted_quantile(rep[keep], qw[keep], RANGE_QUANTILES[0])
    high = _weighted_quantile(rep[keep], qw[keep], RANGE_QUANTILES[1])
    if high <= low:  # a single value: a unit-wide range around it
        low, high = low - 0.5, high + 0.5
    return low, high


def _spanned(rep: np.ndarray, weights: np.ndarray, point: np.ndarray | None) -> np.ndarray:
    """The rows whose values a grid spans (:func:`_axis_range`): the finite ones, an atom
    at either end of the exact values (``point``) left out."""
    return _edge_atoms(rep, weights, point)[0]


def _edge_atoms(
    rep: np.ndarray, weights: np.ndarray, point: np.ndarray | None
) -> tuple[np.ndarray, bool, bool]:
    """:func:`_spanned`'s rows, and whether an atom was left out below and above."""
    keep = np.isfinite(rep)
    left_out = [False, False]
    if not keep.any():
        return keep, False, False
    if point is not None:
        total = weights[keep].sum()
        for side, edge in enumerate((np.min, np.max)):
            exact = keep & point
            if not exact.any():
                break
            atom = exact & (rep == edge(rep[exact]))
            rest = keep & ~atom
            # a continuous part to span: more than two distinct values left (only atoms,
            # e.g. one-hot vectors' three, would leave a range 0.04 wide between two of
            # them; docs/model.md, "Hard labels")
            spread = np.unique(rep[rest]).size > 2
            if spread and weights[atom].sum() >= EDGE_ATOM_SHARE * total:
                keep, left_out[side] = rest, True
    return keep, left_out[0], left_out[1]


def _extension(
    rep: np.ndarray, weights: np.ndarray, point: np.ndarray | None, low: float, high: float,
    nodes: int,
) -> tuple[int, int]:  # fmt: skip
    """Nodes to add below and above a 1-D grid of ``nodes`` over ``[low, high]``
    (EXTEND_1D): enough for every spanned output to lie within one spacing of a node, at
    most EXTEND_MAX_1D per side; (0, 0) when EXTEND_1D is off."""
    if not EXTEND_1D:
        return 0, 0
    keep, atom_below, atom_above = _edge_atoms(rep, weights, point)
    if not keep.any():
        return 0, 0
    step = (high - low) / (nodes - 1)
    below = int(np.ceil((low - rep[keep].min()) / step - 1.0))
    above = int(np.ceil((rep[keep].max() - high) / step - 1.0))
    if EXTEND_1D == 2:  # not towards an edge atom: that side keeps today's grid
        below, above = (0 if atom_below else below), (0 if atom_above else above)
    if EXTEND_1D == 3 and (point is None or point[keep].any()):
        return 0, 0  # lattice axes only: every spanned row a censored bin
    return (min(EXTEND_MAX_1D, max(0, below)), min(EXTEND_MAX_1D, max(0, above)))


def _rw2_axis(nodes: int, delta: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of one axis's second-order random-walk penalty, u in [-1/2, 1/2].

    The penalty ``D2' D2 / delta^3`` (delta the node spacing in u) is the discretised
    integrated Wiener process: with coefficients N(0, tau^2 Q^+), ``tau`` is the size of
    the function's non-linear part over the whole range, whatever the number of nodes.
    Returns eigenvalues (ascending; the first two are the null space, set to exactly 0)
    and eigenvectors (columns).
    """
    delta = 1.0 / (nodes - 1) if delta is None else delta  # given: an extended grid's
    d2 = np.diff(np.eye(nodes), n=2, axis=0)
    values, vectors = np.linalg.eigh(d2.T @ d2 / delta**3)
    values[:2] = 0.0
    return values, vectors


def _grid_design(
    ranges: list[tuple[float, float]], nodes: int, tau_a_scale: float, tau_f_scale: float,
    extend: tuple[int, int] = (0, 0),
) -> KernelDesign:  # fmt: skip
    """A tensor grid of ``nodes`` per axis over ``ranges``; in one dimension ``extend``
    adds nodes below and above at the same spacing (EXTEND_1D), the standardised
    coordinate ``u`` running past [-1/2, 1/2] at the same step."""
    factor = WIDTH_FACTOR if len(ranges) == 1 else WIDTH_FACTOR_2D
    width = np.array([(hi - lo) / (nodes - 1) * factor for lo, hi in ranges])
    steps = np.arange(-extend[0], nodes + extend[1])
    axes = [lo + (hi - lo) / (nodes - 1) * steps for lo, hi in ranges]
    u_axis = -0.5 + steps / (nodes - 1)
    base = nodes
    nodes = steps.size
    eig = _rw2_axis(nodes, 1.0 / (base - 1))
    if len(ranges) == 1:
        loc = axes[0][:, None]
        values, vectors = eig
        null = np.column_stack([np.ones(nodes), u_axis])
    else:
        loc = np.stack(np.meshgrid(axes[0], axes[1], indexing="ij"), axis=-1).reshape(-1, 2)
        u1, u2 = (g.ravel() for g in np.meshgrid(u_axis, u_axis, indexing="ij"))
        values = np.add.outer(eig[0], eig[0]).ravel()  # Kronecker sum, index i * G + j
        vectors = np.kron(eig[1], eig[1])
        null = np.column_stack([np.ones(nodes * nodes), u1, u2, 4.0 * u1 * u2])
    penalised = values > 0
    smooth = vectors[:, penalised] / np.sqrt(values[penalised])
    if len(ranges) == 2 and QUADRATIC_NULL_2D:
        squares = 4.0 * np.column_stack([u1**2, u2**2])  # in [0, 1] over the grid
        null = np.column_stack([null, squares - squares.mean(axis=0)])
        smooth = _without(smooth, null)
    if len(ranges) == 1 and RW1_SHARE > 0:
        smooth = _with_first_order_walk(smooth, null, RW1_SHARE)
    if len(ranges) == 1 and SMOOTH_MODES_1D is not None:
        # the columns are orthogonal, so each one's prior variance is its squared norm;
        # keep the SMOOTH_MODES_1D largest (the random walk's smoothest functions), as
        # many more per node on an extended grid
        kept = round(SMOOTH_MODES_1D * nodes / base)
        smooth = smooth[:, _leading(np.sum(smooth**2, axis=0), 0.0, None, kept)]
    scale = np.full(null.shape[1], SLOPE_SCALE)
    scale[0] = INTERCEPT_SCALE
    if len(ranges) == 2 and QUADRATIC_NULL_2D:
        scale[-2:] = SQUARE_SCALE
    return KernelDesign(
        kind="grid", loc=loc, width=width, shape=(nodes,) * len(ranges), fixed_basis=null,
        fixed_scale=scale, smooth_basis=smooth, tau_a_scale=tau_a_scale, tau_f_scale=tau_f_scale,
    )  # fmt: skip


def _projector_off(null: np.ndarray) -> np.ndarray:
    """``P``, the orthogonal projection onto the complement of the columns of ``null``."""
    basis, _ = np.linalg.qr(null)
    return np.eye(null.shape[0]) - basis @ basis.T


def _basis_of(cov: np.ndarray) -> np.ndarray:
    """A basis ``B`` with ``B B' = cov`` (a covariance over the kernels), its eigenvectors
    scaled by the square roots of their eigenvalues, the null directions dropped; the
    columns ordered by variance, the largest first (as ``_leading`` and the random walk's
    own basis order them)."""
    values, vectors = np.linalg.eigh(cov)
    keep = _leading(values, 1e-10, None)
    return vectors[:, keep] * np.sqrt(values[keep])


def _without(smooth: np.ndarray, null: np.ndarray) -> np.ndarray:
    """A basis whose covariance is ``P smooth smooth' P``, ``P`` the projection onto the
    complement of the columns of ``null``: the smooth part without the functions that
    became fixed effects (their coefficients get the fixed effects' weak Normal prior)."""
    perp = _projector_off(null)
    return _basis_of(perp @ smooth @ smooth.T @ perp)


def _with_first_order_walk(smooth: np.ndarray, null: np.ndarray, share: float) -> np.ndarray:
    """A basis whose covariance is ``smooth smooth' + share * P Q1^+ P`` (``RW1_SHARE``).

    ``Q1 = D1' D1 / delta`` is the first-order walk's penalty on the unit range (a Wiener
    process: increments of variance ``delta``), and ``P`` projects out the functions in
    ``null``, so the first-order part is a Wiener path with its linear fit removed and the
    linear functions stay free (as in the second-order part, where ``Q2^+`` already has
    them as its null space).
    """
    nodes = smooth.shape[0]
    delta = 1.0 / (nodes - 1)
    d1 = np.diff(np.eye(nodes), axis=0)
    perp = _projector_off(null)
    rw1 = perp @ np.linalg.pinv(d1.T @ d1 / delta, hermitian=True) @ perp
    return _basis_of(smooth @ smooth.T + share * rw1)


def _kmeans(points: np.ndarray, weights: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Count-weighted k-means (k-means++ start, Lloyd iterations), vectorised: of
    :data:`KMEANS_RESTARTS` runs (the first from ``seed``'s generator, run ``r`` from
    ``[seed, r]``'s), the centres of least weighted inertia."""
    best, least = None, np.inf
    for run in range(max(1, int(KMEANS_RESTARTS))):
        rng = np.random.default_rng(seed if run == 0 else [seed, run])
        centres = _lloyd(points, weights, _kmeans_plus_plus(points, weights, k, rng))
        distances = ((points[:, None, :] - centres[None]) ** 2).sum(axis=2)
        inertia = float(weights @ distances.min(axis=1))
        if inertia < least:
            best, least = centres, inertia
    assert best is not None
    return best


def _kmeans_plus_plus(
    points: np.ndarray, weights: np.ndarray, k: int, rng: np.random.Generator
) -> np.ndarray:
    """k-means++ starting centres, each drawn with probability weight x squared distance."""
    p = weights / weights.sum()
    centres = [points[rng.choice(points.shape[0], p=p)]]
    d2 = ((points - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        prob = weights * d2
        if prob.sum() <= 0:
            break
        centres.append(points[rng.choice(points.shape[0], p=prob / prob.sum())])
        d2 = np.minimum(d2, ((points - centres[-1]) ** 2).sum(axis=1))
    return np.array(centres)


def _lloyd(points: np.ndarray, weights: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Lloyd's iterations from the centres ``c`` (at most 100), duplicates merged."""
    for _ in range(100):
        dist = ((points[:, None, :] - c[None]) ** 2).sum(axis=2)
        nearest = dist.argmin(axis=1)
        mass = np.bincount(nearest, weights=weights, minlength=c.shape[0])
        moved = np.stack(
            [np.bincount(nearest, weights=weights * points[:, j], minlength=c.shape[0])
             for j in range(points.shape[1])], axis=1,
        )  # fmt: skip
        new = np.where(mass[:, None] > 0, moved / np.maximum(mass, 1e-300)[:, None], c)
        if np.allclose(new, c, rtol=0, atol=1e-9):
            break
        c = new
    return np.unique(c, axis=0)


def _leading(
    values: np.ndarray, cutoff: float, share: float | None, count: int | None = None
) -> np.ndarray:
    """Indices of the variances (eigenvalues) kept, largest first: those above ``cutoff``
    times the largest; of them at most the fewest leading ones whose sum reaches ``share``
    of the sum of all (the trace: the prior's total variance); and at most ``count``."""
    order = np.argsort(-values, kind="stable")
    kept = order[values[order] > cutoff * values.max()]
    if share is not None:
        cum = np.cumsum(values[kept])
        kept = kept[: int(np.searchsorted(cum, share * values.clip(0).sum())) + 1]
    if count is not None:
        kept = kept[: int(count)]
    return kept


def _centres_design(
    rep: np.ndarray, weights: np.ndarray, k: int, seed: int, tau_a_scale: float,
    tau_f_scale: float, balanced: np.ndarray | None = None,
) -> KernelDesign:  # fmt: skip
    finite = np.isfinite(rep).all(axis=1)
    pts, wts = rep[finite], weights[finite]
    share = float(CENTRES_CLASS_BALANCED)
    if share and balanced is not None:  # the candidate: part class-balanced weights
        bal = np.asarray(balanced, float)[finite]
        wts = (1 - share) * wts / wts.sum() + share * bal / bal.sum()
    ranges = [_axis_range(pts[:, j], wts) for j in range(pts.shape[1])]
    low = np.array([r[0] for r in ranges])
    span = np.array([r[1] - r[0] for r in ranges])
    u = np.clip((pts - low) / span - 0.5, -0.5, 0.5)  # standardised, outliers clipped
    centres_u = _kmeans(u, wts, min(k, np.unique(u, axis=0).shape[0]), seed)
    loc = low + (centres_u + 0.5) * span
    # width: the typical distance to the nearest other centre, per dimension
    gaps = np.abs(centres_u[:, None, :] - centres_u[None, :, :])
    dist = np.sqrt((gaps**2).sum(axis=2))
    np.fill_diagonal(dist, np.inf)
    nearest = dist.argmin(axis=1)
    spacing_u = np.median(np.abs(centres_u - centres_u[nearest]), axis=0)
    spacing_u = np.maximum(spacing_u, 1e-3)
    width = spacing_u * span * CENTRES_WIDTH_FACTOR * np.sqrt(centres_u.shape[1])
    m = int(CENTRES_LOCAL_WIDTH)
    if m > 0:  # the candidate: per-kernel widths from each centre's own spacing
        own = np.sort(dist, axis=1)[:, min(m, dist.shape[1] - 1) - 1]
        ratio = (own / np.median(own)) ** float(CENTRES_LOCAL_POWER)
        width = width[None, :] * np.clip(ratio, 0.5, 2.0)[:, None]
    # Gaussian-process smoothing prior over the centres, lengthscale twice the spacing,
    # truncated to its leading eigenvectors (GP_VARIANCE_SHARE)
    ell = GP_LENGTHSCALE_FACTOR * float(np.median(dist.min(axis=1)))
    sq = (((centres_u[:, None, :] - centres_u[None, :, :]) / ell) ** 2).sum(axis=2)
    cov = np.exp(-0.5 * sq)
    fixed = np.column_stack([np.ones(centres_u.shape[0]), centres_u])
    resid = _projector_off(fixed)
    values, vectors = np.linalg.eigh(resid @ cov @ resid)
    keep = _leading(values, GP_EIGEN_CUTOFF, GP_VARIANCE_SHARE)
    smooth = vectors[:, keep] * np.sqrt(values[keep])
    scale = np.full(fixed.shape[1], CENTRES_SLOPE_SCALE)
    scale[0] = INTERCEPT_SCALE
    return KernelDesign(
        kind="centres", loc=loc, width=width, shape=(), fixed_basis=fixed, fixed_scale=scale,
        smooth_basis=smooth, tau_a_scale=tau_a_scale, tau_f_scale=tau_f_scale,
        gp_lengthscale=ell, gp_variance_share=float(values[keep].sum() / values.clip(0).sum()),
    )  # fmt: skip


def distinct_outputs(lower: np.ndarray, upper: np.ndarray) -> int:
    """How many distinct calibration outputs (points or bins, rows of ``(lower, upper)``)
    there are.

    With one output dimension, when they are at most two (the grid's fixed-effect
    functions), the smooth limit alone (log-odds and log-density linear in the transformed
    output) takes any values at those outputs, so the data cannot inform a smooth part and
    :func:`design_kernels` leaves it out (``R = 0``). Such outputs come from classifiers
    that give hard labels: a binary one's 0 / 1, a one-hot probability vector's margin
    (one value) under the class reduction. With the smooth part kept, its scale ``tau_f``
    had nothing but its heavy-tailed prior to go on, and the sampler diverged in that
    tail: 16-59 divergent transitions per fit at the defaults in the cases measured
    (docs/model.md, "Hard labels"). Two dimensions keep their smooth part: measured on
    three-class one-hot vectors (three distinct outputs), the bilinear limit alone put
    0.998-1.000 where the data say 0.87-0.88.
    """
    bins = np.column_stack([np.asarray(lower, float), np.asarray(upper, float)])
    return int(np.unique(bins, axis=0).shape[0])


def design_kernels(
    lower: np.ndarray,
    upper: np.ndarray,
    counts: np.ndarray,
    n_components: int | None = None,
    *,
    seed: int = 0,
    tau_a_scale: float | None = None,
    tau_f_scale: float | None = None,
    tau_f_df: float | str | None = "auto",
    tau_f_floor: float | None = None,
    tau_l_scale: float | None = None,
    range_weights: np.ndarray | None = None,
) -> KernelDesign:
    """The kernel design for calibration rows (model-scale bins or points, (n, D)).

    ``range_weights`` weigh the grid's range quantiles instead of ``counts``
    (RANGE_CLASS_BALANCED: the class-balanced weights that
    :func:`~yieldwise.transducer.stan_data.build_stan_data` passes); None: the counts.

    ``n_components`` None takes :func:`auto_components`; for a 2-D grid it is rounded to
    the nearest square (nodes per axis ``round(sqrt(K))``). ``tau_f_df`` ``"auto"`` takes
    :data:`TAU_CLASS_DF` for one output dimension and :data:`TAU_CLASS_DF_MULTI` for more;
    ``tau_f_floor`` None takes :data:`TAU_CLASS_FLOOR` for one output dimension,
    :data:`TAU_CLASS_FLOOR_MULTI` for two and :data:`TAU_CLASS_FLOOR_CENTRES` for more
    (scattered centres); ``tau_l_scale`` None takes :data:`LOCAL_SCALE`
    for one output dimension and 0 (no local blocks) for more, where a positive value is
    refused; ``tau_a_scale`` and ``tau_f_scale`` None take
    :data:`TAU_DENSITY_SCALE` and :data:`TAU_CLASS_SCALE` (read at call time, as every
    constant here, so that a study may set them).
    """
    tau_a_scale = TAU_DENSITY_SCALE if tau_a_scale is None else tau_a_scale
    tau_f_scale = TAU_CLASS_SCALE if tau_f_scale is None else tau_f_scale
    lo = np.asarray(lower, float)
    hi = np.asarray(upper, float)
    d = lo.shape[1]
    weights = np.asarray(counts, float)
    k = auto_components(d, weights.sum()) if n_components is None else int(n_components)
    rep = representative(lo, hi)
    if d <= 2:
        nodes = k if d == 1 else max(3, round(np.sqrt(k)))
        if nodes < 3:
            raise ValueError(
                f"n_components must give at least 3 kernels per output dimension, found {k}"
            )
        point = lo == hi  # exact values, not censored bins
        qw = None if range_weights is None else np.asarray(range_weights, float)
        ranges = [_axis_range(rep[:, j], weights, point[:, j], qw) for j in range(d)]
        extend = (
            _extension(rep[:, 0], weights, point[:, 0], *ranges[0], nodes) if d == 1 else (0, 0)
        )
        design = _grid_design(ranges, nodes, tau_a_scale, tau_f_scale, extend)
        if d == 1 and distinct_outputs(lo, hi) <= design.fixed_basis.shape[1]:
            # the smooth limit alone fits every distinct output: no smooth part to learn
            design = replace(design, smooth_basis=design.smooth_basis[:, :0])
    else:
        if k < d + 2:
            raise ValueError(f"n_components must be at least {d + 2} for {d} output dimensions")
        design = _centres_design(
            rep, weights, k, seed, tau_a_scale, tau_f_scale, balanced=range_weights
        )
    if tau_f_df == "auto":
        tau_f_df = TAU_CLASS_DF if d == 1 else TAU_CLASS_DF_MULTI
    if tau_f_floor is None:
        tau_f_floor = (
            TAU_CLASS_FLOOR if d == 1 else TAU_CLASS_FLOOR_MULTI if d == 2
            else TAU_CLASS_FLOOR_CENTRES
        )  # fmt: skip
    if tau_l_scale is None:
        tau_l_scale = LOCAL_SCALE if d == 1 else 0.0
    if tau_l_scale and d != 1:
        raise ValueError(
            f"prior['tau_l_scale'] (local smoothing scales) needs one output dimension, "
            f"found {d}; leave it out or set it to 0"
        )
    return replace(
        design, tau_f_df=None if tau_f_df is None else float(tau_f_df),
        tau_f_floor=float(tau_f_floor), tau_l_scale=float(tau_l_scale),
        density_marginal=int(MARGINAL_DENSITY),  # read at call time: a study may set it
    )  # fmt: skip


def kernel_matrix(
    design_loc: np.ndarray, design_width: np.ndarray, lower: np.ndarray, upper: np.ndarray,
    censored: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Kernel values of every row under every kernel, each row scaled to a largest of 1.

    Returns ``(kern, log_scale)`` with ``kern[n, k] * exp(log_scale[n])`` the kernel's
    density at a point row (or probability of a censored row's bin), computed by the same
    numpy code that makes predictions (:mod:`yieldwise._mixture`).
    """
    from ._mixture import log_kernels

    loc = np.asarray(design_loc, float)
    sigma = np.broadcast_to(np.asarray(design_width, float), loc.shape)
    cens = np.asarray(censored).astype(bool)
    with np.errstate(divide="ignore", under="ignore", invalid="ignore"):
        log_k = log_kernels(loc[None], sigma[None], lower, upper, cens)[0]  # (n, K)
    top = log_k.max(axis=1)
    if not np.isfinite(top).all():
        bad = int((~np.isfinite(top)).sum())
        raise ValueError(
            f"{bad} calibration row(s) have zero kernel mass under every kernel; the outputs "
            "are too far outside the kernels' range"
        )
    kern = np.exp(log_k - top[:, None])
    # Subnormal values (below 1e-300 of the row's largest: nothing to the likelihood) are
    # flushed to 0: the JSON readers of both Stan interfaces reject numbers like 5e-324.
    kern[kern < 1e-300] = 0.0
    return kern, top
