"""A fit never changes the process's working directory nor writes into it (issue 17, item 2).

A second thread writes files by relative path while a real Stan fit runs (and, in the slow
test, while PyStan compiles a program): every file must land in the folder the thread
started in, the working directory must never change, and nothing else may appear there
(PyStan's build writes a ``build/`` folder into the current directory of whoever compiles).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest

from yieldwise import Transducer
from yieldwise.backends import available_backends

pytestmark = pytest.mark.skipif(
    not available_backends(), reason="no Stan backend (cmdstanpy or PyStan) is installed"
)


class _RelativeWriter(threading.Thread):
    """Writes ``note_<i>.txt`` by relative path every few milliseconds until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.written: list[str] = []
        self.seen_cwds: set[str] = set()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            name = f"note_{i}.txt"
            self.seen_cwds.add(os.getcwd())
            with open(name, "w") as handle:  # relative: wherever the process's cwd is
                handle.write(str(i))
            self.written.append(name)
            i += 1
            time.sleep(0.002)

    def finish(self) -> None:
        self.stop.set()
        self.join(timeout=10)


def _check_folder(folder: Path, writer: _RelativeWriter) -> None:
    assert writer.seen_cwds == {str(folder)}, "the working directory changed during the fit"
    assert len(writer.written) > 20, "the writer thread barely ran; the check is not meaningful"
    present = {p.name for p in folder.iterdir()}
    lost = [name for name in writer.written if name not in present]
    assert not lost, f"{len(lost)} of {len(writer.written)} files written by the thread were lost"
    for name in writer.written[:: max(1, len(writer.written) // 50)]:
        assert (folder / name).read_text() == name[5:-4]
    assert present == set(writer.written), f"the fit left {sorted(present - set(writer.written))}"


def test_thread_writing_relative_paths_during_a_fit_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(17)
    classes = (rng.random(200) < 0.4).astype(int)
    scores = rng.normal(np.where(classes == 1, 1.0, -1.0), 1.0)
    writer = _RelativeWriter()
    writer.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # short run: diagnostics are not the point
            fitted = Transducer(
                n_components=5, chains=2, warmup=150, draws=150, seed=3, progress=False
            ).fit(scores, classes)
    finally:
        writer.finish()
    assert os.getcwd() == str(tmp_path)
    _check_folder(tmp_path, writer)
    assert fitted.predict_proba([2.0])[0, 1] > 0.5  # the fit itself worked


@pytest.mark.slow
def test_compiling_a_program_writes_nothing_into_the_working_directory(tmp_path, monkeypatch):
    """PyStan's build (setuptools build_ext) runs in a child process with its own folder.

    A program text never compiled before (a unique comment) forces a real build, about
    40 s of C++; the model is removed from httpstan's cache afterwards.
    """
    pytest.importorskip("stan")
    import httpstan.cache
    import httpstan.models

    from yieldwise.backends import get_backend

    code = (
        f"// yieldwise test {uuid.uuid4().hex}\n"
        "parameters { real x; }\nmodel { x ~ normal(1, 2); }\n"
    )
    program_file = tmp_path / "tiny.stan"
    program_file.write_text(code)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    writer = _RelativeWriter()
    writer.start()
    try:
        program = get_backend("pystan").compile(program_file)
        result = program.sample({}, chains=1, warmup=100, draws=200, seed=1, progress=False)
    finally:
        writer.finish()
        httpstan.cache.delete_model_directory(httpstan.models.calculate_model_name(code))
    _check_folder(work, writer)
    assert abs(float(result.draws["x"].mean()) - 1.0) < 1.0  # N(1, 2): the program ran
