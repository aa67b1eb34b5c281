"""Texts longer than a tokenizer's regex engine can pre-tokenize (tokenization.long_text).

Where the library still copes (texts just over SAFE_CHARS, whitespace runs below its limits), every encode path gives
the library's plain ids; on inputs the library gives up on (a Rust panic), the ids of the pre-tokens worked out by
hand, each encoded by the library's own BPE; where nothing reproduces the pipeline, one line instead of a panic.
"""

from __future__ import annotations

from itertools import chain

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindcap_tok.adaptation.retokenize import encode_ids
from mindcap_tok.data.flores import load_flores
from mindcap_tok.errors import BadInputError
from mindcap_tok.premium import count_tokens
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from mindcap_tok.tokenization.hf import encode_texts
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.long_text import SAFE_CHARS
from tokenizer_edits import edited

HF_REGISTRY = ["qwen3-8b", "llama-3.1-8b", "mistral-nemo", "whisper"]
TIKTOKEN_REGISTRY = ["gpt-4o", "gpt-4"]
SCRIPTS = ["eng_Latn", "tha_Thai", "zho_Hans", "arb_Arab", "hin_Deva", "rus_Cyrl", "swh_Latn", "kor_Hang"]
#: whitespace runs of every kind the split regexes treat apart (spaces, tabs, newlines, CR LF, NBSP, ideographic)
RUNS = [" ", "\t", "\n", "\r\n", " \n", "\n ", "\u00a0", "\u3000", " \t"]
#: what may follow a run: a letter, a digit, punctuation, Thai, nothing, a contraction
AFTER = ["a", "1", "!", "ก", "", "'s"]


def plain_hf(tok, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def is_panic(exc: BaseException) -> bool:
    return type(exc).__name__ == "PanicException"


@pytest.fixture(scope="module")
def flores_long(flores_dir) -> str:
    """FLORES sentences of eight scripts, with whitespace runs between them, a little over SAFE_CHARS long."""
    sentences = [s for code in SCRIPTS for s in load_flores(code, "dev", source=flores_dir)]
    parts, size, k = [], 0, 0
    while size <= SAFE_CHARS + 5_000:
        piece = (
            sentences[k % len(sentences)] + RUNS[k % len(RUNS)] * (1 + k % 7) + ("   \n\n\t " if k % 50 else " " * 5000)
        )
        parts.append(piece)
        size += len(piece)
        k += 1
    return "".join(parts)


@pytest.fixture(scope="module", params=HF_REGISTRY)
def hf(request, config):
    return load_tokenizer(request.param, config.tokenizers_dir.value)


@pytest.fixture(scope="module", params=TIKTOKEN_REGISTRY)
def tiktoken_tok(request, config):
    return load_tokenizer(request.param, config.tokenizers_dir.value)


def test_normal_text_gives_the_plain_ids(hf, flores_dir):
    texts = [s for code in SCRIPTS for s in load_flores(code, "dev", source=flores_dir)[:20]]
    want = plain_hf(hf.tokenizer, texts)
    assert hf.encode_batch(texts) == want
    assert [hf.encode(t) for t in texts[:10]] == want[:10]
    assert hf.count_tokens(texts).tolist() == [len(x) for x in want]


def test_long_text_gives_the_plain_ids_on_every_path(hf, flores_long):
    texts = ["short one", flores_long, flores_long[: SAFE_CHARS + 1]]
    assert len(flores_long) > SAFE_CHARS
    want = plain_hf(hf.tokenizer, texts)
    assert hf.encode_batch(texts) == want
    assert hf.encode(flores_long) == want[1]
    assert hf.count_tokens(texts).tolist() == [len(x) for x in want]
    assert encode_texts(hf.tokenizer, texts) == want
    assert encode_ids(hf, texts) == want
    assert count_tokens(hf.tokenizer, texts).tolist() == [len(x) for x in want]


@settings(max_examples=6, deadline=None)
@given(
    runs=st.lists(st.tuples(st.sampled_from(RUNS), st.integers(1, 4000), st.sampled_from(AFTER)), min_size=1,
                  max_size=12),
    at=st.lists(st.floats(0, 1), min_size=12, max_size=12),
)  # fmt: skip
def test_long_text_with_random_whitespace_runs(config, flores_long, runs, at):
    # runs below the engines' limits, dropped at random places of a long FLORES text: the library copes, so its
    # plain ids are the reference
    text = flores_long
    for (unit, n, after), where in zip(runs, at, strict=False):
        k = int(where * len(text))
        text = text[:k] + unit * n + after + text[k:]
    for name in ("qwen3-8b", "llama-3.1-8b"):
        tok = load_tokenizer(name, config.tokenizers_dir.value)
        assert tok.encode_batch([text]) == plain_hf(tok.tokenizer, [text]), name


def test_tiktoken_long_text_gives_the_plain_ids(tiktoken_tok, flores_long):
    enc = tiktoken_tok.backend.enc
    texts = ["short one", flores_long]
    want = enc.encode_ordinary_batch(texts)
    assert tiktoken_tok.encode_batch(texts) == want
    assert tiktoken_tok.encode(flores_long) == want[1]
    assert tiktoken_tok.count_tokens(texts).tolist() == [len(x) for x in want]


def test_tiktoken_engine_long_text_gives_hf_ids(qwen, flores_long):
    texts = ["short one", flores_long, flores_long[:SAFE_CHARS] + "<|im_end|>" + flores_long[:SAFE_CHARS]]
    engine = qwen.tiktoken_engine
    assert engine is not None
    assert engine.encode_batch(texts) == plain_hf(qwen.tokenizer, texts)


def test_tiktoken_gives_up_on_a_million_spaces_and_long_text_does_not(config):
    # cl100k's "\s*[\r\n]" backtracks over the whole run before a letter: fancy-regex overflows its stack
    tok = load_tokenizer("gpt-4", config.tokenizers_dir.value)
    enc = tok.backend.enc
    n = 1_100_000
    text = " " * n + "a"
    with pytest.raises(BaseException) as info:
        enc.encode_ordinary(text)
    assert is_panic(info.value)
    # by hand: "\s+(?!\S)" takes all spaces but the last, which goes with the letter; a run that ends the text
    # is one "\s++$" match, which the library encodes without backtracking
    want = enc.encode_ordinary(" " * (n - 1)) + enc.encode_ordinary(" a")
    assert tok.encode(text) == want
    assert tok.encode_batch(["x", text]) == [enc.encode_ordinary("x"), want]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "text", "pieces"),
    [
        ("qwen3-8b", " " * 10_500_000 + "a", [" " * 10_499_999, " a"]),
        ("mistral-nemo", "A" * 10_500_000 + "1", ["A" * 10_500_000, "1"]),
    ],
    ids=["qwen-spaces", "tekken-capitals"],
)
def test_hf_gives_up_on_ten_million_and_long_text_does_not(config, name, text, pieces):
    tok = load_tokenizer(name, config.tokenizers_dir.value)
    with pytest.raises(BaseException) as info:
        tok.tokenizer.encode(text, add_special_tokens=False)
    assert is_panic(info.value)
    # the pre-tokens by hand (see the module docstring of long_text), each through the library's BPE model
    model = tok.tokenizer.model
    want = [t.id for p in pieces for t in model.tokenize("".join(BYTE_TO_CHAR[b] for b in p.encode()))]
    assert tok.encode(text) == want


@pytest.mark.parametrize("unit", [" ", "\n", "\t"])
def test_no_cut_inside_a_whitespace_run_keeps_the_ids(qwen, unit):
    # why long texts are not cut inside runs: the run is one pre-token, and BPE merges it otherwise in two parts
    n = 300
    whole = plain_hf(qwen.tokenizer, [unit * n + "a"])[0]
    cuts = [k for k in range(1, n) if list(chain(*plain_hf(qwen.tokenizer, [unit * k, unit * (n - k) + "a"]))) == whole]
    assert len(cuts) < n // 10


def test_a_tokenizer_the_library_gives_up_on_is_one_line(qwen):
    # a pipeline the memoised encoder does not reproduce (lowercasing), whose regex backtracks without end
    tok = edited(
        qwen.tokenizer, normalizer={"type": "Lowercase"}, pre_tokenizer__pretokenizers__0__pattern__Regex="(a+)+b"
    )
    for texts in (["a" * 30], ["ok", "a" * SAFE_CHARS + "a"]):
        with pytest.raises(BadInputError, match="tokenizer's library gave up on a text") as info:
            encode_texts(tok, texts)
        assert "\n" not in str(info.value)


def test_counts_are_int64(hf, flores_long):
    assert hf.count_tokens([flores_long]).dtype == np.int64
