"""The command line: the worked-example demo and usage errors."""

import pandas as pd
import pytest

from yieldwise.cli import main


def test_demo_prints_and_writes_the_worked_example(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "7 of 10 metrics favour 'cautious'" in printed
    assert "favours 'sensitive' by 0.310" in printed
    table = pd.read_csv(tmp_path / "worked_example.csv", index_col="score")
    # Yields by hand, utilities [[0, -10], [-1, 5]] per 1,000 patients:
    # cautious:  (0*890 - 10*40 - 1*10 + 5*60) / 1000 = -0.11
    # sensitive: (0*750 - 10*10 - 1*150 + 5*90) / 1000 = +0.20
    assert table.loc["utility_yield", "cautious"] == pytest.approx(-0.11, abs=1e-15)
    assert table.loc["utility_yield", "sensitive"] == pytest.approx(0.20, abs=1e-15)
    assert table.loc["accuracy", "cautious"] == pytest.approx(0.95)
    assert table.loc["accuracy", "sensitive"] == pytest.approx(0.84)
    assert table.loc["utility_yield", "favours"] == "sensitive"
    assert table.loc["f1", "favours"] == "cautious"
    assert set(table.index) >= {"precision", "recall", "matthews", "balanced_accuracy"}
    assert table["admissible"].dtype == bool


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage: yieldwise" in capsys.readouterr().err


def test_unwritable_output_is_reported(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["demo", "--out", str(blocker / "sub")]) == 2
    assert "yieldwise demo: error" in capsys.readouterr().err
