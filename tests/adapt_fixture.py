"""Cross-fitted Thai extensions for the adapt tests (learned on FLORES dev): of the tiny Qwen3's own tokenizer, and
of Llama 2's SentencePiece model on a tiny random Llama that carries it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mindcap_tok.adaptation import cross_fit, flores_corpus, save_crossfit
from mindcap_tok.tokenization.load import load_tokenizer

#: merges per fold: enough for new tokens of several lengths, quick to learn on the 512-token vocabulary
SIZE = 40


def tiny_extension(tiny: Path, out: Path, source: str) -> Path:
    """Learn 2 folds of :data:`SIZE` Thai merges on the tiny model's tokenizer, save them to ``out``; fold 0's
    folder."""
    base = load_tokenizer(str(tiny))
    folds = cross_fit(base, flores_corpus("th", "dev", source=source), size=SIZE)
    save_crossfit(folds, out, extra={"lang": "tha_Thai"})
    return out / "fold-0"


#: new pieces per fold of the SentencePiece extension (besides the Thai characters Llama 2 lacks, added first)
SP_SIZE = 30


def tiny_llama(folder: Path, tokenizer_model: Path, *, hidden: int = 16, heads: int = 2) -> Path:
    """A random one-layer Llama (untied output layer, seed 0) with Llama 2's ``tokenizer.model`` and the
    ``tokenizer.json`` transformers converts from it, as a real Llama 2 checkpoint ships both."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    shape = {"hidden_size": hidden, "intermediate_size": 2 * hidden, "num_hidden_layers": 1}
    config = LlamaConfig(vocab_size=32000, num_attention_heads=heads, num_key_value_heads=1, **shape)
    config.tie_word_embeddings = False
    LlamaForCausalLM(config).save_pretrained(folder)
    shutil.copyfile(tokenizer_model, folder / "tokenizer.model")
    settings = {"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), "utf-8")
    AutoTokenizer.from_pretrained(folder).save_pretrained(folder)  # writes tokenizer.json beside tokenizer.model
    return folder


def sentencepiece_extension(model: Path, out: Path, source: str) -> Path:
    """Learn 2 folds of :data:`SP_SIZE` Thai pieces on ``model``'s ``tokenizer.model``, missing characters added (so
    that each fold has a transformers tokenizer.json), save them to ``out``; fold 0's folder."""
    base = load_tokenizer(str(model / "tokenizer.model"))
    corpus = flores_corpus("th", "dev", source=source)
    folds = cross_fit(base, corpus, size=SP_SIZE, add_missing_characters=True)
    save_crossfit(folds, out, extra={"lang": "tha_Thai"})
    return out / "fold-0"
