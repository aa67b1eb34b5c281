"""JSONL import with SentencePiece (Gemma 3, Llama 2) ids: vocabulary check, retokenizing from text, scoring.

Golden ids are sentencepiece's pieces for "hello world\\n#### 5", checked by hand piece by piece (README:
"hello world" -> Gemma 3 [23391, 1902], Llama 2 [22172, 3186]); file hashes are the README's.
"""

from __future__ import annotations

import json

import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.ingest.jsonl import import_jsonl
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

TEXT = "hello world\n#### 5"
# Gemma 3: hello ▁world \n #### ▁ 5 ; Llama 2 (dummy prefix): ▁hello ▁world <0x0A> #### ▁ 5
GEMMA_IDS = [23391, 1902, 107, 2595, 236743, 236810]
LLAMA2_IDS = [22172, 3186, 13, 4136, 29871, 29945]


@pytest.fixture(scope="module")
def sp_toks(config):
    return {n: load_tokenizer(n, config.tokenizers_dir.value) for n in ("gemma-3", "llama-2")}


def _row(model: str, item: int, **kw) -> dict:
    row = {
        "model": model,
        "arm": "native",
        "lang": "tha_Thai",
        "item": item,
        "sample": 0,
        "seed": 1,
        "cap": 64,
        "announced": None,
        "prompt": "Question?",
        "text": TEXT,
        "finish_reason": "stop",
        "gold": 5,
        "generator": "test",
    }
    row.update(kw)
    return row


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_golden_pieces(sp_toks):
    assert [sp_toks["gemma-3"].backend.sp.id_to_piece(i) for i in GEMMA_IDS] == [
        "hello",
        "▁world",
        "\n",
        "####",
        "▁",
        "5",
    ]
    assert [sp_toks["llama-2"].backend.sp.id_to_piece(i) for i in LLAMA2_IDS] == [
        "▁hello",
        "▁world",
        "<0x0A>",
        "####",
        "▁",
        "5",
    ]


def test_import_sentencepiece_ids_and_text(tmp_path, sp_toks, config):
    rows = [
        _row("gemma-3", 0, output_ids=GEMMA_IDS, prompt_ids=[2]),  # ids given
        _row("gemma-3", 1),  # text only: encoded with Gemma 3
        _row("llama-2", 0, output_ids=LLAMA2_IDS, prompt_ids=[1]),
        _row("llama-2", 1),  # text only: encoded with Llama 2 (its dummy prefix makes "▁hello")
    ]
    res = import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L", tokenizers_dir=config.tokenizers_dir.value)
    assert (res.read, res.added, res.retokenized) == (4, 4, 2)
    led = Ledger(tmp_path / "L")
    assert led.verify().ok
    frame = led.to_pandas().sort_values(["model", "item"]).reset_index(drop=True)
    assert [list(x) for x in frame["output_ids"]] == [GEMMA_IDS, GEMMA_IDS, LLAMA2_IDS, LLAMA2_IDS]
    assert frame["retokenized"].tolist() == [False, True, False, True]
    assert frame["tokenizer"].tolist() == ["gemma-3"] * 2 + ["llama-2"] * 2
    entries = led.tokenizers()
    assert entries["gemma-3"]["vocab_size"] == 262144 and entries["llama-2"]["vocab_size"] == 32000
    assert entries["gemma-3"]["sha256"].startswith("1299c11d") and entries["llama-2"]["sha256"].startswith("9e556afd")
    # scored by hand: the 6th token "5" completes "#### 5" (Llama 2's first "▁hello" decodes as "hello")
    scores = score_ledger(frame, sp_toks, budgets=[5, 6])
    assert scores.by_budget["score"].tolist() == [0, 1] * 4
    assert scores.by_record["emission"].tolist() == [6.0] * 4


@pytest.mark.parametrize(("model", "bad"), [("llama-2", 32000), ("gemma-3", 262144)])
def test_import_rejects_ids_outside_the_vocabulary(tmp_path, config, model, bad):
    rows = [_row(model, 0, output_ids=[bad - 1, bad])]
    with pytest.raises(MindcapError, match=rf"outside the vocabulary of {model} \({bad} ids\)"):
        import_jsonl(_jsonl(tmp_path / "bad.jsonl", rows), tmp_path / "L", tokenizers_dir=config.tokenizers_dir.value)
