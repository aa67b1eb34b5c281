"""Round-trip translation benchmark (LiT): texts translated serially through language sequences and back, judged
for MQM issues by an LLM; pass share (MQM ≥ 80) with a bootstrap SE over texts.

Modules: ``sequences`` (presets and chains), ``prompts`` (versioned templates), ``texts`` (FLORES paragraphs,
user files), ``spec`` (job specs and :func:`plan_roundtrip`), ``store`` (the run folder), ``run``
(:func:`run_roundtrip`: hop waves and judge rounds), ``mqm`` (judge replies and MQM), ``metrics``,
``agreement`` (rank agreement), ``report`` (:func:`roundtrip_report`: the report folder of a finished run),
``compare`` (:func:`compare_runs`: a leaderboard across runs), ``plots`` (the figures of both).
"""

from __future__ import annotations

from .agreement import judge_agreement, rank_agreement
from .compare import CompareOptions, CompareResult, compare_runs
from .metrics import roundtrip_metrics, text_bootstrap
from .mqm import Judgement, mqm_score, parse_judge, passes
from .report import (
    ReportOptions,
    ReportResult,
    RoundtripReport,
    build_roundtrip_report,
    read_run,
    roundtrip_report,
    write_roundtrip_report,
)
from .run import RoundtripResult, open_backends, run_roundtrip
from .sequences import Chain, presets, resolve_sequences
from .spec import RoundtripSpec, load_spec, parse_spec, plan_roundtrip
from .texts import Text, load_texts

__all__ = [
    "Chain",
    "CompareOptions",
    "CompareResult",
    "Judgement",
    "ReportOptions",
    "ReportResult",
    "RoundtripReport",
    "RoundtripResult",
    "RoundtripSpec",
    "Text",
    "build_roundtrip_report",
    "compare_runs",
    "judge_agreement",
    "load_spec",
    "load_texts",
    "mqm_score",
    "open_backends",
    "parse_judge",
    "parse_spec",
    "passes",
    "plan_roundtrip",
    "presets",
    "rank_agreement",
    "read_run",
    "resolve_sequences",
    "roundtrip_metrics",
    "roundtrip_report",
    "run_roundtrip",
    "text_bootstrap",
    "write_roundtrip_report",
]
