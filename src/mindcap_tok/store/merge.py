"""Merge the ledgers of one generation job's parts (``generate --shard I/N``) into one ledger.

Before anything is written every input is checked: each holds the same generation jobs (``_jobs/``) with the same
spec (server connection settings aside: parts may reach different servers), parts of one split (the same N), the
same tokenizer files under each tokenizer name; and a record stored in two inputs (or already in the output) must
be identical, as ``ledger import`` requires. Then each input's cells are appended to the output through
:meth:`Ledger.append` with ``skip_existing``: the store's own commit (atomic, one manifest write per cell), its
own duplicate rule (an identical record is skipped) and its locking. A merge killed midway leaves the output a
valid ledger of what was committed; rerunning it skips those records and finishes. Inputs are only read.

The output's job record is the whole job's (a part's record without ``part``), as a single run writes it; so
``generate JOB`` on the merged ledger regenerates only what a lost part left out.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .._io import atomic_write_text, check_folder_path, enclosing_ledger, regular_file
from ..errors import BadInputError, DamagedDataError
from .ledger import JOBS, MANIFEST, Ledger, key_tuples
from .schema import KEY_COLUMNS, RecordError

#: ``[server]`` keys that say how a server is reached, not what it generates: a resumed job or a part may differ
CONNECTION_KEYS = ("base_url", "api_key_env", "concurrency", "timeout_s", "max_retries")


def job_identity(spec: dict) -> dict:
    """A stored job spec without its server connection settings (:data:`CONNECTION_KEYS`): two runs of one job
    compare equal by it."""
    server = spec.get("server")
    if isinstance(server, dict):
        return {**spec, "server": {k: v for k, v in server.items() if k not in CONNECTION_KEYS}}
    return spec


@dataclass(frozen=True)
class MergeResult:
    """What :func:`merge_ledgers` did: records read from the inputs, added to the output, skipped as identical
    duplicates (among the inputs, or already in the output), the jobs, and per job the parts merged and the parts
    of its split that none of the inputs holds."""

    out_dir: str
    inputs: int
    read: int
    added: int
    skipped: int
    jobs: list[str]
    parts: dict[str, list[int]] = field(default_factory=dict)
    missing: dict[str, list[int]] = field(default_factory=dict)


def _jobs(root: Path) -> dict[str, dict[str, Any]]:
    """The generation job records of the ledger at ``root`` (name -> record)."""
    folder = root / JOBS
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(regular_file(path, "job record").read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise DamagedDataError(f"job record {path} is unreadable: {exc}", path=path) from exc
        if not isinstance(record, dict) or not isinstance(record.get("spec"), dict):
            raise DamagedDataError(f"job record {path} holds no job spec", path=path)
        out[path.stem] = record
    return out


def _part(record: dict[str, Any]) -> tuple[int, int] | None:
    part = record.get("part")
    return None if part is None else (int(part["index"]), int(part["count"]))


def _check_jobs(ledgers: list[Path], target: Path | None) -> dict[str, dict[str, Any]]:
    """Every input's jobs, checked to be one job (or one set) split one way; return the first input's records."""
    first, base = ledgers[0], _jobs(ledgers[0])
    if not base:
        raise BadInputError(
            f"ledger {first} holds no generation job ({JOBS}/); `ledger merge` joins the ledgers of one job's parts"
        )
    for root in ledgers[1:] + ([target] if target is not None else []):
        jobs = _jobs(root)
        what = "the output ledger" if root == target else "ledger"
        if root == target and not jobs and not (root / MANIFEST).exists():
            continue  # an empty output folder
        if sorted(jobs) != sorted(base):
            raise BadInputError(
                f"{what} {root} holds job(s) {', '.join(sorted(jobs)) or 'none'}, ledger {first} "
                f"{', '.join(sorted(base))}: merge joins the ledgers of one job"
            )
        for name, record in jobs.items():
            mine, theirs = job_identity(record["spec"]), job_identity(base[name]["spec"])
            if mine != theirs:
                keys = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
                raise BadInputError(
                    f"{what} {root} holds job {name} with other settings than ledger {first} "
                    f"({', '.join(keys)} differ): merge joins the ledgers of one job"
                )
            part, other = _part(record), _part(base[name])
            if root == target and part is not None:
                raise BadInputError(
                    f"output ledger {root} holds part {part[0]}/{part[1]} of job {name}; give a new folder"
                )
            if part is not None and other is not None and part[1] != other[1]:
                raise BadInputError(
                    f"ledger {root} holds part {part[0]}/{part[1]} of job {name}, ledger {first} part "
                    f"{other[0]}/{other[1]}: the parts of one split have one N"
                )
    return base


def _check_tokenizers(ledgers: list[Ledger]) -> None:
    """Refuse ledgers whose ids under one tokenizer name came from different tokenizer files."""
    seen: dict[str, tuple[str, Path]] = {}
    for led in ledgers:
        for name, entry in led.tokenizers().items():
            digest, where = seen.setdefault(name, (entry["sha256"], led.root))
            if digest != entry["sha256"]:
                raise BadInputError(
                    f"ledger {led.root} holds ids of tokenizer {name!r} from sha256 {entry['sha256'][:12]}…, ledger "
                    f"{where} from {digest[:12]}…: merge joins ledgers of one tokenizer"
                )


def _check_duplicates(ledgers: list[Ledger]) -> None:
    """Refuse a record stored in two of ``ledgers`` with other content (``Ledger.matches``, the rule of ``ledger
    import``); identical ones pass. Only key columns are read unless some key is stored twice."""
    seen: dict[tuple[Any, ...], int] = {}
    for i, led in enumerate(ledgers):
        earlier: dict[int, list[int]] = defaultdict(list)
        for row, key in enumerate(key_tuples(led.read(columns=KEY_COLUMNS))):
            j = seen.setdefault(key, i)
            if j != i:
                earlier[j].append(row)
        if not earlier:
            continue
        table = led.read()
        for j, rows in earlier.items():
            try:
                ledgers[j].matches(table.take(pa.array(rows)))
            except RecordError as exc:
                raise BadInputError(f"cannot merge {led.root}: {exc}") from exc


def _marks(marked: set[tuple[Any, ...]]) -> Callable[[pa.Table, np.ndarray], np.ndarray | None] | None:
    """``Ledger.append``'s ``check_new`` keeping an input's text-mismatch marks (``None`` where it marks none)."""
    if not marked:
        return None
    return lambda table, _rows: np.array([k in marked for k in key_tuples(table)], bool)


def merge_ledgers(
    ledgers: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> MergeResult:
    """Merge the ledgers of one job's parts into the ledger at ``out_dir`` (created, or one an earlier merge of
    the job began or finished); see the module docs. ``on_progress(done, total)`` after each input cell. Refusals
    are one line, before anything is written; the inputs are never changed."""
    roots = [check_folder_path(p, "ledger folder") for p in ledgers]
    if not roots:
        raise BadInputError("give the ledgers to merge")
    target = check_folder_path(out_dir, "output folder")
    resolved = [r.resolve() for r in roots]
    if len(set(resolved)) != len(resolved):
        raise BadInputError("a ledger is given twice; give each part's ledger once")
    for root in roots:
        if not (root / MANIFEST).is_file():
            raise BadInputError(f"no ledger at {root} (no {MANIFEST}); give the ledgers `generate --shard` wrote")
        if target.resolve() == root.resolve() or target.resolve().is_relative_to(root.resolve()):
            raise BadInputError(f"output folder {target} is (inside) the input ledger {root}; give a new folder")
    inside = enclosing_ledger(target.parent)
    if inside is not None:
        raise BadInputError(f"output folder {target} is inside the ledger {inside}; choose a folder outside it")
    out = Ledger(target)
    out.check_new_location()
    inputs = [Ledger(r) for r in roots]
    jobs = _check_jobs(roots, target if target.is_dir() else None)
    existing = [out] if out.exists() else []
    _check_tokenizers(existing + inputs)
    _check_duplicates(existing + inputs)

    parts: dict[str, list[int]] = {}
    missing: dict[str, list[int]] = {}
    for name in jobs:
        split = [p for p in (_part(_jobs(r)[name]) for r in roots) if p is not None]
        if split:
            parts[name] = sorted({i for i, _ in split})
            missing[name] = sorted(set(range(split[0][1])) - set(parts[name]))
    for name, record in jobs.items():
        path = target / JOBS / f"{name}.json"
        text = json.dumps({k: v for k, v in record.items() if k != "part"}, indent=1, ensure_ascii=False) + "\n"
        if not path.is_file() or path.read_text("utf-8") != text:
            atomic_write_text(path, text)

    cells = [(led, cell) for led in inputs for cell in sorted({s.cell for s in led.shards()})]
    read = added = 0
    for done, (led, cell) in enumerate(cells, 1):
        table = led.read(cell[0], cell[1], lang=cell[2])
        written = out.append(
            table,
            led.tokenizers(),
            skip_existing=True,
            check_new=_marks(set(key_tuples(led.text_mismatches()))),
        )
        read += table.num_rows
        added += sum(s.rows for s in written)
        if on_progress is not None:
            on_progress(done, len(cells))
    return MergeResult(str(target), len(roots), read, added, read - added, sorted(jobs), parts, missing)
