"""Sub-CDF G(t) = P(C=1, E≤t): exact replay identity, hand-worked values, prediction of independent decodes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.curves import delta_table
from mindcap_tok.stats.premiums import required_budgets
from mindcap_tok.stats.subcdf import compare_prediction, predict_delta, split_items, subcdf
from simulate import paper_like_design, simulate, true_delta


def _records():
    # emission NaN = never; C is the completed trace's correctness
    return pd.DataFrame(
        {
            "model": "m",
            "arm": "native",
            "lang": "deu_Latn",
            "item": [0, 0, 1, 1, 2],
            "sample": [0, 1, 0, 1, 0],
            "emission": [50, 120, np.nan, 90, 300],
            "correct": [1, 1, 0, 0, 1],
            "n_tokens": [60, 130, 4096, 100, 310],
            "finish_reason": ["stop", "stop", "length", "stop", "stop"],
            "cap": 4096,
        }
    )


def test_subcdf_worked_by_hand():
    g = subcdf(_records(), [49, 50, 100, 120, 300]).set_index("t")["G"]
    # correct & emitted by t: t=49: 0; 50: 1; 100: 1 (the 90 is wrong); 120: 2; 300: 3 -- of 5 records
    np.testing.assert_allclose(g.to_numpy(), [0, 1 / 5, 1 / 5, 2 / 5, 3 / 5])


def test_predict_delta_and_naive_factorization_by_hand():
    out = predict_delta(_records(), {"de": 2.0}, budgets=[60]).iloc[0]
    assert out["scaled_budget"] == 120
    assert out["predicted"] == pytest.approx(2 / 5 - 1 / 5)
    # naive: P(C=1)=3/5 times P(60 < E <= 120) = 2/5 (emissions 120 and 90)
    assert out["p_correct"] == pytest.approx(3 / 5) and out["p_window"] == pytest.approx(2 / 5)
    assert out["naive"] == pytest.approx(6 / 25)


def test_subcdf_beyond_the_cap_is_refused():
    recs = _records().assign(cap=200)
    with pytest.raises(MindcapError, match="not identified for t > 200"):
        subcdf(recs, [300])


@pytest.fixture(scope="module")
def design():
    return paper_like_design()


def test_replay_identity_is_exact(design):
    data = simulate(design, seed=21)
    budgets = [64, 128, 192, 256, 384, 512, 768, 1024]
    need = required_budgets(budgets, design.premiums.values())
    observed = delta_table(data.by_budget(need), design.premiums, budgets=budgets)
    predicted = predict_delta(data.by_record(), design.premiums, budgets=budgets)
    both = predicted.merge(observed, on=["model", "lang", "budget"])
    assert len(both) == 3 * len(budgets)
    np.testing.assert_array_equal(both["predicted"].to_numpy(), both["delta"].to_numpy())
    cmp = compare_prediction(predicted, observed)
    assert (cmp["mae"] == 0).all() and cmp["argmax_agree"].all()


def test_long_ledger_predicts_independent_decodes_better_than_the_naive_factorization(design):
    budgets = [64, 128, 192, 256, 384, 512, 768, 1024]
    need = required_budgets(budgets, design.premiums.values())
    long_run = simulate(design, seed=31)
    independent = simulate(design, seed=32, caps=need)
    predicted = predict_delta(long_run.by_record(), design.premiums, budgets=budgets)
    observed = delta_table(independent.by_budget(), design.premiums, budgets=budgets, frame="independent")
    cmp = compare_prediction(predicted, observed)
    # sampling error of two 2,000-trace ledgers is a couple of points; the naive product is biased by more
    assert (cmp["mae"] < 0.025).all(), cmp
    assert (cmp["naive_mae"] > cmp["mae"]).all(), cmp
    # and the prediction tracks the closed-form truth
    truth = {c.lang: true_delta(design, c, budgets) for c in design.cells if c.arm == "native"}
    for lang, part in predicted.groupby("lang"):
        assert np.abs(part.sort_values("budget")["predicted"].to_numpy() - truth[lang]).max() < 0.05


def test_split_items_is_a_seeded_partition():
    a, b = split_items(np.arange(250), seed=4)
    assert len(a) == 125 and len(b) == 125 and not set(a) & set(b) and set(a) | set(b) == set(range(250))
    a2, _ = split_items(np.arange(250), seed=4)
    np.testing.assert_array_equal(a, a2)


def test_closed_form_bivariate_normal_matches_scipy():
    # the simulator's truth rests on P(X <= x, Y <= y); scipy's Genz integration is an independent reference
    from scipy.stats import multivariate_normal

    from simulate import _bvn_cdf

    for x, y, sx, sy, cov in [(0.3, -0.5, 1.2, 0.8, 0.4), (-1.0, 2.0, 1.0, 1.5, -0.9), (1.5, 0.2, 1.1, 0.7, 0.0)]:
        ref = multivariate_normal(mean=[0, 0], cov=[[sx * sx, cov], [cov, sy * sy]]).cdf([x, y])
        assert _bvn_cdf(x, y, sx, sy, cov) == pytest.approx(ref, abs=1e-6)
