"""The regex answer type, for users' tasks: a pattern with one named group ``answer``, searched in each line.

A line reads the ``answer`` group of the pattern's first match in it (stripped; empty reads nothing), and the
first answer line decides (``last``: the last; ``terminated``: only ended lines), as for the other types. The
answer is correct when it equals the gold string. Lines hold no ``"\\n"``, so a pattern never spans lines. The
pattern runs on the ``regex`` module with a time bound per search (:mod:`.patterns`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

from ...errors import BadInputError
from ._lines import LineParser
from .integer import LineCuts
from .patterns import UserPattern, compile_user_pattern

VARIANTS = {
    "strict": "first line where the task's pattern matches; its 'answer' group is the answer",
    "last": "the last answer line decides instead of the first",
    "terminated": "only answer lines ended by a newline (or ending a completed trace) count",
}


@dataclass(frozen=True)
class RegexParser(LineParser):
    """A user's rule: the compiled pattern (its ``answer`` group) and the line modifiers."""

    name: str
    pattern: UserPattern
    last: bool = False
    terminated: bool = False

    def line_value(self, line: str) -> str | None:
        """The stripped ``answer`` group of the pattern's first match in ``line``, or ``None``."""
        m = self.pattern.search(line)
        value = None if m is None or m.group("answer") is None else m.group("answer").strip()
        return value or None

    def line_cuts(self, line: bytes) -> LineCuts:
        return _cached_cuts(self, line)


@lru_cache(maxsize=1 << 16)
def _cached_cuts(parser: RegexParser, line: bytes) -> LineCuts:
    return LineParser.line_cuts(parser, line)


@cache
def compile_answer_pattern(pattern: str) -> UserPattern:
    """``pattern`` compiled once for bounded searches (:func:`~.patterns.compile_user_pattern`); a pattern that
    does not compile or lacks a named group ``answer`` is refused in one line."""
    compiled = compile_user_pattern(pattern, what="answer pattern")
    if "answer" not in compiled.groupindex:
        raise BadInputError(f"answer pattern {pattern!r} has no named group 'answer', as in (?P<answer>...)")
    return compiled


@cache
def regex_parser(spec: str, pattern: str) -> RegexParser:
    """A regex parser from a variant name (or names joined by ``+``) and the task's pattern."""
    parts = [p.strip().lower() for p in str(spec).split("+") if p.strip()]
    unknown = [p for p in parts if p not in VARIANTS]
    if not parts or unknown:
        raise BadInputError(f"unknown regex parser {spec!r}; use one of {', '.join(VARIANTS)} joined by '+'")
    flags = set(parts)
    name = "+".join(p for p in VARIANTS if p in flags and p != "strict") or "strict"
    return RegexParser(name, compile_answer_pattern(pattern), "last" in flags, "terminated" in flags)
