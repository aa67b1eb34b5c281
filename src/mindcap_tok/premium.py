"""Token premiums r(m, L) on FLORES-200 with paired percentile bootstrap CIs.

r(m, L) = total tokens of L / total tokens of the parallel reference (English), with model m's own
tokenizer, over every sentence pair of a split, after NFC, without special tokens (paper §3).
Per-sentence counts are kept apart from the ratio so the bootstrap only re-weights sums (as sacrebleu
keeps per-segment statistics): one resampling matrix serves every language.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np
from tokenizers import Tokenizer

from .data.flores import flores_file, flores_source, load_parallel
from .data.languages import resolve_language
from .errors import MindcapError
from .tokenizer import ResolvedTokenizer

DEFAULT_LANGS = ("de", "th", "sw")


@dataclass(frozen=True)
class Premium:
    """One (model, language) premium with its bootstrap interval and everything needed to redo it."""

    model: str
    lang: str
    ref: str
    split: str
    premium: float
    ci_low: float
    ci_high: float
    ci: float
    tokens: int
    ref_tokens: int
    n_pairs: int
    n_boot: int
    seed: int
    tokenizer_sha256: str
    scaled_budgets: dict[int, int] | None = field(default=None)

    @property
    def ratio(self) -> Fraction:
        """The premium as an exact fraction of the two totals."""
        return Fraction(self.tokens, self.ref_tokens)

    def as_dict(self) -> dict:
        """Plain data (JSON-ready; budgets become string keys in JSON)."""
        return asdict(self)


def scale_budget(r: float | Fraction, budget: int) -> int:
    """floor(r·B), exactly.

    A float ``r`` is read as the decimal it prints as (``2.55`` means 255/100), so a premium typed by
    hand scales the way the reader expects; a :class:`Fraction` (``Premium.ratio``) is used as is.
    """
    exact = r if isinstance(r, Fraction) else Fraction(repr(float(r)))
    return math.floor(exact * budget)


def count_tokens(tokenizer: Tokenizer, lines: Sequence[str]) -> np.ndarray:
    """Token count of each line, no special tokens (one batched call)."""
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    return np.fromiter(
        (len(e.ids) for e in encode(list(lines), add_special_tokens=False)), dtype=np.int64, count=len(lines)
    )


def bootstrap_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) matrix: how often each of n units is drawn in each resample (float64, exact ints).

    Row b is the multiplicity vector of resample b drawn with replacement; the same seed always
    gives the same matrix, so every statistic computed from it is reproducible.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    flat = (idx + (np.arange(n_boot, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)


def ratio_bootstrap(
    counts: np.ndarray, ref_counts: np.ndarray, n_boot: int, seed: int, ci: float
) -> tuple[np.ndarray, np.ndarray]:
    """Paired percentile CIs of sum(counts[:, j]) / sum(ref_counts) for every column j.

    ``counts`` is (n_pairs, n_langs); returns (low, high) arrays of length n_langs.
    """
    weights = bootstrap_counts(len(ref_counts), n_boot, seed)
    sums = weights @ np.column_stack([ref_counts, counts]).astype(np.float64)
    ratios = sums[:, 1:] / sums[:, :1]
    alpha = 1.0 - ci
    low, high = np.quantile(ratios, [alpha / 2, 1 - alpha / 2], axis=0)
    return low, high


def premium(
    tokenizer: ResolvedTokenizer,
    languages: Iterable[str] = DEFAULT_LANGS,
    ref: str = "eng_Latn",
    split: str = "devtest",
    n_boot: int = 10_000,
    seed: int = 0,
    ci: float = 0.95,
    budgets: Sequence[int] | None = None,
    source: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Premium]:
    """Premium of each language against ``ref`` over a FLORES split, with paired bootstrap CIs.

    ``budgets`` adds floor(r·B) for each B. ``on_progress(done, total)`` is called per language.
    """
    if not 0 < ci < 1:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    codes = list(dict.fromkeys(resolve_language(lang) for lang in languages))
    ref_code = resolve_language(ref)
    source = source or flores_source()
    texts = load_parallel(codes, split=split, source=source, ref=ref_code)
    ref_counts = count_tokens(tokenizer.tokenizer, texts[ref_code])
    if not ref_counts.sum():  # the premium divides by it
        raise MindcapError(f"{flores_file(source, ref_code, split)} has no tokens with {tokenizer.name}'s tokenizer")
    columns = []
    for i, code in enumerate(codes):
        columns.append(count_tokens(tokenizer.tokenizer, texts[code]))
        if on_progress:
            on_progress(i + 1, len(codes))
    counts = np.column_stack(columns)
    low, high = ratio_bootstrap(counts, ref_counts, n_boot, seed, ci)
    ref_total = int(ref_counts.sum())
    results = []
    for j, code in enumerate(codes):
        total = int(counts[:, j].sum())
        ratio = Fraction(total, ref_total)
        results.append(
            Premium(
                model=tokenizer.name,
                lang=code,
                ref=ref_code,
                split=split,
                premium=total / ref_total,
                ci_low=float(low[j]),
                ci_high=float(high[j]),
                ci=ci,
                tokens=total,
                ref_tokens=ref_total,
                n_pairs=len(ref_counts),
                n_boot=n_boot,
                seed=seed,
                tokenizer_sha256=tokenizer.sha256,
                scaled_budgets={b: scale_budget(ratio, b) for b in budgets} if budgets else None,
            )
        )
    return results
