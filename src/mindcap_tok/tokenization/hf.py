"""The ``tokenizers`` family: a Hugging Face ``tokenizer.json``, and :func:`encode_texts`, the one way this package
encodes texts with a ``tokenizers.Tokenizer`` (texts too long for its regex engine included: :mod:`.long_text`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np
from tokenizers import Tokenizer

from .bytelevel import token_bytes
from .classes import BYTE_FALLBACK, UNKNOWN, utf8_classes
from .long_text import SAFE_CHARS, engine_guard, long_positions
from .pipeline import pipeline
from .pretoken_cache import PretokenEncoder

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class MergesFamily(Protocol[T_co]):
    """What extending a HF vocabulary is handed: the back end, typed."""

    def merges(self, backend: HFBackend) -> T_co:
        """New byte-level BPE merges appended to a ``tokenizer.json``."""


class HFBackend:
    """A Hugging Face ``tokenizers.Tokenizer`` (family ``tokenizers``)."""

    family = "tokenizers"
    dummy_prefix = False

    def __init__(self, tok: Tokenizer) -> None:
        self.hf = tok

    def extension(self, families: MergesFamily[T]) -> T:
        """``families.merges`` for this back end."""
        return families.merges(self)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, no special tokens."""
        if len(text) > SAFE_CHARS:
            return encode_texts(self.hf, [text])[0]
        return _library(self.hf, text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text, no special tokens (one batched, multi-threaded call)."""
        return encode_texts(self.hf, texts, fast=False)

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text, no special tokens."""
        return np.fromiter(map(len, encode_texts(self.hf, texts)), dtype=np.int64, count=len(texts))

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
        return token_bytes(self.hf)

    @cached_property
    def unknown_id(self) -> int | None:
        """The model's unknown token (``unk_token``, or a Unigram's ``unk_id``), or ``None``: it has none."""
        model = pipeline(self.hf).model
        if model.get("unk_id") is not None:
            return int(model["unk_id"])
        return None if model.get("unk_token") is None else self.hf.token_to_id(model["unk_token"])

    def token_classes(self) -> np.ndarray:
        """Byte fallback: tokens whose bytes are not whole UTF-8 characters, and, with the model's
        ``byte_fallback``, its ``<0xNN>`` pieces; unknown: :attr:`unknown_id` (:mod:`.classes`)."""
        classes = utf8_classes(self.token_bytes())
        if pipeline(self.hf).model.get("byte_fallback"):
            for b in range(256):
                i = self.hf.token_to_id(f"<0x{b:02X}>")
                if i is not None:
                    classes[i] = BYTE_FALLBACK
        if self.unknown_id is not None:
            classes[self.unknown_id] = UNKNOWN
        return classes

    def unknown_characters(self, texts: Sequence[str]) -> np.ndarray:
        """Characters covered by the unknown token in each text (from the encodings' character offsets)."""
        unk = self.unknown_id
        if unk is None:
            return np.zeros(len(texts), dtype=np.int64)
        encodings = self.hf.encode_batch(list(texts), add_special_tokens=False)
        return np.array(
            [sum(e - s for i, (s, e) in zip(enc.ids, enc.offsets, strict=True) if i == unk) for enc in encodings],
            dtype=np.int64,
        )

    def content_sha256(self) -> str:
        """SHA-256 of the ``tokenizer.json`` serialisation."""
        return hashlib.sha256(self.hf.to_str().encode("utf-8")).hexdigest()


@lru_cache(maxsize=8)
def read_tokenizer_file(path: Path, mtime_ns: int) -> Tokenizer:
    # parsing a 150k-vocabulary file takes seconds; the mtime key reloads a file that changed
    return Tokenizer.from_file(str(path))


def encode_texts(tok: Tokenizer, texts: Sequence[str], *, fast: bool = True) -> list[list[int]]:
    """Ids of every text, no special tokens: one batched call (``encode_batch_fast``, no offsets, or with ``fast``
    false ``encode_batch``: the same ids), except that a text longer than :data:`~.long_text.SAFE_CHARS` is encoded
    pre-token by pre-token (:mod:`.long_text`), to the same ids."""
    texts = list(texts)
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch) if fast else tok.encode_batch
    long = long_positions(texts)
    if not long:
        return engine_guard(lambda: [e.ids for e in encode(texts, add_special_tokens=False)], texts)
    short = [t if len(t) <= SAFE_CHARS else "" for t in texts]
    out = engine_guard(lambda: [e.ids for e in encode(short, add_special_tokens=False)], short)
    reference = _reference(tok, tok.get_vocab_size(with_added_tokens=True))
    for i in long:
        out[i] = reference.encode(texts[i]) if reference is not None else _library(tok, texts[i])
    return out


def _library(tok: Tokenizer, text: str) -> list[int]:
    return engine_guard(lambda: tok.encode(text, add_special_tokens=False).ids, [text])


@lru_cache(maxsize=8)
def _reference(tok: Tokenizer, n_ids: int) -> PretokenEncoder | None:
    # keyed by the number of ids too, so that tokens added after the first long text make a new encoder (the
    # tokenizer's serialisation would catch every change, but takes half a second for a 150k vocabulary)
    return PretokenEncoder.from_tokenizer(tok)
