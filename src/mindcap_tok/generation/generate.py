"""Run a generation job into a ledger: shard by shard, each shard appended atomically, resumable.

The job's spec and every request's resolved seed are written to ``<ledger>/_jobs/<name>.json`` before the first
shard. A shard is done when all its record keys are in the ledger; a rerun skips done shards (the backend is
not even started when nothing is left), so a crash or Ctrl-C loses at most the shard in flight, and a killed
and resumed run stores the same records as an uninterrupted one (seeds depend on the request, not the order).

A part of a job (``spec.part``, ``generate --shard I/N``) runs only its requests into its own ledger, resumable
the same way; its job record is the whole job's (every request and seed) plus ``part``, so that ``ledger merge``
(:func:`~mindcap_tok.store.merge_ledgers`) of all parts writes the job record and records of the single run. One
ledger per part: the ledger's ``flock`` is not relied on across the nodes of a shared file system (NFS, Lustre
grant it only with the right mount options), and a ledger refuses a second part.

Forcing: a decode that hits its cap gets the forcing text (``\\n####``) appended and is continued greedily
until its answer line ends (a token holding a newline) or ``forcing.max_tokens``; its output ids are the
capped ids + forcing ids + continuation, ``forcing`` is true and the finish reason stays ``length``. With
``forcing.unanswered``, a decode that stopped by itself without a strict answer line is forced the same way
(its end-of-turn token dropped) and keeps finish reason ``stop``: the two populations stay apart. Each record of
a forcing job says whether it was forced (``forced``), so a finished trace that answered by itself is told apart
from one that was forced.

Reasoning models (``thinking = true``): the prompt is rendered with ``enable_thinking``, each record stores
``thinking`` and ``think_end`` (:mod:`~mindcap_tok.store.think`), and a forced decode still inside its thought
gets the closing think token (or the ``think_close`` string) before the forcing text, as thinking-budget
controls do; ``forced_think_close`` marks those. Whether a decode answered (``forcing.unanswered``) is read
in its answer channel only.

Determinism design (see :mod:`~mindcap_tok.generation.jobs`): each repeat is its own request of one sample with
the item's shared seed, stored with ``sample`` = the repeat index; a request key is done when it holds all
``repeats`` records.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._io import atomic_write_text, regular_file
from ..errors import BadInputError, DamagedDataError
from ..spec import ServerOverrides
from ..store import JOBS, KEY_COLUMNS, Ledger, ThinkMarkers, job_identity, key_tuples, think_end, think_markers
from ..tasks.answers.integer import parse_answer
from ..tasks.datasets import TaskItem, load_items
from .backends import Completion, GenRequest, load_backend
from .jobs import JobSpec, Plan, Request, Shard, iter_shards, job_counts, load_spec, plan_job, spec_task, with_part
from .prompts import task_prompt


@dataclass(frozen=True)
class ShardDone:
    """Progress after one shard: its id, records written, output tokens generated and seconds taken."""

    shard: str
    index: int
    total: int
    records: int
    tokens: int
    seconds: float


@dataclass(frozen=True)
class JobHooks:
    """What ``run_job`` calls as it goes (each optional), kept together so the call stays short.

    ``on_start(plan, shards_left)`` once the done shards are known; ``on_shard(ShardDone)`` after each shard.
    Progress, as running counts of this run: ``on_progress(done, total)`` counts requests (``total``: those of
    the shards left; first called with 0 once there is work) and ``on_tokens(tokens)`` output tokens, called
    just before each ``on_progress``. The server backend reports each request as it finishes, the in-process
    backends each shard; forcing continuations add their tokens when their shard ends.
    """

    on_start: Callable[[Plan, int], None] | None = None
    on_shard: Callable[[ShardDone], None] | None = None
    on_progress: Callable[[int, int | None], None] | None = None
    on_tokens: Callable[[int], None] | None = None


@dataclass
class GenerateResult:
    """What a run did: shards written now, shards found already done, records and tokens written, wall time."""

    job: str
    ledger: str
    backend: str
    shards: int
    written: int = 0
    skipped: int = 0
    records: int = 0
    tokens: int = 0
    seconds: float = 0.0
    shard_ids: list[str] = field(default_factory=list)


def _request_key(spec: JobSpec, r: Request) -> tuple:
    """The ledger key (``KEY_COLUMNS`` order) that the records of request ``r`` share: all but the sample."""
    style = spec.announce_style if spec.announce_budgets else "none"
    key = {
        "model": spec.model_name,
        "arm": r.arm,
        "lang": r.lang,
        "task": spec.task,
        "design": spec.design,
        "cap": r.cap,
        "announced": r.announced,
        "announce_style": style,
        "forcing": spec.forcing.enabled,
        "thinking": spec.thinking,
        "item": r.item,
    }
    return tuple(key[c] for c in KEY_COLUMNS[:-1])


def _stored_samples(ledger: Ledger, spec: JobSpec) -> Counter[tuple]:
    """Per request key, how many of the samples 0..k-1 (determinism: the repeats 0..repeats-1) the ledger holds
    (memory follows the ledger, not k)."""
    assert KEY_COLUMNS[-1] == "sample"
    if not ledger.exists():
        return Counter()
    table = ledger.read(spec.model_name, list(spec.arms), lang=list(spec.langs), columns=list(KEY_COLUMNS))
    return Counter(key[:-1] for key in set(key_tuples(table)) if 0 <= key[-1] < spec.records_per_key)


def _shard_done(spec: JobSpec, shard: Shard, stored: Counter[tuple]) -> bool:
    """Whether the ledger holds all ``k`` samples (determinism: all repeats) of every request of ``shard``."""
    return all(stored[_request_key(spec, r)] >= spec.records_per_key for r in shard.requests)


def job_record(plan: Plan) -> dict:
    """The spec and every request's seed, as stored in ``_jobs/<name>.json``: the whole job's, for a part too
    (which adds ``part``: its index and count)."""
    part = plan.spec.part
    if part is not None:
        return {**job_record(plan_job(with_part(plan.spec, None))), "part": part.as_dict()}
    return {
        "spec": plan.spec.as_dict(),
        "summary": plan.summary(),
        "requests": [
            {
                "shard": s.id,
                "arm": r.arm,
                "lang": r.lang,
                "item": r.item,
                "cap": r.cap,
                "announced": r.announced,
                "seed": r.seed,
                **({"sample": r.sample} if plan.spec.design == "determinism" else {}),
            }
            for s in plan.shards
            for r in s.requests
        ],
    }


def _write_job(ledger: Ledger, plan: Plan) -> None:
    """Keep the spec and seeds under ``_jobs/`` (a leading ``_``: Parquet readers of the folder skip it). A
    different spec (or another part of the job) under the same name is refused while the old spec's cells hold
    records; while they hold none (e.g. after a failed engine start) the new spec replaces it."""
    path = ledger.root / JOBS / f"{plan.spec.name}.json"
    record = job_record(plan)
    if path.exists():
        try:
            stored = json.loads(regular_file(path, "job record").read_text("utf-8"))
            old, old_part = stored.get("spec") or {}, stored.get("part")
        except (OSError, ValueError, AttributeError) as exc:
            raise DamagedDataError(f"{path} is unreadable ({exc}); restore it or rename the job") from exc
        same = job_identity(old) == job_identity(json.loads(json.dumps(record["spec"])))
        if same and old_part == record.get("part"):
            return
        model, arms, langs = old.get("model_name"), old.get("arms"), old.get("langs")
        if ledger.exists() and ledger.read(model, arms, lang=langs, columns=["item"]).num_rows:
            if same:
                held, now = (_part_name(p) for p in (old_part, record.get("part")))
                raise BadInputError(
                    f"{ledger.root} holds {held} of job {plan.spec.name!r}, not {now}; give each part its own "
                    "--out-dir (join them with `mindcap-tok ledger merge`)"
                )
            raise BadInputError(f"{path} holds a different spec under the job name {plan.spec.name!r}; rename the job")
    atomic_write_text(path, json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def _part_name(part: object) -> str:
    """``part 1/3`` for a stored part, ``the whole job`` for none."""
    if isinstance(part, dict):
        return f"part {part.get('index')}/{part.get('count')}"
    return "the whole job"


def _undo(created: Sequence[os.PathLike[str]]) -> None:
    """Remove what a failed start created (the job record, then its folder and the ledger folder, if still empty),
    so that a backend that did not start leaves nothing behind."""
    for path in sorted(map(str, created), key=len, reverse=True):
        with contextlib.suppress(OSError):  # not empty (something else was written there): leave it
            os.rmdir(path) if os.path.isdir(path) else os.unlink(path)


class _Runner:
    def __init__(self, spec: JobSpec, backend, data_dir) -> None:
        self.spec, self.backend, self.data_dir = spec, backend, data_dir
        self.task = spec_task(spec)
        self.items: dict[str, list[TaskItem]] = {}
        self.prompts: dict[tuple, tuple[str, list[int], str, str]] = {}
        self.forcing_ids = tuple(backend.tok.encode(spec.forcing.text)) if spec.forcing.enabled else ()
        self.newlines = backend.tok.newline_ids() if spec.forcing.enabled else ()
        self.specials = set(backend.tok.hf.all_special_ids)
        backend.tok.set_thinking(spec.thinking)
        self.markers: ThinkMarkers | None = (
            think_markers(backend.tok.resolved, spec.think_close or None) if spec.thinking else None
        )

    def item(self, lang: str, item: int) -> TaskItem:
        if lang not in self.items:
            self.items[lang] = load_items(self.task, lang, data_dir=self.data_dir)
        return self.items[lang][item]

    def prompt(self, arm: str, lang: str, item: int, announced: int | None) -> tuple[str, list[int], str, str]:
        """The templated prompt text, its ids, the template id and the user message."""
        key = (arm, lang, item, announced)
        if key not in self.prompts:
            style = self.spec.announce_style if announced is not None else "none"
            p = task_prompt(self.task, self.item(lang, item), arm=arm, announced=announced, style=style)
            text, ids = self.backend.tok.chat(p.text)
            self.prompts[key] = (text, ids, p.template_id, p.text)
        return self.prompts[key]

    def _prompt_text(self, ids: tuple[int, ...]) -> str:
        """The text of prompt ids a server reported (special tokens kept, as in a templated prompt)."""
        return self.backend.tok.resolved.tokenizer.decode(list(ids), skip_special_tokens=False)

    def think_end(self, ids: tuple[int, ...]) -> int | None:
        """The output index closing the thought of ``ids`` (``None``: none, or thinking off)."""
        return None if self.markers is None else think_end(ids, self.markers, tokenizer=self.backend.tok.resolved)

    def _inside_thought(self, ids: tuple[int, ...]) -> bool:
        return self.markers is not None and self.think_end(ids) is None

    def _forced_body(self, c: Completion) -> tuple[int, ...] | None:
        """The ids to continue after the forcing text, or ``None`` when ``c`` is not forced."""
        if c.finish_reason == "length":
            return c.ids
        if not self.spec.forcing.unanswered:
            return None
        end = self.think_end(c.ids)
        answer = c.ids if self.markers is None else () if end is None else c.ids[end + 1 :]
        if answer and parse_answer(self.backend.tok.decode_batch([answer])[0], complete=True) is not None:
            return None
        body = c.ids
        while body and body[-1] in self.specials:
            body = body[:-1]
        return body

    def _close(self, body: tuple[int, ...]) -> tuple[int, ...]:
        """What forcing appends before its text: the closing marker when ``body`` is still inside its thought."""
        markers = self.markers
        return markers.close_ids if markers is not None and self.think_end(body) is None else ()

    def force(
        self, prompts: list[list[int]], done: list[list[Completion]]
    ) -> tuple[list[list[Completion]], set[tuple[int, int]]]:
        """Continue every forced decode after the forcing text, greedily, to the end of its answer line; return
        the completions and the (request, sample) positions that were forced."""
        where = []
        for i, comps in enumerate(done):
            for j, c in enumerate(comps):
                body = self._forced_body(c)
                if body is not None:
                    where.append((i, j, body))
        if not where:
            return done, set()
        forced = [(i, j, body, self._close(body)) for i, j, body in where]
        reqs = [
            GenRequest(
                tuple(prompts[i]) + body + close + self.forcing_ids,
                1,
                self.spec.forcing.max_tokens,
                0,
                0.0,
                stop_ids=self.newlines,
            )
            for i, _, body, close in forced
        ]
        tails = self.backend.generate(reqs)
        out = [list(c) for c in done]
        for (i, j, body, close), tail in zip(forced, tails, strict=True):
            c = done[i][j]
            ids = body + close + self.forcing_ids + tail[0].ids
            out[i][j] = Completion(ids, c.finish_reason, c.prompt_ids, c.retokenized or tail[0].retokenized)
            if close:
                self.closed.add((i, j))
        return out, {(i, j) for i, j, _, _ in forced}

    def shard(self, shard: Shard, on_request: Callable[[list[Completion]], None] | None = None) -> list[dict]:
        """The records of one shard; ``on_request(completions)`` after each request that a backend reporting
        requests as they finish (``streams_requests``) completes."""
        spec, s = self.spec, self.spec.sampling
        prompts = [self.prompt(r.arm, r.lang, r.item, r.announced) for r in shard.requests]
        reqs = [
            GenRequest(
                tuple(p[1]),
                spec.k,
                r.cap,
                r.seed,
                s.temperature,
                s.top_p,
                s.top_k,
                text=p[0],
                user=p[3],
                name=f"{shard.id} item {r.item}" + (f" repeat {r.sample}" if r.sample else ""),
            )
            for r, p in zip(shard.requests, prompts, strict=True)
        ]
        if on_request is not None and getattr(self.backend, "streams_requests", False):
            done = self.backend.generate(reqs, on_request=on_request)
        else:
            done = self.backend.generate(reqs)
        forced: set[tuple[int, int]] = set()
        self.closed: set[tuple[int, int]] = set()  # (request, sample) whose thought forcing closed
        if spec.forcing.enabled:
            done, forced = self.force([p[1] for p in prompts], done)
        records = []
        texts = iter(self.backend.tok.decode_batch([c.ids for comps in done for c in comps]))
        for i, (r, (text, ids, template, _), comps) in enumerate(zip(shard.requests, prompts, done, strict=True)):
            for sample, c in enumerate(comps):
                # a server's chat template may differ from the local one: store the prompt the engine saw
                served = c.prompt_ids is not None
                records.append(
                    {
                        "model": spec.model_name,
                        "arm": r.arm,
                        "lang": r.lang,
                        "item": r.item,
                        "sample": r.sample + sample,
                        "seed": r.seed,
                        "cap": r.cap,
                        "announced": r.announced,
                        "announce_style": spec.announce_style if r.announced is not None else "none",
                        "forcing": spec.forcing.enabled,
                        "forced": (i, sample) in forced if spec.forcing.enabled else None,
                        "design": spec.design,
                        "template_id": template,
                        "prompt": self._prompt_text(c.prompt_ids) if served else text,
                        "prompt_ids": list(c.prompt_ids) if served else ids,
                        "output_ids": list(c.ids),
                        "text": next(texts),
                        "finish_reason": c.finish_reason,
                        "gold": self.item(r.lang, r.item).gold,
                        "task": spec.task,
                        "generator": self.backend.name,
                        "generator_version": self.backend.version,
                        "tokenizer": spec.tokenizer,
                        "retokenized": c.retokenized,
                        "thinking": spec.thinking,
                        "think_end": self.think_end(c.ids),
                        "forced_think_close": (i, sample) in self.closed,
                    }
                )
        return records


class _Progress:
    """Running counts of requests and output tokens for ``run_job``'s ``on_progress`` and ``on_tokens``."""

    def __init__(
        self, total: int, on_progress: Callable[[int, int | None], None] | None, on_tokens: Callable[[int], None] | None
    ) -> None:
        self.total, self.on_progress, self.on_tokens = total, on_progress, on_tokens
        self.wanted = on_progress is not None or on_tokens is not None
        self.done = self.tokens = 0
        self._report()

    def _report(self) -> None:
        if self.on_tokens is not None:
            self.on_tokens(self.tokens)
        if self.on_progress is not None:
            self.on_progress(self.done, self.total)

    def request(self, completions: list[Completion]) -> None:
        """One request finished (called from the backend's event loop, one at a time)."""
        self.done += 1
        self.tokens += sum(len(c.ids) for c in completions)
        self._report()

    def settle(self, done: int, tokens: int) -> None:
        """The exact counts at the end of a shard (forcing included); reported when they changed."""
        if (done, tokens) != (self.done, self.tokens):
            self.done, self.tokens = done, tokens
            self._report()


def _spec(job: JobSpec | str | os.PathLike[str], data_dir, tokenizers_dir, task) -> JobSpec:
    """The job's spec: given, or read from its file (with ``task`` in place of the file's)."""
    if isinstance(job, JobSpec):
        if task is not None:
            raise BadInputError("a task replaces the one of a spec file, not of a parsed JobSpec")
        return job
    return load_spec(job, data_dir=data_dir, tokenizers_dir=tokenizers_dir, task=task)


def dry_run(
    job: JobSpec | str | os.PathLike[str],
    ledger: str | os.PathLike[str] | Ledger | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    task: str | os.PathLike[str] | None = None,
) -> dict:
    """A job's counts (requests, records, shards, worst-case output tokens) and, given a ledger, shards done.

    The counts are worked out arithmetically (:func:`~mindcap_tok.generation.jobs.job_counts`); shards are only
    listed, one at a time, when the ledger already holds records of the job. ``task`` replaces the spec file's.
    """
    spec = _spec(job, data_dir, tokenizers_dir, task)
    out = job_counts(spec)
    if ledger is not None:
        stored = _stored_samples(ledger if isinstance(ledger, Ledger) else Ledger(ledger), spec)
        out["shards_done"] = sum(_shard_done(spec, s, stored) for s in iter_shards(spec)) if stored else 0
    return out


class StartedBackend(Protocol):
    """What a run reads of a started backend object: its name and its chat tokenizer (``tok``)."""

    @property
    def name(self) -> str: ...
    @property
    def tok(self) -> Any: ...


def run_job(
    job: JobSpec | str | os.PathLike[str],
    ledger: str | os.PathLike[str] | Ledger,
    *,
    backend: str | StartedBackend | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    server: ServerOverrides | None = None,
    task: str | os.PathLike[str] | None = None,
    hooks: JobHooks = JobHooks(),
) -> GenerateResult:
    """Generate the records of ``job`` (a spec or a TOML path) into ``ledger``; see the module docs.

    ``backend`` is ``vllm``, ``transformers``, ``server`` or a started backend object (reused across calls);
    by default ``server`` when the job has a ``[server]`` table or ``server.base_url`` is given, else ``vllm``.
    ``server`` (the command line's ``--base-url``, ``--timeout``, ``--max-retries``) replaces the job's
    ``[server]`` keys, for the server backend started by name only. ``task`` (a built-in task's name or a task
    file) replaces the spec file's ``task``. ``hooks`` (:class:`JobHooks`) are told of the start, each shard and
    the progress.
    """
    spec = _spec(job, data_dir, tokenizers_dir, task)
    server = server or ServerOverrides()
    if backend is None:
        backend = "server" if spec.server is not None or server.base_url else "vllm"
    server.check_backend(backend if isinstance(backend, str) else f"a started {backend.name} backend")
    options = server.apply(spec.server)
    plan = plan_job(spec)
    led = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    led.check_new_location()
    job_path = led.root / JOBS / f"{spec.name}.json"
    fresh = [p for p in (led.root, job_path.parent, job_path) if not os.path.lexists(p)]
    _write_job(led, plan)
    stored = _stored_samples(led, spec)
    todo = [s for s in plan.shards if not _shard_done(spec, s, stored)]
    name = backend if isinstance(backend, str) else backend.name
    result = GenerateResult(spec.name, str(led.root), name, len(plan.shards), skipped=len(plan.shards) - len(todo))
    if hooks.on_start is not None:
        hooks.on_start(plan, len(todo))
    if not todo:
        return result
    started: StartedBackend
    if isinstance(backend, str):
        try:
            started = load_backend(
                backend, spec.model, tokenizer_name=spec.tokenizer, engine=spec.engine, seed=spec.seed, server=options
            )
        except BaseException:
            _undo(fresh)
            raise
    else:
        started = backend
    runner = _Runner(spec, started, data_dir)
    progress = _Progress(sum(len(s.requests) for s in todo), hooks.on_progress, hooks.on_tokens)
    start = time.perf_counter()
    for index, shard in enumerate(todo):
        t0 = time.perf_counter()
        mark = (progress.done, progress.tokens)
        records = runner.shard(shard, progress.request if progress.wanted else None)
        written = led.append(records, started.tok.resolved, skip_existing=True)
        rows = sum(w.rows for w in written)
        tokens = sum(len(r["output_ids"]) for r in records)
        progress.settle(mark[0] + len(shard.requests), mark[1] + tokens)
        result.written += 1
        result.records += rows
        result.tokens += tokens
        result.shard_ids.append(shard.id)
        result.seconds = time.perf_counter() - start
        if hooks.on_shard is not None:
            hooks.on_shard(ShardDone(shard.id, index, len(todo), rows, tokens, time.perf_counter() - t0))
    return result
