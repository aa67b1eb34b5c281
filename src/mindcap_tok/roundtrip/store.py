"""The run folder of a round trip: one Parquet file per hop wave and per judge round, and a manifest.

Layout::

    DIR/_roundtrip.json            # format, the spec, its identity, and every committed file (rows, SHA-256)
    DIR/hops/hop-01.parquet        # every hop 1 of every (model, text, sequence) still running (with a thinking
                                   # model: THINK_HOP_SCHEMA, each hop's thought and answer channel apart)
    DIR/judge/round-0.parquet      # first judge attempt of every finished chain; round-1: the retries ...

A file is written atomically, then listed in the manifest (written atomically too): the manifest is the commit
point, so a rerun resumes at the first wave or round it does not list. The folder holds nothing else; a
folder with other files, a ledger or a folder inside one is refused.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .._io import atomic_write_bytes, atomic_write_text, check_folder_path, enclosing_ledger, regular_file
from .._json import dumps_strict
from ..errors import MindcapError

MANIFEST = "_roundtrip.json"
FORMAT = "mindcap-tok roundtrip"
VERSION = 1
_OWN = re.compile(r"(hops/hop-\d{2}|judge/round-\d{2})\.parquet|hops|judge|_roundtrip\.json")
_TMP = re.compile(r"(hops/|judge/)?\.[^/]+\.tmp")

_IDS = pa.list_(pa.int32())
HOP_SCHEMA = pa.schema([
    ("model", pa.string()), ("text_id", pa.string()), ("sequence", pa.string()), ("hop", pa.int16()),
    ("src_lang", pa.string()), ("tgt_lang", pa.string()), ("seed", pa.int64()), ("cap", pa.int32()),
    ("template_id", pa.string()), ("prompt_ids", _IDS), ("output_ids", _IDS), ("text", pa.string()),
    ("finish_reason", pa.string()), ("capped", pa.bool_()), ("empty", pa.bool_()), ("generator", pa.string()),
])  # fmt: skip
#: the hop records of a run where some model thinks: the channel of each hop (:mod:`.thinking`) besides; runs
#: without a thinking model keep :data:`HOP_SCHEMA`
THINK_HOP_SCHEMA = pa.schema([
    *HOP_SCHEMA, ("thinking", pa.bool_()), ("think_end", pa.int32()), ("answer", pa.string()),
    ("thought_tokens", pa.int32()), ("answer_tokens", pa.int32()), ("unclosed", pa.bool_()),
])  # fmt: skip
JUDGE_SCHEMA = pa.schema([
    ("model", pa.string()), ("text_id", pa.string()), ("sequence", pa.string()), ("attempt", pa.int16()),
    ("judge_model", pa.string()), ("seed", pa.int64()), ("cap", pa.int32()), ("template_id", pa.string()),
    ("prompt_ids", _IDS), ("output_ids", _IDS), ("raw", pa.string()), ("finish_reason", pa.string()),
    ("parse", pa.string()), ("mqm", pa.float64()), ("judge_score", pa.float64()), ("classification", pa.string()),
    ("n_minor", pa.int32()), ("n_major", pa.int32()), ("n_critical", pa.int32()), ("n_bad_severity", pa.int32()),
    ("issues", pa.string()), ("error", pa.string()), ("generator", pa.string()),
])  # fmt: skip


def hop_file(hop: int) -> str:
    return f"hops/hop-{hop:02d}.parquet"


def judge_file(attempt: int) -> str:
    return f"judge/round-{attempt:02d}.parquet"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_run_manifest(path: Path, *, fmt: str, identity: dict, what: str, other: str) -> dict | None:
    """The run manifest at ``path`` when it is this run's (its ``identity``), ``None`` when there is none; a
    manifest of another kind or of another run (``other`` says what differs) is a one-line error. ``what``
    names the manifest in messages ("round-trip manifest")."""
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise MindcapError(f"{what} {path} is unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        raise MindcapError(f"{path} is not a mindcap-tok {what}")
    if manifest.get("identity") != json.loads(dumps_strict(identity)):
        raise MindcapError(f"{path.parent} holds another {other}; choose a new folder")
    return manifest


class RunStore:
    """A round-trip run folder (see the module docs); ``open`` checks it belongs to the spec's ``identity``."""

    def __init__(self, root: str | os.PathLike[str], identity: dict, spec: dict) -> None:
        self.root = Path(root)
        self._check_folder()
        path = regular_file(self.root / MANIFEST, "round-trip manifest")
        other = "round-trip run (different models, texts, sequences, seed, caps or sampling)"
        found = read_run_manifest(path, fmt=FORMAT, identity=identity, what="round-trip manifest", other=other)
        if found is not None:
            self.manifest = found
        else:
            self.manifest = {"format": FORMAT, "version": VERSION, "identity": identity, "spec": spec, "files": {}}

    def _check_folder(self) -> None:
        check_folder_path(self.root, "round-trip folder")
        ledger = enclosing_ledger(self.root)
        if ledger is not None:
            raise MindcapError(f"round-trip folder {self.root} is or lies inside the ledger {ledger}; choose another")
        if self.root.exists() and not self.root.is_dir():
            raise MindcapError(f"round-trip folder {self.root} exists and is not a folder")
        if not self.root.is_dir():
            return
        entries = sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*"))
        foreign = [e for e in entries if not (_OWN.fullmatch(e) or _TMP.fullmatch(e))]
        if foreign:
            raise MindcapError(
                f"round-trip folder {self.root} holds files that are not a round-trip run's "
                f"({', '.join(foreign[:3])}{', …' if len(foreign) > 3 else ''}); choose a new or empty folder"
            )
        if entries and not (self.root / MANIFEST).is_file() and any(e.endswith(".parquet") for e in entries):
            raise MindcapError(f"round-trip folder {self.root} has Parquet files but no {MANIFEST}; choose another")

    def has(self, name: str) -> bool:
        """Whether the file ``name`` (``hops/hop-01.parquet``) is committed."""
        return name in self.manifest["files"]

    def write(self, name: str, rows: list[dict], schema: pa.Schema) -> None:
        """Write ``rows`` to ``name`` atomically, then commit it in the manifest."""
        # the C library's malloc, not Arrow's default mimalloc, which made these writes 2-3x slower (measured with
        # benchmarks/bench_roundtrip.py, whose waves are seconds apart)
        pool = pa.system_memory_pool()
        # column by column: Table.from_pylist converts row by row, 3-4x slower on a wave's rows
        columns = {f.name: pa.array([r[f.name] for r in rows], f.type, memory_pool=pool) for f in schema}
        buf = io.BytesIO()
        # no dictionaries: on the id lists they cost most of the write and save nothing; zstd packs the rest
        pq.write_table(
            pa.table(columns, schema=schema), buf, compression="zstd", use_dictionary=False, memory_pool=pool
        )
        data = buf.getvalue()
        atomic_write_bytes(self.root / name, data)
        entry = {"rows": len(rows), "bytes": len(data), "sha256": _sha256(data),
                 "written": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        self.manifest["files"][name] = entry
        atomic_write_text(self.root / MANIFEST, dumps_strict(self.manifest) + "\n")

    def read(self, name: str) -> list[dict]:
        """The rows of a committed file, checked against the manifest's SHA-256."""
        path = self.root / name
        try:
            data = regular_file(path, "round-trip file").read_bytes()
        except OSError as exc:
            raise MindcapError(f"round-trip file {path} is missing: {exc}") from exc
        if _sha256(data) != self.manifest["files"][name]["sha256"]:
            raise MindcapError(f"round-trip file {path} differs from the one the manifest lists (altered?)")
        return pq.read_table(io.BytesIO(data)).to_pylist()

    def read_all(self, prefix: str) -> list[dict]:
        """Rows of every committed file under ``prefix`` (``hops/`` or ``judge/``), in file order."""
        return [row for name in sorted(self.manifest["files"]) if name.startswith(prefix) for row in self.read(name)]
