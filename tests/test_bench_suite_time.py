"""bench/suite_time.py on a pytest log written out here: the per-file sums and the verdict
against the budget, computed by hand."""

from __future__ import annotations

import pytest

LOG = """\
........ [100%]
============================= slowest durations ==============================
61.50s call     tests/test_a.py::test_one[x-1]
20.25s setup    tests/test_b.py::test_two
10.00s call     tests/test_a.py::test_three
0.75s teardown tests/test_b.py::test_two[a b]
3.00s call     yieldwise/long_run.py::yieldwise.long_run.long_run_utility
========== 5 passed, 2 skipped, 1 warning in 1900.50s (0:31:40) ==========
"""

EARLIER = """\
100.00s call     tests/test_a.py::test_one[x-1]
=================== 5 passed in 1200.00s (0:20:00) ===================
"""


def test_the_files_sums_and_the_verdict(bench_import):
    bench = bench_import("suite_time")
    wall, per_file, counts = bench.read_log(LOG)
    assert wall == 1900.5 and counts == "5 passed, 2 skipped, 1 warning"
    # 61.5 + 10; 20.25 + 0.75; the doctest counted under its module
    assert per_file == {"tests/test_a.py": 71.5, "tests/test_b.py": 21.0,
                        "yieldwise/long_run.py": 3.0}  # fmt: skip
    lines = bench.report(LOG, top=2, other=EARLIER).splitlines()
    assert lines[0] == (
        "pytest wall time 1,900 s (31.7 min): OVER the budget of 1,800 s; "
        "5 passed, 2 skipped, 1 warning"
    )
    assert lines[1] == "durations listed: 96 s over 3 files"
    assert lines[2:] == ["    71.5 s  tests/test_a.py  (was   100.0 s)",
                         "    21.0 s  tests/test_b.py  (was     0.0 s)"]  # fmt: skip
    assert "within the budget of 2,000 s" in bench.report(LOG, budget=2000)
    quiet = LOG.replace("========== 5 passed", "5 passed").replace(") ==========", ")")
    assert bench.read_log(quiet)[:1] == (1900.5,)  # pytest -q prints the line bare


def test_a_log_without_pytests_summary_is_refused_by_name(bench_import, tmp_path, capsys):
    bench = bench_import("suite_time")
    with pytest.raises(ValueError, match="LOG: no pytest summary line"):
        bench.report("61.50s call     tests/test_a.py::test_one\n")
    log = tmp_path / "cut.log"
    log.write_text("collected 3 items\n")
    with pytest.raises(SystemExit):
        bench.main([str(log)])
    assert "LOG: no pytest summary line" in capsys.readouterr().err
