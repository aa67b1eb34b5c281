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
import logging
import multiprocessing as mp
import os
import pickle
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..budgets import check_budgets
from ..errors import BadInputError, SetupError
from ..scoring import score_token_ids
from ..tokenization.byte_tables import ByteTable, byte_table
from ..tokenization.hf import encode_texts
from ..tokenization.load import ResolvedTokenizer
from ..tokenization.pretoken_cache import PretokenEncoder
from .corpus import Corpus, as_corpus
from .crossfit import FoldExtension
from .saved import CrossFitSet, SavedExtension, resolved

logger = logging.getLogger(__name__)

#: most traces encoded and scored at once: bounds memory (Python id lists) at a few hundred MB
CHUNK = 1024
#: characters below which worker processes are not worth starting (two start in ~2 s; one process encodes
#: 30 M characters of Thai in ~6 s)
PARALLEL_MIN_CHARS = 30_000_000


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
    """Per trace: the number of tokens, the byte length of each length-B prefix and, when scored, its scores.

    ``prefix_bytes[t, j]`` is the byte length of the text of the first ``budgets[j]`` tokens of trace ``t``
    (the whole trace when it is shorter), counted as the ledger's scorer counts it (special tokens add no
    text); ``fold[t]`` is the fold whose tokenizer encoded it (-1: unfolded). When golds were given,
    ``scores[t, j]`` is the parser's 0/1 score of that prefix, ``correct[t]`` the completed trace's score C and
    ``emission[t]`` the first budget from which the prefix reads the completed trace's answer (NaN: never),
    all from the ledger's byte-position scorer.
    """

    budgets: np.ndarray
    n_tokens: np.ndarray
    prefix_bytes: np.ndarray
    total_bytes: np.ndarray
    fold: np.ndarray
    scores: np.ndarray | None = None
    correct: np.ndarray | None = None
    emission: np.ndarray | None = None


def flatten_ids(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Ragged id lists as one flat int64 array and ``splits`` (sequence ``t`` is ``flat[splits[t]:splits[t+1]]``)."""
    lengths = np.fromiter((len(s) for s in ids), dtype=np.int64, count=len(ids))
    splits = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=splits[1:])
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(splits[-1]))
    return flat, splits


def prefix_bytes_flat(
    flat: np.ndarray, splits: np.ndarray, *, byte_lengths: np.ndarray, budgets: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Byte length of the first B ids of every flattened sequence: ``(prefix (n, n_budgets), totals (n,))``.

    One cumulative sum over all ids; each prefix is a difference of two entries of it, so the cost is one
    pass over the ids whatever the number of budgets.
    """
    grid = np.asarray(budgets, dtype=np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= len(byte_lengths)):
        bad = int(flat[(flat < 0) | (flat >= len(byte_lengths))][0])
        raise BadInputError(f"token id {bad} is outside the tokenizer's {len(byte_lengths)} ids")
    cum = np.zeros(flat.size + 1, dtype=np.int64)  # cum[k] = bytes of the first k flattened ids
    np.cumsum(byte_lengths[flat], out=cum[1:])
    starts, lengths = splits[:-1], np.diff(splits)
    prefix = cum[starts[:, None] + np.minimum(grid[None, :], lengths[:, None])] - cum[starts][:, None]
    return prefix, cum[splits[1:]] - cum[starts]


def prefix_byte_lengths(
    ids: Sequence[Sequence[int]], byte_lengths: np.ndarray, *, budgets: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte length of the first B ids of every sequence, for every B in ``budgets``.

    Returns ``(prefix_bytes (n, n_budgets) int64, n_tokens (n,) int64, total_bytes (n,) int64)``.
    """
    flat, splits = flatten_ids(ids)
    prefix, totals = prefix_bytes_flat(flat, splits, byte_lengths=byte_lengths, budgets=budgets)
    return prefix, np.diff(splits), totals


def encode_ids(tokenizer: ResolvedTokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens added (HF: ``encode_batch_fast``, no offsets computed)."""
    return tokenizer.encode_ids(texts)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def memo_encoder(tokenizer: ResolvedTokenizer, check: Sequence[str] = ()) -> PretokenEncoder | None:
    """The memoised encoder of ``tokenizer`` when it covers the pipeline and agrees with HF on ``check``.

    ``check`` is a few of the texts about to be encoded: a disagreement (a tokenizers release that changed
    its regex engine, say) warns and returns None, so HF's own encode is used.
    """
    enc = tokenizer.pretoken_encoder()  # None for tiktoken and sentencepiece: fast native encoders already
    if enc is not None and check:
        flat, splits = enc.encode_flat(check)
        ref, ref_splits = flatten_ids(encode_ids(tokenizer, check))
        if not (np.array_equal(flat, ref) and np.array_equal(splits, ref_splits)):
            logger.warning(f"{tokenizer.name}: memoised encoding differs from HF tokenizers; using HF")
            return None
    return enc


class _ChunkScorer:
    """Encode and score one chunk of traces with one of several tokenizers: the work a worker process does."""

    def __init__(
        self,
        encoders: Sequence[PretokenEncoder | Tokenizer | ResolvedTokenizer],
        tables: Sequence[ByteTable],
        grid: np.ndarray,
        parser: str,
    ) -> None:
        self.encoders, self.tables, self.grid, self.parser = encoders, tables, grid, parser

    def __call__(self, task: tuple[int, list[str], list[int] | None, np.ndarray]) -> dict[str, np.ndarray]:
        k, texts, golds, done = task
        encoder = self.encoders[k]
        if isinstance(encoder, PretokenEncoder):
            flat, splits = encoder.encode_flat(texts)
        elif isinstance(encoder, ResolvedTokenizer):  # tiktoken / sentencepiece
            flat, splits = flatten_ids(encoder.encode_batch(texts))
        else:
            flat, splits = flatten_ids(encode_texts(encoder, texts))
        table = self.tables[k]  # a dummy prefix (Llama 2): each trace's first text token without its space
        prefix, totals = prefix_bytes_flat(
            table.trace_ids(flat, splits), splits, byte_lengths=table.lengths, budgets=self.grid
        )
        out = {"prefix_bytes": prefix, "total_bytes": totals, "n_tokens": np.diff(splits)}
        if golds is not None:
            res = score_token_ids(
                flat, splits, table=self.tables[k], golds=golds, budgets=self.grid, parser=self.parser, complete=done
            )
            out |= {"scores": res.scores, "correct": res.correct, "emission": res.emission}
        return out


_WORKER: _ChunkScorer | None = None  # a worker process's scorer, set by _init_worker


def _init_worker(state: bytes) -> None:
    global _WORKER
    _WORKER = _ChunkScorer(*pickle.loads(state))


def _work(task: tuple) -> dict[str, np.ndarray]:
    if _WORKER is None:
        raise RuntimeError("a retokenizing worker runs only after _init_worker")
    return _WORKER(task)


def _in_workers(workers: int, state: bytes, payloads: Iterator[tuple]) -> Iterator[dict[str, np.ndarray]]:
    """Results of ``_work`` on each payload, in order, from spawned worker processes.

    At most two tasks per worker are in flight, so only those chunks' texts are copied at a time. A worker that
    dies (out of memory; a script without an ``if __name__ == "__main__":`` guard) is a one-line error.
    """
    with ProcessPoolExecutor(workers, mp.get_context("spawn"), _init_worker, (state,)) as pool:
        pending: deque[Future] = deque()
        try:
            for payload in payloads:
                pending.append(pool.submit(_work, payload))
                if len(pending) >= 2 * workers:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        except BrokenProcessPool as exc:
            raise SetupError(
                "a retokenizing worker process died (out of memory, or a script without an "
                '`if __name__ == "__main__":` guard); rerun with workers=1 (--workers 1)'
            ) from exc
        finally:
            for future in pending:
                future.cancel()


def _retokenize_folds(
    texts: Sequence[str],
    choice: np.ndarray,
    tokenizers: Sequence[ResolvedTokenizer],
    grid: np.ndarray,
    golds: Sequence[int | str | None] | None,
    done: np.ndarray,
    parser: str,
    on_progress: Callable[[int, int | None], None] | None,
    workers: int | None,
    memo: bool,
) -> dict[str, np.ndarray]:
    """Encode trace ``t`` with ``tokenizers[choice[t]]``, measure and score its prefixes, in chunks.

    With the memoised encoder (pure Python, one core) the chunks of a large job (:data:`PARALLEL_MIN_CHARS`)
    go to ``workers`` processes; HF's own encode already uses every core, so it runs here.
    """
    n = len(texts)
    rows_of = [np.flatnonzero(choice == k) for k in range(len(tokenizers))]
    encoders = [
        memo_encoder(tok, [texts[r] for r in rows[:4]]) if memo and rows.size else None
        for tok, rows in zip(tokenizers, rows_of, strict=True)
    ]
    workers = usable_cpus() if workers is None else max(1, int(workers))
    size = max(64, min(CHUNK, -(-n // (4 * workers))))
    tasks = [(k, rows[lo : lo + size]) for k, rows in enumerate(rows_of) for lo in range(0, rows.size, size)]
    args = (
        [t.batch_encoder if e is None else e for t, e in zip(tokenizers, encoders, strict=True)],
        [byte_table(t) for t in tokenizers],
        grid,
        parser,
    )

    def payloads() -> Iterator[tuple]:
        for k, rows in tasks:
            sub_golds = None if golds is None else [golds[r] for r in rows]
            yield k, [texts[r] for r in rows], sub_golds, done[rows]

    out = {
        "prefix_bytes": np.zeros((n, grid.size), dtype=np.int64),
        "total_bytes": np.zeros(n, dtype=np.int64),
        "n_tokens": np.zeros(n, dtype=np.int64),
    }
    if golds is not None:
        out |= {
            "scores": np.zeros((n, grid.size), dtype=np.int8),
            "correct": np.zeros(n, dtype=np.int8),
            "emission": np.full(n, np.nan),
        }
    parallel = (
        workers > 1
        and len(tasks) > 1
        and any(e is not None for e in encoders)
        and sum(map(len, texts)) >= PARALLEL_MIN_CHARS
    )
    if parallel:  # spawn: a clean interpreter, no fork of HF's thread pool; state pickled once, not per worker
        state = pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL)
        results = _in_workers(min(workers, len(tasks)), state, payloads())
    else:
        results = map(_ChunkScorer(*args), payloads())
    finished = 0
    for (_, rows), result in zip(tasks, results, strict=True):
        for name, part in result.items():
            out[name][rows] = part
        finished += rows.size
        if on_progress is not None:
            on_progress(finished, n)
    return out


@dataclass(frozen=True)
class Scoring:
    """What retokenized prefixes are scored against: each trace's gold answer, whether it stopped by itself
    (``complete[t]``: finish reason ``stop``; default: every trace) and the answer ``parser``."""

    golds: Sequence[int | str | None]
    complete: Sequence[bool] | np.ndarray | None = None
    #: a parser name (integer answers) or a parser object (any answer type, e.g. a task's)
    parser: Any = "strict"


def retokenize(
    texts: Sequence[str],
    tokenizer: ResolvedTokenizer,
    *,
    budgets: Iterable[int],
    scoring: Scoring | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
    workers: int | None = None,
    memo: bool = True,
) -> Retokenized:
    """Encode ``texts`` with ``tokenizer``, measure every length-B prefix in bytes and, given ``scoring``, score it.

    Scoring is the ledger's own :func:`~mindcap_tok.scoring.score.score_token_ids` on the new ids, so prefixes
    are read exactly as for stored ids. Encoding gives HF's ids: memoised per pre-token
    (:mod:`mindcap_tok.tokenization.pretoken_cache`) on ``workers`` processes (default: every usable CPU), or with
    HF's own encode when ``memo`` is False or the tokenizer's pipeline is not covered. ``on_progress(done, total)``
    counts traces after each chunk.
    """
    return retokenize_items(
        texts,
        [0] * len(texts),
        folds=[FoldTokenizer(tokenizer)],
        budgets=budgets,
        scoring=scoring,
        on_progress=on_progress,
        workers=workers,
        memo=memo,
    )


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
            raise BadInputError(
                f"item {int(items[clash][0])} is held out by more than one fold; folds must be disjoint"
            )
        choice[mine] = k
    if (choice < 0).any():
        raise BadInputError(
            f"item {int(items[choice < 0][0])} is held out by no fold of the extension, so every extension saw it; "
            "cross-fit over the ledger's items (or learn the extension on this ledger)"
        )
    return choice


def retokenize_items(
    texts: Sequence[str],
    items: Sequence[int],
    *,
    folds: ResolvedTokenizer | Sequence[FoldTokenizer],
    budgets: Iterable[int],
    scoring: Scoring | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
    workers: int | None = None,
    memo: bool = True,
) -> Retokenized:
    """:func:`retokenize` where trace ``t`` (of item ``items[t]``) uses the fold tokenizer that held it out."""
    if isinstance(folds, ResolvedTokenizer):
        folds = [FoldTokenizer(folds)]
    n = len(texts)
    if n != len(items):
        raise BadInputError(f"{n} texts but {len(items)} item ids")
    grid = check_budgets(budgets, sort=True)
    golds = None if scoring is None else scoring.golds
    if golds is not None and len(golds) != n:
        raise BadInputError(f"{n} texts but {len(golds)} gold answers")
    choice = fold_of_items(np.asarray(items), folds)
    complete = None if scoring is None else scoring.complete
    done = np.ones(n, dtype=bool) if complete is None else np.asarray(complete, dtype=bool)
    parser = "strict" if scoring is None else scoring.parser
    out = _retokenize_folds(
        texts, choice, [f.tokenizer for f in folds], grid, golds, done, parser, on_progress, workers, memo
    )
    fold_ids = np.array([-1 if f.fold is None else f.fold for f in folds], dtype=np.int64)[choice]
    return Retokenized(budgets=grid, fold=fold_ids, **out)


def decode_traces(tokenizer: ResolvedTokenizer, output_ids: Sequence[Sequence[int]]) -> list[str]:
    """The text stored token ids stand for, special tokens kept (re-encoding turns them back into their ids).

    Ids are the ledger's truth; this text is what a different tokenizer re-encodes. The scorer gives special
    tokens no text, as for stored ids, so keeping them changes token counts only, never what is parsed.
    tiktoken and SentencePiece encode special-token text as ordinary text, so for them special ids are dropped.
    """
    return tokenizer.decode_for_reencoding(output_ids)


def ledger_corpus(items: Sequence[int], texts: Sequence[str], *, name: str) -> Corpus:
    """Traces as an extension corpus: ``(item, text)`` pairs, so cross-fitting splits by item, not by trace."""
    return as_corpus(zip((int(i) for i in items), texts, strict=True), name=name)


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
