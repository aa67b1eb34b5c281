"""scripts/validate_size.py: the size simulation's output shape and its binomial rates."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("validate_size", ROOT / "scripts" / "validate_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_null_grid_has_no_budget_effect_in_expectation():
    mod = _script()
    grid = mod.null_grid("m", [1024, 1597], 4000, 8, 1.5, np.random.default_rng(0))
    acc = grid.accuracy()  # (cells, budgets): the two caps draw from one probability per item
    assert grid.correct.shape == (4000, 6, 2) and (grid.count == 8).all()
    assert np.abs(acc[:, 1] - acc[:, 0]).max() < 0.01


def test_size_reports_binomial_rates_with_their_se():
    mod = _script()
    res = mod.size(datasets=12, n_boot=200, seed=5, n_items=60, k=4)
    assert res["datasets"] == 12 and res["seed"] == 5 and res["tail_factor"] == 1.3
    assert res["budgets"] == [1024, 1597, 1986, 2611]  # B* and floor(r·B*) for de, sw, th
    for name in ("with_tail_factor", "without_tail_factor"):
        r = res[name]
        assert r["rate"] == r["errors"] / 12
        assert math.isclose(r["mc_se"], math.sqrt(r["rate"] * (1 - r["rate"]) / 12))
        assert set(res["rejections_by_test"][name]) == {"H1-existence", "H1-SESOI", "H2", "H3-de", "H3-th", "H3-sw"}
    # the tail factor only inflates the bootstrap deviations: it can only remove rejections
    assert res["with_tail_factor"]["errors"] <= res["without_tail_factor"]["errors"]
