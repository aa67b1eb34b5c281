"""Retokenizing traces: prefix byte lengths against a slow reference and against hand counts; cross-fitting."""

from __future__ import annotations

import importlib
import logging
import multiprocessing as mp
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindcap_tok.adaptation.crossfit import cross_fit
from mindcap_tok.adaptation.retokenize import (
    FoldTokenizer,
    Scoring,
    decode_traces,
    fold_of_items,
    fold_tokenizers,
    ledger_corpus,
    prefix_byte_lengths,
    retokenize,
    retokenize_items,
)
from mindcap_tok.budgets import check_budgets
from mindcap_tok.data.flores import load_flores
from mindcap_tok.errors import MindcapError
from mindcap_tok.tokenization.pretoken_cache import PretokenEncoder
from price_fixture import EOS, english_trace, save_tiny, thai_trace


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return save_tiny(root / "base"), save_tiny(root / "ext", extended=True)


def _reference(ids, token_bytes, budget):
    # slow path: join the bytes of the first B tokens
    return len(b"".join(token_bytes[i] for i in ids[:budget]))


@settings(max_examples=30, deadline=None)
@given(
    seqs=st.lists(st.lists(st.integers(0, 9), max_size=30), min_size=1, max_size=8),
    widths=st.lists(st.integers(0, 5), min_size=10, max_size=10),
    budgets=st.lists(st.integers(1, 40), min_size=1, max_size=5, unique=True),
)
def test_prefix_bytes_match_joined_prefixes(seqs, widths, budgets):
    token_bytes = [b"x" * w for w in widths]
    prefix, n_tokens, totals = prefix_byte_lengths(seqs, np.array(widths), budgets=budgets)
    for t, ids in enumerate(seqs):
        assert n_tokens[t] == len(ids)
        assert totals[t] == _reference(ids, token_bytes, len(ids))
        for j, b in enumerate(budgets):
            assert prefix[t, j] == _reference(ids, token_bytes, b)


def test_real_tokenizer_prefixes_decode_to_the_prefix_text(qwen):
    texts = ["ดังนั้นคำตอบคือ 18\n#### 18", "Also ist die Antwort 7.\n#### 7", ""]
    budgets = [1, 3, 8, 1000]
    got = retokenize(texts, qwen, budgets=budgets)
    for t, text in enumerate(texts):
        ids = qwen.tokenizer.encode(text, add_special_tokens=False).ids
        assert got.n_tokens[t] == len(ids)
        assert got.total_bytes[t] == len(text.encode("utf-8"))
        for j, b in enumerate(budgets):
            assert got.prefix_bytes[t, j] == _reference(ids, qwen.token_bytes, b)


@pytest.mark.parametrize("memo", [True, False], ids=["memoised", "hf-encode"])
def test_hand_counts_of_the_tiny_extension(tiny, memo):
    base, ext = tiny
    texts = [thai_trace(10, 4), english_trace(10, 4)]
    b = retokenize(texts, base, budgets=[4, 20, 27, 100], memo=memo)
    e = retokenize(texts, ext, budgets=[4, 20, 27, 100], memo=memo)
    # base: 2k+7 = 27 tokens each; ext halves only the Thai part: k+7 = 17
    assert b.n_tokens.tolist() == [27, 27]
    assert e.n_tokens.tolist() == [17, 27]
    # Thai: a base token is one 3-byte letter, an extended token two letters (6 bytes); the answer line is 7 bytes
    assert b.prefix_bytes[0].tolist() == [12, 60, 67, 67]
    assert e.prefix_bytes[0].tolist() == [24, 67, 67, 67]
    # English: one byte per token under both
    assert b.prefix_bytes[1].tolist() == e.prefix_bytes[1].tolist() == [4, 20, 27, 27]


def test_decode_keeps_special_tokens_as_text(tiny):
    base, _ = tiny
    ids = base.tokenizer.encode("กา" + EOS, add_special_tokens=False).ids
    assert decode_traces(base, [ids]) == ["กา" + EOS]


def test_each_item_uses_the_fold_that_held_it_out(tiny):
    base, ext = tiny
    folds = [FoldTokenizer(ext, frozenset({0, 2}), 0), FoldTokenizer(base, frozenset({1}), 1)]
    items = [0, 1, 2, 1]
    got = retokenize_items([thai_trace(5, 1)] * 4, items, folds=folds, budgets=[100])
    assert got.fold.tolist() == [0, 1, 0, 1]
    assert got.n_tokens.tolist() == [12, 17, 12, 17]


def test_items_outside_every_fold_or_in_two_are_rejected(tiny):
    base, ext = tiny
    with pytest.raises(MindcapError, match="item 3 is held out by no fold"):
        fold_of_items(np.array([0, 3]), [FoldTokenizer(ext, frozenset({0}), 0)])
    with pytest.raises(MindcapError, match="item 1 is held out by more than one fold"):
        fold_of_items(np.array([1]), [FoldTokenizer(ext, frozenset({1}), 0), FoldTokenizer(base, frozenset({1}), 1)])


def test_bad_budgets_are_rejected():
    with pytest.raises(MindcapError, match="positive"):
        check_budgets([0, 5])
    with pytest.raises(MindcapError, match="at least one"):
        check_budgets([])


def test_extensions_learned_on_ledger_traces_are_cross_fitted(tiny):
    base, _ = tiny
    items = [0, 0, 1, 1, 2, 2, 3, 3]
    texts = [thai_trace(6 + i, i) for i in items]
    corpus = ledger_corpus(items, texts, name="ledger:test/native/tha_Thai")
    learned = cross_fit(base, corpus, folds=2, seed=0, size=1)
    held = [set(fx.held_out) for fx in learned]
    assert held[0].isdisjoint(held[1]) and held[0] | held[1] == {0, 1, 2, 3}
    for fx in learned:
        # the most frequent pair in any half of these traces is ก+า: the one merge of the hand-made extension
        assert fx.extension.merges == (("à¸ģ", "à¸²"),)
    folds = fold_tokenizers(learned, "tha_Thai")
    got = retokenize_items(texts, items, folds=folds, budgets=[100])
    assert got.n_tokens.tolist() == [6 + i + 7 for i in items]
    assert sorted(set(got.fold.tolist())) == [0, 1]


def test_scores_equal_decoding_every_prefix(tiny):
    # slow reference: the paper's description, decode the first B extended ids and parse that text
    from mindcap_tok.tasks.answers import get_parser

    base, ext = tiny
    texts = [
        thai_trace(9, 7),
        "กา" * 4 + "\n#### 7\n" + "กา" * 30,  # answer early, then more text
        "กา" * 6 + "\n#### 77",  # '#### 7' is readable before the second 7 arrives
        "ab\n#### 5\n#### 7" + EOS,
        "กา" * 50,
    ]
    golds, complete = [7, 7, 7, 7, 7], [True, True, True, False, False]
    budgets = list(range(1, 60, 3))
    rule = get_parser("strict")
    for tok in (base, ext):
        got = retokenize(texts, tok, budgets=budgets, scoring=Scoring(golds, complete=complete))
        for t, text in enumerate(texts):
            ids = tok.tokenizer.encode(text, add_special_tokens=False).ids
            for j, b in enumerate(budgets):
                prefix = tok.tokenizer.decode(ids[:b], skip_special_tokens=True)
                want = rule.score(prefix, golds[t], complete=complete[t] and b >= len(ids))
                assert got.scores[t, j] == want, (tok.name, t, b)
            assert got.correct[t] == rule.score(text.replace(EOS, ""), golds[t], complete=complete[t])


def _thai_traces(flores_dir: str, n: int) -> tuple[list[str], list[int]]:
    lines = load_flores("tha_Thai", "dev", source=flores_dir)
    texts = ["\n".join(lines[t % 97 : t % 97 + 1 + t % 5]) + f"\n#### {t % 10}" * (t % 3 > 0) for t in range(n)]
    return texts, [t % 10 for t in range(n)]


def test_worker_processes_and_hf_encode_agree(qwen, flores_dir, monkeypatch):
    # 300 traces in chunks of 64, so two spawned workers share them (however few characters they hold);
    # HF's own encode is the reference
    monkeypatch.setattr(importlib.import_module("mindcap_tok.adaptation.retokenize"), "PARALLEL_MIN_CHARS", 0)
    texts, golds = _thai_traces(flores_dir, 300)
    items = [t % 7 for t in range(300)]
    folds = [FoldTokenizer(qwen, frozenset({0, 1, 2}), 0), FoldTokenizer(qwen, frozenset({3, 4, 5, 6}), 1)]
    budgets = [16, 64, 256, 1024]
    alive: list[int] = []  # worker processes alive as each chunk comes back
    runs = [
        retokenize_items(
            texts,
            items,
            folds=folds,
            budgets=budgets,
            scoring=Scoring(golds),
            workers=w,
            memo=m,
            on_progress=lambda *_: alive.append(len(mp.active_children())),
        )
        for w, m in ((2, True), (1, True), (1, False))
    ]
    # 129 and 171 traces per fold: chunks of 64 with two workers (3 + 3), of 75 with one (2 + 3, twice)
    assert alive == [2] * 6 + [0] * 10
    ids = [e.ids for e in qwen.tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert runs[2].n_tokens.tolist() == [len(i) for i in ids]
    for run in runs[:2]:
        for name in ("n_tokens", "prefix_bytes", "total_bytes", "fold", "scores", "correct"):
            assert np.array_equal(getattr(run, name), getattr(runs[2], name)), name
        assert np.array_equal(run.emission, runs[2].emission, equal_nan=True)


def test_an_encoder_that_disagrees_with_hf_is_dropped(qwen, llama, flores_dir, monkeypatch, caplog):
    # an encoder of another tokenizer stands in for one a changed tokenizers release broke: caught on the
    # first traces, warned about, and HF's encode used instead
    wrong = PretokenEncoder.from_tokenizer(llama.tokenizer)
    monkeypatch.setattr(PretokenEncoder, "from_tokenizer", staticmethod(lambda tok: wrong))
    texts, golds = _thai_traces(flores_dir, 10)
    with caplog.at_level(logging.WARNING, logger="mindcap_tok"):
        got = retokenize(texts, qwen, budgets=[1024], scoring=Scoring(golds))
    assert [r.name for r in caplog.records] == ["mindcap_tok.adaptation.retokenize"]
    assert "differs from HF" in caplog.records[0].getMessage()
    assert got.n_tokens.tolist() == [len(e.ids) for e in qwen.tokenizer.encode_batch(texts, add_special_tokens=False)]


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path):
    # a script without a __main__ guard: each spawned worker re-runs it, tries to spawn in turn and dies; the
    # parent must stop with the error, not wait forever
    save_tiny(tmp_path / "tiny")
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(f"""
        import importlib
        from mindcap_tok.tokenization.load import load_tokenizer
        from mindcap_tok.adaptation.retokenize import retokenize
        importlib.import_module("mindcap_tok.adaptation.retokenize").PARALLEL_MIN_CHARS = 0
        tok = load_tokenizer({str(tmp_path / "tiny")!r})
        retokenize(["กากา\\n#### 7"] * 300, tok, budgets=[8], workers=2)
    """)
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "a retokenizing worker process died" in run.stderr
