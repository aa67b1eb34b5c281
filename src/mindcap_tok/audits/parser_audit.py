"""Parser robustness: is a measured gain late answer emission, or an artefact of how prefixes are parsed?

Every record is read with its own task's parsers (:func:`task_variants`: the strict one and the task's named
lenient variants; integer: ``terminated``, ``native-digits``; choice: ``terminated``, ``paren``, ``answer``,
``phrases`` (when the task lists answer phrases), ``label``; math: ``terminated``, ``boxed``; regex:
``terminated``, ``last``). For every record the answer each parser reads at each budget is recomputed from the
token ids (the decoded bytes of the first B ids, special tokens adding nothing, as the scorer sees them),
keeping whether the strict parser read it from an *unfinished* last line (the paper's prefix-only rule).
Reported per population (its ``task`` among the keys):

- **prefix-only rescued-correct** traces: at some grid budget the strict parser reads gold from an
  unfinished line whose completed value is not gold (``#### 12`` of a future ``#### 125``);
- **value-unstable** traces: at some grid budget the strict answer differs from the completed trace's;
- for populations of the task's native arm, with premiums: the native gains inside ``(B, floor(rB)]``
  (strict score 0 at B, 1 at floor(rB)) and the share of them that are **genuinely terminated** (the
  ``terminated`` parser also scores 1 at floor(rB)); and how the Δ_L peak moves under each lenient variant.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..resample import scale_budget
from ..scoring import flat_ids, record_golds
from ..stats.premiums import PremiumTable, lookup_premium
from ..store import population_columns
from ..tasks.answers import AnswerParser
from ..tasks.model import Task
from ..tokenization.byte_tables import ByteTable, byte_table
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, find_tasks, record_tasks, task_answer_parser

#: lenient variants whose peak movement is reported against strict, per answer type (``phrases``: choice tasks
#: that list answer phrases); ``terminated`` first in each, since the gains table reads it
_TYPE_VARIANTS = {
    "integer": ("terminated", "native-digits"),
    "choice": ("terminated", "paren", "answer", "phrases", "label"),
    "math": ("terminated", "boxed"),
    "regex": ("terminated", "last"),
}


def task_variants(task: Task) -> tuple[str, ...]:
    """The lenient variants the audit compares with ``task``'s strict parser."""
    names = _TYPE_VARIANTS[task.answer.type]
    return tuple(v for v in names if v != "phrases" or (task.answer.variants or {}).get("phrases"))


def answer_lines(data: bytes, parser: AnswerParser | None = None) -> list[tuple[int, int]]:
    """Byte spans ``(start, end)`` (end excludes the newline) of the lines of ``data`` that may hold an answer of
    ``parser``: those holding ``####`` (every line for a parser whose answers need not hold it)."""
    if parser is not None and not parser.needs_hash:
        starts = [0, *(i + 1 for i, c in enumerate(data) if c == 10)]
        return [(s, e) for s, e in zip(starts, [*(x - 1 for x in starts[1:]), len(data)], strict=True)]
    spans = []
    pos = data.find(b"####")
    while pos != -1:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        end = len(data) if end == -1 else end
        spans.append((start, end))
        pos = data.find(b"####", end)
    return spans


def read_at_cuts(
    data: bytes, cuts: Sequence[int], *, at_end: Sequence[bool], parser: AnswerParser, complete: bool
) -> list[tuple[Hashable | None, bool, Hashable | None]]:
    """What ``parser`` reads from ``data[:c]`` for each cut ``c``: (value, from an unfinished line, the value of
    that line once complete). ``at_end[j]``: the prefix holds every token (ends a completed trace there).

    The first visible answer line decides (with ``parser.last`` the last one; an unfinished line is the last
    visible line, so its reading then decides when it has one)."""
    spans = [(s, e, parser.line_cuts(data[s:e])) for s, e in answer_lines(data, parser)]
    out = []
    total = len(data)
    for c, end in zip(cuts, at_end, strict=True):
        found: tuple[Hashable | None, bool, Hashable | None] = (None, False, None)
        for s, e, lc in spans:
            if s >= c:
                break
            if parser.terminated:
                closed = (e < total and c > e) or (e == total and complete and end)
                if not closed:
                    break
                if lc.full is not None:
                    found = (lc.full, False, lc.full)
                    if not parser.last:
                        break
                continue
            if e <= c:
                if lc.full is not None:
                    found = (lc.full, False, lc.full)
                    if not parser.last:
                        break
                continue
            k = c - s
            for lo, hi, value in lc.partial:
                if lo <= k < hi:
                    found = (value, True, lc.full)
                    break
            break
        out.append(found)
    return out


def _record_cuts(table: ByteTable, ids: np.ndarray, budgets: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    cum = table.token_ends(ids)  # a dummy prefix (Llama 2) drops the first text token's space
    n = len(ids)
    take = np.minimum(budgets, n)
    cuts = np.where(take > 0, cum[np.maximum(take - 1, 0)] if n else 0, 0)
    return table.decode(ids), cuts, budgets >= n


def read_records(
    records: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    *,
    budgets: Sequence[int],
    parsers: Sequence[str],
    tasks: Mapping[str, Task] | None = None,
) -> dict[str, dict[str, np.ndarray]]:
    """Per parser name (each record read by that variant of its task's answer type; ``tasks`` by name, default
    the built-in ones): ``value`` (object: the answer read, ``None`` = none), ``partial`` and ``line_full`` arrays
    of shape (records, budgets), plus ``final`` (the completed trace's value) of shape (records,)."""
    grid = np.asarray(sorted(set(int(b) for b in budgets)), dtype=np.int64)
    n = records.num_rows
    names = record_tasks(records)
    found = find_tasks(list(names)) if tasks is None else tasks
    by_task = {t: [task_answer_parser(found[t], p) for p in parsers] for t in dict.fromkeys(names)}
    out = {
        p: {
            "value": np.full((n, len(grid)), None, dtype=object),
            "partial": np.zeros((n, len(grid)), bool),
            "line_full": np.full((n, len(grid)), None, dtype=object),
            "final": np.full(n, None, dtype=object),
        }
        for p in parsers
    }
    ids, splits = flat_ids(records.column("output_ids"))
    toks = records.column("tokenizer").to_numpy(zero_copy_only=False)
    complete = records.column("finish_reason").to_numpy(zero_copy_only=False) == "stop"
    tables = {name: byte_table(tokenizers[name]) for name in dict.fromkeys(toks)}
    for r in range(n):
        ps = by_task[names[r]]
        data, cuts, at_end = _record_cuts(tables[toks[r]], ids[splits[r] : splits[r + 1]], grid)
        if b"####" not in data and all(p.needs_hash for p in ps):
            continue
        cuts_all, end_all = [*cuts.tolist(), len(data)], [*at_end.tolist(), True]
        for name, p in zip(parsers, ps, strict=True):
            got = read_at_cuts(data, cuts_all, at_end=end_all, parser=p, complete=bool(complete[r]))
            slot = out[name]
            for j, (value, partial, full) in enumerate(got[:-1]):
                if value is not None:
                    slot["value"][r, j], slot["partial"][r, j], slot["line_full"][r, j] = value, partial, full
            slot["final"][r] = got[-1][0]
    return out


def _correct(values: np.ndarray, golds: Sequence, parsers: Sequence[AnswerParser]) -> np.ndarray:
    """Boolean array of ``values``' shape: whether record r's value is correct for its gold by its parser
    (``parsers[r]``; a verdict computed once per distinct value and gold, as math equivalence is costly)."""
    out = np.zeros(values.shape, dtype=bool)
    seen: dict = {}
    for idx in zip(*np.nonzero(values != None), strict=True):  # noqa: E711 - elementwise on an object array
        r, value, gold = idx[0], values[idx], golds[idx[0]]
        if gold is None:
            continue
        key = (id(parsers[r]), value, gold)
        if key not in seen:
            seen[key] = parsers[r].correct(value, gold)
        out[idx] = seen[key]
    return out


def parser_audit(
    records: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    *,
    budgets: Sequence[int],
    premiums: PremiumTable | None = None,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> AuditResult:
    """Rescued-correct and value-unstable shares per population, each record read by its task's parsers; with
    ``premiums``, the genuinely terminated share of native gains in ``(B, floor(rB)]`` per budget and each
    lenient variant's peak movement. ``tasks``: the task files of records whose task is not built in."""
    grid = sorted({int(b) for b in budgets})
    frame = records.select(population_columns(records)).to_pandas()
    frame["task"] = record_tasks(records)
    keys = [*population_columns(frame)]
    found = find_tasks(list(dict.fromkeys(frame["task"])), tasks)
    native = frame["arm"].to_numpy() == frame["task"].map({t: v.native for t, v in found.items()}).to_numpy()
    scaled_of = {}
    if premiums is not None:
        for m, lang in frame.loc[native, ["model", "lang"]].drop_duplicates().itertuples(index=False):
            r = lookup_premium(premiums, m, lang=lang)
            scaled_of[(m, lang)] = (float(r), [scale_budget(r, b) for b in grid])
    every = sorted(set(grid) | {s for _, sc in scaled_of.values() for s in sc})
    col = {b: j for j, b in enumerate(every)}
    gi = [col[b] for b in grid]
    golds = record_golds(records)
    n = len(frame)
    rescued, unstable = np.zeros(n, bool), np.zeros(n, bool)
    gains_rows: list[dict[str, Any]] = []
    peak_rows: list[dict[str, Any]] = []
    verdicts = []
    for task_name, rows_t in frame.groupby("task", sort=True).indices.items():
        task = found[task_name]
        variants = task_variants(task)
        part = records.take(pa.array(rows_t))
        reads = read_records(part, tokenizers, budgets=every, parsers=("strict", *variants), tasks=found)
        g = [golds[i] for i in rows_t]
        parsers = {p: task_answer_parser(task, p) for p in ("strict", *variants)}
        scores = {p: _correct(reads[p]["value"], g, [parsers[p]] * len(rows_t)) for p in parsers}
        strict = reads["strict"]
        v = strict["value"][:, gi]
        line_ok = _correct(strict["line_full"][:, gi], g, [parsers["strict"]] * len(rows_t))
        rescued[rows_t] = (strict["partial"][:, gi] & scores["strict"][:, gi] & ~line_ok).any(axis=1)
        has = v != None  # noqa: E711 - elementwise on an object array
        unstable[rows_t] = (has & (v != strict["final"][:, None])).any(axis=1)
        final = {p: _correct(reads[p]["final"][:, None], g, [parsers[p]] * len(rows_t))[:, 0] for p in parsers}
        for name in variants:
            verdicts.append(
                pd.DataFrame(
                    {
                        "row": rows_t,
                        "variant": name,
                        "strict_only": final["strict"] & ~final[name],
                        "variant_only": final[name] & ~final["strict"],
                    }
                )
            )
        if scaled_of:
            local = frame.iloc[rows_t].reset_index(drop=True)
            nat = local[native[rows_t]]
            _gains(nat, keys, scaled_of, scores, (gi, col, grid, variants), gains_rows, peak_rows)
    frame["rescued"], frame["unstable"] = rescued, unstable
    robustness = (
        frame.groupby(keys, dropna=False, sort=True)
        .agg(
            n=("rescued", "size"),
            rescued_correct=("rescued", "mean"),
            value_unstable=("unstable", "mean"),
            rescued_traces=("rescued", "sum"),
            unstable_traces=("unstable", "sum"),
        )
        .reset_index()
    )
    tables = {"robustness": robustness, "agreement": _agreement(frame, keys, verdicts)}
    summary = {
        "budgets": grid,
        "variants": {name: list(task_variants(t)) for name, t in found.items()},
        "premiums": {f"{m}:{lang}": r for (m, lang), (r, _) in scaled_of.items()},
    }
    if scaled_of:
        tables["gains"] = pd.DataFrame(gains_rows)
        tables["peaks"] = pd.DataFrame(peak_rows)
    return AuditResult("parser", tables=tables, summary=summary)


def _agreement(frame: pd.DataFrame, keys: list[str], verdicts: list[pd.DataFrame]) -> pd.DataFrame:
    """Per population and lenient variant: completed traces the strict parser alone scores correct
    (``strict_only``), the variant alone (``variant_only``), and their sum (``disagree``)."""
    long = pd.concat(verdicts, ignore_index=True)
    long = pd.concat([frame.iloc[long["row"]][keys].reset_index(drop=True), long.drop(columns="row")], axis=1)
    out = (
        long.groupby([*keys, "variant"], dropna=False, sort=False)
        .agg(n=("strict_only", "size"), strict_only=("strict_only", "sum"), variant_only=("variant_only", "sum"))
        .reset_index()
    )
    out["disagree"] = out["strict_only"] + out["variant_only"]
    return out


def _gains(nat: pd.DataFrame, keys, scaled_of, scores, where, gains_rows: list, peak_rows: list) -> None:
    """Append the native gains per budget and the peak movements of one task's native populations (``nat``:
    its rows, indexed like ``scores``)."""
    gi, col, grid, variants = where
    for key, group in nat.groupby(keys, dropna=False, sort=True):
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        rows = group.index.to_numpy()
        r, scaled = scaled_of[(vals["model"], vals["lang"])]
        si = [col[s] for s in scaled]
        s_strict = scores["strict"][rows]
        gains = ~s_strict[:, gi] & s_strict[:, si]
        term = gains & scores["terminated"][rows][:, si]
        for j, b in enumerate(grid):
            n_g = int(gains[:, j].sum())
            gains_rows.append(
                {
                    **vals,
                    "budget": b,
                    "premium": r,
                    "scaled_budget": scaled[j],
                    "gains": n_g,
                    "terminated_share": term[:, j].sum() / n_g if n_g else np.nan,
                }
            )
        delta = {name: s[rows][:, si].mean(axis=0) - s[rows][:, gi].mean(axis=0) for name, s in scores.items()}
        k = int(np.argmax(delta["strict"]))
        row = {**vals, "premium": r, "peak_budget": grid[k], "delta_strict": float(delta["strict"][k])}
        for name in variants:
            kv = int(np.argmax(delta[name]))
            row[f"delta_{name}_at_peak"] = float(delta[name][k])
            row[f"move_{name}"] = float(delta[name][k] - delta["strict"][k])
            row[f"peak_budget_{name}"] = grid[kv]
        peak_rows.append(row)
