"""Fixtures for the Stan backend tests (tests/test_backends.py, test_long_run_stan.py).

Every backend that is present runs; an absent one is skipped with its reason. The
pytest header says which backends are present, and the terminal summary which ran.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_ran: set[str] = set()


def _backend_status() -> list[tuple[str, str | None]]:
    from yieldwise.backends import BACKENDS

    return [(name, cls().unavailable_reason()) for name, cls in BACKENDS.items()]


def pytest_report_header(config):
    lines = []
    for name, reason in _backend_status():
        lines.append(f"  {name}: {'present' if reason is None else 'absent — ' + reason}")
    return ["yieldwise Stan backends:", *lines]


@pytest.fixture(scope="session", params=["cmdstanpy", "pystan"])
def stan_backend(request):
    """Each Stan backend in turn; skipped (with the reason) when absent."""
    from yieldwise.backends import get_backend

    try:
        backend = get_backend(request.param)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    return backend


@pytest.fixture(scope="session")
def transducer_program(stan_backend):
    """The transducer program compiled once per session and backend."""
    from yieldwise.backends import stan_file

    program = stan_backend.compile(stan_file("transducer"))
    _ran.add(stan_backend.name)
    return program


@pytest.fixture(scope="session")
def long_run_program(stan_backend):
    """stan/long_run_utility.stan compiled once per session and backend."""
    from yieldwise.backends import stan_file

    program = stan_backend.compile(stan_file("long_run_utility"))
    _ran.add(stan_backend.name)
    return program


def pytest_terminal_summary(terminalreporter):
    if _ran:
        terminalreporter.write_line(f"yieldwise Stan backends that ran: {', '.join(sorted(_ran))}")


@pytest.fixture(scope="session")
def browser():
    """Debian's headless chromium, driven by selenium (tools/system-deps.sh installs it).

    Skipped with the reason when chromium or its driver is missing, except under
    ``CI=true``, where a missing browser is a failure: CI must open the report.
    """
    import os
    import shutil

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        reason = (
            "Debian's chromium and chromium-driver are not installed "
            "(run `make system-deps` as root)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1800"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def r_session():
    """The embedded R with the yw_ functions installed; returns ``rpy2.robjects.r``.

    Skipped with the reason when R or rpy2 is missing, except under ``CI=true``,
    where a missing R is a failure: CI must run the bridge.
    """
    import os

    from yieldwise import rbridge

    try:
        ro = rbridge.start_r()  # starts R and keeps the environment of later child processes
    except Exception as exc:  # ImportError, or R itself failing to load under rpy2
        reason = f"R or rpy2 is not usable ({type(exc).__name__}: {exc}); run `make test` as root"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    rbridge.install()
    return ro.r


@pytest.fixture(scope="session")
def dask_cluster():
    """A real Dask scheduler with two single-threaded worker processes on localhost;
    yields a connected ``Client`` (tests/test_parallel.py, tests/test_report_scaleout.py)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None, silence_logs=40,
    ) as local, distributed.Client(local) as client:  # fmt: skip
        yield client
        import os

        import psutil

        pids = client.run(os.getpid).values()
        chains = [c for pid in pids for c in psutil.Process(pid).children(recursive=True)]
    # Closing the cluster ends its workers, and with them every process they started.
    assert _all_gone(chains), [p.pid for p in chains if p.is_running()]


def _alive(process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _all_gone(processes, within: float = 15.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not [p for p in processes if _alive(p)]:
            return True
        time.sleep(0.2)
    for process in processes:  # no strays for the next tests, whatever the assertion says
        if process.is_running():
            process.kill()
    return False


@pytest.fixture(scope="session")
def bench_import():
    """Import a script of bench/ (a folder of scripts, not a package) as a module.

    ``bench_import("decision_quality")`` imports it by name, with bench/ on sys.path only
    while it loads (for its own imports of _common and _problems); ``as_name=`` loads it
    from its file under another name, for a script whose name a package shadows
    (``coverage.py``).
    """
    bench = Path(__file__).resolve().parent.parent / "bench"

    def load(name: str, as_name: str | None = None):
        sys.path.insert(0, str(bench))
        try:
            if as_name is None:
                return importlib.import_module(name)
            spec = importlib.util.spec_from_file_location(as_name, bench / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        finally:
            sys.path.remove(str(bench))

    return load


# ------------------------------------------------------------- class reductions
FIVE_CLASSES = ("a", "b", "c", "d", "e")


def _five_class_data(n: int, seed: int):
    """A network-like softmax of five classes: logits 2.5 at the true class plus noise;
    (DataFrame of p_a .. p_e, labels)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, n)
    logits = 2.5 * np.eye(5)[labels] + rng.normal(size=(n, 5))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    frame = pd.DataFrame(p, columns=[f"p_{c}" for c in FIVE_CLASSES])
    return frame, np.array(FIVE_CLASSES)[labels]


@contextlib.contextmanager
def _max_pairs(value: int):
    """Class reductions with pair offsets for up to ``value`` ordered pairs (0: none)
    inside the block (yieldwise._design.RANKS_MAX_PAIRS)."""
    from yieldwise import _design

    kept = _design.RANKS_MAX_PAIRS
    _design.RANKS_MAX_PAIRS = value
    try:
        yield
    finally:
        _design.RANKS_MAX_PAIRS = kept


@pytest.fixture(scope="session")
def five_class_data():
    """make(n, seed): a seeded five-class softmax data set (:func:`_five_class_data`)."""
    return _five_class_data


@pytest.fixture(scope="session")
def max_pairs():
    """max_pairs(value): a context setting RANKS_MAX_PAIRS (:func:`_max_pairs`)."""
    return _max_pairs


def _density_hessian(model, u, index, h: float = 1e-4):
    """Minus the Hessian of ``model.log_density`` at ``u`` over the coordinates ``index``,
    by second differences of the log density's value alone (not its gradient): an
    independent check of curvatures the code computes from the gradient."""
    import numpy as np

    out = np.empty((index.size, index.size))
    for i, a in enumerate(index):
        for j, b in enumerate(index):
            ea, eb = np.eye(model.size)[a] * h, np.eye(model.size)[b] * h
            out[i, j] = (model.log_density(u + ea + eb)[0] - model.log_density(u + ea - eb)[0]
                         - model.log_density(u - ea + eb)[0]
                         + model.log_density(u - ea - eb)[0]) / (4 * h * h)  # fmt: skip
    return -out


@pytest.fixture(scope="session")
def density_hessian():
    """:func:`_density_hessian`: ``density_hessian(model, u, index)``."""
    return _density_hessian


def _whitening_modes(data):
    """The data's model without whitening or preconditioning (``flat``), its non-centred
    posterior mode (``base``) and the preconditioned, whitened data (``mode``) with their
    model (``white``), as ``precondition`` builds them: what the whitening tests compare."""
    import numpy as np

    from yieldwise.backends._laplace import TransducerDensity
    from yieldwise.transducer.stan_data import identity_preconditioning, precondition

    plain = {k: v for k, v in data.items() if not k.startswith("white_")}
    plain.update(identity_preconditioning(int(data["U"])))
    base = np.asarray(precondition(plain, seed=0, whiten=False)["u_centre"])
    mode = precondition(plain, seed=0)
    return TransducerDensity(plain), base, mode, TransducerDensity(mode)


@pytest.fixture(scope="session")
def whitening_modes():
    """:func:`_whitening_modes`: ``flat, base, mode, white = whitening_modes(data)``."""
    return _whitening_modes


def _gradient_check(model, u, h: float = 1e-6) -> None:
    """``model.log_density``'s gradient at ``u`` equals central differences of its value
    (step ``h``) in every coordinate."""
    import numpy as np

    _, grad = model.log_density(u)
    for j in range(model.size):
        step = np.zeros_like(u)
        step[j] = h
        numeric = (model.log_density(u + step)[0] - model.log_density(u - step)[0]) / (2 * h)
        assert grad[j] == pytest.approx(numeric, rel=1e-5, abs=1e-5), j


@pytest.fixture(scope="session")
def gradient_check():
    """:func:`_gradient_check`: ``gradient_check(model, u)``."""
    return _gradient_check


@pytest.fixture(scope="module")
def joint():
    """A joint transducer over two scores "rf" and "nn" from given draws (6 paired draws, 2
    components, classes "neg" and "pos"), as ``Transducer().fit({"rf": ..., "nn": ...},
    y)`` records its members: comparisons and long-run utilities of a joint fit without
    sampling (tests/test_joint.py keeps a two-draw one of its own)."""
    import pandas as pd

    from yieldwise import Transducer

    labels = ("neg", "pos")
    rng = np.random.default_rng(4)
    n_draws = 6
    w = rng.dirichlet([5.0, 5.0], n_draws)
    alpha = np.stack([rng.dirichlet([8.0, 2.0], n_draws), rng.dirichlet([2.0, 8.0], n_draws)], 1)
    mu = np.stack([rng.normal(-1.0, 0.2, (n_draws, 2)), rng.normal(1.0, 0.2, (n_draws, 2))], 1)
    sigma = rng.uniform(0.8, 1.2, (n_draws, 2, 2))
    frame = pd.DataFrame({"rf": rng.normal(size=40), "nn": rng.normal(size=40)})
    t = Transducer.from_draws(
        {"w": w[None], "alpha": alpha[None], "mu": mu[None], "sigma": sigma[None]},
        frame, np.array(labels)[rng.integers(0, 2, 40)], labels,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    t.members_ = {"rf": ["rf"], "nn": ["nn"]}  # as fit({"rf": ..., "nn": ...}) records
    return t


# ------------------------------------------------------------- open files
def _open_files(path: Path) -> list[str]:
    """This process's open descriptors (from /proc/<pid>/fd) that point at ``path``."""
    import glob
    import os

    links = []
    for fd in glob.glob(f"/proc/{os.getpid()}/fd/*"):
        try:
            links.append(os.readlink(fd))
        except OSError:
            continue
    return [link for link in links if link == str(path)]


@pytest.fixture(scope="session")
def open_files():
    """open_files(path): the open descriptors of ``path`` (:func:`_open_files`)."""
    return _open_files


# ------------------------------------------------------------- the R bridge
def _r_py(r, expression):
    """An R value as Python, through the bridge's own conversion."""
    from yieldwise.rbridge import _py

    return _py(r(expression))


def _r_error(r, expression):
    """(classes, message) of the R condition that ``expression`` signals."""
    result = r(
        f"tryCatch({{{expression}; NULL}}, error = function(e) "
        "list(class = class(e), message = conditionMessage(e)))"
    )
    assert result is not None and len(result) == 2, f"{expression} did not fail"
    return list(result[0]), result[1][0]


@pytest.fixture(scope="session")
def r_py():
    """r_py(r, expression): an R value as Python (:func:`_r_py`)."""
    return _r_py


@pytest.fixture(scope="session")
def r_error():
    """r_error(r, expression): (classes, message) of the R error (:func:`_r_error`)."""
    return _r_error
