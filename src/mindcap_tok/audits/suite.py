"""The audit suite: run the selected audits over one ledger and write one Markdown report plus JSON.

Audits (``--only`` names): ``langid`` (trace language), ``comet`` (translation quality: chrF always, COMET
with a checkpoint), ``parser`` (parser robustness), ``parity`` (decoder parity), ``normalizer`` (normalizer
sensitivity). An audit whose optional dependency is missing, or whose inputs are absent (no premiums, no
English references), is *skipped* with the reason and the fix in the report; the others still run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa

from .._io import output_folder
from .._json import dumps_strict, strict_json_value
from ..errors import MindcapError, MissingExtraError
from ..ledger.store import Ledger
from ..stats.premiums import PremiumTable
from ..tokenizer import ResolvedTokenizer
from ._common import POPULATION_COLUMNS, AuditResult, resolve_tokenizers, skipped
from .langid import LidSettings, langid_audit, load_lid_model, validation_csv
from .normalizer import normalizer_audit
from .parity import parity_audit
from .parser_audit import parser_audit
from .translation import translation_audit

AUDITS = ("langid", "comet", "parser", "parity", "normalizer")
INSTALL = {
    "langid": "pip install 'mindcap-tok[lid]'",
    "comet": "pip install 'mindcap-tok[chrf]' (COMET: pip install 'mindcap-tok[comet]' in its own environment)",
}
_COLUMNS = (*POPULATION_COLUMNS, "item", "sample", "output_ids", "text", "finish_reason", "gold", "tokenizer",
            "n_tokens")


@dataclass
class AuditConfig:
    """Inputs and settings of the suite; every random procedure uses ``seed`` (recorded in the output)."""

    budgets: Sequence[int] = (64, 128, 192, 256, 384, 512, 768, 1024)
    premiums: PremiumTable | None = None
    alternatives: Mapping[str, PremiumTable] = field(default_factory=dict)
    renderings: pd.DataFrame | None = None
    references: Mapping[int, str] | None = None
    sources: Mapping[tuple[str, int], str] | None = None
    comet_checkpoint: str | None = None
    translation_budgets: Sequence[int] = (128, 192, 256)
    lid_model: str | None = None
    lid_hub: bool = True
    lid: LidSettings = field(default_factory=LidSettings)
    validation_per_cell: int = 20
    validation_labels: pd.DataFrame | None = None
    criterion: float = 0.9
    parity_per_stratum: int = 20
    sesoi: float = 0.05
    search_factor: float = 1.5
    n_boot: int = 2000
    seed: int = 0
    level: float = 0.95
    tokenizers: Mapping[str, ResolvedTokenizer] | None = None
    tokenizers_dir: str | None = None


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
    """The audits named in ``only`` (all when empty), in suite order; a one-line error for an unknown name."""
    names = list(AUDITS) if not only else [o.strip().lower() for o in only]
    unknown = [n for n in names if n not in AUDITS]
    if unknown:
        raise MindcapError(f"unknown audit(s) {', '.join(unknown)}; use {', '.join(AUDITS)}")
    return [a for a in AUDITS if a in names]


def run_audits(source: str | os.PathLike[str] | Ledger | pa.Table, only: Sequence[str] | None = None,
               config: AuditConfig | None = None) -> SuiteResult:
    """Run the audits named in ``only`` (all by default) on a ledger folder, a :class:`Ledger` or records."""
    config = config or AuditConfig()
    names = select_audits(only)
    if isinstance(source, pa.Table):
        records, where = source, "records"
    else:
        ledger = source if isinstance(source, Ledger) else Ledger(source)
        records, where = ledger.read(columns=list(_COLUMNS)), str(ledger.root)
    if records.num_rows == 0:  # an audit with no data is an error, never "ok"
        raise MindcapError(f"no records in {where}: nothing to audit")
    toks = resolve_tokenizers(records.column("tokenizer").to_pylist(), config.tokenizers, config.tokenizers_dir)
    results, sample = [], None
    for name in names:
        start = time.perf_counter()
        try:
            if name == "langid":
                result, sample = langid_audit(records, load_lid_model(config.lid_model, config.lid_hub), config.lid,
                                              config.validation_per_cell, config.seed, config.validation_labels,
                                              config.criterion)
            elif name == "comet":
                if config.references is None:
                    raise MindcapError("no English references: give the MGSM data folder (--data-dir) or references")
                result = translation_audit(records, config.references, toks, config.translation_budgets,
                                           config.sources, config.comet_checkpoint, config.lid.delimiter)
            elif name == "parser":
                result = parser_audit(records, toks, config.budgets, config.premiums)
            elif name == "parity":
                result = parity_audit(records, toks, config.budgets, config.parity_per_stratum, config.seed)
            else:
                result = normalizer_audit(records, toks, config.budgets, config.premiums, config.alternatives,
                                          config.renderings, config.sesoi, config.search_factor, config.n_boot,
                                          config.seed, config.level)
        except MissingExtraError as exc:
            result = skipped(name, f"{exc.package} is not installed: {INSTALL.get(name, exc)}")
        except MindcapError as exc:
            result = skipped(name, str(exc))
        result.name = name
        result.summary["seconds"] = round(time.perf_counter() - start, 3)
        results.append(result)
    return SuiteResult(where, records.num_rows, results, sample)


_TITLES = {"langid": "Trace-language ID", "comet": "Translation quality (chrF / COMET)",
           "parser": "Parser robustness", "parity": "Decoder parity", "normalizer": "Normalizer sensitivity"}


def render_markdown(suite: SuiteResult) -> str:
    """The report: one section per audit, its settings, and a table per result table."""
    lines = ["# mindcap-tok audit report", "", f"Ledger: `{suite.ledger}` ({suite.records} records)", ""]
    for res in suite.results:
        lines += [f"## {_TITLES[res.name]} (`{res.name}`)", ""]
        if res.status != "ok":
            lines += [f"**Skipped:** {res.reason}", ""]
            continue
        settings = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in res.summary.items()
                             if not isinstance(v, dict) or len(json.dumps(v, default=str)) < 200)
        lines += [f"Settings: {settings}", ""]
        for tname, table in res.tables.items():
            lines += [f"### {tname}", ""]
            lines += [table.to_markdown(index=False, floatfmt=".4g") if len(table) else "(empty)", ""]
    return "\n".join(lines)


#: the command named in the audit folder's marker; only it may replace the folder's files
PRODUCER = "mindcap-tok audit"


def write_report(suite: SuiteResult, out: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``audit.md``, ``audit.json`` and (after langid) ``langid_validation.csv`` as the folder ``out``.

    Every file is rendered before anything is written, and the folder is staged and moved into place in one
    step. ``out`` must be absent, empty or an earlier audit report (:func:`~mindcap_tok._io.output_folder`).
    """
    texts = {"markdown": ("audit.md", render_markdown(suite)),
             "json": ("audit.json", dumps_strict(suite.as_dict(), indent=1) + "\n")}
    if suite.validation_sample is not None:
        texts["validation"] = ("langid_validation.csv", validation_csv(suite.validation_sample))
    with output_folder(out, PRODUCER) as tmp:
        for name, text in texts.values():
            (tmp / name).write_text(text, encoding="utf-8")
    return {key: Path(out) / name for key, (name, _) in texts.items()}
