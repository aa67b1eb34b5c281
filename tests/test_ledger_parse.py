"""Answer parsing: hand-worked cases per variant, and hypothesis properties on adversarial strings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindcap_tok.errors import MindcapError
from mindcap_tok.scoring.score import score_prefixes
from mindcap_tok.tasks.answers import get_parser
from mindcap_tok.tasks.answers.integer import parse_answer
from score_reference import reference_emission

CASES = [
    # text, parser, complete, expected: worked by hand from the module's definitions
    ("Step 1\n#### 18\n", "strict", False, 18),
    ("#### 18", "strict", False, 18),  # unfinished last line counts for strict
    ("  ####\t-7 \r\nmore", "strict", False, -7),
    ("####18", "strict", False, 18),
    ("#### 018", "strict", False, 18),
    ("The answer is #### 18", "strict", False, None),  # text before the marker
    ("#### $18", "strict", False, None),
    ("**#### 18**", "strict", False, None),
    ("#### 18.5", "strict", False, None),
    ("#### 18 eggs", "strict", False, None),
    ("##### 18", "strict", False, None),
    ("### 18", "strict", False, None),
    ("#### 5,600", "strict", False, None),
    ("#### 5,600", "thousands", False, 5600),
    ("#### 5.600.000", "thousands", False, 5600000),
    ("#### 1 234", "thousands", False, 1234),
    ("#### 5,60", "thousands", False, None),
    ("#### 5,600.000", "thousands", False, None),  # separators must be consistent
    ("#### ๑๘", "strict", False, None),
    ("#### ๑๘", "native-digits", False, 18),
    ("#### ১২", "native-digits", False, 12),
    ("#### ४२", "native-digits", False, 42),
    ("#### ٣", "native-digits", False, 3),
    ("#### １８", "native-digits", False, 18),
    ("#### ๑,๐๐๐", "thousands+native-digits", False, 1000),
    ("#### 3\n#### 4\n", "strict", False, 3),
    ("#### 3\n#### 4\n", "first", False, 3),
    ("#### 3\n#### 4\n", "last", False, 4),
    ("#### x\n#### 4", "strict", False, 4),  # non-compliant lines are not answer lines
    ("#### 3\n#### 4", "last", False, 4),
    ("#### 3\n#### 4", "terminated", False, 3),
    ("#### 3\n#### 4", "last+terminated", False, 3),
    ("#### 3\n#### 4", "last+terminated", True, 4),  # a completed trace terminates its last line
    ("#### 4", "terminated", False, None),
    ("#### 4", "terminated", True, 4),
    ("#### 12\ufffd", "strict", False, None),  # prefix cut inside a character
    ("", "strict", False, None),
]


@pytest.mark.parametrize(("text", "parser", "complete", "expected"), CASES)
def test_hand_worked_cases(text, parser, complete, expected):
    assert parse_answer(text, parser, complete=complete) == expected


def test_parser_names():
    assert get_parser("strict") == get_parser("first") and get_parser("strict").name == "strict"
    assert get_parser("terminated+last").name == "last+terminated"
    assert get_parser("LAST").last and not get_parser("LAST").terminated
    with pytest.raises(MindcapError, match="unknown parser 'lenient'"):
        get_parser("lenient")
    assert get_parser("strict").score("#### 5\n", 5) == 1 and get_parser("strict").score("#### 5\n", 6) == 0


# -- properties on adversarial strings -----------------------------------------------------------------------
PIECES = [
    "#",
    "####",
    " ",
    "\t",
    "\r",
    "-",
    "0",
    "1",
    "7",
    ",",
    ".",
    "'",
    "\u00a0",
    "๑",
    "٣",
    "१",
    "ก",
    "é",
    "€",
    "😀",
    "x",
    "$",
    "*",
    "\n",
]
BAD_BYTES = [b"\xe0\xb8", b"\xff", b"\xf0\x9f", b"\x80"]
PARSERS = ["strict", "last", "terminated", "thousands", "native-digits", "last+thousands+native-digits"]
piece = st.sampled_from(PIECES).map(lambda s: s.encode("utf-8")) | st.sampled_from(BAD_BYTES)
byte_text = st.lists(piece, max_size=30).map(b"".join)
line_bytes = st.lists(piece.filter(lambda b: b != b"\n"), max_size=20).map(b"".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=line_bytes, parser=st.sampled_from(PARSERS))
def test_line_cuts_match_decoding_every_prefix(line, parser):
    p = get_parser(parser)
    cuts = p.line_cuts(line)
    expected = {k: p.line_value(line[:k].decode("utf-8", "replace")) for k in range(1, len(line))}
    got = {k: None for k in range(1, len(line))}
    for lo, hi, value in cuts.partial:
        for k in range(lo, hi):
            got[k] = value
    assert got == expected
    assert cuts.full == p.line_value(line.decode("utf-8", "replace"))


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(alphabet=st.characters(blacklist_characters="#", blacklist_categories=("Cs",))),
    after=st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    value=st.integers(-(10**30), 10**30),
)
def test_a_planted_answer_line_is_found(before, after, value):
    text = f"{before}\n#### {value}\n{after}"
    assert parse_answer(text) == value  # first answer line: nothing before it can be one
    assert parse_answer(text, "terminated") == value
    if "#" not in after:
        assert parse_answer(text, "last") == value
    junk = f"{before}\n#### {value}x\n"
    assert parse_answer(junk) is None


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",))), parser=st.sampled_from(PARSERS))
def test_parsers_never_fail_and_return_integers(text, parser):
    value = parse_answer(text, parser)
    assert value is None or (isinstance(value, int) and "####" in text)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=byte_text,
    cut_seed=st.integers(0, 2**32 - 1),
    parser=st.sampled_from(PARSERS),
    complete=st.booleans(),
    gold=st.sampled_from([0, 1, 7, 17, 71, -1, 1000]),
)
def test_fast_scorer_matches_decoding_every_prefix_on_random_splits(data, cut_seed, parser, complete, gold):
    """Token boundaries anywhere, including inside characters and invalid bytes."""
    rng = np.random.default_rng(cut_seed)
    inner = (
        np.sort(rng.choice(np.arange(1, len(data)), size=min(len(data) - 1, rng.integers(0, 12)), replace=False))
        if len(data) > 1
        else np.array([], dtype=np.int64)
    )
    ends = np.concatenate([inner, [len(data)]]) if len(data) else np.array([], dtype=np.int64)
    if len(ends) > 2 and rng.random() < 0.3:  # zero-byte tokens (special tokens) too
        ends = np.sort(np.concatenate([ends, ends[: rng.integers(1, 3)]]))
    n = len(ends)
    p = get_parser(parser)
    budgets = list(range(1, n + 2))
    res = score_prefixes([data], [ends], golds=[gold], budgets=budgets, parser=parser, complete=[complete])
    ref, values = [], [None]
    for b in budgets:
        take = min(b, n)
        prefix = data[: ends[take - 1]] if take else b""
        value = p.parse(prefix.decode("utf-8", "replace"), complete=complete and b >= n)
        ref.append(int(value == gold))
        values.append(value)
    emission = reference_emission(values[: n + 1])
    assert res.scores[0].tolist() == ref
    assert res.correct[0] == (ref[-1] if n else 0)
    assert np.array_equal(res.emission, [emission], equal_nan=True)
