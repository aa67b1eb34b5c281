"""The store: a ledger of generations as Parquet shards with a hashed manifest (token ids are the source of truth),
its record schema, the thinking split of a record's output, and the tokenizers a ledger names.

Other stages enter through this package; its modules are its own.
"""

from .ledger import Ledger, ShardInfo, key_tuples
from .schema import (
    ANNOUNCE_STYLES,
    CELL_COLUMNS,
    COLUMNS,
    DESIGNS,
    KEY_COLUMNS,
    REQUIRED,
    SETTING_COLUMNS,
    TASK_COLUMNS,
    RecordError,
    check_token_ids,
    describe,
    validate_records,
)
from .selection import empty_selection, warn_unmatched
from .think import CLOSE_TEXT, OPEN_TEXT, ThinkMarkers, answer_starts, think_end, think_markers
from .tokenizers import resolve_tokenizers

__all__ = [
    "ANNOUNCE_STYLES",
    "CELL_COLUMNS",
    "CLOSE_TEXT",
    "COLUMNS",
    "DESIGNS",
    "KEY_COLUMNS",
    "OPEN_TEXT",
    "REQUIRED",
    "SETTING_COLUMNS",
    "TASK_COLUMNS",
    "Ledger",
    "RecordError",
    "ShardInfo",
    "ThinkMarkers",
    "answer_starts",
    "check_token_ids",
    "describe",
    "empty_selection",
    "key_tuples",
    "resolve_tokenizers",
    "think_end",
    "think_markers",
    "validate_records",
    "warn_unmatched",
]
