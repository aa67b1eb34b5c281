"""Entry point: global options, one-line errors, and subcommand registration."""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

import click

from .. import _log
from ..config import Config, load_config
from ..errors import MindcapError
from . import _parsing


@dataclass
class State:
    """What the group resolves once for every subcommand."""

    config: Config
    debug: bool


#: subcommand name -> (module in this package, attribute); modules are imported only when their command runs,
#: so ``mindcap-tok config`` does not pay for pandas, tokenizers or torch
COMMANDS = {
    "config": ("config_cmd", "config_command"),
    "languages": ("config_cmd", "languages_command"),
    "premium": ("premium_cmd", "premium_command"),
    "check": ("check_cmd", "check_command"),
    "extend": ("extend_cmd", "extend_command"),
    "adapt": ("adapt_cmd", "adapt_command"),
    "bpb": ("adapt_cmd", "bpb_command"),
    "ledger": ("ledger_cmd", "ledger_group"),
    "score": ("score_cmd", "score_command"),
    "sweep": ("stats_cmd", "sweep_command"),
    "report": ("stats_cmd", "report_command"),
    "cost-grid": ("stats_cmd", "cost_grid_command"),
    "confirm": ("confirm_cmd", "confirm_command"),
    "consistency": ("stats_cmd", "consistency_command"),
    "protocol": ("stats_cmd", "protocol_group"),
    "price": ("price_cmd", "price_command"),
    "generate": ("generate_cmd", "generate_command"),
    "audit": ("audit_cmd", "audit_command"),
    "roundtrip": ("roundtrip_cmd", "roundtrip_command"),
    "render": ("render_cmd", "render_command"),
    "demo": ("demo_cmd", "demo_command"),
    "view": ("view_cmd", "view_command"),
}


#: the root group's options that take a value; like ``--debug`` they may follow the subcommand (no subcommand has an
#: option of these names: tests/test_cli_streams.py checks every command)
GLOBAL_VALUE_OPTIONS = ("--data-dir", "--tokenizers-dir")
_HELP = {"-h", "--help"}
#: ``ctx.meta`` key: whether a subcommand's help was asked for (then no config file is read)
_HELP_ASKED = "mindcap_tok.help_asked"


def globals_first(args: Sequence[str]) -> list[str]:
    """``args`` with the root group's options moved to the front where they follow the subcommand
    (``mindcap-tok sweep … --debug --data-dir D``), where the root group reads them; tokens after ``--`` are left
    alone. ``--data-dir``/``--tokenizers-dir`` take their value with them (``--data-dir D`` or ``--data-dir=D``);
    one with no value left is a usage error, never the subcommand's name taken as its value."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < end:
        token = args[i]
        if token == "--debug" or ("=" in token and token.partition("=")[0] in GLOBAL_VALUE_OPTIONS):
            front.append(token)
        elif token in GLOBAL_VALUE_OPTIONS:
            if i + 1 >= end:
                raise click.UsageError(f"Option '{token}' requires an argument.")
            front += [token, args[i + 1]]
            i += 1
        else:
            rest.append(token)
        i += 1
    return [*front, *rest, *args[end:]]


class Group(_parsing.Group):
    """The root group: loads subcommands lazily and turns errors into one line (``--debug``: traceback)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = globals_first(args)
        ctx.meta[_HELP_ASKED] = bool(_HELP & set(args[: args.index("--") if "--" in args else len(args)]))
        return super().parse_args(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name]
        return getattr(importlib.import_module(f"{__package__}.{module}"), attr)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except Exception as exc:
            if getattr(ctx.obj, "debug", False):
                traceback.print_exc()
            if isinstance(exc, MindcapError):
                click.echo(f"error: {exc}", err=True)
            else:
                msg = str(exc).splitlines()[0] if str(exc) else ""
                click.echo(f"error: {type(exc).__name__}: {msg} (rerun with --debug for a traceback)", err=True)
            ctx.exit(2)


@click.group(cls=Group, context_settings={"help_option_names": sorted(_HELP)})
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    help="Folder with flores200/ and mgsm/ (overrides config and env); before or after the subcommand.",
)
@click.option(
    "--tokenizers-dir",
    type=click.Path(file_okay=False),
    help="Folder with one tokenizer folder per model (overrides config and env); before or after the subcommand.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks; before or after the subcommand.")
@click.version_option(package_name="mindcap-tok")
@click.pass_context
def cli(ctx: click.Context, data_dir: str | None, tokenizers_dir: str | None, debug: bool) -> None:
    """mindcap-tok: measure how much of a multilingual reasoning gap the output-token cap makes."""
    _log.install()
    ctx.obj = State(config=Config(), debug=debug)  # --debug holds for a config file that fails to read
    if not ctx.meta[_HELP_ASKED]:  # a subcommand's --help needs no config: it must work beside a broken file
        ctx.obj.config = load_config(data_dir=data_dir, tokenizers_dir=tokenizers_dir)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="mindcap-tok")
