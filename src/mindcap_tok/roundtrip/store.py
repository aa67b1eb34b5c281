"""The run folder of a round trip: one Parquet file per hop wave and per judge round, and a manifest.

Layout::

    DIR/_roundtrip.json            # format, the spec, its identity, and every committed file (rows, bytes, SHA-256)
    DIR/hops/hop-01.parquet        # every hop 1 of every (model, text, sequence) still running (with a thinking
                                   # model: THINK_HOP_SCHEMA, each hop's thought and answer channel apart)
    DIR/judge/round-0.parquet      # first judge attempt of every finished chain; round-1: the retries ...

Files are committed through the store's machinery (:func:`~mindcap_tok.store.commit_files`, as the ledger's
shards): written under a hidden pending name, then listed in the manifest (written atomically), then renamed into
place. The manifest is the commit point, so a rerun resumes at the first wave or round it does not list; a file
it lists still under its pending name is renamed by the next run (or read there meanwhile). The folder holds
nothing else (besides the lock file a run holds, :func:`~mindcap_tok._io.folder_lock`); a folder with other files,
a symlink or special file anywhere inside, a ledger or a folder inside one is refused. A manifest is checked whole
when read (:class:`RunManifest`), and each file against its size, SHA-256 and schema, so a damaged or hand-made
run is one line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .._io import (
    NO_ROOM,
    RUN_LOCK,
    check_folder_path,
    check_tree,
    enclosing_ledger,
    folder_lock,
    path_inside,
    regular_file,
)
from .._json import dumps_strict
from ..errors import BadInputError, DamagedDataError, StorageError, with_context
from ..spec import SpecError, validated_table
from ..store import checked_bytes, commit_files, committed_path, encode_table, roll_forward, stage_file, utc_now

MANIFEST = "_roundtrip.json"
FORMAT = "mindcap-tok roundtrip"
VERSION = 1
_FILE = r"(hops/hop-\d{2}|judge/round-\d{2})\.parquet"
_OWN = re.compile(rf"{_FILE}|hops|judge|_roundtrip\.json|{re.escape(RUN_LOCK)}")
_TMP = re.compile(r"(hops/|judge/)?\.[^/]+\.(tmp|pending)")

_IDS = pa.list_(pa.int32())
HOP_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("text_id", pa.string()),
        ("sequence", pa.string()),
        ("hop", pa.int16()),
        ("src_lang", pa.string()),
        ("tgt_lang", pa.string()),
        ("seed", pa.int64()),
        ("cap", pa.int32()),
        ("template_id", pa.string()),
        ("prompt_ids", _IDS),
        ("output_ids", _IDS),
        ("text", pa.string()),
        ("finish_reason", pa.string()),
        ("capped", pa.bool_()),
        ("empty", pa.bool_()),
        ("generator", pa.string()),
    ]
)
#: the hop records of a run where some model thinks: the channel of each hop (:mod:`.thinking`) besides; runs
#: without a thinking model keep :data:`HOP_SCHEMA`
THINK_HOP_SCHEMA = pa.schema(
    [
        *HOP_SCHEMA,
        ("thinking", pa.bool_()),
        ("think_end", pa.int32()),
        ("answer", pa.string()),
        ("thought_tokens", pa.int32()),
        ("answer_tokens", pa.int32()),
        ("unclosed", pa.bool_()),
    ]
)
JUDGE_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("text_id", pa.string()),
        ("sequence", pa.string()),
        ("attempt", pa.int16()),
        ("judge_model", pa.string()),
        ("seed", pa.int64()),
        ("cap", pa.int32()),
        ("template_id", pa.string()),
        ("prompt_ids", _IDS),
        ("output_ids", _IDS),
        ("raw", pa.string()),
        ("finish_reason", pa.string()),
        ("parse", pa.string()),
        ("mqm", pa.float64()),
        ("judge_score", pa.float64()),
        ("classification", pa.string()),
        ("n_minor", pa.int32()),
        ("n_major", pa.int32()),
        ("n_critical", pa.int32()),
        ("n_bad_severity", pa.int32()),
        ("issues", pa.string()),
        ("error", pa.string()),
        ("generator", pa.string()),
    ]
)


def hop_file(hop: int) -> str:
    return f"hops/hop-{hop:02d}.parquet"


def judge_file(attempt: int) -> str:
    return f"judge/round-{attempt:02d}.parquet"


def commit_file(root: Path, name: str, data: bytes, manifest: Path, text: str, what: str) -> None:
    """Commit ``data`` as ``root/name`` with the manifest ``text`` that lists it (:func:`commit_files`), through
    real folders only (:func:`~mindcap_tok._io.path_inside`); ``what`` names the folder in messages. A write that
    found no room is a :class:`StorageError`, and the folder is as it was."""
    final = path_inside(root, name, what)
    path_inside(root, manifest.relative_to(root).as_posix(), what)
    try:
        stage_file(final, data)
    except OSError as exc:
        if exc.errno in NO_ROOM:
            raise StorageError(f"cannot write {final}: {exc.strerror}", path=final) from exc
        raise
    commit_files(manifest, text, finals=[final])


def read_run_manifest(path: Path, *, fmt: str, identity: dict, what: str, other: str) -> dict | None:
    """The run manifest at ``path`` when it is this run's (its ``identity``), ``None`` when there is none; a
    manifest of another kind or of another run (``other`` says what differs) is a one-line error. ``what``
    names the manifest in messages ("round-trip manifest")."""
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise DamagedDataError(f"{what} {path} is unreadable: {exc}", path=path) from None
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        raise DamagedDataError(f"{path} is not a mindcap-tok {what}", path=path)
    if manifest.get("identity") != json.loads(dumps_strict(identity)):
        raise BadInputError(f"{path.parent} holds another {other}; choose a new folder")
    return manifest


# -- the manifest's shape: what the run, its report and compare read from it ----------------------------------

_LOOSE = ConfigDict(strict=True, extra="allow", allow_inf_nan=False)
_Name = Annotated[str, StringConstraints(min_length=1)]


class _Entry(BaseModel):
    """A committed file: its rows and SHA-256."""

    model_config = _LOOSE
    rows: Annotated[int, Field(ge=0)]
    bytes: Annotated[int, Field(ge=0)]
    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class _Model(BaseModel):
    model_config = _LOOSE
    name: _Name
    path: _Name
    thinking: bool = False


class _Judge(BaseModel):
    model_config = _LOOSE
    model: _Model


class _Sequence(BaseModel):
    model_config = _LOOSE
    langs: Annotated[list[_Name], Field(min_length=2)]
    resource: str


class _Spec(BaseModel):
    """The parts of a run's spec (:meth:`~.spec.RoundtripSpec.as_dict`) that reading a run relies on."""

    model_config = _LOOSE
    models: Annotated[list[_Model], Field(min_length=1)]
    texts: _Name
    sample: Annotated[int, Field(ge=1)] | None
    sentences_per_text: Annotated[int, Field(ge=1)]
    sequences: Annotated[dict[str, _Sequence], Field(min_length=1)]
    seed: int
    judge: _Judge
    judges: list[_Judge] | None = None


class _Identity(BaseModel):
    model_config = _LOOSE
    texts: str


class RunManifest(BaseModel):
    """A round-trip manifest as read back: the keys a run, its report and ``compare`` use, checked whole (extra
    keys of other versions are kept)."""

    model_config = _LOOSE
    format: Literal["mindcap-tok roundtrip"]
    version: int
    identity: _Identity
    spec: _Spec
    files: dict[Annotated[str, StringConstraints(pattern=rf"^{_FILE}$")], _Entry]


def check_manifest(manifest: object, path: Path) -> dict:
    """``manifest`` (parsed JSON) when it has a round-trip manifest's shape, else a one-line error naming ``path``
    and the first key that is wrong."""
    try:
        return validated_table(RunManifest, manifest, key="")
    except SpecError as exc:
        raise DamagedDataError(f"round-trip manifest {path} is damaged: {exc}", path=path) from None


#: the schemas a committed file may have, by folder
_SCHEMAS = {"hops/": (HOP_SCHEMA, THINK_HOP_SCHEMA), "judge/": (JUDGE_SCHEMA,)}
#: the columns every record of a committed file fills (replaying a run reads them all)
_FILLED = {
    "hops/": ("model", "text_id", "sequence", "hop", "capped", "empty", "text"),
    "judge/": ("model", "text_id", "sequence", "attempt", "judge_model", "n_bad_severity"),
}


class RunStore:
    """A round-trip run folder (see the module docs); ``open`` checks it belongs to the spec's ``identity``.

    Reading needs nothing more; a run writes inside :meth:`writing`, which holds the folder's lock."""

    def __init__(self, root: str | os.PathLike[str], identity: dict, spec: dict) -> None:
        self.root = Path(root)
        self._identity, self._spec = identity, spec
        self._load()

    def _load(self) -> None:
        self._check_folder()
        path = regular_file(self.root / MANIFEST, "round-trip manifest")
        other = "round-trip run (different models, texts, sequences, seed, caps or sampling)"
        found = read_run_manifest(path, fmt=FORMAT, identity=self._identity, what="round-trip manifest", other=other)
        if found is not None:
            self.manifest = check_manifest(found, path)
        else:
            self.manifest = {
                "format": FORMAT,
                "version": VERSION,
                "identity": self._identity,
                "spec": self._spec,
                "files": {},
            }

    @contextmanager
    def writing(self) -> Iterator[RunStore]:
        """Hold the folder's lock for a run's writes (a second run into the folder is refused in one line) and
        read the manifest again under it, so the run resumes from what is committed now."""
        with folder_lock(self.root, "round-trip folder"):
            self._load()
            strays = [*self.root.glob("hops/.*.pending"), *self.root.glob("judge/.*.pending")]
            roll_forward([self.root / name for name in self.manifest["files"]], strays)
            yield self

    def _check_folder(self) -> None:
        check_folder_path(self.root, "round-trip folder")
        ledger = enclosing_ledger(self.root)
        if ledger is not None:
            raise BadInputError(f"round-trip folder {self.root} is or lies inside the ledger {ledger}; choose another")
        if self.root.exists() and not self.root.is_dir():
            raise BadInputError(f"round-trip folder {self.root} exists and is not a folder")
        if not self.root.is_dir():
            return
        check_tree(self.root, "round-trip folder")
        entries = sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*"))
        foreign = [e for e in entries if not (_OWN.fullmatch(e) or _TMP.fullmatch(e))]
        if foreign:
            raise BadInputError(
                f"round-trip folder {self.root} holds files that are not a round-trip run's "
                f"({', '.join(foreign[:3])}{', …' if len(foreign) > 3 else ''}); choose a new or empty folder"
            )
        if entries and not (self.root / MANIFEST).is_file() and any(e.endswith(".parquet") for e in entries):
            raise BadInputError(f"round-trip folder {self.root} has Parquet files but no {MANIFEST}; choose another")

    def has(self, name: str) -> bool:
        """Whether the file ``name`` (``hops/hop-01.parquet``) is committed."""
        return name in self.manifest["files"]

    def write(self, name: str, rows: list[dict], schema: pa.Schema) -> None:
        """Write ``rows`` to ``name`` atomically, then commit it in the manifest (through no symlink: each folder
        on the way is checked)."""
        # the C library's malloc, not Arrow's default mimalloc, which made these writes 2-3x slower (measured with
        # benchmarks/bench_roundtrip.py, whose waves are seconds apart)
        pool = pa.system_memory_pool()
        # column by column: Table.from_pylist converts row by row, 3-4x slower on a wave's rows
        columns = {f.name: pa.array([r[f.name] for r in rows], f.type, memory_pool=pool) for f in schema}
        # no dictionaries: on the id lists they cost most of the write and save nothing; zstd packs the rest
        encoded = encode_table(pa.table(columns, schema=schema), use_dictionary=False, memory_pool=pool)
        entry = {"rows": encoded.rows, "bytes": encoded.size, "sha256": encoded.sha256, "written": utc_now()}
        manifest = {**self.manifest, "files": {**self.manifest["files"], name: entry}}
        text = dumps_strict(manifest) + "\n"
        try:
            commit_file(self.root, name, encoded.data, self.root / MANIFEST, text, "round-trip folder")
        except StorageError as exc:
            done = len(self.manifest["files"])
            raise with_context(
                exc, f"{exc}; {done} files of the run stay committed, a rerun resumes after them"
            ) from exc
        self.manifest = manifest

    def read(self, name: str) -> list[dict]:
        """The rows of a committed file, checked against the manifest's SHA-256 and row count and against its
        schema."""
        path = committed_path(self.root / name)
        entry = self.manifest["files"][name]
        data = checked_bytes(path, "round-trip file", size=entry["bytes"], digest=entry["sha256"])
        try:
            table = pq.read_table(pa.BufferReader(data))
        except (OSError, pa.ArrowException) as exc:
            raise DamagedDataError(f"round-trip file {path} is not readable Parquet: {exc}", path=path) from None
        folder = name[: name.index("/") + 1]
        if (
            not any(table.schema.remove_metadata().equals(s) for s in _SCHEMAS[folder])
            or table.num_rows != entry["rows"]
        ):
            raise DamagedDataError(
                f"round-trip file {path} does not hold the records of a round-trip run (other columns or rows)",
                path=path,
            )
        empty = [c for c in _FILLED[folder] if table.column(c).null_count]
        if empty:
            raise DamagedDataError(f"round-trip file {path}: records without {empty[0]}", path=path)
        return table.to_pylist()

    def read_all(self, prefix: str) -> list[dict]:
        """Rows of every committed file under ``prefix`` (``hops/`` or ``judge/``), in file order."""
        return [row for name in sorted(self.manifest["files"]) if name.startswith(prefix) for row in self.read(name)]


def enclosing_run(path: str | os.PathLike[str]) -> Path | None:
    """The round-trip run folder that ``path`` is or lies inside (a folder holding :data:`MANIFEST`), or ``None``."""
    here = Path(os.path.abspath(path))
    return next((folder for folder in (here, *here.parents) if (folder / MANIFEST).is_file()), None)
