"""Id sequences as the families' decoders take them."""

from __future__ import annotations

from collections.abc import Sequence


def without(ids: Sequence[Sequence[int]], drop: frozenset[int]) -> list[list[int]]:
    """Every id sequence as a list, ids in ``drop`` left out."""
    if not drop:
        return [list(x) for x in ids]
    return [[i for i in x if i not in drop] for x in ids]
