"""Forcing results split into the two populations the paper keeps apart, worked by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.ledger import Ledger
from mindcap_tok.stats.forcing import forcing_populations

# forced native Thai: 4 truncated traces (1 correct), 2 finished traces (both correct); one unforced record
CASES = [("length", 18), ("length", 5), ("length", 5), ("length", 5), ("stop", 18), ("stop", 18)]


def _by_record():
    rows = [
        {"model": "m", "arm": "native", "lang": "tha_Thai", "cap": 128, "forcing": True, "finish_reason": f,
         "correct": int(v == 18)}
        for f, v in CASES
    ]  # fmt: skip
    rows.append({"model": "m", "arm": "native", "lang": "tha_Thai", "cap": 128, "forcing": False,
                 "finish_reason": "length", "correct": 0})  # fmt: skip
    return pd.DataFrame(rows)


def _expect(out: pd.DataFrame) -> None:
    got = out.set_index("population")
    assert got.loc["truncated", ["n", "n_correct"]].tolist() == [4, 1]
    assert got.loc["truncated", "accuracy"] == pytest.approx(0.25) and got.loc["truncated", "share"] == pytest.approx(
        4 / 6
    )
    assert got.loc["finished", ["n", "n_correct"]].tolist() == [2, 2] and got.loc["finished", "accuracy"] == 1.0
    assert got.loc["pooled", "accuracy"] == pytest.approx(0.5)  # the average the paper declines to read


def test_populations_by_hand():
    _expect(forcing_populations(_by_record()))


def test_sweep_and_report_show_the_populations(tmp_path, qwen):
    recs = [
        make_record(qwen, f"คิด\n#### {v}\n", item=i, cap=128, forcing=True, finish_reason=f)
        for i, (f, v) in enumerate(CASES)
    ]
    Ledger(tmp_path / "led").append(recs, qwen)
    args = ["--ledger", str(tmp_path / "led"), "--premiums", "th=2", "--budgets", "32", "--n-boot", "50"]
    res = CliRunner().invoke(cli, ["sweep", *args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    _expect(pd.DataFrame(json.loads(res.output)["forcing"]))
    out = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["report", *args, "--out-dir", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    _expect(pd.read_csv(out / "forcing.csv"))
    assert "## Forcing, by population" in (out / "report.md").read_text()
