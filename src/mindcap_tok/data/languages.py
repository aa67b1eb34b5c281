"""FLORES-200 language codes and their short aliases (``th`` -> ``tha_Thai``)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from ..errors import BadInputError


def _resource_lines(name: str) -> list[str]:
    text = resources.files("mindcap_tok.resources").joinpath(name).read_text("utf-8")
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


@cache
def flores_codes() -> tuple[str, ...]:
    """The 204 FLORES-200 codes, sorted."""
    return tuple(_resource_lines("flores200_codes.txt"))


@cache
def aliases() -> dict[str, str]:
    """Short alias -> FLORES code."""
    return dict(ln.split("\t") for ln in _resource_lines("language_aliases.tsv"))


def resolve_language(name: str) -> str:
    """A FLORES code for a FLORES code, a short alias, or an unambiguous ISO 639-3 code (case-insensitive)."""
    key = name.strip()
    by_lower = {c.lower(): c for c in flores_codes()}
    if key.lower() in by_lower:
        return by_lower[key.lower()]
    alias = aliases().get(key.lower())
    if alias is not None:
        return alias
    matches = [c for c in flores_codes() if c.split("_")[0] == key.lower()]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise BadInputError(f"language {name!r} is ambiguous: {', '.join(matches)}")
    raise BadInputError(
        f"unknown language {name!r}: use a FLORES-200 code such as tha_Thai or an alias such as th "
        "(`mindcap-tok languages` lists them)"
    )


def short_name(code: str) -> str:
    """The alias of a FLORES code if it has one (``tha_Thai`` -> ``th``), else the code itself."""
    for alias, target in aliases().items():
        if target == code and "-" not in alias:
            return alias
    return code
