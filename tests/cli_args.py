"""Argument lists of CLI runs that several test files make on the same kind of ledger."""

from __future__ import annotations

from pathlib import Path


def price_tiny_args(ledger: Path | str, tokenizer: Path | str) -> list[str]:
    """``price`` of the tiny model's Thai at cap 30 with an extension of size 1 learned on the ledger, as JSON."""
    return [
        "price",
        "--ledger",
        str(ledger),
        "--model",
        "tiny",
        "--lang",
        "th",
        "--cap",
        "30",
        "--tokenizer",
        str(tokenizer),
        "--learn-extension",
        "--size",
        "1",
        "--no-premium",
        "--n-boot",
        "50",
        "--format",
        "json",
    ]


#: the three audits that need no extra, on a small Thai cell: premium 1.5, budgets 8 and 16, 50 resamples
AUDIT_CELL = ["--only", "parser,parity,normalizer", "--premiums", "th=1.5", "--budgets", "8,16", "--n-boot", "50"]


def audit_cell_args(ledger: Path | str, out_dir: Path | str) -> list[str]:
    """``audit`` of ``ledger`` into ``out_dir`` with the :data:`AUDIT_CELL` options."""
    return ["audit", "--ledger", str(ledger), "--out-dir", str(out_dir), *AUDIT_CELL]
