"""Import inspect_ai evaluation logs (``.eval`` and ``.json``) as ledger records.

Logs are read only through inspect's own reader (:func:`inspect_ai.log.read_eval_log`; a ``.eval`` log is a zip
of Zstandard members), imported lazily: without the ``inspect`` extra the import is a one-line error. Each
sample's completion becomes one record:

- model: the log's model without its provider prefix (``hf/``; ``openai-api/<service>/``), a registry model
  stored by registry name; when both it and ``tokenizer`` are registry models they must be the same one.
- task: ``task`` (a built-in name or a task file), else ``task`` in the sample's or the eval's metadata, else
  the eval's task name when it is a built-in task or one the lm-eval importer maps
  (:func:`mindcap_tok.ingest.lmeval.map_task`: ``mgsm_native_cot_de`` is task ``mgsm``, ``deu_Latn``, arm
  ``native``; a task file named as the eval's task, or as it without its language suffix). lang: ``lang`` in
  the sample's or the eval's metadata, else the one the task name gives (one of the two is required). arm:
  ``arm`` there, else the one the task name gives, else the task's native arm. item: ``item`` there, else the
  sample id (an integer). sample: the epoch minus one. gold: the sample's target, typed by the task (MGSM: an
  integer).
- cap: the ``max_tokens`` of the sample's model call as logged (the effective one), else the run's generate
  config; ``cap_inferred`` when the run set none (the provider's default applied). ``token_limit``: the
  sample's token limit (inspect 0.3.248+; all its model calls together), where set.
- text: the completion. Output ids: where the sample's last model event holds the raw response (``inspect eval
  --log-model-api``) with the ids the server sampled (vLLM's ``return_token_ids``: ``token_ids`` in the choice),
  those ids, as sampled (not ``retokenized``), and the prompt ids it returned (``prompt_token_ids``) where
  present; otherwise the texts encoded with ``tokenizer`` (``retokenized``). Re-encoded ids may exceed the cap
  (re-encoding is not sampling): they are kept unaltered and counted (:attr:`InspectLogs.over_cap`).
- finish reason: ``max_tokens`` -> ``length``, ``stop`` -> ``stop``; ``unknown`` (the ``hf/`` provider logs
  nothing else) -> ``length`` when the output ids reach the cap, else ``stop``, marked ``finish_inferred``.
- ``log_output_tokens`` and ``reasoning_tokens``: the log's ``output.usage`` counts, where present.
  ``reasoning_exhausted``: the decode was cut by the cap and the reasoning took it all (it reasoned: reasoning
  tokens counted or a reasoning part logged; and its completion is empty or its reasoning tokens are at least
  its output tokens), counted in :attr:`InspectLogs.reasoning_exhausted`.

Everything is read and checked before anything is written, and :func:`import_inspect` adds all records in one
commit: a malformed log, an unmappable task or a model mismatch leaves the ledger as it was.

inspect reads a whole log into memory, so each log is checked before it is handed to inspect
(:func:`check_log_size`): a ``.json`` log may hold at most :data:`LOG_LIMIT` bytes, and a ``.eval`` log's members
(stored, Deflate or Zstandard) at most :data:`MEMBER_LIMIT` bytes each and :data:`LOG_LIMIT` together once
inflated. The sizes the zip declares are checked first, then every member is inflated as a stream, counting
its bytes and stopping past the limit, so a zip that understates its sizes is caught too; memory stays at
about one chunk.
"""

from __future__ import annotations

import os
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from .._io import regular_file
from ..errors import BadInputError, MindcapError, MissingExtraError, first_line
from ..store import Ledger, ShardInfo
from ..tasks.load import builtin_tasks, load_task
from ..tasks.mgsm import parse_gold
from ..tasks.model import Task
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from ..tokenization.registry import registry_model_name
from .harness_logs import commit
from .jsonl import human
from .lmeval import map_task as map_lmeval_task

LOG_SUFFIXES = (".eval", ".json")
#: the most bytes one member of a ``.eval`` log (one sample's JSON, the header) may inflate to
MEMBER_LIMIT = 256 << 20
#: the most bytes a whole log may hold once inflated (a ``.json`` log: its size)
LOG_LIMIT = 1 << 30
#: bytes read or inflated at a time while checking a log
_CHUNK = 1 << 20
#: zip compression methods inspect writes: stored, Deflate, Zstandard
_STORED, _DEFLATED, _ZSTANDARD = 0, 8, 93
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, (version .. sizes), name length, extra length
#: inspect's stop reasons that say how a completion ended
_FINISH = {"stop": "stop", "max_tokens": "length"}


@dataclass
class InspectLogs:
    """The records read from inspect logs and what the import should report about them."""

    logs: list[str]
    records: list[dict]
    #: where each record came from (``log: sample 3 (epoch 1)``), for messages
    sources: list[str] = field(default_factory=list)
    over_cap: int = 0  # records whose re-encoded text holds more ids than the cap
    finish_inferred: int = 0
    cap_inferred: int = 0
    errored: int = 0  # samples that ended in an error (no completion), not imported
    sampled_ids: int = 0  # records whose output ids are the logged sampled ids (not re-encoded)
    reasoning_exhausted: int = 0  # records cut by the cap while their reasoning took all of it


@dataclass
class InspectImport:
    """What :func:`import_inspect` did: the logs' summary and the records added or already stored."""

    read: InspectLogs
    ledger: str
    added: int = 0
    skipped: int = 0
    shards: list[ShardInfo] = field(default_factory=list)


def _read_eval_log():
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:
        raise MissingExtraError("inspect-ai", "inspect", needed_by="importing inspect_ai logs") from exc
    return read_eval_log


def log_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The log files named by ``paths``: each a ``.eval``/``.json`` file or a folder of them (its own files).

    A FIFO, socket or device, given or inside a given folder under a log's name, is refused (never opened: a
    FIFO would block the reader); sub-folders of a log folder are not searched."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.suffix in LOG_SUFFIXES and not p.is_dir())
            if not inside:
                raise BadInputError(f"{path}: folder holds no inspect log (*.eval, *.json)")
            found += [regular_file(p, "inspect log") for p in inside]
            continue
        regular_file(path, "inspect log")
        if not path.is_file():
            raise BadInputError(f"{path}: no such log file or folder")
        if path.suffix not in LOG_SUFFIXES:
            raise BadInputError(f"{path}: not an inspect log (a .eval or .json file)")
        found.append(path)
    return found


def check_log_size(path: Path, *, member_limit: int | None = None, log_limit: int | None = None) -> None:
    """Refuse, in one line naming ``path``, a log that would inflate past the limits (see the module docs).

    ``member_limit`` and ``log_limit`` default to :data:`MEMBER_LIMIT` and :data:`LOG_LIMIT`. A ``.eval`` log
    that is not a zip inspect could read (encrypted members, another compression method, a damaged member) is
    refused here as well.
    """
    member_limit = MEMBER_LIMIT if member_limit is None else member_limit
    log_limit = LOG_LIMIT if log_limit is None else log_limit
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read the inspect log ({exc.strerror or exc})") from exc
    if path.suffix != ".eval":
        if size > log_limit:
            raise BadInputError(f"{path}: the inspect log holds {human(size)}, more than the limit {human(log_limit)}")
        return
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError) as exc:
        raise BadInputError(f"{path}: not a readable inspect log (not a zip archive: {first_line(exc)})") from exc
    for info in members:  # what the zip declares: refused before anything is inflated
        if info.file_size > member_limit:
            raise BadInputError(
                f"{path}: member {info.filename!a} declares {human(info.file_size)} inflated, more than the limit "
                f"{human(member_limit)} per member"
            )
    declared = sum(info.file_size for info in members)
    if declared > log_limit:
        raise BadInputError(
            f"{path}: its members declare {human(declared)} inflated, more than the limit {human(log_limit)} per log"
        )
    total = 0
    with pa.OSFile(str(path)) as raw:
        for info in members:  # what the members really hold: inflated as a stream, stopped past the limit
            size = _inflated_size(raw, info, min(member_limit, log_limit - total), path)
            if size > member_limit:
                raise BadInputError(
                    f"{path}: member {info.filename!a} inflates to more than the limit {human(member_limit)} per member"
                )
            total += size
            if total > log_limit:
                raise BadInputError(f"{path}: its members inflate to more than the limit {human(log_limit)} per log")


def _inflated_size(raw: pa.NativeFile, info: zipfile.ZipInfo, budget: int, path: Path) -> int:
    """The bytes member ``info`` inflates to, counted in chunks and no longer once past ``budget``."""
    where = f"{path}: member {info.filename!a}"
    if info.flag_bits & 0x1:
        raise BadInputError(f"{where} is encrypted (not an inspect log)")
    if info.compress_type not in (_STORED, _DEFLATED, _ZSTANDARD):
        raise BadInputError(f"{where} uses zip compression method {info.compress_type}, which inspect does not write")
    try:
        header = raw.get_stream(info.header_offset, _LOCAL_HEADER.size).read()
        magic, name_length, extra_length = _LOCAL_HEADER.unpack(header)
        if magic != b"PK\x03\x04":
            raise BadInputError(f"{where}: no local file header where the central directory points (not a zip)")
        start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
        data = raw.get_stream(start, info.compress_size)
        if info.compress_type == _ZSTANDARD:
            chunks = _zstd_chunks(data)
        elif info.compress_type == _DEFLATED:
            chunks = _deflate_chunks(data)
        else:
            chunks = iter(lambda: data.read(_CHUNK), b"")
        size = 0
        for chunk in chunks:
            size += len(chunk)
            if size > budget:
                break
    except (struct.error, ValueError, zlib.error, pa.ArrowException, OSError) as exc:
        raise BadInputError(f"{where} cannot be read ({first_line(exc)}): not a readable inspect log") from exc
    return size


def _deflate_chunks(data: pa.NativeFile) -> Iterator[bytes]:
    """A raw Deflate stream inflated at most :data:`_CHUNK` bytes at a time (zlib's ``max_length``)."""
    inflate = zlib.decompressobj(-15)
    pending = b""
    while not inflate.eof:
        if not pending:
            pending = data.read(_CHUNK)
            if not pending:
                raise zlib.error("the Deflate stream ends early")
        yield inflate.decompress(pending, _CHUNK)
        pending = inflate.unconsumed_tail


def _zstd_chunks(data: pa.NativeFile) -> Iterator[bytes]:
    """A Zstandard stream (one frame or several) decompressed :data:`_CHUNK` bytes at a time (pyarrow's
    streaming decoder, already a dependency, holds one chunk and the frame window)."""
    stream = pa.CompressedInputStream(data, "zstd")
    return iter(lambda: stream.read(_CHUNK), b"")


def _model_name(model: str) -> tuple[str, str]:
    """``(provider, model name)`` of an inspect model string (``openai-api/<service>/<name>`` drops the service)."""
    provider, _, rest = model.partition("/")
    if provider == "openai-api":
        rest = rest.partition("/")[2]
    return provider, rest or model


def _metadata(sample, eval_meta: Mapping, key: str):
    value = (sample.metadata or {}).get(key)
    return eval_meta.get(key) if value is None else value


def mapped_task(name: str, given: Task | None) -> tuple[Task, str, str] | None:
    """``(task, language, arm)`` of an eval's task name the lm-eval importer maps (``mgsm_native_cot_de``; with
    ``given``, a task file named as the eval's task or as it without its language suffix), else ``None``."""
    try:
        task, lang, arm = map_lmeval_task(name, [given] if given is not None else [])
    except MindcapError:
        return None
    return (given if given is not None and given.name == task else load_task(task)), lang, arm


def _task_of(log, sample, given: Task | None, where: str) -> tuple[Task, str | None, str | None]:
    """The sample's task, and the language and arm its eval's task name gives (``None`` where it gives none)."""
    eval_name = log.eval.task.rpartition("@")[2].rpartition("/")[2]
    mapped = mapped_task(eval_name, given)
    lang, arm = (mapped[1], mapped[2]) if mapped is not None else (None, None)
    if given is not None:
        return given, lang, arm
    named = _metadata(sample, log.eval.metadata or {}, "task")
    if named is None:
        if mapped is not None:
            return mapped
        named = eval_name
    if not isinstance(named, str):
        raise BadInputError(f"{where}: metadata task = {named!r} is not a task name")
    if named not in builtin_tasks():
        raise BadInputError(
            f"{where}: inspect task {named!r} is not a built-in task ({', '.join(builtin_tasks())}) nor an lm-eval "
            "task name mindcap-tok maps; pass --task NAME|FILE or set 'task' in the eval's or the samples' metadata"
        )
    return load_task(named), lang, arm


def _gold(target, task: Task, where: str) -> int | str:
    values = [target] if isinstance(target, str) else list(target)
    if len(values) != 1 or not isinstance(values[0], str):
        raise BadInputError(f"{where}: target {target!r} is not one gold answer")
    if task.gold.type != "integer":
        return values[0]
    try:
        return parse_gold(values[0])
    except MindcapError as exc:
        raise BadInputError(
            f"{where}: target {values[0]!r} is not an integer, but task {task.name!r} takes one"
        ) from exc


#: a sample id spelled as a non-negative integer (ASCII digits only: ``str.isdigit`` admits ``'²'``)
_ITEM_ID = re.compile(r"[0-9]{1,18}")


def sample_item(sample, where: str) -> int:
    """The item of an inspect sample: ``item`` in its metadata, else its id, an integer or one spelled in ASCII
    digits (a log's ids are often strings); anything else is a :class:`BadInputError` that names ``where``."""
    item = (sample.metadata or {}).get("item", sample.id)
    if isinstance(item, str) and _ITEM_ID.fullmatch(item):
        item = int(item)
    if not isinstance(item, int) or isinstance(item, bool):
        raise BadInputError(f"{where}: sample id {item!r} is not an integer; set 'item' in the sample's metadata")
    return item


def _prompt(sample) -> str:
    """The text the model was given: every message before the completion (the input when none is logged)."""
    messages = list(sample.messages or [])
    while messages and messages[-1].role == "assistant":
        messages.pop()
    if not messages:
        return sample.input if isinstance(sample.input, str) else "\n\n".join(m.text for m in sample.input)
    return "\n\n".join(m.text for m in messages)


def _event_cap(sample) -> int | None:
    """The ``max_tokens`` of the sample's last model call (inspect fills in the provider default there)."""
    caps = [e.config.max_tokens for e in sample.events or [] if getattr(e, "event", None) == "model"]
    return caps[-1] if caps else None


def _int_list(value: object) -> bool:
    """Whether ``value`` is a list of integers (token ids; booleans are not)."""
    return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value)


def response_ids(sample, where: str) -> tuple[list[int] | None, list[int] | None]:
    """``(output ids, prompt ids)`` the raw response of the sample's last model call holds (vLLM's
    ``return_token_ids``: ``token_ids`` in the first choice, ``prompt_token_ids`` there or at the top), each
    ``None`` where it is not logged (no ``--log-model-api``, another server)."""
    models = [e for e in sample.events or [] if getattr(e, "event", None) == "model"]
    call = models[-1].call if models else None
    response = call.response if call is not None else None
    if not isinstance(response, dict):
        return None, None
    choices = response.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    if choice is None:
        return None, None
    found = []
    for key, value in (
        ("token_ids", choice.get("token_ids")),
        ("prompt_token_ids", choice.get("prompt_token_ids", response.get("prompt_token_ids"))),
    ):
        if value is not None and not _int_list(value):
            raise BadInputError(f"{where}: the model call's response holds {key} that is not a list of token ids")
        found.append(value)
    return found[0], found[1]


def _reasoned(sample) -> bool:
    """Whether the sample's completion message holds a reasoning part (a provider that does not count them)."""
    message = sample.output.message if sample.output.choices else None
    content = message.content if message is not None else None
    return isinstance(content, list) and any(getattr(part, "type", None) == "reasoning" for part in content)


def _exhausted(finish: str | None, completion: str, usage, reasoned: bool) -> bool:
    """Whether a decode cut by the cap spent it all on reasoning: it reasoned (reasoning tokens counted, or a
    reasoning part logged) and its completion is empty or its reasoning tokens are at least its output tokens."""
    reasoning = usage.reasoning_tokens if usage is not None else None
    output = usage.output_tokens if usage is not None else None
    if finish != "length" or not (reasoned or (reasoning or 0) > 0):
        return False
    return not completion.strip() or (reasoning is not None and output is not None and reasoning >= output)


def _log_records(log, where: str, task: Task | None, model: str) -> tuple[list[dict], list[str], int]:
    """The records of one log (ids and some finish reasons still to settle), where each came from, and the
    number of errored samples."""
    config = log.plan.config if log.plan is not None else None
    run_cap = config.max_tokens if config is not None else None
    run_cap = run_cap if run_cap is not None else log.eval.model_generate_config.max_tokens
    seed = next((c.seed for c in (config, log.eval.model_generate_config) if c is not None and c.seed is not None), 0)
    provider = _model_name(log.eval.model)[0]
    version = (log.eval.packages or {}).get("inspect_ai", "")
    eval_meta = log.eval.metadata or {}
    records, sources, errored = [], [], 0
    for sample in log.samples or []:
        at = f"{where}: sample {sample.id!r} (epoch {sample.epoch})"
        if sample.error is not None:
            errored += 1
            continue
        sample_task, named_lang, named_arm = _task_of(log, sample, task, at)
        lang = _metadata(sample, eval_meta, "lang") or named_lang
        if not isinstance(lang, str):
            raise BadInputError(f"{at}: no language; set 'lang' in the sample's or the eval's metadata")
        cap = _event_cap(sample) or run_cap
        if cap is None:
            raise BadInputError(f"{at}: the log holds no max_tokens (no generate config, no model event)")
        reason = sample.output.stop_reason
        if reason not in (*_FINISH, "unknown"):
            raise BadInputError(f"{at}: stop reason {reason!r} is neither a stop nor the cap (cannot be imported)")
        usage = sample.output.usage
        output_ids, prompt_ids = response_ids(sample, at)
        sources.append(at)
        records.append(
            {
                "model": model,
                "arm": _metadata(sample, eval_meta, "arm") or named_arm or sample_task.native,
                "lang": lang,
                "task": sample_task.name,
                "item": sample_item(sample, at),
                "sample": sample.epoch - 1,
                "seed": seed,
                "cap": cap,
                "prompt": _prompt(sample),
                "text": sample.output.completion,
                "finish_reason": _FINISH.get(reason),
                "gold": _gold(sample.target, sample_task, at),
                "generator": f"inspect:{provider}",
                "generator_version": version,
                "retokenized": output_ids is None,
                "finish_inferred": reason == "unknown",
                "cap_inferred": run_cap is None,
                "log_output_tokens": usage.output_tokens if usage is not None else None,
                "reasoning_tokens": usage.reasoning_tokens if usage is not None else None,
                "token_limit": getattr(sample, "token_limit", None),
                "_exhausted": (usage, _reasoned(sample)),
                **({} if output_ids is None else {"output_ids": output_ids}),
                **({} if prompt_ids is None else {"prompt_ids": prompt_ids}),
            }
        )
    return records, sources, errored


def read_inspect_logs(
    paths: Sequence[str | os.PathLike[str]],
    *,
    tokenizer: str | ResolvedTokenizer,
    task: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
) -> InspectLogs:
    """Ledger records (and a summary) of the inspect logs at ``paths`` (files or folders); see the module docs.

    ``tokenizer`` encodes prompts and completions; ``task`` (a built-in name or task file) applies to logs whose
    task is not a built-in one. Any problem is a one-line :class:`MindcapError` naming the log (and sample).
    """
    files = log_files(paths)
    read_eval_log = _read_eval_log()
    for path in files:  # every log before inspect reads any: one it must not read is refused first
        check_log_size(path)
    tok = load_tokenizer(tokenizer, tokenizers_dir) if isinstance(tokenizer, str) else tokenizer
    given = load_task(task) if task is not None else None
    result = InspectLogs(logs=[str(p) for p in files], records=[])
    for path in files:
        try:
            log = read_eval_log(str(path))
        except Exception as exc:  # inspect raises many kinds (zip, JSON, pydantic): each is a malformed log
            raise BadInputError(f"{path}: not a readable inspect log ({first_line(exc)})") from exc
        name = _model_name(log.eval.model)[1]
        known, wanted = registry_model_name(name), registry_model_name(tok.name)
        if known is not None and wanted is not None and known != wanted:
            raise BadInputError(f"{path}: the log's model is {name} ({known}), but --tokenizer is {tok.name}")
        records, sources, errored = _log_records(log, str(path), given, known or name)
        result.records += records
        result.sources += sources
        result.errored += errored
    if not result.records:
        raise BadInputError(f"{', '.join(result.logs)}: no completed samples to import")
    _encode(result.records, tok)
    for rec in result.records:
        if rec["finish_reason"] is None:  # not logged: the cap bound when the ids reach it
            rec["finish_reason"] = "length" if len(rec["output_ids"]) >= rec["cap"] else "stop"
        rec["reasoning_exhausted"] = _exhausted(rec["finish_reason"], rec["text"], *rec.pop("_exhausted"))
        result.over_cap += rec["retokenized"] and len(rec["output_ids"]) > rec["cap"]
        result.finish_inferred += rec["finish_inferred"]
        result.cap_inferred += rec["cap_inferred"]
        result.sampled_ids += not rec["retokenized"]
        result.reasoning_exhausted += rec["reasoning_exhausted"]
    return result


def _encode(records: list[dict], tok: ResolvedTokenizer) -> None:
    """Prompt and output ids of the records the log holds none for, by encoding their texts (one batch each)."""
    for key, text in (("prompt_ids", "prompt"), ("output_ids", "text")):
        missing = [r for r in records if key not in r]
        for rec, ids in zip(missing, tok.encode_batch([r[text] for r in missing]), strict=True):
            rec[key] = ids
    for rec in records:
        rec["tokenizer"] = tok.name


def read_logs(
    paths: Sequence[str | os.PathLike[str]],
    tokenizer: ResolvedTokenizer,
    *,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> InspectLogs:
    """:func:`read_inspect_logs` as :func:`mindcap_tok.ingest.harness_logs.import_logs` calls a reader (at most
    one task file: it applies to every log whose task is not built in)."""
    if len(tasks) > 1:
        raise BadInputError("inspect logs take one task file (the task of logs whose task is not built in)")
    return read_inspect_logs(paths, tokenizer=tokenizer, task=tasks[0] if tasks else None)


def import_inspect(
    paths: Sequence[str | os.PathLike[str]],
    ledger: str | os.PathLike[str] | Ledger,
    *,
    tokenizer: str | ResolvedTokenizer,
    task: str | os.PathLike[str] | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
) -> InspectImport:
    """Add the records of the inspect logs at ``paths`` to ``ledger`` (created if absent) in one commit.

    Records already stored identically are skipped (rerunning an import adds nothing); a stored record with the
    same key but other content is an error, as in :func:`~mindcap_tok.ingest.jsonl.import_jsonl`.
    """
    led = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    led.check_new_location()
    tok = load_tokenizer(tokenizer, tokenizers_dir) if isinstance(tokenizer, str) else tokenizer
    read = read_inspect_logs(paths, tokenizer=tok, task=task, tokenizers_dir=tokenizers_dir)
    shards = commit(led, read.records, tok=tok, name=", ".join(map(str, paths)), sources=read.sources)
    added = sum(s.rows for s in shards)
    return InspectImport(read, str(led.root), added=added, skipped=len(read.records) - added, shards=shards)
