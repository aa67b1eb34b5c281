"""mindcap-tok: how much of a multilingual reasoning gap is made by the output-token cap and the tokenizer.

The small public API; everything else lives in the stage modules (see the README's tour). Names are imported
on first use (PEP 562), so ``import mindcap_tok`` and the CLI's start stay cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import MindcapError

if TYPE_CHECKING:
    from .premium import Premium, token_premium
    from .resample import scale_budget
    from .tokenizer import ResolvedTokenizer, load_tokenizer

_LAZY = {
    "Premium": "premium",
    "token_premium": "premium",
    "scale_budget": "resample",
    "ResolvedTokenizer": "tokenizer",
    "load_tokenizer": "tokenizer",
}

__all__ = ["MindcapError", "Premium", "ResolvedTokenizer", "load_tokenizer", "scale_budget", "token_premium"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
