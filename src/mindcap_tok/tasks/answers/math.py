"""The math answer type: a free-form answer, judged equivalent to the gold by ``math-verify``.

The strict line is ``####``, then the answer, then optional spaces/tabs/CR: ``#### \\frac{1}{2}`` reads
``\\frac{1}{2}``. An unfinished last line counts as it stands (``#### \\frac{1`` reads ``\\frac{1``, which is not
equivalent to ``1/2``); an answer holding U+FFFD (a cut inside a character) reads nothing. Variants:

- ``boxed``: also ``\\boxed{...}`` anywhere in a line, braces balanced (the last closed box in a line decides;
  a box spanning lines is not read);
- ``last``, ``terminated``: as for integers.

Equivalence is ``math_verify.verify`` of both strings parsed as LaTeX (``$...$``), so ``\\frac{1}{2}`` = ``0.5``
and ``2`` = ``2.0``; the verdict is cached per distinct (answer, gold) pair, since prefixes and traces repeat.
``math-verify`` is the ``math`` extra, imported on first use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import metadata

from ...errors import BadInputError, MissingExtraError
from ._lines import LineParser, any_of
from .integer import LineCuts

VARIANTS = {
    "strict": "first line '#### <answer>', judged by math-verify equivalence",
    "boxed": "also the last \\boxed{...} of a line (braces balanced)",
    "last": "the last answer line decides instead of the first",
    "terminated": "only answer lines ended by a newline (or ending a completed trace) count",
}
_STRICT = re.compile(r"[ \t]*####[ \t]*(?P<answer>\S(?:.*\S)?)[ \t\r]*")
_BOX = "\\boxed{"


@dataclass(frozen=True)
class MathParser(LineParser):
    """A math rule: whether boxed answers count, and the line modifiers."""

    name: str
    boxed: bool = False
    last: bool = False
    terminated: bool = False

    @property
    def trigger(self) -> re.Pattern[str] | None:  # type: ignore[override]  # computed where the base has a field
        """``####``, or a box too."""
        return any_of(("####", r"\\boxed\{") if self.boxed else ("####",))

    @property
    def anchors(self) -> tuple[bytes, ...]:  # type: ignore[override]  # computed where the base has a field
        """``####``, or ``\\boxed{`` too (lowercase already)."""
        return (b"####", _BOX.encode()) if self.boxed else (b"####",)

    def line_value(self, line: str) -> str | None:
        """The answer string ``line`` reads, or ``None``."""
        m = _STRICT.fullmatch(line)
        value = m.group("answer") if m is not None else _last_box(line) if self.boxed else None
        return None if not value or "\ufffd" in value else value

    def correct(self, value: object, gold: object) -> bool:
        """Whether the answer is equivalent to the gold by math-verify (cached per distinct pair)."""
        return equivalent(str(value), str(gold).strip())

    @property
    def versions(self) -> dict[str, str]:
        """The math-verify version that judges equivalence."""
        _math_verify()
        return {"math-verify": metadata.version("math-verify")}

    def line_cuts(self, line: bytes) -> LineCuts:
        return _cached_cuts(self, line)


@lru_cache(maxsize=1 << 16)
def _cached_cuts(parser: MathParser, line: bytes) -> LineCuts:
    return LineParser.line_cuts(parser, line)


def _last_box(line: str) -> str | None:
    """The content of the last ``\\boxed{...}`` of ``line`` whose braces close, stripped (or ``None``)."""
    found = None
    start = line.find(_BOX)
    while start != -1:
        depth, i = 1, start + len(_BOX)
        while i < len(line) and depth:
            depth += {"{": 1, "}": -1}.get(line[i], 0)
            i += 1
        if depth == 0:
            found = line[start + len(_BOX) : i - 1].strip()
        start = line.find(_BOX, start + 1)
    return found


def _math_verify():
    try:
        import math_verify
    except ImportError as exc:
        raise MissingExtraError("math-verify", "math", needed_by="the math answer type") from exc
    return math_verify


@lru_cache(maxsize=1 << 18)
def equivalent(answer: str, gold: str) -> bool:
    """Whether ``answer`` and ``gold`` are the same mathematical object by math-verify (equal strings are)."""
    if answer == gold:
        return True
    parsed = parsed_latex(answer)
    if not parsed:  # nothing to compare: skip parsing the gold
        return False
    parsed_gold = parsed_latex(gold)
    return bool(parsed_gold and _math_verify().verify(parsed_gold, parsed, timeout_seconds=None))


@lru_cache(maxsize=1 << 18)
def parsed_latex(text: str) -> list:
    """``math_verify.parse`` of ``text`` as LaTeX (``$text$``), once per distinct string: a gold is compared
    with many answers and an answer with many golds. Callers must not modify the list."""
    return _math_verify().parse(f"${text}$", parsing_timeout=None)


@cache
def math_parser(spec: str) -> MathParser:
    """A math parser from a variant name (or names joined by ``+``)."""
    parts = [p.strip().lower() for p in str(spec).split("+") if p.strip()]
    unknown = [p for p in parts if p not in VARIANTS]
    if not parts or unknown:
        raise BadInputError(
            f"unknown math parser {spec!r}; use one of {', '.join(VARIANTS)} or several joined by '+' (boxed+last)"
        )
    flags = set(parts)
    name = "+".join(p for p in VARIANTS if p in flags and p != "strict") or "strict"
    return MathParser(name=name, boxed="boxed" in flags, last="last" in flags, terminated="terminated" in flags)
