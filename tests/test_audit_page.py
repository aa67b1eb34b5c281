"""The audit folder's page: one section per audit run, in the suite's order, each with its status, key figure,
settings and every table of ``audit.json`` row for row; a skipped audit says why; no outside resource."""

from __future__ import annotations

import html
import json
import re

from click.testing import CliRunner

from mindcap_tok.cli.main import cli
from mindcap_tok.demo.ledger import build_demo


def test_the_audit_page_has_a_section_per_audit_with_its_tables(tmp_path, qwen, config):
    demo = build_demo(tmp_path / "demo", 2, n_items=4, k=1, tokenizer=qwen, data_dir=config.data_dir.value)
    args = ["audit", "--ledger", demo.ledger, "--out-dir", tmp_path / "aud", "--only", "parser,determinism"]
    args += ["--premiums", "de=1.56,th=2.55,sw=1.94", "--budgets", "64,128", "--n-boot", "50"]
    res = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    page = (tmp_path / "aud" / "audit.html").read_text("utf-8")
    data = json.loads((tmp_path / "aud" / "audit.json").read_text("utf-8"))
    sections = page.split('<section id="sections">', 1)[1].split("</section>", 1)[0]
    titles = re.findall(r"<h3>([^<]*\((\w+)\))</h3>\s*<table class=\"kv\">", sections)
    assert [name for _, name in titles] == [a["name"] for a in data["audits"]]
    for audit in data["audits"]:
        part = sections.split(f"({audit['name']})</h3>", 1)[1].split('<table class="kv">', 2)[1]
        if audit["status"] != "ok":
            assert f"skipped: {audit['reason']}" in html.unescape(part)
            continue
        for name, rows in audit["tables"].items():
            table = part.split(f'data-table="{name}"', 1)[1].split("</table>", 1)[0]
            assert table.count("<tr>") == len(rows) + 1, name  # the header and each row
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
