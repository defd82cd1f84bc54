"""Where files shipped with yieldwise live: the source tree or an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def shipped_file(folder: str, filename: str, what: str) -> Path:
    """Path of ``folder/filename``, a file shipped with yieldwise.

    The files live in the repository's top-level ``folder`` (``stan/``, ``data/``); an
    installed wheel carries them as the package ``yieldwise.<folder>``. Both places are
    searched; ``what`` names the kind of file in the error.
    """
    candidates = [_PACKAGE_DIR / folder / filename, _PACKAGE_DIR.parent / folder / filename]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{what} {filename!r} not found (looked in {', '.join(map(str, candidates))})"
    )
