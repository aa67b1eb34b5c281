"""English renderings of native traces, for the normalizer audit's same-content trace premium r_trace.

Each native trace of a ledger (the first record of each model, language, item and sample, as the audit joins
them) is sent to a translation backend with a prompt from a template file (``resources/render/<v>.json`` or the
user's own, placeholders ``src_lang``, ``tgt_lang``, ``text``), in waves of ``wave_size`` traces, through the
round-trip hops' request and decode plumbing. Layout of the folder::

    DIR/_render.json            # format, the spec, the ledger's traces (their count and SHA-256), committed waves
    DIR/waves/wave-0001.parquet # one wave's replies: keys, seed, cap, prompt, output ids, text, finish reason
    DIR/renderings.jsonl        # what ``audit --renderings`` reads: model, lang, item, sample, english

Every file is written atomically and a wave counts once the manifest lists it, so a rerun resumes at the first
missing wave. A rendering that came back empty, or hit its cap (unless ``keep_capped``), is left out of
``renderings.jsonl`` (a cut rendering would inflate r_trace) and counted in the result; the audit then runs on
the traces rendered whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import string
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._io import atomic_write_bytes, atomic_write_text, check_folder_path, enclosing_ledger, regular_file
from .._json import dumps_strict
from ..errors import MindcapError
from ..spec import Sampling, seed_hash
from ..stats.curves import NATIVE
from .chat import chat_requests, decode_requests, generator_label
from .sequences import language_name
from .store import read_run_manifest

MANIFEST = "_render.json"
FORMAT = "mindcap-tok render"
RENDERINGS = "renderings.jsonl"
DEFAULT_PROMPTS = "render-v1"
_KEYS = ("model", "lang", "item", "sample")
_WAVE_SCHEMA = pa.schema([
    ("model", pa.string()), ("lang", pa.string()), ("item", pa.int64()), ("sample", pa.int64()),
    ("seed", pa.int64()), ("cap", pa.int32()), ("template_id", pa.string()), ("output_ids", pa.list_(pa.int32())),
    ("english", pa.string()), ("finish_reason", pa.string()), ("generator", pa.string()),
])  # fmt: skip


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
    sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.0, top_p=1.0, top_k=0))
    keep_capped: bool = False


@dataclass(frozen=True)
class RenderResult:
    """What a run did: traces to render, waves written and read back, renderings kept and left out."""

    out_dir: Path
    traces: int
    written: list[str]
    skipped: list[str]
    kept: int
    capped: int
    empty: int

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
            raise MindcapError(f"cannot read prompts file {file}: {exc}") from None
        ident = f"{file.stem}:render"
    else:
        try:
            text = resources.files("mindcap_tok.resources.render").joinpath(f"{prompts}.json").read_text("utf-8")
        except FileNotFoundError:
            raise MindcapError(f"unknown render prompt version {prompts!r}; shipped: {DEFAULT_PROMPTS}") from None
        data, ident = json.loads(text), f"{prompts}:render"
    template = data.get("translate") if isinstance(data, dict) else None
    if not isinstance(template, str):
        raise MindcapError(f"render prompts {prompts}: need a 'translate' template (a string)")
    try:
        names = {n for _, n, _, _ in string.Formatter().parse(template) if n is not None}
    except ValueError as exc:
        raise MindcapError(f"render prompts {prompts}: the template does not parse ({exc})") from None
    if names != {"src_lang", "tgt_lang", "text"}:
        raise MindcapError(f"render prompts {prompts}: placeholders {sorted(names)}, not src_lang, tgt_lang, text")
    return template, ident


def native_traces(records: pa.Table) -> pa.Table:
    """The native traces to render: the first record of each (model, lang, item, sample), in ledger order."""
    nat = records.filter(pc.equal(records.column("arm"), NATIVE)).select([*_KEYS, "text"])
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


class _Store:
    """The render folder (see the module docs): its manifest, waves and renderings file."""

    def __init__(self, root: Path, identity: dict) -> None:
        check_folder_path(root, "render folder")
        if enclosing_ledger(root) is not None:
            raise MindcapError(f"render folder {root} is or lies inside a ledger; choose another")
        self.root = root
        own = {MANIFEST, RENDERINGS, "waves"}
        if root.is_dir():
            foreign = [p.name for p in root.iterdir() if p.name not in own and not p.name.startswith(".")]
            if foreign:
                raise MindcapError(f"render folder {root} holds files that are not a render run's ({foreign[0]})")
        path = regular_file(root / MANIFEST, "render manifest")
        other = "render run (other traces, translator, prompt, cap, seed or sampling)"
        found = read_run_manifest(path, fmt=FORMAT, identity=identity, what="render manifest", other=other)
        if found is not None:
            self.manifest = found
        else:
            self.manifest = {"format": FORMAT, "version": 1, "identity": identity, "waves": {}}

    def has(self, name: str) -> bool:
        return name in self.manifest["waves"]

    def read(self, name: str) -> list[dict]:
        data = regular_file(self.root / name, "render wave").read_bytes()
        if hashlib.sha256(data).hexdigest() != self.manifest["waves"][name]:
            raise MindcapError(f"render wave {self.root / name} differs from the one the manifest lists (altered?)")
        return pq.read_table(pa.BufferReader(data)).to_pylist()

    def write(self, name: str, rows: list[dict]) -> None:
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pylist(rows, schema=_WAVE_SCHEMA), sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
        self.manifest["waves"][name] = hashlib.sha256(data).hexdigest()
        atomic_write_text(self.root / MANIFEST, dumps_strict(self.manifest) + "\n")


def render_traces(
    records: pa.Table, out_dir: str | os.PathLike[str], backend, *, spec: RenderSpec, on_wave=None
) -> RenderResult:
    """Render every native trace of ``records`` in English with ``backend`` into ``out_dir`` (see the module
    docs); ``on_wave(name, rows)`` after each wave, run or read back."""
    template, ident = load_prompt(spec.prompts)
    traces = native_traces(records)
    if traces.num_rows == 0:
        raise MindcapError("the ledger holds no native traces to render")
    if spec.wave_size < 1 or spec.max_tokens < 1:
        raise MindcapError("wave_size and max_tokens must be at least 1")
    identity = {"traces": traces.num_rows, "sha256": _fingerprint(traces), "template": template,
                "spec": {**asdict(spec), "prompts": ident, "keep_capped": None}}  # fmt: skip
    store = _Store(Path(out_dir), identity)
    rows_all: list[dict] = []
    written, skipped = [], []
    todo = traces.to_pylist()
    for w, start in enumerate(range(0, len(todo), spec.wave_size)):
        name = f"waves/wave-{w + 1:04d}.parquet"
        part = todo[start : start + spec.wave_size]
        if store.has(name):
            rows = store.read(name)
            skipped.append(name)
        else:
            rows = _wave(part, backend, template, ident, spec)
            store.write(name, rows)
            written.append(name)
        rows_all += rows
        if on_wave:
            on_wave(name, len(rows))
    capped = sum(r["finish_reason"] == "length" for r in rows_all)
    empty = sum(not r["english"].strip() for r in rows_all)
    kept = [
        {k: r[k] for k in (*_KEYS, "english")}
        for r in rows_all
        if (spec.keep_capped or r["finish_reason"] != "length") and r["english"].strip()
    ]
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
    atomic_write_text(store.root / RENDERINGS, lines)
    return RenderResult(store.root, len(todo), written, skipped, len(kept), capped, empty)


def _answer_part(text: str) -> str:
    """The reply without a leading ``<think>...</think>`` block (a reasoning translator's), stripped. Written by
    hand: the think block is a plain-text convention no tokenizer marks as special."""
    head, sep, tail = text.partition("</think>")
    return (tail if sep and head.lstrip().startswith("<think>") else text).strip()


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
    return [
        {**{k: t[k] for k in _KEYS}, "seed": r.seed, "cap": r.max_tokens, "template_id": ident,
         "output_ids": list(oids), "english": _answer_part(text), "finish_reason": finish, "generator": generator}
        for t, r, (_, oids, text, finish) in zip(part, reqs, decode_requests(backend, reqs), strict=True)
    ]  # fmt: skip
