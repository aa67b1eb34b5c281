"""The one table renderer: rows as a plain (rich) table, JSON, CSV, Markdown or LaTeX, with one number format.

It sits at the bottom of the package (layer 0) so that ``cli``, ``report`` and ``audits`` all render through it:
a missing value reads ``—`` in tables and Markdown, ``---`` in LaTeX, blank in CSV and ``null`` in JSON; floats
are formatted by :func:`format_cell` with the caller's ``floatfmt``; LaTeX escapes its special characters.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._json import dumps_strict
from .choices import FORMATS as FORMATS
from .errors import BadInputError

if TYPE_CHECKING:  # pandas is imported where a table is rendered: every command imports FORMATS at start-up
    import pandas as pd

#: how a missing value shows in a table (JSON has null, CSV an empty field)
MISSING = "—"
#: the default number format of a float cell
FLOATFMT = ".4f"


def is_missing(value) -> bool:
    """None, NaN, ±inf, pd.NA or NaT: what strict JSON writes as null."""
    import pandas as pd

    if isinstance(value, float):
        return not math.isfinite(value)
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def format_cell(value, floatfmt: str = FLOATFMT) -> str:
    """One cell as text: missing values as :data:`MISSING` (never ``nan``), floats by ``floatfmt``."""
    import numpy as np  # here, not at the top: every command imports FORMATS at start-up (via choices)

    if isinstance(value, np.generic):
        value = value.item()
    if is_missing(value):
        return MISSING
    return format(value, floatfmt) if isinstance(value, float) else str(value)


def _right_aligned(column: pd.Series) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def markdown_table(frame: pd.DataFrame, floatfmt: str = FLOATFMT) -> str:
    """``frame`` as a GitHub pipe table (no index): cells by :func:`format_cell` (``|`` escaped, one line each),
    numeric columns aligned on the decimal point; an empty frame reads ``(empty)``."""
    if frame.empty:
        return "(empty)"
    cells = frame.astype(object).map(lambda v: format_cell(v, floatfmt).replace("|", "\\|").replace("\n", " "))
    align = tuple("decimal" if _right_aligned(frame[c]) else "left" for c in frame.columns)
    return cells.to_markdown(index=False, disable_numparse=True, colalign=align)


def _plain_table(frame: pd.DataFrame, title: str | None, floatfmt: str) -> str:
    import pandas as pd
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in frame.columns:
        table.add_column(str(col), justify="right" if pd.api.types.is_numeric_dtype(frame[col]) else "left")
    cells = [[format_cell(v, floatfmt) for v in row] for row in frame.itertuples(index=False)]
    for row in cells:
        table.add_row(*row)
    # wide enough that no header or value is cut (rich would end it with "…")
    widths = [max([len(str(c)), *(len(r[i]) for r in cells)]) + 3 for i, c in enumerate(frame.columns)]
    buf = io.StringIO()
    Console(file=buf, width=max(100, sum(widths) + 1), force_terminal=False).print(table)
    return buf.getvalue()


def _integer_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Float columns that are integers with missing values (pandas turns an int column with a None into floats:
    an ``announced`` budget read ``256.0000``) as nullable integers, so they print ``256`` and ``—``."""
    import numpy as np

    out = frame.copy()
    for col in frame.columns:
        values = frame[col]
        if values.dtype.kind != "f" or not values.isna().any():
            continue
        present = values.dropna().to_numpy()
        if np.all(np.isfinite(present)) and np.all(present == np.round(present)) and np.all(np.abs(present) < 2**53):
            out[col] = values.astype("Int64")
    return out


#: the non-ASCII symbols this package's tables print, as pdflatex reads them (written by hand: pandas escapes
#: only LaTeX's special characters, and no converter is among the dependencies)
_LATEX_SYMBOLS = str.maketrans(
    {
        "→": r"$\rightarrow$",
        "·": r"$\cdot$",
        "×": r"$\times$",
        "−": "-",
        "–": "--",
        "—": "---",
        "…": r"\ldots{}",
        "≤": r"$\leq$",
        "≥": r"$\geq$",
        "±": r"$\pm$",
        "Δ": r"$\Delta$",
        "ρ": r"$\rho$",
        "≈": r"$\approx$",
    }
)


def render(rows: Sequence[dict], fmt: str, title: str | None = None, floatfmt: str = FLOATFMT) -> str:
    """Render rows (all with the same keys) in one of :data:`FORMATS`; ``title`` heads the plain table only.

    LaTeX escapes ``_ % & # $ { } ~ ^ \\`` in headers and cells, so ``tha_Thai`` reads ``tha\\_Thai``, and writes
    the symbols the tables use (→, ·, Δ, ≤, …) as LaTeX commands, so the output is ASCII that pdflatex reads.
    """
    import pandas as pd

    if fmt == "json":
        return dumps_strict(list(rows)) + "\n"
    frame = _integer_columns(pd.DataFrame(list(rows)))
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "md":
        return markdown_table(frame, floatfmt) + "\n"
    if fmt == "latex":
        text = frame.to_latex(index=False, float_format=lambda x: format(x, floatfmt), na_rep="---", escape=True)
        return text.translate(_LATEX_SYMBOLS)
    if fmt == "table":
        return _plain_table(frame, title, floatfmt)
    raise BadInputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
