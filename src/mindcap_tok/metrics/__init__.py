"""Quality metrics shared by the audits and the round-trip report: chrF, COMET and language-ID compliance.

One implementation of each, below both ``audits`` and ``roundtrip``, so that an audit and a round-trip report
give the same score to the same texts. Each optional dependency is an extra, imported when first used; a missing
one raises :class:`~mindcap_tok.errors.MissingExtraError` naming the install command, which callers turn into a
skipped part of their report.
"""

from .chrf import chrf_scores
from .comet import comet_scores
from .langid import (
    LidModel,
    in_expected,
    label_segments,
    lid_labels,
    lid_status,
    load_lid_model,
    macro_group,
    macrolanguages,
    normalize_label,
)

__all__ = [
    "LidModel",
    "chrf_scores",
    "comet_scores",
    "in_expected",
    "label_segments",
    "lid_labels",
    "lid_status",
    "load_lid_model",
    "macro_group",
    "macrolanguages",
    "normalize_label",
]
