"""Ctrl-C, SIGTERM and a second writer, with real processes and signals (issue 17, items 1, 6).

Each test starts ``yieldwise`` in a process of its own (its own session, so that the
signal goes to that one process only, as when another program signals it), waits until
Stan's chains are sampling in their worker processes, and signals the main process only.
The process must exit within seconds, with nothing written and no process left behind.
Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import yieldwise
from yieldwise.backends import available_backends

pytestmark = [
    pytest.mark.skipif(
        "pystan" not in available_backends(), reason="PyStan (the sampler signalled) is absent"
    ),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

#: Seconds the interrupted process may take to exit (it takes about one).
EXIT_WITHIN = 20
#: Chain processes httpstan starts for two chains (its pool has one per core).
WORKERS = min(2, os.cpu_count() or 1)
#: Long enough that the fit is still sampling when signalled (never run to the end).
# long enough that the signal always lands mid-sampling (preconditioned fits are quick)
LONG_SAMPLER = ["--chains", "2", "--warmup", "50000", "--draws", "50000", "--seed", "1"]


def _env() -> dict[str, str]:
    """The environment of a child ``python -m yieldwise.cli``: this tree's package first."""
    root = str(Path(yieldwise.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, session id) of a process, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[3])


def _alive_in_session(session: int) -> list[int]:
    """Processes of the session that still run (zombies, already dead, do not count)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[2] == session and stat[0] != "Z":
                found.append(int(entry))
    return found


def _sampling_workers(pid: int) -> list[int]:
    """httpstan's chain processes: children forked from ``pid`` (same command line)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    workers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and stat[1] == pid and stat[0] != "Z":
                with_same_command = Path(f"/proc/{entry}/cmdline")
                try:
                    if with_same_command.read_bytes() == command:
                        workers.append(int(entry))
                except OSError:
                    continue
    return workers


def _as_from_a_terminal() -> None:
    """In the child, before exec: Ctrl-C as at a terminal. A process started in the
    background (as CI may start the test run) inherits SIGINT ignored, and Python keeps
    an ignored SIGINT ignored, so the signal these tests send would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "yieldwise.cli", *argv],
        cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=_as_from_a_terminal,
    )  # fmt: skip


def _wait_until_sampling(process: subprocess.Popen, timeout: float = 240) -> None:
    """Until the chains run in their worker processes (plus one second of sampling)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"exited ({process.returncode}) before sampling:\n{out}\n{err}")
        if len(_sampling_workers(process.pid)) >= WORKERS:
            time.sleep(1.0)  # about a second into sampling, as in the report of the hang
            return
        time.sleep(0.1)
    _kill_session(process)
    pytest.fail(f"no sampling within {timeout} s")


def _kill_session(process: subprocess.Popen) -> None:
    """Clean-up after a failed check: nothing of ours may outlive the test."""
    for pid in _alive_in_session(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(timeout=10)


def _interrupt_and_check(process: subprocess.Popen, signum: int) -> str:
    """Signal the main process only; it must exit promptly, leaving no process behind."""
    os.kill(process.pid, signum)
    started = time.monotonic()
    try:
        _, err = process.communicate(timeout=EXIT_WITHIN)
    except subprocess.TimeoutExpired:
        _kill_session(process)
        pytest.fail(f"the process did not exit within {EXIT_WITHIN} s of the signal (hang)")
    took = time.monotonic() - started
    deadline = time.monotonic() + 10
    while _alive_in_session(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _alive_in_session(process.pid)
    if left:
        _kill_session(process)
    assert not left, f"processes left running after the interrupt: {left}"
    assert process.returncode == 130, err
    assert "interrupted; nothing was written" in err, err
    assert "Traceback" not in err, err
    print(f"\n[yieldwise] exited {took:.1f} s after signal {signum}")
    return err


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    folder = tmp_path_factory.mktemp("interrupts")
    rng = np.random.default_rng(6)
    label = np.where(rng.random(200) < 0.4, "yes", "no")
    score = rng.normal(np.where(label == "yes", 1.0, -1.0), 1.0)
    pd.DataFrame({"label": label, "score": score}).to_csv(folder / "calib.csv", index=False)
    return folder / "calib.csv"


@pytest.fixture(scope="module")
def compiled(calibration):
    """The transducer program compiled beforehand, so the child processes only sample."""
    from yieldwise import Transducer

    frame = pd.read_csv(calibration)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Transducer(n_components=5, chains=2, warmup=20, draws=20, seed=1, progress=False,
                   backend="pystan").fit(frame["score"], frame["label"])  # fmt: skip


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_stops_a_fit_within_seconds(calibration, compiled, tmp_path, signum):
    out = tmp_path / "t.nc"
    argv = ["fit", str(calibration), "--class-col", "label", "--output-cols", "score",
            "--out", str(out), "--backend", "pystan", "--quiet", *LONG_SAMPLER]  # fmt: skip
    process = _start(argv, tmp_path)
    _wait_until_sampling(process)
    _interrupt_and_check(process, signum)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a partial or lock file was left"


REPORT = """
[data]
calibration = "{csv}"
class_col = "label"

[[classifier]]
name = "score"
outputs = ["score"]

[[utility]]
name = "u"
decisions = ["no", "yes"]
classes = ["no", "yes"]
values = [[1, 0], [0, 1]]

[sampler]
backend = "pystan"
n_components = 5
"""


def test_second_report_on_one_folder_fails_naming_the_first_and_ctrl_c_leaves_nothing(
    calibration, compiled, tmp_path
):
    config = tmp_path / "config.toml"
    config.write_text(REPORT.format(csv=calibration.as_posix()))
    out = tmp_path / "out"
    theirs = tmp_path / ".out.partial"  # a user's folder with the name of old work folders
    theirs.mkdir()
    (theirs / "notes.txt").write_text("precious")
    argv = ["report", str(config), "--out", str(out), "--quiet", *LONG_SAMPLER[:6]]
    first = _start(argv, tmp_path)
    _wait_until_sampling(first)
    second = subprocess.run(
        [sys.executable, "-m", "yieldwise.cli", *argv], cwd=tmp_path, env=_env(),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    try:
        assert second.returncode == 2, second.stderr
        assert f"another yieldwise run is writing it (pid {first.pid} on " in second.stderr
        assert "wait for it to finish or choose another output" in second.stderr
        assert first.poll() is None  # the first run went on undisturbed
        # the first run's work folder and lock are there while it runs
        names = sorted(p.name for p in tmp_path.iterdir())
        assert ".out.lock" in names and any(n.startswith(".out.partial-") for n in names)
    finally:
        _interrupt_and_check(first, signal.SIGINT)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.partial", "config.toml"]
    assert (theirs / "notes.txt").read_text() == "precious"


def test_interrupted_fit_in_this_process_stops_its_workers_and_the_next_fit_runs(
    calibration, compiled
):
    """Ctrl-C inside Python (a notebook): KeyboardInterrupt, no chain left running, and
    httpstan's pool replaced so that the next fit in the same process works."""
    import threading

    from yieldwise import Transducer
    from yieldwise.backends._pystan import _stop_sampling_workers

    frame = pd.read_csv(calibration)
    me = os.getpid()
    _stop_sampling_workers()  # idle chain processes of earlier fits: a pool started afresh

    def interrupt_when_sampling() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if len(_sampling_workers(me)) >= WORKERS:
                time.sleep(1.0)
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=interrupt_when_sampling, daemon=True)
    watcher.start()
    started = time.monotonic()
    # Ctrl-C as in a notebook, even when this test run was started with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Transducer(n_components=5, chains=2, warmup=50000, draws=50000, seed=2,
                       progress=False, backend="pystan").fit(
                frame["score"], frame["label"])  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, previous)
    watcher.join(timeout=5)
    assert time.monotonic() - started < 240
    deadline = time.monotonic() + 10
    while _sampling_workers(me) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sampling_workers(me) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quick = Transducer(
            n_components=5, chains=2, warmup=100, draws=100, seed=2, progress=False,
            backend="pystan",
        )  # fmt: skip
        again = quick.fit(frame["score"], frame["label"])
    assert again.predict_proba([2.0])[0, 1] > 0.5
