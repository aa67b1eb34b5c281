"""Answer types: one module per type, each parser reading answer lines with byte offsets for prefix scoring.

Every parser has ``name``, ``last``, ``terminated``, ``line_value(line)``, ``line_cuts(line_bytes)``,
``parse(text, complete)``, ``correct(value, gold)``, ``needs_hash`` (every answer line holds ``####``) and
``versions`` (the libraries that judge answers). Values are hashable: ``int`` for integer, ``str`` otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ...choices import VARIANTS as INTEGER_VARIANTS
from ...errors import BadInputError
from . import choice, math, regex
from .filter import filter_parser
from .integer import AnswerLine, LineCuts, integer_parser

if TYPE_CHECKING:  # tasks.model imports this package's parsers
    from ..model import Task

#: answer type -> its variant names and one-line descriptions
VARIANTS: dict[str, dict[str, str]] = {
    "integer": INTEGER_VARIANTS,
    "choice": choice.VARIANTS,
    "math": math.VARIANTS,
    "regex": regex.VARIANTS,
}


class AnswerParser(Protocol):
    """What the scorer and the audits need of a parser, whatever its answer type."""

    @property
    def name(self) -> str: ...
    @property
    def last(self) -> bool: ...
    @property
    def terminated(self) -> bool: ...
    def line_value(self, line: str) -> Hashable | None: ...
    def answer_lines(self, text: str, complete: bool = False) -> list[AnswerLine]: ...
    def line_cuts(self, line: bytes) -> LineCuts: ...
    def parse(self, text: str, complete: bool = False) -> Hashable | None: ...
    def correct(self, value: Any, gold: Any) -> bool: ...
    @property
    def needs_hash(self) -> bool: ...
    @property
    def versions(self) -> dict[str, str]: ...


class AnswerLike(Protocol):
    """The fields of a task's answer spec a parser is built from (``tasks.model.AnswerSpec``)."""

    @property
    def type(self) -> str: ...
    @property
    def labels(self) -> Sequence[str] | None: ...
    @property
    def pattern(self) -> str | None: ...
    @property
    def variants(self) -> Mapping[str, Any]: ...


def get_parser(spec: Any = "strict", answer: AnswerLike | None = None) -> AnswerParser:
    """The parser named ``spec`` (a variant, or variants joined by ``+``) for ``answer``'s type (none: integer).

    A parser object is returned as it is. Choice tasks give their ``labels`` and, for the ``phrases`` variant,
    ``variants["phrases"]`` (language -> answer phrases); regex tasks their ``pattern``.
    """
    if hasattr(spec, "line_cuts"):
        return spec
    if answer is None or answer.type == "integer":
        return integer_parser(spec)
    kind = answer.type
    if kind == "choice":
        phrases = (answer.variants or {}).get("phrases") or {}
        flat = tuple(dict.fromkeys(p for lang in sorted(phrases) for p in phrases[lang]))
        return choice.choice_parser(spec, tuple(answer.labels or ()), flat)
    if kind == "math":
        return math.math_parser(spec)
    if kind == "regex":
        if not answer.pattern:
            raise BadInputError("a regex answer type needs a pattern with a named group 'answer'")
        return regex.regex_parser(spec, answer.pattern)
    raise BadInputError(f"unknown answer type {kind!r}; use one of {', '.join(VARIANTS)}")


def _task(task: str, files: Sequence[str | os.PathLike[str]]) -> Task:
    from ..load import builtin_tasks, load_task

    given = {t.name: t for t in map(load_task, files)}
    if task not in given and task not in builtin_tasks():
        raise BadInputError(
            f"records of task {task!r}, which is not built in ({', '.join(builtin_tasks())}): give its task file "
            "(--task FILE) to read their answers",
            key="task",
        )
    return given.get(task) or load_task(task)


def per_language(task: str, spec: Any, *, files: Sequence[str | os.PathLike[str]] = ()) -> bool:
    """Whether ``spec`` names one of the task's regex ``filters``, whose parser depends on the record's language."""
    return isinstance(spec, str) and spec in _task(task, files).answer.filters


def task_parser(
    task: str, spec: Any = "strict", *, files: Sequence[str | os.PathLike[str]] = (), lang: str | None = None
) -> AnswerParser:
    """The parser named ``spec`` for the answer type of the task named ``task``: a built-in task, or one of the
    user's task ``files`` (a ledger records a task by name; its file is needed to read its answers).

    A ``spec`` naming one of the task's ``filters`` is that filter for language ``lang`` (FLORES code)."""
    answer = _task(task, files).answer
    if isinstance(spec, str) and spec in answer.filters:
        filt = answer.filters[spec]
        pattern = filt.patterns.get(lang or "", filt.patterns.get("*"))
        if pattern is None:
            raise BadInputError(
                f"parser {spec!r} of task {task!r} has no pattern for language {lang} "
                f"(it has {', '.join(filt.patterns)})",
                key="parser",
            )
        return filter_parser(spec, pattern, select=filt.select, compare=tuple(filt.compare))
    return get_parser(spec, None if answer.type == "integer" else answer)
