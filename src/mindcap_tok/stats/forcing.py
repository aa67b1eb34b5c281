"""Forcing results split by population (paper §4.4): a forced cell pools populations whose average means little.

A forced record is paired with its **source**, the unforced record of the same cell, settings, item and sample
(same cap, forcing false): the decode before forcing. The source's finish reason and whether its completed
trace holds a strict answer line (a finite emission E) put the forced record in one population:

- ``truncated``: the cap cut the source without an answer line (then the delimiter was injected; the paper's
  23.72% population);
- ``unanswered``: the source stopped by itself without an answer line (forced under ``forcing.unanswered``;
  the paper's 100% population);
- ``answered``: the source holds an answer line (forcing, if applied, came after it);
- ``unpaired``: the ledger holds no source for it, so its population is unknown.

Accuracy here is the completed (forced) trace's strict correctness C, the quantity a forced decode reports.
The ledger schema is unchanged: pairing uses the key columns every record has.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..ledger.schema import CELL_COLUMNS, SETTING_COLUMNS
from .grid import require_columns

POPULATIONS = ("truncated", "unanswered", "answered", "unpaired")


def _populations(forced: pd.DataFrame, sources: pd.DataFrame, on: list[str]) -> np.ndarray:
    """The population of every forced record from its source (see the module docs)."""
    src = sources[[*on, "finish_reason", "emission"]].drop_duplicates(on)
    joined = forced[on].merge(src, on=on, how="left", indicator=True)
    paired = (joined["_merge"] == "both").to_numpy()
    answered = np.isfinite(joined["emission"].to_numpy(dtype=np.float64))
    cut = (joined["finish_reason"] == "length").to_numpy()
    return np.select([~paired, answered, cut], ["unpaired", "answered", "truncated"], default="unanswered").astype(
        object
    )


def forcing_populations(by_record: pd.DataFrame) -> pd.DataFrame:
    """Per forced cell (``forcing`` true) and population (:data:`POPULATIONS`): ``n``, ``n_correct``,
    ``accuracy`` (a fraction; None when empty), ``share`` of the cell's records; plus a ``pooled`` row,
    reported beside the others, never instead of them."""
    need = [*CELL_COLUMNS, "item", "sample", "forcing", "finish_reason", "emission", "correct"]
    require_columns(by_record, need, what="by_record")
    flag = by_record["forcing"].fillna(False).astype(bool)
    forced, sources = by_record[flag], by_record[~flag]
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in forced.columns and c != "forcing"]
    population = _populations(forced.reset_index(drop=True), sources, [*keys, "item", "sample"])
    forced = forced.reset_index(drop=True).assign(population=population)
    rows = []
    for key, cell in forced.groupby(keys, sort=True, dropna=False):
        correct = cell["correct"].to_numpy(dtype=np.float64) == 1
        pop = cell["population"].to_numpy()
        for name in (*POPULATIONS, "pooled"):
            mask = np.ones(len(cell), bool) if name == "pooled" else pop == name
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
