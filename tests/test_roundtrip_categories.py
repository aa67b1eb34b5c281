"""Two-level text categories (category, subcategory), as LiT's robustness subset: read from a texts file, and
reported per subcategory beside the categories; values worked by hand (tests/roundtrip_factory.py)."""

from __future__ import annotations

import json

import pytest

from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report
from mindcap_tok.roundtrip.texts import file_texts
from roundtrip_factory import write_run

ROWS = [
    {
        "id": "t1",
        "text": "She hinted that the meeting might run late.",
        "category": "pragmatics",
        "subcategory": "implicit",
    },
    {"id": "t2", "text": "He said it was fine, which it was not.", "category": "pragmatics", "subcategory": "implicit"},
    {
        "id": "t3",
        "text": "Would you be so kind as to pass the salt?",
        "category": "pragmatics",
        "subcategory": "social",
    },
    {"id": "t4", "text": "That gig was lit, no cap.", "category": "informal"},
]
ISSUES = {"t1": (0, 0, 0), "t2": (0, 0, 2), "t3": (0, 0, 0), "t4": (0, 0, 0)}  # MQM 100, 50, 100, 100


def test_subcategories_read_and_reported(tmp_path, qwen):
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    assert [(t.category, t.subcategory) for t in file_texts(path)] == [
        ("pragmatics", "implicit"),
        ("pragmatics", "implicit"),
        ("pragmatics", "social"),
        ("informal", None),
    ]
    judged = {("qwen3-8b", "qwen3-8b", t): ("7-good", *v) for t, v in ISSUES.items()}
    run = write_run(tmp_path / "r", qwen, None, judged, source={"texts": str(path)})
    rep = roundtrip_report(
        run, tmp_path / "rep", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, lid=False, n_boot=9)
    )
    m = rep.metrics.set_index(["by", "group"])
    assert m.loc[("subcategory", "pragmatics/implicit"), "pass_share"] == pytest.approx(0.5)
    assert m.loc[("subcategory", "pragmatics/implicit"), "mean_mqm"] == pytest.approx(75.0)
    assert m.loc[("subcategory", "pragmatics/social"), "pass_share"] == 1.0
    assert m.loc[("category", "pragmatics"), "pass_share"] == pytest.approx(2 / 3)
    assert {g for by, g in m.index if by == "subcategory"} == {"pragmatics/implicit", "pragmatics/social"}
    assert "## Per text subcategory" in (rep.out_dir / "report.md").read_text("utf-8")
