"""A job's own prompts (``prompts = "FILE.json"``): the packaged file's schema, validated strictly, replacing the
packaged templates, its SHA-256 in the run's identity; bad files are one-line errors."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import pytest

from mindcap_tok.errors import MindcapError
from mindcap_tok.roundtrip import parse_spec
from mindcap_tok.roundtrip.prompts import judge_prompt, template_id, translation_prompt


def packaged() -> dict:
    return json.loads(resources.files("mindcap_tok.resources.roundtrip").joinpath("roundtrip-v1.json").read_text())


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "Hello there."}) + "\n", "utf-8")
    return str(path)


def spec_with(tmp_path, texts, data: dict, name: str = "mine.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), "utf-8")
    return parse_spec(
        {"model": "org/m", "texts": texts, "sequences": ["en>de>en"], "prompts": name}, base=tmp_path
    ), path


def test_own_prompts_replace_the_packaged_ones_and_are_hashed(tmp_path, texts):
    data = packaged() | {"version": "mine-1", "translate": "Render {text} from {src_lang} into {tgt_lang}."}
    spec, path = spec_with(tmp_path, texts, data)
    assert (
        translation_prompt("Hi.", "eng_Latn", "deu_Latn", spec.prompt_version) == "Render Hi. from English into German."
    )
    assert judge_prompt("a", "b", spec.prompt_version) == judge_prompt("a", "b")  # the judge wording kept as given
    assert spec.prompts_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert spec.identity()["prompts_sha256"] == spec.prompts_sha256 and spec.as_dict()["prompts_sha256"]
    assert template_id("translate", spec.prompt_version) == "mine:translate"
    plain = parse_spec({"model": "org/m", "texts": texts, "sequences": ["en>de>en"]})
    assert "prompts_sha256" not in plain.identity() and plain.prompt_version == "roundtrip-v1"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"judge": 3}, r"mine\.json\.judge: must be of type string"),
        ({"colour": "red"}, r"mine\.json\.colour: unknown key"),
        ({"translate": "Translate {text}."}, r"placeholders \['text'\], not \['src_lang', 'text', 'tgt_lang'\]"),
        (
            {"translate": "{src_lang} {tgt_lang} {text:>99999}"},
            r"translate placeholder '\{text:>99999\}' must be a plain",
        ),
        ({"translate": "{src_lang} {tgt_lang} {text!r}"}, r"translate placeholder '\{text!r\}' must be a plain"),
        ({"severities": {"minor": 1, "major": 10, "critical": 25}}, "must be MQM's own"),
    ],
)
def test_bad_prompt_files_are_one_line_errors(tmp_path, texts, change, problem):
    with pytest.raises(MindcapError, match=problem):
        spec_with(tmp_path, texts, packaged() | change)


def test_prompts_and_prompt_version_together_are_refused(tmp_path, texts):
    (tmp_path / "p.json").write_text(json.dumps(packaged()), "utf-8")
    with pytest.raises(MindcapError, match="not both"):
        parse_spec(
            {
                "model": "org/m",
                "texts": texts,
                "sequences": ["en>de>en"],
                "prompts": "p.json",
                "prompt_version": "roundtrip-v1",
            },
            base=tmp_path,
        )
    with pytest.raises(MindcapError, match="prompts file not found"):
        parse_spec({"model": "org/m", "texts": texts, "sequences": ["en>de>en"], "prompts": "nope.json"}, base=tmp_path)
