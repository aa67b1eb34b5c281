"""Petrov et al. (NeurIPS 2023) published tokenization lengths, read from the configured data folder.

``<data_dir>/reference/petrov2023_tokenization_fairness/tokenization_lengths.csv`` has one row per FLORES-200
language (by English name) and one column per tokenizer (``Qwen``, ``LLAMA``, ``cl100k_base``, ...): the token
count of the language's dev and devtest lines joined into one string (see ``mindcap_tok.premium``, protocol
``petrov2023``). ``flores_language_map.csv`` maps the names to FLORES codes.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from .._io import regular_file
from ..config import load_config
from ..errors import BadInputError

FOLDER = Path("reference") / "petrov2023_tokenization_fairness"
# our registry name -> Petrov et al.'s column, for the tokenizers whose files are the ones they used
COLUMNS = {"qwen3-8b": "Qwen", "gpt-4": "cl100k_base", "llama-2": "LLAMA"}


def petrov2023_folder(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding Petrov et al.'s CSV files."""
    root = Path(data_dir) if data_dir is not None else load_config().data_dir.value
    if root is None or not (root / FOLDER).is_dir():
        raise BadInputError(f"Petrov et al. reference data not found: {FOLDER} under data_dir {root}")
    return root / FOLDER


def petrov2023_lengths(column: str, data_dir: str | os.PathLike[str] | None = None) -> dict[str, int]:
    """FLORES code -> Petrov et al.'s token count in ``column`` (languages marked ``–––`` are left out)."""
    folder = petrov2023_folder(data_dir)
    with open(regular_file(folder / "flores_language_map.csv", "reference file"), encoding="utf-8", newline="") as f:
        codes = {row[0].strip(): row[1].strip() for row in csv.reader(f) if len(row) == 2}
    with open(regular_file(folder / "tokenization_lengths.csv", "reference file"), encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or column not in rows[0]:
        raise BadInputError(f"no column {column!r} in {folder / 'tokenization_lengths.csv'}")
    out = {}
    for row in rows:
        value = row[column].strip()
        if value.isdigit() and row["Language"] in codes:
            out[codes[row["Language"]]] = int(value)
    return out
