"""`mindcap-tok check` and :func:`mindcap_tok.checks.check_run`: a run's cut shares, accuracies at the cap and
premium-scaled caps against values worked out by hand (token counts from the real Qwen3 tokenizer, Wilson intervals
from statsmodels, premiums from FLORES counted line by line), its exit codes (0, bad input 2, binding 3), its
format detection, and that it writes nothing unless asked.

lm-eval logs are built here in the schema lm-eval 0.4.13 writes with ``--log_samples`` (as in test_import_lmeval.py);
runs of the real tool are checked in test_check_evals.py (``-m evals``).
"""

from __future__ import annotations

import json
import re
import tempfile
import unicodedata
from fractions import Fraction
from math import floor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from statsmodels.stats.proportion import proportion_confint

from ledger_factory import FILLER, make_record
from mindcap_tok.checks import check_run, detect_source
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import BadInputError
from mindcap_tok.store import Ledger
from price_fixture import save_tiny

CAP = 40


def _cell_records(tok, **kw) -> list[dict]:
    """Six Thai traces at cap 40: three complete (two right, one wrong) and three cut by the cap (one answered
    right before the cut, two never answering within it)."""
    texts = [
        ("Answer line:\n#### 10\n", 10),
        ("Answer line:\n#### 11\n", 11),
        ("Answer line:\n#### 99\n", 12),  # wrong
        ("#### 13\n" + FILLER * 4, 13),  # right, then cut
        (FILLER * 4 + "#### 14\n", 14),  # cut before its answer
        (FILLER * 5, 15),
    ]
    return [make_record(tok, text, item=i, gold=gold, cap=CAP, **kw) for i, (text, gold) in enumerate(texts)]


@pytest.fixture
def ledger(tmp_path, qwen):
    records = _cell_records(qwen)
    assert [r["finish_reason"] for r in records] == ["stop"] * 3 + ["length"] * 3
    Ledger(tmp_path / "L").append(records, qwen)
    return tmp_path / "L"


def test_a_ledgers_cut_share_accuracies_and_rerun_cap_are_the_hand_worked_ones(ledger, qwen):
    got = check_run([ledger], tokenizer=qwen, premiums=["th=2.55"])
    assert got.source == "ledger"
    (cell,) = got.cells
    assert (cell.lang, cell.arm, cell.task, cell.cap, cell.records) == ("tha_Thai", "native", "mgsm", CAP, 6)
    assert (cell.cut, cell.completed, cell.unknown) == (3, 3, 0)
    assert cell.cut_share == 0.5 and cell.max_gain == pytest.approx(2 / 6)  # cut and wrong at the cap: 2 of 6
    low, high = proportion_confint(3, 6, alpha=0.05, method="wilson")
    assert cell.ci_low == pytest.approx(low, abs=1e-12) and cell.ci_high == pytest.approx(high, abs=1e-12)
    assert cell.acc_completed == pytest.approx(2 / 3) and cell.acc_cut == pytest.approx(1 / 3)
    assert cell.acc_unknown is None and cell.accuracy == pytest.approx(3 / 6)
    assert cell.never_answered == pytest.approx(2 / 6)
    assert cell.premium == 2.55 and cell.rerun_cap == floor(Fraction(255, 100) * CAP) == 102
    assert "caps = [102]  # mgsm native tha_Thai" in got.snippet


def test_the_level_sets_the_wilson_interval(ledger, qwen):
    (cell,) = check_run([ledger], tokenizer=qwen, premiums=["th=2"], level=0.8).cells
    low, high = proportion_confint(3, 6, alpha=0.2, method="wilson")
    assert (cell.ci_low, cell.ci_high) == pytest.approx((low, high), abs=1e-12)


def test_the_default_premium_is_the_tokenizers_flores_premium(ledger, qwen, flores_dir):
    """r = Thai tokens / English tokens over FLORES-200 devtest (NFC lines, no special tokens), counted here."""

    def tokens(code: str) -> int:
        lines = Path(f"{flores_dir}/devtest/{code}.devtest").read_text("utf-8").splitlines()
        return sum(len(qwen.tokenizer.encode(unicodedata.normalize("NFC", x), add_special_tokens=False)) for x in lines)

    (cell,) = check_run([ledger], tokenizer=qwen).cells
    r = Fraction(tokens("tha_Thai"), tokens("eng_Latn"))
    assert cell.premium == pytest.approx(float(r)) and cell.rerun_cap == floor(r * CAP)


def test_english_needs_no_premium(tmp_path, qwen):
    Ledger(tmp_path / "L").append(_cell_records(qwen, lang="eng_Latn"), qwen)
    got = check_run([tmp_path / "L"], tokenizer=qwen)
    assert got.premiums.startswith("none needed") and got.cells[0].premium == 1.0 and got.cells[0].rerun_cap == CAP


def test_traces_of_unknown_cut_status_give_bounds_not_a_share(tmp_path, qwen):
    records = _cell_records(qwen)
    for rec in records[:2]:  # two complete traces whose log did not say how they ended
        rec["finish_reason"] = "unknown"
    Ledger(tmp_path / "L").append(records, qwen)
    got = check_run([tmp_path / "L"], tokenizer=qwen, premiums=["th=2"])
    (cell,) = got.cells
    assert (cell.cut, cell.completed, cell.unknown) == (3, 1, 2) and cell.cut_share is None
    assert (cell.cut_share_low, cell.cut_share_high) == (0.5, pytest.approx(5 / 6))
    assert cell.max_gain == pytest.approx(2 / 6)  # the two unknown traces are right at the cap: nothing to add
    assert cell.ci_low == pytest.approx(proportion_confint(3, 6, method="wilson")[0], abs=1e-12)
    assert cell.ci_high == pytest.approx(proportion_confint(5, 6, method="wilson")[1], abs=1e-12)
    assert cell.acc_unknown == 1.0 and cell.acc_completed == 0.0
    assert got.binding(0.6) == [] and got.undecided(0.6) == [cell] and got.binding(0.4) == [cell]


# -- JSON lines and the CLI -------------------------------------------------------------------------------------
def _jsonl(tmp_path, qwen):
    path = tmp_path / "run" / "gen.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _cell_records(qwen)), "utf-8")
    return path


def _check(*args):
    return CliRunner().invoke(cli, ["check", *map(str, args)])


def test_json_lines_check_as_json_and_exit_codes_of_fail_on_binding(tmp_path, qwen):
    run = _jsonl(tmp_path, qwen)
    res = _check(run, "--tokenizer", "qwen3-8b", "--premiums", "th=2.55", "--format", "json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout, parse_constant=lambda c: pytest.fail(c))
    assert got["source"] == "jsonl" and got["ledger"] is None
    (cell,) = got["cells"]
    assert (cell["cut_share"], cell["rerun_cap"], cell["acc_cut"]) == (0.5, 102, pytest.approx(1 / 3))
    for threshold, code in (("0.4", 3), ("0.5", 0), ("0.6", 0)):
        res = _check(run, "--tokenizer", "qwen3-8b", "--premiums", "th=2.55", "--fail-on-binding", threshold)
        assert res.exit_code == code, (threshold, res.output)
        assert ("binding: 1 cell(s)" in res.stderr) == (code == 3)
    assert sorted(p.name for p in run.parent.iterdir()) == ["gen.jsonl"]


def test_nothing_is_written_without_out_or_ledger_out(tmp_path, qwen, monkeypatch):
    run = _jsonl(tmp_path, qwen)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the temporary ledger goes
    res = _check(run, "--tokenizer", "qwen3-8b", "--premiums", "th=2", "--format", "md")
    assert res.exit_code == 0, res.output
    assert "| tha_Thai |" in res.stdout and "caps = [80]" in res.stdout
    assert list(scratch.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["run", "tmp"]


def test_out_writes_the_product_and_ledger_out_keeps_the_ledger(tmp_path, qwen):
    run = _jsonl(tmp_path, qwen)
    out, kept = tmp_path / "check.json", tmp_path / "kept"
    args = ["--tokenizer", "qwen3-8b", "--premiums", "th=2", "--format", "json"]
    res = _check(run, *args, "--out", out, "--ledger-out", kept)
    assert res.exit_code == 0, res.output
    assert res.stdout == "" and f"wrote {out}" in res.stderr
    assert json.loads(out.read_text())["ledger"] == str(kept)
    assert len(Ledger(kept)) == 6
    again = _check(run, *args, "--ledger-out", kept)  # a kept ledger is never appended to
    assert again.exit_code == 2 and "already holds a ledger" in again.stderr


def _lmeval_log(folder, texts, *, lang="de", cap=8, model="Qwen/Qwen3-8B"):
    """One samples file (two filter lines per doc) and its results file, as lm-eval 0.4.13 writes them."""
    folder.mkdir(parents=True)
    task, time = f"mgsm_native_cot_{lang}", "2026-01-01T00-00-00.000000"
    with open(folder / f"samples_{task}_{time}.jsonl", "w", encoding="utf-8") as fh:
        for doc, (text, gold) in enumerate(texts):
            args = {"gen_args_0": {"arg_0": f"Frage {doc}", "arg_1": {"until": ["Frage:"], "max_gen_toks": cap}}}
            for filt in ("strict-match", "flexible-extract"):
                line = {"doc_id": doc, "doc": {}, "target": str(gold), "filter": filt, "arguments": args}
                fh.write(json.dumps({**line, "resps": [[text]], "filtered_resps": [str(gold)]}) + "\n")
    results = {"config": {"model": "hf", "model_args": f"pretrained={model}"}, "configs": {task: {}}}
    (folder / f"results_{time}.json").write_text(json.dumps(results), "utf-8")
    return folder


LMEVAL_TEXTS = [
    ("Also:\n#### 4", 4),
    ("Also:\n#### 5", 6),
    ("eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf", 7),
    ("#### 8\nUnd dann zählen wir weiter bis zwanzig und mehr", 8),
]


def test_lm_eval_logs_are_detected_cut_by_their_reencoded_length_and_get_their_snippet(tmp_path, qwen):
    logs = _lmeval_log(tmp_path / "out", LMEVAL_TEXTS)
    lengths = [len(qwen.tokenizer.encode(t, add_special_tokens=False)) for t, _ in LMEVAL_TEXTS]
    assert [n >= 8 for n in lengths] == [False, False, True, True]  # the inputs are what the test says
    res = _check(logs, "--tokenizer", "qwen3-8b", "--premiums", "de=1.56", "--format", "json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    (cell,) = got["cells"]
    assert got["source"] == "lm-eval" and cell["harness_task"] == "mgsm_native_cot_de"
    assert (cell["records"], cell["cut"], cell["cap"], cell["rerun_cap"]) == (4, 2, 8, floor(Fraction(156, 100) * 8))
    assert (cell["acc_completed"], cell["acc_cut"], cell["never_answered"]) == (0.5, 0.5, 0.25)
    assert "lm_eval ... --tasks mgsm_native_cot_de --gen_kwargs max_gen_toks=12" in got["snippet"]


# -- bad input: one line, exit 2, nothing written ---------------------------------------------------------------
def _one_line(res, pattern):
    assert res.exit_code == 2, res.output
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and re.search(pattern, lines[0]), res.stderr
    assert res.stdout == ""


def test_a_log_model_other_than_the_tokenizer_is_one_line(tmp_path):
    logs = _lmeval_log(tmp_path / "out", LMEVAL_TEXTS, model="meta-llama/Llama-3.1-8B-Instruct")
    _one_line(_check(logs, "--tokenizer", "qwen3-8b", "--premiums", "de=2"), r"the run's model is .*Llama")


def test_ids_outside_the_tokenizers_vocabulary_are_one_line(tmp_path, qwen):
    save_tiny(tmp_path / "tiny")  # a 260-id byte-level tokenizer: Qwen3's ids are outside it
    run = _jsonl(tmp_path, qwen)
    _one_line(_check(run, "--tokenizer", tmp_path / "tiny", "--premiums", "th=2"), r"vocabulary|vocab")
    _one_line(
        _check(_ledger_of(tmp_path, qwen), "--tokenizer", "llama3.1", "--premiums", "th=2"),
        r"ids belong to tokenizer .qwen3-8b. .*not to llama",
    )


def _ledger_of(tmp_path, qwen):
    Ledger(tmp_path / "L").append(_cell_records(qwen), qwen)
    return tmp_path / "L"


def test_a_mixed_folder_is_one_line(tmp_path, qwen):
    logs = _lmeval_log(tmp_path / "out", LMEVAL_TEXTS)
    (logs / "other.jsonl").write_text(json.dumps(_cell_records(qwen)[0]) + "\n", "utf-8")
    _one_line(_check(logs, "--tokenizer", "qwen3-8b"), r"mixes formats: jsonl .*; lm-eval")


def test_an_undetectable_file_and_a_parquet_that_is_not_lightevals_are_one_line(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n", "utf-8")
    _one_line(_check(notes, "--tokenizer", "qwen3-8b"), r"cannot detect the format of this file")
    table = tmp_path / "details_mgsm_2026.parquet"
    pq.write_table(pa.table({"question": ["q"], "answer": ["a"]}), table)
    _one_line(_check(table, "--tokenizer", "qwen3-8b"), r"not a lighteval details file")
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line(_check(empty, "--tokenizer", "qwen3-8b"), r"cannot detect a run in this folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["details_mgsm_2026.parquet", "empty", "notes.txt"]


def test_harness_logs_need_the_tokenizer(tmp_path):
    _one_line(_check(_lmeval_log(tmp_path / "out", LMEVAL_TEXTS)), r"needs the model's tokenizer \(--tokenizer\)")


def test_detection_by_name_and_content(tmp_path, qwen):
    lm = _lmeval_log(tmp_path / "lm", LMEVAL_TEXTS)
    assert detect_source([lm]) == detect_source(sorted(lm.glob("samples_*"))) == "lm-eval"
    assert detect_source([_jsonl(tmp_path, qwen)]) == "jsonl"
    assert detect_source([_ledger_of(tmp_path, qwen)]) == "ledger"
    (tmp_path / "x.eval").write_bytes(b"PK")
    assert detect_source([tmp_path / "x.eval"]) == "inspect"
    with pytest.raises(BadInputError, match="mixes formats"):
        detect_source([lm, tmp_path / "x.eval"])


def _lighteval_details(path, outputs: list[list[int]], golds: list[int]):
    """A details file in the shape lighteval 0.13.0 writes (one row per doc: doc, model_response, metric), each doc's
    one response given by its sampled ids, at generation_size 16."""
    docs = [
        {"query": f"Frage {i}", "choices": [str(g)], "gold_index": 0, "id": str(i), "task_name": "mgsm:de|0"}
        for i, g in enumerate(golds)
    ]
    responses = [
        {"input": f"Frage {i}", "input_tokens": [1, 2], "text": ["x"], "output_tokens": [ids], "reasonings": []}
        for i, ids in enumerate(outputs)
    ]
    response_type = pa.struct(
        [
            pa.field("input", pa.string()),
            pa.field("input_tokens", pa.list_(pa.int64())),
            pa.field("text", pa.list_(pa.string())),
            pa.field("output_tokens", pa.list_(pa.list_(pa.int64()))),
            pa.field("text_post_processed", pa.list_(pa.string())),
            pa.field("reasonings", pa.list_(pa.string())),
        ]
    )
    table = pa.table(
        {
            "doc": pa.array([{**d, "generation_size": 16} for d in docs]),
            "metric": pa.array([{"em": 1.0}] * len(docs)),
            "model_response": pa.array([{**r, "text_post_processed": None} for r in responses], response_type),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def test_lighteval_details_are_checked_on_their_sampled_ids(tmp_path, qwen):
    answered = qwen.encode(" 9 + 9 = 18\n#### 18")
    cut = qwen.encode(FILLER * 3)[:16]  # the generation_size reached: cut by the cap
    assert len(answered) < 16 == len(cut)
    details = _lighteval_details(tmp_path / "out" / "details_mgsm:de|0_2026.parquet", [answered, cut], [18, 5])
    assert detect_source([tmp_path / "out"]) == detect_source([details]) == "lighteval"
    got = check_run([tmp_path / "out"], tokenizer=qwen, premiums=["de=1.5"])
    (cell,) = got.cells
    assert (cell.records, cell.cap, cell.cut, cell.cut_share, cell.rerun_cap) == (2, 16, 1, 0.5, 24)
    assert (cell.acc_completed, cell.acc_cut, cell.never_answered) == (1.0, 0.0, 0.5)
    assert got.source == "lighteval" and "generation_size=24" in got.snippet
