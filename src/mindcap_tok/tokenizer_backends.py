"""The three tokenizer libraries behind :class:`~mindcap_tok.tokenizer.ResolvedTokenizer`.

Each back end wraps one library and answers the same small set of questions (encode without special
tokens, decode, the UTF-8 bytes of every id, vocabulary size, special ids):

- ``tokenizers``: a Hugging Face ``tokenizer.json``;
- ``tiktoken``: a ``.tiktoken`` rank file plus the ``encoding.json`` beside it (name, ``pat_str``, special
  tokens and, optionally, the rank file's ``sha256``), built offline with ``tiktoken.Encoding``;
- ``sentencepiece``: a SentencePiece ``.model`` protobuf.

``tiktoken`` and ``sentencepiece`` are imported only when such a file is loaded.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import re
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

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
    spec = rank_file.parent / "encoding.json"
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
    rank_file = rank_file.resolve()
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
    path = path.resolve()
    return _read_sentencepiece(path, path.stat().st_mtime_ns)
