"""MQM from a judge's issue list, and reading a judge reply: strict JSON first, then tolerant fallbacks.

MQM = 100 − (1·minor + 5·major + 25·critical), raw: no floor, so a mean MQM can be negative as in LiT's
Appendix B tables; a sample passes at MQM ≥ 80 (LiT §4.1). The score is recomputed from the issues, never taken
from the judge; the judge's own 0–100 score and classification are kept beside it. A reply whose
classification contradicts its issues is flagged by :func:`inconsistency` (it is still scored from its issues).
Readers, in order: the whole reply as JSON (``strict``), a fenced ```json block
(``fenced``), the first JSON object embedded in prose (``embedded``), and ``json-repair`` when installed
(``repaired``, imported lazily, only for replies within its bounds). A reply whose brackets nest deeper than
:data:`~mindcap_tok._json.MAX_REPLY_DEPTH` is unparseable, its error says so. A severity outside
minor/major/critical is recorded as an error and counted; it adds no penalty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._json import NestedTooDeepError, reply_json_values

WEIGHTS = {"minor": 1, "major": 5, "critical": 25}
PASS_THRESHOLD = 80.0


def mqm_score(minor: int, major: int, critical: int) -> float:
    """Raw MQM: 100 − (minor + 5·major + 25·critical), not floored (LiT's raw-MQM tables hold negative means)."""
    return float(100 - (WEIGHTS["minor"] * minor + WEIGHTS["major"] * major + WEIGHTS["critical"] * critical))


#: classes of the judge schema (``roundtrip-v1``) whose meaning is lost: they need a major or critical issue
POOR_CLASSES = ("1-nonsense", "2-severe distortion", "3-failed gist")
#: the class that admits no critical issue
PERFECT_CLASS = "10-perfect"


def inconsistency(classification: str | None, major: int, critical: int) -> str | None:
    """Why a judge reply's classification contradicts its issues, or ``None``: a meaning-lost class
    (:data:`POOR_CLASSES`) with no major or critical issue, or ``10-perfect`` with a critical one."""
    cls = (classification or "").strip().lower()
    if cls in (c.lower() for c in POOR_CLASSES) and major == 0 and critical == 0:
        return f"classed {classification!r} with no major or critical issue"
    if cls == PERFECT_CLASS and critical > 0:
        return f"classed {classification!r} with {critical} critical issue{'s' if critical > 1 else ''}"
    return None


def passes(mqm: float | None) -> bool:
    """MQM ≥ 80 (``None``: no)."""
    return mqm is not None and mqm >= PASS_THRESHOLD


@dataclass(frozen=True)
class Judgement:
    """A parsed judge reply. ``how`` is the reader that succeeded (``None``: unparseable, ``error`` says why)."""

    how: str | None
    mqm: float | None = None
    judge_score: float | None = None
    classification: str | None = None
    minor: int = 0
    major: int = 0
    critical: int = 0
    bad_severities: tuple[str, ...] = ()
    issues: list = field(default_factory=list)
    error: str | None = None

    @property
    def parsed(self) -> bool:
        return self.how is not None


def _issue_severity(issue: object) -> tuple[str | None, object]:
    """(severity, issue) of one issue: an object with ``severity`` or a ``[severity, description]`` pair."""
    if isinstance(issue, dict):
        sev = issue.get("severity")
    elif isinstance(issue, list | tuple) and issue:
        sev = issue[0]
    else:
        return None, issue
    return (sev.strip().lower() if isinstance(sev, str) else None), issue


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def judgement_from(value: object, how: str) -> Judgement | None:
    """A :class:`Judgement` from a decoded JSON value, or ``None`` when it is no judge object (no ``issues`` list)."""
    if not isinstance(value, dict) or not isinstance(value.get("issues"), list):
        return None
    counts = dict.fromkeys(WEIGHTS, 0)
    bad: list[str] = []
    for issue in value["issues"]:
        sev, _ = _issue_severity(issue)
        if sev in counts:
            counts[sev] += 1
        else:
            bad.append(str(sev))
    cls = value.get("classification")
    error = f"unknown severit{'y' if len(bad) == 1 else 'ies'} {', '.join(repr(b) for b in bad)}" if bad else None
    return Judgement(
        how=how,
        mqm=mqm_score(counts["minor"], counts["major"], counts["critical"]),
        judge_score=_number(value.get("score")),
        classification=cls if isinstance(cls, str) else None,
        minor=counts["minor"],
        major=counts["major"],
        critical=counts["critical"],
        bad_severities=tuple(bad),
        issues=list(value["issues"]),
        error=error,
    )


def parse_judge(text: str) -> Judgement:
    """Read one judge reply (see the module docs); an unparseable reply gives ``how=None`` and an error."""
    body = text.strip()
    if not body:
        return Judgement(how=None, error="empty reply")
    try:
        for how, value in reply_json_values(body):
            found = judgement_from(value, how)
            if found is not None:
                return found
    except NestedTooDeepError as exc:
        return Judgement(how=None, error=f"not read: {exc}")
    return Judgement(how=None, error="no JSON object with an issues list")
