"""Normalizer sensitivity: how much of Δ_L is the FLORES premium's doing?

Δ_L(B) = acc_N(floor(rB)) − acc_N(B) takes its premium r from FLORES-200. This audit reports, per native
population (model, language and settings):

- the **behavioral ratio**: mean native trace length / mean comparator trace length (output tokens; the native
  and comparator arms are the task's, MGSM's native and translate-act),
  with an item-clustered bootstrap CI (it compares traces that differ in content, correctness and stopping,
  so it is a sensitivity check, not a validated normalizer);
- the **threshold premium**: the smallest r at which max over the budget grid of Δ_L reaches the SESOI,
  found exactly (floor(rB) changes only at r = t/B, and acc_N is scored at every t) up to
  ``search_factor`` (:class:`ThresholdSearch`) times the largest normalizer considered;
- **Δ_L under each normalizer** (FLORES, behavioral, any alternative premiums given, and the same-content
  trace premium) at every grid budget with pointwise item-bootstrap CIs, and its peak;
- the **same-content trace premium** r_trace, when English renderings of native traces are given: total
  tokens of the native traces / total tokens of their English renderings with the model's tokenizer (NFC,
  no special tokens, the FLORES premium's recipe on trace content), item-clustered CI.

One resampling matrix (``n_boot``, ``seed``) per population serves all its CIs.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa

from .._io import regular_file
from ..data.languages import resolve_language
from ..errors import BadInputError, first_line
from ..premium import count_tokens
from ..resample import Resampling, scale_budget
from ..stats.bootstrap import Boot, bootstrap_weights, item_bootstrap
from ..stats.premiums import PremiumTable, lookup_premium
from ..store import population_columns
from ..tasks.roles import COMPARATOR_ROLE, NATIVE_ROLE, role_mask
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, find_tasks, record_tasks, score_matrix


def _item_sums(items: np.ndarray, values: np.ndarray, universe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-item sums of ``values`` rows (any trailing shape) and row counts, on the ``universe`` item axis."""
    pos = np.searchsorted(universe, items)
    sums = np.zeros((len(universe), *values.shape[1:]))
    order = np.argsort(pos, kind="stable")
    if len(order):
        p = pos[order]
        starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
        sums[p[starts]] = np.add.reduceat(values[order].astype(np.float64), starts, axis=0)
    counts = np.bincount(pos, minlength=len(universe)).astype(np.float64)
    return sums, counts


def _ratio_boot(
    num: tuple[np.ndarray, np.ndarray], den: tuple[np.ndarray, np.ndarray], weights: np.ndarray, seed: int
) -> Boot:
    """(mean of num) / (mean of den) with paired replicates from one weight matrix."""
    a = item_bootstrap(num[0], num[1][:, None], weights=weights, seed=seed)
    b = item_bootstrap(den[0], den[1][:, None], weights=weights, seed=seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        return Boot(a.estimate / b.estimate, a.replicates / b.replicates, seed)


#: the audits' resampling: 10,000 item resamples (as every other command), seed 0, 95% intervals
AUDIT_RESAMPLING = Resampling(n_boot=10_000)


@dataclass(frozen=True)
class ThresholdSearch:
    """The threshold premium's search: the SESOI max_B Δ_L must reach, looking up to ``search_factor`` times the
    largest normalizer considered."""

    sesoi: float = 0.05
    search_factor: float = 1.5


@dataclass(frozen=True)
class Normalizers:
    """What Δ_L is compared under besides the behavioral ratio: the FLORES ``premiums``, ``alternatives`` (premium
    tables by name) and English ``renderings`` of native traces (for r_trace; see :func:`load_renderings`)."""

    premiums: PremiumTable | None = None
    alternatives: Mapping[str, PremiumTable] = field(default_factory=dict)
    renderings: pd.DataFrame | None = None


def behavioral_ratios(
    records: pa.Table, *, resampling: Resampling = AUDIT_RESAMPLING, tasks: Sequence[str | os.PathLike[str]] = ()
) -> pd.DataFrame:
    """Mean native / mean comparator output length per matching population (the arms are each record's task's),
    with a percentile CI."""
    n_boot, seed, level = resampling.n_boot, resampling.seed, resampling.level
    keys = population_columns(records)
    pair = [k for k in keys if k != "arm"]
    frame = records.select([*keys, "item", "n_tokens"]).to_pandas()
    frame["_native"], frame["_comparator"] = (
        role_mask(records, NATIVE_ROLE, tasks=tasks),
        role_mask(records, COMPARATOR_ROLE, tasks=tasks),
    )
    rows = []
    for key, group in frame.groupby(pair, dropna=False, sort=True):
        vals = dict(zip(pair, key if isinstance(key, tuple) else (key,), strict=True))
        nat, tra = group[group["_native"]], group[group["_comparator"]]
        if nat.empty or tra.empty:
            continue
        universe = np.unique(group["item"].to_numpy())
        w = bootstrap_weights(len(universe), n_boot, seed=seed)
        boot = _ratio_boot(
            _item_sums(nat["item"].to_numpy(), nat["n_tokens"].to_numpy()[:, None], universe),
            _item_sums(tra["item"].to_numpy(), tra["n_tokens"].to_numpy()[:, None], universe),
            w,
            seed,
        )
        lo, hi = boot.ci(level)
        rows.append(
            {
                **vals,
                "native_mean": float(nat["n_tokens"].mean()),
                "translate_mean": float(tra["n_tokens"].mean()),
                "ratio": float(boot.estimate[0]),
                "ci_low": float(lo[0]),
                "ci_high": float(hi[0]),
                "items": len(universe),
            }
        )
    return pd.DataFrame(rows)


def load_renderings(path: str | os.PathLike[str]) -> pd.DataFrame:
    """English renderings of native traces from JSON lines or CSV: ``lang, item, sample, english`` [``model``],
    checked as :func:`check_renderings` does."""
    file = regular_file(path, "renderings file")
    try:
        frame = pd.read_json(file, lines=True) if file.suffix in (".jsonl", ".json") else pd.read_csv(file)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        msg = first_line(exc)
        raise BadInputError(f"cannot read renderings {file}: {msg}") from exc
    return check_renderings(frame, f"renderings {file}")


def check_renderings(renderings: pd.DataFrame, where: str = "renderings") -> pd.DataFrame:
    """The renderings with ``item``/``sample`` as integers and ``lang`` as a FLORES code.

    A row with a missing or blank ``english`` (or ``lang``/``model``), or an ``item``/``sample`` that is not a
    whole number >= 0, is an error (:class:`MindcapError` naming the first such row, 1-based): it is never
    dropped silently, since a same-content premium over a silently smaller set of traces would mislead. Leave
    out the rows of traces with no rendering instead.
    """
    need = {"lang", "item", "sample", "english"}
    if not need <= set(renderings.columns):
        have = ", ".join(map(str, renderings.columns))
        raise BadInputError(f"the {where} need columns {', '.join(sorted(need))} (have {have})")
    frame = renderings.reset_index(drop=True).copy()
    for col in ("english", "lang", *(["model"] if "model" in frame.columns else [])):
        blank = frame[col].isna() | frame[col].astype(str).str.strip().eq("")
        if blank.any():
            row = int(np.flatnonzero(blank)[0])
            raise BadInputError(
                f"the {where} have {int(blank.sum())} row(s) with no {col} (first: row {row + 1}); "
                "fill them in or leave those traces out"
            )
    for col in ("item", "sample"):
        values = pd.to_numeric(frame[col], errors="coerce").astype(np.float64)
        bad = ~np.isfinite(values) | (values != np.floor(values)) | (values < 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise BadInputError(
                f"the {where} need whole numbers >= 0 in {col}; row {row + 1} has {frame[col].tolist()[row]!r}"
            )
        frame[col] = values.astype(np.int64)
    frame["english"] = frame["english"].astype(str)
    frame["lang"] = frame["lang"].astype(str).map(resolve_language)
    return frame


def trace_premiums(
    records: pa.Table,
    renderings: pd.DataFrame,
    *,
    tokenizers: Mapping[str, ResolvedTokenizer],
    resampling: Resampling = AUDIT_RESAMPLING,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> pd.DataFrame:
    """Same-content trace premium per (model, lang): native trace tokens / English rendering tokens.

    ``renderings`` has ``lang``, ``item``, ``sample``, ``english`` (and optionally ``model``), one row per
    native trace rendered in English; rows without a native record are ignored, malformed rows are an error
    (see :func:`check_renderings`).
    """
    n_boot, seed, level = resampling.n_boot, resampling.seed, resampling.level
    rend = check_renderings(renderings)
    nat = records.filter(pa.array(role_mask(records, NATIVE_ROLE, tasks=tasks)))
    frame = nat.select(["model", "lang", "item", "sample", "text", "tokenizer"]).to_pandas()
    on = ["model", "lang", "item", "sample"] if "model" in rend.columns else ["lang", "item", "sample"]
    joined = frame.merge(rend[[*on, "english"]], on=on).drop_duplicates(["model", "lang", "item", "sample"])
    rows = []
    for (model, lang), group in joined.groupby(["model", "lang"], sort=True):
        tok = tokenizers[group["tokenizer"].iloc[0]]  # any family
        native_tokens, english_tokens = (
            count_tokens(tok, [unicodedata.normalize("NFC", t) for t in group[col]]).astype(np.float64)
            for col in ("text", "english")
        )
        items = group["item"].to_numpy()
        universe = np.unique(items)
        num, _ = _item_sums(items, native_tokens[:, None], universe)
        den, _ = _item_sums(items, english_tokens[:, None], universe)
        boot = item_bootstrap(num, den, n_boot=n_boot, seed=seed)
        lo, hi = boot.ci(level)
        rows.append(
            {
                "model": model,
                "lang": lang,
                "traces": len(group),
                "items": len(universe),
                "native_tokens": int(native_tokens.sum()),
                "english_tokens": int(english_tokens.sum()),
                "r_trace": float(boot.estimate[0]),
                "ci_low": float(lo[0]),
                "ci_high": float(hi[0]),
            }
        )
    return pd.DataFrame(rows)


def threshold_premium(acc: np.ndarray, t0: int, *, budgets: Sequence[int], sesoi: float, r_max: float) -> tuple:
    """Smallest r <= r_max with max_B acc(floor(rB)) − acc(B) >= sesoi; ``acc[t - t0]`` is acc_N(t).

    Returns (r, B, floor(rB)) or (None, None, None) when no r in range reaches it.
    """
    best: tuple[Fraction | None, int | None, int | None] = (None, None, None)
    for b in budgets:
        hi = min(int(np.floor(r_max * b)), t0 + len(acc) - 1)
        if hi <= b:
            continue
        gain = acc[b + 1 - t0 : hi + 1 - t0] - acc[b - t0]
        hit = np.flatnonzero(gain >= sesoi - 1e-12)
        if len(hit):
            t = b + 1 + int(hit[0])
            r = Fraction(t, b)
            if best[0] is None or r < best[0]:
                best = (r, b, t)
    return best


def normalizer_audit(
    records: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    *,
    budgets: Sequence[int],
    normalizers: Normalizers = Normalizers(),
    threshold: ThresholdSearch = ThresholdSearch(),
    resampling: Resampling = AUDIT_RESAMPLING,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> AuditResult:
    """The normalizer-sensitivity tables (see the module docs); accuracies and Δ_L are proportions.

    ``tasks``: the task files of records whose task is not built in (their native and comparator arms, parser)."""
    premiums, alternatives, renderings = normalizers.premiums, normalizers.alternatives, normalizers.renderings
    sesoi, search_factor = threshold.sesoi, threshold.search_factor
    grid = sorted({int(b) for b in budgets})
    n_boot, seed, level = resampling.n_boot, resampling.seed, resampling.level
    behavioral = behavioral_ratios(records, resampling=resampling, tasks=tasks)
    trace = (
        trace_premiums(records, renderings, tokenizers=tokenizers, resampling=resampling, tasks=tasks)
        if renderings is not None
        else None
    )
    found = find_tasks(list(dict.fromkeys(record_tasks(records))), tasks)
    nat = records.filter(pa.array(role_mask(records, NATIVE_ROLE, tasks=tasks)))
    keys = population_columns(nat)
    frame = nat.select([*keys, "item"]).to_pandas()
    pops = frame.groupby(keys, dropna=False, sort=True).indices
    by_pop: dict[tuple, dict[str, Fraction]] = {}
    pair = [k for k in keys if k != "arm"]
    for key in pops:
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        norms: dict[str, Fraction] = {}
        if premiums is not None:
            norms["flores"] = lookup_premium(premiums, vals["model"], lang=vals["lang"])
        match = behavioral
        for k in pair if len(match) else ():
            match = match[match[k].isna()] if pd.isna(vals[k]) else match[match[k] == vals[k]]
        if len(match) and np.isfinite(match["ratio"].iloc[0]):
            norms["behavioral"] = Fraction(repr(float(match["ratio"].iloc[0])))
        for name, table in (alternatives or {}).items():
            norms[name] = lookup_premium(table, vals["model"], lang=vals["lang"])
        if trace is not None:
            t = trace[(trace["model"] == vals["model"]) & (trace["lang"] == vals["lang"])]
            if len(t):
                norms["trace"] = Fraction(repr(float(t["r_trace"].iloc[0])))
        by_pop[key] = norms
    r_top = max([float(r) for n in by_pop.values() for r in n.values()] or [1.0])
    r_max = max(search_factor * r_top, 1.0)
    lengths = nat.column("n_tokens").to_numpy()
    # beyond the longest trace every prefix is the whole trace: acc_N is flat there, so scoring stops at it
    t0 = min(grid)
    t1 = max(min(int(np.floor(r_max * max(grid))), int(lengths.max(initial=0))), max(grid))
    span = np.arange(t0, t1 + 1)
    items_all = frame["item"].to_numpy()
    delta_rows, thresh_rows = [], []
    for key, rows in pops.items():
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        universe = np.unique(items_all[rows])
        scores = score_matrix(nat.take(pa.array(rows)), tokenizers, span, tasks=found)
        sums, counts = _item_sums(items_all[rows], scores, universe)
        del scores
        acc = sums.sum(axis=0) / counts.sum()
        norms = by_pop[key]
        cap_r = search_factor * max([float(r) for r in norms.values()] or [r_top])
        r, b, t = threshold_premium(acc, t0, budgets=grid, sesoi=sesoi, r_max=cap_r)
        thresh_rows.append(
            {
                **vals,
                "sesoi": sesoi,
                "search_up_to": cap_r,
                "threshold_premium": None if r is None else float(r),
                "at_budget": b,
                "scaled_budget": t,
                **{f"{n}_reaches": (None if r is None else bool(v >= r)) for n, v in norms.items()},
            }
        )
        if not norms:
            continue
        scaled_by = {name: [scale_budget(rv, b) for b in grid] for name, rv in norms.items()}
        needed = sorted({*grid, *(min(s, t1) for sc in scaled_by.values() for s in sc)})
        col = {t: j for j, t in enumerate(needed)}
        w = bootstrap_weights(len(universe), n_boot, seed=seed)
        boot = item_bootstrap(sums[:, [t - t0 for t in needed]], counts[:, None], weights=w, seed=seed)
        gi = [col[b] for b in grid]
        for name, rv in norms.items():
            scaled = scaled_by[name]
            delta = boot[[col[min(s, t1)] for s in scaled]] - boot[gi]
            lo, hi = delta.ci(level)
            peak = int(np.argmax(delta.estimate))
            for j, b in enumerate(grid):
                delta_rows.append(
                    {
                        **vals,
                        "normalizer": name,
                        "premium": float(rv),
                        "budget": b,
                        "scaled_budget": scaled[j],
                        "delta": float(delta.estimate[j]),
                        "ci_low": float(lo[j]),
                        "ci_high": float(hi[j]),
                        "peak": j == peak,
                        "reaches_sesoi": bool(delta.estimate[j] >= sesoi),
                    }
                )
    tables = {"behavioral": behavioral, "threshold": pd.DataFrame(thresh_rows), "delta": pd.DataFrame(delta_rows)}
    if trace is not None:
        tables["trace_premium"] = trace
    summary = {
        "budgets": grid,
        "sesoi": sesoi,
        "search_factor": search_factor,
        "n_boot": n_boot,
        "seed": seed,
        "level": level,
        "normalizers": sorted({n for v in by_pop.values() for n in v}),
        "scored_budgets": [t0, t1],
    }
    return AuditResult("normalizer", tables=tables, summary=summary)
