"""`mindcap-tok demo`: a simulated demo ledger (real Qwen3 ids and MGSM prompts) to try the pipeline on offline."""

from __future__ import annotations

import click

from ._options import out_dir_option
from ._parsing import Command


@click.command("demo", cls=Command)
@out_dir_option("Demo folder: absent, empty, or an earlier demo (replaced atomically).")
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the simulation (same seed, same records)."
)
@click.option("--items", "n_items", type=click.IntRange(1, 250), default=250, show_default=True, help="MGSM items.")
@click.option("--samples", "k", type=click.IntRange(1, 64), default=4, show_default=True, help="Samples per item.")
@click.pass_obj
def demo_command(state, out: str, seed: int, n_items: int, k: int) -> None:
    """Write a simulated ledger (four arms, de/th/sw, replay, independent and announcement designs) and a README."""
    from ..report.demo import build_demo

    summary = build_demo(
        out,
        seed,
        n_items=n_items,
        k=k,
        data_dir=state.config.data_dir.value,
        tokenizers_dir=state.config.tokenizers_dir.value,
    )
    click.echo(f"wrote {summary.rows} simulated records to {summary.ledger} and {summary.independent}", err=True)
