"""Fit the 10-class digits (probability vectors, D = 9) and measure cost and held-out quality.

The fits are of the centres model (``class_reduction=None``): since 2026-11-27 the default
reduces ten classes to ranks and margins, measured with ``bench/fit_one.py digits-ten N``
and the decision-quality real-data stage (docs/model.md, "Many classes").

    python bench/ten_classes.py [key=value ...]

Keys (defaults in brackets):

* ``share`` [the design's GP_VARIANCE_SHARE]: variance share the centres' Gaussian-process
  basis keeps (``none``: only the 1e-6 eigenvalue cutoff);
* ``per_dim`` [CENTRES_PER_DIM]: centres per output dimension; ``ell`` [GP_LENGTHSCALE_FACTOR]:
  the GP lengthscale as a multiple of the median nearest-centre distance; ``width``
  [CENTRES_WIDTH_FACTOR]: the kernels' sd as a multiple of the nearest-centre distance;
  ``slope`` [CENTRES_SLOPE_SCALE]: the prior sd of the log-odds' slopes; ``floor``
  [TAU_CLASS_FLOOR_CENTRES]: the soft floor under the log-odds' smoothing sd (0: none);
* ``chains``, ``warmup``, ``draws``, ``adapt_delta``, ``backend`` [the Transducer's
  defaults], ``seed`` [1]
  (``backend=laplace``: the Normal approximation, for a quick look at held-out quality);
* ``split`` [half]: ``half`` calibrates on a seeded half of ``yieldwise.datasets.
  load_digits_ten()`` (permutation seed 2026) and evaluates on the other half; ``all``
  calibrates on every item (no held-out figures);
* ``marginal`` [the design's MARGINAL_DENSITY]: 1 makes the density block all outputs'
  log-density (Stan data ``density_marginal``; docs/model.md, "The density block");
* ``whiten`` [the default: off for D >= 3]: 1 forces the conditional whitening of the
  smooth blocks, 0 turns it off (``yieldwise.transducer.stan_data.precondition(whiten=)``);
* ``mode`` [0]: 1 only prints the held-out accuracy and mean log score of the posterior
  mode (the Laplace backend's optimiser; predictions from the mode's weights), in seconds:
  a quick look at a design, not its posterior;
* ``profile`` [0]: 1 only prints the log density and the largest curvature along the
  flattest direction of the Laplace preconditioning, 1, 2 and 3 units either side of the
  mode (the preconditioned coordinate is standard Normal if the approximation holds);
* ``curvature`` [0]: 1 only runs one short chain (150 + 20 iterations) and prints, at five
  of its draws, the largest curvature of minus the log density in the sampler's
  coordinates and where the stiffest direction points (:func:`curvature`): what sets the
  step size;
* ``pilot`` [0]: ``R`` > 0 only moves the preconditioning to the mean and covariance of a
  pilot run's draws, ``R`` times, then samples 2 x (300 + 300) and prints the steps
  (:func:`pilot`): does a global covariance cure the step size?
* ``n`` [none]: calibrate on ``n`` items drawn with replacement (seed [2026, n]) from the
  calibration half (``split=half``) or from all items (``split=all``); duplicated items
  are merged into counted rows by the transducer, as any repeated output would be.

Prints the design (kernels K, smooth functions R, parameters U), the preconditioning time,
the numpy log density + gradient time at the mode (``TransducerDensity``, one core), the
Stan time per gradient (estimated from the wall time: the chains share the cores, and
warm-up iterations are taken to need as many leapfrog steps as the draws), leapfrog steps
per iteration, tree-depth hits, divergences, the largest R-hat and smallest bulk ESS of
the invariant quantities, the wall time, and on the held-out half: accuracy of the
maximum-expected-utility decision under the identity utility (the argmax of
``predict_proba``) against the raw argmax, the mean log score (log probability of the
true class) of both, and how close the transducer is to a nearest-centre rule
(:func:`nearest_centre`).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import warnings

import numpy as np
from _common import parse_value, worst_diagnostics

import yieldwise._design as design
import yieldwise.transducer.stan_data as stan_data
from yieldwise import Transducer
from yieldwise.datasets import load_digits_ten
from yieldwise.transducer.stan_data import preconditioning, unconstrained_values


def _mode_of(cal, cols, seed: int):
    """The calibration half's transform, Stan data (not preconditioned), kernel design,
    numpy density and Laplace fit (its mode and the Hessian there)."""
    from yieldwise.backends._laplace import TransducerDensity, laplace
    from yieldwise.transducer.stan_data import build_stan_data, initial_values
    from yieldwise.transforms import choose_transform

    y = cal[cols].to_numpy()
    transform = choose_transform(y, tuple(cols), "auto", "auto")
    lower, upper, censored = transform.intervals(y)
    data, kernels = build_stan_data(
        cal["label"].cat.codes.to_numpy(), lower, upper, censored, len(cols), seed=seed,
        preconditioned=False,
    )  # fmt: skip
    model = TransducerDensity(data)
    return transform, data, kernels, model, laplace(data, initial_values(data, 1, seed)[0], model)


def profile(cal, cols, seed: int) -> None:
    """The posterior along the flattest preconditioned direction, against the Normal."""
    _, data, _, model, fit = _mode_of(cal, cols, seed)
    scale = fit.scale  # columns: Hessian eigenvectors, flattest first
    direction = scale[:, 0]
    print(f"U {data['U']}; flattest direction: sd {np.linalg.norm(direction):.1f} in u")
    for t in (-3, -2, -1, 0, 1, 2, 3):
        u = fit.mode + t * direction
        lp, _ = model.log_density(u)
        curvature = scale.T @ -model.hessian(u) @ scale
        top = np.linalg.eigvalsh(0.5 * (curvature + curvature.T)).max()
        print(f"z {t:+d}: log density - mode {lp - fit.lp_mode:10.2f} (Normal {-t * t / 2:5.1f}), "
              f"largest curvature {top:8.1f} (Normal 1)", flush=True)  # fmt: skip


def program_scale(data) -> np.ndarray:
    """The program's S in ``u = u_centre + S z`` (the directions it applies; stan_data)."""
    u = int(data["U"])
    return (unconstrained_values(data, np.eye(u)) - np.asarray(data["u_centre"], float)).T


def _sampler_data(cal, cols, seed: int):
    """The sampler's own (preconditioned) Stan data for the calibration half, and a short
    run ``short_run(data, chains, warmup, draws)`` of the compiled program on any data."""
    from yieldwise.backends import get_backend, stan_file
    from yieldwise.transducer import SAMPLER_DEFAULTS
    from yieldwise.transducer.stan_data import build_stan_data, sampler_inits
    from yieldwise.transforms import choose_transform

    y = cal[cols].to_numpy()
    transform = choose_transform(y, tuple(cols), "auto", "auto")
    data, _ = build_stan_data(
        cal["label"].cat.codes.to_numpy(), *transform.intervals(y), len(cols), seed=seed
    )
    program = get_backend().compile(stan_file("transducer"))

    # the Transducer's own target acceptance rate for these dimensions (one set of defaults)
    adapt_delta = SAMPLER_DEFAULTS.adapt_delta_for(transform.model_dims)

    def short_run(values, chains, warmup, draws):
        return program.sample(
            values, chains=chains, warmup=warmup, draws=draws, seed=seed,
            adapt_delta=adapt_delta, init=sampler_inits(data, chains, seed), progress=False,
        )  # fmt: skip

    return data, short_run


def pilot(cal, cols, seed: int, rounds: int) -> None:
    """Does a preconditioner from pilot runs cut the steps? ``rounds`` times: two chains of
    150 + 250 iterations, then the centre and scale moved to their draws' mean and
    (Ledoit-Wolf) covariance in ``z``; then a final 2 x (300 + 300) run in those coordinates."""
    from sklearn.covariance import LedoitWolf

    data, short_run = _sampler_data(cal, cols, seed)
    values = data.as_dict()
    centre, scale = np.asarray(values["u_centre"], float), program_scale(values)
    for step in range(rounds + 1):
        last = step == rounds
        result = short_run(values, 2, 300 if last else 150, 300 if last else 250)
        z = result.draws["z"].reshape(-1, centre.size)
        stats = result.sample_stats
        sd = z.std(axis=0)
        sizes = np.unique(stats["step_size"]).round(4)
        print(f"{'final run' if last else f'pilot {step + 1}'}: steps/iteration "
              f"{np.mean(stats['n_steps']):.1f}, step size {sizes}, "
              f"divergent {int(np.sum(stats['diverging']))}, z sd min/median/max "
              f"{sd.min():.2f}/{np.median(sd):.2f}/{sd.max():.2f}", flush=True)  # fmt: skip
        if not last:
            cov = LedoitWolf().fit(z).covariance_
            centre = centre + scale @ z.mean(axis=0)
            # the new scale's covariance S cov S', as its eigenvectors and sds (every
            # direction applied)
            variances, vectors = np.linalg.eigh(scale @ cov @ scale.T)
            values = {**values, **preconditioning(centre, vectors, np.sqrt(variances), 0.0)}
            scale = program_scale(values)


def curvature(cal, cols, seed: int, warmup: int = 150, draws: int = 20) -> None:
    """What sets NUTS's step size: the curvature of -log p at posterior draws.

    A short one-chain run on the sampler's own (preconditioned) data; then at five of its
    draws the largest eigenvalues of minus the Hessian in the sampler's coordinates ``z``
    (``u = u_centre + S z``; 1 where the Laplace approximation holds), and for the
    stiffest direction its curvature in ``u`` at the draw and at the mode ``u_centre``, and
    the blocks of ``u`` it loads on.
    """
    from yieldwise.backends._laplace import TransducerDensity

    data, short_run = _sampler_data(cal, cols, seed)
    result = short_run(data.as_dict(), 1, warmup, draws)
    stats = result.sample_stats
    z = result.draws["z"][0]
    print(f"U {data['U']}; {warmup} + {draws} iterations: steps/iteration "
          f"{np.mean(stats['n_steps']):.1f}, step size {np.mean(stats['step_size']):.4f}; "
          f"|z| at the draws {np.linalg.norm(z, axis=1).min():.0f}-"
          f"{np.linalg.norm(z, axis=1).max():.0f} (standard Normal: about "
          f"{np.sqrt(z.shape[1]):.0f})")  # fmt: skip
    model = TransducerDensity(data.as_dict())
    centre, scale = np.asarray(data["u_centre"], float), program_scale(data)
    at_mode = -model.hessian(centre)
    for i in np.linspace(0, len(z) - 1, 5).astype(int):
        u = centre + scale @ z[i]
        hess = -model.hessian(u)
        values, vectors = np.linalg.eigh(scale.T @ (0.5 * (hess + hess.T)) @ scale)
        v = scale @ vectors[:, -1]
        v /= np.linalg.norm(v)
        loads = {name: float(np.sum(v[s] ** 2)) for name, s in model.slices.items()}
        shown = ", ".join(f"{name} {share:.2f}" for name, share in loads.items() if share > 0.02)
        print(f"draw {i}: largest curvature in z {values[-3:].round(0)}; the stiffest "
              f"direction's curvature in u: {v @ hess @ v:.2f} here, {v @ at_mode @ v:.3f} at "
              f"the mode; it loads on {shown}", flush=True)  # fmt: skip


def at_mode(cal, test, cols, seed: int) -> None:
    """Held-out accuracy and mean log score of the posterior mode's p(c | y)."""
    transform, data, kernels, model, fit = _mode_of(cal, cols, seed)
    theta = model.theta(fit.mode)
    beta = np.exp(theta - theta.max())
    held_out = transform.intervals(test[cols].to_numpy())
    kern, _ = design.kernel_matrix(kernels.loc, kernels.width, *held_out)
    proba = kern @ beta
    proba /= proba.sum(axis=1, keepdims=True)
    truth = test["label"].cat.codes.to_numpy()
    record = {
        "K": data["K"], "R": data["R"], "U": data["U"],
        "acc_mode": float((proba.argmax(axis=1) == truth).mean()),
        "logscore_mode": float(np.log(proba[np.arange(truth.size), truth]).mean()),
        "acc_raw": float((test[cols].to_numpy().argmax(axis=1) == truth).mean()),
    }  # fmt: skip
    print(json.dumps(record), flush=True)


def responsibilities(
    w: np.ndarray, loc: np.ndarray, width: np.ndarray, lower: np.ndarray, upper: np.ndarray,
    censored: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """(n, K) shares of each kernel in the mixture's density at each output, given as the
    model-scale ``(lower, upper, censored)`` of ``OutputTransform.intervals`` (``censored``
    per dimension): ``r_k(y)``
    proportional to ``w_k`` times the kernel's value, which the package's own
    :func:`yieldwise._design.kernel_matrix` computes (a bin's probability for a censored
    output), with the weights ``w`` (K,) and the fixed kernels ``loc``, ``width``."""
    kern, _ = design.kernel_matrix(loc, width, lower, upper, censored)
    r = w[None] * kern
    return r / r.sum(axis=1, keepdims=True)


def nearest_centre(
    t: Transducer, outputs: np.ndarray, proba: np.ndarray, truth: np.ndarray
) -> dict[str, float]:
    """How close the fitted transducer is to a nearest-centre rule on held-out ``outputs``,
    whose ``p(c | y)`` is ``proba``: the effective number of kernels per item
    (``1 / sum_k r_k^2`` of :func:`responsibilities` at the posterior-mean weights; median
    and 90 % quantile), the top kernel's share (median), the mean L1 distance between
    ``p(c | y)`` and the top kernel's posterior-mean class shares, and the accuracy of
    those shares' argmax."""
    post = t.posterior
    r = responsibilities(post.w.mean(axis=0), post.mu[0], post.sigma[0],
                         *t.transform_.intervals(outputs))  # fmt: skip
    effective = 1.0 / (r**2).sum(axis=1)
    shares = post.alpha.mean(axis=0)[r.argmax(axis=1)]
    return {
        "kernels_effective_median": float(np.median(effective)),
        "kernels_effective_q90": float(np.quantile(effective, 0.9)),
        "top_kernel_share_median": float(np.median(r.max(axis=1))),
        "l1_to_top_kernel_shares": float(np.abs(np.asarray(proba) - shares).sum(axis=1).mean()),
        "acc_top_kernel": float((shares.argmax(axis=1) == truth).mean()),
    }


def main(argv: list[str]) -> int:
    opts = {k: parse_value(v) for k, v in (a.split("=", 1) for a in argv)}
    if "share" in opts:
        design.GP_VARIANCE_SHARE = opts["share"]
    if "per_dim" in opts:
        design.CENTRES_PER_DIM = int(opts["per_dim"])
    if "ell" in opts:
        design.GP_LENGTHSCALE_FACTOR = float(opts["ell"])
    if "slope" in opts:
        design.CENTRES_SLOPE_SCALE = float(opts["slope"])
    if "floor" in opts:
        design.TAU_CLASS_FLOOR_CENTRES = float(opts["floor"])
    if "width" in opts:
        design.CENTRES_WIDTH_FACTOR = float(opts["width"])
    if "marginal" in opts:
        design.MARGINAL_DENSITY = int(opts["marginal"])
    frame = load_digits_ten()
    cols = [c for c in frame.columns if c.startswith("p_")]
    order = np.random.default_rng(2026).permutation(len(frame))
    split = opts.get("split", "half")
    if split == "half":
        cal, test = frame.iloc[order[: len(frame) // 2]], frame.iloc[order[len(frame) // 2 :]]
    else:
        cal, test = frame, None
    if opts.get("n") is not None:
        n = int(opts["n"])
        cal = cal.iloc[np.random.default_rng([2026, n]).integers(0, len(cal), n)]

    if opts.get("profile"):
        profile(cal, cols, int(opts.get("seed", 1)))
        return 0
    if opts.get("curvature"):
        curvature(cal, cols, int(opts.get("seed", 1)))
        return 0
    if opts.get("pilot"):
        pilot(cal, cols, int(opts.get("seed", 1)), int(opts["pilot"]))
        return 0
    if opts.get("mode"):
        if test is None:
            raise SystemExit("mode=1 needs held-out items: use split=half")
        at_mode(cal, test, cols, int(opts.get("seed", 1)))
        return 0
    record: dict[str, object] = {"options": dict(opts), "items": len(cal)}
    original = stan_data.precondition

    def timed(data, **kw):
        started = time.perf_counter()
        out = original(data, **kw)
        record["precondition_s"] = time.perf_counter() - started
        from yieldwise.backends._laplace import TransducerDensity

        model = TransducerDensity(out)
        u = np.asarray(out["u_centre"], float)
        model.log_density(u)
        started = time.perf_counter()
        reps = 20
        for _ in range(reps):
            model.log_density(u)
        record["numpy_gradient_ms"] = 1e3 * (time.perf_counter() - started) / reps
        record.update(N=out["N"], K=out["K"], R=out["R"], U=out["U"])
        print(
            f"design: rows N {out['N']}, kernels K {out['K']}, smooth R {out['R']}, parameters "
            f"U {out['U']}; precondition {record['precondition_s']:.1f} s; numpy density + "
            f"gradient {record['numpy_gradient_ms']:.2f} ms",
            flush=True,
        )
        return out

    if "whiten" in opts:
        original = functools.partial(original, whiten=bool(opts["whiten"]))
    stan_data.precondition = timed
    settings = {k: int(opts[k]) for k in ("chains", "warmup", "draws") if k in opts}
    if "adapt_delta" in opts:
        settings["adapt_delta"] = float(opts["adapt_delta"])
    if "backend" in opts:
        settings["backend"] = opts["backend"]
    started = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        # the centres model this bench measures (the default reduces ten classes to ranks)
        t = Transducer(seed=int(opts.get("seed", 1)), progress=False, class_reduction=None,
                       **settings)  # fmt: skip
        t.fit(cal[cols], cal["label"])
    record["wall_s"] = time.perf_counter() - started
    info, diag, stats = t.sampler_summary(), t.diagnostics(), t.posterior_.sample_stats
    worst = worst_diagnostics(diag)  # None where not finite (JSON has no NaN)
    steps = np.asarray(stats.n_steps)
    record.update(
        sampling_s=info["sampling_seconds"], divergent=int(info["divergent"]),
        treedepth_hits=int(info["max_treedepth_hits"]), steps_per_iter=float(steps.mean()),
        step_size=float(np.asarray(stats.step_size).mean()),
        rhat_max=worst["max_rhat"], ess_bulk_min=worst["min_ess_bulk"],
        rhat_log_lik=float(diag.loc[diag["quantity"] == "log_lik", "r_hat"].max()),
    )  # fmt: skip
    # Stan's time per gradient, estimated: the chains share min(chains, cores) cores and
    # warm-up iterations are taken to cost as many leapfrog steps as the draws'
    # the warm-up that ran (the default depends on the output dimensions)
    chains, iters = steps.shape[0], int(info["warmup"]) + int(info["draws"])
    cores = min(chains, os.cpu_count() or 1)
    record["stan_gradient_ms_est"] = float(
        1e3 * info["sampling_seconds"] * cores / (chains * iters * steps.mean())
    )
    if test is not None:
        truth = test["label"].cat.codes.to_numpy()
        raw = test[cols].to_numpy()
        proba = t.predict_proba(test[cols])
        rows = np.arange(len(truth))
        record.update(
            test_items=len(truth),
            acc_transducer=float((proba.argmax(axis=1) == truth).mean()),
            acc_raw=float((raw.argmax(axis=1) == truth).mean()),
            logscore_transducer=float(np.log(proba[rows, truth]).mean()),
            logscore_raw=float(np.log(raw[rows, truth]).mean()),
            **nearest_centre(t, test[cols].to_numpy(float), proba, truth),
        )  # fmt: skip
    print(json.dumps(record, default=float), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
