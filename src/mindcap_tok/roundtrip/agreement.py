"""Rank agreement, as LiT's Appendix B and Figure 1 test it: Spearman ρ and Kendall τ between two scorings of the
same models, each with a seeded permutation p-value (one-sided by default: agreement, not disagreement).

The p-value is :func:`scipy.stats.permutation_test` over pairings (one scoring's values shuffled against the
other's); with n! ≤ ``n_perm`` scipy enumerates every permutation (an exact test), and the count used is recorded.
Between judges: each metric's model scores under one judge against another's; between metrics: per judge, pass
share, raw MQM and direct judge score against each other. Models missing either value are left out of a pair; a
pair needs at least :data:`MIN_MODELS` models.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd

N_PERM = 10_000
MIN_MODELS = 3
METRICS = ("pass_share", "mean_mqm", "mean_judge_score")


def _stat(kind: str):
    from scipy import stats

    fn = stats.spearmanr if kind == "rho" else stats.kendalltau
    return lambda x, y: float(fn(x, y).statistic)


def rank_agreement(
    x: Sequence[float], y: Sequence[float], *, n_perm: int = N_PERM, seed: int = 0, alternative: str = "greater"
) -> dict:
    """Spearman ρ and Kendall τ of paired ``x``, ``y`` with permutation p-values (``alternative`` as scipy's);
    ``None`` where a scoring is constant (no ranking to compare)."""
    from scipy import stats

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    out: dict = {
        "n": len(xs),
        "n_permutations": min(n_perm, math.factorial(len(xs))),
        "seed": seed,
        "alternative": alternative,
    }
    constant = np.ptp(xs) == 0 or np.ptp(ys) == 0
    for kind in ("rho", "tau"):
        if constant:
            out[kind], out[f"{kind}_p"] = None, None
            continue
        stat = _stat(kind)
        test = stats.permutation_test(
            (xs,),
            lambda a, stat=stat: stat(a, ys),
            permutation_type="pairings",
            n_resamples=n_perm,
            alternative=alternative,
            rng=np.random.default_rng(seed),
        )
        out[kind], out[f"{kind}_p"] = float(test.statistic), float(test.pvalue)
    return out


def _pair(a: pd.Series, b: pd.Series, n_perm: int, seed: int) -> dict | None:
    both = pd.concat([a, b], axis=1).astype(float).dropna()
    if len(both) < MIN_MODELS:
        return None
    got = rank_agreement(both.iloc[:, 0], both.iloc[:, 1], n_perm=n_perm, seed=seed)
    return {"n_models": got.pop("n"), **{k: got[k] for k in ("rho", "rho_p", "tau", "tau_p")}}


def judge_agreement(metrics: pd.DataFrame, *, n_perm: int = N_PERM, seed: int = 0) -> pd.DataFrame:
    """Rank agreement of the models' overall scores (rows of :func:`~.metrics.roundtrip_metrics`): between every
    two judges per metric (``between = "judges"``) and between every two metrics per judge (``"metrics"``)."""
    over = metrics[metrics["by"] == "overall"]
    table = {m: over.pivot(index="model", columns="judge_model", values=m) for m in METRICS}
    judges = list(dict.fromkeys(over["judge_model"]))
    rows = []
    for metric in METRICS:
        for a, b in combinations(judges, 2):
            got = _pair(table[metric][a], table[metric][b], n_perm, seed)
            if got:
                rows.append({"between": "judges", "judge": None, "metric": metric, "a": a, "b": b, **got})
    for judge in judges:
        for a, b in combinations(METRICS, 2):
            got = _pair(table[a][judge], table[b][judge], n_perm, seed)
            if got:
                rows.append({"between": "metrics", "judge": judge, "metric": None, "a": a, "b": b, **got})
    return pd.DataFrame(rows)
