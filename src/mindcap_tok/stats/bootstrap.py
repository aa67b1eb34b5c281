"""Item-clustered bootstrap: resample benchmark items, keep all k samples of each drawn item.

One weight matrix ``W`` (n_boot × n_items, how often each item is drawn; see
:func:`mindcap_tok.resample.bootstrap_counts`) is applied to per-item sums, so a resampled accuracy is
``(W @ correct) / (W @ count)`` for every cell and budget at once. The same ``W`` (same seed) serves every
statistic in an analysis, which makes differences between cells, budgets, languages and arms paired.

:class:`Boot` carries a statistic's point estimate with its replicates and supports the arithmetic
(differences of accuracies) and the summaries the analysis needs: percentile CIs, studentized max-|t|
simultaneous bands, argmax stability and lead probabilities. :func:`ratio_difference` builds the one kind of
``Boot`` whose band is a true bootstrap-t (each replicate studentized by its own clustered standard error).
This module is the reusable entry point for other stages (ladder pricing, audits): build per-item sums, call
:func:`item_bootstrap`, combine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import BadInputError
from ..resample import bootstrap_counts, check_level, check_resamples
from .grid import AccuracyGrid


def bootstrap_weights(n_items: int, n_boot: int, *, seed: int) -> np.ndarray:
    """(n_boot, n_items) item multiplicities; the project's one resampling primitive, re-exported."""
    if n_items < 1:
        raise BadInputError("the bootstrap needs at least one item")
    if n_boot < 2:
        raise BadInputError(f"n_boot must be at least 2, got {n_boot}")
    return bootstrap_counts(n_items, n_boot, seed=seed)


@dataclass(frozen=True)
class Boot:
    """A statistic (any shape) and its bootstrap replicates (``(n_boot, *shape)``), drawn with ``seed``.

    Index with ``boot[i, j]`` (applies to the statistic's axes) and combine with ``+``, ``-`` and scalar
    ``*``; operands must come from the same resampling (same seed and n_boot), so differences stay paired.
    """

    estimate: np.ndarray
    replicates: np.ndarray
    seed: int
    #: clustered (linearization) standard errors of ``estimate`` and of every replicate, when known
    se_estimate: np.ndarray | None = None
    se_replicates: np.ndarray | None = None

    @property
    def n_boot(self) -> int:
        return self.replicates.shape[0]

    def __getitem__(self, index: Any) -> Boot:
        index = index if isinstance(index, tuple) else (index,)
        rep_index = (slice(None), *index)
        estimate, replicates = np.asarray(self.estimate[index]), self.replicates[rep_index]
        if self.se_estimate is None or self.se_replicates is None:  # not studentized
            return Boot(estimate, replicates, self.seed)
        return Boot(estimate, replicates, self.seed, np.asarray(self.se_estimate[index]), self.se_replicates[rep_index])

    def _check(self, other: Boot) -> None:
        if other.seed != self.seed or other.n_boot != self.n_boot:
            raise BadInputError("cannot combine bootstraps drawn with different seeds or sizes (pairing lost)")

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
        """Pointwise percentile interval: the (1−level)/2 and (1+level)/2 quantiles of the replicates.

        Refused below :func:`~mindcap_tok.resample.min_resamples` replicates for ``level`` (each tail needs one)."""
        check_level(level)
        check_resamples(self.n_boot, level)
        low, high = np.quantile(self.replicates, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return low, high

    @property
    def studentized(self) -> bool:
        """Whether every replicate carries its own standard error (the band is then a bootstrap-t)."""
        return self.se_estimate is not None and self.se_replicates is not None

    def band(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Simultaneous studentized max-|t| band over the last axis (e.g. a budget sweep).

        With ``t_b = max_j |θ*_bj − θ̂_j| / s*_bj``, the critical value ``c`` is the ``level`` quantile of
        ``t_b`` and the band is ``θ̂_j ± c·s_j``; it covers the whole curve with probability ≈ ``level``.
        When the Boot is :attr:`studentized` (from :func:`ratio_difference`), ``s*_bj`` is replicate b's
        own clustered standard error and ``s_j`` the estimate's (bootstrap-t); otherwise both are the
        bootstrap standard error, which undercovers when precision moves with the estimate (accuracy
        differences resting on a few dozen traces: 0.92 instead of 0.95 in the README's simulation).
        Points with zero variance get a zero-width band. Returns (low, high, c) where ``c`` has the
        statistic's shape without its last axis.
        """
        check_level(level)
        if self.se_estimate is not None and self.se_replicates is not None:  # studentized
            s_hat, s_rep = self.se_estimate, self.se_replicates
        else:
            s_hat = s_rep = self.se()
        dev = np.abs(self.replicates - self.estimate)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(dev > 0, dev / s_rep, 0.0)  # a replicate with zero spread but a shift: t = inf
        crit = np.quantile(t.max(axis=-1), level, axis=0)
        with np.errstate(invalid="ignore"):
            half = np.where(s_hat > 0, crit[..., None] * s_hat, 0.0)
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


def _weighted_sums(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``weights @ values`` for (n_items, m) values, computing each distinct column only once."""
    unique, inverse = np.unique(values, axis=1, return_inverse=True)
    if unique.shape[1] * 2 > values.shape[1]:
        return weights @ values
    return (weights @ unique)[:, inverse.ravel()]


def item_bootstrap(
    correct: np.ndarray,
    count: np.ndarray | None = None,
    *,
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
        weights = bootstrap_weights(n_items, n_boot, seed=seed)
    elif weights.shape[1] != n_items:
        raise BadInputError(f"weights cover {weights.shape[1]} items but the sums have {n_items}")
    flat_c = correct.reshape(n_items, -1)
    flat_n = count.reshape(n_items, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = flat_c.sum(axis=0) / flat_n.sum(axis=0)
        reps = weights @ flat_c
        reps /= _weighted_sums(weights, flat_n)
    return Boot(estimate.reshape(shape), reps.reshape(weights.shape[0], *shape), seed)


def ratio_difference(
    num_a: np.ndarray,
    den_a: np.ndarray,
    *,
    num_b: np.ndarray,
    den_b: np.ndarray,
    weights: np.ndarray,
    seed: int,
) -> Boot:
    """θ_a − θ_b for two item-level ratio statistics ``θ = Σ_i num[i] / Σ_i den[i]`` (items on axis 0,
    any trailing shape), with item-clustered replicates and clustered standard errors for the estimate
    and for every replicate, so that :meth:`Boot.band` is a bootstrap-t.

    The standard error is the linearization (sandwich) one, ``sqrt(Σ_i w_i u_i²)`` with influence
    ``u_i = (num_a,i − θ_a·den_a,i)/N_a − (num_b,i − θ_b·den_b,i)/N_b`` under the replicate's weights w
    (all ones for the estimate), floored at ``1/max(N_a, N_b)`` (one trace). The replicates equal
    ``item_bootstrap(num_a, den_a) − item_bootstrap(num_b, den_b)`` drawn with the same ``weights``.
    """
    cols = [np.asarray(x, dtype=np.float64) for x in (num_a, den_a, num_b, den_b)]
    shape = np.broadcast_shapes(*(c.shape for c in cols))
    n_items = shape[0]
    if weights.shape[1] != n_items:
        raise BadInputError(f"weights cover {weights.shape[1]} items but the sums have {n_items}")
    z = tuple(np.broadcast_to(c, shape).reshape(n_items, -1) for c in cols)  # num_a, den_a, num_b, den_b
    pairs = [(i, j) for i in range(4) for j in range(i, 4)]

    def estimate_and_se(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sx, sa, sy, sb = (w @ v for v in z)
        with np.errstate(invalid="ignore", divide="ignore"):
            # u_i = Σ_p coef_p·z_p,i, so Σ_i w_i u_i² = Σ_{p≤q} (2 − [p=q])·coef_p·coef_q·(w @ z_p·z_q)
            coef = (1 / sa, -sx / sa**2, -1 / sb, sy / sb**2)
            var = sum((1 if i == j else 2) * coef[i] * coef[j] * (w @ (z[i] * z[j])) for i, j in pairs)
            # floor: one trace's worth of accuracy, so a replicate whose drawn items happen to agree (zero
            # spread) does not get an infinite t, and a point without variance keeps a band of ±c traces
            floor = 1 / np.maximum(sa, sb)
            return sx / sa - sy / sb, np.maximum(np.sqrt(np.maximum(var, 0.0)), floor)

    est, se_est = estimate_and_se(np.ones((1, n_items)))
    reps, se_reps = estimate_and_se(np.asarray(weights, dtype=np.float64))
    return Boot(
        est.reshape(shape[1:]),
        reps.reshape(weights.shape[0], *shape[1:]),
        seed,
        se_est.reshape(shape[1:]),
        se_reps.reshape(weights.shape[0], *shape[1:]),
    )


def grid_bootstrap(grid: AccuracyGrid, n_boot: int = 10_000, *, seed: int = 0) -> Boot:
    """Accuracy of every cell and budget of ``grid`` with item-clustered replicates, shape (cells, budgets)."""
    return item_bootstrap(grid.correct, grid.count, n_boot=n_boot, seed=seed)
