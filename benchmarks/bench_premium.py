"""Benchmark: the all-204-language premium table with 10,000-resample CIs, fast path vs naive path.

Prints, from one run: the fast path (`mindcap_tok.premium.premium`: batched encode, one resampling
matrix and a matrix product); the floor (bare `encode_batch` / `encode_batch_fast` of the same text);
and the naive path (one `encode` call per line, a Python loop over resamples).

    .venv/bin/python benchmarks/bench_premium.py [--model qwen3-8b] [--n-boot 10000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mindcap_tok.data import flores
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.premium import premium
from mindcap_tok.tokenizer import load_tokenizer


def naive(tok, texts: dict[str, list[str]], ref: str, n_boot: int, seed: int) -> dict[str, tuple[float, float, float]]:
    counts = {code: np.array([len(tok.encode(s, add_special_tokens=False).ids) for s in lines])
              for code, lines in texts.items()}
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--n-boot", type=int, default=10_000)
    ap.add_argument("--langs", type=int, default=0,
                    help="time every path on the first K languages only (0: all 204; for slow machines)")
    ap.add_argument("--naive-langs", type=int, default=0,
                    help="run the naive path on this many languages only (0: all) and scale its time up")
    args = ap.parse_args()

    tok = load_tokenizer(args.model)
    langs = [c for c in flores_codes() if c != "eng_Latn"]
    langs = langs[: args.langs] if args.langs else langs
    src = flores.flores_source()

    flores._read_local.cache_clear()
    t0 = time.perf_counter()
    rows = premium(tok, langs, n_boot=args.n_boot, seed=0, source=src)
    fast = time.perf_counter() - t0

    texts = flores.load_parallel(langs, "devtest", src)
    all_lines = [s for lines in texts.values() for s in lines]
    t0 = time.perf_counter()
    tok.tokenizer.encode_batch(all_lines, add_special_tokens=False)
    floor = time.perf_counter() - t0
    t0 = time.perf_counter()
    tok.tokenizer.encode_batch_fast(all_lines, add_special_tokens=False)
    floor_fast = time.perf_counter() - t0

    print(f"model {tok.name}: {len(rows)} languages x {rows[0].n_pairs} pairs, {args.n_boot} resamples, "
          f"{len(all_lines)} lines")
    print(f"fast path (load + tokenize + bootstrap): {fast:8.2f} s")
    print(f"floor: bare encode_batch of the same text: {floor:8.2f} s  -> fast/floor = {fast / floor:.2f}")
    print(f"floor: bare encode_batch_fast:            {floor_fast:8.2f} s  -> fast/floor = {fast / floor_fast:.2f}")
    k = args.naive_langs or len(langs)
    subset = {c: texts[c] for c in ["eng_Latn", *langs[:k]]}
    t0 = time.perf_counter()
    ref = naive(tok.tokenizer, subset, "eng_Latn", args.n_boot, seed=0)
    slow = (time.perf_counter() - t0) * len(langs) / k
    worst = max(abs(ref[r.lang][0] - r.premium) for r in rows if r.lang in ref)
    scaled = f" (measured on {k} languages, scaled to {len(langs)})" if k < len(langs) else ""
    print(f"naive path (encode per line, loop of resamples): {slow:8.2f} s{scaled}  -> naive/fast = {slow / fast:.1f}x")
    print(f"max |premium difference| fast vs naive: {worst:.2e}")


if __name__ == "__main__":
    main()
