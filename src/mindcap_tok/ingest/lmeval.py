"""Read lm-evaluation-harness runs (``lm_eval ... --log_samples``) as ledger records.

A run's output folder holds ``results_<time>.json`` and one ``samples_<task>_<time>.jsonl`` per task; lm-eval
writes one sample line per filter (MGSM: ``strict-match`` and ``flexible-extract``), each with the same
response, so the lines are merged by ``doc_id`` (lines of one doc that disagree on the responses are refused).
Each response of a sample (``resps[0][j]``) is one record, sample ``j``:

- task, language and arm from the lm-eval task name: ``mgsm_native_cot_<xx>`` is task ``mgsm``, arm
  ``native``; ``mgsm_en_cot_<xx>`` (the problem in L, an English chain of thought) is arm ``pivot`` (reason in
  English, answer in L); ``<xx>`` is the language (``th`` -> ``tha_Thai``). Any other task needs a task file
  (``tasks``) named as the lm-eval task (``_`` written ``-``, as task names are spelled: ``arc_easy`` ->
  ``arc-easy``), its only language or the one the name ends with, or named as the name without its language
  suffix (``mytask_de`` -> task ``mytask``, ``deu_Latn``); the records take the task file's name and native arm;
- the cap from the sample's generation kwargs (``max_gen_toks``), else the run's task config, else
  lm-eval's default for the ``hf`` and ``vllm`` models, :data:`LMEVAL_DEFAULT_CAP`, marked ``cap_inferred``;
- the prompt from the sample's context and the gold from its ``target``;
- output and prompt ids by encoding the texts with the tokenizer (marked ``retokenized``), and a finish reason
  inferred from them (``length`` when the ids reach the cap, else ``stop``; marked ``finish_inferred``): the log
  holds no stop reason or token count. A text may encode to more ids than the cap (re-encoding is not
  sampling): it is kept as it is, and counted (:attr:`LmevalRecords.over_cap`);
- seed: the run's ``torch_seed`` (0 without a results file); generator ``lm-eval`` and its version.

Reasoning runs: when the results file's ``model_args`` set ``think_end_token`` (or ``enable_thinking``), lm-eval
logs in ``resps`` only the text after the **last** think close (its ``postprocess_generated_text``), with the
task's stop sequences applied to that text after generation (its vLLM model then sends the server only the end
token as a stop). This project (with vLLM's reasoning parsers) closes a thought at the **first** close, and
counts every token of the decode against the cap. Such records are marked ``output_partial``: their ``n_tokens``
is a lower bound of the decode's length, their finish reason ``unknown`` (never inferred, so no cap hit is
counted as a stop), and they are not ``thinking`` records (no thought is stored).

A prompt that lm-eval shortened to fit the model's context (``maybe_truncate``, or the ``hf`` model's left
truncation: when the encoded prompt and the cap exceed the context length) is counted
(:attr:`LmevalRecords.prompt_truncated`) where ``model_args`` set the length (``max_length`` or
``max_model_len``); otherwise the log does not tell. The stored prompt is the whole logged context.

A results file naming a model (``model_args`` ``pretrained=...``) that is not the tokenizer's is refused. The
model is stored by registry name where the name is a registry model's (``Qwen/Qwen3-8B`` -> ``qwen3-8b``), any
other name as given (``my-org/qwen3-8b-ft``).

Every record of every file is held in memory until the one commit, so the samples files may hold at most
:data:`SAMPLES_LIMIT` bytes together, a results file :data:`RESULTS_LIMIT` bytes and a line
:data:`~mindcap_tok.ingest.jsonl.LINE_LIMIT` bytes, each checked before it is parsed. A FIFO, socket or
device named like a samples or results file is refused (never opened).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._io import regular_file
from ..data.languages import resolve_language
from ..errors import BadInputError, MindcapError
from ..tasks.load import lmeval_names, load_task, load_task_files
from ..tasks.mgsm import parse_gold
from ..tasks.model import Task
from ..tokenization.load import ResolvedTokenizer
from ..tokenization.registry import registry_model_name
from .jsonl import _lines, human

#: ``max_gen_toks`` of lm-eval's ``hf`` and ``vllm`` models when a task sets none (lm-eval 0.4.13)
LMEVAL_DEFAULT_CAP = 256
#: the most bytes the samples files of one import may hold together (their records are held in memory)
SAMPLES_LIMIT = 1 << 30
#: the most bytes a results file may hold (lm-eval writes a few hundred KB)
RESULTS_LIMIT = 64 << 20
_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<time>[^_]+)\.jsonl$")
_RESULTS = re.compile(r"^results_(?P<time>.+)\.json$")


@dataclass
class LmevalRecords:
    """Ledger records read from lm-eval logs: the files read, and how many records re-encode past their cap."""

    records: list[dict] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    over_cap: int = 0
    #: where each record came from (``samples_….jsonl:3 (response 0)``), for messages
    sources: list[str] = field(default_factory=list)
    #: records whose prompt with the cap exceeds the context length the run set (lm-eval shortened the prompt)
    prompt_truncated: int = 0


def _samples_name(path: Path) -> re.Match[str]:
    """The task and time parts of a samples file's name, else a one-line error naming the file."""
    match = _SAMPLES.match(path.name)
    if match is None:
        raise BadInputError(f"{path}: not an lm-eval samples file (samples_<task>_<time>.jsonl)")
    return match


def find_logs(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[Path, Path | None]]:
    """Each ``samples_<task>_<time>.jsonl`` among ``paths`` (files, or folders searched recursively) with the
    ``results_<time>.json`` beside it, if there is one. A FIFO, socket or device named like either is refused."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.rglob("samples_*.jsonl") if not p.is_dir())
            if not inside:
                raise BadInputError(f"{path}: no lm-eval samples file (samples_<task>_<time>.jsonl) in this folder")
            found += [regular_file(p, "lm-eval samples file") for p in inside]
            continue
        regular_file(path, "lm-eval samples file")
        if not path.is_file():
            raise BadInputError(f"{path}: no such file or folder")
        found.append(path)
    out = []
    for samples in dict.fromkeys(found):
        time = _samples_name(samples)["time"]
        results = samples.with_name(f"results_{time}.json")
        out.append((samples, regular_file(results, "lm-eval results file") if os.path.lexists(results) else None))
    total = sum(_size(samples) for samples, _ in out)
    if total > SAMPLES_LIMIT:
        raise BadInputError(
            f"{', '.join(str(p) for p in paths)}: the samples files hold {human(total)}, more than the "
            f"{human(SAMPLES_LIMIT)} one import reads; import them in parts"
        )
    return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _results(path: Path | None) -> dict:
    """The results file's object, its fields that are read checked for their types."""
    if path is None:
        return {}
    if _size(path) > RESULTS_LIMIT:
        raise BadInputError(f"{path}: more than {human(RESULTS_LIMIT)}, not an lm-eval results file")
    try:
        data = json.loads(path.read_text("utf-8"))
    except RecursionError as exc:
        raise BadInputError(f"{path}: not a readable lm-eval results file (JSON nested too deeply)") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInputError(f"{path}: not a readable lm-eval results file ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("configs", {}), dict):
        raise BadInputError(f"{path}: not an lm-eval results file (expected an object with 'configs')")
    config = data.get("config")
    args = config.get("model_args") if isinstance(config, dict) else None
    shapes = [
        ("config", config, dict),
        ("config.model_args", args, str | dict),
        *((f"config.model_args.{k}", args.get(k), str) for k in ("pretrained", "model") if isinstance(args, dict)),
        ("model_name", data.get("model_name"), str),
        ("lm_eval_version", data.get("lm_eval_version"), str),
        ("torch_seed", data.get("torch_seed"), int),
    ]
    for task, task_config in data.get("configs", {}).items():
        shapes.append((f"configs.{task}", task_config, dict))
        if isinstance(task_config, dict):
            shapes.append((f"configs.{task}.generation_kwargs", task_config.get("generation_kwargs"), dict))
    for key, value, kind in shapes:
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise BadInputError(f"{path}: {key} = {_short(value)} is not {_KIND_WORDS[kind]}")
    return data


_KIND_WORDS = {dict: "an object", str: "a string", int: "an integer", str | dict: "a string or an object"}


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def log_model(results: dict) -> str | None:
    """The model a results file names: ``pretrained=`` (or ``model=``) of its ``model_args``, else ``model_name``."""
    args = (results.get("config") or {}).get("model_args")
    if isinstance(args, dict):
        args = ",".join(f"{k}={v}" for k, v in args.items())
    if isinstance(args, str):
        for part in args.split(","):
            key, _, value = part.partition("=")
            if key.strip() in ("pretrained", "model") and value.strip():
                return value.strip()
    name = results.get("model_name")
    return name if isinstance(name, str) and name else None


def _model_keys(name: str) -> set[str]:
    """Names one model goes by: its registry name, its resolved path, and its last path part (lower case)."""
    keys = {name.rstrip("/").rsplit("/", 1)[-1].lower()}
    for candidate in (name, name.rstrip("/").rsplit("/", 1)[-1]):
        canonical = registry_model_name(candidate)
        if canonical is not None:
            keys.add(canonical.lower())
    path = Path(name).expanduser()
    if path.exists():
        keys.add(str(path.resolve()))
    return keys


def check_log_model(logged: str, tokenizer: str, *, where: str) -> None:
    """Refuse a log whose model is not the tokenizer's (no registry name, path or last path part in common)."""
    if not _model_keys(logged) & _model_keys(tokenizer):
        raise BadInputError(
            f"{where}: the run's model is {logged!r}, but --tokenizer is {tokenizer!r}; give the model's tokenizer"
        )


def map_task(name: str, tasks: Sequence[Task]) -> tuple[str, str, str]:
    """``(task, FLORES code, arm)`` of an lm-eval task name (see the module docs); ``tasks``: the user's tasks."""
    for prefix, (task, arm) in lmeval_names().items():
        if name.startswith(prefix):
            try:
                return task, resolve_language(name.removeprefix(prefix)), arm
            except MindcapError as exc:
                raise BadInputError(f"lm-eval task {name!r}: {exc}") from exc
    given = {t.name: t for t in tasks}
    stem, _, suffix = name.rpartition("_")
    try:
        named = resolve_language(suffix) if stem else None
    except MindcapError:
        named = None
    for candidate in (name, name.replace("_", "-")):
        if candidate in given:
            spec = given[candidate]
            lang = spec.languages[0] if len(spec.languages) == 1 else named
            if lang is None or lang not in spec.languages:
                raise BadInputError(f"lm-eval task {name!r}: the name ends in none of its task file's languages")
            return spec.name, lang, spec.native
    stem_spec = given.get(stem.replace("_", "-"))
    if stem_spec is not None and named is not None and named in stem_spec.languages:
        return stem_spec.name, named, stem_spec.native
    raise BadInputError(
        f"lm-eval task {name!r} is not one mindcap-tok maps "
        f"({', '.join(prefix + '<lang>' for prefix in lmeval_names())}); "
        f"give its task file (--task FILE) named {name.replace('_', '-')!r}, or {stem.replace('_', '-')!r} with "
        "the language the name ends with",
        key="task",
    )


def model_args(results: dict) -> dict[str, str]:
    """The results file's ``model_args`` as ``{key: value}`` (lm-eval's ``key=value,...`` string, or its object)."""
    args = (results.get("config") or {}).get("model_args")
    if isinstance(args, dict):
        return {str(k): str(v) for k, v in args.items()}
    out = {}
    for part in args.split(",") if isinstance(args, str) else ():
        key, eq, value = part.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def logs_partial_output(args: dict[str, str]) -> bool:
    """Whether a run with these ``model_args`` logs only the text after the last think close (see the module
    docs): ``think_end_token`` set, or ``enable_thinking`` true."""
    return bool(args.get("think_end_token")) or args.get("enable_thinking", "").lower() in ("true", "1", "yes")


def context_length(args: dict[str, str], where: str) -> int | None:
    """The context length a run's ``model_args`` set (``max_length`` or ``max_model_len``), else ``None``."""
    for key in ("max_length", "max_model_len"):
        value = args.get(key)
        if value is not None and value != "None":
            if not value.isdigit() or int(value) < 1:
                raise BadInputError(f"{where}: model_args {key} = {_short(value)} is not a positive integer")
            return int(value)
    return None


def _cap(line_kwargs: dict | None, config: dict, where: str, results: Path | None) -> tuple[int, bool]:
    """The cap of a sample (its kwargs, else its task's config in the results file) and whether it is inferred."""
    for kwargs, at in ((line_kwargs, where), (config.get("generation_kwargs"), f"{results}: configs")):
        if isinstance(kwargs, dict) and kwargs.get("max_gen_toks") is not None:
            cap = kwargs["max_gen_toks"]
            if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
                raise BadInputError(f"{at}: max_gen_toks = {_short(cap)} is not a positive integer")
            return cap, False
    return LMEVAL_DEFAULT_CAP, True


def _gold(task: Task, target: object, where: str) -> int | str:
    """The sample's gold in its task's type: an integer task's read as MGSM golds are (``"1,000"`` -> 1000)."""
    if isinstance(target, list) and len(target) == 1:
        target = target[0]
    if not isinstance(target, str | int) or isinstance(target, bool):
        raise BadInputError(f"{where}: target = {target!r} is not a string or an integer")
    if task.gold.type == "integer":
        try:
            return parse_gold(str(target))
        except MindcapError as exc:
            message = f"{where}: target {target!r} is not an integer, but task {task.name!r} takes one"
            raise BadInputError(message) from exc
    return str(target)


def _sample(obj: dict, where: str) -> tuple[int, object, list[str], str, dict | None]:
    """``(doc_id, target, responses, prompt, generation kwargs)`` of one sample line, else a one-line error."""
    missing = [k for k in ("doc_id", "target", "resps", "arguments") if k not in obj]
    if missing:
        raise BadInputError(f"{where}: not an lm-eval sample line (lacks {', '.join(missing)})")
    doc_id, resps, args = obj["doc_id"], obj["resps"], obj["arguments"]
    if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
        raise BadInputError(f"{where}: doc_id = {doc_id!r} is not a non-negative integer")
    if not (isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list) and resps[0]):
        raise BadInputError(f"{where}: resps is not one generation request's list of responses ([[text, ...]])")
    if not all(isinstance(r, str) for r in resps[0]):
        raise BadInputError(f"{where}: resps holds a response that is not text")
    first = args.get("gen_args_0") if isinstance(args, dict) else None
    if not isinstance(first, dict) or not isinstance(first.get("arg_0"), str):
        raise BadInputError(f"{where}: arguments lacks gen_args_0.arg_0 (the prompt)")
    kwargs = first.get("arg_1")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise BadInputError(f"{where}: gen_args_0.arg_1 = {_short(kwargs)} is not an object (the generation kwargs)")
    return doc_id, obj["target"], resps[0], first["arg_0"], kwargs


def read_lmeval_logs(
    paths: Sequence[str | os.PathLike[str]],
    tokenizer: ResolvedTokenizer,
    *,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> LmevalRecords:
    """The ledger records of the lm-eval logs at ``paths`` (see the module docs); any problem is one line."""
    user_tasks = list(load_task_files(tasks).values())
    out = LmevalRecords()
    pending: list[dict] = []
    for samples, results_path in find_logs(paths):
        results = _results(results_path)
        logged = log_model(results)
        if logged is not None:
            check_log_model(logged, tokenizer.name, where=str(results_path))
        model = (registry_model_name(logged) or logged) if logged else tokenizer.name
        lm_task = _samples_name(samples)["task"]
        task, lang, arm = map_task(lm_task, user_tasks)
        spec = next((t for t in user_tasks if t.name == task), None) or load_task(task)
        config = (results.get("configs") or {}).get(lm_task) or {}
        seed = results.get("torch_seed")
        args = model_args(results)
        partial = logs_partial_output(args)
        context = context_length(args, str(results_path))
        seen: dict[int, tuple[list[str], int]] = {}
        try:
            stream = open(samples, "rb")  # noqa: SIM115 - closed by the with below; an open error is one line
        except OSError as exc:
            raise BadInputError(f"cannot read {samples}: {exc.strerror or exc}") from exc
        with stream:
            for number, obj, _ in _lines(stream, str(samples)):
                where = f"{samples}:{number}"
                doc_id, target, texts, prompt, kwargs = _sample(obj, where)
                if doc_id in seen:
                    if seen[doc_id][0] != texts:
                        raise BadInputError(
                            f"{where}: doc_id {doc_id} has other responses than at line {seen[doc_id][1]}"
                        )
                    continue  # the same sample under another filter
                seen[doc_id] = (texts, number)
                cap, inferred = _cap(kwargs, config, where, results_path)
                gold = _gold(spec, target, where)
                for j, text in enumerate(texts):
                    out.sources.append(f"{where} (response {j})")
                    pending.append(
                        {
                            "model": model,
                            "arm": arm,
                            "lang": lang,
                            "task": task,
                            "item": doc_id,
                            "sample": j,
                            "seed": 0 if seed is None else seed,
                            "cap": cap,
                            "cap_inferred": inferred,
                            "template_id": f"lm-eval:{lm_task}",
                            "prompt": prompt,
                            "text": text,
                            "gold": gold,
                            "generator": "lm-eval",
                            "generator_version": str(results.get("lm_eval_version") or ""),
                            "output_partial": partial,
                            "_context": context,
                        }
                    )
        if not seen:
            raise BadInputError(f"{samples} holds no samples")
        out.files.append(str(samples))
    _encode(pending, tokenizer)
    for rec in pending:
        context = rec.pop("_context")
        out.prompt_truncated += context is not None and len(rec["prompt_ids"]) + rec["cap"] > context
    out.records = pending
    out.over_cap = sum(len(r["output_ids"]) > r["cap"] for r in pending)
    return out


def _encode(records: list[dict], tokenizer: ResolvedTokenizer) -> None:
    """Output and prompt ids by encoding (one batched call each; prompts shared by samples encoded once), and
    the finish reason inferred from the output ids (``unknown`` for a partial output: not inferred)."""
    outputs = tokenizer.encode_batch([r["text"] for r in records])
    prompts = list(dict.fromkeys(r["prompt"] for r in records))
    prompt_ids = dict(zip(prompts, tokenizer.encode_batch(prompts), strict=True))
    for rec, ids in zip(records, outputs, strict=True):
        rec["output_ids"] = ids
        rec["prompt_ids"] = prompt_ids[rec["prompt"]]
        partial = rec["output_partial"]
        rec["finish_reason"] = "unknown" if partial else "length" if len(ids) >= rec["cap"] else "stop"
        rec.update(retokenized=True, finish_inferred=not partial, tokenizer=tokenizer.name)
