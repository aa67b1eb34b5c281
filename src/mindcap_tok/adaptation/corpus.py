"""Corpora for learning extensions: an ordered sequence of ``(item_id, text)`` pairs with a content hash.

An *item* is the unit that cross-fitting assigns to a fold: a line of a plain-text corpus, a row of MGSM,
or (later) an MGSM item whose several ledger traces all carry the same id. Anything iterable of
``(item_id, text)`` pairs can be wrapped with :func:`as_corpus`, so ledger traces plug in unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .._io import regular_file
from ..errors import BadInputError
from ..tasks.mgsm import QUESTIONS, question_corpus

ItemId = int | str

#: names of the built-in corpora accepted by :func:`load_corpus` (anything else is a file path)
BUILTIN_CORPORA = ("flores-dev", QUESTIONS)


@dataclass(frozen=True, eq=False)
class Corpus:
    """Named, ordered ``(item_id, text)`` pairs; several texts may share one item id."""

    name: str
    items: tuple[tuple[ItemId, str], ...]

    @cached_property
    def sha256(self) -> str:
        """SHA-256 over the pairs, one ``json.dumps([item_id, text])`` line each (order matters)."""
        h = hashlib.sha256()
        for item, text in self.items:
            h.update(json.dumps([item, text], ensure_ascii=False).encode("utf-8") + b"\n")
        return h.hexdigest()

    def item_ids(self) -> list[ItemId]:
        """Distinct item ids in first-appearance order."""
        return list(dict.fromkeys(item for item, _ in self.items))

    def texts(self) -> list[str]:
        """All texts, in order."""
        return [text for _, text in self.items]

    def select(self, ids: Iterable[ItemId], name: str | None = None) -> Corpus:
        """The sub-corpus of the given item ids (order of the original kept)."""
        keep = set(ids)
        return Corpus(name or self.name, tuple(p for p in self.items if p[0] in keep))

    @property
    def n_bytes(self) -> int:
        """UTF-8 bytes of all texts."""
        return sum(len(text.encode("utf-8")) for _, text in self.items)

    def identity(self) -> dict:
        """Name, hash and sizes, for manifests."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "n_items": len(self.item_ids()),
            "n_texts": len(self.items),
            "n_bytes": self.n_bytes,
        }


def as_corpus(pairs: Corpus | Iterable[tuple[ItemId, str]], name: str = "custom") -> Corpus:
    """Wrap any iterable of ``(item_id, text)`` pairs (a :class:`Corpus` is returned as is)."""
    if isinstance(pairs, Corpus):
        return pairs
    items = []
    for pair in pairs:
        try:
            item, text = pair
        except (TypeError, ValueError) as exc:
            raise BadInputError(f"corpus {name!r}: expected (item_id, text) pairs, got {pair!r:.80}") from exc
        if not isinstance(item, int | str) or isinstance(item, bool):
            raise BadInputError(f"corpus {name!r}: item ids must be int or str, got {type(item).__name__}")
        if not isinstance(text, str):
            raise BadInputError(f"corpus {name!r}: texts must be str, got {type(text).__name__} for item {item!r}")
        items.append((item, text))
    return Corpus(name, tuple(items))


def lines_corpus(lines: Sequence[str], name: str) -> Corpus:
    """One item per non-empty line; the item id is the 0-based line number."""
    return Corpus(name, tuple((i, line) for i, line in enumerate(lines) if line.strip()))


def flores_corpus(lang: str, split: str = "dev", *, source: str | None = None) -> Corpus:
    """FLORES-200 sentences of one language (NFC), one item per line."""
    from ..data.flores import load_flores
    from ..data.languages import resolve_language

    code = resolve_language(lang)
    return lines_corpus(load_flores(code, split, source=source), f"flores200/{split}/{code}")


def mgsm_corpus(lang: str, data_dir: str | os.PathLike[str] | None = None) -> Corpus:
    """The 250 MGSM questions of one language; the item id is the MGSM row index (0..249)."""
    return Corpus(*question_corpus(lang, data_dir))


def text_file_corpus(path: str | os.PathLike[str]) -> Corpus:
    """Any UTF-8 text file, one item per non-empty line (the item id is the 0-based line number)."""
    p = Path(path)
    try:
        text = regular_file(p, "corpus file").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise BadInputError(f"corpus file not found: {p}") from exc
    except UnicodeDecodeError as exc:
        raise BadInputError(f"corpus file {p} is not UTF-8: {exc.reason} at byte {exc.start}") from exc
    except OSError as exc:
        raise BadInputError(f"cannot read corpus file {p}: {exc.strerror}") from exc
    # split on "\n" only (str.splitlines would also split on U+2028, form feeds, ... inside a line)
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines_corpus(lines, f"file:{p.name}")


def load_corpus(
    spec: str, lang: str, *, data_dir: str | os.PathLike[str] | None = None, flores_source: str | None = None
) -> Corpus:
    """``flores-dev`` (FLORES-200 dev of ``lang``), ``mgsm`` (MGSM questions of ``lang``) or a file path."""
    if spec == "flores-dev":
        return flores_corpus(lang, "dev", source=flores_source)
    if spec == QUESTIONS:
        return mgsm_corpus(lang, data_dir)
    if not Path(spec).exists():
        raise BadInputError(f"unknown corpus {spec!r}: use {' or '.join(BUILTIN_CORPORA)} or a UTF-8 text file path")
    return text_file_corpus(spec)
