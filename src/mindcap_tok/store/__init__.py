"""The store: a ledger of generations as Parquet shards with a hashed manifest (token ids are the source of truth),
its record schema, the thinking split of a record's output, and the tokenizers a ledger names.

Parquet files committed with a hashed manifest (the ledger's shards, a round trip's hops) go through one
machinery (:mod:`.commit`). Other stages enter through this package; its modules are its own.
"""

from .commit import (
    Encoded,
    checked_bytes,
    commit_files,
    committed_path,
    encode_table,
    roll_forward,
    stage_file,
    utc_now,
)
from .ledger import JOBS, Ledger, ShardInfo, key_tuples
from .merge import CONNECTION_KEYS, MergeResult, job_identity, merge_ledgers
from .migrate import Migration, migrate
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
    population_columns,
    validate_records,
)
from .selection import empty_selection, warn_unmatched
from .think import CLOSE_TEXT, OPEN_TEXT, ThinkMarkers, answer_starts, think_end, think_markers, thinks
from .tokenizers import TokenizerMismatchError, resolve_tokenizers

__all__ = [
    "ANNOUNCE_STYLES",
    "CELL_COLUMNS",
    "CLOSE_TEXT",
    "COLUMNS",
    "CONNECTION_KEYS",
    "DESIGNS",
    "JOBS",
    "KEY_COLUMNS",
    "OPEN_TEXT",
    "REQUIRED",
    "SETTING_COLUMNS",
    "TASK_COLUMNS",
    "Encoded",
    "Ledger",
    "MergeResult",
    "Migration",
    "RecordError",
    "ShardInfo",
    "ThinkMarkers",
    "TokenizerMismatchError",
    "answer_starts",
    "check_token_ids",
    "checked_bytes",
    "commit_files",
    "committed_path",
    "describe",
    "empty_selection",
    "encode_table",
    "job_identity",
    "key_tuples",
    "merge_ledgers",
    "migrate",
    "population_columns",
    "resolve_tokenizers",
    "roll_forward",
    "stage_file",
    "think_end",
    "think_markers",
    "thinks",
    "utc_now",
    "validate_records",
    "warn_unmatched",
]
