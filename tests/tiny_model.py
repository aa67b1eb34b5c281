"""A tiny random Qwen3 model with a small byte-level BPE tokenizer (ChatML specials), built at test time.

Configuration from the workspace notes: it runs in transformers and in vLLM's CPU backend (head_dim 32).
The chat template mirrors Qwen3's switch: ``enable_thinking=False`` adds an empty think block.
"""

from __future__ import annotations

from pathlib import Path

from mindcap_tok.demo.tiny_model import CHAT_TEMPLATE as CHAT_TEMPLATE
from mindcap_tok.demo.tiny_model import save_tiny_qwen3

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 512
CORPUS = [
    "Question: Janet has 16 eggs. She eats 3 and bakes with 4. How many are left?",
    "Step 1: 16 - 3 - 4 = 9\nThe answer is 9\n#### 9",
    "Frage: Wie viele Eier hat sie übrig? Antwort: 18\n#### 18",
    "โจทย์: เจเน็ตมีไข่ 16 ฟอง คำตอบคือ 18\n#### 18",
    "Swali: Janet ana mayai 16. Jibu ni 18\n#### 18",
    "Solve the problem step by step. End with a line #### <integer>.",
    "<think>\n\n</think>\n\n",
] * 20 + [f"{a} + {b} = {a + b}. Schritt {a}: ขั้นที่ {b} hatua {a * b}" for a in range(40) for b in range(0, 40, 3)]


def build_tiny_model(folder: Path, seed: int = 0, *, think_tokens: bool = False) -> Path:
    """Train the tokenizer, save it with a random Qwen3 of the same vocabulary size to ``folder``.

    ``think_tokens``: also add Qwen3's ``<think>`` and ``</think>`` as single (non-special) added tokens, as in
    Qwen3's own tokenizer, for the reasoning-model tests."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

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
    if think_tokens:
        tok.add_tokens([AddedToken("<think>", special=False), AddedToken("</think>", special=False)])
        assert tok.get_vocab_size(with_added_tokens=True) == VOCAB + 2
    save_tiny_qwen3(folder, tok, seed=seed, max_positions=1024)
    return folder
