"""Resampling and budget scaling: the two small exact helpers that premiums, statistics, audits and job specs share.

Kept apart from the stages so that importing one (``stats``) does not load another (FLORES, tokenizers).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def scale_budget(r: float | Fraction, budget: int) -> int:
    """floor(r·B), exactly.

    A float ``r`` is read as the decimal it prints as (``2.55`` means 255/100), so a premium typed by
    hand scales the way the reader expects; a :class:`Fraction` (``Premium.ratio``) is used as is.
    """
    exact = r if isinstance(r, Fraction) else Fraction(repr(float(r)))
    return math.floor(exact * budget)


def bootstrap_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) matrix: how often each of n units is drawn in each resample (float64, exact ints).

    Row b is the multiplicity vector of resample b drawn with replacement; the same seed always
    gives the same matrix, so every statistic computed from it is reproducible.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    flat = (idx + (np.arange(n_boot, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)
