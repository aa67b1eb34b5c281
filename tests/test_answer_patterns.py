"""Users' answer and filter patterns run under a time bound (tasks.answers.patterns): nested repetition that would
make Python's ``re`` run for days either finishes (the ``regex`` module backtracks less) or refuses the run in one
line naming the pattern; a pattern that does not compile is one line too; ordinary patterns read as before."""

from __future__ import annotations

import re
import time

import pytest

from answer_specs import Answer
from mindcap_tok.errors import BadInputError
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.tasks.answers import get_parser, patterns
from mindcap_tok.tasks.answers.filter import filter_parser
from mindcap_tok.tasks.answers.patterns import compile_user_pattern
from score_reference import trace_frame

#: a line on which ``(a|aa)+$`` backtracks about 1.6^40 times before failing (the ``b``)
RUNAWAY_LINE = "a" * 40 + "b"


def test_nested_plus_reads_at_once_where_re_would_hang():
    # re would try every way of cutting the forty a's (2^40); the regex module fails this one at once
    parser = get_parser("strict", Answer("regex", pattern=r"(?P<answer>(a+)+)$"))
    start = time.perf_counter()
    assert parser.parse(f"x\n{RUNAWAY_LINE}\naaaa") == "aaaa"
    assert parser.parse(RUNAWAY_LINE) is None
    assert time.perf_counter() - start < 1


@pytest.fixture
def short_timeout(monkeypatch):
    """A 0.2 s bound per search, to keep these tests quick (the default is a second)."""
    monkeypatch.setattr(patterns, "SEARCH_TIMEOUT_S", 0.2)


def test_an_answer_pattern_that_runs_away_refuses_in_one_line(short_timeout):
    parser = get_parser("strict", Answer("regex", pattern=r"(?P<answer>(a|aa)+)$"))
    assert parser.parse("aaaa") == "aaaa"
    start = time.perf_counter()
    with pytest.raises(BadInputError, match=r"answer pattern '\(\?P<answer>\(a\|aa\)\+\)\$' took over 0.2 s") as info:
        parser.parse(f"first line\n{RUNAWAY_LINE}")
    assert "\n" not in str(info.value)
    assert time.perf_counter() - start < 5  # the engine checks its clock now and then: it may overrun a little
    with pytest.raises(BadInputError, match="took over"):  # the prefix scorer's reading of a line
        parser.line_cuts(RUNAWAY_LINE.encode())


def test_a_filter_that_runs_away_refuses_in_one_line(short_timeout):
    parser = filter_parser("flexible", r"(a|aa)+$", select="first", compare=())
    assert parser.parse("x aaa") == re.search(r"(a|aa)+$", "x aaa").group(1)  # the last repetition: "a"
    with pytest.raises(BadInputError, match=r"filter variant 'flexible': pattern '\(a\|aa\)\+\$' took over"):
        parser.parse(RUNAWAY_LINE)
    with pytest.raises(BadInputError, match="took over"):  # the scorer finds trigger lines in whole texts
        list(parser.trigger.finditer(RUNAWAY_LINE))


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "(?P<x>a)(?P<x>b)", "\\"])
def test_a_pattern_that_does_not_compile_is_one_line(pattern):
    with pytest.raises(re.error):  # re does not read it either
        re.compile(pattern)
    with pytest.raises(BadInputError, match=r"answer pattern .* does not compile") as info:
        compile_user_pattern(pattern, what="answer pattern")
    assert "\n" not in str(info.value)
    with pytest.raises(BadInputError, match=r"filter variant 'f': pattern .* does not compile"):
        filter_parser("f", pattern, select="last", compare=())


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        (r"(?i)answer\s*[:=]\s*(\-?[0-9\.\,]+)", "So the ANSWER = -1,234.5 here"),
        (r"(?:jibu|answer)[^\d]*(\d+)", "Jibu ni: 42 na answer 7"),
        (r"\b(\w+)\b\s*$", "the last word  "),
        (r"(ſ|k)", "K and ſ"),  # case partners outside ASCII, matched as re matches them
        (r"[\u0e00-\u0e7f]+", "คำตอบคือ ๔๒"),
    ],
)
def test_ordinary_patterns_match_as_re_does(pattern, line):
    ours = compile_user_pattern(pattern, what="filter")
    assert [m.group(0) for m in ours.finditer(line)] == [m.group(0) for m in re.finditer(pattern, line)]
    assert [m.groups() for m in ours.finditer(line)] == [m.groups() for m in re.finditer(pattern, line)]
    assert ours.groups == re.compile(pattern).groups and ours.pattern == pattern


_RUNAWAY_TASK = """name = "runaway"
version = 1
licence = "CC-BY-4.0"
languages = ["eng_Latn"]
native = "native"
comparator = "translate-act"
[source]
files = "runaway-{lang}.jsonl"
fields = { q = "question" }
[answer]
type = "regex"
pattern = '(?P<answer>(a|aa)+)$'
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


def test_scoring_a_ledger_with_a_runaway_pattern_refuses_in_one_line(qwen, tmp_path, short_timeout):
    (tmp_path / "runaway.toml").write_text(_RUNAWAY_TASK, "utf-8")
    texts = ["thinking\naaaa\n", f"thinking\n{RUNAWAY_LINE}\n"]
    frame = trace_frame(qwen, [(qwen.encode(t), None, "stop") for t in texts]).assign(
        task="runaway", gold=None, gold_text="aaaa"
    )
    ok = score_ledger(frame.iloc[:1], qwen, budgets=[100], tasks=[tmp_path / "runaway.toml"])
    assert ok.by_record["correct"].tolist() == [1]
    with pytest.raises(BadInputError, match=r"answer pattern .* took over 0.2 s") as info:
        score_ledger(frame, qwen, budgets=[100], tasks=[tmp_path / "runaway.toml"])
    assert "\n" not in str(info.value)
