"""`mindcap-tok sweep`, `mindcap-tok report` and `mindcap-tok protocol freeze|test`: budget statistics on a ledger."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

import click

from ..choices import FRAMES, MAX_SPLITS, SWEEP_BUDGETS
from ._options import (
    allow_tokenizer_mismatch_option,
    budgets_option,
    check_n_boot,
    common_items_option,
    format_option,
    level_option,
    multi_option,
    n_boot_option,
    no_verify_option,
    out_dir_option,
    out_file_option,
    premiums_option,
    task_files_option,
    tokenizer_option,
)
from ._output import emit, render, to_json
from ._parsing import Command, Group
from ._progress import on_progress, progress_bar

if TYPE_CHECKING:
    from ..resample import Resampling
    from ..stats.budget_sweep import SweepInputs


def _scoring_bar(stack: ExitStack) -> Callable[[int, int], None]:
    """An ``on_progress(done, total)`` for the scoring: a progress bar entered on ``stack`` once the number of
    records is known (shown over 5,000 records)."""
    report: list[Callable[[int, int], None]] = []  # the bar's on_progress, once it is open

    def step(done: int, total: int) -> None:
        if not report:
            bar = progress_bar("scoring prefixes", total=total, enabled=total > 5000)
            report.append(on_progress(stack.enter_context(bar)))
        report[0](done, total)

    return step


def load_scores(state, ledger: str, budgets_for, premium_specs=(), **selection):
    """:func:`~mindcap_tok.stats.inputs.load_scored_ledger` with the configured folders and a progress bar
    (over 5,000 records); ``selection``: :class:`~mindcap_tok.stats.inputs.LedgerSelection`'s fields.
    Returns (scores, premium table)."""
    from ..stats.inputs import LedgerSelection, load_scored_ledger

    with ExitStack() as stack:
        scored = load_scored_ledger(
            ledger,
            budgets_for,
            tokenizers_dir=state.config.tokenizers_dir.value,
            data_dir=state.config.data_dir.value,
            premium_specs=premium_specs,
            selection=LedgerSelection(**selection),
            on_progress=_scoring_bar(stack),
        )
    return scored.scores, scored.premiums


def _resampling(common: dict) -> Resampling:
    """The shared ``--n-boot``/``--seed``/``--level`` options as one :class:`~mindcap_tok.resample.Resampling`."""
    from ..resample import Resampling

    return Resampling(common["n_boot"], common["seed"], common["level"])


def score_arms(scores, task_files):
    """Each task's native and comparator arm (:class:`~mindcap_tok.tasks.roles.TaskArms`) for the scored records."""
    from ..tasks.roles import task_arms

    return task_arms(scores.by_record, task_files)


def _sweep_inputs(state, common: dict) -> SweepInputs:
    """The scored ledger of ``sweep``/``report`` (:func:`~mindcap_tok.stats.budget_sweep.sweep_inputs`) with the
    configured folders and a progress bar (over 5,000 records)."""
    from ..stats.budget_sweep import sweep_inputs
    from ..stats.inputs import LedgerSelection

    check_n_boot(common["n_boot"], common["level"])  # before the scoring
    selection = LedgerSelection(
        models=common["models"],
        langs=common["langs"],
        parser=common["parser"],
        verify=not common["no_verify"],
        tokenizer=common["tokenizer"],
        allow_tokenizer_mismatch=common["allow_tokenizer_mismatch"],
        tasks=common["tasks"],
    )
    with ExitStack() as stack:
        return sweep_inputs(
            common["ledger"],
            budgets=common["budgets"] or SWEEP_BUDGETS,
            premium_specs=common["premium_specs"],
            selection=selection,
            frame=common["frame"],
            common_items=common["common_items"],
            config=state.config,
            on_progress=_scoring_bar(stack),
        )


_ledger_option = click.option(
    "--ledger", required=True, type=click.Path(exists=True, file_okay=False), help="Ledger folder."
)
_budgets_option = budgets_option(help=f"Budgets B, 64,128 or 64 128 (default {','.join(map(str, SWEEP_BUDGETS))}).")
_seed_option = click.option("--seed", type=int, default=0, show_default=True)
#: the records a statistic reads and how they are scored (every command here)
_selection = [
    multi_option("--model", "models", help="Only these models."),
    multi_option("--lang", "langs", help="Only these languages."),
    click.option("--parser", default="strict", show_default=True, help="Answer parser variant."),
    task_files_option,
    no_verify_option,
    tokenizer_option,
    allow_tokenizer_mismatch_option,
]

_common = [
    _ledger_option,
    premiums_option(),
    _budgets_option,
    *_selection[:2],
    click.option(
        "--frame",
        type=click.Choice(FRAMES),
        default="replay",
        show_default=True,
        help="replay: prefixes of one long ledger; independent: each record's own cap is its budget.",
    ),
    n_boot_option(),
    _seed_option,
    level_option,
    *_selection[2:],
    common_items_option,
]


def _apply(options):
    def deco(f):
        for opt in reversed(options):
            f = opt(f)
        return f

    return deco


@click.command("sweep", cls=Command)
@_apply(_common)
@format_option(latex=True)
@out_file_option()
@click.pass_obj
def sweep_command(state, fmt, out, **common) -> None:
    """Δ_L(B) = acc_N(floor(r·B)) − acc_N(B) per language and budget, with item-clustered bootstrap CIs,
    simultaneous bands, the peak and its stability, and the native-vs-translate gap. JSON and CSV hold
    fractions (accuracies in [0, 1], differences in [-1, 1]); the table shows points and says so."""
    from ..report.sweep_tables import sweep_tables
    from ..stats.budget_sweep import budget_sweep

    result = budget_sweep(_sweep_inputs(state, common), resampling=_resampling(common), frame=common["frame"])
    if fmt == "json":
        text = to_json(result.as_dict())
    elif fmt == "csv":
        text = render(result.binding_rows.to_dict(orient="records"), "csv")
    else:  # readable width: settings shared by every row go into the title, Δ_L and the gap in two tables
        tables = [render(t.rows, fmt, t.title, t.floatfmt, t.priority) for t in sweep_tables(result)]
        text = "\n".join(tables) + result.coverage.footer()
    emit(text, out)


@click.command("report", cls=Command)
@_apply(_common)
@out_dir_option("Report folder: absent, empty, or an earlier report (replaced atomically).")
@click.pass_obj
def report_command(state, out, **common) -> None:
    """Markdown tables, CSVs and figures (NATIVE curves with peak intervals; gap curves) for a ledger, and
    report.html: the curves, tables and a trace viewer in one offline page (needs the html extra)."""
    from .._io import check_output_folder
    from ..report.budget_report import PRODUCER
    from ..report.ledger_report import ReportSettings, write_ledger_report

    check_output_folder(out, PRODUCER)  # before the scoring, not after it
    inputs = _sweep_inputs(state, common)
    footer = inputs.coverage.footer()
    settings = ReportSettings(
        resampling=_resampling(common),
        frame=common["frame"],
        notes=[footer.strip()] if footer else [],
        tokenizers_dir=state.config.tokenizers_dir.value,
        tokenizer=common["tokenizer"],
        allow_tokenizer_mismatch=common["allow_tokenizer_mismatch"],
    )
    rep = write_ledger_report(inputs, out, ledger=common["ledger"], settings=settings)
    click.echo(f"wrote {rep.out_dir}: {', '.join(rep.files)}", err=True)


@click.command("cost-grid", cls=Command)
@click.option("--ledger", required=True, type=click.Path(exists=True, file_okay=False), help="Ledger folder.")
@click.option(
    "--prices",
    "prices_file",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML ([MODEL] input = .., output = ..) or CSV (model,input,output): dollars per million tokens.",
)
@click.option(
    "--protocol", "protocol_file", type=click.Path(exists=True, dir_okay=False), help="Use this protocol's [prices]."
)
@budgets_option(help=f"Reference budgets B (default {','.join(map(str, SWEEP_BUDGETS))}).")
@click.option(
    "--reference",
    default="lang=eng_Latn",
    show_default=True,
    help="The reference cell: lang=L, arm=A, or both (arm=translate-act,lang=th); matched within a model.",
)
@multi_option("--model", "models", help="Only these models.")
@format_option()
@out_file_option()
def cost_grid_command(ledger, prices_file, protocol_file, budgets, reference, models, fmt, out) -> None:
    """Budgets whose dollar cost per item (in_price·prompt_tokens + out_price·B, the ledger's mean prompt tokens
    per cell) matches the reference cell's at each reference budget B; the grid, prices and reference recorded."""
    from ..errors import BadInputError
    from ..stats.cost import ledger_prompt_tokens, load_prices, matched_cost_grid
    from ..stats.protocol import load_protocol

    if (prices_file is None) == (protocol_file is None):
        raise BadInputError("give the token prices with exactly one of --prices FILE and --protocol FILE")
    prices = load_prices(prices_file) if prices_file else load_protocol(protocol_file).prices
    if not prices:
        raise BadInputError(f"{protocol_file} declares no [prices]")
    ref = dict(part.partition("=")[::2] for part in reference.split(","))
    grid = matched_cost_grid(
        ledger_prompt_tokens(ledger, models=models),
        prices,
        budgets=budgets or list(SWEEP_BUDGETS),
        reference=ref,
    )
    if fmt == "json":
        text = to_json(
            {
                "reference": ref,
                "prices": {m: {"input": i, "output": o} for m, (i, o) in prices.items()},
                "units": "dollars per item; prices in dollars per million tokens",
                "grid": grid.to_dict(orient="records"),
            }
        )
    else:
        text = render(grid.to_dict(orient="records"), fmt, title=f"Matched-cost grid (reference {reference})")
    emit(text, out)


@click.group("protocol", cls=Group)
def protocol_group() -> None:
    """Pre-specified test families: freeze a protocol file before the data exist, test it afterwards."""


@protocol_group.command("freeze")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--tag/--no-tag", default=None, help="Record a git tag (default: when FILE is inside a git repository).")
@click.pass_obj
def protocol_freeze(state, file, tag) -> None:
    """Record FILE's SHA-256, and those of the files it names (premiums), in FILE.freeze.json (and an
    annotated git tag carrying them)."""
    from ..stats.protocol import freeze_protocol

    cfg = state.config
    rec = freeze_protocol(file, tag=tag, tokenizers_dir=cfg.tokenizers_dir.value, data_dir=cfg.data_dir.value)
    click.echo(f"frozen {rec.protocol}: sha256 {rec.sha256}", err=True)
    if rec.bstar is not None:
        click.echo(f"  B* = {rec.bstar}", err=True)
    for name, sha in (rec.inputs or {}).items():
        click.echo(f"  with {name}: sha256 {sha}", err=True)
    if rec.tag:
        click.echo(f"git tag {rec.tag} at {(rec.commit or '')[:12]}", err=True)
        if not rec.file_committed:
            click.echo(
                "warning: the protocol file is not committed at the tagged commit; commit it so the tag "
                "proves its content",
                err=True,
            )


@protocol_group.command("test")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--ledger", required=True, type=click.Path(exists=True, file_okay=False), help="Ledger folder.")
@no_verify_option
@tokenizer_option
@allow_tokenizer_mismatch_option
@task_files_option
@common_items_option
@format_option(latex=True)
@out_file_option()
@click.pass_obj
def protocol_test(
    state, file, ledger, no_verify, tokenizer, allow_tokenizer_mismatch, tasks, common_items, fmt, out
) -> None:
    """Refuse FILE if it, or a file it names, changed since its freeze; else run its family and print
    decisions and the outcome."""
    from pathlib import Path

    from ..stats.budget_sweep import comparable_scores
    from ..stats.family import family_budgets
    from ..stats.protocol import gate_protocol, load_protocol, protocol_premium_specs, run_protocol, verify_protocol

    record = verify_protocol(file, tokenizers_dir=state.config.tokenizers_dir.value)
    proto = load_protocol(file)
    specs = protocol_premium_specs(proto, Path(file).parent)
    scores, table = load_scores(
        state,
        ledger,
        lambda t, m, _: family_budgets(proto.hypotheses, t, models=m),
        specs,
        models=[proto.model] if proto.model else [],
        parser=proto.parser,
        verify=not no_verify,
        allow_tokenizer_mismatch=allow_tokenizer_mismatch,
        tokenizer=tokenizer,
        tasks=tasks,
    )
    arms = score_arms(scores, tasks)  # the protocol's declared arms, where it declares them, override each task's
    native, translate = proto.native or arms.native, proto.translate or arms.comparator
    scores, coverage = comparable_scores(
        scores, frame=proto.frame, common_items=common_items, native=native, translate=translate
    )
    result = run_protocol(
        proto, scores.by_budget, premiums=table, native=native, translate=translate, records=scores.by_record
    )
    gates, gated = gate_protocol(proto, result, by_record=scores.by_record)
    if fmt == "json":  # fractions, as every JSON output (the family's table and the declaration use points)
        decisions = gated.assign(**{c: gated[c] / 100 for c in ("margin", "estimate", "se")})
        text = to_json(
            {
                "protocol": proto.name,
                "sha256": record.sha256,
                "frozen_at": record.frozen_at,
                "tag": record.tag,
                "inputs": record.inputs,
                "outcome": result.outcome,
                "alpha": result.alpha,
                "n_boot": result.n_boot,
                "seed": result.seed,
                "tail_factor": result.tail_factor,
                "bstar": proto.bstar,
                **coverage.as_dict(),
                "units": "fractions",
                "decisions": decisions.to_dict(orient="records"),
                "announcement_gate": gates.to_dict(orient="records"),
            }
        )
    else:
        title = (
            f"Protocol {proto.name} (sha256 {record.sha256[:12]}…, frozen {record.frozen_at}); Holm at "
            f"α={result.alpha}, {result.n_boot} item resamples, seed {result.seed}, tail factor "
            f"{result.tail_factor:g}{'' if proto.bstar is None else f', B* = {proto.bstar}'}; estimates in points"
        )
        text = render(gated.to_dict(orient="records"), fmt, title=title, floatfmt=".4f")
        if len(gates):
            text += "\n" + render(
                gates.to_dict(orient="records"),
                fmt,
                title="Announcement gate: median-length reduction from the loosest to the tightest announced budget "
                f"(a retained null in a cell below {proto.announcement_gate:.0%} is uninformative)",
                floatfmt=".3f",
            )
        text += f"\noutcome: {result.outcome}\n" + coverage.footer()
    emit(text, out)


#: the consistency check's columns that hold proportions (shown as points in tables)
_MAE_COLUMNS = ("mae", "mae_sd", "mae_min", "mae_max")


@click.command("consistency", cls=Command)
@_apply([_ledger_option, premiums_option(), _budgets_option])
@click.option(
    "--splits",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help=f"Seeded split-halves per cell, at most {MAX_SPLITS:,}: split s splits the items with seed S + s.",
)
@_seed_option
@_apply(_selection)
@format_option()
@out_file_option()
@click.pass_obj
def consistency_command(state, ledger, premium_specs, budgets, splits, seed, fmt, out, **selection) -> None:
    """The split-half consistency check (paper Appendix J), replay frame: per NATIVE cell, G(t) from one seeded
    half of the items predicts Δ_L(B) on the other half; the MAE over the budgets, whether the predicted peak
    budget is the observed one, and their spread over repeated splits. JSON and CSV hold fractions; the table
    shows points."""
    from ..report.sweep_tables import drop_shared_settings
    from ..stats.consistency import Splits, consistency
    from ..stats.inputs import sweep_budgets

    grid = budgets or list(SWEEP_BUDGETS)
    settings = Splits(splits, seed)  # refused before the scoring
    scores, table = load_scores(
        state,
        ledger,
        sweep_budgets(grid),
        premium_specs,
        models=selection["models"],
        langs=selection["langs"],
        parser=selection["parser"],
        verify=not selection["no_verify"],
        allow_tokenizer_mismatch=selection["allow_tokenizer_mismatch"],
        tokenizer=selection["tokenizer"],
        tasks=selection["tasks"],
    )
    native = score_arms(scores, selection["tasks"]).native
    result = consistency(scores, table, budgets=grid, splits=settings, native=native)
    if fmt == "json":
        text = to_json({**result.as_dict(), "units": "fractions"})
    elif fmt == "csv":
        text = render(result.cells.to_dict(orient="records"), "csv")
    else:
        cells, shared = drop_shared_settings(result.cells.assign(**{c: 100 * result.cells[c] for c in _MAE_COLUMNS}))
        title = (
            f"Split-half consistency (replay frame, {result.n_splits} splits from seed {result.seed}, budgets "
            f"{','.join(map(str, result.budgets))}{shared}; MAE in points)"
        )
        text = render(cells.to_dict(orient="records"), fmt, title=title, floatfmt=".2f")
    emit(text, out)
