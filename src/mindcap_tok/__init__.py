"""mindcap-tok: how much of a multilingual reasoning gap is made by the output-token cap and the tokenizer.

The top-level API is each stage's entry point and its settings object (:data:`PUBLIC`, one import away:
``from mindcap_tok import token_premium``); everything else is in the stage packages' own namespaces
(``mindcap_tok.stats``, ``mindcap_tok.audits``, ``mindcap_tok.store``...). Names are imported on first use
(PEP 562), so ``import mindcap_tok`` and the CLI's start stay cheap (no pandas, tokenizers or torch).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: the public API: name -> the stage module (relative to the package) it is imported from, by the README's jobs
PUBLIC = {
    "load_config": "config",
    "MindcapError": "errors",
    # the main job: token premiums
    "load_tokenizer": "tokenization.load",
    "token_premium": "premium",
    "Resampling": "resample",
    # the ledger: store, import, generation, scoring
    "Ledger": "store",
    "import_jsonl": "ingest",
    "run_job": "generation",
    "score_ledger": "scoring",
    # budget statistics and their report
    "sweep_inputs": "stats",
    "budget_sweep": "stats",
    "write_budget_report": "report",
    # vocabulary extensions and ladder pricing
    "extend_crossfit": "adaptation",
    "price_ledger": "adaptation",
    "PriceSettings": "adaptation",
    # audits
    "run_audits": "audits",
    "AuditConfig": "audits",
    # round-trip translation
    "run_roundtrip": "roundtrip",
    "roundtrip_report": "roundtrip",
    # offline material to try everything on
    "build_demo": "demo",
}

if TYPE_CHECKING:  # PUBLIC again, for type checkers (tests/test_public_api.py checks it and prints it when they differ)
    from .adaptation import PriceSettings as PriceSettings
    from .adaptation import extend_crossfit as extend_crossfit
    from .adaptation import price_ledger as price_ledger
    from .audits import AuditConfig as AuditConfig
    from .audits import run_audits as run_audits
    from .config import load_config as load_config
    from .demo import build_demo as build_demo
    from .errors import MindcapError as MindcapError
    from .generation import run_job as run_job
    from .ingest import import_jsonl as import_jsonl
    from .premium import token_premium as token_premium
    from .report import write_budget_report as write_budget_report
    from .resample import Resampling as Resampling
    from .roundtrip import roundtrip_report as roundtrip_report
    from .roundtrip import run_roundtrip as run_roundtrip
    from .scoring import score_ledger as score_ledger
    from .stats import budget_sweep as budget_sweep
    from .stats import sweep_inputs as sweep_inputs
    from .store import Ledger as Ledger
    from .tokenization.load import load_tokenizer as load_tokenizer

__all__ = list(PUBLIC)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import a public name from its stage module on first use, then keep it here."""
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{PUBLIC[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's own names and every public one, imported or not (for completion and ``help``)."""
    return sorted({*globals(), *__all__})
