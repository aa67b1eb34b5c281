"""Matched-cost budget grids (H3's matched-dollar comparison, paper §3/§4.4): budgets whose dollar cost per item is
the same in every cell of a model.

A record's cost is ``in_price·prompt_tokens + out_price·B`` (prices in dollars per million tokens, B the output
budget), with the ledger's mean prompt tokens per cell. For each reference budget B of the reference cell (e.g.
``lang = eng_Latn``, or ``arm = translate-act`` to match each language's arms), every other cell of the same model
(and the same values of the keys the reference does not name) gets the largest budget B' whose cost does not exceed
the reference's: B' = floor(B + in_price·(P_ref − P_cell) / out_price), computed exactly.
"""

from __future__ import annotations

import csv
import io
import math
import tomllib
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pyarrow as pa

from .._io import regular_file
from ..data.languages import resolve_language
from ..errors import BadInputError, first_line
from ..spec import check_prices, reading
from ..store import CELL_COLUMNS
from ..tokenization.registry import canonical_model_name

#: model -> (input, output) dollars per million tokens
Prices = Mapping[str, tuple[float, float]]


def load_prices(path: str | Path) -> dict[str, tuple[float, float]]:
    """Token prices from a TOML file (``[qwen3-8b]`` tables, or one ``[prices]`` table of them, with ``input`` and
    ``output``) or a CSV file with the columns ``model,input,output``; dollars per million tokens."""
    path = Path(path)
    try:
        text = regular_file(path, "prices file").read_text("utf-8")
    except OSError as exc:
        raise BadInputError(f"cannot read prices {path}: {exc.strerror or exc}") from exc
    with reading(path):
        if path.suffix.lower() == ".csv":
            rows = list(csv.DictReader(io.StringIO(text)))
            if not rows or set(rows[0]) != {"model", "input", "output"}:
                raise BadInputError("a prices CSV has the columns model,input,output", source=path)
            try:
                table = {r["model"]: {"input": float(r["input"]), "output": float(r["output"])} for r in rows}
            except (TypeError, ValueError) as exc:
                raise BadInputError(f"prices must be numbers: {first_line(exc)}", source=path) from exc
            return check_prices(table)
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise BadInputError(f"not valid TOML: {first_line(exc)}", source=path) from exc
        return check_prices(raw["prices"] if set(raw) == {"prices"} else raw)


def price_of(prices: Prices, model: str) -> tuple[Fraction, Fraction]:
    """(input, output) price of ``model`` as exact fractions: its own entry, or one for the same registry model."""
    for name, (inp, out) in prices.items():
        if name == model or (canonical_model_name(name) or name) == (canonical_model_name(model) or model):
            return Fraction(repr(inp)), Fraction(repr(out))
    raise BadInputError(f"no token prices for model {model!r} (have: {', '.join(sorted(prices))})")


def prompt_tokens(records: pa.Table | pd.DataFrame) -> pd.DataFrame:
    """Per cell (model, arm, lang): ``n_records``, ``prompt_tokens_total`` and their mean ``prompt_tokens``, from
    a ledger table's ``prompt_ids`` (a :class:`pyarrow.Table` or a DataFrame)."""
    frame = records if isinstance(records, pd.DataFrame) else records.select([*CELL_COLUMNS, "prompt_ids"]).to_pandas()
    frame = frame.assign(n=frame["prompt_ids"].map(len))
    out = frame.groupby(list(CELL_COLUMNS), sort=True)["n"].agg(n_records="size", prompt_tokens_total="sum")
    out = out.reset_index()
    out["prompt_tokens"] = out["prompt_tokens_total"] / out["n_records"]
    return out


def ledger_prompt_tokens(path: str | Path, *, models: Sequence[str] = ()) -> pd.DataFrame:
    """:func:`prompt_tokens` of the ledger at ``path`` (only ``models`` when given)."""
    from ..store import Ledger, empty_selection, warn_unmatched

    ledger = Ledger(path)
    table = ledger.read(model=list(models) or None, columns=[*CELL_COLUMNS, "prompt_ids"])
    if table.num_rows == 0:
        raise empty_selection(ledger, models=models)
    warn_unmatched(ledger, models=models)
    return prompt_tokens(table)


def matched_cost_grid(
    cells: pd.DataFrame, prices: Prices, *, budgets: Sequence[int], reference: Mapping[str, str]
) -> pd.DataFrame:
    """The matched-cost grid: per reference budget B and cell, ``matched_budget`` B' (see the module docstring),
    ``reference_cost`` and ``cost`` (dollars per item at B and at B').

    ``cells``: :func:`prompt_tokens`; ``reference``: the keys naming the reference cell, e.g. ``{"lang": "en"}``.
    Cells whose group holds no reference cell are left out; none at all is a one-line error.
    """
    unknown = set(reference) - {"arm", "lang"}
    if not reference or unknown:
        raise BadInputError(f"the reference names arm and/or lang, got {dict(reference)}")
    ref = {k: resolve_language(v) if k == "lang" else v for k, v in reference.items()}
    group = ["model", *[k for k in ("arm", "lang") if k not in ref]]
    rows = []
    for key, part in cells.groupby(group, sort=True):
        key = dict(zip(group, key if isinstance(key, tuple) else (key,), strict=True))
        is_ref = (part[list(ref)] == pd.Series(ref)).all(axis=1)
        if not is_ref.any():  # e.g. translate-act has no English cell: its cells have nothing to match
            continue
        inp, out = price_of(prices, key["model"])
        r = part[is_ref].iloc[0]
        p_ref = Fraction(int(r["prompt_tokens_total"]), int(r["n_records"]))
        for c in part.itertuples(index=False):
            p = Fraction(int(c.prompt_tokens_total), int(c.n_records))
            for b in budgets:
                matched = math.floor(b + inp * (p_ref - p) / out)
                if matched < 1:
                    raise BadInputError(f"{c.model}/{c.arm}/{c.lang}: its prompt alone costs more than {ref} at B={b}")
                rows.append(
                    {
                        "model": c.model,
                        "arm": c.arm,
                        "lang": c.lang,
                        "prompt_tokens": float(p),
                        "budget": int(b),
                        "matched_budget": matched,
                        "reference_cost": float((inp * p_ref + out * b) / 10**6),
                        "cost": float((inp * p + out * matched) / 10**6),
                    }
                )
    if not rows:
        raise BadInputError(f"no reference cell {ref} in the ledger")
    return pd.DataFrame(rows)
