"""The budget-binding regime as ranges of budgets, on values worked by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import early_late_records
from mindcap_tok.cli.main import cli
from mindcap_tok.stats.binding import binding_regime, budget_ranges, correct_in_window
from mindcap_tok.stats.curves import Sweep
from mindcap_tok.store.ledger import Ledger


def test_budget_ranges_joins_consecutive_budgets():
    budgets = [64, 128, 256, 512, 1024, 2048]
    assert budget_ranges(budgets, [False, True, True, False, True, True]) == [[128, 256], [1024, 2048]]
    assert budget_ranges(budgets, [True] * 6) == [[64, 2048]]
    assert budget_ranges(budgets, [False] * 6) == []
    assert budget_ranges(budgets, [True, False, True, False, False, True]) == [[64, 64], [256, 256], [2048, 2048]]


def _sweep(rows: pd.DataFrame) -> Sweep:
    return Sweep(rows=rows, peaks=pd.DataFrame(), crossovers=pd.DataFrame(), n_boot=2, seed=0, level=0.95, frame="")


def test_binding_regime_by_hand():
    # Thai, r = 2: windows (100, 200], (200, 400], (400, 800], (800, 1600]
    rows = pd.DataFrame(
        {
            "model": "m",
            "lang": "tha_Thai",
            "budget": [100, 200, 400, 800],
            "scaled_budget": [200, 400, 800, 1600],
            "band_low": [0.01, 0.02, -0.01, -0.05],  # excludes 0 at 100 and 200 (and at 800 from below)
            "band_high": [0.2, 0.3, 0.1, -0.01],
        }
    )
    # correct native emissions at 150 and 390 (and 390 once more), a wrong one at 700, a correct one at 100
    # (outside every window: windows are open on the left) and a never-emitting correct-less trace
    by_record = pd.DataFrame(
        {
            "model": "m",
            "arm": ["native"] * 6 + ["translate-act"],
            "lang": "tha_Thai",
            "emission": [150, 390, 390, 700, 100, np.nan, 700],
            "correct": [1, 1, 1, 0, 1, 0, 1],
        }
    )
    assert correct_in_window(rows, by_record).tolist() == [1, 2, 0, 0]
    out = binding_regime(_sweep(rows), by_record).iloc[0]
    assert out["band_binds"] == [[100, 200], [800, 800]]
    assert out["emission_binds"] == [[100, 200]]
    assert out["budgets"] == [100, 200, 400, 800]
    assert "emission_binds" not in binding_regime(_sweep(rows)).columns  # without records: the band only


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    """Native Thai: emissions at token 7 (items 0, 1) and 59 (items 2, 3; (3, 1) wrong); see ledger_factory."""
    root = tmp_path_factory.mktemp("ledger")
    Ledger(root).append(early_late_records(qwen), qwen)
    return root


def test_sweep_and_report_show_the_binding_regime(ledger, tmp_path):
    # r = 2: (4, 8] holds 4 correct emissions at 7; (20, 40] none; (30, 60] and (40, 80] the 3 correct at 59;
    # (64, 128] none
    res = CliRunner().invoke(cli, ["sweep", *_run_args(ledger), "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    cell = json.loads(res.output)["binding"][0]
    assert cell["emission_binds"] == [[4, 4], [30, 40]] and cell["budgets"] == [4, 20, 30, 40, 64]
    res = CliRunner().invoke(cli, ["sweep", *_run_args(ledger), "--format", "csv"], catch_exceptions=False)
    header, *lines = res.output.strip().splitlines()
    col = header.split(",").index("correct_in_window")
    assert [int(line.split(",")[col]) for line in lines] == [4, 0, 3, 3, 0]
    res = CliRunner().invoke(cli, ["sweep", *_run_args(ledger), "--wide"], catch_exceptions=False)  # any COLUMNS
    assert "Binding regime" in res.output and "[[4, 4], [30, 40]]" in res.output
    out = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["report", *_run_args(ledger), "--out-dir", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "## Binding regime" in (out / "report.md").read_text()
    assert pd.read_csv(out / "binding.csv")["emission_binds"].tolist() == ["[[4, 4], [30, 40]]"]


def _run_args(ledger):
    return ["--ledger", str(ledger), "--premiums", "th=2", "--budgets", "4,20,30,40,64", "--n-boot", "50"]
