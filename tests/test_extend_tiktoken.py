"""Extending tiktoken encodings (gpt-4o's o200k_base): new ranks after every id in use, base ranks untouched.

Facts are checked independently of the learner: the saved rank file is read line by line and loaded by tiktoken's
own ``load_tiktoken_bpe``; extended segmentations must coarsen the base's (byte boundaries a subset); a tiny rank
file gives merges and segmentations worked out by hand.
"""

from __future__ import annotations

import base64
import hashlib
import json
from itertools import accumulate

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from mindcap_tok.adaptation import learn_extension, load_extension, save_extension
from mindcap_tok.adaptation.corpus import flores_corpus
from mindcap_tok.adaptation.price import PriceSettings, SavedFolds, price_ledger
from mindcap_tok.adaptation.saved import resolved
from mindcap_tok.resample import Resampling
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

SIZE = 2000


@pytest.fixture(scope="module")
def gpt4o(config):
    return load_tokenizer("gpt-4o", config.tokenizers_dir.value)


@pytest.fixture(scope="module")
def devtest(config) -> dict[str, list[str]]:
    root = config.data_dir.value / "flores200" / "devtest"
    return {c: (root / f"{c}.devtest").read_text(encoding="utf-8").splitlines() for c in ("tha_Thai", "eng_Latn")}


@pytest.fixture(scope="module")
def saved(gpt4o, flores_dir, tmp_path_factory):
    ext = learn_extension(gpt4o, flores_corpus("th", "dev", source=flores_dir), size=SIZE)
    folder = save_extension(ext, tmp_path_factory.mktemp("ext") / "gpt-4o-th", lang="th")
    return ext, load_extension(folder)


def _base_files(gpt4o):
    rank_file = gpt4o.path
    return rank_file, json.loads((rank_file.parent / "encoding.json").read_text(encoding="utf-8"))


def test_saved_rank_file_keeps_base_ranks_and_specials(gpt4o, saved):
    ext, loaded = saved
    rank_file, base_spec = _base_files(gpt4o)
    base_lines = rank_file.read_bytes().splitlines()
    files = sorted(loaded.path.glob("*.tiktoken"))
    assert len(files) == 1 and not (loaded.path / "tokenizer.json").exists()
    lines = files[0].read_bytes().splitlines()
    assert lines[: len(base_lines)] == base_lines  # every base rank, byte for byte, in order
    new = [line.split() for line in lines[len(base_lines) :]]
    # o200k: last rank 199,997, specials 199,999 and 200,018: new ranks start after the largest id in use
    assert [int(r) for _, r in new] == list(range(200_019, 200_019 + SIZE))
    assert [base64.b64decode(t) for t, _ in new] == list(ext.new_tokens)
    base_bytes = {base64.b64decode(line.split()[0]) for line in base_lines}
    assert not base_bytes & set(ext.new_tokens)
    spec = json.loads((loaded.path / "encoding.json").read_text(encoding="utf-8"))
    specials = {"<|endoftext|>": 199_999, "<|endofprompt|>": 200_018}
    assert spec["special_tokens"] == base_spec["special_tokens"] == specials
    assert spec["pat_str"] == base_spec["pat_str"] and spec["file"] == files[0].name
    assert spec["sha256"] == hashlib.sha256(files[0].read_bytes()).hexdigest()
    assert loaded.manifest["tokenizer_sha256"] == loaded.tokenizer.sha256
    assert loaded.manifest["base"]["sha256"] == gpt4o.sha256 and loaded.manifest["first_new_id"] == 200_019


def test_tiktoken_loads_the_saved_pair_and_agrees(saved, devtest):
    _, loaded = saved
    spec = json.loads((loaded.path / "encoding.json").read_text(encoding="utf-8"))
    ranks = load_tiktoken_bpe(str(loaded.path / spec["file"]), expected_hash=spec["sha256"])
    enc = tiktoken.Encoding(
        spec["name"], pat_str=spec["pat_str"], mergeable_ranks=ranks, special_tokens=spec["special_tokens"]
    )
    assert enc.n_vocab == 200_019 + SIZE
    lines = devtest["tha_Thai"][:200] + devtest["eng_Latn"][:50]
    assert [loaded.encode(x) for x in lines] == enc.encode_ordinary_batch(lines)


def _boundaries(ids: list[int], table: list[bytes]) -> set[int]:
    return set(accumulate(len(table[i]) for i in ids))


def test_extended_segmentation_coarsens_the_base(gpt4o, saved, devtest):
    _, loaded = saved
    base_enc = gpt4o.backend.enc
    ext_table = loaded.tokenizer.token_bytes
    for code in ("tha_Thai", "eng_Latn"):
        for line in devtest[code][:200]:
            base_ids = base_enc.encode_ordinary(line)
            ext_ids = loaded.encode(line)
            base_table = [base_enc.decode_single_token_bytes(i) for i in base_ids]
            assert b"".join(ext_table[i] for i in ext_ids) == line.encode("utf-8")
            assert _boundaries(ext_ids, ext_table) <= set(accumulate(map(len, base_table))), line
            assert loaded.retokenize(base_ids) == ext_ids


def test_thai_round_trip_and_fewer_tokens(gpt4o, saved, devtest):
    _, loaded = saved
    thai = devtest["tha_Thai"]
    ext_ids = loaded.tokenizer.encode_batch(thai)
    assert [loaded.tokenizer.decode(ids) for ids in ext_ids] == thai
    before = sum(map(len, gpt4o.encode_batch(thai)))
    after = sum(map(len, ext_ids))
    assert after < 0.85 * before  # measured: about 0.74
    english = devtest["eng_Latn"]
    assert sum(map(len, loaded.tokenizer.encode_batch(english))) == sum(map(len, gpt4o.encode_batch(english)))


def test_in_memory_extension_equals_saved(saved, devtest):
    ext, loaded = saved
    tok = resolved(ext, "gpt-4o+th")
    assert tok.family == "tiktoken" and tok.sha256 == loaded.tokenizer.sha256
    assert tok.encode_batch(devtest["tha_Thai"][:50]) == [loaded.encode(x) for x in devtest["tha_Thai"][:50]]
    # the learner's final segmentation is what tiktoken produces with the new ranks
    enc = loaded.tokenizer.backend.enc
    for word, seg in list(ext.segmentation.items())[:3000]:
        assert tuple(enc.encode_ordinary(word)) == seg, word


# --- a tiny rank file, worked out by hand ---------------------------------------------------------------------


def tiny_tiktoken(folder):
    """Bytes 0..255 (rank = byte), ``ab`` = 256, ``abcd`` = 257 (no ``cd``: unreachable in the base), a gap at
    258 and the special ``<|end|>`` = 259, so new ranks start at 260."""
    folder.mkdir(parents=True)
    ranks = [bytes([b]) for b in range(256)] + [b"ab", b"abcd"]
    data = b"".join(base64.b64encode(t) + b" %d\n" % r for r, t in enumerate(ranks))
    (folder / "tiny.tiktoken").write_bytes(data)
    spec = {
        "name": "tiny",
        "file": "tiny.tiktoken",
        "sha256": hashlib.sha256(data).hexdigest(),
        "pat_str": r"\S+|\s+",
        "special_tokens": {"<|end|>": 259},
    }
    (folder / "encoding.json").write_text(json.dumps(spec), encoding="utf-8")
    return load_tokenizer(str(folder / "tiny.tiktoken"))


def test_tiny_rank_file_by_hand(tmp_path):
    base = tiny_tiktoken(tmp_path / "tiny")
    # base: "abcde" -> ab|c|d|e (3 times), "cd" -> c|d; pairs (c,d) 4, (ab,c) 3, (d,e) 3, spaces alone.
    # merge 1: c+d -> "cd" = 260 (after the special 259); "abcde" becomes ab|cd|e, and ab+cd is the base token
    #          "abcd" (257, lower rank than 260), so tiktoken merges it: abcd|e.
    # merge 2: abcd+e (3 times) -> "abcde" = 261.
    ext = learn_extension(base, [(0, "abcde abcde"), (1, "abcde cd")], size=2)
    assert ext.first_new_id == 260
    assert ext.merges == ((b"c", b"d"), (b"abcd", b"e")) and ext.merge_counts == (4, 3)
    assert ext.new_tokens == (b"cd", b"abcde")
    assert ext.tokens_before == 3 * 4 + 2 + 2 and ext.tokens_after == 3 + 1 + 2
    folder = save_extension(ext, tmp_path / "ext")
    assert (folder / "tiny-extended.tiktoken").read_bytes() == (
        (tmp_path / "tiny" / "tiny.tiktoken").read_bytes() + b"Y2Q= 260\nYWJjZGU= 261\n"
    )
    loaded = load_extension(folder)
    a, b, x = ord("a"), ord("b"), ord("x")
    assert base.encode("abcdx") == [256, ord("c"), ord("d"), x]
    assert loaded.encode("abcdx") == [257, x]  # ab|c|d|x -> ab|cd|x -> abcd|x
    assert loaded.encode("abcde") == [261] and loaded.encode("xcd") == [x, 260]
    assert loaded.encode("bacd") == [b, a, 260]
    assert loaded.tokenizer.special_ids == frozenset({259}) and loaded.tokenizer.vocab_size == 262
    assert loaded.tokenizer.token_bytes[258] == b""  # the gap stays unused


def test_sentencepiece_is_extendable_now(config):
    tok = load_tokenizer("llama-2", config.tokenizers_dir.value)
    ext = learn_extension(tok, [(0, "สวัสดีครับ สวัสดีครับ")], size=1)
    assert ext.n_merges == 1 and ext.first_new_id == 32_000  # the Unigram refusal is in test_extend_sp.py


def test_price_with_a_tiktoken_extension(gpt4o, saved, devtest, tmp_path):
    _, loaded = saved
    eos = max(gpt4o.special_ids)
    records = []
    for arm, code in (("native", "tha_Thai"), ("translate-act", "eng_Latn")):
        for item in range(8):
            text = f"{devtest[code][item][:60]}\n#### {7 if item % 3 else 8}"
            records.append(
                {
                    "model": "gpt-4o",
                    "arm": arm,
                    "lang": "tha_Thai",
                    "item": item,
                    "sample": 0,
                    "seed": 0,
                    "cap": 4096,
                    "prompt": "q",
                    "prompt_ids": [3],
                    "output_ids": [*gpt4o.encode(text), eos],
                    "text": text,
                    "finish_reason": "stop",
                    "gold": 7,
                    "generator": "hand",
                    "tokenizer": "gpt-4o",
                }
            )
    led = Ledger(tmp_path / "L")
    led.append(records, gpt4o)
    p = price_ledger(
        led,
        "gpt-4o",
        lang="th",
        caps=[16, 4096],
        extension=SavedFolds(loaded.path),
        settings=PriceSettings(resampling=Resampling(50), tokenizer=gpt4o),
    )
    big = p.rows[-1]
    assert big.acc_native_ext == pytest.approx(big.acc_native) and big.acc_native > 0
