"""Many fits at once: serial vs a local process pool vs a 2-worker Dask LocalCluster.

Sixteen transducer fits (8 classifiers x 2 data sets, the shipped digits split in two
halves of 540 items) through :func:`yieldwise.fit_many` with each executor, the same
seed, and checks that every executor gives the serial draws exactly. Measured per
executor: wall time; CPU seconds of this process and every process under it (sampled
every 0.2 s, each process's last reading kept, so chain processes that end are counted);
CPU use = CPU seconds / (wall x cores); peak memory per worker (the largest resident
set of a worker together with the chain processes under it); and the overhead per task,
``(wall x slots - sum of the fits' own seconds) / tasks``: the time a task slot spends
on anything but fitting (starting workers, shipping data and NetCDF bytes, scheduling).

Usage::

    .venv/bin/python bench/bench_scaleout.py            # prints the table
    .venv/bin/python bench/bench_scaleout.py --write    # and writes docs/benchmarks.md

The eight classifiers: the forest's votes, the k-nearest-neighbour votes, the network's
two logits and their difference, and three weaker "checkpoints" of the network (its
eight-logit plus Gaussian noise of sd 1, 2 and 4, seeded), as a sweep would give.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_section

SETTINGS = {"chains": 2, "warmup": 300, "draws": 300}
SEED = 2024
SECTION = "## Many fits at once: serial, processes, Dask"


def tasks() -> dict[tuple[str, str], tuple[pd.DataFrame, pd.Series]]:
    from yieldwise.datasets import load_digits_binary

    frame = load_digits_binary()
    rng = np.random.default_rng(SEED)
    frame["net_margin"] = frame["net_logit_eight"] - frame["net_logit_other"]
    for sd in (1, 2, 4):
        frame[f"checkpoint_sd{sd}"] = frame["net_logit_eight"] + rng.normal(0, sd, len(frame))
    columns = {
        "forest votes": ["forest_votes"], "knn votes": ["knn_votes"],
        "net logit (eight)": ["net_logit_eight"], "net logit (other)": ["net_logit_other"],
        "net margin": ["net_margin"], "checkpoint sd 1": ["checkpoint_sd1"],
        "checkpoint sd 2": ["checkpoint_sd2"], "checkpoint sd 4": ["checkpoint_sd4"],
    }  # fmt: skip
    halves = {"half A": frame.iloc[0::2], "half B": frame.iloc[1::2]}
    return {
        (half, name): (part[cols].reset_index(drop=True), part["label"].reset_index(drop=True))
        for half, part in halves.items()
        for name, cols in columns.items()
    }


class TreeSampler:
    """CPU seconds and resident memory of this process and everything under it."""

    def __init__(self, every: float = 0.2) -> None:
        import psutil

        self.psutil = psutil
        self.root = psutil.Process()
        self.every = every
        self.cpu: dict[int, float] = {}
        self.worker_peak: dict[int, float] = {}
        self.worker_pids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self.start_cpu = self._tree_cpu()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _tree_cpu(self) -> dict[int, float]:
        out = {}
        for p in [self.root, *self.root.children(recursive=True)]:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system
            except self.psutil.Error:
                pass
        return out

    def _sample(self) -> None:
        self.cpu.update(self._tree_cpu())
        for pid in self.worker_pids:
            try:
                worker = self.psutil.Process(pid)
                rss = sum(p.memory_info().rss for p in [worker, *worker.children(recursive=True)])
            except self.psutil.Error:
                continue
            self.worker_peak[pid] = max(self.worker_peak.get(pid, 0), rss)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def cpu_seconds(self) -> float:
        return sum(v - self.start_cpu.get(pid, 0.0) for pid, v in self.cpu.items())


def run(executor_name: str, batch: dict) -> dict:
    import yieldwise as yw

    cores = len(os.sched_getaffinity(0))
    cluster = client = None
    if executor_name == "dask LocalCluster (2 workers)":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)  # fmt: skip
        client = Client(cluster)
        executor, slots = client, 2
    elif executor_name == "processes":
        from yieldwise.parallel import pool_size

        executor, slots = "processes", pool_size(SETTINGS["chains"], len(batch))
    else:
        executor, slots = "serial", 1
    started = time.perf_counter()
    with TreeSampler() as sampler, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if client is not None:
            sampler.worker_pids = set(client.run(os.getpid).values())

        def note(name, info):
            sampler.worker_pids.add(info["pid"])

        fits = yw.fit_many(batch, transducer=SETTINGS, seed=SEED, executor=executor,
                           progress=False, on_done=note)  # fmt: skip
        wall = time.perf_counter() - started
    if client is not None:
        client.close()
        cluster.close()
    fit_seconds = float(fits.tasks["fit_seconds"].sum())
    cpu = sampler.cpu_seconds()
    peaks = [v / 1024**2 for pid, v in sampler.worker_peak.items() if pid != os.getpid()]
    if executor_name == "serial":
        peaks = [max(fits.tasks["peak_rss_mb"])]
    return {
        "executor": executor_name, "slots": slots, "wall_s": wall, "cpu_s": cpu,
        "cpu_use": cpu / (wall * cores), "fit_s_sum": fit_seconds,
        "overhead_per_task_s": (wall * slots - fit_seconds) / len(batch),
        "peak_worker_mib": max(peaks) if peaks else float("nan"), "fits": fits,
        "result_kib": float(fits.tasks["bytes"].mean()) / 1024,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2 classifiers, 100 + 100 draws (never written)",
    )
    args = parser.parse_args()
    batch = tasks()
    if args.quick:
        SETTINGS.update(warmup=100, draws=100)
        batch = {k: v for k, v in batch.items() if k[1] in ("forest votes", "net margin")}
        args.write = False
    rows = [run(name, batch) for name in ("serial", "processes", "dask LocalCluster (2 workers)")]
    reference = rows[0]["fits"]
    for row in rows[1:]:
        for name, fit in reference.items():
            a, b = fit.posterior_.posterior, row["fits"][name].posterior_.posterior
            same = all(np.array_equal(a[v].values, b[v].values) for v in a.data_vars)
            assert same, f"{row['executor']}: {name} differs from the serial fit"
    table = pd.DataFrame([{k: v for k, v in r.items() if k != "fits"} for r in rows])
    lines = [
        "| executor | task slots | wall | CPU seconds | CPU use | sum of fit seconds | "
        "overhead per task | peak memory per worker | NetCDF bytes back per fit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.executor} | {r.slots} | {r.wall_s:.0f} s | {r.cpu_s:.0f} s | "
            f"{100 * r.cpu_use:.0f} % | {r.fit_s_sum:.0f} s | {r.overhead_per_task_s:.1f} s | "
            f"{r.peak_worker_mib:,.0f} MiB | "
            + (f"{r.result_kib:,.0f} KiB |" if r.result_kib > 0 else "none (in process) |")
        )
    cores = len(os.sched_getaffinity(0))
    text = "\n".join([
        SECTION, "",
        f"`{' '.join(['.venv/bin/python', 'bench/bench_scaleout.py', *sys.argv[1:]])}`, "
        f"{datetime.date.today().isoformat()}, {platform.machine()} with {cores} cores "
        f"(shared with other work while it ran), Python {platform.python_version()}. "
        f"{len(batch)} fits ({len(batch) // 2} classifiers x 2 data sets of 540 items), "
        f"chains={SETTINGS['chains']}, "
        f"warmup={SETTINGS['warmup']}, draws={SETTINGS['draws']}; every executor gave the "
        "serial draws exactly (checked).", "",
        *lines, "",
        "How to read it. *Task slots*: fits running at once (`\"processes\"` sizes its "
        "pool to `cores // chains`, here one worker; the cluster has two single-threaded "
        "workers, so four chain processes share the two cores). *CPU use*: CPU seconds of "
        "this process and every process under it over wall time x cores. *Overhead per "
        "task*: `(wall x slots - sum of the fits' own seconds) / tasks`, the time a slot "
        "spends on anything but fitting (starting workers and importing yieldwise, loading "
        "the compiled model, shipping data and NetCDF bytes, scheduling); on a machine with "
        "as many cores as slots x chains it is what the cluster adds to each fit. With two "
        "cores the fits cannot run faster than serially: the chains of one fit already "
        "use both cores, which is what this section shows; scaling out pays once there "
        "are more cores than one fit's chains (docs/scaling.md). The benchmark was run "
        "once, at the end of the work, on a machine shared with three other engineers' "
        "jobs: the wall times include their load.", "",
    ])  # fmt: skip
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
