"""Task items from each source kind, on small rows written here in each dataset's real schema."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.tasks.datasets import MAX_CSV_FIELD, item_count, load_items
from mindcap_tok.tasks.load import load_task, parse_task

#: Belebele's schema (facebook/belebele): every field a string, correct_answer_num "1".."4"
BELEBELE = [
    {
        "link": "https://en.wikibooks.org/wiki/x",
        "question_number": 1,
        "flores_passage": "Anna hat drei Katzen.",
        "question": "Wie viele Katzen hat Anna?",
        "mc_answer1": "eine",
        "mc_answer2": "zwei",
        "mc_answer3": "drei",
        "mc_answer4": "vier",
        "correct_answer_num": "3",
        "dialect": "deu_Latn",
        "ds": "2023-05-03",
    },
    {
        "link": "https://en.wikibooks.org/wiki/y",
        "question_number": 2,
        "flores_passage": "Der Zug fährt um acht.",
        "question": "Wann fährt der Zug?",
        "mc_answer1": "um acht",
        "mc_answer2": "um neun",
        "mc_answer3": "um zehn",
        "mc_answer4": "nie",
        "correct_answer_num": "1",
        "dialect": "deu_Latn",
        "ds": "2023-05-03",
    },
]
#: Global-MMLU-Lite's schema (CohereLabs/Global-MMLU-Lite): options option_a..option_d, answer a letter
MMLU = [
    {
        "sample_id": "astronomy/test/0",
        "subject": "astronomy",
        "subject_category": "STEM",
        "question": "Quelle planète est la plus grande ?",
        "option_a": "Mars",
        "option_b": "Jupiter",
        "option_c": "Vénus",
        "option_d": "Mercure",
        "answer": "B",
        "required_knowledge": "[]",
        "time_sensitive": "No",
        "reference": "[]",
        "culture": "[]",
        "region": "[]",
        "country": "[]",
        "cultural_sensitivity_label": "CA",
        "is_annotated": True,
    },
]


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """``datasets`` keeps its Arrow cache under the test's folder."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def _hub_folder(root: Path, config: str, split_file: str, write) -> None:
    """A folder in the hub's layout: a README whose YAML names the config's data files, and the file."""
    (root / split_file).parent.mkdir(parents=True, exist_ok=True)
    write(root / split_file)
    readme = f"---\nconfigs:\n- config_name: {config}\n  data_files:\n  - split: test\n    path: {split_file}\n---\n"
    (root / "README.md").write_text(readme, "utf-8")


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def _parquet(path: Path, rows: list[dict]) -> None:
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_belebele_through_datasets_on_a_hub_folder(tmp_path, hf_cache):
    _hub_folder(tmp_path / "facebook" / "belebele", "deu_Latn", "data/deu_Latn.jsonl", lambda p: _jsonl(p, BELEBELE))
    items = load_items(load_task("belebele"), "deu_Latn", data_dir=tmp_path)
    assert [it.gold for it in items] == ["3", "1"]
    assert items[0].fields == {
        "passage": "Anna hat drei Katzen.",
        "question": "Wie viele Katzen hat Anna?",
        "answer1": "eine",
        "answer2": "zwei",
        "answer3": "drei",
        "answer4": "vier",
    }
    assert (items[1].item, items[1].lang) == (1, "deu_Latn")


def test_global_mmlu_lite_through_datasets_on_a_hub_folder_of_parquet(tmp_path, hf_cache):
    root = tmp_path / "CohereLabs" / "Global-MMLU-Lite"
    _hub_folder(root, "fr", "fr/test-00000-of-00001.parquet", lambda p: _parquet(p, MMLU))
    (item,) = load_items(load_task("global-mmlu-lite"), "fra_Latn", data_dir=tmp_path)
    assert item.gold == "B"
    assert item.fields == {
        "question": "Quelle planète est la plus grande ?",
        "a": "Mars",
        "b": "Jupiter",
        "c": "Vénus",
        "d": "Mercure",
    }


def test_mmath_from_the_authors_json_under_the_data_folder(tmp_path):
    (tmp_path / "mmath").mkdir()
    rows = [{"question": "Compute $1/2 + 1/4$.", "answer": "\\frac{3}{4}", "data_source": "MATH-500"}]
    (tmp_path / "mmath" / "zh.json").write_text(json.dumps(rows), "utf-8")
    (item,) = load_items(load_task("mmath"), "zho_Hans", data_dir=tmp_path)
    assert (item.gold, item.fields) == ("\\frac{3}{4}", {"question": "Compute $1/2 + 1/4$."})


TASK = """
name = "local"
version = 1
licence = "CC0-1.0"
languages = ["eng_Latn", "deu_Latn"]
native = "native"
comparator = "translate-act"
[source]
files = "rows-{{lang}}.SUFFIX"
fields = {{ q = "question" }}
[answer]
type = "{answer}"
[gold]
type = "{gold}"
normalise = ["strip", "no-commas"]
[arms.native.templates."*"]
instruction = "Solve."
body = "{{q}}"
[arms.translate-act.templates."*"]
instruction = "Translate, then solve."
body = "{{q}}"
"""


def _local(tmp_path: Path, suffix: str, answer: str = "integer", gold: str = "integer"):
    text = TASK.format(answer=answer, gold=gold).replace("SUFFIX", suffix)
    (tmp_path / "t.toml").write_text(text, "utf-8")
    return load_task(tmp_path / "t.toml")


def test_local_files_of_each_kind_give_the_same_items(tmp_path):
    rows = [{"question": "2 + 3?", "answer": "5"}, {"question": "1000 * 5.6?", "answer": " 5,600 "}]
    _jsonl(tmp_path / "rows-eng_Latn.jsonl", rows)
    (tmp_path / "rows-eng_Latn.json").write_text(json.dumps(rows), "utf-8")
    _parquet(tmp_path / "rows-eng_Latn.parquet", rows)
    with open(tmp_path / "rows-eng_Latn.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["question", "answer"])
        writer.writeheader()
        writer.writerows(rows)
    for suffix in ("jsonl", "json", "parquet", "csv"):
        items = load_items(_local(tmp_path, suffix), "eng_Latn")
        assert [(it.fields["q"], it.gold) for it in items] == [("2 + 3?", 5), ("1000 * 5.6?", 5600)], suffix


def test_item_count_refuses_languages_of_different_lengths(tmp_path):
    _jsonl(tmp_path / "rows-eng_Latn.jsonl", [{"question": "a", "answer": 1}, {"question": "b", "answer": 2}])
    _jsonl(tmp_path / "rows-deu_Latn.jsonl", [{"question": "a", "answer": 1}])
    task = _local(tmp_path, "jsonl")
    assert item_count(task, ["eng_Latn"]) == 2
    with pytest.raises(MindcapError, match="different item counts by language"):
        item_count(task, ["eng_Latn", "deu_Latn"])
    assert item_count(load_task("mgsm"), ["tha_Thai"]) == 250


NOT_INTEGER = "must be an integer (ASCII digits, an optional '-'), got"


@pytest.mark.parametrize(
    ("row", "gold", "message"),
    [
        ({"answer": "5"}, "integer", "rows-eng_Latn.jsonl: row 1: no field 'question' (the task's q)"),
        ({"question": 7, "answer": "5"}, "integer", "row 1: field 'question' must be a string, got int"),
        ({"question": "x"}, "integer", "row 1: no field 'answer' (the task's gold)"),
        ({"question": "x", "answer": "five"}, "integer", f"row 1: field 'answer' {NOT_INTEGER} 'five'"),
        ({"question": "x", "answer": True}, "integer", f"row 1: field 'answer' {NOT_INTEGER} true"),
        # str.isdigit() takes '²' and int() refuses it; a second sign; past Python's 4,300-digit limit of int()
        ({"question": "x", "answer": "²"}, "integer", f"row 1: field 'answer' {NOT_INTEGER} '²'"),
        ({"question": "x", "answer": "--5"}, "integer", f"row 1: field 'answer' {NOT_INTEGER} '--5'"),
        ({"question": "x", "answer": "7" * 5000}, "integer", f"row 1: field 'answer' {NOT_INTEGER} '777777"),
        ({"question": "x", "answer": [[1]]}, "integer", f"row 1: field 'answer' {NOT_INTEGER} [[1]]"),
        # the ledger's gold column is a 64-bit integer
        ({"question": "x", "answer": str(2**63)}, "integer", f"row 1: field 'answer' = {2**63} is beyond the 64-bit"),
        ({"question": "x", "answer": -(2**63) - 1}, "integer", f"row 1: field 'answer' = {-(2**63) - 1} is beyond"),
        ({"question": "x", "answer": 3}, "string", "row 1: field 'answer' must be a string, got int"),
    ],
)
def test_a_bad_row_is_one_line_naming_the_file_row_and_field(tmp_path, row, gold, message):
    _jsonl(tmp_path / "rows-eng_Latn.jsonl", [row])
    task = _local(tmp_path, "jsonl", "integer" if gold == "integer" else "math", gold)
    with pytest.raises(MindcapError) as info:
        load_items(task, "eng_Latn")
    assert message in str(info.value) and str(tmp_path) in str(info.value) and "\n" not in str(info.value)


def test_missing_sources_are_one_line(tmp_path, hf_cache):
    with pytest.raises(MindcapError, match=r"data file missing: .*rows-eng_Latn\.jsonl"):
        load_items(_local(tmp_path, "jsonl"), "eng_Latn")
    with pytest.raises(MindcapError, match="task local has no tha_Thai"):
        load_items(_local(tmp_path, "jsonl"), "tha_Thai")
    folder = tmp_path / "hub"
    _hub_folder(folder, "deu_Latn", "data/deu_Latn.jsonl", lambda p: _jsonl(p, BELEBELE))
    task = load_task("belebele")
    task = parse_task(
        {**task.model_dump(exclude_defaults=True), "source": {**task.source.model_dump(), "dataset": str(folder)}}
    )
    assert len(load_items(task, "deu_Latn")) == 2
    with pytest.raises(MindcapError, match=r"cannot load .*hub \(eng_Latn, test\)") as info:
        load_items(task, "eng_Latn")
    assert "\n" not in str(info.value)


def test_integer_golds_within_64_bits_are_read_as_written(tmp_path):
    rows = [
        {"question": "a", "answer": "-12"},
        {"question": "b", "answer": str(2**63 - 1)},
        {"question": "c", "answer": 0},
    ]
    _jsonl(tmp_path / "rows-eng_Latn.jsonl", rows)
    assert [it.gold for it in load_items(_local(tmp_path, "jsonl"), "eng_Latn")] == [-12, 2**63 - 1, 0]


def _one_line(tmp_path: Path, suffix: str) -> str:
    with pytest.raises(MindcapError) as info:
        load_items(_local(tmp_path, suffix), "eng_Latn")
    assert "\n" not in str(info.value) and f"rows-eng_Latn.{suffix}" in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("suffix", ["json", "jsonl"])
def test_a_data_file_nested_thousands_deep_is_one_line(tmp_path, suffix):
    deep = "[" * 5000 + "]" * 5000
    text = deep if suffix == "json" else json.dumps({"question": "a", "answer": 1}) + "\n" + deep + "\n"
    (tmp_path / f"rows-eng_Latn.{suffix}").write_text(text, "utf-8")
    message = _one_line(tmp_path, suffix)
    assert "JSON nested too deep to read" in message
    assert suffix == "json" or "line 2" in message


def test_a_json_integer_past_the_digit_limit_is_one_line(tmp_path):
    (tmp_path / "rows-eng_Latn.jsonl").write_text('{"question": "a", "answer": ' + "9" * 5000 + "}\n", "utf-8")
    assert "line 1: not valid JSON" in _one_line(tmp_path, "jsonl")


def _csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["question", "answer"])
        writer.writeheader()
        writer.writerows(rows)


def test_a_csv_field_longer_than_the_csv_modules_default_limit_is_read(tmp_path):
    long = "word " * 60_000  # 300,000 characters: past csv's default 131,072
    _csv(tmp_path / "rows-eng_Latn.csv", [{"question": long, "answer": "3"}, {"question": "a\nb", "answer": "4"}])
    items = load_items(_local(tmp_path, "csv"), "eng_Latn")
    assert [(it.fields["q"], it.gold) for it in items] == [(long, 3), ("a\nb", 4)]
    assert csv.field_size_limit() == 131_072  # the process-wide limit is put back


def test_a_csv_field_past_the_stated_bound_is_one_line(tmp_path):
    _csv(
        tmp_path / "rows-eng_Latn.csv",
        [{"question": "a", "answer": "3"}, {"question": "x" * (MAX_CSV_FIELD + 1), "answer": "4"}],
    )
    message = _one_line(tmp_path, "csv")
    assert f"row 2: not valid CSV: field larger than field limit ({MAX_CSV_FIELD})" in message


def test_json_lines_split_at_newlines_only(tmp_path):
    rows = [{"question": "one\u2028two\x85three", "answer": 1}, {"question": "b", "answer": 2}]
    (tmp_path / "rows-eng_Latn.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    items = load_items(_local(tmp_path, "jsonl"), "eng_Latn")
    assert [it.fields["q"] for it in items] == ["one\u2028two\x85three", "b"]
