"""Raw MQM as LiT computes it (no floor, negative means) and judge replies whose class contradicts their issues,
on a hand-built run folder (records written with the run store's own writer); values worked by hand."""

from __future__ import annotations

import json

import pytest

from mindcap_tok.roundtrip import mqm_score, parse_spec
from mindcap_tok.roundtrip.mqm import inconsistency
from mindcap_tok.roundtrip.report import roundtrip_report
from mindcap_tok.roundtrip.store import HOP_SCHEMA, JUDGE_SCHEMA, RunStore, hop_file, judge_file

SEQ = "eng_Latn>deu_Latn>eng_Latn"
TEXTS = {f"t{i}": f"Sentence number {i} is about the weather in the village." for i in range(1, 5)}
# text -> (judge, classification, minor, major, critical); MQM = 100 - minor - 5 major - 25 critical
JUDGED = {
    "t1": ("judge-a", "1-nonsense", 0, 0, 0),  # 100, passes; nonsense without a major/critical issue: inconsistent
    "t2": ("judge-a", "10-perfect", 0, 0, 6),  # 100 - 150 = -50; perfect with critical issues: inconsistent
    "t3": ("judge-b", "2-severe distortion", 3, 2, 5),  # 100 - 3 - 10 - 125 = -38; consistent
    "t4": ("judge-b", "4-unreliable", 0, 0, 8),  # 100 - 200 = -100; consistent
}


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
    texts = tmp / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in TEXTS.items()), "utf-8")
    spec = parse_spec({"model": "qwen3-8b", "model_name": "qwen3-8b", "texts": str(texts), "max_tokens": 64,
                       "sequences": ["en>de>en"], "seed": 3})  # fmt: skip
    store = RunStore(tmp / "run", spec.identity(), spec.as_dict())
    end = qwen.tokenizer.token_to_id("<|im_end|>")
    for hop, (src, tgt) in ((1, ("eng_Latn", "deu_Latn")), (2, ("deu_Latn", "eng_Latn"))):
        rows = [{"model": "qwen3-8b", "text_id": tid, "sequence": SEQ, "hop": hop, "src_lang": src, "tgt_lang": tgt,
                 "seed": 1, "cap": 64, "template_id": "t", "prompt_ids": [1], "output_ids": [*qwen.encode(t), end],
                 "text": t, "finish_reason": "stop", "capped": False, "empty": False, "generator": "hand"}
                for tid, t in TEXTS.items()]  # fmt: skip
        store.write(hop_file(hop), rows, HOP_SCHEMA)
    rows = [
        {
            "model": "qwen3-8b",
            "text_id": tid,
            "sequence": SEQ,
            "attempt": 0,
            "judge_model": judge,
            "seed": 1,
            "cap": 64,
            "template_id": "j",
            "prompt_ids": [1],
            "output_ids": [2],
            "raw": "{}",
            "finish_reason": "stop",
            "parse": "strict",
            "mqm": max(0.0, mqm_score(mi, ma, cr)),
            "judge_score": 50.0,
            "classification": cls,
            "n_minor": mi,
            "n_major": ma,
            "n_critical": cr,
            "n_bad_severity": 0,
            "issues": "[]",
            "error": None,
            "generator": "hand",
        }
        for tid, (judge, cls, mi, ma, cr) in JUDGED.items()
    ]  # fmt: skip  (mqm stored floored, as old runs did)
    store.write(judge_file(0), rows, JUDGE_SCHEMA)
    return roundtrip_report(tmp / "run", tmp / "rep", tokenizers={"qwen3-8b": qwen}, flores=False, lid=False,
                            n_boot=50)  # fmt: skip


def test_report_mean_mqm_is_raw_and_can_be_negative(report):
    overall = report.metrics[report.metrics["by"] == "overall"].iloc[0]
    assert overall["mean_mqm"] == pytest.approx((100 - 50 - 38 - 100) / 4)  # -22, not the floored 25
    assert overall["pass_share"] == pytest.approx(1 / 4)  # only t1 (MQM 100) passes: unchanged by the floor
    assert report.samples.set_index("text_id")["mqm"].to_dict() == {"t1": 100.0, "t2": -50.0, "t3": -38.0,
                                                                    "t4": -100.0}  # fmt: skip


def test_report_counts_and_lists_inconsistent_replies_per_judge(report):
    assert report.summary["judge_consistency"] == {"judge-a": {"judged": 2, "inconsistent": 2},
                                                   "judge-b": {"judged": 2, "inconsistent": 0}}  # fmt: skip
    data = json.loads((report.out_dir / "report.json").read_text("utf-8"))
    listed = [(r["judge_model"], r["text_id"], r["classification"]) for r in data["inconsistent"]]
    assert listed == [("judge-a", "t1", "1-nonsense"), ("judge-a", "t2", "10-perfect")]
    md = (report.out_dir / "report.md").read_text("utf-8")
    assert "## Judge replies that contradict their issues" in md and "- judge-a: 2 of 2 judged" in md
    assert "- judge-b: 0 of 2 judged" in md and (report.out_dir / "inconsistent.csv").is_file()
