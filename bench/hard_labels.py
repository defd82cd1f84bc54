"""Fit outputs a panel does not hold: hard labels, one-hot vectors, ties, many classes and
outputs on a line.

    python bench/hard_labels.py CASE [N] [key=value ...] [--set NAME=VALUE ...]

CASE is one of CASES (below); N the calibration items (default 1,500), drawn with the seed
[5, N]; key=value pairs override Transducer arguments (seed=2, backend=laplace,
adapt_delta=0.99; the fit seed is 1 unless given); ``--set NAME=VALUE`` sets constants of
``yieldwise._design`` for this fit only (a candidate design to measure). Prints the
sampler's figures (sampling seconds, divergent transitions, tree-depth hits, largest R-hat,
smallest bulk ESS), the posterior mean p(c | y) at the first output, and the same
frequency counted in the calibration set (``empirical``: the share of each class among the
items whose output equals the first one), which the model should approach when the
outputs take few values.
Measured with it: docs/model.md, "Hard labels".
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import parse_value, set_design_constants

import yieldwise._design as design
from yieldwise import Transducer


def _one_hot(rng: np.random.Generator, n: int, c: int, right: float) -> tuple:
    """A hard classifier right with probability ``right``, otherwise a uniform guess."""
    labels = rng.integers(0, c, n)
    guess = np.where(rng.random(n) < right, labels, rng.integers(0, c, n))
    return np.eye(c)[guess], labels


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def hard_binary(rng, n):
    """A binary classifier's hard labels, exactly 0 or 1 (right for 80 % of items)."""
    labels = rng.integers(0, 2, n)
    guess = np.where(rng.random(n) < 0.8, labels, 1 - labels)
    return guess[:, None].astype(float), labels


def constant(rng, n):
    """A binary score that never moves (always 0.5): one distinct output."""
    return np.full((n, 1), 0.5), rng.integers(0, 2, n)


def hard_score(rng, n):
    """A binary classifier's hard labels as one score, -5 or 5 (right for 80 % of items);
    with ``resolution=none`` the two values are given as continuous outputs."""
    labels = rng.integers(0, 2, n)
    guess = np.where(rng.random(n) < 0.8, labels, 1 - labels)
    return np.where(guess == 1, 5.0, -5.0)[:, None], labels


def two_logits_hard(rng, n):
    """Two logits that are hard labels, (5, -5) or (-5, 5) (right for 80 % of items): two
    distinct points of a 2-D output, modelled on the line through them as two bins
    (docs/model.md, "Hard labels")."""
    labels = rng.integers(0, 2, n)
    guess = np.where(rng.random(n) < 0.8, labels, 1 - labels)
    sign = np.where(guess == 1, 1.0, -1.0)
    return np.column_stack([-5.0 * sign, 5.0 * sign]), labels


def logits_on_a_line(rng, n):
    """Two continuous logits that are exact negatives, (-z / 2, z / 2) with z ~ N(+-1.5, 1)
    by class: outputs on a line, modelled along it (docs/model.md, "Outputs on a line");
    truth p(1 | z) = sigmoid(3 z)."""
    labels = rng.integers(0, 2, n)
    z = rng.normal(1.5 * (2 * labels - 1), 1.0)
    return np.column_stack([-z / 2, z / 2]), labels


def three_levels(rng, n):
    """A binary score taking only the values 0, 0.5 and 1."""
    labels = rng.integers(0, 2, n)
    guess = np.where(rng.random(n) < 0.7, labels, 1 - labels).astype(float)
    return np.where(rng.random(n) < 0.3, 0.5, guess)[:, None], labels


def ratings_7(rng, n):
    """A binary score on a 0-6 rating scale: a Normal score (mean 2 or 3.5 by class, sd 1)
    rounded to integers and clipped, so that the ends hold almost one class only (found
    by an audit on 2026-12-06: 2,000 such items, 2 chains, 25 divergent transitions)."""
    labels = rng.integers(0, 2, n)
    return np.clip(np.round(rng.normal(2 + 1.5 * labels, 1.0)), 0, 6)[:, None], labels


def one_hot_3(rng, n):
    """Three classes, one-hot probability vectors (the 2-D grid)."""
    return _one_hot(rng, n, 3, 0.8)


def one_hot_5(rng, n):
    """Five classes, one-hot probability vectors (the class reduction, pair offsets)."""
    return _one_hot(rng, n, 5, 0.8)


def one_hot_10(rng, n):
    """Ten classes, one-hot probability vectors."""
    return _one_hot(rng, n, 10, 0.8)


def ties(rng, n):
    """Six classes, softmax vectors rounded to one decimal: ties among the top scores and
    exact zeros."""
    labels = rng.integers(0, 6, n)
    p = np.round(_softmax(2.0 * np.eye(6)[labels] + rng.normal(size=(n, 6))), 1)
    return p / p.sum(axis=1, keepdims=True), labels


def classes_30(rng, n):
    """Thirty classes (more than the pair offsets' 600 pairs: the reduction without them)."""
    labels = rng.integers(0, 30, n)
    return _softmax(3.5 * np.eye(30)[labels] + rng.normal(size=(n, 30))), labels


def some_one_hot(rng, n):
    """Five classes, softmax vectors of which 30 % are rounded to one-hot."""
    labels = rng.integers(0, 5, n)
    p = _softmax(4.0 * np.eye(5)[labels] + rng.normal(size=(n, 5)))
    hard = rng.random(n) < 0.3
    p[hard] = np.eye(5)[p[hard].argmax(axis=1)]
    return p, labels


CASES = {f.__name__.replace("_", "-"): f for f in (
    hard_binary, constant, hard_score, two_logits_hard, logits_on_a_line, three_levels, ratings_7,
    one_hot_3, one_hot_5, one_hot_10, ties, classes_30, some_one_hot)}  # fmt: skip


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in CASES:
        print(__doc__, file=sys.stderr)
        print(f"CASE must be one of {sorted(CASES)}", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    design_items = []
    if "--set" in rest:
        at = rest.index("--set")
        rest, design_items = rest[:at], rest[at + 1 :]
    n = 1500
    if rest and rest[0].isdigit():
        n, rest = int(rest[0]), rest[1:]
    if any("=" not in a for a in rest):
        print(f"options are key=value pairs, found {rest}", file=sys.stderr)
        return 2
    options = {k: parse_value(v) for k, v in (a.split("=", 1) for a in rest)}
    saved = dict(vars(design))
    try:
        set_design_constants(design_items, _refuse)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        return _run(name, n, options, design_items)
    finally:  # the constants hold for this fit only
        for key in [k for k in vars(design) if k.isupper()]:
            setattr(design, key, saved[key])


def _refuse(message: str):
    raise ValueError(message)


def _run(name: str, n: int, options: dict, design_items: list[str]) -> int:
    seed = options.pop("seed", 1)
    outputs, labels = CASES[name](np.random.default_rng([5, n]), n)
    frame = pd.DataFrame(outputs, columns=[f"p{j}" for j in range(outputs.shape[1])])
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = Transducer(seed=seed, progress=False, **options).fit(frame, labels)
    total = time.perf_counter() - started
    info, diag = t.sampler_summary(), t.diagnostics()
    first = frame.iloc[:1]
    same = (frame.to_numpy() == first.to_numpy()).all(axis=1)
    counted = np.bincount(labels[same], minlength=len(t.classes_)) / same.sum()
    print(
        f"{name} n={n} seed={seed} {options}"
        + (f" --set {' '.join(design_items)}" if design_items else "")
        + f": total {total:.1f} s, sampling "
        f"{info['sampling_seconds']:.1f} s, divergent {info['divergent']}, tree-depth hits "
        f"{info['max_treedepth_hits']}, R-hat max {float(diag.r_hat.max()):.3f}, bulk ESS min "
        f"{float(diag.ess_bulk.min()):.0f}"
    )
    print(f"  p(c | first output) {np.round(t.predict_proba(first)[0], 4).tolist()}")
    print(f"  empirical           {np.round(counted, 4).tolist()} ({int(same.sum())} items)")
    for w in caught:
        print(f"  {w.category.__name__}: {str(w.message)[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
