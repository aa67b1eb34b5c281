"""Benchmark: ``check`` of 100,000 lm-eval samples (target: under 60 s), against importing the same logs alone.

The logs are those of ``bench_import_lmeval.py`` (10 languages x 10,000 docs of MGSM native-CoT samples, two filter
lines per doc, lm-eval's default cap 256). The check (detect the format, import into a temporary ledger, read it
back, score every record at its cap, compute Qwen3's FLORES-200 premiums of the 9 non-English languages, summarise
per cell) is timed against the reference: ``import_logs`` of the same logs into a ledger, which the check does
first; each path gets its own freshly loaded tokenizer. Both give the same records: the check's cells count every
imported record, and its cut counts are the imported records that reached the cap.

    python benchmarks/bench_check.py [--docs 10000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc

from bench_import_lmeval import write_logs
from mindcap_tok.checks import check_run
from mindcap_tok.config import load_config
from mindcap_tok.ingest import import_logs
from mindcap_tok.store import Ledger
from mindcap_tok.tokenization.load import load_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000, help="docs per language (10 languages)")
    args = ap.parse_args()
    config = load_config()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "run").mkdir()
        texts, _ = write_logs(root / "run", config.data_dir.value / "flores200", args.docs)
        t0 = time.perf_counter()
        fresh = load_tokenizer("qwen3-8b", config.tokenizers_dir.value)
        imported = import_logs([root / "run"], root / "L", source="lm-eval", tokenizer=fresh)
        reference = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = check_run([root / "run"], tokenizer=load_tokenizer("qwen3-8b", config.tokenizers_dir.value))
        fast = time.perf_counter() - t0
        table = Ledger(root / "L").read(columns=["finish_reason"])
        cut = pc.sum(pc.equal(table.column("finish_reason"), "length")).as_py()
        assert sum(c.records for c in result.cells) == imported.added == len(texts)
        assert sum(c.cut for c in result.cells) == cut
        print(f"samples {len(texts):,}; cells {len(result.cells)}; cut by the cap {cut:,}")
        print(f"check: {fast:.1f} s; import alone: {reference:.1f} s; ratio {fast / reference:.2f}")


if __name__ == "__main__":
    main()
