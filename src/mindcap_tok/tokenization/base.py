"""The one interface every tokenizer family implements, and what the families share.

A back end wraps one library (``tokenizers``, ``tiktoken`` or ``sentencepiece``) and answers the same questions:
encode without special tokens, decode, the UTF-8 bytes of every id, vocabulary size, special ids, a content hash.
Capability attributes say what a family can do, so that no code outside this subpackage branches on its name:
``hf`` (the Hugging Face ``tokenizers.Tokenizer``, or ``None``) and ``dummy_prefix`` (a space is prepended to the
input). What differs between families in learning a vocabulary extension is chosen by the back end itself:
:meth:`TokenizerBackend.extension` calls the method of an :class:`ExtensionFamilies` for its own family (new BPE
merges in a ``tokenizer.json``, new ranks in a ``.tiktoken`` file, new pieces in a SentencePiece ``.model``), handing
over itself with its family's type, so that the caller never asks which family it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from .classes import BYTE_FALLBACK as BYTE_FALLBACK
from .classes import UNKNOWN as UNKNOWN
from .classes import WHOLE as WHOLE
from .hf import MergesFamily
from .sentencepiece_family import PiecesFamily
from .tiktoken_family import RanksFamily

#: the libraries a tokenizer can come from
FAMILIES = ("tokenizers", "tiktoken", "sentencepiece")

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ExtensionFamilies(MergesFamily[T_co], RanksFamily[T_co], PiecesFamily[T_co], Protocol[T_co]):
    """One way of extending a vocabulary per extendable family (``merges``, ``ranks``, ``pieces``: each family module
    says what its method is handed); a back end calls the one for its own family with itself, typed
    (:meth:`TokenizerBackend.extension`)."""


@runtime_checkable
class TokenizerBackend(Protocol):
    """What every family's back end answers (see the module docstring)."""

    family: str

    @property
    def dummy_prefix(self) -> bool:
        """True when a space is prepended to the input (SentencePiece ``add_dummy_prefix``)."""

    @property
    def hf(self) -> Any:
        """The Hugging Face ``tokenizers.Tokenizer`` (``None`` for other families)."""

    def extension(self, families: ExtensionFamilies[T]) -> T | None:
        """``families``' way of extending this family's vocabulary, or ``None``: it cannot be extended."""

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, no special tokens."""

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text, no special tokens (one batched call)."""

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text, no special tokens."""

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens kept)."""

    def decode_batch(self, ids: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        """The text of every id sequence; ``skip_special_tokens`` leaves special tokens out."""

    def token_bytes(self) -> list[bytes]:
        """The bytes each id decodes to (index = id)."""

    def token_classes(self) -> np.ndarray:
        """int8 per id: :data:`~.classes.WHOLE`, :data:`~.classes.BYTE_FALLBACK` or :data:`~.classes.UNKNOWN`, by
        this family's definition (:mod:`.classes`)."""

    def unknown_characters(self, texts: Sequence[str]) -> np.ndarray:
        """int64 per text: how many of its characters the unknown token stands for (0 where there is none)."""

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of special/control tokens."""

    @property
    def vocab_size(self) -> int:
        """Number of ids."""

    def content_sha256(self) -> str:
        """SHA-256 of the tokenizer's content (its serialisation), for a tokenizer not read from a file."""
