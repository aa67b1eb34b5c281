"""Issue 21: one tokenizer interface. Nothing outside ``mindcap_tok.tokenization`` branches on a family's name,
and the three back ends answer the same Protocol, content hash included."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

from mindcap_tok.tokenization.base import TokenizerBackend
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.pipeline import pipeline
from mindcap_tok.tokenization.tiktoken_family import build_tiktoken

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mindcap_tok"
_NAME = r"""(["'](tokenizers|tiktoken|sentencepiece)["']|[A-Z_]*FAMILIES)"""
#: ``family == "tiktoken"``, ``family not in FAMILIES``, ``"tiktoken" != x.family``...
_BRANCH = re.compile(rf"family\b\s*(==|!=|\bin\b|\bnot in\b)\s*{_NAME}|{_NAME}\s*(==|!=)\s*[\w.]*family\b")


def _branches(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{n}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if "tokenization" not in path.relative_to(root).parts
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if _BRANCH.search(line)
    ]


def test_no_code_outside_the_subpackage_branches_on_a_family_name():
    assert _branches(PACKAGE) == []


def test_the_branch_search_finds_each_spelling(tmp_path):
    lines = [
        'if tok.family == "tiktoken":',
        "if base.family not in EXTENDABLE_FAMILIES:",
        "x = t.tokenizer if t.family != 'tokenizers' else t",
        'if "sentencepiece" == tok.family:',
        'manifest = {"family": tok.family}',  # recording the name is no branch
        "if tokenization.family_of(x):",
    ]
    (tmp_path / "m.py").write_text("\n".join(lines) + "\n", "utf-8")
    (tmp_path / "tokenization").mkdir()
    (tmp_path / "tokenization" / "ok.py").write_text('if family == "tiktoken":\n', "utf-8")
    assert [b.split(":")[1] for b in _branches(tmp_path)] == ["1", "2", "3", "4"]


def test_every_family_implements_the_protocol(config, qwen):
    toks = [qwen] + [load_tokenizer(n, config.tokenizers_dir.value) for n in ("gpt-4o", "gemma-3")]
    assert [isinstance(t.backend, TokenizerBackend) for t in toks] == [True, True, True]
    # capabilities instead of family names: which can be extended and how, which has a HF tokenizer
    assert [t.extension_format for t in toks] == ["merges", "ranks", "pieces"]  # SentencePiece BPE: issue 25
    assert [t.tokenizer is not None for t in toks] == [True, False, False]


def test_a_tiktoken_built_in_memory_is_hashed_as_its_files():
    # the 256 bytes, one merge; hashed as the .tiktoken lines followed by an encoding.json of the rest
    ranks = {bytes([i]): i for i in range(256)} | {b"ab": 256}
    backend = build_tiktoken("tiny", r"\S+|\s+", ranks=ranks, specials={"<|end|>": 257})
    rank_file = "".join(f"{base64.b64encode(b).decode()} {r}\n" for b, r in ranks.items()).encode()
    spec = b'{"name": "tiny", "pat_str": "\\\\S+|\\\\s+", "special_tokens": {"<|end|>": 257}}'
    assert json.loads(spec)["pat_str"] == r"\S+|\s+"
    assert backend.content_sha256() == hashlib.sha256(rank_file + spec).hexdigest()


#: a tokenizer.json parsed by hand: json.loads of the tokenizer's text or of one of its nodes' state
_OWN_PARSE = re.compile(r"json\.loads\([^)]*(to_str|__getstate__)\(")


def test_only_the_pipeline_module_parses_a_tokenizer_json():
    # bytelevel.is_byte_level reads the decoder's state alone (no pipeline reader needs the decoder)
    own = [
        f"{p.relative_to(PACKAGE)}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name not in ("pipeline.py", "bytelevel.py") and _OWN_PARSE.search(p.read_text("utf-8"))
    ]
    assert own == []


def test_the_pipeline_is_parsed_once_and_reads_the_file(config, qwen):
    path = config.tokenizers_dir.value / "qwen3" / "tokenizer.json"
    by_hand = json.loads(path.read_text("utf-8"))
    pipe = pipeline(qwen.tokenizer)
    assert pipeline(qwen.tokenizer) is pipe  # one parse per distinct text
    assert pipe.model_type == by_hand["model"]["type"] == "BPE"
    assert [n["type"] for n in pipe.normalizers] == ["NFC"]
    assert [s["type"] for s in pipe.pre_tokenizers] == ["Split", "ByteLevel"]
    assert pipe.pre_tokenizer_types == {"Sequence", "Split", "ByteLevel"}
    assert [t["content"] for t in pipe.added_tokens] == [t["content"] for t in by_hand["added_tokens"]]
