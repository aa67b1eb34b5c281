"""What every audit shares: the result type, record token arrays, scoring at arbitrary budgets, seeded sampling."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import MindcapError
from ..ledger.schema import CELL_COLUMNS, SETTING_COLUMNS
from ..ledger.score import score_by_tokenizer
from ..tasks.answers.integer import Parser
from ..tokenization.load import ResolvedTokenizer

#: the cell and the settings that split its records into populations (as the scorer and stats do), when present
POPULATION_COLUMNS = (*CELL_COLUMNS, *SETTING_COLUMNS)


@dataclass
class AuditResult:
    """One audit's outcome: ``status`` is ``ok`` or ``skipped`` (then ``reason`` says why and how to fix it).

    ``tables`` hold the per-cell figures; ``summary`` the settings (thresholds, seeds) and headline numbers.
    """

    name: str
    status: str = "ok"
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    reason: str = ""

    def as_dict(self) -> dict:
        """Plain, JSON-ready data."""
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "summary": self.summary,
            "tables": {k: _records(v) for k, v in self.tables.items()},
        }


def _records(frame: pd.DataFrame) -> list[dict]:
    clean = frame.astype(object).where(frame.notna(), None)
    return [{k: _plain(v) for k, v in row.items()} for row in clean.to_dict(orient="records")]


def _plain(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def skipped(name: str, reason: str) -> AuditResult:
    """A skipped audit with its reason (e.g. the install command of a missing extra)."""
    return AuditResult(name=name, status="skipped", reason=reason)


def population_keys(table: pa.Table | pd.DataFrame) -> list[str]:
    """The cell and settings columns present in ``table`` that split it into populations (``thinking`` only
    where some record thinks, so audits of other ledgers keep their columns)."""
    names = table.column_names if isinstance(table, pa.Table) else list(table.columns)
    keys = [c for c in POPULATION_COLUMNS if c in names]
    if "thinking" in keys:
        col = table.column("thinking") if isinstance(table, pa.Table) else table["thinking"]
        if not (col.to_numpy(zero_copy_only=False) if isinstance(table, pa.Table) else col.to_numpy()).any():
            keys.remove("thinking")
    return keys


def score_matrix(
    table: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    budgets: Sequence[int],
    parser: str | Parser = "strict",
) -> np.ndarray:
    """(records, budgets) int8 prefix scores at any budgets, no per-row DataFrame (see ``score_by_tokenizer``)."""
    if table.num_rows == 0:
        return np.zeros((0, len(budgets)), dtype=np.int8)
    return score_by_tokenizer(table, tokenizers, budgets=budgets, parser=parser).scores


def stratified_sample(frame: pd.DataFrame, strata: Sequence[str], per_stratum: int, seed: int) -> np.ndarray:
    """Positions of up to ``per_stratum`` rows drawn without replacement from every stratum (seeded; strata
    visited in sorted order, so the same seed and data give the same sample)."""
    if per_stratum < 1:
        raise MindcapError(f"the sample size per stratum must be at least 1, got {per_stratum}")
    rng = np.random.default_rng(seed)
    picks = []
    if frame.empty:
        return np.zeros(0, dtype=np.int64)
    groups = frame.reset_index(drop=True).groupby(list(strata), dropna=False, sort=True).indices
    for key in sorted(groups, key=str):
        rows = np.asarray(groups[key])
        take = rows if len(rows) <= per_stratum else np.sort(rng.choice(rows, size=per_stratum, replace=False))
        picks.append(take)
    return np.concatenate(picks).astype(np.int64)
