"""Benchmark: learning 7,000 appended merges on at least 5 MB of target-language text.

Fast path: ``learn_extension`` (pair counts kept up to date incrementally, a heap of candidate pairs, only
the words that contain the merged pair re-segmented). Reference: ``reference_merges``, which recounts every
pair of every word after every merge, on a small slice; the fast learner runs on the same slice, and the two merge
lists are checked to be identical.

No single language in FLORES-200 reaches 5 MB (Thai dev+devtest is 0.7 MB), so the large corpus is the
dev+devtest text of languages whose scripts Qwen3 compresses worst, in the order given, until it reaches
``--mb`` (a regional extension; it has far more distinct words than 5 MB of one language would).

    python benchmarks/bench_extend.py [--model qwen3-8b] [--merges 7000] [--mb 5] [--slice-lines 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # bpe_reference: a test helper

from bpe_reference import reference_merges
from mindcap_tok.adaptation import learn_extension
from mindcap_tok.adaptation.corpus import lines_corpus
from mindcap_tok.data.flores import load_flores
from mindcap_tok.tokenization.load import load_tokenizer

LANGS = (
    "tha_Thai",
    "khm_Khmr",
    "lao_Laoo",
    "mya_Mymr",
    "hin_Deva",
    "ben_Beng",
    "tam_Taml",
    "tel_Telu",
    "kan_Knda",
    "mal_Mlym",
    "guj_Gujr",
    "pan_Guru",
    "amh_Ethi",
    "kat_Geor",
)


def big_corpus(mb: float) -> list[str]:
    """dev+devtest lines of LANGS, in order, until the text reaches ``mb`` megabytes (10^6 bytes of UTF-8)."""
    lines, size = [], 0
    for lang in LANGS:
        for split in ("dev", "devtest"):
            for line in load_flores(lang, split):
                lines.append(line)
                size += len(line.encode()) + 1
        if size >= mb * 1e6:
            return lines
    raise SystemExit(f"the FLORES text of {len(LANGS)} languages is only {size / 1e6:.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--merges", type=int, default=7000)
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--slice-lines", type=int, default=200, help="Thai dev lines for the naive comparison")
    ap.add_argument("--slice-merges", type=int, default=200)
    args = ap.parse_args()
    base = load_tokenizer(args.model)
    print(f"{args.model}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    # slice: fast and naive learners on the same text must give the same merges
    thai = load_flores("tha_Thai", "dev")[: args.slice_lines]
    t0 = time.perf_counter()  # both paths timed from the text: base segmentation included
    naive = reference_merges(base, thai, args.slice_merges)
    naive_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = learn_extension(base, lines_corpus(thai, "slice"), size=args.slice_merges)
    fast_slice_s = time.perf_counter() - t0
    assert naive == [(a, b, c) for (a, b), c in zip(fast.merges, fast.merge_counts, strict=True)], (
        "fast and naive learners disagree"
    )
    print(
        f"slice: {len(thai)} Thai lines, {args.slice_merges} merges: naive {naive_s:.2f} s, "
        f"fast {fast_slice_s:.3f} s (identical merges): naive/fast = {naive_s / fast_slice_s:,.0f}×"
    )

    lines = big_corpus(args.mb)
    n_bytes = sum(len(x.encode()) + 1 for x in lines)
    t0 = time.perf_counter()
    ext = learn_extension(base, lines_corpus(lines, "bench"), size=args.merges)
    full_s = time.perf_counter() - t0
    print(
        f"full: {len(lines):,} lines, {n_bytes / 1e6:.2f} MB, {len(ext.word_counts):,} distinct pre-tokens, "
        f"{ext.n_merges:,} merges: {full_s:.1f} s (tokens {ext.tokens_before:,} -> {ext.tokens_after:,}); "
        f"target < 60 s: {'met' if full_s < 60 else 'missed'}"
    )


if __name__ == "__main__":
    main()
