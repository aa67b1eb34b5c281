"""The three tokenizer libraries behind :class:`~mindcap_tok.tokenizer.ResolvedTokenizer`.

Each back end wraps one library and answers the same small set of questions (encode without special
tokens, decode, the UTF-8 bytes of every id, vocabulary size, special ids):

- ``tokenizers``: a Hugging Face ``tokenizer.json``;
- ``tiktoken``: a ``.tiktoken`` rank file plus the ``encoding.json`` beside it (name, ``pat_str``, special
  tokens and, optionally, the rank file's ``sha256``), built offline with ``tiktoken.Encoding``;
- ``sentencepiece``: a SentencePiece ``.model`` protobuf.

``tiktoken`` and ``sentencepiece`` are imported only when such a file is loaded. :func:`tiktoken_engine` also runs
a byte-level BPE ``tokenizer.json`` with tiktoken (same ids, about three times faster), when its pipeline is one
tiktoken runs exactly.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ._io import regular_file
from .errors import MindcapError, first_line

FAMILIES = ("tokenizers", "tiktoken", "sentencepiece")
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class HFBackend:
    """A Hugging Face ``tokenizers.Tokenizer`` (family ``tokenizers``)."""

    family = "tokenizers"

    def __init__(self, tok: Tokenizer) -> None:
        self.hf = tok

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, no special tokens."""
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text, no special tokens (one batched, multi-threaded call)."""
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text, no special tokens."""
        encode = getattr(self.hf, "encode_batch_fast", self.hf.encode_batch)
        return np.fromiter(
            (len(e.ids) for e in encode(list(texts), add_special_tokens=False)), dtype=np.int64, count=len(texts)
        )

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens kept)."""
        return self.hf.decode(list(ids), skip_special_tokens=False)

    def decode_batch(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """The text of every id sequence (one multi-threaded call)."""
        seqs = [x if isinstance(x, list) else list(x) for x in ids]  # lists pass as they are (no copy)
        return self.hf.decode_batch(seqs, skip_special_tokens=skip_special_tokens)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added and special tokens included."""
        return self.hf.get_vocab_size(with_added_tokens=True)

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """Ids of added tokens marked special."""
        return frozenset(i for i, t in self.hf.get_added_tokens_decoder().items() if t.special)

    def token_bytes(self) -> list[bytes]:
        """The bytes each id decodes to (index = id)."""
        from .tokenizer import token_bytes

        return token_bytes(self.hf)


class TiktokenBackend:
    """A ``tiktoken.Encoding`` built from a local rank file (family ``tiktoken``)."""

    family = "tiktoken"

    def __init__(self, enc: Any, specials: dict[str, int]) -> None:
        self.enc = enc
        self.specials = dict(specials)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; special-token text is encoded as ordinary text."""
        return self.enc.encode_ordinary(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text (``encode_ordinary_batch``, threaded)."""
        return self.enc.encode_ordinary_batch(list(texts))

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text."""
        ids = self.encode_batch(texts)
        return np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (invalid UTF-8 replaced, as tiktoken does)."""
        return self.enc.decode(list(ids))

    def decode_batch(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """The text of every id sequence (``decode_batch``, threaded); skipping drops the special ids first."""
        return self.enc.decode_batch(_without(ids, self.special_ids if skip_special_tokens else frozenset()))

    @property
    def vocab_size(self) -> int:
        """``n_vocab``: highest id + 1 (ids between the ranks and the specials may be unused)."""
        return self.enc.n_vocab

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """Ids of the special tokens from ``encoding.json``."""
        return frozenset(self.specials.values())

    def token_bytes(self) -> list[bytes]:
        """Each rank's bytes; special tokens as their text; unused ids as ``b""``."""
        out = [b""] * self.enc.n_vocab
        for i in range(self.enc.n_vocab):
            with contextlib.suppress(KeyError):  # an id neither a rank nor a special token
                out[i] = self.enc.decode_single_token_bytes(i)
        return out


class SentencePieceBackend:
    """A ``sentencepiece.SentencePieceProcessor`` (family ``sentencepiece``).

    ``dummy_prefix`` is true when the model prepends ``▁`` to its input (Llama 2): that space belongs to the
    first token's bytes, so the concatenated bytes of ``encode(text)`` are ``" " + text``; ``decode`` drops it.
    """

    family = "sentencepiece"

    def __init__(self, sp: Any) -> None:
        self.sp = sp

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, no BOS/EOS."""
        return self.sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text, no BOS/EOS (one call on the list; sentencepiece threads it)."""
        return self.sp.encode(list(texts))

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text."""
        ids = self.encode_batch(texts)
        return np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (sentencepiece's own decode)."""
        return self.sp.decode(list(ids))

    def decode_batch(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """The text of every id sequence (one call on the list); skipping drops control and unknown ids first."""
        seqs = _without(ids, self.special_ids if skip_special_tokens else frozenset())
        return self.sp.decode(seqs) if seqs else []

    @property
    def vocab_size(self) -> int:
        """Number of pieces."""
        return self.sp.get_piece_size()

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """Control pieces (``<s>``, ``</s>``, ``<pad>``...) and the unknown piece."""
        n = self.sp.get_piece_size()
        return frozenset(i for i in range(n) if self.sp.is_control(i) or self.sp.is_unknown(i))

    @cached_property
    def dummy_prefix(self) -> bool:
        """True when the model adds a leading ``▁`` to every input."""
        return self.sp.encode("a", out_type=str)[:1] == ["▁a"]

    def token_bytes(self) -> list[bytes]:
        """``▁`` → space; ``<0xNN>`` byte-fallback pieces → that byte; control and unknown pieces as their text."""
        sp = self.sp
        out: list[bytes] = []
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if sp.is_byte(i):
                m = _BYTE_PIECE.fullmatch(piece)
                out.append(bytes([int(m.group(1), 16)]) if m else b"")
            elif sp.is_control(i) or sp.is_unknown(i):
                out.append(piece.encode("utf-8"))
            else:
                out.append(piece.replace("▁", " ").encode("utf-8"))
        return out


Backend = HFBackend | TiktokenBackend | SentencePieceBackend


def _without(ids: Sequence[Sequence[int]], drop: frozenset[int]) -> list[list[int]]:
    """Every id sequence as a list, ids in ``drop`` left out."""
    if not drop:
        return [list(x) for x in ids]
    return [[i for i in x if i not in drop] for x in ids]


class TiktokenEngine:
    """A byte-level BPE ``tokenizer.json`` run by tiktoken: the ids ``tokenizers`` gives (see :func:`tiktoken_engine`).

    As in ``tokenizers``, an added token found in the text is one token whatever ``add_special_tokens`` says, and
    the normaliser (NFC or none) applies to the text between added tokens.
    """

    family = "tiktoken"

    def __init__(self, enc: Any, nfc: bool, added: dict[str, int]) -> None:
        self.enc = enc
        self.nfc = nfc
        self.added = dict(added)
        # longest first: re's leftmost match then takes the longest token, as tokenizers' matcher does
        longest_first = sorted(self.added, key=len, reverse=True)
        self._added_re = re.compile("|".join(map(re.escape, longest_first))) if self.added else None

    def _normalize(self, text: str) -> str:
        return unicodedata.normalize("NFC", text) if self.nfc else text

    def _encode_with_added(self, text: str) -> list[int]:
        ids: list[int] = []
        start = 0
        for m in self._added_re.finditer(text):
            ids += self.enc.encode_ordinary(self._normalize(text[start : m.start()]))
            ids.append(self.added[m.group()])
            start = m.end()
        return ids + self.enc.encode_ordinary(self._normalize(text[start:]))

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (no post-processor: no BOS/EOS)."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text: one threaded ``encode_ordinary_batch`` for the texts without added tokens."""
        texts = list(texts)
        with_added: set[int] = set()
        # one search over all texts first: per-text searches only when some added token occurs somewhere
        if self._added_re is not None and self._added_re.search("\x00".join(texts)):
            with_added = {i for i, t in enumerate(texts) if self._added_re.search(t)}
        plain = iter(
            self.enc.encode_ordinary_batch([self._normalize(t) for i, t in enumerate(texts) if i not in with_added])
        )
        return [self._encode_with_added(t) if i in with_added else next(plain) for i, t in enumerate(texts)]

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text."""
        ids = self.encode_batch(texts)
        return np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))


# text the two libraries must encode alike before the engine is used: scripts, digits, spacing, contractions, emoji
_PROBE = [
    "Hello world, it's 2024: 12345 items cost $3.50!\n\n  Next\tline\r\nend   ",
    "ภาษาไทย ไม่มีช่องว่าง Kiswahili ni lugha; Deutsch: Größe, Straße. 中文测试，日本語のテキスト。한국어 문장",
    "e\u0301 \u0915\u094d\u0937 \U0001f469\u200d\U0001f4bb \U0001f1f0\U0001f1ea 'LL 'Re I'M ǅ ٣٤٥ \u00a0\u2003x\u3000y",
    "def f(x):\n    return x**2  # comment\n\n\n\t\t}",
]


_N_CATEGORIES = 28  # Unicode general categories other than Cs and Cn


def _probe_texts(added: Sequence[str]) -> list[str]:
    # one character of every Unicode general category (surrogates and unassigned left out) and each added token
    seen: dict[str, str] = {}
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat not in ("Cs", "Cn"):
            seen.setdefault(cat, chr(cp))
            if len(seen) == _N_CATEGORIES:
                break
    return [*_PROBE, " ".join(seen.values()), "".join(seen.values()), *(f"a{t}b {t}" for t in added)]


class NotEligible(MindcapError):
    """A ``tokenizer.json`` whose pipeline tiktoken cannot run exactly."""

    names_source = False  # its message stands alone (no spec file named in front)


def _check(condition: bool, reason: str) -> None:
    if not condition:
        raise NotEligible(f"not run by tiktoken: {reason}")


def _merge_pairs(merges: list) -> list[tuple[str, str]]:
    # tokenizers stores merges as [a, b] pairs (>= 0.20) or as "a b" strings
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in merges]


def _byte_level_ranks(model: dict, added_ids: set[int]) -> dict[bytes, int]:
    """Token bytes -> id for a byte-level BPE vocab (added tokens left out: they are matched before BPE), after
    checking that tiktoken's BPE (merge the adjacent pair whose concatenation has the lowest id) is the merges'.
    """
    from .tokenizer import CHAR_TO_BYTE, TO_LATIN1

    vocab = {piece: i for piece, i in model["vocab"].items() if i not in added_ids}
    _check(set("".join(vocab)) <= CHAR_TO_BYTE.keys(), "the vocabulary is not byte-level")
    ranks = {piece.translate(TO_LATIN1).encode("latin-1"): i for piece, i in vocab.items()}
    _check(all(bytes([b]) in ranks for b in range(256)), "some byte has no token")
    merges = _merge_pairs(model["merges"])
    made = [vocab.get(a + b, -1) if a in vocab and b in vocab else -1 for a, b in merges]
    bad = next((m for m, ab in zip(merges, made, strict=True) if ab < 0), None)
    _check(bad is None, f"merge {bad} is not of tokens into a token")
    bad = next((m for m, ab, before in zip(merges[1:], made[1:], made, strict=False) if ab < before), None)
    _check(bad is None, f"merge {bad} is out of the order of the ids the merges make")
    pairs = set(merges)
    if model.get("ignore_merges"):
        # tiktoken may merge any adjacent pair whose concatenation is a token: every such split must be a merge,
        # so both libraries see the same pairs and take them in the same order (by the id they make)
        splits = ((p[:k], p[k:]) for p in vocab for k in range(1, len(p)))
        bad = next((s for s in splits if s[0] in vocab and s[1] in vocab and s not in pairs), None)
        _check(bad is None, f"{bad} makes a token but is no merge")
    else:
        # one merge per token, each above its parts: with "every token is its own BPE" (checked by the caller),
        # tiktoken then only ever merges the one merge of each token it makes
        _check(len(pairs) == len(set(made)), "several merges make one token")
        bad = next((m for m, ab in zip(merges, made, strict=True) if ab <= max(vocab[m[0]], vocab[m[1]])), None)
        _check(bad is None, f"merge {bad} makes an id below its parts'")
    return ranks


def tiktoken_engine(tok: Tokenizer) -> TiktokenEngine:
    """``tok`` as a tiktoken encoding, or :class:`NotEligible` naming what tiktoken cannot run exactly.

    Written here: neither library converts a ``tokenizer.json`` into a tiktoken ``Encoding``.

    Eligible: normaliser none or NFC (applied here, with Python's ``unicodedata``); pre-tokeniser
    ``Sequence[Split(regex, Isolated), ByteLevel(add_prefix_space=false, use_regex=false)]`` (the regex becomes
    tiktoken's ``pat_str``); model BPE without dropout, byte fallback or subword affixes, over a byte-level
    vocabulary holding every byte; the merges are listed in the order of the id they make, so tiktoken's
    lowest-rank-first order (rank = id) is the merge order. tiktoken merges every adjacent pair that makes a
    token and looks whole pieces up first: with ``ignore_merges`` (Llama 3.x) every such split must be a merge;
    without it (Qwen), each token has one merge, its id above its parts', and must be its own BPE. Added tokens: plain
    strings (no lstrip/rstrip/single_word), matched before normalising, outside the vocabulary. No truncation
    or padding. Last, both libraries must give the same ids on a probe text (one character of every Unicode
    category, several scripts, spacing, the added tokens): this catches regex-dialect differences (tokenizers
    runs Oniguruma, tiktoken fancy-regex). Characters newer than Python's Unicode tables are not covered by the
    probe; the tests check identical counts on all of FLORES-200.
    """
    spec = json.loads(tok.to_str())
    model, pre, norm = spec["model"], spec.get("pre_tokenizer") or {}, spec.get("normalizer")
    _check(model.get("type") == "BPE", f"model {model.get('type')}, not BPE")
    _check(not model.get("dropout"), "BPE dropout")
    _check(not model.get("byte_fallback"), "byte fallback")
    _check(not model.get("continuing_subword_prefix") and not model.get("end_of_word_suffix"), "subword affixes")
    norms = norm.get("normalizers", []) if norm and norm.get("type") == "Sequence" else [norm] if norm else []
    _check(len(norms) <= 1 and all(n.get("type") == "NFC" for n in norms), f"normaliser {norm}")
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    _check(
        len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel",
        "pre-tokeniser is not one Split then ByteLevel",
    )
    split, byte_level = steps
    _check(
        "Regex" in split["pattern"] and split.get("behavior") == "Isolated" and not split.get("invert"),
        "Split is not an isolating regex",
    )
    _check(
        byte_level.get("add_prefix_space", True) is False and byte_level.get("use_regex", True) is False,
        "ByteLevel adds a space or splits",
    )
    _check(tok.truncation is None and tok.padding is None and not tok.encode_special_tokens, "truncation or padding")
    added = tok.get_added_tokens_decoder()
    _check(
        all(not (t.lstrip or t.rstrip or t.single_word or (t.normalized and norms)) for t in added.values()),
        "an added token strips spaces, matches single words or is matched after normalising",
    )
    ranks = _byte_level_ranks(model, set(added))
    if not model.get("ignore_merges"):
        # tokenizers' own BPE over each token's characters, as one word (no normaliser, no pre-tokeniser)
        words = list(model["vocab"])
        bpe = Tokenizer(tok.model).encode_batch_fast(words, add_special_tokens=False)
        _check(all(e.ids == [model["vocab"][w]] for w, e in zip(words, bpe, strict=True)), "a token is not its own BPE")
    specials = {t.content: i for i, t in added.items()}
    try:
        import tiktoken

        enc = tiktoken.Encoding(
            "tokenizer.json", pat_str=split["pattern"]["Regex"], mergeable_ranks=ranks, special_tokens={}
        )
    except Exception as exc:  # tiktoken raises ValueError (a regex fancy-regex rejects) or panics
        raise NotEligible(f"not run by tiktoken: {first_line(exc)}") from exc
    engine = TiktokenEngine(enc, nfc=bool(norms), added=specials)
    probe = _probe_texts(list(specials))
    reference = [e.ids for e in tok.encode_batch(probe, add_special_tokens=False)]
    _check(engine.encode_batch(probe) == reference, "tiktoken and tokenizers disagree on the probe text")
    return engine


#: what counts tokens: a back end, or the faster exact engine for a tokenizer.json
Counter = Backend | TiktokenEngine


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_rank_file(data: bytes, path: Path) -> dict[bytes, int]:
    """``<base64 token> <rank>`` lines -> {token bytes: rank} (the format ``tiktoken.load.load_tiktoken_bpe`` reads).

    Parsed here rather than by ``load_tiktoken_bpe``, which keeps a copy in a temp-folder cache keyed by the
    path only and would serve a stale copy after the file changes.
    """
    ranks: dict[bytes, int] = {}
    for n, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise MindcapError(f"{path}: line {n} is not '<base64 token> <rank>' (a corrupt .tiktoken file?)") from exc
    if not ranks:
        raise MindcapError(f"{path}: no ranks in this .tiktoken file")
    return ranks


def tiktoken_files(rank_file: Path) -> Path:
    """The ``encoding.json`` that must sit beside a ``.tiktoken`` rank file."""
    spec = regular_file(rank_file.parent / "encoding.json", "tiktoken encoding file")
    if not spec.is_file():
        raise MindcapError(
            f"{rank_file} needs an encoding.json beside it (name, pat_str, special_tokens); none in {rank_file.parent}"
        )
    return spec


@lru_cache(maxsize=4)
def _read_tiktoken(rank_file: Path, spec_file: Path, mtimes: tuple[int, int]) -> tuple[TiktokenBackend, str]:
    try:
        spec = json.loads(spec_file.read_text(encoding="utf-8"))
        pat_str, specials = spec["pat_str"], dict(spec.get("special_tokens", {}))
        name = str(spec.get("name", rank_file.stem))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MindcapError(f"cannot read {spec_file}: {first_line(exc)} (need name, pat_str, special_tokens)") from exc
    data = rank_file.read_bytes()
    digest = _sha256(data)
    expected = spec.get("sha256")
    if expected and expected.lower() != digest:
        raise MindcapError(
            f"{rank_file} has sha256 {digest[:12]}…, but {spec_file.name} expects {str(expected)[:12]}… "
            "(wrong or corrupt rank file)"
        )
    ranks = parse_rank_file(data, rank_file)
    backend = build_tiktoken(name, pat_str, ranks, specials, str(rank_file))
    return backend, tiktoken_sha256(data, spec_file.read_bytes())


def tiktoken_sha256(rank_data: bytes, spec_data: bytes) -> str:
    """The hash a tiktoken tokenizer is known by: SHA-256 of the rank file's bytes followed by ``encoding.json``'s."""
    return _sha256(rank_data + spec_data)


def build_tiktoken(
    name: str, pat_str: str, ranks: dict[bytes, int], specials: dict[str, int], where: str = "ranks"
) -> TiktokenBackend:
    """A tiktoken back end from ranks in memory (ids may have gaps; specials keep their ids)."""
    try:
        import tiktoken
    except ImportError as exc:  # a core dependency; only a broken install lacks it
        raise MindcapError("tiktoken is not installed (pip install tiktoken)") from exc
    try:
        enc = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)
    except Exception as exc:  # tiktoken raises ValueError/AssertionError for inconsistent specs
        raise MindcapError(f"cannot build tiktoken encoding from {where}: {first_line(exc)}") from exc
    return TiktokenBackend(enc, specials)


def load_tiktoken(rank_file: Path) -> tuple[TiktokenBackend, str]:
    """Back end for a ``.tiktoken`` file, and the SHA-256 of the rank file's bytes followed by ``encoding.json``'s."""
    rank_file = regular_file(rank_file.resolve(), "tiktoken rank file")
    spec = tiktoken_files(rank_file)
    return _read_tiktoken(rank_file, spec, (rank_file.stat().st_mtime_ns, spec.stat().st_mtime_ns))


@lru_cache(maxsize=4)
def _read_sentencepiece(path: Path, mtime_ns: int) -> tuple[SentencePieceBackend, str]:
    try:
        import sentencepiece
    except ImportError as exc:
        raise MindcapError("sentencepiece is not installed (pip install sentencepiece)") from exc
    data = path.read_bytes()
    try:
        sp = sentencepiece.SentencePieceProcessor(model_proto=data)
    except Exception as exc:  # RuntimeError / OSError from the C++ parser
        raise MindcapError(f"cannot read SentencePiece model {path}: {first_line(exc)}") from exc
    if sp.get_piece_size() == 0:
        raise MindcapError(f"cannot read SentencePiece model {path}: it has no pieces")
    return SentencePieceBackend(sp), _sha256(data)


def load_sentencepiece(path: Path) -> tuple[SentencePieceBackend, str]:
    """Back end for a SentencePiece ``.model`` file, and the file's SHA-256."""
    path = regular_file(path.resolve(), "SentencePiece model")
    return _read_sentencepiece(path, path.stat().st_mtime_ns)
