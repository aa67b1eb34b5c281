"""Pricing ledgers whose ids come from tiktoken or SentencePiece tokenizers (gpt-4o, Gemma 3, Llama 2).

Retokenizing with the base itself must reproduce the accuracy of decoding and parsing every stored prefix
(computed here with the tokenizer's own library); every family can learn an extension on the traces and price
with it (the SentencePiece learner itself is tested in test_extend_sp.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from mindcap_tok.adaptation.price import GivenFolds, LearnedFolds, PriceSettings, price_ledger
from mindcap_tok.adaptation.retokenize import FoldTokenizer
from mindcap_tok.resample import Resampling
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tasks.answers import get_parser
from mindcap_tok.tokenization.load import load_tokenizer

NAMES = ["gpt-4o", "gemma-3", "llama-2"]
CAP = 24


@pytest.fixture(scope="module")
def lines(config) -> dict[str, list[str]]:
    root = config.data_dir.value / "flores200" / "devtest"
    return {c: (root / f"{c}.devtest").read_text(encoding="utf-8").splitlines()[:10] for c in ("tha_Thai", "eng_Latn")}


def _records(tok, lines) -> list[dict]:
    eos = max(tok.special_ids) if tok.family == "tiktoken" else 1
    out = []
    for arm, code in (("native", "tha_Thai"), ("translate-act", "eng_Latn")):
        for item in range(10):
            for sample in range(2):
                line = lines[code][item]
                value = 7 if (item + sample) % 3 else 8  # gold 7: every third trace is wrong
                text = f"{line[: 8 + 9 * item]}\n#### {value}"  # longer with the item: late answers pass the cap
                ids = [*tok.encode(text), eos]
                out.append(
                    {
                        "model": tok.name,
                        "arm": arm,
                        "lang": "tha_Thai",
                        "item": item,
                        "sample": sample,
                        "seed": sample,
                        "cap": 4096,
                        "prompt": "q",
                        "prompt_ids": [3],
                        "output_ids": ids,
                        "text": text,
                        "finish_reason": "stop",
                        "gold": 7,
                        "generator": "hand",
                        "tokenizer": tok.name,
                    }
                )
    return out


def _reference_accuracy(tok, records, arm: str, cap: int) -> float:
    """Mean over items of the mean strict score of the first ``cap`` tokens, by decoding them."""
    parser = get_parser("strict")
    per_item: dict[int, list[int]] = {}
    for r in records:
        if r["arm"] != arm:
            continue
        ids = tok.encode(r["text"])
        value = parser.parse(tok.decode(ids[:cap]), complete=cap >= len(ids))
        per_item.setdefault(r["item"], []).append(int(value == r["gold"]))
    return float(np.mean([np.mean(v) for v in per_item.values()]))


@pytest.mark.parametrize("name", NAMES)
def test_price_any_family_with_base_as_retokenizer(tmp_path, config, lines, name):
    tok = load_tokenizer(name, config.tokenizers_dir.value)
    records = _records(tok, lines)
    led = Ledger(tmp_path / "L")
    led.append(records, tok)
    p = price_ledger(
        led,
        name,
        lang="th",
        caps=[CAP],
        extension=GivenFolds([FoldTokenizer(tok)]),
        settings=PriceSettings(resampling=Resampling(50), tokenizer=tok),
    )
    row = p.rows[0]
    want_native = _reference_accuracy(tok, records, "native", CAP)
    want_translate = _reference_accuracy(tok, records, "translate-act", CAP)
    assert want_native > 0 and want_native < 2 / 3 and want_translate > 0  # some answers pass the cap, some are wrong
    assert row.acc_native == pytest.approx(want_native) and row.acc_native_ext == pytest.approx(want_native)
    assert row.acc_translate == pytest.approx(want_translate)
    assert row.acc_native_max == pytest.approx(_reference_accuracy(tok, records, "native", 10_000))
    learned = price_ledger(  # every family is extendable: learning on the traces prices like any extension
        led,
        name,
        lang="th",
        caps=[CAP],
        extension=LearnedFolds(size=3),
        settings=PriceSettings(resampling=Resampling(50), tokenizer=tok),
    )
    assert learned.rows[0].acc_native == pytest.approx(want_native)
