"""Checks of a whole run: one verdict on how much an evaluation's output-token cap bound it (``mindcap-tok check``).

A run made anywhere (lm-evaluation-harness, inspect_ai or lighteval logs, JSON lines, a ledger) is imported into a
temporary ledger, scored at its cap with each task's strict parser, and summarised per task, language and arm.
"""

from .run import CheckCell, RunCheck, check_run, detect_source

__all__ = ["CheckCell", "RunCheck", "check_run", "detect_source"]
