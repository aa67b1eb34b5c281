"""Prefix scoring: the strict score of every record at every budget B, from byte positions.

Budget B means the decoded first B output tokens (the paper's prefix-defined budgets). Decoding and parsing
every prefix is quadratic, so instead:

1. each trace's text is parsed once into *answer events* at byte offsets: for every line holding ``####``
   (every line, for an answer type whose lines need not hold it: ``parser.needs_hash`` False), the byte cuts
   at which its unfinished prefix reads as an answer (``Parser.line_cuts``) and the cut from which the whole
   line is visible (its end; for ``terminated``, one past its newline);
2. each budget B becomes a byte cut: the byte length of the first B tokens, a cumulative sum of the
   tokenizer's per-id byte lengths (any tokenizer: the same text retokenized with an extended tokenizer
   just has other cuts);
3. numpy ``searchsorted`` of the cuts against the event offsets gives every (record, budget) score, the
   emission position E (the first budget from which every prefix reads the completed trace's answer, so a
   budget ending inside ``#### 42478`` at ``#### 4`` is before E) and the completed-trace correctness C.

Any answer type works (:mod:`mindcap_tok.tasks.answers`): an event is correct when ``parser.correct(value,
gold)``, golds being ints (integer tasks) or strings (the others).

What the parser sees is exactly ``tokenizer.decode(ids[:B], skip_special_tokens=True)``: special tokens
add no text, and a cut inside a multi-byte character leaves U+FFFD (``errors="replace"``), which no answer
grammar accepts. Any tokenizer family works (``tokenizers``, ``tiktoken``, ``sentencepiece``): SentencePiece
control and unknown pieces add no text, and with a dummy prefix (Llama 2) the first text token of a trace
loses the leading space that decoding drops (see :func:`byte_table`). The end of a trace that stopped by
itself (finish reason ``stop``) terminates its last line once the prefix holds every token (B >= n_tokens);
a trace cut by its cap does not. The test suite checks all this against decoding every prefix with the real
tokenizers.

Reasoning models: a record with ``thinking`` true is read in its answer channel only (the tokens after
``think_end``; none when the thought never closed, :func:`~mindcap_tok.store.think.answer_starts`), while its
budgets and E still count every output token. Its thought's tokens are replaced by an id that adds no text
before the events are found, so the parser sees ``decode(ids[think_end + 1:B])`` and the cuts stay those of the
whole trace; records without thinking take the path above unchanged.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..budgets import SCORE_BUDGETS, check_budgets
from ..errors import BadInputError
from ..store import (
    CELL_COLUMNS,
    SETTING_COLUMNS,
    answer_starts,
    describe,
    population_columns,
    resolve_tokenizers,
    thinks,
)
from ..tasks.answers import AnswerParser as Parser
from ..tasks.answers import get_parser, per_language, task_parser
from ..tasks.roles import find_tasks, gold_type_mismatch, record_tasks
from ..tokenization.byte_tables import HAS_HASH, HAS_NEWLINE, ByteTable, anchor_starts, byte_table, gather_bytes
from ..tokenization.load import ResolvedTokenizer
from .outcomes import record_outcomes

_HASH = (b"####",)
_CHUNK_TOKENS = 1 << 23  # records are scored in chunks of about this many tokens (memory stays ~0.5 GB)
#: a record's gold answer: an int (integer tasks), a string (the others), None (unknown: never correct)
Gold = int | str | None


# -- answer events --------------------------------------------------------------------------------------------
@dataclass
class _EventLists:
    p_rec: list[int] = field(default_factory=list)
    p_lo: list[int] = field(default_factory=list)
    p_hi: list[int] = field(default_factory=list)
    p_gold: list[int] = field(default_factory=list)
    p_val: list[Hashable] = field(default_factory=list)
    f_rec: list[int] = field(default_factory=list)
    f_t: list[int] = field(default_factory=list)
    f_gold: list[int] = field(default_factory=list)
    f_val: list[Hashable] = field(default_factory=list)
    codes: dict[Hashable, int] = field(default_factory=dict)
    gold_codes: dict[Hashable, int] = field(default_factory=dict)
    verdicts: dict[tuple[int, int], bool] = field(default_factory=dict)

    def code(self, value: Hashable) -> int:
        """A small integer standing for an answer value (answers may not fit in int64)."""
        return self.codes.setdefault(value, len(self.codes))

    def gold_code(self, gold: Gold) -> int:
        """A small integer standing for a gold answer (-1: unknown, never correct)."""
        return -1 if gold is None else self.gold_codes.setdefault(gold, len(self.gold_codes))

    def judge(self, parser: Parser, vals: np.ndarray, golds: np.ndarray) -> np.ndarray:
        """Whether each answer (value code) is correct for its gold (gold code), judged once per distinct pair.

        Events are judged only when a budget or the trace's end reads them: a parser's verdict may be costly
        (math-verify), and most partial-line events are never read at any budget of the grid.
        """
        out = np.zeros(len(vals), dtype=bool)
        known = np.flatnonzero(golds >= 0)
        if not len(known):
            return out
        width = len(self.gold_codes)
        pairs, inverse = np.unique(vals[known] * width + golds[known], return_inverse=True)
        values, gold_values = list(self.codes), list(self.gold_codes)
        verdict = np.zeros(len(pairs), dtype=bool)
        for i, key in enumerate(pairs.tolist()):
            pair = divmod(key, width)
            if pair not in self.verdicts:
                self.verdicts[pair] = bool(parser.correct(values[pair[0]], gold_values[pair[1]]))
            verdict[i] = self.verdicts[pair]
        out[known] = verdict[inverse.ravel()]
        return out

    def add_line(
        self, parser: Parser, rec: int, line: bytes, start: int, newline: bool, total: int, complete: bool, gold: Gold
    ) -> None:
        """Events of one line ``[start, start + len(line))`` of record ``rec`` (cut positions in record bytes)."""
        cuts = parser.line_cuts(line)
        end = start + len(line)
        gold_code = self.gold_code(gold)
        if not parser.terminated:
            for lo, hi, value in cuts.partial:
                self.p_rec.append(rec)
                self.p_lo.append(start + lo)
                self.p_hi.append(start + hi)
                self.p_gold.append(gold_code)
                self.p_val.append(self.code(value))
            threshold = end
        elif newline:
            threshold = end + 1
        elif complete:
            threshold = total + 1  # the virtual end-of-generation position, reached only when B >= n_tokens
        else:
            return
        if cuts.full is not None:
            self.f_rec.append(rec)
            self.f_t.append(threshold)
            self.f_gold.append(gold_code)
            self.f_val.append(self.code(cuts.full))


def _scan_segment(
    ev: _EventLists,
    parser: Parser,
    rec: int,
    seg: bytes,
    seg_start: int,
    head_complete: bool,
    tail_complete: bool,
    total: int,
    complete: bool,
    gold: Gold,
    seen: set,
    needles: tuple[bytes, ...] | None = _HASH,
) -> None:
    """Add events for the complete lines of ``seg`` (record bytes from ``seg_start``) holding one of ``needles``
    (``####``, or a parser's lowercase anchors, searched in the lowercased bytes); ``None``: ``seg`` is the whole
    record and every line matching the parser's trigger is read."""
    if needles is None:
        _scan_lines(ev, parser, rec, seg, total, complete, gold)
        return
    find = _finder(seg, needles)
    pos = find(0)
    while pos != -1:
        ls = seg.rfind(b"\n", 0, pos) + 1
        le = seg.find(b"\n", pos)
        if ls == 0 and not head_complete:  # the line began before this segment; its own segment covers it
            pos = find(pos + 1) if le == -1 else find(le)
            continue
        if le == -1 and not tail_complete:
            return
        end = len(seg) if le == -1 else le
        key = (rec, seg_start + ls)
        if key not in seen:
            seen.add(key)
            ev.add_line(parser, rec, seg[ls:end], seg_start + ls, le != -1, total, complete, gold)
        if le == -1:
            return
        pos = find(le)


def _finder(seg: bytes, needles: tuple[bytes, ...]):
    """``find(start)``: the first position from ``start`` where a needle starts in ``seg`` (lowercased unless
    the needle is ``####``), or -1."""
    if needles == _HASH:
        return lambda start: seg.find(b"####", start)
    hay = seg.lower()
    hits = []
    for needle in needles:
        pos = hay.find(needle)
        while pos != -1:
            hits.append(pos)
            pos = hay.find(needle, pos + 1)
    hits.sort()
    return lambda start: hits[i] if (i := bisect_left(hits, start)) < len(hits) else -1


def _scan_lines(ev: _EventLists, parser: Parser, rec: int, data: bytes, total: int, complete: bool, gold: Gold) -> None:
    """Add events for the lines of record ``rec``'s whole text ``data`` that match the parser's trigger (every
    line without one), found in the decoded text: its lines are the byte lines', decoded one by one."""
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    starts = np.concatenate([[0], newlines + 1])
    ends = np.append(newlines, len(data))
    trigger = getattr(parser, "trigger", None)
    lines: range | np.ndarray
    if trigger is None:
        lines = range(len(starts))
    else:
        text = data.decode("utf-8", "replace")
        hits = [m.start() for m in trigger.finditer(text)]
        if not hits:
            return
        text_newlines = np.flatnonzero(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32) == 10)
        lines = np.unique(np.searchsorted(text_newlines, hits))
    for i in lines:
        lo, hi = int(starts[i]), int(ends[i])
        ev.add_line(parser, rec, data[lo:hi], lo, hi < len(data), total, complete, gold)


def _events_from_ids(
    ids: np.ndarray,
    splits: np.ndarray,
    table: ByteTable,
    cut: np.ndarray,
    base: np.ndarray,
    totals: np.ndarray,
    golds: Sequence[Gold],
    complete: np.ndarray,
    parser: Parser,
) -> _EventLists:
    """Answer events of token-id traces, decoding only the lines around tokens that hold ``#`` (for a parser
    whose lines need not hold ``####``: tokens where one of its anchors may start; without anchors, every line of
    every record)."""
    ev = _EventLists()
    anchors = _HASH if parser.needs_hash else getattr(parser, "anchors", None)
    if anchors is None:
        rec = np.flatnonzero(np.diff(splits) > 0)
        return _scan_windows(
            ev, ids, splits, table, cut, base, totals, golds, complete, parser, splits[rec], splits[rec + 1] - 1, rec
        )
    flagged = np.flatnonzero(table.flags[ids])
    kinds = table.flags[ids[flagged]]
    hashes = flagged[(kinds & HAS_HASH) > 0] if anchors == _HASH else anchor_starts(table, ids, anchors=anchors)
    if not len(hashes):
        return ev
    # a sentinel newline token before every id keeps the lookups below in bounds when a chunk holds none
    newlines = np.concatenate([[-1], flagged[(kinds & HAS_NEWLINE) > 0]])
    rec = np.searchsorted(splits, hashes, side="right") - 1
    first_tok, last_tok = splits[rec], splits[rec + 1] - 1
    # window: from the last newline-holding token before the '#' token to the first one after it, so every
    # line touching the '#' token lies whole inside the window
    i = np.searchsorted(newlines, hashes, side="left") - 1
    before = np.where(i >= 0, newlines[np.maximum(i, 0)], -1)
    ws = np.maximum(before, first_tok)
    j = np.searchsorted(newlines, hashes, side="right")
    after = np.where(j < len(newlines), newlines[np.minimum(j, len(newlines) - 1)], np.iinfo(np.int64).max)
    we = np.minimum(after, last_tok)
    windows = np.unique(np.stack([ws, we, rec], axis=1), axis=0)
    w_start, w_end, w_rec = windows.T
    return _scan_windows(
        ev, ids, splits, table, cut, base, totals, golds, complete, parser, w_start, w_end, w_rec, anchors
    )


def _scan_windows(
    ev: _EventLists,
    ids: np.ndarray,
    splits: np.ndarray,
    table: ByteTable,
    cut: np.ndarray,
    base: np.ndarray,
    totals: np.ndarray,
    golds: Sequence[Gold],
    complete: np.ndarray,
    parser: Parser,
    ws: np.ndarray,
    we: np.ndarray,
    rec: np.ndarray,
    needles: tuple[bytes, ...] | None = None,
) -> _EventLists:
    """Add the events of token windows ``ids[ws[w]:we[w] + 1]`` of records ``rec[w]`` (sorted, whole lines)."""
    counts = we - ws + 1
    tok_idx = np.repeat(ws - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    window_ids = ids[tok_idx].astype(np.int64)
    data = gather_bytes(table, window_ids).tobytes()
    seg_off = np.concatenate([[0], np.cumsum(table.lengths[window_ids])])[np.cumsum(np.concatenate([[0], counts]))]
    # byte offset (within its record) at which each window's first token starts
    seg_start = cut[ws] - table.lengths[ids[ws]] - base[rec]
    seen: set = set()
    for w in range(len(ws)):
        r = int(rec[w])
        _scan_segment(
            ev,
            parser,
            r,
            data[seg_off[w] : seg_off[w + 1]],
            int(seg_start[w]),
            bool(ws[w] == splits[r]),
            bool(we[w] == splits[r + 1] - 1),
            int(totals[r]),
            bool(complete[r]),
            golds[r],
            seen,
            needles,
        )
    return ev


def _events_from_texts(
    texts: Sequence[bytes], golds: Sequence[Gold], complete: np.ndarray, parser: Parser
) -> _EventLists:
    ev = _EventLists()
    needles = _HASH if parser.needs_hash else getattr(parser, "anchors", None)
    for r, data in enumerate(texts):
        _scan_segment(ev, parser, r, data, 0, True, True, len(data), bool(complete[r]), golds[r], set(), needles)
    return ev


# -- scoring --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PrefixScores:
    """Per record: ``scores[r, b]`` (int8) at ``budgets[b]``, emission position E (the first budget from which
    every prefix reads the completed trace's answer; float, NaN = the completed trace has none),
    completed-trace correctness C (int8), and the number of tokens."""

    budgets: np.ndarray
    scores: np.ndarray
    emission: np.ndarray
    correct: np.ndarray
    n_tokens: np.ndarray


def _score_events(
    ev: _EventLists,
    splits: np.ndarray,
    cut: np.ndarray,
    base: np.ndarray,
    totals: np.ndarray,
    budgets: np.ndarray,
    parser: Parser,
) -> PrefixScores:
    """Scores from answer events and token cut positions.

    Global byte coordinates: record r occupies ``[base[r], base[r] + totals[r] + 1]``, the ``+ 1`` being its
    virtual end-of-generation position, with a gap before the next record so that no search crosses into it.
    ``cut[k]`` is the coordinate after token k; the last token of each record ends at the virtual position
    (the prefix then holds the whole generation, its end included).
    """
    n = len(splits) - 1
    n_tok = np.diff(splits)
    has_tok = n_tok > 0
    p_rec = np.asarray(ev.p_rec, dtype=np.int64)
    p_lo = base[p_rec] + np.asarray(ev.p_lo, dtype=np.int64)
    p_hi = base[p_rec] + np.asarray(ev.p_hi, dtype=np.int64)
    p_gold = np.asarray(ev.p_gold, dtype=np.int64)
    p_val = np.asarray(ev.p_val, dtype=np.int64)
    order = np.argsort(p_lo, kind="stable")
    p_rec, p_lo, p_hi, p_gold, p_val = p_rec[order], p_lo[order], p_hi[order], p_gold[order], p_val[order]
    f_rec = np.asarray(ev.f_rec, dtype=np.int64)
    f_t = base[f_rec] + np.asarray(ev.f_t, dtype=np.int64)
    f_gold = np.asarray(ev.f_gold, dtype=np.int64)
    f_val = np.asarray(ev.f_val, dtype=np.int64)
    order = np.argsort(f_t, kind="stable")
    f_rec, f_t, f_gold, f_val = f_rec[order], f_t[order], f_gold[order], f_val[order]
    first_t = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    first_ok = np.zeros(n, dtype=bool)
    first_val = np.full(n, -1, dtype=np.int64)
    recs, first_idx = np.unique(f_rec, return_index=True)
    first_t[recs], first_val[recs] = f_t[first_idx], f_val[first_idx]
    first_ok[recs] = ev.judge(parser, f_val[first_idx], f_gold[first_idx])

    def judged(read: np.ndarray, k: np.ndarray, vals: np.ndarray, golds: np.ndarray) -> np.ndarray:
        """Whether the events ``k`` are correct where ``read`` (False elsewhere)."""
        ok = np.zeros(read.shape, dtype=bool)
        idx = np.flatnonzero(read)
        ok[idx] = ev.judge(parser, vals[k[idx]], golds[k[idx]])
        return ok

    def answer_at(rec: np.ndarray, g: np.ndarray, judge: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Whether the answer read at global cut ``g`` of record ``rec`` is correct (all False unless ``judge``),
        and its value code (-1: none)."""
        partial, pk = np.zeros(g.shape, dtype=bool), np.zeros(g.shape, dtype=np.int64)
        partial_val = np.full(g.shape, -1, dtype=np.int64)
        if len(p_lo):
            k = np.searchsorted(p_lo, g, side="right") - 1
            pk = np.maximum(k, 0)
            partial = (k >= 0) & (g < p_hi[pk])
            partial_val = np.where(partial, p_val[pk], -1)
        ok = np.zeros(g.shape, dtype=bool)
        if parser.last:
            full, fk = np.zeros(g.shape, dtype=bool), np.zeros(g.shape, dtype=np.int64)
            if len(f_t):
                k = np.searchsorted(f_t, g, side="right") - 1
                fk = np.maximum(k, 0)
                full = (k >= 0) & (f_t[fk] >= base[rec]) & ~partial
            if judge:
                ok = judged(partial, pk, p_val, p_gold) | judged(full, fk, f_val, f_gold)
            return ok, np.where(partial, partial_val, np.where(full, f_val[fk] if len(f_t) else -1, -1))
        reached = g >= first_t[rec]
        if judge:
            ok = np.where(reached, first_ok[rec], judged(partial & ~reached, pk, p_val, p_gold))
        return ok, np.where(reached, first_val[rec], partial_val)

    rec_idx = np.arange(n)
    scores = np.zeros((n, len(budgets)), dtype=np.int8)
    for b, budget in enumerate(budgets):
        take = np.minimum(n_tok, budget)
        g = np.where(has_tok, cut[np.maximum(splits[:-1] + take - 1, 0)] if len(cut) else 0, base)
        scores[:, b] = answer_at(rec_idx, g)[0] & has_tok
    g_end = base + totals + 1
    end_ok, final = answer_at(rec_idx, g_end)
    correct = (end_ok & has_tok).astype(np.int8)
    bounds_rec = np.concatenate([p_rec, p_rec, f_rec])
    bounds = np.concatenate([p_lo, p_hi, f_t])
    emission = _emission(answer_at, splits, cut, np.where(has_tok, final, -1), bounds_rec, bounds)
    return PrefixScores(budgets, scores, emission, correct, n_tok.astype(np.int64))


def _emission(
    answer_at, splits: np.ndarray, cut: np.ndarray, final: np.ndarray, bounds_rec: np.ndarray, bounds: np.ndarray
) -> np.ndarray:
    """E per record: the first budget from which every prefix reads the completed trace's answer (NaN: none).

    The answer read changes only at event boundaries, so the last token reading something else is, for some
    boundary, the last token ending before it: E is one budget past the latest such token (1 if there is
    none). With this E the strict score at B is C·1[E ≤ B] for every B ≥ E, and 0 just before E when C = 1
    (a prefix ``#### 4`` of ``#### 42478`` is not yet the answer).
    """
    n = len(splits) - 1
    emission = np.where(final >= 0, 1.0, np.nan)
    if not len(bounds):
        return emission
    k = np.searchsorted(cut, bounds, side="left") - 1  # the last token ending before the boundary
    valid = k >= splits[bounds_rec]
    rec, k = bounds_rec[valid], k[valid]
    other = answer_at(rec, cut[k], judge=False)[1] != final[rec]
    latest = np.zeros(n)
    np.maximum.at(latest, rec[other], (k - splits[rec] + 2)[other])
    return np.where(final >= 0, np.maximum(emission, latest), np.nan)


def score_token_ids(
    ids: np.ndarray,
    splits: np.ndarray,
    *,
    table: ByteTable | ResolvedTokenizer,
    golds: Sequence[Gold],
    budgets: Sequence[int] | np.ndarray,
    parser: str | Parser = "strict",
    complete: np.ndarray | Sequence[bool] | None = None,
) -> PrefixScores:
    """Score token-id traces: ``ids[splits[r]:splits[r + 1]]`` are record r's output ids under ``table``.

    ``complete[r]`` says the trace stopped by itself (finish reason ``stop``; default all True). Any
    tokenizer works, including an extended one retokenizing the same text: only its byte table matters.
    """
    table = byte_table(table) if isinstance(table, ResolvedTokenizer) else table
    parser = get_parser(parser)
    grid = check_budgets(budgets)
    ids = np.asarray(ids)
    splits = np.asarray(splits, dtype=np.int64)
    n = len(splits) - 1
    if len(golds) != n:
        raise BadInputError(f"{len(golds)} gold answers for {n} records")
    done = np.ones(n, dtype=bool) if complete is None else np.asarray(complete, dtype=bool)
    if len(ids) and ids.min() < 0:
        raise BadInputError(f"token id {int(ids.min())} is negative")
    ids = table.trace_ids(ids, splits)  # a dummy prefix: each trace's first text token without its space
    try:
        cut = table.lengths[ids]  # becomes the cut coordinates in place (the array is ~8 bytes per token)
    except IndexError as exc:
        raise BadInputError(f"a token id is outside the tokenizer's {table.vocab_size} ids") from exc
    n_tok = np.diff(splits)
    has_tok = n_tok > 0
    starts = splits[:-1][has_tok]
    first_len = cut[starts]
    # 2 extra bytes per record boundary crossed, then one cumulative sum: cut[k] = bytes up to token k + 2 r
    np.add.at(cut, splits[1:-1][splits[1:-1] < len(cut)], 2)
    np.cumsum(cut, out=cut)
    base = np.zeros(n, dtype=np.int64)
    base[has_tok] = cut[starts] - first_len
    totals = np.zeros(n, dtype=np.int64)
    ends = splits[1:][has_tok] - 1
    totals[has_tok] = cut[ends] - base[has_tok]
    ev = _events_from_ids(ids, splits, table, cut, base, totals, golds, done, parser)
    cut[ends] += 1  # the last token reaches the virtual end-of-generation position
    return _score_events(ev, splits, cut, base, totals, grid, parser)


def score_prefixes(
    texts: Sequence[bytes | str],
    token_ends: Sequence[np.ndarray],
    *,
    golds: Sequence[Gold],
    budgets: Sequence[int] | np.ndarray,
    parser: str | Parser = "strict",
    complete: np.ndarray | Sequence[bool] | None = None,
) -> PrefixScores:
    """Score texts given the byte offset at which each of their tokens ends.

    ``texts[r]`` is record r's decoded output (bytes, or str encoded as UTF-8) and ``token_ends[r]`` the
    non-decreasing cumulative byte length after each of its tokens (last entry = len(text)), e.g.
    ``table.token_ends(new_ids)`` for the same text under another tokenizer.
    """
    parser = get_parser(parser)
    grid = check_budgets(budgets)
    data = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
    n = len(data)
    if len(token_ends) != n or len(golds) != n:
        raise BadInputError(f"{n} texts, {len(token_ends)} token offset arrays and {len(golds)} gold answers")
    ends = [np.asarray(e, dtype=np.int64) for e in token_ends]
    for r, (d, e) in enumerate(zip(data, ends, strict=True)):
        if (len(e) and (e[-1] != len(d) or (np.diff(e) < 0).any() or e[0] < 0)) or (not len(e) and len(d)):
            raise BadInputError(f"record {r}: token byte offsets must rise to the text's {len(d)} bytes")
    done = np.ones(n, dtype=bool) if complete is None else np.asarray(complete, dtype=bool)
    splits = np.concatenate([[0], np.cumsum([len(e) for e in ends])]).astype(np.int64)
    totals = np.array([len(d) for d in data], dtype=np.int64)
    base = np.concatenate([[0], np.cumsum(totals + 2)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
    cut = np.concatenate([e + b for e, b in zip(ends, base, strict=True)]) if n else np.zeros(0, np.int64)
    has_tok = np.diff(splits) > 0
    cut[splits[1:][has_tok] - 1] += 1
    ev = _events_from_texts(data, golds, done, parser)
    return _score_events(ev, splits, cut, base, totals, grid, parser)


# -- ledger-level API -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scores:
    """Prefix scores of a set of ledger records.

    ``by_budget``: one row per record x budget: cell and settings columns, ``item, sample, budget``,
    ``score`` (int8 strict score of the length-B prefix), ``truncated`` (record longer than B) and
    ``emitted`` (E <= B). ``by_record``: ``n_tokens``, ``emission`` (E: the first budget from which every prefix
    reads the completed trace's answer, NaN = none), ``correct`` (C),
    ``finish_reason``, ``cap`` and ``retokenized`` (when the records have them) per record, ``outcome``
    (:mod:`~mindcap_tok.scoring.outcomes`; when the records hold their ``text``); where some record thinks, also
    ``thinking`` (a setting column) and :func:`thought_columns`.
    """

    by_budget: pd.DataFrame
    by_record: pd.DataFrame
    parser: str
    budgets: tuple[int, ...]
    tokenizers: dict[str, str]
    #: versions of the libraries that judged answers (``{"math-verify": "0.9.0"}`` for math tasks)
    versions: dict[str, str] = field(default_factory=dict)


def flat_ids(column) -> tuple[np.ndarray, np.ndarray]:
    """(flat ids, splits) of a list<int> column (or sequences): record r's ids are ``ids[splits[r]:splits[r + 1]]``."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if isinstance(column, pa.Array):
        offsets = column.offsets.to_numpy()
        values = pc.list_flatten(column).to_numpy(zero_copy_only=False)
        return values, (offsets - offsets[0]).astype(np.int64)
    arrays = [np.asarray(x, dtype=np.int64) for x in column]
    splits = np.concatenate([[0], np.cumsum([len(a) for a in arrays])]).astype(np.int64)
    return (np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)), splits


def score_by_tokenizer(
    table: pa.Table,
    tokenizers: ResolvedTokenizer | Mapping[str, ResolvedTokenizer],
    *,
    budgets: Sequence[int] | np.ndarray,
    parser: str | Parser = "strict",
    on_progress=None,
) -> PrefixScores:
    """Prefix scores of every record of ``table`` (its row order), each record's ids scored with its own tokenizer.

    ``tokenizers`` maps the ``tokenizer`` column's names to tokenizers (resolve them with
    :func:`mindcap_tok.store.tokenizers.resolve_tokenizers`); one tokenizer scores every record. Needs the
    ``output_ids``, ``gold`` (or ``gold_text``) and ``finish_reason`` columns (see :func:`record_golds`);
    records are scored in chunks of about 8M tokens and ``on_progress(done, total)`` is called after each chunk.
    """
    parser = get_parser(parser)
    grid = check_budgets(budgets)
    n = table.num_rows
    if isinstance(tokenizers, ResolvedTokenizer):
        names = np.full(n, tokenizers.name, dtype=object)
        toks = {tokenizers.name: tokenizers}
    else:
        if "tokenizer" not in table.column_names:
            raise BadInputError("records have no 'tokenizer' column: name the tokenizer the ids belong to")
        names = table.column("tokenizer").to_numpy(zero_copy_only=False)
        toks = dict(tokenizers)
        missing = [name for name in dict.fromkeys(names) if name not in toks]
        if missing:
            raise BadInputError(f"no tokenizer given for {missing[0]!r}")
    finish = table.column("finish_reason").to_numpy(zero_copy_only=False)
    golds = record_golds(table)
    starts = record_answer_starts(table)
    scores = np.zeros((n, len(grid)), dtype=np.int8)
    emission = np.full(n, np.nan)
    correct = np.zeros(n, dtype=np.int8)
    n_tokens = np.zeros(n, dtype=np.int64)
    column = table.column("output_ids")
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
    done = 0
    for name in dict.fromkeys(names):
        table_bytes = byte_table(toks[name])
        rows = np.flatnonzero(names == name)
        chunks = np.split(rows, np.flatnonzero(np.diff(np.cumsum(lengths[rows]) // _CHUNK_TOKENS)) + 1)
        for chunk in chunks:
            if not len(chunk):
                continue
            contiguous = chunk[-1] - chunk[0] + 1 == len(chunk)
            ids, splits = flat_ids(column.slice(chunk[0], len(chunk)) if contiguous else column.take(pa.array(chunk)))
            if starts is not None and starts[chunk].any():
                ids = _blank_thoughts(ids, splits, starts[chunk], table_bytes)
            res = score_token_ids(
                ids,
                splits,
                table=table_bytes,
                golds=[golds[i] for i in chunk],
                budgets=grid,
                parser=parser,
                complete=finish[chunk] == "stop",
            )
            scores[chunk], emission[chunk], correct[chunk], n_tokens[chunk] = (
                res.scores,
                res.emission,
                res.correct,
                res.n_tokens,
            )
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, n)
    return PrefixScores(grid, scores, emission, correct, n_tokens)


def record_answer_starts(table: pa.Table) -> np.ndarray | None:
    """Per record, the output index where its answer channel starts (see
    :func:`~mindcap_tok.store.think.answer_starts`); ``None`` when no record thinks (the old path)."""
    if not thinks(table):
        return None
    if "think_end" not in table.column_names:
        raise BadInputError("records with thinking on need the 'think_end' column to be scored")
    thinking = table.column("thinking").to_numpy(zero_copy_only=False)
    ends = table.column("think_end").fill_null(-1).to_numpy(zero_copy_only=False)
    n_tok = pc.list_value_length(table.column("output_ids")).to_numpy(zero_copy_only=False)
    return answer_starts(thinking, ends, n_tokens=n_tok)


def _blank_thoughts(ids: np.ndarray, splits: np.ndarray, starts: np.ndarray, table: ByteTable) -> np.ndarray:
    """A copy of ``ids`` whose first ``starts[r]`` tokens of each record are an id that adds no text and holds
    no ``#`` or newline (a special token): the parser then sees the answer channel only, the cuts every token."""
    blank = np.flatnonzero((table.lengths[: table.vocab_size] == 0) & (table.flags[: table.vocab_size] == 0))
    if not len(blank):
        raise BadInputError("the tokenizer has no id without text (a special token) to blank a thought with")
    n_tok = np.diff(splits)
    offset = np.arange(len(ids)) - np.repeat(splits[:-1], n_tok)
    out = np.array(ids, copy=True)
    out[offset < np.repeat(np.minimum(starts, n_tok), n_tok)] = blank[0]
    return out


def thought_columns(table: pa.Table) -> dict[str, np.ndarray]:
    """Per record of a table where some record thinks: ``thought_tokens`` (its thought, the closing marker
    included: all of it when unclosed; 0 without thinking), ``answer_tokens`` (the rest) and ``cap_in_thought``
    (the cap fell inside the thought: cut by its cap while unclosed, or forced to close it)."""
    starts = record_answer_starts(table)
    if starts is None:
        raise BadInputError("thought columns need a table where some record thinks")
    n_tok = pc.list_value_length(table.column("output_ids")).to_numpy(zero_copy_only=False).astype(np.int64)
    thinking = table.column("thinking").to_numpy(zero_copy_only=False).astype(bool)
    unclosed = thinking & table.column("think_end").is_null().to_numpy(zero_copy_only=False)
    closed = (
        table.column("forced_think_close").to_numpy(zero_copy_only=False).astype(bool)
        if "forced_think_close" in table.column_names
        else np.zeros(len(n_tok), dtype=bool)
    )
    capped = table.column("finish_reason").to_numpy(zero_copy_only=False) == "length"
    thought = np.minimum(starts, n_tok)
    return {
        "thought_tokens": thought,
        "answer_tokens": n_tok - thought,
        "cap_in_thought": capped & (unclosed | closed),
    }


def thought_summary(by_record: pd.DataFrame) -> pd.DataFrame:
    """Per cell and settings of the thinking records of ``by_record`` (with :func:`thought_columns`): records,
    median thought and answer tokens, cap hits and the share of them that fell inside the thought (a fraction;
    null without cap hits). Empty when no record thinks."""
    if "thinking" not in by_record or not by_record["thinking"].any():
        return pd.DataFrame()
    frame = by_record[by_record["thinking"].astype(bool)].assign(cap_hit=by_record["finish_reason"] == "length")
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in frame.columns]
    out = frame.groupby(keys, dropna=False, sort=True).agg(
        records=("n_tokens", "size"),
        thought_tokens_p50=("thought_tokens", "median"),
        answer_tokens_p50=("answer_tokens", "median"),
        cap_hits=("cap_hit", "sum"),
        cap_hits_in_thought=("cap_in_thought", "sum"),
    )
    out["cap_in_thought_share"] = (out["cap_hits_in_thought"] / out["cap_hits"]).where(out["cap_hits"] > 0)
    return out.reset_index()


def record_golds(table: pa.Table) -> list[Gold]:
    """Each record's gold: its ``gold_text`` where set (non-integer tasks), else its ``gold`` (ints, may be null)."""
    n = table.num_rows
    ints = table.column("gold").to_pylist() if "gold" in table.column_names else [None] * n
    if "gold_text" not in table.column_names:
        return ints
    return [g if t is None else t for g, t in zip(ints, table.column("gold_text").to_pylist(), strict=True)]


def _task_rows(table: pa.Table) -> dict[str, np.ndarray]:
    """Row indices per task, in first-seen order (:func:`~mindcap_tok.tasks.roles.record_tasks`)."""
    tasks = record_tasks(table)
    return {str(t): np.flatnonzero(tasks == t) for t in dict.fromkeys(tasks)}


def _language_rows(table: pa.Table, groups: dict[str, np.ndarray], parser: str, tasks: Sequence) -> dict:
    """The task groups split by language where ``parser`` is one of the task's per-language filters."""
    langs = np.asarray(table.column("lang").to_numpy(zero_copy_only=False), dtype=object)
    out: dict = {}
    for task, rows in groups.items():
        if not per_language(task, parser, files=tasks):
            out[task] = rows
            continue
        for lang in dict.fromkeys(langs[rows]):
            out[(task, str(lang))] = rows[langs[rows] == lang]
    return out


def _score_tasks(
    table: pa.Table, toks, grid: np.ndarray, parser: str | Parser, on_progress, tasks: Sequence
) -> tuple[PrefixScores, dict[str, str], str]:
    """Prefix scores of every record with its task's parser (``parser`` names the variant, or is one parser for
    all; ``tasks``: the user's task files), the versions of the libraries that judged, and the parser name."""
    groups: dict = _task_rows(table)
    if not hasattr(parser, "line_cuts"):
        bad = gold_type_mismatch(table, find_tasks(list(groups), tasks))
        if bad is not None:
            raise BadInputError(f"{describe(table, bad[0])}: {bad[1]}")
    if not hasattr(parser, "line_cuts") and any(per_language(t, parser, files=tasks) for t in groups):
        groups = _language_rows(table, groups, parser, tasks)

    def parser_of(key: str | tuple[str, str]) -> Parser:
        if hasattr(parser, "line_cuts"):
            return get_parser(parser)
        task, lang = key if isinstance(key, tuple) else (key, None)
        return task_parser(task, parser, files=tasks, lang=lang)

    parsers = {key: parser_of(key) for key in groups}
    if len(groups) == 1:
        (task,) = groups
        res = score_by_tokenizer(table, toks, budgets=grid, parser=parsers[task], on_progress=on_progress)
    else:
        n = table.num_rows
        res = PrefixScores(
            grid, np.zeros((n, len(grid)), np.int8), np.full(n, np.nan), np.zeros(n, np.int8), np.zeros(n, np.int64)
        )
        done = 0
        for task, rows in groups.items():
            progress = None if on_progress is None else lambda k, _, d=done: on_progress(d + k, n)
            part = score_by_tokenizer(
                table.take(pa.array(rows)), toks, budgets=grid, parser=parsers[task], on_progress=progress
            )
            done += len(rows)
            res.scores[rows], res.emission[rows], res.correct[rows], res.n_tokens[rows] = (
                part.scores,
                part.emission,
                part.correct,
                part.n_tokens,
            )
    versions = {k: v for p in parsers.values() for k, v in p.versions.items()}
    return res, versions, "+".join(dict.fromkeys(p.name for p in parsers.values()))


def score_ledger(
    records: pd.DataFrame | pa.Table,
    tokenizer: ResolvedTokenizer | Mapping[str, ResolvedTokenizer] | None,
    *,
    budgets: Sequence[int] = SCORE_BUDGETS,
    parser: str | Parser = "strict",
    on_progress=None,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> Scores:
    """Strict (or variant) prefix scores of ledger records at every budget; see :class:`Scores`.

    ``tokenizer`` is the one the output ids belong to, or a mapping from the records' ``tokenizer`` column to
    tokenizers; a name it lacks (every name for ``None``) is loaded by name. Checking them against a ledger's
    recorded hashes is :func:`mindcap_tok.store.tokenizers.resolve_tokenizers`'s job (every command does it).
    ``on_progress(done, total)`` is called after each chunk of records.

    Each record is read with its task's answer type (a ``task`` column; none: MGSM's integers) and the variant
    ``parser`` names (a parser object is used for every record); its gold is ``gold_text`` where set, else ``gold``.
    A task that is not built in is read from its task file in ``tasks``.
    """
    grid = check_budgets(budgets)
    table = records if isinstance(records, pa.Table) else pa.Table.from_pandas(records, preserve_index=False)
    need = [*CELL_COLUMNS, "item", "sample", "output_ids", "finish_reason"]
    if "gold_text" not in table.column_names:
        need.append("gold")
    missing = [c for c in need if c not in table.column_names]
    if missing:
        raise BadInputError(f"records lack column(s) {', '.join(missing)} needed for scoring")
    keys = table.select([*population_columns(table), "item", "sample"]).to_pandas()
    for col in CELL_COLUMNS:
        keys[col] = keys[col].astype(object)
    finish = table.column("finish_reason").to_numpy(zero_copy_only=False)
    n = table.num_rows
    if isinstance(tokenizer, ResolvedTokenizer):
        toks: ResolvedTokenizer | dict[str, ResolvedTokenizer] = tokenizer
        sha = {tokenizer.name: tokenizer.sha256}
    else:
        if "tokenizer" not in table.column_names:
            raise BadInputError("records have no 'tokenizer' column: name the tokenizer the ids belong to")
        toks = resolve_tokenizers(table.column("tokenizer").to_numpy(zero_copy_only=False), given=tokenizer)
        sha = {name: tok.sha256 for name, tok in toks.items()}
    res, versions, name = _score_tasks(table, toks, grid, parser, on_progress, tasks)
    scores, emission, correct, n_tokens = res.scores, res.emission, res.correct, res.n_tokens
    nb = len(grid)
    by_budget = keys.loc[keys.index.repeat(nb)].reset_index(drop=True)
    by_budget["budget"] = np.tile(grid, n)
    by_budget["score"] = scores.ravel()
    by_budget["truncated"] = (n_tokens[:, None] > grid[None, :]).ravel()
    by_budget["emitted"] = (emission[:, None] <= grid[None, :]).ravel()
    by_record = keys.copy()
    by_record["n_tokens"] = n_tokens
    by_record["emission"] = emission
    by_record["correct"] = correct
    by_record["finish_reason"] = finish
    if "cap" in table.column_names and "cap" not in by_record:
        by_record["cap"] = table.column("cap").to_numpy()
    if "text" in table.column_names:
        by_record["outcome"] = record_outcomes(table, correct, parser=parser, tasks=tasks, tokenizer=toks)
    if "forced" in table.column_names:  # under forcing: the forcing text appended (None: not recorded)
        by_record["forced"] = pd.array(table.column("forced").to_pylist(), dtype="boolean")
    if "retokenized" in table.column_names:  # ids re-encoded from a log's text: their length was not sampled
        by_record["retokenized"] = table.column("retokenized").fill_null(False).to_numpy(zero_copy_only=False)
    if thinks(table):
        for col, values in thought_columns(table).items():
            by_record[col] = values
    return Scores(by_budget, by_record, name, tuple(int(b) for b in grid), sha, versions)


def accuracy_curves(by_budget: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per cell (and settings) and budget: the mean strict score over all item x sample records
    (no best-of-k, no vote), with ``n``, ``longer_than_budget_share`` (share of records longer than B: cut at B by the
    prefix, not necessarily by the cap) and ``emitted_share``."""
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in by_budget.columns]
    grouped = by_budget.groupby([*keys, "budget"], dropna=False, sort=True)
    agg = {"accuracy": ("score", "mean"), "n": ("score", "size"), "longer_than_budget_share": ("truncated", "mean")}
    if "emitted" in by_budget.columns:
        agg["emitted_share"] = ("emitted", "mean")
    out = grouped.agg(**agg).reset_index()
    out["n"] = out["n"].astype(np.int64)
    return out


def with_thought_counts(curves: pd.DataFrame, by_record: pd.DataFrame) -> pd.DataFrame:
    """``curves`` (per cell, settings and budget) with the :func:`thought_summary` columns of its thinking cells
    (``thought_tokens_p50``, ``answer_tokens_p50``, ``cap_in_thought_share``; null for the others); unchanged
    when no record thinks."""
    summary = thought_summary(by_record)
    if summary.empty:
        return curves
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in summary.columns and c in curves.columns]
    cols = ["thought_tokens_p50", "answer_tokens_p50", "cap_in_thought_share"]
    return curves.merge(summary[[*keys, *cols]], on=keys, how="left")
