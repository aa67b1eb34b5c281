"""Benchmark: prefix scoring of 48,000 records x 4,096 tokens on the 10-budget grid.

Fast path: ``score_ledger`` (byte positions + searchsorted). Reference: decode every prefix of a small slice
with the tokenizer and parse it (what the scores, E and C mean by definition), timed per record and scaled
to the full ledger; a cheaper reference that decodes only the 10 grid budgets (no E) is timed too. The same
records with the reasoning-model columns (thinking off, and on with a thought closing mid-trace) are timed
against the plain table.
Records: synthetic ids drawn from the real Qwen3 vocabulary, a newline every ~25 tokens, and answer lines
(``#### <MGSM gold>``) planted early, late, twice, or not at all; 30% end by hitting the cap.

    python benchmarks/bench_score.py [--records 48000] [--tokens 4096] [--slice 6] [--baseline COMMIT --rounds 3]

``--baseline COMMIT`` also times that commit's ``score_ledger`` in the same process (its ``src`` taken with
``git archive`` and imported as ``mindcap_tok_baseline``), alternating with today's for ``--rounds`` rounds, and
prints the ratio of the best times (e.g. ``807bed8^``, the scorer before answer types moved into tasks).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from mindcap_tok.budgets import SCORE_BUDGETS
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.tasks.answers import get_parser
from mindcap_tok.tasks.mgsm import mgsm_gold
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
        if every_prefix:  # E: the first budget from which every prefix reads the completed trace's answer
            values = [_read(parser, tok, ids, b, finish) for b in range(n + 1)]
            e = n
            while e > 1 and values[e - 1] == values[n]:
                e -= 1
            emission.append(np.nan if n < 1 or values[n] is None else e)
    return np.array(scores), np.array(emission, dtype=float)


def load_baseline(commit: str):
    """The package as of ``commit`` (its ``src/mindcap_tok``), imported under the name ``mindcap_tok_baseline``."""
    root = Path(__file__).resolve().parents[1]
    data = subprocess.run(["git", "archive", commit, "src/mindcap_tok"], cwd=root, capture_output=True, check=True)
    where = Path(tempfile.mkdtemp(prefix="mindcap-baseline-"))
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(where, filter="data")
    init = where / "src" / "mindcap_tok" / "__init__.py"
    spec = importlib.util.spec_from_file_location("mindcap_tok_baseline", init, submodule_search_locations=[])
    spec.submodule_search_locations.append(str(init.parent))
    module = importlib.util.module_from_spec(spec)
    sys.modules["mindcap_tok_baseline"] = module
    spec.loader.exec_module(module)
    return module


def compare_baseline(commit: str, table: pa.Table, rounds: int) -> None:
    """Best-of-``rounds`` times of today's ``score_ledger`` and ``commit``'s on ``table``, alternated, and their
    ratio; both must give the same scores, E and C."""
    old = load_baseline(commit)
    old_score = importlib.import_module("mindcap_tok_baseline.ledger.score")
    old_tok = importlib.import_module("mindcap_tok_baseline.tokenization.load").load_tokenizer("qwen3-8b")
    importlib.import_module("mindcap_tok_baseline.tokenization.byte_tables").byte_table(old_tok)
    tok = load_tokenizer("qwen3-8b")
    times: dict[str, list[float]] = {"today": [], "baseline": []}
    results = {}
    for _ in range(rounds):
        for name, fn, t in (("baseline", old_score.score_ledger, old_tok), ("today", score_ledger, tok)):
            t0 = time.perf_counter()
            results[name] = fn(table, t, budgets=SCORE_BUDGETS)
            times[name].append(time.perf_counter() - t0)
    same = all(
        np.array_equal(results["today"].by_budget["score"], results["baseline"].by_budget["score"])
        and np.array_equal(results["today"].by_record[c], results["baseline"].by_record[c], equal_nan=True)
        for c in ("emission", "correct")
    )
    best = {k: min(v) for k, v in times.items()}
    print(
        f"baseline {commit} ({old.__name__}): "
        + ", ".join(f"{k} {' / '.join(f'{x:.2f}' for x in v)} s" for k, v in times.items())
        + f"; best today / best baseline = {best['today'] / best['baseline']:.3f}; identical results: {same}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=48_000)
    ap.add_argument("--tokens", type=int, default=4_096)
    ap.add_argument("--slice", type=int, default=6, help="records for the decode-every-prefix reference")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", help="a commit whose score_ledger is timed against today's in this process")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds for --baseline")
    args = ap.parse_args()
    tok = load_tokenizer("qwen3-8b")
    byte_table(tok)  # built once per tokenizer; not part of scoring time
    t0 = time.perf_counter()
    table = synthetic_ledger(tok, args.records, args.tokens, args.seed)
    print(
        f"built {args.records} x {args.tokens} synthetic records in {time.perf_counter() - t0:.1f} s "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )

    if args.baseline:
        compare_baseline(args.baseline, table, args.rounds)
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
