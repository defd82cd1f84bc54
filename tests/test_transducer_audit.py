"""Audit of the transducer's inputs and estimates: each check against an independent
computation or an exact invariance (no Stan: given draws, the Laplace backend, or fits
stopped where the sampler would start)."""

from __future__ import annotations

import json
import re
import warnings
from typing import ClassVar

import arviz as az
import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from yieldwise import Transducer, UtilityMatrix
from yieldwise.metrics import reliability_table
from yieldwise.transducer.encoding import OutputTransform, columns_naming_classes
from yieldwise.transducer.io import TransducerFileError

LABELS = ("neg", "pos")


# ----------------------------------------------------------------------------- helpers
class _ReachedTheBackend(Exception):
    """Raised in place of choosing a backend: the fit got past every check on its inputs."""


@pytest.fixture
def no_sampling(monkeypatch):
    """``get_backend`` replaced by a stub that raises: a fit runs its checks, no sampler."""
    import yieldwise.backends

    def stub(name):
        raise _ReachedTheBackend(name)

    monkeypatch.setattr(yieldwise.backends, "get_backend", stub)


def _probability_vectors(n=200, classes=4, seed=4):
    """(n, classes) probability vectors, each item's own class raised, and its classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    logits = rng.normal(0, 1, (n, classes))
    logits[np.arange(n), y] += 2.0
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True), y


def _ar1(rng, shape, rho, scale):
    """AR(1) series along axis 1 (draws) with stationary sd ``scale``: correlated draws."""
    out = np.empty(shape)
    out[:, 0] = rng.normal(0, scale, (shape[0], *shape[2:]))
    for d in range(1, shape[1]):
        noise = rng.normal(0, scale * np.sqrt(1 - rho**2), (shape[0], *shape[2:]))
        out[:, d] = rho * out[:, d - 1] + noise
    return out


def _draws(rng, chains, draws, k=4, dims=1, rho=0.0):
    """Random mixture draws (chain, draw, ...) of k components and two classes; with
    ``rho`` > 0 correlated along the draws, as a Markov chain's are."""
    logits_w = _ar1(rng, (chains, draws, k), rho, 0.5)
    w = np.exp(logits_w) / np.exp(logits_w).sum(axis=2, keepdims=True)
    a = np.linspace(-1.5, 1.5, k)[None, None, :] + _ar1(rng, (chains, draws, k), rho, 0.7)
    alpha = np.stack([1 / (1 + np.exp(a)), 1 / (1 + np.exp(-a))], axis=-1)
    centres = np.linspace(-2, 2, k)[None, None, :, None]
    mu = centres + _ar1(rng, (chains, draws, k, dims), rho, 0.2)
    sigma = np.exp(-0.2 + _ar1(rng, (chains, draws, k, dims), rho, 0.2))
    return {"w": w, "alpha": alpha, "mu": mu, "sigma": sigma}


def _one_column(draws, n=120, seed=0):
    """A transducer of one identity-scale column named "score" given ``draws``."""
    rng = np.random.default_rng(seed)
    classes = rng.integers(0, 2, n)
    y = rng.normal(np.where(classes == 1, 1.0, -1.0), 1.0)
    t = Transducer.from_draws(
        draws, pd.DataFrame({"score": y}), np.array(LABELS)[classes], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    return t, y, classes


def binary_draws():
    return _draws(np.random.default_rng(1), 2, 50)


@pytest.fixture(scope="module")
def binary():
    t, y, classes = _one_column(binary_draws())
    return t, y, classes


def _two_columns(columns):
    """A transducer of two identity-scale columns, fitted on a DataFrame named
    ``columns`` (None: on a plain array), given draws that tell the columns apart."""
    rng = np.random.default_rng(3)
    classes = rng.integers(0, 2, 100)
    y = np.c_[rng.normal(1.5 * classes, 1.0), rng.normal(-0.3 * classes, 2.0) + 5]
    draws = _draws(rng, 1, 20, k=3, dims=2)
    draws["mu"][..., 1] += 5.0  # the second column's kernels where its outputs are
    draws["sigma"][..., 1] *= 2.0
    outputs = y if columns is None else pd.DataFrame(y, columns=columns)
    return Transducer.from_draws(
        draws, outputs, np.array(LABELS)[classes], LABELS, output_transform="identity",
        resolution=None,
    )  # fmt: skip


# ------------------------------------- 1. columns named after the classes, in other orders
@pytest.mark.parametrize(
    ("columns", "labels", "expected"),
    [
        (["p_3", "p_2", "p_1", "p_0"], [0, 1, 2, 3], (3, 2, 1, 0)),
        (["logit_other", "logit_eight"], ["eight", "other"], (1, 0)),
        (["d", "c", "b", "a"], ["a", "b", "c", "d"], (3, 2, 1, 0)),
        (["prob-b", "prob-a", "prob-c"], ["a", "b", "c"], (1, 0, 2)),
        (["p_0", "p_1"], [0, 1], (0, 1)),  # the identity
        (["output_0", "output_1"], [0, 1], (0, 1)),
        (["New York", "Paris"], ["Paris", "New York"], (1, 0)),  # the whole name
        (["score", "margin"], ["a", "b"], None),  # not class labels
        (["output_0", "output_1"], ["a", "b"], None),
        (["a_b", "b"], ["a", "b"], None),  # a column naming two classes
        (["p_a", "q_a"], ["a", "b"], None),  # two columns naming one class
        (["a", "b", "c"], ["a", "b"], None),  # not one column per class
        (["A", "B"], ["a", "b"], None),  # exact tokens: case counts
    ],
)
def test_columns_naming_classes(columns, labels, expected):
    assert columns_naming_classes(columns, labels) == expected


def test_probability_columns_named_after_the_classes_in_another_order_are_refused():
    """The audit's case: a 4-class probability vector whose columns are the class labels
    in reverse order was paired with classes_ by position (accuracy 0.59, not 0.83)."""
    p, y = _probability_vectors()
    names = np.array(["a", "b", "c", "d"])
    renamed = pd.DataFrame(p, columns=list(names))[["d", "c", "b", "a"]]
    with pytest.raises(ValueError) as caught:
        Transducer(backend="laplace", progress=False).fit(renamed, names[y])
    message = str(caught.value)
    assert "columns ['d', 'c', 'b', 'a']" in message
    assert "classes_ would be ['a', 'b', 'c', 'd']" in message
    assert "in the order ['d', 'c', 'b', 'a']" in message
    assert "class_labels=['d', 'c', 'b', 'a']" in message
    assert "outputs[['a', 'b', 'c', 'd']]" in message


@pytest.mark.parametrize(
    ("columns", "labels", "class_labels", "implied"),
    [
        (["p_3", "p_2", "p_1", "p_0"], np.arange(4), None, "[3, 2, 1, 0]"),
        (["logit_other", "logit_eight"], np.array(["eight", "other"]), None,
         "['other', 'eight']"),
        (["p_b", "p_a", "p_c"], np.array(["a", "b", "c"]), ["a", "b", "c"], "['b', 'a', 'c']"),
    ],
)  # fmt: skip
def test_every_output_of_one_column_per_class_is_checked(
    no_sampling, columns, labels, class_labels, implied
):
    """Logits as well as probability vectors, two classes as well as four: refused before
    any sampling, naming the order the names imply."""
    rng = np.random.default_rng(0)
    n = 60
    values = rng.dirichlet(np.ones(len(columns)), n)
    if columns[0].startswith("logit"):
        values = np.log(values)
    classes = labels[np.arange(n) % len(labels)]
    with pytest.raises(ValueError, match=rf"in the order {re.escape(implied)}"):
        Transducer(backend="laplace", progress=False).fit(
            pd.DataFrame(values, columns=columns), classes, class_labels=class_labels
        )


def test_columns_in_the_classes_order_or_other_names_reach_the_sampler(no_sampling):
    p, y = _probability_vectors(n=60)
    names = np.array(["a", "b", "c", "d"])
    frame = pd.DataFrame(p, columns=list(names))
    cases = [
        (frame, None),  # the identity
        (frame[["d", "c", "b", "a"]], ["d", "c", "b", "a"]),  # class_labels in that order
        (frame[["d", "c", "b", "a"]][["a", "b", "c", "d"]], None),  # columns reordered
        (frame.set_axis(["score", "margin", "x", "y"], axis=1), None),  # not class names
        (frame.set_axis([f"output_{j}" for j in range(4)], axis=1), None),
        (frame.to_numpy(), ["d", "c", "b", "a"]),  # a plain array: by position, as said
    ]
    for outputs, class_labels in cases:
        with pytest.raises(_ReachedTheBackend):
            Transducer(backend="laplace", progress=False).fit(
                outputs, names[y], class_labels=class_labels
            )
    # a joint fit's columns are classifiers, not classes: never checked
    scores = pd.Series(p[:, 0])
    with pytest.raises(_ReachedTheBackend):
        Transducer(backend="laplace", progress=False).fit(
            {"b": scores, "a": 1 - scores}, np.where(y == 0, "a", "b")
        )


def _unsorted_classifier(classes, proba):
    """A trained classifier stub whose classes_ are not sorted: predict_proba's column j
    is the probability of classes_[j] (items are given as their row numbers)."""
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Stub(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):  # never called: the wrapper does not train
            raise AssertionError("AugmentedClassifier must not train the estimator")

        def predict_proba(self, X):
            return proba[np.asarray(X, dtype=int).ravel()]

    stub = Stub()
    stub.classes_ = np.asarray(classes)
    return stub


class _StopAtFit(Exception):
    pass


class _RecordingTransducer(Transducer):
    """A Transducer whose fit records what it is given, then stops."""

    seen: ClassVar[list] = []

    def fit(self, outputs, classes, *, class_labels=None):
        _RecordingTransducer.seen.append((np.asarray(outputs), class_labels))
        raise _StopAtFit


def test_sklearn_passes_the_estimators_class_order():
    """The wrapper gave class_labels=np.unique(y): column j of an estimator's outputs was
    read as the j-th sorted label, not the estimator's classes_[j]."""
    from yieldwise.sklearn import AugmentedClassifier

    p, y = _probability_vectors(n=80)
    order = np.array(["d", "b", "c", "a"])  # the estimator's classes_, unsorted
    model = _unsorted_classifier(order, p)
    utility = UtilityMatrix(np.eye(4), classes=["a", "b", "c", "d"])
    X = np.arange(80)[:, None]
    _RecordingTransducer.seen.clear()
    with pytest.raises(_StopAtFit):
        AugmentedClassifier(model, utility, transducer=_RecordingTransducer()).fit(X, order[y])
    outputs, class_labels = _RecordingTransducer.seen[-1]
    np.testing.assert_array_equal(outputs, p)
    # column j is the probability of classes_[j]: the transducer must read it so
    assert tuple(class_labels) == tuple(order)


def test_sklearn_end_to_end_with_unsorted_binary_classes():
    """A binary estimator with classes_ (1, 0): its positive column (index 1) is the
    probability of class 0; the wrapper's transducer is the one fitted with the
    estimator's order, exactly."""
    from yieldwise.sklearn import AugmentedClassifier

    rng = np.random.default_rng(5)
    n = 300
    truth = rng.integers(0, 2, n)
    p0 = rng.beta(2 + 3 * (truth == 0), 2 + 3 * (truth == 1))
    model = _unsorted_classifier([1, 0], np.c_[1 - p0, p0])
    utility = UtilityMatrix([[1, 0], [0, 1]], classes=[0, 1])
    template = Transducer(backend="laplace", progress=False, seed=2)
    X = np.arange(n)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        augmented = AugmentedClassifier(model, utility, transducer=template).fit(X, truth)
        direct = Transducer(backend="laplace", progress=False, seed=2).fit(
            p0, truth, class_labels=[1, 0]
        )
    assert augmented.classes_.tolist() == [1, 0]
    np.testing.assert_array_equal(augmented.predict_proba(X), direct.predict_proba(p0))
    # and column 1 of predict_proba is P(class 0), which grows with the score p0
    proba = augmented.predict_proba(X)
    assert np.corrcoef(proba[:, 1], p0)[0, 1] > 0.9


def test_sklearn_refuses_labels_outside_the_estimators_classes():
    from yieldwise.sklearn import AugmentedClassifier

    p, y = _probability_vectors(n=40, classes=3)
    model = _unsorted_classifier(["c", "a", "b"], p)
    utility = UtilityMatrix(np.eye(3), classes=["a", "b", "x"])
    with pytest.raises(ValueError, match=r"calibration labels \['a', 'b', 'x'\] are not the "
                                         r"classes of the estimator"):  # fmt: skip
        AugmentedClassifier(model, utility).fit(
            np.arange(40)[:, None], np.array(["a", "b", "x"])[y]
        )


# ------------------------------------------- 2. prevalences and exchangeable by keyword
def test_prevalences_cannot_be_passed_by_position(binary):
    """predict_proba(q, r) read r as exchangeable (truthy: True) and ignored it."""
    t, _, _ = binary
    q, r = np.array([-1.0, 0.0, 1.0]), [0.9, 0.1]
    for call in (
        lambda: t.predict_proba(q, r),
        lambda: t.draws_proba(q, r),
        lambda: t.predict_interval(q, 0.9, r),
        lambda: t.decide(q, UtilityMatrix([[1, 0], [0, 1]], classes=list(LABELS)), r),
    ):
        with pytest.raises(TypeError, match="positional argument"):
            call()
    # by keyword: the generative mode of theory 3.2 by hand, sum_t G_t(c, y) r_c / F_t(c)
    draws = binary_draws()
    g = np.exp(_log_g(draws, q))  # (S, n, C)
    f = np.einsum("abk,abkc->abc", draws["w"], draws["alpha"]).reshape(-1, 2)  # F_t(c)
    weighted = g / f[:, None, :] * np.asarray(r)[None, None, :]
    expected = weighted.sum(axis=0) / weighted.sum(axis=(0, 2))[:, None]
    np.testing.assert_allclose(t.predict_proba(q, prevalences=r), expected, rtol=1e-10)
    assert np.abs(expected - t.predict_proba(q)).max() > 0.1  # r matters here


@pytest.mark.parametrize("value", ["no", [0.9, 0.1], 1, 0, None, np.array([True])])
def test_exchangeable_must_be_a_bool(binary, value):
    t, _, _ = binary
    with pytest.raises(TypeError, match=r"exchangeable must be True or False, found"):
        t.predict_proba(np.array([0.0]), exchangeable=value)


def test_exchangeable_as_a_numpy_bool_is_that_bool(binary):
    t, y, _ = binary
    per_draw = t.draws_proba(y).values.reshape(-1, y.size, 2)
    np.testing.assert_allclose(
        t.predict_proba(y, exchangeable=np.False_), per_draw.mean(axis=0), rtol=1e-12
    )
    np.testing.assert_array_equal(
        t.predict_proba(y, exchangeable=np.True_), t.predict_proba(y, exchangeable=True)
    )


# ------------------------------------------------------- 3. reliability with draws
def test_reliability_draws_of_the_other_class_are_refused(binary):
    """Probabilities of "pos" with positive left at its default ("neg"): the band was
    class "neg"'s, the frequency "neg"'s, the x-axis "pos"'s."""
    from yieldwise import plots

    t, y, classes = binary
    truth = np.array(LABELS)[classes]
    p_pos = t.predict_proba(y)[:, 1]
    draws = t.draws_proba(y)
    for call in (
        lambda: reliability_table(p_pos, truth, draws=draws),
        lambda: plots.reliability(p_pos, truth, draws=draws),
    ):
        with pytest.raises(ValueError) as caught:
            call()
        message = str(caught.value)
        assert "positive='neg', the first class by default" in message
        assert "draws" in message and "other class's probabilities" in message
        assert "positive='pos'" in message
    import matplotlib.pyplot as plt

    plt.close("all")
    # positive given: the band is each bin's per-draw mean of class "pos", by hand
    table = reliability_table(p_pos, truth, positive="pos", bins=4, draws=draws, band=0.5)
    values = draws.sel({"class": "pos"}).values.reshape(-1, y.size)
    index = np.clip(np.searchsorted(np.linspace(0, 1, 5), p_pos, side="right") - 1, 0, 3)
    for row, k in zip(table.itertuples(), np.unique(index), strict=True):
        means = values[:, index == k].mean(axis=1)
        assert row.band_lower == pytest.approx(np.quantile(means, 0.25))
        assert row.band_upper == pytest.approx(np.quantile(means, 0.75))


def test_reliability_draws_that_stray_from_the_probabilities_are_refused():
    p = np.array([0.1, 0.2, 0.7, 0.9])
    draws = np.tile(p, (20, 1))
    draws[:, 2] = 0.2  # one item's draws average 0.2 where its probability is 0.7
    message = r"item 2's probability 0.7 lies 0.5 outside the range of its draws \[0.2, 0.2\]"
    with pytest.raises(ValueError, match=message + ".*not draws of what"):
        reliability_table(p, [0, 0, 1, 1], positive=1, draws=draws)
    draws[:, 2] = 0.7 + 0.04  # within the tolerance: accepted
    reliability_table(p, [0, 0, 1, 1], positive=1, draws=draws)


def test_a_transducers_probabilities_lie_within_its_draws():
    """What the check rests on: the exchangeable p(c | y) is a weighted mean of the
    per-draw F_t(c | y), so it lies within their range, even for three draws far apart
    (where it differs from their plain mean by several hundredths)."""
    rng = np.random.default_rng(21)
    t = _one_column(_draws(rng, 1, 3, k=3), n=60, seed=22)[0]
    q = np.linspace(-4, 4, 81)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # beyond the calibration outputs
        p = t.predict_proba(q)
        draws = t.draws_proba(q).values.reshape(-1, q.size, 2)
        generative = t.predict_proba(q, prevalences=[0.2, 0.8])
        draws_r = t.draws_proba(q, prevalences=[0.2, 0.8]).values.reshape(-1, q.size, 2)
        draws_array = t.draws_proba(q)
    assert np.abs(p - draws.mean(axis=0)).max() > 0.03
    for value, per_draw in ((p, draws), (generative, draws_r)):
        assert (value >= per_draw.min(axis=0) - 1e-12).all()
        assert (value <= per_draw.max(axis=0) + 1e-12).all()
    truth = np.array(LABELS)[(q > 0).astype(int)]
    reliability_table(p[:, 1], truth, positive="pos", draws=draws_array)  # accepted


# ------------------------------------------------ 4. column names given or generated
def test_user_names_like_the_defaults_are_matched_by_name():
    """['output_0', 'output_1'] given by the user were taken for a plain array's names,
    so a reordered DataFrame was read by position (0.864 apart)."""
    t = _two_columns(["output_0", "output_1"])
    assert t.transform_.named is True
    q = pd.DataFrame({"output_0": [-1.0, 0.5, 2.0], "output_1": [3.0, 5.0, 7.0]})
    np.testing.assert_array_equal(t.predict_proba(q[["output_1", "output_0"]]), t.predict_proba(q))
    np.testing.assert_array_equal(t.predict_proba(q), t.predict_proba(q.to_numpy()))
    with pytest.raises(ValueError, match="as at fit time"):
        t.predict_proba(q.set_axis(["a", "b"], axis=1))


def test_a_named_frame_given_to_a_transducer_fitted_on_an_array_warns():
    t = _two_columns(None)
    assert t.transform_.named is False
    q = np.array([[-1.0, 3.0], [0.5, 5.0], [2.0, 7.0]])
    frame = pd.DataFrame(q, columns=["x1", "x0"])
    with pytest.warns(UserWarning, match=r"columns \['x1', 'x0'\], but the transducer was "
                                         r"fitted on a plain array"):  # fmt: skip
        got = t.predict_proba(frame)
    np.testing.assert_array_equal(got, t.predict_proba(q))  # by position, as said
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        t.predict_proba(pd.DataFrame(q, columns=["output_0", "output_1"]))  # the defaults
        t.predict_proba(q)
        one = _one_column(_draws(np.random.default_rng(2), 1, 5))[0]
        one.predict_proba(pd.Series([0.0, 1.0], name="score"))


def test_named_is_saved_and_a_file_without_it_reads_as_before(tmp_path):
    for columns, named in ((["output_0", "output_1"], True), (None, False)):
        t = _two_columns(columns)
        path = tmp_path / f"t_{named}.nc"
        t.save(path)
        loaded = Transducer.load(path)
        assert loaded.transform_ == t.transform_ and loaded.transform_.named is named
    # a file of the same format version written before the record: named is None, and the
    # default names are taken as a plain array's, as before
    data = az.from_netcdf(str(tmp_path / "t_True.nc"))
    for group in data.groups():
        getattr(data, group).load()
    record = json.loads(data.posterior.attrs["yieldwise_transform"])
    assert record.pop("named") is True
    data.posterior.attrs["yieldwise_transform"] = json.dumps(record)
    older = tmp_path / "older.nc"
    data.to_netcdf(str(older))
    loaded = Transducer.load(older)
    assert loaded.transform_.named is None
    q = pd.DataFrame({"output_0": [1.0, 2.0], "output_1": [2.0, 3.0]})
    with pytest.warns(UserWarning, match="fitted on a plain array"):
        swapped = loaded.predict_proba(q[["output_1", "output_0"]])
    np.testing.assert_array_equal(swapped, loaded.predict_proba(q[["output_1", "output_0"]]
                                                                .to_numpy()))  # fmt: skip
    with pytest.raises(ValueError, match="named must be true, false or null"):
        OutputTransform.from_json(json.dumps({**record, "named": "yes"}))


# ------------------------------------------------------------------ 5. prob
@pytest.mark.parametrize(
    ("prob", "error"),
    [([0.5, 0.9], TypeError), ("0.9", TypeError), (np.array([0.5]), TypeError),
     (True, TypeError), (None, TypeError), (0, ValueError), (1, ValueError),
     (1.5, ValueError), (np.nan, ValueError)],
)  # fmt: skip
def test_prob_must_be_one_number_in_the_open_unit_interval(binary, prob, error):
    t, _, _ = binary
    for method in (t.predict_interval, lambda q, prob: t.output_density(q, prob=prob)):
        with pytest.raises(error, match=r"prob must be one number in \(0, 1\), found "):
            method(np.array([0.0]), prob)


def test_a_numpy_prob_gives_the_draws_quantiles(binary):
    t, y, _ = binary
    band = t.predict_interval(y[:5], np.float32(0.5))
    per_draw = t.draws_proba(y[:5]).values.reshape(-1, 5, 2)
    np.testing.assert_allclose(band["lower"].values, np.quantile(per_draw, 0.25, axis=0),
                               rtol=1e-12)  # fmt: skip
    assert band.attrs["prob"] == 0.5 and type(band.attrs["prob"]) is float


# ----------------------------------------------------------------- 6. loo
def _log_g(draws, y):
    """log G_t(c, y) = log sum_k w_tk alpha_tkc N(y | mu_tk, sigma_tk), (S, items, C),
    by scipy (theory 3.2)."""
    w, alpha, mu, sigma = (draws[name] for name in ("w", "alpha", "mu", "sigma"))
    s = w.shape[0] * w.shape[1]
    dens = norm.pdf(y[None, None, :, None], mu[:, :, None, :, 0], sigma[:, :, None, :, 0])
    g = np.einsum("abk,abkc,abik->abic", w, alpha, dens).reshape(s, y.size, alpha.shape[-1])
    return np.log(g)


def _brute_force(draws, y, classes):
    """(joint, total): log G_t(c_i, y_i) and log sum_c G_t(c, y_i), (S, items)."""
    log_g = _log_g(draws, y)
    return log_g[:, np.arange(y.size), classes], logsumexp(log_g, axis=2)


def _arviz_reff(draws):
    """ArviZ's az.loo relative efficiency: the mean of every series' ESS ("mean") over
    the number of draws, here over the given draws (all of which vary)."""
    ess = az.ess(az.from_dict(posterior=draws), method="mean")
    values = np.hstack([ess[v].values.ravel() for v in ess.data_vars])
    return values.mean() / (draws["w"].shape[0] * draws["w"].shape[1])


def test_loo_by_brute_force_with_correlated_chains():
    """p_loo of the conditional estimate is the exchangeable in-sample log score less
    elpd_loo (it mixed in the mean of per-draw conditionals); the Pareto smoothing takes
    ArviZ's relative efficiency of the chains (it took 1)."""
    rng = np.random.default_rng(11)
    draws = _draws(rng, 4, 250, rho=0.9)
    t, y, classes = _one_column(draws, n=80, seed=12)
    joint, total = _brute_force(draws, y, classes)
    reff = _arviz_reff(draws)
    assert reff < 0.5  # correlated draws: the tail fitted is longer than with reff = 1
    lw = az.psislw(-joint.T, reff=reff)[0].T
    elpd_joint = logsumexp(lw + joint, axis=0)
    elpd_cond = elpd_joint - logsumexp(lw + total, axis=0)
    lppd_joint = logsumexp(joint, axis=0) - np.log(joint.shape[0])
    lppd_cond = logsumexp(joint, axis=0) - logsumexp(total, axis=0)
    k = az.psislw(-joint.T, reff=reff)[1]
    for conditional, elpd_i, lppd_i in ((False, elpd_joint, lppd_joint),
                                        (True, elpd_cond, lppd_cond)):  # fmt: skip
        ours = t.loo(conditional=conditional)
        np.testing.assert_allclose(ours["loo_i"].values, elpd_i, rtol=1e-10)
        np.testing.assert_allclose(ours["pareto_k"].values, k, rtol=1e-8)
        assert ours["p_loo"] == pytest.approx(lppd_i.sum() - elpd_i.sum(), rel=1e-9)
    # the conditional lppd is the log score of predict_proba (exchangeable) at y_i
    proba = t.predict_proba(y)
    np.testing.assert_allclose(lppd_cond, np.log(proba[np.arange(y.size), classes]),
                               rtol=1e-10)  # fmt: skip
    # and the same via ArviZ's own loo for the joint, with its default relative efficiency
    idata = az.from_dict(posterior=draws, log_likelihood={"y": joint.reshape(4, 250, -1)})
    reference = az.loo(idata, pointwise=True)
    assert t.loo()["elpd_loo"] == pytest.approx(reference["elpd_loo"], rel=1e-10)
    assert t.loo()["p_loo"] == pytest.approx(reference["p_loo"], rel=1e-9)


def test_loo_with_one_chain_uses_no_relative_efficiency():
    rng = np.random.default_rng(13)
    draws = _draws(rng, 1, 300, rho=0.9)
    t, y, classes = _one_column(draws, n=50, seed=14)
    joint, _ = _brute_force(draws, y, classes)
    lw, k = az.psislw(-joint.T, reff=1.0)
    np.testing.assert_allclose(t.loo()["loo_i"].values, logsumexp(lw.T + joint, axis=0),
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(t.loo()["pareto_k"].values, k, rtol=1e-8)


# ------------------------------------------------------------------ 7. messages
def test_an_unused_category_is_named_as_a_category(no_sampling):
    scores = np.linspace(0.01, 0.99, 40)
    labels = np.where(scores > 0.5, "pos", "neg")
    for classes, call in (
        (pd.Categorical(labels, categories=["pos", "neg", "unused"]),
         r"classes\.remove_unused_categories\(\)"),
        (pd.Series(pd.Categorical(labels, categories=["pos", "neg", "unused"])),
         r"classes\.cat\.remove_unused_categories\(\)"),
    ):  # fmt: skip
        with pytest.raises(ValueError) as caught:
            Transducer(backend="laplace").fit(scores, classes)
        message = str(caught.value)
        assert "['unused'] have no calibration items" in message
        assert "categories of the categorical classes ['pos', 'neg', 'unused']" in message
        assert re.search(call, message)
        assert "class_labels" not in message  # the user passed none
    # with class_labels given, the remedy is theirs
    with pytest.raises(ValueError, match="drop it from class_labels"):
        Transducer(backend="laplace").fit(scores, labels, class_labels=["neg", "pos", "x"])


@pytest.mark.parametrize("prior", [[1, 2], "tau_f_scale", 5.0])
def test_a_prior_that_is_no_mapping_says_so(no_sampling, prior):
    scores = np.linspace(0.01, 0.99, 40)
    with pytest.raises(TypeError, match=r"prior must be a mapping of hyper-parameter names "
                                        r"to numbers.*found " + type(prior).__name__):  # fmt: skip
        Transducer(backend="laplace", prior=prior).fit(scores, (scores > 0.5).astype(int))


def test_a_version_1_file_is_refused_naming_what_was_found(tmp_path, binary):
    t, _, _ = binary
    path = tmp_path / "t.nc"
    t.save(path)

    def altered(change):
        data = az.from_netcdf(str(path))
        for group in data.groups():
            getattr(data, group).load()
        change(data.posterior.attrs)
        out = tmp_path / "altered.nc"
        data.to_netcdf(str(out))
        return out

    def old_model(attrs):  # as yieldwise <= 0.1 wrote: no version, no kernel design
        attrs.pop("yieldwise_format_version")
        attrs.pop("yieldwise_design")

    # (a file of today's model without the version is refused otherwise: it was not
    # written by Transducer.save; tests/test_io_audit_fixes.py checks that message)
    absent = altered(old_model)
    with pytest.raises(TransducerFileError) as caught:
        Transducer.load(absent)
    message = str(caught.value)
    assert "'yieldwise_format_version' is absent, so the file is taken for format version 1" \
        in message  # fmt: skip
    assert "written by yieldwise" not in message
    assert "reads format versions 2 to" in message
    one = altered(lambda a: (a.__setitem__("yieldwise_format_version", 1),
                             a.pop("yieldwise_version")))  # fmt: skip
    with pytest.raises(TransducerFileError) as caught:
        Transducer.load(one)
    message = str(caught.value)
    assert "'yieldwise_format_version' is 1: a transducer of format version 1" in message
    assert "no attribute 'yieldwise_version' says which yieldwise wrote it" in message
