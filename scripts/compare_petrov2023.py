"""Compare `premium --split dev+devtest --protocol petrov2023` with Petrov et al.'s published columns.

For each tokenizer (qwen3-8b -> Qwen, gpt-4 -> cl100k_base, llama-2 -> LLAMA) and all 204 FLORES-200
languages: our premium (tokens(L)/tokens(English) of one joined string) against theirs (their count of L ÷
their count of English). Prints the max relative error per column and the number of exact token totals.

    .venv/bin/python scripts/compare_petrov2023.py [--models qwen3-8b gpt-4 llama-2] [--nfc]
"""

from __future__ import annotations

import argparse

from mindcap_tok.data.languages import flores_codes
from mindcap_tok.data.petrov2023 import COLUMNS, petrov2023_lengths
from mindcap_tok.premium import PremiumText, token_premium
from mindcap_tok.tokenization.load import load_tokenizer


def compare(model: str, nfc: bool = False) -> dict:
    """Max relative premium error and exact-count tally of one registry model against its Petrov column."""
    column = COLUMNS[model]
    theirs = petrov2023_lengths(column)
    codes = [c for c in flores_codes() if c != "eng_Latn" and c in theirs]
    text = PremiumText(split="dev+devtest", protocol="petrov2023", nfc=nfc)
    rows = token_premium(load_tokenizer(model), codes, text=text)
    worst, worst_lang, exact = 0.0, "", 0
    for r in rows:
        ref = theirs[r.lang] / theirs["eng_Latn"]
        err = abs(r.premium - ref) / ref
        exact += r.tokens == theirs[r.lang]
        if err > worst:
            worst, worst_lang = err, r.lang
    return {
        "model": model,
        "column": column,
        "languages": len(rows) + 1,
        "max_rel_err": worst,
        "worst_lang": worst_lang,
        "exact_totals": exact + (rows[0].ref_tokens == theirs["eng_Latn"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=list(COLUMNS))
    ap.add_argument("--nfc", action="store_true", help="NFC-normalise first (Petrov et al. did not)")
    args = ap.parse_args()
    for model in args.models:
        c = compare(model, args.nfc)
        print(
            f"{c['model']:>10} vs {c['column']:<12} {c['languages']} languages: max relative error "
            f"{c['max_rel_err']:.2e} ({c['worst_lang'] or '-'}); token totals equal for {c['exact_totals']}"
        )


if __name__ == "__main__":
    main()
