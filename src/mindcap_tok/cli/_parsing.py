"""List options through click's public API only: ``--lang de th sw``, ``--lang de,th,sw`` and ``--lang de --lang th``.

click has no argparse-style ``nargs='+'`` for options. Rather than patch its parser (private, and free to change in
any release), every mindcap-tok command is a :class:`Command` or :class:`Group` whose ``parse_args`` (public,
documented for subclassing) first spells each :class:`MultiValueOption`'s values in the repeated form click
itself takes: ``--lang de th,sw`` becomes ``--lang de --lang th --lang sw``. Only the command's own options are
rewritten, known from ``self.params``; a group stops at its subcommand's name, whose own ``parse_args`` then does
the same for its options.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from ..errors import BadInputError


class MultiValueOption(click.Option):
    """An option that takes one or more values after one flag (``multiple=True``; the spellings above), read by
    a :class:`Command` or :class:`Group`. An empty value (``--lang ""``, ``--lang de,,th``) is a one-line error
    (``expects`` says what was wanted), never a silent fall back to the default."""

    def __init__(self, *args, expects: str = "name at least one", **kwargs) -> None:
        kwargs["multiple"] = True
        super().__init__(*args, **kwargs)
        self.expects = expects


def _continues(token: str) -> bool:
    """Whether ``token`` is a value, not an option: one more value of a list option, up to the next option or
    ``--`` (a lone ``-``, stdin by convention, is a value; ``-5`` is not, as it looks like an option)."""
    return not token.startswith("-") or token == "-"


def _split(option: MultiValueOption, flag: str, texts: list[str]) -> list[str]:
    """``texts`` (one flag's values) as repeated ``flag value`` tokens, commas split; an empty value is an error."""
    out = []
    for text in texts:
        items = text.split(",")
        if not all(v.strip() for v in items):
            raise BadInputError(f"{option.opts[0]} got an empty value ({text!r}); {option.expects}")
        for item in items:
            out += [flag, item.strip()]
    return out


def spread_list_options(params: Sequence[click.Parameter], args: Sequence[str], *, interspersed: bool) -> list[str]:
    """``args`` with every :class:`MultiValueOption` of ``params`` in the repeated form; other tokens unchanged.

    The values of other options are skipped (``--texts --lang`` gives ``--texts`` the value ``--lang``), ``--``
    ends the options, and without ``interspersed`` (a group) so does the first positional: the subcommand's."""
    options = {name: p for p in params if isinstance(p, click.Option) for name in (*p.opts, *p.secondary_opts)}
    args, i = list(args), 0
    out: list[str] = []
    while i < len(args):
        token = args[i]
        i += 1
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        option = options.get(name)
        if token == "--" or (not interspersed and _continues(token)):
            return out + args[i - 1 :]
        if isinstance(option, MultiValueOption) and (eq or i < len(args)):
            texts = [attached] if eq else [args[i]]
            i += 0 if eq else 1
            while i < len(args) and _continues(args[i]):
                texts.append(args[i])
                i += 1
            out += _split(option, name, texts)
            continue
        out.append(token)
        if option is not None and token in option.opts and not (option.is_flag or option.count):
            out += args[i : i + option.nargs]
            i += option.nargs
    return out


class _ListOptions:
    """``parse_args`` that spreads this command's list options before click parses (see the module docs)."""

    params: list[click.Parameter]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        spread = spread_list_options(self.params, args, interspersed=ctx.allow_interspersed_args)
        return super().parse_args(ctx, spread)  # type: ignore[misc]  # a mixin: click's Command comes next in the MRO


class Command(_ListOptions, click.Command):
    """Every mindcap-tok command (``@click.command(..., cls=Command)``): takes list options in every spelling."""


class Group(_ListOptions, click.Group):
    """Every mindcap-tok group: its own list options as a :class:`Command`'s; its subcommands are Commands."""

    command_class = Command
    group_class = type  # subgroups made with @group.group() are of the same class
