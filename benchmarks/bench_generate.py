"""Benchmark: the job runner's overhead over bare engine calls with the same requests, on a tiny random Qwen3.

Bare: the backend's own engine call on the job's requests (vLLM: one ``LLM.generate`` with one
``SamplingParams(n=k, max_tokens=cap, seed=...)`` per request; transformers: one seeded ``generate`` per
request). Runner: ``run_job`` into a fresh ledger (prompts, MGSM, shards, Parquet writes, resume checks).
The engine is started once, before timing; each side runs ``--repeat`` times and the best time is kept.

    .venv-gen/bin/python benchmarks/bench_generate.py [--backend vllm|transformers] [--items 50] [--k 8]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mindcap_tok.config import load_config
from mindcap_tok.generation.backends import GenRequest, load_backend
from mindcap_tok.generation.generate import run_job
from mindcap_tok.generation.jobs import parse_spec, plan_job
from mindcap_tok.generation.prompts import task_prompt
from mindcap_tok.tasks.datasets import load_items
from mindcap_tok.tasks.load import load_task
from tiny_model import build_tiny_model


def bare_requests(spec, backend, data_dir) -> list[GenRequest]:
    s = spec.sampling
    out = []
    task = load_task(spec.task)
    for shard in plan_job(spec).shards:
        for r in shard.requests:
            item = load_items(task, r.lang, data_dir=data_dir)[r.item]
            _, ids = backend.tok.chat(task_prompt(task, item, arm=r.arm, announced=r.announced).text)
            out.append(GenRequest(tuple(ids), spec.k, r.cap, r.seed, s.temperature, s.top_p, s.top_k))
    return out


def bare(backend, requests: list[GenRequest]) -> int:
    """The engine alone; returns output tokens."""
    if backend.name == "vllm":
        import vllm

        params = [
            vllm.SamplingParams(
                n=r.n, max_tokens=r.max_tokens, seed=r.seed, temperature=r.temperature, top_p=r.top_p, top_k=r.top_k
            )
            for r in requests
        ]
        outs = backend.llm.generate(
            [{"prompt_token_ids": list(r.prompt_ids)} for r in requests], params, use_tqdm=False
        )
        return sum(len(c.token_ids) for o in outs for c in o.outputs)
    import torch

    tokens = 0
    for r in requests:
        ids = torch.tensor([r.prompt_ids])
        torch.manual_seed(r.seed)
        with torch.no_grad():
            gen = backend.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=r.max_tokens,
                num_return_sequences=r.n,
                do_sample=True,
                temperature=r.temperature,
                top_p=r.top_p,
                top_k=r.top_k,
                eos_token_id=list(backend.eos),
                pad_token_id=backend.pad,
            )
        tokens += gen.shape[0] * (gen.shape[1] - ids.shape[1])
    return tokens


def tiny_job(model: Path, items: int, k: int, cap: int, shard_size: int) -> dict:
    """The benchmarks' job: 2 arms × 2 languages × ``items`` MGSM items, ``k`` samples at one cap, on the tiny model."""
    return {
        "model": str(model),
        "model_name": "tiny-qwen3",
        "arms": ["native", "translate-act"],
        "langs": ["deu_Latn", "tha_Thai"],
        "items": list(range(items)),
        "k": k,
        "design": "replay",
        "caps": [cap],
        "shard_size": shard_size,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    default = "vllm" if importlib.util.find_spec("vllm") else "transformers"
    ap.add_argument("--backend", choices=["vllm", "transformers"], default=default)
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--cap", type=int, default=128)
    ap.add_argument("--shard-size", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    data_dir = load_config().data_dir.value
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny-qwen3")
        spec = parse_spec(tiny_job(model, args.items, args.k, args.cap, args.shard_size))
        engine = {"max_model_len": 1024} if args.backend == "vllm" else {}
        backend = load_backend(args.backend, str(model), tokenizer_name="tiny-qwen3", engine=engine, seed=spec.seed)
        requests = bare_requests(spec, backend, data_dir)
        engine_calls = backend.generate
        in_engine = [0.0]

        def timed(reqs):
            t0 = time.perf_counter()
            out = engine_calls(reqs)
            in_engine[0] += time.perf_counter() - t0
            return out

        backend.generate = timed
        bare(backend, requests[:4])  # warm-up
        t_bare, t_run = [], []
        for rep in range(args.repeat):
            in_engine[0] = 0.0
            t0 = time.perf_counter()
            tokens = bare(backend, requests)
            t_bare.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            res = run_job(spec, Path(tmp) / f"ledger-{rep}", backend=backend, data_dir=data_dir)
            t_run.append(time.perf_counter() - t0)
        b, r = min(t_bare), min(t_run)
        print(
            f"backend {args.backend}: {len(requests)} requests x k={args.k}, cap {args.cap}, "
            f"{len(plan_job(spec).shards)} shards"
        )
        print(f"bare engine: {b:.2f} s ({tokens} tokens, {tokens / b:.0f} tok/s)")
        print(
            f"job runner:  {r:.2f} s ({res.tokens} tokens, {res.records} records written; "
            f"last run: {in_engine[0]:.2f} s inside the engine calls, {t_run[-1] - in_engine[0]:.2f} s outside)"
        )
        print(f"ratio runner/bare: {r / b:.3f} (overhead {100 * (r / b - 1):+.1f}%)")


if __name__ == "__main__":
    main()
