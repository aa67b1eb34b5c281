"""How each completed trace ended: correct, wrong, or which kind of failure (the failure tail, paper §4.1).

Every trace falls in exactly one category, by this precedence (the first that applies):

1. ``correct``: the scorer's C is 1;
2. ``several_answers``: the task's parser finds more than one answer line;
3. ``wrong``: it finds exactly one, whose answer is wrong;
4. ``format_noncompliant``: no answer line, but a lenient variant of the task's answer type reads one
   (``#### 5,600``, ``#### ๑๘``, ``(B)``, ``\\boxed{2}``: :data:`LENIENT`);
5. ``unparseable``: no reading at all, yet a line holds the answer marker ``####`` (``#### 4.5``,
   ``#### forty``: a non-integer, or text before the marker);
6. ``truncated``: none of the above and the cap cut the decode (finish reason ``length``);
7. ``no_answer_line``: none of the above and the decode stopped by itself.

What is written decides before how the decode stopped: a capped trace with a wrong answer line is ``wrong``.
The parser is the task's (integer, choice, math or regex), with the variant the scores were made with.

Reasoning models: a record with ``thinking`` true is classified on its answer channel only, the decode of the
ids after ``think_end`` (:func:`~mindcap_tok.store.think.answer_starts`), as scoring reads it: an answer line
inside the thought is no answer, and a thought still open at the cap (an empty answer channel) is ``truncated``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..errors import BadInputError
from ..store import answer_starts, thinks
from ..tasks.answers import AnswerParser, per_language, task_parser
from ..tasks.answers.choice import ChoiceParser
from ..tasks.answers.integer import Parser as IntegerParser
from ..tasks.answers.math import MathParser
from ..tasks.roles import record_tasks
from ..tokenization.load import ResolvedTokenizer

OUTCOMES = (
    "correct",
    "wrong",
    "several_answers",
    "format_noncompliant",
    "unparseable",
    "truncated",
    "no_answer_line",
)
#: the lenient variant of each answer type (every form its parser audit knows, but a lone choice label)
LENIENT = {IntegerParser: "thousands+native-digits", ChoiceParser: "paren+answer+phrases", MathParser: "boxed"}
MARKER = "####"


def trace_outcome(
    text: str, *, correct: bool, finish_reason: str, parser: AnswerParser, lenient: AnswerParser | None
) -> str:
    """The category of one completed trace (see the module docs for the precedence)."""
    if correct:
        return "correct"
    complete = finish_reason == "stop"
    found = parser.answer_lines(text, complete=complete)
    if len(found) > 1:
        return "several_answers"
    if found:
        return "wrong"
    if lenient is not None and lenient.answer_lines(text, complete=complete):
        return "format_noncompliant"
    if MARKER in text:
        return "unparseable"
    return "truncated" if finish_reason == "length" else "no_answer_line"


def answer_texts(part: pa.Table, tokenizer: ResolvedTokenizer | Mapping[str, ResolvedTokenizer] | None) -> list[str]:
    """The text each record of ``part`` is classified on: its ``text``, or for a ``thinking`` record the decode of
    its answer channel (empty when the thought never closed), with ``tokenizer`` (one, or by the records'
    ``tokenizer`` column)."""
    texts = part.column("text").to_pylist()
    if not thinks(part):
        return texts
    if tokenizer is None or "think_end" not in part.column_names:
        raise BadInputError("records with thinking on need 'think_end' and their tokenizer to read the answer channel")
    ids = part.column("output_ids").to_pylist()
    thinking = part.column("thinking").fill_null(False).to_numpy(zero_copy_only=False)
    ends = part.column("think_end").fill_null(-1).to_numpy(zero_copy_only=False)
    starts = answer_starts(thinking, ends, n_tokens=np.array([len(i) for i in ids]))
    names = part.column("tokenizer").to_pylist() if "tokenizer" in part.column_names else [None] * len(ids)
    rows = np.flatnonzero(thinking)
    for name in dict.fromkeys(names[r] for r in rows):
        if isinstance(tokenizer, ResolvedTokenizer):
            tok = tokenizer
        elif name is None:
            raise BadInputError("thinking records name no tokenizer: give the one that decodes their answer channel")
        else:
            tok = tokenizer[name]
        mine = [r for r in rows if names[r] == name]
        decoded = tok.decode_batch([ids[r][starts[r] :] for r in mine], skip_special_tokens=True)
        for r, text in zip(mine, decoded, strict=True):
            texts[r] = text
    return texts


def record_outcomes(
    table: pa.Table,
    correct: np.ndarray,
    *,
    parser: str | AnswerParser = "strict",
    tasks: Sequence[str | os.PathLike[str]] = (),
    tokenizer: ResolvedTokenizer | Mapping[str, ResolvedTokenizer] | None = None,
) -> np.ndarray:
    """The outcome of every record of ``table`` (its ``text``, ``finish_reason`` and ``task``), given the
    scorer's ``correct``; ``parser`` names the variant (or is one parser for all), ``tasks`` the user's task
    files, ``tokenizer`` the one decoding thinking records' answer channels (:func:`answer_texts`). Only failed
    records are parsed, so a mostly correct ledger costs little."""
    n = table.num_rows
    out = np.full(n, "correct", dtype=object)
    failed = np.flatnonzero(np.asarray(correct) == 0)
    if not len(failed):
        return out
    part = table.take(pa.array(failed))
    texts = answer_texts(part, tokenizer)
    finish = part.column("finish_reason").to_pylist()
    names = record_tasks(part)
    langs = part.column("lang").to_pylist() if "lang" in part.column_names else [None] * len(failed)
    readers: dict[tuple, tuple[AnswerParser, AnswerParser | None]] = {}
    for j, row in enumerate(failed):
        task = str(names[j])
        # a per-language filter (lm-eval's regexes) reads each language with its own pattern
        key = (task, langs[j]) if per_language(task, parser, files=tasks) else (task, None)
        if key not in readers:
            strict = task_parser(task, parser, files=tasks, lang=key[1]) if isinstance(parser, str) else parser
            spec = LENIENT.get(type(task_parser(task, "strict", files=tasks)))
            readers[key] = (strict, task_parser(task, spec, files=tasks) if spec else None)
        strict, lenient = readers[key]
        out[row] = trace_outcome(texts[j], correct=False, finish_reason=finish[j], parser=strict, lenient=lenient)
    return out
