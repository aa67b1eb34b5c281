"""The tiny random Qwen3 on vLLM's in-process CPU engine (the ``engine`` fixture of conftest.py).

Import it after ``pytest.importorskip("vllm")``: it sets vLLM's in-process, small-KV-cache CPU defaults."""

from __future__ import annotations

import os

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on CPU

from pathlib import Path

from mindcap_tok.generation.backends import load_backend


def start_engine(tiny: Path):
    """The ``vllm`` backend on the tiny model folder ``tiny``, seed 0, 1,024 positions."""
    return load_backend("vllm", str(tiny), tokenizer_name="tiny-qwen3", engine={"max_model_len": 1024}, seed=0)
