"""Benchmark: `premium --all --diagnostics` (one encode pass) against `premium --all`, in one process.

The premium alone is :func:`mindcap_tok.premium.token_premium` (counts only: the path plain `premium` takes, as it
was before the diagnostics). The diagnostics path is :func:`mindcap_tok.premium.premium_study` (ids kept and
classified, extra sums resampled, distinct-token counts resampled, Gini and groups). Both run alternately
``--repeat`` times; the best and median wall-clock times, the best CPU times (all threads; steadier on a shared
machine) and their ratios are printed, and the premiums and CIs of both are checked identical. Target: ratio <= 1.3.

    .venv/bin/python benchmarks/bench_premium_diagnostics.py [--model qwen3-8b llama-2 gemma-3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from mindcap_tok.data.languages import flores_codes
from mindcap_tok.premium import premium_study, token_premium
from mindcap_tok.resample import Resampling
from mindcap_tok.tokenization.load import load_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", default=["qwen3-8b", "llama-2", "gemma-3"])
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
            alone_rows = token_premium(tok, codes, resampling=resampling)
            alone.append(time.perf_counter() - t)
            alone_cpu.append(time.process_time() - c)
            t, c = time.perf_counter(), time.process_time()
            study = premium_study(tok, codes, resampling=resampling)
            full.append(time.perf_counter() - t)
            full_cpu.append(time.process_time() - c)
        same = [(r.premium, r.ci_low, r.ci_high) for r in study.rows] == [
            (r.premium, r.ci_low, r.ci_high) for r in alone_rows
        ]
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
