"""Where a reasoning model's thought ends in an output trace: the reasoning channel and the answer channel.

A tokenizer marks a thought with single added tokens (Qwen3's and DeepSeek-R1's ``<think>`` / ``</think>``),
found by their text among the tokenizer's added tokens, never by hard-coded ids; a template without such
tokens names a closing delimiter string instead (``think_close`` in a job spec, ``--think-close`` on import).

The rule, vLLM's reasoning parsers' for DeepSeek-R1 and Qwen3 (``partition`` at the end token): the thought
ends at the FIRST closing marker of the output, ``think_end`` is the index of the token that holds it, and
the answer channel is everything after it (a second think block is answer text). A thinking record without a
closing marker is all thought (vLLM's DeepSeek-R1 parser, and Qwen3's thinking models whose prompt opens the
thought): its ``think_end`` is null and its answer channel empty, whether the cap cut it or it never opened one.
Qwen3's empty thought (``<think>\\n\\n</think>``) closes at its ``</think>`` like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import BadInputError
from ..tokenization.byte_tables import byte_table
from ..tokenization.load import ResolvedTokenizer

#: the think tokens' text in Qwen3's and DeepSeek-R1's tokenizers
OPEN_TEXT, CLOSE_TEXT = "<think>", "</think>"


@dataclass(frozen=True)
class ThinkMarkers:
    """How a tokenizer closes a thought: the id of its closing think token, or (``close_id`` None) the closing
    delimiter string ``close_text``, found in the decoded bytes. ``close_ids``: the ids that close a thought
    when forcing appends them (the token, or the delimiter encoded)."""

    close_text: str
    close_id: int | None
    close_ids: tuple[int, ...]


def think_markers(tokenizer: ResolvedTokenizer, close_text: str | None = None) -> ThinkMarkers:
    """The closing marker of ``tokenizer``: an added token whose text is ``close_text`` (default ``</think>``),
    else ``close_text`` as a delimiter string. Raises when neither the token nor a delimiter is there."""
    hf = tokenizer.tokenizer
    text = close_text or CLOSE_TEXT
    if hf is not None:
        for i, token in hf.get_added_tokens_decoder().items():
            if token.content == text:
                return ThinkMarkers(text, int(i), (int(i),))
    if close_text is None:
        raise BadInputError(
            f"tokenizer {tokenizer.name} has no {CLOSE_TEXT} added token: name the string that closes a thought "
            "(think_close in the job spec, --think-close on import)"
        )
    ids = tuple(int(i) for i in tokenizer.encode(close_text))
    if not ids:
        raise BadInputError(f"think_close {close_text!r} encodes to no tokens")
    return ThinkMarkers(text, None, ids)


def think_end(ids: Sequence[int] | np.ndarray, markers: ThinkMarkers, *, tokenizer: ResolvedTokenizer) -> int | None:
    """The output index of the token that closes the thought (the first closing marker), or ``None``."""
    arr = np.asarray(ids, dtype=np.int64)
    if markers.close_id is not None:
        hits = np.flatnonzero(arr == markers.close_id)
        return int(hits[0]) if len(hits) else None
    table = byte_table(tokenizer)
    data = table.decode(arr)
    at = data.find(markers.close_text.encode("utf-8"))
    if at < 0:
        return None
    # the token holding the delimiter's last byte (its other bytes, if any, are dropped with the thought)
    return int(np.searchsorted(table.token_ends(arr), at + len(markers.close_text.encode("utf-8")), side="left"))


def answer_starts(thinking: np.ndarray, ends: np.ndarray, *, n_tokens: np.ndarray) -> np.ndarray:
    """Per record, the output index where its answer channel starts: 0 without thinking, ``think_end + 1`` for a
    closed thought, ``n_tokens`` (an empty answer channel) for a thinking record that never closed one.
    ``ends`` holds ``think_end`` with -1 for null."""
    thinking = np.asarray(thinking, dtype=bool)
    ends = np.asarray(ends, dtype=np.int64)
    return np.where(~thinking, 0, np.where(ends >= 0, ends + 1, np.asarray(n_tokens, dtype=np.int64)))


def thinks(records: pa.Table | pd.DataFrame) -> bool:
    """Whether some record has ``thinking`` true (a reasoning model's thinking records); false without the column."""
    if isinstance(records, pa.Table):
        return "thinking" in records.column_names and bool(pc.any(records.column("thinking").fill_null(False)).as_py())
    return "thinking" in records.columns and bool(records["thinking"].astype("boolean").fillna(False).any())
