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
#: For the settings refused before any fit: a fit that did start would be a short one.
LAPLACE = {"backend": "laplace"}
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
        # audit 2026-12-06: each names the setting or the column it is about
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "chains": None}), TypeError,
         r"transducer: chains must be an integer such as 4, found None of type NoneType"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "max_treedepth": [11]}), TypeError,
         r"transducer: max_treedepth must be an integer such as 10, found \[11\]"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "max_treedepth": "ten"}), ValueError,
         r"transducer: max_treedepth must be a positive integer, got 'ten'"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "likelihood_bins": -3}), ValueError,
         r"transducer: likelihood_bins must be \"auto\", None or a fraction"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "class_reduction": "bogus"}), ValueError,
         r"transducer: class_reduction must be \"auto\", \"ranks\" or None, found 'bogus'"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "kernel_tail_cut": -1.0}), ValueError,
         r"transducer: kernel_tail_cut must be a number in \[0, 1e-6\]"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "prior": "flat"}), TypeError,
         r"transducer: prior must be a mapping of hyper-parameter names"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "prior": {"tau_f_scale": -1}}),
         ValueError, r"transducer: prior\['tau_f_scale'\] must be a positive number, found -1"),
        (lambda: fit_many(tasks(), transducer={**LAPLACE, "seed": 1.0}), ValueError,
         r"transducer: seed must be an integer in \[0, 2\*\*31\) or None, found 1\.0"),
        (lambda: fit_many(calibration().assign(site=lambda f: np.where(f.index % 2, 1.0, 2.0)),
                          outputs="forest_votes", classes="label", by="site"),
         TypeError, r"by column 'site' holds 2\.0 of type float; its values name the tasks, "
                    r"which must be text or integers: convert the column first"),
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


def test_every_transducer_setting_is_checked_by_the_fits_own_rules():
    """check_transducer_param knows every constructor setting of the Transducer (a new one
    must be given its check, or None for those only the data can check), accepts each
    default and the other values the fit accepts, and refuses what the fit refuses."""
    from yieldwise.parallel import check_transducer_param, transducer_param_names

    defaults = yw.Transducer().get_params()
    assert set(transducer_param_names()) == set(defaults)
    for name, value in defaults.items():
        check_transducer_param(name, value)
    for name, value in [
        ("class_reduction", "ranks"),
        ("class_reduction", None),
        ("likelihood_bins", None),
        ("likelihood_bins", 0.25),
        ("prior", {"tau_f_df": None, "tau_l_scale": 0}),
        ("kernel_tail_cut", 0),
        ("warmup", None),
        ("seed", 2**31 - 1),
    ]:
        check_transducer_param(name, value)  # fmt: skip
    for name, value in [
        ("chains", 2.0),
        ("seed", 2**31),
        ("n_components", 0),
        ("adapt_delta", 1.0),
        ("backend", "jags"),
    ]:
        with pytest.raises(ValueError, match=rf"^{name} must (be|lie)"):
            check_transducer_param(name, value)  # fmt: skip
    with pytest.raises(ValueError, match=r"unknown parameter 'chain'"):
        check_transducer_param("chain", 2)


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


# ------------------------------------------------- warnings on thread executors
def _stored(frame: pd.DataFrame, column: str) -> yw.Transducer:
    """A transducer of given draws (no fit): what each patched fit below returns."""
    draws = {
        "w": np.array([[[0.6, 0.4]]]),
        "alpha": np.array([[[[0.9, 0.1], [0.2, 0.8]]]]),
        "mu": np.array([[[[-1.0], [1.0]]]]),
        "sigma": np.array([[[[1.0], [1.0]]]]),
    }
    return yw.Transducer.from_draws(draws, frame[[column]], frame["label"],
                                    ("other", "eight"), output_transform="identity")  # fmt: skip


def _warning_tasks(monkeypatch) -> tuple[dict, threading.Barrier, threading.Barrier]:
    """Three tasks whose (patched) fits meet inside their fits, each raises a warning of its
    own and one from a line they all run, and meet again before they return: the caller
    joins both meetings (``inside``, ``leaving``), so that it warns while all three run."""
    frame = calibration()
    columns = {"forest": "forest_votes", "net": "net_logit_eight", "knn": "knn_votes"}
    stored = {column: _stored(frame, column) for column in columns.values()}
    inside, leaving = threading.Barrier(4), threading.Barrier(4)

    def fit_that_warns(self, outputs, classes, **_):
        column = outputs.columns[0]
        inside.wait(timeout=60)  # all three tasks are fitting, on three threads
        warnings.warn(f"odd outputs in {column}", UserWarning, stacklevel=2)
        # one line in every task: under the caller's "default" filter, the registry of
        # this module would show it for the first task only
        warnings.warn("a line every task runs", RuntimeWarning, stacklevel=2)
        leaving.wait(timeout=60)
        return stored[column]

    monkeypatch.setattr(yw.Transducer, "fit", fit_that_warns)
    batch = {name: (frame[[column]], frame["label"]) for name, column in columns.items()}
    return batch, inside, leaving


def _caller_warns_while_tasks_run(inside, leaving, last):
    def on_start(name):  # in the caller's thread, once every task is submitted
        if name == last:
            inside.wait(timeout=60)
            warnings.warn("the caller's own warning", UserWarning, stacklevel=2)
            leaving.wait(timeout=60)

    return on_start


EXPECTED_WARNINGS = ["the caller's own warning"] + [
    text for name, column in (("forest", "forest_votes"), ("net", "net_logit_eight"),
                              ("knn", "knn_votes"))
    for text in (f"{name}: odd outputs in {column}", f"{name}: a line every task runs")
]  # fmt: skip


def _run_with_warnings(batch, executor, on_start):
    before = (list(warnings.filters), warnings.showwarning, warnings._showwarnmsg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # once per line: what the tasks must get round
        fits = fit_many(batch, transducer={"backend": "laplace"}, seed=SEED,
                        executor=executor, progress=False, on_start=on_start)  # fmt: skip
    assert (list(warnings.filters), warnings.showwarning, warnings._showwarnmsg) == before
    return fits, [str(w.message) for w in caught]


def test_a_thread_pool_keeps_each_tasks_warnings_under_its_name(monkeypatch):
    """Three tasks on three threads at once, each raising its own warning and one from a
    line they share: each comes back under its own task's name, in task order, none
    lost; a warning of the caller's thread meanwhile reaches the caller as it is; and the
    warnings machinery is as it was afterwards. Before (audit, 2026-12-06), each task's
    warnings.catch_warnings replaced the others': they came back under another task's
    name or not at all."""
    import concurrent.futures as cf

    batch, inside, leaving = _warning_tasks(monkeypatch)
    with cf.ThreadPoolExecutor(3) as pool:
        fits, shown = _run_with_warnings(
            batch, pool, _caller_warns_while_tasks_run(inside, leaving, "knn")
        )
    assert shown == EXPECTED_WARNINGS
    assert list(fits) == ["forest", "net", "knn"] and fits.tasks.attrs["executor"] == "executor"
    assert len(set(fits.tasks["pid"])) == 1  # threads of this process
    with warnings.catch_warnings(record=True) as after:  # plain warnings reach the caller
        warnings.simplefilter("always")
        warnings.warn("after the batch", stacklevel=2)
    assert [str(w.message) for w in after] == ["after the batch"]


def test_dask_worker_threads_keep_each_tasks_warnings_under_its_name(monkeypatch):
    """The same on Dask's own layout, one worker with three threads (in this process, so
    that the patched fit reaches it; a worker process runs its threads the same way)."""
    distributed = pytest.importorskip("distributed", reason="Dask is not installed")
    batch, inside, leaving = _warning_tasks(monkeypatch)
    with distributed.LocalCluster(
        processes=False, n_workers=1, threads_per_worker=3, dashboard_address=None,
        silence_logs=40,
    ) as local, distributed.Client(local) as client:  # fmt: skip
        fits, shown = _run_with_warnings(
            batch, client, _caller_warns_while_tasks_run(inside, leaving, "knn")
        )
    ours = [text for text in shown if "task" in text or "odd" in text or "caller" in text]
    assert ours == EXPECTED_WARNINGS
    assert fits.tasks.attrs["executor"] == "dask"


def test_the_warnings_of_real_fits_are_the_same_serially_on_threads_and_processes():
    """Laplace fits whose data warn (one output value: ConstantOutputWarning; short runs:
    DiagnosticsWarning): the serial batch, a thread pool and the process pool give the
    same warnings, each under its task's name (a thread pool gave one task's, unnamed)."""
    import concurrent.futures as cf

    frame = calibration().assign(constant=0.5)
    batch = {"constant": (frame[["constant"]], frame["label"]),
             "net": (frame[["net_logit_eight"]], frame["label"])}  # fmt: skip
    settings = {"backend": "laplace", "chains": 2, "warmup": 100, "draws": 100}
    found = {}
    with cf.ThreadPoolExecutor(2) as pool:
        for label, executor in (("serial", "serial"), ("threads", pool),
                                ("processes", "processes")):  # fmt: skip
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fit_many(batch, transducer=settings, seed=SEED, executor=executor,
                         progress=False)  # fmt: skip
            found[label] = sorted((w.category.__name__, str(w.message)) for w in caught)
    assert found["threads"] == found["serial"] == found["processes"]
    assert ("ConstantOutputWarning", "constant") in {
        (c, m.split(":")[0]) for c, m in found["serial"]
    }
    assert all(m.startswith(("constant: ", "net: ")) for _, m in found["serial"])


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

    # a fit long enough that the worker is killed mid-sampling (a preconditioned fit of
    # SETTINGS' length can end before its chain processes are seen), compared with the same
    # fit run serially; one task is enough (the other task of tasks() would only double
    # the test's 60-70 s, measured on the CI of 53ebbff)
    long = {"chains": 2, "warmup": 3000, "draws": 3000}
    one = {"forest": tasks()["forest"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = fit_many(one, transducer=long, seed=SEED, progress=False)
    box: dict[str, object] = {}

    def run() -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                box["result"] = fit_many(one, transducer=long, seed=SEED, executor=cluster,
                                         progress=False)  # fmt: skip
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
    alive_at_kill = [p for p in chains if _alive(p)]
    os.kill(pid, signal.SIGKILL)
    thread.join(300)
    # the kill landed mid-fit (else this test proves nothing: lengthen the fit)
    assert alive_at_kill, "the fit had ended before the kill"
    assert chains and _all_gone(chains)  # they died with their worker: no orphans
    assert not thread.is_alive() and "error" not in box, box.get("error")
    result = box["result"]
    assert list(result) == ["forest"]
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
