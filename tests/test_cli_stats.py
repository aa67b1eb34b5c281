"""`mindcap-tok sweep`, `report` and `protocol freeze|test` on a small real ledger (Qwen3 token ids) whose
answer positions are known: early traces answer within 30 tokens, late ones between 30 and 76 tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ledger_factory import early_late_records
from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    """Native Thai: items 0,1 early-correct, items 2,3 late-correct except (3, 1) which is wrong.
    Translate-act: every trace early-correct. Hence acc_N(30) = 4/8, acc_N(76 or 90) = 7/8, acc_T(30) = 1."""
    root = tmp_path_factory.mktemp("ledger")
    Ledger(root).append(early_late_records(qwen), qwen)
    return root


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def run_stats(command: str, ledger: Path, premiums: str, budgets: str, n_boot: int, *extra: str) -> Result:
    """Run ``command`` (sweep or report) on ``ledger`` with these premiums, budgets and bootstrap resamples."""
    return run(
        [
            command,
            "--ledger",
            str(ledger),
            "--premiums",
            premiums,
            "--budgets",
            budgets,
            "--n-boot",
            str(n_boot),
            *extra,
        ]
    )


def test_sweep_json_with_hand_premium(ledger):
    res = run_stats("sweep", ledger, "th=3", "30", 200, "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    row = out["rows"][0]
    assert (row["lang"], row["budget"], row["scaled_budget"]) == ("tha_Thai", 30, 90)
    assert row["acc_native"] == pytest.approx(4 / 8) and row["acc_native_scaled"] == pytest.approx(7 / 8)
    assert row["delta"] == pytest.approx(3 / 8) and row["gap"] == pytest.approx(4 / 8)  # fractions in JSON
    assert row["ci_low"] <= 3 / 8 <= row["ci_high"] and out["n_boot"] == 200 and out["seed"] == 0
    assert out["units"] == "fractions" and out["peaks"][0]["peak_budget"] == 30


def test_sweep_with_qwen_premiums_and_csv(ledger):
    res = run_stats("sweep", ledger, "qwen3-8b", "30,200", 100, "--format", "csv")
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    header = lines[0].split(",")
    row = dict(zip(header, lines[1].split(","), strict=True))
    assert row["scaled_budget"] == "76"  # floor(2.5508 · 30), Qwen3's FLORES-200 Thai premium
    assert float(row["delta"]) == pytest.approx(3 / 8)  # CSV, like JSON, holds fractions
    assert float(row["premium"]) == pytest.approx(2.5508, abs=1e-4)


def test_report_writes_tables_and_figures(ledger, tmp_path):
    import matplotlib.image as mpimg

    out = tmp_path / "rep"
    res = run_stats("report", ledger, "th=3", "20,30", 100, "--out-dir", str(out))
    assert res.exit_code == 0, res.output
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "native_curves.png", "gap_curves.png", "sweep.csv", "timing.csv"} <= names
    text = (out / "report.md").read_text()
    assert "37.50" in text and "tha_Thai" in text
    assert mpimg.imread(out / "native_curves.png").shape[0] > 200
    again = run_stats("report", ledger, "th=3", "30", 50, "--out-dir", str(out))
    assert again.exit_code == 0 and not [p for p in tmp_path.iterdir() if p.name.startswith(".rep")]


def test_protocol_freeze_test_and_refusal(ledger, tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text(
        'name = "cli"\nn_boot = 300\nseed = 1\n[premiums]\nth = 3\n'
        '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "th"\nbudget = 30\nmargin = 5\n',
        "utf-8",
    )
    res = run(["protocol", "test", str(proto), "--ledger", str(ledger)])
    assert res.exit_code == 2 and "has not been frozen" in res.output
    res = run(["protocol", "freeze", str(proto)])
    assert res.exit_code == 0 and "sha256" in res.output
    res = run(["protocol", "test", str(proto), "--ledger", str(ledger), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["decisions"][0]["estimate"] == pytest.approx(3 / 8) and out["units"] == "fractions"
    assert out["outcome"] in ("confirmatory_support", "no_confirmatory_support") and out["seed"] == 1
    proto.write_text(proto.read_text().replace("margin = 5", "margin = 1"), "utf-8")
    res = run(["protocol", "test", str(proto), "--ledger", str(ledger)])
    assert res.exit_code == 2 and "changed after its freeze" in res.output


def test_sweep_table_fits_a_wide_terminal(ledger):
    # settings shared by all rows move into the title; Δ_L and the gap are two tables, not one ~280-column line
    res = run_stats("sweep", ledger, "th=3", "30", 50)
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.output.splitlines()) <= 200
    assert "design replay" in res.output and "Gap: TRANSLATE-ACT" in res.output and "…" not in res.output
    assert "37.50" in res.output  # Δ_L at B = 30 in points, as the title says
