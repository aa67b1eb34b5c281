"""Reasoning models: where the thought ends (hand-built records for each edge case), scoring that reads the
answer channel only (against decoding and parsing every answer-channel prefix), the thought/answer counts, and
import with ``thinking``."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from ledger_factory import make_record
from mindcap_tok.errors import MindcapError
from mindcap_tok.ingest.jsonl import import_jsonl
from mindcap_tok.scoring.score import score_ledger, thought_summary
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.store.think import think_end, think_markers
from mindcap_tok.tokenization.load import load_tokenizer
from score_reference import reference_scores

BUDGETS = [1, 2, 4, 8, 16, 32, 64]


def ids_of(tok, *pieces: str) -> list[int]:
    """Ids of ``pieces`` encoded one by one (so the think tokens are where the test puts them)."""
    return [i for p in pieces for i in tok.tokenizer.encode(p, add_special_tokens=False).ids]


def end_of(tok, *pieces: str) -> int | None:
    return think_end(ids_of(tok, *pieces), think_markers(tok), tokenizer=tok)


def test_the_think_tokens_are_found_by_their_text(qwen):
    markers = think_markers(qwen)
    assert markers.close_id == qwen.tokenizer.token_to_id("</think>") and markers.close_ids == (markers.close_id,)
    assert qwen.tokenizer.encode("</think>", add_special_tokens=False).ids == [markers.close_id]  # one token


def test_a_tokenizer_without_think_tokens_needs_a_delimiter(config):
    with pytest.raises(MindcapError, match=r"no </think> added token.*think_close"):
        think_markers(load_tokenizer("cl100k_base", config.tokenizers_dir.value))


def test_edge_cases_of_the_channel(qwen):
    head = ["<think>", "\nLet me count: 16 - 3 - 4 = 9.\n"]
    assert end_of(qwen, "9 + 9 = 18\n#### 18") is None  # no thought
    assert end_of(qwen, *head) is None  # unclosed at the cap
    # an answer line inside the thought: the thought ends at its closing token all the same
    inside = [*head, "#### 17\n"]
    assert end_of(qwen, *inside, "</think>", "\n\n#### 18") == len(ids_of(qwen, *inside))
    # two think blocks: the first closing token counts (vLLM's DeepSeek-R1 and Qwen3 parsers), the second
    # block is answer text
    first = [*head, "</think>"]
    two = [*first, "\n\n", "<think>", "again", "</think>", "\n#### 18"]
    assert end_of(qwen, *two) == len(ids_of(qwen, *head))
    # Qwen3's empty thought
    assert end_of(qwen, "<think>", "\n\n", "</think>", "\n\n#### 18") == len(ids_of(qwen, "<think>", "\n\n"))


def test_a_delimiter_string_for_a_template_without_think_tokens(llama):
    markers = think_markers(llama, "</reasoning>")
    assert markers.close_id is None
    ids = llama.tokenizer.encode("I reason here</reasoning>\n#### 18", add_special_tokens=False).ids
    end = think_end(ids, markers, tokenizer=llama)
    decode = lambda x: llama.tokenizer.decode(x, skip_special_tokens=True)  # noqa: E731
    assert "</reasoning>" in decode(ids[: end + 1]) and "</reasoning>" not in decode(ids[:end])
    assert think_end(llama.tokenizer.encode("no delimiter").ids, markers, tokenizer=llama) is None


# -- scoring ------------------------------------------------------------------------------------------------------
TRACES = [
    # (pieces, finish): the answer inside the thought is wrong (17), the one after it right (18)
    (["<think>", "\nThink: #### 17\n", "</think>", "\n\n#### 18"], "stop"),
    (["<think>", "\nstill thinking #### 18\nmore"], "length"),  # unclosed at the cap: scores 0 everywhere
    (["<think>", "\n\n", "</think>", "\n\n#### 18"], "stop"),  # the empty thought
    (["<think>", "a", "</think>", "#### 18 ", "<think>", "b", "</think>", "\n#### 17"], "stop"),  # two blocks
    (["Plain reasoning 9 + 9 = 18\n#### 18"], "stop"),  # thinking off: the whole trace
]


def _records(qwen) -> list[dict]:
    markers = think_markers(qwen)
    out = []
    for i, (pieces, finish) in enumerate(TRACES):
        ids = ids_of(qwen, *pieces)
        thinking = i < len(TRACES) - 1
        rec = make_record(qwen, "x", item=i, cap=max(len(ids), 1), finish_reason=finish, thinking=thinking)
        rec |= {"output_ids": ids, "text": qwen.tokenizer.decode(ids, skip_special_tokens=True)}
        rec["think_end"] = think_end(ids, markers, tokenizer=qwen) if thinking else None
        out.append(rec)
    return out


def test_scores_read_only_the_answer_channel(qwen):
    recs = _records(qwen)
    scores = score_ledger(pa.Table.from_pylist(recs), qwen, budgets=BUDGETS)
    decode = lambda x: qwen.tokenizer.decode(x, skip_special_tokens=True)  # noqa: E731
    for r, rec in enumerate(recs):
        end = rec["think_end"]
        start = 0 if not rec["thinking"] else len(rec["output_ids"]) if end is None else end + 1
        frame = scores.by_record.iloc[[r]].assign(output_ids=[rec["output_ids"]], gold=18)
        # the reference decodes every prefix's answer channel, ids[start:B]: budgets count every output token
        want, emission, correct = reference_scores(lambda p, s=start: decode(p[s:]), frame, BUDGETS, "strict")
        got = scores.by_budget[scores.by_budget["item"] == r]["score"].to_numpy()
        assert got.tolist() == want[0].tolist(), r
        assert scores.by_record["correct"].iloc[r] == correct[0]
        assert np.isnan(emission[0]) == np.isnan(scores.by_record["emission"].iloc[r])
        if not np.isnan(emission[0]):
            assert scores.by_record["emission"].iloc[r] == emission[0]
    # by hand: right after the thought (18), never inside it (17), nothing for the unclosed one; the second
    # block of two is answer text, so its last answer line (17) is the answer
    assert scores.by_record["correct"].tolist() == [1, 0, 1, 0, 1]
    assert scores.by_record["emission"].iloc[0] == len(ids_of(qwen, *TRACES[0][0]))


def test_thought_and_answer_counts(qwen):
    recs = _records(qwen)
    scores = score_ledger(pa.Table.from_pylist(recs), qwen, budgets=BUDGETS)
    br = scores.by_record
    n = [len(r["output_ids"]) for r in recs]
    thought = [len(ids_of(qwen, *TRACES[0][0][:3])), n[1], len(ids_of(qwen, *TRACES[2][0][:3])), 3, 0]
    assert br["thought_tokens"].tolist() == thought
    assert br["answer_tokens"].tolist() == [a - b for a, b in zip(n, thought, strict=True)]
    assert br["cap_in_thought"].tolist() == [False, True, False, False, False]
    summary = thought_summary(br)
    assert summary["records"].sum() == 4 and summary["cap_in_thought_share"].dropna().tolist() == [1.0]


def test_records_without_thinking_keep_their_columns(qwen):
    recs = [make_record(qwen, "#### 18\n", item=i) for i in range(2)]
    scores = score_ledger(pa.Table.from_pylist([r | {"thinking": False} for r in recs]), qwen, budgets=BUDGETS)
    assert "thinking" not in scores.by_budget and "thought_tokens" not in scores.by_record


# -- import -------------------------------------------------------------------------------------------------------
def _jsonl(tmp_path, records) -> str:
    path = tmp_path / "in.jsonl"
    keep = ("model", "arm", "lang", "item", "sample", "seed", "cap", "prompt", "prompt_ids", "output_ids", "text")
    keep += ("finish_reason", "gold", "generator", "thinking", "think_end")
    path.write_text("".join(json.dumps({k: r[k] for k in keep if k in r}) + "\n" for r in records))
    return str(path)


def test_import_computes_and_checks_think_end(tmp_path, qwen):
    recs = _records(qwen)
    given = [{k: v for k, v in r.items() if k != "think_end"} for r in recs]
    import_jsonl(_jsonl(tmp_path, given), tmp_path / "L", tokenizer=qwen)
    got = {r["item"]: (r["thinking"], r["think_end"]) for r in Ledger(tmp_path / "L").read().to_pylist()}
    assert got == {i: (r["thinking"], r["think_end"]) for i, r in enumerate(recs)}
    wrong = [{**recs[0], "think_end": 1}]
    with pytest.raises(MindcapError, match=r"in.jsonl:1: think_end = 1 but the output ids hold the thought closing"):
        import_jsonl(_jsonl(tmp_path, wrong), tmp_path / "M", tokenizer=qwen)
    off = [{**recs[-1], "think_end": 0}]
    with pytest.raises(MindcapError, match="think_end is given but thinking is not true"):
        import_jsonl(_jsonl(tmp_path, off), tmp_path / "N", tokenizer=qwen)


def test_populations_split_by_thinking_only_where_some_record_thinks(qwen):
    from mindcap_tok.store import population_columns

    off = pa.table({"model": ["m"], "arm": ["native"], "lang": ["tha_Thai"], "thinking": [False]})
    assert "thinking" not in population_columns(off) and "thinking" not in population_columns(off.to_pandas())
    on = pa.table({"model": ["m", "m"], "arm": ["native"] * 2, "lang": ["tha_Thai"] * 2, "thinking": [False, True]})
    assert population_columns(on)[-1] == "thinking" and population_columns(on.to_pandas())[-1] == "thinking"
