"""The package's modules meet through public names only (the brief's "no module reads
another's private names"): a helper one module lends another is named without a leading
underscore, so that the lender sees who depends on it. Private *modules* (``_design``,
``_mixture``, ...) are internal by their own name and may be imported whole."""

import ast
from pathlib import Path

import yieldwise

PACKAGE = Path(yieldwise.__file__).parent


def _is_module(base: Path, name: str) -> bool:
    return (base / f"{name}.py").exists() or (base / name / "__init__.py").exists()


def private_names_imported(path: Path, source: str | None = None) -> list[str]:
    """``file:line imports NAME from MODULE`` for every private name that ``path`` (a
    module of the package; ``source``, its text if not read from disk) imports from
    another of the package's modules."""
    source = path.read_text() if source is None else source
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level > 0:  # relative: resolve the package it names
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
        elif (node.module or "").split(".")[0] == "yieldwise":
            base = PACKAGE.parent
        else:
            continue
        base = base.joinpath(*(node.module or "").split(".")) if node.module else base
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and not _is_module(base, alias.name):
                where = path.relative_to(PACKAGE.parent)
                found.append(f"{where}:{node.lineno} imports {alias.name} from {node.module}")
    return found


def test_no_module_imports_another_modules_private_names():
    offenders = [
        hit for path in sorted(PACKAGE.rglob("*.py")) for hit in private_names_imported(path)
    ]
    assert offenders == []


def test_the_check_finds_a_private_name_and_lets_a_private_module_pass():
    # the check can fail: a private function imported from a sibling module (relatively or
    # absolutely) is found; private modules imported whole are not
    probe = PACKAGE / "transducer" / "probe.py"  # not written: its text is given
    text = (
        "from .estimator import _psis_loo\n"
        "from .. import _mixture\n"
        "from ..backends import _laplace\n"
        "from yieldwise.transducer.estimator import _draw_quantiles\n"
        "from yieldwise import _design\n"
    )
    assert private_names_imported(probe, text) == [
        "yieldwise/transducer/probe.py:1 imports _psis_loo from estimator",
        "yieldwise/transducer/probe.py:4 imports _draw_quantiles from "
        "yieldwise.transducer.estimator",
    ]
