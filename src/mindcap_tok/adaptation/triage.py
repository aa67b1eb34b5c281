"""Pricing a whole ledger selection (every model, language and task asked for) and the tables of its triage: what
``mindcap-tok price`` prints or writes, built here as plain rows so the CLI only renders them."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..data.languages import resolve_language
from ..store import Ledger
from .price import (
    DEFAULT_PRICE_SETTINGS,
    ExtensionSource,
    PricedTask,
    PriceSettings,
    Pricing,
    ledger_tasks,
    price_ledger,
)


def price_cells(
    ledger: str | os.PathLike[str],
    models: Sequence[str],
    *,
    langs: Sequence[str],
    caps: Sequence[int],
    extension: ExtensionSource,
    settings: PriceSettings = DEFAULT_PRICE_SETTINGS,
    verify: bool = True,
    on_cell: Callable[[], None] | None = None,
) -> list[Pricing]:
    """:func:`~mindcap_tok.adaptation.price.price_ledger` for each model and language (FLORES codes or aliases) and
    each task the ledger holds for them, each task in its own native and comparator arms (``settings.task.files``:
    the user's task files); ``verify`` checks the ledger's shards against their hashes. ``on_cell()`` follows each
    (model, language) priced."""
    results: list[Pricing] = []
    files = settings.task.files
    for model in models:
        for code in (resolve_language(lang) for lang in langs):
            store = Ledger(ledger, verify=verify)
            tasks: list[str | None] = list(ledger_tasks(store, model, lang=code))
            for task in tasks or [None]:
                priced = dataclasses.replace(settings, task=PricedTask(task, files))
                results.append(
                    price_ledger(store, model, lang=code, caps=list(caps), extension=extension, settings=priced)
                )
            if on_cell is not None:
                on_cell()
    return results


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def triage_rows(results: Sequence[Pricing]) -> list[dict[str, Any]]:
    """The triage table: one row per priced (task, model, language, cap), accuracies and gains as signed points
    (``+1.5``), the task named only when there are several."""
    rows = []
    several = len({p.task for p in results}) > 1  # a ledger of several tasks: say whose row
    for p in results:
        for r in p.rows:
            rows.append(
                {
                    **({"task": p.task} if several else {}),
                    "model": r.model,
                    "lang": r.lang,
                    "B": r.cap,
                    "G": _pts(r.G),
                    f"G({r.b_max})": _pts(r.G_max),
                    "G3": _pts(r.G3),
                    "NAT trunc": f"{100 * r.nat_trunc:.1f}%",
                    "NAT gain": _pts(r.nat_gain),
                    "ext NAT gain": _pts(r.ext_nat_gain),
                    "closure G−G3": _pts(r.closure),
                    f"{100 * p.ci:g}% CI": f"[{_pts(r.closure_ci_low)}, {_pts(r.closure_ci_high)}]",
                    "items": r.n_items,
                }
            )
    return rows


def fold_rows(results: Sequence[Pricing]) -> list[dict[str, Any]]:
    """The extension's compression per fold: NATIVE trace tokens with the base and the extended tokenizer, and the
    FLORES premium before and after where it was measured."""
    rows = []
    for p in results:
        for f in p.folds:
            premium = (
                f"{f.premium_before:.3f} -> {f.premium_after:.3f}" if f.premium_before is not None else "not measured"
            )
            rows.append(
                {
                    "model": p.model,
                    "lang": p.lang,
                    "fold": "all" if f.fold is None else f.fold,
                    "items": f.n_items,
                    "NATIVE tokens base -> ext": f"{f.trace_tokens_base} -> {f.trace_tokens_ext}",
                    "ext/base": f"{f.trace_ratio:.3f}",
                    "FLORES premium": premium,
                }
            )
    return rows


def price_records(results: Sequence[Pricing], *, flat: bool = False) -> list[dict[str, Any]]:
    """One JSON-ready record per priced (task, model, language, cap) (:meth:`Pricing.record`, fractions); ``flat``
    leaves out the nested per-fold compression (for CSV)."""
    records = [p.record(r) for p in results for r in p.rows]
    return [{k: v for k, v in rec.items() if k != "compression"} for rec in records] if flat else records


def triage_text(results: Sequence[Pricing]) -> str:
    """The triage sentences of every pricing (:meth:`Pricing.triage`), one a line."""
    return "\n".join(line for p in results for line in p.triage())
