"""Job specs with a task: `task = "belebele"` (or a file, or --task) plans and prompts that task's items."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from mindcap_tok.cli.main import main
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.jobs import load_spec, parse_spec, plan_job, request_seed, spec_task
from mindcap_tok.generation.prompts import task_prompt
from mindcap_tok.spec import seed_hash
from mindcap_tok.tasks.datasets import load_items

ROWS = [
    {
        "link": "l",
        "question_number": 1,
        "flores_passage": "Anna hat drei Katzen.",
        "question": "Wie viele Katzen?",
        "mc_answer1": "eine",
        "mc_answer2": "zwei",
        "mc_answer3": "drei",
        "mc_answer4": "vier",
        "correct_answer_num": "3",
        "dialect": "deu_Latn",
        "ds": "2023-05-03",
    },
    {
        "link": "l",
        "question_number": 2,
        "flores_passage": "Der Zug fährt um acht.",
        "question": "Wann?",
        "mc_answer1": "um acht",
        "mc_answer2": "um neun",
        "mc_answer3": "um zehn",
        "mc_answer4": "nie",
        "correct_answer_num": "1",
        "dialect": "deu_Latn",
        "ds": "2023-05-03",
    },
]
JOB = {
    "model": "Qwen/Qwen3-8B",
    "model_name": "qwen3-8b",
    "arms": ["native", "translate-act"],
    "langs": ["de"],
    "design": "replay",
    "caps": 512,
    "k": 2,
}


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """A data folder holding facebook/belebele in the hub's layout (German only), loaded by ``datasets``."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    root = tmp_path / "data" / "facebook" / "belebele"
    (root / "data").mkdir(parents=True)
    (root / "data" / "deu_Latn.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    (root / "README.md").write_text(
        "---\nconfigs:\n- config_name: deu_Latn\n  data_files:\n  - split: test\n    path: data/deu_Latn.jsonl\n---\n"
    )
    return tmp_path / "data"


def test_a_belebele_job_builds_its_prompts(data_dir):
    spec = parse_spec({**JOB, "task": "belebele"}, data_dir=data_dir)
    assert (spec.task, spec.task_file, spec.items, spec.prompt_version) == ("belebele", "", (0, 1), "belebele-v1")
    assert spec.as_dict()["task"] == "belebele"
    task, items = spec_task(spec), load_items(spec_task(spec), "deu_Latn", data_dir=data_dir)
    requests = [r for shard in plan_job(spec).shards for r in shard.requests]
    assert [(r.arm, r.item) for r in requests] == [
        ("native", 0),
        ("native", 1),
        ("translate-act", 0),
        ("translate-act", 1),
    ]
    prompts = [task_prompt(task, items[r.item], arm=r.arm) for r in requests]
    assert prompts[0].text == (
        "Lies den Text und beantworte die Frage. Denke Schritt für Schritt auf Deutsch nach. Beende deine Antwort "
        'mit einer letzten Zeile der Form "#### <Nummer>", die nur die Nummer der richtigen Antwort enthält '
        "(1, 2, 3 oder 4).\n\nText: Anna hat drei Katzen.\n\nFrage: Wie viele Katzen?\n\n"
        "1. eine\n2. zwei\n3. drei\n4. vier"
    )
    assert prompts[0].template_id == "belebele-v1:native:deu_Latn:none"
    assert prompts[3].text == (
        "First translate the following passage, question and answers into English. Then answer the question, "
        'reasoning step by step in English. End with a final line of the form "#### <number>" that contains only '
        "the number of the correct answer (1, 2, 3 or 4).\n\nPassage: Der Zug fährt um acht.\n\nQuestion: Wann?\n\n"
        "1. um acht\n2. um neun\n3. um zehn\n4. nie"
    )
    assert [items[r.item].gold for r in requests] == ["3", "1", "3", "1"]
    # the task joins the seed (MGSM's stay as they were: no task in the hash)
    r = requests[0]
    assert r.seed == seed_hash(0, "qwen3-8b", "belebele", "native", "deu_Latn", "replay", 512, None, 0, sep="|")


def test_mgsm_jobs_keep_their_seeds_and_stored_spec():
    spec = parse_spec(JOB)
    assert spec.task == "mgsm" and "task" not in spec.as_dict() and "task_file" not in spec.as_dict()
    seed = seed_hash(0, "qwen3-8b", "native", "deu_Latn", "replay", 512, None, 7, sep="|")
    assert request_seed(spec, "native", lang="deu_Latn", cap=512, announced=None, item=7) == seed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arms": ["pivot"]}, "unknown arm 'pivot'; use one of native, translate-act"),
        ({"langs": ["th"]}, "task belebele has no tha_Thai"),
        (
            {"prompt_version": "mgsm-v1"},
            "prompt_version: 'mgsm-v1', but task belebele's prompts are version belebele-v1",
        ),
        ({"items": [2]}, "items[0]: must be an integer in 0..1, got 2"),
        ({"scaled_arms": ["pivot"]}, "scaled_arms ['pivot']; arms are native, translate-act"),
    ],
)
def test_a_belebele_job_refuses_what_the_task_lacks(data_dir, changes, message):
    with pytest.raises(MindcapError) as info:
        parse_spec({**JOB, "task": "belebele", **changes}, data_dir=data_dir)
    assert message in str(info.value)


def test_a_task_file_in_a_job_and_task_on_the_command_line(tmp_path, data_dir, capsys):
    rows = tmp_path / "rows-deu_Latn.jsonl"
    rows.write_text('{"q": "2 + 2?", "a": "4"}\n{"q": "3 + 3?", "a": "6"}\n{"q": "1 + 0?", "a": "1"}\n', "utf-8")
    (tmp_path / "mine.toml").write_text(
        'name = "mine"\nversion = 1\nlicence = "CC0-1.0"\nlanguages = ["deu_Latn"]\nnative = "native"\n'
        'comparator = "translate-act"\n[source]\nfiles = "rows-{lang}.jsonl"\nfields = { q = "q" }\n'
        '[answer]\ntype = "integer"\n[gold]\nfield = "a"\ntype = "integer"\n'
        '[arms.native.templates."*"]\ninstruction = "Rechne."\nbody = "{q}"\n'
        '[arms.translate-act.templates."*"]\ninstruction = "Translate, then compute."\nbody = "{q}"\n',
        "utf-8",
    )
    job = tmp_path / "job.toml"
    job.write_text('task = "mine.toml"\n' + "".join(f"{k} = {json.dumps(v)}\n" for k, v in JOB.items()), "utf-8")
    spec = load_spec(job)
    assert (spec.task, spec.task_file, spec.items) == ("mine", str(tmp_path / "mine.toml"), (0, 1, 2))
    assert spec_task(spec).name == "mine"
    assert load_spec(job, task="belebele", data_dir=data_dir).items == (0, 1)
    args = ["--data-dir", str(data_dir), "generate", str(job), "--out-dir", str(tmp_path / "led"), "--dry-run"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--task", "belebele"])
    assert exc.value.code == 0
    assert "4 requests, 8 records" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main([*args, "--task", str(tmp_path / "nope.toml")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "nope.toml" in err and len(err.strip().splitlines()) == 1
