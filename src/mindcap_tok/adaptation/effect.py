"""What an extension buys on held-out parallel text: the FLORES premium before and after, and English drift.

Both premiums come from :func:`mindcap_tok.premium.token_premium` with the same seed, so they use the same resampling
matrix; the change of the premium gets its own paired percentile interval from that matrix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..data.flores import load_parallel
from ..data.languages import resolve_language
from ..premium import Premium, PremiumText, count_tokens, token_premium
from ..resample import DEFAULT_RESAMPLING, Resampling, bootstrap_sums, check_resamples
from ..tokenization.load import ResolvedTokenizer


@dataclass(frozen=True)
class Effect:
    """Premium of ``lang`` (vs English) under the base and the extended tokenizer, and the English token change."""

    lang: str
    split: str
    before: Premium
    after: Premium
    change: float
    change_ci_low: float
    change_ci_high: float
    english_tokens_before: int
    english_tokens_after: int

    @property
    def english_token_change(self) -> float:
        """Relative change of the English token count (after / before − 1)."""
        return self.english_tokens_after / self.english_tokens_before - 1.0

    def as_dict(self) -> dict:
        """Plain data for manifests (premium records without their budget field)."""
        out = asdict(self)
        for key in ("before", "after"):
            out[key].pop("scaled_budgets", None)
        out["english_token_change"] = self.english_token_change
        return out


def measure_effect(
    base: ResolvedTokenizer,
    extended: ResolvedTokenizer,
    *,
    lang: str,
    split: str = "devtest",
    source: str | None = None,
    resampling: Resampling = DEFAULT_RESAMPLING,
) -> Effect:
    """Premium of ``lang`` on a FLORES split under both tokenizers, the paired CI of its change, English drift.

    ``resampling.n_boot`` must be positive (the change needs an interval)."""
    check_resamples(resampling.n_boot, resampling.level)  # 0 (no interval) is refused here
    n_boot, seed, ci = resampling.n_boot, resampling.seed, resampling.level
    code = resolve_language(lang)
    before, after = (
        token_premium(t, [code], source=source, text=PremiumText(split=split), resampling=resampling)[0]
        for t in (base, extended)
    )
    texts = load_parallel([code], split=split, source=source)
    columns = [count_tokens(t, texts[c]) for t in (base, extended) for c in ("eng_Latn", code)]
    sums = bootstrap_sums(np.column_stack(columns).astype(np.float64), n_boot, seed=seed)
    deltas = sums[:, 3] / sums[:, 2] - sums[:, 1] / sums[:, 0]
    low, high = np.quantile(deltas, [(1 - ci) / 2, 1 - (1 - ci) / 2])
    return Effect(
        lang=code,
        split=split,
        before=before,
        after=after,
        change=after.premium - before.premium,
        change_ci_low=float(low),
        change_ci_high=float(high),
        english_tokens_before=before.ref_tokens,
        english_tokens_after=after.ref_tokens,
    )
