"""Task files are checked whole when read, so that `generate --dry-run` refuses what a run would fail on, before any
request: templates take plain placeholders only, answer patterns compile, arms have their prompts, names are the
task's own, stored golds have the task's type, and nothing nested thousands deep reaches a recursive reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from local_http import LocalHTTP
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.jobs import load_spec
from mindcap_tok.ingest.lmeval import read_lmeval_logs
from mindcap_tok.roundtrip.spec import read_spec_file
from mindcap_tok.spec import MAX_NESTING, nesting_depth, read_toml
from mindcap_tok.stats.protocol import load_protocol
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tasks.load import load_task, load_task_files
from task_files import integer_task

TASK = integer_task("plain", ["deu_Latn"])
ROWS = [{"question": "1 + 1?", "answer": 2}, {"question": "2 + 3?", "answer": "5"}]
JOB = """model = "Qwen/Qwen3-8B"
model_name = "qwen3-8b"
task = "t.toml"
arms = ["native", "english"]
langs = ["deu_Latn"]
design = "replay"
caps = 64
k = 1
"""
#: the message of a key outside the table's own keys, as the file spells them
TEMPLATE_KEYS = "announce, body, instruction"


def _world(tmp_path: Path, task: str = TASK, job: str = JOB) -> Path:
    """A task file ``t.toml`` with its German data and a job ``job.toml`` of it; the job's path."""
    (tmp_path / "t.toml").write_text(task, "utf-8")
    (tmp_path / "plain-deu_Latn.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    (tmp_path / "job.toml").write_text(job, "utf-8")
    return tmp_path / "job.toml"


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def refused(res, needle: str) -> str:
    """A user error: exit 2, one stderr line holding ``needle``, no traceback, nothing on stdout."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.stderr and res.stdout == "", res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert res.stderr.startswith("error: ") and needle in res.stderr, res.stderr
    return res.stderr


def dry_run_refuses(tmp_path: Path, needle: str, task: str = TASK, job: str = JOB) -> str:
    """``generate --dry-run`` of the world's job is refused in one line holding ``needle``; nothing is written."""
    message = refused(run("generate", _world(tmp_path, task, job), "--out-dir", tmp_path / "out", "--dry-run"), needle)
    assert not (tmp_path / "out").exists()
    return message


def test_the_plain_world_plans(tmp_path):
    res = run("generate", _world(tmp_path), "--out-dir", tmp_path / "out", "--dry-run")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("job qwen3-8b-replay (replay): 4 requests, 4 records")


# -- templates: plain named placeholders only ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "placeholder", ["{q:d}", "{q.x}", "{q!z}", "{q!r}", "{q[0]}", "{q:>100000}", "{0}", "{}", "{q:{q}}"]
)
def test_a_placeholder_that_is_not_plain_is_refused_at_load(tmp_path, placeholder):
    task = TASK.replace('body = "{q}"', f'body = "Problem: {placeholder}"', 1)
    message = dry_run_refuses(
        tmp_path, f"t.toml: arms.native.templates.*.body: placeholder {placeholder!r} must be", task
    )
    assert "no position, format spec, conversion, attribute or index" in message


def test_a_placeholder_in_the_instruction_and_the_file_pattern_too(tmp_path):
    dry_run_refuses(
        tmp_path,
        "arms.english.templates.*.instruction: placeholder '{q.upper}'",
        TASK.replace('instruction = "Solve in English."', 'instruction = "Solve {q.upper}."'),
    )
    dry_run_refuses(
        tmp_path,
        "source.files: placeholder '{lang:>9}'",
        TASK.replace('files = "plain-{lang}.jsonl"', 'files = "plain-{lang:>9}.jsonl"'),
    )


def test_literal_braces_and_plain_placeholders_still_format(tmp_path):
    from mindcap_tok.generation.prompts import task_prompt
    from mindcap_tok.tasks.datasets import load_items

    _world(tmp_path, TASK.replace('body = "{q}"', 'body = "{{q}} is {q}"', 1))
    task = load_task(tmp_path / "t.toml")
    assert task_prompt(task, load_items(task, "deu_Latn")[0], arm="native").text == "Solve.\n\n{q} is 1 + 1?"


@pytest.mark.parametrize("announce", ["You have 100 tokens.", "You have {budget!s:.0}100 tokens.", "{budget:x}"])
def test_an_announcement_must_state_the_budget_plainly(tmp_path, announce):
    task = TASK.replace('instruction = "Solve."', f'instruction = "Solve."\nannounce = "{announce}"', 1)
    dry_run_refuses(tmp_path, "t.toml: arms.native.templates.*.announce:", task)


def test_the_announcement_design_needs_an_announcement_sentence(tmp_path):
    job = JOB.replace('design = "replay"', 'design = "announcement"') + "[announce]\nbudgets = [32]\n"
    dry_run_refuses(
        tmp_path, "task plain, arm native, deu_Latn: the announcement design needs an announcement", job=job
    )
    # with a sentence for each arm it plans; the tag style needs none
    task = TASK.replace('instruction = "Solve', 'announce = "Use {budget} tokens."\ninstruction = "Solve')
    assert run("generate", _world(tmp_path, task, job), "--out-dir", tmp_path / "o", "--dry-run").exit_code == 0
    tag = job.replace("budgets = [32]", 'budgets = [32]\nstyle = "tag"')
    assert run("generate", _world(tmp_path, TASK, tag), "--out-dir", tmp_path / "o", "--dry-run").exit_code == 0


# -- answer patterns and arms: refused before any request --------------------------------------------------------

REGEX_TASK = TASK.replace('[answer]\ntype = "integer"', '[answer]\ntype = "regex"\npattern = "PATTERN"').replace(
    '[gold]\ntype = "integer"', '[gold]\ntype = "string"'
)


def test_an_answer_pattern_that_does_not_compile_is_refused_by_the_dry_run(tmp_path):
    dry_run_refuses(tmp_path, "t.toml: answer.pattern: answer pattern", REGEX_TASK.replace("PATTERN", "(?P<answer>x"))
    dry_run_refuses(tmp_path, "has no named group 'answer'", REGEX_TASK.replace("PATTERN", "(x)"))
    filt = TASK + '[answer.filters.loose]\npatterns = { "*" = "#### (\\\\d+" }\n'
    dry_run_refuses(tmp_path, "t.toml: answer.filters.loose.patterns.*: filter variant 'loose'", filt)


def test_a_prompt_version_the_task_does_not_have_is_refused_by_the_dry_run(tmp_path):
    wrong = JOB + 'prompt_version = "mgsm-v1"\n'
    dry_run_refuses(tmp_path, "prompt_version: 'mgsm-v1', but task plain's prompts are version plain-v1", job=wrong)
    own = JOB + 'prompt_version = "plain-v1"\n'
    assert run("generate", _world(tmp_path, TASK, own), "--out-dir", tmp_path / "o", "--dry-run").exit_code == 0


def test_a_run_refuses_before_its_first_request(tmp_path):
    """Without --dry-run, the same refusal comes before the server is asked anything."""
    asked: list[str] = []
    server = LocalHTTP(
        lambda h: (asked.append(h.path), h.reply(404, {})), lambda h, b: (asked.append(h.path), h.reply(500, {}))
    )
    try:
        job = _world(tmp_path, job=JOB.replace('langs = ["deu_Latn"]', 'langs = ["tha_Thai"]'))
        refused(run("generate", job, "--out-dir", tmp_path / "out", "--base-url", server.url), "has no tha_Thai")
    finally:
        server.close()
    assert asked == [] and not (tmp_path / "out").exists()


# -- names --------------------------------------------------------------------------------------------------------


def test_a_user_task_may_not_take_a_built_in_name(tmp_path):
    dry_run_refuses(
        tmp_path, "t.toml: name: 'mgsm' is a built-in task's name", TASK.replace('name = "plain"', 'name = "mgsm"')
    )


def test_two_task_files_may_not_name_one_task(tmp_path):
    (tmp_path / "a.toml").write_text(TASK, "utf-8")
    (tmp_path / "b.toml").write_text(TASK.replace('instruction = "Solve."', 'instruction = "Other."'), "utf-8")
    with pytest.raises(MindcapError, match=r"task files .*a\.toml and .*b\.toml both name task 'plain'"):
        load_task_files([tmp_path / "a.toml", tmp_path / "b.toml"])
    assert list(load_task_files([tmp_path / "a.toml", tmp_path / "a.toml"])) == ["plain"]  # one file given twice


@pytest.fixture
def user_ledger(tmp_path, qwen):
    """A ledger of two records of the user's integer task ``plain``, one with an integer gold, one with the text
    gold ``"18"`` (stored as given: the ledger knows a user's task only by name)."""
    records = [
        make_record(qwen, "#### 18\n", lang="deu_Latn", item=0, gold=18) | {"task": "plain"},
        make_record(qwen, "#### 18\n", lang="deu_Latn", item=1, gold="18") | {"task": "plain"},
    ]
    Ledger(tmp_path / "L").append(records, qwen)
    (tmp_path / "t.toml").write_text(TASK, "utf-8")
    return tmp_path / "L"


def test_score_refuses_two_task_files_naming_one_task(tmp_path, user_ledger):
    (tmp_path / "b.toml").write_text(TASK, "utf-8")
    res = run("score", "--ledger", user_ledger, "--task", tmp_path / "t.toml", "--task", tmp_path / "b.toml")
    refused(res, "both name task 'plain'")


def test_a_stored_gold_of_the_wrong_type_is_refused_naming_the_record(tmp_path, user_ledger):
    res = run("score", "--ledger", user_ledger, "--task", tmp_path / "t.toml", "--budgets", "30")
    message = refused(res, "record 1 (model=qwen3-8b arm=native lang=deu_Latn cap=4096 item=1 sample=0): ")
    assert "gold = '18' is stored as text, but task 'plain' takes an integer gold" in message


def test_a_text_task_refuses_an_integer_gold(tmp_path, qwen):
    records = [make_record(qwen, "answer: 18\n", lang="deu_Latn", item=0, gold=18) | {"task": "plain"}]
    Ledger(tmp_path / "L").append(records, qwen)
    (tmp_path / "t.toml").write_text(REGEX_TASK.replace("PATTERN", "answer: (?P<answer>\\\\d+)"), "utf-8")
    res = run("score", "--ledger", tmp_path / "L", "--task", tmp_path / "t.toml", "--budgets", "30")
    refused(res, "record 0 (")
    assert (
        "gold = 18 is stored as an integer, but task 'plain' takes a text gold; store its records with text golds"
        in res.stderr
    )


# -- nesting and overflow -----------------------------------------------------------------------------------------

DEEP_TABLES = ".".join(["a"] * 5000) + " = 1\n"  # parses without recursion, into a dict 5,000 deep
DEEP_ARRAYS = "x = " + "[" * 5000 + "]" * 5000 + "\n"  # the parser itself recurses


@pytest.mark.parametrize("deep", [DEEP_TABLES, DEEP_ARRAYS], ids=["tables", "arrays"])
def test_a_task_file_or_job_spec_nested_thousands_deep_is_one_line(tmp_path, deep):
    needle = f"nests tables or lists more than {MAX_NESTING} levels deep"
    dry_run_refuses(tmp_path, f"task file {tmp_path / 't.toml'} {needle}", deep + TASK)
    dry_run_refuses(tmp_path, f"job spec {tmp_path / 'job.toml'} {needle}", job=deep + JOB)
    (tmp_path / "rt.toml").write_text(deep, "utf-8")
    with pytest.raises(MindcapError, match=f"round-trip spec .*rt.toml {needle}"):
        read_spec_file(tmp_path / "rt.toml")
    with pytest.raises(MindcapError, match=f"protocol .*rt.toml {needle}"):
        load_protocol(tmp_path / "rt.toml")


def test_a_yaml_protocol_nested_deep_or_holding_itself_is_one_line(tmp_path):
    for text in ("a: " + "[" * 5000 + "]" * 5000 + "\n", "a: &x [*x]\n", "a: " + "[" * 150 + "]" * 150 + "\n"):
        (tmp_path / "p.yaml").write_text(text, "utf-8")
        with pytest.raises(MindcapError, match=f"protocol .*p.yaml nests .* more than {MAX_NESTING} levels deep"):
            load_protocol(tmp_path / "p.yaml")


def test_nesting_is_measured_by_hand():
    shared = [1]
    assert [nesting_depth(v) for v in (1, [], {"a": [1, {"b": 2}]}, [shared, [shared]])] == [0, 1, 3, 3]
    deep: list = []
    node = deep
    for _ in range(MAX_NESTING - 1):
        node.append([])
        node = node[0]
    assert nesting_depth(deep) == MAX_NESTING


def test_a_file_at_the_nesting_bound_reads(tmp_path):
    (tmp_path / "ok.toml").write_text(".".join(["a"] * MAX_NESTING) + " = 1\n", "utf-8")
    assert nesting_depth(read_toml(tmp_path / "ok.toml", "spec")) == MAX_NESTING
    (tmp_path / "no.toml").write_text(".".join(["a"] * (MAX_NESTING + 1)) + " = 1\n", "utf-8")
    with pytest.raises(MindcapError, match="nests tables or lists more than"):
        read_toml(tmp_path / "no.toml", "spec")


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (f"seed = {2**63}", f"seed: must be an integer in 0..{2**63 - 1}, got {2**63}"),
        (f"[sampling]\ntop_k = {2**63}", f"sampling.top_k: must be -1 (no top-k) or in 1..{2**31 - 1}, got {2**63}"),
        ("seed = " + "9" * 5000, "is not valid TOML: Exceeds the limit (4300 digits)"),
    ],
)
def test_a_reasoning_job_value_past_a_c_integer_is_one_line(tmp_path, line, needle):
    job = JOB.replace("k = 1\n", "k = 1\nthinking = true\n") + line + "\n"
    dry_run_refuses(tmp_path, needle, job=job)


# -- messages -----------------------------------------------------------------------------------------------------


def test_a_misspelled_key_lists_the_keys_of_its_own_table(tmp_path):
    known = "configs, dataset, fields, files, loader, split, url"
    typo = TASK.replace('files = "plain', 'fles = "x"\nfiles = "plain')
    message = dry_run_refuses(tmp_path, f"t.toml: source.fles: unknown key; known: {known}", typo)
    assert "licence" not in message
    typo = TASK.replace('body = "{q}"', 'body = "{q}"\nbdy = "x"', 1)
    dry_run_refuses(tmp_path, f"arms.native.templates.*.bdy: unknown key; known: {TEMPLATE_KEYS}", typo)
    with pytest.raises(
        MindcapError, match=r"job\.toml: sampling\.tmperature: unknown key; known: temperature, top_k, top_p"
    ):
        load_spec(_world(tmp_path, job=JOB + "[sampling]\ntmperature = 1\n"))


def test_lmeval_import_refuses_two_task_files_naming_one_task(tmp_path, qwen):
    (tmp_path / "a.toml").write_text(TASK, "utf-8")
    (tmp_path / "b.toml").write_text(TASK.replace('instruction = "Solve."', 'instruction = "Other."'), "utf-8")
    with pytest.raises(MindcapError, match=r"task files .*a\.toml and .*b\.toml both name task 'plain'"):
        read_lmeval_logs([], qwen, tasks=[tmp_path / "a.toml", tmp_path / "b.toml"])
