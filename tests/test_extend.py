"""Vocabulary extensions: learner vs slow reference, saved tokenizer vs learner, base untouched, round trips.

Tiny byte-level BPE tokenizers built here exercise the traps directly (a merge whose string is already in the
vocabulary and re-enables a base merge, ``ignore_merges``, added tokens numbered past the model vocabulary);
the real Qwen3 and Llama 3.1 tokenizers from ../shared check the same invariants at full size.
"""

from __future__ import annotations

import json
import unicodedata
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from bpe_reference import reference_merges
from mindcap_tok.adaptation import learn_extension, load_extension, save_extension
from mindcap_tok.adaptation.corpus import as_corpus, flores_corpus
from mindcap_tok.adaptation.extend import PreTokenizer, base_bpe
from mindcap_tok.data.flores import load_flores
from mindcap_tok.errors import MindcapError
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from mindcap_tok.tokenization.load import load_tokenizer

SPECIALS = ("<|endoftext|>", "<|im_end|>")


def tiny_tokenizer(folder, merges, orphans=(), ignore_merges=False):
    """A byte-level BPE: 256 byte symbols, ``orphans`` (in the vocab, no merge makes them), ``merges``.

    Two special tokens get ids right after the model vocabulary (as in Qwen3), so an extension that
    forgets them would leave a gap and see them re-numbered.
    """
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    for s in orphans:
        vocab.setdefault(s, len(vocab))
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    n = len(vocab)
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": n + k,
                "content": s,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for k, s in enumerate(SPECIALS)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": ignore_merges,
            "vocab": vocab,
            "merges": [list(m) for m in merges],
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    return load_tokenizer(str(folder))


def fast_merges(ext):
    return [(a, b, c) for (a, b), c in zip(ext.merges, ext.merge_counts, strict=True)]


def assert_replays(ext, tok: Tokenizer):
    """The saved tokenizer segments every training pre-token exactly as the learner ended up with."""
    for word, seg in ext.segmentation.items():
        assert tuple(t.id for t in tok.model.tokenize(word)) == seg, word


# --- tiny tokenizers: the traps, one at a time -------------------------------------------------------------


@pytest.fixture(scope="module")
def reuse_base(tmp_path_factory):
    # "xyz" is in the vocabulary but no merge makes it; the base merge ("xyz", "w") needs it
    return tiny_tokenizer(tmp_path_factory.mktemp("reuse"), [("y", "z"), ("xyz", "w")], orphans=["xyz"])


def test_merge_onto_existing_string_reuses_id_and_replays_base_merges(reuse_base):
    # base segmentation: "xyzw" -> x|yz|w (5 times), "xyz" -> x|yz (3 times): best pair (x, yz), 8 times.
    # Its string "xyz" is already a token: the id is reused, no new id, and in "xyzw" the base merge
    # ("xyz", "w") now applies, so the word becomes the single token "xyzw" (worked by hand).
    vocab = reuse_base.tokenizer.get_vocab()
    ext = learn_extension(reuse_base, [(0, "xyzw")] * 5 + [(1, "xyz")] * 3, min_freq=2)
    assert fast_merges(ext) == [("x", "yz", 8)]
    assert ext.new_tokens == ()
    assert ext.segmentation == {"xyzw": (vocab["xyzw"],), "xyz": (vocab["xyz"],)}
    assert ext.tokens_before == 5 * 3 + 3 * 2 and ext.tokens_after == 8
    tok = ext.tokenizer
    assert tok.encode("xyzw").ids == [vocab["xyzw"]]
    assert reuse_base.tokenizer.encode("xyzw").ids == [vocab["x"], vocab["yz"], vocab["w"]]
    with pytest.raises(MindcapError, match="supports only 1 merges"):
        learn_extension(reuse_base, [(0, "xyzw")] * 5 + [(1, "xyz")] * 3, size=2)


def test_new_ids_come_after_added_tokens_and_specials_keep_ids(reuse_base, tmp_path):
    ext = learn_extension(reuse_base, [(i, "qqq rrr qqq") for i in range(4)], size=3)
    n_model = len(base_bpe(reuse_base).vocab)
    assert ext.first_new_id == n_model + len(SPECIALS)
    saved = load_extension(save_extension(ext, tmp_path / "ext"))
    tok = saved.tokenizer.tokenizer
    for k, special in enumerate(SPECIALS):
        assert tok.token_to_id(special) == n_model + k
    assert [tok.token_to_id(s) for s in ext.new_tokens] == list(range(n_model + 2, n_model + 2 + len(ext.new_tokens)))
    ids = tok.encode("qqq<|im_end|>").ids
    assert ids[-1] == n_model + 1 and tok.decode(ids, skip_special_tokens=False) == "qqq<|im_end|>"


def test_ignore_merges_words_in_vocab_are_single_tokens(tmp_path):
    # with ignore_merges the orphan "abc" is emitted whole: the learner must see it as one token (no pairs)
    base = tiny_tokenizer(tmp_path / "ig", [("b", "c")], orphans=["abc"], ignore_merges=True)
    vocab = base.tokenizer.get_vocab()
    ext = learn_extension(base, [(0, "abc abc abc")], min_freq=2)
    # pre-tokens: "abc" once (whole vocab entry), "Ġabc" twice as Ġ|a|bc. (a, bc) and (Ġ, a) tie at 2; "a" < "Ġ"
    # wins; its string "abc" is the orphan (id reused); then (Ġ, abc) makes the new token "Ġabc"
    assert ext.segmentation["abc"] == (vocab["abc"],)
    assert fast_merges(ext) == [("a", "bc", 2), ("Ġ", "abc", 2)]
    assert ext.new_tokens == ("Ġabc",)
    assert_replays(ext, ext.tokenizer)


# texts are glued from pieces that hit the base merges and orphans, so merges onto existing strings (which
# re-enable base merges such as ("abc", "x")) come up often
PIECES = ["a", "b", "c", "x", "y", "z", " ", "\n", "abc", "abcx", "xyz", "aab", "cab", "bcx"]
TINY_MERGES = [("b", "c"), ("a", "b"), ("x", "y"), ("xy", "z"), ("c", "c"), ("abc", "x"), ("aa", "b")]
TINY_ORPHANS = ["abc", "cab", "aa", "bcx"]


@pytest.fixture(scope="module", params=[False, True], ids=["merges", "ignore_merges"])
def tiny_base(request, tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tiny"), TINY_MERGES, TINY_ORPHANS, ignore_merges=request.param)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.lists(st.sampled_from(PIECES), max_size=10).map("".join), min_size=1, max_size=8))
def test_fast_learner_equals_naive_reference_and_saved_tokenizer(tiny_base, texts):
    if not any(t.strip() for t in texts):
        return
    corpus = [(i, t) for i, t in enumerate(texts)]
    try:
        ext = learn_extension(tiny_base, corpus, min_freq=1)
    except MindcapError:  # nothing but blank pre-tokens
        return
    assert fast_merges(ext) == reference_merges(tiny_base, texts, None, 1)
    tok = ext.tokenizer
    assert_replays(ext, tok)
    assert sum(len(e.ids) for e in tok.encode_batch(texts)) == ext.tokens_after
    for t in texts:
        assert tok.decode(tok.encode(t).ids) == t


# --- Qwen3: the real thing -----------------------------------------------------------------------------------

TRACE_LIKE = [
    (9001, "<think>\nคิดทีละขั้น 16 - 3 - 4 = 9\n</think>\nคำตอบคือ 18 บาท<|im_end|>"),
    (9002, "เธอขายไข่ได้ 9 ฟอง ฟองละ 2 บาท<|endoftext|>ได้เงิน 18 บาท"),
]


@pytest.fixture(scope="session")
def thai_corpus(flores_dir):
    lines = flores_corpus("th", "dev", source=flores_dir).items[:300]
    return as_corpus(list(lines) + TRACE_LIKE * 3, name="th-dev-300+traces")


@pytest.fixture(scope="session")
def qwen_ext(qwen, thai_corpus):
    return learn_extension(qwen, thai_corpus, size=400)


@pytest.fixture(scope="session")
def qwen_saved(qwen_ext, tmp_path_factory):
    return load_extension(save_extension(qwen_ext, tmp_path_factory.mktemp("q") / "ext"))


def test_qwen_fast_learner_equals_naive_reference(qwen, flores_dir):
    texts = load_flores("th", "dev", source=flores_dir)[:60] + [t for _, t in TRACE_LIKE]
    ext = learn_extension(qwen, list(enumerate(texts)), size=60)
    assert fast_merges(ext) == reference_merges(qwen, texts, 60, 2)


def test_qwen_saved_tokenizer_replays_learner(qwen_ext, qwen_saved, thai_corpus):
    tok = qwen_saved.tokenizer.tokenizer
    assert_replays(qwen_ext, tok)
    # whole texts, added tokens and all: the saved tokenizer's count is the learner's plus one per added token
    encs = tok.encode_batch(thai_corpus.texts(), add_special_tokens=False)
    added = {i for i in qwen_ext.base.tokenizer.get_added_tokens_decoder()}
    assert sum(sum(i not in added for i in e.ids) for e in encs) == qwen_ext.tokens_after
    assert qwen_ext.tokens_after < qwen_ext.tokens_before


def test_qwen_base_vocab_ids_and_merges_untouched(qwen, qwen_ext, qwen_saved):
    base_json = json.loads(qwen.path.read_text(encoding="utf-8"))["model"]
    saved_json = json.loads((qwen_saved.path / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    n = len(base_json["merges"])
    assert [tuple(m) for m in saved_json["merges"][:n]] == [tuple(m) for m in base_json["merges"]]
    assert [tuple(m) for m in saved_json["merges"][n:]] == list(qwen_ext.merges)
    tok = qwen_saved.tokenizer.tokenizer
    got = tok.get_vocab(with_added_tokens=True)
    base_vocab = qwen.tokenizer.get_vocab(with_added_tokens=True)
    assert {s: got[s] for s in base_vocab} == base_vocab
    # Qwen3's published ids (tokenizer_config.json): <|endoftext|> 151643, <|im_end|> 151645, </think> 151668
    assert (tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>"), tok.token_to_id("</think>")) == (
        151643,
        151645,
        151668,
    )
    new_ids = sorted(got[s] for s in qwen_ext.new_tokens)
    assert new_ids == list(range(151669, 151669 + qwen_ext.n_new_tokens)) and qwen_ext.n_new_tokens > 300
    assert tok.get_vocab_size(with_added_tokens=True) == 151669 + qwen_ext.n_new_tokens


def test_qwen_saved_loads_with_transformers(qwen_saved, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(qwen_saved.path))
    text = "<|im_start|>user\nเธอขายไข่ได้ 9 ฟอง<|im_end|>"
    assert hf(text)["input_ids"] == qwen_saved.encode(text)
    assert hf.convert_tokens_to_ids("<|im_end|>") == 151645 and hf.eos_token_id == 151645
    assert hf.decode(hf(text)["input_ids"]) == text
    assert len(hf) == qwen_saved.tokenizer.vocab_size


def test_text_needing_no_new_merge_encodes_to_base_ids(qwen, qwen_ext, qwen_saved, flores_dir):
    # a pre-token whose base segmentation has no adjacent pair that is a new merge cannot change (Qwen3 has
    # no ignore_merges); whole English lines made only of such pre-tokens must encode to the base ids exactly
    base_vocab = qwen.tokenizer.get_vocab()
    new_pairs = {(base_vocab.get(a), base_vocab.get(b)) for a, b in qwen_ext.merges}
    lines = load_flores("en", "devtest", source=flores_dir)
    ext_tok = qwen_saved.tokenizer.tokenizer
    untouched = 0
    pre, model = PreTokenizer(qwen.tokenizer), qwen.tokenizer.model
    for line in lines:
        words = [[t.id for t in model.tokenize(p)] for p in pre.pieces(line)]
        if any(p in new_pairs for w in words for p in pairwise(w)):
            continue
        untouched += 1
        assert (
            ext_tok.encode(line, add_special_tokens=False).ids
            == qwen.tokenizer.encode(line, add_special_tokens=False).ids
        )
    assert untouched > 500


THAI = st.characters(min_codepoint=0x0E01, max_codepoint=0x0E5B)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(), st.text(alphabet=st.one_of(THAI, st.sampled_from(" 0123456789.\n")))))
def test_qwen_round_trip_random_unicode(qwen, qwen_saved, text):
    tok = qwen_saved.tokenizer.tokenizer
    ids = tok.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=False) == unicodedata.normalize("NFC", text)
    assert qwen_saved.retokenize(qwen.tokenizer.encode(text, add_special_tokens=False).ids) == ids


# --- Llama 3.1: ignore_merges at full size -----------------------------------------------------------------


def test_llama_extension_replays_and_keeps_specials(llama, flores_dir, tmp_path):
    texts = load_flores("th", "dev", source=flores_dir)[:80]
    ext = learn_extension(llama, list(enumerate(texts)), size=50)
    assert fast_merges(ext) == reference_merges(llama, texts, 50, 2)
    saved = load_extension(save_extension(ext, tmp_path / "llama-ext"))
    tok = saved.tokenizer.tokenizer
    assert_replays(ext, tok)
    assert tok.token_to_id("<|begin_of_text|>") == 128000 and tok.token_to_id("<|eot_id|>") == 128009
    assert tok.token_to_id("<|reserved_special_token_247|>") == 128255
    assert ext.first_new_id == 128256
    assert {tok.token_to_id(s) for s in ext.new_tokens} == set(range(128256, 128256 + ext.n_new_tokens))
    # a pre-token that is a whole vocabulary entry is one token, merges or not (ignore_merges)
    assert base_bpe(llama).ignore_merges


# --- bad input ---------------------------------------------------------------------------------------------


def test_non_bpe_and_non_byte_level_tokenizers_are_refused(tmp_path):
    from tokenizers import models, pre_tokenizers, trainers

    uni = Tokenizer(models.Unigram())
    uni.pre_tokenizer = pre_tokenizers.Whitespace()
    uni.train_from_iterator(["hello world"] * 20 + ["hola mundo"] * 20, trainers.UnigramTrainer(vocab_size=30))
    (tmp_path / "uni").mkdir()
    uni.save(str(tmp_path / "uni" / "tokenizer.json"))
    with pytest.raises(MindcapError, match="only byte-level BPE tokenizers can be extended; its model is Unigram"):
        learn_extension(load_tokenizer(str(tmp_path / "uni")), [(0, "hello")], size=1)
    spbpe = Tokenizer(models.BPE())
    spbpe.pre_tokenizer = pre_tokenizers.Whitespace()
    spbpe.train_from_iterator(["hello world"] * 20, trainers.BpeTrainer(vocab_size=40))
    (tmp_path / "bpe").mkdir()
    spbpe.save(str(tmp_path / "bpe" / "tokenizer.json"))
    with pytest.raises(MindcapError, match="without a byte-level pre-tokenizer"):
        learn_extension(load_tokenizer(str(tmp_path / "bpe")), [(0, "hello")], size=1)


def test_empty_corpus_and_bad_rules(reuse_base):
    with pytest.raises(MindcapError, match="is empty"):
        learn_extension(reuse_base, [], size=1)
    with pytest.raises(MindcapError, match="no text to learn from"):
        learn_extension(reuse_base, [(0, "<|endoftext|>")], size=1)
    with pytest.raises(MindcapError, match="expected \\(item_id, text\\) pairs"):
        learn_extension(reuse_base, ["abc"], size=1)


def test_default_rule_learns_every_pair_seen_at_least_twice(reuse_base):
    corpus = [(0, "qvqv qvqv zkzk xjxj xjxj xjxj")]
    default = learn_extension(reuse_base, corpus)
    assert default.size_rule.as_dict() == {"rule": "min-freq", "size": None, "min_freq": 2}
    assert default.n_merges > 0 and min(default.merge_counts) >= 2
    # one more merge than the default rule took has a pair seen only once: the rule stopped at its floor
    more = learn_extension(reuse_base, corpus, size=default.n_merges + 1, min_freq=1)
    assert more.merges[: default.n_merges] == default.merges and more.merge_counts[-1] == 1


def test_existing_output_folder_is_refused(reuse_base, tmp_path):
    ext = learn_extension(reuse_base, [(0, "xyzw")] * 2, size=1)
    (tmp_path / "taken").mkdir()
    with pytest.raises(MindcapError, match="already exists"):
        save_extension(ext, tmp_path / "taken")
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]
