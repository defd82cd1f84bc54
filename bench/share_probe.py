"""The class reduction's others' share on the panel's softmax-10: how much of its miss a
per-class offset or a class-linear term removes (run by hand; docs/model.md, "Many
classes", "The others' share with class terms").

    .venv/bin/python bench/share_probe.py N REPS MODELS [SD_K SD_Q]
    .venv/bin/python bench/share_probe.py 3600 6 abc        # offsets sd 1, class terms sd 0.5

A probe of a model not built, fitted by the Laplace approximation, not Stan; checked
against NUTS on one set (docs/model.md), its bands were wider than the exact
posterior's (median 1.8x), so its coverage figures are optimistic. Among the
calibration items whose true class ranks third or lower in their output (the reduction's
``others``), the class is modelled among the classes ranking third or lower as

* ``a``: ``softmax_j(gamma s_j)``, the shipped share (``log gamma ~ N(0, 1)``);
* ``b``: ``softmax_j(gamma s_j + k_j)``, ``k ~ N(0, SD_K^2)``: a per-class offset;
* ``c``: ``softmax_j(gamma s_j + k_j + Q_j . z)``, ``Q ~ N(0, SD_Q^2)``: a class-linear term,

with ``s`` the squeezed log-probabilities (the reduction's scores) and ``z`` them centred.
The truth's others' share is of form ``c`` (``_problems.softmax_ten_truth``). Posterior:
Gaussian at the mode (finite-difference Hessian), 400 draws. Checked at 4,000 held-out
outputs of the same law, at every class ranking third or lower: the 95 % interval's
coverage of the true share among those classes (where it lies in [0.001, 0.999]) and the
posterior mean's mean absolute error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _problems import softmax_ten_problem, softmax_ten_truth

K = 10
PROBLEM = softmax_ten_problem(points=10)  # its sampler; the cells are not used here


def features(p: np.ndarray, n_fit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores ``s`` (squeezed as the reduction's, ``(p (n - 1) + 1 / C) / n``), centred
    scores ``z`` and the mask of each output's classes ranking third or lower."""
    s = np.log((p * (n_fit - 1) + 1 / K) / n_fit)
    mask = np.ones_like(p, dtype=bool)
    mask[np.arange(len(p))[:, None], np.argsort(-p, axis=1)[:, :2]] = False
    return s, s - s.mean(axis=1, keepdims=True), mask


def linear_predictor(theta: np.ndarray, model: str, s: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``gamma s_j (+ k_j (+ Q_j . z))`` for ``theta = (log gamma, k, vec Q)``."""
    eta = np.exp(theta[0]) * s
    if model in "bc":
        eta = eta + theta[1 : 1 + K]
    if model == "c":
        eta = eta + z @ theta[1 + K :].reshape(K, K).T
    return eta


def neg_log_posterior(theta, model, s, z, mask, y, sd_k, sd_q) -> float:
    eta = np.where(mask, linear_predictor(theta, model, s, z), -np.inf)
    ll = eta[np.arange(len(y)), y] - logsumexp(eta, axis=1)
    lp = -0.5 * theta[0] ** 2 - 0.5 * np.sum(theta[1 : 1 + K] ** 2) / sd_k**2
    lp -= 0.5 * np.sum(theta[1 + K :] ** 2) / sd_q**2
    return -(ll.sum() + lp)


def _hessian(f, x: np.ndarray, h: float = 1e-3) -> np.ndarray:
    n, f0 = x.size, f(x)
    step = np.eye(n) * h
    fi = np.array([f(x + step[i]) for i in range(n)])
    out = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            out[i, j] = out[j, i] = (f(x + step[i] + step[j]) - fi[i] - fi[j] + f0) / h**2
    return out


def fit(model: str, s, z, mask, y, sd_k: float, sd_q: float, seed: int):
    """The mode and 400 draws of the Gaussian at it."""
    dim = 1 + (K if model in "bc" else 0) + (K * K if model == "c" else 0)

    def f(theta):
        return neg_log_posterior(theta, model, s, z, mask, y, sd_k, sd_q)

    mode = minimize(f, np.zeros(dim), method="L-BFGS-B").x
    cov = np.linalg.inv(_hessian(f, mode) + 1e-9 * np.eye(dim))
    return mode, np.random.default_rng(seed).multivariate_normal(mode, cov, 400)


def run(n: int, rep: int, models: str, sd_k: float = 1.0, sd_q: float = 0.5) -> dict:
    p, c = PROBLEM.sample(n, np.random.default_rng([2026, 77, n, rep]))
    s, z, mask = features(p, n)
    mine = mask[np.arange(n), c]
    held, _ = PROBLEM.sample(4000, np.random.default_rng([2026, 78, rep]))
    hs, hz, hmask = features(held, n)
    true = np.where(hmask, softmax_ten_truth(held), 0.0)
    true /= true.sum(axis=1, keepdims=True)
    checked = hmask & (true > 0.001) & (true < 0.999)
    out: dict = {"items": int(mine.sum())}
    for model in models:
        mode, draws = fit(model, s[mine], z[mine], mask[mine], c[mine], sd_k, sd_q, rep)
        shares = np.stack([
            softmax(np.where(hmask, linear_predictor(d, model, hs, hz), -np.inf), axis=1)
            for d in draws
        ])  # fmt: skip
        lower, upper = np.quantile(shares, [0.025, 0.975], axis=0)
        cover = ((true >= lower) & (true <= upper))[checked].mean()
        error = np.abs(shares.mean(axis=0) - true)[hmask].mean()
        out[model] = (float(cover), float(error), float(np.exp(mode[0])))
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 3 or not set(argv[2]) <= set("abc"):
        print(__doc__, file=sys.stderr)
        return 2
    n, reps, models = int(argv[0]), int(argv[1]), argv[2]
    sd_k, sd_q = (float(a) for a in (argv[3:5] + ["1.0", "0.5"][len(argv[3:5]) :]))
    results = [run(n, rep, models, sd_k, sd_q) for rep in range(reps)]
    items = [r["items"] for r in results]
    print(f"n = {n}, {reps} sets, {min(items)}-{max(items)} items of rank 'others'; "
          f"sd_k {sd_k}, sd_q {sd_q}")  # fmt: skip
    for model in models:
        a = np.array([r[model] for r in results])
        print(f"  model {model}: 95 % coverage {a[:, 0].mean():.3f} (per set "
              f"{', '.join(f'{v:.2f}' for v in a[:, 0])}), mean absolute error "
              f"{a[:, 1].mean():.4f}, gamma at the mode {a[:, 2].mean():.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
