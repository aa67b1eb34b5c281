"""Import generations produced elsewhere (one JSON object per line) into a ledger.

Each line holds ``model, arm, lang, item, sample, seed, cap, announced, prompt, prompt_ids, output_ids, text,
finish_reason, gold, generator`` and optionally ``task`` (default ``mgsm``), ``announce_style, forcing, design,
template_id, generator_version`` and, for a reasoning model, ``thinking`` (true or false; with true,
``think_end`` is computed from the output ids (:mod:`~mindcap_tok.store.think`) and a given one must equal it).
The gold has its task's type (:func:`gold_type`): an integer for MGSM (a
string such as ``"1,000"`` is read as MGSM gold answers are), a string for a choice or math task (``"3"``,
``"\\frac{1}{2}"``); a user task's gold is stored as given (int in ``gold``, str in ``gold_text``).
When ``output_ids`` (or ``prompt_ids``) is missing, the text is tokenized with the ledger tokenizer and the
record is marked ``retokenized`` (decode-then-encode does not round-trip, so such token counts are
approximations of what the model generated).

The file is imported in batches, each committed atomically: an interrupted import leaves a valid ledger
holding the batches committed so far, and rerunning the same command skips the records already stored
(identical ones; a stored record with the same key but other content is an error, as are two records with
one key in the file). ``-`` (or any pipe) is read in one pass.

Imports are exact: a key repeated in a JSON object is an error; a record whose ``output_ids`` are given must,
when it finished by ``length``, hold at least ``cap`` ids, and its ``text`` must be the decoding of those ids
(:func:`text_mismatches`; ``allow_text_mismatch`` stores such records marked in the manifest). Model names are
stored by registry name (:func:`~mindcap_tok.store.schema.canonical_models`). Ctrl-C or an ``OSError`` (a
full disk) stops the import with one line saying where and how many records were committed.

Memory stays bounded whatever the input: a line longer than :data:`LINE_LIMIT` is refused before it is read
whole, and a batch is committed once its lines reach :data:`BATCH_BYTES`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._io import regular_file
from ..errors import BadInputError, MindcapError, StorageError, first_line, with_context
from ..store import (
    CELL_COLUMNS,
    COLUMNS,
    REQUIRED,
    SETTING_COLUMNS,
    TASK_COLUMNS,
    Ledger,
    RecordError,
    ShardInfo,
    check_token_ids,
    describe,
    key_tuples,
    think_end,
    think_markers,
    validate_records,
)
from ..tasks.load import DEFAULT_TASK, builtin_tasks, load_task
from ..tasks.mgsm import parse_gold
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from ..tokenization.registry import registry_model_name

BATCH_RECORDS = 2000
#: the most bytes of input lines in one batch (a batch is committed sooner when its lines reach it)
BATCH_BYTES = 64 << 20
#: the longest input line (one record) read: a record at the largest cap (2^20 ids) takes about 8 MiB
LINE_LIMIT = 32 << 20


@dataclass
class ImportResult:
    """What an import did: lines read, records added, records skipped as already stored, retokenized ones,
    retokenized ones whose text encodes to more ids than their cap (kept as they are), records whose output the
    log holds only in part (cut status unknown), and prompts the harness shortened to fit the context."""

    source: str
    ledger: str
    read: int = 0
    added: int = 0
    skipped: int = 0
    retokenized: int = 0
    shards: list[ShardInfo] = field(default_factory=list)
    over_cap: int = 0
    partial: int = 0
    prompt_truncated: int = 0


def human(n: int) -> str:
    """A byte count as limit messages state it: ``1 GiB``, ``32 MiB``, or bytes under one MiB."""
    if n < 1 << 20:
        return f"{n:,} bytes"
    return f"{n >> 30:,} GiB" if n % (1 << 30) == 0 else f"{n / (1 << 20):,.0f} MiB"


#: a ``\uD800``-``\uDFFF`` escape: JSON can spell a lone surrogate, which is not text (and not UTF-8)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class _RepeatedKey(ValueError):
    """A JSON object spelling one key twice (``json`` would keep the last value silently)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``object_pairs_hook``: the object as a dict, refused when a key repeats (at any nesting level)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return obj


def _lines(stream: BinaryIO, name: str) -> Iterator[tuple[int, dict, int]]:
    """``(line number, object, bytes)`` for each non-blank line; any unreadable line, or one longer than
    :data:`LINE_LIMIT` (refused before it is read whole), is a one-line error at ``name:line``."""
    number = 0
    while raw := stream.readline(LINE_LIMIT + 1):
        number += 1
        if len(raw) > LINE_LIMIT and not raw.endswith(b"\n"):
            raise BadInputError(f"{name}:{number}: line longer than {human(LINE_LIMIT)} (the most a record may take)")
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise BadInputError(f"{name}:{number}: not valid UTF-8 ({exc.reason} at byte {exc.start + 1})") from exc
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_unique_keys)
        except RecursionError as exc:
            raise BadInputError(f"{name}:{number}: JSON nested too deeply") from exc
        except _RepeatedKey as exc:
            raise BadInputError(
                f"{name}:{number}: key {exc.args[0]!a} appears twice in one JSON object (which value is meant?)"
            ) from exc
        except ValueError as exc:
            raise BadInputError(f"{name}:{number}: not valid JSON ({getattr(exc, 'msg', exc)})") from exc
        if not isinstance(obj, dict):
            raise BadInputError(f"{name}:{number}: expected a JSON object, got {type(obj).__name__}")
        if _SURROGATE_ESCAPE.search(raw):
            for key, value in obj.items():
                for text in (key, value):
                    if isinstance(text, str) and not _is_text(text):
                        raise BadInputError(
                            f"{name}:{number}: {key!a} holds a lone surrogate escape (\\ud800-\\udfff), not text"
                        )
        yield number, obj, len(raw)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Tokenizers:
    """The tokenizer of each record: the one named by ``--tokenizer``, else resolved from its model."""

    def __init__(self, fixed: ResolvedTokenizer | None, tokenizers_dir) -> None:
        self.fixed = fixed
        self.dir = tokenizers_dir
        self.by_model: dict[str, ResolvedTokenizer] = {}

    def __call__(self, model: str) -> ResolvedTokenizer:
        if self.fixed is not None:
            return self.fixed
        if model not in self.by_model:
            self.by_model[model] = load_tokenizer(registry_model_name(model) or model, self.dir)
        return self.by_model[model]


#: the keys of an import line, for messages and help
RECORD_KEYS = (
    f"a record has the keys {', '.join(REQUIRED)} and optionally "
    f"{', '.join(k for k in COLUMNS if k not in (*REQUIRED, *TASK_COLUMNS, 'tokenizer', 'n_tokens'))}, "
    f"{', '.join(TASK_COLUMNS)}"
)


def _think(rec: dict, where: str, tokenizer: ResolvedTokenizer, think_close: str | None) -> None:
    """Set ``think_end`` of a record with ``thinking`` true from its output ids; check a given one."""
    thinking = rec.get("thinking", False)
    if not isinstance(thinking, bool):
        raise BadInputError(f"{where}: thinking = {thinking!r} is not a valid bool (true or false is required)")
    if not thinking:
        if rec.get("think_end") is not None:
            raise BadInputError(f"{where}: think_end is given but thinking is not true")
        return
    try:
        end = think_end(rec["output_ids"], think_markers(tokenizer, think_close), tokenizer=tokenizer)
    except (TypeError, ValueError, IndexError) as exc:
        raise BadInputError(f"{where}: output_ids must be a list of integer token ids ({first_line(exc)})") from exc
    if "think_end" in rec and rec["think_end"] != end:
        found = "no closing think marker" if end is None else f"the thought closing at output index {end}"
        raise BadInputError(f"{where}: think_end = {rec['think_end']!r} but the output ids hold {found}")
    rec["think_end"] = end


def _record(
    obj: dict, where: str, tokenizer: ResolvedTokenizer, think_close: str | None = None
) -> tuple[dict, bool, bool]:
    """The ledger record of one line, whether it was retokenized, and whether its ``output_ids`` are the
    generated ones (given in the line and not marked retokenized): only those are checked against cap and text."""
    unknown = sorted(set(obj) - set(COLUMNS))
    if unknown:
        raise BadInputError(f"{where}: unknown key(s) {', '.join(unknown)}; {RECORD_KEYS}")
    rec = dict(obj)
    _check_gold_type(rec, where)
    retokenized = rec.get("retokenized", False)
    if not isinstance(retokenized, bool):
        raise BadInputError(f"{where}: retokenized = {retokenized!r} is not a valid bool (true or false is required)")
    generated = rec.get("output_ids") is not None and not retokenized
    for ids_key, text_key in (("output_ids", "text"), ("prompt_ids", "prompt")):
        if rec.get(ids_key) is None:
            if not isinstance(rec.get(text_key), str):
                raise BadInputError(f"{where}: neither {ids_key} nor a {text_key} string to tokenize")
            rec[ids_key] = tokenizer.encode(rec[text_key])  # any family, no special tokens
            retokenized = True
    rec["retokenized"] = retokenized
    rec["tokenizer"] = tokenizer.name
    _think(rec, where, tokenizer, think_close)
    return rec, retokenized, generated


def gold_type(task: str) -> type | None:
    """The Python type of a built-in task's gold (``int`` or ``str``, from its task file); ``None`` for a user's
    task (any type stored as given)."""
    if task not in builtin_tasks():
        return None
    return int if load_task(task).gold.type == "integer" else str


def _check_gold_type(rec: dict, where: str) -> None:
    """Refuse a gold of the wrong type for the record's task (naming the line and field); read an integer task's
    text gold as MGSM gold answers are read (``"1,000"`` -> 1000), as imports always did."""
    task = rec.get("task", DEFAULT_TASK)
    if not isinstance(task, str):
        raise BadInputError(f"{where}: task = {task!r} is not a string (a task name, default {DEFAULT_TASK!r})")
    want, gold = gold_type(task), rec.get("gold")
    if want is int and rec.get("gold_text") is not None:
        raise BadInputError(f"{where}: gold_text is given, but task {task!r} takes an integer gold (give it as gold)")
    if want is int and isinstance(gold, str):
        try:
            rec["gold"] = parse_gold(gold)
        except MindcapError as exc:
            raise BadInputError(f"{where}: gold = {gold!r} is not an integer, but task {task!r} takes one") from exc
    if want is str and isinstance(gold, int) and not isinstance(gold, bool):
        raise BadInputError(f'{where}: gold = {gold} is an integer, but task {task!r} takes a text gold ("{gold}")')


def check_capped_lengths(table: pa.Table, generated: np.ndarray) -> None:
    """Reject a generated record cut by its cap (``length``) that holds fewer output ids than the cap.

    A decode stopped by its cap holds exactly ``cap`` ids (a forced one more: the forcing text and answer
    follow); more ids than the cap without forcing is rejected by :func:`validate_records`. ``stop`` at exactly
    the cap is valid: the generation backends (vLLM, transformers) report ``stop`` when the cap-th token ends
    the decode, as generated ledgers hold. Retokenized ids are approximations and are not checked.
    """
    short = pc.and_(
        pc.equal(table.column("finish_reason"), "length"), pc.less(table.column("n_tokens"), table.column("cap"))
    )
    bad = np.flatnonzero(short.to_numpy(zero_copy_only=False) & generated)
    if len(bad):
        i = int(bad[0])
        n, cap = table.column("n_tokens")[i].as_py(), table.column("cap")[i].as_py()
        raise RecordError(
            f"{describe(table, i)}: finish_reason 'length' with {n} output ids, fewer than the cap {cap} "
            "(a decode cut by its cap holds cap ids)",
            i,
        )


def text_mismatches(records: Sequence[Mapping], tokenizers: Mapping[str, ResolvedTokenizer]) -> tuple[np.ndarray, str]:
    """Which ``records`` (dicts with ``output_ids``, ``text``, ``tokenizer``) hold a ``text`` that is not the
    decoding of their ids, and how the first one differs (``""`` when none does).

    The rule of the generation side and of scoring: ``text`` is the ids decoded with special tokens skipped
    (what a serving stack returns); the decode with special tokens kept as text (the parity audit's raw
    decode) is accepted too. Each tokenizer decodes its records in one batched call (per shard of the import).
    """
    bad = np.zeros(len(records), dtype=bool)
    by_name: dict[str, list[int]] = {}
    for i, rec in enumerate(records):
        by_name.setdefault(rec["tokenizer"], []).append(i)
    for name, rows in by_name.items():
        tok = tokenizers[name]
        skipped = tok.decode_batch([records[i]["output_ids"] for i in rows], skip_special_tokens=True)
        differ = [i for i, text in zip(rows, skipped, strict=True) if records[i]["text"] != text]
        if differ:
            kept = tok.decode_batch([records[i]["output_ids"] for i in differ])
            bad[[i for i, text in zip(differ, kept, strict=True) if records[i]["text"] != text]] = True
    if not bad.any():
        return bad, ""
    rec = records[int(np.flatnonzero(bad)[0])]
    text, name = rec["text"], rec["tokenizer"]
    decoded = tokenizers[name].decode_batch([rec["output_ids"]], skip_special_tokens=True)[0]
    at = next((k for k, (a, b) in enumerate(zip(text, decoded, strict=False)) if a != b), min(len(text), len(decoded)))
    why = (
        f"text is not the decoding of output_ids with tokenizer {name} (from character {at} "
        f"the text reads {text[at : at + 20]!r}, the ids decode to {decoded[at : at + 20]!r})"
    )
    return bad, why


def import_jsonl(
    path: str | os.PathLike[str],
    ledger: str | os.PathLike[str] | Ledger,
    *,
    tokenizer: str | ResolvedTokenizer | None = None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
    batch_records: int = BATCH_RECORDS,
    on_progress: Callable[[int, int | None], None] | None = None,
    allow_text_mismatch: bool = False,
    think_close: str | None = None,
) -> ImportResult:
    """Add the records of a JSONL file (``-``: standard input) to ``ledger`` (created if absent); see the module docs.

    ``tokenizer`` names the tokenizer the ids belong to (default: each record's model). Records already
    stored identically are skipped, so rerunning an interrupted import completes it. ``on_progress(records, None)``
    is called after each committed batch. A generated record (ids given) cut by its cap must hold ``cap`` ids,
    and its text must be the decoding of its ids (see :func:`text_mismatches`); ``allow_text_mismatch`` stores
    such records and marks them (:meth:`Ledger.text_mismatches`). Errors name the file line; one after a
    committed batch says how many records before it were committed. Ctrl-C raises :class:`ImportInterrupted`
    and an ``OSError`` (a full disk) a :class:`MindcapError`, each saying how many records were committed.
    ``think_close``: the string that closes a thought of ``thinking`` records, for tokenizers without a
    ``</think>`` token.
    """
    name = "<stdin>" if str(path) == "-" else str(path)
    led = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    led.check_new_location()  # before reading anything: a folder of other files is never made a ledger
    fixed = load_tokenizer(tokenizer, tokenizers_dir) if isinstance(tokenizer, str) else tokenizer
    resolve = _Tokenizers(fixed, tokenizers_dir)
    result = ImportResult(name, str(led.root))
    batch: list[dict] = []
    lines: list[int] = []  # the file line of each record in the batch
    generated: list[bool] = []  # whether each record's output ids are the generated ones
    seen = _SeenKeys()
    number = 0  # the line read last
    batch_bytes = 0  # bytes of the lines in the batch

    def at_line(exc: RecordError) -> MindcapError:
        msg = f"{name}:{lines[exc.index]}: {exc}"
        return BadInputError(msg if exc.other is None else f"{msg} (line {lines[exc.other]})")

    def flush() -> None:
        if not batch:
            return
        try:
            table = validate_records(batch)
            for i, key in enumerate(key_tuples(table)):
                earlier = seen.add(key, lines[i])
                if earlier is not None:
                    raise RecordError(f"{describe(table, i)} has the same key as the record at line {earlier}", i)
            toks = {rec["tokenizer"]: resolve(rec["model"]) for rec in batch}
            check_token_ids(table, {n: t.vocab_size for n, t in toks.items()})  # before decoding the ids
            mask = np.asarray(generated, dtype=bool)
            check_capped_lengths(table, mask)

            def check_text(new: pa.Table, rows: np.ndarray) -> np.ndarray | None:
                # only the records to be added (``rows``: their batch positions; a changed stored record is
                # reported as such first), decoded from the batch's own lists as parsed
                checked = np.flatnonzero(mask[rows])
                mismatched, why = text_mismatches([batch[i] for i in rows[checked]], toks)
                if not why:
                    return None
                if not allow_text_mismatch:
                    i = int(rows[checked[np.flatnonzero(mismatched)[0]]])
                    raise RecordError(f"{describe(table, i)}: {why}; pass --allow-text-mismatch to store it marked", i)
                flags = np.zeros(new.num_rows, dtype=bool)
                flags[checked[mismatched]] = True
                return flags

            written = led.append(table, toks, skip_existing=True, check_new=check_text)
        except RecordError as exc:
            raise at_line(exc) from exc
        added = sum(s.rows for s in written)
        result.added += added
        result.skipped += len(batch) - added
        result.shards.extend(written)
        if on_progress is not None:
            on_progress(result.read, None)
        batch.clear()
        lines.clear()
        generated.clear()

    def stopped(why: str) -> str:
        at = lines[0] if lines else number + 1
        return f"import of {name} stopped at line {at} ({why}): {_committed(result)}; rerun to resume"

    try:
        with _open(path, name) as stream:
            for number, obj, size in _lines(stream, name):
                where = f"{name}:{number}"
                if not isinstance(obj.get("model"), str):
                    raise BadInputError(f"{where}: 'model' must be a string")
                rec, retok, gen = _record(obj, where, resolve(obj["model"]), think_close)
                result.read += 1
                result.retokenized += retok
                batch.append(rec)
                lines.append(number)
                generated.append(gen)
                batch_bytes += size
                if len(batch) >= batch_records or batch_bytes >= BATCH_BYTES:
                    flush()
                    batch_bytes = 0
            flush()
    except MindcapError as exc:
        done = result.added + result.skipped
        if not done:
            raise
        raise with_context(
            exc,
            f"{exc}; {done:,} records before it were committed to {led.root} (rerun after fixing the line to continue)",
        ) from exc
    except KeyboardInterrupt as exc:
        raise ImportInterrupted(stopped("interrupted")) from exc
    except OSError as exc:
        raise StorageError(stopped(f"{exc.strerror or first_line(exc)}")) from exc
    if result.read == 0:
        raise BadInputError(f"{name} holds no records")
    return result


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C during an import; the message says where it stopped and how many records were committed."""


def _committed(result: ImportResult) -> str:
    """``1,000 records committed to L in 2 new shards`` (records of this file already stored count as committed)."""
    done = result.added + result.skipped
    shards = len(result.shards)
    already = f", {result.skipped:,} of them already stored" if result.skipped else ""
    return f"{done:,} records committed to {result.ledger} in {shards} new shard{'s' * (shards != 1)}{already}"


class _SeenKeys:
    """The file line of each record key met so far in one import (compact: keys grouped by cell and settings)."""

    def __init__(self) -> None:
        self.groups: dict[tuple, dict[tuple[int, int], int]] = {}

    def add(self, key: tuple, line: int) -> int | None:
        """Remember ``key`` at ``line``; return the earlier line of the same key, if any."""
        group = self.groups.setdefault(key[:_N_SETTINGS], {})
        earlier = group.setdefault(key[_N_SETTINGS:], line)
        return None if earlier == line else earlier


_N_SETTINGS = len(CELL_COLUMNS) + len(SETTING_COLUMNS)


@contextlib.contextmanager
def _open(path: str | os.PathLike[str], name: str) -> Iterator[BinaryIO]:
    """The input as bytes, opened once: standard input for ``-`` (a pipe or ``/dev/stdin`` works as a path)."""
    if str(path) == "-":
        yield sys.stdin.buffer
        return
    try:
        fh = open(regular_file(path, "input", pipe_ok=True), "rb")  # noqa: SIM115 - closed below; a pipe must be opened exactly once
    except OSError as exc:
        raise BadInputError(f"cannot read {name}: {exc.strerror or exc}") from exc
    with fh:
        yield fh
