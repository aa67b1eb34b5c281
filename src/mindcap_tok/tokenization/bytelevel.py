"""GPT-2's byte <-> printable-character table and the bytes of every id of a Hugging Face ``tokenizer.json``."""

from __future__ import annotations

import json

from tokenizers import Tokenizer


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's byte <-> printable-character table, which every byte-level BPE uses.
    # tokenizers does not expose it, so it is rebuilt here (it is 10 lines of public spec).
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = keep[:]
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(keep, map(chr, chars), strict=True))


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# str.translate table: byte-level symbol -> the Latin-1 character of its byte, so ``.encode("latin-1")`` gives bytes
TO_LATIN1 = {ord(c): b for c, b in CHAR_TO_BYTE.items()}


def is_byte_level(tok: Tokenizer) -> bool:
    """True when the tokenizer decodes with the byte-level decoder (GPT-2 style BPE)."""
    if tok.decoder is None:
        return False
    dec = json.loads(tok.decoder.__getstate__())
    types = [dec.get("type")] + [d.get("type") for d in dec.get("decoders", [])]
    return "ByteLevel" in types


def token_bytes(tok: Tokenizer) -> list[bytes]:
    """The bytes each id decodes to: byte-level symbols mapped back to bytes, added tokens as their text.

    Decoding a sequence of ids yields the concatenation of these bytes, so the byte length of a prefix
    of B tokens is a cumulative sum (later stages score budgets by byte position).
    """
    n = tok.get_vocab_size(with_added_tokens=True)
    out: list[bytes] = [b""] * n
    added_tokens = tok.get_added_tokens_decoder()
    if is_byte_level(tok):
        for piece, i in tok.get_vocab(with_added_tokens=False).items():
            if i in added_tokens:  # also in the model vocab (DeepSeek-V3's specials): set below, as text
                continue
            out[i] = piece.translate(TO_LATIN1).encode("latin-1")
    else:
        for i in range(n):
            out[i] = tok.decode([i], skip_special_tokens=False).encode("utf-8")
    for i, added in added_tokens.items():
        out[i] = added.content.encode("utf-8")
    return out


def piece_ids(tok: Tokenizer, data: bytes) -> list[int]:
    """The ids a byte-level BPE model gives ``data`` as one pre-token: its merges alone, with no normalizer or
    pre-tokenizer (what a new token's bytes encode to under the base vocabulary, whatever text surrounds them)."""
    return [t.id for t in tok.model.tokenize("".join(BYTE_TO_CHAR[b] for b in data))]
