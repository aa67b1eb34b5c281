"""Slow reference learner: recount every pair of every word after every merge.

Kept deliberately simple and separate from the fast learner (:mod:`mindcap_tok.adaptation._bpe`): tests compare the
two merge lists, and ``benchmarks/bench_extend.py`` times both. Same inputs, same tie rule (most frequent pair, then
smallest left string, then smallest right string), same replay semantics (after each merge every word is
re-segmented by the full lowest-rank-first BPE loop over base and appended merges; with ``ignore_merges`` a word
that is itself a vocabulary entry becomes that one token).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise

from mindcap_tok.adaptation.extend import base_bpe, base_words
from mindcap_tok.tokenization.load import ResolvedTokenizer


def _bpe(symbols: list[int], ranks: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    while len(symbols) > 1:
        candidates = [(ranks[p][0], i) for i, p in enumerate(pairwise(symbols)) if p in ranks]
        if not candidates:
            break
        _, i = min(candidates)
        symbols = [*symbols[:i], ranks[(symbols[i], symbols[i + 1])][1], *symbols[i + 2 :]]
    return symbols


def naive_merges(
    words: Sequence[Sequence[int]],
    freqs: Sequence[int],
    strings: Sequence[str],
    vocab: dict[str, int],
    base_ranks: dict[tuple[int, int], tuple[int, int]],
    ignore_merges: bool,
    max_merges: int | None,
    min_freq: int,
) -> list[tuple[int, int, int, int]]:
    """Learned merges as ``(left, right, new id, count)``, from the base segmentation ``words``."""
    words = [list(w) for w in words]
    strings = list(strings)
    vocab = dict(vocab)
    ranks = dict(base_ranks)
    n_base = len(base_ranks)
    next_id = len(strings)
    merges: list[tuple[int, int, int, int]] = []
    while max_merges is None or len(merges) < max_merges:
        counts: Counter[tuple[int, int]] = Counter()
        for sym, f in zip(words, freqs, strict=True):
            for p in pairwise(sym):
                counts[p] += f
        if not counts:
            break
        (a, b), count = min(counts.items(), key=lambda kv: (-kv[1], strings[kv[0][0]], strings[kv[0][1]]))
        if count < min_freq:
            break
        merged = strings[a] + strings[b]
        new = vocab.get(merged)
        if new is None:
            new = next_id
            next_id += 1
            vocab[merged] = new
            strings.append(merged)
        ranks[(a, b)] = (n_base + len(merges), new)
        merges.append((a, b, new, count))
        words = [_bpe(sym, ranks) for sym in words]
        if ignore_merges:
            words = [[vocab[s]] if (s := "".join(strings[i] for i in sym)) in vocab else sym for sym in words]
    return merges


def reference_merges(
    base: ResolvedTokenizer, texts: Iterable[str], size: int | None, min_freq: int = 2
) -> list[tuple[str, str, int]]:
    """The slow learner's merges on ``texts`` as ``(left string, right string, count)``, starting from the same
    base segmentation as :func:`~mindcap_tok.adaptation.extend.learn_extension` (comparable with its
    ``merges`` and ``merge_counts``)."""
    info = base_bpe(base)
    _, words, freqs = base_words(base.tokenizer, texts)
    names = info.strings()
    out = []
    for a, b, new, count in naive_merges(
        words, freqs, names, info.vocab, info.ranks(), info.ignore_merges, size, min_freq
    ):
        if new == len(names):
            names.append(names[a] + names[b])
        out.append((names[a], names[b], count))
    return out
