"""One set of sampler defaults: every entry point agrees with SAMPLER_DEFAULTS (no Stan)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from yieldwise import Transducer
from yieldwise.cli import build_parser
from yieldwise.transducer import SAMPLER_DEFAULTS

PACKAGE = Path(__file__).resolve().parents[1] / "yieldwise"


def test_the_transducer_takes_its_defaults_from_sampler_defaults():
    signature = inspect.signature(Transducer)
    for name, value in SAMPLER_DEFAULTS.as_dict().items():
        assert signature.parameters[name].default == value, name
    assert Transducer().get_params()["adapt_delta"] == SAMPLER_DEFAULTS.adapt_delta


def test_a_fit_records_the_warmup_and_adapt_delta_its_dimensions_chose():
    """The warm-up and target acceptance rate that ran are in the fit's record, per
    output dimension (scripted backend: the settings reach the backend as a real fit's
    would)."""
    import warnings

    import numpy as np

    from yieldwise.transducer.io import fit_record

    rng = np.random.default_rng(2)
    c = (rng.random(300) < 0.4).astype(int)
    kw = {"backend": "laplace", "chains": 2, "draws": 50, "seed": 1, "progress": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = Transducer(**kw).fit(rng.normal(c, 1.0), c)
        two = Transducer(**kw).fit(rng.normal(c[:, None], 1.0, (300, 2)), c)
        three = Transducer(**kw).fit(rng.normal(c[:, None], 1.0, (300, 3)), c)
        given = Transducer(**kw, warmup=77, adapt_delta=0.9).fit(rng.normal(c, 1.0), c)
        kw.pop("draws")
        chosen = [
            Transducer(**kw).fit(y, c)
            for y in (rng.normal(c, 1.0), rng.normal(c[:, None], 1.0, (300, 2)))
        ]
    ran = [fit_record(t.posterior_)["sampler"] for t in (one, two, three, given)]
    assert [r["warmup"] for r in ran] == [500, 250, 250, 77]
    # the step size's last window: 150 of one dimension's 500; Stan's own (not recorded)
    # for two and more, and where 30 % of the warm-up would be under Stan's 50
    assert [r.get("step_size_window") for r in ran] == [150, None, None, None]
    # three dimensions: whitened centres at 0.99 (five or more: 0.95, the next test)
    assert [r["adapt_delta"] for r in ran] == [0.99, 0.97, 0.99, 0.9]
    # and a deeper tree (11) for three dimensions
    assert [r["max_treedepth"] for r in ran] == [10, 10, 11, 10]
    assert three.get_params()["max_treedepth"] is None  # the constructor's: by dimensions
    assert [r["draws"] for r in ran] == [50, 50, 50, 50]  # given
    # not given: 1,000 draws per chain for one output dimension, 750 for two
    assert [fit_record(t.posterior_)["sampler"]["draws"] for t in chosen] == [1000, 750]
    assert [t.posterior.n_draws for t in chosen] == [2 * 1000, 2 * 750]


@pytest.mark.parametrize(
    ("name", "one_dim", "two_dims", "centres_whitened", "multi", "given"),
    [("adapt_delta", 0.99, 0.97, 0.99, 0.95, [(1, 0.8), (2, 0.999), (3, 0.9), (9, 0.9)]),
     # 0 is a value given (checked by the backends), not a missing one
     ("warmup", 500, 250, 250, 250, [(1, 100), (2, 0)]),
     ("draws", 1000, 750, 750, 750, [(1, 300), (2, 2000)]),
     ("max_treedepth", 10, 10, 11, 10, [(1, 12), (3, 10), (9, 13)])],
)  # fmt: skip
def test_a_setting_follows_the_output_dimensions_unless_given(
    name, one_dim, two_dims, centres_whitened, multi, given
):
    """One, two, three or four (centres, whitened: stan_data.WHITEN_MAX_DIMS), five or more."""
    from yieldwise.transducer.stan_data import WHITEN_MAX_DIMS

    assert getattr(SAMPLER_DEFAULTS, name) is None
    chosen = getattr(SAMPLER_DEFAULTS, f"{name}_for")
    assert chosen(1) == one_dim
    assert chosen(2) == two_dims
    assert chosen(3) == chosen(WHITEN_MAX_DIMS) == centres_whitened
    assert chosen(WHITEN_MAX_DIMS + 1) == chosen(9) == multi
    for dims, value in given:  # a value given by the user wins, in any dimension
        assert chosen(dims, value) == value


def test_divergences_advise_the_next_adapt_delta_or_a_longer_warmup():
    import warnings

    import numpy as np

    from yieldwise.backends import SamplerWarning
    from yieldwise.backends._base import SampleResult, warn_on_diagnostics

    rng = np.random.default_rng(0)
    stats = {
        "lp": rng.normal(size=(2, 50)),
        "energy": rng.normal(size=(2, 50)),
        "diverging": np.arange(100).reshape(2, 50) < 3,  # 3 divergent transitions
        "tree_depth": np.full((2, 50), 3),
        "n_steps": np.full((2, 50), 7),
    }
    advice = {0.8: "e.g. 0.95)", 0.95: "e.g. 0.99)", 0.99: "e.g. 0.999)",
              0.999: "adapt_delta is already 0.999; try a longer warm-up"}  # fmt: skip
    for adapt_delta, expected in advice.items():
        result = SampleResult({}, stats, "given", "-", "-", {"adapt_delta": adapt_delta})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_on_diagnostics(result)
        messages = [str(w.message) for w in caught if w.category is SamplerWarning]
        assert messages and messages[0].startswith("3 of 100 post-warm-up transitions"), messages
        assert expected in messages[0], (adapt_delta, messages[0])


def test_the_command_line_defaults_are_the_sampler_defaults():
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    fit = commands.choices["fit"]
    for name in ("chains", "warmup", "draws"):
        assert fit.get_default(name) == getattr(SAMPLER_DEFAULTS, name), name


def test_the_r_bridge_defaults_are_the_sampler_defaults():
    """yw_fit's defaults (yieldwise/R/yieldwise.R) are held to the Python ones."""
    text = (PACKAGE / "R" / "yieldwise.R").read_text()
    start = text.index("yw_fit <- function(")
    signature = text[start : text.index("{", start)]
    for name in ("chains", "warmup", "draws"):
        found = re.search(rf"\b{name} = (\d+|NULL)", signature)
        assert found is not None, name
        value = None if found.group(1) == "NULL" else int(found.group(1))
        assert value == getattr(SAMPLER_DEFAULTS, name), name


def test_the_report_documents_the_sampler_defaults():
    """The [sampler] table of the report's documented configuration shows the defaults."""
    from yieldwise import report

    doc = report.__doc__ or ""
    table = doc[doc.index("[sampler]") :]
    for name in ("chains", "warmup", "draws"):
        found = re.search(rf"^\s*{name} = (\d+)", table, re.MULTILINE)
        if getattr(SAMPLER_DEFAULTS, name) is None:  # chosen per fit: not in the table
            assert found is None, name
            continue
        assert found is not None, name
        assert int(found.group(1)) == getattr(SAMPLER_DEFAULTS, name), name


def test_a_class_reduction_with_pair_offsets_takes_its_own_adapt_delta(five_class_data, max_pairs):
    """A class reduction's fit with pair offsets runs at 0.95 unless given; without the
    offsets it keeps the one output dimension's 0.99 (Laplace backend: the settings reach
    the backend as a real fit's would)."""
    import warnings

    from yieldwise.transducer.io import fit_record

    assert SAMPLER_DEFAULTS.adapt_delta_for(1, grouped=True) == 0.95
    assert SAMPLER_DEFAULTS.adapt_delta_for(1, 0.8, grouped=True) == 0.8
    assert SAMPLER_DEFAULTS.max_treedepth_for(1, grouped=True) == 10
    assert SAMPLER_DEFAULTS.max_treedepth_for(3, grouped=True) == 10  # not whitened centres
    frame, labels = five_class_data(400, 1)
    kw = {"backend": "laplace", "chains": 2, "draws": 50, "seed": 1, "progress": False}
    ran = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pairs, given in ((600, None), (0, None), (600, 0.9)):
            with max_pairs(pairs):
                t = Transducer(**kw, adapt_delta=given).fit(frame, labels)
            assert t.reduction_.paired == (pairs > 0)
            ran.append(fit_record(t.posterior_)["sampler"]["adapt_delta"])
    assert ran == [0.95, 0.99, 0.9]


@pytest.mark.parametrize(
    ("dims", "warmup", "grouped", "expected"),
    [(1, 500, False, 150), (1, 1000, False, 300), (1, 200, False, 60),
     # 30 % of 160 is 48, under Stan's 50: Stan's own window
     (1, 160, False, None), (1, 77, False, None),
     # a class reduction's pair offsets and two or more dimensions: not measured
     (1, 500, True, None), (2, 250, False, None), (9, 500, False, None)],
)  # fmt: skip
def test_the_step_size_window_is_30_percent_of_one_dimensions_warmup(
    dims, warmup, grouped, expected
):
    assert SAMPLER_DEFAULTS.step_size_window_for(dims, warmup, grouped=grouped) == expected


def test_a_step_size_window_that_stan_would_replace_is_refused_by_name():
    """Stan's warm-up needs its initial buffer (75) and a first metric window (25) before
    the last window; a longer one, or no integer, is refused naming the argument."""
    from yieldwise.backends._base import prepare_sampling

    settings, _ = prepare_sampling(4, 500, 100, 1, 10, 0.99, None, 400)
    assert settings["step_size_window"] == 400
    assert "step_size_window" not in prepare_sampling(4, 500, 100, 1, 10, 0.99, None)[0]
    for bad in (401, 0, 2.5):
        with pytest.raises(
            ValueError,
            match=r"step_size_window must be an integer in .* = \[1, 400\] at warmup 500",
        ):
            prepare_sampling(4, 500, 100, 1, 10, 0.99, None, bad)


def test_pystan_runs_the_step_size_window_as_its_term_buffer(monkeypatch):
    """The window reaches PyStan's sampler as ``term_buffer`` (CmdStanPy's
    ``adapt_step_size``), and is left out when None."""
    pytest.importorskip("stan")
    import yieldwise.backends._pystan as pystan_backend

    seen = []

    class Stop(Exception):
        pass

    class Posterior:
        def sample(self, **kwargs):
            seen.append(kwargs)
            raise Stop

    monkeypatch.setattr("stan.build", lambda *args, **kwargs: Posterior())
    monkeypatch.setattr(pystan_backend, "_build_if_missing", lambda *args: None)
    program = pystan_backend.PyStanProgram.__new__(pystan_backend.PyStanProgram)
    program.code, program.model_name = "", "m"
    program.stan_file = Path("transducer.stan")
    program._backend = type("B", (), {"_fits_directory": staticmethod(lambda name: None)})()
    for window in (150, None):
        with pytest.raises((Stop, Exception)):
            program.sample({}, chains=1, warmup=500, draws=10, seed=1, step_size_window=window)
    assert seen[0]["term_buffer"] == 150 and seen[0]["num_warmup"] == 500
    assert "term_buffer" not in seen[1]
