"""A declared family of hypotheses on accuracy contrasts, evaluated with one item-clustered bootstrap and Holm.

Kinds of estimand (all differences of accuracies, in points in the declaration):

- ``delta``: Δ_L(B) = acc_N(floor(r·B)) − acc_N(B) for one or more languages (H1 existence / SESOI,
  TOST equivalence);
- ``delta-difference``: Δ_lang(B) − Δ_other(B') (H2: a larger effect for Thai than German);
- ``gap``: acc_T(B) − acc_N(B);
- ``contrast``: acc(a) − acc(b) for two cells/budgets given by selectors (H3 reversals on a matched-cost
  grid, announcement dose contrasts, ...). A term may say ``scaled = true`` to use floor(r·B).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from ..data.languages import resolve_language
from ..errors import BadInputError, MindcapError, with_context
from ..resample import check_resamples, scale_budget
from ..spec import check
from .bootstrap import Boot, grid_bootstrap
from .cap import cap_of
from .grid import SETTING_COLUMNS, AccuracyGrid
from .hypotheses import ALTERNATIVES, bootstrap_test, holm, t_ratio
from .premiums import PremiumTable, lookup_premium
from .roles import Arm, arm_of, comparator_of, native_of

KINDS = ("delta", "delta-difference", "gap", "contrast")
DEFAULT_OUTCOMES = {"all": "confirmatory_support", "some": "partial_support", "none": "no_confirmatory_support"}
_T = TypeVar("_T")
_TERM_KEYS = ("model", "arm", "lang", *SETTING_COLUMNS, "budget", "scaled")


@dataclass(frozen=True)
class Hypothesis:
    """One declared hypothesis. ``margin`` is in accuracy points (5 = five points)."""

    id: str
    kind: str
    alternative: str = "greater"
    margin: float = 0.0
    budget: int | None = None
    langs: tuple[str, ...] = ()
    other: str | None = None
    other_budget: int | None = None
    a: Mapping[str, Any] | None = None
    b: Mapping[str, Any] | None = None
    model: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> Hypothesis:
        """Read a declaration (a TOML/YAML table); unknown keys are errors, so typos cannot pass silently."""
        raw = dict(raw)
        hid = str(raw.pop("id", "") or "")
        if not hid:
            raise BadInputError("every hypothesis needs an id")
        kind = raw.pop("kind", None)
        if kind not in KINDS:
            raise BadInputError(f"hypothesis {hid}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
        alternative = raw.pop("alternative", "greater")
        if alternative not in ALTERNATIVES:
            raise BadInputError(f"hypothesis {hid}: alternative must be one of {', '.join(ALTERNATIVES)}")
        langs = raw.pop("langs", None) or ([raw.pop("lang")] if "lang" in raw else [])
        if isinstance(langs, str):
            langs = [langs]
        settings = {k: raw.pop(k) for k in SETTING_COLUMNS if k in raw}
        model = raw.pop("model", None) or (defaults or {}).get("model")
        out = cls(
            id=hid,
            kind=kind,
            alternative=alternative,
            margin=check(float, raw.pop("margin", 0.0), key=f"hypothesis {hid}: margin"),
            budget=check(int | None, raw.pop("budget", None), key=f"hypothesis {hid}: budget"),
            langs=tuple(resolve_language(x) for x in langs),
            other=resolve_language(raw["other"]) if raw.get("other") else None,
            other_budget=check(int | None, raw.pop("other_budget", None), key=f"hypothesis {hid}: other_budget"),
            a=_term(raw.pop("a", None), hid, "a"),
            b=_term(raw.pop("b", None), hid, "b"),
            model=model,
            settings=settings,
            description=str(raw.pop("description", "")),
        )
        raw.pop("other", None)
        if raw:
            raise BadInputError(f"hypothesis {hid}: unknown key(s) {', '.join(sorted(raw))}")
        out._validate()
        return out

    def _validate(self) -> None:
        need_budget = self.kind in ("delta", "delta-difference", "gap")
        if need_budget and (self.budget is None or self.budget <= 0):
            raise BadInputError(f"hypothesis {self.id}: {self.kind} needs a positive budget")
        if self.kind in ("delta", "gap") and not self.langs:
            raise BadInputError(f"hypothesis {self.id}: {self.kind} needs lang or langs")
        if self.kind == "delta-difference" and (len(self.langs) != 1 or not self.other):
            raise BadInputError(f"hypothesis {self.id}: delta-difference needs one lang and other")
        if self.kind == "contrast" and (self.a is None or self.b is None):
            raise BadInputError(f"hypothesis {self.id}: contrast needs terms a and b")
        if self.alternative == "equivalence" and self.margin <= 0:
            raise BadInputError(f"hypothesis {self.id}: equivalence needs a positive margin")
        if self.alternative == "two-sided" and self.margin != 0:
            raise BadInputError(f"hypothesis {self.id}: two-sided takes no margin")


def _declared(h: Hypothesis, value: _T | None, what: str) -> _T:
    """``value``, which the hypothesis's kind needs (a Hypothesis built without :meth:`Hypothesis.from_dict` may
    lack it)."""
    if value is None:
        raise BadInputError(f"hypothesis {h.id}: {h.kind} needs {what}")
    return value


def _term(raw: object, hid: str, name: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise BadInputError(f"hypothesis {hid}: term {name} must be a table")
    unknown = set(raw) - set(_TERM_KEYS)
    if unknown:
        raise BadInputError(f"hypothesis {hid}: term {name} has unknown key(s) {', '.join(sorted(unknown))}")
    if "budget" not in raw:
        raise BadInputError(f"hypothesis {hid}: term {name} needs a budget")
    term = dict(raw)
    if "lang" in term:
        term["lang"] = resolve_language(term["lang"])
    elif term.get("scaled"):
        raise BadInputError(f"hypothesis {hid}: term {name} is scaled, so it needs a lang (for its premium)")
    return term


@dataclass(frozen=True)
class _Term:
    cell: dict[str, Any]
    budget: int
    scaled: bool


class _Estimands:
    """Builds each hypothesis's estimand as (accuracy cell, budget) terms on one grid."""

    def __init__(self, grid: AccuracyGrid, premiums: PremiumTable | None, native: Arm, translate: Arm) -> None:
        self.grid, self.premiums, self.native, self.translate = grid, premiums, native, translate

    def arm(self, arm: Arm, base: Mapping[str, Any]) -> str:
        """The arm of a hypothesis's cells: its ``task``'s, else the grid's one task's (the tasks' arms may differ)."""
        tasks = self.grid.cells["task"].dropna().unique() if "task" in self.grid.cells else []
        task = base.get("task", tasks[0] if len(tasks) == 1 else None)
        try:
            return arm_of(arm, task)
        except MindcapError as exc:
            raise with_context(exc, f"{exc} (give the hypothesis a task)") from None

    def budget(self, cell: dict[str, Any], budget: int, scaled: bool) -> int:
        if not scaled:
            return budget
        if self.premiums is None:
            raise BadInputError("this family needs premiums (declare `premiums` in the protocol)")
        model = cell.get("model") or str(self.grid.cells.at[self.grid.one_cell(**cell), "model"])
        return scale_budget(lookup_premium(self.premiums, model, lang=cell["lang"]), budget)

    def terms(self, h: Hypothesis) -> list[list[tuple[float, _Term]]]:
        """For each component: signed terms whose weighted accuracies sum to the estimand."""
        base = {"model": h.model, **h.settings}
        if h.kind == "delta":
            return [self._delta(base, lang, _declared(h, h.budget, "budget")) for lang in h.langs]
        if h.kind == "delta-difference":
            budget = _declared(h, h.budget, "budget")
            other_budget = h.other_budget or budget
            minus = [(-w, t) for w, t in self._delta(base, _declared(h, h.other, "other"), other_budget)]
            return [self._delta(base, h.langs[0], budget) + minus]
        if h.kind == "gap":
            budget = _declared(h, h.budget, "budget")
            return [
                [
                    (1.0, _Term({**base, "arm": self.arm(self.translate, base), "lang": lang}, budget, False)),
                    (-1.0, _Term({**base, "arm": self.arm(self.native, base), "lang": lang}, budget, False)),
                ]
                for lang in h.langs
            ]
        a, b = _declared(h, h.a, "term a"), _declared(h, h.b, "term b")
        return [[(1.0, self._contrast(base, a)), (-1.0, self._contrast(base, b))]]

    def _delta(self, base: dict[str, Any], lang: str, budget: int) -> list[tuple[float, _Term]]:
        cell = {**base, "arm": self.arm(self.native, base), "lang": lang}
        return [(1.0, _Term(cell, budget, True)), (-1.0, _Term(cell, budget, False))]

    @staticmethod
    def _contrast(base: dict[str, Any], raw: Mapping[str, Any]) -> _Term:
        cell = {**base, **{k: v for k, v in raw.items() if k not in ("budget", "scaled")}}
        return _Term(cell, int(raw["budget"]), bool(raw.get("scaled", False)))


def family_budgets(
    hypotheses: Sequence[Hypothesis], premiums: PremiumTable | None, *, models: Sequence[str]
) -> list[int]:
    """Every budget the family reads (B and, where scaled, floor(r·B)); to score a ledger before testing."""
    out: set[int] = set()
    for h in hypotheses:
        reads: list[tuple[int, str | None, bool]] = []  # (budget, lang, scaled)
        if h.kind != "contrast":
            budget = _declared(h, h.budget, "budget")
            if h.kind == "delta":
                reads += [(budget, lang, True) for lang in h.langs]
            elif h.kind == "delta-difference":
                reads += [(budget, h.langs[0], True), (h.other_budget or budget, h.other, True)]
            elif h.kind == "gap":
                reads += [(budget, lang, False) for lang in h.langs]
        reads += [(int(t["budget"]), t.get("lang"), bool(t.get("scaled", False))) for t in (h.a, h.b) if t]
        for budget, lang, scaled in reads:
            out.add(int(budget))
            if scaled and premiums is not None:
                for model in [h.model] if h.model else models:
                    out.add(scale_budget(lookup_premium(premiums, model, lang=_declared(h, lang, "lang")), budget))
    return sorted(out)


@dataclass(frozen=True)
class FamilyResult:
    """Decisions of a family: one row per hypothesis, the formal outcome label, and what was used."""

    table: pd.DataFrame
    outcome: str
    alpha: float
    n_boot: int
    seed: int
    tail_factor: float


@dataclass(frozen=True)
class FamilyTests:
    """How a family is tested, as a protocol file declares it: Holm at ``alpha`` on one item-clustered
    resampling (``n_boot`` resamples from ``seed``; the tests' level is 1 − ``alpha``), every test's
    ``tail_factor``, and the ``outcomes`` labels (over :data:`DEFAULT_OUTCOMES`)."""

    alpha: float = 0.05
    n_boot: int = 10_000
    seed: int = 0
    tail_factor: float = 1.0
    outcomes: Mapping[str, str] | None = None


def run_family(
    grid: AccuracyGrid,
    hypotheses: Sequence[Hypothesis],
    *,
    premiums: PremiumTable | None = None,
    tests: FamilyTests = FamilyTests(),
    native: Arm | None = None,
    translate: Arm | None = None,
    boot: Boot | None = None,
) -> FamilyResult:
    """Evaluate every hypothesis on one shared resampling, then Holm over the family.

    Table columns: ``id``, ``kind``, ``alternative``, ``margin`` (points), ``estimate`` (points; the
    component with the largest test statistic when several), ``components`` (every component),
    ``se`` (points), ``p_value``, ``holm_threshold``, ``p_adjusted``, ``decision`` (reject/retain).
    ``tests.n_boot`` (or ``boot``'s, to reuse one resampling) must reach
    :func:`~mindcap_tok.resample.min_resamples` at level 1 − ``tests.alpha``. ``native``/``translate``: one
    arm, or each task's (None: each task's own).

    A hypothesis reading an accuracy beyond its cell's cap where traces were cut (the grid's
    :attr:`~.grid.AccuracyGrid.cut_share`; without it every capped cell may have been cut) is not estimable: it
    counts as no evidence (p-value 1 in Holm's family), with null ``estimate``/``p_value`` and the decision
    ``not estimable``.
    """
    alpha, n_boot, seed, tail_factor = tests.alpha, tests.n_boot, tests.seed, tests.tail_factor
    if not hypotheses:
        raise BadInputError("the family declares no hypotheses")
    ids = [h.id for h in hypotheses]
    if len(set(ids)) != len(ids):
        raise BadInputError(f"hypothesis ids must be unique, got {ids}")
    labels = {**DEFAULT_OUTCOMES, **(tests.outcomes or {})}
    check_resamples(n_boot if boot is None else boot.n_boot, 1 - alpha)  # the tests' level is 1 - alpha
    est = _Estimands(grid, premiums, native_of(grid.cells, native), comparator_of(grid.cells, translate))
    if boot is None:
        boot = grid_bootstrap(grid, n_boot=n_boot, seed=seed)
    cell_c = grid.cell_cut_share()
    rows, blind = [], []
    for h in hypotheses:
        comps: list[Boot] = []
        names: list[str] = []
        unobserved = False
        for terms in est.terms(h):
            pieces = []
            for w, term in terms:
                cell = grid.one_cell(**term.cell)
                budget = est.budget(term.cell, term.budget, term.scaled)
                cap = cap_of(grid.cells.at[cell, "cap"]) if "cap" in grid.cells else None
                unobserved |= cap is not None and budget > cap and cell_c[cell] > 0
                b = grid.budget_index([budget])[0]
                pieces.append(boot[cell, b] * w)
            comps.append(reduce(Boot.__add__, pieces))
            names.append(terms[0][1].cell.get("lang") or "")
        vec = Boot(np.array([c.estimate for c in comps]), np.stack([c.replicates for c in comps], axis=1), boot.seed)
        res = bootstrap_test(vec, h.alternative, margin=h.margin / 100.0, tail_factor=tail_factor)
        t_each = t_ratio(res.estimate - res.null, res.se)
        if h.alternative == "greater":
            lead = int(np.argmax(t_each))
        elif h.alternative == "less":
            lead = int(np.argmin(t_each))
        elif h.alternative == "two-sided":
            lead = int(np.argmax(np.abs(t_each)))
        else:
            lead = int(np.argmax(np.abs(res.estimate)))
        rows.append(
            {
                "id": h.id,
                "kind": h.kind,
                "alternative": h.alternative,
                "margin": h.margin,
                "estimate": 100 * float(res.estimate[lead]),
                "components": "; ".join(f"{n}={100 * e:.2f}" for n, e in zip(names, res.estimate, strict=True)),
                "se": 100 * float(res.se[lead]),
                "p_value": res.p_value,
            }
        )
        blind.append(unobserved)
    table = pd.DataFrame(rows)
    unknown = np.asarray(blind, dtype=bool)
    hr = holm(np.where(unknown, 1.0, table["p_value"].to_numpy()).tolist(), alpha)
    table["holm_threshold"] = hr.threshold
    table["p_adjusted"] = np.where(unknown, np.nan, hr.adjusted)
    table["decision"] = np.where(unknown, "not estimable", np.where(hr.reject, "reject", "retain"))
    table.loc[unknown, ["estimate", "se", "p_value"]] = np.nan
    table.loc[unknown, "components"] = "beyond the cap"
    n_rej = int(hr.reject.sum())
    outcome = labels["all"] if n_rej == len(table) else labels["some"] if n_rej else labels["none"]
    return FamilyResult(table, outcome, alpha, boot.n_boot, boot.seed, float(tail_factor))
