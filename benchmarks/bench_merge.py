"""Benchmark: ``ledger merge`` of a job's parts against writing the same records as one ledger, and the cost of
choosing a part.

Merge: ``--records`` synthetic records (the ledger-read benchmark's: 8 cells, Qwen3 ids with log-normal lengths,
median ~300 tokens, cap 4,096) split by item over ``--parts`` part ledgers, each with its job record, built with
the store API (no generation). Fast path: :func:`mindcap_tok.store.merge_ledgers` (checks, then one checked append
per input cell). Reference: read every part whole and commit all records to one new ledger with one plain
``Ledger.append``. Both start from the same parts, into fresh folders; one run each.

Part selection: planning the paper's independent job (examples/jobs/independent.toml: 33,750 requests) whole, and
as part 0 of 4 (every request group hashed and ranked): the part's extra time over the whole plan, per request.

    python benchmarks/bench_merge.py [--records 48000] [--parts 4]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench_ledger_read import ARMS, LANGS, synthetic_cell
from mindcap_tok.generation import Part, load_spec, with_part
from mindcap_tok.generation.jobs import plan_job
from mindcap_tok.store import JOBS, Ledger, merge_ledgers
from mindcap_tok.tokenization.load import load_tokenizer

REPO = Path(__file__).resolve().parents[1]


def build_parts(root: Path, tok, records: int, parts: int, batch: int = 2000) -> list[Path]:
    """``parts`` ledgers holding the items ``i`` with ``i % parts == p``, each with a part's job record."""
    rng = np.random.default_rng(0)
    per_cell = records // (len(ARMS) * len(LANGS))
    keys = np.arange(per_cell)
    out = [root / f"part{p}" for p in range(parts)]
    for p, folder in enumerate(out):
        led = Ledger(folder)
        for arm in ARMS:
            for lang in LANGS:
                mine = keys[(keys % 250) % parts == p]
                for start in range(0, len(mine), batch):
                    chunk = mine[start : start + batch]
                    led.append(synthetic_cell(tok, arm, lang, chunk % 250, chunk // 250, rng), tok)
        record = {"spec": {"name": "bench", "model_name": "qwen3-8b"}, "part": {"index": p, "count": parts}}
        (folder / JOBS).mkdir()
        (folder / JOBS / "bench.json").write_text(json.dumps(record), "utf-8")
    return out


def one_ledger(parts: list[Path], out: Path) -> None:
    """The reference: every record read and committed to one ledger with one plain append."""
    tables = [Ledger(p).read() for p in parts]
    Ledger(out).append(pa.concat_tables(tables), Ledger(parts[0]).tokenizers())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=48_000)
    ap.add_argument("--parts", type=int, default=4)
    args = ap.parse_args()
    tok = load_tokenizer("qwen3-8b")
    load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        parts = build_parts(Path(tmp), tok, args.records, args.parts)
        size = sum(s.bytes for p in parts for s in Ledger(p).shards())
        n = sum(len(Ledger(p)) for p in parts)
        print(f"{args.parts} parts: {n:,} records, {size / 2**20:.1f} MiB (built in {time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        done = merge_ledgers(parts, Path(tmp) / "merged")
        merge_s = time.perf_counter() - t0
        assert done.added == n and Ledger(Path(tmp) / "merged").verify().ok
        t0 = time.perf_counter()
        one_ledger(parts, Path(tmp) / "reference")
        ref_s = time.perf_counter() - t0
        print(f"merge {merge_s:.2f} s vs one plain append {ref_s:.2f} s: ratio {merge_s / ref_s:.2f}x ({load})")

    spec = load_spec(REPO / "examples" / "jobs" / "independent.toml")
    t0 = time.perf_counter()
    whole = plan_job(spec)
    whole_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    part = plan_job(with_part(spec, Part(0, 4)))
    part_s = time.perf_counter() - t0
    extra = (part_s - whole_s) / whole.requests * 1e6
    print(
        f"planning {whole.requests:,} requests: whole {whole_s:.2f} s, part 0/4 ({part.requests:,} requests) "
        f"{part_s:.2f} s: {extra:+.1f} µs a request of the job"
    )


if __name__ == "__main__":
    main()
