"""Benchmark: prefix scoring of choice and math traces (48,000 records x 4,096 tokens, the 10-budget grid).

Records: synthetic ids from the real Qwen3 vocabulary, a newline every ~25 tokens, and answer lines planted early,
late, twice (wrong then right) or not at all, as in ``bench_score.py``. Choice: ``#### B`` (strict) and
``Answer: (B)``; math: ``#### <answer>`` and ``\\boxed{<answer>}`` with answers written unlike their gold
(``\\frac{3}{4}`` for 0.75) from a pool of 100 golds, so math-verify decides. Every timing starts with empty
caches (line cuts and math-verify verdicts): math-verify is included. A slice is checked against decoding the
10 grid prefixes with the tokenizer and parsing them.

    python benchmarks/bench_answers.py [--records 48000] [--tokens 4096] [--slice 20]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from mindcap_tok.budgets import SCORE_BUDGETS
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.tasks.answers import choice, get_parser, math
from mindcap_tok.tokenization.byte_tables import byte_table
from mindcap_tok.tokenization.load import load_tokenizer


@dataclass
class Answer:
    type: str
    labels: list[str] | None = None
    pattern: str | None = None
    variants: dict = field(default_factory=dict)


def _math_pool() -> list[tuple[str, str]]:
    """(written, gold) pairs: fractions written as decimals' golds, integers as decimals, square roots."""
    pool = [(f"\\frac{{{k}}}{{4}}", str(k / 4)) for k in range(1, 41)]
    pool += [(f"{k}.0", str(k)) for k in range(100, 140)]
    pool += [(f"\\frac{{\\sqrt{{{k}}}}}{{2}}", f"\\sqrt{{{k}}}/2") for k in range(2, 22)]
    return pool


def synthetic_ledger(tok, n: int, length: int, seed: int, kind: str) -> pa.Table:
    """``n`` records of ``length`` ids with answer lines of ``kind`` (choice or math) planted."""
    rng = np.random.default_rng(seed)
    table = byte_table(tok)
    ordinary = np.flatnonzero((table.lengths > 0) & ~table.has_hash & ~table.has_newline)
    ordinary = ordinary[ordinary < 151_643]
    ids = rng.choice(ordinary, size=(n, length)).astype(np.int32)
    ids[rng.random((n, length)) < 1 / 25] = tok.tokenizer.token_to_id("Ċ")
    if kind == "choice":
        pairs = [(x, x) for x in "ABCD"]
        forms = ["\n#### {}\n", "\nAnswer: ({})\n"]
    else:
        pairs = _math_pool()
        forms = ["\n#### {}\n", "\nso \\boxed{{{}}}\n"]
    enc = {}
    gold = []
    for r in range(n):
        written, g = pairs[int(rng.integers(len(pairs)))]
        gold.append(g)
        plan = int(rng.integers(0, 10))  # 0: none, 1-2: twice (wrong, then right), else once
        if plan == 0:
            continue
        form = forms[int(rng.integers(len(forms)))]
        line = enc.setdefault((form, written), tok.tokenizer.encode(form.format(written), add_special_tokens=False).ids)
        spot = int(rng.integers(0, length // 2 if plan <= 2 else length - len(line)))
        if plan <= 2:
            other = pairs[(pairs.index((written, g)) + 1) % len(pairs)][0]
            wrong = tok.tokenizer.encode(form.format(other), add_special_tokens=False).ids
            ids[r, spot : spot + len(wrong)] = wrong
            spot = int(rng.integers(spot + len(wrong), length - len(line) + 1))
        ids[r, spot : spot + len(line)] = line
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
            "gold": pa.nulls(n, pa.int64()),
            "gold_text": pa.array(gold, pa.string()),
            "finish_reason": pa.array(finish),
        }
    )


def reference(tok, table: pa.Table, parser, budgets) -> np.ndarray:
    """Decode the grid prefixes with the tokenizer, parse and judge them."""
    out = []
    columns = (table.column(c).to_pylist() for c in ("output_ids", "gold_text", "finish_reason"))
    for ids, gold, finish in zip(*columns, strict=True):
        row = []
        for b in budgets:
            text = tok.tokenizer.decode(ids[: min(b, len(ids))], skip_special_tokens=True)
            value = parser.parse(text, complete=b >= len(ids) and finish == "stop")
            row.append(int(value is not None and parser.correct(value, gold)))
        out.append(row)
    return np.array(out)


def _clear_caches() -> None:
    choice._cached_cuts.cache_clear()
    math._cached_cuts.cache_clear()
    math.equivalent.cache_clear()
    math.parsed_latex.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=48_000)
    ap.add_argument("--tokens", type=int, default=4_096)
    ap.add_argument("--slice", type=int, default=20, help="records checked against decoding the grid prefixes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", nargs="+", default=["choice:strict", "choice:paren+answer", "math:strict", "math:boxed"])
    args = ap.parse_args()
    tok = load_tokenizer("qwen3-8b")
    byte_table(tok)
    math.equivalent("1", "1.0")  # import math-verify (and sympy) once: not part of scoring time
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    phrases = {"phrases": {"spa_Latn": ["Respuesta:"], "deu_Latn": ["Antwort:"], "fra_Latn": ["Réponse :"]}}
    answers = {"choice": Answer("choice", list("ABCD"), variants=phrases), "math": Answer("math")}
    cases = [(kind, variant, answers[kind]) for kind, _, variant in (c.partition(":") for c in args.cases)]
    tables = {}
    for kind, variant, answer in cases:
        if kind not in tables:
            t0 = time.perf_counter()
            tables[kind] = synthetic_ledger(tok, args.records, args.tokens, args.seed, kind)
            print(f"built {args.records} x {args.tokens} {kind} records in {time.perf_counter() - t0:.1f} s")
        table, parser = tables[kind], get_parser(variant, answer)
        _clear_caches()
        t0, c0 = time.perf_counter(), time.process_time()
        scores = score_ledger(table, tok, budgets=SCORE_BUDGETS, parser=parser)
        fast, cpu = time.perf_counter() - t0, time.process_time() - c0
        got = scores.by_budget["score"].to_numpy().reshape(args.records, -1)
        same = np.array_equal(got[: args.slice], reference(tok, table.slice(0, args.slice), parser, SCORE_BUDGETS))
        verdicts = math.equivalent.cache_info().misses if kind == "math" else 0
        print(
            f"{kind} {variant}: {fast:.2f} s ({cpu:.2f} s CPU) for {args.records * len(SCORE_BUDGETS):,} scores "
            f"(acc at 4096: {got[:, -1].mean():.3f}; math-verify verdicts: {verdicts}); "
            f"== reference on {args.slice} records: {same}"
        )


if __name__ == "__main__":
    main()
