"""Adaptation ladder rungs: vocabulary extensions (learn, cross-fit, save, apply) and the models adapted to them
(resized checkpoints, bits per byte)."""

from .adapt import adapt_model
from .bpb import BpbSettings, measure_bpb
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
from .price import GivenFolds, LearnedFolds, PricedTask, PriceSettings, Pricing, SavedFolds, price_ledger
from .retokenize import retokenize
from .saved import CrossFitSet, SavedExtension, apply_extension, load_crossfit, load_extension, save_extension
from .triage import fold_rows, price_cells, price_records, triage_rows, triage_text

__all__ = [
    "BpbSettings",
    "Corpus",
    "CrossFitSet",
    "CrossFitting",
    "Effect",
    "Extension",
    "FoldExtension",
    "GivenFolds",
    "LearnedFolds",
    "PriceSettings",
    "PricedTask",
    "Pricing",
    "SavedExtension",
    "SavedFolds",
    "SizeRule",
    "adapt_model",
    "apply_extension",
    "as_corpus",
    "assign_folds",
    "cross_fit",
    "extend_crossfit",
    "flores_corpus",
    "fold_rows",
    "learn_extension",
    "load_corpus",
    "load_crossfit",
    "load_extension",
    "measure_bpb",
    "measure_effect",
    "measure_folds",
    "mgsm_corpus",
    "pre_token_counts",
    "price_cells",
    "price_ledger",
    "price_records",
    "retokenize",
    "save_crossfit",
    "save_extension",
    "text_file_corpus",
    "triage_rows",
    "triage_text",
]
