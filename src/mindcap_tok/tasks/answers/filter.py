"""Regex filter variants: another harness's answer extraction, written as data in a task file.

lm-evaluation-harness scores a generation by a filter chain (``regex`` with a ``group_select``, then
``take_first``) and ``exact_match`` with ``ignore_case`` / ``ignore_punctuation``. A task file names such a chain
as a variant (``[answer.filters.<name>]``: one pattern per FLORES code or ``"*"``, ``select`` first or last,
``compare`` options), and this parser reproduces it line by line so that the prefix scorer can use it:

- the harness takes match ``group_select`` (0: first, -1: last) of ``re.findall`` over the whole text; a match
  of these patterns never holds ``"\\n"``, so that is the first (last) match of the first (last) line holding
  one, which is what :class:`LineParser` reads with ``last`` and a per-line first (last) match;
- a match's value is its one group, or the first non-empty group of several (the harness's tuple rule), or the
  whole match for a pattern without groups, stripped;
- a value is correct when it equals the gold's text after the ``compare`` options (``ignore-case``: both lower
  case; ``ignore-punctuation``: ASCII punctuation, Python's ``string.punctuation``, removed from both), as the
  harness's ``exact_match`` compares; no match reads nothing (the harness's ``[invalid]`` fallback never equals a
  gold).

Written by hand: the harness's filters run on whole texts, not on the byte prefixes the scorer reads.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import cache, lru_cache

from ._lines import LineParser
from .integer import LineCuts
from .patterns import UserPattern, compile_user_pattern

_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True)
class FilterParser(LineParser):
    """One language's filter: the compiled pattern, which match decides, and how values are compared."""

    name: str
    pattern: UserPattern
    last: bool = False
    ignore_case: bool = False
    ignore_punctuation: bool = False
    terminated: bool = False

    @property
    def trigger(self) -> UserPattern:  # type: ignore[override]  # computed where the base has a field
        """A line with a match in some prefix holds a match (the patterns match no U+FFFD and look nowhere ahead)."""
        return self.pattern

    def line_value(self, line: str) -> str | None:
        """The value of the line's first (``last``: last) match, or ``None`` when nothing matches."""
        matches = list(self.pattern.finditer(line))
        if not matches:
            return None
        m = matches[-1] if self.last else matches[0]
        value = m.group(0) if self.pattern.groups == 0 else next((g for g in m.groups() if g), None)
        return value.strip() if value else None

    def _normal(self, text: str) -> str:
        if self.ignore_case:
            text = text.lower()
        if self.ignore_punctuation:
            text = text.translate(_NO_PUNCTUATION)
        return text

    def correct(self, value: object, gold: object) -> bool:
        """The harness's ``exact_match`` of one prediction and its reference, after the compare options."""
        return self._normal(str(value)) == self._normal(str(gold))

    def line_cuts(self, line: bytes) -> LineCuts:
        return _cached_cuts(self, line)


@lru_cache(maxsize=1 << 16)
def _cached_cuts(parser: FilterParser, line: bytes) -> LineCuts:
    return LineParser.line_cuts(parser, line)


@cache
def filter_parser(name: str, pattern: str, *, select: str, compare: tuple[str, ...]) -> FilterParser:
    """The parser of filter variant ``name`` for one language's ``pattern`` (the ``regex`` module, which reads the
    harness's ``re`` syntax, with a time bound per search: :func:`~.patterns.compile_user_pattern`)."""
    return FilterParser(
        name,
        compile_user_pattern(pattern, what=f"filter variant {name!r}: pattern"),
        last=select == "last",
        ignore_case="ignore-case" in compare,
        ignore_punctuation="ignore-punctuation" in compare,
    )
