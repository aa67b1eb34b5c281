"""Decoder parity: does the text a server returned equal the local decode of the same token ids?

Token ids are the ledger's truth and scoring decodes them locally, so the stored ``text`` (what the serving
stack returned) must agree with the local decode up to cosmetic differences. Each record is the decode of a
prefix of its generation (its cap; in the independent design every budget is its own capped decode); a
sample stratified by population, finish reason and length (powers of two) is compared:

- **raw** agreement: ``stored == tokenizer.decode(ids, skip_special_tokens=False)``;
- agreement after **special-token normalisation**: both equal once special-token strings are removed (what
  production decoding with ``skip_special_tokens=True`` does);
- every raw divergence classified, first match wins: ``special-token markup`` (equal after that
  normalisation), ``whitespace clean-up`` (then equal with runs of whitespace collapsed and ends stripped,
  e.g. ``clean_up_tokenization_spaces``), ``partial UTF-8`` (then equal without U+FFFD, the replacement a
  local decode puts where the ids end inside a character and a server withholds), ``other``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..tokenizer import ResolvedTokenizer
from ._common import AuditResult, flat_ids, population_keys, stratified_sample

CLASSES = ("agree", "special-token markup", "whitespace clean-up", "partial UTF-8", "other")


def special_tokens(tokenizer: ResolvedTokenizer) -> list[str]:
    """The strings of the tokenizer's special tokens, longest first (so removal is unambiguous)."""
    decoder = tokenizer.tokenizer.get_added_tokens_decoder()
    return sorted({t.content for t in decoder.values() if t.special}, key=len, reverse=True)


def _strip(text: str, specials: Sequence[str]) -> str:
    for s in specials:
        text = text.replace(s, "")
    return text


def classify(stored: str, local: str, specials: Sequence[str]) -> str:
    """The class of a (stored, local raw decode) pair; see the module docs."""
    if stored == local:
        return "agree"
    a, b = _strip(stored, specials), _strip(local, specials)
    if a == b:
        return "special-token markup"
    a, b = " ".join(a.split()), " ".join(b.split())
    if a == b:
        return "whitespace clean-up"
    a, b = a.replace("\ufffd", ""), b.replace("\ufffd", "")
    if " ".join(a.split()) == " ".join(b.split()):
        return "partial UTF-8"
    return "other"


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(np.frombuffer(a[:n].encode("utf-32-le"), np.uint32)
                          != np.frombuffer(b[:n].encode("utf-32-le"), np.uint32))
    return int(diff[0]) if len(diff) else n


def parity_audit(
    records: pa.Table, tokenizers: Mapping[str, ResolvedTokenizer], per_stratum: int = 20, seed: int = 0,
    examples: int = 3,
) -> AuditResult:
    """Raw and normalised agreement per population on a stratified sample, divergences classified."""
    keys = population_keys(records)
    frame = records.select([*keys, "item", "sample", "finish_reason", "n_tokens", "tokenizer"]).to_pandas()
    frame["length_bin"] = np.floor(np.log2(np.maximum(frame["n_tokens"].to_numpy(), 1))).astype(int)
    picks = stratified_sample(frame, [*keys, "finish_reason", "length_bin"], per_stratum, seed)
    sample = frame.iloc[picks].reset_index(drop=True)
    sub = records.take(pa.array(picks))
    ids, splits = flat_ids(sub.column("output_ids"))
    stored = sub.column("text").to_pylist()
    specials = {name: special_tokens(tokenizers[name]) for name in sample["tokenizer"].unique()}
    classes, where, local_texts = [], [], []
    for r, name in enumerate(sample["tokenizer"]):
        local = tokenizers[name].tokenizer.decode(ids[splits[r]:splits[r + 1]].tolist(), skip_special_tokens=False)
        cls = classify(stored[r], local, specials[name])
        classes.append(cls)
        local_texts.append(local)
        where.append(-1 if cls == "agree" else _first_difference(stored[r], local))
    sample["class"] = classes
    rows = []
    for key, group in sample.groupby(keys, dropna=False, sort=True):
        vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        counts = group["class"].value_counts()
        rows.append({**vals, "sampled": len(group),
                     "raw_agreement": counts.get("agree", 0) / len(group),
                     "normalized_agreement": (counts.get("agree", 0) + counts.get("special-token markup", 0))
                     / len(group),
                     **{c: int(counts.get(c, 0)) for c in CLASSES[1:]}})
    div = []
    for cls in CLASSES[1:]:
        for r in np.flatnonzero(sample["class"].to_numpy() == cls)[:examples]:
            at = where[r]
            div.append({**{k: sample.at[r, k] for k in keys}, "item": int(sample.at[r, "item"]),
                        "sample": int(sample.at[r, "sample"]), "class": cls, "position": at,
                        "stored": repr(stored[r][max(at - 10, 0):at + 20]),
                        "local": repr(local_texts[r][max(at - 10, 0):at + 20])})
    n = len(sample)
    totals = sample["class"].value_counts()
    summary = {"seed": seed, "per_stratum": per_stratum, "strata": "population x finish reason x log2 length",
               "sampled": n, "raw_agreement": float(totals.get("agree", 0) / n) if n else None,
               "normalized_agreement": float((totals.get("agree", 0) + totals.get("special-token markup", 0)) / n)
               if n else None, "divergences": {c: int(totals.get(c, 0)) for c in CLASSES[1:]}}
    return AuditResult("parity", tables={"agreement": pd.DataFrame(rows), "divergences": pd.DataFrame(div)},
                       summary=summary)
