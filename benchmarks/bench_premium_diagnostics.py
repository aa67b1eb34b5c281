"""Benchmark: `premium --all` with every diagnostic (one encode pass) against the premium alone, in one process.

The premium alone is the pre-diagnostics path, rebuilt here from the library's public pieces: count the tokens of
each line (``count_tokens``, LANGS_PER_CALL languages per call) and bootstrap the ratio (``ratio_bootstrap``). The
diagnostics path is :func:`mindcap_tok.premium.premium_study` (ids kept, classified, extra sums resampled, Gini and
groups). Both run alternately ``--repeat`` times; the best and median wall-clock times, the best CPU times (all
threads; steadier on a shared machine) and their ratios are printed, and the
premiums and CIs of both are checked identical. Target: ratio <= 1.3.

    .venv/bin/python benchmarks/bench_premium_diagnostics.py [--model qwen3-8b llama-2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from mindcap_tok.data.flores import flores_source
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.premium import (
    LANGS_PER_CALL,
    counting_engine,
    load_split,
    premium_study,
    ratio_bootstrap,
)
from mindcap_tok.resample import Resampling
from mindcap_tok.tokenization.load import load_tokenizer


def premium_alone(tok, codes: list[str], resampling: Resampling) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The premium and its CI as ``premium`` computed them before the diagnostics: counts only."""
    files = load_split(codes, "devtest", source=flores_source(), ref="eng_Latn")
    texts = {code: [s for part in parts for s in part] for code, parts in files.items()}
    counter = counting_engine(tok, texts=(s for lines in texts.values() for s in lines))
    ref = counter.count_tokens(texts["eng_Latn"])
    columns = []
    for start in range(0, len(codes), LANGS_PER_CALL):
        chunk = codes[start : start + LANGS_PER_CALL]
        joined = counter.count_tokens([line for code in chunk for line in texts[code]])
        columns += np.split(joined, np.cumsum([len(texts[code]) for code in chunk])[:-1])
    counts = np.column_stack(columns)
    low, high = ratio_bootstrap(counts, ref, resampling=resampling)
    return counts.sum(axis=0) / ref.sum(), low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=["qwen3-8b", "llama-2"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n-boot", type=int, default=10_000)
    args = parser.parse_args()
    codes = [c for c in flores_codes() if c != "eng_Latn"]
    resampling = Resampling(args.n_boot, 0)
    for model in args.model:
        tok = load_tokenizer(model)
        premium_study(tok, codes[:2], resampling=Resampling(0))  # warm: engine build, token classes, file cache
        alone, full, alone_cpu, full_cpu = [], [], [], []
        for _ in range(args.repeat):
            t, c = time.perf_counter(), time.process_time()
            premium, low, high = premium_alone(tok, codes, resampling)
            alone.append(time.perf_counter() - t)
            alone_cpu.append(time.process_time() - c)
            t, c = time.perf_counter(), time.process_time()
            study = premium_study(tok, codes, resampling=resampling)
            full.append(time.perf_counter() - t)
            full_cpu.append(time.process_time() - c)
        same = (
            [r.premium for r in study.rows] == premium.tolist()
            and [r.ci_low for r in study.rows] == low.tolist()
            and [r.ci_high for r in study.rows] == high.tolist()
        )
        print(
            f"{model}: premium alone best {min(alone):.2f} s (median {statistics.median(alone):.2f}); "
            f"with every diagnostic best {min(full):.2f} s (median {statistics.median(full):.2f}); "
            f"ratio best {min(full) / min(alone):.2f} "
            f"(median {statistics.median(full) / statistics.median(alone):.2f}); "
            f"CPU best {min(alone_cpu):.2f} s vs {min(full_cpu):.2f} s, ratio {min(full_cpu) / min(alone_cpu):.2f}; "
            f"premiums and CIs identical: {same}"
        )


if __name__ == "__main__":
    main()
