"""``ledger migrate``: a ledger of each earlier storage format (1-4, :mod:`old_ledgers`) converted once into the
current format, nothing lost and every score the same; every other reader refuses an old ledger in one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import old_ledgers
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import BadInputError, DamagedDataError
from mindcap_tok.scoring import score_ledger
from mindcap_tok.store import Ledger, migrate, validate_records
from mindcap_tok.store.migrate import old_layout
from mindcap_tok.store.schema import STORAGE_SCHEMA

VERSIONS = (1, 2, 3, 4)
#: what a record that leaves out an optional column holds
FILLS = {"thinking": False, "think_end": None, "forced_think_close": False, "forced": None, "finish_inferred": False}
FILLS |= {"cap_inferred": False, "log_output_tokens": None, "task": "mgsm", "gold_text": None}
FILLS |= {"output_partial": False, "reasoning_tokens": None, "token_limit": None, "reasoning_exhausted": False}


def _key(row: dict) -> tuple:
    return (row["arm"], row["item"], row["sample"], row["cap"])


def _files(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture(params=VERSIONS, ids=[f"format-{v}" for v in VERSIONS])
def migrated(request, tmp_path) -> tuple[int, Path, Ledger]:
    """(format version, the old ledger, the migrated one)."""
    old = old_ledgers.copy(request.param, tmp_path / "old")
    before = _files(old)
    migrate(old, tmp_path / "new")
    assert _files(old) == before  # the old ledger is left as it was
    return request.param, old, Ledger(tmp_path / "new")


def test_every_record_is_kept_with_every_column(migrated, qwen):
    version, _, new = migrated
    rows = {_key(r): r for r in new.read().to_pylist()}
    expected = {_key(r): r for r in old_ledgers.records(version, qwen)}
    assert rows.keys() == expected.keys() and len(new) == len(expected) and new.verify().ok
    for key, rec in expected.items():
        if isinstance(rec["gold"], str):  # a text gold is stored in gold_text
            rec = {**rec, "gold": None, "gold_text": rec["gold"]}
        given = {c: rows[key][c] for c in rec}
        assert given == rec, key  # every value given, as given
        assert {c: rows[key][c] for c in FILLS if c not in rec} == {c: v for c, v in FILLS.items() if c not in rec}
        assert rows[key]["n_tokens"] == len(rec["output_ids"])


def test_generic_parquet_readers_read_the_migrated_folder(migrated, qwen):
    """pandas and pyarrow read the folder as one table, the job records beside the shards notwithstanding."""
    import pandas as pd

    version, _, new = migrated
    assert len(pd.read_parquet(new.root)) == len(old_ledgers.records(version, qwen))


def test_scores_are_identical_before_and_after(migrated, qwen):
    """The migrated ledger scores as the records the old one holds (those its writers were given) score."""
    version, _, new = migrated
    after = score_ledger(new.read(), qwen, budgets=[4, 16, 64])
    before = score_ledger(validate_records(old_ledgers.records(version, qwen)), qwen, budgets=[4, 16, 64])
    for name in ("by_budget", "by_record"):
        a, b = getattr(after, name), getattr(before, name)
        order = [c for c in ("arm", "cap", "item", "sample", "budget") if c in a]
        pd.testing.assert_frame_equal(
            a.sort_values(order).reset_index(drop=True), b.sort_values(order).reset_index(drop=True)
        )
    assert after.by_record["correct"].sum() > 0 and after.by_budget["score"].sum() > 0


def test_shards_marks_tokenizers_and_jobs_are_kept(migrated):
    version, old, new = migrated
    was, now = json.loads((old / "_manifest.json").read_text()), new.manifest()
    assert now["version"] == 5 and now["created"] == was["created"] and now["tokenizers"] == was["tokenizers"]
    assert [(s.path, s.cell, s.rows) for s in new.shards()] == [
        (s["path"], (s["model"], s["arm"], s["lang"]), s["rows"]) for s in was["shards"]
    ]
    assert now["text_mismatch"] == was.get("text_mismatch", {})
    marks = new.text_mismatches().to_pylist()
    assert [(m["arm"], m["item"], m["sample"]) for m in marks] == old_ledgers.marked(version)
    for s in new.shards():  # every shard holds every column
        assert pq.read_schema(new.root / s.path).remove_metadata().equals(STORAGE_SCHEMA)
    assert (
        _files(old / "jobs") == _files(new.root / "_jobs")
        if (old / "jobs").exists()
        else not (new.root / "_jobs").exists()
    )


def test_the_cli_converts_once_and_scores_the_same(tmp_path, qwen):
    old = old_ledgers.copy(1, tmp_path / "old")
    fresh = Ledger(tmp_path / "fresh")
    fresh.append(old_ledgers.records(1, qwen), qwen)
    res = CliRunner().invoke(cli, ["ledger", "migrate", str(old), "--out-dir", str(tmp_path / "new")])
    assert res.exit_code == 0 and res.stdout == "", res.output
    assert res.stderr.strip() == (
        f"migrated 8 records in 2 shards (2 cells, 0 generation jobs) from format version 1 into {tmp_path / 'new'}"
    )
    score = ["score", "--budgets", "16,64", "--format", "json", "--ledger"]
    new_scores = CliRunner().invoke(cli, [*score, str(tmp_path / "new")])
    fresh_scores = CliRunner().invoke(cli, [*score, str(fresh.root)])
    assert fresh_scores.exit_code == 0 and fresh_scores.stdout.strip(), fresh_scores.output
    assert new_scores.exit_code == 0 and new_scores.stdout == fresh_scores.stdout
    again = CliRunner().invoke(cli, ["ledger", "migrate", str(tmp_path / "new"), "--out-dir", str(tmp_path / "x")])
    assert again.exit_code == 2 and again.stderr.strip().endswith(
        "is already format version 5; there is nothing to migrate"
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_readers_refuse_an_old_ledger_in_one_line_naming_migrate(tmp_path, qwen, version):
    old = old_ledgers.copy(version, tmp_path / "old")
    hint = f"has format version {version}; this mindcap-tok reads version 5: convert it once with "
    hint += f"`mindcap-tok ledger migrate {old} --out-dir NEW`"
    with pytest.raises(BadInputError, match="ledger migrate"):
        Ledger(old).read()
    with pytest.raises(BadInputError, match="ledger migrate"):
        Ledger(old).append(old_ledgers.records(1, qwen)[:1], qwen)
    for args in (["ledger", "info", str(old)], ["ledger", "verify", str(old)], ["score", "--ledger", str(old)]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and res.stderr.splitlines() == [f"error: ledger {old} {hint}"], (args, res.output)


def test_a_damaged_shard_stops_the_migration_and_leaves_nothing(tmp_path):
    old = old_ledgers.copy(3, tmp_path / "old")
    shard = next(old.rglob("arm=translate-act/*/*.parquet"))
    data = bytearray(shard.read_bytes())
    data[100] ^= 1
    shard.write_bytes(bytes(data))
    with pytest.raises(DamagedDataError, match="content differs from the manifest's SHA-256"):
        migrate(old, tmp_path / "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # no new ledger, no staging folder


def test_the_output_folder_must_be_new_and_outside_the_ledger(tmp_path):
    old = old_ledgers.copy(1, tmp_path / "old")
    (tmp_path / "taken").mkdir()
    with pytest.raises(BadInputError, match="already exists"):
        migrate(old, tmp_path / "taken")
    with pytest.raises(BadInputError, match="is inside the ledger"):
        migrate(old, old / "new")


def test_the_layouts_of_the_earlier_formats():
    legacy = pq.read_schema(next(old_ledgers.FIXTURES[3].rglob("arm=native/*/*.parquet")))
    tasks = pq.read_schema(next(old_ledgers.FIXTURES[3].rglob("arm=translate-act/*/*.parquet")))
    thinking = pq.read_schema(next(old_ledgers.FIXTURES[4].rglob("arm=pivot/*/*.parquet")))
    assert old_layout(legacy) and old_layout(tasks) and old_layout(thinking)
    assert old_layout(tasks.append(STORAGE_SCHEMA.field("log_output_tokens")))
    assert not old_layout(tasks.remove(0))  # a column missing that every layout holds
    assert not old_layout(legacy.append(STORAGE_SCHEMA.field("think_end")).append(STORAGE_SCHEMA.field("thinking")))
    assert not old_layout(pa.schema([]))
    assert not old_layout(tasks.append(STORAGE_SCHEMA.field("output_partial")))  # no earlier version wrote it
