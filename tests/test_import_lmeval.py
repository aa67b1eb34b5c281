"""lm-eval import without lm-eval: its MGSM filters as parser variants, and the import's error paths.

The error-path inputs are built here programmatically in the schema lm-eval 0.4.13 writes with ``--log_samples``
(``samples_<task>_<time>.jsonl`` lines with ``doc_id, target, arguments.gen_args_0.arg_0/arg_1, resps,
filter``; ``results_<time>.json`` with ``config.model_args`` and ``configs``); logs of real runs are imported and
checked against lm-eval's own scores in ``test_import_lmeval_evals.py`` (``-m evals``).
"""

from __future__ import annotations

import json
import re
import string

import numpy as np
import pytest
from click.testing import CliRunner

from mindcap_tok.cli.main import cli
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.store.schema import validate_records
from mindcap_tok.tasks.answers import task_parser

STRICT_TH = r"คำตอบคือ (\-?[0-9\.\,]+)"
FLEXIBLE = r"(-?[$0-9.,]{2,})|(-?[0-9]+)"


def lm_eval_exact_match(text: str, gold: str, pattern: str, group_select: int) -> int:
    """A slow reference: lm-eval 0.4.13's RegexFilter (findall over the whole text, the tuple rule, strip,
    ``[invalid]`` fallback) then exact_match with ignore_case and ignore_punctuation, as its code reads."""
    found = re.findall(pattern, text)
    if found:
        match = found[group_select]
        if isinstance(match, tuple):
            match = next((m for m in match if m), "[invalid]")
        match = match.strip()
    else:
        match = "[invalid]"
    table = str.maketrans("", "", string.punctuation)
    return int(match.lower().translate(table) == gold.lower().translate(table))


TEXTS = [
    ("ก่อน 12 แล้ว\nคำตอบคือ 1,000.\nท้าย 7", 1000),
    ("ก่อน 12 แล้ว\nคำตอบคือ 1,000.\nท้าย 7", 7),
    ("no number here", 5),
    ("คำตอบคือ -5 and $18.", -5),
    ("คำตอบคือ -5 and $18.", 18),
    ("x 3 y 44\n\nz 3", 3),
    ("The answer is 9", 9),  # English words: Thai's strict pattern does not match
]


@pytest.mark.parametrize(("text", "gold"), TEXTS)
def test_filter_variants_read_whole_texts_as_lm_eval(text, gold):
    for name, pattern, select in (("lm-eval-strict", STRICT_TH, 0), ("lm-eval-flexible", FLEXIBLE, -1)):
        parser = task_parser("mgsm", name, lang="tha_Thai")
        value = parser.parse(text, complete=True)
        got = int(value is not None and parser.correct(value, gold))
        assert got == lm_eval_exact_match(text, str(gold), pattern, select), (name, text, gold)


def test_known_readings():
    """Values known by reading lm-eval's rules by hand."""
    flex = task_parser("mgsm", "lm-eval-flexible", lang="deu_Latn")
    assert flex.parse("a 12 b\nDie Antwort lautet 1,000.\nc", complete=True) == "1,000."
    assert flex.correct("1,000.", 1000) and flex.correct("$18", 18) and not flex.correct("18", 180)
    strict = task_parser("mgsm", "lm-eval-strict", lang="deu_Latn")
    assert strict.parse("Die Antwort lautet 4. Die Antwort lautet 5.", complete=True) == "4."
    assert strict.parse("The answer is 4", complete=True) is None


def test_prefix_scores_equal_the_reference_on_every_prefix(qwen):
    """score_ledger at every budget B equals lm-eval's rule applied to decode(ids[:B])."""
    texts = ["คำตอบคือ 12 แล้ว 345\nคำตอบคือ 6", "12 apples, 3,400 pears; 7", "ท้าย 88"]
    golds = [12, 7, 88]
    rows = []
    for i, (text, gold) in enumerate(zip(texts, golds, strict=True)):
        ids = qwen.encode(text)
        rows.append(
            dict(
                model="qwen3-8b",
                arm="native",
                lang="th",
                item=i,
                sample=0,
                seed=0,
                cap=64,
                prompt="p",
                prompt_ids=[1],
                output_ids=ids,
                text=text,
                finish_reason="stop",
                gold=gold,
                generator="t",
            )
        )
    table = validate_records(rows)
    budgets = list(range(1, max(len(r["output_ids"]) for r in rows) + 1))
    for name, pattern, select in (("lm-eval-strict", STRICT_TH, 0), ("lm-eval-flexible", FLEXIBLE, -1)):
        got = score_ledger(table, qwen, budgets=budgets, parser=name).by_budget
        for r, rec in enumerate(rows):
            for b in budgets:
                prefix = qwen.decode_batch([rec["output_ids"][:b]], skip_special_tokens=True)[0]
                want = lm_eval_exact_match(prefix, str(rec["gold"]), pattern, select)
                score = got[(got["item"] == r) & (got["budget"] == b)]["score"].item()
                assert score == want, (name, r, b, prefix)


def _log(folder, *, task="mgsm_native_cot_th", model=None, lines=None, cap=32, model_args=None):
    folder.mkdir(parents=True, exist_ok=True)
    time = "2026-01-01T00-00-00.000000"
    if lines is None:
        lines = []
        for doc in range(3):
            for filt in ("strict-match", "flexible-extract"):
                args = {"gen_args_0": {"arg_0": f"โจทย์: {doc}", "arg_1": {"until": ["โจทย์:"], "max_gen_toks": cap}}}
                lines.append(
                    {
                        "doc_id": doc,
                        "doc": {},
                        "target": str(doc + 1),
                        "filter": filt,
                        "arguments": args,
                        "resps": [[f"{doc} คำตอบคือ {doc + 1}"]],
                        "filtered_resps": [str(doc + 1)],
                    }
                )
    (folder / f"samples_{task}_{time}.jsonl").write_text(
        "".join(line if isinstance(line, str) else json.dumps(line, ensure_ascii=False) + "\n" for line in lines),
        "utf-8",
    )
    if model is not None or model_args is not None:
        args = {"pretrained": model} if model_args is None else model_args
        results = {"config": {"model": "hf", "model_args": args}, "configs": {task: {}}}
        (folder / f"results_{time}.json").write_text(json.dumps(results), "utf-8")
    return folder


def _import(logs, ledger, tokenizer="qwen3-8b", *extra):
    args = ["ledger", "import", str(logs), "--from", "lm-eval", "--tokenizer", tokenizer, "--out-dir", str(ledger)]
    return CliRunner().invoke(cli, [*args, *extra])


def _one_line_error(res, pattern):
    assert res.exit_code != 0
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(pattern, lines[0]), res.output


def test_a_built_log_imports(tmp_path):
    """The control for the error cases below: the same built log, unbroken, imports (deduplicated per filter)."""
    res = _import(_log(tmp_path / "run", model="Qwen/Qwen3-8B"), tmp_path / "L")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("imported 3 of 3 records")


def test_malformed_line_is_one_line_and_imports_nothing(tmp_path):
    good = json.dumps({"doc_id": 0, "target": "1", "resps": [["x"]], "arguments": {"gen_args_0": {"arg_0": "p"}}})
    logs = _log(tmp_path / "run", lines=[good + "\n", "{not json\n"])
    res = _import(logs, tmp_path / "L")
    _one_line_error(res, r"samples_mgsm_native_cot_th_.*\.jsonl:2: not valid JSON")
    assert not (tmp_path / "L").exists()


def test_a_line_without_responses_is_one_line(tmp_path):
    logs = _log(tmp_path / "run", lines=[json.dumps({"doc_id": 0, "target": "1", "arguments": {}}) + "\n"])
    _one_line_error(_import(logs, tmp_path / "L"), r":1: not an lm-eval sample line \(lacks resps\)")


def test_unmappable_task_is_one_line(tmp_path):
    res = _import(_log(tmp_path / "run", task="arc_easy"), tmp_path / "L")
    _one_line_error(res, r"lm-eval task 'arc_easy' is not one mindcap-tok maps.*--task FILE")
    assert not (tmp_path / "L").exists()


def test_model_mismatch_is_one_line(tmp_path):
    res = _import(_log(tmp_path / "run", model="meta-llama/Llama-3.1-8B"), tmp_path / "L")
    _one_line_error(res, r"the run's model is 'meta-llama/Llama-3.1-8B', but --tokenizer is 'qwen3-8b'")
    assert not (tmp_path / "L").exists()


def test_a_bad_second_file_leaves_the_ledger_as_it_was(tmp_path):
    """Several files are one commit: the first file's records are not stored when the second is broken."""
    _log(tmp_path / "run" / "a")
    _log(tmp_path / "run" / "b", task="mgsm_native_cot_de", lines=["[]\n"])
    res = _import(tmp_path / "run", tmp_path / "L")
    _one_line_error(res, r"expected a JSON object")
    assert not (tmp_path / "L").exists()


def test_over_cap_retokenized_records_are_kept_and_counted(tmp_path):
    """A text that encodes to more ids than its cap is kept (re-encoding is not sampling) and counted."""
    res = _import(_log(tmp_path / "run", cap=2), tmp_path / "L")
    assert res.exit_code == 0, res.output
    assert "3 of them encode to more ids than their cap" in res.output
    from mindcap_tok.store.ledger import Ledger

    table = Ledger(tmp_path / "L").read(columns=["n_tokens", "cap", "finish_reason", "retokenized", "finish_inferred"])
    assert (np.asarray(table.column("n_tokens")) > 2).all()
    assert set(table.column("finish_reason").to_pylist()) == {"length"}
    assert all(table.column("retokenized").to_pylist()) and all(table.column("finish_inferred").to_pylist())


def test_from_inspect_dispatches_to_its_reader(tmp_path):
    """``--from inspect`` goes to ``ingest/inspect_logs.py``'s reader, which refuses an lm-eval folder in one line."""
    res = _import(_log(tmp_path / "run"), tmp_path / "L")
    assert res.exit_code == 0
    args = ["ledger", "import", str(tmp_path / "run"), "--from", "inspect", "--tokenizer", "qwen3-8b"]
    res = CliRunner().invoke(cli, [*args, "--out-dir", str(tmp_path / "L2")])
    _one_line_error(res, r"run: folder holds no inspect log \(\*\.eval, \*\.json\)$")  # the inspect reader's refusal
    assert not (tmp_path / "L2").exists()


def test_jsonl_imports_one_file(tmp_path):
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "b.jsonl").write_text("{}\n")
    res = CliRunner().invoke(
        cli,
        ["ledger", "import", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--out-dir", str(tmp_path / "L")],
    )
    _one_line_error(res, r"--from jsonl imports one file")


def test_a_task_not_built_in_maps_through_its_task_file(tmp_path):
    """``tiny_de`` (lm-eval's name) is the user's task ``tiny`` in ``deu_Latn``; the gold is its integer."""
    from mindcap_tok.store.ledger import Ledger
    from task_files import SMALL

    (tmp_path / "tiny.toml").write_text(SMALL, "utf-8")
    logs = _log(tmp_path / "run", task="tiny_de")
    res = _import(logs, tmp_path / "L", "qwen3-8b", "--task", str(tmp_path / "tiny.toml"))
    assert res.exit_code == 0, res.output
    table = Ledger(tmp_path / "L").read(columns=["task", "lang", "arm", "gold", "item"]).to_pandas()
    assert set(table["task"]) == {"tiny"} and set(table["lang"]) == {"deu_Latn"} and set(table["arm"]) == {"native"}
    assert sorted(table["gold"]) == [1, 2, 3]


def test_a_folder_with_a_samples_file_named_without_its_time_is_one_line(tmp_path):
    """``samples_*.jsonl`` in a folder that lacks the ``_<time>`` part is refused by name, not a traceback."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "samples_mgsm.jsonl").write_text("", "utf-8")
    res = _import(tmp_path / "run", tmp_path / "L")
    _one_line_error(res, r"samples_mgsm\.jsonl: not an lm-eval samples file \(samples_<task>_<time>\.jsonl\)")
    assert not (tmp_path / "L").exists()


#: responses that encode to fewer, and far more, ids than :func:`_long_log`'s cap with the qwen3 tokenizer
LONG_TEXTS = ["7", "7 8", "คำตอบคือ 7 " * 20]


def _long_log(folder, model_args, cap=4):
    """Three docs, their responses :data:`LONG_TEXTS`, at ``cap``."""
    lines = []
    for doc, text in enumerate(LONG_TEXTS):
        args = {"gen_args_0": {"arg_0": "โจทย์ " * (doc + 1), "arg_1": {"until": ["โจทย์:"], "max_gen_toks": cap}}}
        lines.append({"doc_id": doc, "target": "7", "arguments": args, "resps": [[text]], "filter": "strict-match"})
    return _log(folder, lines=lines, model_args=model_args)


@pytest.mark.parametrize(
    "model_args",
    [
        "pretrained=Qwen/Qwen3-8B,think_end_token=</think>",
        {"pretrained": "Qwen/Qwen3-8B", "enable_thinking": True, "think_end_token": "151668"},
    ],
)
def test_a_run_with_think_end_token_logs_partial_outputs_of_unknown_cut(tmp_path, model_args):
    """lm-eval keeps only the text after the last think close: no finish reason is inferred, not even for a text
    that encodes past the cap, and the summary says so."""
    from mindcap_tok.store.ledger import Ledger

    res = _import(_long_log(tmp_path / "run", model_args), tmp_path / "L")
    assert res.exit_code == 0, res.output
    assert "3 hold only the text after the thought" in res.output
    table = Ledger(tmp_path / "L").read().to_pandas()
    assert table["output_partial"].all() and set(table["finish_reason"]) == {"unknown"}
    assert not table["finish_inferred"].any() and not table["thinking"].any()
    assert table["n_tokens"].max() > 4  # the text alone is longer than the cap: the decode was at least as long


def test_a_run_without_thinking_args_infers_finish_reasons(tmp_path, qwen):
    """The control: the same logs from a run that sets neither argument are complete outputs, reasons inferred."""
    from mindcap_tok.store.ledger import Ledger

    assert [len(qwen.encode(t)) >= 4 for t in LONG_TEXTS] == [False, False, True]
    res = _import(_long_log(tmp_path / "run", "pretrained=Qwen/Qwen3-8B,enable_thinking=False"), tmp_path / "L")
    assert res.exit_code == 0 and "hold only the text" not in res.output, res.output
    table = Ledger(tmp_path / "L").read(columns=["item", "finish_reason", "output_partial"]).to_pandas()
    assert not table["output_partial"].any()
    assert table.sort_values("item")["finish_reason"].tolist() == ["stop", "stop", "length"]


def test_prompts_longer_than_the_runs_context_allows_are_counted(tmp_path, qwen):
    """With ``max_length`` in model_args, a prompt whose ids and the cap exceed it was shortened by lm-eval."""
    from mindcap_tok.ingest.lmeval import read_lmeval_logs

    logs = _long_log(tmp_path / "run", "pretrained=Qwen/Qwen3-8B,max_length=8")
    lengths = [len(qwen.encode("โจทย์ " * (doc + 1))) for doc in range(3)]
    assert lengths[0] + 4 <= 8 < lengths[2] + 4  # some prompts fit, some do not
    got = read_lmeval_logs([logs], qwen)
    assert got.prompt_truncated == sum(n + 4 > 8 for n in lengths)
    res = _import(logs, tmp_path / "L")
    assert f"{got.prompt_truncated} prompts longer than the run's context allowed" in res.output, res.output


def test_a_bad_context_length_is_one_line(tmp_path):
    res = _import(_long_log(tmp_path / "run", "pretrained=Qwen/Qwen3-8B,max_length=lots"), tmp_path / "L")
    _one_line_error(res, r"model_args max_length = 'lots' is not a positive integer")


def test_import_help_says_task_takes_a_name_or_a_file():
    res = CliRunner().invoke(cli, ["ledger", "import", "--help"])
    assert "--task NAME|FILE" in res.output and "built-in task's name" in res.output


def test_a_task_given_by_name_maps_an_lm_eval_task_named_after_it(tmp_path):
    """``--task mgsm`` (a name, not a file) maps lm-eval's ``mgsm_de`` to mgsm in German."""
    from mindcap_tok.store.ledger import Ledger

    res = _import(_log(tmp_path / "run", task="mgsm_de"), tmp_path / "L", "qwen3-8b", "--task", "mgsm")
    assert res.exit_code == 0, res.output
    table = Ledger(tmp_path / "L").read(columns=["task", "lang"]).to_pandas()
    assert set(table["task"]) == {"mgsm"} and set(table["lang"]) == {"deu_Latn"}
