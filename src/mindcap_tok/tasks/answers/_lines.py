"""What every line-based answer type shares: reading a text line by line, and the reading at every byte cut.

A *line* lies between two ``"\\n"`` characters. A type defines ``line_value(line)`` (the answer a line reads, or
``None``); the first answer line of a text decides (the last one with ``last``; only newline-ended lines, or the
final line of a completed trace, with ``terminated``), as for the integer type. ``line_cuts`` finds the value of
every unfinished prefix of a line by decoding it as ``tokenizer.decode`` would (``errors="replace"``: a cut inside
a multi-byte character ends in U+FFFD), so the scorer needs no decoding per budget.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from functools import cache
from itertools import chain, product
from math import prod
from typing import Any

from .integer import AnswerLine, LineCuts, read_answer, read_answer_lines


class LineParser:
    """Reading texts through ``line_value``; subclasses are frozen dataclasses with ``last`` and ``terminated``."""

    last: bool
    terminated: bool
    #: a pattern that every line with an answer in some prefix matches (``None``: any line may hold one)
    trigger: re.Pattern[str] | None = None
    #: byte strings one of which every line matching ``trigger`` holds once ASCII-lowercased (``None``: unknown)
    anchors: tuple[bytes, ...] | None = None

    def line_value(self, line: str) -> Hashable | None:  # pragma: no cover - every type defines it
        raise NotImplementedError

    def answer_lines(self, text: str, complete: bool = False) -> list[AnswerLine]:
        """Every answer line of ``text`` in order (the last line counts as terminated only when ``complete``)."""
        return read_answer_lines(self, text, complete=complete)

    def parse(self, text: str, complete: bool = False) -> Hashable | None:
        """The answer read from ``text`` (a whole trace or a decoded prefix), or ``None``."""
        return read_answer(self, text, complete=complete)

    def correct(self, value: Hashable, gold: object) -> bool:
        """Whether an answer read equals the gold (both as stripped strings)."""
        return str(value) == str(gold).strip()

    def score(self, text: str, gold: object, *, complete: bool = False) -> int:
        """1 if the answer read from ``text`` is correct for ``gold``, else 0 (intention to treat)."""
        value = self.parse(text, complete)
        return int(value is not None and self.correct(value, gold))

    @property
    def needs_hash(self) -> bool:
        """Whether every answer line holds ``####`` (a scorer may then skip lines without ``#``)."""
        return self.trigger is not None and self.trigger.pattern == "####"

    @property
    def versions(self) -> dict[str, str]:
        """Versions of the libraries that judge answers (none: string equality)."""
        return {}

    def line_cuts(self, line: bytes) -> LineCuts:
        """How a line reads at every cut ``1 <= k < len(line)`` and whole (see the integer type's ``line_cuts``)."""
        text = line.decode("utf-8", "replace")
        full = self.line_value(text)
        if self.trigger is not None and self.trigger.search(text) is None:
            return LineCuts((), full)
        partial: list[list[Any]] = []  # [k_lo, k_hi, value], k_hi extended in place
        for k in range(1, len(line)):
            value = self.line_value(line[:k].decode("utf-8", "replace"))
            if value is None:
                continue
            if partial and partial[-1][1] == k and partial[-1][2] == value:
                partial[-1][1] = k + 1
            else:
                partial.append([k, k + 1, value])
        return LineCuts(tuple((lo, hi, v) for lo, hi, v in partial), full)


@cache
def any_of(patterns: tuple[str | None, ...]) -> re.Pattern[str] | None:
    """One trigger matching where any of ``patterns`` does (``None`` if one of them may match anywhere)."""
    if None in patterns:
        return None
    return re.compile("|".join(p for p in patterns if p is not None))


@cache
def _all_chars() -> str:
    """Every code point but the surrogates, as one string (for finding what a case-insensitive pattern matches)."""
    return "".join(map(chr, chain(range(0xD800), range(0xE000, 0x110000))))


@cache
def fold_literals(word: str, limit: int = 8) -> tuple[bytes, ...] | None:
    """Byte strings one of which every match of ``(?i:word)`` holds, as ASCII-lowercased UTF-8 (``None``: no
    word). A character matches its case partners, some outside ASCII (``ſ`` for ``s``, ``K`` for ``k``), found
    by searching every code point with ``re`` itself; the longest substring of ``word`` with at most ``limit``
    spellings is used. Hand-written: no library lists the strings a case-insensitive ``re`` pattern accepts."""
    if not word:
        return None
    distinct = sorted(set(word))
    finder = re.compile("(?i)(?:" + "|".join(map(re.escape, distinct)) + ")")
    found = set(finder.findall(_all_chars()))
    spellings = {
        ch: sorted(
            {c.encode("utf-8").lower() for c in found if re.fullmatch("(?i)" + re.escape(ch), c)}
            | {ch.encode("utf-8").lower()}
        )
        for ch in distinct
    }
    parts = [spellings[ch] for ch in word]
    for size in range(len(word), 0, -1):
        for start in range(len(word) - size + 1):
            chosen = parts[start : start + size]
            if prod(map(len, chosen)) <= limit:
                return tuple(b"".join(p) for p in product(*chosen))
    return None  # pragma: no cover - one character always has few spellings
