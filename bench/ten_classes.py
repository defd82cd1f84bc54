"""Fit the 10-class digits (probability vectors, D = 9) and measure cost and held-out quality.

    python bench/ten_classes.py [key=value ...]

Keys (defaults in brackets):

* ``share`` [the design's GP_VARIANCE_SHARE]: variance share the centres' Gaussian-process
  basis keeps (``none``: only the 1e-6 eigenvalue cutoff);
* ``per_dim`` [CENTRES_PER_DIM]: centres per output dimension; ``ell`` [GP_LENGTHSCALE_FACTOR]:
  the GP lengthscale as a multiple of the median nearest-centre distance; ``width``
  [CENTRES_WIDTH_FACTOR]: the kernels' sd as a multiple of the nearest-centre distance;
  ``slope`` [CENTRES_SLOPE_SCALE]: the prior sd of the log-odds' slopes;
* ``chains``, ``warmup``, ``draws``, ``backend`` [the Transducer's defaults], ``seed`` [1]
  (``backend=laplace``: the Normal approximation, for a quick look at held-out quality);
* ``split`` [half]: ``half`` calibrates on a seeded half of ``yieldwise.datasets.
  load_digits_ten()`` (permutation seed 2026) and evaluates on the other half; ``all``
  calibrates on every item (no held-out figures);
* ``whiten`` [the default: off for D >= 3]: 1 forces the conditional whitening of the
  smooth blocks, 0 turns it off (``yieldwise.transducer.stan_data.precondition(whiten=)``);
* ``mode`` [0]: 1 only prints the held-out accuracy and mean log score of the posterior
  mode (the Laplace backend's optimiser; predictions from the mode's weights), in seconds:
  a quick look at a design, not its posterior;
* ``profile`` [0]: 1 only prints the log density and the largest curvature along the
  flattest direction of the Laplace preconditioning, 1, 2 and 3 units either side of the
  mode (the preconditioned coordinate is standard Normal if the approximation holds);
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
``predict_proba``) against the raw argmax, and the mean log score (log probability of the
true class) of both.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import warnings

import numpy as np
from _common import parse_value

import yieldwise._design as design
import yieldwise.transducer.stan_data as stan_data
from yieldwise import Transducer
from yieldwise.datasets import load_digits_ten


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
    if "width" in opts:
        design.CENTRES_WIDTH_FACTOR = float(opts["width"])
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
    if "backend" in opts:
        settings["backend"] = opts["backend"]
    started = time.perf_counter()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        t = Transducer(seed=int(opts.get("seed", 1)), progress=False, **settings)
        t.fit(cal[cols], cal["label"])
    record["wall_s"] = time.perf_counter() - started
    info, diag, stats = t.sampler_summary(), t.diagnostics(), t.posterior_.sample_stats
    steps = np.asarray(stats.n_steps)
    record.update(
        sampling_s=info["sampling_seconds"], divergent=int(info["divergent"]),
        treedepth_hits=int(info["max_treedepth_hits"]), steps_per_iter=float(steps.mean()),
        step_size=float(np.asarray(stats.step_size).mean()),
        rhat_max=float(diag.r_hat.max()), ess_bulk_min=float(diag.ess_bulk.min()),
    )  # fmt: skip
    # Stan's time per gradient, estimated: the chains share min(chains, cores) cores and
    # warm-up iterations are taken to cost as many leapfrog steps as the draws'
    chains, iters = steps.shape[0], int(t.warmup) + int(t.draws)
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
        )  # fmt: skip
    print(json.dumps(record, default=float), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
