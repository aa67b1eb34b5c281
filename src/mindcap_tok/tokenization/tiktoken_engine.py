"""A byte-level BPE ``tokenizer.json`` run by tiktoken (same ids, about three times faster), when its pipeline is
one tiktoken runs exactly (:func:`tiktoken_engine`)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..errors import MindcapError, first_line
from .base import TokenizerBackend
from .bytelevel import CHAR_TO_BYTE, TO_LATIN1
from .long_text import tiktoken_ordinary
from .pipeline import pipeline


class TiktokenEngine:
    """A byte-level BPE ``tokenizer.json`` run by tiktoken: the ids ``tokenizers`` gives (see :func:`tiktoken_engine`).

    As in ``tokenizers``, an added token found in the text is one token whatever ``add_special_tokens`` says, and
    the normaliser (NFC or none) applies to the text between added tokens.
    """

    family = "tiktoken"

    def __init__(self, enc: Any, nfc: bool, added: dict[str, int]) -> None:
        self.enc = enc
        self.nfc = nfc
        self.added = dict(added)
        # longest first: re's leftmost match then takes the longest token, as tokenizers' matcher does
        longest_first = sorted(self.added, key=len, reverse=True)
        self._added_re = re.compile("|".join(map(re.escape, longest_first))) if self.added else None

    def _normalize(self, text: str) -> str:
        return unicodedata.normalize("NFC", text) if self.nfc else text

    def _encode_with_added(self, text: str) -> list[int]:
        ids: list[int] = []
        start = 0
        assert self._added_re is not None  # called only when the tokenizer has added tokens
        for m in self._added_re.finditer(text):
            ids += tiktoken_ordinary(self.enc, [self._normalize(text[start : m.start()])])[0]
            ids.append(self.added[m.group()])
            start = m.end()
        return ids + tiktoken_ordinary(self.enc, [self._normalize(text[start:])])[0]

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` (no post-processor: no BOS/EOS)."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of every text: one threaded ``encode_ordinary_batch`` for the texts without added tokens."""
        texts = list(texts)
        with_added: set[int] = set()
        # one search over all texts first: per-text searches only when some added token occurs somewhere
        if self._added_re is not None and self._added_re.search("\x00".join(texts)):
            with_added = {i for i, t in enumerate(texts) if self._added_re.search(t)}
        plain = iter(
            tiktoken_ordinary(self.enc, [self._normalize(t) for i, t in enumerate(texts) if i not in with_added])
        )
        return [self._encode_with_added(t) if i in with_added else next(plain) for i, t in enumerate(texts)]

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """int64 token count of every text."""
        ids = self.encode_batch(texts)
        return np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))


# text the two libraries must encode alike before the engine is used: scripts, digits, spacing, contractions, emoji
_PROBE = [
    "Hello world, it's 2024: 12345 items cost $3.50!\n\n  Next\tline\r\nend   ",
    "ภาษาไทย ไม่มีช่องว่าง Kiswahili ni lugha; Deutsch: Größe, Straße. 中文测试，日本語のテキスト。한국어 문장",
    "e\u0301 \u0915\u094d\u0937 \U0001f469\u200d\U0001f4bb \U0001f1f0\U0001f1ea 'LL 'Re I'M ǅ ٣٤٥ \u00a0\u2003x\u3000y",
    "def f(x):\n    return x**2  # comment\n\n\n\t\t}",
]


_N_CATEGORIES = 28  # Unicode general categories other than Cs and Cn


def _probe_texts(added: Sequence[str]) -> list[str]:
    # one character of every Unicode general category (surrogates and unassigned left out) and each added token
    seen: dict[str, str] = {}
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat not in ("Cs", "Cn"):
            seen.setdefault(cat, chr(cp))
            if len(seen) == _N_CATEGORIES:
                break
    return [*_PROBE, " ".join(seen.values()), "".join(seen.values()), *(f"a{t}b {t}" for t in added)]


class NotEligible(MindcapError):
    """A ``tokenizer.json`` whose pipeline tiktoken cannot run exactly."""

    names_source = False  # its message stands alone (no spec file named in front)


def _check(condition: bool, reason: str) -> None:
    if not condition:
        raise NotEligible(f"not run by tiktoken: {reason}")


def _merge_pairs(merges: list[list[str] | str]) -> list[tuple[str, ...]]:
    # tokenizers stores merges as [a, b] pairs (>= 0.20) or as "a b" strings
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in merges]


def _byte_level_ranks(model: dict[str, Any], added_ids: set[int]) -> dict[bytes, int]:
    """Token bytes -> id for a byte-level BPE vocab (added tokens left out: they are matched before BPE), after
    checking that tiktoken's BPE (merge the adjacent pair whose concatenation has the lowest id) is the merges'.
    """

    vocab = {piece: i for piece, i in model["vocab"].items() if i not in added_ids}
    _check(set("".join(vocab)) <= CHAR_TO_BYTE.keys(), "the vocabulary is not byte-level")
    ranks = {piece.translate(TO_LATIN1).encode("latin-1"): i for piece, i in vocab.items()}
    _check(all(bytes([b]) in ranks for b in range(256)), "some byte has no token")
    merges = _merge_pairs(model["merges"])
    made = [vocab.get(a + b, -1) if a in vocab and b in vocab else -1 for a, b in merges]
    bad = next((m for m, ab in zip(merges, made, strict=True) if ab < 0), None)
    _check(bad is None, f"merge {bad} is not of tokens into a token")
    bad = next((m for m, ab, before in zip(merges[1:], made[1:], made, strict=False) if ab < before), None)
    _check(bad is None, f"merge {bad} is out of the order of the ids the merges make")
    pairs = set(merges)
    if model.get("ignore_merges"):
        # tiktoken may merge any adjacent pair whose concatenation is a token: every such split must be a merge,
        # so both libraries see the same pairs and take them in the same order (by the id they make)
        splits = ((p[:k], p[k:]) for p in vocab for k in range(1, len(p)))
        bad = next((s for s in splits if s[0] in vocab and s[1] in vocab and s not in pairs), None)
        _check(bad is None, f"{bad} makes a token but is no merge")
    else:
        # one merge per token, each above its parts: with "every token is its own BPE" (checked by the caller),
        # tiktoken then only ever merges the one merge of each token it makes
        _check(len(pairs) == len(set(made)), "several merges make one token")
        bad = next((m for m, ab in zip(merges, made, strict=True) if ab <= max(vocab[m[0]], vocab[m[1]])), None)
        _check(bad is None, f"merge {bad} makes an id below its parts'")
    return ranks


def tiktoken_engine(tok: Tokenizer) -> TiktokenEngine:
    """``tok`` as a tiktoken encoding, or :class:`NotEligible` naming what tiktoken cannot run exactly.

    Written here: neither library converts a ``tokenizer.json`` into a tiktoken ``Encoding``.

    Eligible: normaliser none or NFC (applied here, with Python's ``unicodedata``); pre-tokeniser
    ``Sequence[Split(regex, Isolated), ByteLevel(add_prefix_space=false, use_regex=false)]`` (the regex becomes
    tiktoken's ``pat_str``); model BPE without dropout, byte fallback or subword affixes, over a byte-level
    vocabulary holding every byte; the merges are listed in the order of the id they make, so tiktoken's
    lowest-rank-first order (rank = id) is the merge order. tiktoken merges every adjacent pair that makes a
    token and looks whole pieces up first: with ``ignore_merges`` (Llama 3.x) every such split must be a merge;
    without it (Qwen), each token has one merge, its id above its parts', and must be its own BPE. Added tokens: plain
    strings (no lstrip/rstrip/single_word), matched before normalising, outside the vocabulary. No truncation
    or padding. Last, both libraries must give the same ids on a probe text (one character of every Unicode
    category, several scripts, spacing, the added tokens): this catches regex-dialect differences (tokenizers
    runs Oniguruma, tiktoken fancy-regex). Characters newer than Python's Unicode tables are not covered by the
    probe; the tests check identical counts on all of FLORES-200.
    """
    pipe = pipeline(tok)
    model, norm, norms, steps = pipe.model, pipe.normalizer, pipe.normalizers, pipe.pre_tokenizers
    _check(model.get("type") == "BPE", f"model {model.get('type')}, not BPE")
    _check(not model.get("dropout"), "BPE dropout")
    _check(not model.get("byte_fallback"), "byte fallback")
    _check(not model.get("continuing_subword_prefix") and not model.get("end_of_word_suffix"), "subword affixes")
    _check(len(norms) <= 1 and all(n.get("type") == "NFC" for n in norms), f"normaliser {norm}")
    _check(
        len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel",
        "pre-tokeniser is not one Split then ByteLevel",
    )
    split, byte_level = steps
    _check(
        "Regex" in split["pattern"] and split.get("behavior") == "Isolated" and not split.get("invert"),
        "Split is not an isolating regex",
    )
    _check(
        byte_level.get("add_prefix_space", True) is False and byte_level.get("use_regex", True) is False,
        "ByteLevel adds a space or splits",
    )
    _check(tok.truncation is None and tok.padding is None and not tok.encode_special_tokens, "truncation or padding")
    added = tok.get_added_tokens_decoder()
    _check(
        all(not (t.lstrip or t.rstrip or t.single_word or (t.normalized and norms)) for t in added.values()),
        "an added token strips spaces, matches single words or is matched after normalising",
    )
    ranks = _byte_level_ranks(model, set(added))
    if not model.get("ignore_merges"):
        # tokenizers' own BPE over each token's characters, as one word (no normaliser, no pre-tokeniser)
        words = list(model["vocab"])
        bpe = Tokenizer(tok.model).encode_batch_fast(words, add_special_tokens=False)
        _check(all(e.ids == [model["vocab"][w]] for w, e in zip(words, bpe, strict=True)), "a token is not its own BPE")
    specials = {t.content: i for i, t in added.items()}
    try:
        import tiktoken

        enc = tiktoken.Encoding(
            "tokenizer.json", pat_str=split["pattern"]["Regex"], mergeable_ranks=ranks, special_tokens={}
        )
    except Exception as exc:  # tiktoken raises ValueError (a regex fancy-regex rejects) or panics
        raise NotEligible(f"not run by tiktoken: {first_line(exc)}") from exc
    engine = TiktokenEngine(enc, nfc=bool(norms), added=specials)
    probe = _probe_texts(list(specials))
    reference = [e.ids for e in tok.encode_batch(probe, add_special_tokens=False)]
    _check(engine.encode_batch(probe) == reference, "tiktoken and tokenizers disagree on the probe text")
    return engine


#: what counts tokens: a back end, or the faster exact engine for a tokenizer.json
Counter = TokenizerBackend | TiktokenEngine
