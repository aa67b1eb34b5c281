"""The ledger store: a folder of Parquet shards, hive-partitioned by cell, plus a manifest of counts and hashes.

Layout::

    DIR/_manifest.json
    DIR/model=qwen3-8b/arm=native/lang=tha_Thai/part-000003-1f2e3d4c.parquet

Shards are immutable: an append adds new shards and never rewrites old ones. The manifest is the commit
point. An append writes each new shard under a hidden ``.pending`` name, then writes the manifest atomically,
then renames the shards into place; a crash before the manifest leaves only hidden files (ignored by every
reader, deleted by the next append), a crash after it is rolled forward. ``verify`` checks every listed shard
against its size, SHA-256, row count and schema, and reports shards that nobody listed.

Readers: ``pandas.read_parquet(DIR)`` and ``pyarrow.parquet.read_table(DIR)`` (hive partitions merged with
the dictionary-encoded cell columns stored inside each shard), ``pyarrow.dataset.dataset(DIR)`` and
``datasets.load_dataset("parquet", data_files="DIR/**/*.parquet")`` (cell columns read from the files).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._io import atomic_write_text
from ..data.languages import resolve_language
from ..errors import MindcapError
from ..tokenizer import ResolvedTokenizer, load_tokenizer
from .schema import (
    CELL_COLUMNS,
    KEY_COLUMNS,
    SCHEMA,
    SETTING_COLUMNS,
    STORAGE_SCHEMA,
    Records,
    check_token_ids,
    describe,
    duplicate_row,
    to_canonical,
    to_storage,
    validate_records,
)

MANIFEST = "_manifest.json"
FORMAT = "mindcap-tok ledger"
VERSION = 1
_PENDING = ".pending"


@dataclass(frozen=True)
class ShardInfo:
    """One committed shard as listed in the manifest."""

    path: str
    model: str
    arm: str
    lang: str
    rows: int
    bytes: int
    sha256: str
    written: str

    @property
    def cell(self) -> tuple[str, str, str]:
        return (self.model, self.arm, self.lang)


@dataclass
class VerifyReport:
    """What ``verify`` found: ``ok`` is False when any committed data is missing, truncated or altered."""

    root: str
    shards: int
    rows: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _cell_dir(model: str, arm: str, lang: str) -> str:
    # the same URI escaping pyarrow's hive partitioning decodes (model names may hold "/")
    return "/".join(f"{k}={quote(v, safe='')}" for k, v in zip(CELL_COLUMNS, (model, arm, lang), strict=True))


def _cells(table: pa.Table) -> set[tuple[str, str, str]]:
    groups = table.select(list(CELL_COLUMNS)).group_by(list(CELL_COLUMNS)).aggregate([])
    return {(r["model"], r["arm"], r["lang"]) for r in groups.to_pylist()}


def key_tuples(table: pa.Table) -> list[tuple]:
    """Each row's ledger key, the values of ``KEY_COLUMNS`` in order."""
    return list(zip(*(table.column(c).to_pylist() for c in KEY_COLUMNS), strict=True))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Ledger:
    """A ledger folder. Reading an absent folder gives an error; the first append creates it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = Path(path)

    def __repr__(self) -> str:
        return f"Ledger({str(self.root)!r})"

    # -- manifest ---------------------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def manifest(self) -> dict:
        """The parsed manifest (an empty one when the folder holds no ledger yet)."""
        if not self.exists():
            return {"format": FORMAT, "version": VERSION, "shards": [], "tokenizers": {}, "rows": 0, "cells": {}}
        try:
            data = json.loads(self.manifest_path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise MindcapError(f"ledger manifest {self.manifest_path} is unreadable: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise MindcapError(f"{self.manifest_path} is not a mindcap-tok ledger manifest")
        if data.get("version", 0) > VERSION:
            raise MindcapError(
                f"{self.manifest_path} has format version {data['version']}; this mindcap-tok reads {VERSION}"
            )
        return data

    def _require(self) -> dict:
        if not self.exists():
            raise MindcapError(f"no ledger at {self.root} (no {MANIFEST}); create one with `mindcap-tok ledger import`")
        return self.manifest()

    def shards(self) -> list[ShardInfo]:
        """Committed shards, in the order they were written."""
        return [ShardInfo(**s) for s in self.manifest()["shards"]]

    def tokenizers(self) -> dict[str, dict]:
        """Tokenizer name -> {sha256, vocab_size} of the ids stored under that name."""
        return dict(self.manifest().get("tokenizers", {}))

    def _file(self, shard: ShardInfo) -> Path:
        final = self.root / shard.path
        if final.exists():
            return final
        pending = final.with_name("." + final.name + _PENDING)
        return pending if pending.exists() else final

    # -- writing ----------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _recover(self, manifest: dict) -> None:
        """Finish renames of committed shards; delete hidden shards that no manifest committed."""
        listed = set()
        for s in manifest["shards"]:
            final = self.root / s["path"]
            pending = final.with_name("." + final.name + _PENDING)
            listed.add(pending)
            if not final.exists() and pending.exists():
                os.replace(pending, final)
        for pending in self.root.glob(f"**/.part-*{_PENDING}"):
            if pending not in listed:
                pending.unlink(missing_ok=True)

    def _vocab_sizes(self, table: pa.Table, tokenizer, known: dict) -> tuple[dict[str, int], dict[str, dict]]:
        names = pc.unique(table.column("tokenizer")).to_pylist()
        if isinstance(tokenizer, ResolvedTokenizer):
            tokenizer = {n: tokenizer for n in names}
        tokenizer = dict(tokenizer or {})
        sizes, entries = {}, {}
        for name in names:
            tok = tokenizer.get(name)
            if tok is None:
                try:
                    tok = load_tokenizer(name)
                except MindcapError as exc:
                    raise MindcapError(
                        f"cannot check token ids of tokenizer {name!r}: {exc}; pass the tokenizer to append()"
                    ) from exc
            entry = {"sha256": tok.sha256, "vocab_size": tok.vocab_size}
            if name in known and known[name]["sha256"] != entry["sha256"]:
                raise MindcapError(
                    f"tokenizer {name!r} in these records has sha256 {entry['sha256'][:12]}…, but the ledger's ids "
                    f"under that name came from {known[name]['sha256'][:12]}…; use another tokenizer name"
                )
            sizes[name], entries[name] = tok.vocab_size, entry
        return sizes, entries

    def _existing_keys(self, cells: set[tuple[str, str, str]]) -> set[tuple]:
        keys: set[tuple] = set()
        for s in self.shards():
            if s.cell in cells:
                part = to_canonical(pq.read_table(self._file(s), columns=list(KEY_COLUMNS)))
                keys.update(key_tuples(part))
        return keys

    def append(
        self,
        records: Records,
        tokenizer: ResolvedTokenizer | Mapping[str, ResolvedTokenizer] | None = None,
        *,
        skip_existing: bool = False,
    ) -> list[ShardInfo]:
        """Validate ``records`` and add them as new shards (one per cell); return the shards written.

        ``tokenizer`` (one, or a mapping from the ``tokenizer`` column's names) checks the ids; by default
        each name is resolved with :func:`load_tokenizer`. A record whose key is already stored is an error,
        unless ``skip_existing`` (used to resume an interrupted import), which drops it instead.
        """
        with self._lock():
            manifest = self.manifest()
            self._recover(manifest)
            table = validate_records(records)
            sizes, tok_entries = self._vocab_sizes(table, tokenizer, manifest.get("tokenizers", {}))
            check_token_ids(table, sizes)
            cells = _cells(table)
            existing = self._existing_keys(cells)
            if existing:
                mask = np.array([key in existing for key in key_tuples(table)], dtype=bool)
                if mask.any():
                    if not skip_existing:
                        row = int(np.flatnonzero(mask)[0])
                        raise MindcapError(f"{describe(table, row)} is already in the ledger at {self.root}")
                    table = table.filter(pa.array(~mask))
            if table.num_rows == 0:
                return []
            written = self._write_shards(table, manifest)
            shards = manifest["shards"] + [s.__dict__ for s in written]
            tokenizers = {**manifest.get("tokenizers", {}), **tok_entries}
            self._commit(manifest, shards, tokenizers)
            for s in written:
                final = self.root / s.path
                os.replace(final.with_name("." + final.name + _PENDING), final)
            return written

    def _write_shards(self, table: pa.Table, manifest: dict) -> list[ShardInfo]:
        frame = table.select(list(CELL_COLUMNS)).to_pandas()
        groups = frame.groupby(list(CELL_COLUMNS), sort=True).indices
        seq = len(manifest["shards"])
        written = []
        for (model, arm, lang), rows in groups.items():
            part = to_storage(table.take(pa.array(rows)))
            sink = pa.BufferOutputStream()
            pq.write_table(part, sink, compression="zstd")
            data = sink.getvalue().to_pybytes()
            rel = f"{_cell_dir(model, arm, lang)}/part-{seq:06d}-{uuid.uuid4().hex[:8]}.parquet"
            final = self.root / rel
            final.parent.mkdir(parents=True, exist_ok=True)
            pending = final.with_name("." + final.name + _PENDING)
            with open(pending, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            written.append(ShardInfo(rel, model, arm, lang, part.num_rows, len(data), _sha256(data), _now()))
            seq += 1
        return written

    def _commit(self, manifest: dict, shards: list[dict], tokenizers: dict) -> None:
        cells: dict[str, int] = {}
        for s in shards:
            key = "/".join((s["model"], s["arm"], s["lang"]))
            cells[key] = cells.get(key, 0) + s["rows"]
        out = {
            "format": FORMAT,
            "version": VERSION,
            "created": manifest.get("created", _now()),
            "updated": _now(),
            "rows": sum(s["rows"] for s in shards),
            "cells": dict(sorted(cells.items())),
            "tokenizers": tokenizers,
            "shards": shards,
        }
        atomic_write_text(self.manifest_path, json.dumps(out, indent=1, ensure_ascii=False) + "\n")

    # -- reading ----------------------------------------------------------------------------------------------
    def read(
        self,
        model: str | Sequence[str] | None = None,
        arm: str | Sequence[str] | None = None,
        lang: str | Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Records of the matching cells (each filter: one value, several, or ``None`` for all) as a table.

        Only the shards of the selected cells are opened, so reading one cell of a large ledger is cheap.
        """
        self._require()
        if columns is not None:
            unknown = [c for c in columns if c not in SCHEMA.names]
            if unknown:
                raise MindcapError(
                    f"unknown ledger column(s) {', '.join(unknown)}; columns are {', '.join(SCHEMA.names)}"
                )
        langs = None if lang is None else [resolve_language(x) for x in ([lang] if isinstance(lang, str) else lang)]
        wanted = [None if v is None else ({v} if isinstance(v, str) else set(v)) for v in (model, arm, langs)]
        tables = []
        for s in self.shards():
            if all(w is None or v in w for w, v in zip(wanted, s.cell, strict=True)):
                path = self._file(s)
                try:
                    tables.append(pq.read_table(path, columns=list(columns) if columns is not None else None))
                except (OSError, pa.ArrowException) as exc:
                    msg = f"cannot read ledger shard {path}: {exc} (run `mindcap-tok ledger verify`)"
                    raise MindcapError(msg) from exc
        schema = STORAGE_SCHEMA if columns is None else pa.schema([STORAGE_SCHEMA.field(c) for c in columns])
        if not tables:
            return to_canonical(schema.empty_table())
        return to_canonical(pa.concat_tables([t.cast(schema) for t in tables]))

    def to_pandas(self, *args, **kwargs) -> pd.DataFrame:
        """:meth:`read` as a pandas DataFrame."""
        return self.read(*args, **kwargs).to_pandas()

    def __len__(self) -> int:
        return int(self.manifest().get("rows", 0))

    def info(self) -> pd.DataFrame:
        """One row per cell and settings: records, items, samples per item, cap-hit rate, length quantiles."""
        self._require()
        cols = [*CELL_COLUMNS, *SETTING_COLUMNS, "item", "finish_reason", "n_tokens", "retokenized", "tokenizer"]
        frame = self.read(columns=cols).to_pandas()
        keys = [*CELL_COLUMNS, *SETTING_COLUMNS]
        out_cols = [
            *keys,
            "records",
            "items",
            "samples_per_item",
            "cap_hit",
            "len_p10",
            "len_p50",
            "len_p90",
            "len_max",
            "retokenized",
            "tokenizer",
        ]
        if frame.empty:
            return pd.DataFrame(columns=out_cols)
        grouped = frame.groupby(keys, dropna=False, sort=True)
        lengths = grouped["n_tokens"]
        out = pd.DataFrame(
            {
                "records": grouped.size(),
                "items": grouped["item"].nunique(),
                "samples_per_item": grouped["item"].agg(lambda s: s.value_counts().median()),
                "cap_hit": grouped["finish_reason"].agg(lambda s: float((s == "length").mean())),
                "len_p10": lengths.quantile(0.1),
                "len_p50": lengths.quantile(0.5),
                "len_p90": lengths.quantile(0.9),
                "len_max": lengths.max(),
                "retokenized": grouped["retokenized"].mean(),
                "tokenizer": grouped["tokenizer"].agg(lambda s: ",".join(sorted(set(s)))),
            }
        ).reset_index()
        return out[out_cols]

    # -- checking ---------------------------------------------------------------------------------------------
    def verify(self, check_keys: bool = True) -> VerifyReport:
        """Check every committed shard's presence, size, SHA-256, row count, schema and cell; report strays."""
        manifest = self._require()
        shards = self.shards()
        report = VerifyReport(str(self.root), len(shards), int(manifest.get("rows", 0)))
        if sum(s.rows for s in shards) != report.rows:
            listed_rows = sum(s.rows for s in shards)
            report.problems.append(f"manifest says {report.rows} rows but its shards list {listed_rows}")
        listed = set()
        keys = []
        for s in shards:
            path = self._file(s)
            listed.add((self.root / s.path).resolve())
            if not path.exists():
                report.problems.append(f"{s.path}: missing")
                continue
            if path.name.endswith(_PENDING):
                report.notes.append(f"{s.path}: committed but not yet renamed (the next append finishes it)")
            data = path.read_bytes()
            if len(data) != s.bytes:
                report.problems.append(f"{s.path}: {len(data)} bytes, manifest says {s.bytes} (truncated or altered)")
                continue
            if _sha256(data) != s.sha256:
                report.problems.append(f"{s.path}: content hash differs from the manifest (altered)")
                continue
            try:
                table = pq.read_table(pa.BufferReader(data))
            except (OSError, pa.ArrowException) as exc:
                report.problems.append(f"{s.path}: not readable as Parquet: {exc}")
                continue
            if table.num_rows != s.rows:
                report.problems.append(f"{s.path}: {table.num_rows} rows, manifest says {s.rows}")
            if not table.schema.equals(STORAGE_SCHEMA):
                report.problems.append(f"{s.path}: schema differs from the ledger schema")
                continue
            cells = _cells(to_canonical(table))
            if cells - {s.cell}:
                report.problems.append(f"{s.path}: holds records of cell(s) {sorted(cells - {s.cell})}, not {s.cell}")
            if check_keys:
                keys.append(to_canonical(table.select(list(KEY_COLUMNS))))
        for path in self.root.glob("**/*.parquet"):
            if path.resolve() not in listed:
                report.problems.append(f"{path.relative_to(self.root)}: shard not listed in the manifest")
        for path in self.root.glob(f"**/.part-*{_PENDING}"):
            if path.with_name(path.name[1 : -len(_PENDING)]).resolve() not in listed:
                report.notes.append(
                    f"{path.relative_to(self.root)}: left by an interrupted append (ignored; next append removes it)"
                )
        if keys:
            allkeys = pa.concat_tables(keys)
            dup = duplicate_row(allkeys)
            if dup is not None:
                report.problems.append(f"{describe(allkeys, dup[1])} is stored twice")
        return report
