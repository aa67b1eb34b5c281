"""Shared output for subcommands: rows of plain dicts as a table, JSON, CSV, Markdown or LaTeX."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence

import click
import pandas as pd

from .._io import atomic_write_text
from ..errors import MindcapError

FORMATS = ("table", "json", "csv", "md", "latex")


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _clean(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def to_json(data) -> str:
    """JSON text (NaN becomes null) with a trailing newline."""
    if isinstance(data, list):
        data = [{k: _clean(v) for k, v in row.items()} if isinstance(row, dict) else row for row in data]
    return json.dumps(data, ensure_ascii=False, indent=2, default=_json_default) + "\n"


def render(rows: Sequence[dict], fmt: str, title: str | None = None, floatfmt: str = ".4f") -> str:
    """Render rows (all with the same keys) in one of :data:`FORMATS`."""
    if fmt == "json":
        return to_json(list(rows))
    frame = pd.DataFrame(list(rows))
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "md":
        return frame.to_markdown(index=False, floatfmt=floatfmt) + "\n"
    if fmt == "latex":
        return frame.to_latex(index=False, float_format=lambda x: format(x, floatfmt))
    if fmt == "table":
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_lines=False)
        for col in frame.columns:
            table.add_column(str(col), justify="right" if pd.api.types.is_numeric_dtype(frame[col]) else "left")
        for row in frame.itertuples(index=False):
            table.add_row(*(format(v, floatfmt) if isinstance(v, float) else str(v) for v in row))
        buf = io.StringIO()
        Console(file=buf, width=max(100, 12 * len(frame.columns)), force_terminal=False).print(table)
        return buf.getvalue()
    raise MindcapError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def emit(text: str, out: str | None) -> None:
    """Print ``text``, or write it atomically to ``out`` and say where."""
    if out:
        atomic_write_text(out, text)
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False)
