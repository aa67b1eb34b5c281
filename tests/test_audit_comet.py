"""COMET for real (extra ``comet``, its own environment ``.venv-comet``): a tiny locally built checkpoint.

A random 2-layer XLM-R encoder with a sentencepiece vocabulary trained on a few sentences, wrapped in
``comet.models.RegressionMetric`` and saved as ``hparams.yaml`` + ``checkpoints/model.ckpt``. Its scores
mean nothing; the test checks that the audit's COMET column is what COMET itself predicts for the same
(source, translation, reference) triples, and that the per-cell summaries follow from those scores.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.comet
comet = pytest.importorskip("comet", reason="needs the comet extra (its own environment, see scripts/test-all.sh)")

from comet_checkpoint import REFS, SOURCES, build_checkpoint  # noqa: E402
from ledger_factory import make_record  # noqa: E402
from mindcap_tok.audits import comet_scores, translation_audit  # noqa: E402
from mindcap_tok.store.schema import validate_records  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_checkpoint(tmp_path_factory.mktemp("comet"))


def test_comet_column_is_what_comet_predicts(qwen, checkpoint):
    recs = []
    for item in range(3):
        for s in range(2):
            seg = REFS[item] if s == 0 else REFS[item][:15]
            right = item != 2 and s == 0
            recs.append(
                make_record(
                    qwen,
                    f"Translation: {seg}\n\nSo.\n#### {item + (10 if right else 11)}\n",
                    arm="translate-act",
                    item=item,
                    sample=s,
                    gold=item + 10,
                )
            )
    res = translation_audit(
        validate_records(recs),
        REFS,
        tokenizers={"qwen3-8b": qwen},
        budgets=[4096],
        sources=SOURCES,
        comet_checkpoint=checkpoint,
    )
    from comet import load_from_checkpoint

    model = load_from_checkpoint(str(checkpoint))
    triples = [
        {"src": SOURCES[("tha_Thai", i)], "mt": REFS[i] if s == 0 else REFS[i][:15], "ref": REFS[i]}
        for i in range(3)
        for s in range(2)
    ]
    direct = np.asarray(model.predict(triples, batch_size=4, gpus=0, progress_bar=False).scores)
    assert np.isfinite(direct).all()
    assert comet_scores(
        [t["src"] for t in triples],
        [t["mt"] for t in triples],
        references=[t["ref"] for t in triples],
        checkpoint=checkpoint,
    ) == pytest.approx(direct, abs=1e-6)
    q = res.tables["quality"].iloc[0]
    assert q["comet_mean"] == pytest.approx(direct.mean(), abs=1e-6)
    assert q["comet_p10"] == pytest.approx(np.quantile(direct, 0.1), abs=1e-6)
    assert set(res.tables["correlation"]["metric"]) == {"chrf", "comet"}
    assert res.summary["comet_checkpoint"] == "model.ckpt"
