"""Ledger store: round trip, readers (pandas, pyarrow, datasets), schema checks, immutability, verify, recovery."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from ledger_factory import make_cell, make_record
from mindcap_tok.errors import MindcapError
from mindcap_tok.store.ledger import MANIFEST, Ledger
from mindcap_tok.store.schema import validate_records


@pytest.fixture(scope="module")
def two_cells(qwen):
    return make_cell(qwen) + make_cell(qwen, arm="translate-act", lang="deu_Latn", n_items=2, n_samples=1)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["model", "arm", "lang", "item", "sample"]).reset_index(drop=True)


def test_round_trip_and_cell_reads(tmp_path, qwen, two_cells):
    led = Ledger(tmp_path / "L")
    shards = led.append(two_cells, qwen)
    assert sorted(s.cell for s in shards) == [
        ("qwen3-8b", "native", "tha_Thai"),
        ("qwen3-8b", "translate-act", "deu_Latn"),
    ]
    back = _sorted(led.to_pandas())
    assert len(back) == 8 and len(led) == 8
    src = _sorted(pd.DataFrame(two_cells))
    for col in ("model", "arm", "lang", "item", "sample", "seed", "cap", "text", "prompt", "gold", "finish_reason"):
        assert back[col].tolist() == src[col].tolist(), col
    assert [list(x) for x in back["output_ids"]] == src["output_ids"].tolist()
    assert back["n_tokens"].tolist() == [len(x) for x in src["output_ids"]]
    assert back["announce_style"].unique().tolist() == ["none"] and back["design"].unique().tolist() == ["replay"]
    assert back["announced"].isna().all() and not back["retokenized"].any()
    th = led.read(lang="th", columns=["item", "lang"])  # alias resolved, projection kept
    assert th.column_names == ["item", "lang"] and set(th.column("lang").to_pylist()) == {"tha_Thai"}
    assert th.num_rows == 6 and th.schema.field("lang").type == pa.string()
    assert led.read(arm=["pivot"]).num_rows == 0
    manifest = json.loads((tmp_path / "L" / MANIFEST).read_text())
    assert manifest["rows"] == 8 and manifest["cells"] == {
        "qwen3-8b/native/tha_Thai": 6,
        "qwen3-8b/translate-act/deu_Latn": 2,
    }
    assert manifest["tokenizers"]["qwen3-8b"]["sha256"] == qwen.sha256


@pytest.mark.slow  # importing `datasets` takes tens of seconds on a loaded machine
def test_readable_by_pandas_pyarrow_and_datasets(tmp_path, qwen, two_cells):
    root = tmp_path / "L"
    Ledger(root).append(two_cells, qwen)
    (root / "model=qwen3-8b").is_dir()
    expect = _sorted(pd.DataFrame(two_cells))[["model", "arm", "lang", "item", "sample", "text"]]
    via_pandas = _sorted(pd.read_parquet(root).astype({"model": str, "arm": str, "lang": str}))
    via_pyarrow = _sorted(pq.read_table(root).to_pandas().astype({"model": str, "arm": str, "lang": str}))
    via_dataset = _sorted(ds.dataset(root).to_table().to_pandas().astype({"model": str, "arm": str, "lang": str}))
    import datasets

    hf = datasets.load_dataset("parquet", data_files=str(root / "**" / "*.parquet"), split="train")
    via_hf = _sorted(hf.to_pandas())
    for got in (via_pandas, via_pyarrow, via_dataset, via_hf):
        pd.testing.assert_frame_equal(got[expect.columns].reset_index(drop=True), expect, check_dtype=False)
    assert hf.features["output_ids"].feature.dtype == "int32"


def test_append_never_rewrites_existing_shards(tmp_path, qwen, two_cells):
    led = Ledger(tmp_path / "L")
    first = led.append(two_cells[:6], qwen)
    before = {s.path: (tmp_path / "L" / s.path).read_bytes() for s in first}
    led.append(two_cells[6:], qwen)
    more = [make_record(qwen, "#### 1", item=9, sample=0)]
    led.append(more, qwen)  # same cell as the first shard: a new shard, the old one untouched
    for path, data in before.items():
        assert (tmp_path / "L" / path).read_bytes() == data
    assert len(led.shards()) == 3 and len(led) == 9
    assert led.verify().ok


def _err(records, match, **kw):
    with pytest.raises(MindcapError, match=match):
        validate_records(records, **kw)


def test_schema_violations_name_the_record(qwen):
    good = make_cell(qwen, n_items=2, n_samples=2)
    no_gold = [dict(r) for r in good]
    del no_gold[2]["gold"]
    _err(no_gold, r"record 2 \(model=qwen3-8b arm=native lang=tha_Thai cap=4096 item=1 sample=0\) lacks gold")
    _err(pd.DataFrame(good).drop(columns=["text"]), r"lack required column\(s\) text")
    bad_type = [dict(r) for r in good]
    bad_type[1]["item"] = "one"
    _err(bad_type, r"record 1 \(.*item=one sample=1\): item = 'one' is not a valid int64")
    _err(pd.DataFrame(good).astype({"item": str}), r"column 'item' has type (large_)?string, expected int64")
    dup = [dict(r) for r in good] + [dict(good[1])]
    _err(dup, r"record 4 \(.*item=0 sample=1\) duplicates record 1 \(.*item=0 sample=1\)")
    oov = [dict(r) for r in good]
    oov[3] = {**oov[3], "output_ids": [*oov[3]["output_ids"], qwen.vocab_size + 5]}
    _err(
        oov,
        rf"record 3 \(.*item=1 sample=1\): output_ids holds id {qwen.vocab_size + 5}, outside the vocabulary",
        vocab_sizes={"qwen3-8b": qwen.vocab_size},
    )
    neg = [dict(r) for r in good]
    neg[0] = {**neg[0], "prompt_ids": [-1]}
    _err(neg, r"record 0 \(.*\): prompt_ids holds an id outside")
    arm = [dict(r) for r in good]
    arm[1]["arm"] = "english"
    _err(arm, r"record 1 \(.*arm=english.*\): arm = 'english'; use one of native, translate-act")
    style = [dict(r) for r in good]
    style[2] = {**style[2], "announced": 128, "announce_style": "none"}
    _err(style, r"record 2 \(.*announced=128.*\): announce_style 'none' does not fit announced = 128")
    over = [dict(r) for r in good]
    over[1] = {**over[1], "cap": 3}
    _err(over, r"record 1 \(.*cap=3.*\): \d+ output tokens exceed the cap 3")
    lang = [dict(r) for r in good]
    lang[3]["lang"] = "klingon"
    _err(lang, r"record 3 \(.*lang=klingon.*\): unknown language 'klingon'")
    fin = [dict(r) for r in good]
    fin[0]["finish_reason"] = "eos"
    _err(fin, r"record 0 .*finish_reason = 'eos'; use one of stop, length")
    _err([{**good[0], "colour": "red"}], r"unknown column\(s\) colour")
    floats = pd.DataFrame(good).assign(
        announced=[np.nan, 256.0, np.nan, np.nan], announce_style=["none", "tag", "none", "none"]
    )
    assert validate_records(floats).column("announced").to_pylist() == [None, 256, None, None]


def test_duplicates_against_the_stored_ledger(tmp_path, qwen, two_cells):
    led = Ledger(tmp_path / "L")
    led.append(two_cells, qwen)
    with pytest.raises(MindcapError, match=r"record 0 \(.*item=0 sample=0\) is already in the ledger"):
        led.append(two_cells[:1], qwen)
    assert led.append(two_cells[:2], qwen, skip_existing=True) == []
    other_tok = {"qwen3-8b": type(qwen)(name="qwen3-8b", tokenizer=qwen.tokenizer, source="x")}  # same ids, no file
    object.__setattr__(other_tok["qwen3-8b"], "sha256", "0" * 64)
    with pytest.raises(MindcapError, match="use another tokenizer name"):
        led.append([make_record(qwen, "x", item=99)], other_tok)


def test_verify_detects_truncated_altered_missing_and_stray_shards(tmp_path, qwen, two_cells):
    root = tmp_path / "L"
    led = Ledger(root)
    a, b = led.append(two_cells, qwen)
    assert led.verify().ok
    pa_, pb = root / a.path, root / b.path
    data = pa_.read_bytes()
    pa_.write_bytes(data[: len(data) // 2])
    report = led.verify()
    assert not report.ok and any(a.path in p and "truncated" in p for p in report.problems)
    altered = bytearray(data)
    altered[len(altered) // 2] ^= 0xFF
    pa_.write_bytes(bytes(altered))
    assert any("hash differs" in p for p in led.verify().problems)
    pa_.write_bytes(data)
    os.remove(pb)
    assert led.verify().problems == [f"{b.path}: missing"]
    stray = root / "model=qwen3-8b" / "arm=pivot" / "lang=tha_Thai"
    stray.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), stray / "part-9.parquet")
    assert any("not listed in the manifest" in p for p in led.verify().problems)
    with pytest.raises(MindcapError, match="cannot read ledger shard"):
        led.read(arm="translate-act")


#: another process appending records (JSON, argv[2]) to the ledger argv[1], killed (as abruptly as SIGKILL: no
#: cleanup runs) as it is about to replace the manifest, the commit point
KILLED_APPEND = """
import json, os, sys
from pathlib import Path
from mindcap_tok.store.ledger import MANIFEST, Ledger
from mindcap_tok.tokenization.load import load_tokenizer

root, records, tokenizers = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()), sys.argv[3]
real_replace = os.replace

def replace(src, dst):
    if Path(dst) == root / MANIFEST:
        os._exit(9)
    real_replace(src, dst)

os.replace = replace
Ledger(root).append(records, load_tokenizer("qwen3-8b", tokenizers))
"""


def test_interrupted_append_leaves_a_valid_ledger_and_rerun_works(tmp_path, qwen, two_cells, config):
    root = tmp_path / "L"
    led = Ledger(root)
    led.append(two_cells[:6], qwen)
    before = led.to_pandas()
    (tmp_path / "records.json").write_text(json.dumps(two_cells[6:]), "utf-8")
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    args = [str(root), str(tmp_path / "records.json"), str(config.tokenizers_dir.value)]
    killed = subprocess.run([sys.executable, "-c", KILLED_APPEND, *args], env=env, capture_output=True, text=True)
    assert killed.returncode == 9, killed.stderr
    assert list(root.glob("**/.part-*.pending"))  # the half-done shard exists, hidden from readers
    report = led.verify()
    assert report.ok and any("interrupted append" in n for n in report.notes)
    assert len(pd.read_parquet(root)) == 6
    pd.testing.assert_frame_equal(led.to_pandas(), before)
    led.append(two_cells[6:], qwen)  # rerun: succeeds, and removes the leftover
    assert not list(root.glob("**/.part-*.pending")) and len(led) == 8 and led.verify().ok


def test_crash_after_commit_is_rolled_forward(tmp_path, qwen, two_cells):
    root = tmp_path / "L"
    led = Ledger(root)
    (shard,) = led.append(two_cells[:6], qwen)
    final = root / shard.path
    final.rename(final.with_name("." + final.name + ".pending"))  # as if killed between commit and rename
    assert led.read().num_rows == 6
    report = led.verify()
    assert report.ok and any("not yet renamed" in n for n in report.notes)
    led.append(two_cells[6:], qwen)
    assert final.exists() and led.verify().ok and not report.problems


def test_info_counts_and_quantiles(tmp_path, qwen):
    recs = [make_record(qwen, "a " * (10 * (i + 1)), item=i, sample=s, cap=40) for i in range(4) for s in range(2)]
    led = Ledger(tmp_path / "L")
    led.append(recs, qwen)
    info = led.info()
    assert len(info) == 1
    row = info.iloc[0]
    lengths = np.array([len(r["output_ids"]) for r in recs])
    assert row["records"] == 8 and row["items"] == 4 and row["samples_per_item"] == 2
    assert row["cap_hit"] == pytest.approx(np.mean(lengths >= 40))
    assert row["len_p50"] == pytest.approx(np.quantile(lengths, 0.5)) and row["len_max"] == lengths.max()
    assert hashlib.sha256((tmp_path / "L" / led.shards()[0].path).read_bytes()).hexdigest() == led.shards()[0].sha256


def test_reading_an_absent_ledger_is_an_error(tmp_path):
    with pytest.raises(MindcapError, match="no ledger at"):
        Ledger(tmp_path / "nothing").read()


def test_model_filters_accept_registry_aliases(tmp_path, qwen):
    from ledger_factory import make_record

    led = Ledger(tmp_path / "led")
    led.append([make_record(qwen, "#### 18\n", item=i) for i in range(3)], qwen)  # stored as qwen3-8b
    for name in ("qwen3-8b", "qwen3", "QWEN3", ["qwen3", "llama3.1"]):
        assert led.read(model=name, columns=["item"]).num_rows == 3
    assert led.read(model="llama3.1", columns=["item"]).num_rows == 0


#: the ledger's columns in the order shards store them (docs/storage.md)
ALL_COLUMNS = [
    "model",
    "arm",
    "lang",
    "task",
    "item",
    "sample",
    "seed",
    "cap",
    "announced",
    "announce_style",
    "forcing",
    "design",
    "template_id",
    "prompt",
    "prompt_ids",
    "output_ids",
    "text",
    "finish_reason",
    "gold",
    "gold_text",
    "generator",
    "generator_version",
    "tokenizer",
    "retokenized",
    "n_tokens",
    "thinking",
    "think_end",
    "forced_think_close",
    "forced",
    "finish_inferred",
    "cap_inferred",
    "log_output_tokens",
    "output_partial",
    "reasoning_tokens",
    "token_limit",
    "reasoning_exhausted",
]


def test_every_shard_stores_every_column(tmp_path, qwen):
    """MGSM records that use no optional column and a thinking Belebele record: each shard holds all columns."""
    thought = make_record(qwen, "#### 3\n", arm="translate-act", task="belebele", gold="3", thinking=True)
    led = Ledger(tmp_path / "L")
    led.append([*make_cell(qwen, n_items=1, n_samples=2), thought], qwen)
    assert [pq.read_schema(led.root / s.path).names for s in led.shards()] == [ALL_COLUMNS, ALL_COLUMNS]
    frame = pd.read_parquet(led.root)  # a generic reader sees every value, none missing
    assert frame["thinking"].tolist().count(True) == 1 and frame["task"].notna().all()
    assert frame["forced_think_close"].notna().all() and led.manifest()["version"] == 5
