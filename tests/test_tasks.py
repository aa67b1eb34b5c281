"""Task files: the model's refusals, the built-ins, and MGSM's prompts byte for byte through the task."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.prompts import task_prompt
from mindcap_tok.tasks.datasets import TaskItem
from mindcap_tok.tasks.load import builtin_tasks, load_task, parse_task
from task_files import SMALL

DATA = Path(__file__).parent / "data"


def _small(**changes) -> dict:
    data = tomllib.loads(SMALL)
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        table = data
        for part in path:
            table = table[part]
        if value is None:
            del table[last]
        else:
            table[last] = value
    return data


def test_builtin_tasks_load_and_name_their_arms():
    assert builtin_tasks() == ["belebele", "global-mmlu-lite", "mgsm", "mmath"]
    for name in builtin_tasks():
        task = load_task(name)
        assert task.name == name and task.licence
        assert task.native == "native" and task.comparator == "translate-act"
    assert list(load_task("mgsm").arms) == ["native", "translate-act", "pivot", "code-switched"]
    assert load_task("belebele").answer.labels == ["1", "2", "3", "4"]
    assert load_task("global-mmlu-lite").answer.labels == ["A", "B", "C", "D"]
    assert load_task("mmath").answer.type == "math"


def test_mgsm_prompts_are_frozen_byte_for_byte():
    """Every arm x language x announcement style of MGSM's task file, byte for byte as ``mgsm-v1`` was released
    (tests/data/mgsm_v1_prompts.json: the 132 prompts and template ids every MGSM ledger was generated with).
    This freezes ``mgsm-v1`` on purpose: its records name that wording, so a change to it is a new task version
    (a new template id prefix), never an edit."""
    task = load_task("mgsm")
    expected = json.loads((DATA / "mgsm_v1_prompts.json").read_text("utf-8"))
    assert len(expected) == 4 * 11 * 3
    for case in expected:
        item = TaskItem(0, case["lang"], {"question": "Q: 2 + 3 = ?"}, 5)
        p = task_prompt(task, item, arm=case["arm"], announced=case["announced"], style=case["style"])
        assert (p.text, p.template_id) == (case["text"], case["template_id"]), case


def test_a_task_prompt_from_its_templates():
    task = parse_task(_small())
    item = TaskItem(3, "eng_Latn", {"q": "1 + {1}?"}, 2)
    p = task_prompt(task, item, arm="native", announced=256, style="natural")
    assert p.text == 'Solve. End with a final line "#### <integer>". You have 256 tokens.\n\nProblem: 1 + {1}?'
    assert p.template_id == "tiny-v2:native:eng_Latn:natural"
    p = task_prompt(task, TaskItem(3, "deu_Latn", {"q": "x"}, 2), arm="translate-act", announced=64, style="tag")
    assert p.text == "Translate to English, then solve.\n\nTOKEN_BUDGET: 64\n\nProblem: x"
    assert task_prompt(task, TaskItem(0, "deu_Latn", {"q": "x"}, 2), arm="native").text == (
        'Löse. Ende mit einer Zeile "#### <Zahl>".\n\nAufgabe: x'
    )
    with pytest.raises(MindcapError, match="no announcement sentence"):
        task_prompt(task, TaskItem(0, "deu_Latn", {"q": "x"}, 2), arm="native", announced=64)
    with pytest.raises(MindcapError, match="has no arm 'pivot'"):
        task_prompt(task, item, arm="pivot")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"native": "solo"}, "task: native: names no arm; arms: native, translate-act"),
        ({"comparator": "native"}, "task: comparator: must differ from the native arm"),
        ({"version": "1"}, "task: version: must be of type int, got '1'"),
        ({"colour": "red"}, "task: colour: unknown key"),
        ({"languages": ["eng_Latn", "de"]}, "task: languages[1]: must be a FLORES-200 code: deu_Latn, not 'de'"),
        ({"arms__native__templates__deu_Latn": None}, "arms.native.templates: has no template for deu_Latn"),
        ({"arms__native__templates__eng_Latn__body": "{qq}"}, "body: uses ['qq'], not fields of the source"),
        ({"arms__native__templates__eng_Latn__body": "{q"}, "is not a valid template"),
        ({"arms__native__templates__eng_Latn__announce": "soon"}, "announce: must use the placeholder {budget}"),
        ({"source__dataset": "x/y"}, "source: give exactly one of loader, files, dataset (got files, dataset)"),
        ({"source__files": "tiny.jsonl"}, "source.files: must contain {lang} or {config}"),
        ({"answer__type": "choice"}, "answer.labels: a choice answer needs its labels"),
        ({"answer__type": "math"}, "gold.type: must be string for math answers"),
        ({"answer__type": "boolean"}, "answer.type: input should be"),
        ({"gold__type": "float"}, "gold.type: input should be"),
        ({"prompts": "mgsm-v1"}, "task: prompts: unknown key"),
        ({"lmeval": {"quiz_cot_": "solo"}}, "task: lmeval.quiz_cot_: names no arm; arms: native, translate-act"),
    ],
)
def test_a_bad_task_file_is_one_line_naming_the_key(changes, message):
    with pytest.raises(MindcapError, match=None) as info:
        parse_task(_small(**changes))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_task_file_by_path(tmp_path):
    (tmp_path / "t.toml").write_text(SMALL, "utf-8")
    task = load_task(tmp_path / "t.toml")
    assert task.source.files == str(tmp_path / "tiny-{lang}.jsonl")
    (tmp_path / "bad.toml").write_text(SMALL.replace('native = "native"', 'native = "x"'), "utf-8")
    with pytest.raises(MindcapError, match=r"bad.toml: native: names no arm"):
        load_task(tmp_path / "bad.toml")
    with pytest.raises(MindcapError, match="unknown task 'belebel'"):
        load_task("belebel")


def test_the_documented_task_example_is_a_valid_task(tmp_path):
    readme = (Path(__file__).resolve().parents[1] / "docs" / "tasks.md").read_text("utf-8")
    start = readme.index('name = "my-quiz"')
    (tmp_path / "quiz.toml").write_text(readme[start : readme.index("```", start)], "utf-8")
    task = load_task(tmp_path / "quiz.toml")
    p = task_prompt(task, TaskItem(0, "deu_Latn", {"q": "2 + 2?"}, 4), arm="native")
    assert p.text == (
        "Löse die Aufgabe. Denke Schritt für Schritt auf Deutsch nach. Beende mit einer letzten Zeile der Form "
        '"#### <ganze Zahl>".\n\nAufgabe: 2 + 2?'
    )
