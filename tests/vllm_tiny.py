"""The tiny random Qwen3 on vLLM's in-process CPU engine: module fixtures ``tiny`` (the model folder) and
``engine`` (the ``vllm`` backend on it), shared by the vLLM test files.

Import it after ``pytest.importorskip("vllm")``: it sets vLLM's in-process, small-KV-cache CPU defaults."""

from __future__ import annotations

import os

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on CPU

from pathlib import Path

import pytest

from mindcap_tok.ledger.backends import load_backend
from tiny_model import build_tiny_model


@pytest.fixture(scope="module", name="tiny")
def tiny_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model's folder, built once per test module."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3")


@pytest.fixture(scope="module", name="engine")
def engine_fixture(tiny: Path):
    """The in-process ``vllm`` backend on the tiny model, seed 0, started once per test module."""
    return load_backend("vllm", str(tiny), tokenizer_name="tiny-qwen3", engine={"max_model_len": 1024}, seed=0)
