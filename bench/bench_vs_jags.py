"""Speed of the transducer's Stan/NUTS fit against the same model fitted by Gibbs sampling in JAGS.

The method's original authors fitted this kind of mixture with JAGS (Gibbs sampling
with explicit component indicators); yieldwise fits it with Stan's NUTS, the indicators
summed out. This script fits the SAME model (bench/jags/transducer.jags is
stan/transducer.stan for a 1-D point-valued output), with the SAME hyper-parameters
(yieldwise's own ``build_stan_data``), the same K, data and starting points, and compares
how fast each sampler delivers effective draws.

Data (``make_case``), n = 1000 and n = 3600 items each (seeded):

* ``scores``: a continuous 1-D score, class 1 with probability 0.3, y | c ~ N(1.5 c, 1);
* ``votes``: a 200-tree forest's vote fractions, beta-binomial per class, 9 % positives.
  yieldwise fits them on the logit scale as interval-censored at their resolution and
  merges identical (class, vote count) rows; JAGS keeps one latent output per item,
  censored to its bin (bench/jags/transducer_binned.jags).

Quantities, all invariant to label switching and computed by the same numpy code from
each sampler's draws of (w, alpha, mu, sigma): the transducer p(class 1 | output) at the
outputs found at 9 evenly spaced quantiles of the items (5 % to 95 %), and the total
log-likelihood. Bulk ESS and rank-normalised R-hat by ArviZ on (chain, draw) arrays.

* Stan: ``Transducer(n_components=5, chains=4, warmup=500, draws=750)`` (identity
  transform and no resolution for the scores, the defaults for votes); sampling time
  as yieldwise records it (warm-up included, compilation excluded). The time to bulk
  ESS >= 400 and R-hat <= 1.01 on all quantities is that of the shortest run meeting
  them among 150 + 150, 250 + 250, the default and the default with twice the draws
  (and so on).
* JAGS: 4 chains, adaptation, burn-in, then chunks of iterations (no thinning) until
  the same criteria hold on all post-burn-in draws, or a time cap. Compilation excluded.

Both use the machine's cores the same way: httpstan runs the 4 chains in a pool of one
process per core, and the 4 JAGS chains are split over as many R processes
(bench/jags/worker.R), which run in parallel.

    .venv/bin/python bench/bench_vs_jags.py                 # both data, n = 1000, 3600
    .venv/bin/python bench/bench_vs_jags.py --write         # ... and update docs/benchmarks.md
    .venv/bin/python bench/bench_vs_jags.py --data votes --sizes 1000 --jags-cap 120

Needs JAGS and rjags: ``apt-get install jags r-cran-rjags``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import log_ndtr, logsumexp

from yieldwise import Transducer
from yieldwise._stan_data import (
    INFINITY_SENTINEL,
    PRIOR_KEYS,
    build_stan_data,
    initial_values,
)
from yieldwise.transforms import choose_transform

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write_section

SECTION = "## Speed against JAGS (Gibbs)"
JAGS_DIR = Path(__file__).resolve().parent / "jags"
K = 5
CHAINS = 4
ESS_MIN, RHAT_MAX = 400.0, 1.01
GRID_PROBS = np.linspace(0.05, 0.95, 9)


# ------------------------------------------------------------------ data and invariants
@dataclass
class Case:
    """One data set, as both samplers see it.

    ``lower``/``upper`` are each item's bounds on the model scale (equal for a point
    output; a vote fraction's bin otherwise, exactly as the Transducer builds them), and
    ``data`` is yieldwise's Stan data for the same items (merged rows, prior).
    """

    kind: str
    n: int
    outputs: np.ndarray
    cls: np.ndarray  # 0-based
    lower: np.ndarray
    upper: np.ndarray
    grid_lower: np.ndarray
    grid_upper: np.ndarray
    grid_labels: list[str]
    data: dict
    transducer_args: dict

    @property
    def label(self) -> str:
        return f"{self.kind}, n = {self.n:,}"

    @property
    def names(self) -> list[str]:
        return [f"p1 at {g}" for g in self.grid_labels] + ["log-lik"]


def make_case(kind: str, n: int, seed: int) -> Case:
    """``scores``: y | c ~ Normal(1.5 c, 1), P(c = 1) = 0.3, a continuous 1-D output.
    ``votes``: a 200-tree forest's vote fractions, beta-binomial per class, 9 % positives
    (the decision-quality panel's problem 1), binned at their resolution 1/200."""
    rng = np.random.default_rng([seed, n, 0 if kind == "scores" else 1])
    if kind == "scores":
        cls = (rng.random(n) < 0.3).astype(np.int64)
        outputs = rng.normal(1.5 * cls, 1.0)
        args = {"output_transform": "identity", "resolution": None}
    elif kind == "votes":
        cls = (rng.random(n) < 0.09).astype(np.int64)
        a, b = np.where(cls == 1, 6.0, 0.6), np.where(cls == 1, 2.5, 8.0)
        outputs = rng.binomial(200, rng.beta(a, b)) / 200
        args = {"output_transform": "auto", "resolution": "auto"}
    else:
        raise ValueError(f"unknown data kind {kind!r}; expected 'scores' or 'votes'")
    y = outputs[:, None]
    transform = choose_transform(y, ["y"], args["output_transform"], args["resolution"])
    lower, upper, censored = transform.intervals(y)
    data = build_stan_data(cls, lower, upper, censored, 2, K)
    # Transducer values at the outputs found at 9 evenly spaced quantiles of the items
    picks = np.unique(np.sort(outputs)[np.round(GRID_PROBS * (n - 1)).astype(int)])
    g_lower, g_upper, _ = transform.intervals(picks[:, None])
    unit = "y" if kind == "scores" else "votes"
    return Case(
        kind, n, outputs, cls, lower[:, 0], upper[:, 0], g_lower[:, 0], g_upper[:, 0],
        [f"{unit} = {v:.3f}" for v in picks], data, args,
    )  # fmt: skip


def log_normal(y: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    return -0.5 * ((y - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)


def log_kernel(lower, upper, mu, sigma) -> np.ndarray:
    """log N(y; mu, sigma) where lower == upper == y, else log P(lower < Y <= upper).

    Bin probabilities are differences of normal tails taken on the side where they do
    not cancel (both edges above the mean: upper tails), on the log scale.
    """
    a, b = (lower - mu) / sigma, (upper - mu) / sigma
    flip = a > 0
    hi, lo = np.where(flip, -a, b), np.where(flip, -b, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        binned = log_ndtr(hi) + np.log1p(-np.exp(log_ndtr(lo) - log_ndtr(hi)))
        point = log_normal(lower, mu, sigma)
    return np.where(lower == upper, point, binned)


def invariants(draws: dict, case: Case) -> np.ndarray:
    """(S, G + 1): p(class 1 | output) at the grid outputs, then the total log-likelihood.

    ``draws`` holds w (S, K), alpha (S, K, C), mu (S, K), sigma (S, K); classes 0-based.
    """
    w, alpha, mu, sigma = (draws[k] for k in ("w", "alpha", "mu", "sigma"))
    at = (case.grid_lower[:, None], case.grid_upper[:, None])
    log_wn = np.log(w)[:, None] + log_kernel(*at, mu[:, None], sigma[:, None])
    p1 = np.exp(
        logsumexp(log_wn + np.log(alpha[:, None, :, 1]), axis=2) - logsumexp(log_wn, axis=2)
    )
    # The (draws, items, K) log-joint is built a few million entries at a time.
    lo, hi = case.lower[:, None], case.upper[:, None]
    step = max(1, 4_000_000 // (case.n * w.shape[1]))
    log_lik = np.concatenate(
        [
            logsumexp(
                np.log(w[s])[:, None]
                + np.log(alpha[s][:, :, case.cls]).transpose(0, 2, 1)
                + log_kernel(lo, hi, mu[s][:, None], sigma[s][:, None]),
                axis=2,
            ).sum(axis=1)
            for s in (slice(i, i + step) for i in range(0, w.shape[0], step))
        ]
    )
    return np.column_stack([p1, log_lik])


def diagnose(values: np.ndarray) -> dict:
    """Bulk ESS and rank-normalised R-hat of each quantity of a (chain, draw, 10) array."""
    import arviz as az

    columns = np.moveaxis(values, 2, 0)
    ess = np.array([float(az.ess(v, method="bulk")) for v in columns])
    rhat = np.array([float(az.rhat(v, method="rank")) for v in columns])
    return {
        "ess": ess,
        "rhat": rhat,
        "met": bool((ess >= ESS_MIN).all() & (rhat <= RHAT_MAX).all()),
    }


# ----------------------------------------------------------------------------- Stan
def children_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each live child process, by pid.

    httpstan runs the chains in a pool of forked children of this process that outlive a
    fit, so the change across a fit is the CPU the chains used: unlike wall time, it
    hardly depends on what else the machine is doing.
    """
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:  # fields after "pid (name)": state, ppid, ..., utime and stime at 11 and 12
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process has just ended
            continue
        if int(fields[1]) == os.getpid():
            out[int(stat.parent.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def run_stan(case: Case, seed: int, draws: int, warmup: int = 500) -> dict:
    """One yieldwise fit; its invariants, diagnostics and sampler statistics."""
    transducer = Transducer(
        n_components=K,
        **case.transducer_args,
        chains=CHAINS,
        warmup=warmup,
        draws=draws,
        seed=seed,
        progress=False,
    )
    cpu_before = children_cpu()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        transducer.fit(case.outputs, case.cls)
    cpu = sum(t - cpu_before.get(pid, 0.0) for pid, t in children_cpu().items())
    post = transducer.posterior_.posterior
    # (chain, draw, K[, C or D]) -> (chain * draw, K[, C]); the output has one dimension
    flat = {k: post[k].values.reshape(CHAINS * draws, K, -1) for k in ("alpha", "mu", "sigma")}
    flat = {
        **flat,
        "w": post["w"].values.reshape(-1, K),
        "mu": flat["mu"][..., 0],
        "sigma": flat["sigma"][..., 0],
    }
    values = invariants(flat, case).reshape(CHAINS, draws, -1)
    # The shared numpy log-likelihood must reproduce Stan's own generated log_lik.
    stan_gap = float(np.abs(values[..., -1] - post["log_lik"].values).max())
    summary = transducer.sampler_summary()
    return {
        "seconds": summary["sampling_seconds"],
        "cpu": cpu,
        "warmup": warmup,
        "draws": draws,
        "values": values,
        "divergences": summary["divergent"],
        "treedepth_hits": summary["max_treedepth_hits"],
        "stan_gap": stan_gap,
        "warnings": sorted({str(w.message).split(".")[0] for w in caught}),
        "prior": post.attrs["yieldwise_prior"],
        **diagnose(values),
    }


# Shorter runs than the default, tried first: JAGS is stopped at the first extension that
# meets the criteria, so Stan's time to the criteria is that of the shortest run that does.
SHORT_RUNS = ((150, 150), (250, 250))


def stan_until_met(case: Case, seed: int, max_draws: int) -> dict:
    """The default run (its rates are reported) and the time to the criteria.

    The time to the criteria is that of the first run in SHORT_RUNS, then the default,
    then the default with twice the draws (and so on), that meets them.
    """
    default = run_stan(case, seed, 750)
    runs = [run_stan(case, seed, d, warmup=w) for w, d in SHORT_RUNS]
    runs.append(default)
    while not runs[-1]["met"] and 2 * runs[-1]["draws"] <= max_draws:
        runs.append(run_stan(case, seed, 2 * runs[-1]["draws"]))
    out = dict(default)
    out["attempts"] = [(r["warmup"], r["draws"], r["seconds"], r["met"]) for r in runs]
    out["to_criteria"] = next((r["seconds"] for r in runs if r["met"]), None)
    return out


# ----------------------------------------------------------------------------- JAGS
def r_literal(value) -> str:
    """R source for a number, string, 1-D/2-D numpy array or dict (as a named list)."""
    if isinstance(value, dict):
        return "list(" + ", ".join(f"{k} = {r_literal(v)}" for k, v in value.items()) + ")"
    if isinstance(value, str):
        return f'"{value}"'
    a = np.asarray(value)
    cast = (lambda x: f"{int(x)}L") if a.dtype.kind in "iu" else (lambda x: repr(float(x)))
    body = "c(" + ", ".join(cast(x) for x in a.ravel(order="F")) + ")"
    if a.ndim == 2:  # R fills matrices column by column
        return f"structure({body}, .Dim = c({a.shape[0]}L, {a.shape[1]}L))"
    return body if a.ndim else cast(a)


def jags_inputs(case: Case, seed: int) -> tuple[dict, list[dict]]:
    """JAGS data (one row per item) and per-chain inits from yieldwise's own.

    The inits are the very starting points yieldwise gives Stan (same seed), mapped to
    the model scale; each item's indicator starts at its most probable component, and a
    binned item's latent output inside its bin.
    """
    data = case.data
    scalar = {
        k: float(np.asarray(data[k]).ravel()[0])
        for k in ("mu_loc", "mu_scale", "log_sigma_loc", "log_sigma_scale")
    }
    jdata = {
        "N": case.n,
        "K": K,
        "C": int(data["C"]),
        "cls": case.cls + 1,
        **scalar,
        "eta_scale": float(data["eta_scale"]),
        "conc": np.full(int(data["C"]), float(data["alpha_conc"])),
    }
    binned = case.kind == "votes"
    bounds = np.column_stack([case.lower, case.upper])
    finite = np.clip(bounds, -INFINITY_SENTINEL, INFINITY_SENTINEL)
    if binned:  # inside[i] = 1 means lim[i, 1] < latent y[i] <= lim[i, 2]
        jdata.update(lim=finite, inside=np.ones(case.n, dtype=np.int64))
        # a point strictly inside each bin; half a unit beyond the finite edge of an end bin
        latent = np.where(
            np.isinf(case.lower),
            case.upper - 0.5,
            np.where(np.isinf(case.upper), case.lower + 0.5, finite.mean(axis=1)),
        )
    else:
        jdata["y"] = case.lower
    inits = []
    for chain, start in enumerate(initial_values(data, CHAINS, seed)):
        mu = scalar["mu_loc"] + scalar["mu_scale"] * start["mu_raw"][:, 0]
        sigma = np.exp(
            scalar["log_sigma_loc"] + scalar["log_sigma_scale"] * start["sigma_raw"][:, 0]
        )
        w = np.exp(start["eta"]) / np.exp(start["eta"]).sum()
        joint = (
            np.log(w)
            + np.log(start["alpha"][:, case.cls]).T
            + log_kernel(case.lower[:, None], case.upper[:, None], mu, sigma)
        )
        init = {
            "eta": start["eta"],
            "mu": mu,
            "sigma": sigma,
            "alpha": start["alpha"],
            "z": joint.argmax(axis=1) + 1,
            ".RNG.name": "base::Mersenne-Twister",
            ".RNG.seed": np.int64(1000 * seed + chain + 1),
        }
        if binned:
            init["ylat"] = latent
        inits.append(init)
    return jdata, inits


class JagsChains:
    """The chains of one JAGS model, split over R worker processes that run in parallel."""

    def __init__(self, model: Path, jdata: dict, inits: list[dict], workers: int, workdir: Path):
        self.workdir = workdir
        self.procs = []
        for j, part in enumerate(np.array_split(np.arange(len(inits)), workers)):
            setup = workdir / f"setup{j}.R"
            setup.write_text(
                f"data <- {r_literal(jdata)}\n"
                f"inits <- list({', '.join(r_literal(inits[i]) for i in part)})\n"
            )
            self.procs.append(
                subprocess.Popen(
                    [
                        "Rscript",
                        str(JAGS_DIR / "worker.R"),
                        str(model),
                        str(setup),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        ready = [self._reply(p) for p in self.procs]
        self.compile_seconds = max(float(r[1]) for r in ready)
        self.samplers = ready[0][2]

    @staticmethod
    def _reply(proc) -> list[str]:
        words = proc.stdout.readline().split()
        if not words or words[0] not in ("ok", "ready"):
            raise RuntimeError(f"JAGS worker failed: {words}")
        return words

    def command(self, text: str) -> np.ndarray:
        """Run a command on every worker at once.

        Returns [wall seconds until all have finished, CPU seconds summed over workers].
        """
        started = time.perf_counter()
        for j, proc in enumerate(self.procs):
            proc.stdin.write(text.format(j=j) + "\n")
            proc.stdin.flush()
        cpu = sum(float(self._reply(proc)[2]) for proc in self.procs)
        return np.array([time.perf_counter() - started, cpu])

    def sample(self, n: int) -> tuple[np.ndarray, dict]:
        """n more iterations of every chain: ([wall, CPU] seconds, draws (chain * draw, ...))."""
        seconds = self.command(f"sample {n} 1 {self.workdir}/draws{{j}}.bin")
        parts = [self._read(self.workdir / f"draws{j}.bin") for j in range(len(self.procs))]
        return seconds, {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    @staticmethod
    def _read(path: Path) -> dict:
        """A worker's draws file: nodes named like ``alpha[3,2]``, stored column by column."""
        names = (path.parent / (path.name + ".names")).read_text().split()
        raw = np.fromfile(path).reshape(-1, len(names))  # (chain * draw, node)
        parsed = [re.fullmatch(r"(\w+)\[([\d,]+)\]", name).groups() for name in names]
        arrays = {}
        for base in dict.fromkeys(b for b, _ in parsed):
            cols = [j for j, (b, _) in enumerate(parsed) if b == base]
            idx = np.array([[int(i) - 1 for i in parsed[j][1].split(",")] for j in cols])
            arrays[base] = np.zeros((raw.shape[0], *(idx.max(axis=0) + 1)))
            arrays[base][(slice(None), *idx.T)] = raw[:, cols]
        return arrays

    def close(self) -> None:
        for proc in self.procs:
            proc.stdin.write("quit\n")
            proc.stdin.close()
            proc.wait()


def run_jags(case: Case, seed: int, args) -> dict:
    """Adapt, burn in, then sample in chunks until the criteria hold or the cap is hit."""
    jdata, inits = jags_inputs(case, seed)
    model = JAGS_DIR / ("transducer_binned.jags" if case.kind == "votes" else "transducer.jags")
    with tempfile.TemporaryDirectory() as tmp:
        jags = JagsChains(model, jdata, inits, args.jags_workers, Path(tmp))
        try:
            adapt = jags.command(f"adapt {args.adapt}")
            burn = jags.command(f"update {args.burnin}")
            sampling, chunks, history = np.zeros(2), [], []
            while True:
                seconds, draws = jags.sample(args.chunk)
                sampling += seconds
                chunks.append(invariants(draws, case).reshape(CHAINS, args.chunk, -1))
                diag = diagnose(np.concatenate(chunks, axis=1))
                total = adapt + burn + sampling  # [wall, CPU]
                history.append(
                    (total[0], args.chunk * len(chunks), diag["ess"].min(), diag["rhat"].max())
                )
                print(
                    f"  JAGS {history[-1][1]:>6} iterations, {total[0]:7.1f} s: min bulk ESS "
                    f"{history[-1][2]:7.1f}, max R-hat {history[-1][3]:.4f}",
                    file=sys.stderr,
                )
                if diag["met"] or total[0] >= args.jags_cap:
                    break
        finally:
            jags.close()
    return {
        "compile": jags.compile_seconds,
        "adapt": adapt[0],
        "burnin": burn[0],
        "sampling": sampling[0],
        "seconds": total[0],
        "cpu": total[1],
        "draws": args.chunk * len(chunks),
        "values": np.concatenate(chunks, axis=1),
        "samplers": jags.samplers,
        "history": history,
        "to_criteria": total[0] if diag["met"] else None,
        **diag,
    }


# --------------------------------------------------------------------------- report
def versions() -> dict:
    import arviz
    import httpstan

    import stan

    r = subprocess.run(
        [
            "Rscript",
            "-e",
            "suppressMessages(library(rjags)); cat(as.character("
            'jags.version()), as.character(packageVersion("rjags")), '
            'paste(R.version$major, R.version$minor, sep = "."))',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {
        "JAGS": r[0],
        "rjags": r[1],
        "R": r[2],
        "PyStan": stan.__version__,
        "httpstan": httpstan.__version__,
        "ArviZ": arviz.__version__,
        "numpy": np.__version__,
    }


def compare(kind: str, n: int, args) -> dict:
    case = make_case(kind, n, args.seed)
    # Other work on the machine would slow either sampler: the 1-minute load average is
    # recorded around each run (with the machine otherwise idle, about the core count).
    load = [os.getloadavg()[0]]
    print(f"# {case.label}: Stan (load average {load[0]:.2f})", file=sys.stderr)
    stan = stan_until_met(case, args.seed, args.stan_max_draws)
    fitted = json.loads(stan["prior"])
    if any(not np.array_equal(np.ravel(fitted[k]), np.ravel(case.data[k])) for k in PRIOR_KEYS):
        raise RuntimeError(f"the Stan fit used another prior than build_stan_data's: {fitted}")
    load.append(os.getloadavg()[0])
    print(f"# {case.label}: JAGS (load average {load[1]:.2f})", file=sys.stderr)
    jags = run_jags(case, args.seed, args)
    load.append(os.getloadavg()[0])
    return {
        "case": case,
        "rows": int(case.data["N"]),
        "stan": stan,
        "jags": jags,
        "prior": fitted,
        "load": load,
    }


def rates(run: dict) -> tuple[float, float, float]:
    """Bulk ESS per wall second (lowest of the 10 quantities; log-likelihood) and per CPU s."""
    ess = run["ess"]
    return ess.min() / run["seconds"], ess[-1] / run["seconds"], ess.min() / run["cpu"]


def fmt_time(seconds: float | None) -> str:
    return "not reached" if seconds is None else f"{seconds:,.1f} s"


def table(results: list[dict], args) -> str:
    head = (
        "| data | sampler | sampling wall time | CPU time | draws kept (4 chains) "
        "| min bulk ESS (all qty) | bulk ESS log-lik | min ESS/s | log-lik ESS/s "
        "| min ESS / CPU s | max R-hat | time to ESS >= 400 & R-hat <= 1.01 | divergences |"
        "\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in results:
        s, j = r["stan"], r["jags"]
        rows.append(
            f"| {r['case'].label} ({r['rows']} Stan rows) | Stan NUTS (yieldwise) "
            f"| {s['seconds']:.1f} s (500 warm-up + "
            f"{s['draws']} draws/chain) | {s['cpu']:.1f} s | {CHAINS * s['draws']:,} "
            f"| {s['ess'].min():.0f} | {s['ess'][-1]:.0f} | {rates(s)[0]:.1f} "
            f"| {rates(s)[1]:.1f} | {rates(s)[2]:.1f} | {s['rhat'].max():.4f} "
            f"| {fmt_time(s['to_criteria'])} "
            f"| {s['divergences']} ({s['treedepth_hits']} max tree depth hits) |"
        )
        rows.append(
            f"| {r['case'].label} | JAGS Gibbs | {j['seconds']:.1f} s ({j['adapt']:.1f} adapt "
            f"{args.adapt} + {j['burnin']:.1f} burn-in {args.burnin} + {j['sampling']:.1f} "
            f"sampling) | {j['cpu']:.1f} s | {CHAINS * j['draws']:,} | {j['ess'].min():.0f} "
            f"| {j['ess'][-1]:.0f} | {rates(j)[0]:.1f} | {rates(j)[1]:.1f} "
            f"| {rates(j)[2]:.1f} | {j['rhat'].max():.4f} "
            f"| {fmt_time(j['to_criteria'])} | n/a |"
        )
    return head + "\n".join(rows) + "\n"


def ratios(results: list[dict]) -> str:
    lines = []
    for r in results:
        s, j = r["stan"], r["jags"]
        (s_min, s_ll, s_cpu), (j_min, j_ll, j_cpu) = rates(s), rates(j)
        missed = [name for name, run in (("Stan", s), ("JAGS", j)) if run["to_criteria"] is None]
        to = (
            f"{' and '.join(missed)} did not reach the criteria within the runs allowed"
            if missed
            else f"time to criteria JAGS / Stan = {j['to_criteria'] / s['to_criteria']:.2f}"
        )
        gap = np.abs(s["values"].mean(axis=(0, 1))[:-1] - j["values"].mean(axis=(0, 1))[:-1])
        # JAGS's rate after burn-in alone: the most favourable reading for JAGS
        steady = s_min / (j["ess"].min() / j["sampling"])
        goal = "met" if s_min / j_min >= 10 else "not met"
        lines.append(
            f"* {r['case'].label}: bulk ESS per second, Stan / JAGS = {s_min / j_min:.2f} "
            f"(lowest of the {len(r['case'].names)} quantities; the goal of 10 is {goal}), "
            f"{s_ll / j_ll:.2f} "
            f"(log-likelihood), {s_cpu / j_cpu:.2f} (lowest, per CPU second), {steady:.2f} "
            f"(lowest, JAGS timed after burn-in only); {to}. Posterior means agree: largest "
            f"difference in p(1 | y) {gap.max():.4f}, mean log-likelihood "
            f"{s['values'][..., -1].mean():.2f} (Stan) vs {j['values'][..., -1].mean():.2f} "
            "(JAGS)."
        )
    return "\n".join(lines) + "\n"


def per_quantity(results: list[dict]) -> str:
    """Posterior mean, bulk ESS and R-hat of each quantity under both samplers."""
    head = (
        "| data | quantity | mean (Stan) | mean (JAGS) | bulk ESS (Stan) | bulk ESS (JAGS) "
        "| R-hat (Stan) | R-hat (JAGS) |\n|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in results:
        s, j = r["stan"], r["jags"]
        means = [run["values"].mean(axis=(0, 1)) for run in (s, j)]
        for q, name in enumerate(r["case"].names):
            rows.append(
                f"| {r['case'].label} | {name} | {means[0][q]:.4f} | {means[1][q]:.4f} "
                f"| {s['ess'][q]:.0f} | {j['ess'][q]:.0f} | {s['rhat'][q]:.4f} "
                f"| {j['rhat'][q]:.4f} |"
            )
    return head + "\n".join(rows) + "\n"


def details(results: list[dict]) -> str:
    lines = []
    for r in results:
        s, j = r["stan"], r["jags"]
        tries = ", ".join(
            f"{w} warm-up + {d} draws: {t:.1f} s ({'met' if m else 'not met'})"
            for w, d, t, m in s["attempts"]
        )
        lines.append(
            f"* {r['case'].label}: prior mu ~ N({r['prior']['mu_loc'][0]:.4f}, "
            f"{r['prior']['mu_scale'][0]:.4f}), log sigma ~ N({r['prior']['log_sigma_loc'][0]:.4f}"
            f", {r['prior']['log_sigma_scale'][0]:g}), eta ~ N(0, {r['prior']['eta_scale']:g}), "
            f"alpha ~ Dirichlet({r['prior']['alpha_conc']:g}). Stan runs: {tries}; "
            f"warnings: {'; '.join(s['warnings']) or 'none'}; numpy log-lik vs Stan's "
            f"log_lik: max |difference| {s['stan_gap']:.1e}. JAGS compile {j['compile']:.1f} s "
            f"(excluded); samplers {j['samplers']}; progress (s, iterations/chain, min ESS, "
            f"max R-hat): "
            + ", ".join(f"({t:.0f}, {i}, {e:.0f}, {h:.3f})" for t, i, e, h in j["history"])
            + ". 1-minute load average before Stan, between, after JAGS: "
            + ", ".join(f"{x:.2f}" for x in r["load"])
            + f" ({os.cpu_count()} = the sampler alone on every core)."
        )
    return "\n".join(lines) + "\n"


def section(results: list[dict], args, info: dict) -> str:
    cases = "; ".join(r["case"].label for r in results)
    versions_ = ", ".join(f"{k} {v}" for k, v in info.items())
    method = [
        f"Command: `python bench/bench_vs_jags.py --write` ({datetime.date.today()}, "
        f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}; {versions_}; "
        f"{cases}; seed {args.seed}).",
        f"Model: the same K = {K} mixture (stan/transducer.stan; bench/jags/transducer.jags and "
        "transducer_binned.jags, which make the component indicators explicit for Gibbs), "
        "hyper-parameters from yieldwise's `build_stan_data`, the same starting points.",
        "Data: *scores*, a continuous output, y | c ~ N(1.5 c, 1), P(c = 1) = 0.3; *votes*, "
        "a 200-tree forest's vote fractions (beta-binomial per class, 9 % positives), which "
        "yieldwise models on the logit scale as interval-censored at their resolution 1/200 "
        "and merges into one row per distinct (class, vote count). JAGS has no such "
        "merging: it keeps one latent output per item, censored to its bin (`dinterval`).",
        "Quantities: p1 = p(1 | output) at the outputs found at 9 evenly spaced quantiles "
        "of the items (5 % to 95 %; repeated vote counts once) and the log-likelihood, "
        "from each sampler's draws by the same numpy code; ArviZ bulk ESS and "
        "rank-normalised R-hat. ESS/s divides by the whole sampling time.",
        "Times exclude compilation. Stan's include its 500 warm-up iterations; JAGS's its "
        f"{args.adapt} adaptation and {args.burnin} burn-in iterations. Both run 4 chains on "
        f"all cores: httpstan's pool of one process per core, {args.jags_workers} R processes "
        f"for JAGS. JAGS is extended {args.chunk} iterations at a time (no thinning, cap "
        f"{args.jags_cap:.0f} s) and stopped at the first extension that meets the criteria; "
        "Stan's time to the criteria is that of the shortest of the runs 150 + 150, "
        "250 + 250, 500 + 750 (the default) and 500 + 1500 iterations per chain that meets "
        "them; its rates are those of the default run.",
        "JAGS updates alpha (Dirichlet), mu (normal) and the indicators exactly, eta and "
        "sigma by slice sampling: the logistic-normal weights and log-normal widths, chosen "
        "for HMC, have no conjugate update (Dirichlet weights and gamma precisions would, "
        "but that is another model).",
    ]
    return f"{SECTION}\n\n" + "\n".join(f"* {m}" for m in method) + "\n\n" + body(results, args)


def body(results: list[dict], args) -> str:
    """Summary table, ratios, per-quantity table and run details (printed and written)."""
    return (
        f"{table(results, args)}\n{ratios(results)}\nPer quantity:\n\n{per_quantity(results)}"
        f"\nDetails:\n\n{details(results)}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=lambda t: [int(n) for n in t.split(",")], default=[1000, 3600]
    )
    parser.add_argument(
        "--data",
        type=lambda t: t.split(","),
        default=["scores", "votes"],
        help="comma-separated: scores (continuous), votes (binned vote fractions)",
    )
    parser.add_argument("--seed", type=int, default=1, help="data, Stan and JAGS seed")
    parser.add_argument("--adapt", type=int, default=500, help="JAGS adaptation iterations")
    parser.add_argument("--burnin", type=int, default=500, help="JAGS burn-in iterations")
    parser.add_argument("--chunk", type=int, default=500, help="JAGS iterations per extension")
    parser.add_argument("--jags-cap", type=float, default=900.0, help="JAGS seconds per case")
    parser.add_argument("--jags-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--stan-max-draws", type=int, default=3000)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args(argv)
    info = versions()
    print(
        f"# bench_vs_jags {datetime.date.today()} | {os.cpu_count()} cores | "
        + " ".join(f"{k} {v}" for k, v in info.items())
    )
    started = time.perf_counter()
    results = [compare(kind, n, args) for kind in args.data for n in args.sizes]
    print(body(results, args))
    print(f"(whole benchmark: {time.perf_counter() - started:,.0f} s)")
    if args.write:
        write_section(SECTION, section(results, args, info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
