"""The ledger: stored generations (token ids are the source of truth), prompts, answer parsing, prefix scoring."""

from .schema import ARMS, KEY_COLUMNS, SCHEMA, validate_records
from .store import Ledger, VerifyReport

__all__ = ["ARMS", "KEY_COLUMNS", "SCHEMA", "Ledger", "VerifyReport", "validate_records"]
