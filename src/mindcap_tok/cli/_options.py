"""Options that several subcommands share, spelled and documented once."""

from __future__ import annotations

import click

#: every command that reads a ledger checks each shard against the manifest's SHA-256; this skips it
no_verify_option = click.option(
    "--no-verify",
    is_flag=True,
    help="Skip checking each ledger shard read against the manifest's size and SHA-256 (on by default: a "
    "damaged or altered shard is an error). For ledgers you trust, when reading speed matters.",
)

#: every command's --format choices: one set, with LaTeX where a table is the product
FORMATS = ("table", "json", "csv", "md")


def format_option(*, latex: bool = False):
    """``--format``: table (default), json, csv, md; ``latex`` adds LaTeX for commands whose product is a table."""
    choices = (*FORMATS, "latex") if latex else FORMATS
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help="Output format: JSON holds fractions and null for missing values.",
    )


def n_boot_option(default: int = 10_000):
    """``--n-boot``: bootstrap resamples, an integer of at least 2 (one rule for every command)."""
    return click.option(
        "--n-boot",
        type=click.IntRange(min=2),
        default=default,
        show_default=True,
        help="Bootstrap resamples (at least 2).",
    )


def _deprecated_ci(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None:
        click.echo("warning: --ci is deprecated; use --level (the same confidence level)", err=True)
        ctx.meta["deprecated_ci"] = value
    return value


def _level(ctx: click.Context, param: click.Parameter, value: float) -> float:
    return ctx.meta.get("deprecated_ci", value) if ctx.get_parameter_source("level").name == "DEFAULT" else value


def level_option(f):
    """``--level``: the confidence level of every CI and band; ``--ci`` is its deprecated spelling (one release)."""
    level_range = click.FloatRange(0, 1, min_open=True, max_open=True)
    f = click.option(
        "--ci",
        "deprecated_ci",
        type=level_range,
        expose_value=False,
        is_eager=True,
        callback=_deprecated_ci,
        hidden=True,
    )(f)
    return click.option(
        "--level",
        type=level_range,
        default=0.95,
        show_default=True,
        callback=_level,
        help="Confidence level of CIs and bands.",
    )(f)


def _deprecated_out(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        click.echo("warning: --out for a folder is deprecated; use --out-dir (--out names files)", err=True)
        ctx.meta["deprecated_out"] = value
    return value


def _out_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    value = value if value is not None else ctx.meta.get("deprecated_out")
    if value is None:
        raise click.MissingParameter(ctx=ctx, param=param)
    return value


def out_dir_option(help: str):
    """``--out-dir`` (the command's parameter ``out``): the folder a command writes, as ``--out`` always names a
    file; ``--out`` is accepted for one release as a deprecated spelling, with a warning."""

    def deco(f):
        f = click.option(
            "--out",
            "deprecated_out",
            type=click.Path(file_okay=False),
            expose_value=False,
            is_eager=True,
            callback=_deprecated_out,
            hidden=True,
        )(f)
        return click.option(
            "--out-dir", "out", type=click.Path(file_okay=False), callback=_out_dir, help=f"{help}  [required]"
        )(f)

    return deco


#: the tokenizer a ledger's ids belong to, for every command that scores or retokenizes stored ids
tokenizer_option = click.option(
    "--tokenizer",
    help="The tokenizer the stored ids belong to: a registry name, a folder or a tokenizer file (default: the "
    "one each record names).",
)

#: every command that scores a ledger checks each tokenizer's file hash against the one the manifest recorded for
#: its name (mindcap_tok.ledger.tokenizers.resolve_tokenizers); this accepts a mismatch
allow_tokenizer_mismatch_option = click.option(
    "--allow-tokenizer-mismatch",
    is_flag=True,
    help="Score with a tokenizer whose file hash differs from the one the ledger's manifest recorded for that "
    "tokenizer name (by default an error: the stored ids may not belong to it).",
)
