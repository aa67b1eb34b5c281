"""Simulated ledgers whose true accuracy curves and Δ_L(B) are known in closed form.

Model (per dataset): each item i draws random effects (a_i, b_i), jointly normal with standard
deviations ``item_sd_correct``, ``item_sd_emission`` and correlation ``item_rho``, shared by every cell
(MGSM items are parallel across languages and arms). Each trace j of item i in a cell draws (U, V),
standard normal with correlation ``rho``; with probability ``never`` it never emits an answer, otherwise

    E = ceil(exp(emission_mu + b_i + emission_sigma·V))      (answer-emission token position)
    C = 1[U − a_i ≤ correct_mu]                               (completed-trace correctness)

and the strict score at budget B ≤ cap is C·1[E ≤ B]. Hence, for integer t ≤ cap,

    G(t) = P(C=1, E ≤ t) = (1 − never) · Φ₂(correct_mu, log t − emission_mu; Σ)

with Σ = [[1 + s_a², rho·σ_e − ρ_ab·s_a·s_b], [·, σ_e² + s_b²]], acc(B) = G(B) in either frame and
Δ_L(B) = G(floor(r·B)) − G(B). Correctness and emission time are correlated (within traces through
``rho``, across items through ``item_rho``, and non-emitters are never correct), so the naive
factorization P(C=1)·P(E in window) is biased, as in the paper.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import integrate, special

from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import scale_budget
from mindcap_tok.stats.simulation import (  # noqa: F401  (re-exported for the tests and scripts)
    SimCell,
    SimDesign,
    SimulatedLedger,
    paper_like_design,
    simulate,
)


def validation_design(n_items: int = 250, k: int = 8) -> SimDesign:
    """Native cells in de/th/sw whose broad emission-time distributions keep every budget of the paper's
    sweep (64..1024) inside the budget-binding regime, so each Δ_L(B) window holds tens of newly correct
    traces per dataset (the regime in which interval coverage is validated; see README)."""
    prem = {"deu_Latn": 1.56, "tha_Thai": 2.55, "swh_Latn": 1.94}
    cells = tuple(
        SimCell("native", lang, mu, math.log(300.0 * prem[lang]), 0.7, never, 0.3)
        for lang, mu, never in (("deu_Latn", 1.0, 0.03), ("tha_Thai", 0.1, 0.05), ("swh_Latn", -0.2, 0.25))
    )
    return SimDesign(cells, n_items=n_items, k=k, item_sd_emission=0.4, premiums=prem)


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _bvn_cdf(x: float, y: float, sx: float, sy: float, cov: float) -> float:
    """P(X ≤ x, Y ≤ y) for a centred bivariate normal, by one-dimensional quadrature (to ~1e-12)."""
    rho = cov / (sx * sy)
    a, b = x / sx, y / sy
    if abs(rho) < 1e-15:
        return float(special.ndtr(a) * special.ndtr(b))
    s = math.sqrt(1 - rho * rho)
    # scalar ufuncs in the integrand: scipy.stats' frozen-distribution calls cost ~50x more per evaluation
    val, _ = integrate.quad(
        lambda z: math.exp(-0.5 * z * z) * _INV_SQRT_2PI * special.ndtr((b - rho * z) / s),
        -np.inf,
        a,
        epsabs=1e-13,
        epsrel=1e-12,
        limit=200,
    )
    return float(val)


def true_subcdf(design: SimDesign, cell: SimCell, points: Sequence[int]) -> np.ndarray:
    """G(t) = P(C=1, E ≤ t) of ``cell`` at integer points t ≤ cap, in closed form (see module doc)."""
    sa, sb = design.item_sd_correct, design.item_sd_emission
    sx = math.sqrt(1 + sa * sa)
    sy = math.sqrt(cell.emission_sigma**2 + sb * sb)
    cov = cell.rho * cell.emission_sigma - design.item_rho * sa * sb
    out = []
    for t in points:
        if t > design.cap:
            raise MindcapError(f"G({t}) is not defined beyond the stored cap {design.cap}")
        out.append((1 - cell.never) * _bvn_cdf(cell.correct_mu, math.log(t) - cell.emission_mu, sx, sy, cov))
    return np.asarray(out)


def true_delta(design: SimDesign, cell: SimCell, budgets: Sequence[int], r: float | None = None) -> np.ndarray:
    """Δ_L(B) = G(floor(r·B)) − G(B); ``r`` defaults to the design's premium for the cell's language."""
    r = design.premiums[cell.lang] if r is None else r
    scaled = [scale_budget(r, int(b)) for b in budgets]
    return true_subcdf(design, cell, scaled) - true_subcdf(design, cell, budgets)
