"""Round-trip metrics: pass share (MQM ≥ 80), mean MQM and mean judge score, with a bootstrap SE over texts.

Per model and judge (a sample is one chain as one judge scored it), over all sequences and by sequence, resource
group, text category and subcategory. As in LiT (Table 2) each
text's values are first averaged across the group's sequences, then texts are resampled (10,000 resamples by
default, ``resample.bootstrap_counts``): a text keeps all its sequences together (paired). A failed sample
(an empty hop ended its chain) counts as MQM 0, not passed, and has no judge score; an unjudged sample is left
out of every statistic and counted (``n_unjudged``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..resample import bootstrap_counts

N_BOOT = 10_000
STATS = {"pass_share": "passed", "mean_mqm": "mqm", "mean_judge_score": "judge_score"}


def text_bootstrap(
    frame: pd.DataFrame, column: str, n_boot: int = N_BOOT, seed: int = 0
) -> tuple[float | None, float | None, int]:
    """(mean, bootstrap SE, texts) of ``column``: averaged per text across its rows (NaN skipped), then texts
    resampled. ``None`` values when no text has a value; SE ``None`` with a single text."""
    values = pd.to_numeric(frame[column], errors="coerce").astype(float)
    per_text = values.groupby(frame["text_id"], sort=True).mean().dropna().to_numpy()
    n = len(per_text)
    if n == 0:
        return None, None, 0
    mean = float(per_text.mean())
    if n == 1:
        return mean, None, 1
    counts = bootstrap_counts(n, n_boot, seed=seed)
    estimates = counts @ per_text / n
    return mean, float(np.std(estimates, ddof=1)), n


def _row(model: str, judge: str, by: str, group: str, frame: pd.DataFrame, n_boot: int, seed: int) -> dict:
    scored = frame[frame["status"] != "unjudged"]
    row = {
        "model": model,
        "judge_model": judge,
        "by": by,
        "group": group,
        "n_texts": int(frame["text_id"].nunique()),
        "n_samples": len(frame),
        "n_failed": int((frame["status"] == "failed").sum()),
        "n_unjudged": int((frame["status"] == "unjudged").sum()),
    }
    for name, column in STATS.items():
        mean, se, _ = text_bootstrap(scored, column, n_boot, seed)
        row[name], row[f"{name}_se"] = mean, se
    return row


def roundtrip_metrics(samples: pd.DataFrame, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """One row per model × judge × (overall | sequence | resource | category | subcategory: ``category/sub``, for
    texts with a second level) group: counts, the three statistics
    and their SEs (fractions: a pass share is in [0, 1]; MQM and judge scores on their 0–100 scale)."""
    rows = []
    for (model, judge), frame in samples.groupby(["model", "judge_model"], sort=False):
        rows.append(_row(model, judge, "overall", "all", frame, n_boot, seed))
        for by in ("sequence", "resource", "category"):
            for group, sub in frame.groupby(by, sort=False):
                rows.append(_row(model, judge, by, str(group), sub, n_boot, seed))
        two = frame[frame["subcategory"].notna()] if "subcategory" in frame else frame.iloc[:0]
        for (cat, sub_cat), sub in two.groupby(["category", "subcategory"], sort=False):
            rows.append(_row(model, judge, "subcategory", f"{cat}/{sub_cat}", sub, n_boot, seed))
    return pd.DataFrame(rows)
