"""Every command of ``mindcap-tok``, found by walking click's command tree (so a command added later is found too)."""

from __future__ import annotations

import click

from mindcap_tok.cli.main import cli


def leaf_commands(command: click.Command = cli, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The path of every command that runs something: each command that is not a group, and each group that runs
    without a subcommand (``roundtrip JOB``)."""
    if not isinstance(command, click.Group):
        return [path]
    ctx = click.Context(command, info_name=path[-1] if path else "mindcap-tok")
    found = [path] if path and command.invoke_without_command else []
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        assert sub is not None, f"{' '.join(path)} lists {name} but cannot load it"
        found += leaf_commands(sub, (*path, name))
    return found


def command_at(path: tuple[str, ...]) -> click.Command:
    """The command at ``path`` (``("ledger", "import")``)."""
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        sub = command.get_command(click.Context(command), name)
        assert sub is not None, path
        command = sub
    return command
