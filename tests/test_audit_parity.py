"""Decoder parity on a sample with planted special-token, whitespace, partial-UTF-8 and other divergences."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ledger_factory import make_record
from mindcap_tok.audits import classify, parity_audit
from mindcap_tok.audits._common import stratified_sample
from mindcap_tok.store.schema import validate_records


@pytest.fixture(scope="module")
def planted(qwen):
    enc = qwen.tokenizer.encode
    end = qwen.tokenizer.token_to_id("<|im_end|>")
    recs = []
    # 0: stored text is exactly the raw local decode
    recs.append(make_record(qwen, "คิด\n#### 18\n", item=0))
    # 1: the ids end with <|im_end|>; the server returned the text without it (skip_special_tokens=True)
    ids = [*enc("ผลลัพธ์ 18", add_special_tokens=False).ids, end]
    recs.append(dict(make_record(qwen, "x", item=1), output_ids=ids, text="ผลลัพธ์ 18"))
    # 2: the server collapsed a double space and stripped a trailing newline
    rec = make_record(qwen, "a  b\n#### 3\n", item=2)
    recs.append(dict(rec, text="a b\n#### 3"))
    # 3: ids end inside a multi-byte character: local decode ends in U+FFFD, the server withheld the bytes
    for ch in ("𓀀", "𝔸", "🦩", "ꙮ"):  # a character Qwen3 spells with several byte tokens
        ids = enc(f"ok {ch}", add_special_tokens=False).ids[:-1]
        if qwen.tokenizer.decode(ids, skip_special_tokens=False).endswith("\ufffd"):
            break
    stored = qwen.tokenizer.decode(ids, skip_special_tokens=False).rstrip("\ufffd")
    recs.append(dict(make_record(qwen, "x", item=3), output_ids=ids, text=stored))
    # 4: a genuinely different text
    recs.append(dict(make_record(qwen, "#### 18\n", item=4), text="#### 81\n"))
    return validate_records(recs)


def test_classes_of_planted_divergences(qwen, planted):
    assert qwen.tokenizer.decode(planted.column("output_ids")[3].as_py(), skip_special_tokens=False).endswith("\ufffd")
    res = parity_audit(planted, {"qwen3-8b": qwen}, per_stratum=100, seed=3)
    row = res.tables["agreement"].iloc[0]
    assert row["sampled"] == 5
    assert row["raw_agreement"] == pytest.approx(1 / 5) and row["normalized_agreement"] == pytest.approx(2 / 5)
    for cls in ("special-token markup", "whitespace clean-up", "partial UTF-8", "other"):
        assert row[cls] == 1, cls
    div = res.tables["divergences"].set_index("item")["class"].to_dict()
    assert div == {1: "special-token markup", 2: "whitespace clean-up", 3: "partial UTF-8", 4: "other"}
    assert res.summary["seed"] == 3 and res.summary["raw_agreement"] == pytest.approx(0.2)


def test_classify_order():
    specials = ["<|im_end|>"]
    assert classify("a", "a", specials=specials) == "agree"
    assert classify("a", "a<|im_end|>", specials=specials) == "special-token markup"
    assert classify("a b", "a  b<|im_end|>", specials=specials) == "whitespace clean-up"
    assert classify("a", "a\ufffd", specials=specials) == "partial UTF-8"
    assert classify("a", "b", specials=specials) == "other"


def test_stratified_sample_is_seeded_and_balanced():
    frame = pd.DataFrame({"cell": ["a"] * 10 + ["b"] * 3, "x": np.arange(13)})
    picks = stratified_sample(frame, ["cell"], 4, seed=1)
    assert (frame.iloc[picks]["cell"].value_counts().to_dict()) == {"a": 4, "b": 3}
    assert picks.tolist() == stratified_sample(frame, ["cell"], 4, seed=1).tolist()


def test_prefix_units(qwen):
    enc = qwen.tokenizer.encode
    for ch in ("𓀀", "𝔸", "🦩", "ꙮ"):
        ids = enc(f"ok {ch} fine", add_special_tokens=False).ids
        cut = next((k for k in range(1, len(ids)) if qwen.tokenizer.decode(ids[:k]).endswith("\ufffd")), None)
        if cut is not None:
            break
    text = "abcdefgh ijkl mnop qrst uvw\n#### 18\n"
    recs = [
        make_record(qwen, text, item=0),  # agrees whole and at every prefix
        make_record(qwen, f"ok {ch} fine", item=1),  # the prefix at `cut` ends inside the character
        dict(make_record(qwen, text, item=2), text=text.replace("18", "81")),  # differs only near its end
    ]
    assert all(len(r["output_ids"]) > cut + 2 for r in recs if r["item"] != 1)
    res = parity_audit(validate_records(recs), {"qwen3-8b": qwen}, budgets=[cut], per_stratum=10, seed=0)
    by = res.tables["by_prefix"].set_index("prefix")
    assert by.loc[str(cut), "sampled"] == 3 and by.loc[str(cut), "raw_agreement"] == pytest.approx(2 / 3)
    assert by.loc[str(cut), "partial UTF-8"] == 1 and by.loc[str(cut), "other"] == 0
    assert by.loc["whole", "sampled"] == 3 and by.loc["whole", "other"] == 1 and by.loc["whole", "partial UTF-8"] == 0
    assert res.summary["budgets"] == [cut]


def test_thinking_records_are_compared_per_channel(qwen):
    tok = qwen.tokenizer
    o, c = tok.token_to_id("<think>"), tok.token_to_id("</think>")

    def record(item, thought, answer, *, closed=True, stored=None, thinking=True):
        ids = [o, *tok.encode(thought, add_special_tokens=False).ids]
        end = len(ids) if closed else None
        ids += [c, *tok.encode(answer, add_special_tokens=False).ids] if closed else []
        text = tok.decode(ids, skip_special_tokens=False) if stored is None else stored
        extra = {"thinking": True, "think_end": end} if thinking else {"thinking": False, "think_end": None}
        return dict(make_record(qwen, "x", item=item, **extra), output_ids=ids, text=text)

    recs = [
        record(0, "\nWir zählen  16 - 3.\n", "\n#### 18\n"),  # agrees on both channels
        record(
            1, "\nWir zählen  16 - 3.\n", "\n#### 18\n", stored="<think>\nWir zählen 16 - 3.\n</think>\n#### 18\n"
        ),  # spaces collapsed
        record(2, "\nWir zählen.\n", "\n#### 18\n", stored="<think>\nWir zählen.\n\n#### 18\n"),  # no marker
        record(3, "\nnoch am Denken", "", closed=False),  # unclosed: all reasoning, both agree
        record(4, "\nWir zählen.\n", "\n#### 18\n", stored="<think>\nWir zählen.\n</think>\n#### 81\n"),
    ]
    recs.append(dict(make_record(qwen, "#### 18\n", item=5), thinking=False, think_end=None))  # thinking off
    res = parity_audit(validate_records(recs), {"qwen3-8b": qwen}, per_stratum=100, seed=1)
    table = res.tables["by_channel"].set_index("channel")
    assert table["thinking"].tolist() == [True, True]  # the instruct record is in no channel row
    reasoning, answer = table.loc["reasoning"], table.loc["answer"]
    # by hand: reasoning agrees for 0, 3, 4; 1 differs in whitespace; 2 has no marker to split at
    assert (reasoning["sampled"], reasoning["agree"], reasoning["whitespace clean-up"]) == (5, 3, 1)
    assert (reasoning["other"], reasoning["marker_missing"]) == (1, 1)
    # the answer agrees for 0, 1 and 3 (empty on both sides); 4 holds another number; 2 cannot be split
    assert (answer["sampled"], answer["agree"], answer["other"], answer["marker_missing"]) == (5, 3, 2, 1)
    assert res.summary["channels"] == {"answer": {"sampled": 5, "agree": 3}, "reasoning": {"sampled": 5, "agree": 3}}
