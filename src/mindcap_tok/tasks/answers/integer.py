"""The integer answer type: the paper's strict ``#### <integer>`` line, and named variants for the robustness audit.

A *line* is what lies between two ``"\\n"`` characters (only ``"\\n"`` splits lines). The **strict** parser
(the paper's scoring rule, intention to treat) reads a line as an answer line when the whole line is

    optional spaces/tabs, ``####``, optional spaces/tabs, an optional ``-``, ASCII digits, optional spaces/tabs/CR

and its integer is the answer. Anything else on the line (units, ``$``, ``**``, a decimal point, a thousands
separator, text before ``####``) makes the line non-compliant, and such lines are ignored. The **first**
answer line of the text decides; no answer line, a non-integer or a non-compliant line score 0.

Prefixes: the text a parser sees for a budget is the decoded prefix, so its last line may still be being
written. For ``strict`` that line counts as it stands (``#### 12`` of a future ``#### 125`` reads 12: the
paper's "prefix-only" rule). A prefix that ends inside a multi-byte character is decoded with
``errors="replace"`` (what ``tokenizer.decode`` returns for byte-level BPE), so it ends in U+FFFD, which no
grammar accepts: a line cut inside a character does not parse at that budget.

Variants are named strings, combinable with ``+`` (``last+terminated``):

- ``strict`` (= ``first``): as above.
- ``last``: the last answer line decides instead of the first.
- ``terminated``: only answer lines followed by ``"\\n"`` count, or the final line of a completed trace
  (``complete=True``: the generation stopped by itself and the prefix holds all of it).
- ``thousands``: the integer may group digits in threes with one consistent separator among
  ``, . ' `` space, no-break space, narrow no-break space (``5,600``, ``5.600``, ``1 234``).
- ``native-digits``: digits may also be Thai, Bengali, Devanagari, Telugu, Arabic-Indic, Extended
  Arabic-Indic or full-width digits (``#### ๑๘``).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import accumulate

from ...choices import VARIANTS as VARIANTS
from ...errors import BadInputError

_DIGIT_BLOCKS = {
    "thai": 0x0E50,
    "bengali": 0x09E6,
    "devanagari": 0x0966,
    "telugu": 0x0C66,
    "arabic-indic": 0x0660,
    "extended-arabic-indic": 0x06F0,
    "full-width": 0xFF10,
}
_NATIVE_TO_ASCII = str.maketrans({chr(base + d): str(d) for base in _DIGIT_BLOCKS.values() for d in range(10)})
_NATIVE_CLASS = "".join(f"{chr(base)}-{chr(base + 9)}" for base in _DIGIT_BLOCKS.values())
_SEPARATORS = ",.' \u00a0\u202f"


@dataclass(frozen=True)
class Parser:
    """A parsing rule: which answer line decides, whether it must be terminated, which numerals count."""

    name: str
    last: bool = False
    terminated: bool = False
    thousands: bool = False
    native_digits: bool = False

    @property
    def _patterns(self) -> tuple[re.Pattern[str], re.Pattern[str]]:
        return _compile(self.thousands, self.native_digits)

    def line_value(self, line: str) -> int | None:
        """The integer of ``line`` (no ``"\\n"`` in it) if it is an answer line, else ``None``."""
        m = self._patterns[0].fullmatch(line)
        if m is None:
            return None
        num = m.group("num")
        if self.thousands:
            num = num.translate(_STRIP_SEPARATORS)
        if self.native_digits:
            num = num.translate(_NATIVE_TO_ASCII)
        return int(num)

    def answer_lines(self, text: str, complete: bool = False) -> list[AnswerLine]:
        """Every answer line of ``text`` in order (the last line counts as terminated only when ``complete``)."""
        return read_answer_lines(self, text, complete=complete)

    def parse(self, text: str, complete: bool = False) -> int | None:
        """The answer this parser reads from ``text`` (a whole trace or a decoded prefix), or ``None``."""
        return read_answer(self, text, complete=complete)

    def score(self, text: str, gold: int, *, complete: bool = False) -> int:
        """1 if the answer read from ``text`` equals ``gold``, else 0 (intention to treat)."""
        return int(self.parse(text, complete) == gold)

    def correct(self, value: int, gold: int) -> bool:
        """Whether an answer read equals the gold integer."""
        return value == gold

    @property
    def needs_hash(self) -> bool:
        """Every answer line holds ``####``: a scorer may skip lines without ``#``."""
        return True

    @property
    def versions(self) -> dict[str, str]:
        """Versions of the libraries that judge answers (none: plain equality)."""
        return {}

    def line_cuts(self, line: bytes) -> LineCuts:
        """How a line reads at every cut: the values of its unfinished prefixes and of the whole line.

        ``line`` holds the raw bytes of one line (no ``b"\\n"``). Returns the byte lengths ``k`` (1 <= k <
        len(line)) at which the visible part ``line[:k]``, decoded with ``errors="replace"``, is an answer
        line, merged into half-open ranges of equal value, and the value of the whole line (or ``None``).
        The fast scorer combines these with token byte offsets instead of decoding every prefix.
        """
        return _line_cuts(self, line)


@dataclass(frozen=True)
class AnswerLine:
    """An answer line found in a text: its line number, integer, and whether a newline (or the end) closes it."""

    line: int
    value: int
    terminated: bool


def read_answer_lines(rule, text: str, *, complete: bool) -> list[AnswerLine]:
    """The answer lines of ``text`` as ``rule`` reads them (its ``line_value``, ``terminated``): the one line loop
    of every line-based answer type."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        terminated = i < len(lines) - 1 or complete
        if rule.terminated and not terminated:
            continue
        value = rule.line_value(line)
        if value is not None:
            out.append(AnswerLine(i, value, terminated))
    return out


def read_answer(rule, text: str, *, complete: bool):
    """The answer ``rule`` reads from ``text``: its first answer line's value (the last one with ``last``), or None."""
    found = read_answer_lines(rule, text, complete=complete)
    if not found:
        return None
    return found[-1].value if rule.last else found[0].value


@dataclass(frozen=True)
class LineCuts:
    """See :meth:`Parser.line_cuts`: ``partial`` is a tuple of ``(k_lo, k_hi, value)``; ``full`` the whole line's."""

    partial: tuple[tuple[int, int, Hashable], ...]
    full: Hashable | None


_STRIP_SEPARATORS = str.maketrans("", "", _SEPARATORS)


@cache
def _compile(thousands: bool, native: bool) -> tuple[re.Pattern[str], re.Pattern[str]]:
    digit = f"[0-9{_NATIVE_CLASS}]" if native else "[0-9]"
    if thousands:
        seps = re.escape(_SEPARATORS)
        num = rf"-?(?:{digit}{{1,3}}(?P<sep>[{seps}]){digit}{{3}}(?:(?P=sep){digit}{{3}})*|{digit}+)"
        run = f"[{digit[1:-1]}{seps}]*"
    else:
        num = rf"-?{digit}+"
        run = f"{digit}*"
    line = re.compile(rf"[ \t]*####[ \t]*(?P<num>{num})[ \t\r]*")
    # the longest stretch any answer-line prefix can occupy: bounds the cuts worth trying
    scan = re.compile(rf"[ \t]*####[ \t]*-?{run}[ \t\r]*")
    return line, scan


@lru_cache(maxsize=1 << 16)
def _line_cuts(parser: Parser, line: bytes) -> LineCuts:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        # bytes after the first invalid one decode to U+FFFD in every prefix that holds them: never parse
        text = line[: exc.start].decode("utf-8")
        full = None
    else:
        full = parser.line_value(text)
    scan = parser._patterns[1].match(text)
    if scan is None:
        return LineCuts((), full)
    stop = scan.end()
    ends = range(stop + 1) if text.isascii() else [0, *accumulate(len(c.encode("utf-8")) for c in text[:stop])]
    partial: list[list[int]] = []
    for j in range(1, stop + 1):
        k = ends[j]
        if k >= len(line):
            break
        value = parser.line_value(text[:j])
        if value is None:
            continue
        if partial and partial[-1][1] == k and partial[-1][2] == value:
            partial[-1][1] = k + 1
        else:
            partial.append([k, k + 1, value])
    return LineCuts(tuple((lo, hi, v) for lo, hi, v in partial), full)


_MODIFIERS = {"last", "terminated", "thousands", "native-digits"}


@cache
def integer_parser(spec: str | Parser = "strict") -> Parser:
    """An integer parser from its name: ``strict``/``first``, a variant, or variants joined by ``+``."""
    if isinstance(spec, Parser):
        return spec
    parts = [p.strip().lower() for p in str(spec).split("+") if p.strip()]
    unknown = [p for p in parts if p not in VARIANTS]
    if not parts or unknown:
        raise BadInputError(
            f"unknown parser {spec!r}; use one of {', '.join(VARIANTS)} or several joined by '+' (last+terminated)"
        )
    flags = {p for p in parts if p in _MODIFIERS}
    name = "+".join(p for p in VARIANTS if p in flags) or "strict"
    return Parser(
        name=name,
        last="last" in flags,
        terminated="terminated" in flags,
        thousands="thousands" in flags,
        native_digits="native-digits" in flags,
    )


def parse_answer(text: str, parser: str | Parser = "strict", *, complete: bool = False) -> int | None:
    """The answer ``parser`` reads from ``text`` (see the module docs), or ``None``."""
    return integer_parser(parser).parse(text, complete)
