"""Benchmark: the same job through the in-process vLLM engine and through vLLM's OpenAI-compatible server.

Both sides are ``run_job`` into a fresh ledger on the tiny random Qwen3 (the job of ``bench_generate.py``:
2 arms × 2 languages × ``--items`` MGSM items = 200 requests, k=8, cap 128, 4 shards). In-process: the ``vllm``
backend. Server: ``python -m vllm.entrypoints.openai.api_server`` (``vllm serve``'s module form) in a subprocess
and the ``server`` backend, ``--concurrency`` requests in flight. Engine and server start-up are not timed; each
side gets a 4-request warm-up first. The server side runs first, while no engine lives in this process, so the
client's CPU time (``getrusage(RUSAGE_SELF)``: this process only, not the server subprocess) is its own.

    .venv-gen/bin/python benchmarks/bench_server.py [--items 50] [--k 8] [--cap 128] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_generate import bare_requests, tiny_job
from mindcap_tok.config import load_config
from mindcap_tok.generation.backends import load_backend
from mindcap_tok.generation.generate import GenerateResult, run_job
from mindcap_tok.generation.jobs import ServerSpec, parse_spec, plan_job
from tiny_model import build_tiny_model
from vllm_server import vllm_server


def cpu_seconds() -> float:
    """User + system CPU time of this process (all its threads; child processes excluded)."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def timed_run(spec, ledger: Path, backend, data_dir) -> tuple[GenerateResult, float, float]:
    """``run_job`` with its wall time and this process's CPU time."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    res = run_job(spec, ledger, backend=backend, data_dir=data_dir)
    return res, time.perf_counter() - t0, cpu_seconds() - c0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--cap", type=int, default=128)
    ap.add_argument("--shard-size", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=64, help="server requests in flight (>= shard size: all)")
    args = ap.parse_args()
    data_dir = load_config().data_dir.value
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = build_tiny_model(root / "tiny-qwen3")
        job = tiny_job(model, args.items, args.k, args.cap, args.shard_size)
        spec = parse_spec(job)
        n_requests = sum(len(s.requests) for s in plan_job(spec).shards)

        t0 = time.perf_counter()
        with vllm_server(model, root / "vllm.log") as url:
            started = time.perf_counter() - t0
            opts = ServerSpec(base_url=(url,), model="tiny", concurrency=args.concurrency)
            client = load_backend("server", str(model), tokenizer_name="tiny-qwen3", server=opts)
            warm = bare_requests(spec, client, data_dir)[:4]
            client.generate(warm)
            served, t_srv, cpu = timed_run(spec, root / "ledger-server", client, data_dir)
        t0 = time.perf_counter()
        engine = load_backend(
            "vllm", str(model), tokenizer_name="tiny-qwen3", engine={"max_model_len": 1024}, seed=spec.seed
        )
        engine_start = time.perf_counter() - t0
        engine.generate(warm)
        local, t_loc, _ = timed_run(spec, root / "ledger-vllm", engine, data_dir)

    rate_srv, rate_loc = served.tokens / t_srv, local.tokens / t_loc
    print(
        f"{n_requests} requests x k={args.k}, cap {args.cap}, {served.shards} shards; "
        f"start-up (not timed): server {started:.0f} s, engine {engine_start:.0f} s"
    )
    print(f"in-process vllm: {t_loc:.2f} s ({local.tokens} output tokens, {rate_loc:.0f} tok/s)")
    print(
        f"vllm server:     {t_srv:.2f} s ({served.tokens} output tokens, {rate_srv:.0f} tok/s; "
        f"concurrency {args.concurrency})"
    )
    print(f"ratio server/in-process throughput: {rate_srv / rate_loc:.3f} (target >= 0.7); time {t_srv / t_loc:.3f}")
    print(f"client CPU: {cpu:.2f} s = {100 * cpu / t_srv:.1f}% of the server run's wall time (target < 5%)")
    print(f"retries: {client.retries}; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
