"""The shipped copy of the specification must not drift from the project's contract."""

import re
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


# docs/model.md describes the shipped model; the measurements behind it are in
# docs/model_record.md. Code and pages cite either by a section's or named paragraph's
# name ("docs/model.md, \"Hard labels\""), so a renamed or moved section must not leave a
# citation that leads nowhere.
MODEL_DOCS = ("model.md", "model_record.md")
CITING_SUFFIXES = {".py", ".md", ".stan", ".R", ".Rmd", ".ipynb", ".toml", ".txt"}


def _normalised(name: str) -> str:
    return re.sub(r"\s+", " ", name.replace("`", "")).strip().lower()


def _section_names(text: str) -> set[str]:
    """Headings, and the names of paragraphs that open with an italic or bold name
    (``*Pair offsets (adopted ...).*``, ``* *Kernel width* (...)``), possibly over lines."""
    names = {m.group(1) for m in re.finditer(r"(?m)^#{1,4} (.*)$", text)}
    names |= {m.group(1) for m in re.finditer(r"(?m)^(?:\* )?\*\*?([A-Z][^*]{2,300}?)\*", text)}
    return {_normalised(name) for name in names}


def _citations(text: str) -> list[str]:
    """The names cited as ``model.md, "Name"`` or ``model.md ("Name")``, with comment
    markers at the start of continued lines taken out, so a citation may wrap."""
    flat = re.sub(r"\n[ \t]*(?:#:?|\*|//|--)?[ \t]*", " ", text).replace('\\"', '"')
    return re.findall(r'model\.md(?:,\s*|\s*\(\s*|\s+)"([^"]{3,160})"', flat)


def _cited_files():
    """The project's text files, but for generated results and this file's own examples."""
    for path in sorted(ROOT.rglob("*")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in {".git", ".venv", "node_modules", "build", "dist"} or "results" in parts:
            continue
        if path.is_file() and path.suffix in CITING_SUFFIXES and path != Path(__file__):
            yield path


def test_every_citation_of_the_model_pages_names_a_section_they_hold():
    names = set().union(*(_section_names((ROOT / "docs" / f).read_text()) for f in MODEL_DOCS))
    cited, broken = 0, []
    for path in _cited_files():
        for name in _citations(path.read_text(errors="replace")):
            cited += 1
            wanted = _normalised(name)
            if not any(have.startswith(wanted) for have in names):
                broken.append(f"{path.relative_to(ROOT)}: {name!r}")
    assert cited > 100, f"only {cited} citations found: the scan itself is broken"
    assert not broken, "citations of docs/model.md that name no section:\n" + "\n".join(broken)


def test_the_model_page_indexes_every_section_of_the_record():
    """Each heading of the record appears in model.md's index as a link to its anchor."""
    record = (ROOT / "docs" / "model_record.md").read_text()
    page = (ROOT / "docs" / "model.md").read_text()
    headings = re.findall(r"(?m)^#{2,3} (.*)$", record)
    assert len(headings) > 20
    for heading in headings:
        assert f"[{heading}](model_record.md#{_anchor(heading)})" in page, heading


def test_the_citation_scan_sees_wrapped_comments():
    """The scanner itself, on a made-up comment that wraps inside the name."""
    text = '#: the floor (docs/model.md, "Pair\n#: offsets"), and docs/model.md ("Kernel width")'
    assert _citations(text) == ["Pair offsets", "Kernel width"]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    """The anchors of a page's headings (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"(?m)^#{1,6} (.*)$", text):
        anchor = _anchor(heading)
        out.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
        seen[anchor] = seen.get(anchor, 0) + 1
    return out


def test_every_link_into_the_model_pages_lands_on_a_heading():
    anchors = {f: _anchors((ROOT / "docs" / f).read_text()) for f in MODEL_DOCS}
    linked, broken = 0, []
    for path in _cited_files():
        text = path.read_text(errors="replace")
        for page, anchor in re.findall(r"(model(?:_record)?\.md)#([\w\-]+)", text):
            linked += 1
            if anchor not in anchors[page]:
                broken.append(f"{path.relative_to(ROOT)}: {page}#{anchor}")
    assert linked > 30, f"only {linked} links found: the scan itself is broken"
    assert not broken, "links into the model pages that land nowhere:\n" + "\n".join(broken)
