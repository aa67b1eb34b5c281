"""The memoised encoder gives HF tokenizers' ids exactly: every FLORES language, every assigned code point in
several contexts, random mixed text with added tokens, non-NFC and unassigned characters; and it declines
pipelines it does not reproduce."""

from __future__ import annotations

import itertools
import json
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, normalizers

from mindcap_tok.data.flores import load_flores
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.tokenization import pretoken_cache
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.pretoken_cache import PretokenEncoder
from price_fixture import save_tiny
from tokenizer_edits import edited

REGISTRY = ["qwen3-8b", "llama-3.1-8b", "mistral-nemo", "whisper", "deepseek-v3"]


def hf_ids(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def memo_ids(enc: PretokenEncoder, texts: list[str]) -> list[list[int]]:
    flat, splits = enc.encode_flat(texts)
    return [flat[a:b].tolist() for a, b in itertools.pairwise(splits)]


@pytest.fixture(scope="module", params=REGISTRY)
def pair(request, config):
    tok = load_tokenizer(request.param, config.tokenizers_dir.value).tokenizer
    enc = PretokenEncoder.from_tokenizer(tok)
    assert enc is not None, f"{request.param}'s pipeline should be covered"
    return tok, enc


def test_every_flores_language(pair, flores_dir):
    tok, enc = pair
    texts = ["\n".join(load_flores(code, "dev", source=flores_dir)[:3]) for code in flores_codes()]
    assert len(texts) == 204  # FLORES-200 has 204 language varieties
    assert memo_ids(enc, texts) == hf_ids(tok, texts)
    # a second pass reads everything from the memo
    assert memo_ids(enc, texts) == hf_ids(tok, texts)


# contexts that exercise each alternative of the split patterns: letters/digits around, a leading space or
# apostrophe (case-insensitive contractions, e.g. U+017F LONG S), whitespace runs before newlines and text
CONTEXTS = [
    "{c}",
    "a{c}b",
    " {c}",
    "{c}{c} ",
    "x {c}\n",
    "1{c}2",
    "'{c}",
    "'{c}{c}",
    "\n\n{c}  {c}\r\n",
    "{c}\t ",
    "{c}Ab",
]


@pytest.mark.slow
def test_every_assigned_code_point_in_context(pair):
    tok, enc = pair
    assigned = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) not in ("Cn", "Cs")]
    for context in CONTEXTS:
        texts = ["".join(context.format(c=c) for c in assigned[lo : lo + 4000]) for lo in range(0, len(assigned), 4000)]
        assert memo_ids(enc, texts) == hf_ids(tok, texts), context


UNITS = [
    "a", "Z", "ſ", "'s", "'LL", "'re", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2028", "\u3000", "\x1c", "\x85",
    "7", "123", "٣", "½", ".", "!?", "#### ", "ก", "\u0e34", "น", "\u0e49", "ा", "ह", "e\u0301", "\u1100\u1161",
    "Å", "Å", "😀", "\u0378", "\U000e0080", "<think>", "</think>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>",
    "<|begin_of_text|>", "<s>",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.sampled_from(UNITS), max_size=40), other=st.text(max_size=20))
def test_random_mixed_text(pair, parts, other):
    tok, enc = pair
    texts = ["".join(parts), other + "".join(reversed(parts)) + other]
    assert memo_ids(enc, texts) == hf_ids(tok, texts)


def test_non_nfc_and_unassigned_text_follow_hf(qwen):
    enc = PretokenEncoder.from_tokenizer(qwen.tokenizer)
    # decomposed é and Hangul jamo are composed by Qwen3's NFC; U+0378 is unassigned (the text goes to HF whole)
    texts = ["cafe\u0301 \u1100\u1161", "x\u0378y ดี", "ok"]
    assert unicodedata.normalize("NFC", texts[0]) != texts[0]
    assert memo_ids(enc, texts) == hf_ids(qwen.tokenizer, texts)
    assert enc.encode("cafe\u0301") == enc.encode("café")  # the composed and decomposed forms: the same ids


def test_code_points_the_regex_engines_may_classify_differently_go_to_hf(config):
    # U+0295 is Ll in older Unicode tables and Lo in newer ones; Mistral-Nemo's pattern splits on Ll vs Lo
    tok = load_tokenizer("mistral-nemo", config.tokenizers_dir.value).tokenizer
    enc = PretokenEncoder.from_tokenizer(tok)
    texts = ["ʕAb ʕab", "xʕ", "plain text"]
    assert memo_ids(enc, texts) == hf_ids(tok, texts)
    memoised = enc.size
    assert memo_ids(enc, ["plain text"]) == hf_ids(tok, ["plain text"]) and enc.size == memoised  # looked up
    for text in texts[:2]:  # never memoised: HF encodes the text again, into one new row
        assert memo_ids(enc, [text]) == hf_ids(tok, [text]) and enc.size == memoised + 1
        memoised += 1


def test_memo_emptied_when_full(qwen, flores_dir, monkeypatch):
    texts = load_flores("tha_Thai", "dev", source=flores_dir)[:20]
    unbounded = PretokenEncoder.from_tokenizer(qwen.tokenizer)
    memo_ids(unbounded, texts)
    monkeypatch.setattr(pretoken_cache, "MAX_CACHED", 50)
    enc = PretokenEncoder.from_tokenizer(qwen.tokenizer)
    sizes = []
    for lo in range(0, 20, 5):
        assert memo_ids(enc, texts[lo : lo + 5]) == hf_ids(qwen.tokenizer, texts[lo : lo + 5])
        sizes.append(enc.size)
    assert sizes != sorted(sizes)  # the memo shrank on the way: emptied once full
    assert max(sizes) < unbounded.size  # so it never held every pre-token


def test_tiny_byte_level_tokenizer_is_covered(tmp_path):
    tok = save_tiny(tmp_path / "ext", extended=True).tokenizer
    enc = PretokenEncoder.from_tokenizer(tok)
    assert enc is not None
    texts = ["กากากา\n#### 7", "ab ab<|endoftext|>กา", "'s 12 ?!"]
    assert memo_ids(enc, texts) == hf_ids(tok, texts)
    assert enc.encode("กากากา") == [260, 260, 260]  # the appended merge: one token per กา


def test_an_added_token_is_not_a_pre_token_that_normalizes_to_it(tmp_path):
    # "é" as an added token matched on raw text: a decomposed e + U+0301 becomes "é" only after NFC, so HF
    # encodes it with BPE (two byte tokens), not as the added token
    tok = save_tiny(tmp_path / "base").tokenizer
    tok.normalizer = normalizers.NFC()
    tok.add_tokens([AddedToken("é", normalized=False)])
    enc = PretokenEncoder.from_tokenizer(tok)
    texts = ["e\u0301", "é", "e\u0301é"]
    assert memo_ids(enc, texts) == hf_ids(tok, texts)
    added = tok.token_to_id("é")
    assert enc.encode("é") == [added] and added not in enc.encode("e\u0301") and len(enc.encode("e\u0301")) == 2


@pytest.mark.parametrize(
    "change",
    [
        {"normalizer": {"type": "Lowercase"}},
        {"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}},
        {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}},
        {"pre_tokenizer__pretokenizers__0__behavior": "Removed"},
        {"model__dropout": 0.1},
    ],
    ids=["lowercase", "metaspace", "prefix-space", "split-removed", "dropout"],
)
def test_uncovered_pipelines_are_declined(qwen, change):
    assert PretokenEncoder.from_tokenizer(edited(qwen.tokenizer, **change)) is None


def test_a_normalized_added_token_is_matched_after_nfc(tmp_path):
    # "é" as a normalized added token: HF matches it in the NFC text, so a decomposed e + U+0301 is that token too,
    # while a raw added token spanning it is matched first
    tok = save_tiny(tmp_path / "base").tokenizer
    tok.normalizer = normalizers.NFC()
    tok.add_tokens([AddedToken("é", normalized=True), AddedToken("xé", normalized=False)])
    enc = PretokenEncoder.from_tokenizer(tok)
    texts = ["e\u0301", "é", "ae\u0301b xé xe\u0301", "xéé"]
    assert memo_ids(enc, texts) == hf_ids(tok, texts)
    assert enc.encode("e\u0301") == [tok.token_to_id("é")]


@pytest.mark.parametrize("flag", ["lstrip", "single_word"])
def test_added_tokens_that_strip_or_match_single_words_are_declined(qwen, flag):
    spec = json.loads(qwen.tokenizer.to_str())
    spec["added_tokens"][0][flag] = True
    assert PretokenEncoder.from_tokenizer(Tokenizer.from_str(json.dumps(spec))) is None


def test_truncation_padding_and_encoded_special_tokens_are_declined(tmp_path):
    for change in ("truncation", "padding", "encode_special_tokens"):
        tok = save_tiny(tmp_path / change).tokenizer
        if change == "truncation":
            tok.enable_truncation(3)
        elif change == "padding":
            tok.enable_padding(length=64)
        else:
            tok.encode_special_tokens = True
        assert PretokenEncoder.from_tokenizer(tok) is None, change
