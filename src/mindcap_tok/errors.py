"""The exceptions the CLI turns into a one-line error message: :class:`MindcapError` and its kinds.

Every error of the package is a :class:`MindcapError` (``except MindcapError`` catches them all, and the CLI
prints ``error: <message>`` and exits 2 for each); its subclasses say what kind of problem it is, so that callers
decide by class and fields rather than by reading messages:

- :class:`BadInputError`: the user's input (an option, a spec value, a file of the wrong shape);
- :class:`DamagedDataError`: data the package wrote or keeps (a ledger manifest or shard) that fails its checks;
- :class:`MissingExtraError`: an optional dependency is not installed (``package``, ``extra``);
- :class:`BackendError`: a generation backend or server failed (``url``, ``attempts``);
- :class:`StorageError`: a write to disk failed (no room, quota, a folder that cannot be made or locked): what
  was kept and what was not (``path``);
- :class:`SetupError`: the installation or machine cannot do the job (a core dependency missing, a worker
  process killed, an external tool such as git failing).

``source`` (keyword-only, on every kind) names the file or thing being read when the problem was found; a spec
reader sets it (:func:`mindcap_tok.spec.reading`) and ``str(exc)`` reads ``source: message``. Kinds whose message
stands alone (a missing extra names its install command, a backend failure its URL, a setup problem its fix) set
``names_source = False``. A broken invariant of the package itself is a bug, not one of these.
"""

from __future__ import annotations

from typing import ClassVar


class MindcapError(Exception):
    """A problem with the user's input or environment, explained in one line (``source: message`` once the
    file it was found in is known)."""

    #: whether a reader names the file it was reading in front of this error (see :func:`locate`)
    names_source: ClassVar[bool] = True

    def __init__(self, *args: object, source: object = None) -> None:
        super().__init__(*args)
        self.source = source

    def __str__(self) -> str:
        message = super().__str__()
        return message if self.source is None else f"{self.source}: {message}"


class BadInputError(MindcapError):
    """The user's input is refused: an option, a configuration value, a file of the wrong shape.

    ``key`` names the setting (dotted path) when there is one."""

    def __init__(self, message: str, *, key: str | None = None, source: object = None) -> None:
        super().__init__(message, source=source)
        self.key = key


class DamagedDataError(MindcapError):
    """Stored data (a ledger manifest, a shard, an output) fails its checks; ``path`` names the file."""

    def __init__(self, message: str, *, path: object = None, source: object = None) -> None:
        super().__init__(message, source=source)
        self.path = path


class BackendError(MindcapError):
    """A generation backend or server failed: ``url`` (when known) and ``attempts`` (tries made, when retried)."""

    names_source = False

    def __init__(self, message: str, *, url: str | None = None, attempts: int | None = None) -> None:
        super().__init__(message)
        self.url, self.attempts = url, attempts


class MissingExtraError(MindcapError):
    """An optional dependency is not installed; the message names the extra and its install command.

    ``package`` and ``extra`` are kept as attributes (a report that skips the part can name them);
    ``needed_by`` names what needs the package (e.g. ``the vllm backend``) in the message, ``hint`` an alternative."""

    names_source = False

    def __init__(self, package: str, extra: str, *, needed_by: str | None = None, hint: str = "") -> None:
        install = f"pip install 'mindcap-tok[{extra}]'"
        super().__init__(
            (
                f"{needed_by} needs {package}: {install}"
                if needed_by
                else f"{package} is not installed; install the '{extra}' extra: {install}"
            )
            + (f"; {hint}" if hint else "")
        )
        self.package = package
        self.extra = extra


def locate(exc: MindcapError, source: object) -> bool:
    """Name ``source`` on ``exc`` when its kind takes one and none is named yet; whether it did."""
    if not exc.names_source or exc.source is not None:
        return False
    exc.source = source
    return True


def with_context(exc: MindcapError, message: str) -> MindcapError:
    """A copy of ``exc`` that says ``message`` (the caller's context around ``str(exc)``), of the same kind and with
    the same fields, so that a caller adding context never turns a missing extra or damaged data into a plain
    error. ``message`` already holds ``exc``'s source, so the copy names none (a reader may name its own).

    Raise it ``from exc``.
    """
    kind = type(exc)
    copy = kind.__new__(kind, message)
    copy.__dict__.update(exc.__dict__)
    copy.args, copy.source = (message,), None
    return copy


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (its type when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class StorageError(MindcapError):
    """A write to disk failed: no room (disk full, quota exceeded, file size limit), or a folder that cannot be
    made, written or locked; the message says what was kept and what was not, ``path`` names what was being
    written."""

    def __init__(self, message: str, *, path: object = None, source: object = None) -> None:
        super().__init__(message, source=source)
        self.path = path


class SetupError(MindcapError):
    """The installation or the machine cannot do what was asked, whatever the input: a core dependency missing
    (a broken install), a worker process killed (out of memory), an external tool (git) failing; the message says
    what to fix."""

    names_source = False
