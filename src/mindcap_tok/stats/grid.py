"""Per-item sums of strict scores on a (cell × budget) grid: the one array every statistic starts from.

A cell is (model, arm, lang) plus the generation settings present in the records (``design``, ``announced``,
``announce_style``, ``forcing``, and in the replay frame ``cap``): the ledger's own setting columns, so forced
and unforced records, or two announcement styles, are never pooled. Two frames read the scoring contract's
``by_budget``:

- **replay**: each stored long generation is scored at many prefix lengths; ``budget`` is the prefix length.
- **independent**: each record is its own hard-capped decode; only rows with ``budget == cap`` count, and
  the cap *is* the budget (records of different caps are different samples of the same items).

Items are MGSM row indices shared by every language and arm, so one item axis serves every cell: a bootstrap
that resamples items re-weights all cells together (a paired, item-clustered resample).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..choices import FRAMES as FRAMES
from ..errors import BadInputError
from ..store import CELL_COLUMNS as CELL_COLUMNS  # what names a cell (re-exported)
from ..store import SETTING_COLUMNS as SETTING_COLUMNS  # the generation settings that split cells
from ..tasks.roles import COMPARATOR_ROLE, NATIVE_ROLE
from .cap import cell_cut_share, cut_shares
from .roles import Arm, arm_of, comparator_of, label, native_of

_BY_BUDGET_REQUIRED = (*CELL_COLUMNS, "item", "budget", "score")


def require_columns(frame: pd.DataFrame, columns: Sequence[str], *, what: str) -> None:
    """Raise a one-line error naming the missing columns of ``frame``."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise BadInputError(f"{what} lacks column(s) {', '.join(missing)} (have: {', '.join(map(str, frame.columns))})")


def cell_columns(frame: pd.DataFrame, kind: str = "replay") -> list[str]:
    """The key columns of a cell in ``frame`` under frame ``kind`` (``cap`` is the budget when independent)."""
    if kind not in FRAMES:
        raise BadInputError(f"unknown frame {kind!r}; use one of {', '.join(FRAMES)}")
    settings = [c for c in SETTING_COLUMNS if c in frame.columns and not (kind == "independent" and c == "cap")]
    return [*CELL_COLUMNS, *settings]


def budget_view(by_budget: pd.DataFrame, kind: str = "replay") -> pd.DataFrame:
    """The rows of ``by_budget`` that define acc(B) in frame ``kind`` (a filtered view, not a copy)."""
    require_columns(by_budget, _BY_BUDGET_REQUIRED, what="by_budget")
    if kind == "independent":
        require_columns(by_budget, ["cap"], what="by_budget (independent frame)")
        return by_budget[by_budget["budget"].to_numpy() == by_budget["cap"].to_numpy()]
    if kind != "replay":
        raise BadInputError(f"unknown frame {kind!r}; use one of {', '.join(FRAMES)}")
    return by_budget


@dataclass(frozen=True)
class AccuracyGrid:
    """Per-item score sums and sample counts for every cell and budget.

    ``correct[i, c, b]`` is the number of item ``items[i]``'s samples scoring 1 in cell ``c`` at budget
    ``budgets[b]``; ``count`` the number scored (0 where the cell has no record of that item/budget).
    ``cut_share[c]``: cell ``c``'s share of records cut by their cap or of unknown cut status
    (:func:`~.cap.cut_shares`), what can be said beyond the cap; None where the records were not given (every
    capped cell may then have been cut).
    """

    cells: pd.DataFrame
    budgets: np.ndarray
    items: np.ndarray
    correct: np.ndarray
    count: np.ndarray
    frame: str = "replay"
    cut_share: np.ndarray | None = None

    def cell_cut_share(self) -> np.ndarray:
        """Per cell, the share c of records cut by the cap (1 where not known: the widest bound)."""
        return np.ones(len(self.cells)) if self.cut_share is None else self.cut_share

    @property
    def keys(self) -> list[str]:
        return list(self.cells.columns)

    def accuracy(self) -> np.ndarray:
        """(n_cells, n_budgets) mean strict score over all item × sample records (NaN where none)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.correct.sum(axis=0) / self.count.sum(axis=0)

    def budget_index(self, budgets: Sequence[int] | np.ndarray) -> np.ndarray:
        """Positions of ``budgets`` on the grid; a one-line error lists any that were not scored."""
        wanted = np.asarray(budgets, dtype=np.int64)
        pos = np.searchsorted(self.budgets, wanted)
        ok = (pos < len(self.budgets)) & (self.budgets[np.minimum(pos, len(self.budgets) - 1)] == wanted)
        if not ok.all():
            missing = sorted({int(b) for b in wanted[~ok]})
            raise BadInputError(
                f"no scores at budget(s) {', '.join(map(str, missing))} in the {self.frame} frame "
                f"(scored: {', '.join(map(str, self.budgets))}); score the ledger at these budgets too"
            )
        return pos

    def select(self, **selector: object) -> np.ndarray:
        """Indices of the cells whose key columns equal every given value (``None`` values are ignored)."""
        mask = np.ones(len(self.cells), dtype=bool)
        for key, value in selector.items():
            if value is None:
                continue
            if key not in self.cells.columns:
                raise BadInputError(f"cells have no column {key!r} (have: {', '.join(self.cells.columns)})")
            col = self.cells[key]
            mask &= (col.isna() if _is_missing(value) else col == value).to_numpy()
        return np.flatnonzero(mask)

    def one_cell(self, **selector: object) -> int:
        """The index of the single cell matching ``selector``; a one-line error if none or several match."""
        found = self.select(**selector)
        described = ", ".join(f"{k}={v}" for k, v in selector.items() if v is not None)
        if len(found) == 0:
            raise BadInputError(f"no cell with {described}")
        if len(found) > 1:
            rows = self.cells.iloc[found].drop(columns=[k for k in selector if k in self.cells]).drop_duplicates()
            raise BadInputError(f"{len(found)} cells match {described}; also fix {', '.join(rows.columns)}")
        return int(found[0])

    def subset(self, cells: np.ndarray | None = None, budgets: Sequence[int] | None = None) -> AccuracyGrid:
        """A smaller grid with the given cell indices and budgets."""
        ci = np.arange(len(self.cells)) if cells is None else np.asarray(cells)
        bi = np.arange(len(self.budgets)) if budgets is None else self.budget_index(budgets)
        return AccuracyGrid(
            cells=self.cells.iloc[ci].reset_index(drop=True),
            budgets=self.budgets[bi],
            items=self.items,
            correct=self.correct[:, ci][:, :, bi],
            count=self.count[:, ci][:, :, bi],
            frame=self.frame,
            cut_share=None if self.cut_share is None else self.cut_share[ci],
        )


def _is_missing(value: object) -> bool:
    return value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _cell_ids(frame: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct key combinations (sorted, missing values last) and each row's cell index.

    Hash-factorizes each key column and combines the codes; several times faster than a pandas
    multi-key groupby on a million rows.
    """
    codes, sizes = [], []
    for key in keys:
        code, uniques = pd.factorize(frame[key], use_na_sentinel=False)
        codes.append(code)
        sizes.append(max(len(uniques), 1))
    combined = np.ravel_multi_index(codes, sizes) if codes else np.zeros(len(frame), dtype=np.int64)
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    cells = frame[keys].iloc[first].reset_index(drop=True)
    order = cells.sort_values(keys, na_position="last", kind="stable").index.to_numpy()
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return cells.iloc[order].reset_index(drop=True), rank[inverse.ravel()]


def accuracy_grid(
    by_budget: pd.DataFrame,
    frame: str = "replay",
    *,
    filters: Mapping[str, object] | None = None,
    records: pd.DataFrame | None = None,
) -> AccuracyGrid:
    """Build the per-item grid from ``Scores.by_budget`` (one row per record × budget).

    ``filters`` keeps only rows whose columns equal the given values (e.g. ``{"model": "qwen3-8b"}``).
    ``records`` (``Scores.by_record``, with ``finish_reason``) give each cell's share of traces cut by its cap
    (:attr:`AccuracyGrid.cut_share`): without them nothing is known beyond a cap.
    """
    view = budget_view(by_budget, frame)
    for key, value in (filters or {}).items():
        require_columns(view, [key], what="by_budget")
        view = view[view[key] == value]
    if view.empty:
        after = f" after filters {dict(filters)}" if filters else ""
        raise BadInputError(f"no scored rows left in the {frame} frame{after}")
    keys = cell_columns(view, frame)
    cells, cell_id = _cell_ids(view, keys)
    items, item_id = np.unique(view["item"].to_numpy(dtype=np.int64), return_inverse=True)
    budgets, budget_id = np.unique(view["budget"].to_numpy(dtype=np.int64), return_inverse=True)
    score = view["score"].to_numpy(dtype=np.float64)
    if np.isnan(score).any() or not np.isin(score, (0.0, 1.0)).all():
        raise BadInputError("by_budget 'score' must be 0/1 without missing values")
    shape = (len(items), len(cells), len(budgets))
    flat = np.ravel_multi_index((item_id, cell_id, budget_id), shape)
    size = int(np.prod(shape))
    correct = np.bincount(flat, weights=score, minlength=size).reshape(shape)
    count = np.bincount(flat, minlength=size).reshape(shape).astype(np.float64)
    cut = None if records is None else cell_cut_share(cells, cut_shares(records))
    return AccuracyGrid(
        cells=cells, budgets=budgets, items=items, correct=correct, count=count, frame=frame, cut_share=cut
    )


#: how a mixed setting is named in a refusal ("cell m/native/tha_Thai mixes caps 256 and 512")
_SETTING_NAMES = {
    "task": "tasks",
    "design": "designs",
    "cap": "caps",
    "announced": "announced budgets",
    "announce_style": "announcement styles",
    "forcing": "forcing settings",
}


def _same(values: pd.Series | np.ndarray, value: object) -> np.ndarray:
    """Where ``values`` equal ``value``, a missing value equal to a missing one."""
    values = pd.Series(values)
    return values.isna().to_numpy() if pd.isna(value) else (values == value).fillna(False).to_numpy(dtype=bool)


@dataclass(frozen=True)
class ArmCoverage:
    """The items each compared pair of arms holds (one row per pair: its ``keys`` (model, lang and the settings
    that split cells), the two arms' item counts, ``common``, ``items``), and whether comparisons were restricted to
    the items both hold."""

    pairs: pd.DataFrame
    common_items: bool
    native: str
    translate: str
    keys: tuple[str, ...] = ("model", "lang")

    @property
    def restricted(self) -> pd.DataFrame:
        """The pairs whose arms hold different items (compared on their ``common`` items only)."""
        differs = (self.pairs[f"items_{self.native}"] != self.pairs["common"]) | (
            self.pairs[f"items_{self.translate}"] != self.pairs["common"]
        )
        return self.pairs[differs.to_numpy()] if self.common_items else self.pairs.iloc[:0]

    def keep(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``frame`` (the pair keys and ``item``) that the comparisons use: every row, except that a
        restricted pair's rows (every arm of its model, language and settings) keep only the items both arms hold."""
        restricted = self.restricted
        if restricted.empty:
            return frame
        mask = np.ones(len(frame), dtype=bool)
        for row in restricted.to_dict(orient="records"):
            group = np.ones(len(frame), dtype=bool)
            for key in self.keys:
                group &= _same(frame[key], row[key])
            mask &= ~group | np.isin(frame["item"].to_numpy(), row["items"])
        return frame[mask]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the flag and every pair's counts (without the item lists)."""
        pairs = self.pairs.drop(columns=["items"]).astype(object)
        return {
            "common_items": self.common_items,
            "arm_items": pairs.where(pairs.notna(), None).to_dict(orient="records"),
        }

    def footer(self) -> str:
        """A table footer naming the pairs compared on their common items only ('' when none)."""
        settings = [k for k in self.keys if k in SETTING_COLUMNS and self.pairs[k].nunique(dropna=False) > 1]
        parts = [
            f"{_label(r, self.keys, settings)} on {r['common']} items ({self.native} {r[f'items_{self.native}']}, "
            f"{self.translate} {r[f'items_{self.translate}']})"
            for r in self.restricted.to_dict(orient="records")
        ]
        return f"--common-items: compared on the items both arms hold: {'; '.join(parts)}\n" if parts else ""


def _show(value: object) -> str:
    """A setting's value in words: ``—`` when missing, a whole float as an integer (``256``, not ``256.0``)."""
    if pd.isna(value):
        return "—"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _label(row: Mapping[str, Any], keys: Sequence[str], varying: Sequence[str] = ()) -> str:
    """``model/arm/lang`` (those of ``keys`` that ``row`` has), then the settings in ``varying`` that it holds."""
    base = "/".join(str(row[k]) for k in CELL_COLUMNS if k in keys)
    extra = [f"{k} {_show(row[k])}" for k in varying if not pd.isna(row[k])]
    return f"{base} ({', '.join(extra)})" if extra else base


def _varying(records: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """The setting columns among ``keys`` that take several values within some (model, arm, lang): the ones a
    cell must be named by."""
    settings = [k for k in keys if k in SETTING_COLUMNS]
    if not settings:
        return []
    counts = records.groupby(list(CELL_COLUMNS), sort=False, dropna=False)[settings].nunique(dropna=False)
    return [k for k in settings if (counts[k] > 1).any()]


def check_arms(
    records: pd.DataFrame,
    native: Arm | None = None,
    *,
    translate: Arm | None = None,
    frame: str = "replay",
    pooled: bool = False,
    common_items: bool = False,
) -> ArmCoverage:
    """Refuse records that the statistics cannot compare, in one line naming the cells and what differs.

    ``records`` holds one row per record (``model``, ``arm``, ``lang``, ``item`` and the setting columns it has,
    e.g. ``Scores.by_record``). A cell is what the command computes on: the grid's cell (:func:`cell_columns`:
    announcement, forcing and design split cells, so such designs are kept apart, never pooled), or with
    ``pooled`` (``price``, which prices one (model, arm, lang) under one B_max) the bare (model, arm, lang).
    Refused: a (model, arm, lang) that mixes caps in the replay frame (two caps are two runs, not a design; in
    the independent frame the cap is the budget) or, when ``pooled``, any other setting; a cell whose samples
    per item k differ by item (per cap in the independent frame); and, unless ``common_items``, a pair of
    ``native`` and ``translate`` cells (same model, language and settings) that cover different items. With
    ``common_items`` such a pair is compared on the items both arms hold (see :meth:`ArmCoverage.keep`); none
    in common is still refused. ``native``/``translate``: one arm name, or each task's (task -> arm; the pair's
    ``task`` picks them; the coverage then names them ``native`` and ``comparator`` where tasks differ; None: each
    task's own). The one check ``sweep``, ``report``, ``protocol test`` and ``price`` run before any statistic.
    """
    require_columns(records, [*CELL_COLUMNS, "item"], what="records")
    keys = list(CELL_COLUMNS) if pooled else cell_columns(records, frame)
    present = [c for c in SETTING_COLUMNS if c in records.columns and not (frame == "independent" and c == "cap")]
    single = present if pooled else [c for c in present if c == "cap"]
    problems = []
    by_cell = records.groupby(list(CELL_COLUMNS), sort=True, dropna=False)
    for col in single:
        for key, values in by_cell[col].unique().items():
            if len(values) > 1:
                shown = " and ".join(sorted({_show(v) for v in values}))
                problems.append(f"cell {'/'.join(map(str, key))} mixes {_SETTING_NAMES.get(col, col)} {shown}")
    varying = _varying(records, keys)
    decode = [*keys, *(["cap"] if "cap" in records.columns and "cap" not in keys else [])]
    per_item = records.groupby([*decode, "item"], sort=True, dropna=False).size()
    for key, k in per_item.groupby(level=list(range(len(decode))), dropna=False):
        if k.nunique() > 1:
            problems.append(
                f"cell {_label(dict(zip(decode, key, strict=True)), decode, varying)} has different samples per "
                f"item (k from {k.min()} to {k.max()})"
            )
    pair_keys = [k for k in keys if k != "arm"]
    pairs = []
    native, translate = native_of(records, native), comparator_of(records, translate)
    nat_label, tr_label = label(native, NATIVE_ROLE), label(translate, COMPARATOR_ROLE)
    for key, group in records.groupby(pair_keys, sort=True, dropna=False):
        row = dict(zip(pair_keys, key, strict=True))
        arm = group["arm"].to_numpy()
        nat, tr = (arm_of(x, row.get("task")) for x in (native, translate))
        a, b = (np.unique(group["item"].to_numpy()[arm == x]) for x in (nat, tr))
        if not a.size or not b.size:
            continue
        common = np.intersect1d(a, b)
        if (a.size != common.size or b.size != common.size) and (not common_items or not common.size):
            fix = "; pass --common-items to compare them on those" if common.size else ""
            problems.append(
                f"arms {nat} and {tr} of {_label(row, pair_keys, varying)} cover different items "
                f"({a.size} and {b.size}; {common.size} in common){fix}"
            )
        pairs.append(
            {
                **row,
                f"items_{nat_label}": int(a.size),
                f"items_{tr_label}": int(b.size),
                "common": int(common.size),
                "items": common,
            }
        )
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BadInputError(f"refusing to compare: {problems[0]}{more}")
    columns = [*pair_keys, f"items_{nat_label}", f"items_{tr_label}", "common", "items"]
    return ArmCoverage(pd.DataFrame(pairs, columns=columns), common_items, nat_label, tr_label, tuple(pair_keys))
