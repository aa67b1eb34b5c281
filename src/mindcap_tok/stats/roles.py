"""An arm named once for every cell, or per task: the ``native`` and ``translate`` arguments of the statistics.

A statistic compares a native arm with a comparator. Either one name serves every cell (``"native"``), or a
mapping gives each task's own arm (``{"task-a": "native", "my-task": "direct"}``), looked up in a cell's ``task``
column; this module reads both forms, so nothing here knows a task by name.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import BadInputError

#: one arm for every cell, or task -> arm
Arm = str | Mapping[str, str]


def simplest(arm: Arm) -> Arm:
    """``arm`` as one name when every task has the same one (so single-task outputs keep their arm names)."""
    if isinstance(arm, Mapping):
        names = set(arm.values())
        if len(names) == 1:
            return names.pop()
    return arm


def label(arm: Arm, role: str) -> str:
    """How ``arm`` is named in output columns and messages: its name, or ``role`` when it differs by task."""
    arm = simplest(arm)
    return arm if isinstance(arm, str) else role


def arm_of(arm: Arm, task: object = None) -> str:
    """The arm of a cell of ``task`` (None: a cell without a task, allowed when every task has the same arm)."""
    arm = simplest(arm)
    if isinstance(arm, str):
        return arm
    if task is None or pd.isna(task):
        raise BadInputError(f"the tasks' arms differ ({_shown(arm)}): name the task of each cell")
    if str(task) not in arm:
        raise BadInputError(f"no arm given for task {task!r} (arms given for {', '.join(sorted(arm))})")
    return arm[str(task)]


def arm_mask(frame: pd.DataFrame, arm: Arm) -> np.ndarray:
    """Whether each row of ``frame`` (its ``arm`` and, for a per-task ``arm``, ``task`` columns) is of ``arm``."""
    arm = simplest(arm)
    arms = frame["arm"].to_numpy(dtype=object)
    if isinstance(arm, str):
        return arms == arm
    if "task" not in frame.columns:
        return arms == arm_of(arm)  # raises: the tasks' arms differ and no row names its task
    tasks = frame["task"].astype(object)
    for task in pd.unique(tasks):
        arm_of(arm, task)  # a one-line error for a cell without a task, or of a task without an arm
    return arms == tasks.map(dict(arm)).to_numpy(dtype=object)


def _shown(arm: Mapping[str, str]) -> str:
    return ", ".join(f"{t}: {a}" for t, a in sorted(arm.items()))
