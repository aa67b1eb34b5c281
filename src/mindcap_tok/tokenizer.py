"""Resolve a model name to a fast tokenizer, and the UTF-8 bytes of every token id.

A name is a registry entry (``qwen3-8b``, ``llama-3.1-8b``, ... see ``resources/tokenizers.toml``),
a folder holding ``tokenizer.json``, a ``tokenizer.json`` path, or a Hugging Face id (``org/name``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .config import load_config
from .errors import MindcapError, first_line


@dataclass(frozen=True)
class RegistryEntry:
    name: str
    aliases: tuple[str, ...]
    folder: str
    hf_id: str


def registry() -> dict[str, RegistryEntry]:
    """Known model names, from the packaged registry file."""
    raw = tomllib.loads(resources.files("mindcap_tok.resources").joinpath("tokenizers.toml").read_text("utf-8"))
    return {name: RegistryEntry(name, tuple(v.get("aliases", ())), v["folder"], v["hf_id"]) for name, v in raw.items()}


def canonical_model_name(name: str) -> str | None:
    """The registry name for ``name`` or one of its aliases (case-insensitive), else ``None``."""
    low = name.lower()
    for entry in registry().values():
        if low == entry.name.lower() or low in (a.lower() for a in entry.aliases):
            return entry.name
    return None


@dataclass(frozen=True, eq=False)
class ResolvedTokenizer:
    """A fast tokenizer plus where it came from and a content hash for manifests."""

    name: str
    tokenizer: Tokenizer
    source: str
    path: Path | None = None

    @cached_property
    def sha256(self) -> str:
        """SHA-256 of the ``tokenizer.json`` bytes (its serialisation when not loaded from a file)."""
        data = self.path.read_bytes() if self.path is not None else self.tokenizer.to_str().encode("utf-8")
        return hashlib.sha256(data).hexdigest()

    @cached_property
    def token_bytes(self) -> list[bytes]:
        """The UTF-8 bytes each token id decodes to (index = id)."""
        return token_bytes(self.tokenizer)

    @cached_property
    def byte_lengths(self) -> np.ndarray:
        """int32 array: number of UTF-8 bytes each token id decodes to (index = id)."""
        return np.fromiter((len(b) for b in self.token_bytes), dtype=np.int32, count=len(self.token_bytes))

    @property
    def vocab_size(self) -> int:
        """Number of ids, added and special tokens included."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's byte <-> printable-character table, which every byte-level BPE uses.
    # tokenizers does not expose it, so it is rebuilt here (it is 10 lines of public spec).
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, map(chr, chars), strict=True))


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# str.translate table: byte-level symbol -> the Latin-1 character of its byte, so ``.encode("latin-1")`` gives bytes
_TO_LATIN1 = {ord(c): b for c, b in CHAR_TO_BYTE.items()}


def is_byte_level(tok: Tokenizer) -> bool:
    """True when the tokenizer decodes with the byte-level decoder (GPT-2 style BPE)."""
    if tok.decoder is None:
        return False
    dec = json.loads(tok.decoder.__getstate__())
    types = [dec.get("type")] + [d.get("type") for d in dec.get("decoders", [])]
    return "ByteLevel" in types


def token_bytes(tok: Tokenizer) -> list[bytes]:
    """The bytes each id decodes to: byte-level symbols mapped back to bytes, added tokens as their text.

    Decoding a sequence of ids yields the concatenation of these bytes, so the byte length of a prefix
    of B tokens is a cumulative sum (later stages score budgets by byte position).
    """
    n = tok.get_vocab_size(with_added_tokens=True)
    out: list[bytes] = [b""] * n
    if is_byte_level(tok):
        for piece, i in tok.get_vocab(with_added_tokens=False).items():
            out[i] = piece.translate(_TO_LATIN1).encode("latin-1")
    else:
        for i in range(n):
            out[i] = tok.decode([i], skip_special_tokens=False).encode("utf-8")
    for i, added in tok.get_added_tokens_decoder().items():
        out[i] = added.content.encode("utf-8")
    return out


@lru_cache(maxsize=8)
def _read_tokenizer_file(path: Path, mtime_ns: int) -> Tokenizer:
    # parsing a 150k-vocabulary file takes seconds; the mtime key reloads a file that changed
    return Tokenizer.from_file(str(path))


def _from_file(path: Path, name: str) -> ResolvedTokenizer:
    path = path.resolve()
    try:
        tok = _read_tokenizer_file(path, path.stat().st_mtime_ns)
    except Exception as exc:  # tokenizers raises bare Exception subclasses for bad files
        raise MindcapError(f"cannot read tokenizer file {path}: {first_line(exc)}") from exc
    return ResolvedTokenizer(name=name, tokenizer=tok, source=str(path), path=path)


def _from_hub(hf_id: str, name: str) -> ResolvedTokenizer:
    try:
        from transformers import AutoTokenizer

        hf_tok = AutoTokenizer.from_pretrained(hf_id)
    except Exception as exc:
        raise MindcapError(f"cannot load tokenizer {hf_id!r} from the Hugging Face hub: {first_line(exc)}") from exc
    backend = getattr(hf_tok, "backend_tokenizer", None)
    if backend is None:
        raise MindcapError(f"{hf_id!r} has no fast tokenizer")
    return ResolvedTokenizer(name=name, tokenizer=backend, source=f"hf:{hf_id}")


def load_tokenizer(name: str, tokenizers_dir: str | os.PathLike[str] | None = None) -> ResolvedTokenizer:
    """Turn a model name, a folder, a ``tokenizer.json`` path or a Hugging Face id into a tokenizer.

    ``tokenizers_dir`` overrides the configured folder of local tokenizers.
    """
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise MindcapError(f"folder {path} has no tokenizer.json")
        return _from_file(path / "tokenizer.json", name)
    if path.is_file():
        return _from_file(path, name)
    canonical = canonical_model_name(name)
    if canonical is not None:
        entry = registry()[canonical]
        root = Path(tokenizers_dir) if tokenizers_dir is not None else load_config().tokenizers_dir.value
        if root is not None and (root / entry.folder / "tokenizer.json").is_file():
            return _from_file(root / entry.folder / "tokenizer.json", canonical)
        return _from_hub(entry.hf_id, canonical)
    if "/" in name and not name.startswith((".", "/")) and name.count("/") == 1:
        return _from_hub(name, name)
    known = ", ".join(f"{e.name} ({', '.join(e.aliases)})" for e in registry().values())
    raise MindcapError(
        f"unknown model {name!r}; known: {known}; or give a tokenizer.json path, a folder or a Hugging Face id"
    )
