"""The failure tail decomposed into mutually exclusive outcomes, on hand-built traces counted by hand."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.scoring.outcomes import OUTCOMES, record_outcomes
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.stats.failure_tail import failure_tail
from mindcap_tok.store.ledger import Ledger

FILLER = "We add the two numbers and then check the sum once more. " * 4
# (text, finish reason, the outcome read by hand); gold 18, MGSM's strict '#### <integer>' line
TRACES = [
    ("คิด\n#### 18\n", "stop", "correct"),
    ("คิด\n#### 18", "stop", "correct"),  # the last line of a completed trace counts
    ("#### 17\n", "stop", "wrong"),
    ("#### 17\n" + FILLER, "length", "wrong"),  # capped, but an answer line was written: what is written decides
    ("#### 17\n#### 18\n", "stop", "several_answers"),  # the first line decides (wrong), a second one follows
    ("#### 5,600\n", "stop", "format_noncompliant"),  # thousands separator: only the lenient variant reads it
    ("#### ๑๘\n", "stop", "format_noncompliant"),  # Thai digits
    ("#### 4.5\n", "stop", "unparseable"),  # a non-integer
    ("So the answer is #### 18\n", "stop", "unparseable"),  # text before the marker: no variant reads it
    (FILLER, "length", "truncated"),
    ("I think it is eighteen.\n", "stop", "no_answer_line"),
]


def _records(qwen, arm="native"):
    return [make_record(qwen, t, arm=arm, item=i, finish_reason=f) for i, (t, f, _) in enumerate(TRACES)]


def test_outcomes_of_hand_built_traces(qwen):
    recs = _records(qwen)
    scores = score_ledger(pa.Table.from_pylist(recs), qwen, budgets=[4096])
    assert scores.by_record["outcome"].tolist() == [want for *_, want in TRACES]


def test_shares_sum_to_one_counted_by_hand(qwen):
    scores = score_ledger(pa.Table.from_pylist(_records(qwen) + _records(qwen, "translate-act")[:3]), qwen)
    tail = failure_tail(scores.by_record).set_index("arm")
    nat, tr = tail.loc["native"], tail.loc["translate-act"]
    assert nat["n"] == 11 and tr["n"] == 3
    by_hand = {
        "correct": 2,
        "wrong": 2,
        "several_answers": 1,
        "format_noncompliant": 2,
        "unparseable": 2,
        "truncated": 1,
        "no_answer_line": 1,
    }
    assert {k: nat[k] for k in OUTCOMES} == pytest.approx({k: v / 11 for k, v in by_hand.items()})
    assert tr["correct"] == pytest.approx(2 / 3) and tr["wrong"] == pytest.approx(1 / 3)
    assert sum(tr[k] for k in OUTCOMES) == pytest.approx(1) and sum(nat[k] for k in OUTCOMES) == pytest.approx(1)


def test_outcomes_use_the_tasks_parser():
    # Global-MMLU-Lite: labels A-D; '(B)' is a lenient form, '#### E' holds no label of the task
    texts = ["#### B\n", "#### C\n", "The answer is (B).\n", "#### E\n", "Hmm.\n"]
    table = pa.table({"text": texts, "finish_reason": ["stop"] * 5, "task": ["global-mmlu-lite"] * 5})
    out = record_outcomes(table, [1, 0, 0, 0, 0])
    assert out.tolist() == ["correct", "wrong", "format_noncompliant", "unparseable", "no_answer_line"]
    # the same '(B)' line in an integer task is no answer at all
    mgsm = pa.table({"text": ["The answer is (B).\n"], "finish_reason": ["length"], "task": ["mgsm"]})
    assert record_outcomes(mgsm, [0]).tolist() == ["truncated"]


def test_sweep_and_report_show_the_failure_tail(tmp_path, qwen):
    Ledger(tmp_path / "led").append(_records(qwen) + _records(qwen, "translate-act"), qwen)
    args = ["--ledger", str(tmp_path / "led"), "--premiums", "th=2", "--budgets", "32", "--n-boot", "50"]
    res = CliRunner().invoke(cli, ["sweep", *args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rows = {r["arm"]: r for r in json.loads(res.output)["failure_tail"]}
    assert rows["native"]["unparseable"] == pytest.approx(2 / 11)
    assert rows["native"]["truncated"] == pytest.approx(1 / 11)
    res = CliRunner().invoke(cli, ["sweep", *args], catch_exceptions=False)
    assert "Failure tail" in res.output
    out = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["report", *args, "--out-dir", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "### Failure tail" in (out / "report.md").read_text()
    assert (out / "failure_tail.csv").read_text().splitlines()[0].endswith(",".join(OUTCOMES))


# thinking records: (pieces, finish reason, outcome by hand); gold 18; the answer channel decides
THINKING = [
    (["<think>", "\n#### 18\n", "</think>", "\n\nI am not sure.\n"], "stop", "no_answer_line"),  # answer in thought
    (["<think>", "\n#### 18\nstill thinking"], "length", "truncated"),  # unclosed at the cap, right line inside
    (["<think>", "\nstill thinking #### 4.5"], "stop", "no_answer_line"),  # unclosed, stopped: marker inside only
    (["<think>", "\nok\n", "</think>", "\n#### 17\n"], "stop", "wrong"),
    (["<think>", "\nok\n", "</think>", "\n#### 18\n"], "stop", "correct"),
    (["<think>", "\n#### 17\n", "</think>", "\n#### 4.5\n"], "stop", "unparseable"),
]


def test_thinking_records_are_classified_on_the_answer_channel(qwen):
    recs = []
    close = qwen.tokenizer.token_to_id("</think>")
    for i, (pieces, finish, _) in enumerate(THINKING):
        ids = [t for p in pieces for t in qwen.tokenizer.encode(p, add_special_tokens=False).ids]
        end = ids.index(close) if close in ids else None
        text = qwen.tokenizer.decode(ids, skip_special_tokens=True)  # the whole trace, the thought included
        rec = make_record(qwen, "x", item=i, finish_reason=finish, thinking=True, think_end=end)
        recs.append(rec | {"output_ids": ids, "text": text, "cap": len(ids)})
    scores = score_ledger(pa.Table.from_pylist(recs), qwen, budgets=[4096])
    assert scores.by_record["outcome"].tolist() == [want for *_, want in THINKING]
    # without the channel the whole text would read otherwise (the first two hold a right answer line)
    plain = [{k: v for k, v in r.items() if k not in ("thinking", "think_end")} for r in recs]
    assert score_ledger(pa.Table.from_pylist(plain), qwen, budgets=[4096]).by_record["outcome"].tolist()[:2] == [
        "correct",
        "correct",
    ]
