"""Helpers shared by the benchmarks: memory readings and docs/benchmarks.md sections."""

from __future__ import annotations

import re
import resource
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (``ru_maxrss`` is KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 1024**2:,.0f} MiB"


def write_section(section: str, text: str, path: Path = DOCS) -> None:
    """Replace (or append) the section headed ``section`` in ``docs/benchmarks.md``."""
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(section)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(current):
        updated = pattern.sub(lambda _: text + "\n", current, count=1)
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(updated.rstrip("\n") + "\n")
