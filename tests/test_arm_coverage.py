"""Comparisons of two arms refuse ledgers they cannot support: arms covering different items, samples per item k
differing by item, a cell mixing caps; ``--common-items`` compares on the items both arms hold.

Every record answers "#### v" within a few tokens (Qwen3 ids), so at budget 30 a record scores 1 iff v is its
gold. Ledger (b): NATIVE Thai holds items 0..99, items 5..99 right and 0..4 wrong; TRANSLATE-ACT holds items 0..9,
all right. On the 10 common items acc_N = 5/10 and acc_T = 10/10, so the gap is 0.5 (pooled over NATIVE's 100
items it would read 1 − 95/100 = 0.05).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ledger_factory import make_record
from mindcap_tok.adaptation.price import GivenFolds, PriceSettings, price_ledger
from mindcap_tok.adaptation.retokenize import FoldTokenizer
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import Resampling
from mindcap_tok.store.ledger import Ledger


def _records(tok, arm, items, right=lambda i: True, k=lambda i: 1, **kw):
    out = []
    for item in items:
        for sample in range(k(item)):
            value = 10 + item if right(item) else 99
            out.append(make_record(tok, f"#### {value}\n", arm=arm, item=item, sample=sample, gold=10 + item, **kw))
    return out


def _ledger(root, tok, *parts):
    led = Ledger(root)
    for records in parts:
        led.append(records, tok)
    return root


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory, qwen):
    root = tmp_path_factory.mktemp("arms")
    return {
        "disjoint": _ledger(
            root / "a", qwen, _records(qwen, "native", range(0, 5)), _records(qwen, "translate-act", range(5, 10))
        ),
        "100v10": _ledger(
            root / "b",
            qwen,
            _records(qwen, "native", range(100), right=lambda i: i >= 5),
            _records(qwen, "translate-act", range(10)),
        ),
        "k": _ledger(
            root / "c",
            qwen,
            _records(qwen, "native", range(4), k=lambda i: 1 + (i == 0)),
            _records(qwen, "translate-act", range(4)),
        ),
        "caps": _ledger(
            root / "d",
            qwen,
            _records(qwen, "native", range(4), cap=256),
            _records(qwen, "native", range(4, 8), cap=512),
            _records(qwen, "translate-act", range(8), cap=512),
        ),
    }


EXPECTED = {
    "disjoint": "arms native and translate-act of qwen3-8b/tha_Thai cover different items (5 and 5; 0 in common)",
    "100v10": "arms native and translate-act of qwen3-8b/tha_Thai cover different items (100 and 10; 10 in common); "
    "pass --common-items",
    "k": "cell qwen3-8b/native/tha_Thai has different samples per item (k from 1 to 2)",
    "caps": "cell qwen3-8b/native/tha_Thai mixes caps 256 and 512",
}

PROTOCOL = (
    'name = "arms"\nn_boot = 200\nseed = 1\npremiums = { th = 1 }\n'
    '[[hypotheses]]\nid = "G"\nkind = "gap"\nlang = "th"\nbudget = 30\n'
)


def run(args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _commands(ledger, tmp_path):
    proto = tmp_path / "p.toml"
    if not proto.exists():
        proto.write_text(PROTOCOL, "utf-8")
        assert run(["protocol", "freeze", proto, "--no-tag"]).exit_code == 0
    stats = ["--ledger", ledger, "--premiums", "th=1", "--budgets", "30", "--n-boot", "200"]
    return {
        "sweep": ["sweep", *stats, "--format", "json"],
        "report": ["report", *stats, "--out-dir", tmp_path / "rep"],
        "protocol": ["protocol", "test", proto, "--ledger", ledger, "--format", "json"],
        "price": [
            "price",
            "--ledger",
            ledger,
            "--lang",
            "th",
            "--cap",
            "30",
            "--learn-extension",
            "--no-premium",
            "--n-boot",
            "200",
            "--format",
            "json",
        ],
    }


@pytest.mark.parametrize("case", list(EXPECTED))
def test_every_comparing_command_refuses_in_one_line(ledgers, tmp_path, case):
    for name, args in _commands(ledgers[case], tmp_path).items():
        res = run(args)
        assert res.exit_code == 2, (name, res.output)
        (line,) = res.output.strip().splitlines()
        assert EXPECTED[case] in line, (name, line)
        assert not (tmp_path / "rep").exists()


def test_no_item_in_common_is_refused_even_with_the_flag(ledgers, tmp_path):
    for name, args in _commands(ledgers["disjoint"], tmp_path).items():
        res = run([*args, "--common-items"])
        assert res.exit_code == 2 and "0 in common" in res.output and "--common-items" not in res.output, name


def test_common_items_sweep_gap_is_computed_on_the_items_both_arms_hold(ledgers, tmp_path):
    args = _commands(ledgers["100v10"], tmp_path)["sweep"]
    res = run([*args, "--common-items"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    (row,) = data["rows"]
    assert row["gap"] == pytest.approx(0.5) and row["acc_native"] == pytest.approx(0.5) and row["n_items"] == 10
    assert data["common_items"] is True
    settings = {"design": "replay", "cap": 4096, "announced": None, "announce_style": "none", "forcing": False}
    settings = {"task": "mgsm", **settings}  # output rows carry the task (issue 22)
    assert data["arm_items"] == [
        {
            "model": "qwen3-8b",
            "lang": "tha_Thai",
            **settings,
            "items_native": 100,
            "items_translate-act": 10,
            "common": 10,
        }
    ]
    table = run([*args[:-2], "--common-items"])
    assert (
        "--common-items: compared on the items both arms hold: qwen3-8b/tha_Thai on 10 items (native 100, "
        "translate-act 10)" in table.output
    )


def test_common_items_protocol_and_report(ledgers, tmp_path):
    cmds = _commands(ledgers["100v10"], tmp_path)
    res = run([*cmds["protocol"], "--common-items"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["decisions"][0]["estimate"] == pytest.approx(0.5) and data["common_items"] is True
    res = run([*cmds["report"], "--common-items"])
    assert res.exit_code == 0, res.output
    assert (
        "qwen3-8b/tha_Thai on 10 items (native 100, translate-act 10)" in (tmp_path / "rep" / "report.md").read_text()
    )


def test_common_items_price_gap_equals_the_hand_computation(ledgers, qwen):
    with pytest.raises(MindcapError, match="100 and 10; 10 in common"):
        price_ledger(
            ledgers["100v10"],
            "qwen3-8b",
            lang="th",
            caps=[30],
            extension=GivenFolds([FoldTokenizer(qwen)]),
            settings=PriceSettings(resampling=Resampling(50), tokenizer=qwen),
        )
    p = price_ledger(
        ledgers["100v10"],
        "qwen3-8b",
        lang="th",
        caps=[30],
        extension=GivenFolds([FoldTokenizer(qwen)]),
        settings=PriceSettings(resampling=Resampling(50), common_items=True, tokenizer=qwen),
    )
    (row,) = p.rows
    assert (row.acc_native, row.acc_translate, row.G, row.n_items) == (0.5, 1.0, 0.5, 10)
    record = p.record(row)
    assert record["common_items"] is True and record["arm_items"][0]["common"] == 10
    assert any("on 10 items (native 100, translate-act 10)" in line for line in p.triage())


def test_a_comparable_ledger_passes_unchanged(qwen, tmp_path):
    root = _ledger(
        tmp_path / "ok",
        qwen,
        _records(qwen, "native", range(4), right=lambda i: i < 2),
        _records(qwen, "translate-act", range(4)),
    )
    res = run(
        ["sweep", "--ledger", root, "--premiums", "th=1", "--budgets", "30", "--n-boot", "200", "--format", "json"]
    )
    data = json.loads(res.stdout)
    assert data["rows"][0]["gap"] == pytest.approx(0.5) and data["arm_items"][0]["common"] == 4


def test_settings_that_split_cells_are_compared_apart_not_refused(qwen, tmp_path):
    """An announcement design (the same items with and without an announced budget) is two pairs of cells, each
    compared on its own: sweep gives each its gap (announced: 4/4 vs 2/4 = 0.5; plain: 4/4 vs 4/4 = 0), while
    price, which pools a (model, arm, lang), refuses the mix; a coverage gap in one pair names its setting."""
    ann = {"announced": 256, "announce_style": "tag"}
    root = _ledger(
        tmp_path / "ann",
        qwen,
        _records(qwen, "native", range(4)),
        _records(qwen, "translate-act", range(4)),
        _records(qwen, "native", range(4), right=lambda i: i < 2, **ann),
        _records(qwen, "translate-act", range(4), **ann),
    )
    res = run(
        ["sweep", "--ledger", root, "--premiums", "th=1", "--budgets", "30", "--n-boot", "200", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    gaps = sorted((r["announced"] is not None, r["gap"]) for r in json.loads(res.stdout)["rows"])
    assert gaps == [(False, pytest.approx(0.0)), (True, pytest.approx(0.5))]
    with pytest.raises(MindcapError, match=r"cell qwen3-8b/native/tha_Thai mixes announced budgets 256 and —"):
        price_ledger(
            root,
            "qwen3-8b",
            lang="th",
            caps=[30],
            extension=GivenFolds([FoldTokenizer(qwen)]),
            settings=PriceSettings(resampling=Resampling(50), tokenizer=qwen),
        )
    short = _ledger(
        tmp_path / "short",
        qwen,
        _records(qwen, "native", range(4)),
        _records(qwen, "translate-act", range(4)),
        _records(qwen, "native", range(4), **ann),
        _records(qwen, "translate-act", range(3), **ann),
    )
    res = run(["sweep", "--ledger", short, "--premiums", "th=1", "--budgets", "30", "--n-boot", "200"])
    assert res.exit_code == 2
    assert (
        "arms native and translate-act of qwen3-8b/tha_Thai (announced 256, announce_style tag) cover "
        "different items (4 and 3; 3 in common)" in res.output
    )
