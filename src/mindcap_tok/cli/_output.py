"""Shared output for subcommands: :func:`~mindcap_tok._tables.render` for rows, strict JSON, and where it goes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from .._io import atomic_write_text, check_output_file
from .._json import dumps_strict
from .._tables import FORMATS, render
from ..errors import BadInputError, first_line

__all__ = ["FORMATS", "emit", "render", "to_json", "writing"]


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
