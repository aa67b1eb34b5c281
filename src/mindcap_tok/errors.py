"""The one exception type that the CLI turns into a one-line error message."""


class MindcapError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class MissingExtraError(MindcapError):
    """An optional dependency is not installed; the message names the extra and its install command.

    ``package`` and ``extra`` are kept as attributes (a report that skips the part can name them);
    ``needed_by`` names what needs the package (e.g. ``the vllm backend``) in the message."""

    def __init__(self, package: str, extra: str, *, needed_by: str | None = None) -> None:
        install = f"pip install 'mindcap-tok[{extra}]'"
        super().__init__(
            f"{needed_by} needs {package}: {install}"
            if needed_by
            else f"{package} is not installed; install the '{extra}' extra: {install}"
        )
        self.package = package
        self.extra = extra


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (its type when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
