"""A tiny COMET checkpoint built at test time (extra ``comet``, its own environment ``.venv-comet``): a random
2-layer XLM-R encoder with a sentencepiece vocabulary trained on a few sentences, wrapped in
``comet.models.RegressionMetric``. Its scores mean nothing; tests compare with what COMET itself predicts."""

from __future__ import annotations

from pathlib import Path

REFS = {
    0: "Janet has three ducks and sells the eggs.",
    1: "A robe takes two bolts of blue fiber.",
    2: "Josh buys a house for eighty thousand dollars.",
}
SOURCES = {("tha_Thai", 0): "เจเน็ตมีเป็ดสามตัว", ("tha_Thai", 1): "เสื้อคลุมใช้ผ้าสองม้วน", ("tha_Thai", 2): "จอชซื้อบ้าน"}


def build_checkpoint(root: Path) -> Path:
    """A random 2-layer XLM-R ``RegressionMetric`` under ``root``: ``hparams.yaml`` and ``checkpoints/model.ckpt``
    (returned), its sentencepiece vocabulary trained on :data:`REFS` and :data:`SOURCES`."""
    import sentencepiece as spm
    import torch
    import yaml
    from comet.models import RegressionMetric
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    enc = root / "xlmr"
    enc.mkdir()
    corpus = root / "corpus.txt"
    corpus.write_text(
        "\n".join([*REFS.values(), *SOURCES.values(), "the cat sat on the mat", "so we add them"] * 3), "utf-8"
    )
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(enc / "sentencepiece.bpe"),
        vocab_size=120,
        model_type="unigram",
        character_coverage=1.0,
        hard_vocab_limit=False,
    )
    tok = XLMRobertaTokenizer(vocab_file=str(enc / "sentencepiece.bpe.model"))
    tok.save_pretrained(str(enc))
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
    )
    XLMRobertaModel(config).save_pretrained(str(enc))
    model = RegressionMetric(pretrained_model=str(enc), local_files_only=True, hidden_sizes=[16], layer="mix")
    (root / "checkpoints").mkdir()
    hparams = dict(model.hparams)
    (root / "hparams.yaml").write_text(yaml.dump({**hparams, "class_identifier": "regression_metric"}), "utf-8")
    import pytorch_lightning as pl

    path = root / "checkpoints" / "model.ckpt"
    torch.save(
        {"state_dict": model.state_dict(), "pytorch-lightning_version": pl.__version__, "hyper_parameters": hparams},
        path,
    )
    return path
