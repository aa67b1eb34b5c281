"""Small real ledger records for tests: token ids from a real tokenizer, text decoded from them."""

from __future__ import annotations

from mindcap_tok.tokenizer import ResolvedTokenizer


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
