"""Which classifier will yield more: posterior comparison of long-run utilities (theory 4).

``compare`` computes, for each classifier, the posterior draws of its long-run utility
per item under one utility matrix (or a batch), and a :class:`Comparison` answers:

* ``prob_superiority()``: ``P(u_A > u_B)`` for every ordered pair;
* ``prob_tie()``: ``P(u_A and u_B tie)``, so that ``P(A > B) + P(B > A) + P(tie) = 1``;
* ``prob_best()``: the probability that each classifier yields the most (ties shared);
* ``difference(a, b)``: the posterior of ``u_a - u_b`` with intervals;
* ``summary()``: a tidy table.

Independently fitted transducers have independent posteriors: probabilities are taken
over all pairs of draws (``mean over (s, t) of [u_A,s > u_B,t]``). One joint transducer
over the classifiers' concatenated outputs gives paired draws (``mean_t [u_A,t > u_B,t]``),
which accounts for classifiers erring on the same items.

Ties follow the package's one tie rule (:data:`yieldwise.utility.TIE_RTOL`,
:func:`~yieldwise.utility.near_best`): two long-run utilities computed with one utility
matrix tie when they differ by at most ``tol = TIE_RTOL * (max U - min U)``, the matrix's
range (per matrix of a batch). ``A`` beats ``B`` on a pair of draws only when
``u_A > u_B + tol``; two classifiers that deploy the same decisions on a draw (two
worthless classifiers that both always choose the same decision, the same fit under two
names) then tie instead of being ranked by floating-point rounding. ``prob_best`` shares
each (pair or combination of) draws equally among the classifiers no other beats there,
so it sums to 1 over the classifiers. All of these read each classifier's draws of the
long-run utility of ``U - min U`` (theory 1: ``u_t(U + b) = u_t(U) + b``), before
``min U`` is added back for display: a draw of ``U + 1e9`` computed as ``small + 1e9``
carries rounding of ``ulp(1e9) ~ 1e-7``, which would decide the ties instead.
"""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from ._validation import caller_stacklevel
from .long_run import DEFAULT_CELLS, DEFAULT_POINTS, long_run_core
from .utility import TIE_RTOL, UtilityMatrix

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .transducer import Transducer

__all__ = ["RESERVED_NAMES", "Comparison", "compare"]

#: Names a classifier cannot take: the dimensions of the Dataset that holds the
#: classifiers' draws, one variable each (:attr:`Comparison.utilities`), which xarray
#: refuses as variable names ("cannot create a Dataset from a DataArray with the same
#: name as one of its coordinates"). The report's config refuses them too.
RESERVED_NAMES = ("chain", "draw", "matrix")

_QUANTILES = (0.05, 0.5, 0.95)
#: Errors raised for one classifier, re-raised with its name in front (their type kept).
_NAMED_ERRORS = (ValueError, TypeError, RuntimeError, KeyError, IndexError)
#: What Transducer.marginal records as a marginal's backend_: the joint fit's backend and
#: the member's name.
_MARGINAL = re.compile(r"^(?P<joint>.*) \(marginal (?P<member>.+) of a joint fit\)$", re.S)


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
        Marginals of one joint fit passed as a mapping (``{"a": joint.marginal("a"),
        "b": joint.marginal("b")}``) are compared as independent fits, which loses the
        pairing of their draws: a UserWarning says so; pass the joint transducer.
    utility : UtilityMatrix or a batch (see :func:`yieldwise.long_run_utility`)
        A labelled matrix (a UtilityMatrix, or a sequence or mapping of them) is
        reindexed by its class labels for each classifier, so classifiers whose
        ``classes_`` list the classes in different orders are compared correctly. A plain
        array or nested list has no labels: its columns are taken in each transducer's
        ``classes_`` order, so every classifier must then have the same ``classes_``
        (same labels, same order, same types); otherwise a ValueError names them.
    rule : "augmented", "standard", a callable, or a mapping name -> rule
        With a joint transducer, ``"standard"`` applies to the members and the joint
        ensemble ``"joint"`` decides by maximum expected utility (the augmented rule):
        it has no output of its own to take a standard choice from. A mapping may leave
        ``"joint"`` out (it then takes the augmented rule) or give it ``"augmented"`` or a
        callable (a rule on the concatenated outputs, as for
        :func:`yieldwise.long_run_utility`); ``"standard"`` for ``"joint"`` is refused.
        Every other classifier needs an entry in a mapping.
    prevalences, threshold, n_cells, n_points, seed
        As for :func:`yieldwise.long_run_utility`.

    Returns
    -------
    Comparison
        Ties within ``TIE_RTOL * (max U - min U)`` of each matrix (module docstring).

    Errors raised while computing one classifier's utilities keep their type and start
    with ``classifier 'name': ``.
    """
    members, paired, aliases = _members(transducers)
    if not members:
        raise ValueError("compare needs at least one classifier, found an empty mapping")
    if isinstance(utility, Iterator):  # read once, used once per classifier
        utility = list(utility)
    if len(members) > 1 and not _labelled(utility):
        _check_same_classes(members)
    if isinstance(rule, Mapping):
        stray = [key for key in rule if key not in members and key not in aliases]
        if stray:  # a misspelt name would otherwise leave its classifier's rule unset
            raise ValueError(
                f"rule has entries {stray} that name no classifier; the classifiers are "
                f"{list(members)}"
            )
    keys = {text: key for key, text in aliases.items()}  # name -> the key it was given as
    # each classifier's draws of the long-run utility of U - min U (long_run_core): ties,
    # superiority and P(best) are decided on them, before min U is added back (a draw of
    # U + 1e9 has lost the digits below 1e-7, far above the tie tolerance)
    shifted: dict[str, xr.DataArray] = {}
    rescaled: dict[str, xr.DataArray] = {}
    for name, transducer in members.items():
        member_rule = _member_rule(rule, name, keys.get(name, name), paired and name == "joint")
        options = (prevalences, threshold, n_cells, n_points, seed)
        try:
            try:
                shifted[name], rescaled_values = long_run_core(
                    transducer, utility, member_rule, *options
                )
            except ValueError as exc:
                if "cannot rescale" not in str(exc):
                    raise
                shifted[name], rescaled_values = long_run_core(
                    transducer, utility, member_rule, *options, rescale=False
                )
        except _NAMED_ERRORS as exc:
            raise _named(exc, name) from exc
        if rescaled_values is not None:
            rescaled[name] = rescaled_values
    low, spread = _matrix_scales(shifted)
    return Comparison(shifted, rescaled if len(rescaled) == len(shifted) else None,
                      paired=paired, aliases=aliases, spread=spread,
                      utility_min=low)  # fmt: skip


def _matrix_scales(shifted: Mapping[str, xr.DataArray]) -> tuple[np.ndarray, np.ndarray]:
    """(``min U``, ``max U - min U``) per matrix, as long_run_core read the utility for
    every classifier (the coordinates ``utility_min`` and ``utility_spread`` of its
    results ``shifted``): the shift of the draws and the scale of the tie rule (theory
    1). RuntimeError if two classifiers' matrices differ (never: a labelled matrix is
    only reordered for each, a plain one read alike by all)."""
    scales = {
        name: tuple(np.atleast_1d(np.asarray(u[k].values, float))
                    for k in ("utility_min", "utility_spread"))
        for name, u in shifted.items()
    }  # fmt: skip
    first, (low, spread) = next(iter(scales.items()))
    for name, (other_low, other_spread) in scales.items():
        if not (np.array_equal(other_low, low) and np.array_equal(other_spread, spread)):
            raise RuntimeError(
                f"compare read different utility matrices for the classifiers {first!r} "
                f"(least entries {low.tolist()}, ranges {spread.tolist()}) and {name!r} "
                f"({other_low.tolist()}, {other_spread.tolist()}); please report this"
            )
    return low, spread


def _member_rule(rule: Any, name: str, key: Any, ensemble: bool) -> Any:
    """The rule of classifier ``name`` (given under ``key``); ``ensemble``: it is the joint
    transducer of a joint fit, which decides by maximum expected utility unless a mapping
    gives it a callable."""
    if isinstance(rule, Mapping):
        given = [k for k in dict.fromkeys((name, key)) if k in rule]
        if not given:
            if ensemble:
                return "augmented"
            raise ValueError(f"rule has no entry for classifier {name!r}; it has {list(rule)}")
        member_rule = rule[given[0]]
        if ensemble and isinstance(member_rule, str) and member_rule == "standard":
            raise ValueError(
                "rule gives the joint ensemble 'joint' the standard rule, which it does not "
                "have (it is no single classifier, with no output of its own to take the "
                "argmax of); leave 'joint' out of the mapping (it then decides by maximum "
                "expected utility, 'augmented') or give it a callable"
            )
        return member_rule
    if ensemble and isinstance(rule, str) and rule == "standard":
        return "augmented"  # "standard" is the members' rule; the ensemble has none
    return rule


def _named(exc: BaseException, name: str) -> BaseException:
    """``exc`` again, of its type, with ``classifier 'name': `` in front of its message."""
    message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)
    try:
        return type(exc)(f"classifier {name!r}: {message}")
    except Exception:  # a type whose constructor wants more: the message in a plain one
        base = next(t for t in _NAMED_ERRORS if isinstance(exc, t))
        return base(f"classifier {name!r}: {message}")


def _labelled(utility: Any) -> bool:
    """Whether ``utility`` carries class labels (UtilityMatrix objects), by which
    long_run_utility reindexes it for each transducer; False for plain numbers (an array,
    nested lists), whose columns are taken in each transducer's ``classes_`` order."""
    if isinstance(utility, UtilityMatrix | Mapping):
        return True
    if isinstance(utility, np.ndarray) and utility.dtype != object:
        return False
    if isinstance(utility, Iterable) and not isinstance(utility, str | bytes):
        return any(isinstance(u, UtilityMatrix) for u in utility)
    return True  # not a utility at all: long_run_utility refuses it


def _check_same_classes(members: Mapping[str, Transducer]) -> None:
    """ValueError unless every classifier has the same ``classes_`` (order and types):
    a plain array's columns follow each transducer's ``classes_``."""
    listed = {name: tuple(t.classes_) for name, t in members.items()}
    typed = {name: tuple((type(c), c) for c in classes) for name, classes in listed.items()}
    if len(set(typed.values())) > 1:
        shown = "; ".join(
            f"{name!r} has {list(classes)} ({', '.join(type(c).__name__ for c in classes)})"
            for name, classes in listed.items()
        )
        raise ValueError(
            "utility is a plain array (no class labels), whose columns are read in each "
            f"transducer's classes_ order, but the classifiers' classes_ differ: {shown}. "
            "Pass a labelled UtilityMatrix (UtilityMatrix(values, decisions=..., "
            "classes=...)), which is reindexed by its labels for each classifier"
        )


def _warn_split_marginals(transducers: Mapping[Any, Transducer]) -> None:
    """UserWarning when two or more of ``transducers`` are marginals of one joint fit
    (``backend_`` names them so, and they share its sampler record and calibration
    classes): compared as independent fits, their draws lose their pairing."""
    groups: dict[Any, list[Any]] = {}
    for name, t in transducers.items():
        match = _MARGINAL.match(str(getattr(t, "backend_", "")))
        if match is not None:
            groups.setdefault(_joint_fit_key(t, match["joint"]), []).append(name)
    for names in groups.values():
        if len(names) > 1:
            warnings.warn(
                f"the classifiers {names} are marginals of one joint fit (marginal(name)): "
                "compare treats a mapping of transducers as independent fits, so the pairing "
                "of their draws is lost; pass the joint transducer itself (compare(joint, "
                "utility)) to compare its members on paired draws",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )


def _joint_fit_key(t: Transducer, joint_backend: str) -> tuple:
    """What marginals of one joint fit share: its backend, its draws' shape and sampler
    record (carried over to every marginal), its calibration items' classes."""
    key: list[Any] = [joint_backend, tuple(t.classes_)]
    try:
        key.append(t.posterior_.sample_stats["lp"].values.tobytes())
        key.append(t.posterior_.observed_data["class_index"].values.tobytes())
    except (AttributeError, KeyError):  # a record without them: the backend alone
        pass
    return tuple(key)


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
        for name in members:
            _check_not_reserved(name, "this joint transducer has a member named")
        out = {}
        for name in members:
            try:
                out[name] = transducers.marginal(name)
            except _NAMED_ERRORS as exc:
                raise _named(exc, name) from exc
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
        try:
            t.check_fitted()
        except RuntimeError as exc:
            raise _named(exc, name) from exc
        text = task_label(name)  # fit_many's tuple names: "site A / forest"
        _check_not_reserved(text, "transducers has a classifier named")
        if text in named:
            raise ValueError(
                f"transducers has the keys {named[text]!r} and {name!r}, which are the "
                f"same name as text ({text!r}); classifiers are named by text in every "
                "result, so give them distinct names"
            )
        named[text] = name
    _warn_split_marginals(transducers)
    return (
        {text: transducers[name] for text, name in named.items()}, False,
        {name: text for text, name in named.items()},
    )  # fmt: skip


def _check_not_reserved(name: Any, what: str) -> None:
    """ValueError when a classifier's name is one of :data:`RESERVED_NAMES`."""
    if name in RESERVED_NAMES:
        raise ValueError(
            f"{what} {name!r}, a name the comparison gives its dimensions "
            f"{list(RESERVED_NAMES)} (chains and draws of the posterior, utility matrices); "
            f"rename it, e.g. {str(name) + ' classifier'!r}"
        )


class Comparison:
    """Posterior long-run utilities of several classifiers, and what follows from them.

    Parameters
    ----------
    utilities, rescaled : mapping name -> DataArray (as :func:`compare` makes them)
    paired : bool
    aliases : mapping, optional
        Keys the classifiers were given under (fit_many's tuples) -> their names.
    spread : float or sequence of floats, optional
        ``max U - min U`` of the utility matrix the draws were computed with (one per
        matrix of a batch, in its order): differences within ``TIE_RTOL * spread`` are
        ties (module docstring). Default: only exactly equal draws tie.
    utility_min : float or sequence of floats, optional
        ``min U`` of each matrix when ``utilities`` are draws of the long-run utility of
        ``U - min U`` (as :func:`compare` passes them, theory 1: ``u_t(U + b) = u_t(U) +
        b``): ties, superiority, P(best) and differences are read on those draws, and
        ``min U`` is added back wherever utilities are shown (:attr:`utilities`,
        :meth:`samples`, :meth:`summary`, :meth:`plot`). A draw of ``U + 1e9`` computed
        as ``small + 1e9`` has lost the digits below ``1e-7``, far above the tie
        tolerance. Default: ``utilities`` are the long-run utilities themselves.

    Attributes
    ----------
    utilities : xarray.Dataset
        One variable per classifier, dims ``(chain, draw)`` plus ``matrix`` for a batch;
        each variable's ``attrs["integration"]`` names how its utilities were integrated.
        The long-run utilities of ``U`` (``utility_min`` added back).
    rescaled : xarray.Dataset or None
        The same, rescaled per draw to [0, 1] (theory 1); None when a matrix cannot be.
    integration : pandas.Series
        The integration method of each classifier ("lattice", "quadrature",
        "monte-carlo"; a joint ensemble's may differ from its members').
    paired : bool
        True when the draws come from one joint transducer (paired across classifiers).
    spread : numpy.ndarray
        ``max U - min U`` per matrix (zeros when not given): the scale of the ties.
    utility_min : numpy.ndarray
        ``min U`` per matrix (zeros when not given): what :attr:`utilities` adds to the
        draws the answers read.
    """

    def __init__(
        self,
        utilities: Mapping[str, xr.DataArray],
        rescaled: Mapping[str, xr.DataArray] | None = None,
        *,
        paired: bool = False,
        aliases: Mapping[Any, str] | None = None,
        spread: Any = None,
        utility_min: Any = None,
    ) -> None:
        # Independent fits may have different numbers of draws: an outer join pads the
        # shorter ones with NaN, which every computation below drops.
        self._shifted = _dataset(utilities)  # the draws ties and differences are read on
        self.integration = pd.Series(
            {k: v.attrs.get("integration") for k, v in utilities.items()},
            index=pd.Index(list(utilities), name="classifier"), name="integration", dtype=object,
        )  # fmt: skip
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
        n_matrices = self._shifted.sizes.get("matrix", 1)
        spread = np.zeros(n_matrices) if spread is None else np.atleast_1d(spread).astype(float)
        if spread.shape != (n_matrices,) or not (np.isfinite(spread) & (spread >= 0)).all():
            raise ValueError(
                f"spread must be one finite range >= 0 per utility matrix ({n_matrices}), "
                f"found {spread.tolist()}"
            )
        self.spread = spread
        low = np.zeros(n_matrices) if utility_min is None else np.atleast_1d(utility_min)
        low = low.astype(float)
        if low.shape != (n_matrices,) or not np.isfinite(low).all():
            raise ValueError(
                f"utility_min must be one finite number per utility matrix ({n_matrices}), "
                f"the least entry of each, found {low.tolist()}"
            )
        self.utility_min = low

    @cached_property
    def utilities(self) -> xr.Dataset:
        """The long-run utilities (the draws read plus :attr:`utility_min`), formed on first
        use (a batch of many matrices holds many draws)."""
        if not self.utility_min.any():
            return self._shifted
        low = self.utility_min if self._batched else self.utility_min[0]
        shift = xr.DataArray(low, dims=("matrix",) if self._batched else ())
        with xr.set_options(keep_attrs=True):  # each variable keeps its integration method
            return self._shifted.map(lambda values: values + shift)

    # ------------------------------------------------------------- internals
    @property
    def _batched(self) -> bool:
        return "matrix" in self._shifted.dims

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

    def _matrix_position(self, matrix: Any) -> int:
        """The position of ``matrix`` in the batch (0 for one matrix); ValueError as
        :meth:`samples` for a missing or unknown one."""
        if not self._batched:
            if matrix is not None:
                raise ValueError("this comparison has one utility matrix; do not pass matrix=")
            return 0
        known = self._shifted["matrix"].values.tolist()  # Python labels, not np.str_
        if matrix is None or matrix not in known:
            what = "choose one with matrix=..." if matrix is None else f"matrix={matrix!r} is not"
            raise ValueError(
                f"this comparison covers several utility matrices; {what} one of "
                f"{known[:10]}{' ...' if len(known) > 10 else ''}"
            )
        return known.index(matrix)

    # ------------------------------------------------------------- answers
    def tie_tolerance(self, matrix: Any = None) -> float:
        """``TIE_RTOL * (max U - min U)`` of the matrix: long-run utilities within it tie."""
        return float(TIE_RTOL * self.spread[self._matrix_position(matrix)])

    def samples(self, name: str, matrix: Any = None, rescaled: bool = False) -> np.ndarray:
        """One classifier's posterior draws of its long-run utility, flattened chain-major
        (paired draws line up across the members of a joint transducer), without the NaN
        that pad independent fits of fewer draws.

        ``matrix`` chooses one matrix of a batch (required then, refused otherwise);
        ``rescaled`` gives the draws rescaled to [0, 1] (theory 1).
        """
        values = self._draws(name, matrix, rescaled)
        if rescaled:
            return values
        return values + self.utility_min[self._matrix_position(matrix)]

    def _draws(self, name: str, matrix: Any = None, rescaled: bool = False) -> np.ndarray:
        """As :meth:`samples`, the draws the answers read: without :attr:`utility_min`
        (the long-run utilities of ``U - min U`` when :func:`compare` made them)."""
        name = self._check_name(name)
        data = self.rescaled if rescaled else self._shifted
        if data is None:
            raise ValueError("rescaled utilities are not available for these matrices")
        values = data[name]
        self._matrix_position(matrix)
        if self._batched:
            values = values.sel(matrix=matrix)
        flat = values.values.ravel()  # chain-major: paired draws line up across members
        return flat[~np.isnan(flat)]

    def prob_superiority(self, matrix: Any = None) -> pd.DataFrame:
        """``P(row yields more than column)`` for every pair (diagonal NaN).

        A draw (pair of draws, when independent) counts for the row when its utility
        exceeds the column's by more than :meth:`tie_tolerance`; ties count for neither,
        so ``P(A > B) + P(B > A) + P(tie) = 1`` with :meth:`prob_tie`.
        """
        return self._pairwise(matrix)[0]

    def prob_tie(self, matrix: Any = None) -> pd.DataFrame:
        """``P(row and column tie)``: utilities within :meth:`tie_tolerance` of each other
        (symmetric, diagonal NaN); ``1 - P(A > B) - P(B > A)``."""
        return self._pairwise(matrix)[1]

    def _pairwise(self, matrix: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
        n = len(self.names)
        greater, tie = np.full((n, n), np.nan), np.full((n, n), np.nan)
        tol = self.tie_tolerance(matrix)
        samples = [self._draws(name, matrix) for name in self.names]  # before min U's rounding
        for i in range(n):
            for j in range(i + 1, n):
                a_over_b, b_over_a, pairs = _counts(samples[i], samples[j], self.paired, tol)
                greater[i, j], greater[j, i] = a_over_b / pairs, b_over_a / pairs
                tie[i, j] = tie[j, i] = (pairs - a_over_b - b_over_a) / pairs  # exact counts
        index = pd.Index(self.names, name="classifier")
        columns = pd.Index(self.names, name="versus")
        return pd.DataFrame(greater, index, columns), pd.DataFrame(tie, index, columns)

    def prob_best(self, matrix: Any = None) -> pd.Series:
        """Probability that each classifier has the largest long-run utility.

        On each draw (combination of draws, when independent) the classifiers that no other
        beats by more than :meth:`tie_tolerance` share it equally, so the probabilities
        sum to 1; with independent fits this is exact over all combinations of draws.
        """
        tol = self.tie_tolerance(matrix)
        samples = [self._draws(name, matrix) for name in self.names]  # before min U's rounding
        if self.paired:
            p = _best_paired(np.stack(samples), tol)
        else:
            p = _best_independent(samples, tol)
        return pd.Series(p, index=pd.Index(self.names, name="classifier"), name="prob_best")

    def difference(
        self, a: str, b: str, matrix: Any = None, prob: float = 0.9, seed: int = 0
    ) -> xr.DataArray:
        """Posterior draws of ``u_a - u_b``, with mean, interval, ``P(> 0)`` and
        ``P(tie)`` as attributes.

        Paired draws are subtracted draw by draw; independent ones after a random
        pairing (seeded), which samples the distribution of the difference.
        ``prob_positive`` is ``P(u_a > u_b)`` as :meth:`prob_superiority` counts it (by
        more than :meth:`tie_tolerance`, over all pairs when independent), ``prob_tie``
        the probability of a tie. Differences are taken before :attr:`utility_min` is
        added back (a shift cancels in them, theory 1, and would only round them).
        """
        a, b = self._check_name(a), self._check_name(b)
        if not 0 < prob < 1:
            raise ValueError(f"prob must lie in (0, 1), found {prob}")
        x, y = self._draws(a, matrix), self._draws(b, matrix)
        x_over_y, y_over_x, pairs = _counts(x, y, self.paired, self.tie_tolerance(matrix))
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
                "prob_positive": x_over_y / pairs,
                "prob_tie": (pairs - x_over_y - y_over_x) / pairs,
                "paired": self.paired,
            },
        )

    def summary(self) -> pd.DataFrame:
        """Tidy table: one row per classifier (and matrix), posterior summaries."""
        rows = []
        matrices = list(self._shifted["matrix"].values) if self._batched else [None]
        for matrix in matrices:
            best = self.prob_best(matrix)
            low = self.utility_min[self._matrix_position(matrix)]
            for name in self.names:
                values = self._draws(name, matrix)  # min U added to the summaries, after
                row: dict[str, Any] = {"classifier": name}
                if matrix is not None:
                    row["matrix"] = matrix
                q = np.quantile(values, _QUANTILES) + low
                row.update(mean=values.mean() + low, sd=values.std(ddof=1), q5=q[0], q50=q[1],
                           q95=q[2])  # fmt: skip
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
            superiority, tie = self._pairwise(None)
            parts.append("<p>P(row yields more than column)</p>")
            parts.append(superiority.to_html(escape=True, float_format="%.3f"))
            if np.nansum(tie.values) > 0:  # else the two directions sum to 1
                parts.append("<p>P(row and column tie)</p>")
                parts.append(tie.to_html(escape=True, float_format="%.3f"))
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
    merged = xr.merge(parts, join="outer")
    # each variable keeps its own attrs (its integration method); the Dataset's would be
    # the first classifier's alone, as if it were every classifier's
    merged.attrs = {}
    return merged


def _counts(a: np.ndarray, b: np.ndarray, paired: bool, tol: float) -> tuple[int, int, int]:
    """``(#[a > b + tol], #[b > a + tol], #pairs)`` over paired draws (draw by draw) or,
    independent, over all pairs of draws; the rest of the pairs are ties.

    Independent: ``#{t : b_t + tol < a_s}`` for every ``s`` is a search of ``a`` in the
    sorted ``b + tol`` (adding ``tol`` keeps the order), the very comparisons of a count
    pair by pair.
    """
    if paired:
        return int(np.count_nonzero(a > b + tol)), int(np.count_nonzero(b > a + tol)), a.size
    a_over_b = np.searchsorted(np.sort(b) + tol, a, side="left").sum()
    b_over_a = np.searchsorted(np.sort(a) + tol, b, side="left").sum()
    return int(a_over_b), int(b_over_a), a.size * b.size


def _best_paired(stacked: np.ndarray, tol: float) -> np.ndarray:
    """P(best) over paired draws ``stacked`` (classifiers, draws): on each draw the
    classifiers that the largest does not beat (``max <= u + tol``) share it equally."""
    best = ~(stacked.max(axis=0) > stacked + tol)  # the largest itself is always in
    return (best / best.sum(axis=0)).mean(axis=1)


def _best_independent(samples: list[np.ndarray], tol: float) -> np.ndarray:
    """P(best) over all combinations of independent draws, ties shared equally, exactly.

    Each combination has a largest value ``m``, held by classifier ``j`` (the first of
    equal values): ``j``'s draw is ``m``, the classifiers before ``j`` lie below ``m``,
    those after at or below it. Given that, the classifiers are independent, and each
    other one ``l`` is tied with ``m`` (not beaten: ``m <= v + tol``) with probability
    ``in_l`` and beaten with ``out_l`` (fractions of its draws, by sorted search). The
    combination goes in equal shares to ``j`` and the ``X`` tied others, so ``j`` gets
    ``E[1 / (1 + X)]`` and a tied ``i`` gets ``E[1 / (2 + X')]``, ``X'`` the tied others
    but ``i``. With ``X`` a sum of independent Bernoullis, ``E[1 / (1 + X)] = integral_0^1
    prod_l (in_l t + out_l) dt`` (``integral t^x dt = 1 / (1 + x)``), a polynomial of
    degree below the number of classifiers ``k``: Gauss-Legendre with ``k // 2 + 1`` nodes
    is exact. The work is vectorised over draws; the loops run over classifiers only.
    """
    k = len(samples)
    p = np.zeros(k)
    if k == 1:
        p[0] = 1.0
        return p
    ordered = [np.sort(s) for s in samples]
    shifted = [o + tol for o in ordered]  # v + tol, still sorted
    nodes, weights = np.polynomial.legendre.leggauss(k // 2 + 1)
    t, w = (nodes + 1) / 2, weights / 2  # on [0, 1]
    for j, m in enumerate(samples):  # m: j's draws, each the largest value in turn
        inside = np.zeros((k, m.size))
        factors = np.ones((k, m.size, t.size))  # in_l t + out_l; 1 for j itself
        for other, (below, beaten) in enumerate(zip(ordered, shifted, strict=True)):
            if other == j:
                continue
            n = below.size
            under = np.searchsorted(below, m, side="left" if other < j else "right")
            out = np.searchsorted(beaten, m, side="left")  # v + tol < m: beaten
            inside[other] = (under - out) / n  # beaten implies below: v <= v + tol < m
            factors[other] = inside[other][:, None] * t + (out / n)[:, None]
        # products of the factors of all classifiers but one, by prefix and suffix products
        before = np.cumprod(np.concatenate([np.ones((1, *factors.shape[1:])), factors[:-1]]),
                            axis=0)  # fmt: skip
        after = np.cumprod(np.concatenate([np.ones((1, *factors.shape[1:])), factors[:0:-1]]),
                           axis=0)[::-1]  # fmt: skip
        but = before * after  # (k, draws, nodes): the product over every l but that one
        shares = (inside * (but @ (w * t))).sum(axis=1)  # a tied i: in_i E[1 / (2 + X')]
        shares[j] = (but[j] @ w).sum()  # j's own factor is 1: the product over l != j
        p += shares / m.size
    return p


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
