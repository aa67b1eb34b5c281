"""Retokenizing with tiktoken and SentencePiece tokenizers (gpt-4o, Gemma 3, Llama 2).

References: each prefix's byte length and score come from decoding the prefix with the tokenizer's own
library and parsing it; decode_traces is checked against the original text.
"""

from __future__ import annotations

import pytest

from mindcap_tok.adaptation.retokenize import Scoring, decode_traces, retokenize
from mindcap_tok.tasks.answers import get_parser
from mindcap_tok.tokenization.load import load_tokenizer

NAMES = ["gpt-4o", "gemma-3", "llama-2"]


@pytest.fixture(scope="module")
def texts(config) -> list[str]:
    root = config.data_dir.value / "flores200" / "devtest"
    out = []
    for k, code in enumerate(("tha_Thai", "eng_Latn")):
        lines = (root / f"{code}.devtest").read_text(encoding="utf-8").splitlines()[:12]
        out += [f"{line}\n#### {100 + i + 50 * k}\n{line[:20]}" for i, line in enumerate(lines)]
    return out


@pytest.mark.parametrize("name", NAMES)
def test_retokenize_prefixes_equal_decoding(config, texts, name):
    tok = load_tokenizer(name, config.tokenizers_dir.value)
    golds = [100 + i % 12 + 50 * (i // 12) for i in range(len(texts))]
    golds[3] += 1  # one wrong answer
    budgets = [1, 2, 5, 10, 20, 40, 80, 500]
    res = retokenize(texts, tok, budgets=budgets, scoring=Scoring(golds, complete=[True] * len(texts)))
    parser = get_parser("strict")
    checked = 0
    for t, text in enumerate(texts):
        ids = tok.encode(text)
        assert res.n_tokens[t] == len(ids) and res.total_bytes[t] == len(text.encode("utf-8"))
        for j, b in enumerate(budgets):
            prefix = tok.decode(ids[:b])
            if "\ufffd" not in prefix:  # a cut inside a character: libraries differ in the U+FFFD they write
                assert res.prefix_bytes[t, j] == len(prefix.encode("utf-8")), (t, b)
                checked += 1
            assert res.scores[t, j] == int(parser.parse(prefix, complete=b >= len(ids)) == golds[t]), (t, b)
        assert res.correct[t] == int(t != 3)
    assert checked > len(texts) * len(budgets) // 2


@pytest.mark.parametrize("name", NAMES)
def test_decode_traces_drops_special_tokens(config, name):
    tok = load_tokenizer(name, config.tokenizers_dir.value)
    text = "สวัสดี hello\n#### 5"
    eos = max(tok.special_ids) if tok.family == "tiktoken" else 1
    assert decode_traces(tok, [[*tok.encode(text), eos]]) == [text]
