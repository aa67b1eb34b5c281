"""Each record's task and that task's native and comparator arms: what lets every statistic, the pricing and the
audits compare a task's own two arms (``direct``/``english`` for a user's task) without naming any task."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import BadInputError
from .load import DEFAULT_TASK, builtin_tasks, load_task
from .model import Task


def record_tasks(table: pa.Table | pd.DataFrame) -> np.ndarray:
    """Each record's task name (object array; no ``task`` column or a null one: MGSM's, as every older ledger)."""
    n = table.num_rows if isinstance(table, pa.Table) else len(table)
    names = table.column_names if isinstance(table, pa.Table) else list(table.columns)
    if "task" not in names:
        return np.full(n, DEFAULT_TASK, dtype=object)
    col = table.column("task").to_pylist() if isinstance(table, pa.Table) else table["task"].tolist()
    return np.array([DEFAULT_TASK if t is None or t != t else str(t) for t in col], dtype=object)


def find_tasks(names: Sequence[str], files: Sequence[str | os.PathLike[str]] = ()) -> dict[str, Task]:
    """The task of each name: a built-in one, or one of the user's task ``files`` (a ledger records a task by
    name; a task that is neither is a one-line error asking for its file)."""
    given = {t.name: t for t in map(load_task, files)}
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
