"""The budget-binding regime (paper §7: "mark the region in which answer emission binds"), as ranges of budgets.

Per native cell of a :class:`~mindcap_tok.stats.curves.Sweep`, two sets of budgets B, each written as runs of
consecutive swept budgets ``[[first, last], ...]``:

- ``band_binds``: the simultaneous band of Δ_L(B) excludes 0 (``band_low > 0`` or ``band_high < 0``);
- ``emission_binds``: correct answer lines still appear in (B, floor(r·B)]: some trace with C = 1 has its
  emission E in that window (``correct_in_window`` > 0, counted on ``Scores.by_record``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..store import CELL_COLUMNS, SETTING_COLUMNS
from .curves import Sweep
from .grid import require_columns
from .roles import Arm, arm_mask, native_of


def budget_ranges(budgets: Sequence[int], mask: Sequence[bool]) -> list[list[int]]:
    """Runs of consecutive ``budgets`` (in the given order) where ``mask`` holds, as ``[first, last]`` pairs."""
    runs: list[list[int]] = []
    open_run = False
    for b, m in zip(budgets, mask, strict=True):
        if m and open_run:
            runs[-1][1] = int(b)
        elif m:
            runs.append([int(b), int(b)])
        open_run = bool(m)
    return runs


def _cell_keys(rows: pd.DataFrame) -> list[str]:
    return [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in rows.columns and c != "arm"]


def correct_in_window(rows: pd.DataFrame, by_record: pd.DataFrame, *, native: Arm | None = None) -> np.ndarray:
    """Per row of a sweep (``budget``, ``scaled_budget`` and its cell keys): how many correct native traces of
    that cell emit their answer in (B, floor(r·B)] (E = NaN, never, counts nowhere). ``native``: one arm, or each
    task's (None: each task's own)."""
    require_columns(by_record, ["arm", "emission", "correct"], what="by_record")
    native = native_of(by_record, native)
    keys = _cell_keys(rows)
    recs = by_record[arm_mask(by_record, native)]
    out = np.zeros(len(rows), dtype=np.int64)
    for key, part in rows.groupby(keys, sort=False, dropna=False):
        mask = np.ones(len(recs), dtype=bool)
        for k, v in zip(keys, key if isinstance(key, tuple) else (key,), strict=True):
            if k in recs.columns:
                mask &= (recs[k].isna() if pd.isna(v) else recs[k] == v).to_numpy()
        sel = recs[mask]
        em = sel["emission"].to_numpy(dtype=np.float64)[None, :]
        ok = sel["correct"].to_numpy(dtype=np.float64)[None, :] == 1
        low = part["budget"].to_numpy(dtype=np.float64)[:, None]
        high = part["scaled_budget"].to_numpy(dtype=np.float64)[:, None]
        out[rows.index.get_indexer(part.index)] = (ok & (em > low) & (em <= high)).sum(axis=1)
    return out


def binding_rows(result: Sweep, by_record: pd.DataFrame | None = None, *, native: Arm | None = None) -> pd.DataFrame:
    """The sweep's rows with ``band_binds`` (the band excludes 0) and, with ``by_record``, ``correct_in_window``
    (see :func:`correct_in_window`): the per-budget view of the binding regime (the CSV's columns)."""
    rows = result.rows.reset_index(drop=True)
    rows = rows.assign(band_binds=(rows["band_low"] > 0) | (rows["band_high"] < 0))
    if by_record is not None:
        rows["correct_in_window"] = correct_in_window(rows, by_record, native=native)
    return rows


def binding_regime(result: Sweep, by_record: pd.DataFrame | None = None, *, native: Arm | None = None) -> pd.DataFrame:
    """Per native cell: ``band_binds`` and (with ``by_record``) ``emission_binds`` as budget ranges (see the
    module docstring), and the swept budgets they are ranges of."""
    rows = binding_rows(result, by_record, native=native)
    out = []
    for key, part in rows.groupby(_cell_keys(rows), sort=False, dropna=False):
        part = part.sort_values("budget")
        budgets = part["budget"].tolist()
        row = dict(zip(_cell_keys(rows), key if isinstance(key, tuple) else (key,), strict=True))
        row["band_binds"] = budget_ranges(budgets, part["band_binds"].tolist())
        if "correct_in_window" in part:
            row["emission_binds"] = budget_ranges(budgets, (part["correct_in_window"] > 0).tolist())
        row["budgets"] = [int(b) for b in budgets]
        out.append(row)
    return pd.DataFrame(out)
