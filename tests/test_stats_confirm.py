"""`confirm`: replay predictions checked on independent decodes, against values worked by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import Resampling
from mindcap_tok.stats.confirm import confirm, output_lengths

CELL = {"model": "m", "arm": "native", "lang": "deu_Latn"}
PREMIUMS = {("m", "deu_Latn"): 1.5}  # B = 2 -> 3, B = 4 -> 6
BUDGETS = [2, 3, 4, 6]
# replay: four items, one long trace each (cap 8): emission E, correctness C, length
E, C, N = [3, 5, 1, 5], [1, 1, 1, 1], [6, 8, 3, 8]
# independent: one decode per item and cap; scores and lengths
IND_SCORE = {2: [0, 0, 1, 0], 3: [1, 1, 1, 0], 4: [1, 0, 1, 0], 6: [1, 1, 1, 0]}
IND_LEN = {2: [2, 2, 2, 2], 3: [3, 3, 3, 3], 4: [4, 4, 3, 4], 6: [6, 5, 3, 6]}


def _replay():
    by_record = pd.DataFrame(
        [
            {
                **CELL,
                "cap": 8,
                "item": i,
                "sample": 0,
                "emission": float(E[i]),
                "correct": C[i],
                "n_tokens": N[i],
                "finish_reason": "length" if N[i] >= 8 else "stop",
            }
            for i in range(4)
        ]
    )
    by_budget = pd.DataFrame(
        [
            {**CELL, "cap": 8, "item": i, "sample": 0, "budget": b, "score": int(C[i] and E[i] <= b)}
            for i in range(4)
            for b in BUDGETS
        ]
    )
    return SimpleNamespace(by_budget=by_budget, by_record=by_record)


def _independent():
    recs = [
        {**CELL, "cap": c, "item": i, "sample": 0, "score": IND_SCORE[c][i], "n_tokens": IND_LEN[c][i]}
        for c in BUDGETS
        for i in range(4)
    ]
    by_budget = pd.DataFrame([{**r, "budget": r["cap"]} for r in recs]).drop(columns="n_tokens")
    by_record = pd.DataFrame(recs).drop(columns="score")
    return SimpleNamespace(by_budget=by_budget, by_record=by_record)


def test_confirm_rows_by_hand():
    res = confirm(_replay(), _independent(), premiums=PREMIUMS, budgets=[2, 4], resampling=Resampling(4000, 3))
    rows = res.rows.set_index("budget")
    # replay acc: B=2 -> 1/4, 3 -> 2/4, 4 -> 2/4, 6 -> 4/4
    assert rows.loc[2, "predicted"] == 0.25 and rows.loc[4, "predicted"] == 0.5
    # independent acc: 1/4, 3/4, 2/4, 3/4
    assert rows.loc[2, "independent"] == 0.5 and rows.loc[4, "independent"] == 0.25
    # G(t) from (E, C) equals the replay Δ_L (the identity); errors against the independent Δ_L by hand
    assert rows["subcdf_predicted"].tolist() == [0.25, 0.5]
    assert rows["subcdf_error"].tolist() == [-0.25, 0.25]
    inside = (rows["ci_low"] <= rows["independent"]) & (rows["independent"] <= rows["ci_high"])
    assert rows["inside"].tolist() == inside.tolist()
    # SE of a mean of per-item paired differences under item resampling: population sd / sqrt(items)
    d2, d4 = np.array([1, 1, 0, 0]), np.array([0, 1, 0, 0])
    for b, d in ((2, d2), (4, d4)):
        assert rows.loc[b, "independent_se"] == pytest.approx(d.std() / math.sqrt(4), rel=0.05)
    cell = res.cells.iloc[0]
    assert (cell["predicted_budget"], cell["independent_argmax"], bool(cell["argmax_agree"])) == (4, 2, False)
    assert cell["subcdf_mae"] == 0.25 and cell["subcdf_max_abs_error"] == 0.25
    assert (res.n_boot, res.seed) == (4000, 3)


def test_output_lengths_by_hand():
    out = output_lengths(_replay().by_record, _independent().by_record).set_index("cap")
    # replay lengths 6, 8, 3, 8 truncated at the cap
    assert out["mean_truncated"].tolist() == [2.0, 3.0, 3.75, 5.25]
    assert out["mean_independent"].tolist() == [2.0, 3.0, 3.75, 5.0]
    assert out.loc[6, "difference_share"] == pytest.approx(-0.25 / 6)
    assert out["n_independent"].tolist() == [4] * 4 and out["n_replay"].tolist() == [4] * 4


def test_output_lengths_refuses_a_cap_beyond_the_discovery_cap():
    ind = _independent().by_record.assign(cap=lambda f: f["cap"] * 2)  # caps 4..12, the replay stopped at 8
    with pytest.raises(MindcapError, match="cut by a cap below 12"):
        output_lengths(_replay().by_record, ind)


def test_confirm_refuses_ledgers_without_a_shared_cell():
    ind = _independent()
    ind.by_budget["lang"] = "tha_Thai"
    with pytest.raises(MindcapError):
        confirm(
            _replay(), ind, premiums={**PREMIUMS, ("m", "tha_Thai"): 1.5}, budgets=[2, 4], resampling=Resampling(100)
        )
