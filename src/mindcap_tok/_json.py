"""Strict JSON: what every command writes. Missing values are ``null``, never ``NaN`` or ``Infinity``."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import PurePath
from typing import Any


def strict_json_value(obj: Any) -> Any:
    """``obj`` with NaN/±inf floats (also numpy's and pandas' missing values) replaced by ``None``.

    numpy scalars and arrays become Python numbers and lists, tuples and sets lists, paths strings.
    """
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k) if not isinstance(k, str) else k: strict_json_value(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [strict_json_value(v) for v in obj]
    if isinstance(obj, PurePath):
        return str(obj)
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return strict_json_value(obj.tolist())
    if type(obj).__name__ in ("NAType", "NaTType"):  # pandas' missing markers
        return None
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def dumps_strict(obj: Any, *, indent: int | None = 2) -> str:
    """Strict JSON text of ``obj`` (see :func:`strict_json_value`); ``allow_nan=False`` guards the rest."""
    return json.dumps(strict_json_value(obj), ensure_ascii=False, indent=indent, allow_nan=False)


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)
_BRACKET = re.compile(r"[\[\]{}]")
#: the deepest bracket nesting of a reply that is read at all (a judge's object nests three deep); deeper replies
#: would meet the JSON decoder's recursion limit, and json-repair's time grows with nesting
MAX_REPLY_DEPTH = 64
#: json-repair reads a reply (from its first ``{``) only within these: its time grows with length, nesting and
#: bracket count together (measured: 17 s for 30,000 ``{``; 13 s for 128 ``{`` and 8,064 letters), and within
#: them stays near a second at worst; a judge object cut at a 1024-token cap (a few thousand characters, three
#: deep) is inside
MAX_REPAIR_CHARS = 8_192
MAX_REPAIR_DEPTH = 8
MAX_REPAIR_BRACKETS = 512


class NestedTooDeepError(ValueError):
    """A reply whose brackets nest deeper than :data:`MAX_REPLY_DEPTH`: not read as JSON."""


def bracket_nesting(text: str) -> tuple[int, int]:
    """(deepest nesting, number) of the brackets ``[]{}`` in ``text``, inside strings too (an upper bound of a
    JSON value's depth, found without parsing)."""
    depth = deepest = count = 0
    for match in _BRACKET.finditer(text):
        count += 1
        if match[0] in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest, count


def reply_json_values(text: str) -> Iterator[tuple[str, Any]]:
    """JSON values read from a model's reply, most literal reader first, each with its reader's name: the whole
    reply (``strict``); when that fails, each fenced ```json block (``fenced``) and the first object embedded in
    prose (``embedded``); then ``json-repair`` when installed and the reply is within its bounds
    (:data:`MAX_REPAIR_CHARS`, ...; ``repaired``, imported only when reached).

    A generator: a caller that stops at the first value it accepts never runs the later readers. A reply nested
    deeper than :data:`MAX_REPLY_DEPTH` raises :class:`NestedTooDeepError` before any reader runs. Shared by the
    round-trip MQM judge and the language-ID judge (``audits.lid_adjudication``)."""
    deepest, _ = bracket_nesting(text)
    if deepest > MAX_REPLY_DEPTH:
        raise NestedTooDeepError(f"brackets nested {deepest} deep, above the {MAX_REPLY_DEPTH} read")
    try:
        value = json.loads(text)
    except ValueError:
        yield from _tolerant(text)
    else:
        yield "strict", value
    repaired = _repaired(text)
    if repaired is not None:
        yield "repaired", repaired


def _tolerant(text: str) -> Iterator[tuple[str, Any]]:
    for block in _FENCE.findall(text):
        try:
            value = json.loads(block)
        except ValueError:
            continue
        yield "fenced", value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        yield "embedded", value
        break


def _repaired(text: str) -> Any:
    start = text.find("{")
    if start < 0 or len(text) - start > MAX_REPAIR_CHARS:
        return None
    deepest, count = bracket_nesting(text[start:])
    if deepest > MAX_REPAIR_DEPTH or count > MAX_REPAIR_BRACKETS:
        return None
    try:
        import json_repair
    except ImportError:
        return None
    try:
        return json_repair.loads(text[start:])
    except Exception:  # json-repair's own failures have no common type
        return None
