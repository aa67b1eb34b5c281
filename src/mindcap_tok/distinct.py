"""Bootstrap of a count of distinct items over resampled units: how many distinct token ids a language's text uses,
in every resample of its sentences.

A count of distinct items is not a ratio of sums, so the premium's re-weighting of per-sentence sums does not give
it. Resample b uses item t unless b draws none of the units (sentences) t occurs in, so

    distinct_b = D - #{t : every unit of t has weight 0 in b}.

Each unit's "left out" indicator over the resamples is kept as a row of bits (one bit per resample). An item
in one unit is left out where that unit is: those are summed with one matrix product per block of resamples. An
item in k > 1 units is left out where the AND of its units' rows is set; the AND stops early once no resample is
left (after about ln(n_boot) rows for a frequent item, since each unit is left out of a resample with probability
about 1/e), and the set bits of the items that remain are counted per resample. No library offers this
(positional popcount over bit rows, early-exit AND), so it is written here on numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import BadInputError
from .resample import bootstrap_blocks

#: rows whose bits are counted per unpack in :func:`_column_counts`: a count per bit is added in one byte lane of a
#: uint64 word, so at most 255 rows at a time
_LANE_ROWS = 255
#: AND steps after which an item whose row has no bit left is dropped (before it, almost none is empty: about
#: n_boot · e^-step bits remain)
_DROP_FROM_STEP = 6


@dataclass(frozen=True)
class Occurrences:
    """The units each distinct item occurs in: ``units[starts[i]:starts[i+1]]`` (ascending) for item i of
    ``n_items``; ``n_units`` units in all (the resampled ones)."""

    units: np.ndarray
    starts: np.ndarray
    n_units: int

    @property
    def n_items(self) -> int:
        return len(self.starts) - 1

    @property
    def sizes(self) -> np.ndarray:
        """How many units each item occurs in."""
        return np.diff(self.starts)


def occurrences(items: np.ndarray, units: np.ndarray, *, n_units: int) -> Occurrences:
    """The :class:`Occurrences` of ``items[i]`` (non-negative ids) occurring in ``units[i]`` (in ``range(n_units)``)."""
    key = np.sort(np.asarray(items, dtype=np.int64) * n_units + np.asarray(units, dtype=np.int64))
    if len(key):
        key = key[np.r_[True, key[1:] != key[:-1]]]
    item, unit = np.divmod(key, n_units)
    first = np.flatnonzero(np.r_[True, item[1:] != item[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    return Occurrences(unit.astype(np.int32), np.r_[first, len(key)].astype(np.int64), n_units)


class DistinctBootstrap:
    """Resampled distinct-item counts of several columns (each an :class:`Occurrences` over the same units), fed the
    resampling matrix block by block (:meth:`add_block`), so that it shares one pass over the draws with other
    statistics; :meth:`draws` gives the (n_boot, columns) counts."""

    def __init__(self, columns: Sequence[Occurrences], n_boot: int) -> None:
        n = {occ.n_units for occ in columns}
        if len(n) > 1:
            raise BadInputError(
                f"distinct counts over different numbers of units ({sorted(n)}) cannot be resampled together"
            )
        self.columns = list(columns)
        self.n_boot = n_boot
        self.n_units = n.pop() if n else 0
        words = -(-n_boot // 64)
        #: bit b of row s: resample b leaves unit s out (bytes in resample order, as np.packbits writes them)
        self._left_out = np.zeros((self.n_units, words * 8), dtype=np.uint8)
        singles = np.zeros((self.n_units, len(self.columns)), dtype=np.float32)
        for j, occ in enumerate(self.columns):
            one = occ.starts[:-1][occ.sizes == 1]
            singles[:, j] = np.bincount(occ.units[one], minlength=self.n_units)
        self._singles = singles
        self._absent = np.zeros((n_boot, len(self.columns)), dtype=np.float64)

    def add_block(self, start: int, weights: np.ndarray) -> None:
        """Take rows ``start ..`` of the resampling matrix (resamples × units); ``start`` a multiple of 8."""
        left = weights == 0
        rows = len(weights)
        self._left_out[:, start // 8 : start // 8 + -(-rows // 8)] = np.packbits(left.T, axis=1)
        # items in one unit: exact in float32 (a count below 2**24)
        self._absent[start : start + rows] = left.astype(np.float32) @ self._singles

    def draws(self) -> np.ndarray:
        """(n_boot, columns) distinct items per resample."""
        left_out = self._left_out.view(np.uint64)
        out = np.empty_like(self._absent)
        for j, occ in enumerate(self.columns):
            absent = self._absent[:, j] + _multi_unit_absent(occ, left_out)[: self.n_boot]
            out[:, j] = occ.n_items - absent
        return out


def _multi_unit_absent(occ: Occurrences, left_out: np.ndarray) -> np.ndarray:
    """Per resample, how many items of more than one unit it leaves out (a count per bit of ``left_out``'s rows)."""
    sizes = occ.sizes
    order = np.argsort(-sizes, kind="stable")
    order = order[sizes[order] > 1]
    first, size = occ.starts[order], sizes[order]  # largest first: the items that finish are always the tail
    alive = left_out[occ.units[first]]
    absent = np.zeros(left_out.shape[1] * 64, dtype=np.int64)
    live, step = len(first), 1
    while live:
        np.bitwise_and(alive[:live], left_out[occ.units[first[:live] + step]], out=alive[:live])
        step += 1
        going_on = int(np.count_nonzero(size[:live] > step))
        if going_on < live:  # items of exactly `step` units are complete
            absent += _column_counts(alive[going_on:live])
        live = going_on
        if step >= _DROP_FROM_STEP and live:
            keep = np.flatnonzero(alive[:live].any(axis=1))
            if len(keep) < live:
                alive, first, size, live = alive[keep], first[keep], size[keep], len(keep)
    return absent


def _column_counts(rows: np.ndarray) -> np.ndarray:
    """How many of ``rows`` (uint64 bit rows) have each bit set (bits in np.packbits order).

    Each unpacked bit is a byte; eight of them side by side in a uint64 are summed as eight independent byte
    lanes, 255 rows at a time, so the sum reads 1/8 of the words a byte-wise sum would."""
    out = np.zeros(rows.shape[1] * 64, dtype=np.int64)
    for i in range(0, len(rows), _LANE_ROWS):
        bits = np.unpackbits(np.ascontiguousarray(rows[i : i + _LANE_ROWS]).view(np.uint8), axis=1)
        out += bits.view(np.uint64).sum(axis=0, dtype=np.uint64).view(np.uint8)
    return out


def distinct_draws(columns: Sequence[Occurrences], n_boot: int, *, seed: int) -> np.ndarray:
    """(n_boot, columns) distinct items in each resample of the units, drawn as
    :func:`~mindcap_tok.resample.bootstrap_counts` draws them (same seed, same resamples)."""
    boot = DistinctBootstrap(columns, n_boot)
    for start, weights in bootstrap_blocks(boot.n_units, n_boot, seed=seed):
        boot.add_block(start, weights)
    return boot.draws()
