"""Benchmark: item-clustered bootstrap of 24 cells × 10 budgets (250 items, k=8) with 10,000 resamples.

Fast path (`mindcap_tok.stats`): per-item sums from the `by_budget` frame, one weight matrix times the sums,
pointwise percentile CIs, studentized max-|t| bands over the budget sweep and argmax stability for every cell,
then a Δ for every cell and budget with its per-replicate standard errors and bootstrap-t band (what ``sweep``
does for Δ_L).
Naive path: a Python loop over resamples that gathers the drawn items' records and averages them with
pandas, run on a slice and scaled up linearly. Both use the same resampling matrix, and the slice's
replicates are checked to be identical.

    .venv/bin/python benchmarks/bench_stats.py [--n-boot 10000] [--naive-boot 100]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # simulate: a test helper

from mindcap_tok.stats.bootstrap import bootstrap_weights, grid_bootstrap, ratio_difference
from mindcap_tok.stats.grid import accuracy_grid
from simulate import SimCell, SimDesign, simulate

BUDGETS = [64, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096]
ARMS = ("native", "translate-act", "pivot", "code-switched")
LANGS = (("deu_Latn", 1.56), ("tha_Thai", 2.55), ("swh_Latn", 1.94))


def design() -> SimDesign:
    cells = tuple(
        SimCell(arm, lang, 0.5, math.log(150 * (r if arm == "native" else 1.6)), 0.5, 0.05, 0.3, model)
        for model in ("sim-a", "sim-b")
        for arm in ARMS
        for lang, r in LANGS
    )
    return SimDesign(cells, n_items=250, k=8)


def fast(by_budget: pd.DataFrame, n_boot: int, seed: int) -> tuple[dict[str, float], object]:
    times = {}
    t0 = time.perf_counter()
    grid = accuracy_grid(by_budget)
    times["per-item sums"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    boot = grid_bootstrap(grid, n_boot=n_boot, seed=seed)
    times["resample (W @ sums)"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    boot.ci(0.95)
    boot.band(0.95)
    boot.argmax()
    times["CIs, bands, argmax"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    # a Δ per cell and budget (each budget against the next larger one) with bootstrap-t bands, as sweep does
    weights = bootstrap_weights(len(grid.items), n_boot, seed=seed)
    nxt = np.minimum(np.arange(len(grid.budgets)) + 1, len(grid.budgets) - 1)
    ratio_difference(
        grid.correct[:, :, nxt], grid.count[:, :, nxt], num_b=grid.correct, den_b=grid.count, weights=weights, seed=seed
    ).band()
    times["studentized Δ + bands"] = time.perf_counter() - t3
    times["total"] = time.perf_counter() - t0
    return times, (grid, boot)


def naive(by_budget: pd.DataFrame, weights: np.ndarray, cells: pd.DataFrame) -> np.ndarray:
    """What one writes without the weight-matrix trick: gather drawn items' records, average, repeat."""
    out = []
    for row in weights:
        drawn = np.repeat(np.arange(len(row)), row.astype(int))
        parts = []
        for cell in cells.itertuples(index=False):
            sel = by_budget[
                (by_budget["model"] == cell.model) & (by_budget["arm"] == cell.arm) & (by_budget["lang"] == cell.lang)
            ]
            groups = {i: g for i, g in sel.groupby("item")}
            sample = pd.concat([groups[i] for i in drawn])
            parts.append(sample.groupby("budget")["score"].mean().to_numpy())
        out.append(np.stack(parts))
    return np.asarray(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-boot", type=int, default=10_000)
    ap.add_argument("--naive-boot", type=int, default=50)
    ap.add_argument("--naive-cells", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    d = design()
    by_budget = simulate(d, seed=1).by_budget(BUDGETS)
    n_cells = len(d.cells)
    print(
        f"data: {n_cells} cells × {len(BUDGETS)} budgets × {d.n_items} items × k={d.k} = {len(by_budget):,} rows; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    times, (grid, boot) = fast(by_budget, args.n_boot, args.seed)
    for name, t in times.items():
        print(f"  fast {name:<22} {t:8.3f} s")

    cells = grid.cells.iloc[: args.naive_cells]
    weights = bootstrap_weights(len(grid.items), args.n_boot, seed=args.seed)[: args.naive_boot]
    t0 = time.perf_counter()
    slice_reps = naive(by_budget, weights, cells)
    t_slice = time.perf_counter() - t0
    np.testing.assert_allclose(slice_reps, boot.replicates[: args.naive_boot, : args.naive_cells], rtol=1e-12)
    scale = (args.n_boot / args.naive_boot) * (n_cells / args.naive_cells)
    t_naive = t_slice * scale
    print(
        f"  naive slice: {args.naive_boot} resamples × {args.naive_cells} cells in {t_slice:.2f} s "
        f"(replicates identical to the fast path)"
    )
    print(f"  naive, scaled to {args.n_boot} × {n_cells} cells: {t_naive:,.0f} s")
    print(
        f"fast {times['total']:.2f} s vs naive {t_naive:,.0f} s: {t_naive / times['total']:,.0f}× faster; "
        f"target < 5 s: {'met' if times['total'] < 5 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
