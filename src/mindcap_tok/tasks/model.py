"""The task model: a benchmark as data (its dataset source, languages, arms and templates, answer and gold types).

A task file is TOML, checked by these pydantic models in strict mode (no coercion, no unknown keys) through the
spec layer (:func:`mindcap_tok.spec.validate`), so every refusal reads ``file: key: problem``. The checks that
span keys (the native arm exists, every arm covers every language, a template uses only fields the source maps,
answer patterns compile) are in :func:`check_task`, so that a task file is checked whole when it is read. See the
README's "Tasks" section for the format.

Templates take plain named placeholders only (``{question}``): a format spec (``{question:>100000}``), a
conversion (``{question!r}``), an attribute or an index (``{question.x}``, ``{question[0]}``) is refused, since
each either fails only when a prompt is built or builds a prompt the file does not show.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..data.languages import resolve_language
from ..errors import BadInputError, MindcapError
from ..spec import SpecError
from ..templates import template_fields
from .answers.filter import filter_parser
from .answers.regex import compile_answer_pattern

_STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
#: a task or arm name: it names files and ledger values
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")]
#: the key of an arm's template that stands for every language the arm has no template of its own for
EVERY_LANGUAGE = "*"


class Source(BaseModel):
    """Where a task's items come from: exactly one of ``loader`` (a loader of :mod:`mindcap_tok.data`),
    ``files`` (a local file per language: ``.jsonl``, ``.json``, ``.csv`` or ``.parquet``, with ``{lang}``
    (FLORES code) or ``{config}`` in its path, relative to the task file) or ``dataset`` (a Hugging Face id,
    loaded with ``datasets.load_dataset(dataset, config, split=split)``; a folder ``<data_dir>/<dataset>`` in
    the hub's layout is used instead when it exists). ``fields`` maps each template placeholder to a column."""

    model_config = _STRICT
    loader: Literal["mgsm"] | None = None
    files: str | None = None
    dataset: str | None = None
    configs: dict[str, str] = {}
    split: str = "test"
    fields: dict[str, str] = {}
    #: where the data lives when it is not on the Hub (e.g. only in the authors' repository)
    url: str = ""


class Template(BaseModel):
    """One arm's wording in one language: ``instruction`` [+ ' ' + ``announce``], blank line, [``TOKEN_BUDGET``
    line, blank line], ``body`` (the item, formatted with the source's fields; write a literal brace twice)."""

    model_config = _STRICT
    instruction: str
    body: str
    announce: str | None = None


class Arm(BaseModel):
    """A prompting strategy of the task: its templates by FLORES code (``"*"``: every other language) and, when
    its trace opens with its own translation of the item (up to the translation delimiter, then the reasoning:
    translate-act), ``translation``: the FLORES code of the language it translates into (the translation audit
    scores that segment against the item in that language); ``reasoning``: the FLORES code of the language its
    reasoning is asked in, when that is not the item's own (translate-act, pivot: English)."""

    model_config = _STRICT
    description: str = ""
    templates: dict[str, Template] = {}
    translation: str | None = None
    reasoning: str | None = None


class FilterSpec(BaseModel):
    """A parser variant that reproduces another harness's regex filter (:mod:`.answers.filter`): a Python regex
    per FLORES code (``"*"``: every other language), which match decides (``first``: the harness's
    ``group_select: 0``, ``last``: ``-1``) and how the value is compared with the gold (``exact_match`` options)."""

    model_config = _STRICT
    patterns: Annotated[dict[str, str], Field(min_length=1)]
    select: Literal["first", "last"] = "first"
    compare: list[Literal["ignore-case", "ignore-punctuation"]] = []
    #: where the filter is copied from (a harness file and version)
    source: str = ""


class AnswerSpec(BaseModel):
    """The answer type and what its parser needs: ``labels`` (choice), ``pattern`` (regex, one named group
    ``answer``), named lenient ``variants`` (variant -> language -> answer phrases) and named regex ``filters``
    (variant -> :class:`FilterSpec`), which any answer type may have."""

    model_config = _STRICT
    type: Literal["integer", "choice", "math", "regex"]
    labels: list[str] | None = None
    pattern: str | None = None
    variants: dict[str, dict[str, list[str]]] = {}
    filters: dict[str, FilterSpec] = {}


class GoldSpec(BaseModel):
    """The gold answer: its column, its type (``integer`` for integer answers, else ``string``) and its
    normalisation (``strip``: surrounding white space; ``no-commas``: thousands separators, ``5,600`` -> 5600)."""

    model_config = _STRICT
    field: str = "answer"
    type: Literal["integer", "string"]
    normalise: list[Literal["strip", "no-commas"]] = ["strip"]


class Task(BaseModel):
    """A benchmark as data (see the module docs)."""

    model_config = _STRICT
    name: Name
    version: Annotated[int, Field(ge=1)]
    description: str = ""
    licence: str
    source: Source
    languages: Annotated[list[str], Field(min_length=1)]
    arms: dict[str, Arm]
    native: str
    comparator: str
    answer: AnswerSpec
    gold: GoldSpec
    #: optional few-shot exemplars: language -> list of rows (the source's fields and the gold field)
    exemplars: dict[str, list[dict[str, str]]] = {}
    #: lm-evaluation-harness task names that are this task: name prefix (then the language's code) -> arm
    lmeval: dict[str, str] = {}

    @property
    def template_version(self) -> str:
        """The prefix of every template id: ``<name>-v<version>``."""
        return f"{self.name}-v{self.version}"


def _placeholders(text: str, key: str) -> set[str]:
    """The names of the placeholders of template ``text``, each a plain ``{name}`` (else a :class:`SpecError`)."""
    try:
        return template_fields(text)
    except BadInputError as exc:
        raise SpecError(key, str(exc)) from None


def _check_source(task: Task) -> None:
    src = task.source
    given = [k for k in ("loader", "files", "dataset") if getattr(src, k)]
    if len(given) != 1:
        raise SpecError("source", f"give exactly one of loader, files, dataset (got {', '.join(given) or 'none'})")
    for lang in src.configs:
        if lang not in task.languages:
            raise SpecError(f"source.configs.{lang}", "is not one of the task's languages")
    if src.files:
        names = _placeholders(src.files, "source.files")
        if names - {"lang", "config", "data_dir"}:
            raise SpecError("source.files", f"may use {{lang}}, {{config}} and {{data_dir}}, got {sorted(names)}")
        if not {"lang", "config"} & names:
            raise SpecError("source.files", "must contain {lang} or {config} (one file per language)")


def _check_arms(task: Task) -> None:
    for role in ("native", "comparator"):
        if getattr(task, role) not in task.arms:
            raise SpecError(role, f"names no arm; arms: {', '.join(task.arms)}")
    if task.native == task.comparator:
        raise SpecError("comparator", "must differ from the native arm")
    for arm_name in task.arms:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", arm_name):
            raise SpecError(f"arms.{arm_name}", "an arm name is lower-case letters, digits, '.', '_' or '-'")
    for prefix, arm_name in task.lmeval.items():
        if arm_name not in task.arms:
            raise SpecError(f"lmeval.{prefix}", f"names no arm; arms: {', '.join(task.arms)}")
    for name, arm in task.arms.items():
        for key in ("translation", "reasoning"):
            if getattr(arm, key) is not None:
                _check_code(getattr(arm, key), f"arms.{name}.{key}")
    for name, arm in task.arms.items():
        _check_templates(task, name, arm)


def _check_templates(task: Task, name: str, arm: Arm) -> None:
    fields = set(task.source.fields)
    for lang in task.languages:
        if lang not in arm.templates and EVERY_LANGUAGE not in arm.templates:
            raise SpecError(f"arms.{name}.templates", f"has no template for {lang} (nor a '*' one)")
    for lang, tpl in arm.templates.items():
        key = f"arms.{name}.templates.{lang}"
        if lang != EVERY_LANGUAGE and lang not in task.languages:
            raise SpecError(key, "is not one of the task's languages")
        for part in ("instruction", "body"):
            unknown = _placeholders(getattr(tpl, part), f"{key}.{part}") - fields
            if unknown:
                raise SpecError(f"{key}.{part}", f"uses {sorted(unknown)}, not fields of the source ({sorted(fields)})")
        if tpl.announce is not None and _placeholders(tpl.announce, f"{key}.announce") != {"budget"}:
            raise SpecError(f"{key}.announce", "must use the placeholder {budget} and no other")


def _check_answer(task: Task) -> None:
    kind = task.answer.type
    if kind == "choice" and not task.answer.labels:
        raise SpecError("answer.labels", "a choice answer needs its labels")
    if kind == "regex" and not task.answer.pattern:
        raise SpecError("answer.pattern", "a regex answer needs its pattern")
    if task.answer.pattern is not None:
        try:
            compile_answer_pattern(task.answer.pattern)
        except MindcapError as exc:
            raise SpecError("answer.pattern", str(exc)) from None
    for name, spec in task.answer.filters.items():
        for lang, pattern in spec.patterns.items():
            if lang != EVERY_LANGUAGE and lang not in task.languages:
                raise SpecError(f"answer.filters.{name}.patterns.{lang}", "is not one of the task's languages")
            try:
                filter_parser(name, pattern, select=spec.select, compare=tuple(spec.compare))
            except MindcapError as exc:
                raise SpecError(f"answer.filters.{name}.patterns.{lang}", str(exc)) from None
    if (kind == "integer") != (task.gold.type == "integer"):
        raise SpecError("gold.type", f"must be {'integer' if kind == 'integer' else 'string'} for {kind} answers")


def _check_code(lang: str, key: str) -> None:
    try:
        code = resolve_language(lang)
    except MindcapError as exc:
        raise SpecError(key, str(exc)) from None
    if code != lang:
        raise SpecError(key, f"must be a FLORES-200 code: {code}, not {lang!r}")


def check_task(task: Task) -> Task:
    """``task`` once the rules that span keys hold (see the module docs), else a :class:`SpecError`."""
    for i, lang in enumerate(task.languages):
        _check_code(lang, f"languages[{i}]")
    if len(set(task.languages)) != len(task.languages):
        raise SpecError("languages", "lists a language twice")
    _check_source(task)
    _check_arms(task)
    _check_answer(task)
    return task
