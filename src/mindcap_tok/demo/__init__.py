"""Material to try everything on offline: a simulated demo ledger of real Qwen3 token ids, a tiny random-weights
model that generation backends can load.

Other stages enter through this package; its modules are its own.
"""

from .ledger import build_demo, check_demo_outputs
from .tiny_model import build_tiny_model, check_tiny_model

__all__ = ["build_demo", "build_tiny_model", "check_demo_outputs", "check_tiny_model"]
