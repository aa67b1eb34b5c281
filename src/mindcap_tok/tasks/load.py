"""Reading task files: the built-in ones (``tasks/builtin/<name>.toml``) by name, a user's by path."""

from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from .._io import regular_file
from ..errors import BadInputError
from ..spec import reading, validate
from .model import Task, check_task

_BUILTIN = "mindcap_tok.tasks.builtin"
#: the task of a job (or record) that names none: everything written before tasks is MGSM
DEFAULT_TASK = "mgsm"


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


def _read(path: Path, what: str) -> dict:
    try:
        return tomllib.loads(regular_file(path, what).read_text("utf-8"))
    except OSError as exc:
        raise BadInputError(f"cannot read {what} {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{what} {path} is not UTF-8 text: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"{what} {path} is not valid TOML: {exc}") from exc


@cache
def _builtin(name: str) -> Task:
    text = resources.files(_BUILTIN).joinpath(f"{name}.toml").read_text("utf-8")
    return parse_task(tomllib.loads(text), f"built-in task {name}")


def load_task(name_or_path: str | os.PathLike[str]) -> Task:
    """A built-in task by name (``belebele``), else the task file at that path (``my-task.toml``)."""
    text = os.fspath(name_or_path)
    if text in builtin_tasks():
        return _builtin(text)
    path = Path(text)
    if path.suffix != ".toml" and not path.exists():
        raise BadInputError(f"unknown task {text!r}: give a task file (.toml) or one of {', '.join(builtin_tasks())}")
    return parse_task(_read(path, "task file"), path, base=path.resolve().parent)
