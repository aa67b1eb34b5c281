"""`mindcap-tok premium`: FLORES-200 token premiums per model and language, with bootstrap CIs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..choices import DEFAULT_LANGS, PREMIUM_SPLITS, PROTOCOLS
from ..data.flores import flores_source
from ..data.languages import flores_codes, resolve_language
from ..errors import BadInputError
from ..tasks.mgsm import MGSM_CORPORA, MGSM_LANGUAGES, mgsm_language, mgsm_source
from ._options import budgets_option, format_option, level_option, multi_option, n_boot_option, out_file_option
from ._output import emit, render, to_json, writing
from ._parsing import Command
from ._progress import on_progress, progress_bar

if TYPE_CHECKING:
    from ..premium import PremiumStudy

#: the row fields of ``premium`` before the diagnostics (what md and LaTeX show without ``--diagnostics``)
BASE_FIELDS = (
    "model",
    "lang",
    "ref",
    "split",
    "premium",
    "ci_low",
    "ci_high",
    "ci",
    "tokens",
    "ref_tokens",
    "n_pairs",
    "n_boot",
    "seed",
    "tokenizer_sha256",
    "engine",
    "scaled_budgets",
    "protocol",
)


#: what md and LaTeX show with ``--diagnostics``: the premium, its CI and the diagnostics (CIs in JSON and CSV)
DIAGNOSTIC_FIELDS = (
    "model",
    "lang",
    "premium",
    "ci_low",
    "ci_high",
    "tokens_per_byte",
    "ref_tokens_per_byte",
    "tokens_per_char",
    "byte_fallback_share",
    "byte_fallback_share_low",
    "byte_fallback_share_high",
    "unknown_char_share",
    "distinct_tokens",
)
#: the cost columns ``--price-per-mtok`` adds to md and LaTeX
COST_FIELDS = (
    "cost_in_per_1k_words",
    "cost_out_per_1k_words",
    "extra_cost_in_per_1k_words",
    "extra_cost_out_per_1k_words",
)


def _interval(r: dict, name: str) -> str:
    low, high = r[f"{name}_low"], r[f"{name}_high"]
    return "—" if low is None else f"[{low:.4f}, {high:.4f}]"


def _parse_prices(values: list[str] | None, models: list[str]) -> dict[str, tuple[float, float]]:
    """``IN[,OUT]`` for every model, or ``MODEL=IN[,OUT]`` per model -> {model: (input, output)} USD per 1M tokens."""
    prices: dict[str, tuple[float, float]] = {}
    for value in values or []:
        model, eq, numbers = value.rpartition("=")
        parts = numbers.split(",")
        try:
            pair = tuple(float(x) for x in parts)
        except ValueError:
            pair = ()
        if len(pair) not in (1, 2) or not all(0 <= x < float("inf") for x in pair):
            raise BadInputError(f"--price-per-mtok: {value!r} is not IN[,OUT] or MODEL=IN[,OUT] (USD per 1M tokens)")
        for m in [model] if eq else models:
            if m not in models:
                raise BadInputError(f"--price-per-mtok: {m!r} is not one of the models ({', '.join(models)})")
            prices[m] = (pair[0], pair[-1])
    return prices


def _table_rows(results: list[dict], budgets: list[int] | None, diagnostics: bool = False) -> list[dict]:
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
        if r["protocol"] == "petrov2023":  # Petrov et al.'s unknown fraction and their validated filter
            row["unknown share"] = f"{r['unknown_token_share']:.4f}"
            row["validated"] = "blank" if r["petrov_blank"] else "kept"
        if diagnostics:
            row["tokens/byte"] = f"{r['tokens_per_byte']:.4f} {_interval(r, 'tokens_per_byte')}"
            row["byte-fallback share"] = f"{r['byte_fallback_share']:.4f} {_interval(r, 'byte_fallback_share')}"
            row["unknown chars"] = f"{r['unknown_char_share']:.4f}"
            low = r["distinct_tokens_low"]
            row["distinct"] = f"{r['distinct_tokens']}" + ("" if low is None else f" ±{r['distinct_tokens'] - low:.0f}")
        if "cost_in_per_1k_words" in r:
            row["USD/1k words in, out"] = f"{r['cost_in_per_1k_words']:.6f}, {r['cost_out_per_1k_words']:.6f}"
            row["extra vs ref"] = f"{r['extra_cost_in_per_1k_words']:.6f}, {r['extra_cost_out_per_1k_words']:.6f}"
        rows.append(row)
    return rows


def _premiums_alone(tok: Any, languages: list[str], **how: Any) -> PremiumStudy:
    """:func:`~mindcap_tok.premium.token_premium`'s rows as a study without diagnostics or aggregates."""
    from ..premium import PremiumStudy, token_premium

    return PremiumStudy(token_premium(tok, languages, **how), [], [])


def _summary_notes(fairness: list[dict]) -> str:
    """One line per model and index: the Gini coefficient across the languages with its CI."""
    lines = []
    for f in fairness:
        ci = "" if f["ci_low"] is None else f" [{f['ci_low']:.4f}, {f['ci_high']:.4f}]"
        lines.append(
            f"{f['model']}: Gini of {f['of'].replace('_', ' ')} over {f['n_langs']} languages {f['value']:.4f}{ci}\n"
        )
    return "".join(lines)


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
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    help="Also draw premiums with CIs, and byte-fallback shares, to this PNG.",
)
@multi_option("--mark", "marks", help="Languages to mark in --plot (the paper's MGSM languages are marked anyway).")
@click.option(
    "--diagnostics",
    is_flag=True,
    help="Also count tokens per byte and per character, byte-fallback and unknown shares and distinct tokens, with "
    "CIs, and the Gini coefficients (under the plain table); slower: every token id is kept and resampled. "
    "--summary, --price-per-mtok, --plot and --protocol petrov2023 count them too.",
)
@click.option(
    "--summary",
    type=click.Path(dir_okay=False),
    help="Also write the across-language statistics (Gini coefficients, script and resource groups) as JSON here.",
)
@click.option(
    "--price-per-mtok",
    "prices",
    multiple=True,
    help="USD per 1M tokens, IN[,OUT] for every model (or MODEL=IN[,OUT], repeated); adds the cost of 1,000 "
    "English-equivalent words.",
)
@click.pass_obj
def premium_command(
    state, models, langs, all_langs, ref, corpus, split, protocol, n_boot, seed, level, budgets, fmt, out, plot, **more
) -> None:
    """Token premium r = tokens(L)/tokens(ref) on FLORES-200 (or parallel MGSM texts), with a paired bootstrap
    CI over the text pairs."""
    from ..premium import PremiumText, TokenPrice, language_costs, premium_study
    from ..resample import Resampling
    from ..tokenization.load import load_tokenizer

    marks, diagnostics, summary, prices = more["marks"], more["diagnostics"], more["summary"], more["prices"]
    if plot and protocol == "petrov2023":
        raise click.UsageError("--plot draws CIs; --protocol petrov2023 has none")
    if all_langs and langs:
        raise click.UsageError("give --lang or --all, not both")
    if split and corpus != "flores":
        raise click.UsageError("--split is a FLORES split; MGSM corpora have none")
    every = flores_codes() if corpus == "flores" else MGSM_LANGUAGES
    languages = [c for c in every if c != resolve_language(ref)] if all_langs else list(langs or DEFAULT_LANGS)
    check = resolve_language if corpus == "flores" else mgsm_language
    for lang in (*languages, *(marks or []), ref):  # cheap checks before the slow tokenizer load
        check(lang)
    price = _parse_prices(prices, list(models))
    if corpus == "flores":
        split = split or "devtest"
        source, label = flores_source(state.config.data_dir.value), f"FLORES-200 {split}"
    else:
        split = corpus
        source, label = str(mgsm_source(state.config.data_dir.value)), f"MGSM, {MGSM_CORPORA[corpus]}"
    # what needs the ids: costs need the reference's words, the plot a byte-fallback panel, Petrov's table unknowns
    counted = bool(diagnostics or summary or price or plot or protocol == "petrov2023")
    results: list[dict] = []
    fairness: list[dict] = []
    groups: list[dict] = []
    for model in models:
        tok = load_tokenizer(model, state.config.tokenizers_dir.value)
        with progress_bar(f"tokenizing ({tok.name})", total=len(languages), enabled=len(languages) > 10) as advance:
            study = (premium_study if counted else _premiums_alone)(
                tok,
                languages,
                source=source,
                text=PremiumText(split=split, ref=ref, protocol=protocol),
                resampling=Resampling(n_boot, seed, level),
                budgets=budgets,
                on_progress=on_progress(advance),
            )
        rows = [r.as_dict() for r in study.rows]
        if model in price:
            costs = language_costs(study.rows, TokenPrice(*price[model]))
            rows = [r | {k: v for k, v in c.items() if k not in r} for r, c in zip(rows, costs, strict=True)]
        results.extend(rows)
        fairness += study.fairness
        groups += study.groups
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
        if diagnostics:  # a table to read: the point values and the premium's CI, significant digits
            keep = DIAGNOSTIC_FIELDS + (COST_FIELDS if price else ())
            text = render([{k: r[k] for k in keep} for r in results], fmt, floatfmt=".4g")
        else:
            keep = BASE_FIELDS + (COST_FIELDS if price else ())
            shown = [{k: v for k, v in r.items() if k in keep} for r in results]
            text = render([_short_hash(r) for r in _csv_rows(shown)], fmt)
    else:
        text = render(
            _table_rows(results, budgets, diagnostics),
            "table",
            title=f"Token premium vs {results[0]['ref']} ({label}, {n_boot} resamples, seed {seed})"
            if protocol == "per-sentence"
            else f"Token premium vs {results[0]['ref']} ({label}, Petrov et al. 2023: one string, no CI)",
            priority=("floor(r·B)",),  # the scaled budgets asked for come before the token counts
        )
        text += _table_notes(results) + (_summary_notes(fairness) if diagnostics else "")
    emit(text, out)
    if summary:
        emit(to_json({"fairness": fairness, "groups": groups}), summary)
    if plot:
        from ..report.figures import plot_premiums

        with writing(plot):
            plot_premiums(results, plot, paper=MGSM_LANGUAGES, marked=[resolve_language(x) for x in marks or []])
        click.echo(f"wrote {plot}", err=True)
