"""Translation quality of the translate-act arm: its English translation segment against MGSM's English question.

chrF (``sacrebleu``, extra ``chrf``) is always computed; COMET (``unbabel-comet``, extra ``comet``, its own
environment because its pins conflict with vLLM's) when a checkpoint path is given. Per population: the
segment-score distribution (mean, p10) and, at chosen budgets, the Spearman correlation across items between
an item's mean segment quality and its correctness gain (translate-act minus native mean strict score at B,
or the translate-act score alone when no native cell matches). Scores are descriptive: they never
condition accuracy. chrF and COMET are the shared ones of :mod:`mindcap_tok.metrics` (the round-trip report's too).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import MindcapError
from ..metrics import chrf_scores, comet_scores
from ..stats.curves import NATIVE, TRANSLATE
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, population_keys, score_matrix, skipped
from .segments import DEFAULT_DELIMITER, split_translate_act


def translation_segments(records: pa.Table, delimiter: str = DEFAULT_DELIMITER) -> pd.DataFrame:
    """Translate-act records: population keys, ``item``, ``sample``, ``segment`` (None without a delimiter)."""
    arm = records.column("arm")
    table = records.filter(pc.equal(arm, TRANSLATE))
    frame = table.select([*population_keys(table), "item", "sample"]).to_pandas()
    frame["segment"] = [split_translate_act(t, delimiter)[0] for t in table.column("text").to_pylist()]
    return frame


def _p10(x: pd.Series) -> float:
    return float(np.quantile(x, 0.1)) if len(x) else np.nan


def translation_audit(
    records: pa.Table,
    references: Mapping[int, str],
    *,
    tokenizers: Mapping[str, ResolvedTokenizer],
    budgets: Sequence[int] = (128, 192, 256),
    sources: Mapping[tuple[str, int], str] | None = None,
    comet_checkpoint: str | os.PathLike[str] | None = None,
    delimiter: str = DEFAULT_DELIMITER,
) -> AuditResult:
    """chrF (and COMET) per translate-act population, and Spearman(quality, correctness gain) at ``budgets``.

    ``references``: MGSM item -> English question. ``sources``: (lang, item) -> question in L (COMET only).
    """
    from scipy.stats import spearmanr

    seg = translation_segments(records, delimiter)
    if seg.empty:
        return skipped("comet", "no translate-act records in the ledger")
    has = seg["segment"].notna() & seg["item"].isin(list(references))
    scored = seg[has].reset_index(drop=True)
    refs = [references[i] for i in scored["item"]]
    metrics = {"chrf": chrf_scores(scored["segment"].tolist(), refs)}
    if comet_checkpoint is not None:
        if sources is None:
            raise MindcapError("COMET needs the MGSM questions in each language (sources)")
        pairs = list(zip(scored["lang"], scored["item"], strict=True))
        missing = [p for p in pairs if p not in sources]
        if missing:
            raise MindcapError(f"COMET needs the MGSM question of every segment; none for {missing[0]}")
        srcs = [sources[p] for p in pairs]
        metrics["comet"] = comet_scores(srcs, scored["segment"].tolist(), references=refs, checkpoint=comet_checkpoint)
    for name, values in metrics.items():
        scored[name] = values
    keys = population_keys(seg)
    dist = []
    for key, group in seg.groupby(keys, dropna=False, sort=True):
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        part = scored.merge(pd.DataFrame([vals]), on=keys) if len(scored) else scored
        row = {**vals, "n": len(group), "no_segment": int(group["segment"].isna().sum()), "scored": len(part)}
        for name in metrics:
            row[f"{name}_mean"] = float(part[name].mean()) if len(part) else np.nan
            row[f"{name}_p10"] = _p10(part[name])
        dist.append(row)
    # correctness gains at the chosen budgets, per item
    budgets = sorted({int(b) for b in budgets})
    arms = records.column("arm")
    both = records.filter(pc.is_in(arms, value_set=pa.array([TRANSLATE, NATIVE])))
    scores = score_matrix(both, tokenizers, budgets)
    frame = both.select([*keys, "item"]).to_pandas()
    per_item = pd.concat([frame, pd.DataFrame(scores, columns=[f"s{b}" for b in budgets])], axis=1)
    per_item = per_item.groupby([*keys, "item"], dropna=False, sort=True).mean().reset_index()
    corr = []
    pair_keys = [k for k in keys if k != "arm"]
    quality = scored.groupby([*keys, "item"], dropna=False)[list(metrics)].mean().reset_index()
    for key, q in quality.groupby(pair_keys, dropna=False, sort=True):
        vals = dict(zip(pair_keys, key if isinstance(key, tuple) else (key,), strict=True))
        t = per_item.merge(pd.DataFrame([{**vals, "arm": TRANSLATE}]), on=keys)
        n = per_item.merge(pd.DataFrame([{**vals, "arm": NATIVE}]), on=keys)
        merged = q.merge(t[["item", *[f"s{b}" for b in budgets]]], on="item")
        if len(n):
            merged = merged.merge(n[["item", *[f"s{b}" for b in budgets]]], on="item", suffixes=("", "_native"))
        for b in budgets:
            gain = merged[f"s{b}"] - (merged[f"s{b}_native"] if len(n) else 0)
            for name in metrics:
                ok = len(merged) >= 3 and gain.nunique() > 1 and merged[name].nunique() > 1
                rho, p = spearmanr(merged[name], gain) if ok else (np.nan, np.nan)
                corr.append(
                    {
                        **vals,
                        "budget": b,
                        "metric": name,
                        "items": len(merged),
                        "gain": "translate - native" if len(n) else "translate",
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
    return AuditResult(
        "comet", tables={"quality": pd.DataFrame(dist), "correlation": pd.DataFrame(corr)}, summary=summary
    )
