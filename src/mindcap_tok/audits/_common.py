"""What every audit shares: the result type, record token arrays, scoring at arbitrary budgets, seeded sampling,
and each record's task (its answer parser, its native and comparator arms)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import BadInputError
from ..scoring import score_by_tokenizer
from ..store import CELL_COLUMNS, SETTING_COLUMNS
from ..tasks.answers import AnswerParser, get_parser
from ..tasks.model import Task
from ..tasks.roles import find_tasks, record_tasks
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


def task_answer_parser(task: Task, spec: str = "strict") -> AnswerParser:
    """The parser named ``spec`` (a variant, or variants joined by ``+``) of ``task``'s answer type."""
    return get_parser(spec, None if task.answer.type == "integer" else task.answer)


def score_matrix(
    table: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    budgets: Sequence[int] | np.ndarray,
    parser: str | AnswerParser = "strict",
    *,
    tasks: Mapping[str, Task] | None = None,
) -> np.ndarray:
    """(records, budgets) int8 prefix scores at any budgets, each record read by its task's parser named
    ``parser`` (a parser object reads every record; ``tasks`` by name, default: the built-in ones), no per-row
    DataFrame (see ``score_by_tokenizer``)."""
    out = np.zeros((table.num_rows, len(budgets)), dtype=np.int8)
    if table.num_rows == 0:
        return out
    if hasattr(parser, "line_cuts"):
        return score_by_tokenizer(table, tokenizers, budgets=budgets, parser=parser).scores
    names = record_tasks(table)
    found = find_tasks(list(names)) if tasks is None else tasks
    for name in dict.fromkeys(names):
        rows = np.flatnonzero(names == name)
        part = table if len(rows) == table.num_rows else table.take(pa.array(rows))
        out[rows] = score_by_tokenizer(
            part, tokenizers, budgets=budgets, parser=task_answer_parser(found[name], parser)
        ).scores
    return out


def stratified_sample(frame: pd.DataFrame, strata: Sequence[str], per_stratum: int, seed: int) -> np.ndarray:
    """Positions of up to ``per_stratum`` rows drawn without replacement from every stratum (seeded; strata
    visited in sorted order, so the same seed and data give the same sample)."""
    if per_stratum < 1:
        raise BadInputError(f"the sample size per stratum must be at least 1, got {per_stratum}")
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
