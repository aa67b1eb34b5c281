"""Continue BPE from a base segmentation with an incremental pair index (the fast learner's core).

Words are the distinct pre-tokens of a corpus with their frequencies, each a list of token ids as the base
tokenizer segments it. Each step merges the most frequent adjacent pair (ties: smallest left string, then
smallest right string), exactly as the saved tokenizer will replay it: the new merge ranks after every
earlier one, so a word's new segmentation is its old one with the pair merged leftmost-first and then any
lower-rank merge that the result enables (the "closure"; see :func:`bpe_closure`).

Instead of recounting every pair after every merge (the naive loop in ``tests/bpe_reference.py``), pair counts live
in a dict, a pair -> words index says which words to touch, and a lazy max-heap yields the best pair.
No library offers this: Hugging Face trainers cannot start from an existing merge list.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Generic, TypeVar

Pair = tuple[int, int]
#: pair -> (rank, id of the merged token), as a BPE model stores its merges
Ranks = dict[Pair, tuple[int, int]]
#: what a token's string is: text (merges, SentencePiece pieces) or bytes (tiktoken ranks)
_S = TypeVar("_S", str, bytes)


@dataclass(frozen=True)
class LearnedMerge:
    """One appended merge: ``left + right -> new``, its pair count when chosen, and whether ``new`` is a new id."""

    left: int
    right: int
    new: int
    count: int
    fresh: bool


def bpe_closure(symbols: Sequence[int], lookup: Callable[[Pair], tuple[int, int] | None]) -> list[int]:
    """Apply merges to ``symbols`` lowest rank first (leftmost on ties) until none applies.

    This is the textbook BPE loop, which is what ``tokenizers``' priority-queue ``merge_all`` computes.
    Words are short, so the quadratic scan is cheaper than a queue here.
    """
    out = list(symbols)
    while True:
        best_rank, best_pos, best_new = -1, -1, -1
        for i in range(len(out) - 1):
            hit = lookup((out[i], out[i + 1]))
            if hit is not None and (best_pos < 0 or hit[0] < best_rank):
                best_rank, best_pos, best_new = hit[0], i, hit[1]
        if best_pos < 0:
            return out
        out[best_pos : best_pos + 2] = [best_new]


def _merge_pair(symbols: list[int], a: int, b: int, new: int) -> list[int]:
    # leftmost-first, non-overlapping: what the queue does when the pair's rank is the only one that applies
    out: list[int] = []
    i, n = 0, len(symbols)
    while i < n:
        if i + 1 < n and symbols[i] == a and symbols[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


class PairLearner(Generic[_S]):
    """Mutable learning state: word segmentations, pair counts, pair -> words index, lazy heap.

    ``strings[id]`` is the byte-level string of every id (extended as tokens are created); ``vocab`` maps
    strings of the model vocabulary to ids (a merge whose string is already there reuses that id);
    ``base_ranks`` builds the base merge table lazily (only a reused id can re-enable a base merge).

    ``ignore_merges`` (Llama 3: a pre-token that is a vocabulary entry is emitted whole) needs no step here:
    the base segmentation already honours it, and a new token's string can only equal a whole word whose
    segmentation is exactly the merged pair. (A word containing the pair in its tokens' span never saw a merge
    cross that span, so the span was segmented as the word alone would be.) The slow reference applies the
    rule after every merge anyway, and the tests compare the two.
    """

    def __init__(
        self,
        words: list[list[int]],
        freqs: list[int],
        strings: list[_S],
        vocab: dict[_S, int],
        next_id: int,
        n_base_merges: int,
        base_ranks: Callable[[], Ranks],
    ) -> None:
        self.words = words
        self.freqs = freqs
        self.strings: list[_S] = strings
        self.vocab: dict[_S, int] = vocab
        self.next_id = next_id
        self.n_base_merges = n_base_merges
        self._base_ranks_factory = base_ranks
        self._base_ranks: Ranks | None = None
        self.new_ranks: Ranks = {}
        self.counts: dict[Pair, int] = {}
        self.where: dict[Pair, set[int]] = {}
        for w, (sym, f) in enumerate(zip(words, freqs, strict=True)):
            for p in pairwise(sym):
                self.counts[p] = self.counts.get(p, 0) + f
                self.where.setdefault(p, set()).add(w)
        # (-count, left string, right string, left id, right id): the most frequent pair first, ties by strings
        self.heap: list[tuple[int, _S, _S, int, int]] = [
            (-c, strings[a], strings[b], a, b) for (a, b), c in self.counts.items()
        ]
        heapq.heapify(self.heap)
        self._changed: set[Pair] = set()

    def _lookup(self, pair: Pair) -> tuple[int, int] | None:
        hit = self.new_ranks.get(pair)
        if hit is not None:
            return hit
        if self._base_ranks is None:
            self._base_ranks = self._base_ranks_factory()
        return self._base_ranks.get(pair)

    def best(self) -> tuple[int, Pair] | None:
        """The most frequent pair and its count (stale heap entries are dropped), or ``None``."""
        while self.heap:
            neg, _, _, a, b = self.heap[0]
            if self.counts.get((a, b)) == -neg:
                return -neg, (a, b)
            heapq.heappop(self.heap)
        return None

    def _replace(self, w: int, new: list[int]) -> None:
        old, f = self.words[w], self.freqs[w]
        counts, changed = self.counts, self._changed
        old_pairs = list(pairwise(old))
        new_pairs = list(pairwise(new))
        for p in old_pairs:
            counts[p] -= f
            changed.add(p)
        for p in new_pairs:
            counts[p] = counts.get(p, 0) + f
            changed.add(p)
        old_set, new_set = set(old_pairs), set(new_pairs)
        for p in old_set - new_set:
            self.where[p].discard(w)
        for p in new_set - old_set:
            self.where.setdefault(p, set()).add(w)
        self.words[w] = new

    def merge(self, pair: Pair, count: int) -> LearnedMerge:
        """Append the merge of ``pair`` and update every word that contains it."""
        a, b = pair
        s = self.strings[a] + self.strings[b]
        new = self.vocab.get(s)
        fresh = new is None
        if new is None:
            new = self.next_id
            self.next_id += 1
            self.vocab[s] = new
            self.strings.append(s)
        self.new_ranks[pair] = (self.n_base_merges + len(self.new_ranks), new)
        for w in list(self.where.get(pair, ())):
            old = self.words[w]
            # a brand-new id takes part in no earlier merge, so the plain replacement is exact;
            # a reused id may enable earlier merges (base or appended), which the closure replays
            self._replace(w, _merge_pair(old, a, b, new) if fresh else bpe_closure(old, self._lookup))
        self._flush_changed()
        return LearnedMerge(a, b, new, count, fresh)

    def _flush_changed(self) -> None:
        """Push the new counts of every pair touched by the last merge onto the heap; drop dead pairs."""
        for p in self._changed:
            c = self.counts.get(p, 0)
            if c > 0:
                heapq.heappush(self.heap, (-c, self.strings[p[0]], self.strings[p[1]], p[0], p[1]))
            else:
                self.counts.pop(p, None)
                if not self.where.get(p, True):
                    del self.where[p]
        self._changed.clear()

    def run(
        self, max_merges: int | None, min_freq: int, on_progress: Callable[[int, int | None], None] | None = None
    ) -> list[LearnedMerge]:
        """Merge until ``max_merges`` merges are learned or the best pair occurs fewer than ``min_freq`` times;
        ``on_progress(merges, max_merges)`` every 100 merges and at the end."""
        learned: list[LearnedMerge] = []
        while max_merges is None or len(learned) < max_merges:
            top = self.best()
            if top is None or top[0] < min_freq:
                break
            learned.append(self.merge(top[1], top[0]))
            if on_progress is not None and len(learned) % 100 == 0:
                on_progress(len(learned), max_merges)
        if on_progress is not None:
            on_progress(len(learned), max_merges)
        return learned


def rank_closure(symbols: Sequence[int], strings: Sequence[bytes], ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's ``byte_pair_merge`` continued from ``symbols``: merge the adjacent pair whose joined bytes have
    the lowest rank (leftmost on ties) until no joined pair is a token; a whole word that is a token is one token.

    Ranks are ids (tiktoken), so the merged id is the rank itself. Hand-written because tiktoken only runs this
    loop from single bytes (``_encode_single_piece``), never from an intermediate segmentation.
    """
    ids = list(symbols)
    parts = [strings[i] for i in ids]
    if len(ids) > 1:
        whole = ranks.get(b"".join(parts))
        if whole is not None:  # tiktoken's shortcut: a piece that is a token is emitted whole
            return [whole]
    while len(ids) > 1:
        best, pos = -1, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (pos < 0 or r < best):
                best, pos = r, i
        if pos < 0:
            break
        ids[pos : pos + 2] = [best]
        parts[pos : pos + 2] = [parts[pos] + parts[pos + 1]]
    return ids


class RankLearner(PairLearner[bytes]):
    """:class:`PairLearner` with tiktoken's merge semantics (hand-written: no library continues tiktoken BPE).

    A tiktoken encoding has no merge list: any adjacent pair whose joined bytes are a token merges, lowest rank
    (= id) first. ``strings`` are bytes, ``vocab`` is ``{token bytes: rank}``. Choosing the pair (most frequent
    adjacent id pair) is inherited; applying it differs: the new token ``s`` gets the next rank (higher than every
    base rank, so every base merge keeps priority), and every word where ``s``'s bytes sit side by side as *any*
    two tokens (the chosen pair or another split of ``s``), or which is ``s`` as a whole, is re-run through
    :func:`rank_closure`. Since ``s`` has the highest rank, tiktoken's merge loop on the word's bytes with ``s``
    added equals the closure of the segmentation without ``s``, so the words stay exactly what tiktoken produces.
    (Inside a span that ends as two tokens, the split is the one tiktoken gives the span's bytes alone, so another
    split of ``s`` should never be found; it is checked anyway, at ``len(s)`` dictionary look-ups per merge.)
    """

    def __init__(
        self,
        words: list[list[int]],
        freqs: list[int],
        strings: list[bytes],
        ranks: dict[bytes, int],
        next_id: int,
        word_bytes: Sequence[bytes],
    ) -> None:
        super().__init__(words, freqs, strings, ranks, next_id, 0, dict)
        self.whole = {b: w for w, b in enumerate(word_bytes)}

    def merge(self, pair: Pair, count: int) -> LearnedMerge:
        """Add the joined bytes of ``pair`` as a new rank and re-segment every word it changes."""
        a, b = pair
        s = self.strings[a] + self.strings[b]
        if s in self.vocab:  # cannot happen: the closure leaves no adjacent pair that joins to a token
            raise AssertionError(f"pair {pair} joins to an existing token {s!r}")
        new = self.next_id
        self.next_id += 1
        self.vocab[s] = new
        self.strings.append(s)
        touched = set(self.where.get(pair, ()))
        for k in range(1, len(s)):
            left, right = self.vocab.get(s[:k]), self.vocab.get(s[k:])
            if left is not None and right is not None and (left, right) != pair:
                touched |= self.where.get((left, right), set())
        if s in self.whole:
            touched.add(self.whole[s])
        for w in touched:
            self._replace(w, rank_closure(self.words[w], self.strings, self.vocab))
        self._flush_changed()
        return LearnedMerge(a, b, new, count, True)
