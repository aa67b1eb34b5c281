"""The ledger: stored generations (token ids are the source of truth), prompts, answer parsing, prefix scoring."""

from ..tasks.answers import get_parser
from ..tasks.answers.integer import Parser, parse_answer
from .schema import ARMS, KEY_COLUMNS, SCHEMA, validate_records
from .score import Scores, accuracy_curves, score_ledger, score_prefixes, score_token_ids
from .store import Ledger, VerifyReport

__all__ = [
    "ARMS",
    "KEY_COLUMNS",
    "SCHEMA",
    "Ledger",
    "Parser",
    "Scores",
    "VerifyReport",
    "accuracy_curves",
    "get_parser",
    "parse_answer",
    "score_ledger",
    "score_prefixes",
    "score_token_ids",
    "validate_records",
]
