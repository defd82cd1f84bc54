"""The test suite's time against its budget (30 minutes of `make test` on a fresh clone,
2 cores), read from pytest's own report.

    python bench/suite_time.py LOG [--budget 1800] [--top 15] [--compare OTHER_LOG]

LOG is the output of a run with every duration listed (``pytest --durations=0``; `make
test` lists the slowest 40 only, so its log gives the wall time but only a part of the
per-file sums). Prints the wall time pytest reported against the budget, the seconds per
test file (calls, setups and teardowns summed) and, with ``--compare``, each file's change
between two runs: where the suite's time goes and what a change saved.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

#: `make test`'s budget on a fresh clone (the developers' brief), in seconds.
BUDGET = 1800.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (call|setup|teardown)\s+(.+)$")  # ids may hold spaces
# "=== 5 passed, 2 skipped in 1900.50s (0:31:40) ===", without the rules under -q
_SUMMARY = re.compile(
    r"^(?:=+ )?(\d+ (?:passed|failed|errors?).*?) in (\d+(?:\.\d+)?)s(?: \([0-9:]+\))?(?: =+)?$"
)


def read_log(text: str) -> tuple[float | None, dict[str, float], str | None]:
    """(pytest's wall time in seconds or None, seconds per test file, the summary's counts
    such as "2392 passed, 46 skipped" or None) from a pytest log."""
    wall, counts = None, None
    per_file: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        line = line.strip()
        found = _DURATION.match(line)
        if found:
            per_file[found.group(3).split("::")[0]] += float(found.group(1))
            continue
        summary = _SUMMARY.match(line)
        if summary:
            counts, wall = summary.group(1), float(summary.group(2))
    return wall, dict(per_file), counts


def report(text: str, budget: float = BUDGET, top: int = 15, other: str | None = None) -> str:
    """The lines :func:`main` prints for a log's text (and another run's, to compare)."""
    wall, per_file, counts = read_log(text)
    if wall is None:
        raise ValueError("LOG: no pytest summary line ('=== N passed ... in S s ===') found")
    verdict = "within" if wall <= budget else "OVER"
    lines = [
        f"pytest wall time {wall:,.0f} s ({wall / 60:.1f} min): {verdict} the budget of "
        f"{budget:,.0f} s; {counts}",
        f"durations listed: {sum(per_file.values()):,.0f} s over {len(per_file)} files",
    ]
    before = read_log(other)[1] if other is not None else {}
    ranked = sorted(per_file.items(), key=lambda item: -item[1])[:top]
    for name, seconds in ranked:
        change = ""
        if other is not None:
            change = f"  (was {before.get(name, 0.0):7.1f} s)"
        lines.append(f"{seconds:8.1f} s  {name}{change}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds (default 1800)")
    parser.add_argument("--top", type=int, default=15, help="files listed (default 15)")
    parser.add_argument("--compare", type=Path, default=None, help="another run's log")
    args = parser.parse_args(argv)
    other = args.compare.read_text() if args.compare is not None else None
    try:
        print(report(args.log.read_text(), args.budget, args.top, other))
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
