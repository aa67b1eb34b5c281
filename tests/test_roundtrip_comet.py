"""COMET in the round-trip report (extra ``comet``, its own environment ``.venv-comet``): the column is what COMET
itself predicts for (source, back-translation, source), using the tiny checkpoint of ``comet_checkpoint``."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.comet
comet = pytest.importorskip("comet", reason="needs the comet extra (its own environment, see scripts/test-all.sh)")

from comet_checkpoint import build_checkpoint  # noqa: E402
from mindcap_tok.roundtrip.report import ReportOptions, roundtrip_report  # noqa: E402
from roundtrip_two_sequences import BACK, SEQ, SOURCES, write_two_sequence_run  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_checkpoint(tmp_path_factory.mktemp("comet"))


@pytest.fixture(scope="module")
def run(tmp_path_factory, qwen):
    return write_two_sequence_run(tmp_path_factory.mktemp("rt"), qwen)


def test_comet_of_each_back_translation_is_what_comet_predicts(run, qwen, checkpoint, tmp_path):
    result = roundtrip_report(
        run,
        tmp_path / "report",
        options=ReportOptions(
            tokenizers={"qwen3-8b": qwen}, flores=False, lid=False, comet_checkpoint=checkpoint, n_boot=50
        ),
    )
    pairs = [(tid, lang, back) for lang, by_text in BACK.items() for tid, back in by_text.items() if back]
    triples = [{"src": SOURCES[t][0], "mt": b, "ref": SOURCES[t][0]} for t, _, b in pairs]
    model = comet.load_from_checkpoint(str(checkpoint))
    direct = np.asarray(model.predict(triples, batch_size=4, gpus=0, progress_bar=False).scores)
    samples = result.samples.set_index(["text_id", "sequence"])
    got = [samples.loc[(t, SEQ[lang]), "comet"] for t, lang, _ in pairs]
    assert got == pytest.approx(direct, abs=1e-6)
    assert np.isnan(samples.loc[("t3", SEQ["fra_Latn"]), "comet"])  # a failed chain has no back-translation
    table = result.chrf.set_index(["by", "group"])
    assert table.loc[("overall", "all"), "mean_comet"] == pytest.approx(direct.mean(), abs=1e-6)
    assert result.summary["comet_checkpoint"] == "model.ckpt"
    assert "## chrF and COMET of the back-translation" in (tmp_path / "report" / "report.md").read_text("utf-8")


def test_comet_of_each_hop_is_what_comet_predicts_against_the_hops_reference(checkpoint):
    import pandas as pd

    from mindcap_tok.roundtrip.report import add_hop_comet

    detail = pd.DataFrame(
        {
            "src_reference": ["The cat sleeps.", "Der Hund bellt.", "Il pleut."],
            "text": ["Die Katze schläft.", "The dog barks.", ""],
            "reference": ["Die Katze schläft gerade.", "The dog is barking.", "It rains."],
            "empty": [False, False, True],
        }
    )
    got = add_hop_comet(detail, checkpoint)["ref_comet"].to_numpy()
    model = comet.load_from_checkpoint(str(checkpoint))
    triples = [
        {"src": s, "mt": m, "ref": r} for s, m, r in detail.iloc[:2][["src_reference", "text", "reference"]].values
    ]
    direct = np.asarray(model.predict(triples, batch_size=4, gpus=0, progress_bar=False).scores)
    assert got[:2] == pytest.approx(direct, abs=1e-6) and np.isnan(got[2])  # an empty hop output is not scored
