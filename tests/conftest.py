"""Shared fixtures: the real tokenizers and data in ../shared, found through the repo's mindcap.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindcap_tok.config import load_config
from mindcap_tok.tokenization.load import load_tokenizer

REPO = Path(__file__).resolve().parents[1]


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
