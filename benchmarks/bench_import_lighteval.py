"""Benchmark: ``ledger import --from lighteval`` of 100,000 details rows with ids, against ``--from lm-eval`` of the
same 100,000 responses (texts to re-encode).

The responses and prompts are bench_import_lmeval.py's (10 languages x 10,000 docs, FLORES sentences, then
``The answer is <n>``). The lm-eval run is that benchmark's samples files; the lighteval run is one
``details_mgsm:<lang>|0_<date>.parquet`` per language in lighteval 0.13.0's details schema (``doc``,
``metric``, ``model_response`` as its ``EvaluationTracker`` writes them: see tests/test_import_lighteval_evals.py),
written here with pyarrow because lighteval's writer (``datasets.Dataset.from_list`` over every ``Detail``) is
not installed in the main environment and takes minutes at this size: the output ids are each response encoded and
cut at the cap 256, the prompt ids the prompt encoded, as a vLLM run logs them. Only the two imports are timed,
each with its own freshly loaded tokenizer.

    python benchmarks/bench_import_lighteval.py [--docs 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench_import_lmeval import LANGS, write_logs
from mindcap_tok.config import load_config
from mindcap_tok.ingest.harness_logs import import_logs
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

CAP = 256
DATE = "2026-01-01T00-00-00.000000"
#: lighteval 0.13.0's details columns as its writer stores them (the fields this import reads, and the others)
DOC = pa.struct(
    [
        ("query", pa.string()),
        ("choices", pa.list_(pa.string())),
        ("gold_index", pa.int64()),
        ("instruction", pa.null()),
        ("id", pa.string()),
        ("task_name", pa.string()),
        ("generation_size", pa.int64()),
        ("stop_sequences", pa.list_(pa.string())),
        ("use_logits", pa.bool_()),
        ("num_samples", pa.int64()),
    ]
)
RESPONSE = pa.struct(
    [
        ("input", pa.string()),
        ("input_tokens", pa.list_(pa.int64())),
        ("text", pa.list_(pa.string())),
        ("output_tokens", pa.list_(pa.list_(pa.int64()))),
        ("text_post_processed", pa.list_(pa.string())),
        ("reasonings", pa.list_(pa.null())),
        ("logprobs", pa.list_(pa.null())),
        ("truncated_tokens_count", pa.int64()),
        ("padded_tokens_count", pa.int64()),
    ]
)


def write_details(folder: Path, texts: list[str], prompts: list[str], tok) -> int:
    """One details file per language in ``folder`` for the responses of :func:`write_logs`; returns the ids."""
    outputs = [ids[:CAP] for ids in tok.encode_batch(texts)]
    decoded = tok.decode_batch(outputs, skip_special_tokens=True)
    prompt_ids = tok.encode_batch(prompts)
    docs = len(texts) // len(LANGS)
    for n, lang in enumerate(LANGS):
        rows = range(n * docs, (n + 1) * docs)
        task = f"mgsm:{lang}|0"
        doc = [
            {
                "query": prompts[r],
                "choices": [f" {r % docs % 97}"],
                "gold_index": 0,
                "id": str(r - n * docs),
                "task_name": task,
                "generation_size": CAP,
                "stop_sequences": [],
                "use_logits": False,
                "num_samples": 1,
            }
            for r in rows
        ]
        response = [
            {
                "input": prompts[r],
                "input_tokens": prompt_ids[r],
                "text": [decoded[r]],
                "output_tokens": [outputs[r]],
                "text_post_processed": [decoded[r]],
                "reasonings": [],
                "logprobs": [],
                "truncated_tokens_count": 0,
                "padded_tokens_count": 0,
            }
            for r in rows
        ]
        table = pa.table(
            {
                "doc": pa.array(doc, DOC),
                "metric": pa.array([{"em": 0.0}] * docs),
                "model_response": pa.array(response, RESPONSE),
            }
        )
        pq.write_table(table, folder / f"details_{task}_{DATE}.parquet")
    return sum(map(len, outputs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000, help="docs per language (10 languages)")
    ap.add_argument("--keep", type=Path, help="write the logs and the ledgers here instead of a temporary folder")
    args = ap.parse_args()
    config = load_config()
    tok = load_tokenizer("qwen3-8b", config.tokenizers_dir.value)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for run in ("lmeval", "lighteval"):
            (root / run).mkdir(parents=True, exist_ok=True)
        texts, prompts = write_logs(root / "lmeval", config.data_dir.value / "flores200", args.docs)
        ids = write_details(root / "lighteval", texts, prompts, tok)
        times = {}
        for source, run in (("lm-eval", "lmeval"), ("lighteval", "lighteval")):
            t0 = time.perf_counter()
            fresh = load_tokenizer("qwen3-8b", config.tokenizers_dir.value)  # its own BPE word cache, empty
            result = import_logs([root / run], root / f"L-{run}", source=source, tokenizer=fresh)
            times[source] = time.perf_counter() - t0
            assert result.added == len(texts) == len(Ledger(root / f"L-{run}"))
        print(f"responses {len(texts):,}; lighteval output ids {ids:,} (cut at the cap {CAP})")
        print(
            f"import --from lighteval: {times['lighteval']:.1f} s; --from lm-eval: {times['lm-eval']:.1f} s; "
            f"ratio {times['lighteval'] / times['lm-eval']:.2f}"
        )


if __name__ == "__main__":
    main()
