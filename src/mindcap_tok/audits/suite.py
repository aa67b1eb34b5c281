"""The audit suite: run the selected audits over one ledger and write one Markdown report plus JSON.

Audits (``--only`` names) live in :data:`REGISTRY`, one :class:`AuditSpec` each: ``langid`` (trace language),
``comet`` (translation quality: chrF always, COMET with a checkpoint), ``parser`` (parser robustness),
``parity`` (decoder parity), ``normalizer`` (normalizer sensitivity), ``truncation`` (what the run's cap did),
and, only when named, ``determinism``
(repeat and capped-vs-long identity of ``design = "determinism"`` jobs). An audit is *skipped* only when its
optional dependency is missing (:class:`~mindcap_tok.errors.MissingExtraError`; the report names the install
command) or for a reason the audit states itself (e.g. no English references, no translate-act records); the
others still run. Any other error fails the whole run (:class:`AuditFailed`), so no report is written.
Tokenizers are resolved once, by the ledger's policy (:func:`~mindcap_tok.store.tokenizers.resolve_tokenizers`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pyarrow as pa

from .._io import output_folder
from .._json import dumps_strict, strict_json_value
from .._tables import MISSING, is_missing, markdown_table
from ..errors import BadInputError, MindcapError, MissingExtraError, first_line
from ..resample import Resampling
from ..stats.premiums import PremiumTable
from ..store import Ledger, resolve_tokenizers
from ..tasks.roles import record_tasks
from ..tokenization.load import ResolvedTokenizer
from ._common import POPULATION_COLUMNS, AuditResult, find_tasks, skipped
from .determinism import determinism_audit
from .langid import LidSettings, LidValidation, langid_audit, load_lid_model, validation_csv
from .lid_adjudication import LidJudge
from .normalizer import AUDIT_RESAMPLING, Normalizers, ThresholdSearch, normalizer_audit
from .parity import parity_audit
from .parser_audit import parser_audit
from .translation import translation_audit
from .truncation import truncation_audit

_COLUMNS = (
    *POPULATION_COLUMNS,
    "item",
    "sample",
    "seed",
    "output_ids",
    "text",
    "finish_reason",
    "gold",
    "gold_text",
    "tokenizer",
    "n_tokens",
    "retokenized",
    "think_end",
)
#: the report's number format: 4 significant digits
FLOATFMT = ".4g"


@dataclass
class AuditConfig:
    """Inputs and settings of the suite; every random procedure uses ``resampling.seed`` (recorded in the output),
    every bootstrap ``resampling``.

    ``tokenizer`` scores every record's ids (``--tokenizer``); else ``tokenizers`` (by name) are used before
    loading from ``tokenizers_dir``; either way a tokenizer whose hash differs from the one the ledger recorded
    is an error unless ``allow_tokenizer_mismatch``.
    """

    budgets: Sequence[int] = (64, 128, 192, 256, 384, 512, 768, 1024)
    premiums: PremiumTable | None = None
    alternatives: Mapping[str, PremiumTable] = field(default_factory=dict)
    renderings: pd.DataFrame | None = None
    references: Mapping | None = None
    sources: Mapping | None = None
    comet_checkpoint: str | None = None
    translation_budgets: Sequence[int] = (128, 192, 256)
    lid_model: str | None = None
    lid_hub: bool = True
    lid: LidSettings = field(default_factory=LidSettings)
    validation_per_cell: int = 20
    validation_labels: pd.DataFrame | None = None
    lid_judge: LidJudge | None = None
    criterion: float = 0.9
    parity_per_stratum: int = 20
    sesoi: float = 0.05
    search_factor: float = 1.5
    resampling: Resampling = AUDIT_RESAMPLING
    tokenizer: ResolvedTokenizer | None = None
    tokenizers: Mapping[str, ResolvedTokenizer] | None = None
    tokenizers_dir: str | None = None
    allow_tokenizer_mismatch: bool = False
    #: the truncation audit's budgets (each population's up to its cap); ``None``: the eighths of each cap
    truncation_budgets: Sequence[int] | None = None
    #: task files of records whose task is not built in
    tasks: Sequence[str] = ()


class AuditRun(NamedTuple):
    """What an audit's runner returns: its result and, for langid, the validation sample to write."""

    result: AuditResult
    validation_sample: pd.DataFrame | None = None


#: runner(records, tokenizers by name, config)
Runner = Callable[[pa.Table, Mapping[str, ResolvedTokenizer], AuditConfig], AuditRun]


@dataclass(frozen=True)
class AuditSpec:
    """One audit of the suite.

    ``run`` calls the audit with keyword arguments from the config; ``needs`` names the inputs it reads
    (``tokenizers`` means the records' tokenizers are resolved for it); ``required`` maps a config field to the
    reason the audit is skipped when that field is ``None``; ``extras`` maps each optional extra it may need to
    the install hint shown when it is missing; ``headline`` is the report's one-line key figure; an audit with
    ``default=False`` runs only when named (``--only``), never in the default "all" run.
    """

    name: str
    title: str
    run: Runner
    headline: Callable[[AuditResult], str]
    needs: tuple[str, ...] = ()
    required: Mapping[str, str] = field(default_factory=dict)
    extras: Mapping[str, str] = field(default_factory=dict)
    default: bool = True

    def install_hint(self, exc: MissingExtraError) -> str:
        """The skip reason for a missing extra: the package and how to install it."""
        hint = self.extras.get(exc.extra, f"pip install 'mindcap-tok[{exc.extra}]'")
        return f"{exc.package} is not installed: {hint}"


class AuditFailed(MindcapError):
    """An audit raised an error that is neither a missing extra nor a reason to skip it.

    Attributes: ``audit`` (its name) and ``cause`` (the exception).
    """

    names_source = False  # its message stands alone (no spec file named in front)

    def __init__(self, audit: str, cause: BaseException) -> None:
        self.audit, self.cause = audit, cause
        kind = "" if isinstance(cause, MindcapError) else f"{type(cause).__name__}: "
        super().__init__(f"audit {audit} failed: {kind}{first_line(cause)}")


# -- runners: the audits called with keyword arguments ---------------------------------------------------------
def _run_langid(records: pa.Table, toks: Mapping[str, ResolvedTokenizer], c: AuditConfig) -> AuditRun:
    result, sample = langid_audit(
        records,
        model=load_lid_model(c.lid_model, hub=c.lid_hub),
        settings=c.lid,
        validation=LidValidation(c.validation_per_cell, c.validation_labels, c.criterion),
        seed=c.resampling.seed,
        tasks=c.tasks,
        judge=c.lid_judge,
        tokenizers=toks,
    )
    return AuditRun(result, sample)


def _run_comet(records: pa.Table, toks: Mapping[str, ResolvedTokenizer], c: AuditConfig) -> AuditRun:
    if c.references is None:  # the suite runs this audit only where it has references (its needs)
        raise BadInputError("the COMET audit needs references for the translation segments")
    return AuditRun(
        translation_audit(
            records,
            references=c.references,
            tokenizers=toks,
            budgets=c.translation_budgets,
            sources=c.sources,
            comet_checkpoint=c.comet_checkpoint,
            delimiter=c.lid.delimiter,
            tasks=c.tasks,
        )
    )


def _run_parser(records: pa.Table, toks: Mapping[str, ResolvedTokenizer], c: AuditConfig) -> AuditRun:
    return AuditRun(parser_audit(records, tokenizers=toks, budgets=c.budgets, premiums=c.premiums, tasks=c.tasks))


def _run_parity(records: pa.Table, toks: Mapping[str, ResolvedTokenizer], c: AuditConfig) -> AuditRun:
    return AuditRun(
        parity_audit(
            records, tokenizers=toks, budgets=c.budgets, per_stratum=c.parity_per_stratum, seed=c.resampling.seed
        )
    )


def _run_normalizer(records: pa.Table, toks: Mapping[str, ResolvedTokenizer], c: AuditConfig) -> AuditRun:
    return AuditRun(
        normalizer_audit(
            records,
            tokenizers=toks,
            budgets=c.budgets,
            normalizers=Normalizers(premiums=c.premiums, alternatives=c.alternatives, renderings=c.renderings),
            threshold=ThresholdSearch(sesoi=c.sesoi, search_factor=c.search_factor),
            resampling=c.resampling,
            tasks=c.tasks,
        )
    )


def _run_truncation(records: pa.Table, toks: Mapping[str, ResolvedTokenizer], c: AuditConfig) -> AuditRun:
    return AuditRun(
        truncation_audit(
            records,
            toks,
            budgets=c.truncation_budgets,
            premiums=c.premiums,
            tasks=c.tasks,
            level=c.resampling.level,
        )
    )


def _run_determinism(records: pa.Table, toks: Mapping[str, ResolvedTokenizer], c: AuditConfig) -> AuditRun:
    return AuditRun(determinism_audit(records, level=c.resampling.level))


# -- headlines: one key figure per audit -----------------------------------------------------------------------


def _pct(x) -> str:
    return MISSING if is_missing(x) else f"{100 * float(x):.1f}%"


def _pooled(table: pd.DataFrame, value: str, weight: str) -> float | None:
    """The ``weight``-weighted mean of ``value`` over the rows with a positive weight (None when there are none)."""
    if table.empty or value not in table or weight not in table:
        return None
    rows = table[(table[weight] > 0) & table[value].notna()]
    total = float(rows[weight].sum())
    return float((rows[value] * rows[weight]).sum() / total) if total else None


def _headline_langid(res: AuditResult) -> str:
    table = res.tables.get("compliance", pd.DataFrame())
    det = int(table["determinate"].sum()) if "determinate" in table else 0
    line = f"{_pct(_pooled(table, 'in_expected', 'determinate'))} of {det} determinate traces in the expected language"
    judged = res.summary.get("adjudication")
    if judged:
        ci = f"Wilson [{_pct(judged['agreement_macro_low'])}, {_pct(judged['agreement_macro_high'])}]"
        line += (
            f"; judge {judged['judge_model']} agrees on {_pct(judged['agreement_macro'])} of {judged['parsed']} "
            f"(macro, {ci}; {judged['unparseable']} unparseable)"
        )
    return line


def _headline_comet(res: AuditResult) -> str:
    table = res.tables.get("quality", pd.DataFrame())
    n = int(table["scored"].sum()) if "scored" in table else 0
    parts = []
    for metric in res.summary.get("metrics", ["chrf"]):
        mean = _pooled(table, f"{metric}_mean", "scored")
        label = "chrF" if metric == "chrf" else metric.upper()
        parts.append(f"mean {label} {MISSING if mean is None else f'{mean:.4g}'}")
    return f"{', '.join(parts)} over {n} translation segments"


def _headline_parser(res: AuditResult) -> str:
    table = res.tables.get("robustness", pd.DataFrame())
    n = int(table["n"].sum()) if "n" in table else 0
    rescued = int(table["rescued_traces"].sum()) if n else 0
    unstable = int(table["unstable_traces"].sum()) if n else 0
    return (
        f"rescued-correct {rescued} of {n} traces ({_pct(rescued / n if n else None)}), "
        f"value-unstable {unstable} ({_pct(unstable / n if n else None)})"
    )


def _headline_parity(res: AuditResult) -> str:
    s = res.summary
    return (
        f"raw agreement {_pct(s.get('raw_agreement'))}, after special-token normalisation "
        f"{_pct(s.get('normalized_agreement'))} ({s.get('sampled', 0)} prefixes sampled)"
    )


#: below this many rendered items in a cell, the summary calls the trace premium a rough estimate (its item
#: bootstrap has little to resample; 30 is the usual rule of thumb for a bootstrap CI)
TRACE_ITEMS_CAVEAT = 30


def _headline_normalizer(res: AuditResult) -> str:
    delta = res.tables.get("delta", pd.DataFrame())
    if delta.empty:
        return f"peak Δ_L: {MISSING} (no normalizer)"
    peaks = delta[delta["peak"]].groupby("normalizer", sort=False)["delta"].max()
    shown = ", ".join(f"{name} {MISSING if is_missing(v) else f'{100 * v:+.1f}'}" for name, v in peaks.items())
    trace = res.tables.get("trace_premium", pd.DataFrame())
    if "trace" in peaks.index and not trace.empty:  # r_trace rests on the traces that have a rendering
        traces, items = int(trace["traces"].sum()), int(trace["items"].min())
        shown += f" (r_trace from {traces} rendered traces"
        shown += f"; only {items} items in a cell: a rough estimate)" if items < TRACE_ITEMS_CAVEAT else ")"
    return f"largest peak Δ_L (points): {shown}"


def _headline_truncation(res: AuditResult) -> str:
    table = res.tables.get("cells", pd.DataFrame())
    n = int(table["records"].sum()) if "records" in table else 0
    hits = int(table["cap_hits"].sum()) if n else 0
    retok = int(table["retokenized_cap_hits"].sum()) if n else 0
    named = f", {retok} of them retokenized" if retok else ""
    return (
        f"cap hit by {hits} of {n} traces ({_pct(hits / n if n else None)}{named}); accuracy at the cap "
        f"{_pct(_pooled(table, 'acc_truncated', 'cap_hits'))} truncated vs "
        f"{_pct(_pooled(table, 'acc_completed', 'completed'))} completed"
    )


def _headline_determinism(res: AuditResult) -> str:
    s = res.summary
    return (
        f"repeats identical in {_pct(s.get('repeat_share'))} of {s.get('repeat_groups', 0)} groups, capped "
        f"decodes equal to the long prefix in {_pct(s.get('prefix_share'))} of {s.get('prefix_pairs', 0)}"
    )


#: the suite's audits, in report order
REGISTRY: dict[str, AuditSpec] = {
    spec.name: spec
    for spec in (
        AuditSpec(
            "langid",
            "Trace-language ID",
            _run_langid,
            _headline_langid,
            needs=("lid_model", "lid", "validation_labels", "tasks", "lid_judge"),
            extras={"lid": "pip install 'mindcap-tok[lid]'"},
        ),
        AuditSpec(
            "comet",
            "Translation quality (chrF / COMET)",
            _run_comet,
            _headline_comet,
            needs=("tokenizers", "references", "sources", "comet_checkpoint", "translation_budgets", "tasks"),
            required={
                "references": "no references for the translation segments: give the data folder of the ledger's "
                "tasks (--data-dir) or references"
            },
            extras={
                "chrf": "pip install 'mindcap-tok[chrf]' (COMET: pip install 'mindcap-tok[comet]' in its "
                "own environment)",
                "comet": "pip install 'mindcap-tok[comet]' in its own environment (its pins conflict with vLLM's)",
            },
        ),
        AuditSpec(
            "parser",
            "Parser robustness",
            _run_parser,
            _headline_parser,
            needs=("tokenizers", "budgets", "premiums", "tasks"),
        ),
        AuditSpec(
            "parity",
            "Decoder parity",
            _run_parity,
            _headline_parity,
            needs=("tokenizers", "budgets", "parity_per_stratum"),
        ),
        AuditSpec(
            "normalizer",
            "Normalizer sensitivity",
            _run_normalizer,
            _headline_normalizer,
            needs=("tokenizers", "budgets", "premiums", "alternatives", "renderings", "tasks"),
        ),
        AuditSpec(
            "truncation",
            "Truncation (what the cap did)",
            _run_truncation,
            _headline_truncation,
            needs=("tokenizers", "truncation_budgets", "premiums", "tasks"),
        ),
        AuditSpec(
            "determinism",
            "Determinism (repeats, capped vs long)",
            _run_determinism,
            _headline_determinism,
            needs=("level",),
            default=False,
        ),
    )
}
AUDITS = tuple(REGISTRY)


@dataclass
class SuiteResult:
    """Every audit's result, what was audited, and the langid validation sample (if that audit ran)."""

    ledger: str
    records: int
    results: list[AuditResult]
    validation_sample: pd.DataFrame | None = None

    def as_dict(self) -> dict:
        """Strict JSON-ready data (missing values as ``None``, never NaN)."""
        data = {"ledger": self.ledger, "records": self.records, "audits": [r.as_dict() for r in self.results]}
        return strict_json_value(data)


def select_audits(only: Sequence[str] | None) -> list[str]:
    """The audits named in ``only`` (when empty: all but the opt-in ones, e.g. ``determinism``), in suite order;
    a one-line error for an unknown name."""
    names = [a for a in AUDITS if REGISTRY[a].default] if not only else [o.strip().lower() for o in only]
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise BadInputError(f"unknown audit(s) {', '.join(unknown)}; use {', '.join(AUDITS)}")
    return [a for a in AUDITS if a in names]


def run_one(
    spec: AuditSpec, records: pa.Table, *, toks: Mapping[str, ResolvedTokenizer], config: AuditConfig
) -> AuditRun:
    """Run one audit: a missing required input or extra is a skip, any other error :class:`AuditFailed`."""
    for attr, reason in spec.required.items():
        if getattr(config, attr) is None:
            return AuditRun(skipped(spec.name, reason))
    try:
        run = spec.run(records, toks, config)
    except MissingExtraError as exc:
        return AuditRun(skipped(spec.name, spec.install_hint(exc)))
    except Exception as exc:
        raise AuditFailed(spec.name, exc) from exc
    run.result.name = spec.name
    return run


@dataclass(frozen=True)
class AuditInputs:
    """What the audits read beside a ledger's records, found for its models and languages: FLORES premiums and
    alternative normalizers (parser, normalizer, truncation), the items of its tasks' translation arms (COMET
    references, keyed ``(task, item)``, and sources, keyed ``(task, lang, item)``), and ``notes`` naming what
    could not be found (the parts that need it are left out)."""

    premiums: PremiumTable | None = None
    alternatives: Mapping[str, PremiumTable] = field(default_factory=dict)
    references: Mapping | None = None
    sources: Mapping = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def audit_inputs(
    ledger: Ledger,
    names: Sequence[str],
    *,
    premium_specs: Sequence[str] = (),
    alt_premiums: Sequence[str] = (),
    tokenizers_dir: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> AuditInputs:
    """The inputs the audits ``names`` need for ``ledger`` (what ``mindcap-tok audit`` assembles).

    ``premium_specs`` are the user's (a bad one is an error); without them each model's own premiums are tried and
    their absence is a note. ``alt_premiums``: alternative normalizers for the normalizer audit. ``tasks``: the
    task files of records whose task is not built in. An empty ledger is an error: an audit of nothing must never
    read "ok".
    """
    import pyarrow.compute as pc

    from ..stats.premiums import resolve_premiums

    cells = ledger.read(columns=["model", "lang"])
    if cells.num_rows == 0:
        raise BadInputError(f"no records in {ledger.root}: nothing to audit")
    models = sorted(pc.unique(cells.column("model")).to_pylist())
    langs = sorted(pc.unique(cells.column("lang")).to_pylist())
    found: dict = {"notes": []}
    if {"parser", "normalizer", "truncation"} & set(names):
        if premium_specs:  # the user's: a bad one is an error
            found["premiums"] = resolve_premiums(
                premium_specs, models, languages=langs, tokenizers_dir=tokenizers_dir, data_dir=data_dir
            )
        else:
            try:
                found["premiums"] = resolve_premiums(
                    (), models, languages=langs, tokenizers_dir=tokenizers_dir, data_dir=data_dir
                )
            except MindcapError as exc:
                found["notes"].append(f"no FLORES premiums ({exc}); premium-based parts are left out")
    if "normalizer" in names:
        found["alternatives"] = {
            spec: resolve_premiums([spec], models, languages=langs, tokenizers_dir=tokenizers_dir, data_dir=data_dir)
            for spec in alt_premiums
        }
    if "comet" in names:
        found.update(_translation_inputs(ledger, langs, tasks=tasks, data_dir=data_dir, notes=found["notes"]))
    return AuditInputs(**{**found, "notes": tuple(found["notes"])})


def _item_text(fields: Mapping[str, str]) -> str:
    """What a translation segment is compared with: the item's ``question`` (every field, blank-line joined)."""
    return fields["question"] if "question" in fields else "\n\n".join(fields.values())


def _translation_inputs(ledger: Ledger, langs: Sequence[str], *, tasks: Sequence, data_dir, notes: list[str]) -> dict:
    """COMET references and sources of every task of ``ledger`` with a translation arm: each item's ``question``
    (every field, joined by blank lines, for a task that maps none) in the language translated into, keyed
    ``(task, item)``, and in each ledger language, keyed ``(task, lang, item)``. No task with a translation arm:
    empty references (the audit then says it is not applicable); data that cannot be read: a note."""
    from ..tasks.datasets import load_items
    from .translation import translation_arms

    names = list(dict.fromkeys(record_tasks(ledger.read(columns=["task"]))))
    arms = translation_arms(find_tasks(names, tasks))
    references: dict = {}
    sources: dict = {}
    for name, have in arms.items():
        task = find_tasks([name], tasks)[name]
        try:
            for target in dict.fromkeys(have.values()):
                references.update(
                    {(name, it.item): _item_text(it.fields) for it in load_items(task, target, data_dir=data_dir)}
                )
            for lang in langs:
                if lang in task.languages:
                    sources.update(
                        {
                            (name, lang, it.item): _item_text(it.fields)
                            for it in load_items(task, lang, data_dir=data_dir)
                        }
                    )
        except MindcapError as exc:
            notes.append(f"{name} items incomplete ({exc})")
    return {"references": references if references or not any(arms.values()) else None, "sources": sources}


def run_audits(
    source: str | os.PathLike[str] | Ledger | pa.Table,
    only: Sequence[str] | None = None,
    *,
    config: AuditConfig | None = None,
) -> SuiteResult:
    """Run the audits named in ``only`` (all by default) on a ledger folder, a :class:`Ledger` or records.

    Raises :class:`AuditFailed` when an audit fails for any reason but a missing extra or its own skip reason,
    and :class:`~mindcap_tok.store.tokenizers.TokenizerMismatchError` when a tokenizer is not the one the
    ledger recorded (unless ``config.allow_tokenizer_mismatch``).
    """
    config = config or AuditConfig()
    specs = [REGISTRY[name] for name in select_audits(only)]
    ledger = None
    if isinstance(source, pa.Table):
        records, where = source, "records"
    else:
        ledger = source if isinstance(source, Ledger) else Ledger(source)
        records, where = ledger.read(columns=list(_COLUMNS)), str(ledger.root)
    if records.num_rows == 0:  # an audit with no data is an error, never "ok"
        raise BadInputError(f"no records in {where}: nothing to audit")
    toks: dict[str, ResolvedTokenizer] = {}
    if any("tokenizers" in spec.needs for spec in specs):
        toks = resolve_tokenizers(
            records.column("tokenizer").to_pylist(),
            ledger,
            override=config.tokenizer,
            given=config.tokenizers,
            tokenizers_dir=config.tokenizers_dir,
            allow_mismatch=config.allow_tokenizer_mismatch,
        )
    results, sample = [], None
    for spec in specs:
        start = time.perf_counter()
        run = run_one(spec, records, toks=toks, config=config)
        if run.validation_sample is not None:
            sample = run.validation_sample
        run.result.summary["seconds"] = round(time.perf_counter() - start, 3)
        results.append(run.result)
    return SuiteResult(where, records.num_rows, results, sample)


# -- the Markdown report ---------------------------------------------------------------------------------------
def headline_rows(suite: SuiteResult) -> list[dict[str, str]]:
    """One row per audit: its title, status, and key figure (the skip reason when skipped)."""
    rows = []
    for res in suite.results:
        spec = REGISTRY[res.name]
        figure = spec.headline(res) if res.status == "ok" else res.reason
        rows.append({"audit": f"{spec.title} (`{res.name}`)", "status": res.status, "key figure": figure})
    return rows


def _setting(value) -> str:
    value = strict_json_value(value)
    return MISSING if value is None else json.dumps(value, ensure_ascii=False)


#: settings given in points on the command line (``--sesoi 5``) and stored as fractions; the report shows both
POINT_SETTINGS = ("sesoi",)


def render_markdown(suite: SuiteResult) -> str:
    """The report: a headline summary (one line per audit), then one section per audit with its settings and a
    table per result table."""
    lines = [
        "# mindcap-tok audit report",
        "",
        f"Ledger: `{suite.ledger}` ({suite.records} records)",
        "",
        "Units: settings, tables and `audit.json` hold fractions (accuracies and shares in [0, 1]: 0.05 is 5 "
        "points); a headline or column in points says so.",
        "",
        "## Summary",
        "",
        markdown_table(pd.DataFrame(headline_rows(suite)), FLOATFMT),
        "",
    ]
    for res in suite.results:
        lines += [f"## {REGISTRY[res.name].title} (`{res.name}`)", ""]
        if res.status != "ok":
            lines += [f"**Skipped:** {res.reason}", ""]
            continue
        settings = ", ".join(
            f"{k}={_setting(v)}" + (f" (= {100 * v:g} points)" if k in POINT_SETTINGS and isinstance(v, float) else "")
            for k, v in res.summary.items()
            if not isinstance(v, dict) or len(json.dumps(v, default=str)) < 200
        )
        lines += [f"Settings: {settings}", ""]
        for tname, table in res.tables.items():
            lines += [f"### {tname}", "", markdown_table(table, FLOATFMT), ""]
    return "\n".join(lines)


#: the command named in the audit folder's marker; only it may replace the folder's files
PRODUCER = "mindcap-tok audit"


def write_audit_report(
    suite: SuiteResult, out_dir: str | os.PathLike[str], *, pages: Mapping[str, str] | None = None
) -> dict[str, Path]:
    """Write ``audit.md``, ``audit.json``, (after langid) ``langid_validation.csv`` and ``pages`` (file name ->
    text, e.g. ``audit.html``) as the folder ``out_dir``.

    Every file is rendered before anything is written, and the folder is staged and moved into place in one
    step. ``out_dir`` must be absent, empty or an earlier audit report (:func:`~mindcap_tok._io.output_folder`).
    """
    texts = {
        "markdown": ("audit.md", render_markdown(suite)),
        "json": ("audit.json", dumps_strict(suite.as_dict(), indent=1) + "\n"),
    }
    if suite.validation_sample is not None:
        texts["validation"] = ("langid_validation.csv", validation_csv(suite.validation_sample))
    texts |= {name: (name, text) for name, text in (pages or {}).items()}
    with output_folder(out_dir, PRODUCER) as tmp:
        for name, text in texts.values():
            (tmp / name).write_text(text, encoding="utf-8")
    return {key: Path(out_dir) / name for key, (name, _) in texts.items()}
