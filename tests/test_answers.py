"""Answer types (choice, math, regex) against hand-worked strings: line values, byte cuts, equivalence."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

from answer_specs import ABCD, BELEBELE, MATH, Answer
from mindcap_tok.errors import MindcapError, MissingExtraError
from mindcap_tok.tasks.answers import VARIANTS, get_parser
from mindcap_tok.tasks.answers import math as math_answers
from mindcap_tok.tasks.answers.integer import LineCuts


# -- choice ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("variant", "text", "expected"),
    [
        ("strict", "#### B", "B"),
        ("strict", "  ####\tC \r", "C"),  # spaces, tab, CR around
        ("strict", "#### E", None),  # not a label
        ("strict", "#### BB", None),
        ("strict", "so #### B", None),  # text before ####
        ("strict", "Answer: B", None),  # lenient forms are variants
        ("strict", "#### A\n#### B", "A"),  # the first answer line decides
        ("last", "#### A\n#### B", "B"),
        ("paren", "I pick (B), not (C)", "C"),  # the match ending last in the line
        ("paren", "(b) or (E)", None),
        ("paren", "#### A\n(C)", "A"),  # strict lines still read
        ("answer", "The answer is (D).", "D"),
        ("answer", "ANSWER: a", None),  # the word in any case, the label exactly
        ("answer", "Answer: Because", None),  # a label followed by a letter is a word
        ("answer", "Respuesta: B", None),
        ("phrases", "Respuesta: B", "B"),
        ("phrases", "die antwort ist: (C)", None),  # 'ist' is not part of the phrase
        ("phrases", "Antwort: C", "C"),  # any language's phrase counts
        ("label", "A train leaves at noon, so B", "B"),  # loose: the last standalone label
        ("label", "B\nA cat", "A"),  # label implies last
        ("label", "ABBA", None),
        ("paren+answer+last", "(A)\nAnswer: C\nno", "C"),
    ],
)
def test_choice_reads(variant, text, expected):
    assert get_parser(variant, ABCD).parse(text) == expected


def test_choice_belebele_labels():
    p = get_parser("answer", BELEBELE)
    assert p.parse("#### 3") == "3" and p.parse("#### 5") is None
    assert p.parse("Answer: 2") == "2" and p.parse("Answer: 12") is None and p.parse("Answer: 23") is None
    assert p.correct("3", "3") and not p.correct("3", "2") and p.needs_hash is False
    assert get_parser("strict", BELEBELE).needs_hash is True


def test_choice_cuts_by_hand():
    strict = get_parser("strict", ABCD)
    # "#", "##", ..., "#### " read nothing; the whole line reads B
    assert strict.line_cuts(b"#### B") == LineCuts((), "B")
    # with a CR after it the prefix "#### B" (6 bytes) already reads B
    assert strict.line_cuts(b"#### B\r") == LineCuts(((6, 7, "B"),), "B")
    # "Answer: " is 8 bytes: the prefix of 9 bytes reads B, "Answer: Be" and the whole word nothing
    assert get_parser("answer", ABCD).line_cuts(b"Answer: Because") == LineCuts(((9, 10, "B"),), None)
    # a cut inside a three-byte Thai label ends in U+FFFD: no label yet
    thai = get_parser("answer", Answer("choice", ["ก", "ข"]))
    assert thai.line_cuts("#### ข".encode()) == LineCuts((), "ข")
    assert thai.line_cuts("Answer: ข".encode()) == LineCuts((), "ข")
    # "(B)" then a Thai character cut inside it: U+FFFD after the parenthesis leaves "(B)" readable
    paren = get_parser("paren", ABCD)
    assert paren.line_cuts("(B)ก".encode()) == LineCuts(((3, 6, "B"),), "B")
    assert paren.line_cuts(b"(B)\xe0\xb8") == LineCuts(((3, 5, "B"),), "B")


def test_choice_errors():
    with pytest.raises(MindcapError, match="unknown choice parser 'boxed'"):
        get_parser("boxed", ABCD)
    with pytest.raises(MindcapError, match="needs the task's answer phrases"):
        get_parser("phrases", BELEBELE)
    with pytest.raises(MindcapError, match="choice labels"):
        get_parser("strict", Answer("choice", []))
    with pytest.raises(MindcapError, match="unknown answer type 'essay'"):
        get_parser("strict", Answer("essay"))


# -- math -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("variant", "text", "expected"),
    [
        ("strict", "#### \\frac{1}{2}", "\\frac{1}{2}"),
        ("strict", "####   42 \r", "42"),
        ("strict", "#### ", None),
        ("strict", "so #### 3", None),
        ("strict", "\\boxed{3}", None),
        ("boxed", "so \\boxed{\\frac{1}{2}} and \\boxed{3}.", "3"),  # the last closed box of the line
        ("boxed", "\\boxed{\\frac{1}{2}", None),  # braces not balanced
        ("boxed", "\\boxed{a{b}c} then \\boxed{", "a{b}c"),
        ("boxed", "\\boxed{ }", None),
        ("boxed", "#### 7\n\\boxed{8}", "7"),
        ("boxed+last", "#### 7\n\\boxed{8}", "8"),
        ("terminated", "#### 7", None),
    ],
)
def test_math_reads(variant, text, expected):
    assert get_parser(variant, MATH).parse(text) == expected


def test_math_cuts_by_hand():
    strict = get_parser("strict", MATH)
    # "#### 1" (6 bytes) reads "1" before the line ends in "12"
    assert strict.line_cuts(b"#### 12") == LineCuts(((6, 7, "1"),), "12")
    # "#### 1ก": cuts 7 and 8 fall inside the Thai character, U+FFFD in the answer reads nothing
    assert strict.line_cuts("#### 1ก".encode()) == LineCuts(((6, 7, "1"),), "1ก")
    assert strict.line_cuts(b"#### 5\r") == LineCuts(((6, 7, "5"),), "5")
    boxed = get_parser("boxed", MATH)
    assert boxed.line_cuts(b"\\boxed{1}x") == LineCuts(((9, 10, "1"),), "1")
    assert boxed.line_cuts(b"\\boxed{12") == LineCuts((), None)
    assert strict.needs_hash and not boxed.needs_hash


def test_math_equivalence_by_hand():
    p = get_parser("strict", MATH)
    assert p.correct("\\frac{1}{2}", "0.5") and p.correct("0.5", "\\frac{1}{2}")
    assert p.correct("2", "2.0") and p.correct("2.0", "2")
    assert not p.correct("3", "2") and not p.correct("\\frac{1", "\\frac{1}{2}")
    assert p.score("#### \\frac{1}{2}\n", "0.5") == 1 and p.score("#### 1/3\n", "0.5") == 0
    before = math_answers.equivalent.cache_info().hits
    assert p.correct("\\frac{1}{2}", "0.5")
    assert math_answers.equivalent.cache_info().hits == before + 1  # decided once per distinct pair
    assert p.versions == {"math-verify": metadata.version("math-verify")}


def test_math_without_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "math_verify", None)  # what an environment without the package imports
    with pytest.raises(MissingExtraError, match=r"mindcap-tok\[math\]") as info:
        math_answers.equivalent("17/3", "5.6")
    assert info.value.extra == "math"


# -- regex ----------------------------------------------------------------------------------------------------
def test_regex_reads_and_cuts():
    p = get_parser("strict", Answer("regex", pattern=r"Final: (?P<answer>\w+)"))
    assert p.parse("we think\nFinal: cat\nFinal: dog") == "cat"
    assert (
        get_parser("last", Answer("regex", pattern=r"Final: (?P<answer>\w+)")).parse("Final: cat\nFinal: dog") == "dog"
    )
    assert p.parse("Final: ") is None and p.correct("cat", " cat ") and not p.needs_hash
    # "Final: " is 7 bytes: the 8-byte prefix reads "a", the whole line "ab"
    assert p.line_cuts(b"Final: ab") == LineCuts(((8, 9, "a"),), "ab")
    assert p.line_cuts(b"Final: ab\r") == LineCuts(((8, 9, "a"), (9, 10, "ab")), "ab")


def test_regex_errors():
    with pytest.raises(MindcapError, match=r"answer pattern '\(' does not compile"):
        get_parser("strict", Answer("regex", pattern="("))
    with pytest.raises(MindcapError, match="has no named group 'answer'"):
        get_parser("strict", Answer("regex", pattern=r"Final: (\w+)"))
    with pytest.raises(MindcapError, match="needs a pattern"):
        get_parser("strict", Answer("regex"))
    with pytest.raises(MindcapError, match="unknown regex parser 'boxed'"):
        get_parser("boxed", Answer("regex", pattern=r"(?P<answer>x)"))


def test_registry_and_integer_default():
    assert set(VARIANTS) == {"integer", "choice", "math", "regex"}
    assert all("strict" in v and "last" in v for v in VARIANTS.values())
    integer = get_parser("strict")
    assert integer.parse("#### 12") == 12 and integer.correct(12, 12) and integer.needs_hash
    assert get_parser(integer) is integer and integer.versions == {}
