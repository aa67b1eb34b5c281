"""The emission time E makes the sub-CDF identity G(B) = acc(B) exact in the replay frame.

Qwen3 writes one digit per token, so budgets end inside multi-digit answers: the prefix ``#### 4`` of
``#### 42478`` reads 4, a wrong answer. E is the first budget from which the prefix reads the completed trace's
answer, so C·1[E ≤ B] counts a trace correct exactly when its strict prefix score is 1.
"""

from __future__ import annotations

import numpy as np

from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.stats.subcdf import subcdf
from score_reference import assert_equals_reference, reference_scores, trace_frame

TRACES = [  # (text, gold, finish reason)
    ("Let me add them up.\n#### 42478", 42478, "stop"),  # answer at the very end, no newline
    ("Step one: 3 + 4.\n#### 31415\nSo that is it.", 31415, "stop"),
    ("#### 1234\nThe tail goes on for a while after the answer.", 1234, "stop"),  # early answer
    ("Hmm.\n#### 27182\n", 99, "stop"),  # wrong answer, complete line
    ("The answer is 12.", 12, "stop"),  # no answer line
    ("Working on it\n#### 98", 987, "length"),  # cut by its cap inside the answer
    ("Try: 5\n#### 6\nNo wait.\n#### 70521", 70521, "stop"),  # the first answer line decides (wrong)
]


def _frame(qwen):
    enc = lambda s: qwen.tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    return trace_frame(qwen, [(enc(text), gold, finish) for text, gold, finish in TRACES])


def test_qwen3_writes_one_digit_per_token(qwen):
    assert len(qwen.tokenizer.encode("#### 42478", add_special_tokens=False).ids) == 2 + 5  # '####', ' ', digits


def test_subcdf_equals_prefix_accuracy_at_every_budget(qwen):
    frame = _frame(qwen)
    budgets = list(range(1, max(len(ids) for ids in frame["output_ids"]) + 2))
    decode = lambda ids: qwen.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    ref = reference_scores(decode, frame, budgets, "strict")
    scores = score_ledger(frame, qwen, budgets=budgets)
    acc = ref[0].mean(axis=0)  # acc(B) from decoding and parsing every prefix
    g = subcdf(scores.by_record, budgets)["G"].to_numpy()
    np.testing.assert_array_equal(g, acc)
    assert_equals_reference(scores, ref)  # scores, E (the reference's definition) and C, record by record
    n0 = len(frame["output_ids"][0])
    assert ref[0][0][:n0].tolist() == [0] * (n0 - 1) + [1]  # '#### 4' .. '#### 4247' score 0: wrong numbers


def test_emission_of_a_cut_answer_is_its_last_digit(qwen):
    frame = _frame(qwen)
    scores = score_ledger(frame, qwen, budgets=[1])
    n = [len(ids) for ids in frame["output_ids"]]
    em = scores.by_record["emission"].tolist()
    assert em[0] == n[0]  # the last token is the answer's last digit
    assert np.isnan(em[4])  # no answer line: never
    assert em[5] == n[5]  # '#### 98' cut by the cap: read as 98 only from its last token on (C = 0)
