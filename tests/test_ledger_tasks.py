"""The ledger carries each record's task and a gold of the task's type.

A ledger written before tasks (format 1, :mod:`old_ledgers`) migrates with every record MGSM's; records of other
tasks hold ``task`` and ``gold_text`` beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import old_ledgers
from ledger_factory import make_cell, make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.ingest.jsonl import import_jsonl
from mindcap_tok.store import migrate
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.schema import KEY_COLUMNS, SETTING_COLUMNS, validate_records


@pytest.fixture
def old_ledger(tmp_path) -> Ledger:
    """The ledger written before tasks, migrated."""
    migrate(old_ledgers.copy(1, tmp_path / "old"), tmp_path / "L")
    return Ledger(tmp_path / "L")


def test_a_ledger_written_before_tasks_reads_as_mgsm(old_ledger):
    rows = old_ledger.read().to_pylist()
    assert len(rows) == 8 and {(r["task"], r["gold_text"]) for r in rows} == {("mgsm", None)}
    assert old_ledger.info()["task"].tolist() == ["mgsm", "mgsm"]


def test_records_of_other_tasks_join_a_migrated_ledger(old_ledger, qwen):
    choice = [make_record(qwen, "#### 3\n", arm="translate-act", item=i, task="belebele", gold="3") for i in range(2)]
    same_key = make_record(qwen, "#### 3\n", item=0, sample=0, task="belebele", gold="3")  # key of an MGSM record
    old_ledger.append([*choice, same_key], qwen)
    assert old_ledger.verify().ok
    rows = old_ledger.read().to_pylist()
    tasks = sorted((r["task"], r["arm"], r["gold"], r["gold_text"]) for r in rows)
    assert tasks == [
        *[("belebele", "native", None, "3")],
        *[("belebele", "translate-act", None, "3")] * 2,
        *sorted(("mgsm", r["arm"], r["gold"], None) for r in old_ledgers.records(1, qwen)),
    ]
    again = Ledger(old_ledger.root)  # rerunning the same append skips what is stored
    assert again.append([*old_ledgers.records(1, qwen), *choice], qwen, skip_existing=True) == []


def test_the_gold_type_decides_its_column(qwen):
    rows = [
        make_record(qwen, "#### 3\n", task="belebele", gold="3"),
        make_record(qwen, "#### 3\n", item=1, task="mine", gold=7),
        make_record(qwen, "#### 3\n", item=2),
    ]
    table = validate_records(rows)
    assert table.column("task").to_pylist() == ["belebele", "mine", "mgsm"]
    assert table.column("gold").to_pylist() == [None, 7, 18]
    assert table.column("gold_text").to_pylist() == ["3", None, None]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gold": "12"}, r"gold = '12' is text, but task 'mgsm' takes an integer gold"),
        ({"gold": True}, r"gold = True is not a valid int64"),
        ({"task": "belebele", "gold": 3, "gold_text": "3"}, r"holds both gold and gold_text"),
        ({"task": "belebele", "gold": "3", "gold_text": "3"}, r"gives both gold and gold_text"),
        ({"gold": None}, r"gold is missing \(null\)"),
        ({"task": ""}, r"task is empty"),
        ({"task": None}, r"task is missing \(null\)"),
    ],
)
def test_a_record_holds_one_gold_of_its_task_type(qwen, changes, message):
    with pytest.raises(MindcapError, match=r"^record 0 \(model=qwen3-8b .*\):? " + message):
        validate_records([make_record(qwen, "#### 18\n") | changes])


def test_task_separates_populations(qwen):
    assert "task" in SETTING_COLUMNS and "task" in KEY_COLUMNS
    mgsm, other = make_record(qwen, "#### 18\n"), make_record(qwen, "#### 18\n", task="mine")
    assert validate_records([mgsm, other]).num_rows == 2
    with pytest.raises(MindcapError, match=r"record 1 .* duplicates record 0"):
        validate_records([other, other])


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_import_accepts_a_task_and_its_typed_gold(tmp_path, qwen):
    rows = [
        make_record(qwen, "#### 3\n", task="belebele", gold="3"),
        make_record(qwen, "#### 18\n", item=1, gold="1,000"),  # an MGSM gold answer as text, read as MGSM's
        make_record(qwen, "#### x\n", item=2, task="my-task", gold=5),  # a user's task: as given
        make_record(qwen, "#### x\n", item=3, task="my-task", gold="\\frac{1}{2}"),
        make_record(qwen, "#### B\n", item=4, task="global-mmlu-lite", gold_text="B") | {"gold": None},
    ]
    res = import_jsonl(_jsonl(tmp_path / "gen.jsonl", rows), tmp_path / "L", tokenizer=qwen)
    assert res.added == 5
    got = sorted((r["item"], r["task"], r["gold"], r["gold_text"]) for r in Ledger(tmp_path / "L").read().to_pylist())
    assert got == [
        (0, "belebele", None, "3"),
        (1, "mgsm", 1000, None),
        (2, "my-task", 5, None),
        (3, "my-task", None, "\\frac{1}{2}"),
        (4, "global-mmlu-lite", None, "B"),
    ]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gold": "twelve"}, r"gold = 'twelve' is not an integer, but task 'mgsm' takes one"),
        ({"task": "belebele", "gold": 3}, r"gold = 3 is an integer, but task 'belebele' takes a text gold"),
        ({"task": "mmath", "gold": 2}, r"gold = 2 is an integer, but task 'mmath' takes a text gold"),
        ({"gold_text": "12"} | {"gold": None}, r"gold_text is given, but task 'mgsm' takes an integer gold"),
        ({"task": 3}, r"task = 3 is not a string"),
    ],
)
def test_import_refuses_a_gold_of_the_wrong_type_in_one_line(tmp_path, qwen, changes, message):
    rows = [make_record(qwen, "#### 18\n"), make_record(qwen, "#### 18\n", item=1) | changes]
    src = _jsonl(tmp_path / "gen.jsonl", rows)
    with pytest.raises(MindcapError, match=r"^.*gen\.jsonl:2: " + message):
        import_jsonl(src, tmp_path / "L", tokenizer=qwen)
    assert not (tmp_path / "L" / "_manifest.json").exists()
    args = ["ledger", "import", str(src), "--out-dir", str(tmp_path / "L"), "--tokenizer", "qwen3-8b"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1 and "gen.jsonl:2: " in res.stderr


_MY_TASK = """name = "my-task"
version = 1
licence = "CC-BY-4.0"
languages = ["tha_Thai"]
native = "native"
comparator = "translate-act"
[source]
files = "quiz-{lang}.jsonl"
fields = { q = "question" }
[answer]
type = "integer"
[gold]
field = "answer"
type = "integer"
[arms.native.templates."*"]
instruction = "Solve it."
body = "{q}"
[arms.translate-act.templates."*"]
instruction = "Translate, then solve it."
body = "{q}"
"""


def test_score_rows_carry_the_task_and_keep_tasks_apart(tmp_path, qwen):
    # MGSM: per item sample 0 right, sample 1 wrong (accuracy 1/2); a user's integer task: always right (1);
    # Belebele (choice 1-4, gold "3"): "#### 3" right, "#### 2" wrong (1/2)
    mine = [make_record(qwen, "#### 7\n", item=i, sample=s, task="my-task", gold=7) for i in range(2) for s in range(2)]
    bele = [make_record(qwen, f"#### {a}\n", item=i, task="belebele", gold="3") for i, a in enumerate("32")]
    Ledger(tmp_path / "L").append([*make_cell(qwen, n_items=2, n_samples=2), *mine, *bele], qwen)
    (tmp_path / "my-task.toml").write_text(_MY_TASK, "utf-8")
    args = ["score", "--ledger", str(tmp_path / "L"), "--budgets", "100", "--format", "json"]
    res = CliRunner().invoke(cli, [*args, "--task", str(tmp_path / "my-task.toml")])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    rows = rows["curves"] if isinstance(rows, dict) else rows
    assert sorted((r["task"], r["accuracy"], r["n"]) for r in rows) == [
        ("belebele", 0.5, 2),
        ("mgsm", 0.5, 4),
        ("my-task", 1.0, 4),
    ]
    # without its task file, a user's task cannot be read: one line naming the task and the option
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "task 'my-task', which is not built in" in res.stderr and "--task FILE" in res.stderr


def test_stats_and_adaptation_know_no_task_by_name():
    """Tasks are data: statistics and pricing read the ``task`` column, never compare it with a task's name."""
    import ast

    import mindcap_tok

    names = {"mgsm", "belebele", "global-mmlu-lite", "mmath"}
    root = Path(mindcap_tok.__file__).parent
    found = []
    for path in sorted([*root.glob("stats/**/*.py"), *root.glob("adaptation/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in names:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    # corpus.py names the MGSM questions as a text corpus for learning extensions: a data source, not a task
    assert [f for f in found if not f.startswith("adaptation/corpus.py:")] == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arm": "my-arm"}, r"arm = 'my-arm'; use one of native, translate-act, pivot, code-switched"),
        ({"task": "belebele", "gold": "3", "arm": "pivot"}, r"arm = 'pivot'; use one of native"),
        ({"task": "mine", "arm": ""}, r"arm is empty"),
    ],
)
def test_a_record_names_an_arm_of_its_task(qwen, changes, message):
    ok = make_record(qwen, "#### 18\n")
    with pytest.raises(MindcapError, match=r"^record 1 \(model=qwen3-8b .*\):? " + message):
        validate_records([ok, make_record(qwen, "#### 18\n", item=1) | changes])


def test_a_users_task_keeps_its_own_arms(qwen):
    rows = [make_record(qwen, "#### 18\n", task="mine", arm=arm) for arm in ("zero-shot", "few-shot")]
    assert validate_records(rows).column("arm").to_pylist() == ["zero-shot", "few-shot"]
