"""Trace-language ID: is each trace written in the language its arm asks for?

Models, their label code space and the compliance rule are the shared ones of :mod:`mindcap_tok.metrics.langid`
(GlotLID by default, the shipped ``lid.176.ftz`` offline; labels as FLORES-style codes).

A trace is analysed without its ``####`` answer lines, newlines joined into spaces (fastText reads one
line). For an arm with a translation segment (translate-act) the text analysed is the reasoning after the
translation delimiter (:mod:`.segments`). A trace is *determinate* when it has at least ``min_letters``
letters and the top label's probability reaches ``threshold``; compliance is the share of determinate traces
labelled with the arm's expected language (its task file's ``reasoning``, else the cell's language: MGSM's
native, code-switched: L; translate-act, pivot: English), reported with and without the macrolanguage
mappings of ``resources/macrolanguages.tsv``.

Reasoning models: where some record thinks, each record is labelled per ``channel`` (:func:`split_channels`): a
thinking record's ``reasoning`` (its thought) and ``answer`` (the text after it) apart, so the audit says which
language a model reasons in and which it answers in; a record without thinking is one ``answer`` row. Qwen3's
think tokens are not special, so a decode still holds ``<think>`` / ``</think>`` as text (the thought's opening
token, a second think block in the answer): those markers are removed before labelling, as markup in no language.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from .._io import regular_file
from ..errors import BadInputError, first_line
from ..metrics.langid import (  # noqa: F401 (LidModel, load_lid_model, shipped_lid176: this module's API too)
    MIN_LETTERS,
    THRESHOLD,
    LidModel,
    in_expected,
    label_segments,
    load_lid_model,
    macro_group,
    macrolanguages,
    normalize_label,
    shipped_lid176,
)
from ..store import CLOSE_TEXT, OPEN_TEXT, population_columns, thinks
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, find_tasks, record_tasks, stratified_sample
from .lid_adjudication import LidJudge, adjudicate
from .segments import DEFAULT_DELIMITER, split_translate_act, strip_answer_lines

ENGLISH = "eng_Latn"


@dataclass(frozen=True)
class LidSettings:
    """What makes a trace determinate, and where translate-act reasoning starts."""

    threshold: float = THRESHOLD
    min_letters: int = MIN_LETTERS
    newlines: str = "join with spaces"
    delimiter: str = DEFAULT_DELIMITER


@dataclass(frozen=True)
class LidValidation:
    """The stratified validation sample (``per_cell`` traces per population) and, when ``returned`` (an
    earlier sample with ``human_label`` filled in) is given, its agreement against ``criterion``."""

    per_cell: int = 20
    returned: pd.DataFrame | None = None
    criterion: float = 0.9


def strip_think_markers(text: str) -> str:
    """``text`` with every literal ``<think>`` and ``</think>`` replaced by a space (Qwen3's think tokens are not
    special, so ``skip_special_tokens`` keeps them; their letters would count towards a label)."""
    return text.replace(OPEN_TEXT, " ").replace(CLOSE_TEXT, " ")


def split_channels(records: pa.Table, tokenizers: Mapping[str, ResolvedTokenizer]) -> pa.Table:
    """Where some record thinks: each thinking record as a ``reasoning`` row (the decode of its thought, up to
    ``think_end``; all of it when unclosed) and an ``answer`` row (the decode after ``think_end``; empty when
    unclosed), each other record as one ``answer`` row; ``text`` replaced (the literal ``<think>`` / ``</think>``
    markers of a thinking record's channels removed: :func:`strip_think_markers`), a ``channel`` column added.
    Unchanged when no record thinks. ``tokenizers`` maps the ``tokenizer`` column to the tokenizers that decode
    the ids."""
    if not thinks(records):
        return records
    ids = records.column("output_ids").to_pylist()
    ends = records.column("think_end").to_pylist()
    thinking = records.column("thinking").to_pylist()
    names = records.column("tokenizer").to_pylist()
    rows, texts, channels = [], [], []
    for r, (out, end, on, name) in enumerate(zip(ids, ends, thinking, names, strict=True)):
        if not on:
            rows.append(r)
            texts.append(records.column("text")[r].as_py())
            channels.append("answer")
            continue
        thought, answer = (out, []) if end is None else (out[:end], out[end + 1 :])
        decoded = tokenizers[name].decode_batch([thought, answer], skip_special_tokens=True)
        rows += [r, r]
        texts += [strip_think_markers(t) for t in decoded]
        channels += ["reasoning", "answer"]
    table = records.take(pa.array(rows, pa.int64()))
    table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(texts, pa.string()))
    return table.append_column("channel", pa.array(channels, pa.string()))


def _keys(frame: pa.Table | pd.DataFrame) -> list[str]:
    """The population keys, and ``channel`` where the records were split by :func:`split_channels`."""
    names = frame.column_names if isinstance(frame, pa.Table) else list(frame.columns)
    return [*population_columns(frame), *(["channel"] if "channel" in names else [])]


def _analysed_text(text: str, translates: bool, delimiter: str) -> str | None:
    if translates:
        act = split_translate_act(text, delimiter)[1]
        if act is None:
            return None
        text = act
    return " ".join(strip_answer_lines(text).split())


def label_traces(
    records: pa.Table | pd.DataFrame,
    model: LidModel,
    *,
    settings: LidSettings = LidSettings(),
    tasks: Sequence[str | os.PathLike[str]] = (),
) -> pd.DataFrame:
    """One row per record: population keys, ``item``, ``sample``, ``expected``, ``segment`` (the text analysed),
    ``predicted``, ``confidence``, ``status`` (determinate / no-delimiter / short / low-confidence).

    The expected language and whether a translation segment comes first are each record's task arm's (``tasks``:
    the task files of records whose task is not built in)."""
    keys = _keys(records)
    frame = records.select([*keys, "item", "sample", "text"]).to_pandas() if isinstance(records, pa.Table) else records
    out = frame[[*keys, "item", "sample"]].copy()
    names = record_tasks(frame)
    found = find_tasks(list(dict.fromkeys(names)), tasks)
    arms = [found[t].arms.get(a) for t, a in zip(names, frame["arm"], strict=True)]
    out["expected"] = [(a and a.reasoning) or lang for a, lang in zip(arms, frame["lang"], strict=True)]
    segments = [
        _analysed_text(t, bool(a and a.translation), settings.delimiter)
        for t, a in zip(frame["text"], arms, strict=True)
    ]
    verdict = label_segments(
        model,
        segments,
        expected=out["expected"].tolist(),
        threshold=settings.threshold,
        min_letters=settings.min_letters,
    )
    out["segment"] = segments
    for column in ("predicted", "confidence", "status"):
        out[column] = verdict[column].to_numpy()
    return out


def compliance_table(labels: pd.DataFrame, mapping: Mapping[str, frozenset[str]] | None = None) -> pd.DataFrame:
    """Per population: counts by status, and among determinate traces the share labelled with the expected
    language (``in_expected``), the same under the macrolanguage mapping (``in_expected_macro``), the
    English share and the most frequent other label."""
    mapping = macrolanguages() if mapping is None else mapping
    keys = _keys(labels)
    rows = []
    for key, group in labels.groupby(keys, dropna=False, sort=True):
        det = group[group["status"] == "determinate"]
        expected = group["expected"].iloc[0]
        exact, macro = in_expected(det["predicted"].tolist(), [expected] * len(det), mapping=mapping)
        others = det.loc[~macro, "predicted"].value_counts()
        counts = group["status"].value_counts()
        rows.append(
            {
                **dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)),
                "expected": expected,
                "n": len(group),
                "determinate": len(det),
                "no_delimiter": int(counts.get("no-delimiter", 0)),
                "short": int(counts.get("short", 0)),
                "low_confidence": int(counts.get("low-confidence", 0)),
                "in_expected": exact.mean() if len(det) else np.nan,
                "in_expected_macro": macro.mean() if len(det) else np.nan,
                "english": (det["predicted"] == ENGLISH).mean() if len(det) else np.nan,
                "top_other": others.index[0] if len(others) else None,
            }
        )
    return pd.DataFrame(rows)


def validation_sample(labels: pd.DataFrame, per_cell: int = 20, *, seed: int = 0) -> pd.DataFrame:
    """A stratified sample of determinate traces (``per_cell`` per population, seeded) for human labelling,
    with an empty ``human_label`` column to fill (any code :func:`normalize_label` reads)."""
    det = labels[labels["status"] == "determinate"].reset_index(drop=True)
    picks = stratified_sample(det, _keys(det), per_cell, seed)
    sample = det.iloc[picks].reset_index(drop=True)
    sample["human_label"] = ""
    sample["seed"] = seed
    return sample


def validation_csv(sample: pd.DataFrame) -> str:
    """The sample as CSV text (``langid_validation.csv`` of the report, for human labels)."""
    return sample.to_csv(index=False)


#: what a returned validation sample must hold to be scored
_LABEL_COLUMNS = ("model", "arm", "lang", "predicted", "human_label")


def load_validation_labels(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A returned ``langid_validation.csv`` (empty cells kept as empty strings, not NaN)."""
    file = regular_file(path, "validation labels file")
    try:
        frame = pd.read_csv(file, keep_default_na=False)
    except (OSError, ValueError, UnicodeDecodeError) as exc:  # pandas' parser and empty-data errors are ValueErrors
        msg = first_line(exc)
        raise BadInputError(f"cannot read validation labels {file}: {msg}") from exc
    _require_label_columns(frame, str(file))
    return frame


def _require_label_columns(frame: pd.DataFrame, what: str) -> None:
    missing = [c for c in _LABEL_COLUMNS if c not in frame.columns]
    if missing:
        have = ", ".join(map(str, frame.columns)) or "none"
        raise BadInputError(
            f"the validation labels ({what}) lack column(s) {', '.join(missing)} (have {have}); "
            "return the langid_validation.csv the audit wrote, with human_label filled in"
        )


def validation_agreement(
    labelled: pd.DataFrame, criterion: float = 0.9, *, mapping: Mapping[str, frozenset[str]] | None = None
) -> tuple[pd.DataFrame, dict]:
    """Agreement of the automated labels with the returned human labels, per population and overall, exact and
    under the macrolanguage mapping, each against the frozen ``criterion`` (e.g. 0.9).

    Rows with an empty ``human_label`` are ignored. Returns (per-population table, overall summary).
    """
    if not 0 < criterion <= 1:
        raise BadInputError(f"the agreement criterion must be in (0, 1], got {criterion}")
    _require_label_columns(labelled, "returned sample")
    done = labelled[labelled["human_label"].fillna("").astype(str).str.strip() != ""].copy()
    if done.empty:
        raise BadInputError("no human labels in the validation sample (fill the human_label column)")
    human = done["human_label"].astype(str).map(normalize_label)
    done["agree"] = (human == done["predicted"]).to_numpy()
    done["agree_macro"] = [
        macro_group(h, mapping) == macro_group(p, mapping) for h, p in zip(human, done["predicted"], strict=True)
    ]
    keys = population_columns(done)
    table = (
        done.groupby(keys, dropna=False, sort=True)
        .agg(labelled=("agree", "size"), agreement=("agree", "mean"), agreement_macro=("agree_macro", "mean"))
        .reset_index()
    )
    table["meets_criterion"] = table["agreement"] >= criterion
    table["meets_criterion_macro"] = table["agreement_macro"] >= criterion
    summary = {
        "criterion": criterion,
        "labelled": len(done),
        "agreement": float(done["agree"].mean()),
        "agreement_macro": float(done["agree_macro"].mean()),
        "all_cells_meet": bool(table["meets_criterion"].all()),
        "all_cells_meet_macro": bool(table["meets_criterion_macro"].all()),
    }
    return table, summary


def langid_audit(
    records: pa.Table | pd.DataFrame,
    model: LidModel,
    *,
    settings: LidSettings = LidSettings(),
    validation: LidValidation = LidValidation(),
    seed: int = 0,
    tasks: Sequence[str | os.PathLike[str]] = (),
    judge: LidJudge | None = None,
    tokenizers: Mapping[str, ResolvedTokenizer] | None = None,
) -> tuple[AuditResult, pd.DataFrame]:
    """Compliance per population and a stratified validation sample (returned beside the result; with
    ``validation.returned`` also its agreement, :class:`LidValidation`); with ``judge`` also the judge's blind
    agreement with the automated labels (:func:`~.lid_adjudication.adjudicate`). ``tasks``: the task files of
    records whose task is not built in. Records of which some think are labelled per channel
    (:func:`split_channels`, decoded with ``tokenizers``)."""
    if isinstance(records, pa.Table) and thinks(records):
        if tokenizers is None:
            raise BadInputError("records with thinking on need their tokenizers to split reasoning from answer")
        records = split_channels(records, tokenizers)
    labels = label_traces(records, model, settings=settings, tasks=tasks)
    tables = {"compliance": compliance_table(labels)}
    sample = validation_sample(labels, validation.per_cell, seed=seed)
    summary = {
        "model": model.name,
        "model_sha256": model.sha256,
        "threshold": settings.threshold,
        "min_letters": settings.min_letters,
        "newlines": settings.newlines,
        "delimiter": settings.delimiter,
        "macrolanguages": {k: sorted(v) for k, v in macrolanguages().items()},
        "validation_per_cell": validation.per_cell,
        "validation_sampled": len(sample),
        "seed": seed,
    }
    if validation.returned is not None:
        tables["validation"], summary["validation"] = validation_agreement(validation.returned, validation.criterion)
    if judge is not None:
        found, summary["adjudication"] = adjudicate(labels, judge, seed=seed)
        tables.update(found)
    return AuditResult("langid", tables=tables, summary=summary), sample
