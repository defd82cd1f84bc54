"""``yieldwise.fit_many``: seeds, task tables, executors, determinism and faults.

The fault tests use a real ``dask.distributed`` scheduler with two worker processes on
localhost (no mocks): a worker killed while it fits, a task failing for a data reason,
and a client interrupted by SIGINT. Fits are tiny (2 chains x 150 + 150, 155 items).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import yieldwise as yw
from yieldwise.datasets import load_digits_binary
from yieldwise.parallel import (
    DASK_EXTRA,
    TaskDataError,
    _tasks_from_frame,
    check_transducer_params,
    fit_many,
    pool_size,
    task_seed,
)

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"chains": 2, "warmup": 150, "draws": 150}
SEED = 11


def calibration() -> pd.DataFrame:
    return load_digits_binary().iloc[::7].reset_index(drop=True)  # 155 items, 15 eights


def tasks() -> dict[str, tuple[pd.DataFrame, pd.Series]]:
    frame = calibration()
    return {
        "forest": (frame[["forest_votes"]], frame["label"]),
        "net": (frame[["net_logit_eight"]], frame["label"]),
    }


def same_draws(a: yw.Transducer, b: yw.Transducer) -> bool:
    """Every posterior variable equal, value for value (not within a tolerance)."""
    pa, pb = a.posterior_.posterior, b.posterior_.posterior
    return set(pa.data_vars) == set(pb.data_vars) and all(
        np.array_equal(pa[v].values, pb[v].values) for v in pa.data_vars
    )


# ------------------------------------------------------------------------ seeds
def test_task_seeds_are_fixed_numbers_in_every_process():
    """SHA-256 of the JSON [seed, name]: values fixed here, the same under another hash salt."""
    import hashlib
    import json

    # The definition, worked by hand for one name: first 8 bytes, big-endian, mod 2**31-1.
    digest = hashlib.sha256(json.dumps([1, "forest"], separators=(",", ":")).encode()).digest()
    assert task_seed(1, "forest") == int.from_bytes(digest[:8], "big") % (2**31 - 1)
    expected = {(1, "forest"): 153882097, (1, ("forest",)): 180258538}
    for (seed, name), value in expected.items():
        assert task_seed(seed, name) == value
    code = "from yieldwise.parallel import task_seed; print(task_seed(1, 'forest'))"
    for salt in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": salt, "PYTHONPATH": str(ROOT)}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=120, check=True)  # fmt: skip
        assert int(run.stdout) == 153882097
    seeds = {task_seed(0, f"checkpoint {i}") for i in range(1000)}
    assert len(seeds) == 1000 and all(0 <= s < 2**31 - 1 for s in seeds)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: task_seed(-1, "a"), ValueError, "seed must be a non-negative integer"),
        (lambda: task_seed(1, 1.5), TypeError, "task names must be str, int or tuples"),
        (lambda: fit_many({}), ValueError, "tasks is empty"),
        (lambda: fit_many([1, 2]), TypeError, "tasks must be a mapping"),
        (lambda: fit_many({"a": (1, 2, 3)}), TypeError, r"tasks\['a'\] must be a pair"),
        (lambda: fit_many(tasks(), transducer={"chain": 2}), ValueError,
         r"transducer: unknown parameter 'chain'"),
        (lambda: fit_many(tasks(), transducer={"chains": 0}), ValueError,
         r"transducer: chains must be an integer >= 1, got 0"),
        (lambda: fit_many(tasks(), params={"forest": {"n_components": "many"}}), ValueError,
         r"params\['forest'\]: n_components must be"),
        (lambda: fit_many(tasks(), params={"tree": {}}), ValueError,
         r"params names task\(s\) \['tree'\]"),
        (lambda: fit_many(tasks(), executor="threads"), ValueError,
         r'executor must be None, "serial", "processes"'),
        (lambda: fit_many(tasks(), executor=4), TypeError, "executor must be None"),
        (lambda: fit_many(tasks(), outputs="x"), TypeError, "tasks is a mapping"),
        (lambda: fit_many(calibration(), outputs=["forest_votes"], classes="label"),
         ValueError, "needs by="),
        (lambda: fit_many(calibration(), outputs={"f": "votes"}, classes="label"),
         ValueError, r"no column\(s\) \['votes'\]"),
        # rows with no task name were dropped without a word (pandas' groupby)
        (lambda: fit_many(calibration().assign(site=lambda f: np.where(f.index % 3 == 0, None,
                                                                        "A")),
                          outputs="forest_votes", classes="label", by="site"),
         ValueError, r"by column 'site' has 52 missing value\(s\) \(first in row 0"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_before_any_fit(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_settings_are_checked_by_the_transducers_rules():
    assert check_transducer_params({"chains": 2, "n_components": 3}) == {
        "chains": 2, "n_components": 3}  # fmt: skip
    with pytest.raises(ValueError, match="n_components must be"):
        check_transducer_params({"n_components": [3, 2]})
    with pytest.raises(ValueError, match="adapt_delta must lie in"):
        check_transducer_params({"adapt_delta": 1.5})
    # the default, None (each fit takes its output dimensions' value), passes, as do numbers
    assert check_transducer_params({"adapt_delta": None}) == {"adapt_delta": None}
    assert check_transducer_params({"adapt_delta": 0.9}) == {"adapt_delta": 0.9}
    with pytest.raises(ValueError, match="backend must be one of"):
        check_transducer_params({"backend": "jags"})


def test_a_dask_scheduler_without_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    with pytest.raises(ImportError, match=r"not installed: pip install 'yieldwise\[dask\]'"):
        fit_many(tasks(), executor="tcp://127.0.0.1:8786")
    assert "yieldwise[dask]" in DASK_EXTRA


def test_a_tidy_table_splits_into_tasks():
    frame = calibration()
    frame["site"] = np.where(np.arange(len(frame)) % 2 == 0, "north", "south")
    wide = _tasks_from_frame(frame, {"forest": "forest_votes", "net": ["net_logit_eight"]},
                             "label", "site")  # fmt: skip
    assert list(wide) == [("north", "forest"), ("north", "net"), ("south", "forest"),
                          ("south", "net")]  # fmt: skip
    outputs, classes = wide[("south", "net")]
    assert list(outputs.columns) == ["net_logit_eight"] and len(outputs) == len(frame) // 2
    np.testing.assert_array_equal(classes, frame.loc[frame["site"] == "south", "label"])
    # long: one row per (item, classifier), the classifier in a column
    long = pd.concat([
        pd.DataFrame({"classifier": name, "score": frame[column], "label": frame["label"]})
        for name, column in (("forest", "forest_votes"), ("net", "net_logit_eight"))
    ])  # fmt: skip
    split = _tasks_from_frame(long, "score", "label", "classifier")
    assert list(split) == ["forest", "net"]
    np.testing.assert_array_equal(split["net"][0]["score"], frame["net_logit_eight"])


def test_pool_size_leaves_no_core_idle_and_none_oversubscribed():
    assert pool_size(chains=2, n_tasks=16, cores=2) == 1
    assert pool_size(chains=4, n_tasks=16, cores=2) == 1
    assert pool_size(chains=4, n_tasks=16, cores=32) == 8
    assert pool_size(chains=2, n_tasks=3, cores=32) == 3


# --------------------------------------------------------------- real fits
@pytest.fixture(scope="module")
def serial():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_many(tasks(), transducer=SETTINGS, seed=SEED, progress=False)


@pytest.fixture(scope="module")
def cluster(dask_cluster):
    return dask_cluster


def test_serial_fits_carry_their_task_seeds(serial):
    assert list(serial) == ["forest", "net"]
    for name, transducer in serial.items():
        assert transducer.seed_ == task_seed(SEED, name)
    assert list(serial.tasks["seed"]) == [task_seed(SEED, "forest"), task_seed(SEED, "net")]
    assert serial.tasks.attrs == {"seed": SEED, "executor": "serial"}


def test_processes_equal_serial_draw_for_draw(serial):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pooled = fit_many(tasks(), transducer=SETTINGS, seed=SEED, executor="processes",
                          progress=False)  # fmt: skip
    assert pooled.tasks.attrs["executor"] == "processes"
    assert (pooled.tasks["pid"] != os.getpid()).all() and (pooled.tasks["bytes"] > 0).all()
    for name in serial:
        assert same_draws(serial[name], pooled[name]), name


def test_cluster_equals_serial_and_compare_takes_it_unchanged(serial, cluster):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        remote = fit_many(tasks(), transducer=SETTINGS, seed=SEED, executor=cluster,
                          progress=False)  # fmt: skip
    assert remote.tasks.attrs["executor"] == "dask"
    assert set(remote.tasks["pid"]) <= set(cluster.run(os.getpid).values())
    for name in serial:
        assert same_draws(serial[name], remote[name]), name
    # warnings raised in the workers arrive here, named by task
    assert all(str(w.message).startswith(("forest: ", "net: ")) for w in caught)
    utility = yw.UtilityMatrix([[0, -10], [-1, 5]], decisions=["dismiss", "treat"],
                               classes=["other", "eight"])  # fmt: skip
    here, there = yw.compare(serial, utility), yw.compare(remote, utility)
    pd.testing.assert_frame_equal(here.summary(), there.summary())


def test_a_data_failure_on_the_cluster_names_its_task(cluster):
    frame = calibration()
    broken = frame["net_logit_eight"].copy()
    broken[:] = np.nan
    batch = {
        ("site A", "forest"): (frame[["forest_votes"]], frame["label"]),
        ("site A", "net"): (broken.to_frame(), frame["label"]),
    }
    started = time.perf_counter()
    with pytest.raises(TaskDataError) as info:
        fit_many(batch, transducer=SETTINGS, seed=SEED, executor=cluster, progress=False)
    message = str(info.value)
    assert message.startswith("task 'site A / net': ") and "must be finite" in message
    assert info.value.task == ("site A", "net") and isinstance(info.value, ValueError)
    assert time.perf_counter() - started < 120
    # the other task was cancelled: nothing of this batch is left on the scheduler
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _our_keys(cluster):
        time.sleep(0.5)
    assert not _our_keys(cluster)


def _our_keys(client) -> list[str]:
    return [k for k in client.who_has() if str(k).startswith("yieldwise-fit-")] + [
        k for keys in client.processing().values() for k in keys
        if str(k).startswith("yieldwise-fit-")
    ]  # fmt: skip


def _sampling(pid: int, within: float = 120.0) -> list:
    """The chain processes under worker ``pid`` once it has started sampling."""
    import psutil

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children(recursive=True)
        if children:
            time.sleep(0.5)  # well inside sampling
            return psutil.Process(pid).children(recursive=True)
        time.sleep(0.1)
    return []


def _alive(process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _all_gone(processes: list, within: float = 15.0) -> bool:
    """Every process ended (or a zombie awaiting its parent) within ``within`` seconds."""

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not [p for p in processes if _alive(p)]:
            return True
        time.sleep(0.2)
    return False


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_a_worker_killed_while_it_fits_is_replaced_and_the_result_is_unchanged(cluster):
    """SIGKILL to the worker process running a fit: Dask runs the task again elsewhere."""

    # fits long enough that the worker is killed mid-sampling (preconditioned fits of
    # SETTINGS' length can end before the chain processes are seen), compared with the
    # same fits run serially
    long = {"chains": 2, "warmup": 3000, "draws": 3000}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = fit_many(tasks(), transducer=long, seed=SEED, progress=False)
    box: dict[str, object] = {}

    def run() -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                box["result"] = fit_many(tasks(), transducer=long, seed=SEED,
                                         executor=cluster, progress=False)  # fmt: skip
        except BaseException as exc:  # reported below
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline:
        for address, keys in cluster.processing().items():
            if any(str(k).startswith("yieldwise-fit-forest") for k in keys):
                victim = address
        time.sleep(0.2)
    assert victim is not None, "the forest task never started"
    pid = cluster.run(os.getpid, workers=[victim])[victim]
    chains = _sampling(pid)  # the worker's chain processes, once it samples
    os.kill(pid, signal.SIGKILL)
    thread.join(300)
    assert chains and _all_gone(chains)  # they died with their worker: no orphans
    assert not thread.is_alive() and "error" not in box, box.get("error")
    result = box["result"]
    forest = result.tasks.set_index("task").loc["forest"]
    assert forest["pid"] != pid  # run again by another worker process
    for name in expected:
        assert same_draws(expected[name], result[name]), name
    cluster.wait_for_workers(2, timeout=120)  # the nanny restarted the killed worker


SIGINT_CLIENT = """
import sys, warnings
warnings.simplefilter("ignore")
import yieldwise as yw
from yieldwise.datasets import load_digits_binary

if __name__ == "__main__":  # "processes" starts fresh interpreters that import this file
    frame = load_digits_binary().iloc[::7].reset_index(drop=True)
    tasks = {f"copy {i}": (frame[["forest_votes"]], frame["label"]) for i in range(6)}
    print("submitting", flush=True)
    # long fits (each tens of seconds), so that the signal always arrives mid-run
    yw.fit_many(tasks, transducer={"chains": 2, "warmup": 3000, "draws": 3000}, seed=1,
                executor=sys.argv[1], progress=True)
    print("finished", flush=True)
"""


def _as_from_a_terminal() -> None:  # as in tests/test_interrupts.py: SIGINT not ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_mid_run(script: Path, executor: str, tmp_path: Path):
    """Start the client, SIGINT it (the process only) once fits run; return what is left."""
    import psutil

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    client = subprocess.Popen([sys.executable, str(script), executor], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                              preexec_fn=_as_from_a_terminal)  # fmt: skip
    try:
        assert client.stdout.readline().strip() == "submitting"
        time.sleep(6)  # the pool or the cluster is fitting
        ours = _descendants(client.pid)
        client.send_signal(signal.SIGINT)
        started = time.perf_counter()
        _, err = client.communicate(timeout=60)
        stopped_in = time.perf_counter() - started
    finally:
        if client.poll() is None:
            client.kill()
    time.sleep(1)
    alive = [p for p in ours if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    return client.returncode, err, stopped_in, ours, alive


def test_sigint_to_a_process_pool_client_leaves_no_process_behind(tmp_path):
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(SIGINT_CLIENT))
    status, err, stopped_in, ours, alive = _interrupt_mid_run(script, "processes", tmp_path)
    assert status != 0 and "KeyboardInterrupt" in err, err
    assert stopped_in < 20
    assert ours  # there was a pool, with PyStan's chain processes under it
    assert alive == [], alive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["client.py"]  # nothing written


def test_sigint_to_a_dask_client_cancels_its_tasks(tmp_path, cluster):
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(SIGINT_CLIENT))
    address = cluster.scheduler.address
    status, err, stopped_in, _, alive = _interrupt_mid_run(script, address, tmp_path)
    assert status != 0 and "KeyboardInterrupt" in err, err
    assert stopped_in < 20 and alive == [], alive
    deadline = time.monotonic() + 60  # the scheduler forgets the cancelled batch
    while time.monotonic() < deadline and _our_keys(cluster):
        time.sleep(0.5)
    assert not _our_keys(cluster)
    assert len(cluster.scheduler_info()["workers"]) == 2  # the cluster is still whole


def test_the_first_compile_message_appears_once_per_worker_process(tmp_path, monkeypatch, caplog):
    """A Dask worker runs tasks in threads: when several of its tasks ask for a program
    that is not compiled yet, one builds it and says so, the others wait and find it."""
    import logging
    import threading

    import httpstan.cache

    from yieldwise.backends import _pystan

    built: list[str] = []
    compiled: set[str] = set()

    def slow_build(code, model_name, path):  # stands in for the 90 s build
        time.sleep(0.5)
        built.append(model_name)
        compiled.add(model_name)

    monkeypatch.setattr(httpstan.cache, "list_model_names", lambda: sorted(compiled))
    monkeypatch.setattr(_pystan, "_build_if_missing", slow_build)
    program = tmp_path / "tiny.stan"
    program.write_text("parameters { real x; }\nmodel { x ~ normal(0, 1); }\n")
    backend = _pystan.PyStanBackend()  # a fresh worker process's backend
    results = []
    with caplog.at_level(logging.WARNING):
        threads = [threading.Thread(target=lambda: results.append(backend.compile(program)))
                   for _ in range(4)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    notes = [r for r in caplog.records if "compiling the Stan program tiny.stan" in r.getMessage()]
    assert len(results) == 4 and all(r is results[0] for r in results)
    assert len(built) == 1 and len(notes) == 1
