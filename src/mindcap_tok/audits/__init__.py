"""The five ledger audits of "Mind the Cap" §5 and §4.2, and the suite that runs them into one report.

Each audit is a function returning an :class:`AuditResult` (per-cell tables plus settings), registered in
:data:`REGISTRY` as an :class:`AuditSpec`; the suite (:func:`run_audits`, :func:`write_audit_report`) is what
``mindcap-tok audit`` calls.
"""

from ._common import AuditResult
from .determinism import determinism_audit, first_divergence, wilson_interval
from .langid import (
    LidSettings,
    LidValidation,
    label_traces,
    langid_audit,
    load_lid_model,
    normalize_label,
    validation_agreement,
    validation_sample,
)
from .normalizer import behavioral_ratios, normalizer_audit, threshold_premium, trace_premiums
from .parity import classify, parity_audit
from .parser_audit import parser_audit, read_records
from .segments import split_translate_act
from .suite import (
    AUDITS,
    REGISTRY,
    AuditConfig,
    AuditFailed,
    AuditInputs,
    AuditSpec,
    SuiteResult,
    audit_inputs,
    headline_rows,
    render_markdown,
    run_audits,
    write_audit_report,
)
from .translation import chrf_scores, comet_scores, translation_audit

__all__ = [
    "AUDITS",
    "REGISTRY",
    "AuditConfig",
    "AuditFailed",
    "AuditInputs",
    "AuditResult",
    "AuditSpec",
    "LidSettings",
    "LidValidation",
    "SuiteResult",
    "audit_inputs",
    "behavioral_ratios",
    "chrf_scores",
    "classify",
    "comet_scores",
    "determinism_audit",
    "first_divergence",
    "headline_rows",
    "label_traces",
    "langid_audit",
    "load_lid_model",
    "normalize_label",
    "normalizer_audit",
    "parity_audit",
    "parser_audit",
    "read_records",
    "render_markdown",
    "run_audits",
    "split_translate_act",
    "threshold_premium",
    "trace_premiums",
    "translation_audit",
    "validation_agreement",
    "validation_sample",
    "wilson_interval",
    "write_audit_report",
]
