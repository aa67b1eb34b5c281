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
