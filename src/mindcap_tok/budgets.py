"""Output-token budgets: the grids every stage defaults to, the accepted range, and one validator.

Kept apart from the stages (like ``resample.py``) so that the CLI, the ledger scorer, the statistics and the
pricing read one definition without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .choices import MAX_BUDGET as MAX_BUDGET
from .choices import SCORE_BUDGETS as SCORE_BUDGETS
from .choices import SWEEP_BUDGETS as SWEEP_BUDGETS
from .errors import BadInputError


def check_budgets(budgets: Iterable[int], *, sort: bool = False) -> np.ndarray:
    """Budgets as an int64 array: integers from 1 to :data:`MAX_BUDGET`, at least one (a one-line error naming
    the bad values otherwise); in the order given, or with ``sort`` sorted and without repeats."""
    values = list(budgets)
    bad = [b for b in values if isinstance(b, bool) or not isinstance(b, int | np.integer) or not 0 < b <= MAX_BUDGET]
    if bad or not values:
        shown = ", ".join(map(str, bad)) if bad else "none"
        raise BadInputError(
            f"budgets must be positive integers (token counts) up to {MAX_BUDGET}, at least one; got {shown}"
        )
    grid = np.asarray(values, dtype=np.int64)
    return np.unique(grid) if sort else grid
