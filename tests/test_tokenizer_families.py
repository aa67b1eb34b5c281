"""Every tokenizer family (tokenizers, tiktoken, sentencepiece) behind one interface.

Expected values are independent of this code: ids published with the tokenizer files
(../shared/tokenizers/README.md), byte strings checked by hand, and Petrov et al.'s CSV read at test time.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
import regex

from mindcap_tok.data.flores import load_flores
from mindcap_tok.data.petrov2023 import COLUMNS, petrov2023_lengths
from mindcap_tok.errors import BadInputError, MindcapError
from mindcap_tok.premium import PremiumText, count_tokens, token_premium
from mindcap_tok.resample import Resampling
from mindcap_tok.tokenization.base import TokenizerBackend
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.registry import canonical_model_name

# "hello world" -> ids, as listed in ../shared/tokenizers/README.md ("Added families")
GOLDEN = {
    "gpt-4o": ("tiktoken", [24912, 2375]),
    "gpt-4": ("tiktoken", [15339, 1917]),
    "gemma-3": ("sentencepiece", [23391, 1902]),
    "llama-2": ("sentencepiece", [22172, 3186]),
    "deepseek-v3": ("tokenizers", [33310, 2058]),
}


@pytest.fixture(scope="module")
def toks(config):
    return {name: load_tokenizer(name, config.tokenizers_dir.value) for name in GOLDEN}


def test_registry_names_and_aliases():
    assert canonical_model_name("o200k") == canonical_model_name("o200k_base") == "gpt-4o"
    assert canonical_model_name("cl100k") == canonical_model_name("CL100K_BASE") == "gpt-4"
    assert canonical_model_name("gemma3") == "gemma-3"
    assert canonical_model_name("llama2") == "llama-2"
    assert canonical_model_name("deepseek-v3") == "deepseek-v3"


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_hello_world(toks, name):
    family, ids = GOLDEN[name]
    tok = toks[name]
    assert tok.family == family
    assert tok.encode("hello world") == ids
    assert tok.encode_batch(["hello world", "hello world"]) == [ids, ids]
    assert tok.decode(ids) == "hello world"
    assert count_tokens(tok, ["hello world", ""]).tolist() == [2, 0]


def test_vocab_sizes_and_specials(toks):
    # README table: n_vocab 200,019 / 100,277; 262,144 and 32,000 pieces; 128,815 ids
    assert [toks[n].vocab_size for n in GOLDEN] == [200019, 100277, 262144, 32000, 128815]
    assert toks["gpt-4o"].special_ids == {199999, 200018}  # <|endoftext|>, <|endofprompt|>
    assert {100257, 100276} <= toks["gpt-4"].special_ids
    assert {0, 1, 2} <= toks["llama-2"].special_ids  # <unk> <s> </s>
    assert toks["gpt-4o"].token_bytes[199999] == b"<|endoftext|>"


def test_sha256_is_the_file_hash(toks, config):
    # README: sha256 of gemma3/tokenizer.model starts 1299c11d, llama2's 9e556afd, deepseek's 621ac2e3
    assert toks["gemma-3"].sha256.startswith("1299c11d")
    assert toks["llama-2"].sha256.startswith("9e556afd")
    assert toks["deepseek-v3"].sha256.startswith("621ac2e3")
    # tiktoken: rank file bytes followed by encoding.json bytes
    folder = config.tokenizers_dir.value / "cl100k_base"
    both = (folder / "cl100k_base.tiktoken").read_bytes() + (folder / "encoding.json").read_bytes()
    assert toks["gpt-4"].sha256 == hashlib.sha256(both).hexdigest()


def test_token_bytes_hand_checked(toks):
    assert toks["gpt-4o"].token_bytes[24912] == b"hello"
    assert toks["gpt-4o"].token_bytes[2375] == b" world"
    assert toks["gpt-4"].token_bytes[1917] == b" world"
    llama2 = toks["llama-2"]
    assert llama2.token_bytes[22172] == b" hello"  # piece "▁hello": ▁ is a space
    assert llama2.token_bytes[3 + 0xE0] == b"\xe0"  # piece "<0xE0>": byte fallback, ids 3..258 are <0x00>..<0xFF>
    assert llama2.token_bytes[3] == b"\x00"
    assert toks["gemma-3"].token_bytes[1902] == b" world"
    assert toks["deepseek-v3"].token_bytes[2058] == b" world"


def test_llama2_thai_uses_byte_fallback(toks):
    # "ฮ" (U+0E2E) is E0 B8 AE in UTF-8; Llama 2 has no piece for it, so it falls back to three byte pieces
    ids = toks["llama-2"].encode("ฮ")
    assert [toks["llama-2"].token_bytes[i] for i in ids][-3:] == [b"\xe0", b"\xb8", b"\xae"]


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_token_bytes_concatenate_to_decoded_thai(toks, flores_dir, name):
    tok = toks[name]
    lines = load_flores("tha_Thai", "devtest", source=flores_dir)[:40]
    table = tok.token_bytes
    for line, ids in zip(lines, tok.encode_batch(lines), strict=True):
        text = tok.decode(ids)
        assert text == line
        # Llama 2 adds a dummy prefix space to its input: it is part of the first token's bytes
        prefix = b" " if tok.dummy_prefix else b""
        assert b"".join(table[i] for i in ids) == prefix + text.encode("utf-8")
        assert int(tok.byte_lengths[ids].sum()) == len(prefix + text.encode("utf-8"))
    assert toks["llama-2"].dummy_prefix and not toks["gemma-3"].dummy_prefix


@pytest.mark.parametrize("name", ["gpt-4o", "gemma-3"])
def test_families_without_a_hf_tokenizer_say_so_without_raising(toks, name):
    # `.tokenizer` is a capability (the HF tokenizer or None); what needs one says so in one line
    assert toks[name].tokenizer is None
    assert isinstance(toks[name].backend, TokenizerBackend)
    with pytest.raises(BadInputError, match=rf"^the tiny model needs a tokenizer.json for {name}, found .+$"):
        toks[name].require_hf("the tiny model")


def test_hf_tokenizer_still_exposed(toks, qwen):
    assert toks["deepseek-v3"].tokenizer.encode("hello world", add_special_tokens=False).ids == [33310, 2058]
    assert qwen.tokenizer.encode("Hello world", add_special_tokens=False).ids == [9707, 1879]


def test_folder_and_file_resolve_to_the_family(config):
    root = config.tokenizers_dir.value
    assert load_tokenizer(str(root / "o200k_base")).encode("hello world") == [24912, 2375]
    assert load_tokenizer(str(root / "cl100k_base" / "cl100k_base.tiktoken")).family == "tiktoken"
    assert load_tokenizer(str(root / "llama2" / "tokenizer.model")).encode("hello world") == [22172, 3186]


# --- bad input: small hand-made files -------------------------------------------------------------


def _tiny_rank_file(folder) -> bytes:
    # the 256 single bytes, then one merge "ab" with rank 256
    lines = [f"{base64.b64encode(bytes([i])).decode()} {i}" for i in range(256)]
    lines.append(f"{base64.b64encode(b'ab').decode()} 256")
    data = ("\n".join(lines) + "\n").encode()
    (folder / "tiny.tiktoken").write_bytes(data)
    return data


def _encoding_json(folder, **extra) -> None:
    spec = {"name": "tiny", "pat_str": r"\S+|\s+", "special_tokens": {"<|end|>": 257}, **extra}
    (folder / "encoding.json").write_text(json.dumps(spec), encoding="utf-8")


def test_tiny_tiktoken_loads(tmp_path):
    data = _tiny_rank_file(tmp_path)
    _encoding_json(tmp_path, sha256=hashlib.sha256(data).hexdigest())
    tok = load_tokenizer(str(tmp_path / "tiny.tiktoken"))
    assert tok.encode("ab c") == [256, 32, 99]
    assert tok.special_ids == {257} and tok.vocab_size == 258


def test_tiktoken_without_encoding_json(tmp_path):
    _tiny_rank_file(tmp_path)
    with pytest.raises(MindcapError, match=r"needs an encoding\.json") as info:
        load_tokenizer(str(tmp_path / "tiny.tiktoken"))
    assert "\n" not in str(info.value)


def test_tiktoken_hash_mismatch(tmp_path):
    _tiny_rank_file(tmp_path)
    _encoding_json(tmp_path, sha256=hashlib.sha256(b"another file").hexdigest())
    with pytest.raises(MindcapError, match=r"has sha256 .* but encoding\.json expects") as info:
        load_tokenizer(str(tmp_path))
    assert "\n" not in str(info.value)


def test_corrupt_tiktoken_lines(tmp_path):
    (tmp_path / "bad.tiktoken").write_bytes(b"not-base64!! x\n")
    _encoding_json(tmp_path)
    with pytest.raises(MindcapError, match=r"line 1 is not"):
        load_tokenizer(str(tmp_path / "bad.tiktoken"))


def test_corrupt_sentencepiece_model(tmp_path):
    bad = tmp_path / "tokenizer.model"
    bad.write_bytes(b"\x00\x01 this is not a protobuf \xff" * 10)
    with pytest.raises(MindcapError, match="cannot read SentencePiece model") as info:
        load_tokenizer(str(bad))
    assert "\n" not in str(info.value)


# --- premiums ---------------------------------------------------------------------------------------


def test_pooled_split_adds_both_splits(toks, flores_dir):
    tok = toks["gemma-3"]
    pooled = token_premium(
        tok, ["th"], source=flores_dir, text=PremiumText(split="dev+devtest"), resampling=Resampling(100, 0)
    )[0]
    dev = token_premium(tok, ["th"], source=flores_dir, text=PremiumText(split="dev"), resampling=Resampling(100, 0))[0]
    devtest = token_premium(
        tok, ["th"], source=flores_dir, text=PremiumText(split="devtest"), resampling=Resampling(100, 0)
    )[0]
    assert pooled.n_pairs == dev.n_pairs + devtest.n_pairs == 997 + 1012
    assert pooled.tokens == dev.tokens + devtest.tokens
    assert pooled.ref_tokens == dev.ref_tokens + devtest.ref_tokens
    assert pooled.ci_low < pooled.premium < pooled.ci_high


@pytest.mark.parametrize("model", sorted(COLUMNS))
def test_petrov2023_protocol_matches_their_csv(model, config, flores_dir):
    theirs = petrov2023_lengths(COLUMNS[model], config.data_dir.value)
    tok = load_tokenizer(model, config.tokenizers_dir.value)
    # Thai and German, plus languages where NFC changes the text (their counts are of raw text)
    langs = ["tha_Thai", "deu_Latn", "kas_Deva", "fon_Latn"]
    rows = token_premium(tok, langs, source=flores_dir, text=PremiumText(split="dev+devtest", protocol="petrov2023"))
    for r in rows:
        expected = theirs[r.lang] / theirs["eng_Latn"]
        assert abs(r.premium - expected) / expected < 1e-3, (model, r.lang, r.premium, expected)
        assert (r.ci_low, r.ci_high, r.n_boot, r.n_pairs) == (None, None, 0, 2009)
        assert r.as_dict()["protocol"] == "petrov2023"


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(COLUMNS))
def test_petrov2023_all_languages(model, config, flores_dir):
    from mindcap_tok.data.languages import flores_codes

    theirs = petrov2023_lengths(COLUMNS[model], config.data_dir.value)
    assert len(theirs) == 204
    tok = load_tokenizer(model, config.tokenizers_dir.value)
    codes = [c for c in flores_codes() if c != "eng_Latn"]
    rows = token_premium(tok, codes, source=flores_dir, text=PremiumText(split="dev+devtest", protocol="petrov2023"))
    expected = {r.lang: theirs[r.lang] / theirs["eng_Latn"] for r in rows}
    worst = max(abs(r.premium - expected[r.lang]) / expected[r.lang] for r in rows)
    assert worst < 1e-3


# --- CLI --------------------------------------------------------------------------------------------


def _cli(args):
    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli

    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_cli_one_table_for_every_family():
    res = _cli(["premium", "--model", "gpt-4o", "gemma-3", "qwen3-8b", "--lang", "th", "--n-boot", "100"])
    assert res.exit_code == 0, res.output
    for name in ("gpt-4o", "gemma-3", "qwen3-8b"):
        assert name in res.stdout
    res = _cli(["premium", "--model", "gpt-4o", "llama-2", "--lang", "th", "--n-boot", "100", "--format", "json"])
    rows = json.loads(res.stdout)
    assert [r["model"] for r in rows] == ["gpt-4o", "llama-2"]
    assert all(r["ci_low"] < r["premium"] < r["ci_high"] and r["protocol"] == "per-sentence" for r in rows)


def test_cli_petrov2023_gives_null_cis(config):
    theirs = petrov2023_lengths("cl100k_base", config.data_dir.value)
    args = ["premium", "--model", "gpt-4", "--lang", "th", "--split", "dev+devtest", "--protocol", "petrov2023"]
    res = _cli([*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert (row["tokens"], row["ref_tokens"]) == (theirs["tha_Thai"], theirs["eng_Latn"])
    assert row["ci_low"] is None and row["ci_high"] is None and row["n_boot"] == 0
    assert _cli(args).exit_code == 0  # the table shows "—" for the CI


def test_hf_tokenizer_is_handed_over_where_one_is_needed(qwen):
    assert qwen.require_hf("the tiny model") is qwen.tokenizer


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_each_family_encodes_and_decodes_for_reencoding(toks, name):
    tok = toks[name]
    texts = ["hello world", "", "hello world hello"]
    assert tok.encode_ids(texts) == [GOLDEN[name][1], [], tok.encode("hello world hello")]
    # what a worker process encodes with: the HF tokenizer where there is one (tokenizers can pickle it)
    assert tok.batch_encoder is (tok.tokenizer if tok.family == "tokenizers" else tok)
    # the memoised pre-token encoder exists for tokenizer.json only, and then encodes the same ids
    memo = tok.pretoken_encoder()
    assert (memo is not None) == (tok.family == "tokenizers")
    if memo is not None:
        assert memo.encode("hello world") == GOLDEN[name][1]
    # special tokens: kept as text where re-encoding gives their id back, dropped where it would not
    special = min(tok.special_ids)
    text = tok.decode_for_reencoding([[*GOLDEN[name][1], special]])[0]
    kept = tok.family == "tokenizers"
    assert text == "hello world" + (tok.decode([special]) if kept else "")
    assert (tok.encode(text) == [*GOLDEN[name][1], special]) == kept


def test_a_tiktoken_pretoken_is_encoded_alone(toks):
    backend = toks["gpt-4o"].backend
    line = "Thousands of years ago, 12345 people walked here."
    pat_str = json.loads((toks["gpt-4o"].path.parent / "encoding.json").read_text("utf-8"))["pat_str"]
    pieces = [m.group() for m in regex.finditer(pat_str, line)]
    assert len(pieces) > 5
    # every pat_str piece encoded alone, concatenated, is the line's encoding (the pieces never interact)
    assert [i for p in pieces for i in backend.encode_pretoken(p)] == toks["gpt-4o"].encode(line)
    assert backend.encode_pretoken(" years") == toks["gpt-4o"].encode(" years")
