"""Translation quality on known segments, the suite and `mindcap-tok audit` end to end, missing extras skipped."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from cli_args import audit_cell_args
from ledger_factory import make_record
from mindcap_tok.audits import AuditConfig, chrf_scores, run_audits, translation_audit, write_audit_report
from mindcap_tok.cli.main import cli
from mindcap_tok.resample import Resampling
from mindcap_tok.stats.premiums import premium_table
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.schema import validate_records

REFS = {
    0: "Janet has three ducks and sells the eggs.",
    1: "A robe takes two bolts of blue fiber.",
    2: "Josh buys a house for eighty thousand dollars.",
}


def _records(tok):
    """Translate-act: item 0 translated verbatim and always right, item 1 half translated and right once,
    item 2 translated into unrelated characters and never right; native: always wrong."""
    segments = {0: REFS[0], 1: REFS[1][:18], 2: "ฉัน ๑๒๓"}
    recs = []
    for item in range(3):
        for s in range(2):
            right = item == 0 or (item == 1 and s == 0)
            answer = item + 10 if right else item + 11
            recs.append(
                make_record(
                    tok,
                    f"Translation: {segments[item]}\n\nSo we add.\n#### {answer}\n",
                    arm="translate-act",
                    item=item,
                    sample=s,
                    gold=item + 10,
                )
            )
            recs.append(make_record(tok, f"คิด ๆ ๆ ๆ ๆ\n#### {item + 99}\n", item=item, sample=s, gold=item + 10))
    return recs


def test_chrf_known_values():
    pytest.importorskip("sacrebleu")
    assert chrf_scores(["same text here"], ["same text here"]).tolist() == [100.0]
    assert chrf_scores(["ฉัน ๑๒๓"], ["abc def"]).tolist() == [0.0]


def test_translation_quality_and_gain_correlation(qwen):
    pytest.importorskip("sacrebleu")
    res = translation_audit(validate_records(_records(qwen)), REFS, tokenizers={"qwen3-8b": qwen}, budgets=[4096])
    q = res.tables["quality"].iloc[0]
    partial = chrf_scores([REFS[1][:18]], [REFS[1]])[0]
    assert 0 < partial < 100
    assert q["scored"] == 6 and q["chrf_mean"] == pytest.approx((100 + partial + 0) / 3)
    assert q["chrf_p10"] == pytest.approx(0.0)  # the 10% quantile of (0, 0, p, p, 100, 100)
    corr = res.tables["correlation"].iloc[0]
    # item gains (translate − native) 1, 0.5, 0 follow the quality order 100 > partial > 0: rho = 1
    assert corr["items"] == 3 and corr["spearman"] == pytest.approx(1.0) and corr["gain"] == "translate-act - native"


@pytest.fixture(scope="module")
def ledger_dir(qwen, tmp_path_factory):
    path = tmp_path_factory.mktemp("audit") / "L"
    Ledger(path).append(_records(qwen), qwen)
    return path


def test_suite_writes_one_report(qwen, ledger_dir, tmp_path):
    pytest.importorskip("fasttext")
    pytest.importorskip("sacrebleu")
    config = AuditConfig(
        budgets=(8, 16),
        premiums=premium_table({"tha_Thai": 1.5}),
        references=REFS,
        translation_budgets=(16,),
        lid_hub=False,
        resampling=Resampling(100, 4),
        tokenizers={"qwen3-8b": qwen},
    )
    suite = run_audits(ledger_dir, None, config=config)
    assert [r.name for r in suite.results] == ["langid", "comet", "parser", "parity", "normalizer", "truncation"]
    assert [r.status for r in suite.results] == ["ok"] * 6, [r.reason for r in suite.results]
    paths = write_audit_report(suite, tmp_path / "out")
    md = paths["markdown"].read_text("utf-8")
    for title in (
        "Trace-language ID",
        "Translation quality",
        "Parser robustness",
        "Decoder parity",
        "Normalizer sensitivity",
        "Truncation (what the cap did)",
    ):
        assert f"## {title}" in md
    data = json.loads(paths["json"].read_text("utf-8"))
    assert data["records"] == 12 and data["audits"][4]["summary"]["seed"] == 4
    assert paths["validation"].read_text("utf-8").startswith("model,arm,lang")


def test_missing_extras_are_skipped_with_the_install_command(qwen, ledger_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fasttext", None)
    monkeypatch.setitem(sys.modules, "sacrebleu", None)
    monkeypatch.setitem(sys.modules, "sacrebleu.metrics", None)
    config = AuditConfig(budgets=(8,), references=REFS, resampling=Resampling(50), tokenizers={"qwen3-8b": qwen})
    suite = run_audits(ledger_dir, ["langid", "comet", "parity"], config=config)
    status = {r.name: (r.status, r.reason) for r in suite.results}
    assert status["parity"][0] == "ok"
    assert status["langid"][0] == "skipped" and "pip install 'mindcap-tok[lid]'" in status["langid"][1]
    assert status["comet"][0] == "skipped" and "pip install 'mindcap-tok[chrf]'" in status["comet"][1]
    md = write_audit_report(suite, tmp_path)["markdown"].read_text("utf-8")
    assert "**Skipped:** fasttext-numpy2 is not installed: pip install 'mindcap-tok[lid]'" in md


def test_cli_audit(ledger_dir, tmp_path):
    out = tmp_path / "report"
    args = [*audit_cell_args(ledger_dir, out), "--seed", "9"]
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "parser: ok" in res.output and "normalizer: ok" in res.output
    # status goes to stderr, as in every command: stdout stays free for a product
    assert res.stdout == "" and res.stderr.splitlines()[0].startswith("parser: ok (")
    assert res.stderr.splitlines()[-1] == f"wrote {out / 'audit.md'}, {out / 'audit.json'}, {out / 'audit.html'}"
    data = json.loads((out / "audit.json").read_text("utf-8"))
    assert [a["name"] for a in data["audits"]] == ["parser", "parity", "normalizer"]
    assert data["audits"][0]["summary"]["premiums"] == {"qwen3-8b:tha_Thai": 1.5}
    bad = CliRunner().invoke(cli, ["audit", "--ledger", str(ledger_dir), "--out-dir", str(out), "--only", "nope"])
    assert bad.exit_code == 2 and "unknown audit(s) nope" in bad.output


def test_populations_differing_only_in_forcing_stay_apart(qwen, tmp_path):
    """Two populations of one cell, the same but for ``forcing``: every trace of the unforced one reads 4 on
    the way to 45 (value-unstable), none of the forced one does (``#### 7``). Pooled, they would be one row at
    0.5; kept apart, two rows at 1 and 0."""
    recs = [
        make_record(qwen, text, item=i, sample=0, gold=7, forcing=forcing)
        for forcing, text in ((False, "คิด\n#### 45\n"), (True, "คิด\n#### 7\n"))
        for i in range(2)
    ]
    path = tmp_path / "L"
    Ledger(path).append(recs, qwen)
    budgets = tuple(range(1, max(len(r["output_ids"]) for r in recs) + 1))
    suite = run_audits(path, ["parser"], config=AuditConfig(budgets=budgets, tokenizers={"qwen3-8b": qwen}))
    res = suite.results[0]
    assert res.status == "ok", res.reason
    table = res.tables["robustness"]
    assert table["forcing"].tolist() == [False, True]
    assert table["n"].tolist() == [2, 2]
    assert table["value_unstable"].tolist() == [1.0, 0.0]


def test_bad_user_inputs_are_one_line_errors(ledger_dir, tmp_path):
    from mindcap_tok.audits.segments import split_translate_act
    from mindcap_tok.errors import MindcapError

    with pytest.raises(MindcapError, match=r"invalid --delimiter '\(unclosed': missing \)"):
        split_translate_act("a\n\nb", "(unclosed")
    empty, no_labels = tmp_path / "empty.csv", tmp_path / "no_labels.csv"
    empty.write_text("", "utf-8")
    no_labels.write_text("model,arm,lang,item,sample,predicted\nqwen3-8b,native,tha_Thai,0,0,tha_Thai\n", "utf-8")
    base = ["audit", "--ledger", str(ledger_dir), "--out-dir", str(tmp_path / "out"), "--only", "parity"]
    cases = [
        (["--delimiter", "(unclosed"], "error: invalid --delimiter '(unclosed': missing ), unterminated"),
        (["--validation-labels", str(empty)], f"error: cannot read validation labels {empty}: No columns"),
        (["--validation-labels", str(no_labels)], "lack column(s) human_label (have model, arm, lang, item"),
        (["--only", "parser", "--premiums", "th=abc"], "error: premium must be a number, got 'abc'"),
        (["--only", "normalizer", "--premiums", "nosuch.json"], "error: cannot read premiums from nosuch.json"),
    ]
    for extra, message in cases:
        res = CliRunner().invoke(cli, [*base, *extra])
        assert res.exit_code == 2 and message in res.output, res.output
        assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, res.output
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_report_is_rendered_before_anything_is_written(tmp_path, monkeypatch):
    from mindcap_tok.audits import suite as suite_mod
    from mindcap_tok.audits._common import skipped

    old = suite_mod.SuiteResult("L", 1, [skipped("parity", "old reason")])
    out = tmp_path / "audit"
    paths = write_audit_report(old, out)
    before = {k: p.read_text("utf-8") for k, p in paths.items()}
    new = suite_mod.SuiteResult("L", 2, [skipped("parity", "new reason")])

    def broken(self):
        raise RuntimeError("cannot render")

    monkeypatch.setattr(suite_mod.SuiteResult, "as_dict", broken)  # the JSON fails after the Markdown rendered
    with pytest.raises(RuntimeError, match="cannot render"):
        write_audit_report(new, out)
    assert {k: p.read_text("utf-8") for k, p in paths.items()} == before
    assert sorted(p.name for p in out.iterdir()) == [".mindcap-tok-output.json", "audit.json", "audit.md"]
    assert [p.name for p in tmp_path.iterdir()] == ["audit"]  # no staging folder left beside it


# -- the registry: honest skips, real failures --------------------------------------------------------------------


def _replace_runner(monkeypatch, name, runner):
    import dataclasses

    from mindcap_tok.audits import suite as suite_mod

    monkeypatch.setitem(suite_mod.REGISTRY, name, dataclasses.replace(suite_mod.REGISTRY[name], run=runner))


def test_an_unexpected_audit_error_fails_the_command(qwen, ledger_dir, tmp_path, monkeypatch):
    from mindcap_tok.audits.suite import AuditFailed

    def broken(records, tokenizers, config):
        raise RuntimeError("index out of range\nsecond line")

    _replace_runner(monkeypatch, "parity", broken)
    with pytest.raises(AuditFailed) as info:
        run_audits(ledger_dir, ["parser", "parity"], config=AuditConfig(budgets=(8,), tokenizers={"qwen3-8b": qwen}))
    assert info.value.audit == "parity" and isinstance(info.value.cause, RuntimeError)
    out = tmp_path / "report"
    res = CliRunner().invoke(
        cli, ["audit", "--ledger", str(ledger_dir), "--out-dir", str(out), "--only", "parser,parity", "--budgets", "8"]
    )
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == ["error: audit parity failed: RuntimeError: index out of range"]
    assert not out.exists()  # nothing written


def test_an_input_error_inside_an_audit_is_no_longer_a_skip(qwen, ledger_dir):
    from mindcap_tok.audits.suite import AuditFailed

    # premiums that lack the ledger's language: the parser audit cannot price its gains, which is an error
    config = AuditConfig(budgets=(8,), premiums=premium_table({"deu_Latn": 1.5}), tokenizers={"qwen3-8b": qwen})
    with pytest.raises(AuditFailed, match=r"^audit parser failed: no premium for model 'qwen3-8b', language tha_Thai"):
        run_audits(ledger_dir, ["parser"], config=config)


def test_a_missing_extra_is_a_skip_with_the_install_hint(qwen, ledger_dir, tmp_path, monkeypatch):
    from mindcap_tok.errors import MissingExtraError

    def needs_extra(records, tokenizers, config):
        raise MissingExtraError("somepkg", "someextra")

    _replace_runner(monkeypatch, "parity", needs_extra)
    out = tmp_path / "report"
    res = CliRunner().invoke(
        cli, ["audit", "--ledger", str(ledger_dir), "--out-dir", str(out), "--only", "parser,parity", "--budgets", "8"]
    )
    assert res.exit_code == 0, res.output
    assert "parity: skipped: somepkg is not installed: pip install 'mindcap-tok[someextra]'" in res.output
    data = json.loads((out / "audit.json").read_text("utf-8"))
    assert [(a["name"], a["status"]) for a in data["audits"]] == [("parser", "ok"), ("parity", "skipped")]


def test_an_audit_states_its_own_skip_reason(qwen, ledger_dir):
    suite = run_audits(ledger_dir, ["comet"], config=AuditConfig(tokenizers={"qwen3-8b": qwen}))  # no references
    (res,) = suite.results
    assert res.status == "skipped" and res.reason.startswith("no references for the translation segments")


# -- audit.md reads well --------------------------------------------------------------------------------------------


def _table_after(md: str, heading: str) -> list[list[str]]:
    """The cells of the first pipe table after ``heading`` (header row included, separator left out)."""
    lines = md.splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not all(set(c) <= set(":-") for c in cells):
            rows.append(cells)
    return rows


def test_headline_summary_and_missing_values(tmp_path):
    import math

    import pandas as pd

    from mindcap_tok.audits import AuditResult, SuiteResult, render_markdown
    from mindcap_tok.audits._common import skipped

    langid = AuditResult(
        "langid",
        tables={
            "compliance": pd.DataFrame(
                {"lang": ["deu_Latn", "tha_Thai"], "determinate": [4, 6], "in_expected": [0.5, 1.0]}
            )
        },
    )
    comet = AuditResult(
        "comet",
        summary={"metrics": ["chrf"]},
        tables={
            "quality": pd.DataFrame({"lang": ["deu_Latn", "tha_Thai"], "scored": [2, 0], "chrf_mean": [50.0, math.nan]})
        },
    )
    parser = AuditResult(
        "parser",
        tables={"robustness": pd.DataFrame({"n": [4, 6], "rescued_traces": [1, 0], "unstable_traces": [2, 1]})},
    )
    parity = AuditResult(
        "parity", summary={"raw_agreement": 0.75, "normalized_agreement": None, "sampled": 8, "seed": None}
    )
    normalizer = AuditResult(
        "normalizer",
        tables={
            "delta": pd.DataFrame(
                {
                    "normalizer": ["flores", "flores", "behavioral"],
                    "delta": [0.031, 0.2, 0.02],
                    "peak": [True, False, True],
                    "ci_low": [math.nan, 0.1, 0.0],
                }
            )
        },
    )
    suite = SuiteResult("L", 10, [langid, comet, parser, parity, normalizer, skipped("langid", "no model")])
    md = render_markdown(suite)
    assert _table_after(md, "## Summary") == [
        ["audit", "status", "key figure"],
        ["Trace-language ID (`langid`)", "ok", "80.0% of 10 determinate traces in the expected language"],
        ["Translation quality (chrF / COMET) (`comet`)", "ok", "mean chrF 50 over 2 translation segments"],
        ["Parser robustness (`parser`)", "ok", "rescued-correct 1 of 10 traces (10.0%), value-unstable 3 (30.0%)"],
        [
            "Decoder parity (`parity`)",
            "ok",
            "raw agreement 75.0%, after special-token normalisation — (8 prefixes sampled)",
        ],
        ["Normalizer sensitivity (`normalizer`)", "ok", "largest peak Δ_L (points): flores +3.1, behavioral +2.0"],
        ["Trace-language ID (`langid`)", "skipped", "no model"],
    ]
    assert "nan" not in md
    assert _table_after(md, "### quality")[1:] == [["deu_Latn", "2", "50"], ["tha_Thai", "0", "—"]]
    assert _table_after(md, "### delta")[1] == ["flores", "0.031", "True", "—"]
    assert "seed=—" in md and "normalized_agreement=—" in md


def test_parity_prefixes_sort_as_numbers_whole_last(qwen):
    from mindcap_tok.audits import parity_audit

    long_text = "We add the two numbers and then check the sum once more. " * 120 + "#### 18\n"
    recs = [make_record(qwen, long_text, item=0), make_record(qwen, "คิด\n#### 18\n", item=1)]
    assert len(recs[0]["output_ids"]) > 768 and len(recs[1]["output_ids"]) < 64
    table = validate_records(recs)
    res = parity_audit(table, {"qwen3-8b": qwen}, budgets=(768, 64, 512, 128), per_stratum=20)
    by = res.tables["by_prefix"]
    # the long record gives a unit per budget and its whole, the short one only its whole: every unit sampled
    assert by["prefix"].tolist() == ["64", "128", "512", "768", "whole"]
    assert by["sampled"].tolist() == [1, 1, 1, 1, 2]


def test_audit_inputs_finds_premiums_and_mgsm_questions_for_the_ledger(qwen, tmp_path, config):
    """What `mindcap-tok audit` assembles, as a library call: the user's premium for Thai (r = 3/2 exactly) and
    the 250 MGSM questions in English and Thai; a model without a tokenizer gets a note, not an error."""
    from fractions import Fraction

    from ledger_factory import make_cell
    from mindcap_tok.audits import AuditInputs, audit_inputs

    led = Ledger(tmp_path / "L")
    led.append(make_cell(qwen, n_items=2, n_samples=1), qwen)
    dirs = {"tokenizers_dir": config.tokenizers_dir.value, "data_dir": config.data_dir.value}
    found = audit_inputs(led, ["comet", "normalizer"], premium_specs=["th=1.5"], alt_premiums=["th=2"], **dirs)
    assert isinstance(found, AuditInputs) and found.notes == ()
    assert list(found.premiums.values()) == [Fraction(3, 2)]
    assert [list(t.values()) for t in found.alternatives.values()] == [[Fraction(2)]]
    assert len(found.references) == 250 and len(found.sources) == 250
    assert {(task, lang) for task, lang, _ in found.sources} == {("mgsm", "tha_Thai")}
    other = Ledger(tmp_path / "M")
    other.append(make_cell(qwen, n_items=1, n_samples=1, model="no-such-model"), qwen)
    (note,) = audit_inputs(other, ["parser"], **dirs).notes
    assert note.startswith("no FLORES premiums (") and note.endswith("premium-based parts are left out")
