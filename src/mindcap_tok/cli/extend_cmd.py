"""`mindcap-tok extend`: cross-fitted vocabulary extensions with their measured FLORES effect."""

from __future__ import annotations

import time

import click

from .._io import check_new_folder
from ..choices import DEFAULT_MIN_FREQ
from ..data.flores import flores_source
from ..data.languages import resolve_language
from ._options import check_n_boot, format_option, multi_option, n_boot_option, out_dir_option
from ._output import emit, render, to_json
from ._parsing import Command
from ._progress import on_progress, progress_bar


def _ci(pair: list[float]) -> str:
    return f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def _flat(row: dict) -> dict:
    """A summary row with each ``[low, high]`` interval as two columns (``..._ci_low``, ``..._ci_high``)."""
    out: dict = {}
    for key, value in row.items():
        if key.endswith("_ci"):
            out[f"{key}_low"], out[f"{key}_high"] = value if value is not None else (None, None)
        else:
            out[key] = value
    return out


def _table_rows(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        per_fold = r["fold"] != "mean"
        before = f"{r['premium_before']:.3f}" + (f" {_ci(r['premium_before_ci'])}" if per_fold else "")
        after = f"{r['premium_after']:.3f}" + (f" {_ci(r['premium_after_ci'])}" if per_fold else "")
        out.append(
            {
                "fold": r["fold"],
                "merges": f"{r['merges']:.0f}",
                "new tokens": f"{r['new_tokens']:.0f}",
                "premium before": before,
                "premium after": after,
                "English tokens": f"{r['english_token_change']:+.4%}",
                "learn s": f"{r['seconds']:.1f}",
                "measure s": f"{r['measure_seconds']:.1f}",
            }
        )
    return out


@click.command("extend", cls=Command)
@multi_option(
    "--model",
    "models",
    default=["qwen3-8b"],
    show_default=True,
    help="Base tokenizer: registry name, folder, tokenizer.json/.tiktoken path or HF id "
    "(byte-level BPE tokenizer.json, tiktoken such as gpt-4o, SentencePiece BPE such as gemma-3, llama-2).",
)
@multi_option("--lang", "langs", required=True, help="Target language (FLORES code or alias).")
@click.option(
    "--corpus",
    default="flores-dev",
    show_default=True,
    help="flores-dev (FLORES-200 dev of --lang), mgsm (MGSM questions of --lang) or a UTF-8 text file.",
)
@click.option("--size", type=click.IntRange(min=1), help="Learn exactly this many merges per fold.")
@click.option(
    "--min-freq",
    type=click.IntRange(min=1),
    help=f"Minimum pair frequency (alone: learn every merge down to it; with --size: default {DEFAULT_MIN_FREQ}). "
    f"Neither given: every merge whose pair occurs at least {DEFAULT_MIN_FREQ} times.",
)
@click.option(
    "--add-missing-characters",
    is_flag=True,
    help="SentencePiece bases: first add every training character the base vocabulary lacks as a piece (changes "
    "those characters' base segmentation from bytes to one piece; lets transformers reach pieces built from them).",
)
@click.option("--folds", type=click.IntRange(min=2), default=2, show_default=True, help="Cross-fitting folds.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fold split and the bootstrap.")
@n_boot_option()
@out_dir_option("New folder for fold-<k>/ extensions and summary.json (must not exist).")
@format_option()
@click.pass_obj
def extend_command(state, models, langs, corpus, size, min_freq, add_missing_characters, folds, seed, n_boot, out, fmt):
    """Learn cross-fitted byte-level BPE extensions (merges appended after the base merges) and measure them.

    tiktoken bases (gpt-4o, gpt-4) get new ranks after the largest id in use (specials keep their ids) and are
    saved as a .tiktoken rank file plus encoding.json; SentencePiece BPE bases (gemma-3, llama-2) get NORMAL pieces
    appended with scores below every base score, saved as tokenizer.model (Unigram models are refused).

    Fold k's extension learns only from items outside fold k; its manifest lists both item sets, and the
    FLORES devtest premium of the language before and after (bootstrap CIs) and the English token change.
    """
    from ..adaptation.corpus import load_corpus
    from ..adaptation.crossfit import CrossFitting, extend_crossfit, summarize
    from ..adaptation.saved import HF_REMEDY
    from ..tokenization.load import load_tokenizer

    if len(models) != 1 or len(langs) != 1:
        raise click.UsageError("extend takes one --model and one --lang")
    check_n_boot(n_boot)  # the premiums' CIs are at 0.95
    check_new_folder(out)
    code = resolve_language(langs[0])
    source = flores_source(state.config.data_dir.value)
    data = load_corpus(corpus, code, data_dir=state.config.data_dir.value, flores_source=source)
    base = load_tokenizer(models[0], state.config.tokenizers_dir.value)
    start = time.perf_counter()
    # with a frequency rule the number of merges is not known in advance: total None makes the bar only count
    with progress_bar(f"learning merges ({base.name}, {code})", total=folds * size if size else None) as advance:
        results = extend_crossfit(
            base,
            data,
            lang=code,
            learning=CrossFitting(folds, seed, size, min_freq, add_missing_characters),
            out_dir=out,
            n_boot=n_boot,
            flores_source=source,
            on_progress=on_progress(advance),
        )
    rows = summarize(results)
    if fmt == "json":
        text = to_json(rows)
    elif fmt == "csv":
        text = render([_flat(r) for r in rows], "csv")
    else:
        title = f"{base.name} + {code} extension from {data.name} ({folds} folds, seed {seed}); premium on devtest"
        text = render(_table_rows(rows), fmt, title=title)
    emit(text, None)
    if any(r.get("transformers_tokenizer_json") is False for r in rows):
        click.echo(
            f"note: no tokenizer.json for transformers (it would segment unlike the .model): {HF_REMEDY}", err=True
        )
    click.echo(f"wrote {out} in {time.perf_counter() - start:.0f} s", err=True)
