"""Fit one panel problem with the Transducer's defaults and print the sampler's figures.

    python bench/fit_one.py PROBLEM N [--no-whitening] [--coverage-rep R] [key=value ...]

PROBLEM is a name of bench/_problems.py's PANEL (votes, logistic, beta, non-monotone,
overlapping, two-logits, softmax-3, clipped), or a binary one at another share of
positives (``two-logits@5%``: ``with_positives``), N the calibration items, drawn with the
seed [1, 7, N]; or one of the shipped sets (``SHIPPED``: digits-forest, digits-logits,
digits-knn, digits-3-5-8, digits-ten, and the joint fits joint-forest-network,
joint-forest-knn-network and joint-forest-knn-logit) with N ``all``, every item, as the
vignettes fit them,
or for digits-ten a number: that many items drawn with replacement (seed [2026, N]; repeated
items merge into counted rows), the size of issue 16's ten-class speed goal; key=value
pairs override Transducer arguments (chains=2, adapt_delta=0.99, seed=2; the fit seed is
1 unless given).
``--no-whitening`` preconditions without the conditional whitening of the smooth blocks
(yieldwise.transducer.stan_data.precondition(whiten=False); docs/model.md). Prints the sampling
time, divergent transitions, tree-depth hits, mean leapfrog steps per iteration, step
size, largest R-hat and smallest bulk ESS, and for a likelihood of binned rows its rows
and binned ESS share (``sampler_summary()["binning"]``). ``--coverage-rep R`` fits
repetition R of the coverage study's cell instead (its calibration set and fit seed,
bench/coverage.py, seed 2026), so that a fit the study found unclean can be refitted with
other settings, and says where the divergent transitions lie among the draws of
``tau_f`` (their quantiles).
"""

from __future__ import annotations

import functools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load_coverage_study, parse_value
from _problems import PANEL, with_positives

import yieldwise.transducer.stan_data as stan_data
from yieldwise import Transducer
from yieldwise.datasets import load_digits_binary, load_digits_ten, load_digits_three

#: The network's two logits on the binary digits (its own set, and a joint fit's member).
_LOGITS = ["net_logit_other", "net_logit_eight"]
#: The shipped sets: (loader, output columns), or for a joint fit (kernels at centres: three
#: or four output dimensions) (loader, {classifier: its columns}).
SHIPPED = {
    "digits-forest": (load_digits_binary, ["forest_votes"]),
    "digits-logits": (load_digits_binary, _LOGITS),
    "digits-knn": (load_digits_binary, ["knn_votes"]),
    "digits-3-5-8": (load_digits_three, ["p_three", "p_five", "p_eight"]),
    "digits-ten": (load_digits_ten, [f"p_{name}" for name in (
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")]),
    # vignette 3's joint fit (three dimensions), with the k-NN votes too (four), and three
    # one-dimensional classifiers (three): docs/model.md, "Whitening for joint fits"
    "joint-forest-network": (load_digits_binary, {"forest": ["forest_votes"],
                                                  "network": _LOGITS}),
    "joint-forest-knn-network": (load_digits_binary, {
        "forest": ["forest_votes"], "knn": ["knn_votes"], "network": _LOGITS}),
    "joint-forest-knn-logit": (load_digits_binary, {
        "forest": ["forest_votes"], "knn": ["knn_votes"], "logit": ["net_logit_eight"]}),
}  # fmt: skip
#: Shipped sets that may also be resampled to N items.
RESAMPLED = ("digits-ten",)


def shipped_set(name: str) -> tuple[pd.DataFrame | dict[str, pd.DataFrame], pd.Series]:
    """A shipped set's outputs (a mapping of each classifier's for a joint fit) and labels."""
    loader, columns = SHIPPED[name]
    frame = loader()
    if isinstance(columns, dict):
        return {member: frame[cols] for member, cols in columns.items()}, frame["label"]
    return frame[columns], frame["label"]


def main(argv: list[str]) -> int:
    plain = "--no-whitening" in argv
    args = [a for a in argv if a != "--no-whitening"]
    rep = None
    if "--coverage-rep" in args:
        at = args.index("--coverage-rep")
        if at + 1 >= len(args) or not args[at + 1].isdigit():
            print("--coverage-rep needs a repetition number (0, 1, ...)", file=sys.stderr)
            return 2
        rep = int(args[at + 1])
        del args[at : at + 2]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    name = args[0]
    problems = {make().name: make for make in PANEL}
    base, _, positives = name.partition("@")
    if positives and base in problems and rep is None:  # e.g. two-logits@5%
        try:
            shifted = with_positives(problems[base](), float(positives.rstrip("%")) / 100)
            problems[name] = lambda: shifted
        except ValueError as exc:
            print(f"PROBLEM@P% needs a binary panel problem and a share, found {name!r}: {exc}",
                  file=sys.stderr)  # fmt: skip
            return 2
    if name not in problems and name not in SHIPPED:
        print(f"PROBLEM must be one of {sorted(problems) + sorted(SHIPPED)}, found {name!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    resample = name in RESAMPLED and args[1].isdigit()
    if (name in SHIPPED) != (args[1] == "all" or resample) or (name in SHIPPED and rep is not None):
        print("N is 'all' for a shipped set (every item; no --coverage-rep) and a number "
              f"for a panel problem, found {name} {args[1]}", file=sys.stderr)  # fmt: skip
        return 2
    options = {k: parse_value(v) for k, v in (a.split("=", 1) for a in args[2:])}
    if plain:
        stan_data.precondition = functools.partial(stan_data.precondition, whiten=False)
    seed = options.pop("seed", 1)
    if name in SHIPPED:
        n, (frame, labels) = args[1], shipped_set(name)
        if resample:
            pick = np.random.default_rng([2026, int(n)]).integers(0, len(frame), int(n))
            frame, labels = frame.iloc[pick], labels.iloc[pick]
    else:
        n, problem = int(args[1]), problems[name]()
        if rep is None:
            outputs, labels = problem.sample(n, np.random.default_rng([1, 7, n]))
        else:
            study = load_coverage_study()
            ((index, _),) = study.select_problems([name])
            outputs, labels, seed = study.study_set(problem, index, n, rep)
        frame = pd.DataFrame(outputs, columns=problem.columns)
    started = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        t = Transducer(seed=seed, progress=False, **options).fit(frame, labels)
    total = time.perf_counter() - started
    info, diag = t.sampler_summary(), t.diagnostics()
    stats = t.posterior_.sample_stats
    print(
        f"{name} n={n} seed={seed} {options} whitening={'off' if plain else 'default'}: "
        f"total {total:.1f} s, sampling "
        f"{info['sampling_seconds']:.1f} s, divergent {info['divergent']}, tree-depth hits "
        f"{info['max_treedepth_hits']}, steps {float(stats.n_steps.mean()):.1f}, step size "
        f"{float(stats.step_size.mean()):.3f}, R-hat max {float(diag.r_hat.max()):.3f}, "
        f"bulk ESS min {float(diag.ess_bulk.min()):.0f}"
        + ("" if rep is None else f" (coverage repetition {rep})")
    )
    binning = info.get("binning")
    if binning:  # a likelihood of binned rows: how far its posterior is from the exact one
        print(
            f"  binned rows {binning['rows_exact']} -> {binning['rows']}, widths "
            f"{np.round(binning['bin_width'], 4).tolist()}, binned ESS share "
            f"{binning['binned_ess_share']:.3f} (log-likelihood gap sd "
            f"{binning['binned_gap_sd']:.3g})"
        )
    diverging = stats.diverging.to_numpy().astype(bool)
    if diverging.any():
        tau_f = t.posterior_.posterior["tau_f"].to_numpy().reshape(*diverging.shape, -1)
        for c in range(tau_f.shape[-1]):
            draws = tau_f[..., c]
            # the share of draws below each divergent transition's tau_f
            at = np.searchsorted(np.sort(draws, axis=None), np.sort(draws[diverging])) / draws.size
            print(
                f"  tau_f[{c + 1}]: posterior 5 / 50 / 95 % "
                f"{np.round(np.quantile(draws, [0.05, 0.5, 0.95]), 2).tolist()}; divergent "
                f"transitions at its quantiles {np.round(at, 2).tolist()}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
