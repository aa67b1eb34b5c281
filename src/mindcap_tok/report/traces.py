"""The traces of a report's trace viewer: a seeded sample of a ledger's records, each with its text (decoded from
its token ids), its prompt and the marks the viewer draws (B and floor(r·B) of every swept budget, the cap, the
thought's close, the first answer position E) as token positions and character offsets, with the strict score of
the prefix at each mark."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..store import CELL_COLUMNS, KEY_COLUMNS, SETTING_COLUMNS, Ledger, resolve_tokenizers
from ..tokenization.byte_tables import byte_table

if TYPE_CHECKING:
    from ..scoring import Scores
    from ..tokenization.load import ResolvedTokenizer

#: the viewer's outcome filter: correct (C = 1), cut (the cap cut it, wrong at the cap), never answered (no
#: answer line read), wrong (answered wrong)
VIEW_OUTCOMES = ("correct", "cut", "never answered", "wrong")
#: the most traces a page embeds by default (the demo's page stays under ~10 MB with them)
MAX_TRACES = 600
#: the most bytes of trace and prompt text a page embeds: long traces (reasoning models) leave fewer traces shown
MAX_TEXT_BYTES = 4_000_000
_READ = ["prompt", "output_ids", "finish_reason", "tokenizer", "think_end", "gold", "gold_text"]


@dataclass(frozen=True)
class TraceSample:
    """The traces a page shows (``traces``: one JSON-ready dict each) out of ``total`` records."""

    traces: list[dict[str, Any]]
    total: int


def view_outcome(correct: float, emission: float, *, finish_reason: str | None) -> str:
    """A record's outcome as the viewer filters it (:data:`VIEW_OUTCOMES`)."""
    if correct == 1:
        return "correct"
    if finish_reason in ("length", "unknown"):
        return "cut"
    return "never answered" if emission != emission else "wrong"


def char_offsets(data: bytes, byte_cuts: Sequence[int]) -> list[int]:
    """The character offset in ``data.decode("utf-8", "replace")`` of each byte cut; a cut inside a multi-byte
    character falls before that character."""
    text = data.decode("utf-8", "replace")
    out = []
    for c in byte_cuts:
        prefix = data[:c].decode("utf-8", "replace")
        while prefix and not text.startswith(prefix):  # a cut inside a character decodes it as U+FFFD
            prefix = prefix[:-1]
        out.append(len(prefix))
    return out


def cell_label(rec: dict[str, Any]) -> str:
    """A record's cell as the viewer lists it: model · arm · language · design, and the settings that differ
    from the plain run (an announced budget, a style, forcing, thinking), and the cap."""
    parts = [str(rec[k]) for k in ("model", "arm", "lang", "task", "design")]
    if _num(rec.get("announced")) is not None:
        parts.append(f"announced {_num(rec['announced'])} ({rec.get('announce_style')})")
    parts += [name for name in ("forcing", "thinking") if rec.get(name) is True]
    if _num(rec.get("cap")) is not None:
        parts.append(f"cap {_num(rec['cap'])}")
    return " · ".join(parts)


def _marks(rows: pd.DataFrame) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(model, lang) -> the sweep's (B, floor(r·B)) pairs."""
    pairs = rows[["model", "lang", "budget", "scaled_budget"]].drop_duplicates()
    out: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for m, lang, b, sb in pairs.itertuples(index=False):
        out.setdefault((m, lang), []).append((int(b), int(sb)))
    return {k: sorted(v) for k, v in out.items()}


def _pick(by_record: pd.DataFrame, limit: int, seed: int) -> pd.DataFrame:
    """Up to ``limit`` records, spread evenly over the cells (each cell's own seeded draw)."""
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in by_record.columns]
    groups = list(by_record.groupby(keys, dropna=False, sort=True))
    per = max(1, limit // max(1, len(groups)))
    rng = np.random.default_rng(seed)
    picked = [g if len(g) <= per else g.iloc[np.sort(rng.choice(len(g), per, replace=False))] for _, g in groups]
    if not picked:
        return by_record.iloc[:0]
    # round robin over the cells (each cell's first, then each one's second...), so a size limit keeps every cell
    rank = np.concatenate([np.arange(len(g)) for g in picked])
    cell = np.concatenate([np.full(len(g), i) for i, g in enumerate(picked)])
    order = np.lexsort((cell, rank))
    return pd.concat(picked).iloc[order][: max(limit, 0)]


def _plain(value: Any) -> Any:
    """``value`` with a missing one (None, NaN) as None, so that keys holding it compare equal."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _num(value: object) -> int | None:
    value = _plain(value)
    return None if value is None else int(value)  # type: ignore[call-overload]


def sample_traces(
    ledger: str | os.PathLike[str],
    scores: Scores,
    *,
    rows: pd.DataFrame,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    limit: int = MAX_TRACES,
    seed: int = 0,
    override: ResolvedTokenizer | None = None,
    allow_mismatch: bool = False,
) -> TraceSample:
    """Up to ``limit`` of the scored records of ``ledger`` (spread over the cells, drawn with ``seed``; fewer where
        their texts pass :data:`MAX_TEXT_BYTES`) for the trace viewer. ``rows``: the sweep's rows (their B and
        floor(r·B) are marked); ``scores``: the ledger's scores at (at least) those budgets. Texts are decoded from the
        token ids with the records' tokenizers (``override``, ``allow_mismatch``: as the scoring resolved them,
    :func:`~mindcap_tok.store.resolve_tokenizers`), so every mark's character offset is that of the decoded prefix."""
    by_record = scores.by_record
    picked = _pick(by_record, limit, seed)
    keys = [c for c in KEY_COLUMNS if c in picked.columns]
    budget_scores = scores.by_budget.merge(picked[keys], on=keys)
    picked = picked.copy()
    table = Ledger(ledger, verify=False).read(
        model=sorted(picked["model"].unique()), lang=sorted(picked["lang"].unique())
    )
    records = table.select([c for c in dict.fromkeys([*keys, *_READ]) if c in table.column_names]).to_pandas()
    for col in ("announced", "cap"):  # nullable integers compare as floats on both sides
        for frame in (records, picked):
            if col in frame:
                frame[col] = frame[col].astype("float64")
    joined = picked.merge(records, on=keys, how="left", suffixes=("", "_rec"), validate="one_to_one")
    toks = resolve_tokenizers(
        joined["tokenizer"].tolist(),
        Ledger(ledger, verify=False),
        override=override,
        tokenizers_dir=tokenizers_dir,
        allow_mismatch=allow_mismatch,
    )
    marks = _marks(rows)
    score_at = {
        tuple(map(_plain, k)): int(v)
        for k, v in zip(
            budget_scores[[*keys, "budget"]].itertuples(index=False, name=None), budget_scores["score"], strict=True
        )
    }
    traces: list[dict[str, Any]] = []
    room = MAX_TEXT_BYTES
    for rec in joined.to_dict("records"):
        table_ = byte_table(toks[rec["tokenizer"]])
        ids = np.asarray(rec["output_ids"], dtype=np.int64)
        data = table_.decode(ids)
        room -= len(data) + len(rec["prompt"].encode("utf-8"))
        if room < 0 and traces:  # the page's size limit: the traces kept so far are shown, and counted
            break
        ends = np.concatenate([[0], table_.token_ends(ids)]) if len(ids) else np.zeros(1, np.int64)
        n = len(ids)
        key = tuple(_plain(rec[k]) for k in keys)
        pairs = marks.get((rec["model"], rec["lang"]), [])
        emission, think = _num(rec.get("emission")), _num(rec.get("think_end"))
        think = None if think is None else think + 1  # think_end holds the closing token: the thought ends after it
        positions = sorted(
            {p for pair in pairs for p in pair if p <= n}
            | {x for x in (emission, think, _num(rec.get("cap"))) if x and x <= n}
        )
        offsets = dict(zip(positions, char_offsets(data, [int(ends[min(p, n)]) for p in positions]), strict=True))
        traces.append(
            {
                "cell": cell_label(rec),
                **{k: _plain(rec[k]) for k in keys},
                "prompt": rec["prompt"],
                "text": data.decode("utf-8", "replace"),
                "n_tokens": n,
                "cap": _num(rec.get("cap")),
                "finish_reason": rec["finish_reason"],
                "gold": _plain(rec.get("gold_text")) or _num(rec.get("gold")),
                "correct": _num(rec.get("correct")),
                "outcome": view_outcome(
                    rec.get("correct", 0), rec.get("emission", math.nan), finish_reason=rec["finish_reason"]
                ),
                "emission": emission,
                "thought_end": think,
                "budgets": [
                    {
                        "B": b,
                        "rB": sb,
                        "score_B": score_at.get((*key, b)),
                        "score_rB": score_at.get((*key, sb)),
                    }
                    for b, sb in pairs
                ],
                "offsets": {str(p): c for p, c in offsets.items()},
            }
        )
    return TraceSample(traces, len(by_record))
