"""The standard rule against the augmented rule, over many utility matrices (theory 2, 4).

The *standard* rule deploys the classifier's own choice (the argmax of its output,
or ``output > threshold`` for a scalar), whatever the utilities; the *augmented*
rule decides by maximum expected utility with the transducer's probabilities
(theory 2). Under any one utility matrix the augmented rule's expected long-run
utility is at least the standard rule's -- it maximises
``sum_c U[d, c] p(c | y, D)`` output by output, which is what the posterior mean of
``u_t`` integrates (theory 4) -- and :func:`standard_vs_augmented` shows by how
much, matrix by matrix, over thousands of matrices drawn from a stated prior.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ._validation import align, check_positive_int
from .long_run import (
    DEFAULT_CELLS,
    DEFAULT_POINTS,
    long_run_core,
    long_run_utility,
    shifted_matrices,
)
from .utility import (
    MATRIX_PRIORS,
    TIE_RTOL,
    UtilityMatrix,
    chart_coordinates,
    sample_matrices,
)

if TYPE_CHECKING:
    from .transducer import Transducer

__all__ = ["standard_vs_augmented"]

#: Relative size of floating-point rounding in a posterior-mean utility (sums of ~1e4 terms
#: of magnitude <= 1 carry errors of a few 1e-16; 1e-12 is far above them).
_ROUNDING = 1e-12


def standard_vs_augmented(
    transducer: Transducer,
    utilities: Any = None,
    *,
    n_matrices: int = 10_000,
    prior: str = "uniform",
    seed: int = 0,
    rescale: bool = True,
    threshold: float = 0.5,
    prevalences: Any = None,
    n_cells: int = DEFAULT_CELLS,
    n_points: int = DEFAULT_POINTS,
) -> pd.DataFrame:
    """Per utility matrix, the long-run utility of the standard and the augmented rule.

    Parameters
    ----------
    transducer : fitted Transducer
        Of one classifier (the standard rule needs its own outputs; for a joint
        transducer use ``transducer.marginal(name)``).
    utilities : UtilityMatrix or sequence of UtilityMatrix, optional
        The matrices (one matrix is a batch of one); their decisions must be
        labelled like the transducer's classes (decision ``c`` = "choose class ``c``",
        which the standard rule takes). Default: ``n_matrices`` drawn by
        :func:`yieldwise.utility.sample_matrices` from ``prior`` with decisions
        and classes the transducer's classes -- for two classes ``"uniform"`` is
        uniform over the chart of theory 1.1, for more i.i.d. uniform entries with
        each column's correct decision the largest.
    n_matrices, prior, seed
        How many matrices to draw, from which prior, with which seed.
    rescale : bool, default True
        Rescale each matrix's two posterior-mean utilities by one affine map, 0 the
        worst and 1 the best yield achievable at the predictive class frequencies
        (theory 1), so that matrices of any scale share one axis and the rules keep
        their order.
    threshold : float, default 0.5
        The standard rule's threshold for a scalar output.
    prevalences, n_cells, n_points
        As in :func:`yieldwise.long_run_utility` (deployment prevalences and
        integration settings).

    Returns
    -------
    pandas.DataFrame
        One row per matrix: ``standard`` and ``augmented`` (posterior means of the
        long-run utility per item), ``gain`` (their difference), ``integration_error``
        (the larger of the two rules' bounds), ``prob_augmented_better`` (the
        posterior probability, over paired draws, that the augmented rule yields
        more: by more than ``TIE_RTOL * (max U - min U)``, the package's tie rule
        :func:`yieldwise.utility.near_best`), ``prob_tie`` (that the two rules tie:
        within that tolerance, e.g. on every draw where they take the same decisions;
        ``1 - prob_tie - prob_augmented_better`` is the probability that the standard
        rule yields more), ``not_worse`` (the gain is at least minus the integration error and
        rounding), and for binary matrices the chart coordinates ``x`` and ``y``.
        ``attrs`` records the prior, seed, number of matrices, whether rescaled,
        and ``share_not_worse``.

    Examples
    --------
    A transducer whose draws are given (a two-component mixture on a score), and a
    hundred matrices uniform over the chart:

    >>> import numpy as np, pandas as pd
    >>> from yieldwise import Transducer
    >>> draws = {"w": np.array([[[0.7, 0.3]]]),
    ...          "alpha": np.array([[[[0.95, 0.05], [0.1, 0.9]]]]),
    ...          "mu": np.array([[[[-1.0], [1.0]]]]), "sigma": np.array([[[[1.0], [1.0]]]])}
    >>> scores = np.linspace(-3, 3, 40)
    >>> t = Transducer.from_draws(draws, pd.DataFrame({"score": scores}),
    ...                            np.where(scores > 0, "yes", "no"), ("no", "yes"),
    ...                            output_transform="identity", resolution=None)
    >>> frame = standard_vs_augmented(t, n_matrices=100, seed=1, threshold=0.0)
    >>> list(frame.columns)
    ['standard', 'augmented', 'gain', 'integration_error', 'prob_augmented_better', 'prob_tie',
     'not_worse', 'x', 'y']
    >>> frame.attrs["share_not_worse"]  # the augmented rule never yields less on average
    1.0
    """
    classes = tuple(transducer.classes_)
    drawn = utilities is None
    if drawn:
        if prior not in MATRIX_PRIORS:
            raise ValueError(f"prior must be one of {list(MATRIX_PRIORS)}, found {prior!r}")
        check_positive_int(n_matrices, "n_matrices")  # named as the caller knows it
        utilities = sample_matrices(n_matrices, classes, classes, prior=prior, seed=seed)
    else:
        given = type(utilities).__name__
        if isinstance(utilities, UtilityMatrix):
            utilities = [utilities]  # a batch of one
        elif isinstance(utilities, Iterable) and not isinstance(utilities, str | bytes):
            utilities = list(utilities)
        else:
            raise TypeError(
                f"utilities must be a UtilityMatrix or a non-empty sequence of them, found {given}"
            )
        if not utilities or not all(isinstance(u, UtilityMatrix) for u in utilities):
            other = [type(u).__name__ for u in utilities if not isinstance(u, UtilityMatrix)]
            raise TypeError(
                "utilities must be a UtilityMatrix or a non-empty sequence of them, found "
                + (f"a {given} holding a {other[0]}" if utilities else f"an empty {given}")
            )
        for k, u in enumerate(utilities):
            if set(u.decisions) != set(classes) or set(u.classes) != set(classes):
                raise ValueError(
                    f"utilities[{k}] has decisions {list(u.decisions)} and classes "
                    f"{list(u.classes)}; the standard rule chooses one of the transducer's "
                    f"classes {list(classes)}, so both must be those labels"
                )
    values = _stacked(utilities, classes)  # (m, C, C): row k chooses class k
    # Both rules are integrated and compared on U - min U, min U added back to the means
    # only: per draw the two utilities then carry the rounding of the range, not of U's
    # size, so the tie rule (TIE_RTOL of the range) holds under any offset (an "alike"
    # matrix + 1e9 gave P(tie) 0.18 for 1, as compare did before it shifted too).
    # long_run_core keeps the augmented rule's draws of U - min U, shifted by the same
    # shifted_matrices as the standard rule's below.
    shifted, (lowest, spread) = shifted_matrices(values)
    augmented, _ = long_run_core(
        transducer, values, "augmented", prevalences=prevalences, threshold=threshold,
        n_cells=n_cells, n_points=n_points, seed=0, rescale=False,
    )  # fmt: skip
    # The standard rule ignores the utilities: per draw its long-run utility is linear in
    # U, sum_dc U[d, c] M_t[d, c], with M_t the masses of (decision d, class c); one run
    # on the C^2 indicator matrices gives M_t, and every matrix follows exactly.
    k = len(classes)
    indicators = []
    for d in range(k):
        for c in range(k):
            e = np.zeros((k, k))
            e[d, c] = 1.0
            indicators.append(UtilityMatrix(e, decisions=classes, classes=classes))
    masses = long_run_utility(
        transducer, indicators, "standard", prevalences=prevalences, threshold=threshold,
        n_cells=n_cells, n_points=n_points,
    )  # fmt: skip
    m_t = masses.values.reshape(-1, k, k)  # (draws, d, c)
    standard_draws = np.einsum("sdc,mdc->sm", m_t, shifted)
    augmented_draws = augmented.values.reshape(-1, len(values))
    # a fixed rule's error bound scales with the matrix's range (long_run_utility's own
    # bound: mass next to decision changes, and the tails, times the range)
    error = np.maximum(
        augmented["integration_error"].values,
        float(masses["integration_error"].max()) * spread,
    )
    mean_standard = standard_draws.mean(axis=0)
    mean_augmented = augmented_draws.mean(axis=0)
    if rescale:
        # One affine map per matrix, shared by both rules, so that it keeps their order:
        # 0 and 1 are the worst and best yields achievable at the predictive class
        # frequencies f_c (theory 1): f_c = sum_d M[d, c], whatever the rule. (Rescaling
        # each draw by its own frequencies would weight the draws unequally, and the
        # augmented rule maximises the plain mean.)
        f = m_t.mean(axis=0).sum(axis=0)
        low = shifted.min(axis=1) @ f
        scale = shifted.max(axis=1) @ f - low
        if (scale <= 0).any():  # long_run_utility's rescaling refuses it the same way
            bad = int(np.flatnonzero(scale <= 0)[0])
            raise ValueError(
                f"cannot rescale utility matrix {bad}: every decision has the same utility "
                "for each class, so the best and worst achievable utilities coincide; pass "
                "rescale=False"
            )
        mean_standard = (mean_standard - low) / scale
        mean_augmented = (mean_augmented - low) / scale
        error = error / scale
    gain = mean_augmented - mean_standard  # of the shifted (or rescaled) means: exact at any offset
    if not rescale:
        mean_standard, mean_augmented = mean_standard + lowest, mean_augmented + lowest
    frame = pd.DataFrame({"standard": mean_standard, "augmented": mean_augmented})
    frame["gain"] = gain
    frame["integration_error"] = error
    # Ties (theory 2: the same decisions give the same utility, up to rounding) count for
    # neither rule: the package's one tie rule, TIE_RTOL times the matrix's range
    tol = TIE_RTOL * spread
    better = np.count_nonzero(augmented_draws > standard_draws + tol, axis=0)
    worse = np.count_nonzero(standard_draws > augmented_draws + tol, axis=0)
    draws = len(augmented_draws)
    frame["prob_augmented_better"] = better / draws
    frame["prob_tie"] = (draws - better - worse) / draws
    # not worse: within the integration error, and within rounding (1e-12 relative)
    rounding = _ROUNDING * np.maximum(1.0, np.abs(frame[["standard", "augmented"]]).max(axis=1))
    frame["not_worse"] = frame["gain"] >= -(frame["integration_error"] + rounding)
    if k == 2:
        x, y = chart_coordinates(values)
        if np.isfinite(x).all():
            frame["x"], frame["y"] = x, y
    frame.index.name = "matrix"
    frame.attrs = {
        "n_matrices": len(utilities),
        "prior": prior if drawn else "given",
        "seed": seed if drawn else None,
        "rescaled": rescale,
        "share_not_worse": float(frame["not_worse"].mean()),
    }
    return frame


def _stacked(utilities: list[UtilityMatrix], classes: tuple) -> np.ndarray:
    """The matrices as one ``(m, C, C)`` array, rows and columns in ``classes`` order.

    Matrices sharing their labels (the usual case) are reordered together, so thousands
    of matrices cost one permutation, not thousands.
    """
    out = np.empty((len(utilities), len(classes), len(classes)))
    groups: dict[tuple, list[int]] = {}
    for j, u in enumerate(utilities):
        groups.setdefault((u.decisions, u.classes), []).append(j)
    for (decisions, columns), members in groups.items():
        rows = align(classes, decisions, "classes", "decisions")
        cols = align(classes, columns, "classes", "classes")
        block = np.stack([utilities[j].values for j in members])
        out[members] = block[:, rows][:, :, cols]
    return out
