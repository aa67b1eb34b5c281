"""The split-half consistency check (paper §4.3, Appendix J): does G(t) from one half of the items predict Δ_L(B)
on the other half?

Per native cell and split, the cell's items are split at random into two halves (:func:`~.subcdf.split_items`): the
first half's correct-emission sub-CDF G gives the prediction G(floor(r·B)) − G(B), the second half's strict prefix
scores the observed Δ_L(B) = acc_N(floor(r·B)) − acc_N(B), both in the replay frame. Each split is scored by
:func:`~.subcdf.compare_prediction` (MAE over the budget grid, argmax agreement); repeating the split with other
seeds gives the spread. This is a consistency check, not a test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..budgets import SWEEP_BUDGETS
from ..choices import MAX_SPLITS
from ..errors import BadInputError
from ..tasks.roles import NATIVE_ROLE
from .curves import _group_keys, _scaled
from .grid import AccuracyGrid, accuracy_grid
from .premiums import PremiumsLike, premium_table
from .roles import Arm, arm_mask, label, native_of
from .subcdf import compare_prediction, split_items, subcdf_grid

if TYPE_CHECKING:
    from ..scoring import Scores


@dataclass(frozen=True)
class Splits:
    """How many seeded split-halves to draw: split ``s`` is ``split_items(items, seed + s)``, so split 0 is the
    one :func:`~.subcdf.split_items` draws from ``seed``. Checked at construction (``n`` from 1 to
    :data:`MAX_SPLITS`, ``seed`` of at least 0)."""

    n: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or not 1 <= self.n <= MAX_SPLITS:
            raise BadInputError(f"splits must be a whole number from 1 to {MAX_SPLITS:,}, got {self.n!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise BadInputError(f"the split seed must be a whole number of at least 0, got {self.seed!r}")

    def seeds(self) -> list[int]:
        """The seed of each split, in order."""
        return [self.seed + s for s in range(self.n)]


@dataclass(frozen=True)
class Consistency:
    """The split-half check (proportions): ``cells`` one row per native cell (its keys, ``premium``, ``n_items``,
    ``splits``, ``mae``/``mae_sd``/``mae_min``/``mae_max`` over splits, ``peak_agree`` (splits whose predicted peak
    budget is the observed one) and ``peak_agree_share``); ``splits`` one row per cell and split (``split``,
    ``seed``, ``premium``, ``n_predict``, ``n_observe``, and :func:`~.subcdf.compare_prediction`'s columns)."""

    cells: pd.DataFrame
    splits: pd.DataFrame
    budgets: tuple[int, ...]
    n_splits: int
    seed: int

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "frame": "replay",
            "budgets": list(self.budgets),
            "n_splits": self.n_splits,
            "seed": self.seed,
            "cells": self.cells.to_dict(orient="records"),
            "splits": self.splits.to_dict(orient="records"),
        }


def _half_delta(grid: AccuracyGrid, cell: int, rows: np.ndarray, bi: np.ndarray, si: np.ndarray) -> np.ndarray:
    """acc(floor(r·B)) − acc(B) of ``cell`` over the items at positions ``rows`` of ``grid``."""
    acc = grid.correct[rows, cell].sum(axis=0) / grid.count[rows, cell].sum(axis=0)
    return acc[si] - acc[bi]


def _positions(grid: AccuracyGrid, items: np.ndarray) -> np.ndarray:
    """Positions of ``items`` on ``grid``'s item axis (every item is there: both grids hold the same records)."""
    return np.searchsorted(grid.items, items)


def _cell_splits(
    emitted: AccuracyGrid, observed: AccuracyGrid, cell: int, *, table: pd.DataFrame, budgets: list[int], splits: Splits
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """One cell's rows for every split: predicted Δ_L (G on the first half), observed Δ_L (strict scores on the
    second half) per budget, and the split's seed, premium and half sizes."""
    keys = {k: observed.cells.at[cell, k] for k in _group_keys(observed)}
    r, scaled = _scaled(table, observed, cell, budgets)
    bi, si = observed.budget_index(budgets), observed.budget_index(scaled)
    gbi, gsi = emitted.budget_index(budgets), emitted.budget_index(scaled)
    items = observed.items[observed.count[:, cell].sum(axis=1) > 0]
    if len(items) < 2:
        named = "/".join(str(observed.cells.at[cell, k]) for k in ("model", "arm", "lang"))
        raise BadInputError(f"cell {named} has {len(items)} item: a split-half check needs at least two")
    predicted, seen, sizes = [], [], []
    for s, seed in enumerate(splits.seeds()):
        first, second = split_items(items, seed)
        pred = _half_delta(emitted, cell, _positions(emitted, first), gbi, gsi)
        obs = _half_delta(observed, cell, _positions(observed, second), bi, si)
        split = {**keys, "split": s}
        predicted += [{**split, "budget": b, "predicted": p} for b, p in zip(budgets, pred, strict=True)]
        seen += [{**split, "budget": b, "delta": d} for b, d in zip(budgets, obs, strict=True)]
        sizes.append({**split, "seed": seed, "premium": float(r), "n_predict": len(first), "n_observe": len(second)})
    return predicted, seen, sizes


def consistency(
    scores: Scores,
    premiums: PremiumsLike,
    *,
    budgets: Sequence[int] = SWEEP_BUDGETS,
    splits: Splits = Splits(),
    native: Arm | None = None,
) -> Consistency:
    """The split-half check of every ``native`` cell of ``scores`` (replay frame: one long ledger's prefixes).

    ``scores``: a :class:`~mindcap_tok.scoring.score.Scores` (``by_record`` gives E and C for G, ``by_budget`` the
    held-out strict scores) scored at every B of ``budgets`` and every floor(r·B); ``premiums``: anything
    :func:`~.premiums.premium_table` reads. A cell needs at least two items; a missing budget, or a floor(r·B)
    beyond a cap that cut traces, is a one-line error.
    """
    budgets = [int(b) for b in budgets]
    if not budgets or len(set(budgets)) != len(budgets):
        raise BadInputError(f"budgets must be distinct and non-empty, got {budgets}")
    budgets = sorted(budgets)
    table = premium_table(premiums)
    native = native_of(scores.by_record, native)
    records = scores.by_record[arm_mask(scores.by_record, native)]
    if records.empty:
        raise BadInputError(f"scores have no {label(native, NATIVE_ROLE)!r} records")
    observed = accuracy_grid(scores.by_budget[arm_mask(scores.by_budget, native)], "replay")
    needed = set(budgets)
    for cell in range(len(observed.cells)):
        needed.update(_scaled(table, observed, cell, budgets)[1])
    emitted = subcdf_grid(records, sorted(needed))
    if not emitted.cells.equals(observed.cells):
        raise BadInputError("by_record and by_budget hold different cells; pass one scoring's Scores")
    predicted_rows, observed_rows, sizes = [], [], []
    for cell in range(len(observed.cells)):
        rows = _cell_splits(emitted, observed, cell, table=table, budgets=budgets, splits=splits)
        predicted_rows += rows[0]
        observed_rows += rows[1]
        sizes += rows[2]
    on = [*_group_keys(observed), "split"]
    per_split = pd.DataFrame(sizes).merge(
        compare_prediction(pd.DataFrame(predicted_rows), pd.DataFrame(observed_rows), on=on), on=on, how="left"
    )
    return Consistency(
        cells=_per_cell(per_split, _group_keys(observed)),
        splits=per_split,
        budgets=tuple(budgets),
        n_splits=splits.n,
        seed=splits.seed,
    )


def _per_cell(per_split: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The spread over splits of each cell's MAE (sample SD; NaN with one split) and its peak agreement."""
    rows = []
    for key, part in per_split.groupby(keys, sort=True, dropna=False):
        mae = part["mae"].to_numpy(dtype=np.float64)
        agree = int(part["argmax_agree"].sum())
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "premium": float(part["premium"].iloc[0]),
                "n_items": int(part["n_predict"].iloc[0] + part["n_observe"].iloc[0]),
                "splits": len(part),
                "mae": float(mae.mean()),
                "mae_sd": float(mae.std(ddof=1)) if len(mae) > 1 else float("nan"),
                "mae_min": float(mae.min()),
                "mae_max": float(mae.max()),
                "peak_agree": agree,
                "peak_agree_share": agree / len(part),
            }
        )
    return pd.DataFrame(rows)
