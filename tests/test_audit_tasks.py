"""Audits know a task only through its file: the native and comparator arms (normalizer), the expected
reasoning language and translation segment (langid), and a user's task run through the whole default suite."""

from __future__ import annotations

import pytest

from ledger_factory import make_record
from mindcap_tok.audits import AuditConfig, behavioral_ratios, label_traces, load_lid_model, run_audits
from mindcap_tok.resample import Resampling
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.schema import validate_records
from mindcap_tok.tasks.roles import role_mask
from task_files import integer_task

#: a user's task: native and "english" arms (comparator), the latter reasoning in English, no translation
USER_TASK = integer_task(
    "plain", ["eng_Latn", "deu_Latn"], comparator_reasoning="eng_Latn", more_arms=[("other", "Solve another way.")]
)


@pytest.fixture
def task_file(tmp_path):
    path = tmp_path / "plain.toml"
    path.write_text(USER_TASK, "utf-8")
    return path


def _sized(tok, n: int, **kw) -> dict:
    rec = make_record(tok, "x", task="plain", lang="deu_Latn", **kw)
    return dict(rec, output_ids=[100] * n, text="x" * n)


def test_behavioral_ratio_uses_the_tasks_comparator(qwen, task_file):
    """native 30 and 50 tokens, english 10 and 30, other 1000 (no role): ratio (80/2) / (40/2) = 2."""
    recs = [
        _sized(qwen, 30, arm="native", item=0),
        _sized(qwen, 50, arm="native", item=1),
        _sized(qwen, 10, arm="english", item=0),
        _sized(qwen, 30, arm="english", item=1),
        _sized(qwen, 1000, arm="other", item=0),
    ]
    table = validate_records(recs)
    assert role_mask(table, "comparator", tasks=[task_file]).tolist() == [False, False, True, True, False]
    row = behavioral_ratios(table, resampling=Resampling(50, 1), tasks=[task_file]).iloc[0]
    assert (row["native_mean"], row["translate_mean"], row["ratio"]) == (40.0, 20.0, 2.0)


def test_langid_expects_the_arms_reasoning_language(qwen, task_file):
    pytest.importorskip("fasttext", reason="needs the lid extra")
    recs = [
        make_record(qwen, "Wir rechnen jetzt.\n#### 4\n", arm=arm, task="plain", lang="deu_Latn", gold=4)
        for arm in ("native", "english")
    ]
    mgsm = make_record(qwen, "Translation: x\n\nWe add the eggs.\n#### 4\n", arm="pivot", gold=4)
    labels = label_traces(validate_records([*recs, mgsm]), load_lid_model(hub=False), tasks=[task_file])
    assert labels["expected"].tolist() == ["deu_Latn", "eng_Latn", "eng_Latn"]
    # MGSM's pivot reasons in English but has no translation segment: its whole text is analysed
    assert labels["segment"].iloc[2].startswith("Translation: x")


def test_the_default_suite_runs_on_a_users_task(qwen, task_file, tmp_path):
    path = tmp_path / "L"
    recs = [
        make_record(qwen, f"Rechnen.\n#### {4 + (s and arm == 'native')}\n", arm=arm, item=i, sample=s, gold=4)
        for arm in ("native", "english")
        for i in range(3)
        for s in range(2)
    ]
    Ledger(path).append([dict(r, task="plain", lang="deu_Latn") for r in recs], qwen)
    config = AuditConfig(budgets=(4, 8), tokenizers={"qwen3-8b": qwen}, tasks=[str(task_file)], references={})
    suite = run_audits(path, ["comet", "parser", "parity", "normalizer", "truncation"], config=config)
    status = {r.name: (r.status, r.reason) for r in suite.results}
    assert status["comet"] == (
        "skipped",
        "not applicable: no arm of task plain has a translation segment (arms.<arm>.translation)",
    )
    assert all(status[n][0] == "ok" for n in ("parser", "parity", "normalizer", "truncation")), status
    beh = next(r for r in suite.results if r.name == "normalizer").tables["behavioral"]
    assert beh["ratio"].tolist() == [1.0]  # "#### 4" and "#### 5" have as many tokens: native / english = 1
    trunc = next(r for r in suite.results if r.name == "truncation").tables["cells"]
    assert trunc["acc_at_cap"].tolist() == [1.0, 0.5]  # english always 4; native wrong in sample 1
