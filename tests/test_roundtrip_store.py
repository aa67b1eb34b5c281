"""A round-trip run folder commits its files as the ledger commits shards: staged under a hidden name, listed in
the manifest, renamed into place; read back checked against the manifest's size and SHA-256."""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest

from mindcap_tok.errors import DamagedDataError
from mindcap_tok.roundtrip.store import HOP_SCHEMA, MANIFEST, RunStore, hop_file
from mindcap_tok.store import commit

IDENTITY = {"texts": "h"}
SPEC = {
    "models": [{"name": "m", "path": "p"}],
    "texts": "t",
    "sample": None,
    "sentences_per_text": 1,
    "sequences": {"s": {"langs": ["eng_Latn", "deu_Latn"], "resource": "r"}},
    "seed": 1,
    "judge": {"model": {"name": "j", "path": "p"}},
}


def _rows(text: str) -> list[dict]:
    row = {"model": "m", "text_id": "a", "sequence": "s", "hop": 1, "src_lang": "x", "tgt_lang": "y", "seed": 1}
    row |= {"cap": 8, "template_id": "t", "prompt_ids": [1], "output_ids": [2, 3], "text": text}
    return [row | {"finish_reason": "stop", "capped": False, "empty": False, "generator": "g"}]


def _store(root) -> RunStore:
    return RunStore(root, IDENTITY, SPEC)


def test_a_committed_file_is_listed_with_its_rows_size_and_hash(tmp_path):
    store = _store(tmp_path / "run")
    with store.writing():
        store.write(hop_file(1), _rows("hello"), HOP_SCHEMA)
    path = tmp_path / "run" / hop_file(1)
    data = path.read_bytes()
    entry = json.loads((tmp_path / "run" / MANIFEST).read_text("utf-8"))["files"][hop_file(1)]
    assert (entry["rows"], entry["bytes"], entry["sha256"]) == (1, len(data), hashlib.sha256(data).hexdigest())
    assert pq.read_table(path).column("text").to_pylist() == ["hello"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["hop-01.parquet"]  # nothing hidden left
    assert _store(tmp_path / "run").read(hop_file(1))[0]["text"] == "hello"
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(DamagedDataError, match="content differs from the manifest's SHA-256"):
        _store(tmp_path / "run").read(hop_file(1))


def test_a_file_killed_before_its_manifest_is_not_committed_and_goes(tmp_path, monkeypatch):
    store = _store(tmp_path / "run")
    with store.writing():
        store.write(hop_file(1), _rows("one"), HOP_SCHEMA)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed before the manifest was written")

    with monkeypatch.context() as m:
        m.setattr(commit, "atomic_write_text", killed)
        m.setattr(commit, "discard", lambda finals: None)  # a kill (SIGKILL) cleans nothing up
        with pytest.raises(KeyboardInterrupt), store.writing():
            store.write(hop_file(2), _rows("two"), HOP_SCHEMA)
    hops = tmp_path / "run" / "hops"
    assert sorted(p.name for p in hops.iterdir()) == [".hop-02.parquet.pending", "hop-01.parquet"]
    again = _store(tmp_path / "run")
    assert not again.has(hop_file(2))
    with again.writing():  # the next run removes the leftover, then writes the file again
        assert sorted(p.name for p in hops.iterdir()) == ["hop-01.parquet"]
        again.write(hop_file(2), _rows("two"), HOP_SCHEMA)
    assert [r["text"] for r in _store(tmp_path / "run").read_all("hops/")] == ["one", "two"]


def test_a_file_killed_after_its_manifest_is_read_and_renamed_by_the_next_run(tmp_path):
    store = _store(tmp_path / "run")
    with store.writing():
        store.write(hop_file(1), _rows("one"), HOP_SCHEMA)
    final = tmp_path / "run" / hop_file(1)
    final.rename(final.with_name(".hop-01.parquet.pending"))  # as if killed between the manifest and the rename
    assert _store(tmp_path / "run").read(hop_file(1))[0]["text"] == "one"
    with _store(tmp_path / "run").writing():
        assert final.exists()
