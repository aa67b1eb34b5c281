"""Prompt templates: ``str.format`` strings (task files, render and round-trip prompt files, judge prompts) whose
placeholders are checked when the file is read, before any value meets them.

Only a plain ``{name}`` is admitted: a position (``{0}``), format spec (``{text:d}``, ``{text:>99999}``),
conversion (``{text!r}``), attribute (``{text.x}``) or index (``{text[0]}``) could fail on a value or build a
huge prompt at run time, long after the file was accepted.
"""

from __future__ import annotations

import string

from .errors import BadInputError
from .spec import show


def template_fields(text: str) -> set[str]:
    """The placeholder names of template ``text``; a :class:`BadInputError` saying the problem in one line (for the
    caller to name its file and key) when it does not parse or a placeholder is not a plain ``{name}``."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise BadInputError(f"is not a valid template ({exc}; write a literal brace twice)") from None
    names = set()
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if not name or name.isdigit() or "." in name or "[" in name or spec or conversion:
            written = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            raise BadInputError(
                f"placeholder {show(written)} must be a plain {{name}} (no position, format spec, "
                "conversion, attribute or index; write a literal brace twice)"
            )
        names.add(name)
    return names
