"""A Laplace approximation of the transducer's posterior: no MCMC, seconds instead of minutes.

``backend="laplace"`` fits ``stan/transducer.stan``'s model without Stan: it finds the
posterior mode in the sampler's unconstrained, non-centred coordinates

    u = (a_fixed, log tau_a, a_raw, f_fixed, log tau_f, f_raw),
    a = fixed_basis[:, 2:P] a_fixed + tau_a smooth_basis a_raw,
    f_c = fixed_basis f_fixed[:, c] + tau_f[c] smooth_basis f_raw[:, c],
    theta[k, 1] = a[k],  theta[k, c] = a[k] + f_c[k],  beta = softmax(theta),
    (with data density_marginal = 1, theta[k, c] = a[k] + log softmax(0, f[k])_c)

(every density, prior and Jacobian term as in the Stan program; docs/model.md) by L-BFGS
with the exact gradient, and draws from the Normal with the inverse Hessian at the mode as
covariance (the Hessian by central differences of the exact gradient). The generated
quantities (w, alpha, mu, sigma, log_lik) are computed by the Stan program's formulas.

This is an approximation, and a rough one where the posterior is far from Normal (a
smoothing scale near 0, a sparse region): it is **not** a substitute for the Stan backends
when decisions rest on the uncertainty. It is never chosen by ``"auto"``; it exists for
dry runs of a report's layout, for plumbing tests and for a first look at large batches.
Its "sampler statistics" say so: no divergences or tree depths exist, and the result's
``settings["approximation"]`` is ``"laplace"``.

For models of at most :data:`MARGINAL_MAX_SIZE` coordinates (one output dimension) the
Normal is not the mode's: the smoothing scales sit at their Laplace marginals
(:func:`scale_marginals`), since the joint mode puts them 0.3-1.7 log units below the
posterior's mean. Measured 2026-12-06 over the coverage study's 1-D cells (5 repetitions,
90 fits; docs/model_record.md, "The smoothing scales' Laplace marginals"): median Pareto
k 0.62 -> 0.57, fits above 0.7 24 -> 18, 95 % bands covering 90 -> 92 %, 1.0 -> 3.2 s a
fit.

How rough, each fit measures: ``settings["pareto_k"]`` is the Pareto shape of the
importance ratios posterior / approximation over its own draws (PSIS; Yao et al. 2018),
reported by ``Transducer.sampler_summary()`` and its repr, and a :class:`SamplerWarning`
says so above ``min(1 - 1 / log10(S), 0.7)`` for S draws. Measured on 2026-11-25 (seed 1,
4 x 750 draws): 0.37-0.89 on the panel's 1-D problems (n = 300, 1,000, 3,600; 7 of 18
above 0.7), 0.81-1.18 on two logits, 0.49-0.99 on softmax-3, and 131 on the ten-class
digits, where the approximation's decisions are right for 0.4 % of held-out items
against 94 % for the posterior mode (the draws spread along directions the data leave
flat at the mode and close off a little further on: docs/model.md, "Centres for three
or more dimensions").
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

from ._base import CompilationError, CompiledProgram, SampleResult, SamplingError, StanBackend

__all__ = [
    "LaplaceBackend",
    "LaplaceFit",
    "TransducerDensity",
    "TransducerLaplace",
    "laplace",
    "scale_marginals",
]


def logsumexp(a: np.ndarray, axis: Any = None, keepdims: bool = False) -> Any:
    """``log(sum(exp(a)))`` over ``axis``, shifted by the largest value, as
    ``scipy.special.logsumexp`` for real arrays (all ``-inf``: ``-inf``; any ``+inf``:
    ``+inf``; NaN propagates), without its array-API dispatch: that took 0.34 ms a call,
    over half of a Laplace fit's time in the Hessian's 2 U gradients (five classes, 400
    items: 27 of 55 s, 2026-12-07)."""
    a = np.asarray(a, dtype=float)
    top = np.max(a, axis=axis, keepdims=True)
    top[~np.isfinite(top)] = 0.0
    with np.errstate(divide="ignore", over="ignore"):  # log 0, and exp of an infinite top's row
        out = np.log(np.exp(a - top).sum(axis=axis, keepdims=True)) + top
    if keepdims:
        return out
    return out.reshape(())[()] if axis is None else np.squeeze(out, axis=axis)


def _by_columns(matrices: np.ndarray) -> np.ndarray:
    """(..., rows, columns) matrices flattened column by column, (..., rows x columns): as
    Stan's to_matrix and :meth:`TransducerDensity.unpack` read them."""
    return matrices.swapaxes(-1, -2).reshape(*matrices.shape[:-2], -1)


#: Relative step of the central differences that give the Hessian from the exact gradient.
_HESSIAN_STEP = 1e-5
#: Smallest curvature kept when the Hessian at the mode is not positive definite (an
#: unidentified direction): its draws then spread like a standard Normal, as the prior.
_MIN_CURVATURE = 1.0
#: Curvatures below this count as flat (the mode is a saddle or a ridge in that direction).
_FLAT = 1e-6
#: A calibration row's likelihood relative to its class's heaviest kernel
#: (``kern @ exp(theta - top)``) below which :meth:`TransducerDensity.log_density` reads
#: the point as one of zero density (-inf, gradient NaN): its log-likelihood is below
#: -645 there, which the mode search's trial steps reach and reject on the value, and
#: ``count / lik`` and the gradient's sums over rows stay finite above it (at most
#: 1e4 x 1e280 per row).
_LIK_FLOOR = 1e-280
#: quantities() forms each draw's (rows x classes) likelihood for at most this many
#: draws x rows x classes numbers at a time (160 MB).
_QUANTITY_BLOCK = 20_000_000


class TransducerDensity:
    """The transducer's log posterior density and its gradient in ``u`` (vectorised)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.C = int(data["C"])
        self.K = int(data["K"])
        self.P = int(data["P"])
        self.R = int(data["R"])
        self.cls = np.asarray(data["cls"], dtype=np.int64).reshape(-1) - 1
        self.count = np.asarray(data["count"], dtype=float).reshape(-1)
        self.kern = np.asarray(data["kern"], dtype=float).reshape(-1, self.K)
        # the likelihood's sparse form (stan_data.sparse_kernels): the values kept, placed
        # back in an N x K matrix; kern itself (every value) gives the exact log_lik
        self.kern_full = self.kern
        if int(data.get("kern_sparse", 0)):
            u = np.asarray(data["kern_u"], dtype=np.int64).reshape(-1)
            rows = np.repeat(np.arange(u.size - 1), np.diff(u))
            columns = (np.asarray(data["kern_v"], dtype=np.int64).reshape(-1) - 1) % self.K
            self.kern = np.zeros_like(self.kern_full)
            self.kern[rows, columns] = np.asarray(data["kern_w"], dtype=float).reshape(-1)
        self.kern_log_scale = np.asarray(data["kern_log_scale"], dtype=float).reshape(-1)
        self.fixed = np.asarray(data["fixed_basis"], dtype=float).reshape(self.K, self.P)
        self.fixed_scale = np.asarray(data["fixed_scale"], dtype=float).reshape(self.P)
        self.smooth = np.asarray(data["smooth_basis"], dtype=float).reshape(self.K, self.R)
        self.tau_a_scale = float(data["tau_a_scale"])
        self.tau_f_scale = float(data["tau_f_scale"])
        self.tau_f_df = float(data["tau_f_df"])  # 0: a half-Normal scale
        self.tau_f_floor = float(data.get("tau_f_floor", 0.0))  # 0: no floor
        self.level_scale = float(data.get("level_scale", 0.0))  # 0: no ridge on f's levels
        # the log-odds' prior mean and their fixed part's prior (stan/transducer.stan,
        # odds_*): sd per coefficient, Student-t degrees of freedom (0: Normal), mean function
        self.odds_scale = np.asarray(data.get("odds_scale", self.fixed_scale), float).reshape(
            self.P
        )
        self.odds_df = float(data.get("odds_df", 0.0))
        self.odds_offset = np.asarray(
            data.get("odds_offset", np.zeros((self.K, self.C - 1))), dtype=float
        ).reshape(self.K, self.C - 1)
        # 1: theta[k, c] = a[k] + log softmax(0, f[k])_c (a: all outputs' log-density)
        self.marginal = bool(int(data.get("density_marginal", 0)))
        self.total = float(self.count.sum())
        c1, p1, r = self.C - 1, self.P - 1, self.R
        # conditional whitening (stan/transducer.stan, "Conditional whitening"), one block
        # per scale: column 0 the log density's (tau_a), column c the class c log-odds'
        # (tau_f[c]); the identity rotation with lambda = kappa = 0 is the non-centred model
        rot_f = data.get("white_f")
        self.rotation = np.concatenate([
            np.asarray(data.get("white_a", np.eye(r)), dtype=float).reshape(1, r, r),
            np.broadcast_to(np.eye(r), (c1, r, r)) if rot_f is None
            else np.asarray(rot_f, dtype=float).reshape(c1, r, r),
        ])  # fmt: skip
        self.lam = self._columns(data, "lambda")
        self.kappa = self._columns(data, "kappa")
        sizes = [("a_fixed", p1), ("log_tau_a", 1), ("a_raw", r), ("f_fixed", self.P * c1),
                 ("log_tau_f", c1), ("f_raw", r * c1)]  # fmt: skip
        # group offsets (stan/transducer.stan, "Group offsets"), appended when G > 0
        self.G, self.H = int(data.get("G", 0)), int(data.get("H", 0))
        self.grp = (
            np.asarray(data.get("grp", np.zeros(self.cls.size)), dtype=np.int64).reshape(-1) - 1
        )
        self.parent = np.asarray(data.get("parent", np.zeros(0)), dtype=np.int64).reshape(-1) - 1
        self.tau_g_scale = float(data.get("tau_g_scale", 1.0))
        # the offsets' conditional whitening (stan/transducer.stan, "Group offsets"):
        # (G, C - 1) precisions and linear terms, 0 and 0 the plain non-centred offsets
        shape = (self.G, self.C - 1)
        self.lam_g = np.asarray(data.get("white_g_lambda", np.zeros(shape)), float).reshape(shape)
        self.kappa_g = np.asarray(data.get("white_g_kappa", np.zeros(shape)), float).reshape(shape)
        # each parent's children, as a (H, G) 0/1 matrix: sums over children are products
        self.children = np.zeros((self.H, self.G))
        self.children[self.parent, np.arange(self.G)] = 1.0
        if self.G > 0:
            # the two scales in polar form, log tau and z (stan/transducer.stan,
            # group_log_scales): tau_h = tau sqrt(rho), tau_g = tau sqrt(1 - rho)
            sizes += [("log_tau_pair", c1), ("pair_share", c1), ("e_h", self.H * c1),
                      ("e_g", self.G * c1)]  # fmt: skip
            # each group's items, and each (group, class)'s
            self.group_total = np.bincount(self.grp, weights=self.count, minlength=self.G)
            self.group_class = np.zeros((self.G, self.C))
            np.add.at(self.group_class, (self.grp, self.cls), self.count)
        # local smoothing scales (stan/transducer.stan, "Local smoothing scales"), appended
        # after the groups' block when J > 0: J blocks per class column of M functions.
        # Kept as (C - 1, J, M) arrays: the program's column (c - 1) J + j is [c - 1, j]
        self.J, self.M = int(data.get("J", 0)), int(data.get("M", 0))
        j, m = self.J, self.M
        basis = np.asarray(data.get("local_basis", np.zeros((self.K, j * m))), float)
        self.local_basis = basis.reshape(self.K, j, m)
        rot_l = np.asarray(data.get("white_l", np.broadcast_to(np.eye(j * m), (c1, j * m, j * m))),
                           dtype=float).reshape(c1, j * m, j * m)  # fmt: skip
        # each block's rotation, the diagonal blocks of white_l: (C - 1, J, M, M)
        self.rotation_l = np.stack(
            [rot_l[:, i * m : (i + 1) * m, i * m : (i + 1) * m] for i in range(j)], axis=1
        ) if j else np.zeros((c1, 0, m, m))  # fmt: skip
        # each class's basis with its rotations folded in, (C - 1, K, J, M)
        self.local_f = np.einsum("kjr,cjrs->ckjs", self.local_basis, self.rotation_l)
        self.tau_l_scale = float(data.get("tau_l_scale", 0.0))
        self.tau_l_df = float(data.get("tau_l_df", 0.0))  # 0: half-Normal
        self.lam_l, self.kappa_l = (
            np.asarray(data.get(f"white_l_{name}", np.zeros((m, j * c1))), float)
            .reshape(m, c1, j).transpose(1, 2, 0)
            for name in ("lambda", "kappa")
        )  # fmt: skip
        if j > 0:
            sizes += [("log_tau_l", j * c1), ("e_l", m * j * c1)]
        self.slices: dict[str, slice] = {}
        start = 0
        for name, size in sizes:
            self.slices[name] = slice(start, start + size)
            start += size
        self.size = start

    def _columns(self, data: Mapping[str, Any], name: str) -> np.ndarray:
        """(R, C) whitening vectors: the density's in column 0, the log-odds' after it."""
        r, c1 = self.R, self.C - 1
        a = np.asarray(data.get(f"white_a_{name}", np.zeros(r)), dtype=float).reshape(r, 1)
        f = np.asarray(data.get(f"white_f_{name}", np.zeros((r, c1))), dtype=float).reshape(r, c1)
        return np.concatenate([a, f], axis=1)

    def unpack(self, u: np.ndarray) -> dict[str, np.ndarray]:
        """The blocks of ``u``; matrices are stored column by column, as Stan's to_matrix."""
        c1 = self.C - 1
        s = self.slices
        lead = u.shape[:-1]
        groups: dict[str, np.ndarray] = {}
        if self.G > 0:
            t, z = u[..., s["log_tau_pair"]], u[..., s["pair_share"]]
            groups = {
                "log_tau_pair": t,
                "pair_share": z,
                # stan/transducer.stan, group_log_scales: log tau + log(rho) / 2 and
                # log tau + log(1 - rho) / 2, rho = inv_logit(z)
                "log_tau_h": t - 0.5 * np.logaddexp(0.0, -z),
                "log_tau_g": t - 0.5 * np.logaddexp(0.0, z),
                "e_h": u[..., s["e_h"]].reshape(*lead, c1, self.H).swapaxes(-1, -2),
                "e_g": u[..., s["e_g"]].reshape(*lead, c1, self.G).swapaxes(-1, -2),
            }
        if self.J > 0:  # (..., C - 1, J) log scales, (..., C - 1, J, M) coordinates
            groups["log_tau_l"] = u[..., s["log_tau_l"]].reshape(*lead, c1, self.J)
            groups["e_l"] = u[..., s["e_l"]].reshape(*lead, c1, self.J, self.M)
        return {
            "a_fixed": u[..., s["a_fixed"]],
            "log_tau_a": u[..., s["log_tau_a"]][..., 0],
            "a_raw": u[..., s["a_raw"]],
            "f_fixed": u[..., s["f_fixed"]].reshape(*lead, c1, self.P).swapaxes(-1, -2),
            "log_tau_f": u[..., s["log_tau_f"]],
            "f_raw": u[..., s["f_raw"]].reshape(*lead, c1, self.R).swapaxes(-1, -2),
        } | groups

    def group_blocks(self, u: np.ndarray) -> dict[str, np.ndarray]:
        """The group offsets' pieces (stan/transducer.stan, group_blocks), for one or many
        ``u``: the parents' ``h`` (..., H, C - 1) and the groups' ``b`` (..., G, C - 1),
        their conditional variances ``v_h``, ``v_g``, the sampled ``e_h``, ``e_g``, the
        squared scales ``tau_h2``, ``tau_g2`` (..., 1, C - 1), ``inv_a`` = 1 / (1 + lambda
        tau_g^2) and the parents' linear terms ``linear_h``."""
        p = self.unpack(u)
        tau_h2 = np.exp(2 * p["log_tau_h"])[..., None, :]
        tau_g2 = np.exp(2 * p["log_tau_g"])[..., None, :]
        inv_a = 1.0 / (1.0 + self.lam_g * tau_g2)
        v_h = 1.0 / (self.children @ (self.lam_g * inv_a) + 1.0 / tau_h2)
        linear_h = self.children @ (self.kappa_g * inv_a)
        h = v_h * linear_h + np.sqrt(v_h) * p["e_h"]
        v_g = 1.0 / (self.lam_g + 1.0 / tau_g2)
        b = v_g * (self.kappa_g - self.lam_g * h[..., self.parent, :]) + np.sqrt(v_g) * p["e_g"]
        return {
            "h": h, "b": b, "v_h": v_h, "v_g": v_g, "e_h": p["e_h"], "e_g": p["e_g"],
            "tau_h2": tau_h2, "tau_g2": tau_g2, "inv_a": inv_a, "linear_h": linear_h,
        }  # fmt: skip

    def offsets(self, u: np.ndarray, blocks: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """(..., G, C) group offsets, column 0 zero (stan/transducer.stan, group_offsets)."""
        q = self.group_blocks(u) if blocks is None else blocks
        off = q["h"][..., self.parent, :] + q["b"]
        return np.concatenate([np.zeros((*off.shape[:-1], 1)), off], axis=-1)

    def group_whitened(self, u: np.ndarray, h: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``u`` (..., size) with its offsets' coordinates ``e_h``, ``e_g`` set so that
        the parents' and groups' offsets are ``h`` (..., H, C - 1) and ``b`` (..., G,
        C - 1) at ``u``'s scales: the inverse of :meth:`group_blocks`'s map."""
        out = np.array(u, dtype=float)
        q = self.group_blocks(out)
        e_h = (h - q["v_h"] * q["linear_h"]) / np.sqrt(q["v_h"])
        e_g = (b - q["v_g"] * (self.kappa_g - self.lam_g * h[..., self.parent, :])) / np.sqrt(
            q["v_g"]
        )
        s = self.slices
        out[..., s["e_h"]] = _by_columns(e_h)
        out[..., s["e_g"]] = _by_columns(e_g)
        return out

    def group_likelihood(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each group's likelihood for its offsets at ``u``, as a Normal in each offset
        alone: the precision ``n_g pi_gc (1 - pi_gc)`` (the diagonal of minus the
        Hessian of the multinomial log-likelihood ``sum_c n_gc log pi_gc``) and the linear
        term ``kappa = gradient + lambda off`` (so that the gradient at ``off'`` is about
        ``kappa - lambda off'``), each (G, C - 1): the conditional whitening's data
        (yieldwise.transducer.stan_data.whitening)."""
        theta, off = self.theta(u), self.offsets(u)
        lnz = self.group_log_norm(theta, off)
        share = np.exp(off + logsumexp(theta, axis=0)[None, :] - lnz[:, None])[:, 1:]
        lam = self.group_total[:, None] * share * (1.0 - share)
        gradient = self.group_class[:, 1:] - self.group_total[:, None] * share
        return lam, gradient + lam * off[:, 1:]

    def group_log_norm(self, theta: np.ndarray, off: np.ndarray) -> np.ndarray:
        """(..., G) log sum_c exp(off[g, c]) sum_k exp(theta[k, c])."""
        return logsumexp(logsumexp(theta, axis=-2)[..., None, :] + off, axis=-1)

    def smooth_blocks(self, u: np.ndarray) -> dict[str, np.ndarray]:
        """The smooth coefficients of ``u`` and the pieces of their whitening.

        Column 0 is the log density's block, column c the class c log-odds'; for each,
        with e the sampled coordinates and t the log scale (stan/transducer.stan,
        "Conditional whitening"): ``v = 1 / (lambda + exp(-2 t))``,
        ``tilde = v kappa + sqrt(v) e`` and the coefficients ``b = Q tilde``.
        Returns (..., R, C) arrays ``e, v, tilde, b`` and the (..., C) log scales ``t``.
        """
        p = self.unpack(u)
        e = np.concatenate([p["a_raw"][..., None], p["f_raw"]], axis=-1)
        t = np.concatenate([p["log_tau_a"][..., None], p["log_tau_f"]], axis=-1)
        v = self._variances(t)
        tilde = v * self.kappa + np.sqrt(v) * e
        b = np.einsum("crs,...sc->...rc", self.rotation, tilde)
        out = {"e": e, "t": t, "v": v, "tilde": tilde, "b": b}
        if self.J > 0:  # the local blocks alike (stan/transducer.stan, "Local smoothing
            # scales"): (..., C - 1, J, M) arrays, t_l (..., C - 1, J), and their share
            # odds_l (..., K, C - 1) of the class log-odds
            e_l, t_l = p["e_l"], p["log_tau_l"]
            v_l = 1.0 / (self.lam_l + np.exp(-2.0 * t_l)[..., None])
            tilde_l = v_l * self.kappa_l + np.sqrt(v_l) * e_l
            out |= {
                "e_l": e_l, "t_l": t_l, "v_l": v_l, "tilde_l": tilde_l,
                "b_l": np.einsum("cjrs,...cjs->...cjr", self.rotation_l, tilde_l),
                "odds_l": np.einsum("ckjm,...cjm->...kc", self.local_f, tilde_l),
            }  # fmt: skip
        return out

    def _variances(self, t: np.ndarray) -> np.ndarray:
        """(..., R, C) conditional variances ``1 / (lambda + exp(-2 t))`` of the smooth
        blocks for the (..., C) log scales ``t``."""
        return 1.0 / (self.lam + np.exp(-2.0 * t)[..., None, :])

    def theta(self, u: np.ndarray, blocks: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """(..., K, C) log beta up to its normaliser, for one or many ``u`` (``blocks``:
        :meth:`smooth_blocks` of ``u`` when the caller has it already)."""
        p = self.unpack(u)
        b = (self.smooth_blocks(u) if blocks is None else blocks)["b"]
        # matrix products (BLAS) over the leading draw axis: (..., r) @ (r, k)
        a = b[..., 0] @ self.smooth.T + p["a_fixed"] @ self.fixed[:, 1:].T
        f = self.fixed @ p["f_fixed"] + self.smooth @ b[..., 1:] + self.odds_offset
        if self.J > 0:
            f = f + (self.smooth_blocks(u) if blocks is None else blocks)["odds_l"]
        theta = np.concatenate([a[..., None], a[..., None] + f], axis=-1)
        if self.marginal:
            theta = theta - (logsumexp(theta, axis=-1) - a)[..., None]
        return theta

    def log_density(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        """Log posterior (Stan's target, Jacobians of the log scales included) and gradient
        at one point ``u`` (:meth:`log_densities` of one row)."""
        lp, grad = self.log_densities(np.asarray(u, dtype=float)[None])
        return float(lp[0]), grad[0]

    def log_densities(self, us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`log_density` at each row of ``us`` (B, size): (B,) values and (B, size)
        gradients, every operation over the rows at once (the Hessian's 2 U gradients in
        one call, not 2 U calls of Python's overhead).

        A row whose kept kernels all carry weight 0 in double precision (underflow of
        exp(theta - top), or the kernel matrix's cut, stan_data.KERNEL_TAIL_CUT) has
        density 0, as in Stan's log(lik): its value is -inf and its gradient NaN. The mode
        search's trial steps reach such points (two logits, 3,600 items: 4 of 20 coverage
        fits) and reject them on the value alone; the gradient has no meaning there, and
        computing it would divide by 0 (numpy's RuntimeWarnings reached the user). Rows
        whose likelihood is positive but below _LIK_FLOOR are treated alike: count / lik
        would overflow (votes, 3,600 items: 2 of 18 coverage fits, 2026-11-28). So the
        other rows are computed alone.
        """
        us = np.asarray(us, dtype=float)
        p = self.unpack(us)
        w = self.smooth_blocks(us)  # once, for theta, the prior and the gradient
        groups = self.group_blocks(us) if self.G > 0 else None  # likewise for the offsets
        theta = self.theta(us, w)  # (B, K, C)
        top = theta.max(axis=-2)  # (B, C)
        e = np.exp(theta - top[:, None, :])
        rows = np.arange(self.cls.size)
        lik = (self.kern @ e)[:, rows, self.cls]  # (B, N): each row's own class
        bad = ~np.all(lik > _LIK_FLOOR, axis=-1)
        if bad.any():
            lp, grad = np.full(len(us), -np.inf), np.full(us.shape, np.nan)
            if not bad.all():
                lp[~bad], grad[~bad] = self.log_densities(us[~bad])
            return lp, grad
        log_norm = logsumexp(theta, axis=(-2, -1))  # (B,)
        tau_a = np.exp(p["log_tau_a"])
        tau_f = np.exp(p["log_tau_f"])
        fs = self.fixed_scale
        weight = np.zeros((len(us), self.cls.size, self.C))
        weight[:, rows, self.cls] = self.count / lik
        if self.G == 0:
            ll = (np.log(lik) + top[:, self.cls]) @ self.count - self.total * log_norm
            # d ll / d theta[k, c] = sum_{n: c_n = c} count_n kern[n, k] beta_kc / lik_n
            #                        - total softmax(theta)[k, c]
            normaliser = self.total * np.exp(theta - log_norm[:, None, None])
        else:  # each row's group offset and its group's normaliser (the Stan program)
            off = self.offsets(us, groups)  # (B, G, C)
            lnz = self.group_log_norm(theta, off)  # (B, G)
            ll = (np.log(lik) + top[:, self.cls] + off[:, self.grp, self.cls]
                  - lnz[:, self.grp]) @ self.count  # fmt: skip
            # group g's class shares pi_g(c) = exp(off[g, c] + lse_k theta[k, c] - lnz[g])
            share = np.exp(off + logsumexp(theta, axis=-2)[:, None, :] - lnz[..., None])
            normaliser = (
                np.exp(theta) * (self.group_total @ np.exp(off - lnz[..., None]))[:, None, :]
            )
            g_off = self.group_class - self.group_total[:, None] * share  # (B, G, C)
        lp = ll + self.log_prior(us, w, groups)
        g_theta = (self.kern.T @ weight) * e - normaliser  # (B, K, C)
        g_a = g_theta.sum(axis=-1)
        g_f = g_theta[..., 1:]
        if self.marginal:  # d theta[k, c] / d f_j[k] = [c = j] - softmax(0, f[k])_j
            alpha = np.exp(theta - logsumexp(theta, axis=-1, keepdims=True))  # = softmax(0, f)
            g_f = g_f - alpha[..., 1:] * g_a[..., None]
        if self.level_scale > 0:  # the candidate ridge on f (its value: log_prior)
            g_f = g_f - (theta[..., 1:] - theta[..., :1]) / self.level_scale**2
        # d ll / d b for each block (B, R, C), then through b = Q tilde, tilde(e, t)
        h = self.smooth.T @ np.concatenate([g_a[..., None], g_f], axis=-1)
        v, tilde, inv_tau2 = w["v"], w["tilde"], np.exp(-2.0 * w["t"])  # inv_tau2 (B, C)
        g_tilde = np.einsum("crs,...rc->...sc", self.rotation, h) - tilde * inv_tau2[:, None]
        # d tilde / d t = (2 v^2 kappa + v^(3/2) e) exp(-2 t)
        d_tilde = (2 * v**2 * self.kappa + v**1.5 * w["e"]) * inv_tau2[:, None]
        g_t = (
            np.sum(g_tilde * d_tilde, axis=-2)
            + np.sum(tilde**2, axis=-2) * inv_tau2  # the prior's explicit t
            - self.R
            + np.sum(v, axis=-2) * inv_tau2  # the whitening's log Jacobian
            + np.concatenate(
                [-((tau_a[:, None] / self.tau_a_scale) ** 2), self._tau_f_slope(tau_f)], axis=-1
            )
            + 1
        )
        g_e = np.sqrt(v) * g_tilde
        grad = np.empty_like(us)
        s = self.slices
        b_rows = len(us)
        if self.J > 0:  # the local blocks, by the same chain rule (B, C - 1, J, M)
            v_l, tilde_l, inv_l = w["v_l"], w["tilde_l"], np.exp(-2.0 * w["t_l"])[..., None]
            g_tilde_l = np.einsum("ckjm,...kc->...cjm", self.local_f, g_f) - tilde_l * inv_l
            d_tilde_l = (2 * v_l**2 * self.kappa_l + v_l**1.5 * w["e_l"]) * inv_l
            tau_l = np.exp(w["t_l"])
            grad[:, s["log_tau_l"]] = (
                np.sum(g_tilde_l * d_tilde_l + (tilde_l**2 + v_l) * inv_l, axis=-1)
                - self.M
                + self._tau_l_slope(tau_l)
                + 1
            ).reshape(b_rows, -1)
            grad[:, s["e_l"]] = (np.sqrt(v_l) * g_tilde_l).reshape(b_rows, -1)
        grad[:, s["a_fixed"]] = g_a @ self.fixed[:, 1:] - p["a_fixed"] / fs[1:] ** 2
        grad[:, s["a_raw"]] = g_e[..., 0]
        grad[:, s["log_tau_a"]] = g_t[:, :1]
        # matrices column by column, as unpack reads them
        grad[:, s["f_fixed"]] = _by_columns(
            self.fixed.T @ g_f + self._odds_fixed_slope(p["f_fixed"])
        )
        grad[:, s["f_raw"]] = _by_columns(g_e[..., 1:])
        grad[:, s["log_tau_f"]] = g_t[:, 1:]
        if self.G > 0:
            grad[:, s["e_h"]], grad[:, s["e_g"]], g_t_h, g_t_g = self._group_gradient(
                groups, g_off[..., 1:]
            )
            # through (log tau, z) -> (log tau_h, log tau_g): d/d log tau = g_h + g_g,
            # d/dz = (1 - rho) g_h / 2 - rho g_g / 2
            rho = expit(p["pair_share"])
            grad[:, s["log_tau_pair"]] = g_t_h + g_t_g
            grad[:, s["pair_share"]] = 0.5 * ((1.0 - rho) * g_t_h - rho * g_t_g)
        return lp, grad

    def _group_gradient(
        self, q: Mapping[str, np.ndarray], d_off: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """The gradient in the group block's coordinates ``e_h``, ``e_g`` (flattened column
        by column), ``log tau_h`` and ``log tau_g``, at each of B points, given their
        :meth:`group_blocks` ``q`` and ``d_off`` (B, G, C - 1), the likelihood's gradient in
        the offsets: by the chain rule through that map (stan/transducer.stan, "Group
        offsets"), with the prior and log Jacobian of :meth:`log_prior`."""
        h, b, v_h, v_g = q["h"], q["b"], q["v_h"], q["v_g"]
        e_h, e_g, tau_h2, tau_g2, inv_a = q["e_h"], q["e_g"], q["tau_h2"], q["tau_g2"], q["inv_a"]
        lam, kappa, parent, children = self.lam_g, self.kappa_g, self.parent, self.children
        # explicit derivatives in b and h (b held fixed), prior included
        g_b = d_off - b / tau_g2
        g_h_explicit = children @ d_off - h / tau_h2
        # h's total derivative, through b's dependence on h as well
        g_h = g_h_explicit + children @ (g_b * -(v_g * lam))
        g_e_g = g_b * np.sqrt(v_g)
        g_e_h = g_h * np.sqrt(v_h)
        # log tau_h: v_h = 1 / (Lambda + tau_h^-2), d v_h / d t_h = 2 v_h^2 tau_h^-2
        dh_dt_h = (2 * v_h**2 * q["linear_h"] + v_h**1.5 * e_h) / tau_h2
        g_t_h = (
            np.sum(g_h * dh_dt_h + h**2 / tau_h2 - 1.0 + v_h / tau_h2, axis=-2)
            - tau_h2[..., 0, :] / self.tau_g_scale**2
            + 1.0
        )
        # log tau_g, directly through b (v_g) and through h (Lambda and the linear term)
        residual = kappa - lam * h[..., parent, :]
        db_dt_g = (2 * v_g**2 * residual + v_g**1.5 * e_g) / tau_g2
        d_inv_a = -2.0 * lam * tau_g2 * inv_a**2  # d (1 / A_g) / d t_g
        d_lambda_h = children @ (lam * d_inv_a)  # d Lambda_p / d t_g
        d_linear_h = children @ (kappa * d_inv_a)  # d K_p / d t_g
        dh_dlambda = -(v_h**2) * q["linear_h"] - 0.5 * v_h**1.5 * e_h  # d h / d Lambda
        g_t_g = (
            np.sum(g_b * db_dt_g + b**2 / tau_g2 - 1.0 + v_g / tau_g2, axis=-2)
            + np.sum(g_h * (dh_dlambda * d_lambda_h + v_h * d_linear_h), axis=-2)
            - 0.5 * np.sum(v_h * d_lambda_h, axis=-2)
            - tau_g2[..., 0, :] / self.tau_g_scale**2
            + 1.0
        )
        return _by_columns(g_e_h), _by_columns(g_e_g), g_t_h, g_t_g

    def start(self, init: Mapping[str, Any] | None) -> np.ndarray:
        """``u`` from the sampler's initial values (``stan_data.initial_values``)."""
        u = np.zeros(self.size)
        s = self.slices
        if self.G > 0:  # the offsets start at 0, both scales at a fifth of their prior's
            # (tau_h = tau_g: rho = 1/2, tau = sqrt(2) times that)
            u[s["log_tau_pair"]] = np.log(0.2 * self.tau_g_scale) + 0.5 * np.log(2.0)
        if self.J > 0:  # the local scales at a fifth of their prior's, their blocks at 0
            u[s["log_tau_l"]] = np.log(0.2 * self.tau_l_scale)
        if init is None:
            u[s["log_tau_a"]] = np.log(0.2 * self.tau_a_scale)
            u[s["log_tau_f"]] = np.log(0.2 * self.tau_f_scale)
            return u
        tau_a = float(np.asarray(init["tau_a"]))
        tau_f = np.asarray(init["tau_f"], dtype=float).reshape(self.C - 1)
        # a_smooth is the coefficient b of the density; f_raw is the non-centred b / tau_f
        a_smooth = np.asarray(init["a_smooth"], dtype=float).reshape(-1)
        f_raw = np.asarray(init["f_raw"], dtype=float).reshape(self.R, self.C - 1)
        u[s["a_fixed"]] = np.asarray(init["a_fixed"], dtype=float).reshape(-1)
        u[s["log_tau_a"]] = np.log(tau_a)
        u[s["f_fixed"]] = np.asarray(init["f_fixed"], dtype=float).reshape(self.P, -1).ravel("F")
        u[s["log_tau_f"]] = np.log(tau_f)
        return self.whitened(u, np.column_stack([a_smooth, f_raw * tau_f[None, :]]))

    def whitened(
        self, u: np.ndarray, b: np.ndarray, local_b: np.ndarray | None = None
    ) -> np.ndarray:
        """``u`` (..., size) with its smooth coordinates set so that the coefficients are
        ``b`` (..., R, C), and the local blocks' ``local_b`` (..., C - 1, J, M) when given:
        the inverse of :meth:`smooth_blocks`'s map, for one or many."""
        out = np.array(u, dtype=float)
        if local_b is not None and self.J > 0:
            t_l = out[..., self.slices["log_tau_l"]].reshape(*out.shape[:-1], self.C - 1, self.J)
            v_l = 1.0 / (self.lam_l + np.exp(-2.0 * t_l)[..., None])
            tilde_l = np.einsum("cjrs,...cjr->...cjs", self.rotation_l, local_b)
            e_l = (tilde_l - v_l * self.kappa_l) / np.sqrt(v_l)
            out[..., self.slices["e_l"]] = e_l.reshape(*out.shape[:-1], -1)
        t = np.concatenate([out[..., self.slices["log_tau_a"]], out[..., self.slices["log_tau_f"]]],
                           axis=-1)  # fmt: skip
        v = self._variances(t)
        e = (np.einsum("crs,...rc->...sc", self.rotation, b) - v * self.kappa) / np.sqrt(v)
        out[..., self.slices["a_raw"]] = e[..., 0]
        out[..., self.slices["f_raw"]] = _by_columns(e[..., 1:])
        return out

    def log_prior(
        self,
        us: np.ndarray,
        blocks: Mapping[str, np.ndarray] | None = None,
        groups: Mapping[str, np.ndarray] | None = None,
    ) -> np.ndarray:
        """The prior and Jacobian terms of :meth:`log_density` for each row of ``us``
        (``blocks``, ``groups``: :meth:`smooth_blocks` and :meth:`group_blocks` of ``us``
        when the caller has them already)."""
        p = self.unpack(us)
        fs = self.fixed_scale
        tau_a = np.exp(p["log_tau_a"])
        tau_f = np.exp(p["log_tau_f"])
        w = self.smooth_blocks(us) if blocks is None else blocks
        # b ~ N(0, tau^2 I) with |b| = |tilde|, plus the log Jacobian of e -> tilde
        smooth = (
            -0.5 * np.sum(w["tilde"] ** 2, axis=-2) * np.exp(-2.0 * w["t"])
            - self.R * w["t"]
            + 0.5 * np.sum(np.log(w["v"]), axis=-2)
        )
        out = (
            -0.5 * np.sum((p["a_fixed"] / fs[1:]) ** 2, axis=-1)
            + self._odds_fixed_log_prior(p["f_fixed"])
            + np.sum(smooth, axis=-1)
            - 0.5 * (tau_a / self.tau_a_scale) ** 2
            + p["log_tau_a"]
            + self._tau_f_log_prior(tau_f)
            + np.sum(p["log_tau_f"], axis=-1)
        )
        if self.G > 0:  # h ~ N(0, tau_h^2), b ~ N(0, tau_g^2), the whitening's log
            # Jacobian; half-Normal scales on the log scale, with their Jacobian
            q = self.group_blocks(us) if groups is None else groups
            log_tau = np.concatenate([p["log_tau_h"], p["log_tau_g"]], axis=-1)
            out = out + (
                -0.5 * np.sum(q["h"] ** 2 / q["tau_h2"], axis=(-2, -1))
                - 0.5 * np.sum(q["b"] ** 2 / q["tau_g2"], axis=(-2, -1))
                - self.H * np.sum(p["log_tau_h"], axis=-1)
                - self.G * np.sum(p["log_tau_g"], axis=-1)
                + 0.5 * np.sum(np.log(q["v_h"]), axis=(-2, -1))
                + 0.5 * np.sum(np.log(q["v_g"]), axis=(-2, -1))
                - 0.5 * np.sum(np.exp(2 * log_tau), axis=-1) / self.tau_g_scale**2
                + np.sum(log_tau, axis=-1)
            )
        if self.J > 0:  # the local blocks' prior, Jacobian and half-Normal scales
            inv_l = np.exp(-2.0 * w["t_l"])
            out = out + np.sum(
                -0.5 * np.sum(w["tilde_l"] ** 2, axis=-1) * inv_l
                - self.M * w["t_l"]
                + 0.5 * np.sum(np.log(w["v_l"]), axis=-1)
                + self._tau_l_log_prior(np.exp(w["t_l"]))
                + w["t_l"],
                axis=(-2, -1),
            )
        if self.level_scale > 0:  # the candidate ridge on f[k, c] = theta[k, c] - theta[k, 0]
            theta = self.theta(us, w)
            f_levels = theta[..., 1:] - theta[..., :1]
            out = out - 0.5 * np.sum(f_levels**2, axis=(-2, -1)) / self.level_scale**2
        return out

    def _tau_l_log_prior(self, tau_l: np.ndarray) -> np.ndarray:
        """Log prior of each local sd (elementwise), up to its constant: half-Normal(0,
        scale), or with ``tau_l_df`` > 0 half-Student-t(df, 0, scale)."""
        q = (tau_l / self.tau_l_scale) ** 2
        if self.tau_l_df == 0:
            return -0.5 * q
        return -0.5 * (self.tau_l_df + 1.0) * np.log1p(q / self.tau_l_df)

    def _tau_l_slope(self, tau_l: np.ndarray) -> np.ndarray:
        """Derivative of :meth:`_tau_l_log_prior` with respect to ``log tau_l``."""
        q = (tau_l / self.tau_l_scale) ** 2
        if self.tau_l_df == 0:
            return -q
        return -(self.tau_l_df + 1.0) * (q / self.tau_l_df) / (1.0 + q / self.tau_l_df)

    def _odds_fixed_log_prior(self, f_fixed: np.ndarray) -> np.ndarray:
        """Log prior of the log-odds' fixed coefficients (..., P, C - 1), summed, up to its
        constant: Normal(0, odds_scale), or with ``odds_df`` > 0 Student-t(df, 0,
        odds_scale), ``-(df + 1) / 2 log(1 + (x / s)^2 / df)`` each."""
        x = f_fixed / self.odds_scale[:, None]
        if self.odds_df == 0:
            return -0.5 * np.sum(x**2, axis=(-2, -1))
        return np.sum(-0.5 * (self.odds_df + 1.0) * np.log1p(x**2 / self.odds_df), axis=(-2, -1))

    def _odds_fixed_slope(self, f_fixed: np.ndarray) -> np.ndarray:
        """Gradient of :meth:`_odds_fixed_log_prior` in the coefficients (P, C - 1)."""
        s2 = self.odds_scale[:, None] ** 2
        if self.odds_df == 0:
            return -f_fixed / s2
        return -(self.odds_df + 1.0) * f_fixed / (self.odds_df * s2 + f_fixed**2)

    def _tau_f_log_prior(self, tau_f: np.ndarray) -> np.ndarray:
        """Log prior of ``tau_f`` (..., C - 1), summed over the classes, up to its constant
        (Stan's ``~``): half-Student-t(df, 0, scale), ``-(df + 1) / 2 log(1 + (tau /
        scale)^2 / df)`` per class; for ``df`` 0 the half-Normal's ``-(tau / scale)^2 / 2``
        (written as before the half-t existed, so that those fits reproduce exactly)."""
        if self.tau_f_df == 0:
            out = -0.5 * np.sum((tau_f / self.tau_f_scale) ** 2, axis=-1)
        else:
            q = (tau_f / self.tau_f_scale) ** 2 / self.tau_f_df
            out = np.sum(-0.5 * (self.tau_f_df + 1.0) * np.log1p(q), axis=-1)
        if self.tau_f_floor > 0:  # the soft floor: log(1 - exp(-x)), x = (tau / floor)^2
            x = (tau_f / self.tau_f_floor) ** 2
            out = out + np.sum(np.log(-np.expm1(-x)), axis=-1)
        return out

    def _tau_f_slope(self, tau_f: np.ndarray) -> np.ndarray:
        """Derivative of :meth:`_tau_f_log_prior` with respect to ``log tau_f``."""
        if self.tau_f_df == 0:
            out = -((tau_f / self.tau_f_scale) ** 2)
        else:
            q = (tau_f / self.tau_f_scale) ** 2 / self.tau_f_df
            out = -(self.tau_f_df + 1.0) * q / (1.0 + q)
        if self.tau_f_floor > 0:  # d log(1 - exp(-x)) / d log tau = 2 x / (exp(x) - 1),
            # written with exp(-x), which cannot overflow
            x = (tau_f / self.tau_f_floor) ** 2
            out = out + 2.0 * x * np.exp(-x) / -np.expm1(-x)
        return out

    def hessian(self, u: np.ndarray) -> np.ndarray:
        """Central differences of the exact gradient, symmetrised."""
        h = _HESSIAN_STEP * np.maximum(1.0, np.abs(u))
        # the 2 U gradients in blocks of at most _QUANTITY_BLOCK rows x classes numbers
        step = max(1, _QUANTITY_BLOCK // max(1, self.cls.size * self.C))
        return _difference_hessian(lambda us: self.log_densities(us)[1], u, h, step)

    def _log_rows(
        self, kern: np.ndarray, block: np.ndarray, theta: np.ndarray, shift: np.ndarray
    ) -> np.ndarray:
        """log of each calibration row's likelihood under its own class, (draws, N):
        ``kern @ exp(theta - top)`` plus the shift back (``shift``: each class column's
        top minus the draw's normaliser). Where even that underflows to 0 (a row whose
        kernels' weights lie more than ~745 nats below its class's largest, as a lattice
        bin far beyond the grid in a draw from the approximation's tail), those entries
        are computed again as a log-sum-exp over the row's kernels."""
        rows = np.arange(self.cls.size)
        out = np.log((kern @ block)[:, rows, self.cls]) + shift
        draw, row = np.nonzero(~np.isfinite(out))
        if draw.size:
            with np.errstate(divide="ignore"):
                log_kern = np.log(kern[row])  # (bad, K)
            column = theta[draw, :, self.cls[row]]  # (bad, K): each row's class column
            # shift = top - log_norm, top the column's largest: log_norm = top - shift
            out[draw, row] = (
                logsumexp(log_kern + column, axis=1) - column.max(axis=1) + shift[draw, row]
            )
        return out

    def quantities(self, us: np.ndarray) -> dict[str, np.ndarray]:
        """Parameters and generated quantities of each row of ``us`` (S, size), as Stan's."""
        p = self.unpack(us)
        blocks = self.smooth_blocks(us)
        theta = self.theta(us, blocks)  # (S, K, C)
        log_norm = logsumexp(theta, axis=(1, 2), keepdims=True)
        beta = np.exp(theta - log_norm)
        w = beta.sum(axis=2)
        alpha = np.exp(theta - logsumexp(theta, axis=2, keepdims=True))
        log_lik = np.empty(us.shape[0])
        gap = np.zeros(us.shape[0])  # what the values left out of the sparse form add
        # a block of draws at a time: (S, N, C) whole was a fit's peak, 916 MB at ten
        # classes, 10,000 items and 4,000 draws
        step = max(1, _QUANTITY_BLOCK // max(1, self.cls.size * self.C))
        with np.errstate(divide="ignore"):
            for a in range(0, us.shape[0], step):
                # each class column shifted by its largest theta, as the Stan program's
                # likelihood is: beta itself can underflow to 0 at every kernel a row
                # reaches (a lattice bin far beyond the grid), and log 0 made the
                # log-likelihood -inf and the cut gap NaN
                theta_a = theta[a : a + step]
                top = theta_a.max(axis=1, keepdims=True)  # (s, 1, C)
                block = np.exp(theta_a - top)
                shift = (top[:, 0, :] - log_norm[a : a + step, 0])[:, self.cls]  # (s, N)
                log_row = self._log_rows(self.kern_full, block, theta_a, shift)
                log_lik[a : a + step] = log_row @ self.count
                if self.kern is not self.kern_full:
                    cut = self._log_rows(self.kern, block, theta_a, shift)
                    gap[a : a + step] = (log_row - cut) @ self.count
            log_lik += float(self.count @ self.kern_log_scale)
        tau_a = np.exp(p["log_tau_a"])
        tau_f = np.exp(p["log_tau_f"])
        b = blocks["b"]
        offset = np.zeros((us.shape[0], self.G, self.C))
        if self.G > 0:  # each row's offset and its group's normaliser (the Stan program)
            offset = self.offsets(us)
            lnz = self.group_log_norm(theta, offset)  # (S, G)
            log_lik = (
                log_lik
                + (offset[:, self.grp, self.cls] + log_norm.reshape(-1, 1) - lnz[:, self.grp])
                @ self.count
            )
        return {
            "group_offset": offset,
            "a_fixed": p["a_fixed"],
            "tau_a": tau_a,
            "a_smooth": b[..., 0],
            "f_fixed": p["f_fixed"],
            "tau_f": tau_f,
            "f_raw": b[..., 1:] / tau_f[:, None, :],  # non-centred
            "theta": theta,
            "w": w,
            "alpha": alpha,
            "log_lik": log_lik,
            "log_lik_cut_gap": gap,
        }


@dataclass(frozen=True)
class LaplaceFit:
    """The Normal approximation ``u = mode + scale @ z``, ``z ~ N(0, I)``, with
    ``scale = vectors * sd``: the inverse Hessian's orthonormal eigenvectors and the square
    roots of its eigenvalues (from :func:`scale_marginals`: ``mode`` is the Normal's centre,
    not the posterior mode, and ``scale`` its covariance's factor)."""

    mode: np.ndarray
    vectors: np.ndarray
    sd: np.ndarray
    #: minus the Hessian at the mode, flat directions given curvature _MIN_CURVATURE
    precision: np.ndarray
    lp_mode: float
    flat: int
    result: Any

    @property
    def scale(self) -> np.ndarray:
        """``vectors * sd``: ``scale @ scale.T`` is the inverse Hessian."""
        return self.vectors * self.sd


def laplace(
    data: Mapping[str, Any],
    init: Mapping[str, Any] | None = None,
    model: TransducerDensity | None = None,
    *,
    start: np.ndarray | None = None,
) -> LaplaceFit:
    """The posterior mode of the transducer's model in ``u`` and the Normal around it.

    Raises :class:`SamplingError` when no finite mode is found.
    """
    model = TransducerDensity(data) if model is None else model

    def negatives(us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lp, grad = model.log_densities(us)
        return -lp, -grad

    first = model.start(init) if start is None else np.asarray(start, dtype=float)
    found = _minimum(negatives, first, 500)
    mode = found.x
    lp_mode, grad = model.log_density(mode)
    if not np.isfinite(lp_mode) or not np.all(np.isfinite(grad)):
        raise SamplingError(
            "the Laplace approximation found no finite posterior mode "
            f"({found.message}); fit with backend='pystan' or 'cmdstanpy'"
        )
    values, vectors = np.linalg.eigh(-model.hessian(mode))
    flat = values < _FLAT
    values = np.where(flat, _MIN_CURVATURE, values)
    precision = (vectors * values) @ vectors.T
    return LaplaceFit(
        mode, vectors, 1 / np.sqrt(values), precision, float(lp_mode), int(flat.sum()), found
    )


#: The smoothing scales' marginals (:func:`scale_marginals`): the grid's step, as a share of
#: the scale's sd under the mode's Normal (sums over a grid of step <= 0.6 sd are exact to
#: far below a per cent for a smooth, roughly Normal density: the trapezoid rule's error
#: falls as exp(-2 pi^2 sd^2 / step^2)), and how far below the grid's highest point (in
#: log density) the walk from the mode stops, each way; at most _MARGINAL_POINTS points
#: a side.
_MARGINAL_STEP = 0.6
_MARGINAL_DROP = 9.0
_MARGINAL_POINTS = 25
#: :class:`TransducerLaplace` replaces the mode's Normal by :func:`scale_marginals`' for
#: models of at most this many coordinates. Each grid point costs a conditional mode and
#: a Hessian (2 U gradients): 1.3-5.7 s a fit at U = 61 (one output dimension, 300-3,600
#: items; 2026-12-05), where a 2-D grid's U = 393 would cost minutes. (Measured before the
#: Hessian's gradients were batched, 2026-12-07: a five-class fit with pair offsets went
#: from 55 to 17 s; whether 2-D grids can now afford the marginals is not measured.)
MARGINAL_MAX_SIZE = 160


#: :func:`_minimum` takes whole Hessians (scipy's "trust-exact") for at most this many
#: coordinates and Hessian-vector products ("trust-ncg") beyond. A whole Hessian costs 2 U
#: gradients in a few batched calls, a product 2 in one call, and the exact subproblem
#: needs fewer steps: the mode searches of the shipped digits' preconditioning
#: (2026-12-07, one fit each, seconds of trust-ncg -> trust-exact): the forest votes and
#: k-NN-free joint fit of forest and two logits at U = 27, 4.10 -> 1.30 and 1.04 -> 0.22;
#: forest votes at U = 61, 0.39 -> 0.38 and 0.05 -> 0.04; two logits at U = 393, 2.31 ->
#: 12.7 and 0.28 -> 4.2. The modes agree to 1e-8-5e-6.
_EXACT_NEWTON_MAX_SIZE = 48
#: A whole Hessian's 2 U gradients are asked for in calls of at most this many points
#: (each call's arrays grow with its points; a product's call has 2).
_HESSIAN_POINTS = 16


def _difference_hessian(gradients: Any, u: np.ndarray, h: np.ndarray, block: int) -> np.ndarray:
    """The Hessian at ``u`` by central differences of an exact gradient, symmetrised:
    ``gradients`` (rows of points -> their gradients) at ``u +- h_j e_j``, the 2 U points
    asked for in calls of at most ``block``."""
    points = np.concatenate([u + np.diag(h), u - np.diag(h)])  # row j: u +- h_j e_j
    grads = np.concatenate([gradients(points[a : a + block])
                            for a in range(0, len(points), block)])  # fmt: skip
    out = (grads[: u.size] - grads[u.size :]) / (2 * h)[:, None]  # row j: d grad / d u_j
    return 0.5 * (out + out.T)


def _minimum(negatives: Any, start: np.ndarray, maxiter: int) -> Any:
    """scipy's trust-region Newton search for the minimum of a function given as
    ``negatives`` (rows of points -> their values and exact gradients). Up to
    :data:`_EXACT_NEWTON_MAX_SIZE` coordinates its Hessian is whole, by central differences
    of the gradient at 2 U points asked for in batches; beyond, only Hessian-vector
    products, the same differences at two points from one call (a Newton step's products
    were half a Laplace fit's time)."""
    from scipy.optimize import minimize  # here, not at import: the backends load on every CLI call

    def negative(x: np.ndarray) -> tuple[float, np.ndarray]:
        values, grads = negatives(x[None])
        return float(values[0]), grads[0]

    def curvature(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        h = _HESSIAN_STEP * max(1.0, float(np.abs(u).max())) / max(float(np.abs(v).max()), 1e-300)
        up, down = negatives(np.stack([u + h * v, u - h * v]))[1]
        return (up - down) / (2 * h)

    def whole(u: np.ndarray) -> np.ndarray:  # curvature's products along every axis
        h = np.full(u.size, _HESSIAN_STEP * max(1.0, float(np.abs(u).max())))
        return _difference_hessian(lambda us: negatives(us)[1], u, h, _HESSIAN_POINTS)

    options = {"maxiter": maxiter, "gtol": 1e-6}
    if np.size(start) <= _EXACT_NEWTON_MAX_SIZE:
        return minimize(negative, start, jac=True, hess=whole, method="trust-exact",
                        options=options)  # fmt: skip
    return minimize(negative, start, jac=True, hessp=curvature, method="trust-ncg",
                    options=options)  # fmt: skip


def _conditional_mode(
    model: Any, start: np.ndarray, fixed: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, float]:
    """The mode of ``model``'s log density over the coordinates not in ``fixed``, those
    held at ``values``, from ``start``: (the whole point, its log density)."""
    rest = np.setdiff1d(np.arange(start.size), fixed)
    base = np.array(start, dtype=float)
    base[fixed] = values

    def negatives(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        us = np.repeat(base[None], len(xs), axis=0)
        us[:, rest] = xs
        lp, grad = model.log_densities(us)
        return -lp, -grad[:, rest]

    found = _minimum(negatives, base[rest], 200)
    u = base.copy()
    u[rest] = found.x
    return u, -float(found.fun)


def scale_marginals(model: Any, fit: LaplaceFit, scales: np.ndarray) -> LaplaceFit | None:
    """The Normal approximation with the log smoothing scales ``scales`` (indices into
    ``u``) at their Laplace marginals instead of the joint mode; None if a conditional mode
    is not finite. ``model``: a :class:`TransducerDensity`, or anything with its
    ``log_density``, ``log_densities`` and ``hessian``.

    The joint mode puts a smoothing scale where the prior's and the coefficients' densities
    peak together, which on the panel's 1-D sets lies 0.3-1.8 log units (up to 2.6 of the
    Normal's sds) below the sampler's posterior mean of ``log tau_f``: on beta, n = 3,600,
    repetition 22 of the coverage study, mode 0.54, NUTS 2.22 (sd 0.98). The marginal of
    each scale ``s`` is the Laplace approximation over the other coordinates ``x``
    (Tierney and Kadane 1986; the INLA of Rue, Martino and Chopin 2009),

        p(s | D) ~ p(s, x^(s) | D) |-H_xx(s)|^(-1/2),   x^(s) the conditional mode,

    on a grid of step :data:`_MARGINAL_STEP` times its sd under the mode's Normal, walked
    from the mode both ways until it falls
    :data:`_MARGINAL_DROP` below its highest point (the other scales free); its mean ``m``
    and variance ``v`` are the grid's sums (the density's values at the points, so no
    Sheppard correction: for a smooth density the sums are far closer than it). On that set:
    2.29 (sd 0.96). Exact where ``x`` given ``s`` is Normal (tests/test_laplace.py checks a
    log-Gamma scale against its digamma and trigamma). The Normal returned is
    ``s ~ N(m, diag(v))``, ``x | s ~ N(x^(m) + S (s - m), (-H_xx)^-1)``, with the slope ``S``
    of the conditional mode by central differences and ``H`` at ``(m, x^(m))``; ``mode``
    holds its centre. The scales' mutual covariance is left at 0 (each marginal is found
    with the others free).
    """
    scales = np.asarray(scales, dtype=np.int64)
    u0 = np.asarray(fit.mode, dtype=float)
    rest = np.setdiff1d(np.arange(u0.size), scales)
    means, variances = np.empty(scales.size), np.empty(scales.size)
    mode_sd = np.sqrt(np.sum((fit.vectors * fit.sd) ** 2, axis=1))
    for j, i in enumerate(scales):
        one = np.array([i])
        other = np.setdiff1d(np.arange(u0.size), one)
        width = _MARGINAL_STEP * mode_sd[i]
        grid: dict[float, float] = {}
        for sign in (-1.0, 1.0):
            u, best = u0, -np.inf
            for step in range(_MARGINAL_POINTS):
                s = float(u0[i] + sign * (step + (sign > 0)) * width)
                u, lp = _conditional_mode(model, u, one, np.array([s]))
                ld = np.linalg.slogdet(-model.hessian(u)[np.ix_(other, other)])
                if not np.isfinite(lp) or ld[0] <= 0:
                    return None
                grid[s] = lp - 0.5 * ld[1]
                best = max(best, grid[s])
                if grid[s] < best - _MARGINAL_DROP:
                    break
        points = np.array(sorted(grid))
        log_w = np.array([grid[s] for s in points])
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        means[j] = w @ points
        variances[j] = w @ (points - means[j]) ** 2
    centre, _ = _conditional_mode(model, u0, scales, means)
    slope = np.empty((rest.size, scales.size))
    for j in range(scales.size):
        h = 0.25 * np.sqrt(variances[j]) * (np.arange(scales.size) == j)
        up = _conditional_mode(model, centre, scales, means + h)[0]
        down = _conditional_mode(model, centre, scales, means - h)[0]
        slope[:, j] = (up[rest] - down[rest]) / (2 * h[j])
    precision = -model.hessian(centre)
    conditional = np.linalg.inv(precision[np.ix_(rest, rest)])
    cov = np.zeros((u0.size, u0.size))
    shared = slope * variances  # Cov(x, s) = S diag(v)
    cov[np.ix_(rest, rest)] = conditional + shared @ slope.T
    cov[np.ix_(rest, scales)] = shared
    cov[np.ix_(scales, rest)] = shared.T
    cov[scales, scales] = variances
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    if not np.all(np.isfinite(values)) or values.min() <= 0:
        return None
    return LaplaceFit(
        centre, vectors, np.sqrt(values), (vectors / values) @ vectors.T,
        float(model.log_density(centre)[0]), fit.flat, fit.result,
    )  # fmt: skip


class TransducerLaplace(CompiledProgram):
    """``stan/transducer.stan``'s model, approximated by a Normal at its mode."""

    backend_name = "laplace"

    def __init__(self, stan_file: Path) -> None:
        self.stan_file = stan_file

    def _run(
        self,
        data: Mapping[str, Any],
        settings: Mapping[str, Any],
        inits: list[dict[str, Any]] | None,
        progress: bool,
    ) -> SampleResult:
        started = time.perf_counter()
        model = TransducerDensity(data)
        chains, n_draws = int(settings["chains"]), int(settings["draws"])
        if int(data.get("preconditioned", 0)):  # the mode and scale were found already
            centre = np.asarray(data["u_centre"], dtype=float)
            lp_centre = model.log_density(centre)[0]
            vectors, sd = np.asarray(data["u_basis"], float), np.asarray(data["u_sd"], float)
            precision = (vectors / sd**2) @ vectors.T
            fit = LaplaceFit(centre, vectors, sd, precision, lp_centre, 0, None)
        else:
            fit = laplace(data, inits[0] if inits and "z" not in inits[0] else None, model)
        marginals = None
        if model.size <= MARGINAL_MAX_SIZE:  # the smoothing scales at their marginals
            scales = np.r_[np.arange(model.size)[model.slices["log_tau_a"]],
                           np.arange(model.size)[model.slices["log_tau_f"]]]  # fmt: skip
            marginals = scale_marginals(model, fit, scales)
        fit = fit if marginals is None else marginals
        mode, lp_mode, found, flat = fit.mode, fit.lp_mode, fit.result, fit.flat
        rng = np.random.default_rng(int(settings["seed"]))
        z = rng.standard_normal((chains * n_draws, model.size))
        us = mode + z @ fit.scale.T
        out = model.quantities(us)
        draws = {name: v.reshape(chains, n_draws, *v.shape[1:]) for name, v in out.items()}
        shape = (chains, n_draws)
        # Stan's lp__: the likelihood the program samples (sparse form: less the gap)
        lp = (out["log_lik"] - out["log_lik_cut_gap"] - float(model.count @ model.kern_log_scale)
              + model.log_prior(us))  # fmt: skip
        # the approximation's log density at each draw (Stan's "energy" has no analogue)
        log_q = -0.5 * np.sum(z**2, axis=1).reshape(shape)
        pareto_k = _pareto_k(lp.reshape(-1) - lp_mode - log_q.reshape(-1))
        stats = {
            "lp": lp.reshape(shape),
            "diverging": np.zeros(shape, dtype=bool),
            "tree_depth": np.zeros(shape, dtype=np.int64),
            "n_steps": np.zeros(shape, dtype=np.int64),
            "step_size": np.zeros(shape),  # no leapfrog steps were taken
            "energy": -(lp_mode + log_q),
            "acceptance_rate": np.ones(shape),
        }
        return SampleResult(
            draws=draws,
            sample_stats=stats,
            backend="laplace",
            backend_version=LaplaceBackend().version(),
            stan_version="-",
            settings={
                **settings,
                "approximation": "laplace",
                "optimizer_iterations": int(found.nit) if found is not None else 0,
                "flat_directions": flat,
                "pareto_k": pareto_k,
                "scale_marginals": marginals is not None,
            },
            sampling_seconds=time.perf_counter() - started,
        )


def _pareto_k(log_ratio: np.ndarray) -> float:
    """Pareto shape of the importance ratios ``log p(u) - log q(u)`` (up to a constant)
    of draws from the approximation ``q``: how far ``q`` is from the posterior ``p``
    (Yao, Vehtari, Simpson and Gelman 2018, "Yes, but did it work?": below about 0.7 the
    approximation's estimates can be trusted; above it they cannot, and above 1 the
    ratios have no finite mean). NaN when the ratios are not all finite."""
    if not np.isfinite(log_ratio).all():
        return float("nan")
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's own note on large k: ours is the warning
        _, k = az.psislw(log_ratio - log_ratio.max())
    return float(k)


class LaplaceBackend(StanBackend):
    """Runs ``stan/transducer.stan``'s model as a Laplace approximation, in numpy.

    Not a Stan backend: never chosen by ``"auto"``; see the module docstring for when it
    is appropriate (dry runs, plumbing, a first look) and when not (decisions).
    """

    name = "laplace"

    def is_available(self) -> bool:
        return True

    def unavailable_reason(self) -> str | None:
        return None

    def version(self) -> str:
        from .. import __version__

        return f"yieldwise-laplace {__version__}"

    def compile(self, stan_file: str | os.PathLike[str]) -> CompiledProgram:
        path = Path(stan_file)
        if path.name != "transducer.stan":
            raise CompilationError(
                f"the laplace backend approximates only the transducer's model, not {path.name}; "
                "use backend='pystan' or 'cmdstanpy' for it"
            )
        return TransducerLaplace(path)
