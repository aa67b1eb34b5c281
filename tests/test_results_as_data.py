"""`sweep`, `report`, `roundtrip report` and `price` are built by library functions that return data (nothing
written), checked against hand-computed values; the commands print or write exactly that data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger_factory import early_late_records
from mindcap_tok import Resampling, budget_sweep, load_config, sweep_inputs
from mindcap_tok.adaptation import GivenFolds, PriceSettings, fold_rows, price_cells, price_records, triage_rows
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.report import budget_tables, sweep_tables, write_budget_tables
from mindcap_tok.roundtrip import ReportOptions, build_roundtrip_report, write_roundtrip_report
from mindcap_tok.store import Ledger
from price_fixture import price_world
from roundtrip_two_sequences import SEQ, write_two_sequence_run


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    """Native Thai: items 0,1 early-correct (answer within 30 tokens), items 2,3 late-correct (30 to 76 tokens)
    except (3, 1), wrong; translate-act always early-correct. So acc_N(30) = 4/8, acc_N(90) = 7/8, acc_T(30) = 1."""
    root = tmp_path_factory.mktemp("ledger")
    Ledger(root).append(early_late_records(qwen), qwen)
    return root


@pytest.fixture(scope="module")
def inputs(ledger):
    return sweep_inputs(ledger, budgets=[30], premium_specs=["th=3"], config=load_config())


def test_budget_sweep_holds_the_hand_values_and_every_table_sweep_shows(inputs):
    result = budget_sweep(inputs, resampling=Resampling(200, 0))
    row = result.sweep.rows.iloc[0]
    assert (row["lang"], row["budget"], row["scaled_budget"]) == ("tha_Thai", 30, 90)
    assert row["delta"] == pytest.approx(3 / 8) and row["gap"] == pytest.approx(4 / 8)
    assert result.binding_rows["budget"].tolist() == [30]
    assert result.forcing.empty and result.thinking.empty  # no record was forced or thinks
    titles = [t.title for t in sweep_tables(result)]
    assert titles[0].startswith("Δ_L sweep (replay frame, 200 item resamples, seed 0")
    assert titles[1:3] == ["Gap: TRANSLATE-ACT − NATIVE accuracy at B (points)", "Peaks (argmax Δ_L)"]
    assert titles[-1].startswith("Binding regime")
    assert sweep_tables(result)[0].rows[0]["delta"] == pytest.approx(37.5)  # points in the readable table


def test_sweep_prints_the_library_result(ledger, inputs):
    args = ["sweep", "--ledger", str(ledger), "--premiums", "th=3", "--budgets", "30", "--n-boot", "200"]
    res = CliRunner().invoke(cli, [*args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    printed = json.loads(res.output)
    result = budget_sweep(inputs, resampling=Resampling(200, 0)).as_dict()
    assert printed["rows"][0]["delta"] == pytest.approx(result["rows"][0]["delta"]) == pytest.approx(3 / 8)
    assert printed.keys() == result.keys() and printed["units"] == "fractions"


def test_budget_tables_are_built_without_a_folder_and_written_as_they_are(inputs, tmp_path):
    built = budget_tables(inputs.scores, inputs.premiums, budgets=[30], resampling=Resampling(200, 0), arms=inputs.arms)
    assert built.tables["sweep"].iloc[0]["delta"] == pytest.approx(3 / 8)
    assert {"sweep", "peaks", "crossovers", "accuracy", "binding", "timing"} <= set(built.tables)
    assert list(tmp_path.iterdir()) == []
    rep = write_budget_tables(built, tmp_path / "report")
    for name, frame in built.tables.items():
        assert (rep.out_dir / f"{name}.csv").read_text("utf-8") == frame.to_csv(index=False), name
    import pandas as pd

    assert pd.read_csv(rep.out_dir / "sweep.csv").iloc[0]["delta"] == pytest.approx(3 / 8)  # by hand, as written
    assert "report.md" in rep.files and "native_curves.png" in rep.files


@pytest.fixture(scope="module")
def run(tmp_path_factory, qwen):
    return write_two_sequence_run(tmp_path_factory.mktemp("rt"), qwen)


def test_roundtrip_report_is_built_without_a_folder_and_written_as_it_is(run, qwen, tmp_path):
    before = sorted(p.name for p in Path(run).parent.iterdir())
    built = build_roundtrip_report(run, options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, lid=False))
    assert sorted(p.name for p in Path(run).parent.iterdir()) == before
    m = built.tables["metrics"]
    deu = m[(m["by"] == "sequence") & (m["group"] == SEQ["deu_Latn"])].iloc[0]
    assert deu["pass_share"] == pytest.approx(2 / 3) and deu["mean_mqm"] == pytest.approx((100 + 94 + 79) / 3)
    written = write_roundtrip_report(built, tmp_path / "rep")
    payload = json.loads((tmp_path / "rep" / "report.json").read_text("utf-8"))
    assert payload["counts"] == built.summary["counts"] and payload["notes"] == list(built.notes)
    assert len(payload["metrics"]) == len(m) and written.metrics is m
    with pytest.raises(MindcapError, match="outside the run folder"):
        write_roundtrip_report(built, Path(run) / "report")


def test_price_cells_and_their_tables_by_hand(tmp_path):
    ledger, base, _, folds = price_world(tmp_path)
    cells = []
    results = price_cells(
        ledger.root,
        ["tiny"],
        langs=["th"],
        caps=[30],
        extension=GivenFolds(folds),
        settings=PriceSettings(resampling=Resampling(400, 3), tokenizer=base),
        on_cell=lambda: cells.append(1),
    )
    assert len(results) == 1 and cells == [1]
    row = triage_rows(results)[0]  # the price fixture's figures at B = 30, in signed points
    assert (row["B"], row["G"], row["G3"], row["closure G−G3"]) == (30, "+35.0", "+30.0", "+5.0")
    assert (row["NAT trunc"], row["NAT gain"], row["ext NAT gain"], row["items"]) == ("55.0%", "+25.0", "+15.0", 10)
    assert "task" not in row  # one task: not named
    fold = {r["fold"]: r for r in fold_rows(results)}
    assert fold[0]["NATIVE tokens base -> ext"] == "254 -> 162" and fold[1]["NATIVE tokens base -> ext"] == "431 -> 240"
    flat, nested = price_records(results, flat=True), price_records(results)
    assert "compression" not in flat[0] and len(nested[0]["compression"]) == 2
    assert flat[0]["G"] == pytest.approx(7 / 20)
