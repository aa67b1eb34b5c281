"""Benchmark: prefix scoring of 48,000 records x 4,096 tokens on the 10-budget grid.

Fast path: ``score_ledger`` (byte positions + searchsorted). Reference: decode every prefix of a small slice
with the tokenizer and parse it (what the scores, E and C mean by definition), timed per record and scaled
to the full ledger; a cheaper reference that decodes only the 10 grid budgets (no E) is timed too. The same
records with the reasoning-model columns (thinking off, and on with a thought closing mid-trace) are timed
against the plain table.
Records: synthetic ids drawn from the real Qwen3 vocabulary, a newline every ~25 tokens, and answer lines
(``#### <MGSM gold>``) planted early, late, twice, or not at all; 30% end by hitting the cap.

    python benchmarks/bench_score.py [--records 48000] [--tokens 4096] [--slice 6]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pyarrow as pa

from mindcap_tok.budgets import SCORE_BUDGETS
from mindcap_tok.data.mgsm import mgsm_gold
from mindcap_tok.ledger.score import score_ledger
from mindcap_tok.tasks.answers import get_parser
from mindcap_tok.tokenization.byte_tables import byte_table
from mindcap_tok.tokenization.load import load_tokenizer


def synthetic_ledger(tok, n: int, length: int, seed: int) -> pa.Table:
    """``n`` records of ``length`` token ids from the real vocabulary, with answer lines planted."""
    rng = np.random.default_rng(seed)
    table = byte_table(tok)
    ordinary = np.flatnonzero((table.lengths > 0) & ~table.has_hash & ~table.has_newline)
    ordinary = ordinary[ordinary < 151_643]  # base vocabulary only (no added tokens)
    ids = rng.choice(ordinary, size=(n, length)).astype(np.int32)
    ids[rng.random((n, length)) < 1 / 25] = tok.tokenizer.token_to_id("Ċ")  # "\n"
    golds = np.array(mgsm_gold())
    gold = golds[rng.integers(0, len(golds), n)]
    answer = {g: tok.tokenizer.encode(f"\n#### {g}\n", add_special_tokens=False).ids for g in set(gold.tolist())}
    kind = rng.integers(0, 10, n)  # 0: none, 1-2: twice (wrong then right), else once
    for r in range(n):
        if kind[r] == 0:
            continue
        line = answer[int(gold[r])]
        # a doubled answer starts in the first half, so the right one always fits after the wrong one
        spots = [int(rng.integers(0, length // 2 if kind[r] <= 2 else length - len(line)))]
        if kind[r] <= 2:
            wrong = tok.tokenizer.encode(f"\n#### {int(gold[r]) + 1}\n", add_special_tokens=False).ids
            ids[r, spots[0] : spots[0] + len(wrong)] = wrong
            spots = [int(rng.integers(spots[0] + len(wrong), length - len(line) + 1))]
        ids[r, spots[0] : spots[0] + len(line)] = line
    finish = np.where(rng.random(n) < 0.3, "length", "stop")
    offsets = np.arange(0, (n + 1) * length, length, dtype=np.int32)
    return pa.table(
        {
            "model": pa.array(["qwen3-8b"] * n),
            "arm": pa.array(["native"] * n),
            "lang": pa.array(["tha_Thai"] * n),
            "item": pa.array(np.arange(n) % 250, pa.int64()),
            "sample": pa.array(np.arange(n) // 250, pa.int64()),
            "cap": pa.array(np.full(n, length), pa.int64()),
            "output_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids.ravel())),
            "gold": pa.array(gold, pa.int64()),
            "finish_reason": pa.array(finish),
        }
    )


def _read(parser, tok, ids: list[int], b: int, finish: str) -> int | None:
    text = tok.tokenizer.decode(ids[:b], skip_special_tokens=True)
    return parser.parse(text, complete=b >= len(ids) and finish == "stop")


def reference(tok, table: pa.Table, budgets, every_prefix: bool) -> tuple[np.ndarray, np.ndarray]:
    """Decode prefixes with the tokenizer and parse them: scores at ``budgets`` and E (if ``every_prefix``)."""
    parser = get_parser("strict")
    scores, emission = [], []
    columns = (table.column(c).to_pylist() for c in ("output_ids", "gold", "finish_reason"))
    for ids, gold, finish in zip(*columns, strict=True):
        n = len(ids)
        scores.append([int(_read(parser, tok, ids, min(b, n), finish) == gold) for b in budgets])
        if every_prefix:
            emission.append(
                next((b for b in range(1, n + 1) if _read(parser, tok, ids, b, finish) is not None), np.nan)
            )
    return np.array(scores), np.array(emission, dtype=float)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=48_000)
    ap.add_argument("--tokens", type=int, default=4_096)
    ap.add_argument("--slice", type=int, default=6, help="records for the decode-every-prefix reference")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tok = load_tokenizer("qwen3-8b")
    byte_table(tok)  # built once per tokenizer; not part of scoring time
    t0 = time.perf_counter()
    table = synthetic_ledger(tok, args.records, args.tokens, args.seed)
    print(
        f"built {args.records} x {args.tokens} synthetic records in {time.perf_counter() - t0:.1f} s "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )

    t0 = time.perf_counter()
    scores = score_ledger(table, tok, budgets=SCORE_BUDGETS)
    fast = time.perf_counter() - t0
    acc = scores.by_budget.groupby("budget")["score"].mean()
    print(
        f"fast scorer: {fast:.2f} s for {args.records * len(SCORE_BUDGETS):,} record-budget scores "
        f"(acc at 4096: {acc.iloc[-1]:.3f})"
    )

    # reasoning models: the same records read with the format-4 columns, thinking off (the old path) and on (a
    # thought closing mid-trace: its tokens are blanked before the events are found)
    n = table.num_rows
    for label, on in (("thinking column, all off", False), ("thinking on, think_end = tokens / 2", True)):
        extra = table.append_column("thinking", pa.array([on] * n)).append_column(
            "think_end", pa.array([args.tokens // 2 if on else None] * n, pa.int64())
        )
        t0 = time.perf_counter()
        score_ledger(extra, tok, budgets=SCORE_BUDGETS)
        took = time.perf_counter() - t0
        print(f"fast scorer, {label}: {took:.2f} s ({took / fast:.2f}x the plain table)")

    part = table.slice(0, args.slice)
    t0 = time.perf_counter()
    ref_grid, _ = reference(tok, part, SCORE_BUDGETS, every_prefix=False)
    grid_time = (time.perf_counter() - t0) / args.slice
    t0 = time.perf_counter()
    ref_scores, ref_emission = reference(tok, part, SCORE_BUDGETS, every_prefix=True)
    every_time = (time.perf_counter() - t0) / args.slice
    got = scores.by_budget["score"].to_numpy().reshape(args.records, -1)[: args.slice]
    same = (
        np.array_equal(got, ref_scores)
        and np.array_equal(got, ref_grid)
        and np.array_equal(scores.by_record["emission"].to_numpy()[: args.slice], ref_emission, equal_nan=True)
    )
    print(
        f"reference, decode the 10 grid prefixes: {grid_time * 1e3:.0f} ms/record "
        f"-> {grid_time * args.records:.0f} s for all ({grid_time * args.records / fast:.0f}x the fast path)"
    )
    print(
        f"reference, decode every prefix (gives E): {every_time:.1f} s/record "
        f"-> {every_time * args.records / 3600:.1f} h for all ({every_time * args.records / fast:,.0f}x)"
    )
    print(f"fast == reference on the {args.slice}-record slice: {same}")


if __name__ == "__main__":
    main()
