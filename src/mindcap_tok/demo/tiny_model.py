"""A tiny local model to try `generate --backend transformers` and `roundtrip` on a laptop: random weights (a
2-layer Qwen3 of hidden size 64), the real Qwen3 tokenizer and a ChatML chat template with Qwen3's thinking switch.

Its outputs are noise (random weights): it shows the pipeline working, not a model's behaviour. Needs the
``torch`` extra (``pip install -e '.[torch]'``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .._io import check_output_folder, output_folder
from ..errors import MissingExtraError
from ..tokenization.load import load_tokenizer

PRODUCER = "mindcap-tok demo --tiny-model"
#: Qwen3's chat format (ChatML); ``enable_thinking=False`` adds an empty think block, as Qwen3's own template does
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def build_tiny_model(
    out_dir: str | os.PathLike[str], seed: int = 0, *, tokenizers_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Save a random-weights Qwen3 (head_dim 32, so vLLM's CPU backend runs it too) with the real Qwen3
    tokenizer to ``out_dir``, atomically; seeded (same seed, same weights)."""
    tok = load_tokenizer("qwen3-8b", tokenizers_dir)
    hf = tok.require_hf("the tiny model")
    target = Path(out_dir)
    with output_folder(target, PRODUCER) as tmp:
        save_tiny_qwen3(tmp, hf, seed=seed, max_positions=8192)
    return target


def check_tiny_model(out_dir: str | os.PathLike[str]) -> Path:
    """Refuse, before anything is written, what :func:`build_tiny_model` would refuse only after: an output
    folder holding anything but an earlier tiny model, or no torch/transformers to build it with."""
    target = check_output_folder(out_dir, PRODUCER)
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(missing[0], "torch", needed_by="the tiny model")
    return target


def save_tiny_qwen3(folder: str | os.PathLike[str], tokenizer, *, seed: int = 0, max_positions: int = 8192) -> None:
    """Save ``tokenizer`` (a ``tokenizers.Tokenizer`` with ChatML specials) with :data:`CHAT_TEMPLATE` and a random
    2-layer Qwen3 of its vocabulary size to ``folder`` (the tests' tiny model uses it with a small trained BPE)."""
    try:
        import torch
        from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    except ImportError as exc:
        raise MissingExtraError(exc.name or "torch", "torch", needed_by="the tiny model") from exc
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_input_names=["input_ids", "attention_mask"],
    )
    fast.chat_template = CHAT_TEMPLATE
    im_end, pad = tokenizer.token_to_id("<|im_end|>"), tokenizer.token_to_id("<|endoftext|>")
    config = Qwen3Config(
        vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        tie_word_embeddings=True,
        max_position_embeddings=max_positions,
        eos_token_id=im_end,
        pad_token_id=pad,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=im_end, pad_token_id=pad)
    Path(folder).mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    model.save_pretrained(folder)
