"""Prefix scoring: the fast byte-position scorer against decoding every prefix with the real tokenizers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.scoring.score import (
    accuracy_curves,
    byte_table,
    score_by_tokenizer,
    score_ledger,
    score_prefixes,
    score_token_ids,
)
from mindcap_tok.tasks.mgsm import load_mgsm
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from score_reference import assert_equals_reference, reference_scores, trace_frame

PARSERS = ["strict", "last", "terminated", "thousands", "native-digits", "last+terminated"]
THAI_DIGITS = str.maketrans("0123456789", "๐๑๒๓๔๕๖๗๘๙")
EOS = {"qwen3-8b": "<|im_end|>", "llama-3.1-8b": "<|eot_id|>"}


def _trace(tok, rng, kind: int, questions: list[str]) -> tuple[list[int], int, str]:
    """Token ids of one varied trace, its gold answer and finish reason."""
    enc = lambda s: tok.tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    byte_id = lambda data: [tok.tokenizer.token_to_id(BYTE_TO_CHAR[b]) for b in data]  # noqa: E731
    gold = int(rng.integers(1, 300_000))
    q = questions[int(rng.integers(len(questions)))]
    body = q[: int(rng.integers(20, 120))]
    ids: list[int] = []
    if kind == 0:  # early answer, long tail
        ids = enc(f"#### {gold}\n{body}\n{body}")
    elif kind == 1:  # late answer, no final newline
        ids = enc(f"{body}\n#### {gold}")
    elif kind == 2:  # missing answer line
        ids = enc(f"{body}\nคำตอบคือ {gold}\n### {gold}\n")
    elif kind == 3:  # wrong, then right
        ids = enc(f"{body}\n#### {gold + 1}\n{body[:30]}\n#### {gold}\n")
    elif kind == 4:  # native digits
        ids = enc(f"{body}\n#### {str(gold).translate(THAI_DIGITS)}\n")
    elif kind == 5:  # thousands separators
        ids = enc(f"{body}\n#### {gold:,}\n")
    elif kind == 6:  # the answer line written one byte per token: every cut falls somewhere inside it
        ids = enc(body + "\n") + byte_id(f"#### {gold}\n".encode())
    elif kind == 7:  # multi-byte characters cut right after the number (Thai, emoji), byte by byte
        tail = rng.choice(["บาท", "😀", "€", " ๆ"])
        ids = enc(f"{body}\n#### {gold}") + byte_id(str(tail).encode()) + enc("\n" + body[:20])
    elif kind == 8:  # token soup: random ids from the whole vocabulary, with an answer line planted
        soup = lambda k: [int(x) for x in rng.integers(0, 150_000 if tok.name == "qwen3-8b" else 128_000, k)]  # noqa: E731
        ids = soup(int(rng.integers(5, 40))) + enc(f"\n#### {gold}\n") + soup(int(rng.integers(0, 30)))
    elif kind == 9:  # CRLF lines and a negative distractor
        ids = enc(f"{body}\r\n#### -{gold}x\r\n#### {gold}\r\n")
    elif kind == 10:  # a native-digit line cut inside a digit (3 bytes each)
        ids = enc(body + "\n") + byte_id(f"#### {str(gold).translate(THAI_DIGITS)}".encode()) + enc("\n")
    else:  # the answer inside a sentence (non-compliant) and an unfinished strict line at the very end
        ids = enc(f"{body} #### {gold}\nso\n#### {gold}0")
    finish = "stop" if rng.random() < 0.6 else "length"
    if finish == "stop" and rng.random() < 0.7:
        ids = [*ids, tok.tokenizer.token_to_id(EOS[tok.name])]  # a special token: no text
    return ids, gold, finish


def _records(tok, n: int, seed: int, config) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    questions = [
        it.question for lang in ("th", "de", "sw", "bn", "ja") for it in load_mgsm(lang, config.data_dir.value)[:40]
    ]
    return trace_frame(tok, (_trace(tok, rng, i % 12, questions) for i in range(n)))


def _reference(tok, frame: pd.DataFrame, budgets: list[int], parser: str):
    """Decode every prefix with the tokenizer itself (skip_special_tokens=True) and parse it."""
    return reference_scores(lambda ids: tok.tokenizer.decode(ids, skip_special_tokens=True), frame, budgets, parser)


@pytest.fixture(scope="module", params=["qwen", "llama"])
def case(request, config):
    tok = request.getfixturevalue(request.param)
    frame = _records(tok, 150, seed=7 if request.param == "qwen" else 8, config=config)
    return tok, frame


@pytest.mark.parametrize("parser", PARSERS)
def test_fast_scorer_equals_decoding_every_prefix(case, parser):
    tok, frame = case
    budgets = list(range(1, int(frame["output_ids"].map(len).max()) + 2))
    reference = _reference(tok, frame, budgets, parser)
    ref_scores, ref_emission, _ = reference
    assert ref_scores.sum() > 0 and np.isfinite(ref_emission).sum() > 30  # the cases are not all trivial
    assert_equals_reference(score_ledger(frame, tok, budgets=budgets, parser=parser), reference)
    # the text + token-offset entry point (what retokenizing with another tokenizer uses) agrees too
    table = byte_table(tok)
    texts = [table.decode(ids) for ids in frame["output_ids"]]
    ends = [np.cumsum(table.lengths[np.asarray(ids)]) for ids in frame["output_ids"]]
    via_text = score_prefixes(
        texts,
        ends,
        golds=frame["gold"].tolist(),
        budgets=budgets,
        parser=parser,
        complete=(frame["finish_reason"] == "stop").to_numpy(),
    )
    np.testing.assert_array_equal(via_text.scores, ref_scores)
    np.testing.assert_array_equal(via_text.emission, ref_emission)


def test_by_budget_and_by_record_contract(qwen):
    enc = lambda s: qwen.tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    texts = ["a b c d e f g h\n#### 5\n", "#### 5\n", "no answer at all here", "#### 6\n"]
    frame = pd.DataFrame(
        {
            "model": "qwen3-8b",
            "arm": ["native", "native", "pivot", "pivot"],
            "lang": "deu_Latn",
            "item": [0, 1, 0, 1],
            "sample": 0,
            "cap": 4096,
            "design": "replay",
            "announced": None,
            "output_ids": [enc(t) for t in texts],
            "gold": [5, 5, 5, 6],
            "finish_reason": "stop",
        }
    )
    n_tok = [len(enc(t)) for t in texts]
    res = score_ledger(pa.Table.from_pandas(frame), qwen, budgets=[2, 4, 100])
    assert list(res.by_budget.columns) == [
        "model",
        "arm",
        "lang",
        "design",
        "cap",
        "announced",
        "item",
        "sample",
        "budget",
        "score",
        "truncated",
        "emitted",
    ]
    assert res.by_budget["score"].dtype == np.int8 and res.by_budget["truncated"].dtype == bool
    # by hand: record 0 answers in its last line, records 1 and 3 in their 3rd token, record 2 never
    assert res.by_budget["score"].tolist() == [0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1]
    assert res.by_budget["truncated"].tolist() == [n > b for n in n_tok for b in (2, 4, 100)]
    rec = res.by_record
    assert {"n_tokens", "emission", "correct", "finish_reason", "cap"} <= set(rec.columns)
    assert rec["n_tokens"].tolist() == n_tok and rec["correct"].tolist() == [1, 1, 0, 1]
    # Qwen3 writes "#### 5\n" as "####", " ", "5", "\n": the line parses from the third token on
    assert [qwen.tokenizer.decode([i]) for i in enc(texts[1])] == ["####", " ", "5", "\n"]
    assert np.isnan(rec["emission"][2]) and rec["emission"][1] == 3
    curves = accuracy_curves(res.by_budget)
    native = curves[(curves["arm"] == "native") & (curves["budget"] == 4)].iloc[0]
    assert native["accuracy"] == 0.5 and native["n"] == 2 and native["longer_than_budget_share"] == 0.5
    assert native["emitted_share"] == 0.5
    pivot = curves[(curves["arm"] == "pivot") & (curves["budget"] == 100)].iloc[0]
    assert pivot["accuracy"] == 0.5 and pivot["longer_than_budget_share"] == 0 and pivot["emitted_share"] == 0.5


def test_bad_scoring_inputs(qwen):
    with pytest.raises(MindcapError, match="budgets must be positive"):
        score_token_ids(np.array([1]), np.array([0, 1]), table=qwen, golds=[1], budgets=[0])
    with pytest.raises(MindcapError, match="outside the tokenizer"):
        score_token_ids(np.array([10**7]), np.array([0, 1]), table=qwen, golds=[1], budgets=[4])
    with pytest.raises(MindcapError, match="token byte offsets must rise"):
        score_prefixes(["abc"], [np.array([1, 2])], golds=[1], budgets=[1])
    with pytest.raises(MindcapError, match="lack column"):
        score_ledger(pd.DataFrame({"model": ["m"]}), qwen, budgets=[1])


def test_records_are_grouped_by_their_own_tokenizer(qwen, llama):
    """Rows of two tokenizers interleaved: each record's ids are read with its own tokenizer, in row order (Llama
    ids read with Qwen's byte table would be other text). The reference is decoding each record's prefixes
    with its own tokenizer until the answer line appears."""
    text = "a b c d e f g h\n#### 5\n"
    toks = [qwen, llama, llama, qwen]
    ids = [t.tokenizer.encode(text, add_special_tokens=False).ids for t in toks]
    table = pa.table(
        {"tokenizer": [t.name for t in toks], "output_ids": ids, "gold": [5, 5, 6, 5], "finish_reason": ["stop"] * 4}
    )
    res = score_by_tokenizer(table, {"qwen3-8b": qwen, "llama-3.1-8b": llama}, budgets=[1, 100])
    assert res.n_tokens.tolist() == [len(i) for i in ids]
    assert res.scores.tolist() == [[0, 1], [0, 1], [0, 0], [0, 1]]  # record 2's gold is 6
    first = [
        next(b for b in range(1, len(i) + 1) if "#### 5" in t.tokenizer.decode(i[:b]))
        for t, i in zip(toks, ids, strict=True)
    ]
    assert res.emission.tolist() == first  # E: the first parseable answer line, right or wrong
    assert res.correct.tolist() == [1, 1, 0, 1]
    one = score_by_tokenizer(table.slice(0, 1), qwen, budgets=[100])  # one tokenizer for every record: no column needed
    assert one.scores.tolist() == [[1]]
