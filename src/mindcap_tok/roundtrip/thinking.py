"""Reasoning models in a round trip: each hop's thought and answer channel, and thinking against instruct.

A hop of a model with ``thinking = true`` is split where its thought ends (:func:`~mindcap_tok.store.think.think_end`:
the first closing think token, or the ``think_close`` string): the translation is the answer channel, the decode
of the ids after it, and only that is passed on to the next hop (and judged, after the last). A thought that never
closed (the cap fell inside it, or the model stopped in it) passes on nothing: the hop is empty, its chain fails
there (MQM 0) and the hop is counted as ``unclosed``. Thought tokens (the closing marker included) are stored
and reported apart from the translation's own (answer) tokens.

In the report, a model listed twice (the same ``model`` path, one entry thinking and one not) is a pair of twins,
compared side by side (:func:`twin_table`): pass share and mean MQM per judge, and tokens per hop split
thought/answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..store import ThinkMarkers, think_end
from ..tokenization.load import ResolvedTokenizer


def hop_channel(
    ids: Sequence[int], markers: ThinkMarkers, *, tokenizer: ResolvedTokenizer, decode
) -> dict[str, object]:
    """The channel columns of one thinking hop: ``think_end`` (None: unclosed), ``answer`` (the decode of the ids
    after it with ``decode``, one list of ids to text; empty when unclosed), ``thought_tokens``, ``answer_tokens``
    and ``unclosed``."""
    end = think_end(ids, markers, tokenizer=tokenizer)
    start = len(ids) if end is None else end + 1
    return {
        "thinking": True,
        "think_end": end,
        "answer": decode(list(ids[start:])) if start < len(ids) else "",
        "thought_tokens": start,
        "answer_tokens": len(ids) - start,
        "unclosed": end is None,
    }


#: the channel columns of an instruct hop in a run with a thinking model
INSTRUCT = {"thinking": False, "think_end": None, "answer": None, "thought_tokens": 0, "unclosed": False}


def passed_on(row) -> str:
    """What a hop record passes on: its answer channel when it thinks, else its whole text."""
    return row["answer"] if row.get("thinking") else row["text"]


def twins(models: Sequence[dict]) -> list[tuple[str, str]]:
    """(thinking name, instruct name) of each model path listed both thinking and not (a manifest's ``models``),
    the first entry of each kind."""
    out = []
    for path in dict.fromkeys(m["path"] for m in models):
        on = [m["name"] for m in models if m["path"] == path and m.get("thinking")]
        off = [m["name"] for m in models if m["path"] == path and not m.get("thinking")]
        if on and off:
            out.append((on[0], off[0]))
    return out


def _tokens(detail: pd.DataFrame, model: str) -> dict[str, float | None]:
    hops = detail[detail["model"] == model]
    thought = hops["thought_tokens"].astype(float) if "thought_tokens" in hops else pd.Series(0.0, hops.index)
    answer = hops["output_tokens"].astype(float)
    return {
        "thought_tokens_per_hop": float(thought.mean()) if len(hops) else None,
        "answer_tokens_per_hop": float(answer.mean()) if answer.notna().any() else None,
        "unclosed_hop_share": float(hops["unclosed"].astype(bool).mean()) if "unclosed" in hops and len(hops) else 0.0,
    }


def twin_table(metrics: pd.DataFrame, detail: pd.DataFrame, *, models: Sequence[dict]) -> pd.DataFrame:
    """Per twin pair (:func:`twins`) and judge: pass share, mean MQM and tokens per hop (thought and answer, means
    over the model's hops; ``unclosed_hop_share``) of the thinking and the instruct entry side by side, and the
    pass-share difference (thinking − instruct). Empty when the run has no twins."""
    overall = metrics[metrics["by"] == "overall"].set_index(["model", "judge_model"])
    rows = []
    for on, off in twins(models):
        for judge in overall.index.get_level_values("judge_model").unique():
            if (on, judge) not in overall.index or (off, judge) not in overall.index:
                continue
            row = {"thinking_model": on, "instruct_model": off, "judge_model": judge}
            for kind, name in (("thinking", on), ("instruct", off)):
                m = overall.loc[(name, judge)]
                row[f"pass_share_{kind}"] = m["pass_share"]
                row[f"pass_share_se_{kind}"] = m["pass_share_se"]
                row[f"mean_mqm_{kind}"] = m["mean_mqm"]
                row |= {f"{k}_{kind}": v for k, v in _tokens(detail, name).items()}
            a, b = row["pass_share_thinking"], row["pass_share_instruct"]
            row["pass_share_diff"] = None if pd.isna(a) or pd.isna(b) else a - b
            rows.append(row)
    return pd.DataFrame(rows)
