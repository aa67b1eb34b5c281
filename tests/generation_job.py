"""The generation test job on the tiny model (``spec_data``) and a ledger's records in a stable order (``frame``),
shared by the generation, determinism and server backend tests."""

from __future__ import annotations

from pathlib import Path

from mindcap_tok.store.ledger import Ledger


def spec_data(tiny: Path | str, **kw) -> dict:
    """A replay job of the tiny model: 2 languages x 3 items x k = 2 under cap 12, seeded; ``kw`` overrides keys."""
    data = {
        "name": "t",
        "model": str(tiny),
        "model_name": "tiny-qwen3",
        "arms": ["native"],
        "langs": ["deu_Latn", "tha_Thai"],
        "items": [0, 1, 2],
        "k": 2,
        "design": "replay",
        "caps": [12],
        "shard_size": 2,
        "seed": 7,
        "sampling": {"temperature": 0.8, "top_p": 0.95, "top_k": 20},
    }
    data.update(kw)
    return data


def frame(ledger) -> list[dict]:
    """The ledger's records as plain dicts, sorted by cell, item and sample (missing nullable ints as None)."""
    df = Ledger(ledger).to_pandas()
    df = df.sort_values(["lang", "cap", "announced", "item", "sample"]).reset_index(drop=True)
    for col in df.columns[df.dtypes == "float64"]:  # nullable ints come back as floats with NaN, never equal
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    return [{k: (list(v) if k.endswith("_ids") else v) for k, v in row.items()} for row in df.to_dict("records")]
