"""stan/long_run_utility.stan against the numpy long-run utility, on every backend present.

The two share only the cells and each cell's decision: the per-draw class masses (normal
CDF differences) and the utility sums are computed independently, by Stan in generated
quantities and by numpy in yieldwise/long_run.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from yieldwise import Transducer, UtilityMatrix, long_run_utility
from yieldwise.long_run import long_run_utility_stan
from yieldwise.utility import chart_matrices

LABELS = ("neg", "pos")
W = np.array([[0.6, 0.4], [0.5, 0.5]])
ALPHA = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]]])
MU = np.array([[[-1.0], [1.5]], [[-0.5], [1.0]]])
SIGMA = np.array([[[1.0], [0.7]], [[0.8], [1.2]]])
U = UtilityMatrix([[1, -2], [0, 3]], decisions=LABELS, classes=LABELS)


def transducer(outputs, spec, resolution):
    classes = np.array(LABELS)[(np.arange(len(outputs)) % 3 == 0).astype(int)]
    return Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": MU[None], "sigma": SIGMA[None]},
        pd.DataFrame({"score": outputs}), classes, LABELS,
        output_transform=spec, resolution=resolution,
    )  # fmt: skip


CONTINUOUS = transducer(np.linspace(-3, 3, 30), "identity", None)
LATTICE = transducer(np.arange(0, 21) / 20, "logit", 0.05)


@pytest.mark.parametrize("fitted", [CONTINUOUS, LATTICE], ids=["continuous", "lattice"])
@pytest.mark.parametrize("rule", ["augmented", "standard"])
def test_stan_program_agrees_with_numpy(long_run_program, stan_backend, fitted, rule):
    expected = long_run_utility(fitted, U, rule=rule)
    got = long_run_utility_stan(fitted, U, rule=rule, backend=stan_backend.name)
    assert got.attrs["engine"] == f"stan ({stan_backend.name})"
    np.testing.assert_allclose(got.values, expected.values, rtol=1e-10, atol=1e-12)


def test_stan_program_agrees_on_a_batch(long_run_program, stan_backend):
    rng = np.random.default_rng(3)
    batch = chart_matrices(rng.uniform(-1, 1, 40), rng.uniform(-1, 1, 40))
    expected = long_run_utility(CONTINUOUS, batch)  # 40 > 32 matrices: the fixed grid
    got = long_run_utility_stan(CONTINUOUS, batch, backend=stan_backend.name)
    assert got.dims == ("chain", "draw", "matrix")
    np.testing.assert_allclose(got.values, expected.values, rtol=1e-10, atol=1e-12)


def test_stan_check_refuses_several_dimensions():
    rng = np.random.default_rng(0)
    two = Transducer.from_draws(
        {"w": W[None], "alpha": ALPHA[None], "mu": np.concatenate([MU, MU], axis=2)[None],
         "sigma": np.concatenate([SIGMA, SIGMA], axis=2)[None]},
        pd.DataFrame({"a": rng.normal(size=20), "b": rng.normal(size=20)}),
        np.array(LABELS)[rng.integers(0, 2, 20)], LABELS,
        output_transform="identity", resolution=None,
    )  # fmt: skip
    with pytest.raises(ValueError, match="handles 1-D outputs; this transducer has 2"):
        long_run_utility_stan(two, U)
