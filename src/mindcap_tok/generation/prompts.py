"""MGSM prompts for the four arms, with optional budget announcements, from versioned template files.

Templates live in ``resources/prompts/<version>.json`` (data, not code); a released version is never edited,
a change is a new file. Each record stores the ``template_id`` (``mgsm-v1:native:tha_Thai:natural``), so a
ledger says which wording produced it.

Arms (the paper's §3): ``native`` (instructions in L, reason and answer in L), ``translate-act`` (English
instructions: translate the problem to English, then solve in English), ``pivot`` (instructions in L: reason
in English, answer in L), ``code-switched`` (English scaffold, reasoning in L). Every prompt asks for a final
line ``#### <integer>``. Announcements (§4.4): ``none``; ``natural``, one sentence in the prompt's language
stating the budget; ``tag``, a machine-readable ``TOKEN_BUDGET: <n>`` line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ..data.languages import resolve_language
from ..data.mgsm import MgsmItem, load_mgsm
from ..errors import BadInputError
from ..store import ANNOUNCE_STYLES, ARMS
from ..tasks.datasets import TaskItem
from ..tasks.model import EVERY_LANGUAGE, Task
from ..templates import template_fields

DEFAULT_VERSION = "mgsm-v1"
_PACKAGE = "mindcap_tok.resources.prompts"
_ENGLISH_ARMS = ("translate-act", "code-switched")
#: the machine-readable announcement line of task templates (as in mgsm-v1)
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


def prompt_versions() -> list[str]:
    """The template versions shipped with the package."""
    files = resources.files(_PACKAGE).iterdir()
    return sorted(f.name.removesuffix(".json") for f in files if f.name.endswith(".json"))


def _fields(template: str) -> set[str]:
    return template_fields(template)


@cache
def load_templates(version: str = DEFAULT_VERSION) -> dict:
    """The parsed template file of ``version``, checked for the placeholders each string may use."""
    if version not in prompt_versions():
        raise BadInputError(f"unknown prompt version {version!r}; shipped: {', '.join(prompt_versions())}")
    data = json.loads(resources.files(_PACKAGE).joinpath(f"{version}.json").read_text("utf-8"))
    allowed = {"announce": {"budget"}, "tag": {"budget"}, "code-switched": {"language"}}
    strings = [("tag", data["tag"]), *data["english"].items()]
    strings += [(k, v) for lang in data["languages"].values() for k, v in lang.items()]
    for key, text in strings:
        if not _fields(text) <= allowed.get(key, set()):
            raise BadInputError(f"prompt template {version}/{key} uses placeholders {_fields(text)}")
    return data


def prompt_languages(version: str = DEFAULT_VERSION) -> list[str]:
    """FLORES codes the template version covers."""
    return list(load_templates(version)["languages"])


def template_id(arm: str, lang: str, *, style: str = "none", version: str = DEFAULT_VERSION) -> str:
    """The id stored with each record: ``<version>:<arm>:<lang>:<announce style>``."""
    return f"{version}:{arm}:{lang}:{style}"


def build_prompt(
    question: str,
    arm: str,
    *,
    lang: str,
    announced: int | None = None,
    style: str | None = None,
    version: str = DEFAULT_VERSION,
) -> Prompt:
    """The prompt for one problem. ``style`` defaults to ``none`` without a budget and ``natural`` with one."""
    if arm not in ARMS:
        raise BadInputError(f"unknown arm {arm!r}; use one of {', '.join(ARMS)}")
    code = resolve_language(lang)
    data = load_templates(version)
    if code not in data["languages"]:
        raise BadInputError(f"prompt version {version} has no {code}; it covers {', '.join(data['languages'])}")
    style = _style(announced, style)
    local = data["languages"][code]
    voice = data["english"] if arm in _ENGLISH_ARMS else local
    instruction = voice[arm].format(language=local["name_en"]) if arm == "code-switched" else voice[arm]
    if style == "natural":
        instruction = f"{instruction} {voice['announce'].format(budget=announced)}"
    blocks = [instruction]
    if style == "tag":
        blocks.append(data["tag"].format(budget=announced))
    blocks.append(f"{voice['label']} {question}")
    return Prompt(
        "\n\n".join(blocks), template_id(arm, code, style=style, version=version), arm, code, announced, style
    )


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
    """The prompt of one item of ``task`` (in the item's language) for ``arm``: from the task's template file
    (MGSM: :func:`build_prompt`, byte for byte) or from the arm's template of that language."""
    if arm not in task.arms:
        raise BadInputError(f"task {task.name} has no arm {arm!r}; its arms are {', '.join(task.arms)}")
    if task.prompts is not None:
        return build_prompt(
            item.fields["question"], arm, lang=item.lang, announced=announced, style=style, version=task.prompts
        )
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


def mgsm_prompts(
    arm: str,
    lang: str,
    *,
    data_dir=None,
    announced: int | None = None,
    style: str | None = None,
    version: str = DEFAULT_VERSION,
) -> list[tuple[MgsmItem, Prompt]]:
    """Every MGSM item of ``lang`` with its prompt for ``arm`` (the question is always in ``lang``)."""
    return [
        (it, build_prompt(it.question, arm, lang=lang, announced=announced, style=style, version=version))
        for it in load_mgsm(lang, data_dir)
    ]
