"""Prefix scoring for every tokenizer family (Gemma 3, Llama 2 SentencePiece; gpt-4o tiktoken).

The reference is independent of the byte table: decode every prefix with the tokenizer's own library
(special tokens dropped, as ``skip_special_tokens=True``) and parse it. Traces are real FLORES devtest
Thai and English lines with planted ``#### <n>`` answer lines, byte-fallback / single-byte tokens, special
tokens, random ids and the leading-space cases of Llama 2's dummy prefix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mindcap_tok.scoring.score import score_ledger, score_prefixes
from mindcap_tok.tokenization.byte_tables import byte_table
from mindcap_tok.tokenization.load import load_tokenizer
from score_reference import assert_equals_reference, reference_scores, trace_frame

NAMES = ["gemma-3", "llama-2", "gpt-4o"]
THAI_DIGITS = str.maketrans("0123456789", "๐๑๒๓๔๕๖๗๘๙")


@pytest.fixture(scope="module")
def lines(config) -> list[str]:
    root = config.data_dir.value / "flores200" / "devtest"
    return [
        line
        for code in ("tha_Thai", "eng_Latn")
        for line in (root / f"{code}.devtest").read_text(encoding="utf-8").splitlines()[:60]
    ]


def _byte_ids(tok, data: bytes) -> list[int]:
    """One token per byte: SentencePiece ``<0xNN>`` pieces, tiktoken's single-byte ranks."""
    if tok.family == "sentencepiece":
        return [tok.backend.sp.piece_to_id(f"<0x{b:02X}>") for b in data]
    return [tok.backend.enc.encode_single_token(bytes([b])) for b in data]


def _soup(tok, rng, k: int) -> list[int]:
    """Random ordinary ids (tiktoken: ranks only; ids between the ranks and the specials are unused)."""
    hi = tok.backend.enc.max_token_value - len(tok.backend.specials) if tok.family == "tiktoken" else tok.vocab_size
    return [int(x) for x in rng.integers(0, hi, k)]


def _trace(tok, rng, kind: int, lines: list[str]) -> tuple[list[int], int, str]:
    gold = int(rng.integers(1, 300_000))
    body = lines[int(rng.integers(len(lines)))][: int(rng.integers(20, 120))]
    special = sorted(tok.special_ids)
    eos = special[int(rng.integers(len(special)))]
    enc = tok.encode
    if kind == 0:  # the answer first: Llama 2's first token "▁####" or "####" loses / keeps its space
        ids = enc(f"#### {gold}\n{body}")
    elif kind == 1:  # a leading space as the first token, then the answer line
        ids = enc(f" #### {gold}\n{body}")
    elif kind == 2:  # a special token first, then text
        ids = [eos, *enc(f"#### {gold}\n{body}")]
    elif kind == 3:  # a byte token for a space first
        ids = _byte_ids(tok, b" ") + enc(f"#### {gold}\n{body}")
    elif kind == 4:  # late answer, no final newline
        ids = enc(f"{body}\n#### {gold}")
    elif kind == 5:  # wrong, then right
        ids = enc(f"{body}\n#### {gold + 1}\n{body[:30]}\n#### {gold}\n")
    elif kind == 6:  # native digits, byte by byte: cuts inside 3-byte characters
        ids = enc(body + "\n") + _byte_ids(tok, f"#### {str(gold).translate(THAI_DIGITS)}\n".encode())
    elif kind == 7:  # the answer line one byte per token, Thai right after the number
        ids = enc(body) + _byte_ids(tok, f"\n#### {gold}บาท\n".encode())
    elif kind == 8:  # token soup with an answer line planted
        ids = _soup(tok, rng, int(rng.integers(1, 30))) + enc(f"\n#### {gold}\n") + _soup(tok, rng, 10)
    elif kind == 9:  # CRLF lines and a distractor
        ids = enc(f"{body}\r\n#### -{gold}x\r\n#### {gold}\r\n")
    elif kind == 10:  # the answer inside a sentence and an unfinished line at the end
        ids = enc(f"{body} #### {gold}\nso\n#### {gold}0")
    else:  # a lone space token first, then an answer line at once
        ids = enc(" ") + enc(f"#### {gold}\n")
    finish = "stop" if rng.random() < 0.6 else "length"
    if finish == "stop" and rng.random() < 0.7:
        ids = [*ids, eos]
    return ids, gold, finish


def _frame(tok, lines: list[str], n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return trace_frame(tok, (_trace(tok, rng, i % 12, lines) for i in range(n)))


def _reference(tok, frame: pd.DataFrame, budgets: list[int], parser: str):
    """Decode every prefix with the tokenizer's library, special ids dropped, and parse it."""
    special = tok.special_ids
    return reference_scores(lambda ids: tok.decode([i for i in ids if i not in special]), frame, budgets, parser)


@pytest.fixture(scope="module", params=NAMES)
def case(request, config, lines):
    tok = load_tokenizer(request.param, config.tokenizers_dir.value)
    return tok, _frame(tok, lines, 96, seed=NAMES.index(request.param) + 21)


def test_llama2_dummy_prefix_by_hand(config):
    """Hand-checked: Llama 2 encodes "#### 5" as ▁####, ▁, 5 and decodes it without the leading space."""
    tok = load_tokenizer("llama-2", config.tokenizers_dir.value)
    sp = tok.backend.sp
    ids = tok.encode("#### 5")
    assert [sp.id_to_piece(i) for i in ids] == ["▁####", "▁", "5"]
    table = byte_table(tok)
    assert table.decode(ids) == b"#### 5"
    assert table.token_ends(ids).tolist() == [4, 5, 6]
    assert table.decode([1, *ids]) == b"#### 5"  # <s> adds no text and the first text token still loses its space
    byte_space = sp.piece_to_id("<0x20>")
    assert table.decode([byte_space, *ids]) == b"  #### 5"  # a byte piece keeps it; the next token is not first
    gemma = byte_table(load_tokenizer("gemma-3", config.tokenizers_dir.value))
    assert gemma.first is None and gemma.decode([1902]) == b" world"  # "▁world": no dummy prefix, space kept


@pytest.mark.parametrize("parser", ["strict", "last", "terminated", "native-digits"])
def test_scorer_equals_decoding_every_prefix_all_families(case, parser):
    tok, frame = case
    budgets = list(range(1, int(frame["output_ids"].map(len).max()) + 2))
    reference = _reference(tok, frame, budgets, parser)
    ref_scores, ref_emission, _ = reference
    assert ref_scores.sum() > 0 and np.isfinite(ref_emission).sum() > 20
    assert_equals_reference(score_ledger(frame, tok, budgets=budgets, parser=parser), reference)
    table = byte_table(tok)
    texts = [table.decode(ids) for ids in frame["output_ids"]]
    special = tok.special_ids
    checked = 0
    for ids, text in zip(frame["output_ids"], texts, strict=True):  # the table's bytes are the decoded text
        ref = tok.decode([i for i in ids if i not in special])
        if "\ufffd" not in ref:  # (invalid UTF-8: libraries differ in how many U+FFFD they write)
            assert text == ref.encode("utf-8")
            checked += 1
    assert checked > len(frame) // 2
    ends = [table.token_ends(ids) for ids in frame["output_ids"]]
    via_text = score_prefixes(
        texts,
        ends,
        golds=frame["gold"].tolist(),
        budgets=budgets,
        parser=parser,
        complete=(frame["finish_reason"] == "stop").to_numpy(),
    )
    np.testing.assert_array_equal(via_text.scores, ref_scores)
    np.testing.assert_array_equal(via_text.emission, ref_emission)
