"""Every command's JSON output parses with a strict parser (no NaN/Infinity), also where values are missing."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from cli_args import price_tiny_args
from ledger_factory import make_record
from mindcap_tok._json import dumps_strict, strict_json_value
from mindcap_tok.cli._output import to_json
from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger
from price_fixture import price_world

#: two languages' premiums, two budgets and a small bootstrap: what the sweep and the audit share here
CELL = ["--premiums", "th=3", "--premiums", "sw=2", "--budgets", "4,16", "--n-boot", "50"]
SWEEP = ["sweep", "--ledger", "{ledger}", *CELL]


def strict_loads(text: str):
    """``json.loads`` that fails on the non-standard constants Python's encoder writes for NaN and infinities."""

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_strict_loads_refuses_what_python_writes_for_nan():
    with pytest.raises(AssertionError, match="NaN"):
        strict_loads(json.dumps({"a": float("nan")}))


def test_values_become_strict():
    data = {"a": [1.5, float("nan"), {"b": np.float64("inf"), "c": (np.int64(3), pd.NA)}], 2: np.array([1.0, np.nan])}
    assert strict_json_value(data) == {"a": [1.5, None, {"b": None, "c": [3, None]}], "2": [1.0, None]}
    rows = [{"announced": math.nan, "x": [{"y": -math.inf}]}]
    assert strict_loads(to_json(rows)) == [{"announced": None, "x": [{"y": None}]}]
    assert strict_loads(dumps_strict(pd.DataFrame({"a": [1.0, np.nan]}).to_dict("records"))) == [
        {"a": 1.0},
        {"a": None},
    ]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    """Native and translate-act Thai with nothing announced (announced is null), and a native-only Swahili cell
    (no translate-act records: its gap is missing)."""
    records = [
        make_record(
            qwen,
            ("Some words first. " * item) + f"#### {10 + item + (sample == 1)}\n",
            arm=arm,
            lang=lang,
            item=item,
            sample=sample,
            gold=10 + item,
        )
        for arm, lang in (("native", "tha_Thai"), ("translate-act", "tha_Thai"), ("native", "swh_Latn"))
        for item in range(4)
        for sample in range(2)
    ]
    root = tmp_path_factory.mktemp("ledger")
    Ledger(root).append(records, qwen)
    return root


def run(args):
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.parametrize(
    "args",
    [
        ["config", "--format", "json"],
        ["languages", "--format", "json"],
        ["premium", "--lang", "th", "--n-boot", "40", "--budgets", "64", "--format", "json"],
        ["ledger", "info", "{ledger}", "--format", "json"],
        ["score", "--ledger", "{ledger}", "--budgets", "4,16,64", "--format", "json"],
        [*SWEEP, "--format", "json"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_stdout_json_is_strict(ledger, args):
    res = run([a.format(ledger=ledger) for a in args])
    assert strict_loads(res.stdout) not in (None, [], {})


def test_protocol_test_json_is_strict(ledger, tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text(
        'name = "strict"\nn_boot = 100\nseed = 1\n[premiums]\nth = 3\n'
        '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "th"\nbudget = 16\nmargin = 5\n',
        "utf-8",
    )
    run(["protocol", "freeze", str(proto), "--no-tag"])
    out = strict_loads(run(["protocol", "test", str(proto), "--ledger", str(ledger), "--format", "json"]).stdout)
    assert out["decisions"][0]["id"] == "H1"
    assert strict_loads((tmp_path / "p.toml.freeze.json").read_text())["sha256"]


def test_price_json_is_strict(tmp_path):
    ledger, base, _, _ = price_world(tmp_path)  # a tiny tokenizer whose table is known by hand
    res = run(price_tiny_args(ledger.root, base.path))
    (row,) = strict_loads(res.stdout)
    assert row["cap"] == 30


def test_audit_json_is_strict(ledger, tmp_path):
    out = tmp_path / "audit"
    run(
        [
            "audit",
            "--ledger",
            str(ledger),
            "--only",
            "parser,parity,normalizer",
            *CELL,
            "--no-hub",
            "--out-dir",
            str(out),
        ]
    )
    data = strict_loads((out / "audit.json").read_text())
    assert {a["name"] for a in data["audits"]} == {"parser", "parity", "normalizer"}


def test_missing_values_read_as_a_dash_not_nan():
    from mindcap_tok.cli._output import render

    rows = [{"lang": "tha_Thai", "gap": 0.5, "announced": None}, {"lang": "swh_Latn", "gap": math.nan, "announced": 64}]
    table = render(rows, "table")
    assert "nan" not in table.lower() and "None" not in table and table.count("—") == 2
    md = render(rows, "md")
    assert "nan" not in md.lower() and md.count("—") == 2
    csv_lines = render(rows, "csv").splitlines()
    assert csv_lines[1].endswith("0.5,") and csv_lines[2] == "swh_Latn,,64"  # an announced budget is an integer
    assert "nan" not in render(rows, "latex").lower()


@pytest.mark.parametrize(
    "args",
    [
        ["config"],
        ["languages"],
        ["premium", "--lang", "th", "--n-boot", "40"],
        ["ledger", "info", "{ledger}"],
        ["score", "--ledger", "{ledger}", "--budgets", "4,16"],
        SWEEP,
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_one_format_set_everywhere(ledger, args):
    import io

    args = [a.format(ledger=ledger) for a in args]
    outputs = {fmt: run([*args, "--format", fmt]).stdout for fmt in ("table", "json", "csv", "md")}
    rows = strict_loads(outputs["json"])
    frame = pd.read_csv(io.StringIO(outputs["csv"]))
    assert len(frame) >= 1 and len(frame.columns) >= 2
    md_rows = [line for line in outputs["md"].splitlines() if line.startswith("|")]
    assert len(md_rows) >= 3 and "nan" not in outputs["md"].lower()  # header, rule, at least one row
    assert rows and outputs["table"].strip()
