"""Announcement instrument validity (paper §4.4, Appendix I): a null about announcing a budget counts only if the
announcement changed behaviour.

Per cell (model, arm, lang and the settings other than ``announced``), the median output length at the tightest
announced budget is compared with the median at the loosest: reduction = 1 − median_tight / median_loose. A cell
clears the gate when the reduction is at least the protocol's ``announcement_gate`` (default 0.30). A hypothesis
about announced cells that is retained while one of its cells fails the gate is uninformative.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..store import CELL_COLUMNS, SETTING_COLUMNS
from .grid import require_columns

DEFAULT_GATE = 0.30
#: the settings that split an announcement cell (everything but the announced number itself)
_KEYS = [*CELL_COLUMNS, *(c for c in SETTING_COLUMNS if c != "announced")]


def announcement_gate(by_record: pd.DataFrame, *, gate: float = DEFAULT_GATE) -> pd.DataFrame:
    """Per cell with at least two announced budgets: ``tightest``/``loosest`` announced budget, the median
    ``n_tokens`` at each, ``reduction`` (a fraction) and ``clears_gate`` (reduction >= ``gate``)."""
    require_columns(by_record, [*CELL_COLUMNS, "announced", "n_tokens"], what="by_record")
    recs = by_record[by_record["announced"].notna()]
    keys = [k for k in _KEYS if k in recs.columns]
    rows = []
    for key, part in recs.groupby(keys, sort=True, dropna=False):
        announced = part["announced"].astype(np.int64)
        tight, loose = int(announced.min()), int(announced.max())
        if tight == loose:
            continue
        med_tight = float(np.median(part.loc[announced == tight, "n_tokens"]))
        med_loose = float(np.median(part.loc[announced == loose, "n_tokens"]))
        reduction = 1 - med_tight / med_loose if med_loose > 0 else float("nan")
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "tightest": tight,
                "loosest": loose,
                "median_tightest": med_tight,
                "median_loosest": med_loose,
                "reduction": reduction,
                "gate": gate,
                "clears_gate": bool(reduction >= gate),
            }
        )
    columns = [*keys, "tightest", "loosest", "median_tightest", "median_loosest", "reduction", "gate", "clears_gate"]
    return pd.DataFrame(rows, columns=columns)


def _matches(cell: Mapping[str, Any], term: Mapping[str, Any]) -> bool:
    shared = [k for k in (*CELL_COLUMNS, *SETTING_COLUMNS) if k in term and k in cell]
    return all(str(cell[k]) == str(term[k]) for k in shared)


def gate_decisions(
    decisions: pd.DataFrame, *, terms: Mapping[str, Iterable[Mapping[str, Any]]], gate_table: pd.DataFrame
) -> pd.DataFrame:
    """``decisions`` (a family's table, with ``id`` and ``decision``) with ``clears_gate`` (None when no announced
    cell of the hypothesis is in ``gate_table``) and ``informative`` (False for a retained null in a cell that
    fails the gate). ``terms``: per hypothesis id, its terms that name an ``announced`` budget (model, arm, lang)."""
    cells = gate_table.to_dict(orient="records")
    clears, informative = [], []
    for hid, decision in zip(decisions["id"], decisions["decision"], strict=True):
        hits = [c["clears_gate"] for t in terms.get(hid, ()) for c in cells if _matches(c, t)]
        ok = all(hits) if hits else None
        clears.append(ok)
        informative.append(not (ok is False and decision == "retain"))
    return decisions.assign(clears_gate=clears, informative=informative)
