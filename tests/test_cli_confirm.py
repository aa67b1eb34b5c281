"""`mindcap-tok confirm` end to end on real ledgers (Qwen3 token ids), values worked by hand."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ledger_factory import FILLER, early_late_records, make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory, qwen):
    """Replay: ``early_late_records`` (acc_N(30) = 4/8, acc_N(90) = 7/8). Independent: native Thai decoded
    at caps 30 and 90 with the same texts, but item 3 sample 1 now right: acc(30) = 4/8, acc(90) = 8/8."""
    replay = tmp_path_factory.mktemp("replay")
    Ledger(replay).append(early_late_records(qwen), qwen)
    independent = tmp_path_factory.mktemp("independent")
    records = []
    for cap in (30, 90):
        for item in range(4):
            for sample in range(2):
                late = FILLER * 4 if item >= 2 else ""
                text = late + f"Answer line:\n#### {10 + item}\n"
                records.append(make_record(qwen, text, item=item, sample=sample, gold=10 + item, cap=cap))
    Ledger(independent).append(records, qwen)
    return replay, independent


def _run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_confirm_json_by_hand(ledgers):
    replay, independent = ledgers
    args = ["confirm", "--replay", str(replay), "--independent", str(independent), "--premiums", "th=3"]
    res = _run([*args, "--budgets", "30", "--n-boot", "200", "--seed", "7", "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    row = out["rows"][0]
    assert (row["lang"], row["budget"]) == ("tha_Thai", 30)
    assert row["predicted"] == pytest.approx(3 / 8) and row["independent"] == pytest.approx(4 / 8)
    assert row["subcdf_predicted"] == pytest.approx(3 / 8) and row["subcdf_error"] == pytest.approx(-1 / 8)
    assert row["inside"] == (row["ci_low"] <= 0.5 <= row["ci_high"]) and row["independent_se"] > 0
    cell = out["cells"][0]
    assert (cell["predicted_budget"], cell["independent_argmax"], cell["argmax_agree"]) == (30, 30, True)
    assert cell["subcdf_mae"] == pytest.approx(1 / 8) and cell["subcdf_max_abs_error"] == pytest.approx(1 / 8)
    # the same texts: independent decodes and truncated discovery traces have the same mean length per cap
    assert [r["cap"] for r in out["lengths"]] == [30, 90]
    assert all(r["difference_share"] == pytest.approx(0) and r["n_independent"] == 8 for r in out["lengths"])
    assert out["lengths"][0]["mean_truncated"] < 30 and (out["n_boot"], out["seed"]) == (200, 7)


def test_confirm_table_and_one_line_error(ledgers, tmp_path):
    replay, independent = ledgers
    target = tmp_path / "confirm.md"
    args = ["confirm", "--replay", str(replay), "--independent", str(independent), "--premiums", "th=3"]
    res = _run([*args, "--budgets", "30", "--n-boot", "200", "--format", "md", "--out", str(target)])
    assert res.exit_code == 0, res.output
    text = target.read_text()
    assert "37.50" in text and "50.00" in text and "12.50" in text  # points: Δ_L replay, independent, MAE
    bad = CliRunner().invoke(cli, [*args, "--budgets", "30", "--n-boot", "200", "--lang", "de"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1
