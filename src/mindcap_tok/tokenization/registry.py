"""The packaged registry of known model names (``resources/tokenizers.toml``), read once per process."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class RegistryEntry:
    name: str
    aliases: tuple[str, ...]
    folder: str
    hf_id: str | None


def registry() -> dict[str, RegistryEntry]:
    """Known model names, from the packaged registry file (``hf_id`` is ``None`` where none exists)."""
    return dict(_registry())


@lru_cache(maxsize=1)
def _registry() -> dict[str, RegistryEntry]:
    # read once per process: the packaged file cannot change under it, and ledger reads and appends look up every
    # stored model name (canonical_model_name), which re-reading the TOML made ~250 µs each
    raw = tomllib.loads(resources.files("mindcap_tok.resources").joinpath("tokenizers.toml").read_text("utf-8"))
    return {
        name: RegistryEntry(name, tuple(v.get("aliases", ())), v["folder"], v.get("hf_id")) for name, v in raw.items()
    }


def canonical_model_name(name: str) -> str | None:
    """The registry name for ``name`` or one of its aliases (case-insensitive), else ``None``."""
    low = name.lower()
    for entry in _registry().values():
        if low == entry.name.lower() or low in (a.lower() for a in entry.aliases):
            return entry.name
    return None


def registry_model_name(name: str) -> str | None:
    """The registry model ``name`` names, else ``None``: a registry name, an alias, or the registry's own Hugging
    Face id of the model (``Qwen/Qwen3-8B``, in any case, as the hub reads it). Another organisation's name
    (``evil-org/qwen3-8b``) names no registry model: a copy or a fine-tune is its own model."""
    known = canonical_model_name(name)
    if known is not None or "/" not in name:
        return known
    low = name.lower()
    return next((e.name for e in _registry().values() if e.hf_id is not None and e.hf_id.lower() == low), None)
