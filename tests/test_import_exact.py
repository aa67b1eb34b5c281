"""JSONL import is exact: repeated keys, capped lengths, canonical model names, text versus ids, interruptions."""

from __future__ import annotations

import errno
import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

from ledger_factory import make_cell, make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.ingest.jsonl import ImportInterrupted, import_jsonl
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.schema import to_canonical
from mindcap_tok.tokenization.load import load_tokenizer


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _records(led: Ledger):
    return led.to_pandas().sort_values(["model", "arm", "lang", "item", "sample"]).reset_index(drop=True)


# -- repeated JSON keys -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spelled", "key"),
    [('"item": 0, "item": 7', "item"), ('"gold": {"a": 1, "a": 2}', "a")],  # top level, and nested
)
def test_a_repeated_json_key_is_an_error_naming_the_line(tmp_path, qwen, spelled, key):
    ok = make_record(qwen, "#### 18", item=0)
    body = json.dumps({k: v for k, v in make_record(qwen, "#### 18", item=1).items() if k not in ("item", "gold")})
    src = tmp_path / "gen.jsonl"
    src.write_text(json.dumps(ok) + "\n" + body[:-1] + ", " + spelled + (', "gold": 18' * (key == "item")) + "}\n")
    with pytest.raises(MindcapError, match=rf"gen\.jsonl:2: key '{key}' appears twice in one JSON object"):
        import_jsonl(src, tmp_path / "L", tokenizer=qwen)
    assert not Ledger(tmp_path / "L").exists()


# -- finish_reason length and the cap ---------------------------------------------------------------------------
def test_length_with_fewer_ids_than_the_cap_is_an_error(tmp_path, qwen):
    rows = [make_record(qwen, "#### 18", item=0), make_record(qwen, "#### 18", item=1, finish_reason="length")]
    n = len(rows[1]["output_ids"])  # 4 ids ("####", " ", "1", "8"), cap 4096
    with pytest.raises(
        MindcapError,
        match=rf"gen\.jsonl:2: record 1 \(.*item=1 .*\): finish_reason 'length' with {n} output ids, "
        r"fewer than the cap 4096",
    ):
        import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L", tokenizer=qwen)


def test_more_ids_than_the_cap_is_an_error(tmp_path, qwen):
    rec = make_record(qwen, "#### 18", finish_reason="length")
    rec["cap"] = len(rec["output_ids"]) - 1
    with pytest.raises(MindcapError, match=r"gen\.jsonl:1: .*4 output tokens exceed the cap 3"):
        import_jsonl(_jsonl(tmp_path / "gen.jsonl", [rec]), tmp_path / "L", tokenizer=qwen)


def test_exactly_the_cap_imports_with_either_finish_reason(tmp_path, qwen):
    """``length`` at the cap is a cut decode; ``stop`` at the cap is a decode whose cap-th token ended it."""
    ids = [*qwen.encode("#### 18"), qwen.tokenizer.token_to_id("<|im_end|>")]
    stop = make_record(qwen, "#### 18", item=0, cap=len(ids), finish_reason="stop")
    stop["output_ids"] = ids
    length = make_record(qwen, "#### 18", item=1, cap=4, finish_reason="length")
    retok = make_record(qwen, "#### 18", item=2, finish_reason="length")  # no ids: retokenized, not checked
    del retok["output_ids"]
    res = import_jsonl(_jsonl(tmp_path / "gen.jsonl", [stop, length, retok]), tmp_path / "L", tokenizer=qwen)
    assert (res.added, res.retokenized) == (3, 1)


# -- model names ------------------------------------------------------------------------------------------------
def test_aliases_are_one_model_for_the_key_the_duplicate_check_and_readers(tmp_path, qwen):
    rows = make_cell(qwen, n_items=4, n_samples=2)  # 8 records
    root = tmp_path / "L"
    first = import_jsonl(_jsonl(tmp_path / "a.jsonl", rows), root, tokenizer=qwen)
    assert first.added == 8
    for alias in ("qwen3", "Qwen3-8B"):
        again = import_jsonl(
            _jsonl(tmp_path / f"{alias}.jsonl", [{**r, "model": alias} for r in rows]), root, tokenizer=qwen
        )
        assert (again.read, again.added, again.skipped) == (8, 0, 8)
    led = Ledger(root)
    assert len(led) == 8 and led.verify().ok
    assert led.read(model="qwen3-8b").num_rows == 8 and led.read(model="Qwen3-8B").num_rows == 8
    info = led.info()
    assert info["model"].tolist() == ["qwen3-8b"] and info["records"].tolist() == [8]


def test_an_alias_first_is_stored_by_its_registry_name_and_a_path_as_given(tmp_path, qwen):
    rows = make_cell(qwen, n_items=1, n_samples=2)
    rows = [{**rows[0], "model": "qwen3"}, {**rows[1], "model": "/models/my-qwen"}]
    import_jsonl(_jsonl(tmp_path / "a.jsonl", rows), tmp_path / "L", tokenizer=qwen)
    led = Ledger(tmp_path / "L")
    assert sorted(led.to_pandas()["model"]) == ["/models/my-qwen", "qwen3-8b"]
    assert sorted(s.model for s in led.shards()) == ["/models/my-qwen", "qwen3-8b"]


def test_shards_of_an_old_ledger_filed_under_an_alias_read_by_registry_name():
    # a ledger written before names were canonical holds the alias in its (dictionary-encoded) model column
    col = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["qwen3", "my/model"]))
    table = to_canonical(pa.table({"model": col, "item": [0, 1, 2]}))
    assert table.column("model").to_pylist() == ["qwen3-8b", "my/model", "qwen3-8b"]


# -- text versus ids ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tok_name", ["qwen", "llama"])
def test_a_text_that_is_not_the_decoding_of_its_ids_is_an_error(tmp_path, request, tok_name):
    tok = request.getfixturevalue(tok_name)
    model = {"qwen": "qwen3-8b", "llama": "llama-3.1-8b"}[tok_name]
    rows = make_cell(tok, n_items=2, n_samples=1, model=model)
    rows[1]["text"] = rows[1]["text"].replace("#### 11", "#### 12")
    at = rows[1]["text"].index("#### 12") + 6
    with pytest.raises(
        MindcapError,
        match=rf"gen\.jsonl:2: record 1 \(.*item=1 .*\): text is not the decoding of output_ids with tokenizer "
        rf"{model} \(from character {at} the text reads '2\\n', the ids decode to '1\\n'\); "
        r"pass --allow-text-mismatch to store it marked",
    ):
        import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L")
    assert not Ledger(tmp_path / "L").exists()


def test_text_with_special_tokens_skipped_or_kept_agrees(tmp_path, qwen):
    end = qwen.tokenizer.token_to_id("<|im_end|>")
    skipped = make_record(qwen, "#### 18", item=0)
    kept = make_record(qwen, "#### 18", item=1)
    for rec in (skipped, kept):
        rec["output_ids"] = [*rec["output_ids"], end]
    kept["text"] = "#### 18<|im_end|>"
    res = import_jsonl(_jsonl(tmp_path / "gen.jsonl", [skipped, kept]), tmp_path / "L", tokenizer=qwen)
    assert res.added == 2 and Ledger(tmp_path / "L").text_mismatches().num_rows == 0


def test_allow_text_mismatch_stores_and_marks_the_records(tmp_path, qwen):
    rows = make_cell(qwen, n_items=3, n_samples=2)
    rows[3]["text"] += "!"  # item 1 sample 1
    src = _jsonl(tmp_path / "gen.jsonl", rows)
    root = tmp_path / "L"
    res = CliRunner().invoke(
        cli, ["ledger", "import", str(src), "--out-dir", str(root), "--tokenizer", "qwen3-8b", "--allow-text-mismatch"]
    )
    assert res.exit_code == 0, res.output
    led = Ledger(root)
    assert len(led) == 6 and led.verify().ok and led.manifest()["text_mismatch"] == {led.shards()[0].path: [3]}
    marked = led.text_mismatches().to_pylist()
    assert [(m["model"], m["item"], m["sample"]) for m in marked] == [("qwen3-8b", 1, 1)]
    assert led.info()["text_mismatch"].tolist() == [1]
    stored = _records(led)
    assert stored.loc[(stored["item"] == 1) & (stored["sample"] == 1), "text"].item() == rows[3]["text"]
    again = import_jsonl(src, root, tokenizer=qwen, allow_text_mismatch=True)  # a rerun skips them, marks kept
    assert again.skipped == 6 and led.text_mismatches().num_rows == 1


def test_a_ledger_without_marks_lists_none(tmp_path, qwen):
    import_jsonl(_jsonl(tmp_path / "gen.jsonl", make_cell(qwen)), tmp_path / "L", tokenizer=qwen)
    led = Ledger(tmp_path / "L")
    assert led.manifest()["text_mismatch"] == {}
    assert led.text_mismatches().num_rows == 0 and led.info()["text_mismatch"].tolist() == [0]


# -- interrupted and failed imports ---------------------------------------------------------------------------
def _fail_on_second(monkeypatch, name, exc):
    real = getattr(Ledger, name)
    calls = {"n": 0}

    def step(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise exc
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Ledger, name, step)


@pytest.mark.parametrize(
    ("step", "exc", "kind", "why"),
    [
        ("append", KeyboardInterrupt(), ImportInterrupted, "interrupted"),
        ("_write_shards", OSError(errno.ENOSPC, "No space left on device"), MindcapError, "No space left on device"),
    ],
)
def test_a_stopped_import_says_what_was_committed_and_a_rerun_completes_it(
    tmp_path, qwen, monkeypatch, step, exc, kind, why
):
    rows = make_cell(qwen, n_items=3, n_samples=2)  # 6 records: batches of lines 1-2, 3-4, 5-6
    src = _jsonl(tmp_path / "gen.jsonl", rows)
    root = tmp_path / "L"
    with monkeypatch.context() as m:
        _fail_on_second(m, step, exc)
        with pytest.raises(kind) as stopped:
            import_jsonl(src, root, tokenizer=qwen, batch_records=2)
    assert str(stopped.value) == (
        f"import of {src} stopped at line 3 ({why}): 2 records committed to {root} in 1 new shard; rerun to resume"
    )
    led = Ledger(root)
    assert led.verify().ok and len(led) == 2
    assert _records(led)[["item", "sample"]].values.tolist() == [[0, 0], [0, 1]]
    again = import_jsonl(src, root, tokenizer=qwen, batch_records=2)
    assert (again.added, again.skipped) == (4, 2)
    import_jsonl(src, tmp_path / "whole", tokenizer=qwen, batch_records=2)
    assert _records(led).equals(_records(Ledger(tmp_path / "whole"))) and led.verify().ok


def test_ctrl_c_in_the_cli_is_one_line_with_the_count(tmp_path, qwen, monkeypatch):
    src = _jsonl(tmp_path / "gen.jsonl", make_cell(qwen, n_items=3, n_samples=2))
    _fail_on_second(monkeypatch, "append", KeyboardInterrupt())
    res = CliRunner().invoke(
        cli, ["ledger", "import", str(src), "--out-dir", str(tmp_path / "L"), "--tokenizer", "qwen3-8b", "--batch", "4"]
    )
    assert res.exit_code == 130
    assert res.output.splitlines() == [
        f"error: import of {src} stopped at line 5 (interrupted): 4 records committed to {tmp_path / 'L'} "
        "in 1 new shard; rerun to resume"
    ]


@pytest.mark.parametrize("model", ["gpt-4o", "llama-2"])
def test_text_check_in_other_tokenizer_families(tmp_path, config, model):
    tok = load_tokenizer(model, config.tokenizers_dir.value)
    end = min(tok.special_ids)  # <|endoftext|> (tiktoken), <unk> (SentencePiece)
    ids = [*tok.encode("hello world\n#### 5"), end]
    base = {
        "model": model,
        "arm": "native",
        "lang": "de",
        "sample": 0,
        "seed": 1,
        "cap": 64,
        "prompt": "Q?",
        "prompt_ids": tok.encode("Q?"),
        "output_ids": ids,
        "finish_reason": "stop",
        "gold": 5,
        "generator": "t",
    }
    kept = tok.decode(ids)  # the special token as text
    rows = [{**base, "item": 0, "text": "hello world\n#### 5"}, {**base, "item": 1, "text": kept}]
    assert kept != rows[0]["text"]
    res = import_jsonl(_jsonl(tmp_path / "ok.jsonl", rows), tmp_path / "L", tokenizers_dir=config.tokenizers_dir.value)
    assert res.added == 2
    bad = [{**base, "item": 2, "text": "hello world\n#### 6"}]
    with pytest.raises(MindcapError, match=r"bad\.jsonl:1: .*the text reads '6', the ids decode to '5"):
        import_jsonl(_jsonl(tmp_path / "bad.jsonl", bad), tmp_path / "L", tokenizers_dir=config.tokenizers_dir.value)
