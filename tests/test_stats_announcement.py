"""The announcement instrument gate (Appendix I): median-length reduction per cell, and nulls in cells below the
gate reported as uninformative; worked by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.announcement import announcement_gate, gate_decisions
from mindcap_tok.stats.protocol import load_protocol
from mindcap_tok.store.ledger import Ledger

# output lengths (tokens) per (arm, announced): native 60 -> 120 median (reduction 0.5), translate 108 -> 120 (0.1)
LENGTHS = {
    ("native", 128): [50, 60, 70],
    ("native", 2048): [110, 120, 130],
    ("translate-act", 128): [100, 108, 116],
    ("translate-act", 2048): [110, 120, 130],
}


def _by_record():
    rows = [
        {"model": "m", "arm": arm, "lang": "tha_Thai", "cap": 2048, "announced": a, "n_tokens": n}
        for (arm, a), ns in LENGTHS.items()
        for n in ns
    ]
    rows.append({"model": "m", "arm": "native", "lang": "tha_Thai", "cap": 2048, "announced": None, "n_tokens": 9})
    return pd.DataFrame(rows)


def test_gate_by_hand():
    out = announcement_gate(_by_record()).set_index("arm")
    assert out.loc["native", ["tightest", "loosest"]].tolist() == [128, 2048]
    assert out.loc["native", "median_tightest"] == 60 and out.loc["native", "median_loosest"] == 120
    assert out.loc["native", "reduction"] == pytest.approx(0.5) and out.loc["native", "clears_gate"]
    assert out.loc["translate-act", "reduction"] == pytest.approx(0.1)
    assert not out.loc["translate-act", "clears_gate"]
    assert announcement_gate(_by_record(), gate=0.05).set_index("arm").loc["translate-act", "clears_gate"]


def test_retained_null_below_the_gate_is_uninformative():
    decisions = pd.DataFrame(
        {"id": ["nat", "tr", "tr-rej", "delta"], "decision": ["retain", "retain", "reject", "retain"]}
    )
    terms = {
        "nat": [{"model": "m", "arm": "native", "lang": "tha_Thai"}],
        "tr": [{"model": "m", "arm": "translate-act", "lang": "tha_Thai"}],
        "tr-rej": [{"model": "m", "arm": "translate-act", "lang": "tha_Thai"}],
    }
    out = gate_decisions(decisions, terms=terms, gate_table=announcement_gate(_by_record())).set_index("id")
    assert out["clears_gate"].tolist() == [True, False, False, None]
    assert out["informative"].tolist() == [True, False, True, True]  # only a retained null below the gate


def test_gate_is_a_protocol_key(tmp_path):
    path = tmp_path / "p.toml"
    base = 'name = "a"\n{}[[hypotheses]]\nid = "H"\nkind = "gap"\nlang = "th"\nbudget = 64\n'
    path.write_text(base.format(""), "utf-8")
    assert load_protocol(path).announcement_gate == 0.30
    path.write_text(base.format("announcement_gate = 0.2\n"), "utf-8")
    assert load_protocol(path).announcement_gate == 0.2
    path.write_text(base.format("announcement_gate = 1.5\n"), "utf-8")
    with pytest.raises(MindcapError, match="announcement_gate: must be in"):
        load_protocol(path)


def test_protocol_test_reports_the_gate(tmp_path, qwen):
    recs = []
    for (arm, announced), lengths in LENGTHS.items():
        for item, n in enumerate(lengths):  # " a" is one Qwen3 token, "\n#### 18\n" six more
            text = " a" * (n - 6) + "\n#### 18\n"
            recs.append(
                make_record(qwen, text, arm=arm, item=item, cap=2048, announced=announced, announce_style="natural")
            )
    assert sorted(len(r["output_ids"]) for r in recs)[:3] == [50, 60, 70]
    Ledger(tmp_path / "led").append(recs, qwen)
    contrast = (
        '[[hypotheses]]\nid = "{id}"\nkind = "contrast"\nalternative = "two-sided"\n'
        'a = {{ arm = "{arm}", lang = "th", announced = 128, announce_style = "natural", budget = 2048 }}\n'
        'b = {{ arm = "{arm}", lang = "th", announced = 2048, announce_style = "natural", budget = 2048 }}\n'
    )
    proto = tmp_path / "p.toml"
    text = 'name = "ann"\nn_boot = 200\n' + contrast.format(id="nat", arm="native")
    proto.write_text(text + contrast.format(id="tr", arm="translate-act"), "utf-8")
    run = CliRunner().invoke
    assert run(cli, ["protocol", "freeze", str(proto), "--no-tag"]).exit_code == 0
    res = run(cli, ["protocol", "test", str(proto), "--ledger", str(tmp_path / "led"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    gates = {g["arm"]: g for g in out["announcement_gate"]}
    assert gates["native"]["reduction"] == pytest.approx(0.5) and gates["translate-act"]["reduction"] == pytest.approx(
        0.1
    )
    got = {d["id"]: (d["decision"], d["clears_gate"], d["informative"]) for d in out["decisions"]}
    assert got == {"nat": ("retain", True, True), "tr": ("retain", False, False)}  # every trace is correct: Δ = 0
