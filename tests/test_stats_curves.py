"""Accuracy curves, gap(B) and Δ_L(B) on frames worked by hand and on simulated ledgers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import Resampling
from mindcap_tok.stats.curves import accuracy_table, delta_table, gap_table, sweep
from mindcap_tok.stats.grid import accuracy_grid
from mindcap_tok.stats.premiums import (
    lookup_premium,
    parse_premium_pairs,
    premium_table,
    required_budgets,
)
from simulate import paper_like_design, simulate


def _frame(rows):
    return pd.DataFrame(rows, columns=["model", "arm", "lang", "item", "sample", "budget", "score", "cap"]).assign(
        truncated=False
    )


@pytest.fixture(scope="module")
def hand():
    """Two items × two samples of a native Thai cell and a translate cell, budgets 100/150/200; r = 1.5.

    native scores (item, sample): at 100: (0,0)=1 others 0 -> 1/4; at 150: (0,0),(0,1),(1,0) -> 3/4;
    at 200: all but (1,1) -> 3/4. translate: 2/4 at every budget.
    """
    rows = []
    nat = {100: [1, 0, 0, 0], 150: [1, 1, 1, 0], 200: [1, 1, 1, 0]}
    for b, scores in nat.items():
        for j, s in enumerate(scores):
            rows.append(("m", "native", "tha_Thai", j // 2, j % 2, b, s, 4096))
            rows.append(("m", "translate-act", "tha_Thai", j // 2, j % 2, b, [1, 0, 1, 0][j], 4096))
    return _frame(rows)


def test_accuracy_table_matches_groupby_mean(hand):
    got = accuracy_table(hand)
    ref = hand.groupby(["arm", "budget"])["score"].mean().reset_index()
    merged = got.merge(ref, on=["arm", "budget"])
    np.testing.assert_allclose(merged["accuracy"], merged["score"])
    assert set(got["n"]) == {4} and set(got["n_items"]) == {2}


def test_delta_worked_by_hand(hand):
    out = delta_table(hand, {"th": 1.5}, budgets=[100])
    row = out.iloc[0]
    assert row["scaled_budget"] == 150
    assert row["acc_native"] == pytest.approx(0.25) and row["acc_native_scaled"] == pytest.approx(0.75)
    assert row["delta"] == pytest.approx(0.5)


def test_gap_worked_by_hand(hand):
    out = gap_table(hand).set_index("budget")
    assert out.loc[100, "gap"] == pytest.approx(0.5 - 0.25)
    assert out.loc[150, "gap"] == pytest.approx(0.5 - 0.75)


def test_missing_scaled_budget_is_a_one_line_error(hand):
    with pytest.raises(MindcapError, match=r"no scores at budget\(s\) 300"):
        delta_table(hand, {"th": 1.5}, budgets=[200])


def test_independent_frame_reads_each_cap_as_its_own_budget():
    # replay rows (cap 4096) would say acc(100)=0; the records capped at 100 say 1
    rows = [("m", "native", "tha_Thai", i, 0, 100, 0, 4096) for i in range(3)]
    rows += [("m", "native", "tha_Thai", i, 0, 100, 1, 100) for i in range(3)]
    rows += [("m", "native", "tha_Thai", i, 0, 200, int(i > 0), 200) for i in range(3)]
    frame = _frame(rows)
    ind = accuracy_table(frame, frame="independent").set_index("budget")["accuracy"]
    assert ind.loc[100] == 1.0 and ind.loc[200] == pytest.approx(2 / 3)
    rep = accuracy_table(frame, frame="replay")
    assert set(rep["cap"]) == {100, 200, 4096}  # in the replay frame the cap splits cells
    with pytest.raises(MindcapError, match="cap"):
        accuracy_grid(frame.drop(columns="cap"), frame="independent")


def test_premium_table_forms_and_exact_floor():
    # the paper: r = 2.550777 (2135/837 for Qwen3 Thai) gives floor(r·256) = 652
    table = premium_table(
        [
            {
                "model": "qwen3-8b",
                "lang": "th",
                "premium": 2.5507765830346476,
                "tokens": 2135 * 100,
                "ref_tokens": 837 * 100,
            }
        ]
    )
    r = lookup_premium(table, "Qwen3-8B", lang="tha_Thai")  # registry alias of the same model
    assert r == Fraction(2135, 837)
    assert required_budgets([256], [r]) == [256, 652]
    pairs = parse_premium_pairs(["th=2.55", "llama-3.1-8b:de=1.58"])
    assert lookup_premium(pairs, "anything", lang="th") == Fraction(255, 100)
    assert lookup_premium(pairs, "llama3.1", lang="de") == Fraction(158, 100)
    with pytest.raises(MindcapError, match="no premium"):
        lookup_premium(pairs, "qwen3-8b", lang="de")


@pytest.fixture(scope="module")
def sim():
    design = paper_like_design()
    data = simulate(design, seed=3)
    budgets = [64, 128, 256, 512, 1024]
    need = required_budgets(budgets, design.premiums.values())
    return design, data, budgets, data.by_budget(need)


def test_grid_from_frames_equals_direct_sums(sim):
    design, data, _budgets, by_budget = sim
    grid = accuracy_grid(by_budget)
    direct = data.grid(grid.budgets)
    order = [
        [(c.arm, c.lang) for c in design.cells].index(k) for k in zip(grid.cells.arm, grid.cells.lang, strict=True)
    ]
    np.testing.assert_array_equal(grid.correct, direct.correct[:, order])
    np.testing.assert_array_equal(grid.count, direct.count[:, order])


def test_sweep_point_estimates_crossovers_and_peaks(sim):
    design, _data, budgets, by_budget = sim
    res = sweep(by_budget, design.premiums, budgets=budgets, resampling=Resampling(300, 1))
    ref = delta_table(by_budget, design.premiums, budgets=budgets)
    merged = res.rows.merge(ref, on=["model", "lang", "budget"], suffixes=("", "_ref"))
    np.testing.assert_allclose(merged["delta"], merged["delta_ref"])
    np.testing.assert_allclose(merged["gap"], merged["acc_translate"] - merged["acc_native"])
    assert (merged["ci_low"] <= merged["delta"]).all() and (merged["delta"] <= merged["ci_high"]).all()
    assert (merged["band_low"] <= merged["ci_low"] + 1e-12).all()  # simultaneous bands are wider
    assert not merged["beyond_cap"].any()
    for peak in res.peaks.itertuples():
        part = res.rows[res.rows["lang"] == peak.lang]
        assert peak.delta == part["delta"].max() and 0 <= peak.stability <= 1
    # crossovers are where the sign of the point gap changes between consecutive budgets
    for lang, part in res.rows.groupby("lang"):
        signs = np.sign(part.sort_values("budget")["gap"].to_numpy())
        signs = signs[signs != 0]
        n_changes = int((signs[1:] != signs[:-1]).sum())
        assert (res.crossovers["lang"] == lang).sum() == n_changes
    assert res.as_dict()["seed"] == 1 and res.n_boot == 300


def test_forced_and_unforced_records_are_separate_cells():
    # the same (model, arm, lang, cap) generated with and without forcing: two populations, never pooled
    rows = [
        {
            "model": "m",
            "arm": "native",
            "lang": "tha_Thai",
            "design": "replay",
            "cap": 64,
            "forcing": forced,
            "item": item,
            "budget": 64,
            "score": int(forced or item == 0),
        }
        for forced in (False, True)
        for item in (0, 1)
    ]
    grid = accuracy_grid(pd.DataFrame(rows))
    assert len(grid.cells) == 2
    by_forcing = {bool(f): grid.correct[:, i, 0].sum() for i, f in enumerate(grid.cells["forcing"])}
    assert by_forcing == {False: 1, True: 2}  # pooled, the cell would read 3 of 4
    with pytest.raises(MindcapError, match=r"2 cells match .*also fix .*forcing"):
        grid.one_cell(model="m", arm="native", lang="tha_Thai")


def test_budget_axis_labels_the_whole_drawn_range():
    # the scaled budgets floor(r·B) run past the grid: the axis must be labelled up to the largest one drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mindcap_tok.report.budget_figures import budget_axis

    grid = [64, 128, 192, 256, 384, 512, 768, 1024]
    scaled = [163, 326, 489, 652, 979, 1305, 1958, 2611]  # floor(2.55 · B)
    fig, ax = plt.subplots()
    budget_axis(ax, np.array(grid + scaled))
    labels = [int(t.get_text()) for t in ax.get_xticklabels()]
    low, high = ax.get_xlim()
    plt.close(fig)
    # 2048 would print over 2611 (a third of an octave apart): the drawn end is labelled in its place
    assert labels == [64, 128, 256, 512, 1024, 2611]
    assert low < 64 and 2611 < high < 2611 * 1.25  # nothing drawn past the last label by more than a quarter
