"""The choice answer type: one label of the task's set (A-D, or 1-4 for Belebele).

The strict line is ``####``, then a label, as the integer type's (optional spaces/tabs around, a CR at the end):
``#### B``. Lenient variants (for the parser audit) also read, anywhere in a line, the label of the match that
ends last in it:

- ``paren``: ``(B)``;
- ``answer``: ``Answer: B`` (``answer`` in any case, an optional ``is`` and colon, the label optionally in
  parentheses, not followed by a letter or digit);
- ``phrases``: the same after any of the task's per-language answer phrases (``Respuesta: B``); a phrase of any
  of the task's languages counts in every trace;
- ``label``: a label standing alone (no letter or digit beside it); implies ``last`` (the last label decides).

Modifiers as for integers: ``last``, ``terminated``. Variants combine with ``+`` (``paren+answer+last``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from ...errors import BadInputError
from ._lines import LineParser, any_of, fold_literals
from .integer import LineCuts

VARIANTS = {
    "strict": "first line '#### <label>' with one of the task's labels",
    "paren": "also a label in parentheses anywhere in a line: (B)",
    "answer": "also 'Answer: B' (any case, optional 'is', colon, parentheses)",
    "phrases": "also the task's per-language answer phrases followed by a label (Respuesta: B)",
    "label": "also any standalone label; the last one decides",
    "last": "the last answer line decides instead of the first",
    "terminated": "only answer lines ended by a newline (or ending a completed trace) count",
}
_FORMS = ("paren", "answer", "phrases", "label")
_ALONE_AFTER = r"(?![0-9A-Za-z])"


@dataclass(frozen=True)
class ChoiceParser(LineParser):
    """A choice rule: the label set, the lenient forms read beside the strict line, and the line modifiers."""

    name: str
    labels: tuple[str, ...]
    forms: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    last: bool = False
    terminated: bool = False

    @property
    def trigger(self) -> re.Pattern[str] | None:  # type: ignore[override]  # computed where the base has a field
        """``####`` or the start of each lenient form (a standalone label may be anywhere: every line is read)."""
        return _patterns(self.labels, self.forms, self.phrases)[2]

    @property
    def anchors(self) -> tuple[bytes, ...] | None:  # type: ignore[override]  # computed where the base has a field
        """Byte strings one of which each line matching the trigger holds (lowercased): ``####``, ``(b)`` for
        each label, the answer words; ``None`` with the ``label`` form (any line may hold a label)."""
        return _anchors(self.labels, self.forms, self.phrases)

    def line_value(self, line: str) -> str | None:
        """The label ``line`` reads, or ``None``."""
        strict, lenient, _ = _patterns(self.labels, self.forms, self.phrases)
        m = strict.fullmatch(line)
        if m is not None:
            return m.group("label")
        best = None
        for pattern in lenient:
            for m in pattern.finditer(line):
                if best is None or m.end() > best.end():
                    best = m
        return None if best is None else best.group("label")

    def line_cuts(self, line: bytes) -> LineCuts:
        return _cached_cuts(self, line)


@lru_cache(maxsize=1 << 16)
def _cached_cuts(parser: ChoiceParser, line: bytes) -> LineCuts:
    return LineParser.line_cuts(parser, line)


@cache
def _patterns(
    labels: tuple[str, ...], forms: tuple[str, ...], phrases: tuple[str, ...]
) -> tuple[re.Pattern[str], tuple[re.Pattern[str], ...], re.Pattern[str] | None]:
    label = "(?P<label>" + "|".join(re.escape(x) for x in sorted(labels, key=len, reverse=True)) + ")"
    strict = re.compile(rf"[ \t]*####[ \t]*{label}[ \t\r]*")
    after = rf"[ \t]*[:：]?[ \t]*\(?{label}"
    end = rf"\)?{_ALONE_AFTER}"
    words = {"answer": [r"answer(?:[ \t]+is)?"], "phrases": [re.escape(p) for p in phrases]}
    lenient: list[re.Pattern[str]] = []
    starts: list[str | None] = ["####"]  # a trigger: what every line with a reading in some prefix holds
    for form in forms:
        if form == "paren":
            paren = rf"\({label}\)"
            starts.append(paren)
            lenient.append(re.compile(paren))
        elif form == "label":
            starts.append(None)
            lenient.append(re.compile(rf"(?<![0-9A-Za-z]){label}{_ALONE_AFTER}"))
        elif words[form]:
            start = rf"(?i:{'|'.join(words[form])}){after}"  # the form without its optional end
            starts.append(start)
            lenient.append(re.compile(start + end))
    return strict, tuple(lenient), any_of(tuple(s.replace("?P<label>", "?:") if s else s for s in starts))


@cache
def _anchors(labels: tuple[str, ...], forms: tuple[str, ...], phrases: tuple[str, ...]) -> tuple[bytes, ...] | None:
    words: dict[str, list[str | None]] = {
        "paren": [f"({x})" for x in labels],
        "answer": ["answer"],
        "phrases": list(phrases),
        "label": [None],
    }
    found = [b"####"]
    for form in forms:
        for word in words[form]:
            literals = None if word is None else fold_literals(word)
            if literals is None:
                return None
            found.extend(literals)
    return tuple(dict.fromkeys(found))


@cache
def choice_parser(spec: str, labels: tuple[str, ...], phrases: tuple[str, ...] = ()) -> ChoiceParser:
    """A choice parser from a variant name (or names joined by ``+``), the label set and the answer phrases."""
    if not labels or any(not x or x != x.strip() or "\n" in x for x in labels):
        raise BadInputError(f"choice labels must be non-empty words without surrounding spaces, not {list(labels)}")
    parts = [p.strip().lower() for p in str(spec).split("+") if p.strip()]
    unknown = [p for p in parts if p not in VARIANTS]
    if not parts or unknown:
        raise BadInputError(
            f"unknown choice parser {spec!r}; use one of {', '.join(VARIANTS)} or several joined by '+' (paren+last)"
        )
    if "phrases" in parts and not phrases:
        raise BadInputError("the 'phrases' choice variant needs the task's answer phrases (answer.variants.phrases)")
    flags = set(parts)
    name = "+".join(p for p in VARIANTS if p in flags and p != "strict") or "strict"
    return ChoiceParser(
        name=name,
        labels=tuple(labels),
        forms=tuple(f for f in _FORMS if f in flags),
        phrases=tuple(phrases) if "phrases" in flags else (),
        last="last" in flags or "label" in flags,
        terminated="terminated" in flags,
    )
