"""Results must be checked before they are trusted: frozen protocol inputs, empty audits, strict JSON, budgets.

Ledger (Qwen3 ids, ``early_late_records``): native Thai items 0,1 answer within 30 tokens, items 2,3 between
30 and 76 (item 3 sample 1 wrong); translate-act always within 30. Hence acc_N(30) = 4/8 and acc_N(90) = 7/8,
so Δ_th(30) with r = 3 is 37.5 points, and with r = 1 it is 0. No record announces its budget (``announced``
is missing everywhere), which is what used to become ``NaN`` in JSON output.
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from cli_args import audit_cell_args
from ledger_factory import early_late_records, make_cell
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.stats.protocol import freeze_path, freeze_protocol, verify_protocol
from mindcap_tok.store.ledger import Ledger

MAX_BUDGET = 2**31 - 1


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    records = early_late_records(qwen)
    assert all(r["announced"] is None for r in records)
    root = tmp_path_factory.mktemp("checks") / "L"
    Ledger(root).append(records, qwen)
    return root


def run(args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def strict(text: str):
    """Parse JSON as a strict reader does: NaN, Infinity and -Infinity are not JSON."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c} in output"))


def one_line_error(res, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- 1. a protocol's premiums file is covered by its freeze ---------------------------------------------------

PROTOCOL = (
    'name = "inputs"\nn_boot = 200\nseed = 1\npremiums = "prem.json"\n'
    '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "th"\nbudget = 30\n'
)


def _premiums(folder, r: float) -> None:
    (folder / "prem.json").write_text(json.dumps([{"model": None, "lang": "th", "premium": r}]), "utf-8")


def test_protocol_test_refuses_an_edited_premiums_file(ledger, tmp_path):
    folder = tmp_path / "proto"
    folder.mkdir()
    proto = folder / "p.toml"
    proto.write_text(PROTOCOL, "utf-8")
    _premiums(folder, 3)
    assert run(["protocol", "freeze", proto, "--no-tag"]).exit_code == 0
    res = run(["protocol", "test", proto, "--ledger", ledger, "--format", "json"])  # run from another folder
    assert res.exit_code == 0, res.output
    out = strict(res.stdout)
    assert out["decisions"][0]["estimate"] == pytest.approx(3 / 8)  # floor(3 · 30) = 90: 7/8 − 4/8, a fraction
    assert set(out["inputs"]) == {"prem.json"}
    _premiums(folder, 1)  # with r = 1 the estimate would be 0 and the outcome would flip
    line = one_line_error(run(["protocol", "test", proto, "--ledger", ledger]), "prem.json", "changed after the freeze")
    assert str(proto) in line
    with pytest.raises(MindcapError, match=r"prem\.json changed after the freeze"):
        freeze_protocol(proto)  # freezing again cannot launder the edit either


def test_a_tokenizer_named_as_premiums_is_covered(tmp_path):
    from price_fixture import save_tiny

    save_tiny(tmp_path / "tok")
    proto = tmp_path / "p.toml"
    proto.write_text(PROTOCOL.replace('"prem.json"', '"tok"'), "utf-8")
    rec = freeze_protocol(proto, tag=False)
    assert list(rec.inputs) == ["tokenizer tok"]
    assert verify_protocol(proto) == rec
    save_tiny(tmp_path / "tok", extended=True)  # another tokenizer.json: other premiums
    with pytest.raises(MindcapError, match="tokenizer tok changed after the freeze"):
        verify_protocol(proto)


def test_a_freeze_record_without_input_hashes_is_refused_when_the_protocol_names_files(tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text(PROTOCOL, "utf-8")
    _premiums(tmp_path, 3)
    rec = freeze_protocol(proto, tag=False)
    old = {k: v for k, v in rec.as_dict().items() if k != "inputs"}  # a record written before inputs existed
    freeze_path(proto).write_text(json.dumps(old), "utf-8")
    with pytest.raises(MindcapError, match=r"does not cover prem\.json"):
        verify_protocol(proto)


# -- 4. an audit of no records is an error, never "ok" --------------------------------------------------------


def test_audit_of_an_empty_ledger_is_an_error(tmp_path):
    from mindcap_tok.audits import run_audits

    empty = Ledger(tmp_path / "empty")
    empty.root.mkdir()
    empty.manifest_path.write_text(json.dumps(empty.manifest()), "utf-8")  # a ledger with 0 records
    assert empty.read().num_rows == 0
    out = tmp_path / "out"
    res = run(
        [
            "audit",
            "--ledger",
            empty.root,
            "--out-dir",
            out,
            "--only",
            "parser,parity,normalizer",
            "--premiums",
            "th=1.5",
        ]
    )
    one_line_error(res, "no records", "nothing to audit")
    assert "ok" not in res.stdout and not out.exists()
    with pytest.raises(MindcapError, match="no records"):
        run_audits(empty, ["parity"])
    with pytest.raises(MindcapError, match="no records"):
        run_audits(empty.read(columns=["model"]).slice(0, 0), ["parity"])


# -- 5. every JSON a command writes is strict -----------------------------------------------------------------


def test_sweep_json_is_strict_with_missing_announced_budgets(ledger):
    res = run(
        ["sweep", "--ledger", ledger, "--premiums", "th=3", "--budgets", "30", "--n-boot", "100", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    row = strict(res.stdout)["rows"][0]
    assert row["announced"] is None and row["delta"] == pytest.approx(3 / 8)


def test_protocol_outputs_are_strict(ledger, tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text(PROTOCOL.replace('"prem.json"', "{ th = 3 }"), "utf-8")
    assert run(["protocol", "freeze", proto]).exit_code == 0
    record = strict(freeze_path(proto).read_text("utf-8"))
    assert record["inputs"] == {} and len(record["sha256"]) == 64
    res = run(["protocol", "test", proto, "--ledger", ledger, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert strict(res.stdout)["decisions"][0]["estimate"] == pytest.approx(3 / 8)


def test_audit_json_is_strict(qwen, tmp_path):
    from mindcap_tok.audits import AuditResult, SuiteResult

    suite = SuiteResult(
        "L", 1, [AuditResult("parity", summary={"raw_agreement": math.nan, "n": 0, "ratio": float("inf")})]
    )
    data = strict(json.dumps(suite.as_dict(), allow_nan=False))
    assert data["audits"][0]["summary"] == {"raw_agreement": None, "n": 0, "ratio": None}
    path = tmp_path / "L"
    Ledger(path).append(make_cell(qwen), qwen)  # no announced budgets
    out = tmp_path / "out"
    res = run(audit_cell_args(path, out))
    assert res.exit_code == 0, res.output
    data = strict((out / "audit.json").read_text("utf-8"))
    assert data["records"] == 6 and [a["status"] for a in data["audits"]] == ["ok"] * 3


# -- 6. budgets are positive token counts, up to 2**31 − 1 ----------------------------------------------------


@pytest.mark.parametrize(
    "bad, item",
    [
        ("100000000000000000000", "'100000000000000000000'"),
        ("0", "'0'"),
        ("64,-8", "'-8'"),
        ("64,abc", "'abc'"),
        ("64,,128", "'64,,128'"),
        ("", "empty"),
        ("2147483648", "'2147483648'"),
    ],
)
def test_bad_budgets_are_one_line_errors(ledger, bad, item):
    res = run(["score", "--ledger", ledger, "--budgets", bad])
    one_line_error(res, "--budgets", item, f"from 1 to {MAX_BUDGET}")


def test_the_largest_budget_is_accepted(ledger):
    res = run(["score", "--ledger", ledger, "--budgets", f"30,{MAX_BUDGET}", "--arm", "native", "--format", "json"])
    assert res.exit_code == 0, res.output
    acc = {r["budget"]: r["accuracy"] for r in strict(res.stdout)}
    assert acc == {30: pytest.approx(4 / 8), MAX_BUDGET: pytest.approx(7 / 8)}


def test_budget_errors_name_the_option(ledger, tmp_path):
    res = run(["audit", ledger, "--out-dir", tmp_path / "a", "--translation-budgets", "1.5"])
    one_line_error(res, "--translation-budgets: '1.5' is not a valid budget")
    assert not (tmp_path / "a").exists()


def test_budgets_with_spaces_around_items_are_read(ledger):
    res = run(["score", "--ledger", ledger, "--budgets", " 30, 40 ", "--arm", "native", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert sorted({r["budget"] for r in strict(res.stdout)}) == [30, 40]
