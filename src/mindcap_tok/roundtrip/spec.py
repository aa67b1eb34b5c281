"""Round-trip job specs: a TOML file (or the same keys from the command line) and the plan it expands to.

A spec::

    name = "lit-qwen3"
    model = "Qwen/Qwen3-8B"            # or a list of models; local folders or HF ids
    model_name = "qwen3-8b"             # optional (a list, with several models)
    backend = "vllm"                    # vllm | transformers | server (the CLI's --backend wins)
    texts = "flores:devtest"            # flores:dev, flores:devtest or a .jsonl/.csv file (id, text, category)
    sample = 200                        # optional: N texts drawn with `seed`
    sentences_per_text = 3              # FLORES only: k consecutive sentences per text
    sequences = ["lit:all"]             # presets (lit:e-asia ... lit:all) and chains such as "en>de>th>en"
    max_tokens = 1024                   # cap of every hop
    seed = 0
    thinking = false                    # reasoning models: every model's enable_thinking (per_model: one model's)
    prompt_version = "roundtrip-v1"
    prompts = "my-prompts.json"         # or the job's own templates (the packaged file's schema); SHA-256 recorded
    [sampling]                          # temperature, top_p, top_k of the translations
    [per_model."qwen3-8b"]              # one model's own temperature, top_p, top_k, max_tokens (LiT Table 10),
                                        # thinking and think_close (the string closing a thought, for templates
                                        # without a think token)
    [engine]                            # passed to the backend (vLLM options)
    [server]                            # the server backend (as `generate`'s [server] table)
    [judge]                             # model, model_name, backend, base_url, max_tokens, retries,
                                        # temperature, top_p, top_k (default: the first model, 1024, 2, 0.6, 0.95, 20),
                                        # structured (default true: the reply's JSON schema goes with each request),
                                        # timeout_s, max_retries (its server's, as [server]'s; default: [server]'s)
    # or several judges, each judging every back-translation: [[judge]] tables (a list), each with its own model

Reasoning models: a model with ``thinking = true`` is prompted with the chat template's ``enable_thinking`` and
passes on only its answer channel (:mod:`.thinking`). A run may list the same model twice, thinking and instruct,
as two entries with distinct ``model_name``s (``model = ["m", "m"]``, ``model_name = ["m-think", "m"]``,
``[per_model.m-think] thinking = true``); the report compares such twins side by side.

A run with several judges keeps the first as :attr:`RoundtripSpec.judge` (its identity is a one-judge run's when
there is one judge, so older run folders still resume).

Seeds: hop ``h`` of (model, text, sequence) gets ``H(seed, model, text, sequence, h)``, judge attempt ``a``
``H(seed, "judge", model, text, sequence, a)`` (SHA-256, 31 bits): independent of batching and order, so a
resumed run reproduces an uninterrupted one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field

from ..errors import BadInputError
from ..generation import BACKENDS
from ..spec import (
    LIST,
    TABLE,
    Cap,
    JudgeTable,
    Names,
    Sampling,
    Seed,
    ServerOverrides,
    ServerSpec,
    SpecError,
    SpecModel,
    Temperature,
    TopK,
    TopP,
    between,
    check_known,
    default_model_name,
    one_of,
    read_toml,
    reading,
    refuse_api_key,
    rule,
    seed_hash,
    validate,
)
from .prompts import DEFAULT_VERSION, load_templates, prompt_file
from .sequences import Chain, resolve_sequences
from .texts import Text, load_texts, texts_hash

Backend = Annotated[str, rule(lambda v: v in BACKENDS, f"must be one of {', '.join(BACKENDS)}, got {{!r}}")]


_Judges = Annotated[
    Annotated[JudgeTable, TABLE] | Annotated[list[JudgeTable], Field(min_length=1), LIST],
    one_of("a [judge] table or a list of [[judge]] tables"),
]


class PerModel(SpecModel):
    """A ``[per_model.<name>]`` table: one model's own sampling keys, cap and thinking (unset: the run's)."""

    table: ClassVar[str] = "per_model"
    temperature: Temperature | None = None
    top_p: TopP | None = None
    top_k: TopK | None = None
    max_tokens: Cap | None = None
    thinking: bool | None = None
    think_close: str | None = None


class RoundtripFile(SpecModel):
    """A round-trip spec file as written (see the module docs): each key's type, rule and default."""

    name: Names = Field(default_factory=lambda: ["roundtrip"])
    model: Names
    model_name: Names | None = None
    backend: Backend | None = None
    texts: Names = Field(default_factory=lambda: ["flores:devtest"])
    sample: Annotated[int, between(1)] | None = None
    sentences_per_text: Annotated[int, between(1, 1000)] = 1
    sequences: Names
    max_tokens: Cap = 1024
    seed: Seed = 0
    prompt_version: Names | None = None
    sampling: Sampling = Sampling()
    engine: dict[str, Any] = Field(default_factory=dict)
    server: ServerSpec | None = None
    judge: _Judges = JudgeTable()
    per_model: dict[str, PerModel] = Field(default_factory=dict)
    prompts: Names | None = None
    thinking: bool | None = None


class Model(SpecModel):
    """A model to test: where it loads from, the name its records carry, and its own translation sampling and
    cap (``None``: the run's; ``[per_model.<name>]``); ``thinking``: prompted with ``enable_thinking`` (a
    reasoning model, its thought closed by its ``</think>`` token or the ``think_close`` string)."""

    path: str
    name: str
    sampling: Sampling | None = None
    max_tokens: int | None = None
    thinking: bool = False
    think_close: str | None = None


class JudgeSpec(SpecModel):
    """The judge: its model, backend (``None``: the run's), server URLs, cap, retries and sampling (defaults:
    :class:`~mindcap_tok.spec.JudgeTable`'s).

    ``structured``: send the reply's JSON schema with each judge request, for engines that constrain decoding
    to it (vLLM's structured outputs, a server's ``response_format``; the transformers backend ignores it).
    ``retries``: judge rounds again for replies that did not parse. ``timeout_s`` and ``max_retries``: how its
    server is waited for, as the ``[server]`` table's keys (``None``: that table's, else their defaults); how a
    server is reached, not what the judge says, so no part of the run's identity."""

    model: Model
    backend: str | None
    base_url: tuple[str, ...]
    max_tokens: int
    retries: int
    sampling: Sampling
    structured: bool
    timeout_s: float | None
    max_retries: int | None


class RoundtripSpec(SpecModel):
    """A parsed, checked round-trip job (see the module docs; its defaults are :class:`RoundtripFile`'s)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str
    models: tuple[Model, ...]
    texts_source: str
    texts: tuple[Text, ...]
    sequences: tuple[Chain, ...]
    judges: tuple[JudgeSpec, ...]
    max_tokens: int
    seed: int
    sample: int | None
    sentences_per_text: int
    backend: str | None
    prompt_version: str
    sampling: Sampling
    engine: dict[str, Any]
    server: ServerSpec | None
    prompts_sha256: str | None

    @property
    def judge(self) -> JudgeSpec:
        """The first judge (the only one of a one-judge run)."""
        return self.judges[0]

    def judge_server(self, judge: JudgeSpec) -> ServerSpec | None:
        """How ``judge`` reaches its server: its own ``base_url`` (with the ``[server]`` table's ``timeout_s`` and
        ``max_retries``) or the ``[server]`` table, its own ``timeout_s`` and ``max_retries`` over those;
        ``None`` when it names no server and the run has no ``[server]`` table."""
        base: ServerSpec | None
        if judge.base_url:
            base = ServerSpec(base_url=judge.base_url)
            if self.server is not None:
                base = ServerOverrides(timeout_s=self.server.timeout_s, max_retries=self.server.max_retries).apply(base)
        elif self.server is not None:
            base = self.server
        else:
            return None
        return ServerOverrides(timeout_s=judge.timeout_s, max_retries=judge.max_retries).apply(base)

    def model_sampling(self, model: Model) -> Sampling:
        """The translation sampling of ``model``: its own, else the run's."""
        return model.sampling or self.sampling

    def model_cap(self, model: Model) -> int:
        """The hop cap of ``model``: its own, else the run's ``max_tokens``."""
        return model.max_tokens or self.max_tokens

    def identity(self) -> dict:
        """What fixes the records: a folder holding another identity is another run."""
        judges = [
            {
                "model": j.model.name,
                "max_tokens": j.max_tokens,
                "sampling": j.sampling.model_dump(),
                "structured": j.structured,
            }
            for j in self.judges
        ]
        return (
            {
                "models": [m.name for m in self.models],
                "texts": texts_hash(self.texts),
                "sequences": [list(c.langs) for c in self.sequences],
                "max_tokens": self.max_tokens,
                "seed": self.seed,
                "prompt_version": self.prompt_version,
                "sampling": self.sampling.model_dump(),
                "judge": judges[0] if len(judges) == 1 else judges,
            }
            | self._per_model_identity()
            | ({"prompts_sha256": self.prompts_sha256} if self.prompts_sha256 else {})
        )

    def _per_model_identity(self) -> dict:
        """``per_model`` settings when a model has its own (absent otherwise: older identities unchanged)."""
        own = {
            m.name: {"sampling": self.model_sampling(m).model_dump(), "max_tokens": self.model_cap(m)} | _thinking(m)
            for m in self.models
            if m.sampling is not None or m.max_tokens is not None or m.thinking
        }
        return {"per_model": own} if own else {}

    def as_dict(self) -> dict:
        """Plain data for the run's manifest (texts by count, not content)."""
        return {
            "name": self.name,
            "models": [m.model_dump() for m in self.models],
            "texts": self.texts_source,
            "n_texts": len(self.texts),
            "sample": self.sample,
            "sentences_per_text": self.sentences_per_text,
            "sequences": {c.name: {"langs": list(c.langs), "resource": c.resource} for c in self.sequences},
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "prompt_version": self.prompt_version,
            "sampling": self.sampling.model_dump(),
            "judge": _judge_dict(self.judge),
            "judges": [_judge_dict(j) for j in self.judges],
            "prompts_sha256": self.prompts_sha256,
        }


def _thinking(model: Model) -> dict:
    """A thinking model's identity keys (none for an instruct model: older identities unchanged)."""
    if not model.thinking:
        return {}
    return {"thinking": True} | ({"think_close": model.think_close} if model.think_close else {})


def _judge_dict(judge: JudgeSpec) -> dict:
    return {
        "model": judge.model.model_dump(),
        "backend": judge.backend,
        "max_tokens": judge.max_tokens,
        "retries": judge.retries,
        "sampling": judge.sampling.model_dump(),
        "structured": judge.structured,
    }


def judge_names(spec: dict) -> list[str]:
    """The judges' model names of a manifest's spec (``as_dict``; manifests before several judges hold one)."""
    return [j["model"]["name"] for j in spec.get("judges", [spec["judge"]])]


def _models(paths: Sequence[str], names: Sequence[str] | None, base: Path | None, key: str) -> tuple[Model, ...]:
    """The models at ``paths`` (a relative folder read from ``base``), named ``names`` (default: their records'
    names); ``key`` names where they were given."""
    paths = [p.strip() for p in paths]
    paths = [
        str((base / p).resolve()) if base and not Path(p).is_absolute() and (base / p).is_dir() else p for p in paths
    ]
    names = [n.strip() for n in names] if names is not None else [default_model_name(p) for p in paths]
    if len(names) != len(paths):
        raise SpecError(f"{key}model_name", f"lists {len(names)} names for {len(paths)} models")
    if len(set(names)) != len(names):
        raise BadInputError(f"two models share a name ({', '.join(names)}); give model_name")
    return tuple(Model(path=p, name=n) for p, n in zip(paths, names, strict=True))


def _per_model(tables: dict[str, PerModel], models: tuple[Model, ...], sampling: Sampling) -> tuple[Model, ...]:
    """The models with their ``[per_model.<name>]`` settings (a table per model name, over the run's sampling)."""
    names = [m.name for m in models]
    check_known(tables, names, prefix="per_model.")
    out = []
    for m in models:
        own = tables.get(m.name)
        if own is None:
            out.append(m)
            continue
        thinking = m.thinking if own.thinking is None else own.thinking
        if own.think_close is not None and (not own.think_close or not thinking):
            raise SpecError(
                f"per_model.{m.name}.think_close", "must be a non-empty string, for a model with thinking = true"
            )
        keys = own.model_dump(include={"temperature", "top_p", "top_k"}, exclude_none=True)
        sampled = Sampling(**(sampling.model_dump() | keys)) if keys else None
        own_settings = {"sampling": sampled, "max_tokens": own.max_tokens, "thinking": thinking}
        out.append(m.model_copy(update=own_settings | {"think_close": own.think_close}))
    return tuple(out)


def _judges(
    given: list[JudgeTable] | JudgeTable, models: tuple[Model, ...], base: Path | None
) -> tuple[JudgeSpec, ...]:
    """``[judge]`` (one table) or ``[[judge]]`` (a non-empty list of tables, one per judge, names distinct)."""
    if isinstance(given, JudgeTable):
        return (_judge(given, models, base, "judge"),)
    judges = tuple(_judge(j, models, base, f"judge[{i}]") for i, j in enumerate(given))
    names = [j.model.name for j in judges]
    if len(set(names)) != len(names):
        raise BadInputError(f"two judges share a name ({', '.join(names)}); give each its model_name")
    return judges


def _judge(table: JudgeTable, models: tuple[Model, ...], base: Path | None, key: str) -> JudgeSpec:
    if table.model is not None:
        found = _models(table.model, table.model_name, base, f"{key}.")
        if len(found) != 1:
            raise SpecError(f"{key}.model", f"names one model, got {len(found)}")
        model = found[0]
    else:
        model = models[0]
    return JudgeSpec(
        model=model,
        backend=table.backend or None,
        base_url=table.base_url,
        max_tokens=table.max_tokens,
        retries=table.retries,
        sampling=table.sampling,
        structured=table.structured,
        timeout_s=table.timeout_s,
        max_retries=table.max_retries,
    )


def parse_spec(
    data: dict,
    base: Path | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | None = None,
) -> RoundtripSpec:
    """Check a spec's plain data (as read from TOML) and load its texts; errors are one line naming ``source``."""
    with reading(source if source is not None else "round-trip spec"):
        return _parse(data, base, data_dir)


def _parse(data: dict, base: Path | None, data_dir) -> RoundtripSpec:
    refuse_api_key(data.get("server") if isinstance(data, dict) else None)
    given = validate(RoundtripFile, data, key="")
    models = _models(given.model, given.model_name, base, "")
    chains = resolve_sequences(given.sequences)
    sources = {c.source for c in chains}
    if len(sources) != 1:
        raise BadInputError(f"all sequences must start from one source language, got {', '.join(sorted(sources))}")
    texts_source = given.texts[0]
    texts = load_texts(
        texts_source,
        lang=chains[0].source,
        sentences_per_text=given.sentences_per_text,
        sample=given.sample,
        seed=given.seed,
        data_dir=data_dir,
        base=base,
    )
    version = given.prompt_version[0] if given.prompt_version else DEFAULT_VERSION
    sha = None
    if given.prompts is not None:
        if given.prompt_version is not None:
            raise BadInputError("give prompts (a file) or prompt_version (a packaged one), not both")
        path = Path(given.prompts[0])
        version, sha = prompt_file(base / path if base and not path.is_absolute() else path)
    load_templates(version)
    if given.thinking is not None:
        models = tuple(m.model_copy(update={"thinking": given.thinking}) for m in models)
    if given.per_model:
        models = _per_model(given.per_model, models, given.sampling)
    return RoundtripSpec(
        name=given.name[0],
        models=models,
        texts_source=texts_source,
        texts=tuple(texts),
        sequences=chains,
        judges=_judges(given.judge, models, base),
        max_tokens=given.max_tokens,
        seed=given.seed,
        sample=given.sample,
        sentences_per_text=given.sentences_per_text,
        backend=given.backend,
        prompt_version=version,
        sampling=given.sampling,
        engine=given.engine,
        server=given.server,
        prompts_sha256=sha,
    )


def read_spec_file(path: str | os.PathLike[str]) -> dict:
    """The plain data of a TOML spec file (a one-line error when it does not read or parse)."""
    return read_toml(path, "round-trip spec")


def load_spec(path: str | os.PathLike[str], overrides: dict | None = None, *, data_dir=None) -> RoundtripSpec:
    """Parse the spec file at ``path`` (``None``: no file), keys in ``overrides`` replacing the file's."""
    data = read_spec_file(path) if path is not None else {}
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    base = Path(path).resolve().parent if path is not None else None
    return parse_spec(data, base, data_dir=data_dir, source=path)


def hop_seed(spec: RoundtripSpec, model: str, text_id: str, sequence: str, hop: int) -> int:
    """Seed of one hop (31 bits of SHA-256)."""
    return seed_hash(spec.seed, model, text_id, sequence, hop)


def judge_seed(spec: RoundtripSpec, model: str, text_id: str, sequence: str, attempt: int) -> int:
    """Seed of one judge attempt; a retry gets a new one."""
    return seed_hash(spec.seed, "judge", model, text_id, sequence, attempt)


def plan_roundtrip(spec: RoundtripSpec) -> dict:
    """Counts of a spec: texts, sequences, models, chains, hop waves, translation and (first-round) judge requests,
    and the worst-case translation output tokens."""
    chains = len(spec.texts) * len(spec.sequences) * len(spec.models)
    translations = len(spec.texts) * len(spec.models) * sum(c.hops for c in spec.sequences)
    per_model = len(spec.texts) * sum(c.hops for c in spec.sequences)
    return {
        "name": spec.name,
        "texts": len(spec.texts),
        "sequences": len(spec.sequences),
        "models": len(spec.models),
        "chains": chains,
        "waves": max(c.hops for c in spec.sequences),
        "translation_requests": translations,
        "judges": len(spec.judges),
        "judge_requests": chains * len(spec.judges),
        "max_judge_requests": chains * sum(1 + j.retries for j in spec.judges),
        "worst_case_tokens": sum(per_model * spec.model_cap(m) for m in spec.models),
    }
