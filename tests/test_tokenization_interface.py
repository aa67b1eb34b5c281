"""One tokenizer interface: nothing outside ``mindcap_tok.tokenization`` branches on a tokenizer's family, however
the branch is spelled, and the three back ends answer the same Protocol, content hash and extension family included."""

from __future__ import annotations

import ast
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
#: the families' names, and names of values that say which family (or extension format) a tokenizer has;
#: ``"tokenizers"`` is also a plain word (an audit needs tokenizers), so it counts only against such a value
FAMILY_NAMES = {"tiktoken", "sentencepiece"}
CAPABILITIES = {"family", "extension_format", "writes_ranks"}
#: attributes that exist for one family only (the library object, or a family's part of an extension)
FAMILY_ATTRIBUTES = {"hf", "tokenizer", "enc", "sp", "pieces"}
#: classes of one family: the back ends and the libraries' own objects
FAMILY_CLASSES = {
    "HFBackend",
    "TiktokenBackend",
    "SentencePieceBackend",
    "TiktokenEngine",
    "Tokenizer",
    "Encoding",
    "SentencePieceProcessor",
}


def _name(node: ast.AST) -> str | None:
    """``x`` for a name ``x`` or an attribute ``a.b.x``."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _literals(node: ast.AST) -> list[str]:
    """The strings a literal (or a tuple, list or set of literals) holds."""
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [x.value for x in items if isinstance(x, ast.Constant) and isinstance(x.value, str)]


def _says_family(node: ast.AST) -> bool:
    name = _name(node)
    return name is not None and (name in CAPABILITIES or name.endswith("FAMILIES"))


def _compare(node: ast.Compare) -> str | None:
    sides = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, sides, sides[1:], strict=False):
        pair = (left, right)
        if isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq) and any(
            isinstance(x, ast.Constant) and x.value is None for x in pair
        ):
            named = [_name(x) for x in pair if isinstance(x, ast.Attribute)]
            if any(n in FAMILY_ATTRIBUTES | CAPABILITIES for n in named):
                return "a family attribute compared with None"
        if isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
            if any(_says_family(x) for x in pair) and (any(_literals(x) for x in pair) or any(map(_says_family, pair))):
                return "a family or capability name compared with a literal"
            if any(set(_literals(x)) & FAMILY_NAMES for x in pair):
                return "a family name compared"
    return None


def _private_names(root: Path) -> set[str]:
    """Private names the package defines itself (functions, classes, attributes, variables, modules)."""
    names = {p.stem for p in root.rglob("_*.py")}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name | ast.arg):
                names.add(node.id if isinstance(node, ast.Name) else node.arg)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
    return {n for n in names if n.startswith("_")}


def _why(node: ast.AST, own: set[str]) -> str | None:
    """Why ``node`` branches on a family (or reaches into a library's private API), else ``None``."""
    if isinstance(node, ast.Compare):
        return _compare(node)
    if isinstance(node, ast.Match):
        cases = [_literals(c.pattern.value) for c in node.cases if isinstance(c.pattern, ast.MatchValue)]
        if _says_family(node.subject) or any(set(c) & FAMILY_NAMES for c in cases):
            return "a match on a family"
    if isinstance(node, ast.Call) and _name(node.func) in ("isinstance", "issubclass") and len(node.args) == 2:
        classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
        if any(_name(c) in FAMILY_CLASSES for c in classes):
            return "isinstance on a family class"
    if (
        isinstance(node, ast.Call)
        and _name(node.func) in ("getattr", "hasattr")
        and len(node.args) >= 2
        and set(_literals(node.args[1])) & (FAMILY_ATTRIBUTES | CAPABILITIES)
    ):
        return "getattr with a family attribute's name"
    if (
        isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and node.attr not in own
        and _name(node.value) not in ("self", "cls")
    ):
        return "a private attribute of a library's object"
    return None


def _branches(root: Path) -> list[str]:
    own = _private_names(root)
    out = []
    for path in sorted(root.rglob("*.py")):
        if "tokenization" in path.relative_to(root).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            why = _why(node, own)
            if why is not None:
                out.append(f"{path.relative_to(root)}:{node.lineno}: {why}")
    return sorted(out, key=lambda b: (b.split(":")[0], int(b.split(":")[1])))


def test_no_code_outside_the_subpackage_branches_on_a_family():
    assert _branches(PACKAGE) == []


#: one line per spelling of a family branch, then lines that are no branch
_PROBE_BRANCHES = [
    'if tok.family == "tiktoken": pass',
    "if base.family not in EXTENDABLE_FAMILIES: pass",
    "x = t.tokenizer if t.family != 'tokenizers' else t",
    'if "sentencepiece" == tok.family: pass',
    'if x.extension_format == "ranks": pass',
    'if base.extension_format in ("ranks", "pieces"): pass',
    "if ext.pieces is not None: pass",
    "if tokenizer.tokenizer is None: pass",
    "y = tok.backend.hf is None",
    "z = b.enc == None",
    "if base.extension_format is None: pass",
    "if isinstance(tok.backend, TiktokenBackend): pass",
    "ok = isinstance(b, (int, backends.SentencePieceBackend))",
    'sp = getattr(tok.backend, "sp", None)',
    'has = hasattr(backend, "enc")',
    "ids = enc._encode_single_piece(w)",
    'if "tiktoken" in names: pass',
]
_PROBE_MATCH = """
match tok.family:
    case "tiktoken":
        pass
match fmt:
    case "sentencepiece":
        pass
"""
_PROBE_FINE = [
    'manifest = {"family": tok.family}',  # recording the name is no branch
    "if tokenization.family_of(x): pass",
    "if tokenizer is None: pass",  # a variable, not a family's attribute
    "n = self._cache",
    "m = mine._helper",  # a private name the probe package defines itself
    "def _helper(): pass",
    'if rule.name == "fixed-count": pass',
    'if "tokenizers" in spec.needs: pass',  # the plain word
    "if isinstance(x, ResolvedTokenizer): pass",
]


def test_the_branch_search_finds_each_spelling(tmp_path):
    (tmp_path / "m.py").write_text("\n".join(_PROBE_BRANCHES) + "\n", "utf-8")
    (tmp_path / "match.py").write_text(_PROBE_MATCH, "utf-8")
    (tmp_path / "fine.py").write_text("\n".join(_PROBE_FINE) + "\n", "utf-8")
    (tmp_path / "tokenization").mkdir()
    (tmp_path / "tokenization" / "ok.py").write_text('if family == "tiktoken":\n    x = enc._encode_single_piece(w)\n')
    found = _branches(tmp_path)
    assert [b.split(":")[0] for b in found] == ["m.py"] * len(_PROBE_BRANCHES) + ["match.py"] * 2
    assert [int(b.split(":")[1]) for b in found] == [*range(1, len(_PROBE_BRANCHES) + 1), 2, 5]
    assert "private attribute" in found[len(_PROBE_BRANCHES) - 2] and "isinstance" in found[11]


class _Which:
    """An extension-family visitor that answers which method a back end called, and with what."""

    def merges(self, backend: object) -> tuple[str, object]:
        return "merges", backend

    def ranks(self, backend: object) -> tuple[str, object]:
        return "ranks", backend

    def pieces(self, backend: object) -> tuple[str, object]:
        return "pieces", backend


def test_every_family_implements_the_protocol(config, qwen):
    toks = [qwen] + [load_tokenizer(n, config.tokenizers_dir.value) for n in ("gpt-4o", "gemma-3")]
    assert [isinstance(t.backend, TokenizerBackend) for t in toks] == [True, True, True]
    # capabilities instead of family names: each back end picks its own way of extending, handing over itself
    assert [t.extension(_Which()) for t in toks] == [("merges", t.backend) for t in toks[:1]] + [
        ("ranks", toks[1].backend),
        ("pieces", toks[2].backend),
    ]
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
