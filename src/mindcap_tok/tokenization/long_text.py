r"""Texts longer than a tokenizer's regex engine can pre-tokenize, encoded to the same ids another way.

HF ``tokenizers`` pre-tokenizes with Oniguruma, which gives up, as a Rust panic (``retry-limit-in-match over``), when
one match attempt backtracks 10,000,000 times; tiktoken's fancy-regex gives up (``StackOverflow``) past about
1,000,000 backtracking entries. The split regexes of byte-level BPEs backtrack about once per character of the run
they scan: ``\s*[\r\n]+`` over a whitespace run that holds no newline, Tekken's capitals-then-lower-case alternative
over a run of capitals. Measured here: Qwen3 fails from about 10 M spaces before a letter, Mistral-Nemo from about
10 M capitals before a digit, cl100k/o200k from about 1 M spaces. A text of at most :data:`SAFE_CHARS` characters
stays ten times below the lower limit and goes to the library as it is.

No cut inside such a run keeps the ids: a whitespace run is one pre-token (``\s+(?!\S)``, or ``\s*[\r\n]+`` up to
its last newline) and cutting it changes what BPE merges (the tests show one). So a longer text is split into its
pre-tokens here, with the ``regex`` module (no backtracking limit), and each pre-token is encoded by the tokenizer's
own BPE: the ids the library gives where its engine does not give up. For a ``tokenizer.json`` this is
:class:`~.pretoken_cache.PretokenEncoder`; for tiktoken, the encoding's ``pat_str`` and ``_encode_single_piece``.
Where neither reproduces the pipeline (or the text holds a code point the two regex engines may classify
differently), the library encodes the text and a give-up becomes one line (:func:`engine_guard`).
"""

from __future__ import annotations

import itertools
import sys
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

import regex

from ..errors import BadInputError, first_line

#: texts up to this many characters go to the tokenizer library unchanged (see the module docstring)
SAFE_CHARS = 100_000

T = TypeVar("T")

#: general categories a code point can move between across Unicode versions (Cn, Cs and Co never change)
_CATEGORIES = (
    "Lu",
    "Ll",
    "Lt",
    "Lm",
    "Lo",
    "Mn",
    "Mc",
    "Me",
    "Nd",
    "Nl",
    "No",
    "Pc",
    "Pd",
    "Ps",
    "Pe",
    "Pi",
    "Pf",
    "Po",
    "Sm",
    "Sc",
    "Sk",
    "So",
    "Zs",
    "Zl",
    "Zp",
    "Cc",
    "Cf",
)


def long_positions(texts: Sequence[str]) -> list[int]:
    """Indices of the texts longer than :data:`SAFE_CHARS` (none: the common case, checked in one pass)."""
    if max(map(len, texts), default=0) <= SAFE_CHARS:
        return []
    return [i for i, t in enumerate(texts) if len(t) > SAFE_CHARS]


def engine_guard(encode: Callable[[], T], texts: Sequence[str]) -> T:
    """``encode()`` of ``texts``, a library's give-up (a Rust panic through pyo3: a regex engine's limit, a custom
    tokenizer's runaway pattern) turned into one line naming the longest text.

    pyo3's ``PanicException`` derives from ``BaseException`` and cannot be imported, so it is recognised by name;
    every other exception passes unchanged."""
    try:
        return encode()
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        text = max(texts, key=len, default="")
        raise BadInputError(
            f"the tokenizer's library gave up on a text ({first_line(exc)}); the longest text given has "
            f"{len(text):,} characters and starts {text[:30]!r}"
        ) from None


def unsure(text: str) -> bool:
    """Whether ``text`` holds a code point that this Python's Unicode tables leave unassigned or that the ``regex``
    module classifies differently: the library's regex engine could split around it otherwise."""
    moved = reclassified()
    return any(unicodedata.category(c) in ("Cn", "Cs") or c in moved for c in set(text))


@lru_cache(maxsize=1)
def reclassified() -> frozenset[str]:
    """Code points assigned in this Python's ``unicodedata`` that the ``regex`` module puts in another category."""
    every = "".join(map(chr, itertools.chain(range(0xD800), range(0xE000, sys.maxunicode + 1))))
    moved: set[str] = set()
    for category in _CATEGORIES:
        found = regex.findall(rf"\p{{{category}}}", every)
        moved.update(c for c in found if unicodedata.category(c) not in (category, "Cn"))
    return frozenset(moved)


@lru_cache(maxsize=16)
def _pattern(pat_str: str) -> Any:
    return regex.compile(pat_str)


def tiktoken_ordinary(enc: Any, texts: Sequence[str]) -> list[list[int]]:
    """``enc.encode_ordinary_batch(texts)`` (a ``tiktoken.Encoding``), texts longer than :data:`SAFE_CHARS` split
    into their pre-tokens here (``pat_str`` with the ``regex`` module) and each encoded with ``_encode_single_piece``,
    which is what ``encode_ordinary`` does with each match."""
    texts = list(texts)
    long = long_positions(texts)
    if not long:
        return engine_guard(lambda: enc.encode_ordinary_batch(texts), texts)
    short = [t if len(t) <= SAFE_CHARS else "" for t in texts]
    out = engine_guard(lambda: enc.encode_ordinary_batch(short), short)
    for i in long:
        out[i] = _tiktoken_long(enc, texts[i])
    return out


def _tiktoken_long(enc: Any, text: str) -> list[int]:
    if unsure(text):
        return engine_guard(lambda: enc.encode_ordinary(text), [text])
    ids: list[int] = []
    for m in _pattern(enc._pat_str).finditer(text):
        ids += enc._encode_single_piece(m.group().encode("utf-8"))
    return ids
