"""Benchmark: ``Ledger.read()`` of a 48,000-record ledger with and without checking shard hashes.

Every read checks each shard it opens against the manifest's size and SHA-256 (the bytes are read once into
memory, hashed and parsed from the same buffer); ``Ledger(path, verify=False)`` reads the files directly.
Records: 8 cells (2 arms x 4 languages) x 250 items x 24 samples, committed in batches of 2,000 (24 shards);
output ids drawn from the real Qwen3 vocabulary with log-normal lengths (median ~300 tokens, capped at 4,096),
text decoded from them, prompts of ~60 tokens. Times are medians of ``--repeat`` warm reads in one process.

    python benchmarks/bench_ledger_read.py [--records 48000] [--repeat 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

ARMS = ("native", "translate-act")
LANGS = ("tha_Thai", "deu_Latn", "swh_Latn", "jpn_Jpan")


def synthetic_cell(tok, arm: str, lang: str, items: np.ndarray, samples: np.ndarray, rng) -> pa.Table:
    """One batch of records of one cell, as an Arrow table in the ledger schema's columns."""
    n = len(items)
    lengths = np.minimum(rng.lognormal(np.log(300), 0.6, n).astype(int) + 1, 4096)
    vocab = 151_643  # base vocabulary (no added tokens)
    output = [rng.integers(0, vocab, k).tolist() for k in lengths]
    prompt = [rng.integers(0, vocab, 60).tolist() for _ in range(n)]
    text = tok.tokenizer.decode_batch(output, skip_special_tokens=True)
    return pa.table(
        {
            "model": pa.array(["qwen3-8b"] * n),
            "arm": pa.array([arm] * n),
            "lang": pa.array([lang] * n),
            "item": pa.array(items, pa.int64()),
            "sample": pa.array(samples, pa.int64()),
            "seed": pa.array(1000 + samples, pa.int64()),
            "cap": pa.array(np.full(n, 4096), pa.int64()),
            "prompt": pa.array(tok.tokenizer.decode_batch(prompt, skip_special_tokens=True)),
            "prompt_ids": pa.array(prompt, pa.list_(pa.int32())),
            "output_ids": pa.array(output, pa.list_(pa.int32())),
            "text": pa.array(text),
            "finish_reason": pa.array(np.where(lengths >= 4096, "length", "stop")),
            "gold": pa.array(rng.integers(0, 10_000, n), pa.int64()),
            "generator": pa.array(["bench"] * n),
            "tokenizer": pa.array(["qwen3-8b"] * n),
        }
    )


def build(root: Path, tok, records: int, seed: int, batch: int = 2000) -> Ledger:
    rng = np.random.default_rng(seed)
    led = Ledger(root)
    per_cell = records // (len(ARMS) * len(LANGS))
    keys = np.arange(per_cell)
    for arm in ARMS:
        for lang in LANGS:
            for start in range(0, per_cell, batch):
                part = keys[start : start + batch]
                led.append(synthetic_cell(tok, arm, lang, part % 250, part // 250, rng), tok)
    return led


def timed(fn, repeat: int) -> float:
    fn()  # warm: page cache, lazy imports
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=48_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="Build the ledger here (kept) instead of a temporary folder.")
    args = ap.parse_args()
    tok = load_tokenizer("qwen3-8b")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp) / "ledger"
        t0 = time.perf_counter()
        led = build(root, tok, args.records, args.seed) if not Ledger(root).exists() else Ledger(root)
        size = sum(s.bytes for s in led.shards())
        print(
            f"ledger: {len(led):,} records, {len(led.shards())} shards, {size / 2**20:.1f} MiB "
            f"(built in {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.1f} "
            f"on {os.cpu_count()} cores)"
        )
        checked, unchecked = Ledger(root), Ledger(root, verify=False)
        info_cols = ["model", "arm", "lang", "item", "finish_reason", "n_tokens", "retokenized", "tokenizer"]
        for label, columns in (("read() all columns", None), ("read() info's columns", info_cols)):
            with_check = timed(lambda c=columns: checked.read(columns=c), args.repeat)
            without = timed(lambda c=columns: unchecked.read(columns=c), args.repeat)
            print(
                f"{label}: verify=True {with_check:.3f} s, verify=False {without:.3f} s, "
                f"ratio {with_check / without:.2f}x"
            )


if __name__ == "__main__":
    main()
