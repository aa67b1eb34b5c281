"""Benchmark: ``ledger import --from lm-eval`` of 100,000 generated lm-eval samples, against encoding their texts.

The logs are what ``lm_eval --log_samples`` writes for MGSM native-CoT: one samples file per language (10 languages
x 10,000 docs), two lines per doc (``strict-match`` and ``flexible-extract``, the same response), a FLORES devtest
sentence as the prompt, responses of the language's FLORES sentences (1 to 5 of them, drawn at random, then
``The answer is <n>``: about 30 to 400 tokens, so some pass lm-eval's default cap 256), no ``max_gen_toks``.
The import (read, deduplicate, map, encode, validate, one commit) is timed against the reference: encoding the
same response and prompt texts alone with the same tokenizer (``encode_batch``), in the same process; each
path gets its own freshly loaded tokenizer, so neither finds the other's words in the BPE cache.

    python benchmarks/bench_import_lmeval.py [--docs 10000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from mindcap_tok.config import load_config
from mindcap_tok.data.languages import resolve_language
from mindcap_tok.ingest.harness_logs import import_logs
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

LANGS = ("bn", "de", "en", "es", "fr", "ja", "ru", "sw", "te", "th")


def write_logs(folder: Path, flores: Path, docs: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """The samples files of one run in ``folder``; returns the responses and prompts written."""
    rng = np.random.default_rng(seed)
    texts, prompts = [], []
    for lang in LANGS:
        code = resolve_language(lang)
        sentences = (flores / "devtest" / f"{code}.devtest").read_text("utf-8").splitlines()
        pick = rng.integers(0, len(sentences), (docs, 10))
        sizes = rng.integers(1, 6, docs)
        out = [" ".join(sentences[j] for j in pick[d, : sizes[d]]) + f"\nThe answer is {d % 97}" for d in range(docs)]
        ask = [sentences[j] for j in pick[:, -1]]
        with open(folder / f"samples_mgsm_native_cot_{lang}_2026-01-01T00-00-00.000000.jsonl", "w") as fh:
            for doc in range(docs):
                args = {"gen_args_0": {"arg_0": ask[doc], "arg_1": {"until": ["Question:"], "do_sample": False}}}
                for filt in ("strict-match", "flexible-extract"):
                    line = {
                        "doc_id": doc,
                        "doc": {},
                        "target": str(doc % 97),
                        "arguments": args,
                        "resps": [[out[doc]]],
                        "filtered_resps": ["[invalid]"],
                        "filter": filt,
                    }
                    fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        texts += out
        prompts += ask
    return texts, prompts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000, help="docs per language (10 languages)")
    ap.add_argument("--keep", type=Path, help="write the logs and the ledger here instead of a temporary folder")
    args = ap.parse_args()
    config = load_config()
    tok = load_tokenizer("qwen3-8b", config.tokenizers_dir.value)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        (root / "run").mkdir(parents=True, exist_ok=True)
        texts, prompts = write_logs(root / "run", config.data_dir.value / "flores200", args.docs)
        t0 = time.perf_counter()
        tok.encode_batch(texts)
        tok.encode_batch(prompts)
        reference = time.perf_counter() - t0
        t0 = time.perf_counter()
        fresh = load_tokenizer("qwen3-8b", config.tokenizers_dir.value)  # its own BPE word cache, empty
        result = import_logs([root / "run"], root / "L", source="lm-eval", tokenizer=fresh)
        fast = time.perf_counter() - t0
        assert result.added == len(texts) == len(Ledger(root / "L"))
        print(f"samples {len(texts):,} (lines {2 * len(texts):,}); over the cap after re-encoding: {result.over_cap:,}")
        print(
            f"import --from lm-eval: {fast:.1f} s; encoding the texts alone: {reference:.1f} s; "
            f"ratio {fast / reference:.2f}"
        )


if __name__ == "__main__":
    main()
