"""`ledger import --from inspect` error paths that need no inspect_ai, and the over-cap rule for retokenized ids."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.ingest.inspect_logs import log_files, read_inspect_logs
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.schema import validate_records


def _import(*args):
    return CliRunner().invoke(cli, ["ledger", "import", *map(str, args)])


def test_without_the_extra_the_import_names_it(tmp_path, qwen, monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # `import inspect_ai...` raises ImportError
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    log = tmp_path / "run.eval"
    log.write_bytes(b"PK")
    with pytest.raises(
        MindcapError, match=r"importing inspect_ai logs needs inspect-ai: pip install 'mindcap-tok\[inspect\]'"
    ):
        read_inspect_logs([log], tokenizer=qwen)
    result = _import(log, "--from", "inspect", "--tokenizer", "qwen3", "--out-dir", tmp_path / "L")
    assert result.exit_code != 0
    assert result.output.strip().splitlines() == [
        "error: importing inspect_ai logs needs inspect-ai: pip install 'mindcap-tok[inspect]'"
    ]
    assert not Ledger(tmp_path / "L").exists()


def test_paths_that_are_not_inspect_logs_are_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MindcapError, match=r"notes\.txt: not an inspect log \(a \.eval or \.json file\)"):
        log_files([tmp_path / "notes.txt"])
    with pytest.raises(MindcapError, match=r"empty: folder holds no inspect log \(\*\.eval, \*\.json\)"):
        log_files([tmp_path / "empty"])
    result = _import(tmp_path / "empty", "--from", "inspect", "--tokenizer", "qwen3", "--out-dir", tmp_path / "L")
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1, result.output
    assert "folder holds no inspect log" in result.output


def test_jsonl_imports_one_file(tmp_path):
    result = _import(tmp_path, "--out-dir", tmp_path / "L")
    assert result.exit_code == 2 and "--from jsonl imports one file" in result.output
    result = _import(tmp_path, "--from", "inspect", "--out-dir", tmp_path / "L")
    assert result.exit_code == 2 and "--from inspect needs --tokenizer" in result.output


def test_retokenized_ids_may_exceed_the_cap_generated_ones_may_not(qwen):
    rec = make_record(qwen, "#### 18", finish_reason="length")
    rec["cap"] = len(rec["output_ids"]) - 1
    with pytest.raises(MindcapError, match=r"4 output tokens exceed the cap 3"):
        validate_records([rec])
    table = validate_records([{**rec, "retokenized": True}])
    assert table.column("n_tokens").to_pylist() == [4] and table.column("cap").to_pylist() == [3]


def test_eval_task_names_map_as_lm_eval_names_do(tmp_path):
    """An inspect eval named as lm-eval names its tasks: the task, language and arm the lm-eval importer maps."""
    from mindcap_tok.ingest.inspect_logs import mapped_task
    from mindcap_tok.tasks.load import load_task
    from task_files import SMALL

    task, lang, arm = mapped_task("mgsm_native_cot_de", None)
    assert (task.name, lang, arm) == ("mgsm", "deu_Latn", "native")
    task, lang, arm = mapped_task("mgsm_en_cot_th", None)
    assert (task.name, lang, arm) == ("mgsm", "tha_Thai", "pivot")
    (tmp_path / "tiny.toml").write_text(SMALL, "utf-8")
    tiny = load_task(tmp_path / "tiny.toml")
    task, lang, arm = mapped_task("tiny_de", tiny)
    assert (task.name, lang, arm) == ("tiny", "deu_Latn", tiny.native)
    assert mapped_task("tiny_mgsm", None) is None and mapped_task("mgsm", None) is None
