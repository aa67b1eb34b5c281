"""Format 4: columns for reasoning models and imported runs, each stored only where a record uses it.

A ledger written by the release before (``tests/data/ledger_v3``, written by tests/data/make_ledger_v3.py from
that code) reads unchanged, the new columns at their fills; shards whose records use none of them store
what that release stored (schema, layout and values).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ledger_factory import make_cell, make_record
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.schema import EXTRA_COLUMNS, STORAGE_SCHEMA, storage_version
from shard_content import assert_same_shards

V3 = Path(__file__).parent / "data" / "ledger_v3"
FILLS = {"thinking": False, "think_end": None, "forced_think_close": False, "forced": None, "finish_inferred": False}
FILLS |= {"cap_inferred": False, "log_output_tokens": None}


def _fixture_records(qwen) -> list[dict]:
    spec = importlib.util.spec_from_file_location("make_ledger_v3", V3.parent / "make_ledger_v3.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)  # defines belebele(); its __main__ block does not run
    return make_cell(qwen, n_items=2, n_samples=2) + maker.belebele(qwen)


@pytest.fixture
def v3(tmp_path) -> Ledger:
    shutil.copytree(V3, tmp_path / "L")
    return Ledger(tmp_path / "L")


def test_the_new_columns_and_their_fills():
    assert EXTRA_COLUMNS == FILLS


def test_a_format_3_ledger_reads_unchanged_with_the_new_columns_at_their_fills(v3, qwen):
    rows = {(r["arm"], r["item"], r["sample"]): r for r in v3.read().to_pylist()}
    expected = {(r["arm"], r["item"], r["sample"]): r for r in _fixture_records(qwen)}
    assert rows.keys() == expected.keys() and v3.verify().ok
    for key, rec in expected.items():
        if isinstance(rec["gold"], str):  # a text gold is stored in gold_text
            rec = {**rec, "gold": None, "gold_text": rec["gold"]}
        assert {c: rows[key][c] for c in rec} == rec, key
        assert {c: rows[key][c] for c in FILLS} == FILLS


def test_records_that_use_none_of_them_are_stored_as_format_3_stored_them(tmp_path, qwen):
    led = Ledger(tmp_path / "L")
    led.append(_fixture_records(qwen), qwen)
    assert_same_shards(led.root, led.shards(), V3)  # the same schema, layout and values: no new column
    assert led.manifest()["version"] == 3


def test_a_shard_stores_only_the_new_columns_its_records_use(v3, qwen):
    thought = make_record(qwen, "<think>x</think>#### 18\n", arm="pivot", thinking=True, think_end=3)
    plain = make_record(qwen, "#### 18\n", arm="pivot", item=1, thinking=True)
    v3.append([thought, plain], qwen)
    assert v3.manifest()["version"] == 4 and v3.verify().ok
    pivot = next(s for s in v3.shards() if s.arm == "pivot")
    names = pq.read_schema(v3.root / pivot.path).names
    assert [n for n in names if n in FILLS] == ["thinking", "think_end"]
    got = {r["item"]: (r["thinking"], r["think_end"], r["log_output_tokens"]) for r in v3.read(arm="pivot").to_pylist()}
    assert got == {0: (True, 3, None), 1: (True, None, None)}
    assert v3.read(arm="native", columns=["thinking", "think_end"]).to_pylist()[0] == {
        "thinking": False,
        "think_end": None,
    }


def test_storage_versions_of_the_layouts():
    legacy = pq.read_schema(next(V3.rglob("arm=native/*/*.parquet")))
    tasks = pq.read_schema(next(V3.rglob("arm=translate-act/*/*.parquet")))
    assert storage_version(legacy) == 1 and storage_version(tasks) == 3
    assert storage_version(STORAGE_SCHEMA) == 4
    assert storage_version(tasks.append(STORAGE_SCHEMA.field("log_output_tokens"))) == 4
    assert storage_version(legacy.append(STORAGE_SCHEMA.field("thinking"))) == 4
    assert storage_version(tasks.remove(0)) == 0  # a column missing that every layout holds
    assert (
        storage_version(tasks.append(STORAGE_SCHEMA.field("think_end")).append(STORAGE_SCHEMA.field("thinking"))) == 0
    )
