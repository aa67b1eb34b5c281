"""Retokenize stored traces with another tokenizer and find the byte length of every length-B prefix.

The paper (§6) prices a vocabulary extension by re-encoding each stored trace with the extended tokenizer,
keeping its first B ids and scoring the text they decode to with the same strict parser. The text of the first
B ids is the first ``L_B`` bytes of the trace, where ``L_B`` is the sum of the byte lengths of those ids (a
byte-level tokenizer decodes a sequence to the concatenation of its tokens' bytes). So a budget grid needs
only one encode per trace and one cumulative sum: no per-budget decode.

Cross-fitting: a trace of item ``i`` is retokenized only with an extension whose fold held ``i`` out
(:class:`FoldTokenizer` carries the items it may be applied to), so no scored item contributed a merge.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import MindcapError
from ..tokenizer import ResolvedTokenizer
from .corpus import Corpus, as_corpus
from .crossfit import FoldExtension, cross_fit
from .saved import CrossFitSet, SavedExtension, resolved

#: traces encoded per call of ``encode_batch_fast``: bounds memory (Python id lists) at a few hundred MB
CHUNK = 1024


@dataclass(frozen=True)
class FoldTokenizer:
    """A tokenizer and the items it may retokenize (``None``: every item, e.g. the base tokenizer).

    For a cross-fitted extension, ``items`` are the ids its fold held out when it was learned and
    ``fold`` its fold number.
    """

    tokenizer: ResolvedTokenizer
    items: frozenset[int] | None = None
    fold: int | None = None


@dataclass(frozen=True)
class Retokenized:
    """Per trace: the number of tokens and the byte length of each length-B prefix.

    ``prefix_bytes[t, j]`` is the UTF-8 byte length of the first ``budgets[j]`` tokens of trace ``t``
    (the whole trace when it is shorter); ``fold[t]`` is the fold whose tokenizer encoded it (-1: unfolded).
    """

    budgets: np.ndarray
    n_tokens: np.ndarray
    prefix_bytes: np.ndarray
    total_bytes: np.ndarray
    fold: np.ndarray


def check_budgets(budgets: Iterable[int]) -> np.ndarray:
    """Budgets as a sorted int64 array of distinct positive integers (one-line error otherwise)."""
    grid = np.asarray(sorted({int(b) for b in budgets}), dtype=np.int64)
    if grid.size == 0:
        raise MindcapError("give at least one budget")
    if grid[0] < 1:
        raise MindcapError(f"budgets must be positive token counts, got {int(grid[0])}")
    return grid


def prefix_byte_lengths(
    ids: Sequence[Sequence[int]], byte_lengths: np.ndarray, budgets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte length of the first B ids of every sequence, for every B in ``budgets``.

    Returns ``(prefix_bytes (n, n_budgets) int64, n_tokens (n,) int64, total_bytes (n,) int64)``. All
    sequences are flattened into one array and summed once (``np.cumsum``); each prefix is a difference of two
    cumulative sums, so the cost is one pass over the ids whatever the number of budgets.
    """
    grid = np.asarray(budgets, dtype=np.int64)
    lengths = np.fromiter((len(s) for s in ids), dtype=np.int64, count=len(ids))
    total = int(lengths.sum())
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
    if total and (flat.min() < 0 or flat.max() >= len(byte_lengths)):
        bad = int(flat[(flat < 0) | (flat >= len(byte_lengths))][0])
        raise MindcapError(f"token id {bad} is outside the tokenizer's {len(byte_lengths)} ids")
    # cum[k] = bytes of the first k flattened ids (cum[0] = 0)
    cum = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(byte_lengths[flat], out=cum[1:])
    starts = np.zeros(len(ids), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    ends = starts[:, None] + np.minimum(grid[None, :], lengths[:, None])
    prefix = cum[ends] - cum[starts][:, None]
    totals = cum[starts + lengths] - cum[starts]
    return prefix, lengths, totals


def encode_ids(tokenizer: ResolvedTokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens added (``encode_batch_fast``: no offsets computed)."""
    tok = tokenizer.tokenizer
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    return [e.ids for e in encode(list(texts), add_special_tokens=False)]


def retokenize(
    texts: Sequence[str],
    tokenizer: ResolvedTokenizer,
    budgets: Iterable[int],
    on_progress: Callable[[int], None] | None = None,
) -> Retokenized:
    """Encode ``texts`` with ``tokenizer`` and measure every length-B prefix in bytes (see module doc).

    Works in chunks of :data:`CHUNK` traces; ``on_progress(n_done)`` is called after each.
    """
    grid = check_budgets(budgets)
    n = len(texts)
    prefix = np.zeros((n, grid.size), dtype=np.int64)
    n_tokens = np.zeros(n, dtype=np.int64)
    totals = np.zeros(n, dtype=np.int64)
    lengths = tokenizer.byte_lengths
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        p, k, t = prefix_byte_lengths(encode_ids(tokenizer, texts[lo:hi]), lengths, grid)
        prefix[lo:hi], n_tokens[lo:hi], totals[lo:hi] = p, k, t
        if on_progress is not None:
            on_progress(hi - lo)
    return Retokenized(grid, n_tokens, prefix, totals, np.full(n, -1, dtype=np.int64))


def fold_of_items(items: np.ndarray, folds: Sequence[FoldTokenizer]) -> np.ndarray:
    """For each trace's item, the index in ``folds`` of the one tokenizer allowed to retokenize it.

    Raises when an item is held out by no fold (it would be scored with an extension that saw it, or with
    none) or by several (the folds overlap, so the choice would be arbitrary).
    """
    items = np.asarray(items, dtype=np.int64)
    choice = np.full(items.shape, -1, dtype=np.int64)
    for k, fold in enumerate(folds):
        mine = np.ones(items.shape, dtype=bool) if fold.items is None else np.isin(items, list(fold.items))
        clash = mine & (choice >= 0)
        if clash.any():
            raise MindcapError(f"item {int(items[clash][0])} is held out by more than one fold; folds must be disjoint")
        choice[mine] = k
    if (choice < 0).any():
        raise MindcapError(
            f"item {int(items[choice < 0][0])} is held out by no fold of the extension, so every extension saw it; "
            "cross-fit over the ledger's items (or learn the extension on this ledger)"
        )
    return choice


def retokenize_items(
    texts: Sequence[str],
    items: Sequence[int],
    folds: ResolvedTokenizer | Sequence[FoldTokenizer],
    budgets: Iterable[int],
    on_progress: Callable[[int], None] | None = None,
) -> Retokenized:
    """:func:`retokenize` where trace ``t`` (of item ``items[t]``) uses the fold tokenizer that held it out."""
    if isinstance(folds, ResolvedTokenizer):
        folds = [FoldTokenizer(folds)]
    if len(texts) != len(items):
        raise MindcapError(f"{len(texts)} texts but {len(items)} item ids")
    grid = check_budgets(budgets)
    choice = fold_of_items(np.asarray(items), folds)
    n = len(texts)
    prefix = np.zeros((n, grid.size), dtype=np.int64)
    n_tokens = np.zeros(n, dtype=np.int64)
    totals = np.zeros(n, dtype=np.int64)
    fold_ids = np.full(n, -1, dtype=np.int64)
    for k, fold in enumerate(folds):
        rows = np.flatnonzero(choice == k)
        if rows.size == 0:
            continue
        part = retokenize([texts[r] for r in rows], fold.tokenizer, grid, on_progress)
        prefix[rows], n_tokens[rows], totals[rows] = part.prefix_bytes, part.n_tokens, part.total_bytes
        fold_ids[rows] = -1 if fold.fold is None else fold.fold
    return Retokenized(grid, n_tokens, prefix, totals, fold_ids)


def decode_traces(tokenizer: ResolvedTokenizer, output_ids: Sequence[Sequence[int]]) -> list[str]:
    """The text stored token ids stand for (special tokens kept as their text, as the ledger's byte scorer counts).

    Ids are the ledger's truth; this text is what a different tokenizer re-encodes.
    """
    return tokenizer.tokenizer.decode_batch([list(ids) for ids in output_ids], skip_special_tokens=False)


def ledger_corpus(items: Sequence[int], texts: Sequence[str], name: str) -> Corpus:
    """Traces as an extension corpus: ``(item, text)`` pairs, so cross-fitting splits by item, not by trace."""
    return as_corpus(zip((int(i) for i in items), texts, strict=True), name=name)


def learn_ledger_extensions(
    base: ResolvedTokenizer,
    corpus: Corpus,
    size: int | None = None,
    min_freq: int | None = None,
    folds: int = 2,
    seed: int = 0,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[FoldExtension]:
    """Cross-fitted extensions learned on ledger traces (issue 3's :func:`cross_fit`, seeded split by item)."""
    return cross_fit(base, corpus, folds=folds, seed=seed, size=size, min_freq=min_freq, on_progress=on_progress)


def fold_tokenizers(
    source: CrossFitSet | SavedExtension | Sequence[FoldExtension], lang: str = ""
) -> list[FoldTokenizer]:
    """The retokenizers of a saved cross-fit, one saved extension, or freshly learned folds.

    A single saved extension without held-out items (learned on other text, e.g. FLORES) applies to every item.
    """
    if isinstance(source, SavedExtension):
        held = frozenset(map(int, source.held_out)) or None
        return [FoldTokenizer(source.tokenizer, held, source.manifest.get("fold"))]
    if isinstance(source, CrossFitSet):
        return [
            FoldTokenizer(f.tokenizer, frozenset(map(int, f.held_out)), f.manifest.get("fold", k))
            for k, f in enumerate(source.folds)
        ]
    out = []
    for fx in source:
        name = f"{fx.extension.base.name}+{lang}-fold{fx.fold}" if lang else f"{fx.extension.base.name}+fold{fx.fold}"
        out.append(FoldTokenizer(resolved(fx.extension, name), frozenset(map(int, fx.held_out)), fx.fold))
    return out
