"""Safe writes: atomic files, output folders that hold only what the command wrote, nothing inside a ledger.

Every file and folder is created with the user's umask (a temporary file's 0600 must not survive the rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from .errors import MindcapError

#: the file that makes a folder a ledger, and the format it names (ledger/store.py writes it)
LEDGER_MANIFEST = "_manifest.json"
LEDGER_FORMAT = "mindcap-tok ledger"
#: the marker an output folder holds: which command wrote it and which files are its own
OUTPUT_MARKER = ".mindcap-tok-output.json"


def umask() -> int:
    """The process umask, read without changing it where the OS allows (``os.umask`` sets it for a moment)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def chmod_default(path: Path) -> None:
    """Give ``path`` the mode a plain ``open``/``mkdir`` would have given it (temporary files start 0600/0700)."""
    os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask())


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` so that readers see either the old file or the whole new one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir():
        raise MindcapError(f"{target} is a folder; give a file path")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        chmod_default(Path(tmp))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Text version of :func:`atomic_write_bytes` (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _is_ledger(folder: Path) -> bool:
    manifest = folder / LEDGER_MANIFEST
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text("utf-8")).get("format") == LEDGER_FORMAT
    except (OSError, ValueError, AttributeError):
        return True  # an unreadable manifest still marks a (damaged) ledger: never write there


def enclosing_ledger(path: str | os.PathLike[str]) -> Path | None:
    """The ledger folder that ``path`` is, or lies inside, or ``None``."""
    here = Path(os.path.abspath(path))
    for folder in (here, *here.parents):
        if _is_ledger(folder):
            return folder
    return None


def check_output_file(path: str | os.PathLike[str]) -> Path:
    """Refuse an output file (``--out``, ``--plot``) that is a folder or lies inside a ledger; return its Path."""
    target = Path(path)
    if target.is_dir():
        raise MindcapError(f"output file {target} is a folder; give a file path")
    ledger = enclosing_ledger(target.parent)
    if ledger is not None:
        raise MindcapError(f"output file {target} is inside the ledger {ledger}; write outputs outside it")
    return target


def _marker(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / OUTPUT_MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("producer"), str) and isinstance(data.get("files"), dict)):
        return None
    for name, digest in data["files"].items():  # only plain relative paths inside the folder are ever removed
        if not isinstance(digest, str) or not name or Path(name).is_absolute() or ".." in Path(name).parts:
            return None
    return data


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _contents(folder: Path) -> set[str]:
    """Every file and folder below ``folder``, as POSIX paths relative to it."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def _owned(files: dict[str, str]) -> set[str]:
    """The files a marker lists plus the folders that lead to them."""
    owned = {OUTPUT_MARKER}
    for name in files:
        parts = Path(name).parts
        owned.update(Path(*parts[: i + 1]).as_posix() for i in range(len(parts)))
    return owned


def check_output_folder(path: str | os.PathLike[str], producer: str) -> Path:
    """Refuse an output folder that another program, or another command, has put anything in.

    An absent or empty folder is fine, and so is one whose every entry ``producer`` listed in its marker,
    unchanged since (a rerun replaces its own output, but not a file the user has edited since). A ledger,
    a folder inside one and a file are refused.
    """
    target = Path(path)
    if target.is_symlink():
        target = target.resolve()
    ledger = enclosing_ledger(target)
    if ledger is not None:
        where = "is the ledger" if ledger == Path(os.path.abspath(target)) else f"is inside the ledger {ledger}"
        raise MindcapError(f"output folder {target} {where}; choose a folder outside it")
    if not target.exists() and not target.is_symlink():
        return target
    if not target.is_dir():
        raise MindcapError(f"output folder {target} exists and is not a folder")
    contents = _contents(target)
    if not contents:
        return target
    marker = _marker(target)
    if marker is None:
        raise MindcapError(
            f"output folder {target} already holds files that mindcap-tok did not write "
            f"({', '.join(sorted(contents)[:3])}{', …' if len(contents) > 3 else ''}); choose a new or empty folder"
        )
    if marker["producer"] != producer:
        raise MindcapError(
            f"output folder {target} holds the output of `{marker['producer']}`; choose another folder for `{producer}`"
        )
    foreign = sorted(contents - _owned(marker["files"]))
    if foreign:
        raise MindcapError(
            f"output folder {target} holds files that `{producer}` did not write ({', '.join(foreign[:3])}"
            f"{', …' if len(foreign) > 3 else ''}); move them or choose another folder"
        )
    for name, digest in marker["files"].items():
        if (target / name).is_file() and _sha256(target / name) != digest:
            raise MindcapError(
                f"{target / name} was changed after `{producer}` wrote it; move it or choose another folder"
            )
    return target


def _remove_owned(folder: Path, files: dict[str, str]) -> None:
    """Delete the files a marker lists, then the folders they leave empty; anything else stays."""
    for name in files:
        (folder / name).unlink(missing_ok=True)
    (folder / OUTPUT_MARKER).unlink(missing_ok=True)
    for sub in sorted(_owned(files) - {OUTPUT_MARKER}, key=lambda p: -p.count("/")):
        sub_path = folder / sub
        if sub_path.is_dir() and not any(sub_path.iterdir()):
            sub_path.rmdir()
    if not any(folder.iterdir()):
        folder.rmdir()


@contextmanager
def output_folder(path: str | os.PathLike[str], producer: str) -> Iterator[Path]:
    """Yield a staging folder; when the block succeeds it becomes ``path`` in one rename.

    ``path`` is checked with :func:`check_output_folder` before and again after the block. A marker listing
    the files written is added, so a rerun of ``producer`` may replace them. A replaced earlier output is
    removed file by file (only what its marker lists); on any error nothing is left behind.
    """
    target = check_output_folder(path, producer)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        files = {p.relative_to(tmp).as_posix(): _sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        marker = {"producer": producer, "written": datetime.now(UTC).isoformat(timespec="seconds"), "files": files}
        (tmp / OUTPUT_MARKER).write_text(json.dumps(marker, indent=1, ensure_ascii=False) + "\n", "utf-8")
        check_output_folder(target, producer)  # unchanged while we wrote?
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            previous = _marker(target)
            os.replace(target, old / target.name)
            _publish(tmp, target)
            _remove_owned(old / target.name, previous["files"] if previous else {})
            if (old / target.name).exists():  # something appeared after the check: keep it, say where
                raise MindcapError(f"files added to {target} while writing were moved to {old / target.name}")
            old.rmdir()
        else:
            _publish(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _publish(tmp: Path, target: Path) -> None:
    """Give a staged folder and its files the user's default permissions, then rename it to ``target``."""
    for p in (tmp, *tmp.rglob("*")):
        chmod_default(p)
    os.replace(tmp, target)


def check_new_folder(out: str | os.PathLike[str]) -> Path:
    """Refuse a new output folder (an extension) that exists already or would lie inside a ledger; return it."""
    target = Path(out)
    if target.exists():
        raise MindcapError(f"output folder {target} already exists; choose a new one")
    ledger = enclosing_ledger(target)
    if ledger is not None:
        raise MindcapError(f"output folder {target} is inside the ledger {ledger}; choose a folder outside it")
    return target


@contextmanager
def new_folder(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder beside ``out`` and rename it to ``out`` when the block succeeds.

    ``out`` must not exist; on any error the temporary folder is removed, so no half-written output remains.
    """
    target = check_new_folder(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            raise MindcapError(f"output folder {target} appeared while writing; left it alone")
        _publish(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
