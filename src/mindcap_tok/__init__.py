"""mindcap-tok: how much of a multilingual reasoning gap is made by the output-token cap and the tokenizer.

The small public API; everything else lives in the stage modules (see the README's tour).
"""

from .errors import MindcapError
from .premium import Premium, premium, scale_budget
from .tokenizer import ResolvedTokenizer, load_tokenizer

__all__ = ["MindcapError", "Premium", "ResolvedTokenizer", "load_tokenizer", "premium", "scale_budget"]
__version__ = "0.1.0"
