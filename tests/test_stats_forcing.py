"""Forcing results split by the population of each forced record's unforced source, worked by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.ledger import Ledger
from mindcap_tok.stats.forcing import forcing_populations

# per item: the source's finish reason, whether its trace holds an answer line, the forced trace's answer (gold 18).
# Items 0-3: cut by the cap without an answer (1 of 4 forced correct: 25%); items 4-5: stopped without an answer
# (both forced correct: 100%); item 6: answered by itself; item 7: forced with no source in the ledger.
CASES = [
    ("length", False, 18), ("length", False, 5), ("length", False, 5), ("length", False, 5),
    ("stop", False, 18), ("stop", False, 18), ("stop", True, 18), (None, None, 5),
]  # fmt: skip


def _by_record():
    cell = {"model": "m", "arm": "native", "lang": "tha_Thai", "cap": 128, "sample": 0}
    rows = []
    for item, (finish, answered, value) in enumerate(CASES):
        if finish is not None:
            rows.append({**cell, "item": item, "forcing": False, "finish_reason": finish,
                         "emission": 40.0 if answered else np.nan, "correct": 0})  # fmt: skip
        # a forced record's own finish reason says nothing of its source's answer: all 'length' here
        rows.append({**cell, "item": item, "forcing": True, "finish_reason": "length", "emission": 50.0,
                     "correct": int(value == 18)})  # fmt: skip
    return pd.DataFrame(rows)


def _expect(out: pd.DataFrame) -> None:
    got = out.set_index("population")
    assert got.loc["truncated", ["n", "n_correct"]].tolist() == [4, 1]
    assert got.loc["truncated", "accuracy"] == pytest.approx(0.25)
    assert got.loc["truncated", "share"] == pytest.approx(4 / 8)
    assert got.loc["unanswered", ["n", "n_correct"]].tolist() == [2, 2] and got.loc["unanswered", "accuracy"] == 1.0
    assert got.loc["answered", ["n", "n_correct"]].tolist() == [1, 1]
    assert got.loc["unpaired", ["n", "n_correct"]].tolist() == [1, 0]
    assert got.loc["pooled", "accuracy"] == pytest.approx(4 / 8)  # the average the paper declines to read


def test_populations_by_hand():
    out = forcing_populations(_by_record())
    assert len(out) == 5  # one forced cell: four populations and the pooled row; the sources' cell is not shown
    _expect(out)


def test_sweep_and_report_show_the_populations(tmp_path, qwen):
    recs = []
    for item, (finish, answered, value) in enumerate(CASES):
        head = "คิด\n#### 18\nตรวจ" if answered else "คิด ตรวจ"
        if finish is not None:
            recs.append(make_record(qwen, head, item=item, cap=128, forcing=False, finish_reason=finish))
        forced = f"{head}\n#### {value}\n"
        recs.append(make_record(qwen, forced, item=item, cap=128, forcing=True, finish_reason="length"))
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
