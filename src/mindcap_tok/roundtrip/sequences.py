"""Language sequences of a round trip: the LiT presets (a data file) and custom chains such as ``en>de>th>en``.

A :class:`Chain` is the full path of one round trip, source language first and last: the preset
``lit:e-asia`` is ``eng_Latn>jpn_Jpan>kor_Hang>zho_Hans>rus_Cyrl>eng_Latn`` (five hops). The presets, their
resource groups and the language names used in prompts live in ``resources/roundtrip/sequences.json``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ..data.languages import resolve_language
from ..errors import BadInputError

_PACKAGE = "mindcap_tok.resources.roundtrip"
#: the resource group of a custom chain
CUSTOM_GROUP = "custom"


@dataclass(frozen=True)
class Chain:
    """One round-trip sequence: its name (``lit:e-asia`` or the chain written out), FLORES codes source to source,
    and its resource group (``high``/``medium``/``low``, ``custom`` for a chain given by hand)."""

    name: str
    langs: tuple[str, ...]
    resource: str

    @property
    def hops(self) -> int:
        """Translation steps: one fewer than the languages on the path."""
        return len(self.langs) - 1

    @property
    def source(self) -> str:
        return self.langs[0]


@cache
def sequence_data() -> dict:
    """The parsed ``sequences.json``."""
    return json.loads(resources.files(_PACKAGE).joinpath("sequences.json").read_text("utf-8"))


def presets() -> dict[str, Chain]:
    """Every single-sequence preset by name, in the paper's order."""
    data = sequence_data()
    src = data["source"]
    return {
        name: Chain(name, (src, *entry["langs"], src), entry["resource"]) for name, entry in data["presets"].items()
    }


def preset_names() -> list[str]:
    """Preset and group names (``lit:e-asia`` ... ``lit:all``)."""
    return [*sequence_data()["presets"], *sequence_data()["groups"]]


def language_name(code: str) -> str:
    """The English name used in prompts (``tha_Thai`` -> ``Thai``); a one-line error for a code with no name."""
    names = sequence_data()["names"]
    if code not in names:
        raise BadInputError(f"no language name for {code} in resources/roundtrip/sequences.json; add it there")
    return names[code]


def parse_chain(text: str) -> Chain:
    """A custom chain ``en>de>th>en`` (FLORES codes or aliases): at least one pivot, same language at both ends."""
    parts = [p.strip() for p in text.split(">")]
    if len(parts) < 3 or not all(parts):
        raise BadInputError(f"sequence {text!r}: write a chain as SRC>L1>...>SRC, e.g. en>de>th>en")
    langs = tuple(resolve_language(p) for p in parts)
    if langs[0] != langs[-1]:
        raise BadInputError(f"sequence {text!r} must end in its source language {langs[0]} (a round trip)")
    if any(a == b for a, b in itertools.pairwise(langs)):
        raise BadInputError(f"sequence {text!r} translates a language into itself")
    for code in langs:
        language_name(code)
    return Chain(">".join(langs), langs, CUSTOM_GROUP)


def resolve_sequences(names: list[str] | tuple[str, ...]) -> tuple[Chain, ...]:
    """Chains for preset names, group names (``lit:all``) and custom chains, each once, in the order given."""
    table = presets()
    groups = sequence_data()["groups"]
    out: dict[str, Chain] = {}
    for name in names:
        key = name.strip()
        if key.lower() in groups:
            chains = [table[n] for n in groups[key.lower()]]
        elif key.lower() in table:
            chains = [table[key.lower()]]
        elif ">" in key:
            chains = [parse_chain(key)]
        else:
            raise BadInputError(
                f"unknown sequence {name!r}; use one of {', '.join(preset_names())} or a chain like en>de>th>en"
            )
        for chain in chains:
            out.setdefault(chain.name, chain)
    if not out:
        raise BadInputError("no sequences given")
    return tuple(out.values())
