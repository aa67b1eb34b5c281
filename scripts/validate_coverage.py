"""Coverage of the Δ_L(B) intervals on simulated ledgers whose true Δ_L(B) is known in closed form.

Draws N datasets from ``validation_design`` of ``tests/simulate.py`` (250 items, k=8, item random
effects, native de/th/sw with the paper's premiums), runs :func:`mindcap_tok.stats.curves.sweep` on each and
counts how often the pointwise percentile CIs cover the true Δ_L(B) at each budget, and how often the
simultaneous band covers the whole true curve. Prints a table and writes JSON (with the seeds) to ``--out``.

    python scripts/validate_coverage.py --datasets 500 --n-boot 1000 --out coverage.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from rich.progress import track

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # simulate: a test helper

from mindcap_tok._io import atomic_write_text
from mindcap_tok.budgets import SWEEP_BUDGETS
from mindcap_tok.resample import Resampling
from mindcap_tok.stats.curves import sweep
from mindcap_tok.stats.premiums import required_budgets
from simulate import simulate, true_delta, validation_design


def coverage(datasets: int, n_boot: int, seed: int, level: float = 0.95) -> dict:
    """Pointwise and whole-curve coverage over ``datasets`` simulated ledgers (dataset s: seed + s)."""
    design = validation_design()
    budgets = list(SWEEP_BUDGETS)
    need = required_budgets(budgets, design.premiums.values())
    truth = {c.lang: true_delta(design, c, budgets) for c in design.cells}
    point, band = [], []
    for s in track(range(datasets), description="simulated ledgers"):
        grid = simulate(design, seed=seed + s).grid(need)
        rows = sweep(grid, design.premiums, budgets=budgets, resampling=Resampling(n_boot, seed + s, level)).rows
        for lang, part in rows.groupby("lang"):
            tr = truth[lang]
            point.append((part["ci_low"].to_numpy() <= tr) & (tr <= part["ci_high"].to_numpy()))
            band.append(bool(((part["band_low"].to_numpy() <= tr) & (tr <= part["band_high"].to_numpy())).all()))
    point, band = np.asarray(point), np.asarray(band)
    share = float(band.mean())
    return {
        "datasets": datasets,
        "curves": len(band),
        "n_boot": n_boot,
        "seed": seed,
        "level": level,
        "budgets": budgets,
        "pointwise_by_budget": point.mean(axis=0).round(4).tolist(),
        "pointwise": round(float(point.mean()), 4),
        "band_whole_curve": round(share, 4),
        "band_mc_se": round(math.sqrt(share * (1 - share) / len(band)), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=500)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=50_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    res = coverage(args.datasets, args.n_boot, args.seed)
    print(
        f"{res['curves']} curves ({res['datasets']} datasets × 3 languages), n_boot={res['n_boot']}, seed={res['seed']}"
    )
    print("pointwise coverage by budget:", dict(zip(res["budgets"], res["pointwise_by_budget"], strict=True)))
    print(f"pointwise coverage (all budgets): {res['pointwise']:.4f}")
    print(f"simultaneous band, whole curve:   {res['band_whole_curve']:.4f} ± {res['band_mc_se']:.4f} (MC se)")
    if args.out:
        atomic_write_text(args.out, json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
