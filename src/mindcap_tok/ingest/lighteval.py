"""Read lighteval runs (``lighteval ... --save-details``) as ledger records, with the ids the model sampled.

lighteval writes, per task, ``<out>/details/<model>/<date>/details_<task>_<date>.parquet``: one row per doc,
``Detail(doc, model_response, metric)`` as nested columns, and ``<out>/results/<model>/results_<date>.json``
beside it (the run's model config). Each response of a row (``model_response.text[j]``) is one record, sample
``j``:

- output ids: ``model_response.output_tokens[j]``, the ids the vLLM, transformers, sglang and TGI backends
  sampled, stored as logged (not ``retokenized``; no encoding cost). A response logged without ids (API
  backends) has its text re-encoded with the tokenizer and is marked ``retokenized``, as lm-eval's are; such a
  text may encode to more ids than its cap (kept, counted in :attr:`LightevalRecords.over_cap`). lighteval's
  transformers backend pads a batch's prompts and outputs to the longest one: those padding ids are stored as
  logged (a batch of one, or the vLLM backend, logs none).
- prompt: ``model_response.input`` when it is text, else the doc's query; prompt ids: ``input_tokens`` when
  logged (as sent), else the prompt encoded.
- cap: the run's ``generation_parameters.max_new_tokens`` (results file), which lighteval lets override the
  task, else the doc's ``generation_size``. A run with neither decoded up to the model's context length, which
  is no cap: refused.
- finish reason: ``length`` when the ids reach the cap, else ``stop``, marked ``finish_inferred`` (the details
  hold no stop reason; with sampled ids only a decode stopped by its last allowed token is ambiguous).
- task, language and arm from the task name (``doc.task_name``, else the file name): a built-in task's name and
  a language (lighteval's ``mgsm:de``, ``mgsm_deu``) is that task's native arm; the suite prefix (``lighteval|``)
  and the few-shot suffix (``|0``) are dropped, ``:`` read as ``_``, and the rest mapped as lm-eval task names
  are (:func:`mindcap_tok.ingest.lmeval.map_task`: ``mgsm_native_cot_de``, task files).
- item: the doc's ``id``; gold: ``doc.choices[doc.gold_index]`` in the task's type (MGSM: an integer).
- text: the response as lighteval logged (and scored) it, which its transformers backend cuts at the task's
  stop sequences, so it may end before the ids do.
- reasoning: where lighteval split a reasoning off a response of the file (``text_post_processed`` differs from
  ``text``, its reasoning-tag removal) or the ids hold the tokenizer's ``</think>`` token, the file's records are
  ``thinking`` and ``think_end`` is found in their ids. A response whose reasoning was logged apart
  (``reasonings``, API backends) without ids is refused: its length under the cap cannot be known.
- seed: the run's ``generation_parameters.seed`` (0 when unset); generator ``lighteval`` and its commit, where
  logged.

A results file naming a model that is not the tokenizer's is refused, and so are ids outside the tokenizer's
vocabulary (the run's model used another one). A folder is searched for details files recursively and may hold
nothing else a harness writes (other Parquet files, lm-eval samples, inspect logs). The details files of one
import may hold at most :data:`DETAILS_LIMIT` bytes together: their records are held in memory until the one
commit.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .._io import regular_file
from ..data.languages import resolve_language
from ..errors import BadInputError, MindcapError, first_line
from ..store import CLOSE_TEXT, think_end, think_markers
from ..tasks.load import builtin_tasks, load_task, load_task_files
from ..tasks.mgsm import parse_gold
from ..tasks.model import Task
from ..tokenization.load import ResolvedTokenizer
from ..tokenization.registry import registry_model_name
from .jsonl import human
from .lmeval import RESULTS_LIMIT, check_log_model
from .lmeval import map_task as map_lmeval_task

#: the most bytes the details files of one import may hold together (their records are held in memory)
DETAILS_LIMIT = 1 << 30
_DETAILS = re.compile(r"^details_(?P<task>.+)_(?P<date>[^_]+)\.parquet$")
#: files another harness (or another tool) writes, refused inside a folder of lighteval details
_OTHER_LOGS = re.compile(r"(\.parquet|\.eval|^samples_.+\.jsonl|\.json)$")
_RESULTS = re.compile(r"^results_.+\.json$")
#: the nested fields read, which a lighteval details file holds
_DOC_FIELDS = ("query", "choices", "gold_index", "id", "task_name", "generation_size")
_RESPONSE_FIELDS = ("input", "input_tokens", "text", "output_tokens", "text_post_processed", "reasonings")


@dataclass
class LightevalRecords:
    """Ledger records read from lighteval details: the files read, and how many re-encoded records (responses
    logged without ids) hold more ids than their cap."""

    records: list[dict] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    over_cap: int = 0
    #: where each record came from (``details_….parquet: row 3 (response 0)``), for messages
    sources: list[str] = field(default_factory=list)


def find_details(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The ``details_<task>_<date>.parquet`` files among ``paths`` (files, or folders searched recursively).

    A folder holding any other harness log (see the module docs) is refused, as is a FIFO, socket or device
    named like a details file."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if not p.is_dir())
            details = [p for p in inside if _DETAILS.match(p.name)]
            others = [p for p in inside if p not in details and _other_log(p.name)]
            if others:
                more = f" and {len(others) - 1} more" if len(others) > 1 else ""
                raise BadInputError(
                    f"{path}: the folder mixes lighteval details with other files ({others[0]}{more}); "
                    "give the details files, or a folder holding only one lighteval run"
                )
            if not details:
                raise BadInputError(f"{path}: no lighteval details file (details_<task>_<date>.parquet) in this folder")
            found += [regular_file(p, "lighteval details file") for p in details]
            continue
        regular_file(path, "lighteval details file")
        if not path.is_file():
            raise BadInputError(f"{path}: no such file or folder")
        _name(path)
        found.append(path)
    files = list(dict.fromkeys(found))
    total = sum(_size(p) for p in files)
    if total > DETAILS_LIMIT:
        raise BadInputError(
            f"{', '.join(map(str, paths))}: the details files hold {human(total)}, more than the "
            f"{human(DETAILS_LIMIT)} one import reads; import them in parts"
        )
    return files


def _name(path: Path) -> re.Match[str]:
    """The task and date parts of a details file's name, else a one-line error naming the file."""
    match = _DETAILS.match(path.name)
    if match is None:
        raise BadInputError(f"{path}: not a lighteval details file (details_<task>_<date>.parquet)")
    return match


def _other_log(name: str) -> bool:
    return bool(_OTHER_LOGS.search(name)) and not _RESULTS.match(name)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def results_file(details: Path) -> Path | None:
    """The ``results_<date>.json`` lighteval wrote with ``details`` (``<out>/results/<model>/``, the details
    being in ``<out>/details/<model>/<date>/``), if it is there."""
    date = _name(details)["date"]
    folder = details.parent
    if folder.name != date:
        return None
    model_parts: list[str] = []
    for parent in folder.parents:
        if parent.name == "details":
            candidate = parent.parent.joinpath("results", *reversed(model_parts), f"results_{date}.json")
            return regular_file(candidate, "lighteval results file") if os.path.lexists(candidate) else None
        model_parts.append(parent.name)
    return None


def _results(path: Path | None) -> dict[str, Any]:
    """The run's model config (``config_general``) from its results file, the fields read checked for types."""
    if path is None:
        return {}
    if _size(path) > RESULTS_LIMIT:
        raise BadInputError(f"{path}: more than {human(RESULTS_LIMIT)}, not a lighteval results file")
    try:
        data = json.loads(path.read_text("utf-8"))
    except RecursionError as exc:
        raise BadInputError(f"{path}: not a readable lighteval results file (JSON nested too deeply)") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInputError(f"{path}: not a readable lighteval results file ({exc})") from exc
    general = data.get("config_general") if isinstance(data, dict) else None
    if not isinstance(general, dict):
        raise BadInputError(f"{path}: not a lighteval results file (no 'config_general' object)")
    model = general.get("model_config") or {}
    params = model.get("generation_parameters") if isinstance(model, dict) else None
    params = params or {}
    if not isinstance(model, dict) or not isinstance(params, dict):
        raise BadInputError(f"{path}: config_general.model_config.generation_parameters is not an object")
    for key in ("max_new_tokens", "seed"):
        value = params.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise BadInputError(f"{path}: generation_parameters.{key} = {value!r} is not a non-negative integer")
    name = general.get("model_name")
    if name is not None and not isinstance(name, str):
        raise BadInputError(f"{path}: config_general.model_name = {name!r} is not a string")
    sha = general.get("lighteval_sha")
    return {
        "model": name or None,
        "max_new_tokens": params.get("max_new_tokens") or None,  # lighteval applies it only when truthy
        "seed": params.get("seed") or 0,
        "version": sha if isinstance(sha, str) and sha != "?" else "",
    }


def map_task(name: str, tasks: Sequence[Task]) -> tuple[str, str, str]:
    """``(task, FLORES code, arm)`` of a lighteval task name (see the module docs); ``tasks``: the user's tasks."""
    parts = name.split("|")
    if len(parts) > 1 and parts[-1].isdigit():
        parts = parts[:-1]  # the few-shot count
    base = parts[-1]  # without a suite prefix
    flat = base.replace(":", "_")
    stem, _, suffix = flat.rpartition("_")
    if stem in builtin_tasks():  # lighteval names a task by its own name and the language: its native arm
        try:
            return stem, resolve_language(suffix), load_task(stem).native
        except MindcapError as exc:
            raise BadInputError(f"lighteval task {name!r}: {exc}") from exc
    try:
        return map_lmeval_task(flat, tasks)
    except BadInputError as exc:
        raise BadInputError(f"lighteval task {name!r} (read as {flat!r}): {exc}", key="task") from exc


def _struct(table: pa.Table, name: str, fields: Sequence[str], path: Path) -> pa.StructArray:
    """Column ``name`` of a details table as one struct array, refused unless it holds ``fields``."""
    kind = table.schema.field(name).type if name in table.column_names else None
    missing = [f for f in fields if kind is None or not pa.types.is_struct(kind) or kind.get_field_index(f) < 0]
    if missing:
        what = f"no {name} column" if kind is None else f"{name} lacks {', '.join(missing)}"
        raise BadInputError(f"{path}: not a lighteval details file (rows of doc, model_response, metric; {what})")
    return pa.concat_arrays(table.column(name).chunks) if table.num_rows else pa.array([], kind)


def _read_details(path: Path) -> tuple[pa.StructArray, pa.StructArray]:
    """The doc and model_response columns of a details file, else one line saying what it is not."""
    try:
        table = pq.read_table(path, columns=["doc", "model_response"])
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, pa.ArrowInvalid) and "No match for FieldRef" in str(exc):
            table = pq.read_table(path)  # a Parquet file without lighteval's columns: said below
        else:
            raise BadInputError(f"{path}: not a readable Parquet file ({first_line(exc)})") from exc
    doc = _struct(table, "doc", _DOC_FIELDS, path)
    response = _struct(table, "model_response", _RESPONSE_FIELDS, path)
    for column, name, depth in ((response, "output_tokens", 2), (response, "input_tokens", 1)):
        kind = column.type.field(name).type
        for _ in range(depth):
            kind = kind.value_type if pa.types.is_list(kind) or pa.types.is_large_list(kind) else pa.null()
        if not (pa.types.is_integer(kind) or pa.types.is_null(kind)):
            raise BadInputError(f"{path}: model_response.{name} is not lists of token ids ({column.type.field(name)})")
    return doc, response


def _check_vocab(path: Path, response: pa.StructArray, tokenizer: ResolvedTokenizer) -> None:
    """Refuse ids outside the tokenizer's vocabulary: the run's model did not use ``tokenizer``."""
    for name, depth in (("output_tokens", 2), ("input_tokens", 1)):
        ids = response.field(name)
        for _ in range(depth):
            ids = pc.list_flatten(ids)
        if len(ids) == 0 or pa.types.is_null(ids.type):
            continue
        low, high = pc.min_max(ids).values()
        for bad in (low.as_py(), high.as_py()):
            if bad < 0 or bad >= tokenizer.vocab_size:
                raise BadInputError(
                    f"{path}: model_response.{name} holds id {bad}, outside the vocabulary of tokenizer "
                    f"{tokenizer.name} ({tokenizer.vocab_size} ids): the run's model used another tokenizer; "
                    "give its own (--tokenizer)"
                )


def _gold(task: Task, choices: object, gold_index: object, where: str) -> int | str:
    """The doc's gold, ``choices[gold_index]``, in its task's type."""
    index = gold_index[0] if isinstance(gold_index, list) and len(gold_index) == 1 else gold_index
    if not isinstance(choices, list) or not isinstance(index, int) or not 0 <= index < len(choices):
        raise BadInputError(f"{where}: gold_index = {gold_index!r} names none of the doc's choices (one gold)")
    gold = choices[index]
    if not isinstance(gold, str):
        raise BadInputError(f"{where}: the gold choice {gold!r} is not text")
    if task.gold.type != "integer":
        return gold.strip()
    try:
        return parse_gold(gold)
    except MindcapError as exc:
        raise BadInputError(f"{where}: gold {gold!r} is not an integer, but task {task.name!r} takes one") from exc


def _item(doc_id: object, where: str) -> int:
    if isinstance(doc_id, str) and doc_id.isascii() and doc_id.isdigit():
        return int(doc_id)
    raise BadInputError(f"{where}: doc id {doc_id!r} is not a non-negative integer")


def _file_records(
    path: Path, tokenizer: ResolvedTokenizer, user_tasks: Sequence[Task], out: LightevalRecords
) -> list[dict]:
    """The records of one details file (ids of responses logged without them still to encode)."""
    doc, response = _read_details(path)
    if len(doc) == 0:
        raise BadInputError(f"{path} holds no details rows")
    _check_vocab(path, response, tokenizer)
    run = _results(results_file(path))
    if run.get("model"):
        check_log_model(run["model"], tokenizer.name, where=str(results_file(path)))
    model = (registry_model_name(run["model"]) or run["model"]) if run.get("model") else tokenizer.name
    docs = {name: doc.field(name).to_pylist() for name in _DOC_FIELDS}
    resp = {name: response.field(name).to_pylist() for name in _RESPONSE_FIELDS}
    file_task = _name(path)["task"]
    mapped: dict[str, tuple[str, str, str, Task]] = {}
    records: list[dict] = []
    thinking = False
    for row in range(len(doc)):
        where = f"{path}: row {row}"
        lt_task = docs["task_name"][row] or file_task
        if lt_task not in mapped:
            task, lang, arm = map_task(lt_task, user_tasks)
            spec = next((t for t in user_tasks if t.name == task), None) or load_task(task)
            mapped[lt_task] = (task, lang, arm, spec)
        task, lang, arm, spec = mapped[lt_task]
        cap = run.get("max_new_tokens") or docs["generation_size"][row]
        if not cap:
            raise BadInputError(
                f"{where}: the run set no cap (doc.generation_size and the model's max_new_tokens are unset: "
                "lighteval decoded up to the context length); rerun with a generation_size or max_new_tokens"
            )
        texts, ids = resp["text"][row] or [], resp["output_tokens"][row] or []
        if not texts:
            raise BadInputError(f"{where}: model_response.text holds no response (not a generative task's details)")
        if ids and len(ids) != len(texts):
            raise BadInputError(f"{where}: {len(texts)} responses but {len(ids)} output_tokens lists")
        reasonings = resp["reasonings"][row] or []
        if not ids and any(isinstance(r, str) and r for r in reasonings):
            raise BadInputError(
                f"{where}: the reasoning was logged apart from the response and without token ids, so its length "
                "under the cap cannot be known; import runs of backends that log output_tokens"
            )
        post = resp["text_post_processed"][row]
        thinking = thinking or (post is not None and list(post) != list(texts))
        given = resp["input"][row]
        prompt = given if isinstance(given, str) else docs["query"][row]
        gold = _gold(spec, docs["choices"][row], docs["gold_index"][row], where)
        item = _item(docs["id"][row], where)
        for j, text in enumerate(texts):
            out.sources.append(f"{where} (response {j})")
            rec = {
                "model": model,
                "arm": arm,
                "lang": lang,
                "task": task,
                "item": item,
                "sample": j,
                "seed": run.get("seed", 0),
                "cap": cap,
                "template_id": f"lighteval:{lt_task}",
                "prompt": prompt,
                "text": text,
                "gold": gold,
                "generator": "lighteval",
                "generator_version": run.get("version", ""),
                "tokenizer": tokenizer.name,
                "retokenized": not ids,
                "finish_inferred": True,
            }
            if ids:
                rec["output_ids"] = ids[j]
            if resp["input_tokens"][row]:
                rec["prompt_ids"] = resp["input_tokens"][row]
            records.append(rec)
    _think(records, tokenizer, thinking, path)
    return records


def _think(records: list[dict], tokenizer: ResolvedTokenizer, split: bool, path: Path) -> None:
    """Mark the file's records ``thinking`` (with ``think_end`` from their ids) where lighteval split off a
    reasoning (``split``) or the ids hold the tokenizer's closing think token."""
    exact = [r for r in records if "output_ids" in r]
    try:
        markers = think_markers(tokenizer, None if not split else CLOSE_TEXT)
    except MindcapError:
        return  # no </think> token, and lighteval split off no reasoning
    if not split and not any(markers.close_id in r["output_ids"] for r in exact):
        return
    for rec in exact:
        rec["thinking"] = True
        rec["think_end"] = think_end(rec["output_ids"], markers, tokenizer=tokenizer)
    if len(exact) < len(records):
        raise BadInputError(f"{path}: reasoning responses logged without output_tokens: their thought cannot be found")


def read_lighteval_details(
    paths: Sequence[str | os.PathLike[str]],
    tokenizer: ResolvedTokenizer,
    *,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> LightevalRecords:
    """The ledger records of the lighteval details at ``paths`` (see the module docs); any problem is one line."""
    user_tasks = list(load_task_files(tasks).values())
    out = LightevalRecords()
    pending: list[dict] = []
    for path in find_details(paths):
        pending += _file_records(path, tokenizer, user_tasks, out)
        out.files.append(str(path))
    _complete(pending, tokenizer)
    out.records = pending
    out.over_cap = sum(r["retokenized"] and len(r["output_ids"]) > r["cap"] for r in pending)
    return out


def _complete(records: list[dict], tokenizer: ResolvedTokenizer) -> None:
    """Encode what the details lack (outputs of API backends, prompts logged without ids; one batched call
    each, a prompt shared by samples encoded once) and infer each finish reason from the output ids."""
    texts = [r for r in records if "output_ids" not in r]
    for rec, ids in zip(texts, tokenizer.encode_batch([r["text"] for r in texts]), strict=True):
        rec["output_ids"] = ids
    prompts = list(dict.fromkeys(r["prompt"] for r in records if "prompt_ids" not in r))
    encoded = dict(zip(prompts, tokenizer.encode_batch(prompts), strict=True))
    for rec in records:
        if "prompt_ids" not in rec:
            rec["prompt_ids"] = encoded[rec["prompt"]]
        rec["finish_reason"] = "length" if len(rec["output_ids"]) >= rec["cap"] else "stop"
