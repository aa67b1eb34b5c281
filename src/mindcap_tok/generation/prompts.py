"""A task's prompts, with optional budget announcements, from the arms' templates in its task file.

Each record stores the ``template_id`` (``mgsm-v1:native:tha_Thai:natural``: the task's template version, arm,
language and announcement style), so a ledger says which wording produced it; a task file's released wording is
never edited (a change is a new version). Announcements (the paper's §4.4): ``none``; ``natural``, the template's
sentence stating the budget; ``tag``, a machine-readable ``TOKEN_BUDGET: <n>`` line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BadInputError
from ..store import ANNOUNCE_STYLES
from ..tasks.datasets import TaskItem
from ..tasks.model import EVERY_LANGUAGE, Task

#: the machine-readable announcement line of every task's prompts
TAG = "TOKEN_BUDGET: {budget}"


@dataclass(frozen=True)
class Prompt:
    """A prompt's text (the user message) and what produced it."""

    text: str
    template_id: str
    arm: str
    lang: str
    announced: int | None
    announce_style: str


def _style(announced: int | None, style: str | None) -> str:
    """The announcement style in force (``none`` without a budget, ``natural`` with one), checked with it."""
    style = style or ("none" if announced is None else "natural")
    if style not in ANNOUNCE_STYLES:
        raise BadInputError(f"unknown announcement style {style!r}; use one of {', '.join(ANNOUNCE_STYLES)}")
    if (style == "none") != (announced is None):
        raise BadInputError("give an announced budget with announcement style 'natural' or 'tag', and none with 'none'")
    if announced is not None and announced <= 0:
        raise BadInputError(f"announced budget must be positive, got {announced}")
    return style


def task_prompt(
    task: Task, item: TaskItem, *, arm: str, announced: int | None = None, style: str | None = None
) -> Prompt:
    """The prompt of one item of ``task`` (in the item's language) for ``arm``, from the arm's template of that
    language: instruction [+ ' ' + announcement], blank line, [``TOKEN_BUDGET`` line, blank line], body. ``style``
    defaults to ``none`` without a budget and ``natural`` with one."""
    if arm not in task.arms:
        raise BadInputError(f"task {task.name} has no arm {arm!r}; its arms are {', '.join(task.arms)}")
    if item.lang not in task.languages:
        raise BadInputError(f"task {task.name} has no {item.lang}; its languages are {', '.join(task.languages)}")
    style = _style(announced, style)
    templates = task.arms[arm].templates
    tpl = templates.get(item.lang) or templates[EVERY_LANGUAGE]
    instruction = tpl.instruction.format(**item.fields)
    if style == "natural":
        if tpl.announce is None:
            raise BadInputError(f"task {task.name}, arm {arm}, {item.lang}: no announcement sentence (announce)")
        instruction = f"{instruction} {tpl.announce.format(budget=announced)}"
    blocks = [instruction, *([TAG.format(budget=announced)] if style == "tag" else []), tpl.body.format(**item.fields)]
    tid = f"{task.template_version}:{arm}:{item.lang}:{style}"
    return Prompt("\n\n".join(blocks), tid, arm, item.lang, announced, style)
