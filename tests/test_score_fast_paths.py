"""The fast prefix scorer against a slow reference on random traces (hypothesis), for every answer type and
variant: traces are built from fragments of answer lines encoded one by one (or byte by byte) with Qwen3's real
tokenizer, so token boundaries fall inside ``####``, ``answer``, ``\\boxed{`` and the labels; the reference
decodes every prefix with the tokenizer and parses it from scratch. Also the byte-table helpers behind the fast
path (gathering bytes, where anchors may start, the case spellings of an anchor) against brute force."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from answer_specs import ABCD, MATH, Answer
from mindcap_tok.scoring.score import score_ledger, score_prefixes
from mindcap_tok.tasks.answers import VARIANTS, get_parser
from mindcap_tok.tasks.answers._lines import fold_literals
from mindcap_tok.tokenization.byte_tables import ByteTable, anchor_starts, byte_table, gather_bytes
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from score_reference import assert_equals_reference, reference_scores, trace_frame

REGEX = Answer("regex", pattern=r"ANS=(?P<answer>[0-9]+)")
# fragments per answer type: pieces of answer lines and their near misses
FRAGMENTS = {
    "integer": ["####", "#", " ", "\n", "\r", "-", "1", "2", "5", "0", ",", ".", "๑", "๒", "x", "\t"],
    "choice": [
        *["####", "#", " ", "\n", "\r", "A", "B", "C", "D", "(", ")", "Answer", "answer", "ANS", "wer", "an"],
        *["ſwer", " is", ":", "：", "Respuesta", "Resp", "uesta", "Antwort", "ก", "é", "x", "\t", "AB"],
    ],
    "math": [
        *["####", " ", "\n", "\r", "\\boxed{", "\\box", "ed{", "\\BOXED{", "}", "{", "\\frac{1}{2}", "0.5", "1"],
        *["2", ".", "0", "\\frac", "{1}", "{2}", "x", "ก", "12"],
    ],
    "regex": ["ANS", "=", "AN", "S=", "1", "2", "\n", " ", "x", "ก", "\r"],
}
GOLDS = {"integer": [12, 1, -5, 25], "choice": list("ABCD"), "math": ["0.5", "\\frac{1}{2}", "2", "12"]}
GOLDS["regex"] = ["12", "1", "2"]
ANSWERS = {"integer": None, "choice": ABCD, "math": MATH, "regex": REGEX}
CASES = [(kind, v) for kind in ANSWERS for v in VARIANTS[kind] if v != "first"]
CASES += [("choice", "paren+answer+phrases+last"), ("choice", "answer+terminated"), ("math", "boxed+last+terminated")]
CASES += [("integer", "thousands+native-digits+last")]

trace = st.tuples(
    st.lists(st.tuples(st.integers(0, 40), st.booleans()), min_size=1, max_size=14),  # fragments, byte by byte?
    st.integers(0, 3),  # gold
    st.sampled_from(["stop", "stop+end", "length"]),
)


def _ids(tok, kind: str, pieces, finish: str) -> tuple[list[int], str]:
    frags = FRAGMENTS[kind]
    ids: list[int] = []
    for k, bytewise in pieces:
        piece = frags[k % len(frags)]
        if bytewise:
            ids += [tok.tokenizer.token_to_id(BYTE_TO_CHAR[b]) for b in piece.encode()]
        else:
            ids += tok.tokenizer.encode(piece, add_special_tokens=False).ids
    if finish == "stop+end":
        ids.append(tok.tokenizer.token_to_id("<|im_end|>"))  # a special token: no text
    return ids, finish.split("+")[0]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "variant"), CASES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(traces=st.lists(trace, min_size=1, max_size=4))
def test_fast_scorer_equals_parsing_every_prefix(qwen, kind, variant, traces):
    parser = get_parser(variant, ANSWERS[kind])
    rows = []
    for pieces, g, finish in traces:
        ids, reason = _ids(qwen, kind, pieces, finish)
        rows.append((ids, GOLDS[kind][g % len(GOLDS[kind])], reason))
    frame = trace_frame(qwen, rows)
    budgets = list(range(1, max(len(ids) for ids, _, _ in rows) + 2))
    decode = lambda ids: qwen.tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    reference = reference_scores(decode, frame, budgets, parser)
    ledger = frame if kind == "integer" else frame.assign(gold=None, gold_text=frame["gold"])
    assert_equals_reference(score_ledger(ledger, qwen, budgets=budgets, parser=parser), reference)
    table = byte_table(qwen)
    texts = [table.decode(ids) for ids, _, _ in rows]
    ends = [np.cumsum(table.lengths[np.asarray(ids, dtype=np.int64)]) for ids, _, _ in rows]
    done = np.array([r == "stop" for _, _, r in rows])
    golds = [g for _, g, _ in rows]
    via_text = score_prefixes(texts, ends, golds=golds, budgets=budgets, parser=parser, complete=done)
    np.testing.assert_array_equal(via_text.scores, reference[0])
    np.testing.assert_array_equal(via_text.emission, reference[1])


# -- the byte-table helpers ----------------------------------------------------------------------------------
TOKENS = [
    b"",
    b"a",
    b"An",
    b"sw",
    b"er",
    b"answer",
    b"xANSWE",
    b"R:",
    b"(",
    b"b)",
    b"##",
    b"#",
    b"\n",
    b"\xc5",
    b"\xbf",
]
TOKENS += [b"an\xc5\xbfwer", b"ans", b"w", b"e", b"r (B) x", b"####"]


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.integers(0, len(TOKENS) - 1), max_size=40))
def test_gather_bytes_and_anchor_starts_against_brute_force(ids):
    table = ByteTable.from_token_bytes(TOKENS)
    arr = np.asarray(ids, dtype=np.int64)
    joined = b"".join(TOKENS[i] for i in ids)
    assert gather_bytes(table, arr).tobytes() == joined
    anchors = (b"####", b"answer", b"an\xc5\xbfwer", b"(b)")
    starts = set(anchor_starts(table, arr, anchors=anchors).tolist())
    ends = np.cumsum([len(TOKENS[i]) for i in ids])
    low = joined.lower()
    for anchor in anchors:
        for pos in (m.start() for m in re.finditer(b"(?=" + re.escape(anchor) + b")", low)):
            token = int(np.searchsorted(ends, pos, side="right"))  # the token holding the anchor's first byte
            assert token in starts, (anchor, pos, ids)


def test_fold_literals_cover_every_case_spelling():
    # every character that (?i) matches, found by trying each code point (the slow way)
    spellings = {ch: [chr(c) for c in range(0x110000) if re.fullmatch("(?i)" + re.escape(ch), chr(c))] for ch in "swer"}
    assert spellings["s"] == ["S", "s", "ſ"]
    literals = set(fold_literals("answer"))
    assert literals == {b"answer", "anſwer".encode()}
    word = "Ответ"  # five cased Cyrillic letters: 32 spellings, so a shorter stretch is used
    found = fold_literals(word)
    assert 1 < len(found) <= 8
    for variant in ("ОТВЕТ", "ответ", "оТвЕт"):
        assert any(lit in variant.encode().lower() for lit in found)
    assert fold_literals("") is None
