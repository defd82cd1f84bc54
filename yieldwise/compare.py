"""Which classifier will yield more: posterior comparison of long-run utilities (theory 4).

``compare`` computes, for each classifier, the posterior draws of its long-run utility
per item under one utility matrix (or a batch), and a :class:`Comparison` answers:

* ``prob_superiority()``: ``P(u_A > u_B)`` for every ordered pair;
* ``prob_best()``: the probability that each classifier yields the most;
* ``difference(a, b)``: the posterior of ``u_a - u_b`` with intervals;
* ``summary()``: a tidy table.

Independently fitted transducers have independent posteriors: probabilities are taken
over all pairs of draws (``mean over (s, t) of [u_A,s > u_B,t]``). One joint transducer
over the classifiers' concatenated outputs gives paired draws (``mean_t [u_A,t > u_B,t]``),
which accounts for classifiers erring on the same items.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from .long_run import DEFAULT_CELLS, DEFAULT_POINTS, long_run_core

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .transducer import Transducer

__all__ = ["Comparison", "compare"]

_QUANTILES = (0.05, 0.5, 0.95)


def compare(
    transducers: Mapping[str, Transducer] | Transducer,
    utility: Any,
    rule: str | Callable[[Any], Any] | Mapping[str, Any] = "augmented",
    *,
    prevalences: Any = None,
    threshold: float = 0.5,
    n_cells: int = DEFAULT_CELLS,
    n_points: int = DEFAULT_POINTS,
    seed: int = 0,
) -> Comparison:
    """Compare classifiers by the posterior of their long-run utility per item.

    Parameters
    ----------
    transducers : mapping name -> fitted Transducer, or one joint Transducer
        Independent fits (one per classifier), or a transducer fitted on several
        classifiers' outputs at once (``Transducer().fit({"rf": ..., "cnn": ...}, y)``):
        then each member is a marginal of it, the draws are paired, and the joint
        transducer itself takes part as the ensemble ``"joint"``. A single classifier
        gives its posterior summary (its P(best) is 1, its superiority table empty).
    utility : UtilityMatrix or a batch (see :func:`yieldwise.long_run_utility`)
    rule : "augmented", "standard", a callable, or a mapping name -> rule
        With a joint transducer, ``"standard"`` applies to the members; the joint
        ensemble always decides by maximum expected utility.
    prevalences, threshold, n_cells, n_points, seed
        As for :func:`yieldwise.long_run_utility`.

    Returns
    -------
    Comparison
    """
    members, paired, aliases = _members(transducers)
    if not members:
        raise ValueError("compare needs at least one classifier, found an empty mapping")
    if isinstance(rule, Mapping):
        stray = [key for key in rule if key not in members and key not in aliases]
        if stray:  # a misspelt name would otherwise leave its classifier's rule unset
            raise ValueError(
                f"rule has entries {stray} that name no classifier; the classifiers are "
                f"{list(members)}"
            )
    raw: dict[str, xr.DataArray] = {}
    rescaled: dict[str, xr.DataArray] = {}
    for name, transducer in members.items():
        if isinstance(rule, Mapping) and name not in rule:
            raise ValueError(f"rule has no entry for classifier {name!r}; it has {list(rule)}")
        member_rule = rule[name] if isinstance(rule, Mapping) else rule
        if paired and name == "joint" and member_rule == "standard":
            member_rule = "augmented"  # the ensemble has no standard rule of its own
        options = (prevalences, threshold, n_cells, n_points, seed)
        try:
            raw[name], rescaled_values = long_run_core(transducer, utility, member_rule, *options)
        except ValueError as exc:
            if "cannot rescale" not in str(exc):
                raise
            raw[name], rescaled_values = long_run_core(
                transducer, utility, member_rule, *options, rescale=False
            )
        if rescaled_values is not None:
            rescaled[name] = rescaled_values
    return Comparison(raw, rescaled if len(rescaled) == len(raw) else None, paired=paired,
                      aliases=aliases)  # fmt: skip


def _members(transducers: Any) -> tuple[dict[str, Transducer], bool, dict[Any, str]]:
    """(name -> transducer, paired, the keys given -> their names)."""
    from .transducer import Transducer

    if isinstance(transducers, Transducer):
        members = getattr(transducers, "members_", None)
        if not members:
            raise ValueError(
                "a single transducer can be compared only when it was fitted on several "
                "classifiers' outputs (fit({'a': ..., 'b': ...}, classes)); otherwise pass "
                "a mapping name -> transducer"
            )
        if "joint" in members:
            raise ValueError(
                "this joint transducer has a member named 'joint', the name compare gives "
                "the ensemble of all members; refit with another member name"
            )
        out = {name: transducers.marginal(name) for name in members}
        out["joint"] = transducers
        return out, True, {}
    if not isinstance(transducers, Mapping):
        raise TypeError(
            "transducers must be a mapping name -> fitted Transducer, or one joint "
            f"Transducer; found {type(transducers).__name__}"
        )
    from .parallel import task_label

    named: dict[str, Any] = {}
    for name, t in transducers.items():
        if not isinstance(t, Transducer):
            raise TypeError(f"transducers[{name!r}] must be a Transducer, found {type(t).__name__}")
        t.check_fitted()
        text = task_label(name)  # fit_many's tuple names: "site A / forest"
        if text in named:
            raise ValueError(
                f"transducers has the keys {named[text]!r} and {name!r}, which are the "
                f"same name as text ({text!r}); classifiers are named by text in every "
                "result, so give them distinct names"
            )
        named[text] = name
    return (
        {text: transducers[name] for text, name in named.items()}, False,
        {name: text for text, name in named.items()},
    )  # fmt: skip


class Comparison:
    """Posterior long-run utilities of several classifiers, and what follows from them.

    Attributes
    ----------
    utilities : xarray.Dataset
        One variable per classifier, dims ``(chain, draw)`` plus ``matrix`` for a batch.
    rescaled : xarray.Dataset or None
        The same, rescaled per draw to [0, 1] (theory 1); None when a matrix cannot be.
    paired : bool
        True when the draws come from one joint transducer (paired across classifiers).
    """

    def __init__(
        self,
        utilities: Mapping[str, xr.DataArray],
        rescaled: Mapping[str, xr.DataArray] | None = None,
        *,
        paired: bool = False,
        aliases: Mapping[Any, str] | None = None,
    ) -> None:
        # Independent fits may have different numbers of draws: an outer join pads the
        # shorter ones with NaN, which every computation below drops.
        self.utilities = _dataset(utilities)
        self.integration_error = pd.DataFrame(
            {k: np.atleast_1d(v["integration_error"].values) for k, v in utilities.items()}
        )
        self.integration_error_draws = pd.DataFrame(
            {
                k: np.atleast_1d(v.coords.get("integration_error_draws", v["integration_error"]))
                for k, v in utilities.items()
            }
        )
        self.rescaled = None if rescaled is None else _dataset(rescaled)
        self.paired = paired
        self.names = list(utilities)
        # the keys the classifiers were given under (fit_many's tuples), each -> its name
        self._aliases = {k: v for k, v in (aliases or {}).items() if v in self.names}

    # ------------------------------------------------------------- internals
    @property
    def _batched(self) -> bool:
        return "matrix" in self.utilities.dims

    def _check_name(self, name: Any) -> str:
        """The classifier's name (as in :attr:`names`), given it or the key it was passed
        under (a tuple of :func:`~yieldwise.fit_many`); KeyError otherwise."""
        if isinstance(name, str) and name in self.names:
            return name
        try:
            return self._aliases[name]
        except (KeyError, TypeError):
            raise KeyError(
                f"unknown classifier {name!r}; the comparison has {self.names}"
            ) from None

    # ------------------------------------------------------------- answers
    def samples(self, name: str, matrix: Any = None, rescaled: bool = False) -> np.ndarray:
        """One classifier's posterior draws of its long-run utility, flattened chain-major
        (paired draws line up across the members of a joint transducer), without the NaN
        that pad independent fits of fewer draws.

        ``matrix`` chooses one matrix of a batch (required then, refused otherwise);
        ``rescaled`` gives the draws rescaled to [0, 1] (theory 1).
        """
        name = self._check_name(name)
        data = self.rescaled if rescaled else self.utilities
        if data is None:
            raise ValueError("rescaled utilities are not available for these matrices")
        values = data[name]
        if self._batched:
            known = self.utilities["matrix"].values.tolist()  # Python labels, not np.str_
            if matrix is None or matrix not in known:
                what = (
                    "choose one with matrix=..." if matrix is None else f"matrix={matrix!r} is not"
                )
                raise ValueError(
                    f"this comparison covers several utility matrices; {what} one of "
                    f"{known[:10]}{' ...' if len(known) > 10 else ''}"
                )
            values = values.sel(matrix=matrix)
        elif matrix is not None:
            raise ValueError("this comparison has one utility matrix; do not pass matrix=")
        flat = values.values.ravel()  # chain-major: paired draws line up across members
        return flat[~np.isnan(flat)]

    def prob_superiority(self, matrix: Any = None) -> pd.DataFrame:
        """``P(row yields more than column)`` for every pair (diagonal NaN)."""
        n = len(self.names)
        out = np.full((n, n), np.nan)
        samples = {name: self.samples(name, matrix) for name in self.names}
        for i, a in enumerate(self.names):
            for j, b in enumerate(self.names):
                if i != j:
                    out[i, j] = _prob_greater(samples[a], samples[b], self.paired)
        index = pd.Index(self.names, name="classifier")
        return pd.DataFrame(out, index=index, columns=pd.Index(self.names, name="versus"))

    def prob_best(self, matrix: Any = None) -> pd.Series:
        """Probability that each classifier has the largest long-run utility."""
        samples = [self.samples(name, matrix) for name in self.names]
        if self.paired:
            stacked = np.stack(samples)  # (classifiers, draws)
            best = stacked.argmax(axis=0)
            p = np.bincount(best, minlength=len(samples)) / stacked.shape[1]
        else:
            # P(A best) = mean over A's draws of prod_B P(u_B < u_A), B independent.
            p = np.empty(len(samples))
            ordered = [np.sort(b) for b in samples]  # each sorted once, not once per pair
            for i, a in enumerate(samples):
                below = np.ones(a.size)
                for j, b in enumerate(ordered):
                    if j != i:
                        below *= np.searchsorted(b, a, side="left") / b.size
                p[i] = below.mean()
        return pd.Series(p, index=pd.Index(self.names, name="classifier"), name="prob_best")

    def difference(
        self, a: str, b: str, matrix: Any = None, prob: float = 0.9, seed: int = 0
    ) -> xr.DataArray:
        """Posterior draws of ``u_a - u_b``, with mean, interval and ``P(> 0)`` as attributes.

        Paired draws are subtracted draw by draw; independent ones after a random
        pairing (seeded), which samples the distribution of the difference.
        """
        a, b = self._check_name(a), self._check_name(b)
        if not 0 < prob < 1:
            raise ValueError(f"prob must lie in (0, 1), found {prob}")
        x, y = self.samples(a, matrix), self.samples(b, matrix)
        prob_positive = _prob_greater(x, y, self.paired)  # over all pairs when independent
        if not self.paired:
            rng = np.random.default_rng(seed)
            n = max(x.size, y.size)
            x = x[rng.permutation(n) % x.size]
            y = y[rng.permutation(n) % y.size]
        diff = x - y
        low, high = np.quantile(diff, [(1 - prob) / 2, (1 + prob) / 2])
        return xr.DataArray(
            diff,
            dims=("sample",),
            name=f"{a} - {b}",
            attrs={
                "mean": float(diff.mean()),
                "interval": (float(low), float(high)),
                "interval_prob": prob,
                "prob_positive": prob_positive,
                "paired": self.paired,
            },
        )

    def summary(self) -> pd.DataFrame:
        """Tidy table: one row per classifier (and matrix), posterior summaries."""
        rows = []
        matrices = list(self.utilities["matrix"].values) if self._batched else [None]
        for matrix in matrices:
            best = self.prob_best(matrix)
            for name in self.names:
                values = self.samples(name, matrix)
                row: dict[str, Any] = {"classifier": name}
                if matrix is not None:
                    row["matrix"] = matrix
                q = np.quantile(values, _QUANTILES)
                row.update(mean=values.mean(), sd=values.std(ddof=1), q5=q[0], q50=q[1], q95=q[2])
                if self.rescaled is not None:
                    scaled = self.samples(name, matrix, rescaled=True)
                    row.update(rescaled_mean=scaled.mean(), rescaled_sd=scaled.std(ddof=1))
                row["prob_best"] = best[name]
                position = matrices.index(matrix) if matrix is not None else 0
                row["integration_error"] = self.integration_error[name].values[position]
                row["integration_error_draws"] = self.integration_error_draws[name].values[position]
                rows.append(row)
        return pd.DataFrame(rows)

    # ------------------------------------------------------------- display
    def __repr__(self) -> str:
        kind = "paired draws (joint transducer)" if self.paired else "independent fits"
        return f"Comparison({self.names}, {kind})\n{self.summary().to_string(index=False)}"

    def _repr_html_(self) -> str:
        kind = "paired draws (joint transducer)" if self.paired else "independent fits"
        parts = [
            f"<div class='yieldwise-comparison'><b>Comparison</b> of "
            f"{html.escape(', '.join(self.names))} ({kind})",
            self.summary().to_html(index=False, escape=True, float_format="%.4g"),
        ]
        if not self._batched:
            parts.append("<p>P(row yields more than column)</p>")
            parts.append(self.prob_superiority().to_html(escape=True, float_format="%.3f"))
        parts.append("</div>")
        return "".join(parts)

    def plot(self, matrix: Any = None, axes: Any = None) -> Any:
        """Posterior densities of the long-run utilities, and the superiority heat map."""
        import matplotlib.pyplot as plt

        if axes is None:
            _, axes = plt.subplots(1, 2, figsize=(11, 4))
        try:
            density_ax, heat_ax = axes
        except (TypeError, ValueError):
            raise ValueError(
                "axes must be two matplotlib Axes (the densities, the heat map), e.g. "
                f"plt.subplots(1, 2)[1]; found {axes!r}"
            ) from None
        _plot_densities(density_ax, {n: self.samples(n, matrix) for n in self.names})
        if len(self.names) > 1:
            _plot_superiority(heat_ax, self.prob_superiority(matrix))
        else:
            heat_ax.set_axis_off()
            heat_ax.text(0.5, 0.5, "one classifier: nothing to compare", ha="center")
        return axes


def _dataset(arrays: Mapping[str, xr.DataArray]) -> xr.Dataset:
    parts = []
    for name, values in arrays.items():
        values = values.reset_coords(drop=True).rename(name)
        index = {d: np.arange(values.sizes[d]) for d in values.dims if d not in values.coords}
        parts.append(values.assign_coords(index))
    return xr.merge(parts, join="outer")


def _prob_greater(a: np.ndarray, b: np.ndarray, paired: bool) -> float:
    """P(u_a > u_b): draw by draw when paired, else over all pairs (by sorting)."""
    if paired:
        return float(np.mean(a > b))
    return float(np.searchsorted(np.sort(b), a, side="left").sum() / (a.size * b.size))


def _plot_densities(ax: Axes, samples: Mapping[str, np.ndarray]) -> None:
    from scipy.stats import gaussian_kde

    from .plots import verbatim_legend

    everything = np.concatenate(list(samples.values()))
    pad = 0.05 * (np.ptp(everything) or 1.0)
    grid = np.linspace(everything.min() - pad, everything.max() + pad, 300)
    handles = []
    for values in samples.values():
        if np.ptp(values) > 0:
            (line,) = ax.plot(grid, gaussian_kde(values)(grid))
        else:
            line = ax.axvline(values[0])
        handles.append(line)
    ax.set_xlabel("long-run utility per item")
    ax.set_ylabel("posterior density")
    verbatim_legend(ax, handles, list(samples))  # names verbatim: "$" is no mathtext here


def _plot_superiority(ax: Axes, table: pd.DataFrame) -> None:
    values = table.values
    image = ax.imshow(np.nan_to_num(values, nan=0.5), vmin=0, vmax=1, cmap="RdBu_r")
    names = {"parse_math": False}  # classifier names verbatim
    ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns], rotation=30, **names)
    ax.set_yticks(range(len(table.index)), [str(c) for c in table.index], **names)
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            if not np.isnan(values[i, j]):
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center")
    ax.set_title("P(row yields more than column)")
    ax.figure.colorbar(image, ax=ax)
