"""The readable tables of a budget sweep (``mindcap-tok sweep``'s text, Markdown and LaTeX output): which columns each
table shows, in points, under which title; settings every row shares go into the title."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._tables import FLOATFMT
from ..stats.roles import label
from ..store import SETTING_COLUMNS
from ..tasks.roles import COMPARATOR_ROLE, NATIVE_ROLE
from .budget_report import BOUNDS_LEGEND, DELTA_COLUMNS, drop_shared_settings, marked_bounds, to_points

if TYPE_CHECKING:
    from ..stats.budget_sweep import BudgetSweep

#: the window in which a correct answer's emission makes a budget bind
WINDOW = "(B, floor(r·B)]"
#: a sweep row's native-vs-comparator gap columns
GAP_COLUMNS = ["acc_translate", "gap", "gap_ci_low", "gap_ci_high", "gap_lower", "gap_upper"]
#: a sweep row's columns saying where it lies against its cell's cap (shown through :func:`marked_bounds`)
CAP_COLUMNS = ["beyond_cap", "cap_status", "cut_share", "delta_lower", "delta_upper"]


@dataclass(frozen=True)
class TitledTable:
    """One table to render (:func:`~mindcap_tok._tables.render`): its title, its rows (one dict each) and the number
    format of its floats."""

    title: str
    rows: list[dict[str, Any]]
    floatfmt: str = FLOATFMT
    #: the columns a narrow terminal keeps first after the key columns
    priority: tuple[str, ...] = ()


def sweep_tables(result: BudgetSweep) -> list[TitledTable]:
    """The tables of ``result`` in reading order: Δ_L per budget, the gap, peaks, crossovers, forcing, the failure
    tail, thinking records (those three when present) and the binding regime. Proportions in points, except the
    forcing, failure-tail and thinking tables (fractions, as their titles say)."""
    swept, arms = result.sweep, result.arms
    rows, peaks = to_points(swept.rows), to_points(swept.peaks)
    rows, peaks, cross, shared = drop_shared_settings(rows, peaks, swept.crossovers)
    head = (
        f"Δ_L sweep ({swept.frame} frame, {swept.n_boot} item resamples, seed {swept.seed}, "
        f"{swept.level:.0%} CIs{f', {result.parser} parser' if result.parser else ''}{shared}; points)"
    )
    delta = ["premium", *DELTA_COLUMNS]
    keys = [c for c in rows.columns if c not in delta + GAP_COLUMNS + CAP_COLUMNS]
    cap = [c for c in CAP_COLUMNS if c in rows and c != "cut_share"]
    shown = marked_bounds(rows[keys + [c for c in delta if c in rows] + cap])
    if "delta_bounds" in shown:
        head = f"{head}. {BOUNDS_LEGEND}"
    tables = [TitledTable(head, shown.to_dict(orient="records"), ".2f", ("delta", "ci_low", "ci_high", "beyond_cap"))]
    gap = [c for c in GAP_COLUMNS if c in rows]
    if gap:
        title = (
            f"Gap: {label(arms.comparator, COMPARATOR_ROLE).upper()} − {label(arms.native, NATIVE_ROLE).upper()} "
            "accuracy at B (points)"
        )
        tables.append(TitledTable(title, rows[keys + gap].to_dict(orient="records"), ".2f", ("gap", "gap_ci_low")))
    tables.append(
        TitledTable(
            "Peaks (argmax Δ_L)", peaks.to_dict(orient="records"), ".3f", ("peak_budget", "scaled_budget", "delta")
        )
    )
    if len(cross):
        tables.append(TitledTable("Crossovers", cross.to_dict(orient="records"), ".3f"))
    if len(result.forcing):
        title = "Forcing by the source decode's population: truncated, unanswered, answered (accuracy, a fraction)"
        tables.append(TitledTable(title, result.forcing.to_dict(orient="records"), ".4f"))
    tail = result.failure_tail
    if len(tail):  # settings every row shares are left out here, as in the Δ_L table's title
        same = [c for c in SETTING_COLUMNS if c in tail and tail[c].nunique(dropna=False) == 1]
        title = "Failure tail: share of traces per outcome (fractions; each row sums to 1)"
        tables.append(TitledTable(title, tail.drop(columns=same).to_dict("records"), ".4f"))
    if len(result.thinking):
        title = "Thinking records: median thought and answer tokens, share of cap hits inside the thought"
        tables.append(TitledTable(title, result.thinking.to_dict(orient="records"), ".2f"))
    binding = result.binding.drop(columns=["budgets"]).astype({"band_binds": str, "emission_binds": str})
    title = f"Binding regime: budgets where the band excludes 0; where correct answers emit in {WINDOW}"
    tables.append(TitledTable(title, binding.to_dict("records")))
    return tables
