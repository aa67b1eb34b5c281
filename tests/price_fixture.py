"""A hand-computable world for pricing tests: a tiny byte-level BPE and traces whose answer positions are known.

Base tokenizer: the 256 byte symbols plus three merges that make ``ก`` and ``า`` one token each (their UTF-8
bytes are E0 B8 81 and E0 B8 B2). The extension appends one merge, ``ก`` + ``า`` -> ``กา``. Thai has no spaces,
so a run ``กากา...`` is one pre-token, and a trace ``"กา" * k + "\\n#### v"`` has

- base: ``2k + 7`` tokens (``\\n``, four ``#``, space and the digit are byte tokens), answer complete at 2k+7;
- extended: ``k + 7`` tokens, answer complete at k+7: the merge halves the Thai part.

English traces (``"ab" * k + ...``) have no merge at all, so the extension leaves them alone.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from mindcap_tok.adaptation.retokenize import FoldTokenizer
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.bytelevel import BYTE_TO_CHAR
from mindcap_tok.tokenization.load import ResolvedTokenizer, load_tokenizer

EOS = "<|endoftext|>"


def byte_string(text: str) -> str:
    """The byte-level symbols of ``text`` (what a byte-level BPE vocabulary stores)."""
    return "".join(BYTE_TO_CHAR[b] for b in text.encode("utf-8"))


def _tokenizer(extra_merges: int) -> Tokenizer:
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    merges: list[tuple[str, str]] = []

    def add(a: str, b: str) -> None:
        merges.append((a, b))
        vocab.setdefault(a + b, len(vocab))

    ko, aa = byte_string("ก"), byte_string("า")
    add(ko[0], ko[1])
    add(ko[:2], ko[2])
    add(aa[:2], aa[2])
    vocab[EOS] = len(
        vocab
    )  # special token id 259 in both, so the new token takes 260 (as the worked example numbers it)
    if extra_merges:
        add(ko, aa)
    tok = Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS])
    return tok


def save_tiny(folder: Path, extended: bool = False) -> ResolvedTokenizer:
    """Write the tiny base (or hand-extended) tokenizer to ``folder/tokenizer.json`` and load it."""
    folder.mkdir(parents=True, exist_ok=True)
    _tokenizer(1 if extended else 0).save(str(folder / "tokenizer.json"))
    return load_tokenizer(str(folder))


def thai_trace(k: int, value: int) -> str:
    """``k`` copies of กา, then the answer line: 2k+7 base tokens, k+7 extended tokens."""
    return "กา" * k + f"\n#### {value}"


def english_trace(k: int, value: int) -> str:
    """``k`` copies of ``ab``, then the answer line: 2k+7 tokens under both tokenizers."""
    return "ab" * k + f"\n#### {value}"


# -- the pricing world of test_price: a ledger of traces whose answer positions are known ------------------------

B_MAX, GOLD, WRONG = 64, 7, 3
NATIVE_TYPES = {"A": (5, GOLD), "B": (15, GOLD), "C": (20, GOLD), "D": (28, GOLD), "E": (12, WRONG), "F": (40, None)}
NATIVE_PLAN = ["AA", "AA", "BA", "BA", "CE", "DA", "DA", "EE", "FF", "AF"]
TRANSLATE_PLAN = ["SS", "SS", "SS", "SS", "SS", "PS", "PS", "LW", "SS", "SS"]


def native_text(kind: str) -> str:
    """A NATIVE trace of type ``kind`` (Thai)."""
    k, value = NATIVE_TYPES[kind]
    return "กา" * k if value is None else thai_trace(k, value)


def translate_text(kind: str) -> str:
    """A TRANSLATE-ACT trace of type ``kind`` (English, or a Thai preamble for ``P``)."""
    if kind == "P":
        return "กา" * 10 + english_trace(6, GOLD)
    k, value = {"S": (5, GOLD), "L": (20, GOLD), "W": (5, WRONG)}[kind]
    return english_trace(k, value)


ARMS = (("native", NATIVE_PLAN, native_text), ("translate-act", TRANSLATE_PLAN, translate_text))


def price_record(tok, arm: str, item: int, sample: int, text: str) -> dict:
    """A stored record of ``text`` (ids cut at :data:`B_MAX`) in the ``tiny`` world."""
    ids = tok.tokenizer.encode(text, add_special_tokens=False).ids[:B_MAX]
    return {
        "model": "tiny",
        "arm": arm,
        "lang": "tha_Thai",
        "item": item,
        "sample": sample,
        "seed": sample,
        "cap": B_MAX,
        "prompt": f"question {item}",
        "prompt_ids": [1, 2],
        "output_ids": ids,
        "text": tok.tokenizer.decode(ids),
        "finish_reason": "length" if len(ids) >= B_MAX else "stop",
        "gold": GOLD,
        "generator": "hand",
        "tokenizer": "tiny",
    }


def price_world(root: Path) -> tuple[Ledger, ResolvedTokenizer, ResolvedTokenizer, list[FoldTokenizer]]:
    """The ledger of both arms' plans under ``root``, the base and extended tokenizers, and two folds of the
    extension (items 0-4 and 5-9)."""
    base, ext = save_tiny(root / "base"), save_tiny(root / "ext", extended=True)
    records = []
    for arm, plan, text_of in ARMS:
        for item, kinds in enumerate(plan):
            records += [price_record(base, arm, item, s, text_of(kind)) for s, kind in enumerate(kinds)]
    ledger = Ledger(root / "ledger")
    ledger.append(records, tokenizer=base)
    folds = [FoldTokenizer(ext, frozenset(range(5)), 0), FoldTokenizer(ext, frozenset(range(5, 10)), 1)]
    return ledger, base, ext, folds
