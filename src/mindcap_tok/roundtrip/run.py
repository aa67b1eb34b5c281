"""Running a round trip: hops in waves through a backend, then the judge in rounds, stored in a run folder.

Wave ``h`` sends hop ``h`` of every live (model, text, sequence) chain in one ``generate`` call per model (so an
in-process engine batches them); hop ``h+1`` reads hop ``h``'s output. A hop that hits its cap is kept and
flagged (``capped``) and the chain goes on; a hop with an empty output ends its chain, which is counted as a
failed sample. Judge requests carry the reply's JSON schema unless ``[judge] structured = false``. Judge
round 0 sends every finished chain to every judge; round ``r`` re-asks, with a new seed, the ones whose
reply did not parse, up to that judge's ``retries`` times; what is still unparsed is ``unjudged``. A round's
file holds the replies of every judge (``judge_model``); a sample is one chain as one judge scored it. Every wave and
round is committed on its own, so a rerun resumes at the first one missing.

Reasoning models (``thinking = true``): the model's hops are prompted with ``enable_thinking`` and each passes on
only its answer channel; an unclosed thought passes on nothing (an empty hop). The hop records then carry the
channel columns of :data:`~.store.THINK_HOP_SCHEMA` (:mod:`.thinking`). The judge is always prompted with
thinking off.

Stored records replay into samples one way, for the run and for its report (:mod:`.report`): :func:`new_chains`,
then :func:`apply_hop` and :func:`apply_judge` per record, then :func:`sample_row` per chain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import BadInputError
from ..generation import load_backend
from ..store import think_markers
from .chat import chat_requests, decode_requests, generator_label
from .mqm import inconsistency, mqm_score, parse_judge, passes
from .prompts import judge_prompt, judge_schema, template_id, translation_prompt
from .sequences import Chain
from .spec import JudgeSpec, RoundtripSpec, hop_seed, judge_seed, plan_roundtrip
from .store import HOP_SCHEMA, JUDGE_SCHEMA, THINK_HOP_SCHEMA, RunStore, hop_file, judge_file
from .texts import Text
from .thinking import INSTRUCT, hop_channel, passed_on

#: sample statuses
JUDGED, FAILED, UNJUDGED = "judged", "failed", "unjudged"


@dataclass
class ChainState:
    """One (model, text, sequence) chain as its records replay it: ``current`` is the latest hop's output (the
    back-translation once ``finished``), ``failed_hop`` the hop whose output was empty, ``judgements`` the judge
    records that parsed, by judge (``attempts``: judge attempts so far, by judge). Built by :func:`new_chains`,
    advanced by :func:`apply_hop` and :func:`apply_judge`."""

    model: str
    text_id: str
    sequence: str
    langs: tuple[str, ...]
    resource: str
    category: str
    subcategory: str | None
    source: str
    current: str
    done_hops: int = 0
    failed_hop: int | None = None
    capped_hops: int = 0
    unclosed_hops: int = 0
    judgements: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        """(model, text id, sequence name): how records name their chain."""
        return (self.model, self.text_id, self.sequence)

    @property
    def finished(self) -> bool:
        """Every hop done and none empty: the chain has a back-translation to judge."""
        return self.failed_hop is None and self.done_hops == len(self.langs) - 1


@dataclass
class RoundtripResult:
    """What a run did and found: plan counts, waves/rounds written and skipped, and one row per sample."""

    out_dir: str
    plan: dict
    written: list[str]
    skipped: list[str]
    samples: pd.DataFrame

    def counts(self) -> dict:
        """Samples by status, capped hops and unknown severities."""
        s = self.samples
        return {
            "samples": len(s),
            "judged": int((s["status"] == JUDGED).sum()),
            "failed_empty_hop": int((s["status"] == FAILED).sum()),
            "unjudged": int((s["status"] == UNJUDGED).sum()),
            "capped_hops": int(s["capped_hops"].sum()),
            "unclosed_thought_hops": int(s["unclosed_hops"].sum()),
            "bad_severity_records": int((s["n_bad_severity"] > 0).sum()),
        }


def _backend_for(backends, model: str):
    if isinstance(backends, Mapping):
        if model not in backends:
            raise BadInputError(f"no backend given for model {model!r}")
        return backends[model]
    return backends


def _hop_wave(spec: RoundtripSpec, chains: list[ChainState], hop: int, backends) -> list[dict]:
    rows: list[dict] = []
    for model in spec.models:
        live = [c for c in chains if c.model == model.name and c.failed_hop is None and len(c.langs) > hop]
        if not live:
            continue
        backend = _backend_for(backends, model.name)
        _set_thinking(backend, model.thinking)
        asks = [
            (
                translation_prompt(c.current, c.langs[hop - 1], c.langs[hop], spec.prompt_version),
                hop_seed(spec, c.model, c.text_id, c.sequence, hop),
                f"{c.model}/{c.text_id}/{c.sequence}/hop {hop}",
            )
            for c in live
        ]
        reqs = chat_requests(backend, asks, spec.model_cap(model), spec.model_sampling(model))
        generator = generator_label(backend)
        thinks = any(m.thinking for m in spec.models)
        markers = think_markers(backend.tok.resolved, model.think_close) if model.thinking else None
        for c, r, (pids, oids, text, finish) in zip(live, reqs, decode_requests(backend, reqs), strict=True):
            row = {
                "model": c.model,
                "text_id": c.text_id,
                "sequence": c.sequence,
                "hop": hop,
                "src_lang": c.langs[hop - 1],
                "tgt_lang": c.langs[hop],
                "seed": r.seed,
                "cap": r.max_tokens,
                "template_id": template_id("translate", spec.prompt_version),
                "prompt_ids": pids,
                "output_ids": oids,
                "text": text,
                "finish_reason": finish,
                "capped": finish == "length",
                "generator": generator,
            }
            if markers is not None:
                row |= hop_channel(oids, markers, tokenizer=backend.tok.resolved, decode=_decoder(backend))
            elif thinks:
                row |= INSTRUCT | {"answer_tokens": len(oids)}
            row["empty"] = not passed_on(row).strip()
            rows.append(row)
    return rows


def _set_thinking(backend, on: bool) -> None:
    """Render the backend's prompts with ``enable_thinking = on`` (a backend shared by a model's thinking and
    instruct entries, or with a judge, switches)."""
    tok = getattr(backend, "tok", None)
    if tok is not None and hasattr(tok, "set_thinking"):
        tok.set_thinking(on)


def _decoder(backend):
    return lambda ids: backend.tok.decode_batch([ids])[0]


def hop_schema(spec: RoundtripSpec):
    """The hop records' schema: :data:`~.store.THINK_HOP_SCHEMA` when some model thinks, else the old one."""
    return THINK_HOP_SCHEMA if any(m.thinking for m in spec.models) else HOP_SCHEMA


def new_chains(models: Sequence[str], texts: Sequence[Text], sequences: Sequence[Chain]) -> list[ChainState]:
    """One chain per model × text × sequence, in that order, before any hop."""
    return [
        ChainState(m, t.id, c.name, c.langs, c.resource, t.category, t.subcategory, t.text, t.text)
        for m in models
        for t in texts
        for c in sequences
    ]


def apply_hop(index: Mapping[tuple[str, str, str], ChainState], row: Mapping) -> None:
    """Advance the chain a hop record names (``index``: chains by :attr:`ChainState.key`); an empty output ends
    it."""
    c = index[(row["model"], row["text_id"], row["sequence"])]
    c.done_hops = row["hop"]
    c.capped_hops += bool(row["capped"])
    c.unclosed_hops += bool(row.get("unclosed"))
    if row["empty"]:
        c.failed_hop = row["hop"]
    else:
        c.current = passed_on(row).strip()


def _judge_round(
    spec: RoundtripSpec, judge_spec: JudgeSpec, pending: list[ChainState], attempt: int, judge
) -> list[dict]:
    """One judge's requests of one round: the records of its replies."""
    asks = [
        (
            judge_prompt(c.source, c.current, spec.prompt_version),
            judge_seed(spec, c.model, c.text_id, c.sequence, attempt),
            f"judge {c.model}/{c.text_id}/{c.sequence} attempt {attempt}",
        )
        for c in pending
    ]
    schema = judge_schema(spec.prompt_version) if judge_spec.structured else None
    _set_thinking(judge, False)
    reqs = chat_requests(judge, asks, judge_spec.max_tokens, judge_spec.sampling, schema)
    rows, generator = [], generator_label(judge)
    for c, r, (pids, oids, raw, finish) in zip(pending, reqs, decode_requests(judge, reqs), strict=True):
        j = parse_judge(raw)
        rows.append(
            {
                "model": c.model,
                "text_id": c.text_id,
                "sequence": c.sequence,
                "attempt": attempt,
                "judge_model": judge_spec.model.name,
                "seed": r.seed,
                "cap": r.max_tokens,
                "template_id": template_id("judge", spec.prompt_version),
                "prompt_ids": pids,
                "output_ids": oids,
                "raw": raw,
                "finish_reason": finish,
                "parse": j.how,
                "mqm": j.mqm,
                "judge_score": j.judge_score,
                "classification": j.classification,
                "n_minor": j.minor,
                "n_major": j.major,
                "n_critical": j.critical,
                "n_bad_severity": len(j.bad_severities),
                "issues": json.dumps(j.issues, ensure_ascii=False) if j.parsed else None,
                "error": j.error,
                "generator": generator,
            }
        )
    return rows


def apply_judge(index: Mapping[tuple[str, str, str], ChainState], row: Mapping) -> None:
    """Count a judge attempt on the chain its record names, keeping the judgement (by judge) when the reply
    parsed."""
    c = index[(row["model"], row["text_id"], row["sequence"])]
    c.attempts[row["judge_model"]] = row["attempt"] + 1
    if row["parse"] is not None:
        c.judgements[row["judge_model"]] = row


def sample_row(c: ChainState, *, judge: str, seed: int) -> dict:
    """The sample of a replayed chain: its status (judged, failed: MQM 0, unjudged), raw MQM (recomputed from the
    record's issue counts, so runs stored with the old floor read back raw), pass, judge score, the judge's
    inconsistency (:func:`~.mqm.inconsistency`) and back-translation as ``judge`` scored it; ``seed`` is the run's,
    recorded with it."""
    j = c.judgements.get(judge)
    if c.failed_hop is not None:
        status, mqm, score = FAILED, 0.0, None
    elif j is None:
        status, mqm, score = UNJUDGED, None, None
    else:
        status, mqm, score = JUDGED, mqm_score(j["n_minor"], j["n_major"], j["n_critical"]), j["judge_score"]
    clash = (
        inconsistency(j["classification"], j["n_major"], j["n_critical"])
        if j is not None and status == JUDGED
        else None
    )
    return {
        "model": c.model,
        "text_id": c.text_id,
        "sequence": c.sequence,
        "resource": c.resource,
        "category": c.category,
        "subcategory": c.subcategory,
        "status": status,
        "failed_hop": c.failed_hop,
        "capped_hops": c.capped_hops,
        "unclosed_hops": c.unclosed_hops,
        "judge_attempts": c.attempts.get(judge, 0),
        "judge_model": judge,
        "parse": j["parse"] if j else None,
        "mqm": mqm,
        "inconsistent": clash,
        "passed": None if status == UNJUDGED else passes(mqm),
        "judge_score": score,
        "classification": j["classification"] if j else None,
        "n_bad_severity": j["n_bad_severity"] if j else 0,
        "back_translation": c.current if c.finished else None,
        "seed": seed,
    }


def _judge_backends(spec: RoundtripSpec, backend, judge_backend) -> dict[str, object]:
    """``{judge name: backend}``: ``judge_backend`` as a mapping (every judge in it), one backend (one judge), or
    ``None`` (each judge is a tested model: its backend)."""
    names = [j.model.name for j in spec.judges]
    if isinstance(judge_backend, Mapping):
        missing = [n for n in names if n not in judge_backend]
        if missing:
            raise BadInputError(f"no judge backend given for {', '.join(missing)}")
        return {n: judge_backend[n] for n in names}
    if judge_backend is not None:
        if len(names) > 1:
            raise BadInputError(f"give one judge backend per judge ({', '.join(names)}) as {{judge name: backend}}")
        return {names[0]: judge_backend}
    tested = {m.name for m in spec.models}
    for name in names:
        if name not in tested:
            raise BadInputError(f"give a judge backend: the judge {name!r} is none of the models")
    return {name: _backend_for(backend, name) for name in names}


def run_roundtrip(
    spec: RoundtripSpec,
    out_dir: str | Path,
    backend,
    judge_backend=None,
    *,
    on_wave: Callable[[str, int], None] | None = None,
) -> RoundtripResult:
    """Run (or resume) ``spec`` into the run folder ``out_dir``.

    ``backend``: one backend (one model) or ``{model name: backend}``; ``judge_backend``: the judge's, or
    ``{judge name: backend}`` with several judges (default: the backend of the model each judge names, when it is
    one of the tested models). ``on_wave(name, rows)`` is called after each wave or round, stored or read
    back. The folder is locked while the run writes: a second run into it is refused in one line."""
    store = RunStore(out_dir, spec.identity(), spec.as_dict())
    judges = _judge_backends(spec, backend, judge_backend)
    with store.writing():
        return _run(spec, store, out_dir, backend, judges, on_wave)


def _run(spec: RoundtripSpec, store: RunStore, out_dir, backend, judges: dict, on_wave) -> RoundtripResult:
    """The waves and rounds of :func:`run_roundtrip`, each read back when committed, else run and committed."""
    chains = new_chains([m.name for m in spec.models], spec.texts, spec.sequences)
    index = {c.key: c for c in chains}
    written: list[str] = []
    skipped: list[str] = []

    def stage(name: str, schema, make_rows, apply) -> None:
        """One wave or judge round: read it back when committed (resume), else run and commit it."""
        if store.has(name):
            rows = store.read(name)
            skipped.append(name)
        else:
            rows = make_rows()
            store.write(name, rows, schema)
            written.append(name)
        for row in rows:
            apply(index, row)
        if on_wave:
            on_wave(name, len(rows))

    def judge_round(attempt: int, pending: dict[str, list[ChainState]]) -> list[dict]:
        by_name = {j.model.name: j for j in spec.judges}
        return [row for n, p in pending.items() for row in _judge_round(spec, by_name[n], p, attempt, judges[n])]

    for hop in range(1, max(c.hops for c in spec.sequences) + 1):
        stage(hop_file(hop), hop_schema(spec), lambda hop=hop: _hop_wave(spec, chains, hop, backend), apply_hop)
    for attempt in range(max(j.retries for j in spec.judges) + 1):
        pending = {
            j.model.name: todo
            for j in spec.judges
            if attempt <= j.retries and (todo := [c for c in chains if c.finished and j.model.name not in c.judgements])
        }
        if not pending:
            break
        stage(
            judge_file(attempt),
            JUDGE_SCHEMA,
            lambda attempt=attempt, pending=pending: judge_round(attempt, pending),
            apply_judge,
        )
    samples = pd.DataFrame([sample_row(c, judge=j, seed=spec.seed) for c in chains for j in judges])
    return RoundtripResult(str(out_dir), plan_roundtrip(spec), written, skipped, samples)


def open_backends(spec: RoundtripSpec, backend: str | None = None) -> tuple[dict, object]:
    """Start one backend per model and each judge's (shared when a judge is a tested model on the same
    backend): ``({model name: backend}, judge backend)``, the judge backend a ``{judge name: backend}`` with
    several judges. ``backend`` overrides the spec's (default vllm)."""
    name = backend or spec.backend or ("server" if spec.server else "vllm")
    by_path: dict[str, object] = {}  # a model listed twice (thinking and instruct) is loaded once
    for m in spec.models:
        if m.path not in by_path:
            by_path[m.path] = load_backend(
                name, m.path, tokenizer_name=m.name, engine=spec.engine, seed=spec.seed, server=spec.server
            )
    backends = {m.name: by_path[m.path] for m in spec.models}
    judges = {j.model.name: _judge_backend(spec, j, name, backends) for j in spec.judges}
    return backends, (judges if len(judges) > 1 else next(iter(judges.values())))


def _judge_backend(spec: RoundtripSpec, judge: JudgeSpec, name: str, backends: dict):
    """One judge's backend: a tested model's own when it runs on the same backend, else a new one."""
    jname = judge.backend or ("server" if judge.base_url else name)
    server = spec.judge_server(judge)
    if judge.model.name in backends and jname == name and not judge.base_url and server == spec.server:
        return backends[judge.model.name]
    return load_backend(
        jname,
        judge.model.path,
        tokenizer_name=judge.model.name,
        engine=spec.engine if jname == name else {},
        seed=spec.seed,
        server=server,
    )
