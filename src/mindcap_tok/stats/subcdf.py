"""The correct-emission sub-CDF G(t) = P(C=1, E ≤ t) and the Δ_L prediction it gives (paper Eq. 1, §4.3).

From one long-cap ledger's ``Scores.by_record`` (emission position E, completed-trace correctness C),
Δ_L(B) is predicted as G(floor(r·B)) − G(B). E is the first budget from which the prefix reads the completed
trace's answer (the answer line complete: ``#### 4`` of ``#### 42478`` is not yet it), so in the replay frame
the strict prefix score at B is C·1[E ≤ B] and the prediction equals the replay Δ_L exactly. The one
exception is a prefix that reads the gold number only in passing (``#### 4`` of ``#### 42`` with gold 4, or a
line that later becomes non-compliant). Against a second ledger (independent
decodes, or held-out items) it is a consistency check scored by MAE and argmax agreement. The naive
factorization P(C=1)·P(B < E ≤ floor(r·B)) ignores the dependence between C and E and is reported for
contrast.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..budgets import SWEEP_BUDGETS
from ..errors import BadInputError
from ..resample import scale_budget
from ..tasks.roles import NATIVE_ROLE
from .cap import cell_cut_share, cut_mask, cut_shares
from .curves import _row_keys, delta_table, native_cells
from .grid import CELL_COLUMNS, SETTING_COLUMNS, AccuracyGrid, _cell_ids, require_columns
from .premiums import PremiumsLike, lookup_premium, premium_table
from .roles import Arm, arm_mask, label, native_of

_BY_RECORD_REQUIRED = (*CELL_COLUMNS, "item", "emission", "correct")


def subcdf_grid(by_record: pd.DataFrame, points: Sequence[int]) -> AccuracyGrid:
    """G(t) per cell as an :class:`AccuracyGrid` (``budget`` = t), so every bootstrap tool applies to it.

    A record counts at t as C·1[E ≤ t]. A trace stopped by its cap says nothing about t > cap: asking
    for such t raises a one-line error (G is only identified up to the stored cap).
    """
    require_columns(by_record, _BY_RECORD_REQUIRED, what="by_record")
    if by_record.empty:
        raise BadInputError("by_record is empty")
    pts = np.asarray(sorted({int(t) for t in points}), dtype=np.int64)
    if len(pts) == 0 or pts[0] < 1:
        raise BadInputError(f"sub-CDF points must be positive, got {list(points)}")
    if "cap" in by_record.columns:
        cut = cut_mask(by_record)
        caps = by_record["cap"].to_numpy(dtype=np.float64)
        beyond = cut & (pts[-1] > caps)
        if beyond.any():
            lowest = int(caps[beyond].min())
            raise BadInputError(
                f"G(t) is not identified for t > {lowest}: {int(beyond.sum())} traces were cut by that cap "
                f"(largest point asked: {pts[-1]}); use budgets whose floor(r·B) stays within the cap"
            )
    keys = [*CELL_COLUMNS] + [c for c in SETTING_COLUMNS if c in by_record.columns]
    cells, cell_id = _cell_ids(by_record, keys)
    items, item_id = np.unique(by_record["item"].to_numpy(dtype=np.int64), return_inverse=True)
    emission = by_record["emission"].to_numpy(dtype=np.float64)
    correct = by_record["correct"].to_numpy(dtype=np.float64)
    hit = (correct[:, None] == 1) & (emission[:, None] <= pts[None, :])  # NaN (never) compares False
    shape = (len(items), len(cells))
    flat = np.ravel_multi_index((item_id, cell_id), shape)
    size = shape[0] * shape[1]
    per_item = np.stack([np.bincount(flat, weights=hit[:, j], minlength=size) for j in range(len(pts))], axis=-1)
    count = np.bincount(flat, minlength=size).astype(np.float64)
    return AccuracyGrid(
        cells=cells,
        budgets=pts,
        items=items,
        correct=per_item.reshape(*shape, len(pts)),
        count=np.repeat(count.reshape(*shape, 1), len(pts), axis=-1),
        frame="replay",
        cut_share=cell_cut_share(cells, cut_shares(by_record)),
    )


def subcdf(by_record: pd.DataFrame, points: Sequence[int]) -> pd.DataFrame:
    """G(t) for every cell and point t: key columns, ``t``, ``G``, ``n``."""
    grid = subcdf_grid(by_record, points)
    g = grid.accuracy()
    nc, nt = g.shape
    out = grid.cells.loc[np.repeat(np.arange(nc), nt)].reset_index(drop=True)
    out["t"] = np.tile(grid.budgets, nc)
    out["G"] = g.ravel()
    out["n"] = np.repeat(grid.count[:, :, 0].sum(axis=0), nt).astype(np.int64)
    return out


def predict_delta(
    by_record: pd.DataFrame,
    premiums: PremiumsLike,
    *,
    budgets: Sequence[int] = SWEEP_BUDGETS,
    native: Arm | None = None,
) -> pd.DataFrame:
    """Predicted Δ_L(B) = G(floor(r·B)) − G(B) per native cell, plus the naive factorization.

    Columns: key columns (without ``arm``), ``budget``, ``premium``, ``scaled_budget``, ``G_budget``,
    ``G_scaled``, ``predicted``, ``p_correct`` (P(C=1)), ``p_window`` (P(B < E ≤ floor(r·B))), ``naive``.
    """
    table = premium_table(premiums)
    budgets = [int(b) for b in budgets]
    native = native_of(by_record, native)
    nat = by_record[arm_mask(by_record, native)] if "arm" in by_record.columns else by_record
    if nat.empty:
        raise BadInputError(f"by_record has no {label(native, NATIVE_ROLE)!r} records")
    scaled_all = set(budgets)
    for model, lang in nat[["model", "lang"]].drop_duplicates().itertuples(index=False):
        r = lookup_premium(table, str(model), lang=str(lang))
        scaled_all.update(scale_budget(r, b) for b in budgets)
    grid = subcdf_grid(nat, sorted(scaled_all))
    pred = delta_table(grid, table, budgets=budgets, native=native).rename(
        columns={"acc_native": "G_budget", "acc_native_scaled": "G_scaled", "delta": "predicted"}
    )
    # naive factorization: P(C=1) · P(B < E ≤ floor(rB)), per cell
    keys = [k for k in grid.keys if k != "arm"]
    naive_rows = []
    for n in native_cells(grid, native):
        sel = _select(nat, grid, n)
        em = sel["emission"].to_numpy(dtype=np.float64)
        p_correct = float(sel["correct"].to_numpy(dtype=np.float64).mean())
        r = lookup_premium(table, str(grid.cells.at[n, "model"]), lang=str(grid.cells.at[n, "lang"]))
        for b in budgets:
            window = float(((em > b) & (em <= scale_budget(r, b))).mean())
            naive_rows.append(
                {
                    **_row_keys(grid, n),
                    "budget": b,
                    "p_correct": p_correct,
                    "p_window": window,
                    "naive": p_correct * window,
                }
            )
    return pred.merge(pd.DataFrame(naive_rows), on=[*keys, "budget"], how="left")


def _select(frame: pd.DataFrame, grid: AccuracyGrid, cell: int) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for k in grid.keys:
        v = grid.cells.at[cell, k]
        mask &= (frame[k].isna() if pd.isna(v) else frame[k] == v).to_numpy()
    return frame[mask]


def compare_prediction(
    predicted: pd.DataFrame, observed: pd.DataFrame, *, on: Sequence[str] = ("model", "lang")
) -> pd.DataFrame:
    """Score predicted Δ_L against Δ_L observed on a second ledger (independent decodes or held-out items).

    ``predicted``: :func:`predict_delta` output; ``observed``: ``delta_table``/``sweep().rows`` of the other
    ledger. Per cell: budgets compared, ``mae`` and ``max_abs_error`` (proportions), the argmax budget of
    each and whether they agree, and ``naive_mae`` for the naive factorization.
    """
    keys = list(on)
    require_columns(predicted, [*keys, "budget", "predicted"], what="predicted")
    require_columns(observed, [*keys, "budget", "delta"], what="observed")
    cols = [*keys, "budget", "predicted"] + (["naive"] if "naive" in predicted.columns else [])
    both = predicted[cols].merge(observed[[*keys, "budget", "delta"]], on=[*keys, "budget"])
    if both.empty:
        raise BadInputError("predicted and observed share no (cell, budget) rows")
    rows = []
    for key, part in both.groupby(keys, sort=True, dropna=False):  # a setting may be unset (None)
        part = part.sort_values("budget")
        err = (part["predicted"] - part["delta"]).abs()
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row.update(
            {
                "n_budgets": len(part),
                "mae": float(err.mean()),
                "max_abs_error": float(err.max()),
                "argmax_predicted": int(part["budget"].iloc[int(np.argmax(part["predicted"].to_numpy()))]),
                "argmax_observed": int(part["budget"].iloc[int(np.argmax(part["delta"].to_numpy()))]),
            }
        )
        row["argmax_agree"] = row["argmax_predicted"] == row["argmax_observed"]
        if "naive" in part.columns:
            row["naive_mae"] = float((part["naive"] - part["delta"]).abs().mean())
        rows.append(row)
    return pd.DataFrame(rows)


def split_items(items: Sequence[int] | np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split item ids into two halves at random (seeded): predict on one, observe on the other."""
    ids = np.unique(np.asarray(items, dtype=np.int64))
    if len(ids) < 2:
        raise BadInputError("need at least two items to split")
    perm = np.random.default_rng(seed).permutation(ids)
    half = len(ids) // 2
    return np.sort(perm[:half]), np.sort(perm[half:])
