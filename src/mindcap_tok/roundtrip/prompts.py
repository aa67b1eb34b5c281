"""Round-trip prompts (translation and MQM judge) from versioned template files, ``resources/roundtrip/<v>.json``.

A released version is never edited; a change is a new file. Each hop stores its ``template_id``
(``roundtrip-v1:translate``) so the records say which wording produced them. A version also holds
``judge_schema``, the judge reply's format as a JSON schema, sent to engines that constrain decoding to it.
"""

from __future__ import annotations

import copy
import json
import string
from functools import cache
from importlib import resources

from ..errors import MindcapError
from .sequences import language_name

DEFAULT_VERSION = "roundtrip-v1"
_PACKAGE = "mindcap_tok.resources.roundtrip"
_FIELDS = {"translate": {"src_lang", "tgt_lang", "text"}, "judge": {"original", "translation"}}


def prompt_versions() -> list[str]:
    """Template versions shipped with the package."""
    files = resources.files(_PACKAGE).iterdir()
    return sorted(
        f.name.removesuffix(".json") for f in files if f.name.startswith("roundtrip-") and f.name.endswith(".json")
    )


@cache
def load_templates(version: str = DEFAULT_VERSION) -> dict:
    """The parsed template file of ``version``, each template checked for exactly its placeholders."""
    if version not in prompt_versions():
        raise MindcapError(f"unknown round-trip prompt version {version!r}; shipped: {', '.join(prompt_versions())}")
    data = json.loads(resources.files(_PACKAGE).joinpath(f"{version}.json").read_text("utf-8"))
    schema = data.get("judge_schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise MindcapError(f"round-trip template {version} has no judge_schema (a JSON schema of an object)")
    for key, want in _FIELDS.items():
        got = {name for _, name, _, _ in string.Formatter().parse(data[key]) if name is not None}
        if got != want:
            raise MindcapError(
                f"round-trip template {version}/{key} has placeholders {sorted(got)}, not {sorted(want)}"
            )
    return data


def template_id(kind: str, version: str = DEFAULT_VERSION) -> str:
    """``<version>:translate`` or ``<version>:judge``."""
    return f"{version}:{kind}"


def translation_prompt(text: str, src: str, tgt: str, version: str = DEFAULT_VERSION) -> str:
    """The translation prompt (E.3) for ``text`` from FLORES code ``src`` into ``tgt``."""
    return load_templates(version)["translate"].format(
        src_lang=language_name(src), tgt_lang=language_name(tgt), text=text
    )


def judge_prompt(original: str, translation: str, version: str = DEFAULT_VERSION) -> str:
    """The MQM judge prompt (E.4) comparing the original with its back-translation."""
    return load_templates(version)["judge"].format(original=original, translation=translation)


def judge_schema(version: str = DEFAULT_VERSION) -> dict:
    """The judge reply's JSON schema (the format E.4 asks for: score, classification, issues of three
    severities), for engines that constrain decoding to it; a fresh copy."""
    return copy.deepcopy(load_templates(version)["judge_schema"])
