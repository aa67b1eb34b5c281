"""Cross-fitting and `mindcap-tok extend`: folds never learn from their own items; outputs complete or absent."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from click.testing import CliRunner

from mindcap_tok.adaptation import assign_folds, cross_fit, learn_extension, load_crossfit, measure_effect
from mindcap_tok.adaptation import crossfit as crossfit_module
from mindcap_tok.adaptation.corpus import flores_corpus
from mindcap_tok.adaptation.saved import resolved
from mindcap_tok.cli.main import cli
from mindcap_tok.errors import MindcapError
from mindcap_tok.resample import Resampling
from mindcap_tok.tokenization.bytelevel import CHAR_TO_BYTE

THAI_CONSONANTS = [chr(c) for c in range(0x0E01, 0x0E2F)]


def run(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def as_bytes(token: str) -> bytes:
    return bytes(CHAR_TO_BYTE[c] for c in token)


def test_assign_folds_balanced_disjoint_seeded():
    ids = list(range(25))
    a = assign_folds(ids, 2, seed=0)
    assert sorted(a) == ids and sorted(a.values()).count(0) in (12, 13)
    assert assign_folds(reversed(ids), 2, seed=0) == a  # corpus order does not matter
    assert assign_folds(ids, 2, seed=1) != a
    three = assign_folds(ids, 3, seed=0)
    assert sorted(list(three.values()).count(k) for k in range(3)) == [8, 8, 9]
    with pytest.raises(MindcapError, match="at least 2 folds"):
        assign_folds(ids, 1)
    with pytest.raises(MindcapError, match="cannot split 2 items into 3 folds"):
        assign_folds([0, 1], 3)


def test_folds_never_learn_from_their_own_items(qwen):
    # every item repeats its own random 4-consonant Thai word: a fold's extension must make tokens of the
    # words of its training items, and no token may contain a word of a held-out item
    rng = random.Random(0)
    words: list[str] = []
    while len(words) < 16:
        w = "".join(rng.choice(THAI_CONSONANTS) for _ in range(4))
        if w not in words:
            words.append(w)
    # two texts per item: ids (not texts) are split, so both must land in the same fold
    corpus = [(i, " ".join([w] * 3)) for i, w in enumerate(words)] + [(i, " " + w) for i, w in enumerate(words)]
    folds = cross_fit(qwen, corpus, folds=2, seed=3, min_freq=2)
    assert [len(f.held_out) for f in folds] == [8, 8]
    for fx in folds:
        assert set(fx.held_out).isdisjoint(fx.training) and set(fx.held_out) | set(fx.training) == set(range(16))
        tokens = [as_bytes(t) for t in fx.extension.new_tokens]
        for i, w in enumerate(words):
            hits = any(w.encode() in t for t in tokens)
            assert hits == (i in fx.training), (fx.fold, i)
        assert fx.extension.corpus["n_items"] == 8


def test_cli_extend_mgsm_writes_folds_and_refuses_existing_out(qwen, config, tmp_path):
    out = tmp_path / "th-ext"
    res = run(
        [
            "extend",
            "--model",
            "qwen3-8b",
            "--lang",
            "th",
            "--corpus",
            "mgsm",
            "--size",
            "40",
            "--n-boot",
            "200",
            "--seed",
            "7",
            "--out-dir",
            str(out),
            "--format",
            "json",
        ]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["fold"] for r in rows] == [0, 1, "mean"]
    for r in rows[:2]:
        # Qwen3's Thai FLORES devtest premium, published as 2.551 (paper §6), before any extension
        assert round(r["premium_before"], 3) == 2.551
        assert r["premium_after"] < r["premium_before"] and r["premium_change_ci"][1] < 0
        assert r["new_tokens"] <= r["merges"] == 40 and abs(r["english_token_change"]) < 5e-4
        assert r["held_out_items"] + r["training_items"] == 250 and r["seconds"] > 0
    assert rows[2]["premium_after"] == pytest.approx((rows[0]["premium_after"] + rows[1]["premium_after"]) / 2)

    # the corpus hash, recomputed from the MGSM file itself
    tsv = (config.data_dir.value / "mgsm" / "mgsm_th.tsv").read_text(encoding="utf-8").rstrip("\n").split("\n")
    h = hashlib.sha256()
    for i, row in enumerate(tsv):
        h.update(json.dumps([i, row.rpartition("\t")[0]], ensure_ascii=False).encode() + b"\n")
    saved = load_crossfit(out)
    held = [set(f.held_out) for f in saved.folds]
    assert held[0].isdisjoint(held[1]) and held[0] | held[1] == set(range(250))
    for f in saved.folds:
        m = f.manifest
        assert m["corpus"]["sha256"] == h.hexdigest() and m["corpus"]["n_items"] == 250
        assert set(f.training) == set(range(250)) - set(f.held_out)
        assert m["base"]["sha256"] == qwen.sha256 and m["seed"] == 7 and m["lang"] == "tha_Thai"
        assert m["size_rule"] == {"rule": "fixed-count", "size": 40, "min_freq": 2}
        assert m["effect"]["before"]["n_boot"] == 200 and m["tokenizer_sha256"] == f.tokenizer.sha256
    assert sorted(i for f in saved.folds for i in f.held_out) == list(range(250))  # each item held out once

    again = run(["extend", "--lang", "th", "--corpus", "mgsm", "--size", "40", "--out-dir", str(out)])
    assert again.exit_code == 2 and "already exists" in again.stderr


def test_cli_without_a_size_uses_the_documented_default_rule(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("สวัสดีครับ สวัสดีครับ\n" * 4, encoding="utf-8")
    res = run(["extend", "--lang", "th", "--corpus", str(text), "--n-boot", "40", "--out-dir", str(tmp_path / "o")])
    assert res.exit_code == 0, res.stderr
    for f in load_crossfit(tmp_path / "o").folds:
        assert f.manifest["size_rule"] == {"rule": "min-freq", "size": None, "min_freq": 2}
        assert f.manifest["merges"] > 0 and f.manifest["last_merge_count"] >= 2


def test_cli_bad_input_one_line_errors(tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("สวัสดี\nสวัสดีครับ\n", encoding="utf-8")
    cases = [
        (["--corpus", str(tmp_path / "nope.txt"), "--size", "5"], "unknown corpus"),
        (["--corpus", str(small), "--size", "5000"], "supports only"),
    ]
    for extra, message in cases:
        res = run(["extend", "--lang", "th", "--n-boot", "40", "--out-dir", str(tmp_path / "o"), *extra])
        assert res.exit_code == 2 and message in res.stderr, res.stderr
        assert not (tmp_path / "o").exists()


def test_failure_while_saving_leaves_nothing(qwen, tmp_path, monkeypatch):
    folds = cross_fit(qwen, [(i, "สวัสดีครับ สวัสดี") for i in range(6)], folds=2, seed=0, size=3)
    calls = []

    def failing(ext, folder, *, manifest, held_out=()):
        calls.append(folder)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(ext, folder, manifest=manifest, held_out=held_out)

    real = crossfit_module.write_extension
    monkeypatch.setattr(crossfit_module, "write_extension", failing)
    with pytest.raises(OSError, match="disk full"):
        crossfit_module.save_crossfit(folds, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_qwen_thai_flores_dev_extension_cuts_devtest_premium(qwen, flores_dir):
    ext = learn_extension(qwen, flores_corpus("th", "dev", source=flores_dir), size=3000)
    effect = measure_effect(
        qwen, resolved(ext, "qwen3-8b+th"), lang="th", resampling=Resampling(1000), source=flores_dir
    )
    assert round(effect.before.premium, 3) == 2.551  # the paper's Qwen3 Thai premium
    assert effect.after.premium < effect.before.premium and effect.change_ci_high < 0
    assert abs(effect.english_token_change) < 5e-4
