"""Accuracy curves, the gap gap(B) = acc_T(B) − acc_N(B), and the budget artifact Δ_L(B), with bootstrap CIs.

Δ_L(B) = acc_N(floor(r·B)) − acc_N(B) (paper Eq. 1): the translate arm cancels, so the artifact is an
increment of the NATIVE curve between the matched budget B and the premium-scaled budget floor(r·B).
All accuracies here are proportions in [0, 1]; the CLI prints points.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..budgets import SWEEP_BUDGETS
from ..errors import BadInputError
from ..resample import DEFAULT_RESAMPLING, Resampling, scale_budget
from ..tasks.roles import COMPARATOR_ROLE, NATIVE_ROLE
from .bootstrap import Boot, bootstrap_weights, item_bootstrap, ratio_difference
from .cap import BOUNDS, EXACT, WITHIN, all_beyond_caps, cap_of
from .grid import AccuracyGrid, accuracy_grid
from .premiums import PremiumsLike, PremiumTable, lookup_premium, premium_table
from .roles import Arm, arm_mask, arm_of, comparator_of, label, native_of

if TYPE_CHECKING:
    from ..scoring import Scores

logger = logging.getLogger(__name__)


def as_grid(scores: Scores | pd.DataFrame | AccuracyGrid, frame: str = "replay") -> AccuracyGrid:
    """Accept :class:`~mindcap_tok.scoring.Scores` (its records tell what lies beyond each cap), ``Scores.by_budget``
    alone (nothing known beyond a cap), or an already built :class:`AccuracyGrid`."""
    if isinstance(scores, AccuracyGrid):
        return scores
    if isinstance(scores, pd.DataFrame):
        return accuracy_grid(scores, frame)
    return accuracy_grid(scores.by_budget, frame, records=scores.by_record)


def accuracy_table(
    scores: pd.DataFrame | AccuracyGrid, frame: str = "replay", *, boot: Boot | None = None, level: float = 0.95
) -> pd.DataFrame:
    """One row per cell and budget: key columns, ``budget``, ``accuracy``, ``n`` (records), ``n_items``;
    with ``boot`` (:func:`~mindcap_tok.stats.bootstrap.grid_bootstrap` of the same grid) also the
    pointwise percentile ``ci_low``/``ci_high``."""
    grid = as_grid(scores, frame)
    acc = grid.accuracy()
    n = grid.count.sum(axis=0)
    items = (grid.count > 0).sum(axis=0)
    nc, nb = acc.shape
    out = grid.cells.loc[np.repeat(np.arange(nc), nb)].reset_index(drop=True)
    out["budget"] = np.tile(grid.budgets, nc)
    out["accuracy"] = acc.ravel()
    out["n"] = n.ravel().astype(np.int64)
    out["n_items"] = items.ravel().astype(np.int64)
    if boot is not None:
        low, high = boot.ci(level)
        out["ci_low"], out["ci_high"] = low.ravel(), high.ravel()
    return out[out["n"] > 0].reset_index(drop=True)


def _group_keys(grid: AccuracyGrid) -> list[str]:
    return [k for k in grid.keys if k != "arm"]


def native_cells(grid: AccuracyGrid, native: Arm | None = None) -> list[int]:
    """The native cells of ``grid`` (``native``: one arm name, or per task; None: each task's own); none is a
    one-line error naming the arms present."""
    cells = grid.cells
    native = native_of(cells, native)
    nat = cells.index[arm_mask(cells, native)]
    if len(nat) == 0:
        raise BadInputError(
            f"no {label(native, NATIVE_ROLE)!r} cells (arms present: {', '.join(sorted(cells['arm'].unique()))})"
        )
    return [int(i) for i in nat]


def arm_pairs(
    grid: AccuracyGrid, native: Arm | None = None, *, translate: Arm | None = None
) -> list[tuple[int, int | None]]:
    """(native cell, matching translate cell or None) for every native cell; matching = same non-arm keys (the
    ``task`` among them). ``native``/``translate``: one arm name, or per task (:mod:`~mindcap_tok.stats.roles`;
    None: each task's own)."""
    keys = _group_keys(grid)
    cells = grid.cells
    nat = native_cells(grid, native)
    translate = comparator_of(cells, translate)
    pairs = []
    for i in nat:
        match = cells[cells["arm"] == arm_of(translate, cells.at[i, "task"] if "task" in cells else None)]
        for k in keys:
            v = cells.at[i, k]
            match = match[match[k].isna()] if pd.isna(v) else match[match[k] == v]
        pairs.append((int(i), int(match.index[0]) if len(match) else None))
    return pairs


def _row_keys(grid: AccuracyGrid, cell: int) -> dict[str, Any]:
    return {k: grid.cells.at[cell, k] for k in _group_keys(grid)}


def gap_table(
    scores: pd.DataFrame | AccuracyGrid,
    frame: str = "replay",
    *,
    native: Arm | None = None,
    translate: Arm | None = None,
) -> pd.DataFrame:
    """gap(B) = acc_translate(B) − acc_native(B) for every cell pair and scored budget (point estimates)."""
    grid = as_grid(scores, frame)
    native, translate = native_of(grid.cells, native), comparator_of(grid.cells, translate)
    acc = grid.accuracy()
    rows = []
    for n, t in arm_pairs(grid, native, translate=translate):
        if t is None:
            continue
        for b, budget in enumerate(grid.budgets):
            rows.append(
                {
                    **_row_keys(grid, n),
                    "budget": int(budget),
                    "acc_native": acc[n, b],
                    "acc_translate": acc[t, b],
                    "gap": acc[t, b] - acc[n, b],
                }
            )
    if not rows:
        raise BadInputError(
            f"no {label(translate, COMPARATOR_ROLE)!r} cell matches a {label(native, NATIVE_ROLE)!r} cell"
        )
    return pd.DataFrame(rows).dropna(subset=["gap"]).reset_index(drop=True)


def delta_table(
    scores: Scores | pd.DataFrame | AccuracyGrid,
    premiums: PremiumsLike,
    *,
    budgets: Sequence[int] = SWEEP_BUDGETS,
    frame: str = "replay",
    native: Arm | None = None,
) -> pd.DataFrame:
    """Δ_L(B) = acc_N(floor(r·B)) − acc_N(B) for every native cell (point estimates).

    ``premiums``: anything :func:`~mindcap_tok.stats.premiums.premium_table` reads. Both B and floor(r·B)
    must have been scored; a one-line error lists the missing budgets. Beyond a cell's cap the rule of
    :func:`sweep` applies: ``delta`` is null where traces were cut, and ``delta_lower``/``delta_upper`` bound it.
    """
    grid = as_grid(scores, frame)
    table = premium_table(premiums)
    acc = grid.accuracy()
    cell_c = grid.cell_cut_share()
    rows = []
    for n in native_cells(grid, native):
        r, scaled = _scaled(table, grid, n, budgets)
        bi, si = grid.budget_index(budgets), grid.budget_index(scaled)
        cap = cap_of(grid.cells.at[n, "cap"]) if "cap" in grid.cells else None
        for j, budget in enumerate(budgets):
            acc_b, acc_s = acc[n, bi[j]], acc[n, si[j]]
            row = {
                **_row_keys(grid, n),
                "budget": int(budget),
                "premium": float(r),
                "scaled_budget": int(scaled[j]),
                "acc_native": acc_b,
                "acc_native_scaled": acc_s,
                "delta": acc_s - acc_b,
            }
            if cap is not None:
                beyond = max(int(scaled[j]), int(budget)) > cap
                c = float(cell_c[n])
                row["beyond_cap"] = beyond
                row["cap_status"] = (BOUNDS if c > 0 else EXACT) if beyond else WITHIN
                # past the cap acc lies in [acc(cap), acc(cap) + c]: acc(B) too, where B itself is past it
                row["delta_lower"] = acc_s - acc_b - (c if int(budget) > cap else 0.0) if beyond else np.nan
                row["delta_upper"] = acc_s + c - acc_b if beyond else np.nan
                if beyond and c > 0:
                    row["acc_native_scaled"] = row["delta"] = np.nan
                if int(budget) > cap and c > 0:
                    row["acc_native"] = np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def _scaled(table: PremiumTable, grid: AccuracyGrid, cell: int, budgets: Sequence[int]) -> tuple[Fraction, list[int]]:
    r = lookup_premium(table, str(grid.cells.at[cell, "model"]), lang=str(grid.cells.at[cell, "lang"]))
    return r, [scale_budget(r, int(b)) for b in budgets]


@dataclass(frozen=True)
class Sweep:
    """A Δ_L sweep with item-clustered bootstrap inference (proportions; see :func:`sweep`)."""

    rows: pd.DataFrame
    peaks: pd.DataFrame
    crossovers: pd.DataFrame
    n_boot: int
    seed: int
    level: float
    frame: str
    premiums: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "frame": self.frame,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "level": self.level,
            "premiums": self.premiums,
            "rows": self.rows.to_dict(orient="records"),
            "peaks": self.peaks.to_dict(orient="records"),
            "crossovers": self.crossovers.to_dict(orient="records"),
        }


def _leader(gap: float) -> str:
    return "tie" if gap == 0 or np.isnan(gap) else ("translate" if gap > 0 else NATIVE_ROLE)


def crossovers(
    keys: dict[str, Any], budgets: Sequence[int], *, gap: np.ndarray, lead: np.ndarray
) -> list[dict[str, Any]]:
    """Transition intervals [B_a, B_b] where the leading arm changes between consecutive non-tied budgets.

    ``gap`` = acc_T − acc_N per budget, ``lead`` = bootstrap P(native leads) per budget.
    """
    out = []
    prev = None
    for j, b in enumerate(budgets):
        who = _leader(float(gap[j]))
        if who == "tie":
            continue
        if prev is not None and who != prev[1]:
            i = prev[0]
            out.append(
                {
                    **keys,
                    "from_budget": int(budgets[i]),
                    "to_budget": int(b),
                    "leader_before": prev[1],
                    "leader_after": who,
                    "native_lead_prob_before": float(lead[i]),
                    "native_lead_prob_after": float(lead[j]),
                }
            )
        prev = (j, who)
    return out


def sweep(
    scores: Scores | pd.DataFrame | AccuracyGrid,
    premiums: PremiumsLike,
    *,
    budgets: Sequence[int] = SWEEP_BUDGETS,
    resampling: Resampling = DEFAULT_RESAMPLING,
    frame: str = "replay",
    native: Arm | None = None,
    translate: Arm | None = None,
    boot: Boot | None = None,
) -> Sweep:
    """Δ_L(B) per native cell over ``budgets`` with pointwise percentile CIs and a simultaneous max-|t| band,
    the peak (argmax) with its stability, and, where a translate cell exists, gap(B) with CIs, the bootstrap
    probability that native leads, and the crossovers. ``native``/``translate``: one arm name, or each task's
    (task -> arm; cells are then paired within their task); None: each task's own native / comparator arm.

    One item-clustered resampling (``resampling``: its ``n_boot`` and ``seed``; intervals at its ``level``)
    serves every cell and budget; pass ``boot`` (from :func:`~mindcap_tok.stats.bootstrap.grid_bootstrap` on the
    same grid) to reuse one (``resampling`` then gives only the level).

    Cells with a ``cap`` (replay frame) get ``beyond_cap`` (B or floor(r·B) exceeds it), ``cap_status``
    (:data:`~.cap.WITHIN`, :data:`~.cap.EXACT`, :data:`~.cap.BOUNDS`), ``cut_share`` (c: the cell's share of traces
    cut by the cap or of unknown cut status, :attr:`~.grid.AccuracyGrid.cut_share`: pass ``Scores`` or a grid built
    with its records; 1 without them) and, beyond the cap, ``delta_lower`` = acc_N(cap) − acc_N(B) and
    ``delta_upper`` = acc_N(cap) + c − acc_N(B). Where c > 0 there, Δ_L has no estimate: ``delta``,
    ``acc_native_scaled``, its CI and band are null, and the budget counts for no peak; where B itself is beyond,
    gap(B) is null too, with ``gap_lower``/``gap_upper``.
    """
    n_boot, seed, level = resampling.n_boot, resampling.seed, resampling.level
    grid = as_grid(scores, frame)
    native, translate = native_of(grid.cells, native), comparator_of(grid.cells, translate)
    budgets = [int(b) for b in budgets]
    if not budgets or len(set(budgets)) != len(budgets):
        raise BadInputError(f"budgets must be distinct and non-empty, got {budgets}")
    budgets = sorted(budgets)
    if "cap" in grid.cells and (warning := all_beyond_caps(budgets, grid.cells["cap"].tolist())):
        logger.warning(warning)
    table = premium_table(premiums)
    pairs = arm_pairs(grid, native, translate=translate)
    needed = set(budgets)
    for n, _ in pairs:
        needed.update(_scaled(table, grid, n, budgets)[1])
    grid.budget_index(sorted(needed))  # one error listing every missing budget
    if boot is None:
        weights = bootstrap_weights(len(grid.items), n_boot, seed=seed)
        boot = item_bootstrap(grid.correct, grid.count, seed=seed, weights=weights)
    else:
        weights = bootstrap_weights(len(grid.items), boot.n_boot, seed=boot.seed)  # the resampling behind ``boot``
    cell_c = grid.cell_cut_share()
    rows, peaks, cross, used = [], [], [], {}
    for n, t in pairs:
        keys = _row_keys(grid, n)
        r, scaled = _scaled(table, grid, n, budgets)
        used[f"{keys['model']}:{keys['lang']}"] = float(r)
        bi, si = grid.budget_index(budgets), grid.budget_index(scaled)
        cap = cap_of(keys.get("cap"))
        beyond = np.zeros(len(bi), bool)
        if cap is not None:
            beyond = (np.asarray(scaled) > cap) | (np.asarray(budgets) > cap)
        c = float(cell_c[n]) if cap is not None else 0.0
        # where floor(r·B) lies beyond a cap that cut traces, acc_N(floor(r·B)) is not observed: no estimate there
        ok = np.flatnonzero(~beyond | (c == 0))
        est, lo, hi, blo, bhi = (np.full(len(budgets), np.nan) for _ in range(5))
        if len(ok):
            # = boot[n, si] − boot[n, bi], with per-replicate standard errors for a bootstrap-t band
            delta = ratio_difference(
                grid.correct[:, n, si[ok]],
                grid.count[:, n, si[ok]],
                num_b=grid.correct[:, n, bi[ok]],
                den_b=grid.count[:, n, bi[ok]],
                weights=weights,
                seed=boot.seed,
            )
            est[ok] = delta.estimate
            lo[ok], hi[ok] = delta.ci(level)
            blo[ok], bhi[ok], crit = delta.band(level)
        n_items = (grid.count[:, n, bi] > 0).any(axis=1).sum()
        acc_b, acc_s = boot.estimate[n, bi], boot.estimate[n, si]
        part = pd.DataFrame(
            {
                **{k: [v] * len(budgets) for k, v in keys.items()},
                "budget": budgets,
                "premium": float(r),
                "scaled_budget": scaled,
                "acc_native": np.where(
                    (np.asarray(budgets) > cap if cap is not None else False) & (c > 0), np.nan, acc_b
                ),
                "acc_native_scaled": np.where(beyond & (c > 0), np.nan, acc_s),
                "delta": est,
                "ci_low": lo,
                "ci_high": hi,
                "band_low": blo,
                "band_high": bhi,
            }
        )
        if cap is not None:
            part["beyond_cap"] = beyond
            part["cap_status"] = np.where(beyond, np.where(c > 0, BOUNDS, EXACT), WITHIN)
            part["cut_share"] = c
            # past the cap acc lies in [acc(cap), acc(cap) + c]: acc(B) too, where B itself is past it
            part["delta_lower"] = np.where(beyond, acc_s - acc_b - np.where(np.asarray(budgets) > cap, c, 0.0), np.nan)
            part["delta_upper"] = np.where(beyond, acc_s + c - acc_b, np.nan)
        if t is not None:
            gap = boot[t, bi] - boot[n, bi]
            glo, ghi = gap.ci(level)
            lead = (-gap).prob_positive()
            gap_est = gap.estimate.copy()
            if cap is not None:  # B itself beyond a cap that cut traces of either arm: gap(B) is not observed
                ct = float(cell_c[t])
                blind = (np.asarray(budgets) > cap) & (max(c, ct) > 0)
                gap_est[blind], glo[blind], ghi[blind], lead[blind] = np.nan, np.nan, np.nan, np.nan
                part["gap_lower"] = np.where(blind, gap.estimate - c, np.nan)
                part["gap_upper"] = np.where(blind, gap.estimate + ct, np.nan)
            part["acc_translate"] = gap.estimate + acc_b
            if cap is not None:
                part["acc_translate"] = part["acc_translate"].where(~blind)
            part["gap"] = gap_est
            part["gap_ci_low"], part["gap_ci_high"] = glo, ghi
            part["native_lead_prob"] = lead
            cross.extend(crossovers(keys, budgets, gap=gap_est, lead=lead))
        part["n_items"] = int(n_items)
        rows.append(part)
        if not len(ok):  # every budget beyond a cap that cut traces: no peak to report
            continue
        peak, stability = delta.argmax()
        k = int(ok[int(peak)])
        peaks.append(
            {
                **keys,
                "peak_budget": budgets[k],
                "scaled_budget": scaled[k],
                "delta": est[k],
                "ci_low": lo[k],
                "ci_high": hi[k],
                "band_low": blo[k],
                "band_high": bhi[k],
                "band_crit": float(crit),
                "stability": float(stability),
            }
        )
    cross_cols = [
        *_group_keys(grid),
        "from_budget",
        "to_budget",
        "leader_before",
        "leader_after",
        "native_lead_prob_before",
        "native_lead_prob_after",
    ]
    return Sweep(
        rows=pd.concat(rows, ignore_index=True),
        peaks=pd.DataFrame(peaks),
        crossovers=pd.DataFrame(cross, columns=cross_cols),
        n_boot=boot.n_boot,
        seed=boot.seed,
        level=level,
        frame=grid.frame,
        premiums=used,
    )
