"""Size of the frozen family: its family-wise type-I rate on simulated ledgers where every null holds exactly.

Each dataset is drawn at the paper's design sizes (250 items, k=8, native and translate-act in de/th/sw, the
paper's premiums) in the independent frame: every (item, cell, cap) gets k fresh decodes, each correct with the
item's probability p_i,L = logistic(mu_L + a_i) (a_i ~ N(0, item_sd), shared across cells, as MGSM items are
parallel). The probability does not depend on the cap or the arm, so Δ_L(B) = 0 exactly at every tested budget,
Δ_th − Δ_de = 0, and each H3 contrast is 0: every hypothesis of the family sits on (or inside) its null. The
frozen family (default ``examples/protocol_bstar.toml``: six Holm-corrected tests at B* = 1024) is run on each
dataset with its tail-conservatism factor and without it (factor 1), both on one shared resampling; a dataset
counts as a family-wise error when Holm rejects anything. Prints a table and writes JSON (with the seeds) to
``--out``.

    python scripts/validate_size.py --datasets 2000 --n-boot 1000 --out size.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from rich.progress import track

from mindcap_tok._io import atomic_write_text
from mindcap_tok.stats.bootstrap import grid_bootstrap
from mindcap_tok.stats.family import FamilyTests, family_budgets, run_family
from mindcap_tok.stats.grid import AccuracyGrid
from mindcap_tok.stats.premiums import premium_table
from mindcap_tok.stats.protocol import load_protocol

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = ROOT / "examples" / "protocol_bstar.toml"
#: the paper's FLORES-200 premiums (Qwen3) and null accuracies (logit scale) per language
PREMIUMS = {"deu_Latn": 1.56, "tha_Thai": 2.55, "swh_Latn": 1.94}
LOGIT_MU = {"deu_Latn": 2.0, "tha_Thai": 1.2, "swh_Latn": 0.5}
ARMS = ("native", "translate-act")


def null_grid(model: str, budgets: list[int], n_items: int, k: int, item_sd: float, rng) -> AccuracyGrid:
    """One independent-frame dataset under the null: per-item success probabilities that ignore cap and arm."""
    cells = pd.DataFrame([{"model": model, "arm": arm, "lang": lang} for arm in ARMS for lang in PREMIUMS])
    a = rng.normal(0.0, item_sd, size=n_items)
    mu = np.array([LOGIT_MU[lang] for lang in cells["lang"]])
    p = 1.0 / (1.0 + np.exp(-(mu[None, :] + a[:, None])))  # (items, cells)
    shape = (n_items, len(cells), len(budgets))
    correct = rng.binomial(k, np.broadcast_to(p[:, :, None], shape)).astype(np.float64)
    count = np.full(shape, float(k))
    return AccuracyGrid(cells, np.asarray(budgets, dtype=np.int64), np.arange(n_items), correct, count, "independent")


def _rate(errors: np.ndarray) -> dict:
    rate = float(errors.mean())
    return {"rate": rate, "mc_se": math.sqrt(rate * (1 - rate) / len(errors)), "errors": int(errors.sum())}


def size(
    datasets: int,
    n_boot: int,
    seed: int,
    protocol: Path = PROTOCOL,
    n_items: int = 250,
    k: int = 8,
    item_sd: float = 1.5,
) -> dict:
    """Family-wise type-I rate with and without the protocol's tail factor (dataset s: seed + s)."""
    proto = load_protocol(protocol)
    model = proto.model or "model"
    table = premium_table({(model, lang): r for lang, r in PREMIUMS.items()})
    budgets = family_budgets(proto.hypotheses, table, models=[model])
    factors = {"with_tail_factor": proto.tail_factor, "without_tail_factor": 1.0}
    errors = {name: np.zeros(datasets, dtype=bool) for name in factors}
    per_test = {name: np.zeros(len(proto.hypotheses)) for name in factors}
    for s in track(range(datasets), description="null ledgers"):
        grid = null_grid(model, budgets, n_items, k, item_sd, np.random.default_rng(seed + s))
        boot = grid_bootstrap(grid, n_boot=n_boot, seed=seed + s)
        for name, factor in factors.items():
            tests = FamilyTests(alpha=proto.alpha, n_boot=n_boot, seed=seed + s, tail_factor=factor)
            res = run_family(grid, proto.hypotheses, premiums=table, tests=tests, boot=boot)
            reject = (res.table["decision"] == "reject").to_numpy()
            errors[name][s] = reject.any()
            per_test[name] += reject
    return {
        "protocol": proto.name,
        "datasets": datasets,
        "n_boot": n_boot,
        "seed": seed,
        "alpha": proto.alpha,
        "tail_factor": proto.tail_factor,
        "n_items": n_items,
        "k": k,
        "item_sd": item_sd,
        "logit_mu": LOGIT_MU,
        "premiums": PREMIUMS,
        "budgets": budgets,
        **{name: _rate(e) for name, e in errors.items()},
        "rejections_by_test": {
            name: dict(zip([h.id for h in proto.hypotheses], (v / datasets).round(5).tolist(), strict=True))
            for name, v in per_test.items()
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=2000)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=70_000)
    ap.add_argument("--protocol", type=Path, default=PROTOCOL)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    res = size(args.datasets, args.n_boot, args.seed, args.protocol)
    print(f"{res['protocol']}: {res['datasets']} null datasets, n_boot={res['n_boot']}, seed={res['seed']}")
    for name in ("with_tail_factor", "without_tail_factor"):
        r = res[name]
        print(f"family-wise type-I rate {name}: {r['rate']:.5f} ± {r['mc_se']:.5f} (MC se), {r['errors']} errors")
    print("rejection rate by test:", res["rejections_by_test"])
    if args.out:
        atomic_write_text(args.out, json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
