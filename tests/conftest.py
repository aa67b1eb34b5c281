"""Shared fixtures: the real tokenizers and data in ../shared, found through the repo's mindcap.toml; the tiny
random Qwen3 models built at test time (once per session: tests only read their folders), the transformers and
vLLM backends on them, and the fake OpenAI-compatible server of ``fake_server``.

``MINDCAP_TEST_REQUIRES`` (comma-separated module names, set by scripts/test-all.sh for each of its environments):
modules the environment is meant to have; the run stops before any test if one is missing, so that no test that
needs it is skipped quietly."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mindcap_tok.config import load_config
from mindcap_tok.tokenization.load import load_tokenizer

REPO = Path(__file__).resolve().parents[1]
REQUIRES = "MINDCAP_TEST_REQUIRES"


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run where a module that ``MINDCAP_TEST_REQUIRES`` names cannot be imported."""
    missing = []
    for name in filter(None, (n.strip() for n in os.environ.get(REQUIRES, "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    if missing:
        raise pytest.UsageError(f"{REQUIRES}: this environment lacks {', '.join(missing)}")


@pytest.fixture(scope="session")
def config():
    cfg = load_config(start=REPO)
    assert cfg.data_dir.value is not None and cfg.data_dir.value.is_dir(), "data_dir from mindcap.toml must exist"
    return cfg


@pytest.fixture(scope="session")
def qwen(config):
    return load_tokenizer("qwen3-8b", config.tokenizers_dir.value)


@pytest.fixture(scope="session")
def llama(config):
    return load_tokenizer("llama-3.1-8b", config.tokenizers_dir.value)


@pytest.fixture(scope="session")
def flores_dir(config) -> str:
    return str(config.data_dir.value / "flores200")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen3 (``tiny_model``) as ``tiny-qwen3``: thinking off in its chat template."""
    pytest.importorskip("torch", reason="the tiny model is built with torch (the torch extra)")
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3")


@pytest.fixture(scope="session")
def tiny_think(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen3 as ``tiny-think``, with ``<think>`` and ``</think>`` as single added tokens."""
    pytest.importorskip("torch", reason="the tiny model is built with torch (the torch extra)")
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-think", think_tokens=True)


@pytest.fixture(scope="module")
def backend(tiny: Path):
    """The ``transformers`` backend on :func:`tiny`, loaded once per test module."""
    from mindcap_tok.generation.backends import load_backend

    return load_backend("transformers", str(tiny), tokenizer_name="tiny-qwen3")


@pytest.fixture(scope="session")
def engine(tiny: Path):
    """The in-process ``vllm`` backend on :func:`tiny`, seed 0, started once per session (``vllm_tiny``)."""
    pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'mindcap-tok[gen]'; CPU recipe in README)")
    from vllm_tiny import start_engine

    return start_engine(tiny)


@pytest.fixture(scope="module")
def hf(tiny: Path):
    """The tiny model's transformers tokenizer (fills ``fake_server.ALPHABET``)."""
    from fake_server import load_hf

    return load_hf(tiny)


@pytest.fixture
def fakes(hf) -> Iterator[Callable[..., Any]]:
    """``fakes(**kw)`` starts a :class:`fake_server.Fake` on 127.0.0.1; all are closed after the test."""
    from fake_server import Fake

    made: list[Fake] = []

    def make(**kw: Any) -> Fake:
        made.append(Fake(hf, **kw))
        return made[-1]

    yield make
    for f in made:
        f.close()
