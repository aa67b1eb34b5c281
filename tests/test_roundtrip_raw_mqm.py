"""Raw MQM as LiT computes it (no floor, negative means) and judge replies whose class contradicts their issues,
on a hand-built run folder (tests/roundtrip_factory.py); values worked by hand."""

from __future__ import annotations

import json

import pytest

from mindcap_tok.roundtrip import mqm_score
from mindcap_tok.roundtrip.mqm import inconsistency
from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report
from roundtrip_factory import write_run

TEXTS = {f"t{i}": f"Sentence number {i} is about the weather in the village." for i in range(1, 5)}
# judge-a: text -> (classification, minor, major, critical); MQM = 100 - minor - 5 major - 25 critical
JUDGED = {
    "t1": ("1-nonsense", 0, 0, 0),  # 100, passes; nonsense without a major/critical issue: inconsistent
    "t2": ("10-perfect", 0, 0, 6),  # 100 - 150 = -50; perfect with critical issues: inconsistent
    "t3": ("2-severe distortion", 3, 2, 5),  # 100 - 3 - 10 - 125 = -38; consistent
    "t4": ("4-unreliable", 0, 0, 8),  # 100 - 200 = -100; consistent
}
GOOD = ("7-good", 1, 0, 0)  # judge-b's reply to every text: 99, consistent


def test_mqm_is_raw_and_not_floored():
    assert mqm_score(10, 10, 10) == -210.0  # 100 - 10 - 50 - 250
    assert mqm_score(0, 0, 5) == -25.0
    assert mqm_score(0, 4, 0) == 80.0


def test_inconsistency_rule():
    assert inconsistency("1-nonsense", 0, 0) == "classed '1-nonsense' with no major or critical issue"
    assert inconsistency("3-failed gist", 0, 0) is not None
    assert inconsistency("2-severe distortion", 1, 0) is None  # a major issue: consistent
    assert inconsistency("1-nonsense", 0, 1) is None
    assert inconsistency("10-perfect", 3, 0) is None  # minor/major issues do not contradict "perfect" here
    assert inconsistency("10-perfect", 0, 2) == "classed '10-perfect' with 2 critical issues"
    assert inconsistency("7-good", 0, 0) is None and inconsistency(None, 0, 0) is None


@pytest.fixture(scope="module")
def report(tmp_path_factory, qwen):
    tmp = tmp_path_factory.mktemp("raw")
    judged = {("qwen3-8b", "judge-a", t): v for t, v in JUDGED.items()}
    judged |= {("qwen3-8b", "judge-b", t): GOOD for t in TEXTS}
    run = write_run(tmp, qwen, TEXTS, judged, judges=("judge-a", "judge-b"))
    return roundtrip_report(
        run, tmp / "rep", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, lid=False, n_boot=50)
    )


def test_report_mean_mqm_is_raw_and_can_be_negative(report):
    overall = report.metrics[report.metrics["by"] == "overall"].set_index("judge_model")
    assert overall.loc["judge-a", "mean_mqm"] == pytest.approx((100 - 50 - 38 - 100) / 4)  # -22, not floored: 25
    assert overall.loc["judge-a", "pass_share"] == pytest.approx(1 / 4)  # only t1 (MQM 100) passes, as before
    assert overall.loc["judge-b", "mean_mqm"] == 99.0 and overall.loc["judge-b", "pass_share"] == 1.0
    a = report.samples[report.samples["judge_model"] == "judge-a"]
    assert a.set_index("text_id")["mqm"].to_dict() == {"t1": 100.0, "t2": -50.0, "t3": -38.0, "t4": -100.0}


def test_report_counts_and_lists_inconsistent_replies_per_judge(report):
    assert report.summary["judge_consistency"] == {
        "judge-a": {"judged": 4, "inconsistent": 2},
        "judge-b": {"judged": 4, "inconsistent": 0},
    }
    data = json.loads((report.out_dir / "report.json").read_text("utf-8"))
    listed = [(r["judge_model"], r["text_id"], r["classification"]) for r in data["inconsistent"]]
    assert listed == [("judge-a", "t1", "1-nonsense"), ("judge-a", "t2", "10-perfect")]
    md = (report.out_dir / "report.md").read_text("utf-8")
    assert "## Judge replies that contradict their issues" in md and "- judge-a: 2 of 4 judged" in md
    assert "- judge-b: 0 of 4 judged" in md and (report.out_dir / "inconsistent.csv").is_file()
