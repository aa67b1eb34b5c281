"""The split-half consistency check (Appendix J): worked by hand on four items, against a slow loop-over-items
reference on a simulated ledger, and through ``mindcap-tok consistency`` on a real ledger (same seed, same bytes)."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import early_late_records
from mindcap_tok.choices import MAX_SPLITS
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.scoring.score import Scores
from mindcap_tok.stats import Splits, consistency
from mindcap_tok.stats.premiums import required_budgets
from mindcap_tok.store.ledger import Ledger
from simulate import paper_like_design, simulate


def _scores(records: list[tuple], budgets: list[int]) -> Scores:
    """Scores of hand-made records (arm, item, sample, E or None, C): the replay score at B is C·1[E ≤ B]."""
    rec = pd.DataFrame(records, columns=["arm", "item", "sample", "emission", "correct"])
    rec = rec.assign(model="m", lang="deu_Latn", cap=4096, n_tokens=300, finish_reason="stop")
    rec["emission"] = rec["emission"].astype(np.float64)
    rows = [
        {**r, "budget": b, "score": int(r["correct"] == 1 and r["emission"] <= b)}
        for r in rec.to_dict(orient="records")
        for b in budgets
    ]
    by_budget = pd.DataFrame(rows)[["model", "arm", "lang", "cap", "item", "sample", "budget", "score"]]
    return Scores(by_budget, rec, "strict", tuple(budgets), {})


def test_four_items_worked_by_hand():
    # native: item 0 two samples at E=80, item 1 at 80, item 2 at 120, item 3 at 40, all correct; translate-act
    # (all early) must be ignored. r = 2, budgets 50 and 100, so G is needed at 50, 100 and 200.
    native = [("native", 0, 0, 80, 1), ("native", 0, 1, 80, 1), ("native", 1, 0, 80, 1)]
    native += [("native", 2, 0, 120, 1), ("native", 3, 0, 40, 1)]
    translate = [("translate-act", i, 0, 10, 1) for i in range(4)]
    scores = _scores(native + translate, [50, 100, 200])
    result = consistency(scores, {"de": 2.0}, budgets=[100, 50], splits=Splits(2, seed=0))
    # split 0 (seed 0) predicts from items {0, 2} and observes {1, 3}; split 1 (seed 1): {0, 1} and {2, 3}
    split = result.splits.set_index("split")
    assert list(split["seed"]) == [0, 1] and list(split["n_predict"]) == [2, 2]
    # split 0: G on {0,2} (80, 80, 120): G(50)=0, G(100)=2/3, G(200)=1 -> predicted Δ(50)=2/3, Δ(100)=1/3;
    # acc on {1,3} (80, 40): 1/2, 1, 1 -> observed 1/2, 0. MAE (1/6 + 1/3)/2 = 1/4; both peak at 50.
    assert split.at[0, "mae"] == pytest.approx(1 / 4) and split.at[0, "max_abs_error"] == pytest.approx(1 / 3)
    assert (split.at[0, "argmax_predicted"], split.at[0, "argmax_observed"]) == (50, 50)
    # split 1: G on {0,1} (80, 80, 80): 0, 1, 1 -> predicted 1, 0; acc on {2,3} (120, 40): 1/2, 1/2, 1 ->
    # observed 0, 1/2. MAE (1 + 1/2)/2 = 3/4; predicted peak 50, observed 100.
    assert split.at[1, "mae"] == pytest.approx(3 / 4)
    assert (split.at[1, "argmax_predicted"], split.at[1, "argmax_observed"]) == (50, 100)
    cell = result.cells.iloc[0]
    assert len(result.cells) == 1 and cell["lang"] == "deu_Latn" and cell["n_items"] == 4 and cell["premium"] == 2
    assert cell["mae"] == pytest.approx(1 / 2) and cell["mae_sd"] == pytest.approx(math.sqrt(1 / 8))
    assert (cell["mae_min"], cell["mae_max"]) == pytest.approx((1 / 4, 3 / 4))
    assert cell["peak_agree"] == 1 and cell["peak_agree_share"] == pytest.approx(1 / 2)
    assert result.budgets == (50, 100) and result.as_dict()["seed"] == 0


def test_one_split_has_no_sd_and_bad_settings_are_refused():
    scores = _scores([("native", i, 0, 40 + 50 * i, 1) for i in range(4)], [50, 100, 200])
    one = consistency(scores, {"de": 2.0}, budgets=[50, 100], splits=Splits(1, seed=3))
    assert one.cells["splits"].iloc[0] == 1 and np.isnan(one.cells["mae_sd"].iloc[0])
    for n in (0, MAX_SPLITS + 1, 10**12):  # refused at once, before any split is drawn
        with pytest.raises(MindcapError, match=f"^splits must be a whole number from 1 to 1,000, got {n}$"):
            Splits(n)
    assert Splits(MAX_SPLITS).n == 1000
    with pytest.raises(MindcapError, match="no scores at budget"):
        consistency(scores, {"de": 3.0}, budgets=[50, 100], splits=Splits(1))
    with pytest.raises(MindcapError, match="split seed must be a whole number of at least 0"):
        Splits(2, seed=-1)
    with pytest.raises(MindcapError, match="cell m/native/deu_Latn has 1 item: a split-half check needs at least two"):
        consistency(_scores([("native", 0, 0, 40, 1)], [50, 100]), {"de": 2.0}, budgets=[50], splits=Splits(1))


def _g(records: list[dict], items: set, t: int) -> float:
    """G(t) over the records of ``items``: the share correct with E ≤ t."""
    hits = [x["correct"] == 1 and x["emission"] <= t for x in records if x["item"] in items]
    return sum(hits) / len(hits)


def _acc(scored: list[dict], items: set, budget: int) -> float:
    """The mean strict score at ``budget`` over the records of ``items``."""
    vals = [x["score"] for x in scored if x["item"] in items and x["budget"] == budget]
    return sum(vals) / len(vals)


def _reference(by_record: pd.DataFrame, by_budget: pd.DataFrame, premiums: dict, budgets, n: int, seed: int):
    """Slow reference: per language and split, loop over the items of each half (no library code)."""
    out = {}
    for lang in sorted(by_record["lang"].unique()):
        rec = [r for r in by_record.to_dict(orient="records") if r["lang"] == lang and r["arm"] == "native"]
        sco = [r for r in by_budget.to_dict(orient="records") if r["lang"] == lang and r["arm"] == "native"]
        r = premiums[lang]
        items = sorted({x["item"] for x in rec})
        maes, agree = [], 0
        for s in range(n):
            perm = list(np.random.default_rng(seed + s).permutation(items))
            first, second = set(perm[: len(items) // 2]), set(perm[len(items) // 2 :])
            pred = [_g(rec, first, math.floor(r * b)) - _g(rec, first, b) for b in budgets]
            obs = [_acc(sco, second, math.floor(r * b)) - _acc(sco, second, b) for b in budgets]
            maes.append(sum(abs(p - o) for p, o in zip(pred, obs, strict=True)) / len(budgets))
            agree += pred.index(max(pred)) == obs.index(max(obs))
        out[lang] = (statistics.mean(maes), statistics.stdev(maes), min(maes), max(maes), agree)
    return out


def test_matches_a_slow_reference_on_a_simulated_ledger():
    design = paper_like_design(n_items=41, k=3)  # odd: the predicting half has 20 items, the observed 21
    data = simulate(design, seed=5)
    budgets = [64, 128, 256, 512]
    premiums = {"deu_Latn": 1.5, "tha_Thai": 2.5, "swh_Latn": 1.75}  # exact in binary: floor(r·B) as the loop's
    need = required_budgets(budgets, premiums.values())
    by_record, by_budget = data.by_record(), data.by_budget(need)
    result = consistency(
        Scores(by_budget, by_record, "strict", tuple(need), {}), premiums, budgets=budgets, splits=Splits(4, 11)
    )
    ref = _reference(by_record, by_budget, premiums, budgets, 4, 11)
    cells = result.cells.set_index("lang")
    assert sorted(cells.index) == sorted(ref) and (result.splits["n_predict"] == 20).all()
    for lang, (mean, sd, low, high, agree) in ref.items():
        got = cells.loc[lang]
        assert (got["mae"], got["mae_sd"], got["mae_min"], got["mae_max"]) == pytest.approx((mean, sd, low, high))
        assert got["peak_agree"] == agree
    assert (cells["mae"] > 0).all()  # held-out halves differ: the check is not the replay identity


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    """Native Thai: items 0,1 answer correctly within 30 tokens; item 2 correctly and item 3 once correctly
    between 30 and 76 tokens (see ledger_factory.early_late_records)."""
    root = tmp_path_factory.mktemp("ledger")
    Ledger(root).append(early_late_records(qwen), qwen)
    return root


def _run(ledger, *extra: str):
    args = ["consistency", "--ledger", str(ledger), "--premiums", "th=3", "--budgets", "30", *extra]
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_cli_worked_by_hand_and_same_seed_same_bytes(ledger, tmp_path):
    res = _run(ledger, "--splits", "2", "--seed", "0", "--format", "json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    # Δ(30) on a half H = (late-correct samples in H) / (2·|H|): item 2 has 2, item 3 has 1.
    # seed 0: predict {0,2} -> 2/4, observe {1,3} -> 1/4, error 1/4; seed 1: {0,1} -> 0, {2,3} -> 3/4, error 3/4
    maes = [row["mae"] for row in out["splits"]]
    assert maes == pytest.approx([1 / 4, 3 / 4]) and out["units"] == "fractions" and out["seed"] == 0
    cell = out["cells"][0]
    assert cell["lang"] == "tha_Thai" and cell["mae"] == pytest.approx(1 / 2) and cell["peak_agree"] == 2
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for path in (first, second):
        assert _run(ledger, "--splits", "3", "--seed", "7", "--format", "json", "--out", str(path)).exit_code == 0
    assert first.read_bytes() == second.read_bytes() and json.loads(first.read_text())["seed"] == 7


def test_cli_table_shows_points_and_bad_splits_is_one_line(ledger):
    table = _run(ledger, "--splits", "2")
    assert table.exit_code == 0, table.output
    assert "MAE in points" in table.output and "2 splits from seed 0" in table.output
    md = _run(ledger, "--splits", "2", "--format", "md")
    assert md.exit_code == 0 and " 50.00 |" in md.output and " 35.36 |" in md.output  # 1/2, sqrt(1/8): points
    bad = _run(ledger, "--splits", "0")
    assert bad.exit_code == 2 and "--splits" in bad.output and "Traceback" not in bad.output
    negative = _run(ledger, "--seed", "-1")
    assert negative.exit_code == 2 and negative.output.count("\n") == 1 and "split seed" in negative.output
