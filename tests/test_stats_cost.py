"""Matched-cost budget grids from token prices and the ledger's mean prompt tokens, worked by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.cost import load_prices, matched_cost_grid, prompt_tokens
from mindcap_tok.stats.protocol import load_protocol
from mindcap_tok.store.ledger import Ledger

PRICES = {"qwen3-8b": (0.2, 0.8)}  # dollars per million input / output tokens


def _cells():
    # eng prompts of 90 and 110 tokens (mean 100), tha 250, deu 130; translate-act Thai 300
    ids = {("native", "eng_Latn"): [90, 110], ("native", "tha_Thai"): [250, 250], ("native", "deu_Latn"): [130]}
    ids[("translate-act", "tha_Thai")] = [300]
    rows = [
        {"model": "qwen3-8b", "arm": arm, "lang": lang, "prompt_ids": [7] * n}
        for (arm, lang), ns in ids.items()
        for n in ns
    ]
    return prompt_tokens(pd.DataFrame(rows))


def test_grid_matched_on_english_by_hand():
    grid = matched_cost_grid(_cells(), PRICES, budgets=[1024], reference={"lang": "en"})
    got = grid.set_index(["arm", "lang"])
    # B' = floor(1024 + 0.2·(100 − P)/0.8): tha floor(1024 − 37.5) = 986, deu floor(1024 − 7.5) = 1016
    assert got.loc[("native", "tha_Thai"), "matched_budget"] == 986
    assert got.loc[("native", "deu_Latn"), "matched_budget"] == 1016
    assert got.loc[("native", "eng_Latn"), "matched_budget"] == 1024
    # reference cost (0.2·100 + 0.8·1024)/1e6 = 839.2e-6; Thai at 986: (0.2·250 + 0.8·986)/1e6 = 838.8e-6
    assert got.loc[("native", "tha_Thai"), "reference_cost"] == pytest.approx(839.2e-6)
    assert got.loc[("native", "tha_Thai"), "cost"] == pytest.approx(838.8e-6)
    assert ("translate-act", "tha_Thai") not in got.index  # translate-act has no English cell to match


def test_grid_matched_on_the_translate_arm_by_hand():
    grid = matched_cost_grid(_cells(), PRICES, budgets=[512, 1024], reference={"arm": "translate-act"})
    tha = grid[(grid["arm"] == "native") & (grid["lang"] == "tha_Thai")]
    assert tha["matched_budget"].tolist() == [524, 1036]  # floor(B + 0.2·(300 − 250)/0.8) = B + 12


def test_grid_refusals():
    with pytest.raises(MindcapError, match="no token prices for model 'qwen3-8b'"):
        matched_cost_grid(_cells(), {"llama-3.1-8b": (1.0, 1.0)}, budgets=[64], reference={"lang": "en"})
    with pytest.raises(MindcapError, match="its prompt alone costs more"):
        matched_cost_grid(_cells(), {"qwen3-8b": (10.0, 0.1)}, budgets=[64], reference={"lang": "en"})
    with pytest.raises(MindcapError, match=r"no reference cell .*swh_Latn.* in the ledger"):
        matched_cost_grid(_cells(), PRICES, budgets=[64], reference={"lang": "sw"})
    with pytest.raises(MindcapError, match="the reference names arm and/or lang"):
        matched_cost_grid(_cells(), PRICES, budgets=[64], reference={"cap": "4096"})


def test_price_files_toml_csv_and_protocol(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text("[qwen3-8b]\ninput = 0.2\noutput = 1\n", "utf-8")
    assert load_prices(toml) == {"qwen3-8b": (0.2, 1.0)}
    csv = tmp_path / "p.csv"
    csv.write_text("model,input,output\nqwen3-8b,0.2,0.8\n", "utf-8")
    assert load_prices(csv) == PRICES
    csv.write_text("model,input,output\nqwen3-8b,0.2,0\n", "utf-8")
    with pytest.raises(MindcapError, match=r"p\.csv: prices\.qwen3-8b\.output: must be > 0, got 0\.0"):
        load_prices(csv)
    proto = tmp_path / "proto.toml"
    proto.write_text(
        'name = "c"\n[prices.qwen3-8b]\ninput = 0.2\noutput = 0.8\n'
        '[[hypotheses]]\nid = "H"\nkind = "gap"\nlang = "th"\nbudget = 64\n',
        "utf-8",
    )
    assert load_protocol(proto).prices == PRICES


def test_cli_cost_grid_on_a_ledger(tmp_path, qwen):
    led = tmp_path / "led"
    recs = [
        make_record(qwen, "#### 18\n", lang=lang, item=i, prompt_ids=[7] * n)
        for lang, n in [("eng_Latn", 100), ("tha_Thai", 250)]
        for i in range(2)
    ]
    Ledger(led).append(recs, qwen)
    prices = tmp_path / "prices.csv"
    prices.write_text("model,input,output\nqwen3-8b,0.2,0.8\n", "utf-8")
    args = ["cost-grid", "--ledger", str(led), "--prices", str(prices), "--budgets", "1024", "--format", "json"]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["reference"] == {"lang": "eng_Latn"} and out["prices"] == {"qwen3-8b": {"input": 0.2, "output": 0.8}}
    assert {r["lang"]: r["matched_budget"] for r in out["grid"]} == {"eng_Latn": 1024, "tha_Thai": 986}
    res = CliRunner().invoke(cli, ["cost-grid", "--ledger", str(led), "--budgets", "64"])
    assert res.exit_code == 2 and "exactly one of --prices FILE and --protocol FILE" in res.output
