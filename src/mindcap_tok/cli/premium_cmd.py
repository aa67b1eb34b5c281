"""`mindcap-tok premium`: FLORES-200 token premiums per model and language, with bootstrap CIs."""

from __future__ import annotations

import click

from ..choices import DEFAULT_LANGS, PREMIUM_SPLITS, PROTOCOLS
from ..data.flores import flores_source
from ..data.languages import flores_codes, resolve_language
from ..tasks.mgsm import MGSM_CORPORA, MGSM_LANGUAGES, mgsm_language, mgsm_source
from ._options import budgets_option, format_option, level_option, multi_option, n_boot_option, out_file_option
from ._output import emit, render, to_json, writing
from ._parsing import Command
from ._progress import on_progress, progress_bar


def _table_rows(results: list[dict], budgets: list[int] | None) -> list[dict]:
    rows = []
    for r in results:
        row = {
            "model": r["model"],
            "lang": r["lang"],
            "premium": f"{r['premium']:.3f}",
            f"{r['ci'] * 100:g}% CI": "—" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
            "tokens": r["tokens"],
            "ref_tokens": r["ref_tokens"],
        }
        if budgets:
            row["floor(r·B)"] = " ".join(f"{b}→{s}" for b, s in r["scaled_budgets"].items())
        rows.append(row)
    return rows


def _table_notes(results: list[dict]) -> str:
    """One line per model under the table: its tokenizer's hash and the library that counted its tokens."""
    seen = dict.fromkeys((r["model"], r["tokenizer_sha256"], r["engine"]) for r in results)
    return "".join(f"{model}: tokenizer sha256 {sha[:12]}…, counted by {engine}\n" for model, sha, engine in seen)


def _csv_rows(results: list[dict]) -> list[dict]:
    rows = []
    for r in results:
        row = {k: v for k, v in r.items() if k != "scaled_budgets"}
        for b, s in (r["scaled_budgets"] or {}).items():
            row[f"scaled_{b}"] = s
        rows.append(row)
    return rows


def _short_hash(row: dict) -> dict:
    """``row`` with ``tokenizer_sha256`` shown as its first 12 hex digits (``tokenizer_sha12``), in place."""
    return {
        ("tokenizer_sha12" if k == "tokenizer_sha256" else k): (v[:12] if k == "tokenizer_sha256" else v)
        for k, v in row.items()
    }


@click.command("premium", cls=Command)
@multi_option(
    "--model",
    "models",
    default=["qwen3-8b"],
    show_default=True,
    help="Model name(s), tokenizer folder/file, or HF id; several values allowed.",
)
@multi_option("--lang", "langs", help="Languages (FLORES codes or aliases); default de th sw.")
@click.option("--all", "all_langs", is_flag=True, help="Every FLORES-200 language.")
@click.option("--ref", default="eng_Latn", show_default=True, help="Reference language.")
@click.option(
    "--corpus",
    type=click.Choice(["flores", *MGSM_CORPORA]),
    default="flores",
    show_default=True,
    help="Parallel text: FLORES-200, the 250 MGSM questions (mgsm) or the 8 MGSM exemplar answers (mgsm-answers).",
)
@click.option(
    "--split",
    type=click.Choice(PREMIUM_SPLITS),
    help="FLORES split (default devtest); dev+devtest pools both (2009 pairs).",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default="per-sentence",
    show_default=True,
    help="per-sentence: sum of per-line counts, bootstrap CI. petrov2023: Petrov et al. (2023), one string per "
    "language (the split's lines joined with spaces), no CI (null); use with --split dev+devtest.",
)
@n_boot_option()
@click.option("--seed", type=int, default=0, show_default=True)
@level_option
@budgets_option(help="Budgets B (64,128 or 64 128); adds floor(r·B) for each.")
@format_option(latex=True)
@out_file_option()
@click.option("--plot", type=click.Path(dir_okay=False), help="Also draw premiums with CIs to this PNG.")
@click.pass_obj
def premium_command(
    state, models, langs, all_langs, ref, corpus, split, protocol, n_boot, seed, level, budgets, fmt, out, plot
) -> None:
    """Token premium r = tokens(L)/tokens(ref) on FLORES-200 (or parallel MGSM texts), with a paired bootstrap
    CI over the text pairs."""
    from ..premium import PremiumText, token_premium
    from ..resample import Resampling
    from ..tokenization.load import load_tokenizer

    if plot and protocol == "petrov2023":
        raise click.UsageError("--plot draws CIs; --protocol petrov2023 has none")
    if all_langs and langs:
        raise click.UsageError("give --lang or --all, not both")
    if split and corpus != "flores":
        raise click.UsageError("--split is a FLORES split; MGSM corpora have none")
    every = flores_codes() if corpus == "flores" else MGSM_LANGUAGES
    languages = [c for c in every if c != resolve_language(ref)] if all_langs else list(langs or DEFAULT_LANGS)
    check = resolve_language if corpus == "flores" else mgsm_language
    for lang in (*languages, ref):  # cheap checks before the slow tokenizer load
        check(lang)
    if corpus == "flores":
        split = split or "devtest"
        source, label = flores_source(state.config.data_dir.value), f"FLORES-200 {split}"
    else:
        split = corpus
        source, label = str(mgsm_source(state.config.data_dir.value)), f"MGSM, {MGSM_CORPORA[corpus]}"
    results: list[dict] = []
    for model in models:
        tok = load_tokenizer(model, state.config.tokenizers_dir.value)
        with progress_bar(f"tokenizing ({tok.name})", total=len(languages), enabled=len(languages) > 10) as advance:
            rows = token_premium(
                tok,
                languages,
                source=source,
                text=PremiumText(split=split, ref=ref, protocol=protocol),
                resampling=Resampling(n_boot, seed, level),
                budgets=budgets,
                on_progress=on_progress(advance),
            )
        results.extend(r.as_dict() for r in rows)
    if fmt == "json":
        text = to_json(
            [
                {**r, "scaled_budgets": {str(b): s for b, s in r["scaled_budgets"].items()}}
                if r["scaled_budgets"]
                else {k: v for k, v in r.items() if k != "scaled_budgets"}
                for r in results
            ]
        )
    elif fmt == "csv":
        text = render(_csv_rows(results), fmt)
    elif fmt in ("md", "latex"):  # tables to read: the tokenizer hash abbreviated as in the plain table's notes
        text = render([_short_hash(r) for r in _csv_rows(results)], fmt)
    else:
        text = render(
            _table_rows(results, budgets),
            "table",
            title=f"Token premium vs {results[0]['ref']} ({label}, {n_boot} resamples, seed {seed})"
            if protocol == "per-sentence"
            else f"Token premium vs {results[0]['ref']} ({label}, Petrov et al. 2023: one string, no CI)",
            priority=("floor(r·B)",),  # the scaled budgets asked for come before the token counts
        )
        text += _table_notes(results)
    emit(text, out)
    if plot:
        from ..report.figures import plot_premiums

        with writing(plot):
            plot_premiums(results, plot)
        click.echo(f"wrote {plot}", err=True)
