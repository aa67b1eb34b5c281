"""tiktoken as the counting engine for byte-level BPE tokenizer.json files (Qwen3, Llama 3.1).

The reference is always Hugging Face ``tokenizers`` running the same file (``add_special_tokens=False``), computed
in the test; the engine must give its ids and counts, and must refuse pipelines it cannot run exactly.
"""

from __future__ import annotations

import unicodedata

import pytest
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from mindcap_tok import premium
from mindcap_tok.data.flores import load_flores
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.errors import BadInputError
from mindcap_tok.premium import counting_engine, token_premium
from mindcap_tok.resample import Resampling
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from mindcap_tok.tokenization.load import ResolvedTokenizer, load_tokenizer
from mindcap_tok.tokenization.tiktoken_engine import NotEligible, tiktoken_engine
from tokenizer_edits import edited

EXTRA = [
    "",
    " ",
    "<think>reasoning</think>answer",
    "a<|endoftext|>b<|im_start|>",
    "<|begin_of_text|>Hello<|eot_id|>",
    "[INST] hi [/INST]<s></s><|startoftranscript|><|en|>",
    "Cafe\u0301 nai\u0308ve \u212b\u0338>\u0338",  # not NFC: Qwen's normaliser composes it
    "x" * 3000 + " " * 100 + "1234567890" * 30,
]


def _hf_ids(tok: ResolvedTokenizer, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in tok.tokenizer.encode_batch(texts, add_special_tokens=False)]


#: the registry's byte-level tokenizer.json files with one Split regex (DeepSeek-V3 has several: refused below)
ELIGIBLE = ["qwen3-8b", "llama-3.1-8b", "mistral-nemo", "whisper"]


@pytest.fixture(scope="module")
def engines(config):
    built = {}

    def get(model):
        if model not in built:
            tok = load_tokenizer(model, config.tokenizers_dir.value)
            built[model] = (tok, tiktoken_engine(tok.tokenizer))
        return built[model]

    return get


@pytest.mark.parametrize("model", ELIGIBLE)
def test_same_ids_as_tokenizers_on_a_sample(engines, flores_dir, model):
    tok, engine = engines(model)
    texts = list(EXTRA)
    for code in flores_codes():  # 3 lines per language, as in the files (not NFC) and NFC
        raw = load_flores(code, "devtest", source=flores_dir, nfc=False)
        texts += raw[::400] + [unicodedata.normalize("NFC", s) for s in raw[::400]]
    not_nfc = [s for s in texts if unicodedata.normalize("NFC", s) != s]
    assert len(not_nfc) > 5  # the normaliser path is exercised
    assert engine.encode_batch(texts) == _hf_ids(tok, texts)
    assert engine.count_tokens(texts).tolist() == [len(ids) for ids in _hf_ids(tok, texts)]
    assert engine.encode("<think>x") == _hf_ids(tok, ["<think>x"])[0]


@pytest.mark.slow
@pytest.mark.parametrize("model", ELIGIBLE)
def test_same_counts_on_every_flores_line(engines, flores_dir, model):
    # all 204 languages x 1,012 devtest lines, NFC as premiums read them
    tok, engine = engines(model)
    lines = [s for code in flores_codes() for s in load_flores(code, "devtest", source=flores_dir)]
    assert len(lines) == 204 * 1012
    reference = [len(e.ids) for e in tok.tokenizer.encode_batch_fast(lines, add_special_tokens=False)]
    counts = engine.count_tokens(lines).tolist()
    assert counts == reference, next(i for i, (a, b) in enumerate(zip(counts, reference, strict=True)) if a != b)


def test_premium_records_the_engine_and_agrees(qwen, flores_dir, monkeypatch):
    ref = token_premium(qwen, ["th", "de"], source=flores_dir, resampling=Resampling(50, 0), engine="reference")
    monkeypatch.setattr(premium, "TIKTOKEN_ENGINE_MIN_CHARS", 0)
    fast = token_premium(qwen, ["th", "de"], source=flores_dir, resampling=Resampling(50, 0))
    assert [r.engine for r in ref] == ["tokenizers"] * 2 and [r.engine for r in fast] == ["tiktoken"] * 2
    assert [r.as_dict() | {"engine": None} for r in fast] == [r.as_dict() | {"engine": None} for r in ref]
    assert fast[0].tokens == 70455  # tokenizers/README.md: Qwen3 Thai devtest
    with pytest.raises(BadInputError, match="unknown counting engine 'fast'"):
        token_premium(qwen, ["th"], source=flores_dir, resampling=Resampling(40), engine="fast")


def test_small_jobs_and_other_families_use_their_own_library(qwen, config):
    assert counting_engine(qwen, "auto", texts=["x" * 10_000]).family == "tokenizers"
    assert counting_engine(qwen, "reference", texts=["x" * 10**7]).family == "tokenizers"
    gemma = load_tokenizer("gemma-3", config.tokenizers_dir.value)
    assert counting_engine(gemma, "auto", texts=["x" * 10**7]).family == "sentencepiece"
    assert gemma.tiktoken_engine is None


# a tiny byte-level BPE built here: every byte a token, then "Ġt", "he", "Ġthe", "in"; one added token
PATTERN = r" ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+"
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n")]


def _tiny(merges=MERGES, **edit) -> Tokenizer:
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(PATTERN), "isolated"), pre_tokenizers.ByteLevel(False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|x|>"])
    return edited(tok, **edit)


def test_tiny_byte_level_bpe_is_eligible_and_exact():
    tok = _tiny()
    engine = tiktoken_engine(tok)
    texts = ["the thin tint", "in <|x|>the", "e\u0301 1234 ..."]
    assert engine.encode_batch(texts) == [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        ({"normalizer": {"type": "NFKC"}}, "normaliser"),
        ({"model__dropout": 0.1}, "dropout"),
        ({"model__byte_fallback": True}, "byte fallback"),
        (
            {"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}},
            "pre-tokeniser",
        ),
        ({"pre_tokenizer__pretokenizers__1__add_prefix_space": True}, "ByteLevel adds a space"),
        ({"pre_tokenizer__pretokenizers__0__behavior": "Removed"}, "isolating regex"),
        ({"model__merges": [["h", "e"], ["Ġ", "t"], ["Ġt", "he"], ["i", "n"]]}, "out of the order"),
    ],
)
def test_refuses_what_tiktoken_cannot_run(edit, reason):
    with pytest.raises(NotEligible, match=reason):
        tiktoken_engine(_tiny(**edit))


def test_refuses_a_token_that_is_not_its_own_bpe():
    # "abc" is made by (a, bc), but BPE on "abc" merges (a, b) first and stops at [ab, c]; tiktoken would look
    # "abc" up whole and give one token, so the two libraries really differ and the file must be refused
    tok = _tiny(merges=[("a", "b"), ("b", "c"), ("a", "bc")])
    assert len(tok.encode("abc").ids) == 2
    with pytest.raises(NotEligible, match="not its own BPE"):
        tiktoken_engine(tok)


def test_refuses_deepseek_v3(config):
    # DeepSeek-V3 pre-tokenises with several Split regexes in a row: one tiktoken pat_str cannot express that
    deepseek = load_tokenizer("deepseek-v3", config.tokenizers_dir.value)
    with pytest.raises(NotEligible, match="not one Split then ByteLevel"):
        tiktoken_engine(deepseek.tokenizer)
    assert deepseek.tiktoken_engine is None
