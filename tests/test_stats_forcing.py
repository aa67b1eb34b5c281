"""Forcing results split by the population of each record's decode before forcing, worked by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.stats.forcing import forcing_populations
from mindcap_tok.store.ledger import Ledger

# per item: the record's finish reason (generate keeps the decode's before forcing), its ``forced`` column (None:
# not recorded, a ledger before format 4), whether its trace holds an answer line of its own, its final answer
# (gold 18), and its unforced source in the ledger (finish reason, answered) or None.
CASES = [
    ("length", True, True, 18, None),
    ("length", True, True, 5, None),  # cut by the cap, forced: 1 of 4 correct
    ("length", True, True, 5, None),
    ("length", None, True, 5, None),
    ("stop", True, True, 18, None),
    ("stop", None, True, 18, ("stop", False)),  # stopped unanswered, forced: 2 of 2
    ("stop", False, True, 18, None),  # answered by itself, not forced
    ("stop", False, False, None, None),  # stopped unanswered, not forced (forcing.unanswered off): 0 of 1
    ("stop", None, True, 18, ("stop", True)),  # not recorded, its source answered: answered
    ("stop", None, True, 5, None),  # not recorded, no source: finished (which of the two is unknown)
]


def _by_record():
    cell = {"model": "m", "arm": "native", "lang": "tha_Thai", "cap": 128, "sample": 0}
    rows = []
    for item, (finish, forced, answered, value, source) in enumerate(CASES):
        if source is not None:
            rows.append(
                {
                    **cell,
                    "item": item,
                    "forcing": False,
                    "forced": None,
                    "finish_reason": source[0],
                    "emission": 40.0 if source[1] else np.nan,
                    "correct": 0,
                }
            )
        rows.append(
            {
                **cell,
                "item": item,
                "forcing": True,
                "forced": forced,
                "finish_reason": finish,
                "emission": 50.0 if answered else np.nan,
                "correct": int(value == 18),
            }
        )
    return pd.DataFrame(rows)


def _expect(out: pd.DataFrame) -> None:
    got = out.set_index("population")
    assert got.loc["truncated", ["n", "n_correct"]].tolist() == [4, 1]
    assert got.loc["truncated", "accuracy"] == pytest.approx(0.25)
    assert got.loc["truncated", "share"] == pytest.approx(4 / 10)
    assert got.loc["unanswered", ["n", "n_correct"]].tolist() == [3, 2]
    assert got.loc["answered", ["n", "n_correct"]].tolist() == [2, 2]
    assert got.loc["finished", ["n", "n_correct"]].tolist() == [1, 0]
    assert got.loc["pooled", "accuracy"] == pytest.approx(5 / 10)  # the average the paper declines to read


def test_populations_by_hand():
    out = forcing_populations(_by_record())
    assert len(out) == 5  # one forced cell: four populations and the pooled row; the sources' cell is not shown
    _expect(out)


def test_sweep_and_report_show_the_populations(tmp_path, qwen):
    recs = []
    for item, (finish, forced, answered, value, source) in enumerate(CASES):
        head = "คิด\n#### 18\nตรวจ" if answered and value is None else "คิด ตรวจ"
        if source is not None:
            src = "คิด\n#### 18\n" if source[1] else "คิด ตรวจ"
            recs.append(make_record(qwen, src, item=item, cap=128, forcing=False, finish_reason=source[0]))
        text = head if value is None else f"{head}\n#### {value}\n"
        if finish == "stop" and forced is False and answered:
            text = "คิด\n#### 18\n"  # answered by itself
        extra = {} if forced is None else {"forced": forced}
        recs.append(make_record(qwen, text, item=item, cap=128, forcing=True, finish_reason=finish, **extra))
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
