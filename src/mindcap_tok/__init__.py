"""mindcap-tok: how much of a multilingual reasoning gap is made by the output-token cap and the tokenizer.

The public API is the names in ``__all__``, one import away (``from mindcap_tok import token_premium``), as
the README's examples use them; the stage modules hold the rest (see the README's tour). Names are imported on
first use (PEP 562), so ``import mindcap_tok`` and the CLI's start stay cheap (no pandas, tokenizers or torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import BackendError, BadInputError, DamagedDataError, MindcapError, MissingExtraError

if TYPE_CHECKING:
    from .adaptation.crossfit import CrossFitting, extend_crossfit
    from .adaptation.extend import learn_extension
    from .adaptation.price import GivenFolds, LearnedFolds, PriceSettings, Pricing, SavedFolds, price_ledger
    from .adaptation.retokenize import retokenize
    from .adaptation.saved import load_crossfit, load_extension
    from .audits._common import AuditResult
    from .audits.determinism import determinism_audit
    from .audits.langid import langid_audit, validation_agreement
    from .audits.normalizer import normalizer_audit
    from .audits.parity import parity_audit
    from .audits.parser_audit import parser_audit
    from .audits.suite import AuditConfig, AuditInputs, SuiteResult, audit_inputs, run_audits, write_report
    from .audits.translation import translation_audit
    from .audits.truncation import truncation_audit
    from .config import Config, load_config
    from .data.flores import load_flores
    from .data.languages import resolve_language
    from .demo.ledger import build_demo
    from .demo.tiny_model import build_tiny_model
    from .generation.generate import GenerateResult, JobHooks, dry_run, run_job
    from .generation.jobs import JobSpec
    from .generation.jobs import load_spec as load_job_spec
    from .ingest.harness_logs import import_logs
    from .ingest.jsonl import ImportResult, import_jsonl
    from .premium import Premium, PremiumText, token_premium
    from .report.budget_report import write_budget_report
    from .report.figures import plot_premiums
    from .resample import Resampling, scale_budget
    from .roundtrip.render import RenderSpec, render_traces
    from .roundtrip.report import ReportResult, roundtrip_report
    from .roundtrip.run import RoundtripResult, open_backends, run_roundtrip
    from .roundtrip.spec import RoundtripSpec, plan_roundtrip
    from .roundtrip.spec import load_spec as load_roundtrip_spec
    from .scoring.score import Scores, accuracy_curves, score_ledger
    from .stats.confirm import Confirmation, confirm
    from .stats.consistency import Consistency, Splits, consistency
    from .stats.curves import Sweep, sweep
    from .stats.inputs import LedgerSelection, ScoredLedger, load_scored_ledger, sweep_budgets
    from .stats.protocol import freeze_protocol, load_protocol, run_protocol, verify_protocol
    from .stats.timing import emission_timing
    from .store.ledger import Ledger
    from .tasks.answers import get_parser
    from .tasks.load import load_task
    from .tasks.mgsm import load_mgsm
    from .tokenization.load import ResolvedTokenizer, load_tokenizer

#: public name -> "module" (relative to the package) or "module:attribute" where the two names differ
_LAZY = {
    # configuration, data and tokenizers
    "Config": "config",
    "load_config": "config",
    "load_flores": "data.flores",
    "load_mgsm": "tasks.mgsm",
    "resolve_language": "data.languages",
    "ResolvedTokenizer": "tokenization.load",
    "load_tokenizer": "tokenization.load",
    # premiums
    "Premium": "premium",
    "PremiumText": "premium",
    "token_premium": "premium",
    "Resampling": "resample",
    "scale_budget": "resample",
    # the ledger: store, import, generation, scoring
    "Ledger": "store.ledger",
    "ImportResult": "ingest.jsonl",
    "import_jsonl": "ingest.jsonl",
    "import_logs": "ingest.harness_logs",
    "load_task": "tasks.load",
    "JobSpec": "generation.jobs",
    "load_job_spec": "generation.jobs:load_spec",
    "GenerateResult": "generation.generate",
    "JobHooks": "generation.generate",
    "dry_run": "generation.generate",
    "run_job": "generation.generate",
    "get_parser": "tasks.answers",
    "Scores": "scoring.score",
    "accuracy_curves": "scoring.score",
    "score_ledger": "scoring.score",
    # budget statistics and their report
    "Sweep": "stats.curves",
    "sweep": "stats.curves",
    "Confirmation": "stats.confirm",
    "confirm": "stats.confirm",
    "Consistency": "stats.consistency",
    "Splits": "stats.consistency",
    "consistency": "stats.consistency",
    "LedgerSelection": "stats.inputs",
    "ScoredLedger": "stats.inputs",
    "load_scored_ledger": "stats.inputs",
    "sweep_budgets": "stats.inputs",
    "emission_timing": "stats.timing",
    "freeze_protocol": "stats.protocol",
    "load_protocol": "stats.protocol",
    "run_protocol": "stats.protocol",
    "verify_protocol": "stats.protocol",
    "write_budget_report": "report.budget_report",
    "plot_premiums": "report.figures",
    # offline material to try everything on: the simulated demo ledger, a tiny local model
    "build_demo": "demo.ledger",
    "build_tiny_model": "demo.tiny_model",
    # vocabulary extensions and ladder pricing
    "learn_extension": "adaptation.extend",
    "CrossFitting": "adaptation.crossfit",
    "extend_crossfit": "adaptation.crossfit",
    "load_crossfit": "adaptation.saved",
    "load_extension": "adaptation.saved",
    "Pricing": "adaptation.price",
    "PriceSettings": "adaptation.price",
    "GivenFolds": "adaptation.price",
    "SavedFolds": "adaptation.price",
    "LearnedFolds": "adaptation.price",
    "price_ledger": "adaptation.price",
    "retokenize": "adaptation.retokenize",
    # audits
    "AuditConfig": "audits.suite",
    "AuditInputs": "audits.suite",
    "audit_inputs": "audits.suite",
    "AuditResult": "audits._common",
    "SuiteResult": "audits.suite",
    "run_audits": "audits.suite",
    "write_report": "audits.suite",
    "determinism_audit": "audits.determinism",
    "langid_audit": "audits.langid",
    "validation_agreement": "audits.langid",
    "normalizer_audit": "audits.normalizer",
    "parity_audit": "audits.parity",
    "parser_audit": "audits.parser_audit",
    "translation_audit": "audits.translation",
    "truncation_audit": "audits.truncation",
    "RenderSpec": "roundtrip.render",
    "render_traces": "roundtrip.render",
    # round-trip translation
    "RoundtripSpec": "roundtrip.spec",
    "load_roundtrip_spec": "roundtrip.spec:load_spec",
    "plan_roundtrip": "roundtrip.spec",
    "RoundtripResult": "roundtrip.run",
    "open_backends": "roundtrip.run",
    "run_roundtrip": "roundtrip.run",
    "ReportResult": "roundtrip.report",
    "roundtrip_report": "roundtrip.report",
}

#: the public API, grouped by stage in _LAZY above
__all__ = [
    "AuditConfig",
    "AuditInputs",
    "AuditResult",
    "BackendError",
    "BadInputError",
    "Config",
    "Confirmation",
    "Consistency",
    "CrossFitting",
    "DamagedDataError",
    "GenerateResult",
    "GivenFolds",
    "ImportResult",
    "JobHooks",
    "JobSpec",
    "LearnedFolds",
    "Ledger",
    "LedgerSelection",
    "MindcapError",
    "MissingExtraError",
    "Premium",
    "PremiumText",
    "PriceSettings",
    "Pricing",
    "RenderSpec",
    "ReportResult",
    "Resampling",
    "ResolvedTokenizer",
    "RoundtripResult",
    "RoundtripSpec",
    "SavedFolds",
    "ScoredLedger",
    "Scores",
    "Splits",
    "SuiteResult",
    "Sweep",
    "accuracy_curves",
    "audit_inputs",
    "build_demo",
    "build_tiny_model",
    "confirm",
    "consistency",
    "determinism_audit",
    "dry_run",
    "emission_timing",
    "extend_crossfit",
    "freeze_protocol",
    "get_parser",
    "import_jsonl",
    "import_logs",
    "langid_audit",
    "learn_extension",
    "load_config",
    "load_crossfit",
    "load_extension",
    "load_flores",
    "load_job_spec",
    "load_mgsm",
    "load_protocol",
    "load_roundtrip_spec",
    "load_scored_ledger",
    "load_task",
    "load_tokenizer",
    "normalizer_audit",
    "open_backends",
    "parity_audit",
    "parser_audit",
    "plan_roundtrip",
    "plot_premiums",
    "price_ledger",
    "render_traces",
    "resolve_language",
    "retokenize",
    "roundtrip_report",
    "run_audits",
    "run_job",
    "run_protocol",
    "run_roundtrip",
    "scale_budget",
    "score_ledger",
    "sweep",
    "sweep_budgets",
    "token_premium",
    "translation_audit",
    "truncation_audit",
    "validation_agreement",
    "verify_protocol",
    "write_budget_report",
    "write_report",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import a public name from its stage module on first use, then keep it here."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = _LAZY[name].partition(":")
    value = getattr(importlib.import_module(f".{module}", __name__), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's own names and every public one, imported or not (for completion and ``help``)."""
    return sorted({*globals(), *__all__})
