"""Matrix scaling with a smooth margin term, probed on the panel's softmax-10 against the
coverage study's decision outputs (run by hand; docs/model.md, "Many classes", "One
matrix for every rank").

    .venv/bin/python bench/matrix_probe.py N REPS [SD_Q]
    .venv/bin/python bench/matrix_probe.py 3600 6          # class terms' sd 0.5
    .venv/bin/python bench/matrix_probe.py 3600 6 learnt   # sd ~ half-Normal(0, 1)
    .venv/bin/python bench/matrix_probe.py 3600 6 nuts     # sd learnt, sampled by NUTS
    .venv/bin/python bench/matrix_probe.py digits [SPLITS]  # the ten-class digits

A probe of a model not built, fitted by the Laplace approximation (checked against NUTS
on one set, docs/model.md, its bands were wider than the exact posterior's, median 1.8x,
so its coverage figures are optimistic), or with ``nuts`` sampled by PyStan: the sd
learnt, a parameter (:func:`nuts_draws`; one line per study set, then the pooled
coverage). Every class
of an output gets the log-odds

    eta_c = gamma s_c + k_c + Q_c . z + [c = top] g(m),

``s`` the squeezed log-probabilities (the reduction's scores), ``z`` them centred, ``m``
the margin of the top two scores and ``g`` a smooth function of it (``G`` Gaussian bumps
over the calibration margins' range, coefficients ``N(0, 3^2)``); ``gamma ~ N(1, 3^2)``,
``k ~ N(0, 1)``, ``Q ~ N(0, SD_Q^2)``. Without ``Q`` and ``k`` this is temperature
scaling with a nonparametric correction of the top class (what today's reduction holds,
up to its pair offsets); with them it holds the truth's form, ``log p(c | y) = m_c . z +
k_c`` (``_problems.softmax_ten_truth``), from every item rather than from the few whose
class ranks third or lower (bench/share_probe.py). The likelihood is a multinomial logit
linear in the parameters, so the posterior is log-concave; the Gaussian at its mode (exact
gradient and Hessian) gives 1,000 draws. Each repetition fits the coverage study's own
calibration set (``coverage.study_set``, seed 2026) and checks the bands for p(c | y) at
the study's nine decision outputs, every class whose truth lies in [0.001, 0.999] (25
checks), as the study counts them for the shipped transducer.

``learnt``: the class terms' sd is given a half-Normal(0, 1) prior and integrated out on a
grid (:data:`SD_GRID`): each grid value's Laplace evidence (the log posterior density at
the mode, ``+ P/2 log 2 pi - 1/2 log |H|``, its priors normalised) times the prior's
density and the grid's spacing in ``log sd`` weighs its Gaussian, and the draws are that
mixture's.

``digits``: the real-data stage's ten-class case instead (``decision_quality.run_real``'s
seeded halves of ``load_digits_ten()`` and its 1,000 random 10 x 10 matrices, drawn in its
order at its default ``--matrices`` 10,000), the model with the learnt sd fitted on each
calibration half; printed per split, the mean rescaled regret of its posterior-mean
probabilities, of temperature scaling and of the raw softmax, against the best of those
three per matrix, and the probe's difference from the raw softmax paired by split with its
resampled standard error (``decision_quality.split_difference``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_coverage_study

K = 10
BUMPS = 6
#: The class terms' sd values over which ``learnt`` integrates (even in log sd).
SD_GRID = np.exp(np.linspace(np.log(0.03), np.log(2.0), 15))
LEVELS = (0.5, 0.75, 0.95)
#: Where ``vec Q`` (row by row) lies in theta = (gamma, k, vec Q, bumps).
Q_TERMS = slice(1 + K, 1 + K + K * K)


def _scores(p: np.ndarray, n_fit: int) -> np.ndarray:
    """The reduction's scores: log-probabilities squeezed as ``(p (n - 1) + 1 / C) / n``."""
    return np.log((p * (n_fit - 1) + 1 / K) / n_fit)


def _margins(s: np.ndarray) -> np.ndarray:
    """The margin of each row's top two scores."""
    top2 = -np.sort(-s, axis=1)[:, :2]
    return top2[:, 0] - top2[:, 1]


def bump_grid(outputs: np.ndarray, n_fit: int) -> tuple[np.ndarray, float]:
    """The bumps' centres, evenly over the calibration margins' range, and their width
    (the spacing)."""
    margin = _margins(_scores(outputs, n_fit))
    centres = np.linspace(margin.min(), margin.max(), BUMPS)
    return centres, float(centres[1] - centres[0])


def item_terms(p: np.ndarray, n_fit: int, centres: np.ndarray, width: float):
    """Per item: the scores ``s`` (n, C), them centred ``z``, the margin's bumps (n, G) and
    the top class's indicator (n, C, as floats)."""
    s = _scores(p, n_fit)
    bumps = np.exp(-0.5 * ((_margins(s)[:, None] - centres) / width) ** 2)
    on_top = (np.arange(K) == np.argmax(s, axis=1)[:, None]).astype(float)
    return s, s - s.mean(axis=1, keepdims=True), bumps, on_top


def design(p: np.ndarray, n_fit: int, centres: np.ndarray, width: float, terms: bool):
    """The features (n, C, P) of ``eta = features @ theta``: ``s_c``, then (with
    ``terms``) one-hot ``c`` for ``k`` and ``z`` in class ``c``'s block for ``Q``, then the
    margin's bumps in the top class's row."""
    n = len(p)
    s, z, bumps, on_top = item_terms(p, n_fit, centres, width)
    blocks = [s[:, :, None]]
    if terms:
        blocks.append(np.broadcast_to(np.eye(K), (n, K, K)))
        blocks.append((np.eye(K)[None, :, :, None] * z[:, None, None, :]).reshape(n, K, K * K))
    blocks.append(on_top[:, :, None] * bumps[:, None, :])
    return np.concatenate(blocks, axis=2)


def prior(terms: bool, sd_q: float) -> tuple[np.ndarray, np.ndarray]:
    """Prior means and sds of theta = (gamma, [k, vec Q], bumps)."""
    mean = [1.0] + [0.0] * ((K + K * K) if terms else 0) + [0.0] * BUMPS
    sd = [3.0] + ([1.0] * K + [sd_q] * (K * K) if terms else []) + [3.0] * BUMPS
    return np.array(mean), np.array(sd)


def posterior(features: np.ndarray, y: np.ndarray, mean: np.ndarray, sd: np.ndarray):
    """Mode and covariance of the multinomial logit ``softmax(features @ theta)`` with
    independent Normal priors: exact gradient and Hessian."""
    onehot = np.eye(K)[y]

    def objective(theta):
        eta = features @ theta
        lp = log_softmax(eta, axis=1)
        value = -(lp[np.arange(len(y)), y].sum()) + 0.5 * np.sum(((theta - mean) / sd) ** 2)
        grad = -np.einsum("ncp,nc->p", features, onehot - np.exp(lp)) + (theta - mean) / sd**2
        return value, grad

    mode = minimize(objective, mean.copy(), jac=True, method="L-BFGS-B").x
    prob = softmax(features @ mode, axis=1)
    fp = np.einsum("ncp,nc->np", features, prob)  # sum_c p_c F_c
    hessian = np.einsum("ncp,nc,ncq->pq", features, prob, features) - fp.T @ fp
    hessian += np.diag(1.0 / sd**2)
    return mode, np.linalg.inv(hessian)


def log_evidence(features, y, mean, sd, mode, cov) -> float:
    """Laplace's log marginal likelihood: log p(y | mode) + log prior(mode), the Normal
    priors normalised, + P/2 log 2 pi + 1/2 log |cov|."""
    lp = log_softmax(features @ mode, axis=1)[np.arange(len(y)), y].sum()
    prior_lp = -0.5 * np.sum(((mode - mean) / sd) ** 2) - np.sum(np.log(sd)) \
        - 0.5 * mode.size * np.log(2 * np.pi)  # fmt: skip
    return float(lp + prior_lp + 0.5 * mode.size * np.log(2 * np.pi)
                 + 0.5 * np.linalg.slogdet(cov)[1])  # fmt: skip


def learnt_draws(features, y, n_draws: int, rng: np.random.Generator):
    """Draws with the class terms' sd integrated out on :data:`SD_GRID` under a
    half-Normal(0, 1) prior (module docstring), and the sd's posterior mean."""
    fits, log_w = [], []
    for sd_q in SD_GRID:
        mean, sd = prior(True, sd_q)
        mode, cov = posterior(features, y, mean, sd)
        fits.append((mode, cov))
        # half-Normal(0, 1) density in sd, times sd for the even grid in log sd
        log_w.append(log_evidence(features, y, mean, sd, mode, cov) - 0.5 * sd_q**2
                     + np.log(sd_q))  # fmt: skip
    w = np.exp(np.array(log_w) - max(log_w))
    w /= w.sum()
    counts = rng.multinomial(n_draws, w)
    draws = np.concatenate([rng.multivariate_normal(m, c, k) for (m, c), k
                            in zip(fits, counts, strict=True) if k])  # fmt: skip
    return draws, float(w @ SD_GRID)


#: The NUTS form of the probe (``nuts``), beside this file.
NUTS_PROGRAM = Path(__file__).resolve().parent / "stan" / "matrix_probe.stan"
#: NUTS settings of ``nuts``: 4 chains x (500 + 500), adapt_delta 0.9.
NUTS_SETTINGS = {"chains": 4, "warmup": 500, "draws": 500, "adapt_delta": 0.9}


def nuts_draws(outputs: np.ndarray, labels: np.ndarray, n_fit: int, centres: np.ndarray,
               width: float, seed: int, features: np.ndarray | None = None,
               ) -> tuple[np.ndarray, dict]:  # fmt: skip
    """The class-terms model with its sd learnt, sampled by NUTS (``bench/stan/
    matrix_probe.stan``), preconditioned by the Laplace fit at the grid sd nearest the
    Laplace posterior mean of ``sd_q``. ``features``: :func:`design`'s with the class
    terms for these outputs, when the caller has them. Returns the draws of theta in
    :func:`design`'s order, with ``Q = sd_q Q_raw``, and the sampler's record."""
    import arviz as az

    from yieldwise.backends import get_backend

    if features is None:
        features = design(outputs, n_fit, centres, width, True)
    _, sd_hat = learnt_draws(features, labels, 10, np.random.default_rng(seed))
    sd_q = float(SD_GRID[np.argmin(np.abs(np.log(SD_GRID / sd_hat)))])
    mean, sd = prior(True, sd_q)
    mode, cov = posterior(features, labels, mean, sd)
    scale = np.ones(mode.size)  # non-centred: Q_raw = Q / sd_q
    scale[Q_TERMS] = 1 / sd_q
    centre, cov = mode * scale, cov * np.outer(scale, scale)
    s, z, bumps, on_top = item_terms(outputs, n_fit, centres, width)
    data = {
        "N": len(s), "C": K, "G": BUMPS, "S": s, "Z": z, "top_mask": on_top, "B": bumps,
        "onehot": np.eye(K)[labels], "P": mode.size, "centre": centre,
        "L": np.linalg.cholesky(cov),
    }  # fmt: skip
    program = get_backend("pystan").compile(NUTS_PROGRAM)
    chains = NUTS_SETTINGS["chains"]
    result = program.sample(
        data, chains=chains, warmup=NUTS_SETTINGS["warmup"], draws=NUTS_SETTINGS["draws"],
        seed=seed, adapt_delta=NUTS_SETTINGS["adapt_delta"], progress=False,
        init=[{"zeta": np.zeros(mode.size), "log_sd_q": np.log(sd_q)}] * chains,
    )  # fmt: skip
    zeta = result.draws["zeta"].reshape(-1, mode.size)
    by_chain = np.asarray(result.draws["log_sd_q"]).reshape(chains, -1)
    log_sd = by_chain.reshape(-1)
    theta = centre + zeta @ data["L"].T
    theta[:, Q_TERMS] *= np.exp(log_sd)[:, None]
    stats = result.sample_stats
    record = {
        "divergent": int(np.asarray(stats["diverging"]).sum()),
        "steps": float(np.asarray(stats["n_steps"]).mean()),
        "seconds": float(result.sampling_seconds),
        "rhat_sd_q": float(az.rhat(by_chain)), "ess_sd_q": float(az.ess(by_chain)),
        "sd_q": float(np.exp(log_sd).mean()), "sd_start": sd_q,
    }  # fmt: skip
    return theta, record


def run(n: int, rep: int, terms: bool, sd_q: float | None = 0.5, nuts: bool = False) -> dict:
    """One study set's fit and checks; ``sd_q`` None: the class terms' sd learnt."""
    study = load_coverage_study()
    ((index, problem),) = study.select_problems(["softmax-10"])
    outputs, labels, _ = study.study_set(problem, index, n, rep)
    centres, width = bump_grid(outputs, n)
    features = design(outputs, n, centres, width, terms)
    rng = np.random.default_rng(rep)
    out: dict = {}
    if nuts:
        draws, out["sampler"] = nuts_draws(outputs, labels, n, centres, width, seed=rep + 1,
                                           features=features)  # fmt: skip
        out["sd_q"] = out["sampler"]["sd_q"]
    elif terms and sd_q is None:
        draws, out["sd_q"] = learnt_draws(features, labels, 1000, rng)
    else:
        mean, sd = prior(terms, 0.5 if sd_q is None else sd_q)
        mode, cov = posterior(features, labels, mean, sd)
        draws = rng.multivariate_normal(mode, cov, 1000)
    picks = study.decision_outputs(problem)
    at = problem.cells[picks]
    proba = softmax(np.einsum("ncp,tp->tnc", design(at, n, centres, width, terms), draws), axis=2)
    out.update(decision_checks(proba, problem.truth()[picks], study.INSIDE))
    return out


def decision_checks(proba: np.ndarray, truth: np.ndarray, inside: tuple[float, float]) -> dict:
    """The study's checks of draws ``proba`` (draws, outputs, classes) against ``truth``
    (outputs, classes) where it lies in ``inside``: how many, each level's band coverage,
    and the posterior mean's mean absolute error."""
    checked = (truth >= inside[0]) & (truth <= inside[1])
    out: dict = {"checks": int(checked.sum())}
    for level in LEVELS:
        lower, upper = np.quantile(proba, [(1 - level) / 2, (1 + level) / 2], axis=0)
        out[level] = float(((truth >= lower) & (truth <= upper))[checked].mean())
    out["error"] = float(np.abs(proba.mean(axis=0) - truth)[checked].mean())
    return out


def digits_stage(seed: int = 2026):
    """The real stage's ten-class case as the probes take it: ``load_digits_ten()``, its
    classes, its probability vectors, and its 1,000 random 10 x 10 matrices with their
    names (drawn in the stage's order, at its default ``--matrices`` 10,000)."""
    import decision_quality as dq

    from yieldwise.datasets import load_digits_ten

    ten = load_digits_ten()
    truth = ten["label"].cat.codes.to_numpy().astype(int)
    outputs = ten[[f"p_{name}" for name in ten["label"].cat.categories]].to_numpy(float)
    rng = np.random.default_rng([seed, 300])
    dq.binary_matrices(rng, 10_000)  # the stage draws these first, then three classes'
    dq.multiclass_matrices(rng, 1000, 3)
    utilities, names = dq.multiclass_matrices(rng, 1000, 10)
    return ten, truth, outputs, utilities, names


def digits(splits: int = 5, seed: int = 2026) -> None:
    """The real-data stage's ten-class case (module docstring)."""
    import decision_quality as dq

    from yieldwise.calibrators import TemperatureCalibrator

    ten, truth, outputs, utilities, names = digits_stage(seed)
    regrets: dict[str, list[float]] = {"probe": [], "temperature": [], "raw softmax": []}
    for split in range(splits):
        half = np.random.default_rng([seed, 301, split]).permutation(len(ten)) < len(ten) // 2
        cal, held, n = outputs[half], outputs[~half], int(half.sum())
        centres, width = bump_grid(cal, n)
        draws, sd_q = learnt_draws(design(cal, n, centres, width, True), truth[half], 1000,
                                   np.random.default_rng(split))  # fmt: skip
        features = design(held, n, centres, width, True)
        probe = softmax(np.einsum("ncp,tp->tnc", features, draws), axis=2).mean(axis=0)
        logs = np.log(np.clip(outputs, 1e-300, None))
        temperature = TemperatureCalibrator().fit(logs[half], truth[half])
        w = np.eye(K)[truth[~half]] / (~half).sum()
        values = {
            "probe": dq.long_run(probe, w, utilities),
            "temperature": dq.long_run(temperature.predict_proba(logs[~half]), w, utilities),
            "raw softmax": dq.long_run(held, w, utilities),
        }
        values["yieldwise"] = values["probe"]  # summarise's at-least column wants one
        values["oracle"] = np.max(np.stack(list(values.values())), axis=0)
        summary = dq.summarise(values, utilities, w.sum(axis=0), names)
        for method in regrets:
            regrets[method].append(summary[method]["mean_regret"])
        print(f"split {split}: learnt sd {sd_q:.2f}; mean regret " + ", ".join(
            f"{m} {regrets[m][-1]:.5f}" for m in regrets), flush=True)  # fmt: skip
    diff, se = dq.split_difference(regrets["probe"], regrets["raw softmax"])
    print("mean regret " + ", ".join(f"{m} {np.mean(r):.5f}" for m, r in regrets.items())
          + f"; probe - raw softmax {diff:+.5f} (SE {se:.5f})")  # fmt: skip


def _pooled_cover(results: list[dict]) -> str:
    """The coverage at each of :data:`LEVELS`, pooled over the sets, as "50 / 75 / 95"."""
    return " / ".join(f"{100 * np.mean([r[lv] for r in results]):.0f}" for lv in LEVELS)


def main(argv: list[str]) -> int:
    if argv[:1] == ["digits"]:
        digits(int(argv[1]) if len(argv) > 1 else 5)
        return 0
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    n, reps = int(argv[0]), int(argv[1])
    given = argv[2] if len(argv) > 2 else "0.5"
    if given == "nuts":
        results = []
        for rep in range(reps):
            results.append(run(n, rep, True, None, nuts=True))
            r = results[-1]
            print(f"n = {n}, repetition {rep}: " + " / ".join(
                f"{100 * r[lv]:.0f}" for lv in LEVELS) + f" % of {r['checks']}; error "
                f"{r['error']:.4f}; sampler {r['sampler']}", flush=True)  # fmt: skip
        cover = _pooled_cover(results)
        print(f"n = {n}, {reps} study sets, with class terms (sd learnt, NUTS): bands at the "
              f"decision outputs 50 / 75 / 95 % cover {cover} %; mean absolute error "
              f"{np.mean([r['error'] for r in results]):.4f}")  # fmt: skip
        return 0
    sd_q = None if given == "learnt" else float(given)
    for terms in (False, True):
        results = [run(n, rep, terms, sd_q) for rep in range(reps)]
        cover = _pooled_cover(results)
        error = np.mean([r["error"] for r in results])
        learnt = [r["sd_q"] for r in results if "sd_q" in r]
        scale = f"learnt: posterior mean {np.median(learnt):.2f} (median over sets)" if learnt \
            else f"sd {sd_q}"  # fmt: skip
        name = f"with class terms ({scale})" if terms else "temperature + margin bumps"
        print(f"n = {n}, {reps} study sets, {name}: bands at the decision outputs 50 / 75 / "
              f"95 % cover {cover} %; mean absolute error {error:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
