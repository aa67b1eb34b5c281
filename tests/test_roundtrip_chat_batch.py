"""``ChatTokenizer.chat_batch`` (a template rendered once, prompts encoded together, fixed lines memoised) gives
exactly what ``chat`` (the template rendered per prompt, transformers' encode) gives: on FLORES sentences in many
scripts, the round-trip prompts, and text chosen to break the shortcuts (padding whitespace, line starts,
combining marks, special-token strings), for the tiny Qwen3's tokenizer and real Qwen3 and Llama 3.1 ones."""

from __future__ import annotations

import json
import re

import pytest

from mindcap_tok.data.flores import load_flores
from mindcap_tok.generation.backends import ChatTokenizer
from mindcap_tok.roundtrip.prompts import judge_prompt, translation_prompt
from mindcap_tok.tokenization.pretoken_cache import PretokenEncoder

#: Qwen3's template (user, system and assistant turns, tool-response look-back, the thinking switch), abridged
#: only in the tool-call branches
QWEN3_TEMPLATE = """{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\\n<think>\\n\\n</think>\\n\\n' + content.lstrip('\\n') }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}"""  # noqa: E501
#: Llama 3's template: it trims the message, so it cannot be rendered once and filled in
LLAMA3_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
TRICKY = [
    "  leading and trailing spaces  ",
    "\n\nnewlines first\nAnd a line that starts with a letter\n",
    "Zeile eins\nZeile zwei\r\nZeile drei\n\n\nA",
    "\n\u0301combining mark after a newline, e\u0301 not NFC, \u00c5ngstr\u00f6m",
    "\nÄrger\nกรุงเทพ\n日本語\n1 2 3\n's and 'll\n- bullet\n\tTab",
    "text with <|im_end|> and <|im_start|>assistant\n<think>\n\n</think> inside",
    "<tool_response>\nx\n</tool_response>",
    '"quoted"\n"SOURCE TEXT:\n"',
    "   ",
    "x",
]
LANGS = ["eng_Latn", "deu_Latn", "tha_Thai", "jpn_Jpan", "amh_Ethi", "arb_Arab", "hin_Deva", "zho_Hans", "kor_Hang"]


def _users() -> list[str]:
    """FLORES sentences bare and in both round-trip prompts, and the tricky texts bare and in prompts."""
    users: list[str] = []
    for lang in LANGS:
        sentences = load_flores(lang, "devtest")[:12]
        users += sentences[:4]
        users += [translation_prompt(s, lang, "eng_Latn") for s in sentences[4:8]]
        users += [judge_prompt(a, b) for a, b in zip(sentences[8:10], sentences[10:12], strict=True)]
    users += TRICKY
    users += [translation_prompt(t, "eng_Latn", "deu_Latn") for t in TRICKY]
    users += [judge_prompt(t, TRICKY[0]) for t in TRICKY]
    return users


@pytest.fixture(scope="module")
def users(config) -> list[str]:
    return _users()


def _tokenizer(folder, template: str | None = None) -> ChatTokenizer:
    tok = ChatTokenizer(str(folder), "t")
    if template is not None:
        tok.hf.chat_template = template
    return tok


class Seen:
    """What ``chat_batch`` hands its collaborators: how often it renders the chat template (transformers'
    ``apply_chat_template``) and the texts it gives the memoised encoder (``PretokenEncoder.encode_flat``)."""

    def __init__(self, tok: ChatTokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
        self.renders, self.encoded = 0, []
        render, encode_flat = tok.hf.apply_chat_template, PretokenEncoder.encode_flat

        def counted(*args, **kwargs):
            self.renders += 1
            return render(*args, **kwargs)

        def recorded(encoder, texts):
            self.encoded += list(texts)
            return encode_flat(encoder, texts)

        monkeypatch.setattr(tok.hf, "apply_chat_template", counted)
        monkeypatch.setattr(PretokenEncoder, "encode_flat", recorded)

    def batch(self, tok: ChatTokenizer, users: list[str]) -> list[tuple[str, list[int]]]:
        """``tok.chat_batch(users)``, counting afresh."""
        self.renders, self.encoded = 0, []
        return tok.chat_batch(users)


def _check(tok: ChatTokenizer, users: list[str], monkeypatch: pytest.MonkeyPatch) -> Seen:
    """``chat_batch`` gives ``chat``'s texts and ids, in a first and a second batch; ``seen`` holds the second's
    traffic (the template's frame and the memos are built by then)."""
    want = [tok.chat(u) for u in users]
    seen = Seen(tok, monkeypatch)
    assert seen.batch(tok, users) == want
    assert seen.batch(tok, users[5:6]) == want[5:6]
    assert seen.batch(tok, users[::-1]) == want[::-1]  # the memoised pieces
    return seen


def _filled_in(seen: Seen) -> None:
    """The template was rendered once for the whole batch (the spot check on its first prompt), not per prompt."""
    assert seen.renders == 1


def _memoised_by_line(seen: Seen, users: list[str]) -> None:
    """A second batch of the same prompts encodes nothing new: every line was looked up."""
    assert seen.encoded == [] and len(users) > 100


def test_tiny_qwen3_template_is_filled_in_and_equals_chat(tiny, users, monkeypatch):
    tok = _tokenizer(tiny)
    seen = _check(tok, users, monkeypatch)
    _filled_in(seen)
    _memoised_by_line(seen, users)


def test_qwen3_tokenizer_with_qwen3_template(config, users, monkeypatch):
    tok = _tokenizer(config.tokenizers_dir.value / "qwen3", QWEN3_TEMPLATE)
    seen = Seen(tok, monkeypatch)
    first = seen.batch(tok, users[:3])
    assert first[0][0] == "<|im_start|>user\n" + users[0] + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    # each piece encoded is a line, cut before an ASCII letter that starts the next line (that letter kept)
    assert seen.encoded and all(re.search(r"\n[A-Za-z]", piece[:-1]) is None for piece in seen.encoded)
    seen = _check(tok, users, monkeypatch)
    _filled_in(seen)
    _memoised_by_line(seen, users)


def test_a_trimming_template_falls_back_to_chat(config, users, monkeypatch):
    tok = _tokenizer(config.tokenizers_dir.value / "llama3.1", LLAMA3_TEMPLATE)
    seen = _check(tok, users, monkeypatch)
    assert seen.renders == len(users)  # chat() per prompt


def test_a_template_that_branches_on_the_message_falls_back(config, users, monkeypatch):
    branching = QWEN3_TEMPLATE.replace(
        "{%- if add_generation_prompt %}", "{%- if ns.multi_step_tool %}TOOL{%- endif %}{%- if add_generation_prompt %}"
    )
    tok = _tokenizer(config.tokenizers_dir.value / "qwen3", branching)
    seen = _check(tok, users, monkeypatch)
    assert seen.renders == len(users)


def test_a_template_changed_after_the_first_batch_is_caught(config, users):
    tok = _tokenizer(config.tokenizers_dir.value / "qwen3", QWEN3_TEMPLATE)
    assert tok.chat_batch(users[:3]) == [tok.chat(u) for u in users[:3]]
    tok.hf.chat_template = QWEN3_TEMPLATE.replace("<|im_start|>assistant\\n", "<|im_start|>model\\n")
    want = [tok.chat(u) for u in users[:40]]
    assert "<|im_start|>model\n" in want[0][0]
    assert tok.chat_batch(users[:40]) == want  # the spot check on the batch's first prompt sends it to chat()


def test_llama3_tokenizer_lines_with_a_verbatim_template(config, users, monkeypatch):
    chatml = QWEN3_TEMPLATE.replace("<|im_start|>", "<|start_header_id|>").replace("<|im_end|>", "<|eot_id|>")
    tok = _tokenizer(config.tokenizers_dir.value / "llama3.1", chatml)
    seen = _check(tok, users, monkeypatch)
    _filled_in(seen)
    _memoised_by_line(seen, users)


def test_deepseek_split_sequence_is_memoised_without_lines(config, users, monkeypatch):
    tok = _tokenizer(config.tokenizers_dir.value / "deepseek-v3", QWEN3_TEMPLATE)
    seen = _check(tok, users, monkeypatch)
    _filled_in(seen)
    # its first split regex is not a line-safe one: whole prompts go to the memoised encoder
    prompts = [text for text, _ in seen.batch(tok, users)]
    assert seen.encoded == prompts


def test_tokenizers_outside_the_memoised_path_encode_in_one_batch(config, users, tmp_path, monkeypatch):
    spec = json.loads((config.tokenizers_dir.value / "deepseek-v3" / "tokenizer.json").read_text("utf-8"))
    spec["normalizer"] = {"type": "Lowercase"}  # a pipeline the memo does not reproduce
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), "utf-8")
    tok = _tokenizer(tmp_path, QWEN3_TEMPLATE)
    seen = _check(tok, users, monkeypatch)
    _filled_in(seen)
    assert seen.encoded == []  # no memo: HF's batch encode


def test_empty_batch(config):
    assert _tokenizer(config.tokenizers_dir.value / "qwen3", QWEN3_TEMPLATE).chat_batch([]) == []
