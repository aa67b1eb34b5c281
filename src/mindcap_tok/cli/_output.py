"""Shared output for subcommands: rows of plain dicts as a table, JSON, CSV, Markdown or LaTeX."""

from __future__ import annotations

import io
from collections.abc import Sequence

import click
import pandas as pd

from .._io import atomic_write_text, check_output_file
from .._json import dumps_strict
from ..errors import MindcapError
from ..report.markdown import MISSING, markdown_table

FORMATS = ("table", "json", "csv", "md", "latex")


def _cell(value, floatfmt: str) -> str:
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return MISSING
    return format(value, floatfmt) if isinstance(value, float) else str(value)


def to_json(data) -> str:
    """Strict JSON text (missing values as null, at any depth) with a trailing newline."""
    return dumps_strict(data) + "\n"


def render(rows: Sequence[dict], fmt: str, title: str | None = None, floatfmt: str = ".4f") -> str:
    """Render rows (all with the same keys) in one of :data:`FORMATS`; missing values are blank in CSV, ``—``
    in tables and Markdown, ``---`` in LaTeX and ``null`` in JSON."""
    if fmt == "json":
        return to_json(list(rows))
    frame = pd.DataFrame(list(rows))
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "md":
        return markdown_table(frame, floatfmt) + "\n"
    if fmt == "latex":
        return frame.to_latex(index=False, float_format=lambda x: format(x, floatfmt), na_rep="---")
    if fmt == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_lines=False)
        for col in frame.columns:
            table.add_column(str(col), justify="right" if pd.api.types.is_numeric_dtype(frame[col]) else "left")
        cells = [[_cell(v, floatfmt) for v in row] for row in frame.itertuples(index=False)]
        for row in cells:
            table.add_row(*row)
        # wide enough that no header or value is cut (rich would end it with "…")
        widths = [max([len(str(c)), *(len(r[i]) for r in cells)]) + 3 for i, c in enumerate(frame.columns)]
        buf = io.StringIO()
        Console(file=buf, width=max(100, sum(widths) + 1), force_terminal=False).print(table)
        return buf.getvalue()
    raise MindcapError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def emit(text: str, out: str | None) -> None:
    """Print ``text``, or write it atomically to ``out`` (never a folder, never inside a ledger) and say where."""
    if out:
        atomic_write_text(check_output_file(out), text)
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False)
