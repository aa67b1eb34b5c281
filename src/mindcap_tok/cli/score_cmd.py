"""`mindcap-tok score`: strict prefix accuracy of every ledger cell at every budget."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._io import check_output_folder, output_folder
from ..choices import SCORE_BUDGETS, VARIANTS
from ._options import (
    allow_tokenizer_mismatch_option,
    budgets_option,
    format_option,
    multi_option,
    no_verify_option,
    out_file_option,
    task_files_option,
    tokenizer_option,
)
from ._output import emit, render
from ._parsing import Command
from ._progress import progress_bar

if TYPE_CHECKING:
    from ..scoring import Scores

#: the command named in a --save folder's marker; only it may replace the folder's files
PRODUCER = "mindcap-tok score --save"


def _save(scores: Scores, folder: str) -> None:
    """Write by_budget.parquet and by_record.parquet as the folder ``folder`` in one step."""
    with output_folder(folder, PRODUCER) as tmp:
        scores.by_budget.to_parquet(tmp / "by_budget.parquet", index=False)
        scores.by_record.to_parquet(tmp / "by_record.parquet", index=False)


@click.command("score", cls=Command)
@click.option("--ledger", "ledger_dir", required=True, type=click.Path(exists=True, file_okay=False))
@budgets_option(default=list(SCORE_BUDGETS), help="Budgets B (64,128 or 64 128).")
@tokenizer_option
@click.option(
    "--parser",
    default="strict",
    show_default=True,
    help=f"One of {', '.join(VARIANTS)}, or joined by '+'; or a task's filter (mgsm: lm-eval-strict, -flexible).",
)
@multi_option("--model", "models", help="Only these models.")
@multi_option("--arm", "arms", help="Only these arms.")
@multi_option("--lang", "langs", help="Only these languages.")
@format_option()
@out_file_option("Write the curves here (atomically) instead of stdout.")
@click.option("--save", type=click.Path(file_okay=False), help="Also write by_budget/by_record Parquet to this folder.")
@task_files_option
@no_verify_option
@allow_tokenizer_mismatch_option
@click.pass_obj
def score_command(
    state,
    ledger_dir,
    budgets,
    tokenizer,
    parser,
    models,
    arms,
    langs,
    fmt,
    out,
    save,
    tasks,
    no_verify,
    allow_tokenizer_mismatch,
) -> None:
    """Accuracy (mean strict score over items x samples) per cell and budget, from stored prefixes."""
    from ..scoring import accuracy_curves, score_ledger, with_thought_counts
    from ..stats.cap import all_beyond_caps
    from ..store import CELL_COLUMNS, SETTING_COLUMNS, Ledger, empty_selection, resolve_tokenizers, warn_unmatched
    from ..tokenization.load import load_tokenizer

    columns = [*CELL_COLUMNS, *SETTING_COLUMNS, "item", "sample", "output_ids", "finish_reason", "tokenizer"]
    columns += ["gold", "gold_text", "think_end", "forced_think_close"]
    if save:
        check_output_folder(save, PRODUCER)  # before the scoring, not after it
    led = Ledger(ledger_dir, verify=not no_verify)
    records = led.read(model=models or None, arm=arms or None, lang=langs or None, columns=columns)
    if records.num_rows == 0:
        raise empty_selection(led, models=models, arms=arms, langs=langs)
    warn_unmatched(led, models=models, arms=arms, langs=langs)
    override = load_tokenizer(tokenizer, state.config.tokenizers_dir.value) if tokenizer else None
    toks = resolve_tokenizers(
        records.column("tokenizer").to_pylist(),
        led,
        override=override,
        tokenizers_dir=state.config.tokenizers_dir.value,
        allow_mismatch=allow_tokenizer_mismatch,
    )
    with progress_bar("scoring", total=records.num_rows, enabled=records.num_rows > 20_000) as advance:
        done = [0]

        def step(finished: int, total: int) -> None:
            advance(finished - done[0])
            done[0] = finished

        scores = score_ledger(
            records,
            toks if override is None else override,
            budgets=budgets,
            parser=parser,
            on_progress=step,
            tasks=tasks,
        )
    curves = with_thought_counts(accuracy_curves(scores.by_budget), scores.by_record)
    if "cap" in scores.by_record and (warning := all_beyond_caps(budgets, scores.by_record["cap"].unique())):
        click.echo(f"warning: {warning}", err=True)
    if save:
        _save(scores, save)
        click.echo(f"wrote {Path(save) / 'by_budget.parquet'} and by_record.parquet", err=True)
    if fmt == "table":
        constant = [c for c in SETTING_COLUMNS if c in curves and curves[c].nunique(dropna=False) <= 1]
        curves = curves.drop(columns=constant)
        title = f"strict prefix accuracy ({scores.parser} parser, {records.num_rows} records)"
        emit(render(curves.to_dict("records"), "table", title=title), out)
    else:
        emit(render(curves.to_dict("records"), fmt), out)
