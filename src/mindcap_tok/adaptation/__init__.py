"""Adaptation ladder rungs: vocabulary extensions (learn, cross-fit, save, apply)."""

from .corpus import Corpus, as_corpus, flores_corpus, load_corpus, mgsm_corpus, text_file_corpus
from .crossfit import (
    CrossFitting,
    FoldExtension,
    assign_folds,
    cross_fit,
    extend_crossfit,
    measure_folds,
    save_crossfit,
)
from .effect import Effect, measure_effect
from .extend import Extension, SizeRule, learn_extension, pre_token_counts
from .saved import CrossFitSet, SavedExtension, apply_extension, load_crossfit, load_extension, save_extension

__all__ = [
    "Corpus",
    "CrossFitSet",
    "CrossFitting",
    "Effect",
    "Extension",
    "FoldExtension",
    "SavedExtension",
    "SizeRule",
    "apply_extension",
    "as_corpus",
    "assign_folds",
    "cross_fit",
    "extend_crossfit",
    "flores_corpus",
    "learn_extension",
    "load_corpus",
    "load_crossfit",
    "load_extension",
    "measure_effect",
    "measure_folds",
    "mgsm_corpus",
    "pre_token_counts",
    "save_crossfit",
    "save_extension",
    "text_file_corpus",
]
