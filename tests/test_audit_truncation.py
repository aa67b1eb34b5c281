"""The truncation audit on hand-built ledgers: cap hits, completed vs truncated accuracy, never-emission, the
curve below the cap against decoding every prefix, Δ_L within the cap, the sentence, and the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from statsmodels.stats.proportion import proportion_confint

from ledger_factory import FILLER, make_record
from mindcap_tok.audits import AuditConfig, run_audits
from mindcap_tok.audits.truncation import cap_grid, truncation_audit
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.premiums import premium_table
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.schema import validate_records
from mindcap_tok.tasks.answers.integer import parse_answer

CAP = 24


def _native(tok, cap: int = CAP) -> list[dict]:
    """Five native Thai traces at cap 24 (gold 18): (A) right and short, (B) wrong and short, (C) its answer
    after the cap (cut: no answer line at all), (D) right early, then cut (retokenized), (E) no answer line."""
    late, early = FILLER * 4 + "\n#### 18\n", "#### 18\n" + FILLER * 4
    texts = ["#### 18\n", "#### 17\n", late, early, "ไม่มีคำตอบ\n"]
    recs = [make_record(tok, t, item=i, gold=18, cap=cap) for i, t in enumerate(texts)]
    recs[3]["retokenized"] = True
    return recs


def test_cap_hits_accuracy_split_and_never_emission(qwen):
    recs = _native(qwen)
    assert [r["finish_reason"] for r in recs] == ["stop", "stop", "length", "length", "stop"]
    res = truncation_audit(validate_records(recs), {"qwen3-8b": qwen}, budgets=[4, 8])
    (row,) = res.tables["cells"].to_dict(orient="records")
    # by hand: hits C, D; completed A, B, E of which A right; truncated D right at the cap, C not
    assert (row["records"], row["cap_hits"], row["completed"]) == (5, 2, 3)
    assert row["cap_hit"] == pytest.approx(2 / 5)
    assert row["acc_completed"] == pytest.approx(1 / 3)
    assert row["acc_truncated"] == pytest.approx(1 / 2)
    assert row["acc_at_cap"] == pytest.approx(2 / 5)
    assert row["never_emission"] == pytest.approx(2 / 5)  # C (cut before its answer) and E
    assert row["max_gain"] == pytest.approx(1 / 5)  # only C could still turn right
    assert (row["retokenized"], row["retokenized_cap_hits"]) == (1, 1)
    low, high = proportion_confint(2, 5, alpha=0.05, method="wilson")
    assert row["ci_low"] == pytest.approx(low, abs=1e-12) and row["ci_high"] == pytest.approx(high, abs=1e-12)
    assert row["sentence"].startswith(
        "the cap binds for 40% of native tha_Thai traces of qwen3-8b on mgsm at cap 24 (2 of 5, of which 1 "
        "retokenized: their length is re-encoded, not sampled); the most a higher cap could add is 20 points"
    )
    assert row["sentence"].endswith("Δ_L: no premium given, or no B with floor(rB) within the cap.")


def test_records_of_unknown_cut_status_are_counted_apart(qwen, tmp_path):
    """B and E logged in part (their thoughts not logged): neither completed nor cut; the interval reaches "all
    of them cut", and each could still turn right (both wrong at the cap). ``ledger info`` shows their share."""
    recs = _native(qwen)
    for i in (1, 4):
        recs[i].update(finish_reason="unknown", output_partial=True)
    res = truncation_audit(validate_records(recs), {"qwen3-8b": qwen}, budgets=[4, 8])
    (row,) = res.tables["cells"].to_dict(orient="records")
    assert (row["records"], row["cap_hits"], row["cut_unknown"], row["completed"]) == (5, 2, 2, 1)
    assert row["cap_hit"] == pytest.approx(2 / 5) and row["acc_completed"] == pytest.approx(1.0)
    assert row["max_gain"] == pytest.approx(3 / 5)  # C, and B and E if they were cut
    low = proportion_confint(2, 5, alpha=0.05, method="wilson")[0]
    high = proportion_confint(4, 5, alpha=0.05, method="wilson")[1]
    assert row["ci_low"] == pytest.approx(low, abs=1e-12) and row["ci_high"] == pytest.approx(high, abs=1e-12)
    assert "binds for 40% to 80% of" in row["sentence"] and "; 2 of unknown cut status" in row["sentence"]
    led = Ledger(tmp_path / "L")
    led.append(recs, qwen)
    (info,) = led.info().to_dict(orient="records")
    assert info["cap_hit"] == pytest.approx(2 / 5) and info["cut_unknown"] == pytest.approx(2 / 5)


def test_without_unknown_records_no_unknown_columns(qwen, tmp_path):
    res = truncation_audit(validate_records(_native(qwen)), {"qwen3-8b": qwen}, budgets=[4, 8])
    led = Ledger(tmp_path / "L")
    led.append(_native(qwen), qwen)
    assert "cut_unknown" not in res.tables["cells"] and "cut_unknown" not in led.info()


def test_a_partial_output_with_a_known_finish_reason_is_refused(qwen):
    rec = make_record(qwen, "#### 18\n", output_partial=True)
    with pytest.raises(MindcapError, match="finish_reason 'stop' of a partial output; its cut status is unknown"):
        validate_records([rec])


def test_curve_below_the_cap_equals_decoding_every_prefix(qwen):
    recs = _native(qwen)
    budgets = list(range(1, CAP + 1))
    curve = truncation_audit(validate_records(recs), {"qwen3-8b": qwen}, budgets=[*budgets, 99]).tables["curve"]
    assert curve["budget"].tolist() == budgets  # 99 is above the cap
    for b, acc in zip(curve["budget"], curve["accuracy"], strict=True):
        texts = [qwen.tokenizer.decode(r["output_ids"][:b], skip_special_tokens=True) for r in recs]
        assert acc == pytest.approx(sum(parse_answer(t) == 18 for t in texts) / len(recs)), b


def test_default_grid_is_the_eighths_of_the_cap():
    assert cap_grid(256) == [32, 64, 96, 128, 160, 192, 224, 256]
    assert cap_grid(20) == [3, 5, 8, 10, 13, 15, 18, 20]
    assert cap_grid(100, [64, 128, 512]) == [64, 100]


def test_delta_within_the_cap_and_its_sentence(qwen):
    """A and D open with "####", " ", "1", "8": at B = 3 they read 1, at floor(1.5·3) = 4 they read 18 (the
    prefix-only rule), so Δ_L(3) = 2/5. For B = 16 the scaled budget 24 is the cap; B = 20 (floor(1.5·20) = 30 >
    24) is left out."""
    recs = _native(qwen)
    n_a = len(recs[0]["output_ids"])
    assert n_a == 5 and len(recs[3]["output_ids"]) == CAP
    res = truncation_audit(
        validate_records(recs), {"qwen3-8b": qwen}, budgets=[3, 16, 20], premiums=premium_table({"tha_Thai": 1.5})
    )
    delta = res.tables["delta"]
    assert delta["budget"].tolist() == [3, 16] and delta["scaled_budget"].tolist() == [4, 24]
    assert delta["delta"].tolist() == pytest.approx([2 / 5, 0.0])
    sentence = res.tables["cells"]["sentence"].iloc[0]
    assert sentence.endswith(
        "between B = 3 and floor(rB) = 4 (r = 1.500) native accuracy rises by 40.0 points, the largest Δ_L within "
        "the cap."
    )


def test_choice_task_is_read_with_its_parser_and_native_arm(qwen):
    """Belebele records: gold "3"; a ``#### 3`` line is right, ``#### 2`` wrong; cut ones hit the cap."""
    recs = [
        make_record(qwen, text, item=i, gold="3", cap=CAP, task="belebele", lang="deu_Latn")
        for i, text in enumerate(["#### 3\n", "#### 2\n", FILLER * 4 + "\n#### 3\n"])
    ]
    res = truncation_audit(validate_records(recs), {"qwen3-8b": qwen}, premiums=premium_table({"deu_Latn": 1.25}))
    (row,) = res.tables["cells"].to_dict(orient="records")
    assert (row["task"], row["cap_hits"], row["acc_completed"], row["acc_truncated"]) == ("belebele", 1, 0.5, 0.0)
    assert "native accuracy rises by" in row["sentence"]  # belebele's native arm is "native"


def test_in_the_suite_and_the_cli(qwen, tmp_path):
    path = tmp_path / "L"
    Ledger(path).append(_native(qwen), qwen)
    suite = run_audits(path, ["truncation"], config=AuditConfig(tokenizers={"qwen3-8b": qwen}))
    from mindcap_tok.audits.suite import headline_rows

    (head,) = headline_rows(suite)
    assert head["key figure"] == (
        "cap hit by 2 of 5 traces (40.0%, 1 of them retokenized); accuracy at the cap 50.0% truncated vs "
        "33.3% completed"
    )
    out = tmp_path / "out"
    args = ["audit", "--ledger", str(path), "--out-dir", str(out), "--only", "truncation", "--premiums", "th=1.5"]
    res = CliRunner().invoke(cli, [*args, "--budgets", "3,16"])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "audit.json").read_text("utf-8"))
    (audit,) = data["audits"]
    assert audit["name"] == "truncation" and [r["budget"] for r in audit["tables"]["delta"]] == [3, 16]
    assert "the cap binds for 40%" in (out / "audit.md").read_text("utf-8")


def test_cli_one_line_errors(qwen, tmp_path):
    path, other = tmp_path / "L", tmp_path / "M"
    Ledger(path).append(_native(qwen), qwen)
    Ledger(other).append([make_record(qwen, "#### 1\n", gold="1", cap=CAP, task="my-task", arm="plain")], qwen)
    out = tmp_path / "out"
    for ledger, extra, message in [
        (path, ["--budgets", "0"], "'0' is not a valid budget"),
        (path, ["--premiums", "th=abc"], "premium must be a number, got 'abc'"),
        (path, ["--task", str(tmp_path / "none.toml")], "none.toml"),
        (other, [], "records of task 'my-task', which is not built in"),
    ]:
        args = ["audit", "--ledger", str(ledger), "--out-dir", str(out), "--only", "truncation", *extra]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2 and message in res.output, res.output
        assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert not out.exists()


def test_report_says_what_the_cap_did(qwen, tmp_path):
    """`report` on the five traces (plus translate-act ones that never hit the cap) writes truncation.csv and a
    sentence per population; Δ_L(3) with r = 1.5 is 2/5 as in the audit."""
    path = tmp_path / "L"
    other = [make_record(qwen, "#### 18\n", item=i, gold=18, cap=CAP, arm="translate-act") for i in range(5)]
    Ledger(path).append([*_native(qwen), *other], qwen)
    out = tmp_path / "rep"
    args = ["report", "--ledger", str(path), "--premiums", "th=1.5", "--budgets", "3,16", "--n-boot", "50"]
    res = CliRunner().invoke(cli, [*args, "--out-dir", str(out)])
    assert res.exit_code == 0, res.output
    text = (out / "report.md").read_text("utf-8")
    assert "## What the cap did" in text
    assert (
        "- The cap binds for 40% of native tha_Thai traces of qwen3-8b on mgsm at cap 24 (2 of 5, of which 1 "
        "retokenized: their length is re-encoded, not sampled); the most a higher cap could add is 20 points; "
        "between B = 3 and floor(rB) = 4 (r = 1.500) native accuracy rises by 40.0 points" in text
    )
    assert "- The cap binds for 0% of translate-act tha_Thai traces of qwen3-8b on mgsm at cap 24 (0 of 5); the" in text
    import pandas as pd

    cells = pd.read_csv(out / "truncation.csv")
    assert cells["cap_hits"].tolist() == [2, 0] and cells["acc_truncated"].isna().tolist() == [False, True]
