"""Strict JSON: what every command writes. Missing values are ``null``, never ``NaN`` or ``Infinity``."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
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
