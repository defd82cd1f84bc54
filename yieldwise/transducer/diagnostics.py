"""Convergence diagnostics of a transducer fit, as pure functions of its draws.

Components of the mixture may exchange labels between chains, so R-hat and effective
sample sizes are computed on label-switching-invariant quantities only (docs/theory.md
section 3.1): the calibration log-likelihood, and the transducer ``F_t(c | y)`` at fixed
reference outputs. :func:`diagnose` tabulates them from the draws, :func:`sampler_summary`
reads the sampler's own record, :func:`warn_on_invariants` says what to do when the table
misses a threshold. :meth:`Transducer.diagnostics <yieldwise.Transducer.diagnostics>`
and :meth:`~yieldwise.Transducer.sampler_summary` delegate here.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._validation import Label
from .io import fit_record, recorded_max_treedepth

__all__ = [
    "BIN_ESS_SHARE_MIN",
    "ESS_MIN",
    "RHAT_MAX",
    "approximation_pareto_k",
    "binning_record",
    "converged",
    "DiagnosticsWarning",
    "diagnose",
    "likelihood_record",
    "reference_rows",
    "sampler_summary",
    "warn_on_binning",
    "warn_on_cut_gap",
    "warn_on_invariants",
]

#: Thresholds on the invariant quantities (R-hat and bulk ESS), as in the Stan guidance.
RHAT_MAX = 1.01
ESS_MIN = 400


#: A binned likelihood (``Transducer(likelihood_bins=)``) is accepted when its draws,
#: reweighted to the exact likelihood, keep at least this effective share of themselves.
BIN_ESS_SHARE_MIN = 0.9
#: Draws at which the binned likelihood is compared with the exact one (evenly spaced).
BIN_CHECK_DRAWS = 400


class DiagnosticsWarning(UserWarning):
    """R-hat or effective sample size of an invariant quantity misses its threshold."""


def likelihood_record(result: Any, data: Any, cut: float) -> dict[str, Any]:
    """How the fit's likelihood was computed (stan/transducer.stan, sparse form), for the
    sampler's record: ``kernel_tail_cut``, ``sparse``, ``kept_share`` (the share of kernel
    values summed) and ``max_cut_gap``, the largest over the draws of what the values left
    out would add to the log-likelihood (``log_lik_cut_gap``; 0 for the dense form)."""
    sparse = bool(int(data["kern_sparse"]))
    gap = np.asarray(result.draws.get("log_lik_cut_gap", 0.0), dtype=float)
    return {
        "kernel_tail_cut": float(cut),
        "sparse": sparse,
        "kept_share": float(data["kern_nz"]) / (int(data["N"]) * int(data["K"])) if sparse else 1.0,
        "max_cut_gap": float(np.max(gap)) if sparse and gap.size else 0.0,
    }


def warn_on_cut_gap(record: dict[str, Any], tolerance: float, stacklevel: int = 2) -> None:
    """A :class:`DiagnosticsWarning` when the kernel values left out of a sparse likelihood
    would have changed the log-likelihood by more than ``tolerance`` in some draw."""
    gap = record["max_cut_gap"]
    if not gap <= tolerance:
        warnings.warn(
            f"the likelihood left out kernel values below {record['kernel_tail_cut']:g} of "
            f"each calibration row's largest, and in some draws they would have raised the "
            f"log-likelihood by {gap:.3g} (more than {tolerance:g}): the draws come from a "
            f"posterior whose density differs from the full kernels' by up to a factor "
            f"exp({gap:.3g}). Refit with Transducer(kernel_tail_cut=0) to keep every kernel "
            "value (slower with two output dimensions)",
            DiagnosticsWarning,
            stacklevel=stacklevel,
        )


def binning_record(
    draws: Any,
    data: Any,
    class_index: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    censored: np.ndarray,
    n_check: int = BIN_CHECK_DRAWS,
) -> dict[str, Any]:
    """How far a likelihood of binned rows (``data``, :func:`~yieldwise.transducer.
    stan_data.bin_rows`) is from the exact one, at ``n_check`` evenly spaced draws.

    The exact posterior is the binned one times ``exp(gap_t)``, ``gap_t`` the exact minus
    the binned log-likelihood at draw ``t`` (a constant in ``gap_t`` cancels), so the
    binned draws are importance draws for it: ``binned_ess_share`` is the effective share
    ``(sum w)^2 / (S sum w^2)`` of the weights ``w_t = exp(gap_t)`` (1: the two posteriors
    agree), ``binned_gap_sd`` the sd of ``gap_t`` over the draws. The kernel part of the
    likelihood is all that binning changes (a pair's offsets enter both alike: rows merge
    within a class and group), so it is what is compared. Also ``bin_width`` per dimension,
    ``rows`` (binned) and ``rows_exact`` (the distinct outputs and classes).
    """
    from .. import _mixture
    from .stan_data import merge_rows

    w = np.asarray(draws["w"], dtype=float)
    alpha, mu, sigma = (np.asarray(draws[k], dtype=float) for k in ("alpha", "mu", "sigma"))
    flat = [x.reshape(-1, *x.shape[2:]) for x in (w, alpha, mu, sigma)]
    pick = np.unique(
        np.linspace(0, flat[0].shape[0] - 1, min(n_check, flat[0].shape[0])).astype(int)
    )
    w_, a_, m_, s_ = (x[pick] for x in flat)
    d = np.shape(lower)[1]
    cls_e, merged, cnt_e = merge_rows(class_index, np.hstack([lower, upper]))
    exact = _mixture.log_likelihood(w_, a_, m_, s_, cls_e, merged[:, :d], merged[:, d:],
                                    censored, cnt_e)  # fmt: skip
    binned = _mixture.log_likelihood(w_, a_, m_, s_, np.asarray(data["cls"]) - 1,
                                     data["y_lower"], data["y_upper"], censored,
                                     data["count"])  # fmt: skip
    gap = exact - binned
    weights = np.exp(gap - gap.max())
    return {
        "bin_width": np.asarray(data["bin_width"], dtype=float).tolist(),
        "rows": int(data["N"]),
        "rows_exact": int(cls_e.size),
        "binned_ess_share": float(weights.sum() ** 2 / (weights.size * (weights**2).sum())),
        "binned_gap_sd": float(gap.std()),
    }


def warn_on_binning(
    record: dict[str, Any], minimum: float, stacklevel: int = 2, fraction: float | None = None
) -> None:
    """A :class:`DiagnosticsWarning` when the binned likelihood's draws, reweighted to the
    exact likelihood, keep less than ``minimum`` of their effective share. ``fraction``,
    the bins' width as a fraction of the kernels' (``likelihood_bins``), lets it name bins
    half as wide first: the log-likelihood's gap shrinks with the square of the width (its
    first-order terms cancel within a bin: docs/model.md, "Large calibration sets"), so
    they are the cheaper cure where the exact likelihood would be slow."""
    share = record.get("binned_ess_share")
    if share is not None and not share >= minimum:
        finer = (
            "Refit "
            if fraction is None
            else f"Refit with bins half as wide, Transducer(likelihood_bins={fraction / 2:g}) "
            "(the gap shrinks with the square of the width; up to twice the rows per output "
            "dimension), or "
        )
        warnings.warn(
            f"the likelihood merged the calibration outputs in bins ({record['rows_exact']} "
            f"distinct rows -> {record['rows']}; widths {record['bin_width']} on the model "
            f"scale), and its posterior differs from the exact one: reweighted to the exact "
            f"likelihood its draws keep an effective share of {share:.2f} (below "
            f"{minimum:g}; the log-likelihood's gap varies by sd {record['binned_gap_sd']:.3g} "
            f"over the draws). {finer}with Transducer(likelihood_bins=None) for the exact "
            "likelihood (slower on many distinct outputs)",
            DiagnosticsWarning,
            stacklevel=stacklevel,
        )


def reference_rows(y: np.ndarray, key: np.ndarray, n: int = 9) -> np.ndarray:
    """Fixed calibration rows at which transducer values are diagnosed.

    The rows of ``y`` at ``n`` evenly spaced ranks of ``key`` (their first model
    coordinate), once over all items and once over the distinct rows, without repeats.
    The second set matters for discrete outputs: when half the items are exact 0s, ranks
    over all items fall mostly on 0 and miss the sparse middle of the range, where the
    transducer is least certain. ``key`` maps rows to their ranking coordinate.
    """
    distinct = np.unique(y, axis=0)
    picked = [_at_even_ranks(rows, key(rows), n) for rows in (y, distinct)]
    return np.unique(np.concatenate(picked), axis=0)


def diagnose(
    log_lik: np.ndarray,
    proba: np.ndarray,
    reference: np.ndarray,
    classes: Sequence[Label],
    pareto_k: float | None = None,
) -> pd.DataFrame:
    """R-hat and effective sample sizes of label-switching-invariant quantities.

    Parameters
    ----------
    log_lik : (chain, draw) array
        The calibration log-likelihood per draw.
    proba : (chain, draw, item, class) array
        The per-draw transducer ``F_t(c | y)`` at the ``reference`` outputs.
    reference : (item, columns) array
        The reference outputs (for the table's ``output`` column).
    classes : the class labels, in ``proba``'s order.
    pareto_k : float, optional
        For draws of an approximation (the Laplace backend), the Pareto shape of their
        importance ratios posterior / approximation (:func:`approximation_pareto_k`).
        Such draws are independent, so their R-hat and ESS are good whatever the
        approximation's error; ``ok`` then also requires ``pareto_k`` at most
        ``pareto_k_threshold`` of the draws (0.7 for 2,200 draws or more; NaN fails).

    Returns
    -------
    pandas.DataFrame
        Rows: the log-likelihood, and ``F_t(c | y)`` at each reference output for every
        class but the last (determined by the others). Columns: quantity, output,
        class, mean, r_hat, ess_bulk, ess_tail, ok (``r_hat <= 1.01`` and
        ``ess_bulk >= 400``, and the approximation's ``pareto_k`` within its limit).
        ``attrs`` holds ``pareto_k`` and ``pareto_k_limit`` (None for MCMC draws).
    """
    import arviz as az

    series = {"log_lik": np.asarray(log_lik)}
    described = [("log_lik", "", "")]
    for i, row in enumerate(reference):
        for j, label in enumerate(list(classes)[:-1]):
            series[f"p_{i}_{j}"] = proba[:, :, i, j]
            described.append(("p(class | output)", _format_row(row), label))
    rows = []
    for (quantity, output, label), values in zip(described, series.values(), strict=True):
        rows.append(
            {
                "quantity": quantity,
                "output": output,
                "class": label,
                "mean": float(values.mean()),
                "r_hat": float(az.rhat(values)),
                "ess_bulk": float(az.ess(values, method="bulk")),
                "ess_tail": float(az.ess(values, method="tail")),
            }
        )
    table = pd.DataFrame(rows)
    table["ok"] = converged(table)
    table.attrs["pareto_k"] = table.attrs["pareto_k_limit"] = None
    if pareto_k is not None:
        from ..backends._base import pareto_k_threshold  # the backends load on use

        limit = pareto_k_threshold(int(np.asarray(log_lik).size))
        table["ok"] &= bool(pareto_k <= limit)  # NaN: the ratios could not be smoothed
        table.attrs.update(pareto_k=float(pareto_k), pareto_k_limit=float(limit))
    return table


def converged(table: pd.DataFrame) -> pd.Series:
    """Per row of a :func:`diagnose` table, whether its R-hat and bulk ESS meet
    :data:`RHAT_MAX` and :data:`ESS_MIN` (``ok`` less an approximation's Pareto check)."""
    return (table["r_hat"] <= RHAT_MAX) & (table["ess_bulk"] >= ESS_MIN)


def approximation_pareto_k(idata: Any) -> float | None:
    """The Pareto shape of an approximation's importance ratios, as its fit recorded it
    (``settings["pareto_k"]`` of the Laplace backend); None for MCMC draws."""
    k = fit_record(idata)["sampler"].get("pareto_k")
    return None if k is None else float(k)


def sampler_summary(idata: Any) -> dict[str, Any]:
    """Divergences, tree-depth saturation, step sizes and timing of a fit, from its
    InferenceData (``sample_stats`` and the recorded settings); for a Laplace
    approximation also ``pareto_k``, the Pareto shape of its draws' importance ratios
    (above about 0.7 its draws misstate the posterior; None for MCMC)."""
    stats = idata.sample_stats
    record = fit_record(idata)
    depth = recorded_max_treedepth(record["sampler"], record["settings"])
    return {
        "backend": record["backend"],
        "chains": int(stats.sizes["chain"]),
        "draws": int(stats.sizes["draw"]),
        "divergent": int(stats["diverging"].values.sum()),
        # at the depth the fit ran with (the constructor's may be None: by dimensions;
        # files before the per-dimension default hold it in the constructor's settings)
        "max_treedepth_hits": int((stats["tree_depth"].values >= depth).sum()),
        "step_size": stats["step_size"].values.mean(axis=1).tolist(),
        # the target acceptance rate the fit ran at (None for a Laplace approximation or
        # given draws, which record none)
        "adapt_delta": record["sampler"].get("adapt_delta"),
        # the largest tree depth it ran with (by default per output dimensions)
        "max_treedepth": depth,
        # the warm-up iterations per chain it ran (by default per output dimensions)
        "warmup": record["sampler"].get("warmup"),
        "sampling_seconds": record["sampling_seconds"],
        "pareto_k": approximation_pareto_k(idata),
        # what the kernel values left out of a sparse likelihood would add to the
        # log-likelihood, at most over the draws (0: the dense form; None: not recorded)
        "cut_gap": record["sampler"].get("likelihood", {}).get("max_cut_gap"),
        # a likelihood of binned rows (Transducer(likelihood_bins=)): widths, rows before
        # and after, and how its posterior compares with the exact one; None: not binned
        "binning": _binning_part(record["sampler"].get("likelihood", {})),
    }


def _binning_part(likelihood: dict[str, Any]) -> dict[str, Any] | None:
    keys = ("bin_width", "rows_exact", "rows", "binned_ess_share", "binned_gap_sd")
    return {k: likelihood[k] for k in keys} if "binned_ess_share" in likelihood else None


def warn_on_invariants(
    table: pd.DataFrame, stacklevel: int = 2, *, approximation_warned: bool = False
) -> None:
    """A :class:`DiagnosticsWarning` naming the worst quantity of a :func:`diagnose` table
    and what to try, when any misses R-hat <= 1.01 or bulk ESS >= 400; for an
    approximation whose Pareto k misses its limit, one saying to refit with Stan's
    sampler (unless ``approximation_warned``: the backend's SamplerWarning said it)."""
    k, limit = table.attrs.get("pareto_k"), table.attrs.get("pareto_k_limit")
    if k is not None and not k <= limit and not approximation_warned:
        warnings.warn(
            f"every quantity of this table is marked not ok: the draws are a Laplace "
            f"approximation's, and the Pareto shape of their importance ratios is "
            f"k = {k:.2f}, above {limit:.2f}, so they misstate the posterior however good "
            "their R-hat and ESS (independent draws have both). Refit with the default "
            "backend (Stan's sampler) before deciding anything.",
            DiagnosticsWarning,
            stacklevel=stacklevel + 1,
        )
    bad = table[~converged(table)]
    if len(bad):
        worst = bad.sort_values("r_hat", ascending=False).iloc[0]
        warnings.warn(
            f"{len(bad)} of {len(table)} invariant quantities miss R-hat <= {RHAT_MAX} or "
            f"bulk ESS >= {ESS_MIN}; worst: {worst['quantity']} {worst['output']} "
            f"(R-hat {worst['r_hat']:.3f}, bulk ESS {worst['ess_bulk']:.0f}). Run more "
            "draws (draws=) or chains; with divergent transitions, raise adapt_delta "
            "above the fit's (sampler_summary()['adapt_delta']); see .diagnostics() and "
            "docs/model.md",
            DiagnosticsWarning,
            stacklevel=stacklevel + 1,
        )


def _format_row(row: np.ndarray) -> str:
    return ", ".join(f"{v:.4g}" for v in row)


def _at_even_ranks(rows: np.ndarray, key: np.ndarray, n: int) -> np.ndarray:
    """The ``rows`` at ``n`` evenly spaced ranks of ``key`` (ties in input order)."""
    order = np.argsort(key, kind="stable")
    return rows[order[np.linspace(0, len(key) - 1, n).round().astype(int)]]
