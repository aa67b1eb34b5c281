"""Benchmark: learning 2 cross-fitted folds of Thai on FLORES-200 dev for Gemma 3 and Llama 2 (SentencePiece
pieces appended below every base score), with Qwen3's byte-level BPE path as the comparison.

Timed: ``cross_fit`` (base segmentation, learning, per fold) and building each fold's extended tokenizer, which
checks that the extended model segments every training text exactly as the learner did (for SentencePiece:
``sentencepiece`` loading the extended ``.model``).

    python benchmarks/bench_extend_sp.py [--models gemma-3 llama-2 qwen3-8b] [--size 1000] [--min-freq N]
"""

from __future__ import annotations

import argparse
import os
import time

from mindcap_tok.adaptation.corpus import flores_corpus
from mindcap_tok.adaptation.crossfit import cross_fit
from mindcap_tok.adaptation.saved import resolved
from mindcap_tok.config import load_config
from mindcap_tok.tokenization.load import load_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["gemma-3", "llama-2", "qwen3-8b"])
    parser.add_argument("--size", type=int, default=1000, help="merges per fold (omit with --min-freq)")
    parser.add_argument("--min-freq", type=int, default=None, help="learn every merge down to this pair count")
    args = parser.parse_args()
    size = None if args.min_freq is not None and args.size == 1000 else args.size
    cfg = load_config()
    corpus = flores_corpus("th", "dev", source=str(cfg.data_dir.value / "flores200"))
    print(f"load average {os.getloadavg()[0]:.1f}; {len(corpus.items)} Thai dev lines, 2 folds, size {size}")
    for name in args.models:
        base = load_tokenizer(name, cfg.tokenizers_dir.value)
        start, cpu = time.perf_counter(), time.process_time()
        folds = cross_fit(base, corpus, folds=2, seed=0, size=size, min_freq=args.min_freq)
        learn = time.perf_counter() - start
        for fx in folds:
            resolved(fx.extension, f"{name}-fold{fx.fold}")  # raises unless it segments like the learner
        total = time.perf_counter() - start
        per_fold = ", ".join(f"{fx.extension.seconds:.1f} s ({fx.extension.n_merges} merges)" for fx in folds)
        print(
            f"{name}: learn 2 folds {learn:.1f} s [{per_fold}], with checked tokenizers {total:.1f} s, "
            f"CPU {time.process_time() - cpu:.1f} s"
        )


if __name__ == "__main__":
    main()
