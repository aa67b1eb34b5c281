"""Ledgers of the earlier storage formats (1-4) and the records each holds, for the migration tests.

- format 1: ``tests/data/ledger_v2``, written by the code before tasks (tests/data/make_ledger_v2.py): two MGSM cells
  in version 1's layout
- format 2: that ledger with a record marked in the manifest's ``text_mismatch`` (the one thing version 2 added;
  made by :func:`format_2`)
- format 3: ``tests/data/ledger_v3``, written by the code before format 4 (tests/data/make_ledger_v3.py): an MGSM
  cell in version 1's layout and a Belebele cell with the task columns
- format 4: ``tests/data/ledger_v4`` (tests/data/make_ledger_v4.py): the layouts format 4 wrote, each version-4
  column in some shard, a text-mismatch mark and a generation job
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

from ledger_factory import make_cell

DATA = Path(__file__).parent / "data"
FIXTURES = {1: DATA / "ledger_v2", 2: DATA / "ledger_v2", 3: DATA / "ledger_v3", 4: DATA / "ledger_v4"}
#: the record format 2's copy marks: (arm, item, sample)
MARKED_V2 = ("native", 0, 1)


def _script(name: str) -> ModuleType:
    """A fixture's generating script as a module (its ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location(name, DATA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def records(version: int, qwen) -> list[dict]:
    """The records the ledger of format ``version`` holds, as their writers were given them (the factory's)."""
    if version in (1, 2):
        cell = make_cell(qwen, n_items=2, n_samples=2)
        return cell + make_cell(qwen, n_items=2, n_samples=2, arm="translate-act")
    if version == 3:
        return make_cell(qwen, n_items=2, n_samples=2) + _script("make_ledger_v3").belebele(qwen)
    return [r for recs, _ in _script("make_ledger_v4").cells(qwen).values() for r in recs]


def marked(version: int) -> list[tuple[str, int, int]]:
    """The (arm, item, sample) of the records the ledger of format ``version`` marks as text mismatches."""
    return {2: [MARKED_V2], 4: [("native", 0, 1)]}.get(version, [])


def format_2(root: Path) -> Path:
    """A copy of the format-1 fixture at ``root`` made a format-2 ledger: its manifest marks :data:`MARKED_V2`."""
    shutil.copytree(FIXTURES[1], root)
    manifest = json.loads((root / "_manifest.json").read_text("utf-8"))
    native = next(s["path"] for s in manifest["shards"] if s["arm"] == MARKED_V2[0])
    manifest |= {"version": 2, "text_mismatch": {native: [1]}}  # rows are (item, sample) in order: row 1 is (0, 1)
    (root / "_manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
    return root


def copy(version: int, root: Path) -> Path:
    """A copy of the ledger of format ``version`` at ``root``."""
    if version == 2:
        return format_2(root)
    shutil.copytree(FIXTURES[version], root)
    return root
