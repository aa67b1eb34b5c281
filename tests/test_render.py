"""`render`: English renderings of native traces with the tiny real model (transformers), read by `audit`.

r_trace is checked against an independent count: the ledger tokenizer's tokenizer.json loaded with the HF
``tokenizers`` library directly, over the texts as the renderings file and the ledger hold them."""

from __future__ import annotations

import json
import unicodedata

import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.ledger import Ledger

torch = pytest.importorskip("torch", reason="the transformers backend needs the torch extra")

THAI = ["ขั้นที่ 1: คิด {i}\nดังนั้นคำตอบคือ {v}\n#### {v}\n", "โจทย์ {i}: ไข่ {v} ฟอง\n#### {v}\n"]


@pytest.fixture
def ledger(tmp_path, qwen):
    recs = []
    for item in range(3):
        for sample in range(2):
            text = THAI[sample].format(i=item, v=item + 10)
            recs.append(make_record(qwen, text, item=item, sample=sample, gold=item + 10))
            recs.append(make_record(qwen, "#### 10\n", arm="translate-act", item=item, sample=sample, gold=10))
    Ledger(tmp_path / "led").append(recs, qwen)
    return tmp_path / "led", recs


def _render(ledger, tiny, out, *extra):
    args = ["render", "--ledger", str(ledger), "--out-dir", str(out), "--model", str(tiny), "--backend",
            "transformers", "--max-tokens", "8", "--wave-size", "4", "--seed", "3", "--temperature", "1",
            *extra]  # fmt: skip
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_render_then_audit_gives_r_trace(tmp_path, tiny, ledger, qwen):
    led, recs = ledger
    out = tmp_path / "rend"
    res = _render(led, tiny, out, "--keep-capped")
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in (out / "renderings.jsonl").read_text("utf-8").splitlines()]
    # six native traces in two waves of at most four; translate-act traces are not rendered
    assert sorted((r["item"], r["sample"]) for r in rows) == [(i, s) for i in range(3) for s in range(2)]
    assert {r["lang"] for r in rows} == {"tha_Thai"} and {r["model"] for r in rows} == {"qwen3-8b"}
    assert sorted(p.name for p in (out / "waves").iterdir()) == ["wave-0001.parquet", "wave-0002.parquet"]
    kept = [r for r in rows if r["english"].strip()]

    res = CliRunner().invoke(
        cli,
        ["audit", "--ledger", str(led), "--only", "normalizer", "--renderings", str(out / "renderings.jsonl"),
         "--premiums", "th=2", "--budgets", "8,16", "--n-boot", "200", "--out-dir", str(tmp_path / "aud")],
        catch_exceptions=False,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    audit = json.loads((tmp_path / "aud" / "audit.json").read_text("utf-8"))
    (norm,) = [a for a in audit["audits"] if a["name"] == "normalizer"]
    (trace,) = norm["tables"]["trace_premium"]
    # independent count: the tokenizer file itself, NFC, no special tokens
    tok = Tokenizer.from_file(str(qwen.source))
    native = {(r["item"], r["sample"]): r["text"] for r in recs if r["arm"] == "native"}

    def count(text: str) -> int:
        return len(tok.encode(unicodedata.normalize("NFC", text), add_special_tokens=False).ids)

    num = sum(count(native[(r["item"], r["sample"])]) for r in kept)
    den = sum(count(r["english"]) for r in kept)
    assert trace["native_tokens"] == num and trace["english_tokens"] == den and trace["traces"] == len(kept)
    assert trace["r_trace"] == pytest.approx(num / den)
    assert trace["ci_low"] <= trace["r_trace"] <= trace["ci_high"]
    delta = [d for d in norm["tables"]["delta"] if d["normalizer"] == "trace"]
    assert delta and delta[0]["premium"] == pytest.approx(num / den) and "ci_low" in delta[0]


def test_rerun_resumes_and_capped_renderings_are_left_out(tmp_path, tiny, ledger):
    led, _ = ledger
    out = tmp_path / "rend"
    assert _render(led, tiny, out, "--keep-capped").exit_code == 0
    waves = {p.name: p.read_bytes() for p in (out / "waves").iterdir()}
    kept = (out / "renderings.jsonl").read_text("utf-8")
    res = _render(led, tiny, out)  # the same run without --keep-capped: nothing decoded again
    assert res.exit_code == 0, res.output
    assert "2 waves were done" in res.output
    assert {p.name: p.read_bytes() for p in (out / "waves").iterdir()} == waves
    # random weights never stop within 8 tokens: every rendering hit the cap, so none is written by default
    assert "rendered 0 of 6" in res.output and "6 hit the cap" in res.output
    assert kept.count("\n") == 6 and (out / "renderings.jsonl").read_text("utf-8") == ""
    res = _render(led, tiny, out, "--seed", "4")
    assert res.exit_code != 0 and "another render run" in res.output
