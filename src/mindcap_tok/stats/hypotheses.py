"""Bootstrap hypothesis tests on accuracy contrasts and Holm's step-down correction over a declared family.

p-values are null-centred bootstrap tests (Hall & Wilson 1991): the replicates' deviations θ* − θ̂
stand in for the estimator's null distribution, so for H1: θ > θ₀

    p = (1 + #{c·(θ*_b − θ̂) ≥ θ̂ − θ₀}) / (n_boot + 1)

where ``c`` is the optional tail-conservatism factor (the paper pre-specifies 1.3: it widens the
resampled tail, i.e. inflates the standard error by c). With 10,000 resamples the smallest p is
1/10,001 ≈ 0.0001, as in the paper. A hypothesis over several components ("Δ_L > δ for at least one
language") uses the studentized maximum t_obs = max_j (θ̂_j − θ₀)/se_j against
max_j c·(θ*_bj − θ̂_j)/se_j (a union test); equivalence over several components requires all of them
(intersection–union: the largest TOST p).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import BadInputError
from .bootstrap import Boot

ALTERNATIVES = ("greater", "less", "two-sided", "equivalence")


@dataclass(frozen=True)
class TestResult:
    """One bootstrap test: estimates and standard errors per component, the statistic and the p-value."""

    estimate: np.ndarray
    se: np.ndarray
    statistic: float
    p_value: float
    alternative: str
    null: float


def t_ratio(num: np.ndarray, se: np.ndarray) -> np.ndarray:
    """num / se with 0/0 = 0 and x/0 = ±inf (a component without bootstrap variance)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / se
    return np.where(se > 0, out, np.where(num > 0, np.inf, np.where(num < 0, -np.inf, 0.0)))


def _vector(boot: Boot) -> Boot:
    est = np.atleast_1d(boot.estimate)
    return Boot(est, boot.replicates.reshape(boot.n_boot, est.size), boot.seed)


def _upper(boot: Boot, null: float, factor: float) -> tuple[float, float]:
    """Union test of H1: θ_j > null for some j. Returns (t_obs, p)."""
    se = boot.se()
    t_obs = float(t_ratio(boot.estimate - null, se).max())
    dev = t_ratio(factor * (boot.replicates - boot.estimate), se)
    dev = np.where(np.isfinite(dev), dev, 0.0)  # se == 0: no deviation
    t_star = dev.max(axis=1)
    return t_obs, float((1 + np.count_nonzero(t_star >= t_obs)) / (boot.n_boot + 1))


def bootstrap_test(
    boot: Boot, alternative: str = "greater", *, margin: float = 0.0, tail_factor: float = 1.0
) -> TestResult:
    """Test a statistic (scalar, or a vector of components) from its item-clustered bootstrap.

    ``alternative``: ``greater`` (H1: θ > margin; for several components, for at least one),
    ``less`` (H1: θ < −margin, likewise), ``two-sided`` (H1: θ ≠ 0; needs margin 0), ``equivalence``
    (TOST, H1: |θ| < margin for every component; needs margin > 0). Units are the statistic's.
    """
    if alternative not in ALTERNATIVES:
        raise BadInputError(f"unknown alternative {alternative!r}; use one of {', '.join(ALTERNATIVES)}")
    if tail_factor < 1:
        raise BadInputError(f"tail_factor must be >= 1 (it only makes tests more conservative), got {tail_factor}")
    if margin < 0:
        raise BadInputError(f"margin must be non-negative, got {margin}")
    b = _vector(boot)
    se = b.se()
    c = float(tail_factor)
    if alternative == "greater":
        t, p = _upper(b, margin, c)
        null = margin
    elif alternative == "less":
        t, p = _upper(-b, margin, c)
        null = -margin
    elif alternative == "two-sided":
        if margin != 0:
            raise BadInputError("a two-sided test takes margin 0 (use equivalence for |θ| < margin)")
        t = float(np.abs(t_ratio(b.estimate, se)).max())
        dev = np.abs(t_ratio(c * (b.replicates - b.estimate), se))
        dev = np.where(np.isfinite(dev), dev, 0.0)
        p = float((1 + np.count_nonzero(dev.max(axis=1) >= t)) / (b.n_boot + 1))
        null = 0.0
    else:
        if margin <= 0:
            raise BadInputError("an equivalence test needs a positive margin")
        ps, ts = [], []
        for j in range(b.estimate.size):
            comp = b[j : j + 1]
            t_lo, p_lo = _upper(comp, -margin, c)  # H1: θ > −margin
            t_hi, p_hi = _upper(-comp, -margin, c)  # H1: θ < margin
            ps.append(max(p_lo, p_hi))
            ts.append(min(t_lo, t_hi))
        p, t = max(ps), min(ts)
        null = margin
    return TestResult(b.estimate, se, t, p, alternative, null)


@dataclass(frozen=True)
class HolmResult:
    """Holm step-down: adjusted p-values, decisions and the local threshold each hypothesis met or missed."""

    adjusted: np.ndarray
    reject: np.ndarray
    threshold: np.ndarray
    alpha: float


def holm(pvalues: Sequence[float], alpha: float = 0.05) -> HolmResult:
    """Holm (1979) step-down over a family (the same decisions as statsmodels ``multipletests(method="holm")``).

    Sorted ascending, the i-th p-value (0-based) is compared with α/(m − i); testing stops at the first
    non-rejection. ``threshold`` is each hypothesis's local α at its rank (the paper's "Holm-local α").
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or np.isnan(p).any() or ((p < 0) | (p > 1)).any():
        raise BadInputError("p-values must be a flat list of numbers in [0, 1]")
    if not 0 < alpha < 1:
        raise BadInputError(f"alpha must be in (0, 1), got {alpha}")
    m = len(p)
    order = np.argsort(p, kind="stable")
    factors = m - np.arange(m)
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(p[order] * factors))
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    threshold = np.empty(m)
    threshold[order] = alpha / factors
    return HolmResult(adjusted, adjusted <= alpha, threshold, alpha)
