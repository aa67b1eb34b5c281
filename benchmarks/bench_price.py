"""Benchmark: retokenize 48,000 traces with a cross-fitted extended tokenizer and score them on a 10-budget grid.

Fast path: ``retokenize_items`` with its defaults (each trace encoded by the fold tokenizer that held its item
out, memoised per pre-token on every usable CPU; byte length of every length-B prefix from one cumulative sum;
the ledger's byte-position scorer). HF path: the same with ``memo=False``, so HF's ``encode_batch_fast`` does
the encoding (what any retokenization with HF tokenizers pays; all its outputs must equal the fast path's).
Reference, on a slice: encode each trace, decode its first B ids for every budget and parse the text (what the
score means by definition); the slice's scores are checked to be identical.

Traces: Thai FLORES sentences (dev+devtest) joined by newlines up to about ``--tokens`` base Qwen3 tokens,
with a ``#### <gold>`` answer line planted early, late, or not at all, over 250 items. The extension (two
folds, ``--size`` merges each) is learned on the traces themselves, as ``price --learn-extension`` does.

    python benchmarks/bench_price.py [--traces 48000] [--tokens 4096] [--size 2000] [--slice 4] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from mindcap_tok.adaptation.corpus import as_corpus
from mindcap_tok.adaptation.crossfit import cross_fit
from mindcap_tok.adaptation.retokenize import (
    Scoring,
    encode_ids,
    fold_of_items,
    fold_tokenizers,
    retokenize_items,
)
from mindcap_tok.budgets import SCORE_BUDGETS
from mindcap_tok.data.flores import load_flores
from mindcap_tok.tasks.answers.integer import parse_answer
from mindcap_tok.tasks.mgsm import mgsm_gold
from mindcap_tok.tokenization.load import load_tokenizer

ITEMS = 250
TOKENS_PER_CHAR = 0.45  # Qwen3 on Thai FLORES (≈ 2.2 characters per token), to size the traces


def synthetic_traces(n: int, tokens: int, seed: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``n`` Thai traces of about ``tokens`` base tokens, their item ids and gold answers."""
    rng = np.random.default_rng(seed)
    sentences = load_flores("tha_Thai", "dev") + load_flores("tha_Thai", "devtest")
    golds = np.array(mgsm_gold())[:ITEMS]
    items = np.arange(n) % ITEMS
    n_sent = int(tokens / TOKENS_PER_CHAR / np.mean([len(s) for s in sentences]))
    texts = []
    for t in range(n):
        body = [sentences[i] for i in rng.integers(0, len(sentences), n_sent)]
        where = rng.integers(0, 4)  # 0: no answer; 1: early; 2-3: at the end (may fall beyond a small budget)
        if where:
            spot = 2 if where == 1 else len(body)
            body.insert(spot, f"#### {golds[items[t]]}")
        texts.append("\n".join(body))
    return texts, items, golds[items]


def reference_scores(tok, texts, golds, budgets) -> np.ndarray:
    """Decode the first B ids of each trace for every budget and parse the text (strict parser)."""
    out = np.zeros((len(texts), len(budgets)), dtype=np.int8)
    for t, ids in enumerate(encode_ids(tok, texts)):
        for j, b in enumerate(budgets):
            text = tok.tokenizer.decode(ids[:b], skip_special_tokens=False)
            out[t, j] = parse_answer(text, "strict", complete=b >= len(ids)) == golds[t]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--traces", type=int, default=48_000)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--size", type=int, default=2000, help="merges per fold")
    ap.add_argument("--slice", type=int, default=4, help="traces for the decode-every-budget reference")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None, help="processes for the fast path (default: every CPU)")
    args = ap.parse_args()
    base = load_tokenizer(args.model)
    budgets = list(SCORE_BUDGETS)
    print(f"{args.model}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    t0 = time.perf_counter()
    texts, items, golds = synthetic_traces(args.traces, args.tokens, args.seed)
    print(
        f"built {len(texts):,} traces ({sum(map(len, texts)) / 1e6:.0f} M characters) in "
        f"{time.perf_counter() - t0:.1f} s"
    )

    t0 = time.perf_counter()
    corpus = as_corpus(zip(items[:ITEMS].tolist(), texts[:ITEMS], strict=True), "bench traces")
    folds = fold_tokenizers(cross_fit(base, corpus, size=args.size, seed=args.seed), "th")
    print(f"learned 2 folds × {args.size:,} merges on {ITEMS} traces in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    res = retokenize_items(texts, items, folds=folds, budgets=budgets, scoring=Scoring(golds), workers=args.workers)
    fast_s = time.perf_counter() - t0
    tokens = int(res.n_tokens.sum())
    print(
        f"fast: {len(texts):,} traces, {tokens:,} extended tokens ({tokens / len(texts):,.0f} per trace), "
        f"{len(budgets)} budgets: {fast_s:.1f} s; target < 90 s: {'met' if fast_s < 90 else 'missed'}"
    )

    t0 = time.perf_counter()
    hf = retokenize_items(texts, items, folds=folds, budgets=budgets, scoring=Scoring(golds), memo=False)
    hf_s = time.perf_counter() - t0
    for name in ("n_tokens", "prefix_bytes", "total_bytes", "fold", "scores", "correct", "emission"):
        assert np.array_equal(getattr(res, name), getattr(hf, name), equal_nan=name == "emission"), name
    print(
        f"HF path: encode_batch_fast ({tokens / hf_s:,.0f} tokens/s): {hf_s:.1f} s, every output identical; "
        f"HF/fast = {hf_s / fast_s:.2f}"
    )

    pick = np.random.default_rng(args.seed + 1).choice(len(texts), args.slice, replace=False)
    which = fold_of_items(items[pick], folds)
    t0 = time.perf_counter()
    ref = np.vstack(
        [
            reference_scores(folds[k].tokenizer, [texts[t]], [golds[t]], budgets)
            for t, k in zip(pick, which, strict=True)
        ]
    )
    ref_s = (time.perf_counter() - t0) / args.slice
    assert (ref == res.scores[pick]).all(), "fast scores differ from decoding the prefixes"
    print(
        f"reference: decode + parse each budget prefix: {ref_s:.3f} s/trace ({args.slice} traces, scores "
        f"identical) -> {ref_s * len(texts):,.0f} s for all: {ref_s * len(texts) / fast_s:,.0f}× the fast path"
    )
    print(f"budget scores: mean accuracy by budget {np.round(res.scores.mean(axis=0), 3).tolist()}")


if __name__ == "__main__":
    main()
