"""The failure tail decomposed per cell: what share of traces is correct, wrong, or fails in which way."""

from __future__ import annotations

import pandas as pd

from ..scoring import OUTCOMES
from ..store import CELL_COLUMNS, SETTING_COLUMNS
from .grid import require_columns


def failure_tail(by_record: pd.DataFrame) -> pd.DataFrame:
    """Per cell (and settings): ``n`` and the share of each outcome (:data:`~mindcap_tok.scoring.outcomes.OUTCOMES`,
    mutually exclusive by a stated precedence, so a row's shares sum to 1), as fractions."""
    require_columns(by_record, [*CELL_COLUMNS, "outcome"], what="by_record")
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in by_record.columns]
    rows = []
    for key, part in by_record.groupby(keys, sort=True, dropna=False):
        counts = part["outcome"].value_counts()
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": len(part),
                **{name: int(counts.get(name, 0)) / len(part) for name in OUTCOMES},
            }
        )
    return pd.DataFrame(rows, columns=[*keys, "n", *OUTCOMES])
