"""report.html without a browser: marks' character offsets against hand-counted ones and the tokenizer's own
decode (a thought's close after its closing token), nothing drawn beyond a
cell's cap (a budget whose floor(r·B) passes the demo's cap of 4096 is left out and said so), a page that names
no outside resource and says how many traces it shows, and `view`'s one-line refusal of a folder that is neither
a ledger nor a report. (tests/test_report_page.py opens the page in headless chromium.)"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from click.testing import CliRunner
from plotly.offline import get_plotlyjs

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.demo.ledger import build_demo
from mindcap_tok.report import budget_tables, write_budget_report
from mindcap_tok.report.html_report import PageInputs, curve_figures, render_page
from mindcap_tok.report.traces import char_offsets, sample_traces, view_outcome
from mindcap_tok.scoring import score_ledger
from mindcap_tok.stats.budget_sweep import sweep_inputs
from mindcap_tok.store import Ledger


def test_a_cut_inside_a_character_falls_before_it():
    data = "ab ก\n".encode()  # ก is 3 bytes (E0 B8 81): bytes 0..2 "ab ", 3..5 ก, 6 "\n"
    assert char_offsets(data, [0, 2, 3, 4, 5, 6, 7]) == [0, 2, 3, 3, 3, 4, 5]


def test_outcomes_as_the_viewer_filters_them():
    nan = float("nan")
    assert view_outcome(1, 40, finish_reason="length") == "correct"
    assert view_outcome(0, 40, finish_reason="length") == "cut"
    assert view_outcome(0, nan, finish_reason="stop") == "never answered"
    assert view_outcome(0, 40, finish_reason="stop") == "wrong"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, qwen, config):
    out = tmp_path_factory.mktemp("html") / "demo"
    return build_demo(out, 5, n_items=6, k=2, tokenizer=qwen, data_dir=config.data_dir.value)


def test_nothing_is_drawn_beyond_the_cap_and_the_page_is_self_contained(demo, config):
    # Thai at 2.55: floor(2.55 · 2048) = 5222 > the cap 4096; German at 1.56: 3194, within it
    inputs = sweep_inputs(
        demo.ledger, budgets=[1024, 2048], premium_specs=["th=2.55", "de=1.56", "sw=1.94"], config=config
    )
    built = budget_tables(inputs.scores, inputs.premiums, budgets=inputs.budgets, arms=inputs.arms)
    figures = curve_figures(built)
    replay = next(f for f in figures if f["design"] == "replay")
    delta = {t["meta"]["lang"]: t["x"] for t in replay["spec"]["data"] if t["meta"].get("metric") == "delta"}
    assert delta["deu_Latn"] == [1024, 2048] and delta["tha_Thai"] == [1024]
    assert any(n.startswith("tha_Thai: 1 budget(s)") for n in replay["notes"])
    for fig in figures:
        for trace in fig["spec"]["data"]:
            if trace["meta"].get("metric") != "cap":
                assert max(trace["x"]) <= 4096
    traces = sample_traces(demo.ledger, inputs.scores, rows=built.sweep.rows, limit=20)
    page = render_page(built, PageInputs(traces=traces, ledger=demo.ledger))
    assert get_plotlyjs() in page  # plotly's own bundle inlined (its strings name its site: not a request)
    page = page.replace(get_plotlyjs(), "")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # no outside script, style or link
    assert "<script src" not in page
    assert f"{len(traces.traces)} of {6 * 2 * 14} traces are shown" in page and len(traces.traces) == 14


def test_view_refuses_a_folder_that_is_neither_ledger_nor_report(tmp_path):
    res = CliRunner().invoke(cli, ["view", str(tmp_path), "--no-open"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.strip() == f"error: {tmp_path}: neither a ledger nor a report folder"


def test_view_names_the_ledgers_of_a_folder_and_opens_a_page_file(qwen, tmp_path):
    for name in ("b", "a"):
        Ledger(tmp_path / "runs" / name).append([make_record(qwen, "x", item=0)], qwen)
    res = CliRunner().invoke(cli, ["view", str(tmp_path / "runs"), "--no-open"])
    listed = f"{tmp_path / 'runs' / 'a'}, {tmp_path / 'runs' / 'b'}"
    assert (
        res.exit_code == 2
        and res.stderr.strip() == f"error: {tmp_path / 'runs'}: a folder of ledgers ({listed}): give one of them"
    )
    page = tmp_path / "page.html"
    page.write_text("<html></html>")
    res = CliRunner().invoke(cli, ["view", str(page), "--no-open"])
    assert res.exit_code == 0 and res.stdout.strip() == str(page)
    res = CliRunner().invoke(cli, ["view", str(tmp_path / "runs" / "a" / "_manifest.json"), "--no-open"])
    assert res.exit_code == 2 and "a file but not a page (.html)" in res.stderr and res.stdout == ""


def test_a_thought_is_marked_after_its_closing_token(qwen, tmp_path):
    close = qwen.tokenizer.token_to_id("</think>")
    pieces = {0: ["<think>", "\nok\n", "</think>", "\n#### 18\n"], 1: ["<think>", "\n#### 18\nstill thinking"]}
    recs = []
    for item, parts in pieces.items():
        ids = [t for p in parts for t in qwen.tokenizer.encode(p, add_special_tokens=False).ids]
        end = ids.index(close) if close in ids else None
        rec = make_record(qwen, "x", item=item, thinking=True, think_end=end, finish_reason="stop")
        recs.append(rec | {"output_ids": ids, "text": qwen.tokenizer.decode(ids, skip_special_tokens=True)})
    Ledger(tmp_path / "L").append(recs, qwen)
    scores = score_ledger(Ledger(tmp_path / "L").read(), qwen, budgets=[2, 4])
    rows = pd.DataFrame({"model": ["qwen3-8b"], "lang": ["tha_Thai"], "budget": [2], "scaled_budget": [4]})
    traces = {t["item"]: t for t in sample_traces(tmp_path / "L", scores, rows=rows).traces}
    closed, unclosed = traces[0], traces[1]
    ids = recs[0]["output_ids"]
    assert closed["thought_end"] == ids.index(close) + 1 and unclosed["thought_end"] is None
    upto = qwen.tokenizer.decode(ids[: closed["thought_end"]], skip_special_tokens=True)
    assert closed["offsets"][str(closed["thought_end"])] == len(upto)
    assert closed["text"][: len(upto)].endswith("</think>")
    assert closed["outcome"] == "correct" and unclosed["outcome"] == "never answered"


def test_a_size_limit_keeps_the_cells_round_robin(demo, config, monkeypatch):
    from mindcap_tok.report import traces as traces_module

    inputs = sweep_inputs(demo.ledger, budgets=[128], premium_specs=["th=2.55", "de=1.56", "sw=1.94"], config=config)
    rows = pd.DataFrame(
        {"model": "qwen3-8b", "lang": ["deu_Latn", "tha_Thai", "swh_Latn"], "budget": 128, "scaled_budget": 199}
    )
    full = sample_traces(demo.ledger, inputs.scores, rows=rows, limit=28).traces
    assert len(full) == 28 and len({t["cell"] for t in full[:14]}) == 14  # every cell once before any twice
    one_each = sum(len(t["text"].encode()) + len(t["prompt"].encode()) for t in full[:14])
    monkeypatch.setattr(traces_module, "MAX_TEXT_BYTES", one_each)
    assert [t["cell"] for t in sample_traces(demo.ledger, inputs.scores, rows=rows, limit=28).traces] == [
        t["cell"] for t in full[:14]
    ]


def test_a_report_from_scores_alone_writes_its_page_without_the_trace_viewer(demo, config, tmp_path):
    # write_budget_report gets scores, not the ledger: the page has the curves and tables, no traces, and says
    # what the trace viewer needs; its plotted Δ_L and gap are the report's own sweep.csv (fractions → points)
    inputs = sweep_inputs(
        demo.ledger, budgets=[256, 1024], premium_specs=["th=2.55", "de=1.56", "sw=1.94"], config=config
    )
    rep = write_budget_report(
        inputs.scores, inputs.premiums, out_dir=tmp_path / "rep", budgets=inputs.budgets, arms=inputs.arms
    )
    assert "report.html" in rep.files
    page = (tmp_path / "rep" / "report.html").read_text("utf-8")
    traces = re.search(r'<script type="application/json" id="traces-data">(.*?)</script>', page, re.S)
    assert traces is not None and json.loads(traces.group(1)) == []
    assert 'id="tv-trace"' not in page  # no trace picker
    note = re.sub(r"\s+", " ", re.search(r'<p id="tv-none">(.*?)</p>', page, re.S).group(1))
    assert "mindcap-tok report --ledger LEDGER" in note and "mindcap-tok view LEDGER" in note
    figures = json.loads(re.search(r'id="figures-data">(.*?)</script>', page, re.S).group(1))
    sweep = pd.read_csv(tmp_path / "rep" / "sweep.csv")
    replay = sweep[sweep["design"] == "replay"]
    plotted = {
        (t["meta"]["metric"], t["meta"]["lang"], x): y
        for spec in figures.values()
        for t in spec["data"]
        if t["meta"]["design"] == "replay" and t["meta"]["metric"] in ("delta", "gap") and "band" not in t["meta"]
        for x, y in zip(t["x"], t["y"], strict=True)
    }
    expected = {
        (m, r.lang, r.budget): 100 * getattr(r, m)
        for r in replay.itertuples()
        for m in ("delta", "gap")
        if not pd.isna(getattr(r, m)) and not (m == "delta" and r.beyond_cap)
    }
    assert plotted.keys() == expected.keys() and len(expected) >= 6
    assert plotted == pytest.approx(expected)
    assert any(v != 0 for v in expected.values())
