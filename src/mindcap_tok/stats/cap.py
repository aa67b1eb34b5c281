"""What the data say beyond a cell's cap.

A trace is **cut by the cap** iff its ``finish_reason`` is ``"length"``; its cut status is **unknown** iff it is
``"unknown"`` (the log did not say, e.g. a harness that logged only the text after the thought); otherwise it
completed. At a budget above the cap nothing was decoded, so acc(B) there is not observed: it equals acc(cap)
where no trace was cut (the decode is whole), and otherwise lies in [acc(cap), acc(cap) + c], c the share of
traces cut by the cap (every cut trace could still have come out right, or none). Unknown traces count as cut:
the widest honest bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ..store import CELL_COLUMNS, SETTING_COLUMNS

#: the finish reason of a trace the cap cut
CUT = "length"
#: the finish reason of a trace whose log does not say whether the cap cut it
UNKNOWN = "unknown"
#: ``cap_status`` of a sweep row: floor(r·B) and B within the cap (measured)
WITHIN = "within"
#: ``cap_status``: beyond the cap, but no trace was cut, so the accuracy there is acc(cap) exactly
EXACT = "exact beyond cap"
#: ``cap_status``: beyond the cap with traces cut (or of unknown status): no point estimate, only bounds
BOUNDS = "bounds only"


def cap_of(value: object) -> int | None:
    """A cell's cap as an integer; None where the cell has none (a missing value)."""
    if value is None or pd.isna(value):
        return None
    return int(value)  # type: ignore[call-overload]  # a number read from a cap column


def cut_mask(by_record: pd.DataFrame) -> np.ndarray:
    """Per record: cut by its cap, or of unknown cut status (both count as cut for a bound). Without a
    ``finish_reason`` column a record reaching its cap counts as cut; without caps either, every record does."""
    if "finish_reason" in by_record.columns:
        return by_record["finish_reason"].isin([CUT, UNKNOWN]).to_numpy()
    if "n_tokens" in by_record.columns and "cap" in by_record.columns:
        return by_record["n_tokens"].to_numpy() >= by_record["cap"].to_numpy()
    return np.ones(len(by_record), dtype=bool)


def cut_shares(by_record: pd.DataFrame) -> pd.DataFrame:
    """Per cell (its cell and setting columns): ``cut_share`` (share of records cut by the cap or of unknown cut
    status: the c of the bounds) and ``unknown_share`` (of unknown status alone), as fractions."""
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in by_record.columns]
    finish = by_record["finish_reason"] if "finish_reason" in by_record.columns else None
    frame = by_record[keys].assign(
        cut_share=cut_mask(by_record).astype(np.float64),
        unknown_share=(finish == UNKNOWN).to_numpy(dtype=np.float64) if finish is not None else 0.0,
    )
    return frame.groupby(keys, dropna=False, sort=False).mean().reset_index()


def cell_cut_share(cells: pd.DataFrame, shares: pd.DataFrame | None) -> np.ndarray:
    """``cut_share`` of each row of ``cells`` (a grid's cells) from :func:`cut_shares`; 1 (nothing known: every
    trace may have been cut) where ``shares`` is None or holds no row of that cell."""
    if shares is None:
        return np.ones(len(cells))
    on = [c for c in cells.columns if c in shares.columns]
    found = dict(zip(_keys(shares, on), shares["cut_share"].to_numpy(dtype=np.float64), strict=True))
    return np.array([found.get(k, 1.0) for k in _keys(cells, on)], dtype=np.float64)


def _value(v: object) -> str:
    """A key value as text, so a cell read from scores and one read from records match whatever their dtypes."""
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _keys(frame: pd.DataFrame, on: list[str]) -> list[tuple[str, ...]]:
    return list(zip(*(frame[c].map(_value) for c in on), strict=True)) if on else [()] * len(frame)


def all_beyond_caps(budgets: Iterable[int], caps: Sequence[float]) -> str | None:
    """One warning line when every budget exceeds every cap of the records (their scores then repeat the
    accuracy at the cap), else None."""
    known = [int(c) for c in caps if not pd.isna(c)]
    wanted = sorted({int(b) for b in budgets})
    if not known or not wanted or wanted[0] <= max(known):
        return None
    return (
        f"every budget ({', '.join(map(str, wanted))}) exceeds every cap of the records (largest: {max(known)}): "
        "nothing was decoded there, so each row repeats the accuracy at the cap"
    )
