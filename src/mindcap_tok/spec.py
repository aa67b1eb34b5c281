"""One spec layer: the types of user configuration, the rules of the keys they share, and the one way a refusal reads.

The spec types are frozen pydantic models (:class:`SpecModel`): the model of a file or table is the type the code
passes around, each default written once in it. Generation jobs (:class:`~mindcap_tok.generation.jobs.JobFile`,
read into a :class:`~mindcap_tok.generation.jobs.JobSpec`), round trips
(:class:`~mindcap_tok.roundtrip.spec.RoundtripFile`, :class:`~mindcap_tok.roundtrip.spec.RoundtripSpec`), their
``[sampling]`` (:class:`Sampling`), ``[server]`` (:class:`ServerSpec`, changed from the command line by
:class:`ServerOverrides`) and ``[judge]`` (:class:`JudgeTable`) tables, and protocol files
(:class:`~mindcap_tok.stats.protocol.ProtocolFile`) share the rules written here once:

- sampling: ``temperature`` finite and >= 0; ``top_p`` in (0, 1]; ``top_k`` -1 (no top-k) or in
  1..:data:`MAX_TOP_K` (``0``, which backends also read as "off", is refused so that "off" has one spelling); an
  int passes for a float and is kept as written (:data:`Number`);
- caps (output-token caps, announced budgets, ``max_tokens``): integers in 1..:data:`MAX_CAP`;
- seeds: integers in 0..:data:`MAX_SEED` (``true`` is no 1 and ``1.5`` no seed); :func:`seed_hash` derives every
  request's seed; bootstrap resamples at most :data:`MAX_RESAMPLES`, so that no value reaches an engine or an
  array size as an integer too large for a C integer;
- model names: non-empty strings; :func:`default_model_name` is the name records carry when none is given;
- a key that takes one value or a list of them (:func:`listed`), or one of several shapes (:func:`one_of`);
- unknown keys are refused, with the known keys of the table they are in listed;
- files: :func:`read_toml` reads a TOML file into plain data, refusing in one line a file that does not read, does
  not parse or nests tables and lists deeper than :data:`MAX_NESTING` levels.

Every refusal is a :class:`SpecError` (a :class:`~mindcap_tok.errors.BadInputError`; ``key``: dotted path,
``problem``) reading ``key: problem``, whether the value came from a file (:func:`validate`) or was built in code
(a model's constructor names its ``table``); a reader names its file in front with :func:`reading` (the error's
``source``): ``job.toml: sampling.temperature: must be of type float (finite), got 'hot'``.

Why pydantic (v2, strict mode) rather than msgspec: pydantic is already a core dependency (the server
backend validates replies with it), so the layer adds nothing to install; its strict mode refuses every
coercion (a bool for an int, ``"4"`` for 4, ``1.5`` for an int) and ``allow_inf_nan=False`` refuses NaN and
infinities, where hand-written ``isinstance`` checks let ``True`` pass as 1; and its errors carry the location
and input of each problem, from which :func:`_problem` writes our one-line messages. msgspec decodes faster,
but specs are a few lines read once per run, and it would be a second validation library beside pydantic.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import reprlib
import sys
import tomllib
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar, Union, cast, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from ._io import regular_file
from .errors import BadInputError, MindcapError, first_line, locate
from .tokenization.registry import canonical_model_name, registry_model_name

#: The largest output-token cap, announced budget or premium-scaled cap floor(r·B). The paper's budgets stop at
#: 4,096 and no model decodes a million tokens in one request; a larger value is a typo, refused before it reaches
#: the engine, the worst-case token count or the ledger's int64 ``cap`` column.
MAX_CAP = 1 << 20
#: The largest seed: a seed is handed to engines as a C long (and stored in JSON as a 64-bit integer).
MAX_SEED = (1 << 63) - 1
#: The largest ``top_k``: engines take it as a C int; no vocabulary comes near it.
MAX_TOP_K = (1 << 31) - 1
#: The most bootstrap resamples a protocol may ask for: 100 times the paper's 10,000; more is a typo that would
#: allocate arrays of that many rows.
MAX_RESAMPLES = 1_000_000
_T = TypeVar("_T")
_Model = TypeVar("_Model", bound=BaseModel)
#: How deep tables and lists may nest in a spec or task file: real files nest a few levels; a file nested
#: thousands of levels deep would exhaust the parser's (and every later reader's) recursion.
MAX_NESTING = 100
ENDPOINTS = ("completions", "chat")


class SpecError(BadInputError):
    """A refused configuration value: ``key`` (dotted path, ``""`` for the whole spec) and ``problem``."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key else problem, key=key)
        self.problem = problem


@contextmanager
def reading(source: object) -> Iterator[None]:
    """Name ``source`` (the file, or what was read) in front of every error raised inside whose kind takes one
    (:func:`~mindcap_tok.errors.locate`; a missing extra or a backend failure stands alone)."""
    try:
        yield
    except MindcapError as exc:
        locate(exc, source)
        raise


#: the repr of tables and lists in messages: a few levels and items of them (a whole repr may be huge, or too deep
#: for the interpreter to write)
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 4, 60, 60


def show(value: object) -> str:
    """A short one-line repr of ``value`` for an error message (booleans as TOML writes them)."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, int) and value.bit_length() > 192:  # its repr is long, past 4,300 digits refused
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    else:
        text = _SHORT.repr(value) if isinstance(value, dict | list | tuple | set) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def nesting_depth(value: object) -> int:
    """How many tables and lists nest in ``value`` (a scalar: 0), walked without recursion; a structure that
    holds itself (a YAML alias) nests without end (``sys.maxsize``). A shared part is measured once."""
    heights: dict[int, int] = {}
    open_: set[int] = set()  # entered, not yet measured: the ancestors of the node in hand
    stack: list[tuple[object, bool]] = [(value, False)]
    while stack:
        node, measured = stack.pop()
        if not isinstance(node, dict | list) or (not measured and id(node) in heights):
            continue
        if not measured and id(node) in open_:
            return sys.maxsize
        children = [c for c in (node.values() if isinstance(node, dict) else node) if isinstance(c, dict | list)]
        if measured:
            open_.discard(id(node))
            heights[id(node)] = 1 + max((heights[id(c)] for c in children), default=0)
        else:
            open_.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children)
    return heights.get(id(value), 0)


def check_nesting(value: _T, what: str = "the file") -> _T:
    """``value`` when its tables and lists nest at most :data:`MAX_NESTING` deep, else a :class:`BadInputError`."""
    if nesting_depth(value) > MAX_NESTING:
        raise BadInputError(f"{what} nests tables or lists more than {MAX_NESTING} levels deep")
    return value


def parse_toml(text: str, source: object, *, what: str = "file") -> dict:
    """The plain data of TOML ``text`` (read from ``source``), else a one-line :class:`BadInputError` naming it:
    invalid TOML, or nesting past :data:`MAX_NESTING` (which the parser may find first, as a recursion)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"{what} {source} is not valid TOML: {exc}") from exc
    except ValueError as exc:  # an integer past Python's digit limit
        raise BadInputError(f"{what} {source} is not valid TOML: {first_line(exc)}") from exc
    except RecursionError:
        raise BadInputError(f"{what} {source} nests tables or lists more than {MAX_NESTING} levels deep") from None
    return check_nesting(data, f"{what} {source}")


def read_toml(path: str | os.PathLike[str], what: str) -> dict:
    """The plain data of the TOML file at ``path`` (``what`` names it in errors: ``task file``, ``job spec``);
    a file that cannot be read, is not UTF-8, not TOML or nested too deep is refused in one line."""
    try:
        text = regular_file(path, what).read_text("utf-8")
    except OSError as exc:
        raise BadInputError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{what} {path} is not UTF-8 text: {exc}") from exc
    return parse_toml(text, path, what=what)


def check_known(table: Mapping, known: Iterable[str], *, prefix: str = "") -> None:
    """Refuse the first key of ``table`` (in sorted order) that is not in ``known``."""
    known = list(known)
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise SpecError(prefix + str(unknown[0]), f"unknown key; known: {', '.join(sorted(known))}")


def int_range(value: int, low: int, *, high: int | None = None) -> int:
    """``value`` when in ``low..high`` (the problem text of every integer range)."""
    if value < low or (high is not None and value > high):
        bound = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"must be an integer {bound}, got {value}")
    return value


def between(low: int, high: int | None = None) -> AfterValidator:
    return AfterValidator(lambda v: int_range(v, low, high=high))


def rule(holds: Callable[[Any], Any], problem: str, *, number: bool = False) -> AfterValidator:
    """A rule on a value; ``problem`` (formatted with the value; with ``number``, as a float) names its breach."""

    def validate(value: Any) -> Any:
        if not holds(value):
            raise ValueError(problem.format(float(value) if number else value))
        return value

    return AfterValidator(validate)


def _as_written(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A float setting: an int passes and is kept as written (``temperature = 1`` is stored as 1)."""
    checked = handler(value)
    return value if type(value) is int else checked


def listed(value: Any) -> Any:
    """A single value standing for a list of one."""
    return value if isinstance(value, list | tuple) else [value]


_KINDS: dict[type, str] = {bool: "bool", int: "integer", float: "number", str: "word", list: "list", dict: "table"}


#: the shapes a key of several may take (see :func:`one_of`): a member of the union is tagged with its shape
WORD, INTEGER, LIST, TABLE = Tag("<word>"), Tag("<integer>"), Tag("<list>"), Tag("<table>")


def one_of(description: str) -> Discriminator:
    """The discriminator of a key that takes one of several shapes (``Annotated[A | B, one_of(...)]``, each
    member tagged last :data:`WORD`, :data:`INTEGER`, :data:`LIST` or :data:`TABLE`), told apart by the kind of the
    value as written; a value of another kind is refused as ``must be <description>, got <value>``."""

    def kind(value: Any) -> str | None:
        shape = _KINDS.get(type(value))
        return f"<{shape}>" if shape else None

    return Discriminator(kind, custom_error_type="shape", custom_error_message=f"must be {description}")


#: a float setting that keeps an int as written (see :func:`_as_written`)
Number = Annotated[float, WrapValidator(_as_written)]
Cap = Annotated[int, between(1, MAX_CAP)]
#: one cap or a non-empty list of them
Caps = Annotated[list[Cap], BeforeValidator(listed), Field(min_length=1)]
Seed = Annotated[int, between(0, MAX_SEED)]
ModelName = Annotated[str, rule(lambda v: bool(v.strip()), "must not be empty")]
#: one non-empty string or a non-empty list of them
Names = Annotated[list[ModelName], BeforeValidator(listed), Field(min_length=1)]
Temperature = Annotated[Number, rule(lambda v: v >= 0, "must be >= 0, got {}", number=True)]
TopP = Annotated[Number, rule(lambda v: 0 < v <= 1, "must be in (0, 1], got {}", number=True)]
TopK = Annotated[
    int, rule(lambda v: v == -1 or 1 <= v <= MAX_TOP_K, f"must be -1 (no top-k) or in 1..{MAX_TOP_K}, got {{}}")
]
Retries = Annotated[int, between(0, 100)]
#: a deadline in seconds (a request to a server: ``timeout_s``); finite (the tables refuse inf and nan)
Timeout = Annotated[float, rule(lambda v: v > 0, "must be > 0, got {}")]
#: a protocol's family-wise error rate, its bootstrap resamples (the level's minimum is checked apart, see
#: :func:`mindcap_tok.resample.check_resamples`) and its p-value tail factor
Alpha = Annotated[float, rule(lambda v: 0 < v < 1, "must be in (0, 1), got {}")]
Resamples = Annotated[int, between(2, MAX_RESAMPLES)]
TailFactor = Annotated[float, rule(lambda v: v >= 1, "must be >= 1, got {}")]

_TYPES = {
    "int_type": "int",
    "float_type": "float (finite)",
    "finite_number": "float (finite)",
    "string_type": "string",
    "bool_type": "bool",
    "list_type": "list",
}


def _model_at(kind: object, loc: tuple) -> type[BaseModel] | None:
    """The model of the table at ``loc`` inside ``kind`` (through fields, optional values, the shapes of
    :func:`one_of`, and the values of dicts and lists of models), or ``None`` when it is no model."""
    current: object = kind
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            if part not in current.model_fields:
                return None
            current = current.model_fields[part].annotation
            continue
        if isinstance(part, str) and part.startswith("<"):
            current = _shape(current, part)
            continue
        current = _unwrap(current)
        origin = get_origin(current)
        if origin is dict:
            current = get_args(current)[1]
        elif origin in (list, tuple):
            current = get_args(current)[0]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _shape(kind: object, tag: str) -> object:
    """The member of a :func:`one_of` union that ``tag`` names (``None``: none)."""
    while get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    for member in get_args(kind):
        if get_origin(member) is Annotated and any(getattr(m, "tag", None) == tag for m in member.__metadata__):
            return get_args(member)[0]
    return None


def _unwrap(kind: object) -> object:
    """``kind`` without ``Annotated`` and ``| None``."""
    while True:
        if get_origin(kind) is Annotated:
            kind = get_args(kind)[0]
        elif get_origin(kind) in (Union, types.UnionType):
            kept = [a for a in get_args(kind) if a is not type(None)]
            if len(kept) != 1:
                return kind
            kind = kept[0]
        else:
            return kind


def _known(model: type[BaseModel]) -> list[str]:
    """The keys of ``model``'s table, as the file spells them."""
    return [f.alias or name for name, f in model.model_fields.items()]


def _problem(err: Mapping, known: Iterable[str]) -> str:
    """Our wording of one pydantic error (``known``: the keys of the table it was found in)."""
    kind = err["type"]
    if kind == "value_error":
        return str(err["ctx"]["error"])
    if kind == "extra_forbidden":
        return f"unknown key; known: {', '.join(sorted(known))}"
    if kind in _TYPES:
        return f"must be of type {_TYPES[kind]}, got {show(err['input'])}"
    if kind == "shape":
        return f"{err['msg']}, got {show(err['input'])}"
    if kind in ("model_type", "dict_type"):
        return f"must be a table, got {show(err['input'])}"
    if kind == "missing":
        return "is required"
    if kind == "too_short" and err["ctx"].get("min_length") == 1:
        return "must not be an empty list"
    return err["msg"][:1].lower() + err["msg"][1:]


def _key(prefix: str, loc: tuple, given: object) -> str:
    """The dotted path of ``loc`` in ``given`` (the data as written): a list's element by its index, except where a
    single value stood for a list of one."""
    parts = []
    for part in loc:
        if isinstance(part, str) and part.startswith("<"):  # the shape a value took (see one_of)
            continue
        if isinstance(part, int):
            if isinstance(given, list | tuple):
                parts.append(f"[{part}]")
                given = given[part] if part < len(given) else None
            continue
        parts.append(f".{part}")
        given = given.get(part) if isinstance(given, dict) else None
    path = "".join(parts)
    return prefix + path if prefix else path.lstrip(".")


def _refusal(model: type[BaseModel], exc: ValidationError, key: str, given: object = None) -> SpecError:
    """The first problem ``exc`` found in ``given`` (the table ``model`` read, at ``key``), in our words."""
    err = exc.errors()[0]
    table = _model_at(model, tuple(err["loc"][:-1])) or model
    return SpecError(_key(key, err["loc"], given), _problem(err, _known(table)))


def validate(model: type[_Model], table: object, *, key: str) -> _Model:
    """``table`` checked by ``model`` (strict: no coercion, no unknown keys), else a :class:`SpecError`;
    ``key`` is the table's dotted path (``""``: the whole file)."""
    if not isinstance(table, dict):
        raise SpecError(key, f"must be a table, got {show(table)}")
    try:
        return model.model_validate(table)
    except ValidationError as exc:
        raise _refusal(model, exc, key, table) from None


def validated_table(model: type[BaseModel], table: object, *, key: str) -> dict[str, Any]:
    """``table`` as given, once ``model`` has checked it (see :func:`validate`)."""
    if not isinstance(table, dict):
        raise SpecError(key, f"must be a table, got {show(table)}")
    validate(model, table, key=key)
    return table


_ADAPTERS: dict[object, TypeAdapter[Any]] = {}


def check(kind: Any, value: object, *, key: str) -> Any:
    """One value checked against a shared rule (``Cap``, ``Seed``, ``ModelName``, ...), else a :class:`SpecError`."""
    adapter = _ADAPTERS.setdefault(kind, TypeAdapter(kind, config=ConfigDict(strict=True, allow_inf_nan=False)))
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        table = _model_at(kind, tuple(err["loc"][:-1]))
        raise SpecError(_key(key, err["loc"], value), _problem(err, _known(table) if table else ())) from None


def check_model(value: object, key: str = "model") -> str:
    """A model (path, HF id or registry name) or the name records carry: a non-empty string."""
    return check(ModelName, value, key=key)


def default_model_name(model: str) -> str:
    """The records' name of a model: its registry name; for a Hugging Face id that is not a local folder, the
    registry name only where it is the registry model's own id (another organisation's copy keeps its id, as
    imports store it); for a local folder, the registry name its folder name gives, else the folder name."""
    known = registry_model_name(model)
    if known is not None:
        return known
    if "/" in model.rstrip("/") and not Path(model).exists():
        return model
    folder = Path(model.rstrip("/")).name
    return canonical_model_name(folder) or folder


def seed_hash(*parts: object, sep: str = "\x1f") -> int:
    """A request's seed: 31 bits of the SHA-256 of ``parts`` joined by ``sep`` (independent of order and batching)."""
    digest = hashlib.sha256(sep.join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


# -- the spec types ----------------------------------------------------------------------------------------------


class SpecModel(BaseModel):
    """A spec type: frozen, strict (no coercion), no unknown keys, no NaN or infinities. A value built in code is
    checked by the same rules as one read from a file, and refused as a :class:`SpecError` naming ``table.key``
    (``table``: the class's table name)."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)
    #: the table's name in a spec file, in front of a refused key of a value built in code (``""``: none)
    table: ClassVar[str] = ""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _refusal(type(self), exc, self.table, data) from None

    # reading a file (model_validate, a nested table) keeps pydantic's own path: its errors name the whole key
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]  # pydantic's mark of a non-custom __init__


class Sampling(SpecModel):
    """Sampling parameters shared by every request of a job (or of a judge): the ``[sampling]`` table."""

    table: ClassVar[str] = "sampling"
    temperature: Temperature = 0.6
    top_p: TopP = 0.95
    top_k: TopK = 20


_ENV_NAME = "must name an environment variable, got {!r}"


#: the URLs of a server: one ``http(s)://`` URL or a non-empty list of them, trailing slashes dropped, each once
BaseUrls = Annotated[
    tuple[
        Annotated[
            ModelName,
            AfterValidator(lambda v: v.strip().rstrip("/")),
            rule(
                lambda v: re.fullmatch(r"https?://[^\s/]+(/\S*)?", v),
                "must be an http:// or https:// URL (e.g. http://localhost:8000/v1), got {!r}",
            ),
        ],
        ...,
    ],
    BeforeValidator(lambda v: tuple(listed(v))),
    Field(min_length=1),
    rule(lambda v: len(set(v)) == len(v), "lists a URL twice"),
]


def base_urls(value: object, key: str) -> tuple[str, ...]:
    """Server URLs (see :data:`BaseUrls`) given apart from a table (``key``: where, e.g. ``--base-url``)."""
    return tuple(check(BaseUrls, value, key=key))


class ServerSpec(SpecModel):
    """How the ``server`` backend reaches an OpenAI-compatible server (the ``[server]`` table).

    ``base_url``: one or more URLs as the OpenAI client takes them (``http://host:8000/v1``); requests are spread
    over them. ``api_key_env`` names the environment variable holding the key (never the key itself).
    ``concurrency``: requests in flight per URL. ``model``: the served model name (``""``: the job's
    ``model``). ``endpoint``: ``completions`` (prompt built locally, sent as ids) or ``chat`` (server-side
    template). ``logprob_ids``: also ask for the ids through logprobs (vLLM before 0.10.2).
    ``reasoning_effort``: sent as the request's ``reasoning_effort`` (a hosted reasoning API's thinking level,
    e.g. ``low``, ``high``); empty: not sent. ``timeout_s``: the deadline of each attempt of a request, the
    whole exchange (connect, send, headers, body); 600 s leaves room for long generations on a loaded server.
    ``max_retries``: further attempts of a request that timed out or failed in a way worth retrying.
    """

    table: ClassVar[str] = "server"
    base_url: BaseUrls = ()
    api_key_env: Annotated[str, rule(lambda v: re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v), _ENV_NAME)] = ""
    concurrency: Annotated[int, between(1, 4096)] = 8
    timeout_s: Timeout = 600.0
    max_retries: Retries = 5
    model: ModelName = ""
    endpoint: Annotated[str, rule(lambda v: v in ENDPOINTS, f"must be one of {', '.join(ENDPOINTS)}, got {{!r}}")] = (
        "completions"
    )
    logprob_ids: bool = False
    reasoning_effort: Annotated[
        str, rule(lambda v: re.fullmatch(r"[a-z_]*", v), "must be a word such as low or high, got {!r}")
    ] = ""


def refuse_api_key(value: object, key: str = "server") -> None:
    """Refuse a ``[server]`` table holding a key itself (it names the environment variable that holds it)."""
    if isinstance(value, dict) and "api_key" in value:
        raise SpecError(
            f"{key}.api_key", "must not be in the file: put the key in an environment variable named by api_key_env"
        )


class ServerOverrides(SpecModel):
    """What the command line changes in how a server is reached: ``base_url`` (``--base-url``), ``timeout_s``
    (``--timeout``) and ``max_retries`` (``--max-retries``), each over a ``[server]`` table's (empty or ``None``:
    the table's); checked when applied, by the ``[server]`` table's rules."""

    model_config = ConfigDict(strict=False, frozen=True, extra="forbid")
    base_url: tuple[str, ...] = ()
    timeout_s: float | None = None
    max_retries: int | None = None

    def flags(self) -> list[str]:
        """The command-line flags of the replacements given."""
        given = (("--base-url", self.base_url), ("--timeout", self.timeout_s), ("--max-retries", self.max_retries))
        return [flag for flag, value in given if value not in ((), None)]

    def check_backend(self, backend: str, whose: str = "") -> None:
        """Refuse in one line any replacement given for a ``backend`` that is not the server backend (``whose``:
        what runs on it, e.g. ``the judge``, for the message)."""
        flags = self.flags()
        if flags and backend != "server":
            given = f"{' and '.join(flags)} {'is' if len(flags) == 1 else 'are'} for the server backend"
            raise BadInputError(f"{given}; {whose} runs on {backend}" if whose else f"{given}, not {backend}")

    def apply(self, server: ServerSpec | None) -> ServerSpec | None:
        """``server`` with the replacements (a default table when it is ``None`` and one is given), checked by
        the ``[server]`` table's rules."""
        if not self.flags():
            return server
        table: dict[str, Any] = {} if server is None else server.model_dump(exclude_unset=True)
        if self.base_url:
            table["base_url"] = base_urls(list(self.base_url), "--base-url")
        if self.timeout_s is not None:
            table["timeout_s"] = self.timeout_s
        if self.max_retries is not None:
            table["max_retries"] = self.max_retries
        return validate(ServerSpec, table, key="server")


# -- the [judge] table -------------------------------------------------------------------------------------------


class JudgeTable(SpecModel):
    """A round-trip spec's ``[judge]`` table as written: its model (one, or a list of one; default: the run's
    first model), backend (``""``: the run's), server URLs, cap, retries, sampling,
    ``structured`` and its server's ``timeout_s`` and ``max_retries`` (``None``: the ``[server]`` table's)."""

    table: ClassVar[str] = "judge"
    model: Names | None = None
    model_name: Names | None = None
    backend: str = ""
    base_url: BaseUrls = ()
    max_tokens: Cap = 1024
    retries: Retries = 2
    temperature: Temperature = 0.6
    top_p: TopP = 0.95
    top_k: TopK = 20
    structured: bool = True
    timeout_s: Timeout | None = None
    max_retries: Retries | None = None

    @property
    def sampling(self) -> Sampling:
        """The judge's sampling."""
        return Sampling(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)


# -- a protocol's B* ---------------------------------------------------------------------------------------------


class BstarRule(SpecModel):
    """A protocol's ``bstar = {from = [512, 1024], max_scaled = 4096}``: B* is the largest B in ``from`` whose
    premium-scaled budget floor(r·B) stays within ``max_scaled`` for every language of the protocol (paper §3)."""

    candidates: Annotated[list[Cap], Field(alias="from", min_length=1)]
    max_scaled: Cap


#: a protocol's B*: typed (a cap) or the rule table that computes it
Bstar = Annotated[
    Annotated[Cap, INTEGER] | Annotated[BstarRule, TABLE],
    one_of("a budget or a table {from = [512, 1024], max_scaled = 4096}"),
]


def check_bstar(value: object, key: str = "bstar") -> int | BstarRule:
    """A typed B* (a cap) or the rule table that computes it (:class:`BstarRule`)."""
    return cast(int | BstarRule, check(Bstar, value, key=key))


# -- token prices ------------------------------------------------------------------------------------------------

Price = Annotated[float, rule(lambda v: v >= 0, "must be >= 0, got {}")]
OutputPrice = Annotated[float, rule(lambda v: v > 0, "must be > 0, got {}")]


class _PriceTable(SpecModel):
    """One model's token prices in dollars per million tokens (``{input = 0.15, output = 0.6}``)."""

    input: Price
    output: OutputPrice


def check_prices(value: object, key: str = "prices") -> dict[str, tuple[float, float]]:
    """A ``[prices]`` table, model -> ``{input, output}`` dollars per million tokens, as model -> (input, output)."""
    if not isinstance(value, dict) or not value:
        raise SpecError(key, f"must be a non-empty table of models, got {show(value)}")
    out = {}
    for model, entry in value.items():
        validate(_PriceTable, entry, key=f"{key}.{model}")
        out[check_model(model, f"{key}.{model}")] = (float(entry["input"]), float(entry["output"]))
    return out
