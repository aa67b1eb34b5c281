"""`adapt` for a SentencePiece fold: a tiny random Llama with Llama 2's own ``tokenizer.model`` (and the
``tokenizer.json`` transformers converts from it, as a real Llama 2 checkpoint ships both), a Thai extension learned
with missing characters added. Base rows kept bit for bit, new rows the mean of the base rows of the pieces
``sentencepiece`` itself segments the new piece's text into, English logits equal, the checkpoint's tokenizer
segments as the fold's ``.model`` and adds BOS as the base does, and a fold without a transformers tokenizer is
refused."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="adapt needs the torch extra")

import sentencepiece  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from adapt_fixture import sentencepiece_extension, tiny_llama  # noqa: E402
from mindcap_tok.adaptation import adapt_model, load_extension  # noqa: E402
from mindcap_tok.data.flores import load_flores  # noqa: E402
from mindcap_tok.errors import BadInputError  # noqa: E402

BASE_VOCAB = 32000
WS = "\u2581"


@pytest.fixture(scope="module")
def made(config, flores_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("adapt-sp")
    model = tiny_llama(root / "tiny-llama", config.tokenizers_dir.value / "llama2" / "tokenizer.model")
    assert (model / "tokenizer.json").is_file() and (model / "tokenizer.model").is_file()
    fold = sentencepiece_extension(model, root / "ext", flores_dir)
    adapt_model(fold, model, out_dir=root / "mean", init="mean")
    return {"root": root, "model": model, "fold": fold, "mean": root / "mean"}


def _base_sp(config):
    path = config.tokenizers_dir.value / "llama2" / "tokenizer.model"
    return sentencepiece.SentencePieceProcessor(model_file=str(path))


def _weights(folder):
    model = AutoModelForCausalLM.from_pretrained(folder)
    return model, model.get_input_embeddings().weight.detach(), model.get_output_embeddings().weight.detach()


def test_new_rows_are_the_mean_of_the_base_pieces_sentencepiece_segments_them_into(made, config):
    sp = _base_sp(config)
    extended = sentencepiece.SentencePieceProcessor(model_file=str(made["fold"] / "tokenizer.model"))
    _, emb, head = _weights(made["model"])
    _, new_emb, new_head = _weights(made["mean"])
    assert new_emb.shape[0] == extended.get_piece_size() > BASE_VOCAB
    assert torch.equal(new_emb[:BASE_VOCAB], emb) and torch.equal(new_head[:BASE_VOCAB], head)
    checked = 0
    missing = load_extension(made["fold"]).manifest["sentencepiece"]["missing_characters"]
    for i in range(BASE_VOCAB, extended.get_piece_size()):
        piece = extended.id_to_piece(i)
        if piece in missing:
            continue
        # sentencepiece on the piece's text: its dummy prefix gives a word-initial piece its ▁; for another piece
        # the prefix stays a piece of its own when it merges with nothing, and the rest is the piece's segmentation
        ids = sp.encode(piece.removeprefix(WS))
        if not piece.startswith(WS):
            if sp.id_to_piece(ids[0]) != WS:
                continue
            ids = ids[1:]
        for matrix, new in ((emb, new_emb), (head, new_head)):
            want = matrix.numpy().astype(np.float64)[ids].mean(axis=0)
            np.testing.assert_allclose(new[i].numpy(), want, rtol=0, atol=1e-7)
        checked += 1
    assert checked >= 20
    # a character the base lacks, added as a piece: the mean of its UTF-8 bytes' <0xNN> pieces (byte fallback)
    assert len(missing) >= 3
    for ch in missing:
        i = extended.piece_to_id(ch)
        assert i >= BASE_VOCAB
        ids = [sp.piece_to_id(f"<0x{b:02X}>") for b in ch.encode("utf-8")]
        want = emb.numpy().astype(np.float64)[ids].mean(axis=0)
        np.testing.assert_allclose(new_emb[i].numpy(), want, rtol=0, atol=1e-7)


def test_the_checkpoint_segments_as_the_folds_model_and_adds_bos_as_the_base(made, flores_dir):
    extended = sentencepiece.SentencePieceProcessor(model_file=str(made["fold"] / "tokenizer.model"))
    base_tok, tok = AutoTokenizer.from_pretrained(made["model"]), AutoTokenizer.from_pretrained(made["mean"])
    assert len(tok) == extended.get_piece_size()
    held = load_flores("th", "dev", source=flores_dir)
    fold = load_extension(made["fold"])
    lines = [held[i] for i in fold.manifest["held_out_items"][:30]] + load_flores("en", "dev", source=flores_dir)[:10]
    for line in lines:
        assert tok(line, add_special_tokens=False)["input_ids"] == extended.encode(line)
        assert tok(line)["input_ids"][:1] == base_tok(line)["input_ids"][:1] == [1]
    assert any(max(extended.encode(line)) >= BASE_VOCAB for line in lines)
    model = AutoModelForCausalLM.from_pretrained(made["mean"])
    ids = tok(lines[0], return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape == (1, ids.shape[1] + 5) and int(out.max()) < len(tok)


def test_english_that_segments_as_before_gives_the_base_logits(made, flores_dir, config):
    sp = _base_sp(config)
    extended = sentencepiece.SentencePieceProcessor(model_file=str(made["fold"] / "tokenizer.model"))
    lines = [x for x in load_flores("en", "devtest", source=flores_dir)[:20] if sp.encode(x) == extended.encode(x)]
    assert len(lines) == 20
    base, _, _ = _weights(made["model"])
    adapted, _, _ = _weights(made["mean"])
    for line in lines[:6]:
        ids = torch.tensor([[1, *sp.encode(line)]])
        with torch.no_grad():
            want, got = base(input_ids=ids).logits, adapted(input_ids=ids).logits
        assert torch.equal(got[..., :BASE_VOCAB], want)  # same ids, same weights, same CPU kernels


def test_a_fold_without_a_transformers_tokenizer_is_refused_and_nothing_written(made, tmp_path):
    fold = tmp_path / "fold-no-hf"
    shutil.copytree(made["fold"], fold)
    shutil.rmtree(fold / "transformers")
    with pytest.raises(BadInputError, match=r"has no transformers/tokenizer\.json for transformers: .*--add-missing"):
        adapt_model(fold, made["model"], out_dir=tmp_path / "out")
    bare = tmp_path / "no-model-file"
    shutil.copytree(made["model"], bare)
    (bare / "tokenizer.model").unlink()
    with pytest.raises(BadInputError, match=r"has no tokenizer\.model, the kind of tokenizer"):
        adapt_model(made["fold"], bare, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    # the folder's tokenizer.json (what transformers converted) cannot be extended: extend names the .model
    from mindcap_tok.adaptation.extend import base_bpe
    from mindcap_tok.tokenization.load import load_tokenizer

    beside = re.escape(str(made["model"] / "tokenizer.model"))
    with pytest.raises(BadInputError, match=rf"beside it: --model {beside}$"):
        base_bpe(load_tokenizer(str(made["model"])))


def test_bits_per_byte_count_the_tokens_of_each_models_own_sentencepiece_model(made, flores_dir, config):
    from mindcap_tok.adaptation import BpbSettings, measure_bpb
    from mindcap_tok.resample import Resampling

    settings = BpbSettings(limit=4, flores_source=flores_dir, resampling=Resampling(100, 0))
    result = measure_bpb(made["fold"], [made["model"], made["mean"]], settings=settings)
    fold = load_extension(made["fold"])
    held = fold.manifest["held_out_items"][:4]
    thai = [load_flores("th", "dev", source=flores_dir)[i] for i in held]
    base = _base_sp(config)
    extended = sentencepiece.SentencePieceProcessor(model_file=str(made["fold"] / "tokenizer.model"))
    rows = {(r["init"], r["lang"]): r for r in result["rows"]}
    assert rows[("base", "tha_Thai")]["tokens"] == sum(len(base.encode(t)) for t in thai)
    assert rows[("mean", "tha_Thai")]["tokens"] == sum(len(extended.encode(t)) for t in thai)
    assert rows[("mean", "tha_Thai")]["tokens"] < rows[("base", "tha_Thai")]["tokens"]
