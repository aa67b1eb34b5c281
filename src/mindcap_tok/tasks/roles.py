"""Each record's task and that task's native and comparator arms: what lets every statistic, the pricing and the
audits compare a task's own two arms (``direct``/``english`` for a user's task) without naming any task; and
whether each record's stored gold has its task's gold type (a user's task is known only once its file is given)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadInputError
from .load import DEFAULT_TASK, builtin_tasks, load_task, load_task_files
from .model import Task

#: the native role: a task's arm in the item's language, and how statistics name it in their output (a leader, a
#: label where the tasks' native arms differ)
NATIVE_ROLE: Final = "native"
#: the comparator role: the arm a task compares its native arm with
COMPARATOR_ROLE: Final = "comparator"


def record_tasks(table: pa.Table | pd.DataFrame) -> np.ndarray:
    """Each record's task name (object array; no ``task`` column or a null one: MGSM's, as every older ledger)."""
    n = table.num_rows if isinstance(table, pa.Table) else len(table)
    names = table.column_names if isinstance(table, pa.Table) else list(table.columns)
    if "task" not in names:
        return np.full(n, DEFAULT_TASK, dtype=object)
    col = table.column("task").to_pylist() if isinstance(table, pa.Table) else table["task"].tolist()
    return np.array([DEFAULT_TASK if t is None or t != t else str(t) for t in col], dtype=object)


def unnamed_task_arms() -> tuple[str, str]:
    """The (native, comparator) arms of the task of records that name none (:func:`record_tasks`)."""
    task = load_task(DEFAULT_TASK)
    return task.native, task.comparator


def find_tasks(names: Sequence[str], files: Sequence[str | os.PathLike[str]] = ()) -> dict[str, Task]:
    """The task of each name: a built-in one, or one of the user's task ``files`` (a ledger records a task by
    name; a task that is neither is a one-line error asking for its file)."""
    given = load_task_files(files)
    out = {}
    for name in dict.fromkeys(names):
        if name not in given and name not in builtin_tasks():
            raise BadInputError(
                f"records of task {name!r}, which is not built in ({', '.join(builtin_tasks())}): give its task "
                "file (--task FILE)",
                key="task",
            )
        out[name] = given.get(name) or load_task(name)
    return out


def role_mask(
    records: pa.Table, role: Literal["native", "comparator"], *, tasks: Sequence[str | os.PathLike[str]] = ()
) -> np.ndarray:
    """Whether each record is of its task's ``role`` arm (:data:`NATIVE_ROLE` or :data:`COMPARATOR_ROLE`;
    ``tasks``: the task files of records whose task is not built in)."""
    names = record_tasks(records)
    found = find_tasks(list(dict.fromkeys(names)), tasks)
    arm = records.column("arm").to_numpy(zero_copy_only=False)
    return arm == np.array([getattr(found[t], role) for t in names], dtype=object)


@dataclass(frozen=True)
class TaskArms:
    """Per task name, its native arm and its comparator arm (the arguments every statistic takes as ``native``
    and ``translate``: a mapping task -> arm)."""

    native: dict[str, str]
    comparator: dict[str, str]


def task_arms(records: pa.Table | pd.DataFrame, files: Sequence[str | os.PathLike[str]] = ()) -> TaskArms:
    """The native and comparator arm of each task the ``records`` hold, read from the task files (built-in ones
    by name, the user's from ``files``)."""
    found = find_tasks(list(dict.fromkeys(record_tasks(records))), files)
    return TaskArms({n: t.native for n, t in found.items()}, {n: t.comparator for n, t in found.items()})


def gold_type_mismatch(table: pa.Table, tasks: dict[str, Task]) -> tuple[int, str] | None:
    """The first record whose stored gold is not of its task's gold type, as (row, problem), else ``None``: an
    integer task's gold stored as text (``gold_text``) or a text task's stored as an integer (``gold``) would
    never equal an answer read, and score 0 without a word. ``tasks``: each task the records name."""
    names = table.column_names
    n = table.num_rows
    task_col = table.column("task").fill_null(DEFAULT_TASK) if "task" in names else pa.array([DEFAULT_TASK] * n)
    gold = table.column("gold") if "gold" in names else pa.nulls(n, pa.int64())
    text = table.column("gold_text") if "gold_text" in names else pa.nulls(n, pa.string())
    for name, task in tasks.items():
        rows = pc.equal(task_col, name)
        integer = task.gold.type == "integer"
        bad = pc.and_(rows, pc.is_valid(text) if integer else pc.is_valid(gold))
        if pc.any(bad).as_py():
            row = int(np.flatnonzero(bad.to_numpy(zero_copy_only=False))[0])
            if integer:
                value = text[row].as_py()
                return row, (
                    f"gold = {value!r} is stored as text, but task {name!r} takes an integer gold; store "
                    "its records with integer golds"
                )
            value = gold[row].as_py()
            return row, (
                f"gold = {value} is stored as an integer, but task {name!r} takes a text gold; store its "
                f'records with text golds ("{value}")'
            )
    return None
