"""One tokenizer-resolution policy for every command that scores: a ledger whose manifest recorded another hash
for its tokenizer is a one-line error everywhere, and scores as usual with ``--allow-tokenizer-mismatch``.

The ledgers are hand-built so that the numbers scored with the flag are known (see each fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli_args import price_tiny_args
from ledger_factory import early_late_records, make_record
from mindcap_tok.adaptation.price import load_traces
from mindcap_tok.audits import AuditConfig, run_audits
from mindcap_tok.cli.main import cli
from mindcap_tok.scoring.score import score_by_tokenizer, score_ledger
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.tokenizers import TokenizerMismatchError, resolve_tokenizers
from price_fixture import english_trace, save_tiny, thai_trace

OTHER = "ab" * 32  # the hash a tampered manifest records
FLAG = "--allow-tokenizer-mismatch"


def _tamper(root: Path, name: str) -> None:
    """Make the manifest record ``OTHER`` as the hash of tokenizer ``name`` (the shards stay untouched)."""
    path = Ledger(root).manifest_path
    data = json.loads(path.read_text("utf-8"))
    data["tokenizers"][name]["sha256"] = OTHER
    path.write_text(json.dumps(data), "utf-8")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, qwen):
    """``early_late_records``: native Thai items 0,1 answer within 30 tokens, items 2,3 between 30 and 76 (item 3
    sample 1 wrong); translate-act always within 30. So acc_N(30) = 4/8, acc_N(90) = 7/8, acc_T(30) = 1, and
    with r = 3 the Δ_L at B = 30 is 7/8 − 4/8 = 37.5 points. The manifest records another hash for qwen3-8b."""
    root = tmp_path_factory.mktemp("policy") / "L"
    Ledger(root).append(early_late_records(qwen), qwen)
    _tamper(root, "qwen3-8b")
    return root


def run(args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line_mismatch(res, actual: str) -> None:
    """The command failed with one line naming the tokenizer, both short hashes and the override flag."""
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    line = lines[0]
    assert line.startswith("error: tokenizer 'qwen3-8b'") or line.startswith("error: tokenizer 'tiny'"), line
    assert f"{OTHER[:12]}…" in line and f"{actual[:12]}…" in line and FLAG in line, line


def test_the_policy_names_both_hashes_and_the_override(ledger, qwen):
    led = Ledger(ledger)
    with pytest.raises(TokenizerMismatchError) as info:
        resolve_tokenizers(["qwen3-8b", "qwen3-8b"], led, given={"qwen3-8b": qwen})
    err = info.value
    assert (err.name, err.used, err.recorded, err.actual) == ("qwen3-8b", "qwen3-8b", OTHER, qwen.sha256)
    assert str(err) == (
        f"tokenizer 'qwen3-8b' has sha256 {qwen.sha256[:12]}…, but the ledger recorded "
        f"{OTHER[:12]}… for its ids; pass {FLAG} (allow_mismatch=True) to score with it anyway"
    )
    assert resolve_tokenizers(["qwen3-8b"], led, given={"qwen3-8b": qwen}, allow_mismatch=True) == {"qwen3-8b": qwen}
    # a name the manifest does not record, or no ledger at all: nothing to check against
    assert resolve_tokenizers(["qwen3-8b"], {}, override=qwen) == {"qwen3-8b": qwen}
    assert resolve_tokenizers(["qwen3-8b"], None, override=qwen) == {"qwen3-8b": qwen}
    # the matching hash passes
    assert resolve_tokenizers(["qwen3-8b"], {"qwen3-8b": {"sha256": qwen.sha256}}, override=qwen)


def test_one_grouped_scorer(ledger, qwen):
    table = Ledger(ledger).read()
    res = score_by_tokenizer(table, {"qwen3-8b": qwen}, budgets=[30, 90])
    native = table.column("arm").to_numpy(zero_copy_only=False) == "native"
    assert res.scores[native].mean(axis=0).tolist() == [4 / 8, 7 / 8]
    assert res.scores[~native].mean(axis=0).tolist() == [1.0, 1.0]
    by_budget = score_ledger(table, {"qwen3-8b": qwen}, budgets=[30, 90]).by_budget
    assert by_budget["score"].tolist() == res.scores.ravel().tolist()
    with pytest.raises(Exception, match="no tokenizer given for 'qwen3-8b'"):
        score_by_tokenizer(table, {}, budgets=[30])


def test_score_errors_then_scores_with_the_flag(ledger, qwen):
    args = ["score", "--ledger", ledger, "--budgets", "30,90", "--format", "json", "--arm", "native"]
    one_line_mismatch(run(args), qwen.sha256)
    one_line_mismatch(run([*args, "--tokenizer", "qwen3-8b"]), qwen.sha256)  # an override is checked too
    res = run([*args, FLAG])
    assert res.exit_code == 0, res.output
    assert [row["accuracy"] for row in json.loads(res.output)] == [4 / 8, 7 / 8]


def test_sweep_errors_then_sweeps_with_the_flag(ledger, qwen):
    args = ["sweep", "--ledger", ledger, "--premiums", "th=3", "--budgets", "30", "--n-boot", "100", "--format", "json"]
    one_line_mismatch(run(args), qwen.sha256)
    res = run([*args, FLAG])
    assert res.exit_code == 0, res.output
    row = json.loads(res.output)["rows"][0]
    assert row["acc_native"] == pytest.approx(4 / 8) and row["delta"] == pytest.approx(3 / 8)


def test_report_errors_then_reports_with_the_flag(ledger, qwen, tmp_path):
    out = tmp_path / "rep"
    args = ["report", "--ledger", ledger, "--premiums", "th=3", "--budgets", "30", "--n-boot", "50", "--out-dir", out]
    one_line_mismatch(run(args), qwen.sha256)
    assert not out.exists()
    res = run([*args, FLAG])
    assert res.exit_code == 0, res.output
    assert "37.50" in (out / "report.md").read_text("utf-8")


def test_protocol_test_errors_then_tests_with_the_flag(ledger, qwen, tmp_path):
    proto = tmp_path / "p.toml"
    proto.write_text(
        'name = "policy"\nn_boot = 100\nseed = 1\n[premiums]\nth = 3\n'
        '[[hypotheses]]\nid = "H1"\nkind = "delta"\nlang = "th"\nbudget = 30\nmargin = 5\n',
        "utf-8",
    )
    assert run(["protocol", "freeze", proto, "--no-tag"]).exit_code == 0
    args = ["protocol", "test", proto, "--ledger", ledger, "--format", "json"]
    one_line_mismatch(run(args), qwen.sha256)
    res = run([*args, FLAG])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["decisions"][0]["estimate"] == pytest.approx(3 / 8)


def test_audit_errors_then_audits_with_the_flag(ledger, qwen, tmp_path):
    out = tmp_path / "aud"
    args = [
        "audit",
        "--ledger",
        ledger,
        "--out-dir",
        out,
        "--only",
        "parser,parity",
        "--premiums",
        "th=3",
        "--budgets",
        "30",
    ]
    one_line_mismatch(run(args), qwen.sha256)
    assert not out.exists()
    res = run([*args, FLAG])
    assert res.exit_code == 0, res.output
    audits = json.loads((out / "audit.json").read_text("utf-8"))["audits"]
    assert [a["status"] for a in audits] == ["ok", "ok"]
    assert audits[1]["summary"]["raw_agreement"] == 1.0  # the stored text is the decode of the ids
    # the library: given tokenizers are checked as loaded ones are
    with pytest.raises(TokenizerMismatchError):
        run_audits(ledger, ["parity"], config=AuditConfig(budgets=(30,), tokenizers={"qwen3-8b": qwen}))
    ok = run_audits(
        ledger,
        ["parity"],
        config=AuditConfig(budgets=(30,), tokenizers={"qwen3-8b": qwen}, allow_tokenizer_mismatch=True),
    )
    assert ok.results[0].status == "ok"


@pytest.fixture(scope="module")
def price_world(tmp_path_factory):
    """Tiny BPE (price_fixture), cap 64, gold 7, items 0-3, one sample per arm. NATIVE: items 0,1 ``กา`` x 5
    (17 tokens), items 2,3 ``กา`` x 15 (37 tokens); TRANSLATE-ACT: ``ab`` x 5 (17 tokens), all right. At B = 30:
    acc_N = 2/4, acc_T = 1, so G = 0.5. The manifest records another hash for ``tiny``."""
    root = tmp_path_factory.mktemp("price_policy")
    base = save_tiny(root / "base")
    records = []
    for arm in ("native", "translate-act"):
        for item in range(4):
            text = thai_trace(5 if item < 2 else 15, 7) if arm == "native" else english_trace(5, 7)
            ids = base.tokenizer.encode(text, add_special_tokens=False).ids
            records.append(
                {
                    "model": "tiny",
                    "arm": arm,
                    "lang": "tha_Thai",
                    "item": item,
                    "sample": 0,
                    "seed": 0,
                    "cap": 64,
                    "prompt": f"question {item}",
                    "prompt_ids": [1, 2],
                    "output_ids": ids,
                    "text": base.tokenizer.decode(ids),
                    "finish_reason": "stop",
                    "gold": 7,
                    "generator": "hand",
                    "tokenizer": "tiny",
                }
            )
    assert [len(r["output_ids"]) for r in records] == [17, 17, 37, 37, 17, 17, 17, 17]
    ledger = Ledger(root / "ledger")
    ledger.append(records, tokenizer=base)
    _tamper(ledger.root, "tiny")
    return ledger, base


def test_price_errors_then_prices_with_the_flag(price_world):
    ledger, base = price_world
    args = price_tiny_args(ledger.root, base.path)
    res = run(args)
    assert res.exit_code == 2 and f"(resolved to {base.path})" in res.output, res.output
    one_line_mismatch(res, base.sha256)
    res = run([*args, FLAG])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert row["G"] == pytest.approx(0.5) and row["n_items"] == 4
    with pytest.raises(TokenizerMismatchError):
        load_traces(ledger, "tiny", lang="th", tokenizer=base)
    assert len(load_traces(ledger, "tiny", lang="th", tokenizer=base, allow_tokenizer_mismatch=True).texts) == 8


def test_an_unknown_tokenizer_name_suggests_the_flag_and_the_flag_works(tmp_path, qwen, monkeypatch):
    from mindcap_tok.cli.main import cli

    records = [
        make_record(qwen, f"#### {10 + i}\n", model="my-finetune", item=i, gold=10 + i, tokenizer="my-finetune")
        for i in range(3)
    ]
    root = tmp_path / "led"
    Ledger(root).append(records, {"my-finetune": qwen})
    for args in (
        ["score", "--ledger", str(root), "--budgets", "8"],
        ["sweep", "--ledger", str(root), "--premiums", "th=2", "--budgets", "8", "--n-boot", "40"],
    ):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code != 0 and "'my-finetune'" in res.output and "--tokenizer" in res.output, res.output
        res = CliRunner().invoke(cli, [*args, "--tokenizer", "qwen3-8b", "--allow-tokenizer-mismatch"])
        assert res.exit_code == 0, res.output
