"""Texts longer than a tokenizer's regex engine can pre-tokenize (tokenization.long_text).

Where the library still copes (texts just over SAFE_CHARS, whitespace runs below its limits), every encode path gives
the library's plain ids; on inputs the library gives up on (a Rust panic), the ids of the pre-tokens worked out by
hand, each encoded by the library's own BPE; where nothing reproduces the pipeline, one line instead of a panic.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from itertools import chain
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from ledger_factory import make_record
from mindcap_tok.adaptation.extend import PreTokenizer, pre_token_counts
from mindcap_tok.adaptation.retokenize import encode_ids
from mindcap_tok.data.flores import load_flores
from mindcap_tok.demo.ledger import build_demo
from mindcap_tok.errors import BadInputError
from mindcap_tok.generation.backends import ChatTokenizer
from mindcap_tok.premium import count_tokens
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from mindcap_tok.tokenization.hf import encode_texts
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.long_text import SAFE_CHARS
from mindcap_tok.tokenization.pretoken_cache import PretokenEncoder
from tokenizer_edits import edited

REPO = Path(__file__).resolve().parents[1]
HF_REGISTRY = ["qwen3-8b", "llama-3.1-8b", "mistral-nemo", "whisper"]
TIKTOKEN_REGISTRY = ["gpt-4o", "gpt-4"]
SCRIPTS = ["eng_Latn", "tha_Thai", "zho_Hans", "arb_Arab", "hin_Deva", "rus_Cyrl", "swh_Latn", "kor_Hang"]
#: scripts DeepSeek-V3's three split regexes treat apart (digits, CJK and kana, letters and marks, punctuation)
DEEPSEEK_SCRIPTS = [*SCRIPTS, "jpn_Jpan", "yue_Hant", "amh_Ethi", "mya_Mymr", "ell_Grek", "heb_Hebr"]
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
    runs=st.lists(
        st.tuples(st.sampled_from(RUNS), st.integers(1, 4000), st.sampled_from(AFTER)), min_size=1, max_size=12
    ),
    at=st.lists(st.floats(0, 1), min_size=12, max_size=12),
)
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


def byte_level_ids(tok, pieces: list[str]) -> list[int]:
    """Each pre-token through the tokenizer's own BPE model (the ids of pre-tokens worked out by hand)."""
    return [t.id for p in pieces for t in tok.model.tokenize("".join(BYTE_TO_CHAR[b] for b in p.encode()))]


@pytest.fixture(scope="module")
def deepseek(config) -> Tokenizer:
    return Tokenizer.from_file(str(config.tokenizers_dir.value / "deepseek-v3" / "tokenizer.json"))


def test_deepseek_sequence_of_splits_gives_the_plain_ids(deepseek, flores_dir, flores_long):
    encoder = PretokenEncoder.from_tokenizer(deepseek)
    assert encoder is not None
    texts = [s for code in DEEPSEEK_SCRIPTS for s in load_flores(code, "dev", source=flores_dir)[:60]]
    texts += ["1234567 89\n\n  x<｜fim▁hole｜>y <｜end▁of▁sentence｜>!!\r\n", "日本語のテキスト123です。", " \t\n 9ab"]
    texts += [flores_long, "1" * 9 + flores_long[: SAFE_CHARS + 7]]
    want = plain_hf(deepseek, texts)
    assert [encoder.encode(t) for t in texts] == want
    assert encode_texts(deepseek, texts) == want


@pytest.mark.slow
def test_deepseek_ten_million_spaces_give_ids(deepseek):
    # "\s+(?!\S)" takes all spaces but the last, which goes with the letter ("[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+")
    text = " " * 10_500_000 + "a"
    assert encode_texts(deepseek, [text]) == [byte_level_ids(deepseek, [" " * 10_499_999, " a"])]


@pytest.mark.parametrize("name", ["qwen3", "llama3.1"])
def test_chat_tokenizer_gives_transformers_ids(config, flores_dir, flores_long, name):
    tok = ChatTokenizer(str(config.tokenizers_dir.value / name), name)
    texts = [s for code in SCRIPTS for s in load_flores(code, "dev", source=flores_dir)[:5]]
    texts += [flores_long, "<|im_end|>" + flores_long[: SAFE_CHARS + 3]]
    for text in texts:
        want = list(tok.hf(text, add_special_tokens=False)["input_ids"])
        assert tok.encode(text) == want
    tok.hf.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    rendered = f"<|im_start|>user\n{texts[0]}<|im_end|>\n"
    assert tok.chat(texts[0]) == (rendered, list(tok.hf(rendered, add_special_tokens=False)["input_ids"]))


@pytest.mark.parametrize("name", ["qwen3-8b", "llama-3.1-8b"])
def test_extension_pre_tokens_of_long_text_are_the_librarys(config, flores_dir, flores_long, name):
    tok = load_tokenizer(name, config.tokenizers_dir.value).tokenizer
    pre = PreTokenizer(tok)
    for text in [*load_flores("tha_Thai", "dev", source=flores_dir)[:20], flores_long]:
        want = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(text)]
        assert pre.pieces(text) == want


def test_demo_refuses_a_question_past_safe_chars_in_one_line(tmp_path, qwen, config):
    data = tmp_path / "data"
    shutil.copytree(config.data_dir.value / "mgsm", data / "mgsm")
    tsv = data / "mgsm" / "mgsm_th.tsv"
    rows = tsv.read_text("utf-8").split("\n")
    rows[1] = "ไข่ " * (SAFE_CHARS // 4) + rows[1]
    tsv.write_text("\n".join(rows), "utf-8")
    with pytest.raises(BadInputError, match=r"MGSM tha_Thai item 2: the question has [\d,]+ characters") as info:
        build_demo(tmp_path / "demo", 1, n_items=3, k=1, tokenizer=qwen, data_dir=data)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "demo").exists()


def _jsonl_source(folder: Path, qwen, text: str) -> list[str]:
    record = make_record(qwen, "a", cap=100_000, finish_reason="stop")
    del record["output_ids"]  # encoded on import, from the text
    record["text"] = text
    (folder / "gen.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return [str(folder / "gen.jsonl")]


def _lm_eval_source(folder: Path, qwen, text: str) -> list[str]:
    # one sample line of lm-eval 0.4's --log_samples schema
    args = {"gen_args_0": {"arg_0": "โจทย์: 1", "arg_1": {"until": ["โจทย์:"], "max_gen_toks": 100_000}}}
    line = {
        "doc_id": 0,
        "doc": {},
        "target": "1",
        "filter": "strict-match",
        "arguments": args,
        "resps": [[text]],
        "filtered_resps": ["1"],
    }
    (folder / "samples_mgsm_native_cot_th_2026-01-01T00-00-00.000000.jsonl").write_text(json.dumps(line) + "\n")
    return [str(folder), "--from", "lm-eval", "--tokenizer", "qwen3-8b"]


@pytest.mark.slow
@pytest.mark.parametrize("source", [_jsonl_source, _lm_eval_source], ids=["jsonl", "lm-eval"])
def test_ledger_import_of_ten_million_spaces(tmp_path, qwen, source):
    # in a child process, so that a Rust panic message (written to file descriptor 2) would be seen
    text = " " * 10_500_000 + "a"
    (tmp_path / "in").mkdir()
    args = [*source(tmp_path / "in", qwen, text), "--out-dir", str(tmp_path / "L")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "mindcap_tok", "ledger", "import", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "panick" not in proc.stderr and proc.stderr.count("\n") <= 1, proc.stderr
    (ids,) = Ledger(tmp_path / "L").to_pandas()["output_ids"]
    assert list(ids) == byte_level_ids(qwen.tokenizer, [" " * 10_499_999, " a"])


def test_extension_pre_tokens_of_ten_million_spaces(qwen):
    # the library would give up on this text; the pre-tokens by hand, in byte-level spelling ("Ġ" is a space)
    counts = pre_token_counts(qwen.tokenizer, ["ok " + " " * 10_500_000 + "a"])
    assert counts == Counter({"ok": 1, "Ġ" * 10_500_000: 1, "Ġa": 1})
