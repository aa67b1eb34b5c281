"""What a stored Parquet shard holds, compared without the file's bytes: the bytes embed the writer's version
(``parquet-cpp-arrow version ...``), which changes with pyarrow, while schema, layout and values must not."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from mindcap_tok.store.ledger import ShardInfo


def _layout(meta: pq.FileMetaData) -> list[tuple[int, list[tuple[str, str]]]]:
    """Rows of each row group, and each column chunk's path and compression."""
    groups = (meta.row_group(i) for i in range(meta.num_row_groups))
    return [
        (g.num_rows, [(g.column(j).path_in_schema, g.column(j).compression) for j in range(g.num_columns)])
        for g in groups
    ]


def assert_same_shard(new: Path, old: Path) -> None:
    """``new`` stores what ``old`` stores: the same Parquet and Arrow schemas (with their metadata), row groups,
    column compression and values."""
    a, b = pq.ParquetFile(new), pq.ParquetFile(old)
    assert a.schema.equals(b.schema), (new, a.schema, b.schema)  # physical and logical types, repetition
    assert a.schema_arrow.equals(b.schema_arrow, check_metadata=True), (new, a.schema_arrow, b.schema_arrow)
    assert _layout(a.metadata) == _layout(b.metadata), new
    assert a.read().equals(b.read(), check_metadata=True), new


def assert_same_shards(root: Path, shards: Sequence[ShardInfo], old_root: Path) -> None:
    """The ``shards`` of the ledger at ``root`` store, cell by cell, what the ledger at ``old_root`` stores (one
    shard per cell in both; shard paths carry a random part, so cells are matched by model, arm and language)."""
    old = json.loads((old_root / "_manifest.json").read_text("utf-8"))["shards"]
    old_by_cell = {(s["model"], s["arm"], s["lang"]): old_root / s["path"] for s in old}
    new_by_cell = {(s.model, s.arm, s.lang): root / s.path for s in shards}
    assert len(old_by_cell) == len(old), "one shard per cell in the fixture"
    assert new_by_cell.keys() == old_by_cell.keys() and len(shards) == len(old)
    for cell, path in new_by_cell.items():
        assert_same_shard(path, old_by_cell[cell])
