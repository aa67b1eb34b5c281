"""The round-trip report's page: every chain's hops in order with their texts, and
beside them each judge's verdict and the issues it listed, as the run's judge records hold them; one file that
names no outside resource, its figures inlined."""

from __future__ import annotations

import html
import re

from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report
from roundtrip_factory import SEQ, write_run

TEXTS = {"t1": "Janet has 16 eggs.", "t2": "The sun is hot."}
ISSUES = [
    {"severity": "major", "description": "the sun became the moon"},
    {"severity": "minor", "description": "tense"},
]


def test_the_page_shows_each_chain_beside_its_judges_issues(tmp_path, qwen):
    judged = {
        ("qwen3-8b", "judge-a", "t1"): ("10-perfect", 0, 0, 0),
        ("qwen3-8b", "judge-a", "t2"): ("7-good", 1, 1, 0),
    }
    outputs = {(1, "t2"): "Die Sonne ist heiß.", (2, "t2"): "The moon is hot."}
    run = write_run(
        tmp_path,
        qwen,
        TEXTS,
        judged,
        judges=("judge-a",),
        outputs=outputs,
        issues={("qwen3-8b", "judge-a", "t2"): ISSUES},
        capped={(1, "t2")},
    )
    opts = ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, lid=False, n_boot=50)
    rep = roundtrip_report(run, tmp_path / "rep", options=opts)
    assert "report.html" in rep.files
    page = (tmp_path / "rep" / "report.html").read_text("utf-8")
    chains = page.split('<details class="chain"')[1:]
    assert len(chains) == 2
    for tid, text in TEXTS.items():  # each chain starts with the text the run was given, before its first hop
        c = next(c for c in chains if f"· {tid} ·" in c)
        first = re.search(r"<h4>(.*?)</h4>\s*<pre class=\"hop-text[^\"]*\">(.*?)</pre>", c, re.S)
        assert first is not None and first.groups() == ("source: eng_Latn", html.escape(text))
    t2 = next(c for c in chains if f"qwen3-8b · t2 · {html.escape(SEQ)}" in c)
    hops = re.findall(r"<h4>hop (\d): (\w+) → (\w+) (.*?)</h4>\s*<pre class=\"hop-text\">(.*?)</pre>", t2, re.S)
    assert [h[:3] + h[4:] for h in hops] == [
        ("1", "eng_Latn", "deu_Latn", "Die Sonne ist heiß."),
        ("2", "deu_Latn", "eng_Latn", "The moon is hot."),
    ]
    # the cap mark on exactly the hop the factory capped (hop 1 of t2), on no hop of t1
    assert ["cut by the cap" in h[3] for h in hops] == [True, False]
    assert "cut by the cap" not in next(c for c in chains if "· t1 ·" in c)
    items = re.findall(r"<li>(.*?)</li>", t2)
    assert items == ["major: the sun became the moon", "minor: tense"]
    assert "<th>mqm</th><td>94.0</td>" in t2  # 100 − 1 minor − 5·1 major
    t1 = next(c for c in chains if "· t1 ·" in c)
    assert "no issues listed" in t1
    assert 'src="data:image/png;base64,' in page and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
