"""Generation job specs: a TOML file naming the model, the cells, the design and the caps, expanded into shards.

A spec (see ``examples/jobs/``)::

    name = "qwen3-replay"
    task = "mgsm"                     # a built-in task (mgsm, belebele, global-mmlu-lite, mmath) or a task file
    model = "Qwen/Qwen3-8B"          # HF id or local folder
    model_name = "qwen3-8b"           # the ledger's `model` column (default: registry name or folder name)
    arms = ["native", "translate-act"]  # arms of the task
    langs = ["deu_Latn", "tha_Thai"]    # languages of the task
    items = "all"                     # or a list of item indices, or {sample = 50, seed = 1}
    k = 8                             # samples per item, at most MAX_K = 10,000
    design = "replay"                 # replay | independent | announcement | determinism
    caps = [4096]                     # replay: one cap; independent: the budget grid; announcement: the enforced cap;
                                      # determinism: the short caps, each below long_cap
                                      # (every cap and budget at most MAX_CAP = 2**20 tokens)
    long_cap = 1024                   # determinism: the long decode each short cap is compared with
    repeats = 2                       # determinism: identical requests per (item, cap), >= 2 (default 2)
    seed = 0
    shard_size = 250                  # requests (prompts) per shard; a shard never mixes cells or caps

    [sampling]                        # temperature, top_p, top_k
    [premiums]                        # independent design: lang = r; adds the caps floor(r·B) for `scaled_arms`
    # or, instead of the table, premiums = "flores": measured with the spec's tokenizer on FLORES-200 devtest
    [announce]                        # announcement design: budgets = [...], style = "natural" | "tag"
    [forcing]                         # enabled, text = "\\n####", max_tokens = 16, unanswered = false
    thinking = false                  # reasoning models: the chat template's enable_thinking (see store.think)
    think_close = "</think>"          # the string closing a thought, for templates without a think token
    [engine]                          # passed through to the backend (vLLM: tensor_parallel_size, dtype, ...)
    [server]                          # the `server` backend: base_url (string or list), api_key_env, concurrency,
                                      # timeout_s, max_retries, model (the served name), endpoint, logprob_ids

Integers must be TOML integers (``true`` is no 1, ``8.0`` no 8), booleans TOML booleans; every error is one
line naming the key and the file.

Seeds: each request (one prompt, ``k`` samples) gets ``seed = H(spec seed, model, arm, lang, design, cap,
announced, item)`` (SHA-256, 31 bits), so seeds vary by cap and no two budgets replay one trajectory; they do
not depend on shard size or order, so a resumed run reproduces an uninterrupted one. The task's part of the hash
is :func:`~mindcap_tok.tasks.load.task_key` (empty for the default task, whose seeds are thereby fixed).

The determinism design measures two things a serving stack may break: (a) ``repeats`` identical requests
(same prompt, seed, cap) and (b) one decode per cap in ``caps`` and one at ``long_cap``, all with the SAME seed
(``H`` above without the cap), so a capped decode should equal the long decode's first ``cap`` ids. Every
(item, cap) of ``caps`` + ``long_cap`` gets ``repeats`` requests of one sample each (``k`` is 1); repeat ``j``
is stored as ``sample = j``, so the ledger needs no extra key column and its key stays unique. Records:
items x (len(caps) + 1) x repeats. A shard never splits one item's repeats (it holds
``max(1, shard_size // repeats)`` items), so a shard's records are stored all or none and a resumed run never
regenerates (and so never contradicts) a stored repeat. Forcing is refused (it rewrites capped decodes).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, Field

from ..data.languages import resolve_language
from ..errors import BadInputError, MindcapError
from ..resample import Resampling, scale_budget
from ..spec import (
    LIST,
    MAX_CAP,
    TABLE,
    WORD,
    Cap,
    Caps,
    ModelName,
    Number,
    Sampling,
    Seed,
    ServerSpec,
    SpecError,
    SpecModel,
    between,
    check,
    check_model,
    default_model_name,
    int_range,
    listed,
    one_of,
    read_toml,
    reading,
    refuse_api_key,
    rule,
    seed_hash,
    show,
    validate,
)
from ..store import ANNOUNCE_STYLES, DESIGNS
from ..tasks.datasets import item_count
from ..tasks.load import DEFAULT_TASK, builtin_tasks, load_task, task_key
from ..tasks.model import EVERY_LANGUAGE, Task

#: The most samples per item (``k``) a spec may ask for. The paper draws k = 8 and a variance study needs a few
#: hundred; far above that a value is a typo (k = 10**12 would plan 10**12 records per prompt and ask the engine
#: for as many samples), so it is refused before anything is planned.
MAX_K = 10_000


class Forcing(SpecModel):
    """Budget forcing: when a decode hits its cap, append ``text`` and decode greedily to the end of the line.

    ``unanswered`` also forces decodes that stopped by themselves without a strict answer line (the paper's
    second forced population); their end-of-turn token is dropped before the forcing text.
    """

    table: ClassVar[str] = "forcing"
    enabled: bool = False
    text: str = "\n####"
    max_tokens: Cap = 16
    unanswered: bool = False


class Announce(SpecModel):
    """The ``[announce]`` table: the announced budgets and how they are said (``natural`` or ``tag``)."""

    table: ClassVar[str] = "announce"
    budgets: Caps | None = None
    style: Annotated[
        str, rule(lambda v: v in ANNOUNCE_STYLES and v != "none", "must be 'natural' or 'tag', got {!r}")
    ] = "natural"


class ItemSample(SpecModel):
    """``items = {sample = N, seed = S}``: N items drawn with seed S."""

    table: ClassVar[str] = "items"
    sample: Annotated[int, between(1)]
    seed: Seed = 0


#: one string or a list of them (``arms``, ``langs``, ``scaled_arms``)
_Strings = Annotated[list[str], BeforeValidator(listed)]

_JobName = Annotated[
    str,
    rule(
        lambda v: re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", v),
        "must be letters, digits, '.', '_' or '-' (it names a file), got {!r}",
    ),
]
#: item indices, or a sample of them
_Items = Annotated[
    Annotated[
        str,
        rule(lambda v: v == "all", "must be 'all', a list of item indices or {{sample = N, seed = S}}, got {!r}"),
        WORD,
    ]
    | Annotated[list[Annotated[int, between(0)]], Field(min_length=1), LIST]
    | Annotated[ItemSample, TABLE],
    one_of("'all', a list of item indices or {sample = N, seed = S}"),
]
_Premiums = Annotated[
    Annotated[str, rule(lambda v: v == "flores", 'must be a table (lang = r) or "flores", got {!r}'), WORD]
    | Annotated[dict[str, Annotated[Number, rule(lambda v: v > 0, "must be > 0, got {}", number=True)]], TABLE],
    one_of('a table (lang = r) or "flores"'),
]


@dataclass(frozen=True)
class Part:
    """Part ``index`` of ``count`` (0-based, as ``SLURM_ARRAY_TASK_ID`` runs with ``--array=0-(count-1)``)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def as_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def parse_part(text: str, what: str = "--shard") -> Part:
    """``"I/N"`` as a :class:`Part`: 0 <= I < N (0-based, SLURM's array index); else one line naming ``what``."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if m is None:
        raise BadInputError(f"{what} {text!r}: expected I/N, part I (0-based) of N, e.g. 0/4")
    index, count = int(m[1]), int(m[2])
    if count < 1:
        raise BadInputError(f"{what} {text}: N must be at least 1")
    if index >= count:
        raise BadInputError(f"{what} {text}: I must be 0..{count - 1} (0-based, as SLURM's --array=0-{count - 1})")
    return Part(index, count)


class JobFile(SpecModel):
    """A job spec file as written (see the module docs): each key's type and rule, and its default where the
    file's value is the job's. What depends on other keys (the design's caps, the task's items and arms, the
    model's names) is worked out by :func:`parse_spec` into a :class:`JobSpec`."""

    name: _JobName | None = None
    task: ModelName = DEFAULT_TASK
    model: ModelName
    model_name: str = ""
    tokenizer: ModelName | None = None
    arms: Annotated[_Strings, Field(min_length=1)]
    langs: Annotated[_Strings, Field(min_length=1)]
    items: _Items = "all"
    k: Annotated[int, between(1, MAX_K)] | None = None
    design: Annotated[str, rule(lambda v: v in DESIGNS, f"must be one of {', '.join(DESIGNS)}, got {{!r}}")]
    caps: Caps | None = None
    seed: Seed = 0
    shard_size: Annotated[int, between(1)] = 250
    prompt_version: ModelName | None = None
    sampling: Sampling = Sampling()
    premiums: _Premiums = Field(default_factory=dict)
    scaled_arms: _Strings | None = None
    announce: Announce = Announce()
    forcing: Forcing = Forcing()
    engine: dict[str, Any] = Field(default_factory=dict)
    server: ServerSpec | None = None
    repeats: Annotated[int, between(2, MAX_K)] = 2
    long_cap: Annotated[int, between(2, MAX_CAP)] | None = None
    thinking: bool = False
    think_close: str = ""


class JobSpec(SpecModel):
    """A parsed, checked generation job (see the module docs for the file format; its defaults are
    :class:`JobFile`'s)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str
    model: str
    model_name: str
    tokenizer: str
    arms: tuple[str, ...]
    langs: tuple[str, ...]
    items: tuple[int, ...]
    k: int
    design: str
    caps: tuple[int, ...]
    seed: int
    shard_size: int
    #: the task's name, and the task file it was read from (``""`` for a built-in task)
    task: str
    task_file: str
    prompt_version: str
    sampling: Sampling
    premiums: dict[str, float | Fraction]
    scaled_arms: tuple[str, ...]
    announce_budgets: tuple[int, ...]
    announce_style: str
    forcing: Forcing
    engine: dict[str, Any]
    server: ServerSpec | None
    #: determinism design: identical requests per (item, cap) and the long decode's cap (1 and None otherwise)
    repeats: int
    long_cap: int | None
    #: reasoning models: thinking on (the template's ``enable_thinking``), and the string that closes a thought
    #: where the tokenizer has no ``</think>`` token (``""``: the token)
    thinking: bool
    think_close: str
    #: the part of the job this run generates (``generate --shard``; ``None``: all of it); not in :meth:`as_dict`
    part: Part | None = None

    @property
    def records_per_key(self) -> int:
        """Records per request key (all key columns but ``sample``): ``k`` samples of each of ``repeats``."""
        return self.k * self.repeats

    def as_dict(self) -> dict:
        """Plain data (JSON-ready), stored with the output; a measured premium is kept exact as ``"tokens/ref"``.
        ``server`` appears only when the spec has a ``[server]`` table, ``repeats`` and ``long_cap`` only in
        the determinism design, ``task`` only for a task other than MGSM, ``task_file`` only for a user's, and
        ``thinking``, ``think_close`` and ``server.reasoning_effort`` only when set."""
        out = self.model_dump(exclude={"part"})
        if not task_key(self.task) and not self.task_file:
            del out["task"]
        if not self.task_file:
            del out["task_file"]
        if self.server is None:
            del out["server"]
        if self.design != "determinism":
            del out["repeats"], out["long_cap"]
        if not self.thinking:
            del out["thinking"]
        if not self.think_close:
            del out["think_close"]
        if self.server is not None and not self.server.reasoning_effort:
            del out["server"]["reasoning_effort"]
        out["premiums"] = {lang: str(r) if isinstance(r, Fraction) else r for lang, r in self.premiums.items()}
        return out


@dataclass(frozen=True)
class Request:
    """One prompt of a job: ``k`` samples of (arm, lang, item) under ``cap``, with an optional announced budget.

    ``sample`` is the sample index of its first record (determinism design: the repeat index; else 0)."""

    arm: str
    lang: str
    item: int
    cap: int
    announced: int | None
    seed: int
    sample: int = 0


@dataclass(frozen=True)
class Shard:
    """A unit of work written atomically: requests of one cell and one cap/announcement."""

    id: str
    requests: tuple[Request, ...]


@dataclass(frozen=True)
class Plan:
    """What a job will generate: its shards, and the counts a dry run prints."""

    spec: JobSpec
    shards: tuple[Shard, ...]

    @property
    def requests(self) -> int:
        """Prompts sent to the engine (each asks for ``k`` samples)."""
        return sum(len(s.requests) for s in self.shards)

    @property
    def records(self) -> int:
        """Ledger records the job writes (requests x k)."""
        return self.requests * self.spec.k

    @property
    def worst_case_tokens(self) -> int:
        """Output tokens if every decode runs to its cap, plus the forcing text (<= 1 token a byte) and continuation."""
        extra = _forcing_tokens(self.spec)
        return sum((r.cap + extra) * self.spec.k for s in self.shards for r in s.requests)

    def summary(self) -> dict:
        """Plain-data counts: requests, records (decodes), shards, worst-case output tokens."""
        return {
            "job": self.spec.name,
            "design": self.spec.design,
            "requests": self.requests,
            "records": self.records,
            "shards": len(self.shards),
            "worst_case_tokens": self.worst_case_tokens,
        }


def _items(value: list[int] | ItemSample | str, n_items: int) -> tuple[int, ...]:
    """The item indices of ``items`` (``"all"``, a list, or a seeded sample) among the task's ``n_items``."""
    if isinstance(value, ItemSample):
        n = _within(value.sample, "items.sample", 1, n_items)
        return tuple(sorted(random.Random(value.seed).sample(range(n_items), n)))
    if isinstance(value, list):
        items = [_within(v, f"items[{i}]", 0, n_items - 1) for i, v in enumerate(value)]
        if len(set(items)) != len(items):
            raise SpecError("items", "lists an item twice")
        return tuple(items)
    return tuple(range(n_items))


def _within(value: int, key: str, low: int, high: int) -> int:
    """An integer setting in ``low..high``, where ``high`` depends on other keys (the task's items)."""
    try:
        return int_range(value, low, high=high)
    except ValueError as exc:
        raise SpecError(key, str(exc)) from None


def _task(ref: str, base: Path | None) -> tuple[Task, str]:
    """The job's task and the file it came from (``""``: built in); a relative file is read from ``base``."""
    if ref in builtin_tasks():
        return load_task(ref), ""
    path = Path(ref)
    if base is not None and not path.is_absolute():
        path = base / path
    return load_task(path), str(path.resolve())


def spec_task(spec: JobSpec) -> Task:
    """The task a job generates (read again from its file for a user's task)."""
    return load_task(spec.task_file or spec.task)


def _check_cells(task: Task, arms: tuple[str, ...], langs: tuple[str, ...], given: JobFile) -> str:
    """Refuse arms and languages the task lacks (they would otherwise fail only when the prompt is built, after
    earlier shards' requests were sent); the task's template version, which ``prompt_version`` may name but not
    change (a new wording is a new version of the task)."""
    for arm in arms:
        if arm not in task.arms:
            raise BadInputError(f"unknown arm {arm!r}; use one of {', '.join(task.arms)}")
    for lang in langs:
        if lang not in task.languages:
            raise BadInputError(f"task {task.name} has no {lang}; its languages are {', '.join(task.languages)}")
    version = task.template_version
    if given.prompt_version is not None and given.prompt_version != version:
        raise SpecError(
            "prompt_version", f"{show(given.prompt_version)}, but task {task.name}'s prompts are version {version}"
        )
    return version


def _check_announcements(task: Task, arms: tuple[str, ...], langs: tuple[str, ...], style: str) -> None:
    """Refuse a natural announcement for an (arm, language) whose template has no announcement sentence."""
    if style != "natural":
        return
    for arm in arms:
        templates = task.arms[arm].templates
        for lang in langs:
            if (templates.get(lang) or templates[EVERY_LANGUAGE]).announce is None:
                raise BadInputError(
                    f"task {task.name}, arm {arm}, {lang}: the announcement design needs an announcement sentence "
                    "(announce, with {budget}) in its template, or announce.style = 'tag'"
                )


def parse_spec(
    data: dict,
    base: Path | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | None = None,
) -> JobSpec:
    """Check a spec's plain data (as read from TOML) and return a :class:`JobSpec`.

    A relative local model folder is resolved against ``base`` (the spec file's folder) when it exists there.
    ``premiums = "flores"`` reads FLORES under ``data_dir`` and the tokenizer from ``tokenizers_dir`` (default:
    the configured ones). Every error is one line naming the key, and ``source`` (the spec file) when given.
    """
    with reading(source if source is not None else "job spec"):
        return _parse(data, base, data_dir, tokenizers_dir)


#: keys only a round-trip spec has: a generation job given them is meant for `mindcap-tok roundtrip`
_ROUNDTRIP_KEYS = frozenset({"sequences", "texts", "judge", "sentences_per_text"})


def _parse(data: dict, base: Path | None, data_dir, tokenizers_dir) -> JobSpec:
    """:func:`parse_spec` without the file named in its errors."""
    if not isinstance(data, dict):
        raise BadInputError(f"must be a TOML table, got {show(data)}")
    roundtrip = sorted(set(data) & _ROUNDTRIP_KEYS)
    if roundtrip and "arms" not in data:
        raise BadInputError(
            f"this looks like a round-trip spec (it has {', '.join(roundtrip)}): use mindcap-tok roundtrip"
        )
    refuse_api_key(data.get("server"))
    given = validate(JobFile, data, key="")
    design = given.design
    model, model_name, tokenizer, name = _identity(given, base)
    task, task_file = _task(given.task, base)
    arms = tuple(given.arms)
    langs = tuple(resolve_language(x) for x in given.langs)
    version = _check_cells(task, arms, langs, given)
    caps, k, repeats, long_cap = _grid(given)
    if given.forcing.enabled and design == "determinism":
        raise BadInputError("the determinism design takes no forcing (it rewrites capped decodes)")
    if given.premiums and design != "independent":
        raise BadInputError("premiums (scaled caps) apply to the independent design only")
    premiums = _premiums(given.premiums, tokenizer, langs, data_dir, tokenizers_dir)
    for lang, r in premiums.items():
        try:
            too_large = scale_budget(r, max(caps)) > MAX_CAP
        except MindcapError:  # above even the largest budget
            too_large = True
        if too_large:
            raise SpecError("premiums", f"{lang} = {r} scales cap {max(caps)} above the largest cap, {MAX_CAP}")
    budgets = tuple(given.announce.budgets or ())
    if (design == "announcement") != bool(budgets):
        raise BadInputError("the announcement design needs [announce] budgets, and only it takes them")
    if budgets:
        _check_announcements(task, arms, langs, given.announce.style)
    if given.think_close and not given.thinking:
        raise BadInputError("think_close applies to thinking = true only")
    scaled_arms = tuple(given.scaled_arms) if given.scaled_arms is not None else (task.native,)
    if set(scaled_arms) - set(task.arms):
        raise BadInputError(f"scaled_arms {list(scaled_arms)}; arms are {', '.join(task.arms)}")
    return JobSpec(
        name=name,
        model=model,
        model_name=model_name,
        tokenizer=tokenizer,
        arms=arms,
        langs=langs,
        items=_items(given.items, item_count(task, langs, data_dir=data_dir)),
        k=k,
        design=design,
        caps=caps,
        seed=given.seed,
        shard_size=given.shard_size,
        task=task.name,
        task_file=task_file,
        prompt_version=version,
        sampling=given.sampling,
        premiums=premiums,
        scaled_arms=scaled_arms,
        announce_budgets=budgets,
        announce_style=given.announce.style,
        forcing=given.forcing,
        engine=given.engine,
        server=given.server,
        repeats=repeats,
        long_cap=long_cap,
        thinking=given.thinking,
        think_close=given.think_close,
    )


def _identity(given: JobFile, base: Path | None) -> tuple[str, str, str, str]:
    """``(model, model_name, tokenizer, name)``: a relative model folder resolved against the spec's folder."""
    model = given.model
    if base is not None and not Path(model).is_absolute():
        if (base / model).is_dir():
            model = str((base / model).resolve())
        elif model.startswith(".") or model.count("/") > 1:  # a path, not a Hugging Face id
            raise BadInputError(
                f"model folder {model!r} not found: a relative model path is read from the spec file's folder "
                f"({base}, here {(base / model).resolve()})"
            )
    records = check_model(given.model_name, "model_name") if given.model_name else default_model_name(model)
    tokenizer = given.tokenizer or records
    # a hub id's slash cannot stand in a file name: "org--model", as the hub's own cache folders write it
    name = given.name or check(_JobName, records.replace("/", "--") + "-" + given.design, key="name")
    return model, records, tokenizer, name


def _grid(given: JobFile) -> tuple[tuple[int, ...], int, int, int | None]:
    """``(caps, k, repeats, long_cap)``: the design's caps (replay and announcement have a default one)."""
    design = given.design
    default_caps = {"replay": 4096, "announcement": 2048}
    if given.caps is None and design not in default_caps:
        raise BadInputError(f"the {design} design needs caps (its budget grid)")
    caps = tuple(given.caps or (default_caps[design],))
    if design not in ("independent", "determinism") and len(caps) != 1:
        raise BadInputError(f"the {design} design takes one cap, got {list(caps)}")
    repeats, long_cap = _determinism(given, caps)
    k = given.k if given.k is not None else 1 if design == "determinism" else 8
    if design == "determinism" and k != 1:
        raise BadInputError(f"the determinism design decodes one sample per request (k = 1; use repeats), got k = {k}")
    return caps, k, repeats, long_cap


def _determinism(given: JobFile, caps: tuple[int, ...]) -> tuple[int, int | None]:
    """``(repeats, long_cap)`` of a determinism spec (``(1, None)`` for the other designs, which refuse them)."""
    if given.design != "determinism":
        named = [key for key in ("repeats", "long_cap") if key in given.model_fields_set]
        if named:
            raise BadInputError(f"{' and '.join(named)} apply to the determinism design only")
        return 1, None
    if given.long_cap is None:
        raise BadInputError("the determinism design needs long_cap (the long decode the caps are compared with)")
    if len(set(caps)) != len(caps):
        raise BadInputError(f"caps lists a cap twice: {list(caps)}")
    if max(caps) >= given.long_cap:
        raise BadInputError(f"every cap must be below long_cap = {given.long_cap}, got {max(caps)}")
    return given.repeats, given.long_cap


def _premiums(
    value: dict[str, float] | str, tokenizer: str, langs: tuple[str, ...], data_dir, tokenizers_dir
) -> dict[str, float | Fraction]:
    """``{lang: r}`` typed in the spec, or ``"flores"``: each language's premium measured with the job's own
    tokenizer on FLORES-200 devtest by :func:`mindcap_tok.premium.token_premium`, kept as the exact token ratio so
    that floor(r·B) matches what the statistics later compute from the same tokenizer."""
    if isinstance(value, str):
        from ..data.flores import flores_source
        from ..premium import token_premium
        from ..tokenization.load import load_tokenizer

        tok = load_tokenizer(tokenizer, tokenizers_dir)
        return {
            p.lang: p.ratio
            for p in token_premium(tok, langs, source=flores_source(data_dir), resampling=Resampling(n_boot=0))
        }
    return {resolve_language(lang): float(r) for lang, r in value.items()}


def load_spec(
    path: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    task: str | os.PathLike[str] | None = None,
    thinking: bool | None = None,
) -> JobSpec:
    """Read and check a TOML job spec (``data_dir``, ``tokenizers_dir``: as for :func:`parse_spec`). ``task``
    (``--task``: a built-in task or a task file, relative to the working folder) replaces the file's ``task``,
    ``thinking`` (``--thinking/--no-thinking``) its ``thinking`` (off: its ``think_close`` too)."""
    path = Path(path)
    data = read_toml(path, "job spec")
    if task is not None:
        task = os.fspath(task)
        data = {**data, "task": task if task in builtin_tasks() else str(Path(task).resolve())}
    if thinking is not None:
        data = {k: v for k, v in data.items() if thinking or k != "think_close"} | {"thinking": thinking}
    return parse_spec(data, path.resolve().parent, data_dir=data_dir, tokenizers_dir=tokenizers_dir, source=path)


def request_seed(spec: JobSpec, arm: str, *, lang: str, cap: int, announced: int | None, item: int) -> int:
    """The seed of one request: a hash of the spec seed and everything that names the request (31 bits).

    The determinism design leaves the cap out: every cap (and repeat) of an item shares one seed."""
    cap_key = "shared" if spec.design == "determinism" else cap
    task = task_key(spec.task)
    return seed_hash(spec.seed, spec.model_name, *task, arm, lang, spec.design, cap_key, announced, item, sep="|")


def caps_for(spec: JobSpec, arm: str, *, lang: str) -> list[int]:
    """The caps of one (arm, lang): the grid, plus floor(r·B) for premium-scaled arms (sorted, unique)."""
    caps = set(spec.caps) | ({spec.long_cap} if spec.long_cap is not None else set())
    if arm in spec.scaled_arms and lang in spec.premiums:
        caps |= {scale_budget(spec.premiums[lang], b) for b in spec.caps}
    return sorted(c for c in caps if c > 0)


def _forcing_tokens(spec: JobSpec) -> int:
    """Worst-case tokens forcing adds to a decode: its text (<= 1 token a byte) and the continuation."""
    forcing = spec.forcing
    return len(forcing.text.encode("utf-8")) + forcing.max_tokens if forcing.enabled else 0


def populations(spec: JobSpec) -> Iterator[tuple[str, str, int, int | None]]:
    """Each (arm, lang, cap, announced) of a job, in plan order; each asks for every item of the spec."""
    announced_values: tuple[int | None, ...] = spec.announce_budgets or (None,)
    for arm in spec.arms:
        for lang in spec.langs:
            for cap in caps_for(spec, arm, lang=lang):
                for announced in announced_values:
                    yield arm, lang, cap, announced


def part_groups(spec: JobSpec) -> set[tuple[str, str, int, int | None, int]] | None:
    """The request groups (arm, lang, cap, announced, item) of ``spec.part`` (``None``: no part, all of them).

    Every group is ranked by a SHA-256 of itself (ties, which need a hash collision, by the group) and part I of N
    takes ranks ``[I·n/N, (I+1)·n/N)``: O(n) hashes and one sort of n keys, next to n seeds already hashed."""
    part = spec.part
    if part is None:
        return None
    groups = [(arm, lang, cap, ann, item) for arm, lang, cap, ann in populations(spec) for item in spec.items]
    if part.count > len(groups):
        raise BadInputError(
            f"part {part} of job {spec.name}: the job has {len(groups)} request groups (an item's repeats stay "
            f"together); split it into at most {len(groups)} parts"
        )
    groups.sort(key=lambda g: (seed_hash("part", *g, sep="|"), g))
    n = len(groups)
    return set(groups[part.index * n // part.count : (part.index + 1) * n // part.count])


def with_part(spec: JobSpec, part: Part | None) -> JobSpec:
    """``spec`` restricted to ``part`` (``None``: the whole job)."""
    return spec.model_copy(update={"part": part})


def iter_shards(spec: JobSpec) -> Iterator[Shard]:
    """The shards of :func:`plan_job`, one at a time: per population the items (of ``spec.part``'s request
    groups) in chunks of ``shard_size``."""
    per_shard = _items_per_shard(spec)
    keep = part_groups(spec)
    for arm, lang, cap, announced in populations(spec):
        items = spec.items if keep is None else [i for i in spec.items if (arm, lang, cap, announced, i) in keep]
        reqs = [
            Request(
                arm,
                lang,
                item,
                cap,
                announced,
                request_seed(spec, arm, lang=lang, cap=cap, announced=announced, item=item),
                j,
            )
            for item in items
            for j in range(spec.repeats)
        ]
        tag = f"cap{cap}" + (f"-ann{announced}" if announced is not None else "")
        size = per_shard * spec.repeats
        for start in range(0, len(reqs), size):
            sid = f"{arm}/{lang}/{spec.design}-{tag}/{start // size:05d}"
            yield Shard(sid, tuple(reqs[start : start + size]))


def _items_per_shard(spec: JobSpec) -> int:
    """Items per shard: ``shard_size`` requests, but never one item's repeats split over two shards."""
    return max(1, spec.shard_size // spec.repeats)


def plan_job(spec: JobSpec) -> Plan:
    """Expand a spec into shards: per (arm, lang, cap, announced) the items in chunks of ``shard_size``."""
    return Plan(spec, tuple(iter_shards(spec)))


def job_counts(spec: JobSpec) -> dict:
    """The counts of :meth:`Plan.summary`, worked out per population: no request or record is listed, so a dry
    run costs the same for k = 1 and k = 10,000. A part (``spec.part``) is counted from its plan."""
    if spec.part is not None:
        return plan_job(spec).summary()
    n_items, n_shards = len(spec.items), -(-len(spec.items) // _items_per_shard(spec))
    extra = _forcing_tokens(spec)
    pops = caps = 0
    for _, _, cap, _ in populations(spec):
        pops += 1
        caps += cap + extra
    n_requests = n_items * spec.repeats
    return {
        "job": spec.name,
        "design": spec.design,
        "requests": pops * n_requests,
        "records": pops * n_requests * spec.k,
        "shards": pops * n_shards,
        "worst_case_tokens": caps * n_requests * spec.k,
    }
