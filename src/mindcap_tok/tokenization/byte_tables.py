"""Token byte tables: the bytes each id of a tokenizer adds to decoded text, as flat arrays.

Prefix scoring, retokenizing and the audits measure text by byte positions instead of decoding every prefix;
this is what they read. It belongs with the tokenizer (any family), not with any one stage that uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import BadInputError
from .load import ResolvedTokenizer
from .sentencepiece_family import SentencePieceBackend

_HASH, _NEWLINE = ord("#"), ord("\n")
#: ``ByteTable.flags`` bits: the id's bytes hold ``#`` / a newline
HAS_HASH, HAS_NEWLINE = 1, 2


@dataclass(frozen=True, eq=False)
class ByteTable:
    """The bytes each token id adds to decoded text, in flat arrays for vectorised gathers.

    ``blob[offsets[i]:offsets[i + 1]]`` are the bytes of id ``i``; ``flags[i]`` has bit 1 set when they
    hold ``#`` and bit 2 when they hold ``\\n`` (only lines with ``####`` can be answer lines).

    A tokenizer with a dummy prefix (SentencePiece ``add_dummy_prefix``, Llama 2) drops the leading space of
    the first text token when decoding. ``first[i]`` is then the id whose bytes id ``i`` adds as the first
    text token of a trace: ``i`` itself, or an extra row (ids ``n_ids`` and up) holding its bytes without
    that space. ``n_ids`` is the tokenizer's number of ids (the rows after it are those extra rows).
    """

    lengths: np.ndarray
    offsets: np.ndarray
    blob: np.ndarray
    flags: np.ndarray
    first: np.ndarray | None = None
    n_ids: int | None = None

    @classmethod
    def from_token_bytes(cls, token_bytes: Sequence[bytes], strip_first: Sequence[int] = ()) -> ByteTable:
        """A table from the bytes of every id (index = id).

        ``strip_first``: ids whose leading space decoding drops when they are a trace's first text token.
        """
        n_ids = len(token_bytes)
        strip = [i for i in strip_first if token_bytes[i][:1] == b" "]
        rows = [*token_bytes, *(token_bytes[i][1:] for i in strip)]
        lengths = np.fromiter((len(b) for b in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        blob = np.frombuffer(b"".join(rows), dtype=np.uint8)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        flags = np.zeros(len(lengths), dtype=np.uint8)
        flags[owner[blob == _HASH]] |= HAS_HASH
        flags[owner[blob == _NEWLINE]] |= HAS_NEWLINE
        first = None
        if strip:
            first = np.arange(n_ids, dtype=np.int64)
            first[np.asarray(strip, dtype=np.int64)] = np.arange(n_ids, n_ids + len(strip), dtype=np.int64)
        return cls(lengths, offsets, blob, flags, first, n_ids)

    @property
    def has_hash(self) -> np.ndarray:
        return (self.flags[: self.vocab_size] & HAS_HASH) > 0

    @property
    def has_newline(self) -> np.ndarray:
        return (self.flags[: self.vocab_size] & HAS_NEWLINE) > 0

    @property
    def vocab_size(self) -> int:
        return len(self.lengths) if self.n_ids is None else self.n_ids

    def trace_ids(self, ids: np.ndarray, splits: np.ndarray | None = None) -> np.ndarray:
        """``ids`` with each trace's first text token replaced by its :attr:`first` row (a copy when changed).

        ``splits`` delimit the traces (``None``: one trace). Without a dummy prefix, ``ids`` unchanged.
        """
        ids = np.asarray(ids)
        if self.first is None or not len(ids):
            return ids
        if splits is None:
            splits = np.array([0, len(ids)], dtype=np.int64)
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            bad = int(ids[(ids < 0) | (ids >= self.vocab_size)][0])
            raise BadInputError(f"token id {bad} is outside the tokenizer's {self.vocab_size} ids")
        text = np.flatnonzero(self.lengths[ids] > 0)
        k = np.searchsorted(text, splits[:-1], side="left")
        kk = np.minimum(k, max(len(text) - 1, 0))
        hit = (k < len(text)) & (text[kk] < splits[1:]) if len(text) else np.zeros(len(k), dtype=bool)
        pos = text[kk[hit]]
        out = ids.astype(np.int64, copy=True)
        out[pos] = self.first[out[pos]]
        return out

    def token_ends(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Cumulative byte length after each token of one trace (what decoding each prefix gives)."""
        return np.cumsum(self.lengths[self.trace_ids(np.asarray(ids, dtype=np.int64))])

    def decode(self, ids: Sequence[int] | np.ndarray) -> bytes:
        """The bytes of one trace's ids (the prefix text before UTF-8 decoding)."""
        ids = self.trace_ids(np.asarray(ids, dtype=np.int64))
        return gather_bytes(self, ids).tobytes()


@lru_cache(maxsize=8)
def byte_table(tokenizer: ResolvedTokenizer) -> ByteTable:
    """The scoring byte table of a tokenizer of any family: its ``token_bytes``, with special tokens adding no
    text (as ``decode(..., skip_special_tokens=True)``, the text a serving stack returns).

    SentencePiece: ``▁`` is a space and byte-fallback pieces their byte; control and unknown pieces add no
    text. With a dummy prefix (Llama 2) decoding drops the leading space of a trace's first text token when
    it is an ordinary piece starting with ``▁`` (not a byte piece ``<0x20>``): :attr:`ByteTable.first`.
    """
    token_bytes = list(tokenizer.token_bytes)
    for i in tokenizer.special_ids:
        if i < len(token_bytes):
            token_bytes[i] = b""
    strip: list[int] = []
    backend = tokenizer.backend
    if backend.dummy_prefix and isinstance(backend, SentencePieceBackend):  # only SentencePiece prepends a space
        sp = backend.sp
        strip = [i for i, b in enumerate(token_bytes) if b[:1] == b" " and not sp.is_byte(i)]
    return ByteTable.from_token_bytes(token_bytes, strip)


def gather_bytes(table: ByteTable, ids: np.ndarray) -> np.ndarray:
    """The concatenated bytes of ``ids`` (a uint8 array): one fancy-index of the blob, no Python join per token.

    The blob index is built as one cumulative sum of steps (1 inside a token, a jump at each token's start),
    a single int64 array of the output's length instead of the repeat-plus-arange pair (8x faster here).
    """
    lens = table.lengths[ids]
    keep = lens > 0
    if not keep.all():
        ids, lens = ids[keep], lens[keep]
    if not len(ids):
        return np.zeros(0, dtype=np.uint8)
    offs = table.offsets[ids]
    ends = np.cumsum(lens)
    step = np.ones(int(ends[-1]), dtype=np.int64)
    step[0] = offs[0]
    step[ends[:-1]] = offs[1:] - (offs[:-1] + lens[:-1] - 1)
    np.cumsum(step, out=step)
    return table.blob[step]


@dataclass(frozen=True, eq=False)
class AnchorMasks:
    """Where byte strings may start in token sequences, per row of a table (see :func:`anchor_masks`)."""

    #: the row's lowercased bytes hold a whole anchor, or end with the start of one
    may_start: np.ndarray
    #: the row's lowercased bytes hold a whole anchor
    holds: np.ndarray
    #: per group of up to 64 (anchor, j) pairs: bit set when the row ends with ``anchor[:j]`` / when the row's
    #: bytes continue ``anchor[j:]`` (they are a prefix of it, or start with it; empty rows continue anything)
    groups: tuple[tuple[np.ndarray, np.ndarray], ...]


@lru_cache(maxsize=16)
def anchor_masks(table: ByteTable, anchors: tuple[bytes, ...]) -> AnchorMasks:
    """For each row of ``table``, where ``anchors`` (lowercase byte strings) may start in its ASCII-lowercased
    bytes: whole inside it, or across the boundary with the next token. Hand-written: a literal search across
    token boundaries without gathering every byte (no library does it on token tables)."""
    low = table.blob.copy()
    low[(low >= 65) & (low <= 90)] += 32
    lengths, starts, stops = table.lengths, table.offsets[:-1], table.offsets[1:]
    last = max(len(low) - 1, 0)
    holds = np.zeros(len(lengths), dtype=bool)
    haystack = low.tobytes()
    for anchor in anchors:
        found, pos = [], haystack.find(anchor)
        while pos != -1:
            found.append(pos)
            pos = haystack.find(anchor, pos + 1)
        if found:
            at = np.asarray(found, dtype=np.int64)
            owner = np.searchsorted(table.offsets, at, side="right") - 1
            holds[owner[at + len(anchor) <= stops[owner]]] = True
    pairs = [(a, j) for a in anchors for j in range(1, len(a))]
    groups = []
    for g in range(0, len(pairs), 64):
        ends, conts = np.zeros(len(lengths), np.uint64), np.zeros(len(lengths), np.uint64)
        for bit, (anchor, j) in enumerate(pairs[g : g + 64]):
            ok = lengths >= j
            for q in range(j):
                ok &= low[np.clip(stops - j + q, 0, last)] == anchor[q]
            ends[ok] |= np.uint64(1 << bit)
            rest = anchor[j:]
            ok = np.ones(len(lengths), dtype=bool)
            for q in range(len(rest)):
                ok &= (lengths <= q) | (low[np.clip(starts + q, 0, last)] == rest[q])
            conts[ok] |= np.uint64(1 << bit)
        groups.append((ends, conts))
    may_start = holds.copy()
    for ends, _ in groups:
        may_start |= ends > 0
    return AnchorMasks(may_start, holds, tuple(groups))


def anchor_starts(table: ByteTable, ids: np.ndarray, *, anchors: tuple[bytes, ...]) -> np.ndarray:
    """Positions in ``ids`` of the tokens where one of ``anchors`` may start in the ASCII-lowercased decoded
    bytes (a superset: every occurrence starts in one of them); the last token of ``ids`` ends the search."""
    masks = anchor_masks(table, anchors)
    pos = np.flatnonzero(masks.may_start[ids])
    if not len(pos):
        return pos
    keep = masks.holds[ids[pos]]
    inner = pos[pos + 1 < len(ids)]
    here, after = ids[inner], ids[inner + 1]
    across = np.zeros(len(inner), dtype=bool)
    for ends, conts in masks.groups:
        across |= (ends[here] & conts[after]) > 0
    keep[: len(inner)] |= across
    return pos[keep]
