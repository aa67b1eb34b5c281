"""The one parsed description of a ``tokenizer.json`` pipeline, for every reader of one.

The tiktoken engine, the memoised pre-token encoder, the chat tokenizer's line split and the vocabulary extension
each decide from the same fields whether they can reproduce a tokenizer (model type and flags, normaliser,
pre-tokeniser steps, added tokens); they read them here, parsed once per distinct ``tokenizer.json`` text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from tokenizers import Tokenizer

#: a JSON object of ``tokenizer.json``
Node = dict[str, Any]


def _steps(node: Node | None, key: str) -> tuple[Node, ...]:
    """A ``Sequence`` node's steps (one level), a single step as a 1-tuple, nothing as ()."""
    if not node:
        return ()
    return tuple(node.get(key, [])) if node.get("type") == "Sequence" else (node,)


def _types(node: Any) -> Iterator[str]:
    """Every ``type`` in a JSON tree, nested steps included."""
    if isinstance(node, dict):
        if "type" in node:
            yield node["type"]
        for value in node.values():
            yield from _types(value)
    elif isinstance(node, list):
        for value in node:
            yield from _types(value)


@dataclass(frozen=True, eq=False)
class Pipeline:
    """A ``tokenizer.json`` as its readers see it. ``spec`` is the parsed JSON, shared: read it, never change it."""

    text: str
    spec: Node

    @property
    def model(self) -> Node:
        """The ``model`` node (``{}`` when absent)."""
        return self.spec.get("model") or {}

    @property
    def model_type(self) -> str | None:
        """``BPE``, ``Unigram``, ``WordPiece``..."""
        return self.model.get("type")

    @property
    def normalizer(self) -> Node | None:
        return self.spec.get("normalizer")

    @cached_property
    def normalizers(self) -> tuple[Node, ...]:
        """The normaliser's steps (a ``Sequence`` unrolled one level)."""
        return _steps(self.normalizer, "normalizers")

    @property
    def pre_tokenizer(self) -> Node:
        """The pre-tokeniser node (``{}`` when absent)."""
        return self.spec.get("pre_tokenizer") or {}

    @cached_property
    def pre_tokenizers(self) -> tuple[Node, ...]:
        """The pre-tokeniser's steps (a ``Sequence`` unrolled one level; ``({},)`` when absent, as readers expect)."""
        pre = self.pre_tokenizer
        return tuple(pre.get("pretokenizers", [])) if pre.get("type") == "Sequence" else (pre,)

    @cached_property
    def pre_tokenizer_types(self) -> frozenset[str]:
        """Every step type in the pre-tokeniser, nested ones included."""
        return frozenset(_types(self.spec.get("pre_tokenizer")))

    @property
    def added_tokens(self) -> list[Node]:
        """The ``added_tokens`` entries (content, id, special, lstrip, rstrip, single_word, normalized)."""
        return self.spec.get("added_tokens", [])


@lru_cache(maxsize=8)
def parse_pipeline(text: str) -> Pipeline:
    """The pipeline of a ``tokenizer.json`` text (parsed once per distinct text: a 150k vocabulary takes ~0.1 s)."""
    return Pipeline(text, json.loads(text))


def pipeline(tok: Tokenizer) -> Pipeline:
    """The pipeline of a loaded tokenizer, as it is now (its serialisation is the key, so an edit is seen)."""
    return parse_pipeline(tok.to_str())
