"""Learn a vocabulary extension: new byte-level BPE merges appended after a base tokenizer's merges.

Three families can be extended: ``tokenizers`` byte-level BPE (a ``tokenizer.json``), ``tiktoken`` (a ``.tiktoken``
rank file plus ``encoding.json``) and SentencePiece BPE (a ``.model``: new pieces appended, see :mod:`.extend_sp`).

The corpus is pre-tokenized exactly as the base tokenizer does it (its added tokens split off, its own
normalizer and pre-tokenizer), every distinct pre-token is segmented by the base BPE model (so Llama 3's
``ignore_merges`` and every base merge are honoured), and BPE continues from there on the word-frequency
dictionary. Base ids, base merges and their order never change; new tokens get ids after every existing id,
added and special tokens included (paper §6: "base vocabulary and merge list untouched, new byte-level merges
... appended so that base merges retain priority").

tiktoken bases: the corpus is split with the encoding's ``pat_str`` (the ``regex`` module runs the same pattern
as tiktoken; special-token text is ordinary text, as in ``encode_ordinary``), each distinct piece is segmented by
tiktoken itself, and learning continues with tiktoken's semantics (any adjacent pair whose joined bytes are a
token merges, lowest rank first; see :class:`~._bpe.RankLearner`). New tokens get new ranks after the largest id
in use, **special tokens included**: o200k_base's ranks end at 199,997 and its specials are 199,999 and 200,018,
so the first new rank is 200,019. Every base rank and every special id stays as it was; the ids left unused
(199,998 and 200,000-200,017) are gaps, which tiktoken accepts (``n_vocab`` is the largest id + 1, as for the
base). Numbering new ranks right after the last base rank instead would have to move ``<|endoftext|>``.

The base's back end picks its family's learner (:class:`Learners`); nothing here asks which family it holds.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache, partial
from pathlib import Path

import regex
from tokenizers import Tokenizer

from ..choices import DEFAULT_MIN_FREQ as DEFAULT_MIN_FREQ
from ..errors import BadInputError
from ..tokenization.base import ExtensionFamilies
from ..tokenization.bytelevel import BYTE_TO_CHAR, is_byte_level
from ..tokenization.hf import HFBackend
from ..tokenization.load import ResolvedTokenizer
from ..tokenization.long_text import SAFE_CHARS, engine_guard, unsure
from ..tokenization.pipeline import parse_pipeline, pipeline
from ..tokenization.pretoken_cache import PretokenEncoder
from ..tokenization.sentencepiece_family import SentencePieceBackend
from ..tokenization.tiktoken_family import TiktokenBackend, parse_rank_file, tiktoken_files
from ._bpe import PairLearner, RankLearner, Ranks
from .corpus import Corpus, ItemId, as_corpus
from .extend_sp import PieceExtension, learn_pieces


def check_extendable(base: ResolvedTokenizer) -> None:
    """Raise a one-line error unless ``base``'s family can be extended (``tokenizers`` byte-level BPE, tiktoken,
    SentencePiece; a SentencePiece Unigram model is refused when learning starts, saying why)."""
    learner_of(base)


def learner_of(base: ResolvedTokenizer) -> Learner:
    """How ``base``'s family learns an extension (:class:`Learners`), or a one-line error: it cannot be extended."""
    found = base.extension(LEARNERS)
    if found is None:
        raise BadInputError(
            f"{base.name} is a {base.family} tokenizer, which cannot be extended yet; extensions can be learned "
            "only for `tokenizers` byte-level BPE bases (a tokenizer.json such as qwen3-8b, llama-3.1-8b, "
            "deepseek-v3), `tiktoken` bases (a .tiktoken rank file such as gpt-4o, gpt-4) and SentencePiece BPE "
            "models (a .model such as gemma-3, llama-2)"
        )
    return found


@dataclass(frozen=True)
class SizeRule:
    """How many merges to learn, fixed before learning and blind to accuracy.

    ``size`` set: exactly that many merges (an error if the corpus cannot supply them at ``min_freq``);
    ``size`` unset: every merge whose pair occurs at least ``min_freq`` times; neither given: the default rule,
    every merge whose pair occurs at least :data:`DEFAULT_MIN_FREQ` times (a pair seen once is no evidence that
    the new token would be reused).
    """

    size: int | None
    min_freq: int

    @classmethod
    def of(cls, size: int | None = None, min_freq: int | None = None) -> SizeRule:
        """Check and complete the user's choice."""
        if size is None and min_freq is None:
            return cls(None, DEFAULT_MIN_FREQ)
        if size is not None and size < 1:
            raise BadInputError(f"extension size must be a positive number of merges, got {size}")
        if min_freq is not None and min_freq < 1:
            raise BadInputError(f"minimum pair frequency must be at least 1, got {min_freq}")
        return cls(size, min_freq if min_freq is not None else DEFAULT_MIN_FREQ)

    @property
    def name(self) -> str:
        return "fixed-count" if self.size is not None else "min-freq"

    def as_dict(self) -> dict:
        return {"rule": self.name, "size": self.size, "min_freq": self.min_freq}


@dataclass(frozen=True, eq=False)
class BaseBPE:
    """What learning and saving need from a base byte-level BPE ``tokenizer.json``."""

    text: str
    vocab: dict[str, int]
    merges: list[tuple[str, str]]
    merges_as_strings: bool
    ignore_merges: bool
    added: dict[int, str]

    @property
    def first_new_id(self) -> int:
        """One past the largest id in use, model vocabulary and added tokens together."""
        return max(max(self.vocab.values(), default=-1), max(self.added, default=-1)) + 1

    def strings(self) -> list[str]:
        """Byte-level string of every id below :attr:`first_new_id` (added tokens as their text)."""
        out = [""] * self.first_new_id
        for s, i in self.vocab.items():
            out[i] = s
        for i, s in self.added.items():
            out[i] = s
        return out

    def ranks(self) -> Ranks:
        """Base merges as ``(left id, right id) -> (rank, merged id)``."""
        v = self.vocab
        return {(v[a], v[b]): (r, v[a + b]) for r, (a, b) in enumerate(self.merges)}


@dataclass(frozen=True, eq=False)
class BaseTiktoken:
    """What learning and saving need from a base tiktoken encoding (rank file bytes and ``encoding.json``)."""

    rank_file: Path
    rank_data: bytes
    spec: dict
    ranks: dict[bytes, int]

    @property
    def pat_str(self) -> str:
        return self.spec["pat_str"]

    @property
    def specials(self) -> dict[str, int]:
        return dict(self.spec.get("special_tokens", {}))

    @property
    def n_merges(self) -> int:
        """Ranks that are merges (every rank longer than one byte)."""
        return sum(len(b) > 1 for b in self.ranks)

    @property
    def first_new_id(self) -> int:
        """One past the largest id in use, ranks and special tokens together."""
        return max(max(self.ranks.values()), max(self.specials.values(), default=-1)) + 1

    def strings(self) -> list[bytes]:
        """Bytes of every id below :attr:`first_new_id` (special tokens as their text, unused ids empty)."""
        out = [b""] * self.first_new_id
        for b, i in self.ranks.items():
            out[i] = b
        for text, i in self.specials.items():
            out[i] = text.encode("utf-8")
        return out


@lru_cache(maxsize=4)
def base_tiktoken(base: ResolvedTokenizer) -> BaseTiktoken:
    """Read a tiktoken base's rank file and ``encoding.json`` (the files it was loaded from)."""
    if base.path is None:
        raise BadInputError(f"{base.name} is not a tiktoken encoding loaded from a .tiktoken file")
    spec_file = tiktoken_files(base.path)
    data = base.path.read_bytes()
    return BaseTiktoken(
        base.path, data, json.loads(spec_file.read_text(encoding="utf-8")), parse_rank_file(data, base.path)
    )


def tiktoken_words(
    base: ResolvedTokenizer, backend: TiktokenBackend, *, texts: Iterable[str]
) -> tuple[list[str], list[list[int]], list[int]]:
    """Distinct ``pat_str`` pieces of ``texts``, each segmented once by the base tiktoken encoding, and counts."""
    pattern = regex.compile(base_tiktoken(base).pat_str)
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(m.group() for m in pattern.finditer(text))
    strings = [w for w in counts if w]
    return strings, [backend.encode_pretoken(w) for w in strings], [counts[w] for w in strings]


@lru_cache(maxsize=4)
def base_bpe(base: ResolvedTokenizer) -> BaseBPE:
    """Parse and check the base tokenizer: byte-level BPE, no dropout, no word prefixes or suffixes."""
    check_extendable(base)
    hf = base.require_hf("extending a byte-level BPE vocabulary")
    pipe = parse_pipeline(base.path.read_text(encoding="utf-8")) if base.path is not None else pipeline(hf)
    model, kind = pipe.model, pipe.model_type
    if kind != "BPE":
        raise BadInputError(f"{base.name}: only byte-level BPE tokenizers can be extended; its model is {kind}")
    if "ByteLevel" not in pipe.pre_tokenizer_types or not is_byte_level(hf):
        beside = None if base.path is None else base.path.with_name("tokenizer.model")
        raise BadInputError(
            f"{base.name}: a BPE tokenizer.json without a byte-level pre-tokenizer and decoder (e.g. SentencePiece "
            "BPE converted for transformers) cannot be extended as it is"
            + (f"; extend the SentencePiece model beside it: --model {beside}" if beside and beside.is_file() else "")
        )
    if model.get("dropout"):
        raise BadInputError(f"{base.name}: BPE dropout is on (segmentation is random); cannot extend it")
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise BadInputError(f"{base.name}: BPE with subword prefixes/suffixes is not byte-level; cannot extend it")
    raw = model.get("merges") or []
    as_strings = bool(raw) and isinstance(raw[0], str)
    merges = [tuple(m.split(" ", 1)) if as_strings else tuple(m) for m in raw]
    return BaseBPE(
        text=pipe.text,
        vocab=dict(model["vocab"]),
        merges=merges,
        merges_as_strings=as_strings,
        ignore_merges=bool(model.get("ignore_merges")),
        added={t["id"]: t["content"] for t in pipe.added_tokens},
    )


def _added_pattern(tokens) -> re.Pattern[str] | None:
    # tokenizers matches added tokens leftmost-longest before pre-tokenization; longest-first alternation does it
    parts = []
    for tok in sorted(tokens, key=lambda t: len(t.content), reverse=True):
        body = re.escape(tok.content)
        if tok.single_word:
            body = rf"(?<!\w){body}(?!\w)"
        parts.append((r"\s*" if tok.lstrip else "") + body + (r"\s*" if tok.rstrip else ""))
    return re.compile("|".join(parts)) if parts else None


class PreTokenizer:
    """The base tokenizer's own split of text into pre-tokens (byte-level strings), added tokens removed."""

    def __init__(self, tok: Tokenizer) -> None:
        added = list(tok.get_added_tokens_decoder().values())
        self._raw = _added_pattern([t for t in added if not t.normalized])
        self._normalized = _added_pattern([t for t in added if t.normalized])
        self._normalizer = tok.normalizer
        self._pre = tok.pre_tokenizer
        self._tok = tok
        self._long: PretokenEncoder | None = None  # built for the first part longer than SAFE_CHARS

    def pieces(self, text: str) -> list[str]:
        """Pre-tokens of ``text`` in order."""
        out: list[str] = []
        for raw in self._raw.split(text) if self._raw is not None else (text,):
            if not raw:
                continue
            norm = self._normalizer.normalize_str(raw) if self._normalizer is not None else raw
            for part in self._normalized.split(norm) if self._normalized is not None else (norm,):
                if part:
                    out.extend(self._split(part))
        return out

    def _split(self, part: str) -> list[str]:
        """Pre-tokens of a normalized part holding no added token: the library's, except that a part longer than
        its regex engine can split (:mod:`~mindcap_tok.tokenization.long_text`) is split by the ``regex`` module
        where :class:`~mindcap_tok.tokenization.pretoken_cache.PretokenEncoder` reproduces the pipeline, to the
        same pre-tokens."""
        if len(part) > SAFE_CHARS and not unsure(part):
            if self._long is None:
                self._long = PretokenEncoder.from_tokenizer(self._tok)
            if self._long is not None:
                return ["".join(BYTE_TO_CHAR[b] for b in p.encode("utf-8")) for p in self._long.split(part)]
        return engine_guard(lambda: [p for p, _ in self._pre.pre_tokenize_str(part)], [part])


def pre_token_counts(tok: Tokenizer, texts: Iterable[str]) -> Counter[str]:
    """How often each distinct pre-token occurs in ``texts`` (the word-frequency dictionary)."""
    pre = PreTokenizer(tok)
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(pre.pieces(text))
    return counts


def base_words(tok: Tokenizer, texts: Iterable[str]) -> tuple[list[str], list[list[int]], list[int]]:
    """Distinct pre-tokens of ``texts``, each segmented once by the base BPE model, and their frequencies."""
    counts = pre_token_counts(tok, texts)
    strings = list(counts)
    model = tok.model
    return strings, [[t.id for t in model.tokenize(w)] for w in strings], [counts[w] for w in strings]


@dataclass(frozen=True, eq=False)
class Extension:
    """Merges learned on a corpus, to append after a base tokenizer's merges.

    ``merges[k]`` joins two byte-level strings (tiktoken bases: two ``bytes``); ``new_tokens`` are the strings
    (tiktoken: bytes) that were not in the base vocabulary, with ids ``first_new_id, first_new_id + 1, ...`` in
    order of creation. ``segmentation`` is the learner's final segmentation of every distinct training pre-token
    (what the saved tokenizer must produce); ``tokens_before``/``tokens_after`` count the training text's tokens
    (added tokens excluded) under the base and the extended segmentation.
    """

    base: ResolvedTokenizer
    corpus: dict
    size_rule: SizeRule
    merges: tuple[tuple[str, str], ...] | tuple[tuple[bytes, bytes], ...]
    merge_counts: tuple[int, ...]
    new_tokens: tuple[str, ...] | tuple[bytes, ...]
    first_new_id: int
    segmentation: dict[str, tuple[int, ...]] = field(repr=False)
    word_counts: dict[str, int] = field(repr=False)
    tokens_before: int = 0
    tokens_after: int = 0
    seconds: float = 0.0
    #: SentencePiece bases: the appended pieces, their scores and rules (``segmentation`` is then per text)
    pieces: PieceExtension | None = field(default=None, repr=False)

    @property
    def n_merges(self) -> int:
        return len(self.merges)

    @property
    def n_new_tokens(self) -> int:
        return len(self.new_tokens)

    @property
    def family(self) -> str:
        """The base's (and the extension's) tokenizer family."""
        return self.base.family

    @cached_property
    def tokenizer(self) -> Tokenizer:
        """The extended Hugging Face tokenizer, built in memory (see :func:`tokenizer_json`).

        ``tokenizers`` bases only; any family: :func:`.saved.resolved`.
        """
        return Tokenizer.from_str(tokenizer_json(self))


def tokenizer_json(ext: Extension) -> str:
    """The extended ``tokenizer.json`` text: base vocabulary and merges untouched, new ones appended.

    Added tokens are also written into the model vocabulary at their own ids. Without that the vocabulary would
    have a gap below the new ids, and ``tokenizers`` re-numbers added tokens that are missing from the model
    vocabulary from ``len(vocab)`` on load, which would silently move every special token (ENVIRONMENT.md).
    """
    info = base_bpe(ext.base)
    data = json.loads(info.text)
    model = data["model"]
    vocab = model["vocab"]
    for i, content in sorted(info.added.items()):
        vocab.setdefault(content, i)
    for k, s in enumerate(ext.new_tokens):
        vocab[s] = ext.first_new_id + k
    merges: Sequence[tuple[str, str]] = ext.merges  # type: ignore[assignment]  # a tokenizer.json's merges are str
    model["merges"].extend(f"{a} {b}" if info.merges_as_strings else [a, b] for a, b in merges)
    return json.dumps(data, ensure_ascii=False)


def learn_extension(
    base: ResolvedTokenizer,
    corpus_items: Corpus | Iterable[tuple[ItemId, str]],
    *,
    size: int | None = None,
    min_freq: int | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
    add_missing_characters: bool = False,
) -> Extension:
    """Learn new merges on ``corpus_items`` (``(item_id, text)`` pairs), continuing ``base``'s BPE.

    ``size`` fixes the number of merges (an error if the corpus cannot supply that many pairs occurring at least
    ``min_freq`` times, default 2); ``min_freq`` alone learns every merge down to that pair frequency.
    ``on_progress(merges, size)`` is called every 100 merges (``size`` None under a frequency rule).
    ``add_missing_characters`` (SentencePiece bases only) first appends every training character the base
    vocabulary lacks as a single-character piece, so that ``transformers`` can reach pieces built from them.
    """
    learn = learner_of(base)
    rule = SizeRule.of(size, min_freq)
    corpus = as_corpus(corpus_items)
    if not corpus.items:
        raise BadInputError(f"corpus {corpus.name!r} is empty")
    return learn(base, corpus, rule, on_progress, add_missing_characters)


#: a progress callback: ``on_progress(merges, size)``
Progress = Callable[[int, int | None], None] | None
#: what every family's learner is called with: base, corpus, size rule, progress callback, add_missing_characters
Learner = Callable[[ResolvedTokenizer, Corpus, SizeRule, Progress, bool], Extension]


class Learners(ExtensionFamilies[Learner]):
    """Each family's learner: BPE continued on the base's own pre-tokens with that family's merge semantics."""

    def merges(self, backend: HFBackend) -> Learner:
        return partial(_learn_merges, backend)

    def ranks(self, backend: TiktokenBackend) -> Learner:
        return partial(_learn_ranks, backend)

    def pieces(self, backend: SentencePieceBackend) -> Learner:
        return partial(_learn_pieces, backend)


LEARNERS = Learners()


def _learn_merges(
    backend: HFBackend, base: ResolvedTokenizer, corpus: Corpus, rule: SizeRule, on_progress: Progress, _: bool
) -> Extension:
    """New byte-level BPE merges, ranked after every base merge (``tokenizers``)."""
    start = time.perf_counter()
    info = base_bpe(base)
    segmented = base_words(backend.hf, corpus.texts())
    strings: list = info.strings()

    def make(words: list[list[int]], freqs: list[int], first_new: int) -> PairLearner:
        return PairLearner(words, freqs, strings, dict(info.vocab), first_new, len(info.merges), info.ranks)

    return _learn_pairs(base, corpus, rule, on_progress, start, segmented, strings, make)


def _learn_ranks(
    backend: TiktokenBackend, base: ResolvedTokenizer, corpus: Corpus, rule: SizeRule, on_progress: Progress, _: bool
) -> Extension:
    """New tiktoken ranks after the largest id in use, learned with tiktoken's merge rule."""
    start = time.perf_counter()
    tinfo = base_tiktoken(base)
    segmented = tiktoken_words(base, backend, texts=corpus.texts())
    strings: list = tinfo.strings()
    word_bytes = [w.encode("utf-8") for w in segmented[0]]

    def make(words: list[list[int]], freqs: list[int], first_new: int) -> PairLearner:
        return RankLearner(words, freqs, strings, dict(tinfo.ranks), first_new, word_bytes)

    return _learn_pairs(base, corpus, rule, on_progress, start, segmented, strings, make)


def _learn_pairs(
    base: ResolvedTokenizer,
    corpus: Corpus,
    rule: SizeRule,
    on_progress: Progress,
    start: float,
    segmented: tuple[list[str], list[list[int]], list[int]],
    strings: list,
    make: Callable[[list[list[int]], list[int], int], PairLearner],
) -> Extension:
    """Continue BPE on the base segmentation of every distinct pre-token (``segmented``: strings, ids, counts)."""
    word_strings, words, freqs = segmented
    if not words:
        raise BadInputError(f"corpus {corpus.name!r} has no text to learn from (only blank lines or added tokens)")
    tokens_before = sum(len(seg) * f for seg, f in zip(words, freqs, strict=True))
    first_new = len(strings)
    bpe = make(words, freqs, first_new)
    learned = bpe.run(rule.size, rule.min_freq, on_progress)
    _check_size(corpus, rule, len(learned))
    seconds = time.perf_counter() - start
    return Extension(
        base=base,
        corpus=corpus.identity(),
        size_rule=rule,
        merges=tuple((strings[m.left], strings[m.right]) for m in learned),
        merge_counts=tuple(m.count for m in learned),
        new_tokens=tuple(strings[first_new:]),
        first_new_id=first_new,
        segmentation={w: tuple(seg) for w, seg in zip(word_strings, bpe.words, strict=True)},
        word_counts=dict(zip(word_strings, freqs, strict=True)),
        tokens_before=tokens_before,
        tokens_after=sum(len(seg) * f for seg, f in zip(bpe.words, freqs, strict=True)),
        seconds=seconds,
    )


def _check_size(corpus: Corpus, rule: SizeRule, learned: int) -> None:
    if rule.size is not None and learned < rule.size:
        raise BadInputError(
            f"corpus {corpus.name!r} supports only {learned} merges of pairs seen at least {rule.min_freq} "
            f"times; asked for {rule.size} (use a smaller size, a lower minimum frequency or more text)"
        )


def _learn_pieces(
    backend: SentencePieceBackend,
    base: ResolvedTokenizer,
    corpus: Corpus,
    rule: SizeRule,
    on_progress: Callable[[int, int | None], None] | None,
    add_missing_characters: bool,
) -> Extension:
    """A SentencePiece extension (see :mod:`.extend_sp`); ``segmentation`` maps each training text to its ids."""
    texts = corpus.texts()
    got = learn_pieces(
        base,
        backend,
        texts=texts,
        max_merges=rule.size,
        min_freq=rule.min_freq,
        add_missing_characters=add_missing_characters,
        on_progress=on_progress,
    )
    _check_size(corpus, rule, len(got.merges))
    return Extension(
        base=base,
        corpus=corpus.identity(),
        size_rule=rule,
        merges=got.merges,
        merge_counts=got.counts,
        new_tokens=got.extension.pieces,
        first_new_id=base.vocab_size,
        segmentation=got.extension.lines,
        word_counts=dict(Counter(texts)),
        tokens_before=got.tokens_before,
        tokens_after=got.tokens_after,
        seconds=got.seconds,
        pieces=got.extension,
    )
