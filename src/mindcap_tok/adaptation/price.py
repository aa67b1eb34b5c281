"""Price the two token-count rungs of the adaptation ladder on a ledger (paper §6, Table 3) and triage a sample.

Both rungs act only through truncation. *Raising the cap* is read off the ledger itself: the NATIVE accuracy
recovered between the deployed cap B and the largest stored prefix B_max. *Extending the vocabulary* is
measured, not extrapolated: every trace of both arms is re-encoded with the cross-fitted extended tokenizer,
its first B extended tokens are scored with the ledger's parser, and the baseline is the identical computation
with the base tokenizer. With acc_N / acc_T the NATIVE / TRANSLATE-ACT accuracies:

- ``G = acc_T(B) − acc_N(B)`` (the native deficit at the cap), ``G_max`` the same at B_max,
- ``G3`` the deficit with the extension applied to both arms at B, ``closure = G − G3``,
- ``nat_gain = acc_N(B_max) − acc_N(B)`` (what a longer cap recovers), ``ext_nat_gain = acc_N^ext(B) − acc_N(B)``,
- ``nat_trunc`` the share of NATIVE traces longer than B.

Intervals are item-clustered percentile bootstraps (one resampling for every quantity, so differences are
paired), conditional on the fitted tokenizers. All accuracies and deficits are fractions in [−1, 1].
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..budgets import check_budgets
from ..data.languages import resolve_language
from ..errors import BadInputError
from ..resample import DEFAULT_RESAMPLING, Resampling
from ..stats.bootstrap import Boot, item_bootstrap
from ..stats.grid import ArmCoverage, check_arms
from ..store import Ledger, resolve_tokenizers
from ..tasks.answers import AnswerParser, task_parser
from ..tasks.load import DEFAULT_TASK, builtin_tasks
from ..tasks.model import Task
from ..tasks.roles import find_tasks, record_tasks
from ..tokenization.load import ResolvedTokenizer
from ..tokenization.registry import canonical_model_name
from .crossfit import cross_fit, measure_folds, save_crossfit
from .extend import check_extendable
from .retokenize import (
    FoldTokenizer,
    Retokenized,
    Scoring,
    decode_traces,
    fold_tokenizers,
    ledger_corpus,
    retokenize,
    retokenize_items,
)
from .saved import SUMMARY, CrossFitSet, SavedExtension, extension_language, load_crossfit, load_extension

_COLUMNS = [
    "arm",
    "task",
    "item",
    "sample",
    "cap",
    "design",
    "announced",
    "announce_style",
    "forcing",
    "gold",
    "gold_text",
    "finish_reason",
    "n_tokens",
    "tokenizer",
    "output_ids",
]
# accuracy columns of the per-item arrays: (arm, tokenizer, budget)
_N_B, _T_B, _N_MAX, _T_MAX, _N3_B, _T3_B = range(6)


@dataclass(frozen=True)
class Traces:
    """The replay traces of one (model, language), both arms: one row per record and the text of its ids."""

    model: str
    lang: str
    frame: pd.DataFrame
    texts: list[str]
    base: ResolvedTokenizer
    #: the priced task and its (native, comparator) arms
    task: str
    arms: tuple[str, str]

    @property
    def items(self) -> np.ndarray:
        return np.unique(self.frame["item"].to_numpy())

    @property
    def b_max(self) -> int:
        """The largest stored prefix (the cap the long generations were stored under)."""
        return int(self.frame["cap"].max())

    def select(self, items: Sequence[int] | np.ndarray) -> Traces:
        """Every trace of the given items (a cluster sample keeps all samples of a drawn item, in both arms)."""
        keep = self.frame["item"].isin(list(items)).to_numpy()
        rows = np.flatnonzero(keep)
        return Traces(
            self.model,
            self.lang,
            self.frame.iloc[rows].reset_index(drop=True),
            [self.texts[r] for r in rows],
            self.base,
            self.task,
            self.arms,
        )


def task_scoring(frame: pd.DataFrame, parser: str, *, files: Sequence = ()) -> tuple[Sequence, AnswerParser]:
    """Each record's gold (``gold_text`` where set, else ``gold``) and the parser ``parser`` names for the answer
    type of the records' task (built-in tasks, or the user's task ``files``; a cell of several tasks is refused)."""
    names = sorted(set(record_tasks(frame)))
    if len(names) > 1:
        raise BadInputError(f"the priced records hold several tasks ({', '.join(names)}); price one task at a time")
    texts = frame["gold_text"] if "gold_text" in frame else pd.Series([None] * len(frame))
    known = texts.notna().to_numpy()
    gold = frame["gold"].to_numpy()
    golds = gold if not known.any() else [t if k else g for t, g, k in zip(texts, gold, known, strict=True)]
    return golds, task_parser(names[0] if names else DEFAULT_TASK, parser, files=files)


@dataclass(frozen=True)
class PricedTask:
    """Which task's records to price (``name``; None: the only task the model and language hold) and the user's
    task ``files`` (tasks that are not built in: their arms and answer type)."""

    name: str | None = None
    files: Sequence[str | os.PathLike[str]] = ()


def ledger_tasks(ledger: Ledger | str, model: str, *, lang: str) -> list[str]:
    """The tasks of ``model``'s records in ``lang`` (sorted)."""
    store = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    name = canonical_model_name(model) or model
    table = store.read(model=name, lang=resolve_language(lang), columns=["task"])
    return sorted(set(record_tasks(table).tolist()))


def priced_task(store: Ledger, model: str, *, lang: str, task: PricedTask) -> Task:
    """The task priced for ``model``/``lang``: ``task.name``, else the only one there (a one-line error naming
    them when there are several)."""
    held = ledger_tasks(store, model, lang=lang)
    if task.name is None and len(held) > 1:
        raise BadInputError(f"{model} {lang} records hold several tasks ({', '.join(held)}); price one task at a time")
    name = task.name or (held[0] if held else DEFAULT_TASK)
    return find_tasks([name], task.files)[name]


def load_traces(
    ledger: Ledger | str,
    model: str,
    *,
    lang: str,
    tokenizer: ResolvedTokenizer | None = None,
    tokenizers_dir: str | None = None,
    allow_tokenizer_mismatch: bool = False,
    task: PricedTask = PricedTask(),
) -> Traces:
    """Read the replay records of ``model``/``lang`` in their task's native and comparator arms (``task``: which
    task, and the user's task files) and decode their ids.

    The ids are decoded with the tokenizer they were stored under (``tokenizer``, else the name in the records),
    checked against the hash in the ledger manifest by
    :func:`~mindcap_tok.store.tokenizers.resolve_tokenizers` (``allow_tokenizer_mismatch`` accepts a mismatch).
    """
    store = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    code = resolve_language(lang)
    name = canonical_model_name(model) or model
    chosen = priced_task(store, name, lang=code, task=task)
    arms = (chosen.native, chosen.comparator)
    table = store.read(model=name, arm=list(arms), lang=code, columns=_COLUMNS)
    table = table.filter(pa.array(record_tasks(table) == chosen.name))
    frame = table.drop_columns(["output_ids"]).to_pandas()
    replay = (frame["design"] == "replay").to_numpy()
    for arm in arms:
        if not ((frame["arm"] == arm).to_numpy() & replay).any():
            raise BadInputError(
                f"no {arm} replay records for {name} {code} in {store.root}; pricing compares both arms "
                f"(cells there: {', '.join(sorted(store.manifest().get('cells', {}))) or 'none'})"
            )
    rows = np.flatnonzero(replay)
    frame = frame.iloc[rows].reset_index(drop=True)
    ids = table.column("output_ids").take(rows).to_pylist()
    names = sorted(set(frame["tokenizer"]))
    if len(names) != 1:
        raise BadInputError(f"{name} {code} records were stored under several tokenizers ({', '.join(names)})")
    tokenizer = resolve_tokenizers(
        names, store, override=tokenizer, tokenizers_dir=tokenizers_dir, allow_mismatch=allow_tokenizer_mismatch
    )[names[0]]
    return Traces(name, code, frame, decode_traces(tokenizer, ids), tokenizer, chosen.name, arms)


def sample_items(items: Sequence[int] | np.ndarray, n: int | None, *, seed: int) -> np.ndarray:
    """A seeded simple random sample of ``n`` distinct items (all of them when ``n`` is None or too large)."""
    pool = np.unique(np.asarray(items, dtype=np.int64))
    if n is None or n >= pool.size:
        return pool
    if n < 2:
        raise BadInputError(f"a sample needs at least 2 items, got {n}")
    return np.sort(np.random.default_rng(seed).choice(pool, size=n, replace=False))


@dataclass(frozen=True)
class FoldCompression:
    """What one fold's extension does to token counts: on its held-out NATIVE traces, and on FLORES if measured."""

    fold: int | None
    tokenizer: str
    n_items: int
    trace_tokens_base: int
    trace_tokens_ext: int
    premium_before: float | None = None
    premium_after: float | None = None

    @property
    def trace_ratio(self) -> float:
        """Extended / base token count of the fold's NATIVE traces (< 1: the extension compresses)."""
        return self.trace_tokens_ext / self.trace_tokens_base if self.trace_tokens_base else math.nan


@dataclass(frozen=True)
class PriceRow:
    """Table 3 for one (model, language, cap B): accuracies, deficits, gains and their 95% intervals."""

    model: str
    lang: str
    cap: int
    b_max: int
    acc_native: float
    acc_translate: float
    acc_native_max: float
    acc_translate_max: float
    acc_native_ext: float
    acc_translate_ext: float
    G: float
    G_max: float
    G3: float
    nat_trunc: float
    nat_trunc_ext: float
    nat_trunc_max: float
    nat_gain: float
    ext_nat_gain: float
    closure: float
    closure_ci_low: float
    closure_ci_high: float
    G_ci_low: float
    G_ci_high: float
    G3_ci_low: float
    G3_ci_high: float
    nat_gain_ci_low: float
    nat_gain_ci_high: float
    ext_nat_gain_ci_low: float
    ext_nat_gain_ci_high: float
    n_items: int
    n_native: int
    n_translate: int

    @property
    def ext_share(self) -> float:
        """The extension's NATIVE gain as a share of what the longer cap recovers (NaN when that is 0)."""
        return self.ext_nat_gain / self.nat_gain if self.nat_gain else math.nan


@dataclass(frozen=True)
class Pricing:
    """The priced ladder for one (model, language): a row per cap, the extension's compression per fold."""

    model: str
    lang: str
    rows: list[PriceRow]
    folds: list[FoldCompression]
    items: tuple[int, ...]
    parser: str
    n_boot: int
    seed: int
    ci: float
    sample: int | None
    extension: str
    roundtrip_changed: float
    notes: list[str] = field(default_factory=list)
    population: int | None = None  # items there were to sample from (None: not known here)
    coverage: ArmCoverage | None = None  # the items each arm holds (None: not checked here)
    task: str = field(kw_only=True)  # the priced task
    arms: tuple[str, str] = field(kw_only=True)  # its (native, comparator) arms

    def frame(self) -> pd.DataFrame:
        """One row per cap (the JSON/Markdown output's rows)."""
        return pd.DataFrame([self.record(r) for r in self.rows])

    def record(self, row: PriceRow) -> dict:
        """One JSON-ready object for a (language, cap): Table 3 quantities plus run settings and compression."""
        out = asdict(row)
        out |= {
            "task": self.task,
            "ext_share": row.ext_share,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "ci": self.ci,
            "sample": self.sample,
            "population": self.population,
            "parser": self.parser,
            "extension": self.extension,
            "roundtrip_changed": self.roundtrip_changed,
            "b_max_binds": row.nat_trunc_max > 0,
            "compression": [{**asdict(f), "trace_ratio": f.trace_ratio} for f in self.folds],
        }
        if self.coverage is not None:
            out |= self.coverage.as_dict()
        return out

    def triage(self) -> list[str]:
        """Plain sentences: which rung recovers how much, and whether B_max itself still binds."""
        return triage_lines(self)


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def triage_lines(p: Pricing) -> list[str]:
    """The triage statements of :class:`Pricing` (points = percentage points of accuracy)."""
    lines = []
    sampled = p.sample and (p.population is None or p.sample < p.population)
    where = f"{p.model} {p.lang}, {len(p.items)} items" + (f" (a seeded sample, seed {p.seed})" if sampled else "")
    builtin = p.task in builtin_tasks()
    gap = f"{p.arms[1].upper()} − {p.arms[0].upper()}" if builtin else f"{p.arms[1]} − {p.arms[0]} (task {p.task})"
    lines.append(f"Adaptation triage for {where}; gap G = {gap} accuracy, in points.")
    for r in p.rows:
        lines.append(
            f"At cap {r.cap}: {100 * r.nat_trunc:.1f}% of NATIVE traces are longer than the cap; G = {_pts(r.G)}."
        )
        lines.append(
            f"  Raise the cap to {r.b_max}: NATIVE recovers {_pts(r.nat_gain)} points "
            f"({100 * r.acc_native:.1f}% -> {100 * r.acc_native_max:.1f}%); the gap becomes {_pts(r.G_max)}."
        )
        share = "" if math.isnan(r.ext_share) else f", {100 * r.ext_share:.0f}% of what the longer cap recovers"
        lines.append(
            f"  Extend the vocabulary ({p.extension}): NATIVE gains {_pts(r.ext_nat_gain)} points at {r.cap}{share}; "
            f"the gap closes by {_pts(r.closure)} points [{_pts(r.closure_ci_low)}, {_pts(r.closure_ci_high)}] "
            f"(G3 = {_pts(r.G3)})."
        )
        if r.nat_gain == 0:
            lines.append(
                f"  The longer prefix recovers nothing at {r.cap}: no token-count rung can help here, however many "
                "traces the cap truncates."
            )
        if r.nat_trunc_max > 0:
            lines.append(
                f"  warning: B_max = {r.b_max} still binds ({100 * r.nat_trunc_max:.1f}% of NATIVE traces hit it), "
                "so the recovered gain is what this ledger shows, not a ceiling, and a small gain is not dispositive."
            )
    lines.extend(p.notes)
    return lines


def _item_sums(item_index: np.ndarray, n_items: int, values: np.ndarray) -> np.ndarray:
    """Per-item sums of per-trace values (traces on axis 0, any trailing shape)."""
    out = np.zeros((n_items, *values.shape[1:]), dtype=np.float64)
    np.add.at(out, item_index, values)
    return out


def _ci(boot: Boot, level: float) -> tuple[np.ndarray, np.ndarray]:
    low, high = boot.ci(level)
    return np.asarray(low), np.asarray(high)


@dataclass(frozen=True)
class GivenFolds:
    """An extension given as fold tokenizers (each holding out its items)."""

    folds: Sequence[FoldTokenizer]


@dataclass(frozen=True)
class SavedFolds:
    """An extension saved by ``mindcap-tok extend`` or ``save_crossfit``: a cross-fit folder or one extension."""

    path: str | os.PathLike[str]


@dataclass(frozen=True)
class LearnedFolds:
    """An extension learned on the priced NATIVE traces, cross-fitted by item: ``size`` merges per fold and/or
    pairs seen at least ``min_freq`` times (one of them is needed), over ``folds`` folds; ``measure_premium``
    adds each fold's FLORES premium before/after (from ``flores_source``); ``save_to`` keeps the folds in a new
    folder; ``add_missing_characters`` (SentencePiece bases) first adds the characters the base lacks, as
    ``extend --add-missing-characters``."""

    size: int | None = None
    min_freq: int | None = None
    folds: int = 2
    measure_premium: bool = False
    flores_source: str | None = None
    save_to: str | os.PathLike[str] | None = None
    add_missing_characters: bool = False

    def __post_init__(self) -> None:
        if self.size is None and self.min_freq is None:
            raise BadInputError("a learned extension needs a size (merges per fold) or a minimum pair frequency")


#: where the priced extension comes from: exactly one of the three, by type
ExtensionSource = GivenFolds | SavedFolds | LearnedFolds


@dataclass(frozen=True)
class PriceSettings:
    """How a pricing runs: the answer ``parser``; a seeded ``sample`` of items (None: all); the bootstrap
    (``resampling``, whose seed also draws the sample and the folds); pricing on the items both arms hold
    (``common_items``); the ids' tokenizer (``tokenizer``, else by name from ``tokenizers_dir``; a hash other
    than the ledger's is refused unless ``allow_tokenizer_mismatch``); ``workers`` retokenizing
    (default: every usable CPU); and which ``task``'s records, compared in that task's native and comparator arms."""

    parser: str = "strict"
    sample: int | None = None
    resampling: Resampling = DEFAULT_RESAMPLING
    common_items: bool = False
    tokenizer: ResolvedTokenizer | None = None
    tokenizers_dir: str | None = None
    allow_tokenizer_mismatch: bool = False
    workers: int | None = None
    task: PricedTask = PricedTask()


DEFAULT_PRICE_SETTINGS = PriceSettings()


def price_traces(
    traces: Traces,
    folds: Sequence[FoldTokenizer],
    *,
    caps: Sequence[int],
    settings: PriceSettings = DEFAULT_PRICE_SETTINGS,
    extension: str = "extension",
    premiums: Mapping[int | None, tuple[float, float]] | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> Pricing:
    """Table 3 for ``traces`` at each cap, given the extension's fold tokenizers.

    Both arms are re-encoded with the base tokenizer and with the fold tokenizer that held each item out, and
    scored with the ledger's prefix scorer under ``settings.parser``; the largest stored prefix is the completed
    trace. ``premiums`` maps a fold to its FLORES premium (before, after) when it was measured; ``extension``
    describes the extension in the output; ``on_progress(done, total)`` counts traces retokenized over both
    passes (base, then extension). ``settings.sample`` is only recorded here (the traces are already drawn).
    """
    parser, sample, workers = settings.parser, settings.sample, settings.workers
    n_boot, seed, ci = settings.resampling.n_boot, settings.resampling.seed, settings.resampling.level
    grid = check_budgets(caps, sort=True)
    if grid[-1] > traces.b_max:
        raise BadInputError(
            f"cap {int(grid[-1])} exceeds the largest stored prefix {traces.b_max}; nothing to score there"
        )
    frame = traces.frame
    n = len(frame)
    golds, answer_parser = task_scoring(frame, parser, files=settings.task.files)
    # only a finished trace says something about re-encoding: a cut one may end inside a word or a character
    finished = (frame["finish_reason"] == "stop").to_numpy()
    scoring = Scoring(golds, complete=finished, parser=answer_parser)
    # progress over both passes: n traces with the base tokenizer, then n with the extension
    first = (lambda done, _: on_progress(done, 2 * n)) if on_progress else None
    second = (lambda done, _: on_progress(n + done, 2 * n)) if on_progress else None
    base = retokenize(traces.texts, traces.base, budgets=grid, scoring=scoring, on_progress=first, workers=workers)
    ext = retokenize_items(
        traces.texts,
        frame["item"].to_numpy(),
        folds=folds,
        budgets=grid,
        scoring=scoring,
        on_progress=second,
        workers=workers,
    )
    native = (frame["arm"] == traces.arms[0]).to_numpy()
    items, item_index = np.unique(frame["item"].to_numpy(), return_inverse=True)
    values, counts = _accuracy_columns(native, base, ext, grid.size)
    boot = item_bootstrap(
        _item_sums(item_index, items.size, values), _item_sums(item_index, items.size, counts), n_boot=n_boot, seed=seed
    )
    rows = _price_rows(traces, grid, boot, ci, native, ext, int(items.size))
    changed = int((finished & (base.n_tokens != frame["n_tokens"].to_numpy())).sum())
    notes = []
    if changed:
        notes.append(
            f"note: {changed} of {int(finished.sum())} finished traces ({100 * changed / finished.sum():.2f}%) "
            "re-encode to a different base token count than stored (the model emitted non-canonical "
            "tokenizations); the baseline is the re-encoded one, as for the extension."
        )
    return Pricing(
        model=traces.model,
        lang=traces.lang,
        task=traces.task,
        arms=traces.arms,
        rows=rows,
        folds=_fold_compression(frame, native, folds, base, ext, premiums or {}),
        items=tuple(int(i) for i in items),
        parser=parser,
        n_boot=n_boot,
        seed=seed,
        ci=ci,
        sample=sample,
        extension=extension,
        roundtrip_changed=changed,
        notes=notes,
    )


def _scored(r: Retokenized) -> tuple[np.ndarray, np.ndarray]:
    """The prefix scores and completed-trace correctness of traces retokenized with their golds."""
    if r.scores is None or r.correct is None:
        raise BadInputError("the traces were retokenized without golds to score against")
    return r.scores, r.correct


def _accuracy_columns(native: np.ndarray, base: Retokenized, ext: Retokenized, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per trace and cap, the six accuracy columns (``_N_B`` … ``_T3_B``) as (values, counts): each trace fills
    only its own arm's three columns (base tokenizer at B, the completed trace, the extension at B)."""
    n = native.size
    values, counts = np.zeros((n, k, 6)), np.zeros((n, k, 6))
    base_scores, base_correct = _scored(base)
    completed = np.broadcast_to(base_correct.astype(np.float64)[:, None], (n, k))
    for col_native, col_translate, s in (
        (_N_B, _T_B, base_scores.astype(np.float64)),
        (_N_MAX, _T_MAX, completed),
        (_N3_B, _T3_B, _scored(ext)[0]),
    ):
        for rows, col in ((native, col_native), (~native, col_translate)):
            values[rows, :, col] = s[rows]
            counts[rows, :, col] = 1.0
    return values, counts


def _price_rows(
    traces: Traces, grid: np.ndarray, boot: Boot, level: float, native: np.ndarray, ext: Retokenized, n_items: int
) -> list[PriceRow]:
    """One :class:`PriceRow` per cap: accuracies, gaps, gains and closure with their bootstrap CIs."""
    frame = traces.frame
    gap = boot[:, _T_B] - boot[:, _N_B]
    gap_max = boot[:, _T_MAX] - boot[:, _N_MAX]
    gap3 = boot[:, _T3_B] - boot[:, _N3_B]
    nat_gain = boot[:, _N_MAX] - boot[:, _N_B]
    ext_gain = boot[:, _N3_B] - boot[:, _N_B]
    closure = gap - gap3
    named = {"G": gap, "G3": gap3, "nat_gain": nat_gain, "ext_nat_gain": ext_gain, "closure": closure}
    intervals = {name: _ci(b, level) for name, b in named.items()}
    acc = boot.estimate
    stored = frame["n_tokens"].to_numpy()
    truncated_max = (frame["finish_reason"] == "length").to_numpy() | (stored >= frame["cap"].to_numpy())
    rows = []
    for j, cap in enumerate(grid):
        ci_fields = {
            f"{name}_ci_{side}": float(v[s][j])
            for name, v in intervals.items()
            for s, side in ((0, "low"), (1, "high"))
        }
        rows.append(
            PriceRow(
                model=traces.model,
                lang=traces.lang,
                cap=int(cap),
                b_max=traces.b_max,
                acc_native=float(acc[j, _N_B]),
                acc_translate=float(acc[j, _T_B]),
                acc_native_max=float(acc[j, _N_MAX]),
                acc_translate_max=float(acc[j, _T_MAX]),
                acc_native_ext=float(acc[j, _N3_B]),
                acc_translate_ext=float(acc[j, _T3_B]),
                G=float(gap.estimate[j]),
                G_max=float(gap_max.estimate[j]),
                G3=float(gap3.estimate[j]),
                nat_trunc=float((stored[native] > cap).mean()),
                nat_trunc_ext=float((ext.n_tokens[native] > cap).mean()),
                nat_trunc_max=float(truncated_max[native].mean()),
                nat_gain=float(nat_gain.estimate[j]),
                ext_nat_gain=float(ext_gain.estimate[j]),
                closure=float(closure.estimate[j]),
                n_items=n_items,
                n_native=int(native.sum()),
                n_translate=int((~native).sum()),
                **ci_fields,
            )
        )
    return rows


def _fold_compression(
    frame, native: np.ndarray, folds: Sequence[FoldTokenizer], base: Retokenized, ext: Retokenized, premiums: Mapping
) -> list[FoldCompression]:
    """Per fold, the NATIVE trace tokens under the base tokenizer and the extension (and FLORES premiums if known)."""
    out = []
    for fold in sorted(set(ext.fold[native].tolist())):
        rows = native & (ext.fold == fold)
        fx = next((f for f in folds if (f.fold if f.fold is not None else -1) == fold), None)
        before_after = premiums.get(None if fold < 0 else fold, (None, None))
        out.append(
            FoldCompression(
                fold=None if fold < 0 else fold,
                tokenizer=fx.tokenizer.name if fx is not None else "",
                n_items=int(np.unique(frame["item"].to_numpy()[rows]).size),
                trace_tokens_base=int(base.n_tokens[rows].sum()),
                trace_tokens_ext=int(ext.n_tokens[rows].sum()),
                premium_before=before_after[0],
                premium_after=before_after[1],
            )
        )
    return out


def load_extension_folds(
    path: str | os.PathLike[str], base: ResolvedTokenizer, *, lang: str | None = None
) -> tuple[list[FoldTokenizer], dict]:
    """The fold tokenizers of a saved extension (a cross-fit folder or one extension folder) and their premiums.

    Refuses an extension learned on another base tokenizer than the one the ledger's ids came from and, with
    ``lang``, one whose manifest records another language (or none).
    """
    folder = Path(path)
    source = load_crossfit(folder) if (folder / SUMMARY).is_file() else load_extension(folder)
    saved = source.folds if isinstance(source, CrossFitSet) else (source,)
    premiums: dict = {}
    for ext in saved:
        if lang is not None:
            check_extension_language(ext, lang)
        sha = ext.manifest.get("base", {}).get("sha256")
        if sha != base.sha256:
            raise BadInputError(
                f"extension {ext.path} extends a base tokenizer with sha256 {str(sha)[:12]}…, but the ledger's ids "
                f"come from {base.name} ({base.sha256[:12]}…)"
            )
        effect = ext.manifest.get("effect")
        if effect:
            premiums[ext.manifest.get("fold")] = (effect["before"]["premium"], effect["after"]["premium"])
    return fold_tokenizers(source), premiums


def check_extension_language(ext: SavedExtension, lang: str) -> None:
    """Refuse an extension whose manifest records a language other than ``lang`` (or records none)."""
    code = resolve_language(lang)
    recorded = extension_language(ext.manifest)
    if recorded is None:
        raise BadInputError(
            f"extension {ext.path} records no language, so it cannot be checked against {code}; "
            "save it with its language (`mindcap-tok extend --lang`, or save_extension(..., lang=...))"
        )
    if recorded != code:
        raise BadInputError(f"extension {ext.path} was learned for {recorded}, but the priced language is {code}")


def price_ledger(
    ledger: Ledger | str | os.PathLike[str],
    model: str,
    *,
    lang: str,
    caps: Sequence[int],
    extension: ExtensionSource,
    settings: PriceSettings = DEFAULT_PRICE_SETTINGS,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> Pricing:
    """Price both token-count rungs for one model and language (what ``mindcap-tok price`` runs).

    The traces are first checked by :func:`~mindcap_tok.stats.grid.check_arms`: a cell mixing caps or other
    settings, samples per item differing by item, or arms covering different items are refused in one line;
    with ``settings.common_items`` the arms are priced on the items both hold (``Pricing.coverage`` records it).

    ``extension`` is one of three sources (:data:`ExtensionSource`): fold tokenizers (:class:`GivenFolds`), a
    saved folder (:class:`SavedFolds`; it must record the priced language and the ids' base), or cross-fitted
    folds learned here on the NATIVE traces of the priced items (:class:`LearnedFolds`, seeded with
    ``settings.resampling.seed``). ``settings.sample`` prices a seeded random sample of items (every trace of a
    drawn item, both arms); asked for more items than there are, it prices them all, and ``Pricing.sample`` is
    the number used (with a note). The ids' tokenizer must be the one the ledger recorded, unless
    ``settings.allow_tokenizer_mismatch`` (see :func:`load_traces`).
    """
    if not isinstance(extension, GivenFolds | SavedFolds | LearnedFolds):
        raise BadInputError(f"extension must be GivenFolds, SavedFolds or LearnedFolds, got {type(extension).__name__}")
    seed, sample = settings.resampling.seed, settings.sample
    store = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
    traces = load_traces(
        store,
        model,
        lang=lang,
        tokenizer=settings.tokenizer,
        tokenizers_dir=settings.tokenizers_dir,
        allow_tokenizer_mismatch=settings.allow_tokenizer_mismatch,
        task=settings.task,
    )
    coverage = check_arms(
        traces.frame.assign(model=traces.model, lang=traces.lang),
        traces.arms[0],
        translate=traces.arms[1],
        pooled=True,
        common_items=settings.common_items,
    )
    # an unknown parser (for the records' task) fails before any work
    task_scoring(traces.frame, settings.parser, files=settings.task.files)
    if not coverage.restricted.empty:
        traces = traces.select(coverage.restricted["items"].iloc[0])
    if not isinstance(extension, GivenFolds):  # a saved or learned extension: only some families have one
        check_extendable(traces.base)
    population = int(traces.items.size)
    sample_note = []
    if sample is not None:
        traces = traces.select(sample_items(traces.items, sample, seed=seed))
        if sample > population:  # everything is priced: report the items actually used, not the request
            sample_note.append(
                f"note: a sample of {sample} items was asked for, but {traces.model} {traces.lang} "
                f"has {population}; all {population} are priced"
            )
            sample = population
    folds, premiums, described = _extension_folds(extension, traces, settings.resampling, store)
    priced = price_traces(
        traces,
        folds,
        caps=caps,
        settings=dataclasses.replace(settings, sample=sample),
        extension=described,
        premiums=premiums,
        on_progress=on_progress,
    )
    coverage_note = [coverage.footer().strip()] if coverage.footer() else []
    return dataclasses.replace(
        priced, population=population, coverage=coverage, notes=[*coverage_note, *sample_note, *priced.notes]
    )


def _extension_folds(
    extension: ExtensionSource, traces: Traces, resampling: Resampling, store: Ledger
) -> tuple[list[FoldTokenizer], dict, str]:
    """The fold tokenizers of ``extension`` for ``traces``, the folds' FLORES premiums (measured with
    ``resampling.n_boot`` resamples), and a description; learned folds are seeded with ``resampling.seed``."""
    if isinstance(extension, GivenFolds):
        return list(extension.folds), {}, f"{len(extension.folds)} fold tokenizer(s)"
    if isinstance(extension, SavedFolds):
        folds, premiums = load_extension_folds(extension.path, traces.base, lang=traces.lang)
        return folds, premiums, f"{Path(extension.path).name}, {len(folds)} fold(s)"
    learn = extension
    native = (traces.frame["arm"] == traces.arms[0]).to_numpy()
    corpus = ledger_corpus(
        traces.frame["item"].to_numpy()[native],
        [t for t, keep in zip(traces.texts, native, strict=True) if keep],
        name=f"ledger:{traces.model}/{traces.arms[0]}/{traces.lang}",
    )
    learned = cross_fit(
        traces.base,
        corpus,
        folds=learn.folds,
        seed=resampling.seed,
        size=learn.size,
        min_freq=learn.min_freq,
        add_missing_characters=learn.add_missing_characters,
    )
    measured: dict = {}
    if learn.measure_premium:
        learned = measure_folds(learned, traces.lang, n_boot=resampling.n_boot, source=learn.flores_source)
        # measure_folds gives every fold its effect
        measured = {fx.fold: (fx.effect.before.premium, fx.effect.after.premium) for fx in learned if fx.effect}
    if learn.save_to is not None:
        save_crossfit(learned, learn.save_to, extra={"lang": traces.lang, "ledger": str(store.root)})
    merges = "/".join(str(fx.extension.n_merges) for fx in learned)
    described = f"{merges} merges learned on NATIVE traces, {learn.folds} cross-fitted folds"
    return fold_tokenizers(learned, traces.lang), measured, described
