"""Nothing is reported beyond a cell's cap where the data cannot speak: Δ_L(B) there is null with exact bounds
when the cap cut traces, exact and marked when it cut none; hypotheses there are not estimable; figures stop at
the cap and draw it; a request whose budgets all exceed every cap says so."""

from __future__ import annotations

from fractions import Fraction

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from ledger_factory import make_record
from mindcap_tok import Resampling
from mindcap_tok.report import budget_figures, write_budget_report
from mindcap_tok.scoring import score_ledger
from mindcap_tok.stats.cap import BOUNDS, EXACT, WITHIN, all_beyond_caps
from mindcap_tok.stats.curves import delta_table, sweep
from mindcap_tok.stats.family import FamilyTests, Hypothesis, run_family
from mindcap_tok.stats.grid import accuracy_grid

R = Fraction(153, 100)  # floor(r·32) = 48 (the cap), floor(r·40) = 61 (beyond it)
BUDGETS = [32, 40, 48, 61]
#: per item of the German cell (cap 48, 8 items): correct at 32, 40, 48 (= 61: nothing decoded past the cap)
DEU = {32: [0, 0, 0, 0, 0, 1, 1, 0], 40: [0, 0, 0, 0, 0, 1, 1, 1], 48: [1, 0, 0, 0, 0, 1, 1, 1]}
#: items 0-4 cut by the cap (5 of 8)
DEU_FINISH = ["length"] * 5 + ["stop"] * 3


def _frames(finish_by_lang: dict[str, list[str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, recs = [], []
    for lang, finish in finish_by_lang.items():
        for item in range(8):
            for b in BUDGETS:
                score = DEU[min(b, 48)][item]
                rows.append(("m", "native", lang, item, 0, b, score, 48))
            recs.append(("m", "native", lang, item, 0, 48, finish[item]))
    by_budget = pd.DataFrame(rows, columns=["model", "arm", "lang", "item", "sample", "budget", "score", "cap"])
    cols = ["model", "arm", "lang", "item", "sample", "cap", "finish_reason"]
    return by_budget, pd.DataFrame(recs, columns=cols)


@pytest.fixture(scope="module")
def swept():
    by_budget, by_record = _frames(
        {"deu_Latn": DEU_FINISH, "fra_Latn": ["stop"] * 8, "tha_Thai": ["unknown"] * 2 + ["length"] + ["stop"] * 5}
    )
    grid = accuracy_grid(by_budget, records=by_record)
    premiums = {lang: R for lang in ("deu_Latn", "fra_Latn", "tha_Thai")}
    result = sweep(grid, premiums, budgets=[32, 40], resampling=Resampling(200, 0))
    return result.rows.set_index(["lang", "budget"]), result.peaks.set_index("lang"), by_budget, by_record


def test_a_scaled_budget_beyond_a_cap_that_cut_traces_has_bounds_and_no_estimate(swept):
    rows = swept[0]
    within, beyond = rows.loc[("deu_Latn", 32)], rows.loc[("deu_Latn", 40)]
    assert within["scaled_budget"] == 48 and within["cap_status"] == WITHIN
    assert within["delta"] == pytest.approx(4 / 8 - 2 / 8) and not within["beyond_cap"]
    assert beyond["scaled_budget"] == 61 and beyond["beyond_cap"] and beyond["cap_status"] == BOUNDS
    for col in ("delta", "acc_native_scaled", "ci_low", "ci_high", "band_low", "band_high"):
        assert np.isnan(beyond[col]), col
    assert beyond["cut_share"] == pytest.approx(5 / 8)
    assert beyond["delta_lower"] == pytest.approx(4 / 8 - 3 / 8)  # acc(cap) − acc(40)
    assert beyond["delta_upper"] == pytest.approx(4 / 8 + 5 / 8 - 3 / 8)  # acc(cap) + c − acc(40)
    assert swept[1].loc["deu_Latn", "peak_budget"] == 32  # the bounded budget is no peak


def test_a_budget_itself_beyond_the_cap_has_no_accuracy_and_symmetric_bounds():
    """B = 61 past cap 48 with 5 of 8 cut: acc(61) and acc(floor(r·61) = 93) are both unknown within
    [acc(48), acc(48) + 5/8], so Δ lies in [−5/8, 5/8] and acc_native is not shown."""
    by_budget, by_record = _frames({"deu_Latn": DEU_FINISH})
    by_budget = pd.concat([by_budget, by_budget[by_budget["budget"] == 61].assign(budget=93)], ignore_index=True)
    grid = accuracy_grid(by_budget, records=by_record)
    for rows in (
        sweep(grid, {"deu_Latn": R}, budgets=[32, 61], resampling=Resampling(200, 0)).rows,
        delta_table(grid, {"deu_Latn": R}, budgets=[32, 61]),
    ):
        past = rows.set_index("budget").loc[61]
        assert np.isnan(past["acc_native"]) and np.isnan(past["delta"]) and past["cap_status"] == BOUNDS
        assert (past["delta_lower"], past["delta_upper"]) == (pytest.approx(-5 / 8), pytest.approx(5 / 8))
        assert rows.set_index("budget").loc[32, "acc_native"] == pytest.approx(2 / 8)  # within: measured


def test_beyond_a_cap_that_cut_nothing_the_value_is_exact_and_marked(swept):
    beyond = swept[0].loc[("fra_Latn", 40)]
    assert beyond["cap_status"] == EXACT and beyond["cut_share"] == 0
    assert beyond["delta"] == pytest.approx(4 / 8 - 3 / 8)
    assert beyond["delta_lower"] == beyond["delta_upper"] == pytest.approx(1 / 8)


def test_unknown_cut_status_counts_as_cut_in_the_bound(swept):
    beyond = swept[0].loc[("tha_Thai", 40)]
    assert beyond["cap_status"] == BOUNDS and beyond["cut_share"] == pytest.approx(3 / 8)
    assert beyond["delta_upper"] == pytest.approx(4 / 8 + 3 / 8 - 3 / 8)


def test_delta_table_follows_the_same_rule(swept):
    _, _, by_budget, by_record = swept
    premiums = {lang: R for lang in ("deu_Latn", "fra_Latn", "tha_Thai")}
    table = delta_table(accuracy_grid(by_budget, records=by_record), premiums, budgets=[32, 40])
    deu = table[table["lang"] == "deu_Latn"].set_index("budget")
    assert deu.loc[32, "delta"] == pytest.approx(0.25) and np.isnan(deu.loc[40, "delta"])
    assert deu.loc[40, "delta_upper"] == pytest.approx(6 / 8)
    # without the records nothing is known about cuts: every capped cell is bounded beyond its cap
    bare = delta_table(by_budget, premiums, budgets=[40]).set_index("lang")
    assert np.isnan(bare.loc["fra_Latn", "delta"]) and bare.loc["fra_Latn", "delta_upper"] == pytest.approx(1 + 1 / 8)


def test_a_hypothesis_beyond_a_cap_that_cut_traces_is_not_estimable(swept):
    _, _, by_budget, by_record = swept
    grid = accuracy_grid(by_budget, records=by_record)
    hyps = [
        Hypothesis.from_dict({"id": "beyond", "kind": "delta", "model": "m", "langs": ["deu_Latn"], "budget": 40}),
        Hypothesis.from_dict({"id": "within", "kind": "delta", "model": "m", "langs": ["deu_Latn"], "budget": 32}),
        Hypothesis.from_dict({"id": "exact", "kind": "delta", "model": "m", "langs": ["fra_Latn"], "budget": 40}),
    ]
    premiums = {("m", "deu_Latn"): R, ("m", "fra_Latn"): R}
    table = run_family(grid, hyps, premiums=premiums, tests=FamilyTests(n_boot=2000)).table.set_index("id")
    assert table.loc["beyond", "decision"] == "not estimable" and np.isnan(table.loc["beyond", "estimate"])
    assert table.loc["within", "estimate"] == pytest.approx(25.0)
    assert table.loc["exact", "estimate"] == pytest.approx(12.5) and table.loc["exact", "decision"] != "not estimable"


def test_budgets_all_beyond_every_cap_give_one_warning_line():
    line = all_beyond_caps([64, 128, 192, 256], [48, 48.0])
    assert line is not None and "\n" not in line and "48" in line
    assert all_beyond_caps([32, 64], [48]) is None and all_beyond_caps([64], [None]) is None


def test_the_report_stops_every_curve_at_the_cap_and_draws_it(tmp_path, qwen, monkeypatch):
    """A real ledger cut at cap 48: no curve point beyond 48, a dashed cap line, the parser named on the axis,
    and the Sweep table marks the bounded row."""
    filler = "We add the numbers and check once more. " * 20
    records = []
    for item in range(8):
        text = f"{filler}#### {item + 10}\n" if item < 5 else f"#### {item + 10}\n"
        records.append(make_record(qwen, text, item=item, gold=item + 10, cap=48))
    assert sum(r["finish_reason"] == "length" for r in records) == 5
    scores = score_ledger(pd.DataFrame(records), qwen, budgets=BUDGETS)
    caught = {}
    monkeypatch.setattr(budget_figures, "save_figure", lambda fig, path, **kw: caught.setdefault(path.name, fig))
    out = tmp_path / "report"
    write_budget_report(scores, {"tha_Thai": R}, out_dir=out, budgets=[32, 40], resampling=Resampling(200, 0))
    ax = caught["native_curves.png"].axes[0]  # the curve panel (a strip of peak spans may lie under it)
    drawn = [line for line in ax.get_lines() if line.get_label() == "th"]
    assert drawn and max(drawn[0].get_xdata()) <= 48
    caps = [line for line in ax.get_lines() if line.get_label() == "_cap"]
    assert [list(line.get_xdata()) for line in caps] == [[48, 48]]
    assert "strict parser" in ax.get_ylabel()
    sweep_csv = pd.read_csv(out / "sweep.csv").set_index("budget")
    assert np.isnan(sweep_csv.loc[40, "delta"]) and sweep_csv.loc[40, "cap_status"] == BOUNDS
    report = (out / "report.md").read_text("utf-8")
    assert "†" in report and "delta_bounds" in report


def test_the_truncation_audit_counts_unknown_cut_status_apart_and_as_possibly_cut(qwen):
    """Three traces at cap 24: right and stopped; wrong with a log that does not say whether the cap cut it; cut
    before its answer. By hand: one cap hit, one unknown, and the most a higher cap could add is 2 of 3."""
    from ledger_factory import FILLER
    from mindcap_tok.audits.truncation import truncation_tables

    texts = ["#### 18\n", "#### 17\n", FILLER * 4 + "\n#### 18\n"]
    recs = [make_record(qwen, t, item=i, gold=18, cap=24) for i, t in enumerate(texts)]
    recs[1]["finish_reason"] = "unknown"  # as an importer stores a harness log that does not say
    assert [r["finish_reason"] for r in recs] == ["stop", "unknown", "length"]
    scores = score_ledger(pd.DataFrame(recs), qwen, budgets=[12, 24])
    (row,) = truncation_tables(scores, natives="native", budgets=[12]).tables["cells"].to_dict(orient="records")
    assert (row["cap_hits"], row["cut_unknown"], row["completed"]) == (1, 1, 1)
    assert row["max_gain"] == pytest.approx(2 / 3)
    assert "the cap binds for 33% to 67% of" in row["sentence"]  # 1 of 3 cut, up to 2 of 3 with the unknown one
    assert "1 of unknown cut status" in row["sentence"]


def test_the_cli_warns_once_and_sweeps_to_bounds_beyond_a_run_cap(tmp_path, qwen):
    """A ledger cut at cap 48 (5 of 8 German traces cut before their answer, 3 answered at once): `score` at the
    README's budgets warns in one line; `sweep` at B = 40 (floor(1.53·40) = 61 > 48) gives no Δ_L, and the bounds
    [3/8 − 3/8, 3/8 + 5/8 − 3/8]."""
    import json

    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli
    from mindcap_tok.ingest.jsonl import import_jsonl

    filler = "We add the numbers and check once more. " * 20
    rows = [
        make_record(qwen, (filler if item < 5 else "") + f"#### {item + 10}\n", arm=arm, lang="deu_Latn", item=item,
                    gold=item + 10, cap=48)
        for arm in ("native", "translate-act") for item in range(8)
    ]  # fmt: skip
    path = tmp_path / "gen.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    import_jsonl(path, tmp_path / "L", tokenizer=qwen)
    runner = CliRunner()
    score = runner.invoke(cli, ["score", "--ledger", str(tmp_path / "L"), "--budgets", "64,128,192,256"])
    assert score.exit_code == 0
    warnings = [line for line in score.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "exceeds every cap" in warnings[0] and "48" in warnings[0]
    args = ["sweep", "--ledger", str(tmp_path / "L"), "--premiums", "deu_Latn=1.53", "--budgets", "32,40"]
    swept = runner.invoke(cli, [*args, "--n-boot", "200", "--format", "json"])
    assert swept.exit_code == 0, swept.output
    rows_out = {r["budget"]: r for r in json.loads(swept.stdout)["rows"]}
    assert rows_out[32]["scaled_budget"] == 48 and rows_out[32]["delta"] == 0
    beyond = rows_out[40]
    assert beyond["scaled_budget"] == 61 and beyond["delta"] is None and beyond["ci_low"] is None
    assert beyond["delta_lower"] == pytest.approx(0) and beyond["delta_upper"] == pytest.approx(5 / 8)
    assert beyond["cap_status"] == BOUNDS and json.loads(swept.stdout)["parser"] == "strict"


def test_the_subcdf_is_not_identified_past_a_cap_whose_traces_may_have_been_cut():
    """G(t) beyond the cap is refused for a trace the cap cut and for one whose log does not say; a cell whose
    traces all completed reads G there as at the cap."""
    from mindcap_tok.errors import BadInputError
    from mindcap_tok.stats.subcdf import subcdf_grid

    def records(finish: str) -> pd.DataFrame:
        return pd.DataFrame(
            {"model": "m", "arm": "native", "lang": "deu_Latn", "item": [0, 1], "sample": 0, "cap": 48,
             "finish_reason": ["stop", finish], "emission": [10.0, np.nan], "correct": [1, 0]}
        )  # fmt: skip

    for finish in ("length", "unknown"):
        with pytest.raises(BadInputError, match="not identified for t > 48"):
            subcdf_grid(records(finish), [32, 61])
    grid = subcdf_grid(records("stop"), [32, 61])
    assert grid.accuracy().tolist() == [[0.5, 0.5]] and grid.cut_share.tolist() == [0.0]


def test_rows_of_a_cell_without_a_cap_are_not_marked_beyond_it():
    """A capped cell within its cap beside an uncapped one (beyond_cap NaN there): nothing is beyond a cap."""
    from mindcap_tok.report.budget_report import marked_bounds

    rows = pd.DataFrame(
        {"lang": ["a", "b"], "delta": [1.0, 2.0], "cap_status": [WITHIN, np.nan], "beyond_cap": [False, np.nan]}
        | {"delta_lower": [np.nan] * 2, "delta_upper": [np.nan] * 2}
    )
    assert list(marked_bounds(rows).columns) == ["lang", "delta"]
