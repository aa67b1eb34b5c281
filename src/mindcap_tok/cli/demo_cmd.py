"""`mindcap-tok demo`: a simulated demo ledger (real Qwen3 ids and MGSM prompts) and a tiny local model, to try
the pipeline on offline."""

from __future__ import annotations

import click

from ..errors import BadInputError
from ._parsing import Command


@click.command("demo", cls=Command)
@click.option(
    "--out-dir",
    "out",
    type=click.Path(file_okay=False),
    help="Demo ledger folder: absent, empty, or an earlier demo (replaced atomically).",
)
@click.option(
    "--tiny-model",
    type=click.Path(file_okay=False),
    help="Also (or only) write a tiny random-weights Qwen3 with the real Qwen3 tokenizer to this folder "
    "(needs the torch extra), for `generate --backend transformers` and `roundtrip`.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the simulation and the weights.")
@click.option("--items", "n_items", type=click.IntRange(1, 250), default=250, show_default=True, help="MGSM items.")
@click.option("--samples", "k", type=click.IntRange(1, 64), default=4, show_default=True, help="Samples per item.")
@click.pass_obj
def demo_command(state, out: str | None, tiny_model: str | None, seed: int, n_items: int, k: int) -> None:
    """Write a simulated ledger (four arms, de/th/sw, replay, independent and announcement designs) and a README."""
    if out is None and tiny_model is None:
        raise BadInputError("give --out-dir DIR (the demo ledger), --tiny-model DIR (a tiny local model), or both")
    from ..demo import check_demo_outputs

    check_demo_outputs(out, tiny_model)  # both folders before either is written
    tokenizers_dir = state.config.tokenizers_dir.value
    if out is not None:
        from ..demo import build_demo

        summary = build_demo(
            out, seed, n_items=n_items, k=k, data_dir=state.config.data_dir.value, tokenizers_dir=tokenizers_dir
        )
        click.echo(f"wrote {summary.rows} simulated records to {summary.ledger} and {summary.independent}", err=True)
    if tiny_model is not None:
        from ..demo import build_tiny_model

        click.echo(
            f"wrote a tiny random-weights model to {build_tiny_model(tiny_model, seed, tokenizers_dir=tokenizers_dir)}",
            err=True,
        )
