"""`ledger import --from lighteval` refuses what is not one lighteval run it can read: one line, exit 2, no ledger.

The files here are written with pyarrow, not by lighteval (lighteval's own details are imported in
test_import_lighteval_evals.py, in the evals environment): they are the bad input. A control built the same way
imports, so each refusal is the one the case names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from mindcap_tok.cli.main import cli

NAME = "details_mgsm:de|0_2026-01-01T00-00-00.000000.parquet"


def _details(path: Path, output_ids: list[int], *, gold: str = " 18") -> Path:
    """A one-row Parquet file in the shape of lighteval's details (doc, model_response, metric)."""
    doc = {
        "query": "Frage: 9+9?",
        "choices": [gold],
        "gold_index": 0,
        "id": "0",
        "task_name": "mgsm:de|0",
        "generation_size": 16,
    }
    response = {
        "input": "Frage: 9+9?",
        "input_tokens": [1, 2],
        "text": ["x"],
        "output_tokens": [output_ids],
        "text_post_processed": None,
        "reasonings": [],
    }
    reasonings = pa.field("reasonings", pa.list_(pa.string()))
    table = pa.table(
        {
            "doc": pa.array([doc]),
            "metric": pa.array([{"em": 1.0}]),
            "model_response": pa.array(
                [response],
                pa.struct(
                    [
                        pa.field("input", pa.string()),
                        pa.field("input_tokens", pa.list_(pa.int64())),
                        pa.field("text", pa.list_(pa.string())),
                        pa.field("output_tokens", pa.list_(pa.list_(pa.int64()))),
                        pa.field("text_post_processed", pa.list_(pa.string())),
                        reasonings,
                    ]
                ),
            ),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _import(path: Path, ledger: Path, tokenizer: str = "qwen3-8b"):
    args = ["ledger", "import", str(path), "--from", "lighteval", "--tokenizer", tokenizer, "--out-dir", str(ledger)]
    return CliRunner().invoke(cli, args)


def _refused(res, ledger: Path, pattern: str) -> None:
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(pattern, lines[0]), res.output
    assert not ledger.exists()


def test_a_details_shaped_file_imports(tmp_path, qwen):
    """The control: the shape the cases below break imports, its ids stored as given."""
    from mindcap_tok.store import Ledger

    ids = qwen.encode(" 9 + 9 = 18")
    res = _import(_details(tmp_path / NAME, ids), tmp_path / "L")
    assert res.exit_code == 0, res.output
    (rec,) = Ledger(tmp_path / "L").read().to_pylist()
    assert rec["output_ids"] == ids and not rec["retokenized"] and rec["gold"] == 18 and rec["cap"] == 16


def test_a_parquet_file_that_is_not_lightevals(tmp_path):
    path = tmp_path / NAME
    pq.write_table(pa.table({"doc_id": [0], "resps": [["18"]]}), path)
    _refused(_import(path, tmp_path / "L"), tmp_path / "L", r"not a lighteval details file .*no doc column")


def test_a_file_that_is_not_parquet(tmp_path):
    path = tmp_path / NAME
    path.write_text('{"doc_id": 0}\n')
    _refused(_import(path, tmp_path / "L"), tmp_path / "L", r"not a readable Parquet file")


def test_a_file_not_named_as_details(tmp_path, qwen):
    path = _details(tmp_path / "run.parquet", qwen.encode(" 18"))
    _refused(_import(path, tmp_path / "L"), tmp_path / "L", r"run\.parquet: not a lighteval details file")


@pytest.mark.parametrize("other", ["samples_mgsm_native_cot_de_2026.jsonl", "log.eval", "extra.parquet"])
def test_a_folder_mixing_formats(tmp_path, qwen, other):
    _details(tmp_path / "run" / NAME, qwen.encode(" 18"))
    (tmp_path / "run" / "sub").mkdir()
    (tmp_path / "run" / "sub" / other).write_text("{}\n")
    _refused(
        _import(tmp_path / "run", tmp_path / "L"), tmp_path / "L", rf"mixes lighteval details .*{re.escape(other)}"
    )


def test_ids_outside_the_tokenizers_vocabulary(tmp_path, qwen):
    path = _details(tmp_path / NAME, [5, qwen.vocab_size + 3])
    _refused(
        _import(path, tmp_path / "L"),
        tmp_path / "L",
        rf"output_tokens holds id {qwen.vocab_size + 3}, outside the vocabulary of tokenizer qwen3-8b",
    )


def test_a_missing_file(tmp_path):
    _refused(_import(tmp_path / NAME, tmp_path / "L"), tmp_path / "L", r"no such file or folder")


def test_a_run_without_a_cap(tmp_path, qwen):
    path = _details(tmp_path / NAME, qwen.encode(" 18"))
    table = pq.read_table(path)
    doc = table.column("doc").combine_chunks()
    fields = [doc.field(i) for i in range(doc.type.num_fields)]
    names = [doc.type.field(i).name for i in range(doc.type.num_fields)]
    fields[names.index("generation_size")] = pa.nulls(1, pa.int64())
    pq.write_table(table.set_column(0, "doc", pa.StructArray.from_arrays(fields, names)), path)
    _refused(_import(path, tmp_path / "L"), tmp_path / "L", r"row 0: the run set no cap")
