"""Decoder parity: does the text a server returned agree with the local decode of the same token ids?

Token ids are the ledger's truth and scoring decodes them locally, so the stored ``text`` (what the serving
stack returned) must agree with the local decode up to cosmetic differences. The units are *prefixes*: for a
record of n tokens, the whole generation (its stored text is the server's decode of all n ids) and its first B
ids for every budget B < n of the grid; a prefix agrees when the stored text starts with its decode (what the
scorer reads at budget B is then what the server's text holds). A sample stratified by population, finish
reason and prefix budget is compared:

- **raw** agreement: the stored text equals (or, for a prefix, starts with)
  ``tokenizer.decode(ids, skip_special_tokens=False)``;
- agreement after **special-token normalisation**: the same once special-token strings are removed from both
  (what production decoding with ``skip_special_tokens=True`` does);
- every raw divergence classified, first match wins: ``special-token markup`` (agrees after that
  normalisation), ``whitespace clean-up`` (then agrees with runs of whitespace collapsed and ends stripped,
  e.g. ``clean_up_tokenization_spaces``), ``partial UTF-8`` (then agrees without U+FFFD, the replacement a
  local decode puts where the ids end inside a character and a server withholds), ``other``.

Reasoning models: where some record thinks, each sampled whole thinking record is also compared per channel
(``by_channel``): the stored text split at its first closing marker (``</think>``, or the ``think_close``
string) against the local decodes of the ids before and after ``think_end``, each classified as above. A thought
that never closed is all reasoning (an empty answer channel on both sides). A stored text without the marker
although the ids close the thought cannot be split: both its channels are ``other``, counted as
``marker_missing``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..scoring import flat_ids
from ..store import population_columns, think_markers, thinks
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, stratified_sample

CLASSES = ("agree", "special-token markup", "whitespace clean-up", "partial UTF-8", "other")


def special_tokens(tokenizer: ResolvedTokenizer) -> list[str]:
    """The strings of the tokenizer's special tokens, longest first (so removal is unambiguous); any family."""
    table = tokenizer.token_bytes
    texts = {table[i].decode("utf-8", errors="replace") for i in tokenizer.special_ids if i < len(table)}
    return sorted((t for t in texts if t), key=len, reverse=True)


def _strip(text: str, specials: Sequence[str]) -> str:
    for s in specials:
        text = text.replace(s, "")
    return text


def classify(stored: str, local: str, *, specials: Sequence[str], prefix: bool = False) -> str:
    """The class of a (stored text, local raw decode) pair; with ``prefix`` the local decode is of a prefix of
    the ids and agrees when the stored text starts with it. See the module docs."""

    def agree(a: str, b: str) -> bool:
        return a.startswith(b) if prefix else a == b

    if agree(stored, local):
        return "agree"
    a, b = _strip(stored, specials), _strip(local, specials)
    if agree(a, b):
        return "special-token markup"
    a, b = " ".join(a.split()), " ".join(b.split())
    if agree(a, b):
        return "whitespace clean-up"
    a, b = a.replace("\ufffd", ""), b.replace("\ufffd", "")
    if agree(" ".join(a.split()), " ".join(b.split())):
        return "partial UTF-8"
    return "other"


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(
        np.frombuffer(a[:n].encode("utf-32-le"), np.uint32) != np.frombuffer(b[:n].encode("utf-32-le"), np.uint32)
    )
    return int(diff[0]) if len(diff) else n


def prefix_order(label: str) -> float:
    """Sort key of a prefix label: its budget as a number, ``whole`` after every budget."""
    return math.inf if label == "whole" else float(label)


def prefix_units(n_tokens: np.ndarray, budgets: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(record, prefix length) of every unit: each record whole, and its first B ids for each B < n."""
    rows, lengths = [np.arange(len(n_tokens))], [n_tokens]
    for b in sorted({int(b) for b in budgets}):
        shorter = np.flatnonzero(n_tokens > b)
        rows.append(shorter)
        lengths.append(np.full(len(shorter), b))
    return np.concatenate(rows), np.concatenate(lengths).astype(np.int64)


def parity_audit(
    records: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    *,
    budgets: Sequence[int] = (),
    per_stratum: int = 20,
    seed: int = 0,
    examples: int = 3,
    think_close: str | None = None,
) -> AuditResult:
    """Raw and normalised agreement per population and per prefix budget on a stratified sample of prefixes
    (see the module docs), divergences classified with examples; where some record thinks also per channel
    (``think_close``: the string closing a thought, for tokenizers without a ``</think>`` token)."""
    keys = population_columns(records)
    frame = records.select([*keys, "item", "sample", "finish_reason", "n_tokens", "tokenizer"]).to_pandas()
    rows, lengths = prefix_units(frame["n_tokens"].to_numpy(), budgets)
    units = frame.iloc[rows].reset_index(drop=True)
    units["record"], units["length"] = rows, lengths
    units["prefix"] = np.where(lengths < units["n_tokens"].to_numpy(), lengths.astype(str), "whole")
    picks = stratified_sample(units, [*keys, "finish_reason", "prefix"], per_stratum, seed)
    sample = units.iloc[picks].reset_index(drop=True)
    sub = records.select(["output_ids", "text"]).take(pa.array(sample["record"].to_numpy()))
    ids, splits = flat_ids(sub.column("output_ids"))
    stored = sub.column("text").to_pylist()
    specials = {name: special_tokens(tokenizers[name]) for name in sample["tokenizer"].unique()}
    classes, where, local_texts = [], [], []
    for r, (name, length, label) in enumerate(
        zip(sample["tokenizer"], sample["length"], sample["prefix"], strict=True)
    ):
        unit_ids = ids[splits[r] : splits[r] + length].tolist()
        local = tokenizers[name].decode(unit_ids)  # special tokens kept as text (any family)
        cls = classify(stored[r], local, specials=specials[name], prefix=label != "whole")
        classes.append(cls)
        local_texts.append(local)
        where.append(-1 if cls == "agree" else _first_difference(stored[r], local))
    sample["class"] = classes

    def summarise(by: list[str]) -> pd.DataFrame:
        out = []
        for key, group in sample.groupby(by, dropna=False, sort=True):
            counts = group["class"].value_counts()
            out.append(
                {
                    **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                    "sampled": len(group),
                    "raw_agreement": counts.get("agree", 0) / len(group),
                    "normalized_agreement": (counts.get("agree", 0) + counts.get("special-token markup", 0))
                    / len(group),
                    **{c: int(counts.get(c, 0)) for c in CLASSES[1:]},
                }
            )
        table = pd.DataFrame(out)
        if "prefix" in by and len(table):  # budgets as numbers (64 before 128), the whole generation last
            table = table.sort_values("prefix", key=lambda col: col.map(prefix_order), kind="stable")
        return table.reset_index(drop=True)

    div = []
    for cls in CLASSES[1:]:
        for r in np.flatnonzero(sample["class"].to_numpy() == cls)[:examples]:
            at = where[r]
            div.append(
                {
                    **{k: sample.at[r, k] for k in keys},
                    "item": int(sample.at[r, "item"]),
                    "sample": int(sample.at[r, "sample"]),
                    "prefix": sample.at[r, "prefix"],
                    "class": cls,
                    "position": at,
                    "stored": repr(stored[r][max(at - 10, 0) : at + 20]),
                    "local": repr(local_texts[r][max(at - 10, 0) : at + 20]),
                }
            )
    n = len(sample)
    totals = sample["class"].value_counts()
    summary = {
        "seed": seed,
        "per_stratum": per_stratum,
        "budgets": sorted({int(b) for b in budgets}),
        "strata": "population x finish reason x prefix budget",
        "sampled": n,
        "raw_agreement": float(totals.get("agree", 0) / n) if n else None,
        "normalized_agreement": float((totals.get("agree", 0) + totals.get("special-token markup", 0)) / n)
        if n
        else None,
        "divergences": {c: int(totals.get(c, 0)) for c in CLASSES[1:]},
    }
    tables = {"agreement": summarise(keys), "by_prefix": summarise(["prefix"]), "divergences": pd.DataFrame(div)}
    if thinks(records):
        whole = sample[sample["prefix"] == "whole"]
        tables["by_channel"] = channel_table(records, whole, keys=keys, tokenizers=tokenizers, think_close=think_close)
        summary["channels"] = {
            str(ch): {"sampled": int(g["sampled"].sum()), "agree": int(g["agree"].sum())}
            for ch, g in tables["by_channel"].groupby("channel", sort=True)
        }
    return AuditResult("parity", tables=tables, summary=summary)


def split_stored(stored: str, close_text: str, *, closed: bool) -> tuple[str, str] | None:
    """(reasoning, answer) of a stored text: split at its first ``close_text`` (the marker in neither); all
    reasoning when the thought never ``closed``; ``None`` when it closed but the text lacks the marker."""
    if not closed:
        return stored, ""
    at = stored.find(close_text)
    return None if at < 0 else (stored[:at], stored[at + len(close_text) :])


def channel_table(
    records: pa.Table,
    whole: pd.DataFrame,
    *,
    keys: Sequence[str],
    tokenizers: Mapping[str, ResolvedTokenizer],
    think_close: str | None = None,
) -> pd.DataFrame:
    """Per population and channel (``reasoning``, ``answer``) of the sampled whole thinking records (``whole``:
    rows of the sample with ``record``): units compared, agreement raw and normalised, divergence classes and
    ``marker_missing`` (see the module docs)."""
    on = records.column("thinking").fill_null(False).to_numpy(zero_copy_only=False)
    picked = whole[on[whole["record"].to_numpy()]] if len(whole) else whole
    sub = records.select(["output_ids", "text", "think_end"]).take(pa.array(picked["record"].to_numpy(), pa.int64()))
    ids, stored, ends = (sub.column(c).to_pylist() for c in ("output_ids", "text", "think_end"))
    units = []
    for r, name in enumerate(picked["tokenizer"]):
        tok = tokenizers[name]
        close = think_markers(tok, think_close).close_text
        end = ends[r]
        local = (tok.decode(ids[r]), "") if end is None else (tok.decode(ids[r][:end]), tok.decode(ids[r][end + 1 :]))
        split = split_stored(stored[r], close, closed=end is not None)
        specials = special_tokens(tok)
        for k, channel in enumerate(("reasoning", "answer")):
            cls = "other" if split is None else classify(split[k], local[k], specials=specials)
            units.append(
                {
                    **{c: picked[c].iloc[r] for c in keys},
                    "channel": channel,
                    "class": cls,
                    "marker_missing": split is None,
                }
            )
    frame = pd.DataFrame(units, columns=[*keys, "channel", "class", "marker_missing"])
    rows = []
    for key, group in frame.groupby([*keys, "channel"], dropna=False, sort=True):
        counts = group["class"].value_counts()
        rows.append(
            {
                **dict(zip([*keys, "channel"], key, strict=True)),
                "sampled": len(group),
                "agree": int(counts.get("agree", 0)),
                "raw_agreement": counts.get("agree", 0) / len(group),
                "normalized_agreement": (counts.get("agree", 0) + counts.get("special-token markup", 0)) / len(group),
                **{c: int(counts.get(c, 0)) for c in CLASSES[1:]},
                "marker_missing": int(group["marker_missing"].sum()),
            }
        )
    return pd.DataFrame(rows)
