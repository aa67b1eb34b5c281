"""What a run's own cap did: cap hits, truncated vs completed accuracy, and the accuracy curve below the cap.

Per population (cell and settings, ``cap`` among them), from the strict scores of every record by its task's
parser (:func:`~mindcap_tok.scoring.score.score_ledger`, nothing re-parsed here):

- **cap hits**: records whose finish reason is ``length``, their share with a Wilson interval; records whose
  cut status is unknown (finish reason ``unknown``: a log that keeps only part of the decode) are counted apart
  (``cut_unknown``, a column only where some record is so) and widen the interval up to "all of them cut";
- **accuracy at the cap** of the completed (``stop``) and the truncated (``length``) traces: the strict score of
  the whole trace (C), which is its score at the cap;
- the **never-emission** share: traces with no answer line the strict parser reads anywhere (E undefined);
- the **most a higher cap could add**: the truncated (or possibly truncated: unknown) traces wrong at the cap,
  as a share of all records (a completed trace reads the same at any larger cap; a truncated one can at best
  turn correct);
- the **accuracy curve** at budgets up to the cap (default: the cap's eighths; else the given budgets ≤ cap,
  and the cap);
- with premiums, **Δ_L(B)** of the task's native arm for every grid B whose floor(r·B) is within the cap (the
  stats' :func:`~mindcap_tok.stats.curves.delta_table`);
- one plain **sentence** per population saying this.

Records imported from logs (``retokenized``: their ids re-encode the logged text) are counted apart: their
length, and so their cap hits, are re-encoded, not sampled.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import MindcapError
from ..resample import scale_budget
from ..scoring import Scores, score_ledger
from ..stats.cap import CUT, UNKNOWN
from ..stats.curves import delta_table
from ..stats.premiums import PremiumTable, lookup_premium
from ..store import population_columns
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, find_tasks, record_tasks
from .determinism import wilson_interval

#: the default grid below a cap: its eighths (ceil(cap·k/8), k = 1..8)
DEFAULT_STEPS = 8


def cap_grid(cap: int, budgets: Sequence[int] | None = None) -> list[int]:
    """The budgets of a population's curve: ``budgets`` up to ``cap`` and ``cap`` itself (default: the eighths)."""
    if budgets is None:
        return sorted({math.ceil(cap * k / DEFAULT_STEPS) for k in range(1, DEFAULT_STEPS + 1)})
    return sorted({int(b) for b in budgets if int(b) <= cap} | {int(cap)})


def _sentence(row: dict, native: bool, peak: dict | None) -> str:
    """The population in words: how often the cap binds, the most a higher cap adds, native accuracy in the window."""
    who = f"{row['arm']} {row['lang']} traces of {row['model']} on {row['task']} at cap {row['cap']}"
    unknown = row.get("cut_unknown", 0)
    share = f"{100 * row['cap_hit']:.0f}%"
    if unknown:
        share += f" to {100 * (row['cap_hits'] + unknown) / row['records']:.0f}%"
    text = (
        f"the cap binds for {share} of {who}"
        f" ({row['cap_hits']} of {row['records']}"
        + (f"; {unknown} of unknown cut status: the log keeps only part of their decode" if unknown else "")
        + (
            f", of which {row['retokenized_cap_hits']} retokenized: their length is re-encoded, not sampled"
            if row["retokenized_cap_hits"]
            else ""
        )
        + f"); the most a higher cap could add is {100 * row['max_gain']:.0f} points"
    )
    if native and peak is not None:
        text += (
            f"; between B = {peak['budget']} and floor(rB) = {peak['scaled_budget']} (r = {peak['premium']:.3f}) "
            f"native accuracy rises by {100 * peak['delta']:.1f} points, the largest Δ_L within the cap"
        )
    elif native:
        text += "; Δ_L: no premium given, or no B with floor(rB) within the cap"
    return text + "."


def _premium(premiums: PremiumTable | None, cell: Mapping) -> Fraction | None:
    """The cell's premium, or ``None`` when none is given for its model and language (no Δ_L for it)."""
    if premiums is None:
        return None
    try:
        return lookup_premium(premiums, cell["model"], lang=cell["lang"])
    except MindcapError:
        return None


def truncation_audit(
    records: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    *,
    budgets: Sequence[int] | None = None,
    premiums: PremiumTable | None = None,
    tasks: Sequence[str | os.PathLike[str]] = (),
    level: float = 0.95,
) -> AuditResult:
    """Cap hits (Wilson CI at ``level``), completed vs truncated accuracy at the cap, never-emission share, the
    accuracy curve below the cap and (with ``premiums``) native Δ_L within it, per population (module docs).

    Each record is scored by its task's strict parser at every budget this needs (``tasks``: the task files of
    records whose task is not built in), then :func:`truncation_tables` does the rest.
    """
    frame = records.select(population_columns(records)).to_pandas()
    frame["task"] = record_tasks(records)
    found = find_tasks(list(dict.fromkeys(frame["task"])), tasks)
    natives = {name: t.native for name, t in found.items()}
    grids = {int(c): cap_grid(int(c), budgets) for c in frame["cap"].unique()}
    every = {b for g in grids.values() for b in g}
    if premiums is not None:
        is_native = frame["arm"].to_numpy() == frame["task"].map(natives).to_numpy()
        for cell in frame.loc[is_native, ["model", "lang", "cap"]].drop_duplicates().to_dict(orient="records"):
            r, cap = _premium(premiums, cell), int(cell["cap"])
            every |= set() if r is None else {s for s in (scale_budget(r, b) for b in grids[cap]) if s <= cap}
    table = records if "task" in records.column_names else records.append_column("task", pa.array(frame["task"]))
    scores = score_ledger(table, tokenizers, budgets=sorted(every), tasks=tasks)
    return truncation_tables(scores, natives=natives, budgets=budgets, premiums=premiums, level=level)


def truncation_tables(
    scores: Scores,
    *,
    natives: str | Mapping[str, str],
    budgets: Sequence[int] | None = None,
    premiums: PremiumTable | None = None,
    level: float = 0.95,
) -> AuditResult:
    """The truncation audit of scored records (``scores.by_record`` with ``finish_reason`` and ``cap``).

    ``natives``: the native arm (one for every task, or per task name). The curve and Δ_L use the budgets of
    each population's grid (:func:`cap_grid`) that were scored; the accuracy at the cap is the completed-trace
    correctness C, which is the strict score at the cap of every trace within it (a text re-encoded past its cap
    is read whole, as the tool that logged it read it).
    """
    rec = scores.by_record.reset_index(drop=True)
    by_budget = scores.by_budget.reset_index(drop=True)
    scored = [int(b) for b in scores.budgets]
    nb = len(scored)
    keys = [k for k in population_columns(rec) if k in rec.columns]
    if "task" not in keys:
        rec = rec.assign(task=record_tasks(rec))
        keys.append("task")
    tasks = pd.Series(record_tasks(rec), index=rec.index)
    native_of = tasks.map(natives).to_numpy() if isinstance(natives, Mapping) else np.full(len(rec), natives)
    is_native = rec["arm"].to_numpy() == native_of
    matrix = by_budget["score"].to_numpy().reshape(len(rec), nb)
    col = {b: j for j, b in enumerate(scored)}
    finish = rec["finish_reason"].to_numpy()
    hit, done, unknown = finish == CUT, finish == "stop", finish == UNKNOWN
    ok = rec["correct"].to_numpy() == 1
    never = np.isnan(rec["emission"].to_numpy(dtype=float))
    retok = rec["retokenized"].fillna(False).to_numpy(dtype=bool) if "retokenized" in rec else np.zeros(len(rec), bool)
    cells, curve, deltas, used = [], [], [], {}
    for key, group in rec.groupby(keys, dropna=False, sort=True):
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        rows = group.index.to_numpy()
        cap, n, n_hit = int(vals["cap"]), len(rows), int(hit[rows].sum())
        n_unknown = int(unknown[rows].sum())
        low = wilson_interval(n_hit, n, level=level)[0]
        high = wilson_interval(n_hit + n_unknown, n, level=level)[1]
        row = {
            **vals,
            "records": n,
            "cap_hits": n_hit,
            "cap_hit": n_hit / n,
            "cut_unknown": n_unknown,
            "ci_low": low,
            "ci_high": high,
            "retokenized": int(retok[rows].sum()),
            "retokenized_cap_hits": int((retok & hit)[rows].sum()),
            "completed": int(done[rows].sum()),
            "acc_completed": float(ok[rows][done[rows]].mean()) if done[rows].any() else np.nan,
            "acc_truncated": float(ok[rows][hit[rows]].mean()) if n_hit else np.nan,
            "acc_at_cap": float(ok[rows].mean()),
            "never_emission": float(never[rows].mean()),
            "max_gain": float(((hit | unknown)[rows] & ~ok[rows]).sum() / n),
        }
        grid = [b for b in cap_grid(cap, budgets) if b in col]
        curve += [{**vals, "budget": b, "accuracy": float(matrix[rows, col[b]].mean()), "n": n} for b in grid]
        native, peak = bool(is_native[rows[0]]), None
        r = _premium(premiums, vals) if native else None
        if r is not None:
            used[f"{vals['model']}:{vals['lang']}"] = float(r)
            within = [b for b in grid if scale_budget(r, b) <= cap and scale_budget(r, b) in col]
            if within:
                part = by_budget.iloc[(rows[:, None] * nb + np.arange(nb)).ravel()]
                rs = delta_table(part, premiums, budgets=within, native=vals["arm"])
                rs = rs.drop(columns=["beyond_cap", "cap_status", "delta_lower", "delta_upper"], errors="ignore")
                rs.insert(1, "arm", vals["arm"])
                deltas.append(rs)
                peak = rs.loc[rs["delta"].idxmax()].to_dict()
        row["sentence"] = _sentence(row, native, peak)
        cells.append(row)
    cell_table = pd.DataFrame(cells)
    if not unknown.any():
        cell_table = cell_table.drop(columns="cut_unknown")
    tables = {"cells": cell_table, "curve": pd.DataFrame(curve)}
    if deltas:
        tables["delta"] = pd.concat(deltas, ignore_index=True)
    summary = {
        "budgets": "eighths of each cap" if budgets is None else sorted({int(b) for b in budgets}),
        "level": level,
        "premiums": used,
        "parser": scores.parser,
        **({"versions": scores.versions} if scores.versions else {}),
    }
    return AuditResult("truncation", tables=tables, summary=summary)
