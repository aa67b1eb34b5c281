"""Budget statistics: accuracy curves, gap(B), Δ_L(B), the correct-emission sub-CDF, item-clustered bootstrap
inference (pointwise CIs, simultaneous bands, peak stability, lead probabilities), frozen test families with
Holm control, and answer-emission timing. Inputs are the scoring contract's ``Scores.by_budget`` and
``Scores.by_record`` DataFrames (see :mod:`mindcap_tok.scoring.score`).
"""

from .bootstrap import Boot, bootstrap_weights, grid_bootstrap, item_bootstrap
from .budget_sweep import BudgetSweep, SweepInputs, budget_sweep, comparable_scores, sweep_inputs
from .cap import all_beyond_caps, cut_shares
from .confirm import Confirmation, confirm
from .consistency import Consistency, Splits, consistency
from .curves import Sweep, accuracy_table, delta_table, gap_table, sweep
from .family import FamilyResult, FamilyTests, Hypothesis, run_family
from .grid import AccuracyGrid, accuracy_grid
from .hypotheses import bootstrap_test, holm
from .inputs import LedgerSelection, ScoredLedger, load_scored_ledger, sweep_budgets
from .premiums import premium_table, required_budgets, resolve_premiums
from .protocol import freeze_protocol, load_protocol, run_protocol, verify_protocol
from .subcdf import compare_prediction, predict_delta, split_items, subcdf
from .timing import emission_timing

__all__ = [
    "AccuracyGrid",
    "Boot",
    "BudgetSweep",
    "Confirmation",
    "Consistency",
    "FamilyResult",
    "FamilyTests",
    "Hypothesis",
    "LedgerSelection",
    "ScoredLedger",
    "Splits",
    "Sweep",
    "SweepInputs",
    "accuracy_grid",
    "accuracy_table",
    "all_beyond_caps",
    "bootstrap_test",
    "bootstrap_weights",
    "budget_sweep",
    "comparable_scores",
    "compare_prediction",
    "confirm",
    "consistency",
    "cut_shares",
    "delta_table",
    "emission_timing",
    "freeze_protocol",
    "gap_table",
    "grid_bootstrap",
    "holm",
    "item_bootstrap",
    "load_protocol",
    "load_scored_ledger",
    "predict_delta",
    "premium_table",
    "required_budgets",
    "resolve_premiums",
    "run_family",
    "run_protocol",
    "split_items",
    "subcdf",
    "sweep",
    "sweep_budgets",
    "sweep_inputs",
    "verify_protocol",
]
