"""Tokenizer resolution and per-id byte lengths, checked against ids published with the tokenizers."""

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindcap_tok.errors import MindcapError
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.registry import canonical_model_name


def test_aliases_resolve_to_registry_names():
    assert canonical_model_name("qwen3") == "qwen3-8b"
    assert canonical_model_name("LLAMA3.1") == "llama-3.1-8b"
    assert canonical_model_name("whisper-multilingual") == "whisper"
    assert canonical_model_name("gpt-17") is None


def test_golden_ids(qwen, llama):
    # ids published in ../shared/tokenizers/README.md (checked there against tiktoken rank files)
    assert qwen.tokenizer.encode("Hello world", add_special_tokens=False).ids == [9707, 1879]
    assert qwen.tokenizer.token_to_id("<|endoftext|>") == 151643
    assert qwen.tokenizer.token_to_id("</think>") == 151668
    assert qwen.vocab_size == 151669
    assert llama.tokenizer.encode("Hello world").ids == [128000, 9906, 1917]
    assert llama.vocab_size == 128256


def test_path_and_folder_resolve(config):
    folder = config.tokenizers_dir.value / "qwen3"
    a = load_tokenizer(str(folder))
    b = load_tokenizer(str(folder / "tokenizer.json"))
    assert a.sha256 == b.sha256 == load_tokenizer("qwen3", config.tokenizers_dir.value).sha256


def test_unknown_name_lists_known_models():
    with pytest.raises(MindcapError) as info:
        load_tokenizer("gpt-17")
    msg = str(info.value)
    assert "unknown model 'gpt-17'" in msg and "qwen3-8b" in msg and "llama-3.1-8b" in msg


def test_unreadable_tokenizer_file(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(MindcapError, match="cannot read tokenizer file"):
        load_tokenizer(str(bad))


def test_byte_lengths_known_tokens(qwen, llama):
    assert qwen.byte_lengths[9707] == len(b"Hello")
    assert qwen.byte_lengths[1879] == len(b" world")
    assert qwen.byte_lengths[151643] == len("<|endoftext|>")
    assert llama.byte_lengths[128000] == len("<|begin_of_text|>")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=60))
def test_byte_lengths_sum_to_text_bytes(text):
    """Decoding ids concatenates token bytes, so per-id byte lengths must add up to the encoded text."""
    import mindcap_tok.tokenization.load as t

    for name in ("qwen3", "llama3.1"):
        tok = _cached(name, t)
        ids = tok.tokenizer.encode(text, add_special_tokens=False).ids
        normalized = unicodedata.normalize("NFC", text) if name == "qwen3" else text
        assert b"".join(tok.token_bytes[i] for i in ids) == normalized.encode("utf-8")
        assert int(tok.byte_lengths[ids].sum()) == len(normalized.encode("utf-8"))


_CACHE: dict = {}


def _cached(name, t):
    if name not in _CACHE:
        from mindcap_tok.config import load_config

        _CACHE[name] = t.load_tokenizer(name, load_config().tokenizers_dir.value)
    return _CACHE[name]
