"""Determinism: does the serving stack give the same token ids for the same request, and for a shorter cap?

Reads the records of ``design = "determinism"`` generation jobs (see :mod:`mindcap_tok.generation.jobs`): per item,
``repeats`` identical requests (same prompt, seed and cap; repeat ``j`` stored as ``sample = j``) at every cap,
and the caps' decodes sharing one seed with the long decode (the largest cap of the item).

- **repeat identity**: a repeat group is the records of one (cell, cap, item); it is *identical* when all its
  decodes have the same output ids, bit for bit. Share of identical groups per cell.
- **prefix identity**: for every cap below the long cap, the first repeat (``sample`` 0) of the capped decode
  is compared with the first ``cap`` ids of the long decode's first repeat; share equal per cell.

Each share comes with its counts and a Wilson score interval (``level``, default 95%), and for the pairs that
differ, where the first divergence falls: the token position (0-based; a decode that is a strict prefix of the
other diverges at its own length) at the 10th, 50th and 90th percentiles (numpy's linear quantiles). With a
``seed`` column, records are also grouped by seed, so only decodes that share a seed are compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from scipy.stats import norm

from ..errors import BadInputError
from ..resample import check_level
from ..store import population_columns
from ._common import AuditResult, skipped

NAME = "determinism"
DESIGN = "determinism"
QUANTILES = (0.1, 0.5, 0.9)


def wilson_interval(successes: int, n: int, *, level: float = 0.95) -> tuple[float | None, float | None]:
    """The Wilson score interval of ``successes`` out of ``n`` at confidence ``level`` (``None`` when n = 0)."""
    check_level(level)
    if n == 0:
        return None, None
    if not 0 <= successes <= n:
        raise BadInputError(f"successes must be in 0..{n}, got {successes}")
    z = float(norm.ppf(1 - (1 - level) / 2))
    p, z2 = successes / n, z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # the bounds are exactly 0 and 1 at x = 0 and x = n (rounding would leave 0.9999999999999999)
    low = 0.0 if successes == 0 else max(0.0, float(center - half))
    return low, 1.0 if successes == n else min(1.0, float(center + half))


def first_divergence(a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray) -> int | None:
    """The first token position where ``a`` and ``b`` differ (the shorter length when one is a strict prefix of
    the other), or ``None`` when they are identical."""
    x, y = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    n = min(len(x), len(y))
    diff = np.flatnonzero(x[:n] != y[:n])
    if len(diff):
        return int(diff[0])
    return None if len(x) == len(y) else n


def _share(group: pd.DataFrame, level: float) -> dict:
    """Counts, share, Wilson interval and divergence quantiles of compared units (``same``, ``diverge`` columns)."""
    n, same = len(group), int(group["same"].sum())
    low, high = wilson_interval(same, n, level=level)
    where = group["diverge"].dropna().to_numpy(dtype=float)
    quant = np.quantile(where, QUANTILES) if len(where) else [None] * len(QUANTILES)
    out = {
        "n": n,
        "identical": same,
        "share": same / n if n else None,
        "ci_low": low,
        "ci_high": high,
        "diverged": n - same,
    }
    out.update(
        {f"diverge_p{int(q * 100)}": (None if v is None else float(v)) for q, v in zip(QUANTILES, quant, strict=True)}
    )
    return out


def _summarise(units: pd.DataFrame, by: list[str], level: float) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    if units.empty:
        return pd.DataFrame(rows)
    for key, group in units.groupby(by, dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key, strict=True)), **_share(group, level)})
    return pd.DataFrame(rows)


def determinism_audit(records: pa.Table, level: float = 0.95) -> AuditResult:
    """Repeat identity and prefix identity per cell (and per cap) of the determinism records; see the module docs.

    Skipped, with the reason, when ``records`` hold no determinism records."""
    if "design" not in records.column_names:
        return skipped(NAME, 'the records have no design column, so no design = "determinism" records')
    det = records.filter(pc.equal(records.column("design"), DESIGN))
    if det.num_rows == 0:
        return skipped(
            NAME,
            "no determinism records in the ledger: run a generation job with design = "
            '"determinism" (repeats, caps, long_cap)',
        )
    cell = [c for c in population_columns(det) if c not in ("design", "cap")]
    seed = ["seed"] if "seed" in det.column_names else []
    frame = det.select([*cell, "cap", "item", "sample", *seed]).to_pandas()
    ids = [np.asarray(x, dtype=np.int64) for x in det.column("output_ids").to_pylist()]
    frame["row"] = np.arange(len(frame))
    frame = frame.sort_values([*cell, *seed, "item", "cap", "sample"], kind="stable")

    repeats = []
    for key, group in frame.groupby([*cell, *seed, "cap", "item"], dropna=False, sort=True):
        if len(group) < 2:
            continue
        rows = group["row"].to_numpy()
        found = [first_divergence(ids[rows[0]], ids[r]) for r in rows[1:]]
        where = [w for w in found if w is not None]
        repeats.append(
            {
                **dict(zip([*cell, *seed, "cap", "item"], key, strict=True)),
                "repeats": len(group),
                "same": not where,
                "diverge": min(where) if where else None,
            }
        )
    prefix = []
    for key, group in frame.groupby([*cell, *seed, "item"], dropna=False, sort=True):
        first = group.drop_duplicates("cap", keep="first")  # each cap's lowest sample: the first repeat
        long_cap = int(first["cap"].max())
        long_ids = ids[int(first.loc[first["cap"] == long_cap, "row"].iloc[0])]
        for cap, row in zip(first["cap"], first["row"], strict=True):
            if cap == long_cap:
                continue
            diverge = first_divergence(ids[int(row)], long_ids[: int(cap)])
            prefix.append(
                {
                    **dict(zip([*cell, *seed, "item"], key, strict=True)),
                    "cap": int(cap),
                    "long_cap": long_cap,
                    "same": diverge is None,
                    "diverge": diverge,
                }
            )
    rep, pre = pd.DataFrame(repeats), pd.DataFrame(prefix)
    tables = {
        "repeats": _summarise(rep, cell, level),
        "repeats_by_cap": _summarise(rep, [*cell, "cap"], level),
        "prefix": _summarise(pre, cell, level),
        "prefix_by_cap": _summarise(pre, [*cell, "cap", "long_cap"], level),
    }
    pooled_rep = _share(rep, level) if len(rep) else _share(pd.DataFrame({"same": [], "diverge": []}), level)
    pooled_pre = _share(pre, level) if len(pre) else _share(pd.DataFrame({"same": [], "diverge": []}), level)
    summary = {
        "level": level,
        "interval": "wilson",
        "records": det.num_rows,
        "repeat_groups": pooled_rep["n"],
        "repeat_identical": pooled_rep["identical"],
        "repeat_share": pooled_rep["share"],
        "repeat_ci": [pooled_rep["ci_low"], pooled_rep["ci_high"]],
        "prefix_pairs": pooled_pre["n"],
        "prefix_identical": pooled_pre["identical"],
        "prefix_share": pooled_pre["share"],
        "prefix_ci": [pooled_pre["ci_low"], pooled_pre["ci_high"]],
        "positions": "0-based token position of the first divergence",
    }
    return AuditResult(NAME, tables=tables, summary=summary)
