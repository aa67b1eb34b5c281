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
