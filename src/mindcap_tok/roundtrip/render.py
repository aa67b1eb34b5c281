"""English renderings of native traces, for the normalizer audit's same-content trace premium r_trace.

Each native trace of a ledger (the first record of each model, language, item and sample, as the audit joins
them) is sent to a translation backend with a prompt from a template file (``resources/render/<v>.json`` or the
user's own, placeholders ``src_lang``, ``tgt_lang``, ``text``), in waves of ``wave_size`` traces, through the
round-trip hops' request and decode plumbing. Layout of the folder::

    DIR/_render.json            # format, the spec, the ledger's traces (their count and SHA-256), committed waves
    DIR/waves/wave-0001.parquet # one wave's replies: keys, seed, cap, prompt, output ids, text, finish reason
    DIR/renderings.jsonl        # what ``audit --renderings`` reads: model, lang, item, sample, english

Waves are committed as the round trip's files are (:func:`.store.commit_file`): a wave counts once the manifest
lists it, so a rerun resumes at the first missing wave; ``renderings.jsonl`` is written atomically. A run holds
the folder's lock (a second run into it is refused in one line) and writes through no symlink: a folder holding
one, or a special file, is refused. A rendering that came back empty, whose thought never closed (a reasoning
translator cut or stopped inside ``<think>``: no rendering at all), or that hit its cap (unless ``keep_capped``),
is left out of ``renderings.jsonl`` (a cut rendering would inflate r_trace) and counted in the result; the audit
then runs on the traces rendered whole.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, StringConstraints

from .._io import check_folder_path, check_tree, enclosing_ledger, folder_lock, regular_file, write_inside
from .._json import dumps_strict
from ..errors import BadInputError, DamagedDataError, StorageError, with_context
from ..spec import Sampling, SpecError, seed_hash, validate
from ..store import committed_path, encode_table, roll_forward
from ..tasks.roles import NATIVE_ROLE, role_mask
from ..templates import template_fields
from .chat import chat_requests, decode_requests, generator_label
from .sequences import language_name
from .store import commit_file, read_run_manifest

MANIFEST = "_render.json"
FORMAT = "mindcap-tok render"
RENDERINGS = "renderings.jsonl"
DEFAULT_PROMPTS = "render-v1"
_KEYS = ("model", "lang", "item", "sample")
_WAVE_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("lang", pa.string()),
        ("item", pa.int64()),
        ("sample", pa.int64()),
        ("seed", pa.int64()),
        ("cap", pa.int32()),
        ("template_id", pa.string()),
        ("output_ids", pa.list_(pa.int32())),
        ("english", pa.string()),
        ("finish_reason", pa.string()),
        ("generator", pa.string()),
        ("unclosed", pa.bool_()),
    ]
)
#: the wave files a render manifest may list
_WAVE = r"waves/wave-\d{4,}\.parquet"


def greedy_sampling(temperature: float) -> Sampling:
    """A rendering's sampling: ``temperature`` (0: greedy), no nucleus cut, and ``top_k`` 0, as render runs record
    it in their identity (every backend reads 0 as no top-k, as it reads the spec's -1)."""
    return Sampling.model_construct(temperature=temperature, top_p=1.0, top_k=0)


@dataclass(frozen=True)
class RenderSpec:
    """How traces are rendered: the translator's name, the prompt template (a shipped version or a file), the
    output cap per rendering, the wave size, the seed each request's seed derives from, and the sampling
    (greedy by default: a rendering should be the most likely translation, not a draw). ``keep_capped`` keeps the
    renderings that hit the cap in ``renderings.jsonl`` (cut: they bias r_trace upward); it is not part of the
    run's identity, so a finished run can be written out either way."""

    translator: str
    prompts: str = DEFAULT_PROMPTS
    max_tokens: int = 4096
    wave_size: int = 64
    seed: int = 0
    sampling: Sampling = field(default_factory=lambda: greedy_sampling(0.0))
    keep_capped: bool = False


@dataclass(frozen=True)
class RenderResult:
    """What a run did: traces to render, waves written and read back, renderings kept and left out (cut at the
    cap, empty, or a thought that never closed: ``unclosed``)."""

    out_dir: Path
    traces: int
    written: list[str]
    skipped: list[str]
    kept: int
    capped: int
    empty: int
    unclosed: int = 0

    def as_dict(self) -> dict:
        """Plain data for JSON."""
        return {**asdict(self), "out_dir": str(self.out_dir), "renderings": str(self.out_dir / RENDERINGS)}


def load_prompt(prompts: str = DEFAULT_PROMPTS) -> tuple[str, str]:
    """(template, template id) of a shipped version (``render-v1``) or a JSON file with a ``translate`` template
    using exactly ``src_lang``, ``tgt_lang`` and ``text``."""
    if prompts.endswith(".json"):
        file = regular_file(prompts, "prompts file")
        try:
            data = json.loads(file.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise BadInputError(f"cannot read prompts file {file}: {exc}") from None
        ident = f"{file.stem}:render"
    else:
        try:
            text = resources.files("mindcap_tok.resources.render").joinpath(f"{prompts}.json").read_text("utf-8")
        except FileNotFoundError:
            raise BadInputError(f"unknown render prompt version {prompts!r}; shipped: {DEFAULT_PROMPTS}") from None
        data, ident = json.loads(text), f"{prompts}:render"
    template = data.get("translate") if isinstance(data, dict) else None
    if not isinstance(template, str):
        raise BadInputError(f"render prompts {prompts}: need a 'translate' template (a string)")
    try:
        names = template_fields(template)
    except BadInputError as exc:
        raise BadInputError(f"render prompts {prompts}: the template {exc}") from None
    if names != {"src_lang", "tgt_lang", "text"}:
        raise BadInputError(f"render prompts {prompts}: placeholders {sorted(names)}, not src_lang, tgt_lang, text")
    return template, ident


def native_traces(records: pa.Table) -> pa.Table:
    """The native traces to render (each record of its task's native arm): the first record of each (model, lang,
    item, sample), in ledger order."""
    nat = records.filter(pa.array(role_mask(records, NATIVE_ROLE))).select([*_KEYS, "text"])
    seen: set[tuple] = set()
    keep = []
    for i, key in enumerate(zip(*(nat.column(k).to_pylist() for k in _KEYS), strict=True)):
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return nat.take(pa.array(keep, pa.int64()))


def _fingerprint(traces: pa.Table) -> str:
    digest = hashlib.sha256()
    for row in traces.to_pylist():
        digest.update(json.dumps(row, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
    return digest.hexdigest()


class _Manifest(BaseModel):
    """A render manifest as read back: its committed waves and their SHA-256 (other keys checked by identity)."""

    model_config = ConfigDict(strict=True, extra="allow")
    waves: dict[
        Annotated[str, StringConstraints(pattern=rf"^{_WAVE}$")],
        Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")],
    ]


class _Store:
    """The render folder (see the module docs): its manifest, waves and renderings file."""

    def __init__(self, root: Path, identity: dict) -> None:
        check_folder_path(root, "render folder")
        if enclosing_ledger(root) is not None:
            raise BadInputError(f"render folder {root} is or lies inside a ledger; choose another")
        self.root, self._identity = root, identity
        self._load()

    def _load(self) -> None:
        root = self.root
        own = {MANIFEST, RENDERINGS, "waves"}
        if root.is_dir():
            check_tree(root, "render folder")
            foreign = [p.name for p in root.iterdir() if p.name not in own and not p.name.startswith(".")]
            if foreign:
                raise BadInputError(f"render folder {root} holds files that are not a render run's ({foreign[0]})")
        path = regular_file(root / MANIFEST, "render manifest")
        other = "render run (other traces, translator, prompt, cap, seed or sampling)"
        found = read_run_manifest(path, fmt=FORMAT, identity=self._identity, what="render manifest", other=other)
        if found is not None:
            try:
                validate(_Manifest, found, key="")
            except SpecError as exc:
                raise DamagedDataError(f"render manifest {path} is damaged: {exc}", path=path) from None
            self.manifest = found
        else:
            self.manifest = {"format": FORMAT, "version": 1, "identity": self._identity, "waves": {}}

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the folder's lock while a run writes, the manifest read again under it."""
        with folder_lock(self.root, "render folder"):
            self._load()
            roll_forward([self.root / name for name in self.manifest["waves"]], self.root.glob("waves/.*.pending"))
            yield

    def has(self, name: str) -> bool:
        return name in self.manifest["waves"]

    def read(self, name: str) -> list[dict]:
        data = regular_file(committed_path(self.root / name), "render wave").read_bytes()
        if hashlib.sha256(data).hexdigest() != self.manifest["waves"][name]:
            raise DamagedDataError(f"render wave {self.root / name} differs from the one the manifest lists (altered?)")
        try:
            table = pq.read_table(pa.BufferReader(data))
        except (OSError, pa.ArrowException) as exc:
            raise DamagedDataError(f"render wave {self.root / name} is not readable Parquet: {exc}") from None
        # waves written before ``unclosed`` was recorded lack it (:func:`_settled` reads their text again)
        need = [f for f in _WAVE_SCHEMA if f.name != "unclosed" or "unclosed" in table.schema.names]
        if not all(f.name in table.schema.names and table.schema.field(f.name).type == f.type for f in need):
            raise DamagedDataError(f"render wave {self.root / name} does not hold a render wave's columns")
        return table.to_pylist()

    def write(self, name: str, data: bytes) -> None:
        manifest = {**self.manifest, "waves": {**self.manifest["waves"], name: hashlib.sha256(data).hexdigest()}}
        try:
            commit_file(self.root, name, data, self.root / MANIFEST, dumps_strict(manifest) + "\n", "render folder")
        except StorageError as exc:
            done = len(self.manifest["waves"])
            raise with_context(exc, f"{exc}; {done} waves stay committed, a rerun resumes after them") from exc
        self.manifest = manifest


def _wave_bytes(rows: list[dict]) -> bytes:
    return encode_table(pa.Table.from_pylist(rows, schema=_WAVE_SCHEMA)).data


def render_traces(
    records: pa.Table, out_dir: str | os.PathLike[str], backend, *, spec: RenderSpec, on_wave=None
) -> RenderResult:
    """Render every native trace of ``records`` in English with ``backend`` into ``out_dir`` (see the module
    docs); ``on_wave(name, rows)`` after each wave, run or read back."""
    template, ident = load_prompt(spec.prompts)
    traces = native_traces(records)
    if traces.num_rows == 0:
        raise BadInputError("the ledger holds no native traces to render")
    if spec.wave_size < 1 or spec.max_tokens < 1:
        raise BadInputError("wave_size and max_tokens must be at least 1")
    identity = {
        "traces": traces.num_rows,
        "sha256": _fingerprint(traces),
        "template": template,
        "spec": {**asdict(spec), "sampling": spec.sampling.model_dump(), "prompts": ident, "keep_capped": None},
    }
    store = _Store(Path(out_dir), identity)
    with store.writing():
        return _render(store, traces.to_pylist(), backend, template, ident, spec, on_wave)


def _render(store: _Store, todo: list[dict], backend, template: str, ident: str, spec: RenderSpec, on_wave):
    """The waves of :func:`render_traces` (each read back when committed) and the renderings file."""
    rows_all: list[dict] = []
    written, skipped = [], []
    for w, start in enumerate(range(0, len(todo), spec.wave_size)):
        name = f"waves/wave-{w + 1:04d}.parquet"
        part = todo[start : start + spec.wave_size]
        if store.has(name):
            rows = store.read(name)
            skipped.append(name)
        else:
            rows = _wave(part, backend, template, ident, spec)
            store.write(name, _wave_bytes(rows))
            written.append(name)
        rows_all += [_settled(r) for r in rows]
        if on_wave:
            on_wave(name, len(rows))
    capped = sum(r["finish_reason"] == "length" for r in rows_all)
    unclosed = sum(r["unclosed"] for r in rows_all)
    empty = sum(not r["english"].strip() and not r["unclosed"] for r in rows_all)
    kept = [
        {k: r[k] for k in (*_KEYS, "english")}
        for r in rows_all
        if (spec.keep_capped or r["finish_reason"] != "length") and r["english"].strip()
    ]
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
    write_inside(store.root, RENDERINGS, lines.encode("utf-8"), "render folder")
    return RenderResult(store.root, len(todo), written, skipped, len(kept), capped, empty, unclosed)


def _settled(row: dict) -> dict:
    """A wave record with ``unclosed`` known: a wave written before it was recorded kept an unclosed thought's
    text as its ``english``, so that text is split again."""
    if row.get("unclosed") is not None:
        return row
    english, unclosed = _answer_part(row["english"], prompt_opens=False)
    return {**row, "english": english, "unclosed": unclosed}


def _answer_part(text: str, *, prompt_opens: bool) -> tuple[str, bool]:
    """(the reply's answer, stripped; whether its thought never closed). A reply that opens a thought
    (``<think>``, or a prompt that ends opening one: ``prompt_opens``) answers only after the first ``</think>``
    (vLLM's reasoning parsers' rule, :mod:`mindcap_tok.store.think`); with no ``</think>`` it is all thought
    and gives no rendering (``""``, unclosed). Written on the text, by hand: the translator may be any server,
    and its think block a plain-text convention no tokenizer need mark."""
    head, sep, tail = text.partition("</think>")
    if not (prompt_opens or head.lstrip().startswith("<think>")):
        return text.strip(), False
    return (tail.strip(), False) if sep else ("", True)


def _wave(part: list[dict], backend, template: str, ident: str, spec: RenderSpec) -> list[dict]:
    """One wave: a request per trace, decoded in one call, as records of the wave file."""
    asks = [
        (
            template.format(src_lang=language_name(t["lang"]), tgt_lang=language_name("eng_Latn"), text=t["text"]),
            seed_hash(spec.seed, "render", *(t[k] for k in _KEYS)),
            f"render {t['model']}/{t['lang']}/{t['item']}/{t['sample']}",
        )
        for t in part
    ]
    reqs = chat_requests(backend, asks, spec.max_tokens, spec.sampling)
    generator = generator_label(backend)
    rows = []
    for t, r, (_, oids, text, finish) in zip(part, reqs, decode_requests(backend, reqs), strict=True):
        english, unclosed = _answer_part(text, prompt_opens=(r.text or "").rstrip().endswith("<think>"))
        rows.append(
            {
                **{k: t[k] for k in _KEYS},
                "seed": r.seed,
                "cap": r.max_tokens,
                "template_id": ident,
                "output_ids": list(oids),
                "english": english,
                "finish_reason": finish,
                "generator": generator,
                "unclosed": unclosed,
            }
        )
    return rows
