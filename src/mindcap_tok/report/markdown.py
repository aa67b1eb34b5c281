"""Markdown tables that read well: numbers formatted, missing values as a dash (never ``nan``)."""

from __future__ import annotations

import pandas as pd

#: how a missing value shows in a table (JSON has null, CSV an empty field)
MISSING = "—"


def markdown_table(frame: pd.DataFrame, floatfmt: str = ".4f") -> str:
    """``frame`` as a GitHub Markdown table (no index); NaN and None show as :data:`MISSING`."""
    cells = frame.astype(object).where(frame.notna(), None)  # tabulate treats None, not NaN, as missing
    return cells.to_markdown(index=False, floatfmt=floatfmt, missingval=MISSING)
