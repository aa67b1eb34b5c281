"""Convert a ledger of an earlier format version (1-4) into the current one, once, into a new folder.

Earlier versions stored only some columns in some shards: version 1 shards (every record of the default task)
lack ``task`` and ``gold_text``; version 2 adds the manifest's ``text_mismatch``; version 3 shards of other tasks
carry ``task`` and ``gold_text``; version 4 shards carry each of :data:`_V4_OPTIONAL` only where some record's
value differs from its fill; the columns version 5 added (:data:`_V5_COLUMNS`) no earlier shard holds. This
module is the one place that knows those layouts: it reads each shard (checked against the old manifest's size
and SHA-256), fills in what the shard lacks with the value the readers of that version gave it (a version-5
column: its default), and writes every column.

The new ledger keeps every shard's path, cell and record order, the manifest's tokenizers, creation time and
text-mismatch marks (row numbers stay valid) and the generation job records (``jobs/``, now ``_jobs/``); it is
written in a hidden folder beside ``--out-dir``, verified, and renamed into place, so a failed migration leaves
nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .._io import check_folder_path, enclosing_ledger, regular_file
from ..errors import BadInputError, DamagedDataError
from ..tasks.load import DEFAULT_TASK
from . import commit
from .ledger import (
    FORMAT,
    JOBS,
    MANIFEST,
    TEXT_MISMATCH,
    VERSION,
    Ledger,
    ShardInfo,
    manifest_text,
    shard_info,
    shard_path_problem,
    stage_shard,
)
from .schema import CELL_COLUMNS, OPTIONAL_COLUMNS, STORAGE_SCHEMA, TASK_COLUMNS, to_canonical

#: the optional columns version 5 added: no earlier shard holds them
_V5_COLUMNS = ("output_partial", "reasoning_tokens", "token_limit", "reasoning_exhausted")
#: the optional columns a version-4 shard may carry
_V4_OPTIONAL = tuple(c for c in OPTIONAL_COLUMNS if c not in _V5_COLUMNS)
#: the shard layout of version 1 (records of the default task: no task columns, an integer gold)
_V1_SCHEMA = pa.schema(
    [
        f.with_nullable(False) if f.name == "gold" else f
        for f in STORAGE_SCHEMA
        if f.name not in TASK_COLUMNS and f.name not in OPTIONAL_COLUMNS
    ]
)
#: the layout of version 3 shards holding records of another task
_V3_SCHEMA = pa.schema([f for f in STORAGE_SCHEMA if f.name not in OPTIONAL_COLUMNS])


@dataclass(frozen=True)
class Migration:
    """What :func:`migrate` did: the ledgers, the format version converted from, and what the new one holds."""

    source: str
    out_dir: str
    from_version: int
    shards: int
    rows: int
    cells: int
    jobs: int


def old_layout(schema: pa.Schema) -> bool:
    """Whether ``schema`` is a shard layout some earlier version wrote: version 1's or version 3's, plus any of the
    version-4 columns in :data:`STORAGE_SCHEMA` order."""
    base = _V3_SCHEMA if "task" in schema.names else _V1_SCHEMA
    extra = [f for f in STORAGE_SCHEMA if f.name in _V4_OPTIONAL and f.name in schema.names]
    return schema.remove_metadata().equals(pa.schema([*base, *extra]))


def fill_old_shard(table: pa.Table) -> pa.Table:
    """An old shard's records with every column: the ones its layout lacks as that version's readers filled them
    (``task`` the default task, ``gold_text`` null, the optional columns their fills)."""
    n = table.num_rows
    for field in STORAGE_SCHEMA:
        if field.name in table.column_names:
            continue
        fill = DEFAULT_TASK if field.name == "task" else OPTIONAL_COLUMNS.get(field.name)
        col = pa.nulls(n, field.type) if fill is None else pa.repeat(pa.scalar(fill, field.type), n)
        table = table.append_column(field, col)
    return table.select(STORAGE_SCHEMA.names).cast(STORAGE_SCHEMA)


def _old_manifest(root: Path) -> tuple[dict[str, Any], list[ShardInfo]]:
    """The manifest of the ledger to convert and its shard entries; one line when it is not one of versions 1-4."""
    path = root / MANIFEST
    if not regular_file(path, "ledger manifest").is_file():
        raise BadInputError(f"no ledger at {root} (no {MANIFEST}); give the folder of the ledger to migrate")
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise DamagedDataError(f"ledger manifest {path} is unreadable: {exc}", path=path) from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DamagedDataError(f"{path} is not a mindcap-tok ledger manifest", path=path)
    version = data.get("version")
    if version == VERSION:
        raise BadInputError(f"ledger {root} is already format version {VERSION}; there is nothing to migrate")
    if type(version) is not int or not 1 <= version < VERSION:
        msg = f"format version {version!r} is not one this converts"
        raise DamagedDataError(f"ledger manifest {path}: {msg}", path=path)
    for key, kind in (("shards", list), ("tokenizers", dict), (TEXT_MISMATCH, dict)):
        if not isinstance(data.get(key, kind()), kind):
            raise DamagedDataError(f"ledger manifest {path}: {key} is not a {kind.__name__}", path=path)
    shards = [shard_info(e, i, manifest=path) for i, e in enumerate(data.get("shards", []))]
    for s in shards:
        problem = shard_path_problem(s.path)
        if problem is not None:
            raise DamagedDataError(f"ledger manifest {path}: shard path {s.path!r} {problem}", path=path)
    return data, shards


def _convert(root: Path, shard: ShardInfo) -> pa.Table:
    """One old shard, checked against its manifest entry, with every column (:data:`~.schema.SCHEMA` types)."""
    path = commit.committed_path(root / shard.path)
    hint = f"(run `mindcap-tok ledger verify` on a copy of {root} with this version's mindcap-tok)"
    data = commit.checked_bytes(path, "ledger shard", size=shard.bytes, digest=shard.sha256, hint=hint)
    try:
        table = pq.read_table(pa.BufferReader(data), pre_buffer=False)
    except (OSError, pa.ArrowException) as exc:
        raise DamagedDataError(f"cannot read ledger shard {path}: {commit.why(exc)}", path=path) from exc
    if not old_layout(table.schema):
        raise DamagedDataError(f"ledger shard {path}: its columns are no layout of an earlier version", path=path)
    if table.num_rows != shard.rows:
        raise DamagedDataError(f"ledger shard {path}: {table.num_rows} rows, the manifest says {shard.rows}", path=path)
    return to_canonical(fill_old_shard(table))


def migrate(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> Migration:
    """Convert the ledger at ``source`` (format version 1-4) into a new ledger at ``out_dir`` in the current format.

    ``out_dir`` must not exist. Every record, shard path, text-mismatch mark, tokenizer entry and generation job is
    kept; the old ledger is not changed. ``on_progress(done, total)`` is called after each shard. The new
    ledger is verified before it is renamed into place; on any error nothing is left at ``out_dir``.
    """
    root = check_folder_path(source, "ledger folder")
    target = check_folder_path(out_dir, "output folder")
    if os.path.lexists(target):
        raise BadInputError(f"output folder {target} already exists; give a new folder for the migrated ledger")
    inside = enclosing_ledger(target)
    if inside is not None:
        raise BadInputError(f"output folder {target} is inside the ledger {inside}; choose a folder outside it")
    with Ledger(root)._shared_lock():
        manifest, shards = _old_manifest(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
        os.mkdir(tmp)
        try:
            entries = []
            for done, shard in enumerate(shards, 1):
                table = _convert(root, shard)
                cell = (shard.model, shard.arm, shard.lang)
                entries.append(stage_shard(tmp, shard.path, table=table, cell=cell).__dict__)
                if on_progress is not None:
                    on_progress(done, len(shards))
            jobs = root / "jobs" if (root / "jobs").is_dir() else root / JOBS
            if jobs.is_dir():
                shutil.copytree(jobs, tmp / JOBS, symlinks=True)
            marks = dict(manifest.get(TEXT_MISMATCH, {}))  # row numbers stay valid: every shard keeps its order
            text = manifest_text(
                entries, dict(manifest.get("tokenizers", {})), marks=marks, created=manifest.get("created")
            )
            commit.commit_files(tmp / MANIFEST, text, finals=[tmp / e["path"] for e in entries])
            (tmp / ".lock").touch()
            report = Ledger(tmp).verify()
            if not report.ok:
                raise DamagedDataError(f"the migrated ledger does not verify: {report.problems[0]}", path=target)
            if os.path.lexists(target):
                raise BadInputError(f"output folder {target} appeared while migrating; left it alone")
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    rows = sum(e["rows"] for e in entries)
    cells = len({tuple(e[c] for c in CELL_COLUMNS) for e in entries})
    n_jobs = len(list((target / JOBS).glob("*.json"))) if (target / JOBS).is_dir() else 0
    return Migration(str(root), str(target), int(manifest["version"]), len(entries), rows, cells, n_jobs)
