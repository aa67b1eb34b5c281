"""The ``tiktoken`` family: a ``.tiktoken`` rank file plus the ``encoding.json`` beside it (name, ``pat_str``,
special tokens and, optionally, the rank file's ``sha256``), built offline with ``tiktoken.Encoding``.

``tiktoken`` is imported only when such a file is loaded.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from .._io import regular_file
from ..errors import BadInputError, SetupError, first_line
from .classes import utf8_classes
from .ids import without
from .long_text import SAFE_CHARS, engine_guard, tiktoken_ordinary

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class RanksFamily(Protocol[T_co]):
    """What extending a Tiktoken vocabulary is handed: the back end, typed."""

    def ranks(self, backend: TiktokenBackend) -> T_co:
        """New ranks appended to a ``.tiktoken`` rank file."""


class TiktokenBackend:
    """A ``tiktoken.Encoding`` built from a local rank file (family ``tiktoken``)."""

    family = "tiktoken"
    hf = None
    dummy_prefix = False

    def __init__(self, enc: Any, specials: dict[str, int], ranks: dict[bytes, int], pat_str: str) -> None:
        self.enc = enc
        self.specials = dict(specials)
        self._ranks, self._pat_str = ranks, pat_str  # the dict the encoding holds (no copy), for content_sha256

    def extension(self, families: RanksFamily[T]) -> T:
        """``families.ranks`` for this back end."""
        return families.ranks(self)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; special-token text is encoded as ordinary text."""
        if len(text) > SAFE_CHARS:
            return tiktoken_ordinary(self.enc, [text])[0]
        return engine_guard(lambda: self.enc.encode_ordinary(text), [text])

    def encode_pretoken(self, piece: str) -> list[int]:
        """Ids of one ``pat_str`` piece by tiktoken's own BPE (whole-piece shortcut included), with no regex split."""
        return list(self.enc._encode_single_piece(piece))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text (``encode_ordinary_batch``, threaded; long texts: :mod:`.long_text`)."""
        return tiktoken_ordinary(self.enc, texts)

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text."""
        ids = self.encode_batch(texts)
        return np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (invalid UTF-8 replaced, as tiktoken does)."""
        return self.enc.decode(list(ids))

    def decode_batch(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """The text of every id sequence (``decode_batch``, threaded); skipping drops the special ids first."""
        return self.enc.decode_batch(without(ids, self.special_ids if skip_special_tokens else frozenset()))

    @property
    def vocab_size(self) -> int:
        """``n_vocab``: highest id + 1 (ids between the ranks and the specials may be unused)."""
        return self.enc.n_vocab

    @cached_property
    def special_ids(self) -> frozenset[int]:
        """Ids of the special tokens from ``encoding.json``."""
        return frozenset(self.specials.values())

    def token_bytes(self) -> list[bytes]:
        """Each rank's bytes; special tokens as their text; unused ids as ``b""``."""
        out = [b""] * self.enc.n_vocab
        for i in range(self.enc.n_vocab):
            with contextlib.suppress(KeyError):  # an id neither a rank nor a special token
                out[i] = self.enc.decode_single_token_bytes(i)
        return out

    def token_classes(self) -> np.ndarray:
        """Byte fallback: ranks whose bytes are not whole UTF-8 characters; tiktoken has no unknown token."""
        return utf8_classes(self.token_bytes())

    def unknown_characters(self, texts: Sequence[str]) -> np.ndarray:
        """Zeros: every byte is a rank, so no character is unknown."""
        return np.zeros(len(texts), dtype=np.int64)

    def content_sha256(self) -> str:
        """:func:`tiktoken_sha256` of the ranks written as a ``.tiktoken`` file and an ``encoding.json`` of the rest."""
        ranks = b"".join(base64.b64encode(b) + b" %d\n" % r for b, r in sorted(self._ranks.items(), key=lambda x: x[1]))
        spec = {"name": self.enc.name, "pat_str": self._pat_str, "special_tokens": self.specials}
        return tiktoken_sha256(ranks, json.dumps(spec, ensure_ascii=False).encode("utf-8"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_rank_file(data: bytes, path: Path) -> dict[bytes, int]:
    """``<base64 token> <rank>`` lines -> {token bytes: rank} (the format ``tiktoken.load.load_tiktoken_bpe`` reads).

    Parsed here rather than by ``load_tiktoken_bpe``, which keeps a copy in a temp-folder cache keyed by the
    path only and would serve a stale copy after the file changes.
    """
    ranks: dict[bytes, int] = {}
    for n, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error) as exc:
            raise BadInputError(f"{path}: line {n} is not '<base64 token> <rank>' (a corrupt .tiktoken file?)") from exc
    if not ranks:
        raise BadInputError(f"{path}: no ranks in this .tiktoken file")
    return ranks


def tiktoken_files(rank_file: Path) -> Path:
    """The ``encoding.json`` that must sit beside a ``.tiktoken`` rank file."""
    spec = regular_file(rank_file.parent / "encoding.json", "tiktoken encoding file")
    if not spec.is_file():
        raise BadInputError(
            f"{rank_file} needs an encoding.json beside it (name, pat_str, special_tokens); none in {rank_file.parent}"
        )
    return spec


@lru_cache(maxsize=4)
def _read_tiktoken(rank_file: Path, spec_file: Path, mtimes: tuple[int, int]) -> tuple[TiktokenBackend, str]:
    try:
        spec = json.loads(spec_file.read_text(encoding="utf-8"))
        pat_str, specials = spec["pat_str"], dict(spec.get("special_tokens", {}))
        name = str(spec.get("name", rank_file.stem))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInputError(f"cannot read {spec_file}: {first_line(exc)} (need name, pat_str, special_tokens)") from exc
    data = rank_file.read_bytes()
    digest = _sha256(data)
    expected = spec.get("sha256")
    if expected and expected.lower() != digest:
        raise BadInputError(
            f"{rank_file} has sha256 {digest[:12]}…, but {spec_file.name} expects {str(expected)[:12]}… "
            "(wrong or corrupt rank file)"
        )
    ranks = parse_rank_file(data, rank_file)
    backend = build_tiktoken(name, pat_str, ranks=ranks, specials=specials, where=str(rank_file))
    return backend, tiktoken_sha256(data, spec_file.read_bytes())


def tiktoken_sha256(rank_data: bytes, spec_data: bytes) -> str:
    """The hash a tiktoken tokenizer is known by: SHA-256 of the rank file's bytes followed by ``encoding.json``'s."""
    return _sha256(rank_data + spec_data)


def build_tiktoken(
    name: str, pat_str: str, *, ranks: dict[bytes, int], specials: dict[str, int], where: str = "ranks"
) -> TiktokenBackend:
    """A tiktoken back end from ranks in memory (ids may have gaps; specials keep their ids)."""
    try:
        import tiktoken
    except ImportError as exc:  # a core dependency; only a broken install lacks it
        raise SetupError("tiktoken is not installed (pip install tiktoken)") from exc
    try:
        enc = tiktoken.Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)
    except Exception as exc:  # tiktoken raises ValueError/AssertionError for inconsistent specs
        raise BadInputError(f"cannot build tiktoken encoding from {where}: {first_line(exc)}") from exc
    return TiktokenBackend(enc, specials, ranks, pat_str)


def load_tiktoken(rank_file: Path) -> tuple[TiktokenBackend, str]:
    """Back end for a ``.tiktoken`` file, and the SHA-256 of the rank file's bytes followed by ``encoding.json``'s."""
    rank_file = regular_file(rank_file.resolve(), "tiktoken rank file")
    spec = tiktoken_files(rank_file)
    return _read_tiktoken(rank_file, spec, (rank_file.stat().st_mtime_ns, spec.stat().st_mtime_ns))
