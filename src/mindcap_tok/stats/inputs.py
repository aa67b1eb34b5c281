"""A ledger read, checked and scored for the budget statistics: what ``sweep``, ``report`` and ``protocol test``
start from, as one library call (so a library user reproduces them without the CLI)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.languages import resolve_language
from ..errors import DamagedDataError
from .premiums import lookup_premium, required_budgets, resolve_premiums

if TYPE_CHECKING:
    import pandas as pd

    from ..scoring import Scores

#: ``budgets_for(premium table, models, langs)``: the budgets to score at, once the premiums are known
BudgetsFor = Callable[["pd.DataFrame", list[str], list[str]], Sequence[int]]


def sweep_budgets(grid: Sequence[int]) -> BudgetsFor:
    """The ``budgets_for`` of a Δ_L sweep over ``grid``: each B and each floor(r·B) of the ledger's languages."""

    def budgets_for(premiums: pd.DataFrame, models: list[str], langs: list[str]) -> list[int]:
        ratios = [lookup_premium(premiums, m, lang=lang) for m in models for lang in langs if lang != "eng_Latn"]
        return required_budgets(grid, ratios)

    return budgets_for


@dataclass(frozen=True)
class LedgerSelection:
    """Which records to score and how: model/language filters, the answer parser, shard verification, and the
    tokenizer of the ids (``tokenizer`` names one for every record; ``allow_tokenizer_mismatch`` accepts ids
    whose recorded tokenizer hash differs from the resolved one's; ``tasks``: the task files of records whose task
    is not built in)."""

    models: Sequence[str] = ()
    langs: Sequence[str] = ()
    parser: str = "strict"
    verify: bool = True
    tokenizer: str | None = None
    allow_tokenizer_mismatch: bool = False
    tasks: Sequence[str] = ()


@dataclass(frozen=True)
class ScoredLedger:
    """A ledger's scores (:class:`~mindcap_tok.scoring.score.Scores`) and the premium table they were budgeted by."""

    scores: Scores
    premiums: pd.DataFrame


def load_scored_ledger(
    path: str | Path,
    budgets_for: BudgetsFor,
    *,
    tokenizers_dir: str | Path | None,
    data_dir: str | Path | None,
    premium_specs: Sequence[str] = (),
    selection: LedgerSelection = LedgerSelection(),
    on_progress: Callable[[int, int], None] | None = None,
) -> ScoredLedger:
    """Read the ledger at ``path``, resolve premiums for its models/languages, score it at
    ``budgets_for(premiums, models, langs)``.

    Each record's ids are scored with its own tokenizer (the ``tokenizer`` column), resolved through
    ``tokenizers_dir`` and checked against the hash the ledger recorded
    (:func:`~mindcap_tok.store.tokenizers.resolve_tokenizers`). ``premium_specs`` as in
    :func:`~mindcap_tok.stats.premiums.resolve_premiums` (default: each model's own tokenizer over FLORES in
    ``data_dir``). ``on_progress(done, total)`` follows the scoring. An empty selection is a one-line error.
    """
    import pyarrow.compute as pc

    from ..scoring import score_ledger
    from ..store import Ledger, empty_selection, resolve_tokenizers, warn_unmatched
    from ..tokenization.load import load_tokenizer

    sel = selection
    codes = [resolve_language(x) for x in sel.langs]
    led = Ledger(path, verify=sel.verify)
    table = led.read(model=list(sel.models) or None, lang=codes or None)
    if table.num_rows == 0:
        raise empty_selection(led, models=sel.models, langs=sel.langs)
    warn_unmatched(led, models=sel.models, langs=sel.langs)
    ledger_models = sorted(pc.unique(table.column("model")).to_pylist())
    ledger_langs = sorted(pc.unique(table.column("lang")).to_pylist())
    premiums = resolve_premiums(
        premium_specs, ledger_models, languages=ledger_langs, tokenizers_dir=tokenizers_dir, data_dir=data_dir
    )
    budgets = budgets_for(premiums, ledger_models, ledger_langs)
    if "tokenizer" not in table.column_names:
        raise DamagedDataError(f"{path}: records have no 'tokenizer' column naming the tokenizer of their ids")
    override = load_tokenizer(sel.tokenizer, tokenizers_dir) if sel.tokenizer else None
    toks = resolve_tokenizers(
        table.column("tokenizer").to_pylist(),
        led,
        override=override,
        tokenizers_dir=tokenizers_dir,
        allow_mismatch=sel.allow_tokenizer_mismatch,
    )
    scores = score_ledger(table, toks, budgets=budgets, parser=sel.parser, on_progress=on_progress, tasks=sel.tasks)
    return ScoredLedger(scores=scores, premiums=premiums)
