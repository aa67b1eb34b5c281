"""Reading task files: the built-in ones (``tasks/builtin/<name>.toml``) by name, a user's by path.

A user's task may not take a built-in task's name (records name their task, so the two could not be told apart),
and the task files given together may not name one task twice.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path

from ..errors import BadInputError
from ..spec import SpecError, read_toml, reading, validate
from .model import Task, check_task

_BUILTIN = "mindcap_tok.tasks.builtin"
#: the task of a job (or record) that names none
DEFAULT_TASK = "mgsm"


def task_key(name: str) -> tuple[str, ...]:
    """The task's part of what names a request (its seed) and of a stored job spec: nothing for
    :data:`DEFAULT_TASK` (its seeds and stored specs are those of MGSM's frozen ``mgsm-v1`` jobs), else its name."""
    return () if name == DEFAULT_TASK else (name,)


def lmeval_names() -> dict[str, tuple[str, str]]:
    """The lm-evaluation-harness task-name prefixes the built-in tasks claim: prefix -> (task, arm)."""
    return {prefix: (name, arm) for name in builtin_tasks() for prefix, arm in _builtin(name).lmeval.items()}


def builtin_tasks() -> list[str]:
    """The names of the task files shipped with the package."""
    files = resources.files(_BUILTIN).iterdir()
    return sorted(f.name.removesuffix(".toml") for f in files if f.name.endswith(".toml"))


def parse_task(data: object, source: object = "task", *, base: Path | None = None) -> Task:
    """A task from the plain data of a TOML file, checked; relative source ``files`` (other than those under
    ``{data_dir}``) resolved against ``base``, the task file's folder."""
    with reading(source):
        task = check_task(validate(Task, data, key=""))
    files = task.source.files
    if files and base is not None and not files.startswith("{data_dir}") and not Path(files).is_absolute():
        task = task.model_copy(update={"source": task.source.model_copy(update={"files": str(base / files)})})
    return task


@cache
def _builtin(name: str) -> Task:
    text = resources.files(_BUILTIN).joinpath(f"{name}.toml").read_text("utf-8")
    return parse_task(tomllib.loads(text), f"built-in task {name}")


def load_task(name_or_path: str | os.PathLike[str]) -> Task:
    """A built-in task by name (``belebele``), else the task file at that path (``my-task.toml``), whose task
    may not take a built-in task's name."""
    text = os.fspath(name_or_path)
    if text in builtin_tasks():
        return _builtin(text)
    path = Path(text)
    if path.suffix != ".toml" and not path.exists():
        raise BadInputError(f"unknown task {text!r}: give a task file (.toml) or one of {', '.join(builtin_tasks())}")
    task = parse_task(read_toml(path, "task file"), path, base=path.resolve().parent)
    if task.name in builtin_tasks():
        with reading(path):
            raise SpecError("name", f"{task.name!r} is a built-in task's name; give your task a name of its own")
    return task


def load_task_files(files: Iterable[str | os.PathLike[str]]) -> dict[str, Task]:
    """The tasks of the user's task ``files`` by name; two files naming the same task are refused in one line."""
    found: dict[str, tuple[Task, str]] = {}
    for file in files:
        task = load_task(file)
        if task.name in found and os.path.realpath(found[task.name][1]) != os.path.realpath(file):
            raise BadInputError(
                f"task files {found[task.name][1]} and {os.fspath(file)} both name task {task.name!r}; "
                "give each task once"
            )
        found[task.name] = (task, os.fspath(file))
    return {name: task for name, (task, _) in found.items()}
