"""What kind of token an id is, for the premium's diagnostics: whole characters, byte fallback, or unknown.

Each family defines byte fallback by its own means (the back end's ``token_classes``):

- SentencePiece: the ``<0xNN>`` byte pieces (``is_byte``), whatever byte they hold; the unknown piece (``is_unknown``).
- byte-level BPE (``tokenizers``) and tiktoken: a token whose bytes do not decode as UTF-8 on their own, i.e. that
  does not hold whole characters (a split character's lead or continuation bytes, alone or next to whole ones);
  a ``tokenizer.json`` with ``byte_fallback`` also counts its ``<0xNN>`` pieces, and its model's ``unk_token`` is
  the unknown token.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

#: a token of whole characters, a byte-fallback token, the unknown token
WHOLE, BYTE_FALLBACK, UNKNOWN = 0, 1, 2


def utf8_classes(token_bytes: Iterable[bytes]) -> np.ndarray:
    """int8 per id: :data:`BYTE_FALLBACK` where the token's bytes are not whole UTF-8 characters, else :data:`WHOLE`."""
    out = []
    for b in token_bytes:
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            out.append(BYTE_FALLBACK)
        else:
            out.append(WHOLE)
    return np.array(out, dtype=np.int8)
