"""Answer-emission timing table against values worked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.timing import emission_timing, timing_contrast


def _frame():
    nat = {
        "emission": [10, 20, 30, 40, np.nan],
        "n_tokens": [15, 25, 35, 45, 4096],
        "finish_reason": ["stop"] * 4 + ["length"],
        "correct": [1, 0, 1, 1, 0],
    }
    tr = {
        "emission": [50, 60, np.nan, np.nan, 70],
        "n_tokens": [55, 65, 100, 4096, 75],
        "finish_reason": ["stop", "stop", "stop", "length", "stop"],
        "correct": [1, 1, 0, 0, 1],
    }
    rows = [
        pd.DataFrame({"model": "m", "arm": arm, "lang": "swh_Latn", "item": range(5), "sample": 0, "cap": 4096, **cols})
        for arm, cols in (("native", nat), ("translate-act", tr))
    ]
    return pd.concat(rows, ignore_index=True)


def test_timing_worked_by_hand():
    t = emission_timing(_frame()).set_index("arm")
    nat, tr = t.loc["native"], t.loc["translate-act"]
    # native emitted [10, 20, 30, 40]: linear quantiles p10 = 13, median 25, p90 = 37
    assert (nat["emission_p10"], nat["emission_median"], nat["emission_p90"]) == pytest.approx((13, 25, 37))
    assert nat["never_emission"] == pytest.approx(0.2) and nat["cap_hit"] == pytest.approx(0.2)
    # lengths [15, 25, 35, 45, 4096]: median 35, p90 = 45 + 0.6*(4096-45)
    assert nat["length_median"] == 35 and nat["length_p90"] == pytest.approx(45 + 0.6 * 4051)
    assert nat["accuracy"] == pytest.approx(0.6) and nat["n"] == 5
    assert tr["never_emission"] == pytest.approx(0.4) and tr["emission_p10"] == pytest.approx(52)
    c = timing_contrast(emission_timing(_frame())).iloc[0]
    assert c["emission_p10_diff"] == pytest.approx(13 - 52)  # native answers earlier in the left tail


def test_cap_hits_from_lengths_when_finish_reason_is_absent():
    t = emission_timing(_frame().drop(columns="finish_reason")).set_index("arm")
    assert t.loc["translate-act", "cap_hit"] == pytest.approx(0.2)
    with pytest.raises(MindcapError, match="finish_reason or cap"):
        emission_timing(_frame().drop(columns=["finish_reason", "cap"]))


def test_a_cap_hit_share_is_not_given_where_a_log_does_not_say_how_a_trace_ended():
    frame = _frame()
    frame.loc[(frame["arm"] == "native") & (frame["item"] == 0), "finish_reason"] = "unknown"
    t = emission_timing(frame).set_index("arm")
    assert np.isnan(t.loc["native", "cap_hit"]) and t.loc["translate-act", "cap_hit"] == pytest.approx(0.2)
