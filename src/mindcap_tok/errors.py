"""The one exception type that the CLI turns into a one-line error message."""


class MindcapError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class MissingExtraError(MindcapError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(f"{package} is not installed; install the '{extra}' extra: pip install 'mindcap-tok[{extra}]'")
        self.package = package
        self.extra = extra


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (its type when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
