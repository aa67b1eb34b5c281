"""A ledger's whole budget report, page included: the tables and figures of :func:`budget_tables` and ``report.html``
with a sample of the ledger's traces (what ``mindcap-tok report`` writes), and :func:`open_report`, which finds or
builds a report's page for ``mindcap-tok view``."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .._io import check_output_folder
from ..budgets import SWEEP_BUDGETS
from ..errors import BadInputError, SetupError
from ..resample import DEFAULT_RESAMPLING, Resampling
from ..store import Ledger
from ..tokenization.load import load_tokenizer
from .budget_report import PRODUCER, BudgetReport, BudgetTables, budget_tables, write_budget_tables
from .html_report import PAGE, PageInputs, plotly_modules, render_page
from .traces import MAX_TRACES, sample_traces

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pandas as pd

    from ..config import Config
    from ..scoring import Scores
    from ..stats.budget_sweep import SweepInputs
    from ..tasks.roles import TaskArms


@dataclass(frozen=True)
class ReportSettings:
    """How a ledger's report is built: the resampling, the frame, the notes printed in it, the folder of the
    tokenizers that decode the viewer's traces (``tokenizer``, ``allow_tokenizer_mismatch``: as the scoring's
    :class:`~mindcap_tok.stats.inputs.LedgerSelection`) and the most traces the page embeds."""

    resampling: Resampling = DEFAULT_RESAMPLING
    frame: str = "replay"
    notes: Sequence[str] = ()
    tokenizers_dir: str | os.PathLike[str] | None = None
    tokenizer: str | None = None
    allow_tokenizer_mismatch: bool = False
    max_traces: int = MAX_TRACES
    #: what :func:`open_report` scores a ledger with: the premiums (default: each model's own tokenizer) and budgets
    premium_specs: Sequence[str] = ()
    budgets: Sequence[int] = SWEEP_BUDGETS


def write_budget_report(
    scores: Scores | pd.DataFrame,
    premiums,
    *,
    out_dir: str | os.PathLike[str],
    budgets: Sequence[int] = SWEEP_BUDGETS,
    resampling: Resampling = DEFAULT_RESAMPLING,
    frame: str = "replay",
    arms: TaskArms | None = None,
    notes: Sequence[str] = (),
) -> BudgetReport:
    """Write ``report.md``, CSV tables, ``native_curves.png`` / ``gap_curves.png`` and ``report.html`` (the curves
    and tables; no trace viewer, which needs the ledger's records: :func:`write_ledger_report`) into ``out_dir``;
    without plotly (the ``html`` extra) ``report.html`` is left out with a warning.

    The folder is built beside ``out_dir`` and moved into place in one step, so readers never see a
    half-written report. ``out_dir`` must be absent, empty or an earlier report (see
    :func:`~mindcap_tok._io.check_output_folder`). ``scores``: a ledger's :class:`~mindcap_tok.scoring.score.Scores`
    (its ``by_record`` adds answer-emission timing and the sub-CDF consistency check), or a ``by_budget`` frame
    alone. ``arms``: each task's native and comparator arm (:func:`~mindcap_tok.tasks.roles.task_arms`; default:
    ``native`` and ``translate-act`` for every cell). ``notes`` are printed in ``report.md`` (e.g. the items a
    comparison was restricted to). :func:`~.budget_report.budget_tables` builds the same content without writing it.
    """
    check_output_folder(out_dir, PRODUCER)
    built = budget_tables(scores, premiums, budgets=budgets, resampling=resampling, frame=frame, arms=arms, notes=notes)
    return write_budget_tables(built, out_dir, pages=_page(built, PageInputs()))


def write_ledger_report(
    inputs: SweepInputs, out_dir: str | os.PathLike[str], *, ledger: str | os.PathLike[str], settings: ReportSettings
) -> BudgetReport:
    """Write the budget report of ``inputs`` (the scored ``ledger``,
    :func:`~mindcap_tok.stats.budget_sweep.sweep_inputs`) into ``out_dir``, ``report.html`` with a sample of the
    ledger's traces (drawn with the resampling seed)."""
    s = settings
    built = budget_tables(
        inputs.scores,
        inputs.premiums,
        budgets=inputs.budgets,
        resampling=s.resampling,
        frame=s.frame,
        arms=inputs.arms,
        notes=s.notes,
    )
    traces = sample_traces(
        ledger,
        inputs.scores,
        rows=built.sweep.rows,
        tokenizers_dir=s.tokenizers_dir,
        limit=s.max_traces,
        seed=s.resampling.seed,
        override=load_tokenizer(s.tokenizer, s.tokenizers_dir) if s.tokenizer else None,
        allow_mismatch=s.allow_tokenizer_mismatch,
    )
    return write_budget_tables(built, out_dir, pages=_page(built, PageInputs(traces=traces, ledger=ledger)))


def _page(built: BudgetTables, inputs: PageInputs) -> dict[str, str]:
    """``{"report.html": its text}``, or nothing (with a warning) without plotly: the rest of the report is still
    written."""
    try:
        return {PAGE: render_page(built, inputs)}
    except SetupError as exc:
        logger.warning("%s; report.html left out", exc)
        return {}


def open_report(
    path: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    config: Config | None = None,
    settings: ReportSettings = ReportSettings(),
) -> Path:
    """The ``report.html`` of ``path``: the page itself, a report folder's own page, or for a ledger a report built
    into ``out_dir`` (default: a new temporary folder) with ``settings``; a one-line error when ``path`` is none of
    these (naming the ledgers of a folder that holds several)."""
    from ..stats.budget_sweep import sweep_inputs

    source = Path(path)
    if source.is_file():
        if source.suffix.lower() in (".html", ".htm"):
            return source
        raise BadInputError(f"{source}: a file but not a page (.html); give a report folder, its page or a ledger")
    if (source / PAGE).is_file():
        return source / PAGE
    if not Ledger(source, verify=False).exists():
        inner = sorted(p for p in source.iterdir() if p.is_dir() and Ledger(p, verify=False).exists())
        if (source / "report.md").is_file():
            what = "a report folder without report.html (rerun `mindcap-tok report`)"
        elif inner:
            what = f"a folder of ledgers ({', '.join(str(p) for p in inner)}): give one of them"
        else:
            what = "neither a ledger nor a report folder"
        raise BadInputError(f"{source}: {what}")
    plotly_modules()  # a missing extra is said before the scoring
    target = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="mindcap-view-")) / "report"
    if config is not None and settings.tokenizers_dir is None:
        settings = replace(settings, tokenizers_dir=config.tokenizers_dir.value)
    inputs = sweep_inputs(
        source, budgets=settings.budgets, premium_specs=settings.premium_specs, frame=settings.frame, config=config
    )
    return write_ledger_report(inputs, target, ledger=source, settings=settings).out_dir / PAGE
