"""report.html in a real browser: Debian's headless chromium, driven by Playwright, opens the demo report's page
from disk with every request that is not a file recorded and refused; no console error and no failed or outside
request is allowed; the plotted Δ_L and gap values equal ``sweep --format json`` for the same ledger; a selected
trace's marks sit at B, floor(r·B) (the sweep's scaled budget) and the first answer position E, which the test
finds by decoding and parsing every prefix with the tokenizer's own library (tests/score_reference.py); a
header click sorts its table; the screenshots are not blank."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from mindcap_tok.cli.main import cli
from mindcap_tok.demo.ledger import build_demo
from mindcap_tok.store import Ledger
from mindcap_tok.tasks.answers import get_parser
from score_reference import reference_scores

pytestmark = pytest.mark.slow

#: the demo's premiums given by hand (the paper's), few resamples: the page's numbers, not their precision, matter
OPTIONS = ["--premiums", "de=1.56", "--premiums", "th=2.55", "--premiums", "sw=1.94", "--n-boot", "100"]
OPTIONS += ["--budgets", "64,128,256,512"]


def _run(args: list) -> str:
    res = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory, qwen, config):
    root = tmp_path_factory.mktemp("page")
    demo = build_demo(root / "demo", 3, n_items=30, k=2, tokenizer=qwen, data_dir=config.data_dir.value)
    _run(["report", "--ledger", demo.ledger, *OPTIONS, "--out-dir", root / "rep"])
    sweep = json.loads(_run(["sweep", "--ledger", demo.ledger, *OPTIONS, "--format", "json"]))
    return demo.ledger, root / "rep" / "report.html", sweep


def _key(values: dict) -> tuple:
    """A row's or a curve's identity (numbers as floats: the JSON and the page spell 256 and 256.0 alike)."""
    cols = ("model", "lang", "task", "design", "cap", "announced", "announce_style", "forcing")
    norm = [values.get(c) for c in cols]
    return tuple(float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v for v in norm)


#: the columns that tell a record apart (the ledger's key)
KEYS = ("model", "arm", "lang", "task", "design", "cap", "announced", "announce_style", "forcing", "item", "sample")


def _plain(value):
    """A key value as the page's JSON and the ledger both give it: missing as None, numbers as floats."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, bool | str):
        return value
    return float(value)


def _not_blank(path: Path) -> None:
    pixels = np.asarray(Image.open(path).convert("L"), dtype=np.float64)
    assert pixels.std() > 10, f"{path} looks blank (pixel std {pixels.std():.1f})"


def test_the_page_shows_the_sweep_and_marks_traces_where_the_ledger_says(report, qwen, tmp_path):
    from playwright.sync_api import sync_playwright

    ledger, page_path, sweep = report
    shots = tmp_path / "screenshots"  # kept under pytest's basetemp, to look at
    browser_path = shutil.which("chromium")
    assert browser_path, "Debian's chromium is not installed (scripts/test-all.sh installs it)"
    assert page_path.stat().st_size < 10_000_000
    outside, failed, errors = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: failed.append(r.url))

        def route(r):
            if r.request.url.startswith("file:"):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.goto(page_path.as_uri())
        page.wait_for_function("document.querySelectorAll('.curves .main-svg').length > 0")
        curves = page.evaluate(
            """() => Array.from(document.querySelectorAll('.curves')).flatMap((gd) => gd.data
                 .filter((t) => t.meta && !t.meta.band && ['delta', 'gap', 'accuracy'].includes(t.meta.metric))
                 .map((t) => ({meta: t.meta, x: Array.from(t.x), y: Array.from(t.y)})))"""
        )
        shots.mkdir()
        page.locator("#curves").screenshot(path=shots / "report_curves.png")
        page.select_option("#tv-lang", "tha_Thai")
        page.select_option("#tv-arm", "native")
        page.select_option("#tv-budget", "128")
        page.check("#tv-window")
        page.wait_for_selector("#tv-marks tbody tr")
        facts = page.evaluate(
            "() => Object.fromEntries(Array.from(document.querySelectorAll('#tv-facts tr'))"
            ".map((r) => [r.cells[0].textContent, r.cells[1].textContent]))"
        )
        marks = page.evaluate(
            "() => Array.from(document.querySelectorAll('#tv-marks tbody tr'))"
            ".map((r) => ({kind: r.dataset.mark, pos: Number(r.dataset.pos), score: r.cells[2].textContent}))"
        )
        drawn = page.evaluate(
            """() => { let before = ''; const out = [];
                 for (const el of document.getElementById('tv-text').children) {
                   if (el.classList.contains('tv-mark')) out.push({kind: el.dataset.mark, before});
                   else before += el.textContent; }
                 return out; }"""
        )
        page.locator("#traces").screenshot(path=shots / "report_traces.png")
        # the outcome filter "cut", every language and arm: the traces it lists in each cell, and every trace's key
        page.uncheck("#tv-window")
        page.select_option("#tv-lang", "(all)")
        page.select_option("#tv-arm", "(all)")
        page.select_option("#tv-outcome", "cut")
        listed_cut = page.evaluate(
            """() => { const cell = document.getElementById('tv-cell'), out = [];
                 for (const o of Array.from(cell.options)) {
                   cell.value = o.value; cell.dispatchEvent(new Event('change'));
                   out.push(...Array.from(document.getElementById('tv-trace').options).map((t) => Number(t.value))); }
                 return out; }"""
        )
        embedded = page.evaluate(
            f"() => JSON.parse(document.getElementById('traces-data').textContent)"
            f".map((t) => {json.dumps(list(KEYS))}.map((k) => t[k] === undefined ? null : t[k]))"
        )
        page.locator("#tables").screenshot(path=shots / "report_tables.png")
        page.click('table[data-table="sweep"] th:text-is("delta")')
        sorted_delta = page.evaluate(
            """() => { const t = document.querySelector('table[data-table="sweep"]');
                 const col = Array.from(t.tHead.rows[0].cells).findIndex((c) => c.textContent === 'delta');
                 return Array.from(t.tBodies[0].rows).map((r) => r.cells[col].dataset.v)
                   .filter((v) => v !== undefined).map(Number); }"""
        )
        browser.close()
    assert not errors and not failed and not outside, (errors, failed, outside)
    assert len(sorted_delta) > 10 and sorted_delta == sorted(sorted_delta)  # a header click sorts its column

    # the plotted Δ_L and gap equal the sweep's JSON, row for row, and nothing is drawn beyond a cell's cap
    rows = [r for r in sweep["rows"] if r.get("cap_status", "within") == "within"]
    for metric, col in (("delta", "delta"), ("gap", "gap")):
        plotted = {
            (_key(c["meta"]), x): y
            for c in curves
            if c["meta"]["metric"] == metric
            for x, y in zip(c["x"], c["y"], strict=True)
        }
        want = {(_key(r), float(r["budget"])): 100 * r[col] for r in rows if r.get(col) is not None}
        assert len(want) > 10 and set(plotted) == set(want), metric
        for k, v in want.items():
            assert plotted[k] == pytest.approx(v, abs=1e-9), (metric, k)
    for c in curves:
        assert max(c["x"]) <= c["meta"]["cap"], c["meta"]

    # the selected trace: its record, decoded and parsed prefix by prefix, places B, floor(r·B) and E
    item, sample = (int(v) for v in facts["item · sample"].split(" · "))
    parts = facts["cell"].split(" · ")  # model · arm · lang · task · design [· announced N (style)] · cap C
    announced = int(parts[5].split()[1]) if parts[5].startswith("announced") else None
    table = Ledger(ledger).read(arm="native", lang="tha_Thai").to_pandas()
    same = table["announced"].isna() if announced is None else table["announced"].eq(announced)
    rec = table[table["item"].eq(item) & table["sample"].eq(sample) & table["design"].eq(parts[4]) & same]
    assert len(rec) == 1, facts
    rec = rec.iloc[0]
    scaled = {r["budget"]: r["scaled_budget"] for r in sweep["rows"] if r["lang"] == "tha_Thai"}
    b, rb = 128, scaled[128]
    decode = lambda ids: qwen.tokenizer.decode(list(ids), skip_special_tokens=True)  # noqa: E731
    frame = table.loc[[rec.name], ["output_ids", "gold", "finish_reason"]]
    ref_scores, ref_emission, _ = reference_scores(decode, frame, [b, rb], "strict")
    by_kind = {m["kind"]: m for m in marks}
    assert by_kind["B"]["pos"] == b and by_kind["rB"]["pos"] == rb and by_kind["E"]["pos"] == ref_emission[0]
    assert [by_kind["B"]["score"], by_kind["rB"]["score"]] == [str(s) for s in ref_scores[0]] == ["0", "1"]
    assert by_kind["cap"]["pos"] == rec["cap"]
    ids = list(rec["output_ids"])
    for mark in drawn:  # the text before each mark drawn in the trace is the decoded prefix up to its token
        pos = by_kind[mark["kind"]]["pos"]
        assert decode(ids[:pos]).rstrip("\ufffd") == mark["before"], mark["kind"]
    assert {m["kind"] for m in drawn} >= {"B", "E"}
    # "cut" lists exactly the shown traces whose ledger record the cap cut (finish reason length) and whose whole
    # output, decoded with the tokenizer's library and parsed, is wrong (the answer at the cap)
    parser = get_parser("strict")
    records = Ledger(ledger).read().to_pandas()
    by_key = {tuple(_plain(r[k]) for k in KEYS): r for r in records.to_dict("records")}
    want_cut = set()
    for i, key in enumerate(embedded):
        r = by_key[tuple(_plain(v) for v in key)]
        answer = parser.parse(decode(r["output_ids"]), complete=False)
        if r["finish_reason"] == "length" and not (answer is not None and parser.correct(answer, r["gold"])):
            want_cut.add(i)
    assert 0 < len(want_cut) < len(embedded) and len(listed_cut) == len(set(listed_cut))
    assert set(listed_cut) == want_cut
    for name in ("report_curves.png", "report_traces.png", "report_tables.png"):
        _not_blank(shots / name)
