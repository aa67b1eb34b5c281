"""Premiums on parallel MGSM content (`premium --corpus mgsm | mgsm-answers`), against figures worked out for Qwen3."""

from __future__ import annotations

import json
import unicodedata

import pytest
from click.testing import CliRunner

from mindcap_tok.cli.main import cli
from mindcap_tok.premium import PremiumText, token_premium
from mindcap_tok.resample import Resampling

EXPECTED = {  # the issue's figures (Qwen3 tokenizer, point estimates, 3 decimals)
    "mgsm": {"deu_Latn": 1.337, "tha_Thai": 2.120, "swh_Latn": 1.736},
    "mgsm-answers": {"deu_Latn": 1.248, "tha_Thai": 2.185, "swh_Latn": 1.401},
}
SHORT = {"eng_Latn": "en", "deu_Latn": "de", "tha_Thai": "th", "swh_Latn": "sw"}


@pytest.fixture(scope="module")
def mgsm_dir(config):
    return config.data_dir.value / "mgsm"


def _direct(qwen, mgsm_dir, corpus: str, lang: str) -> int:
    """Tokens of the raw files read here, one encode per text (no loader, no batching)."""
    if corpus == "mgsm":
        rows = (mgsm_dir / f"mgsm_{SHORT[lang]}.tsv").read_text("utf-8").splitlines()
        texts = [row.rsplit("\t", 1)[0] for row in rows]
    else:
        by_lang = json.loads((mgsm_dir / "mgsm_exemplars.json").read_text("utf-8"))["MGSM_EXEMPLARS"][SHORT[lang]]
        texts = [by_lang[k]["a"] for k in sorted(by_lang, key=int)]
    enc = qwen.tokenizer.encode
    return sum(len(enc(unicodedata.normalize("NFC", t), add_special_tokens=False).ids) for t in texts)


@pytest.mark.parametrize("corpus", ["mgsm", "mgsm-answers"])
def test_mgsm_premiums_match_the_issue_and_a_direct_count(qwen, mgsm_dir, corpus):
    rows = token_premium(
        qwen, ["de", "th", "sw"], source=str(mgsm_dir), text=PremiumText(split=corpus), resampling=Resampling(400, 1)
    )
    ref = _direct(qwen, mgsm_dir, corpus, "eng_Latn")
    for r in rows:
        assert (r.tokens, r.ref_tokens) == (_direct(qwen, mgsm_dir, corpus, r.lang), ref)
        assert round(r.premium, 3) == EXPECTED[corpus][r.lang]
        assert r.ci_low < r.premium < r.ci_high and r.split == corpus and r.n_boot == 400
        assert r.n_pairs == (250 if corpus == "mgsm" else 8)


def test_premium_cli_corpus_mgsm_and_its_refusals():
    run = CliRunner().invoke
    res = run(cli, ["premium", "--corpus", "mgsm-answers", "--n-boot", "100", "--format", "json"])
    assert res.exit_code == 0, res.output
    out = {r["lang"]: r for r in json.loads(res.output)}
    assert round(out["tha_Thai"]["premium"], 3) == 2.185 and out["tha_Thai"]["split"] == "mgsm-answers"
    bad = run(cli, ["premium", "--corpus", "mgsm", "--split", "dev"])
    assert bad.exit_code == 2 and "--split" in bad.output
    bad = run(cli, ["premium", "--corpus", "mgsm", "--lang", "ko"])
    assert bad.exit_code == 2 and "MGSM has no kor_Hang" in bad.output
