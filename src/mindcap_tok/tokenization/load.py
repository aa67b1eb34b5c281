"""Resolve a model name to a tokenizer of any family.

A name is a registry entry (``qwen3-8b``, ``gpt-4o``, ``gemma-3``, ... see ``resources/tokenizers.toml``), a
folder, a tokenizer file, or a Hugging Face id (``org/name``). Files pick the library: ``tokenizer.json`` (or
any ``.json``) -> ``tokenizers``; ``*.tiktoken`` plus the ``encoding.json`` beside it -> ``tiktoken``;
``*.model`` -> ``sentencepiece``. A folder is searched in that order (``tokenizer.json`` first).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .._io import regular_file
from ..config import hub_unavailable, load_config
from ..errors import BadInputError, first_line
from .base import ExtensionFamilies, T, TokenizerBackend
from .hf import HFBackend, encode_texts, read_tokenizer_file
from .pretoken_cache import PretokenEncoder
from .registry import RegistryEntry, canonical_model_name, registry
from .sentencepiece_family import load_sentencepiece
from .tiktoken_engine import NotEligible, TiktokenEngine, tiktoken_engine
from .tiktoken_family import load_tiktoken


class ResolvedTokenizer:
    """A tokenizer of any family plus where it came from and a content hash for manifests.

    A :class:`~.base.TokenizerBackend` over one of three libraries: :meth:`encode`, :meth:`encode_batch` and
    :meth:`count_tokens` (never special tokens), :meth:`decode`, :meth:`decode_batch`, :attr:`token_bytes`,
    :attr:`byte_lengths`, :attr:`vocab_size`, :attr:`special_ids`, :attr:`sha256` and :attr:`family`
    (``tokenizers``, ``tiktoken`` or ``sentencepiece``). Capabilities instead of family names: :attr:`tokenizer`
    (the Hugging Face ``tokenizers.Tokenizer``, or ``None``), :attr:`dummy_prefix`; :meth:`extension` picks the
    family's way of extending the vocabulary; :meth:`encode_ids`, :meth:`pretoken_encoder`, :attr:`batch_encoder`
    and :meth:`decode_for_reencoding` are each family's fastest or exact way of doing one job.

    Built from a Hugging Face tokenizer as ``ResolvedTokenizer(name, tokenizer, source, path)``, or from any
    back end with ``backend=`` (and ``sha256=``, the hash of its files).
    """

    def __init__(
        self,
        name: str,
        tokenizer: Tokenizer | None = None,
        source: str = "",
        path: Path | None = None,
        *,
        backend: TokenizerBackend | None = None,
        sha256: str | None = None,
    ) -> None:
        if backend is None:
            if tokenizer is None:
                raise TypeError("ResolvedTokenizer needs a tokenizer or a backend")
            backend = HFBackend(tokenizer)
        self.name = name
        self.source = source
        self.path = path
        self.backend = backend
        if sha256 is not None:
            self.__dict__["sha256"] = sha256

    def __repr__(self) -> str:
        return f"ResolvedTokenizer(name={self.name!r}, family={self.family!r}, source={self.source!r})"

    @property
    def family(self) -> str:
        """Which library runs it: ``tokenizers``, ``tiktoken`` or ``sentencepiece``."""
        return self.backend.family

    @property
    def tokenizer(self) -> Tokenizer | None:
        """The Hugging Face tokenizer where the family has one (``tokenizers``), else ``None``."""
        return self.backend.hf

    def extension(self, families: ExtensionFamilies[T]) -> T | None:
        """``families``' way of extending this tokenizer's vocabulary (the method for its family), or ``None``: it
        cannot be extended."""
        return self.backend.extension(families)

    def require_hf(self, what: str) -> Tokenizer:
        """The Hugging Face tokenizer, or a one-line error saying that ``what`` needs a ``tokenizer.json``."""
        if self.backend.hf is None:
            raise BadInputError(f"{what} needs a tokenizer.json for {self.name}, found {self.source}")
        return self.backend.hf

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text, no special tokens, by the fastest call (``tokenizers``: ``encode_batch_fast``, no
        offsets computed): the same ids as :meth:`encode_batch`."""
        if self.backend.hf is None:
            return self.backend.encode_batch(texts)
        return encode_texts(self.backend.hf, texts)

    def pretoken_encoder(self) -> PretokenEncoder | None:
        """The memoised pre-token encoder of a ``tokenizer.json`` whose pipeline it reproduces, else ``None``
        (tiktoken and SentencePiece are fast native encoders already)."""
        if self.backend.hf is None:
            return None
        return PretokenEncoder.from_tokenizer(self.backend.hf)

    @property
    def batch_encoder(self) -> Tokenizer | ResolvedTokenizer:
        """What to hand a worker process that encodes texts: the Hugging Face tokenizer where there is one (encode
        it with :func:`~.hf.encode_texts`), else this tokenizer (:meth:`encode_batch`)."""
        return self if self.backend.hf is None else self.backend.hf

    def decode_for_reencoding(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """The text of every id sequence that re-encoding reads: special tokens kept as text where encoding turns
        their text back into their ids (``tokenizers``), dropped where it would encode them as ordinary text
        (tiktoken, SentencePiece)."""
        if self.backend.hf is None:
            special = self.special_ids
            return [self.decode([int(i) for i in x if int(i) not in special]) for x in ids]
        return self.backend.hf.decode_batch([list(x) for x in ids], skip_special_tokens=False)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, without special tokens."""
        return self.backend.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text, without special tokens (one batched call)."""
        return self.backend.encode_batch(texts)

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text, without special tokens (one batched call)."""
        return self.backend.count_tokens(texts)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens kept as text)."""
        return self.backend.decode(ids)

    def decode_batch(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool = False) -> list[str]:
        """The text of every id sequence in one batched call; ``skip_special_tokens`` leaves special tokens out
        (what a serving stack returns, and what scoring reads), else they are kept as text like :meth:`decode`."""
        return self.backend.decode_batch(ids, skip_special_tokens)

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of special/control tokens."""
        return self.backend.special_ids

    @property
    def dummy_prefix(self) -> bool:
        """True when the tokenizer prepends a space to its input (SentencePiece ``add_dummy_prefix``, Llama 2).

        The concatenated :attr:`token_bytes` of ``encode(text)`` are then ``" " + text``.
        """
        return self.backend.dummy_prefix

    @cached_property
    def sha256(self) -> str:
        """SHA-256 of the tokenizer file(s) (for ``tokenizer.json``: its bytes, or its serialisation)."""
        if self.path is not None:
            return hashlib.sha256(self.path.read_bytes()).hexdigest()
        return self.backend.content_sha256()

    @cached_property
    def token_bytes(self) -> list[bytes]:
        """The UTF-8 bytes each token id decodes to (index = id)."""
        return self.backend.token_bytes()

    @cached_property
    def token_classes(self) -> np.ndarray:
        """int8 per id: a token of whole characters, a byte-fallback token or the unknown token, each family by its
        own definition (:mod:`.classes`)."""
        return self.backend.token_classes()

    def unknown_characters(self, texts: Sequence[str]) -> np.ndarray:
        """int64 per text: how many of its characters the unknown token stands for."""
        return self.backend.unknown_characters(texts)

    @cached_property
    def byte_lengths(self) -> np.ndarray:
        """int32 array: number of UTF-8 bytes each token id decodes to (index = id)."""
        return np.fromiter((len(b) for b in self.token_bytes), dtype=np.int32, count=len(self.token_bytes))

    @property
    def vocab_size(self) -> int:
        """Number of ids, added and special tokens included."""
        return self.backend.vocab_size

    @cached_property
    def tiktoken_engine(self) -> TiktokenEngine | None:
        """This byte-level BPE ``tokenizer.json`` run by tiktoken (same ids, faster), or ``None`` where tiktoken
        cannot run it exactly or the family is not ``tokenizers`` (built on first use: about a second)."""
        if self.backend.hf is None:
            return None
        try:
            return tiktoken_engine(self.backend.hf)
        except NotEligible:
            return None


def _from_file(path: Path, name: str) -> ResolvedTokenizer:
    path = regular_file(path.resolve(), "tokenizer file")
    if path.suffix == ".tiktoken":
        backend, digest = load_tiktoken(path)
        return ResolvedTokenizer(name, source=str(path), path=path, backend=backend, sha256=digest)
    if path.suffix == ".model":
        sp_backend, digest = load_sentencepiece(path)
        return ResolvedTokenizer(name, source=str(path), path=path, backend=sp_backend, sha256=digest)
    try:
        tok = read_tokenizer_file(path, path.stat().st_mtime_ns)
    except Exception as exc:  # tokenizers raises bare Exception subclasses for bad files
        raise BadInputError(f"cannot read tokenizer file {path}: {first_line(exc)}") from exc
    return ResolvedTokenizer(name=name, tokenizer=tok, source=str(path), path=path)


def tokenizer_file(folder: Path) -> Path | None:
    """The tokenizer file in ``folder``: ``tokenizer.json``, else the one ``*.tiktoken``, else ``*.model``."""
    if os.path.lexists(folder / "tokenizer.json"):  # not is_file: a FIFO there is refused, not skipped
        return folder / "tokenizer.json"
    for pattern in ("*.tiktoken", "*.model"):
        found = sorted(folder.glob(pattern))
        if len(found) > 1:
            raise BadInputError(f"folder {folder} has several {pattern} files; give the file itself")
        if found:
            return found[0]
    return None


#: how a user sets the folder of local tokenizers, for messages
_SET_TOKENIZERS_DIR = "tokenizers_dir in mindcap.toml, MINDCAP_TOKENIZERS_DIR or --tokenizers-dir"
#: what to give instead of a Hugging Face id that is not a registry model's
_LOCAL_INSTEAD = "give the tokenizer's local folder or tokenizer file (tokenizer.json, .tiktoken, .model) instead"


def _tokenizers_root(tokenizers_dir: str | os.PathLike[str] | None) -> Path | None:
    """The folder of local tokenizers: ``tokenizers_dir``, else the configured one (``None``: not set)."""
    return Path(tokenizers_dir) if tokenizers_dir is not None else load_config().tokenizers_dir.value


def _local_file(root: Path | None, entry: RegistryEntry) -> Path | None:
    """The tokenizer file of a registry model in the local tokenizers folder ``root``, or ``None``."""
    folder = None if root is None else root / entry.folder
    return tokenizer_file(folder) if folder is not None and folder.is_dir() else None


def _local_miss(root: Path | None, entry: RegistryEntry) -> str:
    """Why a registry model has no local tokenizer file, and where it would go."""
    if root is None:
        return f"no local tokenizers folder is set ({_SET_TOKENIZERS_DIR}: the folder that holds {entry.folder}/)"
    if not root.is_dir():
        where = f"{_SET_TOKENIZERS_DIR}: the folder that holds {entry.folder}/"
        return f"the local tokenizers folder {root} does not exist ({where})"
    if not (root / entry.folder).is_dir():
        return (
            f"the local tokenizers folder {root} has no {entry.folder}/ folder (put the tokenizer's file there, or set "
            f"another folder: {_SET_TOKENIZERS_DIR})"
        )
    return f"{root / entry.folder} has no tokenizer.json, *.tiktoken or *.model file"


def _registry_hint(entry: RegistryEntry, root: Path | None) -> str:
    """What to give instead of the Hugging Face id of the registry model ``entry``: its registry name."""
    found = _local_file(root, entry)
    if found is not None:
        return f"use its registry name {entry.name!r}, which reads the local copy {found}"
    return f"its registry name {entry.name!r} reads a local copy, but {_local_miss(root, entry)}"


def _from_hub(hf_id: str, name: str, hint: str) -> ResolvedTokenizer:
    """The tokenizer of ``hf_id`` from the Hugging Face hub, named ``name`` (a registry name whose local copy is
    missing, or the id itself); ``hint``: why nothing local was read, or what to give instead."""
    why = hub_unavailable()  # no download attempt (and no retry loop) offline
    fallback = name != hf_id
    if why is not None:
        if fallback:
            raise BadInputError(
                f"no tokenizer for {name!r}: {hint}; and its Hugging Face fallback {hf_id} cannot be read: {why}"
            )
        raise BadInputError(f"{hf_id!r} is a Hugging Face id, read from the hub only, and {why}; {hint}")
    try:
        from transformers import AutoTokenizer

        hf_tok = AutoTokenizer.from_pretrained(hf_id)
    except Exception as exc:
        if fallback:
            raise BadInputError(
                f"no tokenizer for {name!r}: {hint}; and its Hugging Face fallback {hf_id} failed to load "
                f"({first_line(exc)})"
            ) from exc
        raise BadInputError(
            f"cannot load tokenizer {hf_id!r} from the Hugging Face hub ({first_line(exc)}); {hint}"
        ) from exc
    backend = getattr(hf_tok, "backend_tokenizer", None)
    if backend is None:
        raise BadInputError(f"{hf_id!r} has no fast tokenizer")
    return ResolvedTokenizer(name=name, tokenizer=backend, source=f"hf:{hf_id}")


def load_tokenizer(name: str, tokenizers_dir: str | os.PathLike[str] | None = None) -> ResolvedTokenizer:
    """Turn a model name, a folder, a tokenizer file or a Hugging Face id into a tokenizer of the right family.

    ``tokenizers_dir`` overrides the configured folder of local tokenizers.
    """
    path = Path(name).expanduser()
    if path.is_dir():
        found = tokenizer_file(path)
        if found is None:
            raise BadInputError(f"folder {path} has no tokenizer.json, *.tiktoken or *.model file")
        return _from_file(found, name)
    if path.exists():  # a file (a FIFO or a device is refused by _from_file)
        return _from_file(path, name)
    canonical = canonical_model_name(name)
    if canonical is not None:
        entry = registry()[canonical]
        root = _tokenizers_root(tokenizers_dir)
        found = _local_file(root, entry)
        if found is not None:
            return _from_file(found, canonical)
        if entry.hf_id is None:
            miss = _local_miss(root, entry)
            raise BadInputError(
                f"no tokenizer for {canonical!r}: {miss}; and it has no Hugging Face id to fall back on"
            )
        return _from_hub(entry.hf_id, canonical, _local_miss(root, entry))
    if "/" in name and not name.startswith((".", "/")) and name.count("/") == 1:
        listed = next((e for e in registry().values() if e.hf_id is not None and e.hf_id.lower() == name.lower()), None)
        hint = _LOCAL_INSTEAD if listed is None else _registry_hint(listed, _tokenizers_root(tokenizers_dir))
        return _from_hub(name, name, hint)
    known = ", ".join(f"{e.name} ({', '.join(e.aliases)})" for e in registry().values())
    raise BadInputError(
        f"unknown model {name!r}; known: {known}; "
        "or give a tokenizer file (tokenizer.json, .tiktoken, .model), a folder or a Hugging Face id"
    )
