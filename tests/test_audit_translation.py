"""The translation audit runs on the arms a task marks as translating (``translation = "eng_Latn"``), for any
task, and says "not applicable" for a task with none; a bad ``translation`` code is a one-line refusal."""

from __future__ import annotations

import pytest

from ledger_factory import make_record
from mindcap_tok.audits import chrf_scores, translation_audit
from mindcap_tok.audits.translation import translation_arms
from mindcap_tok.errors import MindcapError
from mindcap_tok.store.schema import validate_records
from mindcap_tok.tasks.load import load_task
from task_files import integer_task

#: a user's task: integer answers, two arms, none of them translating
NO_TRANSLATION = integer_task("plain", ["eng_Latn", "deu_Latn"])

REF = "Which answer does the passage support?"


def _belebele(tok) -> list[dict]:
    """German Belebele: translate-act item 0 translated verbatim and right, item 1 a fragment and wrong, item 2
    unrelated and wrong; native always wrong (gold "3"). Item gains 1, 0, 0 against chrF 100 > p > 0."""
    segments = {0: REF, 1: REF[:12], 2: "ฉัน ๑๒๓"}
    recs = []
    for item in range(3):
        answer = "3" if item == 0 else "1"
        text = f"Translation: {segments[item]}\n\nSo.\n#### {answer}\n"
        common = {"item": item, "gold": "3", "task": "belebele", "lang": "deu_Latn"}
        recs.append(make_record(tok, text, arm="translate-act", **common))
        recs.append(make_record(tok, "Denken.\n#### 2\n", **common))
    return recs


def test_arms_with_a_translation_segment_come_from_the_task_files():
    assert {t: translation_arms({t: load_task(t)})[t] for t in ("mgsm", "belebele", "mmath")} == {
        "mgsm": {"translate-act": "eng_Latn"},
        "belebele": {"translate-act": "eng_Latn"},
        "mmath": {"translate-act": "eng_Latn"},
    }


def test_a_choice_task_is_audited_against_its_native_arm(qwen):
    pytest.importorskip("sacrebleu")
    refs = {("belebele", i): REF for i in range(3)}
    res = translation_audit(validate_records(_belebele(qwen)), refs, tokenizers={"qwen3-8b": qwen}, budgets=[4096])
    assert res.status == "ok", res.reason
    q = res.tables["quality"].iloc[0]
    partial = chrf_scores([REF[:12]], [REF])[0]
    assert (q["task"], q["arm"], q["scored"]) == ("belebele", "translate-act", 3)
    assert q["chrf_mean"] == pytest.approx((100 + partial + 0) / 3)
    corr = res.tables["correlation"].iloc[0]
    assert corr["gain"] == "translate-act - native" and corr["mean_gain"] == pytest.approx(1 / 3)
    assert res.tables["applicability"].to_dict(orient="records") == [
        {"task": "belebele", "translation_arms": "translate-act", "status": "ok", "reason": ""}
    ]


def test_a_task_without_a_translation_arm_is_not_applicable(qwen, tmp_path):
    path = tmp_path / "plain.toml"
    path.write_text(NO_TRANSLATION, "utf-8")
    recs = [make_record(qwen, "#### 4\n", item=i, gold=4, task="plain", lang="deu_Latn") for i in range(2)]
    res = translation_audit(validate_records(recs), {}, tokenizers={"qwen3-8b": qwen}, tasks=[path])
    assert res.status == "skipped"
    assert res.reason == "not applicable: no arm of task plain has a translation segment (arms.<arm>.translation)"
    # beside an MGSM cell, the user's task is a row that says so and the MGSM segments are still scored
    pytest.importorskip("sacrebleu")
    mgsm = [make_record(qwen, f"Translation: {REF}\n\nSo.\n#### 4\n", arm="translate-act", gold=4)]
    res = translation_audit(
        validate_records([*recs, *mgsm]), {0: REF}, tokenizers={"qwen3-8b": qwen}, budgets=[64], tasks=[path]
    )
    assert res.status == "ok" and res.tables["quality"]["task"].tolist() == ["mgsm"]
    assert res.tables["applicability"]["status"].tolist() == ["ok", "not applicable"]


def test_a_bad_translation_language_is_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(NO_TRANSLATION + '[arms.english]\ntranslation = "english"\n', "utf-8")
    with pytest.raises(MindcapError, match=r"bad.toml: arms.english.translation: unknown language 'english'"):
        load_task(path)


def test_cli_says_not_applicable_for_a_task_without_a_translation_arm(qwen, tmp_path):
    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli
    from mindcap_tok.store.ledger import Ledger

    task = tmp_path / "plain.toml"
    task.write_text(NO_TRANSLATION, "utf-8")
    path = tmp_path / "L"
    Ledger(path).append([make_record(qwen, "#### 4\n", gold=4, task="plain", lang="deu_Latn")], qwen)
    out = tmp_path / "out"
    args = ["audit", "--ledger", str(path), "--out-dir", str(out), "--only", "comet", "--task", str(task)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "comet: skipped: not applicable: no arm of task plain has a translation segment" in res.output
