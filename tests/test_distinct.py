"""Resampled distinct-item counts (mindcap_tok.distinct) against the union of the drawn units' items, resample by
resample, with the resampling matrix of bootstrap_counts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mindcap_tok.distinct import distinct_draws, occurrences
from mindcap_tok.resample import bootstrap_counts

#: columns over the same units: the items of each unit (token ids of each sentence), per column
unit = st.lists(st.integers(0, 40), max_size=12)
columns = st.integers(1, 30).flatmap(lambda n: st.lists(st.lists(unit, min_size=n, max_size=n), min_size=1, max_size=3))


def _occurrences(column: list[list[int]]):
    lens = [len(u) for u in column]
    items = np.array([i for u in column for i in u], dtype=np.int64)
    return occurrences(items, np.repeat(np.arange(len(column)), lens), n_units=len(column))


@settings(max_examples=60, deadline=None)
@given(columns, st.integers(1, 700), st.integers(0, 2**32 - 1))
def test_distinct_counts_equal_the_union_of_the_drawn_units(columns, n_boot, seed):
    got = distinct_draws([_occurrences(c) for c in columns], n_boot, seed=seed)
    weights = bootstrap_counts(len(columns[0]), n_boot, seed=seed)
    for j, column in enumerate(columns):
        want = [len(set().union(*(column[i] for i in np.flatnonzero(w)))) for w in weights]
        assert got[:, j].tolist() == want


def test_an_item_in_every_unit_is_never_left_out_and_one_in_one_unit_is_left_out_with_it():
    # item 7 is in all 50 units; item 1 only in unit 0; 10,000 resamples (the early exit and the packed bits)
    column = [[7, 1]] + [[7]] * 49
    draws = distinct_draws([_occurrences(column)], 10_000, seed=3)[:, 0]
    unit0_drawn = bootstrap_counts(50, 10_000, seed=3)[:, 0] > 0
    assert draws.tolist() == (1 + unit0_drawn).tolist()
