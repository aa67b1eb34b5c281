"""Parser robustness: is a measured gain late answer emission, or an artefact of how prefixes are parsed?

For every record the answer each parser reads at each budget is recomputed from the token ids (the decoded
bytes of the first B ids, special tokens adding nothing, as the scorer sees them), keeping whether the
strict parser read it from an *unfinished* last line (the paper's prefix-only rule). Reported per population:

- **prefix-only rescued-correct** traces: at some grid budget the strict parser reads gold from an
  unfinished line whose completed value is not gold (``#### 12`` of a future ``#### 125``);
- **value-unstable** traces: at some grid budget the strict answer differs from the completed trace's;
- for native populations, with premiums: the native gains inside ``(B, floor(rB)]`` (strict score 0 at B,
  1 at floor(rB)) and the share of them that are **genuinely terminated** (the ``terminated`` parser also
  scores 1 at floor(rB)); and how the Δ_L peak moves when a terminated answer line is required or native
  digits are accepted (the variants of :mod:`mindcap_tok.tasks.answers.integer`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from ..ledger.score import flat_ids
from ..resample import scale_budget
from ..stats.premiums import PremiumTable, lookup_premium
from ..tasks.answers import get_parser
from ..tasks.answers.integer import Parser
from ..tokenization.byte_tables import ByteTable, byte_table
from ..tokenization.load import ResolvedTokenizer
from ._common import AuditResult, population_keys

#: variants whose peak movement is reported against strict
VARIANTS = ("terminated", "native-digits")


def answer_lines(data: bytes) -> list[tuple[int, int]]:
    """Byte spans ``(start, end)`` (end excludes the newline) of the lines of ``data`` holding ``####``."""
    spans = []
    pos = data.find(b"####")
    while pos != -1:
        start = data.rfind(b"\n", 0, pos) + 1
        end = data.find(b"\n", pos)
        end = len(data) if end == -1 else end
        spans.append((start, end))
        pos = data.find(b"####", end)
    return spans


def read_at_cuts(
    data: bytes, cuts: Sequence[int], *, at_end: Sequence[bool], parser: Parser, complete: bool
) -> list[tuple[int | None, bool, int | None]]:
    """What ``parser`` reads from ``data[:c]`` for each cut ``c``: (value, from an unfinished line, the value of
    that line once complete). ``at_end[j]``: the prefix holds every token (ends a completed trace there)."""
    spans = [(s, e, parser.line_cuts(data[s:e])) for s, e in answer_lines(data)]
    out = []
    total = len(data)
    for c, end in zip(cuts, at_end, strict=True):
        found = (None, False, None)
        for s, e, lc in spans:
            if s >= c:
                break
            if parser.terminated:
                closed = (e < total and c > e) or (e == total and complete and end)
                if not closed:
                    break
                if lc.full is not None:
                    found = (lc.full, False, lc.full)
                    break
                continue
            if e <= c:
                if lc.full is not None:
                    found = (lc.full, False, lc.full)
                    break
                continue
            k = c - s
            for lo, hi, value in lc.partial:
                if lo <= k < hi:
                    found = (value, True, lc.full)
                    break
            break
        out.append(found)
    return out


def _record_cuts(table: ByteTable, ids: np.ndarray, budgets: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    cum = table.token_ends(ids)  # a dummy prefix (Llama 2) drops the first text token's space
    n = len(ids)
    take = np.minimum(budgets, n)
    cuts = np.where(take > 0, cum[np.maximum(take - 1, 0)] if n else 0, 0)
    return table.decode(ids), cuts, budgets >= n


def read_records(
    records: pa.Table, tokenizers: Mapping[str, ResolvedTokenizer], *, budgets: Sequence[int], parsers: Sequence[str]
) -> dict[str, dict[str, np.ndarray]]:
    """Per parser: ``value`` (float, NaN = no answer), ``partial`` and ``line_full`` arrays of shape
    (records, budgets), plus ``final`` (the completed trace's value) of shape (records,)."""
    grid = np.asarray(sorted(set(int(b) for b in budgets)), dtype=np.int64)
    n = records.num_rows
    ps = [get_parser(p) for p in parsers]
    out = {
        p.name: {
            "value": np.full((n, len(grid)), np.nan),
            "partial": np.zeros((n, len(grid)), bool),
            "line_full": np.full((n, len(grid)), np.nan),
            "final": np.full(n, np.nan),
        }
        for p in ps
    }
    ids, splits = flat_ids(records.column("output_ids"))
    names = records.column("tokenizer").to_numpy(zero_copy_only=False)
    complete = records.column("finish_reason").to_numpy(zero_copy_only=False) == "stop"
    tables = {name: byte_table(tokenizers[name]) for name in dict.fromkeys(names)}
    for r in range(n):
        table = tables[names[r]]
        rid = ids[splits[r] : splits[r + 1]]
        data, cuts, at_end = _record_cuts(table, rid, grid)
        if b"####" not in data:
            continue
        cuts_all, end_all = [*cuts.tolist(), len(data)], [*at_end.tolist(), True]
        for p in ps:
            got = read_at_cuts(data, cuts_all, at_end=end_all, parser=p, complete=bool(complete[r]))
            slot = out[p.name]
            for j, (value, partial, full) in enumerate(got[:-1]):
                if value is not None:
                    slot["value"][r, j] = value
                    slot["partial"][r, j] = partial
                    slot["line_full"][r, j] = np.nan if full is None else full
            if got[-1][0] is not None:
                slot["final"][r] = got[-1][0]
    return out


def parser_audit(
    records: pa.Table,
    tokenizers: Mapping[str, ResolvedTokenizer],
    *,
    budgets: Sequence[int],
    premiums: PremiumTable | None = None,
    native: str = "native",
) -> AuditResult:
    """Rescued-correct and value-unstable shares per population; with ``premiums``, the genuinely terminated
    share of native gains in ``(B, floor(rB)]`` per budget and each variant's peak movement."""
    grid = sorted({int(b) for b in budgets})
    keys = population_keys(records)
    frame = records.select(keys).to_pandas()
    arms = frame["arm"].to_numpy()
    scaled_of = {}
    if premiums is not None:
        for m, lang in frame.loc[arms == native, ["model", "lang"]].drop_duplicates().itertuples(index=False):
            r = lookup_premium(premiums, m, lang=lang)
            scaled_of[(m, lang)] = (float(r), [scale_budget(r, b) for b in grid])
    every = sorted(set(grid) | {s for _, sc in scaled_of.values() for s in sc})
    col = {b: j for j, b in enumerate(every)}
    gi = [col[b] for b in grid]
    reads = read_records(records, tokenizers, budgets=every, parsers=("strict", *VARIANTS))
    gold = records.column("gold").to_numpy().astype(float)[:, None]
    strict = reads["strict"]
    v = strict["value"][:, gi]
    rescued = (strict["partial"][:, gi] & (v == gold) & (strict["line_full"][:, gi] != gold)).any(axis=1)
    unstable = (~np.isnan(v) & (v != strict["final"][:, None])).any(axis=1)
    frame["rescued"], frame["unstable"] = rescued, unstable
    robustness = (
        frame.groupby(keys, dropna=False, sort=True)
        .agg(
            n=("rescued", "size"),
            rescued_correct=("rescued", "mean"),
            value_unstable=("unstable", "mean"),
            rescued_traces=("rescued", "sum"),
            unstable_traces=("unstable", "sum"),
        )
        .reset_index()
    )
    tables = {"robustness": robustness}
    summary = {
        "budgets": grid,
        "variants": list(VARIANTS),
        "premiums": {f"{m}:{lang}": r for (m, lang), (r, _) in scaled_of.items()},
    }
    if scaled_of:
        scores = {name: (reads[name]["value"] == gold) for name in reads}
        gains_rows, peak_rows = [], []
        nat = frame[frame["arm"] == native]
        for key, group in nat.groupby(keys, dropna=False, sort=True):
            vals = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
            rows = group.index.to_numpy()
            r, scaled = scaled_of[(vals["model"], vals["lang"])]
            si = [col[s] for s in scaled]
            s_strict = scores["strict"][rows]
            gains = (s_strict[:, gi] == 0) & (s_strict[:, si] == 1)
            term = gains & scores["terminated"][rows][:, si]
            for j, b in enumerate(grid):
                n_g = int(gains[:, j].sum())
                gains_rows.append(
                    {
                        **vals,
                        "budget": b,
                        "premium": r,
                        "scaled_budget": scaled[j],
                        "gains": n_g,
                        "terminated_share": term[:, j].sum() / n_g if n_g else np.nan,
                    }
                )
            delta = {name: s[rows][:, si].mean(axis=0) - s[rows][:, gi].mean(axis=0) for name, s in scores.items()}
            k = int(np.argmax(delta["strict"]))
            row = {**vals, "premium": r, "peak_budget": grid[k], "delta_strict": float(delta["strict"][k])}
            for name in VARIANTS:
                kv = int(np.argmax(delta[name]))
                row[f"delta_{name}_at_peak"] = float(delta[name][k])
                row[f"move_{name}"] = float(delta[name][k] - delta["strict"][k])
                row[f"peak_budget_{name}"] = grid[kv]
            peak_rows.append(row)
        tables["gains"] = pd.DataFrame(gains_rows)
        tables["peaks"] = pd.DataFrame(peak_rows)
    return AuditResult("parser", tables=tables, summary=summary)
