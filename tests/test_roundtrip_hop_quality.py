"""Quality along the chain: for FLORES texts every hop's output is scored against the FLORES text in that hop's
language (chrF, against sacrebleu), with the drop hop by hop and the hop of the largest drop, beside the token
ratio; file texts have no references and the report says so."""

from __future__ import annotations

import pandas as pd
import pytest

from mindcap_tok.data.flores import load_flores
from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report
from roundtrip_factory import SEQ, write_run

SOURCE = {"texts": "flores:devtest", "sample": 2}


def test_hops_scored_against_flores_in_their_language(tmp_path, qwen, flores_dir):
    sacrebleu = pytest.importorskip("sacrebleu")
    from mindcap_tok.roundtrip import parse_spec

    ids = [t.id for t in parse_spec({"model": "m", "sequences": ["en>de>en"], "seed": 3, **SOURCE}).texts]
    deu, eng = (
        load_flores("deu_Latn", "devtest", source=flores_dir),
        load_flores("eng_Latn", "devtest", source=flores_dir),
    )
    line = {i: int(i.split(":")[1]) for i in ids}
    # hop 1 gives the German reference itself (chrF 100); hop 2 gives back only the first half of the English
    outputs = {(1, i): deu[line[i]] for i in ids}
    outputs |= {(2, i): eng[line[i]][: len(eng[line[i]]) // 2] for i in ids}
    judged = {("qwen3-8b", "qwen3-8b", i): ("7-good", 0, 0, 0) for i in ids}
    run = write_run(tmp_path, qwen, None, judged, source=SOURCE, outputs=outputs)
    rep = roundtrip_report(
        run, tmp_path / "rep", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, lid=False, n_boot=9)
    )
    q = pd.read_csv(rep.out_dir / "hop_quality.csv").set_index("hop")
    chrf = sacrebleu.metrics.CHRF()
    back = [chrf.sentence_score(outputs[(2, i)], [eng[line[i]]]).score for i in ids]
    assert q.loc[1, "mean_ref_chrf"] == pytest.approx(100.0) and q.loc[1, "tgt_lang"] == "deu_Latn"
    assert q.loc[2, "mean_ref_chrf"] == pytest.approx(sum(back) / 2)
    assert q.loc[1, "chrf_drop"] == pytest.approx(0.0)  # from the source (100) to a perfect German hop
    assert q.loc[2, "chrf_drop"] == pytest.approx(100 - sum(back) / 2)
    assert list(q["largest_drop"]) == [False, True] and set(q["sequence"]) == {SEQ}
    assert q["token_ratio"].notna().all() and (q["n_scored"] == 2).all()
    assert "## Quality along the chain (FLORES references)" in (rep.out_dir / "report.md").read_text("utf-8")


def test_file_texts_have_no_references(tmp_path, qwen):
    run = write_run(tmp_path, qwen, {"t0": "One text."}, {("qwen3-8b", "qwen3-8b", "t0"): ("7-good", 0, 0, 0)})
    rep = roundtrip_report(
        run, tmp_path / "rep", options=ReportOptions(tokenizers={"qwen3-8b": qwen}, flores=False, lid=False, n_boot=9)
    )
    assert any(n.startswith("quality along the chain skipped: it needs FLORES texts") for n in rep.notes)
