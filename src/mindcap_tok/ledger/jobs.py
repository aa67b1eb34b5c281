"""Generation job specs: a TOML file naming the model, the cells, the design and the caps, expanded into shards.

A spec (see ``examples/jobs/``)::

    name = "qwen3-replay"
    model = "Qwen/Qwen3-8B"          # HF id or local folder
    model_name = "qwen3-8b"           # the ledger's `model` column (default: registry name or folder name)
    arms = ["native", "translate-act"]
    langs = ["deu_Latn", "tha_Thai"]
    items = "all"                     # or a list of item indices, or {sample = 50, seed = 1}
    k = 8
    design = "replay"                 # replay | independent | announcement
    caps = [4096]                     # replay: one cap; independent: the budget grid; announcement: the enforced cap
    seed = 0
    shard_size = 250                  # requests (prompts) per shard; a shard never mixes cells or caps

    [sampling]                        # temperature, top_p, top_k
    [premiums]                        # independent design: lang = r; adds the caps floor(r·B) for `scaled_arms`
    # or, instead of the table, premiums = "flores": measured with the spec's tokenizer on FLORES-200 devtest
    [announce]                        # announcement design: budgets = [...], style = "natural" | "tag"
    [forcing]                         # enabled, text = "\\n####", max_tokens = 16, unanswered = false
    [engine]                          # passed through to the backend (vLLM: tensor_parallel_size, dtype, ...)

Seeds: each request (one prompt, ``k`` samples) gets ``seed = H(spec seed, model, arm, lang, design, cap,
announced, item)`` (SHA-256, 31 bits), so seeds vary by cap and no two budgets replay one trajectory; they do
not depend on shard size or order, so a resumed run reproduces an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from fractions import Fraction
from pathlib import Path

from ..data.languages import resolve_language
from ..data.mgsm import N_ITEMS
from ..errors import MindcapError
from ..premium import scale_budget
from ..tokenizer import canonical_model_name
from .prompts import prompt_languages
from .schema import ANNOUNCE_STYLES, ARMS, DESIGNS

_KEYS = {
    "name",
    "model",
    "model_name",
    "tokenizer",
    "arms",
    "langs",
    "items",
    "k",
    "design",
    "caps",
    "seed",
    "shard_size",
    "prompt_version",
    "sampling",
    "premiums",
    "scaled_arms",
    "announce",
    "forcing",
    "engine",
}


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters shared by every request of a job."""

    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20


@dataclass(frozen=True)
class Forcing:
    """Budget forcing: when a decode hits its cap, append ``text`` and decode greedily to the end of the line.

    ``unanswered`` also forces decodes that stopped by themselves without a strict answer line (the paper's
    second forced population); their end-of-turn token is dropped before the forcing text.
    """

    enabled: bool = False
    text: str = "\n####"
    max_tokens: int = 16
    unanswered: bool = False


@dataclass(frozen=True)
class JobSpec:
    """A parsed, checked generation job (see the module docs for the file format)."""

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
    seed: int = 0
    shard_size: int = 250
    prompt_version: str = "mgsm-v1"
    sampling: Sampling = field(default_factory=Sampling)
    premiums: dict[str, float | Fraction] = field(default_factory=dict)
    scaled_arms: tuple[str, ...] = ("native",)
    announce_budgets: tuple[int, ...] = ()
    announce_style: str = "natural"
    forcing: Forcing = field(default_factory=Forcing)
    engine: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """Plain data (JSON-ready), stored with the output; a measured premium is kept exact as ``"tokens/ref"``."""
        out = asdict(self)
        out["premiums"] = {lang: str(r) if isinstance(r, Fraction) else r for lang, r in self.premiums.items()}
        return out


@dataclass(frozen=True)
class Request:
    """One prompt of a job: ``k`` samples of (arm, lang, item) under ``cap``, with an optional announced budget."""

    arm: str
    lang: str
    item: int
    cap: int
    announced: int | None
    seed: int


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
        forcing = self.spec.forcing
        extra = len(forcing.text.encode("utf-8")) + forcing.max_tokens if forcing.enabled else 0
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


def _int_list(value, what: str) -> tuple[int, ...]:
    values = [value] if isinstance(value, int) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, int) and v > 0 for v in values):
        raise MindcapError(f"{what} must be a positive integer or a non-empty list of them, got {value!r}")
    return tuple(values)


def _items(value) -> tuple[int, ...]:
    if value == "all":
        return tuple(range(N_ITEMS))
    if isinstance(value, dict):
        if set(value) - {"sample", "seed"} or not isinstance(value.get("sample"), int):
            raise MindcapError(f"items = {value!r}: a sample is {{sample = N, seed = S}}")
        n, seed = value["sample"], value.get("seed", 0)
        if not 0 < n <= N_ITEMS:
            raise MindcapError(f"items sample must be 1..{N_ITEMS}, got {n}")
        return tuple(sorted(random.Random(seed).sample(range(N_ITEMS), n)))
    if isinstance(value, list) and value and all(isinstance(v, int) and 0 <= v < N_ITEMS for v in value):
        if len(set(value)) != len(value):
            raise MindcapError("items lists an item twice")
        return tuple(value)
    raise MindcapError(f"items must be 'all', a list of item indices 0..{N_ITEMS - 1} or {{sample, seed}}")


def _default_model_name(model: str) -> str:
    canonical = canonical_model_name(model) or canonical_model_name(model.rsplit("/", 1)[-1])
    return canonical or Path(model.rstrip("/")).name


def parse_spec(
    data: dict,
    base: Path | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
) -> JobSpec:
    """Check a spec's plain data (as read from TOML) and return a :class:`JobSpec`.

    A relative local model folder is resolved against ``base`` (the spec file's folder) when it exists there.
    ``premiums = "flores"`` reads FLORES under ``data_dir`` and the tokenizer from ``tokenizers_dir`` (default:
    the configured ones).
    """
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise MindcapError(f"job spec: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    for key in ("model", "arms", "langs", "design"):
        if key not in data:
            raise MindcapError(f"job spec lacks {key!r}")
    model = str(data["model"])
    if base is not None and not Path(model).is_absolute() and (base / model).is_dir():
        model = str((base / model).resolve())
    design = data["design"]
    if design not in DESIGNS:
        raise MindcapError(f"job spec: design {design!r}; use one of {', '.join(DESIGNS)}")
    arms = tuple(data["arms"]) if isinstance(data["arms"], list) else (data["arms"],)
    for arm in arms:
        if arm not in ARMS:
            raise MindcapError(f"job spec: unknown arm {arm!r}; use one of {', '.join(ARMS)}")
    langs = tuple(resolve_language(x) for x in (data["langs"] if isinstance(data["langs"], list) else [data["langs"]]))
    version = str(data.get("prompt_version", "mgsm-v1"))
    covered = prompt_languages(version)
    for lang in langs:
        if lang not in covered:
            raise MindcapError(f"job spec: prompt version {version} has no {lang}; it covers {', '.join(covered)}")
    default_caps = {"replay": 4096, "announcement": 2048}
    caps = _int_list(data.get("caps", default_caps.get(design)), "caps")
    if design != "independent" and len(caps) != 1:
        raise MindcapError(f"job spec: the {design} design takes one cap, got {list(caps)}")
    k = data.get("k", 8)
    shard_size = data.get("shard_size", 250)
    for key, value in (("k", k), ("shard_size", shard_size)):
        if not isinstance(value, int) or value < 1:
            raise MindcapError(f"job spec: {key} must be a positive integer, got {value!r}")
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or seed < 0:
        raise MindcapError(f"job spec: seed must be a non-negative integer, got {seed!r}")
    try:
        sampling = Sampling(**data.get("sampling", {}))
        forcing = Forcing(**data.get("forcing", {}))
    except TypeError as exc:
        raise MindcapError(f"job spec: {exc}") from exc
    _check_types(sampling, "sampling")
    _check_types(forcing, "forcing")
    if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
        raise MindcapError("job spec: temperature must be >= 0 and top_p in (0, 1]")
    model_name = data.get("model_name") or _default_model_name(model)
    tokenizer = str(data.get("tokenizer", model_name))
    if data.get("premiums") and design != "independent":
        raise MindcapError("job spec: premiums (scaled caps) apply to the independent design only")
    premiums = _premiums(data.get("premiums", {}), tokenizer, langs, data_dir, tokenizers_dir)
    if any(r <= 0 for r in premiums.values()):
        raise MindcapError("job spec: premiums must be positive")
    announce = data.get("announce", {})
    if not isinstance(announce, dict):
        raise MindcapError(f"job spec: [announce] must be a table, got {announce!r}")
    if set(announce) - {"budgets", "style"}:
        raise MindcapError(f"job spec: [announce] takes budgets and style, got {', '.join(sorted(announce))}")
    budgets = _int_list(announce["budgets"], "announce.budgets") if "budgets" in announce else ()
    style = announce.get("style", "natural")
    if style not in ANNOUNCE_STYLES or style == "none":
        raise MindcapError(f"job spec: announce.style must be 'natural' or 'tag', got {style!r}")
    if (design == "announcement") != bool(budgets):
        raise MindcapError("job spec: the announcement design needs [announce] budgets, and only it takes them")
    scaled_arms = tuple(data.get("scaled_arms", ["native"]))
    if set(scaled_arms) - set(ARMS):
        raise MindcapError(f"job spec: scaled_arms {list(scaled_arms)}; arms are {', '.join(ARMS)}")
    name = str(data.get("name", model_name + "-" + design))
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise MindcapError(f"job spec: name {name!r} must be letters, digits, '.', '_' or '-' (it names a file)")
    return JobSpec(
        name=name,
        model=model,
        model_name=model_name,
        tokenizer=tokenizer,
        arms=arms,
        langs=langs,
        items=_items(data.get("items", "all")),
        k=k,
        design=design,
        caps=caps,
        seed=seed,
        shard_size=shard_size,
        prompt_version=version,
        sampling=sampling,
        premiums=premiums,
        scaled_arms=scaled_arms,
        announce_budgets=budgets,
        announce_style=style,
        forcing=forcing,
        engine=dict(data.get("engine", {})),
    )


def _premiums(value, tokenizer: str, langs: tuple[str, ...], data_dir, tokenizers_dir) -> dict[str, float | Fraction]:
    """``{lang: r}`` typed in the spec, or ``"flores"``: each language's premium measured with the job's own
    tokenizer on FLORES-200 devtest by :func:`mindcap_tok.premium.premium`, kept as the exact token ratio so
    that floor(r·B) matches what the statistics later compute from the same tokenizer."""
    if value == "flores":
        from ..data.flores import flores_source
        from ..premium import premium
        from ..tokenizer import load_tokenizer

        tok = load_tokenizer(tokenizer, tokenizers_dir)
        return {p.lang: p.ratio for p in premium(tok, langs, n_boot=1, source=flores_source(data_dir))}
    if not isinstance(value, dict):
        raise MindcapError(f'job spec: premiums must be a table (lang = r) or "flores", got {value!r}')
    bad = {lang: r for lang, r in value.items() if isinstance(r, bool) or not isinstance(r, int | float)}
    if bad:
        raise MindcapError(f"job spec: premiums must be numbers, got {bad}")
    return {resolve_language(lang): float(r) for lang, r in value.items()}


def _check_types(table, what: str) -> None:
    """Each field of a spec table (``Sampling``, ``Forcing``) must have its default's type (an int passes for a
    float): TOML's ``enabled = "false"`` is a string, and a truthy one."""
    for f in fields(table):
        value, want = getattr(table, f.name), type(f.default)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not (number if want is float else type(value) is want):
            raise MindcapError(f"job spec: {what}.{f.name} must be of type {want.__name__}, got {value!r}")


def load_spec(
    path: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
) -> JobSpec:
    """Read and check a TOML job spec (``data_dir``, ``tokenizers_dir``: as for :func:`parse_spec`)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise MindcapError(f"cannot read job spec {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise MindcapError(f"job spec {path} is not valid TOML: {exc}") from exc
    return parse_spec(data, path.resolve().parent, data_dir=data_dir, tokenizers_dir=tokenizers_dir)


def request_seed(spec: JobSpec, arm: str, lang: str, cap: int, announced: int | None, item: int) -> int:
    """The seed of one request: a hash of the spec seed and everything that names the request (31 bits)."""
    key = f"{spec.seed}|{spec.model_name}|{arm}|{lang}|{spec.design}|{cap}|{announced}|{item}"
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


def caps_for(spec: JobSpec, arm: str, lang: str) -> list[int]:
    """The caps of one (arm, lang): the grid, plus floor(r·B) for premium-scaled arms (sorted, unique)."""
    caps = set(spec.caps)
    if arm in spec.scaled_arms and lang in spec.premiums:
        caps |= {scale_budget(spec.premiums[lang], b) for b in spec.caps}
    return sorted(c for c in caps if c > 0)


def plan_job(spec: JobSpec) -> Plan:
    """Expand a spec into shards: per (arm, lang, cap, announced) the items in chunks of ``shard_size``."""
    shards = []
    announced_values: tuple[int | None, ...] = spec.announce_budgets or (None,)
    for arm in spec.arms:
        for lang in spec.langs:
            for cap in caps_for(spec, arm, lang):
                for announced in announced_values:
                    reqs = [
                        Request(arm, lang, item, cap, announced, request_seed(spec, arm, lang, cap, announced, item))
                        for item in spec.items
                    ]
                    tag = f"cap{cap}" + (f"-ann{announced}" if announced is not None else "")
                    for start in range(0, len(reqs), spec.shard_size):
                        sid = f"{arm}/{lang}/{spec.design}-{tag}/{start // spec.shard_size:05d}"
                        shards.append(Shard(sid, tuple(reqs[start : start + spec.shard_size])))
    return Plan(spec, tuple(shards))
