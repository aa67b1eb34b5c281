"""How tests/data/ledger_v4 was written: a ledger of format version 4, its shards in the layouts that version wrote,
written here directly with pyarrow (the code that wrote format 4 is gone).

    PYTHONPATH=src:tests python tests/data/make_ledger_v4.py tests/data/ledger_v4

Format 4 stored each shard with only the columns its records needed: shards whose records all had the default
task lacked ``task`` and ``gold_text`` (version 1's layout), and each of the seven version-4 columns was stored only
in shards where some record's value differed from its fill. The fixture holds four cells, one shard each
(:func:`cells`):

- native: MGSM, version 1's layout; record 1's text is not the decoding of its ids (listed in ``text_mismatch``)
- pivot: MGSM thinking records, version 1's layout plus ``thinking`` and ``think_end``
- code-switched: an MGSM forced record, version 1's layout plus ``thinking``, ``think_end``,
  ``forced_think_close`` and ``forced``
- translate-act: imported Belebele records, the task columns plus ``finish_inferred``, ``cap_inferred`` and
  ``log_output_tokens``

and a generation job record in ``jobs/``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ledger_factory import make_cell, make_record
from mindcap_tok.store.schema import validate_records
from mindcap_tok.store.think import think_end, think_markers
from mindcap_tok.tokenization.load import load_tokenizer

_CELL = pa.dictionary(pa.int32(), pa.string())
_IDS = pa.list_(pa.int32())
#: version 1's shard layout, which format 4 kept for shards of the default task
V1_FIELDS = [
    pa.field("model", _CELL, nullable=False),
    pa.field("arm", _CELL, nullable=False),
    pa.field("lang", _CELL, nullable=False),
    pa.field("item", pa.int64(), nullable=False),
    pa.field("sample", pa.int64(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("cap", pa.int64(), nullable=False),
    pa.field("announced", pa.int64()),
    pa.field("announce_style", pa.string(), nullable=False),
    pa.field("forcing", pa.bool_(), nullable=False),
    pa.field("design", pa.string(), nullable=False),
    pa.field("template_id", pa.string(), nullable=False),
    pa.field("prompt", pa.string(), nullable=False),
    pa.field("prompt_ids", _IDS, nullable=False),
    pa.field("output_ids", _IDS, nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("finish_reason", pa.string(), nullable=False),
    pa.field("gold", pa.int64(), nullable=False),
    pa.field("generator", pa.string(), nullable=False),
    pa.field("generator_version", pa.string(), nullable=False),
    pa.field("tokenizer", pa.string(), nullable=False),
    pa.field("retokenized", pa.bool_(), nullable=False),
    pa.field("n_tokens", pa.int64(), nullable=False),
]
#: version 3's layout for shards of other tasks: ``task`` after ``lang``, ``gold`` nullable and ``gold_text``
V3_FIELDS = [
    *V1_FIELDS[:3],
    pa.field("task", pa.string(), nullable=False),
    *V1_FIELDS[3:17],
    pa.field("gold", pa.int64()),
    pa.field("gold_text", pa.string()),
    *V1_FIELDS[18:],
]
#: the version-4 columns, in the order a shard stored those it had
V4_FIELDS = [
    pa.field("thinking", pa.bool_(), nullable=False),
    pa.field("think_end", pa.int64()),
    pa.field("forced_think_close", pa.bool_(), nullable=False),
    pa.field("forced", pa.bool_()),
    pa.field("finish_inferred", pa.bool_(), nullable=False),
    pa.field("cap_inferred", pa.bool_(), nullable=False),
    pa.field("log_output_tokens", pa.int64()),
]
#: a generation job's record, kept by a migration as it is
JOB = {"name": "fixture", "seeds": [1, 2]}


def _closes(qwen, record: dict) -> int:
    """The output index of the token closing the record's thought."""
    end = think_end(record["output_ids"], think_markers(qwen), tokenizer=qwen)
    assert end is not None
    return end


def cells(qwen) -> dict[str, tuple[list[dict], list[str]]]:
    """Per arm, the cell's records (the test factory's) and the version-4 columns its shard stores."""
    native = make_cell(qwen, n_items=2, n_samples=2)
    native[1] = {**native[1], "text": native[1]["text"] + "!"}  # stored with --allow-text-mismatch
    closed = make_record(qwen, "<think>x</think>#### 18\n", arm="pivot", thinking=True)
    unclosed = make_record(qwen, "<think>still thinking", arm="pivot", item=1, thinking=True, cap=3)
    pivot = [closed | {"think_end": _closes(qwen, closed)}, unclosed]
    # a thought cut at the cap, closed by forcing before the answer line
    forced = make_record(qwen, "<think>x\n</think>\n#### 18\n", arm="code-switched", thinking=True)
    forced |= {"cap": 3, "finish_reason": "length", "forcing": True, "forced": True, "forced_think_close": True}
    forced["think_end"] = _closes(qwen, forced)
    belebele = [
        make_record(qwen, "#### 3\n", arm="translate-act", item=i, task="belebele", gold=str(i + 2)) for i in range(2)
    ]
    belebele[0] |= {"retokenized": True, "finish_inferred": True, "cap_inferred": True, "log_output_tokens": 7}
    return {
        "native": (native, []),
        "pivot": (pivot, ["thinking", "think_end"]),
        "code-switched": ([forced], ["thinking", "think_end", "forced_think_close", "forced"]),
        "translate-act": (belebele, ["finish_inferred", "cap_inferred", "log_output_tokens"]),
    }


def write(root: Path, qwen) -> None:
    shards, marks, tokenizers = [], {}, {}
    for seq, (arm, (records, extra)) in enumerate(cells(qwen).items()):
        table = validate_records(records)
        base = V3_FIELDS if any("task" in r for r in records) else V1_FIELDS
        schema = pa.schema([*base, *(f for f in V4_FIELDS if f.name in extra)])
        part = table.select(schema.names).cast(schema)
        rel = f"model=qwen3-8b/arm={arm}/lang=tha_Thai/part-{seq:06d}-0000000{seq}.parquet"
        (root / rel).parent.mkdir(parents=True)
        pq.write_table(part, root / rel, compression="zstd")
        data = (root / rel).read_bytes()
        written = "2026-12-02T10:00:00+00:00"
        shards.append(
            {"path": rel, "model": "qwen3-8b", "arm": arm, "lang": "tha_Thai", "rows": part.num_rows}
            | {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "written": written}
        )
        if arm == "native":
            marks[rel] = [1]
    tokenizers["qwen3-8b"] = {"sha256": qwen.sha256, "vocab_size": qwen.vocab_size}
    cells_count = {f"qwen3-8b/{s['arm']}/tha_Thai": s["rows"] for s in shards}
    manifest = {
        "format": "mindcap-tok ledger",
        "version": 4,
        "created": "2026-12-02T10:00:00+00:00",
        "updated": "2026-12-02T10:00:00+00:00",
        "rows": sum(s["rows"] for s in shards),
        "cells": dict(sorted(cells_count.items())),
        "tokenizers": tokenizers,
        "shards": shards,
        "text_mismatch": marks,
    }
    (root / "_manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
    (root / "jobs").mkdir()
    (root / "jobs" / "fixture.json").write_text(json.dumps(JOB) + "\n", "utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]), load_tokenizer("qwen3-8b", "/work/shared/tokenizers"))
