"""The ledger record: one row per generation, its Arrow schema, and the checks every append runs.

Token ids are the source of truth (decode-then-encode does not round-trip); ``text`` is kept for reading.
A *cell* is (model, arm, lang); with the generation settings (task, design, cap, announcement, forcing) it
names the population a record belongs to, and (cell, settings, item, sample) must be unique.

Each record carries its ``task`` (default :data:`DEFAULT_TASK`) and one gold value of the task's type: an
integer in ``gold`` or a string in ``gold_text``. Every shard stores every column (:data:`STORAGE_SCHEMA`).
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, TypeGuard

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..data.languages import resolve_language
from ..errors import BadInputError, MindcapError
from ..tasks.load import DEFAULT_TASK, builtin_tasks, load_task
from ..tokenization.registry import registry_model_name
from .think import thinks

ANNOUNCE_STYLES = ("none", "natural", "tag")
DESIGNS = ("replay", "independent", "announcement", "determinism")
#: how a decode ended: ``stop`` (an end token or stop string), ``length`` (cut by the cap), ``unknown`` (the log
#: does not say and it cannot be inferred: always so for an ``output_partial`` record)
FINISH_REASONS = ("stop", "length", "unknown")

CELL_COLUMNS = ("model", "arm", "lang")
#: generation settings that, with the cell, name one population of records (``thinking``: a reasoning model's
#: thinking and instruct records are different cells; outputs show it only where some record thinks: see
#: :func:`population_columns`)
SETTING_COLUMNS = ("task", "design", "cap", "announced", "announce_style", "forcing", "thinking")
#: columns that identify one record; duplicates are rejected
KEY_COLUMNS = (*CELL_COLUMNS, *SETTING_COLUMNS, "item", "sample")

_IDS = pa.list_(pa.int32())
SCHEMA = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),
        pa.field("arm", pa.string(), nullable=False),
        pa.field("lang", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False),
        pa.field("item", pa.int64(), nullable=False),
        pa.field("sample", pa.int64(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("cap", pa.int64(), nullable=False),
        pa.field("announced", pa.int64(), nullable=True),
        pa.field("announce_style", pa.string(), nullable=False),
        pa.field("forcing", pa.bool_(), nullable=False),
        pa.field("design", pa.string(), nullable=False),
        pa.field("template_id", pa.string(), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("prompt_ids", _IDS, nullable=False),
        pa.field("output_ids", _IDS, nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("finish_reason", pa.string(), nullable=False),
        # exactly one of the two is set: an integer gold (MGSM) or a text gold (a choice label, a math answer)
        pa.field("gold", pa.int64(), nullable=True),
        pa.field("gold_text", pa.string(), nullable=True),
        pa.field("generator", pa.string(), nullable=False),
        pa.field("generator_version", pa.string(), nullable=False),
        pa.field("tokenizer", pa.string(), nullable=False),
        pa.field("retokenized", pa.bool_(), nullable=False),
        # derived on append (len(output_ids)); stored so that summaries need not read the ids
        pa.field("n_tokens", pa.int64(), nullable=False),
        # reasoning models: thinking on, and the output index of the closing think token (null: none, or unclosed)
        pa.field("thinking", pa.bool_(), nullable=False),
        pa.field("think_end", pa.int64(), nullable=True),
        # a forced record whose capped trace was still inside its thought: the thought was closed before the
        # answer delimiter
        pa.field("forced_think_close", pa.bool_(), nullable=False),
        # under forcing: whether the forcing text was appended to this decode (null: forcing off, or not recorded)
        pa.field("forced", pa.bool_(), nullable=True),
        # imported runs: finish_reason inferred (not logged), the cap a tool's default (not set by the run), and
        # the output-token count the log holds beside the re-encoded ``n_tokens``
        pa.field("finish_inferred", pa.bool_(), nullable=False),
        pa.field("cap_inferred", pa.bool_(), nullable=False),
        pa.field("log_output_tokens", pa.int64(), nullable=True),
        # imported runs: the output holds only part of the decode (lm-eval with ``think_end_token`` logs only the
        # text after the last think close), so ``n_tokens`` is a lower bound of the decode's length
        pa.field("output_partial", pa.bool_(), nullable=False),
        # imported runs: the reasoning tokens the provider counted, the sample's token limit (all of its model
        # calls together), and whether the reasoning exhausted the cap (cut by it after reasoning, and the
        # completion empty or the reasoning tokens at least the output tokens)
        pa.field("reasoning_tokens", pa.int64(), nullable=True),
        pa.field("token_limit", pa.int64(), nullable=True),
        pa.field("reasoning_exhausted", pa.bool_(), nullable=False),
    ]
)
COLUMNS = tuple(SCHEMA.names)
REQUIRED = (
    "model",
    "arm",
    "lang",
    "item",
    "sample",
    "seed",
    "cap",
    "prompt",
    "prompt_ids",
    "output_ids",
    "text",
    "finish_reason",
    "gold",
    "generator",
)
#: filled when absent: announce_style is "none" when nothing is announced, tokenizer defaults to the model;
#: ``gold`` is required unless ``gold_text`` is given
DEFAULTS = {
    "task": DEFAULT_TASK,
    "announced": None,
    "forcing": False,
    "design": "replay",
    "template_id": "",
    "generator_version": "",
    "retokenized": False,
}
#: how the cell columns are stored inside shards (dictionary-encoded, so pandas/pyarrow merge them with the
#: hive folder names); :func:`to_canonical` turns them back into plain strings
_DICT = pa.dictionary(pa.int32(), pa.string())
STORAGE_SCHEMA = pa.schema([pa.field(f.name, _DICT, nullable=False) if f.name in CELL_COLUMNS else f for f in SCHEMA])
#: the columns naming a record's task and holding a text gold
TASK_COLUMNS = ("task", "gold_text")
#: columns a record may leave out, with the value it then holds (reasoning models, imported runs)
OPTIONAL_COLUMNS = {
    "thinking": False,
    "think_end": None,
    "forced_think_close": False,
    "forced": None,
    "finish_inferred": False,
    "cap_inferred": False,
    "log_output_tokens": None,
    "output_partial": False,
    "reasoning_tokens": None,
    "token_limit": None,
    "reasoning_exhausted": False,
}
DEFAULTS |= OPTIONAL_COLUMNS

#: what the readers take: a table, a DataFrame or plain records
Records: TypeAlias = "pa.Table | pd.DataFrame | Iterable[Mapping[str, Any]]"


class RecordError(MindcapError):
    """A problem with one record: ``index`` is its position among the records given (0-based).

    ``other`` is the position of a second record involved (the earlier one of a duplicate pair), if any.
    Callers that know where records came from (the JSONL importer) map the positions to file lines.
    """

    names_source = False  # its message stands alone (no spec file named in front)

    def __init__(self, message: str, index: int, other: int | None = None) -> None:
        super().__init__(message)
        self.index = index
        self.other = other


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxstring, _SHORT.maxother = 2, 8, 60, 60


def _show(value: object) -> str:
    """``repr(value)``, abbreviated so that a message about a huge or deeply nested value stays short."""
    return _SHORT.repr(value)


def _record_error(table: pa.Table, row: int, message: str) -> RecordError:
    return RecordError(f"{describe(table, row)}: {message}", row)


def describe(table: pa.Table, row: int) -> str:
    """``record 3 (model=qwen3-8b arm=native lang=tha_Thai item=12 sample=0)``: a record named for messages."""
    return _describe_values({c: table.column(c)[row].as_py() for c in table.column_names if c in _NAMING}, row)


_NAMING = ("model", "arm", "lang", "design", "cap", "announced", "item", "sample")


def _describe_values(values: Mapping[str, Any], row: int) -> str:
    parts = []
    for col in _NAMING:
        if col in values:
            value = values[col]
            if col in ("design", "announced") and (value is None or value == DEFAULTS.get(col)):
                continue
            parts.append(f"{col}={value}")
    return f"record {row} ({' '.join(parts)})" if parts else f"record {row}"


def _from_dicts(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    rows = list(records)
    if not rows:
        return pa.table({})
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise RecordError(f"record {i} is a {type(row).__name__}, expected a mapping of column -> value", i)
    rows = [_split_gold(row, i) for i, row in enumerate(rows)]
    names = [c for c in COLUMNS if any(c in r for r in rows)]
    extra = sorted({k for r in rows for k in r} - set(COLUMNS))
    if extra:
        raise BadInputError(f"unknown column(s) {', '.join(extra)}; the ledger columns are {', '.join(COLUMNS)}")
    for i, row in enumerate(rows):
        missing = [c for c in REQUIRED if c not in row and not (c == "gold" and "gold_text" in row)]
        if missing:
            raise RecordError(f"{_describe_values(row, i)} lacks {', '.join(missing)}", i)
    columns = {}
    for name in names:
        values = [r.get(name, DEFAULTS.get(name)) for r in rows]
        target = SCHEMA.field(name).type
        if name in _STRICT:
            columns[name] = _strict_array(name, values, rows)
            continue
        try:
            columns[name] = pa.array(values, type=target)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            for i, v in enumerate(values):
                try:
                    pa.array([v], type=target)
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                    raise RecordError(
                        f"{_describe_values(rows[i], i)}: {name} = {_show(v)} is not a valid {target}", i
                    ) from exc
            raise
    return pa.table(columns)


def _split_gold(row: Mapping[str, Any], i: int) -> Mapping[str, Any]:
    """The record with a text ``gold`` (a choice label, a math answer) moved to ``gold_text``: the gold's Python
    type says where it is stored (int -> ``gold``, str -> ``gold_text``)."""
    if not isinstance(row.get("gold"), str):
        return row
    if row.get("gold_text") is not None:
        raise RecordError(f"{_describe_values(row, i)} gives both gold and gold_text; a record has one gold value", i)
    return {**row, "gold": None, "gold_text": row["gold"]}


#: columns whose Python values must have exactly the right kind: ``pa.array(values, type=int64)`` would
#: truncate 1.5 to 1 and accept True as 1, so these are inferred first and checked
_STRICT = {
    f.name: "ids" if pa.types.is_list(f.type) else "bool" if pa.types.is_boolean(f.type) else "int"
    for f in SCHEMA
    if pa.types.is_list(f.type) or pa.types.is_boolean(f.type) or pa.types.is_integer(f.type)
}


def _fits(arr: pa.Array, kind: str) -> bool:
    t = arr.type
    if pa.types.is_null(t):
        return True  # all values missing: reported later as "missing (null)" where a value is required
    if kind == "int":
        return pa.types.is_integer(t)
    if kind == "bool":
        return pa.types.is_boolean(t)
    inner = t.value_type if pa.types.is_list(t) or pa.types.is_large_list(t) else None
    if inner is None or not (pa.types.is_integer(inner) or pa.types.is_null(inner)):
        return False
    return pc.list_flatten(arr).null_count == 0


def _is_int(v: object) -> TypeGuard[int | np.integer[Any]]:
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _value_problem(name: str, v: object, kind: str) -> str | None:
    """Why ``v`` cannot be stored in column ``name`` (``None`` when it can, or when it is a plain null)."""
    if v is None:
        return None
    if kind == "int":
        if not _is_int(v):
            return f"{name} = {_show(v)} is not a valid int64 (an integer is required, not a {type(v).__name__})"
        if not -(2**63) <= int(v) < 2**63:
            return f"{name} = {v} does not fit int64"
        return None
    if kind == "bool":
        if isinstance(v, bool | np.bool_):
            return None
        return f"{name} = {_show(v)} is not a valid bool (true or false is required, not a {type(v).__name__})"
    if not isinstance(v, list | tuple | np.ndarray):
        return f"{name} is a {type(v).__name__}, expected a list of integer token ids"
    for j, x in enumerate(v):
        if x is None:
            return f"{name}[{j}] is null, expected an integer token id"
        if not _is_int(x):
            return f"{name}[{j}] = {_show(x)} is not an integer token id (a {type(x).__name__})"
        if not -(2**63) <= int(x) < 2**63:
            return f"{name}[{j}] = {x} is not a token id"
    return None


def _strict_array(name: str, values: list[Any], rows: list[Mapping[str, Any]]) -> pa.Array:
    """``values`` as Arrow, inferred (not converted) so that floats, booleans and null ids are refused."""
    kind = _STRICT[name]
    try:
        arr = pa.array(values, from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        arr = None
    if arr is not None and _fits(arr, kind):
        return arr
    for i, v in enumerate(values):
        problem = _value_problem(name, v, kind)
        if problem is not None:
            raise RecordError(f"{_describe_values(rows[i], i)}: {problem}", i)
    raise BadInputError(f"column {name!r}: the values do not convert to {SCHEMA.field(name).type}")


def _as_table(records: Records) -> pa.Table:
    if isinstance(records, pa.Table):
        return records
    if isinstance(records, pd.DataFrame):
        try:
            return pa.Table.from_pandas(records, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise BadInputError(f"cannot convert the records to Arrow: {str(exc).splitlines()[0]}") from exc
    return _from_dicts(records)


def _first(mask: pa.Array | np.ndarray) -> int:
    arr = mask.to_numpy(zero_copy_only=False) if isinstance(mask, pa.Array | pa.ChunkedArray) else mask
    return int(np.flatnonzero(arr)[0])


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def _cast_column(table: pa.Table, name: str, col: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    kind, want = _kind(col.type), _kind(target)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if kind == "null":
        return pa.chunked_array([pa.nulls(len(col), target)])
    if want == "int" and kind == "float":
        vals = col.to_numpy(zero_copy_only=False)
        bad = ~np.isnan(vals) & (vals != np.round(vals))
        if bad.any():
            row = _first(bad)
            raise _record_error(table, row, f"{name} = {vals[row]} is not an integer")
        return pa.chunked_array([pa.array(np.where(np.isnan(vals), 0, vals).astype(np.int64), mask=np.isnan(vals))])
    if want == "list" and kind == "list":
        inner = col.type.value_type
        if not pa.types.is_integer(inner) and not pa.types.is_null(inner):
            raise BadInputError(f"column {name!r} holds lists of {inner}, expected lists of integer token ids")
        flat = pc.list_flatten(col)
        if flat.null_count:
            row = int(pc.list_parent_indices(col).to_numpy()[_first(pc.is_null(flat))])
            raise _record_error(table, row, f"{name} holds a null where a token id belongs")
        if len(flat) and pa.types.is_integer(inner):
            bad = pc.or_(pc.less(flat, 0), pc.greater(flat, np.iinfo(np.int32).max))
            if pc.any(bad).as_py():
                parents = pc.list_parent_indices(col).to_numpy()
                row = int(parents[_first(bad)])
                raise _record_error(table, row, f"{name} holds an id outside 0..2^31-1")
        return col.cast(target)
    if kind != want:
        raise BadInputError(f"column {name!r} has type {col.type}, expected {target}")
    try:
        return col.cast(target)
    except (pa.ArrowInvalid, OverflowError) as exc:
        raise BadInputError(f"column {name!r} does not fit {target}: {str(exc).splitlines()[0]}") from exc


def _check_choice(table: pa.Table, name: str, allowed: Sequence[str], where: pa.ChunkedArray | None = None) -> None:
    """Refuse a value of column ``name`` outside ``allowed`` (in the rows ``where`` marks, default all)."""
    bad = pc.invert(pc.is_in(table.column(name), value_set=pa.array(allowed)))
    if where is not None:
        bad = pc.and_(bad, where)
    if pc.any(bad).as_py():
        row = _first(bad.combine_chunks())
        value = table.column(name)[row].as_py()
        raise _record_error(table, row, f"{name} = {value!r}; use one of {', '.join(allowed)}")


def _check_arms(table: pa.Table) -> None:
    """A built-in task's records name one of its arms (its task file's); a user's task names its own."""
    tasks = table.column("task")
    for task in pc.unique(tasks).to_pylist():
        if task in builtin_tasks():
            _check_choice(table, "arm", list(load_task(task).arms), where=pc.equal(tasks, task))
    empty = pc.equal(pc.utf8_length(table.column("arm")), 0)
    if pc.any(empty).as_py():
        raise _record_error(table, _first(empty.combine_chunks()), "arm is empty")


def _resolve_langs(table: pa.Table) -> pa.Table:
    col = table.column("lang")
    uniques = pc.unique(col).to_pylist()
    mapping = {}
    for value in uniques:
        try:
            mapping[value] = resolve_language(value)
        except MindcapError as exc:
            row = _first(pc.equal(col, value).combine_chunks())
            raise _record_error(table, row, str(exc)) from exc
    if all(k == v for k, v in mapping.items()):
        return table
    keys, vals = list(mapping), list(mapping.values())
    idx = pc.index_in(col, value_set=pa.array(keys))
    return table.set_column(table.schema.get_field_index("lang"), "lang", pc.take(pa.array(vals), idx))


def canonical_models(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Model names as stored: the registry name for a registry model, alias or the model's Hugging Face id
    (``qwen3``, ``Qwen3-8B``, ``Qwen/Qwen3-8B`` -> ``qwen3-8b``; :func:`registry_model_name`), any other name (a
    path, another Hugging Face id) as given. Each distinct name is
    looked up once; a dictionary-encoded column is mapped through its dictionary."""
    if isinstance(col, pa.ChunkedArray):
        return pa.chunked_array([canonical_models(c) for c in col.chunks], col.type)
    if isinstance(col, pa.DictionaryArray):
        return pa.DictionaryArray.from_arrays(col.indices, canonical_models(col.dictionary))
    names = pc.unique(col).to_pylist()
    mapping = {n: registry_model_name(n) or n for n in names if n is not None}
    if all(k == v for k, v in mapping.items()):
        return col
    keys = list(mapping)
    return pc.take(pa.array([mapping[k] for k in keys], col.type), pc.index_in(col, value_set=pa.array(keys, col.type)))


def _check_ids(table: pa.Table, name: str, vocab_sizes: Mapping[str, int]) -> None:
    tok_col = table.column("tokenizer")
    for tok_name in pc.unique(tok_col).to_pylist():
        if tok_name not in vocab_sizes:
            continue
        rows = pc.equal(tok_col, tok_name).combine_chunks()
        col = table.column(name).filter(rows)
        flat = pc.list_flatten(col)
        if not len(flat):
            continue
        bad = pc.greater_equal(flat, vocab_sizes[tok_name])
        if pc.any(bad).as_py():
            parent = int(pc.list_parent_indices(col).to_numpy()[_first(bad.combine_chunks())])
            row = int(np.flatnonzero(rows.to_numpy(zero_copy_only=False))[parent])
            bad_id = int(flat[_first(bad.combine_chunks())].as_py())
            raise _record_error(
                table,
                row,
                f"{name} holds id {bad_id}, outside the vocabulary of {tok_name} ({vocab_sizes[tok_name]} ids)",
            )


def check_token_ids(table: pa.Table, vocab_sizes: Mapping[str, int]) -> None:
    """Reject prompt or output ids at or above the vocabulary size of the record's tokenizer."""
    _check_ids(table, "output_ids", vocab_sizes)
    _check_ids(table, "prompt_ids", vocab_sizes)


def duplicate_row(table: pa.Table) -> tuple[int, int] | None:
    """The first pair of rows (earlier, later) sharing the record key, or ``None``."""
    if table.num_rows < 2:
        return None
    first_seen: dict[tuple[Any, ...], int] = {}
    for row, key in enumerate(zip(*(table.column(c).to_pylist() for c in KEY_COLUMNS), strict=True)):
        earlier = first_seen.setdefault(key, row)
        if earlier != row:
            later = row
            break
    else:
        return None
    return earlier, later


def _gold_columns(table: pa.Table) -> pa.Table:
    """Both gold columns, the absent one null; a text ``gold`` column alone (a frame of text golds) becomes
    ``gold_text``. Without either column the table is returned as given (reported as lacking ``gold``)."""
    names = table.column_names
    if "gold" not in names and "gold_text" not in names:
        return table
    if "gold" in names and "gold_text" not in names and _kind(table.schema.field("gold").type) == "str":
        return table.rename_columns(["gold_text" if c == "gold" else c for c in names]).append_column(
            SCHEMA.field("gold"), pa.nulls(table.num_rows, pa.int64())
        )
    for name in ("gold", "gold_text"):
        if name not in names:
            table = table.append_column(SCHEMA.field(name), pa.nulls(table.num_rows, SCHEMA.field(name).type))
    return table


def _integer_tasks() -> list[str]:
    """The built-in tasks whose gold is an integer."""
    return [name for name in builtin_tasks() if load_task(name).gold.type == "integer"]


def _check_gold(table: pa.Table) -> None:
    """Each record holds exactly one gold value and a task name, and a built-in integer task's gold is an integer."""
    gold, text, task = table.column("gold"), table.column("gold_text"), table.column("task")
    checks: tuple[tuple[Any, Callable[[int], str]], ...] = (
        (pc.and_(pc.is_null(gold), pc.is_null(text)), lambda row: "gold is missing (null)"),
        (
            pc.and_(pc.is_valid(gold), pc.is_valid(text)),
            lambda row: "holds both gold and gold_text; a record has one gold value",
        ),
        (pc.equal(task, ""), lambda row: "task is empty; name the task (default " + repr(DEFAULT_TASK) + ")"),
        (
            pc.and_(pc.is_in(task, pa.array(_integer_tasks())), pc.is_valid(text)),
            lambda row: (
                f"gold = {_show(text[row].as_py())} is text, but task {task[row].as_py()!r} takes an integer gold"
            ),
        ),
    )
    for bad, message in checks:
        if pc.any(bad).as_py():
            row = _first(bad.combine_chunks())
            raise _record_error(table, row, message(row))


def validate_records(records: Records, vocab_sizes: Mapping[str, int] | None = None) -> pa.Table:
    """Check records and return them as a table in :data:`SCHEMA` (defaults filled, language aliases resolved).

    ``vocab_sizes`` maps a tokenizer name (the ``tokenizer`` column) to its number of ids; ids at or above it
    are rejected. Every violation raises :class:`MindcapError` naming the first offending record.
    """
    table = _as_table(records)
    if table.num_rows == 0:
        raise BadInputError("no records to add")
    extra = sorted(set(table.column_names) - set(COLUMNS))
    if extra:
        raise BadInputError(f"unknown column(s) {', '.join(extra)}; the ledger columns are {', '.join(COLUMNS)}")
    table = _gold_columns(table)
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise BadInputError(f"records lack required column(s) {', '.join(missing)} (all records, from record 0 on)")
    n = table.num_rows
    for name, value in DEFAULTS.items():
        if name not in table.column_names:
            table = table.append_column(
                name,
                pa.nulls(n, SCHEMA.field(name).type)
                if value is None
                else pa.repeat(pa.scalar(value, SCHEMA.field(name).type), n),
            )
    if "tokenizer" not in table.column_names:
        models = table.column("model").to_pylist()
        table = table.append_column("tokenizer", pa.array([registry_model_name(m) or m for m in models], pa.string()))
    columns = {}
    for field in SCHEMA:
        if field.name == "n_tokens" or (field.name == "announce_style" and "announce_style" not in table.column_names):
            continue
        columns[field.name] = _cast_column(table, field.name, table.column(field.name), field.type)
    table = pa.table(columns)
    announced_null = pc.is_null(table.column("announced"))
    if "announce_style" not in columns:
        table = table.append_column("announce_style", pa.nulls(n, pa.string()))
    # a missing style means "none" when nothing is announced; an announced budget needs an explicit style
    style = pc.if_else(
        pc.and_(pc.is_null(table.column("announce_style")), announced_null), "none", table.column("announce_style")
    )
    table = table.set_column(table.schema.get_field_index("announce_style"), "announce_style", style)
    if table.column("announce_style").null_count:
        row = _first(pc.is_null(table.column("announce_style")).combine_chunks())
        raise _record_error(table, row, "a budget is announced but announce_style is missing")
    table = table.append_column("n_tokens", pc.list_value_length(table.column("output_ids")).cast(pa.int64()))
    table = table.select(list(COLUMNS))
    for field in SCHEMA:
        if not field.nullable and table.column(field.name).null_count:
            row = _first(pc.is_null(table.column(field.name)).combine_chunks())
            raise _record_error(table, row, f"{field.name} is missing (null)")
    _check_gold(table)
    _check_arms(table)
    _check_choice(table, "announce_style", ANNOUNCE_STYLES)
    _check_choice(table, "design", DESIGNS)
    _check_choice(table, "finish_reason", FINISH_REASONS)
    partial_known = pc.and_(table.column("output_partial"), pc.not_equal(table.column("finish_reason"), "unknown"))
    if pc.any(partial_known).as_py():
        row = _first(partial_known.combine_chunks())
        reason = table.column("finish_reason")[row].as_py()
        raise _record_error(table, row, f"finish_reason {reason!r} of a partial output; its cut status is unknown")
    none_style = pc.equal(table.column("announce_style"), "none")
    mismatch = pc.not_equal(none_style, announced_null)
    if pc.any(mismatch).as_py():
        row = _first(mismatch.combine_chunks())
        raise _record_error(
            table,
            row,
            f"announce_style {table.column('announce_style')[row].as_py()!r} does not fit "
            f"announced = {table.column('announced')[row].as_py()} (style 'none' iff nothing is announced)",
        )
    for name, low in (("item", 0), ("sample", 0), ("cap", 1), ("announced", 1)):
        bad = pc.less(table.column(name), low).combine_chunks()
        if pc.any(bad).as_py():
            row = _first(bad.fill_null(False))
            raise _record_error(table, row, f"{name} = {table.column(name)[row].as_py()} is below {low}")
    # a forced record holds the forcing text beyond the cap; a retokenized one holds a re-encoding of the text,
    # which may take more ids than the model generated (kept unaltered: re-encoding is not sampling)
    exempt = pc.or_(table.column("forcing"), table.column("retokenized"))
    over = pc.and_(pc.greater(table.column("n_tokens"), table.column("cap")), pc.invert(exempt))
    if pc.any(over).as_py():
        row = _first(over.combine_chunks())
        raise _record_error(
            table,
            row,
            f"{table.column('n_tokens')[row].as_py()} output tokens exceed the cap {table.column('cap')[row].as_py()}",
        )
    table = _resolve_langs(table)
    table = table.set_column(table.schema.get_field_index("model"), "model", canonical_models(table.column("model")))
    if vocab_sizes:
        check_token_ids(table, vocab_sizes)
    dup = duplicate_row(table)
    if dup is not None:
        first, second = describe(table, dup[0]), describe(table, dup[1])
        raise RecordError(f"{second} duplicates {first} (same cell, settings, item and sample)", dup[1], dup[0])
    return table.cast(SCHEMA)


def to_storage(table: pa.Table) -> pa.Table:
    """A validated table as stored in shards: every column, the cell columns dictionary-encoded."""
    return table.select(list(STORAGE_SCHEMA.names)).cast(STORAGE_SCHEMA)


def population_columns(table: pa.Table | pd.DataFrame) -> list[str]:
    """The cell and settings columns of ``table`` that split its records into populations: those it has, with
    ``thinking`` only where some record thinks (so outputs of ledgers without reasoning models keep their
    columns)."""
    names = table.column_names if isinstance(table, pa.Table) else list(table.columns)
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in names]
    if "thinking" in keys and not thinks(table):
        keys.remove("thinking")
    return keys


def to_canonical(table: pa.Table) -> pa.Table:
    """Shard data (or any projection of it) back to :data:`SCHEMA` types: plain strings for the cell columns,
    model names as stored today (ledgers written before names were made canonical may hold an alias)."""
    for name in CELL_COLUMNS:
        if name in table.column_names and pa.types.is_dictionary(table.schema.field(name).type):
            i = table.schema.get_field_index(name)
            col = canonical_models(table.column(name)) if name == "model" else table.column(name)
            table = table.set_column(i, SCHEMA.field(name), col.cast(pa.string()))
    return table
