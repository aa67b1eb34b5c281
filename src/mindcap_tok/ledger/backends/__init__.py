"""Generation backends: vLLM (GPU runs, extra ``gen``), transformers (small CPU runs and tests) and any
OpenAI-compatible server (``vllm serve``, hosted APIs; extra ``server``).

Both take the same :class:`GenRequest` (prompt token ids, ``n`` samples, cap, seed, sampling parameters) and
return, per request, ``n`` :class:`Completion` (output token ids and finish reason). Prompts are built with the
model's own chat template (Qwen3: ``enable_thinking=False``, so the reasoning is in the visible, budgeted
channel) by :class:`ChatTokenizer`, which both backends share, so the prompt ids of a job do not depend on the
backend.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import MindcapError, first_line
from ...tokenizer import ResolvedTokenizer
from ...byte_tables import byte_table

BACKENDS = ("vllm", "transformers", "server")


@dataclass(frozen=True)
class GenRequest:
    """One prompt to decode ``n`` times under ``max_tokens``; ``stop_ids`` end a decode besides the model's EOS.

    ``text`` (the templated prompt), ``user`` (the user message, for a server's chat endpoint) and ``name`` (for
    error messages) are optional: a forcing continuation has ids only."""

    prompt_ids: tuple[int, ...]
    n: int
    max_tokens: int
    seed: int
    temperature: float
    top_p: float = 1.0
    top_k: int = 0
    stop_ids: tuple[int, ...] = ()
    text: str | None = None
    user: str | None = None
    name: str = ""


@dataclass(frozen=True)
class Completion:
    """One decode: the generated ids (a final stop/EOS token included) and ``stop`` or ``length``.

    ``prompt_ids``: the prompt ids as the engine saw them when they differ from the request's (a server's chat
    template), else ``None``. ``retokenized``: the ids were re-encoded from text (a server that returns none)."""

    ids: tuple[int, ...]
    finish_reason: str
    prompt_ids: tuple[int, ...] | None = None
    retokenized: bool = False


class ChatTokenizer:
    """The model's Hugging Face tokenizer: chat-templated prompt ids, decoding, and the ledger's tokenizer."""

    def __init__(self, model: str, name: str) -> None:
        from transformers import AutoTokenizer

        try:
            self.hf = AutoTokenizer.from_pretrained(model)
        except Exception as exc:
            raise MindcapError(f"cannot load the tokenizer of {model!r}: {first_line(exc)}") from exc
        backend = getattr(self.hf, "backend_tokenizer", None)
        if backend is None:
            raise MindcapError(f"{model!r} has no fast tokenizer")
        file = Path(model) / "tokenizer.json"
        self.resolved = ResolvedTokenizer(name, backend, model, file if file.is_file() else None)

    def chat(self, user: str) -> tuple[str, list[int]]:
        """The templated prompt (text and ids) for one user message, generation prompt added, thinking off."""
        text = self.hf.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
        return text, list(self.hf(text, add_special_tokens=False)["input_ids"])

    def encode(self, text: str) -> list[int]:
        """Ids of plain text (no special tokens)."""
        return list(self.hf(text, add_special_tokens=False)["input_ids"])

    def decode_batch(self, ids: list) -> list[str]:
        """Texts of several id sequences, special tokens skipped (the fast tokenizer, in one call)."""
        return self.resolved.tokenizer.decode_batch([list(x) for x in ids], skip_special_tokens=True)

    def newline_ids(self) -> tuple[int, ...]:
        """Ids whose text contains a newline: the ends of an answer line."""
        return tuple(np.flatnonzero(byte_table(self.resolved).has_newline).tolist())


def require(module: str, extra: str, backend: str) -> None:
    """Raise :class:`MindcapError` naming the extra to install when ``module`` is not importable."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MindcapError(f"the {backend} backend needs {module}: pip install 'mindcap-tok[{extra}]'")


def load_backend(name: str, model: str, tokenizer_name: str, engine: dict | None = None, seed: int = 0, server=None):
    """Start the backend ``name`` (``vllm``, ``transformers`` or ``server``) on ``model`` with ``engine`` options;
    ``server`` (a :class:`~mindcap_tok.ledger.jobs.ServerSpec`) says how the ``server`` backend connects."""
    if name not in BACKENDS:
        raise MindcapError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    if not (Path(model).is_dir() or (model.count("/") == 1 and not model.startswith((".", os.sep)))):
        raise MindcapError(f"model {model!r} is neither a local folder nor a Hugging Face id")
    if name == "server":
        from .server import ServerBackend

        return ServerBackend(model, tokenizer_name, server)
    if name == "vllm":
        require("vllm", "gen", "vllm")
        from .vllm import VllmBackend

        return VllmBackend(model, tokenizer_name, engine or {}, seed)
    require("torch", "torch", "transformers")
    from .hf import TransformersBackend

    return TransformersBackend(model, tokenizer_name, engine or {})
