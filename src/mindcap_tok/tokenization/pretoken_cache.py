"""Exact byte-level BPE encoding memoised per pre-token, for re-encoding millions of stored traces.

BPE never merges across pre-tokens, so a text's ids are the concatenation of its pre-tokens' ids. HF
``tokenizers`` recomputes that bookkeeping for every text: on 1,000 Thai traces of ~4,096 tokens,
``encode_batch_fast`` takes 5.0 s on 2 cores, while splitting them with Python ``regex`` takes 1.3 s and looking
their 2.3 M pre-tokens up in a dict (20 k distinct) under 0.5 s. No library offers a memoised encode for HF
tokenizers (tiktoken has one for its own files only), so it is written here, and each distinct pre-token is
still encoded by the tokenizer's own BPE model.

Only the pipelines of byte-level BPE tokenizers like the registry's are covered: normalizer none (or an empty
``Sequence``) or NFC; pre-tokenizer one or more ``Split(regex, isolated)`` (applied in turn to every piece, as HF's
``Sequence`` does) then ``ByteLevel`` without its own regex or prefix space, or ``ByteLevel`` alone with its regex;
a plain BPE model; added tokens matched as whole strings, in the raw text or (``normalized``) in each normalized
segment between those; no truncation, padding or ``encode_special_tokens``. :meth:`PretokenEncoder.from_tokenizer`
returns ``None`` for anything else, so callers keep HF's encode. A text goes to HF whole when it holds a code point
that this Python's Unicode database leaves unassigned, or whose general category the ``regex`` module's (newer)
tables give differently (U+0295 ʕ: Ll → Lo): HF's regex engine could side with either. On every other code point the
two engines agree (the tests compare every assigned code point, in several contexts, with HF).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import regex
from tokenizers import Tokenizer

from .bytelevel import BYTE_TO_CHAR
from .long_text import engine_guard, reclassified
from .pipeline import Pipeline, pipeline

#: rows (distinct pre-tokens) memoised before the memo is emptied (a few hundred MB at most)
MAX_CACHED = 2_000_000
#: ids memoised before the memo is emptied
MAX_IDS = 16_000_000


class _Unsure(Exception):
    """A pre-token holds a code point the regex engines or NFC might treat differently: encode the text with HF."""


#: the regex HF's ``ByteLevel(use_regex=True)`` pre-tokenizer splits with (GPT-2's)
BYTE_LEVEL_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


class _Column:
    """An int64 array grown by appending (capacity doubles, so appends cost amortised O(1) per value)."""

    def __init__(self) -> None:
        self._data = np.zeros(1024, dtype=np.int64)
        self.size = 0

    def extend(self, values: Sequence[int]) -> None:
        end = self.size + len(values)
        if end > self._data.size:
            self._data = np.concatenate([self._data, np.zeros(max(end, self._data.size), dtype=np.int64)])
        self._data[self.size : end] = values
        self.size = end

    def view(self) -> np.ndarray:
        return self._data[: self.size]


def _split_patterns(pipe: Pipeline) -> list[str] | None:
    """The pre-tokenizer's split regexes, applied in turn, when it is one or more ``Split(regex, isolated)`` then
    ``ByteLevel`` (no regex, no prefix space), or ``ByteLevel`` alone with its regex and no prefix space; None for
    any other pre-tokenizer."""
    steps = list(pipe.pre_tokenizers)
    if [s.get("type") for s in steps] == ["ByteLevel"]:
        level = steps[0]
        return [BYTE_LEVEL_PATTERN] if level.get("use_regex", True) and not level.get("add_prefix_space") else None
    *splits, level = steps
    if not splits or level.get("type") != "ByteLevel" or level.get("use_regex") or level.get("add_prefix_space"):
        return None
    for split in splits:
        if split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert"):
            return None
        if "Regex" not in split.get("pattern", {}):
            return None
    return [split["pattern"]["Regex"] for split in splits]


def _normalizes_nfc(pipe: Pipeline) -> bool | None:
    """True for an NFC normalizer, False for none (absent, or an empty ``Sequence``), None for any other."""
    steps = tuple(str(s.get("type")) for s in pipe.normalizers)
    return {(): False, ("NFC",): True}.get(steps)


def _unsupported(pipe: Pipeline, tokenizer: Tokenizer) -> str | None:
    """Why ``pipe`` (a tokenizer.json) is outside the covered pipeline, or None when it is covered."""
    if _normalizes_nfc(pipe) is None:
        return f"normalizer {pipe.normalizer.get('type') if pipe.normalizer else None}"
    if _split_patterns(pipe) is None:
        return "pre-tokenizer other than Split(regex, isolated) steps + ByteLevel, or ByteLevel with its regex"
    model = pipe.model
    if model.get("type") != "BPE" or model.get("dropout") or model.get("byte_fallback"):
        return "model other than a plain BPE"
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        return "BPE with subword affixes"
    for added in pipe.added_tokens:
        if added.get("lstrip") or added.get("rstrip") or added.get("single_word"):
            return f"added token {added.get('content')!r} strips or matches single words"
    if tokenizer.truncation or tokenizer.padding:
        return "truncation or padding is set"
    return None


def _alternation(tokens: list[str]) -> re.Pattern[str] | None:
    """A pattern capturing any of ``tokens``: longest first, so that Python's leftmost-first alternation picks
    HF's leftmost-longest added token."""
    ordered = sorted(set(tokens), key=len, reverse=True)
    return re.compile("(" + "|".join(map(re.escape, ordered)) + ")") if ordered else None


def _isolated(pattern: regex.Pattern[str], segment: str) -> list[str]:
    """``segment`` cut into the matches of ``pattern`` and the gaps between them, empty pieces dropped."""
    if not pattern.groups:  # findall returns whole matches only for a pattern without groups
        pieces = pattern.findall(segment)
        if sum(map(len, pieces)) == len(segment) and "" not in pieces:
            return pieces
    out, at = [], 0
    for m in pattern.finditer(segment):
        if m.start() > at:
            out.append(segment[at : m.start()])
        if m.end() > m.start():
            out.append(m.group())
        at = m.end()
    if at < len(segment):
        out.append(segment[at:])
    return out


class PretokenEncoder:
    """Encode texts exactly as ``Tokenizer.encode(text, add_special_tokens=False).ids``, memoised per pre-token.

    The memo maps a pre-token to a row of a flat id store, so a chunk of texts becomes one array of row numbers
    and its ids one vectorised gather. Added tokens are rows too, keyed by a 1-tuple of their text so that no
    pre-token (a str) can collide with one.
    """

    def __init__(self, tokenizer: Tokenizer, pipe: Pipeline) -> None:
        self._tokenizer = tokenizer
        self._nfc = bool(_normalizes_nfc(pipe))
        self._splits = [regex.compile(p) for p in _split_patterns(pipe) or ()]
        self._reclassified = reclassified()
        # HF matches added tokens in two passes: the raw ones in the text, then the normalized ones in each
        # normalized segment between those
        self._added = _alternation([a["content"] for a in pipe.added_tokens if not a.get("normalized")])
        self._added_normalized = _alternation([a["content"] for a in pipe.added_tokens if a.get("normalized")])
        self._added_ids = {a["content"]: a["id"] for a in pipe.added_tokens}
        self._reset()

    def _reset(self) -> None:
        self._row: dict[str | tuple[str], int] = {}  # pre-token, or (added token,) -> row of the store
        self._ids = _Column()  # every row's ids, concatenated
        self._starts = _Column()  # row r is ids[starts[r]:starts[r] + lengths[r]]
        self._lengths = _Column()
        for content, i in self._added_ids.items():
            self._row[(content,)] = self._store((i,))

    @classmethod
    def from_tokenizer(cls, tokenizer: Tokenizer) -> PretokenEncoder | None:
        """An encoder for ``tokenizer``, or None when its pipeline is not one this module reproduces."""
        pipe = pipeline(tokenizer)
        if _unsupported(pipe, tokenizer) or getattr(tokenizer, "encode_special_tokens", False):
            return None
        try:
            return cls(tokenizer, pipe)
        except regex.error:  # Oniguruma syntax the regex module does not read
            return None

    @property
    def size(self) -> int:
        """Rows in the memo's store: one per distinct pre-token and added token, and one per text that HF encoded
        whole (such a text is encoded again each time); :data:`MAX_CACHED` bounds it."""
        return self._starts.size

    def _store(self, ids: Sequence[int]) -> int:
        self._starts.extend([self._ids.size])
        self._lengths.extend([len(ids)])
        self._ids.extend(ids)
        return self._starts.size - 1

    def split(self, segment: str) -> list[str]:
        """Pre-tokens of a normalized segment holding no added token: each split regex in turn cuts every piece
        into its matches and the gaps between them (HF's isolated behaviour, as its ``Sequence`` applies it)."""
        pieces = [segment]
        for pattern in self._splits:
            pieces = [p for piece in pieces for p in _isolated(pattern, piece)]
        return pieces

    def _text_pieces(self, text: str) -> list[str | tuple[str]]:
        """Added tokens (as 1-tuples) and pre-tokens of ``text``, in order."""
        pieces: list[str | tuple[str]] = []
        for k, raw in enumerate(self._added.split(text) if self._added is not None else [text]):
            if k % 2:  # re.split puts the captured added tokens at odd positions
                pieces.append((raw,))
                continue
            if not raw:
                continue
            if self._nfc and not unicodedata.is_normalized("NFC", raw):
                raw = self._tokenizer.normalizer.normalize_str(raw)
            parts = self._added_normalized.split(raw) if self._added_normalized is not None else [raw]
            for j, part in enumerate(parts):
                if j % 2:
                    pieces.append((part,))
                elif part:
                    pieces.extend(self.split(part))
        return pieces

    def _fill(self, pieces: list[str | tuple[str]]) -> None:
        """Encode the pieces not yet memoised with the tokenizer's own BPE model."""
        model, moved = self._tokenizer.model, self._reclassified
        for piece in pieces:
            if piece not in self._row:
                assert isinstance(piece, str), piece  # added tokens (1-tuples) are memoised when the store is reset
                if any(unicodedata.category(c) in ("Cn", "Cs") or c in moved for c in piece):
                    raise _Unsure(piece)  # never memoised, so every text holding it comes back here
                chars = "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))
                self._row[piece] = self._store([t.id for t in model.tokenize(chars)])

    def _rows(self, text: str) -> np.ndarray:
        """Store rows whose ids, concatenated, are ``text``'s encoding."""
        pieces = self._text_pieces(text)
        try:
            return np.fromiter(map(self._row.__getitem__, pieces), dtype=np.int64, count=len(pieces))
        except KeyError:
            try:
                self._fill(pieces)
            except _Unsure:  # HF encodes this text, into a row of its own that no pre-token points to
                ids = engine_guard(lambda: self._tokenizer.encode(text, add_special_tokens=False).ids, [text])
                return np.array([self._store(ids)])
            return np.fromiter(map(self._row.__getitem__, pieces), dtype=np.int64, count=len(pieces))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, no special tokens added."""
        return self.encode_flat([text])[0].tolist()

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """All texts' ids as one int64 array and ``splits`` (text ``t`` is ``flat[splits[t]:splits[t+1]]``)."""
        if self._starts.size > MAX_CACHED or self._ids.size > MAX_IDS:
            self._reset()
        per_text = [self._rows(t) for t in texts]
        piece_splits = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum([r.size for r in per_text], out=piece_splits[1:])
        rows = np.concatenate(per_text) if per_text else np.zeros(0, dtype=np.int64)
        lengths = self._lengths.view()[rows]
        ends = np.cumsum(lengths)  # ends[k]: ids of the first k+1 pieces
        splits = np.zeros(len(texts) + 1, dtype=np.int64)
        splits[1:] = np.concatenate([[0], ends])[piece_splits[1:]]
        # ids: each piece's run of the store, laid end to end (position j of piece k -> store start_k + j)
        shift = self._starts.view()[rows] - (ends - lengths)
        flat = self._ids.view()[np.repeat(shift, lengths) + np.arange(int(splits[-1]))]
        return flat, splits
