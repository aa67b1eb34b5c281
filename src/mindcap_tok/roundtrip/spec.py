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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..errors import BadInputError
from ..generation import BACKENDS
from ..spec import (
    Sampling,
    ServerOverrides,
    ServerSpec,
    SpecError,
    base_urls,
    check_cap,
    check_known,
    check_model,
    check_sampling,
    check_seed,
    default_model_name,
    int_range,
    judge_table,
    read_toml,
    reading,
    seed_hash,
    server_options,
    show,
)
from .prompts import DEFAULT_VERSION, load_templates, prompt_file
from .sequences import Chain, resolve_sequences
from .texts import Text, load_texts, texts_hash

_KEYS = {
    "name", "model", "model_name", "backend", "texts", "sample", "sentences_per_text", "sequences", "max_tokens",
    "seed", "prompt_version", "sampling", "engine", "server", "judge", "per_model", "prompts", "thinking",
}  # fmt: skip
_PER_MODEL_KEYS = ("temperature", "top_p", "top_k", "max_tokens", "thinking", "think_close")


@dataclass(frozen=True)
class Model:
    """A model to test: where it loads from, the name its records carry, and its own translation sampling and
    cap (``None``: the run's; ``[per_model.<name>]``); ``thinking``: prompted with ``enable_thinking`` (a
    reasoning model, its thought closed by its ``</think>`` token or the ``think_close`` string)."""

    path: str
    name: str
    sampling: Sampling | None = None
    max_tokens: int | None = None
    thinking: bool = False
    think_close: str | None = None


#: the judge's sampling when ``[judge]`` sets none
JUDGE_SAMPLING = Sampling(0.6, 0.95, 20)


@dataclass(frozen=True)
class JudgeSpec:
    """The judge: its model, backend (``None``: the run's), server URLs, cap, retries and sampling.

    ``structured``: send the reply's JSON schema with each judge request, for engines that constrain decoding
    to it (vLLM's structured outputs, a server's ``response_format``; the transformers backend ignores it).
    ``retries``: judge rounds again for replies that did not parse. ``timeout_s`` and ``max_retries``: how its
    server is waited for, as the ``[server]`` table's keys (``None``: that table's, else their defaults); how a
    server is reached, not what the judge says, so no part of the run's identity."""

    model: Model
    backend: str | None = None
    base_url: tuple[str, ...] = ()
    max_tokens: int = 1024
    retries: int = 2
    sampling: Sampling = field(default_factory=lambda: JUDGE_SAMPLING)
    structured: bool = True
    timeout_s: float | None = None
    max_retries: int | None = None


@dataclass(frozen=True)
class RoundtripSpec:
    """A parsed, checked round-trip job (see the module docs)."""

    name: str
    models: tuple[Model, ...]
    texts_source: str
    texts: tuple[Text, ...]
    sequences: tuple[Chain, ...]
    judges: tuple[JudgeSpec, ...]
    max_tokens: int = 1024
    seed: int = 0
    sample: int | None = None
    sentences_per_text: int = 1
    backend: str | None = None
    prompt_version: str = DEFAULT_VERSION
    sampling: Sampling = field(default_factory=Sampling)
    engine: dict = field(default_factory=dict)
    server: ServerSpec | None = None
    prompts_sha256: str | None = None

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
            {"model": j.model.name, "max_tokens": j.max_tokens, "sampling": asdict(j.sampling),
             "structured": j.structured}
            for j in self.judges
        ]  # fmt: skip
        return (
            {
                "models": [m.name for m in self.models],
                "texts": texts_hash(self.texts),
                "sequences": [list(c.langs) for c in self.sequences],
                "max_tokens": self.max_tokens,
                "seed": self.seed,
                "prompt_version": self.prompt_version,
                "sampling": asdict(self.sampling),
                "judge": judges[0] if len(judges) == 1 else judges,
            }
            | self._per_model_identity()
            | ({"prompts_sha256": self.prompts_sha256} if self.prompts_sha256 else {})
        )

    def _per_model_identity(self) -> dict:
        """``per_model`` settings when a model has its own (absent otherwise: older identities unchanged)."""
        own = {
            m.name: {"sampling": asdict(self.model_sampling(m)), "max_tokens": self.model_cap(m)} | _thinking(m)
            for m in self.models
            if m.sampling is not None or m.max_tokens is not None or m.thinking
        }
        return {"per_model": own} if own else {}

    def as_dict(self) -> dict:
        """Plain data for the run's manifest (texts by count, not content)."""
        return {
            "name": self.name,
            "models": [asdict(m) for m in self.models],
            "texts": self.texts_source,
            "n_texts": len(self.texts),
            "sample": self.sample,
            "sentences_per_text": self.sentences_per_text,
            "sequences": {c.name: {"langs": list(c.langs), "resource": c.resource} for c in self.sequences},
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "prompt_version": self.prompt_version,
            "sampling": asdict(self.sampling),
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
        "model": asdict(judge.model), "backend": judge.backend, "max_tokens": judge.max_tokens,
        "retries": judge.retries, "sampling": asdict(judge.sampling), "structured": judge.structured,
    }  # fmt: skip


def judge_names(spec: dict) -> list[str]:
    """The judges' model names of a manifest's spec (``as_dict``; manifests before several judges hold one)."""
    return [j["model"]["name"] for j in spec.get("judges", [spec["judge"]])]


def _int(value: object, key: str, low: int = 1, high: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(key, f"must be of type int, got {show(value)}")
    try:
        return int_range(value, low, high=high)
    except ValueError as exc:
        raise SpecError(key, str(exc)) from None


def _strs(value: object, key: str) -> list[str]:
    """One string or a non-empty list of them, each non-empty (a list's element named by its index)."""
    if not isinstance(value, list):
        return [check_model(value, key).strip()]
    if not value:
        raise SpecError(key, "must not be an empty list")
    return [check_model(v, f"{key}[{i}]").strip() for i, v in enumerate(value)]


def _backend(value: object, key: str) -> str:
    if value not in BACKENDS:
        raise SpecError(key, f"must be one of {', '.join(BACKENDS)}, got {value!r}")
    return value


def _models(data: dict, base: Path | None, prefix: str = "") -> tuple[Model, ...]:
    paths = _strs(data["model"], prefix + "model")
    paths = [
        str((base / p).resolve()) if base and not Path(p).is_absolute() and (base / p).is_dir() else p for p in paths
    ]
    given = "model_name" in data
    names = _strs(data["model_name"], prefix + "model_name") if given else [default_model_name(p) for p in paths]
    if len(names) != len(paths):
        raise BadInputError(f"model_name lists {len(names)} names for {len(paths)} models")
    if len(set(names)) != len(names):
        raise BadInputError(f"two models share a name ({', '.join(names)}); give model_name")
    return tuple(Model(p, n) for p, n in zip(paths, names, strict=True))


def _per_model(value: object, models: tuple[Model, ...], sampling: Sampling) -> tuple[Model, ...]:
    """The models with their ``[per_model.<name>]`` settings (a table per model name, over the run's sampling)."""
    if not isinstance(value, dict):
        raise SpecError("per_model", f"must be a table of model names, got {show(value)}")
    names = [m.name for m in models]
    check_known(value, names, prefix="per_model.")
    out = []
    for m in models:
        table = value.get(m.name)
        if table is None:
            out.append(m)
            continue
        key = f"per_model.{m.name}"
        if not isinstance(table, dict):
            raise SpecError(key, f"must be a table, got {show(table)}")
        check_known(table, _PER_MODEL_KEYS, prefix=f"{key}.")
        own = {k: v for k, v in table.items() if k in ("temperature", "top_p", "top_k")}
        cap = check_cap(table["max_tokens"], f"{key}.max_tokens") if "max_tokens" in table else None
        thinking = _bool(table.get("thinking", m.thinking), f"{key}.thinking")
        close = table.get("think_close")
        if close is not None and (not isinstance(close, str) or not close or not thinking):
            raise SpecError(f"{key}.think_close", "must be a non-empty string, for a model with thinking = true")
        sampled = check_sampling(own, key, default=sampling) if own else None
        out.append(Model(m.path, m.name, sampled, cap, thinking, close))
    return tuple(out)


def _bool(value: object, key: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(key, f"must be true or false, got {show(value)}")
    return value


def _judges(value: object, models: tuple[Model, ...], base: Path | None) -> tuple[JudgeSpec, ...]:
    """``[judge]`` (one table) or ``[[judge]]`` (a non-empty list of tables, one per judge, names distinct)."""
    if not isinstance(value, list):
        return (_judge(value, models, base, "judge"),)
    if not value:
        raise SpecError("judge", "must not be an empty list")
    judges = tuple(_judge(v, models, base, f"judge[{i}]") for i, v in enumerate(value))
    names = [j.model.name for j in judges]
    if len(set(names)) != len(names):
        raise BadInputError(f"two judges share a name ({', '.join(names)}); give each its model_name")
    return judges


def _judge(value: object, models: tuple[Model, ...], base: Path | None, key: str) -> JudgeSpec:
    value = judge_table(value, key)
    if "model" in value:
        (model,) = _models({k: v for k, v in value.items() if k in ("model", "model_name")}, base, f"{key}.")
    else:
        model = models[0]
    return JudgeSpec(
        model=model,
        backend=_backend(value["backend"], f"{key}.backend") if "backend" in value else None,
        base_url=base_urls(value["base_url"], f"{key}.base_url") if "base_url" in value else (),
        max_tokens=value.get("max_tokens", 1024),
        retries=value.get("retries", 2),
        sampling=check_sampling(
            {k: v for k, v in value.items() if k in ("temperature", "top_p", "top_k")}, key, default=JUDGE_SAMPLING
        ),
        structured=value.get("structured", True),
        timeout_s=float(value["timeout_s"]) if "timeout_s" in value else None,
        max_retries=value.get("max_retries"),
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
    check_known(data, _KEYS)
    for key in ("model", "sequences"):
        if key not in data:
            raise SpecError(key, "is required")
    models = _models(data, base)
    chains = resolve_sequences(_strs(data["sequences"], "sequences"))
    sources = {c.source for c in chains}
    if len(sources) != 1:
        raise BadInputError(f"all sequences must start from one source language, got {', '.join(sorted(sources))}")
    seed = check_seed(data.get("seed", 0))
    sample = _int(data["sample"], "sample") if "sample" in data else None
    k = _int(data.get("sentences_per_text", 1), "sentences_per_text", 1, 1000)
    texts_source = _strs(data.get("texts", "flores:devtest"), "texts")[0]
    texts = load_texts(
        texts_source,
        lang=chains[0].source,
        sentences_per_text=k,
        sample=sample,
        seed=seed,
        data_dir=data_dir,
        base=base,
    )
    version = _strs(data.get("prompt_version", DEFAULT_VERSION), "prompt_version")[0]
    sha = None
    if "prompts" in data:
        if "prompt_version" in data:
            raise BadInputError("give prompts (a file) or prompt_version (a packaged one), not both")
        given = Path(_strs(data["prompts"], "prompts")[0])
        version, sha = prompt_file(base / given if base and not given.is_absolute() else given)
    load_templates(version)
    for table in ("sampling", "engine", "server"):
        if table in data and not isinstance(data[table], dict):
            raise SpecError(table, f"must be a table, got {show(data[table])}")
    sampling = check_sampling(data.get("sampling", {}), "sampling")
    if "thinking" in data:
        models = tuple(replace(m, thinking=_bool(data["thinking"], "thinking")) for m in models)
    if "per_model" in data:
        models = _per_model(data["per_model"], models, sampling)
    return RoundtripSpec(
        name=_strs(data.get("name", "roundtrip"), "name")[0],
        models=models,
        texts_source=texts_source,
        texts=tuple(texts),
        sequences=chains,
        judges=_judges(data.get("judge", {}), models, base),
        max_tokens=check_cap(data.get("max_tokens", 1024), "max_tokens"),
        seed=seed,
        sample=sample,
        sentences_per_text=k,
        backend=_backend(data["backend"], "backend") if "backend" in data else None,
        prompt_version=version,
        sampling=sampling,
        engine=dict(data.get("engine", {})),
        server=server_options(data["server"]) if "server" in data else None,
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
