"""One set of sampler defaults: every entry point agrees with SAMPLER_DEFAULTS (no Stan)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from yieldwise import Transducer
from yieldwise.cli import build_parser
from yieldwise.transducer import SAMPLER_DEFAULTS

PACKAGE = Path(__file__).resolve().parents[1] / "yieldwise"


def test_the_transducer_takes_its_defaults_from_sampler_defaults():
    signature = inspect.signature(Transducer)
    for name, value in SAMPLER_DEFAULTS.as_dict().items():
        assert signature.parameters[name].default == value, name
    assert Transducer().get_params()["adapt_delta"] == SAMPLER_DEFAULTS.adapt_delta


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
        found = re.search(rf"\b{name} = (\d+)", signature)
        assert found is not None, name
        assert int(found.group(1)) == getattr(SAMPLER_DEFAULTS, name), name


def test_the_report_documents_the_sampler_defaults():
    """The [sampler] table of the report's documented configuration shows the defaults."""
    from yieldwise import report

    doc = report.__doc__ or ""
    table = doc[doc.index("[sampler]") :]
    for name in ("chains", "warmup", "draws"):
        found = re.search(rf"^\s*{name} = (\d+)", table, re.MULTILINE)
        assert found is not None, name
        assert int(found.group(1)) == getattr(SAMPLER_DEFAULTS, name), name
