"""Benchmark: the audit suite (COMET excluded) on a synthetic 48,000-record ledger.

Ledger: Qwen3, German / Thai / Swahili x native / translate-act, 250 items x 32 samples per cell. Traces are
real FLORES-200 sentences of the cell's language (translate-act: an English translation paragraph, a blank
line, English reasoning), lengths log-normal (median ~350 tokens) up to the 4,096 cap, answer lines planted
right, wrong or not at all. Timed: reading the ledger and each audit (langid with the shipped lid.176, chrF
against MGSM English questions, parser, parity, normalizer with 2,000 resamples). Reference: the parser
audit's question (strict answer at every grid budget) answered by decoding each prefix with the tokenizer
and parsing it, timed on a slice and scaled.

    python benchmarks/bench_audit.py [--records 48000] [--slice 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import pyarrow as pa

from mindcap_tok.audits import AuditConfig, run_audits, write_audit_report
from mindcap_tok.config import load_config
from mindcap_tok.stats.premiums import premium_table
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tasks.answers.integer import parse_answer
from mindcap_tok.tasks.mgsm import load_mgsm, mgsm_gold
from mindcap_tok.tokenization.load import load_tokenizer

LANGS = ("deu_Latn", "tha_Thai", "swh_Latn")
BUDGETS = (64, 128, 192, 256, 384, 512, 768, 1024)


def _pieces(tok, data_dir, code: str) -> list[tuple[str, list[int]]]:
    lines = (data_dir / "flores200" / "dev" / f"{code}.dev").read_text("utf-8").splitlines()
    enc = tok.tokenizer.encode_batch([f"{ln}\n" for ln in lines], add_special_tokens=False)
    return [(f"{ln}\n", e.ids) for ln, e in zip(lines, enc, strict=True)]


def synthetic_ledger(tok, data_dir, n: int, seed: int) -> pa.Table:
    """``n`` records spread over 6 cells (see the module docs)."""
    rng = np.random.default_rng(seed)
    pieces = {c: _pieces(tok, data_dir, c) for c in (*LANGS, "eng_Latn")}
    golds = np.array(mgsm_gold())
    cells = [(arm, lang) for lang in LANGS for arm in ("native", "translate-act")]
    per_cell = n // len(cells)
    cols = {k: [] for k in ("arm", "lang", "item", "sample", "ids", "text", "finish", "gold")}
    for arm, lang in cells:
        pool = pieces[lang if arm == "native" else "eng_Latn"]
        for r in range(per_cell):
            item, sample = r % 250, r // 250
            gold = int(golds[item])
            target = min(int(rng.lognormal(np.log(350 if arm == "native" else 250), 0.8)), 4096)
            text, ids = [], []
            if arm == "translate-act":
                s, i = pool[rng.integers(len(pool))]
                text, ids = [s, "\n"], [*i, *tok.tokenizer.encode("\n", add_special_tokens=False).ids]
            while len(ids) < target:
                s, i = pool[rng.integers(len(pool))]
                text.append(s)
                ids.extend(i)
            kind = rng.integers(0, 10)
            if kind > 0:
                line = f"#### {gold if kind > 3 else gold + 1}\n"
                text.append(line)
                ids.extend(tok.tokenizer.encode(line, add_special_tokens=False).ids)
            finish = "stop"
            if len(ids) > 4096:
                ids, finish = ids[:4096], "length"
                text = [tok.tokenizer.decode(ids, skip_special_tokens=True)]
            for k, v in (
                ("arm", arm),
                ("lang", lang),
                ("item", item),
                ("sample", sample),
                ("ids", ids),
                ("text", "".join(text)),
                ("finish", finish),
                ("gold", gold),
            ):
                cols[k].append(v)
    m = len(cols["arm"])
    return pa.table(
        {
            "model": ["qwen3-8b"] * m,
            "arm": cols["arm"],
            "lang": cols["lang"],
            "item": cols["item"],
            "sample": cols["sample"],
            "seed": list(range(m)),
            "cap": [4096] * m,
            "prompt": [""] * m,
            "prompt_ids": pa.array([[]] * m, pa.list_(pa.int32())),
            "output_ids": pa.array(cols["ids"], pa.list_(pa.int32())),
            "text": cols["text"],
            "finish_reason": cols["finish"],
            "gold": cols["gold"],
            "generator": ["bench"] * m,
            "tokenizer": ["qwen3-8b"] * m,
        }
    )


def reference_parser(tok, table: pa.Table, rows: np.ndarray) -> float:
    """Seconds per record to read the strict answer at every grid budget by decoding each prefix."""
    start = time.perf_counter()
    for r in rows:
        ids = table.column("output_ids")[int(r)].as_py()
        for b in BUDGETS:
            parse_answer(tok.tokenizer.decode(ids[:b], skip_special_tokens=True))
    return (time.perf_counter() - start) / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=48_000)
    ap.add_argument("--slice", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = load_config()
    tok = load_tokenizer("qwen3-8b", cfg.tokenizers_dir.value)
    t = time.perf_counter()
    table = synthetic_ledger(tok, cfg.data_dir.value, args.records, args.seed)
    tokens = int(np.sum([len(x) for x in table.column("output_ids").to_pylist()]))
    with tempfile.TemporaryDirectory() as tmp:
        Ledger(f"{tmp}/L").append(table, tok)
        print(f"built and stored {table.num_rows} records, {tokens:,} output tokens ({time.perf_counter() - t:.1f} s)")
        config = AuditConfig(
            budgets=BUDGETS,
            premiums=premium_table({"deu_Latn": 1.3, "tha_Thai": 2.55, "swh_Latn": 1.9}),
            references={it.item: it.question for it in load_mgsm("eng_Latn", cfg.data_dir.value)},
            lid_hub=False,
            n_boot=2000,
            seed=args.seed,
            tokenizers={"qwen3-8b": tok},
        )
        t = time.perf_counter()
        suite = run_audits(f"{tmp}/L", None, config=config)
        write_audit_report(suite, f"{tmp}/out")
        total = time.perf_counter() - t
    for res in suite.results:
        print(f"  {res.name:<11} {res.status:<8} {res.summary.get('seconds', 0):7.1f} s {res.reason}")
    print(f"suite total (read + 5 audits + report): {total:.1f} s")
    rows = np.random.default_rng(1).choice(table.num_rows, size=min(args.slice, table.num_rows), replace=False)
    per = reference_parser(tok, table, rows)
    parser_s = next(r.summary["seconds"] for r in suite.results if r.name == "parser")
    print(
        f"reference parser path: {per * 1000:.1f} ms/record -> {per * table.num_rows:.0f} s for the ledger "
        f"({per * table.num_rows / parser_s:.0f}x the parser audit, which also reads terminated and "
        f"native-digits and the scaled budgets)"
    )


if __name__ == "__main__":
    main()
