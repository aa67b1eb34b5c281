"""Options that several subcommands share, spelled and documented once."""

from __future__ import annotations

import math

import click

from ..choices import FORMATS, MAX_BUDGET
from ..errors import BadInputError
from ._parsing import MultiValueOption


def multi_option(*decls: str, **kwargs):
    """A :class:`~._parsing.MultiValueOption` (``--lang de th sw``, ``--lang de,th``, ``--lang de --lang th``;
    read by the commands of :mod:`._parsing`); the same keywords as ``click.option``."""
    return click.option(*decls, cls=MultiValueOption, **kwargs)


_BUDGETS = f"budgets must be comma-separated integers (token counts) from 1 to {MAX_BUDGET}"


def _budget_list(ctx: click.Context, param: click.Parameter, values: tuple) -> list[int] | None:
    budgets = []
    for value in values:
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or not 1 <= number <= MAX_BUDGET:
            raise BadInputError(f"{param.opts[0]}: {value!r} is not a valid budget; {_BUDGETS}")
        budgets.append(number)
    return budgets or None


def budgets_option(*decls: str, default=None, help: str, **kwargs):
    """A list of budgets, written one way in every command: ``--budgets 64,128`` or ``--budgets 64 128``.

    The command receives a list of ints in the order given, or ``None`` when the option was not used and has no
    default (the command then applies its own grid). A bad value is a one-line error naming it and the range."""
    return multi_option(
        *(decls or ("--budgets",)),
        default=default,
        show_default=default is not None,
        type=click.STRING,  # not inferred from an int default: every value goes through _budget_list
        callback=_budget_list,
        expects=_BUDGETS,
        metavar="B",
        help=help,
        **kwargs,
    )


#: every command that reads a ledger checks each shard against the manifest's SHA-256; this skips it
no_verify_option = click.option(
    "--no-verify",
    is_flag=True,
    help="Skip checking each ledger shard read against the manifest's size and SHA-256 (on by default: a "
    "damaged or altered shard is an error). For ledgers you trust, when reading speed matters.",
)

#: every command's --format choices but LaTeX, which only commands whose product is a table take
_NO_LATEX = tuple(f for f in FORMATS if f != "latex")


def _set_wide(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta["mindcap.wide"] = value


def wide_option(f):
    """``--wide``: a plain table shows every column, however wide, instead of fitting the terminal."""
    return click.option(
        "--wide",
        is_flag=True,
        expose_value=False,
        callback=_set_wide,
        help="Show every column of a table, past the terminal's width (a narrow terminal gets the key columns).",
    )(f)


def format_option(*, latex: bool = False):
    """``--format``: table (default), json, csv, md; ``latex`` adds LaTeX for commands whose product is a table;
    with it, :func:`wide_option`."""
    choices = FORMATS if latex else _NO_LATEX
    option = click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help="Output format: JSON holds fractions and null for missing values.",
    )
    return lambda f: wide_option(option(f))


def n_boot_option(default: int = 10_000):
    """``--n-boot``: bootstrap resamples, an integer of at least 2 here and, once the level is known,
    :func:`check_n_boot`'s minimum for it (one rule for every command)."""
    return click.option(
        "--n-boot",
        type=click.IntRange(min=2),
        default=default,
        show_default=True,
        help="Bootstrap resamples: at least ceil(2/(1 - level)), so each tail of an interval holds a resample "
        "(40 at level 0.95, 200 at 0.99).",
    )


def check_n_boot(n_boot: int, level: float = 0.95) -> None:
    """Refuse ``--n-boot`` below the minimum for ``level`` before any work (the rule:
    :func:`mindcap_tok.resample.min_resamples`); the library refuses the same, later, on its own."""
    from ..resample import check_resamples  # numpy: imported when a command runs, not for --help

    check_resamples(n_boot, level)


#: sweep, report, protocol test and price: proceed on the items both compared arms hold (recorded in the output)
common_items_option = click.option(
    "--common-items",
    is_flag=True,
    help="Where the native and translate-act arms of a model and language cover different items, compare them "
    "on the items both hold (named in the JSON's arm_items and in the table's footer) instead of refusing.",
)


def level_option(f):
    """``--level``: the confidence level of every CI and band."""
    return click.option(
        "--level",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.95,
        show_default=True,
        help="Confidence level of CIs and bands.",
    )(f)


def out_file_option(help: str = "Write the output here (atomically) instead of stdout."):
    """``--out FILE``: the file a command's output goes to instead of stdout (``--out`` always names a file)."""
    return click.option("--out", type=click.Path(dir_okay=False), help=help)


def out_dir_option(help: str):
    """``--out-dir`` (the command's parameter ``out``): the folder a command writes, as ``--out`` names a file."""
    return click.option("--out-dir", "out", type=click.Path(file_okay=False), required=True, help=help)


def premiums_option(default: str = "each model's own tokenizer"):
    """``--premiums`` (the parameter ``premium_specs``): the premiums r that scale a budget to floor(r·B), spelled
    as every command takes them; ``default`` says where they come from when it is not given."""
    return multi_option(
        "--premiums",
        "premium_specs",
        help="Tokenizer name (qwen3-8b), a `mindcap-tok premium --format json` file, or lang=r; repeatable. "
        f"Default: {default}.",
    )


#: the tokenizer a ledger's ids belong to, for every command that scores or retokenizes stored ids
tokenizer_option = click.option(
    "--tokenizer",
    help="The tokenizer the stored ids belong to: a registry name, a folder or a tokenizer file (default: the "
    "one each record names).",
)

#: records of a task that is not built in are read with their task file's answer type
task_files_option = multi_option(
    "--task",
    "tasks",
    metavar="FILE",
    help="Task file (.toml) of records whose task is not built in (their answer type and gold); repeatable.",
)

#: every command that scores a ledger checks each tokenizer's file hash against the one the manifest recorded for
#: its name (mindcap_tok.store.tokenizers.resolve_tokenizers); this accepts a mismatch
allow_tokenizer_mismatch_option = click.option(
    "--allow-tokenizer-mismatch",
    is_flag=True,
    help="Score with a tokenizer whose file hash differs from the one the ledger's manifest recorded for that "
    "tokenizer name (by default an error: the stored ids may not belong to it).",
)


def _seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise BadInputError(f"{param.opts[0]}: must be a number of seconds > 0, got {value}")
    return value


def server_bounds_options(f):
    """``--timeout SECONDS`` and ``--max-retries N``: how long a command waits on a server (generation, a
    translator, a judge), one spelling in every command; ``None`` when not given (the spec's or the default)."""
    f = click.option(
        "--max-retries",
        type=click.IntRange(0, 100),
        default=None,
        metavar="N",
        help="Further attempts of a server request that timed out or failed in a way worth retrying "
        "[default: the spec's max_retries, else 5].",
    )(f)
    return click.option(
        "--timeout",
        "timeout_s",
        type=float,
        default=None,
        callback=_seconds,
        metavar="SECONDS",
        help="Deadline of each server request attempt, the whole exchange (connect, send, the complete answer): a "
        "server that answers slowly or never ends the command after about (max-retries + 1) x SECONDS plus the "
        "waits between attempts [default: the spec's timeout_s, else 600, room for long generations; lower it "
        "for short replies such as a judge's].",
    )(f)
