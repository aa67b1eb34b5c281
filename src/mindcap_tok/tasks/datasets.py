"""The items of a task in one language, read from its source: a loader of :mod:`mindcap_tok.data` (MGSM),
local files (JSONL, JSON, CSV, Parquet) or a Hugging Face dataset (``datasets.load_dataset``).

Each row becomes a :class:`TaskItem`: the source's mapped fields (strings, as published: no normalisation, since
they are what a prompt sends) and the gold answer, of the task's gold type after its normalisation. A missing
field or a value of the wrong type is a one-line error naming the file (or dataset), the row and the field.

Limits: an integer gold is ASCII digits with an optional leading ``-`` (no other digits, no second sign) and fits
the ledger's 64-bit ``gold`` column; a CSV field may hold up to :data:`MAX_CSV_FIELD` characters (a long passage
is a legitimate item); JSON nested past the parser's recursion is refused in one line.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .._io import regular_file
from ..config import load_config
from ..errors import BadInputError
from ..spec import show
from .mgsm import N_ITEMS, MgsmItem, load_mgsm
from .model import GoldSpec, Task

#: The longest CSV field read (characters): Python's csv module stops at 131,072 by default, shorter than a long
#: passage may be; 16 Mi characters is far above any item and bounds what one field can hold.
MAX_CSV_FIELD = 1 << 24
#: an integer gold written as text: ASCII digits (``str.isdigit`` also takes ``'²'``), one optional minus sign
_INTEGER = re.compile(r"-?[0-9]+")
#: the ledger stores an integer gold as a 64-bit integer
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class TaskItem:
    """One item of a task in one language; ``item`` is the row index, the same in every language."""

    item: int
    lang: str
    fields: dict[str, str]
    gold: int | str


def _data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    return Path(data_dir) if data_dir is not None else load_config().data_dir.value


def _config(task: Task, lang: str) -> str:
    return task.source.configs.get(lang, lang)


def _gold(value: object, spec: GoldSpec, where: str) -> int | str:
    """A gold value of the task's type after its normalisation (an integer gold may be written as a string)."""
    if isinstance(value, str):
        if "strip" in spec.normalise:
            value = value.strip()
        if "no-commas" in spec.normalise:
            value = value.replace(",", "")
    if spec.type == "string":
        if not isinstance(value, str):
            raise BadInputError(f"{where}: field {spec.field!r} must be a string, got {type(value).__name__}")
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value) and len(value.lstrip("-")) <= 19:
        value = int(value)  # 19 digits hold every 64-bit integer: int() never meets Python's digit limit here
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadInputError(
            f"{where}: field {spec.field!r} must be an integer (ASCII digits, an optional '-'), got {show(value)}"
        )
    if not _INT64[0] <= value <= _INT64[1]:
        raise BadInputError(f"{where}: field {spec.field!r} = {show(value)} is beyond the 64-bit integers a gold holds")
    return value


def _item(task: Task, lang: str, index: int, row: object, where: str) -> TaskItem:
    """A row read from ``where`` as a :class:`TaskItem`, each mapped field checked."""
    at = f"{where}: row {index + 1}"
    if not isinstance(row, dict):
        raise BadInputError(f"{at}: must be an object of fields, got {type(row).__name__}")
    fields = {}
    for name, column in [*task.source.fields.items(), ("gold", task.gold.field)]:
        if column not in row:
            raise BadInputError(f"{at}: no field {column!r} (the task's {name})")
        if name != "gold" and not isinstance(row[column], str):
            raise BadInputError(f"{at}: field {column!r} must be a string, got {type(row[column]).__name__}")
        fields[name] = row[column]
    gold = _gold(fields.pop("gold"), task.gold, at)
    return TaskItem(index, lang, fields, gold)


def _mgsm_item(task: Task, it: MgsmItem) -> TaskItem:
    """An MGSM item as a :class:`TaskItem` (its fields are the loader's attributes, its gold the integer)."""
    missing = [c for c in task.source.fields.values() if c not in ("question", "answer_text")]
    if missing:
        raise BadInputError(f"task {task.name}: the mgsm loader has no field {missing[0]!r} (question, answer_text)")
    return TaskItem(it.item, it.lang, {name: getattr(it, col) for name, col in task.source.fields.items()}, it.answer)


def _read_rows(path: Path) -> list:
    """The rows of a local file, by its suffix (CSV values are all strings)."""
    suffix = path.suffix.lower()
    file = regular_file(path, "task data file")
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(file).to_pylist()
    text = file.read_text("utf-8")
    if suffix == ".jsonl":
        # JSON lines end at "\n" only: a JSON string may hold U+2028 and other characters str.splitlines() splits at
        return [_json(line, f"{path}: line {i}") for i, line in enumerate(text.split("\n"), 1) if line.strip()]
    if suffix == ".json":
        rows = _json(text, str(path))
        if not isinstance(rows, list):
            raise BadInputError(f"{path}: must hold a JSON list of rows")
        return rows
    if suffix == ".csv":
        return _csv_rows(text, path)
    raise BadInputError(f"{path}: unknown data file type {suffix!r}; use .jsonl, .json, .csv or .parquet")


def _json(text: str, where: str) -> object:
    """The JSON value of ``text``; invalid JSON or JSON nested too deep to parse is one line naming ``where``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise BadInputError(f"{where}: JSON nested too deep to read") from None
    except ValueError as exc:  # json.JSONDecodeError, and integers past Python's digit limit
        raise BadInputError(f"{where}: not valid JSON: {exc}") from None


def _csv_rows(text: str, path: Path) -> list[dict]:
    """The rows of a CSV file with a header, fields up to :data:`MAX_CSV_FIELD` characters.

    The csv module's field limit is process-wide: it is raised for this read and put back after it."""
    previous = csv.field_size_limit(MAX_CSV_FIELD)
    rows: list[dict] = []
    try:
        rows.extend(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise BadInputError(
            f"{path}: row {len(rows) + 1}: not valid CSV: {exc} (a field may hold up to {MAX_CSV_FIELD} characters)"
        ) from None
    finally:
        csv.field_size_limit(previous)
    return rows


def _from_files(task: Task, lang: str, data_dir) -> tuple[list, str]:
    pattern = task.source.files or ""
    root = _data_dir(data_dir) if "{data_dir}" in pattern else None
    if "{data_dir}" in pattern and root is None:
        raise BadInputError(f"task {task.name} reads its data under the data folder; set data_dir in mindcap.toml")
    path = Path(pattern.format(lang=lang, config=_config(task, lang), data_dir=root))
    try:
        return _read_rows(path), str(path)
    except FileNotFoundError as exc:
        raise BadInputError(f"task {task.name}: data file missing: {path}") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadInputError(f"task {task.name}: cannot read {path}: {exc}") from exc
    except RecursionError:  # a Parquet file's nested values
        raise BadInputError(f"task {task.name}: cannot read {path}: values nested too deep") from None


def dataset_location(task: Task, data_dir=None) -> str:
    """What ``datasets.load_dataset`` is given: ``<data_dir>/<dataset id>`` when that folder exists (a local
    copy in the hub's layout), else the id (or folder) the task names."""
    dataset = task.source.dataset or ""
    root = _data_dir(data_dir)
    if root is not None and (root / dataset).is_dir():
        return str(root / dataset)
    return dataset


def _from_hub(task: Task, lang: str, data_dir) -> tuple[list, str]:
    import datasets

    where, config = dataset_location(task, data_dir), _config(task, lang)
    try:
        rows = datasets.load_dataset(where, config, split=task.source.split).to_list()
    except Exception as exc:  # datasets raises many kinds; each becomes one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInputError(f"task {task.name}: cannot load {where} ({config}, {task.source.split}): {first}") from exc
    return rows, f"{where} ({config}, {task.source.split})"


def load_items(task: Task, lang: str, *, data_dir: str | os.PathLike[str] | None = None) -> list[TaskItem]:
    """Every item of ``task`` in ``lang`` (a FLORES code of the task), in source row order."""
    if lang not in task.languages:
        raise BadInputError(f"task {task.name} has no {lang}; its languages are {', '.join(task.languages)}")
    if task.source.loader == "mgsm":
        return [_mgsm_item(task, it) for it in load_mgsm(lang, data_dir)]
    rows, where = _from_files(task, lang, data_dir) if task.source.files else _from_hub(task, lang, data_dir)
    return [_item(task, lang, i, row, where) for i, row in enumerate(rows)]


def item_count(task: Task, langs: list[str] | tuple[str, ...], *, data_dir=None) -> int:
    """The number of items every language of ``langs`` has (MGSM's 250 without reading them); a language with
    another count is refused, since items are the same problems in every language."""
    if task.source.loader == "mgsm":
        return N_ITEMS
    counts = {lang: len(load_items(task, lang, data_dir=data_dir)) for lang in langs}
    if len(set(counts.values())) > 1:
        raise BadInputError(f"task {task.name} has different item counts by language: {counts}")
    return next(iter(counts.values()))
