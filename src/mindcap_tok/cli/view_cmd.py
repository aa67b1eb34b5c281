"""`mindcap-tok view`: open a report's page (report.html), building it first when given a ledger."""

from __future__ import annotations

import click

from ..choices import FRAMES, SWEEP_BUDGETS
from ._options import budgets_option, premiums_option
from ._parsing import Command


@click.command("view", cls=Command)
@click.argument("path", type=click.Path(exists=True))
@click.option(
    "--out-dir",
    "out",
    type=click.Path(file_okay=False),
    help="Where a ledger's report is built: absent, empty or an earlier report (default: a new temporary folder).",
)
@premiums_option()
@budgets_option(help=f"A ledger's budgets B (default {','.join(map(str, SWEEP_BUDGETS))}).")
@click.option(
    "--frame",
    type=click.Choice(FRAMES),
    default="replay",
    show_default=True,
    help="A ledger's frame: replay (prefixes of one long ledger) or independent (each record's cap its budget).",
)
@click.option("--no-open", is_flag=True, help="Print the page's path without opening a browser.")
@click.pass_obj
def view_command(
    state, path: str, out: str | None, premium_specs: tuple[str, ...], budgets, frame: str, no_open: bool
) -> None:
    """Print the path of PATH's report.html (PATH: the page, a report folder, or a ledger whose report is built
    first, as `mindcap-tok report` builds it with its defaults) and open it in the browser."""
    from ..report.ledger_report import ReportSettings, open_report

    settings = ReportSettings(frame=frame, premium_specs=premium_specs, budgets=budgets or SWEEP_BUDGETS)
    page = open_report(path, out_dir=out, config=state.config, settings=settings)
    click.echo(str(page))
    if not no_open:
        import webbrowser

        webbrowser.open(page.resolve().as_uri())
