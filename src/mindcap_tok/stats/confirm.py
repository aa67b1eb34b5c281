"""Confirmation on independent decodes (paper §3, §4.2, Table 1's independent column, Appendix J).

The stored long-cap ledger (replay frame) makes pre-specified predictions; a second ledger of hard-capped
decodes, one decode per cap (independent frame), checks them. Per native cell and budget: the replay Δ_L with
its discovery CI, the independent Δ_L with its bootstrap SE, whether it lies inside the discovery interval, and
the sub-CDF prediction G(floor(r·B)) − G(B) against it. Per cell: whether the independent argmax falls on the
discovery peak budget, and the sub-CDF prediction error (MAE, max). Per cell and cap: the mean output length of
the independent decodes against the discovery traces truncated at the same cap, as a share of the cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..budgets import SWEEP_BUDGETS
from ..errors import BadInputError
from ..resample import DEFAULT_RESAMPLING, Resampling
from .bootstrap import Boot, grid_bootstrap
from .cap import cut_mask
from .curves import _row_keys, _scaled, native_cells, sweep
from .grid import CELL_COLUMNS, SETTING_COLUMNS, AccuracyGrid, accuracy_grid, require_columns
from .premiums import PremiumsLike, premium_table
from .roles import Arm, comparator_of, native_of
from .subcdf import compare_prediction, predict_delta

#: the columns of :class:`Confirmation`'s tables that hold proportions (tables may show them as points)
PROPORTIONS = (
    "predicted",
    "ci_low",
    "ci_high",
    "independent",
    "independent_se",
    "subcdf_predicted",
    "subcdf_error",
    "subcdf_mae",
    "subcdf_max_abs_error",
    "difference_share",
)


@dataclass(frozen=True)
class Confirmation:
    """Replay predictions checked on independent decodes (proportions; see :func:`confirm`)."""

    rows: pd.DataFrame
    cells: pd.DataFrame
    lengths: pd.DataFrame
    n_boot: int
    seed: int
    level: float
    premiums: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "n_boot": self.n_boot,
            "seed": self.seed,
            "level": self.level,
            "premiums": self.premiums,
            "rows": self.rows.to_dict(orient="records"),
            "cells": self.cells.to_dict(orient="records"),
            "lengths": self.lengths.to_dict(orient="records"),
        }


def _keys(frame: pd.DataFrame) -> list[str]:
    """Cell keys shared by a replay and an independent table: cell and settings columns, but not arm, cap or design
    (the two ledgers differ in design by construction: ``replay`` against ``independent``)."""
    return [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in frame.columns and c not in ("arm", "cap", "design")]


def _delta_se(grid: AccuracyGrid, boot: Boot, table: pd.DataFrame, budgets: Sequence[int], native: Arm) -> pd.DataFrame:
    """Bootstrap SE of Δ_L(B) per native cell and budget, from the replicates of ``boot`` (paired)."""
    rows = []
    for n in native_cells(grid, native):
        _, scaled = _scaled(table, grid, n, budgets)
        delta = boot[n, grid.budget_index(scaled)] - boot[n, grid.budget_index(budgets)]
        for b, se in zip(budgets, delta.se(), strict=True):
            rows.append({**_row_keys(grid, n), "budget": int(b), "se": float(se)})
    return pd.DataFrame(rows)


def output_lengths(replay: pd.DataFrame, independent: pd.DataFrame) -> pd.DataFrame:
    """Mean output length of independent decodes vs discovery traces truncated at the same cap, per cell and cap.

    ``replay``/``independent``: ``Scores.by_record`` of each ledger. Columns: cell keys (without ``cap``),
    ``cap``, ``n_independent``, ``mean_independent`` (mean ``n_tokens`` of the decodes capped there),
    ``n_replay``, ``mean_truncated`` (mean of min(n_tokens, cap) over the discovery traces) and
    ``difference_share`` = (mean_independent − mean_truncated) / cap. A discovery trace cut by a cap below
    the one compared says nothing about its length there: that is a one-line error.
    """
    for frame, what in ((replay, "replay by_record"), (independent, "independent by_record")):
        require_columns(frame, [*CELL_COLUMNS, "n_tokens"], what=what)
    require_columns(independent, ["cap"], what="independent by_record")
    keys = [c for c in (*CELL_COLUMNS, *SETTING_COLUMNS) if c in independent.columns and c in replay.columns]
    keys = [c for c in keys if c not in ("cap", "design")]  # the two ledgers differ in design by construction
    rep_cut = cut_mask(replay) if "cap" in replay.columns else np.zeros(len(replay), dtype=bool)
    rep_caps = replay["cap"].to_numpy(dtype=np.float64) if "cap" in replay.columns else np.full(len(replay), np.inf)
    rows = []
    for key, part in independent.groupby([*keys, "cap"], sort=True, dropna=False):
        values = dict(zip([*keys, "cap"], key, strict=True))
        cap = int(values["cap"])
        mask = np.ones(len(replay), dtype=bool)
        for k in keys:
            v = values[k]
            mask &= (replay[k].isna() if pd.isna(v) else replay[k] == v).to_numpy()
        if not mask.any():
            continue
        if (mask & rep_cut & (rep_caps < cap)).any():
            raise BadInputError(
                f"replay traces of {'/'.join(str(values[k]) for k in CELL_COLUMNS)} were cut by a cap below "
                f"{cap}: their length at cap {cap} is unknown"
            )
        truncated = np.minimum(replay["n_tokens"].to_numpy(dtype=np.float64)[mask], cap)
        mean_ind = float(part["n_tokens"].to_numpy(dtype=np.float64).mean())
        rows.append(
            {
                **{k: values[k] for k in keys},
                "cap": cap,
                "n_independent": len(part),
                "mean_independent": mean_ind,
                "n_replay": int(mask.sum()),
                "mean_truncated": float(truncated.mean()),
                "difference_share": (mean_ind - float(truncated.mean())) / cap,
            }
        )
    if not rows:
        raise BadInputError("the replay and independent ledgers share no cell")
    return pd.DataFrame(rows)


def confirm(
    replay: Any,
    independent: Any,
    *,
    premiums: PremiumsLike,
    budgets: Sequence[int] = SWEEP_BUDGETS,
    resampling: Resampling = DEFAULT_RESAMPLING,
    native: Arm | None = None,
    translate: Arm | None = None,
) -> Confirmation:
    """Check the replay ledger's predictions on an independent ledger.

    ``replay`` and ``independent`` are :class:`~mindcap_tok.scoring.score.Scores` (``by_budget`` and
    ``by_record``), scored at every B and floor(r·B).

    ``rows`` (per native cell and budget): ``predicted`` (replay Δ_L) with ``ci_low``/``ci_high`` (the
    discovery interval), ``independent`` with ``independent_se``, ``inside`` (ci_low ≤ independent ≤ ci_high),
    ``subcdf_predicted`` and ``subcdf_error`` (subcdf_predicted − independent); beyond a replay cap that cut
    traces ``predicted`` and its interval are null and ``inside`` is missing (:func:`~.curves.sweep`). ``cells``
    (per native cell): ``predicted_budget`` (the discovery peak), ``independent_argmax``, ``argmax_agree``,
    ``subcdf_mae`` and ``subcdf_max_abs_error``. ``lengths``: :func:`output_lengths`. One item resampling
    (``resampling``) per ledger; every value is a proportion. ``native``: the native arm of every cell, or each
    task's (task -> arm, as :func:`~mindcap_tok.stats.curves.sweep` takes it; None: each task's own), and
    ``translate`` its comparator.
    """
    native, translate = native_of(replay.by_record, native), comparator_of(replay.by_record, translate)
    table = premium_table(premiums)
    budgets = sorted({int(b) for b in budgets})
    disc = sweep(replay, table, budgets=budgets, resampling=resampling, native=native, translate=translate)
    grid = accuracy_grid(independent.by_budget, "independent")
    boot = grid_bootstrap(grid, resampling.n_boot, seed=resampling.seed)
    ind = sweep(grid, table, budgets=budgets, resampling=resampling, native=native, translate=translate, boot=boot)
    on = [c for c in _keys(disc.rows) if c in ind.rows.columns]
    d = disc.rows[[*on, "budget", "delta", "ci_low", "ci_high"]].rename(columns={"delta": "predicted"})
    i = ind.rows[[*on, "budget", "delta"]].rename(columns={"delta": "independent"})
    i = i.merge(_delta_se(grid, boot, table, budgets, native).rename(columns={"se": "independent_se"}))
    rows = d.merge(i, on=[*on, "budget"])
    if rows.empty:
        raise BadInputError("the replay and independent ledgers share no native cell")
    if rows.duplicated([*on, "budget"]).any():
        raise BadInputError(f"several replay cells match one independent cell on {', '.join(on)}: filter them")
    inside = (rows["ci_low"] <= rows["independent"]) & (rows["independent"] <= rows["ci_high"])
    # beyond a replay cap that cut traces the replay predicted nothing: neither inside nor outside
    rows["inside"] = inside.astype("boolean").mask(rows["predicted"].isna())
    pred = predict_delta(replay.by_record, table, budgets=budgets, native=native)
    sub = pred[[*on, "budget", "predicted"]].rename(columns={"predicted": "subcdf_predicted"})
    rows = rows.merge(sub, on=[*on, "budget"], how="left")
    rows["subcdf_error"] = rows["subcdf_predicted"] - rows["independent"]
    check = compare_prediction(pred, ind.rows, on=on)
    peaks = disc.peaks[[*on, "peak_budget"]].rename(columns={"peak_budget": "predicted_budget"})
    argmax = ind.peaks[[*on, "peak_budget"]].rename(columns={"peak_budget": "independent_argmax"})
    cells = peaks.merge(argmax, on=on)
    cells["argmax_agree"] = cells["predicted_budget"] == cells["independent_argmax"]
    errors = check[[*on, "mae", "max_abs_error"]].rename(
        columns={"mae": "subcdf_mae", "max_abs_error": "subcdf_max_abs_error"}
    )
    cells = cells.merge(errors, on=on, how="left")
    return Confirmation(
        rows=rows,
        cells=cells,
        lengths=output_lengths(replay.by_record, independent.by_record),
        n_boot=boot.n_boot,
        seed=boot.seed,
        level=resampling.level,
        premiums=disc.premiums,
    )
