"""Extending SentencePiece BPE models (Gemma 3, Llama 2): NORMAL pieces appended, scored below every base piece.

Facts are checked independently of the learner: a hand-built tiny model gives pieces, scores and segmentations
worked out by hand; on the real models the saved ``.model`` is loaded by ``sentencepiece`` itself, its protobuf
is compared piece by piece with the base's, and FLORES devtest segmentations are compared with the base's.
"""

from __future__ import annotations

import json
import unicodedata
from itertools import accumulate

import numpy as np
import pytest
import sentencepiece
from click.testing import CliRunner
from sentencepiece import sentencepiece_model_pb2 as pb2
from tokenizers import Tokenizer

from mindcap_tok.adaptation import learn_extension, load_extension, save_extension
from mindcap_tok.adaptation.corpus import flores_corpus
from mindcap_tok.adaptation.extend_sp import new_scores
from mindcap_tok.adaptation.price import PriceSettings, SavedFolds, price_ledger
from mindcap_tok.adaptation.saved import transformers_export
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import Resampling
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tokenization.load import load_tokenizer

UNK, CONTROL, NORMAL = 2, 3, 1


def _tiny_model(tmp_path, model_type: int = 2):
    """<unk> <s> </s> ▁ a b c 1 ▁a, scores -1..-5 except ▁a at -0.5; whitespace, digits and scripts split."""
    proto = pb2.ModelProto()
    for piece, score, kind in [
        ("<unk>", 0.0, UNK),
        ("<s>", 0.0, CONTROL),
        ("</s>", 0.0, CONTROL),
        ("▁", -1.0, NORMAL),
        ("a", -2.0, NORMAL),
        ("b", -3.0, NORMAL),
        ("c", -4.0, NORMAL),
        ("1", -5.0, NORMAL),
        ("▁a", -0.5, NORMAL),
    ]:
        p = proto.pieces.add()
        p.piece, p.score, p.type = piece, score, kind
    t = proto.trainer_spec
    t.model_type = model_type
    t.split_by_whitespace = t.split_digits = t.split_by_unicode_script = t.split_by_number = True
    t.max_sentencepiece_length = 16
    n = proto.normalizer_spec
    n.name, n.add_dummy_prefix, n.escape_whitespaces, n.remove_extra_whitespaces = "identity", True, True, False
    path = tmp_path / "tiny.model"
    path.write_bytes(proto.SerializeToString())
    return load_tokenizer(str(path))


def test_tiny_model_pieces_scores_and_segmentation_by_hand(tmp_path):
    tiny = _tiny_model(tmp_path)
    # base: ▁ a b c ▁ a b c ▁ 1 c -> "▁a" merges -> [▁a b c ▁a b c ▁ 1 c]
    assert tiny.encode("abc abc 1c") == [8, 5, 6, 8, 5, 6, 3, 7, 6]
    # words ▁abc (x2) and ▁1c: pairs (▁a,b) and (b,c) both 2; tie -> smaller left string "b" first: bc, then ▁abc;
    # ▁1 and 1c are refused (split_digits), so min_freq 1 still gives only two merges
    ext = learn_extension(tiny, [(0, "abc abc 1c")], min_freq=1)
    assert ext.merges == (("b", "c"), ("▁a", "bc")) and ext.new_tokens == ("bc", "▁abc")
    assert ext.first_new_id == 9 and ext.tokens_before == 9 and ext.tokens_after == 5
    with pytest.raises(MindcapError, match="supports only 2 merges"):
        learn_extension(tiny, [(0, "abc abc 1c")], size=3, min_freq=1)
    folder = save_extension(ext, tmp_path / "ext")
    proto = pb2.ModelProto()
    proto.ParseFromString((folder / "tokenizer.model").read_bytes())
    # the base minimum is -5: new scores -6, -7, NORMAL, after every base id
    assert [(p.piece, p.score, p.type) for p in proto.pieces[9:]] == [("bc", -6.0, NORMAL), ("▁abc", -7.0, NORMAL)]
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    assert sp.encode("abc abc 1c") == [10, 10, 3, 7, 6]
    assert sp.encode("bca") == [3, 9, 4]  # base [▁ b c a]: the new piece bc forms, nothing else moves
    assert load_extension(folder).encode("bca") == [3, 9, 4]


def test_unknown_piece_is_never_merged_nor_added(tmp_path):
    tiny = _tiny_model(tmp_path)
    # no byte fallback: x is <unk> (id 0), not a missing character to add, and no new piece may contain it
    assert tiny.encode("xbc xbc") == [3, 0, 5, 6, 3, 0, 5, 6]
    ext = learn_extension(tiny, [(0, "xbc xbc")], min_freq=1, add_missing_characters=True)
    assert ext.merges == (("b", "c"),) and ext.new_tokens == ("bc",) and ext.pieces.missing_characters == ()
    folder = save_extension(ext, tmp_path / "ext")
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    assert sp.encode("xbc xbc") == [3, 0, 9, 3, 0, 9]


def test_unigram_model_is_refused_in_one_line(tmp_path):
    tiny = _tiny_model(tmp_path, model_type=1)
    with pytest.raises(MindcapError) as info:
        learn_extension(tiny, [(0, "abc abc")], size=1)
    message = str(info.value)
    assert "\n" not in message and "SentencePiece Unigram model" in message and "only SentencePiece BPE" in message


def test_new_scores_are_below_and_distinct_in_float32():
    # Llama 2's lowest score is -1e9, where float32 steps by 64: new scores step by 128
    assert new_scores(-1e9, 3) == [-1_000_000_128.0, -1_000_000_256.0, -1_000_000_384.0]
    assert new_scores(-255_504.0, 2) == [-255_505.0, -255_506.0]  # Gemma 3: integers stay exact
    many = np.float32(new_scores(-1e9, 5000))
    assert len(set(many.tolist())) == 5000 and (np.diff(many) < 0).all()


@pytest.fixture(
    scope="module",
    params=[pytest.param("llama-2", marks=pytest.mark.slow), pytest.param("gemma-3", marks=pytest.mark.slow)],
)
def saved(request, config, flores_dir, tmp_path_factory):
    base = load_tokenizer(request.param, config.tokenizers_dir.value)
    ext = learn_extension(base, flores_corpus("th", "dev", source=flores_dir), size=150)
    folder = save_extension(ext, tmp_path_factory.mktemp("sp") / request.param, lang="th")
    return base, ext, folder


@pytest.fixture(scope="module")
def devtest(config) -> dict[str, list[str]]:
    root = config.data_dir.value / "flores200" / "devtest"
    return {c: (root / f"{c}.devtest").read_text(encoding="utf-8").splitlines() for c in ("tha_Thai", "eng_Latn")}


def test_saved_model_keeps_every_base_piece(saved):
    base, ext, folder = saved
    want, got = pb2.ModelProto(), pb2.ModelProto()
    want.ParseFromString(base.path.read_bytes())
    got.ParseFromString((folder / "tokenizer.model").read_bytes())
    n = len(want.pieces)
    assert got.pieces[:n] == want.pieces[:n] and got.trainer_spec == want.trainer_spec
    new = got.pieces[n:]
    assert len(new) == ext.n_new_tokens == 150 and all(p.type == NORMAL for p in new)
    scores = np.float32([p.score for p in new])
    assert scores[0] < min(p.score for p in want.pieces) and (np.diff(scores) < 0).all()
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["first_new_id"] == n and manifest["base"]["family"] == "sentencepiece"
    assert manifest["sentencepiece"]["trainer_spec"]["max_sentencepiece_length"] == 16


def _boundaries(tok, ids) -> set[int]:
    return set(accumulate(len(tok.token_bytes[i]) for i in ids))


def test_devtest_invariants(saved, devtest):
    base, _, folder = saved
    ext = load_extension(folder).tokenizer
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    for code, lines in devtest.items():
        before, after = base.encode_batch(lines), ext.encode_batch(lines)
        assert after == sp.encode(lines)  # what we load is what sentencepiece loads
        assert ext.decode_batch(after) == lines
        for b, a in zip(before, after, strict=True):
            assert _boundaries(ext, a) <= _boundaries(base, b)  # every new token joins consecutive base tokens
        n_before, n_after = sum(map(len, before)), sum(map(len, after))
        if code == "eng_Latn":
            changed = sum(b != a for b, a in zip(before, after, strict=True))
            assert abs(n_after - n_before) / n_before < 0.0005, (n_before, n_after, changed)
        else:
            assert n_after < n_before


def test_transformers_tokenizer_json_only_where_it_segments_like_the_model(saved, devtest):
    base, _, folder = saved
    export = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["transformers"]
    if base.name == "llama-2":  # pieces built from the Thai characters Llama 2 lacks: unreachable in HF
        assert export["tokenizer_json"] is None and export["probe_differing"] > 0
        assert "--add-missing-characters" in export["remedy"] and not (folder / "transformers").exists()
        return
    want = {"tokenizer_json": "transformers/tokenizer.json", "probe_texts": 997, "probe_differing": 0}
    assert export == {**want, "probe_on": "training"}  # saved without held-out text: probed on its training text
    hf = Tokenizer.from_file(str(folder / "transformers" / "tokenizer.json"))
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    for lines in devtest.values():
        assert [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)] == sp.encode(lines)


def test_tokenizer_json_probe_on_held_out_text(saved, devtest):
    """Probed on FLORES devtest (text it was not learned on) against sentencepiece: Llama 2's tokenizer.json
    differs on Thai lines (HF turns its missing characters into bytes before merging), Gemma 3's does not."""
    base, ext, _ = saved
    thai = tuple(devtest["tha_Thai"])
    export = transformers_export(ext, thai)
    assert export.probe_on == "held-out" and export.probed == len(thai) == 1012
    if base.name == "llama-2":
        assert export.differing > 0 and export.text is None
    else:
        assert export.differing == 0 and export.text is not None


@pytest.mark.slow
def test_llama2_with_missing_characters_added_first(config, flores_dir, devtest, tmp_path):
    from transformers import AutoTokenizer

    base = load_tokenizer("llama-2", config.tokenizers_dir.value)
    ext = learn_extension(base, flores_corpus("th", "dev", source=flores_dir), size=150, add_missing_characters=True)
    text = "".join(flores_corpus("th", "dev", source=flores_dir).texts())
    unknown = tuple(sorted({c for c in text if c != " " and base.backend.sp.piece_to_id(c) == 0}))  # 0 = <unk>
    assert ext.pieces.missing_characters == unknown and len(unknown) == 22
    assert ext.new_tokens[:22] == unknown and ext.n_merges == 150 and ext.n_new_tokens == 172
    folder = save_extension(ext, tmp_path / "ext", lang="th")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sentencepiece"]["add_missing_characters"] is True
    assert manifest["transformers"]["probe_differing"] == 0
    hf = AutoTokenizer.from_pretrained(str(folder / "transformers"))
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    for lines in devtest.values():
        assert [hf.encode(x, add_special_tokens=False) for x in lines] == sp.encode(lines)


@pytest.fixture(scope="module")
def small(config, flores_dir, tmp_path_factory):
    base = load_tokenizer("llama-2", config.tokenizers_dir.value)
    ext = learn_extension(base, flores_corpus("th", "dev", source=flores_dir), size=30)
    return base, save_extension(ext, tmp_path_factory.mktemp("small") / "llama-2-th", lang="th")


def _thai_ledger(base, devtest, path, n: int = 6) -> Ledger:
    """``n`` items per arm of Llama 2 ids: a FLORES line then ``#### 7`` (items 0 and 3: ``#### 8``, wrong)."""
    records = []
    for arm, code in (("native", "tha_Thai"), ("translate-act", "eng_Latn")):
        for item in range(n):
            text = f"{devtest[code][item][:60]}\n#### {7 if item % 3 else 8}"  # items 0 and 3 wrong: 4/6 right
            ids = [*base.encode(text), 2]
            records.append(
                {
                    "model": "llama-2",
                    "arm": arm,
                    "lang": "tha_Thai",
                    "item": item,
                    "sample": 0,
                    "seed": 0,
                    "cap": 4096,
                    "prompt": "q",
                    "prompt_ids": [3],
                    "output_ids": ids,
                    "text": text,
                    "finish_reason": "stop",
                    "gold": 7,
                    "generator": "hand",
                    "tokenizer": "llama-2",
                }
            )
    led = Ledger(path)
    led.append(records, base)
    return led


def test_saved_extension_works_as_a_tokenizer_for_premium_and_price(small, devtest, tmp_path):
    base, folder = small
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    tok = load_tokenizer(str(folder))
    assert tok.family == "sentencepiece" and tok.vocab_size == 32_030 and tok.sha256 == manifest["tokenizer_sha256"]
    res = CliRunner().invoke(
        cli, ["premium", "--model", str(folder), "--lang", "th", "--n-boot", "50", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)[0]
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    count = {c: sum(map(len, sp.encode([unicodedata.normalize("NFC", x) for x in v]))) for c, v in devtest.items()}
    assert (row["tokens"], row["ref_tokens"]) == (count["tha_Thai"], count["eng_Latn"])
    led = _thai_ledger(base, devtest, tmp_path / "L")
    settings = PriceSettings(resampling=Resampling(50), tokenizer=base)
    p = price_ledger(led, "llama-2", lang="th", caps=[4096], extension=SavedFolds(folder), settings=settings)
    assert p.rows[0].acc_native_ext == pytest.approx(4 / 6) and p.rows[0].acc_native == pytest.approx(4 / 6)


def test_extend_command_cross_fits_a_sentencepiece_model(tmp_path):
    tiny = _tiny_model(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("abc abc\nabc ab\nbc abc\nabc bc\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["extend", "--model", str(tiny.path), "--lang", "th", "--corpus", str(corpus), "--size", "1"]
    res = CliRunner().invoke(
        cli, [*args, "--min-freq", "1", "--n-boot", "50", "--out-dir", str(out), "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["fold"] for r in rows] == [0, 1, "mean"] and all(r["transformers_tokenizer_json"] for r in rows[:2])
    for k in (0, 1):
        manifest = json.loads((out / f"fold-{k}" / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["new_tokens"] == 1 and manifest["first_new_id"] == 9 and manifest["training_items"]
        assert set(manifest["training_items"]).isdisjoint(manifest["held_out_items"])
        probe = manifest["transformers"]  # probed on the fold's own (held-out) lines, not its training lines
        assert probe["probe_on"] == "held-out" and probe["probe_texts"] == len(manifest["held_out_items"]) == 2
        assert (out / f"fold-{k}" / "tokenizer.model").is_file()
        assert (out / f"fold-{k}" / "transformers" / "tokenizer.json").is_file()
        assert load_extension(out / f"fold-{k}").tokenizer.vocab_size == 10


@pytest.mark.slow
def test_price_learns_an_extension_with_missing_characters_added(config, devtest, tmp_path):
    """``price --learn-extension --add-missing-characters`` on Llama 2 Thai traces: each fold first adds the Thai
    characters of its training traces that Llama 2 lacks (found here with sentencepiece), as ``extend`` does."""
    base = load_tokenizer("llama-2", config.tokenizers_dir.value)
    _thai_ledger(base, devtest, tmp_path / "L", n=20)
    out = tmp_path / "folds"
    args = ["price", "--ledger", str(tmp_path / "L"), "--model", "llama-2", "--lang", "th", "--cap", "4096"]
    args += ["--learn-extension", "--add-missing-characters", "--size", "5", "--no-premium", "--n-boot", "50"]
    res = CliRunner().invoke(cli, [*args, "--save-extension", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["acc_native"] == pytest.approx(13 / 20)  # items 0, 3, ..., 18 (7 of 20) wrong
    sp = base.backend.sp
    for k in (0, 1):
        manifest = json.loads((out / f"fold-{k}" / "manifest.json").read_text(encoding="utf-8"))
        texts = [f"{devtest['tha_Thai'][i][:60]}\n#### {7 if i % 3 else 8}" for i in manifest["training_items"]]
        # 0 = <unk>; the traces' newline is one of them (Llama 2 writes it as the byte <0x0A>)
        lacking = sorted({c for t in texts for c in t if c != " " and sp.piece_to_id(c) == 0})
        assert "\n" in lacking
        assert lacking and manifest["sentencepiece"]["add_missing_characters"] is True
        assert manifest["sentencepiece"]["missing_characters"] == "".join(lacking)
        assert load_extension(out / f"fold-{k}").tokenizer.vocab_size == 32_000 + len(lacking) + 5
    bad = CliRunner().invoke(cli, [*args[:9], "--extension", str(out / "fold-0"), "--add-missing-characters"])
    assert bad.exit_code == 2 and "go with --learn-extension" in bad.output


def test_ledger_import_and_score_take_a_saved_fold_folder(small, devtest, tmp_path):
    """``ledger import --tokenizer DIR`` tokenizes texts with the saved Llama 2 extension (ids checked against
    sentencepiece loading its ``tokenizer.model``) and ``score --tokenizer DIR`` reads them: 2 of 3 answers right."""
    _, folder = small
    sp = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    rows, want = [], []
    for item in range(3):
        text = f"{devtest['tha_Thai'][item][:50]}\n#### {7 if item else 8}"
        rows.append(
            {"model": "llama-2", "arm": "native", "lang": "th", "item": item, "sample": 0, "seed": 1, "cap": 4096}
            | {"prompt": "q", "text": text, "finish_reason": "stop", "gold": 7, "generator": "hand"}
        )
        want.append(sp.encode(text))
    assert any(max(ids) >= 32_000 for ids in want)  # the extension's pieces are used
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    led = tmp_path / "L"
    res = CliRunner().invoke(cli, ["ledger", "import", str(src), "--out-dir", str(led), "--tokenizer", str(folder)])
    assert res.exit_code == 0, res.output
    stored = Ledger(led).read().to_pandas().sort_values("item")
    assert [list(x) for x in stored["output_ids"]] == want
    res = CliRunner().invoke(
        cli, ["score", "--ledger", str(led), "--tokenizer", str(folder), "--budgets", "4096", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["accuracy"] == pytest.approx(2 / 3)
