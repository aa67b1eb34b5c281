"""A cross-fitted Thai extension of the tiny model's own tokenizer (learned on FLORES dev), for the adapt tests."""

from __future__ import annotations

from pathlib import Path

from mindcap_tok.adaptation import cross_fit, flores_corpus, save_crossfit
from mindcap_tok.tokenization.load import load_tokenizer

#: merges per fold: enough for new tokens of several lengths, quick to learn on the 512-token vocabulary
SIZE = 40


def tiny_extension(tiny: Path, out: Path, source: str) -> Path:
    """Learn 2 folds of :data:`SIZE` Thai merges on the tiny model's tokenizer, save them to ``out``; fold 0's
    folder."""
    base = load_tokenizer(str(tiny))
    folds = cross_fit(base, flores_corpus("th", "dev", source=source), size=SIZE)
    save_crossfit(folds, out, extra={"lang": "tha_Thai"})
    return out / "fold-0"
