"""A tokenizer with some of its tokenizer.json fields changed: for tests of what a pipeline check accepts."""

from __future__ import annotations

import json

from tokenizers import Tokenizer


def edited(tok: Tokenizer, **changes) -> Tokenizer:
    """``tok`` with each ``path=value`` set in its JSON (``pre_tokenizer__pretokenizers__0__behavior``: keys
    joined by ``__``, list indices as digits)."""
    spec = json.loads(tok.to_str())
    for path, value in changes.items():
        node = spec
        *head, last = path.split("__")
        for key in head:
            node = node[int(key) if key.isdigit() else key]
        node[last] = value
    return Tokenizer.from_str(json.dumps(spec))
