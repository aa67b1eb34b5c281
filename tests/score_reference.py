"""The slow, independent reference for prefix scoring: decode every prefix and parse it, plus the trace frames.

Both scorer tests compare against it; each passes its own decoder (the tokenizer's library, special tokens
dropped), so the reference never goes through the byte tables the fast scorer uses."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from mindcap_tok.tasks.answers import get_parser


def trace_frame(tok, traces: Iterable[tuple[list[int], int, str]]) -> pd.DataFrame:
    """One ledger row per ``(output ids, gold, finish reason)`` trace: native Thai, item = position, cap 4096."""
    rows = [
        {
            "model": tok.name,
            "arm": "native",
            "lang": "tha_Thai",
            "item": i,
            "sample": 0,
            "cap": 4096,
            "output_ids": ids,
            "gold": gold,
            "finish_reason": finish,
            "tokenizer": tok.name,
        }
        for i, (ids, gold, finish) in enumerate(traces)
    ]
    return pd.DataFrame(rows)


def reference_scores(
    decode: Callable[[list[int]], str], frame: pd.DataFrame, budgets: list[int], parser
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores (records x budgets), emission and correctness from parsing ``decode`` of every prefix.

    ``parser`` is a parser or an integer variant's name; an answer read is judged by ``parser.correct``."""
    p = get_parser(parser)
    scores, emission, correct = [], [], []
    for ids, gold, finish in zip(frame["output_ids"], frame["gold"], frame["finish_reason"], strict=True):
        n = len(ids)
        texts = [decode(ids[:b]) for b in range(n + 1)]
        values = [p.parse(texts[b], complete=(b >= n and finish == "stop")) for b in range(n + 1)]
        ok = [v is not None and p.correct(v, gold) for v in values]  # integers: v == gold
        scores.append([int(ok[min(b, n)]) if n else 0 for b in budgets])
        emission.append(reference_emission(values))
        correct.append(int(ok[n]) if n else 0)
    return np.array(scores), np.array(emission), np.array(correct)


def reference_emission(values: list) -> float:
    """E from the answers read at budgets 0..n: the first budget from which every prefix reads the completed
    trace's answer (``values[n]``); NaN when the completed trace has none."""
    n = len(values) - 1
    if n < 1 or values[n] is None:
        return np.nan
    b = n
    while b > 1 and values[b - 1] == values[n]:
        b -= 1
    return float(b)


def assert_equals_reference(res, ref: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """``score_ledger``'s result equals the reference exactly: every (record, budget) score, emission, correct."""
    ref_scores, ref_emission, ref_correct = ref
    got = res.by_budget["score"].to_numpy().reshape(ref_scores.shape)
    mismatch = np.argwhere(got != ref_scores)
    assert not len(mismatch), f"first mismatch (record, budget index): {mismatch[:3].tolist()}"
    np.testing.assert_array_equal(res.by_record["emission"].to_numpy(), ref_emission)
    np.testing.assert_array_equal(res.by_record["correct"].to_numpy(), ref_correct)
