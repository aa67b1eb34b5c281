"""Ingest: generations made elsewhere into a ledger (JSON lines, lm-evaluation-harness samples, inspect_ai logs,
lighteval details), token ids recomputed or checked with the model's own tokenizer.

Other stages enter through this package; its modules are its own.
"""

from .harness_logs import import_logs
from .inspect_logs import import_inspect
from .jsonl import ImportInterrupted, ImportResult, import_jsonl

__all__ = ["ImportInterrupted", "ImportResult", "import_inspect", "import_jsonl", "import_logs"]
