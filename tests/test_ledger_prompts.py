"""MGSM's prompts from its task file: every arm x language x announcement style builds, with its id and wording."""

from __future__ import annotations

import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.generation import task_prompt
from mindcap_tok.tasks.datasets import TaskItem, load_items
from mindcap_tok.tasks.load import load_task
from mindcap_tok.tasks.mgsm import MGSM_LANGUAGES

MGSM = load_task("mgsm")
#: the arms whose instructions are English in every language (translate-act, code-switched)
ENGLISH_INSTRUCTIONS = ("translate-act", "code-switched")
ENGLISH_ANNOUNCE = "You have a budget of 128 tokens for your answer."


def test_the_task_covers_every_mgsm_language_and_four_arms():
    assert sorted(MGSM.languages) == sorted(MGSM_LANGUAGES)
    assert list(MGSM.arms) == ["native", "translate-act", "pivot", "code-switched"]
    assert (MGSM.native, MGSM.comparator, MGSM.template_version) == ("native", "translate-act", "mgsm-v1")


def _announcement(prompt_text: str, plain_text: str) -> str:
    """The sentence a natural announcement adds after the instruction."""
    return prompt_text.split("\n\n")[0].removeprefix(plain_text.split("\n\n")[0] + " ")


@pytest.mark.parametrize("lang", MGSM_LANGUAGES)
def test_every_arm_and_style_builds(lang):
    item = TaskItem(17, lang, {"question": "Q-17?"}, 5)
    native_plain = task_prompt(MGSM, item, arm="native")
    native_sentence = _announcement(task_prompt(MGSM, item, arm="native", announced=128).text, native_plain.text)
    assert "128" in native_sentence and (lang != "eng_Latn") == (native_sentence != ENGLISH_ANNOUNCE)
    for arm in MGSM.arms:
        plain = task_prompt(MGSM, item, arm=arm)
        assert plain.template_id == f"mgsm-v1:{arm}:{lang}:none" and plain.announce_style == "none"
        instruction, body = plain.text.split("\n\n")
        assert body.endswith(" Q-17?") and '"#### <' in instruction
        natural = task_prompt(MGSM, item, arm=arm, announced=128)
        assert natural.template_id == f"mgsm-v1:{arm}:{lang}:natural" and "TOKEN_BUDGET" not in natural.text
        english = arm in ENGLISH_INSTRUCTIONS
        assert _announcement(natural.text, plain.text) == (ENGLISH_ANNOUNCE if english else native_sentence)
        assert body == ("Problem: Q-17?" if english else native_plain.text.split("\n\n")[1])
        tag = task_prompt(MGSM, item, arm=arm, announced=2048, style="tag")
        assert tag.text == f"{instruction}\n\nTOKEN_BUDGET: 2048\n\n{body}" and tag.template_id.endswith(":tag")


def test_code_switched_names_the_language_in_english():
    for lang, name in (("tha_Thai", "Thai"), ("deu_Latn", "German"), ("swh_Latn", "Swahili")):
        text = task_prompt(MGSM, TaskItem(0, lang, {"question": "q"}, 1), arm="code-switched").text
        assert f"write the reasoning inside each step in {name}." in text


def test_prompt_errors():
    item = TaskItem(0, "tha_Thai", {"question": "q"}, 1)
    with pytest.raises(MindcapError, match="task mgsm has no arm 'english-only'"):
        task_prompt(MGSM, item, arm="english-only")
    with pytest.raises(MindcapError, match="task mgsm has no kor_Hang"):
        task_prompt(MGSM, TaskItem(0, "kor_Hang", {"question": "q"}, 1), arm="native")
    with pytest.raises(MindcapError, match="give an announced budget"):
        task_prompt(MGSM, item, arm="native", style="tag")
    with pytest.raises(MindcapError, match="announced budget must be positive"):
        task_prompt(MGSM, item, arm="native", announced=0)


def test_mgsm_items_take_their_prompts(config):
    items = load_items(MGSM, "swh_Latn", data_dir=config.data_dir.value)
    assert len(items) == 250
    prompt = task_prompt(MGSM, items[3], arm="native", announced=256, style="natural")
    assert items[3].item == 3 and prompt.text.endswith(items[3].fields["question"]) and "256" in prompt.text
