"""Answer-emission timing per cell (paper Table 2, §4.1): when answers appear, how often never, cap hits, lengths."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import BadInputError
from .cap import UNKNOWN
from .grid import CELL_COLUMNS, SETTING_COLUMNS, require_columns
from .roles import Arm, arm_mask, comparator_of, native_of

DEFAULT_QUANTILES = (0.1, 0.5, 0.9)


def _label(q: float) -> str:
    return "median" if q == 0.5 else f"p{round(q * 100):d}"


def emission_timing(by_record: pd.DataFrame, quantiles: Sequence[float] = DEFAULT_QUANTILES) -> pd.DataFrame:
    """One row per cell with emission and length quantiles and failure rates.

    Columns: key columns, ``n``; ``emission_p10``/``_median``/``_p90`` of E (the first budget from which the
    prefix reads the completed trace's answer, the sub-CDF's E) over traces that emit a parseable
    answer (numpy's linear-interpolation quantiles; NaN when none emits); ``never_emission`` (share with
    E = NaN within the cap); ``cap_hit`` (share stopped by the cap: ``finish_reason == "length"``, else
    ``n_tokens >= cap``; NaN where some trace's log does not say, ``finish_reason == "unknown"``); ``length_*``
    quantiles and ``length_mean`` of ``n_tokens``; ``accuracy`` (mean C).
    """
    require_columns(by_record, [*CELL_COLUMNS, "emission", "n_tokens", "correct"], what="by_record")
    qs = [float(q) for q in quantiles]
    if any(not 0 <= q <= 1 for q in qs):
        raise BadInputError(f"quantiles must lie in [0, 1], got {qs}")
    keys = [*CELL_COLUMNS] + [c for c in SETTING_COLUMNS if c in by_record.columns]
    rows = []
    for key, part in by_record.groupby(keys, dropna=False, sort=True):
        em = part["emission"].to_numpy(dtype=np.float64)
        length = part["n_tokens"].to_numpy(dtype=np.float64)
        emitted = em[~np.isnan(em)]
        if "finish_reason" in part.columns:
            cap_hit = (part["finish_reason"] == "length").to_numpy()
        elif "cap" in part.columns:
            cap_hit = length >= part["cap"].to_numpy(dtype=np.float64)
        else:
            raise BadInputError("by_record needs finish_reason or cap to count cap hits")
        row = dict(zip(keys, key, strict=True))
        row["n"] = len(part)
        for q in qs:
            row[f"emission_{_label(q)}"] = float(np.quantile(emitted, q)) if len(emitted) else float("nan")
        row["never_emission"] = float(np.isnan(em).mean())
        unknown = (part["finish_reason"] == UNKNOWN).to_numpy() if "finish_reason" in part.columns else []
        row["cap_hit"] = float("nan") if np.any(unknown) else float(cap_hit.mean())
        for q in qs:
            row[f"length_{_label(q)}"] = float(np.quantile(length, q))
        row["length_mean"] = float(length.mean())
        row["accuracy"] = float(part["correct"].to_numpy(dtype=np.float64).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def timing_contrast(
    timing: pd.DataFrame, native: Arm | None = None, *, translate: Arm | None = None, column: str = "emission_p10"
) -> pd.DataFrame:
    """Native minus translate ``column`` per (model, lang, ...): negative = native emits earlier (Table 2).
    ``native``/``translate``: one arm, or each task's (None: each task's own)."""
    require_columns(timing, [*CELL_COLUMNS, column], what="timing")
    native, translate = native_of(timing, native), comparator_of(timing, translate)
    keys = [k for k in timing.columns if k in ("model", "lang", *SETTING_COLUMNS) and k != "cap"]
    nat = timing[arm_mask(timing, native)][[*keys, column]]
    tr = timing[arm_mask(timing, translate)][[*keys, column]]
    both = nat.merge(tr, on=keys, suffixes=("_native", "_translate"))
    both[f"{column}_diff"] = both[f"{column}_native"] - both[f"{column}_translate"]
    return both
