"""Round-trip prompts (translation and MQM judge) from versioned template files, ``resources/roundtrip/<v>.json``.

A released version is never edited; a change is a new file. Each hop stores its ``template_id``
(``roundtrip-v1:translate``) so the records say which wording produced them. A version also holds
``judge_schema``, the judge reply's format as a JSON schema, sent to engines that constrain decoding to it.

A job's own prompts (``prompts = "FILE.json"``) replace the packaged ones: a file of the packaged files' schema
(:class:`_PromptFile`, strict), its placeholders checked alike; its "version" is then the file's absolute path and
the spec records its SHA-256 (:func:`prompt_file`). Severity weights and the pass threshold are MQM's own
(:mod:`.mqm`): a file must state them unchanged.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .._io import regular_file
from ..errors import BadInputError
from ..spec import SpecError, validate
from ..templates import template_fields
from .mqm import PASS_THRESHOLD, WEIGHTS
from .sequences import language_name

DEFAULT_VERSION = "roundtrip-v1"
_PACKAGE = "mindcap_tok.resources.roundtrip"
_FIELDS = {"translate": {"src_lang", "tgt_lang", "text"}, "judge": {"original", "translation"}}


class _PromptFile(BaseModel):
    """The schema of a template file (packaged or a job's own)."""

    model_config = ConfigDict(strict=True, extra="forbid")
    version: str
    description: str = ""
    translate: str
    judge: str
    severities: dict[str, int]
    pass_threshold: int | float
    classifications: list[str]
    judge_schema: dict


def _is_file(version: str) -> bool:
    return version.endswith(".json")


def prompt_file(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(absolute path, SHA-256) of a job's own template file, checked as :func:`load_templates` checks one."""
    file = regular_file(path, "prompts file")
    if not file.is_file():
        raise BadInputError(f"prompts file not found: {file}")
    absolute = str(file.resolve())
    load_templates(absolute)
    return absolute, hashlib.sha256(file.read_bytes()).hexdigest()


def prompt_versions() -> list[str]:
    """Template versions shipped with the package."""
    files = resources.files(_PACKAGE).iterdir()
    return sorted(
        f.name.removesuffix(".json") for f in files if f.name.startswith("roundtrip-") and f.name.endswith(".json")
    )


@cache
def load_templates(version: str = DEFAULT_VERSION) -> dict:
    """The parsed template file of ``version``, each template checked for exactly its placeholders."""
    if _is_file(version):
        try:
            data = json.loads(Path(version).read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise BadInputError(f"cannot read prompts file {version}: {exc}") from exc
    elif version not in prompt_versions():
        raise BadInputError(f"unknown round-trip prompt version {version!r}; shipped: {', '.join(prompt_versions())}")
    else:
        data = json.loads(resources.files(_PACKAGE).joinpath(f"{version}.json").read_text("utf-8"))
    where = os.path.basename(version) if _is_file(version) else version
    validate(_PromptFile, data, key=where)
    if data["severities"] != WEIGHTS or data["pass_threshold"] != PASS_THRESHOLD:
        raise SpecError(where, f"severities and pass_threshold must be MQM's own ({WEIGHTS}, {PASS_THRESHOLD:g})")
    schema = data.get("judge_schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise BadInputError(f"round-trip template {version} has no judge_schema (a JSON schema of an object)")
    for key, want in _FIELDS.items():
        try:
            got = template_fields(data[key])
        except BadInputError as exc:
            raise BadInputError(f"round-trip template {version}/{key} {exc}") from None
        if got != want:
            raise BadInputError(
                f"round-trip template {version}/{key} has placeholders {sorted(got)}, not {sorted(want)}"
            )
    return data


def template_id(kind: str, version: str = DEFAULT_VERSION) -> str:
    """``<version>:translate`` or ``<version>:judge`` (a job's own file: its name without ``.json``)."""
    return f"{Path(version).stem if _is_file(version) else version}:{kind}"


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
