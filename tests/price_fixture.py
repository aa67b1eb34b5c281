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
    vocab[EOS] = len(vocab)  # special token id 259 in both, so the new token takes 260 (as issue 3 numbers it)
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
