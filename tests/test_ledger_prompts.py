"""Prompt templates: every arm x MGSM language x announcement style builds, with its id and wording."""

from __future__ import annotations

import pytest

from mindcap_tok.data.mgsm import MGSM_LANGUAGES
from mindcap_tok.errors import MindcapError
from mindcap_tok.generation.prompts import build_prompt, load_templates, mgsm_prompts, prompt_languages, prompt_versions
from mindcap_tok.store.schema import ARMS


def test_templates_cover_all_mgsm_languages():
    assert "mgsm-v1" in prompt_versions()
    assert sorted(prompt_languages()) == sorted(MGSM_LANGUAGES)


@pytest.mark.parametrize("lang", MGSM_LANGUAGES)
def test_every_arm_and_style_builds(lang):
    data = load_templates()
    local = data["languages"][lang]
    question = "Q-17?"
    for arm in ARMS:
        plain = build_prompt(question, arm, lang=lang)
        assert plain.template_id == f"mgsm-v1:{arm}:{lang}:none" and plain.announce_style == "none"
        assert plain.text.endswith(f" {question}") and "#### <" in plain.text
        english = arm in ("translate-act", "code-switched")
        assert plain.text.startswith(data["english"][arm].split("{")[0] if english else local[arm])
        natural = build_prompt(question, arm, lang=lang, announced=128)
        sentence = (data["english"] if english else local)["announce"].format(budget=128)
        assert natural.announce_style == "natural" and sentence in natural.text and "TOKEN_BUDGET" not in natural.text
        tag = build_prompt(question, arm, lang=lang, announced=2048, style="tag")
        assert "\n\nTOKEN_BUDGET: 2048\n\n" in tag.text and tag.template_id.endswith(":tag")
        assert sentence.replace("128", "2048") not in tag.text
    code_switched = build_prompt(question, "code-switched", lang=lang).text
    assert local["name_en"] in code_switched


def test_prompt_errors():
    with pytest.raises(MindcapError, match="unknown arm"):
        build_prompt("q", "english-only", lang="th")
    with pytest.raises(MindcapError, match="has no kor_Hang"):
        build_prompt("q", "native", lang="ko")
    with pytest.raises(MindcapError, match="give an announced budget"):
        build_prompt("q", "native", lang="th", style="tag")
    with pytest.raises(MindcapError, match="unknown prompt version"):
        build_prompt("q", "native", lang="th", version="mgsm-v0")


def test_mgsm_prompts_pair_items_and_prompts(config):
    pairs = mgsm_prompts("native", "sw", data_dir=config.data_dir.value, announced=256, style="natural")
    assert len(pairs) == 250
    item, prompt = pairs[3]
    assert item.item == 3 and prompt.text.endswith(item.question) and "256" in prompt.text
