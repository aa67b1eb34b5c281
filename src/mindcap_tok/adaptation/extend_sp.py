"""Extend a SentencePiece BPE model (Gemma 3, Llama 2): new NORMAL pieces appended, scored below every base piece.

SentencePiece BPE merges the adjacent pair whose concatenation is the highest-scored piece (left-most on ties),
starting from characters (unknown ones included; they become ``<0xNN>`` bytes only after merging). A piece scored
below every existing piece therefore merges only after every base merge, so the extension can only coarsen the
base segmentation, and text it was never meant for keeps its base tokens as long as no new piece can form in it.

Learning continues BPE on the base segmentation of the corpus (byte-fallback runs folded back into characters):
the most frequent adjacent pair whose concatenation is a valid piece under the model's own trainer spec
(``max_sentencepiece_length``, ``split_by_whitespace``, ``split_digits``, ``split_by_unicode_script``,
``split_by_number``; see :func:`piece_rules`) becomes the next piece, scored below the previous one, and every
word where it can now form is re-run through SentencePiece's merge loop (:func:`piece_closure`). With
``split_by_whitespace`` off (Gemma 3) a new piece must also contain a character of the corpus's script, or merges
across spaces and punctuation would reach English.

Scores: ``min − step·k`` with ``step`` a power of two at least twice the float32 spacing at the lowest new score,
so scores are strictly below every base score and distinct in float32 (Llama 2: base minimum −1e9, step 128).
"""

from __future__ import annotations

import heapq
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import regex

from ..errors import BadInputError
from ..tokenization.load import ResolvedTokenizer
from ..tokenization.sentencepiece_family import SentencePieceBackend
from ._bpe import LearnedMerge, Pair, PairLearner

WS = "\u2581"
#: ModelProto.SentencePiece.Type values
NORMAL, USER_DEFINED = 1, 4
#: TrainerSpec.ModelType values
BPE = 2


@lru_cache(maxsize=4096)
def script_of(ch: str) -> str:
    """The Unicode script of ``ch`` as SentencePiece's trainer groups them: Hiragana and Katakana count as Han,
    numbers are ``Number``, Common/Inherited characters (punctuation, combining marks) ``Common``/``Inherited``."""
    if regex.match(r"\p{N}", ch):
        return "Number"
    for name in ("Common", "Inherited", "Han", "Hiragana", "Katakana", "Hangul"):
        if regex.match(rf"\p{{sc={name}}}", ch):
            return "Han" if name in ("Hiragana", "Katakana") else name
    word = unicodedata.name(ch, "UNKNOWN").split()[0].title()
    try:
        return word if regex.match(rf"\p{{sc={word}}}", ch) else f"other:{word}"
    except regex.error:
        return f"other:{word}"


@dataclass(frozen=True)
class PieceRules:
    """Which new pieces the model's trainer spec allows (see :meth:`allows`)."""

    max_length: int
    split_by_whitespace: bool
    split_digits: bool
    split_by_unicode_script: bool
    split_by_number: bool
    #: with ``split_by_whitespace`` off, a new piece must contain a character of this script
    target_script: str | None

    def allows(self, piece: str) -> bool:
        """True when ``piece`` is a valid new piece: SentencePiece's ``IsValidSentencePiece`` for the spec, plus
        the target-script rule."""
        if len(piece) > self.max_length or not piece.strip(WS):
            return False
        prev = None
        has_target = False
        for pos, ch in enumerate(piece):
            if ch == WS:
                if pos > 0 and (self.split_by_whitespace or pos == len(piece) - 1):
                    return False
                continue
            if self.split_digits and unicodedata.category(ch) == "Nd":
                return False  # len(piece) > 1 here: every digit is its own piece
            script = script_of(ch)
            if script == "Inherited" or (script == "Number" and not self.split_by_number):
                continue
            if self.split_by_unicode_script and prev is not None and script != prev:
                return False
            prev = script
            has_target |= script == self.target_script
        return self.split_by_whitespace or has_target


def piece_rules(backend: SentencePieceBackend, symbols: Sequence[Sequence[str]]) -> PieceRules:
    """The rules for the base model's trainer spec; the target script is the most common letter script in
    ``symbols``."""
    spec = backend.model_proto().trainer_spec
    counts: Counter[str] = Counter()
    for line in symbols:
        for piece in line:
            counts.update(
                s for s in map(script_of, piece.replace(WS, "")) if s not in ("Common", "Inherited", "Number")
            )
    return PieceRules(
        max_length=spec.max_sentencepiece_length,
        split_by_whitespace=spec.split_by_whitespace,
        split_digits=spec.split_digits,
        split_by_unicode_script=spec.split_by_unicode_script,
        split_by_number=spec.split_by_number,
        target_script=counts.most_common(1)[0][0] if counts else None,
    )


def check_bpe_model(base: ResolvedTokenizer, backend: SentencePieceBackend) -> None:
    """Raise a one-line error unless ``base`` (whose back end is ``backend``) is a SentencePiece BPE model (Unigram
    cannot be extended this way)."""
    model_type = backend.model_proto().trainer_spec.model_type
    if model_type != BPE:
        kind = {1: "Unigram", 3: "word", 4: "char"}.get(model_type, str(model_type))
        raise BadInputError(
            f"{base.name} is a SentencePiece {kind} model; only SentencePiece BPE models can be extended, because "
            "appended low-scored pieces keep every base merge first only under BPE (Unigram picks the most likely "
            "segmentation, so a new piece would change text it was never learned for)"
        )


def new_scores(min_score: float, n: int) -> list[float]:
    """``n`` float32 scores strictly below ``min_score``, strictly decreasing and distinct in float32."""
    step = 1.0
    while step < 2 * float(np.spacing(np.float32(abs(min_score) + (n + 1) * step))):
        step *= 2
    scores = [float(np.float32(min_score - step * (k + 1))) for k in range(n)]
    if any(b >= a for a, b in zip([float(np.float32(min_score)), *scores], scores, strict=False)):
        raise AssertionError("new scores are not strictly decreasing in float32")
    return scores


def piece_closure(symbols: Sequence[int], strings: Sequence[str], *, pieces: dict[str, tuple[float, int]]) -> list[int]:
    """SentencePiece's BPE loop continued from ``symbols``: merge the adjacent pair whose concatenation is the
    highest-scored piece (left-most on ties) until no concatenation is a piece. ``pieces``: string -> (score, id)."""
    ids = list(symbols)
    while len(ids) > 1:
        best, pos, new = 0.0, -1, -1
        for i in range(len(ids) - 1):
            hit = pieces.get(strings[ids[i]] + strings[ids[i + 1]])
            if hit is not None and (pos < 0 or hit[0] > best):
                best, pos, new = hit[0], i, hit[1]
        if pos < 0:
            break
        ids[pos : pos + 2] = [new]
    return ids


class PieceLearner(PairLearner[str]):
    """:class:`~._bpe.PairLearner` with SentencePiece semantics: pairs are chosen among valid new pieces only, a
    new piece is scored below every earlier one, and each word where its string can form (as the chosen pair or any
    other split) is re-run through :func:`piece_closure`.

    ``strings``/``symbol_ids`` cover base pieces, then characters missing from the base vocabulary, then new
    pieces; ``mergeable`` (string -> (score, id)) holds the pieces SentencePiece merges into (NORMAL and
    USER_DEFINED); ``frozen`` the ids no new piece may contain (user-defined, control, unknown); ``taken`` every
    base piece string (a new piece must not repeat one).
    """

    def __init__(
        self,
        words: list[list[int]],
        freqs: list[int],
        strings: list[str],
        mergeable: dict[str, tuple[float, int]],
        frozen: frozenset[int],
        taken: frozenset[str],
        rules: PieceRules,
        scores: Callable[[int], float],
    ) -> None:
        symbol_ids = {s: i for i, s in enumerate(strings) if s in mergeable or i >= len(taken)}
        super().__init__(words, freqs, strings, symbol_ids, len(strings), 0, dict)
        self.mergeable = mergeable
        self.frozen = frozen
        self.taken = taken
        self.rules = rules
        self.score_of = scores
        self.n_new = 0
        self._refused: set[Pair] = set()

    def _allowed(self, pair: Pair) -> bool:
        if pair in self._refused:
            return False
        a, b = pair
        s = self.strings[a] + self.strings[b]
        ok = a not in self.frozen and b not in self.frozen and s not in self.taken and self.rules.allows(s)
        if not ok:
            self._refused.add(pair)
        return ok

    def best(self) -> tuple[int, Pair] | None:
        """The most frequent pair that would make a valid new piece, and its count, or ``None``."""
        while self.heap:
            neg, _, _, a, b = self.heap[0]
            if self.counts.get((a, b)) == -neg and self._allowed((a, b)):
                return -neg, (a, b)
            heapq.heappop(self.heap)
        return None

    def merge(self, pair: Pair, count: int) -> LearnedMerge:
        """Add the concatenation of ``pair`` as the next (lowest-scored) piece and re-segment every word it changes."""
        a, b = pair
        s = self.strings[a] + self.strings[b]
        new = self.next_id
        self.next_id += 1
        self.vocab[s] = new
        self.strings.append(s)
        self.mergeable[s] = (self.score_of(self.n_new), new)
        self.n_new += 1
        touched = set(self.where.get(pair, ()))
        for k in range(1, len(s)):
            left, right = self.vocab.get(s[:k]), self.vocab.get(s[k:])
            if left is not None and right is not None and (left, right) != pair:
                touched |= self.where.get((left, right), set())
        for w in touched:
            seg = piece_closure(self.words[w], self.strings, pieces=self.mergeable)
            if len(seg) != len(self.words[w]):
                self._replace(w, seg)
        self._flush_changed()
        return LearnedMerge(a, b, new, count, True)


@dataclass(frozen=True, eq=False)
class PieceExtension:
    """What a SentencePiece extension adds to the base model, beyond :class:`~.extend.Extension`'s fields.

    ``pieces`` are appended in order with ``scores``; ``added_characters`` (the option to add characters missing
    from the base vocabulary first) are the first of them; ``missing_characters`` are the training characters the
    base vocabulary lacks (byte fallback), whether added or not.
    """

    pieces: tuple[str, ...]
    scores: tuple[float, ...]
    added_characters: tuple[str, ...]
    missing_characters: tuple[str, ...]
    rules: PieceRules
    lines: dict[str, tuple[int, ...]]

    def as_dict(self) -> dict:
        r = self.rules
        return {
            "piece_type": "NORMAL",
            "score_first": self.scores[0] if self.scores else None,
            "score_last": self.scores[-1] if self.scores else None,
            "trainer_spec": {
                "max_sentencepiece_length": r.max_length,
                "split_by_whitespace": r.split_by_whitespace,
                "split_digits": r.split_digits,
                "split_by_unicode_script": r.split_by_unicode_script,
                "split_by_number": r.split_by_number,
            },
            "target_script": r.target_script if not r.split_by_whitespace else None,
            "add_missing_characters": bool(self.added_characters),
            "missing_characters": "".join(self.missing_characters),
        }


@dataclass(frozen=True)
class LearnedPieces:
    """The learner's output: merges as string pairs with counts, the extension, base and final token counts."""

    merges: tuple[tuple[str, str], ...]
    counts: tuple[int, ...]
    extension: PieceExtension
    tokens_before: int
    tokens_after: int
    seconds: float


def _words(lines: list[list[str]], split_by_whitespace: bool) -> list[list[str]]:
    """Lines cut into the units no piece crosses: before every ``▁``-initial symbol when whitespace splits."""
    if not split_by_whitespace:
        return lines
    out = []
    for line in lines:
        cur: list[str] = []
        for s in line:
            if s.startswith(WS) and cur:
                out.append(cur)
                cur = []
            cur.append(s)
        if cur:
            out.append(cur)
    return out


def learn_pieces(
    base: ResolvedTokenizer,
    backend: SentencePieceBackend,
    *,
    texts: list[str],
    max_merges: int | None,
    min_freq: int,
    add_missing_characters: bool = False,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> LearnedPieces:
    """Continue ``base``'s BPE (``backend``: its SentencePiece model) on ``texts`` (see the module docstring); the
    pieces come in order of creation."""
    check_bpe_model(base, backend)
    start = time.perf_counter()
    proto = backend.model_proto()
    lines = backend.base_symbols(texts)
    rules = piece_rules(backend, lines)
    n_base = len(proto.pieces)
    taken = [p.piece for p in proto.pieces]
    mergeable = {p.piece: (p.score, i) for i, p in enumerate(proto.pieces) if p.type in (NORMAL, USER_DEFINED)}
    frozen = {i for i, p in enumerate(proto.pieces) if p.type != NORMAL}
    min_score = min(p.score for p in proto.pieces)
    base_ids = {s: i for i, s in enumerate(taken)}  # <unk> (no byte fallback) keeps its frozen base id
    missing = sorted({s for line in lines for s in line if s not in base_ids})
    strings = [*taken, *missing]
    ids = base_ids | {s: n_base + k for k, s in enumerate(missing)}
    line_words = [[tuple(ids[s] for s in w) for w in _words([line], rules.split_by_whitespace)] for line in lines]
    counts = Counter(w for ws in line_words for w in ws)
    word_index = {w: k for k, w in enumerate(counts)}
    words = [list(w) for w in counts]
    freqs = [counts[w] for w in counts]
    n_added = len(missing) if add_missing_characters else 0
    # generous upper bound on the number of pieces, so every score is fixed before learning starts
    bound = n_added + (
        max_merges if max_merges is not None else sum(len(w) * f for w, f in zip(words, freqs, strict=True))
    )
    scores = new_scores(min_score, bound)
    if add_missing_characters:
        for k, s in enumerate(missing):
            mergeable[s] = (scores[k], n_base + k)
    learner = PieceLearner(
        words, freqs, strings, mergeable, frozenset(frozen), frozenset(taken), rules, lambda k: scores[n_added + k]
    )
    learned = learner.run(max_merges, min_freq, on_progress)
    pieces = tuple(learner.strings[n_base + (0 if add_missing_characters else len(missing)) :])
    final = _final_ids(backend, learner, texts, line_words, word_index, len(missing), add_missing_characters)
    tokens_before = sum(len(x) for x in base.encode_batch(texts))
    ext = PieceExtension(
        pieces=pieces,
        scores=tuple(scores[: len(pieces)]),
        added_characters=tuple(missing) if add_missing_characters else (),
        missing_characters=tuple(missing),
        rules=rules,
        lines=final,
    )
    return LearnedPieces(
        merges=tuple((learner.strings[m.left], learner.strings[m.right]) for m in learned),
        counts=tuple(m.count for m in learned),
        extension=ext,
        tokens_before=tokens_before,
        tokens_after=sum(len(final[t]) for t in texts),
        seconds=time.perf_counter() - start,
    )


def _final_ids(
    backend: SentencePieceBackend,
    learner: PieceLearner,
    texts: list[str],
    lines: list[list[tuple[int, ...]]],
    word_index: dict[tuple[int, ...], int],
    n_missing: int,
    added: bool,
) -> dict[str, tuple[int, ...]]:
    """Each training text's ids under the extended model: the learner's words, missing characters as their UTF-8
    bytes (or, when added, as their new pieces), learned pieces renumbered right after the base pieces."""
    n_base = backend.vocab_size
    out: dict[str, tuple[int, ...]] = {}
    for text, words in zip(texts, lines, strict=True):
        ids_out: list[int] = []
        for w in words:
            for i in learner.words[word_index[w]]:
                if i < n_base or added:
                    ids_out.append(i)
                elif i < n_base + n_missing:
                    ids_out.extend(backend.piece_to_id(f"<0x{b:02X}>") for b in learner.strings[i].encode("utf-8"))
                else:
                    ids_out.append(i - n_missing)
        out[text] = tuple(ids_out)
    return out


def extended_model(backend: SentencePieceBackend, ext: PieceExtension) -> bytes:
    """The serialised extended ``.model``: the base ``ModelProto`` (of ``backend``) untouched, ``ext.pieces``
    appended as NORMAL."""
    proto = backend.model_proto()
    for piece, score in zip(ext.pieces, ext.scores, strict=True):
        new = proto.pieces.add()
        new.piece, new.score, new.type = piece, score, NORMAL
    return proto.SerializeToString()
