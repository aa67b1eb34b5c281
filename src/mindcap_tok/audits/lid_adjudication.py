"""Blind LLM adjudication of the trace-language labels (the paper's §5: 240 traces, 96.7% agreement).

A stratified, seeded sample of determinate traces (``per_cell`` per population, drawn as the langid validation
sample is: the same seed and size give the same traces) is shown to a judge model through any generation backend
(:mod:`mindcap_tok.generation.backends`), one greedy request per trace with a seed derived from the run's. The prompt
is a versioned data file (``resources/lid-judge-v1.json``) holding the text the automated LID analysed and
nothing else, so the judge is blind to the cell, the arm and the automated label.

A reply is read by the JSON readers the round-trip judge uses (:func:`~mindcap_tok._json.reply_json_values`:
``{"language": ...}``), else as a bare code or English name (``plain``), else by the one FLORES-style code it
contains (``code-in-text``); anything else (a reply nested too deeply to read among it) is *unparseable*,
counted as such and left out of every agreement's denominator. Agreement with the automated label is reported
exactly and under the macrolanguage mapping, per population and pooled, with Wilson intervals, and every trace
where the two differ (or the reply is unparseable) is listed. Replies are held in memory and the audit report is
written in one step, so an interrupted run leaves nothing half-written; it is rerun whole.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import pandas as pd

from .._json import NestedTooDeepError, reply_json_values
from ..data.languages import resolve_language
from ..errors import BackendError, BadInputError, MindcapError
from ..generation import GenRequest
from ..metrics.langid import macro_group, macrolanguages, normalize_label
from ..spec import seed_hash
from ..store import population_columns
from ..templates import template_fields
from ._common import stratified_sample
from .determinism import wilson_interval

DEFAULT_PROMPT = "lid-judge-v1"
#: traces per population (the paper: 20 in each of 12 cells, 240 traces)
PER_CELL = 20
#: the judge's reply cap: a short JSON object
MAX_TOKENS = 64
#: a reply longer than this is not read as a bare language name
_PLAIN_CHARS = 40
_CODE_IN_TEXT = re.compile(r"(?<![A-Za-z])([a-z]{3}_[A-Z][a-z]{3})(?![A-Za-z])")
_CODE = re.compile(r"[A-Za-z]{3}_[A-Za-z]{4}")


@dataclass(frozen=True)
class LidJudge:
    """The judge: a started backend (:func:`~mindcap_tok.generation.backends.load_backend`) and how to ask it.

    ``model`` is the name recorded; ``structured`` sends the reply's JSON schema to engines that constrain
    decoding to it (the transformers backend ignores it)."""

    backend: Any
    model: str
    per_cell: int = PER_CELL
    max_tokens: int = MAX_TOKENS
    structured: bool = True
    prompt: str = DEFAULT_PROMPT


@cache
def load_prompt(version: str = DEFAULT_PROMPT) -> dict:
    """The judge prompt file ``resources/<version>.json`` and its ``sha256``: ``prompt`` with exactly the
    placeholder ``{text}``, ``reply_schema`` a JSON schema of an object."""
    file = resources.files("mindcap_tok.resources").joinpath(f"{version}.json")
    if not version.startswith("lid-judge-") or not file.is_file():
        raise BadInputError(f"unknown language-ID judge prompt {version!r}; shipped: {DEFAULT_PROMPT}")
    raw = file.read_bytes()
    data = json.loads(raw)
    fields = template_fields(data["prompt"])  # a shipped file: a bad one is the package's own fault
    if fields != {"text"} or data.get("reply_schema", {}).get("type") != "object":
        raise BadInputError(f"judge prompt {version} needs exactly the placeholder {{text}} and an object reply_schema")
    return {**data, "sha256": hashlib.sha256(raw).hexdigest()}


def judge_prompt(text: str, version: str = DEFAULT_PROMPT) -> str:
    """The judge's user message for one trace text."""
    return load_prompt(version)["prompt"].format(text=text)


@cache
def _names() -> dict[str, str]:
    """English language name (lower case) -> FLORES code, from the round-trip prompts' names table."""
    text = resources.files("mindcap_tok.resources").joinpath("roundtrip").joinpath("sequences.json").read_text("utf-8")
    return {name.lower(): code for code, name in json.loads(text)["names"].items()}


def language_code(label: str) -> str | None:
    """The FLORES-style code of a judge's label: a code (``tha_Thai``, ``swc_Latn``, ``th``, ``tha``) or an
    English name (``Thai``); ``None`` when it names no known language."""
    raw = label.strip().strip("\"'`*.").strip()
    if _CODE.fullmatch(raw):
        return normalize_label(raw)
    if raw.lower() in _names():
        return _names()[raw.lower()]
    try:
        return resolve_language(raw)
    except MindcapError:
        return None


@dataclass(frozen=True)
class LanguageReply:
    """A read judge reply: ``how`` the reader that found the language (``None``: unparseable, ``error`` why)."""

    how: str | None
    code: str | None = None
    error: str | None = None


def parse_language(reply: str) -> LanguageReply:
    """Read one judge reply (see the module docs)."""
    body = reply.strip()
    if not body:
        return LanguageReply(None, error="empty reply")
    try:
        for how, value in reply_json_values(body):
            label = value.get("language") if isinstance(value, dict) else value
            if isinstance(label, str):
                code = language_code(label)
                return LanguageReply(how, code) if code else LanguageReply(None, error=f"unknown language {label!r}")
    except NestedTooDeepError as exc:
        return LanguageReply(None, error=f"not read: {exc}")
    code = language_code(body) if len(body) <= _PLAIN_CHARS else None
    if code:
        return LanguageReply("plain", code)
    found = set(_CODE_IN_TEXT.findall(body))
    if len(found) == 1:
        return LanguageReply("code-in-text", normalize_label(found.pop()))
    return LanguageReply(None, error="several language codes in the reply" if found else "no language in the reply")


def adjudication_sample(labels: pd.DataFrame, per_cell: int = PER_CELL, *, seed: int = 0) -> pd.DataFrame:
    """``per_cell`` determinate traces per population of :func:`~.langid.label_traces`' table, seeded; the
    draw of :func:`~.langid.validation_sample`, so judge and human validation can share one sample."""
    det = labels[labels["status"] == "determinate"].reset_index(drop=True)
    return det.iloc[stratified_sample(det, population_columns(det), per_cell, seed)].reset_index(drop=True)


def ask_judge(judge: LidJudge, texts: Sequence[str], *, seeds: Sequence[int]) -> list[tuple[str, str]]:
    """(reply text, finish reason) of the judge for each trace text: one greedy request each, with its seed."""
    backend = judge.backend
    users = [judge_prompt(t, judge.prompt) for t in texts]
    schema = load_prompt(judge.prompt)["reply_schema"] if judge.structured else None
    prompts = zip(users, seeds, backend.tok.chat_batch(users), strict=True)
    requests = [
        GenRequest(
            tuple(ids), 1, judge.max_tokens, seed, 0.0, text=text, user=user, name=f"lid judge {i}", json_schema=schema
        )
        for i, (user, seed, (text, ids)) in enumerate(prompts)
    ]
    done = backend.generate(requests) if requests else []
    if len(done) != len(requests) or any(len(c) != 1 for c in done):
        raise BackendError("the judge backend returned a different number of completions than requested")
    texts_out = backend.tok.decode_batch([c[0].ids for c in done]) if done else []
    return [(t, c[0].finish_reason) for t, c in zip(texts_out, done, strict=True)]


def _agreement(group: pd.DataFrame, level: float) -> dict:
    """Counts and Wilson intervals of one group of judged traces (unparseable replies in no denominator)."""
    parsed = group[group["judge_label"].notna()]
    n_parsed = len(parsed)
    row: dict[str, float | None] = {"sampled": len(group), "parsed": n_parsed, "unparseable": len(group) - n_parsed}
    for column, name in (("agree", "agreement"), ("agree_macro", "agreement_macro")):
        hits = int(parsed[column].sum())
        low, high = wilson_interval(hits, len(parsed), level=level)
        share = hits / len(parsed) if len(parsed) else None
        row.update({column: hits, name: share, f"{name}_low": low, f"{name}_high": high})
    return row


def _one_line(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def adjudicate(
    labels: pd.DataFrame,
    judge: LidJudge,
    *,
    seed: int = 0,
    level: float = 0.95,
    mapping: Mapping[str, frozenset[str]] | None = None,
) -> tuple[dict[str, pd.DataFrame], dict]:
    """Ask ``judge`` the language of a stratified sample of ``labels`` (:func:`~.langid.label_traces`) and compare
    its answers with the automated ones.

    Returns tables ``adjudication`` (per population), ``adjudication_pooled`` (one row) and
    ``adjudication_disagreements`` (each sampled trace whose judge label is not the automated one, or whose reply
    is unparseable), and a summary recording the judge, prompt, seed and pooled figures."""
    mapping = macrolanguages() if mapping is None else mapping
    sample = adjudication_sample(labels, judge.per_cell, seed=seed)
    keys = population_columns(sample)
    sample["judge_seed"] = [
        seed_hash(seed, "lid-judge", *row) for row in sample[[*keys, "item", "sample"]].itertuples(index=False)
    ]
    answers = ask_judge(judge, sample["segment"].tolist(), seeds=sample["judge_seed"].tolist())
    replies = [parse_language(text) for text, _ in answers]
    sample["reply"] = [text for text, _ in answers]
    sample["finish_reason"] = [finish for _, finish in answers]
    sample["judge_label"] = [r.code for r in replies]
    sample["parse"] = [r.how for r in replies]
    sample["error"] = [r.error for r in replies]
    pairs = list(zip(replies, sample["predicted"], strict=True))
    sample["agree"] = pd.Series([r.code is not None and r.code == p for r, p in pairs], dtype=bool)
    sample["agree_macro"] = pd.Series(
        [r.code is not None and macro_group(r.code, mapping) == macro_group(p, mapping) for r, p in pairs], dtype=bool
    )
    rows = [
        {**dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)), **_agreement(group, level)}
        for key, group in (sample.groupby(keys, dropna=False, sort=True) if len(sample) else [])
    ]
    pooled = _agreement(sample, level)
    off = sample[~sample["agree"]].copy()
    off["reply"] = [_one_line(t, 200) for t in off["reply"]]
    off["excerpt"] = [_one_line(t, 100) for t in off["segment"]]
    shown = [
        *keys,
        "item",
        "sample",
        "expected",
        "predicted",
        "judge_label",
        "agree_macro",
        "parse",
        "error",
        "reply",
        "excerpt",
        "judge_seed",
    ]
    prompt = load_prompt(judge.prompt)
    summary = {
        "judge_model": judge.model,
        "judge_backend": f"{getattr(judge.backend, 'name', '')} {getattr(judge.backend, 'version', '')}".strip(),
        "prompt": prompt["version"],
        "prompt_sha256": prompt["sha256"],
        "per_cell": judge.per_cell,
        "seed": seed,
        "temperature": 0.0,
        "max_tokens": judge.max_tokens,
        "structured": judge.structured,
        "level": level,
        "capped_replies": int((sample["finish_reason"] == "length").sum()) if len(sample) else 0,
        **pooled,
    }
    tables = {
        "adjudication": pd.DataFrame(rows, columns=[*keys, *pooled]),
        "adjudication_pooled": pd.DataFrame([pooled]),
        "adjudication_disagreements": off.reindex(columns=shown).reset_index(drop=True),
    }
    return tables, summary
