"""The ledger store: a folder of Parquet shards, hive-partitioned by cell, plus a manifest of counts and hashes.

Layout::

    DIR/_manifest.json
    DIR/model=qwen3-8b/arm=native/lang=tha_Thai/part-000003-1f2e3d4c.parquet

Shards are immutable: an append adds new shards and never rewrites old ones. The manifest is the commit
point (:mod:`.commit`): an append writes each new shard under a hidden ``.pending`` name, then writes the manifest
atomically, then renames the shards into place; a crash before the manifest leaves only hidden files (ignored by
every reader, deleted by the next append), a crash after it is rolled forward. ``verify`` checks every listed
shard against its size, SHA-256, row count and schema, and reports shards that nobody listed.

Appends hold an exclusive ``flock`` on ``DIR/.lock``; ``read`` and ``verify`` hold a shared one, so they see
either the ledger before an append or after it, never half of it (where the lock file cannot be opened, e.g.
a read-only copy without one, they read without a lock). Every read checks each shard it opens against the
manifest's size and SHA-256 (``Ledger(path, verify=False)`` skips that).

Readers: ``pandas.read_parquet(DIR)`` and ``pyarrow.parquet.read_table(DIR)`` (hive partitions merged with
the dictionary-encoded cell columns stored inside each shard), ``pyarrow.dataset.dataset(DIR)`` and
``datasets.load_dataset("parquet", data_files="DIR/**/*.parquet")`` (cell columns read from the files). Every
shard stores every column (:data:`~.schema.STORAGE_SCHEMA`). A ledger of an earlier format version is refused
in one line naming ``mindcap-tok ledger migrate`` (:func:`~.migrate.migrate`), which converts it once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._io import LEDGER_FORMAT, LEDGER_MANIFEST, check_folder_path, regular_file
from ..data.languages import resolve_language
from ..errors import BadInputError, DamagedDataError, MindcapError, StorageError, with_context
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from ..tokenization.registry import registry_model_name
from . import commit
from .commit import PENDING as _PENDING
from .commit import checked_bytes, committed_path, utc_now, why
from .schema import (
    CELL_COLUMNS,
    KEY_COLUMNS,
    SCHEMA,
    SETTING_COLUMNS,
    STORAGE_SCHEMA,
    RecordError,
    Records,
    check_token_ids,
    describe,
    duplicate_row,
    population_columns,
    to_canonical,
    to_storage,
    validate_records,
)

MANIFEST = LEDGER_MANIFEST
#: the folder of generation job records (a leading ``_``: Parquet readers of the ledger folder skip it)
JOBS = "_jobs"
FORMAT = LEDGER_FORMAT
#: the format version this reads and writes: every shard holds every column of :data:`~.schema.STORAGE_SCHEMA`
#: (versions 1-4 are converted by ``mindcap-tok ledger migrate``, :func:`~.migrate.migrate`)
VERSION = 5
#: manifest key listing, per shard path, the rows stored with a text that is not the decoding
#: of their output ids (``ledger import --allow-text-mismatch``); a manifest without it marks nothing
TEXT_MISMATCH = "text_mismatch"


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

    @property
    def model_cell(self) -> tuple[str, str, str]:
        """The cell with the model's stored name (an old ledger's shard may be filed under an alias)."""
        return (model_key(self.model), self.arm, self.lang)


#: the keys of a manifest shard entry and their JSON types
_SHARD_FIELDS = {f: int if f in ("rows", "bytes") else str for f in ShardInfo.__dataclass_fields__}
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: columns compared when a record's key is already stored: all but the derived ``n_tokens``
CONTENT_COLUMNS = tuple(c for c in SCHEMA.names if c != "n_tokens")


def shard_info(entry: object, index: int, *, manifest: Path) -> ShardInfo:
    """A manifest shard entry as :class:`ShardInfo`; a malformed entry is a one-line error naming the manifest."""
    where = f"ledger manifest {manifest}: shard entry {index}"
    if not isinstance(entry, dict):
        raise DamagedDataError(f"{where} is a {type(entry).__name__}, expected an object", path=manifest)
    missing = [k for k in _SHARD_FIELDS if k not in entry]
    extra = sorted(str(k) for k in entry if k not in _SHARD_FIELDS)
    if missing or extra:
        parts = [f"lacks {', '.join(missing)}"] if missing else []
        parts += [f"has unknown key(s) {', '.join(extra)}"] if extra else []
        raise DamagedDataError(f"{where} {' and '.join(parts)}", path=manifest)
    for key, kind in _SHARD_FIELDS.items():
        value = entry[key]
        if type(value) is not kind or (isinstance(value, int) and value < 0):
            what = "a non-negative integer" if kind is int else "a string"
            raise DamagedDataError(f"{where}: {key} = {value!r} is not {what}", path=manifest)
    if not _HEX64.fullmatch(entry["sha256"]):
        raise DamagedDataError(f"{where}: sha256 is not 64 lowercase hex digits", path=manifest)
    return ShardInfo(**entry)


def shard_path_problem(path: str) -> str | None:
    """Why a manifest shard path is unsafe to open (``None`` if it is a normalised relative ``*.parquet`` path)."""
    pure = PurePosixPath(path)
    if not path or "\\" in path or "\0" in path:
        return "is not a plain relative path"
    if pure.is_absolute():
        return "is absolute"
    if any(part in ("..", ".") for part in pure.parts) or str(pure) != path:
        return "is not a normalised path inside the ledger"
    if not pure.name.endswith(".parquet") or pure.name.startswith("."):
        return "is not named like a shard (*.parquet)"
    return None


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


def stage_shard(root: Path, rel: str, *, table: pa.Table, cell: tuple[str, str, str]) -> ShardInfo:
    """Write the records of one ``cell`` (validated, :data:`~.schema.SCHEMA`) as the pending shard ``root/rel``;
    the manifest entry that commits it."""
    encoded = commit.encode_table(to_storage(table))
    commit.stage_file(root / rel, encoded.data)
    return ShardInfo(rel, *cell, table.num_rows, encoded.size, encoded.sha256, utc_now())


def manifest_text(
    shards: list[dict[str, Any]], tokenizers: dict[str, Any], *, marks: dict[str, list[int]], created: str | None
) -> str:
    """The manifest of a ledger of ``shards`` (their entries, in order), as written."""
    cells: dict[str, int] = {}
    for s in shards:
        key = "/".join((s["model"], s["arm"], s["lang"]))
        cells[key] = cells.get(key, 0) + s["rows"]
    out = {
        "format": FORMAT,
        "version": VERSION,
        "created": created or utc_now(),
        "updated": utc_now(),
        "rows": sum(s["rows"] for s in shards),
        "cells": dict(sorted(cells.items())),
        "tokenizers": tokenizers,
        "shards": shards,
        TEXT_MISMATCH: marks,
    }
    return json.dumps(out, indent=1, ensure_ascii=False) + "\n"


def _cells(table: pa.Table) -> set[tuple[str, str, str]]:
    groups = table.select(list(CELL_COLUMNS)).group_by(list(CELL_COLUMNS)).aggregate([])
    return {(r["model"], r["arm"], r["lang"]) for r in groups.to_pylist()}


def key_tuples(table: pa.Table) -> list[tuple[Any, ...]]:
    """Each row's ledger key, the values of ``KEY_COLUMNS`` in order."""
    return list(zip(*(table.column(c).to_pylist() for c in KEY_COLUMNS), strict=True))


def model_key(name: str) -> str:
    """A model name as filters compare it: the registry name for a registry model, alias or Hugging Face id, else
    itself (:func:`~.schema.registry_model_name`)."""
    return registry_model_name(name) or name


def _group_key(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of group keys as a hashable tuple, every missing value (None, NaN) as ``None``."""
    return tuple(None if pd.isna(v) else v for v in values)


def old_format_message(path: Path, version: int) -> str:
    """The refusal of a ledger manifest of an earlier format version: what to run to convert it."""
    folder = path.parent
    return (
        f"ledger {folder} has format version {version}; this mindcap-tok reads version {VERSION}: convert it once "
        f"with `mindcap-tok ledger migrate {folder} --out-dir NEW`"
    )


def _thought_info(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per group of thinking records: median thought tokens (through the closing marker; all of an unclosed
    thought), median answer tokens, and the share of cap hits inside the thought (cut while unclosed, or forced
    to close it; null without cap hits)."""
    rows = frame[frame["thinking"].astype(bool)]
    end = rows["think_end"]
    thought = np.where(end.isna(), rows["n_tokens"], end.fillna(0) + 1).astype(np.int64)
    cap_hit = rows["finish_reason"] == "length"
    inside = cap_hit & (end.isna() | rows["forced_think_close"].astype(bool))
    parts = rows[keys].assign(thought=thought, answer=rows["n_tokens"].to_numpy() - thought, hit=cap_hit, inside=inside)
    grouped = parts.groupby(keys, dropna=False, sort=True)
    out = grouped.agg(
        thought_tokens_p50=("thought", "median"), answer_tokens_p50=("answer", "median"), hits=("hit", "sum")
    )
    out["cap_in_thought_share"] = (grouped["inside"].sum() / out["hits"]).where(out["hits"] > 0)
    return out.drop(columns="hits").reset_index()


def _samples_per_item(items: pd.Series) -> int | float:
    """Records per item: an integer when every item holds the same number, else the median (which may be x.5)."""
    counts = items.value_counts()
    return int(counts.iloc[0]) if counts.nunique() == 1 else float(counts.median())


class Ledger:
    """A ledger folder. Reading an absent folder gives an error; the first append creates it."""

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True) -> None:
        """``verify=False``: reads skip checking each shard against the manifest's size and SHA-256."""
        self.root = Path(path)
        self.verify_reads = verify

    def __repr__(self) -> str:
        return f"Ledger({str(self.root)!r})"

    # -- manifest ---------------------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def exists(self) -> bool:
        return regular_file(self.manifest_path, "ledger manifest").is_file()

    def manifest(self) -> dict[str, Any]:
        """The parsed manifest (an empty one when the folder holds no ledger yet)."""
        if not self.exists():
            return {"format": FORMAT, "version": VERSION, "shards": [], "tokenizers": {}, "rows": 0, "cells": {}}
        try:
            data = json.loads(self.manifest_path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise DamagedDataError(
                f"ledger manifest {self.manifest_path} is unreadable: {exc}", path=self.manifest_path
            ) from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise DamagedDataError(
                f"{self.manifest_path} is not a mindcap-tok ledger manifest", path=self.manifest_path
            )
        if not isinstance(data.get("version", 0), int):
            raise DamagedDataError(
                f"ledger manifest {self.manifest_path}: version {data['version']!r} is not an integer",
                path=self.manifest_path,
            )
        if data.get("version", 0) > VERSION:
            raise DamagedDataError(
                f"{self.manifest_path} has format version {data['version']}; this mindcap-tok reads {VERSION}",
                path=self.manifest_path,
            )
        if data.get("version", 0) < VERSION:
            raise BadInputError(old_format_message(self.manifest_path, data.get("version", 0)))
        kinds = (("shards", list), ("rows", int), ("tokenizers", dict), ("cells", dict), (TEXT_MISMATCH, dict))
        for key, kind in kinds:
            if key in data and (not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool))):
                raise DamagedDataError(
                    f"ledger manifest {self.manifest_path}: {key} is not a {kind.__name__}", path=self.manifest_path
                )
        if "shards" not in data:
            raise DamagedDataError(f"ledger manifest {self.manifest_path} lacks shards", path=self.manifest_path)
        for path, rows in data.get(TEXT_MISMATCH, {}).items():
            if not isinstance(rows, list) or not all(type(r) is int and r >= 0 for r in rows):
                raise DamagedDataError(
                    f"ledger manifest {self.manifest_path}: {TEXT_MISMATCH} of {path!r} is not a list of row numbers",
                    path=self.manifest_path,
                )
        return data

    def check_new_location(self) -> None:
        """Refuse to start a ledger in a folder that holds anything else (a ledger never mixes with other files).

        Before the first commit a ledger folder may hold only its lock, hidden shards of an interrupted first
        append (under ``model=…/``) and ``_jobs/`` (generation job records written before the first shard).
        """
        if self.exists() or not check_folder_path(self.root, "ledger folder").exists():
            return
        if not self.root.is_dir():
            raise BadInputError(f"ledger folder {self.root} is a file")
        other = sorted(
            p.name
            for p in self.root.iterdir()
            if p.name not in (".lock", JOBS) and not p.name.startswith(f"{CELL_COLUMNS[0]}=")
        )
        if other:
            shown = ", ".join(other[:3]) + (", …" if len(other) > 3 else "")
            raise BadInputError(
                f"{self.root} is not a ledger and already holds other files ({shown}); give a new or empty folder"
            )

    def _require(self) -> dict[str, Any]:
        if not self.exists():
            raise BadInputError(
                f"no ledger at {self.root} (no {MANIFEST}); create one with `mindcap-tok ledger import`"
            )
        return self.manifest()

    def shards(self) -> list[ShardInfo]:
        """Committed shards, in the order they were written."""
        return self._shards(self.manifest())

    def _entries(self, manifest: dict[str, Any]) -> list[tuple[ShardInfo, str | None]]:
        """Each listed shard with the reason its path is unsafe to open (``None`` when it is safe)."""
        return [
            (info, shard_path_problem(info.path))
            for info in (shard_info(e, i, manifest=self.manifest_path) for i, e in enumerate(manifest["shards"]))
        ]

    def _shards(self, manifest: dict[str, Any]) -> list[ShardInfo]:
        out = []
        for info, problem in self._entries(manifest):
            if problem is not None:
                raise DamagedDataError(
                    f"ledger manifest {self.manifest_path}: shard path {info.path!r} {problem}", path=self.manifest_path
                )
            out.append(info)
        return out

    def tokenizers(self) -> dict[str, dict[str, Any]]:
        """Tokenizer name -> {sha256, vocab_size} of the ids stored under that name."""
        return dict(self.manifest().get("tokenizers", {}))

    def _file(self, shard: ShardInfo) -> Path:
        return committed_path(self.root / shard.path)

    def _outside(self, path: Path) -> bool:
        """True when ``path`` (a listed shard) resolves outside the ledger folder (through a symlink)."""
        return not path.resolve().is_relative_to(self.root.resolve())

    def _shard_bytes(self, shard: ShardInfo) -> pa.Buffer:
        """The shard's bytes, read once into Arrow memory and checked against the manifest's size and SHA-256."""
        path = self._file(shard)
        hint = f"(run `mindcap-tok ledger verify {self.root}`)"
        if self._outside(path):
            raise DamagedDataError(f"cannot read ledger shard {path}: it resolves outside the ledger {hint}", path=path)
        return checked_bytes(path, "ledger shard", size=shard.bytes, digest=shard.sha256, hint=hint)

    def _source(self, shard: ShardInfo) -> pa.Buffer | Path:
        """What :meth:`_read_shard` parses: the checked bytes, or (``verify=False``) the file."""
        if self.verify_reads:
            return self._shard_bytes(shard)
        path = self._file(shard)
        if self._outside(path):
            raise DamagedDataError(
                f"cannot read ledger shard {path}: it resolves outside the ledger {self.root}", path=path
            )
        return regular_file(path, "ledger shard")

    def _read_shard(
        self, shard: ShardInfo, columns: Sequence[str] | None = None, source: pa.Buffer | Path | None = None
    ) -> pa.Table:
        """One shard (checked unless ``verify=False``), as stored (cell columns dictionary-encoded)."""
        source = self._source(shard) if source is None else source
        cols = list(STORAGE_SCHEMA.names if columns is None else columns)
        try:
            if isinstance(source, pa.Buffer):  # in memory: nothing to pre-buffer
                return pq.read_table(pa.BufferReader(source), columns=cols, pre_buffer=False)
            return pq.read_table(source, columns=cols)
        except (OSError, pa.ArrowException) as exc:
            path = self._file(shard)
            msg = f"cannot read ledger shard {path}: {why(exc)} (run `mindcap-tok ledger verify {self.root}`)"
            raise DamagedDataError(msg, path=path) from exc

    # -- writing ----------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Exclusive: held by an append from reading the manifest to renaming its shards into place."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create ledger folder {self.root}: {exc.strerror or exc}") from exc
        with open(self.root / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _shared_lock(self) -> Iterator[None]:
        """Shared: readers see no append half-done. Opened read-only; none where that fails (no lock file)."""
        try:
            fd = os.open(self.root / ".lock", os.O_RDONLY | os.O_NONBLOCK)  # a FIFO there must not block
        except OSError:
            yield  # no lock file (nothing ever appended here with a lock) or not readable
            return
        try:
            with contextlib.suppress(OSError):  # a file system without flock: read without it
                fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _recover(self, manifest: dict[str, Any]) -> None:
        """Finish renames of committed shards; delete hidden shards that no manifest committed."""
        finals = [self.root / s.path for s in self._shards(manifest)]
        commit.roll_forward(finals, self.root.glob(f"**/.part-*{_PENDING}"))

    def _vocab_sizes(
        self,
        table: pa.Table,
        tokenizer: ResolvedTokenizer | Mapping[str, ResolvedTokenizer | Mapping[str, Any]] | None,
        known: dict[str, Any],
    ) -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
        names = pc.unique(table.column("tokenizer")).to_pylist()
        entry: dict[str, Any]
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
                    raise with_context(
                        exc, f"cannot check token ids of tokenizer {name!r}: {exc}; pass the tokenizer to append()"
                    ) from exc
            if isinstance(tok, Mapping):  # a manifest's entry: ids already checked against it (``ledger merge``)
                entry = {"sha256": tok["sha256"], "vocab_size": tok["vocab_size"]}
            else:
                entry = {"sha256": tok.sha256, "vocab_size": tok.vocab_size}
            if name in known and known[name]["sha256"] != entry["sha256"]:
                raise BadInputError(
                    f"tokenizer {name!r} in these records has sha256 {entry['sha256'][:12]}…, but the ledger's ids "
                    f"under that name came from {known[name]['sha256'][:12]}…; use another tokenizer name"
                )
            sizes[name], entries[name] = entry["vocab_size"], entry
        return sizes, entries

    def _stored(self, table: pa.Table, manifest: dict[str, Any], skip_existing: bool) -> np.ndarray:
        """Which rows of ``table`` are already stored, identical; a stored key with other content is an error.

        Without ``skip_existing`` any stored key is an error. Errors are :class:`RecordError` naming the row
        and the shard that holds the stored record.
        """
        keys = key_tuples(table)
        rows = {key: i for i, key in enumerate(keys)}
        stored = np.zeros(table.num_rows, dtype=bool)
        cells = _cells(table)
        conflicts: list[tuple[int, ShardInfo, list[str]]] = []
        for s in self._shards(manifest):
            if s.model_cell not in cells:
                continue
            source = self._source(s)
            shard_keys = key_tuples(to_canonical(self._read_shard(s, KEY_COLUMNS, source)))
            pairs = [(j, rows[k]) for j, k in enumerate(shard_keys) if k in rows]
            if not pairs:
                continue
            if not skip_existing:
                i = min(i for _, i in pairs)
                raise RecordError(f"{describe(table, i)} is already in the ledger at {self.root} ({s.path})", i)
            shard = to_canonical(self._read_shard(s, CONTENT_COLUMNS, source))
            old = shard.take(pa.array([j for j, _ in pairs])).select(list(CONTENT_COLUMNS))
            new = table.take(pa.array([i for _, i in pairs])).select(list(CONTENT_COLUMNS))
            if not old.equals(new):
                for k, (a, b) in enumerate(zip(old.to_pylist(), new.to_pylist(), strict=True)):
                    if a != b:
                        conflicts.append((pairs[k][1], s, [c for c in CONTENT_COLUMNS if a[c] != b[c]]))
            stored[[i for _, i in pairs]] = True
        if conflicts:
            i, s, cols = min(conflicts, key=lambda c: c[0])
            verb = "differs" if len(cols) == 1 else "differ"
            raise RecordError(
                f"{describe(table, i)} is already stored in {self.root / s.path} with different content "
                f"({', '.join(cols)} {verb}); an identical record would be skipped",
                i,
            )
        return stored

    def matches(self, records: pa.Table) -> np.ndarray:
        """Which of ``records`` (:data:`~.schema.SCHEMA` columns, as :meth:`read` returns them) this ledger holds
        identically; a stored record with the same key and other content is a :class:`RecordError`, as
        :meth:`append` with ``skip_existing`` refuses it. Nothing is written."""
        with self._shared_lock():
            return self._stored(records, self._require(), True)

    def append(
        self,
        records: Records,
        tokenizer: ResolvedTokenizer | Mapping[str, ResolvedTokenizer | Mapping[str, Any]] | None = None,
        *,
        skip_existing: bool = False,
        check_new: Callable[[pa.Table, np.ndarray], np.ndarray | None] | None = None,
    ) -> list[ShardInfo]:
        """Validate ``records`` and add them as new shards (one per cell); return the shards written.

        ``tokenizer`` (one, or a mapping from the ``tokenizer`` column's names) checks the ids; by default
        each name is resolved with :func:`load_tokenizer`; records copied from another ledger may map a name to
        that ledger's manifest entry (``sha256``, ``vocab_size``) instead. A record whose key is already stored is
        an error, unless ``skip_existing`` (used to resume an interrupted import) and the stored record is identical
        (every column but the derived ``n_tokens``): then it is dropped. Record errors are :class:`RecordError`.
        ``check_new(table, rows)`` is called, under the lock, on the validated records about to be added (``rows``:
        their positions among ``records``); it may raise, and it returns ``None`` or one flag per record marking
        those stored with a text that is not the decoding of their ids (listed in the manifest, read back with
        :meth:`text_mismatches`).
        """
        self.check_new_location()
        table = validate_records(records)  # before the lock: invalid records leave no new ledger folder behind
        with self._lock():
            manifest = self.manifest()
            self._recover(manifest)
            sizes, tok_entries = self._vocab_sizes(table, tokenizer, manifest.get("tokenizers", {}))
            check_token_ids(table, sizes)
            stored = self._stored(table, manifest, skip_existing)
            if stored.any():
                table = table.filter(pa.array(~stored))
            if table.num_rows == 0:
                return []
            flags = None if check_new is None else check_new(table, np.flatnonzero(~stored))
            marked = np.zeros(table.num_rows, bool) if flags is None else np.asarray(flags, bool)
            written, marks = self._write_shards(table, manifest, marked)
            shards = manifest["shards"] + [s.__dict__ for s in written]
            tokenizers = {**manifest.get("tokenizers", {}), **tok_entries}
            all_marks = {**manifest.get(TEXT_MISMATCH, {}), **marks}
            text = manifest_text(shards, tokenizers, marks=all_marks, created=manifest.get("created"))
            # not committed (a full disk, Ctrl-C): its shards go too, the ledger is as it was
            commit.commit_files(self.manifest_path, text, finals=[self.root / s.path for s in written])
            return written

    def _write_shards(
        self, table: pa.Table, manifest: dict[str, Any], marked: np.ndarray
    ) -> tuple[list[ShardInfo], dict[str, list[int]]]:
        """Write one pending shard per cell; return them and, per shard path, the rows flagged in ``marked``."""
        frame = table.select(list(CELL_COLUMNS)).to_pandas()
        groups = frame.groupby(list(CELL_COLUMNS), sort=True).indices
        seq = len(manifest["shards"])
        written, marks = [], {}
        begun: list[Path] = []  # the pending shards begun, removed if any write fails (a full disk, Ctrl-C)
        try:
            for (model, arm, lang), rows in groups.items():
                rel = f"{_cell_dir(model, arm, lang)}/part-{seq:06d}-{uuid.uuid4().hex[:8]}.parquet"
                begun.append(self.root / rel)
                written.append(stage_shard(self.root, rel, table=table.take(pa.array(rows)), cell=(model, arm, lang)))
                if marked[rows].any():
                    marks[rel] = np.flatnonzero(marked[rows]).tolist()
                seq += 1
        except BaseException:
            commit.discard(begun)
            raise
        return written, marks

    # -- reading ----------------------------------------------------------------------------------------------
    def read(
        self,
        model: str | Sequence[str] | None = None,
        arm: str | Sequence[str] | None = None,
        *,
        lang: str | Sequence[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Records of the matching cells (each filter: one value, several, or ``None`` for all) as a table.

        Only the shards of the selected cells are opened, so reading one cell of a large ledger is cheap.
        Each is checked against the manifest's size and SHA-256 first (unless ``Ledger(..., verify=False)``);
        a damaged shard is a :class:`MindcapError` naming it.
        """
        if columns is not None:
            unknown = [c for c in columns if c not in SCHEMA.names]
            if unknown:
                raise BadInputError(
                    f"unknown ledger column(s) {', '.join(unknown)}; columns are {', '.join(SCHEMA.names)}"
                )
        langs = None if lang is None else [resolve_language(x) for x in ([lang] if isinstance(lang, str) else lang)]
        # a model matches by name or registry alias (``qwen3`` finds records stored as ``qwen3-8b``, and back)
        models = None if model is None else {model_key(m) for m in ([model] if isinstance(model, str) else model)}
        arms = None if arm is None else ({arm} if isinstance(arm, str) else set(arm))
        wanted: list[tuple[set[str] | None, Callable[[str], str]]] = [
            (models, model_key),
            (arms, str),
            (None if langs is None else set(langs), str),
        ]
        with self._shared_lock():
            chosen = [
                s
                for s in self._shards(self._require())
                if all(w is None or key(v) in w for (w, key), v in zip(wanted, s.cell, strict=True))
            ]
            # reading and hashing release the GIL: check shards on a few threads (in order, first error wins)
            with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1, max(len(chosen), 1))) as pool:
                tables = list(pool.map(lambda s: self._read_shard(s, columns), chosen))
        schema = STORAGE_SCHEMA if columns is None else pa.schema([STORAGE_SCHEMA.field(c) for c in columns])
        if not tables:
            return to_canonical(schema.empty_table())
        return to_canonical(pa.concat_tables([t.cast(schema) for t in tables]))

    def text_mismatches(self) -> pa.Table:
        """The key columns of the records stored with a text that is not the decoding of their output ids
        (imported with ``--allow-text-mismatch``); empty for a ledger that marks none."""
        with self._shared_lock():
            manifest = self._require()
            marks = manifest.get(TEXT_MISMATCH, {})
            parts = [
                to_canonical(self._read_shard(s, KEY_COLUMNS)).take(pa.array(marks[s.path], pa.int64()))
                for s in self._shards(manifest)
                if s.path in marks
            ]
        schema = pa.schema([SCHEMA.field(c) for c in KEY_COLUMNS])
        return pa.concat_tables([p.cast(schema) for p in parts]) if parts else schema.empty_table()

    def to_pandas(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        """:meth:`read` as a pandas DataFrame."""
        return self.read(*args, **kwargs).to_pandas()

    def __len__(self) -> int:
        return int(self.manifest().get("rows", 0))

    def info(self) -> pd.DataFrame:
        """One row per cell and settings: records, items, samples per item, cap-hit rate, length quantiles, and
        how many records are retokenized and marked text mismatches (counts are integers). ``cap_hit`` is the
        share cut by the cap; where some record's cut status is unknown (finish reason ``unknown``), also
        ``cut_unknown``, their share: the true cap-hit rate lies between ``cap_hit`` and the sum of the two.
        Where some record thinks, also ``thinking`` and per group the median thought and answer tokens and the
        share of cap hits that fell inside the thought (:func:`_thought_info`)."""
        self._require()
        cols = [*CELL_COLUMNS, *SETTING_COLUMNS, "item", "finish_reason", "n_tokens", "retokenized", "tokenizer"]
        frame = self.read(columns=[*cols, "think_end", "forced_think_close"]).to_pandas()
        keys = population_columns(frame)
        thinking = "thinking" in keys
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
            "text_mismatch",
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
                "samples_per_item": grouped["item"].agg(_samples_per_item),
                "cap_hit": grouped["finish_reason"].agg(lambda s: float((s == "length").mean())),
                "cut_unknown": grouped["finish_reason"].agg(lambda s: float((s == "unknown").mean())),
                "len_p10": lengths.quantile(0.1),
                "len_p50": lengths.quantile(0.5),
                "len_p90": lengths.quantile(0.9),
                "len_max": lengths.max(),
                "retokenized": grouped["retokenized"].sum().astype(np.int64),
                "tokenizer": grouped["tokenizer"].agg(lambda s: ",".join(sorted(set(s)))),
            }
        ).reset_index()
        out["text_mismatch"] = self._mismatch_counts(out[keys])
        if out["cut_unknown"].any():
            out_cols.insert(out_cols.index("cap_hit") + 1, "cut_unknown")
        if thinking:
            out = out.merge(_thought_info(frame, keys), on=keys, how="left")
            out_cols += ["thought_tokens_p50", "answer_tokens_p50", "cap_in_thought_share"]
        return out[out_cols]

    def _mismatch_counts(self, groups: pd.DataFrame) -> np.ndarray:
        """How many records of each (cell, settings) group of ``groups`` are marked text mismatches."""
        if not self.manifest().get(TEXT_MISMATCH):
            return np.zeros(len(groups), dtype=np.int64)
        marked = self.text_mismatches().to_pandas()
        counts = Counter(map(_group_key, marked[list(groups.columns)].itertuples(index=False)))
        return np.array([counts.get(_group_key(g), 0) for g in groups.itertuples(index=False)], dtype=np.int64)

    # -- checking ---------------------------------------------------------------------------------------------
    def verify(self, check_keys: bool = True) -> VerifyReport:
        """Check every committed shard's presence, size, SHA-256, row count, schema and cell; report strays.

        Runs under the shared lock, so an append running at the same time is seen whole or not at all.
        A malformed manifest raises :class:`MindcapError`; an unsafe shard path is a reported problem.
        """
        with self._shared_lock():
            return self._verify(check_keys)

    def _verify(self, check_keys: bool) -> VerifyReport:
        manifest = self._require()
        entries = self._entries(manifest)
        report = VerifyReport(str(self.root), len(entries), int(manifest.get("rows", 0)))
        listed_rows = sum(s.rows for s, _ in entries)
        if listed_rows != report.rows:
            report.problems.append(f"manifest says {report.rows} rows but its shards list {listed_rows}")
        listed = set()
        keys = []
        for s, unsafe in entries:
            if unsafe is not None:
                report.problems.append(f"{s.path!r}: shard path {unsafe} (not opened)")
                continue
            path = self._file(s)
            listed.add((self.root / s.path).resolve())
            if not path.exists():
                report.problems.append(f"{s.path}: missing")
                continue
            if self._outside(path):
                report.problems.append(f"{s.path}: resolves outside the ledger (not opened)")
                continue
            if path.name.endswith(_PENDING):
                report.notes.append(f"{s.path}: committed but not yet renamed (the next append finishes it)")
            try:
                with pa.OSFile(str(regular_file(path, "shard"))) as fh:  # Arrow memory: see commit.checked_bytes
                    data = fh.read_buffer()
            except (OSError, pa.ArrowException, MindcapError) as exc:
                report.problems.append(f"{s.path}: cannot read: {why(exc)}")
                continue
            if data.size != s.bytes:
                report.problems.append(f"{s.path}: {data.size} bytes, manifest says {s.bytes} (truncated or altered)")
                continue
            if commit.sha256(data) != s.sha256:
                report.problems.append(f"{s.path}: content hash differs from the manifest (altered)")
                continue
            try:
                table = pq.read_table(pa.BufferReader(data), pre_buffer=False)
            except (OSError, pa.ArrowException) as exc:
                report.problems.append(f"{s.path}: not readable as Parquet: {why(exc)}")
                continue
            if table.num_rows != s.rows:
                report.problems.append(f"{s.path}: {table.num_rows} rows, manifest says {s.rows}")
            if not table.schema.remove_metadata().equals(STORAGE_SCHEMA):
                report.problems.append(f"{s.path}: schema differs from the ledger schema")
                continue
            cells = _cells(to_canonical(table))
            if cells - {s.model_cell}:
                other = sorted(cells - {s.model_cell})
                report.problems.append(f"{s.path}: holds records of cell(s) {other}, not {s.cell}")
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
