"""Premium tables for Δ_L: r per (model, language), from :mod:`mindcap_tok.premium`, JSON, or by hand.

Values are kept as exact fractions so that floor(r·B) is computed exactly by
:func:`mindcap_tok.premium.scale_budget` (``2.55`` typed by hand means 255/100).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeAlias

from .._io import regular_file
from ..data.languages import resolve_language
from ..errors import BadInputError, MindcapError, with_context
from ..premium import Premium
from ..resample import Resampling, scale_budget
from ..tokenization.registry import canonical_model_name

#: (model or None for "any model", FLORES code) -> r
PremiumTable = dict[tuple[str | None, str], Fraction]
#: what :func:`premium_table` takes: Premium objects, premium rows, ``{lang: r}``, ``{(model, lang): r}`` or a table
PremiumsLike: TypeAlias = Any


def _exact(value: Any) -> Fraction:  # any number, or text of one; checked here
    if isinstance(value, Fraction):
        return value
    try:
        r = Fraction(repr(float(value)))
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"premium must be a number, got {value!r}") from exc
    if r <= 0:
        raise BadInputError(f"premium must be positive, got {value}")
    return r


def premium_table(source: PremiumsLike) -> PremiumTable:
    """Normalise premiums given as :class:`~mindcap_tok.premium.Premium` objects, rows of
    ``mindcap-tok premium --format json`` (dicts with model/lang/premium, tokens/ref_tokens used when
    present), ``{lang: r}`` (any model), ``{(model, lang): r}``, or an existing table."""
    table: PremiumTable = {}
    if isinstance(source, Mapping):
        for key, value in source.items():
            model, lang = key if isinstance(key, tuple) else (None, key)
            table[(model, resolve_language(lang))] = _exact(value)
        return table
    for row in source:
        if isinstance(row, Premium):
            table[(row.model, resolve_language(row.lang))] = row.ratio
        elif isinstance(row, Mapping) and {"lang", "premium"} <= row.keys():
            exact = (
                Fraction(int(row["tokens"]), int(row["ref_tokens"]))
                if row.get("tokens") and row.get("ref_tokens")
                else _exact(row["premium"])
            )
            table[(row.get("model"), resolve_language(row["lang"]))] = exact
        else:
            raise BadInputError(f"cannot read a premium from {row!r}")
    if not table:
        raise BadInputError("no premiums given")
    return table


def load_premium_json(path: str | Path) -> PremiumTable:
    """Premiums from a file written by ``mindcap-tok premium --format json``."""
    try:
        rows = json.loads(regular_file(path, "premiums file").read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInputError(f"cannot read premiums from {path}: {exc}") from exc
    if not isinstance(rows, list):
        raise BadInputError(f"{path}: expected a JSON list of premium rows")
    return premium_table(rows)


def parse_premium_pairs(pairs: Iterable[str]) -> PremiumTable:
    """``["th=2.55", "de=1.56"]`` (optionally ``model:lang=r``) -> table."""
    table: PremiumTable = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            raise BadInputError(f"expected lang=r, got {pair!r}")
        model, colon, lang = key.rpartition(":")
        table[(model if colon else None, resolve_language(lang.strip()))] = _exact(value.strip())
    return table


def _same_model(a: str, b: str) -> bool:
    return a == b or (canonical_model_name(a) or a) == (canonical_model_name(b) or b)


def lookup_premium(table: PremiumTable, model: str, *, lang: str) -> Fraction:
    """r for (model, lang): an exact model entry, then one for the same registry model, then any-model."""
    code = resolve_language(lang)
    if (model, code) in table:
        return table[(model, code)]
    for (m, c), r in table.items():
        if c == code and m is not None and _same_model(m, model):
            return r
    if (None, code) in table:
        return table[(None, code)]
    known = ", ".join(sorted(f"{m or '*'}:{c}" for m, c in table))
    raise BadInputError(f"no premium for model {model!r}, language {code} (have: {known})")


def required_budgets(budgets: Iterable[int], premiums: Iterable[Fraction | float]) -> list[int]:
    """Every budget to score for a Δ_L sweep: each B and each floor(r·B)."""
    grid = [int(b) for b in budgets]
    if any(b <= 0 for b in grid):
        raise BadInputError(f"budgets must be positive, got {grid}")
    out = set(grid)
    for r in premiums:
        out.update(scale_budget(r, b) for b in grid)
    return sorted(out)


def resolve_premiums(
    specs: Iterable[str] | None,
    models: Iterable[str],
    *,
    languages: Iterable[str],
    tokenizers_dir: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    ref: str = "eng_Latn",
) -> PremiumTable:
    """Premiums for a ledger's models and languages from command-line style specs.

    Each spec is ``lang=r`` (or ``model:lang=r``), a JSON file from ``mindcap-tok premium --format json``,
    or a tokenizer name (``qwen3-8b``): FLORES-200 devtest premiums computed with
    :func:`mindcap_tok.premium.token_premium` for ``languages``. With a single tokenizer spec its premiums
    apply to every model in the ledger. No spec: each model's own tokenizer (paper §3).
    """
    from ..data.flores import flores_source
    from ..premium import PremiumText, token_premium
    from ..tokenization.load import load_tokenizer

    specs = list(specs or [])
    langs = [c for c in dict.fromkeys(resolve_language(x) for x in languages) if c != resolve_language(ref)]
    pairs = [s for s in specs if "=" in s]
    files = [s for s in specs if "=" not in s and s.lower().endswith(".json")]
    names = [s for s in specs if s not in pairs and s not in files]
    table: PremiumTable = parse_premium_pairs(pairs) if pairs else {}
    for f in files:
        table.update(load_premium_json(f))
    auto = not specs
    for name in names or (list(dict.fromkeys(models)) if auto else []):
        try:
            tok = load_tokenizer(name, tokenizers_dir)
        except MindcapError as exc:
            hint = "; pass --premiums (a tokenizer name, a premium JSON file, or lang=r)" if auto else ""
            raise with_context(exc, f"cannot compute premiums for {name!r}: {exc}{hint}") from exc
        # only the ratios are used here, so the premium CI bootstrap is kept minimal
        rows = token_premium(
            tok, langs, source=flores_source(data_dir), text=PremiumText(ref=ref), resampling=Resampling(n_boot=0)
        )
        for row in rows:
            r = row.ratio
            table[(name if auto else row.model, row.lang)] = r
            if len(names) == 1:
                table[(None, row.lang)] = r
    return table
