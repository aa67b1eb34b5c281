"""A tiny random Qwen3 model with a small byte-level BPE tokenizer (ChatML specials), built at test time.

Configuration from the workspace notes: it runs in transformers and in vLLM's CPU backend (head_dim 32).
The chat template mirrors Qwen3's switch: ``enable_thinking=False`` adds an empty think block.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 512
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
CORPUS = [
    "Question: Janet has 16 eggs. She eats 3 and bakes with 4. How many are left?",
    "Step 1: 16 - 3 - 4 = 9\nThe answer is 9\n#### 9",
    "Frage: Wie viele Eier hat sie übrig? Antwort: 18\n#### 18",
    "โจทย์: เจเน็ตมีไข่ 16 ฟอง คำตอบคือ 18\n#### 18",
    "Swali: Janet ana mayai 16. Jibu ni 18\n#### 18",
    "Solve the problem step by step. End with a line #### <integer>.",
    "<think>\n\n</think>\n\n",
] * 20 + [f"{a} + {b} = {a + b}. Schritt {a}: ขั้นที่ {b} hatua {a * b}" for a in range(40) for b in range(0, 40, 3)]


def build_tiny_model(folder: Path, seed: int = 0) -> Path:
    """Train the tokenizer, build a random Qwen3 of the same vocabulary size, save both to ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_input_names=["input_ids", "attention_mask"],
    )
    fast.chat_template = CHAT_TEMPLATE
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    im_end = tok.token_to_id("<|im_end|>")
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        tie_word_embeddings=True,
        max_position_embeddings=1024,
        eos_token_id=im_end,
        pad_token_id=tok.token_to_id("<|endoftext|>"),
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=im_end, pad_token_id=config.pad_token_id)
    model.save_pretrained(folder)
    return folder
