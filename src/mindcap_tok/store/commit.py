"""How the package commits Parquet files to a folder with a hashed manifest: the ledger's shards, a round trip's
hops and judge rounds, ``render``'s waves.

A commit writes each new file under a hidden pending name (``DIR/a/.f.parquet.pending``, flushed to disk), then
the manifest atomically (a temporary file renamed over it), then renames the files into place. The manifest is the
commit point: a crash before it leaves only hidden files, which readers ignore and the next writer deletes; a crash
after it is rolled forward (:func:`roll_forward`), and :func:`committed_path` finds a listed file under either
name meanwhile. A reader checks each file against the manifest's size and SHA-256 (:func:`checked_bytes`) and its
row count.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._io import atomic_write_text, regular_file
from ..errors import DamagedDataError, first_line

PENDING = ".pending"


@dataclass(frozen=True)
class Encoded:
    """A table as the bytes of a Parquet file, with what a manifest lists of it."""

    data: bytes
    rows: int
    sha256: str

    @property
    def size(self) -> int:
        return len(self.data)


def sha256(data: bytes | pa.Buffer) -> str:
    """The SHA-256 of ``data`` as manifests list it (64 lowercase hex digits)."""
    return hashlib.sha256(data).hexdigest()


def utc_now() -> str:
    """The UTC time, as manifests record it."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def encode_table(table: pa.Table, **options: Any) -> Encoded:
    """``table`` as a zstd-compressed Parquet file (``options``: more :func:`pyarrow.parquet.write_table` keywords)."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", **options)
    data = sink.getvalue()
    return Encoded(data, table.num_rows, sha256(data))


def pending_path(final: Path) -> Path:
    """The hidden name a file is written under until its manifest commits it."""
    return final.with_name("." + final.name + PENDING)


def stage_file(final: Path, data: bytes) -> None:
    """Write ``data`` under ``final``'s pending name (its folder made when missing), flushed to disk; a write that
    fails removes what it began."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(pending_path(final), "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        discard([final])
        raise


def discard(finals: Iterable[Path]) -> None:
    """Remove the pending files of uncommitted files (``finals``: their final paths); what cannot be removed now,
    the next writer removes."""
    for final in finals:
        with contextlib.suppress(OSError):
            pending_path(final).unlink(missing_ok=True)


def commit_files(manifest: Path, text: str, *, finals: Sequence[Path]) -> None:
    """Write the manifest ``text`` atomically, then rename the staged ``finals`` into place; when the manifest
    cannot be written (a full disk, Ctrl-C) the staged files go too and the folder is as it was."""
    try:
        atomic_write_text(manifest, text)
    except BaseException:
        discard(finals)
        raise
    for final in finals:
        os.replace(pending_path(final), final)


def roll_forward(finals: Iterable[Path], strays: Iterable[Path] = ()) -> None:
    """Finish the renames of committed files (``finals``: every file the manifest lists) and delete the pending
    files among ``strays`` that no manifest committed."""
    listed = set()
    for final in finals:
        pending = pending_path(final)
        listed.add(pending)
        if not final.exists() and pending.exists():
            os.replace(pending, final)
    for pending in strays:
        if pending not in listed:
            pending.unlink(missing_ok=True)


def committed_path(final: Path) -> Path:
    """Where a listed file is now: its final name, or its pending one between a commit and its renames."""
    if final.exists():
        return final
    pending = pending_path(final)
    return pending if pending.exists() else final


def checked_bytes(path: Path, what: str, *, size: int, digest: str, hint: str = "") -> pa.Buffer:
    """The bytes of the file at ``path``, checked against the size and SHA-256 its manifest lists; a missing,
    truncated or altered file is a :class:`DamagedDataError` naming it (``what``: "ledger shard"; ``hint``: what
    to run).

    Arrow memory (not a Python ``bytes``) because Arrow's reader threads may drop the last reference to the
    buffer: a Python object would need the GIL then, which aborts the process (SIGABRT, "terminate called without
    an active exception") when that happens while the interpreter exits.
    """
    tail = f" {hint}" if hint else ""
    try:
        with pa.OSFile(str(regular_file(path, what))) as fh:
            data = fh.read_buffer()
    except (OSError, pa.ArrowException) as exc:
        raise DamagedDataError(f"cannot read {what} {path}: {why(exc)}{tail}", path=path) from exc
    if data.size != size:
        msg = f"{data.size} bytes, the manifest says {size} (truncated or altered)"
        raise DamagedDataError(f"cannot read {what} {path}: {msg}{tail}", path=path)
    if sha256(data) != digest:
        msg = "content differs from the manifest's SHA-256"
        raise DamagedDataError(f"cannot read {what} {path}: {msg}{tail}", path=path)
    return data


def why(exc: BaseException) -> str:
    """An exception's first line with control characters escaped (Arrow's messages may quote raw bytes)."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in first_line(exc))
