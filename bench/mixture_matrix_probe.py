"""The ten-class reduction's mixture over the margin tilted by one class matrix, sampled
by NUTS on the coverage study's softmax-10 sets (run by hand; docs/model.md, "Many
classes", "The mixture tilted by one class matrix").

    .venv/bin/python bench/mixture_matrix_probe.py N REPS [FIRST_REP [SD_Q_SCALE [LOCAL_DF]]]
    .venv/bin/python bench/mixture_matrix_probe.py 1000 20
    .venv/bin/python bench/mixture_matrix_probe.py digits [SPLITS [SD_Q_SCALE [LOCAL_DF]]]

``SD_Q_SCALE``: the class terms' scale prior, ``sd_q ~ half-Normal(0, SD_Q_SCALE)`` (1 unless
given). ``LOCAL_DF``: 0 (unless given) for one scale shared by the class terms; ``nu > 0``
for a local scale per term, ``Q = Q_raw * lam``, ``lam ~ half-Student-t(nu, 0, 1)`` (1: the
horseshoe, ``sd_q`` its global scale).

A probe of a model not built. bench/matrix_probe.py showed that one class matrix ``Q``
(matrix scaling, its scale learnt), with six Gaussian bumps for the top class's margin,
takes the bands at the study's decision outputs close to nominal under NUTS; this probe
puts the transducer's own nonparametric part in place of the bumps: the reduced problem
of rank and margin (yieldwise/transducer/reduction.py) with its kernels, smooth bases and
priors exactly as the shipped fit builds them (``build_stan_data`` on the items' ranks and
margins), and, in place of the pair offsets and the others' temperature, per-item tilts of
the ranks and the others' share drawn from one ``(gamma, k, Q)`` (the Stan program's
header, bench/stan/mixture_matrix_probe.stan). Every parameter is preconditioned by an
exact affine map from the Laplace fit of the program's own log density (:func:`log_density`,
its numpy form, equal to Stan's: its mode by L-BFGS, its Hessian by central differences of
its gradient), the class matrix's log scale inside the block, as the NUTS run of
bench/matrix_probe.py asked.

Each repetition fits the study's own calibration set (``coverage.study_set``, seed 2026)
and checks the bands for p(c | y) at the study's nine decision outputs, every class whose
truth lies in [0.001, 0.999], as the study counts them for the shipped transducer; one
line per set (coverage, the posterior mean's mean absolute error, the sampler's record:
divergent transitions, tree-depth hits, the largest R-hat and smallest bulk ESS over the
checked probabilities and ``sd_q``, leapfrog steps per iteration, seconds), then the
pooled coverage.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_coverage_study
from matrix_probe import LEVELS, _pooled_cover, _scores, decision_checks, digits_stage

PROGRAM = Path(__file__).resolve().parent / "stan" / "mixture_matrix_probe.stan"
#: NUTS settings: 4 chains x (500 + 500), adapt_delta 0.95 (the shipped default for a
#: class reduction with pair offsets).
SETTINGS = {"chains": 4, "warmup": 500, "draws": 500, "adapt_delta": 0.95}
#: Central differences of the gradient for the Laplace Hessian: the step in u.
HESSIAN_STEP = 1e-4
#: Smallest eigenvalue kept in the Laplace precision (a flat direction gets sd 1 / sqrt).
MIN_PRECISION = 1e-2


def reduced_terms(outputs: np.ndarray, n_fit: int) -> dict[str, np.ndarray]:
    """Per output: scores ``S``, them centred ``Z``, the margin, and the top, second and
    other classes (0-based), as the reduction orders them (ties keep the column order)."""
    s = _scores(outputs, n_fit)
    order = np.argsort(-s, axis=1, kind="stable")
    return {
        "S": s, "Z": s - s.mean(axis=1, keepdims=True),
        "margin": s[np.arange(len(s)), order[:, 0]] - s[np.arange(len(s)), order[:, 1]],
        "top": order[:, 0], "second": order[:, 1], "oth": np.sort(order[:, 2:], axis=1),
    }  # fmt: skip


def kernel_values(margin: np.ndarray, loc: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Normal kernel values at each margin, each row divided by its largest (the program's
    ``kern``; the kernels share one width, so their common constant cancels)."""
    z = (margin[:, None] - loc.ravel()[None, :]) / width.ravel()[None, :]
    log_k = -0.5 * z**2
    return np.exp(log_k - log_k.max(axis=1, keepdims=True))


def _class_terms_start(p: int, r: int) -> int:
    """Where the class terms (gamma, k, Q_raw, log sd_q) start in u (0-based): after a's
    block ((P - 1) + 1 + R) and f's two (P + 1 + R each)."""
    return (p - 1) + 1 + r + 2 * (p + 1 + r)


def unconstrained_size(p: int, r: int, c: int, local: bool = False) -> int:
    """Length of u: a's block, f's two, then gamma, k, Q_raw, the local scales' logs (if
    ``local``) and log sd_q."""
    return _class_terms_start(p, r) + 1 + c + (2 if local else 1) * c * c + 1


def stan_data(outputs: np.ndarray, labels: np.ndarray, n_fit: int, star: np.ndarray,
              sd_q_scale: float = 1.0, local_df: float = 0.0) -> dict:  # fmt: skip
    """The program's data for one calibration set (items sorted by rank, stably, as
    ``build_stan_data`` sorts rows by class) and the outputs ``star`` to predict at, with
    the class terms' scale ``sd_q ~ half-Normal(0, sd_q_scale)`` and, if ``local_df > 0``,
    local scales ``half-Student-t(local_df, 0, 1)``; the preconditioning is the identity
    until :func:`laplace` replaces it."""
    if not local_df >= 0:
        raise ValueError(f"local_df must be >= 0 (0: no local scales), found {local_df}")
    from yieldwise.transducer.stan_data import build_stan_data

    terms = reduced_terms(outputs, n_fit)
    c = outputs.shape[1]
    rank = np.where(labels == terms["top"], 0, np.where(labels == terms["second"], 1, 2))
    if not (rank == 2).any():
        raise ValueError("no calibration item ranks below second: the probe needs three ranks")
    order = np.argsort(rank, kind="stable")
    terms = {key: value[order] for key, value in terms.items()}
    rank, labels = rank[order], labels[order]
    data, _ = build_stan_data(rank, terms["margin"], terms["margin"], None, 3,
                              counts=np.ones(len(rank), int), preconditioned=False,
                              kernel_tail_cut=0.0)  # fmt: skip
    if not np.array_equal(np.asarray(data["cls"]), rank + 1) or data["N"] != len(rank):
        raise RuntimeError("build_stan_data reordered or merged the items")
    loc, width = np.asarray(data["loc"]), np.asarray(data["width"])
    kern = kernel_values(terms["margin"], loc, width)
    star_terms = reduced_terms(star, n_fit)
    m = unconstrained_size(int(data["P"]), int(data["R"]), c, local_df > 0)
    return {
        "N": len(rank), "C": c, "K": int(data["K"]), "P": int(data["P"]), "R": int(data["R"]),
        "kern": kern, "fixed_basis": np.asarray(data["fixed_basis"]),
        "fixed_scale": np.asarray(data["fixed_scale"]),
        "smooth_basis": np.asarray(data["smooth_basis"]),
        **{key: float(data[key]) for key in ("tau_a_scale", "tau_f_scale", "tau_f_df",
                                             "tau_f_floor")},
        "sd_q_scale": float(sd_q_scale), "local_df": float(local_df),
        "rank": rank + 1, "cls": labels + 1, "top": terms["top"] + 1,
        "second": terms["second"] + 1, "oth": terms["oth"] + 1, "S": terms["S"],
        "Z": terms["Z"], "M": m, "centre": np.zeros(m), "L": np.eye(m),
        "J": len(star), "kern_star": kernel_values(star_terms["margin"], loc, width),
        "top_star": star_terms["top"] + 1, "second_star": star_terms["second"] + 1,
        "oth_star": star_terms["oth"] + 1, "S_star": star_terms["S"], "Z_star": star_terms["Z"],
        "design_kern": np.asarray(data["kern"]),  # for the check against the program's own
    }  # fmt: skip


def initial_u(data: dict) -> np.ndarray:
    """A start for the mode search: everything 0 but gamma 1 and log sd_q log 0.3."""
    u = np.zeros(data["M"])
    u[_class_terms_start(data["P"], data["R"])] = 1.0  # gamma
    u[-1] = np.log(0.3)
    return u


def unpack(u: np.ndarray, data: dict) -> dict[str, np.ndarray | float]:
    """The blocks of u as the program reads them (matrices column-major, as Stan's
    ``to_matrix``)."""
    p, r, c = data["P"], data["R"], data["C"]
    p1, at_f = p - 1, p + r  # at_f = (P - 1) + 1 + R
    at_t = _class_terms_start(p, r)
    at_q = at_t + 1 + c
    hl = c * c if data["local_df"] > 0 else 0
    return {
        "a_fixed": u[:p1], "log_tau_a": u[p1], "a_raw": u[p1 + 1 : at_f],
        "f_fixed": u[at_f : at_f + 2 * p].reshape(2, p).T,
        "log_tau_f": u[at_f + 2 * p : at_f + 2 * p + 2],
        "f_raw": u[at_f + 2 * p + 2 : at_t].reshape(2, r).T,
        "gamma": u[at_t], "k": u[at_t + 1 : at_t + 1 + c],
        "Q_raw": u[at_q : at_q + c * c].reshape(c, c).T,
        "log_lam": u[at_q + c * c : at_q + c * c + hl].reshape(c, c).T if hl
        else np.zeros((c, c)),
        "log_sd_q": u[-1],
    }  # fmt: skip


def log_density(u: np.ndarray, data: dict) -> tuple[float, np.ndarray]:
    """The program's log density in u (with ``centre = 0``, ``L = I``; the constants
    Stan's ``~`` drops are dropped here too) and its gradient, vectorised over items."""
    b = unpack(u, data)
    fb, sb, fs = data["fixed_basis"], data["smooth_basis"], data["fixed_scale"]
    tau_a, tau_f = np.exp(b["log_tau_a"]), np.exp(b["log_tau_f"])
    smooth_a, smooth_f = sb @ b["a_raw"], sb @ b["f_raw"]  # (K,), (K, 2)
    a = fb[:, 1:] @ b["a_fixed"] + tau_a * smooth_a
    theta = np.column_stack([a, a[:, None] + fb @ b["f_fixed"] + tau_f * smooth_f])
    rank, cls = data["rank"] - 1, data["cls"] - 1
    top, second, oth = data["top"] - 1, data["second"] - 1, data["oth"] - 1
    s, z, kern = data["S"], data["Z"], data["kern"]
    n, items = len(rank), np.arange(len(rank))
    gamma, sd_q = b["gamma"], np.exp(b["log_sd_q"])
    local_df = data["local_df"]
    lam = np.exp(b["log_lam"])  # 1 without local scales
    q = b["Q_raw"] * lam
    # the mixture: each item's kernel-weighted likelihood under its rank's column
    peak = theta.max(axis=0)
    weights = kern * np.exp(theta[:, rank].T - peak[rank][:, None])  # (N, K)
    lik = weights.sum(axis=1)
    log_mass = peak + np.log(np.exp(theta - peak).sum(axis=0))
    # the class terms and the tilts (the program's header)
    zq = z @ q.T
    e_t = b["k"][None, :] + sd_q * zq  # E - gamma S
    e = e_t + gamma * s
    e_o = e[items[:, None], oth]
    peak_o = e_o.max(axis=1)
    lse_o = peak_o + np.log(np.exp(e_o - peak_o[:, None]).sum(axis=1))
    ta = e_t[items, top]
    tilt = np.column_stack([np.zeros(n), e_t[items, second] - ta,
                            lse_o - gamma * s[items, second] - ta])  # fmt: skip
    w_rank = log_mass[None, :] + tilt
    top_w = w_rank.max(axis=1)
    pi = np.exp(w_rank - top_w[:, None])
    norm = pi.sum(axis=1)
    pi /= norm[:, None]
    third = rank == 2
    lp = float(np.sum(np.log(lik) + peak[rank] + tilt[items, rank] - top_w - np.log(norm))
               + np.sum(e[third, cls[third]] - lse_o[third]))  # fmt: skip
    # priors, as the program states them (scales as logs, with their Jacobians)
    df, scale, floor = data["tau_f_df"], data["tau_f_scale"], data["tau_f_floor"]
    lp += -0.5 * np.sum((b["a_fixed"] / fs[1:]) ** 2)
    lp += -0.5 * np.sum((b["f_fixed"] / fs[:, None]) ** 2)
    lp += -0.5 * np.sum(b["a_raw"] ** 2) - 0.5 * np.sum(b["f_raw"] ** 2)
    lp += -0.5 * (tau_a / data["tau_a_scale"]) ** 2 + b["log_tau_a"]
    if df > 0:
        lp += np.sum(-(df + 1) / 2 * np.log1p((tau_f / scale) ** 2 / df))
    else:
        lp += np.sum(-0.5 * (tau_f / scale) ** 2)
    lp += np.sum(b["log_tau_f"])
    x = (tau_f / floor) ** 2 if floor > 0 else np.zeros(2)
    if floor > 0:
        lp += np.sum(np.log(-np.expm1(-x)))
    lp += -0.5 * ((gamma - 1) / 3) ** 2 - 0.5 * np.sum(b["k"] ** 2) - 0.5 * np.sum(b["Q_raw"] ** 2)
    lp += -0.5 * (sd_q / data["sd_q_scale"]) ** 2 + b["log_sd_q"]
    if local_df > 0:
        lp += np.sum(-(local_df + 1) / 2 * np.log1p(lam**2 / local_df) + b["log_lam"])
    # gradient: d lp / d tilt, then through the class terms and the mixture
    d_tilt = np.eye(3)[rank] - pi  # (N, 3)
    g_theta = np.zeros_like(theta)
    for r in range(3):
        mine = rank == r
        g_theta[:, r] += (weights[mine] / lik[mine, None]).sum(axis=0)
        g_theta[:, r] -= np.exp(theta[:, r] - log_mass[r]) * pi[:, r].sum()
    sigma = np.exp(e_o - lse_o[:, None])  # softmax over the others, (N, C - 2)
    h = d_tilt[:, 2] - third  # the coefficient of lse_o
    g_e_t = np.zeros_like(e)
    np.add.at(g_e_t, (items, second), d_tilt[:, 1])
    np.add.at(g_e_t, (items, top), -d_tilt[:, 1] - d_tilt[:, 2])
    np.add.at(g_e_t, (items[:, None], oth), h[:, None] * sigma)
    np.add.at(g_e_t, (items[third], cls[third]), 1.0)
    g_gamma = float(np.sum(-d_tilt[:, 2] * s[items, second])
                    + np.sum(h * (sigma * s[items[:, None], oth]).sum(axis=1))
                    + np.sum(s[third, cls[third]])) - (gamma - 1) / 9  # fmt: skip
    g_k = g_e_t.sum(axis=0) - b["k"]
    g_big_q = sd_q * g_e_t.T @ z  # d lp / d Q, Q[c, j] the weight of z_j in E_c
    g_q = g_big_q * lam - b["Q_raw"]
    g_lam = g_big_q * q - (local_df + 1) * lam**2 / (local_df + lam**2) + 1.0 \
        if local_df > 0 else None  # fmt: skip
    g_log_sd = sd_q * float(np.sum(g_e_t * zq)) - (sd_q / data["sd_q_scale"]) ** 2 + 1.0
    g_a = g_theta.sum(axis=1)
    g_f = g_theta[:, 1:]
    g_tau_f = -(df + 1) * tau_f**2 / (df * scale**2 + tau_f**2) if df > 0 \
        else -(tau_f / scale) ** 2  # fmt: skip
    g_tau_f = g_tau_f + 1.0 + (2 * x / np.expm1(x) if floor > 0 else 0.0)
    grad = np.concatenate([
        fb[:, 1:].T @ g_a - b["a_fixed"] / fs[1:] ** 2,
        [tau_a * smooth_a @ g_a - (tau_a / data["tau_a_scale"]) ** 2 + 1.0],
        tau_a * sb.T @ g_a - b["a_raw"],
        (fb.T @ g_f - b["f_fixed"] / fs[:, None] ** 2).T.ravel(),
        tau_f * np.sum(smooth_f * g_f, axis=0) + g_tau_f,
        (tau_f * (sb.T @ g_f) - b["f_raw"]).T.ravel(),
        [g_gamma], g_k, g_q.T.ravel(), [] if g_lam is None else g_lam.T.ravel(), [g_log_sd],
    ])  # fmt: skip
    return lp, grad


def laplace(data: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """The mode of :func:`log_density` in u and the Cholesky factor of the inverse of
    minus its Hessian there (central differences of the gradient; eigenvalues below
    :data:`MIN_PRECISION` raised to it), with a record of the search."""

    def objective(u: np.ndarray) -> tuple[float, np.ndarray]:
        lp, grad = log_density(u, data)
        return -lp, -grad

    started = time.perf_counter()
    found = minimize(objective, initial_u(data), jac=True, method="L-BFGS-B",
                     options={"maxiter": 20000, "maxfun": 40000})  # fmt: skip
    mode = found.x
    m = mode.size
    hessian = np.empty((m, m))
    for j in range(m):
        step = np.zeros(m)
        step[j] = HESSIAN_STEP
        hessian[:, j] = (objective(mode + step)[1] - objective(mode - step)[1]) / (2 * HESSIAN_STEP)
    hessian = 0.5 * (hessian + hessian.T)
    values, vectors = np.linalg.eigh(hessian)
    clipped = int((values < MIN_PRECISION).sum())
    cov = (vectors / np.maximum(values, MIN_PRECISION)) @ vectors.T
    record = {"mode_ok": bool(found.success), "mode_gradient": float(np.abs(found.jac).max()),
              "clipped": clipped, "laplace_s": time.perf_counter() - started}  # fmt: skip
    return mode, np.linalg.cholesky(cov), record


def _stan_only(data: dict) -> dict:
    """The data without the driver's own checks."""
    return {key: value for key, value in data.items() if key != "design_kern"}


def sample(data: dict, seed: int) -> tuple[np.ndarray, dict]:
    """The draws of p(c | y) at the ``star`` outputs, (draws, J, C), and the sampler's
    record (module docstring)."""
    import arviz as az

    from yieldwise.backends import get_backend

    mode, chol, record = laplace(data)
    data = {**data, "centre": mode, "L": chol}
    program = get_backend("pystan").compile(PROGRAM)
    chains = SETTINGS["chains"]
    result = program.sample(
        _stan_only(data), chains=chains, warmup=SETTINGS["warmup"], draws=SETTINGS["draws"],
        seed=seed, adapt_delta=SETTINGS["adapt_delta"], progress=False,
        init=[{"zeta": np.zeros(data["M"])}] * chains,
    )  # fmt: skip
    proba = np.asarray(result.draws["proba"]).reshape(chains, -1, data["J"], data["C"])
    sd_q = np.asarray(result.draws["sd_q"]).reshape(chains, -1)
    stats = result.sample_stats
    watched = [sd_q] + [proba[:, :, j, c] for j in range(data["J"]) for c in range(data["C"])
                        if proba[:, :, j, c].std() > 1e-6]  # fmt: skip
    record.update(
        divergent=int(np.asarray(stats["diverging"]).sum()),
        treedepth=int((np.asarray(stats["tree_depth"]) >= 10).sum()),
        steps=float(np.asarray(stats["n_steps"]).mean()),
        seconds=float(result.sampling_seconds),
        max_rhat=float(max(az.rhat(x) for x in watched)),
        min_ess=float(min(az.ess(x) for x in watched)),
        sd_q=float(sd_q.mean()),
    )
    return proba.reshape(-1, data["J"], data["C"]), record


def run(n: int, rep: int, sd_q_scale: float = 1.0, local_df: float = 0.0) -> dict:
    """One study set's fit and its checks at the decision outputs."""
    study = load_coverage_study()
    ((index, problem),) = study.select_problems(["softmax-10"])
    outputs, labels, _ = study.study_set(problem, index, n, rep)
    picks = study.decision_outputs(problem)
    data = stan_data(outputs, np.asarray(labels, int), n, problem.cells[picks], sd_q_scale,
                     local_df)  # fmt: skip
    proba, record = sample(data, seed=rep + 1)
    return {**decision_checks(proba, problem.truth()[picks], study.INSIDE), "sampler": record}


def digits(
    splits: int = 5, sd_q_scale: float = 1.0, local_df: float = 0.0, seed: int = 2026
) -> None:
    """The real-data stage's ten-class case: its seeded halves of ``load_digits_ten()`` and
    its 1,000 random 10 x 10 matrices (drawn in its order, at its default ``--matrices``
    10,000), as bench/matrix_probe.py's ``digits`` takes them; the probe's posterior-mean
    probabilities at the held-out half against the shipped transducer's (default
    settings), temperature scaling's and the raw softmax's, regret against the best of the
    four per matrix, and the probe's difference from the best peer's mean, paired by split
    with its resampled standard error."""
    import decision_quality as dq

    from yieldwise import Transducer
    from yieldwise.calibrators import TemperatureCalibrator

    ten, truth, outputs, utilities, names = digits_stage(seed)
    columns = [f"p_{name}" for name in ten["label"].cat.categories]
    logs = np.log(np.clip(outputs, 1e-300, None))  # temperature scaling's scores
    methods = ("probe", "shipped", "temperature", "raw softmax")
    regrets: dict[str, list[float]] = {m: [] for m in methods}
    for split in range(splits):
        half = np.random.default_rng([seed, 301, split]).permutation(len(ten)) < len(ten) // 2
        cal, held, n = outputs[half], outputs[~half], int(half.sum())
        data = stan_data(cal, truth[half], n, held, sd_q_scale, local_df)
        proba, record = sample(data, seed=split + 1)
        shipped = Transducer(seed=seed + split).fit(ten.loc[half, columns], truth[half])
        temperature = TemperatureCalibrator().fit(logs[half], truth[half])
        w = np.eye(10)[truth[~half]] / (~half).sum()
        values = {
            "probe": dq.long_run(proba.mean(axis=0), w, utilities),
            "shipped": dq.long_run(
                np.asarray(shipped.predict_proba(ten.loc[~half, columns]), float), w, utilities
            ),
            "temperature": dq.long_run(temperature.predict_proba(logs[~half]), w, utilities),
            "raw softmax": dq.long_run(held, w, utilities),
        }
        values["yieldwise"] = values["probe"]  # summarise's at-least column wants one
        values["oracle"] = np.max(np.stack([values[m] for m in methods]), axis=0)
        summary = dq.summarise(values, utilities, w.sum(axis=0), names)
        for method in methods:
            regrets[method].append(summary[method]["mean_regret"])
        print(f"split {split}: mean regret " + ", ".join(f"{m} {regrets[m][-1]:.5f}"
              for m in methods) + f"; sampler {record}", flush=True)  # fmt: skip
    best = min(methods[1:], key=lambda m: np.mean(regrets[m]))
    diff, se = dq.split_difference(regrets["probe"], regrets[best])
    print("mean regret " + ", ".join(f"{m} {np.mean(r):.5f}" for m, r in regrets.items())
          + f"; probe - {best} {diff:+.5f} (SE {se:.5f})")  # fmt: skip


def main(argv: list[str]) -> int:
    if argv[:1] == ["digits"]:
        digits(int(argv[1]) if len(argv) > 1 else 5, float(argv[2]) if len(argv) > 2 else 1.0,
               float(argv[3]) if len(argv) > 3 else 0.0)  # fmt: skip
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    n, reps = int(argv[0]), int(argv[1])
    first = int(argv[2]) if len(argv) > 2 else 0
    sd_q_scale = float(argv[3]) if len(argv) > 3 else 1.0
    local_df = float(argv[4]) if len(argv) > 4 else 0.0
    results = []
    for rep in range(first, first + reps):
        results.append(run(n, rep, sd_q_scale, local_df))
        r = results[-1]
        s = r["sampler"]
        print(f"n = {n}, repetition {rep}: " + " / ".join(f"{100 * r[lv]:.0f}" for lv in LEVELS)
              + f" % of {r['checks']}; error {r['error']:.4f}; divergent {s['divergent']}, "
              f"tree-depth hits {s['treedepth']}, R-hat {s['max_rhat']:.3f}, bulk ESS "
              f"{s['min_ess']:.0f}, steps {s['steps']:.1f}, sampling {s['seconds']:.0f} s, "
              f"Laplace {s['laplace_s']:.0f} s (mode ok {s['mode_ok']}, clipped "
              f"{s['clipped']}), sd_q {s['sd_q']:.2f}", flush=True)  # fmt: skip
    cover = _pooled_cover(results)
    print(f"n = {n}, {len(results)} study sets (repetitions {first}-{first + reps - 1}): bands "
          f"at the decision outputs 50 / 75 / 95 % cover {cover} %; mean absolute error "
          f"{np.mean([r['error'] for r in results]):.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
