"""MGSM loader: row counts, gold answers with thousands separators, exemplars, language checks."""

from __future__ import annotations

import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.tasks.mgsm import MGSM_LANGUAGES, load_exemplars, load_mgsm, mgsm_gold, parse_gold


def test_every_language_has_250_items_with_identical_gold(config):
    gold = mgsm_gold(config.data_dir.value)
    assert len(MGSM_LANGUAGES) == 11
    for lang in MGSM_LANGUAGES:
        items = load_mgsm(lang, config.data_dir.value)
        assert len(items) == 250
        assert [it.answer for it in items] == gold
        assert [it.item for it in items] == list(range(250))


def test_known_rows_and_stripped_commas(config):
    th = load_mgsm("th", config.data_dir.value)
    # first rows of mgsm_th.tsv, read by hand: Janet's ducks (18), the robe (3), the house flip (70000)
    assert th[0].question.startswith("เป็ดของเจเน็ต") and th[0].answer == 18
    assert th[2].answer == 70000 and th[0].lang == "tha_Thai"
    with_commas = {it.answer_text: it.answer for it in load_mgsm("de", config.data_dir.value) if "," in it.answer_text}
    assert with_commas == {"2,125": 2125, "114,200": 114200, "276,000": 276000, "5,600": 5600}


def test_exemplars(config):
    ex = load_exemplars("sw", config.data_dir.value)
    assert [e.index for e in ex] == list(range(1, 9))
    assert [e.number_answer for e in ex] == [11, 29, 39, 9, 33, 8, 8, 5]
    assert ex[0].question.startswith("Swali: Roger") and ex[0].equation == "5 + 6 = 11."


def test_bad_inputs(config, tmp_path):
    with pytest.raises(MindcapError, match="MGSM has no"):
        load_mgsm("ko", config.data_dir.value)
    with pytest.raises(MindcapError, match="MGSM folder not found"):
        load_mgsm("th", tmp_path)
    with pytest.raises(MindcapError, match="not an integer"):
        parse_gold("3.5")
    (tmp_path / "mgsm").mkdir()
    (tmp_path / "mgsm" / "mgsm_th.tsv").write_text("q\t1\nq2\t2\n", encoding="utf-8")
    with pytest.raises(MindcapError, match="has 2 rows, expected 250"):
        load_mgsm("th", tmp_path)
