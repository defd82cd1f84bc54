"""Probe priors that let the class log-odds bend sharply: the non-monotone problem's valley.

    python bench/kink_probe.py PROBLEM N [--reps 1] [--variant t] [--scale 1] [--nu 1]
                               [--inner 0.05]

Why: on the panel's non-monotone problem the true log-odds fall into a valley about 0.3
wide around y = 0 (p(1 | y) 0.0004-0.009 where the shipped model's posterior mean is
0.010-0.024), and the 95 % bands miss there at every n (docs/model.md, "Sharp valleys").
The second-order random walk cannot make the valley without raising its smoothness scale
everywhere.

What it does: fits the panel problem's coverage-study calibration sets (the samples and
seeds of bench/coverage.py, repetitions ``0 .. reps-1``) with the shipped program plus
*hinge* terms on the class log-odds (1-D outputs, two classes), and prints, beside the
shipped model's record for the same set in bench/results/coverage.json, the band and
long-run-interval hits at 50 / 75 / 95 %, the posterior means at the nine outputs, and
the sampler's health. The variant programs are written from stan/transducer.stan at run
time (each edit is checked), so they follow the shipped program:

* ``t``: ``f_c += sum_j kink[j, c] * |u - u_j|`` over the interior grid nodes ``u_j``
  (grid coordinate u in [0, 1]) with ``kink ~ student_t(nu, 0, scale)``, centred;
* ``t-noncentred``: the same prior as a scale mixture, ``kink = scale * z * sqrt(lam)``,
  ``z ~ N(0, 1)``, ``lam ~ InvGamma(nu / 2, nu / 2)``;
* ``moving``: one smooth hinge per class, ``kink * sqrt((u - at)^2 + eps^2)`` with
  ``kink ~ N(0, scale)`` and ``at`` uniform over the data's range, ``eps`` half a spacing.

``--inner q`` keeps hinges (or ``at``) between the data's q and 1 - q quantiles. Used for
docs/model.md, "Sharp valleys: hinges measured, not adopted"; not part of the package.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load_coverage_study
from _problems import PANEL

import yieldwise.backends as backends
import yieldwise.transducer.stan_data as stan_data

cov = load_coverage_study()

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "stan" / "transducer.stan"
DATA_END = "  matrix[M, J * (C - 1)] white_l_kappa;\n}"
PARAMS = "parameters {\n  vector[U] z;\n}"
# theta is computed in the model block and again in generated quantities: the hinge terms
# are added after both (EXPECTED counts the anchors that must be found)
THETA = (
    "matrix[K, C] theta = theta_of(u, tilde, fixed_basis, smooth_a, smooth_f, odds,\n"
    "                                   density_marginal);"
)
EXPECTED = {THETA: 2}
MODEL = "model {\n"
HINGE_DATA = (
    "  int<lower=0> n_hinge;\n  matrix[K, n_hinge] hinge;\n  real<lower=0> kink_scale;\n"
    "  real<lower=0> kink_nu;\n  real kink_lo;\n  real kink_hi;\n  real<lower=0> kink_eps;\n}"
)
# the amplitude's terms in theta (model block and generated quantities) and its prior
AMPLITUDE_EDITS = [
    (THETA, THETA + " for (c in 1:C1) { theta[:, c + 1] += (exp(amp_basis * amp_raw[:, c])"
                    " - 1) .* (smooth_f[c] * tilde[:, c + 1]); }"),
    (MODEL, MODEL + "  to_vector(amp_raw) ~ std_normal();\n"),
]  # fmt: skip
EDITS = {
    "t": [
        (DATA_END, DATA_END[:-1] + HINGE_DATA),
        (PARAMS, PARAMS[:-1] + "  matrix[n_hinge, C - 1] kink;\n}"),
        (THETA, THETA + " theta[:, 2:C] += hinge * kink;"),
        (MODEL, MODEL + "  to_vector(kink) ~ student_t(kink_nu, 0, kink_scale);\n"),
    ],
    "t-noncentred": [
        (DATA_END, DATA_END[:-1] + HINGE_DATA),
        (PARAMS, PARAMS[:-1] + "  matrix[n_hinge, C - 1] kink_z;\n"
                               "  matrix<lower=0>[n_hinge, C - 1] kink_lam;\n}"),
        (THETA, THETA + " theta[:, 2:C] += hinge * (kink_scale * kink_z .* sqrt(kink_lam));"),
        (MODEL, MODEL + "  to_vector(kink_z) ~ std_normal();\n"
                        "  to_vector(kink_lam) ~ inv_gamma(0.5 * kink_nu, 0.5 * kink_nu);\n"),
    ],
    "moving": [
        (DATA_END, DATA_END[:-1] + HINGE_DATA),
        (PARAMS, PARAMS[:-1] + "  vector[C - 1] kink;\n"
                               "  vector<lower=kink_lo, upper=kink_hi>[C - 1] kink_at;\n}"),
        (THETA, THETA + " for (c in 1:C1) { theta[:, c + 1] += kink[c] * sqrt("
                        "square(hinge[:, 1] - kink_at[c]) + square(kink_eps)); }"),
        (MODEL, MODEL + "  kink ~ normal(0, kink_scale);\n"),
    ],
    # not a hinge: the log-odds' smooth part times a smooth amplitude exp(amp_basis *
    # amp_raw), amp_raw ~ N(0, 1), the basis's columns bumps along the grid with the
    # constant projected out (so the global tau_f keeps its meaning) and scaled so that
    # the log amplitude's prior sd at each kernel is about --scale: a smoothness that may
    # vary along the grid (docs/model.md, "Votes at n = 300", the candidates' list)
    "amplitude": [
        (DATA_END, DATA_END[:-1] + "  int<lower=0> n_amp;\n  matrix[K, n_amp] amp_basis;\n}"),
        (PARAMS, PARAMS[:-1] + "  matrix[n_amp, C - 1] amp_raw;\n}"),
        *AMPLITUDE_EDITS,
    ],
    # the same amplitude with (u, h) preconditioned together: the sampler moves zz with
    # (u, h) = pc_centre + pc_scale * zz, the joint mode and the Cholesky factor of the
    # inverse Hessian there (amplitude_preconditioning; the shipped preconditioning is set
    # to the identity, its conditional whitening kept)
    "amplitude-pc": [
        (DATA_END, DATA_END[:-1] + "  int<lower=0> n_amp;\n  matrix[K, n_amp] amp_basis;\n"
                   "  int<lower=1> pc_n;\n  vector[pc_n] pc_centre;\n"
                   "  matrix[pc_n, pc_n] pc_scale;\n}"),
        (PARAMS, "parameters {\n  vector[pc_n] zz;\n}\ntransformed parameters {\n"
                 "  vector[U] z;\n  matrix[n_amp, C - 1] amp_raw;\n  {\n"
                 "    vector[pc_n] x = pc_centre + pc_scale * zz;\n    z = x[1:U];\n"
                 "    amp_raw = to_matrix(x[(U + 1):pc_n], n_amp, C - 1);\n  }\n}"),
        *AMPLITUDE_EDITS,
    ],
    # local smoothing scales (two classes): f += sum_j B_j Q_j t_j, t_j ~ N(0, tau_j^2 I),
    # B_j the random walk's smoothest functions times bump j, each block conditionally
    # whitened as tau_f's is (stan/transducer.stan, "Conditional whitening"; lambda, kappa
    # and Q from the likelihood at the shipped mode: local_scales_data),
    # tau_j ~ N+(0, --scale)
    "local-scales": [
        (DATA_END, DATA_END[:-1] + "  int<lower=0> n_loc;\n  int<lower=0> m_loc;\n"
                   "  matrix[K, n_loc * m_loc] loc_basis;\n"
                   "  matrix<lower=0>[m_loc, n_loc] loc_lambda;\n"
                   "  matrix[m_loc, n_loc] loc_kappa;\n  real<lower=0> loc_scale;\n}"),
        (PARAMS, PARAMS[:-1] + "  matrix[m_loc, n_loc] loc_e;\n  vector[n_loc] loc_log_tau;\n}"),
        (THETA, THETA + " theta[:, 2] += loc_basis * to_vector(whitened(loc_e, loc_log_tau',"
                        " loc_lambda, loc_kappa));"),
        (MODEL, MODEL + "  {\n    matrix[m_loc, n_loc] loc_t = whitened_lp(loc_e, loc_log_tau',"
                        " loc_lambda, loc_kappa);\n  }\n"
                        "  exp(loc_log_tau) ~ normal(0, loc_scale);\n"
                        "  target += sum(loc_log_tau);\n"),
    ],
}  # fmt: skip


def variant_program(variant: str, directory: Path) -> Path:
    """Write the variant of stan/transducer.stan; fail loudly if an edit no longer applies."""
    code = BASE.read_text()
    for old, new in EDITS[variant]:
        if code.count(old) != EXPECTED.get(old, 1):
            raise RuntimeError(
                f"stan/transducer.stan changed: the {variant!r} edit expects {old!r} "
                f"exactly {EXPECTED.get(old, 1)} time(s)"
            )
        code = code.replace(old, new)
    path = directory / f"transducer_kink_{variant.replace('-', '_')}.stan"
    path.write_text(code)
    return path


#: bumps along the grid of the amplitude and local-scales variants (``--bumps``)
AMP_BUMPS = 7


def bumps_at(u: np.ndarray, at: np.ndarray) -> np.ndarray:
    """(K, len(at)) Gaussian bumps over the grid coordinate ``u`` centred at ``at`` (even
    points), each of sd their spacing."""
    return np.exp(-0.5 * ((u[:, None] - at[None]) / (at[1] - at[0])) ** 2)


def amplitude_basis(
    u: np.ndarray, bumps: int, scale: float, lo: float = 0.0, hi: float = 1.0
) -> np.ndarray:
    """(K, bumps) Gaussian bumps at even points of [lo, hi] (sd their spacing) with each
    column's mean over the kernels removed (a combination of them has mean 0: the constant
    is left to tau_f), scaled so that the mean prior variance per kernel of ``basis @ h``,
    ``h ~ N(0, I)``, is ``scale^2``."""
    basis = bumps_at(u, np.linspace(lo, hi, bumps))
    basis -= basis.mean(axis=0)
    return basis * scale / np.sqrt(np.mean(np.sum(basis**2, axis=1)))


def amplitude_preconditioning(d: dict) -> dict:
    """The ``amplitude-pc`` fields: the shipped preconditioning replaced by the identity
    (``z = u``, the conditional whitening kept), and (u, h) preconditioned together by the
    joint posterior mode (from the shipped mode and h = 0, L-BFGS on PyStan's log density)
    and the Cholesky factor of the inverse Hessian there (central differences of the
    gradient, eigenvalues floored at 1e-8: :func:`mode_preconditioning`)."""
    import stan

    u_mode = np.asarray(d["u_centre"], float).copy()
    big_u = int(d["U"])
    n = big_u + int(d["n_amp"]) * (int(d["C"]) - 1)
    d.update(u_centre=np.zeros(big_u), u_rank=0, u_axes=np.ones(big_u),
             u_left=np.zeros((big_u, 0)), u_right=np.zeros((big_u, 0)),
             pc_n=n, pc_centre=np.zeros(n), pc_scale=np.eye(n))  # fmt: skip
    code = variant_program("amplitude-pc", Path(tempfile.mkdtemp())).read_text()
    posterior = stan.build(code, data=dict(d))

    def negative(x):
        return -posterior.log_prob(list(x)), -np.asarray(posterior.grad_log_prob(list(x)))

    start = np.concatenate([u_mode, np.zeros(n - big_u)])
    mode, scale, found, values = mode_preconditioning(negative, start)
    print(f"  joint mode: {found.nit} iterations, |gradient| {np.abs(found.jac).max():.1e}; "
          f"h at the mode {np.round(mode[big_u:], 2)}; Hessian eigenvalues "
          f"{values.min():.2g} to {values.max():.2g}")  # fmt: skip
    return {"pc_centre": mode, "pc_scale": scale}


def mode_preconditioning(negative, start: np.ndarray, step: float = 1e-4, floor: float = 1e-8):
    """The mode of a log density and the Cholesky factor of the inverse of its Hessian there:
    ``negative(x)`` returns minus the log density and minus its gradient; the mode by
    L-BFGS from ``start``, the Hessian by central differences of the gradient (step
    ``step``), symmetrised, its eigenvalues floored at ``floor``. Returns the mode, the
    factor ``L`` (``L L'`` the inverse Hessian), scipy's result and the eigenvalues."""
    from scipy.optimize import minimize

    found = minimize(negative, start, jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    mode, n = found.x, len(start)
    hess = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = step
        hess[i] = (negative(mode + e)[1] - negative(mode - e)[1]) / (2 * step)
    values, vectors = np.linalg.eigh((hess + hess.T) / 2)
    cov = vectors @ np.diag(1 / np.maximum(values, floor)) @ vectors.T
    return mode, np.linalg.cholesky(cov), found, values


#: functions per local block of the local-scales variant (the random walk's smoothest)
LOCAL_FUNCTIONS = 8


def local_scales_data(data, u: np.ndarray, bumps: int, functions: int, scale: float) -> dict:
    """The ``local-scales`` fields. Block j's functions are the ``functions`` smoothest of
    the random walk's basis (largest norm: the basis is scaled by the inverse square roots
    of the penalty's eigenvalues) times a Gaussian bump at the j-th of ``bumps`` even points
    of the grid (sd their spacing), scaled so that the block's prior sd at its largest is
    tau_j (the random walk's own functions are small: 0.02-0.09 per unit of tau at a
    kernel). Its whitening: the eigenvectors Q and eigenvalues lambda
    of the log-likelihood's curvature in the block's coefficients, ``B_j' (-H) B_j`` with H
    the Hessian of the log-likelihood in class 2's log-odds at the kernels, and its
    gradient there rotated, kappa = Q' B_j' g; all at the shipped posterior mode (the local
    blocks are 0 there)."""
    from yieldwise.backends._laplace import TransducerDensity

    theta = TransducerDensity(data).theta(np.asarray(data.u_centre, float))
    kern, cls, cnt = np.asarray(data.kern), np.asarray(data.cls) - 1, np.asarray(data.count)
    mine = cls == 1

    def gradient(f2: np.ndarray) -> np.ndarray:
        e = np.exp(theta - theta.max())
        e[:, 1] = np.exp(f2 - theta.max())
        rows = kern[mine] * e[:, 1]
        share = rows / rows.sum(axis=1, keepdims=True)
        return cnt[mine] @ share - cnt.sum() * e[:, 1] / e.sum()

    g = gradient(theta[:, 1])
    k = theta.shape[0]
    hess = np.empty((k, k))
    for i in range(k):
        step = np.zeros(k)
        step[i] = 1e-5
        hess[i] = (gradient(theta[:, 1] + step) - gradient(theta[:, 1] - step)) / 2e-5
    hess = (hess + hess.T) / 2
    smooth = np.asarray(data.smooth_basis)
    smooth = smooth[:, np.argsort(-np.linalg.norm(smooth, axis=0))[:functions]]
    blocks, lam, kappa = [], [], []
    for bump in bumps_at(u, np.linspace(0, 1, bumps)).T:
        b = bump[:, None] * smooth
        b /= np.sqrt(np.max(np.sum(b**2, axis=1)))  # prior sd tau_j at the bump's peak
        values, q = np.linalg.eigh(b.T @ (-hess) @ b)
        blocks.append(b @ q)
        lam.append(np.maximum(values, 0.0))
        kappa.append(q.T @ (b.T @ g))
    return {"n_loc": bumps, "m_loc": functions, "loc_basis": np.hstack(blocks),
            "loc_lambda": np.column_stack(lam), "loc_kappa": np.column_stack(kappa),
            "loc_scale": scale}  # fmt: skip


def joint_inits(data, chains, seed=None):
    """``amplitude-pc`` chains start at draws of the joint Normal approximation."""
    rng = np.random.default_rng(seed)
    return [{"zz": rng.standard_normal(int(data["pc_n"]))} for _ in range(int(chains))]


class _Data(dict):
    """The shipped StanData's mapping plus the hinge fields (Stan reads the dict)."""

    def as_dict(self) -> dict:
        return dict(self)

    def __getattr__(self, name: str):  # the estimator reads fields as attributes
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def hinge_builder(variant: str, scale: float, nu: float, inner: float, bumps: int = AMP_BUMPS):
    original = stan_data.build_stan_data

    def build(*args, **kwargs):
        data, design = original(*args, **kwargs)
        d = _Data(data.as_dict())
        loc = np.asarray(d["loc"], float)
        if loc.shape[1] != 1 or int(d["C"]) != 2:
            raise SystemExit("kink_probe handles 1-D outputs of two classes only")
        loc = loc[:, 0]
        u = (loc - loc.min()) / (loc.max() - loc.min())
        lo, hi = np.asarray(d["y_lower"])[:, 0], np.asarray(d["y_upper"])[:, 0]
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2,
                       np.where(np.isfinite(lo), lo, hi))  # fmt: skip
        order = np.argsort(mid)
        cum = np.cumsum(np.asarray(d["count"])[order]) / np.sum(d["count"])
        q_lo = mid[order][np.searchsorted(cum, inner)]
        q_hi = mid[order][min(np.searchsorted(cum, 1 - inner), cum.size - 1)]
        nodes = [j for j in range(1, u.size - 1) if q_lo <= loc[j] <= q_hi]
        span = loc.max() - loc.min()
        if variant == "local-scales":
            d.update(local_scales_data(data, u, bumps, LOCAL_FUNCTIONS, scale))
            print(
                f"  local scales: {bumps} bumps x {LOCAL_FUNCTIONS} functions, "
                f"tau_j ~ N+(0, {scale}); lambda {np.round(d['loc_lambda'].max(0), 1)}"
            )
            return d, design
        if variant.startswith("amplitude"):  # bumps between the data's inner quantiles (--inner)
            lo_u = float(max((q_lo - loc.min()) / span, 0.0)) if inner > 0 else 0.0
            hi_u = float(min((q_hi - loc.min()) / span, 1.0)) if inner > 0 else 1.0
            d["n_amp"] = bumps
            d["amp_basis"] = amplitude_basis(u, bumps, scale, lo_u, hi_u)
            print(
                f"  amplitude: {bumps} bumps on [{lo_u:.2f}, {hi_u:.2f}] of the grid, "
                f"log-amplitude prior sd {scale}"
            )
            if variant == "amplitude-pc":
                d.update(amplitude_preconditioning(d))
            return d, design
        if variant == "moving":
            d["n_hinge"], d["hinge"] = 1, u[:, None]
        else:
            d["n_hinge"], d["hinge"] = len(nodes), np.abs(u[:, None] - u[None, nodes])
        d.update(
            kink_scale=scale, kink_nu=nu, kink_eps=0.5 / (u.size - 1),
            kink_lo=float(max((q_lo - loc.min()) / span, 0.0)),
            kink_hi=float(min((q_hi - loc.min()) / span, 1.0)),
        )  # fmt: skip
        print(f"  hinges: {d['n_hinge']} ({len(nodes)} grid nodes inside the data's range)")
        return d, design

    return build


def counts(record: dict) -> str:
    bands = [cov.band_counts(record, p, True)[0] for p in cov.PROBS]
    checks = cov.band_counts(record, 0.5, True)[1]
    runs = [cov.interval_counts(record, p)[0] for p in cov.PROBS]
    means = " ".join(f"{m[-1]:.4f}" for m in record["bands"]["mean"])
    return (f"bands {bands}/{checks}, long-run {runs}/{cov.interval_counts(record, 0.5)[1]}, "
            f"means {means}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem", choices=[make().name for make in PANEL])
    parser.add_argument("n", type=int)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--variant", choices=sorted(EDITS), default="t")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--nu", type=float, default=1.0)
    parser.add_argument("--inner", type=float, default=0.05)
    parser.add_argument("--bumps", type=int, default=AMP_BUMPS,
                        help="amplitude and local-scales variants (local scales over the "
                             "whole grid, whatever --inner)")  # fmt: skip
    parser.add_argument("--first-rep", type=int, default=0)
    parser.add_argument("--results", type=Path, default=None,
                        help="also keep the fits in this coverage-study file (resumed), for "
                             "`coverage.py --compare`")  # fmt: skip
    parser.add_argument("--seed", type=int, default=2026, help="the coverage study's seed")
    args = parser.parse_args(argv)
    index = [make().name for make in PANEL].index(args.problem)
    problem = PANEL[index]()
    shipped = {}
    if cov.RESULTS.exists():
        shipped = json.loads(cov.RESULTS.read_text())["fits"]
    with tempfile.TemporaryDirectory() as tmp:
        program = variant_program(args.variant, Path(tmp))
        stan_data.build_stan_data = hinge_builder(
            args.variant, args.scale, args.nu, args.inner, args.bumps
        )
        if args.variant == "amplitude-pc":
            stan_data.sampler_inits = joint_inits
        backends.stan_file = lambda name: program
        results = None
        if args.results is not None:
            exists = args.results.exists()
            results = cov.load_results(args.results) if exists else cov.new_results(args.seed)
        for rep in range(args.first_rep, args.first_rep + args.reps):
            key = f"{args.problem}|{args.n}|{rep}"
            if results is not None and key in results["fits"]:
                continue
            started = time.perf_counter()
            record = cov.run_fit(problem, index, args.n, rep, args.seed)
            if results is not None:
                results["fits"][key] = record
                cov.save_results(results, args.results)
            s = record["sampler"]
            print(f"{args.problem} n={args.n} rep {rep} ({args.variant}, scale {args.scale}, "
                  f"nu {args.nu}, inner {args.inner}): {time.perf_counter() - started:.0f} s, "
                  f"{s['divergent']} divergent, {s['treedepth']} tree-depth hits, "
                  f"R-hat {s['max_rhat']:.3f}, bulk ESS {s['min_ess_bulk']:.0f}")  # fmt: skip
            print(f"  kinks:   {counts(record)}")
            base = shipped.get(f"{args.problem}|{args.n}|{rep}")
            if base is not None:
                print(f"  shipped: {counts(base)}")
            truth = " ".join(f"{t[-1]:.4f}" for t in record["bands"]["truth"])
            print(f"  truth:   {truth}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
