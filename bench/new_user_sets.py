"""Fit data sets outside the panel with the default settings, as a new user would, and check
the 95 % bands against the truth.

    python bench/new_user_sets.py SET [SET ...] [--seed S] [--prob P] [key=value ...]

SET is a name of SETS (below) or ``all``. Each set is drawn with the seed ``[S, index]``
(default S = 11) and fitted with ``Transducer(seed=5)`` and its defaults (key=value pairs
override Transducer arguments: backend=laplace, draws=2000). Prints the sampler's figures
(sampling seconds, divergent transitions, tree-depth hits, largest R-hat, smallest bulk ESS
of the invariant quantities) and, at each check output, the true p(c | y), the posterior
mean and the ``--prob`` band (default 0.95), with whether the band holds the truth.

Every truth is exact: a closed form of the generating process, or for rounded scores
the conditional expectation over the rounding's interval by quadrature (no simulation).
Measured with it: docs/benchmarks.md, "Five more sets, fitted as a new user would".
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import integrate
from scipy.special import expit, logit, softmax
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import parse_value


@dataclass(frozen=True)
class UserSet:
    """Outputs and labels of a set, the outputs to check and the true p(c | y) there."""

    outputs: np.ndarray  # (n,) or (n, C)
    labels: np.ndarray  # (n,) 0-based
    check: np.ndarray  # (m,) or (m, C)
    truth: np.ndarray  # (m, C): p(c | check output)


#: Rounded scores (ties40): a latent s ~ N(0, 1), p(1 | s) = expit(TIE_SLOPE s + TIE_SHIFT),
#: the score round(expit(TIE_SCORE s) (TIES - 1)) / (TIES - 1), squeezed into [0.01, 0.99].
TIES, TIE_SLOPE, TIE_SHIFT, TIE_SCORE = 40, 1.8, -1.5, 1.2


def tie_score(s: np.ndarray) -> np.ndarray:
    """The rounded score of latent values ``s``."""
    return np.round(expit(TIE_SCORE * s) * (TIES - 1)) / (TIES - 1) * 0.98 + 0.01


def tie_truth(score: float) -> float:
    """p(1 | score) for the rounded scores: E[expit(1.8 s - 1.5) | s in the score's
    interval], s ~ N(0, 1), by quadrature over the interval of latent values that round to
    that score (the rounding's edges mapped back through expit(1.2 s))."""
    level = round((score - 0.01) / 0.98 * (TIES - 1))
    lo_p, hi_p = (level - 0.5) / (TIES - 1), (level + 0.5) / (TIES - 1)
    lo = -np.inf if lo_p <= 0 else logit(lo_p) / TIE_SCORE
    hi = np.inf if hi_p >= 1 else logit(hi_p) / TIE_SCORE
    mass = norm.cdf(hi) - norm.cdf(lo)
    top = integrate.quad(lambda s: expit(TIE_SLOPE * s + TIE_SHIFT) * norm.pdf(s), lo, hi)[0]
    return top / mass


def ties40(rng: np.random.Generator) -> UserSet:
    """2,000 scores rounded to 40 distinct values in (0, 1), logistic truth in a latent."""
    n = 2000
    s = rng.normal(size=n)
    labels = (rng.random(n) < expit(TIE_SLOPE * s + TIE_SHIFT)).astype(int)
    x = tie_score(s)
    check = np.unique(x)[::4]
    p1 = np.array([tie_truth(v) for v in check])
    return UserSet(x, labels, check, np.column_stack([1 - p1, p1]))


def rare(rng: np.random.Generator) -> UserSet:
    """5,000 probability-looking scores expit(s), s ~ N(0, 1), p(1 | s) = expit(2 s - 5.3):
    about 1.6 % positives."""
    n = 5000
    s = rng.normal(size=n)
    labels = (rng.random(n) < expit(2.0 * s - 5.3)).astype(int)
    grid = np.linspace(-3.0, 3.0, 13)
    p1 = expit(2.0 * grid - 5.3)
    return UserSet(expit(s), labels, expit(grid), np.column_stack([1 - p1, p1]))


def heavy_tails(rng: np.random.Generator) -> UserSet:
    """2,000 raw margins s ~ t(1.5) (out to +-50 and beyond), p(1 | s) = expit(1.5 tanh s)."""
    n = 2000
    s = rng.standard_t(1.5, size=n)
    labels = (rng.random(n) < expit(1.5 * np.tanh(s))).astype(int)
    grid = np.array([-50.0, -5.0, -1.0, -0.3, 0.0, 0.3, 1.0, 5.0, 50.0])
    p1 = expit(1.5 * np.tanh(grid))
    return UserSet(s, labels, grid, np.column_stack([1 - p1, p1]))


#: bimodal: class 1 with probability 0.4; its logit-score ~ N(2.5, 0.7), class 0's
#: N(-2.5, 0.7), each flipped to the other side with probability 0.05
BIMODAL_SHARE, BIMODAL_MEAN, BIMODAL_SD, BIMODAL_FLIP = 0.4, 2.5, 0.7, 0.05


def bimodal(rng: np.random.Generator) -> UserSet:
    """1,500 scores in two clumps with nothing in the middle (see the constants above)."""
    n = 1500
    labels = (rng.random(n) < BIMODAL_SHARE).astype(int)
    s = rng.normal(np.where(labels == 1, BIMODAL_MEAN, -BIMODAL_MEAN), BIMODAL_SD)
    flip = rng.random(n) < BIMODAL_FLIP
    s[flip] = -s[flip]
    g = np.array([-4.0, -2.5, -1.0, 0.0, 1.0, 2.5, 4.0])

    def density(centre: float) -> np.ndarray:  # the logit-score's density given the class
        return (1 - BIMODAL_FLIP) * norm.pdf(g, centre, BIMODAL_SD) + BIMODAL_FLIP * norm.pdf(
            g, -centre, BIMODAL_SD
        )

    d1 = BIMODAL_SHARE * density(BIMODAL_MEAN)
    d0 = (1 - BIMODAL_SHARE) * density(-BIMODAL_MEAN)
    p1 = d1 / (d0 + d1)
    return UserSet(expit(s), labels, expit(g), np.column_stack([1 - p1, p1]))


#: four-class: logits z ~ N(FOUR_MARGIN e_y, I), the network's output softmax(FOUR_TEMPER z)
FOUR_CLASSES, FOUR_MARGIN, FOUR_TEMPER = 4, 1.5, 2.0


def four_class_truth(x: np.ndarray) -> np.ndarray:
    """p(c | x) for the four-class network: x fixes z up to an added constant, z = log(x) /
    FOUR_TEMPER + a, and under uniform classes p(c | z) is proportional to exp(FOUR_MARGIN
    z_c) (the Normal's other terms are the same for every class; the constant cancels), so
    p(c | x) = softmax(FOUR_MARGIN / FOUR_TEMPER * log x)."""
    return softmax(FOUR_MARGIN / FOUR_TEMPER * np.log(x), axis=-1)


def four_class(rng: np.random.Generator) -> UserSet:
    """1,500 over-confident 4-class softmax vectors (fitted through ranks and margins)."""
    n = 1500
    labels = rng.integers(0, FOUR_CLASSES, n)
    z = rng.normal(size=(n, FOUR_CLASSES))
    z[np.arange(n), labels] += FOUR_MARGIN
    x = softmax(FOUR_TEMPER * z, axis=1)
    pick = np.eye(FOUR_CLASSES)[[0, 1, 2, 3, 0, 1]] * 2
    check = softmax(FOUR_TEMPER * (rng.normal(size=(6, FOUR_CLASSES)) + 1.5 * pick), axis=1)
    return UserSet(x, labels, check, four_class_truth(check))


SETS: dict[str, Callable[[np.random.Generator], UserSet]] = {
    "ties40": ties40, "rare": rare, "heavy-tails": heavy_tails, "bimodal": bimodal,
    "four-class": four_class,
}  # fmt: skip


def draw(name: str, seed: int) -> UserSet:
    """Set ``name`` drawn with the seed [seed, its index in SETS]."""
    return SETS[name](np.random.default_rng([seed, list(SETS).index(name)]))


def band_check(truth: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Whether each band holds its truth, (m, C) booleans."""
    return (lower <= truth) & (truth <= upper)


def run(name: str, seed: int, prob: float, overrides: dict) -> dict:
    from yieldwise import Transducer

    data = draw(name, seed)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = Transducer(**{"seed": 5, "progress": False, **overrides}).fit(
            data.outputs, data.labels
        )
    seconds = time.perf_counter() - started
    summary = fitted.sampler_summary()
    table = fitted.diagnostics()
    band = fitted.predict_interval(data.check, prob=prob)
    mean = np.asarray(band["mean"])
    held = band_check(data.truth, np.asarray(band["lower"]), np.asarray(band["upper"]))
    print(
        f"{name}: {len(data.labels)} items, fit {seconds:.1f} s, sampling "
        f"{summary['sampling_seconds']:.1f} s, divergent {summary['divergent']}, tree-depth "
        f"hits {summary['max_treedepth_hits']}, R-hat max {table['r_hat'].max():.3f}, bulk "
        f"ESS min {table['ess_bulk'].min():.0f}"
    )
    for warning in caught:
        print(f"  warning: {type(warning.message).__name__}: {str(warning.message)[:200]}")
    shown = range(1, 2) if data.truth.shape[1] == 2 else range(data.truth.shape[1])
    for i in range(len(data.check)):
        for c in shown:
            print(f"  output {i} class {c}: truth {data.truth[i, c]:.4f}, mean {mean[i, c]:.4f}, "
                  f"{prob:.0%} [{float(band['lower'][i, c]):.4f}, {float(band['upper'][i, c]):.4f}]"
                  f"{'' if held[i, c] else '  MISSED'}")  # fmt: skip
    counted = held[:, list(shown)]
    print(f"  {prob:.0%} bands holding the truth: {int(counted.sum())} of {counted.size}; largest "
          f"|mean - truth| {np.abs(mean - data.truth).max():.4f}")  # fmt: skip
    return {"held": int(counted.sum()), "checked": int(counted.size), "summary": summary}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "items", nargs="+", metavar="SET | key=value",
        help=f"one or more of {list(SETS)} (or all), then Transducer arguments as key=value",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--prob", type=float, default=0.95)
    args = parser.parse_args(argv)
    names = [item for item in args.items if "=" not in item]
    names = list(SETS) if names == ["all"] else names
    unknown = [n for n in names if n not in SETS]
    if unknown or not names:
        parser.error(f"unknown sets {unknown}; expected names of {list(SETS)} or all")
    overrides = {}
    for item in args.items:
        key, _, value = item.partition("=")
        if item in names or item == "all":
            continue
        if not key or not value:
            parser.error(f"expected key=value Transducer arguments, found {item!r}")
        overrides[key] = parse_value(value)
    for name in names:
        run(name, args.seed, args.prob, overrides)


if __name__ == "__main__":
    main()
