"""Protocol files: a test family declared (and frozen) before the data it governs exist.

A protocol is a TOML or YAML file naming the hypotheses, budgets, margins, α, resamples, seed and
premiums. :func:`freeze_protocol` records the SHA-256 of its bytes in a sidecar ``<file>.freeze.json``
and, when the file lies in a git repository, an annotated tag whose message carries the same hash
(the paper's "internal freeze recorded as a git tag"). :func:`verify_protocol` refuses a file whose
bytes no longer match, and :func:`run_protocol` evaluates the family (see :mod:`.family`).

Example (TOML)::

    name = "qwen-bstar"
    model = "qwen3-8b"
    premiums = "qwen3-8b"          # a tokenizer name, a premium JSON file, or a table {de = 1.559, ...}
    alpha = 0.05
    n_boot = 10000
    seed = 0
    tail_factor = 1.3

    [[hypotheses]]
    id = "H1-existence"
    kind = "delta"
    langs = ["de", "th", "sw"]
    budget = 1024
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from .._io import atomic_write_text
from ..errors import MindcapError
from .family import DEFAULT_OUTCOMES, FamilyResult, Hypothesis, family_budgets, run_family
from .grid import FRAMES, accuracy_grid
from .premiums import PremiumTable

_TOP_KEYS = {"name", "description", "frame", "model", "premiums", "alpha", "n_boot", "seed", "tail_factor",
             "parser", "outcomes", "hypotheses", "native", "translate"}


@dataclass(frozen=True)
class Protocol:
    """A parsed protocol file."""

    name: str
    hypotheses: tuple[Hypothesis, ...]
    alpha: float = 0.05
    n_boot: int = 10_000
    seed: int = 0
    tail_factor: float = 1.0
    frame: str = "replay"
    model: str | None = None
    premiums: str | Mapping | None = None
    parser: str = "strict"
    outcomes: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_OUTCOMES))
    native: str = "native"
    translate: str = "translate-act"
    description: str = ""


def _read(path: Path) -> dict:
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise MindcapError(f"cannot read protocol {path}: {exc.strerror or exc}") from exc
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            return tomllib.loads(text)
        if suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
            if not isinstance(data, dict):
                raise MindcapError(f"{path}: a protocol must be a mapping at the top level")
            return data
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise MindcapError(f"{path}: not valid {suffix[1:].upper()}: {str(exc).splitlines()[0]}") from exc
    except Exception as exc:  # yaml.YAMLError; yaml is imported lazily
        if type(exc).__module__.startswith("yaml"):
            raise MindcapError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from exc
        raise
    raise MindcapError(f"{path}: protocol files are .toml, .yaml or .yml")


def load_protocol(path: str | Path) -> Protocol:
    """Parse and validate a protocol file (unknown keys are errors)."""
    path = Path(path)
    raw = _read(path)
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise MindcapError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    name = str(raw.get("name") or "")
    if not name:
        raise MindcapError(f"{path}: a protocol needs a name")
    hyps = raw.get("hypotheses") or []
    if not isinstance(hyps, list) or not hyps:
        raise MindcapError(f"{path}: declare at least one [[hypotheses]] entry")
    defaults = {"model": raw.get("model")}
    frame = raw.get("frame", "replay")
    if frame not in FRAMES:
        raise MindcapError(f"{path}: frame must be one of {', '.join(FRAMES)}")
    outcomes = raw.get("outcomes", {})
    if not isinstance(outcomes, Mapping) or set(outcomes) - set(DEFAULT_OUTCOMES):
        raise MindcapError(f"{path}: outcomes takes the keys {', '.join(DEFAULT_OUTCOMES)}")
    try:
        proto = Protocol(
            name=name,
            hypotheses=tuple(Hypothesis.from_dict(h, defaults) for h in hyps),
            alpha=float(raw.get("alpha", 0.05)),
            n_boot=int(raw.get("n_boot", 10_000)),
            seed=int(raw.get("seed", 0)),
            tail_factor=float(raw.get("tail_factor", 1.0)),
            frame=frame,
            model=raw.get("model"),
            premiums=raw.get("premiums"),
            parser=str(raw.get("parser", "strict")),
            outcomes={**DEFAULT_OUTCOMES, **outcomes},
            native=str(raw.get("native", "native")),
            translate=str(raw.get("translate", "translate-act")),
            description=str(raw.get("description", "")),
        )
    except (TypeError, ValueError) as exc:
        raise MindcapError(f"{path}: {exc}") from exc
    if not 0 < proto.alpha < 1 or proto.n_boot < 2 or proto.tail_factor < 1:
        raise MindcapError(f"{path}: need 0 < alpha < 1, n_boot >= 2 and tail_factor >= 1")
    return proto


def protocol_hash(path: str | Path) -> str:
    """SHA-256 of the protocol file's bytes (any edit, even whitespace, changes it)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise MindcapError(f"cannot read protocol {path}: {exc.strerror or exc}") from exc


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

    def as_dict(self) -> dict:
        return asdict(self)


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
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


def freeze_protocol(path: str | Path, tag: bool | None = None) -> FreezeRecord:
    """Record the protocol's hash (sidecar JSON) and, in a git repository, an annotated tag at HEAD.

    ``tag``: ``None`` tags when the file is inside a git repository, ``True`` requires one, ``False``
    never tags. Freezing again with the same bytes returns the existing record; a file whose bytes
    changed after a freeze is refused (a changed protocol is a new protocol: save it under a new name).
    Existing tags are never moved or overwritten.
    """
    path = Path(path)
    proto = load_protocol(path)  # only valid protocols can be frozen
    sha = protocol_hash(path)
    sidecar = freeze_path(path)
    if sidecar.exists():
        old = _read_record(sidecar)
        if old.sha256 != sha:
            raise MindcapError(
                f"{path} was frozen with sha256 {old.sha256[:12]}… and has changed since; "
                "a changed protocol is a new protocol: save it under a new file name and freeze that"
            )
        return old
    root = _repo_root(path.resolve().parent) if tag is not False else None
    if tag is True and root is None:
        raise MindcapError(f"{path} is not inside a git repository; freeze without --tag or run git init")
    tag_name = commit = committed = None
    if root is not None:
        head = _git(root, "rev-parse", "HEAD")
        if head.returncode != 0:
            raise MindcapError(f"git repository {root.name} has no commit to tag; commit the protocol first")
        commit = head.stdout.strip()
        rel = path.resolve().relative_to(root).as_posix()
        status = _git(root, "status", "--porcelain", "--", rel)
        tracked = _git(root, "ls-files", "--error-unmatch", "--", rel).returncode == 0
        committed = tracked and status.stdout.strip() == ""
        tag_name = _tag_name(proto.name, sha)
        message = f"mindcap-tok protocol freeze\n\nprotocol: {rel}\nname: {proto.name}\nsha256: {sha}\n"
        res = _git(root, "tag", "-a", tag_name, "-m", message, commit)
        if res.returncode != 0:
            existing = _git(root, "cat-file", "-p", f"refs/tags/{tag_name}")
            if f"sha256: {sha}" not in existing.stdout:
                raise MindcapError(f"git tag {tag_name} failed: {res.stderr.strip().splitlines()[0]}")
    record = FreezeRecord(
        protocol=path.name, name=proto.name, sha256=sha,
        frozen_at=datetime.now(UTC).replace(microsecond=0).isoformat(),
        tag=tag_name, commit=commit, file_committed=committed,
    )
    atomic_write_text(sidecar, json.dumps(record.as_dict(), indent=2) + "\n")
    return record


def _read_record(sidecar: Path) -> FreezeRecord:
    try:
        data = json.loads(sidecar.read_text("utf-8"))
        return FreezeRecord(**data)
    except (OSError, json.JSONDecodeError, TypeError) as exc:
        raise MindcapError(f"cannot read freeze record {sidecar}: {exc}") from exc


def verify_protocol(path: str | Path) -> FreezeRecord:
    """The freeze record of ``path`` if its bytes still match; a one-line error otherwise.

    When the record names a git tag and the file is still in that repository, the tag must exist and
    carry the same hash.
    """
    path = Path(path)
    sidecar = freeze_path(path)
    if not sidecar.exists():
        raise MindcapError(f"{path} has not been frozen; run `mindcap-tok protocol freeze {path}` first")
    record = _read_record(sidecar)
    sha = protocol_hash(path)
    if sha != record.sha256:
        raise MindcapError(
            f"refusing {path}: its sha256 {sha[:12]}… differs from the frozen {record.sha256[:12]}… "
            f"(frozen {record.frozen_at}); the protocol changed after its freeze"
        )
    if record.tag:
        root = _repo_root(path.resolve().parent)
        if root is not None:
            shown = _git(root, "cat-file", "-p", f"refs/tags/{record.tag}")
            if shown.returncode != 0 or f"sha256: {sha}" not in shown.stdout:
                raise MindcapError(f"refusing {path}: git tag {record.tag} is missing or records another hash")
    return record


def protocol_budgets(proto: Protocol, premiums: PremiumTable | None, models: list[str]) -> list[int]:
    """Budgets to score the ledger at before :func:`run_protocol`."""
    return family_budgets(proto.hypotheses, premiums, models)


def run_protocol(proto: Protocol, by_budget: pd.DataFrame, premiums: PremiumTable | None) -> FamilyResult:
    """Evaluate a (verified) protocol's family on ``Scores.by_budget``."""
    filters = {"model": proto.model} if proto.model else None
    grid = accuracy_grid(by_budget, proto.frame, filters=filters)
    return run_family(
        grid, proto.hypotheses, premiums, alpha=proto.alpha, n_boot=proto.n_boot, seed=proto.seed,
        tail_factor=proto.tail_factor, outcomes=proto.outcomes, native=proto.native, translate=proto.translate,
    )
