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
#: numeric columns that name a row rather than measure it (an integer, or a float where some value is missing):
#: with the text and flag columns before the first measured one, they are the key columns a narrow table keeps
KEY_NUMBERS = frozenset({"budget", "cap", "announced", "hop", "item", "sample"})


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
    numeric columns aligned on the decimal point, whole-number columns with gaps as integers (``256``, not
    ``256.00``); an empty frame reads ``(empty)``."""
    if frame.empty:
        return "(empty)"
    frame = _integer_columns(frame)
    cells = frame.astype(object).map(lambda v: format_cell(v, floatfmt).replace("|", "\\|").replace("\n", " "))
    align = tuple("decimal" if _right_aligned(frame[c]) else "left" for c in frame.columns)
    return cells.to_markdown(index=False, disable_numparse=True, colalign=align)


def _cell_width(texts) -> int:
    return max((len(line) for t in texts for line in str(t).splitlines() or [""]), default=0)


def _full_width(frame: pd.DataFrame, cells: list[list[str]]) -> int:
    """The characters a line of ``frame``'s boxed table takes with every column at full width."""
    return sum(_cell_width([c, *(r[i] for r in cells)]) + 3 for i, c in enumerate(frame.columns)) + 1


def _plain_table(
    frame: pd.DataFrame,
    title: str | None,
    floatfmt: str,
    width: int | None = None,
    priority: Sequence[str] = (),
    keys: Sequence[str] = (),
) -> str:
    """``frame`` as a boxed text table (no colour codes). ``width``: the most characters a line may take; where
    the table is wider, columns with one value in every row move into the title, the leading run of ``keys``
    columns stays, then the ``priority`` columns and the others in order as they fit; those left out are named
    under the table, and text cells wrap. None: every column at its full width."""
    import pandas as pd
    from rich.console import Console
    from rich.table import Table

    cells = [[format_cell(v, floatfmt) for v in row] for row in frame.itertuples(index=False)]
    if width is not None and len(cells) > 1 and _full_width(frame, cells) > width:
        # too wide: a column holding one value in every row tells no two rows apart; it goes into the title
        same = [i for i in range(len(frame.columns)) if len({r[i] for r in cells}) == 1]
        if same and len(same) < len(frame.columns):
            note = ", ".join(f"{frame.columns[i]} {cells[0][i]}" for i in same)
            title = f"{title} (every row: {note})" if title else f"every row: {note}"
            frame = frame.drop(columns=[frame.columns[i] for i in same])
            cells = [[v for i, v in enumerate(r) if i not in same] for r in cells]
    # each column's full width: its text, one space either side and its border (rich's default box)
    need = [_cell_width([c, *(r[i] for r in cells)]) + 3 for i, c in enumerate(frame.columns)]
    shown = list(range(len(frame.columns)))
    if width is not None and sum(need) + 1 > width:
        lead = next((i for i, c in enumerate(frame.columns) if c not in keys), len(frame.columns)) or 1
        shown, used = list(range(lead)), sum(need[:lead]) + 1
        first = [list(frame.columns).index(c) for c in priority if c in frame.columns]
        for i in [*first, *range(lead, len(frame.columns))]:
            if i not in shown and used + need[i] <= width:
                shown.append(i)
                used += need[i]
        shown.sort()
    hidden = [str(c) for i, c in enumerate(frame.columns) if i not in shown]
    caption = f"{len(hidden)} more column(s) not shown: {', '.join(hidden)} (--wide shows all)" if hidden else None
    table = Table(title=title, caption=caption, show_lines=False)
    for i in shown:
        col = frame.columns[i]
        numeric = pd.api.types.is_numeric_dtype(frame[col])
        table.add_column(str(col), justify="right" if numeric else "left", no_wrap=numeric, overflow="fold")
    for row in cells:
        table.add_row(*(row[i] for i in shown))
    buf = io.StringIO()
    full = max(100, sum(need[i] for i in shown) + 1)  # wide enough that no header or value is cut
    Console(file=buf, width=full if width is None else min(full, width), force_terminal=False).print(table)
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


def render(
    rows: Sequence[dict],
    fmt: str,
    title: str | None = None,
    floatfmt: str = FLOATFMT,
    *,
    width: int | None = None,
    priority: Sequence[str] = (),
) -> str:
    """Render rows (all with the same keys) in one of :data:`FORMATS`; ``title`` heads the plain table only;
    ``width`` (characters, None: no limit) is the most a plain table's line may take, and ``priority`` the
    columns kept first after the key columns when it must leave some out.

    LaTeX escapes ``_ % & # $ { } ~ ^ \\`` in headers and cells, so ``tha_Thai`` reads ``tha\\_Thai``, and writes
    the symbols the tables use (→, ·, Δ, ≤, …) as LaTeX commands, so the output is ASCII that pdflatex reads.
    """
    import pandas as pd

    if fmt == "json":
        return dumps_strict(list(rows)) + "\n"
    raw = pd.DataFrame(list(rows))
    frame = _integer_columns(raw)
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "md":
        return markdown_table(frame, floatfmt) + "\n"
    if fmt == "latex":
        text = frame.to_latex(index=False, float_format=lambda x: format(x, floatfmt), na_rep="---", escape=True)
        return text.translate(_LATEX_SYMBOLS)
    if fmt == "table":
        keys = [c for c in raw.columns if c in KEY_NUMBERS or raw[c].dtype.kind not in "iufc"]
        return _plain_table(frame, title, floatfmt, width, priority, keys)
    raise BadInputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
