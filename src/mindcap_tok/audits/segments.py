"""Splitting a translate-act trace into its English translation and the reasoning after it.

The mgsm-v1 translate-act instruction asks for a translation first, then the solution; it fixes no marker.
The **translation delimiter** is therefore a regular expression, by default the first blank line
(``\\n`` + optional spaces + ``\\n``): the translation is the first paragraph, the reasoning everything
after it. A leading label (``Translation:``, ``**English translation:**``) is dropped from the segment.
A trace with no delimiter has neither segment (it is counted, not guessed).
"""

from __future__ import annotations

import re
from functools import cache

from ..errors import BadInputError

DEFAULT_DELIMITER = r"\n[ \t]*\n"
_LABEL = re.compile(
    r"^\s*(?:\*\*|#+\s*)?(?:english\s+)?translation(?:\s+(?:into|to)\s+english)?\s*(?:\*\*)?\s*:?\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)
_ANSWER_LINE = re.compile(r"^[ \t]*####.*$", re.MULTILINE)


@cache
def _compiled(delimiter: str) -> re.Pattern[str]:
    try:
        return re.compile(delimiter)
    except re.error as exc:
        raise BadInputError(f"invalid --delimiter {delimiter!r}: {exc}") from exc


def check_delimiter(delimiter: str) -> str:
    """``delimiter`` itself when it is a valid regular expression, else a :class:`MindcapError` saying why."""
    _compiled(delimiter)
    return delimiter


def split_translate_act(text: str, delimiter: str = DEFAULT_DELIMITER) -> tuple[str | None, str | None]:
    """(translation, reasoning) of a translate-act trace, or ``(None, None)`` when the delimiter is absent.

    Leading blank lines are skipped before the delimiter is searched, so a trace opening with an empty line
    still has its first paragraph as the translation.
    """
    body = text.lstrip()
    m = _compiled(delimiter).search(body)
    if m is None:
        return None, None
    translation = _LABEL.sub("", body[: m.start()], count=1).strip()
    return translation or None, body[m.end() :]


def strip_answer_lines(text: str) -> str:
    """``text`` without its ``####`` answer lines (digits say nothing about a trace's language)."""
    return _ANSWER_LINE.sub("", text)
