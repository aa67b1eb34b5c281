"""Safe writes: atomic files, output folders that hold only what the command wrote, nothing inside a ledger;
safe reads: nothing is opened that is not a regular file (a FIFO would block the reader forever).

Every file and folder is created with the user's umask (a temporary file's 0600 must not survive the rename).

An output folder ``DIR`` is written as ``.DIR.<random>.tmp`` beside it and renamed into place. The staging folder
holds a ``.mindcap-tok-staging.json`` naming the host and process that write it, removed just after the rename:
a later run of any producer removes a staging folder for the same ``DIR`` whose process is gone (SIGKILL), and
leaves every other folder alone. A rerun replacing its own earlier output moves it to ``.DIR.old`` (a fixed
name), publishes the new one, then removes the old one file by file; a run that finds ``.DIR.old`` finishes
that work first: it puts the old output back when ``DIR`` is missing (killed between the two renames) or
finishes removing it when ``DIR`` is there, in both cases only after checking that ``.DIR.old`` holds nothing but
that producer's unchanged files.

Run folders (a round trip's, a render's) are written in place, file by file: every path below such a folder is
checked component by component (:func:`write_inside`), so nothing is written through a symlink found there, and
a writer holds the folder's lock file for the whole run (:func:`folder_lock`), so two runs never mix their files.
A write that fails for want of space (disk full, quota, file size limit) is one line saying what was left.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from .errors import BadInputError, DamagedDataError, MindcapError, StorageError, with_context

#: the file that makes a folder a ledger, and the format it names (store/ledger.py writes it)
LEDGER_MANIFEST = "_manifest.json"
LEDGER_FORMAT = "mindcap-tok ledger"
#: the marker an output folder holds: which command wrote it and which files are its own
OUTPUT_MARKER = ".mindcap-tok-output.json"
#: the file a staging folder holds while it is written: whose it is, so a leftover of a killed run can go
STAGING_MARKER = ".mindcap-tok-staging.json"
#: the lock file a run folder holds: a writer holds an exclusive ``flock`` on it for the whole run
RUN_LOCK = ".mindcap-tok-lock"
#: the errors of a write that found no room: disk full, quota exceeded, file size limit (RLIMIT_FSIZE)
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((word for test, word in _KINDS if test(mode)), "a device or other special file")


def regular_file(path: str | os.PathLike[str], what: str, *, pipe_ok: bool = False) -> Path:
    """``path`` unless it is a folder, FIFO, device or socket: then one line naming ``what`` it should have been.

    Checked with ``os.stat`` and never opened, because opening a FIFO blocks until something writes to it. An
    absent path is returned as it is, so the caller's own "not found" message stays. ``pipe_ok`` admits a pipe
    the shell has already opened (standard input, ``<(…)``: a path that resolves into ``/proc``).
    """
    target = Path(path)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise BadInputError(f"cannot read {what} {target}: {exc.strerror or exc}") from exc
    if stat.S_ISREG(mode) or (pipe_ok and stat.S_ISFIFO(mode) and os.path.realpath(target).startswith("/proc/")):
        return target
    raise BadInputError(f"{what} {target} is {_kind(mode)}, not a regular file")


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
        raise BadInputError(f"{target} is a folder; give a file path")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _no_room(exc, f"cannot write {target}: {exc.strerror}; {target} was not written or changed") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        chmod_default(Path(tmp))
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _no_room(exc, f"cannot write {target}: {exc.strerror}; {target} was not written or changed") from exc
        raise
    return target


def _no_room(exc: OSError, message: str) -> OSError | StorageError:
    """``exc`` as a :class:`StorageError` saying ``message`` when the write found no room, else ``exc`` itself."""
    return StorageError(message, path=exc.filename) if exc.errno in NO_ROOM else exc


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Text version of :func:`atomic_write_bytes` (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _is_ledger(folder: Path) -> bool:
    manifest = folder / LEDGER_MANIFEST
    if not manifest.is_file():  # is_file: a FIFO named like the manifest is never opened
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
    """Refuse an output file (``--out``, ``--plot``) that is a folder, is named like one (ends with a path
    separator) or lies inside a ledger; return its Path."""
    target = Path(path)
    if str(path).endswith(("/", os.sep)):
        raise BadInputError(f"output file {path} ends with a path separator (a folder); give a file path")
    if target.is_dir():
        raise BadInputError(f"output file {target} is a folder; give a file path")
    ledger = enclosing_ledger(target.parent)
    if ledger is not None:
        raise BadInputError(f"output file {target} is inside the ledger {ledger}; write outputs outside it")
    return target


def _read_json(path: Path) -> object:
    """The JSON in ``path`` if it is a regular file (never a FIFO or a symlink), else ``None``."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _marker(folder: Path) -> dict | None:
    data = _read_json(folder / OUTPUT_MARKER)
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
    """Every file and folder below ``folder``, as POSIX paths relative to it (symlinks listed, not followed)."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


def _owned(files: dict[str, str]) -> set[str]:
    """The files a marker lists plus the folders that lead to them (and a staging marker a kill left)."""
    owned = {OUTPUT_MARKER, STAGING_MARKER}
    for name in files:
        parts = Path(name).parts
        owned.update(Path(*parts[: i + 1]).as_posix() for i in range(len(parts)))
    return owned


def _unsafe(folder: Path, name: str) -> str | None:
    """Why the listed ``folder/name`` may not be removed (a symlink, or not a regular file, on the way), or None.

    An absent file is safe: there is nothing to remove.
    """
    here = folder
    parts = Path(name).parts
    for depth, part in enumerate(parts, 1):
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return None
        shown = Path(*parts[:depth]).as_posix()
        if stat.S_ISLNK(mode):
            return f"{shown} is a symlink"
        if depth < len(parts) and not stat.S_ISDIR(mode):
            return f"{shown} is not a folder"
        if depth == len(parts) and not stat.S_ISREG(mode):
            return f"{shown} is {_kind(mode)}"
    return None


def _check_owned(folder: Path, producer: str) -> None:
    """Refuse ``folder`` (an existing folder) unless all it holds is ``producer``'s own unchanged regular files."""
    contents = _contents(folder)
    if not contents:
        return
    marker = _marker(folder)
    if marker is None:
        raise BadInputError(
            f"output folder {folder} already holds files that mindcap-tok did not write "
            f"({', '.join(sorted(contents)[:3])}{', …' if len(contents) > 3 else ''}); choose a new or empty folder"
        )
    if marker["producer"] != producer:
        raise BadInputError(
            f"output folder {folder} holds the output of `{marker['producer']}`; choose another folder for `{producer}`"
        )
    foreign = sorted(contents - _owned(marker["files"]))
    if foreign:
        raise BadInputError(
            f"output folder {folder} holds files that `{producer}` did not write ({', '.join(foreign[:3])}"
            f"{', …' if len(foreign) > 3 else ''}); move them or choose another folder"
        )
    for name in marker["files"]:
        why = _unsafe(folder, name)
        if why is not None:
            raise DamagedDataError(
                f"output folder {folder}: its marker lists {name}, but {why}; `{producer}` removes only its own "
                "regular files inside the folder: move it or choose another folder"
            )
    for name, digest in marker["files"].items():
        if (folder / name).exists() and _sha256(folder / name) != digest:
            raise DamagedDataError(
                f"{folder / name} was changed after `{producer}` wrote it; move it or choose another folder"
            )


def _old(target: Path) -> Path:
    """Where a rerun parks the output it replaces (a fixed name, so the next run finds it after a kill)."""
    return target.with_name(f".{target.name}.old")


def _has_files(folder: Path) -> bool:
    """Whether anything but (empty) folders lies below ``folder``."""
    return any(p.is_symlink() or not p.is_dir() for p in folder.rglob("*"))


def _pending_replace(target: Path, producer: str) -> str | None:
    """What an interrupted replace of ``target`` left to do: ``restore``, ``finish``, ``empty`` or nothing.

    Refuses (one line, nothing touched) a ``.NAME.old`` that is not ``producer``'s own unchanged output.
    """
    old = _old(target)
    if not os.path.lexists(old):
        return None
    if old.is_symlink() or not old.is_dir():
        raise BadInputError(f"{old} is in the way of the output folder {target}; move it")
    if not _has_files(old):
        return "empty"
    try:
        _check_owned(old, producer)
    except MindcapError as exc:
        raise with_context(exc, f"an earlier run left {old}, which cannot be cleaned up: {exc}") from exc
    return "finish" if os.path.lexists(target) else "restore"


def _finish_replace(target: Path, producer: str) -> None:
    """Roll an interrupted replace of ``target`` forward or back (see :func:`_pending_replace`)."""
    old = _old(target)
    action = _pending_replace(target, producer)
    if action == "restore":
        os.replace(old, target)
    elif action == "finish":
        _remove_owned(old, (_marker(old) or {"files": {}})["files"])
    elif action == "empty":
        _remove_empty(old)


def _remove_empty(folder: Path) -> None:
    """Remove ``folder`` and the empty folders below it (``rmdir`` refuses anything else)."""
    for sub in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        sub.rmdir()
    folder.rmdir()


def check_folder_path(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Refuse a folder path that is a dangling symlink, or that is absent and cannot be created (a file on the
    way, or a place without write permission); return it. What ``path`` itself holds is the caller's to check."""
    target = Path(path)
    if target.is_symlink() and not target.exists():
        raise BadInputError(f"{what} {target} is a symlink to {target.resolve()}, which does not exist")
    if os.path.lexists(target):
        return target
    here = Path(os.path.abspath(target)).parent
    while not os.path.lexists(here):
        here = here.parent
    if not here.is_dir():
        raise BadInputError(f"cannot create {what} {target}: {here} is not a folder")
    try:  # a real probe, not os.access: root passes every access check, yet /proc or a read-only mount refuses
        os.rmdir(tempfile.mkdtemp(prefix=".mindcap-tok-probe.", dir=here))
    except OSError as exc:
        raise StorageError(f"cannot create {what} {target}: {here} is not writable ({exc.strerror or exc})") from exc
    return target


def _output_path(path: str | os.PathLike[str]) -> Path:
    """``path``, or where it links to (see :func:`check_folder_path` for what is refused)."""
    target = check_folder_path(path)
    return target.resolve() if target.is_symlink() else target


def check_output_folder(path: str | os.PathLike[str], producer: str) -> Path:
    """Refuse an output folder that another program, or another command, has put anything in.

    An absent or empty folder is fine, and so is one whose every entry ``producer`` listed in its marker,
    unchanged since, as regular files reached without a symlink (a rerun replaces its own output, but not a
    file the user has edited since, nor anything outside the folder). A ledger, a folder inside one, a file,
    a dangling symlink and a place where no folder can be created are refused.
    """
    target = _output_path(path)
    ledger = enclosing_ledger(target)
    if ledger is not None:
        where = "is the ledger" if ledger == Path(os.path.abspath(target)) else f"is inside the ledger {ledger}"
        raise BadInputError(f"output folder {target} {where}; choose a folder outside it")
    _pending_replace(target, producer)
    if not os.path.lexists(target):
        return target
    if not target.is_dir():
        raise BadInputError(f"output folder {target} exists and is not a folder")
    _check_owned(target, producer)
    return target


def _remove_owned(folder: Path, files: dict[str, str]) -> None:
    """Delete the files a marker lists, then the marker, then the folders they leave empty; anything else stays.

    The marker goes after the files, so an interrupted removal leaves a folder the next run still recognises.
    """
    for name in files:
        if _unsafe(folder, name) is None:
            (folder / name).unlink(missing_ok=True)
    (folder / STAGING_MARKER).unlink(missing_ok=True)
    (folder / OUTPUT_MARKER).unlink(missing_ok=True)
    for sub in sorted(_owned(files) - {OUTPUT_MARKER, STAGING_MARKER}, key=lambda p: -p.count("/")):
        sub_path = folder / sub
        if sub_path.is_dir() and not sub_path.is_symlink() and not any(sub_path.iterdir()):
            sub_path.rmdir()
    if not any(folder.iterdir()):
        folder.rmdir()


def _alive(owner: object) -> bool:
    """Whether the process a staging marker names may still be writing (unknown or on another host: yes)."""
    ours = isinstance(owner, dict) and owner.get("host") == socket.gethostname()
    if not (ours and isinstance(owner, dict) and isinstance(owner.get("pid"), int)):
        return True
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _clean_staging(target: Path) -> None:
    """Remove the staging folders of ``target`` that killed runs left (they carry our staging marker)."""
    for tmp in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
        owner = None if tmp.is_symlink() or not tmp.is_dir() else _read_json(tmp / STAGING_MARKER)
        if owner is not None and not _alive(owner):
            shutil.rmtree(tmp)


@contextmanager
def _staging(target: Path) -> Iterator[Path]:
    """A marked temporary folder beside ``target``, removed on any error; a write that found no room is one line
    saying that nothing was published."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _clean_staging(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    except OSError as exc:
        raise StorageError(f"cannot create output folder {target}: {exc.strerror or exc}") from exc
    try:
        owner = {"host": socket.gethostname(), "pid": os.getpid()}
        (tmp / STAGING_MARKER).write_text(json.dumps(owner) + "\n", "utf-8")
        yield tmp
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        cause = exc.__cause__ if isinstance(exc, StorageError) else exc  # a file of it written atomically, or not
        if isinstance(cause, OSError) and cause.errno in NO_ROOM:
            kept = "the earlier output there is unchanged" if os.path.lexists(target) else "nothing is there"
            raise StorageError(
                f"cannot write output folder {target}: {cause.strerror}; nothing was published (its staging "
                f"folder was removed, {kept})",
                path=target,
            ) from exc
        raise


@contextmanager
def output_folder(path: str | os.PathLike[str], producer: str) -> Iterator[Path]:
    """Yield a staging folder; when the block succeeds it becomes ``path`` in one rename.

    ``path`` is checked with :func:`check_output_folder` before and again after the block. A marker listing
    the files written is added, so a rerun of ``producer`` may replace them. A replaced earlier output is
    parked as ``.NAME.old`` and then removed file by file (only what its marker lists); a replace that a kill
    interrupted is finished or rolled back first. On any error nothing is left behind.
    """
    target = check_output_folder(path, producer)
    _finish_replace(target, producer)
    with _staging(target) as tmp:
        yield tmp
        _write_marker(tmp, producer)
        check_output_folder(target, producer)  # unchanged while we wrote?
        if os.path.lexists(target):
            old = _old(target)
            previous = _marker(target)
            os.replace(target, old)  # a kill from here to the publish: the next run puts it back
            try:
                _publish(tmp, target)  # a kill from here on: the next run finishes removing it
            except BaseException:
                if not os.path.lexists(target):
                    os.replace(old, target)  # an error or Ctrl-C: put it back now
                raise
            _remove_owned(old, previous["files"] if previous else {})
            if old.exists():  # something appeared after the check: keep it, say where
                raise BadInputError(f"files added to {target} while writing were moved to {old}")
        else:
            _publish(tmp, target)


def _write_marker(tmp: Path, producer: str) -> None:
    """List every file of the staged folder ``tmp`` with its SHA-256 in its output marker, naming ``producer``."""
    files = {
        p.relative_to(tmp).as_posix(): _sha256(p)
        for p in sorted(tmp.rglob("*"))
        if p.is_file() and not (p.parent == tmp and p.name in (STAGING_MARKER, OUTPUT_MARKER))
    }
    marker = {"producer": producer, "written": datetime.now(UTC).isoformat(timespec="seconds"), "files": files}
    (tmp / OUTPUT_MARKER).write_text(json.dumps(marker, indent=1, ensure_ascii=False) + "\n", "utf-8")


def _publish(tmp: Path, target: Path) -> None:
    """Give a staged folder and its files the user's default permissions, then rename it to ``target``."""
    for p in (tmp, *tmp.rglob("*")):
        chmod_default(p)
    os.replace(tmp, target)
    (target / STAGING_MARKER).unlink(missing_ok=True)  # after the rename: a staging folder never goes unmarked


def check_new_folder(out: str | os.PathLike[str]) -> Path:
    """Refuse a new output folder (an extension) that exists already (even as a dangling symlink), would lie
    inside a ledger or cannot be created; return it. An existing folder is described: a complete earlier output
    (its marker's files all there, unchanged) or not known to be one."""
    target = check_folder_path(out)
    if os.path.lexists(target):
        raise BadInputError(f"output folder {target} already exists: {_describe(target)}")
    ledger = enclosing_ledger(target)
    if ledger is not None:
        raise BadInputError(f"output folder {target} is inside the ledger {ledger}; choose a folder outside it")
    return target


def _describe(target: Path) -> str:
    """What an existing output folder holds, and what to do, for :func:`check_new_folder`'s refusal.

    A staging marker left inside a published folder (a kill between the rename and its removal) is removed when
    its process is gone: the rename is the commit point, so such a folder is complete.
    """
    if target.is_symlink() or not target.is_dir():
        return "it is not a folder; choose a new one"
    marker = _marker(target)
    if marker is None:
        return "mindcap-tok did not write it, or wrote it without a marker (not known to be complete); choose a new one"
    leftover = _read_json(target / STAGING_MARKER)
    if leftover is not None and not _alive(leftover):
        with contextlib.suppress(OSError):  # a dead run's marker: the next run removes it if this cannot
            (target / STAGING_MARKER).unlink()
    for name, digest in marker["files"].items():
        why = _unsafe(target, name)
        if why is None and not (target / name).exists():
            why = f"{name} is missing"
        elif why is None and _sha256(target / name) != digest:
            why = f"{name} was changed since"
        if why is not None:
            return f"an output of `{marker['producer']}` that is not whole ({why}); choose a new one"
    return (
        f"a complete output of `{marker['producer']}` (written {marker.get('written', '?')}, its "
        f"{len(marker['files'])} files unchanged); choose a new folder, or remove it to write it again"
    )


@contextmanager
def new_folder(out: str | os.PathLike[str], producer: str) -> Iterator[Path]:
    """Yield a temporary folder beside ``out`` and rename it to ``out`` when the block succeeds.

    ``out`` must not exist; on any error the temporary folder is removed, so no half-written output remains. The
    folder gets an output marker naming ``producer`` and its files, so a later run can say it is complete.
    """
    target = check_new_folder(out)
    with _staging(target) as tmp:
        yield tmp
        _write_marker(tmp, producer)
        if os.path.lexists(target):
            raise BadInputError(f"output folder {target} appeared while writing; left it alone")
        _publish(tmp, target)


# -- run folders: written in place, file by file, by one run at a time -------------------------------------------


def check_tree(root: Path, what: str) -> None:
    """Refuse a folder holding, anywhere below it, a symlink or anything but folders and regular files: one line
    naming the first (a run writes its files below ``root``, never through a link it did not make)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise BadInputError(f"cannot read {what} {root}: {exc.strerror or exc}") from exc
        for entry in entries:
            shown = Path(entry.path).relative_to(root).as_posix()
            if entry.is_symlink():
                raise BadInputError(f"{what} {root}: {shown} is a symlink; remove it (a run writes only its own files)")
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif not entry.is_file(follow_symlinks=False):
                kind = _kind(entry.stat(follow_symlinks=False).st_mode)
                raise BadInputError(f"{what} {root}: {shown} is {kind}; remove it (a run writes only regular files)")


def _below(root: Path, name: str, what: str) -> Path:
    """``root/name``, each folder on the way made here when missing and checked (``lstat``, never followed): one
    line when one is a symlink or not a folder, or the file itself a symlink or not a regular file."""
    parts = Path(name).parts
    assert parts and not Path(name).is_absolute() and ".." not in parts, f"not a plain relative path: {name}"
    here = root
    for depth, part in enumerate(parts, 1):
        here = here / part
        last = depth == len(parts)
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            if last:
                break
            try:
                os.mkdir(here)
            except FileExistsError:
                pass  # made meanwhile: checked below like any other
            except OSError as exc:
                raise _no_room(exc, f"cannot create {here}: {exc.strerror}") from exc
            mode = os.lstat(here).st_mode
        shown = Path(*parts[:depth]).as_posix()
        if stat.S_ISLNK(mode):
            raise BadInputError(f"{what} {root}: {shown} is a symlink; remove it (a run writes only its own files)")
        if not last and not stat.S_ISDIR(mode):
            raise BadInputError(f"{what} {root}: {shown} is not a folder; remove it")
        if last and not stat.S_ISREG(mode):
            raise BadInputError(f"{what} {root}: {shown} is {_kind(mode)}; remove it")
    return here


def path_inside(root: Path, name: str, what: str) -> Path:
    """``root/name`` to write, through real folders only (see :func:`_below`; ``root`` itself is made when absent);
    ``what`` names the folder in messages ("round-trip folder")."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _no_room(exc, f"cannot create {what} {root}: {exc.strerror}") from exc
    return _below(root, name, what)


def write_inside(root: Path, name: str, data: bytes, what: str) -> Path:
    """Write ``data`` to ``root/name`` atomically (:func:`atomic_write_bytes`), through real folders only
    (:func:`path_inside`)."""
    return atomic_write_bytes(path_inside(root, name, what), data)


@contextmanager
def folder_lock(folder: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (made when absent) for the block; a second writer is refused at once
    with one line naming the holder, so two runs never mix their files in one folder.

    An ``flock`` on ``folder/.mindcap-tok-lock`` (the file stays; the kernel drops the lock when the process ends,
    so a kill leaves no stale lock). On Linux NFS (kernel 2.6.12 on) ``flock`` is emulated with POSIX byte-range
    locks that the server arbitrates between clients (NFSv4, or NFSv3 with lockd running); a mount with
    ``nolock`` or ``local_lock=flock`` keeps the lock on one client, so two machines are not kept apart there.
    A folder the block made and left holding nothing but the lock file is removed again (a refused run writes
    nothing).
    """
    made = not os.path.lexists(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / RUN_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInputError(f"{what} {folder}: {RUN_LOCK} is a symlink; remove it") from exc
        raise _no_room(exc, f"cannot lock {what} {folder}: {exc.strerror or exc}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadInputError(f"{what} {folder}: {RUN_LOCK} is {_kind(os.fstat(fd).st_mode)}; remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_json(folder / RUN_LOCK)
            who = f"process {holder.get('pid')} on {holder.get('host')}" if isinstance(holder, dict) else "a process"
            raise BadInputError(
                f"{what} {folder} is being written by another run ({who}); wait for it to end or choose another folder"
            ) from None
        except OSError as exc:
            raise StorageError(f"cannot lock {what} {folder}: {exc.strerror or exc}") from exc
        if not _same_file(fd, folder / RUN_LOCK):  # a run that made the folder removed it as we opened it
            raise BadInputError(f"{what} {folder} was being written by another run just now; run again")
        with suppress(OSError):  # the holder's name is only for the message a second writer gets
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps({"host": socket.gethostname(), "pid": os.getpid()}) + "\n").encode(), 0)
        try:
            yield
        finally:
            with suppress(OSError):
                if made and {p.name for p in folder.iterdir()} == {RUN_LOCK}:
                    (folder / RUN_LOCK).unlink()
                    folder.rmdir()
    finally:
        os.close(fd)  # releases the lock


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` (not followed) is the file open as ``fd``."""
    try:
        here, there = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
