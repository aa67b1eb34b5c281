"""Normalizer sensitivity: behavioral ratio, threshold premium, Δ_L under other normalizers, r_trace."""

from __future__ import annotations

import unicodedata
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from ledger_factory import make_record
from mindcap_tok.audits import behavioral_ratios, normalizer_audit, threshold_premium, trace_premiums
from mindcap_tok.audits.normalizer import Normalizers, ThresholdSearch
from mindcap_tok.resample import Resampling, bootstrap_counts
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.stats.curves import delta_table
from mindcap_tok.stats.premiums import premium_table
from mindcap_tok.store.schema import validate_records


def _with_length(tok, n: int, **kw) -> dict:
    rec = make_record(tok, "x", **kw)
    return dict(rec, output_ids=[100] * n, text="x" * n)


def test_behavioral_ratio_and_its_bootstrap(qwen):
    lengths = {
        ("native", 0): [10, 20],
        ("native", 1): [30, 40],
        ("native", 2): [60, 60],
        ("translate-act", 0): [5, 5],
        ("translate-act", 1): [10, 10],
        ("translate-act", 2): [20, 10],
    }
    recs = [
        _with_length(qwen, n, arm=arm, item=item, sample=s)
        for (arm, item), ns in lengths.items()
        for s, n in enumerate(ns)
    ]
    table = behavioral_ratios(validate_records(recs), resampling=Resampling(300, 5))
    row = table.iloc[0]
    assert row["ratio"] == pytest.approx((220 / 6) / (60 / 6)) and row["items"] == 3
    # the same percentile interval from an explicit loop over item resamples
    reps = []
    for w in bootstrap_counts(3, 300, seed=5):
        drawn = [i for i in range(3) for _ in range(int(w[i]))]
        nat = [n for i in drawn for n in lengths[("native", i)]]
        tra = [n for i in drawn for n in lengths[("translate-act", i)]]
        reps.append(np.mean(nat) / np.mean(tra))
    lo, hi = np.quantile(reps, [0.025, 0.975])
    assert row["ci_low"] == pytest.approx(lo) and row["ci_high"] == pytest.approx(hi)


def test_threshold_premium_is_the_smallest_reaching_ratio():
    t0 = 10
    acc = np.where(np.arange(t0, 61) >= 25, 0.1, 0.0)
    assert threshold_premium(acc, t0, budgets=[10, 20], sesoi=0.05, r_max=3.0) == (Fraction(5, 4), 20, 25)
    assert threshold_premium(acc, t0, budgets=[10, 20], sesoi=0.05, r_max=1.2) == (None, None, None)
    assert threshold_premium(acc, t0, budgets=[10, 20], sesoi=0.2, r_max=3.0) == (None, None, None)


@pytest.fixture(scope="module")
def ledger(qwen):
    recs = []
    for item in range(8):
        for s in range(2):
            k = 2 + 3 * item + s  # answer lines emerge at different lengths
            recs.append(make_record(qwen, "คิด " * k + f"\n#### {item}\n", item=item, sample=s, gold=item))
            recs.append(
                make_record(
                    qwen, "Think. " * (k // 2) + f"\n#### {item}\n", arm="translate-act", item=item, sample=s, gold=item
                )
            )
    return validate_records(recs)


def test_delta_under_normalizers_matches_the_stats_module(qwen, ledger):
    budgets = [8, 12, 16]
    flores, alt = premium_table({"tha_Thai": 1.5}), premium_table({"tha_Thai": 2.25})
    res = normalizer_audit(
        ledger,
        {"qwen3-8b": qwen},
        budgets=budgets,
        normalizers=Normalizers(premiums=flores, alternatives={"alt": alt}),
        resampling=Resampling(200, 1),
    )
    delta = res.tables["delta"]
    every = sorted(set(range(1, 80)))
    scores = score_ledger(ledger, qwen, budgets=every).by_budget
    for name, table in (("flores", flores), ("alt", alt)):
        ref = delta_table(scores, table, budgets=budgets)
        got = delta[delta["normalizer"] == name].sort_values("budget")
        assert got["delta"].to_numpy() == pytest.approx(ref["delta"].to_numpy()), name
        assert got["scaled_budget"].tolist() == ref["scaled_budget"].tolist()
        assert ((got["ci_low"] <= got["delta"]) & (got["delta"] <= got["ci_high"])).all()
    beh = res.tables["behavioral"]["ratio"].iloc[0]
    got = delta[delta["normalizer"] == "behavioral"]
    assert got["premium"].iloc[0] == pytest.approx(beh)
    # the threshold against a brute-force scan of premiums on a fine grid
    acc = scores[scores["arm"] == "native"].groupby("budget")["score"].mean()
    thr = res.tables["threshold"].iloc[0]
    brute = None
    for r in np.arange(1.0, thr["search_up_to"], 0.0005):
        if max(acc[int(np.floor(r * b + 1e-9))] - acc[b] for b in budgets) >= 0.05:
            brute = r
            break
    assert brute is not None and thr["threshold_premium"] == pytest.approx(brute, abs=0.0006)
    assert thr["flores_reaches"] == (thr["threshold_premium"] <= 1.5)
    assert res.summary["seed"] == 1 and res.summary["n_boot"] == 200


def test_threshold_search_settings_reach_the_search(qwen, ledger):
    # Δ_L never exceeds 1, so a SESOI of 1.01 is never reached; the search bound scales with search_factor
    run = {
        "budgets": [8, 16],
        "normalizers": Normalizers(premium_table({"tha_Thai": 1.5})),
        "resampling": Resampling(100),
    }
    default = normalizer_audit(ledger, {"qwen3-8b": qwen}, **run)
    wide = normalizer_audit(ledger, {"qwen3-8b": qwen}, threshold=ThresholdSearch(sesoi=1.01, search_factor=2.0), **run)
    assert (wide.summary["sesoi"], wide.summary["search_factor"]) == (1.01, 2.0)
    assert (default.summary["sesoi"], default.summary["search_factor"]) == (0.05, 1.5)
    thresh = wide.tables["threshold"]
    assert thresh["threshold_premium"].isna().all() and not wide.tables["delta"]["reaches_sesoi"].any()
    ratio = thresh["search_up_to"] / default.tables["threshold"]["search_up_to"]
    assert ratio.to_list() == pytest.approx([2.0 / 1.5] * len(thresh))


def test_trace_premium_from_english_renderings(qwen, ledger):
    frame = ledger.to_pandas()
    nat = frame[frame["arm"] == "native"]
    english = {(i, s): f"Think step {i} and sample {s}. " * 2 for i, s in zip(nat["item"], nat["sample"], strict=True)}
    rend = pd.DataFrame([{"lang": "th", "item": i, "sample": s, "english": e} for (i, s), e in english.items()])
    table = trace_premiums(ledger, rend, tokenizers={"qwen3-8b": qwen}, resampling=Resampling(200, 2))

    def count(text: str) -> int:
        return len(qwen.tokenizer.encode(unicodedata.normalize("NFC", text), add_special_tokens=False).ids)

    expected = sum(count(t) for t in nat["text"]) / sum(count(e) for e in english.values())
    row = table.iloc[0]
    assert row["traces"] == 16 and row["items"] == 8 and row["r_trace"] == pytest.approx(expected)
    assert row["ci_low"] <= expected <= row["ci_high"]
    res = normalizer_audit(
        ledger,
        {"qwen3-8b": qwen},
        budgets=[8, 16],
        normalizers=Normalizers(renderings=rend),
        resampling=Resampling(100),
    )
    assert "trace" in set(res.tables["delta"]["normalizer"]) and "trace_premium" in res.tables


def test_malformed_renderings_are_one_line_errors(qwen, ledger, tmp_path):
    from mindcap_tok.audits.normalizer import load_renderings
    from mindcap_tok.errors import MindcapError

    good = pd.DataFrame({"lang": ["th", "th"], "item": [0, 0], "sample": [0, 1], "english": ["One step.", "Two."]})
    path = tmp_path / "r.csv"
    good.to_csv(path, index=False)
    loaded = load_renderings(path)
    assert loaded["lang"].tolist() == ["tha_Thai"] * 2 and loaded["item"].dtype == np.int64
    bad = [
        (good.assign(english=["One step.", None]), r"1 row\(s\) with no english \(first: row 2\)"),
        (good.assign(english=["  ", "Two."]), r"with no english \(first: row 1\)"),
        (good.assign(item=[0, 1.5]), r"whole numbers >= 0 in item; row 2 has 1.5"),
        (good.assign(sample=["a", 1]), r"whole numbers >= 0 in sample; row 1 has 'a'"),
    ]
    for frame, message in bad:
        with pytest.raises(MindcapError, match=message):
            trace_premiums(ledger, frame, tokenizers={"qwen3-8b": qwen}, resampling=Resampling(40))
        frame.to_csv(path, index=False)
        with pytest.raises(MindcapError, match=f"renderings {path}"):
            load_renderings(path)
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(MindcapError, match="cannot read renderings"):
        load_renderings(path)
