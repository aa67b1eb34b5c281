"""`mindcap-tok adapt` (an extension becomes a resized checkpoint) and `mindcap-tok bpb` (bits per byte of models on
a fold's held-out FLORES lines)."""

from __future__ import annotations

import time

import click

from ..choices import ADAPT_INITS
from ..data.flores import flores_source
from ._options import (
    check_n_boot,
    format_option,
    level_option,
    multi_option,
    n_boot_option,
    out_dir_option,
    out_file_option,
)
from ._output import emit, render, to_json
from ._parsing import Command
from ._progress import on_progress, progress_bar


def _extension_option(help: str):
    return click.option("--extension", required=True, type=click.Path(file_okay=False), help=help)


@click.command("adapt", cls=Command)
@_extension_option("A saved fold (fold-<k>/ of `mindcap-tok extend`) of the model's own tokenizer.")
@click.option(
    "--model",
    required=True,
    type=click.Path(file_okay=False),
    help="The base model: a transformers checkpoint folder (config.json, weights, and tokenizer.json or, for a "
    "SentencePiece fold, tokenizer.model).",
)
@out_dir_option("New folder for the adapted checkpoint (must not exist).")
@click.option(
    "--init",
    default="mean",
    show_default=True,
    help=f"New rows: {', '.join(ADAPT_INITS)} (mean: FVT, the mean of the base rows of the new token's base "
    "encoding; random: the model's own initialiser, seeded; hewitt: drawn around the mean of all base rows, "
    "Hewitt 2021, seeded; focus: FOCUS, Dobler & de Melo 2023, a sparsemax-weighted sum of the base rows of "
    "the base tokens nearest in fastText embeddings trained on the fold's training lines; needs the lid extra).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the random and hewitt inits (focus is deterministic).",
)
@format_option()
@click.pass_obj
def adapt_command(state, extension, model, out, init, seed, fmt):
    """Write a checkpoint of MODEL whose tokenizer is the fold's extended tokenizer and whose input embeddings and
    output layer are resized to it: base rows bit-identical, new rows by --init (untrained: measure with bpb)."""
    from ..adaptation.adapt import adapt_model

    start = time.perf_counter()
    source = flores_source(state.config.data_dir.value) if init == "focus" else None
    record = adapt_model(extension, model, out_dir=out, init=init, seed=seed, flores_source=source)
    if fmt == "json":
        text = to_json(record)
    else:
        keys = ("init", "seed", "first_new_id", "new_tokens", "vocab_size", "tied", "dtype", "mean_base_pieces")
        row = {k: record[k] for k in keys} | {"resize+init s": record["seconds"]["resize_init"]}
        text = render([row], fmt, title=f"{model} adapted to {extension}")
    emit(text, None)
    click.echo(f"wrote {out} in {time.perf_counter() - start:.1f} s", err=True)


def _ci(pair: list[float] | None) -> str:
    return "" if pair is None else f" [{pair[0]:.3f}, {pair[1]:.3f}]"


@click.command("bpb", cls=Command)
@_extension_option("The saved fold whose held-out FLORES lines are scored (learned with --corpus flores-dev).")
@multi_option(
    "--model",
    "models",
    required=True,
    help="Checkpoint folders (the base model first, then `adapt` outputs); each is scored with its own tokenizer.",
)
@click.option("--limit", type=click.IntRange(min=1), help="Score only the first N held-out lines (default: all).")
@click.option("--ref", default="eng_Latn", show_default=True, help="Second language, same line ids.")
@n_boot_option()
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap.")
@level_option
@format_option()
@out_file_option()
@click.option("--plot", type=click.Path(dir_okay=False), help="Also draw bits per byte with CIs to this PNG.")
@click.pass_obj
def bpb_command(state, extension, models, limit, ref, n_boot, seed, level, fmt, out, plot):
    """Bits per byte (sum of -log2 p of each sentence's tokens after one start token, over its UTF-8 bytes) and
    tokens per byte of each model on the fold's held-out FLORES lines, in its language and --ref, with item
    bootstrap CIs; bpb_change is against the first model."""
    from ..adaptation.bpb import BpbSettings, measure_bpb
    from ..resample import Resampling

    check_n_boot(n_boot, level)
    source = flores_source(state.config.data_dir.value)
    settings = BpbSettings(limit=limit, ref=ref, flores_source=source, resampling=Resampling(n_boot, seed, level))
    with progress_bar("scoring held-out lines", total=None) as advance:
        result = measure_bpb(extension, models, settings=settings, on_progress=on_progress(advance))
    if plot:
        from ..report.figures import plot_bpb

        plot_bpb(result, plot)
        click.echo(f"wrote {plot}", err=True)
    rows = result["rows"]
    if fmt == "json":
        text = to_json(result)
    elif fmt == "csv":
        flat = [
            {k: v for k, v in r.items() if not k.endswith("_ci")}
            | {
                f"{k}_{end}": (r[k] or [None, None])[j]
                for k in ("bpb_ci", "bpb_change_ci")
                for j, end in enumerate(("low", "high"))
            }
            for r in rows
        ]
        text = render(flat, "csv")
    else:
        table = [
            {
                "model": r["model"],
                "init": r["init"],
                "lang": r["lang"],
                "sentences": r["sentences"],
                "tokens/byte": f"{r['tokens_per_byte']:.3f}",
                "bits/byte": f"{r['bpb']:.3f}{_ci(r['bpb_ci'])}",
                "change": f"{r['bpb_change']:+.3f}{_ci(r['bpb_change_ci'])}",
            }
            for r in rows
        ]
        title = f"bits per byte on the held-out lines of fold {result['fold']} of {result['corpus']}"
        text = render(table, fmt, title=title)
    emit(text, out)
