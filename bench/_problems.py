"""Synthetic classification problems whose truth is known exactly (bench/decision_quality.py).

Each problem knows its class frequencies, how to draw calibration items, the exact
class probabilities ``p(c | y)``, and a table ``W[g, c]`` of the joint probability of
class ``c`` and an output in cell ``g`` of a fine partition of the output space (every
lattice value for vote fractions; fine quadrature cells for continuous outputs; a cell
of its own for each point mass of an output that mixes both). With
``W``, the long-run utility of any decision rule ``d(y)`` is
``sum_g sum_c W[g, c] U[d(y_g), c]``: exact for a lattice, a quadrature error far below
the differences measured otherwise.

Outputs come in the form a classifier would hand over (vote fractions, a score in (0, 1)
or clipped to [0, 1], logits, a probability vector); ``score`` gives the real-valued 1-D
score (binary) or the logits (3 classes) that post-hoc calibrators take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import expit, logit, softmax


@dataclass
class Problem:
    name: str
    description: str
    prevalences: np.ndarray  # class frequencies of the population
    sample_outputs: Callable[[np.ndarray, np.random.Generator], np.ndarray]  # classes -> outputs
    cells: np.ndarray  # (G, D) representative outputs of the partition's cells
    class_mass: np.ndarray  # (G, C) P(output in cell g | c); columns sum to 1
    score: Callable[[np.ndarray], np.ndarray]  # outputs -> 1-D score or (n, C) logits
    raw_probability: Callable[[np.ndarray], np.ndarray]  # outputs -> (n, C) read as probs
    columns: list[str] = field(default_factory=list)

    @property
    def n_classes(self) -> int:
        return self.prevalences.size

    def joint(self, prevalences: np.ndarray | None = None) -> np.ndarray:
        """``W[g, c]`` at the population's (or the given) class frequencies."""
        r = self.prevalences if prevalences is None else np.asarray(prevalences, float)
        return self.class_mass * r[None, :]

    def truth(self, prevalences: np.ndarray | None = None) -> np.ndarray:
        """Exact ``p(c | y)`` at the cells."""
        w = self.joint(prevalences)
        return w / w.sum(axis=1, keepdims=True).clip(1e-300)

    def sample(self, n: int, rng: np.random.Generator, prevalences: Any = None):
        r = self.prevalences if prevalences is None else np.asarray(prevalences, float)
        classes = rng.choice(r.size, size=n, p=r)
        return self.sample_outputs(classes, rng), classes


# ------------------------------------------------------------------ partitions
def _cells_1d(lo: float, hi: float, n: int, cdfs: list[Callable]) -> tuple[np.ndarray, np.ndarray]:
    """Equal cells on [lo, hi] with exact masses from each class's CDF (tails folded in)."""
    edges = np.linspace(lo, hi, n + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    mass = np.column_stack(
        [np.diff(np.concatenate([[0.0], cdf(edges[1:-1]), [1.0]])) for cdf in cdfs]
    )
    return mids[:, None], mass


def _cells_2d(box: tuple[float, float, float, float], n: int, pdfs: list[Callable]):
    """A midpoint grid on a box; masses are density x area, renormalised per class."""
    x0, x1, y0, y1 = box
    gx = np.linspace(x0, x1, n + 1)
    gy = np.linspace(y0, y1, n + 1)
    mx, my = (gx[:-1] + gx[1:]) / 2, (gy[:-1] + gy[1:]) / 2
    points = np.column_stack([np.repeat(mx, n), np.tile(my, n)])
    mass = np.column_stack([pdf(points) for pdf in pdfs])
    return points, mass / mass.sum(axis=0, keepdims=True)


def _normal_mixture(parts: list[tuple[float, float, float]]):
    """(weight, mean, sd) parts -> (cdf, sampler) of a 1-D normal mixture."""
    w = np.array([p[0] for p in parts])
    m = np.array([p[1] for p in parts])
    s = np.array([p[2] for p in parts])

    def cdf(x):
        return (w * stats.norm.cdf((np.asarray(x)[:, None] - m) / s)).sum(axis=1)

    def draw(n, rng):
        which = rng.choice(w.size, size=n, p=w)
        return m[which] + s[which] * rng.standard_normal(n)

    return cdf, draw


def _one_d(name, description, prevalences, parts_by_class, lo, hi):
    mixtures = [_normal_mixture(parts) for parts in parts_by_class]
    cells, mass = _cells_1d(lo, hi, 4000, [m[0] for m in mixtures])

    def sample_outputs(classes, rng):
        y = np.empty(classes.size)
        for c, (_, draw) in enumerate(mixtures):
            y[classes == c] = draw(int((classes == c).sum()), rng)
        return y[:, None]

    return Problem(
        name,
        description,
        np.asarray(prevalences, float),
        sample_outputs,
        cells,
        mass,
        score=lambda y: y[:, 0],
        raw_probability=lambda y: np.column_stack([1 - expit(y[:, 0]), expit(y[:, 0])]),
        columns=["score"],
    )


# ------------------------------------------------------------------ the panel
def vote_score(trees: int) -> Callable[[np.ndarray], np.ndarray]:
    """Vote fractions k/trees -> the logit of (k + 1/2) / (trees + 1): finite at 0 and 1."""
    return lambda v: logit((v[:, 0] * trees + 0.5) / (trees + 1))


def votes_problem() -> Problem:
    """(1) A forest's hard votes: k of 200 trees, beta-binomial per class, 9 % positives."""
    trees, ab = 200, [(0.6, 8.0), (6.0, 2.5)]
    k = np.arange(trees + 1)
    mass = np.column_stack([stats.betabinom.pmf(k, trees, a, b) for a, b in ab])

    def sample_outputs(classes, rng):
        a = np.array([ab[c][0] for c in classes])
        b = np.array([ab[c][1] for c in classes])
        return (rng.binomial(trees, rng.beta(a, b)) / trees)[:, None]

    return Problem(
        "votes",
        "vote fractions k/200, beta-binomial per class, 9 % positives",
        np.array([0.91, 0.09]),
        sample_outputs,
        (k / trees)[:, None],
        mass,
        score=vote_score(trees),
        raw_probability=lambda v: np.column_stack([1 - v[:, 0], v[:, 0]]),
        columns=["votes"],
    )


def logistic_problem() -> Problem:
    """(2) Equal-variance normal classes: p(1 | y) exactly logistic in y (Platt's home)."""
    return _one_d(
        "logistic",
        "normal classes, equal variance: truth logistic in the score",
        [0.8, 0.2],
        [[(1, 0.0, 1.0)], [(1, 2.0, 1.0)]],
        -7,
        9,
    )


def beta_problem() -> Problem:
    """(3) Beta-distributed scores per class: truth exactly of beta-calibration shape."""
    ab = [(2.0, 5.0), (4.0, 1.5)]
    edges = np.linspace(0, 1, 4001)
    mids = (edges[:-1] + edges[1:]) / 2
    mass = np.column_stack([np.diff(stats.beta.cdf(edges, a, b)) for a, b in ab])

    def sample_outputs(classes, rng):
        a = np.array([ab[c][0] for c in classes])
        b = np.array([ab[c][1] for c in classes])
        return rng.beta(a, b)[:, None]

    return Problem(
        "beta",
        "beta-distributed scores in (0, 1): truth of beta-calibration shape",
        np.array([0.75, 0.25]),
        sample_outputs,
        mids[:, None],
        mass,
        score=lambda y: logit(np.clip(y[:, 0], 1e-12, 1 - 1e-12)),
        raw_probability=lambda y: np.column_stack([1 - y[:, 0], y[:, 0]]),
        columns=["score"],
    )


def non_monotone_problem() -> Problem:
    """(4) Positives at both ends of the score: no monotone calibrator can follow it."""
    return _one_d(
        "non-monotone",
        "positives concentrated at both ends of the score",
        [0.85, 0.15],
        [[(1, 0.0, 1.0)], [(0.5, -2.2, 0.6), (0.5, 2.2, 0.6)]],
        -7,
        7,
    )


def overlapping_problem() -> Problem:
    """(5) Heavily overlapping bimodal classes."""
    return _one_d(
        "overlapping",
        "heavily overlapping bimodal classes",
        [0.6, 0.4],
        [[(0.5, -1.5, 0.8), (0.5, 1.0, 0.8)], [(0.5, -1.0, 0.8), (0.5, 1.5, 0.8)]],
        -7,
        8,
    )


def two_logits_problem() -> Problem:
    """(6) Two logits, a different correlated normal per class: a 2-D output."""
    means = [np.array([2.0, -2.0]), np.array([-0.5, 1.0])]
    covs = [np.array([[1.0, 0.8], [0.8, 1.0]]), np.array([[2.0, 0.5], [0.5, 1.0]])]
    laws = [stats.multivariate_normal(m, c) for m, c in zip(means, covs, strict=True)]
    cells, mass = _cells_2d((-5, 8, -7, 6), 220, [law.pdf for law in laws])

    def sample_outputs(classes, rng):
        out = np.empty((classes.size, 2))
        for c, (m, cov) in enumerate(zip(means, covs, strict=True)):
            pick = classes == c
            out[pick] = rng.multivariate_normal(m, cov, size=int(pick.sum()))
        return out

    return Problem(
        "two-logits",
        "two logits, correlated normals per class (2-D output)",
        np.array([0.8, 0.2]),
        sample_outputs,
        cells,
        mass,
        score=lambda z: z[:, 1] - z[:, 0],
        raw_probability=lambda z: softmax(z, axis=1),
        columns=["logit_0", "logit_1"],
    )


#: The panel's softmax-3: the means of its logits against the last class (one per class),
#: and their sd.
SOFTMAX_3_MEANS = [(1.5, 0.0), (0.0, 1.5), (-1.0, -1.0)]
SOFTMAX_3_SD = 1.2


def softmax_problem() -> Problem:
    """(7) Three classes, a softmax probability vector as output."""
    return softmax_three(
        "softmax-3", "three classes, softmax probability vector output", SOFTMAX_3_MEANS,
        SOFTMAX_3_SD,
    )  # fmt: skip


def softmax_three(
    name: str, description: str, means: list[tuple[float, float]], sd: float,
    prevalences: tuple[float, float, float] = (0.5, 0.3, 0.2),
) -> Problem:  # fmt: skip
    """Three classes whose logits against the last class are ``N(means[c], sd^2 I)``, handed
    over as the softmax probability vector: the panel's ``softmax-3`` and, with other means
    and sd, other classifiers of the same task (bench/superiority.py's three-class task).
    The partition: a 220 x 220 grid of logit cells over [-6, 6.5]^2 (``_cells_2d``)."""
    means = [np.asarray(m, float) for m in means]
    laws = [stats.multivariate_normal(m, sd**2 * np.eye(2)) for m in means]
    cells_z, mass = _cells_2d((-6, 6.5, -6, 6.5), 220, [law.pdf for law in laws])

    def to_vector(z):
        return softmax(np.column_stack([z, np.zeros(len(z))]), axis=1)

    def sample_outputs(classes, rng):
        z = np.array([means[c] for c in classes]) + sd * rng.standard_normal((classes.size, 2))
        return to_vector(z)

    def logits(p):
        return np.log(np.clip(p, 1e-300, None))

    return Problem(
        name,
        description,
        np.array(prevalences, float),
        sample_outputs,
        to_vector(cells_z),
        mass,
        score=logits,
        raw_probability=lambda p: p,
        columns=["p_0", "p_1", "p_2"],
    )


def clipped_problem() -> Problem:
    """(8) A normal score per class clipped to [0, 1]: continuous values plus point masses.

    Class ``c`` draws ``s ~ N(m_c, sd_c)`` and hands over ``y = min(max(s, 0), 1)``, so
    ``P(y = 0 | c) = Phi(-m_c / sd_c)`` and ``P(y = 1 | c) = Phi((m_c - 1) / sd_c)``, and
    in between ``y`` has the normal density. The partition: the two point masses as cells
    of their own (represented by the outputs 0 and 1 exactly), and 4,000 equal cells on
    (0, 1) with exact masses from the normal CDFs. Closed-form truth: at the point masses
    ``p(c | y) = r_c P(y | c) / sum_k r_k P(y | k)``; inside, the same with the normal
    densities, whose log-odds are quadratic in ``y`` (unequal variances, increasing on
    [0, 1]); the truth jumps at both ends: ``p(1 | 0) = 0.0022`` against 0.0059 just
    above 0, ``p(1 | 1) = 0.766`` against 0.701 just below 1. 17.2 % of the outputs are
    exact 0s and 2.3 % exact 1s.

    ``score`` is the clipped score itself, on its own scale, as a user would pass it to a
    calibrator: Platt on it is logistic in ``y``, close to the truth inside (0, 1).
    Measured (5 samples each, 2,000 chart matrices): through ``logit(clip(y, 1e-12))``
    the point masses would sit at +-27.6 and Platt's mean regret at n = 1,000 would rise
    from 0.0005 to 0.027, beta calibration's from 0.0005 to 0.004. Temperature scaling has
    no intercept, so on this scale it reads every output as at least even odds (regret
    0.23): it is the one peer this score does not suit.
    """
    laws = [(0.25, 0.30), (0.70, 0.25)]  # (m_c, sd_c) of the score before clipping
    inner = np.linspace(0.0, 1.0, 4001)
    # per class: [P(y = 0), the 4,000 inner cells' masses, P(y = 1)], the steps of
    # [0, CDF at the 4,001 edges, 1]: CDF(0) at y = 0, 1 - CDF(1) at y = 1
    mass = np.column_stack(
        [np.diff(np.concatenate([[0.0], stats.norm.cdf(inner, m, sd), [1.0]])) for m, sd in laws]
    )
    cells = np.concatenate([[0.0], (inner[:-1] + inner[1:]) / 2, [1.0]])

    def sample_outputs(classes, rng):
        m = np.array([laws[c][0] for c in classes])
        sd = np.array([laws[c][1] for c in classes])
        return np.clip(m + sd * rng.standard_normal(classes.size), 0.0, 1.0)[:, None]

    return Problem(
        "clipped",
        "a normal score per class clipped to [0, 1]: exact 0s and 1s, 15 % positives",
        np.array([0.85, 0.15]),
        sample_outputs,
        cells[:, None],
        mass,
        score=lambda y: y[:, 0],
        raw_probability=lambda y: np.column_stack([1 - y[:, 0], y[:, 0]]),
        columns=["score"],
    )


#: softmax-10's class means of the logits: 3.5 on the class itself, plus 1.5 on class
#: c + 1 for even c (five pairs a network confuses one way).
SOFTMAX_TEN_MEANS = 3.5 * np.eye(10)
SOFTMAX_TEN_MEANS[np.arange(0, 10, 2), np.arange(1, 10, 2)] = 1.5


def softmax_ten_truth(p: np.ndarray, prevalences: np.ndarray | None = None) -> np.ndarray:
    """softmax-10's p(c | y) in closed form (its docstring below): with ``z`` the centred
    log-probabilities and ``m_c`` the centred means, ``log p(c | y) = m_c . z - |m_c|^2 / 2
    + log r_c`` up to a constant."""
    k = len(SOFTMAX_TEN_MEANS)
    r = np.full(k, 1 / k) if prevalences is None else np.asarray(prevalences, float)
    # the output keeps the logits' component orthogonal to (1, ..., 1): N(centred mu_c, I)
    centred = SOFTMAX_TEN_MEANS - SOFTMAX_TEN_MEANS.mean(axis=1, keepdims=True)
    z = np.log(np.clip(p, 1e-300, None))
    z = z - z.mean(axis=1, keepdims=True)
    return softmax(z @ centred.T - 0.5 * (centred**2).sum(axis=1) + np.log(r), axis=1)


def softmax_ten_problem(points: int = 200_000) -> Problem:
    """(9) Ten classes, a network-like softmax probability vector as output.

    Class ``c`` draws logits ``x ~ N(mu_c, I)`` with ``mu_c = 3.5 e_c``, plus ``1.5`` on
    class ``c + 1`` for even ``c`` (five pairs a network confuses one way); the output is
    ``softmax(x)``. Softmax forgets the logits' common shift, the component of ``x`` along
    ``(1, ..., 1)``, which is independent of the rest under an identity covariance; so with
    ``z = log p - mean log p`` (the centred logits, that rest) and ``m_c = mu_c - mean(mu_c)``
    the truth given the output is closed-form: ``log p(c | y) = m_c . z - |m_c|^2 / 2 +
    log r_c`` up to a constant (checked against simulated frequencies). It is not
    temperature scaling (the confused pairs are not symmetric) and not a function of the
    output's ranks and margin alone: the transducer's reduction for many classes is
    misspecified here, as it would be on a real network. Accuracy of the raw argmax 0.929,
    of the truth's 0.950 (100,000 draws).

    Nine dimensions have no grid, so the partition is Monte Carlo: ``points`` outputs drawn
    from the population (seed 9), each a cell of mass ``p(c | y_g) / points`` (``W``;
    ``class_mass`` is that over ``r_c``, renormalised per class), ordered by the margin of
    their top two probabilities so that quantiles of the output law run from ambiguous to
    confident outputs. Long-run utilities under ``W`` are exact for that sample of the
    population and within about 0.001 of the population's (the Monte Carlo standard error
    of a utility on [0, 1] over 200,000 points); the per-class renormalisation moves the
    partition's ``truth()`` at most 0.005 from the closed form (measured at every cell).
    """
    k = len(SOFTMAX_TEN_MEANS)
    means = SOFTMAX_TEN_MEANS
    prevalences = np.full(k, 1 / k)

    def sample_outputs(classes, rng):
        return softmax(means[classes] + rng.standard_normal((classes.size, k)), axis=1)

    def truth(p):
        return softmax_ten_truth(p, prevalences)

    rng = np.random.default_rng(9)
    cells = sample_outputs(rng.choice(k, size=points, p=prevalences), rng)
    top2 = -np.partition(-np.log(cells), 1, axis=1)[:, :2]
    cells = cells[np.argsort(top2[:, 0] - top2[:, 1], kind="stable")]
    mass = truth(cells) / points / prevalences
    mass /= mass.sum(axis=0, keepdims=True)
    return Problem(
        "softmax-10",
        "ten classes, a network-like softmax probability vector output (Monte Carlo cells)",
        prevalences,
        sample_outputs,
        cells,
        mass,
        score=lambda p: np.log(np.clip(p, 1e-300, None)),
        raw_probability=lambda p: p,
        columns=[f"p_{c}" for c in range(k)],
    )


def with_positives(problem: Problem, positives: float) -> Problem:
    """``problem`` with class 1 at frequency ``positives`` (a binary problem only).

    The class-conditional laws, hence the partition's ``class_mass``, stay as they are, so
    only the population's balance changes: the truth ``p(c | y)`` moves with Bayes' rule, and
    rare positives (screening, fraud) can be studied on the panel's outputs. The variant is
    named ``"<name>@<positives in %>%"`` (``"logistic@2%"``).
    """
    if problem.n_classes != 2:
        raise ValueError(
            f"positives: only a binary problem's balance can be set this way, found problem "
            f"{problem.name!r} with {problem.n_classes} classes"
        )
    if not 0.0 < float(positives) < 1.0:
        raise ValueError(f"positives must lie strictly between 0 and 1, found {positives!r}")
    p = float(positives)
    return replace(
        problem,
        name=f"{problem.name}@{100 * p:g}%",
        description=f"{problem.description}; class balance set to {100 * p:g} % positives",
        prevalences=np.array([1.0 - p, p]),
    )


PANEL = [
    votes_problem,
    logistic_problem,
    beta_problem,
    non_monotone_problem,
    overlapping_problem,
    two_logits_problem,
    softmax_problem,
    clipped_problem,
    softmax_ten_problem,  # last: the others' seeds (their place in the panel) stay as they were
]
