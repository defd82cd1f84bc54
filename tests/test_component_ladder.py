"""The component ladder of ``Transducer.fit`` (docs/model.md section 10), without Stan.

A scripted backend stands in for Stan: for each number of components it returns
independent draws around one fixed mixture (so R-hat ~ 1 and bulk ESS ~ the number of
draws) and as many divergent transitions as the test asks for. What is tested is the
ladder's bookkeeping: which K is kept, what is recorded and warned, what is saved.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import yieldwise.backends as backends
from yieldwise import Transducer
from yieldwise.backends import CompiledProgram, SampleResult, SamplerWarning
from yieldwise.transducer import AUTO_COMPONENTS, DiagnosticsWarning, component_ladder

RNG = np.random.default_rng(3)
OUTPUTS = np.concatenate([RNG.normal(-1.0, 1.0, 150), RNG.normal(1.5, 1.0, 50)])
CLASSES = np.repeat(["neg", "pos"], [150, 50])


class ScriptedProgram(CompiledProgram):
    """Draws near a fixed K-component mixture, with ``divergent[K]`` divergences."""

    backend_name = "scripted"

    def __init__(self, divergent: dict[int, int], sticky: tuple[int, ...] = ()) -> None:
        self.divergent = divergent
        self.sticky = sticky  # these K get a random-walk log-likelihood (tiny ESS)
        self.calls: list[int] = []

    def _run(self, data, settings, inits, progress) -> SampleResult:
        k, chains, draws = data["K"], settings["chains"], settings["draws"]
        self.calls.append(k)
        rng = np.random.default_rng(settings["seed"] + k)
        shape = (chains, draws)
        eta = np.linspace(1.0, 0.0, k) + rng.normal(0.0, 0.05, (*shape, k))
        w = np.exp(eta) / np.exp(eta).sum(axis=-1, keepdims=True)
        share = np.clip(np.linspace(0.1, 0.9, k) + rng.normal(0.0, 0.02, (*shape, k)), 0, 1)
        alpha = np.stack([1.0 - share, share], axis=-1)
        mu = np.linspace(-1.5, 2.0, k)[:, None] + rng.normal(0.0, 0.05, (*shape, k, 1))
        sigma = np.ones((*shape, k, 1))
        diverging = np.zeros(shape, dtype=bool)
        diverging.flat[: self.divergent.get(k, 0)] = True
        stats = {
            "lp": rng.normal(size=shape),
            "energy": rng.normal(size=shape),  # iid: E-BFMI near 2
            "step_size": np.full(shape, 0.1),
            "acceptance_rate": np.full(shape, 0.8),
            "diverging": diverging,
            "tree_depth": np.full(shape, 4),
            "n_steps": np.full(shape, 15),
        }
        return SampleResult(
            draws={"w": w, "alpha": alpha, "mu": mu, "sigma": sigma,
                   "log_lik": -300.0 + (rng.normal(0.0, 2.0, shape).cumsum(axis=1)
                                        if k in self.sticky else rng.normal(0.0, 2.0, shape))},
            sample_stats=stats, backend="scripted", backend_version="0", stan_version="-",
            settings=dict(settings), sampling_seconds=float(k),
        )  # fmt: skip


class ScriptedBackend:
    name = "scripted"

    def __init__(self, program: ScriptedProgram) -> None:
        self.program = program

    def compile(self, stan_file: Any) -> ScriptedProgram:
        return self.program


@pytest.fixture
def scripted(monkeypatch):
    """Install a scripted backend with the given divergences per K; return its program."""

    def install(divergent: dict[int, int], sticky: tuple[int, ...] = ()) -> ScriptedProgram:
        program = ScriptedProgram(divergent, sticky)
        monkeypatch.setattr(backends, "get_backend", lambda name: ScriptedBackend(program))
        return program

    return install


def fit(
    n_components: Any = "auto", draws: int = 200
) -> tuple[Transducer, list[warnings.WarningMessage]]:
    t = Transducer(n_components=n_components, chains=4, draws=draws, seed=7, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t.fit(OUTPUTS, CLASSES)
    return t, [w for w in caught if issubclass(w.category, (SamplerWarning, DiagnosticsWarning))]


def test_auto_ladder_is_five_then_four():
    assert AUTO_COMPONENTS == (5, 4)
    assert component_ladder("auto") == (5, 4)
    assert component_ladder(3) == (3,)
    assert component_ladder([6, 4, 3]) == (6, 4, 3)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("five", r"n_components must be \"auto\", a positive int .* found 'five'"),
        ([], r"non-empty sequence of distinct positive ints, found \[\]"),
        ([4, 4], r"distinct positive ints, found \[4, 4\]"),
        (0, r"n_components"),
        ([5, -1], r"n_components"),
    ],
)
def test_bad_ladders_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        component_ladder(value)
    with pytest.raises(ValueError, match=message):
        Transducer(n_components=value).fit(OUTPUTS, CLASSES)


def test_clean_first_fit_stops_the_ladder(scripted):
    program = scripted({})
    t, caught = fit()
    assert program.calls == [5]
    assert t.n_components_ == 5 and t.posterior_.posterior.sizes["component"] == 5
    assert t.fit_attempts_[["n_components", "clean", "kept"]].values.tolist() == [[5, True, True]]
    assert caught == []


def test_unclean_fit_is_replaced_by_the_next_clean_one_without_warnings(scripted, tmp_path):
    program = scripted({5: 2})
    t, caught = fit()
    assert program.calls == [5, 4]
    assert t.n_components_ == 4 and t.posterior_.posterior.sizes["component"] == 4
    attempts = t.fit_attempts_.set_index("n_components")
    assert attempts.loc[5, "divergences"] == 2 and not attempts.loc[5, "clean"]
    assert attempts.loc[4, "divergences"] == 0 and attempts.loc[4, "clean"]
    assert attempts["kept"].tolist() == [False, True]
    assert attempts["sampling_seconds"].tolist() == [5.0, 4.0]
    # The replaced fit's divergences are recorded, not warned: the kept fit is clean.
    assert caught == []
    assert t.sampler_summary()["divergent"] == 0
    loaded = Transducer.load(t.save(tmp_path / "t.nc"))
    assert loaded.n_components_ == 4
    assert loaded.fit_attempts_.equals(t.fit_attempts_)
    np.testing.assert_array_equal(loaded.predict_proba([0.0, 1.0]), t.predict_proba([0.0, 1.0]))


def test_when_no_k_is_clean_the_least_bad_is_kept_and_only_its_warnings_shown(scripted):
    program = scripted({5: 3, 4: 1})
    t, caught = fit()
    assert program.calls == [5, 4]
    assert t.n_components_ == 4
    assert t.fit_attempts_["kept"].tolist() == [False, True]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and messages[0].startswith("1 of 800 post-warm-up transitions")


def test_ties_keep_the_earlier_k(scripted):
    scripted({5: 1, 4: 1})
    t, caught = fit()
    assert t.n_components_ == 5 and t.fit_attempts_["kept"].tolist() == [True, False]
    assert [str(w.message)[:6] for w in caught] == ["1 of 8"]


def test_an_int_fits_that_k_only_and_warns(scripted):
    program = scripted({3: 2})
    t, caught = fit(3)
    assert program.calls == [3]
    assert t.n_components_ == 3 and len(t.fit_attempts_) == 1
    assert any("2 of 800 post-warm-up transitions diverged" in str(w.message) for w in caught)


def test_repr_names_the_kept_k_and_the_ladder(scripted):
    scripted({5: 2})
    t, _ = fit()
    assert "components: 4 (tried 5, 4; see fit_attempts_)" in repr(t)
    assert "components: 4 (tried 5, 4; see fit_attempts_)" in t._repr_html_()


def test_chains_that_do_not_mix_move_down_the_ladder(scripted):
    program = scripted({}, sticky=(5,))
    t, caught = fit()
    assert program.calls == [5, 4] and t.n_components_ == 4
    first = t.fit_attempts_.iloc[0]
    assert first["r_hat_max"] > 1.05 and not first["sampler_ok"] and not first["clean"]
    assert caught == []


def test_short_runs_do_not_move_down_the_ladder(scripted):
    """4 x 90 iid draws: R-hat a little above 1.01 and ESS below 400 by chance alone.

    More draws cure that, another K does not: K = 5 is kept, and the warning says so.
    """
    program = scripted({})
    t, caught = fit(draws=90)
    assert program.calls == [5] and t.n_components_ == 5
    attempt = t.fit_attempts_.iloc[0]
    assert 1.01 < attempt["r_hat_max"] <= 1.05 and attempt["ess_bulk_min"] < 400
    assert attempt["sampler_ok"] and not attempt["clean"]
    assert [w.category for w in caught] == [DiagnosticsWarning]
