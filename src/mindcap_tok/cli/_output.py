"""Shared output for subcommands: :func:`~mindcap_tok._tables.render` for rows, strict JSON, and where it goes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import click

from .._io import atomic_write_text, check_output_file
from .._json import dumps_strict
from .._tables import FLOATFMT, FORMATS
from .._tables import render as render_rows
from ..errors import BadInputError, first_line

__all__ = ["FORMATS", "emit", "render", "table_width", "to_json", "writing"]

#: where the running command keeps ``--wide`` (:func:`~._options.format_option`)
WIDE = "mindcap.wide"


def table_width() -> int | None:
    """The most characters a plain table's line may take: the terminal's width where the table goes to a
    terminal, ``COLUMNS`` where that is set and stdout is not one; None (every column) with ``--wide``, with
    ``--out FILE`` and on a pipe without ``COLUMNS`` (the plain text keeps every column)."""
    import os
    import shutil
    import sys

    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        if ctx.meta.get(WIDE):
            return None
        to_file = any(p.name == "out" and "--out" in getattr(p, "opts", ()) for p in ctx.command.params)
        if to_file and ctx.params.get("out"):
            return None
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def render(rows, fmt: str, title: str | None = None, floatfmt: str = FLOATFMT, priority: Sequence[str] = ()) -> str:
    """:func:`~mindcap_tok._tables.render` with a plain table fitted to :func:`table_width` (``priority``: the
    columns kept first after the key columns)."""
    width = table_width() if fmt == "table" else None
    return render_rows(rows, fmt, title, floatfmt, width=width, priority=priority)


def to_json(data) -> str:
    """Strict JSON text (missing values as null, at any depth) with a trailing newline."""
    return dumps_strict(data) + "\n"


@contextmanager
def writing(out: str | None) -> Iterator[None]:
    """Turn an ``OSError`` while writing the output file ``out`` (``None``: standard output) into one line naming
    it and the reason (disk full, no permission, a file too large). A file is written atomically, so an earlier
    file of that name is left as it was."""
    try:
        yield
    except BrokenPipeError:  # the reader stopped reading (``| head``): not an error of this command
        raise
    except OSError as exc:
        reason = exc.strerror or first_line(exc)
        if out is None:
            raise BadInputError(f"cannot write the output to standard output: {reason}") from exc
        raise BadInputError(f"cannot write {out}: {reason}; {out} was not written or changed") from exc


def emit(text: str, out: str | None) -> None:
    """Print ``text``, or write it atomically to ``out`` (never a folder, never inside a ledger) and say where."""
    if out:
        target = check_output_file(out)
        with writing(out):
            atomic_write_text(target, text)
        click.echo(f"wrote {out}", err=True)
    else:
        with writing(None):
            click.echo(text, nl=False)
