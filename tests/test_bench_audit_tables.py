"""bench/audit_tables.py: the published multi-class, class-balance and AUC audits."""

from __future__ import annotations

import numpy as np
import pytest

from yieldwise.audit import (
    DEFAULT_METRICS,
    DEFAULT_MULTICLASS_METRICS,
    auc_disagreement,
    rank_disagreement,
)

N_PAIRS, SEED = 3000, 11


@pytest.fixture(scope="module")
def tables(bench_import):
    audit_tables = bench_import("audit_tables")
    return audit_tables, audit_tables.compute(N_PAIRS, SEED, classes=(3, 4))


def _wrong(frame, metric, sd=None):
    rows = frame[frame.metric == metric]
    if sd is not None:
        rows = rows[rows.error_sd == sd]
    assert len(rows) == 1
    return float(rows.fraction_wrong.iloc[0])


def test_structure(tables):
    module, results = tables
    assert set(results) == {"multiclass", "admissible", "balance", "auc"}
    sds = list(module.ERROR_SD)
    for c, frame in results["multiclass"].items():
        assert frame.attrs["n_classes"] == c and frame.attrs["n_pairs"] == N_PAIRS
        assert frame.metric.tolist() == [*DEFAULT_MULTICLASS_METRICS] + ["utility_yield"] * 3
        assert frame.error_sd.tolist()[-3:] == sds
        assert set(results["admissible"][c]) == set(DEFAULT_MULTICLASS_METRICS)
    assert list(results["balance"]) == ["drawn", "50/50", "90/10"]
    assert [f.attrs["class_balance"] for f in results["balance"].values()] == [
        None, [0.5, 0.5], [0.9, 0.1],
    ]  # fmt: skip
    for frame in results["balance"].values():
        assert frame.metric.tolist()[: len(DEFAULT_METRICS)] == list(DEFAULT_METRICS)
    assert list(results["auc"]) == ["drawn", "50/50", "90/10", "nested"]
    assert results["auc"]["nested"].attrs["spread"] == (1.0, 1.0)


def test_values_match_direct_calls_and_closed_forms(tables):
    _, results = tables
    # one value recomputed by a direct call with the same seed and pairs
    direct = rank_disagreement(
        ["accuracy"], error_sd=[0.0, 0.1, 0.3], n_pairs=N_PAIRS, seed=SEED,
        class_balance=[0.9, 0.1],
    )  # fmt: skip
    assert _wrong(results["balance"]["90/10"], "accuracy") == _wrong(direct, "accuracy")
    auc = auc_disagreement(error_sd=[0.0, 0.1, 0.3], n_pairs=N_PAIRS, seed=SEED,
                           class_balance=[0.5, 0.5])  # fmt: skip
    assert results["auc"]["50/50"].equals(auc)
    # closed forms: micro-F1 is accuracy on C classes; at 50/50 balanced accuracy
    # (TPR + TNR) / 2 is accuracy 0.5 TPR + 0.5 TNR; the true matrix never ranks wrongly
    for frame in results["multiclass"].values():
        assert _wrong(frame, "f1_micro") == _wrong(frame, "accuracy")
        assert _wrong(frame, "utility_yield", 0.0) == 0.0
    fifty = results["balance"]["50/50"]
    assert _wrong(fifty, "balanced_accuracy") == _wrong(fifty, "accuracy")
    drawn = results["balance"]["drawn"]
    assert _wrong(drawn, "balanced_accuracy") != _wrong(drawn, "accuracy")
    # accuracy is admissible on any number of classes (equal regrets), macro-F1 is not
    for c in (3, 4):
        accuracy = results["admissible"][c]["accuracy"]
        assert accuracy.admissible and not results["admissible"][c]["f1_macro"].admissible
        off = accuracy.regrets[~np.eye(c, dtype=bool)]
        np.testing.assert_allclose(off, 1 / np.sqrt(c * (c - 1)), rtol=1e-6)


def test_render_prints_the_computed_numbers(tables):
    module, results = tables
    figures = {"command": "`python bench/audit_tables.py`", "date": "2026-11-24"}
    text = module.render(results, N_PAIRS, SEED, figures)
    assert text.startswith(module.SECTION)
    assert "| command | `python bench/audit_tables.py` |" in text
    row = results["multiclass"][4]
    i = row.index[row.metric == "cohen_kappa"][0]
    assert f"{row.fraction_wrong[i]:.4f} ({row.mc_se[i]:.4f})" in text
    assert "| accuracy | admissible | admissible |" in text
    angle = results["admissible"][3]["matthews"].max_angle_deviation
    assert f"| matthews | no ({angle:.2f} rad) |" in text
    auc_row = "| roc_auc | " + " | ".join(
        f"{f.fraction_wrong.iloc[0]:.4f} ({f.mc_se.iloc[0]:.4f})" for f in results["auc"].values()
    )
    assert auc_row + " |" in text.split("### AUC audited")[1]
