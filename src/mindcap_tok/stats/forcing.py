"""Forcing results split by population (paper §4.4): a forced cell pools two populations whose average means little.

- ``truncated``: the cap cut the decode (finish reason ``length``), then the answer delimiter was injected;
- ``finished``: the decode stopped by itself (finish reason ``stop``); with ``forcing.unanswered`` those that
  ended without an answer line were forced too (the paper's 100% population). A record does not say whether a
  finished trace was forced, so this population also holds the finished traces that answered by themselves.

Accuracy here is the completed (forced) trace's strict correctness C, the quantity a forced decode reports.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..ledger.schema import CELL_COLUMNS, SETTING_COLUMNS
from .grid import require_columns

POPULATIONS = ("truncated", "finished")


def forcing_populations(by_record: pd.DataFrame) -> pd.DataFrame:
    """Per forced cell (``forcing`` true) and population: ``n``, ``n_correct``, ``accuracy`` (a fraction),
    ``share`` of the cell's records; plus a ``pooled`` row, reported beside the two, never instead of them."""
    require_columns(by_record, [*CELL_COLUMNS, "forcing", "finish_reason", "correct"], what="by_record")
    forced = by_record[by_record["forcing"].fillna(False).astype(bool)]
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in forced.columns and c != "forcing"]
    rows = []
    for key, cell in forced.groupby(keys, sort=True, dropna=False):
        cut = (cell["finish_reason"] == "length").to_numpy()
        correct = cell["correct"].to_numpy(dtype=np.float64) == 1
        for name, mask in (("truncated", cut), ("finished", ~cut), ("pooled", np.ones_like(cut))):
            n = int(mask.sum())
            rows.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "population": name,
                    "n": n,
                    "n_correct": int(correct[mask].sum()),
                    "accuracy": float(correct[mask].mean()) if n else None,
                    "share": n / len(cell),
                }
            )
    return pd.DataFrame(rows, columns=[*keys, "population", "n", "n_correct", "accuracy", "share"])
