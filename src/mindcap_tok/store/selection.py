"""A ``--model``/``--arm``/``--lang`` selection checked against what a ledger holds: the error for one that
matches no record (which filter matched nothing and what the ledger holds instead, so the user can correct the
selection in one step), and a warning for each value that matches nothing while others do (``--lang fr th`` on a
ledger without French). Every command that filters a ledger this way (``score``, ``sweep``, ``report``,
``consistency``, ``confirm``, ``protocol test``, ``cost-grid``) uses both."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ..data.languages import resolve_language
from ..errors import BadInputError
from .ledger import Ledger, model_key

logger = logging.getLogger(__name__)

#: values named in one listing before the rest are only counted
LISTED = 30


def _listing(values: Sequence[str]) -> str:
    """``a, b, c`` (the first :data:`LISTED` values, then how many more)."""
    shown = ", ".join(values[:LISTED])
    return shown if len(values) <= LISTED else f"{shown} and {len(values) - LISTED} more"


def _filters(
    models: Sequence[str], arms: Sequence[str], langs: Sequence[str]
) -> list[tuple[str, Sequence[str], int, Callable[[str], str]]]:
    """Each filter: its flag, the values given, its place in a cell key and how a value is keyed."""
    return [("--model", models, 0, model_key), ("--arm", arms, 1, str), ("--lang", langs, 2, resolve_language)]


def warn_unmatched(
    ledger: Ledger, *, models: Sequence[str] = (), arms: Sequence[str] = (), langs: Sequence[str] = ()
) -> None:
    """A warning for each selected value the ledger holds no record of (the others' results go on without it,
    so the user is told the output lacks what was asked for). Reads only the manifest."""
    cells = {s.model_cell for s in ledger.shards()}
    for flag, wanted, position, key in _filters(models, arms, langs):
        held = sorted({cell[position] for cell in cells})
        missing = [w for w in wanted if key(w) not in held]
        if missing and len(missing) < len(wanted):
            logger.warning(
                f"{flag} {' '.join(missing)} matches no record of {ledger.root} (it holds {_listing(held)}); "
                "the results leave it out"
            )


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
    misses, given = [], []
    for flag, wanted, position, key in _filters(models, arms, langs):
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
