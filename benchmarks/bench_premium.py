"""Benchmark: the all-204-language premium table with 10,000-resample CIs, fast path vs naive path.

Prints, from one run: the fast path (`mindcap_tok.premium.token_premium`: batched encode, one resampling
matrix and a matrix product); the floor (a bare batch encode of the same text with the tokenizer's own
library: `encode_batch` / `encode_batch_fast` for tokenizer.json, `encode_ordinary_batch` for tiktoken,
`SentencePieceProcessor.encode` on the list for sentencepiece); and the naive path (one `encode` call
per line, a Python loop over resamples). Several models give one block of rows each.

    .venv/bin/python benchmarks/bench_premium.py [--model qwen3-8b gpt-4o gemma-3] [--n-boot 10000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mindcap_tok.data import flores
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.premium import token_premium
from mindcap_tok.tokenizer import load_tokenizer


def floors(tok, lines: list[str]) -> list[tuple[str, float]]:
    """(label, seconds) of each bare batch encode of ``lines`` with the tokenizer's own library."""
    out = []
    if tok.family == "tokenizers":
        calls = [
            ("encode_batch", lambda: tok.tokenizer.encode_batch(lines, add_special_tokens=False)),
            ("encode_batch_fast", lambda: tok.tokenizer.encode_batch_fast(lines, add_special_tokens=False)),
        ]
    elif tok.family == "tiktoken":
        calls = [("tiktoken encode_ordinary_batch", lambda: tok.backend.enc.encode_ordinary_batch(lines))]
    else:
        calls = [("sentencepiece encode(list)", lambda: tok.backend.sp.encode(lines))]
    for label, call in calls:
        t0 = time.perf_counter()
        call()
        out.append((label, time.perf_counter() - t0))
    return out


def naive(tok, texts: dict[str, list[str]], ref: str, n_boot: int, seed: int) -> dict[str, tuple[float, float, float]]:
    counts = {code: np.array([len(tok.encode(s)) for s in lines]) for code, lines in texts.items()}
    rng = np.random.default_rng(seed)
    n = len(counts[ref])
    langs = [c for c in counts if c != ref]
    ratios = {c: [] for c in langs}
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        ref_sum = counts[ref][idx].sum()
        for c in langs:
            ratios[c].append(counts[c][idx].sum() / ref_sum)
    return {c: (counts[c].sum() / counts[ref].sum(), *np.quantile(ratios[c], [0.025, 0.975])) for c in langs}


def bench(model: str, args: argparse.Namespace) -> None:
    """Print the rows for one model."""
    tok = load_tokenizer(model)
    langs = [c for c in flores_codes() if c != "eng_Latn"]
    langs = langs[: args.langs] if args.langs else langs
    src = flores.flores_source()

    flores._read_local.cache_clear()
    t0 = time.perf_counter()
    rows = token_premium(tok, langs, n_boot=args.n_boot, seed=0, source=src)
    fast = time.perf_counter() - t0

    texts = flores.load_parallel(langs, "devtest", src)
    all_lines = [s for lines in texts.values() for s in lines]
    print(
        f"model {tok.name} ({tok.family}): {len(rows)} languages x {rows[0].n_pairs} pairs, {args.n_boot} "
        f"resamples, {len(all_lines)} lines"
    )
    print(f"fast path (load + tokenize + bootstrap): {fast:8.2f} s")
    for label, floor in floors(tok, all_lines):
        print(f"floor: bare {label} of the same text: {floor:8.2f} s  -> fast/floor = {fast / floor:.2f}")
    k = args.naive_langs or len(langs)
    subset = {c: texts[c] for c in ["eng_Latn", *langs[:k]]}
    t0 = time.perf_counter()
    ref = naive(tok, subset, "eng_Latn", args.n_boot, seed=0)
    slow = (time.perf_counter() - t0) * len(langs) / k
    worst = max(abs(ref[r.lang][0] - r.premium) for r in rows if r.lang in ref)
    scaled = f" (measured on {k} languages, scaled to {len(langs)})" if k < len(langs) else ""
    print(f"naive path (encode per line, loop of resamples): {slow:8.2f} s{scaled}  -> naive/fast = {slow / fast:.1f}x")
    print(f"max |premium difference| fast vs naive: {worst:.2e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", nargs="+", default=["qwen3-8b"], help="one or more models (one block of rows each)")
    ap.add_argument("--n-boot", type=int, default=10_000)
    ap.add_argument(
        "--langs",
        type=int,
        default=0,
        help="time every path on the first K languages only (0: all 204; for slow machines)",
    )
    ap.add_argument(
        "--naive-langs",
        type=int,
        default=0,
        help="run the naive path on this many languages only (0: all) and scale its time up",
    )
    args = ap.parse_args()
    for model in args.model:
        bench(model, args)


if __name__ == "__main__":
    main()
