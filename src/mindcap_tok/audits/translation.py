"""Translation quality of the arms whose trace opens with a translation of the item (translate-act): that segment
against the item in the language translated into.

Which arms have a translation segment is the task's to say (``translation = "eng_Latn"`` on an arm of its task
file); a task with no such arm is *not applicable*, a row of the ``applicability`` table (and the reason the
audit is skipped when no task of the ledger has one). chrF (``sacrebleu``, extra ``chrf``) is always computed;
COMET (``unbabel-comet``, extra ``comet``, its own environment because its pins conflict with vLLM's) when a
checkpoint path is given. Per population: the segment-score distribution (mean, p10) and, at chosen budgets,
the Spearman correlation across items between an item's mean segment quality and its correctness gain (the
translation arm minus the task's native arm, mean strict score at B, or the translation arm's score alone
when no native cell matches). Scores are descriptive: they never condition accuracy. chrF and COMET are the
shared ones of :mod:`mindcap_tok.metrics` (the round-trip report's too).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import BadInputError
from ..metrics import chrf_scores, comet_scores
from ..store import population_columns
from ..tasks.model import Task
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, find_tasks, record_tasks, score_matrix, skipped
from .segments import DEFAULT_DELIMITER, split_translate_act


def translation_arms(tasks: Mapping[str, Task]) -> dict[str, dict[str, str]]:
    """Per task name: its arms with a translation segment and the language each translates into."""
    return {name: {a: arm.translation for a, arm in t.arms.items() if arm.translation} for name, t in tasks.items()}


def translation_segments(
    records: pa.Table, delimiter: str = DEFAULT_DELIMITER, *, arms: Mapping[str, Collection[str]]
) -> pd.DataFrame:
    """Records of a translation arm (``arms``: task -> its translation arms): population keys, ``task``,
    ``item``, ``sample``, ``segment`` (None without a delimiter)."""
    tasks = record_tasks(records)
    arm = records.column("arm").to_numpy(zero_copy_only=False)
    mask = np.array([a in arms.get(t, ()) for t, a in zip(tasks, arm, strict=True)], dtype=bool)
    table = records.filter(pa.array(mask))
    frame = table.select([*population_columns(table), "item", "sample"]).to_pandas()
    frame["task"] = tasks[mask]
    frame["segment"] = [split_translate_act(t, delimiter)[0] for t in table.column("text").to_pylist()]
    return frame


def _lookup(mapping: Mapping, task: str, *key):
    """``mapping[(task, *key)]``, else ``mapping[key]`` (a bare item or (lang, item) applies to every task)."""
    if (task, *key) in mapping:
        return mapping[(task, *key)]
    bare = key[0] if len(key) == 1 else key
    return mapping.get(bare)


def _applicability(found: Mapping[str, Task], arms: Mapping[str, Mapping[str, str]]) -> pd.DataFrame:
    rows = []
    for name in sorted(found):
        have = arms[name]
        rows.append(
            {
                "task": name,
                "translation_arms": ", ".join(have),
                "status": "ok" if have else "not applicable",
                "reason": "" if have else f"no arm of task {name} has a translation segment (arms.<arm>.translation)",
            }
        )
    return pd.DataFrame(rows)


def _p10(x: pd.Series) -> float:
    return float(np.quantile(x, 0.1)) if len(x) else np.nan


def translation_audit(
    records: pa.Table,
    references: Mapping,
    *,
    tokenizers: Mapping[str, ResolvedTokenizer],
    budgets: Sequence[int] = (128, 192, 256),
    sources: Mapping | None = None,
    comet_checkpoint: str | os.PathLike[str] | None = None,
    delimiter: str = DEFAULT_DELIMITER,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> AuditResult:
    """chrF (and COMET) per translation-arm population, and Spearman(quality, correctness gain) at ``budgets``.

    ``references``: item -> the item in the language translated into (or (task, item) -> it, for a ledger of
    several tasks). ``sources``: (lang, item) -> the item in L, or (task, lang, item) -> it (COMET only).
    ``tasks``: the task files of records whose task is not built in.
    """
    from scipy.stats import spearmanr

    found = find_tasks(list(dict.fromkeys(record_tasks(records))), tasks)
    arms = translation_arms(found)
    applicable = _applicability(found, arms)
    if not any(arms.values()):
        return skipped("comet", f"not applicable: {'; '.join(applicable['reason'])}")
    seg = translation_segments(records, delimiter, arms=arms)
    if seg.empty:
        named = ", ".join(f"{a} of {t}" for t, have in arms.items() for a in have)
        return skipped("comet", f"no records of a translation arm ({named}) in the ledger")
    refs_of = [_lookup(references, t, i) for t, i in zip(seg["task"], seg["item"], strict=True)]
    has = seg["segment"].notna() & pd.Series([r is not None for r in refs_of], index=seg.index)
    scored = seg[has].reset_index(drop=True)
    if scored.empty:  # an audit that scored nothing is never "ok"
        no_segment = int(seg["segment"].isna().sum())
        no_reference = int(sum(r is None for r, s in zip(refs_of, seg["segment"], strict=True) if s is not None))
        return skipped(
            "comet",
            f"nothing scored: of {len(seg)} translation-arm records, {no_segment} have no translation segment (no "
            f"match of the delimiter regex {delimiter}; see --delimiter) and {no_reference} no reference text",
        )
    refs = [r for r, h in zip(refs_of, has, strict=True) if h]
    metrics = {"chrf": chrf_scores(scored["segment"].tolist(), refs)}
    if comet_checkpoint is not None:
        if sources is None:
            raise BadInputError("COMET needs each item in its own language (sources)")
        srcs = [_lookup(sources, t, lang, i) for t, lang, i in scored[["task", "lang", "item"]].itertuples(index=False)]
        missing = [(lang, i) for lang, i, x in zip(scored["lang"], scored["item"], srcs, strict=True) if x is None]
        if missing:
            raise BadInputError(f"COMET needs the source of every segment; none for {missing[0]}")
        metrics["comet"] = comet_scores(srcs, scored["segment"].tolist(), references=refs, checkpoint=comet_checkpoint)
    for name, values in metrics.items():
        scored[name] = values
    keys = [*population_columns(seg.drop(columns="task")), "task"]
    keys = list(dict.fromkeys(keys))
    dist = []
    for key, group in seg.groupby(keys, dropna=False, sort=True):
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        part = scored.merge(pd.DataFrame([vals]), on=keys) if len(scored) else scored
        row = {**vals, "n": len(group), "no_segment": int(group["segment"].isna().sum()), "scored": len(part)}
        for name in metrics:
            row[f"{name}_mean"] = float(part[name].mean()) if len(part) else np.nan
            row[f"{name}_p10"] = _p10(part[name])
        dist.append(row)
    # correctness gains at the chosen budgets, per item: the translation arm against its task's native arm
    budgets = sorted({int(b) for b in budgets})
    natives = {t: found[t].native for t in arms}
    rec_tasks = record_tasks(records)
    arm = records.column("arm").to_numpy(zero_copy_only=False)
    wanted = np.array(
        [a in arms.get(t, ()) or a == natives.get(t) for t, a in zip(rec_tasks, arm, strict=True)], dtype=bool
    )
    both = records.filter(pa.array(wanted))
    scores = score_matrix(both, tokenizers, budgets, tasks=found)
    frame = both.select([k for k in population_columns(both) if k != "task"] + ["item"]).to_pandas()
    frame["task"] = rec_tasks[wanted]
    cols = [f"s{b}" for b in budgets]
    per_item = pd.concat([frame, pd.DataFrame(scores, columns=cols)], axis=1)
    per_item = per_item.groupby([*keys, "item"], dropna=False, sort=True).mean().reset_index()
    corr = []
    pair_keys = [k for k in keys if k != "arm"]
    quality = scored.groupby([*keys, "item"], dropna=False)[list(metrics)].mean().reset_index()
    for key, q in quality.groupby(keys, dropna=False, sort=True):
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        native = natives[vals["task"]]
        t = per_item.merge(pd.DataFrame([vals]), on=keys)
        n = per_item.merge(pd.DataFrame([{**vals, "arm": native}]), on=keys)
        merged = q.merge(t[["item", *cols]], on="item")
        if len(n):
            merged = merged.merge(n[["item", *cols]], on="item", suffixes=("", "_native"))
        for b in budgets:
            gain = merged[f"s{b}"] - (merged[f"s{b}_native"] if len(n) else 0)
            for name in metrics:
                ok = len(merged) >= 3 and gain.nunique() > 1 and merged[name].nunique() > 1
                rho, p = spearmanr(merged[name], gain) if ok else (np.nan, np.nan)
                corr.append(
                    {
                        **{k: vals[k] for k in pair_keys},
                        "arm": vals["arm"],
                        "budget": b,
                        "metric": name,
                        "items": len(merged),
                        "gain": f"{vals['arm']} - {native}" if len(n) else vals["arm"],
                        "mean_gain": float(gain.mean()) if len(gain) else np.nan,
                        "spearman": float(rho),
                        "p_value": float(p),
                    }
                )
    summary = {
        "metrics": list(metrics),
        "budgets": budgets,
        "delimiter": delimiter,
        "comet_checkpoint": None if comet_checkpoint is None else os.path.basename(str(comet_checkpoint)),
        "segments_scored": len(scored),
        "segments_missing": int((~has).sum()),
    }
    tables = {"quality": pd.DataFrame(dist), "correlation": pd.DataFrame(corr), "applicability": applicable}
    return AuditResult("comet", tables=tables, summary=summary)
