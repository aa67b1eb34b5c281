"""The error for a ``--model``/``--arm``/``--lang`` selection that matches no record of a ledger: which filter
matched nothing and what the ledger holds instead, so the user can correct the selection in one step. Every
command that filters a ledger this way (``score``, ``sweep``, ``report``, ``consistency``, ``confirm``, ``protocol
test``, ``cost-grid``) raises it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..data.languages import resolve_language
from ..errors import BadInputError
from ..tokenization.registry import canonical_model_name
from .store import Ledger

#: values named in one listing before the rest are only counted
LISTED = 30


def _listing(values: Sequence[str]) -> str:
    """``a, b, c`` (the first :data:`LISTED` values, then how many more)."""
    shown = ", ".join(values[:LISTED])
    return shown if len(values) <= LISTED else f"{shown} and {len(values) - LISTED} more"


def _model_key(name: str) -> str:
    return canonical_model_name(name) or name


def empty_selection(
    ledger: Ledger,
    *,
    models: Sequence[str] = (),
    arms: Sequence[str] = (),
    langs: Sequence[str] = (),
) -> BadInputError:
    """The one-line error for a selection (values as the user gave them; empty: no filter) under which ``ledger``
    yields no record: each filter none of whose values the ledger holds, with the values it holds (``--lang fr:
    the ledger holds deu_Latn, tha_Thai``); when every filter matches some records but not together, the cells
    it holds. Reads only the manifest."""
    cells = sorted({s.model_cell for s in ledger.shards()})
    if not cells:
        return BadInputError(f"no records in {ledger.root}: the ledger is empty")
    filters: list[tuple[str, Sequence[str], int, Callable[[str], str]]] = [
        ("--model", models, 0, _model_key),
        ("--arm", arms, 1, str),
        ("--lang", langs, 2, resolve_language),
    ]
    misses, given = [], []
    for flag, wanted, position, key in filters:
        if not wanted:
            continue
        given.append(f"{flag} {' '.join(wanted)}")
        held = sorted({cell[position] for cell in cells})
        if not {key(w) for w in wanted} & set(held):
            misses.append(f"{flag} {' '.join(wanted)} (the ledger holds {_listing(held)})")
    if misses:
        return BadInputError(f"no records in {ledger.root} match {'; '.join(misses)}")
    named = _listing(["/".join(cell) for cell in cells])
    return BadInputError(f"no records in {ledger.root} match {' with '.join(given)} together (its cells: {named})")
