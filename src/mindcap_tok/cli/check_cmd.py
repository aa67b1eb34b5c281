"""`mindcap-tok check RUN...`: one verdict on how much a run's output-token cap bound it
(it renders the result of :func:`~mindcap_tok.checks.check_run`).
"""

from __future__ import annotations

import sys

import click

from ._options import level_option, out_file_option, premiums_option, task_files_option, wide_option
from ._output import emit, render, to_json
from ._parsing import Command

#: ``--from`` values: a harness's logs, JSON lines, or a ledger folder (mindcap_tok.checks.SOURCES)
SOURCES = ("lm-eval", "inspect", "lighteval", "jsonl", "ledger")
#: the exit status when a cell's cut share exceeds --fail-on-binding (bad input is 2)
BINDING_EXIT = 3


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _cut(c) -> str:
    """The cut share with its interval, in percent; bounds where some traces' cut status is unknown."""
    ci = f"[{_pct(c.ci_low)}, {_pct(c.ci_high)}]"
    if c.cut_share is None:
        return f"unknown: {_pct(c.cut_share_low)}–{_pct(c.cut_share_high)} {ci}"
    return f"{_pct(c.cut_share)} {ci}"


def _rows(result) -> list[dict]:
    level = f"{result.level * 100:g}%"
    return [
        {
            "model": c.model,
            "task": c.task,
            "arm": c.arm,
            "lang": c.lang,
            "records": c.records,
            "cap": c.cap,
            f"cut % [{level} CI]": _cut(c),
            "acc completed %": _pct(c.acc_completed),
            "acc cut %": _pct(c.acc_cut),
            "never answered %": _pct(c.never_answered),
            "higher cap adds ≤ %": _pct(c.max_gain),
            "premium": f"{c.premium:.3f}",
            "rerun cap": c.rerun_cap,
        }
        for c in result.cells
    ]


def _text(result, fmt: str) -> str:
    if fmt == "json":
        return to_json(result.as_dict())
    title = (
        f"check of a {result.source} run ({len(result.cells)} cell{'' if len(result.cells) == 1 else 's'}; "
        "strict parser at each cap; "
        f"premiums: {result.premiums}; percent)"
    )
    table = render(_rows(result), fmt, title=title)
    notes = "".join(f"note: {n}\n" for n in result.notes)
    if fmt == "md":
        notes = "".join(f"- {n}\n" for n in result.notes) + ("\n" if result.notes else "")
        return f"{title}\n\n{table}\n{notes}Rerun at premium-scaled caps:\n\n```\n{result.snippet}```\n"
    return f"{table}{notes}Rerun at premium-scaled caps:\n{result.snippet}"


@click.command("check", cls=Command)
# not exists=True: a missing path is the check's one line
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--from",
    "source",
    type=click.Choice(SOURCES),
    help="What RUN holds [default: detected from the files: lm-eval samples_*.jsonl, inspect .eval/.json logs, "
    "lighteval details_*.parquet, mindcap-tok JSON lines, or a ledger folder].",
)
@click.option(
    "--tokenizer",
    help="The model's tokenizer (a registry name, folder or file): required for harness logs, which are checked "
    "against it (their model's name, their ids' range); for a ledger it replaces the one each record names.",
)
@premiums_option("the --tokenizer's FLORES-200 devtest premiums")
@task_files_option
@level_option
@click.option(
    "--fail-on-binding",
    type=click.FloatRange(0, 1),
    metavar="X",
    help=f"Exit {BINDING_EXIT} when any cell's cut share exceeds X (a fraction): a CI job's guard. A cell with "
    "traces of unknown cut status fails on its known cut share and is named on stderr when it might exceed X.",
)
@click.option(
    "--ledger-out",
    type=click.Path(file_okay=False),
    help="Keep the imported run as a ledger in this new folder (default: a temporary ledger, removed after).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "md"]),
    default="table",
    show_default=True,
    help="Output format: JSON holds fractions and null for missing values; tables show percent.",
)
@wide_option
@out_file_option()
@click.pass_obj
def check_command(
    state, paths, source, tokenizer, premium_specs, tasks, level, fail_on_binding, ledger_out, fmt, out
) -> None:
    """Check a run RUN... (a harness's log files or folders, JSON lines, or a ledger folder): per model, task, arm,
    language and cap, the share of traces cut by the cap (Wilson CI; bounds where the log does not say), strict
    accuracy at the cap of completed and cut traces, the share never answered, the most a higher cap could add,
    and the premium-scaled cap floor(r·cap) to rerun with, with a snippet for the run's harness.

    Writes nothing unless --ledger-out or --out is given. Exit 2 on bad input, 3 with --fail-on-binding X when a
    cell's cut share exceeds X.
    """
    from ..checks import check_run

    result = check_run(
        paths,
        tokenizer=tokenizer,
        source=source,
        premiums=premium_specs,
        tasks=tasks,
        level=level,
        ledger_out=ledger_out,
        config=state.config,
    )
    emit(_text(result, fmt), out)
    if result.ledger is not None and ledger_out is not None:
        click.echo(f"kept the imported run as the ledger {result.ledger}", err=True)
    if fail_on_binding is None:
        return
    for c in result.undecided(fail_on_binding):
        click.echo(
            f"undecided: {c.model} {c.task} {c.arm} {c.lang} cap {c.cap}: cut share between "
            f"{_pct(c.cut_share_low)}% and {_pct(c.cut_share_high)}% (traces of unknown cut status)",
            err=True,
        )
    binding = result.binding(fail_on_binding)
    if binding:
        named = ", ".join(f"{c.task} {c.arm} {c.lang} cap {c.cap} ({_pct(c.cut_share_low)}%)" for c in binding)
        click.echo(
            f"binding: {len(binding)} cell(s) cut by the cap more than {_pct(fail_on_binding)}%: {named}", err=True
        )
        sys.exit(BINDING_EXIT)
