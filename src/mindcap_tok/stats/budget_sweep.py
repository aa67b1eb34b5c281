"""The budget sweep of a ledger as one result: the Δ_L sweep and everything ``mindcap-tok sweep`` shows beside it
(binding regime, forcing by population, failure tail, thinking records, the arms' coverage), so a library user
gets what the command prints and the CLI only renders it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..budgets import SWEEP_BUDGETS
from ..resample import DEFAULT_RESAMPLING, Resampling
from .curves import Sweep, sweep
from .grid import ArmCoverage, check_arms
from .inputs import LedgerSelection, load_scored_ledger, sweep_budgets
from .roles import Arm

if TYPE_CHECKING:
    import pandas as pd

    from ..config import Config
    from ..scoring import Scores
    from ..tasks.roles import TaskArms


@dataclass(frozen=True)
class SweepInputs:
    """A ledger scored for a sweep or a budget report: the budget grid, the scores (restricted to the items both
    arms hold where asked), the premium table, the arms' coverage and each task's arms."""

    budgets: list[int]
    scores: Scores
    premiums: pd.DataFrame
    coverage: ArmCoverage
    arms: TaskArms


def comparable_scores(
    scores: Scores, *, frame: str, common_items: bool, native: Arm, translate: Arm
) -> tuple[Scores, ArmCoverage]:
    """``scores`` checked by :func:`~mindcap_tok.stats.grid.check_arms` (refused in one line when its arms or cells
    cannot be compared) and, with ``common_items``, restricted to the items both arms hold; and the coverage.
    ``native``/``translate``: one arm, or each task's (task -> arm)."""
    coverage = check_arms(scores.by_record, native, translate=translate, frame=frame, common_items=common_items)
    kept = dataclasses.replace(
        scores, by_budget=coverage.keep(scores.by_budget), by_record=coverage.keep(scores.by_record)
    )
    return kept, coverage


def sweep_inputs(
    ledger: str | Path,
    *,
    budgets: Sequence[int] = SWEEP_BUDGETS,
    premium_specs: Sequence[str] = (),
    selection: LedgerSelection | None = None,
    frame: str = "replay",
    common_items: bool = False,
    config: Config | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> SweepInputs:
    """Read and score the ledger at ``ledger`` for a sweep over ``budgets`` (:func:`load_scored_ledger` with
    :func:`sweep_budgets`), find each task's arms in its task file and check that they can be compared in
    ``frame`` (:func:`comparable_scores`). ``selection``: which records, scored how (default: all, strict);
    ``config``: where tokenizers and data are (default: :func:`~mindcap_tok.config.load_config`, as the CLI's)."""
    from ..config import load_config
    from ..tasks.roles import task_arms

    selection = selection or LedgerSelection()
    config = config or load_config()
    grid = list(budgets)
    scored = load_scored_ledger(
        ledger,
        sweep_budgets(grid),
        tokenizers_dir=config.tokenizers_dir.value,
        data_dir=config.data_dir.value,
        premium_specs=premium_specs,
        selection=selection,
        on_progress=on_progress,
    )
    arms = task_arms(scored.scores.by_record, selection.tasks)
    scores, coverage = comparable_scores(
        scored.scores, frame=frame, common_items=common_items, native=arms.native, translate=arms.comparator
    )
    return SweepInputs(grid, scores, scored.premiums, coverage, arms)


@dataclass(frozen=True)
class BudgetSweep:
    """A Δ_L sweep and the tables shown beside it: ``binding`` (the binding regime per cell), ``binding_rows`` (one
    row per swept budget with its binding flags: the CSV), ``forcing`` (by the source decode's population; empty
    unless some record was forced), ``failure_tail`` (empty without record texts), ``thinking`` (empty unless some
    record thinks), and the arms compared with their ``coverage``. Proportions are fractions."""

    sweep: Sweep
    binding: pd.DataFrame
    binding_rows: pd.DataFrame
    forcing: pd.DataFrame
    failure_tail: pd.DataFrame
    thinking: pd.DataFrame
    coverage: ArmCoverage
    arms: TaskArms
    #: the answer parser the records were scored with (None: not known)
    parser: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the sweep's settings and tables, the binding regime, forcing, failure tail, thinking (when
        some record thinks) and coverage, in fractions."""
        result = self.sweep
        return {
            **result.as_dict(),
            **({"parser": self.parser} if self.parser else {}),
            "rows": result.rows.to_dict(orient="records"),
            "peaks": result.peaks.to_dict(orient="records"),
            "binding": self.binding.to_dict(orient="records"),
            "forcing": self.forcing.to_dict(orient="records"),
            "failure_tail": self.failure_tail.to_dict(orient="records"),
            **({"thinking": self.thinking.to_dict(orient="records")} if len(self.thinking) else {}),
            **self.coverage.as_dict(),
            "units": "fractions",
        }


def budget_sweep(
    inputs: SweepInputs, *, resampling: Resampling = DEFAULT_RESAMPLING, frame: str = "replay"
) -> BudgetSweep:
    """The Δ_L sweep of ``inputs`` (:func:`~mindcap_tok.stats.curves.sweep` over each task's native and comparator
    arms) with its binding regime, forcing, failure tail and thinking records."""
    from ..scoring import thought_summary
    from .binding import binding_regime, binding_rows

    scores, arms = inputs.scores, inputs.arms
    result = sweep(
        scores,
        inputs.premiums,
        budgets=inputs.budgets,
        resampling=resampling,
        frame=frame,
        native=arms.native,
        translate=arms.comparator,
    )
    by_record = scores.by_record
    return BudgetSweep(
        sweep=result,
        binding=binding_regime(result, by_record, native=arms.native),
        binding_rows=binding_rows(result, by_record, native=arms.native),
        forcing=_forcing(by_record),
        failure_tail=_failure_tail(by_record),
        thinking=thought_summary(by_record),
        coverage=inputs.coverage,
        arms=arms,
        parser=scores.parser,
    )


def _failure_tail(by_record: pd.DataFrame) -> pd.DataFrame:
    """The failure tail per cell (empty when the records held no text to read outcomes from)."""
    from .failure_tail import failure_tail

    if "outcome" not in by_record:
        return by_record.iloc[:0, :0]
    return failure_tail(by_record)


def _forcing(by_record: pd.DataFrame) -> pd.DataFrame:
    """Forcing results by population (empty when no record was forced)."""
    from .forcing import forcing_populations

    if "forcing" not in by_record or not by_record["forcing"].fillna(False).astype(bool).any():
        return by_record.iloc[:0, :0]
    return forcing_populations(by_record)
