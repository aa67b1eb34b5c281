"""Parser robustness on planted rescued, unstable and terminated cases, checked against decoding every prefix."""

from __future__ import annotations

import numpy as np
import pytest

from ledger_factory import make_record
from mindcap_tok.audits import parser_audit, read_records
from mindcap_tok.audits._common import score_matrix
from mindcap_tok.ledger.schema import validate_records
from mindcap_tok.stats.premiums import premium_table
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
        got_v = [None if np.isnan(v) else int(v) for v in reads["value"][r]]
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
