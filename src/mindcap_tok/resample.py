"""Resampling and budget scaling: the two small exact helpers that premiums, statistics, audits and job specs share.

Kept apart from the stages so that importing one (``stats``) does not load another (FLORES, tokenizers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .budgets import MAX_BUDGET
from .errors import BadInputError


def scale_budget(r: float | Fraction, budget: int) -> int:
    """floor(r·B), exactly.

    A float ``r`` is read as the decimal it prints as (``2.55`` means 255/100), so a premium typed by
    hand scales the way the reader expects; a :class:`Fraction` (``Premium.ratio``) is used as is. A scaled budget
    is a budget: one above :data:`~mindcap_tok.budgets.MAX_BUDGET` (2**31 - 1) is a one-line error, in every command.
    """
    exact = r if isinstance(r, Fraction) else Fraction(repr(float(r)))
    scaled = math.floor(exact * budget)
    if scaled > MAX_BUDGET:
        raise BadInputError(
            f"budget {budget} scales to floor(r·B) = {scaled} at premium {float(exact):.4g}, above the largest "
            f"budget {MAX_BUDGET}; use budgets up to {math.ceil((MAX_BUDGET + 1) / exact) - 1}"
        )
    return scaled


def min_resamples(level: float) -> int:
    """The fewest resamples that resolve a percentile interval at ``level``: ceil(2 / (1 − level)).

    The rule of every command and function that takes ``n_boot`` and a level: each tail, (1 − level)/2 of the
    resamples, must hold at least one resample, else the interval's ends are just the extreme replicates (or
    interpolations between two of them) and can exclude the estimate itself (with 2–5 resamples they often do).
    The level is read as the decimal it prints as (0.95 gives 40, 0.8 gives 10, 0.99 gives 200).
    """
    return math.ceil(2 / (1 - Fraction(repr(float(level)))))


def check_resamples(n_boot: int, level: float, *, name: str = "--n-boot") -> None:
    """Refuse ``n_boot`` below :func:`min_resamples` for ``level`` in one line naming the setting (``name``: the
    flag, or a file's key) and the minimum."""
    need = min_resamples(level)
    if n_boot < need:
        raise BadInputError(
            f"{name} {n_boot} is too few resamples for level {float(level):g}: need at least {need} "
            f"(n_boot >= ceil(2/(1 - level)), so that each tail of the interval holds a resample)"
        )


def check_level(level: float) -> None:
    """Refuse a confidence level outside (0, 1) in one line."""
    if not 0 < level < 1:
        raise BadInputError(f"confidence level must be in (0, 1), got {level}", key="level")


@dataclass(frozen=True)
class Resampling:
    """How a bootstrap resamples: ``n_boot`` resamples drawn from ``seed``, percentile intervals at ``level``.

    The three travel together through every premium, statistic, audit and pricing, so they are one object,
    checked once at construction: a level outside (0, 1), or fewer resamples than :func:`min_resamples` asks
    for, is a one-line error. ``n_boot=0`` asks for the estimate alone where a function allows it
    (:func:`~mindcap_tok.premium.token_premium`).
    """

    n_boot: int = 10_000
    seed: int = 0
    level: float = 0.95

    def __post_init__(self) -> None:
        check_level(self.level)
        if self.n_boot:
            check_resamples(self.n_boot, self.level)


#: the library's default resampling: 10,000 resamples, seed 0, 95% intervals
DEFAULT_RESAMPLING = Resampling()


def bootstrap_counts(n: int, n_boot: int, *, seed: int) -> np.ndarray:
    """(n_boot, n) matrix: how often each of n units is drawn in each resample (float64, exact ints).

    Row b is the multiplicity vector of resample b drawn with replacement; the same seed always
    gives the same matrix, so every statistic computed from it is reproducible.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    flat = (idx + (np.arange(n_boot, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=n_boot * n).reshape(n_boot, n).astype(np.float64)


#: resamples drawn per block in :func:`bootstrap_blocks` (a multiple of 8: blocks pack into whole bytes)
BOOT_BLOCK = 256
#: below this, integer sums are exact in float32 (its 24-bit significand)
_FLOAT32_EXACT = 2**24


def bootstrap_blocks(n: int, n_boot: int, *, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """The rows of :func:`bootstrap_counts` (int64 counts) in blocks of :data:`BOOT_BLOCK` resamples, as (first row,
    block): drawn from the same generator (numpy's bounded integers continue one stream across calls), without the
    whole (n_boot, n) matrix, which at 10,000 x 1,012 is ~80 MB of fresh memory per statistic."""
    rng = np.random.default_rng(seed)
    offsets = np.arange(BOOT_BLOCK, dtype=np.int64)[:, None] * n
    for start in range(0, n_boot, BOOT_BLOCK):
        rows = min(BOOT_BLOCK, n_boot - start)
        idx = rng.integers(0, n, size=(rows, n))
        yield start, np.bincount((idx + offsets[:rows]).ravel(), minlength=rows * n).reshape(rows, n)


def bootstrap_sums(
    values: np.ndarray, n_boot: int, *, seed: int, on_block: Callable[[int, np.ndarray], None] | None = None
) -> np.ndarray:
    """(n_boot, k) resampled column sums of ``values`` (n, k): ``bootstrap_counts(n, n_boot, seed) @ values``.

    Computed block by block (:func:`bootstrap_blocks`); ``on_block(first row, block)`` sees each block too, so that
    a statistic that is not a sum shares the pass over the draws. Integer counts keep every sum of integers exact,
    in any order; integer ``values`` whose sums cannot reach 2**24 (a resample's sum is at most n · max |x|) are
    summed in float32, twice as fast and still exact.
    """
    n = values.shape[0]
    exact32 = np.issubdtype(values.dtype, np.integer) and n * int(np.abs(values).max(initial=0)) < _FLOAT32_EXACT
    matrix = values.astype(np.float32 if exact32 else np.float64)
    sums = np.empty((n_boot, values.shape[1]), dtype=np.float64)
    for start, weights in bootstrap_blocks(n, n_boot, seed=seed):
        sums[start : start + len(weights)] = weights.astype(matrix.dtype) @ matrix
        if on_block is not None:
            on_block(start, weights)
    return sums
