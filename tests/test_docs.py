"""The shipped copy of the specification must not drift from the project's contract."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "docs" / "theory.md"


@pytest.mark.skipif(not SHARED.exists(), reason=f"{SHARED} not present (fresh clone)")
def test_theory_copy_matches_the_contract():
    assert (ROOT / "docs" / "theory.md").read_text() == SHARED.read_text()


def test_readme_gives_the_two_commands_ci_uses():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
