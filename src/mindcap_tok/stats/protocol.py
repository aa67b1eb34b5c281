"""Protocol files: a test family declared (and frozen) before the data it governs exist.

A protocol is a TOML or YAML file naming the hypotheses, budgets, margins, α, resamples, seed and
premiums. :func:`freeze_protocol` records the SHA-256 of its bytes, and of every file it names (premium
JSON files; the ``tokenizer.json`` of a tokenizer named as premiums, see :func:`protocol_inputs`), in a
sidecar ``<file>.freeze.json`` and, when the file lies in a git repository, an annotated tag whose message
carries the same hashes (the paper's "internal freeze recorded as a git tag"). :func:`verify_protocol`
refuses a file whose bytes, or one of whose named files, no longer match, and :func:`run_protocol`
evaluates the family (see :mod:`.family`). Relative paths in a protocol are relative to its folder.

Example (TOML)::

    name = "qwen-bstar"
    model = "qwen3-8b"
    premiums = "qwen3-8b"          # a tokenizer name, a premium JSON file, or a table {de = 1.559, ...}
    alpha = 0.05
    n_boot = 10000
    seed = 0
    tail_factor = 1.3
    bstar = {from = [512, 1024], max_scaled = 4096}   # or typed: bstar = 1024

    [[hypotheses]]
    id = "H1-existence"
    kind = "delta"
    langs = ["de", "th", "sw"]
    budget = "bstar"               # B*, computed by the rule at the freeze and recorded there
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
from pydantic import ConfigDict, Field

from .._io import atomic_write_text, regular_file
from .._json import dumps_strict
from ..data.languages import resolve_language
from ..errors import BadInputError, DamagedDataError, MindcapError, SetupError, first_line, with_context
from ..resample import check_resamples, scale_budget
from ..spec import (
    LIST,
    MAX_NESTING,
    TABLE,
    WORD,
    Alpha,
    BstarRule,
    ModelName,
    Resamples,
    Seed,
    SpecModel,
    TailFactor,
    check_bstar,
    check_nesting,
    check_prices,
    one_of,
    parse_toml,
    reading,
    rule,
    validate,
)
from .announcement import DEFAULT_GATE, announcement_gate, gate_decisions
from .family import DEFAULT_OUTCOMES, FamilyResult, FamilyTests, Hypothesis, run_family
from .grid import FRAMES, accuracy_grid
from .premiums import PremiumTable, lookup_premium, resolve_premiums
from .roles import Arm

_Frame = Annotated[str, rule(lambda v: v in FRAMES, f"must be one of {', '.join(FRAMES)}, got {{!r}}")]
_Outcomes = Annotated[
    dict[str, str],
    rule(lambda v: set(v) <= set(DEFAULT_OUTCOMES), f"takes the keys {', '.join(DEFAULT_OUTCOMES)}, got {{}}"),
]
_Premiums = Annotated[
    Annotated[str, WORD] | Annotated[list[str], LIST] | Annotated[dict[str, Any], TABLE],
    one_of("a tokenizer name, a premium JSON file, a list of them or a table {lang = r}"),
]


class ProtocolFile(SpecModel):
    """A protocol file as written (see the module docs): each top-level key's type, rule and default. The
    hypotheses are read by :meth:`~.family.Hypothesis.from_dict`, ``bstar`` by :data:`~mindcap_tok.spec.Bstar`
    and ``prices`` by :func:`~mindcap_tok.spec.check_prices`."""

    name: str = ""
    description: str = ""
    frame: _Frame = "replay"
    model: ModelName | None = None
    premiums: _Premiums | None = None
    alpha: Alpha = 0.05
    n_boot: Resamples = 10_000
    seed: Seed = 0
    tail_factor: TailFactor = 1.0
    parser: str = "strict"
    outcomes: _Outcomes = Field(default_factory=dict)
    hypotheses: list[Any] = Field(default_factory=list)
    native: str | None = None
    translate: str | None = None
    bstar: Any = None
    prices: Any = None
    #: the median-length reduction an announcement must reach for a null about it to count (Appendix I)
    announcement_gate: Alpha = DEFAULT_GATE


class Protocol(SpecModel):
    """A parsed protocol file (defaults: :class:`ProtocolFile`'s)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str
    hypotheses: tuple[Hypothesis, ...]
    alpha: float
    n_boot: int
    seed: int
    tail_factor: float
    frame: str
    model: str | None
    premiums: str | list[str] | dict[str, Any] | None
    parser: str
    outcomes: dict[str, str]
    #: the compared arms when the file declares them (None: each task's native and comparator arm)
    native: str | None
    translate: str | None
    description: str
    #: B*, typed or computed from the file's ``bstar`` rule; ``budget = "bstar"`` in a hypothesis stands for it
    bstar: int | None
    #: token prices, model -> (input, output) dollars per million tokens (``mindcap-tok cost-grid --protocol``)
    prices: dict[str, tuple[float, float]] | None
    #: the median-length reduction an announcement must reach for a null about it to count (Appendix I)
    announcement_gate: float


def _read(path: Path) -> dict[str, Any]:
    try:
        text = regular_file(path, "protocol").read_text("utf-8")
    except OSError as exc:
        raise BadInputError(f"cannot read protocol {path}: {exc.strerror or exc}") from exc
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            return parse_toml(text, path, what="protocol")
        if suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
            if not isinstance(data, dict):
                raise BadInputError("a protocol must be a mapping at the top level", source=path)
            return check_nesting(data, f"protocol {path}")
    except RecursionError:
        raise BadInputError(f"protocol {path} nests mappings or lists more than {MAX_NESTING} levels deep") from None
    except ValueError as exc:
        raise BadInputError(f"not valid {suffix[1:].upper()}: {first_line(exc)}", source=path) from exc
    except Exception as exc:  # yaml.YAMLError; yaml is imported lazily
        if type(exc).__module__.startswith("yaml"):
            raise BadInputError(f"not valid YAML: {first_line(exc)}", source=path) from exc
        raise
    raise BadInputError("protocol files are .toml, .yaml or .yml", source=path)


def bstar_from_rule(rule: BstarRule, premiums: Sequence[Fraction | float]) -> int:
    """The largest B of ``rule.candidates`` with floor(r·B) <= ``rule.max_scaled`` for every premium r (§3)."""
    fits = [b for b in rule.candidates if all(scale_budget(r, b) <= rule.max_scaled for r in premiums)]
    if not fits:
        worst = max(premiums)
        raise BadInputError(
            f"bstar: no budget of {rule.candidates} keeps floor(r·B) <= {rule.max_scaled} at the largest "
            f"premium r = {float(worst):.4f}"
        )
    return max(fits)


def _languages(hyps: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every language a protocol's hypotheses name (``lang``, ``langs``, ``other``, the terms' ``lang``)."""
    out = []
    for h in hyps:
        langs = h.get("langs") or []
        for lang in [*([langs] if isinstance(langs, str) else langs), h.get("lang"), h.get("other")]:
            out.append(lang)
        out += [t.get("lang") for t in (h.get("a"), h.get("b")) if isinstance(t, Mapping)]
    return list(dict.fromkeys(resolve_language(x) for x in out if x))


def compute_bstar(
    path: str | Path, *, tokenizers_dir: str | Path | None = None, data_dir: str | Path | None = None
) -> int | None:
    """B* of the protocol at ``path``: typed, or computed by its ``bstar`` rule over its premiums for every language
    its hypotheses name (premiums as ``protocol test`` resolves them); None when the file declares none."""
    path = Path(path)
    raw = _read(path)
    with reading(path):
        setting = check_bstar(raw["bstar"]) if "bstar" in raw else None
    if not isinstance(setting, BstarRule):
        return setting
    model = raw.get("model")
    specs = [resolved for _, resolved in _premium_entries(raw.get("premiums"), path.parent)]
    langs = [c for c in _languages(raw.get("hypotheses") or []) if c != "eng_Latn"]
    table = resolve_premiums(
        specs, [model] if model else [], languages=langs, tokenizers_dir=tokenizers_dir, data_dir=data_dir
    )
    with reading(path):
        return bstar_from_rule(setting, [lookup_premium(table, str(model or ""), lang=lang) for lang in langs])


def _with_bstar(hyps: list[Any], bstar: Callable[[], int]) -> list[Any]:
    """The hypotheses with every ``"bstar"`` budget (``budget``, ``other_budget``, a term's ``budget``) replaced."""

    def swap(table: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(table)
        for key in ("budget", "other_budget"):
            if out.get(key) == "bstar":
                out[key] = bstar()
        return out

    return [
        {k: swap(v) if k in ("a", "b") and isinstance(v, Mapping) else v for k, v in swap(h).items()}
        if isinstance(h, Mapping)
        else h
        for h in hyps
    ]


def _declared_bstar(path: Path, raw: Mapping[str, Any], computed: int | None) -> Callable[[], int]:
    """B* as a hypothesis reads it: the typed value, ``computed``, or the one the freeze recorded."""

    def value() -> int:
        setting = check_bstar(raw["bstar"]) if "bstar" in raw else None
        if setting is None:
            raise BadInputError('a budget "bstar" needs a top-level bstar (a budget or a rule)', source=path)
        if not isinstance(setting, BstarRule):
            return setting
        if computed is not None:
            return computed
        sidecar = freeze_path(path)
        record = _read_record(sidecar) if sidecar.exists() else None
        recorded = record.bstar if record and record.sha256 == protocol_hash(path) else None  # this file's freeze
        if recorded is None:
            raise BadInputError(
                "bstar is computed from its rule when the protocol is frozen: run `mindcap-tok protocol freeze` first",
                source=path,
            )
        return recorded

    return value


def load_protocol(path: str | Path, *, bstar: int | None = None) -> Protocol:
    """Parse and validate a protocol file (unknown keys are errors).

    A ``bstar`` rule's value is ``bstar`` when given (see :func:`compute_bstar`), else the one its freeze recorded.
    """
    path = Path(path)
    raw = _read(path)
    with reading(path):
        given = validate(ProtocolFile, raw, key="")
        value = _declared_bstar(path, raw, bstar)
        if "bstar" in raw:
            value()  # a bad rule or a missing freeze is refused even when no hypothesis reads B*
        if not given.name:
            raise BadInputError("a protocol needs a name")
        if not given.hypotheses:
            raise BadInputError("declare at least one [[hypotheses]] entry")
        hyps = _with_bstar(given.hypotheses, value)
        defaults = {"model": given.model}
        try:
            proto = Protocol(
                name=given.name,
                hypotheses=tuple(Hypothesis.from_dict(h, defaults) for h in hyps),
                alpha=given.alpha,
                n_boot=given.n_boot,
                seed=given.seed,
                tail_factor=given.tail_factor,
                frame=given.frame,
                model=given.model,
                premiums=given.premiums,
                parser=given.parser,
                outcomes={**DEFAULT_OUTCOMES, **given.outcomes},
                native=given.native,
                translate=given.translate,
                description=given.description,
                bstar=value() if "bstar" in raw else None,
                prices=check_prices(given.prices) if given.prices is not None else None,
                announcement_gate=given.announcement_gate,
            )
        except (TypeError, ValueError) as exc:
            raise BadInputError(str(exc)) from exc
        try:
            check_resamples(proto.n_boot, 1 - proto.alpha, name="n_boot")
        except MindcapError as exc:
            raise BadInputError(f"{exc} (level = 1 - alpha)") from None
    return proto


def protocol_hash(path: str | Path) -> str:
    """SHA-256 of the protocol file's bytes (any edit, even whitespace, changes it)."""
    try:
        return hashlib.sha256(regular_file(path, "protocol").read_bytes()).hexdigest()
    except OSError as exc:
        raise BadInputError(f"cannot read protocol {path}: {exc.strerror or exc}") from exc


def _premium_entries(raw: str | Mapping[str, Any] | list[Any] | None, folder: str | Path) -> list[tuple[str, str]]:
    """(spec as written, spec with relative paths resolved against ``folder``) for each declared premium."""
    if raw is None:
        return []
    if isinstance(raw, Mapping):
        return [(f"{k}={v}",) * 2 for k, v in raw.items()]
    out = []
    for spec in [raw] if isinstance(raw, str) else [str(p) for p in raw]:
        local = Path(folder) / spec  # an absolute spec stays as it is
        resolved = str(local) if "=" not in spec and (spec.lower().endswith(".json") or local.exists()) else spec
        out.append((spec, resolved))
    return out


def protocol_premium_specs(proto: Protocol, folder: str | Path) -> list[str]:
    """The protocol's premiums as ``--premiums`` specs, relative paths resolved against ``folder`` (its folder).

    A spec is ``lang=r``, a premium JSON file (``*.json``) or a tokenizer (a name, a folder or a file).
    """
    return [resolved for _, resolved in _premium_entries(proto.premiums, folder)]


def protocol_inputs(
    path: str | Path, proto: Protocol | None = None, *, tokenizers_dir: str | Path | None = None
) -> dict[str, str]:
    """SHA-256 of every file the protocol reads besides itself, keyed by the name the protocol gives it.

    Premium JSON files are hashed as bytes; a tokenizer named as premiums (``premiums = "qwen3-8b"``) by its
    ``tokenizer.json`` (resolved with ``tokenizers_dir``), since its premiums are computed from it. Without
    declared premiums each ledger model's own tokenizer is used, which the ledger itself records by hash.
    """
    path = Path(path)
    proto = proto or load_protocol(path)
    out: dict[str, str] = {}
    for name, spec in _premium_entries(proto.premiums, path.parent):
        if "=" in spec:
            continue
        if spec.lower().endswith(".json"):
            try:
                out[name] = hashlib.sha256(regular_file(spec, "premiums file").read_bytes()).hexdigest()
            except OSError as exc:
                raise BadInputError(f"{path}: cannot read its premiums file {name}: {exc.strerror or exc}") from exc
        else:
            from ..tokenization.load import load_tokenizer

            try:
                tok = load_tokenizer(spec, tokenizers_dir)
            except MindcapError as exc:
                raise with_context(exc, f"{path}: cannot load its premiums tokenizer {name}: {exc}") from exc
            out[f"tokenizer {name}"] = tok.sha256
    return out


def freeze_path(path: str | Path) -> Path:
    """Where the freeze record of ``path`` lives: ``<file>.freeze.json`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".freeze.json")


@dataclass(frozen=True)
class FreezeRecord:
    """What a freeze recorded: the file's hash and, in a git repository, the tag that carries it."""

    protocol: str
    name: str
    sha256: str
    frozen_at: str
    tag: str | None = None
    commit: str | None = None
    file_committed: bool | None = None
    inputs: dict[str, str] | None = None  # name -> sha256 of each file the protocol names (None: older records)
    bstar: int | None = None  # B* (computed when the protocol gives a rule), None when it declares none

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def _repo_root(folder: Path) -> Path | None:
    try:
        res = _git(folder, "rev-parse", "--show-toplevel")
    except FileNotFoundError:  # git not installed
        return None
    return Path(res.stdout.strip()) if res.returncode == 0 else None


def _tag_name(name: str, sha: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name).strip("-.") or "protocol"
    return f"protocol/{safe}-{sha[:12]}"


def _input_lines(inputs: Mapping[str, str]) -> list[str]:
    return [f"input {name}: sha256 {sha}" for name, sha in sorted(inputs.items())]


def _check_inputs(path: Path, record: FreezeRecord, current: Mapping[str, str]) -> None:
    """Refuse when a file the protocol names differs from its frozen hash (one line naming the file)."""
    if record.inputs is None:
        if current:
            raise BadInputError(
                f"refusing {path}: its freeze ({record.frozen_at}) predates input hashing and does not cover "
                f"{next(iter(current))}; save the protocol under a new file name and freeze that"
            )
        return
    for name, sha in current.items():
        frozen = record.inputs.get(name)
        if frozen != sha:
            raise BadInputError(
                f"refusing {path}: {name} changed after the freeze (sha256 {sha[:12]}…, frozen "
                f"{str(frozen)[:12]}…); the protocol's inputs must not change after its freeze"
            )


def freeze_protocol(
    path: str | Path,
    tag: bool | None = None,
    *,
    tokenizers_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
) -> FreezeRecord:
    """Record the protocol's hash and those of the files it names (sidecar JSON) and, in a git repository,
    an annotated tag at HEAD.

    ``tag``: ``None`` tags when the file is inside a git repository, ``True`` requires one, ``False``
    never tags. Freezing again with the same bytes returns the existing record; a file whose bytes
    changed after a freeze is refused (a changed protocol is a new protocol: save it under a new name), and
    so is one whose named files changed. Existing tags are never moved or overwritten. ``tokenizers_dir``
    resolves tokenizers named as premiums (see :func:`protocol_inputs`); with ``data_dir`` (FLORES-200) they also
    give the premiums a ``bstar`` rule is computed from (:func:`compute_bstar`), and the record keeps B*.
    """
    path = Path(path)
    sidecar = freeze_path(path)
    if sidecar.exists() and _read_record(sidecar).sha256 == protocol_hash(path):
        bstar = _read_record(sidecar).bstar  # frozen already: B* stays as recorded
    else:
        bstar = compute_bstar(path, tokenizers_dir=tokenizers_dir, data_dir=data_dir)
    proto = load_protocol(path, bstar=bstar)  # only valid protocols can be frozen
    sha = protocol_hash(path)
    inputs = protocol_inputs(path, proto, tokenizers_dir=tokenizers_dir)
    if sidecar.exists():
        old = _read_record(sidecar)
        if old.sha256 != sha:
            raise BadInputError(
                f"{path} was frozen with sha256 {old.sha256[:12]}… and has changed since; "
                "a changed protocol is a new protocol: save it under a new file name and freeze that"
            )
        _check_inputs(path, old, inputs)
        return old
    root = _repo_root(path.resolve().parent) if tag is not False else None
    if tag is True and root is None:
        raise BadInputError(f"{path} is not inside a git repository; freeze without --tag or run git init")
    tag_name = commit = committed = None
    if root is not None:
        head = _git(root, "rev-parse", "HEAD")
        if head.returncode != 0:
            raise BadInputError(f"git repository {root.name} has no commit to tag; commit the protocol first")
        commit = head.stdout.strip()
        rel = path.resolve().relative_to(root).as_posix()
        status = _git(root, "status", "--porcelain", "--", rel)
        tracked = _git(root, "ls-files", "--error-unmatch", "--", rel).returncode == 0
        committed = tracked and status.stdout.strip() == ""
        tag_name = _tag_name(proto.name, sha)
        message = f"mindcap-tok protocol freeze\n\nprotocol: {rel}\nname: {proto.name}\nsha256: {sha}\n"
        message += "".join(line + "\n" for line in _input_lines(inputs))
        res = _git(root, "tag", "-a", tag_name, "-m", message, commit)
        if res.returncode != 0:
            existing = _git(root, "cat-file", "-p", f"refs/tags/{tag_name}")
            if not all(line in existing.stdout for line in [f"sha256: {sha}", *_input_lines(inputs)]):
                raise SetupError(f"git tag {tag_name} failed: {res.stderr.strip().splitlines()[0]}")
    record = FreezeRecord(
        protocol=path.name,
        name=proto.name,
        sha256=sha,
        frozen_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        tag=tag_name,
        commit=commit,
        file_committed=committed,
        inputs=inputs,
        bstar=proto.bstar,
    )
    atomic_write_text(sidecar, dumps_strict(record.as_dict()) + "\n")
    return record


def _read_record(sidecar: Path) -> FreezeRecord:
    try:
        data = json.loads(regular_file(sidecar, "freeze record").read_text("utf-8"))
        return FreezeRecord(**data)
    except (OSError, json.JSONDecodeError, TypeError) as exc:
        raise DamagedDataError(f"cannot read freeze record {sidecar}: {exc}") from exc


def verify_protocol(path: str | Path, tokenizers_dir: str | Path | None = None) -> FreezeRecord:
    """The freeze record of ``path`` if its bytes, and every file it names, still match; a one-line error
    (naming the changed file) otherwise.

    When the record names a git tag and the file is still in that repository, the tag must exist and
    carry the same hashes.
    """
    path = Path(path)
    sidecar = freeze_path(path)
    if not sidecar.exists():
        raise BadInputError(f"{path} has not been frozen; run `mindcap-tok protocol freeze {path}` first")
    record = _read_record(sidecar)
    sha = protocol_hash(path)
    if sha != record.sha256:
        raise BadInputError(
            f"refusing {path}: its sha256 {sha[:12]}… differs from the frozen {record.sha256[:12]}… "
            f"(frozen {record.frozen_at}); the protocol changed after its freeze"
        )
    inputs = protocol_inputs(path, load_protocol(path), tokenizers_dir=tokenizers_dir)
    _check_inputs(path, record, inputs)
    if record.tag:
        root = _repo_root(path.resolve().parent)
        if root is not None:
            shown = _git(root, "cat-file", "-p", f"refs/tags/{record.tag}")
            lines = [f"sha256: {sha}", *_input_lines(inputs)]  # inputs is empty for records without them
            if shown.returncode != 0 or not all(line in shown.stdout for line in lines):
                raise BadInputError(f"refusing {path}: git tag {record.tag} is missing or records another hash")
    return record


def run_protocol(
    proto: Protocol,
    by_budget: pd.DataFrame,
    *,
    premiums: PremiumTable | None,
    native: Arm | None = None,
    translate: Arm | None = None,
    records: pd.DataFrame | None = None,
) -> FamilyResult:
    """Evaluate a (verified) protocol's family on ``Scores.by_budget``. The arms it declares are compared, else
    ``native`` and ``translate`` (one arm, or each task's: :class:`~mindcap_tok.tasks.roles.TaskArms`; None:
    each task's own). ``records``: ``Scores.by_record``, which say where the cap cut traces (a hypothesis beyond
    such a cap is not estimable: :func:`~.family.run_family`; without them every capped cell may have been cut)."""
    filters = {"model": proto.model} if proto.model else None
    grid = accuracy_grid(by_budget, proto.frame, filters=filters, records=records)
    return run_family(
        grid,
        proto.hypotheses,
        premiums=premiums,
        tests=FamilyTests(proto.alpha, proto.n_boot, proto.seed, proto.tail_factor, proto.outcomes),
        native=proto.native or native,
        translate=proto.translate or translate,
    )


def announced_terms(proto: Protocol) -> dict[str, list[dict[str, Any]]]:
    """Per hypothesis id, the cells (model, arm, lang and settings) of its terms that name an announced budget."""
    out: dict[str, list[dict[str, Any]]] = {}
    for h in proto.hypotheses:
        for term in (h.a, h.b):
            if term and term.get("announced") is not None:
                cell = {k: v for k, v in term.items() if k not in ("budget", "scaled", "announced")}
                if h.model and "model" not in cell:
                    cell["model"] = h.model
                out.setdefault(h.id, []).append(cell)
    return out


def gate_protocol(
    proto: Protocol, result: FamilyResult, *, by_record: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The announcement gate of the ledger's cells (:func:`~.announcement.announcement_gate` at the protocol's
    ``announcement_gate``) and the family's decisions with ``clears_gate`` and ``informative``."""
    table = announcement_gate(by_record, gate=proto.announcement_gate)
    return table, gate_decisions(result.table, terms=announced_terms(proto), gate_table=table)
