"""Sentence-level chrF with sacrebleu's defaults (extra ``chrf``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import MissingExtraError


def chrf_scores(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Sentence-level chrF (sacrebleu defaults: character 6-grams, beta 2), one per pair, in [0, 100]."""
    try:
        from sacrebleu.metrics import CHRF
    except ImportError as exc:
        raise MissingExtraError("sacrebleu", "chrf") from exc
    metric = CHRF()
    return np.array([metric.sentence_score(h, [r]).score for h, r in zip(hypotheses, references, strict=True)])
