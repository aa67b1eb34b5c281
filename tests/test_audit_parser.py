"""Parser robustness on planted rescued, unstable and terminated cases, checked against decoding every prefix."""

from __future__ import annotations

import numpy as np
import pytest

from ledger_factory import make_record
from mindcap_tok.audits import parser_audit, read_records
from mindcap_tok.audits._common import score_matrix
from mindcap_tok.stats.premiums import premium_table
from mindcap_tok.store.schema import validate_records
from mindcap_tok.tasks.answers.integer import parse_answer

PLANTED = [  # (text, gold, rescued, unstable)
    ("คิด\n#### 125\n", 12, True, True),  # reads 12 = gold while "#### 12" is unfinished; completes as 125
    ("คิด\n#### 45\n", 46, False, True),  # reads 4 on the way to 45: unstable, never gold
    ("คิด\n#### 18\n", 18, False, True),  # reads 1 on the way: unstable, and its final value is gold
    ("คิด\n#### 7\n", 7, False, False),  # one digit: the first value read is the final one
    ("คิด ไม่มีคำตอบ\n", 3, False, False),  # no answer line
    ("คิด\n#### 3 apples\n", 3, True, True),  # reads 3 while unfinished; the whole line is non-compliant
]


def _reference(tok, rec, budgets):
    """(value, read from a line cut short, that line's completed value) per budget, decoding every prefix."""
    ids = rec["output_ids"]
    full = tok.tokenizer.decode(ids, skip_special_tokens=True)
    out = []
    for b in budgets:
        text = tok.tokenizer.decode(ids[:b], skip_special_tokens=True)
        value = parse_answer(text, "strict")
        lines = text.split("\n")
        whole_line = full.split("\n")[len(lines) - 1]
        # read from the last visible line while that line is cut short
        unfinished = (
            value is not None
            and parse_answer("\n".join(lines[:-1]), "strict") is None
            and len(whole_line) > len(lines[-1])
        )
        whole = parse_answer(whole_line) if unfinished else value
        out.append((value, unfinished, whole))
    return out


@pytest.fixture(scope="module")
def planted(qwen):
    recs = [make_record(qwen, t, item=i, gold=g) for i, (t, g, _, _) in enumerate(PLANTED)]
    return recs, validate_records(recs)


def test_planted_rescued_and_unstable(qwen, planted):
    recs, table = planted
    budgets = list(range(1, max(len(r["output_ids"]) for r in recs) + 1))  # every prefix
    reads = read_records(table, {"qwen3-8b": qwen}, budgets=budgets, parsers=["strict"])["strict"]
    for r, rec in enumerate(recs):
        ref = _reference(qwen, rec, budgets)
        got_v = reads["value"][r].tolist()
        assert got_v == [v for v, _, _ in ref], rec["text"]
        assert reads["partial"][r].tolist() == [u for _, u, _ in ref]
    res = parser_audit(table, {"qwen3-8b": qwen}, budgets=budgets).tables["robustness"]
    assert res["rescued_traces"].tolist() == [sum(p[2] for p in PLANTED)]
    assert res["unstable_traces"].tolist() == [sum(p[3] for p in PLANTED)]
    assert res["rescued_correct"].iloc[0] == pytest.approx(2 / 6)
    assert res["value_unstable"].iloc[0] == pytest.approx(4 / 6)


def test_reader_scores_equal_the_scorer(qwen, llama):
    texts = ["a\n#### 12\nb", "#### ๑๘\n", "x #### 5\n#### 6", "#### 1 234\n#### 7", "no\n", "#### -3", "#### 12"]
    recs = [
        make_record(tok, t, item=i, gold=g, tokenizer=tok.name, finish_reason=fr)
        for tok in (qwen, llama)
        for i, (t, g) in enumerate(zip(texts, [12, 18, 6, 7, 0, -3, 12], strict=True))
        for fr in ("stop", "length")
    ]
    recs = [dict(r, sample=s) for s, r in enumerate(recs)]
    table = validate_records(recs)
    toks = {qwen.name: qwen, llama.name: llama}
    budgets = list(range(1, 12))
    for parser in ("strict", "terminated", "native-digits"):
        reads = read_records(table, toks, budgets=budgets, parsers=[parser])[parser]
        mine = (reads["value"] == table.column("gold").to_numpy()[:, None]).astype(np.int8)
        assert (mine == score_matrix(table, toks, budgets, parser)).all(), parser


def test_terminated_gains_and_peak_movement(qwen):
    filler = "ขั้นที่หนึ่ง คิดเลขทีละขั้น " * 3
    recs = [
        make_record(qwen, filler + "\n#### 10\n", item=0, gold=10),  # a gain terminated by its newline
        make_record(qwen, filler + "\n#### 10", item=1, gold=10, finish_reason="length"),  # cut: not terminated
        make_record(qwen, filler + "\n#### 10", item=2, gold=10, finish_reason="stop"),  # ends the trace: terminated
        make_record(qwen, filler + "\n#### 11\n", item=3, gold=10),  # wrong: no gain
    ]
    n_filler = len(qwen.tokenizer.encode(filler, add_special_tokens=False).ids)
    b = n_filler - 1  # no answer line is visible yet
    assert all(parse_answer(qwen.tokenizer.decode(r["output_ids"][:b])) is None for r in recs)
    assert all(len(r["output_ids"]) <= 2 * b for r in recs)
    res = parser_audit(validate_records(recs), {"qwen3-8b": qwen}, budgets=[b], premiums=premium_table({"tha_Thai": 2}))
    gains = res.tables["gains"].iloc[0]
    assert gains["scaled_budget"] == 2 * b and gains["gains"] == 3
    assert gains["terminated_share"] == pytest.approx(2 / 3)
    peak = res.tables["peaks"].iloc[0]
    assert peak["delta_strict"] == pytest.approx(3 / 4)
    assert peak["delta_terminated_at_peak"] == pytest.approx(2 / 4)
    assert peak["move_terminated"] == pytest.approx(-1 / 4)
    assert peak["move_native-digits"] == 0


BELEBELE = [  # (text, finish reason): gold "3"; the completed-trace verdicts worked by hand in the test
    ("Denken.\n#### 3\n", "stop"),  # every parser: right
    ("Die Antwort ist (3).\n", "stop"),  # paren and label only (no colon after "Antwort")
    ("Antwort: 3\n", "stop"),  # phrases and label only
    ("Answer: 2\n", "stop"),  # answer, phrases (English "Answer:") and label read 2: every parser wrong
    ("1 oder 2?\n#### 3\n", "stop"),  # the last label line is "#### 3": every parser right
    ("#### 3\nOder doch 2?\n", "stop"),  # label (the last label decides) reads 2: strict alone is right
    ("Denken.\n#### 3", "length"),  # cut: the unfinished line reads 3, but it is not terminated
]
MMATH = [  # gold \frac{1}{2}
    ("So x = 1/2.\n#### 0.5\n", "stop"),  # equivalent: strict and boxed right
    ("Thus \\boxed{\\frac{1}{2}}.\n", "stop"),  # boxed alone
    ("\\boxed{2}\n#### \\frac{1}{2}\n", "stop"),  # boxed reads the first answer line, the box: strict alone
    ("#### \\frac{1}{3}\n", "stop"),  # every parser wrong
]


def _task_records(tok, rows, *, task, lang, gold):
    return validate_records(
        [
            make_record(tok, text, item=i, gold=gold, finish_reason=fr, task=task, lang=lang)
            for i, (text, fr) in enumerate(rows)
        ]
    )


def _agreement(res) -> dict[str, tuple[int, int]]:
    table = res.tables["agreement"]
    return {
        v: (int(a), int(b)) for v, a, b in table[["variant", "strict_only", "variant_only"]].itertuples(index=False)
    }


def test_choice_task_variants_disagree_as_worked_by_hand(qwen):
    table = _task_records(qwen, BELEBELE, task="belebele", lang="deu_Latn", gold="3")
    res = parser_audit(table, {"qwen3-8b": qwen}, budgets=[4, 8])
    assert res.tables["robustness"]["task"].tolist() == ["belebele"]
    assert res.summary["variants"] == {"belebele": ["terminated", "paren", "answer", "phrases", "label"]}
    assert _agreement(res) == {
        "terminated": (1, 0),  # the cut trace
        "paren": (0, 1),  # "(3)"
        "answer": (0, 0),
        "phrases": (0, 1),  # "Antwort: 3"
        "label": (1, 2),  # "Oder doch 2?" against "(3)" and "Antwort: 3"
    }


def test_math_task_boxed_variant_disagrees_as_worked_by_hand(qwen):
    table = _task_records(qwen, MMATH, task="mmath", lang="eng_Latn", gold="\\frac{1}{2}")
    res = parser_audit(table, {"qwen3-8b": qwen}, budgets=[4, 8])
    assert res.tables["robustness"]["task"].tolist() == ["mmath"]
    assert _agreement(res) == {"terminated": (0, 0), "boxed": (1, 1)}


@pytest.mark.parametrize(
    ("rows", "task", "lang", "gold", "parsers"),
    [
        (BELEBELE, "belebele", "deu_Latn", "3", ("strict", "terminated", "paren", "answer", "phrases", "label")),
        (MMATH, "mmath", "eng_Latn", "\\frac{1}{2}", ("strict", "terminated", "boxed")),
    ],
)
def test_task_readings_equal_decoding_every_prefix(qwen, rows, task, lang, gold, parsers):
    from mindcap_tok.audits._common import task_answer_parser
    from mindcap_tok.tasks.load import load_task

    table = _task_records(qwen, rows, task=task, lang=lang, gold=gold)
    ids = table.column("output_ids").to_pylist()
    budgets = list(range(1, max(map(len, ids)) + 1))
    reads = read_records(table, {"qwen3-8b": qwen}, budgets=budgets, parsers=parsers)
    for name in parsers:
        parser = task_answer_parser(load_task(task), name)
        for r, (rid, (_, fr)) in enumerate(zip(ids, rows, strict=True)):
            want = [
                parser.parse(qwen.tokenizer.decode(rid[:b], skip_special_tokens=True), b >= len(rid) and fr == "stop")
                for b in budgets
            ]
            assert reads[name]["value"][r].tolist() == want, (name, rows[r][0])
