"""`adapt` and `bpb` on the tiny random Qwen3 with a Thai extension of its own tokenizer: base rows kept bit for bit,
new rows the mean of their base encoding's rows (recomputed here from the base tokenizer's BPE model and numpy),
English logits equal to the base model's, the checkpoint loads and generates, refusals write nothing, and bits per
byte equal a plain per-sentence log_softmax computation."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="adapt needs the torch extra")

from click.testing import CliRunner  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from adapt_fixture import tiny_extension  # noqa: E402
from mindcap_tok.adaptation import BpbSettings, adapt_model, load_extension, measure_bpb  # noqa: E402
from mindcap_tok.adaptation.adapt import base_pieces_of  # noqa: E402
from mindcap_tok.cli.main import cli  # noqa: E402
from mindcap_tok.data.flores import load_flores  # noqa: E402
from mindcap_tok.errors import BadInputError  # noqa: E402
from mindcap_tok.report.figures import plot_bpb  # noqa: E402
from mindcap_tok.resample import Resampling  # noqa: E402

BASE_VOCAB = 512


@pytest.fixture(scope="module")
def made(tiny, tmp_path_factory, flores_dir):
    root = tmp_path_factory.mktemp("adapt")
    fold = tiny_extension(tiny, root / "ext", flores_dir)
    out = {"fold": fold, "root": root}
    for init in ("mean", "random"):
        out[init] = root / init
        adapt_model(fold, tiny, out_dir=out[init], init=init, seed=0)
    return out


def _weights(folder):
    model = AutoModelForCausalLM.from_pretrained(folder)
    return model, model.get_input_embeddings().weight.detach(), model.get_output_embeddings().weight.detach()


def test_base_rows_are_kept_bit_for_bit_and_the_config_is_resized(tiny, made):
    base, emb, head = _weights(tiny)
    n_new = load_extension(made["fold"]).tokenizer.vocab_size - BASE_VOCAB
    assert n_new > 0
    for init in ("mean", "random"):
        model, new_emb, new_head = _weights(made[init])
        assert new_emb.shape == (BASE_VOCAB + n_new, emb.shape[1]) and new_head.shape == new_emb.shape
        assert torch.equal(new_emb[:BASE_VOCAB], emb) and torch.equal(new_head[:BASE_VOCAB], head)
        assert model.config.vocab_size == BASE_VOCAB + n_new
        assert (model.config.eos_token_id, model.config.pad_token_id) == (base.config.eos_token_id, 0)
        record = json.loads((made[init] / "adaptation.json").read_text("utf-8"))
        assert (record["init"], record["new_tokens"], record["tied"]) == (init, n_new, True)
    # random: the model's own initialiser (normal, std = initializer_range), not copies of base rows
    _, rand, _ = _weights(made["random"])
    assert abs(float(rand[BASE_VOCAB:].std()) - base.config.initializer_range) < 0.004


def test_new_rows_are_the_mean_of_their_base_encoding(tiny, made):
    base_bpe = Tokenizer.from_file(str(tiny / "tokenizer.json")).model
    extended = Tokenizer.from_file(str(made["fold"] / "tokenizer.json"))
    _, emb, _ = _weights(tiny)
    _, new_emb, _ = _weights(made["mean"])
    base_rows = emb.numpy().astype(np.float64)
    lengths = set()
    for i in range(BASE_VOCAB, extended.get_vocab_size()):
        ids = [t.id for t in base_bpe.tokenize(extended.id_to_token(i))]  # the base merges on the token's symbols
        assert ids and max(ids) < BASE_VOCAB
        lengths.add(len(ids))
        want = base_rows[ids].mean(axis=0)
        # the float64 mean rounded once to float32: equal within half a float32 step of values around 0.02
        np.testing.assert_allclose(new_emb[i].numpy(), want, rtol=0, atol=1e-8)
    assert len(lengths) > 1  # new tokens of several base lengths were checked


def test_an_untied_output_layer_gets_its_own_rows_by_the_same_rule(tiny, made, tmp_path, flores_dir):
    from transformers import AutoConfig

    untied = tmp_path / "untied"
    shutil.copytree(tiny, untied)
    config = AutoConfig.from_pretrained(tiny)
    config.tie_word_embeddings = False
    model = AutoModelForCausalLM.from_pretrained(tiny, config=config)
    with torch.no_grad():
        head = torch.randn(model.lm_head.weight.shape, generator=torch.Generator().manual_seed(1)) * 0.05
        model.lm_head.weight.copy_(head)
    model.save_pretrained(untied)
    out = tmp_path / "untied-mean"
    record = adapt_model(made["fold"], untied, out_dir=out, init="mean")
    assert record["tied"] is False
    _, emb, base_head = _weights(untied)
    adapted, new_emb, new_head = _weights(out)
    assert adapted.config.tie_word_embeddings is False and new_head.data_ptr() != new_emb.data_ptr()
    assert torch.equal(base_head, head) and torch.equal(new_head[:BASE_VOCAB], head)
    assert torch.equal(new_emb[:BASE_VOCAB], emb)
    base_bpe = Tokenizer.from_file(str(tiny / "tokenizer.json")).model
    extended = Tokenizer.from_file(str(made["fold"] / "tokenizer.json"))
    for i in range(BASE_VOCAB, extended.get_vocab_size()):
        ids = [t.id for t in base_bpe.tokenize(extended.id_to_token(i))]
        want = head.numpy().astype(np.float64)[ids].mean(axis=0)
        np.testing.assert_allclose(new_head[i].numpy(), want, rtol=0, atol=1e-8)
        np.testing.assert_allclose(new_emb[i].numpy(), emb.numpy().astype(np.float64)[ids].mean(axis=0), atol=1e-8)
    # focus: the output layer's rows by the same sparsemax weights (recomputed here from the fastText vectors)
    from mindcap_tok.adaptation.focus import auxiliary_vectors

    out = tmp_path / "untied-focus"
    adapt_model(made["fold"], untied, out_dir=out, init="focus", flores_source=flores_dir)
    fold = load_extension(made["fold"])
    dev = load_flores("tha_Thai", "dev", source=flores_dir)
    vectors = auxiliary_vectors(fold.tokenizer.encode_batch([dev[i] for i in fold.manifest["training_items"]]))
    _, new_emb, new_head = _weights(out)
    assert torch.equal(new_head[:BASE_VOCAB], head) and torch.equal(new_emb[:BASE_VOCAB], emb)
    for i in range(BASE_VOCAB, extended.get_vocab_size()):
        overlap, weights = _focus_weights_by_hand(vectors, i)
        np.testing.assert_allclose(new_head[i].numpy(), weights @ head.numpy().astype(np.float64)[overlap], atol=1e-7)
        np.testing.assert_allclose(new_emb[i].numpy(), weights @ emb.numpy().astype(np.float64)[overlap], atol=1e-7)


def test_hewitt_rows_are_drawn_tightly_around_the_mean_of_all_base_rows(tiny, made):
    out = made["root"] / "hewitt"
    adapt_model(made["fold"], tiny, out_dir=out, init="hewitt", seed=0)
    _, emb, _ = _weights(tiny)
    _, new_emb, _ = _weights(out)
    assert torch.equal(new_emb[:BASE_VOCAB], emb)
    center = emb.numpy().astype(np.float64).mean(axis=0)
    new = new_emb[BASE_VOCAB:].numpy()
    # covariance scaled by 1e-9: draws within ~1e-6 of the mean (row values ~0.02), yet distinct draws
    np.testing.assert_allclose(new, np.broadcast_to(center, new.shape), rtol=0, atol=1e-5)
    assert len({row.tobytes() for row in new}) == len(new)
    shutil.rmtree(out)


def test_same_seed_same_bytes_other_seed_other_rows(tiny, made):
    again = made["root"] / "random-again"
    other = made["root"] / "random-seed-1"
    adapt_model(made["fold"], tiny, out_dir=again, init="random", seed=0)
    adapt_model(made["fold"], tiny, out_dir=other, init="random", seed=1)

    def digest(folder):
        return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()

    assert digest(again) == digest(made["random"]) != digest(other)
    shutil.rmtree(again)
    shutil.rmtree(other)


def test_english_that_encodes_as_before_gives_the_base_logits(tiny, made, flores_dir):
    base_tok = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    new_tok = Tokenizer.from_file(str(made["fold"] / "tokenizer.json"))
    lines = load_flores("en", "devtest", source=flores_dir)[:40]
    same = [line for line in lines if base_tok.encode(line).ids == new_tok.encode(line).ids]
    assert len(same) == len(lines)  # a Thai extension leaves English segmentation alone
    base, _, _ = _weights(tiny)
    for init in ("mean", "random"):
        model, _, _ = _weights(made[init])
        for line in same[:8]:
            ids = torch.tensor([base_tok.encode(line).ids])
            with torch.no_grad():
                want = base(input_ids=ids).logits
                got = model(input_ids=ids).logits
            assert got.shape[-1] > BASE_VOCAB
            # same ids through the same weights on CPU: the base ids' logits are bit-identical
            assert torch.equal(got[..., :BASE_VOCAB], want)


def test_the_checkpoint_loads_with_its_extended_tokenizer_and_generates(made):
    folder = made["mean"]
    tok = AutoTokenizer.from_pretrained(folder)
    fold_tok = Tokenizer.from_file(str(made["fold"] / "tokenizer.json"))
    thai = "ประเทศไทยมีประชากรจำนวนมาก"
    assert len(tok) == fold_tok.get_vocab_size() > BASE_VOCAB
    ids = tok(thai, add_special_tokens=False)["input_ids"]
    assert ids == fold_tok.encode(thai).ids and max(ids) >= BASE_VOCAB
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == fold_tok.token_to_id("<|im_end|>")
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model.config.eos_token_id == tok.eos_token_id
    out = model.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False, min_new_tokens=6)
    assert out.shape == (1, len(ids) + 6) and int(out.max()) < len(tok)


def _invoke(args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_refusals_are_one_line_and_write_nothing(tiny, made, tmp_path):
    no_weights = tmp_path / "no-weights"
    shutil.copytree(tiny, no_weights)
    (no_weights / "model.safetensors").unlink()
    other_base = tmp_path / "other-base"
    shutil.copytree(tiny, other_base)
    compact = Tokenizer.from_file(str(tiny / "tokenizer.json")).to_str()  # the same vocabulary, another file
    assert compact != (tiny / "tokenizer.json").read_text("utf-8")
    (other_base / "tokenizer.json").write_text(compact, "utf-8")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine", "utf-8")
    cases = [
        ([tiny, "--init", "omp"], tmp_path / "a", "unknown init 'omp'"),
        ([no_weights], tmp_path / "b", "has no weights"),
        ([other_base], tmp_path / "c", "is not the base of the extension"),
        ([tiny], busy, "already exists"),
    ]
    for extra, out, words in cases:
        res = _invoke(["adapt", "--extension", made["fold"], "--model", *extra, "--out-dir", out])
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], res.stderr
        assert res.stdout == ""
    folds = Path(made["fold"]).parent  # extend's --out-dir, not one of its folds
    res = _invoke(["adapt", "--extension", folds, "--model", tiny, "--out-dir", tmp_path / "e"])
    assert res.exit_code == 2 and res.stdout == ""
    assert f"it holds the folds {folds / 'fold-0'}, {folds / 'fold-1'}; give one" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "no-weights", "other-base"]
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]


def test_families_adapt_lacks_are_refused_in_one_line(config):
    from mindcap_tok.tokenization.load import load_tokenizer

    with pytest.raises(BadInputError, match=r"byte-level BPE tokenizer\.json and SentencePiece models; gpt-4o is a "):
        base_pieces_of(load_tokenizer("gpt-4o", config.tokenizers_dir.value))


def _bits_by_hand(folder, texts):
    """-sum log2 p(token | start, earlier tokens) per text, one unpadded forward each, plain log_softmax."""
    model = AutoModelForCausalLM.from_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    start = model.config.bos_token_id if model.config.bos_token_id is not None else model.config.eos_token_id
    out, tokens = [], 0
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        tokens += len(ids)
        seq = torch.tensor([[start, *ids]])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=seq).logits[0, :-1].double(), dim=-1)
        out.append(-sum(float(logp[k, t]) for k, t in enumerate(ids)) / math.log(2))
    return out, tokens


def test_bits_per_byte_equal_a_plain_computation_on_the_held_out_lines(tiny, made, flores_dir, tmp_path):
    fold = load_extension(made["fold"])
    dev = {code: load_flores(code, "dev", source=flores_dir) for code in ("tha_Thai", "eng_Latn")}
    held = [dev_id for dev_id in fold.manifest["held_out_items"]][:3]
    assert not set(held) & set(fold.manifest["training_items"])
    settings = BpbSettings(limit=3, flores_source=flores_dir, resampling=Resampling(200, 0))
    result = measure_bpb(made["fold"], [tiny, made["mean"]], settings=settings)
    rows = {(r["init"], r["lang"]): r for r in result["rows"]}
    assert len(rows) == 4
    for lang, lines in dev.items():
        texts = [lines[i] for i in held]
        n_bytes = sum(len(t.encode("utf-8")) for t in texts)
        for init, folder in (("base", tiny), ("mean", made["mean"])):
            bits, tokens = _bits_by_hand(folder, texts)
            row = rows[(init, lang)]
            assert row["sentences"] == 3 and row["bytes"] == n_bytes and row["tokens"] == tokens
            assert row["bpb"] == pytest.approx(sum(bits) / n_bytes, rel=1e-6)  # batched float32 vs one by one
            assert row["tokens_per_byte"] == tokens / n_bytes
            assert row["bpb_ci"][0] <= row["bpb"] <= row["bpb_ci"][1]
    plot_bpb(result, tmp_path / "bpb.png")
    assert (tmp_path / "bpb.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    thai_base, thai_mean = rows[("base", "tha_Thai")], rows[("mean", "tha_Thai")]
    assert thai_mean["tokens_per_byte"] < thai_base["tokens_per_byte"]
    assert thai_mean["bpb_change"] == pytest.approx(thai_mean["bpb"] - thai_base["bpb"])
    again = measure_bpb(made["fold"], [tiny, made["mean"]], settings=settings)  # same seed, same bytes
    assert json.dumps(again, sort_keys=True) == json.dumps(result, sort_keys=True)


def test_bpb_refuses_a_model_adapted_to_another_fold(tiny, made):
    other = made["root"] / "mean-fold-1"
    adapt_model(made["fold"].parent / "fold-1", tiny, out_dir=other, init="mean")
    res = _invoke(["bpb", "--extension", made["fold"], "--model", tiny, "--model", other, "--n-boot", "40"])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "was adapted to another extension" in lines[0], res.stderr


def _sparsemax_by_bisection(z):
    """The simplex projection max(z - tau, 0) with sum 1, tau found by bisection (not by sorting, as the package)."""
    lo, hi = float(z.max()) - 1.0, float(z.max())
    for _ in range(200):
        tau = (lo + hi) / 2
        lo, hi = (tau, hi) if np.maximum(z - tau, 0).sum() > 1 else (lo, tau)
    return np.maximum(z - (lo + hi) / 2, 0)


def _focus_weights_by_hand(vectors, new_id):
    """The overlapping base ids (those with a vector) and the sparsemax of their cosines to ``new_id``'s vector."""
    overlap = sorted(i for i in vectors if i < BASE_VOCAB)
    aux = np.stack([vectors[i] for i in overlap]).astype(np.float64)
    aux /= np.linalg.norm(aux, axis=1, keepdims=True)
    return overlap, _sparsemax_by_bisection(
        aux @ (vectors[new_id].astype(np.float64) / np.linalg.norm(vectors[new_id]))
    )


def test_sparsemax_by_hand():
    from mindcap_tok.adaptation.focus import sparsemax

    # z = [1, 0.5, -1]: support {1, 0.5}, tau = (1.5 - 1) / 2 = 0.25
    np.testing.assert_allclose(sparsemax(np.array([1.0, 0.5, -1.0])), [0.75, 0.25, 0.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(sparsemax(np.array([0.2, 0.2, 0.2, 0.2])), [0.25] * 4, rtol=0, atol=1e-15)
    np.testing.assert_allclose(sparsemax(np.array([3.0, 0.0, 1.5])), [1.0, 0.0, 0.0], rtol=0, atol=1e-15)
    z = np.random.default_rng(0).normal(size=50) * 0.3
    np.testing.assert_allclose(sparsemax(z), _sparsemax_by_bisection(z), rtol=0, atol=1e-12)


def test_focus_rows_are_sparsemax_weighted_sums_of_overlapping_base_rows(tiny, made, flores_dir, monkeypatch):
    from mindcap_tok.adaptation import adapt as adapt_module
    from mindcap_tok.adaptation.focus import auxiliary_vectors

    fold = load_extension(made["fold"])
    dev = load_flores("tha_Thai", "dev", source=flores_dir)
    training = [dev[i] for i in fold.manifest["training_items"]]  # the lines the extension learned on
    full = auxiliary_vectors(fold.tokenizer.encode_batch(training))
    again = auxiliary_vectors(fold.tokenizer.encode_batch(training))
    assert full.keys() == again.keys() and all(np.array_equal(full[i], again[i]) for i in full)
    # every new token of the tiny extension occurs in its training text; drop three vectors to see the fallback
    dropped = set(range(fold.tokenizer.vocab_size - 3, fold.tokenizer.vocab_size))
    vectors = {i: v for i, v in full.items() if i not in dropped}
    monkeypatch.setattr(
        adapt_module,
        "auxiliary_vectors",
        lambda enc: {i: v for i, v in auxiliary_vectors(enc).items() if i not in dropped},
    )
    out = made["root"] / "focus"
    record = adapt_model(made["fold"], tiny, out_dir=out, init="focus", flores_source=flores_dir)
    _, emb, _ = _weights(tiny)
    _, new_emb, _ = _weights(out)
    assert torch.equal(new_emb[:BASE_VOCAB], emb)
    base_rows = emb.numpy().astype(np.float64)
    overlap = sorted(i for i in vectors if i < BASE_VOCAB)
    base_bpe = Tokenizer.from_file(str(tiny / "tokenizer.json")).model
    extended = Tokenizer.from_file(str(made["fold"] / "tokenizer.json"))
    fallback, supports = 0, []
    for i in range(BASE_VOCAB, fold.tokenizer.vocab_size):
        if i in vectors:
            _, weights = _focus_weights_by_hand(vectors, i)
            supports.append(int((weights > 1e-12).sum()))
            want = weights @ base_rows[overlap]
        else:  # never occurs in the encoded training text: FVT's mean of its base encoding
            fallback += 1
            ids = [t.id for t in base_bpe.tokenize(extended.id_to_token(i))]
            want = base_rows[ids].mean(axis=0)
        np.testing.assert_allclose(new_emb[i].numpy(), want, rtol=0, atol=1e-7)
    focus = record["focus"]
    assert focus["fallback_mean_tokens"] == fallback == len(dropped)
    assert focus["overlapping_tokens"] == len(overlap) and focus["training_lines"] == len(training)
    assert focus["focus_tokens"] == len(supports) > 0 and max(supports) > 1  # sparse mixes, not one copied row
    twice = made["root"] / "focus-again"
    adapt_model(made["fold"], tiny, out_dir=twice, init="focus", seed=5, flores_source=flores_dir)
    assert (twice / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()
    shutil.rmtree(out)
    shutil.rmtree(twice)


def test_focus_refuses_a_fold_not_learned_on_flores_and_names_the_lid_extra(tiny, made, tmp_path, monkeypatch):
    import sys

    from mindcap_tok.errors import MissingExtraError

    other = tmp_path / "file-fold"
    shutil.copytree(made["fold"], other)
    manifest = json.loads((other / "manifest.json").read_text("utf-8"))
    manifest["corpus"]["name"] = "file:notes.txt"
    (other / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    with pytest.raises(BadInputError, match=r"learned on 'file:notes\.txt'.*learned on FLORES"):
        adapt_model(other, tiny, out_dir=tmp_path / "x", init="focus")
    monkeypatch.setitem(sys.modules, "fasttext", None)  # an uninstalled module
    with pytest.raises(MissingExtraError, match=r"mindcap-tok\[lid\]"):
        adapt_model(made["fold"], tiny, out_dir=tmp_path / "y", init="focus")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file-fold"]
