"""Simulated ledgers: per-trace answer-emission positions and correctness drawn from a model with item effects.

Model (per dataset): each item i draws random effects (a_i, b_i), jointly normal with standard
deviations ``item_sd_correct``, ``item_sd_emission`` and correlation ``item_rho``, shared by every cell
(MGSM items are parallel across languages and arms). Each trace j of item i in a cell draws (U, V),
standard normal with correlation ``rho``; with probability ``never`` it never emits an answer, otherwise

    E = ceil(exp(emission_mu + b_i + emission_sigma·V))      (answer-emission token position)
    C = 1[U − a_i ≤ correct_mu]                               (completed-trace correctness)

and the strict score at budget B ≤ cap is C·1[E ≤ B]. Correctness and emission time are correlated (within
traces through ``rho``, across items through ``item_rho``, and non-emitters are never correct), as in the
paper. The coverage check (``scripts/validate_coverage.py``) and ``mindcap-tok demo`` draw from it; the
closed-form truth G(t) = P(C=1, E ≤ t) lives with the tests (``tests/simulate.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import BadInputError
from ..tasks.roles import unnamed_task_arms
from .grid import AccuracyGrid


@dataclass(frozen=True)
class SimCell:
    """One simulated (model, arm, lang) cell: correctness and emission-time parameters."""

    arm: str
    lang: str = "deu_Latn"
    correct_mu: float = 0.8
    emission_mu: float = math.log(200.0)
    emission_sigma: float = 0.45
    never: float = 0.05
    rho: float = 0.3
    model: str = "sim-8b"


@dataclass(frozen=True)
class SimDesign:
    """Cells plus the shared item-level random effects, sample sizes and stored cap."""

    cells: tuple[SimCell, ...]
    n_items: int = 250
    k: int = 8
    item_sd_correct: float = 1.0
    item_sd_emission: float = 0.3
    item_rho: float = -0.4
    cap: int = 4096
    stop_tail: float = 12.0
    premiums: dict[str, float] = field(default_factory=dict)


def paper_like_design(n_items: int = 250, k: int = 8) -> SimDesign:
    """A Qwen-like design: native and comparator arms in de/th/sw with the paper's premiums (the arms of the task
    of records that name none, as simulated records do).

    Native answers are emitted later in proportion to the premium; the comparator (translate-act) pays a
    translation preamble (later emission) but is more often correct, so the gap can change sign under tight caps.
    """
    native, comparator = unnamed_task_arms()
    prem = {"deu_Latn": 1.56, "tha_Thai": 2.55, "swh_Latn": 1.94}
    base = 130.0
    cells = []
    for lang, r, nat_mu, tr_mu, never in (
        ("deu_Latn", 1.56, 1.0, 1.4, 0.03),
        ("tha_Thai", 2.55, 0.1, 1.4, 0.05),
        ("swh_Latn", 1.94, -0.2, 0.3, 0.25),
    ):
        cells.append(SimCell(native, lang, nat_mu, math.log(base * r), 0.45, never, 0.3))
        cells.append(SimCell(comparator, lang, tr_mu, math.log(base * 1.6), 0.35, 0.03, 0.3))
    return SimDesign(tuple(cells), n_items=n_items, k=k, premiums=prem)


@dataclass(frozen=True)
class SimulatedLedger:
    """Draws of one dataset: arrays shaped (caps, cells, items, k); ``caps`` has one entry in the replay frame."""

    design: SimDesign
    seed: int
    caps: tuple[int, ...]
    frame: str
    emission: np.ndarray
    correct: np.ndarray
    n_tokens: np.ndarray
    stopped: np.ndarray

    def grid(self, budgets: Sequence[int]) -> AccuracyGrid:
        """Per-item sums on ``budgets`` (replay: every budget from the one long ledger; independent:
        budget B from the decodes capped at B), without building DataFrames."""
        grid_budgets = np.asarray(sorted({int(b) for b in budgets}), dtype=np.int64)
        if self.frame == "replay":
            src = np.zeros(len(grid_budgets), dtype=np.int64)
        else:
            missing = sorted(set(grid_budgets.tolist()) - set(self.caps))
            if missing:
                raise BadInputError(f"no independent decodes capped at {missing}")
            src = np.asarray([self.caps.index(int(b)) for b in grid_budgets])
        em = self.emission[src]  # (budgets, cells, items, k)
        ok = self.correct[src] & (em <= grid_budgets[:, None, None, None])
        correct = ok.sum(axis=-1).transpose(2, 1, 0).astype(np.float64)  # (items, cells, budgets)
        count = np.full(correct.shape, float(self.design.k))
        return AccuracyGrid(self._cells(), grid_budgets, np.arange(self.design.n_items), correct, count, self.frame)

    def _cells(self) -> pd.DataFrame:
        return pd.DataFrame([{"model": c.model, "arm": c.arm, "lang": c.lang} for c in self.design.cells])

    def _records(self) -> pd.DataFrame:
        _n_caps, _n_cells, _n_items, _k = self.emission.shape
        idx = np.indices(self.emission.shape).reshape(4, -1)
        cells = self._cells()
        out = cells.iloc[idx[1]].reset_index(drop=True)
        out["design"] = self.frame
        out["item"] = idx[2].astype(np.int64)
        out["sample"] = idx[3].astype(np.int64)
        out["cap"] = np.asarray(self.caps, dtype=np.int64)[idx[0]]
        return out

    def by_record(self) -> pd.DataFrame:
        """Scoring contract ``Scores.by_record``: one row per generation."""
        out = self._records()
        out["n_tokens"] = self.n_tokens.ravel()
        out["emission"] = self.emission.ravel()
        out["correct"] = self.correct.ravel().astype(np.int8)
        out["finish_reason"] = np.where(self.stopped.ravel(), "stop", "length")
        return out

    def by_budget(self, budgets: Sequence[int] | None = None) -> pd.DataFrame:
        """Scoring contract ``Scores.by_budget``: replay: one row per record × budget; independent: each
        record scored at its own cap."""
        rec = self.by_record()
        if self.frame == "independent":
            budget = rec["cap"].to_numpy()
            rec = rec.assign(budget=budget)
        else:
            if budgets is None:
                raise BadInputError("replay by_budget needs budgets")
            grid = np.asarray(sorted({int(b) for b in budgets}), dtype=np.int64)
            rec = rec.loc[rec.index.repeat(len(grid))].reset_index(drop=True)
            rec["budget"] = np.tile(grid, len(rec) // len(grid))
        em = rec["emission"].to_numpy()
        rec["score"] = ((rec["correct"].to_numpy() == 1) & (em <= rec["budget"].to_numpy())).astype(np.int8)
        rec["truncated"] = rec["n_tokens"].to_numpy() > rec["budget"].to_numpy()
        cols = ["model", "arm", "lang", "item", "sample", "budget", "score", "truncated", "design", "cap"]
        return rec[cols]


def simulate(design: SimDesign, seed: int, *, caps: Sequence[int] | None = None) -> SimulatedLedger:
    """Draw one dataset. ``caps=None``: the replay frame (one ledger at ``design.cap``); otherwise the
    independent frame, one fresh set of decodes per cap sharing the items' random effects."""
    rng = np.random.default_rng(seed)
    frame = "replay" if caps is None else "independent"
    cap_list = (design.cap,) if caps is None else tuple(sorted({int(c) for c in caps}))
    if any(c > design.cap or c < 1 for c in cap_list):
        raise BadInputError(f"caps must lie in [1, {design.cap}], got {cap_list}")
    n_cells, n, k = len(design.cells), design.n_items, design.k
    sa, sb, rab = design.item_sd_correct, design.item_sd_emission, design.item_rho
    item = rng.multivariate_normal([0.0, 0.0], [[sa * sa, rab * sa * sb], [rab * sa * sb, sb * sb]], size=n)
    shape = (len(cap_list), n_cells, n, k)
    z1 = rng.standard_normal(shape)
    z2 = rng.standard_normal(shape)
    par = {
        f: np.array([getattr(c, f) for c in design.cells])[None, :, None, None]
        for f in ("correct_mu", "emission_mu", "emission_sigma", "never", "rho")
    }
    u = z1
    v = par["rho"] * z1 + np.sqrt(1 - par["rho"] ** 2) * z2
    a = item[:, 0][None, None, :, None]
    b = item[:, 1][None, None, :, None]
    never = rng.random(shape) < par["never"]
    e = np.maximum(1.0, np.ceil(np.exp(par["emission_mu"] + b + par["emission_sigma"] * v)))
    cap = np.asarray(cap_list, dtype=np.float64)[:, None, None, None]
    emitted = ~never & (e <= cap)
    emission = np.where(emitted, e, np.nan)
    correct = emitted & (u - a <= par["correct_mu"])
    tail = rng.geometric(1.0 / design.stop_tail, size=shape)
    ramble = rng.random(shape) < 0.5
    natural = np.where(never & ~ramble, np.ceil(e * 1.2), np.where(never, np.inf, e + tail))
    n_tokens = np.minimum(natural, cap).astype(np.int64)
    stopped = natural <= cap
    return SimulatedLedger(design, seed, cap_list, frame, emission, correct, n_tokens, stopped)
