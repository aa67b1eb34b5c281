"""`mindcap-tok price`: price raising the cap and extending the vocabulary on a ledger (paper §6, Table 3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .._io import check_new_folder
from ..choices import DEFAULT_MIN_FREQ
from ..data.flores import flores_source
from ..data.languages import resolve_language
from ..errors import MindcapError, with_context
from ._options import (
    allow_tokenizer_mismatch_option,
    budgets_option,
    check_n_boot,
    common_items_option,
    format_option,
    level_option,
    multi_option,
    n_boot_option,
    no_verify_option,
    out_file_option,
    task_files_option,
    tokenizer_option,
)
from ._output import emit, render, to_json
from ._parsing import Command
from ._progress import progress_bar

if TYPE_CHECKING:
    from ..adaptation.price import ExtensionSource


def _extension_source(state, options: dict, *, n_cells: int, n_langs: int) -> ExtensionSource:
    """The ``--extension``/``--learn-extension`` options as one extension source; their misuse is a usage error."""
    from ..adaptation.price import LearnedFolds, SavedFolds

    extension, learn, size, min_freq = (options[k] for k in ("extension", "learn_extension", "size", "min_freq"))
    save = options["save_extension"]
    if bool(extension) == bool(learn):
        raise click.UsageError("give either --extension DIR or --learn-extension")
    if extension and (size or min_freq or save or options["add_missing_characters"]):
        raise click.UsageError(
            "--size, --min-freq, --save-extension and --add-missing-characters go with --learn-extension"
        )
    if extension and n_langs > 1:
        raise click.UsageError("a saved extension belongs to one language; give one --lang with --extension")
    if save and n_cells > 1:
        raise click.UsageError("--save-extension keeps one model's and one language's folds; price them one at a time")
    if extension:
        return SavedFolds(extension)
    if save:
        check_new_folder(save)  # before the learning, not after it
    source = None
    if options["measure_premium"]:
        try:
            source = flores_source(state.config.data_dir.value)
        except MindcapError as exc:
            raise with_context(exc, f"{exc}; or pass --no-premium to skip the FLORES compression check") from exc
    if size is None and min_freq is None:
        min_freq = DEFAULT_MIN_FREQ  # the default rule, as `extend`'s
    return LearnedFolds(
        size, min_freq, options["folds"], options["measure_premium"], source, save, options["add_missing_characters"]
    )


@click.command("price", cls=Command)
@click.option("--ledger", "ledger_dir", required=True, type=click.Path(file_okay=False), help="Ledger folder.")
@multi_option("--model", "models", default=["qwen3-8b"], show_default=True, help="Model(s) priced.")
@multi_option("--lang", "langs", required=True, help="Language(s): FLORES codes or aliases.")
@budgets_option("--cap", "caps", required=True, help="Deployed cap(s) B (256,512 or 256 512).")
@click.option("--extension", type=click.Path(exists=True, file_okay=False), help="Saved extension or cross-fit folder.")
@click.option("--learn-extension", is_flag=True, help="Learn a cross-fitted extension on the NATIVE traces.")
@click.option("--size", type=click.IntRange(min=1), help="Merges per fold for --learn-extension.")
@click.option(
    "--min-freq",
    type=click.IntRange(min=1),
    help="Minimum pair frequency for --learn-extension (neither --size nor --min-freq: every merge whose pair "
    f"occurs at least {DEFAULT_MIN_FREQ} times, as in extend).",
)
@click.option("--folds", type=click.IntRange(min=2), default=2, show_default=True, help="Cross-fit folds.")
@click.option("--save-extension", type=click.Path(), help="Keep the learned folds in this new folder.")
@click.option(
    "--add-missing-characters",
    is_flag=True,
    help="SentencePiece bases, with --learn-extension: first add every training character the base vocabulary "
    "lacks as a piece (as in extend).",
)
@click.option(
    "--premium/--no-premium",
    "measure_premium",
    default=True,
    show_default=True,
    help="Measure each learned fold's FLORES premium before/after.",
)
@tokenizer_option
@click.option("--parser", default="strict", show_default=True, help="Answer parser (strict, last, terminated, ...).")
@click.option("--sample", type=click.IntRange(min=2), help="Price a seeded random sample of this many items.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the sample, folds and bootstrap.")
@n_boot_option()
@level_option
@format_option()
@out_file_option()
@click.option("--workers", type=click.IntRange(min=1), help="Processes retokenizing traces (default: every CPU).")
@no_verify_option
@allow_tokenizer_mismatch_option
@common_items_option
@task_files_option
@click.pass_obj
def price_command(state, ledger_dir, models, langs, caps, fmt, out, no_verify, **options) -> None:
    """Triage the adaptation ladder: what raising the cap and extending the vocabulary recover, with CIs.

    Accuracies, deficits and gains are fractions in JSON/CSV and percentage points in the table. Each task the
    ledger holds for a model and language is priced on its own, in that task's native and comparator arms.
    """
    from ..adaptation.price import PricedTask, PriceSettings
    from ..adaptation.triage import fold_rows, price_cells, price_records, triage_rows, triage_text
    from ..resample import Resampling
    from ..tokenization.load import load_tokenizer

    check_n_boot(options["n_boot"], options["level"])
    codes = [resolve_language(lang) for lang in langs]
    extension = _extension_source(state, options, n_cells=len(codes) * len(models), n_langs=len(codes))
    tokenizer = options["tokenizer"]
    settings = PriceSettings(
        parser=options["parser"],
        sample=options["sample"],
        resampling=Resampling(options["n_boot"], options["seed"], options["level"]),
        common_items=options["common_items"],
        tokenizer=load_tokenizer(tokenizer, state.config.tokenizers_dir.value) if tokenizer else None,
        tokenizers_dir=state.config.tokenizers_dir.value,
        allow_tokenizer_mismatch=options["allow_tokenizer_mismatch"],
        workers=options["workers"],
        task=PricedTask(None, tuple(options["tasks"])),
    )
    with progress_bar("pricing", total=len(models) * len(codes)) as advance:
        results = price_cells(
            ledger_dir,
            models,
            langs=codes,
            caps=caps,
            extension=extension,
            settings=settings,
            verify=not no_verify,
            on_cell=advance,
        )
    n_boot, seed, parser = options["n_boot"], options["seed"], options["parser"]
    triage = triage_text(results)
    if fmt in ("json", "csv"):
        records = price_records(results, flat=fmt == "csv")
        emit(to_json(records) if fmt == "json" else render(records, "csv"), out)
        click.echo(triage, err=True)
        return
    title = f"Adaptation triage (points; {n_boot} item resamples, seed {seed}, parser {parser})"
    body = render(triage_rows(results), fmt, title=title)
    folds = render(fold_rows(results), fmt, title="Extension compression per fold")
    emit(f"{body}\n{folds}\n{triage}\n", out)
