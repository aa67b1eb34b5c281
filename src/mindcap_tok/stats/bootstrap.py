"""Item-clustered bootstrap: resample benchmark items, keep all k samples of each drawn item.

One weight matrix ``W`` (n_boot × n_items, how often each item is drawn; see
:func:`mindcap_tok.premium.bootstrap_counts`) is applied to per-item sums, so a resampled accuracy is
``(W @ correct) / (W @ count)`` for every cell and budget at once. The same ``W`` (same seed) serves every
statistic in an analysis, which makes differences between cells, budgets, languages and arms paired.

:class:`Boot` carries a statistic's point estimate with its replicates and supports the arithmetic
(differences of accuracies) and the summaries the analysis needs: percentile CIs, studentized max-|t|
simultaneous bands, argmax stability and lead probabilities. This is the reusable entry point for
other stages (ladder pricing, audits): build per-item sums, call :func:`item_bootstrap`, combine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MindcapError
from ..premium import bootstrap_counts
from .grid import AccuracyGrid


def bootstrap_weights(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_items) item multiplicities; the project's one resampling primitive, re-exported."""
    if n_items < 1:
        raise MindcapError("the bootstrap needs at least one item")
    if n_boot < 2:
        raise MindcapError(f"n_boot must be at least 2, got {n_boot}")
    return bootstrap_counts(n_items, n_boot, seed)


@dataclass(frozen=True)
class Boot:
    """A statistic (any shape) and its bootstrap replicates (``(n_boot, *shape)``), drawn with ``seed``.

    Index with ``boot[i, j]`` (applies to the statistic's axes) and combine with ``+``, ``-`` and scalar
    ``*``; operands must come from the same resampling (same seed and n_boot), so differences stay paired.
    """

    estimate: np.ndarray
    replicates: np.ndarray
    seed: int

    @property
    def n_boot(self) -> int:
        return self.replicates.shape[0]

    def __getitem__(self, index) -> Boot:
        index = index if isinstance(index, tuple) else (index,)
        return Boot(np.asarray(self.estimate[index]), self.replicates[(slice(None), *index)], self.seed)

    def _check(self, other: Boot) -> None:
        if other.seed != self.seed or other.n_boot != self.n_boot:
            raise MindcapError("cannot combine bootstraps drawn with different seeds or sizes (pairing lost)")

    def __add__(self, other: Boot) -> Boot:
        self._check(other)
        return Boot(self.estimate + other.estimate, self.replicates + other.replicates, self.seed)

    def __sub__(self, other: Boot) -> Boot:
        self._check(other)
        return Boot(self.estimate - other.estimate, self.replicates - other.replicates, self.seed)

    def __neg__(self) -> Boot:
        return Boot(-self.estimate, -self.replicates, self.seed)

    def __mul__(self, factor: float) -> Boot:
        return Boot(self.estimate * factor, self.replicates * factor, self.seed)

    __rmul__ = __mul__

    def se(self) -> np.ndarray:
        """Bootstrap standard error (replicate standard deviation, ddof=1)."""
        return self.replicates.std(axis=0, ddof=1)

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise percentile interval: the (1−level)/2 and (1+level)/2 quantiles of the replicates."""
        _check_level(level)
        low, high = np.quantile(self.replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return low, high

    def band(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Simultaneous studentized max-|t| band over the last axis (e.g. a budget sweep).

        With ``t_b = max_j |θ*_bj − θ̂_j| / se_j``, the critical value ``c`` is the ``level`` quantile of
        ``t_b`` and the band is ``θ̂_j ± c·se_j``; it covers the whole curve with probability ≈ ``level``.
        Points with zero bootstrap variance get a zero-width band. Returns (low, high, c) where ``c`` has
        the statistic's shape without its last axis.
        """
        _check_level(level)
        se = self.se()
        dev = np.abs(self.replicates - self.estimate)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(se > 0, dev / np.where(se > 0, se, 1.0), 0.0)
        crit = np.quantile(t.max(axis=-1), level, axis=0)
        half = crit[..., None] * se
        return self.estimate - half, self.estimate + half, crit

    def argmax(self) -> tuple[np.ndarray, np.ndarray]:
        """Point argmax over the last axis and the share of replicates with the same argmax (stability).

        Ties go to the first (smallest-budget) position, in the estimate and in every replicate alike.
        """
        point = np.argmax(self.estimate, axis=-1)
        reps = np.argmax(self.replicates, axis=-1)
        return point, (reps == point).mean(axis=0)

    def prob_positive(self) -> np.ndarray:
        """Share of replicates in which the statistic is strictly positive (e.g. P*(one arm leads))."""
        return (self.replicates > 0).mean(axis=0)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise MindcapError(f"confidence level must be in (0, 1), got {level}")


def _weighted_sums(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``weights @ values`` for (n_items, m) values, computing each distinct column only once."""
    unique, inverse = np.unique(values, axis=1, return_inverse=True)
    if unique.shape[1] * 2 > values.shape[1]:
        return weights @ values
    return (weights @ unique)[:, inverse.ravel()]


def item_bootstrap(
    correct: np.ndarray,
    count: np.ndarray | None = None,
    n_boot: int = 10_000,
    seed: int = 0,
    weights: np.ndarray | None = None,
) -> Boot:
    """Item-clustered bootstrap of ratio statistics ``sum_i correct[i, ...] / sum_i count[i, ...]``.

    ``correct`` and ``count`` hold per-item sums with items on axis 0 (any trailing shape: cells,
    budgets, ...); ``count=None`` means one unit per item (a mean over items). ``weights`` (from
    :func:`bootstrap_weights`) may be passed to share one resampling across calls; otherwise it is drawn
    from ``seed``. Returns a :class:`Boot` of shape ``correct.shape[1:]``.
    """
    correct = np.asarray(correct, dtype=np.float64)
    if count is None:
        count = np.ones_like(correct)
    count = np.broadcast_to(np.asarray(count, dtype=np.float64), correct.shape)
    n_items, shape = correct.shape[0], correct.shape[1:]
    if weights is None:
        weights = bootstrap_weights(n_items, n_boot, seed)
    elif weights.shape[1] != n_items:
        raise MindcapError(f"weights cover {weights.shape[1]} items but the sums have {n_items}")
    flat_c = correct.reshape(n_items, -1)
    flat_n = count.reshape(n_items, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = flat_c.sum(axis=0) / flat_n.sum(axis=0)
        reps = weights @ flat_c
        reps /= _weighted_sums(weights, flat_n)
    return Boot(estimate.reshape(shape), reps.reshape(weights.shape[0], *shape), seed)


def grid_bootstrap(grid: AccuracyGrid, n_boot: int = 10_000, seed: int = 0) -> Boot:
    """Accuracy of every cell and budget of ``grid`` with item-clustered replicates, shape (cells, budgets)."""
    return item_bootstrap(grid.correct, grid.count, n_boot=n_boot, seed=seed)
