"""The ``sentencepiece`` family: a SentencePiece ``.model`` protobuf (``sentencepiece`` imported only on load)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from .._io import regular_file
from ..errors import BadInputError, SetupError, first_line
from .classes import BYTE_FALLBACK, UNKNOWN, WHOLE
from .ids import without

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class PiecesFamily(Protocol[T_co]):
    """What extending a SentencePiece vocabulary is handed: the back end, typed."""

    def pieces(self, backend: SentencePieceBackend) -> T_co:
        """New pieces appended to a SentencePiece ``.model``."""


class SentencePieceBackend:
    """A ``sentencepiece.SentencePieceProcessor`` (family ``sentencepiece``).

    ``dummy_prefix`` is true when the model prepends ``▁`` to its input (Llama 2): that space belongs to the
    first token's bytes, so the concatenated bytes of ``encode(text)`` are ``" " + text``; ``decode`` drops it.
    """

    family = "sentencepiece"
    hf = None

    def __init__(self, sp: Any) -> None:
        self.sp = sp

    def extension(self, families: PiecesFamily[T]) -> T:
        """``families.pieces`` for this back end."""
        return families.pieces(self)

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
        seqs = without(ids, self.special_ids if skip_special_tokens else frozenset())
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

    def token_classes(self) -> np.ndarray:
        """Byte fallback: the ``<0xNN>`` byte pieces (``is_byte``); unknown: the unknown piece (:mod:`.classes`)."""
        sp = self.sp
        kinds = [
            BYTE_FALLBACK if sp.is_byte(i) else UNKNOWN if sp.is_unknown(i) else WHOLE
            for i in range(sp.get_piece_size())
        ]
        return np.array(kinds, dtype=np.int8)

    def unknown_characters(self, texts: Sequence[str]) -> np.ndarray:
        """Characters covered by the unknown piece in each text (the surface of each unknown piece)."""
        sp = self.sp
        out = []
        for data in sp.encode(list(texts), out_type="serialized_proto"):  # each piece with its surface text
            text = text_pb2().SentencePieceText()
            text.ParseFromString(data)
            out.append(sum(len(p.surface) for p in text.pieces if sp.is_unknown(p.id)))
        return np.array(out, dtype=np.int64)

    def id_to_piece(self, i: int) -> str:
        """The piece string of id ``i``."""
        return self.sp.id_to_piece(i)

    def piece_to_id(self, piece: str) -> int:
        """The id of the piece string ``piece`` (the unknown id when there is no such piece)."""
        return self.sp.piece_to_id(piece)

    def model_proto(self) -> Any:
        """A fresh parsed copy of the model's ``ModelProto`` (needs ``protobuf``; imported here, lazily)."""
        proto = model_pb2().ModelProto()
        proto.ParseFromString(self.sp.serialized_model_proto())
        return proto

    @cached_property
    def _bare(self) -> Any:
        """The same model without input normalisation: no dummy prefix, whitespace and ``▁`` kept as written."""
        proto = self.model_proto()
        spec = proto.normalizer_spec
        spec.add_dummy_prefix, spec.remove_extra_whitespaces, spec.name = False, False, "identity"
        spec.precompiled_charsmap = b""
        return processor(proto.SerializeToString())

    def piece_ids(self, data: bytes) -> list[int]:
        """The ids this model segments a piece's text ``data`` into, as one unit (spaces as ``▁``, no dummy prefix):
        its BPE merges, characters missing from the vocabulary as ``<0xNN>`` bytes. A new piece's base encoding."""
        return list(self._bare.encode(data.decode("utf-8").replace(" ", "▁")))

    def base_symbols(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's segmentation as piece strings, byte-fallback runs folded back into their characters.

        SentencePiece BPE merges from characters, unknown ones included, and turns unknown symbols into
        ``<0xNN>`` bytes only after merging; folding the bytes back gives the symbols merging ended with.
        """
        sp = self.sp
        out = []
        for ids in self.encode_batch(texts):
            symbols: list[str] = []
            run = bytearray()
            for i in ids:
                if sp.is_byte(i):
                    m = _BYTE_PIECE.fullmatch(sp.id_to_piece(i))
                    run.append(int(m.group(1), 16) if m else 0)
                    continue
                if run:
                    symbols.extend(run.decode("utf-8", errors="replace"))
                    run.clear()
                symbols.append(sp.id_to_piece(i))
            symbols.extend(run.decode("utf-8", errors="replace"))
            out.append(symbols)
        return out

    def content_sha256(self) -> str:
        """SHA-256 of the serialised model protobuf."""
        return _sha256(self.sp.serialized_model_proto())


def model_pb2() -> Any:
    """``sentencepiece``'s protobuf module for ``.model`` files (a one-line error without ``protobuf``)."""
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as exc:
        raise SetupError(
            f"reading SentencePiece model files needs protobuf (pip install 'protobuf>=4'): {exc}"
        ) from exc
    return sentencepiece_model_pb2


def text_pb2() -> Any:
    """``sentencepiece``'s protobuf module for encodings with their surface text (a one-line error without
    ``protobuf``)."""
    try:
        from sentencepiece import sentencepiece_pb2
    except ImportError as exc:
        raise SetupError(f"reading SentencePiece pieces needs protobuf (pip install 'protobuf>=4'): {exc}") from exc
    return sentencepiece_pb2


def processor(data: bytes) -> Any:
    """A ``SentencePieceProcessor`` over serialised model bytes (a one-line error if they do not load)."""
    import sentencepiece

    try:
        return sentencepiece.SentencePieceProcessor(model_proto=data)
    except Exception as exc:  # RuntimeError / OSError from the C++ parser
        raise BadInputError(f"sentencepiece cannot load the model: {first_line(exc)}") from exc


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=4)
def _read_sentencepiece(path: Path, mtime_ns: int) -> tuple[SentencePieceBackend, str]:
    try:
        import sentencepiece
    except ImportError as exc:
        raise SetupError("sentencepiece is not installed (pip install sentencepiece)") from exc
    data = path.read_bytes()
    try:
        sp = sentencepiece.SentencePieceProcessor(model_proto=data)
    except Exception as exc:  # RuntimeError / OSError from the C++ parser
        raise BadInputError(f"cannot read SentencePiece model {path}: {first_line(exc)}") from exc
    if sp.get_piece_size() == 0:
        raise BadInputError(f"cannot read SentencePiece model {path}: it has no pieces")
    return SentencePieceBackend(sp), _sha256(data)


def load_sentencepiece(path: Path) -> tuple[SentencePieceBackend, str]:
    """Back end for a SentencePiece ``.model`` file, and the file's SHA-256."""
    path = regular_file(path.resolve(), "SentencePiece model")
    return _read_sentencepiece(path, path.stat().st_mtime_ns)


def hf_tokenizer_json(data: bytes) -> str:
    """A ``tokenizer.json`` for ``transformers`` equivalent to a SentencePiece BPE model where it can be.

    The Hugging Face BPE merges pairs by rank, so every split of a NORMAL or USER_DEFINED piece into two such
    pieces becomes a merge ranked by the piece's score (highest first), with byte fallback and SentencePiece's
    whitespace handling (``▁``, the dummy prefix). HF turns unknown characters into bytes *before* merging, so a
    piece built from a character the vocabulary lacks is unreachable there: callers probe before trusting it.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers
    from tokenizers.models import BPE

    proto = model_pb2().ModelProto()
    proto.ParseFromString(data)
    pieces = list(proto.pieces)
    strings, types = [p.piece for p in pieces], [p.type for p in pieces]
    vocab = {s: i for i, s in enumerate(strings)}
    mergeable = {s for s, t in zip(strings, types, strict=True) if t in (1, 4)}
    scores = [p.score for p in pieces]
    order = sorted((i for i, t in enumerate(types) if t in (1, 4)), key=lambda i: -scores[i])
    merges: list[tuple[str, str]] = []
    for i in order:
        s = strings[i]
        merges.extend((s[:k], s[k:]) for k in range(1, len(s)) if s[:k] in mergeable and s[k:] in mergeable)
    unk = next((s for s, t in zip(strings, types, strict=True) if t == 2), None)
    tok = Tokenizer(BPE(vocab, merges, unk_token=unk, fuse_unk=True, byte_fallback=True))
    dummy = proto.normalizer_spec.add_dummy_prefix
    steps = [normalizers.Prepend("▁")] if dummy else []
    tok.normalizer = normalizers.Sequence([*steps, normalizers.Replace(" ", "▁")])
    strip = [decoders.Strip(" ", 1, 0)] if dummy else []
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), *strip])
    tok.add_special_tokens([AddedToken(p.piece, special=True, normalized=False) for p in pieces if p.type == 3])
    tok.add_tokens([AddedToken(p.piece, special=False, normalized=False) for p in pieces if p.type == 4])
    return tok.to_str()
