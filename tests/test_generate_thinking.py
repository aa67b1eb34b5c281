"""Reasoning models through the transformers backend: a tiny random Qwen3 whose tokenizer has Qwen3's ``<think>``
and ``</think>`` added tokens; the thinking switch, the channel stored per record, forcing that closes a thought,
and thinking and instruct records as different cells."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mindcap_tok.cli.main import main
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.generate import run_job
from mindcap_tok.generation.jobs import load_spec, parse_spec
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.store.ledger import Ledger

torch = pytest.importorskip("torch", reason="the transformers backend needs the torch extra")


@pytest.fixture(scope="module")
def tiny(tiny_think):
    """The thinking model of conftest.py: every test here reads its ``<think>`` tokens."""
    return tiny_think


@pytest.fixture(scope="module")
def backend(tiny):
    from mindcap_tok.generation.backends import load_backend

    return load_backend("transformers", str(tiny), tokenizer_name="tiny-think")


def spec_data(tiny, **kw) -> dict:
    data = {
        "name": "think",
        "model": str(tiny),
        "model_name": "tiny-think",
        "arms": ["native"],
        "langs": ["deu_Latn"],
        "items": [0, 1, 2],
        "k": 2,
        "design": "replay",
        "caps": [6],
        "seed": 3,
        "thinking": True,
        "sampling": {"temperature": 1.0},
    }
    return data | kw


def test_the_switch_in_the_spec(tiny, tmp_path):
    on, off = parse_spec(spec_data(tiny)), parse_spec(spec_data(tiny, thinking=False))
    assert on.thinking and on.as_dict()["thinking"] is True
    assert "thinking" not in off.as_dict() and "think_close" not in off.as_dict()  # manifests as before
    with pytest.raises(MindcapError, match="thinking: must be of type bool, got 1"):
        parse_spec(spec_data(tiny, thinking=1))
    with pytest.raises(MindcapError, match="think_close applies to thinking = true only"):
        parse_spec(spec_data(tiny, thinking=False, think_close="</r>"))
    path = tmp_path / "job.toml"
    path.write_text(f'model = "{tiny}"\narms = ["native"]\nlangs = ["de"]\ndesign = "replay"\nthinking = true\n')
    assert not load_spec(path, thinking=False).thinking and load_spec(path).thinking


def _greedy(backend, seq: list[int], n: int) -> list[int]:
    """The model's argmax continuation, stopped at a newline token, EOS or ``n`` tokens."""
    out, newlines = [], set(backend.tok.newline_ids())
    for _ in range(n):
        with torch.no_grad():
            nxt = int(backend.model(torch.tensor([seq])).logits[0, -1].argmax())
        out.append(nxt)
        seq = [*seq, nxt]
        if nxt in newlines or nxt in backend.eos:
            break
    return out


def test_thinking_records_and_forcing_that_closes_the_thought(tmp_path, tiny, backend, config):
    spec = parse_spec(spec_data(tiny, forcing={"enabled": True, "max_tokens": 2}))
    run_job(spec, tmp_path / "L", backend=backend, data_dir=config.data_dir.value)
    hf = backend.tok.hf
    close = hf.convert_tokens_to_ids("</think>")
    forced = backend.tok.encode("\n####")
    rows = Ledger(tmp_path / "L").read().to_pylist()
    assert rows and all(r["thinking"] for r in rows)
    # the prompt as the template renders it with thinking on: no empty think block (Qwen3's thinking-off marker)
    user = rows[0]["prompt"].split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]
    want = hf.apply_chat_template(
        [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    assert rows[0]["prompt"] == want and "</think>" not in want
    seen = set()
    for r in rows:
        ids = r["output_ids"]
        assert r["think_end"] == (ids.index(close) if close in ids else None)
        if r["finish_reason"] != "length":
            assert not r["forced_think_close"]
            continue
        body = ids[:6]
        inside = close not in body
        seen.add(inside)
        assert r["forced_think_close"] == inside
        appended = [close] if inside else []
        assert ids[6 : 6 + len(appended) + len(forced)] == appended + forced
        head = ids[: 6 + len(appended) + len(forced)]
        assert ids[len(head) :] == _greedy(backend, r["prompt_ids"] + head, 2)
        if inside:
            assert r["think_end"] == 6  # the closing token forcing appended
    assert True in seen, "a random 514-token model almost never writes </think> within 6 tokens"
    job = json.loads((tmp_path / "L" / "_jobs" / "think.json").read_text())
    assert job["spec"]["thinking"] is True


def test_thinking_and_instruct_records_are_different_cells(tmp_path, tiny, backend, config):
    led = tmp_path / "L"
    off = parse_spec(spec_data(tiny, name="off", thinking=False))
    run_job(off, led, backend=backend, data_dir=config.data_dir.value)
    shard = next((led).rglob("*.parquet"))
    assert pq.read_table(shard).column("thinking").to_pylist() == [False] * 6  # stored, false
    assert "thinking" not in Ledger(led).info().columns
    run_job(parse_spec(spec_data(tiny, name="on")), led, backend=backend, data_dir=config.data_dir.value)
    table = Ledger(led).read()
    assert sorted(table.column("thinking").to_pylist()) == [False] * 6 + [True] * 6  # same items, both kept
    info = Ledger(led).info()
    assert info["thinking"].tolist() == [False, True]
    assert info["thought_tokens_p50"].isna().tolist() == [True, False]
    scores = score_ledger(table, backend.tok.resolved, budgets=[2, 6])
    assert sorted(scores.by_budget["thinking"].unique().tolist()) == [False, True]


def test_cli_thinking_flag_and_reports(tmp_path, tiny, capsys):
    job = tmp_path / "job.toml"
    job.write_text(
        f'name = "j"\nmodel = "{tiny}"\nmodel_name = "tiny-think"\narms = ["native"]\nlangs = ["de"]\n'
        'items = [0, 1]\nk = 1\ndesign = "replay"\ncaps = [5]\n'
    )
    led = tmp_path / "L"
    with pytest.raises(SystemExit) as done:
        main(["generate", str(job), "--out-dir", str(led), "--backend", "transformers", "--thinking"])
    assert done.value.code == 0
    assert all(Ledger(led).read(columns=["thinking"]).column("thinking").to_pylist())
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["score", "--ledger", str(led), "--budgets", "5", "--tokenizer", str(tiny), "--format", "json"])
    assert done.value.code == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["thinking"] is True and rows[0]["thought_tokens_p50"] >= 0 and "cap_in_thought_share" in rows[0]
