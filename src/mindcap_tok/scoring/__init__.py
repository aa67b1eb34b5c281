"""Scoring: every record's strict score at every prefix budget, from token ids and byte positions, and the outcome
of each trace (answered, truncated, unparseable...).

Other stages enter through this package; its modules are its own.
"""

from .outcomes import OUTCOMES
from .score import (
    Scores,
    accuracy_curves,
    flat_ids,
    record_golds,
    score_by_tokenizer,
    score_ledger,
    score_token_ids,
    thought_summary,
    with_thought_counts,
)

__all__ = [
    "OUTCOMES",
    "Scores",
    "accuracy_curves",
    "flat_ids",
    "record_golds",
    "score_by_tokenizer",
    "score_ledger",
    "score_token_ids",
    "thought_summary",
    "with_thought_counts",
]
