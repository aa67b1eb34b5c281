"""Prefix scoring of choice and math traces: the fast scorer against decoding every prefix with Qwen3's tokenizer,
and ``score_ledger`` reading ``task`` and ``gold_text``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from answer_specs import ABCD, MATH
from mindcap_tok.errors import MindcapError
from mindcap_tok.scoring.score import byte_table, score_ledger, score_prefixes
from mindcap_tok.tasks.answers import get_parser
from mindcap_tok.tasks.mgsm import load_mgsm
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from score_reference import assert_equals_reference, reference_scores, trace_frame

CHOICE_PARSERS = ["strict", "paren", "answer", "phrases", "label", "paren+answer+phrases+last", "answer+terminated"]
MATH_PARSERS = ["strict", "boxed", "boxed+last", "boxed+terminated"]
MATH_GOLDS = [("\\frac{1}{2}", "0.5"), ("2.0", "2"), ("\\frac{3}{4}", "\\frac{3}{4}"), ("12", "12")]


def _tools(tok, rng):
    enc = lambda s: tok.tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    byte_id = lambda data: [tok.tokenizer.token_to_id(BYTE_TO_CHAR[b]) for b in data]  # noqa: E731
    soup = lambda k: [int(x) for x in rng.integers(0, 150_000, k)]  # noqa: E731
    return enc, byte_id, soup


def _finish(tok, rng, ids: list[int]) -> tuple[list[int], str]:
    finish = "stop" if rng.random() < 0.6 else "length"
    if finish == "stop" and rng.random() < 0.7:
        ids = [*ids, tok.tokenizer.token_to_id("<|im_end|>")]  # a special token: no text
    return ids, finish


def _choice_trace(tok, rng, kind: int, body: str) -> tuple[list[int], str, str]:
    enc, byte_id, soup = _tools(tok, rng)
    gold, other = (str(x) for x in rng.choice(list("ABCD"), 2, replace=False))
    if kind == 0:  # strict early, long tail
        ids = enc(f"#### {gold}\n{body}\n{body}")
    elif kind == 1:  # "Answer: (X)" at the end, no newline
        ids = enc(f"{body}\nAnswer: ({gold})")
    elif kind == 2:  # a label in parentheses mid-sentence, then a Spanish answer phrase
        ids = enc(f"{body} ({other}) {body[:20]}\nRespuesta: {gold}\n")
    elif kind == 3:  # wrong strict line, then the right one
        ids = enc(f"{body}\n#### {other}\n{body[:30]}\n#### {gold}\n")
    elif kind == 4:  # the answer line one byte per token: every cut falls inside it
        ids = enc(body + "\n") + byte_id(f"Answer: {gold}\n".encode())
    elif kind == 5:  # Thai characters cut byte by byte right after a label
        ids = enc(f"{body}\n({gold})") + byte_id("บาท".encode()) + enc("\n" + body[:20])
    elif kind == 6:  # token soup with an answer planted
        ids = soup(int(rng.integers(5, 40))) + enc(f"\nAntwort: {gold}\n") + soup(int(rng.integers(0, 30)))
    elif kind == 7:  # CRLF lines
        ids = enc(f"{body}\r\n#### {gold}\r\n{other}\r\n")
    elif kind == 8:  # standalone labels in prose; "Answer: Because" reads a label only while cut after B
        ids = enc(f"{body}\nAnswer: Because {other} is wrong, {gold}")
    else:  # no answer at all
        ids = enc(f"{body}\n### {gold}\n")
    ids, finish = _finish(tok, rng, ids)
    return ids, gold, finish


def _math_trace(tok, rng, kind: int, body: str) -> tuple[list[int], str, str]:
    enc, byte_id, soup = _tools(tok, rng)
    written, gold = MATH_GOLDS[int(rng.integers(len(MATH_GOLDS)))]
    if kind == 0:  # strict early, long tail
        ids = enc(f"#### {written}\n{body}")
    elif kind == 1:  # boxed at the end of a sentence, no newline
        ids = enc(f"{body}\nso the result is \\boxed{{{written}}}.")
    elif kind == 2:  # wrong box, then the right strict line
        ids = enc(f"{body} \\boxed{{7}}\n#### {written}\n")
    elif kind == 3:  # the strict line one byte per token
        ids = enc(body + "\n") + byte_id(f"#### {written}\n".encode())
    elif kind == 4:  # Thai cut byte by byte right after the answer
        ids = enc(f"{body}\n#### {written}") + byte_id("บาท".encode()) + enc("\n")
    elif kind == 5:  # an unbalanced box, then a nested one
        ids = enc(f"\\boxed{{{written}\n{body[:20]}\n\\boxed{{\\frac{{1}}{{2}}}}\n")
    elif kind == 6:  # token soup with a box planted
        ids = soup(int(rng.integers(5, 30))) + enc(f"\n\\boxed{{{written}}}\n") + soup(int(rng.integers(0, 20)))
    else:  # CRLF lines
        ids = enc(f"{body}\r\n#### {written}\r\n")
    ids, finish = _finish(tok, rng, ids)
    return ids, gold, finish


def _bodies(config) -> list[str]:
    return [it.question for lang in ("th", "es", "de") for it in load_mgsm(lang, config.data_dir.value)[:20]]


def _frame(tok, config, make, kinds: int, n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    bodies = _bodies(config)
    traces = (
        make(tok, rng, i % kinds, bodies[int(rng.integers(len(bodies)))][: int(rng.integers(20, 90))]) for i in range(n)
    )
    return trace_frame(tok, traces)


def _check(tok, frame: pd.DataFrame, parser) -> None:
    """The fast scorer (ledger with golds in ``gold_text``; texts + offsets) equals decoding every prefix."""
    budgets = list(range(1, int(frame["output_ids"].map(len).max()) + 2))
    decode = lambda ids: tok.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    reference = reference_scores(decode, frame, budgets, parser)
    assert reference[0].sum() > 0 and np.isfinite(reference[1]).sum() > 10  # the cases are not all trivial
    ledger = frame.assign(gold=None, gold_text=frame["gold"])
    assert_equals_reference(score_ledger(ledger, tok, budgets=budgets, parser=parser), reference)
    table = byte_table(tok)
    texts = [table.decode(ids) for ids in frame["output_ids"]]
    ends = [np.cumsum(table.lengths[np.asarray(ids)]) for ids in frame["output_ids"]]
    done = (frame["finish_reason"] == "stop").to_numpy()
    via_text = score_prefixes(texts, ends, golds=frame["gold"].tolist(), budgets=budgets, parser=parser, complete=done)
    np.testing.assert_array_equal(via_text.scores, reference[0])
    np.testing.assert_array_equal(via_text.emission, reference[1])


@pytest.fixture(scope="module")
def choice_frame(qwen, config):
    return _frame(qwen, config, _choice_trace, 10, 60, seed=22)


@pytest.fixture(scope="module")
def math_frame(qwen, config):
    return _frame(qwen, config, _math_trace, 8, 40, seed=23)


@pytest.mark.parametrize("variant", CHOICE_PARSERS)
def test_choice_prefix_scores_equal_decoding_every_prefix(qwen, choice_frame, variant):
    _check(qwen, choice_frame, get_parser(variant, ABCD))


@pytest.mark.parametrize("variant", MATH_PARSERS)
def test_math_prefix_scores_equal_decoding_every_prefix(qwen, math_frame, variant):
    _check(qwen, math_frame, get_parser(variant, MATH))


def test_math_scores_by_hand(qwen):
    """``#### \\frac{1}{2}`` against gold 0.5: Qwen3 tokens, the answer readable (and equivalent) only whole."""
    enc = lambda s: qwen.tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    ids = enc("#### \\frac{1}{2}\n")
    # by hand: the pieces are "####", " \\", "frac", "{", "1", "}{", "2", "}\n": budgets 2-7 read the unfinished
    # "\\", "\\frac", ..., "\\frac{1}{2" (none equivalent to 0.5); only the 8th token closes the fraction
    assert [qwen.tokenizer.decode([i]) for i in ids] == ["####", " \\", "frac", "{", "1", "}{", "2", "}\n"]
    frame = trace_frame(qwen, [(ids, None, "stop")]).assign(gold=None, gold_text="0.5")
    res = score_ledger(frame, qwen, budgets=list(range(1, 9)), parser=get_parser("strict", MATH))
    assert res.by_budget["score"].tolist() == [0, 0, 0, 0, 0, 0, 0, 1]
    assert res.by_record["emission"].tolist() == [8] and res.by_record["correct"].tolist() == [1]
    assert res.versions == get_parser("strict", MATH).versions and res.parser == "strict"


_QUIZ = """name = "quiz"
version = 1
licence = "CC-BY-4.0"
languages = ["eng_Latn"]
native = "native"
comparator = "translate-act"
[source]
files = "quiz-{lang}.jsonl"
fields = { q = "question" }
[answer]
type = "choice"
labels = ["A", "B", "C", "D"]
[gold]
field = "answer"
type = "string"
[arms.native.templates."*"]
instruction = "Answer."
body = "{q}"
[arms.translate-act.templates."*"]
instruction = "Translate, then answer."
body = "{q}"
"""


def test_score_ledger_reads_task_and_gold_text(qwen, tmp_path):
    enc = lambda s: qwen.tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    texts = ["#### 5\n", "#### B\n", "#### 6\n", "#### C\n"]
    frame = trace_frame(qwen, [(enc(t), None, "stop") for t in texts]).assign(
        task=["mgsm", "quiz", None, "quiz"], gold=[5, None, 5, None], gold_text=[None, "B", None, "D"]
    )
    with pytest.raises(MindcapError, match="task 'quiz', which is not built in"):
        score_ledger(frame, qwen, budgets=[100])
    (tmp_path / "quiz.toml").write_text(_QUIZ, "utf-8")
    progress = []
    res = score_ledger(
        frame,
        qwen,
        budgets=[100],
        on_progress=lambda done, total: progress.append((done, total)),
        tasks=[tmp_path / "quiz.toml"],
    )
    # by hand: mgsm reads 5 (gold 5) and 6 (gold 5, task null = mgsm); the quiz reads B (gold B) and C (gold D)
    assert res.by_record["correct"].tolist() == [1, 1, 0, 0] and res.by_budget["score"].tolist() == [1, 1, 0, 0]
    assert progress[-1] == (4, 4) and res.parser == "strict"
    # no task column: every record is MGSM's, its gold an integer (today's ledgers)
    old = trace_frame(qwen, [(enc("#### 5\n"), 5, "stop")])
    assert score_ledger(old, qwen, budgets=[100]).by_record["correct"].tolist() == [1]
