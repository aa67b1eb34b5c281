"""Import (with retokenizing and resuming), `ledger info|verify` and `score` as a user runs them."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.ingest.jsonl import import_jsonl
from mindcap_tok.store.ledger import Ledger


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rows(qwen):
    out = []
    for item in range(3):
        for sample in range(2):
            right = sample == 0
            text = f"คิด {item}\n#### {item * 1000 + (0 if right else 1)}\n"
            rec = make_record(qwen, text, item=item, sample=sample, gold=item * 1000)
            rec["lang"] = "th"  # an alias: the import resolves it
            out.append(rec)
    del out[1]["output_ids"]  # produced elsewhere without ids: tokenized on import
    out[2]["gold"] = "1,000"  # MGSM-style gold with a thousands separator
    return out


def test_import_retokenizes_and_resolves(tmp_path, qwen, rows):
    src = _jsonl(tmp_path / "gen.jsonl", rows)
    res = run(["ledger", "import", str(src), "--out-dir", str(tmp_path / "L"), "--tokenizer", "qwen3-8b"])
    assert res.exit_code == 0, res.output
    assert "imported 6 of 6 records" in res.output and "1 retokenized" in res.output
    frame = Ledger(tmp_path / "L").to_pandas().sort_values(["item", "sample"]).reset_index(drop=True)
    assert frame["lang"].unique().tolist() == ["tha_Thai"] and frame["gold"].tolist() == [0, 0, 1000, 1000, 2000, 2000]
    assert frame["retokenized"].tolist() == [False, True, False, False, False, False]
    assert list(frame["output_ids"][1]) == qwen.tokenizer.encode(rows[1]["text"], add_special_tokens=False).ids
    assert list(frame["output_ids"][0]) == rows[0]["output_ids"]


def test_interrupted_import_resumes(tmp_path, qwen, rows, monkeypatch):
    src = _jsonl(tmp_path / "gen.jsonl", rows)
    calls = {"n": 0}
    real = Ledger.append

    def dying(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed mid-import")
        return real(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(Ledger, "append", dying)
        with pytest.raises(KeyboardInterrupt):
            import_jsonl(src, tmp_path / "L", tokenizer=qwen, batch_records=2)
    led = Ledger(tmp_path / "L")
    assert led.verify().ok and len(led) == 2
    again = import_jsonl(src, tmp_path / "L", tokenizer=qwen, batch_records=2)
    assert (again.read, again.added, again.skipped) == (6, 4, 2)
    assert len(led) == 6 and led.verify().ok


def test_import_errors_name_the_line(tmp_path, qwen, rows):
    bad = [dict(r) for r in rows]
    bad[3] = {**bad[3], "arm": "english"}
    src = _jsonl(tmp_path / "bad.jsonl", bad)
    with pytest.raises(MindcapError, match=r"bad\.jsonl:4: record 3 \(.*arm=english.*\): arm = 'english'"):
        import_jsonl(src, tmp_path / "L", tokenizer=qwen)
    (tmp_path / "broken.jsonl").write_text(json.dumps(rows[0]) + "\n{not json\n", encoding="utf-8")
    res = CliRunner().invoke(
        cli,
        [
            "ledger",
            "import",
            str(tmp_path / "broken.jsonl"),
            "--out-dir",
            str(tmp_path / "M"),
            "--tokenizer",
            "qwen3-8b",
        ],
    )
    assert res.exit_code == 2 and "broken.jsonl:2: not valid JSON" in res.output
    assert not (tmp_path / "M" / "_manifest.json").exists()


def test_info_verify_and_score(tmp_path, qwen, rows):
    root = tmp_path / "L"
    import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), root, tokenizer=qwen)
    info = run(["ledger", "info", str(root), "--format", "json"])
    cell = json.loads(info.output)
    assert len(cell) == 1 and cell[0]["records"] == 6 and cell[0]["items"] == 3 and cell[0]["cap_hit"] == 0
    assert run(["ledger", "verify", str(root)]).output.startswith("ok: 1 shards, 6 records")
    out = run(["score", "--ledger", str(root), "--budgets", "1,64", "--format", "csv", "--lang", "th"])
    curves = pd.read_csv(io.StringIO(out.output))
    assert list(curves.columns[:3]) == ["model", "arm", "lang"]
    assert {"budget", "accuracy", "n", "longer_than_budget_share", "emitted_share"} <= set(curves.columns)
    # sample 0 of every item is right, sample 1 wrong; nothing is readable after one token
    assert curves.set_index("budget")["accuracy"].to_dict() == {1: 0.0, 64: 0.5}
    assert curves.set_index("budget")["emitted_share"].to_dict() == {1: 0.0, 64: 1.0}
    table = run(["score", "--ledger", str(root), "--budgets", "64", "--save", str(tmp_path / "S")])
    assert "0.5000" in table.output and "tha_Thai" in table.output
    saved = pd.read_parquet(tmp_path / "S" / "by_record.parquet")
    assert saved["correct"].tolist().count(1) == 3
    shard = root / Ledger(root).shards()[0].path
    shard.write_bytes(shard.read_bytes()[:-10])
    bad = CliRunner().invoke(cli, ["ledger", "verify", str(root)])
    assert bad.exit_code == 1 and "truncated or altered" in bad.output
    none = CliRunner().invoke(cli, ["score", "--ledger", str(root), "--arm", "pivot"])
    assert none.exit_code == 2 and "no records" in none.output


def test_the_help_example_line_imports(tmp_path, qwen):
    """The JSONL line shown by `ledger import --help` is a valid record whose ids decode to its text."""
    helptext = CliRunner().invoke(cli, ["ledger", "import", "--help"]).output
    start = helptext.index('{"model"')
    line = " ".join(part.strip() for part in helptext[start : helptext.index("}", start) + 1].splitlines())
    record = json.loads(line)
    assert qwen.decode(record["output_ids"]) == record["text"] and qwen.decode(record["prompt_ids"]) == record["prompt"]
    src = tmp_path / "one.jsonl"
    src.write_text(line + "\n", "utf-8")
    res = CliRunner().invoke(cli, ["ledger", "import", str(src), "--out-dir", str(tmp_path / "led")])
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**record, "language": "th"}) + "\n", "utf-8")
    res = CliRunner().invoke(cli, ["ledger", "import", str(bad), "--out-dir", str(tmp_path / "led2")])
    assert res.exit_code != 0 and "unknown key(s) language" in res.output and "optionally announced" in res.output
