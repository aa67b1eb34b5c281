"""Benchmark: the all-204-language premium table with 10,000-resample CIs, fast path vs naive path.

Prints, from one run: the fast path (`mindcap_tok.premium.token_premium`: batched encode, one resampling
matrix and a matrix product); the floor (a bare batch encode of the same text with the library that counted:
`encode_batch` / `encode_batch_fast` for tokenizer.json, `encode_ordinary_batch` for tiktoken,
`SentencePieceProcessor.encode` on the list for sentencepiece); and the naive path (one `encode` call
per line, a Python loop over resamples). A tokenizer.json that tiktoken counted (Qwen3, Llama 3.1) also gets
the engine's build time and the reference path (`engine="reference"`, tokenizers) with its floors, both
engines' premiums compared. Several models give one block of rows each.

    .venv/bin/python benchmarks/bench_premium.py [--model qwen3-8b gpt-4o gemma-3] [--n-boot 10000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mindcap_tok.data import flores
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.premium import token_premium
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.tiktoken_engine import tiktoken_engine


class Timer:
    """Wall-clock and CPU seconds (all threads of this process) of a ``with`` block: CPU time is the steadier
    figure when other jobs share the cores."""

    def __enter__(self) -> Timer:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self._wall, time.process_time() - self._cpu

    def __str__(self) -> str:
        return f"{self.wall:8.2f} s (CPU {self.cpu:6.2f} s)"

    def over(self, other: Timer) -> str:
        """This time as a ratio of ``other``'s: wall-clock and CPU."""
        return f"{self.wall / other.wall:.2f} (CPU {self.cpu / other.cpu:.2f})"


def floors(tok, lines: list[str], engine: str) -> list[tuple[str, Timer]]:
    """(label, seconds) of each bare batch encode of ``lines`` by ``engine``, the library that counted them."""
    if engine == "tokenizers":
        calls = [
            ("encode_batch", lambda: tok.tokenizer.encode_batch(lines, add_special_tokens=False)),
            ("encode_batch_fast", lambda: tok.tokenizer.encode_batch_fast(lines, add_special_tokens=False)),
        ]
    elif engine == "tiktoken":
        enc = tok.tiktoken_engine.enc if tok.family == "tokenizers" else tok.backend.enc
        calls = [("tiktoken encode_ordinary_batch", lambda: enc.encode_ordinary_batch(lines))]
    else:
        calls = [("sentencepiece encode(list)", lambda: tok.backend.sp.encode(lines))]
    out = []
    for label, call in calls:
        with Timer() as t:
            call()
        out.append((label, t))
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


def timed_premium(tok, langs: list[str], args: argparse.Namespace, engine: str) -> tuple[list, Timer]:
    """The premium rows and their time, FLORES files read afresh."""
    flores._read_local.cache_clear()
    with Timer() as t:
        rows = token_premium(tok, langs, n_boot=args.n_boot, seed=0, source=flores.flores_source(), engine=engine)
    return rows, t


def bench(model: str, args: argparse.Namespace) -> None:
    """Print the rows for one model."""
    tok = load_tokenizer(model)
    langs = [c for c in flores_codes() if c != "eng_Latn"]
    langs = langs[: args.langs] if args.langs else langs

    texts = flores.load_parallel(langs, "devtest", source=flores.flores_source())
    all_lines = [s for lines in texts.values() for s in lines]
    print(f"model {tok.name} ({tok.family}): {len(langs)} languages, {args.n_boot} resamples, {len(all_lines)} lines")
    for _ in range(args.repeat):  # each round: the premium path, then the bare encodes right after it
        tok = load_tokenizer(model)  # afresh: each round's premium path builds the tiktoken engine it uses
        rows, fast = timed_premium(tok, langs, args, "auto")
        print(f"fast path (load + tokenize + bootstrap), counted by {rows[0].engine}: {fast}")
        for label, floor in floors(tok, all_lines, rows[0].engine):
            print(f"floor: bare {label} of the same text: {floor}  -> fast/floor = {fast.over(floor)}")
    if rows[0].engine != tok.family:  # a tokenizer.json counted by tiktoken: the reference engine too
        with Timer() as build:
            tiktoken_engine(tok.tokenizer)
        print(f"building the tiktoken engine (checks included): {build}")
        ref_rows, ref = timed_premium(tok, langs, args, "reference")
        same = [r.as_dict() | {"engine": ""} for r in ref_rows] == [r.as_dict() | {"engine": ""} for r in rows]
        print(f"reference path, counted by {ref_rows[0].engine}: {ref}  -> ref/fast = {ref.over(fast)}")
        print(f"premiums, counts and CIs identical to the fast path's: {same}")
        for label, floor in floors(tok, all_lines, ref_rows[0].engine):
            print(f"floor: bare {label} of the same text: {floor}  -> ref/floor = {ref.over(floor)}")
    if args.naive_langs < 0:
        return
    k = args.naive_langs or len(langs)
    subset = {c: texts[c] for c in ["eng_Latn", *langs[:k]]}
    t0 = time.perf_counter()
    ref = naive(tok, subset, "eng_Latn", args.n_boot, seed=0)
    slow = (time.perf_counter() - t0) * len(langs) / k
    worst = max(abs(ref[r.lang][0] - r.premium) for r in rows if r.lang in ref)
    scaled = f" (measured on {k} languages, scaled to {len(langs)})" if k < len(langs) else ""
    print(
        f"naive path (encode per line, loop of resamples): {slow:8.2f} s{scaled}  "
        f"-> naive/fast = {slow / fast.wall:.1f}x"
    )
    print(f"max |premium difference| fast vs naive: {worst:.2e}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", nargs="+", default=["qwen3-8b"], help="one or more models (one block of rows each)")
    ap.add_argument("--n-boot", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=1, help="time the premium path and its floors this many times")
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
        help="run the naive path on this many languages only (0: all, -1: none) and scale its time up",
    )
    args = ap.parse_args()
    for model in args.model:
        bench(model, args)


if __name__ == "__main__":
    main()
