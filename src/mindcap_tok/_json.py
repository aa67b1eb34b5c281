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


def reply_json_values(text: str) -> Iterator[tuple[str, Any]]:
    """JSON values read from a model's reply, most literal reader first, each with its reader's name: the whole
    reply (``strict``); when that fails, each fenced ```json block (``fenced``) and the first object embedded in
    prose (``embedded``); then ``json-repair`` when installed (``repaired``, imported only when reached).

    A generator: a caller that stops at the first value it accepts never runs the later readers. Shared by the
    round-trip MQM judge and the language-ID judge (``audits.lid_adjudication``)."""
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
    try:
        import json_repair
    except ImportError:
        return None
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json_repair.loads(text[start:])
    except Exception:  # json-repair's own failures have no common type
        return None
