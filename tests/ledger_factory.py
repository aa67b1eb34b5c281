"""Small real ledger records for tests: token ids from a real tokenizer, text decoded from them."""

from __future__ import annotations

from mindcap_tok.tokenization.load import ResolvedTokenizer


def make_record(
    tok: ResolvedTokenizer,
    text: str,
    *,
    model: str = "qwen3-8b",
    arm: str = "native",
    lang: str = "tha_Thai",
    item: int = 0,
    sample: int = 0,
    gold: int = 18,
    cap: int = 4096,
    finish_reason: str | None = None,
    **extra,
) -> dict:
    """One record whose output ids encode ``text`` (ids are the truth; ``text`` is their decoding)."""
    ids = tok.tokenizer.encode(text, add_special_tokens=False).ids[:cap]
    prompt = f"Question {item}: how many eggs?"
    return {
        "model": model,
        "arm": arm,
        "lang": lang,
        "item": item,
        "sample": sample,
        "seed": 1000 + sample,
        "cap": cap,
        "announced": None,
        "prompt": prompt,
        "prompt_ids": tok.tokenizer.encode(prompt, add_special_tokens=False).ids,
        "output_ids": ids,
        "text": tok.tokenizer.decode(ids, skip_special_tokens=True),
        "finish_reason": finish_reason or ("length" if len(ids) >= cap else "stop"),
        "gold": gold,
        "generator": "test",
        "tokenizer": tok.name,
        **extra,
    }


def make_cell(tok: ResolvedTokenizer, n_items: int = 3, n_samples: int = 2, **kw) -> list[dict]:
    """A small cell: items x samples, answer lines with the right or a wrong value."""
    out = []
    for item in range(n_items):
        for sample in range(n_samples):
            value = item + 10 if sample % 2 == 0 else item + 11
            text = f"ขั้นที่ 1: คิด {item}\nดังนั้นคำตอบคือ {value}\n#### {value}\n"
            out.append(make_record(tok, text, item=item, sample=sample, gold=item + 10, **kw))
    return out


FILLER = "We add the two numbers and then check the sum once more. "


def early_late_records(tok: ResolvedTokenizer) -> list[dict]:
    """Native Thai items 0,1 answer within 30 tokens, items 2,3 between 30 and 76 (item 3 sample 1 wrong);
    translate-act always answers within 30. So acc_N(30) = 4/8, acc_N(76 or 90) = 7/8 and acc_T(30) = 1.

    The stats tests derive their expected values by hand from these token positions, so they are checked here."""
    records = []
    for item in range(4):
        for sample in range(2):
            gold = 10 + item
            wrong = item == 3 and sample == 1
            late = FILLER * 4 if item >= 2 else ""
            records.append(
                make_record(tok, late + f"Answer line:\n#### {gold + wrong}\n", item=item, sample=sample, gold=gold)
            )
            records.append(
                make_record(
                    tok, f"Answer line:\n#### {gold}\n", arm="translate-act", item=item, sample=sample, gold=gold
                )
            )
    for rec in records:
        n = len(rec["output_ids"])
        assert (n < 30) if rec["arm"] != "native" or rec["item"] < 2 else (30 < n - 3 < 76)
    return records
