"""Forcing results split by population (paper §4.4): a forced cell pools populations whose average means little.

Each record of a forcing job is put in the population of its decode *before* forcing:

- ``truncated``: the cap cut it (finish reason ``length``; then the delimiter was injected; the paper's 23.72%
  population);
- ``unanswered``: it stopped by itself without an answer line (forced under ``forcing.unanswered``; the paper's
  100% population);
- ``answered``: it stopped by itself with an answer line (not forced: its trace is its own);
- ``finished``: it stopped by itself, but the ledger does not say whether it was forced (its ``forced`` is null)
  and holds no unforced source for it.

Where it comes from: the record's ``forced`` column (``generate`` records it for every forcing job: forced and
stopped means unanswered; not forced, its own emission E says whether it answered); else its **source**, the
unforced record of the same cell, settings, item and sample (its finish reason and emission E); else its own
finish reason (``generate`` keeps the source's: ``length`` is truncated, ``stop`` is finished).

Accuracy here is the completed (forced) trace's strict correctness C, the quantity a forced decode reports.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..store import CELL_COLUMNS, SETTING_COLUMNS
from .grid import require_columns

POPULATIONS = ("truncated", "unanswered", "answered", "finished")


def _populations(forced: pd.DataFrame, sources: pd.DataFrame, on: list[str]) -> np.ndarray:
    """The population of every record of a forcing job (see the module docs)."""
    own_cut = (forced["finish_reason"] == "length").to_numpy()
    own_answered = np.isfinite(forced["emission"].to_numpy(dtype=np.float64))
    flag = forced["forced"] if "forced" in forced else pd.Series(pd.NA, index=forced.index, dtype="boolean")
    flag = flag.astype("boolean")
    known, was_forced = flag.notna().to_numpy(), flag.fillna(False).to_numpy(dtype=bool)
    src = sources[[*on, "finish_reason", "emission"]].drop_duplicates(on)
    joined = forced[on].merge(src, on=on, how="left", indicator=True)
    paired = (joined["_merge"] == "both").to_numpy()
    src_cut = (joined["finish_reason"] == "length").to_numpy()
    src_answered = np.isfinite(joined["emission"].to_numpy(dtype=np.float64))
    conditions = [
        own_cut,
        known & was_forced,
        known & own_answered,
        known,
        paired & src_cut,
        paired & src_answered,
        paired,
    ]
    choices = ["truncated", "unanswered", "answered", "unanswered", "truncated", "answered", "unanswered"]
    return np.select(conditions, choices, default="finished").astype(object)


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
