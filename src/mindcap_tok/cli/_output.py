"""Shared output for subcommands: :func:`~mindcap_tok._tables.render` for rows, strict JSON, and where it goes."""

from __future__ import annotations

import click

from .._io import atomic_write_text, check_output_file
from .._json import dumps_strict
from .._tables import FORMATS, render

__all__ = ["FORMATS", "emit", "render", "to_json"]


def to_json(data) -> str:
    """Strict JSON text (missing values as null, at any depth) with a trailing newline."""
    return dumps_strict(data) + "\n"


def emit(text: str, out: str | None) -> None:
    """Print ``text``, or write it atomically to ``out`` (never a folder, never inside a ledger) and say where."""
    if out:
        atomic_write_text(check_output_file(out), text)
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False)
