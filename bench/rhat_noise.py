"""How often chains that mix perfectly miss R-hat <= 1.01 by chance, per draws per chain.

    python bench/rhat_noise.py [--sims 400] [--quantities 10 19] [--ratios 0.25 0.5 0.75]
                               [--draws 500 600 750 1000] [--seed 1]

A fit is "clean" (issue 16) only if every invariant quantity of
``Transducer.diagnostics()`` has R-hat <= 1.01: 10 quantities for two classes (the
log-likelihood and p(c | y) at nine reference outputs), 19 for three. R-hat is a statistic
with its own noise, and the largest of several is larger still, so even chains drawn from
the posterior itself miss the threshold now and then, the more often the fewer draws they
keep. This script measures that rate by simulation: each quantity's four chains are
independent stationary AR(1) series whose autocorrelation gives a chosen bulk ESS per draw
(``rho = (1 - r) / (1 + r)`` for ESS / draws = r), the quantities of a fit independent of
each other, and R-hat computed by ArviZ as ``diagnose`` does (rank-normalised split
R-hat). Prints, per number of quantities, ESS ratio and draws per chain, the share of
simulated fits whose largest R-hat exceeds 1.01 (with its binomial standard error) and the
median of the largest R-hat.

It is the yardstick for the ``draws`` default (docs/model.md, "More draws for one output
dimension" and "Fewer draws, or a larger step size, for two dimensions"): a
setting at which perfectly mixing chains fail the threshold in a tenth of fits cannot meet
"every fit clean", whatever the sampler does.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

RHAT_MAX = 1.01
CHAINS = 4


def ar1_chains(rng: np.random.Generator, shape: tuple[int, ...], ratio: float) -> np.ndarray:
    """Stationary AR(1) series with unit variance along the last axis whose bulk ESS per
    draw is ``ratio``: ``rho = (1 - ratio) / (1 + ratio)``, since an AR(1) series' integrated
    autocorrelation time is ``(1 + rho) / (1 - rho)``."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio must lie in (0, 1], found {ratio}")
    rho = (1 - ratio) / (1 + ratio)
    noise = rng.standard_normal(shape)
    out = np.empty(shape)
    out[..., 0] = noise[..., 0]
    scale = np.sqrt(1 - rho**2)
    for t in range(1, shape[-1]):  # a recursion in time; vectorised over fits and chains
        out[..., t] = rho * out[..., t - 1] + scale * noise[..., t]
    return out


def largest_rhat(
    rng: np.random.Generator, sims: int, quantities: int, ratio: float, draws: int
) -> np.ndarray:
    """The largest R-hat over ``quantities`` independent quantities, for ``sims`` fits."""
    import arviz as az

    x = ar1_chains(rng, (sims, quantities, CHAINS, draws), ratio)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([max(float(az.rhat(x[s, q])) for q in range(quantities))
                         for s in range(sims)])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=400)
    parser.add_argument("--quantities", type=int, nargs="+", default=[10, 19])
    parser.add_argument("--ratios", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    parser.add_argument("--draws", type=int, nargs="+", default=[500, 600, 750, 1000])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{CHAINS} chains; {args.sims} simulated fits per row; seed {args.seed}\n")
    print("| quantities | ESS / draws | draws per chain | fits with R-hat > 1.01 (SE) "
          "| median largest R-hat |")  # fmt: skip
    print("| ---: | ---: | ---: | ---: | ---: |")
    for q in args.quantities:
        for ratio in args.ratios:
            for draws in args.draws:
                top = largest_rhat(rng, args.sims, q, ratio, draws)
                share = float(np.mean(top > RHAT_MAX))
                se = np.sqrt(share * (1 - share) / args.sims)
                print(f"| {q} | {ratio:g} | {draws} | {100 * share:.1f} % ({100 * se:.1f}) "
                      f"| {np.median(top):.4f} |")  # fmt: skip


if __name__ == "__main__":
    main()
